/*
 * serve's audit records, written through the install engine's audit file.
 */
#include "install/audit.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "install/install.h"
#include "base/json.h"

/* A record is a few short fields, each cut to AUDIT_FIELD_MAX bytes (and
 * marked "truncated"), so a record always fits and is never dropped. The
 * whole line stays under install_audit's 8 KiB even when every byte of a
 * cut field is escaped six-fold (\u00XX). */
#define AUDIT_LINE_MAX 7168
#define AUDIT_FIELD_MAX 256
/* Authentication failures are folded per (code, peer address) over windows
 * of one wall-clock second, whatever methods and paths they take turns
 * with: the first of each key in a window is written, the rest counted and
 * written as one "auth.failure.repeated" record when the window is over.
 * AUDIT_FOLD_KEYS addresses, then one key per code for every other one:
 * with the two codes (auth.missing, auth.invalid) at most
 * 2 * (AUDIT_FOLD_KEYS + 2) records a second, however many requests. */
#define AUDIT_FOLD_KEYS 8
#define AUDIT_FOLD_MAX (AUDIT_FOLD_KEYS + 2)

static void
begin(struct json_w *w, const char *event)
{
	char ts[32];

	clock_iso(clock_wall_ms(), 0, ts, sizeof(ts));
	json_w_init(w, AUDIT_LINE_MAX);
	json_w_obj(w);
	json_w_kstr(w, "ts", ts);
	json_w_kstr(w, "event", event);
}

static void
finish(const struct config *cfg, struct json_w *w)
{
	json_w_end(w);
	if (!w->overflow)
		install_audit(cfg, w->buf);
	json_w_free(w);
}

/* "key": value cut to AUDIT_FIELD_MAX bytes at a UTF-8 boundary; 1 if cut. */
static int
kstr_cut(struct json_w *w, const char *key, const char *v)
{
	size_t n = strlen(v);

	if (n <= AUDIT_FIELD_MAX) {
		json_w_kstr(w, key, v);
		return 0;
	}
	n = AUDIT_FIELD_MAX;
	while (n > 0 && ((unsigned char)v[n] & 0xc0) == 0x80)
		n--;
	json_w_key(w, key);
	json_w_strn(w, v, n);
	return 1;
}

static pthread_mutex_t rep_mu = PTHREAD_MUTEX_INITIALIZER;
/* fold_n > 0, readable without the lock (audit_flush's fast path). */
static int rep_waiting;
/* The window's keys; method and path are the first's, mixed 1 once a
 * counted one differed (then the repeated record names neither). */
struct fold {
	char code[32], peer[64], addr[64], method[AUDIT_FIELD_MAX + 1], path[AUDIT_FIELD_MAX + 1];
	long n;
	int mixed;
};
static struct fold fold[AUDIT_FOLD_MAX];
static int fold_n;
static time_t fold_sec;

static void
auth_record(const struct config *cfg, const char *event, const struct fold *f, long repeated)
{
	struct json_w w;
	int cut = 0;

	begin(&w, event);
	json_w_kstr(&w, "code", f->code);
	/* a count is of the address, whatever the ports */
	cut |= kstr_cut(&w, "peer", repeated > 0 ? f->addr : f->peer);
	if (!f->mixed) {
		cut |= kstr_cut(&w, "method", f->method);
		cut |= kstr_cut(&w, "path", f->path);
	}
	if (repeated > 0)
		json_w_kint(&w, "repeated", repeated);
	if (cut)
		json_w_kbool(&w, "truncated", 1);
	finish(cfg, &w);
}

/* Take the window's counts out (under rep_mu) into out; returns how many. */
static int
fold_take(struct fold *out)
{
	int i, n = 0;

	for (i = 0; i < fold_n; i++)
		if (fold[i].n > 0)
			out[n++] = fold[i];
	fold_n = 0;
	__atomic_store_n(&rep_waiting, 0, __ATOMIC_RELEASE);
	return n;
}

static void
fold_write(const struct config *cfg, const struct fold *f, int n)
{
	int i;

	for (i = 0; i < n; i++)
		auth_record(cfg, "auth.failure.repeated", &f[i], f[i].n);
}

void
audit_auth_failure(const struct config *cfg, const char *peer, const char *method, const char *path,
                   const char *code)
{
	struct fold one, done[AUDIT_FOLD_MAX];
	const char *colon = strrchr(peer, ':');
	time_t now = time(NULL);
	int i, ndone = 0, other = 0, write_one = 1;

	memset(&one, 0, sizeof(one));
	snprintf(one.code, sizeof(one.code), "%s", code);
	snprintf(one.peer, sizeof(one.peer), "%s", peer);
	/* The key is the address without the port: a flood opens a connection
	 * each time. */
	snprintf(one.addr, sizeof(one.addr), "%.*s", colon ? (int)(colon - peer) : 63, peer);
	snprintf(one.method, sizeof(one.method), "%s", method);
	snprintf(one.path, sizeof(one.path), "%s", path);
	pthread_mutex_lock(&rep_mu);
	if (now != fold_sec)
		ndone = fold_take(done);
	fold_sec = now;
	for (i = 0; i < fold_n; i++) {
		struct fold *f = &fold[i];

		if (strcmp(f->code, one.code) != 0 ||
		    (strcmp(f->addr, one.addr) != 0 && strcmp(f->addr, "*") != 0))
			continue;
		f->n++;
		f->mixed |= strcmp(f->method, one.method) != 0 || strcmp(f->path, one.path) != 0;
		__atomic_store_n(&rep_waiting, 1, __ATOMIC_RELEASE);
		write_one = 0;
		break;
	}
	other = fold_n >= AUDIT_FOLD_KEYS;
	if (write_one && fold_n < AUDIT_FOLD_MAX) {
		fold[fold_n] = one;
		if (other) /* every other address: counted under "*" */
			snprintf(fold[fold_n].addr, sizeof(fold[fold_n].addr), "*");
		fold_n++;
	}
	pthread_mutex_unlock(&rep_mu);
	/* Written outside the lock, in order: the last window's counts, then
	 * this one when it is the first of its key. */
	fold_write(cfg, done, ndone);
	if (write_one)
		auth_record(cfg, "auth.failure", &one, 0);
}

int
audit_waiting(void)
{
	return __atomic_load_n(&rep_waiting, __ATOMIC_ACQUIRE);
}

int
audit_flush(const struct config *cfg, int force)
{
	struct fold done[AUDIT_FOLD_MAX];
	int n;

	if (!audit_waiting())
		return -1;
	pthread_mutex_lock(&rep_mu);
	if (!force && time(NULL) == fold_sec) {
		pthread_mutex_unlock(&rep_mu);
		return (int)(1000 - clock_wall_ms() % 1000) + 1;
	}
	n = fold_take(done);
	pthread_mutex_unlock(&rep_mu);
	fold_write(cfg, done, n);
	return -1;
}

void
audit_policy_denied(const struct config *cfg, const char *peer, const char *principal, const char *op,
                    const char *rule)
{
	struct json_w w;

	int cut = 0;

	begin(&w, "policy.denied");
	cut |= kstr_cut(&w, "principal", principal);
	cut |= kstr_cut(&w, "op", op);
	cut |= kstr_cut(&w, "rule", rule);
	cut |= kstr_cut(&w, "peer", peer);
	if (cut)
		json_w_kbool(&w, "truncated", 1);
	finish(cfg, &w);
}

void
audit_install_job(const struct config *cfg, const char *event, const char *principal, const char *op,
                  const char *tool, const char *job_id)
{
	struct json_w w;

	begin(&w, event);
	json_w_kstr(&w, "principal", principal);
	json_w_kstr(&w, "op", op);
	json_w_kstr(&w, "tool", tool);
	json_w_kstr(&w, "job", job_id);
	finish(cfg, &w);
}

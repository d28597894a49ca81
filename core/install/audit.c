/*
 * serve's audit records, written through the install engine's audit file.
 */
#include "install/audit.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "install/install_int.h"
#include "base/json.h"

/* A record is a few short fields, each cut to AUDIT_FIELD_MAX bytes (and
 * marked "truncated"), so a record always fits and is never dropped. The
 * whole line stays under install_audit's 8 KiB even when every byte of a
 * cut field is escaped six-fold (\u00XX). */
#define AUDIT_LINE_MAX 7168
#define AUDIT_FIELD_MAX 256
/* Authentication failures are folded over windows of one wall-clock second:
 * the first of each (code, address, method, path) in a window is written,
 * the rest counted and written as one "auth.failure.repeated" record when
 * the window is over. Past AUDIT_FOLD_KEYS keys in a window, every new one
 * counts under one key per code (peer "*"): with the two codes
 * (auth.missing, auth.invalid) at most 2 * (AUDIT_FOLD_KEYS + 2) records a
 * second, however many requests, paths and addresses. */
#define AUDIT_FOLD_KEYS 16
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

/* Guards the window; records are written under it (a few a second). */
static pthread_mutex_t rep_mu = PTHREAD_MUTEX_INITIALIZER;
/* A count waits, readable without the lock (audit_flush's fast path). */
static int rep_waiting;
/* The window's keys: addr "*" is the key of every other one of its code,
 * whose count names neither method nor path. */
struct fold {
	char code[32], addr[64], method[AUDIT_FIELD_MAX + 1], path[AUDIT_FIELD_MAX + 1];
	long n;
};
static struct fold fold[AUDIT_FOLD_MAX];
static int fold_n;
static time_t fold_sec;

static void
auth_record(const struct config *cfg, const char *event, const char *code, const char *peer,
            const char *method, const char *path, long repeated)
{
	struct json_w w;
	int cut = 0;

	begin(&w, event);
	json_w_kstr(&w, "code", code);
	cut |= kstr_cut(&w, "peer", peer);
	if (method != NULL) {
		cut |= kstr_cut(&w, "method", method);
		cut |= kstr_cut(&w, "path", path);
	}
	if (repeated > 0)
		json_w_kint(&w, "repeated", repeated);
	if (cut)
		json_w_kbool(&w, "truncated", 1);
	finish(cfg, &w);
}

/* Write the window's counts and start a new one (under rep_mu). A count is
 * of the address, whatever the ports. */
static void
fold_flush(const struct config *cfg)
{
	int i;

	for (i = 0; i < fold_n; i++) {
		struct fold *f = &fold[i];
		int other = strcmp(f->addr, "*") == 0;

		if (f->n > 0)
			auth_record(cfg, "auth.failure.repeated", f->code, f->addr, other ? NULL : f->method,
			            f->path, f->n);
	}
	fold_n = 0;
	__atomic_store_n(&rep_waiting, 0, __ATOMIC_RELEASE);
}

void
audit_auth_failure(const struct config *cfg, const char *peer, const char *method, const char *path,
                   const char *code)
{
	const char *colon = strrchr(peer, ':');
	char addr[64];
	time_t now = time(NULL);
	struct fold *f = NULL;
	int i;

	/* The address without the port: a flood opens a connection each time. */
	snprintf(addr, sizeof(addr), "%.*s", colon ? (int)(colon - peer) : 63, peer);
	pthread_mutex_lock(&rep_mu);
	if (now != fold_sec)
		fold_flush(cfg);
	fold_sec = now;
	for (i = 0; i < fold_n && f == NULL; i++)
		if (strcmp(fold[i].code, code) == 0 &&
		    (strcmp(fold[i].addr, "*") == 0 ||
		     (strcmp(fold[i].addr, addr) == 0 &&
		      strncmp(fold[i].method, method, AUDIT_FIELD_MAX) == 0 &&
		      strncmp(fold[i].path, path, AUDIT_FIELD_MAX) == 0)))
			f = &fold[i];
	if (f != NULL) {
		f->n++;
		__atomic_store_n(&rep_waiting, 1, __ATOMIC_RELEASE);
	} else if (fold_n < AUDIT_FOLD_MAX) {
		f = &fold[fold_n++];
		memset(f, 0, sizeof(*f));
		snprintf(f->code, sizeof(f->code), "%s", code);
		snprintf(f->addr, sizeof(f->addr), "%s", fold_n > AUDIT_FOLD_KEYS ? "*" : addr);
		snprintf(f->method, sizeof(f->method), "%s", method);
		snprintf(f->path, sizeof(f->path), "%s", path);
		f = NULL;
	}
	if (f == NULL)
		auth_record(cfg, "auth.failure", code, peer, method, path, 0);
	pthread_mutex_unlock(&rep_mu);
}

int
audit_waiting(void)
{
	return __atomic_load_n(&rep_waiting, __ATOMIC_ACQUIRE);
}

int
audit_flush(const struct config *cfg, int force)
{
	int ms = -1;

	if (!audit_waiting())
		return -1;
	pthread_mutex_lock(&rep_mu);
	if (!force && time(NULL) == fold_sec)
		ms = (int)(1000 - clock_wall_ms() % 1000) + 1;
	else
		fold_flush(cfg);
	pthread_mutex_unlock(&rep_mu);
	return ms;
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

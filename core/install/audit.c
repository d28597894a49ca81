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
/* Identical auth failures (same code, peer address, method and path) within
 * this many seconds of the last one written are counted, not written: the
 * next one written, or the summary record when another comes first, carries
 * the count. A flood of wrong tokens costs one line a second, not one each. */
#define AUDIT_REPEAT_S 1

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
/* rep.suppressed > 0, readable without the lock (audit_flush's fast path). */
static int rep_waiting;
static struct {
	char key[4 * AUDIT_FIELD_MAX + 64]; /* code, address, method, path of the last written */
	char peer[64], method[AUDIT_FIELD_MAX + 1], path[AUDIT_FIELD_MAX + 1], code[32];
	time_t at;
	long suppressed;
} rep;

static void
auth_record(const struct config *cfg, const char *event, const char *code, const char *peer,
            const char *method, const char *path, long repeated)
{
	struct json_w w;
	int cut = 0;

	begin(&w, event);
	json_w_kstr(&w, "code", code);
	cut |= kstr_cut(&w, "peer", peer);
	cut |= kstr_cut(&w, "method", method);
	cut |= kstr_cut(&w, "path", path);
	if (repeated > 0)
		json_w_kint(&w, "repeated", repeated);
	if (cut)
		json_w_kbool(&w, "truncated", 1);
	finish(cfg, &w);
}

void
audit_auth_failure(const struct config *cfg, const char *peer, const char *method, const char *path,
                   const char *code)
{
	char key[sizeof(rep.key)];
	const char *colon = strrchr(peer, ':');
	time_t now = time(NULL);
	long repeated = 0, flush = 0;
	char fpeer[64], fmethod[AUDIT_FIELD_MAX + 1], fpath[AUDIT_FIELD_MAX + 1], fcode[32];

	/* The address without the port: a flood opens a connection each time. */
	snprintf(key, sizeof(key), "%s|%.*s|%.*s|%.*s", code, colon ? (int)(colon - peer) : 64, peer,
	         AUDIT_FIELD_MAX, method, AUDIT_FIELD_MAX, path);
	pthread_mutex_lock(&rep_mu);
	if (strcmp(key, rep.key) == 0 && now - rep.at < AUDIT_REPEAT_S) {
		rep.suppressed++;
		__atomic_store_n(&rep_waiting, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&rep_mu);
		return;
	}
	if (strcmp(key, rep.key) == 0) {
		repeated = rep.suppressed;
	} else if (rep.suppressed > 0) {
		/* Another record comes first: say how many of the last were
		 * counted, with their fields. */
		flush = rep.suppressed;
		snprintf(fpeer, sizeof(fpeer), "%s", rep.peer);
		snprintf(fmethod, sizeof(fmethod), "%s", rep.method);
		snprintf(fpath, sizeof(fpath), "%s", rep.path);
		snprintf(fcode, sizeof(fcode), "%s", rep.code);
	}
	snprintf(rep.key, sizeof(rep.key), "%s", key);
	snprintf(rep.peer, sizeof(rep.peer), "%s", peer);
	snprintf(rep.method, sizeof(rep.method), "%s", method);
	snprintf(rep.path, sizeof(rep.path), "%s", path);
	snprintf(rep.code, sizeof(rep.code), "%s", code);
	rep.at = now;
	rep.suppressed = 0;
	__atomic_store_n(&rep_waiting, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rep_mu);
	if (flush > 0)
		auth_record(cfg, "auth.failure.repeated", fcode, fpeer, fmethod, fpath, flush);
	auth_record(cfg, "auth.failure", code, peer, method, path, repeated);
}

int
audit_waiting(void)
{
	return __atomic_load_n(&rep_waiting, __ATOMIC_ACQUIRE);
}

int
audit_flush(const struct config *cfg, int force)
{
	char fpeer[64], fmethod[AUDIT_FIELD_MAX + 1], fpath[AUDIT_FIELD_MAX + 1], fcode[32];
	long n;

	if (!audit_waiting())
		return -1;
	pthread_mutex_lock(&rep_mu);
	if (rep.suppressed == 0 || (!force && time(NULL) - rep.at < AUDIT_REPEAT_S)) {
		n = rep.suppressed;
		pthread_mutex_unlock(&rep_mu);
		return n > 0 ? 1000 : -1;
	}
	n = rep.suppressed;
	snprintf(fpeer, sizeof(fpeer), "%s", rep.peer);
	snprintf(fmethod, sizeof(fmethod), "%s", rep.method);
	snprintf(fpath, sizeof(fpath), "%s", rep.path);
	snprintf(fcode, sizeof(fcode), "%s", rep.code);
	rep.suppressed = 0;
	/* The next identical failure starts a record of its own. */
	rep.key[0] = '\0';
	__atomic_store_n(&rep_waiting, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rep_mu);
	auth_record(cfg, "auth.failure.repeated", fcode, fpeer, fmethod, fpath, n);
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

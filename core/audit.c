/*
 * serve's audit records, written through the install engine's audit file.
 */
#include "audit.h"

#include <stdio.h>
#include <time.h>

#include "install.h"
#include "json.h"

/* A record is a few short fields; over this it is dropped, not cut. */
#define AUDIT_LINE_MAX 4096

void
audit_time(char *buf, size_t cap)
{
	struct tm tm;
	time_t t = time(NULL);

	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void
begin(struct json_w *w, const char *event)
{
	char ts[32];

	audit_time(ts, sizeof(ts));
	json_w_init(w, AUDIT_LINE_MAX);
	json_w_obj(w);
	json_w_kstr(w, "ts", ts);
	json_w_kstr(w, "event", event);
}

static void
finish(const struct install_settings *s, struct json_w *w)
{
	json_w_end(w);
	if (!w->overflow)
		install_audit(s, w->buf);
	json_w_free(w);
}

void
audit_auth_failure(const struct install_settings *s, const char *peer, const char *method, const char *path,
                   const char *code)
{
	struct json_w w;

	begin(&w, "auth.failure");
	json_w_kstr(&w, "code", code);
	json_w_kstr(&w, "peer", peer);
	json_w_kstr(&w, "method", method);
	json_w_kstr(&w, "path", path);
	finish(s, &w);
}

void
audit_policy_denied(const struct install_settings *s, const char *peer, const char *principal, const char *op,
                    const char *rule)
{
	struct json_w w;

	begin(&w, "policy.denied");
	json_w_kstr(&w, "principal", principal);
	json_w_kstr(&w, "op", op);
	json_w_kstr(&w, "rule", rule);
	json_w_kstr(&w, "peer", peer);
	finish(s, &w);
}

void
audit_install_job(const struct install_settings *s, const char *event, const char *principal, const char *op,
                  const char *tool, const char *job_id)
{
	struct json_w w;

	begin(&w, event);
	json_w_kstr(&w, "principal", principal);
	json_w_kstr(&w, "op", op);
	json_w_kstr(&w, "tool", tool);
	json_w_kstr(&w, "job", job_id);
	finish(s, &w);
}

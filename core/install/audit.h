#ifndef ABX_AUDIT_H
#define ABX_AUDIT_H
/*
 * Audit records of serve: one JSON line per security-relevant
 * event, appended with one write(2) to the audit file the install engine
 * also writes (install_audit: config audit_file, else <state dir>/
 * audit.jsonl when the state directory exists). Install start and finish
 * and unpinned installs are the engine's records (with the principal and
 * op a job passes it); these are serve's own. A record never contains a
 * token: callers pass principals, peers, paths and codes only.
 */
#include "install/tools.h"

/* auth.missing / auth.invalid: who (peer), what (method, path without the
 * query string, which may carry anything). Fields over 256 bytes are cut
 * and the record marked "truncated": true; a record is never dropped.
 * Failures identical in code, peer address, method and path within one
 * wall-clock second are folded: the first is written, the rest counted into
 * one "auth.failure.repeated" record with "repeated": N, written when the
 * second is over. Past 16 keys in a second every other failure of a code
 * counts under peer "*": at most 36 records a second, and 1 + the repeated
 * counts is exactly the number of failures. */
void audit_auth_failure(const struct config *cfg, const char *peer, const char *method, const char *path,
                        const char *code);

/* Write the "auth.failure.repeated" records of failures counted and not
 * yet written: with force, at once (at shutdown); else only once their
 * second is over. Returns the ms after
 * which to call again while a count waits, or -1 when none waits. */
int audit_flush(const struct config *cfg, int force);
/* 1 while a count waits for audit_flush (one atomic load). */
int audit_waiting(void);

/* policy.denied: principal, op, and the rule that denied it. */
void audit_policy_denied(const struct config *cfg, const char *peer, const char *principal, const char *op,
                         const char *rule);

/* An install a request triggered or joined: job id, tool, principal, op. */
void audit_install_job(const struct config *cfg, const char *event, const char *principal, const char *op,
                       const char *tool, const char *job_id);

#endif

/*
 * The API's tokens (see api.h): how a request presents one, the principal
 * it names, the check every request but /health passes (api_gate, and
 * again in api_handle), the generated token file of the default principal,
 * and the audit records of failures a fold holds back (api_tick).
 */
#include "server/api_int.h"
#include "base/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "config/config.h"
#include "install/audit.h"

static int
token_chars_ok(const char *t, size_t n)
{
	size_t i;

	if (n == 0 || n > API_TOKEN_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return 0;
	return 1;
}

int
api_token_from(const char *xt, int n_x, const char *au, int n_auth, const char **tok, size_t *len)
{
	const char *bt = NULL;
	size_t bn = 0, xn = 0;

	*tok = NULL;
	*len = 0;
	if (n_x > 1 || n_auth > 1)
		return -1;
	if (xt == NULL && au == NULL)
		return 0;
	if (au != NULL) {
		/* RFC 9110 §11.1: the scheme is case-insensitive; then one or
		 * more spaces, then the token68. */
		if (strncasecmp(au, "Bearer", 6) != 0 || (au[6] != ' ' && au[6] != '\t'))
			return strncasecmp(au, "Bearer", 6) != 0 ? -2 : -1;
		bt = au + 6;
		while (*bt == ' ' || *bt == '\t')
			bt++;
		bn = strlen(bt);
		if (!token_chars_ok(bt, bn))
			return -1;
	}
	if (xt != NULL) {
		xn = strlen(xt);
		if (!token_chars_ok(xt, xn))
			return -1;
	}
	if (xt != NULL && bt != NULL) {
		if (xn != bn || !ct_equal(xt, bt, xn))
			return -1;
	}
	*tok = xt != NULL ? xt : bt;
	*len = xt != NULL ? xn : bn;
	return 1;
}

const char *
api_principal(struct api *a, const struct policy *p, const char *tok, size_t len)
{
	const struct pol_principal *pp;
	struct digest d;

	digest_buf(DIGEST_SHA256, tok, len, &d);
	pp = policy_principal_for_digest(p, d.v);
	if (pp == NULL && a != NULL && a->tf != NULL && tokfile_match(a->tf, d.v))
		return "default";
	return pp != NULL ? pp->name : NULL;
}

int
api_authenticate(struct api_rq *q)
{
	const struct httpd_req *r = q->req;
	const char *tok, *code = NULL;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];
	size_t len;
	int rc;

	err_keep_details(&e, ed, sizeof(ed));
	/* Not initialised: the same 503 with or without a token, so nothing
	 * is audited before there is a credential to fail against. */
	if (q->a->tf != NULL && tokfile_ready(q->a->tf, &e) != 0) {
		q->route = R_UNAUTHORIZED;
		api_rq_err(q, &e);
		return -1;
	}
	rc = api_token_from(httpd_req_header(r, "X-Access-Token"),
	                    httpd_req_header_count(r, "X-Access-Token"), httpd_req_header(r, "Authorization"),
	                    httpd_req_header_count(r, "Authorization"), &tok, &len);
	if (rc == 0)
		code = "auth.missing";
	else if (rc < 0 || (q->principal = api_principal(q->a, &q->g->pol, tok, len)) == NULL)
		code = "auth.invalid";
	if (code == NULL)
		return 0;
	q->route = R_UNAUTHORIZED;
	audit_auth_failure(&q->g->cfg, r->peer, r->method, r->path, code);
	api_count(q->a, &q->a->m.auth_failures);
	err_clear(&e);
	e.code = code;
	if (rc == -2) /* the scheme, whatever the token: nothing about the token is said */
		snprintf(e.msg, sizeof(e.msg),
		         "the Authorization scheme is not Bearer: send Authorization: Bearer <token>, or "
		         "X-Access-Token: <token>");
	httpd_resp_header(q->resp, "WWW-Authenticate", "Bearer");
	api_rq_err(q, &e);
	return -1;
}

/* The server core's owner of a principal's requests (struct httpd_req
 * owner): a hash of its name, so each principal's share of the request
 * slots is bounded; 0 (no share) when one principal holds every token. */
static uint64_t
owner_of(const struct policy *p, const char *principal)
{
	uint64_t h = 14695981039346656037ull;
	int i, with_tokens = 0;

	for (i = 0; i < p->n; i++)
		with_tokens += p->p[i].ntokens > 0;
	if (with_tokens < 2 || principal == NULL)
		return 0;
	for (; *principal; principal++)
		h = (h ^ (unsigned char)*principal) * 1099511628211ull;
	return h | 1;
}

int
api_gate(struct httpd_req *req, const struct httpd_route *route, struct httpd_resp *resp, void *arg)
{
	struct api_rq q;
	int rc;

	memset(&q, 0, sizeof(q));
	q.t0 = clock_us();
	q.a = arg;
	q.req = req;
	q.resp = resp;
	q.g = api_gen_get(q.a);
	rc = api_authenticate(&q);
	if (rc != 0)
		api_rq_record(&q);
	else
		req->owner = owner_of(&q.g->pol, q.principal);
	api_gen_put(q.a, q.g);
	return rc;
}

int
api_policy_has_tokens(const struct policy *p)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (p->p[i].ntokens > 0)
			return 1;
	return 0;
}

static int
hex_token_ok(const char *t)
{
	size_t i, n = strlen(t);

	if (n != 2 * API_TOKEN_BYTES)
		return 0;
	for (i = 0; i < n; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
			return 0;
	return 1;
}

/* The token file under the state directory's descriptor dfd. */
static int
token_at(int dfd, const char *path, char *tok, struct err *e)
{
	unsigned char r[API_TOKEN_BYTES];
	char buf[2 * API_TOKEN_BYTES + 8];
	struct stat st;
	ssize_t n;
	int fd;

	fd = openat(dfd, "token", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    (st.st_mode & 077) != 0) {
			close(fd);
			return err_set(e, "config.state_dir_unsafe",
			               "%s: the token file must be a regular file owned by us with mode 0600",
			               path);
		}
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
		buf[n] = '\0';
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		if (!hex_token_ok(buf))
			return err_set(e, "config.invalid",
			               "%s: not a token written by serve (64 hex digits)", path);
		memcpy(tok, buf, (size_t)n + 1);
		return 0;
	}
	if (errno == ELOOP)
		return err_set(e, "config.state_dir_unsafe", "%s is a symbolic link, not a token file", path);
	if (errno != ENOENT)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return err_sys(e, "io.error", errno, "getrandom: %s", strerror(errno));
	hex_encode(r, sizeof(r), tok);
	explicit_bzero(r, sizeof(r));
	memcpy(buf, tok, 2 * API_TOKEN_BYTES);
	buf[2 * API_TOKEN_BYTES] = '\n';
	if (fs_write_atomic_at(dfd, "token", buf, 2 * API_TOKEN_BYTES + 1, 0600, path, e) != 0) {
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

int
api_token_file(const char *state_dir, char *tok, size_t cap, char *path, size_t pcap, struct err *e)
{
	int dfd, rc;

	if (cap < 2 * API_TOKEN_BYTES + 1)
		return err_set(e, "internal", "token buffer too small");
	if (fs_path_join(path, pcap, state_dir, "token", NULL) != 0)
		return err_set(e, "config.invalid", "state directory path too long: %s", state_dir);
	/* Opened without following a link another user could have made: a
	 * root serve with --base-dir /home/user must not write its token
	 * where the home directory's owner points it. */
	if ((dfd = fs_dir_open_safe(state_dir, 1, e)) < 0)
		return -1;
	rc = token_at(dfd, path, tok, e);
	close(dfd);
	return rc;
}

int
api_tick(void *arg)
{
	struct api *a = arg;
	struct api_gen *g;
	int ms;

	if (!audit_waiting())
		return -1;
	g = api_gen_get(a);
	ms = audit_flush(&g->cfg, 0);
	api_gen_put(a, g);
	return ms;
}

void
api_flush_audit(struct api *a)
{
	struct api_gen *g;

	if (!audit_waiting())
		return;
	g = api_gen_get(a);
	audit_flush(&g->cfg, 1);
	api_gen_put(a, g);
}

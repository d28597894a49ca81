/*
 * The API's tokens (see api.h): how a request presents one, the principal
 * it names, and the generated token file of the default principal.
 */
#include "server/api_int.h"

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
			return -1;
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
api_principal(const struct policy *p, const char *tok, size_t len)
{
	const struct pol_principal *pp;
	struct digest d;

	digest_buf(DIGEST_SHA256, tok, len, &d);
	pp = policy_principal_for_digest(p, d.v);
	return pp != NULL ? pp->name : NULL;
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

int
api_token_file(const char *state_dir, char *tok, size_t cap, char *path, size_t pcap, struct err *e)
{
	unsigned char r[API_TOKEN_BYTES];
	char buf[2 * API_TOKEN_BYTES + 8];
	struct stat st;
	ssize_t n;
	size_t i;
	int fd;

	if (cap < 2 * API_TOKEN_BYTES + 1)
		return err_set(e, "internal", "token buffer too small");
	if ((size_t)snprintf(path, pcap, "%s/token", state_dir) >= pcap)
		return err_set(e, "config.invalid", "state directory path too long: %s", state_dir);
	if (fs_mkdir_p(state_dir, 0700, e) != 0)
		return -1;
	if (fs_dir_safe(state_dir, e) != 0)
		return -1;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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
			return err_set(e, "io.error", "%s: %s", path, strerror(errno));
		buf[n] = '\0';
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		if (!hex_token_ok(buf))
			return err_set(e, "config.invalid",
			               "%s: not a token written by serve (64 hex digits)", path);
		memcpy(tok, buf, (size_t)n + 1);
		return 0;
	}
	if (errno != ENOENT)
		return err_set(e, "io.error", "%s: %s", path, strerror(errno));
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return err_set(e, "io.error", "getrandom: %s", strerror(errno));
	for (i = 0; i < sizeof(r); i++)
		snprintf(tok + 2 * i, 3, "%02x", r[i]);
	explicit_bzero(r, sizeof(r));
	memcpy(buf, tok, 2 * API_TOKEN_BYTES);
	buf[2 * API_TOKEN_BYTES] = '\n';
	if (fs_write_atomic(path, buf, 2 * API_TOKEN_BYTES + 1, 0600, e) != 0) {
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

const char *
api_suggest(const struct api_gen *g, const char *principal, const char *word, int want_agent)
{
	const char *cand[OPS_MAX];
	struct pol_decision *d = malloc(sizeof(*d));
	const char *inst[OP_INSTALL_MAX];
	int i, k, n = 0;

	if (d == NULL)
		return NULL;
	for (i = 0; i < g->ops.n && n < OPS_MAX; i++) {
		const struct op *op = &g->ops.v[i];
		if (want_agent && op->kind != OP_AGENT)
			continue;
		for (k = 0; k < op->ninstall; k++)
			inst[k] = op->install[k];
		if (policy_decide(&g->pol, principal, op->id, inst, op->ninstall, d))
			cand[n++] = want_agent ? op->agent : op->id;
	}
	free(d);
	return config_did_you_mean(word, cand, n);
}

/*
 * A manifest's verify.argv, run on a staged or installed tree: its PATH
 * (the requirements' bin directories, then the system's), its argv (a
 * JavaScript entry through node-runtime's node), the scrubbed environment,
 * and the identity a recorded pass is sealed with (install_verified_get).
 */
#include "install/install_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "config/config.h"
#include "install/launch.h"
#include "pkg/npm.h"
#include "pkg/npmlock.h"

/* A require the run uses, into the identity: "require <name> <version>
 * <tree sha256>" of the tree the fast path proved against its marker. A
 * copy on PATH or from ABX_TOOL_<NAME> is nobody's tree: no identity. */
static void
ident_require(struct verify_run *v, const char *name, const struct install_result *r)
{
	struct install_marker mk;
	struct err e = {0};
	char line[MANIFEST_NAME_MAX + MANIFEST_VERSION_MAX + 100];
	size_t n = strlen(v->ident), w = strlen(v->with);

	if (r->from_path || r->from_env || r->dir[0] == '\0' ||
	    install_marker_read(r->dir, name, &mk, &e) < 0) {
		v->no_ident = 1;
		return;
	}
	snprintf(line, sizeof(line), "require %s %s %s\n", name, mk.version, mk.tree_sha256);
	if (strstr(v->ident, line) != NULL)
		return;
	snprintf(v->ident + n, sizeof(v->ident) - n, "%s", line);
	snprintf(v->with + w, sizeof(v->with) - w, "%s %s %s", w ? "," : " with", name, mk.version);
}

/* PATH for verify: the bin directories of the tool's requires (so a
 * JavaScript tool's verify finds node), then the system directories. */
static void
verify_path(struct install_env *c, const manifest_t *m, struct verify_run *v)
{
	size_t off = 0, cap = sizeof(v->path);
	char *buf = v->path;
	int i;

	buf[0] = '\0';
	for (i = 0; i < m->nrequires; i++) {
		struct install_result r;
		struct err e = {0};
		const manifest_t *dm = manifest_get(c->ms, m->requires[i].name, &e);
		char d[PATH_MAX];
		memset(&r, 0, sizeof(r));
		if (dm == NULL)
			continue;
		if (install_fast_path(c, dm, &r, &e) != 1 &&
		    !install_path_tool(c, dm, m->requires[i].min, &r)) {
			v->no_ident = 1;
			continue;
		}
		ident_require(v, dm->name, &r);
		if (fs_dirname(r.entry, d, sizeof(d)) == 0)
			off += (size_t)snprintf(buf + off, off < cap ? cap - off : 0, "%s:", d);
	}
	if (off < cap)
		snprintf(buf + off, cap - off,
		         "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

/* The verify spec (argv, expect, env) as one digest, and the platform and
 * libc it ran for: the start of the identity. */
static void
ident_spec(struct install_env *c, const manifest_t *m, struct verify_run *v)
{
	struct digest_ctx dc;
	struct digest d;
	char hex[DIGEST_HEX_MAX];
	const char *libc = npmlock_detect_libc(NULL);
	int i;

	digest_init(&dc, DIGEST_SHA256);
	digest_update(&dc, "argv", 5);
	for (i = 0; i < m->verify.argv.n; i++)
		digest_update(&dc, m->verify.argv.v[i], strlen(m->verify.argv.v[i]) + 1);
	digest_update(&dc, "expect", 7);
	digest_update(&dc, m->verify.expect, strlen(m->verify.expect) + 1);
	digest_update(&dc, "env", 4);
	for (i = 0; i < m->verify.nenv; i++) {
		digest_update(&dc, m->verify.env[i].name, strlen(m->verify.env[i].name) + 1);
		digest_update(&dc, m->verify.env[i].value, strlen(m->verify.env[i].value) + 1);
	}
	digest_final(&dc, &d);
	snprintf(v->ident, sizeof(v->ident), "installer %s\nverify %s\nplatform %s\nlibc %s\n",
	         INSTALL_INSTALLER, digest_hex(&d, hex), c->platform, libc ? libc : "none");
}

/* PATH, argv and identity of m's verify run for the tree's entry. */
void
install_verify_setup(struct install_env *c, const manifest_t *m, const char *entry, struct verify_run *v)
{
	int n;

	ident_spec(c, m, v);
	verify_path(c, m, v);
	install_subst_bin(&m->verify.argv, entry, v->words, v->argv);
	/* A JavaScript entry is checked as it will run (core/install/launch.h):
	 * through node-runtime's node, installed before it as a require. */
	if (strcmp(v->argv[0], entry) == 0 &&
	    npm_js_entry(entry, v->shebang, sizeof(v->shebang), v->flags, &v->nflags) == 1) {
		struct install_result *nr = malloc(sizeof(*nr));
		struct err ne = {0};
		const manifest_t *nm = manifest_get(c->ms, "node-runtime", &ne);

		if (nr != NULL && nm != NULL && manifest_supports(nm, c->platform) &&
		    install_found(c, nm, NULL, 1, nr, &ne)) {
			snprintf(v->node, sizeof(v->node), "%s", nr->entry);
			ident_require(v, "node-runtime", nr);
			n = 0;
			while (v->argv[n] != NULL)
				n++;
			memcpy(v->rest, v->argv + 1, (size_t)n * sizeof(*v->argv));
			if (launch_argv(v->argv, MANIFEST_MAX_ARGV + NPM_NODE_FLAGS_MAX + 2, v->node,
			                v->flags, v->nflags, entry, v->rest, n - 1) < 0)
				v->argv[0] = (char *)entry;
		} else {
			v->no_ident = 1;
		}
		free(nr);
	}
	if (v->no_ident)
		v->ident[0] = '\0';
}

int
install_verify_run(const manifest_t *m, struct verify_run *v, const char *home, struct err *e)
{
	char *out = malloc(INSTALL_VERIFY_OUT_MAX);
	int st;

	if (out == NULL)
		return err_set(e, "internal", "out of memory");
	err_clear(e);
	st = install_run_env(v->argv, v->path, home, m->verify.env, m->verify.nenv, m->verify.timeout, out,
	                     INSTALL_VERIFY_OUT_MAX, e);
	if (st == 127 && e->code != NULL) {
		/* it did not start: the whole reason, not a program's output cut short */
		err_set(e, "install.failed", "%s %s: verify.argv did not start: %s", m->name, m->version,
		        e->msg);
		install_details_phase(e, "verify");
		free(out);
		return -1;
	}
	if (st != 0 || (m->verify.expect[0] && strstr(out, m->verify.expect) == NULL)) {
		char *nl;
		for (nl = out; *nl; nl++)
			if (*nl == '\n' || *nl == '\r')
				*nl = ' ';
		if (st == 128 + SIGKILL)
			err_set(e, "install.failed", "%s %s: verify timed out after %d s", m->name,
			        m->version, m->verify.timeout);
		else if (st != 0)
			err_set(e, "install.failed", "%s %s: verify exited %d: %.120s", m->name, m->version,
			        st, out);
		else
			err_set(e, "install.failed", "%s %s: verify output lacks \"%s\": %.120s", m->name,
			        m->version, m->verify.expect, out);
		install_details_phase(e, "verify");
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

int
install_verify_argv(struct install_env *c, const manifest_t *m, const char *tree, struct err *e)
{
	char entry[PATH_MAX], home[PATH_MAX];
	const char *tmp = config_env("TMPDIR");
	struct verify_run *v = calloc(1, sizeof(*v));
	int rc;

	if (v == NULL)
		return err_set(e, "internal", "out of memory");
	if (fs_path_join(entry, sizeof(entry), tree, m->source.bin, e) < 0) {
		free(v);
		return -1;
	}
	if (tmp == NULL || tmp[0] != '/')
		tmp = "/tmp";
	/* mkdtemp's template: the six X are replaced by the call */
	if (fs_path_join(home, sizeof(home), tmp, "abx-verify-XXXXXX", e) < 0) {
		free(v);
		return -1;
	}
	if (mkdtemp(home) == NULL) {
		int er = errno;

		free(v);
		return err_sys(
		    e, "io.error", er,
		    "verify.argv runs with a scratch HOME made in %s, which failed (%s): create %s "
		    "(mode 1777), or set TMPDIR to a writable directory",
		    tmp, strerror(er), tmp);
	}
	install_verify_setup(c, m, entry, v);
	rc = install_verify_run(m, v, home, e);
	fs_rm_tree(home, NULL);
	free(v);
	return rc;
}

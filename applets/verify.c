/*
 * verify: prove later that nothing changed since install. Re-hashes every
 * published tree against the listing recorded at install and names what
 * differs; --sbom prints what is installed as CycloneDX 1.5; FILE --sha256
 * checks one file.
 */
#include "common.h"

#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "opts.h"
#include "tooling.h"

struct verify_opts {
	struct tooling *t;
	const char *sha;
	int sbom;
};

#define O(f) offsetof(struct verify_opts, f)
static const struct opt options[] = {
    TOOLING_OPT_JSON(O(t)),
    OPT(0, "sbom", NULL, NULL, O(sbom)),
    OPT(0, "sha256", "HEX", NULL, O(sha)),
    TOOLING_OPT_WHERE(O(t)),
    TOOLING_OPT_QV(O(t)),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "verify", "verify.txt", options, -1, EXIT_USAGE, NULL,
};

#define VERIFY_MAX_TOOLS 128
#define VERIFY_MAX_DIFFS 20

/* One line of a listing: the path is the last field. */
static const char *
line_path(const char *l, const char *end)
{
	int f = 0;
	const char *p = l;

	while (p < end && f < 4) {
		if (*p == ' ')
			f++;
		p++;
	}
	return p;
}

/*
 * Compare two listings (both sorted the same way) and describe up to
 * VERIFY_MAX_DIFFS differences: "changed bin/node", "added x", "removed y".
 */
static int
diff_lists(const char *old, const char *cur, struct json_w *w, int print, const char *tool)
{
	const char *a = old, *b = cur;
	int n = 0;

	while ((*a || *b) && n < VERIFY_MAX_DIFFS) {
		const char *ae = strchr(a, '\n'), *be = strchr(b, '\n'), *ap, *bp;
		size_t al, bl;
		int c;

		if (ae == NULL)
			ae = a + strlen(a);
		if (be == NULL)
			be = b + strlen(b);
		ap = line_path(a, ae);
		bp = line_path(b, be);
		al = (size_t)(ae - ap);
		bl = (size_t)(be - bp);
		if (!*a)
			c = 1;
		else if (!*b)
			c = -1;
		else {
			c = strncmp(ap, bp, al < bl ? al : bl);
			if (c == 0 && al != bl)
				c = al < bl ? -1 : 1;
		}
		if (c == 0) {
			if ((size_t)(ae - a) != (size_t)(be - b) || memcmp(a, b, (size_t)(ae - a)) != 0) {
				{
					char msg[600];
					snprintf(msg, sizeof(msg), "changed %.*s", (int)al, ap);
					json_w_str(w, msg);
					if (print)
						printf("  %s: %s\n", tool, msg);
				}
				n++;
			}
			a = *ae ? ae + 1 : ae;
			b = *be ? be + 1 : be;
		} else if (c < 0) {
			char msg[600];
			snprintf(msg, sizeof(msg), "removed %.*s", (int)al, ap);
			json_w_str(w, msg);
			if (print)
				printf("  %s: %s\n", tool, msg);
			n++;
			a = *ae ? ae + 1 : ae;
		} else {
			char msg[600];
			snprintf(msg, sizeof(msg), "added %.*s", (int)bl, bp);
			json_w_str(w, msg);
			if (print)
				printf("  %s: %s\n", tool, msg);
			n++;
			b = *be ? be + 1 : be;
		}
	}
	return n;
}

struct found {
	char dir[PATH_MAX];
	char name[MANIFEST_NAME_MAX];
};

/* Every tool with a marker in the chain (first directory wins), or the
 * named ones. */
static int
collect(struct tooling *t, char **names, int nnames, struct found *out, int cap)
{
	const struct tools_chain *ch = install_env_chain(t->env);
	struct err e = {0};
	int i, j, n = 0, k;

	for (i = 0; i < ch->n; i++) {
		char **dn;
		size_t nd, x;
		if (fs_dir_names(AT_FDCWD, ch->d[i].path, "io.error", &dn, &nd, &e) != 0)
			continue;
		for (x = 0; x < nd && n < cap; x++) {
			char p[PATH_MAX];
			if (dn[x][0] == '.' || strcmp(dn[x], "bin") == 0)
				continue;
			if (tool_path(p, sizeof(p), ch->d[i].path, dn[x], ".installed.json", NULL) != 0 ||
			    access(p, F_OK) != 0)
				continue;
			for (k = 0; k < n; k++)
				if (strcmp(out[k].name, dn[x]) == 0)
					break;
			if (k < n)
				continue;
			if (nnames > 0) {
				for (j = 0; j < nnames; j++)
					if (strcmp(names[j], dn[x]) == 0)
						break;
				if (j == nnames)
					continue;
			}
			/* a name longer than a manifest's is no tool of ours */
			if ((size_t)snprintf(out[n].name, sizeof(out[n].name), "%s", dn[x]) >=
			    sizeof(out[n].name))
				continue;
			snprintf(out[n].dir, sizeof(out[n].dir), "%s", ch->d[i].path);
			n++;
		}
		free(dn);
	}
	/* sorted by name, so the output is stable */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && strcmp(out[j - 1].name, out[j].name) > 0; j--) {
			struct found tmp = out[j];
			out[j] = out[j - 1];
			out[j - 1] = tmp;
		}
	return n;
}

static int
verify_file(const char *file, const char *hex)
{
	struct digest want, got;
	char h[DIGEST_HEX_MAX];
	struct err e = {0};

	if (digest_parse_hex(DIGEST_SHA256, hex, &want, "usage", &e) < 0)
		return fail(&e);
	if (digest_file(DIGEST_SHA256, file, &got, NULL, &e) < 0)
		return fail(&e);
	if (!digest_equal(&want, &got)) {
		digest_hex(&got, h);
		err_printf("install.checksum_mismatch", "%s: expected sha256 %s, got %s", file, hex, h);
		return EXIT_FAIL;
	}
	printf("%s: OK\n", file);
	return EXIT_OK;
}

static int
sbom(struct tooling *t, struct found *f, int n)
{
	struct json_w w;
	char ts[32], serial[64], rnd[40];
	int i;

	clock_iso(clock_wall_ms(), 0, ts, sizeof(ts));
	memset(rnd, 0, sizeof(rnd));
	{
		unsigned char b[16] = {0};
		char h[33];
		/* from the kernel at each use, like every random value made here */
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			memset(b, 0, sizeof(b));
		b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
		b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
		hex_encode(b, sizeof(b), h);
		snprintf(serial, sizeof(serial), "urn:uuid:%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12,
		         h + 16, h + 20);
	}
	json_w_init(&w, 16u << 20);
	json_w_obj(&w);
	json_w_kstr(&w, "bomFormat", "CycloneDX");
	json_w_kstr(&w, "specVersion", "1.5");
	json_w_kstr(&w, "serialNumber", serial);
	json_w_kint(&w, "version", 1);
	json_w_key(&w, "metadata");
	json_w_obj(&w);
	json_w_kstr(&w, "timestamp", ts);
	json_w_key(&w, "tools");
	json_w_obj(&w);
	json_w_key(&w, "components");
	json_w_arr(&w);
	json_w_obj(&w);
	json_w_kstr(&w, "type", "application");
	json_w_kstr(&w, "name", "agent-sandbox-server");
#ifdef ABX_VERSION
	json_w_kstr(&w, "version", ABX_VERSION);
#endif
	json_w_end(&w);
	json_w_end(&w);
	json_w_end(&w);
	json_w_end(&w);
	json_w_key(&w, "components");
	json_w_arr(&w);
	for (i = 0; i < n; i++) {
		char p[PATH_MAX], *buf = NULL;
		size_t len;
		struct json_doc doc = {0};
		struct err e = {0};
		const struct json_val *rows;
		size_t r;

		if (tool_path(p, sizeof(p), f[i].dir, f[i].name, ".installed.json", &e) != 0 ||
		    fs_read_alloc(p, INSTALL_MARKER_MAX, &buf, &len, &e) < 0)
			continue;
		if (json_parse(&doc, buf, len, NULL, &e) < 0) {
			free(buf);
			continue;
		}
		rows = json_get(doc.root, "sbom");
		for (r = 0; rows && rows->type == JSON_ARRAY && r < rows->u.arr.n; r++) {
			const struct json_val *row = &rows->u.arr.v[r];
			const char *sha = json_get_str(row, "sha256"), *url = json_get_str(row, "url");
			const char *integ = json_get_str(row, "integrity");
			json_w_obj(&w);
			json_w_kstr(&w, "type", "application");
			snprintf(p, sizeof(p), "%s@%s", f[i].name,
			         json_get_str(row, "version") ? json_get_str(row, "version") : "");
			/* npm rows: many packages per tool, each purl unique */
			json_w_kstr(&w, "bom-ref",
			            json_get_str(row, "purl") && rows->u.arr.n > 1 ? json_get_str(row, "purl")
			                                                           : p);
			json_w_kstr(&w, "name",
			            json_get_str(row, "name") ? json_get_str(row, "name") : f[i].name);
			json_w_kstr(&w, "version",
			            json_get_str(row, "version") ? json_get_str(row, "version") : "");
			if (json_get_str(row, "purl"))
				json_w_kstr(&w, "purl", json_get_str(row, "purl"));
			if (sha != NULL || integ != NULL) {
				json_w_key(&w, "hashes");
				json_w_arr(&w);
				if (sha != NULL) {
					json_w_obj(&w);
					json_w_kstr(&w, "alg", "SHA-256");
					json_w_kstr(&w, "content", sha);
					json_w_end(&w);
				}
				json_w_end(&w);
			}
			if (json_get_str(row, "source") != NULL) {
				/* where the installed bytes came from (a cache, a
				 * mirror, the registry, the origin) */
				json_w_key(&w, "properties");
				json_w_arr(&w);
				json_w_obj(&w);
				json_w_kstr(&w, "name", "agent-sandbox:source");
				json_w_kstr(&w, "value", json_get_str(row, "source"));
				json_w_end(&w);
				json_w_end(&w);
			}
			if (url != NULL) {
				json_w_key(&w, "externalReferences");
				json_w_arr(&w);
				json_w_obj(&w);
				json_w_kstr(&w, "type", "distribution");
				json_w_kstr(&w, "url", url);
				json_w_end(&w);
				json_w_end(&w);
			}
			json_w_end(&w);
		}
		json_free(&doc);
		free(buf);
	}
	json_w_end(&w);
	json_w_end(&w);
	if (w.overflow) {
		json_w_free(&w);
		err_printf("internal", "SBOM larger than 16 MiB");
		return EXIT_FAIL;
	}
	printf("%s\n", w.buf);
	json_w_free(&w);
	(void)t;
	return EXIT_OK;
}

/* The recorded listing against the tree as it is now: each change into w
 * (and printed when text output). */
static void
tree_changes(const struct tooling *t, const struct found *f, const char *cur, struct json_w *w, struct err *e)
{
	char lp[PATH_MAX], *old = NULL;
	size_t ol = 0;

	if (cur == NULL) {
		json_w_str(w, "tree missing or unreadable");
		if (!t->json)
			printf("  %s: tree missing or unreadable: %s\n", f->name, e->msg);
	} else if (tool_path(lp, sizeof(lp), f->dir, f->name, ".installed.files", e) == 0 &&
	           fs_read_alloc(lp, 64u << 20, &old, &ol, e) == 0) {
		if (diff_lists(old, cur, w, !t->json, f->name) == 0) {
			json_w_str(w, "listing differs from the marker's digest");
			if (!t->json)
				printf("  %s: the recorded listing does not match the marker\n", f->name);
		}
	} else {
		json_w_str(w, "content differs (no listing recorded)");
		if (!t->json)
			printf("  %s: content differs\n", f->name);
	}
	free(old);
}

/* One installed tool: its marker, tree digest and manifest digest; its
 * JSON entry into w and, unless --json, an OK/DRIFT/BROKEN line. Returns 1
 * when it drifted or is broken, else 0. */
static int
verify_tool(struct tooling *t, const struct found *f, struct json_w *w)
{
	struct install_marker mk;
	char tree[PATH_MAX], hex[65], *cur = NULL;
	size_t cl = 0;
	const manifest_t *m;
	struct err e = {0};
	int tree_ok = 0, manifest_ok = 1, argv_ok = -1;
	struct err ve = {0};

	json_w_obj(w);
	json_w_kstr(w, "name", f->name);
	json_w_kstr(w, "dir", f->dir);
	if (install_marker_read(f->dir, f->name, &mk, &e) < 0) {
		json_w_kstr(w, "state", "broken");
		json_w_kstr(w, "error", e.msg);
		json_w_end(w);
		if (!t->json)
			printf("BROKEN %s: %s\n", f->name, e.msg);
		return 1;
	}
	json_w_kstr(w, "version", mk.version);
	if (tool_path(tree, sizeof(tree), f->dir, f->name, mk.tree, &e) == 0 &&
	    install_tree_list(tree, &cur, &cl, hex, NULL, NULL, &e) == 0)
		tree_ok = strcmp(hex, mk.tree_sha256) == 0;
	m = manifest_get(&t->ms, f->name, &e);
	if (m != NULL && strcmp(m->sha256, mk.manifest_sha256) != 0)
		manifest_ok = 0;
	/* an unchanged tree is run too, always: a pass recorded at install
	 * is never taken for one now */
	if (tree_ok && manifest_ok && m != NULL)
		argv_ok = install_verify_argv(t->env, m, tree, &ve) == 0;
	json_w_kstr(w, "state", !(tree_ok && manifest_ok) ? "drift" : argv_ok ? "ok" : "verify_failed");
	json_w_kbool(w, "tree_ok", tree_ok);
	json_w_kbool(w, "manifest_ok", manifest_ok);
	if (argv_ok >= 0)
		json_w_kbool(w, "verify_argv_ok", argv_ok);
	json_w_key(w, "changes");
	json_w_arr(w);
	if (!t->json)
		printf("%s %s %s (%s)%s\n",
		       !(tree_ok && manifest_ok) ? "DRIFT"
		       : argv_ok                 ? "OK"
		                                 : "FAILED",
		       f->name, mk.version, tree, argv_ok == 1 ? ", verify.argv passed" : "");
	if (argv_ok == 0) {
		json_w_str(w, ve.msg);
		if (!t->json)
			printf("  %s: %s\n", f->name, ve.msg);
	}
	if (!manifest_ok) {
		json_w_str(w, "manifest changed since install (prepare reinstalls it)");
		if (!t->json)
			printf("  %s: manifest changed since install (prepare reinstalls it)\n", f->name);
	}
	if (!tree_ok)
		tree_changes(t, f, cur, w, &e);
	json_w_end(w);
	json_w_end(w);
	free(cur);
	return !tree_ok || !manifest_ok || argv_ok == 0;
}

/* Every tool named on the command line is among the n found; else the
 * first that is not is named. Returns 0 or -1. */
static int
all_found(char **names, int nnames, const struct found *f, int n)
{
	int i, k;

	for (i = 0; i < nnames; i++) {
		for (k = 0; k < n; k++)
			if (strcmp(f[k].name, names[i]) == 0)
				break;
		if (k == n) {
			err_printf("not_found", "%s is not installed in any tools directory", names[i]);
			return -1;
		}
	}
	return 0;
}

int
verify_main(int argc, char **argv)
{
	static struct tooling t;
	static struct found f[VERIFY_MAX_TOOLS];
	struct verify_opts o = {&t, NULL, 0};
	char **names, absdir[PATH_MAX];
	int nnames, n, i, drifted = 0, rc;
	struct json_w w;
	struct err e = {0};

	memset(&t, 0, sizeof(t));
	if ((rc = opts_parse(&usage, argc, argv, &o, &nnames)) >= 0)
		return rc;
	names = argv + 1;
	if (o.sha != NULL) {
		if (nnames != 1)
			return opts_error(&usage, "--sha256 checks exactly one FILE");
		return verify_file(names[0], o.sha);
	}
	if (t.tools_dir != NULL && t.tools_dir[0] != '/' && realpath(t.tools_dir, absdir) != NULL)
		t.tools_dir = absdir;
	if (tooling_open(&t, 0, NULL, &e) < 0)
		return tooling_fail(&t, &e);
	n = collect(&t, names, nnames, f, VERIFY_MAX_TOOLS);
	if (all_found(names, nnames, f, n) != 0) {
		tooling_close(&t);
		return EXIT_FAIL;
	}
	if (o.sbom) {
		rc = sbom(&t, f, n);
		tooling_close(&t);
		return rc;
	}
	json_w_init(&w, 4u << 20);
	json_w_obj(&w);
	json_w_key(&w, "tools");
	json_w_arr(&w);
	for (i = 0; i < n; i++)
		drifted += verify_tool(&t, &f[i], &w);
	json_w_end(&w);
	json_w_kbool(&w, "ok", drifted == 0);
	json_w_end(&w);
	if (t.json)
		printf("%s\n", w.buf);
	json_w_free(&w);
	tooling_close(&t);
	return drifted ? EXIT_PARTIAL : EXIT_OK;
}

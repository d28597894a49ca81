/*
 * fetch --only NAME... [--platform P|all] [--cache DIR], and prepare
 * --cache-only: every artifact the named tools (and their requires) need,
 * verified, into the content-addressed cache, without installing. A cache
 * filled on a connected CI machine is what a sandbox in mode offline
 * installs from, or a mirror directory.
 */
#include "common.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "fetch_cache.h"
#include "fetch_push.h"
#include "opts.h"
#include "prepare_plan.h"
#include "tooling.h"

/* The command line: the tooling flags and fetch_cache's arguments. */
struct cache_cmd {
	struct tooling *t;
	struct fetch_cache_args *a;
};

static int
set_only(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	struct fetch_cache_args *a = ((struct cache_cmd *)dst)->a;

	if (a->nnames >= FETCH_CACHE_MAX)
		return err_set(e, "usage", "more than %d tools", FETCH_CACHE_MAX);
	a->names[a->nnames++] = (char *)arg;
	return 0;
}

static int
set_push(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	if (fetch_push_check(arg, e) != 0)
		return -1;
	((struct cache_cmd *)dst)->a->push = arg;
	return 0;
}

#define O(f) offsetof(struct cache_cmd, f)
static const struct opt options[] = {
    OPT_MANY("only", "NAME...", set_only),
    OPT(0, "platform", "P", tooling_set, O(t)),
    TOOLING_OPT_CACHE(O(t)),
    OPT(0, "push", "oci://HOST[:PORT]/REPO", set_push, 0),
    TOOLING_OPT_WHERE(O(t)),
    TOOLING_OPT_JSON(O(t)),
    TOOLING_OPT_QV(O(t)),
    OPT_END,
};
#undef O

const struct opts fetch_cache_usage = {
    "fetch", "fetch-cache.txt", options, 0, EXIT_USAGE, NULL,
};

/* 1 when argv asks for the cache-filling form of fetch. */
int
fetch_cache_wanted(int argc, char **argv)
{
	int i, cache = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			break;
		if (strncmp(a, "--only", 6) == 0 && (a[6] == '\0' || a[6] == '='))
			return 1;
	}
	/* fetch --platform all --cache DIR (no URL): the configuration's tools. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--push") == 0 || strncmp(argv[i], "--push=", 7) == 0) {
			i += argv[i][6] == '\0';
			cache = 1;
			continue;
		}
		if (strstr(argv[i], "://") != NULL || strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0)
			return 0;
		if (strncmp(argv[i], "--platform", 10) == 0 || strncmp(argv[i], "--cache", 7) == 0)
			cache = 1;
	}
	return cache;
}

int
fetch_cache_options(int argc, char **argv, struct tooling *t, struct fetch_cache_args *a, char **names)
{
	struct cache_cmd c = {t, a};
	int n;

	memset(t, 0, sizeof(*t));
	memset(a, 0, sizeof(*a));
	a->flags = t;
	a->names = names;
	return opts_parse(&fetch_cache_usage, argc, argv, &c, &n);
}

/* Relative --tools-dir and --cache become absolute (the install context
 * keeps them), into the caller's absdir and abscache. Returns 0, or the
 * exit code of a usage error. */
static int
absolute_dirs(struct tooling *t, char *absdir, char *abscache, size_t cap)
{
	if (t->tools_dir != NULL && t->tools_dir[0] != '/' && realpath(t->tools_dir, absdir) != NULL)
		t->tools_dir = absdir;
	if (t->cache != NULL && t->cache[0] != '/') {
		if (getcwd(abscache, cap - strlen(t->cache) - 2) == NULL)
			return opts_error(&fetch_cache_usage, "cannot resolve --cache %s", t->cache);
		strcat(abscache, "/");
		strcat(abscache, t->cache);
		t->cache = abscache;
	}
	return 0;
}

/* Open the tooling and put the requires closure of the wanted tools into
 * names[0..*n). Returns 0, or the exit code after printing why (t closed). */
static int
open_closure(struct tooling *t, char **only, int nonly, char names[][MANIFEST_NAME_MAX], int *n)
{
	struct err e = {0};
	int i;

	if (tooling_open(t, 1, NULL, &e) < 0)
		return tooling_fail(t, &e);
	if (install_env_cache_dir(t->env)[0] == '\0') {
		err_set(&e, "install.read_only", "no writable cache directory; use --cache DIR");
		tooling_close(t);
		return fail(&e);
	}
	for (i = 0; i < nonly; i++)
		if (manifest_closure_add(&t->ms, only[i], names, n, FETCH_CACHE_MAX, &e) < 0) {
			tooling_close(t);
			if (e.code && strcmp(e.code, "install.manifest_invalid") == 0) {
				err_print(&e);
				return EXIT_USAGE;
			}
			if (e.code && strcmp(e.code, "not_found") == 0) {
				err_set(&e, "usage", "%s", e.msg);
			}
			return fail(&e);
		}
	return 0;
}

struct tally {
	int count, failed;
};

/* A failed artifact: in the JSON entry, and on stderr unless --json. */
static void
report_failure(struct tooling *t, struct json_w *w, struct tally *n, const struct err *e)
{
	n->failed++;
	tooling_json_error(w, e);
	if (!t->json)
		err_print(e);
}

/* npm-lock: every package of the lockfile for the platform (all: every
 * platform's), into the same cache. */
static void
fetch_npm_tool(struct tooling *t, const manifest_t *m, struct json_w *w, struct tally *n,
               struct fetch_push *push)
{
	const char *plat = t->platform ? t->platform : manifest_platform_self();
	struct install_npm_info ni;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	json_w_obj(w);
	json_w_kstr(w, "name", m->name);
	json_w_kstr(w, "version", m->version);
	json_w_kstr(w, "platform", plat);
	memset(&ni, 0, sizeof(ni));
	if (install_npm_fetch(t->env, &t->rq, m, plat, &ni, &t->counts, &e) == 0) {
		n->count += (int)(ni.fetched + ni.cached); /* the packages, as the line below */
		if (push != NULL)
			fetch_push_npm(push, t, m, plat);
		if (!t->quiet && !t->json && ni.skipped > 0)
			printf("%s %s npm packages: %zu downloaded, %zu cached, %zu skipped (for another "
			       "os, cpu or C library than %s)\n",
			       m->name, m->version, ni.fetched, ni.cached, ni.skipped,
			       strcmp(plat, "all") == 0 ? "linux-x64 and linux-arm64" : plat);
		else if (!t->quiet && !t->json)
			printf("%s %s npm packages: %zu downloaded, %zu cached\n", m->name, m->version,
			       ni.fetched, ni.cached);
	} else {
		report_failure(t, w, n, &e);
	}
	json_w_end(w);
}

/* A tarball source: its artifact for each platform asked (all: every one
 * the manifest lists). */
static void
fetch_tarball_tool(struct tooling *t, const manifest_t *m, struct json_w *w, struct tally *n,
                   struct fetch_push *push)
{
	const char *plats[2];
	int p, np = 0;

	if (t->platform != NULL && strcmp(t->platform, "all") == 0) {
		for (p = 0; p < m->source.nart && np < 2; p++)
			plats[np++] = m->source.art[p].platform;
	} else {
		plats[np++] = t->platform ? t->platform : manifest_platform_self();
	}
	for (p = 0; p < np; p++) {
		const struct manifest_artifact *a = manifest_artifact(m, plats[p]);
		char path[PATH_MAX], ed[ERR_DETAILS_MAX];
		struct err e = {0};
		int rc;

		err_keep_details(&e, ed, sizeof(ed));
		json_w_obj(w);
		json_w_kstr(w, "name", m->name);
		json_w_kstr(w, "version", m->version);
		json_w_kstr(w, "platform", plats[p]);
		if (a == NULL) {
			err_set(&e, "install.failed", "%s has no artifact for %s", m->name, plats[p]);
			rc = -1;
		} else {
			json_w_kstr(w, "url", a->url);
			json_w_kstr(w, "sha256", a->sha256);
			rc = install_cache_artifact(t->env, &t->rq, m, a, path, sizeof(path), &t->counts, &e);
		}
		if (rc == 0) {
			n->count++;
			if (push != NULL)
				fetch_push_artifact(push, m, plats[p], a, path);
			json_w_kstr(w, "path", path);
			if (!t->quiet && !t->json)
				printf("%s %s %s: %s\n", m->name, m->version, plats[p], path);
		} else {
			report_failure(t, w, n, &e);
		}
		json_w_end(w);
	}
}

/* The pushed tool's manifest: a line (or a JSON entry) per tool; a failure
 * counts as the tool's. */
static void
push_tool(struct tooling *t, struct fetch_push *p, const manifest_t *m, struct json_w *w, struct tally *n)
{
	char tag[OCI_TAG_MAX] = "";
	struct err e = {0};
	int rc;

	if (p->nlayers == 0 && !p->failed)
		return; /* the fetch failed: already reported */
	rc = fetch_push_tool_end(p, m, tag, &e);
	json_w_obj(w);
	json_w_kstr(w, "name", m->name);
	json_w_kstr(w, "version", m->version);
	json_w_kbool(w, "ok", rc == 0);
	if (rc == 0) {
		json_w_kstr(w, "tag", tag);
		json_w_kint(w, "blobs", p->nlayers);
		if (!t->quiet && !t->json)
			printf("%s %s: pushed to %s:%s (%d blob(s))\n", m->name, m->version, p->ref.repo, tag,
			       p->nlayers);
	} else {
		report_failure(t, w, n, &e);
	}
	json_w_end(w);
}

int
fetch_cache(const struct fetch_cache_args *a)
{
	static struct tooling t;
	char *only[FETCH_CACHE_MAX], names[FETCH_CACHE_MAX][MANIFEST_NAME_MAX], absdir[PATH_MAX],
	    abscache[PATH_MAX];
	int nonly = a->nnames < FETCH_CACHE_MAX ? a->nnames : FETCH_CACHE_MAX, n = 0, i, rc;
	struct tally tally = {0, 0};
	static struct fetch_push push;
	struct prepare_plan *plan = NULL; /* without names: lives until exit */
	struct json_w w, pw;
	struct err e = {0};

	if (a->flags->ms_open || a->flags->env != NULL) {
		err_printf("internal", "fetch_cache: the tooling is already open");
		return EXIT_FAIL;
	}
	t = *a->flags;
	for (i = 0; i < nonly; i++)
		only[i] = a->names[i];
	if ((rc = absolute_dirs(&t, absdir, abscache, sizeof(abscache))) != 0)
		return rc;
	if (nonly == 0) {
		struct prepare_plan_opts po = {
		    .config = t.config, .manifests = t.manifests, .tools_dir = t.tools_dir};
		po.no_path = 1;
		if (t.platform != NULL && manifest_platform_known(t.platform))
			po.platform = t.platform;
		if (prepare_plan_names(&po, 0, 0, only, &nonly, FETCH_CACHE_MAX, &rc, &plan) != 0)
			return rc;
		t.loaded = prepare_plan_config(plan);
		if (prepare_plan_take_manifests(plan, t.platform, &t.ms))
			t.ms_open = 1;
		if (nonly == 0) {
			if (t.json)
				tooling_json_empty("artifacts");
			else if (!t.quiet)
				fprintf(stderr, "fetch: the configuration needs no tool\n");
			return EXIT_OK;
		}
	}
	if ((rc = open_closure(&t, only, nonly, names, &n)) != 0)
		return rc;
	/* fetching is for connected machines: the install mode does not apply */
	t.cfg->install.mode = CFG_MODE_LAZY;
	if (a->push != NULL && fetch_push_open(&push, a->push, &t, &e) != 0) {
		fetch_push_close(&push);
		tooling_close(&t);
		return fail(&e);
	}
	json_w_init(&pw, 1 << 20);
	json_w_arr(&pw);
	if (!t.quiet && !t.json)
		t.obs.progress = tooling_progress;
	t.rq.obs = &t.obs;
	json_w_init(&w, 1 << 20);
	json_w_obj(&w);
	json_w_kstr(&w, "cache", install_env_cache_dir(t.env));
	json_w_key(&w, "artifacts");
	json_w_arr(&w);
	for (i = 0; i < n; i++) {
		const manifest_t *m = manifest_get(&t.ms, names[i], &e);
		if (m == NULL)
			continue;
		if (a->push != NULL)
			fetch_push_tool_begin(&push);
		if (m->source.type != MANIFEST_SRC_TARBALL)
			fetch_npm_tool(&t, m, &w, &tally, a->push ? &push : NULL);
		else
			fetch_tarball_tool(&t, m, &w, &tally, a->push ? &push : NULL);
		if (a->push != NULL)
			push_tool(&t, &push, m, &pw, &tally);
	}
	json_w_end(&w);
	if (a->push != NULL) {
		json_w_end(&pw);
		json_w_key(&w, "push");
		json_w_raw(&w, pw.buf);
		json_w_free(&pw);
		if (!t.quiet && !t.json)
			fprintf(stderr, "fetch: %s: %d blob(s) uploaded, %d already there, %d manifest(s)\n",
			        a->push, push.uploaded, push.present, push.manifests);
		fetch_push_close(&push);
	}
	json_w_kint(&w, "downloads", t.counts.downloads);
	json_w_kbool(&w, "ok", tally.failed == 0);
	json_w_end(&w);
	if (t.json)
		printf("%s\n", w.buf);
	else if (!t.quiet)
		fprintf(stderr, "fetch: %d artifact(s) in %s, %d downloaded, %d failed\n", tally.count,
		        install_env_cache_dir(t.env), t.counts.downloads, tally.failed);
	json_w_free(&w);
	tooling_close(&t);
	return tally.failed ? (tally.count ? EXIT_PARTIAL : EXIT_FAIL) : EXIT_OK;
}

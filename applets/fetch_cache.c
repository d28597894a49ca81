/*
 * fetch --only NAME... [--platform P|all] [--cache DIR]: every artifact the
 * named tools (and their requires) need, verified, into the content-
 * addressed cache, without installing (SPEC §8). A cache filled on a
 * connected CI machine is what a sandbox in mode offline installs from, or
 * a mirror directory.
 */
#include "common.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/json.h"
#include "prepare_plan.h"
#include "tooling.h"

static const char usage[] =
	"usage: agent-sandbox-server fetch [--only NAME...] [--platform P|all] [--cache DIR]\n"
	"                                 [--config FILE] [--manifests DIR] [--tools-dir DIR]\n"
	"                                 [--json] [-q] [-v]\n"
	"\n"
	"Without --only, the tools are those `prepare --dry-run` plans from the\n"
	"configuration (a PATH copy on this machine does not count: the cache is for\n"
	"another one).\n"
	"Download every artifact the named tools and their requires need into the\n"
	"content-addressed cache (files named by sha256), verified, without\n"
	"installing. Artifacts already in the cache are re-hashed, not downloaded.\n"
	"\n"
	"  --only NAME...     the tools (repeatable; several names may follow)\n"
	"  --platform P       linux-x64, linux-arm64, or all (default: this machine)\n"
	"  --cache DIR        the cache (default <first writable tools directory>/.cache)\n"
	"  --json             one JSON document on stdout\n";

#define FETCH_MAX 64

/* 1 when argv asks for the cache-filling form (fetch.c dispatches here). */
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
		if (strstr(argv[i], "://") != NULL || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 0;
		if (strncmp(argv[i], "--platform", 10) == 0 || strncmp(argv[i], "--cache", 7) == 0)
			cache = 1;
	}
	return cache;
}

int
fetch_cache_main(int argc, char **argv)
{
	enum { O_ONLY = 256, O_PLATFORM, O_CACHE, O_CONFIG, O_MANIFESTS, O_TOOLS, O_JSON };
	static const struct option opts[] = {
		{"only", required_argument, NULL, O_ONLY},
		{"platform", required_argument, NULL, O_PLATFORM},
		{"cache", required_argument, NULL, O_CACHE},
		{"config", required_argument, NULL, O_CONFIG},
		{"manifests", required_argument, NULL, O_MANIFESTS},
		{"tools-dir", required_argument, NULL, O_TOOLS},
		{"json", no_argument, NULL, O_JSON},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static struct tooling t;
	char *only[FETCH_MAX], names[FETCH_MAX][MANIFEST_NAME_MAX], absdir[PATH_MAX], abscache[PATH_MAX];
	const char *plats[2];
	int c, nonly = 0, n = 0, i, p, np, failed = 0, count = 0;
	struct json_w w;
	struct err e;

	memset(&t, 0, sizeof(t));
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", opts, NULL)) != -1) {
		switch (c) {
		case O_ONLY:
			if (nonly >= FETCH_MAX)
				return usage_error("fetch", usage, "more than %d tools", FETCH_MAX);
			only[nonly++] = optarg;
			while (optind < argc && argv[optind][0] != '-' && nonly < FETCH_MAX)
				only[nonly++] = argv[optind++];
			break;
		case O_PLATFORM: t.platform = optarg; break;
		case O_CACHE: t.cache = optarg; break;
		case O_CONFIG: t.config = optarg; break;
		case O_MANIFESTS: t.manifests = optarg; break;
		case O_TOOLS: t.tools_dir = optarg; break;
		case O_JSON: t.json = 1; break;
		case 'q': t.quiet = 1; break;
		case 'v': t.verbose = 1; break;
		case 'h': return usage_help(usage);
		default: return bad_option("fetch", usage, argc, argv);
		}
	}
	if (optind < argc)
		return usage_error("fetch", usage, "unexpected argument %s", argv[optind]);
	if (nonly == 0) {
		struct prepare_plan_opts po = {t.config, t.manifests, t.tools_dir, NULL, NULL, NULL, NULL, 1};
		int rc;
		if (prepare_plan_names(&po, 0, 0, only, &nonly, FETCH_MAX, &rc) != 0)
			return rc;
		if (nonly == 0) {
			if (t.json)
				printf("{\"artifacts\":[],\"ok\":true}\n");
			else if (!t.quiet)
				fprintf(stderr, "fetch: the configuration needs no tool\n");
			return EXIT_OK;
		}
	}
	if (t.tools_dir != NULL && t.tools_dir[0] != '/' && realpath(t.tools_dir, absdir) != NULL)
		t.tools_dir = absdir;
	if (t.cache != NULL && t.cache[0] != '/') {
		if (getcwd(abscache, sizeof(abscache) - strlen(t.cache) - 2) == NULL)
			return usage_error("fetch", usage, "cannot resolve --cache %s", t.cache);
		strcat(abscache, "/");
		strcat(abscache, t.cache);
		t.cache = abscache;
	}
	if (tooling_open(&t, 1, NULL, &e) < 0) {
		return tooling_fail(&t, &e);
	}
	if (t.ctx.cache_dir[0] == '\0') {
		/* no writable tools directory yet: create the default one */
		err_set(&e, "install.read_only", "no writable cache directory; use --cache DIR");
		tooling_close(&t);
		return fail(&e);
	}
	/* fetching is for connected machines: the install mode does not apply */
	t.set.mode = CFG_MODE_LAZY;
	if (!t.quiet && !t.json)
		t.ctx.progress = tooling_progress;
	for (i = 0; i < nonly; i++)
		if (manifest_closure_add(&t.ms, only[i], names, &n, FETCH_MAX, &e) < 0) {
			tooling_close(&t);
			if (e.code && strcmp(e.code, "install.manifest_invalid") == 0) {
				err_print(&e);
				return EXIT_USAGE;
			}
			if (e.code && strcmp(e.code, "not_found") == 0) {
				char msg[ERR_MSG_MAX];
				snprintf(msg, sizeof(msg), "%s", e.msg);
				err_set(&e, "usage", "%s", msg);
			}
			return fail(&e);
		}
	json_w_init(&w, 1 << 20);
	json_w_obj(&w);
	json_w_kstr(&w, "cache", t.ctx.cache_dir);
	json_w_key(&w, "artifacts");
	json_w_arr(&w);
	for (i = 0; i < n; i++) {
		const manifest_t *m = manifest_get(&t.ms, names[i], &e);
		np = 0;
		if (m == NULL)
			continue;
		if (t.platform != NULL && strcmp(t.platform, "all") == 0) {
			for (p = 0; p < m->source.nart && np < 2; p++)
				plats[np++] = m->source.art[p].platform;
		} else {
			plats[np++] = t.platform ? t.platform : manifest_platform_self();
		}
		if (m->source.type != MANIFEST_SRC_TARBALL) {
			/* npm-lock: every package of the lockfile for the platform
			 * (all: every platform's), into the same cache */
			struct install_npm_info ni;
			const char *plat = t.platform ? t.platform : manifest_platform_self();
			json_w_obj(&w);
			json_w_kstr(&w, "name", m->name);
			json_w_kstr(&w, "version", m->version);
			json_w_kstr(&w, "platform", t.platform ? t.platform : manifest_platform_self());
			memset(&ni, 0, sizeof(ni));
			if (install_npm_fetch(&t.ctx, m, plat, &ni, &e) == 0) {
				count++;
				if (!t.quiet && !t.json && ni.skipped > 0)
					printf("%s %s npm packages: %zu downloaded, %zu cached, %zu not for %s\n", m->name,
					       m->version, ni.fetched, ni.cached, ni.skipped, plat);
				else if (!t.quiet && !t.json)
					printf("%s %s npm packages: %zu downloaded, %zu cached\n", m->name, m->version,
					       ni.fetched, ni.cached);
			} else {
				failed++;
				tooling_json_error(&w, &e);
				if (!t.json)
					err_print(&e);
			}
			json_w_end(&w);
			continue;
		}
		for (p = 0; p < np; p++) {
			const struct manifest_artifact *a = manifest_artifact(m, plats[p]);
			char path[PATH_MAX];
			int rc;

			json_w_obj(&w);
			json_w_kstr(&w, "name", m->name);
			json_w_kstr(&w, "version", m->version);
			json_w_kstr(&w, "platform", plats[p]);
			if (a == NULL) {
				err_set(&e, "install.failed", "%s has no artifact for %s", m->name, plats[p]);
				rc = -1;
			} else {
				json_w_kstr(&w, "url", a->url);
				json_w_kstr(&w, "sha256", a->sha256);
				rc = install_cache_artifact(&t.ctx, m, a, path, sizeof(path), &e);
			}
			if (rc == 0) {
				count++;
				json_w_kstr(&w, "path", path);
				if (!t.quiet && !t.json)
					printf("%s %s %s: %s\n", m->name, m->version, plats[p], path);
			} else {
				failed++;
				tooling_json_error(&w, &e);
				if (!t.json)
					err_print(&e);
			}
			json_w_end(&w);
		}
	}
	json_w_end(&w);
	json_w_kint(&w, "downloads", t.ctx.downloads);
	json_w_kbool(&w, "ok", failed == 0);
	json_w_end(&w);
	if (t.json)
		printf("%s\n", w.buf);
	else if (!t.quiet)
		fprintf(stderr, "fetch: %d artifact(s) in %s, %d downloaded, %d failed\n", count, t.ctx.cache_dir,
			t.ctx.downloads, failed);
	json_w_free(&w);
	tooling_close(&t);
	return failed ? (count ? EXIT_PARTIAL : EXIT_FAIL) : EXIT_OK;
}

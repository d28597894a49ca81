/*
 * prepare: install tools at image build with the same algorithm as a first
 * use at run time (pinned digests, lock, staging, verify, atomic publish),
 * so an image and a lazy sandbox end with the same tree. The tools are the
 * ones named by --only and their requires, or without --only the ones the
 * configuration's callable operations need (applets/prepare_plan.c).
 */
#include "common.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"
#include "fetch_cache.h"
#include "opts.h"
#include "prepare_plan.h"
#include "tooling.h"

#define PREPARE_MAX 64

/* What the command line asks for besides the tooling flags. */
struct prepare_args {
	struct tooling *t;
	char *only[PREPARE_MAX];
	int nonly;
	int force, dry, cache_only, keep_cache, prune;
	struct prepare_plan_opts po;
	struct prepare_plan *plan; /* without --only: its configuration is t's too */
};

static int
set_only(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	struct prepare_args *a = dst;

	if (a->nonly >= PREPARE_MAX)
		return err_set(e, "usage", "more than %d tools", PREPARE_MAX);
	a->only[a->nonly++] = (char *)arg;
	return 0;
}

#define O(f) offsetof(struct prepare_args, f)
static const struct opt options[] = {
    OPT_MANY("only", "NAME...", set_only),
    OPT(0, "force", NULL, NULL, O(force)),
    OPT(0, "dry-run", NULL, NULL, O(dry)),
    OPT(0, "cache-only", NULL, NULL, O(cache_only)),
    OPT(0, "keep-cache", NULL, NULL, O(keep_cache)),
    OPT(0, "prune", NULL, NULL, O(prune)),
    OPT(0, "policy", "FILE", NULL, O(po.policy)),
    OPT(0, "preset", "NAME", NULL, O(po.preset)),
    OPT(0, "commands", "FILE", NULL, O(po.commands)),
    TOOLING_OPT_JSON(O(t)),
    TOOLING_OPT_WHERE(O(t)),
    TOOLING_OPT_STATE(O(t)),
    TOOLING_OPT_CACHE(O(t)),
    OPT(0, "platform", "P", tooling_set, O(t)),
    TOOLING_OPT_QV(O(t)),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "prepare", "prepare.txt", options, 0, EXIT_USAGE, NULL,
};

/* Tools installed at once (each on a thread of its own, its requires
 * beside it): downloads overlap extraction and hashing on another core. */
#define PREPARE_PARALLEL 2

struct item {
	char name[MANIFEST_NAME_MAX];
	char why[MANIFEST_NAME_MAX + 16]; /* "requested", "required by X" */
	int requested;
	/* while installing (install_items) */
	uint64_t needs; /* the plan's items in its requires closure, itself included */
	int deferred;   /* not requested, required by another item: ensured with it */
	int state;      /* 0 to do, 1 running, 2 done */
	int have;       /* rc, r and e hold its outcome */
	int wrapped;    /* failed inside a dependent's ensure, whose error wraps e */
	int rc;
	struct install_result r;
	struct err e;
	char details[ERR_DETAILS_MAX]; /* e's */
};

/*
 * The list of tools: the wanted names (--only, or the configuration's plan)
 * and their requires closure, dependencies first.
 */
static int
plan_from_only(struct tooling *t, char **only, int nonly, struct item *items, int *n, struct err *e)
{
	char names[PREPARE_MAX][MANIFEST_NAME_MAX];
	int i, j, k, count = 0;

	for (i = 0; i < nonly; i++)
		if (manifest_closure_add(&t->ms, only[i], names, &count, PREPARE_MAX, e) < 0)
			return -1;
	for (k = 0; k < count; k++) {
		struct item *it = &items[k];
		memcpy(it->name, names[k], sizeof(it->name));
		it->name[sizeof(it->name) - 1] = '\0';
		it->requested = 0;
		for (i = 0; i < nonly; i++)
			if (strcmp(only[i], names[k]) == 0)
				it->requested = 1;
		snprintf(it->why, sizeof(it->why), "requested");
		if (!it->requested)
			for (j = 0; j < count; j++) {
				const manifest_t *m = manifest_get(&t->ms, names[j], e);
				int r;
				for (r = 0; m != NULL && r < m->nrequires; r++)
					if (strcmp(m->requires[r].name, names[k]) == 0) {
						snprintf(it->why, sizeof(it->why), "required by %s",
						         names[j]);
						j = count;
						break;
					}
			}
	}
	*n = count;
	return 0;
}

static int
dry_run(struct tooling *t, struct item *items, int n)
{
	static struct err unsupported[PREPARE_MAX];
	struct json_w w;
	int i, h, nunsupported = 0;
	/* A plan for another platform (or all): this machine's PATH says
	 * nothing about what that image holds. */
	int foreign = t->platform != NULL && strcmp(t->platform, manifest_platform_self()) != 0;
	const struct tools_chain *ch = install_env_chain(t->env);
	struct install_req rq = t->rq;

	json_w_init(&w, 1 << 20);
	json_w_obj(&w);
	json_w_kstr(&w, "mode", config_mode_name(t->cfg->install.mode));
	json_w_kstr(&w, "tools_dir", ch->writable >= 0 ? ch->d[ch->writable].path : "");
	json_w_key(&w, "plan");
	json_w_arr(&w);
	for (i = 0; i < n; i++) {
		struct install_result r;
		struct err e = {0};
		char ed[ERR_DETAILS_MAX];
		const manifest_t *m;
		int ready;

		err_keep_details(&e, ed, sizeof(ed));
		m = manifest_get(&t->ms, items[i].name, &e);

		rq.flags =
		    t->rq.flags | INSTALL_F_CHECK | (items[i].requested || foreign ? INSTALL_F_NO_PATH : 0);
		ready = install_ensure(t->env, items[i].name, &rq, &r, &e) == 0;
		/* A tool that cannot run in this image says so here, before any
		 * download (the image check, answered by the check). */
		int cannot = !ready && e.code != NULL && strcmp(e.code, "install.image_unsupported") == 0;
		const char *state = ready    ? (r.from_path  ? "on PATH"
		                                : r.from_env ? "from environment"
		                                             : "ready")
		                    : cannot ? "cannot run here"
		                             : "install";

		json_w_obj(&w);
		json_w_kstr(&w, "name", m->name);
		json_w_kstr(&w, "version", m->version);
		json_w_kint(&w, "size_hint_mb", m->size_hint_mb);
		if (manifest_unpacked_size(m, manifest_platform_self()) > 0)
			json_w_kint(&w, "unpacked_size",
			            (int64_t)manifest_unpacked_size(m, manifest_platform_self()));
		json_w_key(&w, "hosts");
		json_w_arr(&w);
		for (h = 0; h < m->nhosts; h++)
			json_w_str(&w, m->hosts[h]);
		json_w_end(&w);
		json_w_kstr(&w, "why", items[i].why);
		json_w_kstr(&w, "state", state);
		if (ready)
			json_w_kstr(&w, "entry", r.entry);
		if (cannot) {
			tooling_json_error(&w, &e);
			err_copy(&unsupported[nunsupported++], &e);
		}
		json_w_end(&w);
		if (!t->json) {
			char hosts[600], size[32];
			prepare_plan_hosts(t->cfg->install.npm_mirror, m, hosts, sizeof(hosts));
			prepare_plan_size(m, size, sizeof(size));
			printf("%-16s %-12s %10s  %-28s %-20s %s\n", m->name, m->version, size, hosts,
			       items[i].why, state);
		}
	}
	json_w_end(&w);
	json_w_kbool(&w, "ok", nunsupported == 0);
	json_w_end(&w);
	if (t->json)
		printf("%s\n", w.buf);
	json_w_free(&w);
	for (i = 0; !t->json && i < nunsupported; i++)
		err_print(&unsupported[i]);
	return nunsupported ? EXIT_FAIL : EXIT_OK;
}

/* Without --only, the configuration's plan (applets/prepare_plan.c) fills
 * a->only: printed instead with --dry-run, or "nothing to prepare". Returns
 * -1 to go on, else the exit code. */
static int
names_from_config(struct tooling *t, struct prepare_args *a)
{
	int rc;

	a->po.config = t->config;
	a->po.manifests = t->manifests;
	a->po.tools_dir = t->tools_dir;
	a->po.state_dir = t->state_dir;
	a->po.no_path =
	    a->cache_only || (t->platform != NULL && strcmp(t->platform, manifest_platform_self()) != 0);
	a->po.platform = t->platform != NULL && manifest_platform_known(t->platform) ? t->platform : NULL;
	if (prepare_plan_names(&a->po, a->dry, t->json, a->only, &a->nonly, PREPARE_MAX, &rc, &a->plan) != 0)
		return rc;
	t->loaded = prepare_plan_config(a->plan);
	if (a->nonly == 0) {
		if (t->json)
			tooling_json_empty("tools");
		else if (!t->quiet)
			printf("nothing to prepare: no mounted op needs a tool that PATH does not satisfy\n");
		return EXIT_OK;
	}
	return -1;
}

/* --cache-only: the cache-filling of fetch for the same names and flags
 * (t is not open yet). fetch has no --state-dir: the cache goes where
 * fetch would put it, as it always has. */
static int
cache_only(struct tooling *t, struct prepare_args *a)
{
	struct fetch_cache_args ca = {t, a->only, a->nonly, NULL};

	/* loaded with --state-dir, the plan's configuration is not fetch's */
	if (t->state_dir != NULL)
		t->loaded = NULL;
	t->state_dir = NULL;
	return fetch_cache(&ca);
}

/* The install environment and the items to prepare. Returns -1 to go on, else
 * the exit code (t closed). */
static int
open_plan(struct tooling *t, struct prepare_args *a, struct item *items, int *n, int from_config)
{
	struct err e = {0};
	int i;

	err_clear(&e);
	t->keep_no_trees = !a->keep_cache;
	/* without --keep-cache or --cache the downloads leave with the run
	 * (cache_snap_tidy) */
	t->drop_downloads = !a->dry && !a->keep_cache && (t->cache == NULL || t->cache[0] == '\0');
	/* the plan's manifests, when loaded for this platform, are the install's */
	if (a->plan != NULL && prepare_plan_take_manifests(a->plan, t->platform, &t->ms))
		t->ms_open = 1;
	/* --platform all only plans (--dry-run): the install environment is this
	 * machine's, the manifests are loaded for every platform. */
	if (tooling_open(t, a->dry,
	                 a->dry && t->platform != NULL && strcmp(t->platform, "all") == 0 ? NULL
	                                                                                  : t->platform,
	                 &e) < 0)
		return tooling_fail(t, &e);
	t->rq.flags = INSTALL_F_BUILD | (a->force ? INSTALL_F_FORCE : 0);
	if (!t->quiet && !t->json) {
		t->obs.progress = tooling_progress;
		t->obs.announce = tooling_announce;
	}
	if (t->verbose && !t->json)
		t->obs.timing = tooling_timing;
	t->rq.obs = &t->obs;
	if (plan_from_only(t, a->only, a->nonly, items, n, &e) < 0) {
		tooling_close(t);
		if (e.code && strcmp(e.code, "not_found") == 0) {
			err_set(&e, "usage", "%s", e.msg);
		}
		/* a manifest that does not load is a configuration error */
		if (e.code && strcmp(e.code, "install.manifest_invalid") == 0) {
			err_print(&e);
			return EXIT_USAGE;
		}
		return fail(&e);
	}
	/* Derived from the configuration: a copy on PATH is as good as any. */
	for (i = 0; from_config && i < *n; i++) {
		if (items[i].requested)
			snprintf(items[i].why, sizeof(items[i].why), "configuration");
		items[i].requested = 0;
	}
	return -1;
}

/* One item's outcome: its JSON entry into w and, unless --json or -q, a
 * line (a requested tool's failure said; a requirement's waits). */
static void
report_one(struct tooling *t, const struct item *it, struct json_w *w)
{
	const struct install_result *r = &it->r;
	const manifest_t *m;
	struct err me = {0};
	const char *ver;
	char src[CFG_PATH_MAX + 16];

	m = manifest_get(&t->ms, it->name, &me);
	ver = m ? m->version : "";
	json_w_obj(w);
	json_w_kstr(w, "name", it->name);
	json_w_kstr(w, "version", ver);
	json_w_kstr(w, "state", install_state_name(r->state));
	json_w_kbool(w, "installed", r->installed);
	if (it->rc == 0) {
		/* ready in a tools directory other than the one named:
		 * say which (nothing was installed into the named one) */
		int elsewhere = !r->from_path && !r->from_env && r->dir[0] != '\0' &&
		                t->cfg->tools_dir[0] != '\0' && strcmp(r->dir, t->cfg->tools_dir) != 0;
		json_w_kstr(w, "entry", r->entry);
		if (r->dir[0] != '\0')
			json_w_kstr(w, "tools_dir", r->dir);
		if (r->from_path)
			json_w_kbool(w, "from_path", 1);
		if (!t->quiet && !t->json && elsewhere)
			printf("%s %s: ready in %s, not in %s (%s); nothing installed there (%s)\n", it->name,
			       ver, r->dir, t->cfg->tools_dir,
			       config_source(t->cfg, CK_TOOLS_DIR, src, sizeof(src)), r->entry);
		else if (!t->quiet && !t->json)
			printf("%s %s: %s%s (%s)\n", it->name, ver, r->installed ? "installed" : "ready",
			       r->from_path ? " on PATH" : "", r->entry);
	} else {
		tooling_json_error(w, &it->e);
		/* a requirement's failure waits: the tool that needs it says it
		 * again ("X requires Y: ..."), and once is enough */
		if (!t->json && it->requested)
			err_print(&it->e);
	}
	json_w_end(w);
}

/* The items installing at once and what they share. */
struct pool {
	struct tooling *t;
	struct item *items;
	int n;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/* The item to start next: the first to do whose requires closure meets
 * none of an earlier unfinished one's (a requirement named with --only is
 * installed before what needs it; two tools sharing a requirement do not
 * both wait on its lock). -1 none now, -2 none left to start. Under p->mu. */
static int
pool_next(struct pool *p)
{
	int i, j, left = 0;

	for (i = 0; i < p->n; i++) {
		if (p->items[i].deferred || p->items[i].state != 0)
			continue;
		left = 1;
		for (j = 0; j < i; j++)
			if (!p->items[j].deferred && p->items[j].state != 2 &&
			    (p->items[j].needs & p->items[i].needs) != 0)
				break;
		if (j == i)
			return i;
	}
	return left ? -1 : -2;
}

/* A requirement ensured with the tool that needs it (install_observer.required):
 * its outcome is its item's, the first one reported. */
static void
pool_required(void *arg, const char *name, int rc, const struct install_result *r, const struct err *e)
{
	struct pool *p = arg;
	int i;

	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->n; i++)
		if (strcmp(p->items[i].name, name) == 0 && !p->items[i].have) {
			struct item *it = &p->items[i];
			it->have = 1;
			it->rc = rc;
			it->r = *r;
			/* ensure fails the dependent with "X requires Y: <e>"
			 * (install_observer.required) */
			it->wrapped = rc < 0;
			if (rc < 0) {
				err_keep_details(&it->e, it->details, sizeof(it->details));
				err_copy(&it->e, e);
			}
		}
	pthread_mutex_unlock(&p->mu);
}

static void
ensure_item(struct install_env *c, const struct install_req *base, struct item *it)
{
	struct install_req rq = *base;

	if (it->requested)
		rq.flags |= INSTALL_F_NO_PATH;
	err_keep_details(&it->e, it->details, sizeof(it->details));
	err_clear(&it->e);
	memset(&it->r, 0, sizeof(it->r));
	it->rc = install_ensure(c, it->name, &rq, &it->r, &it->e);
	it->have = 1;
}

/* Install items until none is left, with environment c. */
static void
pool_work(struct pool *p, struct install_env *c)
{
	int i;

	pthread_mutex_lock(&p->mu);
	while ((i = pool_next(p)) != -2) {
		if (i < 0) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		p->items[i].state = 1;
		pthread_mutex_unlock(&p->mu);
		ensure_item(c, &p->t->rq, &p->items[i]);
		pthread_mutex_lock(&p->mu);
		p->items[i].state = 2;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

struct worker {
	struct pool *p;
	struct install_env *c;
	pthread_t th;
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	pool_work(w->p, w->c);
	return NULL;
}

/* Each item's requires closure within the plan, and whether another item
 * installs it as a requirement. */
static void
plan_needs(struct tooling *t, struct item *items, int n)
{
	struct err e = {0};
	int i, j, r, grew;

	for (i = 0; i < n; i++) {
		items[i].needs = (uint64_t)1 << i;
		items[i].deferred = items[i].state = items[i].have = items[i].wrapped = 0;
	}
	do {
		grew = 0;
		for (i = 0; i < n; i++) {
			const manifest_t *m = manifest_get(&t->ms, items[i].name, &e);
			for (r = 0; m != NULL && r < m->nrequires; r++)
				for (j = 0; j < n; j++) {
					if (strcmp(items[j].name, m->requires[r].name) != 0)
						continue;
					if (!items[j].requested)
						items[j].deferred = 1;
					if ((items[i].needs | items[j].needs) != items[i].needs) {
						items[i].needs |= items[j].needs;
						grew = 1;
					}
				}
		}
	} while (grew);
}

/* The items that are not requirements of others, PREPARE_PARALLEL at once
 * (each ensure() installs a tool's requires beside it), then the
 * requirements no install reported (their dependent failed first). */
static void
run_items(struct tooling *t, struct item *items, int n)
{
	static struct worker w[PREPARE_PARALLEL];
	struct pool p = {t, items, n, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
	pthread_attr_t at;
	sigset_t all, old;
	struct err e = {0};
	int i, roots = 0, nw = 0;

	plan_needs(t, items, n);
	t->obs.arg = &p;
	t->obs.required = pool_required;
	for (i = 0; i < n; i++)
		roots += !items[i].deferred;
	sigfillset(&all);
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, INSTALL_THREAD_STACK);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; roots > 1 && i < PREPARE_PARALLEL; i++) {
		w[nw].p = &p;
		if (install_env_clone(&w[nw].c, t->env, &e) < 0)
			break;
		if (pthread_create(&w[nw].th, &at, worker_main, &w[nw]) != 0) {
			install_env_free(w[nw].c);
			break;
		}
		nw++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (nw == 0)
		pool_work(&p, t->env);
	for (i = 0; i < nw; i++) {
		pthread_join(w[i].th, NULL);
		install_env_free(w[i].c);
	}
	for (i = 0; i < n; i++)
		if (!items[i].have)
			ensure_item(t->env, &t->rq, &items[i]);
	t->obs.required = NULL;
	t->obs.arg = NULL;
}

/* Install every item; the lines and the JSON document with --json in the
 * plan's order. Returns the exit code (t closed). */
/* Whether another failed item's install.image_unsupported names it as the
 * tool that cannot run (details.tool): that error already said it. */
static int
image_refusal_names(const struct item *items, int n, const struct item *it)
{
	struct json_doc doc;
	const char *tool;
	int i, yes = 0;

	for (i = 0; i < n && !yes; i++) {
		if (&items[i] == it || items[i].rc == 0 || items[i].e.code == NULL ||
		    strcmp(items[i].e.code, "install.image_unsupported") != 0 || items[i].details[0] == '\0')
			continue;
		if (json_parse(&doc, items[i].details, strlen(items[i].details), NULL, NULL) != 0)
			continue;
		tool = json_get_str(doc.root, "tool");
		yes = tool != NULL && strcmp(tool, it->name) == 0;
		json_free(&doc);
	}
	return yes;
}

static int
install_items(struct tooling *t, struct item *items, int n)
{
	struct json_w w;
	uint64_t n_bytes = 0;
	int i, failed = 0, done = 0, n_down = 0;

	run_items(t, items, n);
	json_w_init(&w, 1 << 20);
	json_w_obj(&w);
	json_w_key(&w, "tools");
	json_w_arr(&w);
	for (i = 0; i < n; i++) {
		/* each install's counts, its requires' included */
		n_down += items[i].r.n.downloads;
		n_bytes += items[i].r.n.bytes_downloaded;
		report_one(t, &items[i], &w);
		if (items[i].rc == 0) {
			done += items[i].requested;
			continue;
		}
		failed++;
		/* a broken manifest is a configuration error */
		if (items[i].e.code && strcmp(items[i].e.code, "install.manifest_invalid") == 0 && n == 1) {
			json_w_free(&w);
			tooling_close(t);
			return EXIT_USAGE;
		}
	}
	/* a requirement's failure no dependent's error wraps: the top of
	 * each chain of wraps is printed, requested (report_one) or not. A
	 * dependent refused by the image check before its requires ran names
	 * the requirement that cannot run in its details' tool. */
	for (i = 0; !t->json && i < n; i++)
		if (items[i].rc != 0 && !items[i].requested && !items[i].wrapped &&
		    !image_refusal_names(items, n, &items[i]))
			err_print(&items[i].e);
	json_w_end(&w);
	json_w_kint(&w, "downloads", n_down);
	json_w_kint(&w, "bytes_downloaded", (int64_t)n_bytes);
	json_w_kbool(&w, "ok", failed == 0);
	json_w_end(&w);
	if (t->json)
		printf("%s\n", w.buf);
	json_w_free(&w);
	tooling_close(t);
	/* partial: some requested tool is ready, another is not */
	return failed ? (done ? EXIT_PARTIAL : EXIT_FAIL) : EXIT_OK;
}

/*
 * Without --keep-cache or --cache, the downloads go to the tools
 * directory's .cache (where an earlier fetch or serve may have put what
 * this run needs) and leave with the run: the entries of each chain
 * directory's .cache are listed before, and whatever the writable one holds
 * besides them afterwards is removed, whether the installs succeeded or
 * not. trees/ is never touched (this run adds nothing there,
 * install_setup.keep_no_trees; another process's entries stay).
 */
struct cache_snap {
	char path[PATH_MAX];
	char **names; /* sorted, one block (fs_dir_names) */
	size_t n;
	int unread; /* it exists but could not be read: nothing in it is removed */
};

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each chain directory's .cache as it is now; the count. */
static int
cache_snap_take(const struct config *cfg, struct cache_snap *s)
{
	static struct tools_chain ch;
	struct err e = {0};
	int i;

	if (tools_chain_build(&ch, cfg, 0, &e) < 0)
		return 0;
	for (i = 0; i < ch.n; i++) {
		int fd = -1;

		/* a path that does not fit ("") is no directory: nothing to keep */
		if (fs_path_join(s[i].path, sizeof(s[i].path), ch.d[i].path, ".cache", NULL) == 0)
			fd = open(s[i].path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		s[i].unread =
		    fd >= 0 && fs_dir_names(fd, s[i].path, "io.error", &s[i].names, &s[i].n, &e) != 0;
		if (fd >= 0)
			close(fd);
	}
	return ch.n;
}

/* Remove from the writable tools directory's .cache what is not in its
 * snapshot (trees/ aside), then the directory itself if that left it empty. */
static void
cache_snap_tidy(const struct config *cfg, struct cache_snap *s, int ns)
{
	static struct tools_chain ch;
	char path[PATH_MAX], **now;
	const struct cache_snap *was = NULL;
	struct err e = {0};
	size_t i, n;
	int fd, k;

	if (tools_chain_build(&ch, cfg, 0, &e) == 0 && ch.writable >= 0 &&
	    fs_path_join(path, sizeof(path), ch.d[ch.writable].path, ".cache", NULL) == 0 &&
	    (fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		for (k = 0; k < ns; k++)
			if (strcmp(s[k].path, path) == 0)
				was = &s[k];
		if (fs_dir_names(fd, path, "io.error", &now, &n, &e) != 0)
			n = 0;
		for (i = 0; i < n && !(was != NULL && was->unread); i++) {
			if (strcmp(now[i], "trees") == 0 ||
			    (was != NULL && was->n > 0 &&
			     bsearch(&now[i], was->names, was->n, sizeof(char *), cmp_name) != NULL))
				continue;
			err_clear(&e);
			if (fs_rm_treeat(fd, now[i], &e) < 0)
				err_print(&e);
		}
		free(now);
		close(fd);
		rmdir(path);
	}
	for (k = 0; k < ns; k++)
		free(s[k].names);
}

static void
prune_say(void *arg, const char *path, uint64_t bytes)
{
	const struct prepare_args *a = arg;
	char h[32];

	human_bytes(bytes, h, sizeof(h));
	if (!a->t->quiet && !a->t->json)
		printf("%s %s (%s)\n", a->dry ? "would remove" : "removed", path, h);
}

static void
prune_held(void *arg, const char *name)
{
	if (name != NULL)
		dprintf(2,
		        "agent-sandbox-server: %s: an install holds its lock: its trees and staging are left "
		        "as they are\n",
		        name);
	else
		dprintf(2, "agent-sandbox-server: an install is running: the cache keeps its downloads and "
		           "extracted trees\n");
}

/* --prune: the tools directory and cache of this configuration, against
 * every platform's pins of its manifests (a cache may fill other images). */
static int
prune_run(struct tooling *t, struct prepare_args *a)
{
	struct install_prune_report r = {prune_say, prune_held, a, a->dry, 0, 0};
	struct err e = {0};
	char h[32];
	int rc;

	err_clear(&e);
	if (a->nonly > 0 || a->cache_only || a->keep_cache)
		return opts_error(&usage, "--prune goes with neither --only, --cache-only nor --keep-cache");
	t->platform = "all";
	if (tooling_open(t, 1, manifest_platform_self(), &e) < 0)
		return tooling_fail(t, &e);
	rc = install_prune(t->env, &r, &e);
	tooling_close(t);
	if (rc != 0)
		return fail(&e);
	human_bytes(r.bytes, h, sizeof(h));
	if (t->json) {
		struct json_w w;

		json_w_init(&w, 256);
		json_w_obj(&w);
		json_w_kint(&w, "freed_bytes", (int64_t)r.bytes);
		json_w_kint(&w, "entries", (int64_t)r.entries);
		json_w_kbool(&w, "dry_run", a->dry);
		json_w_kbool(&w, "ok", 1);
		json_w_end(&w);
		printf("%s\n", w.buf);
		json_w_free(&w);
	} else if (!t->quiet)
		printf("%s %s in %llu entries (%llu bytes)\n", a->dry ? "would free" : "freed", h,
		       (unsigned long long)r.entries, (unsigned long long)r.bytes);
	return EXIT_OK;
}

int
prepare_main(int argc, char **argv)
{
	static struct tooling t;
	static struct item items[PREPARE_MAX];
	static struct prepare_args a;
	static struct cache_snap snap[TOOLS_CHAIN_MAX];
	char absdir[PATH_MAX];
	int n = 0, rc, from_config = 0, nsnap, nargs, mine;
	struct config *cfg;
	struct err e = {0};

	memset(&t, 0, sizeof(t));
	memset(&a, 0, sizeof(a));
	a.t = &t;
	if ((rc = opts_parse(&usage, argc, argv, &a, &nargs)) >= 0)
		return rc;
	if (t.tools_dir != NULL && t.tools_dir[0] != '/' && realpath(t.tools_dir, absdir) != NULL)
		t.tools_dir = absdir;
	if (a.prune)
		return prune_run(&t, &a);
	if (a.nonly == 0) {
		if ((rc = names_from_config(&t, &a)) >= 0)
			return rc;
		from_config = 1;
	}
	if (!a.dry && tooling_cache_ready(&t, &e) != 0)
		return fail(&e);
	if (a.cache_only)
		return cache_only(&t, &a);
	if ((rc = open_plan(&t, &a, items, &n, from_config)) >= 0)
		return rc;
	if (a.dry) {
		rc = dry_run(&t, items, n);
		tooling_close(&t);
		return rc;
	}
	if (!t.drop_downloads)
		return install_items(&t, items, n);
	/* the tidy after install_items (which closes t) reads the same
	 * configuration: it is this function's to free from here on, unless
	 * the plan owns it (tooling_open took the plan's) */
	cfg = t.cfg;
	mine = !t.cfg_kept;
	t.cfg_kept = 1;
	nsnap = cache_snap_take(cfg, snap);
	rc = install_items(&t, items, n);
	cache_snap_tidy(cfg, snap, nsnap);
	if (mine)
		free(cfg);
	return rc;
}

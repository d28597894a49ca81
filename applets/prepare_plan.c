/*
 * prepare without --only: the tools of the configuration, the ones its
 * callable operations need and nothing else. The configuration stack loads in introspection mode (no socket,
 * no process, no secret); core/plan derives the tools from the mounted ops; this file prints the plan
 * (--dry-run) and hands the names to prepare's install loop or to the cache filler (--cache-only).
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "install/install.h"
#include "base/json.h"
#include "server/plan.h"
#include "cfgload.h"
#include "prepare_plan.h"
#include "tooling.h"

struct prepare_plan {
	struct cfgload *L;
	const char *platform; /* the manifests' (NULL = this machine) */
	struct plan plan;
};

int
prepare_plan_load(struct prepare_plan **out, const struct prepare_plan_opts *o, struct err *e)
{
	struct prepare_plan *pp = calloc(1, sizeof(*pp));

	*out = NULL;
	if (pp == NULL || (pp->L = cfgload_new()) == NULL) {
		free(pp);
		return err_set(e, "internal", "out of memory");
	}
	pp->L->config_file = o->config;
	if (o->manifests)
		cfgload_option(pp->L, "manifests", o->manifests);
	if (o->tools_dir)
		cfgload_option(pp->L, "tools-dir", o->tools_dir);
	if (o->state_dir)
		cfgload_option(pp->L, "state-dir", o->state_dir);
	if (o->policy)
		cfgload_option(pp->L, "policy", o->policy);
	if (o->preset)
		cfgload_option(pp->L, "preset", o->preset);
	if (o->commands)
		cfgload_option(pp->L, "commands", o->commands);
	pp->platform = o->platform;
	if (cfgload_run(pp->L, o->platform, e) != 0 ||
	    plan_build(&pp->plan, &pp->L->ops, &pp->L->pol, &pp->L->ms,
	               o->no_path ? 0 : pp->L->cfg.install.use_path, NULL, NULL, e) != 0) {
		prepare_plan_free(pp);
		return -1;
	}
	*out = pp;
	return 0;
}

void
prepare_plan_free(struct prepare_plan *pp)
{
	if (pp == NULL)
		return;
	cfgload_free(pp->L);
	free(pp);
}

int
prepare_plan_count(const struct prepare_plan *pp)
{
	return pp->plan.norder;
}

const char *
prepare_plan_name(const struct prepare_plan *pp, int i)
{
	return pp->plan.t[pp->plan.order[i]].m->name;
}

int
prepare_plan_take_manifests(struct prepare_plan *pp, const char *platform, struct manifest_set *ms)
{
	const char *self = manifest_platform_self();

	if (!pp->L->st.ms_owned ||
	    strcmp(platform ? platform : self, pp->platform ? pp->platform : self) != 0)
		return 0;
	*ms = pp->L->ms;
	pp->L->st.ms_owned = 0;
	return 1;
}

const struct config *
prepare_plan_config(const struct prepare_plan *pp)
{
	return &pp->L->cfg;
}

enum cfg_mode
prepare_plan_mode(const struct prepare_plan *pp)
{
	return pp->L->cfg.install.mode;
}

static void
ops_text(const struct plan_tool *t, char *buf, size_t cap)
{
	size_t len = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < t->nops && len < cap; i++)
		len += snprintf(buf + len, cap - len, "%s%s", i ? "," : "", t->ops[i]);
	if (t->ops_more && len < cap)
		snprintf(buf + len, cap - len, ",+%d", t->ops_more);
}

void
prepare_plan_size(const manifest_t *m, char *buf, size_t cap)
{
	uint64_t u = manifest_unpacked_size(m, manifest_platform_self());

	if (u > 0)
		snprintf(buf, cap, "%llu MiB", (unsigned long long)((u + 1048575) >> 20));
	else if (m->size_hint_mb > 0)
		snprintf(buf, cap, "~%ld MiB", m->size_hint_mb);
	else
		snprintf(buf, cap, "-");
}

void
prepare_plan_hosts(const char *npm_mirror, const manifest_t *m, char *buf, size_t cap)
{
	const char *h = strstr(npm_mirror, "://");
	size_t off = 0;
	int i;

	buf[0] = '\0';
	if (m->source.type != MANIFEST_SRC_TARBALL && npm_mirror[0] != '\0') {
		h = h != NULL ? h + 3 : npm_mirror;
		snprintf(buf, cap, "%.*s (mirror)", (int)strcspn(h, "/"), h);
		return;
	}
	for (i = 0; i < m->nhosts && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? "," : "", m->hosts[i]);
}

static void
json_tool(struct json_w *w, const struct plan_tool *t)
{
	struct err e = {0};
	const char *s, *c;
	char ed[ERR_DETAILS_MAX];
	int i;

	err_keep_details(&e, ed, sizeof(ed));
	json_w_obj(w);
	json_w_kstr(w, "name", t->m->name);
	json_w_kstr(w, "version", t->m->version);
	json_w_kint(w, "size_hint_mb", t->m->size_hint_mb);
	if (manifest_unpacked_size(t->m, manifest_platform_self()) > 0)
		json_w_kint(w, "unpacked_size",
		            (int64_t)manifest_unpacked_size(t->m, manifest_platform_self()));
	json_w_key(w, "hosts");
	json_w_arr(w);
	for (i = 0; i < t->m->nhosts; i++)
		json_w_str(w, t->m->hosts[i]);
	json_w_end(w);
	json_w_key(w, "needed_by");
	json_w_arr(w);
	for (i = 0; i < t->nops; i++)
		json_w_str(w, t->ops[i]);
	json_w_end(w);
	json_w_key(w, "required_by");
	json_w_arr(w);
	for (s = t->required_by; *s != '\0'; s = *c ? c + 1 : c) {
		c = s + strcspn(s, ",");
		json_w_strn(w, s, (size_t)(c - s));
	}
	json_w_end(w);
	if (t->min[0])
		json_w_kstr(w, "min", t->min);
	if (t->on_path) {
		json_w_kstr(w, "path_entry", t->path_entry);
		json_w_kstr(w, "path_version", t->path_version);
	}
	if (!t->on_path && install_image_fits(t->m, NULL, &e) < 0)
		tooling_json_error(w, &e);
	json_w_end(w);
}

int
prepare_plan_print(const struct prepare_plan *pp, int json)
{
	const struct plan *p = &pp->plan;
	char src[CFG_PATH_MAX + 32], ops[2048], hosts[600], size[32];
	struct json_w w;
	struct err e = {0};
	int i, bad = 0;

	config_source(&pp->L->cfg, CK_INSTALL_MODE, src, sizeof(src));
	/* A planned tool that cannot run in this image fails the plan now,
	 * before anything is downloaded. */
	for (i = 0; i < p->norder; i++)
		if (install_image_fits(p->t[p->order[i]].m, NULL, &e) < 0)
			bad++;
	if (json) {
		json_w_init(&w, 4u << 20);
		json_w_obj(&w);
		json_w_kstr(&w, "mode", config_mode_name(pp->L->cfg.install.mode));
		json_w_kstr(&w, "mode_source", src);
		json_w_kstr(&w, "config_file", pp->L->cfg.file);
		json_w_key(&w, "plan");
		json_w_arr(&w);
		for (i = 0; i < p->norder; i++)
			json_tool(&w, &p->t[p->order[i]]);
		json_w_end(&w);
		json_w_key(&w, "on_path");
		json_w_arr(&w);
		for (i = 0; i < p->n; i++)
			if (p->t[i].on_path && p->t[i].nops > 0)
				json_tool(&w, &p->t[i]);
		json_w_end(&w);
		json_w_kbool(&w, "ok", bad == 0);
		json_w_end(&w);
		if (w.overflow) {
			json_w_free(&w);
			err_printf("internal", "the plan is too large to print");
			return EXIT_FAIL;
		}
		printf("%s\n", w.buf);
		json_w_free(&w);
		return bad ? EXIT_FAIL : EXIT_OK;
	}
	printf("configuration: %s\ninstall.mode: %s (%s)\n\n",
	       pp->L->cfg.file[0] ? pp->L->cfg.file : "(none: embedded defaults)",
	       config_mode_name(pp->L->cfg.install.mode), src);
	if (p->norder == 0)
		printf("nothing to install: no mounted op needs a tool that PATH does not already satisfy\n");
	else
		printf("%-16s %-14s %8s  %-28s %s\n", "NAME", "VERSION", "SIZE", "HOSTS", "NEEDED BY");
	for (i = 0; i < p->norder; i++) {
		const struct plan_tool *t = &p->t[p->order[i]];
		prepare_plan_hosts(pp->L->cfg.install.npm_mirror, t->m, hosts, sizeof(hosts));
		ops_text(t, ops, sizeof(ops));
		/* as prepare --dry-run --only marks it: the row is not an install */
		prepare_plan_size(t->m, size, sizeof(size));
		printf("%-16s %-14s %8s  %-28s %s%s%s%s%s\n", t->m->name, t->m->version, size, hosts, ops,
		       t->required_by[0] ? " (required by " : "", t->required_by,
		       t->required_by[0] ? ")" : "",
		       install_image_fits(t->m, NULL, &e) < 0 ? "  [cannot run here]" : "");
	}
	for (i = 0; i < p->n; i++)
		if (p->t[i].on_path && p->t[i].nops > 0)
			printf("on PATH, not installed: %s %s at %s (manifest %s)\n", p->t[i].m->name,
			       p->t[i].path_version, p->t[i].path_entry, p->t[i].m->version);
	for (i = 0; bad && i < p->norder; i++)
		if (install_image_fits(p->t[p->order[i]].m, NULL, &e) < 0)
			err_print(&e);
	return bad ? EXIT_FAIL : EXIT_OK;
}

int
prepare_plan_names(const struct prepare_plan_opts *o, int dry, int json, char **names, int *n, int cap,
                   int *rc, struct prepare_plan **keep)
{
	static char store[PLAN_MAX][MANIFEST_NAME_MAX];
	struct prepare_plan *pp;
	struct err e = {0};
	int i;

	*n = 0;
	if (prepare_plan_load(&pp, o, &e) != 0) {
		err_print(&e);
		*rc = EXIT_USAGE;
		return -1;
	}
	if (dry) {
		*rc = prepare_plan_print(pp, json);
		prepare_plan_free(pp);
		return 1;
	}
	if (prepare_plan_count(pp) > cap || prepare_plan_count(pp) > PLAN_MAX) {
		err_printf("usage", "the configuration needs %d tools, more than %d", prepare_plan_count(pp),
		           cap);
		prepare_plan_free(pp);
		*rc = EXIT_USAGE;
		return -1;
	}
	for (i = 0; i < prepare_plan_count(pp); i++) {
		snprintf(store[i], sizeof(store[i]), "%s", prepare_plan_name(pp, i));
		names[i] = store[i];
	}
	*n = i;
	if (keep != NULL)
		*keep = pp;
	else
		prepare_plan_free(pp);
	return 0;
}

#include "tooling.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfgload.h"
#include "common.h"
#include "base/clock.h"
#include "base/fs.h"
#include "base/json.h"

int
tooling_open(struct tooling *t, int allow_all, const char *ctx_platform, struct err *e)
{
	struct config_flags f = {0};
	struct install_setup su = {0};
	struct config *cfg;

	if (t->loaded != NULL) {
		/* loaded already with these flags (prepare's plan): its owner frees it */
		cfg = t->cfg = (struct config *)t->loaded;
		t->cfg_kept = 1;
	} else {
		if ((cfg = t->cfg = malloc(sizeof(*cfg))) == NULL)
			return err_set(e, "internal", "out of memory");
		if (t->tools_dir != NULL)
			config_flags_add(&f, "tools-dir", t->tools_dir);
		if (t->state_dir != NULL)
			config_flags_add(&f, "state-dir", t->state_dir);
		if (t->manifests != NULL)
			config_flags_add(&f, "manifests", t->manifests);
		if (cfgload_config(cfg, t->config, &f, 1, e) < 0) {
			t->settings_failed = 1;
			return -1;
		}
	}
	if (t->platform != NULL && !manifest_platform_known(t->platform) &&
	    !(allow_all && strcmp(t->platform, "all") == 0))
		return err_set(e, "usage", "--platform: '%s' is not linux-x64, linux-arm64%s", t->platform,
		               allow_all ? " or all" : "");
	if (!t->ms_open && manifest_set_load(&t->ms, cfg, t->platform, e) < 0)
		return -1;
	t->ms_open = 1;
	su.platform = ctx_platform;
	su.cache_dir = t->cache;
	su.keep_no_trees = t->keep_no_trees;
	su.drop_downloads = t->drop_downloads;
	return install_env_new(&t->env, &t->ms, cfg, &su, e);
}

int
tooling_cache_ready(const struct tooling *t, struct err *e)
{
	struct err sub = {0};

	if (t->cache == NULL || t->cache[0] == '\0')
		return 0;
	err_clear(&sub);
	if (access(t->cache, F_OK) != 0 && fs_mkdir_p(t->cache, 0755, &sub) != 0)
		return err_set(e, "io.error",
		               "--cache %s cannot be created (%s): create it, or give --cache a directory "
		               "you can write",
		               t->cache, sub.msg);
	if (access(t->cache, W_OK | X_OK) != 0 && !t->quiet)
		note_line("cache %s is not writable: what it holds is used, downloads are not kept there",
		          t->cache);
	return 0;
}

int
tooling_fail(struct tooling *t, const struct err *e)
{
	int usage = t->settings_failed, rc;

	tooling_close(t);
	rc = fail(e);
	return usage ? EXIT_USAGE : rc;
}

void
tooling_close(struct tooling *t)
{
	install_env_free(t->env);
	t->env = NULL;
	if (t->ms_open)
		manifest_set_close(&t->ms);
	t->ms_open = 0;
	if (!t->cfg_kept)
		free(t->cfg);
	t->cfg = NULL;
}

/* How often a line is printed: a terminal's bar, or a plain line per 5 s. */
#define TOOLING_PROGRESS_TTY_MS 100
#define TOOLING_PROGRESS_PLAIN_MS 5000
/* Tools whose progress is followed at once (prepare installs several). */
#define TOOLING_PROGRESS_TOOLS 8

/* Installs may report from several threads: one line at a time, each
 * tool's phase and pace its own; only one bar is redrawn in place, the
 * others' progress is a plain line now and then. */
static pthread_mutex_t progress_mu = PTHREAD_MUTEX_INITIALIZER;

struct progress_tool {
	char name[64], phase[16];
	int64_t start_ms, last_ms;
};

static struct progress_tool *
progress_slot(const char *name, int64_t now, int *fresh)
{
	static struct progress_tool tools[TOOLING_PROGRESS_TOOLS];
	struct progress_tool *old = &tools[0];
	int i;

	for (i = 0; i < TOOLING_PROGRESS_TOOLS; i++) {
		if (strcmp(tools[i].name, name) == 0) {
			*fresh = 0;
			return &tools[i];
		}
		if (tools[i].last_ms < old->last_ms)
			old = &tools[i];
	}
	memset(old, 0, sizeof(*old));
	snprintf(old->name, sizeof(old->name), "%s", name);
	old->start_ms = now;
	*fresh = 1;
	return old;
}

void
tooling_progress(void *arg, const char *name, const char *phase, const struct install_progress *p)
{
	static char bar_name[64];
	static int bar_open;
	struct progress_tool *pt;
	int64_t now = clock_ms(), el;
	int tty = isatty(2), changed, live, other, n, fresh;
	char line[400], label[96], extra[48] = "";

	(void)arg;
	pthread_mutex_lock(&progress_mu);
	pt = progress_slot(name, now, &fresh);
	changed = fresh || strcmp(pt->phase, phase) != 0;
	/* another tool's bar is on the line: this one's is a plain line */
	other = bar_open && strcmp(bar_name, name) != 0;
	if (!changed &&
	    now - pt->last_ms < (tty && !other ? TOOLING_PROGRESS_TTY_MS : TOOLING_PROGRESS_PLAIN_MS))
		goto out;
	snprintf(pt->phase, sizeof(pt->phase), "%s", phase);
	pt->last_ms = now;
	/* only the download is redrawn in place; a later phase gets its own line */
	live = tty && (strcmp(phase, "download") == 0 || strcmp(phase, "fetch") == 0) && (!other || changed);
	if ((changed || other) && bar_open && write(2, "\n", 1) < 0)
		goto out;
	bar_open = 0;
	if (p->bytes == 0 && p->total == 0) {
		n = snprintf(line, sizeof(line), "%s: %s\n", name, phase);
	} else {
		if (p->count > 1)
			snprintf(extra, sizeof(extra), "%u/%u packages", p->done, p->count);
		snprintf(label, sizeof(label), "%s: %s", name, phase);
		el = now - pt->start_ms;
		n = progress_format(line, sizeof(line), label, p->bytes, p->total,
		                    el > 0 ? p->bytes * 1000 / (uint64_t)el : 0, extra, tty, !live);
		bar_open = live;
		if (live)
			snprintf(bar_name, sizeof(bar_name), "%s", name);
	}
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (n > 0 && write(2, line, (size_t)n) < 0) {
		/* progress is best effort */
	}
out:
	pthread_mutex_unlock(&progress_mu);
}

void
tooling_announce(void *arg, const manifest_t *m, const char *why, const char *dir, const char *from)
{
	char line[INSTALL_WHY_MAX + 3 * PATH_MAX + 800];
	int fix = strncmp(why, "drift:", 6) == 0, n;
	const char *h = from != NULL ? strstr(from, "://") : NULL;

	(void)arg;
	/* the origin of a URL: scheme, host and port */
	n = h != NULL ? (int)(h + 3 - from) + (int)strcspn(h + 3, "/") : 0;
	n = snprintf(line, sizeof(line), "agent-sandbox-server: %s %s %s %s %s%s%.*s (%s)\n",
	             fix ? "repairing" : "installing", m->name, m->version, fix ? "in" : "into", dir,
	             from == NULL ? ""
	             : from[0]    ? ", downloading from "
	                          : " from local copies of its pinned downloads",
	             n, from != NULL ? from : "", why);
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1, line[n - 1] = '\n';
	/* one write, like every message */
	if (n > 0 && write(2, line, (size_t)n) < 0) {
		/* stderr closed: nothing to tell */
	}
}

void
tooling_timing(void *arg, const manifest_t *m, const int64_t us[INSTALL_PH_N],
               const int64_t cpu[INSTALL_CPU_N])
{
	char line[1024];
	const char *sep = "; cpu:";
	int n, i, k;
	int64_t total = 0;

	(void)arg;
	n = snprintf(line, sizeof(line), "agent-sandbox-server: timing %s %s:", m->name, m->version);
	for (i = 0; i < INSTALL_PH_N && n > 0 && n < (int)sizeof(line); i++) {
		if (us[i] == INSTALL_PH_NOT_RUN) {
			k = snprintf(line + n, sizeof(line) - (size_t)n,
			             " %s not run (a sealed pass for this tree),",
			             install_phase_name((enum install_phase)i));
			n = k < 0 ? -1 : n + k;
			continue;
		}
		if (us[i] < 0)
			continue;
		total += us[i];
		k = snprintf(line + n, sizeof(line) - (size_t)n, " %s %lld.%03lld ms,",
		             install_phase_name((enum install_phase)i), (long long)(us[i] / 1000),
		             (long long)(us[i] % 1000));
		n = k < 0 ? -1 : n + k;
	}
	if (n > 0 && n < (int)sizeof(line)) {
		k = snprintf(line + n, sizeof(line) - (size_t)n, " total %lld.%03lld ms",
		             (long long)(total / 1000), (long long)(total % 1000));
		n = k < 0 ? -1 : n + k;
	}
	/* the CPU behind the phases, for what was extracted or downloaded */
	for (i = 0; i < INSTALL_CPU_N && n > 0 && n < (int)sizeof(line); i++) {
		if (cpu[i] <= 0)
			continue;
		k = snprintf(line + n, sizeof(line) - (size_t)n, "%s %s %lld.%03lld ms", sep,
		             install_cpu_name((enum install_cpu)i), (long long)(cpu[i] / 1000),
		             (long long)(cpu[i] % 1000));
		n = k < 0 ? -1 : n + k;
		sep = ",";
	}
	if (n > 0 && n < (int)sizeof(line))
		n += snprintf(line + n, sizeof(line) - (size_t)n, "\n");
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1, line[n - 1] = '\n';
	/* one write, like every message */
	if (n > 0 && write(2, line, (size_t)n) < 0) {
		/* stderr closed: nothing to tell */
	}
}

void
tooling_json_empty(const char *list)
{
	struct json_w w;

	json_w_init(&w, 256);
	json_w_obj(&w);
	json_w_key(&w, list);
	json_w_arr(&w);
	json_w_end(&w);
	json_w_kbool(&w, "ok", 1);
	json_w_end(&w);
	printf("%s\n", w.buf);
	json_w_free(&w);
}

void
tooling_json_error(struct json_w *w, const struct err *e)
{
	json_w_key(w, "error");
	json_w_obj(w);
	json_w_kstr(w, "code", e->code ? e->code : "internal");
	json_w_kstr(w, "message", e->msg);
	if (err_details_text(e)[0])
		json_w_key(w, "details"), json_w_raw(w, err_details_text(e));
	json_w_end(w);
}

int
tooling_set(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	static const struct {
		char name[10];
		unsigned short off;
	} field[] = {
	    {"config", offsetof(struct tooling, config)},
	    {"manifests", offsetof(struct tooling, manifests)},
	    {"tools-dir", offsetof(struct tooling, tools_dir)},
	    {"state-dir", offsetof(struct tooling, state_dir)},
	    {"cache", offsetof(struct tooling, cache)},
	    {"platform", offsetof(struct tooling, platform)},
	};
	struct tooling *t;
	size_t i;

	memcpy(&t, (char *)dst + o->off, sizeof(t));
	if (o->arg == NULL) {
		*(o->letter == 'q' ? &t->quiet : o->letter == 'v' ? &t->verbose : &t->json) = 1;
		return 0;
	}
	for (i = 0; i < sizeof(field) / sizeof(field[0]); i++)
		if (strcmp(o->name, field[i].name) == 0)
			memcpy((char *)t + field[i].off, &arg, sizeof(arg));
	return 0;
}

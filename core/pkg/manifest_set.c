/*
 * Manifest sets: the embedded manifests and a directory's, indexed by tool
 * name, each loaded and checked (with its requires closure) on first use.
 */
#include "pkg/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "base/fs.h"
#include "pkg/manifests_embed.h"

#define INVALID "install.manifest_invalid"

/* "<name>.json" → name; "<name>.unpinned.json" → name with *unpinned = 1. */
static int
file_tool_name(const char *base, char *name, int *unpinned)
{
	size_t n = strlen(base);

	*unpinned = 0;
	if (n > 14 && strcmp(base + n - 14, ".unpinned.json") == 0) {
		*unpinned = 1;
		n -= 14;
	} else if (n > 5 && strcmp(base + n - 5, ".json") == 0) {
		n -= 5;
	} else {
		return -1;
	}
	if (n >= MANIFEST_NAME_MAX)
		return -1;
	memcpy(name, base, n);
	name[n] = '\0';
	return cfg_valid_name(name) ? 0 : -1;
}

static struct manifest_entry *
set_find(struct manifest_set *s, const char *name)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->ent[i].name, name) == 0)
			return &s->ent[i];
	return NULL;
}

static struct manifest_entry *
set_add(struct manifest_set *s, const char *name)
{
	struct manifest_entry *en = set_find(s, name);

	if (en != NULL)
		return en;
	if (s->n >= MANIFEST_SET_MAX)
		return NULL;
	en = &s->ent[s->n++];
	memset(en, 0, sizeof(*en));
	snprintf(en->name, sizeof(en->name), "%s", name);
	en->embedded_idx = -1;
	return en;
}

int
manifest_set_open(struct manifest_set *s, const char *dir, const struct manifest_opts *o, struct err *e)
{
	struct manifest_entry *en;
	char name[MANIFEST_NAME_MAX];
	int i, unp;

	memset(s, 0, sizeof(*s));
	s->opts = *o;
	s->ent = calloc(MANIFEST_SET_MAX, sizeof(*s->ent));
	if (s->ent == NULL)
		return err_set(e, "internal", "out of memory");
	for (i = 0; embedded_manifests[i].path != NULL; i++) {
		const char *p = embedded_manifests[i].path;
		if (strchr(p, '/') != NULL || file_tool_name(p, name, &unp) < 0 || unp)
			continue; /* lockfiles and other siblings live in subdirectories */
		if ((en = set_add(s, name)) == NULL)
			break;
		en->embedded_idx = i;
	}
	if (dir != NULL && *dir != '\0') {
		char abs[4096], **names;
		size_t n, k;
		int rc = fs_dir_names(AT_FDCWD, dir, "config.invalid", &names, &n, e);

		/* absolute, so markers can name the manifest they came from */
		if (rc == 0 && realpath(dir, abs) != NULL)
			dir = abs;

		snprintf(s->dir, sizeof(s->dir), "%s", dir);
		if (rc != 0) {
			if (e != NULL && e->sys != 0)
				err_sys(e, "config.invalid", e->sys, "manifests directory %s: %s", dir,
				        strerror(e->sys));
			manifest_set_close(s);
			return -1;
		}
		for (k = 0; k < n; k++) {
			struct manifest_entry *old;
			if (names[k][0] == '.' || file_tool_name(names[k], name, &unp) < 0)
				continue;
			if (unp && !o->allow_unpinned)
				continue;
			old = set_find(s, name);
			/* a pinned file wins over an unpinned one of the same tool */
			if (unp && old != NULL && old->path[0] != '\0')
				continue;
			if ((en = set_add(s, name)) == NULL) {
				err_set(e, "config.invalid", "more than %d manifests", MANIFEST_SET_MAX);
				break;
			}
			en->embedded_idx = -1;
			if (fs_path_join(en->path, sizeof(en->path), dir, names[k], e) != 0)
				break;
		}
		free(names);
		if (k < n) {
			manifest_set_close(s);
			return -1;
		}
	}
	return 0;
}

void
manifest_set_close(struct manifest_set *s)
{
	int i;

	if (s->ent == NULL)
		return;
	for (i = 0; i < s->n; i++)
		if (s->ent[i].m != NULL) {
			free(s->ent[i].m);
		}
	free(s->ent);
	s->ent = NULL;
	s->n = 0;
}

static int
load_entry(struct manifest_set *s, struct manifest_entry *en, struct err *e)
{
	manifest_t *m = malloc(sizeof(*m));
	int rc;

	if (m == NULL)
		return err_set(e, "internal", "out of memory");
	if (en->embedded_idx >= 0) {
		struct embedded_file *f = &embedded_manifests[en->embedded_idx];
		const char *text = embedded_text(f, e);
		char file[300];
		snprintf(file, sizeof(file), "embedded:%s", f->path);
		rc = text == NULL ? -1 : manifest_parse(m, file, NULL, text, f->len, &s->opts, e);
	} else {
		rc = manifest_load_file(m, en->path, &s->opts, e);
	}
	if (rc == 0 && strcmp(m->name, en->name) != 0) {
		rc = err_set(e, INVALID, "%s: $.name: '%s' does not match the file name (%s.json)", m->file,
		             m->name, en->name);
	}
	if (rc < 0) {
		free(m);
		return -1;
	}
	en->m = m;
	return 0;
}

/* Depth-first over requires; state 2 marks the current path, so meeting it
 * again is a cycle. stack holds the path for the message. */
static int
resolve(struct manifest_set *s, const char *name, const char **stack, int depth, struct err *e)
{
	struct manifest_entry *en = set_find(s, name);
	int i;

	if (en == NULL)
		return err_set(e, "not_found", "no manifest for tool '%s'", name);
	if (en->state == 1)
		return 0;
	if (en->state == -1) {
		err_copy(e, &en->e);
		return -1;
	}
	if (en->state == 2 || depth >= MANIFEST_MAX_DEPTH) {
		char path[512] = "";
		size_t off = 0;
		int start = 0;
		for (i = 0; i < depth; i++)
			if (strcmp(stack[i], name) == 0)
				start = i;
		for (i = start; i < depth && off < sizeof(path); i++)
			off += (size_t)snprintf(path + off, sizeof(path) - off, "%s -> ", stack[i]);
		if (off < sizeof(path))
			snprintf(path + off, sizeof(path) - off, "%s", name);
		en = set_find(s, stack[start]);
		return err_set(e, INVALID, "%s: $.requires: dependency cycle %s",
		               en && en->m ? en->m->file : stack[start], path);
	}
	if (en->m == NULL && load_entry(s, en, e) < 0) {
		en->state = -1;
		err_copy(&en->e, e);
		return -1;
	}
	en->state = 2;
	stack[depth] = en->name;
	for (i = 0; i < en->m->nrequires; i++) {
		const struct manifest_require *r = &en->m->requires[i];
		struct manifest_entry *dep;
		char p[40];

		snprintf(p, sizeof(p), "$.requires[%d]", i);
		if (set_find(s, r->name) == NULL) {
			err_set(e, INVALID, "%s: %s: requires unknown tool '%s'", en->m->file, p, r->name);
			goto fail;
		}
		if (resolve(s, r->name, stack, depth + 1, e) < 0) {
			if (e->code != NULL && strcmp(e->code, "not_found") == 0)
				err_set(e, INVALID, "%s: %s: %s", en->m->file, p, e->msg);
			goto fail;
		}
		dep = set_find(s, r->name);
		if (r->min[0] != '\0' && manifest_version_cmp(dep->m->version, r->min) < 0) {
			err_set(e, INVALID, "%s: %s: requires %s>=%s but its manifest has version %s",
			        en->m->file, p, r->name, r->min, dep->m->version);
			goto fail;
		}
	}
	en->state = 1;
	return 0;
fail:
	/* a cycle is reported once; the entries stay loadable for other paths */
	en->state = 0;
	return -1;
}

const manifest_t *
manifest_get(struct manifest_set *s, const char *name, struct err *e)
{
	const char *stack[MANIFEST_MAX_DEPTH + 1];
	struct manifest_entry *en;

	if (resolve(s, name, stack, 0, e) < 0)
		return NULL;
	en = set_find(s, name);
	return en->m;
}

static int
mentions(const struct manifest_entry *en, const char *base)
{
	char q[MANIFEST_NAME_MAX + 3], *text = NULL;
	size_t len = 0;
	struct err e = {0};
	int hit;

	if (snprintf(q, sizeof(q), "\"%s\"", base) >= (int)sizeof(q))
		return 0;
	if (en->embedded_idx >= 0) {
		struct embedded_file *f = &embedded_manifests[en->embedded_idx];
		const char *et = embedded_text(f, &e);
		return et == NULL || memmem(et, f->len, q, strlen(q)) != NULL;
	}
	if (fs_read_input(en->path, MANIFEST_MAX_BYTES, &text, &len, &e) < 0)
		return 1; /* let the real load report it */
	hit = memmem(text, len, q, strlen(q)) != NULL;
	free(text);
	return hit;
}

const manifest_t *
manifest_find_binary(struct manifest_set *s, const char *base)
{
	struct err e = {0};
	int i;

	for (i = 0; i < s->n; i++) {
		struct manifest_entry *en = &s->ent[i];
		/* cheap prefilter: a manifest whose text never mentions "<base>"
		 * cannot name it as its binary, and loading would parse its
		 * lockfile (the shim runs this on every exec) */
		if (en->m == NULL && en->state != -1 && !mentions(en, base))
			continue;
		if (en->m == NULL && en->state != -1 && load_entry(s, en, &e) < 0) {
			en->state = -1;
			err_copy(&en->e, &e);
		}
		if (en->m != NULL && strcmp(en->m->binary, base) == 0)
			return manifest_get(s, en->name, &e);
	}
	return NULL;
}

int
manifest_set_load(struct manifest_set *s, const struct config *c, const char *platform, struct err *e)
{
	struct manifest_opts mo = {0};

	snprintf(mo.npm_mirror, sizeof(mo.npm_mirror), "%s", c->install.npm_mirror);
	if ((mo.allow_unpinned = manifest_unpinned_allowed(c, e)) < 0)
		return -1;
	mo.platform = platform != NULL ? platform : manifest_platform_self();
	return manifest_set_open(s, c->manifests_dir[0] != '\0' ? c->manifests_dir : NULL, &mo, e);
}

void
manifest_agents_hint(struct manifest_set *s, const char *word, char *buf, size_t cap)
{
	const char *names[MANIFEST_SET_MAX];
	char list[400] = "";
	const char *near;
	struct err e = {0};
	size_t off = 0;
	int i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < s->n && n < MANIFEST_SET_MAX; i++) {
		const manifest_t *m = manifest_get(s, s->ent[i].name, &e);

		if (m == NULL || m->run.n == 0)
			continue;
		names[n++] = s->ent[i].name;
		if (off < sizeof(list))
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", off ? ", " : "",
			                        m->name);
	}
	if (n == 0) {
		snprintf(buf, cap, "(no manifest here has a run block)");
		return;
	}
	near = config_did_you_mean(word, names, n);
	if (near != NULL)
		snprintf(buf, cap, "(did you mean %s? agents: %s)", near, list);
	else
		snprintf(buf, cap, "(agents: %s)", list);
}

int
manifest_closure_add(struct manifest_set *s, const char *name, char (*out)[MANIFEST_NAME_MAX], int *n,
                     int cap, struct err *e)
{
	const manifest_t *m = manifest_get(s, name, e);
	char reqs[MANIFEST_MAX_REQUIRES][MANIFEST_NAME_MAX];
	int i, j, nr;

	if (m == NULL)
		return -1;
	for (i = 0; i < *n; i++)
		if (strcmp(out[i], name) == 0)
			return 0;
	/* dependencies first, in name order */
	nr = m->nrequires;
	for (i = 0; i < nr; i++)
		snprintf(reqs[i], sizeof(reqs[i]), "%s", m->requires[i].name);
	for (i = 1; i < nr; i++)
		for (j = i; j > 0 && strcmp(reqs[j - 1], reqs[j]) > 0; j--) {
			char t[MANIFEST_NAME_MAX];
			memcpy(t, reqs[j], sizeof(t));
			memcpy(reqs[j], reqs[j - 1], sizeof(t));
			memcpy(reqs[j - 1], t, sizeof(t));
		}
	for (i = 0; i < nr; i++)
		if (manifest_closure_add(s, reqs[i], out, n, cap, e) < 0)
			return -1;
	if (*n >= cap)
		return err_set(e, INVALID, "more than %d tools in the requires closure of %s", cap, name);
	snprintf(out[(*n)++], MANIFEST_NAME_MAX, "%s", name);
	return 0;
}

int
manifest_closure(struct manifest_set *s, const char *name, char (*out)[MANIFEST_NAME_MAX], int cap,
                 struct err *e)
{
	int n = 0;

	if (manifest_closure_add(s, name, out, &n, cap, e) < 0)
		return -1;
	return n;
}

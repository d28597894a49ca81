/*
 * The install plan: mounted ops → install requirements → requires closure →
 * minus PATH, in install order.
 */
#include "server/plan.h"
#include "base/clock.h"
#include "install/install.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A --version answers in well under a second; a cold node on a slow disk
 * in a few. Its first line is all we read. */

static struct plan_tool *
find(struct plan *p, const char *name)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->t[i].m->name, name) == 0)
			return &p->t[i];
	return NULL;
}

/* The tool of name, added (its manifest loaded) when new. */
static struct plan_tool *
get(struct plan *p, struct manifest_set *ms, const char *name, struct err *e)
{
	struct plan_tool *t = find(p, name);
	const manifest_t *m;

	if (t != NULL)
		return t;
	if ((m = manifest_get(ms, name, e)) == NULL)
		return NULL;
	if (p->n >= PLAN_MAX) {
		err_set(e, "internal", "more than %d tools in the plan", PLAN_MAX);
		return NULL;
	}
	t = &p->t[p->n++];
	memset(t, 0, sizeof(*t));
	t->m = m;
	return t;
}

/* Pass 1: the whole closure, with the strongest minimum asked of each. */
static int
closure(struct plan *p, struct manifest_set *ms, const char *name, const char *min, int depth, struct err *e)
{
	struct plan_tool *t;
	int i;

	if (depth > MANIFEST_MAX_DEPTH)
		return err_set(e, "install.manifest_invalid", "%s: requires nested deeper than %d", name,
		               MANIFEST_MAX_DEPTH);
	if ((t = get(p, ms, name, e)) == NULL)
		return -1;
	if (min[0] != '\0' && (t->min[0] == '\0' || manifest_version_cmp(min, t->min) > 0))
		snprintf(t->min, sizeof(t->min), "%s", min);
	for (i = 0; i < t->m->nrequires; i++)
		if (closure(p, ms, t->m->requires[i].name, t->m->requires[i].min, depth + 1, e) != 0)
			return -1;
	return 0;
}

static void
add_op(struct plan_tool *t, const char *op)
{
	int i;

	for (i = 0; i < t->nops; i++)
		if (strcmp(t->ops[i], op) == 0)
			return;
	if (t->nops < PLAN_OPS_MAX)
		t->ops[t->nops++] = op;
	else
		t->ops_more++;
}

static void
add_reqby(struct plan_tool *t, const char *parent)
{
	size_t n = strlen(t->required_by), k = strlen(parent);
	const char *s = t->required_by;

	while ((s = strstr(s, parent)) != NULL) {
		if ((s == t->required_by || s[-1] == ',') && (s[k] == ',' || s[k] == '\0'))
			return;
		s += k;
	}
	if (n + k + 2 <= sizeof(t->required_by))
		snprintf(t->required_by + n, sizeof(t->required_by) - n, "%s%s", n ? "," : "", parent);
}

/* Pass 3: record who needs what; append in post-order (dependencies first).
 * A tool satisfied on PATH stops the walk: its requires are not needed for
 * its sake. */
static void
visit(struct plan *p, const char *name, const char *op, const char *parent)
{
	struct plan_tool *t = find(p, name);
	int i;

	if (t == NULL)
		return;
	add_op(t, op);
	if (parent == NULL)
		t->direct = 1;
	else
		add_reqby(t, parent);
	if (t->on_path)
		return;
	for (i = 0; i < t->m->nrequires; i++)
		visit(p, t->m->requires[i].name, op, t->m->name);
	if (!t->planned) {
		t->planned = 1;
		p->order[p->norder++] = (int)(t - p->t);
	}
}

/* Whether any principal may call op (install admission included). */
static int
mounted(const struct op *op, const struct policy *pol)
{
	const char *inst[OP_INSTALL_MAX];
	struct pol_decision d;
	int i;

	for (i = 0; i < op->ninstall; i++)
		inst[i] = op->install[i];
	for (i = 0; i < pol->n; i++)
		if (policy_decide(pol, pol->p[i].name, op->id, inst, op->ninstall, &d))
			return 1;
	return 0;
}

int
plan_build(struct plan *p, const struct ops *o, const struct policy *pol, struct manifest_set *ms,
           int use_path, plan_path_fn path_fn, void *ctx, struct err *e)
{
	int i, j;

	memset(p, 0, sizeof(*p));
	if (path_fn == NULL)
		path_fn = plan_path_check;
	for (i = 0; i < ops_n(o); i++) {
		if (ops_at(o, i)->ninstall == 0 || !mounted(ops_at(o, i), pol))
			continue;
		for (j = 0; j < ops_at(o, i)->ninstall; j++)
			if (closure(p, ms, ops_at(o, i)->install[j], "", 0, e) != 0)
				return -1;
	}
	for (i = 0; i < p->n && use_path; i++) {
		struct plan_tool *t = &p->t[i];
		if (t->m->path.argv.n == 0)
			continue;
		t->on_path = path_fn(t->m, t->min, t->path_entry, sizeof(t->path_entry), t->path_version,
		                     sizeof(t->path_version), ctx) == 1;
	}
	for (i = 0; i < ops_n(o); i++) {
		if (ops_at(o, i)->ninstall == 0 || !mounted(ops_at(o, i), pol))
			continue;
		for (j = 0; j < ops_at(o, i)->ninstall; j++)
			visit(p, ops_at(o, i)->install[j], ops_at(o, i)->id, NULL);
	}
	return 0;
}

int
plan_path_check(const manifest_t *m, const char *min, char *entry, size_t ecap, char *version, size_t vcap,
                void *ctx)
{
	char self[PATH_MAX];
	ssize_t n;

	(void)ctx;
	/* the running binary is never a tool on PATH (the shims are links to it) */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	return install_path_find(m, min, self, entry, ecap, version, vcap);
}

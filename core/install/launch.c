/*
 * How a tool's entry runs (launch.h): the environment and argv rules the
 * shim, command ops and sessions share.
 */
#include "install/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"

void
launch_tool_of(struct launch_tool *t, const manifest_t *m)
{
	memset(t, 0, sizeof(*t));
	if (m == NULL)
		return;
	snprintf(t->bin, sizeof(t->bin), "%s", m->source.bin);
	memcpy(t->env, m->env, sizeof(t->env));
	t->nenv = m->nenv;
}

int
launch_tree(const struct launch_tool *t, const char *entry, char *tree, size_t cap)
{
	size_t el, bl;

	if (t == NULL || t->bin[0] == '\0' || entry == NULL || entry[0] != '/')
		return 0;
	el = strlen(entry);
	bl = strlen(t->bin);
	if (el <= bl + 1 || strcmp(entry + el - bl, t->bin) != 0 || entry[el - bl - 1] != '/')
		return 0;
	if (el - bl - 1 >= cap)
		return 0;
	memcpy(tree, entry, el - bl - 1);
	tree[el - bl - 1] = '\0';
	return 1;
}

/* "NAME=" + value with {tree} replaced, malloc'd; NULL when out of memory. */
static char *
env_word(const struct manifest_envvar *v, const char *tree)
{
	size_t n = strlen(v->name) + 2, tl = strlen(tree);
	const char *p;
	char *s, *o;

	for (p = v->value; *p; p++)
		n += strncmp(p, "{tree}", 6) == 0 ? tl : 1;
	if ((s = malloc(n)) == NULL)
		return NULL;
	o = s + sprintf(s, "%s=", v->name);
	for (p = v->value; *p;)
		if (strncmp(p, "{tree}", 6) == 0) {
			memcpy(o, tree, tl);
			o += tl;
			p += 6;
		} else {
			*o++ = *p++;
		}
	*o = '\0';
	return s;
}

static int
named(const char *word, const char *name)
{
	size_t n = strlen(name);

	return strncmp(word, name, n) == 0 && word[n] == '=';
}

char **
launch_env(const struct launch_tool *t, const char *entry, char *const *base, const char *path_prefix)
{
	char tree[PATH_MAX], **env;
	const char *oldpath = NULL;
	int nb = 0, k = 0, i, j, have_tree;

	while (base != NULL && base[nb] != NULL)
		nb++;
	have_tree = launch_tree(t, entry, tree, sizeof(tree));
	env = calloc((size_t)nb + MANIFEST_MAX_ENV + 2, sizeof(*env));
	if (env == NULL)
		return NULL;
	for (i = 0; i < nb; i++) {
		int drop = 0;

		if (named(base[i], "PATH")) {
			oldpath = base[i] + 5;
			if (path_prefix != NULL && path_prefix[0] != '\0')
				continue;
		}
		for (j = 0; have_tree && j < t->nenv; j++)
			if (named(base[i], t->env[j].name))
				drop = 1;
		if (drop)
			continue;
		if ((env[k++] = strdup(base[i])) == NULL)
			goto oom;
	}
	if (path_prefix != NULL && path_prefix[0] != '\0') {
		const char *rest = oldpath != NULL ? oldpath : LAUNCH_DEFAULT_PATH;
		size_t n = strlen(path_prefix) + strlen(rest) + 7;

		if ((env[k] = malloc(n)) == NULL)
			goto oom;
		snprintf(env[k++], n, "PATH=%s%s%s", path_prefix, rest[0] ? ":" : "", rest);
	}
	for (j = 0; have_tree && j < t->nenv; j++)
		if (!t->env[j].unset && (env[k++] = env_word(&t->env[j], tree)) == NULL)
			goto oom;
	env[k] = NULL;
	return env;
oom:
	launch_env_free(env);
	return NULL;
}

void
launch_env_free(char **env)
{
	int i;

	for (i = 0; env != NULL && env[i] != NULL; i++)
		free(env[i]);
	free(env);
}

int
launch_argv(char **out, int cap, const char *node, char *const *flags, int nflags, const char *entry,
            char *const *args, int nargs)
{
	int k = 0, i;

	if ((node != NULL ? nflags + 2 : 1) + nargs > cap - 1)
		return -1;
	if (node != NULL) {
		out[k++] = (char *)node;
		for (i = 0; i < nflags; i++)
			out[k++] = flags[i];
	}
	out[k++] = (char *)entry;
	for (i = 0; i < nargs; i++)
		out[k++] = args[i];
	out[k] = NULL;
	return k;
}

void
launch_tools_path(const struct tools_chain *c, char *buf, size_t cap)
{
	size_t off = 0;
	struct stat st;
	char p[PATH_MAX];
	int i;

	if (cap == 0)
		return;
	buf[0] = '\0';
	for (i = 0; c != NULL && i < c->n; i++) {
		int n;

		if (fs_path_join(p, sizeof(p), c->d[i].path, "bin", NULL) < 0 || stat(p, &st) != 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		n = snprintf(buf + off, cap - off, "%s%s", off ? ":" : "", p);
		if (n < 0 || (size_t)n >= cap - off) {
			buf[off] = '\0';
			return;
		}
		off += (size_t)n;
	}
}

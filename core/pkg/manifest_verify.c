/*
 * The verify block's "env" (manifest.h): the variables a reviewed manifest
 * adds to its verify run's scrubbed environment, checked strictly.
 */
#include "pkg/manifest.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define INVALID "install.manifest_invalid"
_Static_assert(MANIFEST_NAME_MAX == 64 && MANIFEST_ARG_MAX == 256, "the messages name the limits");

/* Names a verify run's environment keeps for itself: PATH and HOME are its
 * isolation (the requirements' bin directories; a HOME in staging, so what
 * it writes is discarded), LANG and LC_* keep the output that expect is
 * matched in plain; LD_*, NODE_OPTIONS and NODE_PATH would make it check
 * other code than the tree's (a preloaded library, a --require); ABX_* are
 * ours. Returns the reason, or NULL when name may be set. */
static const char *
refused(const char *name)
{
	if (strcmp(name, "PATH") == 0 || strcmp(name, "HOME") == 0 || strcmp(name, "LANG") == 0 ||
	    strncmp(name, "LC_", 3) == 0)
		return "refused: PATH, HOME, LANG and LC_* are set by the verify run itself";
	if (strncmp(name, "LD_", 3) == 0 || strcmp(name, "NODE_OPTIONS") == 0 ||
	    strcmp(name, "NODE_PATH") == 0)
		return "refused: LD_*, NODE_OPTIONS and NODE_PATH would load other code than the tree's";
	if (strncmp(name, "ABX_", 4) == 0)
		return "refused: ABX_* are the server's own";
	return NULL;
}

/* What is wrong with one member NAME: value, or NULL. */
static const char *
bad_var(const struct json_member *mb)
{
	const char *k = mb->key, *why;
	size_t n = strlen(k), i;

	if (n == 0 || n >= MANIFEST_NAME_MAX || isdigit((unsigned char)k[0]))
		return "not a variable name ([A-Z_][A-Z0-9_]*, at most 63 bytes)";
	for (i = 0; i < n; i++)
		if (!(isupper((unsigned char)k[i]) || isdigit((unsigned char)k[i]) || k[i] == '_'))
			return "not a variable name ([A-Z_][A-Z0-9_]*, at most 63 bytes)";
	if ((why = refused(k)) != NULL)
		return why;
	if (mb->val.type != JSON_STRING || strlen(mb->val.u.str.s) != mb->val.u.str.len)
		return "expected a string";
	if (mb->val.u.str.len >= MANIFEST_ARG_MAX)
		return "longer than 255 bytes";
	for (i = 0; i < mb->val.u.str.len; i++)
		if ((unsigned char)mb->val.u.str.s[i] < 0x20 || (unsigned char)mb->val.u.str.s[i] > 0x7e)
			return "not printable ASCII";
	if (strchr(mb->val.u.str.s, '{') != NULL)
		return "placeholders are not substituted in verify.env";
	return NULL;
}

/* "verify": {"env": {"NAME": "literal value"}}: values without placeholders
 * (the run's tree is in staging: a path would differ from the installed
 * one). */
int
manifest_verify_env(manifest_t *m, const struct json_val *x, const char *file, struct err *e)
{
	size_t i;

	if (x->type != JSON_OBJECT)
		return err_set(e, INVALID, "%s: $.verify.env: expected an object of NAME: string", file);
	if (x->u.obj.n > MANIFEST_MAX_VERIFY_ENV)
		return err_set(e, INVALID, "%s: $.verify.env: more than %d variables", file,
		               MANIFEST_MAX_VERIFY_ENV);
	for (i = 0; i < x->u.obj.n; i++) {
		const struct json_member *mb = &x->u.obj.m[i];
		struct manifest_envvar *ev = &m->verify.env[m->verify.nenv];
		const char *why = bad_var(mb);

		if (why != NULL)
			return err_set(e, INVALID, "%s: $.verify.env.%.*s: %s", file, MANIFEST_NAME_MAX - 1,
			               mb->key, why);
		memcpy(ev->name, mb->key, strlen(mb->key) + 1);
		memcpy(ev->value, mb->val.u.str.s, mb->val.u.str.len + 1);
		m->verify.nenv++;
	}
	return 0;
}

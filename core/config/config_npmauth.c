/*
 * The npm mirror's credential, read here because the environment is the
 * configuration layer's to read: ABX_INSTALL_NPM_TOKEN, else the .npmrc-style
 * file install.mirrors.npm_auth_file names. It is a secret, so it is read
 * only when the mirror is about to be used, and never kept in struct config
 * (which check-config and doctor print).
 */
#include "config/config_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"

/* An .npmrc with a credential is a few lines; 64 KiB is far past any. */
#define NPMAUTH_FILE_MAX (64u << 10)

/* A value that can go in a header line: printable ASCII, no space (a token
 * or base64), so nothing in the file can add a header of its own. */
static int
value_ok(const char *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] <= ' ' || v[i] > '~')
			return 0;
	return n > 0;
}

/* The scope of an .npmrc line ("//host[:port]/path/" before ":_authToken")
 * applies to mirror when it is a prefix of the mirror's URL without its
 * scheme, ended by a slash: "//h/" covers https://h/npm, never https://h2/. */
static int
scope_ok(const char *mirror, const char *scope, size_t n)
{
	char m[CFG_URL_MAX + 2];
	size_t ml;

	ml = (size_t)snprintf(m, sizeof(m), "%s/", mirror + 6);
	return n > 2 && scope[n - 1] == '/' && n <= ml && memcmp(m, scope, n) == 0;
}

/* The first usable credential line of text into hdr. 1 found, 0 none,
 * -1 (e) for a ${VAR} npm would expand and we do not. */
static int
parse_npmrc(const char *mirror, char *text, char *hdr, size_t cap, const char *path, struct err *e)
{
	char *line, *next, *eq, *key, *colon;
	size_t n;

	for (line = text; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		line += strspn(line, " \t");
		n = strlen(line);
		while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
			line[--n] = '\0';
		if ((eq = strchr(line, '=')) == NULL || line[0] == '#' || line[0] == ';')
			continue;
		key = line;
		if (line[0] == '/') {
			if ((colon = memchr(line, ':', (size_t)(eq - line))) == NULL)
				continue;
			/* the last ':' before '=' ends the scope ("//h:8443/:_auth=") */
			while (memchr(colon + 1, ':', (size_t)(eq - colon - 1)) != NULL)
				colon = memchr(colon + 1, ':', (size_t)(eq - colon - 1));
			if (!scope_ok(mirror, line, (size_t)(colon - line)))
				continue;
			key = colon + 1;
		}
		n = (size_t)(eq - key);
		while (n > 0 && key[n - 1] == ' ')
			n--;
		eq += 1 + strspn(eq + 1, " ");
		if (strstr(eq, "${") != NULL)
			return err_set(
			    e, "install.npm_auth",
			    "%s: a ${VAR} in a credential line is not expanded here; put the token "
			    "in ABX_INSTALL_NPM_TOKEN instead",
			    path);
		if (!value_ok(eq, strlen(eq)))
			continue;
		if (n == 10 && memcmp(key, "_authToken", 10) == 0)
			return snprintf(hdr, cap, "Authorization: Bearer %s", eq) < (int)cap;
		if (n == 5 && memcmp(key, "_auth", 5) == 0)
			return snprintf(hdr, cap, "Authorization: Basic %s", eq) < (int)cap;
	}
	return 0;
}

int
config_npm_auth(const struct config *c, char *hdr, size_t cap, char *from, size_t fromcap, struct err *e)
{
	const char *tok = config_env("ABX_INSTALL_NPM_TOKEN"), *path = c->install.npm_auth_file;
	const char *m = c->install.npm_mirror;
	char *text = NULL;
	size_t len = 0;
	int r;

	hdr[0] = '\0';
	if (from != NULL && fromcap > 0)
		from[0] = '\0';
	if (m[0] == '\0' || (tok == NULL && path[0] == '\0'))
		return 0;
	if (strncmp(m, "https://", 8) != 0)
		return err_set(
		    e, "config.invalid",
		    "install.mirrors.npm %s: a credential (%s) is sent only over https, never to a "
		    "plain http mirror",
		    m, tok != NULL ? "ABX_INSTALL_NPM_TOKEN" : "install.mirrors.npm_auth_file");
	if (tok != NULL) {
		if (!value_ok(tok, strlen(tok)) ||
		    snprintf(hdr, cap, "Authorization: Bearer %s", tok) >= (int)cap) {
			hdr[0] = '\0';
			return err_set(
			    e, "install.npm_auth",
			    "ABX_INSTALL_NPM_TOKEN is not a token (printable characters, no space)");
		}
		if (from != NULL)
			snprintf(from, fromcap, "ABX_INSTALL_NPM_TOKEN");
		return 1;
	}
	if (fs_read_input(path, NPMAUTH_FILE_MAX, &text, &len, e) != 0) {
		return err_set(e, "install.npm_auth", "install.mirrors.npm_auth_file: %s", e->msg);
	}
	r = parse_npmrc(m, text, hdr, cap, path, e);
	memset(text, 0, len);
	free(text);
	if (r == 0) {
		hdr[0] = '\0';
		return err_set(
		    e, "install.npm_auth",
		    "install.mirrors.npm_auth_file %s: no _authToken= or _auth= line for %s (unscoped, "
		    "or scoped \"//host/path/:\" to it)",
		    path, m);
	}
	if (r == 1 && from != NULL)
		snprintf(from, fromcap, "install.mirrors.npm_auth_file %s", path);
	return r;
}

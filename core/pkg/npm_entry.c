/*
 * What an npm package says about itself once extracted (npm.h): its purl
 * and how its bin entry runs.
 */
#include "pkg/npm.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int
npm_purl(const struct npmlock_pkg *p, char *buf, size_t cap)
{
	int n;

	if (p->name[0] == '@')
		n = snprintf(buf, cap, "pkg:npm/%%40%s@%s", p->name + 1, p->version ? p->version : "");
	else
		n = snprintf(buf, cap, "pkg:npm/%s@%s", p->name, p->version ? p->version : "");
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Append len bytes of s to dst (n used of cap): 0, or -1 when cut. */
static int
put(char *dst, size_t cap, size_t *n, const char *s, size_t len)
{
	size_t room = cap - 1 - *n;

	memcpy(dst + *n, s, len < room ? len : room);
	*n += len < room ? len : room;
	dst[*n] = '\0';
	return len > room ? -1 : 0;
}

void
npm_source_set(char *dst, size_t cap, const char *prefix, const char *src)
{
	const char *auth = strstr(src, "://"), *rest = src;
	size_t n = 0, keep;
	int cut;

	if (cap < 4) {
		if (cap > 0)
			dst[0] = '\0';
		return;
	}
	dst[0] = '\0';
	cut = put(dst, cap, &n, prefix, strlen(prefix));
	if (auth != NULL) {
		/* a URL: no userinfo (the client refuses one anyway), no query
		 * or fragment */
		const char *at;
		auth += 3;
		at = memchr(auth, '@', strcspn(auth, "/?#"));
		cut |= put(dst, cap, &n, src, (size_t)(auth - src));
		rest = at != NULL ? at + 1 : auth;
		keep = strcspn(rest, "?#");
	} else
		keep = strlen(rest);
	cut |= put(dst, cap, &n, rest, keep);
	if (cut)
		memcpy(dst + cap - 4, "...", 4);
}

int
npm_js_entry(const char *path, char *buf, size_t cap, char **flags, int *nflags)
{
	const char *dot;
	char *p, *tok, *save = NULL;
	ssize_t n;
	int fd, js = 0, after = 0;

	*nflags = 0;
	if (cap < 3)
		return -1;
	dot = strrchr(path, '.');
	if (dot && strchr(dot, '/') == NULL &&
	    (strcmp(dot, ".js") == 0 || strcmp(dot, ".mjs") == 0 || strcmp(dot, ".cjs") == 0))
		js = 1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	if (n < 2 || buf[0] != '#' || buf[1] != '!')
		return js;
	buf[strcspn(buf, "\r\n")] = '\0';
	/* A shebang naming another interpreter (sh, python) runs directly, even
	 * for a .js name: the kernel knows what to do with it. */
	for (tok = strtok_r(buf + 2, " \t", &save); tok != NULL; tok = strtok_r(NULL, " \t", &save)) {
		if (after) {
			if (*nflags < NPM_NODE_FLAGS_MAX)
				flags[(*nflags)++] = tok;
			continue;
		}
		p = strrchr(tok, '/');
		p = p ? p + 1 : tok;
		if (strcmp(p, "node") == 0 || strcmp(p, "nodejs") == 0)
			after = 1;
	}
	return after;
}

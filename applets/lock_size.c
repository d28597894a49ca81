/*
 * lock's unpacked sizes: an artifact (a tarball source's, or each npm
 * package a platform installs) is downloaded into an unlinked temporary
 * file and extracted into a scratch directory by the installer's own
 * extractor and options, its regular files' bytes counted; the manifest's
 * unpacked_size records the largest tree of each platform. The sizes only
 * feed the free-space check and prepare --dry-run, so an npm package is not
 * held to its integrity here (the install is).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "config/config.h"
#include "pkg/arc.h"
#include "pkg/manifest.h"
#include "pkg/npmlock.h"
#include "lock.h"

struct fsink {
	int fd;
	struct digest_ctx d;
};

static int
file_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	struct fsink *s = arg;

	digest_update(&s->d, buf, len);
	if (fs_write_all(s->fd, buf, len, -1) != 0)
		return err_sys(e, "io.error", errno, "writing a temporary file");
	return 0;
}

int
lock_measure(struct http_client *hc, const char *url, struct hosts *h, int npm, int strip, char *hex,
             uint64_t *bytes, struct err *e)
{
	const char *tmp = config_env("TMPDIR");
	char scratch[PATH_MAX];
	struct arc_opts ao;
	struct arc_stats st = {0};
	struct fsink s;
	struct digest d;
	int dfd, rc;

	tmp = tmp != NULL && *tmp == '/' ? tmp : "/tmp";
	if ((s.fd = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
		return err_sys(e, "io.error", errno, "a temporary file in %s", tmp);
	digest_init(&s.d, DIGEST_SHA256);
	if (lock_get(hc, url, h, NULL, file_sink, &s, LOCK_DOWNLOAD_MAX, NULL, e) != 0) {
		close(s.fd);
		return -1;
	}
	digest_final(&s.d, &d);
	if (hex != NULL)
		digest_hex(&d, hex);
	snprintf(scratch, sizeof(scratch), "%s/abx-lock-XXXXXX", tmp);
	if (mkdtemp(scratch) == NULL || (dfd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = err_sys(e, "io.error", errno, "a scratch directory in %s", tmp);
		close(s.fd);
		return rc;
	}
	arc_opts_init(&ao, npm ? ARC_FMT_TAR_GZ : arc_format_from_name(url));
	ao.flags = npm ? ARC_NPM : ARC_STRICT_MODES;
	ao.strip_components = strip;
	rc = lseek(s.fd, 0, SEEK_SET) == 0 ? arc_extract_fd(s.fd, dfd, &ao, &st, e) : -1;
	close(dfd);
	close(s.fd);
	fs_rm_tree(scratch, NULL);
	*bytes = st.bytes;
	return rc;
}

/* The value of member v in the text: its first byte and one past its last
 * (an object, array, string or scalar). */
static size_t
value_end(const char *t, size_t n, size_t at)
{
	int depth = 0, str = 0;

	for (; at < n; at++) {
		if (str) {
			if (t[at] == '\\')
				at++;
			else if (t[at] == '"')
				str = 0;
			if (!str && depth == 0)
				return at + 1;
			continue;
		}
		if (t[at] == '"')
			str = 1;
		else if (t[at] == '{' || t[at] == '[')
			depth++;
		else if (t[at] == '}' || t[at] == ']') {
			if (--depth <= 0)
				return at + (depth == 0);
		} else if (depth == 0 && (t[at] == ',' || t[at] == '\n'))
			return at;
	}
	return n;
}

int
lock_set_unpacked(struct doc *d, const char plat[][16], const uint64_t *bytes, int n, struct err *e)
{
	const struct json_val *v = json_get(d->j.root, "unpacked_size");
	char val[160], ins[200];
	size_t o = 0, a, b;
	int i;

	o += (size_t)snprintf(val, sizeof(val), "{");
	for (i = 0; i < n && o < sizeof(val); i++)
		o += (size_t)snprintf(val + o, sizeof(val) - o, "%s\"%s\": %llu", i ? ", " : "", plat[i],
		                      (unsigned long long)bytes[i]);
	if (o + 2 > sizeof(val))
		return err_set(e, "internal", "unpacked_size too long");
	memcpy(val + o, "}", 2);
	if (v != NULL && v->line >= 1 && (size_t)v->line <= d->nlines) {
		a = d->lines[v->line - 1] + (size_t)v->col - 1;
		b = value_end(d->text, d->len, a);
		if (b - a == strlen(val) && memcmp(d->text + a, val, b - a) == 0)
			return 0;
		return lock_edit(d, a, b, val, e);
	}
	/* a new last member of the root object, indented as the first */
	for (b = d->len; b > 0 && d->text[b - 1] != '}'; b--)
		;
	for (a = b - (b > 0); a > 0 && strchr(" \t\r\n", d->text[a - 1]) != NULL; a--)
		;
	if (b == 0 || d->nlines < 2)
		return err_set(e, "install.manifest_invalid", "%s: cannot locate where to add unpacked_size",
		               d->path);
	for (i = 0; d->text[d->lines[1] + (size_t)i] == ' ' || d->text[d->lines[1] + (size_t)i] == '\t'; i++)
		;
	snprintf(ins, sizeof(ins), ",\n%.*s\"unpacked_size\": %s", i, d->text + d->lines[1], val);
	return lock_edit(d, a, a, ins, e);
}

/* The "node_modules/<package>" prefix of an expanded bin naming another
 * package than the tool's (the one platform build installed), into only;
 * "" when the bin is the tool's own. */
static void
bin_only(const char *bin, const char *package, char *only, size_t cap)
{
	const char *p = bin + 13;
	size_t k;

	only[0] = '\0';
	if (strncmp(bin, "node_modules/", 13) != 0 || *p == '.' ||
	    (*p == '@' && (p = strchr(p, '/')) == NULL) || (p = strchr(p + 1, '/')) == NULL)
		return;
	k = (size_t)(p - bin);
	if (k < cap && (k - 13 != strlen(package) || strncmp(bin + 13, package, k - 13) != 0))
		snprintf(only, cap, "%.*s", (int)k, bin);
}

/* Sizes measured so far, by resolved URL: a package shared by several
 * variants is downloaded once. */
struct measured {
	char *url; /* owned: each variant's lockfile document is freed */
	uint64_t bytes;
};

/* The tree of one platform variant: every package npmlock selects for it
 * (inBundle ones arrive inside their parent). 1 when the variant exists,
 * 0 when the lockfile has no build for it, -1 with e. */
static int
variant_size(const struct lock_npm_sizes *z, const struct npmlock_opts *lo, struct measured *ms, size_t *nms,
             uint64_t *sum, struct err *e)
{
	struct npmlock l;
	size_t i, k;

	if (npmlock_load(&l, z->text, z->len, lo, e) != 0)
		return -1;
	for (i = 0; lo->only != NULL && i < l.npkgs && strcmp(l.pkgs[i].path, lo->only) != 0; i++)
		;
	if (lo->only != NULL && i == l.npkgs) {
		npmlock_free(&l);
		return 0;
	}
	*sum = 0;
	for (i = 0; i < l.npkgs; i++) {
		const struct npmlock_pkg *p = &l.pkgs[i];

		if (p->in_bundle || p->resolved == NULL)
			continue;
		for (k = 0; k < *nms && strcmp(ms[k].url, p->resolved) != 0; k++)
			;
		if (k == *nms) {
			lock_say("%s: measuring %s@%s\n", z->file, p->name, p->version);
			if (lock_measure(z->hc, p->resolved, z->h, 1, 0, NULL, &ms[k].bytes, e) != 0) {
				npmlock_free(&l);
				return -1;
			}
			if ((ms[k].url = strdup(p->resolved)) == NULL) {
				npmlock_free(&l);
				return err_set(e, "internal", "out of memory");
			}
			(*nms)++;
		}
		*sum += ms[k].bytes;
	}
	npmlock_free(&l);
	return 1;
}

int
lock_npm_sizes(const struct lock_npm_sizes *z, char plat[][16], uint64_t *bytes, int *n, struct err *e)
{
	static const char *const all[] = {MANIFEST_PLATFORM_X64, MANIFEST_PLATFORM_ARM64, NULL};
	struct measured *ms = calloc(NPMLOCK_PKGS_MAX, sizeof(*ms));
	char bin[MANIFEST_RELPATH_MAX], only[NPMLOCK_PATH_MAX];
	struct npmlock_opts lo;
	size_t nms = 0;
	uint64_t sum, best;
	int p, k, musl, base, levels = 0, rc = 0, found;

	if (ms == NULL)
		return err_set(e, "internal", "out of memory");
	*n = 0;
	for (p = 0; all[p] != NULL && rc >= 0; p++) {
		for (k = 0; k < z->nplatforms && strcmp(z->platforms[k], all[p]) != 0; k++)
			;
		if (z->nplatforms > 0 && k == z->nplatforms)
			continue;
		best = 0, found = 0;
		for (musl = 0; musl < 2 && rc >= 0; musl++)
			for (base = 0; base <= levels && rc >= 0; base++) {
				memset(&lo, 0, sizeof(lo));
				lo.package = z->package;
				lo.hosts = z->h->h;
				lo.nhosts = z->h->n;
				lo.os = "linux";
				lo.cpu = npmlock_cpu_for(all[p]);
				lo.libc = musl ? "musl" : "glibc";
				if ((levels = manifest_bin_expand(z->bin, all[p], musl, base, bin,
				                                  sizeof(bin))) < 0) {
					rc = err_set(e, "install.manifest_invalid",
					             "%s: $.source.bin: not expandable", z->file);
					break;
				}
				bin_only(bin, z->package, only, sizeof(only));
				lo.only = only[0] ? only : NULL;
				if ((rc = variant_size(z, &lo, ms, &nms, &sum, e)) > 0 && sum > best)
					best = sum;
				found |= rc > 0;
			}
		if (rc >= 0 && found && best > 0) {
			snprintf(plat[*n], 16, "%s", all[p]);
			bytes[(*n)++] = best;
			lock_say("%s: %s: unpacked %llu bytes (%llu MiB)\n", z->file, all[p],
			         (unsigned long long)best, (unsigned long long)((best + 1048575) >> 20));
		}
	}
	while (nms > 0)
		free(ms[--nms].url);
	free(ms);
	return rc < 0 ? -1 : 0;
}

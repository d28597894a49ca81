/*
 * lock: pin a tool's artifacts (tarball sources) or produce its lockfile
 * (npm-lock sources, applets/lock_npm.c) on a connected machine, rewriting
 * the manifest in place so the change reviews as one line per pin: the text
 * is edited where the values stand, key order and layout kept, never
 * re-serialised.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/digest.h"
#include "net/hostrule.h"
#include "net/http.h"
#include "base/json.h"
#include "pkg/manifests_embed.h"
#include "pkg/npmlock.h"
#include "lock.h"

static const char usage[] =
    "usage: agent-sandbox-server lock NAME [--version V] [--manifests DIR] [--check]\n"
    "\n"
    "On a connected machine (CI), pin tool NAME's manifest in DIR (default:\n"
    "--manifests, else $ABX_MANIFESTS_DIR, else ./manifests):\n"
    "  tarball   download every platform's artifact from the manifest's hosts\n"
    "            and write its sha256 into the manifest;\n"
    "  npm-lock  run `npm install --package-lock-only --ignore-scripts` for\n"
    "            package@V in a scratch directory (every platform's optional\n"
    "            packages are recorded), validate the lockfile with the same\n"
    "            loader as installs, and write it and its package.json beside\n"
    "            the manifest. A lockfile that breaks a rule is refused.\n"
    "The manifest is edited in place (key order and layout kept); with\n"
    "--version V its version (and the version inside its URLs, verify.expect\n"
    "and path.min) becomes V. Without --version the current version is\n"
    "re-pinned; `--version latest` asks the registry (npm-lock).\n"
    "\n"
    "  --version V       the version to pin\n"
    "  --manifests DIR   the manifests directory to edit\n"
    "  --check           change nothing; exit 1 when a pin is stale or (npm-lock)\n"
    "                    the registry has a newer version (asked by our own\n"
    "                    client, or the mirror ABX_INSTALL_NPM_REGISTRY); with no\n"
    "                    manifests directory, the manifests built into this binary\n"
    "  -q                only errors\n"
    "\n"
    "Environment: ABX_NPM (the npm to run, default npm on PATH), SSL_CERT_FILE\n"
    "(also handed to npm as NODE_EXTRA_CA_CERTS), HTTPS_PROXY, NO_PROXY.\n";

/* A manifest is a few KiB (core/manifest.h allows 256 KiB). */
#define LOCK_MANIFEST_MAX (256u << 10)
/* Largest artifact lock downloads (Node.js is ~50 MiB). */
#define LOCK_DOWNLOAD_MAX (2LL << 30)

static int quiet;

void
lock_say(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static int
read_embedded(const char *name, size_t max, char **out, size_t *len, struct err *e)
{
	struct embedded_file *f;
	const char *text;

	while (*name == '/')
		name++;
	for (f = embedded_manifests; f->path != NULL; f++)
		if (strcmp(f->path, name) == 0)
			break;
	if (f->path == NULL)
		return err_set(e, "not_found", "%s%s: not embedded in this binary", LOCK_EMBEDDED, name);
	if (f->len > max)
		return err_set(e, "io.error", "%s%s: larger than %zu bytes", LOCK_EMBEDDED, name, max);
	if ((text = embedded_text(f, e)) == NULL)
		return -1;
	if ((*out = malloc(f->len + 1)) == NULL)
		return err_set(e, "internal", "out of memory");
	memcpy(*out, text, f->len);
	(*out)[f->len] = '\0';
	*len = f->len;
	return 0;
}

int
lock_read_file(const char *path, size_t max, char **out, size_t *len, struct err *e)
{
	FILE *f;
	char *b;
	size_t n;

	if (strncmp(path, LOCK_EMBEDDED, strlen(LOCK_EMBEDDED)) == 0)
		return read_embedded(path + strlen(LOCK_EMBEDDED), max, out, len, e);
	if ((f = fopen(path, "rb")) == NULL)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	b = malloc(max + 1);
	if (b == NULL) {
		fclose(f);
		return err_set(e, "internal", "out of memory");
	}
	n = fread(b, 1, max + 1, f);
	fclose(f);
	if (n > max) {
		free(b);
		return err_set(e, "io.error", "%s: larger than %zu bytes", path, max);
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

/* Write buf to path through a temporary file and rename. */
int
lock_write_atomic(const char *path, const char *buf, size_t n, struct err *e)
{
	char tmp[PATH_MAX + 32];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", tmp, strerror(errno));
	if (write(fd, buf, n) != (ssize_t)n || fsync(fd) != 0 || close(fd) != 0) {
		unlink(tmp);
		return err_sys(e, "io.error", errno, "%s: %s", tmp, strerror(errno));
	}
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	}
	return 0;
}

int
lock_mkdir_parents(const char *path)
{
	char b[PATH_MAX], *p;

	snprintf(b, sizeof(b), "%s", path);
	for (p = b + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(b, 0755) != 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return 0;
}

/* ---- the manifest text and its edits ---------------------------------- */

static int
doc_load(struct doc *d, const char *path, struct err *e)
{
	size_t i;

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
	if (lock_read_file(path, LOCK_MANIFEST_MAX, &d->text, &d->len, e) != 0)
		return -1;
	if (json_parse(&d->j, d->text, d->len, NULL, e) != 0)
		return -1;
	if (d->j.root->type != JSON_OBJECT)
		return err_set(e, "install.manifest_invalid", "%s: not a JSON object", path);
	d->lines = malloc((d->len + 2) * sizeof(size_t));
	if (d->lines == NULL)
		return err_set(e, "internal", "out of memory");
	d->lines[d->nlines++] = 0;
	for (i = 0; i < d->len; i++)
		if (d->text[i] == '\n')
			d->lines[d->nlines++] = i + 1;
	return 0;
}

static void
doc_free(struct doc *d)
{
	int i;

	for (i = 0; i < d->ned; i++)
		free(d->ed[i].with);
	json_free(&d->j);
	free(d->text);
	free(d->lines);
}

/* Byte span [start, end) of a string value in the text, quotes included. */
static int
span_of(const struct doc *d, const struct json_val *v, size_t *start, size_t *end)
{
	size_t o, i;

	if (v->line < 1 || (size_t)v->line > d->nlines)
		return -1;
	o = d->lines[v->line - 1] + (size_t)v->col - 1;
	if (o >= d->len || d->text[o] != '"')
		return -1;
	for (i = o + 1; i < d->len; i++) {
		if (d->text[i] == '\\')
			i++;
		else if (d->text[i] == '"')
			break;
	}
	if (i >= d->len)
		return -1;
	*start = o;
	*end = i + 1;
	return 0;
}

static int
add_edit(struct doc *d, size_t start, size_t end, const char *with, struct err *e)
{
	if (d->ned >= LOCK_EDITS_MAX)
		return err_set(e, "internal", "too many edits");
	d->ed[d->ned].start = start;
	d->ed[d->ned].end = end;
	d->ed[d->ned].with = strdup(with);
	if (d->ed[d->ned].with == NULL)
		return err_set(e, "internal", "out of memory");
	d->ned++;
	return 0;
}

/* Replace string value v by s (JSON-escaped here). */
static int
set_string(struct doc *d, const struct json_val *v, const char *s, struct err *e)
{
	char q[4096];
	size_t a, b;

	if (v == NULL || v->type != JSON_STRING || span_of(d, v, &a, &b) != 0)
		return err_set(e, "install.manifest_invalid", "%s: cannot locate a string value to edit",
		               d->path);
	if (json_escape(q, sizeof(q), s) < 0)
		return err_set(e, "internal", "value too long");
	if (b - a == strlen(q) && memcmp(d->text + a, q, b - a) == 0)
		return 0; /* unchanged: no edit, no diff */
	return add_edit(d, a, b, q, e);
}

/* Insert `, "key": "value"` after string value after (same indentation as
 * the line that holds it). */
static int
insert_after(struct doc *d, const struct json_val *after, const char *key, const char *value, struct err *e)
{
	char ins[512];
	size_t a, b, ls, ind = 0;

	if (span_of(d, after, &a, &b) != 0)
		return err_set(e, "install.manifest_invalid", "%s: cannot locate where to add %s", d->path,
		               key);
	ls = d->lines[after->line - 1];
	while (ls + ind < d->len && (d->text[ls + ind] == ' ' || d->text[ls + ind] == '\t'))
		ind++;
	snprintf(ins, sizeof(ins), ",\n%.*s\"%s\": \"%s\"", (int)ind, d->text + ls, key, value);
	return add_edit(d, b, b, ins, e);
}

static int
cmp_edit(const void *x, const void *y)
{
	const struct edit *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The text with every edit applied (malloc'd). */
static char *
doc_render(struct doc *d, size_t *outlen)
{
	size_t n = d->len, o = 0, at = 0;
	char *out;
	int i;

	qsort(d->ed, (size_t)d->ned, sizeof(d->ed[0]), cmp_edit);
	for (i = 0; i < d->ned; i++)
		n += strlen(d->ed[i].with);
	out = malloc(n + 1);
	if (out == NULL)
		return NULL;
	for (i = 0; i < d->ned; i++) {
		memcpy(out + o, d->text + at, d->ed[i].start - at);
		o += d->ed[i].start - at;
		memcpy(out + o, d->ed[i].with, strlen(d->ed[i].with));
		o += strlen(d->ed[i].with);
		at = d->ed[i].end;
	}
	memcpy(out + o, d->text + at, d->len - at);
	o += d->len - at;
	out[o] = '\0';
	*outlen = o;
	return out;
}

/* s with every occurrence of from replaced by to, into out. */
static int
replace_all(const char *s, const char *from, const char *to, char *out, size_t cap)
{
	size_t o = 0, fl = strlen(from), tl = strlen(to);
	const char *p;

	if (fl == 0)
		return snprintf(out, cap, "%s", s) < (int)cap ? 0 : -1;
	while ((p = strstr(s, from)) != NULL) {
		if (o + (size_t)(p - s) + tl >= cap)
			return -1;
		memcpy(out + o, s, (size_t)(p - s));
		o += (size_t)(p - s);
		memcpy(out + o, to, tl);
		o += tl;
		s = p + fl;
	}
	if (o + strlen(s) >= cap)
		return -1;
	memcpy(out + o, s, strlen(s) + 1);
	return 0;
}

/* version, verify.expect, path.min follow a version change. */
int
lock_edit_version(struct doc *d, const char *old, const char *new, struct err *e)
{
	const struct json_val *root = d->j.root, *x;
	char buf[1024];

	if (strcmp(old, new) == 0)
		return 0;
	if (set_string(d, json_get(root, "version"), new, e) != 0)
		return -1;
	x = json_get(json_get(root, "verify"), "expect");
	if (x && x->type == JSON_STRING && strstr(x->u.str.s, old) &&
	    (replace_all(x->u.str.s, old, new, buf, sizeof(buf)) != 0 || set_string(d, x, buf, e) != 0))
		return -1;
	x = json_get(json_get(root, "path"), "min");
	if (x && x->type == JSON_STRING && strcmp(x->u.str.s, old) == 0 && set_string(d, x, new, e) != 0)
		return -1;
	return 0;
}

/* ---- hosts ------------------------------------------------------------ */

int
lock_load_hosts(const struct doc *d, struct hosts *h, struct err *e)
{
	const struct json_val *a = json_get(d->j.root, "hosts");
	size_t i;

	h->n = 0;
	if (a == NULL || a->type != JSON_ARRAY || a->u.arr.n == 0)
		return err_set(e, "install.manifest_invalid", "%s: $.hosts: missing or empty", d->path);
	for (i = 0; i < a->u.arr.n && h->n < LOCK_HOSTS_MAX; i++)
		if (a->u.arr.v[i].type == JSON_STRING)
			h->h[h->n++] = a->u.arr.v[i].u.str.s;
	return 0;
}

/* ---- tarball sources -------------------------------------------------- */

static int
hash_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	digest_update(arg, buf, len);
	return 0;
}

int
lock_get(struct http_client *hc, const char *url, struct hosts *h, const char *header, http_sink sink,
         void *sink_arg, uint64_t max, struct err *e)
{
	struct http_request rq;
	struct http_response *rs = malloc(sizeof(*rs));
	struct hostrule hr;
	int rc;

	if (rs == NULL)
		return err_set(e, "internal", "out of memory");
	http_request_init(&rq, url);
	if (header != NULL)
		rq.headers[rq.nheaders++] = header;
	hostrule_init(&hr, 0, "the manifest's hosts");
	hostrule_add(&hr, h->h, (int)h->n);
	rq.host_ok = hostrule_check;
	rq.host_arg = &hr;
	rq.sink = sink;
	rq.sink_arg = sink_arg;
	rq.limits.max_body = max;
	rc = http_request(hc, &rq, rs, e);
	free(rs);
	return rc;
}

static int
download_sha256(struct http_client *hc, const char *url, struct hosts *h, char hex[DIGEST_HEX_MAX],
                struct err *e)
{
	struct digest_ctx c;
	struct digest d;

	digest_init(&c, DIGEST_SHA256);
	if (lock_get(hc, url, h, NULL, hash_sink, &c, LOCK_DOWNLOAD_MAX, e) != 0)
		return -1;
	digest_final(&c, &d);
	digest_hex(&d, hex);
	return 0;
}

static int
lock_tarball(struct doc *d, const char *old, const char *new, int check, int *stale, struct err *e)
{
	const struct json_val *plat = json_get(json_get(d->j.root, "source"), "platforms");
	struct http_client *hc;
	struct hosts h;
	size_t i;
	char url[HTTP_URL_MAX], hex[DIGEST_HEX_MAX];

	if (plat == NULL || plat->type != JSON_OBJECT || plat->u.obj.n == 0)
		return err_set(e, "install.manifest_invalid", "%s: $.source.platforms: missing", d->path);
	if (lock_load_hosts(d, &h, e) != 0)
		return -1;
	if ((hc = config_http_client(e)) == NULL)
		return -1;
	for (i = 0; i < plat->u.obj.n; i++) {
		const struct json_member *m = &plat->u.obj.m[i];
		const struct json_val *u = json_get(&m->val, "url"), *s = json_get(&m->val, "sha256");

		if (u == NULL || u->type != JSON_STRING) {
			http_client_free(hc);
			return err_set(e, "install.manifest_invalid",
			               "%s: $.source.platforms.%s.url: missing", d->path, m->key);
		}
		if (replace_all(u->u.str.s, old, new, url, sizeof(url)) != 0) {
			http_client_free(hc);
			return err_set(e, "http.url", "URL too long");
		}
		lock_say("%s: downloading %s\n", m->key, url);
		if (download_sha256(hc, url, &h, hex, e) != 0) {
			http_client_free(hc);
			return -1;
		}
		if (check) {
			if (s == NULL || s->type != JSON_STRING || strcmp(s->u.str.s, hex) != 0) {
				*stale = 1;
				printf("%s: stale pin: manifest has %s, %s is %s\n", m->key,
				       s && s->type == JSON_STRING ? s->u.str.s : "(none)", url, hex);
			}
			continue;
		}
		lock_say("%s: sha256 %s\n", m->key, hex);
		if (strcmp(url, u->u.str.s) != 0 && set_string(d, u, url, e) != 0)
			goto fail;
		if (s != NULL) {
			if (set_string(d, s, hex, e) != 0)
				goto fail;
		} else if (insert_after(d, u, "sha256", hex, e) != 0) {
			goto fail;
		}
	}
	http_client_free(hc);
	return check ? 0 : lock_edit_version(d, old, new, e);
fail:
	http_client_free(hc);
	return -1;
}

/* ---- main --------------------------------------------------------------- */

int
lock_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"version", required_argument, NULL, 'V'},
	    {"manifests", required_argument, NULL, 'm'},
	    {"check", no_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *version = NULL, *dir = NULL, *name, *type, *old;
	char path[PATH_MAX];
	struct doc d;
	struct err e;
	struct stat sb;
	int c, check = 0, stale = 0, rc;

	err_clear(&e);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		switch (c) {
		case 'V':
			version = optarg;
			break;
		case 'm':
			dir = optarg;
			break;
		case 'c':
			check = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			return usage_help(usage);
		default:
			return bad_option("lock", usage, argc, argv);
		}
	}
	if (optind >= argc)
		return usage_error("lock", usage, "missing NAME");
	if (optind + 1 < argc)
		return usage_error("lock", usage, "unexpected argument %s", argv[optind + 1]);
	name = argv[optind];
	if (!npmlock_name_ok(name, strlen(name)) || name[0] == '@')
		return usage_error("lock", usage, "not a tool name: %s", name);
	if (version != NULL && (*version == '\0' || strpbrk(version, "/\\\"' ") != NULL))
		return usage_error("lock", usage, "not a version: %s", version);
	if (dir == NULL)
		dir = config_env("ABX_MANIFESTS_DIR");
	if (dir == NULL || *dir == '\0') {
		dir = "manifests";
		/* Outside a source checkout, --check reads the manifests built
		 * into this binary (nothing is written). */
		snprintf(path, sizeof(path), "%s/%s.json", dir, name);
		if (check && stat(path, &sb) != 0)
			dir = LOCK_EMBEDDED;
	}
	if (strcmp(dir, LOCK_EMBEDDED) == 0) {
		char *t;
		size_t tl;

		snprintf(path, sizeof(path), "%s%s.json", LOCK_EMBEDDED, name);
		if (lock_read_file(path, LOCK_MANIFEST_MAX, &t, &tl, &e) != 0) {
			err_set(&e, "not_found",
			        "no manifest %s.json in this binary and no %s/%s.json to check", name,
			        "manifests", name);
			err_print(&e);
			return EXIT_USAGE;
		}
		free(t);
		lock_say("%s: checking the manifest built into this binary\n", path);
	} else if (snprintf(path, sizeof(path), "%s/%s.json", dir, name), stat(path, &sb) != 0) {
		snprintf(path, sizeof(path), "%s/%s.unpinned.json", dir, name);
		if (stat(path, &sb) != 0) {
			err_set(&e, "not_found", "no manifest %s/%s.json to lock", dir, name);
			err_print(&e);
			return EXIT_USAGE;
		}
	}
	if (doc_load(&d, path, &e) != 0) {
		doc_free(&d);
		return fail(&e);
	}
	type = json_get_str(json_get(d.j.root, "source"), "type");
	old = json_get_str(d.j.root, "version");
	if (type == NULL || old == NULL) {
		err_set(&e, "install.manifest_invalid", "%s: $.source.type and $.version are needed", path);
		doc_free(&d);
		return fail(&e);
	}
	if (strcmp(type, "tarball") == 0) {
		if (version != NULL && strcmp(version, "latest") == 0) {
			err_set(&e, "usage", "tarball sources need an explicit --version");
			doc_free(&d);
			return fail(&e);
		}
		rc = lock_tarball(&d, old, version ? version : old, check, &stale, &e);
	} else if (strcmp(type, "npm-lock") == 0) {
		rc = lock_npm(&d, dir, old, version ? version : old, check, &stale, &e);
	} else {
		err_set(&e, "install.manifest_invalid", "%s: $.source.type: unknown type %s", path, type);
		rc = -1;
	}
	if (rc == 0 && !check && d.ned > 0) {
		size_t n;
		char *out = doc_render(&d, &n);
		if (out == NULL)
			rc = err_set(&e, "internal", "out of memory");
		else {
			struct json_doc chk;
			/* What we write must still be JSON. */
			if (json_parse(&chk, out, n, NULL, &e) != 0 ||
			    lock_write_atomic(path, out, n, &e) != 0)
				rc = -1;
			json_free(&chk);
			free(out);
		}
		if (rc == 0)
			lock_say("%s: %d change%s written\n", path, d.ned, d.ned == 1 ? "" : "s");
	} else if (rc == 0 && !check) {
		lock_say("%s: already up to date\n", path);
	}
	doc_free(&d);
	if (rc != 0)
		return fail(&e);
	if (check && stale)
		return EXIT_FAIL;
	if (check)
		lock_say("%s: pins are current\n", path);
	return EXIT_OK;
}

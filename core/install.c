/*
 * The install engine (SPEC §6). The order of the steps is the contract:
 * nothing is locked or written before the fast path has said "not ready",
 * nothing is published that was not fully fetched, verified, extracted and
 * checked, and a kill at any point leaves only staging directories and .cache/.tmp- files.
 */
#include "install.h"

/* Every path built here starts from a tools directory no longer than
 * TOOLS_DIR_MAX (tools.c refuses longer ones), so the PATH_MAX buffers
 * below cannot truncate; GCC cannot see that bound. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arc.h"
#include "cache.h"
#include "clock.h"
#include "digest.h"
#include "fs.h"
#include "http.h"
#include "json.h"
#include "launch.h"
#include "npm.h"
#include "npmlock.h"

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif

#define INSTALLER "agent-sandbox-server " ABX_VERSION

static const char *const state_names[] = {"ready",  "pending",  "missing",			"failed",
					  "read_only", "disabled", "network_unreachable"};

const char *
install_state_name(enum install_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

/* ---- small helpers ----------------------------------------------------- */


static void
iso_time(time_t t, char *buf, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int
path_join(char *buf, size_t cap, const char *a, const char *b)
{
	if ((size_t)snprintf(buf, cap, "%s/%s", a, b) >= cap) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static int
mkdir_mode(const char *path, mode_t mode, struct err *e)
{
	if (mkdir(path, mode) == 0) {
		chmod(path, mode); /* not narrowed by the umask: others read trees */
		return 0;
	}
	if (errno == EEXIST) {
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return err_set(e, "io.error", "%s exists and is not a directory", path);
	}
	return err_set(e, "io.error", "mkdir %s: %s", path, strerror(errno));
}

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ABX_TEST_PAUSE (see install.h): harmless unless a test sets it. */
void
install_test_pause(const char *phase)
{
	const char *p = config_env("ABX_TEST_PAUSE"), *env = config_env("ABX_SERVER_ENV");
	char line[80];
	int n, i;

	if (p == NULL || strcmp(p, phase) != 0 || (env != NULL && strcmp(env, "production") == 0))
		return;
	n = snprintf(line, sizeof(line), "install: paused at %s\n", phase);
	if (write(2, line, (size_t)n) < 0) {
		/* nothing to do */
	}
	for (i = 0; i < 300; i++)
		sleep_ms(100);
}

void
install_tool_env_name(const char *name, char *buf, size_t cap)
{
	size_t i, off = (size_t)snprintf(buf, cap, "ABX_TOOL_");

	for (i = 0; name[i] && off + 1 < cap; i++, off++) {
		char ch = name[i];
		buf[off] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z')) ? ch : '_';
	}
	buf[off < cap ? off : cap - 1] = '\0';
}

/* Map an error code to the ensure state. */
static enum install_state
state_of(const struct err *e)
{
	const char *c = e->code ? e->code : "";

	if (strcmp(c, "install.read_only") == 0)
		return INSTALL_READ_ONLY;
	if (strcmp(c, "install.disabled") == 0)
		return INSTALL_DISABLED;
	if (strcmp(c, "install.required") == 0)
		return INSTALL_MISSING;
	if (strcmp(c, "install.network_unreachable") == 0)
		return INSTALL_NETWORK_UNREACHABLE;
	return INSTALL_FAILED;
}

static void
details_phase(struct err *e, const char *phase)
{
	char d[64];

	snprintf(d, sizeof(d), "{\"phase\":\"%s\"}", phase);
	err_details(e, d);
}

void
install_fetch_failed(struct err *e, const manifest_t *m, const char *url, const char *msg)
{
	const char *under = e->code ? e->code : "internal";
	struct json_w w;

	/* a failed install is install.failed with its phase (SPEC §10); the
	 * client's code (http.*, tls.*) says what happened, in the message
	 * and in details.code */
	json_w_init(&w, ERR_DETAILS_MAX - 1);
	json_w_obj(&w);
	json_w_kstr(&w, "phase", "fetch");
	json_w_kstr(&w, "code", under);
	if (url != NULL)
		json_w_kstr(&w, "url", url);
	if (strcmp(under, "http.too_large") == 0)
		json_w_kstr(&w, "hint", "install.max_download_mb caps each download (artifact or npm package)");
	json_w_end(&w);
	if (url != NULL)
		err_set(e, "install.failed", "%s %s: fetching %s: %s: %s", m->name, m->version, url, under, msg);
	else
		err_set(e, "install.failed", "%s %s: fetch: %s: %s", m->name, m->version, under, msg);
	if (!w.overflow)
		err_details(e, w.buf);
	else
		details_phase(e, "fetch");
	json_w_free(&w);
}

/* ---- audit and progress ------------------------------------------------ */

void
install_audit(const struct install_settings *s, const char *json_object)
{
	static int warned;
	char path[PATH_MAX], line[8192];
	const char *f = s->audit_file;
	struct stat st;
	int fd, n;

	if (f != NULL && *f != '\0') {
		snprintf(path, sizeof(path), "%s", f);
	} else {
		if (tools_state_dir(s, path, sizeof(path) - 16) < 0 || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			return;
		strcat(path, "/audit.jsonl");
	}
	n = snprintf(line, sizeof(line), "%s\n", json_object);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	/* one write per line: concurrent installers never interleave */
	if (fd < 0 || write(fd, line, (size_t)n) != n) {
		if (!warned)
			warnx_line("audit file %s: %s; audit records are dropped until it can be written\n"
				   "  fix: create its directory, or set audit_file (ABX_SERVER_AUDIT_FILE) to a writable "
				   "file", path, strerror(errno));
		warned = 1;
	}
	if (fd >= 0)
		close(fd);
}

int
install_audit_check(const struct install_settings *s, struct err *e)
{
	const char *f = s->audit_file;
	int fd;

	if (f == NULL || *f == '\0')
		return 0;
	fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_set(e, "config.invalid", "audit_file %s: cannot be written (%s): create its directory, "
			       "or set audit_file (ABX_SERVER_AUDIT_FILE) to a writable file", f, strerror(errno));
	close(fd);
	return 0;
}

/* Optional members of an audit line. */
struct audit_extra {
	int ok;                 /* -1 absent, 0, 1 */
	int64_t duration_ms;    /* -1 absent */
	int64_t bytes;          /* -1 absent */
	const char *code, *artifact_sha256, *tree_sha256, *url, *sha256;
	const struct install_npm_info *npm;  /* npm-lock: lockfile digest, packages */
};

static void
audit_event(struct install_ctx *c, const char *event, const manifest_t *m, const struct audit_extra *x)
{
	struct json_w w;
	char ts[32];

	iso_time(time(NULL), ts, sizeof(ts));
	json_w_init(&w, 7000);
	json_w_obj(&w);
	json_w_kstr(&w, "ts", ts);
	json_w_kstr(&w, "event", event);
	json_w_kstr(&w, "tool", m->name);
	json_w_kstr(&w, "version", m->version);
	json_w_kstr(&w, "platform", c->platform);
	json_w_kstr(&w, "principal", c->principal ? c->principal : "cli");
	if (c->op != NULL)
		json_w_kstr(&w, "op", c->op);
	json_w_kint(&w, "pid", (int64_t)getpid());
	if (x != NULL) {
		if (x->ok >= 0)
			json_w_kbool(&w, "ok", x->ok);
		if (x->code)
			json_w_kstr(&w, "code", x->code);
		if (x->duration_ms >= 0)
			json_w_kint(&w, "duration_ms", x->duration_ms);
		if (x->bytes >= 0)
			json_w_kint(&w, "bytes", x->bytes);
		if (x->artifact_sha256)
			json_w_kstr(&w, "artifact_sha256", x->artifact_sha256);
		if (x->tree_sha256)
			json_w_kstr(&w, "tree_sha256", x->tree_sha256);
		if (x->url)
			json_w_kstr(&w, "url", x->url);
		if (x->sha256)
			json_w_kstr(&w, "sha256", x->sha256);
		if (x->npm != NULL) {
			json_w_kstr(&w, "lockfile_sha256", x->npm->lock_sha256);
			json_w_kint(&w, "packages", (int64_t)x->npm->packages);
			json_w_kint(&w, "downloaded_bytes", (int64_t)x->npm->downloaded);
		}
	}
	json_w_end(&w);
	install_audit(c->set, w.overflow ? "{\"event\":\"audit.overflow\"}" : w.buf);
	json_w_free(&w);
}

struct progress_state {
	struct install_ctx *c;
	const manifest_t *m;
	char path[PATH_MAX];    /* <w>/<name>/.progress.json, "" = none */
	char phase[16];
	time_t started;
	int64_t last_ms;
	uint64_t base;          /* bytes of earlier artifacts */
	struct install_progress cur; /* what is reported (install.h) */
	install_progress_fn fn; /* the context's own, while npm reports through us */
	void *arg;
};

/* Report p->cur in phase to the context's callback and in .progress.json
 * (tmp + rename; no fsync: it is advisory). */
static void
progress_write(struct progress_state *p, const char *phase, int force)
{
	char buf[256], tmp[PATH_MAX + 32];
	int64_t t = clock_ms();
	int fd, n;

	if (strcmp(p->phase, phase) != 0)
		force = 1;
	snprintf(p->phase, sizeof(p->phase), "%s", phase);
	if (p->cur.total < p->cur.bytes)
		p->cur.total = p->cur.bytes;
	if (p->fn != NULL && (force || t - p->last_ms >= 200))
		p->fn(p->arg, p->m->name, phase, &p->cur);
	if (p->path[0] == '\0' || (!force && t - p->last_ms < 200))
		return;
	p->last_ms = t;
	n = snprintf(buf, sizeof(buf),
		     "{\"phase\":\"%s\",\"bytes\":%llu,\"total\":%llu,\"done\":%u,\"count\":%u,\"started\":%lld,"
		     "\"pid\":%d}\n",
		     phase, (unsigned long long)p->cur.bytes, (unsigned long long)p->cur.total, p->cur.done,
		     p->cur.count, (long long)p->started, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.%d", p->path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return;
	if (write(fd, buf, (size_t)n) != n || close(fd) != 0 || rename(tmp, p->path) != 0)
		unlink(tmp);
}

int
install_progress_read(struct install_ctx *c, const char *name, char *phase, size_t cap,
		      struct install_progress *p, long *pid)
{
	char path[PATH_MAX], buf[512];
	struct json_doc doc = {0};
	const struct json_val *v;
	struct err e;
	ssize_t n;
	int i;

	for (i = 0; i < c->chain.n; i++) {
		snprintf(path, sizeof(path), "%s/%s/.progress.json", c->chain.d[i].path, name);
		n = fs_read_small(path, buf, sizeof(buf), &e);
		if (n <= 0)
			continue;
		if (json_parse(&doc, buf, (size_t)n, NULL, &e) < 0)
			continue;
		snprintf(phase, cap, "%s", json_get_str(doc.root, "phase") ? json_get_str(doc.root, "phase") : "?");
		v = json_get(doc.root, "bytes");
		p->bytes = v && v->type == JSON_NUMBER ? (uint64_t)v->u.num.d : 0;
		v = json_get(doc.root, "total");
		p->total = v && v->type == JSON_NUMBER ? (uint64_t)v->u.num.d : 0;
		v = json_get(doc.root, "done");
		p->done = v && v->type == JSON_NUMBER ? (uint32_t)v->u.num.d : 0;
		v = json_get(doc.root, "count");
		p->count = v && v->type == JSON_NUMBER ? (uint32_t)v->u.num.d : 0;
		v = json_get(doc.root, "pid");
		*pid = v && v->type == JSON_NUMBER ? (long)v->u.num.d : 0;
		json_free(&doc);
		return 0;
	}
	return -1;
}

/* ---- markers ------------------------------------------------------------ */

static void
copy_str(const struct json_val *o, const char *k, char *dst, size_t cap)
{
	const char *s = json_get_str(o, k);

	snprintf(dst, cap, "%s", s ? s : "");
}

int
install_marker_read(const char *dir, const char *name, struct install_marker *mk, struct err *e)
{
	char path[PATH_MAX], *buf = NULL;
	struct json_doc doc = {0};
	const struct json_val *v;
	size_t len;

	struct stat st;
	ssize_t got;
	int fd;

	memset(mk, 0, sizeof(*mk));
	if ((size_t)snprintf(path, sizeof(path), "%s/%s/.installed.json", dir, name) >= sizeof(path))
		return err_set(e, "io.error", "path too long");
	/* open + fstat + read + close: the fast path counts syscalls */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, errno == ENOENT ? "not_found" : "io.error", "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > INSTALL_MARKER_MAX ||
	    (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return err_set(e, "io.error", "%s: not a marker file", path);
	}
	got = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (got != (ssize_t)st.st_size) {
		free(buf);
		return err_set(e, "io.error", "%s: short read", path);
	}
	len = (size_t)got;
	buf[len] = '\0';
	mk->uid = st.st_uid;
	mk->mode = st.st_mode;
	if (json_parse(&doc, buf, len, NULL, e) < 0) {
		free(buf);
		return -1;
	}
	copy_str(doc.root, "name", mk->name, sizeof(mk->name));
	copy_str(doc.root, "version", mk->version, sizeof(mk->version));
	copy_str(doc.root, "platform", mk->platform, sizeof(mk->platform));
	copy_str(doc.root, "binary", mk->binary, sizeof(mk->binary));
	copy_str(doc.root, "bin", mk->bin, sizeof(mk->bin));
	copy_str(doc.root, "tree", mk->tree, sizeof(mk->tree));
	copy_str(doc.root, "manifest_sha256", mk->manifest_sha256, sizeof(mk->manifest_sha256));
	copy_str(doc.root, "tree_sha256", mk->tree_sha256, sizeof(mk->tree_sha256));
	copy_str(doc.root, "stat_proof", mk->stat_proof, sizeof(mk->stat_proof));
	copy_str(doc.root, "proof_sha256", mk->proof_sha256, sizeof(mk->proof_sha256));
	copy_str(doc.root, "installed_at", mk->installed_at, sizeof(mk->installed_at));
	if ((v = json_get(doc.root, "files")) && v->type == JSON_NUMBER)
		mk->files = (uint64_t)v->u.num.d;
	if ((v = json_get(doc.root, "bytes")) && v->type == JSON_NUMBER)
		mk->bytes = (uint64_t)v->u.num.d;
	json_free(&doc);
	free(buf);
	if (strcmp(mk->name, name) != 0 || mk->tree[0] == '\0' || strchr(mk->tree, '/') != NULL ||
	    strcmp(mk->tree, ".") == 0 || strcmp(mk->tree, "..") == 0 || mk->bin[0] == '\0' ||
	    strstr(mk->bin, "..") != NULL || mk->bin[0] == '/')
		return err_set(e, "io.error", "%s: not a valid marker", path);
	return 0;
}

/* ---- tree listings --------------------------------------------------------- */

struct tlist {
	char *buf;
	size_t len, cap;
	uint64_t files, bytes;
	struct err *e;
	unsigned char *io;      /* read buffer */
	const struct install_known *known; /* digests taken at extraction */
};

/* A listing over this is a hostile tree (npm trees of big CLIs are ~2 MiB). */
#define TREE_LIST_MAX (64u << 20)
#define TREE_IO 131072

static int
tl_put(struct tlist *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 65536;
		char *nb;
		while (nc < t->len + n + 1)
			nc *= 2;
		if (nc > TREE_LIST_MAX)
			return err_set(t->e, "install.failed", "tree listing larger than %u bytes", TREE_LIST_MAX);
		if ((nb = realloc(t->buf, nc)) == NULL)
			return err_set(t->e, "internal", "out of memory");
		t->buf = nb;
		t->cap = nc;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
	return 0;
}

/* path with '\\' and newlines escaped, then '\n' */
static int
tl_path(struct tlist *t, const char *rel)
{
	const char *p;

	for (p = rel; *p; p++) {
		if (*p == '\\' && tl_put(t, "\\\\", 2) < 0)
			return -1;
		else if (*p == '\n' && tl_put(t, "\\n", 2) < 0)
			return -1;
		else if (*p != '\\' && *p != '\n' && tl_put(t, p, 1) < 0)
			return -1;
	}
	return tl_put(t, "\n", 1);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
tl_walk(struct tlist *t, int dfd, const char *prefix, int depth)
{
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	int rc = 0, fd;

	if (depth > FS_MAX_DEPTH)
		return err_set(t->e, "install.failed", "%s: tree deeper than %d levels", prefix, FS_MAX_DEPTH);
	fd = dup(dfd);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return err_set(t->e, "io.error", "%s: %s", prefix[0] ? prefix : ".", strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n >= FS_MAX_DIR_ENTRIES) {
			rc = err_set(t->e, "install.failed", "%s: more than %d entries in one directory (the entry cap)",
			    prefix[0] ? prefix : ".", FS_MAX_DIR_ENTRIES);
			goto out;
		}
		if (n == cap) {
			char **nn;
			cap = cap ? cap * 2 : 64;
			if (cap > FS_MAX_DIR_ENTRIES)
				cap = FS_MAX_DIR_ENTRIES;
			if ((nn = realloc(names, cap * sizeof(*names))) == NULL) {
				rc = err_set(t->e, "internal", "out of memory");
				goto out;
			}
			names = nn;
		}
		if ((names[n] = strdup(de->d_name)) == NULL) {
			rc = err_set(t->e, "internal", "out of memory");
			goto out;
		}
		n++;
	}
	qsort(names, n, sizeof(*names), name_cmp);
	for (i = 0; i < n && rc == 0; i++) {
		char rel[PATH_MAX], line[200], hex[DIGEST_HEX_MAX];
		struct stat st;
		struct digest_ctx dc;
		struct digest dg;

		if ((size_t)snprintf(rel, sizeof(rel), "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]) >= sizeof(rel)) {
			rc = err_set(t->e, "install.failed", "path too long under %s", prefix);
			break;
		}
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
			rc = err_set(t->e, "io.error", "%s: %s", rel, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			snprintf(line, sizeof(line), "d %04o - - ", (unsigned)(st.st_mode & 07777));
			if (tl_put(t, line, strlen(line)) < 0 || tl_path(t, rel) < 0) {
				rc = -1;
				if (sub >= 0)
					close(sub);
				break;
			}
			if (sub < 0) {
				rc = err_set(t->e, "io.error", "%s: %s", rel, strerror(errno));
				break;
			}
			rc = tl_walk(t, sub, rel, depth + 1);
			close(sub);
		} else if (S_ISREG(st.st_mode) && install_known_get(t->known, rel, &st, dg.v)) {
			dg.alg = DIGEST_SHA256;
			dg.len = 32;
			digest_hex(&dg, hex);
			t->files++;
			t->bytes += (uint64_t)st.st_size;
			snprintf(line, sizeof(line), "f %04o %llu %s ", (unsigned)(st.st_mode & 07777),
				 (unsigned long long)st.st_size, hex);
			if (tl_put(t, line, strlen(line)) < 0 || tl_path(t, rel) < 0)
				rc = -1;
		} else if (S_ISREG(st.st_mode)) {
			int ffd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			ssize_t r;
			uint64_t got = 0;
			if (ffd < 0) {
				rc = err_set(t->e, "io.error", "%s: %s", rel, strerror(errno));
				break;
			}
			digest_init(&dc, DIGEST_SHA256);
			while ((r = read(ffd, t->io, TREE_IO)) > 0) {
				digest_update(&dc, t->io, (size_t)r);
				got += (uint64_t)r;
			}
			close(ffd);
			if (r < 0) {
				rc = err_set(t->e, "io.error", "%s: %s", rel, strerror(errno));
				break;
			}
			digest_final(&dc, &dg);
			digest_hex(&dg, hex);
			t->files++;
			t->bytes += got;
			snprintf(line, sizeof(line), "f %04o %llu %s ", (unsigned)(st.st_mode & 07777),
				 (unsigned long long)got, hex);
			if (tl_put(t, line, strlen(line)) < 0 || tl_path(t, rel) < 0)
				rc = -1;
		} else if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t r = readlinkat(dfd, names[i], target, sizeof(target) - 1);
			if (r < 0) {
				rc = err_set(t->e, "io.error", "%s: %s", rel, strerror(errno));
				break;
			}
			target[r] = '\0';
			digest_buf(DIGEST_SHA256, target, (size_t)r, &dg);
			digest_hex(&dg, hex);
			snprintf(line, sizeof(line), "l %04o %zd %s ", 0777u, r, hex);
			if (tl_put(t, line, strlen(line)) < 0 || tl_path(t, rel) < 0)
				rc = -1;
		} else {
			rc = err_set(t->e, "install.failed", "%s: not a file, directory or symlink", rel);
		}
	}
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

int
install_tree_list(const char *root, char **text, size_t *len, char hex[65], uint64_t *files, uint64_t *bytes,
		  struct err *e)
{
	return install_tree_list_known(root, NULL, text, len, hex, files, bytes, e);
}

int
install_tree_list_known(const char *root, const struct install_known *k, char **text, size_t *len, char hex[65],
			uint64_t *files, uint64_t *bytes, struct err *e)
{
	struct tlist t;
	struct digest dg;
	int dfd, rc;

	memset(&t, 0, sizeof(t));
	t.e = e;
	t.known = k;
	dfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return err_set(e, "io.error", "%s: %s", root, strerror(errno));
	if ((t.io = malloc(TREE_IO)) == NULL) {
		close(dfd);
		return err_set(e, "internal", "out of memory");
	}
	rc = tl_walk(&t, dfd, "", 0);
	close(dfd);
	free(t.io);
	if (rc == 0 && t.buf == NULL)
		rc = tl_put(&t, "", 0);
	if (rc < 0) {
		free(t.buf);
		return -1;
	}
	digest_buf(DIGEST_SHA256, t.buf, t.len, &dg);
	digest_hex(&dg, hex);
	if (files)
		*files = t.files;
	if (bytes)
		*bytes = t.bytes;
	if (text != NULL) {
		*text = t.buf;
		*len = t.len;
	} else {
		free(t.buf);
	}
	return 0;
}

/* ---- the stat proof ------------------------------------------------------ */

/*
 * The stat digest: the fast path's proof for markers written before proof
 * lists (install_proof.c, ~4x cheaper), still recorded so an older binary
 * sharing the tools directory keeps its fast path. A cheap proof that a
 * tree is unchanged since install (SPEC §6 step 1): sha256 over every
 * entry's name, mode, size, inode, ctime and mtime, in the order the
 * directories list them, with no file opened. Any write, chmod,
 * rename, link or replacement updates a ctime an unprivileged writer cannot
 * set back; a directory rewritten by other means (a copy, fsck) lists in
 * another order and merely sends the caller to the content digest. Lean on
 * purpose: one openat + getdents64 per directory, one fstatat per entry,
 * no allocation, because a Node.js tree is ~3000 entries and the budget is
 * a few milliseconds.
 */
struct linux_dirent64_ {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

#define SP_BUF 32768

static int
sp_walk(int dfd, struct digest_ctx *dc, int depth)
{
	/* one buffer per level on the heap: a deep tree must not exhaust a
	 * job thread's stack */
	char *buf;
	long n;
	int rc = 0;

	if (depth > FS_MAX_DEPTH || (buf = malloc(SP_BUF)) == NULL)
		return -1;
	while (rc == 0 && (n = syscall(SYS_getdents64, dfd, buf, SP_BUF)) > 0) {
		long off = 0;
		while (off < n) {
			struct linux_dirent64_ *d = (struct linux_dirent64_ *)(buf + off);
			struct stat st;
			uint64_t rec[7];

			off += d->d_reclen;
			if (d->d_name[0] == '.' && (d->d_name[1] == '\0' || (d->d_name[1] == '.' && d->d_name[2] == '\0')))
				continue;
			if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
				rc = -1;
				break;
			}
			rec[0] = st.st_mode;
			rec[1] = (uint64_t)st.st_size;
			rec[2] = st.st_ino;
			rec[3] = (uint64_t)st.st_ctim.tv_sec;
			rec[4] = (uint64_t)st.st_ctim.tv_nsec;
			rec[5] = (uint64_t)st.st_mtim.tv_sec;
			rec[6] = (uint64_t)st.st_mtim.tv_nsec;
			digest_update(dc, d->d_name, strlen(d->d_name) + 1);
			digest_update(dc, rec, sizeof(rec));
			if (S_ISDIR(st.st_mode)) {
				int sub = openat(dfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub < 0) {
					rc = -1;
					break;
				}
				rc = sp_walk(sub, dc, depth + 1);
				close(sub);
				if (rc < 0)
					break;
				digest_update(dc, "\0", 1); /* end of directory */
			}
		}
	}
	free(buf);
	return rc < 0 || n < 0 ? -1 : 0;
}

int
install_stat_proof(const char *root, char hex[65])
{
	struct digest_ctx dc;
	struct digest dg;
	struct stat st;
	uint64_t rec[4];
	int dfd, rc;

	dfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	digest_init(&dc, DIGEST_SHA256);
	/* the root's own mode and inode, not its ctime: publishing renames it */
	if (fstat(dfd, &st) != 0) {
		close(dfd);
		return -1;
	}
	rec[0] = st.st_mode;
	rec[1] = st.st_ino;
	rec[2] = (uint64_t)st.st_mtim.tv_sec;
	rec[3] = (uint64_t)st.st_mtim.tv_nsec;
	digest_update(&dc, rec, sizeof(rec));
	rc = sp_walk(dfd, &dc, 0);
	close(dfd);
	if (rc < 0)
		return -1;
	digest_final(&dc, &dg);
	digest_hex(&dg, hex);
	return 0;
}

/* ---- the fast path ------------------------------------------------------ */

/* Root-owned and not writable by us: a tree we cannot change, trusted on its
 * marker (SPEC §6 step 1). */
static int
root_trusted(const char *dir, const char *name, const char *tree, const struct install_marker *mk)
{
	char p[PATH_MAX];
	struct stat st;

	/* root itself can write anything: it re-proves the tree instead. A
	 * root-owned directory that is not group/world-writable cannot be
	 * written by another uid (which has no CAP_DAC_OVERRIDE). */
	if (geteuid() == 0 || mk->uid != 0 || (mk->mode & 022))
		return 0;
	if (lstat(tree, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022) || !S_ISDIR(st.st_mode))
		return 0;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (lstat(p, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022))
		return 0;
	return 1;
}

/*
 * The marker of name in dir, parsed once per context: a marker whose inode,
 * size, mtime and ctime are unchanged has unchanged content (a rewrite or a
 * replacement moves the ctime, which nobody can set back), so a server
 * calling ensure() per request does one stat instead of a read and a parse.
 */
static int
marker_cached(struct install_ctx *c, const char *dir, const char *name, struct install_marker *mk,
	      struct install_marker_slot **slotp)
{
	char path[PATH_MAX];
	struct stat st;
	struct err e;
	int i, slot = -1;

	*slotp = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s/.installed.json", dir, name) >= sizeof(path) ||
	    lstat(path, &st) != 0)
		return -1;
	for (i = 0; i < INSTALL_MARKER_CACHE; i++) {
		struct install_marker_slot *s = &c->mcache[i];
		if (s->used && s->dev == st.st_dev && s->ino == st.st_ino && s->size == st.st_size &&
		    s->mtime_ns == (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec &&
		    s->ctime_ns == (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec &&
		    strcmp(s->path, path) == 0) {
			*mk = s->mk;
			*slotp = s;
			return 0;
		}
	}
	if (install_marker_read(dir, name, mk, &e) < 0)
		return -1;
	for (i = 0; i < INSTALL_MARKER_CACHE && slot < 0; i++)
		if (!c->mcache[i].used || strcmp(c->mcache[i].path, path) == 0)
			slot = i;
	if (slot < 0)
		slot = (int)(st.st_ino % INSTALL_MARKER_CACHE);
	{
		struct install_marker_slot *s = &c->mcache[slot];
		install_proof_cache_put(s->proof_ref);
		s->proof_ref = NULL;
		s->proof = NULL;
		s->proof_len = 0;
		s->used = 1;
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		s->size = st.st_size;
		s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		s->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
		snprintf(s->path, sizeof(s->path), "%s", path);
		s->mk = *mk;
		/* the fstat of the read saw the same file only if nothing moved */
		if (mk->uid != st.st_uid || mk->mode != st.st_mode)
			s->used = 0;
		else
			*slotp = s;
	}
	return 0;
}

/*
 * The proof list the marker names, read once per marker: the copy kept in
 * the marker's slot was checked against the marker's sha256, so it stays
 * what the marker vouches for whatever happens to the file later. Across
 * contexts (serve makes one per request) the process-wide cache
 * (install_proof_cache_get) spares reading and hashing it again. Returns
 * the list, *ref to release when not kept in the slot, or NULL.
 */
static const char *
proof_list(const char *dir, const char *name, const struct install_marker *mk, struct install_marker_slot *slot,
	   size_t *len, struct install_proof_ref **ref)
{
	char path[PATH_MAX];
	const char *buf;

	*ref = NULL;
	if (slot != NULL && slot->proof != NULL) {
		*len = slot->proof_len;
		return slot->proof;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%s/.installed.proof", dir, name) >= sizeof(path))
		return NULL;
	if ((buf = install_proof_cache_get(path, mk->proof_sha256, len, ref)) == NULL)
		return NULL;
	if (slot != NULL) {
		slot->proof = buf;
		slot->proof_len = *len;
		slot->proof_ref = *ref;
		*ref = NULL;
	}
	return buf;
}

/* Is the tool ready in dir? 1 yes (r filled), 0 no. */
static int
ready_in(struct install_ctx *c, const manifest_t *m, const char *dir, struct install_result *r)
{
	struct install_marker mk;
	struct install_marker_slot *slot;
	char tree[PATH_MAX], entry[PATH_MAX], hex[FS_HEX_LEN];
	struct stat st;
	struct err e;

	if (marker_cached(c, dir, m->name, &mk, &slot) < 0)
		return 0;
	if (!ct_equal(mk.manifest_sha256, m->sha256, 64) || strcmp(mk.platform, c->platform) != 0 ||
	    strcmp(mk.version, m->version) != 0)
		return 0;
	if (snprintf(tree, sizeof(tree), "%s/%s/%s", dir, m->name, mk.tree) >= (int)sizeof(tree) ||
	    snprintf(entry, sizeof(entry), "%s/%s", tree, m->source.bin) >= (int)sizeof(entry))
		return 0;
	if (stat(entry, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (!root_trusted(dir, m->name, tree, &mk)) {
		/* a tree we (or our user) can write: prove it unchanged, by
		 * the proof list, or by the stat digest of a marker older than
		 * proof lists, else by the content digest */
		int same = 0;
		if (mk.proof_sha256[0] != '\0') {
			size_t plen = 0;
			struct install_proof_ref *ref;
			const char *pl = proof_list(dir, m->name, &mk, slot, &plen, &ref);
			same = pl != NULL && install_proof_check(tree, pl, plen) == 1;
			install_proof_cache_put(ref);
		} else if (mk.stat_proof[0] != '\0') {
			same = install_stat_proof(tree, hex) == 0 && ct_equal(hex, mk.stat_proof, 64);
		}
		if (!same &&
		    (install_tree_list(tree, NULL, NULL, hex, NULL, NULL, &e) < 0 || !ct_equal(hex, mk.tree_sha256, 64)))
			return 0;
	}
	r->state = INSTALL_READY;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	snprintf(r->tree, sizeof(r->tree), "%s", tree);
	snprintf(r->entry, sizeof(r->entry), "%s", entry);
	return 1;
}

int
install_fast_path(struct install_ctx *c, const manifest_t *m, struct install_result *r, struct err *e)
{
	int i;

	for (i = 0; i < c->chain.n; i++)
		if (c->chain.d[i].exists && c->chain.d[i].safe && ready_in(c, m, c->chain.d[i].path, r))
			return 1;
	return 0;
}

/* ---- PATH and ABX_TOOL_<NAME> ------------------------------------------ */

static int
same_file_as_self(struct install_ctx *c, const char *p)
{
	char rp[PATH_MAX];

	return c->self[0] != '\0' && realpath(p, rp) != NULL && strcmp(rp, c->self) == 0;
}

static int
env_tool(struct install_ctx *c, const manifest_t *m, struct install_result *r)
{
	char var[MANIFEST_NAME_MAX + 16];
	const char *p;
	struct stat st;

	install_tool_env_name(m->name, var, sizeof(var));
	p = config_env(var);
	if (p == NULL || *p != '/')
		return 0;
	if (stat(p, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & 022) || access(p, X_OK) != 0 || same_file_as_self(c, p)) {
		warnx_line("%s=%s ignored: not an executable owned by this user or root and not group/world-writable",
			   var, p);
		return 0;
	}
	r->state = INSTALL_READY;
	r->from_env = 1;
	snprintf(r->entry, sizeof(r->entry), "%s", p);
	return 1;
}

static void
subst_bin(const struct manifest_argv *a, const char *bin, char buf[][MANIFEST_ARG_MAX + PATH_MAX],
	  char **argv)
{
	int i;

	for (i = 0; i < a->n; i++) {
		const char *s = a->v[i], *hit = strstr(s, "{bin}");
		if (hit != NULL)
			snprintf(buf[i], sizeof(buf[i]), "%.*s%s%s", (int)(hit - s), s, bin, hit + 5);
		else
			snprintf(buf[i], sizeof(buf[i]), "%s", s);
		argv[i] = buf[i];
	}
	argv[a->n] = NULL;
}

int
install_probe_version(const manifest_t *m, const char *bin, char *ver, size_t cap)
{
	/* heap, not static (job threads) nor stack (musl threads have 128 KiB) */
	char (*buf)[MANIFEST_ARG_MAX + PATH_MAX] = malloc(MANIFEST_MAX_ARGV * sizeof(*buf));
	char *argv[MANIFEST_MAX_ARGV + 1], out[4096], tmp[] = "/tmp";
	struct err e;
	int st;

	if (m->path.argv.n == 0 || buf == NULL) {
		free(buf);
		return -1;
	}
	subst_bin(&m->path.argv, bin, buf, argv);
	st = install_run(argv, "/usr/local/bin:/usr/bin:/bin", tmp, 5, out, sizeof(out), &e);
	free(buf);
	if (st != 0)
		return -1;
	return manifest_version_in(out, ver, cap);
}

static int
path_tool(struct install_ctx *c, const manifest_t *m, const char *min, struct install_result *r)
{
	const char *path = getenv("PATH"), *p, *q;
	char cand[PATH_MAX], dir[PATH_MAX], ver[64];
	struct stat st;

	if (m->path.argv.n == 0 || path == NULL)
		return 0;
	for (p = path; *p; p = q ? q + 1 : p + strlen(p)) {
		size_t n;
		q = strchr(p, ':');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || p[0] != '/' || n >= sizeof(dir) - 1)
			goto next;
		memcpy(dir, p, n);
		dir[n] = '\0';
		/* a world-writable PATH entry could hold anything */
		if (stat(dir, &st) != 0 || (st.st_mode & 002))
			goto next;
		if (path_join(cand, sizeof(cand), dir, m->binary) < 0 || stat(cand, &st) != 0 ||
		    !S_ISREG(st.st_mode) || access(cand, X_OK) != 0)
			goto next;
		/* never ourselves: <tools>/bin on PATH is a shim */
		if (same_file_as_self(c, cand))
			goto next;
		if (install_probe_version(m, cand, ver, sizeof(ver)) < 0)
			goto next;
		if (m->path.min[0] && manifest_version_cmp(ver, m->path.min) < 0)
			goto next;
		if (min && min[0] && manifest_version_cmp(ver, min) < 0)
			goto next;
		r->state = INSTALL_READY;
		r->from_path = 1;
		snprintf(r->entry, sizeof(r->entry), "%s", cand);
		return 1;
next:
		if (q == NULL)
			break;
	}
	return 0;
}

/* ---- running a command ------------------------------------------------- */

int
install_run(char *const argv[], const char *path, const char *home, int timeout_s, char *out, size_t cap,
	    struct err *e)
{
	char envp_path[4200], envp_home[PATH_MAX + 8];
	char *envp[] = {envp_path, envp_home, "LANG=C", "LC_ALL=C", NULL};
	int pfd[2], status = 0, nul;
	size_t len = 0;
	int64_t deadline = clock_ms() + (int64_t)timeout_s * 1000;
	pid_t pid;

	snprintf(envp_path, sizeof(envp_path), "PATH=%s", path);
	snprintf(envp_home, sizeof(envp_home), "HOME=%s", home);
	if (cap)
		out[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return err_set(e, "io.error", "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return err_set(e, "io.error", "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		setpgid(0, 0);
		nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		if (chdir(home) != 0) {
			/* stay where we are */
		}
		execve(argv[0], argv, envp);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	close(pfd[1]);
	for (;;) {
		struct pollfd pf = {pfd[0], POLLIN, 0};
		int64_t left = deadline - clock_ms();
		char sink[4096];
		ssize_t n;

		if (left <= 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pf, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
			continue;
		if (len + 1 < cap)
			n = read(pfd[0], out + len, cap - 1 - len);
		else
			n = read(pfd[0], sink, sizeof(sink));
		if (n <= 0)
			break;
		if (len + 1 < cap)
			len += (size_t)n;
	}
	if (cap)
		out[len < cap ? len : cap - 1] = '\0';
	close(pfd[0]);
	/* the output closed: wait for the exit, bounded by the deadline */
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return err_set(e, "io.error", "waitpid: %s", strerror(errno));
		if (clock_ms() >= deadline) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return 128 + SIGKILL;
		}
		sleep_ms(5);
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* ---- probes ------------------------------------------------------------- */

static int
exec_probe(struct install_ctx *c, const char *staging_root, struct err *e)
{
	time_t t = time(NULL);

	if (c->exec_probe_at != 0 && t - c->exec_probe_at < INSTALL_PROBE_TTL &&
	    strcmp(c->exec_probe_dir, staging_root) == 0) {
		if (c->exec_probe_rc < 0 && e != NULL)
			*e = c->exec_probe_err;
		return c->exec_probe_rc;
	}
	c->exec_probe_rc = fs_noexec_probe(staging_root, &c->exec_probe_err);
	c->exec_probe_at = t;
	snprintf(c->exec_probe_dir, sizeof(c->exec_probe_dir), "%s", staging_root);
	if (c->exec_probe_rc < 0 && e != NULL)
		*e = c->exec_probe_err;
	return c->exec_probe_rc;
}

/* TCP connect to host:port within INSTALL_PROBE_CONNECT_MS. */
static int
tcp_probe(const char *host, int port)
{
	struct addrinfo hints, *res = NULL, *ai;
	char ps[16];
	int ok = -1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0)
		return -1;
	for (ai = res; ai != NULL && ok < 0; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct pollfd pf;
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			ok = 0;
		} else if (errno == EINPROGRESS) {
			pf.fd = fd;
			pf.events = POLLOUT;
			if (poll(&pf, 1, INSTALL_PROBE_CONNECT_MS) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
				ok = 0;
		}
		close(fd);
	}
	freeaddrinfo(res);
	return ok;
}

/* Network probe results, per process (seed 000 §6 step 0b: "once per
 * process and cached 60 s"): serve runs each install job with its own
 * context, and a blocked registry must not cost every job its own connect
 * timeout. A handful of hosts (registry, mirror, tarball hosts) fit. */
#define PROBE_CACHE_N 8
static struct {
	char key[300];
	time_t at;
	int rc;
} probe_cache[PROBE_CACHE_N];
static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long probe_connects;

static int
probe_cached(const char *host, int port, const char *key)
{
	time_t t = time(NULL);
	int i, slot = 0, rc;

	pthread_mutex_lock(&probe_mu);
	for (i = 0; i < PROBE_CACHE_N; i++) {
		if (strcmp(probe_cache[i].key, key) == 0 && probe_cache[i].at != 0 &&
		    t - probe_cache[i].at < INSTALL_PROBE_TTL) {
			rc = probe_cache[i].rc;
			pthread_mutex_unlock(&probe_mu);
			return rc;
		}
		if (probe_cache[i].at < probe_cache[slot].at)
			slot = i;
	}
	probe_connects++;
	pthread_mutex_unlock(&probe_mu);
	/* the connect runs unlocked: two jobs may probe one host at once,
	 * which costs a connection, never a wrong answer */
	rc = tcp_probe(host, port);
	pthread_mutex_lock(&probe_mu);
	snprintf(probe_cache[slot].key, sizeof(probe_cache[slot].key), "%s", key);
	probe_cache[slot].at = time(NULL);
	probe_cache[slot].rc = rc;
	pthread_mutex_unlock(&probe_mu);
	return rc;
}

unsigned long
install_probe_connects(void)
{
	unsigned long n;

	pthread_mutex_lock(&probe_mu);
	n = probe_connects;
	pthread_mutex_unlock(&probe_mu);
	return n;
}

void
install_probe_cache_clear(void)
{
	pthread_mutex_lock(&probe_mu);
	memset(probe_cache, 0, sizeof(probe_cache));
	pthread_mutex_unlock(&probe_mu);
}

int
install_net_probe(struct install_ctx *c, const manifest_t *m, const char *url, struct err *e)
{
	struct http_url u;
	const char *proxy = getenv("HTTPS_PROXY");
	char key[300], det[400];
	int npm = m != NULL && m->source.type != MANIFEST_SRC_TARBALL;

	(void)c;
	if (proxy == NULL || *proxy == '\0')
		proxy = getenv("https_proxy");
	if (http_url_parse(url, &u, e) < 0)
		return -1;
	if (proxy != NULL && *proxy != '\0') {
		const char *np = getenv("NO_PROXY") ? getenv("NO_PROXY") : getenv("no_proxy");
		struct http_url pu;
		char pbuf[HTTP_URL_MAX];
		if (np == NULL || !http_no_proxy_match(np, u.host, u.port)) {
			/* a proxy without a scheme is http://host:port */
			snprintf(pbuf, sizeof(pbuf), "%s%s", strstr(proxy, "://") ? "" : "http://", proxy);
			if (http_url_parse(pbuf, &pu, NULL) == 0)
				u = pu;
		}
	}
	snprintf(key, sizeof(key), "%s:%d", u.host, u.port);
	if (probe_cached(u.host, u.port, key) == 0)
		return 0;
	if (npm)
		err_set(e, "install.network_unreachable",
			"%s: cannot connect to the npm registry %s within %d s; set install.mirrors.npm "
			"(ABX_INSTALL_NPM_REGISTRY), or fill a cache with `agent-sandbox-server fetch` and use mode offline",
			m->name, key, INSTALL_PROBE_CONNECT_MS / 1000);
	else
		err_set(e, "install.network_unreachable",
			"%s%scannot connect to %s within %d s; configure install.mirrors (ABX_INSTALL_MIRROR) or "
			"fill a cache with `agent-sandbox-server fetch` and use mode offline",
			m ? m->name : "", m ? ": " : "", key, INSTALL_PROBE_CONNECT_MS / 1000);
	snprintf(det, sizeof(det), "{\"phase\":\"probe\",\"host\":\"%s\",\"hint\":\"%s\"}", key,
		 npm ? "install.mirrors.npm, or mode offline with a cache" : "install.mirrors.tarball, or mode offline with a cache");
	err_details(e, det);
	return -1;
}

/* ---- locks and backoff --------------------------------------------------- */

static int
lock_tool(struct install_ctx *c, const char *w, const manifest_t *m, struct err *e)
{
	char path[PATH_MAX], phase[16];
	int64_t deadline = clock_ms() + (int64_t)c->set->timeout_s * 1000;
	struct install_progress pg;
	long pid;
	int fd;

	snprintf(path, sizeof(path), "%s/.locks", w);
	if (mkdir_mode(path, 0700, e) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/.locks/%s.lock", w, m->name);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_set(e, "io.error", "%s: %s", path, strerror(errno));
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			err_set(e, "io.error", "flock %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (clock_ms() >= deadline) {
			err_set(e, "install.failed", "%s: timed out after %d s waiting for another installer", m->name,
				c->set->timeout_s);
			details_phase(e, "lock");
			close(fd);
			return -1;
		}
		/* waiters poll each second and pass on the installer's progress */
		sleep_ms(1000);
		if (c->progress != NULL && install_progress_read(c, m->name, phase, sizeof(phase), &pg, &pid) == 0)
			c->progress(c->progress_arg, m->name, phase, &pg);
	}
	return fd;
}

struct backoff {
	int failures;
	time_t until;
};

static int
backoff_read(const char *dir, const char *name, struct backoff *b)
{
	char path[PATH_MAX], buf[512];
	struct json_doc doc = {0};
	const struct json_val *v;
	struct err e;
	ssize_t n;

	memset(b, 0, sizeof(*b));
	snprintf(path, sizeof(path), "%s/.locks/%s.backoff", dir, name);
	if ((n = fs_read_small(path, buf, sizeof(buf), &e)) <= 0 || json_parse(&doc, buf, (size_t)n, NULL, &e) < 0)
		return -1;
	if ((v = json_get(doc.root, "failures")) && v->type == JSON_NUMBER)
		b->failures = (int)v->u.num.d;
	if ((v = json_get(doc.root, "until")) && v->type == JSON_NUMBER)
		b->until = (time_t)v->u.num.d;
	json_free(&doc);
	return 0;
}

int
install_backoff_left(struct install_ctx *c, const char *name)
{
	struct backoff b;
	time_t t = time(NULL), d;

	/* per tools directory: a failure recorded in another directory of the
	 * chain does not hold back installs into this one (issue 12 §3) */
	if (c->chain.writable < 0 || backoff_read(c->chain.d[c->chain.writable].path, name, &b) < 0 || b.until <= t)
		return 0;
	/* a record never holds a tool back longer than the maximum, whatever
	 * it says */
	d = b.until - t > INSTALL_BACKOFF_MAX ? INSTALL_BACKOFF_MAX : b.until - t;
	return (int)d;
}

void
install_backoff_clear(struct install_ctx *c, const char *name)
{
	char path[PATH_MAX];

	if (c->chain.writable < 0)
		return;
	snprintf(path, sizeof(path), "%s/.locks/%s.backoff", c->chain.d[c->chain.writable].path, name);
	unlink(path);
}

static void
backoff_record(struct install_ctx *c, const char *name, const struct err *why)
{
	char path[PATH_MAX], buf[1024], code[64];
	struct backoff b;
	struct err e;
	const char *w;
	int secs, i;

	if (c->chain.writable < 0)
		return;
	w = c->chain.d[c->chain.writable].path;
	snprintf(path, sizeof(path), "%s/.locks", w);
	if (mkdir_mode(path, 0700, &e) < 0)
		return;
	if (backoff_read(w, name, &b) < 0)
		b.failures = 0;
	b.failures++;
	secs = INSTALL_BACKOFF_MIN;
	for (i = 1; i < b.failures && secs < INSTALL_BACKOFF_MAX; i++)
		secs *= 2;
	if (secs > INSTALL_BACKOFF_MAX)
		secs = INSTALL_BACKOFF_MAX;
	snprintf(code, sizeof(code), "%s", why->code ? why->code : "internal");
	snprintf(path, sizeof(path), "%s/.locks/%s.backoff", w, name);
	snprintf(buf, sizeof(buf), "{\"failures\":%d,\"until\":%lld,\"seconds\":%d,\"code\":\"%s\"}\n", b.failures,
		 (long long)(time(NULL) + secs), secs, code);
	fs_write_atomic(path, buf, strlen(buf), 0600, &e);
}

/* ---- staging ------------------------------------------------------------ */

/* Remove what crashed installers left: staging directories and partial
 * downloads older than INSTALL_STAGING_MAX_AGE. */
static void
collect_stale(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	time_t t = time(NULL);
	struct err e;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (prefix != NULL && strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (t - st.st_mtime > INSTALL_STAGING_MAX_AGE)
			fs_rm_treeat(dirfd(d), de->d_name, &e);
	}
	closedir(d);
}

/* ---- fetching ------------------------------------------------------------ */

struct dl {
	struct cache_put put;
	struct progress_state *ps;
	const struct http_response *rs; /* its length is known at the first write */
	int paused;
};

static int
dl_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	struct dl *d = arg;

	if (cache_put_write(&d->put, buf, len, e) < 0)
		return -1;
	if (d->ps != NULL) {
		d->ps->cur.bytes = d->ps->base + d->put.bytes;
		d->ps->cur.total =
			d->ps->base + (d->rs->content_length > 0 ? (uint64_t)d->rs->content_length : d->put.bytes);
		progress_write(d->ps, "download", 0);
	}
	if (!d->paused) {
		d->paused = 1;
		install_test_pause("download");
	}
	return 0;
}

struct host_rule {
	const manifest_t *m;
	struct install_settings *set;
	char extra[HTTP_HOST_MAX];   /* a mirror's own host */
};

static int
host_ok(void *arg, const struct http_url *u, struct err *e)
{
	struct host_rule *h = arg;
	const char *ah[TOOLS_ALLOW_HOSTS_MAX];
	int i;

	if (!u->https)
		return err_set(e, "http.redirect", "%s: only https is allowed", u->host);
	if (manifest_host_allowed_m(h->m, u->host, u->port))
		return 0;
	if (h->extra[0] && strcasecmp(h->extra, u->host) == 0)
		return 0;
	for (i = 0; i < h->set->nallow_hosts; i++)
		ah[i] = h->set->allow_hosts[i];
	if (manifest_host_allowed(ah, h->set->nallow_hosts, u->host, u->port))
		return 0;
	return err_set(e, "http.redirect", "%s is not in the manifest's hosts nor install.allow_hosts", u->host);
}

/* Is <dir>/<sha> a file whose content hashes to sha? 1 yes, 0 no (a
 * mismatching file is said on stderr and removed where it may be). */
static int
cache_hit(const char *dir, const char *sha, char *path, size_t cap)
{
	struct digest want;
	struct err e;

	if (digest_parse_hex(DIGEST_SHA256, sha, &want, "internal", &e) < 0)
		return 0;
	return cache_get(dir, &want, NULL, NULL, path, cap, &e) == 1;
}

/* A mirror entry as a local directory ("/dir" or "file:///dir"), or NULL. */
static const char *
mirror_dir(const char *mirror)
{
	if (mirror[0] == '/')
		return mirror;
	if (strncmp(mirror, "file://", 7) == 0)
		return mirror + 7;
	return NULL;
}

/* Where a verified copy of sha may already be: the cache, every chain
 * directory's cache, local mirror directories. */
static int
find_local(struct install_ctx *c, const char *sha, char *path, size_t cap)
{
	char dir[PATH_MAX];
	int i;

	if (c->cache_dir[0] && cache_hit(c->cache_dir, sha, path, cap))
		return 1;
	for (i = 0; i < c->chain.n; i++) {
		snprintf(dir, sizeof(dir), "%s/.cache", c->chain.d[i].path);
		if (strcmp(dir, c->cache_dir) != 0 && cache_hit(dir, sha, path, cap))
			return 1;
	}
	for (i = 0; i < c->set->nmirrors; i++) {
		const char *d = mirror_dir(c->set->tarball_mirrors[i]);
		if (d != NULL && cache_hit(d, sha, path, cap))
			return 1;
	}
	return 0;
}

/* Only checks that a file of that name exists (for the network probe
 * decision; the real lookup hashes). */
static int
maybe_local(struct install_ctx *c, const char *sha)
{
	char p[PATH_MAX];
	int i;

	if (c->cache_dir[0] && snprintf(p, sizeof(p), "%s/%s", c->cache_dir, sha) > 0 && access(p, R_OK) == 0)
		return 1;
	for (i = 0; i < c->chain.n; i++)
		if (snprintf(p, sizeof(p), "%s/.cache/%s", c->chain.d[i].path, sha) > 0 && access(p, R_OK) == 0)
			return 1;
	for (i = 0; i < c->set->nmirrors; i++) {
		const char *d = mirror_dir(c->set->tarball_mirrors[i]);
		if (d != NULL && snprintf(p, sizeof(p), "%s/%s", d, sha) > 0 && access(p, R_OK) == 0)
			return 1;
	}
	return 0;
}

/* Expand a mirror URL template: {host} = the original host (with :port when
 * the URL named one), {path} = the original path without its leading '/'. */
static int
mirror_url(const char *tmpl, const char *url, char *out, size_t cap, char *mhost, size_t mcap)
{
	struct http_url u, mu;
	char host[HTTP_HOST_MAX + 8];
	const char *s;
	size_t off = 0;

	if (http_url_parse(url, &u, NULL) < 0)
		return -1;
	if (u.port_explicit)
		snprintf(host, sizeof(host), "%s:%d", u.host, u.port);
	else
		snprintf(host, sizeof(host), "%s", u.host);
	for (s = tmpl; *s && off + 1 < cap; s++) {
		const char *ins = NULL;
		if (strncmp(s, "{host}", 6) == 0)
			ins = host, s += 5;
		else if (strncmp(s, "{path}", 6) == 0)
			ins = u.target + 1, s += 5;
		if (ins != NULL) {
			size_t n = strlen(ins);
			if (off + n >= cap)
				return -1;
			memcpy(out + off, ins, n);
			off += n;
		} else {
			out[off++] = *s;
		}
	}
	out[off] = '\0';
	if (strstr(tmpl, "{path}") == NULL) {
		/* a bare base URL: append host and path */
		if ((size_t)snprintf(out + off, cap - off, "%s%s%s", off && out[off - 1] == '/' ? "" : "/", host,
				     u.target) >= cap - off)
			return -1;
	}
	if (http_url_parse(out, &mu, NULL) < 0)
		return -1;
	snprintf(mhost, mcap, "%s", mu.host);
	return 0;
}

/* Download url into dir/<sha> (via a temporary name), hashing while it
 * arrives. Returns 0 (path set), -1 with e. *mismatch is set on a digest
 * mismatch (and e says expected/actual). want_sha "" = unpinned: the file
 * is kept under the digest it has. */
static int
download(struct install_ctx *c, const manifest_t *m, const char *url, const char *extra_host, const char *dir,
	 const char *want_sha, struct progress_state *ps, char *path, size_t cap, char *got_sha,
	 struct err *e)
{
	struct http_request rq;
	struct http_response rs;
	struct host_rule hr = {m, c->set, ""};
	struct dl d;
	struct digest dg, want, sha;
	char hex[DIGEST_HEX_MAX];
	int64_t remaining;
	int rc;

	if (c->http == NULL && (c->http = http_client_new(e)) == NULL)
		return -1;
	if (want_sha[0] != '\0' && digest_parse_hex(DIGEST_SHA256, want_sha, &want, "install.manifest_invalid", e) < 0)
		return -1;
	snprintf(hr.extra, sizeof(hr.extra), "%s", extra_host ? extra_host : "");
	memset(&d, 0, sizeof(d));
	if (cache_put_open(&d.put, dir, DIGEST_SHA256, e) < 0)
		return -1;
	d.ps = ps;
	http_request_init(&rq, url);
	rq.host_ok = host_ok;
	rq.host_arg = &hr;
	rq.sink = dl_sink;
	rq.sink_arg = &d;
	rq.limits.max_body = c->set->max_download_mb << 20;
	remaining = (int64_t)c->set->timeout_s * 1000;
	rq.limits.total_ms = remaining > 0x7fffffff ? 0x7fffffff : (int)remaining;
	memset(&rs, 0, sizeof(rs));
	d.rs = &rs;
	if (ps != NULL && ps->cur.count == 0)
		ps->cur.count = 1;
	c->downloads++;
	if (http_request(c->http, &rq, &rs, e) < 0) {
		cache_put_abort(&d.put);
		return -1;
	}
	c->bytes_downloaded += d.put.bytes;
	if (ps != NULL) {
		ps->base += d.put.bytes;
		ps->cur.bytes = ps->cur.total = ps->base;
	}
	rc = cache_put_commit(&d.put, want_sha[0] ? &want : NULL, 1, &dg, &sha, path, cap, e);
	if (rc < 0)
		return -1;
	digest_hex(&dg, hex);
	snprintf(got_sha, 65, "%s", hex);
	if (rc == 0) {
		char det[300];
		err_set(e, "install.checksum_mismatch", "%s %s %s: %s: expected sha256 %s, got %s", m->name, m->version,
			c->platform, url, want_sha, hex);
		snprintf(det, sizeof(det), "{\"phase\":\"fetch\",\"expected\":\"sha256:%s\",\"actual\":\"sha256:%s\"}",
			 want_sha, hex);
		err_details(e, det);
		return -1;
	}
	return 0;
}

/*
 * Make a verified copy of artifact a available: local caches and mirror
 * directories first, then (unless offline) mirror URL templates and the
 * original URL. dl_dir is where a download goes (the cache, or staging).
 */
static int
get_artifact(struct install_ctx *c, const manifest_t *m, const struct manifest_artifact *a, const char *dl_dir,
	     struct progress_state *ps, char *path, size_t cap, char *got_sha, struct err *e)
{
	struct err last, mism;
	char url[HTTP_URL_MAX], mhost[HTTP_HOST_MAX];
	int i, have_mismatch = 0;

	err_clear(&last);
	err_clear(&mism);
	if (a->sha256[0] != '\0' && find_local(c, a->sha256, path, cap)) {
		snprintf(got_sha, 65, "%s", a->sha256);
		return 0;
	}
	if (c->set->mode == CFG_MODE_OFFLINE) {
		char det[200];
		err_set(e, "install.disabled", "%s %s %s: mode offline (%s) and sha256:%s is not in the cache (%s) nor "
			"any mirror directory",
			m->name, m->version, c->platform, c->set->mode_source, a->sha256[0] ? a->sha256 : "(unpinned)",
			c->cache_dir[0] ? c->cache_dir : "none");
		snprintf(det, sizeof(det), "{\"missing\":[\"sha256:%s\"]}", a->sha256);
		err_details(e, det);
		return -1;
	}
	if (dl_dir == NULL || dl_dir[0] == '\0')
		return err_set(e, "install.read_only", "no writable place for the download of %s", m->name);
	for (i = 0; i <= c->set->nmirrors; i++) {
		const char *u = a->url, *extra = NULL;
		if (i < c->set->nmirrors) {
			if (mirror_dir(c->set->tarball_mirrors[i]) != NULL)
				continue;
			if (mirror_url(c->set->tarball_mirrors[i], a->url, url, sizeof(url), mhost, sizeof(mhost)) < 0)
				continue;
			u = url;
			extra = mhost;
		}
		if (download(c, m, u, extra, dl_dir, a->sha256, ps, path, cap, got_sha, &last) == 0)
			return 0;
		if (last.code && strcmp(last.code, "install.checksum_mismatch") == 0) {
			mism = last;
			have_mismatch = 1;
		}
	}
	*e = have_mismatch ? mism : last;
	if (!have_mismatch) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", e->msg);
		if (e->code == NULL || strncmp(e->code, "install.", 8) != 0)
			install_fetch_failed(e, m, a->url, msg);
	}
	return -1;
}

int
install_cache_artifact(struct install_ctx *c, const manifest_t *m, const struct manifest_artifact *a, char *path,
		       size_t cap, struct err *e)
{
	char got[65];

	if (c->cache_dir[0] == '\0')
		return err_set(e, "install.read_only", "no writable cache directory (use --cache DIR)");
	if (mkdir_mode(c->cache_dir, 0755, e) < 0)
		return -1;
	collect_stale(c->cache_dir, ".tmp-");
	if (a->sha256[0] == '\0')
		return err_set(e, "install.manifest_invalid", "%s: %s has no pinned sha256", m->name, a->platform);
	return get_artifact(c, m, a, c->cache_dir, NULL, path, cap, got, e);
}

/* ---- extract, verify, publish ------------------------------------------ */

/* The npm installer's progress, into the install's own (install_one). */
static void
npm_progress(void *arg, const char *name, const char *phase, const struct install_progress *p)
{
	struct progress_state *ps = arg;

	(void)name;
	ps->cur = *p;
	progress_write(ps, phase, 0);
}

struct xprog {
	struct progress_state *ps;
	int paused;
};

static void
extract_progress(void *arg, uint64_t out, uint64_t in)
{
	struct xprog *x = arg;

	(void)out;
	progress_write(x->ps, "extract", 0);
	if (!x->paused) {
		x->paused = 1;
		install_test_pause("extract");
	}
}

/* The archive format: from the URL's name, else from the first bytes. */
static enum arc_format
format_of(const char *url, const char *file)
{
	enum arc_format f = arc_format_from_name(url);
	unsigned char b[512];
	ssize_t n;
	int fd;

	if (f != ARC_FMT_NONE)
		return f;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ARC_FMT_NONE;
	n = read(fd, b, sizeof(b));
	close(fd);
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return ARC_FMT_TAR_GZ;
	if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4)
		return ARC_FMT_ZIP;
	if (n >= 262 && memcmp(b + 257, "ustar", 5) == 0)
		return ARC_FMT_TAR;
	return ARC_FMT_NONE;
}

/* PATH for verify: the bin directories of the tool's requires (so a
 * JavaScript tool's verify finds node), then the system directories. */
static void
verify_path(struct install_ctx *c, const manifest_t *m, char *buf, size_t cap)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < m->nrequires; i++) {
		struct install_result r;
		struct err e;
		const manifest_t *dm = manifest_get(c->ms, m->requires[i].name, &e);
		char d[PATH_MAX];
		memset(&r, 0, sizeof(r));
		if (dm == NULL)
			continue;
		if (install_fast_path(c, dm, &r, &e) != 1 && !path_tool(c, dm, m->requires[i].min, &r))
			continue;
		if (fs_dirname(r.entry, d, sizeof(d)) == 0)
			off += (size_t)snprintf(buf + off, off < cap ? cap - off : 0, "%s:", d);
	}
	if (off < cap)
		snprintf(buf + off, cap - off, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

static int ensure_inner(struct install_ctx *c, const char *name, const char *min, unsigned flags,
			struct install_result *r, struct err *e);

static int
run_verify(struct install_ctx *c, const manifest_t *m, const char *entry, const char *home, struct err *e)
{
	char (*words)[MANIFEST_ARG_MAX + PATH_MAX] = malloc(MANIFEST_MAX_ARGV * sizeof(*words));
	char *argv[MANIFEST_MAX_ARGV + NPM_NODE_FLAGS_MAX + 2], *rest[MANIFEST_MAX_ARGV + 1], path[8192];
	char *out = malloc(INSTALL_VERIFY_OUT_MAX), shebang[512], *flags[NPM_NODE_FLAGS_MAX], node[PATH_MAX];
	int st, nflags = 0, n;

	if (out == NULL || words == NULL) {
		free(out);
		free(words);
		return err_set(e, "internal", "out of memory");
	}
	verify_path(c, m, path, sizeof(path));
	subst_bin(&m->verify.argv, entry, words, argv);
	/* A JavaScript entry is checked as it will run (core/launch.h):
	 * through node-runtime's node, installed before it as a require. */
	if (strcmp(argv[0], entry) == 0 &&
	    npm_js_entry(entry, shebang, sizeof(shebang), flags, &nflags) == 1) {
		struct install_result *nr = malloc(sizeof(*nr));
		struct err ne;

		if (nr != NULL && ensure_inner(c, "node-runtime", NULL, INSTALL_F_CHECK, nr, &ne) == 0) {
			snprintf(node, sizeof(node), "%s", nr->entry);
			n = 0;
			while (argv[n] != NULL)
				n++;
			memcpy(rest, argv + 1, (size_t)n * sizeof(*argv));
			if (launch_argv(argv, MANIFEST_MAX_ARGV + NPM_NODE_FLAGS_MAX + 2, node, flags, nflags, entry,
					rest, n - 1) < 0)
				argv[0] = (char *)entry;
		}
		free(nr);
	}
	st = install_run(argv, path, home, m->verify.timeout, out, INSTALL_VERIFY_OUT_MAX, e);
	free(words);
	if (st < 0) {
		free(out);
		details_phase(e, "verify");
		return -1;
	}
	if (st != 0 || (m->verify.expect[0] && strstr(out, m->verify.expect) == NULL)) {
		char *nl;
		for (nl = out; *nl; nl++)
			if (*nl == '\n' || *nl == '\r')
				*nl = ' ';
		if (st == 128 + SIGKILL)
			err_set(e, "install.failed", "%s %s: verify timed out after %d s", m->name, m->version,
				m->verify.timeout);
		else if (st != 0)
			err_set(e, "install.failed", "%s %s: verify exited %d: %.120s", m->name, m->version, st, out);
		else
			err_set(e, "install.failed", "%s %s: verify output lacks \"%s\": %.120s", m->name, m->version,
				m->verify.expect, out);
		details_phase(e, "verify");
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

/* bin/<binary> -> this binary, by symlink to a temporary name + rename. */
static int
link_bin(struct install_ctx *c, const char *w, const manifest_t *m, struct err *e)
{
	char dir[PATH_MAX], tmp[PATH_MAX], link[PATH_MAX], rnd[17], cur[PATH_MAX];
	ssize_t n;

	if (c->self[0] == '\0')
		return 0;
	snprintf(dir, sizeof(dir), "%s/bin", w);
	if (mkdir_mode(dir, 0755, e) < 0)
		return -1;
	snprintf(link, sizeof(link), "%s/%s", dir, m->binary);
	n = readlink(link, cur, sizeof(cur) - 1);
	if (n > 0 && (size_t)n < sizeof(cur) - 1) {
		cur[n] = '\0';
		if (strcmp(cur, c->self) == 0)
			return 0;
	}
	fs_rand_hex(rnd, 8);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp-%s", dir, m->binary, rnd);
	if (symlink(c->self, tmp) != 0)
		return err_set(e, "install.failed", "symlink %s: %s", tmp, strerror(errno));
	if (rename(tmp, link) != 0) {
		unlink(tmp);
		return err_set(e, "install.failed", "rename %s: %s", link, strerror(errno));
	}
	return fs_fsync_dir(dir, e);
}

/* Move every other tree of this tool out of the way (into staging, then
 * removed): an upgrade leaves one tree. */
static void
remove_old_trees(const char *w, const char *name, const char *keep, const char *trash)
{
	char dir[PATH_MAX], dst[PATH_MAX];
	DIR *d;
	struct dirent *de;
	struct err e;
	int i = 0;

	snprintf(dir, sizeof(dir), "%s/%s", w, name);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strcmp(de->d_name, keep) == 0 || de->d_type != DT_DIR)
			continue;
		snprintf(dst, sizeof(dst), "%s/old-%d", trash, i++);
		if (renameat(dirfd(d), de->d_name, AT_FDCWD, dst) == 0)
			fs_rm_tree(dst, &e);
	}
	closedir(d);
}

static void
write_sbom_row(struct json_w *w, const manifest_t *m, const struct manifest_artifact *a, const char *sha)
{
	char purl[MANIFEST_URL_MAX + 200];

	json_w_obj(w);
	json_w_kstr(w, "name", m->name);
	json_w_kstr(w, "version", m->version);
	snprintf(purl, sizeof(purl), "pkg:generic/%s@%s?download_url=%s", m->name, m->version, a->url);
	json_w_kstr(w, "purl", purl);
	json_w_kstr(w, "sha256", sha);
	json_w_kstr(w, "url", a->url);
	json_w_end(w);
}

static int
write_marker(struct install_ctx *c, const char *w, const manifest_t *m, const char *treename,
	     const struct manifest_artifact *a, const char *sha, uint64_t size, const char *tree_sha,
	     const char *proof, const char *proof_sha, uint64_t files, uint64_t bytes, struct err *e)
{
	struct json_w j;
	char path[PATH_MAX], ts[32];
	int rc;

	iso_time(time(NULL), ts, sizeof(ts));
	json_w_init(&j, INSTALL_MARKER_MAX);
	json_w_obj(&j);
	json_w_kint(&j, "schema", 1);
	json_w_kstr(&j, "name", m->name);
	json_w_kstr(&j, "version", m->version);
	json_w_kstr(&j, "platform", c->platform);
	json_w_kstr(&j, "binary", m->binary);
	json_w_kstr(&j, "bin", m->source.bin);
	json_w_kstr(&j, "tree", treename);
	json_w_kstr(&j, "source_type", m->source.type == MANIFEST_SRC_TARBALL ? "tarball" : "npm-lock");
	json_w_kstr(&j, "manifest", m->file);
	json_w_kstr(&j, "manifest_sha256", m->sha256);
	json_w_key(&j, "artifacts");
	json_w_arr(&j);
	if (a != NULL) {
		json_w_obj(&j);
		json_w_kstr(&j, "url", a->url);
		json_w_kstr(&j, "sha256", sha);
		json_w_kint(&j, "size", (int64_t)size);
		json_w_end(&j);
	}
	json_w_end(&j);
	json_w_kstr(&j, "tree_sha256", tree_sha);
	json_w_kstr(&j, "stat_proof", proof);
	json_w_kstr(&j, "proof_sha256", proof_sha);
	json_w_kint(&j, "files", (int64_t)files);
	json_w_kint(&j, "bytes", (int64_t)bytes);
	json_w_kstr(&j, "installed_at", ts);
	json_w_kint(&j, "installed_at_unix", (int64_t)time(NULL));
	json_w_kstr(&j, "installer", INSTALLER);
	json_w_kbool(&j, "unpinned", m->unpinned);
	json_w_key(&j, "sbom");
	json_w_arr(&j);
	if (a != NULL)
		write_sbom_row(&j, m, a, sha);
	else if (m->source.type == MANIFEST_SRC_NPM_LOCK)
		install_npm_sbom(c, m, &j);
	json_w_end(&j);
	json_w_end(&j);
	if (j.overflow) {
		json_w_free(&j);
		return err_set(e, "install.failed", "%s: marker too large", m->name);
	}
	snprintf(path, sizeof(path), "%s/%s/.installed.json", w, m->name);
	rc = fs_write_atomic(path, j.buf, j.len, 0644, e);
	json_w_free(&j);
	return rc;
}


/* Steps 6-10 for one tool, holding its lock in writable directory w. */
/* FS_IOC_GETFLAGS, FS_IOC_SETFLAGS and FS_TOPDIR_FL of <linux/fs.h> (not
 * in musl's headers); the flags argument is an int whatever the macro says. */
#define ABX_FS_IOC_GETFLAGS 0x80086601UL
#define ABX_FS_IOC_SETFLAGS 0x40086602UL
#define ABX_FS_TOPDIR_FL 0x00020000

/*
 * Mark the staging root a "top directory" (chattr +T): ext2/3/4 then place
 * each directory created in it as they place top-level ones (Orlov: in a
 * block group with room and few directories) instead of beside its parent,
 * so a staged tree takes its inodes from a quiet part of the disk. It
 * matters on ext4 without a journal: there a new inode skips every inode
 * of its group deleted in the last minutes (ialloc.c recently_deleted()),
 * and where other work has just deleted thousands of files each file of an
 * npm tree cost up to a millisecond more. Best effort: other filesystems
 * refuse the ioctl and nothing changes.
 */
static void
mark_topdir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fl = 0;

	if (fd < 0)
		return;
	if (ioctl(fd, ABX_FS_IOC_GETFLAGS, &fl) == 0 && !(fl & ABX_FS_TOPDIR_FL)) {
		fl |= ABX_FS_TOPDIR_FL;
		(void)ioctl(fd, ABX_FS_IOC_SETFLAGS, &fl);
	}
	close(fd);
}

/*
 * syncfs of the staged tree on a thread of its own, so the disk writes run
 * while the tree is listed and hashed (which reads what the page cache
 * already holds); bg_sync_wait is called before the tree is renamed into
 * place, so the content still reaches the disk before the name does. With
 * no thread the wait does the syncfs itself.
 */
struct bg_sync {
	pthread_t th;
	int fd, started;
};

static void *
bg_sync_main(void *arg)
{
	struct bg_sync *s = arg;

	syncfs(s->fd);
	return NULL;
}

static void
bg_sync_start(struct bg_sync *s, const char *dir)
{
	pthread_attr_t at;

	s->started = 0;
	s->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->fd < 0 || pthread_attr_init(&at) != 0)
		return;
	pthread_attr_setstacksize(&at, 65536);
	s->started = pthread_create(&s->th, &at, bg_sync_main, s) == 0;
	pthread_attr_destroy(&at);
}

static void
bg_sync_wait(struct bg_sync *s)
{
	if (s->fd < 0)
		return;
	if (s->started)
		pthread_join(s->th, NULL);
	else
		syncfs(s->fd);
	s->started = 0;
	close(s->fd);
	s->fd = -1;
}

static void
known_tap(void *arg, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	install_known_add(arg, "", name, st, sha256);
}

static int
install_one(struct install_ctx *c, const manifest_t *m, const char *w, struct install_result *r, struct err *e)
{
	int64_t ph[INSTALL_PH_N], tp;
	char staging_root[PATH_MAX], staging[PATH_MAX], tree[PATH_MAX], entry[PATH_MAX], final[PATH_MAX];
	char treename[MANIFEST_VERSION_MAX + 20], art_path[PATH_MAX], sha[65] = "", hex[FS_HEX_LEN], proof[FS_HEX_LEN];
	char proof_sha[FS_HEX_LEN];
	char rnd[17], tooldir[PATH_MAX], cache[PATH_MAX], *listing = NULL;
	size_t listing_len = 0;
	const struct manifest_artifact *a = NULL;
	struct progress_state ps;
	struct arc_opts ao;
	struct arc_stats as;
	struct xprog xp = {&ps, 0};
	struct bg_sync bs = {.fd = -1};
	struct install_known *known = NULL;
	struct install_npm_info npminfo;
	struct stat st;
	uint64_t free_b, files = 0, bytes = 0, asize = 0;
	int64_t t0 = clock_ms();
	int rc = -1, i, staged, placed;

	for (i = 0; i < INSTALL_PH_N; i++)
		ph[i] = -1;
	ph[INSTALL_PH_PROBE] = c->probe_us;
	snprintf(treename, sizeof(treename), "%s-%s", m->version, c->platform);
	snprintf(tooldir, sizeof(tooldir), "%s/%s", w, m->name);
	snprintf(staging_root, sizeof(staging_root), "%s/.staging", w);
	if (mkdir_mode(tooldir, 0755, e) < 0 || mkdir_mode(staging_root, 0700, e) < 0)
		return -1;
	mark_topdir(staging_root);
	collect_stale(staging_root, NULL);
	memset(&ps, 0, sizeof(ps));
	memset(&npminfo, 0, sizeof(npminfo));
	ps.c = c;
	ps.m = m;
	ps.started = time(NULL);
	ps.fn = c->progress;
	ps.arg = c->progress_arg;
	snprintf(ps.path, sizeof(ps.path), "%s/.progress.json", tooldir);
	progress_write(&ps, "stage", 1);

	fs_rand_hex(rnd, 8);
	snprintf(staging, sizeof(staging), "%s/%s-%s", staging_root, m->name, rnd);
	snprintf(tree, sizeof(tree), "%s/tree", staging);
	if (mkdir_mode(staging, 0700, e) < 0)
		goto out;
	if (mkdir_mode(tree, 0755, e) < 0)
		goto out;
	if (m->size_hint_mb > 0 && fs_free_bytes(staging, &free_b, e) == 0 &&
	    free_b < (uint64_t)m->size_hint_mb * 2 * 1048576) {
		err_set(e, "install.no_space", "%s %s needs %ld MiB free (2 x size_hint_mb) in %s; %llu MiB available",
			m->name, m->version, m->size_hint_mb * 2, w, (unsigned long long)(free_b >> 20));
		goto out;
	}

	if (m->source.type == MANIFEST_SRC_TARBALL) {
		a = manifest_artifact(m, c->platform);
		if (a == NULL) {
			err_set(e, "install.failed", "%s has no artifact for %s", m->name, c->platform);
			goto out;
		}
		if ((known = install_known_new()) == NULL) {
			err_set(e, "internal", "out of memory");
			goto out;
		}
		tp = clock_us();
		if ((placed = install_tree_place(c, m, a, staging, known, &asize, e)) < 0)
			goto out;
		if (placed) {
			snprintf(sha, sizeof(sha), "%s", a->sha256);
			install_known_settle(known);
			ph[INSTALL_PH_PLACE] = clock_us() - tp;
			goto placed;
		}
		/* downloads go to the cache when it is writable, else to staging */
		snprintf(cache, sizeof(cache), "%s", c->cache_dir);
		if (cache[0] == '\0' || mkdir_mode(cache, 0755, NULL) < 0 || access(cache, W_OK) != 0)
			snprintf(cache, sizeof(cache), "%s", staging);
		else
			collect_stale(cache, ".tmp-");
		tp = clock_us();
		if (get_artifact(c, m, a, cache, &ps, art_path, sizeof(art_path), sha, e) < 0)
			goto out;
		ph[INSTALL_PH_DOWNLOAD] = clock_us() - tp;
		ps.cur.count = ps.cur.done = 1;
		if (m->unpinned) {
			struct audit_extra ax = {-1, -1, -1, NULL, NULL, NULL, a->url, sha, NULL};
			warnx_line("UNPINNED INSTALL: %s %s from %s has no pinned digest; it got sha256 %s. "
				   "ABX_INSTALL_UNPINNED=1 allowed this; pin it with `agent-sandbox-server lock %s`.",
				   m->name, m->version, a->url, sha, m->name);
			audit_event(c, "install.unpinned", m, &ax);
		}
		if (stat(art_path, &st) == 0)
			asize = (uint64_t)st.st_size;
		progress_write(&ps, "extract", 1);
		arc_opts_init(&ao, format_of(a->url, art_path));
		if (ao.format == ARC_FMT_NONE) {
			err_set(e, "install.failed", "%s: %s is not a tar, tar.gz or zip archive", m->name, a->url);
			details_phase(e, "extract");
			goto out;
		}
		ao.flags = ARC_STRICT_MODES;
		ao.strip_components = m->source.strip_components;
		/* size_hint_mb is the installed size: a tree four times larger
		 * (plus slack for tiny tools) is a bomb, stopped early */
		if (m->size_hint_mb > 0) {
			uint64_t cap = ((uint64_t)m->size_hint_mb * 4 + 64) << 20;
			if (cap < ARC_DEFAULT_MAX_TOTAL)
				ao.max_total = cap;
			if (cap < ARC_DEFAULT_MAX_ENTRY)
				ao.max_entry = cap;
		}
		ao.progress = extract_progress;
		ao.progress_ctx = &xp;
		/* the listing below takes each file's digest from extraction */
		ao.on_file = known_tap;
		ao.file_ctx = known;
		tp = clock_us();
		if (arc_extract(art_path, tree, &ao, &as, e) < 0)
			goto out;
		install_known_settle(known);
		install_tree_keep(c, m, a, tree, asize, known);
		ph[INSTALL_PH_EXTRACT] = clock_us() - tp;
		if (!xp.paused)
			install_test_pause("extract");
	} else {
		progress_write(&ps, "fetch", 1);
		if ((known = install_known_new()) == NULL) {
			err_set(e, "internal", "out of memory");
			goto out;
		}
		/* the npm installer reports through ps (and .progress.json) */
		c->progress = npm_progress;
		c->progress_arg = &ps;
		tp = clock_us();
		staged = install_npm_stage(c, m, tree, known, &npminfo, e);
		c->progress = ps.fn;
		c->progress_arg = ps.arg;
		if (staged < 0)
			goto out;
		ph[INSTALL_PH_NPM] = clock_us() - tp;
	}
placed:

	snprintf(entry, sizeof(entry), "%s/%s", tree, m->source.bin);
	if (lstat(entry, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
		err_set(e, "install.failed", "%s: the archive has no %s", m->name, m->source.bin);
		details_phase(e, "extract");
		goto out;
	}
	progress_write(&ps, "verify", 1);
	tp = clock_us();
	if (run_verify(c, m, entry, staging, e) < 0)
		goto out;
	ph[INSTALL_PH_VERIFY_ARGV] = clock_us() - tp;
	/* the staged content reaches the disk before the name does: the
	 * syncfs runs while the tree is listed, and is waited for below */
	tp = clock_us();
	bg_sync_start(&bs, tree);
	/* verify ran with HOME=staging: whatever it wrote there is not ours
	 * to publish, and the tree itself must be what was extracted */
	if (install_tree_list_known(tree, known, &listing, &listing_len, hex, &files, &bytes, e) < 0) {
		details_phase(e, "publish");
		goto out;
	}
	ph[INSTALL_PH_LIST] = clock_us() - tp;
	tp = clock_us();

	progress_write(&ps, "publish", 1);
	install_test_pause("publish");
	bg_sync_wait(&bs);
	snprintf(final, sizeof(final), "%s/%s", tooldir, treename);
	if (rename(tree, final) != 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			err_set(e, "install.failed", "rename to %s: %s", final, strerror(errno));
			details_phase(e, "publish");
			goto out;
		}
		/* a stale or drifted tree of the same version: swap it out
		 * atomically where the kernel can, else two renames (the path is
		 * briefly absent, never half-written) */
		if (syscall(SYS_renameat2, AT_FDCWD, tree, AT_FDCWD, final, 2 /* RENAME_EXCHANGE */) != 0) {
			char old[PATH_MAX];
			snprintf(old, sizeof(old), "%s/old", staging);
			if (rename(final, old) != 0 || rename(tree, final) != 0) {
				err_set(e, "install.failed", "replacing %s: %s", final, strerror(errno));
				details_phase(e, "publish");
				goto out;
			}
		}
	}
	if (fs_fsync_dir(tooldir, e) < 0)
		goto out;
	/* the listing and the proof list first: a marker always has both;
	 * the stat proof (for older binaries) comes from the proof list's walk */
	{
		char lp[PATH_MAX], *plist = NULL;
		size_t plen = 0;
		struct digest dg;
		snprintf(lp, sizeof(lp), "%s/.installed.files", tooldir);
		if (fs_write_atomic(lp, listing, listing_len, 0644, e) < 0) {
			details_phase(e, "publish");
			goto out;
		}
		snprintf(lp, sizeof(lp), "%s/.installed.proof", tooldir);
		if (install_proof_make_stat(final, &plist, &plen, proof, e) < 0 ||
		    fs_write_atomic(lp, plist, plen, 0644, e) < 0) {
			free(plist);
			details_phase(e, "publish");
			goto out;
		}
		digest_buf(DIGEST_SHA256, plist, plen, &dg);
		digest_hex(&dg, proof_sha);
		free(plist);
	}
	if (write_marker(c, w, m, treename, a, sha, asize, hex, proof, proof_sha, files, bytes, e) < 0) {
		details_phase(e, "publish");
		goto out;
	}
	if (link_bin(c, w, m, e) < 0) {
		details_phase(e, "publish");
		goto out;
	}
	remove_old_trees(w, m->name, treename, staging);
	ph[INSTALL_PH_PUBLISH] = clock_us() - tp;
	if (c->timing != NULL)
		c->timing(c->progress_arg, m, ph);
	c->installs++;
	r->state = INSTALL_READY;
	r->installed = 1;
	snprintf(r->dir, sizeof(r->dir), "%s", w);
	snprintf(r->tree, sizeof(r->tree), "%s", final);
	snprintf(r->entry, sizeof(r->entry), "%s/%s", final, m->source.bin);
	{
		/* npm-lock: the bytes of every package and the lockfile's
		 * digest stand where a tarball has its artifact's */
		struct audit_extra ax = {1, clock_ms() - t0, (int64_t)asize, NULL, sha, hex, NULL, NULL, NULL};
		if (m->source.type != MANIFEST_SRC_TARBALL) {
			ax.bytes = (int64_t)npminfo.bytes;
			ax.artifact_sha256 = NULL;
			ax.npm = &npminfo;
		}
		audit_event(c, "install.finish", m, &ax);
	}
	rc = 0;
out:
	bg_sync_wait(&bs);
	install_known_free(known);
	free(listing);
	fs_rm_tree(staging, NULL);
	unlink(ps.path);
	if (rc < 0) {
		/* a first install that failed leaves no <tools>/<name>/ behind
		 * (rmdir removes only an empty one) */
		rmdir(tooldir);
		struct audit_extra ax = {0, clock_ms() - t0, -1, e->code ? e->code : "internal", NULL, NULL, NULL, NULL, NULL};
		audit_event(c, "install.finish", m, &ax);
	}
	return rc;
}

/* ---- ensure --------------------------------------------------------------- */

const char *
install_phase_name(enum install_phase p)
{
	static const char *const names[INSTALL_PH_N] = {
	    "probe", "download+digest", "extract", "place", "npm", "verify.argv", "tree listing", "publish/sync",
	};
	return (unsigned)p < INSTALL_PH_N ? names[p] : "?";
}

static int
fail_state(struct install_result *r, struct err *e)
{
	r->state = state_of(e);
	return -1;
}


/* Why m is about to be installed, from the first marker of the chain:
 * "missing", "manifest changed: ..." or "drift: ..." (a tree whose marker
 * matches the manifest but whose content does not). */
static void
install_why(struct install_ctx *c, const manifest_t *m, char *buf, size_t cap)
{
	struct install_marker mk;
	struct err e;
	int i;

	for (i = 0; i < c->chain.n; i++) {
		if (!c->chain.d[i].exists || install_marker_read(c->chain.d[i].path, m->name, &mk, &e) < 0)
			continue;
		if (strcmp(mk.manifest_sha256, m->sha256) != 0 || strcmp(mk.version, m->version) != 0) {
			snprintf(buf, cap, "manifest changed: %s has %s %s from another manifest than %s", c->chain.d[i].path,
				 m->name, mk.version, m->file[0] ? m->file : "the built-in one");
			return;
		}
		if (strcmp(mk.platform, c->platform) != 0)
			continue;
		snprintf(buf, cap, "drift: %s/%s/%s differs from what was installed", c->chain.d[i].path, m->name,
			 mk.tree);
		return;
	}
	snprintf(buf, cap, "missing");
}

/* The chain names an explicit directory (--tools-dir, ABX_TOOLS_DIR) that
 * does not exist yet: an installer creates it (tools_chain_build). */
static int
explicit_missing(const struct tools_chain *ch)
{
	int i;

	for (i = 0; i < ch->n; i++)
		if (ch->d[i].explicit_ && !ch->d[i].exists)
			return 1;
	return 0;
}

/* The network is needed unless every artifact is already local. */
static const char *
needs_network(struct install_ctx *c, const manifest_t *m)
{
	const struct manifest_artifact *a;
	int i;

	if (m->source.type != MANIFEST_SRC_TARBALL) {
		/* the first package not in the cache, through the mirror if
		 * one is set: the host a download would contact first */
		static __thread char nu[HTTP_URL_MAX];
		return install_npm_probe_url(c, m, nu, sizeof(nu)) == 1 ? nu : NULL;
	}
	a = manifest_artifact(m, c->platform);
	if (a == NULL || (a->sha256[0] && maybe_local(c, a->sha256)))
		return NULL;
	for (i = 0; i < c->set->nmirrors; i++)
		if (mirror_dir(c->set->tarball_mirrors[i]) == NULL) {
			static char u[HTTP_URL_MAX];
			char h[HTTP_HOST_MAX];
			if (mirror_url(c->set->tarball_mirrors[i], a->url, u, sizeof(u), h, sizeof(h)) == 0)
				return u;
		}
	return a->url;
}

/* Base images that have each loader, named in a refusal (the fix line is
 * one text for every tool and cannot say which). */
#define GLIBC_IMAGES "Debian, Ubuntu, distroless/base"
#define MUSL_IMAGES "Alpine"

/*
 * Can m run in this image? Its manifest's "libc" names the C libraries whose
 * program interpreter its native code can use; the image has the one
 * npmlock_detect_libc finds (or none). Known before any download, so a tool
 * that cannot run is refused with what is missing instead of failing at
 * verify after hundreds of MiB. Only for this machine's platform (fetch
 * fills caches for others).
 */
int
install_image_fits(const manifest_t *m, const char *platform, struct err *e)
{
	const char *libc, *g = npmlock_libc_loader("glibc"), *mu = npmlock_libc_loader("musl");
	char env[MANIFEST_NAME_MAX + 16], need[200], det[512];

	if (m->libc == 0 || (platform != NULL && strcmp(platform, manifest_platform_self()) != 0))
		return 0;
	libc = npmlock_detect_libc(NULL);
	if ((strcmp(libc, "glibc") == 0 && (m->libc & MANIFEST_LIBC_GLIBC)) ||
	    (strcmp(libc, "musl") == 0 && (m->libc & MANIFEST_LIBC_MUSL))) {
		int i;

		install_tool_env_name(m->name, env, sizeof(env));
		for (i = 0; i < m->nlibs; i++)
			if (!npmlock_lib_present(NULL, libc, m->libs[i])) {
				err_set(e, "install.image_unsupported",
					"%s cannot run in this image: it needs the shared library %s, in no library "
					"directory here (C library: %s); or set %s or put %s on PATH",
					m->name, m->libs[i], libc, env, m->binary);
				snprintf(det, sizeof(det),
					 "{\"tool\":\"%s\",\"libc\":\"%s\",\"library\":\"%s\",\"env\":\"%s\"}", m->name,
					 libc, m->libs[i], env);
				err_details(e, det);
				return -1;
			}
		return 0;
	}
	install_tool_env_name(m->name, env, sizeof(env));
	if (m->libc == (MANIFEST_LIBC_GLIBC | MANIFEST_LIBC_MUSL))
		snprintf(need, sizeof(need), "the glibc loader %s (%s) or the musl loader %s (%s)", g, GLIBC_IMAGES,
			 mu, MUSL_IMAGES);
	else if (m->libc & MANIFEST_LIBC_GLIBC)
		snprintf(need, sizeof(need), "the glibc loader %s (%s)", g, GLIBC_IMAGES);
	else
		snprintf(need, sizeof(need), "the musl loader %s (%s)", mu, MUSL_IMAGES);
	/* Under ERR_MSG_MAX with a "gemini requires node-runtime: " prefix. */
	err_set(e, "install.image_unsupported",
		"%s cannot run in this image: it needs %s (C library of this image: %s); "
		"or set %s or put %s on PATH",
		m->name, need, libc, env, m->binary);
	snprintf(det, sizeof(det), "{\"tool\":\"%s\",\"libc\":\"%s\",\"needs\":[%s%s%s],\"env\":\"%s\"}",
		 m->name, libc, (m->libc & MANIFEST_LIBC_GLIBC) ? "\"glibc\"" : "",
		 m->libc == (MANIFEST_LIBC_GLIBC | MANIFEST_LIBC_MUSL) ? "," : "",
		 (m->libc & MANIFEST_LIBC_MUSL) ? "\"musl\"" : "", env);
	err_details(e, det);
	return -1;
}

/* install_image_fits for m and every tool it requires that is not already there
 * (installed, ABX_TOOL_<NAME>, PATH). */
static int
image_check(struct install_ctx *c, const manifest_t *m, struct err *e)
{
	int i, rc;

	if (install_image_fits(m, c->platform, e) < 0)
		return -1;
	for (i = 0; i < m->nrequires; i++) {
		struct install_result *rr = malloc(sizeof(*rr));
		struct err sub;

		if (rr == NULL)
			return err_set(e, "internal", "out of memory");
		err_clear(&sub);
		c->depth++;
		rc = ensure_inner(c, m->requires[i].name, m->requires[i].min, INSTALL_F_CHECK, rr, &sub);
		c->depth--;
		free(rr);
		if (rc < 0 && sub.code != NULL && strcmp(sub.code, "not_found") != 0) {
			char msg[ERR_MSG_MAX];

			snprintf(msg, sizeof(msg), "%s", sub.msg);
			err_set(e, sub.code, "%s requires %s: %s", m->name, m->requires[i].name, msg);
			err_details(e, sub.details);
			return -1;
		}
	}
	return 0;
}

int
install_image_check(struct install_ctx *c, const char *name, struct err *e)
{
	const manifest_t *m = manifest_get(c->ms, name, e);

	if (m == NULL)
		return -1;
	return image_check(c, m, e);
}

static int
ensure_inner(struct install_ctx *c, const char *name, const char *min, unsigned flags, struct install_result *r,
	     struct err *e)
{
	const manifest_t *m;
	const char *w, *url;
	char staging_root[PATH_MAX], tried[1024], why[INSTALL_WHY_MAX];
	int fd, i, left, rc;
	int64_t tp, probe_us;

	memset(r, 0, sizeof(*r));
	if (c->depth > MANIFEST_MAX_DEPTH)
		return err_set(e, "install.manifest_invalid", "requires nested too deeply"), fail_state(r, e);
	if ((m = manifest_get(c->ms, name, e)) == NULL)
		return fail_state(r, e);
	if (!manifest_supports(m, c->platform)) {
		err_set(e, "install.failed", "%s is not available for %s", name, c->platform);
		return fail_state(r, e);
	}
	/* resolution order (SPEC §5): ABX_TOOL_<NAME>, tools, PATH, install */
	if (env_tool(c, m, r))
		return 0;
	if (install_fast_path(c, m, r, e) == 1)
		return 0;
	if (!(flags & INSTALL_F_NO_PATH) && c->set->use_path && path_tool(c, m, min, r))
		return 0;
	/* Not there: before anything else, whether it could run here at all
	 * (also for a check, so every caller learns it before a download). */
	if (image_check(c, m, e) < 0)
		return fail_state(r, e);
	if (flags & INSTALL_F_CHECK) {
		err_set(e, "not_found", "%s is not installed", name);
		r->state = INSTALL_MISSING;
		return -1;
	}
	install_why(c, m, why, sizeof(why));
	switch (c->set->mode) {
	case CFG_MODE_OFF:
		err_set(e, "install.disabled", "%s %s: %s, and install mode is off (%s)", name, m->version, why,
			c->set->mode_source);
		return fail_state(r, e);
	case CFG_MODE_BUILD:
		if (!c->building) {
			err_set(e, "install.required", "%s %s: %s, and install mode is build (%s)", name, m->version,
				why, c->set->mode_source);
			return fail_state(r, e);
		}
		break;
	default:
		break;
	}
	if (c->chain.writable < 0 || explicit_missing(&c->chain)) {
		/* an installer may create the explicit or per-user directory;
		 * an explicit one that does not exist yet comes before a later
		 * writable one of the chain */
		if (tools_chain_build(&c->chain, c->set, 1, e) < 0)
			return fail_state(r, e);
		if (c->prefer[0] != '\0')
			tools_chain_prefer(&c->chain, c->prefer);
		if (c->set->cache_dir[0] == '\0' && c->chain.writable >= 0)
			snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/.cache", c->chain.d[c->chain.writable].path);
	}
	if (c->chain.writable < 0) {
		char det[1100];
		tools_chain_tried_text(&c->chain, tried, sizeof(tried));
		err_set(e, "install.read_only", "%s is not installed and no tools directory is writable; tried %s",
			name, tried);
		tools_chain_tried_json(&c->chain, tried, sizeof(tried));
		snprintf(det, sizeof(det), "{\"tried\":%s}", tried);
		err_details(e, det);
		return fail_state(r, e);
	}
	w = c->chain.d[c->chain.writable].path;
	if (c->force)
		install_backoff_clear(c, name);
	else if ((left = install_backoff_left(c, name)) > 0) {
		char det[64];
		err_set(e, "install.backoff", "%s failed recently; next attempt in %d s (prepare --force retries now)",
			name, left);
		snprintf(det, sizeof(det), "{\"retry_after\":%d}", left);
		err_details(e, det);
		r->retry_after = left;
		return fail_state(r, e);
	}

	/* step 2: probes */
	tp = clock_us();
	snprintf(staging_root, sizeof(staging_root), "%s/.staging", w);
	if (mkdir_mode(staging_root, 0700, e) < 0)
		return fail_state(r, e);
	if (exec_probe(c, staging_root, e) < 0) {
		if (e->code && strcmp(e->code, "install.noexec") == 0)
			backoff_record(c, name, e);
		else
			err_set(e, "install.read_only", "%s: cannot write a probe file in %s", name, staging_root);
		return fail_state(r, e);
	}
	if (c->set->mode != CFG_MODE_OFFLINE && (url = needs_network(c, m)) != NULL &&
	    install_net_probe(c, m, url, e) < 0) {
		backoff_record(c, name, e);
		return fail_state(r, e);
	}
	probe_us = clock_us() - tp;

	/* step 3: the lock, in the writable directory only */
	if ((fd = lock_tool(c, w, m, e)) < 0)
		return fail_state(r, e);
	/* step 4: another process may have finished meanwhile */
	if (install_fast_path(c, m, r, e) == 1) {
		close(fd);
		return 0;
	}
	audit_event(c, "install.start", m, NULL);
	/* step 5: requires, in name order (deadlock-free: requires form a DAG
	 * and every process takes locks along it) */
	{
		char names[MANIFEST_MAX_REQUIRES][MANIFEST_NAME_MAX], mins[MANIFEST_MAX_REQUIRES][MANIFEST_VERSION_MAX];
		int n = m->nrequires, j;
		for (i = 0; i < n; i++) {
			snprintf(names[i], sizeof(names[i]), "%s", m->requires[i].name);
			snprintf(mins[i], sizeof(mins[i]), "%s", m->requires[i].min);
		}
		for (i = 1; i < n; i++)
			for (j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
				char t[MANIFEST_NAME_MAX], tm[MANIFEST_VERSION_MAX];
				memcpy(t, names[j], sizeof(t));
				memcpy(names[j], names[j - 1], sizeof(t));
				memcpy(names[j - 1], t, sizeof(t));
				memcpy(tm, mins[j], sizeof(tm));
				memcpy(mins[j], mins[j - 1], sizeof(tm));
				memcpy(mins[j - 1], tm, sizeof(tm));
			}
		for (i = 0; i < n; i++) {
			struct install_result rr;
			c->depth++;
			rc = ensure_inner(c, names[i], mins[i], flags & ~INSTALL_F_NO_PATH, &rr, e);
			c->depth--;
			if (rc < 0) {
				char msg[ERR_MSG_MAX];
				snprintf(msg, sizeof(msg), "%s", e->msg);
				err_set(e, e->code, "%s requires %s: %s", name, names[i], msg);
				close(fd);
				return fail_state(r, e);
			}
		}
	}
	/* steps 6-10, announced first: nothing is downloaded or replaced
	 * silently (the shim prints it) */
	if (c->announce != NULL) {
		install_why(c, m, why, sizeof(why));
		c->announce(c->progress_arg, m, why, w);
	}
	c->probe_us = probe_us;
	rc = install_one(c, m, w, r, e);
	if (rc < 0) {
		/* step 11 */
		backoff_record(c, name, e);
		close(fd);
		return fail_state(r, e);
	}
	install_backoff_clear(c, name);
	close(fd);
	return 0;
}

int
install_ensure(struct install_ctx *c, const char *name, unsigned flags, struct install_result *r, struct err *e)
{
	return ensure_inner(c, name, NULL, flags, r, e);
}

int
install_ctx_init(struct install_ctx *c, struct manifest_set *ms, struct install_settings *set,
		 const char *platform, struct err *e)
{
	char buf[PATH_MAX];
	ssize_t n;

	memset(c, 0, sizeof(*c));
	c->mcache = calloc(INSTALL_MARKER_CACHE, sizeof(*c->mcache));
	if (c->mcache == NULL)
		return err_set(e, "internal", "out of memory");
	c->ms = ms;
	c->set = set;
	snprintf(c->platform, sizeof(c->platform), "%s", platform ? platform : manifest_platform_self());
	/* installers may create their directory; modes that never install
	 * do not create anything */
	/* nothing is created here: the fast path writes nothing */
	if (tools_chain_build(&c->chain, set, 0, e) < 0)
		return -1;
	if (set->cache_dir[0] != '\0')
		snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", set->cache_dir);
	else if (c->chain.writable >= 0)
		snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/.cache", c->chain.d[c->chain.writable].path);
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		snprintf(c->self, sizeof(c->self), "%s", buf);
	}
	return 0;
}

void
install_ctx_free(struct install_ctx *c)
{
	int i;

	if (c->http != NULL)
		http_client_free(c->http);
	c->http = NULL;
	if (c->mcache != NULL)
		for (i = 0; i < INSTALL_MARKER_CACHE; i++)
			install_proof_cache_put(c->mcache[i].proof_ref);
	free(c->mcache);
	c->mcache = NULL;
}

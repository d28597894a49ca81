/* core/install/install_npm.c through its public functions, against a fake npm
 * registry over HTTPS (tests/fixtures/npmreg.py, a test PKI from
 * tests/fixtures/mkcerts.sh, packages and lockfiles built here by tests/fixtures/npmpack.py): the probe
 * URL and the SBOM before and after the cache is filled, refusals before
 * any download (offline, a lockfile host not allowed, a lockfile gone),
 * an integrity mismatch, fetch then a staged install with no network, and
 * the npm mirror. The cache is only reached through these functions. */
#include "unit.h"

#include <signal.h>
#include <sys/stat.h>

#include "config/config.h"
#include "base/digest.h"
#include "install/install_int.h"
#include "base/json.h"
#include "pkg/manifest.h"

static char dir[64], reg[128];
static struct manifest_set ms;
static struct config set;
static struct install_env ctx;
static const struct install_req rq; /* from the command line */
static int reg_pid;

static const char build_py[] =
    "import os, sys\n"
    "sys.path.insert(0, 'tests/fixtures')\n"
    "import npmpack as P\n"
    "D, REG = os.environ['FX_DIR'], os.environ['FX_REG']\n"
    "root, m = D + '/reg', D + '/m'\n"
    "P.pack(root, '@t/app', '1.0.0', {'cli.js': b'#!/usr/bin/env node\\n'}, {'bin': {'app': 'cli.js'}})\n"
    "P.pack(root, 'dep', '1.0.0', {'index.js': b'v1\\n'})\n"
    "E = lambda *a, **k: P.entry(root, REG, *a, **k)\n"
    "good = {'node_modules/@t/app': E('@t/app', '1.0.0', bin={'app': 'cli.js'}),\n"
    "        'node_modules/dep': E('dep', '1.0.0')}\n"
    "def tool(name, entries, hosts=('localhost',)):\n"
    "    P.write_manifest(m, name, '@t/app', list(hosts), bin_='node_modules/.bin/app', binary=name)\n"
    "    P.write_lock(m + '/%s/package-lock.json' % name, '@t/app', entries)\n"
    "tool('app', good)\n"
    "bad = {k: dict(v) for k, v in good.items()}\n"
    "bad['node_modules/dep']['resolved'] = 'https://evil.example/dep/-/dep-1.0.0.tgz'\n"
    "tool('badhost', bad)\n"
    "bad = {k: dict(v) for k, v in good.items()}\n"
    "bad['node_modules/dep']['integrity'] = P.sri(b'not the tarball')\n"
    "tool('badint', bad)\n"
    "mir = {k: dict(v) for k, v in good.items()}\n"
    "for v in mir.values():\n"
    "    v['resolved'] = v['resolved'].replace(REG, 'https://registry.example')\n"
    "tool('mir', mir, hosts=('registry.example',))\n"
    "tool('nolock', good)\n";

/* Run the command fmt with a and b (%1$s, %2$s): 0 or -1. */
static int
sh(const char *fmt, const char *a, const char *b)
{
	char cmd[2048];

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(cmd, sizeof(cmd), fmt, a, b);
#pragma GCC diagnostic pop
	return system(cmd) == 0 ? 0 : -1;
}

/* Lines of the registry's request log: every request it served. */
static int
requests(void)
{
	char p[256], line[512];
	FILE *f;
	int n = 0;

	snprintf(p, sizeof(p), "%s/reg.log", dir);
	if ((f = fopen(p, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		n++;
	fclose(f);
	return n;
}

static int
setup(void **state)
{
	struct manifest_opts mo = {.platform = "linux-x64"};
	char p[256], line[64];
	struct err e = {0};
	FILE *f;
	int i, port = 0;

	if (unit_mkdtemp(dir, sizeof(dir), "inpm") != 0 ||
	    sh("sh tests/fixtures/mkcerts.sh '%1$s/pki' >/dev/null 2>&1%2$s", dir, "") != 0 ||
	    sh("mkdir -p '%1$s/reg' '%2$s/m'", dir, dir) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s", dir);
	if (sh("python3 tests/fixtures/npmreg.py --root '%1$s/reg' --log '%1$s/reg.log' --cert "
	       "'%1$s/pki/good.pem'"
	       " --key '%1$s/pki/good.key' >'%1$s/reg.port' 2>'%1$s/reg.err' & echo $! >'%1$s/reg.pid'%2$s",
	       p, "") != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/reg.port", dir);
	for (i = 0; i < 200 && port == 0; i++) {
		if ((f = fopen(p, "r")) != NULL) {
			if (fgets(line, sizeof(line), f) != NULL)
				port = atoi(line);
			fclose(f);
		}
		if (port == 0)
			usleep(50000);
	}
	snprintf(p, sizeof(p), "%s/reg.pid", dir);
	if ((f = fopen(p, "r")) != NULL) {
		if (fgets(line, sizeof(line), f) != NULL)
			reg_pid = atoi(line);
		fclose(f);
	}
	if (port == 0)
		return -1;
	snprintf(reg, sizeof(reg), "https://localhost:%d", port);
	setenv("FX_DIR", dir, 1);
	setenv("FX_REG", reg, 1);
	snprintf(p, sizeof(p), "%s/build.py", dir);
	f = fopen(p, "w");
	fputs(build_py, f);
	fclose(f);
	if (sh("python3 '%1$s/build.py'%2$s", dir, "") != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/pki/ca.pem", dir);
	setenv("SSL_CERT_FILE", p, 1);
	setenv("ABX_INSTALL_LIBC", "glibc", 1);
	unsetenv("ABX_INSTALL_NPM_REGISTRY");
	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	config_defaults(&set);
	snprintf(set.tools_dir, sizeof(set.tools_dir), "%s/tools", dir);
	snprintf(set.state_dir, sizeof(set.state_dir), "%s/state", dir);
	set.install.use_path = 0;
	set.install.mode = CFG_MODE_LAZY;
	mkdir(set.tools_dir, 0700);
	snprintf(p, sizeof(p), "%s/m", dir);
	if (manifest_set_open(&ms, p, &mo, &e) != 0 ||
	    install_env_init(&ctx, &ms, &set, "linux-x64", NULL, &e) != 0) {
		fprintf(stderr, "%s: %s\n", e.code, e.msg);
		return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	install_env_fini(&ctx);
	manifest_set_close(&ms);
	if (reg_pid > 0)
		kill(reg_pid, SIGTERM);
	return unit_rmtree(dir);
}

static const manifest_t *
tool(const char *name)
{
	struct err e = {0};
	const manifest_t *m = manifest_get(&ms, name, &e);

	if (m == NULL)
		fail_msg("%s: %s: %s", name, e.code, e.msg);
	return m;
}

/* The SBOM rows of m as one JSON text (the caller frees w). */
static const char *
sbom(const manifest_t *m, struct json_w *w)
{
	json_w_init(w, 1 << 20);
	json_w_arr(w);
	install_npm_sbom(&ctx, m, w);
	json_w_end(w);
	assert_false(w->overflow);
	return w->buf;
}

/* Refused before anything is downloaded: offline with an empty cache, a
 * lockfile naming a host the manifest does not list, no lockfile. */
static void
test_refusals_download_nothing(void **state)
{
	struct install_npm_info info;
	int before = requests();
	const manifest_t *nolock;
	char p[512];
	struct err e = {0};

	set.install.mode = CFG_MODE_OFFLINE;
	assert_int_equal(install_npm_fetch(&ctx, &rq, tool("app"), "linux-x64", &info, NULL, &e), -1);
	assert_string_equal(e.code, "install.disabled");
	assert_non_null(strstr(e.msg, "mode offline"));
	set.install.mode = CFG_MODE_LAZY;
	/* A lockfile host the manifest does not list: the tool does not load. */
	assert_null(manifest_get(&ms, "badhost", &e));
	assert_string_equal(e.code, "install.manifest_invalid");
	assert_non_null(strstr(e.msg, "lockfile badhost/package-lock.json"));
	assert_non_null(strstr(e.msg, "host evil.example is not in hosts"));
	/* The lockfile gone after the manifest loaded: the install says which. */
	nolock = tool("nolock");
	snprintf(p, sizeof(p), "%s/m/nolock/package-lock.json", dir);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(install_npm_fetch(&ctx, &rq, nolock, "linux-x64", &info, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "package-lock.json"));
	assert_int_equal(requests(), before);
	/* The probe and the SBOM of a tool whose lockfile does not load: none. */
	{
		char url[512] = "";
		struct json_w w;

		assert_int_equal(install_npm_probe_url(&ctx, nolock, url, sizeof(url)), 0);
		assert_string_equal(sbom(nolock, &w), "[]");
		json_w_free(&w);
	}
}

/* With nothing cached the probe names a lockfile package's URL (through
 * the mirror when one is set), and the SBOM has no sha256 yet. */
static void
test_probe_and_sbom_uncached(void **state)
{
	char url[512], want[600];
	struct json_w w;
	const char *s;

	assert_int_equal(install_npm_probe_url(&ctx, tool("app"), url, sizeof(url)), 1);
	assert_true(strncmp(url, reg, strlen(reg)) == 0);
	assert_non_null(strstr(url, ".tgz"));
	/* The mirror's host replaces the lockfile's. */
	assert_int_equal(install_npm_probe_url(&ctx, tool("mir"), url, sizeof(url)), 1);
	assert_non_null(strstr(url, "registry.example"));
	snprintf(set.install.npm_mirror, sizeof(set.install.npm_mirror), "%s/mirror/", reg);
	assert_int_equal(install_npm_probe_url(&ctx, tool("mir"), url, sizeof(url)), 1);
	snprintf(want, sizeof(want), "%s/mirror/", reg);
	assert_true(strncmp(url, want, strlen(want)) == 0);
	assert_null(strstr(url, "registry.example"));
	assert_null(strstr(url, "mirror//"));
	set.install.npm_mirror[0] = '\0';
	s = sbom(tool("app"), &w);
	assert_non_null(strstr(s, "\"name\":\"@t/app\""));
	assert_non_null(strstr(s, "\"name\":\"dep\""));
	assert_non_null(strstr(s, "\"purl\":\"pkg:npm/%40t/app@1.0.0\""));
	assert_non_null(strstr(s, "\"integrity\":\"sha512-"));
	assert_null(strstr(s, "\"sha256\""));
	json_w_free(&w);
}

/* A tarball that does not match its integrity is refused. */
static void
test_integrity_mismatch(void **state)
{
	struct install_npm_info info;
	struct err e = {0};

	assert_int_equal(install_npm_fetch(&ctx, &rq, tool("badint"), "linux-x64", &info, NULL, &e), -1);
	assert_string_equal(e.code, "install.checksum_mismatch");
}

/* fetch fills the cache (counted, the lockfile's digest recorded); a second
 * fetch downloads nothing; the probe then needs no network, the SBOM knows
 * each sha256, and a staged install works offline. */
static void
test_fetch_then_stage_offline(void **state)
{
	struct install_npm_info info;
	struct digest d;
	char p[512], hex[DIGEST_HEX_MAX], url[512];
	struct json_w w;
	struct stat st;
	struct err e = {0};
	int before;
	FILE *f;
	char lock[8192];
	size_t n;

	memset(&info, 0, sizeof(info));
	assert_int_equal(install_npm_fetch(&ctx, &rq, tool("app"), "linux-x64", &info, NULL, &e), 0);
	assert_int_equal(info.packages, 2);
	assert_int_equal(info.fetched, 2);
	assert_int_equal(info.cached, 0);
	assert_true(info.downloaded > 0 && info.bytes == info.downloaded);
	snprintf(p, sizeof(p), "%s/m/app/package-lock.json", dir);
	f = fopen(p, "r");
	assert_non_null(f);
	n = fread(lock, 1, sizeof(lock), f);
	fclose(f);
	digest_buf(DIGEST_SHA256, lock, n, &d);
	digest_hex(&d, hex);
	assert_string_equal(info.lock_sha256, hex);

	before = requests();
	memset(&info, 0, sizeof(info));
	assert_int_equal(install_npm_fetch(&ctx, &rq, tool("app"), "linux-x64", &info, NULL, &e), 0);
	assert_int_equal(info.fetched, 0);
	assert_int_equal(info.cached, 2);
	assert_int_equal(info.downloaded, 0);
	assert_int_equal(requests(), before);
	assert_int_equal(install_npm_probe_url(&ctx, tool("app"), url, sizeof(url)), 0);
	assert_non_null(strstr(sbom(tool("app"), &w), "\"sha256\":\""));
	json_w_free(&w);

	set.install.mode = CFG_MODE_OFFLINE;
	snprintf(p, sizeof(p), "%s/stage", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/stage/tree", dir);
	mkdir(p, 0700);
	assert_int_equal(install_npm_stage(&ctx, tool("app"), p, NULL, &info, &e), 0);
	set.install.mode = CFG_MODE_LAZY;
	assert_int_equal(requests(), before);
	snprintf(p, sizeof(p), "%s/stage/tree/node_modules/@t/app/cli.js", dir);
	assert_int_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/stage/tree/node_modules/dep/index.js", dir);
	assert_int_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/stage/tree/node_modules/.bin/app", dir);
	assert_int_equal(lstat(p, &st), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refusals_download_nothing),
	    cmocka_unit_test(test_probe_and_sbom_uncached),
	    cmocka_unit_test(test_fetch_then_stage_offline),
	    cmocka_unit_test(test_integrity_mismatch),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

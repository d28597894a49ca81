/*
 * Bench driver for the install engine's fast path (is the tool installed and
 * current, before any lock or download), linked
 * against the release objects by tools/bench/install.sh:
 *   ensure_drv TOOLS-DIR MANIFESTS-DIR|- NAME N [fresh]
 * prints "<µs per install_fast_path call> <µs per stat() of the entry>".
 * With "fresh" each call makes and frees its own install context, as serve
 * does per request (the marker and proof list are not kept in a context).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "install/install_int.h"

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int
main(int argc, char **argv)
{
	static struct config set;
	static struct manifest_set ms;
	static struct install_env ctx;
	struct config_flag fl[2];
	struct manifest_opts mo = {.platform = NULL};
	struct install_result r;
	struct err e = {0};
	const manifest_t *m;
	struct stat st;
	double t0, ours, ref;
	int i, n, nf = 0, fresh;

	if (argc != 5 && !(argc == 6 && strcmp(argv[5], "fresh") == 0))
		return 2;
	fresh = argc == 6;
	n = atoi(argv[4]);
	fl[nf++] = (struct config_flag){"tools_dir", argv[1], "--tools-dir"};
	if (strcmp(argv[2], "-") != 0)
		fl[nf++] = (struct config_flag){"manifests_dir", argv[2], "--manifests"};
	if (config_load(&set, NULL, NULL, fl, nf, &e) < 0)
		goto fail;
	mo.platform = manifest_platform_self();
	if (manifest_set_open(&ms, set.manifests_dir[0] ? set.manifests_dir : NULL, &mo, &e) < 0 ||
	    install_env_init(&ctx, &ms, &set, NULL, NULL, &e) < 0 ||
	    (m = manifest_get(&ms, argv[3], &e)) == NULL)
		goto fail;
	if (install_fast_path(&ctx, m, &r, &e) != 1) {
		fprintf(stderr, "ensure_drv: %s is not ready in %s\n", argv[3], argv[1]);
		return 1;
	}
	t0 = now_us();
	for (i = 0; i < n; i++) {
		if (fresh) {
			static struct install_env c2;
			if (install_env_init(&c2, &ms, &set, NULL, NULL, &e) < 0)
				goto fail;
			if (install_fast_path(&c2, m, &r, &e) != 1)
				return 1;
			install_env_fini(&c2);
		} else if (install_fast_path(&ctx, m, &r, &e) != 1) {
			return 1;
		}
	}
	ours = (now_us() - t0) / n;
	t0 = now_us();
	for (i = 0; i < n; i++)
		if (stat(r.entry, &st) != 0)
			return 1;
	ref = (now_us() - t0) / n;
	/* hundredths as integers: core/base/fmt.c, linked here, has no %f */
	printf("%lld.%02lld %lld.%02lld\n", (long long)(ours * 100) / 100, (long long)(ours * 100) % 100,
	       (long long)(ref * 100) / 100, (long long)(ref * 100) % 100);
	return 0;
fail:
	fprintf(stderr, "ensure_drv: %s: %s\n", e.code, e.msg);
	return 1;
}

/*
 * Test-only driver for tools/bench/extract.sh (not an applet, not shipped):
 * built by that script from the release objects of core/ so the figure is
 * what the static binary does.
 *
 *   extract_drv x FORMAT ARCHIVE DIR [STRIP]   extract (DIR must exist)
 *   extract_drv d DIR                          tree digest
 *   extract_drv p DIR                          proof list (proof_make)
 *   extract_drv P DIR N                        µs per proof list check, N calls
 *   extract_drv n DIR                          noexec probe (exit 0: exec ok)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pkg/arc.h"
#include "base/proof.h"
#include "base/fs.h"
#include "install/install.h"

int
main(int argc, char **argv)
{
	struct arc_opts o;
	struct arc_stats st;
	char hex[FS_HEX_LEN];
	struct err e = {0};
	enum arc_format f;

	if (argc >= 5 && strcmp(argv[1], "x") == 0) {
		f = arc_format_from_name(argv[2][0] == '.' ? argv[2] : argv[3]);
		arc_opts_init(&o, f);
		if (argc > 5)
			o.strip_components = atoi(argv[5]);
		if (arc_extract(argv[3], argv[4], &o, &st, &e) != 0) {
			err_print(&e);
			return 1;
		}
		fprintf(stderr, "%llu bytes, %llu entries\n", (unsigned long long)st.bytes,
		        (unsigned long long)st.entries);
		return 0;
	}
	if (argc == 3 && (strcmp(argv[1], "d") == 0 || strcmp(argv[1], "p") == 0)) {
		char *pl = NULL;
		size_t len = 0;

		if ((argv[1][0] == 'd' ? install_tree_list(argv[2], NULL, NULL, hex, NULL, NULL, &e)
		                       : proof_make(argv[2], "install.failed", &pl, &len, &e)) != 0) {
			err_print(&e);
			return 1;
		}
		if (pl != NULL)
			printf("%zu entries\n", (size_t)proof_parse(pl, len));
		else
			printf("%s\n", hex);
		free(pl);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "n") == 0) {
		if (fs_noexec_probe(argv[2], &e) != 0) {
			err_print(&e);
			return 1;
		}
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "P") == 0) {
		struct timespec a, b;
		int i, n = atoi(argv[3]);

		char *pl = NULL;
		size_t len = 0;

		if (proof_make(argv[2], "install.failed", &pl, &len, &e) != 0) {
			err_print(&e);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (i = 0; i < n; i++)
			if (proof_check(argv[2], pl, len) != 1) {
				fprintf(stderr, "extract_drv: %s changed\n", argv[2]);
				free(pl);
				return 1;
			}
		free(pl);
		clock_gettime(CLOCK_MONOTONIC, &b);
		/* tenths as integers: core/base/fmt.c, linked here, has no %f */
		long long t = (long long)(((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e2 / n);
		printf("%lld.%lld\n", t / 10, t % 10);
		return 0;
	}
	fprintf(stderr, "usage: extract_drv x .FMT ARCHIVE DIR [STRIP] | d DIR | p DIR\n");
	return 2;
}

/*
 * version: this binary's version, build date, dependency versions, platform.
 */
#include "common.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "deps_version.h"

static const char usage[] = "usage: agent-sandbox-server version [--json]\n"
                            "\n"
                            "Print the version, build date, the versions of musl, zlib, BearSSL and\n"
                            "libarchive this binary was built from, and the platform.\n"
                            "\n"
                            "  --json   one JSON object on stdout\n";

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif
#ifndef ABX_BUILD_DATE
#define ABX_BUILD_DATE "unknown"
#endif

#if defined(__x86_64__)
#define PLATFORM "linux-x64"
#elif defined(__aarch64__)
#define PLATFORM "linux-arm64"
#else
#define PLATFORM "linux-unknown"
#endif

int
version_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, json = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			return usage_help(usage);
		default:
			return bad_option("version", usage, argc, argv);
		}
	}
	if (optind < argc)
		return usage_error("version", usage, "unexpected argument %s", argv[optind]);
	if (json) {
		struct json_w w;

		json_w_init(&w, 1024);
		json_w_obj(&w);
		json_w_kstr(&w, "version", ABX_VERSION);
		json_w_kstr(&w, "build_date", ABX_BUILD_DATE);
		json_w_kstr(&w, "platform", PLATFORM);
		json_w_kstr(&w, "musl", DEP_MUSL);
		json_w_kstr(&w, "zlib", DEP_ZLIB);
		json_w_kstr(&w, "bearssl", DEP_BEARSSL);
		json_w_kstr(&w, "libarchive", DEP_LIBARCHIVE);
		json_w_end(&w);
		printf("%s\n", w.buf);
		json_w_free(&w);
	} else
		printf("agent-sandbox-server %s (built %s, %s)\n"
		       "musl %s\nzlib %s\nBearSSL %s\nlibarchive %s\n",
		       ABX_VERSION, ABX_BUILD_DATE, PLATFORM, DEP_MUSL, DEP_ZLIB, DEP_BEARSSL,
		       DEP_LIBARCHIVE);
	return EXIT_OK;
}

/*
 * version: this binary's version, build date, dependency versions, platform.
 */
#include "common.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "deps_version.h"
#include "opts.h"

struct version_opts {
	int json;
};

static const struct opt options[] = {
    OPT(0, "json", NULL, NULL, offsetof(struct version_opts, json)),
    OPT_END,
};

static const struct opts usage = {
    "version", "version.txt", options, 0, EXIT_USAGE, NULL,
};

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
	struct version_opts o = {0};
	int rc, n;

	if ((rc = opts_parse(&usage, argc, argv, &o, &n)) >= 0)
		return rc;
	if (o.json) {
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

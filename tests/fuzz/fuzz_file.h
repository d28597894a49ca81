/*
 * Shared by the fuzz targets whose loaders take a path (configuration,
 * commands file, policy): the input is written to one private file per
 * process, rewritten for each run.
 */
#ifndef ABX_FUZZ_FILE_H
#define ABX_FUZZ_FILE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_check.h"

static char fuzz_path[256];
static int fuzz_fd = -1;

static void
fuzz_file_unlink(void)
{
	unlink(fuzz_path);
}

/* The path holding data[0..size), or abort. */
static const char *
fuzz_file(const uint8_t *data, size_t size)
{
	if (fuzz_fd < 0) {
		const char *tmp = getenv("TMPDIR");

		snprintf(fuzz_path, sizeof(fuzz_path), "%s/abx-fuzz-XXXXXX.json", tmp && *tmp ? tmp : "/tmp");
		fuzz_fd = mkstemps(fuzz_path, 5);
		FUZZ_CHECK(fuzz_fd >= 0);
		atexit(fuzz_file_unlink);
	}
	FUZZ_CHECK(ftruncate(fuzz_fd, 0) == 0);
	FUZZ_CHECK(size == 0 || pwrite(fuzz_fd, data, size, 0) == (ssize_t)size);
	return fuzz_path;
}

#endif

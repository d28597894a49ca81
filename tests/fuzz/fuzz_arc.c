/*
 * libFuzzer target for archive extraction. The first byte picks the format
 * and ARC_NPM; the rest is the archive. Properties checked after every run,
 * whether extraction succeeded or not:
 * - nothing was created beside the staging root (the sentinel directory next
 *   to it stays empty, and the parent holds only the two);
 * - the staged tree holds only directories, regular files and symlinks; no
 *   mode has setuid/setgid/sticky or group/world write bits; every symlink
 *   target is relative and never climbs above the root;
 * - a failure is install.failed with phase extract;
 * - the staging root can always be removed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_check.h"

#include "pkg/arc.h"
#include "base/fs.h"

static char base[128], stage[160], outside[160];

/* The rule core/pkg/arc.c enforces, restated independently: components "" and "."
 * are nothing, ".." only before any name and fewer than the link's depth. */
static void
check_link(const char *target, int depth)
{
	const char *p = target, *q;
	size_t n;
	int ups = 0, names = 0;

	FUZZ_CHECK(target[0] != '/');
	for (; *p != '\0'; p = q ? q + 1 : p + n) {
		q = strchr(p, '/');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.'))
			continue;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			FUZZ_CHECK(names == 0);
			ups++;
		} else {
			names++;
		}
	}
	FUZZ_CHECK(ups < depth);
}

static int
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	FUZZ_CHECK(d != NULL);
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void
check_tree(int dfd, int depth)
{
	DIR *d = fdopendir(dup(dfd));
	struct dirent *de;
	struct stat sb;
	char target[4200];
	ssize_t n;

	FUZZ_CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		FUZZ_CHECK(fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0);
		if (S_ISLNK(sb.st_mode)) {
			n = readlinkat(dfd, de->d_name, target, sizeof(target) - 1);
			FUZZ_CHECK(n > 0);
			target[n] = '\0';
			check_link(target, depth + 1);
			continue;
		}
		FUZZ_CHECK(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode));
		FUZZ_CHECK((sb.st_mode & 07022) == 0);
		if (S_ISDIR(sb.st_mode)) {
			int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			FUZZ_CHECK(sub >= 0);
			check_tree(sub, depth + 1);
			close(sub);
		}
	}
	closedir(d);
}

static void
cleanup(void)
{
	struct err e;

	fs_rm_tree(base, &e);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum arc_format fmts[] = {ARC_FMT_TAR, ARC_FMT_TAR_GZ, ARC_FMT_ZIP};
	struct arc_opts o;
	struct err e;
	int afd, dfd, rc;

	if (size < 1)
		return 0;
	if (base[0] == '\0') {
		snprintf(base, sizeof(base), "/tmp/abx-fuzz-arc.%ld", (long)getpid());
		snprintf(stage, sizeof(stage), "%s/stage", base);
		snprintf(outside, sizeof(outside), "%s/outside", base);
		fs_rm_tree(base, &e);
		FUZZ_CHECK(mkdir(base, 0700) == 0 && mkdir(outside, 0700) == 0);
		atexit(cleanup);
	}
	FUZZ_CHECK(mkdir(stage, 0700) == 0);
	arc_opts_init(&o, fmts[data[0] % 3]);
	o.flags = (data[0] & 4) ? ARC_NPM : 0;
	o.strip_components = (data[0] >> 3) & 1;
	o.max_total = 1u << 20;
	o.max_entry = 256u << 10;
	o.max_entries = 512;
	afd = memfd_create("arc", MFD_CLOEXEC);
	FUZZ_CHECK(afd >= 0);
	FUZZ_CHECK(write(afd, data + 1, size - 1) == (ssize_t)(size - 1));
	FUZZ_CHECK(lseek(afd, 0, SEEK_SET) == 0);
	dfd = open(stage, O_RDONLY | O_DIRECTORY);
	FUZZ_CHECK(dfd >= 0);
	rc = arc_extract_fd(afd, dfd, &o, NULL, &e);
	if (rc != 0) {
		FUZZ_CHECK(strcmp(e.code, "install.failed") == 0);
		FUZZ_CHECK(strcmp(e.details, "{\"phase\":\"extract\"}") == 0);
	}
	check_tree(dfd, 0);
	close(dfd);
	close(afd);
	FUZZ_CHECK(count_entries(outside) == 0);
	FUZZ_CHECK(count_entries(base) == 2);
	FUZZ_CHECK(fs_rm_tree(stage, &e) == 0);
	return 0;
}

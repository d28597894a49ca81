/* A test file's private directory, made before its tests and removed after
 * them (setup, teardown), and the files a test writes into it. Included by
 * test_config.c, test_ops.c and test_policy.c, which load what they write. */
#include "unit.h"

static char dir[64];

/* Write text to dir/name; returns its path (static: until the next call). */
static const char *
write_file(const char *name, const char *text)
{
	static char path[512];

	unit_put(dir, name, text);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static int
setup(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "test-unit");
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

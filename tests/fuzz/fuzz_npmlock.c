/* libFuzzer target: the npm lockfile loader must refuse or accept any input
 * without crashing, leaking or reading out of bounds, for every platform
 * setting. */
#include <stddef.h>
#include <stdint.h>

#include "pkg/npmlock.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *hosts[] = {"registry.npmjs.org", "127.0.0.1:8443"};
	struct npmlock_opts o = {
	    .package = "a",
	    .hosts = hosts,
	    .nhosts = 2,
	    .mirror_host = "mirror.example",
	    .os = "linux",
	};
	struct npmlock l;
	struct err e;

	/* The first byte picks the platform so one corpus covers all of them. */
	if (size > 0) {
		o.cpu = (data[0] & 1) ? "x64" : (data[0] & 2) ? "arm64" : NULL;
		o.libc = (data[0] & 4) ? "glibc" : (data[0] & 8) ? "musl" : NULL;
		o.package = (data[0] & 16) ? "@s/a" : "a";
		data++, size--;
	}
	if (npmlock_load(&l, (const char *)data, size, &o, &e) == 0)
		npmlock_free(&l);
	return 0;
}

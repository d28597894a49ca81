#include "pkg/manifests_embed.h"

#include <pthread.h>
#include <stdint.h>
#include <zlib.h>

/* inflate's memory comes from here, under embed_lock. It asks for its
 * state (about 7 KiB) and nothing else: its window is allocated only when
 * a call does not finish the stream, and each call here gets room for the
 * whole group with Z_FINISH. From malloc, each inflate cost a munmap, several
 * times the inflating itself. If a zlib ever needs more, the inflate fails
 * and test_manifest's test_embedded_bytes says so. */
#define ARENA_BYTES (16u << 10)

static pthread_mutex_t embed_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char arena[ARENA_BYTES] __attribute__((aligned(16)));
static size_t arena_used;

static voidpf
arena_alloc(voidpf opaque, uInt items, uInt size)
{
	size_t n = ((size_t)items * size + 15) & ~(size_t)15;

	if (n > ARENA_BYTES - arena_used)
		return Z_NULL;
	arena_used += n;
	return arena + arena_used - n;
}

static void
arena_free(voidpf opaque, voidpf p)
{
}

const char *
embedded_text(struct embedded_file *f, struct err *e)
{
	struct embedded_group *g = f->group;
	z_stream z = {0};
	int ok = 0;

	pthread_mutex_lock(&embed_lock);
	if (!g->ready) {
		z.zalloc = arena_alloc;
		z.zfree = arena_free;
		z.next_in = (Bytef *)(uintptr_t)g->gz;
		z.avail_in = (uInt)g->gzlen;
		z.next_out = g->text;
		z.avail_out = (uInt)g->len + 1;
		arena_used = 0;
		/* 16 + MAX_WBITS: the gzip wrapper, whose CRC-32 inflate checks */
		if (inflateInit2(&z, 16 + MAX_WBITS) == Z_OK) {
			ok = inflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out == g->len;
			inflateEnd(&z);
		}
		if (ok) {
			g->text[g->len] = '\0';
			g->ready = 1;
		}
	}
	ok = g->ready && f->off + f->len < g->len && g->text[f->off + f->len] == '\0';
	pthread_mutex_unlock(&embed_lock);
	if (!ok) {
		err_set(e, "internal", "embedded %s: cannot inflate it (a corrupt build?)", f->path);
		return NULL;
	}
	return (const char *)g->text + f->off;
}

#include "pkg/manifests_embed.h"

#include <pthread.h>
#include <stdint.h>
#include <zlib.h>

static pthread_mutex_t embed_lock = PTHREAD_MUTEX_INITIALIZER;

const char *
embedded_text(struct embedded_file *f, struct err *e)
{
	z_stream z = {0};
	int rc, ok = 0;

	pthread_mutex_lock(&embed_lock);
	if (!f->ready) {
		z.next_in = (Bytef *)(uintptr_t)f->gz;
		z.avail_in = (uInt)f->gzlen;
		z.next_out = f->text;
		z.avail_out = (uInt)f->len + 1;
		/* 16 + MAX_WBITS: the gzip wrapper, whose CRC-32 inflate checks */
		if (inflateInit2(&z, 16 + MAX_WBITS) == Z_OK) {
			rc = inflate(&z, Z_FINISH);
			ok = rc == Z_STREAM_END && z.total_out == f->len;
			inflateEnd(&z);
		}
		if (ok) {
			f->text[f->len] = '\0';
			f->ready = 1;
		}
	}
	ok = f->ready;
	pthread_mutex_unlock(&embed_lock);
	if (!ok) {
		err_set(e, "internal", "embedded %s: cannot inflate it (out of memory?)", f->path);
		return NULL;
	}
	return (const char *)f->text;
}

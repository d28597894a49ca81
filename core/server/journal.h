#ifndef ABX_JOURNAL_H
#define ABX_JOURNAL_H
/*
 * Session journals: a header line, then one JSON object per line,
 * one per event, in order. Held in memory (every line, for paging and
 * streaming) and, when a directory is given, appended to <dir>/<id>.jsonl
 * as it grows, so a restarted server can load it again.
 *
 * A line is appended with one write(2) and no fsync: a kill -9 loses
 * nothing the kernel has, a power cut may lose the tail. A journal loaded
 * after a crash may end in a partial line (the write was cut short); that
 * tail is dropped and the file truncated to the last whole line, so the
 * next append starts a fresh line.
 *
 * Threads: a journal has no lock of its own; its owner (a session)
 * serialises every call.
 */
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* A journal's own ceiling on lines (the byte limit is the caller's, see
 * journal_bytes); 1 Mi lines of 4 bytes each is more than any byte limit
 * lets through. */
#define JOURNAL_LINES_MAX (1u << 20)
/* One line: an event's data is capped well below this by its producer. */
#define JOURNAL_LINE_MAX (64u << 10)
/* The header line. */
#define JOURNAL_HEADER_MAX 4096
#define JOURNAL_ID_MAX 64

struct journal {
	char id[JOURNAL_ID_MAX];
	char *header;    /* owned, NUL-terminated, no newline */
	struct buf b;    /* the lines, each ending in '\n' (max: offsets are 32-bit) */
	struct buf offs; /* uint32_t start of line i in b (max: JOURNAL_LINES_MAX) */
	uint32_t n;
	int fd;           /* -1: in memory only */
	int dfd;          /* the directory's descriptor (not owned), or AT_FDCWD */
	char path[4096];  /* "" in memory; for messages: <dir>/<id>.jsonl */
	size_t name_at;   /* path + name_at is what is opened and unlinked under dfd */
	int write_failed; /* a write to the file failed: memory only since */
	size_t flushed;   /* bytes of buf in the file */
	int defer;        /* set by the owner: appends wait for journal_flush */
	size_t resv;      /* room of the pending journal_reserve, 0 none */
};

/*
 * Start a journal with header (a JSON object, no newline). dir NULL: in
 * memory only. Else <dir>/<id>.jsonl is created (mode 0600, O_EXCL) with
 * the header line. Returns 0, or -1 with e (io.error; request.invalid for
 * an id that is not [A-Za-z0-9_-]).
 */
int journal_create(struct journal *j, const char *dir, const char *id, const char *header, struct err *e);
/* The same under the directory descriptor dfd (kept open by the caller
 * while the journal lives): <id>.jsonl is opened, created and unlinked
 * relative to dfd (no /proc needed, and an ancestor of dir renamed later
 * changes nothing), while dir names it in every message. */
int journal_create_at(struct journal *j, int dfd, const char *dir, const char *id, const char *header,
                      struct err *e);

/*
 * Load <path> (a journal file): the header and every whole line that is a
 * JSON object. A partial last line is dropped and the file truncated to
 * the last whole line. The file stays open for appending. Returns 0, or -1
 * with e (io.error, json.* for a header that is not JSON: the caller skips
 * the file).
 */
int journal_load(struct journal *j, const char *path, struct err *e);
/* The same for name under the directory descriptor dfd (as
 * journal_create_at), named <dir>/<name> in messages. */
int journal_load_at(struct journal *j, int dfd, const char *dir, const char *name, struct err *e);

/*
 * Append one line (a JSON object without newline, len bytes, under
 * JOURNAL_LINE_MAX). Returns the line's number (1-based) or -1 with e
 * (request.too_large over the caps, internal when out of memory). A
 * failing file write is not an error: the journal goes on in memory,
 * write_failed says so, and one warning line on stderr names the file
 * (path) and why. With j->defer set the line reaches the file at the
 * next journal_flush (a burst of lines costs one write).
 */
int64_t journal_append(struct journal *j, const char *line, size_t len, struct err *e);

/*
 * Two-step append, for a producer that writes a line in place (no copy):
 * journal_reserve returns where the next line goes, with room for len
 * bytes, or NULL (over the caps, out of memory); the line is not part of
 * the journal until journal_commit(j, n) with the n bytes written there
 * (the same rules as journal_append; nothing else may touch the journal
 * in between). A reservation not committed is simply forgotten.
 */
char *journal_reserve(struct journal *j, size_t len);
int64_t journal_commit(struct journal *j, size_t len, struct err *e);

/*
 * Many lines at once, for a producer that formats them without holding
 * the lock readers take (a session's output, read by event streams while
 * it is written):
 *   1. journal_reserve_lines(j, len, n) under the lock: room for n lines of
 *      len bytes in all (the only step that may move the buffer); returns
 *      how many of the n lines fit under JOURNAL_LINES_MAX (0: none, or
 *      out of memory).
 *   2. journal_prewrite(j, buf, len) without the lock: the lines go to the
 *      file first (readers never see a line the file does not have).
 *      Returns 1 when the file is taken care of (written, or there is
 *      none, or a write failed: write_failed), 0 when other bytes are
 *      still waiting for journal_flush (then nothing was written).
 *   3. journal_append_lines(j, buf, len, off, n, prewritten) under the
 *      lock: the lines (buf: each ends in '\n', off[k]: line k's start in
 *      buf) join the journal; the room reserved must cover them.
 * Only the owner appends, so nothing moves the buffer between 1 and 3.
 * Returns the number of lines held, or -1 (no room reserved).
 */
uint32_t journal_reserve_lines(struct journal *j, size_t len, uint32_t n);
int journal_prewrite(struct journal *j, const char *buf, size_t len);
int64_t journal_append_lines(struct journal *j, const char *buf, size_t len, const uint32_t *off, uint32_t n,
                             int prewritten);

/* Write what deferred appends left in memory to the file (one write). */
void journal_flush(struct journal *j);

/* Line k (1-based) as a view into the journal (no newline), valid until
 * the next append; NULL when out of range. */
const char *journal_line(const struct journal *j, uint32_t k, size_t *len);

/* Lines held, and their bytes (newlines included). */
static inline uint32_t
journal_count(const struct journal *j)
{
	return j->n;
}
static inline size_t
journal_bytes(const struct journal *j)
{
	return j->b.len;
}

/* Close the file and free everything; remove the file too when unlink. */
void journal_close(struct journal *j, int unlink_file);

#endif

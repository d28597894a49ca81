#ifndef ABX_ARC_INT_H
#define ABX_ARC_INT_H
/*
 * Private to the extractor (arc.c, arc_path.c): the state of one
 * extraction, and the path rules (names normalised, links checked,
 * directories opened without following links) arc_path.c implements.
 */
#include "pkg/arc.h"

#include "base/buf.h"
#include "base/digest.h"

#include <archive.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* An entry name shown in a message is cut to this many bytes so the rule
 * still fits in ERR_MSG_MAX. */
#define ARC_SHOW_MAX 120
/* Open directory fds kept for the path of the last entry, one per level
 * from the root: npm tarballs interleave lib/a.js, lib/x/b.js, lib/c.js, so
 * a new entry usually shares all but its last level with the previous one
 * and needs at most one openat. Deeper directories are walked from the
 * deepest kept level. Bounded so 32 extracting threads stay far below any
 * descriptor limit. */
#define ARC_FD_STACK 12

/* A regular file the reader opened and checked, handed to the writer
 * (arc_write.c), which owns fd from then on. */
struct arc_wfile {
	int fd;
	int mode;      /* final mode */
	int direct;    /* created with it: no fchmod */
	int hashing;   /* report it to on_file */
	int has_mtime; /* mtime set */
	struct timespec mtime;
	int64_t declared;                    /* size from the header, -1 unknown */
	char name[ARC_DEFAULT_MAX_PATH + 1]; /* normalised, for on_file */
	char raw[ARC_DEFAULT_MAX_PATH + 1];  /* the entry's own name, for messages */
};

/* The writer of one extraction (arc_write.c), on the stack of the
 * extraction it serves (arc.c). */
struct slot;
struct arc_writer {
	const struct arc_opts *o;
	uint64_t handed; /* data bytes handed over (reader) */
	int mode;        /* ARC_THREADS_* */
	/* the writer's own: the file being written */
	struct arc_wfile f;
	int open, hashing;
	int cfd;    /* its copy in copy_dirfd, or -1 */
	int copied; /* the copy cname is whole */
	char cname[24];
	uint64_t seq; /* copies begun */
	struct digest_ctx dc;
	int64_t end;
	uint64_t unkicked; /* written since the last writeback start */
	uint64_t bytes, files;
	int64_t cpu_us;                /* the writer thread's CPU, set as it ends */
	struct err e;                  /* the writer's failure, set before failed */
	char details[ERR_DETAILS_MAX]; /* e's */
	int failed;                    /* under mu */
	/* the ring and its slots, allocated when the thread starts: a small
	 * archive, most of npm's, costs no allocation of its own (one made
	 * and freed per package is a fresh mapping each time, unmapped on
	 * free: an munmap's TLB shootdown on every core running a thread of
	 * the process) */
	unsigned char *ring;
	struct slot *slot;
	unsigned head, tail; /* slots handed over / written (mod 2^32) */
	int done, started;
	int rwait, wwait; /* the reader / the writer sleeps */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

struct xs {
	struct archive *a;
	int root;
	const struct arc_opts *o;
	struct arc_stats *st;
	struct err *e;
	uint64_t max_total, max_entries, max_entry;
	size_t max_path;
	int strip;
	uint64_t seen;   /* entries read, for the entry cap */
	uint64_t passed; /* declared bytes of entries skipped over */
	uint64_t next_progress;
	/* The directories of the previous entry's path stay open (see
	 * ARC_FD_STACK): sfd[i] is the directory named by the first send[i]
	 * bytes of spath. A deeper directory's fd is cfd, for cdir. */
	char spath[ARC_DEFAULT_MAX_PATH + 1];
	int sfd[ARC_FD_STACK];
	size_t send[ARC_FD_STACK];
	int sn;
	char cdir[ARC_DEFAULT_MAX_PATH + 1];
	int cfd;
	struct buf dfr;  /* NUL-ended names, each followed by its int mode */
	const char *cur; /* raw name of the entry being processed */
	struct arc_writer *w;
	struct arc_wfile wf; /* the file being handed over */
};

/* Does mode reach the disk unchanged through the process umask (then a
 * file or directory is created with it and needs no fchmod)? */
int arc_mode_survives(int mode);
/* Refuse the archive: e set (install.unsafe_archive or the like) naming
 * the entry; returns -1. */
int arc_refuse(struct xs *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* arc_refuse() for a failed system call: errnum (its errno) goes in e->sys. */
int arc_refuse_sys(struct xs *x, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same for a failure without a struct xs (the writer's): cur is the
 * entry's raw name or NULL. */
int arc_refuse_at(struct err *e, const char *cur, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Normalise an entry or hard-link name (what says which) into out: the
 * number of components kept (0: skip the entry), or -1 after arc_refuse. */
int arc_norm_name(struct xs *x, const char *raw, int strip, char *out, size_t cap, const char *what);
/* A link target that stays inside the tree from depth: 0, else -1. */
int arc_check_link_target(struct xs *x, const char *target, int depth);
/* Split name in place into its directory (*dir, "" for the root) and leaf. */
const char *arc_split_leaf(char *name, const char **dir);
/* Open (create with create) every directory of dir from the kept fds;
 * 0 or -1 with e. */
int arc_walk(struct xs *x, const char *dir, int create);
/* Close kept levels above keep. */
void arc_stack_pop(struct xs *x, int keep);
/* The fd of dir (opened and kept as needed), or -1 with e. */
int arc_parent_fd(struct xs *x, const char *dir);

/*
 * The writer (arc_write.c): the data of each regular file x's reader opened
 * and checked is written, hashed, given its mode and time and reported
 * there, on a second thread once the archive is large enough (arc_opts
 * threads), through a bounded ring. arc_w_begin hands the file over (its
 * fd is the writer's from then on, whatever it returns), arc_w_data bytes
 * the reader validated, arc_w_end closes it. Each returns 0, or -1 with
 * x->e set from the writer's failure. arc_w_finish waits for everything
 * handed over, closes what is left open, adds the writer's counts to x->st
 * and, when ok, reports its failure (0 or -1 with x->e).
 */
void arc_w_init(struct arc_writer *w, const struct arc_opts *o);
int arc_w_begin(struct xs *x, const struct arc_wfile *f);
int arc_w_data(struct xs *x, int64_t off, const void *buf, size_t len);
int arc_w_end(struct xs *x);
int arc_w_finish(struct xs *x, int ok);
void arc_w_destroy(struct arc_writer *w);

#endif

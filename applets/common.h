#ifndef ABX_APPLETS_COMMON_H
#define ABX_APPLETS_COMMON_H
/* Helpers shared by the applets: usage, option errors, exit codes. */
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Exit codes, the same for every applet, so scripts can rely on them. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	EXIT_PARTIAL = 3,
};

#define PROG "agent-sandbox-server"

#define APPLET(c, name, summary) int c##_main(int argc, char **argv);
#include "applets.h"
#undef APPLET

/* Tool shims: shim_find answers whether base names a tool binary of an
 * installed tree; shim_main runs it as the tool (applets/shim.c). */
int shim_find(const char *base);
int shim_main(int argc, char **argv);

/* Print "agent-sandbox-server: usage: <applet>: <msg>" and the usage to
 * stderr; returns EXIT_USAGE. The applets' own usage is opts.h's. */
int usage_error(const char *applet, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Print e and map it to an exit code: usage/config errors give 2, others 1. */
int fail(const struct err *e);

/* The absolute path of the running binary (from /proc/self/exe, else
 * argv0 resolved through PATH) into buf of PATH_MAX bytes. Returns 0 or -1. */
int self_path(const char *argv0, char *buf);

/* <dir>/<name>/<leaf> into buf (cap bytes), joined as fs_path_join does
 * (core/base/fs.h): 0, or -1 when it does not fit, with e (may be NULL)
 * set. An installed tool's files: <dir>/<name>/.installed.json. */
int tool_path(char *buf, size_t cap, const char *dir, const char *name, const char *leaf, struct err *e);

/* A byte count for people: "12 B", "3.4 KiB", "164.1 MiB", "1.2 GiB". */
void human_bytes(uint64_t b, char *buf, size_t cap);

/*
 * One progress line (fetch and installs share it): on a terminal a bar
 * redrawn in place, "\rLABEL [####....] 12.0 MiB / 40.0 MiB  30%  5.1 MiB/s
 * ETA 5s EXTRA" (a newline when final); otherwise one line "LABEL: 12.0 MiB
 * of 40.0 MiB (30%), 5.1 MiB/s, ETA 5s EXTRA". total 0 = unknown ("?").
 * rate in bytes per second; extra may be "" (e.g. "3/9 packages").
 * Returns the length written into line.
 */
int progress_format(char *line, size_t cap, const char *label, uint64_t have, uint64_t total, uint64_t rate,
                    const char *extra, int tty, int final);

/* argv[0] as the process started it, saved by main(). */
extern const char *g_argv0;

#endif

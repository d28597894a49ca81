#ifndef ABX_APPLETS_OPTS_H
#define ABX_APPLETS_OPTS_H
/*
 * Each applet's options, declared once (toybox's NEWTOY strings, skalibs'
 * gol tables): one table of struct opt, from which opts_parse reads argv.
 * What --help and every usage error print is a text file,
 * applets/help/<name>.txt, embedded compressed by tools/embed.sh (the
 * texts are about 16 KB, a third of that compressed). docs/applets.md is
 * generated from that output (tools/optdoc.sh), and
 * tests/integration/options.sh checks it both ways and, against the test
 * build, that each row of a table has its row in the text.
 */
#include <stddef.h>
#include <stdio.h>

#include "base/err.h"

struct opt;

/*
 * Store arg (NULL for an option that takes none) in dst, the applet's
 * options struct, as o says (o->off is where its field is). Returns 0, or
 * -1 with e's message, which opts_parse prints as a usage error.
 */
typedef int (*opt_set)(void *dst, const struct opt *o, const char *arg, struct err *e);

struct opt {
	const char *name;   /* "--name" without the dashes; NULL ends the table */
	const char *arg;    /* the value's name in the usage ("FILE"); NULL: takes none */
	opt_set set;        /* NULL: an int field becomes 1, or a const char * field
	                     * the value */
	unsigned short off; /* offsetof its field in the applet's options struct */
	char letter;        /* the short form "-x", or 0 */
	unsigned char many; /* the arguments that follow, up to the next option, are
	                     * values of this option too (--only a b c) */
};

/*
 * A row: OPT('o', "output", "FILE", set, offsetof(...)), read as short
 * form, long name, value name, setter, field; OPT_MANY for an option whose
 * value may be several arguments; OPT_END ends the table. Its row in the
 * help text reads "  -o, --output FILE", then its help.
 */
#define OPT(letter, name, arg, set, off)                                                                     \
	{                                                                                                    \
		name, arg, set, off, letter, 0                                                               \
	}
#define OPT_MANY(name, arg, set)                                                                             \
	{                                                                                                    \
		name, arg, set, 0, 0, 1                                                                      \
	}
#define OPT_END                                                                                              \
	{                                                                                                    \
		NULL, NULL, NULL, 0, 0, 0                                                                    \
	}

/* One applet's usage: its help text and its option table. */
struct opts {
	const char *applet;
	const char *help; /* the file under applets/help/ that --help prints */
	const struct opt *opt;
	signed char max_args;     /* operands accepted; -1 any number */
	unsigned char usage_exit; /* a usage error's exit code (healthcheck's is 1) */
	const struct opts *also;  /* another form of the applet: its usage follows */
};

/*
 * Parse argv[1..argc) with u's table into dst. -h and --help print the
 * usage to stdout. Options and operands may mix; "--" ends the options.
 * The operands are moved, in order, to argv[1..*nargs]. Returns -1 to go
 * on, else the exit code to return (0 after --help, u->usage_exit after a
 * usage error, already printed).
 */
int opts_parse(const struct opts *u, int argc, char **argv, void *dst, int *nargs);

/* The usage (u's help text, then its also's) on f. */
void opts_usage(const struct opts *u, FILE *f);

/* The text of applets/help/NAME ("serve.txt"), inflated on first use; ""
 * (said on stderr) when the embedded bytes do not inflate (a corrupt
 * build). */
const char *opts_help(const char *name);

/* "agent-sandbox-server: usage: APPLET: MSG" and the usage on stderr;
 * returns u->usage_exit. */
int opts_error(const struct opts *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

#ifndef ABX_APPLETS_OPTS_H
#define ABX_APPLETS_OPTS_H
/*
 * Each applet's options, declared once (toybox's NEWTOY strings, skalibs'
 * gol tables): one table of struct opt, from which opts_parse reads argv and
 * opts_usage prints the option rows of --help and of every usage error.
 * docs/applets.md is generated from that output (tools/optdoc.sh), and
 * tests/integration/options.sh checks it both ways.
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
	const char *name;   /* "--name" without the dashes; "" a heading (help is its
	                     * text); NULL ends the table */
	const char *arg;    /* the value's name in the usage ("FILE"); NULL: takes none */
	const char *help;   /* the text of its row; '\n' continues on the next line */
	opt_set set;        /* NULL: an int field becomes 1, or a const char * field
	                     * the value */
	unsigned short off; /* offsetof its field in the applet's options struct */
	char letter;        /* the short form "-x", or 0 */
	unsigned char many; /* the arguments that follow, up to the next option, are
	                     * values of this option too (--only a b c) */
};

/*
 * A row: OPT('o', "output", "FILE", set, offsetof(...), "help"), read as
 * short form, long name, value name, setter, field, help; OPT_MANY for an
 * option whose value may be several arguments; OPT_HEAD for a heading
 * between rows; OPT_END ends the table.
 */
#define OPT(letter, name, arg, set, off, help)                                                               \
	{                                                                                                    \
		name, arg, help, set, off, letter, 0                                                         \
	}
#define OPT_MANY(name, arg, set, help)                                                                       \
	{                                                                                                    \
		name, arg, help, set, 0, 0, 1                                                                \
	}
#define OPT_HEAD(text)                                                                                       \
	{                                                                                                    \
		"", NULL, text, NULL, 0, 0, 0                                                                \
	}
#define OPT_END                                                                                              \
	{                                                                                                    \
		NULL, NULL, NULL, NULL, 0, 0, 0                                                              \
	}

/* One applet's usage: head, the option rows, tail. */
struct opts {
	const char *applet;
	const char *head; /* synopsis and description, ending with a blank line */
	const struct opt *opt;
	const char *tail;         /* after the rows ("Exit: ..."), or NULL */
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

/* The usage (head, option rows, tail) on f. */
void opts_usage(const struct opts *u, FILE *f);

/* "agent-sandbox-server: usage: APPLET: MSG" and the usage on stderr;
 * returns u->usage_exit. */
int opts_error(const struct opts *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

#ifndef ABX_NPM_INT_H
#define ABX_NPM_INT_H
/*
 * Private to the npm installer (npm.c extracts, npm_dir.c makes the
 * directories it extracts into and the bin links).
 */
#include "base/err.h"

/* mkdir -p of rel (a lockfile path) under the directory rootfd: the fd of
 * the last directory, each step opened without following a link, or -1
 * with e (install.failed, phase extract). */
int npm_dir_open(int rootfd, const char *rel, struct err *e);

#endif

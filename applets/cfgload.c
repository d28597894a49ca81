/*
 * The configuration load every applet shares, and the whole stack
 * (configuration, policy, manifests, ops) of the introspecting ones.
 */
#include "cfgload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct cfgload *
cfgload_new(void)
{
	return calloc(1, sizeof(struct cfgload));
}

void
cfgload_free(struct cfgload *L)
{
	if (L == NULL)
		return;
	cfgstack_free(&L->st);
	free(L);
}

int
cfgload_option(struct cfgload *L, const char *name, const char *value)
{
	if (strcmp(name, "config") == 0) {
		L->config_file = value;
		return 1;
	}
	return config_flags_add(&L->flags, name, value);
}

int
cfgload_set(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	struct cfgload *L;

	memcpy(&L, (char *)dst + o->off, sizeof(L));
	cfgload_option(L, o->name, arg);
	return 0;
}

int
cfgload_config(struct config *c, const char *file, const struct config_flags *f, int warn, struct err *e)
{
	if (config_load(c, file, NULL, f != NULL ? f->v : NULL, f != NULL ? f->n : 0, e) != 0)
		return -1;
	if (warn)
		config_print_warnings(c);
	return 0;
}

int
cfgload_run(struct cfgload *L, const char *platform, struct err *e)
{
	struct cfgstack *s = &L->st;

	s->cfg = &L->cfg, s->pol = &L->pol, s->ops = &L->ops, s->ms = &L->ms;
	s->file = L->config_file;
	s->flags = L->flags.v, s->nflags = L->flags.n;
	s->platform = platform;
	s->introspect = s->warn_once = 1;
	return cfgstack_load(s, e);
}

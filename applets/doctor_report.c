/*
 * The report every doctor check writes its line to, and the host list the
 * checks add to for --network: the bottom of doctor's files, calling none
 * of them.
 */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"

void
doctor_line(struct report *r, const char *status, const char *check, const char *fix, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status[0] == 'P')
		r->npass++, fix = NULL;
	else if (status[0] == 'W')
		r->nwarn++;
	else
		r->nfail++;
	if (r->json) {
		json_w_obj(&r->w);
		json_w_kstr(&r->w, "check", check);
		json_w_kstr(&r->w, "status", status);
		json_w_kstr(&r->w, "message", msg);
		if (fix != NULL)
			json_w_kstr(&r->w, "fix", fix);
		json_w_end(&r->w);
		return;
	}
	printf("%-4s  %s: %s\n", status, check, msg);
	if (fix != NULL)
		printf("      fix: %s\n", fix);
}

void
doctor_add_host(struct hostlist *hl, const char *h)
{
	int i;

	for (i = 0; i < hl->n; i++)
		if (strcmp(hl->h[i], h) == 0)
			return;
	if (hl->n < DOCTOR_HOSTS_MAX)
		snprintf(hl->h[hl->n++], sizeof(hl->h[0]), "%s", h);
}

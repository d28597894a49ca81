#ifndef ABX_HOSTRULE_H
#define ABX_HOSTRULE_H
/*
 * The one host allow-list for http_request's host_ok (core/net/http.h): the
 * first URL and every redirect hop must name a host of one of the rule's
 * lists, each entry "host" (any port) or "host:port", compared without
 * case (hostrule_match). The lists are views: the caller keeps them
 * alive for as long as the request runs.
 */
#include "base/err.h"

struct http_url;

/* The manifest's hosts, a mirror's, the configured extra hosts. */
#define HOSTRULE_LISTS 4

struct hostrule {
	const char *const *list[HOSTRULE_LISTS];
	int n[HOSTRULE_LISTS];
	int nlists;
	int https_only;    /* a plain http URL is refused whatever its host */
	int open;          /* no allow-list was configured: every host passes */
	const char *where; /* names the lists in a refusal: "not in <where>" */
};

/* Is host:port named by one of the n entries: "host" (any port),
 * "host:port", "[v6]" or "[v6]:port", hosts compared without case?
 * 1 yes, 0 no. */
int hostrule_match(const char *const *hosts, int n, const char *host, int port);

/* An empty rule (refuses every host until a list is added). */
void hostrule_init(struct hostrule *r, int https_only, const char *where);

/* Add n entries at hosts (NULL or n = 0 adds nothing). Returns 0, or -1
 * when the rule already holds HOSTRULE_LISTS lists. */
int hostrule_add(struct hostrule *r, const char *const *hosts, int n);

/* An http_host_rule over the struct hostrule at arg: 0, or -1 with
 * http.redirect ("<host>: only https is allowed" or "host <host> refused:
 * not in <where>"). */
int hostrule_check(void *arg, const struct http_url *u, struct err *e);

#endif

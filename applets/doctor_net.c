/*
 * doctor's network checks: the ports serve listens on are free, a
 * configured npm mirror completes a TLS handshake with the trust anchors
 * installs use, and (--network) so does every manifest host and mirror,
 * through the HTTPS proxy when one is set (which must accept a TCP
 * connection).
 */
#include "common.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/net.h"
#include "cfgload.h"
#include "doctor.h"
#include "net/http.h"

/* Whether what listens on 127.0.0.1:port is our serve: GET /health answers
 * 200 with our server's body ({"status":"ok","version":...}). Its version
 * into ver. 1 or 0; at most a second. */
static int
our_serve(int port, char *ver, size_t cap)
{
	static const char req[] = "GET /health HTTP/1.0\r\nUser-Agent: agent-sandbox-doctor\r\n\r\n";
	char resp[1024];
	const char *b, *st, *v;
	struct json_doc d;
	int ours;
	struct pollfd pf;
	size_t got = 0;
	ssize_t k;
	struct err e = {0};
	int fd = net_connect("127.0.0.1", port, 1000, 0, &e);

	if (fd < 0)
		return 0;
	pf.fd = fd;
	pf.events = POLLIN;
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1)
		while (got < sizeof(resp) - 1 && poll(&pf, 1, 1000) > 0 &&
		       (k = recv(fd, resp + got, sizeof(resp) - 1 - got, 0)) > 0)
			got += (size_t)k;
	close(fd);
	resp[got] = '\0';
	if (strncmp(resp, "HTTP/1.", 7) != 0 || strncmp(resp + 8, " 200", 4) != 0 ||
	    (b = strstr(resp, "\r\n\r\n")) == NULL || json_parse(&d, b + 4, strlen(b + 4), NULL, &e) != 0)
		return 0;
	st = json_get_str(d.root, "status");
	v = json_get_str(d.root, "version");
	ours = st != NULL && strcmp(st, "ok") == 0 && v != NULL;
	if (ours)
		snprintf(ver, cap, "%s", v);
	json_free(&d);
	return ours;
}

void
doctor_check_ports(struct report *r, const char *list)
{
	char ver[64];
	char copy[256], *save = NULL, *p, fix[128];

	snprintf(copy, sizeof(copy), "%s", list);
	for (p = strtok_r(copy, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
		struct sockaddr_in sa;
		int port = atoi(p), fd, one = 1, en;
		if (port <= 0 || port > 65535)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((unsigned short)port);
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			doctor_line(r, "PASS", "ports", NULL, "port %d is free", port);
		} else if ((en = errno) == EADDRINUSE && our_serve(port, ver, sizeof(ver))) {
			doctor_line(r, "PASS", "ports", NULL,
			            "port %d: agent-sandbox-server %s serves there (GET /health answers): "
			            "the running server",
			            port, ver);
		} else {
			snprintf(fix, sizeof(fix), "stop what listens on %d, or run serve with --port", port);
			doctor_line(r, en == EADDRINUSE ? "WARN" : "FAIL", "ports", fix,
			            "port %d: %s (already serving?)", port, strerror(en));
		}
		close(fd);
	}
}

/* host[:port] (port 443 when absent; an IPv6 address in brackets) into
 * host and *port. Returns 0, or -1 when the port is not a number 1-65535. */
static int
split_hostport(const char *hostport, char *host, size_t cap, int *port)
{
	const char *colon = NULL, *end;
	char *stop;
	long n;

	*port = 443;
	if (hostport[0] == '[' && (end = strchr(hostport, ']')) != NULL) {
		snprintf(host, cap, "%.*s", (int)(end - hostport - 1), hostport + 1);
		colon = end[1] == ':' ? end + 1 : NULL;
	} else {
		colon = strrchr(hostport, ':');
		/* A second colon makes it a bare IPv6 address, not host:port. */
		if (colon != NULL && memchr(hostport, ':', (size_t)(colon - hostport)) != NULL)
			colon = NULL;
		snprintf(host, cap, "%.*s", colon ? (int)(colon - hostport) : (int)strlen(hostport),
		         hostport);
	}
	if (colon == NULL)
		return 0;
	n = strtol(colon + 1, &stop, 10);
	if (stop == colon + 1 || *stop != '\0' || n < 1 || n > 65535)
		return -1;
	*port = (int)n;
	return 0;
}

/* A TCP connect to host[:port] (core/base/net.c's connector, each address tried
 * within DOCTOR_CONNECT_TIMEOUT_MS), for the proxy. Returns 0, or -1 with why:
 * "cannot resolve: ...", the connect error (e.g. "Connection refused") or
 * "host port N: no answer within 5000 ms". */
static int
tcp_reach(const char *hostport, char *why, size_t cap)
{
	char host[280];
	struct err e = {0};
	int port, fd;

	if (split_hostport(hostport, host, sizeof(host), &port) != 0) {
		snprintf(why, cap, "not a port number after the host");
		return -1;
	}
	err_clear(&e);
	fd = net_connect(host, port, DOCTOR_CONNECT_TIMEOUT_MS, 0, &e);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (e.code != NULL && strcmp(e.code, "http.resolve") == 0)
		snprintf(why, cap, "cannot resolve: %.*s", (int)(cap - 17), e.msg); /* 16: the prefix */
	else
		snprintf(why, cap, "%.*s", (int)(cap - 1), e.sys ? strerror(e.sys) : e.msg);
	return -1;
}

/* The host[:port] of an https:// URL, or "" for a path or file:// mirror. */
static void
url_host(const char *url, char *out, size_t cap)
{
	const char *p, *end;

	out[0] = '\0';
	if (strncmp(url, "https://", 8) != 0)
		return;
	p = url + 8;
	end = p + strcspn(p, "/?#");
	if (memchr(p, '@', end - p) != NULL)
		p = (const char *)memchr(p, '@', end - p) + 1;
	if (memchr(p, '{', end - p) != NULL)
		return; /* {host} in the authority: a template of the original host */
	snprintf(out, cap, "%.*s", (int)(end - p), p);
}

void
doctor_net_fix(const char *code, const char *host, const char *egress, char *fix, size_t cap)
{
	const char *rem = err_info(code)->remedy;

	if (strcmp(code, "tls.unknown_ca") == 0 || strcmp(code, "tls.bad_chain") == 0 ||
	    strcmp(code, "tls.no_trust_anchors") == 0)
		snprintf(fix, cap,
		         "add the CA that issued %.100s's certificate to SSL_CERT_FILE or SSL_CERT_DIR (the "
		         "trust anchors every install uses)",
		         host);
	else if (strncmp(code, "tls.", 4) == 0)
		snprintf(fix, cap, "%.100s's TLS: %s", host, rem ? rem : "check the server's certificate");
	else if (strcmp(code, "http.resolve") == 0)
		snprintf(fix, cap,
		         "DNS does not resolve %.100s: check the name and the resolver (/etc/resolv.conf)",
		         host);
	else if (strcmp(code, "http.proxy") == 0)
		snprintf(fix, cap, "check HTTPS_PROXY and NO_PROXY, and that the proxy runs");
	else
		snprintf(fix, cap, "%s", egress);
}

/* A HEAD of https://hostport/ through the client installs use (its proxy,
 * its trust anchors): any answer means the TLS handshake passed. Returns 0,
 * or -1 with why (what failed) and fix (the cause's own remedy: the CA
 * bundle for a certificate, DNS for a name, the proxy for the proxy; else
 * egress, naming what). */
static int
tls_reach(const char *hostport, const char *egress, char *why, size_t wcap, char *fix, size_t fcap)
{
	struct http_client *h;
	struct http_request rq;
	static struct http_response rs;
	char url[300];
	const char *code;
	struct err e = {0};
	int rc = -1;

	snprintf(url, sizeof(url), "https://%s/", hostport);
	http_request_init(&rq, url);
	rq.method = "HEAD";
	rq.limits.connect_ms = rq.limits.read_ms = DOCTOR_CONNECT_TIMEOUT_MS;
	rq.limits.total_ms = 2 * DOCTOR_CONNECT_TIMEOUT_MS;
	rq.limits.max_redirects = 0;
	err_clear(&e);
	memset(&rs, 0, sizeof(rs));
	if ((h = config_http_client(&e)) != NULL && (http_request(h, &rq, &rs, &e) == 0 || rs.status != 0))
		rc = 0;
	http_client_free(h);
	if (rc == 0)
		return 0;
	code = e.code ? e.code : "internal";
	if (strcmp(code, "http.connect") == 0)
		snprintf(why, wcap, "%.*s", (int)(wcap - 1), e.sys ? strerror(e.sys) : e.msg);
	else
		snprintf(why, wcap, "%s: %.*s", code, (int)(wcap - 40), e.msg);
	doctor_net_fix(code, hostport, egress, fix, fcap);
	return -1;
}

void
doctor_check_network(struct report *r, const struct config *c, struct hostlist *hl)
{
	const char *proxy = config_env("HTTPS_PROXY") ? config_env("HTTPS_PROXY") : config_env("https_proxy");
	char why[512], fix[512], egress[256], h[280], ph[280];
	int i,
	    runtime = config_mode_installs_at_runtime(c->install.mode) && c->install.mode != CFG_MODE_OFFLINE;

	url_host(c->install.npm_mirror, h, sizeof(h));
	if (h[0])
		doctor_add_host(hl, h);
	for (i = 0; i < c->install.tarball_mirrors.n; i++) {
		url_host(c->install.tarball_mirrors.v[i], h, sizeof(h));
		if (h[0])
			doctor_add_host(hl, h);
	}
	if (proxy != NULL && proxy[0] != '\0') {
		const char *p = strstr(proxy, "://") ? strstr(proxy, "://") + 3 : proxy;
		snprintf(ph, sizeof(ph), "%.*s", (int)strcspn(p, "/"), p);
		if (tcp_reach(ph, why, sizeof(why)) != 0) {
			doctor_line(r, runtime ? "FAIL" : "WARN", "network",
			            "check HTTPS_PROXY, and that the proxy runs", "proxy %s: %s", ph, why);
			return;
		}
		doctor_line(r, "PASS", "network", NULL, "proxy %s is reachable; hosts are reached through it",
		            ph);
	}
	if (hl->n == 0)
		doctor_line(r, "PASS", "network", NULL, "no manifest host or mirror to check");
	for (i = 0; i < hl->n; i++) {
		snprintf(egress, sizeof(egress),
		         "allow egress to %.100s, or configure install.mirrors, or fill a cache with "
		         "`fetch` and use install.mode offline",
		         hl->h[i]);
		if (tls_reach(hl->h[i], egress, why, sizeof(why), fix, sizeof(fix)) == 0)
			doctor_line(r, "PASS", "network", NULL, "%s is reachable (TLS handshake)", hl->h[i]);
		else
			doctor_line(r, runtime ? "FAIL" : "WARN", "network", fix, "%s: %s", hl->h[i], why);
	}
}

/* A configured npm mirror (always https://: the loader refuses anything
 * else) must complete a TLS handshake on its host:port. Every
 * npm install goes there, so an unreachable one is a FAIL whatever the
 * mode that will install. */
void
doctor_check_mirror(struct report *r, const struct config *c)
{
	const char *m = c->install.npm_mirror;
	char h[280], why[512], fix[512], egress[512], src[CFG_PATH_MAX + 32];

	if (m[0] == '\0')
		return;
	config_source(c, CK_INSTALL_MIRRORS_NPM, src, sizeof(src));
	url_host(m, h, sizeof(h));
	if (h[0] != '\0') {
		snprintf(egress, sizeof(egress),
		         "allow egress to %.200s, or fix install.mirrors.npm (set by %.200s)", h, src);
		if (tls_reach(h, egress, why, sizeof(why), fix, sizeof(fix)) == 0) {
			doctor_line(r, "PASS", "mirror", NULL,
			            "npm mirror %s is reachable (TLS handshake) [%s]", h, src);
			return;
		}
		doctor_line(r, "FAIL", "mirror", fix, "npm mirror %s: %s [%s]", m, why, src);
	}
}

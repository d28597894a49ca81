/*
 * serve: the HTTP API that runs operations and agent sessions for one
 * sandbox. Options and start-up here; the server core is core/net/httpd.c, the
 * API core/api*.c.
 */
#include "common.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/api.h"
#include "cfgload.h"
#include "opts.h"
#include "base/decimal.h"
#include "base/digest.h"
#include "base/fs.h"
#include "net/httpd.h"
#include "pkg/manifest.h"
#include "base/proc.h"
#include "server/sessions.h"

/* The command line: configuration flags (each key once, the last given
 * wins) and the options that are serve's own. Static storage: the reload
 * thread reads the flags for the life of the process. */
struct serve_opts {
	struct config_flags flags;
	int hdr_ms, idle_ms, body_ms;
	int quiet, verbose;
	const char *config_file;
};

/* --config, or a configuration key's flag (config_option_key names them): --port,
 * --max-connections and --workers checked here, so a bad number is a usage
 * error before anything loads. */
static int
set_flag(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	static const struct {
		const char *name;
		int lo, hi;
	} range[] = {{"port", 0, 65535}, {"max-connections", 1, 65536}, {"workers", 1, 256}};
	struct serve_opts *so = dst;
	char *end;
	long v;
	size_t i;

	if (strcmp(o->name, "config") == 0) {
		so->config_file = arg;
		return 0;
	}
	for (i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
		if (strcmp(o->name, range[i].name) != 0)
			continue;
		v = strtol(arg, &end, 10);
		if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || v < range[i].lo || v > range[i].hi)
			return err_set(e, "usage", "--%s %s: expected %d..%d", o->name, arg, range[i].lo,
			               range[i].hi);
	}
	config_flags_add(&so->flags, o->name, arg);
	return 0;
}

/* Seconds, fractions allowed ("0.5"), into milliseconds; 1 ms .. 1 day. */
static int
set_secs(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	const char *end;
	double v;

	if (((arg[0] < '0' || arg[0] > '9') && arg[0] != '.') || dec_parse(arg, &end, &v) != 0 ||
	    *end != '\0' || v < 0.001 || v > 86400)
		return err_set(e, "usage", "%s: expected seconds (0.001..86400)", arg);
	*(int *)(void *)((char *)dst + o->off) = (int)(v * 1000 + 0.5);
	return 0;
}

/* -q and -v: the last given wins. */
static int
set_log(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	struct serve_opts *so = dst;

	so->quiet = o->letter == 'q';
	so->verbose = o->letter == 'v';
	return 0;
}

#define O(f) offsetof(struct serve_opts, f)
static const struct opt options[] = {
    OPT(0, "host", "H", set_flag, 0),
    OPT(0, "port", "N", set_flag, 0),
    CFGLOAD_OPTS(set_flag, 0),
    OPT(0, "base-dir", "DIR", set_flag, 0),
    OPT(0, "token-file", "FILE", set_flag, 0),
    OPT(0, "max-connections", "N", set_flag, 0),
    OPT(0, "workers", "N", set_flag, 0),
    OPT(0, "header-timeout", "SECS", set_secs, O(hdr_ms)),
    OPT(0, "idle-timeout", "SECS", set_secs, O(idle_ms)),
    OPT(0, "body-timeout", "SECS", set_secs, O(body_ms)),
    OPT('q', "quiet", NULL, set_log, 0),
    OPT('v', "verbose", NULL, set_log, 0),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "serve", "serve.txt", options, 0, EXIT_USAGE, NULL,
};

static struct httpd *g_srv;

struct reload_args {
	struct api *api;
	const char *config_file;
	const struct config_flag *flags;
	int nflags;
};

static void
on_signal(int sig)
{
	if (g_srv != NULL)
		httpd_stop(g_srv);
}

static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
logline(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s: serve: ", PROG);
	va_start(ap, fmt);
	n += err_fmtv(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(2, line, (size_t)n);
}

/* SIGHUP is blocked in every thread; this one takes it synchronously, so
 * the reload runs as ordinary code, not in a signal handler. */
static void *
reload_thread(void *arg)
{
	struct reload_args *r = arg;
	struct api_gen *g;
	struct err e = {0};
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		err_clear(&e);
		g = api_gen_build(r->config_file, r->flags, r->nflags, r->api->ms,
		                  r->api->have_default_digest ? r->api->default_digest : NULL, &e);
		if (g == NULL) {
			logline("reload failed, keeping the previous configuration: %s: %s", e.code, e.msg);
			continue;
		}
		if (!api_policy_has_tokens(&g->pol) && r->api->tf == NULL)
			logline(
			    "warning: the new policy has no token; every request but /health answers 401");
		api_swap(r->api, g);
		logline("configuration reloaded (%d ops, %d principals, mode %s)", ops_n(&g->ops), g->pol.n,
		        config_mode_name(g->cfg.install.mode));
	}
	return NULL;
}

/* The manifests, every one loaded now: after this the set is only read,
 * so request threads and install jobs share it without a lock. */
static int
open_manifests(struct manifest_set *ms, const char *config_file, const struct config_flags *flags,
               int *introspect, struct err *e)
{
	struct config *c = malloc(sizeof(*c));
	struct err e2 = {0};
	int i;

	if (c == NULL)
		return err_set(e, "internal", "out of memory");
	/* the API's load (api_gen_build) prints the warnings */
	if (cfgload_config(c, config_file, flags, 0, e) != 0) {
		free(c);
		return -1;
	}
	*introspect = c->introspect;
	i = manifest_set_load(ms, c, NULL, e);
	free(c);
	if (i < 0)
		return -1;
	for (i = 0; i < ms->n; i++)
		if (manifest_get(ms, ms->ent[i].name, &e2) == NULL)
			warnx_line("manifest %s: %s: %s", ms->ent[i].name, e2.code, e2.msg);
	return 0;
}

/* An unsafe state directory (group/world-writable, another owner) would
 * take tokens and journals anyone may rewrite, and an unsafe explicit tools
 * directory would answer 500 on every request that resolves a tool: both
 * are refused at start-up, before anything is written. */
static int
refuse_unsafe_dirs(struct api_gen *g, struct err *e)
{
	static struct tools_chain chain;
	char state[PATH_MAX];

	int fd;

	if (tools_state_dir(&g->cfg, state, sizeof(state)) == 0) {
		fd = fs_dir_open_safe(state, 0, e);
		if (fd >= 0)
			close(fd);
		else if (strcmp(e->code, "config.state_dir_unsafe") == 0)
			return -1;
		err_clear(e);
	}
	return tools_chain_build(&chain, &g->cfg, 0, e);
}

/* Open the state directory once (made when missing) without following a
 * link another user could have made, and keep it: session journals and
 * audit records go through the descriptor, so a root serve with --base-dir
 * /home/user writes only where it checked, even if the home directory's
 * owner moves the path's ancestors later. Not there and not makeable
 * (read-only): -1, and journals stay in memory as before. Unsafe: -1 with
 * e, and serve refuses to start. */
static int
pin_state_dir(struct api_gen *g, struct api *api, struct err *e)
{
	char state[PATH_MAX];
	int fd;

	if (tools_state_dir(&g->cfg, state, sizeof(state)) != 0)
		return 0;
	fd = fs_dir_open_safe(state, 1, e);
	if (fd < 0) {
		if (strcmp(e->code, "config.state_dir_unsafe") == 0)
			return -1;
		err_clear(e);
		return 0;
	}
	api->state_fd = fd;
	api->have_state_fd = 1;
	install_audit_pin_dir(fd);
	return 0;
}

/* The server core's settings: the configuration, with serve's timeout
 * options over it. GET /health first and inline; every other method and
 * target (TRACE, PROPFIND, lowercase ones, OPTIONS *) goes to the API,
 * which authenticates before it routes, so the server core never answers
 * 404 or 405 before the token is checked. The API's gate checks the token
 * as soon as a head is complete: a request without one is answered 401
 * before its body is read, and an authorized upload that stalls is not
 * closed for connections nobody has vouched for (core/net/httpd.h). */
static void
httpd_settings(struct httpd_config *cfg, struct httpd_route *routes, const struct api_gen *g,
               const struct serve_opts *o, struct api *api)
{
	routes[0] = (struct httpd_route){"GET", "/health", HTTPD_EXACT | HTTPD_INLINE | HTTPD_PUBLIC,
	                                 api_health, api};
	routes[1] = (struct httpd_route){"GET", "/ready", HTTPD_EXACT | HTTPD_PUBLIC, api_ready, api};
	routes[2] = (struct httpd_route){"*", "", HTTPD_PREFIX, api_handle, api};
	httpd_config_defaults(cfg);
	cfg->routes = routes;
	cfg->nroutes = 3;
	cfg->host = g->cfg.server.host;
	cfg->port = g->cfg.server.port;
	cfg->max_conns = g->cfg.server.max_connections;
	cfg->max_conns_per_peer = g->cfg.server.max_connections_per_peer;
	cfg->workers = g->cfg.server.workers;
	cfg->max_body = (size_t)g->cfg.server.max_body_bytes;
	cfg->max_head = (size_t)g->cfg.server.max_header_bytes;
	cfg->header_timeout_ms = o->hdr_ms > 0 ? o->hdr_ms : g->cfg.server.header_timeout * 1000;
	cfg->idle_timeout_ms = o->idle_ms > 0 ? o->idle_ms : g->cfg.server.idle_timeout * 1000;
	cfg->body_timeout_ms = o->body_ms > 0 ? o->body_ms : g->cfg.server.request_timeout * 1000;
	cfg->gate = api_gate;
	cfg->gate_arg = api;
	cfg->observe = api_observe;
	cfg->observe_arg = api;
	cfg->tick = api_tick;
	cfg->tick_arg = api;
	cfg->access_log = !o->quiet;
	cfg->verbose = o->verbose;
}

/* Nothing configured: a token of our own, in the state directory, for
 * principal default. Not writable there: a warning, and every request but
 * /health answers 401. Returns 0, or -1 with e. */
static int
default_token(struct api_gen *g, struct api *api, struct err *e)
{
	char tok[2 * API_TOKEN_BYTES + 1], state[PATH_MAX], tokpath[PATH_MAX + 8];
	struct digest d;

	if (api_policy_has_tokens(&g->pol))
		return 0;
	if (tools_state_dir(&g->cfg, state, sizeof(state)) < 0 ||
	    api_token_file(state, tok, sizeof(tok), tokpath, sizeof(tokpath), e) != 0) {
		logline("warning: no token configured and none could be written (%s: %s); set "
		        "ABX_SERVER_TOKEN. Every request but /health answers 401.",
		        e->code != NULL ? e->code : "io.error", e->msg);
		return 0;
	}
	digest_buf(DIGEST_SHA256, tok, strlen(tok), &d);
	explicit_bzero(tok, sizeof(tok));
	memcpy(api->default_digest, d.v, 32);
	api->have_default_digest = 1;
	if (policy_add_token_digest(&g->pol, "default", d.v, e) != 0)
		return -1;
	logline("access token for principal default is in %s", tokpath);
	return 0;
}

/* SIGTERM and SIGINT drain the server, SIGPIPE is ignored, and the reload
 * thread (the only one that takes SIGHUP) starts. */
static void
start_signals(struct reload_args *ra)
{
	struct sigaction sa;
	pthread_t th;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	if (pthread_create(&th, NULL, reload_thread, ra) == 0)
		pthread_detach(th);
}

/* Serve until a signal drains the server, then end the sessions and free
 * what no running job still uses. Returns the exit code. */
static int
run_and_stop(struct api *api, struct manifest_set *ms, int quiet, struct err *e)
{
	struct jobs_stats js;
	int rc;

	rc = httpd_run(g_srv, e);
	/* Requests no longer come: the count of folded auth failures is
	 * written now or never. */
	api_flush_audit(api);
	if (rc < 0) {
		httpd_free(g_srv);
		return fail(e);
	}
	/* Running agents end with the server (marked interrupted), so no
	 * child outlives it; a session still ending keeps the table. */
	if (api->sessions != NULL && sessions_shutdown(api->sessions, PROC_KILL_GRACE_MS_DEFAULT + 1000) > 0)
		rc = 1;
	if (rc == 1) {
		warnx_line("serve: drain time ran out with requests still running");
		httpd_free(g_srv);
		return EXIT_OK;
	}
	if (!quiet)
		logline("stopped");
	httpd_free(g_srv);
	/* An install job still running uses the manifests and the job
	 * table: leave both to process exit. */
	jobs_get_stats(api->jobs, &js);
	if (js.running > 0)
		return EXIT_OK;
	sessions_free(api->sessions);
	api->sessions = NULL;
	api_free(api);
	manifest_set_close(ms);
	return EXIT_OK;
}

int
serve_main(int argc, char **argv)
{
	static struct serve_opts o;
	static struct manifest_set ms;
	static struct api api;
	static struct reload_args ra;
	static struct tokfile tf;
	int introspect = 0, rc, mem, nargs;
	const char *envtok;
	char smsg[1024];
	struct httpd_route routes[8];
	struct httpd_config cfg;
	struct api_gen *g;
	struct digest d;
	sigset_t hup;
	struct err e = {0};

	memset(&o, 0, sizeof(o));
	if ((rc = opts_parse(&usage, argc, argv, &o, &nargs)) >= 0)
		return rc;
	/* Before any thread exists, so every thread inherits the mask and
	 * only the reload thread takes SIGHUP. */
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);

	err_clear(&e);
	if (open_manifests(&ms, o.config_file, &o.flags, &introspect, &e) != 0)
		return fail(&e);
	/* Introspection (ABX_SERVER_INTROSPECT): load and check everything
	 * serve would, then stop: no socket, no secret read, nothing written. */
	envtok = introspect ? NULL : config_env("ABX_SERVER_TOKEN");
	if (envtok != NULL && envtok[0] != '\0') {
		if (strlen(envtok) > API_TOKEN_MAX) {
			err_set(&e, "config.invalid", "ABX_SERVER_TOKEN is longer than %d bytes",
			        API_TOKEN_MAX);
			return fail(&e);
		}
		digest_buf(DIGEST_SHA256, envtok, strlen(envtok), &d);
		memcpy(api.default_digest, d.v, 32);
		api.have_default_digest = 1;
	}
	g = api_gen_build(o.config_file, o.flags.v, o.flags.n, &ms,
	                  api.have_default_digest ? api.default_digest : NULL, &e);
	/* a manifest the configuration names that does not load is a
	 * configuration error, as in check-config */
	if (g == NULL) {
		rc = fail(&e);
		return e.code != NULL && strcmp(e.code, "install.manifest_invalid") == 0 ? EXIT_USAGE : rc;
	}
	if (api.have_default_digest && g->cfg.server.token_file[0] != '\0') {
		api_gen_free(g);
		err_set(
		    &e, "config.invalid",
		    "ABX_SERVER_TOKEN and server.token_file both give principal default's token; keep one");
		return fail(&e);
	}
	if (refuse_unsafe_dirs(g, &e) != 0) {
		api_gen_free(g);
		return fail(&e);
	}
	if (introspect) {
		printf("serve: ABX_SERVER_INTROSPECT is set: configuration, policy and commands load; "
		       "would listen on %s:%d; no socket opened, no token read\n",
		       g->cfg.server.host, g->cfg.server.port);
		api_gen_free(g);
		return EXIT_OK;
	}
	/* The socket is bound before the token and sessions/ are written, so a
	 * port in use leaves nothing behind. */
	httpd_settings(&cfg, routes, g, &o, &api);
	g_srv = httpd_new(&cfg, &e);
	if (g_srv == NULL)
		return fail(&e);
	if (install_audit_check(&g->cfg, 0, &e) != 0 || pin_state_dir(g, &api, &e) != 0) {
		httpd_free(g_srv);
		api_gen_free(g);
		return fail(&e);
	}
	if (g->cfg.server.token_file[0] != '\0') {
		/* No token is made: the platform writes one per sandbox. */
		if (tokfile_start(&tf, g->cfg.server.token_file, g->cfg.server.sandbox_id_file, &e) != 0)
			return fail(&e);
		api.tf = &tf;
		if (!o.quiet)
			logline("access token for principal default: %s (%s)", tf.path,
			        tokfile_ready(&tf, NULL) == 0 ? "read" : "not there yet: not initialised");
	} else if (default_token(g, &api, &e) != 0) {
		api_gen_free(g);
		return fail(&e);
	}
	api.start_env = environ;
	api.verbose = o.verbose;
	if (api_init(&api, g, &ms, &e) != 0)
		return fail(&e);
	if ((mem = api_sessions_init(&api, smsg, sizeof(smsg), &e)) < 0)
		return fail(&e);
	if (!o.quiet || mem == 1)
		logline("%s", smsg);
	ra = (struct reload_args){&api, o.config_file, o.flags.v, o.flags.n};
	start_signals(&ra);
	if (cfg.port == 0) {
		printf("%d\n", httpd_port(g_srv));
		fflush(stdout);
	}
	if (!o.quiet)
		logline("listening on %s port %d (%d slots, %d workers; %d ops, mode %s)", cfg.host,
		        httpd_port(g_srv), cfg.max_conns, cfg.workers, ops_n(&g->ops),
		        config_mode_name(g->cfg.install.mode));
	return run_and_stop(&api, &ms, o.quiet, &e);
}

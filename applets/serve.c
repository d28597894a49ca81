/*
 * serve: the HTTP API that runs operations and agent sessions for one
 * sandbox. Options and start-up here; the server core is core/net/httpd.c, the
 * API core/api*.c.
 */
#include "common.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/api.h"
#include "cfgload.h"
#include "base/digest.h"
#include "base/fs.h"
#include "net/httpd.h"
#include "pkg/manifest.h"
#include "base/proc.h"
#include "server/sessions.h"

static const char usage[] =
    "usage: agent-sandbox-server serve [--host H] [--port N] [--config F] [--policy F]\n"
    "                                  [--preset P] [--commands F] [-q|-v] ...\n"
    "\n"
    "Serve the sandbox HTTP API. GET /health answers without a token; every\n"
    "other request needs X-Access-Token or Authorization: Bearer.\n"
    "\n"
    "  --host H               address to listen on (default 0.0.0.0)\n"
    "  --port N               port (default 9000); 0 picks a free port and prints\n"
    "                         it alone on the first line of stdout\n"
    "  --config FILE          configuration file (default /etc/agent-sandbox/server.json)\n"
    "  --policy FILE          policy file (default /etc/agent-sandbox/server-policy.json)\n"
    "  --preset NAME          readonly, agents or admin for principal default\n"
    "  --commands FILE        command ops\n"
    "  --manifests DIR        manifests adding to or overriding the built-in ones\n"
    "  --tools-dir DIR        tools directory (ABX_TOOLS_DIR)\n"
    "  --state-dir DIR        state directory (ABX_SERVER_STATE_DIR)\n"
    "  --base-dir DIR         where HOME-relative defaults resolve (ABX_SERVER_BASE_DIR)\n"
    "  --mode MODE            install mode: lazy, offline, build, off\n"
    "  --max-connections N    connection slots, fixed at start (default 256);\n"
    "                         beyond them a client gets 503\n"
    "  --workers N            handler threads (default 4)\n"
    "  --header-timeout SECS  time for a whole request head (default 10)\n"
    "  --idle-timeout SECS    keep-alive wait for the next request (default 60)\n"
    "  --body-timeout SECS    time for a whole request body (default 60)\n"
    "  -q, --quiet            no access log\n"
    "  -v, --verbose          also log refused and timed-out connections\n"
    "\n"
    "Tokens: ABX_SERVER_TOKEN is principal default's; with no token configured\n"
    "a random one is written to <state dir>/token (mode 0600) and its path logged.\n"
    "SIGTERM or SIGINT: stop accepting, finish requests in progress, exit 0.\n"
    "SIGHUP: reload configuration, policy and commands; a bad file keeps the old.\n";

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
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
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
	struct err e;
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
		if (!api_policy_has_tokens(&g->pol))
			logline(
			    "warning: the new policy has no token; every request but /health answers 401");
		api_swap(r->api, g);
		logline("configuration reloaded (%d ops, %d principals, mode %s)", g->ops.n, g->pol.n,
		        config_mode_name(g->set.mode));
	}
	return NULL;
}

static int
parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	v = strtol(s, &end, 10);
	if (*end != '\0' || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* Seconds, fractions allowed ("0.5"), into milliseconds; 1 ms .. 1 day. */
static int
parse_secs(const char *s, int *ms)
{
	char *end;
	double v;

	if ((s[0] < '0' || s[0] > '9') && s[0] != '.')
		return -1;
	v = strtod(s, &end);
	if (*end != '\0' || v < 0.001 || v > 86400)
		return -1;
	*ms = (int)(v * 1000 + 0.5);
	return 0;
}

/* The manifests, every one loaded now: after this the set is only read,
 * so request threads and install jobs share it without a lock. */
static int
open_manifests(struct manifest_set *ms, const char *config_file, const struct config_flags *flags,
               int *introspect, struct err *e)
{
	struct config *c = malloc(sizeof(*c));
	struct err e2;
	int i;

	if (c == NULL)
		return err_set(e, "internal", "out of memory");
	/* the API's load (api_gen_build) prints the warnings */
	if (cfgload_config(c, config_file, flags, 0, e) != 0) {
		free(c);
		return -1;
	}
	*introspect = c->introspect;
	i = cfgload_manifests(ms, c, NULL, e);
	free(c);
	if (i < 0)
		return -1;
	for (i = 0; i < ms->n; i++)
		if (manifest_get(ms, ms->ent[i].name, &e2) == NULL)
			warnx_line("manifest %s: %s: %s", ms->ent[i].name, e2.code, e2.msg);
	return 0;
}

/* The command line: configuration flags (each key once, the last given
 * wins) and the options that are serve's own. Static storage: the reload
 * thread reads the flags for the life of the process. */
struct serve_opts {
	struct config_flags flags;
	int hdr_ms, idle_ms, body_ms;
	int quiet, verbose;
	const char *config_file;
};

/* Options into o. Returns -1 to go on, else the exit code (--help, or a
 * usage error already printed). */
static int
parse_options(int argc, char **argv, struct serve_opts *o)
{
	enum { O_MAXC = 256, O_WORKERS, O_HDR, O_IDLE, O_BODY, O_CFG };
	static const struct option opts[] = {
	    {"host", required_argument, NULL, 'H'},
	    {"port", required_argument, NULL, 'p'},
	    {"max-connections", required_argument, NULL, O_MAXC},
	    {"workers", required_argument, NULL, O_WORKERS},
	    {"header-timeout", required_argument, NULL, O_HDR},
	    {"idle-timeout", required_argument, NULL, O_IDLE},
	    {"body-timeout", required_argument, NULL, O_BODY},
	    {"config", required_argument, NULL, O_CFG},
	    {"policy", required_argument, NULL, O_CFG},
	    {"preset", required_argument, NULL, O_CFG},
	    {"commands", required_argument, NULL, O_CFG},
	    {"manifests", required_argument, NULL, O_CFG},
	    {"tools-dir", required_argument, NULL, O_CFG},
	    {"state-dir", required_argument, NULL, O_CFG},
	    {"base-dir", required_argument, NULL, O_CFG},
	    {"mode", required_argument, NULL, O_CFG},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, idx, dummy;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hqv", opts, &idx)) != -1) {
		const char *name = NULL;

		switch (c) {
		case 'H':
			name = "host";
			break;
		case 'p':
			if (parse_int(optarg, 0, 65535, &dummy) != 0)
				return usage_error("serve", usage, "--port %s: expected 0..65535", optarg);
			name = "port";
			break;
		case O_MAXC:
			if (parse_int(optarg, 1, 65536, &dummy) != 0)
				return usage_error("serve", usage, "--max-connections %s: expected 1..65536",
				                   optarg);
			name = "max-connections";
			break;
		case O_WORKERS:
			if (parse_int(optarg, 1, 256, &dummy) != 0)
				return usage_error("serve", usage, "--workers %s: expected 1..256", optarg);
			name = "workers";
			break;
		case O_HDR:
		case O_IDLE:
		case O_BODY:
			if (parse_secs(optarg, c == O_HDR    ? &o->hdr_ms
			                       : c == O_IDLE ? &o->idle_ms
			                                     : &o->body_ms) != 0)
				return usage_error("serve", usage, "%s: expected seconds (0.001..86400)",
				                   optarg);
			break;
		case O_CFG:
			if (strcmp(opts[idx].name, "config") == 0)
				o->config_file = optarg;
			else
				name = opts[idx].name;
			break;
		case 'q':
			o->quiet = 1;
			o->verbose = 0;
			break;
		case 'v':
			o->verbose = 1;
			o->quiet = 0;
			break;
		case 'h':
			return usage_help(usage);
		default:
			return bad_option("serve", usage, argc, argv);
		}
		if (name != NULL)
			config_flags_add(&o->flags, name, optarg);
	}
	if (optind < argc)
		return usage_error("serve", usage, "unexpected argument %s", argv[optind]);
	return -1;
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

	if (tools_state_dir(&g->set, state, sizeof(state)) == 0) {
		fd = fs_dir_open_safe(state, 0, e);
		if (fd >= 0)
			close(fd);
		else if (strcmp(e->code, "config.state_dir_unsafe") == 0)
			return -1;
		err_clear(e);
	}
	return tools_chain_build(&chain, &g->set, 0, e);
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

	if (tools_state_dir(&g->set, state, sizeof(state)) != 0)
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
	routes[1] = (struct httpd_route){"*", "", HTTPD_PREFIX, api_handle, api};
	httpd_config_defaults(cfg);
	cfg->routes = routes;
	cfg->nroutes = 2;
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
	if (tools_state_dir(&g->set, state, sizeof(state)) < 0 ||
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
	int introspect = 0, rc, mem;
	const char *envtok;
	char smsg[1024];
	struct httpd_route routes[8];
	struct httpd_config cfg;
	struct api_gen *g;
	struct digest d;
	sigset_t hup;
	struct err e;

	memset(&o, 0, sizeof(o));
	if ((rc = parse_options(argc, argv, &o)) >= 0)
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
	if (g == NULL)
		return fail(&e);
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
	if (install_audit_check(&g->set, 0, &e) != 0 || pin_state_dir(g, &api, &e) != 0) {
		httpd_free(g_srv);
		api_gen_free(g);
		return fail(&e);
	}
	if (default_token(g, &api, &e) != 0) {
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
		        httpd_port(g_srv), cfg.max_conns, cfg.workers, g->ops.n,
		        config_mode_name(g->set.mode));
	return run_and_stop(&api, &ms, o.quiet, &e);
}

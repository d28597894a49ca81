/*
 * serve: the HTTP API (SPEC §9). This slice: the server core, GET /health,
 * the error envelope for everything else, SIGTERM/SIGINT drain.
 */
#include "common.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd.h"

static const char usage[] = "usage: agent-sandbox-server serve [--host H] [--port N] [--max-connections N]\n"
                            "                                  [--workers N] [-q|-v]\n"
                            "\n"
                            "Serve the sandbox HTTP API. GET /health answers without a token.\n"
                            "\n"
                            "  --host H               address to listen on (default 0.0.0.0)\n"
                            "  --port N               port (default 9000); 0 picks a free port and prints\n"
                            "                         it alone on the first line of stdout\n"
                            "  --max-connections N    connection slots, fixed at start (default 1024);\n"
                            "                         beyond them a client gets 503\n"
                            "  --workers N            handler threads (default 8)\n"
                            "  --header-timeout SECS  time for a whole request head (default 10)\n"
                            "  --idle-timeout SECS    keep-alive wait for the next request (default 60)\n"
                            "  --body-timeout SECS    time for a whole request body (default 30)\n"
                            "  -q, --quiet            no access log\n"
                            "  -v, --verbose          also log refused and timed-out connections\n"
                            "\n"
                            "SIGTERM or SIGINT: stop accepting, finish requests in progress, exit 0.\n";

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif

static struct httpd *g_srv;

static void
on_signal(int sig)
{
	if (g_srv != NULL)
		httpd_stop(g_srv);
}

static void
health(const struct httpd_req *req, struct httpd_resp *resp, void *arg)
{
	httpd_respond_json(resp, 200, "{\"status\":\"ok\",\"version\":\"" ABX_VERSION "\"}");
}

/* The route table; later endpoints add lines here. */
static const struct httpd_route routes[] = {
    {"GET", "/health", HTTPD_EXACT | HTTPD_INLINE | HTTPD_PUBLIC, health, NULL},
};

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

int
serve_main(int argc, char **argv)
{
	enum { O_MAXC = 256, O_WORKERS, O_HDR, O_IDLE, O_BODY };
	static const struct option opts[] = {
	    {"host", required_argument, NULL, 'H'},
	    {"port", required_argument, NULL, 'p'},
	    {"max-connections", required_argument, NULL, O_MAXC},
	    {"workers", required_argument, NULL, O_WORKERS},
	    {"header-timeout", required_argument, NULL, O_HDR},
	    {"idle-timeout", required_argument, NULL, O_IDLE},
	    {"body-timeout", required_argument, NULL, O_BODY},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct httpd_config cfg;
	struct sigaction sa;
	struct err e;
	int c, rc;

	httpd_config_defaults(&cfg);
	cfg.routes = routes;
	cfg.nroutes = (int)(sizeof(routes) / sizeof(routes[0]));
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hqv", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			cfg.host = optarg;
			break;
		case 'p':
			if (parse_int(optarg, 0, 65535, &cfg.port) != 0)
				return usage_error("serve", usage, "--port %s: expected 0..65535", optarg);
			break;
		case O_MAXC:
			if (parse_int(optarg, 1, 65536, &cfg.max_conns) != 0)
				return usage_error("serve", usage, "--max-connections %s: expected 1..65536",
				                   optarg);
			break;
		case O_WORKERS:
			if (parse_int(optarg, 1, 256, &cfg.workers) != 0)
				return usage_error("serve", usage, "--workers %s: expected 1..256", optarg);
			break;
		case O_HDR:
		case O_IDLE:
		case O_BODY:
			if (parse_secs(optarg, c == O_HDR    ? &cfg.header_timeout_ms
			                       : c == O_IDLE ? &cfg.idle_timeout_ms
			                                     : &cfg.body_timeout_ms) != 0)
				return usage_error("serve", usage, "%s: expected seconds (0.001..86400)",
				                   optarg);
			break;
		case 'q':
			cfg.access_log = 0;
			cfg.verbose = 0;
			break;
		case 'v':
			cfg.access_log = 1;
			cfg.verbose = 1;
			break;
		case 'h':
			return usage_help(usage);
		default:
			return bad_option("serve", usage, argc, argv);
		}
	}
	if (optind < argc)
		return usage_error("serve", usage, "unexpected argument %s", argv[optind]);

	err_clear(&e);
	g_srv = httpd_new(&cfg, &e);
	if (g_srv == NULL)
		return fail(&e);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	if (cfg.port == 0) {
		printf("%d\n", httpd_port(g_srv));
		fflush(stdout);
	}
	if (cfg.access_log) {
		char line[160];
		int n = snprintf(line, sizeof(line),
		                 "%s: serve: listening on %s port %d (%d slots, %d workers)\n", PROG,
		                 cfg.host, httpd_port(g_srv), cfg.max_conns, cfg.workers);

		(void)!write(2, line, (size_t)n);
	}
	rc = httpd_run(g_srv, &e);
	if (rc < 0) {
		httpd_free(g_srv);
		return fail(&e);
	}
	if (rc == 1)
		warnx_line("serve: drain time ran out with requests still running");
	else if (cfg.access_log)
		(void)!write(2, PROG ": serve: stopped\n", sizeof(PROG ": serve: stopped\n") - 1);
	httpd_free(g_srv);
	return EXIT_OK;
}

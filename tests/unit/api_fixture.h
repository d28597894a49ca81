/* An API served in the test process: a configuration written to a private
 * directory, the generation built from it (as serve builds it), httpd on
 * 127.0.0.1 with serve's two routes and gate, and a client that sends one request
 * per connection. Included by test_api_ops.c and test_api_sessions.c. */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "server/api.h"
#include "base/digest.h"
#include "net/httpd.h"
#include "base/json.h"
#include "pkg/manifest.h"
#include "server/sessions.h"

/* The token of principal default, and of a principal limited by policy. */
#define FX_TOKEN "test-token-default"
#define FX_TOKEN_BOB "test-token-bob"
/* Seconds a client waits for a whole answer. */
#define FX_WAIT_S 20

struct fx {
	char dir[256];
	struct manifest_set ms;
	struct api api;
	struct httpd *srv;
	pthread_t loop;
	struct httpd_route routes[2];
};

static struct fx fx;
extern char **environ;

static void
fx_write(const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", fx.dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void *
fx_run(void *arg)
{
	struct err e;

	httpd_run(fx.srv, &e);
	return NULL;
}

/* Serve config (a JSON object's members after "commands", "policy",
 * "preset", the directories) with commands cmds (a JSON array) and agent
 * manifests in <dir>/man (mans: name, JSON, ... NULL). 0 or -1. */
static int
fx_start(const char *config, const char *cmds, const char *const *mans)
{
	static const char *const unset[] = {
	    "ABX_TOOLS_DIR",        "ABX_MANIFESTS_DIR", "ABX_SERVER_CONFIG",       "ABX_SERVER_TOKEN",
	    "ABX_SERVER_POLICY",    "ABX_SERVER_PRESET", "ABX_SERVER_AGENTS",       "ABX_SERVER_COMMANDS",
	    "ABX_SERVER_STATE_DIR", "ABX_INSTALL_MODE",  "ABX_SERVER_INSTALL_MODE", "ABX_SERVER_ENV"};
	char path[512], text[8192], bob[65], smsg[1024];
	struct manifest_opts mo = {.platform = manifest_platform_self()};
	struct httpd_config hc;
	struct digest d;
	struct api_gen *g;
	struct err e;
	size_t i;

	for (i = 0; i < sizeof(unset) / sizeof(unset[0]); i++)
		unsetenv(unset[i]);
	memset(&fx, 0, sizeof(fx));
	if (unit_mkdtemp(fx.dir, sizeof(fx.dir), "api") != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/man", fx.dir);
	mkdir(path, 0700);
	for (i = 0; mans != NULL && mans[i] != NULL; i += 2) {
		snprintf(text, sizeof(text), "man/%s.json", mans[i]);
		fx_write(text, mans[i + 1]);
	}
	digest_buf(DIGEST_SHA256, FX_TOKEN_BOB, strlen(FX_TOKEN_BOB), &d);
	for (i = 0; i < 32; i++)
		snprintf(bob + 2 * i, 3, "%02x", d.v[i]);
	snprintf(text, sizeof(text),
	         "{\"principals\": {\"bob\": {\"token_sha256\": \"%s\", \"allow\": [\"echo.*\"]}}}", bob);
	fx_write("policy.json", text);
	fx_write("cmds.json", cmds);
	snprintf(text, sizeof(text),
	         "{\"commands\": \"%s/cmds.json\", \"policy\": \"%s/policy.json\", \"preset\": \"admin\","
	         " \"manifests_dir\": \"%s/man\", \"tools_dir\": \"%s/tools\", \"state_dir\": \"%s/state\","
	         " \"audit_file\": \"%s/audit.jsonl\"%s%s}",
	         fx.dir, fx.dir, fx.dir, fx.dir, fx.dir, fx.dir, config[0] != '\0' ? ", " : "", config);
	fx_write("config.json", text);
	snprintf(path, sizeof(path), "%s/config.json", fx.dir);
	snprintf(text, sizeof(text), "%s/man", fx.dir);
	if (manifest_set_open(&fx.ms, text, &mo, &e) != 0) {
		fprintf(stderr, "manifests: %s: %s\n", e.code, e.msg);
		return -1;
	}
	digest_buf(DIGEST_SHA256, FX_TOKEN, strlen(FX_TOKEN), &d);
	memcpy(fx.api.default_digest, d.v, 32);
	fx.api.have_default_digest = 1;
	g = api_gen_build(path, NULL, 0, &fx.ms, fx.api.default_digest, &e);
	if (g == NULL) {
		fprintf(stderr, "generation: %s: %s\n", e.code, e.msg);
		return -1;
	}
	fx.api.start_env = environ;
	if (api_init(&fx.api, g, &fx.ms, &e) != 0 || api_sessions_init(&fx.api, smsg, sizeof(smsg), &e) < 0) {
		fprintf(stderr, "api: %s: %s\n", e.code, e.msg);
		return -1;
	}
	fx.routes[0] = (struct httpd_route){"GET", "/health", HTTPD_EXACT | HTTPD_INLINE | HTTPD_PUBLIC,
	                                    api_health, &fx.api};
	fx.routes[1] = (struct httpd_route){"*", "", HTTPD_PREFIX, api_handle, &fx.api};
	httpd_config_defaults(&hc);
	hc.host = "127.0.0.1";
	hc.port = 0;
	hc.routes = fx.routes;
	hc.nroutes = 2;
	hc.workers = 4;
	hc.access_log = 0;
	hc.max_body = g->cfg.server.max_body_bytes;
	hc.gate = api_gate;
	hc.gate_arg = &fx.api;
	hc.observe = api_observe;
	hc.observe_arg = &fx.api;
	if ((fx.srv = httpd_new(&hc, &e)) == NULL) {
		fprintf(stderr, "httpd: %s: %s\n", e.code, e.msg);
		return -1;
	}
	return pthread_create(&fx.loop, NULL, fx_run, NULL) == 0 ? 0 : -1;
}

static void
fx_stop(void)
{
	httpd_stop(fx.srv);
	pthread_join(fx.loop, NULL);
	httpd_free(fx.srv);
	if (fx.api.sessions != NULL)
		sessions_shutdown(fx.api.sessions, 3000);
	api_free(&fx.api);
	sessions_free(fx.api.sessions);
	manifest_set_close(&fx.ms);
	unit_rmtree(fx.dir);
}

/* One request (token tok, NULL = none) on its own connection; the answer's
 * status, its body in body (NUL-terminated, cut at cap), its head in head
 * when not NULL. */
static int
fx_req(const char *method, const char *target, const char *tok, const char *json, char *body, size_t cap,
       char *head, size_t hcap)
{
	struct sockaddr_in a;
	size_t got = 0, n = json != NULL ? strlen(json) : 0, want;
	char *req = malloc(n + 1024), *out = malloc(1 << 22), *sep;
	struct pollfd p;
	int fd, status = -1, k;
	ssize_t r;

	assert_non_null(req);
	assert_non_null(out);
	k = snprintf(req, n + 1024,
	             "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s%s%sContent-Length: %zu\r\n"
	             "Content-Type: application/json\r\n\r\n",
	             method, target, tok != NULL ? "X-Access-Token: " : "", tok != NULL ? tok : "",
	             tok != NULL ? "\r\n" : "", n);
	memcpy(req + k, json != NULL ? json : "", n);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)httpd_port(fx.srv));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	want = (size_t)k + n;
	assert_int_equal(send(fd, req, want, MSG_NOSIGNAL), (ssize_t)want);
	p = (struct pollfd){fd, POLLIN, 0};
	while (got < (1u << 22) - 1 && poll(&p, 1, FX_WAIT_S * 1000) == 1) {
		r = recv(fd, out + got, (1u << 22) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	out[got] = '\0';
	sscanf(out, "HTTP/1.1 %d", &status);
	body[0] = '\0';
	if ((sep = strstr(out, "\r\n\r\n")) != NULL) {
		snprintf(body, cap, "%s", sep + 4);
		if (head != NULL)
			snprintf(head, hcap, "%.*s", (int)(sep - out), out);
	}
	free(req);
	free(out);
	return status;
}

/* The same with the default token and no head. */
static int
fx_call(const char *method, const char *target, const char *json, char *body, size_t cap)
{
	return fx_req(method, target, FX_TOKEN, json, body, cap, NULL, 0);
}

/* The answer's body as a document (the caller frees it); not JSON fails
 * the test. */
static const struct json_val *
fx_parse(struct json_doc *d, const char *body)
{
	struct err e;

	if (json_parse(d, body, strlen(body), NULL, &e) != 0) {
		fprintf(stderr, "not JSON (%s): %s\n", e.msg, body);
		fail();
	}
	return d->root;
}

/* The answer is an error with code. */
static void
fx_assert_code(const char *body, const char *code)
{
	struct json_doc d;
	const struct json_val *er = json_get(fx_parse(&d, body), "error");
	int same =
	    er != NULL && json_get_str(er, "code") != NULL && strcmp(json_get_str(er, "code"), code) == 0;

	json_free(&d);
	if (!same) {
		fprintf(stderr, "want %s: %s\n", code, body);
		fail();
	}
}

/*
 * The OpenAI wire of agent sessions, what the official SDK's
 * client.beta.agents.sessions calls (baseURL = the server's /v1):
 *   POST   /v1/agents/sessions                    create (stream: true: SSE)
 *   GET    /v1/agents/sessions                    list (cursor pages)
 *   GET    /v1/agents/sessions/<id>               retrieve
 *   POST   /v1/agents/sessions/<id>               update (metadata)
 *   DELETE /v1/agents/sessions/<id>               delete
 *   GET    /v1/agents/sessions/<id>/events        stream (SSE, Last-Event-ID)
 *   POST   /v1/agents/sessions/<id>/events        message, cancel
 *   GET    /v1/agents/sessions/<id>/items         items (cursor pages)
 *   GET    /v1/agents/sessions/<id>/turns[/<t>[/items]]
 * A session here is a conversation of core/server/sessions.c; its objects
 * and events are the ones the SDK's type definitions describe. What the
 * sandbox cannot honour (hosted environments, spend limits, vaults, tools)
 * is a 400 naming the parameter.
 */
#include "server/api_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "server/sessions.h"

/* Page sizes of the list calls: the SDK's default and the ceiling. */
#ifdef ABX_TEST
void (*api_test_created)(struct sessions *S, const char *id);
#endif

#define WIRE_PAGE 20
#define WIRE_PAGE_MAX 100
/* A session's own members (agent, environment, metadata) as JSON. */
#define WIRE_CONF_MAX (SESSION_ARG_MAX + 16384)

/* ---- input ------------------------------------------------------------------ */

/* The text of an input: a string, or messages {role: user, content:
 * [{type: input_text, text}]} (their texts joined by newlines), into b.
 * 0, or -1 with e naming what is not supported. */
static int
input_text(const struct json_val *in, const char *name, struct buf *b, struct err *e)
{
	size_t i, k;

	if (in->type == JSON_STRING)
		return buf_put(b, in->u.str.s, in->u.str.len) == 0 ? 0
		                                                   : err_set(e, "internal", "out of memory");
	if (in->type != JSON_ARRAY)
		return err_set(e, "request.invalid", "%s must be a string or an array of messages", name);
	for (i = 0; i < in->u.arr.n; i++) {
		const struct json_val *m = &in->u.arr.v[i], *c = json_get(m, "content");
		const char *role = json_get_str(m, "role");

		if (m->type != JSON_OBJECT || role == NULL || strcmp(role, "user") != 0 || c == NULL ||
		    c->type != JSON_ARRAY)
			return err_set(e, "request.invalid", "%s[%zu] must be a user message with content",
			               name, i);
		for (k = 0; k < c->u.arr.n; k++) {
			const struct json_val *part = &c->u.arr.v[k], *t = json_get(part, "text");
			const char *ty = json_get_str(part, "type");

			if (ty == NULL || strcmp(ty, "input_text") != 0 || t == NULL ||
			    t->type != JSON_STRING)
				return err_set(
				    e, "request.invalid",
				    "%s[%zu].content[%zu]: only input_text parts are supported (an "
				    "agent CLI takes text)",
				    name, i, k);
			if ((b->len > 0 && buf_put(b, "\n", 1) != 0) ||
			    buf_put(b, t->u.str.s, t->u.str.len) != 0)
				return err_set(e, "internal", "out of memory");
		}
	}
	return 0;
}

/* A message's text must fit one argv word and hold no NUL. */
static int
text_ok(const struct buf *b, struct err *e)
{
	if (b->len >= SESSION_ARG_MAX)
		return err_set(e, "request.too_large",
		               "the message has %zu bytes; at most %u fit an agent's argv", b->len,
		               SESSION_ARG_MAX - 1);
	if (b->len == 0 || memchr(b->p, '\0', b->len) != NULL)
		return err_set(e, "request.invalid", "the message must be non-empty text without NUL");
	return 0;
}

/* A member that may be absent or null only. */
static int
absent(const struct json_val *v)
{
	return v == NULL || v->type == JSON_NULL;
}

/*
 * Check a create body; fills *agent_id, *input (NULL), *stream and writes
 * the session's own members into conf (its workspace directory resolved
 * into cwd). 0, or -1 with e naming the parameter.
 */
static int
create_check(struct api_rq *q, const struct json_val *r, const char **agent_id, const struct json_val **input,
             int *stream, struct json_w *conf, char *cwd, const char **model, const char **instr,
             struct err *e)
{
	const struct json_val *ag = json_get(r, "agent"), *env = json_get(r, "environment"), *md, *v;
	const char *et;
	size_t i;

	*input = NULL;
	*stream = 0;
	for (i = 0; i < r->u.obj.n; i++) {
		const char *k = r->u.obj.m[i].key;
		const struct json_val *x = &r->u.obj.m[i].val;

		if (strcmp(k, "agent_id") == 0 || strcmp(k, "agent") == 0 || strcmp(k, "environment") == 0 ||
		    strcmp(k, "metadata") == 0)
			continue;
		if (strcmp(k, "input") == 0 && !absent(x))
			*input = x;
		else if (strcmp(k, "stream") == 0 && (x->type == JSON_TRUE || x->type == JSON_FALSE))
			*stream = x->type == JSON_TRUE;
		else if (!((strcmp(k, "spend_control") == 0 || strcmp(k, "vault_ids") == 0 ||
		            strcmp(k, "input") == 0) &&
		           absent(x)) &&
		         !(strcmp(k, "review") == 0 && json_str(x) != NULL &&
		           strcmp(json_str(x), "none") == 0))
			return err_set(e, "request.invalid",
			               "%s is not supported by this server (a local sandbox)", k);
	}
	if ((*agent_id = json_get_str(r, "agent_id")) == NULL)
		return err_set(e, "request.invalid",
		               "agent_id is required: the agent to run (codex, claude-code, "
		               "gemini, ...)");
	if (env == NULL || env->type != JSON_OBJECT || (et = json_get_str(env, "type")) == NULL)
		return err_set(e, "request.invalid", "environment is required: {\"type\": \"self_hosted\"}");
	if (strcmp(et, "self_hosted") != 0)
		return err_set(e, "request.invalid",
		               "environment.type %.32s is not supported: only self_hosted", et);
	for (i = 0; i < env->u.obj.n; i++) {
		const char *k = env->u.obj.m[i].key;

		if (strcmp(k, "type") != 0 && strcmp(k, "workspace_directory") != 0 &&
		    !(strcmp(k, "capability_directories") == 0 && absent(&env->u.obj.m[i].val)))
			return err_set(e, "request.invalid", "environment.%.64s is not supported", k);
	}
	for (i = 0; ag != NULL && ag->type == JSON_OBJECT && i < ag->u.obj.n; i++) {
		const char *k = ag->u.obj.m[i].key;
		const struct json_val *x = &ag->u.obj.m[i].val;

		if (strcmp(k, "model") != 0 && strcmp(k, "instructions") != 0)
			return err_set(e, "request.invalid", "agent.%.64s is not supported", k);
		if (!absent(x) && (x->type != JSON_STRING || x->u.str.len == 0 ||
		                   x->u.str.len > (k[0] == 'm' ? 256u : 16384u) ||
		                   memchr(x->u.str.s, '\0', x->u.str.len) != NULL))
			return err_set(e, "request.invalid",
			               "agent.%s must be text of 1..%u bytes without NUL", k,
			               k[0] == 'm' ? 256u : 16384u);
	}
	if (ag != NULL && ag->type != JSON_OBJECT)
		return err_set(e, "request.invalid", "agent must be an object");
	*model = json_get_str(ag, "model");
	*instr = json_get_str(ag, "instructions");
	md = json_get(r, "metadata");
	if (!absent(md) && (md->type != JSON_OBJECT || md->u.obj.n > 16))
		return err_set(e, "request.invalid", "metadata must be an object of at most 16 strings");
	for (i = 0; !absent(md) && i < md->u.obj.n; i++)
		if (md->u.obj.m[i].val.type != JSON_STRING || strlen(md->u.obj.m[i].key) > 64 ||
		    md->u.obj.m[i].val.u.str.len > 512)
			return err_set(e, "request.invalid",
			               "metadata.%.64s must be a string of at most 512 bytes",
			               md->u.obj.m[i].key);
	{
		struct json_doc d;
		char body[PATH_MAX + 64];
		struct json_w cw;
		int rc;

		v = json_get(env, "workspace_directory");
		if (!absent(v) && (v->type != JSON_STRING || v->u.str.len >= PATH_MAX))
			return err_set(e, "request.invalid",
			               "environment.workspace_directory must be a path");
		json_w_init(&cw, sizeof(body) + 16);
		json_w_obj(&cw);
		if (!absent(v))
			json_w_kstr(&cw, "cwd", v->u.str.s);
		json_w_end(&cw);
		rc = json_parse(&d, cw.buf, cw.len, &json_default_limits, e);
		json_w_free(&cw);
		if (rc != 0)
			return -1;
		rc = api_session_cwd(q, d.root, cwd, PATH_MAX, e);
		json_free(&d);
		if (rc != 0)
			return err_set(e, "request.invalid", "environment.workspace_directory: %s", e->msg);
	}
	json_w_obj(conf);
	json_w_key(conf, "agent");
	json_w_obj(conf);
	json_w_kstr(conf, "id", *agent_id);
	json_w_kstr(conf, "name", *agent_id);
	json_w_kstr(conf, "model", *model != NULL ? *model : "default");
	json_w_key(conf, "instructions");
	if (*instr != NULL)
		json_w_str(conf, *instr);
	else
		json_w_null(conf);
	/* the settings the agent runs with: its own defaults */
	json_w_key(conf, "multi_agent");
	json_w_obj(conf);
	json_w_kbool(conf, "enabled", 0);
	json_w_key(conf, "max_concurrent_subagents");
	json_w_null(conf);
	json_w_end(conf);
	json_w_key(conf, "reasoning");
	json_w_obj(conf);
	json_w_key(conf, "effort");
	json_w_null(conf);
	json_w_key(conf, "summary");
	json_w_null(conf);
	json_w_end(conf);
	json_w_kstr(conf, "service_tier", "auto");
	json_w_key(conf, "text");
	json_w_obj(conf);
	json_w_key(conf, "format");
	json_w_obj(conf);
	json_w_kstr(conf, "type", "text");
	json_w_end(conf);
	json_w_kstr(conf, "verbosity", "medium");
	json_w_end(conf);
	json_w_key(conf, "tools");
	json_w_arr(conf);
	json_w_end(conf);
	json_w_end(conf);
	json_w_key(conf, "environment");
	json_w_obj(conf);
	json_w_kstr(conf, "type", "self_hosted");
	json_w_kstr(conf, "workspace_directory", cwd);
	json_w_end(conf);
	json_w_key(conf, "metadata");
	if (absent(md))
		json_w_raw(conf, "{}");
	else
		json_w_val(conf, md);
	json_w_end(conf);
	return conf->overflow ? err_set(e, "request.too_large", "the session's settings are too long") : 0;
}

/* The body of a start: {"prompt": text, "cwd": cwd} parsed into d. */
static int
start_root(struct json_doc *d, const struct buf *text, const char *cwd, struct err *e)
{
	struct json_w w;
	int rc;

	json_w_init(&w, SESSION_ARG_MAX * 6 + PATH_MAX * 6);
	json_w_obj(&w);
	if (text != NULL) {
		json_w_key(&w, "prompt");
		json_w_strn(&w, (const char *)text->p, text->len);
	}
	json_w_kstr(&w, "cwd", cwd);
	json_w_end(&w);
	rc = w.overflow ? err_set(e, "request.too_large", "the message is too long")
	                : json_parse(d, w.buf, w.len, &json_default_limits, e);
	json_w_free(&w);
	return rc;
}

/* ---- answers ---------------------------------------------------------------- */

static void
respond_session(struct api_rq *q, const char *id, int created)
{
	struct json_w w;

	json_w_init(&w, WIRE_CONF_MAX * 2);
	if (sessions_wire_json(q->a->sessions, id, created, &w) != 0) {
		json_w_free(&w);
		api_rq_errf(q, "not_found", "no session %s", id);
		return;
	}
	api_rq_json_w(q, 200, &w);
}

static void
create(struct api_rq *q)
{
	const struct json_val *r, *in = NULL;
	const char *agent = NULL;
	struct json_doc doc, sd;
	struct wire_start ws;
	struct session_view sv;
	struct buf text = BUF_INIT(SESSION_ARG_MAX + 1);
	struct json_w conf;
	char *cwd = malloc(PATH_MAX);
	int stream = 0, started;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	if (cwd == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	if (api_body_json(q, &doc, &r) != 0) {
		free(cwd);
		return;
	}
	json_w_init(&conf, WIRE_CONF_MAX);
	err_keep_details(&e, ed, sizeof(ed));
	if (r == NULL)
		err_set(&e, "request.invalid",
		        "the body must be a JSON object with agent_id and environment");
	if (r == NULL ||
	    create_check(q, r, &agent, &in, &stream, &conf, cwd, &ws.model, &ws.instructions, &e) != 0 ||
	    (in != NULL && (input_text(in, "input", &text, &e) != 0 || text_ok(&text, &e) != 0)) ||
	    start_root(&sd, in != NULL ? &text : NULL, cwd, &e) != 0) {
		api_rq_err(q, &e);
		goto out;
	}
	ws.id = ws.thread = NULL;
	ws.text = in != NULL ? (const char *)text.p : NULL;
	ws.conf = conf.buf;
	started = api_session_start(q, agent, sd.root, &ws, &sv) == 0;
	json_free(&sd);
#ifdef ABX_TEST
	if (started && api_test_created != NULL)
		api_test_created(q->a->sessions, sv.id);
#endif
	if (started && stream)
		api_events_stream(q, sv.id, 0);
	else if (started)
		respond_session(q, sv.id, 1); /* in_progress at once (docs/api.md) */
out:
	json_w_free(&conf);
	buf_free(&text);
	json_free(&doc);
	free(cwd);
}

/* A message into session id: a new turn through the session's agent. */
static int
message(struct api_rq *q, const char *id, const struct json_val *ev, struct err *e)
{
	const struct json_val *in = json_get(ev, "input");
	struct buf text = BUF_INIT(SESSION_ARG_MAX + 1);
	struct session_view sv;
	struct json_doc sd, wd;
	struct wire_start ws;
	struct json_w w;
	const char *cwd;
	int rc = -1;

	if (sessions_get(q->a->sessions, NULL, id, &sv) != 0)
		return err_set(e, "not_found", "no session %s", id);
	/* before an install is looked at (sessions_turn checks again) */
	if (!sv.conv || sv.status == SESSION_FAILED)
		return err_set(e, "session.closed", "session %s is %s and takes no message", id,
		               sv.conv ? "failed" : "not a conversation (agents.<a>.run made it)");
	if (sv.status != SESSION_IDLE)
		return err_set(e, "session.busy", "session %s has a turn running", id);
	if (in == NULL)
		return err_set(e, "request.invalid", "events[].input is required for a message");
	if (input_text(in, "events[].input", &text, e) != 0 || text_ok(&text, e) != 0) {
		buf_free(&text);
		return -1;
	}
	json_w_init(&w, WIRE_CONF_MAX * 2);
	if (sessions_wire_json(q->a->sessions, id, 0, &w) != 0 || w.overflow ||
	    json_parse(&wd, w.buf, w.len, &json_default_limits, e) != 0) {
		json_w_free(&w);
		buf_free(&text);
		return err_set(e, "not_found", "no session %s", id);
	}
	cwd = json_get_str(json_get(wd.root, "environment"), "workspace_directory");
	ws.model = json_get_str(json_get(wd.root, "agent"), "model");
	if (ws.model != NULL && strcmp(ws.model, "default") == 0)
		ws.model = NULL;
	ws.instructions = json_get_str(json_get(wd.root, "agent"), "instructions");
	ws.thread = sv.thread;
	if (start_root(&sd, &text, cwd != NULL ? cwd : "/", e) == 0) {
		ws.id = id;
		ws.text = (const char *)text.p;
		ws.conf = NULL;
		rc = api_session_start(q, sv.agent, sd.root, &ws, &sv) == 0 ? 0 : 1;
		json_free(&sd);
	}
	json_free(&wd);
	json_w_free(&w);
	buf_free(&text);
	return rc;
}

/* POST …/events: {"events": [...]}, each in order; 202 once all are in. */
static void
events_create(struct api_rq *q, const char *id)
{
	const struct json_val *r, *evs;
	struct session_view v;
	struct json_doc doc;
	struct err e = {0};
	size_t i;
	int rc = 0;

	if (api_body_json(q, &doc, &r) != 0)
		return;
	err_clear(&e);
	evs = r != NULL ? json_get(r, "events") : NULL;
	if (evs == NULL || evs->type != JSON_ARRAY || evs->u.arr.n == 0)
		rc = err_set(&e, "request.invalid", "events must be a non-empty array");
	for (i = 0; rc == 0 && i < evs->u.arr.n; i++) {
		const char *t = json_get_str(&evs->u.arr.v[i], "type");

		if (t != NULL && strcmp(t, "agent.session.input.message") == 0) {
			rc = message(q, id, &evs->u.arr.v[i], &e);
		} else if (t != NULL && strcmp(t, "agent.session.input.cancel") == 0) {
			int c = sessions_cancel(q->a->sessions, NULL, id, &v);

			rc = c < 0   ? err_set(&e, "not_found", "no session %s", id)
			     : c > 0 ? err_set(&e, "session.idle", "session %s has no turn running", id)
			             : 0;
		} else {
			rc = err_set(
			    &e, "request.invalid",
			    "events[%zu].type %.80s is not supported: the agents here run their own "
			    "tools and ask for no approval (agent.session.input.message and .cancel are)",
			    i, t != NULL ? t : "(none)");
		}
	}
	if (rc < 0)
		api_rq_err(q, &e);
	else if (rc == 0)
		api_rq_json(q, 202, "{}");
	json_free(&doc);
}

/* ---- pages ---------------------------------------------------------------- */

/* Objects gathered for a page: JSON texts in b, each one's start and id. */
struct page {
	struct buf b;
	struct buf at; /* size_t offsets */
	size_t n;
	const char *want_turn; /* items of this turn only */
	int by_turn;           /* turns: the latest object per turn number */
	int err;
};

static void
page_add(struct page *pg, const struct json_val *o)
{
	struct json_w w;
	size_t at = pg->b.len;

	json_w_init(&w, JOURNAL_LINE_MAX);
	json_w_val(&w, o);
	if (w.overflow || buf_put(&pg->b, w.buf, w.len + 1) != 0 || buf_put(&pg->at, &at, sizeof(at)) != 0)
		pg->err = 1;
	else
		pg->n++;
	json_w_free(&w);
}

/* The object's id in text t: the first "id" member's value. */
static int
id_is(const char *t, const char *id)
{
	size_t n = strlen(id);

	return t[0] == '{' && strncmp(t + 1, "\"id\":\"", 6) == 0 && strncmp(t + 7, id, n) == 0 &&
	       t[7 + n] == '"';
}

static void
gather(void *arg, uint32_t seq, const char *line, size_t len)
{
	struct page *pg = arg;
	const struct json_val *o;
	const char *type, *tid;
	struct json_doc d;
	struct err e = {0};
	unsigned long n;

	if (pg->err || json_parse(&d, line, len, &json_default_limits, &e) != 0)
		return;
	type = json_get_str(d.root, "type");
	if (pg->by_turn) {
		o = json_get(d.root, "turn");
		tid = json_get_str(o, "id");
		n = tid != NULL && strncmp(tid, "turn_", 5) == 0 ? strtoul(tid + 5, NULL, 10) : 0;
		if (o != NULL && n >= 1 && n <= pg->n + 1) {
			if (n == pg->n + 1)
				page_add(pg, o);
			else {
				/* a later state of an earlier turn: only its last turn stays
				 * open, and only the last can change */
				pg->b.len = ((size_t *)pg->at.p)[n - 1];
				pg->at.len = (n - 1) * sizeof(size_t);
				pg->n = n - 1;
				page_add(pg, o);
			}
		}
	} else if (type != NULL &&
	           (strcmp(type, "agent.session.turn.item.added") == 0 ||
	            strcmp(type, "agent.session.turn.item.done") == 0) &&
	           (o = json_get(d.root, "item")) != NULL && (tid = json_get_str(o, "id")) != NULL &&
	           (pg->want_turn == NULL || (json_get_str(o, "turn_id") != NULL &&
	                                      strcmp(json_get_str(o, "turn_id"), pg->want_turn) == 0))) {
		/* an item done replaces the item added: the item keeps its latest state */
		for (n = 0; n < pg->n; n++)
			if (id_is((const char *)pg->b.p + ((size_t *)pg->at.p)[n], tid))
				pg->b.p[((size_t *)pg->at.p)[n]] = '\0';
		page_add(pg, o);
	}
	(void)seq;
	json_free(&d);
}

static const char *
q_get(const char *qs, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name), k;
	const char *p = qs;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, name, nl) == 0 && p[nl] == '=') {
			p += nl + 1;
			for (k = 0; p[k] != '\0' && p[k] != '&' && k + 1 < cap; k++)
				out[k] = p[k];
			out[k] = '\0';
			return out;
		}
		p = strchr(p, '&');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* Answer with pg's objects as one page of the query's after, limit and
 * order (stored oldest first). conv: ConversationCursorPage's first_id and
 * last_id too. */
static void
page_answer(struct api_rq *q, struct page *pg, int newest_first_stored, int conv)
{
	char after[96], lim[16], ord[8];
	const size_t *at = (const size_t *)pg->at.p;
	long limit = WIRE_PAGE, i, start = 0, k, step;
	int asc = 0;
	struct json_w w;
	size_t *pos = (size_t *)pg->at.p, kept = 0;

	/* objects replaced by a later state are empty */
	for (i = 0; i < (long)pg->n; i++)
		if (pg->b.p[pos[i]] != '\0')
			pos[kept++] = pos[i];
	pg->n = kept;
	if (q_get(q->req->query, "limit", lim, sizeof(lim)) != NULL &&
	    ((limit = strtol(lim, NULL, 10)) < 1 || limit > WIRE_PAGE_MAX)) {
		api_rq_errf(q, "request.invalid", "limit must be 1..%d", WIRE_PAGE_MAX);
		return;
	}
	if (q_get(q->req->query, "order", ord, sizeof(ord)) != NULL) {
		if (strcmp(ord, "asc") != 0 && strcmp(ord, "desc") != 0) {
			api_rq_errf(q, "request.invalid", "order must be asc or desc");
			return;
		}
		asc = strcmp(ord, "asc") == 0;
	}
	/* walk in the asked order: index i of the walk is object k */
	step = asc == !newest_first_stored ? 1 : -1;
	if (q_get(q->req->query, "after", after, sizeof(after)) != NULL) {
		for (i = 0; i < (long)pg->n; i++) {
			k = step > 0 ? i : (long)pg->n - 1 - i;
			if (id_is((const char *)pg->b.p + at[k], after))
				break;
		}
		if (i == (long)pg->n) {
			api_rq_errf(q, "not_found", "after: no object %.64s in this list", after);
			return;
		}
		start = i + 1;
	}
	json_w_init(&w, pg->b.len + 256);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "list");
	json_w_key(&w, "data");
	json_w_arr(&w);
	for (i = start; i < (long)pg->n && i < start + limit; i++)
		json_w_raw(&w, (const char *)pg->b.p + at[step > 0 ? i : (long)pg->n - 1 - i]);
	json_w_end(&w);
	json_w_kbool(&w, "has_more", start + limit < (long)pg->n);
	if (conv) {
		/* the id of the last object on the page: {"id":"ID", */
		const char *t =
		    i > start ? (const char *)pg->b.p + at[step > 0 ? i - 1 : (long)pg->n - i] + 7 : "\"";

		json_w_key(&w, "last_id");
		json_w_strn(&w, t, strcspn(t, "\""));
	}
	json_w_end(&w);
	api_rq_json_w(q, 200, &w);
}

static void
page_free(struct page *pg)
{
	buf_free(&pg->b);
	buf_free(&pg->at);
}

static void
list_sessions(struct api_rq *q)
{
	struct page pg = {BUF_INIT(64u << 20), BUF_INIT(SESSIONS_KEEP * sizeof(size_t)), 0, NULL, 0, 0};
	struct session_view *v = malloc(SESSIONS_KEEP * sizeof(*v));
	struct pol_decision *d = malloc(sizeof(*d));
	char agent[CFG_NAME_MAX], op[OP_ID_MAX];
	int i, n;

	if (v == NULL || d == NULL) {
		free(v);
		free(d);
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	n = sessions_list(q->a->sessions, q_get(q->req->query, "agent_id", agent, sizeof(agent)), v,
	                  SESSIONS_KEEP);
	for (i = 0; i < n && !pg.err; i++) {
		struct json_w w;
		size_t at = pg.b.len;

		/* only the agents whose sessions the caller may list */
		snprintf(op, sizeof(op), "agents.%s.sessions.list", v[i].agent);
		if (!policy_decide(&q->g->pol, q->principal, op, NULL, 0, d))
			continue;
		json_w_init(&w, WIRE_CONF_MAX * 2);
		if (sessions_wire_json(q->a->sessions, v[i].id, 0, &w) == 0 && !w.overflow) {
			if (buf_put(&pg.b, w.buf, w.len + 1) != 0 || buf_put(&pg.at, &at, sizeof(at)) != 0)
				pg.err = 1;
			else
				pg.n++;
		}
		json_w_free(&w);
	}
	free(v);
	free(d);
	if (pg.err)
		api_rq_errf(q, "internal", "out of memory");
	else
		page_answer(q, &pg, 1, 0);
	page_free(&pg);
}

/* Items or turns of session id (turn: one turn's items, or that turn). */
static void
list_of(struct api_rq *q, const char *id, int turns, const char *turn, int one)
{
	struct page pg = {BUF_INIT(256u << 20), BUF_INIT(64u << 20), 0, NULL, turns, 0};
	size_t i;

	pg.want_turn = turns ? NULL : turn;
	if (sessions_scan(q->a->sessions, id, turns ? "agent.session.turn." : "agent.session.turn.item.",
	                  gather, &pg) != 0) {
		api_rq_errf(q, "not_found", "no session %s", id);
	} else if (pg.err) {
		api_rq_errf(q, "internal", "out of memory");
	} else if (one) {
		for (i = 0; i < pg.n; i++)
			if (id_is((const char *)pg.b.p + ((size_t *)pg.at.p)[i], turn))
				break;
		if (i == pg.n)
			api_rq_errf(q, "not_found", "no turn %.64s in session %s", turn, id);
		else
			api_rq_json(q, 200, (const char *)pg.b.p + ((size_t *)pg.at.p)[i]);
	} else {
		page_answer(q, &pg, 0, turn != NULL);
	}
	page_free(&pg);
}

/* POST …/<id>: metadata only (what else the SDK may change is the
 * agent's model settings and spend limits: not supported). */
static void
update(struct api_rq *q, const char *id)
{
	const struct json_val *r;
	struct json_doc doc;
	size_t i;

	if (api_body_json(q, &doc, &r) != 0)
		return;
	for (i = 0; r != NULL && i < r->u.obj.n; i++)
		if (!absent(&r->u.obj.m[i].val)) {
			api_rq_errf(q, "request.invalid", "%.64s cannot be updated by this server",
			            r->u.obj.m[i].key);
			json_free(&doc);
			return;
		}
	json_free(&doc);
	respond_session(q, id, 0);
}

static void
delete_session(struct api_rq *q, const char *id)
{
	struct json_w w;
	struct err e = {0};

	err_clear(&e);
	if (sessions_delete(q->a->sessions, id, &e) != 0) {
		api_rq_err(q, &e);
		return;
	}
	json_w_init(&w, 256);
	json_w_obj(&w);
	json_w_kstr(&w, "id", id);
	json_w_kbool(&w, "deleted", 1);
	json_w_kstr(&w, "object", "agent.session.deleted");
	json_w_end(&w);
	api_rq_json_w(q, 200, &w);
}

static void
stream(struct api_rq *q, const char *id)
{
	const char *lei = httpd_req_header(q->req, "Last-Event-ID");
	char after[16];
	unsigned long a = 0;
	char *end;

	if (lei == NULL)
		lei = q_get(q->req->query, "after", after, sizeof(after));
	if (lei != NULL) {
		a = strtoul(lei, &end, 10);
		if (*end != '\0' || end == lei || a >= UINT32_MAX) {
			api_rq_errf(q, "request.invalid",
			            "Last-Event-ID must be an event_id of this session");
			return;
		}
	}
	api_events_stream(q, id, (uint32_t)a);
}

/* ---- routing ------------------------------------------------------------------ */

static int
seg(const char *p, char *out, size_t cap)
{
	size_t n = strcspn(p, "/");

	if (n == 0 || n >= cap)
		return 0;
	memcpy(out, p, n);
	out[n] = '\0';
	return (int)n;
}

/* The policy of op action on session id's agent: 0 allowed, 1 answered. */
static int
allowed(struct api_rq *q, const char *id, const char *action)
{
	struct session_view v;
	char op[OP_ID_MAX];

	if (sessions_get(q->a->sessions, NULL, id, &v) != 0) {
		api_rq_errf(q, "not_found", "no session %s", id);
		return 1;
	}
	snprintf(op, sizeof(op), "agents.%s.sessions.%s", v.agent, action);
	return api_rq_policy(q, op, NULL, 0);
}

int
api_wire_route(struct api_rq *q)
{
	const char *p = q->req->path, *m = q->req->method;
	int get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0, del = strcmp(m, "DELETE") == 0, n;
	char id[SESSION_ID_MAX + 1], tid[32];

	if (strncmp(p, "/v1/agents/sessions", 19) != 0 || (p[19] != '\0' && p[19] != '/') ||
	    q->a->sessions == NULL)
		return 0;
	q->route = R_SESSIONS;
	p += 19;
	if (*p == '\0' || strcmp(p, "/") == 0) {
		if (post)
			create(q);
		else if (get)
			list_sessions(q);
		else
			api_rq_errf(q, "request.method", "%s is not allowed here (allowed: GET, POST)", m);
		return 1;
	}
	if ((n = seg(p + 1, id, sizeof(id))) == 0 || n >= SESSION_ID_MAX) {
		api_rq_errf(q, "not_found", "no such resource: %.200s", q->req->path);
		return 1;
	}
	p += 1 + n;
	if (*p == '\0' && (get || post || del)) {
		if (allowed(q, id, get ? "get" : post ? "update" : "delete") == 0)
			get ? respond_session(q, id, 0) : post ? update(q, id) : delete_session(q, id);
	} else if (strcmp(p, "/events") == 0 && (get || post)) {
		if (allowed(q, id, get ? "events" : "send_event") == 0)
			get ? stream(q, id) : events_create(q, id);
	} else if (strcmp(p, "/items") == 0 && get) {
		if (allowed(q, id, "items") == 0)
			list_of(q, id, 0, NULL, 0);
	} else if (strcmp(p, "/turns") == 0 && get) {
		if (allowed(q, id, "items") == 0)
			list_of(q, id, 1, NULL, 0);
	} else if (strncmp(p, "/turns/", 7) == 0 && get && (n = seg(p + 7, tid, sizeof(tid))) > 0 &&
	           (p[7 + n] == '\0' || strcmp(p + 7 + n, "/items") == 0)) {
		if (allowed(q, id, "items") == 0)
			list_of(q, id, p[7 + n] == '\0', tid, p[7 + n] == '\0');
	} else {
		api_rq_errf(q, "not_found", "no such resource: %.200s", q->req->path);
	}
	return 1;
}

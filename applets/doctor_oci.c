/*
 * doctor's check of the OCI mirror (install.mirrors.oci): that the registry
 * answers, that it takes the configured credential (named by where it came
 * from, never its value), and that it holds a blob of the plan (a HEAD of
 * the first pinned tarball artifact an enabled agent needs, else a GET of
 * an npm agent's tag).
 */
#include "common.h"

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "cfgload.h"
#include "doctor.h"
#include "net/http.h"
#include "net/oci.h"
#include "pkg/manifest.h"

/* The first enabled agent, or a tool it requires, that this platform
 * installs from a pinned tarball; else the first npm agent into *npm. */
static const struct manifest_artifact *
plan_blob(struct cfgload *L, const manifest_t **tool, const manifest_t **npm)
{
	const struct manifest_artifact *a;
	const manifest_t *m, *q;
	struct err e = {0};
	int i, j;

	*tool = *npm = NULL;
	for (i = 0; L->st.ms_open && i < L->cfg.agents.n; i++) {
		if ((m = manifest_get(&L->ms, L->cfg.agents.v[i], &e)) == NULL)
			continue;
		for (j = -1; j < m->nrequires; j++) {
			q = j < 0 ? m : manifest_get(&L->ms, m->requires[j].name, &e);
			if (q == NULL)
				continue;
			if (q->source.type != MANIFEST_SRC_TARBALL) {
				if (*npm == NULL)
					*npm = q;
				continue;
			}
			a = manifest_artifact(q, manifest_platform_self());
			if (a != NULL && a->sha256[0]) {
				*tool = q;
				return a;
			}
		}
	}
	return NULL;
}

static void
registry_fail(struct report *r, const char *ref, const char *host, const char *from, const struct err *e)
{
	const char *code = e->code ? e->code : "internal";
	char fix[512];

	if (strcmp(code, "oci.auth") == 0)
		snprintf(fix, sizeof(fix), "check the credential (%s), or set ABX_OCI_AUTH=user:password",
		         from[0] ? from : "none configured");
	else if (strncmp(code, "http.", 5) == 0 || strncmp(code, "tls.", 4) == 0)
		doctor_net_fix(code, host, "allow egress to the registry, or fix install.mirrors.oci", fix,
		               sizeof(fix));
	else
		snprintf(fix, sizeof(fix), "fix install.mirrors.oci");
	doctor_line(r, "FAIL", "registry", fix, "%s: %s: %s", ref, code, e->msg);
}

void
doctor_check_registry(struct report *r, struct cfgload *L)
{
	const char *ref = L->cfg.install.oci_mirror, *allow[CFG_HOSTS_MAX];
	char basic[OCI_BASIC_MAX], from[CFG_PATH_MAX] = "", tag[OCI_TAG_MAX];
	const struct manifest_artifact *a;
	const manifest_t *tool, *npm;
	struct http_client *http;
	struct oci_client o;
	struct oci_ref rf;
	struct buf doc = BUF_INIT(OCI_JSON_MAX * 8);
	struct err e = {0};
	int i, found, rc;

	if (ref[0] == '\0')
		return;
	err_clear(&e);
	if (oci_ref_parse(ref, 1, &rf, &e) != 0 ||
	    (found = config_oci_basic(rf.host, rf.port, rf.port_explicit, basic, from, sizeof(from), &e)) <
	        0 ||
	    (http = config_http_client(&e)) == NULL) {
		registry_fail(r, ref, rf.host, from, &e);
		return;
	}
	for (i = 0; i < L->cfg.install.allow_hosts.n; i++)
		allow[i] = L->cfg.install.allow_hosts.v[i];
	oci_client_init(&o, http, &rf, found ? basic : NULL, allow, i, "install.allow_hosts");
	o.limits.connect_ms = DOCTOR_CONNECT_TIMEOUT_MS;
	o.limits.total_ms = 2 * DOCTOR_CONNECT_TIMEOUT_MS;
	a = plan_blob(L, &tool, &npm);
	if (a != NULL) {
		rc = oci_blob_head(&o, a->sha256, NULL, &e);
		if (rc == 1)
			doctor_line(r, "PASS", "registry", NULL,
			            "%s answers%s%s and has the blob of %s %s (sha256:%.12s...)", ref,
			            found ? ", credential from " : "", found ? from : "", tool->name,
			            tool->version, a->sha256);
		else if (rc == 0)
			doctor_line(r, "WARN", "registry",
			            "fill it on a connected machine: agent-sandbox-server fetch --config ... "
			            "--push REF",
			            "%s answers%s%s but lacks the blob of %s %s (sha256:%.12s...): installs "
			            "go to the "
			            "origin (or fail offline)",
			            ref, found ? ", credential from " : "", found ? from : "", tool->name,
			            tool->version, a->sha256);
		else
			registry_fail(r, ref, rf.host, from, &e);
	} else if (npm != NULL && oci_tag_make(npm->name, npm->version, tag) == 0) {
		rc = oci_manifest_get(&o, tag, &doc, &e);
		if (rc == 1)
			doctor_line(r, "PASS", "registry", NULL, "%s answers%s%s and has the tag %s", ref,
			            found ? ", credential from " : "", found ? from : "", tag);
		else if (rc == 0)
			doctor_line(
			    r, "WARN", "registry",
			    "fill it on a connected machine: agent-sandbox-server fetch --config ... --push "
			    "REF",
			    "%s answers but has no tag %s: installs go to the origin (or fail offline)", ref,
			    tag);
		else
			registry_fail(r, ref, rf.host, from, &e);
	} else {
		doctor_line(r, "PASS", "registry", NULL, "%s is configured; the plan has no blob to look for",
		            ref);
	}
	buf_free(&doc);
	memset(basic, 0, sizeof(basic));
	memset(o.token, 0, sizeof(o.token));
	http_client_free(http);
}

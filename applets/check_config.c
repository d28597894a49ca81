/*
 * check-config: validate configuration, policy, commands (and manifests)
 * together and print the effective mode with its source and the endpoint
 * table: op id | principals allowed | what it installs.
 */
#include "common.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "cfgload.h"
#include "install/install.h"

struct check_config_opts {
	struct cfgload *L;
	int json, verbose, quiet, lint;
};

#define O(f) offsetof(struct check_config_opts, f)
static const struct opt options[] = {
    CFGLOAD_OPTS(cfgload_set, O(L)),
    OPT(0, "json", NULL, NULL, O(json)),
    OPT('v', "verbose", NULL, NULL, O(verbose)),
    OPT('q', "quiet", NULL, NULL, O(quiet)),
    OPT(0, "manifest", NULL, NULL, O(lint)),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "check-config", "check-config.txt", options, -1, EXIT_USAGE, NULL,
};

/* --manifest FILE...: each file loads on its own (requires are checked
 * against the other manifests by the full check, not here), under the
 * configuration's rules (environment, the npm mirror). */
static int
lint_manifests(struct cfgload *L, char **files, int n, int quiet)
{
	struct manifest_opts opts = {0};
	manifest_t *m;
	struct err e = {0};
	int i, bad = 0;

	if (cfgload_config(&L->cfg, L->config_file, &L->flags, 1, &e) != 0) {
		fail(&e);
		return EXIT_USAGE;
	}
	if ((m = malloc(sizeof(*m))) == NULL) {
		err_printf("internal", "out of memory");
		return EXIT_FAIL;
	}
	opts.platform = manifest_platform_self();
	snprintf(opts.npm_mirror, sizeof(opts.npm_mirror), "%s", L->cfg.install.npm_mirror);
	if ((opts.allow_unpinned = manifest_unpinned_allowed(&L->cfg, &e)) < 0) {
		free(m);
		fail(&e);
		return EXIT_USAGE;
	}
	for (i = 0; i < n; i++) {
		if (manifest_load_file(m, files[i], &opts, &e) != 0) {
			err_print(&e);
			bad++;
			continue;
		}
		if (!quiet)
			printf("ok %s: %s %s%s\n", files[i], m->name, m->version, m->run.n ? " (agent)" : "");
	}
	free(m);
	return bad ? EXIT_USAGE : EXIT_OK;
}

/* The principals allowed op into buf, comma-separated; "(none)" if none. */
static void
principals_for(const struct cfgload *L, const struct op *op, char *buf, size_t cap)
{
	const char *inst[OP_INSTALL_MAX];
	struct pol_decision d;
	size_t len = 0;
	int i;

	for (i = 0; i < op->ninstall; i++)
		inst[i] = op->install[i];
	buf[0] = '\0';
	for (i = 0; i < L->pol.n; i++) {
		if (!policy_decide(&L->pol, L->pol.p[i].name, op->id, inst, op->ninstall, &d))
			continue;
		if (len < cap)
			len += snprintf(buf + len, cap - len, "%s%s", len ? "," : "", L->pol.p[i].name);
	}
	if (len == 0)
		snprintf(buf, cap, "(none)");
}

static void
installs_of(const struct op *op, char *buf, size_t cap)
{
	size_t len = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < op->ninstall && len < cap; i++)
		len += snprintf(buf + len, cap - len, "%s%s", i ? "," : "", op->install[i]);
	if (len == 0)
		snprintf(buf, cap, "-");
}

static void
print_text(const struct cfgload *L, int verbose)
{
	char src[CFG_PATH_MAX + 32], val[CFG_URL_MAX * 4], who[1024], inst[600];
	int i;

	printf("configuration: %s\n", L->cfg.file[0] ? L->cfg.file : "(none: embedded defaults)");
	printf("install.mode: %s (%s)\n", config_mode_name(L->cfg.install.mode),
	       config_source(&L->cfg, CK_INSTALL_MODE, src, sizeof(src)));
	if (L->cfg.mode_floor != CFG_MODE_LAZY)
		printf("restrict-only: %s set by %s; flags may only tighten it\n",
		       config_mode_name(L->cfg.mode_floor), L->cfg.mode_floor_by);
	printf("policy: %s\n", L->pol.summary);
	if (L->ops.commands_file[0])
		printf("commands: %s\n", L->ops.commands_file);
	if (verbose) {
		printf("\nsettings:\n");
		for (i = 0; i < CK_NKEYS; i++) {
			config_value_text(&L->cfg, i, val, sizeof(val));
			printf("  %-26s %-30s %s\n", config_key_path(i), val[0] ? val : "-",
			       config_source(&L->cfg, i, src, sizeof(src)));
		}
	}
	printf("\n%-40s %-30s %s\n", "OP", "PRINCIPALS", "INSTALLS");
	for (i = 0; i < ops_n(&L->ops); i++) {
		principals_for(L, ops_at(&L->ops, i), who, sizeof(who));
		installs_of(ops_at(&L->ops, i), inst, sizeof(inst));
		printf("%-40s %-30s %s\n", ops_at(&L->ops, i)->id, who, inst);
	}
	printf("\n%d ops, %d principals\n", ops_n(&L->ops), L->pol.n);
}

static int
print_json(const struct cfgload *L)
{
	char src[CFG_PATH_MAX + 32], val[CFG_URL_MAX * 4];
	const char *inst[OP_INSTALL_MAX];
	struct json_w w;
	int i, j, k;

	json_w_init(&w, 4u << 20);
	json_w_obj(&w);
	json_w_kstr(&w, "config_file", L->cfg.file);
	json_w_key(&w, "mode");
	json_w_obj(&w);
	json_w_kstr(&w, "value", config_mode_name(L->cfg.install.mode));
	json_w_kstr(&w, "source", config_source(&L->cfg, CK_INSTALL_MODE, src, sizeof(src)));
	if (L->cfg.mode_floor != CFG_MODE_LAZY) {
		json_w_kstr(&w, "floor", config_mode_name(L->cfg.mode_floor));
		json_w_kstr(&w, "floor_set_by", L->cfg.mode_floor_by);
	}
	json_w_end(&w);
	json_w_key(&w, "settings");
	json_w_obj(&w);
	for (i = 0; i < CK_NKEYS; i++) {
		json_w_key(&w, config_key_path(i));
		json_w_obj(&w);
		json_w_kstr(&w, "value", config_value_text(&L->cfg, i, val, sizeof(val)));
		json_w_kstr(&w, "source", config_src_name(L->cfg.src[i]));
		json_w_kstr(&w, "origin", config_source(&L->cfg, i, src, sizeof(src)));
		json_w_end(&w);
	}
	json_w_end(&w);
	json_w_kstr(&w, "policy", L->pol.summary);
	json_w_key(&w, "principals");
	json_w_arr(&w);
	for (i = 0; i < L->pol.n; i++)
		json_w_str(&w, L->pol.p[i].name);
	json_w_end(&w);
	json_w_key(&w, "ops");
	json_w_arr(&w);
	for (i = 0; i < ops_n(&L->ops); i++) {
		const struct op *op = ops_at(&L->ops, i);
		json_w_obj(&w);
		json_w_kstr(&w, "id", op->id);
		json_w_kstr(&w, "kind", op->kind == OP_AGENT ? "agent" : "command");
		json_w_key(&w, "principals");
		json_w_arr(&w);
		for (k = 0; k < op->ninstall; k++)
			inst[k] = op->install[k];
		for (j = 0; j < L->pol.n; j++) {
			struct pol_decision d;
			if (policy_decide(&L->pol, L->pol.p[j].name, op->id, inst, op->ninstall, &d))
				json_w_str(&w, L->pol.p[j].name);
		}
		json_w_end(&w);
		json_w_key(&w, "installs");
		json_w_arr(&w);
		for (k = 0; k < op->ninstall; k++)
			json_w_str(&w, op->install[k]);
		json_w_end(&w);
		if (op->description[0])
			json_w_kstr(&w, "description", op->description);
		json_w_end(&w);
	}
	json_w_end(&w);
	json_w_key(&w, "warnings");
	json_w_arr(&w);
	for (i = 0; i < L->cfg.nwarn; i++)
		json_w_str(&w, L->cfg.warn[i]);
	json_w_end(&w);
	json_w_end(&w);
	if (w.overflow) {
		json_w_free(&w);
		err_printf("internal", "the report is too large");
		return EXIT_FAIL;
	}
	printf("%s\n", w.buf);
	json_w_free(&w);
	return EXIT_OK;
}

/* Every command op's program must run in this image: an
 * absolute path that exists and is executable; a bare name that is a tool's
 * binary, or found on PATH. Returns 0 or -1 with command.unavailable. */
static int
check_programs(struct cfgload *L, struct err *e)
{
	const char *envpath = config_env("PATH");
	char buf[PATH_MAX];
	int i;

	if (envpath == NULL || *envpath == '\0')
		envpath = "/usr/local/bin:/usr/bin:/bin";
	for (i = 0; i < ops_n(&L->ops); i++) {
		const struct op *op = ops_at(&L->ops, i);
		const char *name = op->kind == OP_COMMAND ? op->argv[0] : NULL;
		const char *p, *q;
		int found = 0;

		if (name == NULL)
			continue;
		if (name[0] == '/') {
			if (ops_program_usable(op->id, name, e) != 0)
				return -1;
			continue;
		}
		if (manifest_find_binary(&L->ms, name) != NULL)
			continue; /* a tool's: installed by the op or prepare */
		for (p = envpath; !found && *p; p = *q ? q + 1 : q) {
			q = p + strcspn(p, ":");
			if (q > p && p[0] == '/' &&
			    snprintf(buf, sizeof(buf), "%.*s/%s", (int)(q - p), p, name) < (int)sizeof(buf))
				found = access(buf, X_OK) == 0;
		}
		if (!found)
			return err_set(e, "command.unavailable",
			               "%s: program %s: not found on PATH (%s) nor a tool's", op->id, name,
			               envpath);
	}
	return 0;
}

int
check_config_main(int argc, char **argv)
{
	struct check_config_opts o = {0};
	struct cfgload *L;
	struct err e = {0};
	int rc, n;

	if ((L = o.L = cfgload_new()) == NULL) {
		err_printf("internal", "out of memory");
		return EXIT_FAIL;
	}
	if ((rc = opts_parse(&usage, argc, argv, &o, &n)) >= 0) {
		cfgload_free(L);
		return rc;
	}
	if (o.lint) {
		if (n == 0) {
			cfgload_free(L);
			return opts_error(&usage, "--manifest needs at least one FILE");
		}
		rc = lint_manifests(L, argv + 1, n, o.quiet);
		cfgload_free(L);
		return rc;
	}
	if (n > 0) {
		cfgload_free(L);
		return opts_error(&usage, "unexpected argument %s", argv[1]);
	}
	if (cfgload_run(L, NULL, &e) != 0) {
		rc = fail(&e);
		cfgload_free(L);
		return rc == EXIT_FAIL ? EXIT_USAGE : rc;
	}
	/* what serve refuses at start, refused here by the same rule
	 * (install_audit_check, creating nothing) */
	if (check_programs(L, &e) != 0 || install_audit_check(&L->cfg, 1, &e) != 0) {
		err_print(&e);
		cfgload_free(L);
		return EXIT_USAGE;
	}
	rc = EXIT_OK;
	if (o.json)
		rc = print_json(L);
	else if (!o.quiet)
		print_text(L, o.verbose);
	cfgload_free(L);
	return rc;
}

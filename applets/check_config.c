/*
 * check-config: validate configuration, policy, commands (and manifests)
 * together and print the effective mode with its source and the endpoint
 * table: op id | principals allowed | what it installs.
 */
#include "common.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "cfgload.h"

static const char usage[] =
    "usage: agent-sandbox-server check-config [--config FILE] [--policy FILE] [--preset NAME]\n"
    "           [--commands FILE] [--manifests DIR] [--tools-dir DIR] [--state-dir DIR]\n"
    "           [--mode MODE] [--json] [-v] [-q]\n"
    "       agent-sandbox-server check-config --manifest FILE...\n"
    "\n"
    "Load the configuration (embedded defaults < /etc/agent-sandbox/server.json or\n"
    "--config < ABX_SERVER_* environment < flags), the policy and the commands file\n"
    "the way serve would, without opening a socket, spawning a process or reading a\n"
    "token, and print the effective install mode with where it came from and the\n"
    "endpoint table: each op, the principals policy lets call it, what it installs.\n"
    "\n"
    "  --config FILE     configuration file (default /etc/agent-sandbox/server.json)\n"
    "  --policy FILE     policy file (default /etc/agent-sandbox/server-policy.json)\n"
    "  --preset NAME     readonly, agents or admin, for principal default\n"
    "  --commands FILE   the commands file\n"
    "  --manifests DIR   manifests that add to or override the built-in ones\n"
    "  --tools-dir DIR, --state-dir DIR, --mode MODE   flag layer for those settings\n"
    "  --json            one JSON document on stdout\n"
    "  -v                also print every setting with its source\n"
    "  -q                print nothing; the exit status says valid (0) or not (2)\n"
    "\n"
    "  --manifest FILE...  lint manifest files instead (schema 1, pins for this\n"
    "                    platform, hosts, lockfile beside it); exit 0 when all load\n"
    "\n"
    "Exit: 0 valid, 2 invalid (the first error is printed).\n";

/* --manifest FILE...: each file loads on its own (requires are checked
 * against the other manifests by the full check, not here). */
static int
lint_manifests(char **files, int n, int quiet)
{
	struct manifest_opts opts;
	manifest_t *m;
	struct err e;
	int i, bad = 0;

	if ((m = malloc(sizeof(*m))) == NULL) {
		err_printf("internal", "out of memory");
		return EXIT_FAIL;
	}
	opts.platform = manifest_platform_self();
	if ((opts.allow_unpinned = manifest_unpinned_allowed(config_env("ABX_SERVER_ENV"), &e)) < 0) {
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
	for (i = 0; i < L->ops.n; i++) {
		principals_for(L, &L->ops.v[i], who, sizeof(who));
		installs_of(&L->ops.v[i], inst, sizeof(inst));
		printf("%-40s %-30s %s\n", L->ops.v[i].id, who, inst);
	}
	printf("\n%d ops, %d principals\n", L->ops.n, L->pol.n);
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
	for (i = 0; i < L->ops.n; i++) {
		const struct op *op = &L->ops.v[i];
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
	for (i = 0; i < L->ops.n; i++) {
		const struct op *op = &L->ops.v[i];
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
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 0},    {"policy", required_argument, NULL, 0},
	    {"preset", required_argument, NULL, 0},    {"commands", required_argument, NULL, 0},
	    {"manifests", required_argument, NULL, 0}, {"tools-dir", required_argument, NULL, 0},
	    {"state-dir", required_argument, NULL, 0}, {"mode", required_argument, NULL, 0},
	    {"json", no_argument, NULL, 'j'},          {"help", no_argument, NULL, 'h'},
	    {"manifest", no_argument, NULL, 'M'},      {NULL, 0, NULL, 0},
	};
	struct cfgload *L;
	struct err e;
	int c, idx, json = 0, verbose = 0, quiet = 0, lint = 0, rc;

	if ((L = cfgload_new()) == NULL) {
		err_printf("internal", "out of memory");
		return EXIT_FAIL;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hvq", opts, &idx)) != -1) {
		switch (c) {
		case 0:
			cfgload_option(L, opts[idx].name, optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'M':
			lint = 1;
			break;
		case 'h':
			cfgload_free(L);
			return usage_help(usage);
		default:
			cfgload_free(L);
			return bad_option("check-config", usage, argc, argv);
		}
	}
	if (lint) {
		cfgload_free(L);
		if (optind >= argc)
			return usage_error("check-config", usage, "--manifest needs at least one FILE");
		return lint_manifests(argv + optind, argc - optind, quiet);
	}
	if (optind < argc) {
		cfgload_free(L);
		return usage_error("check-config", usage, "unexpected argument %s", argv[optind]);
	}
	if (cfgload_run(L, &e) != 0) {
		rc = fail(&e);
		cfgload_free(L);
		return rc == EXIT_FAIL ? EXIT_USAGE : rc;
	}
	if (check_programs(L, &e) != 0) {
		err_print(&e);
		cfgload_free(L);
		return EXIT_USAGE;
	}
	rc = EXIT_OK;
	if (json)
		rc = print_json(L);
	else if (!quiet)
		print_text(L, verbose);
	cfgload_free(L);
	return rc;
}

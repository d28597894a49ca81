/*
 * The npm-lock installer hook (SPEC §4 npm-lock): fetch every lockfile entry
 * that applies to the platform, verify its integrity, extract it under its
 * lockfile path in tree, and make the root package's bin links. Issue 5
 * implements it here; until then npm-lock manifests load and validate but do
 * not install.
 */
#include "install.h"

int
install_npm_stage(struct install_ctx *c, const manifest_t *m, const char *tree, struct err *e)
{
	err_set(e, "install.failed", "%s: npm-lock installs are not in this build yet", m->name);
	err_details(e, "{\"phase\":\"fetch\"}");
	return -1;
}

/*
 * One sorted line per applet: APPLET(c_name, "name", "summary").
 * Included once for prototypes (common.h) and once for the dispatch table
 * in main.c. Adding an applet is one line here and one file
 * applets/<name>.c that defines <c_name>_main().
 */
APPLET(check_config, "check-config", "validate configuration, policy, commands and manifests")
APPLET(doctor, "doctor", "diagnose this environment: directories, mode, CA bundle, tools")
APPLET(fetch, "fetch", "download pinned artifacts into the cache, or one pinned file")
APPLET(healthcheck, "healthcheck", "GET /health on the local server; exit 0 or 1")
APPLET(lock, "lock", "pin a tool's artifacts or lockfile (connected CI machines)")
APPLET(prepare, "prepare", "install what the configuration needs (image build)")
APPLET(serve, "serve", "serve the authenticated operations API")
APPLET(verify, "verify", "re-hash installed trees against their markers; SBOM")
APPLET(version, "version", "print versions of this binary and its dependencies")

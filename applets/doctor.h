#ifndef ABX_APPLETS_DOCTOR_H
#define ABX_APPLETS_DOCTOR_H
/*
 * doctor's private interface: the report every check writes one line to
 * (doctor_report.c), and the checks that live outside applets/doctor.c
 * (directories and installed tools in doctor_dirs.c, ports and
 * reachability in doctor_net.c, the OCI mirror in doctor_oci.c).
 */
#include <limits.h>
#include <stddef.h>

#include "config/config.h"
#include "base/json.h"

/* A tool's --version answers in well under a second; 10 s covers a cold
 * node start on a slow disk. */
#define DOCTOR_VERSION_TIMEOUT_MS 10000
/* A generous TCP connect, per address tried. */
#define DOCTOR_CONNECT_TIMEOUT_MS 5000
/* Bounds of what one run lists (fixed tables, no allocation per tool). */
#define DOCTOR_TOOLS_LISTED_MAX 64
#define DOCTOR_HOSTS_MAX 64

struct report {
	int json;
	int npass, nwarn, nfail;
	struct json_w w;
};

/* One line: status PASS, WARN or FAIL; fix is printed (and kept in JSON)
 * unless the status is PASS. */
void doctor_line(struct report *r, const char *status, const char *check, const char *fix, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

/* The tools directories in search order: --tools-dir / ABX_TOOLS_DIR (when
 * given), the image's, the state directory's, $TMPDIR's (allow_tmp). */
struct chain {
	int n;
	char dir[4][PATH_MAX];
	int explicit_[4];
	int creatable[4]; /* installs create it when missing */
};

/* Manifest hosts and mirrors, each once, for --network. */
struct hostlist {
	int n;
	char h[DOCTOR_HOSTS_MAX][280];
};

void doctor_add_host(struct hostlist *hl, const char *h);

/* The mount holding path is noexec (1), read-only (2), both (3), or
 * neither (0); its mount point into mp. */
int doctor_mount_flags(const char *path, char *mp, size_t cap);

void doctor_check_home(struct report *r);
/* has_token: serve has a token without writing one (ABX_SERVER_TOKEN, or
 * the policy's) */
void doctor_check_state_dir(struct report *r, const struct config *c, int has_token);
void doctor_check_sessions(struct report *r, const struct config *c);
void doctor_check_audit(struct report *r, const struct config *c);
void doctor_tools_chain(const struct config *c, struct chain *ch);
void doctor_check_tools_dirs(struct report *r, const struct config *c, const struct chain *ch);
void doctor_check_installed(struct report *r, const struct chain *ch);

void doctor_check_ports(struct report *r, const char *list);
void doctor_check_mirror(struct report *r, const struct config *c);
void doctor_check_network(struct report *r, const struct config *c, struct hostlist *hl);
/* The fix for a download from host that failed with code: the CA bundle for
 * a certificate, DNS for a name, the proxy for the proxy, else egress. */
void doctor_net_fix(const char *code, const char *host, const char *egress, char *fix, size_t cap);

/* doctor_oci.c: the OCI mirror answers, takes the credential, holds a blob
 * of the plan (needs L's manifests open). */
struct cfgload;
void doctor_check_registry(struct report *r, struct cfgload *L);

#endif

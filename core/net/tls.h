#ifndef ABX_TLS_H
#define ABX_TLS_H
/*
 * TLS client glue over BearSSL, used by core/net/http.c. The policy is fixed and
 * stricter than BearSSL's defaults; there is no switch to loosen it:
 *   - TLS 1.2 only, ECDHE key exchange (RSA or ECDSA certificates) with
 *     AES-GCM or ChaCha20-Poly1305, nothing else (no CBC, CCM or static RSA);
 *   - the chain is verified against the trust anchors (below) with the
 *     X.509 "minimal" engine; RSA keys below 2048 bits and SHA-1 (or MD5)
 *     signatures are refused, in certificates and in the key exchange;
 *   - SNI is always sent and the host name always checked;
 *   - validity is checked against the clock (or tls_set_time()).
 *
 * Trust anchors are loaded once per process, under a lock, from
 * SSL_CERT_FILE and/or SSL_CERT_DIR (colon-separated) when either is set
 * (then only from those), else from the first of TLS_BUNDLE_PATHS that
 * yields a certificate. PEM "CERTIFICATE" blocks are decoded; other blocks
 * are skipped.
 *
 * Errors: tls.no_trust_anchors (names every path tried), tls.expired,
 * tls.not_yet_valid, tls.bad_host, tls.unknown_ca, tls.bad_chain,
 * tls.weak_key, tls.protocol, with BearSSL's error name in the message;
 * http.timeout and http.connect for the transport underneath.
 */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <bearssl.h>

#include "base/err.h"

#define TLS_BUNDLE_PATHS                                                                                     \
	"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"

/* Ceilings on what a CA bundle may make us hold: the Debian bundle has ~150
 * anchors in ~220 KiB; 4096 anchors and 8 MiB per file leave plenty of room
 * and still bound memory against a hostile or broken SSL_CERT_FILE. */
#define TLS_ANCHORS_MAX 4096
#define TLS_BUNDLE_BYTES_MAX (8u << 20)
/* A DER certificate larger than this is skipped (real CA certs are < 4 KiB). */
#define TLS_CERT_DER_MAX 16384

/* Where tls_anchors_load looks: a bundle file (SSL_CERT_FILE's role) and a
 * colon-separated list of directories (SSL_CERT_DIR's); with neither (NULL
 * or ""), the system bundles. The configuration layer sets it from the
 * environment before it makes a client (config_http_client); a change
 * forgets the anchors loaded from the old source. */
void tls_anchors_source(const char *file, const char *dirs);

/* Load the trust anchors if not loaded yet (thread-safe). Returns the number
 * loaded (>0) or -1 with tls.no_trust_anchors. A failed load is retried on
 * the next call. */
int tls_anchors_load(struct err *e);

#ifdef ABX_TEST
/* Forget the loaded anchors, so a test can load another bundle. */
void tls_anchors_reset(void);
#endif

/* Validate certificates at time t (seconds since the epoch) instead of the
 * clock; 0 returns to the clock. Process-wide; for tests. */
void tls_set_time(time_t t);

/* A certificate chain watcher wrapped around the minimal X.509 engine, to
 * tell "expired" from "not yet valid" and name SHA-1 signatures. */
struct tls_x509_watch {
	const br_x509_class *vtable;
	br_x509_minimal_context *inner;
	br_x509_decoder_context dec;
	int ncerts;
	int cert_ok;            /* dec decoded the current certificate */
	int any_future;         /* a certificate is not valid yet */
	int any_past;           /* a certificate has expired */
	int weak_hash;          /* a certificate is signed with SHA-1/MD5 */
	uint32_t days, seconds; /* validation time */
};

/* One TLS connection over a connected non-blocking socket. Large (the
 * bidirectional I/O buffer is ~33 KiB): allocate it, do not put it on a
 * thread's stack. */
struct tls_conn {
	br_ssl_client_context sc;
	br_x509_minimal_context xc;
	struct tls_x509_watch xw;
	int fd;
	int dead; /* the transport failed; nothing more to do */
	unsigned char iobuf[BR_SSL_BUFSIZE_BIDI];
};

/* Timing for every blocking wait: at most step_ms per wait (the read/
 * connect limit), never past end_ms (absolute, clock_ms(); 0 = none). */
struct tls_timing {
	int step_ms;
	int64_t end_ms;
};

/* Handshake with host over fd (connected, non-blocking; the caller keeps
 * owning fd). Returns 0, or -1 with a tls.* / http.* error. */
int tls_handshake(struct tls_conn *t, int fd, const char *host, const struct tls_timing *tm, struct err *e);

/* Read up to len bytes of application data. Returns >0, 0 at the end of the
 * stream (close_notify, or TCP end; the caller decides whether that
 * truncated something), -1 with e set. */
long tls_read(struct tls_conn *t, void *buf, size_t len, const struct tls_timing *tm, struct err *e);

/* The application data at hand, without a copy: *p names up to the rest
 * of the current record (read and decrypted first when none is left).
 * Returns its length (>0), 0 at the end of the stream, -1 with e set. The
 * view stays valid until tls_ack or the next call on t. */
long tls_peek(struct tls_conn *t, const unsigned char **p, const struct tls_timing *tm, struct err *e);
/* Consume n bytes (at most what tls_peek returned) of that view. */
void tls_ack(struct tls_conn *t, size_t n);

/* Write all of buf and flush. Returns 0 or -1 with e set. */
int tls_write(struct tls_conn *t, const void *buf, size_t len, const struct tls_timing *tm, struct err *e);

/* 1 when the engine is closed or failed (the connection cannot be reused). */
int tls_closed(struct tls_conn *t);

/* Map a BearSSL error number to (code, name); exposed for tests. The watch
 * may be NULL (then expired stays tls.expired, unsupported stays bad_chain). */
const char *tls_err_code(int brerr, const struct tls_x509_watch *w);
const char *tls_err_name(int brerr);

#endif

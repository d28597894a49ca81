#include "unit.h"

#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/digest.h"
#include "base/err.h"
#include "base/fs.h"
#include "net/tls.h"

/* Every getrandom of the code under test comes here (the executable's
 * definition wins over libc's): counted, then the kernel's. */
static int getrandom_calls;

ssize_t
getrandom(void *buf, size_t len, unsigned flags)
{
	getrandom_calls++;
	return syscall(SYS_getrandom, buf, len, flags);
}

/* Two self-signed P-256 certificates (test-only, valid to 2126). */
static const char cert1[] = "-----BEGIN CERTIFICATE-----\n"
                            "MIIBdTCCARugAwIBAgIUQkiPbdjFXIepJT+8Sb7c1Aepf9YwCgYIKoZIzj0EAwIw\n"
                            "DzENMAsGA1UEAwwEdW5pdDAgFw0yNjExMjkyMjA4MTFaGA8yMTI2MTEwNTIyMDgx\n"
                            "MVowDzENMAsGA1UEAwwEdW5pdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGwG\n"
                            "kVlFj7TMBFyOFZarEcs5kmDGWAstxB7nvOfa0drza6ljsN2muNnryyte8mjyd7Zx\n"
                            "XV/81+fUixnRG/H234CjUzBRMB0GA1UdDgQWBBQfe96VCgZ50FS+STqW6y8iN5k/\n"
                            "pDAfBgNVHSMEGDAWgBQfe96VCgZ50FS+STqW6y8iN5k/pDAPBgNVHRMBAf8EBTAD\n"
                            "AQH/MAoGCCqGSM49BAMCA0gAMEUCIBb9xGIPXBXJWVROVhuAWVMq8vEuQsaJVk0p\n"
                            "Q4fyhhNsAiEAnMTL1tBZCgPORNwrOxgjK7vpfo9jZzmkgDlwwWExfGc=\n"
                            "-----END CERTIFICATE-----\n";
static const char cert2[] = "-----BEGIN CERTIFICATE-----\n"
                            "MIIBdzCCAR2gAwIBAgIUJ32sJo4YYKyjGNBGJUTvCt7nVMwwCgYIKoZIzj0EAwIw\n"
                            "EDEOMAwGA1UEAwwFdW5pdDIwIBcNMjYxMTI5MjIwODEyWhgPMjEyNjExMDUyMjA4\n"
                            "MTJaMBAxDjAMBgNVBAMMBXVuaXQyMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n"
                            "fC4pPrjwheMBlKi2iG6ey4VaI6FyMmLdpPNJfZiidBtzf+qboihG7TfvCeTTF8WC\n"
                            "+hVq6axBYRjhGKxhfWYFLaNTMFEwHQYDVR0OBBYEFEiAsYn2pkz0TV0WXakUv2Uw\n"
                            "WH+xMB8GA1UdIwQYMBaAFEiAsYn2pkz0TV0WXakUv2UwWH+xMA8GA1UdEwEB/wQF\n"
                            "MAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhANMBRyp112rgZDrMYEEmiFU/S1dw8YE2\n"
                            "019tFEO46mzWAiBmjXeSpkkuiW10eLV0bIzEE5xUdRh1wdUYMCpC0qG9WA==\n"
                            "-----END CERTIFICATE-----\n";

static char dir[64];

/* name in dir holding a then b (NULL: nothing), through unit_put. */
static void
write_file(const char *name, const char *a, const char *b)
{
	char *t = malloc(strlen(a) + (b ? strlen(b) : 0) + 1);

	assert_non_null(t);
	strcpy(t, a);
	if (b != NULL)
		strcat(t, b);
	unit_put(dir, name, t);
	free(t);
}

static int
setup(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "tls-unit");
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static int
load_with(const char *file, const char *dirs, struct err *e)
{
	tls_anchors_reset();
	tls_anchors_source(file, dirs);
	err_clear(e);
	return tls_anchors_load(e);
}

static void
test_anchors_from_file(void **state)
{
	char p[256];
	struct err e = {0};

	write_file("two.pem", cert1, cert2);
	snprintf(p, sizeof(p), "%s/two.pem", dir);
	assert_int_equal(load_with(p, NULL, &e), 2);
	/* Loaded once: a second call does not read again. */
	unlink(p);
	assert_int_equal(tls_anchors_load(&e), 2);
	/* Other PEM blocks and junk between certificates are skipped. */
	write_file("mixed.pem", "junk line\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
	           cert1);
	snprintf(p, sizeof(p), "%s/mixed.pem", dir);
	assert_int_equal(load_with(p, NULL, &e), 1);
}

static void
test_anchors_from_dirs(void **state)
{
	char d1[128], d2[128], both[300], a[200], b[200];
	struct err e = {0};

	snprintf(d1, sizeof(d1), "%s/d1", dir);
	snprintf(d2, sizeof(d2), "%s/d2", dir);
	mkdir(d1, 0700);
	mkdir(d2, 0700);
	write_file("d1/one.pem", cert1, NULL);
	/* Hash-named links to the same file count once. */
	snprintf(a, sizeof(a), "%s/one.pem", d1);
	snprintf(b, sizeof(b), "%s/abcd1234.0", d1);
	assert_int_equal(symlink(a, b), 0);
	write_file("d2/two.crt", cert2, NULL);
	write_file("d2/.hidden.pem", cert1, NULL);
	assert_int_equal(load_with(NULL, d1, &e), 1);
	snprintf(both, sizeof(both), "%s:%s", d1, d2);
	assert_int_equal(load_with(NULL, both, &e), 2);
	/* SSL_CERT_FILE and SSL_CERT_DIR together. */
	snprintf(a, sizeof(a), "%s/d2/two.crt", dir);
	assert_int_equal(load_with(a, d1, &e), 2);
	/* A bundle and a directory of the same CAs (SSL_CERT_FILE in
	 * SSL_CERT_DIR, as on Debian): each certificate counts once. */
	write_file("d2/both.pem", cert1, cert2);
	snprintf(a, sizeof(a), "%s/d2/both.pem", dir);
	snprintf(both, sizeof(both), "%s:%s", d1, d2);
	assert_int_equal(load_with(a, both, &e), 2);
}

/* CRLF line ends, a block name other than CERTIFICATE, text between blocks
 * and a BEGIN that does not start a line. */
static void
test_anchors_pem_forms(void **state)
{
	char crlf[2048], p[256];
	size_t i, o = 0;
	struct err e = {0};

	for (i = 0; cert2[i] != '\0' && o + 2 < sizeof(crlf); i++) {
		if (cert2[i] == '\n')
			crlf[o++] = '\r';
		crlf[o++] = cert2[i];
	}
	crlf[o] = '\0';
	write_file("crlf.pem", crlf, NULL);
	snprintf(p, sizeof(p), "%s/crlf.pem", dir);
	assert_int_equal(load_with(p, NULL, &e), 1);
	write_file("named.pem", "x -----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
	           "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\ntext\n");
	snprintf(p, sizeof(p), "%s/named.pem", dir);
	assert_int_equal(load_with(p, NULL, &e), -1);
	write_file("named.pem", "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\ntext\n", cert1);
	assert_int_equal(load_with(p, NULL, &e), 1);
}

static void
test_no_anchors_names_paths(void **state)
{
	char p[256], q[256];
	struct err e = {0};

	snprintf(p, sizeof(p), "%s/missing.pem", dir);
	snprintf(q, sizeof(q), "%s/nodir", dir);
	assert_int_equal(load_with(p, q, &e), -1);
	assert_string_equal(e.code, "tls.no_trust_anchors");
	assert_non_null(strstr(e.msg, "missing.pem"));
	assert_non_null(strstr(e.msg, "nodir"));
	write_file("garbage.pem", "-----BEGIN CERTIFICATE-----\nnot base64 !!\n-----END CERTIFICATE-----\n",
	           NULL);
	snprintf(p, sizeof(p), "%s/garbage.pem", dir);
	assert_int_equal(load_with(p, NULL, &e), -1);
	assert_string_equal(e.code, "tls.no_trust_anchors");
	/* A failed load is retried once the file exists. */
	write_file("garbage.pem", cert1, NULL);
	assert_int_equal(tls_anchors_load(&e), 1);
	tls_anchors_reset();
}

static void
test_error_mapping(void **state)
{
	struct tls_x509_watch w;

	memset(&w, 0, sizeof(w));
	assert_string_equal(tls_err_code(BR_ERR_X509_EXPIRED, NULL), "tls.expired");
	w.any_future = 1;
	assert_string_equal(tls_err_code(BR_ERR_X509_EXPIRED, &w), "tls.not_yet_valid");
	w.any_past = 1;
	assert_string_equal(tls_err_code(BR_ERR_X509_EXPIRED, &w), "tls.expired");
	assert_string_equal(tls_err_code(BR_ERR_X509_BAD_SERVER_NAME, NULL), "tls.bad_host");
	assert_string_equal(tls_err_code(BR_ERR_X509_NOT_TRUSTED, NULL), "tls.unknown_ca");
	assert_string_equal(tls_err_code(BR_ERR_X509_NOT_CA, NULL), "tls.bad_chain");
	assert_string_equal(tls_err_code(BR_ERR_X509_BAD_SIGNATURE, NULL), "tls.bad_chain");
	assert_string_equal(tls_err_code(BR_ERR_X509_WEAK_PUBLIC_KEY, NULL), "tls.weak_key");
	assert_string_equal(tls_err_code(BR_ERR_X509_UNSUPPORTED, NULL), "tls.bad_chain");
	w.weak_hash = 1;
	assert_string_equal(tls_err_code(BR_ERR_X509_UNSUPPORTED, &w), "tls.weak_key");
	assert_string_equal(tls_err_code(BR_ERR_UNSUPPORTED_VERSION, NULL), "tls.protocol");
	assert_string_equal(tls_err_code(BR_ERR_RECV_FATAL_ALERT + 40, NULL), "tls.protocol");
	assert_string_equal(tls_err_name(BR_ERR_X509_EXPIRED), "BR_ERR_X509_EXPIRED");
	assert_string_equal(tls_err_name(BR_ERR_BAD_CIPHER_SUITE), "BR_ERR_BAD_CIPHER_SUITE");
	assert_string_equal(tls_err_name(BR_ERR_RECV_FATAL_ALERT + 70), "BR_ERR_RECV_FATAL_ALERT");
	assert_string_equal(tls_err_name(BR_ERR_SEND_FATAL_ALERT + 40), "BR_ERR_SEND_FATAL_ALERT");
	assert_string_equal(tls_err_name(BR_ERR_OK), "BR_ERR_OK");
	assert_string_equal(tls_err_name(BR_ERR_X509_NOT_TRUSTED), "BR_ERR_X509_NOT_TRUSTED");
	assert_string_equal(tls_err_name(99), "BR_ERR_UNKNOWN");
	assert_string_equal(tls_err_name(-1), "BR_ERR_UNKNOWN");
}

/* A ClientHello's random (32 bytes after the record header, the handshake
 * header and the version) as hex into out: the handshake is sent over a
 * socket pair whose other end never answers, its deadline already past. */
static void
client_random(char out[65])
{
	static struct tls_conn t;
	struct tls_timing tm = {100, clock_ms() - 1};
	unsigned char rec[512];
	struct err e = {0};
	int sv[2], calls = getrandom_calls;
	ssize_t n;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	err_clear(&e);
	assert_int_equal(tls_handshake(&t, sv[0], "localhost", &tm, &e), -1);
	/* the engine's seed came from the kernel */
	assert_true(getrandom_calls > calls);
	n = recv(sv[1], rec, sizeof(rec), 0);
	assert_true(n >= 43);
	assert_int_equal(rec[0], 22); /* handshake */
	assert_int_equal(rec[5], 1);  /* ClientHello */
	hex_encode(rec + 11, 32, out);
	close(sv[0]);
	close(sv[1]);
}

/* Two processes that go on from one memory image (fork here, a resumed VM
 * snapshot in production) make different TLS client randoms and ids. */
static void
test_fork_distinct(void **state)
{
	char p[256], mine[65 + 33], theirs[sizeof(mine)];
	struct err e = {0};
	int fds[2], st;
	pid_t pid;

	write_file("one.pem", cert1, NULL);
	snprintf(p, sizeof(p), "%s/one.pem", dir);
	assert_int_equal(load_with(p, NULL, &e), 1);
	client_random(mine); /* everything initialised before the fork */
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	client_random(mine);
	fs_rand_hex(mine + 64, 16);
	if (pid == 0) {
		_exit(write(fds[1], mine, sizeof(mine) - 1) == (ssize_t)sizeof(mine) - 1 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(st, 0);
	assert_int_equal(read(fds[0], theirs, sizeof(theirs) - 1), (ssize_t)sizeof(theirs) - 1);
	theirs[sizeof(theirs) - 1] = '\0';
	close(fds[0]);
	close(fds[1]);
	assert_memory_not_equal(mine, theirs, 64);           /* client randoms */
	assert_memory_not_equal(mine + 64, theirs + 64, 32); /* ids */
	tls_anchors_reset();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_anchors_from_file), cmocka_unit_test(test_anchors_from_dirs),
	    cmocka_unit_test(test_anchors_pem_forms), cmocka_unit_test(test_no_anchors_names_paths),
	    cmocka_unit_test(test_error_mapping),     cmocka_unit_test(test_fork_distinct),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

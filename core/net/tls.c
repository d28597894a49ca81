#include "net/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/digest.h"
#include "base/fs.h"
#include "base/net.h"

/* ---- Trust anchors ----------------------------------------------------- */

static pthread_mutex_t ta_lock = PTHREAD_MUTEX_INITIALIZER;
static br_x509_trust_anchor *ta_list;
static size_t ta_num;
static time_t tls_now; /* 0 = the clock */

void
tls_set_time(time_t t)
{
	tls_now = t;
}

/* BearSSL's byte callback into a struct buf (DER and DN bytes). */
static void
buf_cb(void *ctx, const void *data, size_t len)
{
	buf_put(ctx, data, len);
}

static void *
dup_bytes(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);

	if (q != NULL && n)
		memcpy(q, p, n);
	return q;
}

static void
ta_free_one(br_x509_trust_anchor *ta)
{
	free(ta->dn.data);
	if (ta->pkey.key_type == BR_KEYTYPE_RSA) {
		free(ta->pkey.key.rsa.n);
		free(ta->pkey.key.rsa.e);
	} else {
		free(ta->pkey.key.ec.q);
	}
}

/* The anchors being loaded, and the sha256 of every DER certificate seen
 * (a bundle and a directory of the same CAs, as SSL_CERT_FILE and
 * SSL_CERT_DIR often are, decode each certificate once). */
struct ta_set {
	struct vec list; /* br_x509_trust_anchor, at most TLS_ANCHORS_MAX */
	struct vec seen; /* unsigned char[32], at most TA_SEEN_MAX */
};

/* Certificates that do not decode are remembered too, and a directory may
 * hold files that are no certificates: four times the anchors is far past
 * any system's store, and what is past it is skipped, not an error. */
#define TA_SEEN_MAX (4 * TLS_ANCHORS_MAX)

/* 1 when der was seen before (now it is), 0 the first time, -1 when out
 * of memory. */
static int
ta_seen(struct ta_set *s, const unsigned char *der, size_t len)
{
	unsigned char(*seen)[32] = s->seen.p, *at;
	struct digest d;
	size_t i;

	digest_buf(DIGEST_SHA256, der, len, &d);
	for (i = 0; i < s->seen.n; i++)
		if (memcmp(seen[i], d.v, 32) == 0)
			return 1;
	if ((at = vec_push(&s->seen)) == NULL)
		return -1;
	memcpy(at, d.v, 32);
	return 0;
}

/* Decode one DER certificate into a trust anchor appended to the set.
 * Certificates we cannot use (unsupported key type, bad DER) are skipped:
 * a bundle with one odd entry must not cost the user every other CA. */
static void
ta_add_der(struct ta_set *s, const unsigned char *der, size_t len)
{
	br_x509_decoder_context dc;
	struct buf dn = BUF_INIT(4096);
	const br_x509_pkey *pk;
	br_x509_trust_anchor ta, *at;

	if (vec_full(&s->list) || ta_seen(s, der, len) != 0)
		return;
	br_x509_decoder_init(&dc, buf_cb, &dn);
	br_x509_decoder_push(&dc, der, len);
	pk = br_x509_decoder_get_pkey(&dc);
	if (pk == NULL || dn.over) {
		free(dn.p);
		return;
	}
	memset(&ta, 0, sizeof(ta));
	ta.dn.data = dn.p;
	ta.dn.len = dn.len;
	ta.flags = br_x509_decoder_isCA(&dc) ? BR_X509_TA_CA : 0;
	ta.pkey.key_type = pk->key_type;
	if (pk->key_type == BR_KEYTYPE_RSA) {
		ta.pkey.key.rsa.n = dup_bytes(pk->key.rsa.n, pk->key.rsa.nlen);
		ta.pkey.key.rsa.nlen = pk->key.rsa.nlen;
		ta.pkey.key.rsa.e = dup_bytes(pk->key.rsa.e, pk->key.rsa.elen);
		ta.pkey.key.rsa.elen = pk->key.rsa.elen;
		if (ta.pkey.key.rsa.n == NULL || ta.pkey.key.rsa.e == NULL)
			goto drop;
	} else if (pk->key_type == BR_KEYTYPE_EC) {
		ta.pkey.key.ec.curve = pk->key.ec.curve;
		ta.pkey.key.ec.q = dup_bytes(pk->key.ec.q, pk->key.ec.qlen);
		ta.pkey.key.ec.qlen = pk->key.ec.qlen;
		if (ta.pkey.key.ec.q == NULL)
			goto drop;
	} else {
		free(dn.p);
		return;
	}
	if ((at = vec_push(&s->list)) == NULL)
		goto drop;
	*at = ta;
	return;
drop:
	ta_free_one(&ta);
}

static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* The base64 body of a PEM block, p[0..n), into out (at most cap bytes):
 * white space is skipped, '=' ends it. Returns the length or -1. */
static long
pem_body(const char *p, size_t n, unsigned char *out, size_t cap)
{
	size_t i, o = 0;
	uint32_t acc = 0;
	int bits = 0, v;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=')
			break;
		if ((v = b64_value(c)) < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == cap)
				return -1;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	for (; i < n; i++)
		if (p[i] != '=' && p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
			return -1;
	return (long)o;
}

/* Is the block named s[0..n) a certificate? */
static int
pem_is_cert(const char *s, size_t n)
{
	return (n == 11 && memcmp(s, "CERTIFICATE", 11) == 0) ||
	       (n == 19 && memcmp(s, "TRUSTED CERTIFICATE", 19) == 0);
}

/* Read PEM certificates from path (at most TLS_BUNDLE_BYTES_MAX bytes).
 * Other blocks, text between blocks and blocks that do not decode are
 * skipped. Returns how many anchors were added. */
static size_t
ta_load_file(const char *path, struct ta_set *s)
{
	static const char begin[] = "-----BEGIN ", end[] = "-----END ";
	size_t before = s->list.n, len, nl;
	unsigned char *der;
	const char *p, *lim, *b, *name, *q, *body, *e;
	struct err ignored = {0};
	char *text;
	long k;

	err_clear(&ignored);
	if (fs_read_input(path, TLS_BUNDLE_BYTES_MAX, &text, &len, &ignored) != 0)
		return 0;
	der = malloc(TLS_CERT_DER_MAX);
	if (der == NULL) {
		free(text);
		return 0;
	}
	lim = text + len;
	p = text;
	while ((b = memmem(p, (size_t)(lim - p), begin, sizeof(begin) - 1)) != NULL) {
		p = b + sizeof(begin) - 1;
		/* a BEGIN line starts a line */
		if (b != text && b[-1] != '\n')
			continue;
		name = p;
		q = memchr(name, '\n', (size_t)(lim - name));
		if (q == NULL)
			break;
		nl = (size_t)(q - name);
		nl -= nl > 0 && name[nl - 1] == '\r';
		body = q + 1;
		e = memmem(body, (size_t)(lim - body), end, sizeof(end) - 1);
		if (e == NULL)
			break;
		p = e + sizeof(end) - 1;
		if (nl < 5 || memcmp(name + nl - 5, "-----", 5) != 0 || !pem_is_cert(name, nl - 5))
			continue;
		k = pem_body(body, (size_t)(e - body), der, TLS_CERT_DER_MAX);
		if (k > 0)
			ta_add_der(s, der, (size_t)k);
	}
	free(der);
	free(text);
	return s->list.n - before;
}

/* Every regular file of dir, each (device, inode) once: hashed-name links
 * and *.pem links in /etc/ssl/certs name the same files. */
static size_t
ta_load_dir(const char *dir, struct ta_set *s)
{
	struct seen {
		dev_t dev;
		ino_t ino;
	} * at;
	struct vec seen = VEC_INIT(sizeof(struct seen), TA_SEEN_MAX);
	size_t added = 0, i, k, n;
	char path[4096], **names;
	struct stat st;
	struct err e = {0};

	if (fs_dir_names(AT_FDCWD, dir, "io.error", &names, &n, &e) != 0)
		return 0;
	for (k = 0; k < n && !vec_full(&s->list); k++) {
		if (names[k][0] == '.')
			continue;
		if (fs_path_join(path, sizeof(path), dir, names[k], NULL) != 0)
			continue;
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)TLS_BUNDLE_BYTES_MAX)
			continue;
		for (i = 0, at = seen.p; i < seen.n; i++)
			if (at[i].dev == st.st_dev && at[i].ino == st.st_ino)
				break;
		if (i < seen.n)
			continue;
		if ((at = vec_push(&seen)) == NULL)
			break;
		at->dev = st.st_dev;
		at->ino = st.st_ino;
		added += ta_load_file(path, s);
	}
	free(names);
	vec_free(&seen);
	return added;
}

/* Where the anchors come from (tls_anchors_source); "" = the system's. */
static char ca_file[1024], ca_dirs[4096];

static void
anchors_forget(void)
{
	size_t i;

	for (i = 0; i < ta_num; i++)
		ta_free_one(&ta_list[i]);
	free(ta_list);
	ta_list = NULL;
	ta_num = 0;
}

void
tls_anchors_source(const char *file, const char *dirs)
{
	file = file != NULL ? file : "";
	dirs = dirs != NULL ? dirs : "";
	pthread_mutex_lock(&ta_lock);
	if (strcmp(file, ca_file) != 0 || strcmp(dirs, ca_dirs) != 0) {
		snprintf(ca_file, sizeof(ca_file), "%s", file);
		snprintf(ca_dirs, sizeof(ca_dirs), "%s", dirs);
		anchors_forget();
	}
	pthread_mutex_unlock(&ta_lock);
}

int
tls_anchors_load(struct err *e)
{
	static const char *const defaults[] = {TLS_BUNDLE_PATHS};
	const char *file = ca_file, *dirs = ca_dirs;
	struct ta_set set;
	size_t i;
	struct buf tried = BUF_INIT(1 << 16); /* whole: err_set fits the message */
	char one[1024];
	const char *p, *q;
	int r;

	pthread_mutex_lock(&ta_lock);
	if (ta_num > 0) {
		r = (int)ta_num;
		pthread_mutex_unlock(&ta_lock);
		return r;
	}
	set.list = (struct vec)VEC_INIT(sizeof(br_x509_trust_anchor), TLS_ANCHORS_MAX);
	set.seen = (struct vec)VEC_INIT(32, TA_SEEN_MAX);
#define TRIED(s) (void)(buf_put(&tried, ", ", tried.len ? 2 : 0), buf_put(&tried, (s), strlen(s)))
	if ((file != NULL && *file) || (dirs != NULL && *dirs)) {
		if (file != NULL && *file) {
			ta_load_file(file, &set);
			TRIED("SSL_CERT_FILE=");
			buf_put(&tried, file, strlen(file));
		}
		for (p = dirs; p != NULL && *p; p = q ? q + 1 : NULL) {
			q = strchr(p, ':');
			snprintf(one, sizeof(one), "%.*s", q ? (int)(q - p) : (int)strlen(p), p);
			if (one[0] != '\0') {
				ta_load_dir(one, &set);
				TRIED(one);
			}
			if (q == NULL)
				break;
		}
	} else {
		for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]) && set.list.n == 0; i++) {
			ta_load_file(defaults[i], &set);
			TRIED(defaults[i]);
		}
	}
#undef TRIED
	vec_free(&set.seen);
	if (set.list.n == 0) {
		vec_free(&set.list);
		pthread_mutex_unlock(&ta_lock);
		err_set(e, "tls.no_trust_anchors", "no CA certificate found in %s",
		        tried.p != NULL ? (char *)tried.p : "");
		buf_free(&tried);
		return -1;
	}
	buf_free(&tried);
	ta_list = set.list.p;
	ta_num = set.list.n;
	pthread_mutex_unlock(&ta_lock);
	return (int)set.list.n;
}

#ifdef ABX_TEST
void
tls_anchors_reset(void)
{
	pthread_mutex_lock(&ta_lock);
	anchors_forget();
	pthread_mutex_unlock(&ta_lock);
}
#endif

/* ---- Error mapping ----------------------------------------------------- */

/* BearSSL's error codes (all below 256) and their names, one table: the
 * codes as bytes, the names packed in the same order. */
/* clang-format off */
#define BR_ERRS(N) \
	N(BR_ERR_OK) \
	N(BR_ERR_BAD_PARAM) \
	N(BR_ERR_BAD_STATE) \
	N(BR_ERR_UNSUPPORTED_VERSION) \
	N(BR_ERR_BAD_VERSION) \
	N(BR_ERR_TOO_LARGE) \
	N(BR_ERR_BAD_MAC) \
	N(BR_ERR_NO_RANDOM) \
	N(BR_ERR_UNKNOWN_TYPE) \
	N(BR_ERR_UNEXPECTED) \
	N(BR_ERR_BAD_CCS) \
	N(BR_ERR_BAD_ALERT) \
	N(BR_ERR_OVERSIZED_ID) \
	N(BR_ERR_BAD_CIPHER_SUITE) \
	N(BR_ERR_BAD_COMPRESSION) \
	N(BR_ERR_BAD_FRAGLEN) \
	N(BR_ERR_BAD_SECRENEG) \
	N(BR_ERR_BAD_SNI) \
	N(BR_ERR_BAD_HELLO_DONE) \
	N(BR_ERR_LIMIT_EXCEEDED) \
	N(BR_ERR_BAD_FINISHED) \
	N(BR_ERR_RESUME_MISMATCH) \
	N(BR_ERR_BAD_SIGNATURE) \
	N(BR_ERR_WRONG_KEY_USAGE) \
	N(BR_ERR_NO_CLIENT_AUTH) \
	N(BR_ERR_IO) \
	N(BR_ERR_X509_INVALID_VALUE) \
	N(BR_ERR_X509_EMPTY_CHAIN) \
	N(BR_ERR_X509_INNER_TRUNC) \
	N(BR_ERR_X509_BAD_TAG_CLASS) \
	N(BR_ERR_X509_BAD_TAG_VALUE) \
	N(BR_ERR_X509_EXTRA_ELEMENT) \
	N(BR_ERR_X509_UNEXPECTED) \
	N(BR_ERR_X509_NOT_CONSTRUCTED) \
	N(BR_ERR_X509_PARTIAL_BYTE) \
	N(BR_ERR_X509_BAD_BOOLEAN) \
	N(BR_ERR_X509_OVERFLOW) \
	N(BR_ERR_X509_BAD_DN) \
	N(BR_ERR_X509_BAD_TIME) \
	N(BR_ERR_X509_UNSUPPORTED) \
	N(BR_ERR_X509_LIMIT_EXCEEDED) \
	N(BR_ERR_X509_WRONG_KEY_TYPE) \
	N(BR_ERR_X509_BAD_SIGNATURE) \
	N(BR_ERR_X509_TIME_UNKNOWN) \
	N(BR_ERR_X509_EXPIRED) \
	N(BR_ERR_X509_DN_MISMATCH) \
	N(BR_ERR_X509_BAD_SERVER_NAME) \
	N(BR_ERR_X509_CRITICAL_EXTENSION) \
	N(BR_ERR_X509_NOT_CA) \
	N(BR_ERR_X509_FORBIDDEN_KEY_USAGE) \
	N(BR_ERR_X509_WEAK_PUBLIC_KEY) \
	N(BR_ERR_X509_NOT_TRUSTED)
/* clang-format on */
static const unsigned char br_errs[] = {
#define N(x) x,
    BR_ERRS(N)
#undef N
};
static const char br_names[] =
#define N(x) #x "\0"
    BR_ERRS(N)
#undef N
    ;

const char *
tls_err_name(int brerr)
{
	const char *p = br_names;
	size_t i;

	if (brerr >= BR_ERR_SEND_FATAL_ALERT)
		return "BR_ERR_SEND_FATAL_ALERT";
	if (brerr >= BR_ERR_RECV_FATAL_ALERT)
		return "BR_ERR_RECV_FATAL_ALERT";
	for (i = 0; i < sizeof(br_errs); i++, p += strlen(p) + 1)
		if (br_errs[i] == brerr)
			return p;
	return "BR_ERR_UNKNOWN";
}

const char *
tls_err_code(int brerr, const struct tls_x509_watch *w)
{
	switch (brerr) {
	case BR_ERR_X509_EXPIRED:
		/* BearSSL says "expired" for both ends of the validity window. */
		return w != NULL && w->any_future && !w->any_past ? "tls.not_yet_valid" : "tls.expired";
	case BR_ERR_X509_BAD_SERVER_NAME:
		return "tls.bad_host";
	case BR_ERR_X509_NOT_TRUSTED:
		return "tls.unknown_ca";
	case BR_ERR_X509_WEAK_PUBLIC_KEY:
		return "tls.weak_key";
	case BR_ERR_X509_UNSUPPORTED:
		/* SHA-1 and MD5 are removed from the engine, so a certificate
		 * signed with them lands here. */
		return w != NULL && w->weak_hash ? "tls.weak_key" : "tls.bad_chain";
	}
	if (brerr >= BR_ERR_X509_OK && brerr < BR_ERR_RECV_FATAL_ALERT)
		return "tls.bad_chain";
	return "tls.protocol";
}

static const char *
alert_name(int a)
{
	switch (a) {
	case 40:
		return "handshake_failure";
	case 42:
		return "bad_certificate";
	case 47:
		return "illegal_parameter";
	case 48:
		return "unknown_ca";
	case 50:
		return "decode_error";
	case 70:
		return "protocol_version";
	case 71:
		return "insufficient_security";
	case 80:
		return "internal_error";
	case 112:
		return "unrecognized_name";
	}
	return "alert";
}

static int
set_br_error(struct tls_conn *t, int brerr, struct err *e)
{
	const struct tls_x509_watch *w = &t->xw;
	const char *code = tls_err_code(brerr, w);
	const char *why = "";

	if (brerr >= BR_ERR_RECV_FATAL_ALERT) {
		int a = brerr & 255;
		return err_set(
		    e, code, "%s %d (%s)%s", tls_err_name(brerr), a, alert_name(a),
		    a == 40 || a == 70 || a == 71 ? ": the server offers no TLS 1.2 ECDHE/AEAD suite" : "");
	}
	if (brerr == BR_ERR_X509_NOT_TRUSTED && w->ncerts == 1)
		why = ": the server sent one certificate (self-signed, or its intermediate is missing)";
	else if (brerr == BR_ERR_X509_NOT_TRUSTED)
		why = ": no trusted CA issued this chain";
	else if (brerr == BR_ERR_X509_UNSUPPORTED && w->weak_hash)
		why = ": a certificate is signed with SHA-1 or MD5";
	else if (brerr == BR_ERR_X509_WEAK_PUBLIC_KEY)
		why = ": RSA keys must have at least 2048 bits";
	else if (brerr == BR_ERR_X509_EXPIRED && w->any_future && !w->any_past)
		why = ": the certificate is not valid yet";
	else if (brerr == BR_ERR_X509_EXPIRED)
		why = ": the certificate has expired";
	else if (brerr == BR_ERR_X509_NOT_CA)
		why = ": an issuing certificate is not a CA";
	else if (brerr == BR_ERR_X509_BAD_SERVER_NAME)
		why = ": the certificate does not name this host";
	else if (brerr == BR_ERR_UNSUPPORTED_VERSION || brerr == BR_ERR_BAD_VERSION)
		why = ": the server does not speak TLS 1.2";
	else if (brerr == BR_ERR_BAD_CIPHER_SUITE)
		why = ": the server chose a suite outside TLS 1.2 ECDHE/AEAD";
	return err_set(e, code, "%s%s", tls_err_name(brerr), why);
}

/* ---- The X.509 watch: forwards to the minimal engine ------------------ */

static void
xw_start_chain(const br_x509_class **ctx, const char *server_name)
{
	struct tls_x509_watch *w = (struct tls_x509_watch *)(void *)ctx;

	w->ncerts = 0;
	w->any_future = w->any_past = w->weak_hash = 0;
	w->inner->vtable->start_chain(&w->inner->vtable, server_name);
}

static void
xw_start_cert(const br_x509_class **ctx, uint32_t length)
{
	struct tls_x509_watch *w = (struct tls_x509_watch *)(void *)ctx;

	w->ncerts++;
	br_x509_decoder_init(&w->dec, NULL, NULL);
	w->inner->vtable->start_cert(&w->inner->vtable, length);
}

static void
xw_append(const br_x509_class **ctx, const unsigned char *buf, size_t len)
{
	struct tls_x509_watch *w = (struct tls_x509_watch *)(void *)ctx;

	br_x509_decoder_push(&w->dec, buf, len);
	w->inner->vtable->append(&w->inner->vtable, buf, len);
}

static int
before(uint32_t d1, uint32_t s1, uint32_t d2, uint32_t s2)
{
	return d1 < d2 || (d1 == d2 && s1 < s2);
}

static void
xw_end_cert(const br_x509_class **ctx)
{
	struct tls_x509_watch *w = (struct tls_x509_watch *)(void *)ctx;
	br_x509_decoder_context *d = &w->dec;
	int h;

	if (br_x509_decoder_last_error(d) == 0) {
		h = br_x509_decoder_get_signer_hash_id(d);
		if (h == br_sha1_ID || h == br_md5_ID)
			w->weak_hash = 1;
		if (before(w->days, w->seconds, d->notbefore_days, d->notbefore_seconds))
			w->any_future = 1;
		if (before(d->notafter_days, d->notafter_seconds, w->days, w->seconds))
			w->any_past = 1;
	}
	w->inner->vtable->end_cert(&w->inner->vtable);
}

static unsigned
xw_end_chain(const br_x509_class **ctx)
{
	struct tls_x509_watch *w = (struct tls_x509_watch *)(void *)ctx;

	return w->inner->vtable->end_chain(&w->inner->vtable);
}

static const br_x509_pkey *
xw_get_pkey(const br_x509_class *const *ctx, unsigned *usages)
{
	const struct tls_x509_watch *w = (const struct tls_x509_watch *)(const void *)ctx;

	return w->inner->vtable->get_pkey((const br_x509_class *const *)&w->inner->vtable, usages);
}

static const br_x509_class xw_vtable = {
    sizeof(struct tls_x509_watch),
    xw_start_chain,
    xw_start_cert,
    xw_append,
    xw_end_cert,
    xw_end_chain,
    xw_get_pkey,
};

/* ---- Connection -------------------------------------------------------- */

/* TLS 1.2, ECDHE, AES-GCM or ChaCha20-Poly1305 (Mozilla's "intermediate"
 * server configuration offers these): nothing else is offered. */
static const uint16_t suites[] = {
    BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,       BR_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,       BR_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, BR_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
};

/* Elliptic curves: X25519 through BearSSL's fast constant-time code, the
 * NIST curves (ECDHE on P-256/384/521 and every ECDSA signature) through its
 * generic constant-time i31 code. br_ec_all_m31 adds a P-256 special case
 * (8 KB) that only makes P-256 faster; servers pick X25519 for ECDHE where
 * offered, so the generic code mostly verifies signatures, on public data.
 * The same curves as br_ec_all_m31, all constant-time. */
static const br_ec_impl *
ec_for(int curve)
{
	return curve == BR_EC_curve25519 ? &br_ec_c25519_m31 : &br_ec_prime_i31;
}

static const unsigned char *
ec_generator(int curve, size_t *len)
{
	return ec_for(curve)->generator(curve, len);
}

static const unsigned char *
ec_order(int curve, size_t *len)
{
	return ec_for(curve)->order(curve, len);
}

static size_t
ec_xoff(int curve, size_t *len)
{
	return ec_for(curve)->xoff(curve, len);
}

static uint32_t
ec_mul(unsigned char *g, size_t glen, const unsigned char *x, size_t xlen, int curve)
{
	return ec_for(curve)->mul(g, glen, x, xlen, curve);
}

static size_t
ec_mulgen(unsigned char *r, const unsigned char *x, size_t xlen, int curve)
{
	return ec_for(curve)->mulgen(r, x, xlen, curve);
}

static uint32_t
ec_muladd(unsigned char *a, const unsigned char *b, size_t len, const unsigned char *x, size_t xlen,
          const unsigned char *y, size_t ylen, int curve)
{
	return ec_for(curve)->muladd(a, b, len, x, xlen, y, ylen, curve);
}

static const br_ec_impl ec_impl = {
    (uint32_t)((1 << BR_EC_secp256r1) | (1 << BR_EC_secp384r1) | (1 << BR_EC_secp521r1) |
               (1 << BR_EC_curve25519)),
    ec_generator,
    ec_order,
    ec_xoff,
    ec_mul,
    ec_mulgen,
    ec_muladd,
};

/* The client engine with only what those suites and the chain checks use.
 * br_ssl_client_init_full would link every algorithm BearSSL has (CBC and
 * its constant-time HMAC, 3DES, CCM, static RSA key exchange, the TLS 1.0
 * PRF, MD5): about 20 KB of code that the suite list never lets run.
 * SHA-1 and MD5 are never set, in the engine (key-exchange signatures) or
 * in the X.509 engine (certificate signatures, so such chains fail); TLS
 * 1.2's PRF needs neither. */
static void
client_init(br_ssl_client_context *cc, br_x509_minimal_context *xc)
{
	static const struct {
		int id;
		const br_hash_class *vt;
	} hashes[] = {
	    {br_sha224_ID, &br_sha224_vtable},
	    {br_sha256_ID, &br_sha256_vtable},
	    {br_sha384_ID, &br_sha384_vtable},
	    {br_sha512_ID, &br_sha512_vtable},
	};
	br_ssl_engine_context *eng = &cc->eng;
	size_t i;

	br_ssl_client_zero(cc);
	br_ssl_engine_set_versions(eng, BR_TLS12, BR_TLS12);
	br_ssl_engine_set_suites(eng, suites, sizeof(suites) / sizeof(suites[0]));
	br_x509_minimal_init(xc, &br_sha256_vtable, ta_list, ta_num);
	/* RSA verification is a public exponent (17 multiplications): the
	 * i31 code already linked for the EC side does it; the default's i62
	 * code adds 1.6 KB for no measurable gain. */
	br_ssl_engine_set_rsavrfy(eng, br_rsa_i31_pkcs1_vrfy);
	br_ssl_engine_set_ec(eng, &ec_impl);
	br_ssl_engine_set_ecdsa(eng, br_ecdsa_i31_vrfy_asn1);
	br_x509_minimal_set_rsa(xc, br_ssl_engine_get_rsavrfy(eng));
	br_x509_minimal_set_ecdsa(xc, &ec_impl, br_ecdsa_i31_vrfy_asn1);
	for (i = 0; i < sizeof(hashes) / sizeof(hashes[0]); i++) {
		br_ssl_engine_set_hash(eng, hashes[i].id, hashes[i].vt);
		br_x509_minimal_set_hash(xc, hashes[i].id, hashes[i].vt);
	}
	br_ssl_engine_set_prf_sha256(eng, &br_tls12_sha256_prf);
	br_ssl_engine_set_prf_sha384(eng, &br_tls12_sha384_prf);
	br_ssl_engine_set_default_aes_gcm(eng);
	/* SSE2 is part of x86-64 and 64x64->128 multiplication of every 64-bit
	 * target gcc builds for: the portable fallbacks that
	 * br_ssl_engine_set_default_chapol links (2 KB) would never run there. */
	br_ssl_engine_set_chapol(eng, &br_sslrec_in_chapol_vtable, &br_sslrec_out_chapol_vtable);
#if defined(__x86_64__)
	br_ssl_engine_set_chacha20(eng, br_chacha20_sse2_run);
#else
	br_ssl_engine_set_chacha20(eng, br_chacha20_ct_run);
#endif
#if defined(__SIZEOF_INT128__)
	br_ssl_engine_set_poly1305(eng, br_poly1305_ctmulq_run);
#else
	br_ssl_engine_set_poly1305(eng, br_poly1305_ctmul_run);
#endif
}

/* Drive the engine until one of the target states (BR_SSL_SENDAPP,
 * BR_SSL_RECVAPP) is reached. Returns 0, 1 when the engine closed
 * cleanly, or -1 with e set. */
static int
run_until(struct tls_conn *t, unsigned target, const struct tls_timing *tm, struct err *e)
{
	br_ssl_engine_context *eng = &t->sc.eng;
	unsigned st;
	unsigned char *buf;
	size_t len;
	ssize_t n;
	int berr;

	if (t->dead)
		return err_set(e, "http.connect", "the connection failed earlier");
	for (;;) {
		st = br_ssl_engine_current_state(eng);
		if (st & BR_SSL_CLOSED) {
			berr = br_ssl_engine_last_error(eng);
			if (berr == BR_ERR_OK)
				return 1;
			if (berr == BR_ERR_IO && e != NULL && e->code != NULL)
				return -1; /* the transport error is already in e */
			return set_br_error(t, berr, e);
		}
		/* Record data to send takes precedence over everything else. */
		if (st & BR_SSL_SENDREC) {
			buf = br_ssl_engine_sendrec_buf(eng, &len);
			n = send(t->fd, buf, len, MSG_NOSIGNAL);
			if (n > 0) {
				br_ssl_engine_sendrec_ack(eng, (size_t)n);
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
				if (net_wait(t->fd, POLLOUT, tm->step_ms, tm->end_ms, "TLS send", e) != 0) {
					t->dead = 1;
					return -1;
				}
				continue;
			}
			err_set(e, "http.connect", "send: %s", n < 0 ? strerror(errno) : "closed");
			t->dead = 1;
			return -1;
		}
		if (st & target)
			return 0;
		/* The peer may still owe us a handshake message when we want to
		 * send; flush what the application queued first. */
		if ((st & BR_SSL_SENDAPP) && (target & BR_SSL_RECVAPP))
			br_ssl_engine_flush(eng, 0);
		if (st & BR_SSL_RECVREC) {
			buf = br_ssl_engine_recvrec_buf(eng, &len);
			n = recv(t->fd, buf, len, 0);
			if (n > 0) {
				br_ssl_engine_recvrec_ack(eng, (size_t)n);
				continue;
			}
			if (n == 0) {
				/* TCP end without close_notify. */
				t->dead = 1;
				return 2;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
				if (net_wait(t->fd, POLLIN, tm->step_ms, tm->end_ms, "TLS receive", e) != 0) {
					t->dead = 1;
					return -1;
				}
				continue;
			}
			err_sys(e, "http.connect", errno, "recv: %s", strerror(errno));
			t->dead = 1;
			return -1;
		}
		/* Nothing to do and nothing possible: the engine waits for the
		 * application (e.g. a flush). */
		br_ssl_engine_flush(eng, 0);
		if (br_ssl_engine_current_state(eng) == st)
			return set_br_error(t, BR_ERR_BAD_STATE, e);
	}
}

int
tls_handshake(struct tls_conn *t, int fd, const char *host, const struct tls_timing *tm, struct err *e)
{
	br_ssl_engine_context *eng = &t->sc.eng;
	unsigned char seed[32];
	time_t now;
	int r;

	if (tls_anchors_load(e) < 0)
		return -1;
	t->fd = fd;
	t->dead = 0;
	client_init(&t->sc, &t->xc);
	br_x509_minimal_set_minrsa(&t->xc, 256);
	now = tls_now ? tls_now : time(NULL);
	t->xw.days = (uint32_t)(now / 86400 + 719528);
	t->xw.seconds = (uint32_t)(now % 86400);
	br_x509_minimal_set_time(&t->xc, t->xw.days, t->xw.seconds);
	t->xw.vtable = &xw_vtable;
	t->xw.inner = &t->xc;
	br_ssl_engine_set_x509(eng, &t->xw.vtable);
	br_ssl_engine_set_buffer(eng, t->iobuf, sizeof(t->iobuf), 1);
	/* Every connection's DRBG starts from the kernel (client_init zeroed
	 * it): BearSSL's own seeder may take RDRAND alone, and two processes
	 * resumed from one memory image (a fork, a VM snapshot) share every
	 * byte of user space but not what getrandom returns next. */
	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		return err_sys(e, "tls.error", errno, "getrandom: %s", strerror(errno));
	br_ssl_engine_inject_entropy(eng, seed, sizeof(seed));
	explicit_bzero(seed, sizeof(seed));
	if (!br_ssl_client_reset(&t->sc, host, 0))
		return set_br_error(t, br_ssl_engine_last_error(eng), e);
	r = run_until(t, BR_SSL_SENDAPP, tm, e);
	if (r == 0)
		return 0;
	if (r > 0)
		return err_set(e, "tls.protocol", "%s: the server closed the connection during the handshake",
		               tls_err_name(BR_ERR_IO));
	return -1;
}

long
tls_peek(struct tls_conn *t, const unsigned char **p, const struct tls_timing *tm, struct err *e)
{
	size_t n;
	int r;

	r = run_until(t, BR_SSL_RECVAPP, tm, e);
	if (r == 1 || r == 2) {
		if (e != NULL)
			err_clear(e);
		return 0;
	}
	if (r < 0)
		return -1;
	*p = br_ssl_engine_recvapp_buf(&t->sc.eng, &n);
	return (long)n;
}

void
tls_ack(struct tls_conn *t, size_t n)
{
	if (n > 0)
		br_ssl_engine_recvapp_ack(&t->sc.eng, n);
}

long
tls_read(struct tls_conn *t, void *buf, size_t len, const struct tls_timing *tm, struct err *e)
{
	const unsigned char *p;
	long n = tls_peek(t, &p, tm, e);

	if (n <= 0)
		return n;
	if ((size_t)n > len)
		n = (long)len;
	memcpy(buf, p, (size_t)n);
	tls_ack(t, (size_t)n);
	return n;
}

int
tls_write(struct tls_conn *t, const void *buf, size_t len, const struct tls_timing *tm, struct err *e)
{
	br_ssl_engine_context *eng = &t->sc.eng;
	const unsigned char *src = buf;
	unsigned char *p;
	size_t n;
	int r;

	while (len > 0) {
		r = run_until(t, BR_SSL_SENDAPP, tm, e);
		if (r != 0)
			return r < 0 ? -1 : err_set(e, "http.connect", "the server closed the connection");
		p = br_ssl_engine_sendapp_buf(eng, &n);
		if (n > len)
			n = len;
		memcpy(p, src, n);
		br_ssl_engine_sendapp_ack(eng, n);
		src += n;
		len -= n;
	}
	br_ssl_engine_flush(eng, 0);
	/* Push the records out before we wait for the answer. */
	while (br_ssl_engine_current_state(eng) & BR_SSL_SENDREC) {
		r = run_until(t, BR_SSL_SENDAPP | BR_SSL_RECVAPP, tm, e);
		if (r != 0)
			return r < 0 ? -1 : err_set(e, "http.connect", "the server closed the connection");
		if (!(br_ssl_engine_current_state(eng) & BR_SSL_SENDREC))
			break;
	}
	return 0;
}

int
tls_closed(struct tls_conn *t)
{
	return t->dead || (br_ssl_engine_current_state(&t->sc.eng) & BR_SSL_CLOSED) != 0;
}

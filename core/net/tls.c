#include "net/tls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
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

/* Decode one DER certificate into a trust anchor appended to *list.
 * Certificates we cannot use (unsupported key type, bad DER) are skipped:
 * a bundle with one odd entry must not cost the user every other CA. */
static void
ta_add_der(br_x509_trust_anchor **list, size_t *n, size_t *cap, const unsigned char *der, size_t len)
{
	br_x509_decoder_context dc;
	struct buf dn = BUF_INIT(4096);
	const br_x509_pkey *pk;
	br_x509_trust_anchor ta, *nl;

	br_x509_decoder_init(&dc, buf_cb, &dn);
	br_x509_decoder_push(&dc, der, len);
	pk = br_x509_decoder_get_pkey(&dc);
	if (pk == NULL || dn.over || *n >= TLS_ANCHORS_MAX) {
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
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		nl = realloc(*list, ncap * sizeof(**list));
		if (nl == NULL)
			goto drop;
		*list = nl;
		*cap = ncap;
	}
	(*list)[(*n)++] = ta;
	return;
drop:
	ta_free_one(&ta);
}

/* Read PEM certificates from path. Returns how many were added. */
static size_t
ta_load_file(const char *path, br_x509_trust_anchor **list, size_t *n, size_t *cap)
{
	br_pem_decoder_context pc;
	struct buf der = BUF_INIT(TLS_CERT_DER_MAX);
	unsigned char buf[4096];
	size_t before = *n, total = 0, off, k;
	int fd, incert = 0;
	ssize_t r;
	struct stat st;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	br_pem_decoder_init(&pc);
	while ((r = read(fd, buf, sizeof(buf))) > 0 && total < TLS_BUNDLE_BYTES_MAX) {
		total += (size_t)r;
		off = 0;
		while (off < (size_t)r) {
			k = br_pem_decoder_push(&pc, buf + off, (size_t)r - off);
			off += k;
			switch (br_pem_decoder_event(&pc)) {
			case BR_PEM_BEGIN_OBJ:
				incert = strcmp(br_pem_decoder_name(&pc), "CERTIFICATE") == 0 ||
				         strcmp(br_pem_decoder_name(&pc), "TRUSTED CERTIFICATE") == 0;
				buf_reset(&der);
				br_pem_decoder_setdest(&pc, incert ? buf_cb : NULL, &der);
				break;
			case BR_PEM_END_OBJ:
				if (incert && !der.over)
					ta_add_der(list, n, cap, der.p, der.len);
				incert = 0;
				break;
			case BR_PEM_ERROR:
				/* Resynchronise on the next BEGIN line. */
				br_pem_decoder_init(&pc);
				incert = 0;
				break;
			default:
				break;
			}
		}
	}
	close(fd);
	free(der.p);
	return *n - before;
}

/* Every regular file of dir, each (device, inode) once: hashed-name links
 * and *.pem links in /etc/ssl/certs name the same files. */
static size_t
ta_load_dir(const char *dir, br_x509_trust_anchor **list, size_t *n, size_t *cap)
{
	struct seen {
		dev_t dev;
		ino_t ino;
	} *seen = NULL, *ns;
	size_t nseen = 0, capseen = 0, added = 0, i;
	char path[4096];
	struct dirent *d;
	struct stat st;
	DIR *dp;

	dp = opendir(dir);
	if (dp == NULL)
		return 0;
	while ((d = readdir(dp)) != NULL && *n < TLS_ANCHORS_MAX) {
		if (d->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, d->d_name) >= (int)sizeof(path))
			continue;
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)TLS_BUNDLE_BYTES_MAX)
			continue;
		for (i = 0; i < nseen; i++)
			if (seen[i].dev == st.st_dev && seen[i].ino == st.st_ino)
				break;
		if (i < nseen)
			continue;
		if (nseen == capseen) {
			capseen = capseen ? capseen * 2 : 64;
			ns = realloc(seen, capseen * sizeof(*seen));
			if (ns == NULL)
				break;
			seen = ns;
		}
		seen[nseen].dev = st.st_dev;
		seen[nseen].ino = st.st_ino;
		nseen++;
		added += ta_load_file(path, list, n, cap);
	}
	closedir(dp);
	free(seen);
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
	br_x509_trust_anchor *list = NULL;
	size_t n = 0, cap = 0, i;
	char tried[ERR_MSG_MAX - 64] = "";
	char one[1024];
	const char *p, *q;
	int r;

	pthread_mutex_lock(&ta_lock);
	if (ta_num > 0) {
		r = (int)ta_num;
		pthread_mutex_unlock(&ta_lock);
		return r;
	}
#define TRIED(s)                                                                                             \
	do {                                                                                                 \
		size_t l_ = strlen(tried);                                                                   \
		snprintf(tried + l_, sizeof(tried) - l_, "%s%.150s", l_ ? ", " : "", (s));                   \
	} while (0)
	if ((file != NULL && *file) || (dirs != NULL && *dirs)) {
		if (file != NULL && *file) {
			ta_load_file(file, &list, &n, &cap);
			snprintf(one, sizeof(one), "SSL_CERT_FILE=%.1000s", file);
			TRIED(one);
		}
		for (p = dirs; p != NULL && *p; p = q ? q + 1 : NULL) {
			q = strchr(p, ':');
			snprintf(one, sizeof(one), "%.*s", q ? (int)(q - p) : (int)strlen(p), p);
			if (one[0] != '\0') {
				ta_load_dir(one, &list, &n, &cap);
				TRIED(one);
			}
			if (q == NULL)
				break;
		}
	} else {
		for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]) && n == 0; i++) {
			ta_load_file(defaults[i], &list, &n, &cap);
			TRIED(defaults[i]);
		}
	}
#undef TRIED
	if (n == 0) {
		free(list);
		pthread_mutex_unlock(&ta_lock);
		return err_set(e, "tls.no_trust_anchors", "no CA certificate found in %s", tried);
	}
	ta_list = list;
	ta_num = n;
	pthread_mutex_unlock(&ta_lock);
	return (int)n;
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

static const struct {
	int err;
	const char *name;
} br_names[] = {
#define N(x)                                                                                                 \
	{                                                                                                    \
		x, #x                                                                                        \
	}
    N(BR_ERR_OK),
    N(BR_ERR_BAD_PARAM),
    N(BR_ERR_BAD_STATE),
    N(BR_ERR_UNSUPPORTED_VERSION),
    N(BR_ERR_BAD_VERSION),
    N(BR_ERR_BAD_LENGTH),
    N(BR_ERR_TOO_LARGE),
    N(BR_ERR_BAD_MAC),
    N(BR_ERR_NO_RANDOM),
    N(BR_ERR_UNKNOWN_TYPE),
    N(BR_ERR_UNEXPECTED),
    N(BR_ERR_BAD_CCS),
    N(BR_ERR_BAD_ALERT),
    N(BR_ERR_BAD_HANDSHAKE),
    N(BR_ERR_OVERSIZED_ID),
    N(BR_ERR_BAD_CIPHER_SUITE),
    N(BR_ERR_BAD_COMPRESSION),
    N(BR_ERR_BAD_FRAGLEN),
    N(BR_ERR_BAD_SECRENEG),
    N(BR_ERR_EXTRA_EXTENSION),
    N(BR_ERR_BAD_SNI),
    N(BR_ERR_BAD_HELLO_DONE),
    N(BR_ERR_LIMIT_EXCEEDED),
    N(BR_ERR_BAD_FINISHED),
    N(BR_ERR_RESUME_MISMATCH),
    N(BR_ERR_INVALID_ALGORITHM),
    N(BR_ERR_BAD_SIGNATURE),
    N(BR_ERR_WRONG_KEY_USAGE),
    N(BR_ERR_NO_CLIENT_AUTH),
    N(BR_ERR_IO),
    N(BR_ERR_X509_INVALID_VALUE),
    N(BR_ERR_X509_TRUNCATED),
    N(BR_ERR_X509_EMPTY_CHAIN),
    N(BR_ERR_X509_INNER_TRUNC),
    N(BR_ERR_X509_BAD_TAG_CLASS),
    N(BR_ERR_X509_BAD_TAG_VALUE),
    N(BR_ERR_X509_INDEFINITE_LENGTH),
    N(BR_ERR_X509_EXTRA_ELEMENT),
    N(BR_ERR_X509_UNEXPECTED),
    N(BR_ERR_X509_NOT_CONSTRUCTED),
    N(BR_ERR_X509_NOT_PRIMITIVE),
    N(BR_ERR_X509_PARTIAL_BYTE),
    N(BR_ERR_X509_BAD_BOOLEAN),
    N(BR_ERR_X509_OVERFLOW),
    N(BR_ERR_X509_BAD_DN),
    N(BR_ERR_X509_BAD_TIME),
    N(BR_ERR_X509_UNSUPPORTED),
    N(BR_ERR_X509_LIMIT_EXCEEDED),
    N(BR_ERR_X509_WRONG_KEY_TYPE),
    N(BR_ERR_X509_BAD_SIGNATURE),
    N(BR_ERR_X509_TIME_UNKNOWN),
    N(BR_ERR_X509_EXPIRED),
    N(BR_ERR_X509_DN_MISMATCH),
    N(BR_ERR_X509_BAD_SERVER_NAME),
    N(BR_ERR_X509_CRITICAL_EXTENSION),
    N(BR_ERR_X509_NOT_CA),
    N(BR_ERR_X509_FORBIDDEN_KEY_USAGE),
    N(BR_ERR_X509_WEAK_PUBLIC_KEY),
    N(BR_ERR_X509_NOT_TRUSTED),
#undef N
};

const char *
tls_err_name(int brerr)
{
	size_t i;

	if (brerr >= BR_ERR_SEND_FATAL_ALERT)
		return "BR_ERR_SEND_FATAL_ALERT";
	if (brerr >= BR_ERR_RECV_FATAL_ALERT)
		return "BR_ERR_RECV_FATAL_ALERT";
	for (i = 0; i < sizeof(br_names) / sizeof(br_names[0]); i++)
		if (br_names[i].err == brerr)
			return br_names[i].name;
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

/* TLS 1.2, ECDHE, AEAD: nothing else is offered. */
static const uint16_t suites[] = {
    BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    BR_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    BR_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    BR_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    BR_TLS_ECDHE_ECDSA_WITH_AES_128_CCM,
    BR_TLS_ECDHE_ECDSA_WITH_AES_256_CCM,
};

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
			err_set(e, "http.connect", "recv: %s", strerror(errno));
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
	time_t now;
	int r;

	if (tls_anchors_load(e) < 0)
		return -1;
	t->fd = fd;
	t->dead = 0;
	br_ssl_client_init_full(&t->sc, &t->xc, ta_list, ta_num);
	br_ssl_engine_set_versions(eng, BR_TLS12, BR_TLS12);
	br_ssl_engine_set_suites(eng, suites, sizeof(suites) / sizeof(suites[0]));
	/* No SHA-1 or MD5 anywhere: not in certificate signatures (the X.509
	 * engine cannot verify them, so such chains fail) and not offered for
	 * the key-exchange signature. TLS 1.2's PRF needs neither. */
	br_ssl_engine_set_hash(eng, br_md5_ID, NULL);
	br_ssl_engine_set_hash(eng, br_sha1_ID, NULL);
	br_x509_minimal_set_hash(&t->xc, br_md5_ID, NULL);
	br_x509_minimal_set_hash(&t->xc, br_sha1_ID, NULL);
	br_x509_minimal_set_minrsa(&t->xc, 256);
	now = tls_now ? tls_now : time(NULL);
	t->xw.days = (uint32_t)(now / 86400 + 719528);
	t->xw.seconds = (uint32_t)(now % 86400);
	br_x509_minimal_set_time(&t->xc, t->xw.days, t->xw.seconds);
	t->xw.vtable = &xw_vtable;
	t->xw.inner = &t->xc;
	br_ssl_engine_set_x509(eng, &t->xw.vtable);
	br_ssl_engine_set_buffer(eng, t->iobuf, sizeof(t->iobuf), 1);
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
tls_read(struct tls_conn *t, void *buf, size_t len, const struct tls_timing *tm, struct err *e)
{
	br_ssl_engine_context *eng = &t->sc.eng;
	unsigned char *p;
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
	p = br_ssl_engine_recvapp_buf(eng, &n);
	if (n > len)
		n = len;
	memcpy(buf, p, n);
	br_ssl_engine_recvapp_ack(eng, n);
	return (long)n;
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

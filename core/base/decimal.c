/*
 * Decimal text to and from doubles (see decimal.h) with 64- and 128-bit
 * integers: a power of ten is a 128-bit mantissa and a binary exponent,
 * built by squaring 10 (exact while 5^n fits in 128 bits) or 0.1.
 */
#include "base/decimal.h"

#include <string.h>

typedef unsigned __int128 u128;

/* m * 2^e with bit 127 of m set */
struct fp {
	u128 m;
	int e;
};

/* The top 128 bits of a.m * b.m, normalised (truncated below). */
static struct fp
fp_mul(struct fp a, struct fp b)
{
	uint64_t ah = (uint64_t)(a.m >> 64), al = (uint64_t)a.m;
	uint64_t bh = (uint64_t)(b.m >> 64), bl = (uint64_t)b.m;
	u128 hl = (u128)ah * bl, lh = (u128)al * bh;
	u128 mid = (((u128)al * bl) >> 64) + (uint64_t)hl + (uint64_t)lh;
	struct fp r;

	r.m = (u128)ah * bh + (hl >> 64) + (lh >> 64) + (mid >> 64);
	r.e = a.e + b.e + 128;
	if (!(r.m >> 127)) {
		r.m = r.m << 1 | (uint64_t)mid >> 63;
		r.e--;
	}
	return r;
}

static struct fp
fp_pow10(int n)
{
	struct fp r = {(u128)1 << 127, -127}, b = {(u128)10 << 124, -124};

	if (n < 0) {
		/* 0.1, rounded to 128 bits */
		b.m = (u128)0xCCCCCCCCCCCCCCCCu << 64 | 0xCCCCCCCCCCCCCCCDu;
		b.e = -131;
		n = -n;
	}
	for (; n > 0; n >>= 1) {
		if (n & 1)
			r = fp_mul(r, b);
		if (n > 1)
			b = fp_mul(b, b);
	}
	return r;
}

static struct fp
fp_of(u128 m, int e2)
{
	uint64_t hi = (uint64_t)(m >> 64);
	int s = hi ? __builtin_clzll(hi) : 64 + __builtin_clzll((uint64_t)m);
	struct fp x = {m << s, e2 - s};

	return x;
}

/* m / 5 when 5 divides m, else 0 (32-bit long division: no libgcc) */
static u128
div5(u128 m)
{
	u128 q = 0;
	uint64_t r = 0;
	int i;

	for (i = 3; i >= 0; i--) {
		r = r << 32 | (uint32_t)(m >> (32 * i));
		q |= (u128)(r / 5) << (32 * i);
		r %= 5;
	}
	return r ? 0 : q;
}

/* The double nearest m * 10^e10 (m > 0); sticky: the true mantissa is a
 * little above m. Returns its bits (no sign), or infinity's. */
static uint64_t
to_bits(u128 m, int e10, int sticky)
{
	const uint64_t inf = (uint64_t)0x7FF << 52;
	struct fp x;
	uint64_t mant;
	u128 rem, half, q;
	int e2 = 0, sh, E;

	if (e10 > 310)
		return inf;
	if (e10 < -400)
		return 0;
	/* A dyadic value (a tie, perhaps) loses its fives so the product
	 * below is exact. */
	while (e10 < 0 && (q = div5(m)) != 0) {
		m = q;
		e10++;
		e2--;
	}
	x = fp_mul(fp_of(m, e2), fp_pow10(e10));
	E = x.e + 127; /* the value is in [2^E, 2^(E+1)) */
	if (E > 1023)
		return inf;
	sh = E < -1022 ? 75 - 1022 - E : 75;
	if (sh > 128)
		return 0; /* below half the smallest subnormal */
	if (sh == 128) {
		mant = 0;
		rem = x.m;
		half = (u128)1 << 127;
	} else {
		mant = (uint64_t)(x.m >> sh);
		rem = x.m & (((u128)1 << sh) - 1);
		half = (u128)1 << (sh - 1);
	}
	if (rem > half || (rem == half && ((mant & 1) || sticky)))
		mant++;
	if (E < -1022)
		return mant; /* a carry into bit 52 is the smallest normal */
	if (mant >> 53) {
		mant >>= 1;
		E++;
	}
	if (E > 1023)
		return inf;
	return (uint64_t)(E + 1023) << 52 | (mant & (((uint64_t)1 << 52) - 1));
}

static int
is_dig(char c)
{
	return c >= '0' && c <= '9';
}

/* One more digit of the mantissa (38 significant ones at most, trailing
 * zeros held back in *z so a tie stays small): past those it only scales
 * and marks the mantissa as a little above. */
static void
add_digit(int c, u128 *m, int *nd, int *z, long *e10, int *sticky)
{
	if (c == 0 && *m != 0 && *nd + *z < 38) {
		(*z)++;
	} else if (*nd + *z < 38) {
		for (; *z > 0; (*z)--, (*nd)++)
			*m *= 10;
		*m = *m * 10 + (uint64_t)c;
		if (*m)
			(*nd)++;
	} else {
		(*e10)++;
		if (c)
			*sticky = 1;
	}
}

int
dec_parse(const char *s, const char **end, double *out)
{
	const char *p = s, *q;
	u128 m = 0;
	uint64_t bits;
	int neg = 0, nd = 0, z = 0, sticky = 0, digits = 0, xneg = 0;
	long e10 = 0, x = 0;

	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	for (; is_dig(*p); p++, digits++)
		add_digit(*p - '0', &m, &nd, &z, &e10, &sticky);
	if (*p == '.' && (digits || is_dig(p[1])))
		for (p++; is_dig(*p); p++, digits++, e10--)
			add_digit(*p - '0', &m, &nd, &z, &e10, &sticky);
	if (digits == 0)
		return -1;
	q = p + 1;
	if ((*p == 'e' || *p == 'E') && (*q == '-' || *q == '+'))
		xneg = *q++ == '-';
	if ((*p == 'e' || *p == 'E') && is_dig(*q)) {
		for (p = q; is_dig(*p); p++)
			if (x < 100000)
				x = x * 10 + (*p - '0');
		e10 += xneg ? -x : x;
	}
	if (end != NULL)
		*end = p;
	e10 += z;
	if (e10 > 100000)
		e10 = 100000;
	if (e10 < -100000)
		e10 = -100000;
	bits = m == 0 ? 0 : to_bits(m, (int)e10, sticky);
	bits |= (uint64_t)neg << 63;
	memcpy(out, &bits, sizeof(*out));
	return (bits << 1) == (uint64_t)0x7FF << 53 ? 1 : 0;
}

static uint64_t
pow10_u64(int n)
{
	uint64_t r = 1;

	while (n-- > 0)
		r *= 10;
	return r;
}

/* The prec significant digits of mant * 2^be (mant > 0), rounded: *n in
 * [10^(prec-1), 10^prec), *k the power of ten of its first digit. */
static void
sig_digits(uint64_t mant, int be, int prec, uint64_t *n, int *k)
{
	uint64_t lo = pow10_u64(prec - 1), q;
	struct fp x = fp_of(mant, be), y;
	u128 rem, half;
	int i, sh;

	/* floor(log10(2) * floor(log2 v)): k or one below */
	*k = ((x.e + 127) * 78913) >> 18;
	for (i = 0; i < 4; i++) {
		y = fp_mul(x, fp_pow10(prec - 1 - *k));
		sh = -y.e;
		q = (uint64_t)(y.m >> sh);
		rem = y.m & (((u128)1 << sh) - 1);
		half = (u128)1 << (sh - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		if (q >= lo * 10)
			(*k)++;
		else if (q < lo)
			(*k)--;
		else
			break;
	}
	*n = q;
}

static size_t
put_u64(char *p, uint64_t v)
{
	char t[20];
	size_t n = 0, i;

	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (i = 0; i < n; i++)
		p[i] = t[n - 1 - i];
	return n;
}

/* %g's layout of the digits d (len of them, no trailing zero) whose first
 * has the power of ten k, at p; returns the length. */
static size_t
layout(char *p, const char *d, int len, int k, int prec)
{
	size_t o = 0;
	int i;

	if (k >= -4 && k < prec) {
		if (k < 0) {
			p[o++] = '0';
			p[o++] = '.';
			for (i = -1; i > k; i--)
				p[o++] = '0';
		}
		for (i = 0; i < len || i <= k; i++) {
			if (i == k + 1 && k >= 0)
				p[o++] = '.';
			p[o++] = i < len ? d[i] : '0';
		}
		return o;
	}
	p[o++] = d[0];
	if (len > 1)
		p[o++] = '.';
	for (i = 1; i < len; i++)
		p[o++] = d[i];
	p[o++] = 'e';
	p[o++] = k < 0 ? '-' : '+';
	if (k > -10 && k < 10)
		p[o++] = '0';
	return o + put_u64(p + o, (uint64_t)(k < 0 ? -k : k));
}

size_t
dec_format(double v, char *buf, size_t cap)
{
	char t[48], d[20];
	uint64_t bits, mant, n = 0;
	size_t o = 0;
	int be, k = 0, prec, len;

	memcpy(&bits, &v, sizeof(bits));
	if (bits >> 63)
		t[o++] = '-';
	be = (int)(bits >> 52 & 0x7FF);
	mant = bits & (((uint64_t)1 << 52) - 1);
	if (be != 0)
		mant |= (uint64_t)1 << 52;
	be = (be != 0 ? be : 1) - 1075; /* |v| = mant * 2^be */
	if (mant == 0) {
		t[o++] = '0';
	} else if (be >= 0 && be <= 1 && (mant << be) <= (uint64_t)1 << 53) {
		o += put_u64(t + o, mant << be);
	} else if (be < 0 && be > -53 && (mant & (((uint64_t)1 << -be) - 1)) == 0) {
		o += put_u64(t + o, mant >> -be);
	} else {
		for (prec = 15; prec <= 17; prec++) {
			sig_digits(mant, be, prec, &n, &k);
			if (to_bits(n, k - prec + 1, 0) == (bits & ~((uint64_t)1 << 63)))
				break;
		}
		if (prec > 17)
			prec = 17;
		len = (int)put_u64(d, n);
		while (len > 1 && d[len - 1] == '0')
			len--;
		o += layout(t + o, d, len, k, prec);
	}
	if (cap == 0)
		return 0;
	if (o >= cap)
		o = cap - 1;
	memcpy(buf, t, o);
	buf[o] = '\0';
	return o;
}

size_t
dec_fixed(uint64_t v, int scale, int trim, char *buf, size_t cap)
{
	char t[48];
	uint64_t p = pow10_u64(scale), f = v % p;
	size_t o = put_u64(t, v / p);
	int i;

	if (scale > 0) {
		t[o++] = '.';
		for (i = scale - 1; i >= 0; i--)
			t[o++] = (char)('0' + f / pow10_u64(i) % 10);
		while (trim && t[o - 1] == '0')
			o--;
		if (t[o - 1] == '.')
			o -= trim != 0;
	}
	if (cap == 0)
		return 0;
	if (o >= cap)
		o = cap - 1;
	memcpy(buf, t, o);
	buf[o] = '\0';
	return o;
}

#ifndef ABX_DECIMAL_H
#define ABX_DECIMAL_H
/*
 * Decimal numbers to and from doubles with integer arithmetic only, so the
 * binary links neither strtod nor a floating-point printf of its own.
 *
 * A value is a decimal mantissa and a power of ten. The conversions carry
 * the power of ten as a 128-bit mantissa (exact up to 10^55), so a number
 * of up to 19 significant digits reads as the nearest double (ties to
 * even); further digits only break ties (decimal places past the 19th are
 * not otherwise weighed). Doubles are written back with the fewest of
 * 15/16/17 significant digits that read back to the same double.
 */
#include <stddef.h>
#include <stdint.h>

/* Reads [+-]digits[.digits][(e|E)[+-]digits] from s (a leading or trailing
 * '.' is allowed when digits stand on its other side). *end, when not NULL,
 * is where the reading stopped. Returns 0 with *out set, 1 when the value
 * is beyond double's range (*out is then +-HUGE), -1 when s does not start
 * with a number (*out untouched). Below the smallest double reads as +-0. */
int dec_parse(const char *s, const char **end, double *out);

/* v (finite) as a number JSON and dec_parse read back to the same double,
 * the way %.Ng prints it for the smallest N in 15..17 that does; integral
 * values up to 2^53 as integers, -0.0 as "-0". Returns the length written
 * (cap >= 32 holds every value). */
size_t dec_format(double v, char *buf, size_t cap);

/* v / 10^scale with scale decimal places ("%.*f" of an integer count of
 * small units); trim drops trailing zeros of the fraction and a bare '.'.
 * Returns the length written (cap >= 48 holds every value). */
size_t dec_fixed(uint64_t v, int scale, int trim, char *buf, size_t cap);

#endif

#ifndef ABX_CLOCK_H
#define ABX_CLOCK_H
/*
 * The monotonic clock (CLOCK_MONOTONIC): the one reader for deadlines,
 * timeouts, waits and durations. It never goes back and does not follow
 * changes of the wall clock.
 */
#include <stdint.h>

/* Milliseconds on the monotonic clock. */
int64_t clock_ms(void);

/* Microseconds on the monotonic clock. */
int64_t clock_us(void);

#endif

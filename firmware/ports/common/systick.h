/* SysTick on the core clock, extended to 64 bits by its wrap interrupt.
 * Under QEMU -icount shift=3 the count is 1.344 per executed instruction. */
#ifndef EDGEDP_SYSTICK_H
#define EDGEDP_SYSTICK_H
#include <stdint.h>

void edp_systick_start(void);
uint64_t edp_systick_now(void);
/* A port's ticks (edgedp/port.h): the low 32 bits of edp_systick_now() less
 * its constant RELOAD, in one call without 64-bit arithmetic, since half its
 * cost falls inside the measured DP step. */
uint32_t edp_systick_ticks(void *ctx);

#endif

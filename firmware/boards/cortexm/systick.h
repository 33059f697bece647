/* SysTick on the core clock, extended to 64 bits by its wrap interrupt.
 * Under QEMU -icount shift=3 the count is 1.344 per executed instruction. */
#ifndef EDGEDP_SYSTICK_H
#define EDGEDP_SYSTICK_H
#include <stdint.h>

void edp_systick_start(void);
uint64_t edp_systick_now(void);
/* The low 32 bits of edp_systick_now, as a port's ticks (edgedp/port.h): one
 * call and no 64-bit arithmetic, since its cost falls inside the measured DP
 * step. */
uint32_t edp_systick_ticks(void *ctx);

#endif

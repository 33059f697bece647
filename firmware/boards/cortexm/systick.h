/* SysTick on the core clock, extended to 64 bits by its wrap interrupt.
 * Under QEMU -icount shift=3 the count is 1.344 per executed instruction. */
#ifndef EDGEDP_SYSTICK_H
#define EDGEDP_SYSTICK_H
#include <stdint.h>

void edp_systick_start(void);
uint64_t edp_systick_now(void);

#endif

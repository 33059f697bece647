/* The Cortex-M NVIC's per-line enable and pending words (ARMv7-M ARM B3.4):
 * one bit per external interrupt line, 32 lines a word. Header-only: each call
 * is one store. */
#ifndef EDGEDP_NVIC_H
#define EDGEDP_NVIC_H
#include <stdint.h>

#define EDP_NVIC_ISER ((volatile uint32_t *)0xE000E100u)  /* set-enable */
#define EDP_NVIC_ICER ((volatile uint32_t *)0xE000E180u)  /* clear-enable */
#define EDP_NVIC_ICPR ((volatile uint32_t *)0xE000E280u)  /* clear-pending */

static inline void edp_nvic_enable(uint32_t irq) { EDP_NVIC_ISER[irq >> 5] = 1u << (irq & 31u); }
static inline void edp_nvic_disable(uint32_t irq) { EDP_NVIC_ICER[irq >> 5] = 1u << (irq & 31u); }
static inline void edp_nvic_unpend(uint32_t irq) { EDP_NVIC_ICPR[irq >> 5] = 1u << (irq & 31u); }

#endif

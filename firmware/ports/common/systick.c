#include "systick.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define RELOAD 0x00FFFFFFu

static volatile uint32_t wraps;

void SysTick_Handler(void)
{
    wraps++;
}

void edp_systick_start(void)
{
    SYST_RVR = RELOAD;
    SYST_CVR = 0;
    SYST_CSR = 7u; /* ENABLE | TICKINT | CLKSOURCE = core clock */
}

uint64_t edp_systick_now(void)
{
    uint32_t w, v;
    do {
        w = wraps;
        v = SYST_CVR;
    } while (w != wraps);
    return ((uint64_t)w << 24) + (RELOAD - v);
}

uint32_t edp_systick_ticks(void *ctx)
{
    uint32_t w, v;
    (void)ctx;
    do {
        w = wraps;
        v = SYST_CVR;
    } while (w != wraps);
    return (w << 24) - v;  /* edp_systick_now() - RELOAD, mod 2^32: a constant offset, one instruction */
}

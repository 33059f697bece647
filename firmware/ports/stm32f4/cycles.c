/* Cycle counter for the measured ticks of the DP step: DWT CYCCNT when it
 * counts, otherwise the caller falls back to SysTick (common/systick.c).
 * QEMU has no DWT (CYCCNT reads 0); Renode's reads 0 unless its platform adds
 * a DWT peripheral. Both are caught by checking that the count moves. */
#include "stm32f4.h"

#include "edgedp/port.h"

int edp_stm32_cycles_init(volatile uint32_t *demcr, edp_dwt_regs_t *dwt)
{
    volatile uint32_t i;
    uint32_t c0, c1;
    *demcr |= DEMCR_TRCENA;
    if (EDP_RD(dwt->CTRL) & DWT_CTRL_NOCYCCNT) return EDP_TICK_SYSTICK;
    dwt->CYCCNT = 0;
    dwt->CTRL |= DWT_CTRL_CYCCNTENA;
    c0 = EDP_RD(dwt->CYCCNT);
    for (i = 0; i < 16u; i++) {
    }
    c1 = EDP_RD(dwt->CYCCNT);
    if (c1 != c0) return EDP_TICK_DWT;
    dwt->CTRL &= ~DWT_CTRL_CYCCNTENA;
    return EDP_TICK_SYSTICK;
}

/* 168 MHz system clock from an 8 MHz HSE, with a bounded fallback to HSI 16 MHz.
 * Sequence after RM0090 §6.2/§3.5.1: raise flash latency before the clock,
 * set prescalers before the switch, every ready bit polled a bounded number
 * of times. Under QEMU (RCC absent: reads 0) HSE never becomes ready and the
 * function returns after one spin budget with the HSI figures. */
#include "stm32f4.h"

#include "edgedp/error.h"

#define PLL_M 8u
#define PLL_N 336u
#define PLL_P 2u
#define PLL_Q 7u
#define FLASH_WS 5u

static int wait_set(volatile uint32_t *reg, uint32_t mask, uint32_t want, uint32_t spin)
{
    while ((EDP_RD(*reg) & mask) != want)
        if (!--spin) return 0;
    return 1;
}

/* Back to HSI with all prescalers 1, PLL and HSE off (if the switch succeeds). */
static void to_hsi(edp_rcc_regs_t *rcc, uint32_t spin)
{
    if ((EDP_RD(rcc->CFGR) & RCC_CFGR_SWS_MASK) != RCC_CFGR_SWS_HSI) {
        rcc->CR |= RCC_CR_HSION;
        wait_set(&rcc->CR, RCC_CR_HSIRDY, RCC_CR_HSIRDY, spin);
        /* Switch first, prescalers after: APB1 must not see 168 MHz /1. */
        rcc->CFGR = (rcc->CFGR & ~RCC_CFGR_SW_MASK) | RCC_CFGR_SW_HSI;
        if (!wait_set(&rcc->CFGR, RCC_CFGR_SWS_MASK, RCC_CFGR_SWS_HSI, spin))
            return;  /* still on the old clock: leave it as it is; report() tells */
    }
    rcc->CFGR = RCC_CFGR_SW_HSI;
    rcc->CR &= ~(RCC_CR_PLLON | RCC_CR_HSEON);
}

static void report(edp_rcc_regs_t *rcc, edp_stm32_clocks_t *clk)
{
    if ((EDP_RD(rcc->CFGR) & RCC_CFGR_SWS_MASK) == RCC_CFGR_SWS_PLL) {
        clk->sysclk_hz = EDP_STM32_PLL_HZ;
        clk->pclk1_hz = EDP_STM32_PLL_HZ / 4u;
        clk->pclk2_hz = EDP_STM32_PLL_HZ / 2u;
        clk->pll = 1;
    } else {
        clk->sysclk_hz = clk->pclk1_hz = clk->pclk2_hz = EDP_STM32_HSI_HZ;
        clk->pll = 0;
    }
}

static int pll_from_hse(edp_rcc_regs_t *rcc, edp_flash_regs_t *flash, edp_pwr_regs_t *pwr,
                        int hse_bypass, uint32_t spin)
{
    uint32_t acr;
    /* The PLL cannot be reconfigured while it runs (e.g. left on by a bootloader). */
    if (rcc->CR & RCC_CR_PLLON) {
        to_hsi(rcc, spin);
        if (!wait_set(&rcc->CR, RCC_CR_PLLRDY, 0, spin)) return 0;
    }
    rcc->APB1ENR |= RCC_APB1ENR_PWREN;
    (void)rcc->APB1ENR;          /* RM0090 errata 2.1.13: delay after enabling a clock */
    pwr->CR |= PWR_CR_VOS;       /* scale 1 (reset value on F405/407), required above 144 MHz */

    if (hse_bypass) rcc->CR |= RCC_CR_HSEBYP;   /* only writable while HSE is off */
    else rcc->CR &= ~RCC_CR_HSEBYP;
    rcc->CR |= RCC_CR_HSEON;
    if (!wait_set(&rcc->CR, RCC_CR_HSERDY, RCC_CR_HSERDY, spin)) return 0;

    /* Every field is written; reserved bit 29 keeps its reset value 1 (the other reserved bits reset to 0). */
    rcc->PLLCFGR = RCC_PLLCFGR_RSVD_RESET | PLL_M | (PLL_N << 6) | (((PLL_P >> 1) - 1u) << 16) |
                   RCC_PLLCFGR_SRC_HSE | (PLL_Q << 24);
    rcc->CR |= RCC_CR_PLLON;
    if (!wait_set(&rcc->CR, RCC_CR_PLLRDY, RCC_CR_PLLRDY, spin)) return 0;

    /* Caches must be reset while disabled; then latency, prefetch, caches on. */
    acr = flash->ACR & ~(FLASH_ACR_ICEN | FLASH_ACR_DCEN);
    flash->ACR = acr;
    flash->ACR = acr | FLASH_ACR_ICRST | FLASH_ACR_DCRST;
    flash->ACR = FLASH_WS | FLASH_ACR_PRFTEN | FLASH_ACR_ICEN | FLASH_ACR_DCEN;
    if ((EDP_RD(flash->ACR) & FLASH_ACR_LATENCY_MASK) != FLASH_WS) return 0;

    rcc->CFGR = RCC_CFGR_PPRE1_DIV4 | RCC_CFGR_PPRE2_DIV2 | RCC_CFGR_SW_HSI;  /* AHB /1 */
    rcc->CFGR = RCC_CFGR_PPRE1_DIV4 | RCC_CFGR_PPRE2_DIV2 | RCC_CFGR_SW_PLL;
    return wait_set(&rcc->CFGR, RCC_CFGR_SWS_MASK, RCC_CFGR_SWS_PLL, spin);
}

int edp_stm32_clock_init(edp_rcc_regs_t *rcc, edp_flash_regs_t *flash, edp_pwr_regs_t *pwr,
                         int hse_bypass, uint32_t spin, edp_stm32_clocks_t *clk)
{
    if (!spin) spin = 1;
    if (!pll_from_hse(rcc, flash, pwr, hse_bypass, spin)) to_hsi(rcc, spin);
    report(rcc, clk);
    return clk->pll ? EDP_OK : EDP_STM32_CLOCK_FALLBACK;
}

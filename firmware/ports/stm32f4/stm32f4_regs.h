/* STM32F405/407 register blocks used by the stm32f4 port (RM0090 rev 19).
 *
 * Drivers take a pointer to a block, never a fixed address, so the host tests
 * (tests/native/test_stm32f4_drivers.c) can hand them a fake block in RAM.
 * Only board.c uses the EDP_STM32_* base addresses.
 *
 * Register reads the drivers poll or consume (status, data) go through
 * EDP_RD(). On the target it is a plain volatile read; a host test compiled
 * with -DEDP_STM32_REG_HOOK supplies edp_stm32_reg_read() to script values
 * (a ready bit that follows its enable, an RNG data register that changes). */
#ifndef EDGEDP_STM32F4_REGS_H
#define EDGEDP_STM32F4_REGS_H
#include <stddef.h>
#include <stdint.h>

#ifdef EDP_STM32_REG_HOOK
uint32_t edp_stm32_reg_read(const volatile uint32_t *reg);
#define EDP_RD(r) edp_stm32_reg_read(&(r))
#else
#define EDP_RD(r) (r)
#endif

/* ---- RCC (0x40023800) ---- */
typedef struct {
    volatile uint32_t CR;          /* 0x00 */
    volatile uint32_t PLLCFGR;     /* 0x04 */
    volatile uint32_t CFGR;        /* 0x08 */
    volatile uint32_t CIR;         /* 0x0C */
    volatile uint32_t AHB1RSTR;    /* 0x10 */
    volatile uint32_t AHB2RSTR;    /* 0x14 */
    volatile uint32_t AHB3RSTR;    /* 0x18 */
    uint32_t reserved0;            /* 0x1C */
    volatile uint32_t APB1RSTR;    /* 0x20 */
    volatile uint32_t APB2RSTR;    /* 0x24 */
    uint32_t reserved1[2];         /* 0x28 */
    volatile uint32_t AHB1ENR;     /* 0x30 */
    volatile uint32_t AHB2ENR;     /* 0x34 */
    volatile uint32_t AHB3ENR;     /* 0x38 */
    uint32_t reserved2;            /* 0x3C */
    volatile uint32_t APB1ENR;     /* 0x40 */
    volatile uint32_t APB2ENR;     /* 0x44 */
    uint32_t reserved3[2];         /* 0x48 */
    volatile uint32_t AHB1LPENR;   /* 0x50 */
    volatile uint32_t AHB2LPENR;   /* 0x54 */
    volatile uint32_t AHB3LPENR;   /* 0x58 */
    uint32_t reserved4;            /* 0x5C */
    volatile uint32_t APB1LPENR;   /* 0x60 */
    volatile uint32_t APB2LPENR;   /* 0x64 */
    uint32_t reserved5[2];         /* 0x68 */
    volatile uint32_t BDCR;        /* 0x70 */
    volatile uint32_t CSR;         /* 0x74 */
} edp_rcc_regs_t;

#define RCC_CR_HSION         (1u << 0)
#define RCC_CR_HSIRDY        (1u << 1)
#define RCC_CR_HSEON         (1u << 16)
#define RCC_CR_HSERDY        (1u << 17)
#define RCC_CR_HSEBYP        (1u << 18)
#define RCC_CR_PLLON         (1u << 24)
#define RCC_CR_PLLRDY        (1u << 25)
#define RCC_PLLCFGR_SRC_HSE  (1u << 22)
/* Reserved bit 29 of PLLCFGR resets to 1 (reset value 0x24003010); RM0090
 * §7.3.2: keep reserved bits at their reset value. */
#define RCC_PLLCFGR_RSVD_RESET (1u << 29)
#define RCC_CFGR_SW_MASK     (3u << 0)
#define RCC_CFGR_SW_HSI      (0u << 0)
#define RCC_CFGR_SW_HSE      (1u << 0)
#define RCC_CFGR_SW_PLL      (2u << 0)
#define RCC_CFGR_SWS_MASK    (3u << 2)
#define RCC_CFGR_SWS_HSI     (0u << 2)
#define RCC_CFGR_SWS_PLL     (2u << 2)
#define RCC_CFGR_PPRE1_DIV4  (5u << 10)
#define RCC_CFGR_PPRE2_DIV2  (4u << 13)
#define RCC_AHB1ENR_GPIOAEN  (1u << 0)
#define RCC_AHB1ENR_GPIODEN  (1u << 3)
#define RCC_AHB1ENR_BKPSRAMEN (1u << 18)
#define RCC_AHB2ENR_RNGEN    (1u << 6)
#define RCC_APB1ENR_USART2EN (1u << 17)
#define RCC_APB1ENR_USART3EN (1u << 18)
#define RCC_APB1ENR_PWREN    (1u << 28)
#define RCC_BDCR_LSEON       (1u << 0)
#define RCC_BDCR_LSERDY      (1u << 1)
#define RCC_BDCR_RTCSEL_MASK (3u << 8)
#define RCC_BDCR_RTCSEL_LSE  (1u << 8)
#define RCC_BDCR_RTCEN       (1u << 15)

/* ---- FLASH interface (0x40023C00) ---- */
typedef struct {
    volatile uint32_t ACR;       /* 0x00 */
    volatile uint32_t KEYR;      /* 0x04 */
    volatile uint32_t OPTKEYR;   /* 0x08 */
    volatile uint32_t SR;        /* 0x0C */
    volatile uint32_t CR;        /* 0x10 */
} edp_flash_regs_t;

#define FLASH_ACR_LATENCY_MASK 7u
#define FLASH_ACR_PRFTEN     (1u << 8)
#define FLASH_ACR_ICEN       (1u << 9)
#define FLASH_ACR_DCEN       (1u << 10)
#define FLASH_ACR_ICRST      (1u << 11)
#define FLASH_ACR_DCRST      (1u << 12)
#define FLASH_KEY1           0x45670123u
#define FLASH_KEY2           0xCDEF89ABu
#define FLASH_SR_EOP         (1u << 0)
#define FLASH_SR_OPERR       (1u << 1)
#define FLASH_SR_WRPERR      (1u << 4)
#define FLASH_SR_PGAERR      (1u << 5)
#define FLASH_SR_PGPERR      (1u << 6)
#define FLASH_SR_PGSERR      (1u << 7)
#define FLASH_SR_ERRORS      (FLASH_SR_OPERR | FLASH_SR_WRPERR | FLASH_SR_PGAERR | FLASH_SR_PGPERR | FLASH_SR_PGSERR)
#define FLASH_SR_BSY         (1u << 16)
#define FLASH_CR_PG          (1u << 0)
#define FLASH_CR_SER         (1u << 1)
#define FLASH_CR_SNB_SHIFT   3u
#define FLASH_CR_SNB_MASK    (0xFu << 3)
#define FLASH_CR_PSIZE_X32   (2u << 8)
#define FLASH_CR_STRT        (1u << 16)
#define FLASH_CR_LOCK        (1u << 31)

/* ---- PWR (0x40007000) ---- */
typedef struct {
    volatile uint32_t CR;
    volatile uint32_t CSR;
} edp_pwr_regs_t;

#define PWR_CR_DBP           (1u << 8)
#define PWR_CR_VOS           (1u << 14)  /* F405/407: 1 = scale 1 (reset value; needed for 168 MHz) */
#define PWR_CSR_BRR          (1u << 3)
#define PWR_CSR_BRE          (1u << 9)

/* ---- GPIO (A 0x40020000, D 0x40020C00) ---- */
typedef struct {
    volatile uint32_t MODER, OTYPER, OSPEEDR, PUPDR, IDR, ODR, BSRR, LCKR;
    volatile uint32_t AFR[2];
} edp_gpio_regs_t;

/* ---- USART (2: 0x40004400, 3: 0x40004800) ---- */
typedef struct {
    volatile uint32_t SR, DR, BRR, CR1, CR2, CR3, GTPR;
} edp_usart_regs_t;

#define USART_SR_PE          (1u << 0)
#define USART_SR_FE          (1u << 1)
#define USART_SR_NF          (1u << 2)
#define USART_SR_ORE         (1u << 3)
#define USART_SR_RXNE        (1u << 5)
#define USART_SR_TXE         (1u << 7)
#define USART_CR1_RE         (1u << 2)
#define USART_CR1_RXNEIE     (1u << 5)
#define USART_CR1_TE         (1u << 3)
#define USART_CR1_UE         (1u << 13)

/* ---- RNG (0x50060800) ---- */
typedef struct {
    volatile uint32_t CR, SR, DR;
} edp_rng_regs_t;

#define RNG_CR_RNGEN         (1u << 2)
#define RNG_SR_DRDY          (1u << 0)
#define RNG_SR_CECS          (1u << 1)
#define RNG_SR_SECS          (1u << 2)
#define RNG_SR_CEIS          (1u << 5)
#define RNG_SR_SEIS          (1u << 6)

/* ---- RTC and backup registers (0x40002800) ---- */
typedef struct {
    volatile uint32_t TR;        /* 0x00 */
    volatile uint32_t DR;        /* 0x04 */
    volatile uint32_t CR;        /* 0x08 */
    volatile uint32_t ISR;       /* 0x0C */
    volatile uint32_t PRER;      /* 0x10 */
    volatile uint32_t WUTR;      /* 0x14 */
    volatile uint32_t CALIBR;    /* 0x18 */
    volatile uint32_t ALRMAR;    /* 0x1C */
    volatile uint32_t ALRMBR;    /* 0x20 */
    volatile uint32_t WPR;       /* 0x24 */
    volatile uint32_t SSR;       /* 0x28 */
    volatile uint32_t SHIFTR;    /* 0x2C */
    volatile uint32_t TSTR;      /* 0x30 */
    volatile uint32_t TSDR;      /* 0x34 */
    volatile uint32_t TSSSR;     /* 0x38 */
    volatile uint32_t CALR;      /* 0x3C */
    volatile uint32_t TAFCR;     /* 0x40 */
    volatile uint32_t ALRMASSR;  /* 0x44 */
    volatile uint32_t ALRMBSSR;  /* 0x48 */
    uint32_t reserved;           /* 0x4C */
    volatile uint32_t BKP[20];   /* 0x50: BKP0R..BKP19R (VBAT domain, DBP-protected only) */
} edp_rtc_regs_t;

#define RTC_CR_FMT           (1u << 6)
#define RTC_CR_BYPSHAD       (1u << 5)
#define RTC_ISR_INITS        (1u << 4)
#define RTC_ISR_RSF          (1u << 5)
#define RTC_ISR_INITF        (1u << 6)
#define RTC_ISR_INIT         (1u << 7)
#define RTC_PRER_LSE         ((127u << 16) | 255u)  /* 32768 Hz / 128 / 256 = 1 Hz */

/* ---- Cortex-M4 debug: DEMCR (0xE000EDFC) and DWT (0xE0001000) ---- */
typedef struct {
    volatile uint32_t CTRL, CYCCNT;
} edp_dwt_regs_t;

#define DEMCR_TRCENA         (1u << 24)
#define DWT_CTRL_CYCCNTENA   (1u << 0)
#define DWT_CTRL_NOCYCCNT    (1u << 25)

/* ---- IWDG (0x40003000) ---- */
typedef struct {
    volatile uint32_t KR, PR, RLR, SR;
} edp_iwdg_regs_t;

/* Layout checks (C99: a negative array size fails the build). */
#define EDP_STM32_OFFSET_CHECK(name, type, field, off) \
    typedef char edp_stm32_check_##name[offsetof(type, field) == (off) ? 1 : -1]
EDP_STM32_OFFSET_CHECK(rcc_ahb1enr, edp_rcc_regs_t, AHB1ENR, 0x30);
EDP_STM32_OFFSET_CHECK(rcc_apb1enr, edp_rcc_regs_t, APB1ENR, 0x40);
EDP_STM32_OFFSET_CHECK(rcc_bdcr, edp_rcc_regs_t, BDCR, 0x70);
EDP_STM32_OFFSET_CHECK(gpio_afr, edp_gpio_regs_t, AFR, 0x20);
EDP_STM32_OFFSET_CHECK(usart_cr1, edp_usart_regs_t, CR1, 0x0C);
EDP_STM32_OFFSET_CHECK(rtc_wpr, edp_rtc_regs_t, WPR, 0x24);
EDP_STM32_OFFSET_CHECK(rtc_bkp, edp_rtc_regs_t, BKP, 0x50);
EDP_STM32_OFFSET_CHECK(flash_cr, edp_flash_regs_t, CR, 0x10);

/* ---- addresses (board.c only) ---- */
#define EDP_STM32_RCC      ((edp_rcc_regs_t *)0x40023800u)
#define EDP_STM32_FLASH    ((edp_flash_regs_t *)0x40023C00u)
#define EDP_STM32_PWR      ((edp_pwr_regs_t *)0x40007000u)
#define EDP_STM32_GPIOA    ((edp_gpio_regs_t *)0x40020000u)
#define EDP_STM32_GPIOD    ((edp_gpio_regs_t *)0x40020C00u)
#define EDP_STM32_USART2   ((edp_usart_regs_t *)0x40004400u)
#define EDP_STM32_USART3   ((edp_usart_regs_t *)0x40004800u)
#define EDP_STM32_RNG      ((edp_rng_regs_t *)0x50060800u)
#define EDP_STM32_RTC      ((edp_rtc_regs_t *)0x40002800u)
#define EDP_STM32_BKPSRAM  ((volatile uint8_t *)0x40024000u)
#define EDP_STM32_DEMCR    ((volatile uint32_t *)0xE000EDFCu)
#define EDP_STM32_DWT      ((edp_dwt_regs_t *)0xE0001000u)
#define EDP_STM32_IWDG     ((edp_iwdg_regs_t *)0x40003000u)
#define EDP_STM32_SCB_VTOR ((volatile uint32_t *)0xE000ED08u)   /* vector table offset */

#endif

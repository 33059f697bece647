/* STM32F405/407 board port: the production image, and its test image.
 *
 *  - clock: 168 MHz PLL from the 8 MHz HSE, or HSI 16 MHz if that fails
 *    (the tick rate and the UART baud divisor follow what the RCC reports);
 *  - console: USART2 (PA2/PA3) or USART3 (PD8/PD9) per EDP_CONSOLE_USART, 115200 8N1;
 *    TX polled, RX by the USART's RXNE interrupt into a 4 KiB ring
 *    (EDP_STM32_RX_RING, stm32f4.h) that edp_board_uart_read drains, so requests
 *    may be pipelined; a byte lost to an overrun, a line error or a full ring
 *    reaches the core as an invalid frame (an EDP_ERR_CRC answer), not as a
 *    different frame (except an overrun the interrupt cannot see: stm32f4.h,
 *    edp_stm32_rx_read);
 *  - entropy: the hardware RNG only (health-checked, fails closed); the core
 *    reseeds from it every EDP_RESEED_BLOCKS ChaCha12 blocks;
 *  - day index and SET_TIME: the LSE-clocked RTC calendar (UTC);
 *  - store: backup SRAM on VBAT, sequence shadow in RTC_BKP0R/BKP1R;
 *  - flash high-water log: sectors 9 and 10 (flash.c, reserved by stm32f4.ld);
 *    the watchdog is refreshed before each sector erase (1-2 s), which waits
 *    in SRAM, as do the console's RX interrupt and the vector table (VTOR), so
 *    bytes keep arriving during the erase;
 *  - admin nonce key: the hardware RNG (port->auth_entropy = NULL);
 *  - device key: 32 bytes at 0x080E0000 (flash sector 11, section .edp_key
 *    of stm32f4.ld); all 0xFF (erased) or all 0x00 = not provisioned;
 *  - ticks: DWT CYCCNT, or SysTick where there is no working DWT;
 *  - release window: a poll of those ticks (core cycles) up to insns x
 *    EDP_STM32_CYCLES_PER_INSN after the frame's end, plus what the RX
 *    interrupt may take meanwhile (edp_stm32_window_cycles, docs/privacy.md
 *    §6). The bound of 4 cycles per instruction is an assumption (flash wait
 *    states, ART cache), not measured here; the poll leaves a jitter of one
 *    loop pass (a few cycles) and, if a byte arrives at the release instant,
 *    the interrupt's length (at most EDP_STM32_RX_ISR_CYCLES);
 *  - watchdog: IWDG (~4 s) refreshed by the frame loop (EDP_STM32_WATCHDOG);
 *  - dead stack (with the RX interrupt's frames): zeroed (stackwipe.h)
 *    by the first edp_board_uart_read after anything was sent.
 *
 * Under QEMU netduinoplus2 (qemu:stm32f4: no RCC, PWR, RTC, RNG, DWT, backup
 * SRAM) this boots in bounded time and reports entropy, clock and store as
 * failed: every external query is refused.
 *
 * The test image (EDP_TEST_BUILD=1, build/stm32f4-test: INFO and the banner say
 * build=test) is the same port with the test builds' public secrets, for the
 * host harness (edgedp verify/bench --target renode): the DRBG seed is the
 * documented test seed (test_keys.h), the device key the public test key
 * (.edp_key is ignored), the admin nonce key comes from the hardware RNG, and
 * the core adds the test commands, reports ticks and answers at once (no
 * release deadline, options.h). Anyone can sign its admin frames: it is for
 * emulators and bench boards, never for a device whose budget matters. */
#include <string.h>

#include "board.h"
#include "edgedp/error.h"
#include "stm32f4.h"
#include "nvic.h"
#include "stackwipe.h"
#include "systick.h"
#include "vectors.h"

#if EDP_TEST_BUILD
#include "test_keys.h"
#endif

#if EDP_CONSOLE_USART == 2
#define CONSOLE EDP_STM32_USART2
#define CONSOLE_IRQ 38u   /* RM0090 table 61: USART2 global interrupt */
#define CONSOLE_HANDLER USART2_IRQHandler
#else
#define CONSOLE EDP_STM32_USART3
#define CONSOLE_IRQ 39u   /* USART3 global interrupt */
#define CONSOLE_HANDLER USART3_IRQHandler
#endif

/* Defined by stm32f4.ld: the 32-byte key in its own flash sector. Only the
 * linker knows its contents, so the compiler cannot fold the erased value. */
extern const uint8_t edp_stm32_device_key[32];
/* Defined by stm32f4.ld: the first word of the flash log's sector 9. */
extern uint32_t edp_stm32_flog[];

static edp_stm32_rx_t rx;   /* the console's receive ring, filled by CONSOLE_HANDLER */
static edp_stm32_bkd_t bkd;
static edp_stm32_clocks_t clocks;
static int tick_kind;  /* EDP_TICK_DWT, or EDP_TICK_SYSTICK where there is no working DWT */
static edp_stm32_flash_t flog_driver;
static edp_flash_t flog_flash;

static int rng_entropy(void *ctx, uint8_t key[32])
{
    (void)ctx;
    return edp_stm32_rng_fill(EDP_STM32_RNG, key, 32, EDP_STM32_SPIN_RNG);
}

/* Production: the hardware RNG. Test image: the documented test seed, so that
 * its noise is the reference's. */
static int entropy(void *ctx, uint8_t key[32])
{
#if EDP_TEST_BUILD
    (void)ctx;
    memcpy(key, edp_test_seed, 32);
    return EDP_OK;
#else
    return rng_entropy(ctx, key);
#endif
}

static uint32_t ticks(void *ctx)
{
    (void)ctx;
    return tick_kind == EDP_TICK_DWT ? EDP_STM32_DWT->CYCCNT : edp_systick_ticks(ctx);
}

static void tick_unit(void *ctx, uint32_t *hz, uint8_t *kind)
{
    (void)ctx;
    *hz = clocks.sysclk_hz;
    *kind = (uint8_t)tick_kind;
}

static int day(void *ctx, uint32_t *d)
{
    (void)ctx;
    return edp_stm32_rtc_day(&bkd, d, EDP_STM32_SPIN_RTC);
}

static int seconds(void *ctx, uint64_t *s)
{
    (void)ctx;
    return edp_stm32_rtc_seconds(&bkd, s, EDP_STM32_SPIN_RTC);
}

static int set_time(void *ctx, uint64_t secs)
{
    (void)ctx;
    return edp_stm32_rtc_set(&bkd, secs, EDP_STM32_SPIN_RTC, EDP_STM32_SPIN_LSE);
}

static int store_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    (void)ctx;
    return edp_stm32_store_read(&bkd, off, buf, n);
}

static int store_write(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    (void)ctx;
    return edp_stm32_store_write(&bkd, off, buf, n);
}

static int device_key(void *ctx, const uint8_t **key)
{
#if EDP_TEST_BUILD
    (void)ctx;
    *key = edp_test_device_key;
    return EDP_OK;
#else
    const volatile uint8_t *k = edp_stm32_device_key;
    uint32_t i, all = 0xFFu, any = 0;
    (void)ctx;
    for (i = 0; i < 32; i++) {
        all &= k[i];
        any |= k[i];
    }
    if (all == 0xFFu || any == 0) return EDP_ERR_AUTH;
    *key = edp_stm32_device_key;
    return EDP_OK;
#endif
}

/* The console's vector (common/startup.c names it weakly); in SRAM, as is
 * edp_stm32_uart_irq, so it runs while a flash sector erases (flash.c). */
void CONSOLE_HANDLER(void);
EDP_STM32_RAMFUNC void CONSOLE_HANDLER(void)
{
    edp_stm32_uart_irq(CONSOLE, &rx);
}

static void uart_write(void *ctx, const uint8_t *buf, size_t n)
{
    (void)ctx;
    edp_cortexm_sent();
    edp_stm32_uart_write(CONSOLE, buf, n, EDP_STM32_SPIN_TX);
}

/* The vector table in SRAM (common/vectors.h's edp_vectors, copied): an
 * exception entry reads its vector through VTOR, and a read from flash stalls
 * while a sector erases. VTOR needs the table aligned to its size rounded up
 * to a power of two (98 words: 512 bytes). */
static void (*vectors_ram[EDP_VECTOR_COUNT])(void) __attribute__((aligned(512)));
_Static_assert(sizeof vectors_ram <= 512, "VTOR alignment: the table outgrew 512 bytes");

static void vectors_to_ram(void)
{
    memcpy(vectors_ram, edp_vectors, sizeof vectors_ram);
    *EDP_STM32_SCB_VTOR = (uint32_t)vectors_ram;
    __asm__ volatile("dsb\n" "isb\n" ::: "memory");
}

static void console_init(edp_rcc_regs_t *rcc)
{
#if EDP_CONSOLE_USART == 2
    rcc->AHB1ENR |= RCC_AHB1ENR_GPIOAEN;
    rcc->APB1ENR |= RCC_APB1ENR_USART2EN;
    (void)rcc->APB1ENR;
    edp_stm32_gpio_af(EDP_STM32_GPIOA, 2, 7);   /* TX */
    edp_stm32_gpio_af(EDP_STM32_GPIOA, 3, 7);   /* RX */
#else
    rcc->AHB1ENR |= RCC_AHB1ENR_GPIODEN;
    rcc->APB1ENR |= RCC_APB1ENR_USART3EN;
    (void)rcc->APB1ENR;
    edp_stm32_gpio_af(EDP_STM32_GPIOD, 8, 7);   /* TX */
    edp_stm32_gpio_af(EDP_STM32_GPIOD, 9, 7);   /* RX */
#endif
    edp_stm32_uart_init(CONSOLE, clocks.pclk1_hz, EDP_CONSOLE_BAUD);
    edp_nvic_enable(CONSOLE_IRQ);  /* priority 0, as at reset */
}

#if EDP_STM32_WATCHDOG
/* LSI ~32 kHz / 64, reload 2000: about 4 s (2.7 s at the fastest LSI). */
static void watchdog_start(void)
{
    edp_iwdg_regs_t *w = EDP_STM32_IWDG;
    uint32_t spin = 100000u;
    w->KR = 0xCCCCu;   /* start (and LSI) */
    w->KR = 0x5555u;   /* unlock PR and RLR */
    w->PR = 4u;
    w->RLR = 2000u;
    while ((EDP_RD(w->SR) & 3u) && --spin) {
    }
    w->KR = 0xAAAAu;
}

/* Refresh at most every 1/4 s of port ticks: the idle frame loop polls the
 * UART continuously, and a refresh per poll would flood QEMU's -d unimp log. */
static uint32_t kick_last;

static void watchdog_poll(void)
{
    uint32_t now = ticks(0);
    if (now - kick_last >= clocks.sysclk_hz / 4u) {
        kick_last = now;
        EDP_STM32_IWDG->KR = 0xAAAAu;
    }
}
static void watchdog_kick(void)
{
    EDP_STM32_IWDG->KR = 0xAAAAu;
}
#else
#define watchdog_start() ((void)0)
#define watchdog_poll() ((void)0)
#define watchdog_kick 0
#endif

#define EDP_STM32_CYCLES_PER_INSN 4u
#define WINDOW_MAX 0x3FFFFFFFu  /* cycles: 6.4 s at 168 MHz */

static uint32_t window_start;
static uint32_t rx_isr_share;  /* edp_stm32_rx_isr_share at the clock edp_board_init found */

static void window_open(void *ctx)
{
    (void)ctx;
    window_start = ticks(0);
}

/* The ladder of port.h, then a bounded poll: at most `end` passes even if the
 * counter stops, each at least one cycle; the watchdog is fed meanwhile. */
static int window_close(void *ctx, uint32_t insns)
{
    uint64_t span = edp_stm32_window_cycles((uint64_t)insns * EDP_STM32_CYCLES_PER_INSN, rx_isr_share);
    uint32_t end = span > WINDOW_MAX ? WINDOW_MAX : (uint32_t)span, spin = 0;
    int late = 0;
    (void)ctx;
    while (ticks(0) - window_start >= end && end <= WINDOW_MAX / 2u) {
        end *= 2u;
        late = 1;
    }
    while (ticks(0) - window_start < end && ++spin < end) watchdog_poll();
    return late;
}

static const edp_port_t port = {
    .entropy = entropy,
    .ticks = ticks,
    .tick_unit = tick_unit,
    .day = day,
    .seconds = seconds,
    .set_time = set_time,
    .store_read = store_read,
    .store_write = store_write,
    .device_key = device_key,
    .uart_write = uart_write,
    .board = "stm32f4",
    .rx_buffer = EDP_STM32_RX_RING,  /* the console's receive ring (INFO: the host pipelines within it) */
    .auth_entropy = EDP_TEST_BUILD ? rng_entropy : 0,  /* production: the RNG, through entropy() */
    .flash = &flog_flash,
    .window_open = window_open,
    .window_close = window_close,
    .window_fixed = 0,  /* not measured (no board here): EDP_DEADLINE_FIXED_DEFAULT */
};

const edp_port_t *edp_board_init(void)
{
    edp_rcc_regs_t *rcc = EDP_STM32_RCC;

    edp_stm32_clock_init(rcc, EDP_STM32_FLASH, EDP_STM32_PWR, EDP_HSE_BYPASS, EDP_STM32_SPIN_CLOCK, &clocks);
    vectors_to_ram();   /* before the console's interrupt is enabled */
    console_init(rcc);
    watchdog_start();
    /* Cannot fail: stm32f4.h's #error checks the baud against both clocks
     * clock.c reports. Were it to, fail closed: park before anything is
     * answered and let the watchdog reset (no window, no answer; a saturated
     * share would make every window last longer than the host's timeout, so
     * answers would be charged and then lost). */
    if (edp_stm32_rx_isr_share(clocks.sysclk_hz, EDP_CONSOLE_BAUD, &rx_isr_share) != EDP_OK)
        edp_default_handler();

    tick_kind = edp_stm32_cycles_init(EDP_STM32_DEMCR, EDP_STM32_DWT);
    if (tick_kind != EDP_TICK_DWT) edp_systick_start();

    bkd.rcc = rcc;
    bkd.pwr = EDP_STM32_PWR;
    bkd.rtc = EDP_STM32_RTC;
    bkd.sram = EDP_STM32_BKPSRAM;
    if (edp_stm32_backup_access(&bkd) == EDP_OK) edp_stm32_rtc_init(&bkd);
    edp_stm32_bkpsram_enable(&bkd, EDP_STM32_SPIN_BRR);

    rcc->AHB2ENR |= RCC_AHB2ENR_RNGEN;
    (void)rcc->AHB2ENR;
    edp_stm32_rng_enable(EDP_STM32_RNG);

    flog_driver.regs = EDP_STM32_FLASH;
    flog_driver.base = edp_stm32_flog;
    flog_driver.first_sector = EDP_STM32_FLOG_SECTOR;
    flog_driver.sector_size = EDP_STM32_FLOG_SECTOR_SIZE;
    flog_driver.spin_program = EDP_STM32_SPIN_PROGRAM;
    flog_driver.spin_erase = EDP_STM32_SPIN_ERASE;
    flog_driver.before_erase = watchdog_kick;
    edp_stm32_flash_bind(&flog_flash, &flog_driver);
    return &port;
}

int edp_board_uart_read(uint8_t *buf, size_t max)
{
    watchdog_poll();
    edp_cortexm_wipe_if_sent();  /* an answer has left: its stack goes, RX interrupt frames included */
    return (int)edp_stm32_rx_read(&rx, buf, max);
}

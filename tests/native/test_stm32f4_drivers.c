/* Host unit tests of the stm32f4 drivers against fake register blocks.
 *
 * Built natively with -DEDP_STM32_REG_HOOK (and ASan/UBSan) from
 * tests/native/test_stm32f4_drivers.py. The drivers write plain RAM structs;
 * their status and data reads go through edp_stm32_reg_read() below, a small
 * hardware model: ready bits follow their enables (or never come), the RNG data
 * register plays a script, the RTC's INITF/RSF/INITS follow INIT and the date.
 *
 * Output (TAP-like, parsed by the pytest wrapper):
 *   ok N name | not ok N name: detail     one line per check
 *   rtcday YYYY-MM-DD INDEX               day index the driver read from a BCD date
 *   settime SECONDS TR DR                 BCD registers set_time wrote (hex)
 *   1..N                                  plan, then "# passed P failed F"
 * Exit status 0 iff every check passed. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cobs.h"
#include "edgedp/error.h"
#include "flog.h"
#include "edgedp/port.h"
#include "store.h"
#include "stm32f4.h"

/* ---- tiny harness ---- */

static int n_checks, n_failed;

#define CHECK(cond, ...) check_((cond), #cond, __VA_ARGS__)

static void check_(int ok, const char *expr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void check_(int ok, const char *expr, const char *fmt, ...)
{
    va_list ap;
    n_checks++;
    printf("%s %d ", ok ? "ok" : "not ok", n_checks);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (!ok) {
        printf(": failed %s", expr);
        n_failed++;
    }
    printf("\n");
}

/* ---- fake register blocks and the hardware model ---- */

static edp_rcc_regs_t rcc;
static edp_flash_regs_t flash;
static edp_pwr_regs_t pwr;
static edp_rng_regs_t rng;
static edp_rtc_regs_t rtc;
static edp_usart_regs_t usart;
static edp_gpio_regs_t gpio;
static edp_dwt_regs_t dwt;
static volatile uint32_t demcr;
static uint8_t sram[4096];
#define FLOG_SECTOR_BYTES 1024u
static uint32_t flog_mem[2 * FLOG_SECTOR_BYTES / 4];

static struct {
    /* RCC: 1 = the ready bit follows its enable; 0 = never ready (QEMU reads 0) */
    int rcc_live, hse_ok, pll_ok, sws_follows;
    int flash_latency_sticks;
    int lse_ok;            /* BDCR.LSERDY follows LSEON */
    int dbp_sticks;        /* PWR_CR.DBP reads back */
    int brr_ok;            /* PWR_CSR.BRR follows BRE */
    /* RNG */
    uint32_t rng_sr;       /* SR while no script entry says otherwise */
    uint32_t rng_sr_after_dr;  /* SR after the n-th DR read, if rng_sr_after_n */
    uint32_t rng_sr_after_n;
    const uint32_t *rng_words;
    uint32_t rng_n, rng_i;
    /* RTC */
    int rtc_live, initf_ok, rsf_ok;
    /* DWT */
    int cyccnt_runs;
    uint32_t cyccnt;
    /* USART */
    uint32_t usart_rx_left;
    uint8_t usart_rx_next;
    uint32_t usart_sr_extra;   /* ORE/NF/FE/PE reported with RXNE */
    int usart_txe;
    /* FLASH controller: keys unlock it, STRT erases at the next SR read */
    int flash_keys_ok, flash_busy_forever;
    uint32_t flash_error;      /* SR error flag raised by every operation */
    uint32_t flash_strt_cr;    /* CR when the last erase started */
    unsigned long flash_erases;
    /* read counters */
    unsigned long reads;
} hw;

uint32_t edp_stm32_reg_read(const volatile uint32_t *reg)
{
    uint32_t v = *reg;
    hw.reads++;
    if (reg == &rcc.CR && hw.rcc_live) {
        v &= ~(RCC_CR_HSIRDY | RCC_CR_HSERDY | RCC_CR_PLLRDY);
        if (v & RCC_CR_HSION) v |= RCC_CR_HSIRDY;
        if ((v & RCC_CR_HSEON) && hw.hse_ok) v |= RCC_CR_HSERDY;
        if ((v & RCC_CR_PLLON) && hw.pll_ok) v |= RCC_CR_PLLRDY;
    } else if (reg == &rcc.CFGR && hw.sws_follows) {
        v = (v & ~RCC_CFGR_SWS_MASK) | ((v & RCC_CFGR_SW_MASK) << 2);
    } else if (reg == &flash.ACR && !hw.flash_latency_sticks) {
        v &= ~FLASH_ACR_LATENCY_MASK;
    } else if (reg == &rcc.BDCR) {
        v &= ~RCC_BDCR_LSERDY;
        if ((v & RCC_BDCR_LSEON) && hw.lse_ok) v |= RCC_BDCR_LSERDY;
    } else if (reg == &pwr.CR && !hw.dbp_sticks) {
        v &= ~PWR_CR_DBP;
    } else if (reg == &pwr.CSR) {
        v &= ~PWR_CSR_BRR;
        if ((v & PWR_CSR_BRE) && hw.brr_ok) v |= PWR_CSR_BRR;
    } else if (reg == &rng.SR) {
        v = hw.rng_sr_after_n && hw.rng_i >= hw.rng_sr_after_n ? hw.rng_sr_after_dr : hw.rng_sr;
    } else if (reg == &rng.DR) {
        v = hw.rng_n ? hw.rng_words[hw.rng_i % hw.rng_n] : 0;
        hw.rng_i++;
    } else if (reg == &rtc.ISR && hw.rtc_live) {
        uint32_t init = v & RTC_ISR_INIT;
        v = init;
        if (init && hw.initf_ok) v |= RTC_ISR_INITF;
        if (!init && hw.rsf_ok) v |= RTC_ISR_RSF;
        if ((rtc.DR >> 16) & 0xFFu) v |= RTC_ISR_INITS;   /* year != 00 */
    } else if (reg == &dwt.CYCCNT && hw.cyccnt_runs) {
        hw.cyccnt += 7;
        v = hw.cyccnt;
    } else if (reg == &flash.CR) {
        if ((v & FLASH_CR_LOCK) && flash.KEYR == FLASH_KEY2 && hw.flash_keys_ok) flash.CR = v &= ~FLASH_CR_LOCK;
        flash.KEYR = 0;
    } else if (reg == &flash.SR) {
        if (flash.SR == (FLASH_SR_ERRORS | FLASH_SR_EOP)) flash.SR = 0;   /* the driver's write-1-to-clear */
        if (flash.CR & FLASH_CR_STRT) {
            uint32_t snb = (flash.CR & FLASH_CR_SNB_MASK) >> FLASH_CR_SNB_SHIFT, i;
            hw.flash_strt_cr = flash.CR;
            flash.CR &= ~FLASH_CR_STRT;
            hw.flash_erases++;
            if (snb == 9 || snb == 10)
                for (i = 0; i < FLOG_SECTOR_BYTES / 4; i++) flog_mem[(snb - 9) * FLOG_SECTOR_BYTES / 4 + i] = 0xFFFFFFFFu;
            flash.SR |= hw.flash_error;
        } else if (flash.CR & FLASH_CR_PG) {
            flash.SR |= hw.flash_error;
        }
        v = flash.SR | (hw.flash_busy_forever ? FLASH_SR_BSY : 0);
    } else if (reg == &usart.SR) {
        v = (hw.usart_txe ? USART_SR_TXE : 0) | (hw.usart_rx_left ? USART_SR_RXNE | hw.usart_sr_extra : 0);
    } else if (reg == &usart.DR) {
        if (hw.usart_rx_left) hw.usart_rx_left--;
        v = hw.usart_rx_next++;
    }
    return v;
}

static void reset_all(void)
{
    memset(&rcc, 0, sizeof rcc);
    memset(&flash, 0, sizeof flash);
    memset(&pwr, 0, sizeof pwr);
    memset(&rng, 0, sizeof rng);
    memset(&rtc, 0, sizeof rtc);
    memset(&usart, 0, sizeof usart);
    memset(&gpio, 0, sizeof gpio);
    memset(&dwt, 0, sizeof dwt);
    demcr = 0;
    memset(sram, 0, sizeof sram);
    memset(flog_mem, 0xFF, sizeof flog_mem);
    memset(&hw, 0, sizeof hw);
    flash.CR = FLASH_CR_LOCK;
    hw.flash_latency_sticks = 1;
}

/* ---- clock.c ---- */

static void test_clock(void)
{
    edp_stm32_clocks_t c;
    int r;

    reset_all();   /* QEMU: every RCC register reads 0 and HSE never comes */
    r = edp_stm32_clock_init(&rcc, &flash, &pwr, 0, 1000, &c);
    CHECK(r == EDP_STM32_CLOCK_FALLBACK && c.sysclk_hz == 16000000u && c.pclk1_hz == 16000000u && !c.pll,
          "clock: HSE never ready -> HSI 16 MHz fallback (r=%d, %u Hz)", r, (unsigned)c.sysclk_hz);
    CHECK(hw.reads < 3000, "clock: fallback is bounded (%lu register reads for spin 1000)", hw.reads);
    CHECK(rcc.CFGR == 0 && !(rcc.CR & (RCC_CR_HSEON | RCC_CR_PLLON)),
          "clock: fallback leaves HSI, prescalers 1, HSE and PLL off (CFGR=%#x CR=%#x)",
          (unsigned)rcc.CFGR, (unsigned)rcc.CR);

    reset_all();
    hw.rcc_live = hw.hse_ok = hw.pll_ok = hw.sws_follows = 1;
    r = edp_stm32_clock_init(&rcc, &flash, &pwr, 0, 1000, &c);
    CHECK(r == EDP_OK && c.pll && c.sysclk_hz == 168000000u && c.pclk1_hz == 42000000u && c.pclk2_hz == 84000000u,
          "clock: HSE + PLL -> 168 MHz, APB1 42 MHz, APB2 84 MHz");
    CHECK(rcc.PLLCFGR == (1u << 29 | 8u | 336u << 6 | 0u << 16 | 1u << 22 | 7u << 24),
          "clock: PLLCFGR M=8 N=336 P=2 Q=7 src=HSE, reserved bit 29 at its reset value 1 (%#x)",
          (unsigned)rcc.PLLCFGR);
    CHECK(flash.ACR == (5u | FLASH_ACR_PRFTEN | FLASH_ACR_ICEN | FLASH_ACR_DCEN),
          "clock: flash 5 wait states, prefetch and caches on (%#x)", (unsigned)flash.ACR);
    CHECK(rcc.CFGR == (RCC_CFGR_PPRE1_DIV4 | RCC_CFGR_PPRE2_DIV2 | RCC_CFGR_SW_PLL),
          "clock: CFGR AHB/1 APB1/4 APB2/2 SW=PLL (%#x)", (unsigned)rcc.CFGR);
    CHECK((rcc.APB1ENR & RCC_APB1ENR_PWREN) && (pwr.CR & PWR_CR_VOS) && !(rcc.CR & RCC_CR_HSEBYP),
          "clock: PWR clock on, voltage scale 1, crystal (no bypass)");

    reset_all();
    hw.rcc_live = hw.hse_ok = hw.pll_ok = hw.sws_follows = 1;
    edp_stm32_clock_init(&rcc, &flash, &pwr, 1, 1000, &c);
    CHECK((rcc.CR & RCC_CR_HSEBYP) && c.pll, "clock: EDP_HSE_BYPASS sets HSEBYP");

    reset_all();
    hw.rcc_live = hw.hse_ok = hw.sws_follows = 1;   /* PLL never locks */
    r = edp_stm32_clock_init(&rcc, &flash, &pwr, 0, 1000, &c);
    CHECK(r == EDP_STM32_CLOCK_FALLBACK && c.sysclk_hz == 16000000u && rcc.CFGR == 0 &&
              !(rcc.CR & (RCC_CR_HSEON | RCC_CR_PLLON)),
          "clock: PLL never locks -> HSI fallback, HSE and PLL off");

    reset_all();
    hw.rcc_live = hw.hse_ok = hw.pll_ok = hw.sws_follows = 1;
    hw.flash_latency_sticks = 0;
    r = edp_stm32_clock_init(&rcc, &flash, &pwr, 0, 1000, &c);
    CHECK(r == EDP_STM32_CLOCK_FALLBACK && c.sysclk_hz == 16000000u,
          "clock: flash latency not taken -> never switch to 168 MHz");

    reset_all();
    hw.rcc_live = hw.hse_ok = hw.pll_ok = 1;   /* SWS never reports the PLL */
    r = edp_stm32_clock_init(&rcc, &flash, &pwr, 0, 1000, &c);
    CHECK(r == EDP_STM32_CLOCK_FALLBACK && c.sysclk_hz == 16000000u, "clock: switch never confirmed -> HSI figures");

    reset_all();   /* a bootloader left the PLL running as system clock */
    hw.rcc_live = hw.hse_ok = hw.pll_ok = hw.sws_follows = 1;
    rcc.CR = RCC_CR_HSION | RCC_CR_HSEON | RCC_CR_PLLON;
    rcc.CFGR = RCC_CFGR_SW_PLL;
    rcc.PLLCFGR = 0x24003010u;
    r = edp_stm32_clock_init(&rcc, &flash, &pwr, 0, 1000, &c);
    CHECK(r == EDP_OK && rcc.PLLCFGR == 0x27405408u && c.sysclk_hz == 168000000u,
          "clock: PLL left on by a bootloader is stopped, reconfigured and restarted");
}

/* ---- uart.c ---- */

static edp_stm32_rx_t rx;

/* One received byte: RXNE (with sr_extra) until the interrupt reads DR. */
static void rx_byte(uint8_t b, uint32_t sr_extra)
{
    hw.usart_rx_left = 1;
    hw.usart_rx_next = b;
    hw.usart_sr_extra = sr_extra;
    edp_stm32_uart_irq(&usart, &rx);
}

/* Everything the frame loop gets, in calls of at most `chunk` bytes. */
static size_t rx_drain(uint8_t *out, size_t cap, size_t chunk)
{
    size_t n = 0, k;
    while (n < cap && (k = edp_stm32_rx_read(&rx, out + n, cap - n < chunk ? cap - n : chunk)) > 0) n += k;
    return n;
}

/* The frames in out[0..n) (split at 0x00): each one's decoded length, or -1
 * if it is not valid COBS. */
static int rx_frames(uint8_t *out, size_t n, int *lens, int max)
{
    size_t start = 0, i;
    int count = 0;
    for (i = 0; i < n && count < max; i++)
        if (out[i] == 0) {
            int d = edp_cobs_decode(out + start, i - start);
            lens[count++] = d < 0 ? -1 : d;
            start = i + 1;
        }
    return count;
}

static uint8_t frame_a[40], frame_b[300], frame_c[20];

static size_t wire_of(uint8_t *frame, size_t n, uint8_t fill, uint8_t *wire)
{
    size_t i;
    for (i = 0; i < n; i++) frame[i] = (uint8_t)(i % 7 == 3 ? 0 : fill + i);
    return edp_cobs_encode(frame, n, wire);
}

/* A, B, C on the wire with B's byte `lost` missing (lost_how: the byte before
 * it reported ORE, or the byte itself came with FE and is garbage); the frame
 * loop must get A and C intact (C only if B's delimiter survived) and one
 * invalid frame in place of B. Returns 1 if so. */
static int rx_damaged_frame_ok(size_t lost, int lost_how, int *frames_seen)
{
    static uint8_t wa[64], wb[320], wc[32], out[1024];
    size_t na = wire_of(frame_a, sizeof frame_a, 0x11, wa), nb = wire_of(frame_b, sizeof frame_b, 0x21, wb);
    size_t nc = wire_of(frame_c, sizeof frame_c, 0x31, wc), i, n;
    int lens[8], count, c_expected = lost != nb - 1;
    memset(&rx, 0, sizeof rx);
    for (i = 0; i < na; i++) rx_byte(wa[i], 0);
    for (i = 0; i < nb; i++) {
        if (lost_how == 0 && i + 1 == lost) rx_byte(wb[i], USART_SR_ORE);   /* the next byte is lost */
        else if (lost_how == 0 && i == lost) continue;
        else if (lost_how == 1 && i == lost) rx_byte((uint8_t)(wb[i] ^ 0x5A), USART_SR_FE);
        else rx_byte(wb[i], 0);
    }
    if (lost_how == 0 && lost == 0) {   /* the loss right after A's delimiter */
        memset(&rx, 0, sizeof rx);
        for (i = 0; i + 1 < na; i++) rx_byte(wa[i], 0);
        rx_byte(wa[na - 1], USART_SR_ORE);
        for (i = 1; i < nb; i++) rx_byte(wb[i], 0);
    }
    for (i = 0; i < nc; i++) rx_byte(wc[i], 0);
    n = rx_drain(out, sizeof out, 64);
    if (memcmp(out, wa, na) != 0 || (c_expected && memcmp(out + n - nc, wc, nc) != 0)) return 0;
    count = rx_frames(out, n, lens, 8);   /* decodes in place */
    *frames_seen = count;
    if (lens[0] != (int)sizeof frame_a || lens[1] != -1) return 0;
    return c_expected ? count == 3 && lens[2] == (int)sizeof frame_c : count == 2;
}

static void test_uart(void)
{
    uint8_t buf[16];
    static uint8_t big[EDP_STM32_RX_RING + 600];
    uint8_t poison[255];
    size_t n, i, nb;
    int ok, frames = 0;
    reset_all();
    edp_stm32_uart_init(&usart, 42000000u, 115200u);
    CHECK(usart.BRR == 365u && usart.CR1 == (USART_CR1_UE | USART_CR1_TE | USART_CR1_RE | USART_CR1_RXNEIE) &&
              usart.CR2 == 0,
          "uart: 115200 8N1 from 42 MHz, RXNE interrupt on: BRR=%u CR1=%#x", (unsigned)usart.BRR, (unsigned)usart.CR1);
    edp_stm32_uart_init(&usart, 16000000u, 115200u);
    CHECK(usart.BRR == 139u, "uart: BRR from HSI 16 MHz = %u", (unsigned)usart.BRR);

    hw.usart_txe = 0;   /* TXE never set: bounded per byte, bytes still written */
    hw.reads = 0;
    edp_stm32_uart_write(&usart, (const uint8_t *)"abc", 3, 50);
    CHECK(usart.DR == 'c' && hw.reads <= 3 * 50, "uart: TX without TXE is bounded (%lu polls)", hw.reads);

    hw.usart_txe = 1;
    memset(&rx, 0, sizeof rx);
    for (i = 0; i < 5; i++) rx_byte((uint8_t)(0x40 + i), 0);
    n = edp_stm32_rx_read(&rx, buf, 3);
    CHECK(n == 3 && buf[0] == 0x40 && buf[2] == 0x42, "uart: read stops at max");
    n = edp_stm32_rx_read(&rx, buf, sizeof buf);
    CHECK(n == 2 && buf[1] == 0x44, "uart: read returns what the interrupt stored, without waiting");
    n = edp_stm32_rx_read(&rx, buf, sizeof buf);
    CHECK(n == 0, "uart: nothing received -> 0");
    hw.usart_rx_left = 0;
    edp_stm32_uart_irq(&usart, &rx);
    CHECK(rx.head == 5 && edp_stm32_rx_read(&rx, buf, sizeof buf) == 0,
          "uart: an interrupt without RXNE stores nothing");

    /* The ring holds EDP_STM32_RX_RING bytes while the frame loop is busy;
     * the indices wrap through 2^32. */
    memset(&rx, 0, sizeof rx);
    rx.head = rx.tail = 0xFFFFFF00u;
    for (i = 0; i < EDP_STM32_RX_RING; i++) rx_byte((uint8_t)(1 + i % 200), 0);
    n = rx_drain(big, sizeof big, 64);
    ok = n == EDP_STM32_RX_RING && rx.overruns == 0;
    for (i = 0; ok && i < n; i++) ok = big[i] == (uint8_t)(1 + i % 200);
    CHECK(ok, "uart: a full ring of %u bytes is kept while the frame loop is busy (%zu)", EDP_STM32_RX_RING, n);
    ok = 1;
    for (i = 0; ok && i < EDP_STM32_RX_RING; i++) ok = rx.slot[i] == 0;
    CHECK(ok, "uart: every slot read is wiped (no past request left in RAM)");

    /* One byte more than the ring holds: counted, and the frame it was in
     * reaches the core as an invalid frame (never spliced). */
    memset(&rx, 0, sizeof rx);
    for (i = 0; i + 1 < EDP_STM32_RX_RING; i++) rx_byte((uint8_t)(1 + i % 200), 0);
    rx_byte(0, 0);                 /* the ring's last slot: a delimiter */
    rx_byte(0x77, 0);              /* lost: the ring is full */
    CHECK(rx.overruns == 1 && rx.head == EDP_STM32_RX_RING, "uart: a byte that finds the ring full is counted as lost");
    n = rx_drain(big, EDP_STM32_RX_RING, 64);
    rx_byte(0x78, 0);
    rx_byte(0x79, 0);
    rx_byte(0, 0);                 /* end of the damaged frame */
    rx_byte(0x02, 0);
    rx_byte(0x05, 0);
    rx_byte(0, 0);                 /* a good frame after it */
    n = rx_drain(big, sizeof big, 64);
    ok = n == 256 + 3 && big[0] == 0x01;
    for (i = 1; ok && i < 255; i++) ok = big[i] == 0xFF;
    memcpy(poison, big, sizeof poison);
    CHECK(ok && big[255] == 0 && big[256] == 0x02 && big[257] == 0x05 && big[258] == 0,
          "uart: after a full-ring loss: 0x01, 254 x 0xFF, 0x00 in place of the frame, then the next frame intact (%zu)",
          n);

    /* The invalid frame after every prefix state is invalid COBS: a prefix
     * (no 0x00 in it) leaves the decoder at a code position or r = 1..254
     * data bytes into a block. Every block code 1..255 with every count of its
     * data bytes received, alone or after a complete block (code 0x02, or a
     * full block of code 0xFF), and the prefixes at a code position. */
    {
        static const uint8_t before[][256] = {{0}, {0x02, 0x41}, {0xFF}};
        static const size_t before_len[] = {0, 2, 255};
        size_t states = 0, b, code, got;
        int old_valid = 0;
        ok = 1;
        for (b = 0; b < 3; b++) {
            size_t pre = before_len[b];
            memcpy(big, before[b], pre);
            if (b == 2) memset(big + 1, 0x5A, 254);
            /* at a code position, after the complete block(s) before */
            memcpy(big + pre, poison, 255);
            ok = ok && edp_cobs_decode(big, pre + 255) < 0;
            states++;
            for (code = 1; code <= 255; code++) {
                for (got = 0; got < code; got++) {   /* data bytes of this block received: r = code - 1 - got */
                    size_t len = pre + 1 + got;
                    memcpy(big, before[b], pre);
                    if (b == 2) memset(big + 1, 0x5A, 254);
                    big[pre] = (uint8_t)code;
                    memset(big + pre + 1, (int)(0x80 | (got & 0x7F)), got);
                    memcpy(big + len, poison, 255);
                    ok = ok && edp_cobs_decode(big, len + 255) < 0;
                    states++;
                    if (got == 0 && code == 255) {   /* the poison before this fix: valid here */
                        memcpy(big, before[b], pre);
                        if (b == 2) memset(big + 1, 0x5A, 254);
                        big[pre] = 0xFF;
                        memset(big + pre + 1, 0xFF, 254);
                        old_valid += edp_cobs_decode(big, pre + 255) >= 0;
                    }
                }
            }
        }
        CHECK(ok && states == 3u * (1u + 255u * 256u / 2u) && old_valid == 3,
              "uart: the invalid frame is invalid COBS after every prefix state, code byte 0xFF and prefixes ending "
              "inside a block included (%zu prefixes; 254 x 0xFF alone was valid after code 0xFF)", states);
    }

    nb = wire_of(frame_b, sizeof frame_b, 0x21, big);
    ok = 1;
    for (i = 0; ok && i < nb; i++) ok = rx_damaged_frame_ok(i, 0, &frames);
    CHECK(ok, "uart: an overrun (ORE) at any byte of a frame: the frame before and after intact, one invalid "
              "frame in its place (%zu positions, %d frames)", i, frames);
    CHECK(rx.overruns == 1 && rx.line_errors == 0, "uart: the overrun is counted");
    ok = 1;
    for (i = 0; ok && i < nb; i++) ok = rx_damaged_frame_ok(i, 1, &frames);
    CHECK(ok, "uart: a framing error (FE) at any byte of a frame: one invalid frame in its place (%zu positions, %d frames)",
          i, frames);
    CHECK(rx.line_errors == 1 && rx.overruns == 0, "uart: the line error is counted");

    /* The release window's term for the interrupt: whatever the work, bytes
     * arriving at the fastest the USART completes them cannot push it past
     * the window; and the term is no larger than it must be. Every clock the
     * port runs at, with the default baud and faster ones a build may set
     * (EDP_CONSOLE_BAUD), up to T = c + 1 (the largest share); T <= c has no
     * window at all. */
    {
        static const struct { uint32_t hz, baud; int32_t share; } cases[] = {
            {168000000u, 115200u, 1304}, {16000000u, 115200u, 16879}, {84000000u, 115200u, -1},
            {168000000u, 460800u, -1}, {16000000u, 460800u, 299594}, {168000000u, 921600u, -1},
            {16000000u, 230400u, -1}, {257000u, 9000u, 1 << 24},   /* T = 257 = c + 1 */
            {16000000u, 921600u, 0}, {256000u, 9000u, 0}, {16000000u, 0u, 0},   /* T <= c: EDP_ERR_TIMING */
        };
        uint32_t ci, share = 0, windows = 0;
        uint64_t work, worst = 0;
        ok = 1;
        for (ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const uint32_t hz = cases[ci].hz, baud = cases[ci].baud;
            const int r = edp_stm32_rx_isr_share(hz, baud, &share);
            if (cases[ci].share == 0) {
                ok = ok && r == EDP_ERR_TIMING && share == 0;
                continue;
            }
            ok = ok && r == EDP_OK && (cases[ci].share < 0 || share == (uint32_t)cases[ci].share) &&
                 share <= EDP_STM32_RX_SHARE_MAX;
            /* up to the most the port passes: 4 cycles x (2^32 - 1) instructions */
            for (work = 0; ok; work = work * 3u / 2u + 1u) {
                uint64_t l, bytes;
                if (work > 4u * 0xFFFFFFFFull) work = 4u * 0xFFFFFFFFull;
                l = edp_stm32_window_cycles(work, share);
                bytes = l * baud / (9ull * hz) + 1u;   /* floor(L / T) + 1 */
                ok = l < UINT64_MAX && work + bytes * EDP_STM32_RX_ISR_CYCLES <= l;
                windows++;
                if (ci == 0 && work > 1000u) {
                    uint64_t over = l - work - EDP_STM32_RX_ISR_CYCLES;  /* the term past W + c */
                    if (over * 10000u / (work + EDP_STM32_RX_ISR_CYCLES) > worst)
                        worst = over * 10000u / (work + EDP_STM32_RX_ISR_CYCLES);
                }
                if (work == 4u * 0xFFFFFFFFull) break;
            }
        }
        CHECK(ok, "uart: the interrupt's share of a window is 1304/65536 at 168 MHz, 16879/65536 at 16 MHz, "
                  "299594/65536 at 16 MHz and 460800 baud, 2^24 at T = c + 1; EDP_ERR_TIMING for T <= c");
        CHECK(ok && worst <= 205u, "uart: work + (L / T + 1) x c fits the window L at 168, 84 and 16 MHz, 115200 to "
                                   "921600 baud, for work up to 2^34 cycles (%u windows; past W + c the term is at "
                                   "most %u.%02u %% of it at 168 MHz)",
              (unsigned)windows, (unsigned)(worst / 100u), (unsigned)(worst % 100u));
        {
            const uint64_t w = EDP_STM32_WINDOW_WORK_MAX - 1u + EDP_STM32_RX_ISR_CYCLES;
            CHECK(edp_stm32_window_cycles(EDP_STM32_WINDOW_WORK_MAX, EDP_STM32_RX_SHARE_MAX) == UINT64_MAX &&
                      edp_stm32_window_cycles(0, EDP_STM32_RX_SHARE_MAX + 1u) == UINT64_MAX &&
                      edp_stm32_window_cycles(EDP_STM32_WINDOW_WORK_MAX - 1u, EDP_STM32_RX_SHARE_MAX) ==
                          w + 256u * w + 1u,
                  "uart: a window past what its product holds saturates, and the largest it takes does not wrap");
        }
    }

    edp_stm32_gpio_af(&gpio, 2, 7);
    edp_stm32_gpio_af(&gpio, 3, 7);
    CHECK(gpio.AFR[0] == 0x7700u && gpio.MODER == 0xA0u && gpio.PUPDR == 0x50u,
          "uart: PA2/PA3 AF7 alternate function (AFRL=%#x MODER=%#x)", (unsigned)gpio.AFR[0], (unsigned)gpio.MODER);
    memset(&gpio, 0, sizeof gpio);
    edp_stm32_gpio_af(&gpio, 8, 7);
    edp_stm32_gpio_af(&gpio, 9, 7);
    CHECK(gpio.AFR[1] == 0x77u && gpio.AFR[0] == 0 && gpio.MODER == 0xA0000u,
          "uart: PD8/PD9 AF7 in AFRH (AFRH=%#x MODER=%#x)", (unsigned)gpio.AFR[1], (unsigned)gpio.MODER);
}

/* ---- rng.c ---- */

static int all_zero(const uint8_t *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static void test_rng(void)
{
    static const uint32_t good[] = {0x11111111u, 0x03020100u, 0x07060504u, 0x0B0A0908u, 0x0F0E0D0Cu,
                                    0x13121110u, 0x17161514u, 0x1B1A1918u, 0x1F1E1D1Cu};
    static const uint32_t repeat_mid[] = {0xA5A5A5A5u, 0x01234567u, 0x89ABCDEFu, 0x89ABCDEFu, 0x1u, 0x2u, 0x3u, 0x4u, 0x5u};
    static const uint32_t repeat_first[] = {0xDEADBEEFu, 0xDEADBEEFu, 0x1u, 0x2u, 0x3u, 0x4u, 0x5u, 0x6u, 0x7u};
    uint8_t key[32], expect[32];
    uint32_t w, i;
    int r;

    reset_all();   /* QEMU: no RNG, DRDY never set */
    edp_stm32_rng_enable(&rng);
    CHECK(rng.CR == RNG_CR_RNGEN, "rng: enable sets RNGEN");
    memset(key, 0xAA, sizeof key);
    r = edp_stm32_rng_fill(&rng, key, 32, 500);
    CHECK(r == EDP_ERR_ENTROPY && hw.reads <= 501 && all_zero(key, 32),
          "rng: DRDY never set -> ERR_ENTROPY after %lu polls, key wiped", hw.reads);
    CHECK(edp_stm32_rng_read(&rng, &w, 0) == EDP_ERR_ENTROPY, "rng: spin 0 still bounded");

    {
        static const struct { uint32_t sr; const char *name; } errs[] = {
            {RNG_SR_SECS | RNG_SR_DRDY, "SECS"}, {RNG_SR_CECS | RNG_SR_DRDY, "CECS"},
            {RNG_SR_SEIS | RNG_SR_DRDY, "SEIS"}, {RNG_SR_CEIS | RNG_SR_DRDY, "CEIS"}};
        for (i = 0; i < 4; i++) {
            reset_all();
            rng.CR = RNG_CR_RNGEN;
            rng.SR = errs[i].sr;
            hw.rng_sr = errs[i].sr;
            hw.rng_words = good;
            hw.rng_n = 9;
            memset(key, 0xAA, sizeof key);
            r = edp_stm32_rng_fill(&rng, key, 32, 500);
            CHECK(r == EDP_ERR_ENTROPY && hw.rng_i == 0 && all_zero(key, 32) && rng.SR == 0 &&
                      (rng.CR & RNG_CR_RNGEN),
                  "rng: %s set -> ERR_ENTROPY, no DR read, flags cleared, RNG restarted", errs[i].name);
        }
    }

    reset_all();   /* seed error raised while the 4th word is read */
    hw.rng_sr = RNG_SR_DRDY;
    hw.rng_sr_after_dr = RNG_SR_DRDY | RNG_SR_SECS;
    hw.rng_sr_after_n = 4;
    hw.rng_words = good;
    hw.rng_n = 9;
    memset(key, 0xAA, sizeof key);
    r = edp_stm32_rng_fill(&rng, key, 32, 500);
    CHECK(r == EDP_ERR_ENTROPY && all_zero(key, 32), "rng: SECS after a DR read -> ERR_ENTROPY, key wiped");

    reset_all();
    hw.rng_sr = RNG_SR_DRDY;
    hw.rng_words = repeat_mid;
    hw.rng_n = 9;
    memset(key, 0xAA, sizeof key);
    r = edp_stm32_rng_fill(&rng, key, 32, 500);
    CHECK(r == EDP_ERR_ENTROPY && all_zero(key, 32), "rng: two identical consecutive words -> ERR_ENTROPY");

    reset_all();
    hw.rng_sr = RNG_SR_DRDY;
    hw.rng_words = repeat_first;
    hw.rng_n = 9;
    r = edp_stm32_rng_fill(&rng, key, 32, 500);
    CHECK(r == EDP_ERR_ENTROPY, "rng: first output word equal to the discarded one -> ERR_ENTROPY");

    reset_all();
    hw.rng_sr = RNG_SR_DRDY;
    hw.rng_words = good;
    hw.rng_n = 9;
    for (i = 0; i < 32; i++) expect[i] = (uint8_t)i;
    r = edp_stm32_rng_fill(&rng, key, 32, 500);
    CHECK(r == EDP_OK && hw.rng_i == 9 && memcmp(key, expect, 32) == 0,
          "rng: good words -> OK, first word discarded, 8 words used (%u DR reads)", (unsigned)hw.rng_i);

    reset_all();
    hw.rng_sr = RNG_SR_DRDY;
    hw.rng_words = good;
    hw.rng_n = 9;
    memset(key, 0xAA, sizeof key);
    r = edp_stm32_rng_fill(&rng, key, 5, 500);
    CHECK(r == EDP_OK && hw.rng_i == 3 && key[4] == 0x04 && key[5] == 0xAA, "rng: 5 bytes use 2 words after the discard");
}

/* ---- rtc.c ---- */

static uint32_t bcd2(uint32_t v) { return ((v / 10u) << 4) | (v % 10u); }

static uint32_t weekday_wdu(int y, int m, int d)
{
    int32_t days = edp_stm32_days_from_civil(y, (uint32_t)m, (uint32_t)d);
    return (uint32_t)((days % 7 + 7 + 3) % 7) + 1u;
}

static uint32_t date_reg(int y, int m, int d)
{
    return bcd2((uint32_t)(y - 2000)) << 16 | weekday_wdu(y, m, d) << 13 | bcd2((uint32_t)m) << 8 | bcd2((uint32_t)d);
}

/* A running, initialised calendar on LSE. */
static edp_stm32_bkd_t rtc_ready(void)
{
    edp_stm32_bkd_t b = {&rcc, &pwr, &rtc, sram, 0};
    reset_all();
    hw.rtc_live = hw.initf_ok = hw.rsf_ok = hw.lse_ok = 1;
    hw.dbp_sticks = 1;
    rcc.BDCR = RCC_BDCR_LSEON | RCC_BDCR_RTCSEL_LSE | RCC_BDCR_RTCEN;
    rtc.PRER = RTC_PRER_LSE;
    rtc.TR = 0x123456u;
    return b;
}

static int is_leap(int y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

static void test_rtc(void)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    static const uint64_t set_times[] = {978307200u, 1709164800u, 1709251199u, 1767225600u, 1735689599u,
                                         951782400u + 366u * 86400u, 4102444799ull, 2000000000u, 1234567890u};
    edp_stm32_bkd_t b;
    uint32_t day, i;
    int y, r, bad_rt = 0;

    /* QEMU: nothing modelled */
    reset_all();
    b = (edp_stm32_bkd_t){&rcc, &pwr, &rtc, sram, 0};
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME && hw.reads < 10,
          "rtc: no RCC/RTC (QEMU) -> ERR_TIME at once");
    CHECK(edp_stm32_rtc_set(&b, 1767225600u, 1000, 1000) == EDP_ERR_TIME, "rtc: set_time without DBP -> ERR_TIME");

    /* Known dates -> day index (checked against Python's datetime by the wrapper). */
    for (y = 2001; y <= 2099; y++) {
        static const int md[][2] = {{1, 1}, {2, 28}, {2, 29}, {3, 1}, {12, 31}};
        for (i = 0; i < 5; i++) {
            if (md[i][0] == 2 && md[i][1] == 29 && !is_leap(y)) continue;
            b = rtc_ready();
            rtc.DR = date_reg(y, md[i][0], md[i][1]);
            r = edp_stm32_rtc_day(&b, &day, 1000);
            if (r == EDP_OK) printf("rtcday %04d-%02d-%02d %u\n", y, md[i][0], md[i][1], (unsigned)day);
            else printf("rtcday %04d-%02d-%02d error %d\n", y, md[i][0], md[i][1], r);
        }
    }
    b = rtc_ready();
    rtc.DR = date_reg(2024, 2, 29);
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_OK && day == 19782u, "rtc: 2024-02-29 -> day 19782");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_OK && day == 20454u, "rtc: 2026-01-01 -> day 20454");

    for (i = 0; i < 36524u; i++) {   /* every day 2001-01-01 .. 2100-12-31: civil <-> days round trip */
        int32_t z = 11323 + (int32_t)i, yy;
        uint32_t m, d;
        edp_stm32_civil_from_days(z, &yy, &m, &d);
        if (edp_stm32_days_from_civil(yy, m, d) != z || m < 1 || m > 12 || d < 1 ||
            (int)d > mdays[m - 1] + (m == 2 && is_leap(yy)))
            bad_rt++;
    }
    CHECK(bad_rt == 0, "rtc: civil <-> days round trip over 36524 days (%d bad)", bad_rt);

    /* Untrusted calendars */
    {
        static const struct { uint32_t dr; const char *name; } bad[] = {
            {0x00000101u | (6u << 13), "year 00 (INITS = 0)"}, {0x00250229u, "2025-02-29"}, {0x00251301u, "month 13"},
            {0x00250001u, "month 0"}, {0x00250100u, "day 0"}, {0x00250132u, "day 32"},
            {0x0025010Au, "BCD digit A"}, {0x00250431u, "April 31"}, {0x01250101u | (3u << 13), "reserved bit set"}};
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            b = rtc_ready();
            rtc.DR = bad[i].dr;
            CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: invalid date %s -> ERR_TIME", bad[i].name);
        }
    }
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1) ^ (1u << 13);   /* wrong weekday */
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: weekday inconsistent with date -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rtc.TR = 0x245900u;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: hour 24 -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rtc.TR = 0x400000u | 0x115959u;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: PM bit (12 h format) -> ERR_TIME");

    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    hw.lse_ok = 0;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: LSE not ready -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rcc.BDCR = RCC_BDCR_LSEON | (2u << 8) | RCC_BDCR_RTCEN;   /* LSI */
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: RTC on LSI -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rcc.BDCR &= ~RCC_BDCR_RTCEN;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: RTC clock disabled -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rtc.PRER = 0x007F0100u;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: prescalers not 1 Hz from LSE -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    hw.rsf_ok = 0;
    hw.reads = 0;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME && hw.reads <= 1010,
          "rtc: RSF never set -> ERR_TIME after bounded polls (%lu)", hw.reads);
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rtc.ISR = RTC_ISR_INIT;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: calendar in init mode -> ERR_TIME");
    b = rtc_ready();
    rtc.DR = date_reg(2026, 1, 1);
    rtc.CR = RTC_CR_BYPSHAD;
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME, "rtc: shadow bypass -> ERR_TIME");

    /* set_time: BCD written (checked against datetime by the wrapper) and read back */
    for (i = 0; i < sizeof set_times / sizeof set_times[0]; i++) {
        b = rtc_ready();
        rtc.TR = rtc.DR = 0;
        r = edp_stm32_rtc_set(&b, set_times[i], 1000, 1000);
        if (r == EDP_OK)
            printf("settime %llu %06X %06X\n", (unsigned long long)set_times[i], (unsigned)rtc.TR, (unsigned)rtc.DR);
        CHECK(r == EDP_OK && rtc.WPR == 0xFFu && !(rtc.ISR & RTC_ISR_INIT) && rtc.PRER == RTC_PRER_LSE &&
                  !(rtc.CR & RTC_CR_FMT),
              "rtc: set_time %llu -> OK, init mode left, relocked, 1 Hz, 24 h", (unsigned long long)set_times[i]);
        CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_OK && day == (uint32_t)(set_times[i] / 86400u),
              "rtc: day after set_time %llu = %u", (unsigned long long)set_times[i], (unsigned)day);
    }

    b = rtc_ready();   /* a fresh backup domain: no RTC clock yet, LSE off */
    rcc.BDCR = 0;
    r = edp_stm32_rtc_set(&b, 1767225600u, 1000, 1000);
    CHECK(r == EDP_OK && rcc.BDCR == (RCC_BDCR_LSEON | RCC_BDCR_RTCSEL_LSE | RCC_BDCR_RTCEN) &&
              (pwr.CR & PWR_CR_DBP) && (rcc.APB1ENR & RCC_APB1ENR_PWREN),
          "rtc: set_time on a fresh backup domain starts LSE, selects it, enables the RTC (BDCR=%#x)",
          (unsigned)rcc.BDCR);
    b = rtc_ready();
    rcc.BDCR = 0;
    hw.lse_ok = 0;
    hw.reads = 0;
    r = edp_stm32_rtc_set(&b, 1767225600u, 1000, 700);
    CHECK(r == EDP_ERR_TIME && hw.reads < 720 && !(rcc.BDCR & RCC_BDCR_RTCSEL_MASK),
          "rtc: LSE never ready -> ERR_TIME, bounded (%lu reads), RTC clock not selected", hw.reads);
    b = rtc_ready();
    rcc.BDCR = RCC_BDCR_LSEON | (2u << 8) | RCC_BDCR_RTCEN;
    CHECK(edp_stm32_rtc_set(&b, 1767225600u, 1000, 1000) == EDP_ERR_TIME,
          "rtc: another RTC clock already selected -> ERR_TIME (no backup-domain reset)");
    b = rtc_ready();
    hw.initf_ok = 0;
    hw.reads = 0;
    rtc.DR = date_reg(2025, 6, 1);
    r = edp_stm32_rtc_set(&b, 1767225600u, 800, 1000);
    CHECK(r == EDP_ERR_TIME && hw.reads < 820 && !(rtc.ISR & RTC_ISR_INIT) && rtc.WPR == 0xFFu &&
              rtc.DR == date_reg(2025, 6, 1),
          "rtc: INITF never set -> ERR_TIME, bounded, init left, relocked, calendar untouched");
    b = rtc_ready();
    CHECK(edp_stm32_rtc_set(&b, 978307199u, 1000, 1000) == EDP_ERR_TIME &&
              edp_stm32_rtc_set(&b, 4102444800ull, 1000, 1000) == EDP_ERR_TIME,
          "rtc: set_time outside [2001, 2100) -> ERR_TIME");
    b = rtc_ready();
    hw.rsf_ok = 0;
    CHECK(edp_stm32_rtc_set(&b, 1767225600u, 1000, 1000) == EDP_ERR_TIME,
          "rtc: calendar does not resynchronise after set -> ERR_TIME");

    b = rtc_ready();   /* rtc_init: LSE started on a fresh domain only, RTCEN never written 0 */
    rcc.BDCR = 0;
    edp_stm32_rtc_init(&b);
    CHECK(rcc.BDCR == (RCC_BDCR_LSEON | RCC_BDCR_RTCEN),
          "rtc: init starts LSE on a fresh backup domain and keeps RTCEN set (BDCR=%#x)", (unsigned)rcc.BDCR);
    CHECK(edp_stm32_rtc_day(&b, &day, 1000) == EDP_ERR_TIME,
          "rtc: after init on a fresh (or reset) backup domain, no RTC clock selected -> day refused");
    rcc.BDCR = (2u << 8) | RCC_BDCR_RTCEN;
    edp_stm32_rtc_init(&b);
    CHECK(rcc.BDCR == ((2u << 8) | RCC_BDCR_RTCEN), "rtc: init leaves a configured RTC clock alone");
    rcc.BDCR = RCC_BDCR_LSEON | RCC_BDCR_RTCSEL_LSE | RCC_BDCR_RTCEN;
    edp_stm32_rtc_init(&b);
    CHECK(rcc.BDCR == (RCC_BDCR_LSEON | RCC_BDCR_RTCSEL_LSE | RCC_BDCR_RTCEN),
          "rtc: init leaves a running RTC alone");
}

/* ---- bkpsram.c ---- */

static edp_stm32_bkd_t *port_bkd;

static int p_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    (void)ctx;
    return edp_stm32_store_read(port_bkd, off, buf, n);
}

static int p_write(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    (void)ctx;
    return edp_stm32_store_write(port_bkd, off, buf, n);
}

static edp_record_t record(uint32_t seq, uint64_t spent)
{
    edp_record_t r;
    memset(&r, 0, sizeof r);
    r.sequence = seq;
    r.budget.day = 20454;
    r.budget.daily_cap = 5000000;
    r.budget.daily_spent = spent;
    r.budget.lifetime_spent = spent;
    r.mech.eps_micro = 1000000;
    r.mech.hi = 1.0f;
    r.mech.sensitivity = 2.0f;
    r.mech.m = EDP_M_AUTO;
    r.auth_counter = 7;
    return r;
}

static void test_bkpsram(void)
{
    edp_stm32_bkd_t b;
    edp_port_t port;
    edp_record_t r, got;
    uint8_t buf[EDP_STORE_RECORD], old_image[256];
    uint32_t slot, i, shadow;
    int st, e;

    memset(&port, 0, sizeof port);
    port.store_read = p_read;
    port.store_write = p_write;
    port_bkd = &b;

    reset_all();   /* QEMU: PWR not modelled, DBP reads 0 */
    b = (edp_stm32_bkd_t){&rcc, &pwr, &rtc, sram, 0};
    CHECK(edp_stm32_bkpsram_enable(&b, 1000) == EDP_ERR_STORE && !b.sram_ready && hw.reads < 10,
          "bkpsram: DBP does not stick -> ERR_STORE at once");
    CHECK(edp_stm32_store_read(&b, 0, buf, 4) == EDP_ERR_STORE && edp_stm32_store_write(&b, 0, buf, 4) == EDP_ERR_STORE,
          "bkpsram: store refuses reads and writes when not enabled");
    CHECK(edp_store_load(&port, &got, &slot) == EDP_STORE_FAILED, "bkpsram: core sees a failed store");

    reset_all();
    hw.dbp_sticks = 1;   /* BRR never ready */
    b = (edp_stm32_bkd_t){&rcc, &pwr, &rtc, sram, 0};
    CHECK(edp_stm32_bkpsram_enable(&b, 1000) == EDP_ERR_STORE && !b.sram_ready && hw.reads <= 1002,
          "bkpsram: backup regulator never ready -> ERR_STORE, bounded (%lu reads)", hw.reads);

    reset_all();
    hw.dbp_sticks = hw.brr_ok = 1;
    b = (edp_stm32_bkd_t){&rcc, &pwr, &rtc, sram, 0};
    CHECK(edp_stm32_bkpsram_enable(&b, 1000) == EDP_OK && b.sram_ready && (rcc.APB1ENR & RCC_APB1ENR_PWREN) &&
              (rcc.AHB1ENR & RCC_AHB1ENR_BKPSRAMEN) && (pwr.CR & PWR_CR_DBP) && (pwr.CSR & PWR_CSR_BRE),
          "bkpsram: enable sequence PWREN, DBP, BKPSRAMEN, BRE -> ready");
    CHECK(edp_stm32_store_write(&b, EDP_STORE_SIZE - 6, buf, 7) == EDP_ERR_STORE &&
              edp_stm32_store_read(&b, 0xFFFFFFF0u, buf, 32) == EDP_ERR_STORE &&
              edp_stm32_store_read(&b, 0, buf, EDP_STORE_SIZE + 1) == EDP_ERR_STORE &&
              edp_stm32_store_read(&b, EDP_STORE_SIZE, buf, 0) == EDP_OK,
          "bkpsram: accesses outside [0, EDP_STORE_SIZE) (slots and audit ring) refused");

    st = edp_store_load(&port, &got, &slot);
    CHECK(st == EDP_STORE_FRESH && slot == 1, "bkpsram: blank backup SRAM loads as fresh");
    r = record(0, 0);
    e = edp_store_commit(&port, &r, &slot);
    CHECK(e == EDP_OK && r.sequence == 1 && rtc.BKP[0] == 1 && rtc.BKP[1] == ~1u,
          "bkpsram: first commit writes slot 0 and shadow 1 (BKP0R=%u)", (unsigned)rtc.BKP[0]);
    for (i = 0; i < 3; i++) {
        r.budget.daily_spent += 1000000;
        r.budget.lifetime_spent += 1000000;
        e |= edp_store_commit(&port, &r, &slot);
    }
    st = edp_store_load(&port, &got, &slot);
    CHECK(e == EDP_OK && st == EDP_STORE_LOADED && got.sequence == 4 && got.budget.lifetime_spent == 3000000 &&
              got.auth_counter == 7 && rtc.BKP[0] == 4 && memcmp(&sram[0], "EDDP", 4) == 0,
          "bkpsram: commit/load round trip through the core store (seq %u, shadow %u)", (unsigned)got.sequence,
          (unsigned)rtc.BKP[0]);
    CHECK(sram[2 * EDP_STORE_SLOT_SIZE] == 0 && sram[4095] == 0, "bkpsram: a commit writes nothing past the two slots");

    /* Power cut after the body of the next record, before its CRC. */
    r = got;
    r.sequence = 5;
    edp_store_pack(&r, buf);
    CHECK(edp_stm32_store_write(&b, (slot ^ 1u) * EDP_STORE_SLOT_SIZE, buf, EDP_STORE_RECORD - 4) == EDP_OK &&
              rtc.BKP[0] == 4,
          "bkpsram: shadow unchanged by a half-written slot");
    st = edp_store_load(&port, &got, &slot);
    CHECK((st == EDP_STORE_LOADED || st == EDP_STORE_RECOVERED) && got.sequence == 4,
          "bkpsram: power cut mid-commit loads the previous record (state %d, seq %u)", st, (unsigned)got.sequence);
    r = got;
    CHECK(edp_store_commit(&port, &r, &slot) == EDP_OK && rtc.BKP[0] == 5 &&
              edp_store_load(&port, &got, &slot) == EDP_STORE_LOADED && got.sequence == 5,
          "bkpsram: the next commit overwrites the torn slot and moves the shadow");

    /* Rollback: restore an older image of the backup SRAM. */
    reset_all();
    hw.dbp_sticks = hw.brr_ok = 1;
    b = (edp_stm32_bkd_t){&rcc, &pwr, &rtc, sram, 0};
    edp_stm32_bkpsram_enable(&b, 1000);
    r = record(0, 0);
    slot = 1;
    edp_store_commit(&port, &r, &slot);
    edp_store_commit(&port, &r, &slot);
    memcpy(old_image, sram, 256);   /* sequences 1 and 2, no spend */
    for (i = 0; i < 3; i++) {
        r.budget.lifetime_spent += 2000000;
        edp_store_commit(&port, &r, &slot);
    }
    shadow = rtc.BKP[0];
    memcpy(sram, old_image, 256);
    st = edp_store_load(&port, &got, &slot);
    CHECK(shadow == 5 && st == EDP_STORE_FAILED, "bkpsram: rolled-back backup SRAM (seq 2 < shadow 5) -> store failed");
    got = record(0, 0);
    slot = 1;
    CHECK(edp_store_commit(&port, &got, &slot) == EDP_ERR_STORE && rtc.BKP[0] == 5,
          "bkpsram: no commit can move the store back under the shadow");

    memset(sram, 0, 256);   /* backup SRAM lost, backup registers kept */
    CHECK(edp_store_load(&port, &got, &slot) == EDP_STORE_FAILED, "bkpsram: lost backup SRAM with a shadow -> store failed");

    memcpy(sram, old_image, 256);   /* backup domain reset: registers blank, SRAM kept */
    rtc.BKP[0] = rtc.BKP[1] = 0;
    st = edp_store_load(&port, &got, &slot);
    CHECK(st == EDP_STORE_LOADED && got.sequence == 2, "bkpsram: no valid shadow -> no check (loads seq 2)");
    r = got;
    CHECK(edp_store_commit(&port, &r, &slot) == EDP_OK && rtc.BKP[0] == 3 && rtc.BKP[1] == ~3u,
          "bkpsram: the next commit re-establishes the shadow");

    rtc.BKP[0] = 9;   /* half-written shadow pair: treated as none */
    CHECK(edp_store_load(&port, &got, &slot) == EDP_STORE_LOADED, "bkpsram: mismatched shadow pair ignored");

    /* Shadow never moves back: an older valid record written directly. */
    rtc.BKP[0] = 3;
    rtc.BKP[1] = ~3u;
    r = record(1, 0);
    edp_store_pack(&r, buf);
    edp_stm32_store_write(&b, 0, buf, EDP_STORE_RECORD);
    CHECK(rtc.BKP[0] == 3, "bkpsram: writing an older valid slot leaves the shadow");

    /* Sequence wrap-around uses serial-number order. */
    memset(sram, 0, 256);
    rtc.BKP[0] = 0xFFFFFFFEu;
    rtc.BKP[1] = ~0xFFFFFFFEu;
    r = record(0xFFFFFFFEu, 0);
    edp_store_pack(&r, buf);
    edp_stm32_store_write(&b, 0, buf, EDP_STORE_RECORD);
    slot = 0;
    r = record(0xFFFFFFFEu, 0);
    e = edp_store_commit(&port, &r, &slot);
    e |= edp_store_commit(&port, &r, &slot);
    CHECK(e == EDP_OK && r.sequence == 0 && rtc.BKP[0] == 0 && edp_store_load(&port, &got, &slot) == EDP_STORE_LOADED,
          "bkpsram: shadow follows the sequence across the 2^32 wrap");
}

/* ---- cycles.c ---- */

static void test_cycles(void)
{
    reset_all();   /* QEMU: no DWT, CYCCNT reads 0 */
    CHECK(edp_stm32_cycles_init(&demcr, &dwt) == EDP_TICK_SYSTICK && (demcr & DEMCR_TRCENA) &&
              !(dwt.CTRL & DWT_CTRL_CYCCNTENA),
          "cycles: CYCCNT standing still -> SysTick fallback");
    reset_all();
    dwt.CTRL = DWT_CTRL_NOCYCCNT;
    CHECK(edp_stm32_cycles_init(&demcr, &dwt) == EDP_TICK_SYSTICK, "cycles: NOCYCCNT -> SysTick");
    reset_all();
    hw.cyccnt_runs = 1;
    CHECK(edp_stm32_cycles_init(&demcr, &dwt) == EDP_TICK_DWT && (dwt.CTRL & DWT_CTRL_CYCCNTENA) &&
              (demcr & DEMCR_TRCENA),
          "cycles: CYCCNT advancing -> DWT");
}

/* ---- flash.c ---- */

static void flash_bind(edp_flash_t *f, edp_stm32_flash_t *d)
{
    d->regs = &flash;
    d->base = flog_mem;
    d->first_sector = EDP_STM32_FLOG_SECTOR;
    d->sector_size = FLOG_SECTOR_BYTES;
    d->spin_program = 1000;
    d->spin_erase = 5000;
    d->before_erase = 0;
    edp_stm32_flash_bind(f, d);
}

static void test_flash(void)
{
    static const uint8_t word8[8] = {1, 2, 3, 4, 0xF0, 0x0F, 0xAA, 0x55};
    edp_stm32_flash_t d;
    edp_flash_t f;
    edp_flog_t log, again;
    edp_flog_mark_t m = {0, 0, 0, 0};
    uint8_t back[8];
    uint32_t i;
    int ok;

    reset_all();   /* QEMU: the controller is not modelled, LOCK never clears */
    flash_bind(&f, &d);
    CHECK(f.program(f.ctx, 0, word8, 8) == EDP_ERR_STORE && f.erase(f.ctx, 0) == EDP_ERR_STORE &&
              flog_mem[0] == 0xFFFFFFFFu && hw.flash_erases == 0,
          "flash: keys refused (LOCK stays) -> ERR_STORE, nothing written");

    reset_all();
    hw.flash_keys_ok = 1;
    flash_bind(&f, &d);
    CHECK(f.program(f.ctx, 8, word8, 8) == EDP_OK && flog_mem[2] == 0x04030201u && flog_mem[3] == 0x55AA0FF0u &&
              flash.CR == FLASH_CR_LOCK,
          "flash: word program after KEY1/KEY2, relocked (CR=%#x)", (unsigned)flash.CR);
    CHECK(f.read(f.ctx, 8, back, 8) == EDP_OK && memcmp(back, word8, 8) == 0, "flash: read back through the map");
    CHECK(f.program(f.ctx, 2, word8, 4) == EDP_ERR_STORE && f.program(f.ctx, 0, word8, 6) == EDP_ERR_STORE &&
              f.program(f.ctx, 2 * FLOG_SECTOR_BYTES - 4, word8, 8) == EDP_ERR_STORE && f.erase(f.ctx, 2) == EDP_ERR_STORE,
          "flash: unaligned or outside the two log sectors -> ERR_STORE");
    ok = f.erase(f.ctx, 1) == EDP_OK;
    CHECK(ok && hw.flash_erases == 1 &&
              hw.flash_strt_cr == (FLASH_CR_PSIZE_X32 | FLASH_CR_SER | 10u << FLASH_CR_SNB_SHIFT | FLASH_CR_STRT) &&
              flash.CR == FLASH_CR_LOCK,
          "flash: erase of log sector 1 = SER, SNB 10, PSIZE x32, STRT, relocked (CR at start %#x)",
          (unsigned)hw.flash_strt_cr);
    CHECK(flog_mem[2] == 0x04030201u, "flash: erasing sector 10 leaves sector 9");

    reset_all();
    hw.flash_keys_ok = 1;
    hw.flash_error = FLASH_SR_WRPERR;
    flash_bind(&f, &d);
    CHECK(f.program(f.ctx, 0, word8, 8) == EDP_ERR_STORE && f.erase(f.ctx, 0) == EDP_ERR_STORE && flash.CR == FLASH_CR_LOCK,
          "flash: WRPERR -> ERR_STORE, relocked");

    reset_all();
    hw.flash_keys_ok = 1;
    hw.flash_busy_forever = 1;
    flash_bind(&f, &d);
    ok = f.program(f.ctx, 0, word8, 4) == EDP_ERR_STORE && f.erase(f.ctx, 0) == EDP_ERR_STORE;
    CHECK(ok && hw.reads < 3000,
          "flash: BSY never clears -> ERR_STORE, bounded (%lu reads)", hw.reads);

    reset_all();
    hw.flash_keys_ok = 1;
    flash_bind(&f, &d);
    flog_mem[FLOG_SECTOR_BYTES / 4 + 3] = 0;   /* a word the erase must clear */
    ok = edp_flog_open(&log, &f) == 0;
    for (i = 1; ok && i <= 100; i++) {
        m.lifetime = i * 1000u;
        m.counter = i / 10u;
        m.day = 20000u + i / 30u;
        m.daily = i % 30u;
        ok = edp_flog_raise(&log, &m) == EDP_OK;
    }
    CHECK(ok && hw.flash_erases == 3, "flash: high-water log on the driver, 100 raises over 28-slot sectors (%lu erases)",
          hw.flash_erases);
    CHECK(edp_flog_open(&again, &f) > 0 && again.mark.lifetime == 100000u && again.mark.counter == 10u &&
              again.mark.day == 20003u && again.mark.daily == 10u,
          "flash: reopened log holds the last mark");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_clock();
    test_uart();
    test_rng();
    test_rtc();
    test_bkpsram();
    test_cycles();
    test_flash();
    printf("1..%d\n# passed %d failed %d\n", n_checks, n_checks - n_failed, n_failed);
    return n_failed ? 1 : 0;
}

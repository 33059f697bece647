/* The stm32f4 port's drivers (STM32F405/407, RM0090).
 *
 * Every driver takes its register block(s) by pointer (stm32f4_regs.h) and
 * every wait on hardware is a bounded loop `while (!(EDP_RD(reg) & bit) && --spin)`:
 * a peripheral that never answers (QEMU, which models none of RCC, PWR, RTC,
 * RNG, DWT or backup SRAM, or a broken board) makes the call fail in bounded
 * time instead of hanging. Functions return >= 0 on success or a negative
 * EDP_ERR_* (edgedp/error.h). board.c binds the drivers to the real addresses;
 * tests/native/test_stm32f4_drivers.c runs them against fake blocks. */
#ifndef EDGEDP_STM32F4_H
#define EDGEDP_STM32F4_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/port.h"  /* edp_flash_t */
#include "stm32f4_regs.h"

/* Code that must run while a flash sector erases (the erase's busy-wait, the
 * console's RX interrupt and what it calls): on the STM32F4 a fetch from
 * flash stalls while an operation of the same bank is busy (RM0090 §3.5.3).
 * stm32f4.ld links .ramfunc into .data (SRAM, copied from flash at start-up
 * with it); board.c points VTOR at an SRAM copy of the vector table.
 * tests/firmware/test_stm32f4_erase_ram.py checks both on the image. */
#define EDP_STM32_RAMFUNC __attribute__((section(".ramfunc"), noinline))

/* ---- options (override with -D) ---- */

/* Console: 2 = USART2 on PA2/PA3, 3 = USART3 on PD8/PD9 (both AF7). */
#ifndef EDP_CONSOLE_USART
#define EDP_CONSOLE_USART 2
#endif
#if EDP_CONSOLE_USART != 2 && EDP_CONSOLE_USART != 3
#error "EDP_CONSOLE_USART must be 2 or 3"
#endif

/* 1: HSE is an external 8 MHz clock signal (HSEBYP, e.g. Nucleo ST-LINK MCO);
 * 0: an 8 MHz crystal (STM32F4DISCOVERY). */
#ifndef EDP_HSE_BYPASS
#define EDP_HSE_BYPASS 0
#endif

#ifndef EDP_CONSOLE_BAUD
#define EDP_CONSOLE_BAUD 115200u
#endif

/* 1: start the independent watchdog (LSI, about 4 s) at boot; the frame loop
 * refreshes it. A fault handler that parks the core then resets the MCU. */
#ifndef EDP_STM32_WATCHDOG
#define EDP_STM32_WATCHDOG 1
#endif

/* Poll budgets (loop iterations; one iteration is >= 4 core cycles, a few
 * more on a peripheral bus). Worst cases at the clock each wait runs on:
 *   CLOCK  each HSE/PLL/switch wait, at 16 MHz HSI: ~50 ms at the 8 cycles a poll takes
 *          (>= 25 ms; an 8 MHz crystal typically starts in ~2 ms, ST HAL allows 100 ms)
 *   RNG    one DRDY wait at 168 MHz: >= 0.5 ms (a word takes 40 RNG clocks < 1 us)
 *   RTC    INITF/RSF wait at 168 MHz: >= 5 ms (2 RTCCLK = 61 us)
 *   LSE    LSERDY wait in set_time at 168 MHz: >= 50 ms (LSEON is set at boot)
 *   BRR    backup regulator ready at 168 MHz: >= 25 ms
 *   TX     one byte at 168 MHz: >= 2.4 ms (a byte at 115200 8N1 takes 87 us) */
#ifndef EDP_STM32_SPIN_CLOCK
#define EDP_STM32_SPIN_CLOCK 100000u
#endif
#ifndef EDP_STM32_SPIN_RNG
#define EDP_STM32_SPIN_RNG 20000u
#endif
#ifndef EDP_STM32_SPIN_RTC
#define EDP_STM32_SPIN_RTC 200000u
#endif
#ifndef EDP_STM32_SPIN_LSE
#define EDP_STM32_SPIN_LSE 2000000u
#endif
#ifndef EDP_STM32_SPIN_BRR
#define EDP_STM32_SPIN_BRR 1000000u
#endif
#ifndef EDP_STM32_SPIN_TX
#define EDP_STM32_SPIN_TX 100000u
#endif

/* ---- clock.c ---- */

#define EDP_STM32_HSI_HZ 16000000u
#define EDP_STM32_PLL_HZ 168000000u

typedef struct {
    uint32_t sysclk_hz;  /* core clock = HCLK (SysTick, DWT) */
    uint32_t pclk1_hz;   /* APB1: USART2/3 */
    uint32_t pclk2_hz;   /* APB2 */
    uint8_t pll;         /* 1: PLL from HSE, 0: HSI fallback */
} edp_stm32_clocks_t;

#define EDP_STM32_CLOCK_FALLBACK 1

/* 168 MHz from an 8 MHz HSE: PLL M=8 N=336 P=2 Q=7 (48 MHz for the RNG),
 * flash 5 wait states + prefetch + caches, AHB /1, APB1 /4 (42 MHz), APB2 /2
 * (84 MHz), voltage scale 1. Each wait gets spin iterations. If HSE, the PLL,
 * the flash latency or the switch fail, the clock tree is put back on HSI
 * 16 MHz with all prescalers 1. *clk is what SWS reports afterwards.
 * Returns EDP_OK (PLL) or EDP_STM32_CLOCK_FALLBACK (HSI). */
int edp_stm32_clock_init(edp_rcc_regs_t *rcc, edp_flash_regs_t *flash, edp_pwr_regs_t *pwr,
                         int hse_bypass, uint32_t spin, edp_stm32_clocks_t *clk);

/* ---- uart.c ---- */

/* Pin pin of g to alternate function af (push-pull, high speed, pull-up). */
void edp_stm32_gpio_af(edp_gpio_regs_t *g, uint32_t pin, uint32_t af);

/* 8N1 at baud from pclk_hz (oversampling 16), TX and RX enabled, the RXNE
 * interrupt enabled (RXNEIE: also raised on an overrun); the caller enables the
 * USART's line in the NVIC. */
void edp_stm32_uart_init(edp_usart_regs_t *u, uint32_t pclk_hz, uint32_t baud);

/* Send n bytes (polled); waits at most spin polls of TXE per byte (then sends anyway). */
void edp_stm32_uart_write(edp_usart_regs_t *u, const uint8_t *buf, size_t n, uint32_t spin);

/* Receive ring, filled by the USART's RXNE interrupt (edp_stm32_uart_irq) and
 * drained by the frame loop (edp_stm32_rx_read): EDP_STM32_RX_RING bytes =
 * 75 QUERY requests of k = 10 (54 B), room for the host's 8 in flight of up
 * to 512 B each. Each slot is 16 bits (the byte and its loss flags), so the
 * ring takes 2 x EDP_STM32_RX_RING = 8 KiB of the 128 KiB SRAM. The port
 * reports it as edp_port_t.rx_buffer, which INFO carries: the host pipelines at
 * most this many bytes of requests beyond the first
 * (host/edgedp/device/transport.py, SerialLink.learn_rx_buffer); the first
 * request goes alone when nothing is outstanding, so a maximal frame
 * (EDP_WIRE_MAX = 4,138 B, larger than the ring) streams through while the
 * frame loop drains it. A power of two. */
#define EDP_STM32_RX_RING 4096u
#if EDP_STM32_RX_RING & (EDP_STM32_RX_RING - 1u)
#error "EDP_STM32_RX_RING must be a power of two"
#endif

#define EDP_STM32_RX_LOST 0x100u  /* slot flag: bytes were lost just before this one */
#define EDP_STM32_RX_BAD  0x200u  /* slot flag: this byte came with a line error (FE, NF, PE) */

/* One writer each: the interrupt writes slots, head, mark and the counters; the
 * frame loop writes tail, poison and skip. Indices run freely (mod 2^32). */
typedef struct {
    volatile uint16_t slot[EDP_STM32_RX_RING];
    volatile uint32_t head;        /* slots written (interrupt) */
    volatile uint32_t tail;        /* slots consumed (frame loop) */
    volatile uint32_t mark;        /* EDP_STM32_RX_LOST for the next slot (overrun, full ring) */
    volatile uint32_t overruns;    /* bytes lost: ORE events and bytes that found the ring full */
    volatile uint32_t line_errors; /* bytes received with FE, NF or PE */
    uint32_t poison;               /* bytes of the invalid frame still to hand over */
    uint32_t skip;                 /* 1: dropping the rest of a damaged frame */
} edp_stm32_rx_t;

/* The RXNE interrupt's body: one SR and one DR read (which clear RXNE, ORE,
 * NF, FE and PE), the byte into the next slot with its flags, or counted as
 * lost when the ring is full. No loop, no call: its longest path is counted
 * by tests/firmware/test_stm32f4_rx_isr.py against EDP_STM32_RX_ISR_CYCLES. */
void edp_stm32_uart_irq(edp_usart_regs_t *u, edp_stm32_rx_t *r);

/* Core cycles one execution of the interrupt may take at most, entry and exit
 * included: 12 (entry) + 10 (exit) + 4 per instruction of its longest path
 * (the port's bound, EDP_STM32_CYCLES_PER_INSN in board.c) + 16 for each of
 * its two APB1 register reads: 43 instructions (34 without an error), 226
 * cycles, rounded up (docs/privacy.md §6). */
#define EDP_STM32_RX_ISR_CYCLES 256u

/* The console's baud must leave the interrupt room between two bytes (T > c,
 * below) on the slowest clock the port can run, the 16 MHz HSI fallback (the
 * only other is the 168 MHz PLL: edp_stm32_clock_init reports no third), so
 * edp_board_init's edp_stm32_rx_isr_share never fails:
 * EDP_CONSOLE_BAUD <= 560,311 (460,800 gives T = 312 cycles, 921,600 only 156). */
#if (EDP_STM32_HSI_HZ * 9u) / (EDP_CONSOLE_BAUD) <= EDP_STM32_RX_ISR_CYCLES
#error "EDP_CONSOLE_BAUD too fast for the RX interrupt at the 16 MHz HSI fallback (9 bit times <= EDP_STM32_RX_ISR_CYCLES)"
#endif
#if EDP_STM32_PLL_HZ < EDP_STM32_HSI_HZ
#error "the port's two clocks (clock.c reports no other): the HSI check above must cover the PLL too"
#endif

/* Largest share edp_stm32_rx_isr_share gives (T = c + 1: c in 16.16) and the
 * work edp_stm32_window_cycles takes without saturating (2^39 cycles: then
 * (work + c) x share < 2^40 x 2^24 fits 64 bits). */
#define EDP_STM32_RX_SHARE_MAX (EDP_STM32_RX_ISR_CYCLES << 16)
#define EDP_STM32_WINDOW_WORK_MAX ((uint64_t)1 << 39)

/* The interrupt's share of a release window: *share = c / (T - c) in 16.16
 * fixed point rounded up, with c = EDP_STM32_RX_ISR_CYCLES and T the fewest
 * core cycles between two received bytes: 9 bit times at baud (a start bit, 8
 * data bits and the half stop bit the receiver samples, less the baud
 * tolerance; RXNE comes no faster whatever the sender does), rounded down.
 * 1,304 (2.0 %) at 168 MHz and 115,200 baud, 16,879 (25.8 %) at 16 MHz,
 * 299,594 (4.57) at 16 MHz and 460,800 baud; at most EDP_STM32_RX_SHARE_MAX
 * (T = c + 1). Returns EDP_OK, or EDP_ERR_TIMING (and *share = 0) when
 * T <= c: bytes arriving at the fastest can keep the core in the interrupt,
 * and no window bounds the work (the #error above keeps the port's baud and
 * clocks out of that case). */
int edp_stm32_rx_isr_share(uint32_t sysclk_hz, uint32_t baud, uint32_t *share);

/* Cycles a release window must last for `work` cycles of work to end in it
 * while bytes arrive at the fastest: L = (W + c)(1 + share) + 1 with
 * W = work. A window of L cycles holds at most floor(L / T) + 1 interrupts,
 * and L >= W + (L / T + 1) c <=> L >= (W + c) T / (T - c) = (W + c)(1 + c / (T - c)),
 * so the work still fits; a function of work and the clock only
 * (docs/privacy.md §6). share as edp_stm32_rx_isr_share gives it; work below
 * EDP_STM32_WINDOW_WORK_MAX (the port passes at most 4 x (2^32 - 1)), else
 * (or a larger share) UINT64_MAX. */
uint64_t edp_stm32_window_cycles(uint64_t work, uint32_t share);

/* Hand up to max received bytes to buf, without waiting; returns the count.
 * Each slot is zeroed as it is read (a later RAM read finds no past request).
 * A damaged frame (a slot flagged LOST or BAD) never reaches the core as a
 * different frame: in its place the core gets 0x01, 254 x 0xFF and a 0x00,
 * which no prefix can make a valid COBS frame. A prefix leaves the decoder at
 * a code position or r = 1..254 data bytes into a block (r = 254 after a code
 * byte 0xFF): at a code position the 0x01 is an empty block and the next 0xFF
 * a code announcing 254 bytes where 253 remain; r bytes into a block, the
 * block takes the 0x01 and r - 1 x 0xFF (all non-zero) and the next 0xFF
 * announces 254 bytes where 254 - r remain. (254 x 0xFF alone would be the
 * data of a block whose code 0xFF ended the prefix.) So the core answers it
 * EDP_ERR_CRC (EDP_ERR_LEN if the prefix was already near EDP_WIRE_MAX); the
 * rest of the damaged frame, up to its 0x00, is dropped. If that 0x00 itself
 * came with a line error (FE, NF, PE: flagged BAD, so it may not have been a
 * 0x00 at all) the drop runs on to the next good 0x00, the end of the next
 * frame: two requests get the one invalid frame's answer (ERR_CRC, seq 0),
 * and the host reports both lost (docs/privacy.md §6).
 * A loss this cannot see: an overrun that sets ORE after the interrupt's SR
 * read and before its DR read is cleared by that DR read unseen, and the
 * byte is missing from its frame without a flag. It takes the interrupt
 * delayed about a byte time between its two reads (87 us at 115,200 baud);
 * the interrupt runs from SRAM (EDP_STM32_RAMFUNC), so a flash operation no
 * longer stalls its fetches, but a bus stall of that length (e.g. a debugger)
 * still could; the spliced frame is then caught only by the CRC (and the
 * length check). */
size_t edp_stm32_rx_read(edp_stm32_rx_t *r, uint8_t *buf, size_t max);

/* ---- rng.c ---- */

/* Set RNGEN (the RCC clock must be on and PLL48CLK running). */
void edp_stm32_rng_enable(edp_rng_regs_t *rng);

/* One health-checked word: EDP_ERR_ENTROPY if SECS/CECS/SEIS/CEIS is set
 * before or after the read, or DRDY does not come within spin polls. After an
 * error the RNG is restarted (flags cleared, RNGEN toggled) for a later call. */
int edp_stm32_rng_read(edp_rng_regs_t *rng, uint32_t *out, uint32_t spin);

/* Fill n bytes: the first word is read and discarded (kept only for
 * comparison), then each word must differ from the one before (FIPS 140-2
 * continuous test). EDP_OK or EDP_ERR_ENTROPY; on error buf is wiped. There is
 * no fallback source. */
int edp_stm32_rng_fill(edp_rng_regs_t *rng, uint8_t *buf, size_t n, uint32_t spin);

/* ---- backup domain: rtc.c and bkpsram.c ---- */

typedef struct {
    edp_rcc_regs_t *rcc;
    edp_pwr_regs_t *pwr;
    edp_rtc_regs_t *rtc;       /* calendar and the BKPxR store-sequence shadow */
    volatile uint8_t *sram;    /* 4 KiB backup SRAM; the store uses bytes [0, 256) */
    uint8_t sram_ready;        /* set by edp_stm32_bkpsram_enable */
} edp_stm32_bkd_t;

/* Backup-domain write access: PWREN, then PWR_CR.DBP, read back.
 * EDP_OK, or EDP_ERR_STORE when DBP does not stick. */
int edp_stm32_backup_access(edp_stm32_bkd_t *b);

/* Days since 1970-01-01 of a proleptic Gregorian date / the date of a day. */
int32_t edp_stm32_days_from_civil(int32_t y, uint32_t m, uint32_t d);
void edp_stm32_civil_from_days(int32_t z, int32_t *y, uint32_t *m, uint32_t *d);

/* Boot: if no RTC clock is selected yet, start the LSE oscillator (no wait:
 * it needs up to 2 s; set_time waits for it). Requires backup access. Never
 * writes RCC_BDCR.RTCEN = 0 (neither does set_time): a running RTC is not
 * stopped. A backup domain that was reset (VBAT lost; Renode's `machine
 * Reset`, which clears BDCR and restarts its calendar at 2020-01-01) has no
 * RTC clock selected, so day() refuses (EDP_ERR_TIME) until SET_TIME. */
void edp_stm32_rtc_init(edp_stm32_bkd_t *b);

/* UTC day index from the calendar. EDP_ERR_TIME unless LSE is ready, the RTC
 * runs on it (RTCEN, RTCSEL = LSE, 1 Hz prescalers, 24 h format, not in init
 * mode), the calendar was initialised (INITS), the shadow registers
 * synchronised (RSF within spin polls) and TR/DR hold a valid BCD time/date. */
int edp_stm32_rtc_day(edp_stm32_bkd_t *b, uint32_t *day, uint32_t spin);
/* The same clock in seconds since 1970 (UTC); the same checks and errors. */
int edp_stm32_rtc_seconds(edp_stm32_bkd_t *b, uint64_t *secs, uint32_t spin);

/* Set the calendar (UTC, 24 h) to unix_seconds, which must lie in
 * [2001-01-01, 2100-01-01) (the RTC has a two-digit year; year 00 reads as
 * uninitialised). Starts LSE if needed and waits for it (spin_lse polls),
 * selects it as the RTC clock if none is selected (a different clock already
 * selected -> EDP_ERR_TIME: changing it needs a backup-domain reset, which
 * would also erase the store shadow), then unlocks (0xCA, 0x53), enters init
 * mode (INITF within spin polls), writes prescalers, TR and DR, exits and
 * relocks. Afterwards the calendar must read back the day set (or the next).
 * EDP_OK or EDP_ERR_TIME. */
int edp_stm32_rtc_set(edp_stm32_bkd_t *b, uint64_t unix_seconds, uint32_t spin, uint32_t spin_lse);

/* Backup SRAM: backup access, BKPSRAMEN, backup regulator on (BRE) and ready
 * (BRR within spin polls), so the store survives on VBAT. Sets b->sram_ready.
 * EDP_OK or EDP_ERR_STORE. */
int edp_stm32_bkpsram_enable(edp_stm32_bkd_t *b, uint32_t spin);

/* The store's sequence shadow: BKP[EDP_STM32_SHADOW_BKP] = sequence,
 * BKP[EDP_STM32_SHADOW_BKP + 1] = ~sequence (a blank or mismatched pair means
 * "no shadow"). */
#ifndef EDP_STM32_SHADOW_BKP
#define EDP_STM32_SHADOW_BKP 0
#endif

/* Port store callbacks on backup SRAM bytes [0, EDP_STORE_SIZE) (record slots and audit ring).
 * Rollback check: while a valid shadow exists, store_read fails with
 * EDP_ERR_STORE unless the newest valid slot's sequence is at least the shadow
 * (serial-number order): a backup SRAM that was rolled back, restored from an
 * older copy or lost while the backup registers survived reads as an error,
 * never as an older budget. store_write updates the shadow after the write
 * that completes a valid slot newer than it; the shadow never moves back. */
int edp_stm32_store_read(edp_stm32_bkd_t *b, uint32_t off, void *buf, uint32_t n);
int edp_stm32_store_write(edp_stm32_bkd_t *b, uint32_t off, const void *buf, uint32_t n);

/* ---- flash.c: the flash high-water log's two sectors (src/flog.h) ---- */

/* Log sectors: 9 and 10 (128 KiB each, 0x080A0000-0x080DFFFF), reserved by
 * stm32f4.ld; code lives in sectors 0-8, the device key in sector 11. */
#ifndef EDP_STM32_FLOG_SECTOR
#define EDP_STM32_FLOG_SECTOR 9u
#endif
#define EDP_STM32_FLOG_SECTOR_SIZE (128u * 1024u)

/* Poll budgets of the flash controller's BSY bit at 168 MHz (>= 4 cycles a poll):
 *   PROGRAM  one word (x32): >= 2.4 ms (RM0090/datasheet: 16 us typical, 100 us max)
 *   ERASE    one 128 KiB sector (x32): >= 4 s (1 s typical, 2 s max) */
#ifndef EDP_STM32_SPIN_PROGRAM
#define EDP_STM32_SPIN_PROGRAM 100000u
#endif
#ifndef EDP_STM32_SPIN_ERASE
#define EDP_STM32_SPIN_ERASE 170000000u
#endif

typedef struct {
    edp_flash_regs_t *regs;
    volatile uint32_t *base;   /* first word of log sector 0 (memory-mapped flash) */
    uint32_t first_sector;     /* sector number (SNB) of log sector 0; log sector 1 is the next */
    uint32_t sector_size;      /* bytes per log sector */
    uint32_t spin_program;     /* BSY polls per word program */
    uint32_t spin_erase;       /* BSY polls per sector erase */
    void (*before_erase)(void);  /* optional: called before each erase (watchdog refresh) */
} edp_stm32_flash_t;

/* Bind the three edp_flash_t callbacks to the controller (ctx = d). Every
 * operation unlocks the controller (KEYR: KEY1, KEY2; LOCK must clear), waits
 * for BSY within its spin budget, clears stale error flags, programs with
 * PSIZE x32 (VDD 2.7-3.6 V), checks OPERR/WRPERR/PGAERR/PGPERR/PGSERR and reads
 * the result back, and relocks (CR = LOCK) whatever the outcome.
 *   program: word by word (PG), each word must read back as written;
 *   erase:   SER with SNB = first_sector + sector, STRT, then every word must read 0xFFFFFFFF.
 * Errors: EDP_ERR_STORE (locked, busy past the budget, an error flag, a
 * mismatch, off/n not word-aligned or outside the two sectors). */
void edp_stm32_flash_bind(edp_flash_t *f, edp_stm32_flash_t *d);

/* ---- cycles.c ---- */

/* Enable DWT CYCCNT (DEMCR.TRCENA, CYCCNTENA) and check that it advances over
 * a short busy loop. Returns EDP_TICK_DWT, or EDP_TICK_SYSTICK when there is no
 * cycle counter or it stands still (QEMU; Renode without a DWT peripheral):
 * the caller then starts SysTick. */
int edp_stm32_cycles_init(volatile uint32_t *demcr, edp_dwt_regs_t *dwt);

#endif

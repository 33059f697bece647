/* QEMU netduinoplus2 port (test builds only).
 *
 * Uses only what QEMU 7.2 models: USART1 (first -serial), SysTick, RAM.
 * No RCC, RTC, RNG, DWT or backup SRAM access anywhere.
 *  - entropy: the documented test seed (bytes 0x00..0x1f); TEST_SEED re-keys.
 *  - clock: SysTick at 168 MHz plus an epoch; boots at EDP_QEMU_TEST_EPOCH
 *    (2026-01-01T00:00:00Z) unless a SET_TIME survived a warm reset in .noinit.
 *  - store: EDP_STORE_SIZE bytes (record slots and audit ring) in .noinit RAM, kept across QMP system_reset;
 *  - flash high-water log: a RAM NOR model (ramflash.h) in .noinit, formatted
 *    on the first boot of the process (QEMU's flash is read-only);
 *  - release window: TIM2's counter, which QEMU clocks at 1 GHz of virtual
 *    time; under -icount shift=3 an instruction is 8 ns, so the window is
 *    insns x 8 ns after the frame's end, and window_close returns exactly
 *    there (one read, then a counted delay). QEMU 7.2's timer interrupt fires
 *    at the wrong time (stm32f2xx_timer adds the current time twice), so the
 *    port never enables it;
 *  - admin nonce key: SHA-256 of the 32 bytes the host's QEMU launcher writes
 *    at 0x2001FFE0 (generic loader) and a .noinit boot counter, so the nonce
 *    differs across processes and warm resets; all-zero bytes (no loader) =
 *    EDP_ERR_ENTROPY, every admin command refused;
 *  - dead stack: zeroed (stackwipe.h) by the first UART read after
 *    anything was sent. */

#include "board.h"
#include "edgedp/error.h"
#include "sha256.h"  /* the core's SHA-256 (core/src: this test port is the project's own) */
#include "nvic.h"
#include "ramflash.h"
#include "stackwipe.h"
#include "systick.h"
#include "test_keys.h"

/* A production configuration on this port (EDP_TEST_BUILD=0) exists only to
 * measure the release timing under QEMU (build/qemu-timing, tests/hil/
 * test_release_timing.py): its entropy is still the public test seed. */
#if !EDP_TEST_BUILD && !EDP_QEMU_TIMING_IMAGE
#error "the qemu port is a test port: build it with EDP_TEST_BUILD=1 (or EDP_QEMU_TIMING_IMAGE=1)"
#endif

#define USART1_SR (*(volatile uint32_t *)0x40011000u)
#define USART1_DR (*(volatile uint32_t *)0x40011004u)
#define USART1_CR1 (*(volatile uint32_t *)0x4001100Cu)
#define SR_RXNE (1u << 5)
#define SR_TXE (1u << 7)
#define CORE_HZ 168000000u
#define CR1_RXNEIE (1u << 5)
/* USART1's interrupt line on the STM32F405 QEMU models (RM0090 table 61). The firmware never
 * takes it (no handler runs: it is enabled only while PRIMASK is set, and disabled again before
 * PRIMASK is cleared); its pending state only wakes the WFI of edp_board_uart_read. */
#define USART1_IRQ 37u
#define EDP_QEMU_TEST_EPOCH 1767225600u
#define CLOCK_MAGIC 0x4B4C4345u
#define FLASH_MAGIC 0x48534C46u
#define FLASH_SECTOR 1008u  /* 28 log slots per sector */

extern const volatile uint8_t edp_qemu_host_entropy[32];

static uint8_t store[EDP_STORE_SIZE] __attribute__((section(".noinit")));
static struct {
    uint32_t magic;
    uint32_t check;  /* ~magic ^ seconds low word */
    uint64_t seconds_at_boot;
} clock_rec __attribute__((section(".noinit")));

static struct {
    uint32_t magic;
    uint32_t boots;
    uint8_t mem[2 * FLASH_SECTOR];
} flash_ram __attribute__((section(".noinit")));
static edp_ramflash_t flash_model;
static edp_flash_t flash;

static uint64_t boot_seconds;

static int auth_entropy(void *ctx, uint8_t key[32])
{
    edp_sha256_t h;
    uint8_t host[32], any = 0;
    uint32_t i;
    (void)ctx;
    for (i = 0; i < 32; i++) any |= host[i] = edp_qemu_host_entropy[i];
    if (!any) return EDP_ERR_ENTROPY;
    flash_ram.boots++;
    edp_sha256_init(&h);
    edp_sha256_update(&h, host, sizeof host);
    edp_sha256_update(&h, &flash_ram.boots, sizeof flash_ram.boots);
    edp_sha256_final(&h, key);
    edp_wipe(host, sizeof host);
    return EDP_OK;
}

static int entropy(void *ctx, uint8_t key[32])
{
    uint32_t i;
    (void)ctx;
    for (i = 0; i < 32; i++) key[i] = edp_test_seed[i];
    return EDP_OK;
}

static uint64_t now_seconds(void)
{
    return boot_seconds + edp_systick_now() / CORE_HZ;
}

static int day(void *ctx, uint32_t *d)
{
    (void)ctx;
    *d = (uint32_t)(now_seconds() / 86400u);
    return EDP_OK;
}

static int seconds(void *ctx, uint64_t *s)
{
    (void)ctx;
    *s = now_seconds();
    return EDP_OK;
}

static int set_time(void *ctx, uint64_t secs)
{
    uint64_t up = edp_systick_now() / CORE_HZ;
    (void)ctx;
    boot_seconds = secs > up ? secs - up : 0;
    clock_rec.magic = CLOCK_MAGIC;
    clock_rec.seconds_at_boot = boot_seconds;
    clock_rec.check = ~CLOCK_MAGIC ^ (uint32_t)boot_seconds;
    return EDP_OK;
}

static int store_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    uint8_t *p = buf;
    (void)ctx;
    if (off + n > sizeof store) return EDP_ERR_STORE;
    while (n--) *p++ = store[off++];
    return EDP_OK;
}

static int store_write(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    const uint8_t *p = buf;
    (void)ctx;
    if (off + n > sizeof store) return EDP_ERR_STORE;
    while (n--) store[off++] = *p++;
    return EDP_OK;
}

static int device_key(void *ctx, const uint8_t **key)
{
    (void)ctx;
    *key = edp_test_device_key;
    return EDP_OK;
}

/* QEMU's USART (hw/char/stm32f2xx_usart.c) sends a DR write at once and never
 * clears TXE ("I/O are currently synchronous"), so TXE is checked once per
 * write, not per byte (a bounded wait, cold here), and the bytes go four per
 * pass; each DR write is a word whose low byte is the character. */
static void uart_write(void *ctx, const uint8_t *buf, size_t n)
{
    const uint8_t *end = buf + n, *words_end = buf + (n & ~(size_t)3);
    (void)ctx;
    edp_cortexm_sent();
    if (!(USART1_SR & SR_TXE)) {
        uint32_t spin = 100000u;
        while (!(USART1_SR & SR_TXE) && --spin) {
        }
    }
    for (; buf != words_end; buf += 4) {
        USART1_DR = buf[0];
        USART1_DR = buf[1];
        USART1_DR = buf[2];
        USART1_DR = buf[3];
    }
    while (buf != end) USART1_DR = *buf++;
}

#define TIM2_CNT (*(volatile uint32_t *)0x40000024u)  /* prescaler 0, ARR 0 from reset: ns, no interrupts */
#define SHPR3 (*(volatile uint32_t *)0xE000ED20u)       /* SysTick priority: bits 31..24 */
#define NS_PER_INSN 8u    /* -icount shift=3 (edgedp.device.targets.qemu) */
#define MASK_SYSTICK 0x80u

static uint32_t window_start;  /* TIM2 count at the frame's end */

static void window_open(void *ctx)
{
    (void)ctx;
    window_start = TIM2_CNT;
}

/* Exactly 7 + n instructions (under -icount each is NS_PER_INSN of virtual
 * time): n / 128 rounds of a 128-instruction loop, then the rest: one nop if
 * it is odd and half of it in rounds of a two-instruction loop. */
static void delay_insns(uint32_t n)
{
    uint32_t q;
    __asm__ volatile(
        "lsrs %1, %0, #7\n"
        "and %0, %0, #127\n"
        "cmp %1, #0\n"
        "beq 2f\n"
        "1: subs %1, %1, #1\n"
        ".rept 126\n nop\n .endr\n"
        "bne 1b\n"
        "2: lsrs %0, %0, #1\n"
        "bcc 3f\n"
        "nop\n"
        "3: cbz %0, 5f\n"
        "4: subs %0, %0, #1\n"
        "bne 4b\n"
        "5:\n"
        : "+l"(n), "=&l"(q) : : "cc");
}

/* Read TIM2 once and spend exactly the instructions left to the end: under
 * -icount the return is at end + a constant, whatever came before. SysTick's
 * wrap interrupt is held off meanwhile (BASEPRI), so nothing else runs. */
static int window_close(void *ctx, uint32_t insns)
{
    uint32_t span = insns > 0x3FFFFFFFu / NS_PER_INSN ? 0x3FFFFFFFu : insns * NS_PER_INSN, end = span, elapsed;
    int late = 0;
    (void)ctx;
    __asm__ volatile("msr basepri, %0" : : "r"(MASK_SYSTICK) : "memory");
    elapsed = TIM2_CNT - window_start;
    while (elapsed >= end) {  /* the ladder: the first doubling still ahead */
        end *= 2u;
        late = 1;
    }
    delay_insns((end - elapsed) / NS_PER_INSN);
    __asm__ volatile("msr basepri, %0" : : "r"(0u) : "memory");
    return late;
}

static void tick_unit(void *ctx, uint32_t *hz, uint8_t *kind)
{
    (void)ctx;
    *hz = CORE_HZ;
    *kind = EDP_TICK_SYSTICK;
}

static const edp_port_t port = {
    .entropy = entropy,
    .ticks = edp_systick_ticks,
    .tick_unit = tick_unit,
    .day = day,
    .seconds = seconds,
    .set_time = set_time,
    .store_read = store_read,
    .store_write = store_write,
    .device_key = device_key,
    .uart_write = uart_write,
    .board = "qemu-netduinoplus2",
    .auth_entropy = auth_entropy,
    .flash = &flash,
    .window_open = window_open,
    .window_close = window_close,
    /* the fixed part of a window here: at least 1.5 x the longest measured
     * (a reseed, the store commit, the flash-log write; tests/firmware/test_deadline.py) */
    .window_fixed = 6400u,
};

const edp_port_t *edp_board_init(void)
{
    USART1_CR1 = (1u << 13) | CR1_RXNEIE | (1u << 3) | (1u << 2); /* UE | RXNEIE | TE | RE */
    edp_systick_start();
    SHPR3 = (SHPR3 & 0x00FFFFFFu) | (MASK_SYSTICK << 24);  /* maskable by BASEPRI */
    if (clock_rec.magic == CLOCK_MAGIC && clock_rec.check == (~CLOCK_MAGIC ^ (uint32_t)clock_rec.seconds_at_boot))
        boot_seconds = clock_rec.seconds_at_boot;
    else
        boot_seconds = EDP_QEMU_TEST_EPOCH;
    edp_ramflash_bind(&flash, &flash_model, flash_ram.mem, FLASH_SECTOR);
    if (flash_ram.magic != FLASH_MAGIC) {
        edp_ramflash_format(&flash);
        flash_ram.magic = FLASH_MAGIC;
    }
    return &port;
}

/* Sleep until a byte arrives or SysTick wraps (WFI), instead of polling: every SR read is an
 * MMIO access under QEMU's global lock, which its main loop needs to hand over the next received
 * byte, so polling without a pause starved it (docs/history/benchmarks-2026.md §10), and an idle
 * firmware kept a host core busy. With PRIMASK set a pending interrupt wakes WFI without being
 * taken; USART1's is enabled in the NVIC only meanwhile (its pending bit cleared first, so a
 * byte that came before is seen by the SR read and one that comes after pends it), and
 * SysTick's handler runs once PRIMASK is restored. Whether it sleeps depends only on whether a
 * byte has arrived: never on a request, the model, the noise or a secret. Under -icount the
 * host runs QEMU with sleep=on, so an idle device's clock follows real time
 * (edgedp.device.targets.qemu). */
static void wait_for_rx(void)
{
    uint32_t primask;
    __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask) : : "memory");
    edp_nvic_unpend(USART1_IRQ);
    edp_nvic_enable(USART1_IRQ);
    if (!(USART1_SR & SR_RXNE))
        __asm__ volatile("dsb\n wfi" : : : "memory");
    edp_nvic_disable(USART1_IRQ);
    edp_nvic_unpend(USART1_IRQ);
    __asm__ volatile("dsb\n isb\n msr primask, %0" : : "r"(primask) : "memory");
}

int edp_board_uart_read(uint8_t *buf, size_t max)
{
    size_t n = 0;
    edp_cortexm_wipe_if_sent();  /* an answer has left: its computation's stack goes (stackwipe.h) */
    while (n < max && (USART1_SR & SR_RXNE)) buf[n++] = (uint8_t)USART1_DR;
    if (n == 0)
        wait_for_rx();
    return (int)n;
}

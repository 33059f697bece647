/* QEMU netduinoplus2 port (test builds only).
 *
 * Uses only what QEMU 7.2 models: USART1 (first -serial), SysTick, RAM.
 * No RCC, RTC, RNG, DWT or backup SRAM access anywhere.
 *  - entropy: the documented test seed (bytes 0x00..0x1f); TEST_SEED re-keys.
 *  - clock: SysTick at 168 MHz plus an epoch; boots at EDP_QEMU_TEST_EPOCH
 *    (2026-01-01T00:00:00Z) unless a SET_TIME survived a warm reset in .noinit.
 *  - store: 256 bytes in .noinit RAM, kept across QMP system_reset;
 *  - flash high-water log: a RAM NOR model (ramflash.h) in .noinit, formatted
 *    on the first boot of the process (QEMU's flash is read-only);
 *  - admin nonce key: SHA-256 of the 32 bytes the host's QEMU launcher writes
 *    at 0x2001FFE0 (generic loader) and a .noinit boot counter, so the nonce
 *    differs across processes and warm resets; all-zero bytes (no loader) =
 *    EDP_ERR_ENTROPY, every admin command refused. */
#include "board.h"
#include "edgedp/error.h"
#include "edgedp/sha256.h"
#include "edgedp/store.h"
#include "ramflash.h"
#include "systick.h"
#include "test_keys.h"

#if !EDP_TEST_BUILD
#error "the qemu port is a test port: build it with EDP_TEST_BUILD=1"
#endif

#define USART1_SR (*(volatile uint32_t *)0x40011000u)
#define USART1_DR (*(volatile uint32_t *)0x40011004u)
#define USART1_CR1 (*(volatile uint32_t *)0x4001100Cu)
#define SR_RXNE (1u << 5)
#define SR_TXE (1u << 7)
#define CORE_HZ 168000000u
#define EDP_QEMU_TEST_EPOCH 1767225600u
#define CLOCK_MAGIC 0x4B4C4345u
#define FLASH_MAGIC 0x48534C46u
#define FLASH_SECTOR 1008u  /* 28 log slots per sector */

extern const volatile uint8_t edp_qemu_host_entropy[32];

static uint8_t store[2 * EDP_STORE_SLOT_SIZE] __attribute__((section(".noinit")));
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

static uint32_t ticks(void *ctx)
{
    (void)ctx;
    return (uint32_t)edp_systick_now();
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

static void uart_write(void *ctx, const uint8_t *buf, size_t n)
{
    (void)ctx;
    while (n--) {
        uint32_t spin = 100000u;
        while (!(USART1_SR & SR_TXE) && --spin) {
        }
        USART1_DR = *buf++;
    }
}

static void tick_unit(void *ctx, uint32_t *hz, uint8_t *kind)
{
    (void)ctx;
    *hz = CORE_HZ;
    *kind = EDP_TICK_SYSTICK;
}

static const edp_port_t port = {
    .entropy = entropy,
    .ticks = ticks,
    .tick_unit = tick_unit,
    .day = day,
    .set_time = set_time,
    .store_read = store_read,
    .store_write = store_write,
    .device_key = device_key,
    .uart_write = uart_write,
    .board = "qemu-netduinoplus2",
    .auth_entropy = auth_entropy,
    .flash = &flash,
};

const edp_port_t *edp_board_init(void)
{
    USART1_CR1 = (1u << 13) | (1u << 3) | (1u << 2); /* UE | TE | RE */
    edp_systick_start();
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

int edp_board_uart_read(uint8_t *buf, size_t max)
{
    size_t n = 0;
    while (n < max && (USART1_SR & SR_RXNE)) buf[n++] = (uint8_t)USART1_DR;
    return (int)n;
}

/* Template port: copy this folder to start a new board. Every function must
 * return in bounded time; return the EDP_ERR_* named in port.h on failure.
 * A port needs the core's public headers only (edgedp/port.h through board.h,
 * edgedp/error.h; tests/consumer builds this one with nothing else). */
#include "board.h"
#include "edgedp/error.h"

static int entropy(void *ctx, uint8_t key[32]) { (void)ctx; (void)key; return EDP_ERR_ENTROPY; }
static uint32_t ticks(void *ctx) { (void)ctx; return 0; }
static int day(void *ctx, uint32_t *d) { (void)ctx; (void)d; return EDP_ERR_TIME; }
static int set_time(void *ctx, uint64_t s) { (void)ctx; (void)s; return EDP_ERR_TIME; }
static int store_read(void *ctx, uint32_t off, void *buf, uint32_t n) { (void)ctx; (void)off; (void)buf; (void)n; return EDP_ERR_STORE; }
static int store_write(void *ctx, uint32_t off, const void *buf, uint32_t n) { (void)ctx; (void)off; (void)buf; (void)n; return EDP_ERR_STORE; }
static int device_key(void *ctx, const uint8_t **key) { (void)ctx; (void)key; return EDP_ERR_AUTH; }
static void uart_write(void *ctx, const uint8_t *buf, size_t n) { (void)ctx; (void)buf; (void)n; }

static void tick_unit(void *ctx, uint32_t *hz, uint8_t *kind) { (void)ctx; *hz = 1; *kind = EDP_TICK_SYSTICK; }

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
    .board = "template",
    .auth_entropy = 0,  /* NULL: the admin nonce key comes from entropy() (a hardware RNG) */
    .flash = 0,         /* or two flash sectors for the high-water log (edp_flash_t, port.h) */
    .window_open = 0,   /* release timing (port.h): without both, a production build */
    .window_close = 0,  /* refuses QUERY and INFER with EDP_ERR_TIMING */
    .window_fixed = 0,  /* the fixed part of a window, measured on the board (port.h) */
};

const edp_port_t *edp_board_init(void) { return &port; }

int edp_board_uart_read(uint8_t *buf, size_t max) { (void)buf; (void)max; return 0; }

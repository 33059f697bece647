/* The board port as seen by the core: one struct of callbacks (littlefs style).
 *
 * The core never includes a board header; every board defines one static const
 * edp_port_t with designated initialisers and hands it to app/ from
 * edp_board_init (ports/common/board.h). Every callback returning int returns >= 0 on
 * success or a negative EDP_ERR_* that the core passes through unchanged. No
 * callback may block for longer than a bounded, documented time. */
#ifndef EDGEDP_PORT_H
#define EDGEDP_PORT_H
#include <stddef.h>
#include <stdint.h>

/* Bytes of the persistent store every port holds (store_read, store_write): the
 * two record slots and the audit ring the core lays out in them (src/store.h,
 * which checks this size against its layout). */
#define EDP_STORE_SIZE 896u  /* bytes every port's store holds */

/* The port's NOR flash for the core's high-water log (src/flog.h): two sectors
 * at offsets 0 and sector_size. Every callback returns >= 0 or a negative EDP_ERR_*. */
typedef struct edp_flash {
    void *ctx;              /* passed to every callback */
    uint32_t sector_size;   /* bytes per sector, a multiple of 4, >= 2 * EDP_FLOG_RECORD */

    /* Read n bytes at byte offset off (off + n <= 2 * sector_size). */
    int (*read)(void *ctx, uint32_t off, void *buf, uint32_t n);

    /* Program n bytes at off (off and n multiples of 4). NOR semantics: a
     * program can only clear bits; the log programs erased slots only. */
    int (*program)(void *ctx, uint32_t off, const void *buf, uint32_t n);

    /* Erase sector 0 or 1 (every byte reads 0xFF afterwards). */
    int (*erase)(void *ctx, uint32_t sector);
} edp_flash_t;

enum edp_tick_kind {
    EDP_TICK_SYSTICK = 0,  /* SysTick on the core clock (QEMU: 1.344 ticks per instruction under -icount shift=3) */
    EDP_TICK_DWT = 1,      /* DWT CYCCNT: real core cycles */
    EDP_TICK_HOST_NS = 2,  /* host monotonic clock, nanoseconds */
};

typedef struct edp_port {
    void *ctx;  /* passed to every callback */

    /* Fill key with 32 bytes of fresh key material for the DRBG.
     * EDP_ERR_ENTROPY on any health-test or timeout failure. */
    int (*entropy)(void *ctx, uint8_t key[32]);

    /* Free-running counter for measuring the DP step (unit: tick_unit). */
    uint32_t (*ticks)(void *ctx);

    /* The unit of ticks(), fixed after edp_board_init: *hz = ticks per second,
     * *kind = enum edp_tick_kind. */
    void (*tick_unit)(void *ctx, uint32_t *hz, uint8_t *kind);

    /* Current UTC day index (days since 1970-01-01), or EDP_ERR_TIME when the
     * clock is not set or cannot be trusted. */
    int (*day)(void *ctx, uint32_t *day);

    /* Optional: the clock behind day(), in seconds since 1970 (UTC), or
     * EDP_ERR_TIME; day() must be seconds() / 86400 (the core takes the day
     * from it when it reads both). It paces the rate limit; NULL: the board
     * cannot be rate limited (a RATE with burst > 0 is refused with
     * EDP_ERR_BAD_VALUE). */
    int (*seconds)(void *ctx, uint64_t *unix_seconds);

    /* Set the clock to unix_seconds (called only after authentication).
     * EDP_ERR_TIME if the clock hardware refuses. */
    int (*set_time)(void *ctx, uint64_t unix_seconds);

    /* Read / write n bytes of the persistent store at byte offset off
     * (0 <= off, off + n <= EDP_STORE_SIZE: the two record slots and the audit ring, store.h). EDP_ERR_STORE on failure. */
    int (*store_read)(void *ctx, uint32_t off, void *buf, uint32_t n);
    int (*store_write)(void *ctx, uint32_t off, const void *buf, uint32_t n);

    /* Point *key at the 32-byte device HMAC key; EDP_ERR_AUTH if none is provisioned. */
    int (*device_key)(void *ctx, const uint8_t **key);

    /* Send n bytes on the external interface (blocking, bounded). */
    void (*uart_write)(void *ctx, const uint8_t *buf, size_t n);

    const char *board;   /* short board name reported by INFO */

    /* Key material for the admin nonce generator, fresh at every boot. NULL:
     * use entropy (production ports: the hardware RNG). Test ports, whose
     * entropy is the fixed test seed, must supply a source that differs per
     * boot; EDP_ERR_ENTROPY refuses every admin command. */
    int (*auth_entropy)(void *ctx, uint8_t key[32]);

    /* The two flash sectors of the high-water log (flog.h), or NULL for a port
     * without one (then a lost store restarts spend and counter from 0). */
    const edp_flash_t *flash;

    /* Release timing (EDP_RELEASE_DEADLINE builds, core/src/deadline.h).
     * window_open marks the start of a window: the core calls it when a frame's
     * last byte has been taken from the UART. window_close(insns) returns when
     * `insns` executed instructions' worth of time (by the board's bound on time
     * per instruction) has passed since the mark, at a moment that does not
     * depend on when it was called, and returns 0; called after that moment
     * (an overrun) it returns 1 at the first doubling of the window still ahead
     * (mark + 2^j x span), so release times stay on a fixed ladder. Both must
     * return within a bounded time even if the timer stops. NULL on a port that
     * cannot: such builds refuse QUERY and INFER with EDP_ERR_TIMING. */
    void (*window_open)(void *ctx);
    int (*window_close)(void *ctx, uint32_t insns);
    /* Instructions the fixed part of a window may take on this port: the
     * charge with a reseed (entropy), the store commit and the flash-log write
     * (the port's callbacks included), the response's header and the window
     * calls themselves, measured on the port (host/edgedp/bench/deadline.py)
     * with a margin; 0: EDP_DEADLINE_FIXED_DEFAULT (deadline.h). */
    uint32_t window_fixed;

    /* Bytes of requests the port holds while the core computes an answer (a
     * receive ring filled by interrupt), reported by INFO (rx_buffer) so that a
     * host pipelines requests within them; 0: bytes that arrive meanwhile may be
     * lost (a polled UART), the host sends one request at a time. */
    uint32_t rx_buffer;
} edp_port_t;

#endif

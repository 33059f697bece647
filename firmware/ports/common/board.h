/* The board interface: what app/ needs from every board port (ports -> core only).
 *
 * A port lives in ports/<name>/, implements these two functions and defines
 * its edp_port_t (core/include/edgedp/port.h) as a static const with
 * designated initialisers. ports/template/ is the empty starting point for a
 * new board. */
#ifndef EDGEDP_BOARD_H
#define EDGEDP_BOARD_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/port.h"

/* Bring up clocks, console UART, timers, entropy and store hardware and return
 * the board's port, every field set. Must return within bounded time even when
 * hardware does not respond (every poll has a timeout); failures surface later
 * as EDP_ERR_* from the port callbacks. */
const edp_port_t *edp_board_init(void);

/* Copy up to max received console bytes into buf without waiting for more
 * than the board's poll interval. Returns the count (0 if none) or a negative
 * value when input has ended for good (posix port: end of stdin). */
int edp_board_uart_read(uint8_t *buf, size_t max);

#endif

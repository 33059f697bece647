/* The board interface: what app/ needs from every board port (boards -> core only).
 *
 * A port lives in boards/<name>/, implements these two functions and fills an
 * edp_port_t (core/include/edgedp/port.h). boards/template/ is the empty
 * starting point for a new board. */
#ifndef EDGEDP_BOARD_H
#define EDGEDP_BOARD_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/port.h"

/* Bring up clocks, console UART, timers, entropy and store hardware, and fill
 * every field of *port. Must return within bounded time even when hardware
 * does not respond (every poll has a timeout); failures surface later as
 * EDP_ERR_* from the port callbacks. */
void edp_board_init(edp_port_t *port);

/* Copy up to max received console bytes into buf without waiting for more
 * than the board's poll interval. Returns the count (0 if none) or a negative
 * value when input has ended for good (host port: end of stdin). */
int edp_board_uart_read(uint8_t *buf, size_t max);

#endif

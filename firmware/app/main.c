/* The device program shared by every board: init, banner, frame loop. */
#include <string.h>

#include "app_model.h"
#include "board.h"
#include "edgedp/device.h"
#include "edgedp/model.h"
#include "edgedp/options.h"
#if EDP_TEST_BUILD
#include "naive.h"
#endif

static edp_device_t device;

/* One human-readable line between 0x00 delimiters (frame readers discard it;
 * Renode's Wait For Line On Uart matches it). */
static void banner(const edp_port_t *port)
{
    static const char head[] = "\0edgedp " EDP_FIRMWARE_VERSION " board=";
#if EDP_TEST_BUILD
    static const char tail[] = " build=test\r\n";
#else
    static const char tail[] = " build=production\r\n";
#endif
    static const uint8_t zero = 0;
    port->uart_write(port->ctx, (const uint8_t *)head, sizeof head - 1);
    port->uart_write(port->ctx, (const uint8_t *)port->board, strlen(port->board));
    port->uart_write(port->ctx, (const uint8_t *)tail, sizeof tail - 1);
    port->uart_write(port->ctx, &zero, 1);
}

int main(void)
{
    const edp_port_t *port = edp_board_init();
    uint8_t buf[64];
    int n;
    banner(port);
    edp_device_init(&device, port);
    edp_device_set_model(&device, edp_app_model);
#if EDP_TEST_BUILD
    edp_device_set_naive(&device, edp_naive_laplace);
#endif
    /* buf is wiped once the core has taken it (the core wipes its own copy of
     * a request likewise): a later RAM read finds no past request in it. */
    while ((n = edp_board_uart_read(buf, sizeof buf)) >= 0)
        if (n > 0) {
            edp_device_rx(&device, buf, (size_t)n);
            edp_wipe(buf, (size_t)n);
        }
    return 0;
}

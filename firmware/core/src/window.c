/* The release window of an external answer (window.h). */
#include "window.h"

#include "deadline.h"
#include "edgedp/error.h"

void edp_window_open(edp_dev_t *d)
{
    d->prepared = 0;
    d->window_pending = 0;
    if (EDP_RELEASE_DEADLINE && d->port->window_open) d->port->window_open(d->port->ctx);
}

int edp_window_arm(edp_dev_t *d, const edp_mech_plan_t *plan, uint32_t n_in, uint32_t mode,
                   uint32_t arg, uint32_t model_insns)
{
    if (!EDP_RELEASE_DEADLINE) return EDP_OK;
    if (!d->port->window_open || !d->port->window_close) return EDP_ERR_TIMING;
    d->window_insns = edp_deadline_answer(plan->noise_insns, n_in, plan->k, mode, arg, model_insns,
                                          d->prepared ? plan->prepare_insns : 0u,
                                          d->port->window_fixed ? d->port->window_fixed : EDP_DEADLINE_FIXED_DEFAULT);
    d->window_pending = 1;
    return EDP_OK;
}

void edp_window_send(void *ctx, const uint8_t *p, size_t n)
{
    edp_dev_t *d = ctx;
    const edp_port_t *port = d->port;
    if (d->window_pending) {
        d->window_pending = 0;
        if (port->window_close(port->ctx, d->window_insns)) d->overruns++;
    }
    port->uart_write(port->ctx, p, n);
}

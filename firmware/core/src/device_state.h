/* The device's state (core-internal): what edp_device_t (edgedp/device.h)
 * holds, opaque to the application, which only allocates it.
 *
 * edp_device_t is storage of EDP_DEVICE_SIZE bytes aligned for
 * EDP_DEVICE_ALIGN; device.c checks at compile time that this struct fits it
 * and needs no stricter alignment. Every core function reaches the state
 * through edp_dev(). The device's concerns share this one struct, each in its
 * own source with a header that says which fields it owns:
 *   device.c  dispatch: boot, frames in and out, INFO, BUDGET, STATE
 *             (port, rec, slot, store_state, store_ok, rx*, tx, model)
 *   answer.h  the external answers QUERY and INFER and the test commands
 *   auth.h    admin authentication: the nonce, CHALLENGE, the admin commands
 *   rate.h    the rate limit of external answers
 *   audit.h   the audit log's events
 *   mark.h    the flash log's mark of the spend and the counter
 *   window.h  the release window of an external answer */
#ifndef EDGEDP_DEVICE_STATE_H
#define EDGEDP_DEVICE_STATE_H
#include <stddef.h>
#include <stdint.h>

#include "drbg.h"
#include "edgedp/device.h"
#include "edgedp/error.h"
#include "flog.h"
#include "mech.h"
#include "proto.h"
#include "store.h"

/* Default record of a test build's blank store (documented in docs/protocol.md). */
#define EDP_TEST_DEFAULT_EPS_MICRO 1000000u
#define EDP_TEST_DEFAULT_DAILY_CAP 1000000000u

struct edp_device_state {
    const edp_port_t *port;
    edp_drbg_t drbg;
    edp_record_t rec;
    uint32_t slot;
    uint8_t store_state;   /* enum edp_store_state found at boot */
    uint8_t store_ok;      /* record usable for external output */
    uint8_t entropy_ok;
    uint8_t plan_valid;
    uint8_t auth_ok;       /* auth_drbg keyed: a nonce is available */
    uint8_t flog_ok;       /* the flash log opened (or there is none) */
    edp_drbg_t auth_drbg;  /* nonce generator, separate from the noise stream */
    uint8_t nonce[EDP_AUTH_NONCE];
    uint32_t rate_wait;    /* seconds an EDP_ERR_RATE refusal asks to wait */
    edp_flog_t flog;
    uint32_t audit_seq;    /* seq of the last audit entry (store.h) */
    uint32_t audit_exhausted_day;  /* day of the last EDP_AUDIT_EXHAUSTED entry since boot */
    uint8_t audit_rate_tripped;    /* an EDP_AUDIT_RATE_TRIP is logged since the last answer */
    uint8_t audit_event, audit_arg;  /* this frame's event, written after its answer left (0: none) */
    edp_mech_plan_t plan;  /* cached for (rec.mech, plan.k) */
    edp_naive_fn naive;    /* NULL unless the app installs the baseline */
    const edp_model_t *model;    /* INFER's model; NULL: INFER answers EDP_ERR_NO_MODEL */
    uint8_t infer_plan_valid;
    edp_mech_plan_t infer_plan;  /* cached for (rec.mech epsilon, the model's range) */
    const edp_model_t *infer_plan_model;  /* the model infer_plan and infer_model_insns are for */
    uint32_t infer_model_insns;  /* edp_deadline_model(infer_plan_model), once per plan */
    uint8_t window_pending;  /* this response leaves at its deadline (EDP_RELEASE_DEADLINE) */
    uint8_t prepared;        /* this request prepared a plan */
    uint32_t window_insns;   /* the deadline, instructions after the frame's end */
    uint32_t overruns;       /* answers not ready at their deadline */
    uint32_t rx_len;
    uint8_t rx_overflow;
    uint8_t rx[EDP_WIRE_MAX];    /* the received frame, then its encoded response */
    uint8_t tx[EDP_FRAME_MAX];
    float xin[EDP_MAX_CLASSES];
    int32_t work[EDP_MAX_CLASSES];
#if EDP_TEST_BUILD
    float yout[EDP_MAX_CLASSES];  /* naive baseline output */
#endif
};
typedef struct edp_device_state edp_dev_t;

/* Today's day number from the port's clock (port.h): EDP_OK, or the port's
 * negative error (then *day is not set). */
static inline int edp_dev_today(edp_dev_t *d, uint32_t *day)
{
    int err = d->port->day(d->port->ctx, day);
    return err < 0 ? err : EDP_OK;
}

/* The state behind the application's storage. */
static inline edp_dev_t *edp_dev(edp_device_t *d)
{
    return (edp_dev_t *)(void *)d;
}

/* The application's storage of a state (for a core function that calls the API). */
static inline edp_device_t *edp_device_of(edp_dev_t *d)
{
    return (edp_device_t *)(void *)d;
}

#endif

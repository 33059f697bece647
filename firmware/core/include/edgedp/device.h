/* The device: frame loop, command dispatcher and the release policy.
 *
 * Release policy (the invariants the tests check):
 *  - an external QUERY or INFER answer is sent only after its cost is committed
 *    to the persistent store; entropy, clock and store failures refuse it
 *    (EDP_ERR_ENTROPY, EDP_ERR_TIME, EDP_ERR_STORE) before any noise is drawn;
 *  - INFER's raw model output never leaves the device: only the mechanism's
 *    release of it does (INFER_LOCAL, test builds, answers a checksum); the
 *    model runs after the charge on inputs clamped to its declared range, and
 *    a non-finite output is released as a fixed in-range vector: no refusal
 *    depends on the model;
 *  - a refusal of the charge (clock, store, budget, entropy) is decided before
 *    the reseed, and the budget check before anything that depends on past
 *    randomness;
 *  - the request (frame and values), the lattice vector and the model's
 *    scratch are zeroed before an answer's first byte leaves;
 *  - PING, INFO, BUDGET and the local path never depend on entropy, clock or budget;
 *  - CONFIG, SET_TIME, RESET_BUDGET and TEST_SEED need an HMAC-SHA256 tag over
 *    "EDP2" | type | nonce | counter u64 | payload with the device's current
 *    nonce and a counter above the stored one. The nonce comes from a DRBG of
 *    its own, drawn at boot, at every CHALLENGE and STATE (which hand it out:
 *    the previous nonce dies) and after every admin frame whose tag is valid,
 *    whatever its outcome; a frame without a valid tag changes nothing;
 *  - every answer to an admin frame (accepted or refused) is tagged over its
 *    nonce, the frame's tag, the result and the counter, and STATE's over the
 *    host's challenge and its body (docs/protocol.md);
 *  - with a flash log (port->flash), every commit of spend or counter raises
 *    the flash high-water mark first (a charge the mark does not cover raises
 *    it EDP_FLOG_RESERVE - 1 answers ahead, within the caps), and boot
 *    restores the counter, and the spend of a store that did not load, to at
 *    least the mark (a lost store never lowers them); the flash log's spare
 *    sector is erased after an answer has left, never inside its window;
 *  - with EDP_RELEASE_DEADLINE, a QUERY or INFER answer leaves at a time
 *    fixed by the request, the configuration and the model, not by the noise
 *    (edgedp/deadline.h); a refusal leaves at once;
 *  - the audit log (store.h) records admin frames with a valid tag, time sets,
 *    the first budget refusal of a day, store loss at boot, entropy failures
 *    and the first rate refusal after an answer, each with its day and counter:
 *    at boot, and for a frame only after its answer has left (never inside a
 *    release window, never delaying a refusal); AUDIT_LOG reads it, tagged as STATE;
 *  - every decoded frame gets exactly one response with its seq. */
#ifndef EDGEDP_DEVICE_H
#define EDGEDP_DEVICE_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/drbg.h"
#include "edgedp/flog.h"
#include "edgedp/mech.h"
#include "edgedp/model.h"
#include "edgedp/port.h"
#include "edgedp/proto.h"
#include "edgedp/store.h"

/* Optional hook run by EDP_T_NAIVE (test builds): the naive baseline over
 * x[0..k) at scale b = sensitivity/epsilon, writing noisy values to y. */
typedef void (*edp_naive_fn)(const float *x, float *y, uint32_t k, float b);

typedef struct {
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
} edp_device_t;

/* Default record of a test build's blank store (documented in docs/protocol.md). */
#define EDP_TEST_DEFAULT_EPS_MICRO 1000000u
#define EDP_TEST_DEFAULT_DAILY_CAP 1000000000u

/* Load the store, key the DRBG from port->entropy. Never fails: failures are
 * recorded and refuse external output later. */
void edp_device_init(edp_device_t *d, const edp_port_t *port);

/* Feed received bytes; every 0x00 ends a frame whose response is written
 * through port->uart_write before this returns. */
void edp_device_rx(edp_device_t *d, const uint8_t *bytes, size_t n);

/* Handle one decoded frame (without COBS) in place of the loop above.
 * Returns the length of the raw response written to d->tx. */
size_t edp_device_handle(edp_device_t *d, uint8_t *frame, size_t n);

/* The local path for on-device consumers: the quantized, clamped, un-noised
 * lattice vector of x under the current configuration. Costs no budget and
 * never crosses the external interface. Returns EDP_OK or EDP_ERR_BAD_VALUE. */
int edp_device_local(edp_device_t *d, const float *x, uint32_t k, int32_t *out);

/* The local path of the model: its raw output for inputs x[0..n) clamped to
 * the model's input range (copied to d->xin first), in the model's scratch
 * (valid until the next inference). Costs no budget, needs no
 * entropy or clock, never crosses the external interface. Returns EDP_OK,
 * EDP_ERR_NO_MODEL, EDP_ERR_LEN (n is not the model's input length) or
 * EDP_ERR_BAD_VALUE (an input or output is NaN or Inf). */
int edp_device_infer_local(edp_device_t *d, const float *x, uint32_t n, const float **y);

#endif

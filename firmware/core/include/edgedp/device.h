/* The device: the application's API (frame loop, local paths) and the
 * release policy the core keeps.
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
 *    (src/deadline.h); a refusal leaves at once;
 *  - the audit log (src/store.h) records admin frames with a valid tag, time sets,
 *    the first budget refusal of a day, store loss at boot, entropy failures
 *    and the first rate refusal after an answer, each with its day and counter:
 *    at boot, and for a frame only after its answer has left (never inside a
 *    release window, never delaying a refusal); AUDIT_LOG reads it, tagged as STATE;
 *  - every decoded frame gets exactly one response with its seq. */
#ifndef EDGEDP_DEVICE_H
#define EDGEDP_DEVICE_H
#include <stddef.h>
#include <stdint.h>

#include "edgedp/model.h"
#include "edgedp/options.h"
#include "edgedp/port.h"

/* ---- the device's storage ----
 * The application allocates one edp_device_t (statically: no malloc) and
 * hands it to every call below; its contents belong to the core (opaque:
 * src/device_state.h). Its size depends on the options (EDP_MAX_CLASSES,
 * EDP_TEST_BUILD), so the application and the core must be built with the
 * same ones. EDP_DEVICE_SIZE is a fixed part (the DRBGs, the stored record,
 * the flash log and two prepared sampler plans: EDP_DEVICE_FIXED bytes plus
 * five pointers) and the buffers EDP_MAX_CLASSES sizes (the received frame and
 * its encoded response, EDP_DEVICE_FRAME bytes each and the COBS overhead;
 * two vectors of 4-byte values, three in test builds). The core checks at
 * compile time that its state fits in it, wastes under 32 bytes of it and
 * needs no stricter alignment than edp_device_t has (device.c). */
#define EDP_DEVICE_FIXED 6245u
#define EDP_DEVICE_FRAME (4u * EDP_MAX_CLASSES + 24u)
#define EDP_DEVICE_BUFFERS_ \
    (((EDP_DEVICE_FIXED + 5u * sizeof(void *) + 2u * EDP_DEVICE_FRAME + EDP_DEVICE_FRAME / 254u + 2u + 3u) & ~(size_t)3u) + \
     4u * EDP_MAX_CLASSES * (EDP_TEST_BUILD ? 3u : 2u))
#define EDP_DEVICE_ALIGN 8u  /* EDP_DEVICE_SIZE is a multiple of it (the state's 64-bit members) */
#define EDP_DEVICE_SIZE ((EDP_DEVICE_BUFFERS_ + EDP_DEVICE_ALIGN - 1u) & ~(size_t)(EDP_DEVICE_ALIGN - 1u))

typedef union edp_device {
    unsigned char bytes[EDP_DEVICE_SIZE];
    uint64_t align_u64;  /* the alignment of the core's state (its widest members) */
    double align_double;
    void *align_ptr;
} edp_device_t;

/* Optional hook run by EDP_T_NAIVE (test builds): the naive baseline over
 * x[0..k) at scale b = sensitivity/epsilon, writing noisy values to y. */
typedef void (*edp_naive_fn)(const float *x, float *y, uint32_t k, float b);

/* Load the store, key the DRBG from port->entropy. Never fails: failures are
 * recorded and refuse external output later. */
void edp_device_init(edp_device_t *d, const edp_port_t *port);

/* Feed received bytes; every 0x00 ends a frame whose response is written
 * through port->uart_write before this returns. */
void edp_device_rx(edp_device_t *d, const uint8_t *bytes, size_t n);

/* Handle one decoded frame (without COBS) in place of the loop above.
 * Returns the length of the raw response, written to the device's transmit
 * buffer (a test and fuzzing entry point). */
size_t edp_device_handle(edp_device_t *d, uint8_t *frame, size_t n);

/* The local path for on-device consumers: the quantized, clamped, un-noised
 * lattice vector of x under the current configuration. Costs no budget and
 * never crosses the external interface. Returns EDP_OK or EDP_ERR_BAD_VALUE. */
int edp_device_local(edp_device_t *d, const float *x, uint32_t k, int32_t *out);

/* The local path of the model: its raw output for inputs x[0..n) clamped to
 * the model's input range (copied into the device first), in the model's scratch
 * (valid until the next inference). Costs no budget, needs no
 * entropy or clock, never crosses the external interface. Returns EDP_OK,
 * EDP_ERR_NO_MODEL, EDP_ERR_LEN (n is not the model's input length) or
 * EDP_ERR_BAD_VALUE (an input or output is NaN or Inf). */
int edp_device_infer_local(edp_device_t *d, const float *x, uint32_t n, const float **y);

/* The model INFER runs (constant data the application links, app_model.h);
 * NULL, as after edp_device_init: INFER answers EDP_ERR_NO_MODEL. */
void edp_device_set_model(edp_device_t *d, const edp_model_t *model);

#if EDP_TEST_BUILD
/* Install the naive baseline EDP_T_NAIVE runs (NULL: EDP_T_NAIVE answers EDP_ERR_UNKNOWN). */
void edp_device_set_naive(edp_device_t *d, edp_naive_fn naive);
#endif

/* Overwrite n bytes with zeros in a way the compiler cannot elide (the
 * application's copy of a request: the core wipes its own). */
void edp_wipe(void *p, size_t n);

#endif

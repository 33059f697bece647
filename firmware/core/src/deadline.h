/* The release deadline: how long an external answer's window may take, in
 * executed instructions, so that the answer can leave at a fixed time.
 *
 * The running time of the DP step depends on the noise drawn (rejection
 * sampling, slow paths, DRBG refills), and the time of an answer is visible to
 * whoever holds the UART. With EDP_RELEASE_DEADLINE (options.h; on in
 * production builds) the device marks the moment a frame's last byte was
 * taken from the UART and releases a QUERY or INFER response's first byte
 * at that mark + edp_deadline_answer() instructions' worth of the board's
 * time (port.h, window_open), whatever happened in between: decoding,
 * parsing, the plan, the model, the charge, the noise. The bound is exceeded with
 * probability at most 2^-EDP_DEADLINE_TAIL_BITS per answer (counted in
 * delta, docs/privacy.md section 6); then the answer leaves at the next
 * doubling of the window (the core counts it in edp_device_t.overruns).
 *
 * What the bound is made of (docs/privacy.md section 6 derives it): every
 * fixed draw of the sampler costs its fast path; the slow paths are counted
 * separately, each with its own Chernoff tail at 2^-(TAIL_BITS + 3) (six
 * tails: at most 2^-TAIL_BITS together):
 *  - fixed draws: each ends its coordinate with probability at least p_f,
 *    computed at set-up from the tables (the mean acceptance of the chunk
 *    tables less the redraw of (negative, 0)), so that N draws suffice;
 *  - acceptance past the fixed bits (probability 2^-K per draw), the exact
 *    product (a bound from the tier-1 band's width, edp_dlap_band), a tie or
 *    tail outcome of the fast table and every further tail round (their share
 *    of the fast table), each over the N draws;
 *  - bits: n1 per draw and per round, and the comparisons past the fixed bits,
 *    each stopping at its first differing bit (a fair coin: a sixth tail);
 *    a refill every EDP_DRBG_BATCH_WORDS - EDP_DRBG_KEY_WORDS keystream words
 *    (88, drbg.h);
 *  - the rest is deterministic given the request and the configuration:
 *    the request's COBS decoding, CRC and parsing, the plan when this request
 *    prepared it (edp_deadline_prepare), the model (its run, float32 or int8,
 *    the check of its outputs with the fixed vector for a non-finite one, and
 *    the wipe of its scratch), the charge (with a reseed
 *    and the store and flash-log writes: the port's window_fixed, port.h),
 *    quantize, the output mode, the response's CRC and the encoding before the
 *    first UART write.
 * The instruction constants come from the compiled code (static sizes of the
 * sampler's regions and worst paths under Unicorn: host/edgedp/bench/deadline.py)
 * with a margin; tests/firmware/test_deadline.py checks them against the image.
 * They are an engineering bound, not a proof: a change of compiler or code
 * must pass that test again. */
#ifndef EDGEDP_DEADLINE_H
#define EDGEDP_DEADLINE_H
#include <stdint.h>

#include "dlap.h"
#include "edgedp/model.h"

#define EDP_DEADLINE_TAIL_BITS 40

/* The fixed part of a window (the charge with a reseed, the store commit and
 * the flash-log write, the response header, the window's own calls) on a port
 * that does not state its own (edp_port_t.window_fixed = 0): a conservative
 * figure, not measured on any board. */
#define EDP_DEADLINE_FIXED_DEFAULT 40000u

/* Instructions of edp_mech_prepare for tables d (the plan's set-up, this
 * bound included): charged only to the request that prepared the plan. */
uint32_t edp_deadline_prepare(const edp_dlap_t *d);

/* Instructions of the noise for k coordinates with tables d (draws, slow
 * paths and refills, the bound above). Called once per plan at set-up (it
 * takes some 2-3 x 10^5 instructions on the Cortex-M4: software double). Saturates at 2^32 - 1. */
uint32_t edp_deadline_noise(const edp_dlap_t *d, uint32_t k);

/* Instructions of the model's inference, of the check of its outputs (with
 * the fixed vector that replaces a non-finite one) and of the wipe of its
 * scratch after the answer (its part of an INFER window). Depends on the model's shape only;
 * computed once per model and plan at set-up (answer.c). Saturates. */
uint32_t edp_deadline_model(const edp_model_t *m);

/* Instructions of a whole window around the noise bound `noise`: a request
 * of n_in values, the model's part `model` (edp_deadline_model; 0: a QUERY) to k outputs, the
 * plan's set-up (`prepare` instructions, 0 if the plan was ready), the
 * charge, quantize, output `mode` with `arg` and the response up to its first
 * UART write, with `fixed` instructions for the port's fixed part. Saturates. */
uint32_t edp_deadline_answer(uint32_t noise, uint32_t n_in, uint32_t k, uint32_t mode, uint32_t arg,
                             uint32_t model, uint32_t prepare, uint32_t fixed);

#endif

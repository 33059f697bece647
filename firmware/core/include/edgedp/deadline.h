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
 * What the bound is made of (docs/privacy.md section 6 derives it):
 *  - draws: every draw of the sampler (a fixed draw, or one more tail round)
 *    ends the current coordinate with probability at least p_f, whatever came
 *    before (edp_deadline_noise states p_f); so the number of draws for k
 *    coordinates exceeds N = ceil((k + l + sqrt(l^2 + 2 k l)) / p_f),
 *    l = EDP_DEADLINE_TAIL_BITS ln 2, with probability at most 2^-TAIL_BITS
 *    (Chernoff's lower tail of Binomial(N, p_f));
 *  - instructions per draw: at most EDP_DEADLINE_DRAW(nchunks), the longest
 *    path through one draw (fast path, tier-1 and exact acceptance with the
 *    whole product and every limb compared, a tie with its one-limb compare,
 *    the tail round's bookkeeping), DRBG refills excluded;
 *  - refills: a draw consumes at most 4 + 2 nchunks keystream words, a refill
 *    (4 ChaCha20 blocks and the key erasure) gives 56;
 *  - the rest is deterministic given the request and the configuration:
 *    the request's COBS decoding, CRC and parsing, the plan when this request
 *    prepared it (EDP_DEADLINE_PREPARE), the model, the charge (with a reseed
 *    and the store and flash-log writes), quantize, the output mode, the
 *    response's CRC and the encoding before the first UART write.
 * The instruction constants come from the compiled code (worst paths under
 * Unicorn: host/edgedp/bench/deadline.py) with a margin of at least 2;
 * tests/firmware/test_deadline.py checks them against the image. They are an
 * engineering bound, not a proof: a change of compiler or code must pass
 * that test again. */
#ifndef EDGEDP_DEADLINE_H
#define EDGEDP_DEADLINE_H
#include <stdint.h>

#include "edgedp/dlap.h"
#include "edgedp/model.h"

#define EDP_DEADLINE_TAIL_BITS 40

/* Instructions of edp_mech_prepare (the sampler's tables): at least twice the
 * longest measured (1.25 M, 6 chunks; tests/firmware/test_deadline.py); charged
 * only to the request that prepared a plan (a function of the configuration
 * and k). */
#define EDP_DEADLINE_PREPARE 4000000u

/* Instructions of the noise for k coordinates with tables d (draws and
 * refills, the bound above). Saturates at 2^32 - 1. */
uint32_t edp_deadline_noise(const edp_dlap_t *d, uint32_t k);

/* Instructions of a whole window around the noise bound `noise`: a request
 * of n_in values, the model's inference (NULL: a QUERY) to k outputs, the
 * plan (prepared != 0: made for this request), the charge, quantize, output
 * `mode` with `arg` and the response up to its first UART write. Saturates. */
uint32_t edp_deadline_answer(uint32_t noise, uint32_t n_in, uint32_t k, uint32_t mode, uint32_t arg,
                             const edp_model_t *model, int prepared);

#endif

/* The external answers (core-internal): QUERY and INFER, the DP step that
 * charges the budget and releases a noised vector, and the test build's
 * commands that release nothing external (INFER_LOCAL, LOCAL, SAMPLE, NAIVE).
 *
 * Owns: drbg and entropy_ok (the noise stream and its seeding), plan and
 * plan_valid (QUERY's plan for (rec.mech, k)), infer_plan, infer_plan_valid,
 * infer_plan_model and infer_model_insns (INFER's plan for the model), xin,
 * work and yout (the request's values, the lattice vector, the baseline's
 * output), naive; it reads model. A charge commits rec (spend, bucket).
 * Needs: the port's entropy(), ticks() and store; the rate limit (rate.h),
 * the flash log's mark (mark.h), the release window (window.h) and the audit
 * events (audit.h).
 * Invariants: charge before release: once a charge returns EDP_OK its spend
 * is durable (flash mark, then store) and the answer is sent; every refusal
 * comes before anything secret runs (the noise, the model), and depends on
 * the request, the clock and the record only; the request's values and the
 * lattice vector are zeroed before the answer leaves. */
#ifndef EDGEDP_ANSWER_H
#define EDGEDP_ANSWER_H
#include <stddef.h>
#include <stdint.h>

#include "device_state.h"

/* Seed the noise stream from the port's entropy(); entropy_ok says whether it
 * could (else the stream is wiped). */
void edp_answer_reseed(edp_dev_t *d);

/* QUERY: body b[0..n) (mode u8 | arg u8 | k u16 | k x f32); the answer
 * remaining u64 | ticks u32 | m i8 | mode u8 | k u16 | mode payload at *o,
 * which it advances. Returns EDP_OK or a negative error (no answer). */
int edp_cmd_query(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);

/* INFER (edgedp/device.h): body mode u8 | arg u8 | n u16 | n x f32, n = the
 * model's n_features; the answer as QUERY's with the model's ticks u32 before
 * the mode payload. EDP_ERR_NO_MODEL without a model. A non-finite output is
 * replaced by the fixed vector lo + (hi - lo) / n_classes in every class and
 * released like any other, charged and noised. */
int edp_cmd_infer(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);

#if EDP_TEST_BUILD
/* The test build's commands (docs/protocol.md): the model's output without
 * noise (its argmax and CRC), the quantized vector without noise, raw sampler
 * draws, and the naive baseline. Same conventions as edp_cmd_query. */
int edp_cmd_infer_local(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);
int edp_cmd_local(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);
int edp_cmd_sample(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);
int edp_cmd_naive(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o);
#endif

#endif

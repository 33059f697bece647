/* The release window of an external answer (core-internal, EDP_RELEASE_DEADLINE,
 * deadline.h): opened when a frame's last byte is taken from the UART, armed
 * by a QUERY or INFER with the deadline of its request, closed by the first
 * byte of the answer, which waits for the deadline.
 *
 * Owns: window_pending (this response leaves at its deadline), prepared (this
 * request prepared a plan: its set-up is charged to the window; set by the
 * plan's set-up, answer.c), window_insns (the deadline, in instructions after
 * the frame's end) and overruns (answers not ready at their deadline).
 * Needs: the port's window_open() and window_close() (an answer is refused
 * with EDP_ERR_TIMING without them when the deadline is on) and window_fixed.
 * Invariants: a window is armed only for an answer that will be released; a
 * refusal disarms it (window_pending = 0) and leaves at once; the window's
 * length depends on the request and the configuration only, never on the
 * noise or the model's values. */
#ifndef EDGEDP_WINDOW_H
#define EDGEDP_WINDOW_H
#include <stddef.h>
#include <stdint.h>

#include "device_state.h"

/* A frame's end: no window armed, no plan prepared yet, and (with the
 * deadline on) the port's window opened at this moment. */
void edp_window_open(edp_dev_t *d);

/* Arm the release of an external answer: its first byte leaves when the
 * window that edp_window_open opened reaches the bound for this request (n_in
 * values in, plan->k out, output mode with arg, model_insns for an INFER's
 * model, 0 for a QUERY), whatever follows (edp_window_send). Returns EDP_OK
 * (also with the deadline off) or EDP_ERR_TIMING. */
int edp_window_arm(edp_dev_t *d, const edp_mech_plan_t *plan, uint32_t n_in, uint32_t mode,
                   uint32_t arg, uint32_t model_insns);

/* The encoded response to the UART (edp_frame_send's writer, ctx = the
 * edp_dev_t; it writes the response in one call): a response whose window is
 * armed first waits for the window's end (port.h, window_close), counting an
 * overrun. */
void edp_window_send(void *ctx, const uint8_t *p, size_t n);

#endif

/* What the architecture-specific code in arch/<name>/ shares with the portable
 * core (core-internal).
 *
 * arch/<name>/<module>_<name>.c holds the hot loops of <module>.c for one
 * architecture, arch/portable/<module>_portable.c the portable C of the same functions.
 * Every file is compiled on every target and is empty unless its architecture
 * is selected here, so one source list serves all images. Both versions give
 * the same bits (the QEMU bit-exact replay and tests/firmware check it). */
#ifndef EDGEDP_ARCH_H
#define EDGEDP_ARCH_H
#include <stdint.h>

#include "../dlap.h"
#include "../drbg.h"

#if defined(__arm__) && defined(__thumb2__) && (defined(__ARM_ARCH_7EM__) || defined(__ARM_ARCH_7M__))
#define EDP_ARCH_ARMV7M 1   /* Cortex-M3/M4/M7: Thumb-2 assembly */
#else
#define EDP_ARCH_ARMV7M 0
#endif

/* The sampling loop (edp_dlap_noisy): Thumb-2 assembly on ARMv7-M unless the image is
 * built with -DEDP_DLAP_LOOP_C=1, which runs arch/portable/dlap_portable.c there too (the
 * same bits; build/qemu-cloop/edgedp.elf, whose only use is `edgedp bench --c-loop`, the
 * comparison docs/benchmarks.md states). */
#ifndef EDP_DLAP_LOOP_C
#define EDP_DLAP_LOOP_C 0
#endif
#define EDP_ARCH_ARMV7M_DLAP (EDP_ARCH_ARMV7M && !EDP_DLAP_LOOP_C)

/* The dense kernel's loops (model.c) also need the single-precision FPU (Cortex-M4F/M7). */
#if EDP_ARCH_ARMV7M && defined(__ARM_FP) && (__ARM_FP & 4)
#define EDP_ARCH_ARMV7M_FPU 1
#else
#define EDP_ARCH_ARMV7M_FPU 0
#endif

/* The slow paths of the sampling loop (dlap.c, out of line): both loops
 * store their bit buffer to r before the call and reload it after.
 *
 * Acceptance of the low part V after its K fixed acceptance bits were all ones:
 * 1 to accept, 0 to reject (draw again). */
int edp_dlap_accept_rest(const edp_dlap_t *d, edp_drbg_t *r, uint32_t v);

/* The high part W for a fast-table entry w with bit 7 set at index idx (a tie
 * of the keep prefix, or the tail outcome). */
uint32_t edp_dlap_high_part(const edp_dlap_t *d, edp_drbg_t *r, uint32_t idx, uint32_t w);

/* Dense layers (model.c; arch/<name>/model_<name>.c). Both compute
 * b + x_0 w_0 + x_1 w_1 + ... + x_{in-1} w_{in-1} from the left, in input order, every
 * product and every sum rounded to float32 on its own (no fused multiply-add), so
 * every version gives the same bits as the NumPy reference (edgedp.model.reference).
 * edp_model_dense4: four outputs y[0..3], row r's weights at w + r * in, biases b[0..3].
 * edp_model_dot: one output, weights w[0..in). */
void edp_model_dense4(const float *x, uint32_t in, const float *w, const float *b, float *y);

/* The C loop of edp_model_dense4 over x[0..end): a_r += x[i] w_r[i] in input order, then
 * y[r] = a_r (the portable version runs it on all inputs, the ARMv7-M one on the last in % 4). */
static inline void edp_model_rows4(const float *x, const float *end, const float *w0, const float *w1,
                                   const float *w2, const float *w3, float a0, float a1, float a2,
                                   float a3, float *y)
{
    while (x != end) {
        const float xi = *x++;
        a0 += xi * *w0++;
        a1 += xi * *w1++;
        a2 += xi * *w2++;
        a3 += xi * *w3++;
    }
    y[0] = a0;
    y[1] = a1;
    y[2] = a2;
    y[3] = a3;
}
float edp_model_dot(const float *x, uint32_t in, const float *w, float b);

#endif

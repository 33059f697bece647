/* Dense-layer loops of model.c in portable C (arch/arch.h). */
#include "../../fp_contract.h"  /* first: no fused multiply-add in this file */
#include "../arch.h"

#if !EDP_ARCH_ARMV7M_FPU
void edp_model_dense4(const float *x, uint32_t in, const float *w, const float *b, float *y)
{
    const float *w0 = w, *w1 = w + in, *w2 = w + 2 * in, *w3 = w + 3 * in;
    const float *const end = x + in;
    float a0 = b[0], a1 = b[1], a2 = b[2], a3 = b[3];
    edp_model_rows4(x, end, w0, w1, w2, w3, a0, a1, a2, a3, y);
}

float edp_model_dot(const float *x, uint32_t in, const float *w, float b)
{
    uint32_t i;
#pragma GCC unroll 4
    for (i = 0; i < in; i++) b += x[i] * w[i];
    return b;
}
#endif

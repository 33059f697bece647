/* Dense-layer loops of model.c for ARMv7-M with the single-precision FPU (arch/arch.h). */
#include "../../fp_contract.h"  /* first: no fused multiply-add in this file */
#include "../arch.h"

#if EDP_ARCH_ARMV7M_FPU
/* Four inputs per iteration: one VLDMIA for x[i..i+3] (s0-s3) and one per row for its four
 * weights (s4-s7), four VMUL and then four VADD into the row's accumulator in input order:
 * 2.4 instructions per multiply-add for four rows (C gives 3.75: a load per weight), 3 for
 * one. The products and sums are the C version's (arch/portable/model_portable.c), rounded
 * one by one; the last in % 4 inputs run in C, after, so the order is kept. */
#define EDP_ROW4(acc) \
    "vmul.f32 s4, s0, s4\n\t" "vmul.f32 s5, s1, s5\n\t" "vmul.f32 s6, s2, s6\n\t" "vmul.f32 s7, s3, s7\n\t" \
    "vadd.f32 %[" acc "], %[" acc "], s4\n\t" "vadd.f32 %[" acc "], %[" acc "], s5\n\t" \
    "vadd.f32 %[" acc "], %[" acc "], s6\n\t" "vadd.f32 %[" acc "], %[" acc "], s7\n\t"

void edp_model_dense4(const float *x, uint32_t in, const float *w, const float *b, float *y)
{
    const float *w0 = w, *w1 = w + in, *w2 = w + 2 * in, *w3 = w + 3 * in;
    const float *const end = x + in;
    float a0 = b[0], a1 = b[1], a2 = b[2], a3 = b[3];
    uint32_t n4 = in >> 2;
    if (n4)
        __asm__ volatile(
            "1:\n\t"
            "vldmia %[x]!, {s0-s3}\n\t"
            "vldmia %[w0]!, {s4-s7}\n\t" EDP_ROW4("a0")
            "vldmia %[w1]!, {s4-s7}\n\t" EDP_ROW4("a1")
            "vldmia %[w2]!, {s4-s7}\n\t" EDP_ROW4("a2")
            "vldmia %[w3]!, {s4-s7}\n\t" EDP_ROW4("a3")
            "subs %[n], %[n], #1\n\t"
            "bne 1b"
            : [x] "+r"(x), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [n] "+r"(n4),
              [a0] "+t"(a0), [a1] "+t"(a1), [a2] "+t"(a2), [a3] "+t"(a3)
            :
            : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "cc", "memory");
    edp_model_rows4(x, end, w0, w1, w2, w3, a0, a1, a2, a3, y);
}

float edp_model_dot(const float *x, uint32_t in, const float *w, float b)
{
    const float *const end = x + in;
    uint32_t n4 = in >> 2;
    if (n4)
        __asm__ volatile(
            "1:\n\t"
            "vldmia %[x]!, {s0-s3}\n\t"
            "vldmia %[w]!, {s4-s7}\n\t" EDP_ROW4("a")
            "subs %[n], %[n], #1\n\t"
            "bne 1b"
            : [x] "+r"(x), [w] "+r"(w), [n] "+r"(n4), [a] "+t"(b)
            :
            : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "cc", "memory");
    while (x != end) b += *x++ * *w++;
    return b;
}
#endif

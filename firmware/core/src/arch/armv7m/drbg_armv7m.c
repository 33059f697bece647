/* ChaCha12 block function of drbg.c for ARMv7-M (arch/arch.h). */
#include "../arch.h"
#include "../../util.h"

#if EDP_ARCH_ARMV7M
/* ARMv7-M: the block function in Thumb-2 assembly with lazy rotation.
 *
 * Rotations are folded into the shifted second operand of ADD/EOR: the b row
 * (x4..x7) is kept rotated right by 7 and the d row (x12..x15) rotated right by
 * 8 between quarter rounds, so a quarter round is 8 instructions instead of 12
 * (ARMv7-M has no rotate-and-xor, but every data-processing instruction can
 * rotate its second register operand for free). Registers: x0..x3 = r0..r3,
 * x4..x7 = r4..r7, x8..x11 = r8..r11; of the d row, x12/x13 or x14/x15 are in
 * ip/lr and the other pair in a stack slot (swapped with LDRD/STRD twice per
 * double round). Two double rounds per loop iteration, EDP_CHACHA_ROUNDS / 4
 * iterations. Same output as arch/portable/drbg_portable.c (RFC 8439 2.3's
 * block function with 12 rounds; checked against the ChaCha12 vectors of
 * draft-strombergson-chacha-test-vectors by tests/firmware under Unicorn and
 * by the QEMU bit-exact replay). */
#define EDP_QR(a, b, c, d) \
    "add " a ", " a ", " b ", ror #25\n\t" \
    "eor " d ", " a ", " d ", ror #24\n\t" \
    "add " c ", " c ", " d ", ror #16\n\t" \
    "eor " b ", " c ", " b ", ror #25\n\t" \
    "add " a ", " a ", " b ", ror #20\n\t" \
    "eor " d ", " a ", " d ", ror #16\n\t" \
    "add " c ", " c ", " d ", ror #24\n\t" \
    "eor " b ", " c ", " b ", ror #20\n\t"
/* Column round: x12/x13 in ip/lr on entry, x14/x15 there on exit. */
#define EDP_COLUMNS \
    EDP_QR("r0", "r4", "r8", "ip") EDP_QR("r1", "r5", "r9", "lr") \
    "strd ip, lr, [sp, #12]\n\t" \
    "ldrd ip, lr, [sp, #20]\n\t" \
    EDP_QR("r2", "r6", "r10", "ip") EDP_QR("r3", "r7", "r11", "lr")
/* Diagonal round first half: x15 = lr, x14 = ip. */
#define EDP_DIAG_A EDP_QR("r0", "r5", "r10", "lr") EDP_QR("r3", "r4", "r9", "ip") \
    "strd ip, lr, [sp, #20]\n\t"
#define EDP_DIAG_B \
    "ldrd ip, lr, [sp, #12]\n\t" \
    EDP_QR("r1", "r6", "r11", "ip") EDP_QR("r2", "r7", "r8", "lr")

#define CHACHA_LOOPS 3  /* loop iterations of two double rounds each */
EDP_STATIC_ASSERT(chacha_loops, 4 * CHACHA_LOOPS == EDP_CHACHA_ROUNDS);

EDP_NAKED void edp_chacha_block(const uint32_t in[16] EDP_UNUSED, uint32_t out[16] EDP_UNUSED)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "sub sp, sp, #32\n\t"           /* [0] in, [4] out, [8] count, [12..27] x12..x15, [28] x11 */
        "strd r0, r1, [sp]\n\t"
        "movs r2, #" EDP_STR(CHACHA_LOOPS) "\n\t"
        "str r2, [sp, #8]\n\t"
        "ldrd r2, r3, [r0, #56]\n\t"
        "ror r2, r2, #8\n\t"
        "ror r3, r3, #8\n\t"
        "strd r2, r3, [sp, #20]\n\t"
        "ldrd ip, lr, [r0, #48]\n\t"
        "ror ip, ip, #8\n\t"
        "ror lr, lr, #8\n\t"
        "ldm r0, {r0-r11}\n\t"
        "ror r4, r4, #7\n\t"
        "ror r5, r5, #7\n\t"
        "ror r6, r6, #7\n\t"
        "ror r7, r7, #7\n\t"
        "1:\n\t"
        EDP_COLUMNS EDP_DIAG_A EDP_DIAG_B
        EDP_COLUMNS EDP_DIAG_A
        "ldr ip, [sp, #8]\n\t"
        "subs ip, ip, #1\n\t"
        "str ip, [sp, #8]\n\t"
        EDP_DIAG_B
        "bne 1b\n\t"
        /* out = x + in; free r11 as the scratch register first. */
        "strd ip, lr, [sp, #12]\n\t"
        "str r11, [sp, #28]\n\t"
        "ldrd ip, lr, [sp]\n\t"
        "ldr r11, [ip, #0]\n\t"  "add r0, r0, r11\n\t"            "str r0, [lr, #0]\n\t"
        "ldr r11, [ip, #4]\n\t"  "add r1, r1, r11\n\t"            "str r1, [lr, #4]\n\t"
        "ldr r11, [ip, #8]\n\t"  "add r2, r2, r11\n\t"            "str r2, [lr, #8]\n\t"
        "ldr r11, [ip, #12]\n\t" "add r3, r3, r11\n\t"            "str r3, [lr, #12]\n\t"
        "ldr r11, [ip, #16]\n\t" "add r4, r11, r4, ror #25\n\t"   "str r4, [lr, #16]\n\t"
        "ldr r11, [ip, #20]\n\t" "add r5, r11, r5, ror #25\n\t"   "str r5, [lr, #20]\n\t"
        "ldr r11, [ip, #24]\n\t" "add r6, r11, r6, ror #25\n\t"   "str r6, [lr, #24]\n\t"
        "ldr r11, [ip, #28]\n\t" "add r7, r11, r7, ror #25\n\t"   "str r7, [lr, #28]\n\t"
        "ldr r11, [ip, #32]\n\t" "add r8, r8, r11\n\t"            "str r8, [lr, #32]\n\t"
        "ldr r11, [ip, #36]\n\t" "add r9, r9, r11\n\t"            "str r9, [lr, #36]\n\t"
        "ldr r11, [ip, #40]\n\t" "add r10, r10, r11\n\t"          "str r10, [lr, #40]\n\t"
        "ldr r0, [sp, #28]\n\t"
        "ldr r11, [ip, #44]\n\t" "add r0, r0, r11\n\t"            "str r0, [lr, #44]\n\t"
        "ldrd r0, r1, [sp, #12]\n\t"
        "ldrd r2, r3, [sp, #20]\n\t"
        "ldrd r4, r5, [ip, #48]\n\t"
        "ldrd r6, r7, [ip, #56]\n\t"
        "add r0, r4, r0, ror #24\n\t"
        "add r1, r5, r1, ror #24\n\t"
        "add r2, r6, r2, ror #24\n\t"
        "add r3, r7, r3, ror #24\n\t"
        "strd r0, r1, [lr, #48]\n\t"
        "strd r2, r3, [lr, #56]\n\t"
        "add sp, sp, #32\n\t"
        "pop {r4-r11, pc}\n\t");
}
#endif

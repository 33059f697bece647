#include "edgedp/drbg.h"
#include "edgedp/sha256.h"

#if defined(__arm__) && defined(__thumb2__) && (defined(__ARM_ARCH_7EM__) || defined(__ARM_ARCH_7M__))
/* ARMv7-M: the block function in Thumb-2 assembly with lazy rotation.
 *
 * Rotations are folded into the shifted second operand of ADD/EOR: the b row
 * (x4..x7) is kept rotated right by 7 and the d row (x12..x15) rotated right by
 * 8 between quarter rounds, so a quarter round is 8 instructions instead of 12
 * (ARMv7-M has no rotate-and-xor, but every data-processing instruction can
 * rotate its second register operand for free). Registers: x0..x3 = r0..r3,
 * x4..x7 = r4..r7, x8..x11 = r8..r11; of the d row, x12/x13 or x14/x15 are in
 * ip/lr and the other pair in a stack slot (swapped with LDRD/STRD twice per
 * double round). Two double rounds per loop iteration. Same output as the
 * portable C below (RFC 8439 2.3; checked by tests/bench under Unicorn and by
 * the QEMU bit-exact replay). */
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

__attribute__((naked)) void edp_chacha20_block(const uint32_t in[16] __attribute__((unused)),
                                              uint32_t out[16] __attribute__((unused)))
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "sub sp, sp, #32\n\t"           /* [0] in, [4] out, [8] count, [12..27] x12..x15, [28] x11 */
        "strd r0, r1, [sp]\n\t"
        "movs r2, #5\n\t"
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
#else
#define ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define QR(a, b, c, d) \
    a += b; d ^= a; d = ROTL(d, 16); \
    c += d; b ^= c; b = ROTL(b, 12); \
    a += b; d ^= a; d = ROTL(d, 8);  \
    c += d; b ^= c; b = ROTL(b, 7)

void edp_chacha20_block(const uint32_t in[16], uint32_t out[16])
{
    uint32_t x0 = in[0], x1 = in[1], x2 = in[2], x3 = in[3];
    uint32_t x4 = in[4], x5 = in[5], x6 = in[6], x7 = in[7];
    uint32_t x8 = in[8], x9 = in[9], x10 = in[10], x11 = in[11];
    uint32_t x12 = in[12], x13 = in[13], x14 = in[14], x15 = in[15];
    int i;
    for (i = 0; i < 10; i++) {
        QR(x0, x4, x8, x12);  QR(x1, x5, x9, x13);
        QR(x2, x6, x10, x14); QR(x3, x7, x11, x15);
        QR(x0, x5, x10, x15); QR(x1, x6, x11, x12);
        QR(x2, x7, x8, x13);  QR(x3, x4, x9, x14);
    }
    out[0] = x0 + in[0];   out[1] = x1 + in[1];   out[2] = x2 + in[2];   out[3] = x3 + in[3];
    out[4] = x4 + in[4];   out[5] = x5 + in[5];   out[6] = x6 + in[6];   out[7] = x7 + in[7];
    out[8] = x8 + in[8];   out[9] = x9 + in[9];   out[10] = x10 + in[10]; out[11] = x11 + in[11];
    out[12] = x12 + in[12]; out[13] = x13 + in[13]; out[14] = x14 + in[14]; out[15] = x15 + in[15];
}
#endif

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void edp_drbg_seed(edp_drbg_t *d, const uint8_t key32[32])
{
    int i;
    d->state[0] = 0x61707865u; d->state[1] = 0x3320646eu; d->state[2] = 0x79622d32u; d->state[3] = 0x6b206574u;
    for (i = 0; i < 8; i++) d->state[4 + i] = load_le32(key32 + 4 * i);
    d->state[12] = d->state[13] = d->state[14] = d->state[15] = 0;
    d->word = 16;
    d->acc = 0;
    d->nbits = 0;
    d->blocks_since_seed = 0;
}

/* The key stays in d->state (wiped by edp_drbg_wipe): no copy on the stack. */
void edp_drbg_next_block(edp_drbg_t *d)
{
    edp_chacha20_block(d->state, d->block);
    if (++d->state[12] == 0) d->state[13]++;
    d->blocks_since_seed++;
    d->word = 0;
}

void edp_drbg_refill(edp_drbg_t *d)
{
    while (d->nbits <= 32) {
        if (d->word >= 16) edp_drbg_next_block(d);
        d->acc |= (uint64_t)d->block[d->word++] << (32 - d->nbits);
        d->nbits += 32;
    }
}

void edp_drbg_wipe(edp_drbg_t *d)
{
    edp_wipe(d, sizeof *d);
    d->word = 16;
}

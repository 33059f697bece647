/* The sampling loop of dlap.c for ARMv7-M (arch/arch.h). */
#include "../arch.h"
#include "../../util.h"

#include <stddef.h>

#if EDP_ARCH_ARMV7M_DLAP
/* The loop in Thumb-2 assembly (same bits, same results as
 * arch/portable/dlap_portable.c; checked by the QEMU bit-exact replay and tests/firmware).
 * Registers: r0 = cur, the bit buffer (left-aligned, the bits below its nbits
 * zero), r1 = nbits (0..32), r2 = next keystream word, r3 = y (next output),
 * r4 = x (next input), r5 = x + k, r6 = the draw, r7 = d + 64 (the fast
 * table), r8 = n1, r9 = s1, r10 = mk, r11 = imask (d's first four words, one
 * LDM), s16 = q->scale2, s17 = 0 (stored over each keystream word as it is
 * read, drbg.h; moved from an integer 0, the same word in every FPSCR mode,
 * tests/firmware/test_sampler_rounding_mode.py); stack: [sp] the end of
 * r->block, [sp+4] q->lo2, [sp+8]
 * q->hi2, [sp+12] r3 and [sp+16] lr across calls, s16 and s17 at [sp+20],
 * then the pushed arguments: [sp+28] d, [sp+32] r, and q's and x's slots
 * [sp+36], [sp+40] hold r4 and r5 in the acceptance's tier 1; y and k at
 * [sp+80] and [sp+84]. The local subroutines at the end store the bit buffer
 * to r (flush: leaves ip = r, uses r3) and reload it (load: uses r1, ip and
 * r3; entered at 33 with r1 = r at the entry). While the loop holds the buffer
 * acc's low word in r is 0 (the load zeroes it when it had bits there; with
 * at most 32 bits it is 0 already, drbg.h), so the flush stores only the high
 * word and nbits, one STRD.
 * r->acc holds up to 64 bits, the loop's buffer 32: storing it writes cur as
 * acc's high word; loading 32 + e bits (e >= 1) hands the last word read back
 * to the keystream buffer, restored from acc's last 32 bits (it is unread: a
 * word is read only when at most 32 bits are buffered, so every bit consumed
 * since came from before it) and keeps the first e. */
EDP_STATIC_ASSERT(n1, offsetof(edp_dlap_t, n1) == 0);
EDP_STATIC_ASSERT(s1, offsetof(edp_dlap_t, s1) == 4);
EDP_STATIC_ASSERT(mk, offsetof(edp_dlap_t, mk) == 8);
EDP_STATIC_ASSERT(imask, offsetof(edp_dlap_t, imask) == 12);
EDP_STATIC_ASSERT(sbit, offsetof(edp_dlap_t, sbit) == 16);
EDP_STATIC_ASSERT(vsh, offsetof(edp_dlap_t, vsh) == 20);
EDP_STATIC_ASSERT(L, offsetof(edp_dlap_t, L) == 24);
EDP_STATIC_ASSERT(tail, offsetof(edp_dlap_t, tail) == 28);
EDP_STATIC_ASSERT(vthr, offsetof(edp_dlap_t, vthr) == 32);
EDP_STATIC_ASSERT(fast, offsetof(edp_dlap_t, fast) == 64);
EDP_STATIC_ASSERT(block, offsetof(edp_drbg_t, block) == 64);
#define DRBG_WORD 448   /* edp_drbg_t's word, acc (low, high) and nbits, for the asm below */
#define DRBG_ACC_LO 456
#define DRBG_ACC_HI 460
#define DRBG_NBITS 464
EDP_STATIC_ASSERT(word, offsetof(edp_drbg_t, word) == DRBG_WORD);
EDP_STATIC_ASSERT(acc, offsetof(edp_drbg_t, acc) == DRBG_ACC_LO && DRBG_ACC_HI == DRBG_ACC_LO + 4);
EDP_STATIC_ASSERT(nbits, offsetof(edp_drbg_t, nbits) == DRBG_NBITS);
EDP_STATIC_ASSERT(batch, EDP_DRBG_BATCH_WORDS == 96);
EDP_STATIC_ASSERT(K, offsetof(edp_dlap_t, K) == 64 + 1028);
EDP_STATIC_ASSERT(c1, offsetof(edp_dlap_t, c1) == 64 + 1040);
EDP_STATIC_ASSERT(KP, offsetof(edp_dlap_t, KP) == 64 + 1032);
EDP_STATIC_ASSERT(alias, offsetof(edp_dlap_t, alias) == 64 + 1048);
EDP_STATIC_ASSERT(keep, offsetof(edp_dlap_t, keep) == 64 + 1112);
EDP_STATIC_ASSERT(keep_hi, offsetof(edp_threshold_t, hi) == 0 && sizeof(edp_threshold_t) == 8);
EDP_STATIC_ASSERT(scale2, offsetof(edp_dlap_quant_t, scale2) == 0);
EDP_STATIC_ASSERT(lo2, offsetof(edp_dlap_quant_t, lo2) == 4);
EDP_STATIC_ASSERT(hi2, offsetof(edp_dlap_quant_t, hi2) == 8);

EDP_NAKED void edp_dlap_noisy(const edp_dlap_t *d EDP_UNUSED, edp_drbg_t *r EDP_UNUSED,
                              const edp_dlap_quant_t *q EDP_UNUSED, const float *x EDP_UNUSED,
                              int32_t *y EDP_UNUSED, uint32_t k EDP_UNUSED)
{
    __asm__ volatile(
        "push {r0-r11, lr}\n\t"      /* d, r at [sp+28], [sp+32] below */
        "vpush {s16, s17}\n\t"
        "sub sp, sp, #20\n\t"
        "add ip, r1, #" EDP_STR(DRBG_WORD) "\n\t"
        "str ip, [sp]\n\t"
        "ldrd ip, lr, [r2, #4]\n\t"
        "strd ip, lr, [sp, #4]\n\t"
        "vldr s16, [r2]\n\t"
        "mov r4, r3\n\t"
        "movs r3, #0\n\t"             /* s17 = the word 0 from an integer zero: not scale2 - scale2, */
        "vmov s17, r3\n\t"            /* -0.0 (0x80000000) when FPSCR rounds toward minus infinity */
        "add r7, r0, #64\n\t"
        "ldm r0, {r8-r11}\n\t"       /* n1, s1, mk, imask */
        "bl 33f\n\t"                 /* load, r1 = r */
        "ldrd r3, lr, [sp, #80]\n\t"    /* y, k (k >= 1) */
        "add r5, r4, lr, lsl #2\n\t"
        /* one sample (the labels edp_dlap_noisy_* mark the regions that
         * host/edgedp/bench/deadline.py counts for the release deadline) */
        "1:\n\t"
        "edp_dlap_noisy_draw:\n\t"
        "cmp r1, r8\n\t"
        "bhs 2f\n\t"
        /* one more keystream word (nbits < n1) */
        "ldr ip, [sp]\n\t"
        "cmp r2, ip\n\t"
        "beq 10f\n\t"
        "11:\n\t"
        "ldr ip, [r2]\n\t"
        "vstmia r2!, {s17}\n\t"
        "lsr lr, ip, r1\n\t"
        "orr r0, r0, lr\n\t"
        "lsr r6, r0, r9\n\t"           /* x = the first n1 bits */
        "sub lr, r8, r1\n\t"
        "lsl r0, ip, lr\n\t"            /* the word's bits after them (a shift by 32 gives 0) */
        "add r1, r9\n\t"
        "b 3f\n\t"
        "2:\n\t"
        "lsr r6, r0, r9\n\t"
        "lsl r0, r0, r8\n\t"
        "sub r1, r1, r8\n\t"
        "3:\n\t"
        "bics ip, r10, r6\n\t"          /* acceptance bits all ones? */
        "beq 6f\n\t"
        "4:\n\t"
        "and ip, r6, r11\n\t"            /* w = fast[x & imask] */
        "ldrb lr, [r7, ip]\n\t"
        "cmp lr, #0x80\n\t"           /* a tie or the tail outcome */
        "bhs 7f\n\t"
        "5:\n\t"
        "ldr ip, [r7, #-40]\n\t"        /* g = (w << L) | (x >> vsh) */
        "lsl lr, lr, ip\n\t"
        "ldr ip, [r7, #-44]\n\t"
        "lsr ip, r6, ip\n\t"
        "orr lr, lr, ip\n\t"
        "ldr ip, [r7, #-48]\n\t"        /* sign */
        "tst r6, ip\n\t"
        "beq 8f\n\t"
        "cmp lr, #0\n\t"                /* (negative, 0): draw again */
        "beq 1b\n\t"
        "rsb lr, lr, #0\n\t"
        /* y = the quantised x + the sample (dlap.h, edp_dlap_quantize) */
        "8:\n\t"
        "edp_dlap_noisy_store:\n\t"
        "vldmia r4!, {s0}\n\t"
        "vmul.f32 s0, s0, s16\n\t"
        "vcvt.s32.f32 s0, s0\n\t"       /* toward zero, saturating */
        "vmov ip, s0\n\t"
        "ldr r6, [sp, #4]\n\t"
        "cmp ip, r6\n\t"
        "it lt\n\t"
        "movlt ip, r6\n\t"
        "ldr r6, [sp, #8]\n\t"
        "cmp ip, r6\n\t"
        "it gt\n\t"
        "movgt ip, r6\n\t"
        "add ip, ip, ip, asr #31\n\t"   /* R(u) = (u + 1 - [u < 0]) >> 1 = u - u / 2 */
        "add ip, ip, #1\n\t"
        "add ip, lr, ip, asr #1\n\t"
        "str ip, [r3], #4\n\t"
        "cmp r4, r5\n\t"
        "bne 1b\n\t"
        "edp_dlap_noisy_exit:\n\t"
        "bl 31f\n\t"
        "add sp, sp, #20\n\t"
        "vpop {s16, s17}\n\t"
        "pop {r0-r11, pc}\n\t"       /* r0-r3: the arguments back, nothing returned */
        /* a new keystream batch: continue at r->block + r->word */
        "10:\n\t"
        "edp_dlap_noisy_refill:\n\t"
        "push {r0-r3}\n\t"
        "ldr r0, [sp, #48]\n\t"
        "bl edp_drbg_next_block\n\t"
        "pop {r0-r3}\n\t"
        "ldr ip, [sp, #32]\n\t"
        "ldr r2, [ip, #" EDP_STR(DRBG_WORD) "]\n\t"
        "add r2, ip, r2, lsl #2\n\t"
        "adds r2, #64\n\t"
        "b 11b\n\t"
        /* acceptance: the next bit against a_V's bit K + 1 (1 iff V < vthr) */
        "6:\n\t"
        "edp_dlap_noisy_accept:\n\t"
        "cmp r1, #0\n\t"
        "beq 18f\n\t"
        "19:\n\t"
        "ldr ip, [r7, #-44]\n\t"
        "lsr ip, r6, ip\n\t"
        "ldr lr, [r7, #-32]\n\t"
        "cmp ip, lr\n\t"
        "bhs 13f\n\t"
        "tst r0, #0x80000000\n\t"     /* a's bit is 1: a stream 0 accepts */
        "bne 12f\n\t"
        "lsls r0, #1\n\t"
        "subs r1, #1\n\t"
        "b 4b\n\t"
        "13:\n\t"
        "tst r0, #0x80000000\n\t"     /* a's bit is 0: a stream 1 rejects */
        "beq 12f\n\t"
        "lsls r0, #1\n\t"
        "subs r1, #1\n\t"
        "b 1b\n\t"
        /* the bits agree: tier 1 of edp_dlap_accept_rest (dlap.c) on the
         * buffered bits, the same decision and consumption: a_V between
         * edp_dlap_band's lo and hi, decided at the first bit where the
         * stream leaves lo if lo and hi agree through it and it is buffered */
        "18:\n\t"                      /* no bit buffered: read a word (at a batch's end: C) */
        "ldr ip, [sp]\n\t"
        "cmp r2, ip\n\t"
        "beq 12f\n\t"
        "ldr r0, [r2]\n\t"
        "vstmia r2!, {s17}\n\t"
        "movs r1, #32\n\t"
        "b 19b\n\t"                    /* on, past the test: no instruction runs twice in a draw */
        "12:\n\t"
        "str r3, [sp, #12]\n\t"
        "strd r4, r5, [sp, #36]\n\t"
        "ldr ip, [r7, #-44]\n\t"
        "lsr ip, r6, ip\n\t"           /* V */
        "ldr r3, [r7, #1040]\n\t"
        "mul r3, ip, r3\n\t"           /* p = V c1 */
        "add r4, r3, ip\n\t"           /* s = p + V */
        "umull ip, r5, r4, r4\n\t"     /* s2 */
        "lsr lr, r5, #1\n\t"
        "add lr, lr, #3\n\t"
        "subs lr, lr, r3\n\t"          /* hi = 2^32 - p + s2/2 + 3, saturated */
        "it cs\n\t"
        "movcs lr, #-1\n\t"
        "umull ip, r5, r5, r4\n\t"     /* s3 */
        "umull ip, r3, r3, r3\n\t"     /* p2 */
        "negs r4, r4\n\t"
        "add r4, r4, r3, lsr #1\n\t"
        "sub r4, r4, r5, lsr #2\n\t"
        "subs r4, #3\n\t"               /* lo = 2^32 - s + p2/2 - s3/4 - 3 */
        "ldr ip, [r7, #1028]\n\t"      /* K */
        "rsb r5, ip, #32\n\t"
        "mvn r3, #0\n\t"
        "lsls r3, r5\n\t"
        "lsr r5, r0, ip\n\t"
        "orrs r3, r5\n\t"               /* the K ones and the buffered bits */
        "eors r3, r3, r4\n\t"
        "beq 14f\n\t"
        "clz r3, r3\n\t"
        "adds r3, #1\n\t"               /* pos: the first bit that differs from lo */
        "cmp r3, ip\n\t"
        "bls 14f\n\t"
        "add r5, ip, r1\n\t"
        "cmp r3, r5\n\t"
        "bhi 14f\n\t"                  /* not buffered: the C tier 1 reads on */
        "eor r5, r4, lr\n\t"
        "rsb lr, r3, #32\n\t"
        "lsrs r5, r5, lr\n\t"
        "bne 14f\n\t"                  /* lo and hi differ by then */
        "sub ip, r3, ip\n\t"
        "lsl r0, r0, ip\n\t"           /* consume through pos */
        "sub r1, r1, ip\n\t"
        "lsr r4, r4, lr\n\t"
        "tst r4, #1\n\t"               /* lo's bit at pos: 1 accepts */
        "ldr r3, [sp, #12]\n\t"
        "ldrd r4, r5, [sp, #36]\n\t"
        "beq 1b\n\t"
        "b 4b\n\t"
        "14:\n\t"                      /* undecided: edp_dlap_accept_rest */
        "ldrd r4, r5, [sp, #36]\n\t"
        "bl 31f\n\t"
        "mov r1, ip\n\t"
        "ldr r0, [sp, #28]\n\t"
        "ldr r2, [r7, #-44]\n\t"
        "lsr r2, r6, r2\n\t"
        "bl edp_dlap_accept_rest\n\t"
        "str r0, [sp, #16]\n\t"
        "bl 30f\n\t"
        "ldr r3, [sp, #12]\n\t"
        "ldr ip, [sp, #16]\n\t"
        "cmp ip, #0\n\t"
        "beq 1b\n\t"
        "b 4b\n\t"
        /* a tie of the keep prefix or the tail outcome */
        "7:\n\t"
        "edp_dlap_noisy_high:\n\t"
        "str r3, [sp, #12]\n\t"
        /* a tie: the stream against keep[col] after its KP-bit prefix, on the
         * buffered bits (tie() in dlap.c: the same decision and consumption) */
        "cmp lr, #0xFF\n\t"
        "bne 15f\n\t"
        "ldr r3, [r7, #1032]\n\t"      /* KP */
        "and ip, r6, r11\n\t"
        "lsr ip, ip, r3\n\t"           /* col */
        "add lr, r7, ip, lsl #3\n\t"
        "ldr lr, [lr, #1112]\n\t"      /* keep[col].hi */
        "lsl lr, lr, r3\n\t"
        "eor lr, lr, r0\n\t"
        "lsr lr, lr, r3\n\t"
        "lsls lr, lr, r3\n\t"          /* where the stream differs from keep, past the prefix */
        "beq 16f\n\t"
        "clz lr, lr\n\t"
        "cmp lr, r1\n\t"
        "bhs 16f\n\t"                  /* not buffered: high_part reads on */
        "lsl r0, r0, lr\n\t"
        "sub r1, r1, lr\n\t"
        "lsls r0, r0, #1\n\t"          /* C: the stream's bit there, 1 = above keep */
        "sub r1, r1, #1\n\t"
        "mov lr, ip\n\t"
        "bcc 17f\n\t"
        "add lr, r7, ip\n\t"
        "ldrb lr, [lr, #1048]\n\t"     /* alias[col] */
        "17:\n\t"
        "ldr r3, [r7, #-36]\n\t"       /* tail */
        "cmp lr, r3\n\t"
        "ldr r3, [sp, #12]\n\t"
        "bne 5b\n\t"
        "orr lr, lr, #0x80\n\t"        /* the tail outcome: high_part's rounds */
        "b 15f\n\t"
        "16:\n\t"
        "mov lr, #0xFF\n\t"
        "15:\n\t"
        "str lr, [sp, #16]\n\t"
        "bl 31f\n\t"
        "mov r1, ip\n\t"
        "ldr r0, [sp, #28]\n\t"
        "and r2, r6, r11\n\t"
        "ldr r3, [sp, #16]\n\t"
        "bl edp_dlap_high_part\n\t"
        "str r0, [sp, #16]\n\t"
        "bl 30f\n\t"
        "ldr r3, [sp, #12]\n\t"
        "ldr lr, [sp, #16]\n\t"
        "b 5b\n\t"
        /* load: r0 = cur, r1 = nbits, r2 = the next word from r (at 33: r1 = r) */
        "30:\n\t"
        "edp_dlap_noisy_load:\n\t"
        "ldr r1, [sp, #32]\n\t"
        "33:\n\t"
        "ldr r2, [r1, #" EDP_STR(DRBG_WORD) "]\n\t"
        "add r2, r1, r2, lsl #2\n\t"
        "adds r2, #64\n\t"
        "ldrd r0, r1, [r1, #" EDP_STR(DRBG_ACC_HI) "]\n\t"  /* acc's high word, nbits */
        "cmp r1, #32\n\t"
        "bls 32f\n\t"
        "ldr ip, [sp, #32]\n\t"
        "subs r1, #32\n\t"        /* e */
        "ldr r3, [ip, #" EDP_STR(DRBG_ACC_LO) "]\n\t"
        "vstr s17, [ip, #" EDP_STR(DRBG_ACC_LO) "]\n\t"  /* acc's low word 0: the flush writes only the high */
        "rsb ip, r1, #32\n\t"
        "lsr r3, r3, ip\n\t"
        "lsl ip, r0, r1\n\t"
        "orr r3, r3, ip\n\t"         /* the word: acc's bits e .. e + 31 */
        "str r3, [r2, #-4]!\n\t"
        "mvn ip, #0\n\t"
        "lsr ip, ip, r1\n\t"
        "bic r0, r0, ip\n\t"
        "32:\n\t"
        "bx lr\n\t"
        /* flush: cur as acc's high word (its low word is 0 while the loop runs), nbits, the word index */
        "31:\n\t"
        "edp_dlap_noisy_flush:\n\t"
        "ldr ip, [sp, #32]\n\t"
        "strd r0, r1, [ip, #" EDP_STR(DRBG_ACC_HI) "]\n\t"
        "sub r3, r2, ip\n\t"
        "subs r3, #64\n\t"
        "lsrs r3, #2\n\t"
        "str r3, [ip, #" EDP_STR(DRBG_WORD) "]\n\t"
        "bx lr\n\t");
}
#endif

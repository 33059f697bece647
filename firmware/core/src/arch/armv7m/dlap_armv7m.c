/* The sampling loop of dlap.c for ARMv7-M (arch/arch.h). */
#include "../arch.h"
#include "../../util.h"

#include <stddef.h>

#if EDP_ARCH_ARMV7M
/* The loop in Thumb-2 assembly (same bits, same results as
 * arch/portable/dlap_portable.c; checked by the QEMU bit-exact replay and tests/firmware).
 * Registers: r0:r1 = hi:lo bit buffer, r2 = nbits, r3 = next keystream word,
 * r4 = y, r5 = end, r6 = draw x, r7 = d + 64 (the fast table), r8 = imask,
 * r9 = n1, r10 = s1, r11 = mk; stack: [sp] d, [sp+4] r, [sp+8] the end of r->block. */
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
EDP_STATIC_ASSERT(word, offsetof(edp_drbg_t, word) == 320);
EDP_STATIC_ASSERT(acc, offsetof(edp_drbg_t, acc) == 328);
EDP_STATIC_ASSERT(nbits, offsetof(edp_drbg_t, nbits) == 336);
EDP_STATIC_ASSERT(batch, EDP_DRBG_BATCH_WORDS == 64);

/* Store the bit buffer to r (uses ip = r and r3). */
#define EDP_FLUSH \
    "ldr ip, [sp, #4]\n\t" \
    "strd r1, r0, [ip, #328]\n\t" \
    "str r2, [ip, #336]\n\t" \
    "sub r3, r3, ip\n\t" \
    "sub r3, r3, #64\n\t" \
    "lsr r3, r3, #2\n\t" \
    "str r3, [ip, #320]\n\t"
/* Reload it (uses ip and r3; keeps lr and the flags). */
#define EDP_LOAD \
    "ldr ip, [sp, #4]\n\t" \
    "ldr r3, [ip, #320]\n\t" \
    "ldr r2, [ip, #336]\n\t" \
    "ldrd r1, r0, [ip, #328]\n\t" \
    "add r3, ip, r3, lsl #2\n\t" \
    "add r3, r3, #64\n\t"

EDP_NAKED void edp_dlap_add(const edp_dlap_t *d EDP_UNUSED, edp_drbg_t *r EDP_UNUSED,
                            int32_t *y EDP_UNUSED, uint32_t k EDP_UNUSED)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "sub sp, sp, #12\n\t"
        "strd r0, r1, [sp]\n\t"
        "add ip, r1, #320\n\t"
        "str ip, [sp, #8]\n\t"
        "mov r4, r2\n\t"
        "add r5, r2, r3, lsl #2\n\t"
        "add r7, r0, #64\n\t"
        "ldrd r9, r10, [r0, #0]\n\t"
        "ldr r11, [r0, #8]\n\t"
        "ldr r8, [r0, #12]\n\t"
        EDP_LOAD
        "cmp r4, r5\n\t"
        "beq 9f\n\t"
        /* one sample (the labels edp_dlap_add_* mark the regions that
         * host/edgedp/bench/deadline.py counts for the release deadline) */
        "1:\n\t"
        "edp_dlap_add_draw:\n\t"
        "cmp r2, r9\n\t"
        "bhs 2f\n\t"
        /* one more keystream word (nbits < n1 <= 32: lo holds no valid bits) */
        "ldr ip, [sp, #8]\n\t"
        "cmp r3, ip\n\t"
        "beq 10f\n\t"
        "11:\n\t"                      /* nbits <= 31 here */
        "ldr ip, [r3], #4\n\t"
        "lsr lr, ip, r2\n\t"
        "orr r0, r0, lr\n\t"
        "lsl ip, ip, #1\n\t"
        "rsb lr, r2, #31\n\t"
        "lsl r1, ip, lr\n\t"
        "add r2, r2, #32\n\t"
        "2:\n\t"
        "lsr r6, r0, r10\n\t"           /* x = hi >> s1 */
        "lsl r0, r0, r9\n\t"            /* hi:lo <<= n1 (register shifts by 32 give 0) */
        "lsr ip, r1, r10\n\t"
        "orr r0, r0, ip\n\t"
        "lsl r1, r1, r9\n\t"
        "sub r2, r2, r9\n\t"
        "bics ip, r11, r6\n\t"          /* acceptance bits all ones? */
        "beq 6f\n\t"
        "3:\n\t"
        "and ip, r6, r8\n\t"            /* w = fast[x & imask] */
        "ldrb lr, [r7, ip]\n\t"
        "cmp lr, #0x80\n\t"           /* a tie or the tail outcome */
        "bhs 7f\n\t"
        "4:\n\t"
        "ldr ip, [r7, #-40]\n\t"        /* g = (w << L) | (x >> vsh) */
        "lsl lr, lr, ip\n\t"
        "ldr ip, [r7, #-44]\n\t"
        "lsr ip, r6, ip\n\t"
        "orr lr, lr, ip\n\t"
        "ldr ip, [r7, #-48]\n\t"        /* sign */
        "tst r6, ip\n\t"
        "ldr ip, [r4]\n\t"
        "bne 8f\n\t"
        "add ip, ip, lr\n\t"
        "str ip, [r4], #4\n\t"
        "cmp r4, r5\n\t"
        "bne 1b\n\t"
        "b 9f\n\t"
        "8:\n\t"
        "cmp lr, #0\n\t"                /* (negative, 0): draw again */
        "beq 1b\n\t"
        "sub ip, ip, lr\n\t"
        "str ip, [r4], #4\n\t"
        "cmp r4, r5\n\t"
        "bne 1b\n\t"
        "b 9f\n\t"
        /* a new keystream batch: continue at r->block + r->word */
        "10:\n\t"
        "edp_dlap_add_refill:\n\t"
        "push {r0-r3}\n\t"
        "ldr r0, [sp, #20]\n\t"
        "bl edp_drbg_next_block\n\t"
        "pop {r0-r3}\n\t"
        "ldr ip, [sp, #4]\n\t"
        "ldr r3, [ip, #320]\n\t"
        "add r3, ip, r3, lsl #2\n\t"
        "add r3, r3, #64\n\t"
        "b 11b\n\t"
        /* acceptance: the next bit against a_V's bit K + 1 (1 iff V < vthr) */
        "6:\n\t"
        "edp_dlap_add_accept:\n\t"
        "cmp r2, #0\n\t"
        "beq 12f\n\t"
        "ldr ip, [r7, #-44]\n\t"
        "lsr ip, r6, ip\n\t"
        "ldr lr, [r7, #-32]\n\t"
        "cmp ip, lr\n\t"
        "bhs 13f\n\t"
        "tst r0, #0x80000000\n\t"     /* a's bit is 1: a stream 0 accepts */
        "bne 12f\n\t"
        "lsls r1, r1, #1\n\t"
        "adc r0, r0, r0\n\t"
        "sub r2, r2, #1\n\t"
        "b 3b\n\t"
        "13:\n\t"
        "tst r0, #0x80000000\n\t"     /* a's bit is 0: a stream 1 rejects */
        "beq 12f\n\t"
        "lsls r1, r1, #1\n\t"
        "adc r0, r0, r0\n\t"
        "sub r2, r2, #1\n\t"
        "b 1b\n\t"
        "12:\n\t"                      /* the bits agree: compare further */
        EDP_FLUSH
        "mov r1, ip\n\t"
        "ldr r0, [sp]\n\t"
        "ldr r2, [r7, #-44]\n\t"
        "lsr r2, r6, r2\n\t"
        "bl edp_dlap_accept_rest\n\t"
        "cmp r0, #0\n\t"
        EDP_LOAD
        "beq 1b\n\t"
        "b 3b\n\t"
        /* a tie of the keep prefix or the tail outcome */
        "7:\n\t"
        "edp_dlap_add_high:\n\t"
        EDP_FLUSH
        "mov r1, ip\n\t"
        "ldr r0, [sp]\n\t"
        "and r2, r6, r8\n\t"
        "mov r3, lr\n\t"
        "bl edp_dlap_high_part\n\t"
        "mov lr, r0\n\t"
        EDP_LOAD
        "b 4b\n\t"
        "9:\n\t"
        "edp_dlap_add_exit:\n\t"
        EDP_FLUSH
        "add sp, sp, #12\n\t"
        "pop {r4-r11, pc}\n\t");
}
#endif

#include "edgedp/dlap.h"
#include "edgedp/error.h"

#include <stddef.h>

/* Slow paths of the sampling loop (external linkage: the ARMv7-M loop calls them). */
__attribute__((noinline)) int edp_dlap_accept_rest(const edp_dlap_t *d, edp_drbg_t *r, uint32_t v);
__attribute__((noinline)) uint32_t edp_dlap_high_part(const edp_dlap_t *d, edp_drbg_t *r, uint32_t idx, uint32_t w);

#define DLAP_EXP_TERMS 24
#define DLAP_MIN_TAIL (1.0 / 1048576.0)  /* stop adding alias values once q^w < 2^-20 */
#define DLAP_LIMBS (2 * EDP_DLAP_MAX_CHUNKS)

__attribute__((noinline)) double edp_exp_neg(double x)
{
    double r = 1.0;
    int n;
    for (n = DLAP_EXP_TERMS; n > 0; n--) r = 1.0 - x * r / (double)n;
    return r;
}

static uint64_t threshold64(double p)
{
    return (uint64_t)(p * 18446744073709551616.0);
}

static edp_threshold_t split(uint64_t v)
{
    edp_threshold_t th;
    th.hi = (uint32_t)(v >> 32);
    th.lo = (uint32_t)v;
    return th;
}

static uint64_t join(edp_threshold_t th)
{
    return (uint64_t)th.hi << 32 | th.lo;
}

/* ---- exact products of 64-bit factors (little-endian 32-bit limbs) ---- */

/* out = a_V * 2^(64 nc) = prod_c chunk[c][u_c] over the 4-bit chunks u_c of v,
 * 2 * nchunks limbs, least significant first (nchunks >= 1). */
static void product(const edp_dlap_t *d, uint32_t v, uint32_t *out)
{
    uint32_t n = 2, c, i, j;
    out[0] = d->chunk[0][v & 15u].lo;
    out[1] = d->chunk[0][v & 15u].hi;
    for (c = 1; c < d->nchunks; c++) {
        uint32_t f[2], res[DLAP_LIMBS], u = (v >> (EDP_DLAP_CHUNK_BITS * c)) & 15u;
        f[0] = d->chunk[c][u].lo;
        f[1] = d->chunk[c][u].hi;
        for (i = 0; i < n + 2; i++) res[i] = 0;
        for (j = 0; j < 2; j++) {
            uint64_t carry = 0;
            for (i = 0; i < n; i++) {
                uint64_t t = (uint64_t)out[i] * f[j] + res[i + j] + carry;
                res[i + j] = (uint32_t)t;
                carry = t >> 32;
            }
            res[n + j] = (uint32_t)carry;
        }
        n += 2;
        for (i = 0; i < n; i++) out[i] = res[i];
    }
}

/* Slow paths read r->acc directly: at least 32 bits buffered (one word suffices). */
static inline uint32_t peek32(edp_drbg_t *r)
{
    if (r->nbits < 32) {
        r->acc |= (uint64_t)edp_drbg_word(r) << (32 - r->nbits);
        r->nbits += 32;
    }
    return (uint32_t)(r->acc >> 32);
}

static inline void skip_bits(edp_drbg_t *r, uint32_t n)  /* 1 <= n <= 32 */
{
    r->acc <<= n;
    r->nbits -= n;
}

/* Compare the random stream, read as a binary fraction, with the number whose
 * bits are limbs[nlimbs-1] (most significant) .. limbs[0], without its top
 * `skip` bits (skip < 32). Consumes up to and including the first differing bit
 * and returns 1 iff the stream is below; all equal: consumes them, returns 0. */
static int less_than(edp_drbg_t *r, const uint32_t *limbs, uint32_t nlimbs, uint32_t skip)
{
    uint32_t j = nlimbs;
    while (j--) {
        uint32_t seg = limbs[j] << skip, len = 32 - skip, diff;
        skip = 0;
        diff = (peek32(r) ^ seg) & (0xFFFFFFFFu << (32 - len));
        if (diff) {
            uint32_t c = (uint32_t)__builtin_clz(diff) + 1;
            skip_bits(r, c);
            return (int)((seg >> (32 - c)) & 1u);
        }
        skip_bits(r, len);
    }
    return 0;
}

/* ---- set-up ---- */

int edp_dlap_setup(edp_dlap_t *d, double inv_t)
{
    uint64_t cap = (uint64_t)1 << (64 - EDP_DLAP_ALIAS_BITS), rest = 0;
    uint8_t small[EDP_DLAP_ALIAS_N], large[EDP_DLAP_ALIAS_N];
    uint32_t J = 0, L, c, u, w, ns = 0, nl = 0, ones, maxk;
    double pow2 = 1.0, q, one_minus_q, qp;
    if (!(inv_t <= 1.0 && inv_t > 0.0)) return EDP_ERR_BAD_VALUE;
    while (J < 62 && (pow2 * 2.0) * inv_t <= 1.0) {
        J++;
        pow2 *= 2.0;
    }
    if (J > EDP_DLAP_MAX_J) return EDP_ERR_BAD_VALUE;
    L = J >= EDP_DLAP_LOW_SHIFT ? J - EDP_DLAP_LOW_SHIFT : 0;
    d->J = J;
    d->nchunks = (L + EDP_DLAP_CHUNK_BITS - 1) / EDP_DLAP_CHUNK_BITS;
    for (c = 0; c < EDP_DLAP_MAX_CHUNKS; c++) {
        uint32_t width = c < d->nchunks ? L - EDP_DLAP_CHUNK_BITS * c : 0;
        if (width > EDP_DLAP_CHUNK_BITS) width = EDP_DLAP_CHUNK_BITS;
        d->chunk[c][0] = split(~(uint64_t)0);
        for (u = 1; u < 16; u++) {
            double x = (double)(u << (EDP_DLAP_CHUNK_BITS * c)) * inv_t;
            d->chunk[c][u] = split(u < (1u << width) ? threshold64(edp_exp_neg(x)) : 0);
        }
    }
    /* K: leading ones shared by every a_V (those of a_min, V all ones), capped. */
    d->K = 0;
    if (d->nchunks) {
        uint32_t limbs[DLAP_LIMBS], j;
        product(d, (1u << L) - 1, limbs);
        ones = 0;
        for (j = 2 * d->nchunks; j-- > 0 && limbs[j] == 0xFFFFFFFFu;) ones += 32;
        if (j < 2 * d->nchunks) ones += (uint32_t)__builtin_clz(~limbs[j]);
        maxk = EDP_DLAP_FIXED_BITS - 1 - EDP_DLAP_ALIAS_BITS - L;
        d->K = ones;
        if (d->K > EDP_DLAP_MAX_ACCEPT_BITS) d->K = EDP_DLAP_MAX_ACCEPT_BITS;
        if (d->K > maxk) d->K = maxk;
    }
    /* vthr: a_V (decreasing in V) has at least K + 1 leading ones iff V < vthr. */
    d->vthr = 0;
    if (d->nchunks) {
        uint32_t lo = 0, hi = 1u << L;  /* invariant: ones(a_V) > K for V < lo, not for V >= hi */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2, limbs[DLAP_LIMBS], top;
            product(d, mid, limbs);
            top = limbs[2 * d->nchunks - 1];
            if ((top >> (31 - d->K)) == (2u << d->K) - 1) lo = mid + 1;
            else hi = mid;
        }
        d->vthr = lo;
    }
    maxk = EDP_DLAP_FIXED_BITS - 1 - EDP_DLAP_ALIAS_BITS - L - d->K;
    d->KP = maxk < EDP_DLAP_MAX_KEEP_BITS ? maxk : EDP_DLAP_MAX_KEEP_BITS;
    d->n1 = L + d->K + 1 + EDP_DLAP_ALIAS_BITS + d->KP;
    d->s1 = 32 - d->n1;
    d->imask = ((uint32_t)EDP_DLAP_ALIAS_N << d->KP) - 1;
    d->sbit = d->imask + 1;
    d->mk = d->nchunks ? ((1u << d->K) - 1) * (d->sbit << 1) : 0x80000000u;
    d->vsh = d->n1 - L;
    d->L = L;
    d->c1 = L ? (uint32_t)(inv_t * 4294967296.0) : 0u;
    /* Alias table of W in exact integer masses (units of 2^-64), kept in d->keep
     * while Vose's pairing runs (a finished column's mass becomes its threshold). */
    for (pow2 = 1.0, c = 0; c < L; c++) pow2 *= 2.0;
    q = edp_exp_neg(pow2 * inv_t);
    one_minus_q = 1.0 - q;
    /* Masses (1-q) q^w for 1 <= w < tail and q^tail; value 0 (the largest mass)
     * takes the rounding residue so that all of them sum to exactly 2^64. */
    qp = q;
    for (w = 1; w < EDP_DLAP_ALIAS_N - 1 && qp >= DLAP_MIN_TAIL; w++) {
        uint64_t m = threshold64(one_minus_q * qp);
        d->keep[w] = split(m);
        rest -= m;
        qp *= q;
    }
    d->tail = w;
    d->keep[w] = split(threshold64(qp));
    rest -= join(d->keep[w]);
    d->keep[0] = split(rest);
    for (w++; w < EDP_DLAP_ALIAS_N; w++) d->keep[w] = split(0);
    for (w = 0; w < EDP_DLAP_ALIAS_N; w++) {
        d->alias[w] = (uint8_t)w;
        if (join(d->keep[w]) < cap) small[ns++] = (uint8_t)w;
        else large[nl++] = (uint8_t)w;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[--nl];
        uint64_t ms = join(d->keep[s]), ml = join(d->keep[l]) - (cap - ms);
        d->keep[s] = split(ms << EDP_DLAP_ALIAS_BITS);
        d->alias[s] = (uint8_t)l;
        d->keep[l] = split(ml);
        if (ml < cap) small[ns++] = (uint8_t)l;
        else large[nl++] = (uint8_t)l;
    }
    while (nl) d->keep[large[--nl]] = split(~(uint64_t)0);  /* full columns */
    for (w = 0; w <= d->imask; w++) {
        uint32_t col = w >> d->KP, p = w & ((1u << d->KP) - 1);
        uint32_t top = d->KP ? d->keep[col].hi >> (32 - d->KP) : 0u;
        uint32_t v = d->alias[col] == col || p < top ? col : p > top ? d->alias[col] : 0xFFu;
        d->fast[w] = (uint8_t)(v == d->tail ? 0x80u | v : v);  /* bit 7: see high_part */
    }
    return EDP_OK;
}

/* ---- sampling: slow paths (out of line, on the drbg's own bit buffer) ---- */

/* Decide "stream < a" for a threshold a whose top 32 bits lie in [lo32, hi32]
 * (lo32 <= hi32) and whose first `skip` bits (1..4, all ones) the stream has
 * already matched. Returns the answer after consuming through the first bit
 * that differs from a, or -1 (nothing consumed) if the bounds cannot tell where
 * that bit is. */
static inline int decide_band(edp_drbg_t *r, uint32_t lo32, uint32_t hi32, uint32_t skip)
{
    uint32_t win = (0xFFFFFFFFu << (32 - skip)) | (peek32(r) >> skip), diff = win ^ lo32, pos;
    if (!diff) return -1;
    pos = (uint32_t)__builtin_clz(diff) + 1;
    if (pos <= skip || ((lo32 ^ hi32) >> (32 - pos)) != 0) return -1;  /* bounds disagree through pos */
    skip_bits(r, pos - skip);
    return (int)((lo32 >> (32 - pos)) & 1u);
}

/* Tier 2 of accept_rest: the exact 64 nc-bit product a_V (rare: tier 1 leaves
 * about one acceptance test in 2^8 undecided). */
__attribute__((noinline)) static int accept_exact(const edp_dlap_t *d, edp_drbg_t *r, uint32_t v)
{
    uint32_t limbs[DLAP_LIMBS];
    product(d, v, limbs);
    return less_than(r, limbs, 2 * d->nchunks, d->K);
}

/* Acceptance of V after K leading ones were drawn: continue comparing with a_V.
 * Tier 1 bounds a_V = exp(-x), x = V/t, by 1 - x + x^2/2 - x^3/6 <= exp(-x) <=
 * 1 - x + x^2/2 in 32-bit fixed point (x <= 1/8, so the bounds share ~11 bits
 * and decide unless the stream follows a_V that far), else the exact product.
 * Both give the same answer and consumption: the first bit where the stream
 * differs from a_V. */
int edp_dlap_accept_rest(const edp_dlap_t *d, edp_drbg_t *r, uint32_t v)
{
    /* p <= x 2^32 <= s < 2^29 (c1 = floor(2^32 / t)); margins cover the tables' 2^-47. */
    uint32_t p = v * d->c1, s = p + v;
    uint32_t s2 = (uint32_t)(((uint64_t)s * s) >> 32), p2 = (uint32_t)(((uint64_t)p * p) >> 32);
    uint32_t s3 = (uint32_t)(((uint64_t)s2 * s) >> 32);
    uint32_t lo = 0u - s + (p2 >> 1) - (s3 >> 2) - 3u;   /* 2^32 (1 - x + x^2/2 - x^3/4) - 3 */
    uint64_t hi = ((uint64_t)1 << 32) - p + (s2 >> 1) + 3u;  /* 2^32 (1 - x + x^2/2) + 3 */
    int res = decide_band(r, lo, hi > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)hi, d->K);
    return res >= 0 ? res : accept_exact(d, r, v);
}

/* A tie of the keep prefix in column col: continue comparing the stream with
 * keep[col] after its top KP bits. */
static uint32_t tie(const edp_dlap_t *d, edp_drbg_t *r, uint32_t col)
{
    uint32_t KP = d->KP, seg = d->keep[col].hi << KP, diff = (peek32(r) ^ seg) & (0xFFFFFFFFu << KP);
    if (diff) {
        uint32_t c = (uint32_t)__builtin_clz(diff) + 1;
        skip_bits(r, c);
        return (seg >> (32 - c)) & 1u ? col : d->alias[col];
    } else {
        uint32_t limbs[1];
        skip_bits(r, 32 - KP);
        limbs[0] = d->keep[col].lo;
        return less_than(r, limbs, 1, 0) ? col : d->alias[col];
    }
}

/* W from a fast-table entry w with bit 7 set (0xFF: a tie of the keep prefix;
 * 0x80 | tail: the tail outcome) at index idx. */
uint32_t edp_dlap_high_part(const edp_dlap_t *d, edp_drbg_t *r, uint32_t idx, uint32_t w)
{
    uint32_t total = 0, rounds = 0, n = EDP_DLAP_ALIAS_BITS + d->KP;
    for (;;) {
        if (w == 0xFFu) w = tie(d, r, idx >> d->KP);
        w &= 0x7Fu;
        if (w != d->tail || rounds == EDP_DLAP_TAIL_ROUNDS) return total + w;
        total += d->tail;
        rounds++;
        idx = peek32(r) >> (32 - n);
        skip_bits(r, n);
        w = d->fast[idx];
    }
}

/* ---- sampling: the hot loop ---- */

#if defined(__arm__) && defined(__thumb2__) && (defined(__ARM_ARCH_7EM__) || defined(__ARM_ARCH_7M__))
/* ARMv7-M: the loop below in Thumb-2 assembly (same bits, same results as the
 * portable C after it; checked by the QEMU bit-exact replay and tests/bench).
 * Registers: r0:r1 = hi:lo bit buffer, r2 = nbits, r3 = next keystream word,
 * r4 = y, r5 = end, r6 = draw x, r7 = d + 64 (the fast table), r8 = imask,
 * r9 = n1, r10 = s1, r11 = mk; stack: [sp] d, [sp+4] r, [sp+8] r->block + 16. */
#define EDP_CHECK(name, cond) typedef char edp_check_##name[(cond) ? 1 : -1]
EDP_CHECK(n1, offsetof(edp_dlap_t, n1) == 0);
EDP_CHECK(s1, offsetof(edp_dlap_t, s1) == 4);
EDP_CHECK(mk, offsetof(edp_dlap_t, mk) == 8);
EDP_CHECK(imask, offsetof(edp_dlap_t, imask) == 12);
EDP_CHECK(sbit, offsetof(edp_dlap_t, sbit) == 16);
EDP_CHECK(vsh, offsetof(edp_dlap_t, vsh) == 20);
EDP_CHECK(L, offsetof(edp_dlap_t, L) == 24);
EDP_CHECK(tail, offsetof(edp_dlap_t, tail) == 28);
EDP_CHECK(vthr, offsetof(edp_dlap_t, vthr) == 32);
EDP_CHECK(fast, offsetof(edp_dlap_t, fast) == 64);
EDP_CHECK(block, offsetof(edp_drbg_t, block) == 64);
EDP_CHECK(word, offsetof(edp_drbg_t, word) == 128);
EDP_CHECK(acc, offsetof(edp_drbg_t, acc) == 136);
EDP_CHECK(nbits, offsetof(edp_drbg_t, nbits) == 144);

/* Store the bit buffer to r (uses ip = r and r3). */
#define EDP_FLUSH \
    "ldr ip, [sp, #4]\n\t" \
    "strd r1, r0, [ip, #136]\n\t" \
    "str r2, [ip, #144]\n\t" \
    "sub r3, r3, ip\n\t" \
    "sub r3, r3, #64\n\t" \
    "lsr r3, r3, #2\n\t" \
    "str r3, [ip, #128]\n\t"
/* Reload it (uses ip and r3; keeps lr and the flags). */
#define EDP_LOAD \
    "ldr ip, [sp, #4]\n\t" \
    "ldr r3, [ip, #128]\n\t" \
    "ldr r2, [ip, #144]\n\t" \
    "ldrd r1, r0, [ip, #136]\n\t" \
    "add r3, ip, r3, lsl #2\n\t" \
    "add r3, r3, #64\n\t"

__attribute__((naked)) void edp_dlap_add(const edp_dlap_t *d __attribute__((unused)),
                                         edp_drbg_t *r __attribute__((unused)),
                                         int32_t *y __attribute__((unused)), uint32_t k __attribute__((unused)))
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "sub sp, sp, #12\n\t"
        "strd r0, r1, [sp]\n\t"
        "add ip, r1, #128\n\t"
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
        /* one sample */
        "1:\n\t"
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
        /* a new keystream block */
        "10:\n\t"
        "push {r0-r3}\n\t"
        "ldr r0, [sp, #20]\n\t"
        "bl edp_drbg_next_block\n\t"
        "pop {r0-r3}\n\t"
        "ldr r3, [sp, #4]\n\t"
        "add r3, r3, #64\n\t"
        "b 11b\n\t"
        /* acceptance: the next bit against a_V's bit K + 1 (1 iff V < vthr) */
        "6:\n\t"
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
        EDP_FLUSH
        "add sp, sp, #12\n\t"
        "pop {r4-r11, pc}\n\t");
}
#else
void edp_dlap_add(const edp_dlap_t *d, edp_drbg_t *r, int32_t *y, uint32_t k)
{
    /* The bit buffer lives in registers: hi:lo = r->acc, nbits = r->nbits, and
     * wp points at the next unread keystream word (r->word). */
    uint32_t hi = (uint32_t)(r->acc >> 32), lo = (uint32_t)r->acc, nbits = r->nbits;
    const uint32_t *wp = r->block + r->word;
    int32_t *const end = y + k;
#define DLAP_FLUSH() (r->acc = (uint64_t)hi << 32 | lo, r->nbits = nbits, r->word = (uint32_t)(wp - r->block))
#define DLAP_LOAD() (hi = (uint32_t)(r->acc >> 32), lo = (uint32_t)r->acc, nbits = r->nbits, wp = r->block + r->word)
    while (y != end) {
        uint32_t x, w, g;
        if (nbits < d->n1) {  /* one more word; nbits < 32, so lo holds no valid bits */
            uint32_t wd;
            if (wp == r->block + 16) {
                edp_drbg_next_block(r);
                wp = r->block;
            }
            wd = *wp++;
            hi |= wd >> nbits;
            lo = (wd << 1) << (31 - nbits);
            nbits += 32;
        }
        x = hi >> d->s1;  /* the fixed draw: V | accept prefix | sign | column | keep prefix */
        hi = ((hi << (d->n1 - 1)) << 1) | (lo >> d->s1);  /* n1 may be 32 */
        lo = (lo << (d->n1 - 1)) << 1;
        nbits -= d->n1;
        if ((d->mk & ~x) == 0) {  /* K acceptance bits all ones: compare further */
            int ok;
            DLAP_FLUSH();
            ok = edp_dlap_accept_rest(d, r, x >> d->vsh);
            DLAP_LOAD();
            if (!ok) continue;
        }
        w = d->fast[x & d->imask];
        if (w & 0x80u) {  /* a tie of the keep prefix, or the tail outcome */
            DLAP_FLUSH();
            w = edp_dlap_high_part(d, r, x & d->imask, w);
            DLAP_LOAD();
        }
        g = (w << d->L) | (x >> d->vsh);
        if (x & d->sbit) {
            if (!g) continue;  /* (negative, 0): redraw */
            *y++ -= (int32_t)g;
        } else {
            *y++ += (int32_t)g;
        }
    }
    DLAP_FLUSH();
#undef DLAP_FLUSH
#undef DLAP_LOAD
}

#endif

int32_t edp_dlap_sample(const edp_dlap_t *d, edp_drbg_t *rng)
{
    int32_t z = 0;
    edp_dlap_add(d, rng, &z, 1);
    return z;
}

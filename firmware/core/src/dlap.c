#include "dlap.h"
#include "edgedp/error.h"
#include "arch/arch.h"
#include "util.h"

#define DLAP_LIMBS (2 * EDP_DLAP_MAX_CHUNKS)

EDP_NOINLINE double edp_exp_neg(double x)
{
    double r = 1.0;
    int n;
    for (n = EDP_DLAP_EXP_TERMS; n > 0; n--) r = 1.0 - x * r / (double)n;
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
static EDP_ALWAYS_INLINE uint32_t peek32(edp_drbg_t *r)
{
    if (r->nbits < 32) {
        r->acc |= (uint64_t)edp_drbg_word(r) << (32 - r->nbits);
        r->nbits += 32;
    }
    return (uint32_t)(r->acc >> 32);
}

static EDP_ALWAYS_INLINE void skip_bits(edp_drbg_t *r, uint32_t n)  /* 1 <= n <= 32 */
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
            uint32_t c = EDP_CLZ32(diff) + 1;
            skip_bits(r, c);
            return (int)((seg >> (32 - c)) & 1u);
        }
        skip_bits(r, len);
    }
    return 0;
}

/* ---- set-up: one function per phase of lattice.dlap_tables (same double operations) ---- */

/* J = floor(log2 t), L = max(J - 3, 0) uniform low bits and their ceil(L / 4)
 * chunks (lattice.make_lattice computes J). EDP_ERR_BAD_VALUE unless
 * 2^-25 < inv_t <= 1. */
static int scale_bits(edp_dlap_t *d, double inv_t)
{
    uint32_t J = 0;
    double pow2 = 1.0;
    if (!(inv_t <= 1.0 && inv_t > 0.0)) return EDP_ERR_BAD_VALUE;
    while (J < 62 && (pow2 * 2.0) * inv_t <= 1.0) {
        J++;
        pow2 *= 2.0;
    }
    if (J > EDP_DLAP_MAX_J) return EDP_ERR_BAD_VALUE;
    d->J = J;
    d->L = J >= EDP_DLAP_LOW_SHIFT ? J - EDP_DLAP_LOW_SHIFT : 0;
    d->nchunks = (d->L + EDP_DLAP_CHUNK_BITS - 1) / EDP_DLAP_CHUNK_BITS;
    return EDP_OK;
}

/* chunks: the factors of the acceptance threshold a_V, chunk[c][u] =
 * floor(exp(-u 2^(4c) / t) 2^64) for the u a chunk of width min(4, L - 4c)
 * can hold, 0 above; u = 0: 2^64 - 1. */
static void chunk_tables(edp_dlap_t *d, double inv_t)
{
    uint32_t c, u;
    for (c = 0; c < EDP_DLAP_MAX_CHUNKS; c++) {
        uint32_t width = c < d->nchunks ? d->L - EDP_DLAP_CHUNK_BITS * c : 0;
        if (width > EDP_DLAP_CHUNK_BITS) width = EDP_DLAP_CHUNK_BITS;
        d->chunk[c][0] = split(~(uint64_t)0);
        for (u = 1; u < 16; u++) {
            double x = (double)(u << (EDP_DLAP_CHUNK_BITS * c)) * inv_t;
            d->chunk[c][u] = split(u < (1u << width) ? threshold64(edp_exp_neg(x)) : 0);
        }
    }
}

/* K: the leading ones shared by every a_V (those of a_min, V all ones), capped
 * so that the fixed draw fits 32 bits; and vthr: a_V (decreasing in V) has at
 * least K + 1 leading ones iff V < vthr. Both 0 if L = 0. */
static void accept_bits(edp_dlap_t *d)
{
    uint32_t L = d->L, limbs[DLAP_LIMBS], j, ones = 0, maxk, lo = 0, hi = 1u << L;
    d->K = 0;
    d->vthr = 0;
    if (!d->nchunks) return;
    product(d, (1u << L) - 1, limbs);
    for (j = 2 * d->nchunks; j-- > 0 && limbs[j] == 0xFFFFFFFFu;) ones += 32;
    if (j < 2 * d->nchunks) ones += EDP_CLZ32(~limbs[j]);
    maxk = EDP_DLAP_FIXED_BITS - 1 - EDP_DLAP_ALIAS_BITS - L;
    d->K = ones;
    if (d->K > EDP_DLAP_MAX_ACCEPT_BITS) d->K = EDP_DLAP_MAX_ACCEPT_BITS;
    if (d->K > maxk) d->K = maxk;
    while (lo < hi) {  /* invariant: ones(a_V) > K for V < lo, not for V >= hi */
        uint32_t mid = lo + (hi - lo) / 2, top;
        product(d, mid, limbs);
        top = limbs[2 * d->nchunks - 1];
        if ((top >> (31 - d->K)) == (2u << d->K) - 1) lo = mid + 1;
        else hi = mid;
    }
    d->vthr = lo;
}

/* masses: the geometric law of W in integer units of 2^-64, kept in d->keep
 * until alias_pairs turns them into thresholds: (1-q) q^w for 1 <= w < tail,
 * q^tail for the tail outcome, and value 0 (the largest mass) the rounding
 * residue, so that all of them sum to exactly 2^64; q = exp(-2^L / t). */
static void alias_masses(edp_dlap_t *d, double inv_t)
{
    uint64_t rest = 0;
    uint32_t c, w;
    double pow2 = 1.0, q, one_minus_q, qp;
    for (c = 0; c < d->L; c++) pow2 *= 2.0;
    q = edp_exp_neg(pow2 * inv_t);
    one_minus_q = 1.0 - q;
    qp = q;
    for (w = 1; w < EDP_DLAP_ALIAS_N - 1 && qp >= EDP_DLAP_MIN_TAIL; w++) {
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
}

/* tail_rounds R': W reaches the cap (R' + 1) tail, a point mass, only after
 * R' + 1 tail outcomes of probability p each (p = the tail's mass / 2^64). With
 * span = tail 2^L lattice steps, a neighbour s steps away puts mass where the
 * capped law differs from the uncapped one only at |z| >= (R' + 1) span - s,
 * which has probability <= 2 p^(R' + 1 - ceil(s / span)); with the other sign,
 * at most 4 p^(R' + 1 - ceil(s / span)) of delta per coordinate. R' is the least
 * with p^(R' + 1 - ceil(shift / span)) <= 2^-EDP_DLAP_CAP_BITS, so that this
 * delta stays below 2^-66 (docs/privacy.md section 2; the double product's
 * relative error is far below 2^-40). EDP_ERR_BAD_VALUE if the largest |z|,
 * (R' + 2) span - 1, would reach EDP_DLAP_Z_LIMIT. Reads the tail mass from
 * d->keep, so it runs before alias_pairs. Mirrored by lattice.tail_rounds. */
static int tail_cap(edp_dlap_t *d, double shift)
{
    double p = (double)join(d->keep[d->tail]) / 18446744073709551616.0, pr = 1.0, span = (double)d->tail;
    double floor_bound = 1.0, need;
    uint32_t c, j = 0;
    for (c = 0; c < d->L; c++) span *= 2.0;
    for (c = 0; c < EDP_DLAP_CAP_BITS; c++) floor_bound *= 0.5;
    while (pr > floor_bound) {
        pr *= p;
        j++;
    }
    if (!(shift < EDP_DLAP_Z_LIMIT)) return EDP_ERR_BAD_VALUE;
    need = (double)(uint32_t)(shift / span);
    if (need * span < shift) need += 1.0;
    if ((need + (double)j + 1.0) * span > EDP_DLAP_Z_LIMIT) return EDP_ERR_BAD_VALUE;
    d->tail_rounds = (uint32_t)need + j - 1;
    return EDP_OK;
}

/* Vose's pairing of the masses into 64 columns: a finished column's mass
 * becomes its keep threshold, its alias the column that filled it; full
 * columns keep 2^64 - 1 and alias themselves. */
static void alias_pairs(edp_dlap_t *d)
{
    uint64_t cap = (uint64_t)1 << (64 - EDP_DLAP_ALIAS_BITS);
    uint8_t small[EDP_DLAP_ALIAS_N], large[EDP_DLAP_ALIAS_N];
    uint32_t w, ns = 0, nl = 0;
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
}

/* KP (the keep bits the fixed draw has room for) and the layout of the fixed
 * draw of n1 bits, MSB first: V | K acceptance bits | sign | column | KP keep
 * bits (lattice.Lattice.take_bits); c1 for the slow path's bounds of a_V. */
static void fixed_draw(edp_dlap_t *d, double inv_t)
{
    uint32_t L = d->L, maxk = EDP_DLAP_FIXED_BITS - 1 - EDP_DLAP_ALIAS_BITS - L - d->K;
    d->KP = maxk < EDP_DLAP_MAX_KEEP_BITS ? maxk : EDP_DLAP_MAX_KEEP_BITS;
    d->n1 = L + d->K + 1 + EDP_DLAP_ALIAS_BITS + d->KP;
    d->s1 = 32 - d->n1;
    d->imask = ((uint32_t)EDP_DLAP_ALIAS_N << d->KP) - 1;
    d->sbit = d->imask + 1;
    d->mk = d->nchunks ? ((1u << d->K) - 1) * (d->sbit << 1) : 0x80000000u;
    d->vsh = d->n1 - L;
    d->c1 = L ? (uint32_t)(inv_t * 4294967296.0) : 0u;
}

/* The fast table: W by (column, keep prefix) where the KP-bit prefix decides
 * the keep comparison; 0xFF where it ties, 0x80 | tail for the tail outcome.
 * (reference.dlap_sample decides from keep and alias directly, bit by bit.) */
static void fast_table(edp_dlap_t *d)
{
    uint32_t w;
    for (w = 0; w <= d->imask; w++) {
        uint32_t col = w >> d->KP, p = w & ((1u << d->KP) - 1);
        uint32_t top = d->KP ? d->keep[col].hi >> (32 - d->KP) : 0u;
        uint32_t v = d->alias[col] == col || p < top ? col : p > top ? d->alias[col] : 0xFFu;
        d->fast[w] = (uint8_t)(v == d->tail ? 0x80u | v : v);  /* bit 7: see high_part */
    }
}

int edp_dlap_setup(edp_dlap_t *d, double inv_t, double shift)
{
    int err = scale_bits(d, inv_t);
    if (err) return err;
    chunk_tables(d, inv_t);
    accept_bits(d);
    alias_masses(d, inv_t);
    if ((err = tail_cap(d, shift))) return err;
    alias_pairs(d);
    fixed_draw(d, inv_t);
    fast_table(d);
    return EDP_OK;
}

/* ---- sampling: slow paths (out of line, on the drbg's own bit buffer) ---- */

/* Decide "stream < a" for a threshold a whose top 32 bits lie in [lo32, hi32]
 * (lo32 <= hi32) and whose first `skip` bits (1..4, all ones) the stream has
 * already matched. Returns the answer after consuming through the first bit
 * that differs from a, or -1 (nothing consumed) if the bounds cannot tell where
 * that bit is. */
static EDP_ALWAYS_INLINE int decide_band(edp_drbg_t *r, uint32_t lo32, uint32_t hi32, uint32_t skip)
{
    uint32_t win = (0xFFFFFFFFu << (32 - skip)) | (peek32(r) >> skip), diff = win ^ lo32, pos;
    if (!diff) return -1;
    pos = EDP_CLZ32(diff) + 1;
    if (pos <= skip || ((lo32 ^ hi32) >> (32 - pos)) != 0) return -1;  /* bounds disagree through pos */
    skip_bits(r, pos - skip);
    return (int)((lo32 >> (32 - pos)) & 1u);
}

/* Tier 2 of accept_rest: the exact 64 nc-bit product a_V (rare: tier 1 leaves
 * about one acceptance test in 2^8 undecided). */
EDP_COLD static int accept_exact(const edp_dlap_t *d, edp_drbg_t *r, uint32_t v)
{
    uint32_t limbs[DLAP_LIMBS];
    product(d, v, limbs);
    return less_than(r, limbs, 2 * d->nchunks, d->K);
}

/* Acceptance of V after K leading ones were drawn: continue comparing with a_V.
 * Tier 1 bounds a_V between the two ends of edp_dlap_band (x <= 1/8, so the
 * bounds share ~11 bits and decide unless the stream follows a_V that far),
 * else the exact product. Both give the same answer and consumption: the first
 * bit where the stream differs from a_V. */
void edp_dlap_band(const edp_dlap_t *d, uint32_t v, uint32_t *lo32, uint32_t *hi32)
{
    /* p <= x 2^32 <= s < 2^29 (c1 = floor(2^32 / t)); margins cover the tables' 2^-47. */
    uint32_t p = v * d->c1, s = p + v;
    uint32_t s2 = (uint32_t)(((uint64_t)s * s) >> 32), p2 = (uint32_t)(((uint64_t)p * p) >> 32);
    uint32_t s3 = (uint32_t)(((uint64_t)s2 * s) >> 32);
    uint64_t hi = ((uint64_t)1 << 32) - p + (s2 >> 1) + 3u;  /* 2^32 (1 - x + x^2/2) + 3 */
    *lo32 = 0u - s + (p2 >> 1) - (s3 >> 2) - 3u;   /* 2^32 (1 - x + x^2/2 - x^3/4) - 3 */
    *hi32 = hi > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)hi;
}

EDP_COLD int edp_dlap_accept_rest(const edp_dlap_t *d, edp_drbg_t *r, uint32_t v)
{
    uint32_t lo, hi;
    int res;
    edp_dlap_band(d, v, &lo, &hi);
    res = decide_band(r, lo, hi, d->K);
    return res >= 0 ? res : accept_exact(d, r, v);
}

/* A tie of the keep prefix in column col: continue comparing the stream with
 * keep[col] after its top KP bits. */
static EDP_ALWAYS_INLINE uint32_t tie(const edp_dlap_t *d, edp_drbg_t *r, uint32_t col)
{
    uint32_t KP = d->KP, seg = d->keep[col].hi << KP, diff = (peek32(r) ^ seg) & (0xFFFFFFFFu << KP);
    if (diff) {
        uint32_t c = EDP_CLZ32(diff) + 1;
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
EDP_COLD uint32_t edp_dlap_high_part(const edp_dlap_t *d, edp_drbg_t *r, uint32_t idx, uint32_t w)
{
    uint32_t total = 0, rounds = 0, n = EDP_DLAP_ALIAS_BITS + d->KP;
    for (;;) {
        if (w == 0xFFu) w = tie(d, r, idx >> d->KP);
        w &= 0x7Fu;
        if (w != d->tail || rounds == d->tail_rounds) return total + w;
        total += d->tail;
        rounds++;
        idx = peek32(r) >> (32 - n);
        skip_bits(r, n);
        w = d->fast[idx];
    }
}

int32_t edp_dlap_sample(const edp_dlap_t *d, edp_drbg_t *rng)
{
    static const edp_dlap_quant_t zero = {0.0f, 0, 0};
    const float x = 0.0f;
    int32_t z;
    edp_dlap_noisy(d, rng, &zero, &x, &z, 1);
    return z;
}

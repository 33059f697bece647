#include "edgedp/options.h"  /* first: EDP_CONFIG may override the constants below */
#include "deadline.h"
#include "mech.h"
#include "arch/arch.h"  /* EDP_ARCH_ARMV7M_FPU: which dense loops the model runs */
#include "util.h"

/* Instruction constants (deadline.h), checked by tests/firmware/test_deadline.py
 * against host/edgedp/bench/deadline.py's figures for the compiled image:
 * static sizes of code regions (each instruction runs at most once per pass)
 * and worst paths with trip counts fixed by the tables, with a margin of at
 * least 1.25; whole-window parts measured from executions with at least 1.5.
 * They hold for the code gcc 12 -O2 makes of this core (Debian's 12.2.1): a
 * firmware built otherwise overrides them (-DEDP_DL_DRAW=..., or the EDP_CONFIG
 * header) with figures measured on its own image, see docs/vendoring.md. */
#ifndef EDP_DL_CALL
#define EDP_DL_CALL 59u             /* edp_dlap_noisy's entry and exit (a load, a flush), once per noise */
#endif
#ifndef EDP_DL_DRAW
#define EDP_DL_DRAW 43u             /* one fixed draw's fast path (region edp_dlap_noisy_draw) */
#endif
#ifndef EDP_DL_STORE
#define EDP_DL_STORE 23u            /* quantising one input, adding its sample (region _store), per class */
#endif
#ifndef EDP_DL_ACCEPT
#define EDP_DL_ACCEPT 107u          /* acceptance past the K fixed bits: region _accept (the next bit, tier 1 in the loop) */
#endif
#ifndef EDP_DL_ACCEPT_CALL
#define EDP_DL_ACCEPT_CALL 168u     /* its C fallback: load, flush, accept_rest, band */
#endif
#ifndef EDP_DL_EXACT_PER_CHUNK
#define EDP_DL_EXACT_PER_CHUNK 250u /* exact product: accept_exact, less_than over 2 limbs per chunk */
#endif
#ifndef EDP_DL_EXACT_PER_CHUNK2
#define EDP_DL_EXACT_PER_CHUNK2 27u /* the product, quadratic in the chunks */
#endif
#ifndef EDP_DL_HIGH
#define EDP_DL_HIGH 367u            /* a tie or tail outcome: region _high (ties inline), load, flush, one pass of high_part */
#endif
#ifndef EDP_DL_ROUND
#define EDP_DL_ROUND 280u           /* one more tail round: one pass of high_part */
#endif
#ifndef EDP_DL_REFILL
#define EDP_DL_REFILL 3900u         /* region _refill and edp_drbg_next_block (3,078; the block
                                       * counter's carry into word 13, never measured, adds 3) */
#endif
/* Keystream words a refill makes available (drbg.h): not a measured cost, so no override. */
#define EDP_DL_REFILL_WORDS ((uint32_t)(EDP_DRBG_BATCH_WORDS - EDP_DRBG_KEY_WORDS))
#ifndef EDP_DL_PREP_BASE
#define EDP_DL_PREP_BASE 450000u    /* edp_mech_prepare with L = 0 (this file's set-up included) */
#endif
#ifndef EDP_DL_PREP_PER_L
#define EDP_DL_PREP_PER_L 80000u    /* per uniform low bit L: products, chunk tables */
#endif
#ifndef EDP_DL_PER_INPUT
#define EDP_DL_PER_INPUT 100u       /* COBS decoding, CRC and checks of 4 request bytes (zeros: the longest) */
#endif
#ifndef EDP_DL_PER_CLASS
#define EDP_DL_PER_CLASS 108u       /* clamp, CRC, encoding of 4 response bytes, the wipe */
#endif
#ifndef EDP_DL_TOPK_PER_K
#define EDP_DL_TOPK_PER_K 16u       /* TOPK insertion: per class and per K */
#endif
#ifndef EDP_DL_SIMPLEX
#define EDP_DL_SIMPLEX 500u         /* SIMPLEX: 33 bisection passes, per class */
#endif
#ifndef EDP_DL_MODEL_NET
#define EDP_DL_MODEL_NET 150u       /* per net of the model */
#endif
/* Per multiply-add of a dense layer: the VLDMIA loops of arch/armv7m/model_armv7m.c
 * (2.5 per multiply-add four rows at a time, 3.1 for one), or the portable C. */
#define EDP_DL_MODEL_MAC_FPU 4u
#define EDP_DL_MODEL_MAC_C 5u
#ifndef EDP_DL_MODEL_MAC
#if EDP_ARCH_ARMV7M_FPU
#define EDP_DL_MODEL_MAC EDP_DL_MODEL_MAC_FPU
#else
#define EDP_DL_MODEL_MAC EDP_DL_MODEL_MAC_C
#endif
#endif
#ifndef EDP_DL_MODEL_UNIT
#define EDP_DL_MODEL_UNIT 30u       /* per output of a dense layer (bias, ReLU, store) */
#endif
#ifndef EDP_DL_MODEL_CLASS
#define EDP_DL_MODEL_CLASS 80u      /* per class and net of a SOFTMAX head: exp and division */
#endif
#ifndef EDP_DL_MODEL_VOTE
#define EDP_DL_MODEL_VOTE 13u       /* per class and net of a VOTES head: the argmax */
#endif
/* Outside the kernels: edp_model_wipe after the answer (its sizes declared by
 * the model). */
#ifndef EDP_DL_MODEL_ZERO
#define EDP_DL_MODEL_ZERO 65u       /* per buffer edp_model_wipe zeroes (1, int8: 3): edp_model_zero's call */
#endif
#ifndef EDP_DL_MODEL_WIPE_BYTE
#define EDP_DL_MODEL_WIPE_BYTE 1u   /* per byte zeroed (memset: a word and more per store) */
#endif
/* answer.c's finite_output, on every INFER whatever the model gave: the check
 * of its n_classes outputs and, when one is not finite, the fixed vector that
 * replaces them (longest path: the last output not finite), its call site
 * included (edgedp.bench.deadline.nonfinite_paths). */
#ifndef EDP_DL_NONFINITE
#define EDP_DL_NONFINITE 28u        /* once per INFER: the call, the fixed value (a division) */
#endif
#ifndef EDP_DL_NONFINITE_CLASS
#define EDP_DL_NONFINITE_CLASS 18u  /* per class: its check and its store */
#endif
/* int8 models (model_s8.c; edgedp.bench.deadline.measure_s8 fits them on
 * synthetic nets, the worst of the clamps' branches). The weights' inner loop
 * and the input's widening depend on the DSP extension (SXTB16 and SMLAD on
 * the Cortex-M4, the default ports; the portable C otherwise, measured on the
 * same core with -U__ARM_FEATURE_DSP). The head is the float one above
 * (EDP_DL_MODEL_NET, EDP_DL_MODEL_CLASS or EDP_DL_MODEL_VOTE). */
#ifndef EDP_DL_S8_MODEL
#define EDP_DL_S8_MODEL 95u         /* edp_model_run_s8's entry and exit, once per INFER */
#endif
#ifndef EDP_DL_S8_INPUT
#define EDP_DL_S8_INPUT 22u         /* per input feature: its quantisation */
#endif
#ifndef EDP_DL_S8_LAYER
#define EDP_DL_S8_LAYER 92u         /* per layer: the call, its set-up, the odd-output check */
#endif
#ifndef EDP_DL_S8_UNIT
#define EDP_DL_S8_UNIT 50u          /* per output, rounded up to even: requantisation or dequantisation */
#endif
#define EDP_DL_S8_WORD_DSP 9u       /* per 4 inputs of a layer widened (SXTB16; nets without
                                     * hidden layers share their input's) */
#define EDP_DL_S8_MAC8_DSP 17u      /* per weight word of an output pair, 8 multiply-adds (SMLAD) */
#define EDP_DL_S8_WORD_C 17u        /* the same in portable C */
#define EDP_DL_S8_MAC8_C 40u
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#ifndef EDP_DL_S8_WORD
#define EDP_DL_S8_WORD EDP_DL_S8_WORD_DSP
#endif
#ifndef EDP_DL_S8_MAC8
#define EDP_DL_S8_MAC8 EDP_DL_S8_MAC8_DSP
#endif
#else
#ifndef EDP_DL_S8_WORD
#define EDP_DL_S8_WORD EDP_DL_S8_WORD_C
#endif
#ifndef EDP_DL_S8_MAC8
#define EDP_DL_S8_MAC8 EDP_DL_S8_MAC8_C
#endif
#endif
/* Imported graphs (model_graph.c, portable C): upper bounds per unit of work,
 * each window charged in full (taps outside the input cost less), set from
 * edp_model_graph_run's instructions per operator on the Cortex-M4 (Unicorn;
 * docs/model.md "Deadlines": the two committed CNNs measure 1.0-1.6x below). */
#ifndef EDP_DL_G_MODEL
#define EDP_DL_G_MODEL 300u         /* once per INFER: the call, the loops' set-up */
#endif
#ifndef EDP_DL_G_INPUT
#define EDP_DL_G_INPUT 40u          /* per input: its quantisation (a division, the rounding) */
#endif
#ifndef EDP_DL_G_OUTPUT
#define EDP_DL_G_OUTPUT 12u         /* per output: its dequantisation */
#endif
#ifndef EDP_DL_G_OP
#define EDP_DL_G_OP 120u            /* per operator: dispatch, set-up */
#endif
#ifndef EDP_DL_G_POS
#define EDP_DL_G_POS 60u            /* per output position of a window operator: the tap ranges */
#endif
#ifndef EDP_DL_G_ELEM
#define EDP_DL_G_ELEM 120u          /* per output value: a requantisation (double rounding), the clamp */
#endif
#ifndef EDP_DL_G_TAP
#define EDP_DL_G_TAP 26u            /* per output value and kernel tap: its address */
#endif
#ifndef EDP_DL_G_MAC
#define EDP_DL_G_MAC 7u             /* per multiply-accumulate (two loads, the offset, MLA, the loop) */
#endif
#ifndef EDP_DL_G_ROW
#define EDP_DL_G_ROW 30u            /* PAD: per input row copied */
#endif
#ifndef EDP_DL_G_BYTE
#define EDP_DL_G_BYTE 2u            /* PAD: per output byte (the fill and the copy) */
#endif

#define DL_LN2 0.69314718055994531
/* Each of the seven tails (draws, acceptance, its C fallback, exact product,
 * ties and tail outcomes, tail rounds, comparison bits) at 2^-(TAIL_BITS + 3):
 * together below 2^-TAIL_BITS. */
#define DL_TAIL_BITS (EDP_DEADLINE_TAIL_BITS + 3)
/* A bound met with this much to spare absorbs the double roundings. */
#define DL_SLACK 0.01

static uint32_t sat32(uint64_t v)
{
    return v > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)v;
}

/* ceil(sqrt(v)) for v < 2^52, by bisection on integers (no libm). */
static uint32_t sqrt_ceil(uint64_t v)
{
    uint32_t lo = 0, hi = 1u << 26;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)mid * mid >= v) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* ln x for a positive normal x (no libm): x = 2^e f with f in [1/sqrt 2,
 * sqrt 2), ln f = 2 atanh(y), y = (f-1)/(f+1), |y| < 0.172, by 8 terms of its
 * series (error below 1e-14). */
static double ln_d(double x)
{
    union { double d; uint64_t u; } b;
    double y, y2, s;
    int e;
    b.d = x;
    e = (int)((b.u >> 52) & 0x7FFu) - 1023;
    b.u = (b.u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
    if (b.d > 1.4142135623730951) {
        b.d *= 0.5;
        e++;
    }
    y = (b.d - 1.0) / (b.d + 1.0);
    y2 = y * y;
    s = 1.0 / 15.0;
    s = 1.0 / 13.0 + y2 * s;
    s = 1.0 / 11.0 + y2 * s;
    s = 1.0 / 9.0 + y2 * s;
    s = 1.0 / 7.0 + y2 * s;
    s = 1.0 / 5.0 + y2 * s;
    s = 1.0 / 3.0 + y2 * s;
    s = 1.0 + y2 * s;
    return 2.0 * y * s + (double)e * DL_LN2;
}

/* n times the relative entropy D(a || p) of Bernoulli(a) from Bernoulli(p),
 * a = m / n, 0 < p < 1: the exponent of Chernoff's bound on either tail of
 * Binomial(n, p) beyond m (P <= exp(-n D)). */
static double chernoff(double m, double n, double p)
{
    double a = m / n, v = 0.0;
    if (a > 0.0) v += a * ln_d(a / p);
    if (a < 1.0) v += (1.0 - a) * ln_d((1.0 - a) / (1.0 - p));
    return n * v;
}

static const double tail_exponent = DL_TAIL_BITS * DL_LN2 + DL_SLACK;

/* The least m with P(X >= m) <= 2^-DL_TAIL_BITS by Chernoff's bound, for X a
 * count of n trials each a success with probability at most p given the
 * others (dominated by Binomial(n, p)); n if none is smaller. */
static uint32_t upper_count(uint32_t n, double p)
{
    const double lam = tail_exponent, mean = (double)n * p;
    uint32_t lo, hi;
    if (p <= 0.0 || n == 0) return 0;
    if (p >= 1.0) return n;
    /* Bernstein's bound, mean + lam/3 + sqrt(lam^2/9 + 2 mean lam), is weaker
     * than Chernoff's: a valid start for the bisection. */
    hi = (uint32_t)(mean + lam / 3.0) + sqrt_ceil((uint64_t)(lam * lam / 9.0 + 2.0 * mean * lam) + 1u) + 1u;
    lo = (uint32_t)mean + 1u;
    if (hi >= n) {
        if (chernoff((double)n, (double)n, p) < lam) return n;
        hi = n;
    }
    if (lo > hi) lo = hi;
    while (lo < hi) {  /* chernoff(m) grows with m above n p */
        uint32_t mid = lo + (hi - lo) / 2;
        if (chernoff((double)mid, (double)n, p) >= lam) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The least n with P(Binomial(n, p) <= k - 1) <= 2^-DL_TAIL_BITS by
 * Chernoff's bound: so many draws, each ending its coordinate with probability
 * at least p, end k coordinates but with that probability. */
static uint32_t draws_needed(uint32_t k, double p)
{
    const double lam = tail_exponent, m = (double)k - 1.0;
    /* Bernstein's bound gives a valid start: k + lam + sqrt(lam^2 + 2 k lam) over p. */
    double top = ((double)k + lam + (double)sqrt_ceil((uint64_t)(lam * lam + 2.0 * lam * (double)k) + 1u)) / p;
    uint32_t lo = (uint32_t)(m / p) + 1u, hi = (uint32_t)top + 1u;
    while (lo < hi) {  /* chernoff(k - 1, n) grows with n above (k - 1) / p */
        uint32_t mid = lo + (hi - lo) / 2;
        if (chernoff(m, (double)mid, p) >= tail_exponent) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The mean acceptance E_V[a_V] over uniform V: the chunks of V are
 * independent and uniform over their widths, so it is the product of each
 * chunk table's mean (top words only: a lower bound). */
static double mean_acceptance(const edp_dlap_t *d)
{
    double mean = 1.0;
    uint32_t c, u;
    for (c = 0; c < d->nchunks; c++) {
        uint32_t width = d->L - EDP_DLAP_CHUNK_BITS * c, n;
        double sum = 0.0;
        if (width > EDP_DLAP_CHUNK_BITS) width = EDP_DLAP_CHUNK_BITS;
        n = 1u << width;
        for (u = 0; u < n; u++) sum += (double)d->chunk[c][u].hi;
        mean *= sum / ((double)n * 4294967296.0);
    }
    return mean;
}

/* A bound on the probability that a fixed draw takes the exact product: the
 * draw's V is uniform, and tier 1 leaves V undecided only if the stream
 * agrees with lo(V) up to the first bit where lo(V) and hi(V) differ, the
 * smallest aligned block D(V) holding both: probability |D(V)| 2^-32. With w
 * the widest band, delta the least step of lo between neighbouring V (both
 * at the largest V, where x is largest), R the span of all bands and J the
 * top bit where they differ, summing |D(V)| over V by the levels j of the
 * block boundaries inside each band gives (docs/privacy.md section 6)
 *   E_V |D(V)| <= 1 + 2 w + ((J - j0) R + 2^(J+1)) (w / delta + 1) / 2^L,
 * j0 = floor(log2 w). Also at most 2^-K (the draw's K acceptance bits). */
static double exact_probability(const edp_dlap_t *d)
{
    uint32_t vmax = (1u << d->L) - 1u, lo, hi, lo1, hi1, lo0, hi0, j0, top;
    double w, delta, span, sum, p, pk = 1.0;
    uint32_t i;
    for (i = 0; i < d->K; i++) pk *= 0.5;
    if (vmax < 1u) return pk;
    edp_dlap_band(d, vmax, &lo, &hi);
    edp_dlap_band(d, vmax - 1u, &lo1, &hi1);
    edp_dlap_band(d, 0u, &lo0, &hi0);
    if (hi <= lo || lo1 <= lo + 3u || hi0 <= lo) return pk;
    w = (double)(hi - lo) + 2.0;
    delta = (double)(lo1 - lo) - 3.0;
    lo = lo > 2u ? lo - 2u : 0u;
    span = (double)(hi0 - lo);
    j0 = 31u - EDP_CLZ32((uint32_t)w);
    top = 31u - EDP_CLZ32(lo ^ hi0);
    sum = 1.0 + 2.0 * w;
    if (top > j0) {
        double pow2 = 1.0;
        for (i = 0; i <= top; i++) pow2 *= 2.0;
        sum += ((double)(top - j0) * span + pow2) * (w / delta + 1.0) / (double)(vmax + 1u);
    }
    p = sum / 4294967296.0;
    return p < pk ? p : pk;
}

uint32_t edp_deadline_noise(const edp_dlap_t *d, uint32_t k)
{
    uint32_t size = d->imask + 1u, i, ties = 0, tails = 0, zeros = 0, j;
    uint32_t n, n_acc, n_acc_call, n_exact, n_high, rounds, nc = d->nchunks, compares;
    double p_high, p_tail, p_zero, p_f, half = 1.0, pk = 1.0;
    uint64_t bits, words, refills, insns;
    for (i = 0; i < size; i++) {
        uint32_t v = d->fast[i], col = i >> d->KP;
        if (v == 0xFFu) {
            ties++;
            if (col == d->tail || d->alias[col] == d->tail) tails++;  /* may resolve to the tail */
        } else if (v & 0x80u) {
            tails++;
        } else if (v == 0u) {
            zeros++;
        }
    }
    p_high = (double)(ties + tails) / (double)size;   /* a tie or the tail outcome: high_part */
    p_tail = (double)tails / (double)size;            /* the tail outcome: one more round */
    p_zero = (double)(ties + zeros) / (double)size;   /* W = 0 at most */
    for (i = 0; i < d->L; i++) half *= 0.5;
    for (i = 0; i < d->K; i++) pk *= 0.5;
    /* A draw ends its coordinate iff V is accepted and not (negative, G = 0):
     * E a_V - P(W = 0) 2^-(L+1), with a margin for the double roundings. */
    p_f = mean_acceptance(d) * (1.0 - 1e-9) - 0.5 * p_zero * half;
    n = draws_needed(k, p_f);
    n_acc = nc ? upper_count(n, pk) : 0u;
    /* The loop decides the acceptance's next bit itself (it reads a word if none is buffered)
     * and calls C only if that bit, a fair coin, agrees with a_V's (or at a batch's end, once
     * per refill at most): 2^-(K+1) per draw. */
    n_acc_call = nc ? upper_count(n, 0.5 * pk) : 0u;
    n_exact = nc ? upper_count(n, exact_probability(d)) : 0u;
    n_high = upper_count(n, p_high);
    /* Tail rounds: the (r+1)-th tail outcome comes within the first n + r + 1
     * lookups, so r rounds with P(Bin(n + r + 1, p) >= r + 1) small suffice:
     * the least fixed point of r = upper_count(n + r + 1), reached from 0. */
    rounds = 0;
    for (j = 0; j < 8; j++) {
        uint32_t next = upper_count(n + rounds + 1u, p_tail);
        if (next <= rounds) break;
        rounds = next;
    }
    if (j == 8) return 0xFFFFFFFFu;
    /* Bits: n1 per draw, the column and keep prefix per round, and the
     * comparisons past the fixed bits (an acceptance, a tie: one per slow event
     * at most), each of which stops at the first stream bit that differs from
     * its threshold, a fair coin: c comparisons take more than
     * draws_needed(c, 1/2) bits with probability 2^-DL_TAIL_BITS at most. */
    compares = n_acc + n_high + rounds;
    bits = (uint64_t)n * d->n1 + (uint64_t)rounds * (EDP_DLAP_ALIAS_BITS + d->KP) +
           (compares ? draws_needed(compares, 0.5) : 0u);
    /* Keystream words fetched: the bits', and up to two ahead (the loop's
     * 64-bit buffer, peek32); every EDP_DL_REFILL_WORDS of them one refill. */
    words = (bits + 31u) / 32u + 2u;
    refills = (words + EDP_DL_REFILL_WORDS - 1u) / EDP_DL_REFILL_WORDS;
    insns = EDP_DL_CALL + (uint64_t)n * EDP_DL_DRAW + (uint64_t)k * EDP_DL_STORE + (uint64_t)n_acc * EDP_DL_ACCEPT +
            (uint64_t)(nc ? n_acc_call + refills : 0u) * EDP_DL_ACCEPT_CALL +
            (uint64_t)n_exact * (EDP_DL_EXACT_PER_CHUNK * nc + EDP_DL_EXACT_PER_CHUNK2 * nc * nc) +
            (uint64_t)n_high * EDP_DL_HIGH + (uint64_t)rounds * EDP_DL_ROUND + refills * EDP_DL_REFILL;
    return sat32(insns);
}

uint32_t edp_deadline_prepare(const edp_dlap_t *d)
{
    return sat32(EDP_DL_PREP_BASE + (uint64_t)EDP_DL_PREP_PER_L * d->L);
}

/* The head of one net (edp_model_head). */
static uint64_t head_insns(const edp_model_t *m)
{
    return EDP_DL_MODEL_NET +
           (uint64_t)(m->head == EDP_MODEL_VOTES ? EDP_DL_MODEL_VOTE : EDP_DL_MODEL_CLASS) * m->n_classes;
}

/* An imported graph: per operator its windows, values and sums (EDP_DL_G_*). */
static uint64_t model_graph_insns(const edp_model_t *m)
{
    const edp_graph_s8_t *g = m->s8->graph;
    uint64_t n = EDP_DL_G_MODEL + (uint64_t)EDP_DL_G_INPUT * m->n_features +
                 (uint64_t)EDP_DL_G_OUTPUT * m->n_classes + head_insns(m);
    uint32_t i;
    for (i = 0; i < g->n_ops; i++) {
        const edp_op_s8_t *o = &g->ops[i];
        const uint64_t outs = (uint64_t)o->oh * o->ow * o->oc, pos = (uint64_t)o->oh * o->ow * EDP_DL_G_POS;
        const uint64_t k = (uint64_t)o->kh * o->kw, in = (uint64_t)o->ih * o->iw * o->ic;
        n += EDP_DL_G_OP;
        switch (o->op) {
        case EDP_OP_CONV: n += pos + outs * (EDP_DL_G_ELEM + k * (EDP_DL_G_TAP + (uint64_t)o->ic * EDP_DL_G_MAC)); break;
        case EDP_OP_DWCONV: n += pos + outs * (EDP_DL_G_ELEM + k * (EDP_DL_G_TAP + EDP_DL_G_MAC)); break;
        case EDP_OP_FC: n += outs * (EDP_DL_G_ELEM + in * EDP_DL_G_MAC); break;
        case EDP_OP_AVGPOOL:
        case EDP_OP_MAXPOOL: n += pos + outs * (EDP_DL_G_ELEM + k * EDP_DL_G_TAP); break;
        case EDP_OP_MEAN: n += outs * (EDP_DL_G_ELEM + (uint64_t)o->ih * o->iw * EDP_DL_G_MAC); break;
        case EDP_OP_PAD: n += outs * EDP_DL_G_BYTE + (uint64_t)o->ih * EDP_DL_G_ROW; break;
        case EDP_OP_ADD: n += outs * (EDP_DL_G_ELEM + EDP_DL_G_ELEM / 2u); break;
        default: break;
        }
    }
    return n;
}

/* An int8 model: the input's quantisation, and per layer its widened input
 * (once for consecutive first layers) and its outputs in pairs (an odd last
 * one, which runs its row alone, is charged as a pair: an upper bound). */
static uint64_t model_s8_insns(const edp_model_t *m)
{
    uint64_t n = EDP_DL_S8_MODEL + (uint64_t)EDP_DL_S8_INPUT * m->n_features;
    uint32_t i, l, xq_widened = 0;
    if (m->s8->graph) return model_graph_insns(m);  /* as in edp_model_run_s8: a first layer after a first layer reuses xp */
    for (i = 0; i < m->n_nets; i++) {
        const edp_net_s8_t *net = &m->s8->nets[i];
        n += head_insns(m);
        for (l = 0; l < net->n_layers; l++) {
            const uint64_t words = (net->layers[l].in + 3u) / 4u, pairs = (net->layers[l].out + 1u) / 2u;
            n += EDP_DL_S8_LAYER + pairs * (2u * EDP_DL_S8_UNIT + EDP_DL_S8_MAC8 * words);
            if (!(l == 0 && xq_widened)) n += EDP_DL_S8_WORD * words;
            xq_widened = l == 0;
        }
    }
    return n;
}

uint32_t edp_deadline_model(const edp_model_t *m)
{
    uint64_t n = (uint64_t)EDP_DL_MODEL_ZERO * (m->s8 ? (m->s8->graph ? 2u : 3u) : 1u) +
                 (uint64_t)EDP_DL_MODEL_WIPE_BYTE * edp_model_wipe_bytes(m) +
                 EDP_DL_NONFINITE + (uint64_t)EDP_DL_NONFINITE_CLASS * m->n_classes;
    uint32_t i, l;
    if (m->s8) return sat32(n + model_s8_insns(m));
    for (i = 0; i < m->n_nets; i++) {
        n += head_insns(m);
        for (l = 0; l < m->nets[i].n_layers; l++) {
            const edp_dense_t *d = &m->nets[i].layers[l];
            n += (uint64_t)d->out * (EDP_DL_MODEL_UNIT + (uint64_t)EDP_DL_MODEL_MAC * d->in);
        }
    }
    return sat32(n);
}

uint32_t edp_deadline_answer(uint32_t noise, uint32_t n_in, uint32_t k, uint32_t mode, uint32_t arg,
                             uint32_t model, uint32_t prepare, uint32_t fixed)
{
    uint64_t per_class = EDP_DL_PER_CLASS;
    if (mode == EDP_MODE_TOPK) per_class += (uint64_t)EDP_DL_TOPK_PER_K * arg;
    if (mode == EDP_MODE_SIMPLEX) per_class += EDP_DL_SIMPLEX;
    return sat32((uint64_t)noise + fixed + (uint64_t)EDP_DL_PER_INPUT * n_in + per_class * k +
                 model + prepare);
}

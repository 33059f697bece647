/* The sampling loop of dlap.c in portable C (arch/arch.h). */
#include "../arch.h"

#if !EDP_ARCH_ARMV7M_DLAP
void edp_dlap_noisy(const edp_dlap_t *d, edp_drbg_t *r, const edp_dlap_quant_t *q,
                    const float *x, int32_t *y, uint32_t k)
{
    /* The bit buffer lives in registers: hi:lo = r->acc, nbits = r->nbits, and
     * wp points at the next unread keystream word (r->word). */
    uint32_t hi = (uint32_t)(r->acc >> 32), lo = (uint32_t)r->acc, nbits = r->nbits;
    uint32_t *wp = r->block + r->word;
    int32_t *const end = y + k;
#define DLAP_FLUSH() (r->acc = (uint64_t)hi << 32 | lo, r->nbits = nbits, r->word = (uint32_t)(wp - r->block))
#define DLAP_LOAD() (hi = (uint32_t)(r->acc >> 32), lo = (uint32_t)r->acc, nbits = r->nbits, wp = r->block + r->word)
    while (y != end) {
        uint32_t v, w, g;
        if (nbits < d->n1) {  /* one more word; nbits < 32, so lo holds no valid bits */
            uint32_t wd;
            if (wp == r->block + EDP_DRBG_BATCH_WORDS) {
                edp_drbg_next_block(r);
                wp = r->block + r->word;
            }
            wd = *wp;
            *wp++ = 0;  /* read words are zeroed (drbg.h) */
            hi |= wd >> nbits;
            lo = (wd << 1) << (31 - nbits);
            nbits += 32;
        }
        v = hi >> d->s1;  /* the fixed draw: V | accept prefix | sign | column | keep prefix */
        hi = ((hi << (d->n1 - 1)) << 1) | (lo >> d->s1);  /* n1 may be 32 */
        lo = (lo << (d->n1 - 1)) << 1;
        nbits -= d->n1;
        if ((d->mk & ~v) == 0) {  /* K acceptance bits all ones: compare further */
            int ok;
            DLAP_FLUSH();
            ok = edp_dlap_accept_rest(d, r, v >> d->vsh);
            DLAP_LOAD();
            if (!ok) continue;
        }
        w = d->fast[v & d->imask];
        if (w & 0x80u) {  /* a tie of the keep prefix, or the tail outcome */
            DLAP_FLUSH();
            w = edp_dlap_high_part(d, r, v & d->imask, w);
            DLAP_LOAD();
        }
        g = (w << d->L) | (v >> d->vsh);
        if (v & d->sbit) {
            if (!g) continue;  /* (negative, 0): redraw */
            *y++ = edp_dlap_quantize(q, *x++) - (int32_t)g;
        } else {
            *y++ = edp_dlap_quantize(q, *x++) + (int32_t)g;
        }
    }
    DLAP_FLUSH();
#undef DLAP_FLUSH
#undef DLAP_LOAD
}
#endif

/* Hardware RNG (RM0090 §24): the only entropy source of a production image.
 * Any failure -- no DRDY in time (QEMU has no RNG; no PLL48CLK after a clock
 * fallback), a seed or clock error, a repeated word -- returns EDP_ERR_ENTROPY
 * and the core refuses external output. Nothing weaker is ever substituted. */
#include "stm32f4.h"

#include "edgedp/error.h"

#define RNG_ERRORS (RNG_SR_SECS | RNG_SR_CECS | RNG_SR_SEIS | RNG_SR_CEIS)

void edp_stm32_rng_enable(edp_rng_regs_t *rng)
{
    rng->CR |= RNG_CR_RNGEN;
}

/* Clear the (rc_w0) error flags and restart the generator, so that a later
 * call (the core's next reseed) starts from a fresh seed; this call still fails. */
static int rng_fail(edp_rng_regs_t *rng)
{
    rng->SR = 0;
    rng->CR &= ~RNG_CR_RNGEN;
    rng->CR |= RNG_CR_RNGEN;
    return EDP_ERR_ENTROPY;
}

int edp_stm32_rng_read(edp_rng_regs_t *rng, uint32_t *out, uint32_t spin)
{
    uint32_t sr;
    if (!spin) spin = 1;
    for (;;) {
        sr = EDP_RD(rng->SR);
        if (sr & RNG_ERRORS) return rng_fail(rng);
        if (sr & RNG_SR_DRDY) break;
        if (!--spin) return EDP_ERR_ENTROPY;
    }
    *out = EDP_RD(rng->DR);
    /* A seed error flagged while the word was read invalidates it. */
    if (EDP_RD(rng->SR) & RNG_ERRORS) {
        *out = 0;
        return rng_fail(rng);
    }
    return EDP_OK;
}

int edp_stm32_rng_fill(edp_rng_regs_t *rng, uint8_t *buf, size_t n, uint32_t spin)
{
    uint32_t prev = 0, w = 0;
    size_t i = 0, j;
    int err = edp_stm32_rng_read(rng, &prev, spin);   /* discarded: comparison only */
    while (!err && i < n) {
        err = edp_stm32_rng_read(rng, &w, spin);
        if (!err && w == prev) err = EDP_ERR_ENTROPY;  /* FIPS 140-2 continuous test */
        for (j = 0; !err && j < 4 && i < n; j++) buf[i++] = (uint8_t)(w >> (8u * j));
        prev = w;
    }
    if (err) {
        volatile uint8_t *p = buf;
        for (i = 0; i < n; i++) p[i] = 0;
        return EDP_ERR_ENTROPY;
    }
    return EDP_OK;
}

#include "drbg.h"
#include "sha256.h"

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
    d->word = EDP_DRBG_BATCH_WORDS;
    d->acc = 0;
    d->nbits = 0;
    d->blocks_since_seed = 0;
}

/* The key stays in d->state (wiped by edp_drbg_wipe): no copy on the stack. */
void edp_drbg_next_block(edp_drbg_t *d)
{
    uint32_t i;
    for (i = 0; i < EDP_DRBG_BATCH_BLOCKS; i++) {
        edp_chacha_block(d->state, d->block + 16 * i);
        if (++d->state[12] == 0) d->state[13]++;
    }
    for (i = 0; i < EDP_DRBG_KEY_WORDS; i++) {  /* fast key erasure */
        d->state[4 + i] = d->block[i];
        d->block[i] = 0;
    }
    d->blocks_since_seed += EDP_DRBG_BATCH_BLOCKS;
    d->word = EDP_DRBG_KEY_WORDS;
}

void edp_drbg_refill(edp_drbg_t *d)
{
    while (d->nbits <= 32) {
        d->acc |= (uint64_t)edp_drbg_word(d) << (32 - d->nbits);
        d->nbits += 32;
    }
}

void edp_drbg_wipe(edp_drbg_t *d)
{
    edp_wipe(d, sizeof *d);
    d->word = EDP_DRBG_BATCH_WORDS;
}

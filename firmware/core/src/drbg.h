/* ChaCha12 deterministic random bit generator with fast key erasure and a lazy
 * bit buffer.
 *
 * Keystream: ChaCha12 blocks (the block function of RFC 8439 2.3 with
 * EDP_CHACHA_ROUNDS = 12 rounds instead of 20, as in Bernstein's ChaCha family;
 * the security argument for 12 rounds is in docs/privacy.md section 3) of
 * key[8], a 64-bit block counter in state words 12-13 and zero nonce words 14-15,
 * starting at counter 0, generated in batches of EDP_DRBG_BATCH_BLOCKS blocks
 * (96 words). Fast key erasure (Bernstein, "Fast-key-erasure random-number
 * generators", 2017): the first 8 words of every batch become the key of the
 * next batch and are wiped from the buffer before anything is output; only the
 * other 88 words are output. The key that produced a batch no longer exists
 * once any of its words is used, so a later read of RAM reveals no earlier
 * batch, and every word is zeroed in the buffer as it is read (by the
 * functions below and by the sampling loops of dlap.c), so it reveals only the
 * current batch's unread words and the unread bits in acc: nothing that
 * decided an earlier output.
 * Words are little-endian 32-bit values of the keystream; bits are handed out
 * word by word, most significant bit first, and every output bit is used
 * exactly once (nothing is discarded between calls). */
#ifndef EDGEDP_DRBG_H
#define EDGEDP_DRBG_H
#include <stdint.h>

#define EDP_CHACHA_ROUNDS 12  /* a multiple of 4: the Thumb-2 block runs two double rounds a loop */
#define EDP_DRBG_BATCH_BLOCKS 6
#define EDP_DRBG_BATCH_WORDS (16 * EDP_DRBG_BATCH_BLOCKS)
#define EDP_DRBG_KEY_WORDS 8  /* the next key: words 0..7 of each batch, never output */

typedef struct {
    uint32_t state[16];   /* ChaCha input: constants, key[8], counter lo/hi (next block), 0, 0 */
    uint32_t block[EDP_DRBG_BATCH_WORDS];  /* the current batch; words 0..7 wiped */
    uint32_t word;        /* next unread word of block (EDP_DRBG_BATCH_WORDS = empty) */
    uint64_t acc;         /* left-aligned unread bits */
    uint32_t nbits;       /* valid bits in acc */
    uint32_t blocks_since_seed;
} edp_drbg_t;

/* One ChaCha12 block: out = the EDP_CHACHA_ROUNDS rounds of RFC 8439 2.3's
 * block function applied to in, plus in. */
void edp_chacha_block(const uint32_t in[16], uint32_t out[16]);

/* Key the generator with 32 bytes (read little-endian into key words),
 * reset the counter and drop any buffered bits. Wipes nothing in key32. */
void edp_drbg_seed(edp_drbg_t *d, const uint8_t key32[32]);

/* Generate the next batch into d->block, re-key from its first 8 words (then
 * wiped) and set d->word to EDP_DRBG_KEY_WORDS, the first output word. */
void edp_drbg_next_block(edp_drbg_t *d);

/* Refill so that at least 32 bits are buffered. */
void edp_drbg_refill(edp_drbg_t *d);

#if defined(__GNUC__)
#define EDP_DRBG_INLINE static inline __attribute__((always_inline))
#else
#define EDP_DRBG_INLINE static inline
#endif

/* The next unread 32-bit word of the keystream, bypassing the bit buffer (the
 * caller keeps its own buffer and must not mix this with buffered bits).
 * Always inlined: the release deadline counts the slow paths that call it
 * as their own instructions (deadline.c). */
EDP_DRBG_INLINE uint32_t edp_drbg_word(edp_drbg_t *d)
{
    uint32_t w;
    if (d->word >= EDP_DRBG_BATCH_WORDS) edp_drbg_next_block(d);
    w = d->block[d->word];
    d->block[d->word++] = 0;
    return w;
}

/* Next n random bits (0 <= n <= 32) as the low bits of the result. */
static inline uint32_t edp_drbg_bits(edp_drbg_t *d, uint32_t n)
{
    uint32_t v;
    if (n == 0) return 0;
    if (d->nbits < 32) edp_drbg_refill(d);
    v = (uint32_t)(d->acc >> (64 - n));
    d->acc <<= n;
    d->nbits -= n;
    return v;
}

/* Wipe all key and stream state. */
void edp_drbg_wipe(edp_drbg_t *d);

#endif

/* Internal flash programming for the flash high-water log (RM0090 §3.6).
 * The controller is left locked between operations. The image runs from the
 * same bank, and a fetch from flash stalls while an operation is busy: so
 * everything from the erase's start (STRT) to BSY clearing runs from SRAM
 * (EDP_STM32_RAMFUNC: flash_erase, idle, and the helpers they call), and so do
 * the console's RX interrupt (uart.c, board.c) and the vector table (board.c,
 * VTOR): bytes arriving during a sector erase (1-2 s) are received. A program
 * (PG, ~16 us a word) waits in idle() too, but its loop runs from flash.
 * The ART data cache (DCEN, set by clock.c) can hold a line of a sector read
 * before it was erased or programmed: after each erase and each program call
 * (all its words), and before reading them back, the cache is reset as ST's HAL does after an erase
 * (FLASH_FlushCaches: DCEN off, DCRST pulsed, DCEN restored), so the read-back
 * and every later flash_read see the flash, not a stale line. */
#include "stm32f4.h"

#include "edgedp/error.h"

EDP_STM32_RAMFUNC static int unlock(edp_flash_regs_t *r)
{
    if (EDP_RD(r->CR) & FLASH_CR_LOCK) {
        r->KEYR = FLASH_KEY1;
        r->KEYR = FLASH_KEY2;
    }
    return (EDP_RD(r->CR) & FLASH_CR_LOCK) ? EDP_ERR_STORE : EDP_OK;
}

EDP_STM32_RAMFUNC static void lock(edp_flash_regs_t *r)
{
    r->CR = FLASH_CR_LOCK;
}

/* Wait for BSY to clear within spin polls; then EDP_OK unless an error flag is set. */
EDP_STM32_RAMFUNC static int idle(edp_flash_regs_t *r, uint32_t spin)
{
    if (!spin) spin = 1;
    while (EDP_RD(r->SR) & FLASH_SR_BSY)
        if (!--spin) return EDP_ERR_STORE;
    return (EDP_RD(r->SR) & FLASH_SR_ERRORS) ? EDP_ERR_STORE : EDP_OK;
}

/* Reset the data cache if it is on (RM0090: DCRST acts only while DCEN is clear). */
EDP_STM32_RAMFUNC static void dcache_reset(edp_flash_regs_t *r)
{
    uint32_t acr = EDP_RD(r->ACR) & ~FLASH_ACR_DCRST, off = acr & ~FLASH_ACR_DCEN;
    if (!(acr & FLASH_ACR_DCEN)) return;
    r->ACR = off;
    r->ACR = off | FLASH_ACR_DCRST;
    r->ACR = off;
    r->ACR = acr;
}

/* Unlock, wait for a previous operation, clear stale flags (write 1 to clear). */
EDP_STM32_RAMFUNC static int begin(edp_flash_regs_t *r, uint32_t spin)
{
    int err = unlock(r);
    if (err < 0) return err;
    r->SR = FLASH_SR_ERRORS | FLASH_SR_EOP;
    return idle(r, spin);
}

static int in_range(const edp_stm32_flash_t *d, uint32_t off, uint32_t n)
{
    return !((off | n) & 3u) && off <= 2u * d->sector_size && n <= 2u * d->sector_size - off;
}

static int flash_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    const edp_stm32_flash_t *d = ctx;
    const volatile uint8_t *src = (const volatile uint8_t *)d->base + off;
    uint8_t *p = buf;
    uint32_t i;
    if (off > 2u * d->sector_size || n > 2u * d->sector_size - off) return EDP_ERR_STORE;
    for (i = 0; i < n; i++) p[i] = src[i];
    return EDP_OK;
}

static int flash_program(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    const edp_stm32_flash_t *d = ctx;
    edp_flash_regs_t *r = d->regs;
    const uint8_t *p = buf;
    uint32_t i;
    int err;
    if (!in_range(d, off, n)) return EDP_ERR_STORE;
    err = begin(r, d->spin_program);
    for (i = 0; err == EDP_OK && i < n; i += 4) {
        volatile uint32_t *w = d->base + (off + i) / 4u;
        uint32_t v = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24;
        r->CR = FLASH_CR_PSIZE_X32 | FLASH_CR_PG;
        *w = v;
        err = idle(r, d->spin_program);
    }
    lock(r);
    dcache_reset(r);  /* once per call, not per word: then every word is read back */
    for (i = 0; err == EDP_OK && i < n; i += 4) {
        const volatile uint32_t *w = d->base + (off + i) / 4u;
        uint32_t v = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24;
        if (*w != v) err = EDP_ERR_STORE;
    }
    return err;
}

EDP_STM32_RAMFUNC static int flash_erase(void *ctx, uint32_t sector)
{
    const edp_stm32_flash_t *d = ctx;
    edp_flash_regs_t *r = d->regs;
    const volatile uint32_t *w = d->base + sector * (d->sector_size / 4u);
    uint32_t i;
    int err;
    if (sector > 1) return EDP_ERR_STORE;
    if ((err = begin(r, d->spin_program)) == EDP_OK) {
        if (d->before_erase) d->before_erase();
        r->CR = FLASH_CR_PSIZE_X32 | FLASH_CR_SER | ((d->first_sector + sector) << FLASH_CR_SNB_SHIFT);
        r->CR |= FLASH_CR_STRT;
        err = idle(r, d->spin_erase);
    }
    lock(r);
    dcache_reset(r);
    for (i = 0; err == EDP_OK && i < d->sector_size / 4u; i++)
        if (w[i] != 0xFFFFFFFFu) err = EDP_ERR_STORE;
    return err;
}

void edp_stm32_flash_bind(edp_flash_t *f, edp_stm32_flash_t *d)
{
    f->ctx = d;
    f->sector_size = d->sector_size;
    f->read = flash_read;
    f->program = flash_program;
    f->erase = flash_erase;
}

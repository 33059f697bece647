#include "ramflash.h"

#include "edgedp/error.h"

static int power(edp_ramflash_t *f)
{
    if (f->dead) return 0;
    if (f->cut_after == 0) {
        f->dead = 1;
        return -1;  /* this operation is torn */
    }
    if (f->cut_after > 0) f->cut_after--;
    return 1;
}

static int rf_read(void *ctx, uint32_t off, void *buf, uint32_t n)
{
    edp_ramflash_t *f = ctx;
    uint8_t *p = buf;
    uint32_t i;
    if (f->dead) return EDP_ERR_STORE;
    for (i = 0; i < n; i++) p[i] = f->mem[off + i];
    return EDP_OK;
}

static int rf_program(void *ctx, uint32_t off, const void *buf, uint32_t n)
{
    edp_ramflash_t *f = ctx;
    const uint8_t *p = buf;
    uint32_t i, j;
    if ((off | n) & 3u) return EDP_ERR_STORE;
    for (i = 0; i < n; i += 4) {
        int on = power(f);
        if (on == 0) return EDP_ERR_STORE;
        for (j = 0; j < 4; j++) {
            /* A torn word clears only the bits of every other byte. */
            uint8_t v = on > 0 || (j & 1u) ? p[i + j] : 0xFF;
            f->mem[off + i + j] &= v;
        }
        if (on < 0) return EDP_ERR_STORE;
        f->programs++;
    }
    return EDP_OK;
}

static int rf_erase(void *ctx, uint32_t sector)
{
    edp_ramflash_t *f = ctx;
    uint8_t *p = f->mem + sector * f->sector_size;
    uint32_t i, n = f->sector_size;
    int on;
    if (sector > 1) return EDP_ERR_STORE;
    on = power(f);
    if (on == 0) return EDP_ERR_STORE;
    if (on < 0) n /= 2;
    for (i = 0; i < n; i++) p[i] = 0xFF;
    for (; i < f->sector_size; i++) p[i] = (uint8_t)(p[i] ^ (i * 37u));  /* torn: the rest is garbage */
    if (on < 0) return EDP_ERR_STORE;
    f->erases++;
    return EDP_OK;
}

void edp_ramflash_format(edp_flash_t *flash)
{
    edp_ramflash_t *f = flash->ctx;
    uint32_t i;
    for (i = 0; i < 2 * f->sector_size; i++) f->mem[i] = 0xFF;
}

void edp_ramflash_bind(edp_flash_t *flash, edp_ramflash_t *model, uint8_t *mem, uint32_t sector_size)
{
    model->mem = mem;
    model->sector_size = sector_size;
    model->cut_after = -1;
    model->programs = 0;
    model->erases = 0;
    model->dead = 0;
    flash->ctx = model;
    flash->sector_size = sector_size;
    flash->read = rf_read;
    flash->program = rf_program;
    flash->erase = rf_erase;
}

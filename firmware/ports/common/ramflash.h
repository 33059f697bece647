/* A RAM-backed NOR flash model behind edp_flash_t (flog.h), for ports without
 * writable flash (QEMU: flash is read-only) and for native tests.
 *
 * NOR semantics: a program ANDs the data into the array (it can only clear
 * bits), an erase sets a whole sector to 0xFF. Power-loss injection: with
 * cut_after >= 0, that many word programs and erases complete; the next one is
 * torn (a program clears only some of its bits, an erase resets only the first
 * half of the sector and scrambles the rest) and every later call fails with
 * EDP_ERR_STORE without touching the array (`dead` is set). */
#ifndef EDGEDP_RAMFLASH_H
#define EDGEDP_RAMFLASH_H
#include <stdint.h>

#include "edgedp/port.h"  /* edp_flash_t */

typedef struct {
    uint8_t *mem;          /* 2 * sector_size bytes */
    uint32_t sector_size;
    long cut_after;        /* operations before the torn one; -1 = never */
    uint32_t programs;     /* word programs done (statistics) */
    uint32_t erases;       /* sector erases done (statistics) */
    uint8_t dead;          /* power was cut: every call fails */
} edp_ramflash_t;

/* Fill *flash with callbacks on model (ctx = model). mem must hold
 * 2 * sector_size bytes; it is not cleared (RAM that survived a reset keeps its
 * log). A blank part is one that was never programmed: ramflash_format. */
void edp_ramflash_bind(edp_flash_t *flash, edp_ramflash_t *model, uint8_t *mem, uint32_t sector_size);

/* Set every byte to 0xFF (a factory-fresh part). */
void edp_ramflash_format(edp_flash_t *flash);

#endif

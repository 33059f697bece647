/* The persistent store in the 4 KiB backup SRAM (VBAT domain, RM0090 §5.1.2),
 * with the newest committed sequence shadowed in two RTC backup registers.
 *
 * Why the shadow: the budget must never go back. The backup SRAM and the
 * backup registers are separate memories; a backup SRAM that loses power
 * (backup regulator off), is erased, or is rewritten with an older image
 * would otherwise load as an older record with less spend. While the shadow
 * is valid, reads fail (EDP_ERR_STORE, the core refuses external output)
 * unless the store holds a valid record at least as new as the shadow.
 *
 * Recovery from a detected rollback is deliberately not possible over the
 * wire (a new record would start from zero spend): service clears the
 * shadow with a debugger (RTC_BKP0R/BKP1R := 0) or a backup-domain reset
 * (RCC_BDCR.BDRST, which also stops the RTC), after deciding what the budget is.
 *
 * Under QEMU (no PWR, RCC or backup SRAM) DBP does not read back, the store
 * is never marked ready and every access is EDP_ERR_STORE. */
#include "stm32f4.h"

#include "edgedp/error.h"
#include "store.h"  /* edp_store_parse, the slot layout (core/src): the rollback shadow reads the record's sequence */

#define STORE_BYTES EDP_STORE_SIZE  /* the two slots and the audit ring */

int edp_stm32_backup_access(edp_stm32_bkd_t *b)
{
    b->rcc->APB1ENR |= RCC_APB1ENR_PWREN;
    (void)b->rcc->APB1ENR;   /* errata: wait for the clock before touching PWR */
    b->pwr->CR |= PWR_CR_DBP;
    return (EDP_RD(b->pwr->CR) & PWR_CR_DBP) ? EDP_OK : EDP_ERR_STORE;
}

int edp_stm32_bkpsram_enable(edp_stm32_bkd_t *b, uint32_t spin)
{
    b->sram_ready = 0;
    if (edp_stm32_backup_access(b) < 0) return EDP_ERR_STORE;
    b->rcc->AHB1ENR |= RCC_AHB1ENR_BKPSRAMEN;
    (void)b->rcc->AHB1ENR;
    b->pwr->CSR |= PWR_CSR_BRE;
    if (!spin) spin = 1;
    while (!(EDP_RD(b->pwr->CSR) & PWR_CSR_BRR))
        if (!--spin) return EDP_ERR_STORE;   /* no retention on VBAT: fail closed */
    b->sram_ready = 1;
    return EDP_OK;
}

/* 1 and *seq if the shadow pair is valid. */
static int shadow_get(edp_stm32_bkd_t *b, uint32_t *seq)
{
    uint32_t s = EDP_RD(b->rtc->BKP[EDP_STM32_SHADOW_BKP]);
    uint32_t c = EDP_RD(b->rtc->BKP[EDP_STM32_SHADOW_BKP + 1]);
    *seq = s;
    return c == ~s;
}

/* 1 and *seq if slot s holds a valid record. */
static int slot_sequence(edp_stm32_bkd_t *b, uint32_t s, uint32_t *seq)
{
    uint8_t raw[EDP_STORE_RECORD];
    edp_record_t r;
    uint32_t i;
    for (i = 0; i < EDP_STORE_RECORD; i++) raw[i] = b->sram[s * EDP_STORE_SLOT_SIZE + i];
    if (edp_store_parse(&r, raw) != EDP_OK) return 0;
    *seq = r.sequence;
    return 1;
}

static int newer(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

static int range_ok(edp_stm32_bkd_t *b, uint32_t off, uint32_t n)
{
    return b->sram_ready && off <= STORE_BYTES && n <= STORE_BYTES - off;
}

int edp_stm32_store_read(edp_stm32_bkd_t *b, uint32_t off, void *buf, uint32_t n)
{
    uint8_t *p = buf;
    uint32_t shadow, seq, newest = 0, s, i;
    int any = 0;
    if (!range_ok(b, off, n)) return EDP_ERR_STORE;
    if (shadow_get(b, &shadow)) {
        for (s = 0; s < 2; s++) {
            if (!slot_sequence(b, s, &seq)) continue;
            if (!any || newer(seq, newest)) newest = seq;
            any = 1;
        }
        if (!any || newer(shadow, newest)) return EDP_ERR_STORE;   /* rolled back or lost */
    }
    for (i = 0; i < n; i++) p[i] = b->sram[off + i];
    return EDP_OK;
}

int edp_stm32_store_write(edp_stm32_bkd_t *b, uint32_t off, const void *buf, uint32_t n)
{
    const uint8_t *p = buf;
    uint32_t shadow, seq, s, i;
    int have;
    if (!range_ok(b, off, n)) return EDP_ERR_STORE;
    for (i = 0; i < n; i++) b->sram[off + i] = p[i];
    /* After the write that completes a slot (the core writes the CRC last),
     * move the shadow forward to it. Never backward. */
    have = shadow_get(b, &shadow);
    for (s = 0; s < 2; s++) {
        uint32_t lo = s * EDP_STORE_SLOT_SIZE, hi = lo + EDP_STORE_RECORD;
        if (n == 0 || off >= hi || off + n <= lo) continue;
        if (!slot_sequence(b, s, &seq) || (have && !newer(seq, shadow))) continue;
        b->rtc->BKP[EDP_STM32_SHADOW_BKP] = seq;
        b->rtc->BKP[EDP_STM32_SHADOW_BKP + 1] = ~seq;
        shadow = seq;
        have = 1;
    }
    return EDP_OK;
}

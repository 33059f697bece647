/* Calendar RTC on the 32.768 kHz LSE (RM0090 §26), kept in UTC, 24 h format.
 *
 * The day index the budget rolls over on comes only from here. Anything that
 * makes the calendar untrustworthy -- no LSE, another RTC clock, calendar never
 * initialised, a stopped or unsynchronised calendar, an invalid BCD value --
 * is EDP_ERR_TIME, and the core refuses external output. Under QEMU (no RCC
 * or RTC: reads 0) day() fails on the first register read. */
#include "stm32f4.h"

#include "edgedp/error.h"

#define UNIX_2001 978307200u     /* 2001-01-01T00:00:00Z: the first year with INITS = 1 */
#define UNIX_2100 4102444800ull  /* 2100-01-01T00:00:00Z: past the two-digit year */
#define WPR_KEY1 0xCAu
#define WPR_KEY2 0x53u
#define WPR_LOCK 0xFFu

int32_t edp_stm32_days_from_civil(int32_t y, uint32_t m, uint32_t d)
{
    int32_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (int32_t)((153u * (m > 2 ? m - 3 : m + 9) + 2u) / 5u + d - 1u);
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void edp_stm32_civil_from_days(int32_t z, int32_t *y, uint32_t *m, uint32_t *d)
{
    int32_t era, doe, yoe, doy, mp;
    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (uint32_t)(doy - (153 * mp + 2) / 5 + 1);
    *m = (uint32_t)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static uint32_t days_in_month(uint32_t y, uint32_t m)
{
    static const uint8_t dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) return 29;
    return dim[m - 1];
}

/* Two BCD digits at bit shift: tens must be <= tens_max, units <= 9. -1 if invalid. */
static int32_t bcd(uint32_t reg, uint32_t shift, uint32_t tens_max)
{
    uint32_t units = (reg >> shift) & 0xFu, tens = (reg >> (shift + 4)) & 0xFu;
    if (units > 9 || tens > tens_max) return -1;
    return (int32_t)(tens * 10 + units);
}

/* 1 = Monday .. 7 = Sunday (RTC_DR.WDU); day 0 (1970-01-01) was a Thursday. */
static uint32_t weekday(int32_t days)
{
    return (uint32_t)((days % 7 + 7 + 3) % 7) + 1u;
}

static int rtc_clock_ok(uint32_t bdcr)
{
    return (bdcr & RCC_BDCR_LSERDY) && (bdcr & RCC_BDCR_RTCEN) &&
           (bdcr & RCC_BDCR_RTCSEL_MASK) == RCC_BDCR_RTCSEL_LSE;
}

/* Every BDCR write below sets RTCEN and none clears it. With no RTC clock
 * selected (RTCSEL = 0) RTCEN gates nothing, so setting it early is harmless
 * on the chip; writing it as 0 would stop an RTC that runs (Renode's RCC model
 * switches its RTC off on any BDCR write with RTCEN = 0, which also hides the
 * backup registers that shadow the store's sequence). */
void edp_stm32_rtc_init(edp_stm32_bkd_t *b)
{
    uint32_t bdcr = EDP_RD(b->rcc->BDCR);
    if (!(bdcr & RCC_BDCR_RTCSEL_MASK) && !(bdcr & RCC_BDCR_LSEON))
        b->rcc->BDCR = bdcr | RCC_BDCR_LSEON | RCC_BDCR_RTCEN;
}

int edp_stm32_rtc_seconds(edp_stm32_bkd_t *b, uint64_t *secs, uint32_t spin)
{
    edp_rtc_regs_t *rtc = b->rtc;
    uint32_t isr, tr, dr, wdu;
    int32_t year, month, mday, hour, min, sec, days;
    if (!rtc_clock_ok(EDP_RD(b->rcc->BDCR))) return EDP_ERR_TIME;
    isr = EDP_RD(rtc->ISR);
    if (!(isr & RTC_ISR_INITS) || (isr & (RTC_ISR_INIT | RTC_ISR_INITF))) return EDP_ERR_TIME;
    if (EDP_RD(rtc->CR) & (RTC_CR_FMT | RTC_CR_BYPSHAD)) return EDP_ERR_TIME;
    if (EDP_RD(rtc->PRER) != RTC_PRER_LSE) return EDP_ERR_TIME;
    if (!spin) spin = 1;
    while (!(EDP_RD(rtc->ISR) & RTC_ISR_RSF))
        if (!--spin) return EDP_ERR_TIME;
    tr = EDP_RD(rtc->TR);   /* reading TR locks DR's shadow until DR is read */
    dr = EDP_RD(rtc->DR);
    hour = bcd(tr, 16, 2);
    min = bcd(tr, 8, 5);
    sec = bcd(tr, 0, 5);
    if ((tr & ~0x003F7F7Fu) || hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 59)
        return EDP_ERR_TIME;
    year = bcd(dr, 16, 9);
    month = ((dr >> 8) & 0xFu) > 9 ? -1 : (int32_t)(((dr >> 12) & 1u) * 10u + ((dr >> 8) & 0xFu));
    mday = bcd(dr, 0, 3);
    wdu = (dr >> 13) & 7u;
    if ((dr & ~0x00FFFF3Fu) || year < 1 || month < 1 || month > 12 || mday < 1 ||
        (uint32_t)mday > days_in_month(2000u + (uint32_t)year, (uint32_t)month))
        return EDP_ERR_TIME;
    days = edp_stm32_days_from_civil(2000 + year, (uint32_t)month, (uint32_t)mday);
    if (wdu != weekday(days)) return EDP_ERR_TIME;
    *secs = (uint64_t)days * 86400u + (uint64_t)(hour * 3600 + min * 60 + sec);
    return EDP_OK;
}

int edp_stm32_rtc_day(edp_stm32_bkd_t *b, uint32_t *day, uint32_t spin)
{
    uint64_t s = 0;
    int err = edp_stm32_rtc_seconds(b, &s, spin);
    *day = (uint32_t)(s / 86400u);  /* 0 on error */
    return err;
}

static uint32_t bcd2(uint32_t v)
{
    return ((v / 10u) << 4) | (v % 10u);
}

int edp_stm32_rtc_set(edp_stm32_bkd_t *b, uint64_t unix_seconds, uint32_t spin, uint32_t spin_lse)
{
    edp_rcc_regs_t *rcc = b->rcc;
    edp_rtc_regs_t *rtc = b->rtc;
    uint32_t bdcr, sod, tr, dr, m, d, got, s;
    int32_t days, y;
    if (unix_seconds < UNIX_2001 || unix_seconds >= UNIX_2100) return EDP_ERR_TIME;
    if (edp_stm32_backup_access(b) < 0) return EDP_ERR_TIME;
    if (!spin) spin = 1;
    if (!spin_lse) spin_lse = 1;

    bdcr = EDP_RD(rcc->BDCR);
    if ((bdcr & RCC_BDCR_RTCSEL_MASK) && (bdcr & RCC_BDCR_RTCSEL_MASK) != RCC_BDCR_RTCSEL_LSE)
        return EDP_ERR_TIME;
    if (!(bdcr & RCC_BDCR_LSEON)) rcc->BDCR |= RCC_BDCR_LSEON | RCC_BDCR_RTCEN;
    for (s = spin_lse; !(EDP_RD(rcc->BDCR) & RCC_BDCR_LSERDY);)
        if (!--s) return EDP_ERR_TIME;
    rcc->BDCR |= RCC_BDCR_RTCSEL_LSE | RCC_BDCR_RTCEN;   /* RTCSEL is write-once until a backup-domain reset */
    if (!rtc_clock_ok(EDP_RD(rcc->BDCR))) return EDP_ERR_TIME;

    days = (int32_t)(unix_seconds / 86400u);
    sod = (uint32_t)(unix_seconds % 86400u);
    edp_stm32_civil_from_days(days, &y, &m, &d);
    tr = bcd2(sod / 3600u) << 16 | bcd2(sod / 60u % 60u) << 8 | bcd2(sod % 60u);
    dr = bcd2((uint32_t)y - 2000u) << 16 | weekday(days) << 13 | bcd2(m) << 8 | bcd2(d);

    rtc->WPR = WPR_KEY1;
    rtc->WPR = WPR_KEY2;
    rtc->ISR = 0xFFFFFFFFu;   /* INIT = 1; every other writable bit is rc_w0: writing 1 clears nothing */
    for (s = spin; !(EDP_RD(rtc->ISR) & RTC_ISR_INITF);) {
        if (!--s) {
            rtc->ISR = ~RTC_ISR_INIT;
            rtc->WPR = WPR_LOCK;
            return EDP_ERR_TIME;
        }
    }
    rtc->PRER = RTC_PRER_LSE & 0x7FFFu;   /* PREDIV_S first, then PREDIV_A: two writes (RM0090 §26.3.5) */
    rtc->PRER = RTC_PRER_LSE;
    rtc->TR = tr;
    rtc->DR = dr;
    rtc->CR &= ~(RTC_CR_FMT | RTC_CR_BYPSHAD);
    rtc->ISR = ~RTC_ISR_INIT;  /* leave init mode: the calendar restarts */
    rtc->WPR = WPR_LOCK;

    /* The calendar must now read back (RSF after the restart) the day just set. */
    if (edp_stm32_rtc_day(b, &got, spin) < 0) return EDP_ERR_TIME;
    if (got != (uint32_t)days && got != (uint32_t)days + 1u) return EDP_ERR_TIME;
    return EDP_OK;
}

/* Privacy budget accountant in fixed-point micro-epsilon (no float, no lost spend).
 *
 * The daily spend belongs to one UTC day index. It resets only when the day
 * index increases: a clock set back never resets anything. The lifetime
 * spend only ever grows. A cap of 0 means "no cap" for the lifetime cap
 * only; a daily cap of 0 refuses every external query. */
#ifndef EDGEDP_BUDGET_H
#define EDGEDP_BUDGET_H
#include <stdint.h>

#define EDP_MICRO 1000000u  /* micro-epsilon per epsilon: every amount of epsilon is an integer of these */

typedef struct {
    uint32_t day;             /* UTC days since 1970 of daily_spent */
    uint64_t daily_cap;       /* micro-epsilon per day */
    uint64_t lifetime_cap;    /* micro-epsilon in total, 0 = none */
    uint64_t daily_spent;     /* micro-epsilon spent on `day` */
    uint64_t lifetime_spent;  /* micro-epsilon ever spent */
} edp_budget_t;

/* Move to `today` if it is later than the recorded day (daily spend -> 0).
 * Returns 1 if the day changed, 0 otherwise. Never moves back. */
int edp_budget_roll(edp_budget_t *b, uint32_t today);

/* EDP_OK if `cost` fits both the daily and the lifetime cap, else EDP_ERR_BUDGET. */
int edp_budget_check(const edp_budget_t *b, uint64_t cost);

/* Add cost to both spends (saturating). Call only after edp_budget_check. */
void edp_budget_charge(edp_budget_t *b, uint64_t cost);

/* Micro-epsilon that one more query may still use today (min of both caps). */
uint64_t edp_budget_remaining(const edp_budget_t *b);

/* Rate limit on external answers: a token bucket of `burst` answers refilled at
 * `per_minute` answers a minute (the clock's seconds; a clock set back adds
 * nothing). burst = 0: no limit. */
typedef struct {
    uint32_t burst;       /* answers the bucket holds, 0 = no rate limit */
    uint32_t per_minute;  /* answers added per minute (0: the burst is all there is) */
    uint32_t tarpit_ms;   /* delay before an EDP_ERR_RATE refusal leaves, 0..EDP_RATE_TARPIT_MAX */
} edp_rate_config_t;

#define EDP_RATE_TARPIT_MAX 2000u  /* ms */
#define EDP_RATE_NEVER 0xFFFFFFFFu /* the wait when nothing refills the bucket */

typedef struct {
    uint64_t tokens;  /* in 1/60 answer, at most burst * 60 */
    uint64_t last;    /* clock seconds of the last refill */
} edp_rate_t;

/* The full bucket of a new limit at clock seconds now. */
void edp_rate_fill(edp_rate_t *r, const edp_rate_config_t *c, uint64_t now);

/* Refill to `now` and return EDP_OK if one answer's token is there, else
 * EDP_ERR_RATE with *wait = seconds until it is (EDP_RATE_NEVER if never). */
int edp_rate_check(edp_rate_t *r, const edp_rate_config_t *c, uint64_t now, uint32_t *wait);

/* Take one answer's token (after edp_rate_check returned EDP_OK). */
void edp_rate_take(edp_rate_t *r);

/* Whether two rate limits are the same (every field). */
static inline int edp_rate_config_same(const edp_rate_config_t *a, const edp_rate_config_t *b)
{
    return a->burst == b->burst && a->per_minute == b->per_minute && a->tarpit_ms == b->tarpit_ms;
}

#endif

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

#endif

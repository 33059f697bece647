#include "edgedp/budget.h"
#include "edgedp/error.h"

int edp_budget_roll(edp_budget_t *b, uint32_t today)
{
    if (today <= b->day) return 0;
    b->day = today;
    b->daily_spent = 0;
    return 1;
}

uint64_t edp_budget_remaining(const edp_budget_t *b)
{
    uint64_t daily = b->daily_spent >= b->daily_cap ? 0 : b->daily_cap - b->daily_spent;
    if (b->lifetime_cap) {
        uint64_t life = b->lifetime_spent >= b->lifetime_cap ? 0 : b->lifetime_cap - b->lifetime_spent;
        if (life < daily) daily = life;
    }
    return daily;
}

int edp_budget_check(const edp_budget_t *b, uint64_t cost)
{
    return cost <= edp_budget_remaining(b) ? EDP_OK : EDP_ERR_BUDGET;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

void edp_budget_charge(edp_budget_t *b, uint64_t cost)
{
    b->daily_spent = add_sat(b->daily_spent, cost);
    b->lifetime_spent = add_sat(b->lifetime_spent, cost);
}

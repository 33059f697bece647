#include "budget.h"
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

void edp_rate_fill(edp_rate_t *r, const edp_rate_config_t *c, uint64_t now)
{
    r->tokens = (uint64_t)c->burst * 60u;
    r->last = now;
}

int edp_rate_check(edp_rate_t *r, const edp_rate_config_t *c, uint64_t now, uint32_t *wait)
{
    const uint64_t full = (uint64_t)c->burst * 60u;
    uint64_t need;
    if (r->tokens > full) r->tokens = full;
    if (now > r->last) {
        uint64_t add = (now - r->last) * c->per_minute;
        r->tokens = add >= full - r->tokens ? full : r->tokens + add;
        r->last = now;
    }
    if (r->tokens >= 60u) return EDP_OK;
    need = 60u - r->tokens;
    *wait = c->per_minute ? (uint32_t)((need + c->per_minute - 1u) / c->per_minute) : EDP_RATE_NEVER;
    return EDP_ERR_RATE;
}

void edp_rate_take(edp_rate_t *r)
{
    r->tokens -= 60u;
}

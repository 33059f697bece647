/* The flash log's mark (mark.h). */
#include "mark.h"

#include "edgedp/error.h"

static edp_flog_mark_t mark_of(const edp_record_t *r)
{
    edp_flog_mark_t m;
    m.day = r->budget.day;
    m.daily = r->budget.daily_spent;
    m.lifetime = r->budget.lifetime_spent;
    m.counter = r->auth_counter;
    return m;
}

/* v + reserve, saturating, but not above cap unless v already is. */
static uint64_t reserved(uint64_t v, uint64_t reserve, uint64_t cap)
{
    uint64_t r = v + reserve < v ? UINT64_MAX : v + reserve;
    return v >= cap ? v : (r > cap ? cap : r);
}

int edp_mark_raise(edp_dev_t *d, const edp_record_t *r, uint64_t reserve)
{
    edp_flog_mark_t m = mark_of(r);
    const edp_flog_mark_t *have = &d->flog.mark;
    if (!d->port->flash) return EDP_OK;
    if (!d->flog_ok) return EDP_ERR_STORE;
    if (reserve && (m.lifetime > have->lifetime || m.day > have->day ||
                    (m.day == have->day && m.daily > have->daily))) {
        m.daily = reserved(m.daily, reserve, r->budget.daily_cap);
        m.lifetime = reserved(m.lifetime, reserve, r->budget.lifetime_cap ? r->budget.lifetime_cap : UINT64_MAX);
    }
    return edp_flog_raise(&d->flog, &m);
}

void edp_mark_restore(edp_dev_t *d)
{
    const edp_flog_mark_t *m = &d->flog.mark;
    edp_budget_t *b = &d->rec.budget;
    if (m->counter > d->rec.auth_counter) d->rec.auth_counter = m->counter;
    if (d->store_state == EDP_STORE_LOADED) return;
    if (m->lifetime > b->lifetime_spent) b->lifetime_spent = m->lifetime;
    if (m->day > b->day) {
        b->day = m->day;
        b->daily_spent = m->daily;
    } else if (m->day == b->day && m->daily > b->daily_spent) {
        b->daily_spent = m->daily;
    }
}

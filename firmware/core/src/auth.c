/* Admin authentication (auth.h). */
#include "auth.h"

#include "audit.h"
#include "edgedp/error.h"
#include "le.h"
#include "mark.h"
#include "rate.h"

#include <string.h>

void edp_auth_new_nonce(edp_dev_t *d)
{
    uint32_t i;
    for (i = 0; i < EDP_AUTH_NONCE; i += 4) (void)edp_wr32(d->nonce + i, edp_drbg_word(&d->auth_drbg));
}

void edp_auth_seed(edp_dev_t *d)
{
    uint8_t key[32];
    int (*src)(void *, uint8_t *) = d->port->auth_entropy ? d->port->auth_entropy : d->port->entropy;
    d->auth_ok = src(d->port->ctx, key) >= 0;
    if (d->auth_ok) {
        edp_drbg_seed(&d->auth_drbg, key);
        edp_auth_new_nonce(d);
    }
    edp_wipe(key, sizeof key);
}

void edp_auth_begin(edp_hmac_t *h, const uint8_t *key, const uint8_t domain[EDP_AUTH_DOMAIN_LEN])
{
    edp_hmac_init(h, key, 32);
    edp_hmac_update(h, domain, EDP_AUTH_DOMAIN_LEN);
}

int edp_auth_ready(edp_dev_t *d, const uint8_t **key)
{
    int err;
    if ((err = d->port->device_key(d->port->ctx, key)) < 0) return err;
    if (!d->auth_ok) edp_auth_seed(d);
    return d->auth_ok ? EDP_OK : EDP_ERR_ENTROPY;
}

/* Whether the admin body b[0..n) (counter u64 | payload | tag) carries
 * HMAC(key, "EDP2" | type | nonce | counter | payload) for the current nonce. */
static int admin_tag_valid(const edp_dev_t *d, const uint8_t *key, uint32_t type, const uint8_t *b, size_t n)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ADMIN;
    uint8_t tag[EDP_AUTH_TAG], t8 = (uint8_t)type;
    edp_hmac_t h;
    int ok;
    if (n < EDP_AUTH_COUNTER + EDP_AUTH_TAG) return 0;
    edp_auth_begin(&h, key, domain);
    edp_hmac_update(&h, &t8, 1);
    edp_hmac_update(&h, d->nonce, EDP_AUTH_NONCE);
    edp_hmac_update(&h, b, n - EDP_AUTH_TAG);
    edp_hmac_final(&h, tag);
    ok = edp_verify32(tag, b + n - EDP_AUTH_TAG) == 0;
    edp_wipe(tag, sizeof tag);
    return ok;
}

/* Apply an authenticated admin command (counter u64 | payload): check the counter
 * and the payload, commit the change with the counter, then act. */
static int admin_apply(edp_dev_t *d, uint32_t type, const uint8_t *b, size_t plen)
{
    const uint8_t *p = b + EDP_AUTH_COUNTER;
    uint64_t counter = edp_rd64(b), secs = 0;
    edp_record_t next;
    int err;
    if (counter <= d->rec.auth_counter) return EDP_ERR_REPLAY;
    next = d->rec;
    next.auth_counter = counter;
    switch (type) {
    case EDP_T_CONFIG:
        if (plen != EDP_CONFIG_PAYLOAD) return EDP_ERR_LEN;
        next.mech.eps_micro = edp_rd32(p);
        next.budget.daily_cap = edp_rd64(p + 4);
        next.budget.lifetime_cap = edp_rd64(p + 12);
        next.mech.lo = edp_rdf(p + 20);
        next.mech.hi = edp_rdf(p + 24);
        next.mech.sensitivity = edp_rdf(p + 28);
        next.mech.m = (int32_t)edp_rd32(p + 32);
        if ((err = edp_mech_config_check(&next.mech))) return err;
        break;
    case EDP_T_SET_TIME:
        if (plen != EDP_SET_TIME_PAYLOAD) return EDP_ERR_LEN;
        secs = edp_rd64(p);
        break;
    case EDP_T_RESET_BUDGET:
        if (plen != 0) return EDP_ERR_LEN;
        next.budget.daily_spent = 0;
        break;
    case EDP_T_RATE:
        if (plen != EDP_RATE_PAYLOAD) return EDP_ERR_LEN;
        next.rate.burst = edp_rd32(p);
        next.rate.per_minute = edp_rd32(p + 4);
        next.rate.tarpit_ms = edp_rd32(p + 8);
        if (next.rate.tarpit_ms > EDP_RATE_TARPIT_MAX || (next.rate.burst && !d->port->seconds))
            return EDP_ERR_BAD_VALUE;
        if (next.rate.burst) {  /* a new limit starts with a full bucket */
            if ((err = d->port->seconds(d->port->ctx, &secs)) < 0) return err;
            edp_rate_fill(&next.bucket, &next.rate, secs);
        }
        break;
    default:  /* EDP_T_TEST_SEED */
        if (!EDP_TEST_BUILD) return EDP_ERR_UNKNOWN;
        if (plen != EDP_SEED_BYTES) return EDP_ERR_LEN;
        break;
    }
    /* The counter (and any change) is durable, in flash and in the store,
     * before the command takes effect. */
    err = type == EDP_T_RATE ? edp_rate_raise(d, &next) : edp_mark_raise(d, &next, 0);
    if (!err) err = edp_store_commit(d->port, &next, &d->slot);
    if (err) {
        if (type == EDP_T_RATE) edp_rate_unwind(d, next.auth_counter);
        return err;
    }
    d->rec = next;
    if (type == EDP_T_CONFIG) {
        d->store_ok = 1;
        d->plan_valid = 0;
    } else if (type == EDP_T_SET_TIME) {
        if ((err = d->port->set_time(d->port->ctx, secs)) < 0) return err;
    } else if (type == EDP_T_TEST_SEED) {
        edp_drbg_seed(&d->drbg, p);
        d->entropy_ok = 1;
    }
    return EDP_OK;
}

int edp_cmd_admin(edp_dev_t *d, uint32_t type, const uint8_t *b, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_ANSWER;
    static const uint8_t no_tag[EDP_AUTH_TAG];
    const uint8_t *key, *ftag = n >= EDP_AUTH_COUNTER + EDP_AUTH_TAG ? b + n - EDP_AUTH_TAG : no_tag;
    uint8_t head[1 + EDP_AUTH_COUNTER], t8 = (uint8_t)type;
    edp_hmac_t h;
    int valid, err = edp_auth_ready(d, &key);
    if (err) return err;
    valid = admin_tag_valid(d, key, type, b, n);
    err = valid ? admin_apply(d, type, b, n - EDP_AUTH_COUNTER - EDP_AUTH_TAG) : EDP_ERR_AUTH;
    head[0] = (uint8_t)-err;
    (void)edp_wr64(head + 1, d->rec.auth_counter);
    edp_auth_begin(&h, key, domain);
    edp_hmac_update(&h, &t8, 1);
    edp_hmac_update(&h, d->nonce, EDP_AUTH_NONCE);
    edp_hmac_update(&h, ftag, EDP_AUTH_TAG);
    edp_hmac_update(&h, head, sizeof head);
    memcpy(*o, head, sizeof head);
    edp_hmac_final(&h, *o + sizeof head);
    *o += EDP_ADMIN_ANSWER;
    if (valid) {
        edp_auth_new_nonce(d);
        edp_audit_defer(d, type == EDP_T_CONFIG ? EDP_AUDIT_CONFIG : type == EDP_T_SET_TIME ? EDP_AUDIT_SET_TIME :
                           type == EDP_T_RESET_BUDGET ? EDP_AUDIT_RESET_BUDGET : type == EDP_T_RATE ? EDP_AUDIT_RATE :
                           EDP_AUDIT_TEST_SEED, head[0]);
    }
    return EDP_OK;
}

int edp_cmd_challenge(edp_dev_t *d, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_CHALLENGE;
    const uint8_t *key;
    edp_hmac_t h;
    uint8_t *start = *o;
    int err;
    if (n) return EDP_ERR_LEN;
    if ((err = edp_auth_ready(d, &key))) return err;
    edp_auth_new_nonce(d);
    memcpy(*o, d->nonce, EDP_AUTH_NONCE);
    *o = edp_wr64(*o + EDP_AUTH_NONCE, d->rec.auth_counter);
    edp_auth_begin(&h, key, domain);
    edp_hmac_update(&h, start, (size_t)(*o - start));
    edp_hmac_final(&h, *o);
    *o += EDP_AUTH_TAG;
    return EDP_OK;
}

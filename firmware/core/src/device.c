#include "fp_contract.h"  /* first: no fused multiply-add in this file */

/* The device's dispatch (the API of edgedp/device.h; device_state.h lists the
 * other concerns): boot, the frames in (edp_device_rx) and their answers
 * (edp_device_handle), and the commands that only read the state (INFO,
 * BUDGET, STATE). */
#include "device_state.h"
#include "answer.h"
#include "audit.h"
#include "auth.h"
#include "cobs.h"
#include "edgedp/error.h"
#include "frame.h"
#include "le.h"
#include "mark.h"
#include "rate.h"
#include "sha256.h"
#include "util.h"
#include "window.h"

#include <stddef.h>
#include <string.h>

/* edp_device_t (edgedp/device.h) is the application's storage of the state:
 * it must hold it, without wasting much, at its alignment. A change to the
 * state that fails these updates EDP_DEVICE_FIXED (the fixed part's bytes
 * besides its five pointers) in edgedp/device.h. */
struct edp_dev_align { char c; edp_dev_t s; };
struct edp_device_align { char c; edp_device_t s; };
EDP_STATIC_ASSERT(device_frame, EDP_DEVICE_FRAME == EDP_FRAME_MAX);
EDP_STATIC_ASSERT(device_fits, sizeof(edp_dev_t) <= EDP_DEVICE_SIZE);
EDP_STATIC_ASSERT(device_tight, EDP_DEVICE_SIZE - sizeof(edp_dev_t) < 32u);
EDP_STATIC_ASSERT(device_aligned, offsetof(struct edp_dev_align, s) <= offsetof(struct edp_device_align, s));
EDP_STATIC_ASSERT(rx_holds_response, EDP_WIRE_MAX >= EDP_COBS_MAX(EDP_FRAME_MAX));
EDP_STATIC_ASSERT(info_shape_is_the_models, EDP_INFO_MAX_RANK == EDP_MODEL_MAX_RANK);
EDP_STATIC_ASSERT(info_fits, EDP_INFO_HEAD + 3u * (1u + EDP_INFO_TEXT_MAX) <= EDP_BODY_MAX);

static uint8_t *wrs(uint8_t *o, const char *s)
{
    size_t n = strlen(s);
    if (n > EDP_INFO_TEXT_MAX) n = EDP_INFO_TEXT_MAX;
    *o++ = (uint8_t)n;
    memcpy(o, s, n);
    return o + n;
}

/* ---- state ---- */

static void default_record(edp_record_t *r)
{
    memset(r, 0, sizeof *r);
    r->budget.daily_cap = EDP_TEST_BUILD ? EDP_TEST_DEFAULT_DAILY_CAP : 0;
    r->mech.eps_micro = EDP_TEST_DEFAULT_EPS_MICRO;
    r->mech.lo = 0.0f;
    r->mech.hi = 1.0f;
    r->mech.sensitivity = 2.0f;
    r->mech.m = EDP_M_AUTO;
}

void edp_device_init(edp_device_t *dev, const edp_port_t *port)
{
    edp_dev_t *const d = edp_dev(dev);
    memset(d, 0, sizeof *d);
    d->port = port;
    d->flog_ok = !port->flash || edp_flog_open(&d->flog, port->flash) >= 0;
    d->store_state = (uint8_t)edp_store_load(port, &d->rec, &d->slot);
    d->store_ok = d->store_state == EDP_STORE_LOADED;
    if (d->store_state != EDP_STORE_LOADED && d->store_state != EDP_STORE_RECOVERED) default_record(&d->rec);
    if (port->flash && d->flog_ok) {
        const uint64_t record_counter = d->rec.auth_counter;
        edp_mark_restore(d);
        edp_rate_restore(d, record_counter);
    }
    if (d->store_state == EDP_STORE_RECOVERED) {
        /* The damaged slot may hold a newer commit whose answer was sent: count
         * one more query against both budgets and the rate bucket (over-count,
         * never under-count: a reset refills nothing). */
        edp_budget_charge(&d->rec.budget, d->rec.mech.eps_micro);
        if (d->rec.bucket.tokens >= 60u) edp_rate_take(&d->rec.bucket);  /* one token, or empty */
        else d->rec.bucket.tokens = 0;
        d->store_ok = edp_store_commit(port, &d->rec, &d->slot) == EDP_OK;
    } else if (d->store_state != EDP_STORE_LOADED) {
        /* Test builds start a blank store with the documented defaults; production
         * builds stay closed until an authenticated CONFIG writes a record. */
        if (EDP_TEST_BUILD && d->store_state == EDP_STORE_FRESH)
            d->store_ok = edp_store_commit(port, &d->rec, &d->slot) == EDP_OK;
    }
    if (port->flash && d->flog_ok) (void)edp_flog_prepare(&d->flog);
    edp_answer_reseed(d);
    edp_auth_seed(d);
    d->audit_seq = edp_audit_last(port);
    d->audit_exhausted_day = EDP_NO_DAY;
    if (d->store_state != EDP_STORE_LOADED) edp_audit_write(d, EDP_AUDIT_STORE, d->store_state);
    if (!d->entropy_ok || !d->auth_ok) edp_audit_write(d, EDP_AUDIT_ENTROPY, 0);
}

void edp_device_set_model(edp_device_t *dev, const edp_model_t *model)
{
    edp_dev(dev)->model = model;
}

#if EDP_TEST_BUILD
void edp_device_set_naive(edp_device_t *dev, edp_naive_fn naive)
{
    edp_dev(dev)->naive = naive;
}
#endif

/* INFO, version 2 (proto.h EDP_INFO_HEAD, docs/protocol.md): never depends on
 * entropy, clock or budget, and draws nothing. */
static int cmd_info(edp_dev_t *d, uint8_t **o)
{
    const edp_model_t *m = d->model;
    uint32_t day, tick_hz, i;
    uint8_t tick_kind;
    d->port->tick_unit(d->port->ctx, &tick_hz, &tick_kind);
    *o = edp_wr8(*o, EDP_INFO_VERSION);
    *o = edp_wr8(*o, EDP_TEST_BUILD ? 1 : 0);
    *o = edp_wr8(*o, d->store_state);
    *o = edp_wr8(*o, d->store_ok);
    *o = edp_wr8(*o, edp_dev_today(d, &day) == EDP_OK ? 1 : 0);
    *o = edp_wr8(*o, tick_kind);
    *o = edp_wr16(*o, EDP_MAX_CLASSES);
    *o = edp_wr32(*o, tick_hz);
    *o = edp_rate_write(d, *o);
    *o = edp_wr32(*o, d->port->rx_buffer);
    *o = edp_wr8(*o, d->entropy_ok ? EDP_INFO_ENTROPY_OK : EDP_INFO_ENTROPY_FAILED);
    *o = edp_wr8(*o, d->auth_ok ? EDP_INFO_ENTROPY_OK : EDP_INFO_ENTROPY_FAILED);
    *o = edp_wr8(*o, !m ? EDP_INFO_MODEL_NONE : (m->s8 ? EDP_INFO_MODEL_S8 : EDP_INFO_MODEL_F32));
    *o = edp_wr8(*o, m ? m->head : 0);
    *o = edp_wr16(*o, m ? m->n_classes : 0);
    *o = edp_wr8(*o, m ? m->in_rank : 0);
    for (i = 0; i < EDP_INFO_MAX_RANK; i++) *o = edp_wr16(*o, m && i < m->in_rank ? m->in_shape[i] : 0);
    if (m) memcpy(*o, m->sha256, sizeof m->sha256);
    else memset(*o, 0, sizeof m->sha256);
    *o += sizeof m->sha256;
    *o = wrs(*o, EDP_FIRMWARE_VERSION);
    *o = wrs(*o, d->port->board);
    *o = wrs(*o, m ? m->name : "");
    return EDP_OK;
}

/* The BUDGET fields (docs/protocol.md), as of today; also the body of STATE. */
static uint8_t *write_budget(edp_dev_t *d, uint8_t *o)
{
    edp_budget_t b = d->rec.budget;
    uint32_t day;
    int have_day = edp_dev_today(d, &day) == EDP_OK;
    if (have_day) edp_budget_roll(&b, day);
    o = edp_wr32(o, b.day);
    o = edp_wr32(o, have_day ? day : EDP_NO_DAY);
    o = edp_wr64(o, b.daily_cap);
    o = edp_wr64(o, b.daily_spent);
    o = edp_wr64(o, b.lifetime_cap);
    o = edp_wr64(o, b.lifetime_spent);
    o = edp_wr64(o, edp_budget_remaining(&b));
    o = edp_wr64(o, d->rec.auth_counter);
    o = edp_wr8(o, d->store_state);
    o = edp_wr8(o, d->store_ok);
    o = edp_wr32(o, d->rec.mech.eps_micro);
    o = edp_wrf(o, d->rec.mech.lo);
    o = edp_wrf(o, d->rec.mech.hi);
    o = edp_wrf(o, d->rec.mech.sensitivity);
    return edp_wr32(o, (uint32_t)d->rec.mech.m);
}

static int cmd_budget(edp_dev_t *d, uint8_t **o)
{
    *o = write_budget(d, *o);
    return EDP_OK;
}

/* STATE: challenge[16] in; nonce (fresh, as CHALLENGE) | the BUDGET fields |
 * HMAC(key, "EDPS" | challenge | nonce | fields) out. The host's random
 * challenge makes the answer fresh: an old one cannot be replayed. */
static int cmd_state(edp_dev_t *d, const uint8_t *b, size_t n, uint8_t **o)
{
    static const uint8_t domain[EDP_AUTH_DOMAIN_LEN] = EDP_AUTH_DOMAIN_STATE;
    const uint8_t *key;
    edp_hmac_t h;
    uint8_t *start = *o;
    int err;
    if (n != EDP_STATE_REQUEST) return EDP_ERR_LEN;
    if ((err = edp_auth_ready(d, &key))) return err;
    edp_auth_new_nonce(d);
    memcpy(*o, d->nonce, EDP_AUTH_NONCE);
    *o = edp_rate_write(d, write_budget(d, *o + EDP_AUTH_NONCE));
    edp_auth_begin(&h, key, domain);
    edp_hmac_update(&h, b, EDP_STATE_REQUEST);
    edp_hmac_update(&h, start, (size_t)(*o - start));
    edp_hmac_final(&h, *o);
    *o += EDP_AUTH_TAG;
    return EDP_OK;
}

/* ---- dispatcher ---- */

size_t edp_device_handle(edp_device_t *dev, uint8_t *frame, size_t n)
{
    edp_dev_t *const d = edp_dev(dev);
    edp_frame_t fr;
    const uint8_t *f;
    uint8_t *o;
    int err = edp_frame_parse(frame, n, &fr);
    edp_audit_flush(d);  /* the previous frame's event, when the caller is not finish_frame */
    if (err) return edp_frame_error(d->tx, fr.type, fr.seq, err);
    f = fr.body;
    n = fr.len;
    o = edp_frame_response(d->tx, fr.type, fr.seq);
    switch (fr.type) {
    case EDP_T_PING:
        if (n > EDP_PING_MAX) { err = EDP_ERR_LEN; break; }
        memcpy(o, f, n);
        o += n;
        err = EDP_OK;
        break;
    case EDP_T_INFO: err = n ? EDP_ERR_LEN : cmd_info(d, &o); break;
    case EDP_T_BUDGET: err = n ? EDP_ERR_LEN : cmd_budget(d, &o); break;
    case EDP_T_QUERY: err = edp_cmd_query(d, f, n, &o); break;
    case EDP_T_INFER: err = edp_cmd_infer(d, f, n, &o); break;
#if EDP_TEST_BUILD
    case EDP_T_INFER_LOCAL: err = edp_cmd_infer_local(d, f, n, &o); break;
    case EDP_T_LOCAL: err = edp_cmd_local(d, f, n, &o); break;
    case EDP_T_SAMPLE: err = edp_cmd_sample(d, f, n, &o); break;
    case EDP_T_NAIVE: err = edp_cmd_naive(d, f, n, &o); break;
#endif
    case EDP_T_CHALLENGE: err = edp_cmd_challenge(d, n, &o); break;
    case EDP_T_STATE: err = cmd_state(d, f, n, &o); break;
    case EDP_T_AUDIT_LOG: err = edp_cmd_audit_log(d, f, n, &o); break;
    case EDP_T_CONFIG: case EDP_T_SET_TIME: case EDP_T_RESET_BUDGET: case EDP_T_TEST_SEED: case EDP_T_RATE:
        err = edp_cmd_admin(d, fr.type, f, n, &o);
        break;
    default: err = EDP_ERR_UNKNOWN; break;
    }
    if (err == EDP_ERR_RATE) return edp_rate_refusal(d, fr.type, fr.seq);
    if (err) return edp_frame_error(d->tx, fr.type, fr.seq, err);
    return (size_t)(o - d->tx);
}

static void finish_frame(edp_dev_t *d)
{
    size_t len;
    int n;
    edp_window_open(d);
    if (d->rx_overflow) {
        len = edp_frame_error(d->tx, 0, 0, EDP_ERR_LEN);
    } else {
        n = edp_cobs_decode(d->rx, d->rx_len);
        len = n < 0 ? edp_frame_error(d->tx, 0, 0, EDP_ERR_CRC) : edp_device_handle(edp_device_of(d), d->rx, (size_t)n);
    }
    /* The request (decoded in place) is not kept: zeroed before its answer leaves. */
    memset(d->rx, 0, d->rx_len);
    /* The request is consumed: rx takes the encoded response. */
    edp_frame_send(d->tx, len, d->rx, edp_window_send, d);
    /* The answer has left: its audit entry and the flash log's erase ahead of
     * need run here, outside every release window. */
    edp_audit_flush(d);
    if (d->port->flash && d->flog_ok) (void)edp_flog_prepare(&d->flog);
    d->rx_len = 0;
    d->rx_overflow = 0;
}

void edp_device_rx(edp_device_t *dev, const uint8_t *bytes, size_t n)
{
    edp_dev_t *const d = edp_dev(dev);
    /* The fill position lives in a register (byte stores may alias *d); the
     * inner loops copy one run of non-zero bytes that fits the buffer, a word
     * at a time while its four bytes are all non-zero, then byte by byte. */
    uint8_t *o = d->rx + d->rx_len, *const full = d->rx + sizeof d->rx;
    const uint8_t *end = bytes + n;
    while (bytes != end) {
        size_t room = (size_t)(full - o), left = (size_t)(end - bytes);
        const uint8_t *stop = bytes + (left < room ? left : room);
        for (; stop - bytes >= 4; bytes += 4, o += 4) {
            const uint32_t w = edp_rd32(bytes);
            if ((w - 0x01010101u) & ~w & 0x80808080u) break;  /* a zero byte in w */
            edp_wr32(o, w);
        }
        while (bytes != stop && *bytes) *o++ = *bytes++;
        if (bytes == end) break;
        if (*bytes) {  /* no room: drop the byte, remember the overflow */
            d->rx_overflow = 1;
            bytes++;
            continue;
        }
        bytes++;
        d->rx_len = (uint32_t)(o - d->rx);
        if (d->rx_len || d->rx_overflow) finish_frame(d);
        o = d->rx;
    }
    d->rx_len = (uint32_t)(o - d->rx);
}

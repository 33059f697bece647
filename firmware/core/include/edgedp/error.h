/* edgedp error codes.
 *
 * Every function that can fail returns int: >= 0 on success, a negative
 * EDP_ERR_* otherwise. A port callback's error reaches the caller unchanged.
 * On the wire an error is carried as its positive value (docs/protocol.md). */
#ifndef EDGEDP_ERROR_H
#define EDGEDP_ERROR_H

enum edp_error {
    EDP_OK            = 0,
    EDP_ERR_CRC       = -1,  /* frame CRC mismatch or undecodable COBS */
    EDP_ERR_LEN       = -2,  /* frame too short, too long, or body size wrong */
    EDP_ERR_VERSION   = -3,  /* protocol version not supported */
    EDP_ERR_UNKNOWN   = -4,  /* unknown frame type (or not in this build) */
    EDP_ERR_BAD_VALUE = -5,  /* NaN/Inf input, or a parameter out of range */
    EDP_ERR_BUDGET    = -6,  /* daily or lifetime privacy budget exhausted */
    EDP_ERR_ENTROPY   = -7,  /* entropy source failed: no external output */
    EDP_ERR_TIME      = -8,  /* no trusted clock: no external output */
    EDP_ERR_AUTH      = -9,  /* missing/invalid HMAC tag or no device key */
    EDP_ERR_REPLAY    = -10, /* authentication counter not increasing */
    EDP_ERR_STORE     = -11, /* persistent store unreadable or write failed */
    EDP_ERR_NO_MODEL  = -12, /* INFER on an image built without a model */
    EDP_ERR_TIMING    = -13, /* the board cannot release answers at a deadline */
    EDP_ERR_RATE      = -14, /* rate limit: no token for an external answer yet (the error carries the wait) */
};

#endif

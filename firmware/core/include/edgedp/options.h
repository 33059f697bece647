/* edgedp compile-time options. Every entry may be overridden with -D or
 * from a user header named by EDP_CONFIG (included first). */
#ifndef EDGEDP_OPTIONS_H
#define EDGEDP_OPTIONS_H

#ifdef EDP_CONFIG
#include EDP_CONFIG
#endif

/* Largest vector length k a query may carry (154..1024). Sets frame buffer sizes; a body must
 * also hold the AUDIT_LOG answer (32 entries), hence at least 154 (audit.c checks it). */
#ifndef EDP_MAX_CLASSES
#define EDP_MAX_CLASSES 1024
#endif

/* Largest K of the TOPK output mode. */
#ifndef EDP_MAX_TOPK
#define EDP_MAX_TOPK 32
#endif

/* Largest number of decimals of the ROUND output mode. */
#ifndef EDP_MAX_ROUND_DIGITS
#define EDP_MAX_ROUND_DIGITS 6
#endif

/* Non-zero in test builds: TEST_SEED and SAMPLE exist, the board may use a
 * fixed documented seed. Production builds must leave it 0. */
#ifndef EDP_TEST_BUILD
#define EDP_TEST_BUILD 0
#endif

/* Non-zero: QUERY answers carry the measured ticks of the DP step. The
 * sampler's running time depends on the noise drawn (rejection loops), so the
 * tick count is a side channel on the noise: production builds report 0
 * unless built for benchmarking (docs/privacy.md, "Timing"). */
#ifndef EDP_REPORT_TICKS
#define EDP_REPORT_TICKS EDP_TEST_BUILD
#endif

/* Non-zero: every QUERY and INFER answer leaves at a deadline fixed by the
 * configuration, k, the mode and the model (src/deadline.h), so that its
 * time does not show the noise; needs the port's window callbacks. Production
 * builds; test builds answer at once (benchmarks measure the real time). */
#ifndef EDP_RELEASE_DEADLINE
#define EDP_RELEASE_DEADLINE (!EDP_TEST_BUILD)
#endif

/* ChaCha12 blocks drawn between reseeds from the board's entropy source
 * (production builds only; test builds replay one stream). */
#ifndef EDP_RESEED_BLOCKS
#define EDP_RESEED_BLOCKS 65536u
#endif

/* Answers one flash-log record covers (src/flog.h, the reservation): a
 * charge the flash mark does not cover raises it to the spend plus
 * (EDP_FLOG_RESERVE - 1) answers' epsilon, clamped to the caps, so the log is
 * written once per EDP_FLOG_RESERVE answers. After a store loss the device
 * comes back with at most that many answers more spent than it sent
 * (over-count, never under-count). 1: a record per answer. */
#ifndef EDP_FLOG_RESERVE
#define EDP_FLOG_RESERVE 16u
#endif

/* The project's version, stated here once: INFO and the boot banner report it,
 * and CMake's project(), the host package (edgedp.schema, generated from this
 * header) and pyproject.toml take it from here; library.json, whose format
 * cannot read a file, carries a copy a test keeps equal. Not a build option. */
#define EDP_FIRMWARE_VERSION "0.4.0"

#endif

/* No fused multiply-add in this translation unit (core-internal; include it
 * first in every core source that does float arithmetic).
 *
 * Bit-exact replay (docs/model.md, edgedp.model.reference) needs every float
 * operation rounded on its own. ISO C modes (-std=c99) keep contraction off,
 * but GNU modes (-std=gnu11, a common IDE default) let GCC fuse a*b + c into
 * vfma.f32, which changes the low bits. The pragma pins the rule in the source,
 * whatever the build's flags; tests/native/test_vendor_build.py compiles these files
 * with -std=gnu11 and fails on any fused instruction. */
#ifndef EDGEDP_FP_CONTRACT_H
#define EDGEDP_FP_CONTRACT_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#else
#error "edgedp: pin floating-point contraction off for this compiler (see fp_contract.h)"
#endif

#endif

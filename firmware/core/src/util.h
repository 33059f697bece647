/* Compiler-specific features used by the core (core-internal): every builtin,
 * attribute and pragma goes through this header, with a plain C99 fallback
 * where one exists. */
#ifndef EDGEDP_UTIL_H
#define EDGEDP_UTIL_H
#include <stdint.h>

#if defined(__GNUC__)
/* Number of leading zero bits of v; v must not be 0. */
#define EDP_CLZ32(v) ((uint32_t)__builtin_clz(v))
/* Keep a function out of line (slow paths called from a hot loop). */
#define EDP_NOINLINE __attribute__((noinline))
/* A rare slow path: out of line and optimised for size (GCC's cold). */
#define EDP_COLD __attribute__((noinline, cold))
/* A helper inlined even into a function optimised for size (the release
 * deadline counts a slow path's own instructions: its helpers must be in it). */
#define EDP_ALWAYS_INLINE inline __attribute__((always_inline))
/* A function whose body is one asm statement (no prologue or epilogue). */
#define EDP_NAKED __attribute__((naked))
/* A parameter only an asm body reads. */
#define EDP_UNUSED __attribute__((unused))
#else
static inline uint32_t edp_clz32_(uint32_t v)
{
    uint32_t n = 0;
    while (!(v & 0x80000000u)) v <<= 1, n++;
    return n;
}
#define EDP_CLZ32(v) edp_clz32_(v)
#define EDP_NOINLINE
#define EDP_COLD
#define EDP_ALWAYS_INLINE inline
#define EDP_UNUSED
#endif

/* Compile-time check: a negative array size if cond is false. */
/* A macro's value as a string literal (for immediates in inline assembly). */
#define EDP_STR_(x) #x
#define EDP_STR(x) EDP_STR_(x)
#define EDP_STATIC_ASSERT(name, cond) typedef char edp_static_assert_##name[(cond) ? 1 : -1]

#endif

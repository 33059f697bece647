/* The naive baseline of seed 000 (test builds only, for benchmarks): float
 * inverse-CDF Laplace from rand() and logf, noise clamped to +-4b, output
 * clamped to [0, 1]. NOT differentially private: docs/privacy.md section 1
 * (porous low bits, a point mass at the noise clamp). */
#ifndef EDGEDP_NAIVE_H
#define EDGEDP_NAIVE_H
#include <stdint.h>

void edp_naive_laplace(const float *x, float *y, uint32_t k, float b);

#endif

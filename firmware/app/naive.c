#include "naive.h"

#include <math.h>
#include <stdlib.h>

void edp_naive_laplace(const float *x, float *y, uint32_t k, float b)
{
    uint32_t i;
    for (i = 0; i < k; i++) {
        float u = (float)rand() / (float)RAND_MAX - 0.5f;
        float sgn = u < 0.0f ? -1.0f : 1.0f;
        float noise = -b * sgn * logf(1.0f - 2.0f * fabsf(u) + 1e-7f);
        if (noise > 4.0f * b) noise = 4.0f * b;
        if (noise < -4.0f * b) noise = -4.0f * b;
        y[i] = x[i] + noise;
        if (y[i] < 0.0f) y[i] = 0.0f;
        if (y[i] > 1.0f) y[i] = 1.0f;
    }
}

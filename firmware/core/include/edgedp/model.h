/* On-device inference: dense networks with ReLU, a softmax head or the vote
 * histogram of a teacher ensemble, compiled into the image as constant data.
 *
 * Numerics (docs/model.md): float32 throughout, IEEE-754 round to nearest,
 * no fused multiply-add (build with -ffp-contract=off), every sum in one fixed
 * order: a dense output j is ((b_j + x_0 W_0j) + x_1 W_1j) + ... in input
 * order. The softmax uses edp_model_exp below (float32 +, -, *, and a power
 * of two) and one division per class. With these rules the NumPy reference
 * (edgedp.model.reference) reproduces every output bit for bit on the
 * Cortex-M4 FPU and on the host. No libm, no malloc; the scratch RAM belongs
 * to the generated model data. */
#ifndef EDGEDP_MODEL_H
#define EDGEDP_MODEL_H
#include <stdint.h>

enum edp_model_head {
    EDP_MODEL_SOFTMAX = 0,  /* one net; output = softmax of its logits, range [0, 1] */
    EDP_MODEL_VOTES = 1,    /* T nets; output c = number of nets whose argmax is class c, range [0, T] */
};

typedef struct {
    uint16_t in, out;     /* sizes, >= 1 */
    const float *wt;      /* W transposed, out x in: W[i][j] at wt[j * in + i] */
    const float *b;       /* out */
} edp_dense_t;

typedef struct {
    uint16_t n_layers;    /* >= 1; ReLU after every layer but the last */
    const edp_dense_t *layers;
    const uint16_t *cls;  /* last layer's output j is class cls[j] (< n_classes) */
} edp_net_t;

typedef struct {
    const char *name;
    uint8_t head;             /* enum edp_model_head */
    uint16_t n_features;      /* input length, 1..EDP_MAX_CLASSES */
    uint16_t n_classes;       /* output length, 1..EDP_MAX_CLASSES */
    uint16_t n_nets;          /* 1 for SOFTMAX, T for VOTES */
    const edp_net_t *nets;
    float *scratch;           /* 2 * (widest layer output) + n_classes floats */
    /* Mechanism settings for the output (the device's CONFIG sets epsilon and budget). */
    float lo, hi;             /* output range: [0, 1] (SOFTMAX) or [0, T] (VOTES) */
    float sensitivity;        /* L1 sensitivity of the output: 2 */
    int32_t m;                /* lattice exponent, or EDP_M_AUTO */
    /* Input range the model declares (`edgedp deploy`; by default the training data's):
     * finite, in_lo <= in_hi. Every input is clamped to it before the model runs. */
    float in_lo, in_hi;
} edp_model_t;

/* Clamp x[0..n_features) in place to [m->in_lo, m->in_hi] (x finite: the
 * caller checks). */
void edp_model_clamp(const edp_model_t *m, float *x);

/* Run the model on x[0..n_features). Returns a pointer to n_classes outputs in
 * m->scratch, valid until the next call. x must be finite and clamped
 * (edp_model_clamp); the outputs may still overflow to Inf or NaN for extreme
 * weights: the caller checks them. */
const float *edp_model_run(const edp_model_t *m, const float *x);

/* Zero the model's whole scratch (raw outputs and hidden activations), in a
 * time that depends only on the model's shape. */
void edp_model_wipe(const edp_model_t *m);

/* exp(x) in float32 for x <= 0 (0 below -87 and for NaN): 2^n p(r) with r = x - n ln 2,
 * p the degree-7 Taylor polynomial by Horner; within 4 ulps of exp (tested). */
float edp_model_exp(float x);

#endif

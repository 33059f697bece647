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
 * to the generated model data.
 *
 * int8 models (m->s8 set; kernels in model_s8.c, reference in
 * edgedp.model.reference): the input is quantised once in float32, every net
 * runs in integer arithmetic (int8 weights and activations, int32 sums,
 * fixed-point requantisation), and its last layer's int32 sums are dequantised
 * to float32 logits, which the same head as above turns into the output.
 *
 * Imported graphs (m->s8->graph set; `edgedp deploy model.tflite`, kernels in
 * model_graph.c, reference edgedp.model.graph_ref, docs/model.md "Imported
 * graphs"): int8 operators on NHWC tensors in one static arena planned at
 * deploy time, with TFLite's reference-kernel arithmetic, so the int8 output
 * equals the TFLite reference interpreter's; it is dequantised to float32
 * logits for the head. */
#ifndef EDGEDP_MODEL_H
#define EDGEDP_MODEL_H
#include <stddef.h>  /* NULL, in the generated model data */
#include <stdint.h>

/* The lattice exponent m of a model (edp_model_t.m) and of CONFIG left to the core. */
#define EDP_M_AUTO (-128)   /* choose m: smallest with k 2^-m <= sensitivity / EDP_M_AUTO_SLACK (src/mech.h) */
#define EDP_MODEL_MAX_RANK 4u  /* most dims of a model's input shape (edp_model_t.in_shape) */

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

/* int8 layer (docs/model.md "int8 models"): acc_j = b[j] + sum_i x_i wt[j * row + i]
 * in int32, row = in rounded up to a multiple of 4 (the padding weights are 0).
 * A hidden layer writes y_j = clamp(((acc_j mult[j] + 2^(S-1)) >> S) - 128, -128, 127)
 * with S = shift[j] in 33..62 (the product exact): zero point -128, so the
 * lower clamp is the ReLU. The last layer's logit j is (float)acc_j * scale[j]. */
typedef struct {
    uint16_t in, out;
    const int8_t *wt;       /* out x row */
    const int32_t *b;       /* out */
    const int32_t *mult;    /* out, in [1, 2^31); NULL in the last layer */
    const uint8_t *shift;   /* out; NULL in the last layer */
    const float *scale;     /* out; last layer only (NULL before) */
} edp_dense_s8_t;

typedef struct {
    uint16_t n_layers;      /* >= 1 */
    const edp_dense_s8_t *layers;
    const uint16_t *cls;    /* as in edp_net_t */
} edp_net_s8_t;

/* Operators of an imported graph (edp_op_s8_t.op). */
enum edp_op {
    EDP_OP_CONV = 0,     /* Conv2D: w is oc x kh x kw x ic */
    EDP_OP_DWCONV = 1,   /* DepthwiseConv2D: w is kh x kw x oc, output c reads input c / (oc / ic) */
    EDP_OP_FC = 2,       /* FullyConnected: w is oc x (ih iw ic), the input read flat */
    EDP_OP_AVGPOOL = 3,  /* AveragePool2D: the rounded mean of the taps inside the input */
    EDP_OP_MAXPOOL = 4,  /* MaxPool2D */
    EDP_OP_MEAN = 5,     /* Mean over height and width: requantised sum of (x - a_zp) */
    EDP_OP_PAD = 6,      /* Pad: the input at (pt, pl) of an output filled with y_zp */
    EDP_OP_ADD = 7,      /* Add of two tensors of one shape (TFLite's left shift of 20) */
};

/* One operator (docs/model.md "Imported graphs" gives each kind's formula). Sums
 * are int32 of (x - a_zp) * w plus bias; requantisation of a sum s by output
 * channel c is TFLite's MultiplyByQuantizedMultiplier(s, mult[c], shift[c])
 * (c = 0 for all when n_q is 1) with its double rounding, or with single_round
 * (s mult + 2^(30 - shift)) >> (31 - shift) in int64; then + y_zp and the clamp
 * [act_min, act_max] (the fused activation). Out-of-input taps are skipped. */
typedef struct {
    uint8_t op;                 /* enum edp_op */
    uint8_t single_round;       /* 1: single rounding (see above) */
    int8_t act_min, act_max;    /* output clamp, act_min <= act_max */
    uint8_t kh, kw, sh, sw;     /* kernel and stride (conv, dwconv, pools), >= 1 */
    uint8_t dh, dw, pt, pl;     /* dilation >= 1; padding before: rows, columns */
    uint16_t ih, iw, ic;        /* input shape (height, width, channels), each >= 1 */
    uint16_t oh, ow, oc;        /* output shape */
    int32_t a_zp, b_zp, y_zp;   /* zero points: input, second input (ADD), output */
    uint32_t a, b, y;           /* arena byte offsets of input, second input, output */
    const int8_t *w;            /* weights (conv, dwconv, fc), else NULL */
    const int32_t *bias;        /* oc (conv, dwconv, fc), else NULL */
    const int32_t *mult;        /* n_q multipliers in [0, 2^31); ADD: input a, input b, output */
    const int8_t *shift;        /* n_q exponents in -31..30 (> 0: left) */
    uint16_t n_q;               /* 1 or oc (ADD: 3; pools and PAD: 0) */
} edp_op_s8_t;

typedef struct edp_graph_s8 {
    uint16_t n_ops;             /* >= 1, in execution order */
    const edp_op_s8_t *ops;
    int8_t *arena;              /* arena_bytes, every tensor at its planned offset */
    uint32_t arena_bytes;
    uint32_t in, out;           /* arena offsets of the input (n_features) and output (n_classes) */
    /* Input: q_i = clamp(round(x_i / in_scale) + in_zp, -128, 127), halves away from zero, float32.
     * Output: logit j = (float)(q_j - out_zp) * out_scale. */
    float in_scale, out_scale;
    int32_t in_zp, out_zp;
    const uint16_t *cls;        /* output j is class cls[j] */
} edp_graph_s8_t;

typedef struct {
    /* Input quantisation: q_i = clamp(floor(x_i * in_mul + in_add), 0, 255) - 128, in float32. */
    float in_mul, in_add;
    const edp_net_s8_t *nets;   /* n_nets of them (the model's n_nets) */
    uint16_t hidden_row;        /* row(widest hidden layer output), 0 without hidden layers */
    int8_t *act;                /* row(n_features) + 2 * hidden_row bytes */
    uint32_t *xp;               /* row(widest layer input) / 2 words: an input widened to int16 pairs */
    uint16_t xp_words;          /* the words at xp (the generator's array) */
    const edp_graph_s8_t *graph;  /* NULL: the dense nets above; else an imported graph (nets, act
                                   * and xp NULL, hidden_row and xp_words 0, in_mul and in_add unused) */
} edp_model_s8_t;

typedef struct {
    const char *name;
    uint8_t head;             /* enum edp_model_head */
    uint16_t n_features;      /* input length, 1..EDP_MAX_CLASSES */
    uint16_t n_classes;       /* output length, 1..EDP_MAX_CLASSES */
    uint16_t n_nets;          /* 1 for SOFTMAX, T for VOTES */
    const edp_net_t *nets;
    float *scratch;           /* 2 * (widest layer output) + n_classes floats
                               * (int8: n_classes + the widest last layer; a graph: 2 n_classes) */
    /* Mechanism settings for the output (the device's CONFIG sets epsilon and budget). */
    float lo, hi;             /* output range: [0, 1] (SOFTMAX) or [0, T] (VOTES) */
    float sensitivity;        /* L1 sensitivity of the output: 2 */
    int32_t m;                /* lattice exponent, or EDP_M_AUTO */
    /* Input range the model declares (`edgedp deploy`; by default the training data's):
     * finite, in_lo <= in_hi. Every input is clamped to it before the model runs. */
    float in_lo, in_hi;
    const edp_model_s8_t *s8; /* NULL: float32 nets; else int8 nets (nets unused, NULL) */
    uint16_t scratch_floats;  /* the floats at scratch (the generator's array), all of which
                               * edp_model_wipe zeroes: its size is declared, not searched for */
    /* Identity (INFO reports it): the input's shape, in_rank dims (1..EDP_MODEL_MAX_RANK,
     * outermost first, C order) whose product is n_features, and the sha256 of the
     * model's data as deployed (edgedp.model.cgen.digest: weights and settings; the value
     * provisioning and a registry use). */
    uint8_t in_rank;
    uint16_t in_shape[EDP_MODEL_MAX_RANK];
    uint8_t sha256[32];
} edp_model_t;

/* Clamp x[0..n_features) in place to [m->in_lo, m->in_hi] (x finite: the
 * caller checks). */
void edp_model_clamp(const edp_model_t *m, float *x);

/* Run the model on x[0..n_features). Returns a pointer to n_classes outputs in
 * m->scratch, valid until the next call. x must be finite and clamped
 * (edp_model_clamp); the outputs may still overflow to Inf or NaN for extreme
 * weights: the caller checks them. */
const float *edp_model_run(const edp_model_t *m, const float *x);

/* edp_model_run for an int8 model (dense nets or a graph; model.c). */
const float *edp_model_run_s8(const edp_model_t *m, const float *x);

/* The int8 kernels behind edp_model_run, which owns the dispatch and the head
 * (model.c calls these; they call nothing of model.c).
 * edp_model_s8_input: quantise x into the int8 dense nets' input (model_s8.c).
 * edp_model_s8_net: net t's logits into z (its last layer's outputs); *widened
 * is 0 before the first net and carries the widened input between nets.
 * edp_model_graph_run: m's graph on x[0..n_features), its logits into
 * z[0..n_classes) (model_graph.c). */
void edp_model_s8_input(const edp_model_t *m, const float *x);
void edp_model_s8_net(const edp_model_t *m, uint32_t t, uint32_t *widened, float *z);
void edp_model_graph_run(const edp_model_t *m, const float *x, float *z);

/* The head on one net's logits z[0..n): the softmax into out[cls[j]], or one
 * vote for cls of the first maximum (out zeroed by the caller). */
void edp_model_head(const edp_model_t *m, const uint16_t *cls, const float *z, uint32_t n, float *out);

/* Zero the model's whole scratch (raw outputs and hidden activations; int8
 * models also their int8 activations and widened input), in a time that
 * depends only on the model's shape. */
void edp_model_wipe(const edp_model_t *m);

/* Zero n bytes of the model's scratch (static buffers of the generated model:
 * memset's stores to them are kept, unlike those to a dying local), in a time
 * that depends on n and the alignment of p only. */
void edp_model_zero(void *p, uint32_t n);

/* The bytes edp_model_wipe zeroes (edp_deadline_answer charges them). */
uint32_t edp_model_wipe_bytes(const edp_model_t *m);

/* edp_model_wipe's int8 part (model_s8.c): act and xp, or a graph's arena,
 * edp_model_wipe_bytes_s8 bytes in all. */
void edp_model_wipe_s8(const edp_model_t *m);
uint32_t edp_model_wipe_bytes_s8(const edp_model_t *m);

/* exp(x) in float32 for x <= 0 (0 below -87 and for NaN): 2^n p(r) with r = x - n ln 2,
 * p the degree-7 Taylor polynomial by Horner; within 4 ulps of exp (tested). */
float edp_model_exp(float x);

#endif

/* interp/interp.h - the internal header of the reference interpreter (src/interp/).
 *
 * The interpreter is the oracle that compiled code is checked against, so every
 * op follows NumPy's semantics as plainly as possible; speed matters only where
 * models spend their time (matmul, conv2d), which get blocked, contiguous inner
 * loops.
 *
 * Storage: float dtypes as double, rounded with (double)(float)v after every op
 * producing f32 (for + - * / sqrt this gives exactly float32's correctly rounded
 * result, as double has more than 2*24+2 bits); integers and bools as int64,
 * wrapped to int32 after every op producing i32, bools 0/1. Integer arithmetic
 * is done on uint64 so that overflow wraps instead of being undefined.
 *
 * Files, each calling only the ones below it: graph.c (the graph walk) calls the
 * kernels of elementwise.c, matmul.c, reduce.c, movement.c and conv.c, which call
 * tensor.c (tensors, broadcasting, what kernels need of a frame).
 */
#ifndef NESTC_INTERP_H
#define NESTC_INTERP_H

#include "nestc.h"

#include <math.h>

/* ------------------------------------------------------------------ scalars */

/* Inline: these sit in the inner loops of several kernel files. */
static inline int is_float(DType t)
{
	return t == DT_F32 || t == DT_F64 || t == DT_F16 || t == DT_BF16;
}

static inline int64_t wrap32(int64_t v)
{
	return (int64_t)(int32_t)(uint32_t)(uint64_t)v;
}

static inline int64_t wadd(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t wsub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int64_t wmul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* NumPy's maximum: a NaN in either operand wins. */
static inline double fmax_np(double a, double b)
{
	return (a >= b || isnan(a)) ? a : b;
}

static inline double i2f(int64_t v, DType dt)
{
	/* int64 -> float in one rounding, as NumPy does (not via double) */
	return dt == DT_F32 ? (double)(float)v : (double)v;
}

/* ------------------------------------------------------------------ tensor.c */

/* Element count, refusing shapes no valid graph has. */
int64_t numel_of(int rank, const int64_t *shape);
Tensor *tensor_copy(const Tensor *s);
/* Bring freshly computed values into the dtype's range: round f32, wrap i32,
 * make bools 0/1. */
void fix_dtype(Tensor *t);
/* Split t around one axis: outer x len x inner. */
void axis_split(const Tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner);
/* Steps idx over the first `rank` axes of shape, the last fastest, and returns
 * off moved with it by strides st (wrapping round to 0 after the last index). */
int64_t index_next(int64_t *idx, int64_t off, const int64_t *st, const int64_t *shape, int rank);
void copy_elems(Tensor *o, int64_t oo, const Tensor *x, int64_t xo, int64_t cnt);

/* Walks an output shape row by row (rows of `inner` contiguous elements),
 * tracking where each of up to 3 broadcast inputs starts the row. */
typedef struct BIter {
	int64_t rows, inner;
	int nt, orank;
	int64_t shape[MAX_RANK], idx[MAX_RANK];
	int64_t st[3][MAX_RANK];
	int64_t off[3];
	int64_t step[3]; /* each input's stride along the row */
} BIter;

void biter_init(BIter *it, int rank, const int64_t *shape, Tensor **ts, int nt);
void biter_next(BIter *it);

/* One value of a frame: what a node computed. */
typedef struct Val {
	Tensor *t;
	Tensor **outs; /* OP_CALL: the callee's outputs, each NULL once taken */
	int nouts;
	int borrowed;  /* t belongs to the caller (graph input or param) */
	int trans;     /* a lazy transpose: t is its input, not yet transposed */
} Val;

typedef struct Ctx {
	Program *p;
	Tensor **params;
	int depth;
	Tensor **states;  /* the sequence's state (Program.states), written in place */
	int64_t (*box)[2][MAX_RANK]; /* per state, what was written ([lo, hi) per axis), as libnestrt tracks it */
	int *written;
} Ctx;

/* One run of one graph (graph.c); kernels see it to reuse their inputs' storage. */
typedef struct Frame {
	Ctx *c;
	Val *val;
	int *last;     /* index of the last node reading each node; INT_MAX for outputs */
	char *lazy;    /* transposes left to the matmuls that read them */
} Frame;

Tensor *new_out(const Node *n);
int same_shape(const Tensor *t, const Node *n);
void need_shape(const Tensor *t, const Node *n, const char *what);
void need_float(const Node *n, const Tensor *t);
void need_storage(const Node *n, const Tensor *x);
/* Input k of node n, to be overwritten in place as n's result, when this is its
 * last use, we own it, and it has the result's shape and storage; else NULL. */
Tensor *take_input(Frame *fr, Node *n, int k);
/* A run-time error at a node: with its source position when the node has one. */
void runtime_error(Program *p, Loc loc, const char *msg);

/* ------------------------------------------------------------------ the kernels */

/* Each computes node n from its input tensors into a new tensor (or one taken
 * with take_input); NULL only after a run-time error has been reported. */

/* elementwise.c */
Tensor *op_unary(Frame *fr, Node *n, Tensor *x);
Tensor *op_cast(Frame *fr, Node *n, Tensor *x);
Tensor *op_binary(Frame *fr, Node *n, Tensor *a, Tensor *b);
Tensor *op_where(Frame *fr, Node *n, Tensor *c, Tensor *a, Tensor *b);
Tensor *op_expand(Frame *fr, Node *n, Tensor *x);

/* matmul.c */
Tensor *op_matmul(Node *n, Tensor *A, Tensor *B, int bt);

/* reduce.c */
Tensor *op_reduce(Node *n, Tensor *x);
Tensor *op_argmax(Node *n, Tensor *x);
Tensor *op_softmax(Frame *fr, Node *n, Tensor *x);
Tensor *op_norm(Frame *fr, Node *n, Tensor **in);
Tensor *op_group_norm(Frame *fr, Node *n, Tensor **in); /* issue #10 */

/* movement.c */
Tensor *op_reshape(Frame *fr, Node *n, Tensor *x);
Tensor *op_transpose(Node *n, Tensor *x);
Tensor *op_concat(Node *n, Tensor **in);
Tensor *op_slice(Node *n, Tensor *x);
Tensor *op_gather(Frame *fr, Node *n, Tensor *tab, Tensor *idx);
Tensor *op_causal_mask(Frame *fr, Node *n, Tensor *x);
Tensor *op_fill(Node *n);
Tensor *op_arange(Node *n);

/* conv.c */
Tensor *op_conv2d(Node *n, Tensor **in);
Tensor *op_pool(Node *n, Tensor *x);
Tensor *op_global_avgpool(Node *n, Tensor *x);

/* index.c */
Tensor *op_take_along(Frame *fr, Node *n, Tensor *x, Tensor *idx);
Tensor *op_topk(Node *n, Tensor *x);
Tensor *op_cumsum(Node *n, Tensor *x);

/* upsample.c */
Tensor *op_conv_transpose2d(Node *n, Tensor **in);
Tensor *op_resize(Node *n, Tensor *x);

#endif

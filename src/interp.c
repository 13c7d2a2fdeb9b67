/* interp.c - the eager reference interpreter over the tensor graph IR.
 *
 * It is the oracle that compiled code is checked against, so every op follows
 * NumPy's semantics as plainly as possible; speed matters only where models
 * spend their time (matmul, conv2d), which get blocked, contiguous inner loops.
 *
 * Storage: float dtypes as double, rounded with (double)(float)v after every op
 * producing f32 (for + - * / sqrt this gives exactly float32's correctly rounded
 * result, as double has more than 2*24+2 bits); integers and bools as int64,
 * wrapped to int32 after every op producing i32, bools 0/1. Integer arithmetic
 * is done on uint64 so that overflow wraps instead of being undefined.
 *
 * Casts from float to integer truncate toward zero (NumPy's astype); where
 * NumPy is undefined we define: NaN -> 0, values beyond the target's range
 * (and +-inf) saturate to its minimum or maximum. Float to bool is x != 0
 * (NaN -> true). Integer pow with a negative exponent gives 1/b^e truncated
 * (1 for b == 1, +-1 for b == -1, else 0) where NumPy raises.
 */
#include "nestc.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 1000 /* nested region calls; deeper means a cycle in the IR */

static int is_float(DType t)
{
	return t == DT_F32 || t == DT_F64;
}

static int64_t wrap32(int64_t v)
{
	return (int64_t)(int32_t)(uint32_t)(uint64_t)v;
}

static int64_t wadd(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wsub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static int64_t wmul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* Element count, refusing shapes no valid graph has. */
static int64_t numel_of(int rank, const int64_t *shape)
{
	if (rank < 0 || rank > MAX_RANK)
		ice("interp: rank %d", rank);
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (shape[i] < 0)
			ice("interp: negative dimension %lld", (long long)shape[i]);
		if (shape[i] && n > INT64_MAX / 8 / shape[i])
			ice("interp: tensor too large");
		n *= shape[i];
	}
	return n;
}

/* ------------------------------------------------------------------ tensors */

Tensor *tensor_new(DType dt, int rank, const int64_t *shape)
{
	if ((int)dt < 0 || dt >= DT_COUNT)
		ice("tensor_new: bad dtype %d", (int)dt);
	int64_t n = numel_of(rank, shape);
	Tensor *t = xcalloc(1, sizeof *t);
	t->dtype = dt;
	t->rank = rank;
	if (rank)
		memcpy(t->shape, shape, (size_t)rank * sizeof(int64_t));
	t->n = n;
	/* calloc: large blocks come zeroed from the OS without touching them */
	if (is_float(dt))
		t->f = xcalloc((size_t)n, sizeof(double));
	else
		t->i = xcalloc((size_t)n, sizeof(int64_t));
	return t;
}

void tensor_free(Tensor *t)
{
	if (!t)
		return;
	free(t->f);
	free(t->i);
	free(t);
}

static Tensor *tensor_copy(const Tensor *s)
{
	Tensor *t = tensor_new(s->dtype, s->rank, s->shape);
	if (s->f)
		memcpy(t->f, s->f, (size_t)s->n * sizeof(double));
	else
		memcpy(t->i, s->i, (size_t)s->n * sizeof(int64_t));
	return t;
}

/* Little-endian byte order by hand, so the file format does not depend on the host. */
static uint64_t get_le(const unsigned char *p, int size)
{
	uint64_t v = 0;
	for (int k = size - 1; k >= 0; k--)
		v = v << 8 | p[k];
	return v;
}

static void put_le(unsigned char *p, uint64_t v, int size)
{
	for (int k = 0; k < size; k++) {
		p[k] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

Tensor *tensor_from_bytes(DType dt, int rank, const int64_t *shape, const void *data)
{
	Tensor *t = tensor_new(dt, rank, shape);
	const unsigned char *p = data;
	for (int64_t k = 0; k < t->n; k++) {
		switch (dt) {
		case DT_BOOL:
			t->i[k] = p[k] != 0;
			break;
		case DT_I32:
			t->i[k] = wrap32((int64_t)get_le(p + 4 * k, 4));
			break;
		case DT_I64:
			t->i[k] = (int64_t)get_le(p + 8 * k, 8);
			break;
		case DT_F32: {
			uint32_t u = (uint32_t)get_le(p + 4 * k, 4);
			float f;
			memcpy(&f, &u, 4);
			t->f[k] = f;
			break;
		}
		case DT_F64: {
			uint64_t u = get_le(p + 8 * k, 8);
			double d;
			memcpy(&d, &u, 8);
			t->f[k] = d;
			break;
		}
		default:
			ice("tensor_from_bytes: dtype %d", (int)dt);
		}
	}
	return t;
}

void tensor_to_bytes(const Tensor *t, void *out)
{
	unsigned char *p = out;
	for (int64_t k = 0; k < t->n; k++) {
		switch (t->dtype) {
		case DT_BOOL:
			p[k] = t->i[k] != 0;
			break;
		case DT_I32:
			put_le(p + 4 * k, (uint64_t)t->i[k], 4);
			break;
		case DT_I64:
			put_le(p + 8 * k, (uint64_t)t->i[k], 8);
			break;
		case DT_F32: {
			float f = (float)t->f[k];
			uint32_t u;
			memcpy(&u, &f, 4);
			put_le(p + 4 * k, u, 4);
			break;
		}
		case DT_F64: {
			uint64_t u;
			memcpy(&u, &t->f[k], 8);
			put_le(p + 8 * k, u, 8);
			break;
		}
		default:
			ice("tensor_to_bytes: dtype %d", (int)t->dtype);
		}
	}
}

/* Bring freshly computed values into the dtype's range: round f32, wrap i32,
 * make bools 0/1. */
static void fix_dtype(Tensor *t)
{
	int64_t n = t->n;
	switch (t->dtype) {
	case DT_F32:
		for (int64_t k = 0; k < n; k++)
			t->f[k] = (double)(float)t->f[k];
		break;
	case DT_I32:
		for (int64_t k = 0; k < n; k++)
			t->i[k] = wrap32(t->i[k]);
		break;
	case DT_BOOL:
		for (int64_t k = 0; k < n; k++)
			t->i[k] = t->i[k] != 0;
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------------ scalar helpers */

/* NumPy's floor division on integers; x/0 -> 0, INT64_MIN/-1 wraps. */
static int64_t ifloordiv(int64_t x, int64_t y)
{
	if (y == 0)
		return 0;
	if (y == -1)
		return (int64_t)(0 - (uint64_t)x);
	int64_t q = x / y;
	if (x % y != 0 && (x < 0) != (y < 0))
		q--;
	return q;
}

/* NumPy's % on integers: the sign of the divisor; x%0 -> 0. */
static int64_t imod(int64_t x, int64_t y)
{
	if (y == 0 || y == -1)
		return 0;
	int64_t r = x % y;
	if (r != 0 && (r < 0) != (y < 0))
		r += y;
	return r;
}

/* NumPy's % on floats (npy_divmod): fmod adjusted to the divisor's sign. */
static double fmod_np(double a, double b)
{
	double m = fmod(a, b);
	if (b == 0)
		return m;
	if (m != 0) {
		if ((b < 0) != (m < 0))
			m += b;
	} else {
		m = copysign(0.0, b);
	}
	return m;
}

static int64_t ipow(int64_t b, int64_t e)
{
	if (e < 0)
		return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
	uint64_t r = 1, x = (uint64_t)b;
	while (e) {
		if (e & 1)
			r *= x;
		x *= x;
		e >>= 1;
	}
	return (int64_t)r;
}

/* NumPy's maximum/minimum: a NaN in either operand wins. */
static double fmax_np(double a, double b)
{
	return (a >= b || isnan(a)) ? a : b;
}

static double fmin_np(double a, double b)
{
	return (a <= b || isnan(a)) ? a : b;
}

static double sigmoid(double x)
{
	/* never exp of a large positive number: no overflow, no inf/inf */
	if (x >= 0)
		return 1.0 / (1.0 + exp(-x));
	double e = exp(x);
	return e / (1.0 + e);
}

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_PI 0.79788456080286535588 /* sqrt(2/pi) */

static int64_t f2i(double v, DType dt)
{
	if (dt == DT_BOOL)
		return v != 0; /* before truncation: 0.5 is true; NaN is true */
	if (isnan(v))
		return 0;
	v = trunc(v);
	if (dt == DT_I32) {
		if (v >= 2147483647.0)
			return INT32_MAX;
		if (v <= -2147483648.0)
			return INT32_MIN;
		return (int64_t)v;
	}
	if (v >= 9223372036854775808.0)
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

static double i2f(int64_t v, DType dt)
{
	/* int64 -> float in one rounding, as NumPy does (not via double) */
	return dt == DT_F32 ? (double)(float)v : (double)v;
}

/* ------------------------------------------------------------------ broadcasting */

/* Strides of t seen as broadcast to (rank, shape): 0 on broadcast axes. */
static void bcast_strides(const Tensor *t, int rank, const int64_t *shape, int64_t *st)
{
	if (t->rank > rank)
		ice("interp: cannot broadcast rank %d to rank %d", t->rank, rank);
	int64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		int j = i - (rank - t->rank);
		if (j < 0) {
			st[i] = 0;
			continue;
		}
		if (t->shape[j] == shape[i])
			st[i] = t->shape[j] == 1 ? 0 : s;
		else if (t->shape[j] == 1)
			st[i] = 0;
		else
			ice("interp: cannot broadcast dim %lld to %lld", (long long)t->shape[j],
			    (long long)shape[i]);
		s *= t->shape[j];
	}
}

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

static void biter_init(BIter *it, int rank, const int64_t *shape, Tensor **ts, int nt)
{
	memset(it, 0, sizeof *it);
	it->nt = nt;
	int64_t n = numel_of(rank, shape);
	int same = 1;
	for (int k = 0; k < nt; k++)
		if (ts[k]->rank != rank || memcmp(ts[k]->shape, shape, rank * sizeof(int64_t)))
			same = 0;
	if (same || rank == 0) {
		/* one row over everything */
		for (int k = 0; k < nt; k++) {
			if (ts[k]->n != n && ts[k]->n != 1)
				ice("interp: broadcasting %lld elements to %lld",
				    (long long)ts[k]->n, (long long)n);
			it->step[k] = ts[k]->n == n ? 1 : 0;
		}
		it->inner = n;
		it->rows = n ? 1 : 0;
		return;
	}
	int64_t st[MAX_RANK];
	for (int k = 0; k < nt; k++) {
		bcast_strides(ts[k], rank, shape, st);
		memcpy(it->st[k], st, (size_t)rank * sizeof(int64_t));
		it->step[k] = st[rank - 1];
	}
	it->orank = rank - 1;
	memcpy(it->shape, shape, (size_t)rank * sizeof(int64_t));
	it->inner = shape[rank - 1];
	it->rows = it->inner ? n / it->inner : 0;
}

static void biter_next(BIter *it)
{
	for (int d = it->orank - 1; d >= 0; d--) {
		it->idx[d]++;
		for (int k = 0; k < it->nt; k++)
			it->off[k] += it->st[k][d];
		if (it->idx[d] < it->shape[d])
			return;
		for (int k = 0; k < it->nt; k++)
			it->off[k] -= it->st[k][d] * it->shape[d];
		it->idx[d] = 0;
	}
}

/* Split t around one axis: outer x len x inner. */
static void axis_split(const Tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
	if (axis < 0 || axis >= t->rank)
		ice("interp: axis %d of a rank-%d tensor", axis, t->rank);
	int64_t o = 1, i = 1;
	for (int d = 0; d < axis; d++)
		o *= t->shape[d];
	for (int d = axis + 1; d < t->rank; d++)
		i *= t->shape[d];
	*outer = o;
	*len = t->shape[axis];
	*inner = i;
}

/* ------------------------------------------------------------------ frames */

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
} Ctx;

typedef struct Frame {
	Ctx *c;
	Val *val;
	int *last;     /* index of the last node reading each node; INT_MAX for outputs */
	char *lazy;    /* transposes left to the matmuls that read them */
} Frame;

static Tensor *new_out(const Node *n)
{
	return tensor_new(n->dtype, n->rank, n->shape);
}

static int same_shape(const Tensor *t, const Node *n)
{
	return t->rank == n->rank && !memcmp(t->shape, n->shape, (size_t)n->rank * sizeof(int64_t));
}

static void need_shape(const Tensor *t, const Node *n, const char *what)
{
	if (!same_shape(t, n))
		ice("interp: %s %%%d: a value of rank %d does not match the node's shape", what,
		    n->id, t->rank);
}

static void need_float(const Node *n, const Tensor *t)
{
	if (!t->f || !is_float(n->dtype))
		ice("interp: %s %%%d needs float operands", op_name(n->op), n->id);
}

/* Input k of node n, to be overwritten in place as n's result, when this is its
 * last use, we own it, and it has the result's shape and storage. */
static Tensor *take_input(Frame *fr, Node *n, int k)
{
	Node *m = n->in[k];
	Val *v = &fr->val[m->id];
	if (!v->t || v->borrowed || fr->last[m->id] != n->id || !same_shape(v->t, n) ||
	    (v->t->f != NULL) != is_float(n->dtype))
		return NULL;
	Tensor *t = v->t;
	v->t = NULL;
	t->dtype = n->dtype;
	return t;
}

/* ------------------------------------------------------------------ elementwise */

static void unary_f(Op op, double *o, const double *x, int64_t n)
{
	int64_t k;
	switch (op) {
	case OP_NEG: for (k = 0; k < n; k++) o[k] = -x[k]; break;
	case OP_EXP: for (k = 0; k < n; k++) o[k] = exp(x[k]); break;
	case OP_LOG: for (k = 0; k < n; k++) o[k] = log(x[k]); break;
	case OP_SQRT: for (k = 0; k < n; k++) o[k] = sqrt(x[k]); break;
	case OP_RSQRT: for (k = 0; k < n; k++) o[k] = 1.0 / sqrt(x[k]); break;
	case OP_TANH: for (k = 0; k < n; k++) o[k] = tanh(x[k]); break;
	case OP_SIGMOID: for (k = 0; k < n; k++) o[k] = sigmoid(x[k]); break;
	case OP_RELU:
		/* NaN stays NaN, as with NumPy's maximum(x, 0) */
		for (k = 0; k < n; k++)
			o[k] = x[k] > 0 || isnan(x[k]) ? x[k] : 0.0;
		break;
	case OP_GELU:
		for (k = 0; k < n; k++)
			o[k] = 0.5 * x[k] * (1.0 + erf(x[k] * SQRT1_2));
		break;
	case OP_GELU_TANH:
		for (k = 0; k < n; k++) {
			double v = x[k];
			o[k] = 0.5 * v * (1.0 + tanh(SQRT_2_PI * (v + 0.044715 * v * v * v)));
		}
		break;
	case OP_SILU: for (k = 0; k < n; k++) o[k] = x[k] * sigmoid(x[k]); break;
	case OP_ERF: for (k = 0; k < n; k++) o[k] = erf(x[k]); break;
	case OP_ABS: for (k = 0; k < n; k++) o[k] = fabs(x[k]); break;
	case OP_SIN: for (k = 0; k < n; k++) o[k] = sin(x[k]); break;
	case OP_COS: for (k = 0; k < n; k++) o[k] = cos(x[k]); break;
	default: ice("interp: %s on floats", op_name(op));
	}
}

static void unary_i(Op op, int64_t *o, const int64_t *x, int64_t n)
{
	int64_t k;
	switch (op) {
	case OP_NEG: for (k = 0; k < n; k++) o[k] = wsub(0, x[k]); break;
	case OP_NOT: for (k = 0; k < n; k++) o[k] = !x[k]; break;
	case OP_RELU: for (k = 0; k < n; k++) o[k] = x[k] > 0 ? x[k] : 0; break;
	case OP_ABS: for (k = 0; k < n; k++) o[k] = x[k] < 0 ? wsub(0, x[k]) : x[k]; break;
	default: ice("interp: %s on integers", op_name(op));
	}
}

static Tensor *op_unary(Frame *fr, Node *n, Tensor *x)
{
	need_shape(x, n, op_name(n->op));
	if ((x->f != NULL) != is_float(n->dtype))
		ice("interp: %s %%%d changes storage", op_name(n->op), n->id);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	if (x->f)
		unary_f(n->op, o->f, x->f, x->n);
	else
		unary_i(n->op, o->i, x->i, x->n);
	fix_dtype(o);
	return o;
}

static Tensor *op_cast(Frame *fr, Node *n, Tensor *x)
{
	need_shape(x, n, "cast");
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	int64_t k, cnt = x->n;
	DType dt = n->dtype;
	if (x->f && o->f) {
		for (k = 0; k < cnt; k++)
			o->f[k] = x->f[k];
	} else if (x->f) {
		for (k = 0; k < cnt; k++)
			o->i[k] = f2i(x->f[k], dt);
	} else if (o->f) {
		for (k = 0; k < cnt; k++)
			o->f[k] = i2f(x->i[k], dt);
	} else {
		for (k = 0; k < cnt; k++)
			o->i[k] = x->i[k];
	}
	fix_dtype(o);
	return o;
}

static void binary_f(Op op, double *o, const double *a, int64_t sa, const double *b, int64_t sb,
                     int64_t n)
{
	int64_t k;
	switch (op) {
	case OP_ADD: for (k = 0; k < n; k++) o[k] = a[k * sa] + b[k * sb]; break;
	case OP_SUB: for (k = 0; k < n; k++) o[k] = a[k * sa] - b[k * sb]; break;
	case OP_MUL: for (k = 0; k < n; k++) o[k] = a[k * sa] * b[k * sb]; break;
	case OP_DIV: for (k = 0; k < n; k++) o[k] = a[k * sa] / b[k * sb]; break;
	case OP_MOD: for (k = 0; k < n; k++) o[k] = fmod_np(a[k * sa], b[k * sb]); break;
	case OP_POW: for (k = 0; k < n; k++) o[k] = pow(a[k * sa], b[k * sb]); break;
	case OP_MAX: for (k = 0; k < n; k++) o[k] = fmax_np(a[k * sa], b[k * sb]); break;
	case OP_MIN: for (k = 0; k < n; k++) o[k] = fmin_np(a[k * sa], b[k * sb]); break;
	default: ice("interp: %s on floats", op_name(op));
	}
}

static void binary_i(Op op, int64_t *o, const int64_t *a, int64_t sa, const int64_t *b,
                     int64_t sb, int64_t n)
{
	int64_t k;
	switch (op) {
	case OP_ADD: for (k = 0; k < n; k++) o[k] = wadd(a[k * sa], b[k * sb]); break;
	case OP_SUB: for (k = 0; k < n; k++) o[k] = wsub(a[k * sa], b[k * sb]); break;
	case OP_MUL: for (k = 0; k < n; k++) o[k] = wmul(a[k * sa], b[k * sb]); break;
	case OP_DIV: for (k = 0; k < n; k++) o[k] = ifloordiv(a[k * sa], b[k * sb]); break;
	case OP_MOD: for (k = 0; k < n; k++) o[k] = imod(a[k * sa], b[k * sb]); break;
	case OP_POW: for (k = 0; k < n; k++) o[k] = ipow(a[k * sa], b[k * sb]); break;
	case OP_MAX:
		for (k = 0; k < n; k++)
			o[k] = a[k * sa] >= b[k * sb] ? a[k * sa] : b[k * sb];
		break;
	case OP_MIN:
		for (k = 0; k < n; k++)
			o[k] = a[k * sa] <= b[k * sb] ? a[k * sa] : b[k * sb];
		break;
	case OP_AND: for (k = 0; k < n; k++) o[k] = a[k * sa] && b[k * sb]; break;
	case OP_OR: for (k = 0; k < n; k++) o[k] = a[k * sa] || b[k * sb]; break;
	default: ice("interp: %s on integers", op_name(op));
	}
}

/* Comparisons, written once for both storages. */
#define CMP_LOOP(o, a, sa, b, sb, n, OP)                                                        \
	for (int64_t k = 0; k < (n); k++)                                                       \
		(o)[k] = (a)[k * (sa)] OP (b)[k * (sb)];

#define CMP_SWITCH(op, o, a, sa, b, sb, n)                                                      \
	switch (op) {                                                                           \
	case OP_EQ: CMP_LOOP(o, a, sa, b, sb, n, ==) break;                                     \
	case OP_NE: CMP_LOOP(o, a, sa, b, sb, n, !=) break;                                     \
	case OP_LT: CMP_LOOP(o, a, sa, b, sb, n, <) break;                                      \
	case OP_LE: CMP_LOOP(o, a, sa, b, sb, n, <=) break;                                     \
	case OP_GT: CMP_LOOP(o, a, sa, b, sb, n, >) break;                                      \
	case OP_GE: CMP_LOOP(o, a, sa, b, sb, n, >=) break;                                     \
	default: ice("interp: %s is not a comparison", op_name(op));                            \
	}

static void compare_f(Op op, int64_t *o, const double *a, int64_t sa, const double *b, int64_t sb,
                      int64_t n)
{
	CMP_SWITCH(op, o, a, sa, b, sb, n)
}

static void compare_i(Op op, int64_t *o, const int64_t *a, int64_t sa, const int64_t *b,
                      int64_t sb, int64_t n)
{
	CMP_SWITCH(op, o, a, sa, b, sb, n)
}

static int is_compare(Op op)
{
	return op >= OP_EQ && op <= OP_GE;
}

static Tensor *op_binary(Frame *fr, Node *n, Tensor *a, Tensor *b)
{
	if ((a->f != NULL) != (b->f != NULL))
		ice("interp: %s %%%d mixes float and integer operands", op_name(n->op), n->id);
	int cmp = is_compare(n->op);
	if (cmp ? is_float(n->dtype) : (a->f != NULL) != is_float(n->dtype))
		ice("interp: %s %%%d has result dtype %d", op_name(n->op), n->id, (int)n->dtype);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = take_input(fr, n, 1);
	if (!o)
		o = new_out(n);
	Tensor *ts[2] = {a, b};
	BIter it;
	biter_init(&it, n->rank, n->shape, ts, 2);
	int64_t inner = it.inner, sa = it.step[0], sb = it.step[1];
	for (int64_t r = 0; r < it.rows; r++, biter_next(&it)) {
		int64_t oo = r * inner, ao = it.off[0], bo = it.off[1];
		if (cmp && a->f)
			compare_f(n->op, o->i + oo, a->f + ao, sa, b->f + bo, sb, inner);
		else if (cmp)
			compare_i(n->op, o->i + oo, a->i + ao, sa, b->i + bo, sb, inner);
		else if (a->f)
			binary_f(n->op, o->f + oo, a->f + ao, sa, b->f + bo, sb, inner);
		else
			binary_i(n->op, o->i + oo, a->i + ao, sa, b->i + bo, sb, inner);
	}
	fix_dtype(o);
	return o;
}

static Tensor *op_where(Frame *fr, Node *n, Tensor *c, Tensor *a, Tensor *b)
{
	if (c->f || (a->f != NULL) != (b->f != NULL) || (a->f != NULL) != is_float(n->dtype))
		ice("interp: where %%%d: operand storage", n->id);
	Tensor *o = take_input(fr, n, 1);
	if (!o)
		o = take_input(fr, n, 2);
	if (!o)
		o = new_out(n);
	Tensor *ts[3] = {c, a, b};
	BIter it;
	biter_init(&it, n->rank, n->shape, ts, 3);
	int64_t inner = it.inner, s0 = it.step[0], s1 = it.step[1], s2 = it.step[2];
	for (int64_t r = 0; r < it.rows; r++, biter_next(&it)) {
		const int64_t *cc = c->i + it.off[0];
		if (o->f) {
			double *oo = o->f + r * inner;
			const double *aa = a->f + it.off[1], *bb = b->f + it.off[2];
			for (int64_t k = 0; k < inner; k++)
				oo[k] = cc[k * s0] ? aa[k * s1] : bb[k * s2];
		} else {
			int64_t *oo = o->i + r * inner;
			const int64_t *aa = a->i + it.off[1], *bb = b->i + it.off[2];
			for (int64_t k = 0; k < inner; k++)
				oo[k] = cc[k * s0] ? aa[k * s1] : bb[k * s2];
		}
	}
	fix_dtype(o);
	return o;
}

/* Broadcast copy of x to the node's shape (OP_EXPAND). */
static Tensor *op_expand(Frame *fr, Node *n, Tensor *x)
{
	if ((x->f != NULL) != is_float(n->dtype))
		ice("interp: expand %%%d changes storage", n->id);
	Tensor *o = take_input(fr, n, 0);
	if (o)
		return o;
	o = new_out(n);
	BIter it;
	biter_init(&it, n->rank, n->shape, &x, 1);
	int64_t inner = it.inner, s = it.step[0];
	for (int64_t r = 0; r < it.rows; r++, biter_next(&it)) {
		if (o->f) {
			double *oo = o->f + r * inner;
			const double *xx = x->f + it.off[0];
			for (int64_t k = 0; k < inner; k++)
				oo[k] = xx[k * s];
		} else {
			int64_t *oo = o->i + r * inner;
			const int64_t *xx = x->i + it.off[0];
			for (int64_t k = 0; k < inner; k++)
				oo[k] = xx[k * s];
		}
	}
	return o;
}

/* ------------------------------------------------------------------ matmul */

/* Matmul on doubles: blocked and packed, in the classic BLIS shape. B is copied
 * in blocks of MM_KC rows x MM_NC columns into panels of MM_NR columns, A into
 * tiles of MM_MR rows, both k-major, so the micro-kernel reads both contiguously
 * and keeps an MM_MR x MM_NR tile of C in registers over a whole block of k. The
 * fixed-size inner loops are what lets the compiler vectorise them even at -O2. */
#define MM_MR 4
#define MM_NR 4
#define MM_KC 256
#define MM_NC 512

typedef struct MMBuf {
	double *ap; /* MM_KC x MM_MR */
	double *bp; /* MM_KC x MM_NC */
} MMBuf;

/* On x86-64 with glibc (ifunc), an AVX2 copy is chosen at load time where the CPU
 * has it: twice the width of the SSE2 baseline. Still no FMA, so both copies
 * compute bit-identical results. -DNESTC_NO_CLONES turns it off. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__) && !defined(NESTC_NO_CLONES)
__attribute__((target_clones("avx2", "default")))
#endif
static void mm_kernel(int64_t kc, const double *ap, const double *bp, double acc[MM_MR][MM_NR])
{
	/* spelled out so that the 16 sums live in registers */
	double c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
	double c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
	for (int64_t k = 0; k < kc; k++) {
		const double *a = ap + k * MM_MR, *b = bp + k * MM_NR;
		double b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
		double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
		c00 += a0 * b0, c01 += a0 * b1, c02 += a0 * b2, c03 += a0 * b3;
		c10 += a1 * b0, c11 += a1 * b1, c12 += a1 * b2, c13 += a1 * b3;
		c20 += a2 * b0, c21 += a2 * b1, c22 += a2 * b2, c23 += a2 * b3;
		c30 += a3 * b0, c31 += a3 * b1, c32 += a3 * b2, c33 += a3 * b3;
	}
	acc[0][0] = c00, acc[0][1] = c01, acc[0][2] = c02, acc[0][3] = c03;
	acc[1][0] = c10, acc[1][1] = c11, acc[1][2] = c12, acc[1][3] = c13;
	acc[2][0] = c20, acc[2][1] = c21, acc[2][2] = c22, acc[2][3] = c23;
	acc[3][0] = c30, acc[3][1] = c31, acc[3][2] = c32, acc[3][3] = c33;
}

/* One panel: rows k0 .. k0+kc of columns jb .. jb+NR of b, zero past column jend. */
static void mm_pack_b(const double *b, int bt, int64_t N, int64_t K, int64_t k0, int64_t kc,
                      int64_t jb, int64_t jend, double *dst)
{
	for (int64_t k = 0; k < kc; k++, dst += MM_NR)
		for (int j = 0; j < MM_NR; j++) {
			int64_t bi = bt ? (jb + j) * K + k0 + k : (k0 + k) * N + jb + j;
			dst[j] = jb + j < jend ? b[bi] : 0.0;
		}
}

/* c[M,N] = a[M,K] @ b[K,N], c zeroed by the caller; with bt, b is stored
 * transposed, as [N,K]. */
static void mm_f(int64_t M, int64_t N, int64_t K, const double *a, const double *b, int bt,
                 double *c, MMBuf *buf)
{
	if (N == 1) {
		for (int64_t i = 0; i < M; i++) {
			double s = 0;
			const double *ar = a + i * K;
			for (int64_t k = 0; k < K; k++)
				s += ar[k] * b[k];
			c[i] = s;
		}
		return;
	}
	if (M < MM_MR && bt) {
		/* a few rows: dot products of contiguous rows */
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++) {
				const double *ar = a + i * K, *bc = b + j * K;
				double s = 0;
				for (int64_t k = 0; k < K; k++)
					s += ar[k] * bc[k];
				c[i * N + j] = s;
			}
		return;
	}
	if (M < MM_MR) {
		/* a few rows: i-k-j along contiguous rows of b and c */
		for (int64_t i = 0; i < M; i++)
			for (int64_t k = 0; k < K; k++) {
				double x = a[i * K + k];
				const double *br = b + k * N;
				double *cr = c + i * N;
				for (int64_t j = 0; j < N; j++)
					cr[j] += x * br[j];
			}
		return;
	}
	if (!buf->ap) {
		buf->ap = xmalloc(MM_KC * MM_MR * sizeof(double));
		buf->bp = xmalloc(MM_KC * MM_NC * sizeof(double));
	}
	double *ap = buf->ap, *bp = buf->bp;
	for (int64_t k0 = 0; k0 < K; k0 += MM_KC) {
		int64_t kc = K - k0 < MM_KC ? K - k0 : MM_KC;
		for (int64_t j0 = 0; j0 < N; j0 += MM_NC) {
			int64_t nc = N - j0 < MM_NC ? N - j0 : MM_NC;
			/* panel p holds columns j0 + p*NR .. +NR, zero-padded past N */
			for (int64_t p = 0; p * MM_NR < nc; p++)
				mm_pack_b(b, bt, N, K, k0, kc, j0 + p * MM_NR, j0 + nc,
				          bp + p * kc * MM_NR);
			for (int64_t i0 = 0; i0 < M; i0 += MM_MR) {
				int64_t mr = M - i0 < MM_MR ? M - i0 : MM_MR;
				const double *as = a + i0 * K + k0;
				for (int64_t k = 0; k < kc; k++)
					for (int r = 0; r < MM_MR; r++)
						ap[k * MM_MR + r] = r < mr ? as[r * K + k] : 0.0;
				for (int64_t p = 0; p * MM_NR < nc; p++) {
					double acc[MM_MR][MM_NR];
					mm_kernel(kc, ap, bp + p * kc * MM_NR, acc);
					int64_t jb = j0 + p * MM_NR;
					int64_t nr = N - jb < MM_NR ? N - jb : MM_NR;
					for (int64_t r = 0; r < mr; r++)
						for (int64_t j = 0; j < nr; j++)
							c[(i0 + r) * N + jb + j] += acc[r][j];
				}
			}
		}
	}
}

static void mm_i(int64_t M, int64_t N, int64_t K, const int64_t *a, const int64_t *b, int bt,
                 int64_t *c)
{
	int64_t sk = bt ? 1 : N, sj = bt ? K : 1;
	for (int64_t i = 0; i < M; i++)
		for (int64_t k = 0; k < K; k++) {
			int64_t x = a[i * K + k];
			for (int64_t j = 0; j < N; j++)
				c[i * N + j] = wadd(c[i * N + j], wmul(x, b[k * sk + j * sj]));
		}
}

/* Batch strides of one matmul operand: its dims before the last `mat` (the matrix
 * dims, 0..2 of them) aligned right against the output's batch dims. */
static void mm_batch_strides(int rank, const int64_t *shape, int mat, int br,
                             const int64_t *bshape, int64_t matsize, int64_t *st)
{
	int tb = rank - mat;
	int64_t s = matsize;
	for (int d = br - 1; d >= 0; d--) {
		int j = d - (br - tb);
		if (j < 0) {
			st[d] = 0;
			continue;
		}
		if (shape[j] == bshape[d])
			st[d] = shape[j] == 1 ? 0 : s;
		else if (shape[j] == 1)
			st[d] = 0;
		else
			ice("interp: matmul batch dim %lld vs %lld", (long long)shape[j],
			    (long long)bshape[d]);
		s *= shape[j];
	}
}

/* With bt, B is the untransposed input of a transpose of its last two axes
 * (a lazy transpose: see lazy_transpose). */
static Tensor *op_matmul(Node *n, Tensor *A, Tensor *B, int bt)
{
	int ra = A->rank, rb = B->rank, R = n->rank;
	if (ra < 1 || rb < 1 || (A->f != NULL) != (B->f != NULL) ||
	    (A->f != NULL) != is_float(n->dtype) || (bt && rb < 2))
		ice("interp: matmul %%%d: operands of rank %d and %d", n->id, ra, rb);
	int64_t bsh[MAX_RANK];
	memcpy(bsh, B->shape, sizeof bsh);
	if (bt) {
		bsh[rb - 2] = B->shape[rb - 1];
		bsh[rb - 1] = B->shape[rb - 2];
	}
	int ma = ra >= 2 ? 2 : 1, mb = rb >= 2 ? 2 : 1;
	int64_t M = ra >= 2 ? A->shape[ra - 2] : 1, K = A->shape[ra - 1];
	int64_t Kb = rb >= 2 ? bsh[rb - 2] : bsh[0], N = rb >= 2 ? bsh[rb - 1] : 1;
	int br = R - (ra >= 2) - (rb >= 2);
	if (K != Kb || br < 0 || ra - ma > br || rb - mb > br || (ra >= 2 && n->shape[br] != M) ||
	    (rb >= 2 && n->shape[R - 1] != N))
		ice("interp: matmul %%%d: shapes do not match the node", n->id);
	int64_t sa[MAX_RANK], sb[MAX_RANK], idx[MAX_RANK] = {0};
	mm_batch_strides(ra, A->shape, ma, br, n->shape, M * K, sa);
	mm_batch_strides(rb, bsh, mb, br, n->shape, K * N, sb);
	Tensor *C = new_out(n);
	MMBuf buf = {NULL, NULL};
	int64_t nb = 1, aoff = 0, boff = 0;
	for (int d = 0; d < br; d++)
		nb *= n->shape[d];
	for (int64_t bi = 0; bi < nb; bi++) {
		if (C->f)
			mm_f(M, N, K, A->f + aoff, B->f + boff, bt, C->f + bi * M * N, &buf);
		else
			mm_i(M, N, K, A->i + aoff, B->i + boff, bt, C->i + bi * M * N);
		for (int d = br - 1; d >= 0; d--) {
			idx[d]++;
			aoff += sa[d];
			boff += sb[d];
			if (idx[d] < n->shape[d])
				break;
			aoff -= sa[d] * n->shape[d];
			boff -= sb[d] * n->shape[d];
			idx[d] = 0;
		}
	}
	free(buf.ap);
	free(buf.bp);
	fix_dtype(C);
	return C;
}

/* ------------------------------------------------------------------ reductions */

static Tensor *op_reduce(Node *n, Tensor *x)
{
	uint64_t mask = (uint64_t)n->a[0];
	int rank = x->rank;
	if (rank < 64 && (mask >> rank) != 0)
		ice("interp: %s %%%d: axis mask 0x%llx for rank %d", op_name(n->op), n->id,
		    (unsigned long long)mask, rank);
	if ((x->f != NULL) != is_float(n->dtype) || (n->op == OP_MEAN && !x->f))
		ice("interp: %s %%%d: dtype", op_name(n->op), n->id);
	/* where each input element lands in the output: 0 stride on reduced axes */
	int64_t ost[MAX_RANK], s = 1, count = 1;
	for (int d = rank - 1; d >= 0; d--) {
		if (mask >> d & 1) {
			ost[d] = 0;
			count *= x->shape[d];
		} else {
			ost[d] = s;
			s *= x->shape[d];
		}
	}
	Tensor *o = new_out(n);
	if (o->n != s)
		ice("interp: %s %%%d: %lld outputs for %lld kept elements", op_name(n->op), n->id,
		    (long long)o->n, (long long)s);
	Op op = n->op;
	/* identities; an empty amax/amin gives -inf/+inf (NumPy raises) */
	for (int64_t k = 0; k < o->n; k++) {
		if (o->f)
			o->f[k] = op == OP_AMAX ? -INFINITY : op == OP_AMIN ? INFINITY : 0.0;
		else
			o->i[k] = op == OP_AMAX ? INT64_MIN : op == OP_AMIN ? INT64_MAX : 0;
	}
	int64_t inner = rank ? x->shape[rank - 1] : 1;
	int64_t rows = inner ? x->n / inner : 0, istep = rank ? ost[rank - 1] : 0;
	int64_t idx[MAX_RANK] = {0}, base = 0;
	for (int64_t r = 0; r < rows; r++) {
		if (x->f) {
			const double *xr = x->f + r * inner;
			double *oo = o->f + base;
			switch (op) {
			case OP_SUM:
			case OP_MEAN:
				for (int64_t k = 0; k < inner; k++)
					oo[k * istep] += xr[k];
				break;
			case OP_AMAX: /* a NaN wins and stays */
				for (int64_t k = 0; k < inner; k++) {
					double *acc = oo + k * istep;
					if ((xr[k] > *acc || isnan(xr[k])) && !isnan(*acc))
						*acc = xr[k];
				}
				break;
			case OP_AMIN:
				for (int64_t k = 0; k < inner; k++) {
					double *acc = oo + k * istep;
					if ((xr[k] < *acc || isnan(xr[k])) && !isnan(*acc))
						*acc = xr[k];
				}
				break;
			default:
				ice("interp: reduction %s", op_name(op));
			}
		} else {
			const int64_t *xr = x->i + r * inner;
			int64_t *oo = o->i + base;
			switch (op) {
			case OP_SUM:
				for (int64_t k = 0; k < inner; k++)
					oo[k * istep] = wadd(oo[k * istep], xr[k]);
				break;
			case OP_AMAX:
				for (int64_t k = 0; k < inner; k++)
					if (xr[k] > oo[k * istep])
						oo[k * istep] = xr[k];
				break;
			case OP_AMIN:
				for (int64_t k = 0; k < inner; k++)
					if (xr[k] < oo[k * istep])
						oo[k * istep] = xr[k];
				break;
			default:
				ice("interp: reduction %s", op_name(op));
			}
		}
		for (int d = rank - 2; d >= 0; d--) {
			idx[d]++;
			base += ost[d];
			if (idx[d] < x->shape[d])
				break;
			base -= ost[d] * x->shape[d];
			idx[d] = 0;
		}
	}
	if (op == OP_MEAN)
		for (int64_t k = 0; k < o->n; k++)
			o->f[k] = count ? o->f[k] / (double)count : NAN;
	fix_dtype(o);
	return o;
}

static int single_axis(const Node *n, int rank)
{
	uint64_t mask = (uint64_t)n->a[0];
	for (int d = 0; d < rank; d++)
		if (mask == (uint64_t)1 << d)
			return d;
	ice("interp: %s %%%d: axis mask 0x%llx is not one axis of rank %d", op_name(n->op), n->id,
	    (unsigned long long)mask, rank);
}

static Tensor *op_argmax(Node *n, Tensor *x)
{
	int axis = single_axis(n, x->rank);
	int64_t outer, len, inner;
	axis_split(x, axis, &outer, &len, &inner);
	Tensor *o = new_out(n);
	if (o->f || o->n != outer * inner)
		ice("interp: argmax %%%d: result", n->id);
	for (int64_t a = 0; a < outer; a++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t best = 0, base = a * len * inner + i;
			/* first maximum wins; a NaN is the maximum, as in NumPy */
			if (x->f) {
				const double *xs = x->f + base;
				for (int64_t l = 1; l < len && !isnan(xs[best * inner]); l++) {
					double v = xs[l * inner];
					if (v > xs[best * inner] || isnan(v))
						best = l;
				}
			} else {
				const int64_t *xs = x->i + base;
				for (int64_t l = 1; l < len; l++)
					if (xs[l * inner] > xs[best * inner])
						best = l;
			}
			o->i[a * inner + i] = best;
		}
	return o;
}

/* Numerically stable: exp(x - max) never overflows. */
static Tensor *op_softmax(Frame *fr, Node *n, Tensor *x)
{
	need_float(n, x);
	need_shape(x, n, op_name(n->op));
	int64_t outer, len, inner;
	if (n->a[0] < 0 || n->a[0] >= x->rank)
		ice("interp: softmax %%%d axis %lld", n->id, (long long)n->a[0]);
	axis_split(x, (int)n->a[0], &outer, &len, &inner);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	int log_sm = n->op == OP_LOG_SOFTMAX;
	for (int64_t a = 0; a < outer; a++)
		for (int64_t i = 0; i < inner; i++) {
			const double *xs = x->f + a * len * inner + i;
			double *os = o->f + a * len * inner + i;
			double m = -INFINITY, sum = 0;
			for (int64_t l = 0; l < len; l++)
				m = fmax_np(m, xs[l * inner]);
			if (log_sm) {
				for (int64_t l = 0; l < len; l++)
					sum += exp(xs[l * inner] - m);
				double ls = log(sum);
				for (int64_t l = 0; l < len; l++)
					os[l * inner] = xs[l * inner] - m - ls;
			} else {
				for (int64_t l = 0; l < len; l++) {
					double e = exp(xs[l * inner] - m);
					os[l * inner] = e;
					sum += e;
				}
				for (int64_t l = 0; l < len; l++)
					os[l * inner] /= sum;
			}
		}
	fix_dtype(o);
	return o;
}

static Tensor *op_norm(Frame *fr, Node *n, Tensor **in)
{
	Tensor *x = in[0], *w = in[1], *b = n->op == OP_LAYERNORM ? in[2] : NULL;
	need_float(n, x);
	need_shape(x, n, op_name(n->op));
	if (x->rank < 1)
		ice("interp: %s %%%d of a 0-d tensor", op_name(n->op), n->id);
	int64_t D = x->shape[x->rank - 1], rows = D ? x->n / D : 0;
	if (!w->f || w->n != D || (b && (!b->f || b->n != D)))
		ice("interp: %s %%%d: weight/bias size", op_name(n->op), n->id);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	double eps = n->fval;
	for (int64_t r = 0; r < rows; r++) {
		const double *xr = x->f + r * D;
		double *orow = o->f + r * D;
		if (b) {
			double mean = 0, var = 0;
			for (int64_t k = 0; k < D; k++)
				mean += xr[k];
			mean /= (double)D;
			for (int64_t k = 0; k < D; k++)
				var += (xr[k] - mean) * (xr[k] - mean);
			var /= (double)D; /* biased, like PyTorch */
			double inv = 1.0 / sqrt(var + eps);
			for (int64_t k = 0; k < D; k++)
				orow[k] = (xr[k] - mean) * inv * w->f[k] + b->f[k];
		} else {
			double ms = 0;
			for (int64_t k = 0; k < D; k++)
				ms += xr[k] * xr[k];
			ms /= (double)D;
			double inv = 1.0 / sqrt(ms + eps);
			for (int64_t k = 0; k < D; k++)
				orow[k] = xr[k] * inv * w->f[k];
		}
	}
	fix_dtype(o);
	return o;
}

/* ------------------------------------------------------------------ data movement */

static void copy_elems(Tensor *o, int64_t oo, const Tensor *x, int64_t xo, int64_t cnt)
{
	if (o->f)
		memcpy(o->f + oo, x->f + xo, (size_t)cnt * sizeof(double));
	else
		memcpy(o->i + oo, x->i + xo, (size_t)cnt * sizeof(int64_t));
}

static void need_storage(const Node *n, const Tensor *x)
{
	if ((x->f != NULL) != is_float(n->dtype))
		ice("interp: %s %%%d changes storage", op_name(n->op), n->id);
}

static Tensor *op_reshape(Frame *fr, Node *n, Tensor *x)
{
	need_storage(n, x);
	if (numel_of(n->rank, n->shape) != x->n)
		ice("interp: reshape %%%d changes the element count", n->id);
	Node *m = n->in[0];
	Val *v = &fr->val[m->id];
	if (v->t == x && !v->borrowed && fr->last[m->id] == n->id) {
		/* last use: keep the data, change the shape */
		v->t = NULL;
		x->dtype = n->dtype;
		x->rank = n->rank;
		memcpy(x->shape, n->shape, sizeof x->shape);
		return x;
	}
	Tensor *o = new_out(n);
	copy_elems(o, 0, x, 0, x->n);
	return o;
}

static Tensor *op_transpose(Node *n, Tensor *x)
{
	need_storage(n, x);
	int R = n->rank;
	if (x->rank != R)
		ice("interp: transpose %%%d rank", n->id);
	int64_t xs[MAX_RANK], st[MAX_RANK], s = 1;
	int seen = 0;
	for (int d = R - 1; d >= 0; d--) {
		xs[d] = s;
		s *= x->shape[d];
	}
	for (int d = 0; d < R; d++) {
		int64_t p = n->a[d];
		if (p < 0 || p >= R || (seen >> p & 1) || x->shape[p] != n->shape[d])
			ice("interp: transpose %%%d: bad perm", n->id);
		seen |= 1 << p;
		st[d] = xs[p];
	}
	Tensor *o = new_out(n);
	if (o->n == 0)
		return o;
	/* Rank-2 view with the inner output axis split off, walked in 32 x 32 tiles so
	 * both the reads (strided) and the writes stay within cache. */
	if (R >= 2 && st[R - 1] != 1) {
		int64_t rows = n->shape[R - 2], cols = n->shape[R - 1];
		int64_t rs = st[R - 2], cs = st[R - 1];
		int64_t nb = o->n / (rows * cols), idx[MAX_RANK] = {0}, base = 0;
		for (int64_t bi = 0; bi < nb; bi++) {
			int64_t ob = bi * rows * cols;
			for (int64_t r0 = 0; r0 < rows; r0 += 32)
				for (int64_t c0 = 0; c0 < cols; c0 += 32) {
					int64_t r1 = r0 + 32 < rows ? r0 + 32 : rows;
					int64_t c1 = c0 + 32 < cols ? c0 + 32 : cols;
					for (int64_t r = r0; r < r1; r++)
						for (int64_t c = c0; c < c1; c++) {
							int64_t xo = base + r * rs + c * cs;
							if (o->f)
								o->f[ob + r * cols + c] = x->f[xo];
							else
								o->i[ob + r * cols + c] = x->i[xo];
						}
				}
			for (int d = R - 3; d >= 0; d--) {
				idx[d]++;
				base += st[d];
				if (idx[d] < n->shape[d])
					break;
				base -= st[d] * n->shape[d];
				idx[d] = 0;
			}
		}
		return o;
	}
	/* inner axis unmoved: copy contiguous rows */
	int64_t inner = R ? n->shape[R - 1] : 1, rows = o->n / inner;
	int64_t idx[MAX_RANK] = {0}, base = 0;
	for (int64_t r = 0; r < rows; r++) {
		copy_elems(o, r * inner, x, base, inner);
		for (int d = R - 2; d >= 0; d--) {
			idx[d]++;
			base += st[d];
			if (idx[d] < n->shape[d])
				break;
			base -= st[d] * n->shape[d];
			idx[d] = 0;
		}
	}
	return o;
}

static Tensor *op_concat(Node *n, Tensor **in)
{
	int R = n->rank;
	int64_t ax = n->a[0];
	if (ax < 0 || ax >= R || n->nin < 1)
		ice("interp: concat %%%d axis %lld", n->id, (long long)ax);
	int64_t total = 0;
	for (int k = 0; k < n->nin; k++) {
		Tensor *x = in[k];
		need_storage(n, x);
		if (x->rank != R)
			ice("interp: concat %%%d: rank", n->id);
		for (int d = 0; d < R; d++)
			if (d != ax && x->shape[d] != n->shape[d])
				ice("interp: concat %%%d: dim %d", n->id, d);
		total += x->shape[ax];
	}
	if (total != n->shape[ax])
		ice("interp: concat %%%d: axis size", n->id);
	Tensor *o = new_out(n);
	int64_t outer = 1, inner = 1;
	for (int d = 0; d < ax; d++)
		outer *= n->shape[d];
	for (int d = (int)ax + 1; d < R; d++)
		inner *= n->shape[d];
	int64_t orow = n->shape[ax] * inner, at = 0;
	for (int k = 0; k < n->nin; k++) {
		int64_t chunk = in[k]->shape[ax] * inner;
		for (int64_t a = 0; a < outer; a++)
			copy_elems(o, a * orow + at, in[k], a * chunk, chunk);
		at += chunk;
	}
	return o;
}

static Tensor *op_slice(Node *n, Tensor *x)
{
	need_storage(n, x);
	int R = n->rank;
	if (x->rank != R)
		ice("interp: slice %%%d: rank", n->id);
	int64_t xs[MAX_RANK], s = 1, base = 0;
	for (int d = R - 1; d >= 0; d--) {
		if (n->a[d] < 0 || n->shape[d] > x->shape[d] - n->a[d])
			ice("interp: slice %%%d: axis %d out of bounds", n->id, d);
		xs[d] = s;
		base += n->a[d] * s;
		s *= x->shape[d];
	}
	Tensor *o = new_out(n);
	int64_t inner = R ? n->shape[R - 1] : 1, rows = inner ? o->n / inner : 0;
	int64_t idx[MAX_RANK] = {0};
	for (int64_t r = 0; r < rows; r++) {
		copy_elems(o, r * inner, x, base, inner);
		for (int d = R - 2; d >= 0; d--) {
			idx[d]++;
			base += xs[d];
			if (idx[d] < n->shape[d])
				break;
			base -= xs[d] * n->shape[d];
			idx[d] = 0;
		}
	}
	return o;
}

/* A run-time error at a node: with its source position when the node has one. */
static void runtime_error(Program *p, Loc loc, const char *msg)
{
	if (p && p->src && p->src->line_start && loc.off >= 0 && loc.end > loc.off &&
	    (size_t)loc.off <= p->src->len) {
		Diag d = {0};
		d.src = p->src;
		d.out = stderr;
		error_at(&d, loc, "%s", msg);
		diag_free(&d);
	} else {
		fprintf(stderr, "nestc: error: %s\n", msg);
	}
}

static Tensor *op_gather(Frame *fr, Node *n, Tensor *tab, Tensor *idx)
{
	need_storage(n, tab);
	if (idx->f || tab->rank < 1 || n->rank != idx->rank + tab->rank - 1 ||
	    memcmp(n->shape, idx->shape, (size_t)idx->rank * sizeof(int64_t)) ||
	    memcmp(n->shape + idx->rank, tab->shape + 1, (size_t)(tab->rank - 1) * sizeof(int64_t)))
		ice("interp: gather %%%d: shapes", n->id);
	int64_t rows = tab->shape[0], inner = 1;
	for (int d = 1; d < tab->rank; d++)
		inner *= tab->shape[d];
	for (int64_t k = 0; k < idx->n; k++) {
		int64_t v = idx->i[k];
		if (v < 0 || v >= rows) {
			char msg[128];
			snprintf(msg, sizeof msg, "gather index %lld out of range [0, %lld)",
			         (long long)v, (long long)rows);
			runtime_error(fr->c->p, n->loc, msg);
			return NULL;
		}
	}
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < idx->n; k++)
		copy_elems(o, k * inner, tab, idx->i[k] * inner, inner);
	return o;
}

static Tensor *op_causal_mask(Frame *fr, Node *n, Tensor *x)
{
	need_float(n, x);
	need_shape(x, n, "causal_mask");
	if (x->rank < 2)
		ice("interp: causal_mask %%%d of rank %d", n->id, x->rank);
	Tensor *o = take_input(fr, n, 0);
	if (!o) {
		o = new_out(n);
		copy_elems(o, 0, x, 0, x->n);
	}
	int64_t T1 = x->shape[x->rank - 2], T2 = x->shape[x->rank - 1];
	int64_t nb = T1 && T2 ? x->n / (T1 * T2) : 0;
	for (int64_t b = 0; b < nb; b++)
		for (int64_t i = 0; i < T1; i++)
			for (int64_t j = i + 1; j < T2; j++)
				o->f[(b * T1 + i) * T2 + j] = -INFINITY;
	return o;
}

/* ------------------------------------------------------------------ convolution and pooling */

/* First and last output positions whose input position o*s - p + k lies in [0, size). */
static void conv_range(int64_t size, int64_t outsize, int64_t s, int64_t p, int64_t k,
                       int64_t *lo, int64_t *hi)
{
	int64_t t = p - k;
	*lo = t <= 0 ? 0 : (t + s - 1) / s;
	t = size - 1 + p - k;
	*hi = t < 0 ? -1 : t / s;
	if (*hi > outsize - 1)
		*hi = outsize - 1;
}

typedef struct ConvDims {
	int64_t H, W, OH, OW, sh, sw, ph, pw;
} ConvDims;

/* One kernel tap (kh, kw): output plane += weight * the input plane it sees,
 * over just the output positions whose input lies inside (no padding tests in
 * the inner loop). */
static void conv_tap(const ConvDims *d, Tensor *o, int64_t ob, const Tensor *x, int64_t xb,
                     const Tensor *w, int64_t wi, int64_t kh, int64_t kw)
{
	int64_t oh0, oh1, ow0, ow1, sw = d->sw;
	int64_t dx = kw - d->pw; /* the input column of output column ow is ow * sw + dx */
	conv_range(d->H, d->OH, d->sh, d->ph, kh, &oh0, &oh1);
	conv_range(d->W, d->OW, sw, d->pw, kw, &ow0, &ow1);
	for (int64_t oh = oh0; oh <= oh1; oh++) {
		int64_t xr = xb + (oh * d->sh - d->ph + kh) * d->W, orow = ob + oh * d->OW;
		if (o->f) {
			double wv = w->f[wi], *op = o->f + orow;
			const double *xp = x->f + xr;
			for (int64_t ow = ow0; ow <= ow1; ow++)
				op[ow] += wv * xp[ow * sw + dx];
		} else {
			int64_t wv = w->i[wi], *op = o->i + orow;
			const int64_t *xp = x->i + xr;
			for (int64_t ow = ow0; ow <= ow1; ow++)
				op[ow] = wadd(op[ow], wmul(wv, xp[ow * sw + dx]));
		}
	}
}

static Tensor *op_conv2d(Node *n, Tensor **in)
{
	Tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
	int64_t sh = n->a[0], sw = n->a[1], ph = n->a[2], pw = n->a[3], G = n->a[4];
	if (x->rank != 4 || w->rank != 4 || n->rank != 4 || sh < 1 || sw < 1 || ph < 0 || pw < 0 ||
	    G < 1)
		ice("interp: conv2d %%%d: attributes", n->id);
	int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
	int64_t OH = n->shape[2], OW = n->shape[3];
	int fl = is_float(n->dtype);
	if (Cg * G != C || O % G || n->shape[0] != N || n->shape[1] != O ||
	    OH != (H + 2 * ph - KH) / sh + 1 || OW != (W + 2 * pw - KW) / sw + 1 || OH < 0 ||
	    OW < 0 || (x->f != NULL) != fl || (w->f != NULL) != fl ||
	    (b && (b->n != O || (b->f != NULL) != fl)))
		ice("interp: conv2d %%%d: shapes", n->id);
	Tensor *o = new_out(n);
	ConvDims d = {H, W, OH, OW, sh, sw, ph, pw};
	int64_t Og = O / G, plane = OH * OW;
	for (int64_t no = 0; no < N * O; no++) {
		int64_t ni = no / O, oc = no % O, g = oc / Og, ob = no * plane;
		if (b)
			for (int64_t k = 0; k < plane; k++) {
				if (fl)
					o->f[ob + k] = b->f[oc];
				else
					o->i[ob + k] = b->i[oc];
			}
		for (int64_t c = 0; c < Cg; c++) {
			int64_t xb = (ni * C + g * Cg + c) * H * W;
			int64_t wb = (oc * Cg + c) * KH * KW;
			for (int64_t kh = 0; kh < KH; kh++)
				for (int64_t kw = 0; kw < KW; kw++)
					conv_tap(&d, o, ob, x, xb, w, wb + kh * KW + kw, kh, kw);
		}
	}
	fix_dtype(o);
	return o;
}

static Tensor *op_pool(Node *n, Tensor *x)
{
	int64_t KH = n->a[0], KW = n->a[1], sh = n->a[2], sw = n->a[3], ph = n->a[4], pw = n->a[5];
	int avg = n->op == OP_AVGPOOL2D;
	if (x->rank != 4 || n->rank != 4 || KH < 1 || KW < 1 || sh < 1 || sw < 1 || ph < 0 ||
	    pw < 0 || (avg && !x->f))
		ice("interp: %s %%%d: attributes", op_name(n->op), n->id);
	need_storage(n, x);
	int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t OH = n->shape[2], OW = n->shape[3];
	if (n->shape[0] != x->shape[0] || n->shape[1] != x->shape[1] ||
	    OH != (H + 2 * ph - KH) / sh + 1 || OW != (W + 2 * pw - KW) / sw + 1 || OH < 0 ||
	    OW < 0)
		ice("interp: %s %%%d: shapes", op_name(n->op), n->id);
	Tensor *o = new_out(n);
	for (int64_t p = 0; p < NC; p++)
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++) {
				int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
				int64_t oi = (p * OH + oh) * OW + ow, wlo = w0 < 0 ? 0 : w0;
				double facc = avg ? 0.0 : -INFINITY;
				int64_t iacc = INT64_MIN;
				for (int64_t ih = h0 < 0 ? 0 : h0; ih < h0 + KH && ih < H; ih++)
					for (int64_t iw = wlo; iw < w0 + KW && iw < W; iw++) {
						int64_t xi = (p * H + ih) * W + iw;
						if (avg)
							facc += x->f[xi];
						else if (x->f) {
							double v = x->f[xi];
							if ((v > facc || isnan(v)) && !isnan(facc))
								facc = v;
						} else if (x->i[xi] > iacc) {
							iacc = x->i[xi];
						}
					}
				if (avg)
					o->f[oi] = facc / (double)(KH * KW); /* padding counted */
				else if (o->f)
					o->f[oi] = facc;
				else
					o->i[oi] = iacc;
			}
	fix_dtype(o);
	return o;
}

static Tensor *op_global_avgpool(Node *n, Tensor *x)
{
	need_float(n, x);
	if (x->rank != 4 || n->rank != 4 || n->shape[0] != x->shape[0] ||
	    n->shape[1] != x->shape[1] || n->shape[2] != 1 || n->shape[3] != 1)
		ice("interp: global_avg_pool2d %%%d: shapes", n->id);
	Tensor *o = new_out(n);
	int64_t plane = x->shape[2] * x->shape[3];
	for (int64_t p = 0; p < o->n; p++) {
		double s = 0;
		for (int64_t k = 0; k < plane; k++)
			s += x->f[p * plane + k];
		o->f[p] = plane ? s / (double)plane : NAN;
	}
	fix_dtype(o);
	return o;
}

/* ------------------------------------------------------------------ creation */

static Tensor *op_fill(Node *n)
{
	if (n->op == OP_CONST && n->rank != 0)
		ice("interp: const %%%d of rank %d", n->id, n->rank);
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < o->n; k++) {
		if (o->f)
			o->f[k] = n->fval;
		else
			o->i[k] = n->ival;
	}
	fix_dtype(o);
	return o;
}

static Tensor *op_arange(Node *n)
{
	if (n->rank != 1)
		ice("interp: arange %%%d of rank %d", n->id, n->rank);
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < o->n; k++) {
		if (o->f)
			o->f[k] = i2f(k, n->dtype);
		else
			o->i[k] = k;
	}
	fix_dtype(o);
	return o;
}

/* ------------------------------------------------------------------ the graph walk */

static int run_graph(Ctx *c, Graph *g, Tensor **inputs, Tensor **outs);

static void need_inputs(const Node *n, int lo, int hi)
{
	if (n->nin < lo || n->nin > hi)
		ice("interp: %s %%%d has %d inputs", op_name(n->op), n->id, n->nin);
}

/* A graph input or param handed in by the caller: it must be what the node says. */
static void check_given(const Node *n, const Tensor *t, const char *what)
{
	if (!t)
		ice("interp: %s %lld is missing", what, (long long)n->a[0]);
	if (t->dtype != n->dtype || !same_shape(t, n) || (t->f != NULL) != is_float(t->dtype) ||
	    t->n != numel_of(t->rank, t->shape))
		ice("interp: %s %lld does not match node %%%d", what, (long long)n->a[0], n->id);
}

/* Computes node n (not input, param, call or result) from its input tensors.
 * NULL after a run-time error has been reported. */
static Tensor *eval_node(Frame *fr, Node *n, Tensor **in)
{
	switch (n->op) {
	case OP_CONST:
	case OP_FULL:
		need_inputs(n, 0, 0);
		return op_fill(n);
	case OP_ARANGE:
		need_inputs(n, 0, 0);
		return op_arange(n);
	case OP_NEG: case OP_NOT: case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT:
	case OP_TANH: case OP_SIGMOID: case OP_RELU: case OP_GELU: case OP_GELU_TANH:
	case OP_SILU: case OP_ERF: case OP_ABS: case OP_SIN: case OP_COS:
		need_inputs(n, 1, 1);
		return op_unary(fr, n, in[0]);
	case OP_CAST:
		need_inputs(n, 1, 1);
		return op_cast(fr, n, in[0]);
	case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MOD: case OP_POW:
	case OP_MAX: case OP_MIN: case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT:
	case OP_GE: case OP_AND: case OP_OR:
		need_inputs(n, 2, 2);
		return op_binary(fr, n, in[0], in[1]);
	case OP_WHERE:
		need_inputs(n, 3, 3);
		return op_where(fr, n, in[0], in[1], in[2]);
	case OP_MATMUL:
		need_inputs(n, 2, 2);
		return op_matmul(n, in[0], in[1], fr->val[n->in[1]->id].trans);
	case OP_SUM: case OP_MEAN: case OP_AMAX: case OP_AMIN:
		need_inputs(n, 1, 1);
		return op_reduce(n, in[0]);
	case OP_ARGMAX:
		need_inputs(n, 1, 1);
		return op_argmax(n, in[0]);
	case OP_SOFTMAX: case OP_LOG_SOFTMAX:
		need_inputs(n, 1, 1);
		return op_softmax(fr, n, in[0]);
	case OP_LAYERNORM:
		need_inputs(n, 3, 3);
		return op_norm(fr, n, in);
	case OP_RMSNORM:
		need_inputs(n, 2, 2);
		return op_norm(fr, n, in);
	case OP_RESHAPE:
		need_inputs(n, 1, 1);
		return op_reshape(fr, n, in[0]);
	case OP_TRANSPOSE:
		need_inputs(n, 1, 1);
		return op_transpose(n, in[0]);
	case OP_CONCAT:
		return op_concat(n, in);
	case OP_SLICE:
		need_inputs(n, 1, 1);
		return op_slice(n, in[0]);
	case OP_EXPAND:
		need_inputs(n, 1, 1);
		return op_expand(fr, n, in[0]);
	case OP_GATHER:
		need_inputs(n, 2, 2);
		return op_gather(fr, n, in[0], in[1]);
	case OP_CAUSAL_MASK:
		need_inputs(n, 1, 1);
		return op_causal_mask(fr, n, in[0]);
	case OP_CONV2D:
		need_inputs(n, 2, 3);
		return op_conv2d(n, in);
	case OP_MAXPOOL2D: case OP_AVGPOOL2D:
		need_inputs(n, 1, 1);
		return op_pool(n, in[0]);
	case OP_GLOBAL_AVGPOOL2D:
		need_inputs(n, 1, 1);
		return op_global_avgpool(n, in[0]);
	default:
		ice("interp: unexpected op %d at %%%d", (int)n->op, n->id);
	}
}

/* A transpose of the last two axes of a graph input or param, read only as the B
 * operand of matmuls, is never materialised: the matmul reads B transposed.
 * Borrowed, so it lives as long as the run (this is `x @ transpose(wte, [1, 0])`
 * of tied embeddings, where a copy would be the largest tensor of the model). */
static int lazy_transpose(const Node *n)
{
	if (n->op != OP_TRANSPOSE || n->nin != 1 || n->rank < 2 ||
	    (n->in[0]->op != OP_INPUT && n->in[0]->op != OP_PARAM))
		return 0;
	for (int d = 0; d < n->rank - 2; d++)
		if (n->a[d] != d)
			return 0;
	return n->a[n->rank - 2] == n->rank - 1 && n->a[n->rank - 1] == n->rank - 2;
}

static void free_val(Val *v)
{
	if (v->t && !v->borrowed)
		tensor_free(v->t);
	v->t = NULL;
	if (v->outs) {
		for (int k = 0; k < v->nouts; k++)
			tensor_free(v->outs[k]);
		free(v->outs);
		v->outs = NULL;
	}
}

/* Is result node r the last one in g to read output a[0] of its call? Then it may
 * take that tensor instead of copying it. */
static int last_result_reader(Graph *g, Node *r)
{
	for (int j = r->id + 1; j < g->nnodes; j++) {
		Node *m = g->nodes[j];
		if (m->op == OP_RESULT && m->nin == 1 && m->in[0] == r->in[0] && m->a[0] == r->a[0])
			return 0;
	}
	return 1;
}

static int run_graph(Ctx *c, Graph *g, Tensor **inputs, Tensor **outs)
{
	if (c->depth >= MAX_DEPTH)
		ice("interp: region calls nested more than %d deep", MAX_DEPTH);
	int nn = g->nnodes, maxin = 1, rc = 0;
	Frame fr = {c, xcalloc((size_t)nn + 1, sizeof(Val)),
	            xmalloc(((size_t)nn + 1) * sizeof(int)), xcalloc((size_t)nn + 1, 1)};
	char *other_use = xcalloc((size_t)nn + 1, 1); /* read by anything but a matmul's B */
	for (int i = 0; i < nn; i++) {
		Node *n = g->nodes[i];
		if (!n || n->id != i)
			ice("interp: graph %s: node %d has id %d", g->name ? g->name : "?", i,
			    n ? n->id : -1);
		fr.last[i] = i;
		if (n->nin > maxin)
			maxin = n->nin;
		for (int k = 0; k < n->nin; k++) {
			Node *m = n->in[k];
			if (!m || m->id < 0 || m->id >= i || g->nodes[m->id] != m)
				ice("interp: graph %s: %%%d reads a node that is not before it",
				    g->name ? g->name : "?", i);
			fr.last[m->id] = i;
			if (n->op != OP_MATMUL || k != 1)
				other_use[m->id] = 1;
		}
	}
	for (int k = 0; k < g->noutputs; k++) {
		Node *m = g->outputs[k];
		if (!m || m->id < 0 || m->id >= nn || g->nodes[m->id] != m || m->op == OP_CALL)
			ice("interp: graph %s: bad output %d", g->name ? g->name : "?", k);
		fr.last[m->id] = INT_MAX;
		other_use[m->id] = 1;
	}
	for (int i = 0; i < nn; i++)
		fr.lazy[i] = !other_use[i] && lazy_transpose(g->nodes[i]);
	free(other_use);
	Tensor **in = xcalloc((size_t)maxin, sizeof(Tensor *));
	c->depth++;
	for (int i = 0; i < nn && rc == 0; i++) {
		Node *n = g->nodes[i];
		Val *v = &fr.val[i];
		if (n->op != OP_RESULT)
			for (int k = 0; k < n->nin; k++) {
				in[k] = fr.val[n->in[k]->id].t;
				if (!in[k])
					ice("interp: %%%d reads %%%d, which has no value", i,
					    n->in[k]->id);
			}
		switch (n->op) {
		case OP_INPUT:
			if (n->a[0] < 0 || n->a[0] >= g->ninputs)
				ice("interp: input %lld of %d", (long long)n->a[0], g->ninputs);
			v->t = inputs[n->a[0]];
			v->borrowed = 1;
			check_given(n, v->t, "input");
			break;
		case OP_PARAM:
			if (!c->p || n->a[0] < 0 || n->a[0] >= c->p->nparams)
				ice("interp: param %lld out of range", (long long)n->a[0]);
			v->t = c->params[n->a[0]];
			v->borrowed = 1;
			check_given(n, v->t, "param");
			break;
		case OP_CALL: {
			Graph *cg = n->callee;
			if (!cg || cg->ninputs != n->nin)
				ice("interp: call %%%d: %d arguments", i, n->nin);
			v->nouts = cg->noutputs;
			v->outs = xcalloc((size_t)cg->noutputs + 1, sizeof(Tensor *));
			rc = run_graph(c, cg, in, v->outs);
			break;
		}
		case OP_TRANSPOSE:
			if (!fr.lazy[i]) {
				v->t = eval_node(&fr, n, in);
				break;
			}
			if (in[0]->dtype != n->dtype || in[0]->rank != n->rank ||
			    memcmp(in[0]->shape, n->shape, (n->rank - 2) * sizeof(int64_t)) ||
			    in[0]->shape[n->rank - 2] != n->shape[n->rank - 1] ||
			    in[0]->shape[n->rank - 1] != n->shape[n->rank - 2])
				ice("interp: transpose %%%d: shapes", i);
			v->t = in[0];
			v->borrowed = 1;
			v->trans = 1;
			break;
		case OP_RESULT: {
			Node *call = n->nin == 1 ? n->in[0] : NULL;
			Val *cv = call ? &fr.val[call->id] : NULL;
			if (!call || call->op != OP_CALL || !cv->outs || n->a[0] < 0 ||
			    n->a[0] >= cv->nouts || !cv->outs[n->a[0]])
				ice("interp: result %%%d", i);
			Tensor *t = cv->outs[n->a[0]];
			if (t->dtype != n->dtype || !same_shape(t, n))
				ice("interp: result %%%d does not match the callee's output", i);
			if (last_result_reader(g, n)) {
				v->t = t;
				cv->outs[n->a[0]] = NULL;
			} else {
				v->t = tensor_copy(t);
			}
			break;
		}
		default:
			v->t = eval_node(&fr, n, in);
			if (!v->t)
				rc = -1;
			else if (v->t->dtype != n->dtype || !same_shape(v->t, n))
				ice("interp: %s %%%d produced the wrong shape", op_name(n->op), i);
			break;
		}
		if (rc)
			break;
		/* free what nobody reads any more */
		for (int k = 0; k < n->nin; k++) {
			int j = n->in[k]->id;
			if (fr.last[j] == i)
				free_val(&fr.val[j]);
		}
		if (fr.last[i] == i)
			free_val(v);
	}
	c->depth--;
	if (rc == 0) {
		for (int k = 0; k < g->noutputs; k++) {
			Val *v = &fr.val[g->outputs[k]->id];
			if (!v->t)
				ice("interp: output %d has no value", k);
			if (v->borrowed) {
				outs[k] = tensor_copy(v->t);
			} else {
				outs[k] = v->t; /* hand it over; later uses of the same node copy */
				v->borrowed = 1;
			}
		}
	}
	for (int i = 0; i < nn; i++)
		free_val(&fr.val[i]);
	free(in);
	free(fr.val);
	free(fr.last);
	free(fr.lazy);
	return rc;
}

int interp_run(Program *p, Graph *g, Tensor **inputs, Tensor **params, Tensor **outs)
{
	Ctx c = {p, params, 0};
	for (int k = 0; k < g->noutputs; k++)
		outs[k] = NULL;
	return run_graph(&c, g, inputs, outs);
}

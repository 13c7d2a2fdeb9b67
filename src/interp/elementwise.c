/* interp/elementwise.c - the interpreter's elementwise kernels: unary ops, casts,
 * binary arithmetic, comparisons, where, and expand (a broadcast copy).
 *
 * Casts from float to integer truncate toward zero (NumPy's astype); where
 * NumPy is undefined we define: NaN -> 0, values beyond the target's range
 * (and +-inf) saturate to its minimum or maximum. Float to bool is x != 0
 * (NaN -> true). Integer pow with a negative exponent gives 1/b^e truncated
 * (1 for b == 1, +-1 for b == -1, else 0) where NumPy raises.
 */
#include "interp.h"

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

/* NumPy's minimum: a NaN in either operand wins (fmax_np: interp.h). */
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
	case OP_ROUND_BF16: for (k = 0; k < n; k++) o[k] = round_bf16((float)x[k]); break;
	case OP_FLOOR: for (k = 0; k < n; k++) o[k] = floor(x[k]); break;
	case OP_ASIN: for (k = 0; k < n; k++) o[k] = asin(x[k]); break;
	case OP_ACOS: for (k = 0; k < n; k++) o[k] = acos(x[k]); break;
	case OP_ATAN: for (k = 0; k < n; k++) o[k] = atan(x[k]); break;
	case OP_HARDSWISH: /* comparisons, not fmin and fmax, which would drop a NaN */
		for (k = 0; k < n; k++) {
			/* equivalent mutant [cmp > -> >=]: at x + 3 == 6 both give 6 */
			o[k] = x[k] * (x[k] + 3 < 0 ? 0 : x[k] + 3 > 6 ? 6 : x[k] + 3) / 6;
		}
		break;
	case OP_CEIL: for (k = 0; k < n; k++) o[k] = ceil(x[k]); break;
	/* the default rounding mode: to nearest, ties to even */
	case OP_ROUND: for (k = 0; k < n; k++) o[k] = nearbyint(x[k]); break;
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

Tensor *op_unary(Frame *fr, Node *n, Tensor *x)
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

Tensor *op_cast(Frame *fr, Node *n, Tensor *x)
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
	case OP_FMOD: for (k = 0; k < n; k++) o[k] = fmod(a[k * sa], b[k * sb]); break;
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
	case OP_FMOD:
		for (k = 0; k < n; k++)
			o[k] = b[k * sb] == 0 || b[k * sb] == -1 ? 0 : a[k * sa] % b[k * sb];
		break;
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

Tensor *op_binary(Frame *fr, Node *n, Tensor *a, Tensor *b)
{
	if ((a->f != NULL) != (b->f != NULL))
		ice("interp: %s %%%d mixes float and integer operands", op_name(n->op), n->id);
	int cmp = op_info[n->op].cls == OPC_COMPARE;
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

Tensor *op_where(Frame *fr, Node *n, Tensor *c, Tensor *a, Tensor *b)
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
Tensor *op_expand(Frame *fr, Node *n, Tensor *x)
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


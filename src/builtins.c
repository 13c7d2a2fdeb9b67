/* builtins.c - the builtin functions: the table of their names, the dispatch
 * of a call to its rule, and the rules of the elementwise, reduction, norm,
 * shape and creation builtins: the arguments they take (args.c), the shapes
 * and dtypes of their results and the nodes they make (or the compile-time
 * value, for the scalar ones). Layers are in builtins_nn.c, indexing and
 * scans in builtins_index.c. They receive their arguments already evaluated
 * (Args, eval.c) and are leaves: they make nodes through values.c and call
 * back into nothing above. */
#include "nestc.h"

#include <math.h>
#include <string.h>

static const char *const builtins[] = {
	"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu",
	"erf", "abs", "sin", "cos", "pow", "maximum", "minimum", "where",
	"f32", "f64", "i32", "i64", "bool", "f16", "bf16", "i8", "u8", "i16", "u16", /* issue 36 */
	"sum", "mean", "amax", "amin", "argmax", "softmax", "log_softmax",
	"layernorm", "rmsnorm",
	"reshape", "transpose", "concat", "split", "expand", "unsqueeze", "squeeze",
	"arange", "zeros", "ones", "full", "causal_mask",
	"conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
	"topk", "take_along_axis", "cumsum",
	"linear", "flatten", "group_norm", /* issue #10: PyTorch's nn layers */
	"conv_transpose2d", "interpolate", "batch_norm",
	"round_bf16", /* issue #11: ONNX's bfloat16 */
	"floor", "ceil", "round", "fmod", "prod", "asin", "acos", "atan",
	"hardswish", /* issue #38 */
	NULL,
};

int is_builtin(const char *name)
{
	for (int i = 0; builtins[i]; i++)
		if (!strcmp(builtins[i], name))
			return 1;
	return 0;
}

/* Builtins added after models were written with functions of the same names
 * (`fn linear` in samples/mlp.nest): a model's own top-level definition of
 * one of these takes its place instead of being an error. */
static const char *const shadowable[] = {
	"linear", "flatten", "group_norm", "batch_norm", "conv_transpose2d", "interpolate",
	"topk", "take_along_axis", "cumsum", /* issue #10 */
	"round_bf16",
	"floor", "ceil", "round", "fmod", "prod", "asin", "acos", "atan",
	"hardswish",
	NULL,
};

int builtin_shadowable(const char *name)
{
	for (int i = 0; shadowable[i]; i++)
		if (!strcmp(shadowable[i], name))
			return 1;
	return 0;
}

/* Shape lists are dimensions: their divisions must be exact. */
int builtin_dim_arg(const char *name, int pos)
{
	return ((!strcmp(name, "reshape") || !strcmp(name, "expand")) && pos == 1) ||
	       ((!strcmp(name, "zeros") || !strcmp(name, "ones") || !strcmp(name, "full")) && pos == 0);
}

/* ---- the builtins ---- */

static int reduce_axes(LowerCtx *x, Args *a, Node *t, int64_t *mask, int dflt_all, int64_t dflt_axis)
{
	Value *v = opt_arg(a, "axis");
	Loc loc = opt_loc(a, "axis");
	if (!v && a->npos > 1) {
		v = a->pos[1];
		loc = a->posloc[1];
	}
	*mask = 0;
	if (!v) {
		if (dflt_all) {
			*mask = t->rank ? ((int64_t)1 << t->rank) - 1 : 0;
			return 1;
		}
		int ax;
		if (!norm_axis(x, dflt_axis, t->rank, a->call->loc, &ax))
			return 0;
		*mask = (int64_t)1 << ax;
		return 1;
	}
	int64_t axes[MAX_RANK + 1];
	int n;
	if (!int_list(x, v, loc, "axis", axes, MAX_RANK, &n, 1))
		return 0;
	for (int i = 0; i < n; i++) {
		int ax;
		if (!norm_axis(x, axes[i], t->rank, loc, &ax))
			return 0;
		if (*mask & ((int64_t)1 << ax)) {
			error_at(x->d, loc, "axis %d is listed twice", ax);
			return 0;
		}
		*mask |= (int64_t)1 << ax;
	}
	return 1;
}

static Value *b_reduce(LowerCtx *x, Args *a, Op op)
{
	static const char *const allowed[] = {"axis", "keepdim", NULL};
	if (!check_arity(x, a, 1, 2, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t mask;
	int keep;
	if (!reduce_axes(x, a, t, &mask, op != OP_ARGMAX, -1) || !bool_opt(x, a, "keepdim", 0, &keep))
		return VERR;
	if (op == OP_MEAN && !float_tensor(x, a, t))
		return VERR;
	if (t->dtype == DT_BOOL && op != OP_ARGMAX) {
		error_at(x->d, a->call->loc, "%s() needs a numeric tensor, not %s", a->fname, nstr(x, t));
		return VERR;
	}
	if (op == OP_ARGMAX && __builtin_popcountll((unsigned long long)mask) != 1) {
		error_at(x->d, a->call->loc, "argmax() takes exactly one axis");
		return VERR;
	}
	/* a sum over no elements is 0; a maximum, minimum, position or mean of
	 * none is undefined (NumPy raises) unless no result element asks for one */
	int64_t kept = 1, reduced = 1;
	for (int i = 0; i < t->rank; i++)
		if (mask & ((int64_t)1 << i))
			reduced = reduced && t->shape[i];
		else
			kept = kept && t->shape[i];
	if (op != OP_SUM && op != OP_PROD && !reduced && kept) {
		error_at(x->d, a->call->loc, "%s() over an axis of size 0 of %s: the %s of no elements is undefined",
		         a->fname, nstr(x, t), op == OP_MEAN ? "mean" : op == OP_ARGMAX ? "position of the maximum"
		                                   : op == OP_AMAX ? "maximum" : "minimum");
		return VERR;
	}
	int64_t shape[MAX_RANK];
	int r = 0;
	for (int i = 0; i < t->rank; i++) {
		if (mask & ((int64_t)1 << i)) {
			if (keep)
				shape[r++] = 1;
		} else {
			shape[r++] = t->shape[i];
		}
	}
	Node *n = mk_node(x, op, op == OP_ARGMAX ? DT_I64 : t->dtype, r, shape, a->call->loc);
	node_add_input(x->p, n, t);
	n->a[0] = mask;
	n->a[1] = keep;
	return vtensor(x, n);
}

static double ct_math(const char *f, double v)
{
	if (!strcmp(f, "exp")) return exp(v);
	if (!strcmp(f, "log")) return log(v);
	if (!strcmp(f, "sqrt")) return sqrt(v);
	if (!strcmp(f, "rsqrt")) return 1.0 / sqrt(v);
	if (!strcmp(f, "tanh")) return tanh(v);
	if (!strcmp(f, "sigmoid")) return 1.0 / (1.0 + exp(-v));
	if (!strcmp(f, "erf")) return erf(v);
	if (!strcmp(f, "sin")) return sin(v);
	if (!strcmp(f, "cos")) return cos(v);
	if (!strcmp(f, "asin")) return asin(v);
	if (!strcmp(f, "acos")) return acos(v);
	if (!strcmp(f, "atan")) return atan(v);
	if (!strcmp(f, "abs")) return fabs(v);
	if (!strcmp(f, "round_bf16")) return round_bf16((float)v);
	if (!strcmp(f, "relu")) return v > 0 ? v : 0;
	if (!strcmp(f, "silu")) return v / (1.0 + exp(-v));
	if (!strcmp(f, "hardswish")) return v * fmin(fmax(v + 3, 0), 6) / 6;
	if (!strcmp(f, "gelu")) return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
	if (!strcmp(f, "gelu_tanh"))
		return 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
	ice("ct_math: %s", f);
}

static Value *b_unary(LowerCtx *x, Args *a, Op op)
{
	if (!check_arity(x, a, 1, 1, NULL))
		return VERR;
	Value *v = a->pos[0];
	if (v->kind == V_INT || v->kind == V_FLOAT) {
		if (op == OP_FLOOR || op == OP_CEIL || op == OP_ROUND) {
			/* of a number, an integer (as Python's math.floor and round),
			 * so that it can size a dimension */
			if (v->kind == V_INT)
				return v;
			double r = op == OP_FLOOR ? floor(v->f) : op == OP_CEIL ? ceil(v->f) : nearbyint(v->f);
			if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0)) {
				error_at(x->d, a->call->loc, "%s() of %g is not an integer nestc can hold", a->fname, v->f);
				return VERR;
			}
			return vint(x, (int64_t)r);
		}
		if ((op == OP_ABS || op == OP_RELU) && v->kind == V_INT) {
			if (v->i == INT64_MIN) {
				error_at(x->d, a->call->loc, "integer overflow in a compile-time expression");
				return VERR;
			}
			return vint(x, op == OP_ABS ? (v->i < 0 ? -v->i : v->i) : (v->i > 0 ? v->i : 0));
		}
		return vfloat(x, ct_math(a->fname, v->kind == V_FLOAT ? v->f : (double)v->i));
	}
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	if (op == OP_ABS || op == OP_RELU) {
		if (t->dtype == DT_BOOL) {
			error_at(x->d, a->call->loc, "%s() needs a numeric tensor, not %s", a->fname, nstr(x, t));
			return VERR;
		}
	} else if (!float_tensor(x, a, t)) {
		return VERR;
	} else if (op == OP_ROUND_BF16 && t->dtype != DT_F32) {
		/* from f64 it would round twice (to f32, then to bfloat16) */
		error_at(x->d, a->call->loc, "round_bf16() needs an f32 tensor, not %s", nstr(x, t));
		return VERR;
	}
	return vtensor(x, unary_node(x, op, t->dtype, t, a->call->loc));
}

static Value *b_cast(LowerCtx *x, Args *a, DType dt)
{
	if (!check_arity(x, a, 1, 1, NULL))
		return VERR;
	Value *v = a->pos[0];
	if (is_ct(v)) {
		if (!x->g) {
			/* in a constant expression: a compile-time conversion */
			if (dtype_is_float(dt))
				return vfloat(x, v->kind == V_FLOAT ? v->f : (double)v->i);
			if (dt == DT_BOOL)
				return vbool(x, v->kind == V_FLOAT ? v->f != 0 : v->i != 0);
			if (v->kind == V_FLOAT) {
				if (!(v->f > -9.2e18 && v->f < 9.2e18)) {
					error_at(x->d, a->call->loc, "%g does not fit in an integer", v->f);
					return VERR;
				}
				return vint(x, (int64_t)v->f);
			}
			return vint(x, v->i);
		}
		Value *cv = v;
		if (v->kind == V_FLOAT && !dtype_is_float(dt)) {
			if (!(v->f > -9.2e18 && v->f < 9.2e18)) {
				error_at(x->d, a->call->loc, "%g does not fit in an integer", v->f);
				return VERR;
			}
			cv = vint(x, (int64_t)v->f);
		}
		return vtensor(x, const_node(x, dt, cv, a->call->loc));
	}
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	if (t->dtype == dt)
		return vtensor(x, t);
	return vtensor(x, unary_node(x, OP_CAST, dt, t, a->call->loc));
}

static Value *b_binary_fn(LowerCtx *x, Args *a, Op op)
{
	if (!check_arity(x, a, 2, 2, NULL))
		return VERR;
	Value *p = a->pos[0], *q = a->pos[1];
	if (is_ct(p) && is_ct(q)) {
		if (p->kind == V_BOOL || q->kind == V_BOOL) {
			error_at(x->d, a->call->loc, "%s() needs numbers, not bools", a->fname);
			return VERR;
		}
		if (op == OP_POW)
			return vfloat(x, pow(p->kind == V_FLOAT ? p->f : (double)p->i, q->kind == V_FLOAT ? q->f : (double)q->i));
		if (op == OP_FMOD && p->kind == V_INT && q->kind == V_INT)
			return vint(x, q->i == 0 || q->i == -1 ? 0 : p->i % q->i);
		if (op == OP_FMOD)
			return vfloat(x, fmod(p->kind == V_FLOAT ? p->f : (double)p->i, q->kind == V_FLOAT ? q->f : (double)q->i));
		if (p->kind == V_INT && q->kind == V_INT)
			return vint(x, op == OP_MAX ? (p->i > q->i ? p->i : q->i) : (p->i < q->i ? p->i : q->i));
		double u = p->kind == V_FLOAT ? p->f : (double)p->i, w = q->kind == V_FLOAT ? q->f : (double)q->i;
		return vfloat(x, op == OP_MAX ? fmax(u, w) : fmin(u, w));
	}
	return emit_binary(x, op, p, q, a->call->loc);
}

/* where(c, a, b) with two compile-time numbers: no tensor lends them its dtype, so
 * two ints are i32, an int and a float (or two floats) f32, two bools bool. */
static int where_numbers(LowerCtx *x, Args *a, Node **p, Node **q)
{
	Value *u = a->pos[1], *v = a->pos[2];
	DType dt;
	if (u->kind == V_BOOL || v->kind == V_BOOL) {
		if (u->kind != v->kind) {
			error_at(x->d, a->call->loc, "where() cannot choose between a bool and a number");
			return 0;
		}
		dt = DT_BOOL;
	} else if (u->kind == V_FLOAT || v->kind == V_FLOAT) {
		dt = DT_F32;
	} else {
		for (int i = 1; i <= 2; i++)
			if (a->pos[i]->i < INT32_MIN || a->pos[i]->i > INT32_MAX) {
				error_at(x->d, a->posloc[i], "%lld does not fit in i32, the dtype of where() between two integers (convert one with i64(...))",
				         (long long)a->pos[i]->i);
				return 0;
			}
		dt = DT_I32;
	}
	*p = const_node(x, dt, u, a->posloc[1]);
	*q = const_node(x, dt, v, a->posloc[2]);
	return 1;
}

static Value *b_where(LowerCtx *x, Args *a)
{
	if (!check_arity(x, a, 3, 3, NULL))
		return VERR;
	/* a compile-time bool (an argument, a comparison of constants) is a 0-d condition */
	Node *c = a->pos[0]->kind == V_BOOL ? const_node(x, DT_BOOL, a->pos[0], a->posloc[0]) : tensor_arg(x, a, 0, NULL);
	if (!c)
		return VERR;
	if (c->dtype != DT_BOOL) {
		error_at(x->d, a->posloc[0], "the condition of where() must be a bool tensor, not %s", nstr(x, c));
		return VERR;
	}
	Node *p, *q;
	if (is_ct(a->pos[1]) && is_ct(a->pos[2])) {
		if (!where_numbers(x, a, &p, &q))
			return VERR;
	} else if (!binary_operands(x, OP_WHERE, a->pos[1], a->pos[2], &p, &q, a->call->loc))
		return VERR;
	int r1, r2;
	int64_t s1[MAX_RANK], s2[MAX_RANK];
	if (!broadcast_shapes(x, p, q, &r1, s1, OP_WHERE, a->call->loc))
		return VERR;
	Node tmp = {.rank = r1, .dtype = p->dtype};
	memcpy(tmp.shape, s1, sizeof s1);
	if (!broadcast_shapes(x, c, &tmp, &r2, s2, OP_WHERE, a->call->loc))
		return VERR;
	Node *n = mk_node(x, OP_WHERE, p->dtype, r2, s2, a->call->loc);
	node_add_input(x->p, n, c);
	node_add_input(x->p, n, p);
	node_add_input(x->p, n, q);
	return vtensor(x, n);
}

static Value *b_softmax(LowerCtx *x, Args *a, Op op)
{
	static const char *const allowed[] = {"axis", NULL};
	if (!check_arity(x, a, 1, 2, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	int64_t axis;
	int ax;
	if (!int_opt(x, a, 1, "axis", -1, &axis) || !norm_axis(x, axis, t->rank, arg_loc(a, 1, "axis"), &ax))
		return VERR;
	Node *n = unary_node(x, op, t->dtype, t, a->call->loc);
	n->a[0] = ax;
	return vtensor(x, n);
}

static Value *b_norm(LowerCtx *x, Args *a, Op op)
{
	static const char *const allowed[] = {"eps", NULL};
	int nt = op == OP_LAYERNORM ? 3 : 2;
	if (!check_arity(x, a, nt, nt + 1, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank == 0) {
		error_at(x->d, a->call->loc, "%s() needs at least one axis", a->fname);
		return VERR;
	}
	Node *in[3] = {t};
	for (int i = 1; i < nt; i++) {
		in[i] = tensor_arg(x, a, i, NULL);
		if (!in[i])
			return VERR;
		int64_t d = t->shape[t->rank - 1];
		if (in[i]->rank != 1 || in[i]->shape[0] != d || in[i]->dtype != t->dtype) {
			error_at(x->d, a->posloc[i], "%s() of %s needs a %s of %s, not %s", a->fname, nstr(x, t),
			         i == 1 ? "weight" : "bias", shstr(x, t->dtype, 1, &d), nstr(x, in[i]));
			return VERR;
		}
	}
	double eps;
	if (!float_opt(x, a, nt, "eps", op == OP_LAYERNORM ? 1e-5 : 1e-6, &eps))
		return VERR;
	Node *n = mk_node(x, op, t->dtype, t->rank, t->shape, a->call->loc);
	for (int i = 0; i < nt; i++)
		node_add_input(x->p, n, in[i]);
	n->fval = eps;
	return vtensor(x, n);
}

static Value *b_reshape(LowerCtx *x, Args *a)
{
	if (!check_arity(x, a, 2, 2, NULL))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t s[MAX_RANK];
	int n;
	x->in_dim++;
	int ok = int_list(x, a->pos[1], a->posloc[1], "the shape of reshape()", s, MAX_RANK, &n, 0);
	x->in_dim--;
	if (!ok)
		return VERR;
	int infer = -1;
	int64_t known = 1;
	for (int i = 0; i < n; i++) {
		if (s[i] == -1) {
			if (infer >= 0) {
				error_at(x->d, a->posloc[1], "reshape() allows only one -1");
				return VERR;
			}
			infer = i;
		} else if (s[i] < 0) {
			error_at(x->d, a->posloc[1], "reshape() sizes must be non-negative (or one -1)");
			return VERR;
		} else if (__builtin_mul_overflow(known, s[i], &known)) {
			error_at(x->d, a->posloc[1], "the shape of reshape() is too large");
			return VERR;
		}
	}
	int64_t numel = shape_numel(t->rank, t->shape);
	if (infer >= 0) {
		if (known == 0 || numel % known != 0) {
			error_at(x->d, a->posloc[1], "cannot reshape %s (%lld elements) to a shape with %lld elements per -1 slot",
			         nstr(x, t), (long long)numel, (long long)known);
			return VERR;
		}
		s[infer] = numel / known;
		known = numel;
	}
	if (known != numel) {
		error_at(x->d, a->posloc[1], "cannot reshape %s (%lld elements) to %s (%lld elements)", nstr(x, t),
		         (long long)numel, shstr(x, t->dtype, n, s), (long long)known);
		return VERR;
	}
	Node *r = mk_node(x, OP_RESHAPE, t->dtype, n, s, a->call->loc);
	node_add_input(x->p, r, t);
	return vtensor(x, r);
}

static Value *b_transpose(LowerCtx *x, Args *a)
{
	if (!check_arity(x, a, 1, 2, NULL))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t perm[MAX_RANK];
	int n = t->rank;
	if (a->npos == 2) {
		if (!int_list(x, a->pos[1], a->posloc[1], "the permutation of transpose()", perm, MAX_RANK, &n, 0))
			return VERR;
	} else {
		for (int i = 0; i < n; i++)
			perm[i] = n - 1 - i;
	}
	if (n != t->rank) {
		error_at(x->d, a->posloc[1], "transpose() of %s needs a permutation of %d axes, not %d", nstr(x, t), t->rank, n);
		return VERR;
	}
	int seen = 0;
	int64_t shape[MAX_RANK];
	for (int i = 0; i < n; i++) {
		int ax;
		if (!norm_axis(x, perm[i], n, a->posloc[1], &ax))
			return VERR;
		if (seen & (1 << ax)) {
			error_at(x->d, a->posloc[1], "transpose(): axis %d appears twice in the permutation", ax);
			return VERR;
		}
		seen |= 1 << ax;
		perm[i] = ax;
		shape[i] = t->shape[ax];
	}
	int ident = 1;
	for (int i = 0; i < n; i++)
		if (perm[i] != i)
			ident = 0;
	if (ident)
		return vtensor(x, t);
	Node *r = mk_node(x, OP_TRANSPOSE, t->dtype, n, shape, a->call->loc);
	node_add_input(x->p, r, t);
	for (int i = 0; i < n; i++)
		r->a[i] = perm[i];
	return vtensor(x, r);
}

static Value *b_concat(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"axis", NULL};
	if (!check_arity(x, a, 1, 2, allowed))
		return VERR;
	Value *lv = a->pos[0];
	if (lv->kind != V_LIST || lv->n == 0) {
		if (lv->kind != V_ERR)
			error_at(x->d, a->posloc[0], "concat() takes a non-empty list of tensors, such as concat([a, b], axis=0)");
		return VERR;
	}
	Node *first = as_tensor(x, lv->items[0], a->posloc[0], "an element of concat()");
	if (!first)
		return VERR;
	int64_t axis;
	int ax;
	if (!int_opt(x, a, 1, "axis", 0, &axis) || !norm_axis(x, axis, first->rank, arg_loc(a, 1, "axis"), &ax))
		return VERR;
	int64_t shape[MAX_RANK];
	memcpy(shape, first->shape, sizeof shape);
	Node *ins[64];
	if (lv->n > 64) {
		error_at(x->d, a->posloc[0], "concat() takes at most 64 tensors");
		return VERR;
	}
	ins[0] = first;
	for (int i = 1; i < lv->n; i++) {
		Node *t = as_tensor(x, lv->items[i], a->posloc[0], "an element of concat()");
		if (!t)
			return VERR;
		int ok = t->dtype == first->dtype && t->rank == first->rank, bad = -1;
		for (int k = 0; ok && k < t->rank; k++)
			if (k != ax && t->shape[k] != first->shape[k])
				ok = 0, bad = k;
		if (!ok) {
			if (bad >= 0)
				error_at(x->d, a->posloc[0], "cannot concatenate %s and %s along axis %d: axis %d differs (%lld and %lld)",
				         nstr(x, first), nstr(x, t), ax, bad, (long long)first->shape[bad], (long long)t->shape[bad]);
			else
				error_at(x->d, a->posloc[0], "cannot concatenate %s and %s along axis %d: the %s differ", nstr(x, first),
				         nstr(x, t), ax, t->dtype != first->dtype ? "dtypes" : "ranks");
			return VERR;
		}
		shape[ax] += t->shape[ax];
		ins[i] = t;
	}
	Node *r = mk_node(x, OP_CONCAT, first->dtype, first->rank, shape, a->call->loc);
	for (int i = 0; i < lv->n; i++)
		node_add_input(x->p, r, ins[i]);
	r->a[0] = ax;
	return vtensor(x, r);
}

static Value *b_split(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"axis", NULL};
	if (!check_arity(x, a, 2, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t parts, axis;
	int ax;
	if (a->npos < 2) {
		/* split(x, axis=-1): the count of arguments is right, the parts are missing */
		error_at(x->d, a->call->loc, "split() takes the number of parts as its second argument");
		return VERR;
	}
	if (!ct_int(x, a->pos[1], a->posloc[1], "the number of parts of split()", &parts))
		return VERR;
	if (!int_opt(x, a, 2, "axis", 0, &axis) || !norm_axis(x, axis, t->rank, arg_loc(a, 2, "axis"), &ax))
		return VERR;
	if (parts < 1 || parts > 4096 || t->shape[ax] % parts != 0) {
		error_at(x->d, a->posloc[1], "cannot split axis %d of %s (%lld) into %lld equal parts", ax, nstr(x, t),
		         (long long)t->shape[ax], (long long)parts);
		return VERR;
	}
	Value *tup = value_new(x, V_TUPLE);
	tup->n = (int)parts;
	tup->items = arena_alloc(x->a, (size_t)parts * sizeof(Value *));
	int64_t shape[MAX_RANK];
	memcpy(shape, t->shape, sizeof shape);
	shape[ax] /= parts;
	for (int i = 0; i < parts; i++) {
		Node *r = mk_node(x, OP_SLICE, t->dtype, t->rank, shape, a->call->loc);
		node_add_input(x->p, r, t);
		r->a[ax] = i * shape[ax];
		tup->items[i] = vtensor(x, r);
	}
	return tup;
}

static Value *b_expand(LowerCtx *x, Args *a)
{
	if (!check_arity(x, a, 2, 2, NULL))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t s[MAX_RANK];
	int n;
	if (!int_list(x, a->pos[1], a->posloc[1], "the shape of expand()", s, MAX_RANK, &n, 0))
		return VERR;
	if (n < t->rank) {
		error_at(x->d, a->posloc[1], "cannot expand %s to %d axes", nstr(x, t), n);
		return VERR;
	}
	for (int i = 0; i < n; i++) {
		int k = i - (n - t->rank);
		int64_t have = k >= 0 ? t->shape[k] : 1;
		if (s[i] == -1) {
			if (k < 0) {
				error_at(x->d, a->posloc[1], "expand(): -1 is only allowed for existing axes");
				return VERR;
			}
			s[i] = have;
		}
		if (s[i] < 0 || (have != 1 && have != s[i])) {
			error_at(x->d, a->posloc[1], "cannot expand %s to %s: axis %d is %lld", nstr(x, t),
			         shstr(x, t->dtype, n, s), i, (long long)have);
			return VERR;
		}
	}
	Node *r = mk_node(x, OP_EXPAND, t->dtype, n, s, a->call->loc);
	node_add_input(x->p, r, t);
	return vtensor(x, r);
}

static Value *b_squeeze(LowerCtx *x, Args *a, int unsq)
{
	static const char *const allowed[] = {"axis", NULL};
	if (!check_arity(x, a, 1, 2, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t axis;
	Loc loc;
	Value *av = arg_at(a, 1, "axis", &loc);
	if (!av) {
		error_at(x->d, a->call->loc, "%s() needs an axis", a->fname);
		return VERR;
	}
	if (!ct_int(x, av, loc, "axis", &axis))
		return VERR;
	int ax;
	int64_t shape[MAX_RANK];
	if (unsq) {
		if (t->rank == MAX_RANK) {
			error_at(x->d, a->call->loc, "unsqueeze(): a tensor has at most %d axes", MAX_RANK);
			return VERR;
		}
		if (!norm_axis(x, axis, t->rank + 1, loc, &ax))
			return VERR;
		int r = 0;
		for (int i = 0; i <= t->rank; i++)
			shape[i] = i == ax ? 1 : t->shape[r++];
		return vtensor(x, reshape_node(x, t, t->rank + 1, shape, a->call->loc));
	}
	if (!norm_axis(x, axis, t->rank, loc, &ax))
		return VERR;
	if (t->shape[ax] != 1) {
		error_at(x->d, loc, "squeeze(): axis %d of %s is %lld, not 1", ax, nstr(x, t), (long long)t->shape[ax]);
		return VERR;
	}
	int r = 0;
	for (int i = 0; i < t->rank; i++)
		if (i != ax)
			shape[r++] = t->shape[i];
	return vtensor(x, reshape_node(x, t, r, shape, a->call->loc));
}

static Value *b_create(LowerCtx *x, Args *a, int which)
{
	/* which: 0 zeros, 1 ones, 2 full, 3 arange */
	if (!x->g) {
		error_at(x->d, a->call->loc, "%s() is not a compile-time value", a->fname);
		return VERR;
	}
	if (!check_arity(x, a, which == 2 ? 2 : 1, which == 2 ? 2 : 1, NULL))
		return VERR;
	int64_t s[MAX_RANK];
	int n;
	if (which == 3) {
		if (!ct_int(x, a->pos[0], a->posloc[0], "the length of arange()", &s[0]))
			return VERR;
		if (s[0] < 0) {
			error_at(x->d, a->posloc[0], "arange() needs a non-negative length");
			return VERR;
		}
		Node *r = mk_node(x, OP_ARANGE, DT_I64, 1, s, a->call->loc);
		return vtensor(x, r);
	}
	x->in_dim++;
	int ok = int_list(x, a->pos[0], a->posloc[0], arena_printf(x->a, "the shape of %s()", a->fname), s, MAX_RANK, &n, 0);
	x->in_dim--;
	if (!ok)
		return VERR;
	for (int i = 0; i < n; i++)
		if (s[i] < 0) {
			error_at(x->d, a->posloc[0], "%s(): sizes must be non-negative", a->fname);
			return VERR;
		}
	double v = which == 1 ? 1.0 : 0.0;
	if (which == 2) {
		Value *fv = a->pos[1];
		if (fv->kind != V_INT && fv->kind != V_FLOAT) {
			if (fv->kind != V_ERR)
				error_at(x->d, a->posloc[1], "the value of full() must be a compile-time number");
			return VERR;
		}
		v = fv->kind == V_FLOAT ? fv->f : (double)fv->i;
	}
	Node *r = mk_node(x, OP_FULL, DT_F32, n, s, a->call->loc);
	r->fval = v;
	return vtensor(x, r);
}

static Value *b_causal_mask(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"offset", NULL};
	if (!check_arity(x, a, 1, 2, allowed))
		return VERR;
	/* offset: query row i is at position i + offset of the keys (decoding
	 * against a cache of offset earlier positions) */
	int64_t offset;
	if (!int_opt(x, a, 1, "offset", 0, &offset))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank < 2) {
		error_at(x->d, a->call->loc, "causal_mask() needs at least two axes, not %s", nstr(x, t));
		return VERR;
	}
	Node *n = unary_node(x, OP_CAUSAL_MASK, t->dtype, t, a->call->loc);
	if (n)
		n->a[0] = offset;
	return vtensor(x, n);
}

Value *call_builtin(LowerCtx *x, Args *a)
{
	/* tensor builtins need a graph; the compile-time ones are handled inside */
	static const struct { const char *name; Op op; } unary[] = {
		{"exp", OP_EXP}, {"log", OP_LOG}, {"sqrt", OP_SQRT}, {"rsqrt", OP_RSQRT}, {"tanh", OP_TANH},
		{"sigmoid", OP_SIGMOID}, {"relu", OP_RELU}, {"gelu", OP_GELU}, {"gelu_tanh", OP_GELU_TANH},
		{"silu", OP_SILU}, {"erf", OP_ERF}, {"abs", OP_ABS}, {"sin", OP_SIN}, {"cos", OP_COS},
		{"round_bf16", OP_ROUND_BF16}, {"floor", OP_FLOOR}, {"ceil", OP_CEIL}, {"round", OP_ROUND},
		{"asin", OP_ASIN}, {"acos", OP_ACOS}, {"atan", OP_ATAN}, {"hardswish", OP_HARDSWISH},
	};
	for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
		if (!strcmp(a->fname, unary[i].name))
			return b_unary(x, a, unary[i].op);
	for (int dt = 0; dt < DT_COUNT; dt++)
		if (!strcmp(a->fname, dtype_name((DType)dt)))
			return b_cast(x, a, (DType)dt);
	if (!strcmp(a->fname, "pow")) return b_binary_fn(x, a, OP_POW);
	if (!strcmp(a->fname, "fmod")) return b_binary_fn(x, a, OP_FMOD);
	if (!strcmp(a->fname, "maximum")) return b_binary_fn(x, a, OP_MAX);
	if (!strcmp(a->fname, "minimum")) return b_binary_fn(x, a, OP_MIN);
	if (!x->g) {
		error_at(x->d, a->call->loc, "%s() is not a compile-time value", a->fname);
		return VERR;
	}
	if (!strcmp(a->fname, "where")) return b_where(x, a);
	if (!strcmp(a->fname, "sum")) return b_reduce(x, a, OP_SUM);
	if (!strcmp(a->fname, "prod")) return b_reduce(x, a, OP_PROD);
	if (!strcmp(a->fname, "mean")) return b_reduce(x, a, OP_MEAN);
	if (!strcmp(a->fname, "amax")) return b_reduce(x, a, OP_AMAX);
	if (!strcmp(a->fname, "amin")) return b_reduce(x, a, OP_AMIN);
	if (!strcmp(a->fname, "argmax")) return b_reduce(x, a, OP_ARGMAX);
	if (!strcmp(a->fname, "softmax")) return b_softmax(x, a, OP_SOFTMAX);
	if (!strcmp(a->fname, "log_softmax")) return b_softmax(x, a, OP_LOG_SOFTMAX);
	if (!strcmp(a->fname, "layernorm")) return b_norm(x, a, OP_LAYERNORM);
	if (!strcmp(a->fname, "rmsnorm")) return b_norm(x, a, OP_RMSNORM);
	if (!strcmp(a->fname, "reshape")) return b_reshape(x, a);
	if (!strcmp(a->fname, "transpose")) return b_transpose(x, a);
	if (!strcmp(a->fname, "concat")) return b_concat(x, a);
	if (!strcmp(a->fname, "split")) return b_split(x, a);
	if (!strcmp(a->fname, "expand")) return b_expand(x, a);
	if (!strcmp(a->fname, "unsqueeze")) return b_squeeze(x, a, 1);
	if (!strcmp(a->fname, "squeeze")) return b_squeeze(x, a, 0);
	if (!strcmp(a->fname, "zeros")) return b_create(x, a, 0);
	if (!strcmp(a->fname, "ones")) return b_create(x, a, 1);
	if (!strcmp(a->fname, "full")) return b_create(x, a, 2);
	if (!strcmp(a->fname, "arange")) return b_create(x, a, 3);
	if (!strcmp(a->fname, "causal_mask")) return b_causal_mask(x, a);
	Value *v = layer_builtin(x, a);
	if (!v)
		v = index_builtin(x, a);
	if (v)
		return v;
	ice("builtin %s has no lowering", a->fname);
}


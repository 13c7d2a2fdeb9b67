/* builtins.c - the builtin functions: their names, and their rules for the
 * arguments they take, the shapes and dtypes of their results and the nodes
 * they make (or the compile-time value, for the scalar ones). They receive
 * their arguments already evaluated (Args, eval.c) and are leaves: they make
 * nodes through values.c and call back into nothing above. */
#include "nestc.h"

#include <math.h>
#include <string.h>

static const char *const builtins[] = {
	"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu",
	"erf", "abs", "sin", "cos", "pow", "maximum", "minimum", "where",
	"f32", "f64", "i32", "i64", "bool",
	"sum", "mean", "amax", "amin", "argmax", "softmax", "log_softmax",
	"layernorm", "rmsnorm",
	"reshape", "transpose", "concat", "split", "expand", "unsqueeze", "squeeze",
	"arange", "zeros", "ones", "full", "causal_mask",
	"conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
	"topk", "take_along_axis", "cumsum",
	"linear", "flatten", "group_norm", /* issue #10: PyTorch's nn layers */
	"conv_transpose2d", "interpolate", "batch_norm",
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
	"linear", "flatten", "group_norm", /* issue #10 */
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

/* ---- arguments ---- */

static Value *opt_arg(Args *a, const char *name)
{
	for (int i = 0; i < a->nnamed; i++)
		if (!strcmp(a->names[i], name)) {
			a->used[i] = 1;
			return a->named[i];
		}
	return NULL;
}

static Loc opt_loc(Args *a, const char *name)
{
	for (int i = 0; i < a->nnamed; i++)
		if (!strcmp(a->names[i], name))
			return a->namedloc[i];
	return a->call->loc;
}

/* Positional argument i, or the named one, or NULL. */
static Value *arg_at(Args *a, int i, const char *name, Loc *loc)
{
	Value *v = NULL;
	if (i < a->npos) {
		v = a->pos[i];
		*loc = a->posloc[i];
		if (name && opt_arg(a, name))
			return NULL; /* reported by the caller as given twice */
		return v;
	}
	if (name && (v = opt_arg(a, name))) {
		*loc = opt_loc(a, name);
		return v;
	}
	*loc = a->call->loc;
	return NULL;
}

static Node *tensor_arg(LowerCtx *x, Args *a, int i, const char *name)
{
	Loc loc;
	Value *v = arg_at(a, i, name, &loc);
	if (!v) {
		error_at(x->d, a->call->loc, "%s() needs argument %d (%s)", a->fname, i + 1, name ? name : "a tensor");
		return NULL;
	}
	if (v->kind == V_ERR)
		return NULL;
	return as_tensor(x, v, loc, arena_printf(x->a, "argument %d of %s()", i + 1, a->fname));
}

static int float_tensor(LowerCtx *x, Args *a, Node *n)
{
	if (n && !dtype_is_float(n->dtype)) {
		error_at(x->d, a->call->loc, "%s() needs a float tensor, not %s", a->fname, nstr(x, n));
		return 0;
	}
	return n != NULL;
}

/* Where an argument was written (the call when it was left out). */
static Loc arg_loc(Args *a, int pos, const char *name)
{
	if (pos < a->npos)
		return a->posloc[pos];
	for (int i = 0; i < a->nnamed; i++)
		if (!strcmp(a->names[i], name))
			return a->namedloc[i];
	return a->call->loc;
}

static int int_opt(LowerCtx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t *out)
{
	Loc loc;
	Value *v = arg_at(a, pos, name, &loc);
	if (!v) {
		*out = dflt;
		return 1;
	}
	return ct_int(x, v, loc, arena_printf(x->a, "%s of %s()", name, a->fname), out);
}

static int bool_opt(LowerCtx *x, Args *a, const char *name, int dflt, int *out)
{
	Value *v = opt_arg(a, name);
	if (!v) {
		*out = dflt;
		return 1;
	}
	if (v->kind != V_BOOL) {
		if (v->kind != V_ERR)
			error_at(x->d, opt_loc(a, name), "%s of %s() must be true or false", name, a->fname);
		return 0;
	}
	*out = (int)v->i;
	return 1;
}

static int float_opt(LowerCtx *x, Args *a, int pos, const char *name, double dflt, double *out)
{
	Loc loc;
	Value *v = arg_at(a, pos, name, &loc);
	if (!v) {
		*out = dflt;
		return 1;
	}
	if (v->kind == V_FLOAT || v->kind == V_INT) {
		*out = v->kind == V_FLOAT ? v->f : (double)v->i;
		return 1;
	}
	if (v->kind != V_ERR)
		error_at(x->d, loc, "%s of %s() must be a compile-time number", name, a->fname);
	return 0;
}

/* A compile-time list of ints (or one int when allow_scalar). */
static int int_list(LowerCtx *x, Value *v, Loc loc, const char *what, int64_t *out, int max, int *n, int allow_scalar)
{
	if (v->kind == V_INT && allow_scalar) {
		out[0] = v->i;
		*n = 1;
		return 1;
	}
	if (v->kind != V_LIST) {
		if (v->kind != V_ERR)
			error_at(x->d, loc, "%s must be a list of compile-time integers such as [2, 3], not %s", what, tystr(x, v));
		return 0;
	}
	if (v->n > max) {
		error_at(x->d, loc, "%s has %d entries; at most %d are allowed", what, v->n, max);
		return 0;
	}
	for (int i = 0; i < v->n; i++)
		if (!ct_int(x, v->items[i], loc, what, &out[i]))
			return 0;
	*n = v->n;
	return 1;
}

/* int or [h, w] */
static int pair_opt(LowerCtx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t out[2], int positive)
{
	Loc loc;
	Value *v = arg_at(a, pos, name, &loc);
	if (!v) {
		out[0] = out[1] = dflt;
		return 1;
	}
	int64_t tmp[MAX_RANK];
	int n;
	if (!int_list(x, v, loc, arena_printf(x->a, "%s of %s()", name, a->fname), tmp, 2, &n, 1))
		return 0;
	if (n == 1)
		tmp[1] = tmp[0];
	else if (n != 2) {
		error_at(x->d, loc, "%s of %s() must be an int or [h, w]", name, a->fname);
		return 0;
	}
	for (int i = 0; i < 2; i++)
		if (tmp[i] < (positive ? 1 : 0)) {
			error_at(x->d, loc, "%s of %s() must be %s", name, a->fname, positive ? "positive" : "non-negative");
			return 0;
		}
	out[0] = tmp[0];
	out[1] = tmp[1];
	return 1;
}

static int check_arity(LowerCtx *x, Args *a, int min, int max, const char *const *allowed)
{
	if (a->npos < min && !(a->nnamed && a->npos + a->nnamed >= min)) {
		error_at(x->d, a->call->loc, "%s() takes at least %d argument%s, %d given", a->fname, min, min == 1 ? "" : "s",
		         a->npos);
		return 0;
	}
	if (a->npos > max) {
		error_at(x->d, a->call->loc, "%s() takes at most %d positional argument%s, %d given", a->fname, max,
		         max == 1 ? "" : "s", a->npos);
		return 0;
	}
	for (int i = 0; i < a->nnamed; i++) {
		int ok = 0;
		for (int k = 0; allowed && allowed[k]; k++)
			if (!strcmp(allowed[k], a->names[i]))
				ok = 1;
		if (!ok) {
			error_at(x->d, a->namekeyloc[i], "%s() has no argument named '%s'", a->fname, a->names[i]);
			return 0;
		}
		for (int k = 0; k < i; k++)
			if (!strcmp(a->names[k], a->names[i])) {
				error_at(x->d, a->namekeyloc[i], "argument '%s' is given twice", a->names[i]);
				return 0;
			}
	}
	return 1;
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
	if (!strcmp(f, "abs")) return fabs(v);
	if (!strcmp(f, "relu")) return v > 0 ? v : 0;
	if (!strcmp(f, "silu")) return v / (1.0 + exp(-v));
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
	Node *c = tensor_arg(x, a, 0, NULL);
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

/* batch_norm(x, running_mean, running_var, weight, bias, eps=1e-5): PyTorch's
 * F.batch_norm(..., training=False) over axis 1. No op of its own: the [C]
 * statistics fold into one scale and one shift per channel, and x * scale + shift
 * is an elementwise chain that the planner runs as one loop over x. */
static Value *b_batch_norm(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"eps", NULL};
	static const char *const what[5] = {NULL, "running_mean", "running_var", "weight", "bias"};
	if (!check_arity(x, a, 5, 6, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank < 2) {
		error_at(x->d, a->posloc[0], "batch_norm() needs x of at least two axes [N, C, ...], not %s", nstr(x, t));
		return VERR;
	}
	int64_t c = t->shape[1];
	Node *in[5] = {t};
	for (int i = 1; i < 5; i++) {
		in[i] = tensor_arg(x, a, i, NULL);
		if (!in[i])
			return VERR;
		if (in[i]->rank != 1 || in[i]->shape[0] != c || in[i]->dtype != t->dtype) {
			error_at(x->d, a->posloc[i], "batch_norm() of %s needs a %s of %s, not %s", nstr(x, t), what[i],
			         shstr(x, t->dtype, 1, &c), nstr(x, in[i]));
			return VERR;
		}
	}
	double eps;
	if (!float_opt(x, a, 5, "eps", 1e-5, &eps))
		return VERR;
	if (!(eps >= 0)) {
		error_at(x->d, arg_loc(a, 5, "eps"), "eps of batch_norm() must not be negative");
		return VERR;
	}
	/* random weights draw this param positive (params.c) */
	avec_push(x->a, &x->p->variance_nodes, in[2]);
	Loc loc = a->call->loc;
	Value *var_eps = emit_binary(x, OP_ADD, vtensor(x, in[2]), vfloat(x, eps), loc);
	if (var_eps->kind == V_ERR)
		return VERR;
	Node *inv = unary_node(x, OP_RSQRT, t->dtype, var_eps->node, loc);
	Value *scale = emit_binary(x, OP_MUL, vtensor(x, in[3]), vtensor(x, inv), loc);
	Value *shift = emit_binary(x, OP_SUB, vtensor(x, in[4]), emit_binary(x, OP_MUL, vtensor(x, in[1]), scale, loc), loc);
	if (shift->kind == V_ERR)
		return VERR;
	/* [C] -> [C, 1, ...]: broadcasts over the axes after the channel's */
	int64_t cs[MAX_RANK];
	cs[0] = c;
	for (int i = 1; i < t->rank - 1; i++)
		cs[i] = 1;
	Node *sc = reshape_node(x, scale->node, t->rank - 1, cs, loc);
	Node *sh = reshape_node(x, shift->node, t->rank - 1, cs, loc);
	return emit_binary(x, OP_ADD, emit_binary(x, OP_MUL, vtensor(x, t), vtensor(x, sc), loc), vtensor(x, sh), loc);
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
		int ok = t->dtype == first->dtype && t->rank == first->rank;
		for (int k = 0; ok && k < t->rank; k++)
			if (k != ax && t->shape[k] != first->shape[k])
				ok = 0;
		if (!ok) {
			error_at(x->d, a->posloc[0], "cannot concatenate %s and %s along axis %d", nstr(x, first), nstr(x, t), ax);
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
	if (!check_arity(x, a, 1, 1, NULL))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank < 2) {
		error_at(x->d, a->call->loc, "causal_mask() needs at least two axes, not %s", nstr(x, t));
		return VERR;
	}
	return vtensor(x, unary_node(x, OP_CAUSAL_MASK, t->dtype, t, a->call->loc));
}

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p)
{
	return (in + 2 * p - k) / s + 1;
}

static Value *b_conv2d(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"stride", "padding", "groups", "dilation", NULL};
	if (!check_arity(x, a, 2, 7, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, NULL), *b = NULL;
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (a->npos >= 3 && !(b = tensor_arg(x, a, 2, NULL)))
		return VERR;
	/* positional: conv2d(x, w, b, stride, padding, groups, dilation) */
	int64_t stride[2], pad[2], groups, dil[2];
	if (!pair_opt(x, a, 3, "stride", 1, stride, 1) || !pair_opt(x, a, 4, "padding", 0, pad, 0) ||
	    !int_opt(x, a, 5, "groups", 1, &groups) || !pair_opt(x, a, 6, "dilation", 1, dil, 1))
		return VERR;
	if (t->rank != 4 || w->rank != 4 || w->dtype != t->dtype) {
		error_at(x->d, a->call->loc, "conv2d() needs x as %s[N, C, H, W] and w as %s[O, C/groups, KH, KW], not %s and %s",
		         dtype_name(t->dtype), dtype_name(t->dtype), nstr(x, t), nstr(x, w));
		return VERR;
	}
	if (groups < 1 || t->shape[1] % groups || w->shape[0] % groups || w->shape[1] * groups != t->shape[1]) {
		error_at(x->d, a->call->loc, "conv2d(): %s does not fit %s with groups=%lld (channels %lld, weight takes %lld per group)",
		         nstr(x, w), nstr(x, t), (long long)groups, (long long)t->shape[1], (long long)w->shape[1]);
		return VERR;
	}
	if (b && (b->rank != 1 || b->shape[0] != w->shape[0] || b->dtype != t->dtype)) {
		error_at(x->d, a->posloc[2], "conv2d(): the bias must be %s, not %s", shstr(x, t->dtype, 1, &w->shape[0]),
		         nstr(x, b));
		return VERR;
	}
	/* the extent of the dilated kernel */
	int64_t kh = dil[0] * (w->shape[2] - 1) + 1, kw = dil[1] * (w->shape[3] - 1) + 1;
	int64_t shape[4] = {t->shape[0], w->shape[0], pool_out(t->shape[2], kh, stride[0], pad[0]),
	                    pool_out(t->shape[3], kw, stride[1], pad[1])};
	if (t->shape[2] + 2 * pad[0] < kh || t->shape[3] + 2 * pad[1] < kw) {
		error_at(x->d, a->call->loc, "conv2d(): the %skernel %lldx%lld is larger than the padded input of %s",
		         kh != w->shape[2] || kw != w->shape[3] ? "dilated " : "", (long long)kh, (long long)kw, nstr(x, t));
		return VERR;
	}
	Node *r = mk_node(x, OP_CONV2D, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	node_add_input(x->p, r, w);
	if (b)
		node_add_input(x->p, r, b);
	r->a[0] = stride[0];
	r->a[1] = stride[1];
	r->a[2] = pad[0];
	r->a[3] = pad[1];
	r->a[4] = groups;
	if (dil[0] != 1 || dil[1] != 1) { /* none stays 0: the fingerprints of models without it */
		r->a[5] = dil[0];
		r->a[6] = dil[1];
	}
	return vtensor(x, r);
}

static Value *b_pool(LowerCtx *x, Args *a, Op op)
{
	static const char *const allowed[] = {"stride", "padding", NULL};
	if (op == OP_GLOBAL_AVGPOOL2D) {
		if (!check_arity(x, a, 1, 1, NULL))
			return VERR;
	} else if (!check_arity(x, a, 2, 4, allowed)) {
		return VERR;
	}
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank != 4) {
		error_at(x->d, a->call->loc, "%s() needs %s[N, C, H, W], not %s", a->fname, dtype_name(t->dtype), nstr(x, t));
		return VERR;
	}
	if (op == OP_GLOBAL_AVGPOOL2D) {
		int64_t shape[4] = {t->shape[0], t->shape[1], 1, 1};
		Node *r = mk_node(x, op, t->dtype, 4, shape, a->call->loc);
		node_add_input(x->p, r, t);
		return vtensor(x, r);
	}
	int64_t k[2], s[2], p[2];
	if (!pair_opt(x, a, 1, "kernel", 1, k, 1))
		return VERR;
	/* positional: max_pool2d(x, k, stride, padding); the stride defaults to the kernel */
	int given = a->npos > 2 || opt_arg(a, "stride");
	if (!pair_opt(x, a, 2, "stride", k[0], s, 1) || !pair_opt(x, a, 3, "padding", 0, p, 0))
		return VERR;
	if (!given)
		s[1] = k[1];
	if (p[0] * 2 > k[0] || p[1] * 2 > k[1]) {
		error_at(x->d, a->call->loc, "%s(): padding must be at most half the kernel size", a->fname);
		return VERR;
	}
	if (t->shape[2] + 2 * p[0] < k[0] || t->shape[3] + 2 * p[1] < k[1]) {
		error_at(x->d, a->call->loc, "%s(): the kernel %lldx%lld is larger than the padded input of %s", a->fname,
		         (long long)k[0], (long long)k[1], nstr(x, t));
		return VERR;
	}
	int64_t shape[4] = {t->shape[0], t->shape[1], pool_out(t->shape[2], k[0], s[0], p[0]),
	                    pool_out(t->shape[3], k[1], s[1], p[1])};
	Node *r = mk_node(x, op, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	r->a[0] = k[0];
	r->a[1] = k[1];
	r->a[2] = s[0];
	r->a[3] = s[1];
	r->a[4] = p[0];
	r->a[5] = p[1];
	return vtensor(x, r);
}


/* ---- indexing and scans: take_along_axis, topk, cumsum (PyTorch / NumPy) ---- */

/* x[..., idx[...], ...] along axis ax; idx has x's rank and broadcasts with x
 * on the other axes, as numpy.take_along_axis. */
static Node *take_along_node(LowerCtx *x, Node *t, Node *idx, int ax, Loc loc, Loc idxloc)
{
	int64_t shape[MAX_RANK];
	for (int i = 0; i < t->rank; i++) {
		int64_t p = t->shape[i], q = idx->shape[i];
		if (i != ax && p != q && p != 1 && q != 1) {
			error_at(x->d, idxloc, "take_along_axis(): indices %s do not broadcast with %s on axis %d",
			         nstr(x, idx), nstr(x, t), i);
			return NULL;
		}
		shape[i] = i == ax ? q : p == 1 ? q : p;
	}
	Node *n = mk_node(x, OP_TAKE_ALONG, t->dtype, t->rank, shape, loc);
	node_add_input(x->p, n, t);
	node_add_input(x->p, n, idx);
	n->a[0] = ax;
	return n;
}

static Value *b_take_along_axis(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"axis", NULL};
	if (!check_arity(x, a, 3, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *idx = tensor_arg(x, a, 1, NULL);
	if (!t || !idx)
		return VERR;
	Loc iloc = arg_loc(a, 1, NULL);
	if (idx->dtype != DT_I32 && idx->dtype != DT_I64) {
		error_at(x->d, iloc, "the indices of take_along_axis() must be i32 or i64, not %s", nstr(x, idx));
		return VERR;
	}
	if (idx->rank != t->rank) {
		error_at(x->d, iloc, "take_along_axis() needs indices of the rank of %s, not %s", nstr(x, t), nstr(x, idx));
		return VERR;
	}
	int64_t axis;
	int ax;
	Loc loc;
	Value *av = arg_at(a, 2, "axis", &loc);
	if (!av)
		error_at(x->d, a->call->loc, "%s() needs an axis", a->fname);
	if (!av || !ct_int(x, av, loc, "axis", &axis) || !norm_axis(x, axis, t->rank, loc, &ax))
		return VERR;
	Node *n = take_along_node(x, t, idx, ax, a->call->loc, iloc);
	return n ? vtensor(x, n) : VERR;
}

/* (values, indices): the indices by OP_TOPK, the values gathered with them. */
static Value *b_topk(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"k", "axis", "largest", "sorted", NULL};
	if (!check_arity(x, a, 2, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	if (t->dtype == DT_BOOL) {
		error_at(x->d, a->call->loc, "topk() needs a numeric tensor, not %s", nstr(x, t));
		return VERR;
	}
	int64_t k, axis;
	int ax, largest, sorted;
	Loc kloc = arg_loc(a, 1, "k");
	Value *kv = arg_at(a, 1, "k", &kloc);
	if (!kv) {
		error_at(x->d, a->call->loc, "topk() needs k, the number of entries to keep");
		return VERR;
	}
	if (!ct_int(x, kv, kloc, "k of topk()", &k) || !int_opt(x, a, 2, "axis", -1, &axis) ||
	    !norm_axis(x, axis, t->rank, arg_loc(a, 2, "axis"), &ax) || !bool_opt(x, a, "largest", 1, &largest) ||
	    !bool_opt(x, a, "sorted", 1, &sorted))
		return VERR;
	if (k < 0 || k > t->shape[ax]) {
		error_at(x->d, kloc, "k = %lld is out of range for axis %d of %s (size %lld)", (long long)k, ax, nstr(x, t),
		         (long long)t->shape[ax]);
		return VERR;
	}
	/* sorted=false allows any order: the sorted one is as good */
	int64_t shape[MAX_RANK];
	memcpy(shape, t->shape, sizeof shape);
	shape[ax] = k;
	Node *idx = mk_node(x, largest ? OP_TOPK : OP_TOPK_MIN, DT_I64, t->rank, shape, a->call->loc);
	node_add_input(x->p, idx, t);
	idx->a[0] = ax;
	Node *vals = take_along_node(x, t, idx, ax, a->call->loc, a->call->loc);
	if (!vals)
		return VERR;
	Value *tup = value_new(x, V_TUPLE);
	tup->n = 2;
	tup->items = arena_alloc(x->a, 2 * sizeof(Value *));
	tup->items[0] = vtensor(x, vals);
	tup->items[1] = vtensor(x, idx);
	return tup;
}

static Value *b_cumsum(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"axis", NULL};
	if (!check_arity(x, a, 2, 2, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	if (t->dtype == DT_BOOL) {
		error_at(x->d, a->call->loc, "cumsum() needs a numeric tensor, not %s", nstr(x, t));
		return VERR;
	}
	int64_t axis;
	int ax;
	Loc loc;
	Value *av = arg_at(a, 1, "axis", &loc);
	if (!av)
		error_at(x->d, a->call->loc, "%s() needs an axis", a->fname);
	if (!av || !ct_int(x, av, loc, "axis", &axis) || !norm_axis(x, axis, t->rank, loc, &ax))
		return VERR;
	Node *n = unary_node(x, OP_CUMSUM, t->dtype, t, a->call->loc);
	n->a[0] = ax;
	return vtensor(x, n);
}

/* ---- PyTorch's nn layers (issue #10): linear, flatten, group_norm ---- */

/* linear(x, weight[out, in], bias[out]): x @ transpose(weight, [1, 0]) + bias,
 * the nodes the hand-written form makes, so that the matmul reads the
 * transposed weight from its rows (plan.c, virtual_transpose), packs it and
 * applies the bias as its epilogue. Those need a 2-D left operand: other
 * ranks are reshaped to [rows, in] and back, which costs nothing. */
static Value *b_linear(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"weight", "bias", NULL};
	if (!check_arity(x, a, 2, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, "weight");
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (t->rank < 1) {
		error_at(x->d, a->posloc[0], "linear() needs x with at least one axis, not %s", nstr(x, t));
		return VERR;
	}
	int64_t in = t->shape[t->rank - 1];
	if (w->rank != 2 || w->dtype != t->dtype || w->shape[1] != in) {
		error_at(x->d, arg_loc(a, 1, "weight"), "linear() of %s needs a weight of %s[out, %lld], not %s", nstr(x, t),
		         dtype_name(t->dtype), (long long)in, nstr(x, w));
		return VERR;
	}
	int64_t out = w->shape[0];
	Node *x2 = t;
	if (t->rank != 2)
		x2 = reshape_node(x, t, 2, (int64_t[]){shape_numel(t->rank - 1, t->shape), in}, a->call->loc);
	Node *wt = mk_node(x, OP_TRANSPOSE, w->dtype, 2, (int64_t[]){in, out}, a->call->loc);
	node_add_input(x->p, wt, w);
	wt->a[0] = 1;
	wt->a[1] = 0;
	Value *y = emit_matmul(x, vtensor(x, x2), vtensor(x, wt), a->call->loc);
	Loc bloc;
	Value *bv = arg_at(a, 2, "bias", &bloc);
	if (y->kind != V_ERR && bv) {
		Node *b = as_tensor(x, bv, bloc, "the bias of linear()");
		if (!b)
			return VERR;
		if (b->rank != 1 || b->shape[0] != out || b->dtype != t->dtype) {
			error_at(x->d, bloc, "linear() with a weight of %s needs a bias of %s, not %s", nstr(x, w),
			         shstr(x, t->dtype, 1, &out), nstr(x, b));
			return VERR;
		}
		y = emit_binary(x, OP_ADD, y, vtensor(x, b), a->call->loc);
	}
	if (y->kind == V_ERR || t->rank == 2)
		return y;
	int64_t s[MAX_RANK];
	memcpy(s, t->shape, sizeof s);
	s[t->rank - 1] = out;
	return vtensor(x, reshape_node(x, y->node, t->rank, s, a->call->loc));
}

/* flatten(x, start_dim=0, end_dim=-1): axes start_dim..end_dim as one; a 0-d
 * tensor becomes 1-d, as in PyTorch. */
static Value *b_flatten(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"start_dim", "end_dim", NULL};
	if (!check_arity(x, a, 1, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t sd, ed;
	int s0, e0, r = t->rank ? t->rank : 1;
	if (!int_opt(x, a, 1, "start_dim", 0, &sd) || !norm_axis(x, sd, r, arg_loc(a, 1, "start_dim"), &s0) ||
	    !int_opt(x, a, 2, "end_dim", -1, &ed) || !norm_axis(x, ed, r, arg_loc(a, 2, "end_dim"), &e0))
		return VERR;
	if (s0 > e0) {
		error_at(x->d, arg_loc(a, 1, "start_dim"), "flatten() of %s: start_dim %d is after end_dim %d", nstr(x, t),
		         s0, e0);
		return VERR;
	}
	if (t->rank == 0)
		return vtensor(x, reshape_node(x, t, 1, (int64_t[]){1}, a->call->loc));
	int64_t s[MAX_RANK];
	int n = 0;
	for (int i = 0; i < s0; i++)
		s[n++] = t->shape[i];
	s[n++] = shape_numel(e0 - s0 + 1, t->shape + s0);
	for (int i = e0 + 1; i < t->rank; i++)
		s[n++] = t->shape[i];
	return vtensor(x, reshape_node(x, t, n, s, a->call->loc));
}

/* group_norm(x[N, C, *], num_groups, weight[C], bias[C], eps=1e-5), as
 * PyTorch's: one OP_GROUPNORM row kernel over x viewed as [N, G, C/G * rest]
 * (statistics of each row in vectors, then the per-channel affine), between
 * two free reshapes. */
static Value *b_group_norm(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"num_groups", "weight", "bias", "eps", NULL};
	if (!check_arity(x, a, 4, 5, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank < 2) {
		error_at(x->d, a->posloc[0], "group_norm() needs x as %s[N, C, ...], not %s", dtype_name(t->dtype), nstr(x, t));
		return VERR;
	}
	int64_t c = t->shape[1], groups;
	Loc gloc;
	Value *gv = arg_at(a, 1, "num_groups", &gloc);
	if (!gv) {
		error_at(x->d, a->call->loc, "group_norm() needs num_groups");
		return VERR;
	}
	if (!ct_int(x, gv, gloc, "num_groups of group_norm()", &groups))
		return VERR;
	if (groups < 1 || c % groups) {
		error_at(x->d, gloc, "group_norm(): %lld groups do not divide the %lld channels of %s", (long long)groups,
		         (long long)c, nstr(x, t));
		return VERR;
	}
	Node *in[3] = {NULL};
	static const char *const names[3] = {NULL, "weight", "bias"};
	for (int i = 1; i < 3; i++) {
		in[i] = tensor_arg(x, a, i + 1, names[i]);
		if (!in[i])
			return VERR;
		if (in[i]->rank != 1 || in[i]->shape[0] != c || in[i]->dtype != t->dtype) {
			error_at(x->d, arg_loc(a, i + 1, names[i]), "group_norm() of %s needs a %s of %s, not %s", nstr(x, t),
			         names[i], shstr(x, t->dtype, 1, &c), nstr(x, in[i]));
			return VERR;
		}
	}
	double eps;
	if (!float_opt(x, a, 4, "eps", 1e-5, &eps))
		return VERR;
	int64_t rows[3] = {t->shape[0], groups, shape_numel(t->rank - 1, t->shape + 1) / groups};
	in[0] = reshape_node(x, t, 3, rows, a->call->loc);
	Node *n = mk_node(x, OP_GROUPNORM, t->dtype, 3, rows, a->call->loc);
	for (int i = 0; i < 3; i++)
		node_add_input(x->p, n, in[i]);
	n->fval = eps;
	return vtensor(x, reshape_node(x, n, t->rank, t->shape, a->call->loc));
}

static Value *nn_builtin(LowerCtx *x, Args *a)
{
	if (!strcmp(a->fname, "linear")) return b_linear(x, a);
	if (!strcmp(a->fname, "flatten")) return b_flatten(x, a);
	if (!strcmp(a->fname, "group_norm")) return b_group_norm(x, a);
	return NULL;
}

/* ---- i10conv: transposed convolution and interpolation (PyTorch's) ---- */

static Value *b_conv_transpose2d(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"stride", "padding", "output_padding", "groups", "dilation", NULL};
	if (!check_arity(x, a, 2, 8, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, NULL), *b = NULL;
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (a->npos >= 3 && !(b = tensor_arg(x, a, 2, NULL)))
		return VERR;
	/* positional as PyTorch's: (x, w, b, stride, padding, output_padding, groups, dilation) */
	int64_t s[2], p[2], op[2], groups, dil[2];
	if (!pair_opt(x, a, 3, "stride", 1, s, 1) || !pair_opt(x, a, 4, "padding", 0, p, 0) ||
	    !pair_opt(x, a, 5, "output_padding", 0, op, 0) || !int_opt(x, a, 6, "groups", 1, &groups) ||
	    !pair_opt(x, a, 7, "dilation", 1, dil, 1))
		return VERR;
	if (t->rank != 4 || w->rank != 4 || w->dtype != t->dtype) {
		error_at(x->d, a->call->loc,
		         "conv_transpose2d() needs x as %s[N, C, H, W] and w as %s[C, O/groups, KH, KW], not %s and %s",
		         dtype_name(t->dtype), dtype_name(t->dtype), nstr(x, t), nstr(x, w));
		return VERR;
	}
	if (groups < 1 || t->shape[1] % groups || w->shape[0] != t->shape[1]) {
		error_at(x->d, a->call->loc, "conv_transpose2d(): %s does not fit %s with groups=%lld (channels %lld, weight has %lld)",
		         nstr(x, w), nstr(x, t), (long long)groups, (long long)t->shape[1], (long long)w->shape[0]);
		return VERR;
	}
	int64_t O = w->shape[1] * groups;
	if (b && (b->rank != 1 || b->shape[0] != O || b->dtype != t->dtype)) {
		error_at(x->d, a->posloc[2], "conv_transpose2d(): the bias must be %s, not %s", shstr(x, t->dtype, 1, &O),
		         nstr(x, b));
		return VERR;
	}
	for (int k = 0; k < 2; k++)
		if (op[k] >= s[k] && op[k] >= dil[k]) {
			error_at(x->d, arg_loc(a, 5, "output_padding"),
			         "conv_transpose2d(): output_padding must be smaller than either stride or dilation");
			return VERR;
		}
	int64_t shape[4] = {t->shape[0], O, 0, 0};
	for (int k = 0; k < 2; k++)
		shape[2 + k] = (t->shape[2 + k] - 1) * s[k] - 2 * p[k] + dil[k] * (w->shape[2 + k] - 1) + op[k] + 1;
	if (shape[2] < 1 || shape[3] < 1) {
		error_at(x->d, a->call->loc, "conv_transpose2d(): the padding leaves no output of %s (%lldx%lld)", nstr(x, t),
		         (long long)shape[2], (long long)shape[3]);
		return VERR;
	}
	Node *r = mk_node(x, OP_CONV_TRANSPOSE2D, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	node_add_input(x->p, r, w);
	if (b)
		node_add_input(x->p, r, b);
	int64_t attrs[9] = {s[0], s[1], p[0], p[1], groups, dil[0], dil[1], op[0], op[1]};
	memcpy(r->a, attrs, sizeof attrs);
	return vtensor(x, r);
}

/* scale_factor: a positive number or [h, w] of them */
static int scale_pair(LowerCtx *x, Value *v, Loc loc, double out[2])
{
	int n = v->kind == V_LIST ? v->n : 1;
	for (int i = 0; i < n; i++) {
		Value *e = v->kind == V_LIST ? v->items[i] : v;
		if (e->kind == V_ERR)
			return 0;
		if ((e->kind != V_INT && e->kind != V_FLOAT) || n > 2) {
			error_at(x->d, loc, "scale_factor of interpolate() must be a number or [h, w] of numbers");
			return 0;
		}
		out[i] = e->kind == V_FLOAT ? e->f : (double)e->i;
		if (!(out[i] > 0)) {
			error_at(x->d, loc, "scale_factor of interpolate() must be positive");
			return 0;
		}
	}
	if (n < 1) {
		error_at(x->d, loc, "scale_factor of interpolate() must be a number or [h, w] of numbers");
		return 0;
	}
	if (n == 1)
		out[1] = out[0];
	return 1;
}

static Value *b_interpolate(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"size", "scale_factor", "mode", "align_corners", NULL};
	if (!check_arity(x, a, 1, 5, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank != 4) {
		error_at(x->d, a->call->loc, "interpolate() needs %s[N, C, H, W], not %s", dtype_name(t->dtype), nstr(x, t));
		return VERR;
	}
	/* positional as PyTorch's: (x, size, scale_factor, mode, align_corners) */
	Loc sloc, floc, mloc, aloc;
	Value *sv = arg_at(a, 1, "size", &sloc), *fv = arg_at(a, 2, "scale_factor", &floc);
	Value *mv = arg_at(a, 3, "mode", &mloc), *av = arg_at(a, 4, "align_corners", &aloc);
	if (!sv == !fv) {
		error_at(x->d, a->call->loc, "interpolate() needs either size or scale_factor%s", sv ? ", not both" : "");
		return VERR;
	}
	int bilinear = 0;
	if (mv) {
		if (mv->kind != V_STR || (strcmp(mv->s, "nearest") && strcmp(mv->s, "bilinear"))) {
			if (mv->kind == V_STR)
				error_at(x->d, mloc, "mode of interpolate() must be \"nearest\" or \"bilinear\", not \"%s\"", mv->s);
			else if (mv->kind != V_ERR)
				error_at(x->d, mloc, "mode of interpolate() must be the string \"nearest\" or \"bilinear\"");
			return VERR;
		}
		bilinear = !strcmp(mv->s, "bilinear");
	}
	int align = 0;
	if (av) {
		if (av->kind != V_BOOL) {
			if (av->kind != V_ERR)
				error_at(x->d, aloc, "align_corners of interpolate() must be true or false");
			return VERR;
		}
		if (!bilinear) { /* as PyTorch: it means nothing for nearest */
			error_at(x->d, aloc, "align_corners of interpolate() can only be given with mode=\"bilinear\"");
			return VERR;
		}
		align = (int)av->i;
	}
	int64_t out[2];
	double sf[2] = {0, 0};
	if (sv) {
		if (!pair_opt(x, a, 1, "size", 1, out, 1))
			return VERR;
	} else {
		if (!scale_pair(x, fv, floc, sf))
			return VERR;
		for (int k = 0; k < 2; k++) {
			out[k] = (int64_t)floor((double)t->shape[2 + k] * sf[k]);
			if (out[k] < 1) {
				error_at(x->d, floc, "interpolate(): scale_factor %g leaves no output of %s", sf[k], nstr(x, t));
				return VERR;
			}
		}
	}
	int64_t shape[4] = {t->shape[0], t->shape[1], out[0], out[1]};
	Node *r = mk_node(x, bilinear ? OP_RESIZE_BILINEAR : OP_RESIZE_NEAREST, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	r->a[0] = align;
	/* PyTorch's coordinate scale: float arithmetic except bilinear on f64 */
	int dbl = bilinear && t->dtype == DT_F64;
	for (int k = 0; k < 2; k++) {
		int64_t in = t->shape[2 + k];
		double sc;
		if (align)
			sc = out[k] > 1 ? (dbl ? (double)(in - 1) / (double)(out[k] - 1) : (float)(in - 1) / (float)(out[k] - 1)) : 0;
		else if (sf[k] > 0)
			sc = dbl ? 1.0 / sf[k] : (float)(1.0 / sf[k]);
		else
			sc = dbl ? (double)in / (double)out[k] : (float)in / (float)out[k];
		r->a[1 + k] = resize_scale_bits(sc);
	}
	return vtensor(x, r);
}

Value *call_builtin(LowerCtx *x, Args *a)
{
	/* tensor builtins need a graph; the compile-time ones are handled inside */
	static const struct { const char *name; Op op; } unary[] = {
		{"exp", OP_EXP}, {"log", OP_LOG}, {"sqrt", OP_SQRT}, {"rsqrt", OP_RSQRT}, {"tanh", OP_TANH},
		{"sigmoid", OP_SIGMOID}, {"relu", OP_RELU}, {"gelu", OP_GELU}, {"gelu_tanh", OP_GELU_TANH},
		{"silu", OP_SILU}, {"erf", OP_ERF}, {"abs", OP_ABS}, {"sin", OP_SIN}, {"cos", OP_COS},
	};
	for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
		if (!strcmp(a->fname, unary[i].name))
			return b_unary(x, a, unary[i].op);
	for (int dt = 0; dt < DT_COUNT; dt++)
		if (!strcmp(a->fname, dtype_name((DType)dt)))
			return b_cast(x, a, (DType)dt);
	if (!strcmp(a->fname, "pow")) return b_binary_fn(x, a, OP_POW);
	if (!strcmp(a->fname, "maximum")) return b_binary_fn(x, a, OP_MAX);
	if (!strcmp(a->fname, "minimum")) return b_binary_fn(x, a, OP_MIN);
	if (!x->g) {
		error_at(x->d, a->call->loc, "%s() is not a compile-time value", a->fname);
		return VERR;
	}
	if (!strcmp(a->fname, "where")) return b_where(x, a);
	if (!strcmp(a->fname, "sum")) return b_reduce(x, a, OP_SUM);
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
	if (!strcmp(a->fname, "conv2d")) return b_conv2d(x, a);
	if (!strcmp(a->fname, "max_pool2d")) return b_pool(x, a, OP_MAXPOOL2D);
	if (!strcmp(a->fname, "avg_pool2d")) return b_pool(x, a, OP_AVGPOOL2D);
	if (!strcmp(a->fname, "global_avg_pool2d")) return b_pool(x, a, OP_GLOBAL_AVGPOOL2D);
	if (!strcmp(a->fname, "topk")) return b_topk(x, a);
	if (!strcmp(a->fname, "take_along_axis")) return b_take_along_axis(x, a);
	if (!strcmp(a->fname, "cumsum")) return b_cumsum(x, a);
	if (!strcmp(a->fname, "conv_transpose2d")) return b_conv_transpose2d(x, a);
	if (!strcmp(a->fname, "interpolate")) return b_interpolate(x, a);
	if (!strcmp(a->fname, "batch_norm")) return b_batch_norm(x, a);
	Value *nn = nn_builtin(x, a);
	if (nn)
		return nn;
	ice("builtin %s has no lowering", a->fname);
}


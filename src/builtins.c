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
	"batch_norm",
	NULL,
};

int is_builtin(const char *name)
{
	for (int i = 0; builtins[i]; i++)
		if (!strcmp(builtins[i], name))
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
	if (!binary_operands(x, OP_WHERE, a->pos[1], a->pos[2], &p, &q, a->call->loc))
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
	static const char *const allowed[] = {"stride", "padding", "groups", NULL};
	if (!check_arity(x, a, 2, 6, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, NULL), *b = NULL;
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (a->npos >= 3 && !(b = tensor_arg(x, a, 2, NULL)))
		return VERR;
	/* positional: conv2d(x, w, b, stride, padding, groups) */
	int64_t stride[2], pad[2], groups;
	if (!pair_opt(x, a, 3, "stride", 1, stride, 1) || !pair_opt(x, a, 4, "padding", 0, pad, 0) ||
	    !int_opt(x, a, 5, "groups", 1, &groups))
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
	int64_t shape[4] = {t->shape[0], w->shape[0], pool_out(t->shape[2], w->shape[2], stride[0], pad[0]),
	                    pool_out(t->shape[3], w->shape[3], stride[1], pad[1])};
	if (t->shape[2] + 2 * pad[0] < w->shape[2] || t->shape[3] + 2 * pad[1] < w->shape[3]) {
		error_at(x->d, a->call->loc, "conv2d(): the kernel %lldx%lld is larger than the padded input of %s",
		         (long long)w->shape[2], (long long)w->shape[3], nstr(x, t));
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
	if (!strcmp(a->fname, "batch_norm")) return b_batch_norm(x, a);
	ice("builtin %s has no lowering", a->fname);
}


/* ops.c - elementwise ops (binary, unary, variadic, Where, Cast, Clip) and
 * translate_node, which gathers a node's inputs and dispatches on its op
 * type to the translations in ops_*.c. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double fold_bin(const char *op, double a, double b, int isint)
{
	if (!strcmp(op, "Add")) return a + b;
	if (!strcmp(op, "Sub")) return a - b;
	if (!strcmp(op, "Mul")) return a * b;
	if (!strcmp(op, "Div")) return isint ? (b == 0 ? 0 : trunc(a / b)) : a / b;
	if (!strcmp(op, "Pow")) return pow(a, b);
	if (!strcmp(op, "Max")) return a > b ? a : b;
	if (!strcmp(op, "Min")) return a < b ? a : b;
	if (!strcmp(op, "Equal")) return a == b;
	if (!strcmp(op, "Less")) return a < b;
	if (!strcmp(op, "Greater")) return a > b;
	if (!strcmp(op, "LessOrEqual")) return a <= b;
	if (!strcmp(op, "GreaterOrEqual")) return a >= b;
	if (!strcmp(op, "And")) return a && b;
	if (!strcmp(op, "Or")) return a || b;
	ice("onnx: no folding for binary op %s", op); /* tr_binary's callers name only the ops above */
}

static int tr_binary(Ctx *c, NodeIO *io, const char *op)
{
	Val *a, *b;
	if (inputs(c, io, "two inputs", 2, &a, &b) < 0)
		return -1;
	int r;
	int64_t sh[MAX_RANK];
	if (broadcast(c, a->rank, a->shape, b->rank, b->shape, &r, sh) < 0)
		return -1;
	int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") || !strcmp(op, "LessOrEqual") ||
	          !strcmp(op, "GreaterOrEqual");
	int logic = !strcmp(op, "And") || !strcmp(op, "Or");
	DType odt = cmp ? DT_BOOL : a->dt;
	if (!cmp && !logic && strcmp(op, "Pow") && a->dt != b->dt)
		return node_err(c, 0, "operands of different dtypes (%s, %s)", dtype_name(a->dt), dtype_name(b->dt)), -1;
	if (a->known && b->known) {
		Val *o = def_known(c, io, 0, odt, r, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, r, sh, pos);
			if (!dtype_is_float(a->dt) && !dtype_is_float(b->dt) && !cmp && strcmp(op, "Pow")) {
				int64_t x = kgeti(a, bidx(a, r, sh, pos)), y = kgeti(b, bidx(b, r, sh, pos)), z = 0;
				if (!strcmp(op, "Add")) z = (int64_t)((uint64_t)x + (uint64_t)y);
				else if (!strcmp(op, "Sub")) z = (int64_t)((uint64_t)x - (uint64_t)y);
				else if (!strcmp(op, "Mul")) z = (int64_t)((uint64_t)x * (uint64_t)y);
				else if (!strcmp(op, "Div")) z = y == 0 || (y == -1 && x == INT64_MIN) ? 0 : x / y;
				else z = (int64_t)fold_bin(op, (double)x, (double)y, 1);
				kseti(o, k, z);
			} else {
				kset(o, k, fold_bin(op, kget(a, bidx(a, r, sh, pos)), kget(b, bidx(b, r, sh, pos)),
				                    !dtype_is_float(a->dt)));
			}
		}
		return 0;
	}
	if (!strcmp(op, "Pow") && b->known && b->n == 1 && dtype_is_float(a->dt) && r == a->rank) {
		/* small integer powers as products: exact, and no pow() per element */
		double e = kget(b, 0);
		const char *x = ref(c, a);
		if (e == 1)
			return def(c, io, 0, a->dt, r, sh, "%s", x) ? 0 : -1;
		if (e == 2)
			return def(c, io, 0, a->dt, r, sh, "%s * %s", x, x) ? 0 : -1;
		if (e == 3)
			return def(c, io, 0, a->dt, r, sh, "%s * %s * %s", x, x, x) ? 0 : -1;
		if (e == 0.5)
			return def(c, io, 0, a->dt, r, sh, "sqrt(%s)", x) ? 0 : -1;
	}
	const char *x = ref(c, a), *y = ref(c, b);
	if (!strcmp(op, "Pow")) {
		if (dtype_is_float(a->dt) && a->dt == b->dt)
			return def(c, io, 0, a->dt, r, sh, "pow(%s, %s)", x, y) ? 0 : -1;
		if (dtype_is_float(a->dt))
			return def(c, io, 0, a->dt, r, sh, "pow(%s, %s(%s))", x, dtype_name(a->dt), y) ? 0 : -1;
		return def(c, io, 0, a->dt, r, sh, "%s(pow(f64(%s), f64(%s)))", dtype_name(a->dt), x, y) ? 0 : -1;
	}
	if (!strcmp(op, "Max") || !strcmp(op, "Min"))
		return def(c, io, 0, odt, r, sh, "%s(%s, %s)", op[1] == 'a' ? "maximum" : "minimum", x, y) ? 0 : -1;
	if (!strcmp(op, "Div") && !dtype_is_float(a->dt)) {
		/* ONNX truncates, Nest floors */
		char *q = tmp(c, "%s / %s", x, y);
		Val *o = def(c, io, 0, odt, r, sh, "where((%s * %s != %s) && (((%s < 0) && (%s > 0)) || ((%s > 0) && (%s < 0))), %s + 1, %s)",
		             q, y, x, x, y, x, y, q, q);
		free(q);
		return o ? 0 : -1;
	}
	static const char *const ops[][2] = {{"Add", "+"}, {"Sub", "-"}, {"Mul", "*"}, {"Div", "/"}, {"Equal", "=="},
	                                      {"Less", "<"}, {"Greater", ">"}, {"LessOrEqual", "<="},
	                                      {"GreaterOrEqual", ">="}, {"And", "&&"}, {"Or", "||"}};
	for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
		if (!strcmp(ops[k][0], op))
			return def(c, io, 0, odt, r, sh, "%s %s %s", x, ops[k][1], y) ? 0 : -1;
	return -1;
}

/* Mod: fmod=0 (integers) the remainder with the divisor's sign, Nest's %;
 * fmod=1 C's fmod, the dividend's sign. x mod 0 is 0. */
static int tr_mod(Ctx *c, NodeIO *io)
{
	Val *a, *b;
	if (inputs(c, io, "two inputs", 2, &a, &b) < 0)
		return -1;
	int f = attr_i(io->n, "fmod", 0) != 0;
	if (a->dt != b->dt)
		return node_err(c, 0, "operands of different dtypes (%s, %s)", dtype_name(a->dt), dtype_name(b->dt)), -1;
	if (a->dt == DT_BOOL)
		return node_err(c, 0, "needs numbers, not bool"), -1;
	if (!f && dtype_is_float(a->dt))
		return node_err(c, 0, "Mod of %s needs fmod=1", dtype_name(a->dt)), -1;
	int r;
	int64_t sh[MAX_RANK];
	if (broadcast(c, a->rank, a->shape, b->rank, b->shape, &r, sh) < 0)
		return -1;
	if (a->known && b->known) {
		Val *o = def_known(c, io, 0, a->dt, r, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, r, sh, pos);
			if (dtype_is_float(a->dt)) {
				kset(o, k, fmod(kget(a, bidx(a, r, sh, pos)), kget(b, bidx(b, r, sh, pos))));
				continue;
			}
			int64_t x = kgeti(a, bidx(a, r, sh, pos)), y = kgeti(b, bidx(b, r, sh, pos));
			int64_t m = y == 0 || y == -1 ? 0 : x % y;
			if (!f && m != 0 && (m < 0) != (y < 0))
				m += y;
			kseti(o, k, m);
		}
		return 0;
	}
	const char *x = ref(c, a), *y = ref(c, b);
	return def(c, io, 0, a->dt, r, sh, f ? "fmod(%s, %s)" : "%s %% %s", x, y) ? 0 : -1;
}

static double fold_un(const char *op, double x)
{
	if (!strcmp(op, "Neg")) return -x;
	if (!strcmp(op, "Sqrt")) return sqrt(x);
	if (!strcmp(op, "Exp")) return exp(x);
	if (!strcmp(op, "Log")) return log(x);
	if (!strcmp(op, "Tanh")) return tanh(x);
	if (!strcmp(op, "Erf")) return erf(x);
	if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
	if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-x));
	if (!strcmp(op, "Reciprocal")) return 1 / x;
	if (!strcmp(op, "Not")) return !x;
	if (!strcmp(op, "Abs")) return fabs(x);
	if (!strcmp(op, "Floor")) return floor(x);
	if (!strcmp(op, "Ceil")) return ceil(x);
	if (!strcmp(op, "Round")) return nearbyint(x);
	return 0;
}

static int tr_unary(Ctx *c, NodeIO *io, const char *op)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int floatonly = strcmp(op, "Neg") && strcmp(op, "Relu") && strcmp(op, "Not") && strcmp(op, "Abs");
	if (floatonly && !dtype_is_float(a->dt))
		return node_err(c, 1, "%s of %s is not supported", op, dtype_name(a->dt)), -1;
	if (a->known) {
		Val *o = def_known(c, io, 0, a->dt, a->rank, a->shape);
		if (!o)
			return -1;
		for (int64_t k = 0; k < a->n; k++)
			kset(o, k, fold_un(op, kget(a, k)));
		return 0;
	}
	const char *x = ref(c, a);
	const char *fn = NULL;
	if (!strcmp(op, "Neg"))
		return def(c, io, 0, a->dt, a->rank, a->shape, "-%s", x) ? 0 : -1;
	if (!strcmp(op, "Not"))
		return def(c, io, 0, a->dt, a->rank, a->shape, "!%s", x) ? 0 : -1;
	if (!strcmp(op, "Reciprocal"))
		return def(c, io, 0, a->dt, a->rank, a->shape, "1.0 / %s", x) ? 0 : -1;
	if (!strcmp(op, "Sqrt")) fn = "sqrt";
	if (!strcmp(op, "Exp")) fn = "exp";
	if (!strcmp(op, "Log")) fn = "log";
	if (!strcmp(op, "Tanh")) fn = "tanh";
	if (!strcmp(op, "Erf")) fn = "erf";
	if (!strcmp(op, "Relu")) fn = "relu";
	if (!strcmp(op, "Sigmoid")) fn = "sigmoid";
	if (!strcmp(op, "Abs")) fn = "abs";
	if (!strcmp(op, "Floor")) fn = "floor";
	if (!strcmp(op, "Ceil")) fn = "ceil";
	if (!strcmp(op, "Round")) fn = "round";
	return def(c, io, 0, a->dt, a->rank, a->shape, "%s(%s)", fn, x) ? 0 : -1;
}

static int tr_variadic(Ctx *c, NodeIO *io, const char *op)
{
	Val *acc = NULL;
	int cnt = 0;
	for (int k = 0; k < io->nin; k++)
		if (io->in[k])
			cnt++;
	if (!cnt)
		return node_err(c, 0, "needs at least one input"), -1;
	if (cnt == 1) {
		for (int k = 0; k < io->nin; k++)
			if (io->in[k])
				alias(c, io, 0, io->in[k]);
		return 0;
	}
	/* fold pairwise: all but the last into temporaries, named so that no
	 * value of the graph has their names */
	for (int k = 0; k < io->nin; k++) {
		if (!io->in[k])
			continue;
		if (!acc) {
			acc = io->in[k];
			continue;
		}
		Onnx__NodeProto node = *io->n;
		char *base = xasprintf("%s.%d", out_name(io, 0), k), *nm = --cnt > 1 ? fresh_name(c, base) : NULL;
		char *outs[1] = {nm};
		if (nm) {
			node.output = outs;
			node.n_output = 1;
		}
		NodeIO sub = {.nin = 2, .n = nm ? &node : io->n};
		sub.in[0] = acc;
		sub.in[1] = io->in[k];
		int rc = tr_binary(c, &sub, op);
		free(base);
		free(nm);
		if (rc < 0)
			return -1;
		acc = c->vals[c->nvals - 1];
	}
	return 0;
}

/* Mean of its inputs, broadcast: their sum over their count. */
static int tr_mean_of(Ctx *c, NodeIO *io)
{
	int cnt = 0;
	Val *one = NULL;
	for (int k = 0; k < io->nin; k++)
		if (io->in[k]) {
			cnt++;
			one = io->in[k];
			if (!dtype_is_float(io->in[k]->dt))
				return node_err(c, 1, "Mean of %s is not supported", dtype_name(io->in[k]->dt)), -1;
		}
	if (!cnt)
		return node_err(c, 0, "needs at least one input"), -1;
	if (cnt == 1) {
		alias(c, io, 0, one);
		return 0;
	}
	/* the sum under a name of its own, then divided */
	Onnx__NodeProto sub = *io->n;
	char *sbase = xasprintf("%s.sum", out_name(io, 0)), *sname = fresh_name(c, sbase);
	free(sbase);
	char *outs[1] = {sname};
	sub.output = outs;
	sub.n_output = 1;
	NodeIO sio = *io;
	sio.n = &sub;
	int rc = tr_variadic(c, &sio, "Add");
	Val *s = rc < 0 ? NULL : find_val(c, sname);
	free(sname);
	if (rc < 0)
		return -1;
	if (!s)
		return node_err(c, 0, "internal: the sum of Mean is not defined"), -1;
	return def(c, io, 0, s->dt, s->rank, s->shape, "%s / %s(%d)", ref(c, s), dtype_name(s->dt), cnt) ? 0 : -1;
}

static int tr_where(Ctx *c, NodeIO *io)
{
	Val *cd, *a, *b;
	if (inputs(c, io, "three inputs", 3, &cd, &a, &b) < 0)
		return -1;
	int r1, r;
	int64_t s1[MAX_RANK], sh[MAX_RANK];
	if (broadcast(c, cd->rank, cd->shape, a->rank, a->shape, &r1, s1) < 0 ||
	    broadcast(c, r1, s1, b->rank, b->shape, &r, sh) < 0)
		return -1;
	if (all_known(io))
		return fold_broadcast(c, io, cd, a, b, r, sh);
	const char *x = ref(c, cd), *y = ref(c, a), *z = ref(c, b);
	return def(c, io, 0, a->dt, r, sh, "where(%s, %s, %s)", x, y, z) ? 0 : -1;
}

static int tr_cast(Ctx *c, NodeIO *io, int to)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int dt = onnx_nest_dtype(to);
	if (dt < 0)
		return node_err(c, 1, "cast to %s is not supported", onnx_dtype_name(to)), -1;
	/* bfloat16 is held in f32, rounded to its 8 bits of significand (ties to
	 * even), so that later ops see the value a bfloat16 has */
	int bf16 = to == OT_BFLOAT16;
	/* an integer to a narrower one keeps the low bits (ONNX: 300 as uint8 is
	 * 44, 200 as int8 is -56), the narrow types being held wider: the
	 * width's modulus and, for the signed ones, the offset of its half */
	int64_t mod = 0, half = 0;
	/* a source whose ONNX dtype fits the target (uint8 to int16, int8 to
	 * int8) needs no wrap: no extra op per element */
	int fits = (a->ot == to) || (to == OT_INT16 && (a->ot == OT_UINT8 || a->ot == OT_INT8)) ||
	           (to == OT_UINT16 && a->ot == OT_UINT8) ||
	           (to == OT_INT32 && (a->ot == OT_UINT8 || a->ot == OT_INT8 || a->ot == OT_UINT16 || a->ot == OT_INT16)) ||
	           (to == OT_UINT32 && (a->ot == OT_UINT8 || a->ot == OT_UINT16));
	if (!dtype_is_float(a->dt) && a->dt != DT_BOOL && !fits) {
		if (to == OT_UINT8 || to == OT_INT8)
			mod = (int64_t)1 << 8;
		else if (to == OT_UINT16 || to == OT_INT16)
			mod = (int64_t)1 << 16;
		else if (to == OT_UINT32 || (to == OT_INT32 && a->dt == DT_I64))
			mod = (int64_t)1 << 32;
		half = to == OT_INT8 || to == OT_INT16 || to == OT_INT32 ? mod / 2 : 0;
	}
	Val *o;
	if (a->known) {
		o = def_known(c, io, 0, (DType)dt, a->rank, a->shape);
		if (!o)
			return -1;
		for (int64_t k = 0; k < a->n; k++) {
			if (a->f && !o->f)
				kseti(o, k, isnan(a->f[k]) ? 0 : (int64_t)a->f[k]);
			else if (bf16)
				kset(o, k, round_bf16(a->f ? (float)a->f[k] : (float)a->i[k]));
			else if (a->f)
				kset(o, k, a->f[k]);
			else if (mod)
				kseti(o, k, (int64_t)(((uint64_t)a->i[k] + (uint64_t)half) & (uint64_t)(mod - 1)) - half);
			else
				kseti(o, k, a->i[k]);
		}
	} else if (mod) {
		/* in i64 (the sum may pass i32), then the held dtype */
		const char *x = ref(c, a);
		o = def(c, io, 0, (DType)dt, a->rank, a->shape, "%s((i64(%s) + %lld) %% %lld - %lld)", dtype_name((DType)dt), x,
		        (long long)half, (long long)mod, (long long)half);
	} else if (bf16) {
		const char *x = ref(c, a);
		o = def(c, io, 0, DT_F32, a->rank, a->shape, a->dt == DT_F32 ? "round_bf16(%s)" : "round_bf16(f32(%s))", x);
	} else if ((DType)dt == a->dt) {
		alias(c, io, 0, a);
		o = find_val(c, out_name(io, 0));
		if (o)
			o->ot = to;
		return 0;
	} else {
		o = def(c, io, 0, (DType)dt, a->rank, a->shape, "%s(%s)", dtype_name((DType)dt), ref(c, a));
	}
	if (!o)
		return -1;
	o->ot = to; /* uint8 or int8 held in i32: a quantization's range */
	return 0;
}

static int tr_clip(Ctx *c, NodeIO *io)
{
	Val *a, *lo = in_(io, 1), *hi = in_(io, 2);
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	char *x = xstrdup(ref(c, a));
	char bl[64], bh[64];
	const char *l = NULL, *h = NULL;
	if (c->opset < 11) {
		Onnx__AttributeProto *ma = attr(io->n, "min"), *xa = attr(io->n, "max");
		if (ma && float_lit(bl, sizeof bl, ma->f, a->dt))
			l = bl;
		if (xa && float_lit(bh, sizeof bh, xa->f, a->dt))
			h = bh;
	} else {
		if (lo)
			l = ref(c, lo);
		if (hi)
			h = ref(c, hi);
	}
	char *cur = x;
	if (l) {
		char *t = tmp(c, "maximum(%s, %s)", cur, l);
		free(cur);
		cur = t;
	}
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, h ? "minimum(%s, %s)" : "%s", cur, h);
	free(cur);
	return o ? 0 : -1;
}

/* Identity, and Dropout in inference or of ratio 0 (torch's dropout(p=0.0)
 * without training=False exports so: swin_t): output 0 is the input. */
static int tr_identity(Ctx *c, NodeIO *io)
{
	if (!in_(io, 0))
		return node_err(c, 0, "needs an input"), -1;
	Val *tm = !strcmp(io->n->op_type, "Dropout") ? in_(io, 2) : NULL;
	if (tm && (!tm->known || kgeti(tm, 0))) {
		Val *r = in_(io, 1);
		const char *why = tm->known ? "Dropout in training mode is supported with a ratio of 0 only (the identity)"
		                            : "Dropout whose training_mode is computed at run time is supported with a ratio "
		                              "of 0 only (the identity)";
		if (!r)
			return node_err(c, 1, "%s: this one's is 0.5, the default", why), -1;
		if (!r->known || r->n != 1)
			return node_err(c, 1, "%s: this one's is not known at import", why), -1;
		if (kget(r, 0) != 0)
			return node_err(c, 1, "%s: this one's is %g", why, kget(r, 0)), -1;
	}
	alias(c, io, 0, io->in[0]);
	if (!strcmp(io->n->op_type, "Dropout") && io->n->n_output > 1 && *io->n->output[1]) {
		/* in inference, or at ratio 0, the mask keeps everything */
		Val *mk = def_known(c, io, 1, DT_BOOL, io->in[0]->rank, io->in[0]->shape);
		if (!mk)
			return -1;
		for (int64_t j = 0; j < mk->n; j++)
			mk->i[j] = 1;
	}
	return 0;
}

/* CastLike: a Cast to the dtype of input 1. */
static int tr_castlike(Ctx *c, NodeIO *io)
{
	Val *t = in_(io, 1);
	if (!t)
		return node_err(c, 0, "needs target_type"), -1;
	return tr_cast(c, io, t->ot ? t->ot : nest_to_onnx(t->dt));
}

static int tr_cast_to(Ctx *c, NodeIO *io)
{
	return tr_cast(c, io, (int)attr_i(io->n, "to", 0));
}

/* Sign: -1, 0 or 1 in the input's dtype. */
static int tr_sign(Ctx *c, NodeIO *io)
{
	Val *x;
	if (inputs(c, io, "a numeric input", 1, &x) < 0)
		return -1;
	if (x->dt == DT_BOOL)
		return node_err(c, 0, "needs a numeric input"), -1;
	const char *xs = ref(c, x);
	const char *d = dtype_name(x->dt);
	return def(c, io, 0, x->dt, x->rank, x->shape, "where(%s > 0, %s(1), where(%s < 0, %s(-1), %s(0)))", xs, d, xs, d,
	           d)
	               ? 0
	               : -1;
}

/* Xor of two bools. */
static int tr_xor(Ctx *c, NodeIO *io)
{
	Val *a, *b;
	if (inputs(c, io, "two bool inputs", 2, &a, &b) < 0)
		return -1;
	if (a->dt != DT_BOOL || b->dt != DT_BOOL)
		return node_err(c, 0, "needs two bool inputs"), -1;
	int r;
	int64_t sh[MAX_RANK];
	if (broadcast(c, a->rank, a->shape, b->rank, b->shape, &r, sh) < 0)
		return -1;
	char *x = xstrdup(ref(c, a));
	const char *y = ref(c, b);
	Val *o = def(c, io, 0, DT_BOOL, r, sh, "(%s || %s) && !(%s && %s)", x, y, x, y);
	free(x);
	return o ? 0 : -1;
}

/* PRelu: x, or x times the (broadcast) slope where x < 0. */
static int tr_prelu(Ctx *c, NodeIO *io)
{
	Val *a, *sl;
	if (inputs(c, io, "a float input and slope", 2, &a, &sl) < 0)
		return -1;
	if (!dtype_is_float(a->dt) || sl->dt != a->dt)
		return node_err(c, 0, "needs a float input and slope"), -1;
	int r;
	int64_t sh[MAX_RANK];
	if (broadcast(c, a->rank, a->shape, sl->rank, sl->shape, &r, sh) < 0)
		return -1;
	char *x = xstrdup(ref(c, a));
	Val *o = def(c, io, 0, a->dt, r, sh, "where(%s < 0.0, %s * %s, %s)", x, ref(c, sl), x, x);
	free(x);
	return o ? 0 : -1;
}

static int tr_max_pool(Ctx *c, NodeIO *io)
{
	return tr_pool(c, io, 1);
}

static int tr_avg_pool(Ctx *c, NodeIO *io)
{
	return tr_pool(c, io, 0);
}

/* The ops translated by one function of the node alone. */
static const struct {
	const char *op;
	int (*fn)(Ctx *, NodeIO *);
} by_node[] = {
	{"Where", tr_where}, {"Cast", tr_cast_to}, {"Clip", tr_clip}, {"Shape", tr_shape}, {"Reshape", tr_reshape},
	{"Flatten", tr_flatten}, {"Squeeze", tr_squeeze}, {"Unsqueeze", tr_squeeze}, {"Transpose", tr_transpose},
	{"Concat", tr_concat}, {"Split", tr_split}, {"Slice", tr_slice}, {"Gather", tr_gather},
	{"GatherElements", tr_gather_elements}, {"Expand", tr_expand}, {"ConstantOfShape", tr_constant_of_shape},
	{"Range", tr_range}, {"Constant", tr_constant}, {"MatMul", tr_matmul}, {"Gemm", tr_gemm}, {"Einsum", tr_einsum},
	{"ArgMax", tr_argmax}, {"Softmax", tr_softmax}, {"LogSoftmax", tr_softmax}, {"LayerNormalization", tr_layernorm},
	{"BatchNormalization", tr_batchnorm}, {"Conv", tr_conv}, {"ConvTranspose", tr_conv_transpose},
	{"MaxPool", tr_max_pool}, {"AveragePool", tr_avg_pool}, {"GlobalAveragePool", tr_global_pool}, {"Trilu", tr_trilu},
	{"Tile", tr_tile}, {"Pad", tr_pad}, {"TopK", tr_topk}, {"CumSum", tr_cumsum}, {"Identity", tr_identity},
	{"Dropout", tr_identity}, {"CastLike", tr_castlike}, {"Sign", tr_sign}, {"Xor", tr_xor}, {"PRelu", tr_prelu},
	{"GlobalMaxPool", tr_global_pool}, {"ArgMin", tr_argmax}, {"InstanceNormalization", tr_instance_norm},
	{"Mean", tr_mean_of}, {"IsNaN", tr_isnan_isinf}, {"IsInf", tr_isnan_isinf}, {"Size", tr_size},
	{"DepthToSpace", tr_depth_space}, {"SpaceToDepth", tr_depth_space}, {"Resize", tr_resize},
	{"Upsample", tr_resize}, {"GridSample", tr_grid_sample}, {"EyeLike", tr_eye_like}, {"Hardmax", tr_hardmax}, {"Mod", tr_mod},
	{"MeanVarianceNormalization", tr_mvn}, {"LRN", tr_lrn}, {"NegativeLogLikelihoodLoss", tr_loss},
	{"SoftmaxCrossEntropyLoss", tr_loss}, {"GatherND", tr_gather_nd}, {"ReverseSequence", tr_reverse_sequence}, {"OneHot", tr_one_hot},
	{"DequantizeLinear", tr_dequantize}, {"QuantizeLinear", tr_quantize}, {"DynamicQuantizeLinear", tr_dynamic_quantize},
	{"MatMulInteger", tr_matmul_integer}, {"QLinearMatMul", tr_qlinear_matmul}, {"ConvInteger", tr_conv_integer},
	{"QLinearConv", tr_qlinear_conv}, {"RNN", tr_rnn}, {"GRU", tr_rnn}, {"LSTM", tr_rnn},
	{"ScatterElements", tr_scatter}, {"Scatter", tr_scatter}, {"ScatterND", tr_scatter},
};

/* Reductions: fn over the axes of pre(x) (%1$s, or %s once), then post. */
static const struct {
	const char *op, *fn, *pre, *post;
} reductions[] = {
	{"ReduceMean", "mean", NULL, NULL},
	{"ReduceSum", "sum", NULL, NULL},
	{"ReduceMax", "amax", NULL, NULL},
	{"ReduceMin", "amin", NULL, NULL},
	{"ReduceProd", "prod", NULL, NULL},
	{"ReduceSumSquare", "sum", "%1$s * %1$s", NULL},
	{"ReduceL1", "sum", "abs(%s)", NULL},
	{"ReduceL2", "sum", "%1$s * %1$s", "sqrt(%s)"},
	{"ReduceLogSum", "sum", NULL, "log(%s)"},
	{"ReduceLogSumExp", "sum", "exp(%s)", "log(%s)"},
};

/* Activations and other elementwise ops written with Nest's (tr_act). */
static const struct {
	const char *op, *fmt, *a;
	double adef;
	const char *b;
	double bdef;
} activations[] = {
	{"LeakyRelu", "where(%1$s >= 0.0, %1$s, %1$s * %2$s)", "alpha", 0.01, NULL, 0},
	{"Elu", "where(%1$s > 0.0, %1$s, %2$s * (exp(%1$s) - 1.0))", "alpha", 1, NULL, 0},
	{"Selu", "where(%1$s > 0.0, %3$s * %1$s, %3$s * (%2$s * exp(%1$s) - %2$s))", "alpha", 1.67326319217681884765625, "gamma", 1.05070102214813232421875},
	{"Celu", "maximum(%1$s, 0.0) + minimum(0.0, %2$s * (exp(%1$s / %2$s) - 1.0))", "alpha", 1, NULL, 0},
	{"HardSigmoid", "maximum(0.0, minimum(1.0, %2$s * %1$s + %3$s))", "alpha", 0.2, "beta", 0.5},
	{"HardSwish", "hardswish(%1$s)", NULL, 0, NULL, 0},
	{"Softplus", "log(exp(%1$s) + 1.0)", NULL, 0, NULL, 0},
	{"Softsign", "%1$s / (abs(%1$s) + 1.0)", NULL, 0, NULL, 0},
	{"ThresholdedRelu", "where(%1$s > %2$s, %1$s, 0.0)", "alpha", 1, NULL, 0},
	{"Sin", "sin(%1$s)", NULL, 0, NULL, 0},
	{"Cos", "cos(%1$s)", NULL, 0, NULL, 0},
	{"Asinh", "log(%1$s + sqrt(%1$s * %1$s + 1.0))", NULL, 0, NULL, 0},
	{"Acosh", "log(%1$s + sqrt(%1$s * %1$s - 1.0))", NULL, 0, NULL, 0},
	{"Atanh", "log((1.0 + %1$s) / (1.0 - %1$s)) * 0.5", NULL, 0, NULL, 0},
	{"Tan", "sin(%1$s) / cos(%1$s)", NULL, 0, NULL, 0},
	{"Asin", "asin(%1$s)", NULL, 0, NULL, 0},
	{"Acos", "acos(%1$s)", NULL, 0, NULL, 0},
	{"Atan", "atan(%1$s)", NULL, 0, NULL, 0},
	{"Sinh", "(exp(%1$s) - exp(-%1$s)) * 0.5", NULL, 0, NULL, 0},
	{"Cosh", "(exp(%1$s) + exp(-%1$s)) * 0.5", NULL, 0, NULL, 0},
	{"Shrink", "where(%1$s < -%2$s, %1$s + %3$s, where(%1$s > %2$s, %1$s - %3$s, 0.0))", "lambd", 0.5, "bias", 0},
};

/* After op (rc 0: translated): ops that move or select values keep the
 * ONNX dtype of their first input of the output's dtype that has one (an
 * int8 zero point through a Reshape or a Max is still int8). rc. */
static int keep_ot(Ctx *c, NodeIO *io, const char *op, int rc)
{
	static const char *const moves[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Slice",
	                                    "Gather", "Tile", "Concat", "Split", "Where", "Clip", "Max", "Min", NULL};
	int m = 0;
	while (moves[m] && strcmp(op, moves[m]))
		m++;
	if (rc || !moves[m])
		return rc;
	for (size_t j = 0; j < io->n->n_output; j++) {
		Val *o = *io->n->output[j] ? find_val(c, io->n->output[j]) : NULL;
		for (int k = 0; o && !o->ot && k < io->nin; k++)
			if (io->in[k] && io->in[k]->dt == o->dt && io->in[k]->ot)
				o->ot = io->in[k]->ot;
	}
	return rc;
}

/* If whose condition is known at import (torch writes one for a squeeze
 * of a dimension whose size it could not infer, and in every
 * LocalResponseNorm): the branch taken, its nodes translated in place (they
 * read the outer graph's values by name), its outputs the node's. */
static int tr_if(Ctx *c, NodeIO *io)
{
	Val *cond;
	if (inputs(c, io, "a condition", 1, &cond) < 0)
		return -1;
	if (!cond->known || cond->n != 1)
		return node_err(c, 1, "an If whose condition is computed at run time is not supported (it must be known "
		                      "at import: fixed input shapes, -D or --freeze)"), -1;
	int yes = kget(cond, 0) != 0;
	Onnx__AttributeProto *a = attr(io->n, yes ? "then_branch" : "else_branch");
	if (!a || !a->g)
		return node_err(c, 0, "no %s", yes ? "then_branch" : "else_branch"), -1;
	Onnx__GraphProto *g = a->g;
	if (g->n_output != io->n->n_output)
		return node_err(c, 0, "the branch has %zu outputs, the node %zu", g->n_output, io->n->n_output), -1;
	for (size_t k = 0; k < g->n_initializer; k++) {
		Onnx__TensorProto *t = g->initializer[k];
		if (!t->name || !*t->name)
			return node_err(c, 0, "an initializer of the branch has no name"), -1;
		if (!tensor_val(c, t, t->name, c->path, 1))
			return -1;
	}
	/* each level takes a frame of translate_node (its inputs' table): a
	 * deeper nest is refused, not a stack overflow */
	if (c->if_depth >= 64)
		return node_err(c, 1, "Ifs nested more than 64 deep are not supported"), -1;
	Onnx__NodeProto *outer = c->node;
	c->if_depth++;
	for (size_t k = 0; k < g->n_node; k++) {
		c->node = g->node[k];
		int rc = translate_node(c, g->node[k]);
		c->node = outer;
		if (rc < 0) {
			c->if_depth--;
			return -1;
		}
	}
	c->if_depth--;
	for (size_t k = 0; k < g->n_output; k++) {
		Val *v = g->output[k]->name ? find_val(c, g->output[k]->name) : NULL;
		if (!v)
			return node_err(c, 0, "branch output '%.200s' is computed by no node", g->output[k]->name), -1;
		alias(c, io, (int)k, v);
	}
	return 0;
}

int translate_node(Ctx *c, Onnx__NodeProto *n)
{
	NodeIO io = {.n = n};
	if (n->n_input > MAX_NODE_INPUTS)
		return node_err(c, 1, "more than %d inputs", MAX_NODE_INPUTS), -1;
	io.nin = (int)n->n_input;
	for (size_t k = 0; k < n->n_input; k++) {
		if (!n->input[k] || !*n->input[k]) {
			io.in[k] = NULL;
			continue;
		}
		io.in[k] = find_val(c, n->input[k]);
		if (!io.in[k])
			return node_err(c, 0, "input '%.200s' is not defined before the node", n->input[k]), -1;
	}
	if (n->domain && !strcmp(n->domain, SUBGRAPH_IN_FUNCTION))
		return node_err(c, 1, "%.60s with a subgraph inside a model-local function is not supported",
		                n->op_type ? n->op_type : "a node"), -1;
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return node_err(c, 1, "operator domain '%.100s' is not supported", n->domain), -1;
	const char *op = n->op_type ? n->op_type : "";
	/* Big initializers stay undecoded where the op only names them (a
	 * weight operand next to a run-time one); everywhere else a fold may
	 * read them. Gather reads its indices, never its data. */
	static const char *const names_only[] = {"MatMul", "Gemm", "Conv", "ConvTranspose", "LayerNormalization", "Add",
	                                         "Sub", "Mul", "Div", "Gather", "Identity", NULL};
	int keep = 0;
	for (int k = 0; names_only[k] && !all_known(&io); k++)
		keep |= !strcmp(op, names_only[k]);
	for (int k = 0; k < io.nin; k++)
		if (io.in[k] && io.in[k]->lazy && !(keep && (k == 0 || strcmp(op, "Gather"))))
			val_decode(io.in[k]);
	static const char *const bin[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual",
	                                  "GreaterOrEqual", "And", "Or", NULL};
	static const char *const un[] = {"Neg", "Sqrt", "Exp", "Log", "Tanh", "Erf", "Relu", "Sigmoid", "Reciprocal",
	                                 "Not", "Abs", "Floor", "Ceil", "Round", NULL};
	for (int k = 0; bin[k]; k++)
		if (!strcmp(op, bin[k]))
			return tr_binary(c, &io, op);
	for (int k = 0; un[k]; k++)
		if (!strcmp(op, un[k]))
			return tr_unary(c, &io, op);
	if (!strcmp(op, "Max") || !strcmp(op, "Min") || !strcmp(op, "Sum"))
		return keep_ot(c, &io, op, tr_variadic(c, &io, !strcmp(op, "Sum") ? "Add" : op));
	if (!strcmp(op, "If"))
		return tr_if(c, &io);
	for (size_t k = 0; k < sizeof by_node / sizeof by_node[0]; k++)
		if (!strcmp(op, by_node[k].op))
			return keep_ot(c, &io, op, by_node[k].fn(c, &io));
	for (size_t k = 0; k < sizeof reductions / sizeof reductions[0]; k++)
		if (!strcmp(op, reductions[k].op))
			return tr_reduce(c, &io, reductions[k].fn, reductions[k].pre, reductions[k].post);
	for (size_t k = 0; k < sizeof activations / sizeof activations[0]; k++)
		if (!strcmp(op, activations[k].op))
			return tr_act(c, &io, activations[k].fmt, activations[k].a, activations[k].adef, activations[k].b,
			              activations[k].bdef);
	return node_err(c, 1, "operator %.100s is not supported", op), -1;
}

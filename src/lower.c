/* lower.c - specialise and lower: every exported function is walked with its
 * argument shapes known; calls are specialised per argument signature, plain
 * functions inlined, for-loops unrolled, region calls kept as OP_CALL nodes of a
 * specialised callee graph. Shapes and dtypes are inferred and checked here, so
 * most diagnostics about expressions come from this file. */
#include "nestc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scopes and context ---- */

typedef struct Scope Scope;
struct Scope {
	Scope *parent; /* NULL for a function's top scope */
	Vec names;
	Vec vals;
};

/* Type parameters while matching a value against Name(args): each parameter is a
 * compile-time value, or a shape variable of the function not bound yet. */
typedef struct TEnv {
	const char **names;
	Value **vals;        /* NULL where pending */
	const char **pending;
	int n;
} TEnv;

typedef struct Ctx {
	Checker *c;
	Arena *a;
	Diag *d;
	Program *p;
	Graph *g;          /* graph being built; NULL in constant expressions */
	Scope *scope;      /* innermost scope; NULL in constant expressions */
	Scope *fnscope;    /* the current function's top scope */
	TEnv *te;          /* type parameters, while matching a named type */
	int in_dim;        /* evaluating a dimension: division must be exact */
	int quiet;         /* the function has a broken statement: no unknown-name errors */
	Vec stack;         /* functions being lowered (Decl *), to reject recursion */
	int64_t budget;    /* nodes and unrolled statements left before giving up */
	int out_of_budget;
} Ctx;

static Value err_value = {.kind = V_ERR};
#define VERR (&err_value)

static Value *vnew(Ctx *x, ValueKind k)
{
	Value *v = arena_alloc(x->a, sizeof *v);
	v->kind = k;
	return v;
}

static Value *vint(Ctx *x, int64_t i)
{
	Value *v = vnew(x, V_INT);
	v->i = i;
	return v;
}

static Value *vfloat(Ctx *x, double f)
{
	Value *v = vnew(x, V_FLOAT);
	v->f = f;
	return v;
}

static Value *vbool(Ctx *x, int b)
{
	Value *v = vnew(x, V_BOOL);
	v->i = b != 0;
	return v;
}

static Value *vtensor(Ctx *x, Node *n)
{
	Value *v = vnew(x, V_TENSOR);
	v->node = n;
	return v;
}

static int is_ct(Value *v)
{
	return v->kind == V_INT || v->kind == V_FLOAT || v->kind == V_BOOL;
}

static void scope_bind(Ctx *x, Scope *s, const char *name, Value *v)
{
	avec_push(x->a, &s->names, (void *)name);
	avec_push(x->a, &s->vals, v);
}

static Value **scope_find(Scope *s, const char *name, Scope **where)
{
	for (; s; s = s->parent)
		for (int i = s->names.n - 1; i >= 0; i--)
			if (!strcmp(s->names.v[i], name)) {
				if (where)
					*where = s;
				return (Value **)&s->vals.v[i];
			}
	return NULL;
}

/* ---- printing values and types for messages ---- */

static ParamInfo *leaf_info(Ctx *x, Value *v)
{
	return &x->p->params[v->pt->param];
}

static int v_is_tensor(Value *v)
{
	return v->kind == V_TENSOR || (v->kind == V_PARAM && v->pt->kind == PT_LEAF);
}

static void v_shape(Ctx *x, Value *v, DType *dt, int *rank, const int64_t **shape)
{
	if (v->kind == V_TENSOR) {
		*dt = v->node->dtype;
		*rank = v->node->rank;
		*shape = v->node->shape;
	} else {
		ParamInfo *pi = leaf_info(x, v);
		*dt = pi->dtype;
		*rank = pi->rank;
		*shape = pi->shape;
	}
}

static Program *cur_prog; /* only for value_type_str of params; set while lowering */

static void ptree_str(Buf *b, PTree *t)
{
	switch (t->kind) {
	case PT_LEAF: {
		ParamInfo *pi = &cur_prog->params[t->param];
		shape_str(b, pi->dtype, pi->rank, pi->shape);
		break;
	}
	case PT_RECORD:
		buf_putc(b, '{');
		for (int i = 0; i < t->n; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", t->names[i]);
			ptree_str(b, t->kids[i]);
		}
		buf_puts(b, " }");
		break;
	case PT_ARRAY:
		ptree_str(b, t->kids[0]);
		buf_printf(b, "[%d]", t->n);
		break;
	}
}

void value_type_str(Buf *b, Value *v)
{
	switch (v->kind) {
	case V_ERR: buf_puts(b, "<error>"); break;
	case V_INT: buf_puts(b, "int"); break;
	case V_FLOAT: buf_puts(b, "float"); break;
	case V_BOOL: buf_puts(b, "bool"); break;
	case V_STR: buf_puts(b, "a string"); break;
	case V_TENSOR: shape_str(b, v->node->dtype, v->node->rank, v->node->shape); break;
	case V_RECORD:
		buf_putc(b, '{');
		for (int i = 0; i < v->n; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", v->names[i]);
			value_type_str(b, v->items[i]);
		}
		buf_puts(b, " }");
		break;
	case V_ARRAY:
		if (v->n)
			value_type_str(b, v->items[0]);
		buf_printf(b, "[%d]", v->n);
		break;
	case V_LIST:
	case V_TUPLE:
		buf_puts(b, v->kind == V_LIST ? "[" : "(");
		for (int i = 0; i < v->n; i++) {
			if (i)
				buf_puts(b, ", ");
			value_type_str(b, v->items[i]);
		}
		buf_puts(b, v->kind == V_LIST ? "]" : ")");
		break;
	case V_PARAM:
		ptree_str(b, v->pt);
		break;
	}
}

/* A short-lived description for a message; the arena keeps it alive. */
static const char *tystr(Ctx *x, Value *v)
{
	Buf b = {0};
	value_type_str(&b, v);
	char *s = arena_strdup(x->a, b.s ? b.s : "");
	buf_free(&b);
	return s;
}

static const char *shstr(Ctx *x, DType dt, int rank, const int64_t *shape)
{
	Buf b = {0};
	shape_str(&b, dt, rank, shape);
	char *s = arena_strdup(x->a, b.s);
	buf_free(&b);
	return s;
}

static const char *nstr(Ctx *x, Node *n)
{
	return shstr(x, n->dtype, n->rank, n->shape);
}

/* ---- nodes ---- */

static int charge(Ctx *x, Loc loc)
{
	if (--x->budget >= 0)
		return 1;
	if (!x->out_of_budget)
		error_at(x->d, loc, "the model is too large to lower (more than 50 million operations after unrolling)");
	x->out_of_budget = 1;
	return 0;
}

static Node *mk_node(Ctx *x, Op op, DType dt, int rank, const int64_t *shape, Loc loc)
{
	charge(x, loc);
	return node_new(x->p, x->g, op, dt, rank, shape, loc);
}

static Node *param_node(Ctx *x, int idx, Loc loc)
{
	Graph *g = x->g;
	if (!g->param_nodes)
		g->param_nodes = arena_alloc(x->a, (size_t)(x->p->nparams + 1) * sizeof(Node *));
	if (!g->param_nodes[idx]) {
		ParamInfo *pi = &x->p->params[idx];
		Node *n = mk_node(x, OP_PARAM, pi->dtype, pi->rank, pi->shape, loc);
		n->a[0] = idx;
		g->param_nodes[idx] = n;
	}
	return g->param_nodes[idx];
}

/* The tensor a value stands for, or NULL (after an error unless quiet). */
static Node *as_tensor(Ctx *x, Value *v, Loc loc, const char *what)
{
	if (v->kind == V_TENSOR)
		return v->node;
	if (v->kind == V_PARAM && v->pt->kind == PT_LEAF) {
		if (!x->g) {
			error_at(x->d, loc, "a param is not a compile-time value");
			return NULL;
		}
		return param_node(x, v->pt->param, loc);
	}
	if (v->kind != V_ERR)
		error_at(x->d, loc, "%s must be a tensor, not %s", what, tystr(x, v));
	return NULL;
}

static Node *const_node(Ctx *x, DType dt, Value *v, Loc loc)
{
	Node *n = mk_node(x, OP_CONST, dt, 0, NULL, loc);
	if (dtype_is_float(dt)) {
		n->fval = v->kind == V_FLOAT ? v->f : (double)v->i;
	} else if (dt == DT_BOOL) {
		n->ival = v->kind == V_FLOAT ? v->f != 0 : v->i != 0;
	} else {
		n->ival = v->i;
		if (dt == DT_I32)
			n->ival = (int32_t)(uint32_t)v->i;
	}
	return n;
}

static Node *unary_node(Ctx *x, Op op, DType dt, Node *in, Loc loc)
{
	Node *n = mk_node(x, op, dt, in->rank, in->shape, loc);
	node_add_input(x->p, n, in);
	return n;
}

static Node *reshape_node(Ctx *x, Node *in, int rank, const int64_t *shape, Loc loc)
{
	if (in->rank == rank && !memcmp(in->shape, shape, (size_t)rank * sizeof(int64_t)))
		return in;
	Node *n = mk_node(x, OP_RESHAPE, in->dtype, rank, shape, loc);
	node_add_input(x->p, n, in);
	return n;
}

/* ---- compile-time arithmetic ---- */

static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static int64_t floormod(int64_t a, int64_t b)
{
	int64_t r = a % b;
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

static Value *ct_binary(Ctx *x, int op, Value *a, Value *b, Loc loc)
{
	if (op == OPR_AND || op == OPR_OR) {
		if (a->kind != V_BOOL || b->kind != V_BOOL) {
			error_at(x->d, loc, "'%s' needs two bools, not %s and %s", opr_text(op), tystr(x, a), tystr(x, b));
			return VERR;
		}
		return vbool(x, op == OPR_AND ? (a->i && b->i) : (a->i || b->i));
	}
	if (a->kind == V_BOOL || b->kind == V_BOOL) {
		if (a->kind == V_BOOL && b->kind == V_BOOL && (op == OPR_EQ || op == OPR_NE))
			return vbool(x, (a->i == b->i) == (op == OPR_EQ));
		error_at(x->d, loc, "'%s' cannot take %s and %s", opr_text(op), tystr(x, a), tystr(x, b));
		return VERR;
	}
	if (op == OPR_MATMUL) {
		error_at(x->d, loc, "'@' needs two tensors, not %s and %s", tystr(x, a), tystr(x, b));
		return VERR;
	}
	if (a->kind == V_INT && b->kind == V_INT) {
		int64_t r = 0, p = a->i, q = b->i;
		int ovf = 0;
		switch (op) {
		case OPR_ADD: ovf = __builtin_add_overflow(p, q, &r); break;
		case OPR_SUB: ovf = __builtin_sub_overflow(p, q, &r); break;
		case OPR_MUL: ovf = __builtin_mul_overflow(p, q, &r); break;
		case OPR_DIV:
		case OPR_MOD:
			if (q == 0) {
				error_at(x->d, loc, "division by zero in a compile-time expression");
				return VERR;
			}
			if (p == INT64_MIN && q == -1) {
				ovf = 1;
				break;
			}
			if (op == OPR_DIV) {
				if (x->in_dim && p % q != 0) {
					error_at(x->d, loc, "%lld / %lld does not divide exactly, as a dimension must",
					         (long long)p, (long long)q);
					return VERR;
				}
				r = floordiv(p, q);
			} else {
				r = floormod(p, q);
			}
			break;
		case OPR_EQ: return vbool(x, p == q);
		case OPR_NE: return vbool(x, p != q);
		case OPR_LT: return vbool(x, p < q);
		case OPR_LE: return vbool(x, p <= q);
		case OPR_GT: return vbool(x, p > q);
		case OPR_GE: return vbool(x, p >= q);
		}
		if (ovf) {
			error_at(x->d, loc, "integer overflow in a compile-time expression");
			return VERR;
		}
		return vint(x, r);
	}
	double p = a->kind == V_FLOAT ? a->f : (double)a->i;
	double q = b->kind == V_FLOAT ? b->f : (double)b->i;
	switch (op) {
	case OPR_ADD: return vfloat(x, p + q);
	case OPR_SUB: return vfloat(x, p - q);
	case OPR_MUL: return vfloat(x, p * q);
	case OPR_DIV: return vfloat(x, p / q);
	case OPR_MOD: {
		double r = fmod(p, q);
		if (r != 0 && ((r < 0) != (q < 0)))
			r += q;
		return vfloat(x, r);
	}
	case OPR_EQ: return vbool(x, p == q);
	case OPR_NE: return vbool(x, p != q);
	case OPR_LT: return vbool(x, p < q);
	case OPR_LE: return vbool(x, p <= q);
	case OPR_GT: return vbool(x, p > q);
	case OPR_GE: return vbool(x, p >= q);
	}
	ice("ct_binary: operator %d", op);
}

/* ---- broadcasting and elementwise ops ---- */

static const char *op_verb(Op op)
{
	switch (op) {
	case OP_ADD: return "add";
	case OP_SUB: return "subtract";
	case OP_MUL: return "multiply";
	case OP_DIV: return "divide";
	case OP_MOD: return "take the remainder of";
	case OP_POW: return "raise";
	case OP_MAX: return "take the maximum of";
	case OP_MIN: return "take the minimum of";
	case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE: return "compare";
	case OP_AND: case OP_OR: return "combine";
	case OP_WHERE: return "select between";
	default: return "combine";
	}
}

/* NumPy broadcasting of two shapes; 0 and a message on a mismatch. */
static int broadcast(Ctx *x, Node *a, Node *b, int *rank, int64_t *shape, Op op, Loc loc)
{
	int r = a->rank > b->rank ? a->rank : b->rank;
	for (int i = 0; i < r; i++) {
		int ia = i - (r - a->rank), ib = i - (r - b->rank);
		int64_t da = ia >= 0 ? a->shape[ia] : 1;
		int64_t db = ib >= 0 ? b->shape[ib] : 1;
		if (da != db && da != 1 && db != 1) {
			error_at(x->d, loc, "cannot %s %s and %s: axis %d is %lld vs %lld", op_verb(op), nstr(x, a),
			         nstr(x, b), i, (long long)da, (long long)db);
			return 0;
		}
		shape[i] = da == 1 ? db : da;
	}
	*rank = r;
	return 1;
}

static Value *emit_binary(Ctx *x, Op op, Value *va, Value *vb, Loc loc);

/* Make both operands tensors: a compile-time number takes the other side's dtype. */
static int operands(Ctx *x, Op op, Value *va, Value *vb, Node **na, Node **nb, Loc loc)
{
	*na = *nb = NULL;
	if (va->kind == V_ERR || vb->kind == V_ERR)
		return 0;
	int ta = v_is_tensor(va), tb = v_is_tensor(vb);
	if (ta)
		*na = as_tensor(x, va, loc, "operand");
	if (tb)
		*nb = as_tensor(x, vb, loc, "operand");
	if ((ta && !*na) || (tb && !*nb))
		return 0;
	for (int side = 0; side < 2; side++) {
		Value *cv = side ? vb : va;
		Node *other = side ? *na : *nb;
		Node **dst = side ? nb : na;
		if (*dst)
			continue;
		if (!is_ct(cv)) {
			error_at(x->d, loc, "cannot %s %s and %s", op_verb(op), tystr(x, va), tystr(x, vb));
			return 0;
		}
		DType dt = other->dtype;
		if (cv->kind == V_FLOAT && !dtype_is_float(dt)) {
			error_at(x->d, loc, "cannot %s %s and the float %g: the tensor is %s (convert it with f32(...))",
			         op_verb(op), nstr(x, other), cv->f, dtype_name(dt));
			return 0;
		}
		if (cv->kind == V_BOOL && dt != DT_BOOL) {
			error_at(x->d, loc, "cannot %s %s and a bool", op_verb(op), nstr(x, other));
			return 0;
		}
		if (cv->kind != V_BOOL && dt == DT_BOOL) {
			error_at(x->d, loc, "cannot %s %s and a number", op_verb(op), nstr(x, other));
			return 0;
		}
		*dst = const_node(x, dt, cv, loc);
	}
	if ((*na)->dtype != (*nb)->dtype) {
		error_at(x->d, loc, "cannot %s %s and %s: the dtypes differ (convert one with %s(...))", op_verb(op),
		         nstr(x, *na), nstr(x, *nb), dtype_name((*na)->dtype));
		return 0;
	}
	return 1;
}

static Value *emit_binary(Ctx *x, Op op, Value *va, Value *vb, Loc loc)
{
	Node *a, *b;
	if (!operands(x, op, va, vb, &a, &b, loc))
		return VERR;
	DType dt = a->dtype;
	switch (op) {
	case OP_AND: case OP_OR:
		if (dt != DT_BOOL) {
			error_at(x->d, loc, "'%s' needs bool tensors, not %s", op == OP_AND ? "&&" : "||", nstr(x, a));
			return VERR;
		}
		break;
	case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MOD: case OP_MAX: case OP_MIN:
	case OP_LT: case OP_LE: case OP_GT: case OP_GE:
		if (dt == DT_BOOL) {
			error_at(x->d, loc, "cannot %s bool tensors (convert them with i32(...) first)", op_verb(op));
			return VERR;
		}
		break;
	case OP_POW:
		if (!dtype_is_float(dt)) {
			error_at(x->d, loc, "pow needs a float dtype, not %s", nstr(x, a));
			return VERR;
		}
		break;
	default:
		break;
	}
	int rank;
	int64_t shape[MAX_RANK];
	if (!broadcast(x, a, b, &rank, shape, op, loc))
		return VERR;
	int cmp = op == OP_EQ || op == OP_NE || op == OP_LT || op == OP_LE || op == OP_GT || op == OP_GE;
	Node *n = mk_node(x, op, cmp ? DT_BOOL : dt, rank, shape, loc);
	node_add_input(x->p, n, a);
	node_add_input(x->p, n, b);
	return vtensor(x, n);
}

static Value *emit_matmul(Ctx *x, Value *va, Value *vb, Loc loc)
{
	if (va->kind == V_ERR || vb->kind == V_ERR)
		return VERR;
	if (!v_is_tensor(va) || !v_is_tensor(vb)) {
		error_at(x->d, loc, "'@' needs two tensors, not %s and %s", tystr(x, va), tystr(x, vb));
		return VERR;
	}
	Node *a = as_tensor(x, va, loc, "operand"), *b = as_tensor(x, vb, loc, "operand");
	if (!a || !b)
		return VERR;
	if (a->rank == 0 || b->rank == 0) {
		error_at(x->d, loc, "cannot multiply %s and %s as matrices: '@' needs at least one axis on each side",
		         nstr(x, a), nstr(x, b));
		return VERR;
	}
	if (a->dtype != b->dtype) {
		error_at(x->d, loc, "cannot multiply %s and %s as matrices: the dtypes differ", nstr(x, a), nstr(x, b));
		return VERR;
	}
	if (a->dtype == DT_BOOL) {
		error_at(x->d, loc, "cannot multiply bool tensors as matrices");
		return VERR;
	}
	/* NumPy matmul: 1-d operands get a unit axis that is dropped afterwards */
	int64_t as[MAX_RANK + 1], bs[MAX_RANK + 1];
	int ar = a->rank, br = b->rank;
	if (ar == 1) {
		as[0] = 1;
		as[1] = a->shape[0];
		ar = 2;
	} else {
		memcpy(as, a->shape, (size_t)ar * sizeof(int64_t));
	}
	if (br == 1) {
		bs[0] = b->shape[0];
		bs[1] = 1;
		br = 2;
	} else {
		memcpy(bs, b->shape, (size_t)br * sizeof(int64_t));
	}
	if (as[ar - 1] != bs[br - 2]) {
		error_at(x->d, loc, "cannot multiply %s and %s as matrices: inner dimensions %lld and %lld differ",
		         nstr(x, a), nstr(x, b), (long long)as[ar - 1], (long long)bs[br - 2]);
		return VERR;
	}
	int batch = (ar > br ? ar : br) - 2;
	int64_t shape[MAX_RANK + 2];
	for (int i = 0; i < batch; i++) {
		int ia = i - (batch - (ar - 2)), ib = i - (batch - (br - 2));
		int64_t da = ia >= 0 ? as[ia] : 1, db = ib >= 0 ? bs[ib] : 1;
		if (da != db && da != 1 && db != 1) {
			error_at(x->d, loc, "cannot multiply %s and %s as matrices: batch axis %d is %lld vs %lld",
			         nstr(x, a), nstr(x, b), i, (long long)da, (long long)db);
			return VERR;
		}
		shape[i] = da == 1 ? db : da;
	}
	int r = batch;
	if (a->rank != 1)
		shape[r++] = as[ar - 2];
	if (b->rank != 1)
		shape[r++] = bs[br - 1];
	if (r > MAX_RANK) {
		error_at(x->d, loc, "result has more than %d axes", MAX_RANK);
		return VERR;
	}
	Node *n = mk_node(x, OP_MATMUL, a->dtype, r, shape, loc);
	node_add_input(x->p, n, a);
	node_add_input(x->p, n, b);
	return vtensor(x, n);
}

/* ---- expressions ---- */

static Value *eval(Ctx *x, Expr *e);
static Value *call_function(Ctx *x, Global *fn, Expr *call);
static Value *call_builtin(Ctx *x, const char *name, Expr *call);
static Value *index_value(Ctx *x, Value *base, Expr *e);

static Value *param_value(Ctx *x, Global *g)
{
	if (!g->ptree)
		return VERR; /* its declaration had an error */
	Value *v = vnew(x, V_PARAM);
	v->pt = g->ptree;
	return v;
}

static Value *lookup_name(Ctx *x, Expr *e)
{
	if (x->te) {
		for (int i = 0; i < x->te->n; i++)
			if (!strcmp(x->te->names[i], e->name)) {
				if (x->te->vals[i])
					return x->te->vals[i];
				Value **pv = x->fnscope ? scope_find(x->fnscope, x->te->pending[i], NULL) : NULL;
				if (pv)
					return *pv;
				error_at(x->d, e->loc, "cannot infer shape variable '%s' here: bind it alone in a dimension first",
				         x->te->pending[i]);
				return VERR;
			}
	}
	Value **pv = x->scope ? scope_find(x->scope, e->name, NULL) : NULL;
	if (pv)
		return *pv;
	Global *g = lookup_global(x->c, e->name);
	if (g) {
		switch (g->kind) {
		case G_CONST:
			if (g->state == 1) {
				error_at(x->d, e->loc, "const '%s' is defined in terms of itself", e->name);
				return VERR;
			}
			if (g->state == 0) {
				/* consts may be used before their declaration */
				g->state = 1;
				Ctx sub = *x;
				sub.g = NULL;
				sub.scope = sub.fnscope = NULL;
				sub.te = NULL;
				sub.in_dim = 0;
				g->value = eval(&sub, g->decl->value);
				g->state = 2;
			}
			return g->value;
		case G_PARAM:
			if (!x->g) {
				error_at(x->d, e->loc, "param '%s' is not a compile-time value", e->name);
				return VERR;
			}
			return param_value(x, g);
		case G_FN:
			error_at(x->d, e->loc, "function '%s' cannot be used as a value; call it", e->name);
			return VERR;
		case G_TYPE:
			error_at(x->d, e->loc, "type '%s' cannot be used as a value", e->name);
			return VERR;
		}
	}
	if (!x->quiet) {
		if (is_builtin(e->name))
			error_at(x->d, e->loc, "'%s' is a builtin function; call it with arguments", e->name);
		else
			error_at(x->d, e->loc, "unknown name '%s'", e->name);
	}
	return VERR;
}

static Value *field_value(Ctx *x, Value *base, const char *name, Loc loc)
{
	if (base->kind == V_ERR)
		return VERR;
	if (base->kind == V_RECORD) {
		for (int i = 0; i < base->n; i++)
			if (!strcmp(base->names[i], name))
				return base->items[i];
	} else if (base->kind == V_PARAM && base->pt->kind == PT_RECORD) {
		for (int i = 0; i < base->pt->n; i++)
			if (!strcmp(base->pt->names[i], name)) {
				Value *v = vnew(x, V_PARAM);
				v->pt = base->pt->kids[i];
				return v;
			}
	} else {
		error_at(x->d, loc, "%s has no fields (looking for '%s')", tystr(x, base), name);
		return VERR;
	}
	error_at(x->d, loc, "record %s has no field '%s'", tystr(x, base), name);
	return VERR;
}

static Value *eval(Ctx *x, Expr *e)
{
	switch (e->kind) {
	case E_INT: return vint(x, e->ival);
	case E_FLOAT: return vfloat(x, e->fval);
	case E_BOOL: return vbool(x, (int)e->ival);
	case E_STR: {
		Value *v = vnew(x, V_STR);
		v->s = e->name;
		return v;
	}
	case E_NAME:
		return lookup_name(x, e);
	case E_BINARY: {
		Value *a = eval(x, e->a);
		Value *b = eval(x, e->b);
		if (a->kind == V_ERR || b->kind == V_ERR)
			return VERR;
		if (is_ct(a) && is_ct(b))
			return ct_binary(x, e->op, a, b, e->loc);
		if (!x->g) {
			error_at(x->d, e->loc, "this expression must be a compile-time value");
			return VERR;
		}
		static const Op ops[] = {
			[OPR_OR] = OP_OR, [OPR_AND] = OP_AND, [OPR_EQ] = OP_EQ, [OPR_NE] = OP_NE,
			[OPR_LT] = OP_LT, [OPR_LE] = OP_LE, [OPR_GT] = OP_GT, [OPR_GE] = OP_GE,
			[OPR_ADD] = OP_ADD, [OPR_SUB] = OP_SUB, [OPR_MUL] = OP_MUL, [OPR_DIV] = OP_DIV,
			[OPR_MOD] = OP_MOD,
		};
		if (e->op == OPR_MATMUL)
			return emit_matmul(x, a, b, e->loc);
		return emit_binary(x, ops[e->op], a, b, e->loc);
	}
	case E_UNARY: {
		Value *a = eval(x, e->a);
		if (a->kind == V_ERR)
			return VERR;
		if (e->op == OPR_NEG) {
			if (a->kind == V_INT) {
				if (a->i == INT64_MIN) {
					error_at(x->d, e->loc, "integer overflow in a compile-time expression");
					return VERR;
				}
				return vint(x, -a->i);
			}
			if (a->kind == V_FLOAT)
				return vfloat(x, -a->f);
			Node *n = v_is_tensor(a) ? as_tensor(x, a, e->loc, "operand") : NULL;
			if (!n) {
				if (!v_is_tensor(a))
					error_at(x->d, e->loc, "cannot negate %s", tystr(x, a));
				return VERR;
			}
			if (n->dtype == DT_BOOL) {
				error_at(x->d, e->loc, "cannot negate a bool tensor (use '!')");
				return VERR;
			}
			return vtensor(x, unary_node(x, OP_NEG, n->dtype, n, e->loc));
		}
		if (a->kind == V_BOOL)
			return vbool(x, !a->i);
		Node *n = v_is_tensor(a) ? as_tensor(x, a, e->loc, "operand") : NULL;
		if (!n || n->dtype != DT_BOOL) {
			if (!v_is_tensor(a) || n)
				error_at(x->d, e->loc, "'!' needs a bool, not %s", tystr(x, a));
			return VERR;
		}
		return vtensor(x, unary_node(x, OP_NOT, DT_BOOL, n, e->loc));
	}
	case E_CALL: {
		if (e->a->kind != E_NAME) {
			error_at(x->d, e->a->loc, "only named functions can be called");
			return VERR;
		}
		const char *name = e->a->name;
		if (x->scope && scope_find(x->scope, name, NULL)) {
			error_at(x->d, e->a->loc, "'%s' is a local value, not a function", name);
			return VERR;
		}
		Global *g = lookup_global(x->c, name);
		if (g && g->kind == G_FN)
			return call_function(x, g, e);
		if (g) {
			error_at(x->d, e->a->loc, "'%s' is not a function", name);
			return VERR;
		}
		if (is_builtin(name))
			return call_builtin(x, name, e);
		if (!x->quiet)
			error_at(x->d, e->a->loc, "unknown function '%s'", name);
		return VERR;
	}
	case E_NAMED:
		error_at(x->d, e->loc, "a named argument is only allowed in a call");
		return VERR;
	case E_FIELD:
		return field_value(x, eval(x, e->a), e->name, e->name_loc);
	case E_INDEX:
		return index_value(x, eval(x, e->a), e);
	case E_SLICE:
		error_at(x->d, e->loc, "a slice is only allowed inside [ ]");
		return VERR;
	case E_LIST: {
		Value *v = vnew(x, V_LIST);
		v->n = e->nargs;
		v->items = arena_alloc(x->a, (size_t)(e->nargs + 1) * sizeof(Value *));
		for (int i = 0; i < e->nargs; i++) {
			v->items[i] = eval(x, e->args[i]);
			if (v->items[i]->kind == V_ERR)
				return VERR;
		}
		return v;
	}
	case E_RECORD: {
		Value *v = vnew(x, V_RECORD);
		v->n = e->nargs;
		v->names = e->names;
		v->items = arena_alloc(x->a, (size_t)(e->nargs + 1) * sizeof(Value *));
		for (int i = 0; i < e->nargs; i++) {
			for (int k = 0; k < i; k++)
				if (!strcmp(e->names[k], e->names[i])) {
					error_at(x->d, e->args[i]->loc, "field '%s' appears twice", e->names[i]);
					return VERR;
				}
			v->items[i] = eval(x, e->args[i]);
			if (v->items[i]->kind == V_ERR)
				return VERR;
		}
		return v;
	}
	}
	ice("eval: expression kind %d", e->kind);
}

Value *eval_const_expr(Checker *c, Expr *e)
{
	Ctx x = {.c = c, .a = c->a, .d = c->d, .p = c->p, .budget = 1000000};
	cur_prog = c->p;
	return eval(&x, e);
}

/* A compile-time int, or 0 after an error. */
static int ct_int(Ctx *x, Value *v, Loc loc, const char *what, int64_t *out)
{
	if (v->kind == V_INT) {
		*out = v->i;
		return 1;
	}
	if (v->kind != V_ERR)
		error_at(x->d, loc, "%s must be a compile-time integer, not %s", what, tystr(x, v));
	return 0;
}

/* ---- indexing ---- */

static int norm_axis(Ctx *x, int64_t axis, int rank, Loc loc, int *out)
{
	if (axis < -rank || axis >= rank || rank == 0) {
		error_at(x->d, loc, "axis %lld is out of range for a tensor of rank %d", (long long)axis, rank);
		return 0;
	}
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 1;
}

static Value *index_value(Ctx *x, Value *base, Expr *e)
{
	if (base->kind == V_ERR)
		return VERR;
	/* an element of a param array or of an array value */
	if ((base->kind == V_PARAM && base->pt->kind == PT_ARRAY) || base->kind == V_ARRAY || base->kind == V_LIST) {
		int n = base->kind == V_PARAM ? base->pt->n : base->n;
		if (e->nargs != 1 || e->args[0]->kind == E_SLICE) {
			error_at(x->d, e->loc, "an array takes exactly one index");
			return VERR;
		}
		int64_t i;
		if (!ct_int(x, eval(x, e->args[0]), e->args[0]->loc, "an array index", &i))
			return VERR;
		if (i < -n || i >= n) {
			error_at(x->d, e->args[0]->loc, "index %lld is out of range for an array of %d elements", (long long)i, n);
			return VERR;
		}
		if (i < 0)
			i += n;
		if (base->kind != V_PARAM)
			return base->items[i];
		Value *v = vnew(x, V_PARAM);
		v->pt = base->pt->kids[i];
		return v;
	}
	if (!v_is_tensor(base)) {
		error_at(x->d, e->loc, "cannot index %s", tystr(x, base));
		return VERR;
	}
	if (!x->g) {
		error_at(x->d, e->loc, "this expression must be a compile-time value");
		return VERR;
	}
	Node *t = as_tensor(x, base, e->loc, "indexed value");
	if (!t)
		return VERR;
	/* gather: an integer tensor as the only index */
	if (e->nargs == 1 && e->args[0]->kind != E_SLICE) {
		Value *iv = eval(x, e->args[0]);
		if (iv->kind == V_ERR)
			return VERR;
		if (v_is_tensor(iv)) {
			Node *idx = as_tensor(x, iv, e->args[0]->loc, "index");
			if (!idx)
				return VERR;
			if (idx->dtype != DT_I32 && idx->dtype != DT_I64) {
				error_at(x->d, e->args[0]->loc, "a tensor index must be i32 or i64, not %s", nstr(x, idx));
				return VERR;
			}
			if (t->rank == 0) {
				error_at(x->d, e->loc, "cannot gather from a 0-d tensor");
				return VERR;
			}
			int64_t shape[MAX_RANK];
			int r = 0;
			for (int i = 0; i < idx->rank; i++)
				shape[r++] = idx->shape[i];
			if (idx->rank + t->rank - 1 > MAX_RANK) {
				error_at(x->d, e->loc, "result has more than %d axes", MAX_RANK);
				return VERR;
			}
			for (int i = 1; i < t->rank; i++)
				shape[r++] = t->shape[i];
			Node *n = mk_node(x, OP_GATHER, t->dtype, r, shape, e->loc);
			node_add_input(x->p, n, t);
			node_add_input(x->p, n, idx);
			return vtensor(x, n);
		}
	}
	if (e->nargs > t->rank) {
		error_at(x->d, e->loc, "too many indices (%d) for %s", e->nargs, nstr(x, t));
		return VERR;
	}
	int64_t start[MAX_RANK], size[MAX_RANK], keep[MAX_RANK];
	int nkeep = 0;
	for (int k = 0; k < t->rank; k++) {
		int64_t dim = t->shape[k];
		start[k] = 0;
		size[k] = dim;
		if (k >= e->nargs) {
			keep[nkeep++] = dim;
			continue;
		}
		Expr *ie = e->args[k];
		if (ie->kind == E_SLICE) {
			int64_t lo = 0, hi = dim;
			if (ie->a && !ct_int(x, eval(x, ie->a), ie->a->loc, "a slice bound", &lo))
				return VERR;
			if (ie->b && !ct_int(x, eval(x, ie->b), ie->b->loc, "a slice bound", &hi))
				return VERR;
			int64_t l = lo < 0 ? lo + dim : lo, h = hi < 0 ? hi + dim : hi;
			if (l < 0 || l > dim || h < 0 || h > dim || l > h) {
				error_at(x->d, ie->loc, "slice %lld:%lld is out of range for axis %d of %s", (long long)lo,
				         (long long)hi, k, nstr(x, t));
				return VERR;
			}
			start[k] = l;
			size[k] = h - l;
			keep[nkeep++] = h - l;
		} else {
			Value *iv = eval(x, ie);
			if (iv->kind != V_ERR && v_is_tensor(iv)) {
				error_at(x->d, ie->loc, "a tensor index must be the only index");
				return VERR;
			}
			int64_t i;
			if (!ct_int(x, iv, ie->loc, "an index", &i))
				return VERR;
			if (i < -dim || i >= dim) {
				error_at(x->d, ie->loc, "index %lld is out of range for axis %d of %s", (long long)i, k, nstr(x, t));
				return VERR;
			}
			start[k] = i < 0 ? i + dim : i;
			size[k] = 1;
		}
	}
	Node *n = t;
	int whole = 1;
	for (int k = 0; k < t->rank; k++)
		if (start[k] != 0 || size[k] != t->shape[k])
			whole = 0;
	if (!whole) {
		n = mk_node(x, OP_SLICE, t->dtype, t->rank, size, e->loc);
		node_add_input(x->p, n, t);
		for (int k = 0; k < t->rank; k++)
			n->a[k] = start[k];
	}
	return vtensor(x, reshape_node(x, n, nkeep, keep, e->loc));
}

/* ---- statements ---- */

typedef struct FnResult {
	Value *value; /* V_TUPLE for several results */
	Loc loc;      /* the return statement */
	Stmt *ret;
	int done;
} FnResult;

static void lower_stmts(Ctx *x, Stmt **body, int n, FnResult *res);

static void bind_let(Ctx *x, Stmt *s, Value *v)
{
	if (s->nnames == 1) {
		if (v->kind == V_TUPLE) {
			error_at(x->d, s->value->loc, "this gives %d values; bind them with 'let a, b = ...'", v->n);
			v = VERR;
		}
	} else if (v->kind != V_ERR && (v->kind != V_TUPLE || v->n != s->nnames)) {
		error_at(x->d, s->value->loc, "%d names but %d value%s", s->nnames, v->kind == V_TUPLE ? v->n : 1,
		         v->kind == V_TUPLE && v->n != 1 ? "s" : "");
		v = VERR;
	}
	for (int k = 0; k < s->nnames; k++) {
		Value *item = s->nnames == 1 ? v : v->kind == V_TUPLE ? v->items[k] : VERR;
		if (s->kind == S_LET) {
			Scope *where = NULL;
			if (scope_find(x->scope, s->names[k], &where) && where == x->scope) {
				error_at(x->d, s->name_locs[k], "'%s' is already defined here; rebind it with '%s = ...'",
				         s->names[k], s->names[k]);
				continue;
			}
			for (int j = 0; j < k; j++)
				if (!strcmp(s->names[j], s->names[k]))
					error_at(x->d, s->name_locs[k], "'%s' appears twice", s->names[k]);
			scope_bind(x, x->scope, s->names[k], item);
		} else {
			Value **slot = scope_find(x->scope, s->names[k], NULL);
			if (slot)
				*slot = item;
			else if (!lookup_global(x->c, s->names[k])) /* check.c reported it; binding the name keeps later uses quiet */
				scope_bind(x, x->scope, s->names[k], VERR);
		}
	}
}

static void lower_stmts(Ctx *x, Stmt **body, int n, FnResult *res)
{
	for (int i = 0; i < n && !x->out_of_budget; i++) {
		Stmt *s = body[i];
		if (!charge(x, s->loc))
			return;
		switch (s->kind) {
		case S_LET:
		case S_ASSIGN:
			bind_let(x, s, eval(x, s->value));
			break;
		case S_FOR: {
			int64_t lo, hi;
			Value *vlo = eval(x, s->lo), *vhi = eval(x, s->hi);
			int ok = ct_int(x, vlo, s->lo->loc, "a loop bound", &lo);
			ok &= ct_int(x, vhi, s->hi->loc, "a loop bound", &hi);
			if (!ok)
				break;
			for (int64_t it = lo; it < hi && !x->out_of_budget; it++) {
				Scope inner = {.parent = x->scope};
				scope_bind(x, &inner, s->names[0], vint(x, it));
				x->scope = &inner;
				FnResult sub = {0};
				lower_stmts(x, s->body, s->nbody, &sub);
				x->scope = inner.parent;
				if (sub.done) {
					error_at(x->d, sub.loc, "return inside a for loop");
					break;
				}
			}
			break;
		}
		case S_RETURN: {
			Value *v;
			if (s->nvalues == 1) {
				v = eval(x, s->values[0]);
			} else {
				v = vnew(x, V_TUPLE);
				v->n = s->nvalues;
				v->items = arena_alloc(x->a, (size_t)s->nvalues * sizeof(Value *));
				for (int k = 0; k < s->nvalues; k++) {
					v->items[k] = eval(x, s->values[k]);
					if (v->items[k]->kind == V_ERR)
						v = VERR;
					if (v == VERR)
						break;
				}
			}
			res->value = v;
			res->loc = s->loc;
			res->ret = s;
			res->done = 1;
			return;
		}
		}
	}
}

/* ---- matching arguments against declared types ---- */

static Value *match_type(Ctx *x, TypeExpr *t, Value *v, const char *what, Loc loc);

/* Match one dimension expression against an actual size: a bare name that is not
 * bound yet becomes a shape variable of the function. */
static int match_dim(Ctx *x, Expr *dim, int64_t actual, int64_t *expected)
{
	const char *name = NULL;
	if (dim->kind == E_NAME) {
		name = dim->name;
		if (x->te) {
			for (int i = 0; i < x->te->n; i++)
				if (!strcmp(x->te->names[i], name)) {
					if (x->te->vals[i]) {
						name = NULL;
						break;
					}
					name = x->te->pending[i];
					break;
				}
		}
	}
	if (name && !scope_find(x->fnscope, name, NULL) && !lookup_global(x->c, name)) {
		scope_bind(x, x->fnscope, name, vint(x, actual));
		return 1;
	}
	TEnv *te = x->te;
	if (name && dim->kind == E_NAME && te) {
		/* the name maps to a function-level shape variable that is bound: compare */
		Value **pv = scope_find(x->fnscope, name, NULL);
		Value *v = pv ? *pv : lookup_name(x, &(Expr){.kind = E_NAME, .name = name, .loc = dim->loc});
		if (v->kind == V_ERR)
			return 1;
		if (!ct_int(x, v, dim->loc, "a dimension", expected))
			return 1;
		return *expected == actual;
	}
	x->in_dim++;
	Value *v = eval(x, dim);
	x->in_dim--;
	if (v->kind == V_ERR)
		return 1;
	if (!ct_int(x, v, dim->loc, "a dimension", expected))
		return 1;
	return *expected == actual;
}

static Value *make_tenv_and_match(Ctx *x, Global *g, TypeExpr *t, Value *v, const char *what, Loc loc)
{
	Decl *td = g->decl;
	TEnv *te = arena_alloc(x->a, sizeof *te);
	te->n = td->ntparams;
	te->names = td->tparams;
	te->vals = arena_alloc(x->a, (size_t)(te->n + 1) * sizeof(Value *));
	te->pending = arena_alloc(x->a, (size_t)(te->n + 1) * sizeof(char *));
	for (int i = 0; i < te->n && i < t->nargs; i++) {
		Expr *ae = t->args[i];
		const char *pend = NULL;
		if (ae->kind == E_NAME) {
			/* a bare name: an enclosing type parameter, a bound variable, or a new shape variable */
			int found = 0;
			if (x->te)
				for (int k = 0; k < x->te->n; k++)
					if (!strcmp(x->te->names[k], ae->name)) {
						found = 1;
						if (x->te->vals[k])
							te->vals[i] = x->te->vals[k];
						else if (x->fnscope && scope_find(x->fnscope, x->te->pending[k], NULL))
							te->vals[i] = *scope_find(x->fnscope, x->te->pending[k], NULL);
						else
							pend = x->te->pending[k];
					}
			if (!found) {
				if (x->fnscope && scope_find(x->fnscope, ae->name, NULL))
					te->vals[i] = *scope_find(x->fnscope, ae->name, NULL);
				else if (!lookup_global(x->c, ae->name) && x->fnscope)
					pend = ae->name;
			}
		}
		if (pend) {
			te->pending[i] = pend;
			continue;
		}
		if (!te->vals[i]) {
			x->in_dim++;
			Value *av = eval(x, ae);
			x->in_dim--;
			int64_t iv;
			if (!ct_int(x, av, ae->loc, "a type's dimension argument", &iv))
				return VERR;
			te->vals[i] = vint(x, iv);
		}
	}
	TEnv *saved = x->te;
	x->te = te;
	Value *r = match_type(x, td->type, v, what, loc);
	x->te = saved;
	return r;
}

static Value *match_type(Ctx *x, TypeExpr *t, Value *v, const char *what, Loc loc)
{
	if (v->kind == V_ERR)
		return VERR;
	switch (t->kind) {
	case T_TENSOR: {
		if (is_ct(v) && t->ndims == 0 && !t->any_shape && x->g) {
			/* a compile-time number where a 0-d tensor is expected */
			if (v->kind == V_FLOAT && !dtype_is_float(t->dtype)) {
				error_at(x->d, loc, "%s expects %s, not a float", what, dtype_name(t->dtype));
				return VERR;
			}
			return vtensor(x, const_node(x, t->dtype, v, loc));
		}
		if (!v_is_tensor(v)) {
			Buf b = {0};
			type_dump(&b, t);
			error_at(x->d, loc, "%s expects %s, not %s", what, b.s, tystr(x, v));
			buf_free(&b);
			return VERR;
		}
		DType dt;
		int rank;
		const int64_t *shape;
		v_shape(x, v, &dt, &rank, &shape);
		Buf b = {0};
		type_dump(&b, t);
		int ok = dt == t->dtype;
		if (ok && !t->any_shape && rank != t->ndims) {
			error_at(x->d, loc, "%s expects %s, not %s: rank %d vs %d", what, b.s, shstr(x, dt, rank, shape),
			         t->ndims, rank);
			buf_free(&b);
			return VERR;
		}
		if (!ok) {
			error_at(x->d, loc, "%s expects %s, not %s", what, b.s, shstr(x, dt, rank, shape));
			buf_free(&b);
			return VERR;
		}
		if (!t->any_shape)
			for (int i = 0; i < rank; i++) {
				int64_t want = 0;
				if (!match_dim(x, t->dims[i], shape[i], &want)) {
					error_at(x->d, loc, "%s expects %s, not %s: axis %d is %lld, expected %lld", what, b.s,
					         shstr(x, dt, rank, shape), i, (long long)shape[i], (long long)want);
					buf_free(&b);
					return VERR;
				}
			}
		buf_free(&b);
		return v;
	}
	case T_SCALAR: {
		int ok = (t->scalar == SC_INT && v->kind == V_INT) || (t->scalar == SC_BOOL && v->kind == V_BOOL) ||
		         (t->scalar == SC_FLOAT && (v->kind == V_FLOAT || v->kind == V_INT));
		if (!ok) {
			error_at(x->d, loc, "%s expects a compile-time %s, not %s", what,
			         t->scalar == SC_INT ? "int" : t->scalar == SC_FLOAT ? "float" : "bool", tystr(x, v));
			return VERR;
		}
		if (t->scalar == SC_FLOAT && v->kind == V_INT)
			return vfloat(x, (double)v->i);
		return v;
	}
	case T_NAMED: {
		Global *g = lookup_global(x->c, t->name);
		if (!g || g->kind != G_TYPE || g->decl->ntparams != t->nargs)
			return VERR; /* reported by check.c */
		return make_tenv_and_match(x, g, t, v, what, loc);
	}
	case T_RECORD: {
		int isrec = v->kind == V_RECORD || (v->kind == V_PARAM && v->pt->kind == PT_RECORD);
		if (!isrec) {
			error_at(x->d, loc, "%s expects a record, not %s", what, tystr(x, v));
			return VERR;
		}
		Value *r = vnew(x, V_RECORD);
		r->n = t->nfields;
		r->names = arena_alloc(x->a, (size_t)(t->nfields + 1) * sizeof(char *));
		r->items = arena_alloc(x->a, (size_t)(t->nfields + 1) * sizeof(Value *));
		for (int i = 0; i < t->nfields; i++) {
			const char *fname = t->fields[i].name;
			Value *fv = NULL;
			if (v->kind == V_RECORD) {
				for (int k = 0; k < v->n; k++)
					if (!strcmp(v->names[k], fname))
						fv = v->items[k];
			} else {
				for (int k = 0; k < v->pt->n; k++)
					if (!strcmp(v->pt->names[k], fname)) {
						fv = vnew(x, V_PARAM);
						fv->pt = v->pt->kids[k];
					}
			}
			if (!fv) {
				error_at(x->d, loc, "%s expects a record with a field '%s'; %s has none", what, fname, tystr(x, v));
				return VERR;
			}
			char *sub = arena_printf(x->a, "%s, field '%s',", what, fname);
			r->names[i] = fname;
			r->items[i] = match_type(x, t->fields[i].type, fv, sub, loc);
			if (r->items[i]->kind == V_ERR)
				return VERR;
		}
		return r;
	}
	case T_ARRAY: {
		int n;
		if (v->kind == V_ARRAY)
			n = v->n;
		else if (v->kind == V_PARAM && v->pt->kind == PT_ARRAY)
			n = v->pt->n;
		else {
			error_at(x->d, loc, "%s expects an array, not %s", what, tystr(x, v));
			return VERR;
		}
		int64_t want = 0;
		if (!match_dim(x, t->count, n, &want)) {
			error_at(x->d, loc, "%s expects an array of %lld elements, not %d", what, (long long)want, n);
			return VERR;
		}
		Value *r = vnew(x, V_ARRAY);
		r->n = n;
		r->items = arena_alloc(x->a, (size_t)(n + 1) * sizeof(Value *));
		for (int i = 0; i < n; i++) {
			Value *ev = v->kind == V_ARRAY ? v->items[i] : NULL;
			if (!ev) {
				ev = vnew(x, V_PARAM);
				ev->pt = v->pt->kids[i];
			}
			r->items[i] = match_type(x, t->elem, ev, what, loc);
			if (r->items[i]->kind == V_ERR)
				return VERR;
		}
		return r;
	}
	}
	return VERR;
}

/* ---- calls of user functions ---- */

static void sig_str(Ctx *x, Buf *b, Value *v)
{
	switch (v->kind) {
	case V_INT: buf_printf(b, "%lld", (long long)v->i); break;
	case V_FLOAT: buf_printf(b, "%.17g", v->f); break;
	case V_BOOL: buf_puts(b, v->i ? "true" : "false"); break;
	case V_TENSOR:
	case V_PARAM:
		if (v_is_tensor(v)) {
			DType dt;
			int rank;
			const int64_t *shape;
			v_shape(x, v, &dt, &rank, &shape);
			shape_str(b, dt, rank, shape);
			break;
		}
		/* fall through */
	default:
		value_type_str(b, v);
		break;
	}
}

/* Flatten the tensor leaves of a matched argument, in field order. */
static void collect_leaves(Ctx *x, Value *v, const char *path, Vec *vals, Vec *names)
{
	if (v_is_tensor(v)) {
		avec_push(x->a, vals, v);
		avec_push(x->a, names, (void *)path);
		return;
	}
	if (v->kind == V_RECORD) {
		for (int i = 0; i < v->n; i++)
			collect_leaves(x, v->items[i], arena_printf(x->a, "%s.%s", path, v->names[i]), vals, names);
	} else if (v->kind == V_ARRAY) {
		for (int i = 0; i < v->n; i++)
			collect_leaves(x, v->items[i], arena_printf(x->a, "%s.%d", path, i), vals, names);
	}
}

/* The same structure with every tensor leaf replaced by the next input node. */
static Value *rebuild_with_inputs(Ctx *x, Value *v, Node **inputs, int *k)
{
	if (v_is_tensor(v))
		return vtensor(x, inputs[(*k)++]);
	if (v->kind == V_RECORD || v->kind == V_ARRAY) {
		Value *r = vnew(x, v->kind);
		r->n = v->n;
		r->names = v->names;
		r->items = arena_alloc(x->a, (size_t)(v->n + 1) * sizeof(Value *));
		for (int i = 0; i < v->n; i++)
			r->items[i] = rebuild_with_inputs(x, v->items[i], inputs, k);
		return r;
	}
	return v;
}

/* Check the function's results against its declared result types. */
/* Evaluate the dimensions of a declared type whose names are all bound, for
 * their own errors (a dimension that does not divide), when no value is there
 * to match it against. */
static int dims_bound(Ctx *x, Expr *e)
{
	if (!e)
		return 1;
	if (e->kind == E_NAME)
		return scope_find(x->scope, e->name, NULL) || lookup_global(x->c, e->name);
	if (e->kind == E_BINARY)
		return dims_bound(x, e->a) && dims_bound(x, e->b);
	if (e->kind == E_UNARY)
		return dims_bound(x, e->a);
	return e->kind == E_INT;
}

static void check_type_dims(Ctx *x, TypeExpr *t)
{
	if (t->kind != T_TENSOR)
		return;
	for (int i = 0; i < t->ndims; i++)
		if (dims_bound(x, t->dims[i])) {
			x->in_dim++;
			eval(x, t->dims[i]);
			x->in_dim--;
		}
}

static Value *check_results(Ctx *x, Decl *fn, FnResult *res)
{
	if (!res->done || !res->value || res->value->kind == V_ERR) {
		for (int i = 0; i < fn->nrets; i++)
			check_type_dims(x, fn->rets[i]);
		return VERR;
	}
	Value *v = res->value;
	if (!fn->nrets)
		return v;
	int n = v->kind == V_TUPLE ? v->n : 1;
	if (n != fn->nrets) {
		error_at(x->d, res->loc, "function '%s' returns %d value%s, but its signature says %d", fn->name, n,
		         n == 1 ? "" : "s", fn->nrets);
		return VERR;
	}
	for (int i = 0; i < n; i++) {
		Value *item = v->kind == V_TUPLE ? v->items[i] : v;
		char *what = n == 1 ? arena_printf(x->a, "the result of '%s'", fn->name)
		                    : arena_printf(x->a, "result %d of '%s'", i + 1, fn->name);
		Loc at = res->ret && i < res->ret->nvalues ? res->ret->values[i]->span : res->loc;
		Value *m = match_type(x, fn->rets[i], item, what, at);
		if (m->kind == V_ERR)
			return VERR;
	}
	return v;
}

static const char *arg_what(Ctx *x, Decl *fn, int i)
{
	return arena_printf(x->a, "argument '%s' of '%s'", fn->fargs[i].name, fn->name);
}

/* Bind call arguments (already evaluated) to the callee's arguments. */
static int bind_args(Ctx *x, Decl *fn, Expr *call, Value **argv, Value **bound)
{
	int ok = 1;
	for (int i = 0; i < fn->nfargs; i++) {
		Loc loc = argv[i] ? call->loc : call->loc;
		for (int k = 0; k < call->nargs; k++) {
			Expr *ae = call->args[k];
			if ((ae->kind == E_NAMED && !strcmp(ae->name, fn->fargs[i].name)) ||
			    (ae->kind != E_NAMED && k == i))
				loc = ae->kind == E_NAMED ? ae->a->span : ae->span;
		}
		bound[i] = match_type(x, fn->fargs[i].type, argv[i], arg_what(x, fn, i), loc);
		if (bound[i]->kind == V_ERR)
			ok = 0;
		else
			scope_bind(x, x->fnscope, fn->fargs[i].name, bound[i]);
	}
	return ok;
}

static Value *call_function(Ctx *x, Global *gfn, Expr *call)
{
	Decl *fn = gfn->decl;
	/* arguments: positional, then named */
	Value **argv = arena_alloc(x->a, (size_t)(fn->nfargs + 1) * sizeof(Value *));
	int npos = 0, bad = 0;
	for (int k = 0; k < call->nargs; k++) {
		Expr *ae = call->args[k];
		if (ae->kind == E_NAMED) {
			int found = -1;
			for (int i = 0; i < fn->nfargs; i++)
				if (!strcmp(fn->fargs[i].name, ae->name))
					found = i;
			if (found < 0) {
				error_at(x->d, ae->loc, "'%s' has no argument named '%s'", fn->name, ae->name);
				bad = 1;
				continue;
			}
			if (argv[found]) {
				error_at(x->d, ae->loc, "argument '%s' of '%s' is given twice", ae->name, fn->name);
				bad = 1;
				continue;
			}
			argv[found] = eval(x, ae->a);
		} else {
			if (npos != k) {
				error_at(x->d, ae->loc, "a positional argument cannot follow a named one");
				bad = 1;
				continue;
			}
			if (npos >= fn->nfargs) {
				error_at(x->d, ae->loc, "too many arguments to '%s' (it takes %d)", fn->name, fn->nfargs);
				bad = 1;
				npos++;
				continue;
			}
			argv[npos++] = eval(x, ae);
		}
	}
	for (int i = 0; i < fn->nfargs; i++)
		if (!argv[i]) {
			if (!bad)
				error_at(x->d, call->loc, "missing argument '%s' in the call of '%s'", fn->fargs[i].name, fn->name);
			bad = 1;
		} else if (argv[i]->kind == V_ERR) {
			bad = 1;
		}
	if (bad)
		return VERR;
	if (!x->g) {
		error_at(x->d, call->loc, "a function call is not a compile-time value");
		return VERR;
	}
	for (int i = 0; i < x->stack.n; i++)
		if (x->stack.v[i] == fn) {
			error_at(x->d, call->loc, "'%s' calls itself; functions are expanded at compile time and cannot recurse",
			         fn->name);
			return VERR;
		}
	if (x->stack.n > 200) {
		error_at(x->d, call->loc, "calls nest more than 200 deep");
		return VERR;
	}

	/* the callee's scope: arguments and shape variables */
	Scope *saved_scope = x->scope, *saved_fn = x->fnscope;
	TEnv *saved_te = x->te;
	int saved_quiet = x->quiet, saved_dim = x->in_dim;
	Scope *top = arena_alloc(x->a, sizeof *top);
	x->scope = x->fnscope = top;
	x->te = NULL;
	x->quiet = fn->broken;
	x->in_dim = 0;
	Value **bound = arena_alloc(x->a, (size_t)(fn->nfargs + 1) * sizeof(Value *));
	Value *result = VERR;
	int errors_before = -1; /* set once the arguments are bound */
	vec_push(&x->stack, fn);
	if (!bind_args(x, fn, call, argv, bound))
		goto done;

	errors_before = x->d->nerrors;
	if (!fn->is_region) {
		FnResult res = {0};
		lower_stmts(x, fn->body, fn->nbody, &res);
		result = check_results(x, fn, &res);
		goto done;
	}

	/* A region: one specialised graph per argument signature; the call passes the
	 * tensor leaves of its arguments. */
	Buf key = {0};
	for (int i = 0; i < fn->nfargs; i++) {
		if (i)
			buf_puts(&key, "; ");
		buf_printf(&key, "%s: ", fn->fargs[i].name);
		sig_str(x, &key, bound[i]);
	}
	Vec leaves = {0}, names = {0};
	for (int i = 0; i < fn->nfargs; i++)
		collect_leaves(x, bound[i], fn->fargs[i].name, &leaves, &names);
	Graph *callee = NULL;
	for (int i = 0; i < gfn->specs.n; i++) {
		Graph *sg = gfn->specs.v[i];
		if (!strcmp(sg->key, key.s))
			callee = sg;
	}
	Graph *caller = x->g;
	if (!callee) {
		callee = graph_new(x->p, fn->name, fn);
		callee->key = arena_strdup(x->a, key.s);
		callee->is_region = 1;
		callee->ninputs = leaves.n;
		callee->inputs = arena_alloc(x->a, (size_t)(leaves.n + 1) * sizeof(Node *));
		callee->input_names = (const char **)names.v;
		x->g = callee;
		for (int i = 0; i < leaves.n; i++) {
			DType dt;
			int rank;
			const int64_t *shape;
			v_shape(x, leaves.v[i], &dt, &rank, &shape);
			Node *in = mk_node(x, OP_INPUT, dt, rank, shape, fn->fargs[0].loc);
			in->a[0] = i;
			callee->inputs[i] = in;
		}
		/* rebind the arguments to the inputs */
		Scope *inner = arena_alloc(x->a, sizeof *inner);
		x->scope = x->fnscope = inner;
		int k = 0;
		for (int i = 0; i < top->names.n; i++) {
			Value *bv = top->vals.v[i];
			int is_arg = 0;
			for (int j = 0; j < fn->nfargs; j++)
				if (!strcmp(top->names.v[i], fn->fargs[j].name))
					is_arg = 1;
			scope_bind(x, inner, top->names.v[i], is_arg ? rebuild_with_inputs(x, bv, callee->inputs, &k) : bv);
		}
		/* reuse_hash: a compile-time integer over the region's shape variables and scalars */
		for (int i = 0; i < fn->nattrs; i++)
			if (!strcmp(fn->attrs[i].key, "reuse_hash")) {
				Graph *g = x->g;
				x->g = NULL; /* no tensors allowed */
				Value *hv = eval(x, fn->attrs[i].value);
				x->g = g;
				int64_t h;
				if (hv->kind == V_INT) {
					callee->has_reuse_hash = 1;
					callee->reuse_hash = hv->i;
				} else if (hv->kind != V_ERR) {
					ct_int(x, hv, fn->attrs[i].value->loc, "reuse_hash", &h);
				}
			}
		FnResult res = {0};
		lower_stmts(x, fn->body, fn->nbody, &res);
		Value *rv = check_results(x, fn, &res);
		if (rv->kind != V_ERR) {
			int n = rv->kind == V_TUPLE ? rv->n : 1;
			callee->noutputs = n;
			callee->outputs = arena_alloc(x->a, (size_t)(n + 1) * sizeof(Node *));
			for (int i = 0; i < n; i++) {
				Value *item = rv->kind == V_TUPLE ? rv->items[i] : rv;
				if (!v_is_tensor(item)) {
					error_at(x->d, res.loc, "a region must return tensors, not %s", tystr(x, item));
					rv = VERR;
					break;
				}
				callee->outputs[i] = as_tensor(x, item, res.loc, "a result");
			}
		}
		x->g = caller;
		if (rv->kind == V_ERR) {
			callee->noutputs = -1; /* remembered as failed: later calls stay quiet */
		}
		avec_push(x->a, &gfn->specs, callee);
	}
	buf_free(&key);
	if (callee->noutputs < 0)
		goto done;
	/* materialise the arguments first: nodes stay in topological order */
	Node **argn = arena_alloc(x->a, (size_t)(leaves.n + 1) * sizeof(Node *));
	for (int i = 0; i < leaves.n; i++)
		argn[i] = as_tensor(x, leaves.v[i], call->loc, "argument");
	Node *cn = mk_node(x, OP_CALL, DT_F32, 0, NULL, call->loc);
	cn->callee = callee;
	for (int i = 0; i < leaves.n; i++)
		node_add_input(x->p, cn, argn[i]);
	Value *tuple = vnew(x, V_TUPLE);
	tuple->n = callee->noutputs;
	tuple->items = arena_alloc(x->a, (size_t)(tuple->n + 1) * sizeof(Value *));
	for (int i = 0; i < callee->noutputs; i++) {
		Node *o = callee->outputs[i];
		Node *r = mk_node(x, OP_RESULT, o->dtype, o->rank, o->shape, call->loc);
		node_add_input(x->p, r, cn);
		r->a[0] = i;
		tuple->items[i] = vtensor(x, r);
	}
	result = tuple->n == 1 ? tuple->items[0] : tuple;
done:
	/* a mistake inside a specialised body: say which call (and shapes) it came from */
	if (errors_before >= 0 && x->d->nerrors > errors_before) {
		Buf sig = {0};
		for (int i = 0; i < fn->nfargs; i++) {
			if (i)
				buf_puts(&sig, "; ");
			buf_printf(&sig, "%s: ", fn->fargs[i].name);
			if (bound[i])
				sig_str(x, &sig, bound[i]);
		}
		note_at(x->d, call->loc, "in this call of '%s' (%s)", fn->name, sig.s ? sig.s : "");
		buf_free(&sig);
	}
	x->stack.n--;
	x->scope = saved_scope;
	x->fnscope = saved_fn;
	x->te = saved_te;
	x->quiet = saved_quiet;
	x->in_dim = saved_dim;
	return result;
}

/* ---- builtins ---- */

typedef struct Args {
	Expr *call;
	const char *fname;
	Value *pos[8];
	Loc posloc[8];
	int npos;
	const char *names[8];
	Value *named[8];
	Loc namedloc[8];   /* the value */
	Loc namekeyloc[8]; /* the name */
	int nnamed;
	int used[8];
} Args;

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

static Node *tensor_arg(Ctx *x, Args *a, int i, const char *name)
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

static int float_tensor(Ctx *x, Args *a, Node *n)
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

static int int_opt(Ctx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t *out)
{
	Loc loc;
	Value *v = arg_at(a, pos, name, &loc);
	if (!v) {
		*out = dflt;
		return 1;
	}
	return ct_int(x, v, loc, arena_printf(x->a, "%s of %s()", name, a->fname), out);
}

static int bool_opt(Ctx *x, Args *a, const char *name, int dflt, int *out)
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

static int float_opt(Ctx *x, Args *a, int pos, const char *name, double dflt, double *out)
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
static int int_list(Ctx *x, Value *v, Loc loc, const char *what, int64_t *out, int max, int *n, int allow_scalar)
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
static int pair_opt(Ctx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t out[2], int positive)
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

static int check_arity(Ctx *x, Args *a, int min, int max, const char *const *allowed)
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

static int reduce_axes(Ctx *x, Args *a, Node *t, int64_t *mask, int dflt_all, int64_t dflt_axis)
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

static Value *b_reduce(Ctx *x, Args *a, Op op)
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

static Value *b_unary(Ctx *x, Args *a, Op op)
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

static Value *b_cast(Ctx *x, Args *a, DType dt)
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

static Value *b_binary_fn(Ctx *x, Args *a, Op op)
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

static Value *b_where(Ctx *x, Args *a)
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
	if (!operands(x, OP_WHERE, a->pos[1], a->pos[2], &p, &q, a->call->loc))
		return VERR;
	int r1, r2;
	int64_t s1[MAX_RANK], s2[MAX_RANK];
	if (!broadcast(x, p, q, &r1, s1, OP_WHERE, a->call->loc))
		return VERR;
	Node tmp = {.rank = r1, .dtype = p->dtype};
	memcpy(tmp.shape, s1, sizeof s1);
	if (!broadcast(x, c, &tmp, &r2, s2, OP_WHERE, a->call->loc))
		return VERR;
	Node *n = mk_node(x, OP_WHERE, p->dtype, r2, s2, a->call->loc);
	node_add_input(x->p, n, c);
	node_add_input(x->p, n, p);
	node_add_input(x->p, n, q);
	return vtensor(x, n);
}

static Value *b_softmax(Ctx *x, Args *a, Op op)
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

static Value *b_norm(Ctx *x, Args *a, Op op)
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

static Value *b_reshape(Ctx *x, Args *a)
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

static Value *b_transpose(Ctx *x, Args *a)
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

static Value *b_concat(Ctx *x, Args *a)
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

static Value *b_split(Ctx *x, Args *a)
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
	Value *tup = vnew(x, V_TUPLE);
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

static Value *b_expand(Ctx *x, Args *a)
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

static Value *b_squeeze(Ctx *x, Args *a, int unsq)
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

static Value *b_create(Ctx *x, Args *a, int which)
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

static Value *b_causal_mask(Ctx *x, Args *a)
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

static Value *b_conv2d(Ctx *x, Args *a)
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

static Value *b_pool(Ctx *x, Args *a, Op op)
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

static Value *call_builtin(Ctx *x, const char *name, Expr *call)
{
	Args a = {.call = call, .fname = name};
	for (int k = 0; k < call->nargs; k++) {
		Expr *ae = call->args[k];
		if (ae->kind == E_NAMED) {
			if (a.nnamed == 8) {
				error_at(x->d, ae->loc, "too many named arguments");
				return VERR;
			}
			a.names[a.nnamed] = ae->name;
			a.namedloc[a.nnamed] = ae->a->span;
			a.namekeyloc[a.nnamed] = ae->loc;
			a.named[a.nnamed] = eval(x, ae->a);
			if (a.named[a.nnamed]->kind == V_ERR)
				return VERR;
			a.nnamed++;
		} else {
			if (a.nnamed) {
				error_at(x->d, ae->loc, "a positional argument cannot follow a named one");
				return VERR;
			}
			if (a.npos == 8) {
				error_at(x->d, ae->loc, "too many arguments to %s()", name);
				return VERR;
			}
			a.posloc[a.npos] = ae->span;
			/* shape lists are dimensions: their divisions must be exact */
			int dimarg = ((!strcmp(name, "reshape") || !strcmp(name, "expand")) && a.npos == 1) ||
			             ((!strcmp(name, "zeros") || !strcmp(name, "ones") || !strcmp(name, "full")) && a.npos == 0);
			x->in_dim += dimarg;
			a.pos[a.npos] = eval(x, ae);
			x->in_dim -= dimarg;
			if (a.pos[a.npos]->kind == V_ERR)
				return VERR;
			a.npos++;
		}
	}
	/* tensor builtins need a graph; the compile-time ones are handled inside */
	static const struct { const char *name; Op op; } unary[] = {
		{"exp", OP_EXP}, {"log", OP_LOG}, {"sqrt", OP_SQRT}, {"rsqrt", OP_RSQRT}, {"tanh", OP_TANH},
		{"sigmoid", OP_SIGMOID}, {"relu", OP_RELU}, {"gelu", OP_GELU}, {"gelu_tanh", OP_GELU_TANH},
		{"silu", OP_SILU}, {"erf", OP_ERF}, {"abs", OP_ABS}, {"sin", OP_SIN}, {"cos", OP_COS},
	};
	for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
		if (!strcmp(name, unary[i].name))
			return b_unary(x, &a, unary[i].op);
	for (int dt = 0; dt < DT_COUNT; dt++)
		if (!strcmp(name, dtype_name((DType)dt)))
			return b_cast(x, &a, (DType)dt);
	if (!strcmp(name, "pow")) return b_binary_fn(x, &a, OP_POW);
	if (!strcmp(name, "maximum")) return b_binary_fn(x, &a, OP_MAX);
	if (!strcmp(name, "minimum")) return b_binary_fn(x, &a, OP_MIN);
	if (!x->g) {
		error_at(x->d, call->loc, "%s() is not a compile-time value", name);
		return VERR;
	}
	if (!strcmp(name, "where")) return b_where(x, &a);
	if (!strcmp(name, "sum")) return b_reduce(x, &a, OP_SUM);
	if (!strcmp(name, "mean")) return b_reduce(x, &a, OP_MEAN);
	if (!strcmp(name, "amax")) return b_reduce(x, &a, OP_AMAX);
	if (!strcmp(name, "amin")) return b_reduce(x, &a, OP_AMIN);
	if (!strcmp(name, "argmax")) return b_reduce(x, &a, OP_ARGMAX);
	if (!strcmp(name, "softmax")) return b_softmax(x, &a, OP_SOFTMAX);
	if (!strcmp(name, "log_softmax")) return b_softmax(x, &a, OP_LOG_SOFTMAX);
	if (!strcmp(name, "layernorm")) return b_norm(x, &a, OP_LAYERNORM);
	if (!strcmp(name, "rmsnorm")) return b_norm(x, &a, OP_RMSNORM);
	if (!strcmp(name, "reshape")) return b_reshape(x, &a);
	if (!strcmp(name, "transpose")) return b_transpose(x, &a);
	if (!strcmp(name, "concat")) return b_concat(x, &a);
	if (!strcmp(name, "split")) return b_split(x, &a);
	if (!strcmp(name, "expand")) return b_expand(x, &a);
	if (!strcmp(name, "unsqueeze")) return b_squeeze(x, &a, 1);
	if (!strcmp(name, "squeeze")) return b_squeeze(x, &a, 0);
	if (!strcmp(name, "zeros")) return b_create(x, &a, 0);
	if (!strcmp(name, "ones")) return b_create(x, &a, 1);
	if (!strcmp(name, "full")) return b_create(x, &a, 2);
	if (!strcmp(name, "arange")) return b_create(x, &a, 3);
	if (!strcmp(name, "causal_mask")) return b_causal_mask(x, &a);
	if (!strcmp(name, "conv2d")) return b_conv2d(x, &a);
	if (!strcmp(name, "max_pool2d")) return b_pool(x, &a, OP_MAXPOOL2D);
	if (!strcmp(name, "avg_pool2d")) return b_pool(x, &a, OP_AVGPOOL2D);
	if (!strcmp(name, "global_avg_pool2d")) return b_pool(x, &a, OP_GLOBAL_AVGPOOL2D);
	ice("builtin %s has no lowering", name);
}

/* ---- params: the weights-file names (path rule) ---- */

static PTree *build_ptree(Ctx *x, TypeExpr *t, const char *path, Loc loc, int depth)
{
	if (depth > 64) {
		error_at(x->d, loc, "param type nests too deeply");
		return NULL;
	}
	switch (t->kind) {
	case T_TENSOR: {
		if (t->any_shape) {
			error_at(x->d, t->loc, "a param's shape must be known: '*' is not allowed");
			return NULL;
		}
		if (t->ndims > MAX_RANK) {
			error_at(x->d, t->loc, "a tensor has at most %d axes", MAX_RANK);
			return NULL;
		}
		int64_t shape[MAX_RANK];
		for (int i = 0; i < t->ndims; i++) {
			x->in_dim++;
			Value *v = eval(x, t->dims[i]);
			x->in_dim--;
			if (!ct_int(x, v, t->dims[i]->loc, "a param dimension", &shape[i]))
				return NULL;
			if (shape[i] < 0) {
				error_at(x->d, t->dims[i]->loc, "dimension %lld is negative", (long long)shape[i]);
				return NULL;
			}
		}
		Program *p = x->p;
		if (p->nparams == p->capparams) {
			int cap = p->capparams ? p->capparams * 2 : 64;
			ParamInfo *np = arena_alloc(x->a, (size_t)cap * sizeof(ParamInfo));
			if (p->nparams)
				memcpy(np, p->params, (size_t)p->nparams * sizeof(ParamInfo));
			p->params = np;
			p->capparams = cap;
		}
		ParamInfo *pi = &p->params[p->nparams];
		pi->name = path;
		pi->dtype = t->dtype;
		pi->rank = t->ndims;
		memcpy(pi->shape, shape, sizeof shape);
		pi->loc = loc;
		PTree *pt = arena_alloc(x->a, sizeof *pt);
		pt->kind = PT_LEAF;
		pt->param = p->nparams++;
		if (p->nparams > 1000000) {
			error_at(x->d, loc, "more than a million param tensors");
			return NULL;
		}
		return pt;
	}
	case T_SCALAR:
		error_at(x->d, t->loc, "a param must be a tensor, a record or an array, not a compile-time scalar");
		return NULL;
	case T_NAMED: {
		Global *g = lookup_global(x->c, t->name);
		if (!g || g->kind != G_TYPE || g->decl->ntparams != t->nargs)
			return NULL;
		TEnv *te = arena_alloc(x->a, sizeof *te);
		te->n = t->nargs;
		te->names = g->decl->tparams;
		te->vals = arena_alloc(x->a, (size_t)(te->n + 1) * sizeof(Value *));
		te->pending = arena_alloc(x->a, (size_t)(te->n + 1) * sizeof(char *));
		for (int i = 0; i < t->nargs; i++) {
			x->in_dim++;
			Value *v = eval(x, t->args[i]);
			x->in_dim--;
			int64_t iv;
			if (!ct_int(x, v, t->args[i]->loc, "a type's dimension argument", &iv))
				return NULL;
			te->vals[i] = vint(x, iv);
		}
		TEnv *saved = x->te;
		x->te = te;
		PTree *r = build_ptree(x, g->decl->type, path, loc, depth + 1);
		x->te = saved;
		return r;
	}
	case T_RECORD: {
		PTree *pt = arena_alloc(x->a, sizeof *pt);
		pt->kind = PT_RECORD;
		pt->n = t->nfields;
		pt->names = arena_alloc(x->a, (size_t)(t->nfields + 1) * sizeof(char *));
		pt->kids = arena_alloc(x->a, (size_t)(t->nfields + 1) * sizeof(PTree *));
		for (int i = 0; i < t->nfields; i++) {
			pt->names[i] = t->fields[i].name;
			pt->kids[i] = build_ptree(x, t->fields[i].type, arena_printf(x->a, "%s.%s", path, t->fields[i].name),
			                          loc, depth + 1);
			if (!pt->kids[i])
				return NULL;
		}
		return pt;
	}
	case T_ARRAY: {
		x->in_dim++;
		Value *v = eval(x, t->count);
		x->in_dim--;
		int64_t n;
		if (!ct_int(x, v, t->count->loc, "an array length", &n))
			return NULL;
		if (n < 0 || n > 100000) {
			error_at(x->d, t->count->loc, "array length %lld is out of range (0 to 100000)", (long long)n);
			return NULL;
		}
		PTree *pt = arena_alloc(x->a, sizeof *pt);
		pt->kind = PT_ARRAY;
		pt->n = (int)n;
		pt->kids = arena_alloc(x->a, (size_t)(n + 1) * sizeof(PTree *));
		for (int i = 0; i < n; i++) {
			pt->kids[i] = build_ptree(x, t->elem, arena_printf(x->a, "%s.%d", path, i), loc, depth + 1);
			if (!pt->kids[i])
				return NULL;
		}
		if (n == 0) {
			/* keep the element type printable */
			pt->kids[0] = NULL;
		}
		return pt;
	}
	}
	return NULL;
}

/* ---- entry points ---- */

static void lower_export(Ctx *x, Global *gfn)
{
	Decl *fn = gfn->decl;
	Graph *g = graph_new(x->p, fn->name, fn);
	x->g = g;
	Scope *top = arena_alloc(x->a, sizeof *top);
	x->scope = x->fnscope = top;
	x->quiet = fn->broken;
	g->ninputs = fn->nfargs;
	g->inputs = arena_alloc(x->a, (size_t)(fn->nfargs + 1) * sizeof(Node *));
	g->input_names = arena_alloc(x->a, (size_t)(fn->nfargs + 1) * sizeof(char *));
	int ok = 1;
	for (int i = 0; i < fn->nfargs; i++) {
		FnArg *fa = &fn->fargs[i];
		TypeExpr *t = fa->type;
		g->input_names[i] = fa->name;
		if (t->kind != T_TENSOR || t->any_shape) {
			error_at(x->d, fa->loc, "argument '%s' of exported function '%s' must be a tensor with a known shape",
			         fa->name, fn->name);
			ok = 0;
			continue;
		}
		int64_t shape[MAX_RANK];
		if (t->ndims > MAX_RANK) {
			error_at(x->d, t->loc, "a tensor has at most %d axes", MAX_RANK);
			ok = 0;
			continue;
		}
		for (int k = 0; k < t->ndims; k++) {
			Expr *de = t->dims[k];
			if (de->kind == E_NAME && !lookup_global(x->c, de->name) && !scope_find(top, de->name, NULL)) {
				error_at(x->d, de->loc,
				         "the shape of '%s' must be known at compile time: '%s' is not a const (exported functions cannot have shape variables)",
				         fa->name, de->name);
				ok = 0;
				shape[k] = 1;
				continue;
			}
			x->in_dim++;
			Value *v = eval(x, de);
			x->in_dim--;
			if (!ct_int(x, v, de->loc, "a dimension", &shape[k])) {
				ok = 0;
				shape[k] = 1;
			} else if (shape[k] < 0) {
				error_at(x->d, de->loc, "dimension %lld is negative", (long long)shape[k]);
				ok = 0;
			}
		}
		Node *in = mk_node(x, OP_INPUT, t->dtype, t->ndims, shape, fa->loc);
		in->a[0] = i;
		g->inputs[i] = in;
		scope_bind(x, top, fa->name, vtensor(x, in));
	}
	if (!ok)
		return;
	vec_push(&x->stack, fn);
	FnResult res = {0};
	lower_stmts(x, fn->body, fn->nbody, &res);
	x->stack.n--;
	Value *rv = check_results(x, fn, &res);
	if (rv->kind == V_ERR)
		return;
	int n = rv->kind == V_TUPLE ? rv->n : 1;
	g->noutputs = n;
	g->outputs = arena_alloc(x->a, (size_t)(n + 1) * sizeof(Node *));
	for (int i = 0; i < n; i++) {
		Value *item = rv->kind == V_TUPLE ? rv->items[i] : rv;
		if (!v_is_tensor(item)) {
			if (is_ct(item) && !(item->kind == V_BOOL)) {
				/* a compile-time number becomes a 0-d tensor */
				g->outputs[i] = const_node(x, item->kind == V_FLOAT ? DT_F32 : DT_I64, item, res.loc);
				continue;
			}
			error_at(x->d, res.loc, "an exported function must return tensors, not %s", tystr(x, item));
			g->noutputs = 0;
			return;
		}
		g->outputs[i] = as_tensor(x, item, res.loc, "a result");
	}
	Program *p = x->p;
	Entry *ne = arena_alloc(x->a, (size_t)(p->nentries + 1) * sizeof(Entry));
	if (p->nentries)
		memcpy(ne, p->entries, (size_t)p->nentries * sizeof(Entry));
	ne[p->nentries].name = fn->name;
	ne[p->nentries].g = g;
	ne[p->nentries].arg_names = g->input_names;
	ne[p->nentries].fn = fn;
	p->entries = ne;
	p->nentries++;
}

void lower_program(Checker *c)
{
	Ctx x = {.c = c, .a = c->a, .d = c->d, .p = c->p, .budget = 50000000};
	cur_prog = c->p;
	/* params first: their names and shapes form the model's param table */
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind != G_PARAM)
			continue;
		const char *path = g->decl->wname ? g->decl->wname : g->name;
		g->ptree = build_ptree(&x, g->decl->type, path, g->decl->name_loc, 0);
	}
	/* two tensors with one weights-file name would bind the same data twice */
	for (int i = 0; i < c->p->nparams; i++)
		for (int j = 0; j < i && j < 4096; j++)
			if (!strcmp(c->p->params[i].name, c->p->params[j].name)) {
				error_at(c->d, c->p->params[i].loc, "two params are named '%s' in the weights file", c->p->params[i].name);
				break;
			}
	int nexports = 0;
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind == G_FN && g->decl->is_export) {
			nexports++;
			lower_export(&x, g);
		}
	}
	if (nexports == 0 && c->d->nerrors == 0)
		warning_plain(c->d, "%s: no exported function: nothing to run or compile (mark an entry point 'export fn')",
		              c->d->src->path);
	free(x.stack.v);
}

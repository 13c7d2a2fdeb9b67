/* values.c - what lowering and the builtins share below them: Values and their
 * constructors, scopes, Values and shapes as text for messages, making nodes
 * (with the lowering budget), tensors from Values, NumPy broadcasting and the
 * elementwise and matmul nodes of operators, and compile-time ints and axes. */
#include "nestc.h"

#include <string.h>

Value value_err = {.kind = V_ERR};

Value *value_new(LowerCtx *x, ValueKind k)
{
	Value *v = arena_alloc(x->a, sizeof *v);
	v->kind = k;
	return v;
}

Value *vint(LowerCtx *x, int64_t i)
{
	Value *v = value_new(x, V_INT);
	v->i = i;
	return v;
}

Value *vfloat(LowerCtx *x, double f)
{
	Value *v = value_new(x, V_FLOAT);
	v->f = f;
	return v;
}

Value *vbool(LowerCtx *x, int b)
{
	Value *v = value_new(x, V_BOOL);
	v->i = b != 0;
	return v;
}

Value *vtensor(LowerCtx *x, Node *n)
{
	Value *v = value_new(x, V_TENSOR);
	v->node = n;
	return v;
}

int is_ct(Value *v)
{
	return v->kind == V_INT || v->kind == V_FLOAT || v->kind == V_BOOL;
}

void scope_bind(LowerCtx *x, Scope *s, const char *name, Value *v)
{
	avec_push(x->a, &s->names, (void *)name);
	avec_push(x->a, &s->vals, v);
}

Value **scope_find(Scope *s, const char *name, Scope **where)
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

static ParamInfo *leaf_info(LowerCtx *x, Value *v)
{
	return (ParamInfo *)ptree_info(x->p, v->pt);
}

int v_is_tensor(Value *v)
{
	return v->kind == V_TENSOR || (v->kind == V_PARAM && v->pt->kind == PT_LEAF);
}

void v_shape(LowerCtx *x, Value *v, DType *dt, int *rank, const int64_t **shape)
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

static void ptree_str(Buf *b, const Program *p, PTree *t)
{
	switch (t->kind) {
	case PT_LEAF: {
		const ParamInfo *pi = ptree_info(p, t);
		shape_str(b, pi->dtype, pi->rank, pi->shape);
		break;
	}
	case PT_RECORD:
		buf_putc(b, '{');
		for (int i = 0; i < t->n; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", t->names[i]);
			ptree_str(b, p, t->kids[i]);
		}
		buf_puts(b, " }");
		break;
	case PT_ARRAY:
		/* an array of length 0 has no element to print (params.c) */
		if (t->n > 0 && t->kids[0])
			ptree_str(b, p, t->kids[0]);
		buf_printf(b, "[%d]", t->n);
		break;
	}
}

void value_type_str(Buf *b, const Program *p, Value *v)
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
			value_type_str(b, p, v->items[i]);
		}
		buf_puts(b, " }");
		break;
	case V_ARRAY:
		if (v->n)
			value_type_str(b, p, v->items[0]);
		buf_printf(b, "[%d]", v->n);
		break;
	case V_LIST:
	case V_TUPLE:
		buf_puts(b, v->kind == V_LIST ? "[" : "(");
		for (int i = 0; i < v->n; i++) {
			if (i)
				buf_puts(b, ", ");
			value_type_str(b, p, v->items[i]);
		}
		buf_puts(b, v->kind == V_LIST ? "]" : ")");
		break;
	case V_PARAM:
		ptree_str(b, p, v->pt);
		break;
	}
}

/* A short-lived description for a message; the arena keeps it alive. */
const char *tystr(LowerCtx *x, Value *v)
{
	Buf b = {0};
	value_type_str(&b, x->p, v);
	char *s = arena_strdup(x->a, b.s ? b.s : "");
	buf_free(&b);
	return s;
}

const char *shstr(LowerCtx *x, DType dt, int rank, const int64_t *shape)
{
	Buf b = {0};
	shape_str(&b, dt, rank, shape);
	char *s = arena_strdup(x->a, b.s);
	buf_free(&b);
	return s;
}

const char *nstr(LowerCtx *x, Node *n)
{
	return shstr(x, n->dtype, n->rank, n->shape);
}

/* ---- nodes ---- */

int charge_budget(LowerCtx *x, Loc loc)
{
	if (--x->budget >= 0)
		return 1;
	if (!x->out_of_budget)
		error_at(x->d, loc, "the model is too large to lower (more than 50 million operations after unrolling)");
	x->out_of_budget = 1;
	return 0;
}

int check_shape_size(LowerCtx *x, DType dt, int rank, const int64_t *shape, Loc loc)
{
	int err = shape_size_error(dt, rank, shape);
	if (err == 1)
		error_at(x->d, loc, "%s has 2^63 elements or more", shstr(x, dt, rank, shape));
	else if (err == 2)
		error_at(x->d, loc, "%s takes 2^63 bytes or more", shstr(x, dt, rank, shape));
	return err == 0;
}

static int shape_has_negative(int rank, const int64_t *shape)
{
	for (int i = 0; i < rank; i++)
		if (shape[i] < 0)
			return 1;
	return 0;
}

Node *mk_node(LowerCtx *x, Op op, DType dt, int rank, const int64_t *shape, Loc loc)
{
	charge_budget(x, loc);
	/* Every tensor of the IR comes through here: its element count and size
	 * must fit an int64_t, and all of them together PROGRAM_MAX_BYTES, so
	 * that no later pass (plan, codegen, the interpreter) overflows. One
	 * message: the nodes computed from a tensor too large are as large. */
	Program *p = x->p;
	if (!p->size_reported) {
		if (!check_shape_size(x, dt, rank, shape, loc)) {
			p->size_reported = 1;
		} else if (!shape_has_negative(rank, shape)) { /* a negative dimension is reported where it is written */
			int64_t bytes;
			if (__builtin_mul_overflow(shape_numel(rank, shape), (int64_t)dtype_size(dt), &bytes) ||
			    __builtin_add_overflow(p->bytes, bytes, &p->bytes) || p->bytes > PROGRAM_MAX_BYTES) {
				error_at(x->d, loc, "the tensors of this model take more than 2^62 bytes in all");
				p->size_reported = 1;
			}
		}
	}
	return node_new(p, x->g, op, dt, rank, shape, loc);
}

const ParamInfo *ptree_info(const Program *p, const PTree *t)
{
	return t->state ? &p->states[t->param] : &p->params[t->param];
}

static Node *state_node(LowerCtx *x, int idx, Loc loc)
{
	Graph *g = x->g;
	if (!g->state_nodes)
		g->state_nodes = arena_alloc(x->a, (size_t)(x->p->nstates + 1) * sizeof(Node *));
	if (!g->state_nodes[idx]) {
		ParamInfo *pi = &x->p->states[idx];
		Node *n = mk_node(x, OP_STATE, pi->dtype, pi->rank, pi->shape, loc);
		n->a[0] = idx;
		g->state_nodes[idx] = n;
	}
	return g->state_nodes[idx];
}

static Node *param_node(LowerCtx *x, int idx, Loc loc)
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
Node *as_tensor(LowerCtx *x, Value *v, Loc loc, const char *what)
{
	if (v->kind == V_TENSOR)
		return v->node;
	if (v->kind == V_PARAM && v->pt->kind == PT_LEAF) {
		if (!x->g) {
			error_at(x->d, loc, "a %s is not a compile-time value", v->pt->state ? "state" : "param");
			return NULL;
		}
		return v->pt->state ? state_node(x, v->pt->param, loc) : param_node(x, v->pt->param, loc);
	}
	if (v->kind != V_ERR)
		error_at(x->d, loc, "%s must be a tensor, not %s", what, tystr(x, v));
	return NULL;
}

Node *const_node(LowerCtx *x, DType dt, Value *v, Loc loc)
{
	Node *n = mk_node(x, OP_CONST, dt, 0, NULL, loc);
	if (dtype_is_float(dt)) {
		n->fval = v->kind == V_FLOAT ? v->f : (double)v->i;
	} else if (dt == DT_BOOL) {
		n->ival = v->kind == V_FLOAT ? v->f != 0 : v->i != 0;
	} else {
		n->ival = dtype_wrap(dt, v->i);
	}
	return n;
}

Node *unary_node(LowerCtx *x, Op op, DType dt, Node *in, Loc loc)
{
	Node *n = mk_node(x, op, dt, in->rank, in->shape, loc);
	node_add_input(x->p, n, in);
	return n;
}

Node *reshape_node(LowerCtx *x, Node *in, int rank, const int64_t *shape, Loc loc)
{
	if (in->rank == rank && !memcmp(in->shape, shape, (size_t)rank * sizeof(int64_t)))
		return in;
	Node *n = mk_node(x, OP_RESHAPE, in->dtype, rank, shape, loc);
	node_add_input(x->p, n, in);
	return n;
}

/* t[..., K] as the matrix [rows, K] of its leading axes folded: the form a
 * matmul against a weight needs for its packed panels, pool and epilogue
 * (plan.c). A reshape, so it costs nothing. */
Node *fold_rows(LowerCtx *x, Node *t, Loc loc)
{
	int64_t k = t->shape[t->rank - 1];
	return reshape_node(x, t, 2, (int64_t[]){shape_numel(t->rank - 1, t->shape), k}, loc);
}

/* The inverse for a result y[rows, N] of fold_rows(like): like's shape with N
 * as its last axis. */
Node *unfold_rows(LowerCtx *x, Node *y, Node *like, Loc loc)
{
	int64_t s[MAX_RANK];
	memcpy(s, like->shape, (size_t)like->rank * sizeof s[0]);
	s[like->rank - 1] = y->shape[y->rank - 1];
	return reshape_node(x, y, like->rank, s, loc);
}

/* ---- broadcasting and elementwise ops ---- */

static const char *op_verb(Op op)
{
	return op_info[op].verb ? op_info[op].verb : "combine";
}

/* NumPy broadcasting of two shapes; 0 and a message on a mismatch. */
int broadcast_shapes(LowerCtx *x, Node *a, Node *b, int *rank, int64_t *shape, Op op, Loc loc)
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

/* Make both operands tensors: a compile-time number takes the other side's dtype. */
int binary_operands(LowerCtx *x, Op op, Value *va, Value *vb, Node **na, Node **nb, Loc loc)
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
		int64_t lo, hi;
		dtype_int_range(dt, &lo, &hi);
		if (cv->kind == V_INT && !dtype_is_float(dt) && (cv->i < lo || cv->i > hi)) {
			/* it would wrap to another number without a word */
			error_at(x->d, loc, "cannot %s %s and %lld: the number does not fit in %s (convert the tensor with "
			         "i64(...))", op_verb(op), nstr(x, other), (long long)cv->i, dtype_name(dt));
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

Value *emit_binary(LowerCtx *x, Op op, Value *va, Value *vb, Loc loc)
{
	Node *a, *b;
	if (!binary_operands(x, op, va, vb, &a, &b, loc))
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
	case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_FMOD:
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
	if (!broadcast_shapes(x, a, b, &rank, shape, op, loc))
		return VERR;
	int cmp = op == OP_EQ || op == OP_NE || op == OP_LT || op == OP_LE || op == OP_GT || op == OP_GE;
	Node *n = mk_node(x, op, cmp ? DT_BOOL : dt, rank, shape, loc);
	node_add_input(x->p, n, a);
	node_add_input(x->p, n, b);
	return vtensor(x, n);
}

Value *emit_matmul(LowerCtx *x, Value *va, Value *vb, Loc loc)
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
	/* a batch of rows against one matrix (a linear layer on [N, T, I]): one
	 * 2-D matmul over the folded rows, with the weight's packed panels */
	if (a->rank > 2 && b->rank == 2 && a->shape[a->rank - 1] == b->shape[0]) {
		Value *y = emit_matmul(x, vtensor(x, fold_rows(x, a, loc)), vtensor(x, b), loc);
		return y->kind == V_ERR ? y : vtensor(x, unfold_rows(x, y->node, a, loc));
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

/* ---- compile-time ints and axes ---- */

/* A compile-time int, or 0 after an error. */
int ct_int(LowerCtx *x, Value *v, Loc loc, const char *what, int64_t *out)
{
	if (v->kind == V_INT) {
		*out = v->i;
		return 1;
	}
	if (v->kind != V_ERR)
		error_at(x->d, loc, "%s must be a compile-time integer, not %s", what, tystr(x, v));
	return 0;
}

/* An axis in [-rank, rank) as a non-negative one, or 0 after an error. */
int norm_axis(LowerCtx *x, int64_t axis, int rank, Loc loc, int *out)
{
	if (axis < -rank || axis >= rank || rank == 0) {
		error_at(x->d, loc, "axis %lld is out of range for a tensor of rank %d", (long long)axis, rank);
		return 0;
	}
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 1;
}


/* eval.c - expressions, below the checker and lowering: the table of global
 * names, compile-time arithmetic on Values and the one evaluator of expressions.
 * The checker evaluates constant expressions with it (no graph: a tensor, a
 * param or a call of a user function is an error there); lowering evaluates
 * every expression with it, and gets the calls of user functions back through
 * LowerCtx.call_fn (lower.c), the one recursion of lowering. */
#include "nestc.h"

#include <math.h>
#include <string.h>

/* ---- the global table ---- */

static void hash_insert(Checker *c, int idx)
{
	uint64_t h = hash_str(c->globals[idx]->name);
	int mask = c->hcap - 1;
	for (int i = (int)(h & (uint64_t)mask);; i = (i + 1) & mask) {
		if (!c->htab[i]) {
			c->htab[i] = (uint64_t)idx + 1;
			return;
		}
	}
}

void global_add(Checker *c, Global *g)
{
	c->globals[c->nglobals] = g;
	hash_insert(c, c->nglobals);
	c->nglobals++;
}

Global *lookup_global(Checker *c, const char *name)
{
	if (!c->hcap)
		return NULL;
	uint64_t h = hash_str(name);
	int mask = c->hcap - 1;
	for (int i = (int)(h & (uint64_t)mask); c->htab[i]; i = (i + 1) & mask) {
		Global *g = c->globals[c->htab[i] - 1];
		if (!strcmp(g->name, name))
			return g;
	}
	return NULL;
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

static Value *ct_binary(LowerCtx *x, int op, Value *a, Value *b, Loc loc)
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


/* ---- names and fields ---- */

static Value *param_value(LowerCtx *x, Global *g)
{
	if (!g->ptree)
		return VERR; /* its declaration had an error */
	Value *v = value_new(x, V_PARAM);
	v->pt = g->ptree;
	return v;
}

Value *lookup_name(LowerCtx *x, Expr *e)
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
			if (g->decl->dtype_value) {
				error_at(x->d, e->loc, "const '%s' names a dtype (%s): write it as a type, %s[dims], or a cast, "
				         "%s(x), not as a value", e->name, dtype_name((DType)(g->decl->dtype_value - 1)), e->name, e->name);
				return VERR;
			}
			if (g->state == 1) {
				error_at(x->d, e->loc, "const '%s' is defined in terms of itself", e->name);
				return VERR;
			}
			if (g->state == 0) {
				/* consts may be used before their declaration */
				g->state = 1;
				LowerCtx sub = *x;
				sub.g = NULL;
				sub.scope = sub.fnscope = NULL;
				sub.te = NULL;
				sub.in_dim = 0;
				g->value = eval_expr(&sub, g->decl->value);
				g->state = 2;
				const_take_override(x->c, g);
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

static Value *field_value(LowerCtx *x, Value *base, const char *name, Loc loc)
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
				Value *v = value_new(x, V_PARAM);
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


/* ---- indexing ---- */

/* The part of t that the indices of e select: per axis its start and size,
 * and the sizes of the axes that stay (a plain index drops its axis). 0
 * after a located error. */
int index_bounds(LowerCtx *x, Node *t, Expr *e, int64_t *start, int64_t *size, int64_t *keep, int *nkeep)
{
	*nkeep = 0;
	for (int k = 0; k < t->rank; k++) {
		int64_t dim = t->shape[k];
		start[k] = 0;
		size[k] = dim;
		if (k >= e->nargs) {
			keep[(*nkeep)++] = dim;
			continue;
		}
		Expr *ie = e->args[k];
		if (ie->kind == E_SLICE) {
			int64_t lo = 0, hi = dim;
			if (ie->a && !ct_int(x, eval_expr(x, ie->a), ie->a->loc, "a slice bound", &lo))
				return 0;
			if (ie->b && !ct_int(x, eval_expr(x, ie->b), ie->b->loc, "a slice bound", &hi))
				return 0;
			int64_t l = lo < 0 ? lo + dim : lo, h = hi < 0 ? hi + dim : hi;
			if (l < 0 || l > dim || h < 0 || h > dim) {
				error_at(x->d, ie->loc, "slice %lld:%lld is out of range for axis %d of %s", (long long)lo,
				         (long long)hi, k, nstr(x, t));
				return 0;
			}
			if (l > h) {
				/* NumPy would give an empty axis: here it is most likely a mistake */
				error_at(x->d, ie->loc, "slice %lld:%lld of axis %d of %s ends before it starts (a slice does not "
				         "reverse; write %lld:%lld for no positions)", (long long)lo, (long long)hi, k, nstr(x, t),
				         (long long)lo, (long long)lo);
				return 0;
			}
			start[k] = l;
			size[k] = h - l;
			keep[(*nkeep)++] = h - l;
		} else {
			Value *iv = eval_expr(x, ie);
			if (iv->kind != V_ERR && v_is_tensor(iv)) {
				error_at(x->d, ie->loc, "a tensor index must be the only index");
				return 0;
			}
			int64_t i;
			if (!ct_int(x, iv, ie->loc, "an index", &i))
				return 0;
			if (i < -dim || i >= dim) {
				error_at(x->d, ie->loc, "index %lld is out of range for axis %d of %s", (long long)i, k, nstr(x, t));
				return 0;
			}
			start[k] = i < 0 ? i + dim : i;
			size[k] = 1;
		}
	}
	return 1;
}

static Value *index_value(LowerCtx *x, Value *base, Expr *e)
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
		if (!ct_int(x, eval_expr(x, e->args[0]), e->args[0]->loc, "an array index", &i))
			return VERR;
		if (i < -n || i >= n) {
			error_at(x->d, e->args[0]->loc, "index %lld is out of range for an array of %d elements", (long long)i, n);
			return VERR;
		}
		if (i < 0)
			i += n;
		if (base->kind != V_PARAM)
			return base->items[i];
		Value *v = value_new(x, V_PARAM);
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
		Value *iv = eval_expr(x, e->args[0]);
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
	if (!index_bounds(x, t, e, start, size, keep, &nkeep))
		return VERR;
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


/* ---- calls ---- */

/* A call of a user function: its arguments, positional then named, evaluated
 * here; lowering specialises or inlines the body (x->call_fn). */
static Value *call_user(LowerCtx *x, Global *gfn, Expr *call)
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
			argv[found] = eval_expr(x, ae->a);
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
			argv[npos++] = eval_expr(x, ae);
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
	return x->call_fn(x, gfn, call, argv);
}

/* A call of a builtin: its arguments evaluated into Args, then its rules (builtins.c). */
static Value *call_builtin_expr(LowerCtx *x, const char *name, Expr *call)
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
			a.named[a.nnamed] = eval_expr(x, ae->a);
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
			int dimarg = builtin_dim_arg(name, a.npos);
			x->in_dim += dimarg;
			a.pos[a.npos] = eval_expr(x, ae);
			x->in_dim -= dimarg;
			if (a.pos[a.npos]->kind == V_ERR)
				return VERR;
			a.npos++;
		}
	}
	return call_builtin(x, &a);
}

/* ---- expressions ---- */

int nesting_enter(LowerCtx *x, Loc loc)
{
	Checker *c = x->c;
	if (c->nesting >= MAX_NESTING) {
		if (!c->nesting_said)
			error_at(x->d, loc, "nested too deeply (more than %d levels of expressions, statements, "
			         "consts and calls)", MAX_NESTING);
		c->nesting_said = 1;
		x->out_of_budget = 1; /* as when the budget is spent: lowering stops, quietly */
		return 0;
	}
	c->nesting++;
	return 1;
}

void nesting_leave(LowerCtx *x)
{
	x->c->nesting--;
}

static Value *eval_expr1(LowerCtx *x, Expr *e);

Value *eval_expr(LowerCtx *x, Expr *e)
{
	if (!nesting_enter(x, e->loc))
		return VERR;
	Value *v = eval_expr1(x, e);
	nesting_leave(x);
	return v;
}

/* a OP b on two values: compile-time arithmetic, else a node */
static Value *binary_values(LowerCtx *x, int op, Value *a, Value *b, Loc loc)
{
	if (a->kind == V_ERR || b->kind == V_ERR)
		return VERR;
	if (is_ct(a) && is_ct(b))
		return ct_binary(x, op, a, b, loc);
	if (!x->g) {
		error_at(x->d, loc, "this expression must be a compile-time value");
		return VERR;
	}
	static const Op ops[] = {
		[OPR_OR] = OP_OR, [OPR_AND] = OP_AND, [OPR_EQ] = OP_EQ, [OPR_NE] = OP_NE,
		[OPR_LT] = OP_LT, [OPR_LE] = OP_LE, [OPR_GT] = OP_GT, [OPR_GE] = OP_GE,
		[OPR_ADD] = OP_ADD, [OPR_SUB] = OP_SUB, [OPR_MUL] = OP_MUL, [OPR_DIV] = OP_DIV,
		[OPR_MOD] = OP_MOD,
	};
	if (op == OPR_MATMUL)
		return emit_matmul(x, a, b, loc);
	return emit_binary(x, ops[op], a, b, loc);
}

/* a < b <= c ... (mk_compare: the comparisons joined by chain &&s, each
 * middle operand shared by two of them): every operand evaluated once, as
 * Python does. Twice, a call in the middle ran twice (a state it writes
 * was written twice) and a product was computed twice. Returns the
 * comparisons of chain c joined by &&; *last: the value of its last operand.
 * Recursive, one small frame a link: an array of links per chain on the
 * stack, nested in operands, could overflow it. */
static Value *chain_values(LowerCtx *x, Expr *c, Value **last)
{
	Value *all = NULL, *left;
	Expr *cmp = c;
	if (c->kind == E_BINARY && c->op == OPR_AND && c->chain) {
		all = chain_values(x, c->a, &left);
		cmp = c->b;
		if (all->kind == V_ERR) {
			*last = VERR;
			return VERR;
		}
	} else {
		left = eval_expr(x, c->a);
	}
	Value *right = eval_expr(x, cmp->b);
	*last = right;
	Value *r = binary_values(x, cmp->op, left, right, cmp->loc);
	if (r->kind == V_ERR) {
		/* read as C reads it, (a < b) == c, the error makes no sense */
		if (all && left->kind != V_ERR && right->kind != V_ERR)
			note_at(x->d, cmp->loc, "comparisons chain: this compares the operand before it, as in "
			        "'a < b == c', which is 'a < b && b == c'; write '(a < b) == c' to compare the first result");
		return VERR;
	}
	return all ? binary_values(x, OPR_AND, all, r, cmp->loc) : r;
}

static Value *eval_expr1(LowerCtx *x, Expr *e)
{
	switch (e->kind) {
	case E_INT: return vint(x, e->ival);
	case E_FLOAT: return vfloat(x, e->fval);
	case E_BOOL: return vbool(x, (int)e->ival);
	case E_STR: {
		Value *v = value_new(x, V_STR);
		v->s = e->name;
		return v;
	}
	case E_NAME:
		return lookup_name(x, e);
	case E_BINARY: {
		if (e->chain) {
			Value *last;
			return chain_values(x, e, &last);
		}
		Value *a = eval_expr(x, e->a);
		Value *b = eval_expr(x, e->b);
		return binary_values(x, e->op, a, b, e->loc);
	}
	case E_UNARY: {
		Value *a = eval_expr(x, e->a);
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
			return call_user(x, g, e);
		if (g && g->kind == G_CONST && g->decl->dtype_value)
			/* a const naming a dtype casts as the dtype's own name does */
			return call_builtin_expr(x, dtype_name((DType)(g->decl->dtype_value - 1)), e);
		if (g) {
			error_at(x->d, e->a->loc, "'%s' is not a function", name);
			return VERR;
		}
		if (is_builtin(name))
			return call_builtin_expr(x, name, e);
		if (!x->quiet)
			error_at(x->d, e->a->loc, "unknown function '%s'", name);
		return VERR;
	}
	case E_NAMED:
		error_at(x->d, e->loc, "a named argument is only allowed in a call");
		return VERR;
	case E_FIELD:
		return field_value(x, eval_expr(x, e->a), e->name, e->name_loc);
	case E_INDEX:
		return index_value(x, eval_expr(x, e->a), e);
	case E_SLICE:
		error_at(x->d, e->loc, "a slice is only allowed inside [ ]");
		return VERR;
	case E_LIST: {
		Value *v = value_new(x, V_LIST);
		v->n = e->nargs;
		v->items = arena_alloc(x->a, (size_t)(e->nargs + 1) * sizeof(Value *));
		for (int i = 0; i < e->nargs; i++) {
			v->items[i] = eval_expr(x, e->args[i]);
			if (v->items[i]->kind == V_ERR)
				return VERR;
		}
		return v;
	}
	case E_RECORD: {
		Value *v = value_new(x, V_RECORD);
		v->n = e->nargs;
		v->names = e->names;
		v->items = arena_alloc(x->a, (size_t)(e->nargs + 1) * sizeof(Value *));
		for (int i = 0; i < e->nargs; i++) {
			for (int k = 0; k < i; k++)
				if (!strcmp(e->names[k], e->names[i])) {
					error_at(x->d, e->args[i]->loc, "field '%s' appears twice", e->names[i]);
					return VERR;
				}
			v->items[i] = eval_expr(x, e->args[i]);
			if (v->items[i]->kind == V_ERR)
				return VERR;
		}
		return v;
	}
	}
	ice("eval: expression kind %d", e->kind);
}


static const char *override_kind_word(ValueKind k)
{
	switch (k) {
	case V_INT: return "an int";
	case V_FLOAT: return "a float";
	case V_BOOL: return "a bool";
	default: return "not a number";
	}
}

void const_take_override(Checker *c, Global *g)
{
	Value *v = g->over;
	if (!v)
		return;
	g->over = NULL;
	ValueKind want = g->value->kind;
	if (want == V_ERR) {
		g->value = v;
		return;
	}
	if (want == v->kind || (want == V_FLOAT && v->kind == V_INT)) {
		if (want == V_FLOAT && v->kind == V_INT) {
			v->kind = V_FLOAT;
			v->f = (double)v->i;
		}
		g->value = v;
	} else {
		if (g->over_src)
			error_at(c->d, g->decl->name_loc, "const '%s' is %s, and %s is %s", g->name, override_kind_word(want),
			         g->over_src, override_kind_word(v->kind));
		else
			error_plain(c->d, "-D %s: const '%s' is %s, and the value given is %s", g->name, g->name,
			            override_kind_word(want), override_kind_word(v->kind));
	}
}

Value *eval_const_expr(Checker *c, Expr *e)
{
	LowerCtx x = {.c = c, .a = c->a, .d = c->d, .p = c->p, .budget = 1000000};
	return eval_expr(&x, e);
}

/* lower.c - specialise and lower: every exported function is walked with its
 * argument shapes known; calls are specialised per argument signature, plain
 * functions inlined, for-loops unrolled, region calls kept as OP_CALL nodes of a
 * specialised callee graph. Statements, the matching of arguments and results
 * against declared types, and calls of user functions are here; expressions are
 * evaluated by eval.c, builtins by builtins.c. compile_module runs the checker,
 * then lowering. */
#include "nestc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- statements ---- */

typedef struct FnResult {
	Value *value; /* V_TUPLE for several results */
	Loc loc;      /* the return statement */
	Stmt *ret;
	int done;
} FnResult;

static void lower_stmts(LowerCtx *x, Stmt **body, int n, FnResult *res);

static void bind_let(LowerCtx *x, Stmt *s, Value *v)
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

static void lower_stmts1(LowerCtx *x, Stmt **body, int n, FnResult *res);

/* A state, or a region's input that its calls bind to a state: written in place. */
static int state_target(Node *t)
{
	return t->op == OP_STATE || (t->op == OP_INPUT && t->a[1] == 1);
}

/* target[indices] = value: the value is written into the state in place. */
static void lower_store(LowerCtx *x, Stmt *s)
{
	Expr *te = s->target;
	Value *base = eval_expr(x, te->a);
	if (base->kind == V_ERR)
		return;
	if (!v_is_tensor(base)) {
		error_at(x->d, te->a->span, "only a state can be written in place, not %s", tystr(x, base));
		return;
	}
	Node *t = as_tensor(x, base, te->a->span, "the target");
	if (!t)
		return;
	if (!state_target(t)) {
		error_at(x->d, te->a->span,
		         "only a state can be written in place; this is %s (bind a new value with 'let')",
		         t->op == OP_PARAM ? "a param" : "a tensor value");
		return;
	}
	for (int k = 0; k < te->nargs; k++)
		if (te->args[k]->kind != E_SLICE) {
			Value *iv = eval_expr(x, te->args[k]);
			if (iv->kind != V_ERR && v_is_tensor(iv)) {
				error_at(x->d, te->args[k]->loc, "a state is written through slices and integer indices, not a tensor index");
				return;
			}
		}
	if (te->nargs > t->rank) {
		error_at(x->d, te->loc, "too many indices (%d) for %s", te->nargs, nstr(x, t));
		return;
	}
	int64_t start[MAX_RANK], size[MAX_RANK], keep[MAX_RANK];
	int nkeep;
	if (!index_bounds(x, t, te, start, size, keep, &nkeep))
		return;
	Value *vv = eval_expr(x, s->value);
	if (vv->kind == V_ERR)
		return;
	Node *v;
	if (is_ct(vv)) {
		Node *c = const_node(x, t->dtype, vv, s->value->loc);
		v = mk_node(x, OP_EXPAND, t->dtype, t->rank, size, s->value->loc);
		node_add_input(x->p, v, reshape_node(x, c, 0, NULL, s->value->loc));
		if (!c)
			return;
	} else {
		v = as_tensor(x, vv, s->value->loc, "the value stored");
		if (!v)
			return;
		if (v->dtype != t->dtype) {
			error_at(x->d, s->value->loc, "cannot store %s into %s: the dtypes differ (convert with %s(...))",
			         nstr(x, v), nstr(x, t), dtype_name(t->dtype));
			return;
		}
		int same = v->rank == nkeep && !memcmp(v->shape, keep, (size_t)nkeep * sizeof keep[0]);
		if (!same) {
			error_at(x->d, s->value->loc, "cannot store %s into %s: the part written is %s", nstr(x, v),
			         nstr(x, t), shstr(x, t->dtype, nkeep, keep));
			return;
		}
		v = reshape_node(x, v, t->rank, size, s->value->loc);
	}
	Node *n = mk_node(x, OP_STORE, t->dtype, t->rank, size, s->loc);
	node_add_input(x->p, n, t);
	node_add_input(x->p, n, v);
	for (int k = 0; k < t->rank; k++)
		n->a[k] = start[k];
}

/* Bodies nest (for loops, calls of functions): counted with expressions. */
static void lower_stmts(LowerCtx *x, Stmt **body, int n, FnResult *res)
{
	if (n == 0 || !nesting_enter(x, body[0]->loc))
		return;
	lower_stmts1(x, body, n, res);
	nesting_leave(x);
}

static void lower_stmts1(LowerCtx *x, Stmt **body, int n, FnResult *res)
{
	for (int i = 0; i < n && !x->out_of_budget; i++) {
		Stmt *s = body[i];
		if (!charge_budget(x, s->loc))
			return;
		switch (s->kind) {
		case S_LET:
		case S_ASSIGN:
			bind_let(x, s, eval_expr(x, s->value));
			break;
		case S_FOR: {
			int64_t lo, hi;
			Value *vlo = eval_expr(x, s->lo), *vhi = eval_expr(x, s->hi);
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
		case S_STORE:
			lower_store(x, s);
			break;
		case S_RETURN: {
			Value *v;
			if (s->nvalues == 1) {
				v = eval_expr(x, s->values[0]);
			} else {
				v = value_new(x, V_TUPLE);
				v->n = s->nvalues;
				v->items = arena_alloc(x->a, (size_t)s->nvalues * sizeof(Value *));
				/* every value, after an error too: each reports its own */
				int bad = 0;
				for (int k = 0; k < s->nvalues; k++) {
					v->items[k] = eval_expr(x, s->values[k]);
					bad |= v->items[k]->kind == V_ERR;
				}
				if (bad)
					v = VERR;
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

static Value *match_type(LowerCtx *x, TypeExpr *t, Value *v, const char *what, Loc loc);

/* Match one dimension expression against an actual size: a bare name that is not
 * bound yet becomes a shape variable of the function. */
static int match_dim(LowerCtx *x, Expr *dim, int64_t actual, int64_t *expected)
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
	Value *v = eval_expr(x, dim);
	x->in_dim--;
	if (v->kind == V_ERR)
		return 1;
	if (!ct_int(x, v, dim->loc, "a dimension", expected))
		return 1;
	return *expected == actual;
}

static Value *make_tenv_and_match(LowerCtx *x, Global *g, TypeExpr *t, Value *v, const char *what, Loc loc)
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
			Value *av = eval_expr(x, ae);
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

static Value *match_type(LowerCtx *x, TypeExpr *t, Value *v, const char *what, Loc loc)
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
		Value *r = value_new(x, V_RECORD);
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
						fv = value_new(x, V_PARAM);
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
		Value *r = value_new(x, V_ARRAY);
		r->n = n;
		r->items = arena_alloc(x->a, (size_t)(n + 1) * sizeof(Value *));
		for (int i = 0; i < n; i++) {
			Value *ev = v->kind == V_ARRAY ? v->items[i] : NULL;
			if (!ev) {
				ev = value_new(x, V_PARAM);
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

/* A tensor value that is a state (or a region's input bound to one). */
static int value_is_state(Value *v)
{
	if (v->kind == V_PARAM)
		return v->pt->kind == PT_LEAF && v->pt->state;
	return v->kind == V_TENSOR && state_target(v->node);
}

static void sig_str(LowerCtx *x, Buf *b, Value *v)
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
			if (value_is_state(v))
				buf_puts(b, "state ");
			shape_str(b, dt, rank, shape);
			break;
		}
		/* fall through */
	default:
		value_type_str(b, x->p, v);
		break;
	}
}

/* A long record type, cut short for a note: nested records as {...}, the
 * first fields only. */
#define NOTE_FIELDS 3
static void short_ptree_str(Buf *b, const Program *p, PTree *t, int depth)
{
	if (t->kind == PT_ARRAY) {
		short_ptree_str(b, p, t->kids[0], depth);
		buf_printf(b, "[%d]", t->n);
	} else if (t->kind == PT_RECORD && depth > 0) {
		buf_puts(b, "{...}");
	} else if (t->kind == PT_RECORD) {
		buf_putc(b, '{');
		for (int i = 0; i < t->n && i < NOTE_FIELDS; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", t->names[i]);
			short_ptree_str(b, p, t->kids[i], depth + 1);
		}
		buf_puts(b, t->n > NOTE_FIELDS ? ", ... }" : " }");
	} else {
		const ParamInfo *pi = &p->params[t->param];
		shape_str(b, pi->dtype, pi->rank, pi->shape);
	}
}

static void short_value_str(LowerCtx *x, Buf *b, Value *v, int depth)
{
	if (v->kind == V_PARAM) {
		short_ptree_str(b, x->p, v->pt, depth);
	} else if (v->kind == V_ARRAY && v->n) {
		short_value_str(x, b, v->items[0], depth);
		buf_printf(b, "[%d]", v->n);
	} else if (v->kind == V_RECORD && depth > 0) {
		buf_puts(b, "{...}");
	} else if (v->kind == V_RECORD) {
		buf_putc(b, '{');
		for (int i = 0; i < v->n && i < NOTE_FIELDS; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", v->names[i]);
			short_value_str(x, b, v->items[i], depth + 1);
		}
		buf_puts(b, v->n > NOTE_FIELDS ? ", ... }" : " }");
	} else {
		sig_str(x, b, v);
	}
}

/* An argument in the note under an error in a call: its type in full when
 * short, else the name of its declared type as written (Block, Linear(D, F)),
 * else the record cut short; a whole model's type would bury the error. */
static void note_arg_str(LowerCtx *x, Buf *b, FnArg *fa, Value *v)
{
	Buf full = {0};
	sig_str(x, &full, v);
	const Source *src = x->d->src;
	TypeExpr *t = fa->type;
	if (full.len <= 80) {
		buf_puts(b, full.s ? full.s : "");
	} else if (t && t->kind == T_NAMED && src && t->loc.off >= 0 && t->loc.end > t->loc.off &&
	           (size_t)t->loc.end <= src->len) {
		buf_printf(b, "%.*s", (int)(t->loc.end - t->loc.off), src->text + t->loc.off);
	} else {
		short_value_str(x, b, v, 0);
	}
	buf_free(&full);
}

/* Flatten the tensor leaves of a matched argument, in field order. */
static void collect_leaves(LowerCtx *x, Value *v, const char *path, Vec *vals, Vec *names)
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
static Value *rebuild_with_inputs(LowerCtx *x, Value *v, Node **inputs, int *k)
{
	if (v_is_tensor(v))
		return vtensor(x, inputs[(*k)++]);
	if (v->kind == V_RECORD || v->kind == V_ARRAY) {
		Value *r = value_new(x, v->kind);
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
static int dims_bound(LowerCtx *x, Expr *e)
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

static void check_type_dims(LowerCtx *x, TypeExpr *t)
{
	if (t->kind != T_TENSOR)
		return;
	for (int i = 0; i < t->ndims; i++)
		if (dims_bound(x, t->dims[i])) {
			x->in_dim++;
			eval_expr(x, t->dims[i]);
			x->in_dim--;
		}
}

static Value *check_results(LowerCtx *x, Decl *fn, FnResult *res)
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

static const char *arg_what(LowerCtx *x, Decl *fn, int i)
{
	return arena_printf(x->a, "argument '%s' of '%s'", fn->fargs[i].name, fn->name);
}

/* Bind call arguments (already evaluated) to the callee's arguments. */
static int bind_args(LowerCtx *x, Decl *fn, Expr *call, Value **argv, Value **bound)
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

/* A call of a user function, its arguments evaluated (eval.c): a plain function
 * is inlined, a region specialised per argument signature and called. */
static Value *call_function(LowerCtx *x, Global *gfn, Expr *call, Value **argv)
{
	Decl *fn = gfn->decl;
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
	if (x->spec_tag)
		buf_puts(&key, x->spec_tag);
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
			in->a[1] = value_is_state(leaves.v[i]); /* written in place: the caller's state */
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
				Value *hv = eval_expr(x, fn->attrs[i].value);
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
		if (rv->kind != V_ERR)
			widen_graph(x->p, callee);
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
	Value *tuple = value_new(x, V_TUPLE);
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
				note_arg_str(x, &sig, &fn->fargs[i], bound[i]);
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


/* ---- entry points ---- */

/* An exported function's graph, with its run-time dims (if any) bound to
 * the values dv; NULL after an error. */
static Graph *lower_export_graph(LowerCtx *x, Global *gfn, Entry *en, const int64_t *dv)
{
	Decl *fn = gfn->decl;
	Graph *g = graph_new(x->p, fn->name, fn);
	x->g = g;
	Scope *top = arena_alloc(x->a, sizeof *top);
	x->scope = x->fnscope = top;
	for (int j = 0; j < en->ndims; j++)
		scope_bind(x, top, en->dim_names[j], vint(x, dv[j]));
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
				         "the shape of '%s' must be known: '%s' is not a const (a run-time dimension is named in a where clause: "
				         "'where 1 <= %s, %s <= 1024')",
				         fa->name, de->name, de->name, de->name);
				ok = 0;
				shape[k] = 1;
				continue;
			}
			x->in_dim++;
			Value *v = eval_expr(x, de);
			x->in_dim--;
			if (!ct_int(x, v, de->loc, "a dimension", &shape[k])) {
				ok = 0;
				shape[k] = 1;
			} else if (shape[k] < 0) {
				error_at(x->d, de->loc, "dimension %lld is negative", (long long)shape[k]);
				ok = 0;
			}
		}
		if (!check_shape_size(x, t->dtype, t->ndims, shape, t->loc)) {
			/* said at the type: not again at each node computed from it */
			x->p->size_reported = 1;
			ok = 0;
			continue;
		}
		Node *in = mk_node(x, OP_INPUT, t->dtype, t->ndims, shape, fa->loc);
		in->a[0] = i;
		g->inputs[i] = in;
		scope_bind(x, top, fa->name, vtensor(x, in));
	}
	if (!ok)
		return NULL;
	vec_push(&x->stack, fn);
	FnResult res = {0};
	lower_stmts(x, fn->body, fn->nbody, &res);
	x->stack.n--;
	Value *rv = check_results(x, fn, &res);
	if (rv->kind == V_ERR)
		return NULL;
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
			return NULL;
		}
		g->outputs[i] = as_tensor(x, item, res.loc, "a result");
	}
	widen_graph(x->p, g);
	return g;
}

/* Does graph g, or a region it calls, touch a state? */
static int uses_state(Graph *g, int depth)
{
	for (int i = 0; i < g->nnodes && depth < 64; i++)
		if (g->nodes[i]->op == OP_STATE || (g->nodes[i]->op == OP_CALL && uses_state(g->nodes[i]->callee, depth + 1)))
			return 1;
	return 0;
}

/* -D gives every run-time dim of the entry a value: the entry is compiled for
 * those values alone, a static entry (1 and *g, NULL after an error). 0 when
 * none is given. */
static int fixed_dims(LowerCtx *x, Decl *fn, Entry *en, Graph **g)
{
	CompileOptions *o = x->c->opts;
	int64_t v[MAX_DIMS];
	int given = 0;
	*g = NULL;
	/* run --entry f -D T=5: another entry's T is its own, and may not
	 * even admit 5 */
	if (o && o->only_entry && strcmp(o->only_entry, fn->name))
		return 0;
	for (int j = 0; j < en->ndims; j++)
		for (int k = 0; o && k < o->ndefines; k++)
			if (!strcmp(o->defines[k].name, en->dim_names[j])) {
				char *end;
				errno = 0;
				long long iv = strtoll(o->defines[k].value, &end, 10);
				if (!*o->defines[k].value || *end || errno) {
					error_plain(x->d, "-D %s=%s: a run-time dimension's value is an integer", o->defines[k].name,
					            o->defines[k].value);
					return 1;
				}
				v[j] = iv;
				given++;
			}
	if (!given)
		return 0;
	if (given != en->ndims) {
		/* the -D is likely meant for another entry that shares the name:
		 * this one stays compiled for every value */
		warning_at(x->d, fn->where_loc,
		           "-D gives some of the run-time dimensions of '%s' a value but not all: it is compiled for every "
		           "value of them (give each one to compile it for those values alone)",
		           fn->name);
		return 0;
	}
	for (int k = 0; k < en->nchecks; k++) {
		int64_t r = affine_eval(&en->checks[k].f, en->ndims, v);
		if (en->checks[k].eq ? r != 0 : r < 0) {
			error_at(x->d, en->checks[k].loc, "-D: %s does not hold", en->checks[k].text);
			return 1;
		}
	}
	Global *gfn = lookup_global(x->c, fn->name);
	*g = lower_export_graph(x, gfn, en, v);
	en->ndims = 0; /* static from here on */
	en->nchecks = 0;
	return 1;
}

static void lower_export(LowerCtx *x, Global *gfn)
{
	Decl *fn = gfn->decl;
	Entry en = {.name = fn->name, .fn = fn};
	Graph *g;
	if (fn->nwhere) {
		/* run-time dims: lowered at sample values, then merged (dims.c) */
		int64_t pts[MAX_DIMS + 2][MAX_DIMS];
		int npts = 0;
		if (!entry_dims(x, fn, &en, pts, &npts))
			return;
		if (fixed_dims(x, fn, &en, &g)) {
			if (!g)
				return;
			goto done;
		}
		Graph *gs[MAX_DIMS + 2];
		int errors = x->d->nerrors;
		for (int p = 0; p < npts; p++) {
			x->spec_tag = arena_printf(x->a, " @%s#%d", fn->name, p);
			gs[p] = lower_export_graph(x, gfn, &en, pts[p]);
			x->spec_tag = NULL;
			if (!gs[p] || x->d->nerrors > errors) {
				if (p > 0 && x->d->nerrors > errors) {
					Buf b = {0};
					for (int j = 0; j < en.ndims; j++)
						buf_printf(&b, "%s%s = %lld", j ? ", " : "", en.dim_names[j], (long long)pts[p][j]);
					note_at(x->d, fn->name_loc, "while compiling '%s' at %s, one of the values it is checked at", fn->name, b.s);
					buf_free(&b);
				}
				return;
			}
		}
		if (!merge_samples(x, &en, gs, npts, pts))
			return;
		g = gs[0];
	} else {
		g = lower_export_graph(x, gfn, &en, NULL);
		if (!g)
			return;
	}
done:
	en.g = g;
	en.arg_names = g->input_names;
	en.uses_state = uses_state(g, 0);
	Program *p = x->p;
	Entry *ne = arena_alloc(x->a, (size_t)(p->nentries + 1) * sizeof(Entry));
	if (p->nentries)
		memcpy(ne, p->entries, (size_t)p->nentries * sizeof(Entry));
	ne[p->nentries] = en;
	p->entries = ne;
	p->nentries++;
}

static void lower_program(Checker *c)
{
	LowerCtx x = {.c = c, .a = c->a, .d = c->d, .p = c->p, .budget = 50000000};
	x.call_fn = call_function;
	lower_params(&x);
	int nexports = 0;
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind == G_FN && g->decl->is_export) {
			nexports++;
			lower_export(&x, g);
		}
	}
	mark_variance_params(c->p);
	if (c->d->nerrors == 0 && !c->opts->no_narrow)
		narrow_program(c->p);
	if (nexports == 0 && c->d->nerrors == 0)
		warning_plain(c->d, "%s: no exported function: nothing to run or compile (mark an entry point 'export fn')",
		              c->d->src->path);
	free(x.stack.v);
}

Program *compile_module(Arena *a, Diag *d, Module *m, CompileOptions *opts)
{
	Checker *c = check_module(a, d, m, opts);
	lower_program(c);
	if (d->nerrors)
		return NULL;
	return c->p;
}

/* ast.c - AST constructors (one per grammar action) and the --dump=ast text. */
#include "nestc.h"

#include <stdlib.h>
#include <string.h>

const char *opr_text(int op)
{
	switch (op) {
	case OPR_OR: return "||";
	case OPR_AND: return "&&";
	case OPR_EQ: return "==";
	case OPR_NE: return "!=";
	case OPR_LT: return "<";
	case OPR_LE: return "<=";
	case OPR_GT: return ">";
	case OPR_GE: return ">=";
	case OPR_ADD: return "+";
	case OPR_SUB: return "-";
	case OPR_MUL: return "*";
	case OPR_DIV: return "/";
	case OPR_MOD: return "%";
	case OPR_MATMUL: return "@";
	case OPR_NEG: return "-";
	case OPR_NOT: return "!";
	}
	ice("opr_text: bad operator %d", op);
}

/* Copy a Vec into an arena array (the Vec's heap storage is released). */
static void *take(Arena *a, Vec *v, int *n)
{
	*n = v ? v->n : 0;
	if (!v || !v->n)
		return NULL;
	/* grammar vectors live in the arena already (avec_push) */
	return v->v;
}

Expr *mk_expr(Arena *a, ExprKind k, Loc loc)
{
	Expr *e = arena_alloc(a, sizeof *e);
	e->kind = k;
	e->loc = loc;
	e->span = loc;
	return e;
}

Expr *mk_int(Arena *a, Loc loc, int64_t v)
{
	Expr *e = mk_expr(a, E_INT, loc);
	e->ival = v;
	return e;
}

Expr *mk_float(Arena *a, Loc loc, double v)
{
	Expr *e = mk_expr(a, E_FLOAT, loc);
	e->fval = v;
	return e;
}

Expr *mk_bool(Arena *a, Loc loc, int v)
{
	Expr *e = mk_expr(a, E_BOOL, loc);
	e->ival = v;
	return e;
}

Expr *mk_str(Arena *a, Loc loc, const char *s)
{
	Expr *e = mk_expr(a, E_STR, loc);
	e->name = s;
	return e;
}

Expr *mk_name(Arena *a, Loc loc, const char *s)
{
	Expr *e = mk_expr(a, E_NAME, loc);
	e->name = s;
	return e;
}

Expr *mk_binary(Arena *a, Loc loc, int op, Expr *l, Expr *r)
{
	Expr *e = mk_expr(a, E_BINARY, loc);
	e->op = op;
	e->a = l;
	e->b = r;
	e->span.off = l->span.off;
	e->span.end = r->span.end;
	return e;
}

static int is_comparison(int op)
{
	return op == OPR_EQ || op == OPR_NE || op == OPR_LT || op == OPR_LE || op == OPR_GT || op == OPR_GE;
}

/* Comparisons chain as in Python and in mathematics: a < b <= c is
 * a < b && b <= c (the where clause's 1 <= T <= CTX). A comparison whose left
 * operand is a comparison or such a chain, not in parentheses, continues it;
 * the middle operand is shared, and evaluated once (eval.c chain_values). */
Expr *mk_compare(Arena *a, Loc loc, int op, Expr *l, Expr *r)
{
	Expr *last = NULL;
	if (l->kind == E_BINARY && !l->paren) {
		if (is_comparison(l->op))
			last = l;
		else if (l->op == OPR_AND && l->chain)
			last = l->b;
	}
	if (!last)
		return mk_binary(a, loc, op, l, r);
	Expr *next = mk_binary(a, loc, op, last->b, r);
	next->depth = (last->b->depth > r->depth ? last->b->depth : r->depth) + 1;
	Expr *e = mk_binary(a, loc, OPR_AND, l, next);
	e->chain = 1;
	return e;
}

Expr *mk_paren(Expr *e)
{
	e->paren = 1;
	return e;
}

Expr *mk_unary(Arena *a, Loc loc, int op, Expr *x)
{
	Expr *e = mk_expr(a, E_UNARY, loc);
	e->op = op;
	e->a = x;
	return e;
}

Expr *mk_call(Arena *a, Loc loc, Expr *fn, Vec *args)
{
	Expr *e = mk_expr(a, E_CALL, loc);
	e->a = fn;
	e->args = take(a, args, &e->nargs);
	return e;
}

Expr *mk_named(Arena *a, Loc loc, const char *name, Expr *v)
{
	Expr *e = mk_expr(a, E_NAMED, loc);
	e->name = name;
	e->a = v;
	return e;
}

Expr *mk_field(Arena *a, Loc loc, Expr *x, const char *name, Loc name_loc)
{
	Expr *e = mk_expr(a, E_FIELD, loc);
	e->name_loc = name_loc;
	e->a = x;
	e->name = name;
	return e;
}

Expr *mk_index(Arena *a, Loc loc, Expr *x, Vec *args)
{
	Expr *e = mk_expr(a, E_INDEX, loc);
	e->a = x;
	e->args = take(a, args, &e->nargs);
	return e;
}

Expr *mk_slice(Arena *a, Loc loc, Expr *lo, Expr *hi)
{
	Expr *e = mk_expr(a, E_SLICE, loc);
	e->a = lo;
	e->b = hi;
	return e;
}

Expr *mk_list(Arena *a, Loc loc, Vec *items)
{
	Expr *e = mk_expr(a, E_LIST, loc);
	e->args = take(a, items, &e->nargs);
	return e;
}

Expr *mk_record(Arena *a, Loc loc, Vec *entries)
{
	Expr *e = mk_expr(a, E_RECORD, loc);
	Expr **named = take(a, entries, &e->nargs);
	e->args = arena_alloc(a, (size_t)(e->nargs ? e->nargs : 1) * sizeof(Expr *));
	e->names = arena_alloc(a, (size_t)(e->nargs ? e->nargs : 1) * sizeof(char *));
	e->locs = arena_alloc(a, (size_t)(e->nargs ? e->nargs : 1) * sizeof(Loc));
	for (int i = 0; i < e->nargs; i++) {
		e->names[i] = named[i]->name;
		e->locs[i] = named[i]->loc;
		e->args[i] = named[i]->a;
	}
	return e;
}

TypeExpr *mk_tensor_type(Arena *a, Loc loc, DType dt, Vec *dims, int any_shape)
{
	TypeExpr *t = arena_alloc(a, sizeof *t);
	t->kind = T_TENSOR;
	t->loc = loc;
	t->dtype = dt;
	t->any_shape = any_shape;
	t->dims = take(a, dims, &t->ndims);
	return t;
}

TypeExpr *mk_scalar_type(Arena *a, Loc loc, ScalarKind k)
{
	TypeExpr *t = arena_alloc(a, sizeof *t);
	t->kind = T_SCALAR;
	t->loc = loc;
	t->scalar = k;
	return t;
}

TypeExpr *mk_named_type(Arena *a, Loc loc, const char *name, Vec *args)
{
	/* int and float are ordinary names in the grammar; they name scalar types */
	if (!args && strcmp(name, "int") == 0)
		return mk_scalar_type(a, loc, SC_INT);
	if (!args && strcmp(name, "float") == 0)
		return mk_scalar_type(a, loc, SC_FLOAT);
	TypeExpr *t = arena_alloc(a, sizeof *t);
	t->kind = T_NAMED;
	t->loc = loc;
	t->name = name;
	t->args = take(a, args, &t->nargs);
	return t;
}

TypeExpr *mk_record_type(Arena *a, Loc loc, Vec *fields)
{
	TypeExpr *t = arena_alloc(a, sizeof *t);
	t->kind = T_RECORD;
	t->loc = loc;
	int n;
	Field **fs = take(a, fields, &n);
	t->nfields = n;
	t->fields = arena_alloc(a, (size_t)(n ? n : 1) * sizeof(Field));
	for (int i = 0; i < n; i++)
		t->fields[i] = *fs[i];
	return t;
}

TypeExpr *mk_array_type(Arena *a, Loc loc, TypeExpr *elem, Vec *dims)
{
	TypeExpr *t = arena_alloc(a, sizeof *t);
	int n;
	Expr **ds = take(a, dims, &n);
	t->kind = T_ARRAY;
	t->loc = loc;
	t->elem = elem;
	t->count = n ? ds[0] : NULL;
	if (n > 1) {
		t->dims = ds;
		t->ndims = n;
	}
	return t;
}

Field *mk_field_decl(Arena *a, Loc loc, const char *name, TypeExpr *t)
{
	Field *f = arena_alloc(a, sizeof *f);
	f->name = name;
	f->loc = loc;
	f->type = t;
	return f;
}

static void take_idents(Arena *a, Vec *v, const char ***names, Loc **locs, int *n)
{
	Ident **ids = take(a, v, n);
	*names = arena_alloc(a, (size_t)(*n ? *n : 1) * sizeof(char *));
	*locs = arena_alloc(a, (size_t)(*n ? *n : 1) * sizeof(Loc));
	for (int i = 0; i < *n; i++) {
		(*names)[i] = ids[i]->name;
		(*locs)[i] = ids[i]->loc;
	}
}

Stmt *mk_let(Arena *a, Loc loc, Vec *names, Expr *v, int is_let)
{
	Stmt *s = arena_alloc(a, sizeof *s);
	s->kind = is_let ? S_LET : S_ASSIGN;
	s->loc = loc;
	take_idents(a, names, &s->names, &s->name_locs, &s->nnames);
	s->value = v;
	return s;
}

Stmt *mk_for(Arena *a, Loc loc, const char *var, Loc varloc, Expr *lo, Expr *hi, Vec *body)
{
	Stmt *s = arena_alloc(a, sizeof *s);
	s->kind = S_FOR;
	s->loc = loc;
	s->nnames = 1;
	s->names = arena_alloc(a, sizeof(char *));
	s->names[0] = var;
	s->name_locs = arena_alloc(a, sizeof(Loc));
	s->name_locs[0] = varloc;
	s->lo = lo;
	s->hi = hi;
	s->body = take(a, body, &s->nbody);
	return s;
}

Stmt *mk_return(Arena *a, Loc loc, Vec *values)
{
	Stmt *s = arena_alloc(a, sizeof *s);
	s->kind = S_RETURN;
	s->loc = loc;
	s->values = take(a, values, &s->nvalues);
	return s;
}

static Decl *mk_decl(Arena *a, DeclKind k, Loc loc, const char *name, Loc nloc)
{
	Decl *d = arena_alloc(a, sizeof *d);
	d->kind = k;
	d->loc = loc;
	d->name = name;
	d->name_loc = nloc;
	return d;
}

Decl *mk_const(Arena *a, Loc loc, const char *name, Loc nloc, Expr *v)
{
	Decl *d = mk_decl(a, D_CONST, loc, name, nloc);
	d->value = v;
	return d;
}

/* @gguf("KEY") const NAME = EXPR: NAME takes KEY's value when the consts
 * come from a GGUF file (--consts-from, check.c); the only annotation a
 * const takes. */
Decl *mk_meta_const(Arena *a, Diag *d, Loc loc, const char *annot, Loc aloc, const char *key, const char *opt,
                    Loc oloc, const char *name, Loc nloc, Expr *v)
{
	if (strcmp(annot, "gguf"))
		error_at(d, aloc, "unknown annotation '@%s' (a const takes @gguf(\"KEY\"), a function @region)", annot);
	if (opt && strcmp(opt, "optional"))
		error_at(d, oloc, "expected 'optional' after the key of @gguf, not '%s'", opt);
	if (!*key)
		error_at(d, oloc, "@gguf needs a metadata key, such as \"llama.block_count\"");
	Decl *r = mk_const(a, loc, name, nloc, v);
	r->meta_key = key;
	r->meta_optional = opt != NULL;
	return r;
}

Decl *mk_const_dtype(Arena *a, Loc loc, const char *name, Loc nloc, int dtype)
{
	Decl *d = mk_decl(a, D_CONST, loc, name, nloc);
	d->dtype_value = dtype + 1;
	return d;
}

Decl *mk_typedecl(Arena *a, Loc loc, const char *name, Loc nloc, Vec *tparams, TypeExpr *t)
{
	Decl *d = mk_decl(a, D_TYPE, loc, name, nloc);
	take_idents(a, tparams, &d->tparams, &d->tparam_locs, &d->ntparams);
	d->type = t;
	return d;
}

Decl *mk_param(Arena *a, Loc loc, const char *name, Loc nloc, TypeExpr *t, const char *wname)
{
	Decl *d = mk_decl(a, D_PARAM, loc, name, nloc);
	d->type = t;
	d->wname = wname;
	return d;
}

Decl *mk_state(Arena *a, Diag *d, Loc loc, const char *kw, Loc kwloc, const char *name, Loc nloc, TypeExpr *t)
{
	if (strcmp(kw, "state"))
		error_at(d, kwloc, "expected a declaration, not '%s'", kw);
	Decl *r = mk_decl(a, D_STATE, loc, name, nloc);
	r->type = t;
	return r;
}

/* The conditions of a where clause, with each && (1 <= T <= CTX among them)
 * split into its operands: each is one bound. */
static void where_conds(Arena *a, Vec *out, Expr *e)
{
	if (e->kind == E_BINARY && e->op == OPR_AND) {
		where_conds(a, out, e->a);
		where_conds(a, out, e->b);
		return;
	}
	avec_push(a, out, e);
}

Decl *mk_where(Arena *a, Diag *d, Decl *fn, const char *kw, Loc kwloc, Vec *conds)
{
	if (strcmp(kw, "where"))
		error_at(d, kwloc, "expected 'where' or '{', not '%s'", kw);
	Vec *split = arena_alloc(a, sizeof(Vec));
	for (int i = 0; conds && i < conds->n; i++)
		where_conds(a, split, conds->v[i]);
	fn->where = take(a, split, &fn->nwhere);
	fn->where_loc = kwloc;
	return fn;
}

Decl *mk_fn_body(Arena *a, Decl *fn, Loc loc, Vec *body, int broken)
{
	fn->loc = loc;
	fn->body = take(a, body, &fn->nbody);
	fn->broken = broken;
	return fn;
}

Stmt *mk_store(Arena *a, Loc loc, Expr *target, Expr *v)
{
	Stmt *s = arena_alloc(a, sizeof *s);
	s->kind = S_STORE;
	s->loc = loc;
	s->target = target;
	s->value = v;
	return s;
}

FnArg *mk_fnarg(Arena *a, Loc loc, const char *name, TypeExpr *t)
{
	FnArg *f = arena_alloc(a, sizeof *f);
	f->name = name;
	f->loc = loc;
	f->type = t;
	return f;
}

RegionAttr *mk_attr(Arena *a, Loc loc, const char *key, Expr *v)
{
	RegionAttr *r = arena_alloc(a, sizeof *r);
	r->key = key;
	r->loc = loc;
	r->value = v;
	return r;
}

Decl *mk_fn(Arena *a, Loc loc, const char *name, Loc nloc, Vec *args, Vec *rets, int rets_tuple, Vec *body)
{
	Decl *d = mk_decl(a, D_FN, loc, name, nloc);
	int n;
	FnArg **fa = take(a, args, &n);
	d->nfargs = n;
	d->fargs = arena_alloc(a, (size_t)(n ? n : 1) * sizeof(FnArg));
	for (int i = 0; i < n; i++)
		d->fargs[i] = *fa[i];
	d->rets = take(a, rets, &d->nrets);
	d->rets_tuple = rets_tuple;
	d->body = take(a, body, &d->nbody);
	d->opt_level = -1;
	d->fast_math = -1;
	d->winograd = -1;
	return d;
}

Decl *mk_region_fn(Arena *a, Decl *fn, Loc rloc, Vec *attrs)
{
	fn->is_region = 1;
	fn->region_loc = rloc;
	int n;
	RegionAttr **ra = take(a, attrs, &n);
	fn->nattrs = n;
	fn->attrs = arena_alloc(a, (size_t)(n ? n : 1) * sizeof(RegionAttr));
	for (int i = 0; i < n; i++)
		fn->attrs[i] = *ra[i];
	fn->loc.off = rloc.off;
	return fn;
}

Decl *mk_export_fn(Arena *a, Decl *fn, Loc eloc)
{
	(void)a;
	fn->is_export = 1;
	fn->loc.off = eloc.off;
	return fn;
}

Ident *mk_ident(Arena *a, Loc loc, const char *name)
{
	Ident *id = arena_alloc(a, sizeof *id);
	id->name = name;
	id->loc = loc;
	return id;
}

/* ---- dump: a stable, fully parenthesised text of the tree ---- */

static void fmt_float(Buf *b, double v)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%.17g", v);
	/* keep the shortest text that reads back exactly */
	for (int p = 1; p <= 17; p++) {
		char t2[64];
		snprintf(t2, sizeof t2, "%.*g", p, v);
		if (strtod(t2, NULL) == v) {
			memcpy(tmp, t2, sizeof t2);
			break;
		}
	}
	buf_puts(b, tmp);
	if (!strpbrk(tmp, ".eEn"))
		buf_puts(b, ".0");
}

void expr_dump(Buf *b, Expr *e)
{
	if (!e) {
		buf_puts(b, "_");
		return;
	}
	switch (e->kind) {
	case E_INT: buf_printf(b, "%lld", (long long)e->ival); break;
	case E_FLOAT: fmt_float(b, e->fval); break;
	case E_BOOL: buf_puts(b, e->ival ? "true" : "false"); break;
	case E_STR: buf_printf(b, "\"%s\"", e->name); break;
	case E_NAME: buf_puts(b, e->name); break;
	case E_BINARY:
		buf_putc(b, '(');
		expr_dump(b, e->a);
		buf_printf(b, " %s ", opr_text(e->op));
		expr_dump(b, e->b);
		buf_putc(b, ')');
		break;
	case E_UNARY:
		buf_printf(b, "(%s", opr_text(e->op));
		expr_dump(b, e->a);
		buf_putc(b, ')');
		break;
	case E_CALL:
	case E_INDEX:
		expr_dump(b, e->a);
		buf_putc(b, e->kind == E_CALL ? '(' : '[');
		for (int i = 0; i < e->nargs; i++) {
			if (i)
				buf_puts(b, ", ");
			expr_dump(b, e->args[i]);
		}
		buf_putc(b, e->kind == E_CALL ? ')' : ']');
		break;
	case E_NAMED:
		buf_printf(b, "%s=", e->name);
		expr_dump(b, e->a);
		break;
	case E_FIELD:
		expr_dump(b, e->a);
		buf_printf(b, ".%s", e->name);
		break;
	case E_SLICE:
		if (e->a)
			expr_dump(b, e->a);
		buf_putc(b, ':');
		if (e->b)
			expr_dump(b, e->b);
		break;
	case E_LIST:
		buf_putc(b, '[');
		for (int i = 0; i < e->nargs; i++) {
			if (i)
				buf_puts(b, ", ");
			expr_dump(b, e->args[i]);
		}
		buf_putc(b, ']');
		break;
	case E_RECORD:
		buf_puts(b, "{");
		for (int i = 0; i < e->nargs; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", e->names[i]);
			expr_dump(b, e->args[i]);
		}
		buf_puts(b, " }");
		break;
	}
}

void type_dump(Buf *b, TypeExpr *t)
{
	switch (t->kind) {
	case T_TENSOR:
		buf_puts(b, dtype_name(t->dtype));
		if (t->any_shape) {
			buf_puts(b, "[*]");
		} else if (t->ndims) {
			buf_putc(b, '[');
			for (int i = 0; i < t->ndims; i++) {
				if (i)
					buf_puts(b, ", ");
				expr_dump(b, t->dims[i]);
			}
			buf_putc(b, ']');
		}
		break;
	case T_SCALAR:
		buf_puts(b, t->scalar == SC_INT ? "int" : t->scalar == SC_FLOAT ? "float" : "bool");
		break;
	case T_NAMED:
		buf_puts(b, t->name);
		if (t->nargs) {
			buf_putc(b, '(');
			for (int i = 0; i < t->nargs; i++) {
				if (i)
					buf_puts(b, ", ");
				expr_dump(b, t->args[i]);
			}
			buf_putc(b, ')');
		}
		break;
	case T_RECORD:
		buf_putc(b, '{');
		for (int i = 0; i < t->nfields; i++) {
			buf_printf(b, "%s%s: ", i ? ", " : " ", t->fields[i].name);
			type_dump(b, t->fields[i].type);
		}
		buf_puts(b, " }");
		break;
	case T_ARRAY:
		type_dump(b, t->elem);
		buf_putc(b, '[');
		for (int k = 0; k < (t->ndims > 1 ? t->ndims : 1); k++) {
			if (k)
				buf_puts(b, ", ");
			expr_dump(b, t->ndims > 1 ? t->dims[k] : t->count);
		}
		buf_putc(b, ']');
		break;
	}
}

static void loc_dump(Buf *b, Source *s, Loc l)
{
	int line, col;
	source_linecol(s, l.off, &line, &col);
	buf_printf(b, "%d:%d", line, col);
}

static void stmts_dump(Buf *b, Source *src, Stmt **body, int n, int indent)
{
	for (int i = 0; i < n; i++) {
		Stmt *s = body[i];
		for (int k = 0; k < indent; k++)
			buf_puts(b, "  ");
		loc_dump(b, src, s->loc);
		switch (s->kind) {
		case S_LET:
		case S_ASSIGN:
			buf_puts(b, s->kind == S_LET ? " let " : " assign ");
			for (int k = 0; k < s->nnames; k++)
				buf_printf(b, "%s%s", k ? ", " : "", s->names[k]);
			buf_puts(b, " = ");
			expr_dump(b, s->value);
			buf_putc(b, '\n');
			break;
		case S_FOR:
			buf_printf(b, " for %s in ", s->names[0]);
			expr_dump(b, s->lo);
			buf_puts(b, "..");
			expr_dump(b, s->hi);
			buf_putc(b, '\n');
			stmts_dump(b, src, s->body, s->nbody, indent + 1);
			break;
		case S_STORE:
			buf_puts(b, " store ");
			expr_dump(b, s->target);
			buf_puts(b, " = ");
			expr_dump(b, s->value);
			buf_putc(b, '\n');
			break;
		case S_RETURN:
			buf_puts(b, " return");
			for (int k = 0; k < s->nvalues; k++) {
				buf_puts(b, k ? ", " : " ");
				expr_dump(b, s->values[k]);
			}
			buf_putc(b, '\n');
			break;
		}
	}
}

void ast_dump(FILE *f, Module *m)
{
	Buf b = {0};
	for (int i = 0; i < m->ndecls; i++) {
		Decl *d = m->decls[i];
		loc_dump(&b, m->src, d->loc);
		switch (d->kind) {
		case D_CONST:
			if (d->meta_key)
				buf_printf(&b, " @gguf(\"%s\"%s)", d->meta_key, d->meta_optional ? ", optional" : "");
			buf_printf(&b, " const %s = ", d->name);
			if (d->dtype_value)
				buf_puts(&b, dtype_name((DType)(d->dtype_value - 1)));
			else
				expr_dump(&b, d->value);
			break;
		case D_TYPE:
			buf_printf(&b, " type %s", d->name);
			if (d->ntparams) {
				buf_putc(&b, '(');
				for (int k = 0; k < d->ntparams; k++)
					buf_printf(&b, "%s%s", k ? ", " : "", d->tparams[k]);
				buf_putc(&b, ')');
			}
			buf_puts(&b, " = ");
			type_dump(&b, d->type);
			break;
		case D_STATE:
			buf_printf(&b, " state %s: ", d->name);
			type_dump(&b, d->type);
			break;
		case D_PARAM:
			buf_printf(&b, " param %s: ", d->name);
			type_dump(&b, d->type);
			if (d->wname)
				buf_printf(&b, " = \"%s\"", d->wname);
			break;
		case D_FN:
			buf_putc(&b, ' ');
			if (d->is_region) {
				buf_puts(&b, "@region");
				if (d->nattrs) {
					buf_putc(&b, '(');
					for (int k = 0; k < d->nattrs; k++) {
						buf_printf(&b, "%s%s = ", k ? ", " : "", d->attrs[k].key);
						expr_dump(&b, d->attrs[k].value);
					}
					buf_putc(&b, ')');
				}
				buf_putc(&b, ' ');
			}
			if (d->is_export)
				buf_puts(&b, "export ");
			buf_printf(&b, "fn %s(", d->name);
			for (int k = 0; k < d->nfargs; k++) {
				buf_printf(&b, "%s%s: ", k ? ", " : "", d->fargs[k].name);
				type_dump(&b, d->fargs[k].type);
			}
			buf_putc(&b, ')');
			if (d->nrets) {
				buf_puts(&b, " -> ");
				if (d->rets_tuple)
					buf_putc(&b, '(');
				for (int k = 0; k < d->nrets; k++) {
					if (k)
						buf_puts(&b, ", ");
					type_dump(&b, d->rets[k]);
				}
				if (d->rets_tuple)
					buf_putc(&b, ')');
			}
			for (int k = 0; k < d->nwhere; k++) {
				buf_puts(&b, k ? ", " : " where ");
				expr_dump(&b, d->where[k]);
			}
			buf_putc(&b, '\n');
			stmts_dump(&b, m->src, d->body, d->nbody, 1);
			buf_puts(&b, "end");
			break;
		}
		buf_putc(&b, '\n');
	}
	if (b.s)
		fputs(b.s, f);
	buf_free(&b);
}

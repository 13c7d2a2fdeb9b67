/* check.c - declarations: the entries of the global table, consts and -D
 * overrides, types, the types of params, region attributes, and a name pass over
 * every function body (so a function that is never called still has its names
 * checked). Constant expressions are evaluated by eval.c, below; lowering
 * (lower.c, above) runs after this and never the other way round. */
#include "nestc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the global table ---- */

static const char *decl_what(DeclKind k)
{
	switch (k) {
	case D_CONST: return "const";
	case D_TYPE: return "type";
	case D_PARAM: return "param";
	case D_FN: return "function";
	case D_STATE: return "state";
	}
	return "?";
}

static void build_globals(Checker *c)
{
	Module *m = c->m;
	c->globals = arena_alloc(c->a, (size_t)(m->ndecls + 1) * sizeof(Global *));
	c->hcap = 16;
	while (c->hcap < 2 * (m->ndecls + 1))
		c->hcap *= 2;
	c->htab = arena_alloc(c->a, (size_t)c->hcap * sizeof(uint64_t));
	for (int i = 0; i < m->ndecls; i++) {
		Decl *d = m->decls[i];
		Global *prev = lookup_global(c, d->name);
		if (prev) {
			int line, col;
			source_linecol(c->d->src, prev->decl->name_loc.off, &line, &col);
			error_at(c->d, d->name_loc, "'%s' is already defined (as a %s at line %d)", d->name,
			         decl_what(prev->decl->kind), line);
			continue;
		}
		if (is_builtin(d->name) && !builtin_shadowable(d->name)) {
			error_at(c->d, d->name_loc, "'%s' is the name of a builtin function", d->name);
			continue;
		}
		if (!strcmp(d->name, "int") || !strcmp(d->name, "float")) {
			error_at(c->d, d->name_loc, "'%s' is the name of a scalar type", d->name);
			continue;
		}
		Global *g = arena_alloc(c->a, sizeof *g);
		g->name = d->name;
		g->decl = d;
		g->kind = d->kind == D_CONST ? G_CONST : d->kind == D_TYPE ? G_TYPE : d->kind == D_PARAM || d->kind == D_STATE ? G_PARAM : G_FN;
		global_add(c, g);
	}
}

/* ---- consts and -D ---- */

static Value *parse_define_value(Checker *c, const char *s)
{
	Value *v = arena_alloc(c->a, sizeof *v);
	if (!strcmp(s, "true") || !strcmp(s, "false")) {
		v->kind = V_BOOL;
		v->i = s[0] == 't';
		return v;
	}
	char *end;
	errno = 0;
	long long iv = strtoll(s, &end, 10);
	if (*s && !*end && errno == 0) {
		v->kind = V_INT;
		v->i = iv;
		return v;
	}
	if (*s && !*end && errno == ERANGE) {
		/* digits alone: an integer, too large; not a float that happens to parse */
		v->kind = V_ERR;
		return v;
	}
	errno = 0;
	double fv = strtod(s, &end);
	if (*s && !*end && errno == 0) {
		v->kind = V_FLOAT;
		v->f = fv;
		return v;
	}
	return NULL;
}

static int mentions(Expr *e, const char *name)
{
	if (!e)
		return 0;
	if (e->kind == E_NAME && !strcmp(e->name, name))
		return 1;
	if (mentions(e->a, name) || mentions(e->b, name))
		return 1;
	for (int i = 0; i < e->nargs; i++)
		if (mentions(e->args[i], name))
			return 1;
	return 0;
}

/* A run-time dimension of some exported function (its where clause names it). */
static int is_dim_name(Checker *c, const char *name)
{
	for (int i = 0; i < c->m->ndecls; i++) {
		Decl *d = c->m->decls[i];
		if (d->kind != D_FN || !d->is_export)
			continue;
		for (int k = 0; k < d->nwhere; k++)
			if (mentions(d->where[k], name))
				return 1;
	}
	return 0;
}

/* -D for the consts that name a dtype (const CACHE = f32): before the types
 * that use them are read. */
static void dtype_defines(Checker *c)
{
	for (int i = 0; i < c->opts->ndefines; i++) {
		Define *df = &c->opts->defines[i];
		Global *g = lookup_global(c, df->name);
		if (!g || g->kind != G_CONST || !g->decl->dtype_value)
			continue;
		int dt = -1;
		for (int t = 0; t < DT_COUNT; t++)
			if (!strcmp(dtype_name((DType)t), df->value))
				dt = t;
		if (dt < 0 || dt == DT_BOOL)
			error_plain(c->d, "-D %s=%s: const '%s' names a dtype: give one of f32, f64, f16, bf16, i32, i64, i8, u8, "
			            "i16, u16", df->name, df->value, df->name);
		else
			g->decl->dtype_value = dt + 1;
	}
}

/* --consts-from: each @gguf const's value from the file's metadata, as an
 * override that -D replaces (check_consts). */
static void meta_consts(Checker *c)
{
	const CompileOptions *o = c->opts;
	int any = 0;
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		Decl *d = g->decl;
		if (g->kind != G_CONST || !d->meta_key)
			continue;
		any = 1;
		if (!o->consts_from)
			continue;
		const MetaKV *m = NULL;
		for (int i = 0; i < o->nmeta && !m; i++)
			if (!strcmp(o->meta[i].key, d->meta_key))
				m = &o->meta[i];
		if (!m) {
			if (!d->meta_optional)
				error_at(c->d, d->name_loc, "const '%s' takes its value from '%s', which %s does not have%s%s%s",
				         g->name, d->meta_key, o->consts_from, o->meta_arch ? " (its general.architecture is '" : "",
				         o->meta_arch ? o->meta_arch : "", o->meta_arch ? "')" : "");
			continue;
		}
		Value *v = arena_alloc(c->a, sizeof *v);
		if (m->kind == 's') {
			error_at(c->d, d->name_loc, "const '%s' takes its value from '%s', a string in %s", g->name, d->meta_key,
			         o->consts_from);
			continue;
		}
		v->kind = m->kind == 'f' ? V_FLOAT : m->kind == 'b' ? V_BOOL : V_INT;
		v->i = m->i;
		v->f = m->f;
		g->over = v;
		g->over_src = arena_printf(c->a, "%s: %s", o->consts_from, d->meta_key);
	}
	if (o->consts_from && !any)
		error_plain(c->d, "--consts-from %s: the model has no const that takes a value from it (@gguf(\"KEY\") const ...)",
		            o->consts_from);
}

static void check_consts(Checker *c)
{
	meta_consts(c);
	/* -D first: an override must name a const, and replaces its value as soon as the
	 * declared value is known (const_take_override), before any const computed
	 * from it is evaluated */
	int earlier_errors = c->d->nerrors;
	for (int i = 0; i < c->opts->ndefines; i++) {
		Define *df = &c->opts->defines[i];
		Global *g = lookup_global(c, df->name);
		if (!g && is_dim_name(c, df->name))
			continue; /* a run-time dim given a value: that entry is built for it alone (lower.c) */
		if (!g && earlier_errors)
			continue; /* the declaration that names it may be the one that did not parse */
		if (!g || g->kind != G_CONST) {
			error_plain(c->d, "-D %s=%s: there is no const named '%s'", df->name, df->value, df->name);
			continue;
		}
		if (g->decl->dtype_value)
			continue; /* dtype_defines took it */
		Value *v = parse_define_value(c, df->value);
		if (!v) {
			error_plain(c->d, "-D %s=%s: '%s' is not an int, a float or a bool", df->name, df->value, df->value);
			continue;
		}
		if (v->kind == V_ERR) {
			error_plain(c->d, "-D %s=%s: %s is too large for an integer (64 bits)", df->name, df->value,
			            df->value);
			continue;
		}
		g->over = v;
		g->over_src = NULL;
	}
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind != G_CONST || g->decl->dtype_value)
			continue; /* a dtype const is a type or a cast (check_type_names, eval.c) */
		if (g->state != 2) {
			/* consts it uses are evaluated (and overridden) on the way, in lookup_name */
			Value *v = eval_const_expr(c, g->decl->value);
			if (g->state != 2) {
				g->value = v;
				g->state = 2;
				const_take_override(c, g);
			}
		}
		Value *v = g->value;
		if (v->kind != V_ERR && v->kind != V_INT && v->kind != V_FLOAT && v->kind != V_BOOL) {
			Buf b = {0};
			value_type_str(&b, c->p, v);
			error_at(c->d, g->decl->value->loc, "const '%s' must be an int, a float or a bool, not %s", g->name, b.s);
			buf_free(&b);
			g->value = arena_alloc(c->a, sizeof(Value));
		}
	}
}

/* ---- types ---- */

static void check_type_names(Checker *c, TypeExpr *t, const char **tparams, int ntparams)
{
	switch (t->kind) {
	case T_TENSOR:
	case T_SCALAR:
		break;
	case T_NAMED: {
		Global *g = lookup_global(c, t->name);
		if (g && g->kind == G_CONST && g->decl->dtype_value && t->nargs == 0) {
			/* a const naming a dtype: that dtype, as if written there */
			DType dt = (DType)(g->decl->dtype_value - 1);
			t->kind = T_TENSOR;
			t->dtype = dt;
			t->ndims = 0;
			break;
		}
		if (!g) {
			error_at(c->d, t->loc, "unknown type '%s'", t->name);
		} else if (g->kind != G_TYPE) {
			error_at(c->d, t->loc, "'%s' is a %s, not a type", t->name, decl_what(g->decl->kind));
		} else if (g->decl->ntparams != t->nargs) {
			error_at(c->d, t->loc, "type '%s' takes %d dimension parameter%s, %d given", t->name,
			         g->decl->ntparams, g->decl->ntparams == 1 ? "" : "s", t->nargs);
		}
		break;
	}
	case T_RECORD:
		for (int i = 0; i < t->nfields; i++) {
			for (int k = 0; k < i; k++)
				if (!strcmp(t->fields[k].name, t->fields[i].name))
					error_at(c->d, t->fields[i].loc, "field '%s' appears twice", t->fields[i].name);
			check_type_names(c, t->fields[i].type, tparams, ntparams);
		}
		break;
	case T_ARRAY: {
		Global *g = t->elem->kind == T_NAMED && t->elem->nargs == 0 ? lookup_global(c, t->elem->name) : NULL;
		if (g && g->kind == G_CONST && g->decl->dtype_value) {
			/* CACHE[H, CTX] with const CACHE = bf16: the tensor type bf16[H, CTX] */
			t->kind = T_TENSOR;
			t->dtype = (DType)(g->decl->dtype_value - 1);
			if (t->ndims == 0) {
				t->dims = arena_alloc(c->a, sizeof(Expr *));
				t->dims[0] = t->count;
				t->ndims = 1;
			}
			break;
		}
		if (t->ndims > 1)
			error_at(c->d, t->loc, "an array of '%s' has one length: write %s[a][b] for an array of arrays",
			         t->elem->kind == T_NAMED ? t->elem->name : "records", t->elem->kind == T_NAMED ? t->elem->name : "{...}");
		check_type_names(c, t->elem, tparams, ntparams);
		break;
	}
	}
	(void)tparams;
	(void)ntparams;
}

/* A type's body refers to itself through its names: reject cycles, which would
 * make instantiation loop forever. */
static int type_reaches(Checker *c, TypeExpr *t, Decl *target, int depth)
{
	if (depth > 64)
		return 1;
	switch (t->kind) {
	case T_NAMED: {
		Global *g = lookup_global(c, t->name);
		if (!g || g->kind != G_TYPE)
			return 0;
		if (g->decl == target)
			return 1;
		return type_reaches(c, g->decl->type, target, depth + 1);
	}
	case T_RECORD:
		for (int i = 0; i < t->nfields; i++)
			if (type_reaches(c, t->fields[i].type, target, depth + 1))
				return 1;
		return 0;
	case T_ARRAY:
		return type_reaches(c, t->elem, target, depth + 1);
	default:
		return 0;
	}
}

static void check_types(Checker *c)
{
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind != G_TYPE)
			continue;
		Decl *d = g->decl;
		for (int i = 0; i < d->ntparams; i++)
			for (int j = 0; j < i; j++)
				if (!strcmp(d->tparams[i], d->tparams[j]))
					error_at(c->d, d->tparam_locs[i], "dimension parameter '%s' appears twice", d->tparams[i]);
		check_type_names(c, d->type, d->tparams, d->ntparams);
		if (type_reaches(c, d->type, d, 0)) {
			error_at(c->d, d->name_loc, "type '%s' contains itself", d->name);
			g->kind = G_CONST; /* keep later stages away from it */
			g->state = 2;
			g->value = arena_alloc(c->a, sizeof(Value));
		}
	}
}

/* ---- the name pass over function bodies ---- */

typedef struct Names {
	Vec v;
} Names;

static int names_has(Names *n, const char *s)
{
	for (int i = n->v.n - 1; i >= 0; i--)
		if (!strcmp(n->v.v[i], s))
			return 1;
	return 0;
}

typedef struct NamePass {
	Checker *c;
	Names names;
	int quiet; /* the function has a statement that did not parse */
} NamePass;

static void np_expr(NamePass *np, Expr *e);

static void np_name(NamePass *np, Expr *e)
{
	if (names_has(&np->names, e->name))
		return;
	Global *g = lookup_global(np->c, e->name);
	if (g)
		return;
	if (np->quiet)
		return;
	if (is_builtin(e->name))
		error_at(np->c->d, e->loc, "'%s' is a builtin function; call it with arguments", e->name);
	else
		error_at(np->c->d, e->loc, "unknown name '%s'", e->name);
}

static void np_expr(NamePass *np, Expr *e)
{
	if (!e)
		return;
	switch (e->kind) {
	case E_INT: case E_FLOAT: case E_BOOL: case E_STR:
		break;
	case E_NAME:
		np_name(np, e);
		break;
	case E_BINARY:
		np_expr(np, e->a);
		np_expr(np, e->b);
		break;
	case E_UNARY:
	case E_NAMED:
	case E_FIELD:
		np_expr(np, e->a);
		break;
	case E_SLICE:
		np_expr(np, e->a);
		np_expr(np, e->b);
		break;
	case E_CALL:
		if (e->a->kind == E_NAME) {
			const char *f = e->a->name;
			Global *g = lookup_global(np->c, f);
			if (!is_builtin(f) && !np->quiet) {
				if (!g && !names_has(&np->names, f))
					error_at(np->c->d, e->a->loc, "unknown function '%s'", f);
				else if (g && g->kind != G_FN && !(g->kind == G_CONST && g->decl->dtype_value)) /* a dtype const casts */
					error_at(np->c->d, e->a->loc, "'%s' is a %s, not a function", f, decl_what(g->decl->kind));
				else if (!g)
					error_at(np->c->d, e->a->loc, "'%s' is a local value, not a function", f);
			}
		} else if (!np->quiet) {
			error_at(np->c->d, e->a->loc, "only named functions can be called");
		}
		for (int i = 0; i < e->nargs; i++)
			np_expr(np, e->args[i]);
		break;
	case E_INDEX:
	case E_LIST:
	case E_RECORD:
		if (e->kind == E_INDEX)
			np_expr(np, e->a);
		for (int i = 0; i < e->nargs; i++)
			np_expr(np, e->args[i]);
		break;
	}
}

/* Names in an argument's type that are not globals are shape variables: they
 * become defined by the call. */
static void np_bind_type_vars(NamePass *np, TypeExpr *t)
{
	Expr **dims = NULL;
	int n = 0;
	switch (t->kind) {
	case T_TENSOR: dims = t->dims; n = t->ndims; break;
	case T_NAMED: dims = t->args; n = t->nargs; break;
	case T_RECORD:
		for (int i = 0; i < t->nfields; i++)
			np_bind_type_vars(np, t->fields[i].type);
		return;
	case T_ARRAY:
		np_bind_type_vars(np, t->elem);
		if (t->count && t->count->kind == E_NAME && !lookup_global(np->c, t->count->name))
			vec_push(&np->names.v, (void *)t->count->name);
		return;
	default:
		return;
	}
	for (int i = 0; i < n; i++) {
		Expr *e = dims[i];
		if (e->kind == E_NAME && !lookup_global(np->c, e->name) && !names_has(&np->names, e->name))
			vec_push(&np->names.v, (void *)e->name);
		else
			np_expr(np, e);
	}
}

static void np_stmts(NamePass *np, Stmt **body, int n)
{
	for (int i = 0; i < n; i++) {
		Stmt *s = body[i];
		switch (s->kind) {
		case S_LET:
			np_expr(np, s->value);
			for (int k = 0; k < s->nnames; k++)
				vec_push(&np->names.v, (void *)s->names[k]);
			break;
		case S_ASSIGN:
			np_expr(np, s->value);
			for (int k = 0; k < s->nnames; k++)
				if (!names_has(&np->names, s->names[k]) && !np->quiet) {
					Global *g = lookup_global(np->c, s->names[k]);
					if (g)
						error_at(np->c->d, s->name_locs[k], "cannot assign to %s '%s'", decl_what(g->decl->kind), s->names[k]);
					else
						error_at(np->c->d, s->name_locs[k], "unknown name '%s' (use 'let %s = ...' to define it)", s->names[k], s->names[k]);
					/* from here on the name is known: one mistake, one message */
					vec_push(&np->names.v, (void *)s->names[k]);
				}
			break;
		case S_FOR: {
			np_expr(np, s->lo);
			np_expr(np, s->hi);
			int mark = np->names.v.n;
			vec_push(&np->names.v, (void *)s->names[0]);
			np_stmts(np, s->body, s->nbody);
			np->names.v.n = mark;
			break;
		}
		case S_RETURN:
			for (int k = 0; k < s->nvalues; k++)
				np_expr(np, s->values[k]);
			break;
		case S_STORE:
			np_expr(np, s->target);
			np_expr(np, s->value);
			break;
		}
	}
}

/* The names of a where clause that are not globals: the run-time dimensions. */
static void np_where_names(NamePass *np, Expr *e)
{
	if (!e)
		return;
	if (e->kind == E_NAME) {
		if (!lookup_global(np->c, e->name) && !names_has(&np->names, e->name))
			vec_push(&np->names.v, (void *)e->name);
		return;
	}
	np_where_names(np, e->a);
	np_where_names(np, e->b);
	for (int i = 0; i < e->nargs; i++)
		np_where_names(np, e->args[i]);
}

/* Does a tensor type among t's name `name` as a dimension? */
static int type_mentions(TypeExpr *t, const char *name)
{
	if (!t)
		return 0;
	if (t->kind == T_TENSOR) {
		for (int i = 0; i < t->ndims; i++)
			if (t->dims[i]->kind == E_NAME && !strcmp(t->dims[i]->name, name))
				return 1;
		return 0;
	}
	if (t->kind == T_RECORD) {
		for (int i = 0; i < t->nfields; i++)
			if (type_mentions(t->fields[i].type, name))
				return 1;
		return 0;
	}
	if (t->kind == T_ARRAY)
		return type_mentions(t->elem, name);
	return 0;
}

static void check_fn(Checker *c, Decl *d)
{
	NamePass np = {.c = c, .quiet = d->broken};
	if (d->nwhere && !d->is_export)
		error_at(c->d, d->where_loc, "only an exported function has run-time dimensions ('where'); "
		         "a function it calls takes their values from its arguments' shapes");
	for (int i = 0; i < d->nwhere; i++)
		np_where_names(&np, d->where[i]);
	for (int i = 0; i < d->nfargs; i++) {
		for (int k = 0; k < i; k++)
			if (!strcmp(d->fargs[k].name, d->fargs[i].name))
				error_at(c->d, d->fargs[i].loc, "argument '%s' appears twice", d->fargs[i].name);
		check_type_names(c, d->fargs[i].type, NULL, 0);
		np_bind_type_vars(&np, d->fargs[i].type);
		vec_push(&np.names.v, (void *)d->fargs[i].name);
	}
	for (int i = 0; i < d->nrets; i++) {
		check_type_names(c, d->rets[i], NULL, 0);
		np_bind_type_vars(&np, d->rets[i]);
	}
	np_stmts(&np, d->body, d->nbody);

	for (int i = 0; i < d->nbody; i++)
		if (d->body[i]->kind == S_RETURN && i != d->nbody - 1) {
			error_at(c->d, d->body[i + 1]->loc, "statement after return");
			break;
		}
	int has_return = 0;
	for (int i = 0; i < d->nbody; i++)
		has_return |= d->body[i]->kind == S_RETURN;
	if (!has_return && !d->broken)
		error_at(c->d, d->name_loc, "function '%s' does not end with a return statement", d->name);

	/* region attributes: keys and the shape of options; values are checked per call */
	for (int i = 0; i < d->nattrs; i++) {
		RegionAttr *ra = &d->attrs[i];
		for (int k = 0; k < i; k++)
			if (!strcmp(d->attrs[k].key, ra->key))
				error_at(c->d, ra->loc, "region attribute '%s' given twice", ra->key);
		if (!strcmp(ra->key, "max_reuse_entries")) {
			Value *v = eval_const_expr(c, ra->value);
			if (v->kind != V_ERR && (v->kind != V_INT || v->i < 1 || v->i > 1000000))
				error_at(c->d, ra->value->loc, "max_reuse_entries must be a compile-time integer of at least 1");
			else if (v->kind == V_INT)
				d->max_reuse_entries = (int)v->i;
		} else if (!strcmp(ra->key, "reuse_hash")) {
			/* evaluated at each call, in the region's own scope (lower.c) */
		} else if (!strcmp(ra->key, "specialize")) {
			/* [T == 1, ...]: a shape variable of the region's arguments equal to a constant */
			Expr *l = ra->value;
			if (l->kind != E_LIST) {
				error_at(c->d, l->loc, "specialize takes a list of conditions: specialize = [T == 1]");
				continue;
			}
			for (int k = 0; k < l->nargs; k++) {
				Expr *e = l->args[k];
				int var = 0;
				if (e->kind == E_BINARY && e->op == OPR_EQ && e->a->kind == E_NAME && !lookup_global(c, e->a->name))
					for (int i = 0; i < d->nfargs && !var; i++)
						var = type_mentions(d->fargs[i].type, e->a->name);
				if (!var) {
					error_at(c->d, e->span, "a specialize condition is 'NAME == VALUE' with NAME a shape variable "
					         "of the region's arguments (x: f32[T, D] names T)");
					continue;
				}
				Value *v = eval_const_expr(c, e->b);
				if (v->kind != V_ERR && v->kind != V_INT)
					error_at(c->d, e->b->loc, "a specialize condition compares with a compile-time integer");
			}
		} else if (!strcmp(ra->key, "options")) {
			Expr *o = ra->value;
			if (o->kind != E_RECORD) {
				error_at(c->d, o->loc, "options must be a record such as { opt_level: 3, fast_math: true }");
				continue;
			}
			for (int k = 0; k < o->nargs; k++) {
				const char *key = o->names[k];
				Value *v = eval_const_expr(c, o->args[k]);
				Loc kloc = o->locs ? o->locs[k] : o->args[k]->loc;
				if (!strcmp(key, "opt_level")) {
					if (v->kind != V_ERR && (v->kind != V_INT || v->i < 0 || v->i > 3))
						error_at(c->d, o->args[k]->loc, "opt_level must be an integer from 0 to 3");
					else if (v->kind == V_INT)
						d->opt_level = (int)v->i;
				} else if (!strcmp(key, "fast_math")) {
					if (v->kind != V_ERR && v->kind != V_BOOL)
						error_at(c->d, o->args[k]->loc, "fast_math must be true or false");
					else if (v->kind == V_BOOL)
						d->fast_math = (int)v->i;
				} else if (!strcmp(key, "winograd")) {
					if (v->kind != V_ERR && v->kind != V_BOOL)
						error_at(c->d, o->args[k]->loc, "winograd must be true or false");
					else if (v->kind == V_BOOL)
						d->winograd = (int)v->i;
				} else {
					error_at(c->d, kloc, "unknown region option '%s' (known: opt_level, fast_math, winograd)", key);
				}
			}
		} else {
			error_at(c->d, ra->loc, "unknown region attribute '%s' (known: max_reuse_entries, reuse_hash, options, specialize)", ra->key);
		}
	}
	free(np.names.v.v);
}

Checker *check_module(Arena *a, Diag *d, Module *m, CompileOptions *opts)
{
	Program *p = arena_alloc(a, sizeof *p);
	p->arena = a;
	p->src = m->src;
	Checker *c = arena_alloc(a, sizeof *c);
	c->a = a;
	c->d = d;
	c->m = m;
	c->p = p;
	c->opts = opts;
	build_globals(c);
	dtype_defines(c);
	check_types(c);
	check_consts(c);
	/* the @gguf consts' values, for a GGUF file of llama.cpp's (gguf_write.c) */
	p->gguf = arena_alloc(a, (size_t)(c->nglobals + 1) * sizeof *p->gguf);
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind != G_CONST || !g->decl->meta_key || !g->value)
			continue;
		MetaKV *kv = &p->gguf[p->ngguf];
		kv->key = g->decl->meta_key;
		kv->kind = g->value->kind == V_FLOAT ? 'f' : g->value->kind == V_BOOL ? 'b' : 'i';
		kv->i = g->value->i;
		kv->f = g->value->f;
		if (g->value->kind == V_INT || g->value->kind == V_FLOAT || g->value->kind == V_BOOL)
			p->ngguf++;
	}
	for (int k = 0; k < c->nglobals; k++) {
		if (c->globals[k]->kind == G_FN)
			check_fn(c, c->globals[k]->decl);
		else if (c->globals[k]->kind == G_PARAM)
			check_type_names(c, c->globals[k]->decl->type, NULL, 0);
	}
	return c;
}

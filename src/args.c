/* args.c - the arguments of a builtin call (Args, made by eval.c): by
 * position or by name, checked for count and names, and read as tensors,
 * integers, floats, bools, lists and pairs with a located message for each
 * misuse. Below every builtins*.c file. */
#include "nestc.h"

#include <string.h>

Value *opt_arg(Args *a, const char *name)
{
	for (int i = 0; i < a->nnamed; i++)
		if (!strcmp(a->names[i], name)) {
			a->used[i] = 1;
			return a->named[i];
		}
	return NULL;
}

Loc opt_loc(Args *a, const char *name)
{
	for (int i = 0; i < a->nnamed; i++)
		if (!strcmp(a->names[i], name))
			return a->namedloc[i];
	return a->call->loc;
}

/* Positional argument i, or the named one, or NULL. */
Value *arg_at(Args *a, int i, const char *name, Loc *loc)
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

Node *tensor_arg(LowerCtx *x, Args *a, int i, const char *name)
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

int float_tensor(LowerCtx *x, Args *a, Node *n)
{
	if (n && !dtype_is_float(n->dtype)) {
		error_at(x->d, a->call->loc, "%s() needs a float tensor, not %s", a->fname, nstr(x, n));
		return 0;
	}
	return n != NULL;
}

/* Where an argument was written (the call when it was left out). */
Loc arg_loc(Args *a, int pos, const char *name)
{
	if (pos < a->npos)
		return a->posloc[pos];
	for (int i = 0; i < a->nnamed; i++)
		if (!strcmp(a->names[i], name))
			return a->namedloc[i];
	return a->call->loc;
}

int int_opt(LowerCtx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t *out)
{
	Loc loc;
	Value *v = arg_at(a, pos, name, &loc);
	if (!v) {
		*out = dflt;
		return 1;
	}
	return ct_int(x, v, loc, arena_printf(x->a, "%s of %s()", name, a->fname), out);
}

int bool_opt(LowerCtx *x, Args *a, const char *name, int dflt, int *out)
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

int float_opt(LowerCtx *x, Args *a, int pos, const char *name, double dflt, double *out)
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
int int_list(LowerCtx *x, Value *v, Loc loc, const char *what, int64_t *out, int max, int *n, int allow_scalar)
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
int pair_opt(LowerCtx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t out[2], int positive)
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

int check_arity(LowerCtx *x, Args *a, int min, int max, const char *const *allowed)
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

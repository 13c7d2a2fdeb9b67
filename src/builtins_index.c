/* builtins_index.c - the builtins that index along an axis or scan it, with
 * NumPy's and PyTorch's meaning: take_along_axis (torch.gather), topk (its
 * indices, then the values taken along the axis) and cumsum. Rules only, as
 * in builtins.c: arguments (args.c), shapes and dtypes, nodes (values.c). */
#include "nestc.h"

#include <string.h>

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

Value *index_builtin(LowerCtx *x, Args *a)
{
	if (!strcmp(a->fname, "topk")) return b_topk(x, a);
	if (!strcmp(a->fname, "take_along_axis")) return b_take_along_axis(x, a);
	if (!strcmp(a->fname, "cumsum")) return b_cumsum(x, a);
	return NULL;
}

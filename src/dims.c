/* dims.c - run-time dimensions of an exported function (`where 1 <= T, T <= CTX`).
 *
 * nestc lowers such a function at a few sample values of its dims, with
 * the dims bound as constants: at a base point, at the base plus one along
 * each dim, and at the base plus one along all of them. The graphs must be
 * the same but for integers (shapes, slice starts, attributes); every integer
 * that differs must be an affine function of the dims (c0 + sum coef * dim),
 * fitted on the first points and checked on the last. The graph of the base
 * point then stands for every value: its code reads those integers from the
 * dims array at run time. The same holds for the region graphs it calls, whose
 * code takes the entry's dims array as it is.
 *
 * The entry checks its where clause at every call, and the conditions that
 * keep every slice and store inside its tensor unless they hold over the
 * whole range of the dims (then they are proven here), before anything runs. */
#include "nestc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- affine forms ---- */

/* In 128 bits, clamped to int64's range: a huge -D value must not wrap past a
 * bound (callers compare the value with 0, or with small exact values). */
int64_t affine_eval(const Affine *f, int n, const int64_t *dims)
{
	__int128 v = f->c0;
	for (int j = 0; j < n; j++)
		v += (__int128)f->coef[j] * dims[j];
	return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* The least and the largest value of f over the box lo..hi. */
static void affine_range(const Affine *f, int n, const int64_t *lo, const int64_t *hi, int64_t *min, int64_t *max)
{
	int64_t mn = f->c0, mx = f->c0;
	for (int j = 0; j < n; j++) {
		int64_t p = f->coef[j] * lo[j], q = f->coef[j] * hi[j];
		mn += p < q ? p : q;
		mx += p < q ? q : p;
	}
	*min = mn;
	*max = mx;
}

int64_t gdyn_max_field(Graph *g, Node *n, int f)
{
	GDyn *d = gdyn_find(g, n->id, f);
	if (!d)
		return f < MAX_RANK ? n->shape[f] : n->a[f - 16];
	int64_t mn, mx;
	affine_range(&d->f, g->nbasis, g->dim_lo, g->dim_hi, &mn, &mx);
	return mx;
}

int64_t *gdyn_max_numel(Graph *g, const int64_t *lo, const int64_t *hi)
{
	int64_t *mx = xcalloc((size_t)g->nnodes + 1, sizeof(int64_t));
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		int64_t shape[MAX_RANK];
		for (int k = 0; k < n->rank; k++) {
			GDyn *d = gdyn_find(g, i, k);
			int64_t mn, m = n->shape[k];
			if (d)
				affine_range(&d->f, g->nbasis, lo, hi, &mn, &m);
			/* equivalent mutant [const 0 -> (-1)]: m, the axis's largest value
			 * over the dims' bounds, is at least its value at the sample points
			 * the graph was built at (a size, >= 0): never -1 */
			shape[k] = m < 0 ? 0 : m;
		}
		mx[i] = shape_numel(n->rank, shape);
	}
	return mx;
}

/* ---- the where clause ---- */

typedef struct Dims {
	LowerCtx *x;
	Entry *en;
	int n;
	int64_t base[MAX_DIMS];
	int npts;
	int64_t pts[MAX_DIMS + 2][MAX_DIMS];
} Dims;

static void where_names(LowerCtx *x, Expr *e, Entry *en, int *bad)
{
	if (!e)
		return;
	if (e->kind == E_NAME) {
		if (lookup_global(x->c, e->name))
			return;
		for (int j = 0; j < en->ndims; j++)
			if (!strcmp(en->dim_names[j], e->name))
				return;
		if (en->ndims == MAX_DIMS) {
			if (!*bad)
				error_at(x->d, e->loc, "more than %d run-time dimensions", MAX_DIMS);
			*bad = 1;
			return;
		}
		en->dim_names[en->ndims++] = e->name;
		return;
	}
	/* a called function's name is no dim (eval says what is wrong with the call) */
	if (e->kind != E_CALL || e->a->kind != E_NAME)
		where_names(x, e->a, en, bad);
	where_names(x, e->b, en, bad);
	for (int i = 0; i < e->nargs; i++)
		where_names(x, e->args[i], en, bad);
}

/* An integer expression of the dims at the values v: 0 after an error. */
static int eval_at(LowerCtx *x, Entry *en, Expr *e, const int64_t *v, int64_t *out)
{
	Scope sc = {0};
	for (int j = 0; j < en->ndims; j++)
		scope_bind(x, &sc, en->dim_names[j], vint(x, v[j]));
	Graph *g = x->g;
	Scope *s = x->scope, *fs = x->fnscope;
	x->g = NULL;
	x->scope = x->fnscope = &sc;
	Value *r = eval_expr(x, e);
	x->g = g;
	x->scope = s;
	/* equivalent mutant [stmt]: x->fnscope is read only inside
	 * lower_export_graph and eval_at, which set it first (entry_dims is
	 * called from lower_export only, before either) */
	x->fnscope = fs;
	if (r->kind == V_ERR)
		return 0;
	return ct_int(x, r, e->loc, "a where condition's side", out);
}

/* lhs - rhs of a condition as an affine form of the dims: 0 after an error. */
static int fit_condition(LowerCtx *x, Entry *en, Expr *e, Affine *f)
{
	int n = en->ndims;
	int64_t v[MAX_DIMS + 2] = {0}, pt[MAX_DIMS] = {0};
	for (int p = 0; p <= n + 1; p++) {
		for (int j = 0; j < n; j++)
			pt[j] = p == n + 1 ? 2 : p == j + 1 ? 1 : 0; /* 0, e_j, then 2 (every dim) to check */
		int64_t l, r;
		if (!eval_at(x, en, e->a, pt, &l) || !eval_at(x, en, e->b, pt, &r))
			return 0;
		v[p] = l - r;
	}
	memset(f, 0, sizeof *f);
	f->c0 = v[0];
	int64_t check = f->c0;
	for (int j = 0; j < n; j++) {
		f->coef[j] = v[j + 1] - v[0];
		check += 2 * f->coef[j];
	}
	if (check != v[n + 1]) {
		error_at(x->d, e->loc, "a where condition must be linear in the run-time dimensions (sums and constant multiples)");
		return 0;
	}
	return 1;
}

static const char *span_text(LowerCtx *x, Loc l)
{
	Source *src = x->d->src;
	if (l.off < 0 || l.end > (int32_t)src->len || l.end < l.off)
		return "";
	return arena_strndup(x->a, src->text + l.off, (size_t)(l.end - l.off));
}

/* The dims, their bounds and the run-time checks of the where clause; the
 * sample points. 0 after an error. */
/* Whether a condition of dim j alone, a*d + c >= 0 with a > 0, keeps d from
 * being negative: it does when its least d, ceil(-c / a), is 0 or more. */
static int keeps_nonnegative(const Entry *en, int j)
{
	for (int k = 0; k < en->nchecks; k++) {
		const Affine *f = &en->checks[k].f;
		int only = f->coef[j] > 0;
		for (int m = 0; m < en->ndims && only; m++)
			only = m == j || !f->coef[m];
		if (only && f->c0 < f->coef[j])
			return 1;
	}
	return 0;
}

int entry_dims(LowerCtx *x, Decl *fn, Entry *en, int64_t pts[][MAX_DIMS], int *npts)
{
	int bad = 0;
	for (int i = 0; i < fn->nwhere; i++)
		where_names(x, fn->where[i], en, &bad);
	if (bad)
		return 0;
	int n = en->ndims;
	if (n == 0) {
		error_at(x->d, fn->where_loc, "this where clause names no run-time dimension (every name in it is a const)");
		return 0;
	}
	int have_lo[MAX_DIMS] = {0}, have_hi[MAX_DIMS] = {0};
	en->checks = arena_alloc(x->a, (size_t)(fn->nwhere + 1) * sizeof(DimCheck));
	for (int i = 0; i < fn->nwhere; i++) {
		Expr *e = fn->where[i];
		int op = e->kind == E_BINARY ? e->op : 0;
		if (op != OPR_LT && op != OPR_LE && op != OPR_GT && op != OPR_GE && op != OPR_EQ) {
			error_at(x->d, e->span, "a where condition compares two integers: '1 <= T', 'T <= CTX', 'P + T <= CTX'");
			bad = 1;
			continue;
		}
		Affine f;
		if (!fit_condition(x, en, e, &f)) {
			bad = 1;
			continue;
		}
		/* as g(dims) >= 0 (or == 0) */
		Affine g = f;
		if (op == OPR_LE || op == OPR_LT) {
			g.c0 = -g.c0;
			for (int j = 0; j < n; j++)
				g.coef[j] = -g.coef[j];
		}
		if (op == OPR_LT || op == OPR_GT)
			g.c0 -= 1;
		DimCheck *c = &en->checks[en->nchecks++];
		c->f = g;
		c->eq = op == OPR_EQ;
		c->loc = e->span;
		c->text = span_text(x, e->span);
		/* a bound of one dim */
		int only = -1, count = 0;
		for (int j = 0; j < n; j++)
			if (g.coef[j]) {
				only = j;
				count++;
			}
		if (count != 1)
			continue;
		int64_t a = g.coef[only], b = g.c0; /* a*d + b >= 0 */
		if (a > 0 || c->eq) {
			int64_t a2 = a > 0 ? a : -a, b2 = a > 0 ? b : -b; /* d >= -b2/a2 */
			int64_t lo = -b2 >= 0 ? (-b2 + a2 - 1) / a2 : -((b2) / a2);
			if (!have_lo[only] || lo > en->dim_lo[only])
				en->dim_lo[only] = lo;
			have_lo[only] = 1;
		}
		if (a < 0 || c->eq) {
			int64_t a2 = a < 0 ? -a : a, b2 = a < 0 ? b : -b; /* d <= b2/a2 */
			int64_t hi = b2 >= 0 ? b2 / a2 : -((-b2 + a2 - 1) / a2);
			if (!have_hi[only] || hi < en->dim_hi[only])
				en->dim_hi[only] = hi;
			have_hi[only] = 1;
		}
	}
	if (bad)
		return 0;
	for (int j = 0; j < n; j++) {
		/* sizes and positions are never negative */
		if (!have_lo[j] || en->dim_lo[j] < 0)
			en->dim_lo[j] = 0;
		if (!have_hi[j]) {
			error_at(x->d, fn->where_loc,
			         "run-time dimension '%s' needs an upper bound in the where clause: a condition of '%s' alone, such as "
			         "'%s <= N' with N a number or a const (a bound of a sum does not count)",
			         en->dim_names[j], en->dim_names[j], en->dim_names[j]);
			bad = 1;
			continue;
		}
		if (en->dim_hi[j] - en->dim_lo[j] < 3) {
			error_at(x->d, fn->where_loc,
			         "run-time dimension '%s' takes fewer than 4 values (%lld to %lld): make it a const, or an argument of its own",
			         en->dim_names[j], (long long)en->dim_lo[j], (long long)en->dim_hi[j]);
			bad = 1;
		}
	}
	if (bad)
		return 0;
	/* a negative dim is always an error, said as such: "0 <= T" is checked
	 * unless a condition of T alone already keeps it from being negative
	 * (1 <= T does; -5 <= T does not) */
	DimCheck *nc = arena_alloc(x->a, (size_t)(en->nchecks + n) * sizeof(DimCheck));
	memcpy(nc, en->checks, (size_t)en->nchecks * sizeof(DimCheck));
	en->checks = nc;
	for (int j = 0; j < n; j++)
		if (!keeps_nonnegative(en, j)) {
			DimCheck *c = &en->checks[en->nchecks++];
			memset(c, 0, sizeof *c);
			c->f.coef[j] = 1;
			c->loc = fn->where_loc;
			c->text = arena_printf(x->a, "0 <= %s", en->dim_names[j]);
		}
	/* sample points: small values inside the bounds, never 0 or 1, so that no
	 * run-time axis looks like a broadcast one; base, base + e_j, base + 1 */
	for (int j = 0; j < n; j++) {
		/* equivalent mutant [const 2 -> 3]: dim_lo is >= 0 here (a negative
		 * one was made 0 above), so the condition is false either way */
		int64_t b = en->dim_lo[j] + 2 < 2 ? 2 : en->dim_lo[j] + 2;
		if (b + 2 > en->dim_hi[j]) {
			error_at(x->d, fn->where_loc,
			         "run-time dimension '%s' takes too few values (%lld to %lld; nestc needs it to reach %lld): make it a const",
			         en->dim_names[j], (long long)en->dim_lo[j], (long long)en->dim_hi[j], (long long)(b + 2));
			return 0;
		}
		pts[0][j] = b;
	}
	*npts = n + 2;
	/* base + e_j fit the coefficients; base + 2 (every dim) checks them */
	for (int p = 1; p <= n + 1; p++)
		for (int j = 0; j < n; j++)
			pts[p][j] = pts[0][j] + (p == n + 1 ? 2 : p == j + 1);
	for (int p = 0; p <= n + 1; p++)
		for (int k = 0; k < en->nchecks; k++) {
			int64_t v = affine_eval(&en->checks[k].f, n, pts[p]);
			if (en->checks[k].eq ? v != 0 : v < 0) {
				Buf b = {0};
				for (int j = 0; j < n; j++)
					buf_printf(&b, "%s%s = %lld", j ? ", " : "", en->dim_names[j], (long long)pts[p][j]);
				error_at(x->d, en->checks[k].loc,
				         "nestc compiles this function at a few small values of its run-time dimensions, and %s does not hold for %s "
				         "(each dimension from 2 above its lower bound to 4 above, all at once): widen the bounds, or make a "
				         "dimension a const",
				         en->checks[k].text, b.s);
				buf_free(&b);
				return 0;
			}
		}
	return 1;
}

/* ---- merging the samples ---- */

typedef struct Merge {
	LowerCtx *x;
	Entry *en;
	int npts;
	int64_t (*pts)[MAX_DIMS];
	Vec reps;    /* merged graphs (Graph *), with their samples in samples */
	Vec samples; /* Graph ** per rep: the graph of each point */
	const char **names; /* the dims' names, in the arena */
	const int64_t *lo;  /* their bounds, lo[MAX_DIMS + j] the upper ones */
	int failed;
} Merge;

static int merge_graph(Merge *M, Graph **gs);

static const char *field_name(Arena *a, int f)
{
	return f < MAX_RANK ? arena_printf(a, "axis %d", f) : arena_printf(a, "attribute %d", f - 16);
}

static int fail(Merge *M, Loc loc, const char *msg)
{
	if (!M->failed)
		error_at(M->x->d, loc, "%s", msg);
	M->failed = 1;
	return 0;
}

static int merge_node(Merge *M, Graph **gs, int i, Vec *dyn)
{
	Arena *a = M->x->a;
	int n = M->en->ndims;
	Node *x = gs[0]->nodes[i];
	for (int p = 1; p < M->npts; p++) {
		Node *y = gs[p]->nodes[i];
		if (x->op != y->op || x->nin != y->nin || x->dtype != y->dtype || x->rank != y->rank)
			return fail(M, y->loc, "this computes something else at other values of the run-time dimensions: "
			            "the graph must be the same for every value");
		for (int k = 0; k < x->nin; k++)
			if (x->in[k]->id != y->in[k]->id)
				return fail(M, y->loc, "this computes something else at other values of the run-time dimensions: "
				            "the graph must be the same for every value");
		if ((x->fval != y->fval && !(x->fval != x->fval && y->fval != y->fval)) || x->ival != y->ival)
			return fail(M, y->loc, "this value depends on a run-time dimension: only shapes, slices and indices may");
		if (x->op == OP_CALL && x->callee->fn != y->callee->fn)
			return fail(M, y->loc, "this calls another function at other values of the run-time dimensions");
	}
	if (x->op == OP_CALL) {
		Graph **cs = arena_alloc(a, (size_t)M->npts * sizeof(Graph *));
		for (int p = 0; p < M->npts; p++)
			cs[p] = gs[p]->nodes[i]->callee;
		if (!merge_graph(M, cs))
			return 0;
	}
	for (int f = 0; f < 32; f++) {
		if ((f >= x->rank && f < MAX_RANK) || (f >= MAX_RANK && f < 16))
			continue;
		int64_t v[MAX_DIMS + 2];
		int same = 1;
		for (int p = 0; p < M->npts; p++) {
			Node *y = gs[p]->nodes[i];
			v[p] = f < MAX_RANK ? y->shape[f] : y->a[f - 16];
			same &= v[p] == v[0];
		}
		if (same)
			continue;
		if (f >= 16 && (x->op == OP_INPUT || x->op == OP_PARAM || x->op == OP_STATE || x->op == OP_RESULT))
			return fail(M, x->loc, "this computes something else at other values of the run-time dimensions: "
			            "the graph must be the same for every value");
		GDyn *d = arena_alloc(a, sizeof *d);
		d->node = i;
		d->field = f;
		d->f.c0 = v[0];
		int64_t check = 0;
		for (int j = 0; j < n; j++) {
			d->f.coef[j] = v[j + 1] - v[0];
			d->f.c0 -= d->f.coef[j] * M->pts[0][j];
		}
		check = affine_eval(&d->f, n, M->pts[n + 1]);
		if (check != v[n + 1]) {
			return fail(M, x->loc, arena_printf(a, "%s of this %s is not a linear function of the run-time dimensions "
			                                   "(sums and constant multiples): nestc cannot compute it at run time",
			                                   field_name(a, f), op_name(x->op)));
		}
		if (f < MAX_RANK)
			for (int p = 0; p < M->npts; p++)
				if (v[p] == 1)
					return fail(M, x->loc, arena_printf(a, "%s of this %s is 1 at one of the values nestc compiles at "
					                                   "and more at others: whether it broadcasts cannot be decided at run time",
					                                   field_name(a, f), op_name(x->op)));
		vec_push(dyn, d);
	}
	return 1;
}

static int merge_graph(Merge *M, Graph **gs)
{
	for (int r = 0; r < M->reps.n; r++)
		if (M->reps.v[r] == gs[0]) {
			Graph **prev = M->samples.v[r];
			for (int p = 0; p < M->npts; p++)
				if (prev[p] != gs[p])
					return fail(M, gs[0]->fn ? gs[0]->fn->name_loc : (Loc){0, 0},
					            arena_printf(M->x->a, "region '%s' is called with shapes that depend on the run-time "
					                         "dimensions in different ways: give each call a function of its own",
					                         gs[0]->name));
			return 1;
		}
	vec_push(&M->reps, gs[0]);
	vec_push(&M->samples, gs);
	Graph *g = gs[0];
	for (int p = 1; p < M->npts; p++)
		if (gs[p]->nnodes != g->nnodes || gs[p]->ninputs != g->ninputs || gs[p]->noutputs != g->noutputs)
			return fail(M, g->fn ? g->fn->name_loc : (Loc){0, 0},
			            arena_printf(M->x->a, "'%s' computes something else at other values of the run-time "
			                         "dimensions: the graph must be the same for every value", g->name));
	Vec dyn = {0};
	for (int i = 0; i < g->nnodes && !M->failed; i++)
		merge_node(M, gs, i, &dyn);
	for (int j = 0; j < g->noutputs && !M->failed; j++)
		for (int p = 1; p < M->npts; p++)
			if (gs[p]->outputs[j]->id != g->outputs[j]->id)
				fail(M, g->outputs[j]->loc, arena_printf(M->x->a, "'%s' returns something else at other values of "
				                                         "the run-time dimensions", g->name));
	if (M->failed) {
		free(dyn.v);
		return 0;
	}
	/* a graph takes the dims when its own integers need them, or a region it calls does */
	int calls_dyn = 0;
	for (int i = 0; i < g->nnodes; i++)
		calls_dyn |= g->nodes[i]->op == OP_CALL && g->nodes[i]->callee->nbasis > 0;
	if (dyn.n || calls_dyn) {
		g->gdyn = arena_alloc(M->x->a, (size_t)(dyn.n + 1) * sizeof(GDyn));
		for (int k = 0; k < dyn.n; k++)
			g->gdyn[k] = *(GDyn *)dyn.v[k];
		g->ngdyn = dyn.n;
		g->nbasis = M->en->ndims;
		g->dim_names = M->names;
		g->dim_lo = M->lo;
		g->dim_hi = M->lo + MAX_DIMS;
	}
	free(dyn.v);
	return 1;
}

/* f >= 0 as a condition of the dims, as a where clause would say it: the
 * negative terms <= the positive ones and the constant ("P + T <= 16"). */
static const char *affine_cond(Merge *M, const Affine *f)
{
	Entry *en = M->en;
	Buf l = {0}, r = {0};
	for (int j = 0; j < en->ndims; j++) {
		int64_t c = f->coef[j];
		if (!c)
			continue;
		Buf *side = c < 0 ? &l : &r;
		c = c < 0 ? -c : c;
		if (c == 1)
			buf_printf(side, "%s%s", side->len ? " + " : "", en->dim_names[j]);
		else
			buf_printf(side, "%s%lld * %s", side->len ? " + " : "", (long long)c, en->dim_names[j]);
	}
	int64_t c0 = f->c0;
	if (c0 < 0 || !l.len)
		buf_printf(&l, "%s%lld", l.len ? " + " : "", (long long)(c0 < 0 ? -c0 : 0));
	if (c0 > 0 || !r.len)
		buf_printf(&r, "%s%lld", r.len ? " + " : "", (long long)(c0 > 0 ? c0 : 0));
	const char *t = arena_printf(M->x->a, "%s <= %s", l.s, r.s);
	buf_free(&l);
	buf_free(&r);
	return t;
}

static void add_check(Merge *M, Affine f, Loc loc, const char *text)
{
	Entry *en = M->en;
	int64_t mn, mx;
	affine_range(&f, en->ndims, en->dim_lo, en->dim_hi, &mn, &mx);
	if (mn >= 0)
		return; /* holds for every value of the dims */
	for (int k = 0; k < en->nchecks; k++)
		if (!memcmp(&en->checks[k].f, &f, sizeof f) && !en->checks[k].eq)
			return;
	DimCheck *nc = arena_alloc(M->x->a, (size_t)(en->nchecks + 1) * sizeof(DimCheck));
	memcpy(nc, en->checks, (size_t)en->nchecks * sizeof(DimCheck));
	nc[en->nchecks].f = f;
	nc[en->nchecks].loc = loc;
	nc[en->nchecks].text = text;
	en->checks = nc;
	en->nchecks++;
}

/* Slices and stores stay inside their tensors; sizes are not negative. */
static void bounds_checks(Merge *M, Graph *g)
{
	Arena *a = M->x->a;
	Source *src = M->x->d->src;
	/* each check said as a condition of the dims, then what it keeps in
	 * bounds and where: "P + T <= 16 (the end of the slice at m.nest:7:10,
	 * on axis 0)", which the runtime follows with "does not hold" */
	const char *file = strrchr(src->path, '/') ? strrchr(src->path, '/') + 1 : src->path;
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		int line, col;
		source_linecol(src, n->loc.off, &line, &col);
		for (int k = 0; k < n->rank; k++)
			if (gdyn_find(g, i, k)) {
				Affine f = field_form(g, n, k);
				add_check(M, f, n->loc,
				          arena_printf(a, "%s (the size of axis %d of the %s at %s:%d:%d)", affine_cond(M, &f), k,
				                       op_name(n->op), file, line, col));
			}
		if (n->op != OP_SLICE && n->op != OP_STORE)
			continue;
		Node *t = n->in[0];
		for (int k = 0; k < n->rank; k++) {
			Affine st = field_form(g, n, 16 + k), len = field_form(g, n, k), dim = field_form(g, t, k);
			add_check(M, st, n->loc,
			          arena_printf(a, "%s (the start of the %s at %s:%d:%d, on axis %d)", affine_cond(M, &st),
			                       op_name(n->op), file, line, col, k));
			Affine end = dim; /* dim - (start + len) >= 0 */
			end.c0 -= st.c0 + len.c0;
			for (int j = 0; j < MAX_DIMS; j++)
				end.coef[j] -= st.coef[j] + len.coef[j];
			add_check(M, end, n->loc,
			          arena_printf(a, "%s (the end of the %s at %s:%d:%d, on axis %d)", affine_cond(M, &end),
			                       op_name(n->op), file, line, col, k));
		}
	}
}

/* A region graph's key with its run-time dims: "x: f32[T, 64]". */
static void symbolic_key(Merge *M, Graph *g)
{
	if (!g->is_region || !g->nbasis)
		return;
	Buf b = {0};
	for (int i = 0; i < g->ninputs; i++) {
		if (i)
			buf_puts(&b, "; ");
		buf_printf(&b, "%s: %s", g->input_names[i], g->inputs[i]->a[1] ? "state " : "");
		dyn_shape_str(M->x->a, &b, g, g->inputs[i]);
	}
	/* the run-time dims it takes (a scalar argument that is one shows as such) */
	for (int j = 0; j < g->nbasis; j++)
		buf_printf(&b, "%s%s", j ? ", " : "; run-time ", g->dim_names[j]);
	g->key = arena_strdup(M->x->a, b.s ? b.s : "");
	buf_free(&b);
}

/* ---- specialised variants: @region(specialize = [T == 1]) ----
 *
 * A call of a region whose shapes depend on the dims gets, for each condition
 * of its specialize list that a dim value makes true, an alternative: a copy
 * of the region's graph with that dim fixed (its shapes known, so its kernels
 * are the static ones), called instead when the dim has that value. The
 * alternative is an OP_CALL node of its own at the end of the caller (a[2] =
 * 1), which the caller's call names (a[3] = its id + 1, a[4] = dim + 1, a[5] =
 * the value): region passes see both calls and make a variant of each, code
 * generation calls one or the other, the interpreter runs the general one. */

typedef struct Spec {
	LowerCtx *x;
	int dim;
	int64_t value;
	Vec from, to; /* graphs copied so far */
	const char *guard;
} Spec;

static Graph *spec_graph(Spec *S, Graph *g)
{
	for (int i = 0; i < S->from.n; i++)
		if (S->from.v[i] == g)
			return S->to.v[i];
	Program *p = S->x->p;
	Arena *a = S->x->a;
	Graph *h = graph_new(p, g->name, g->fn);
	vec_push(&S->from, g);
	vec_push(&S->to, h);
	h->is_region = g->is_region;
	h->key = g->key;
	h->has_reuse_hash = g->has_reuse_hash;
	h->reuse_hash = g->reuse_hash;
	h->dim_names = g->dim_names;
	h->dim_lo = g->dim_lo;
	h->dim_hi = g->dim_hi;
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		Node *m = node_new(p, h, n->op, n->dtype, n->rank, n->shape, n->loc);
		memcpy(m->a, n->a, sizeof m->a);
		m->fval = n->fval;
		m->ival = n->ival;
		m->callee = n->callee && n->callee->nbasis ? spec_graph(S, n->callee) : n->callee;
		for (int k = 0; k < n->nin; k++)
			node_add_input(p, m, h->nodes[n->in[k]->id]);
	}
	/* the integers of the fixed dim become constants */
	Vec dyn = {0};
	for (int k = 0; k < g->ngdyn; k++) {
		GDyn d = g->gdyn[k];
		d.f.c0 += d.f.coef[S->dim] * S->value;
		d.f.coef[S->dim] = 0;
		int left = 0;
		for (int j = 0; j < g->nbasis; j++)
			left |= d.f.coef[j] != 0;
		Node *m = h->nodes[d.node];
		if (!left) {
			if (d.field < MAX_RANK)
				m->shape[d.field] = d.f.c0;
			else
				m->a[d.field - 16] = d.f.c0;
			continue;
		}
		GDyn *c = arena_alloc(a, sizeof *c);
		*c = d;
		vec_push(&dyn, c);
	}
	int calls_dyn = 0;
	for (int i = 0; i < h->nnodes; i++)
		calls_dyn |= h->nodes[i]->op == OP_CALL && h->nodes[i]->callee->nbasis > 0;
	if (dyn.n || calls_dyn) {
		h->gdyn = arena_alloc(a, (size_t)(dyn.n + 1) * sizeof(GDyn));
		for (int k = 0; k < dyn.n; k++)
			h->gdyn[k] = *(GDyn *)dyn.v[k];
		h->ngdyn = dyn.n;
		h->nbasis = g->nbasis;
	}
	free(dyn.v);
	h->ninputs = g->ninputs;
	h->input_names = g->input_names;
	h->inputs = arena_alloc(a, (size_t)(g->ninputs + 1) * sizeof(Node *));
	for (int i = 0; i < g->ninputs; i++)
		h->inputs[i] = h->nodes[g->inputs[i]->id];
	h->noutputs = g->noutputs;
	h->outputs = arena_alloc(a, (size_t)(g->noutputs + 1) * sizeof(Node *));
	for (int i = 0; i < g->noutputs; i++)
		h->outputs[i] = h->nodes[g->outputs[i]->id];
	/* its guards in words: the shapes it takes, and the condition */
	if (h->is_region) {
		Buf b = {0};
		for (int i = 0; i < h->ninputs; i++) {
			if (i)
				buf_puts(&b, "; ");
			buf_printf(&b, "%s: %s", h->input_names[i], h->inputs[i]->a[1] ? "state " : "");
			dyn_shape_str(a, &b, h, h->inputs[i]);
		}
		buf_printf(&b, "; when %s", S->guard);
		h->key = arena_strdup(a, b.s);
		buf_free(&b);
	}
	return h;
}

/* The shape variable `name` of region g's arguments as a form of the dims, or 0. */
static int var_form(Graph *g, const char *name, Affine *f)
{
	Decl *fn = g->fn;
	for (int i = 0; i < fn->nfargs; i++) {
		TypeExpr *t = fn->fargs[i].type;
		if (t->kind != T_TENSOR)
			continue;
		for (int k = 0; k < t->ndims; k++)
			if (t->dims[k]->kind == E_NAME && !strcmp(t->dims[k]->name, name))
				for (int j = 0; j < g->ninputs; j++)
					if (!strcmp(g->input_names[j], fn->fargs[i].name)) {
						*f = field_form(g, g->inputs[j], k);
						return 1;
					}
	}
	return 0;
}

/* The calls of the exported function (only: the regions they call are
 * copied whole, their own calls with them) get their alternatives. */
static void specialize_calls(Merge *M, Graph *caller)
{
	LowerCtx *x = M->x;
	int n0 = caller->nnodes;
	Vec memo = {0}; /* (Graph *g, dim, value) -> copy, as 4 pointers each */
	for (int i = 0; i < n0; i++) {
		Node *n = caller->nodes[i];
		if (n->op != OP_CALL || n->a[2] || !n->callee->nbasis)
			continue;
		Graph *g = n->callee;
		for (int r = 0; g->fn && r < g->fn->nattrs; r++) {
			RegionAttr *ra = &g->fn->attrs[r];
			if (strcmp(ra->key, "specialize") || ra->value->kind != E_LIST)
				continue;
			for (int c = 0; c < ra->value->nargs && !n->a[3]; c++) {
				Expr *e = ra->value->args[c];
				Affine f;
				if (e->kind != E_BINARY || e->a->kind != E_NAME || !var_form(g, e->a->name, &f))
					continue;
				Value *v = eval_const_expr(x->c, e->b);
				if (v->kind != V_INT)
					continue;
				/* one dim, solved for the value */
				int dim = -1, count = 0;
				for (int j = 0; j < g->nbasis; j++)
					if (f.coef[j]) {
						dim = j;
						count++;
					}
				if (count != 1 || (v->i - f.c0) % f.coef[dim] != 0)
					continue;
				int64_t dv = (v->i - f.c0) / f.coef[dim];
				if (dv < M->lo[dim] || dv > M->lo[MAX_DIMS + dim])
					continue; /* never true in this entry */
				Graph *h = NULL;
				for (int q = 0; q + 3 < memo.n && !h; q += 4)
					if (memo.v[q] == g && (intptr_t)memo.v[q + 1] == dim && *(int64_t *)memo.v[q + 2] == dv)
						h = memo.v[q + 3];
				if (!h) {
					Spec S = {.x = x, .dim = dim, .value = dv,
					          .guard = arena_printf(x->a, "%s == %lld", M->names[dim], (long long)dv)};
					h = spec_graph(&S, g);
					free(S.from.v);
					free(S.to.v);
					int64_t *vp = arena_alloc(x->a, sizeof *vp);
					*vp = dv;
					vec_push(&memo, g);
					vec_push(&memo, (void *)(intptr_t)dim);
					vec_push(&memo, vp);
					vec_push(&memo, h);
				}
				Node *alt = node_new(x->p, caller, OP_CALL, DT_F32, 0, NULL, n->loc);
				alt->callee = h;
				alt->a[2] = 1;
				for (int k = 0; k < n->nin; k++)
					node_add_input(x->p, alt, n->in[k]);
				n->a[3] = alt->id + 1;
				n->a[4] = dim + 1;
				n->a[5] = dv;
			}
		}
	}
	free(memo.v);
}

int merge_samples(LowerCtx *x, Entry *en, Graph **gs, int npts, int64_t pts[][MAX_DIMS])
{
	Merge M = {.x = x, .en = en, .npts = npts, .pts = pts};
	M.names = arena_alloc(x->a, MAX_DIMS * sizeof(char *));
	memcpy(M.names, en->dim_names, sizeof en->dim_names);
	int64_t *lo = arena_alloc(x->a, 2 * MAX_DIMS * sizeof(int64_t));
	memcpy(lo, en->dim_lo, sizeof en->dim_lo);
	memcpy(lo + MAX_DIMS, en->dim_hi, sizeof en->dim_hi);
	M.lo = lo;
	int ok = merge_graph(&M, gs);
	if (ok) {
		for (int r = 0; r < M.reps.n; r++) {
			Graph *g = M.reps.v[r];
			bounds_checks(&M, g);
			symbolic_key(&M, g);
		}
		gs[0]->nbasis = en->ndims;
		gs[0]->dim_names = M.names;
		gs[0]->dim_lo = M.lo;
		gs[0]->dim_hi = M.lo + MAX_DIMS;
	}
	/* the other samples' graphs go: nothing refers to them any more */
	Program *p = x->p;
	int keep = 0;
	for (int i = 0; i < p->graphs.n; i++) {
		Graph *g = p->graphs.v[i];
		int drop = 0;
		for (int r = 0; r < M.samples.n && !drop; r++) {
			Graph **s = M.samples.v[r];
			for (int q = 1; q < npts; q++)
				if (s[q] == g && s[0] != g)
					drop = 1;
		}
		for (int q = 1; q < npts && !drop; q++)
			drop = g == gs[q];
		if (!drop) {
			g->id = keep;
			p->graphs.v[keep++] = g;
		}
	}
	p->graphs.n = keep;
	if (ok)
		specialize_calls(&M, gs[0]);
	free(M.reps.v);
	free(M.samples.v);
	return ok;
}

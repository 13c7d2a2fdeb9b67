/* params.c - the model's params: the param table (Program.params) built from the
 * param declarations, each tensor named in the weights file by its path
 * (h.3.attn.c_attn.weight: the declaration's name, or its explicit weights-file
 * name, then record fields and array indices), with its dtype and shape. */
#include "nestc.h"

#include <string.h>

/* The tree of a param of type t named path: its dimensions are constant
 * expressions (with a named type's parameters in x->te). */
static PTree *build_ptree(LowerCtx *x, TypeExpr *t, const char *path, Loc loc, int depth, int state)
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
			Value *v = eval_expr(x, t->dims[i]);
			x->in_dim--;
			if (!ct_int(x, v, t->dims[i]->loc, "a param dimension", &shape[i]))
				return NULL;
			if (shape[i] < 0) {
				error_at(x->d, t->dims[i]->loc, "dimension %lld is negative", (long long)shape[i]);
				return NULL;
			}
		}
		if (!check_shape_size(x, t->dtype, t->ndims, shape, t->loc)) {
			x->p->size_reported = 1;
			return NULL;
		}
		Program *p = x->p;
		/* a state's leaves go to the state table, the same way */
		ParamInfo **tab = state ? &p->states : &p->params;
		int *count = state ? &p->nstates : &p->nparams, *capp = state ? &p->capstates : &p->capparams;
		if (*count == *capp) {
			int cap = *capp ? *capp * 2 : 64;
			ParamInfo *np = arena_alloc(x->a, (size_t)cap * sizeof(ParamInfo));
			if (*count)
				memcpy(np, *tab, (size_t)*count * sizeof(ParamInfo));
			*tab = np;
			*capp = cap;
		}
		ParamInfo *pi = &(*tab)[*count];
		pi->name = path;
		pi->dtype = t->dtype;
		pi->rank = t->ndims;
		memcpy(pi->shape, shape, sizeof shape);
		pi->loc = loc;
		PTree *pt = arena_alloc(x->a, sizeof *pt);
		pt->kind = PT_LEAF;
		pt->state = state;
		pt->param = (*count)++;
		if (*count > 1000000) {
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
			Value *v = eval_expr(x, t->args[i]);
			x->in_dim--;
			int64_t iv;
			if (!ct_int(x, v, t->args[i]->loc, "a type's dimension argument", &iv))
				return NULL;
			te->vals[i] = vint(x, iv);
		}
		TEnv *saved = x->te;
		x->te = te;
		PTree *r = build_ptree(x, g->decl->type, path, loc, depth + 1, state);
		x->te = saved;
		return r;
	}
	case T_RECORD: {
		PTree *pt = arena_alloc(x->a, sizeof *pt);
		pt->kind = PT_RECORD;
		pt->state = state;
		pt->n = t->nfields;
		pt->names = arena_alloc(x->a, (size_t)(t->nfields + 1) * sizeof(char *));
		pt->kids = arena_alloc(x->a, (size_t)(t->nfields + 1) * sizeof(PTree *));
		for (int i = 0; i < t->nfields; i++) {
			pt->names[i] = t->fields[i].name;
			pt->kids[i] = build_ptree(x, t->fields[i].type, arena_printf(x->a, "%s.%s", path, t->fields[i].name),
			                          loc, depth + 1, state);
			if (!pt->kids[i])
				return NULL;
		}
		return pt;
	}
	case T_ARRAY: {
		x->in_dim++;
		Value *v = eval_expr(x, t->count);
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
		pt->state = state;
		pt->n = (int)n;
		pt->kids = arena_alloc(x->a, (size_t)(n + 1) * sizeof(PTree *));
		for (int i = 0; i < n; i++) {
			pt->kids[i] = build_ptree(x, t->elem, arena_printf(x->a, "%s.%d", path, i), loc, depth + 1, state);
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

/* Params first: their names and shapes form the model's param table. */
void lower_params(LowerCtx *x)
{
	Checker *c = x->c;
	for (int k = 0; k < c->nglobals; k++) {
		Global *g = c->globals[k];
		if (g->kind != G_PARAM)
			continue;
		const char *path = g->decl->wname ? g->decl->wname : g->name;
		g->ptree = build_ptree(x, g->decl->type, path, g->decl->name_loc, 0, g->decl->kind == D_STATE);
	}
	/* two tensors with one weights-file name would bind the same data twice */
	for (int i = 0; i < c->p->nparams; i++)
		for (int j = 0; j < i && j < 4096; j++)
			if (!strcmp(c->p->params[i].name, c->p->params[j].name)) {
				error_at(c->d, c->p->params[i].loc, "two params are named '%s' in the weights file", c->p->params[i].name);
				break;
			}
}

/* The graph that holds node n. */
static Graph *graph_of(Program *p, Node *n)
{
	for (int i = 0; i < p->graphs.n; i++) {
		Graph *g = p->graphs.v[i];
		if (n->id < g->nnodes && g->nodes[n->id] == n)
			return g;
	}
	return NULL;
}

/* Mark the params whose values reach node n: directly, through reshapes and
 * other moves, and from a region's input to every call's argument. */
static void mark_positive(Program *p, Node *n, int depth)
{
	if (depth > 64)
		return;
	if (n->op == OP_PARAM) {
		p->params[n->a[0]].positive = 1;
		return;
	}
	if ((op_info[n->op].cls == OPC_MOVE || n->op == OP_CAST) && n->nin == 1) {
		mark_positive(p, n->in[0], depth + 1);
		return;
	}
	Graph *g = n->op == OP_INPUT ? graph_of(p, n) : NULL;
	if (!g || !g->is_region)
		return;
	for (int i = 0; i < p->graphs.n; i++) {
		Graph *h = p->graphs.v[i];
		for (int k = 0; k < h->nnodes; k++) {
			Node *m = h->nodes[k];
			if (m->op == OP_CALL && m->callee == g && n->a[0] < m->nin)
				mark_positive(p, m->in[n->a[0]], depth + 1);
		}
	}
}

/* A variance drawn negative makes batch_norm's rsqrt NaN: random weights
 * (run.c) draw the params that reach a running_var positive. */
void mark_variance_params(Program *p)
{
	for (int i = 0; i < p->variance_nodes.n; i++)
		mark_positive(p, p->variance_nodes.v[i], 0);
}

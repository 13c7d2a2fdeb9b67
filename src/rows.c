/* rows.c - narrowing: ops and region calls computed only for the part of
 * their result that is used.
 *
 * ViT returns the final norm of its CLS token, x[:, 0] of the last layer's
 * [N, 197, D] result: the last layer's MLP, output projection, queries and
 * attention rows for the 196 other tokens were thrown away (7% of the
 * model's FLOPs). This pass walks each graph from its results back, works out
 * for every node which part of it its users read, and rebuilds the graph
 * with the nodes that allow it computed for that part only. A call of a
 * region whose result is used in part runs a variant of the region narrowed
 * the same way (a region variant with its own guard, "result: rows 0:1 of
 * axis 1 used", in the region table and the report).
 *
 * A part is a range [lo, hi) of one factor of one axis: the axis viewed as
 * [a, e, c] (row-major), only [:, lo:hi, :] of it read. The factors let a
 * part follow reshapes that fold axes together (linear()'s [B, M, D] ->
 * [B*M, D]: token 0 of each sequence is rows 0 and M of the fold). The ops
 * that keep rows apart narrow: elementwise ops (a broadcast operand is read
 * whole), matmul rows and batch axes, softmax and norms off their axis, the
 * causal mask's rows, reshape, transpose, slice, calls of single-result
 * regions. Everything else is computed whole, and a narrowed user reads the
 * part it needs through a slice (a view that copies the part). Graphs with
 * run-time dimensions or a reuse_hash are left alone: their code is shared
 * by shapes this pass does not see. */
#include "nestc.h"

#include <stdlib.h>
#include <string.h>

enum { W_NONE, W_PART, W_ALL };

typedef struct Want {
	int kind;
	int axis;
	int64_t a, e, c;  /* the axis as [a, e, c] */
	int64_t lo, hi;   /* of e */
} Want;

static const Want ALL = {.kind = W_ALL};

typedef struct Narrow {
	Program *p;
	Vec from, to;     /* pruned callees: (graph, want) -> graph */
	Vec wants;
} Narrow;

static int same_view(const Want *x, const Want *y)
{
	return x->axis == y->axis && x->a == y->a && x->e == y->e && x->c == y->c;
}

static void merge(Want *into, const Want *w)
{
	if (into->kind == W_NONE) {
		*into = *w;
	} else if (into->kind == W_ALL || w->kind == W_ALL || !same_view(into, w)) {
		*into = ALL;
	} else {
		into->lo = into->lo < w->lo ? into->lo : w->lo;
		into->hi = into->hi > w->hi ? into->hi : w->hi;
	}
	/* a part that is the whole */
	if (into->kind == W_PART && into->lo == 0 && into->hi == into->e)
		*into = ALL;
}

static Want at_axis(const Want *w, int axis)
{
	Want r = *w;
	r.axis = axis;
	return r;
}

static int64_t inner_of(const Node *n, int axis)
{
	int64_t p = 1;
	for (int k = axis + 1; k < n->rank; k++)
		p *= n->shape[k];
	return p;
}

/* An operand broadcast to n's shape: its part, or all of it where it is broadcast along w's axis. */
static Want bcast(const Node *n, const Node *in, const Want *w)
{
	int j = w->axis - (n->rank - in->rank);
	if (j < 0 || in->shape[j] == 1)
		return ALL;
	return at_axis(w, j);
}

/* Can a part of x be cut out by part_of (its axis split in three at most)? */
static int viewable(const Node *x, const Want *w)
{
	return w->kind != W_PART || x->rank + (w->a > 1) + (w->c > 1) <= MAX_RANK;
}

static int rule(const Node *n, const Want *w, Want *need);

/* What node n needs of each input when only part w of it is computed; 0 when
 * n cannot be computed in part. Single-result calls are decided by the caller. */
static int needs(const Node *n, const Want *w, Want *need)
{
	for (int k = 0; k < n->nin; k++)
		need[k] = ALL;
	/* no parts of empty tensors (their factors divide by zero) */
	if (shape_numel(n->rank, n->shape) == 0 || !rule(n, w, need))
		return 0;
	for (int k = 0; k < n->nin; k++)
		if (!viewable(n->in[k], &need[k]))
			return 0;
	return 1;
}

static int rule(const Node *n, const Want *w, Want *need)
{
	switch (op_info[n->op].cls) {
	case OPC_UNARY:
	case OPC_CAST:
		need[0] = *w;
		return 1;
	case OPC_BINARY:
	case OPC_COMPARE:
	case OPC_LOGIC:
	case OPC_SELECT:
		for (int k = 0; k < n->nin; k++)
			need[k] = bcast(n, n->in[k], w);
		return 1;
	case OPC_MATMUL: {
		const Node *x = n->in[0], *y = n->in[1];
		if (n->rank < 2 || x->rank < 2 || y->rank < 2 || w->axis == n->rank - 1)
			return 0;
		if (w->axis == n->rank - 2) {
			need[0] = at_axis(w, x->rank - 2);
			return 1;
		}
		for (int k = 0; k < 2; k++) {
			const Node *in = n->in[k];
			int j = w->axis - (n->rank - in->rank);
			need[k] = j < 0 || in->shape[j] == 1 ? ALL : at_axis(w, j);
		}
		return 1;
	}
	case OPC_ROW:
		if (w->axis == n->a[0])
			return 0;
		need[0] = *w;
		return 1;
	case OPC_NORM:
		if (n->op == OP_GROUPNORM || w->axis == n->rank - 1)
			return 0;
		need[0] = *w;
		return 1;
	default:
		break;
	}
	const Node *in = n->nin ? n->in[0] : NULL;
	switch (n->op) {
	case OP_TRANSPOSE:
		need[0] = at_axis(w, (int)n->a[w->axis]);
		return 1;
	case OP_SLICE:
		if (in->shape[w->axis] == n->shape[w->axis]) {
			need[0] = *w;
			return 1;
		}
		if (w->a != 1 || w->c != 1)
			return 0;
		need[0] = (Want){W_PART, w->axis, 1, in->shape[w->axis], 1, n->a[w->axis] + w->lo, n->a[w->axis] + w->hi};
		return 1;
	case OP_RESHAPE: {
		/* the same elements in the same order: find the input axis that holds the factor */
		int64_t I = w->c * inner_of(n, w->axis);
		for (int j = 0; j < in->rank; j++) {
			int64_t P = inner_of(in, j);
			if (I % P == 0 && (P * in->shape[j]) % (I * w->e) == 0) {
				need[0] = (Want){W_PART, j, P * in->shape[j] / (I * w->e), w->e, I / P, w->lo, w->hi};
				return 1;
			}
		}
		return 0;
	}
	case OP_CAUSAL_MASK:
		/* [..., i, j] masked where j > i + a[0]: rows keep their mask with
		 * the offset moved by the part's first row (rows.c: rebuild) */
		if (w->axis == n->rank - 1 || (w->axis == n->rank - 2 && (w->a != 1 || w->c != 1)))
			return 0;
		need[0] = *w;
		return 1;
	case OP_RESULT:
		need[0] = *w;
		return 1;
	default:
		return 0;
	}
}

/* A slice computed whole with one axis sliced reads that window of its input. */
static int slice_window(const Node *n, Want *need)
{
	const Node *in = n->in[0];
	int axis = -1;
	for (int k = 0; k < n->rank; k++) {
		if (n->shape[k] == in->shape[k])
			continue;
		if (axis >= 0)
			return 0;
		axis = k;
	}
	if (axis < 0)
		return 0;
	*need = (Want){W_PART, axis, 1, in->shape[axis], 1, n->a[axis], n->a[axis] + n->shape[axis]};
	return 1;
}

static void narrow_shape(const Node *n, const Want *w, int64_t *shape)
{
	memcpy(shape, n->shape, sizeof n->shape);
	shape[w->axis] = w->a * (w->hi - w->lo) * w->c;
}

static Graph *prune(Narrow *N, Graph *g, const Want *out);

typedef struct Build {
	Narrow *N;
	Graph *g, *h;
	Want *W;       /* what users need of each node */
	Want *have;    /* what each rebuilt node holds: W_ALL or a part */
	Node **to;     /* old id -> new node */
	Graph **callee; /* narrowed callees of calls */
} Build;

/* Part w of old node m, from what its rebuilt node holds: itself, or a
 * view: reshape to split the axis into [a, e, c], slice, reshape back. */
static Node *part_of(Build *b, Node *m, const Want *w, Loc loc)
{
	Program *p = b->N->p;
	Node *x = b->to[m->id];
	const Want *h = &b->have[m->id];
	if (w->kind == W_ALL) {
		if (h->kind != W_ALL)
			ice("rows: node %d needed whole but computed in part", m->id);
		return x;
	}
	int64_t lo = w->lo, hi = w->hi, e = w->e;
	if (h->kind == W_PART) {
		if (!same_view(h, w) || lo < h->lo || hi > h->hi)
			ice("rows: node %d holds another part than its user reads", m->id);
		if (h->lo == lo && h->hi == hi)
			return x;
		lo -= h->lo;
		hi -= h->lo;
		e = h->hi - h->lo;
	}
	int64_t split[MAX_RANK + 2];
	int r = 0, ax = 0;
	for (int k = 0; k < x->rank; k++) {
		if (k != w->axis) {
			split[r++] = x->shape[k];
			continue;
		}
		if (w->a > 1)
			split[r++] = w->a;
		ax = r;
		split[r++] = e;
		if (w->c > 1)
			split[r++] = w->c;
	}
	if (r > MAX_RANK)
		ice("rows: a view of rank %d", r);
	Node *v = x;
	if (r != x->rank) {
		v = node_new(p, b->h, OP_RESHAPE, x->dtype, r, split, loc);
		node_add_input(p, v, x);
	}
	int64_t cut[MAX_RANK + 2];
	memcpy(cut, split, sizeof cut);
	cut[ax] = hi - lo;
	Node *s = node_new(p, b->h, OP_SLICE, x->dtype, r, cut, loc);
	s->a[ax] = lo;
	node_add_input(p, s, v);
	if (r == x->rank)
		return s;
	int64_t back[MAX_RANK];
	narrow_shape(m, &(Want){W_PART, w->axis, w->a, e, w->c, 0, hi - lo}, back);
	Node *o = node_new(p, b->h, OP_RESHAPE, x->dtype, x->rank, back, loc);
	node_add_input(p, o, s);
	return o;
}

static int narrowable(const Graph *g)
{
	return g->nbasis == 0 && !g->has_reuse_hash && g->noutputs > 0;
}

/* g rebuilt with its outputs computed for out[] only; NULL when nothing is
 * narrowed. *saves: a matrix product (or a call of a narrowed region) is. */
static Graph *rebuild(Narrow *N, Graph *g, const Want *out, int *saves)
{
	Program *p = N->p;
	int nn = g->nnodes;
	Build b = {.N = N, .g = g};
	b.W = xcalloc((size_t)nn + 1, sizeof(Want));
	b.have = xcalloc((size_t)nn + 1, sizeof(Want));
	b.to = xcalloc((size_t)nn + 1, sizeof(Node *));
	b.callee = xcalloc((size_t)nn + 1, sizeof(Graph *));
	Want *need = xcalloc(64, sizeof(Want));
	int needcap = 64, changed = 0;
	for (int i = 0; i < g->noutputs; i++)
		merge(&b.W[g->outputs[i]->id], &out[i]);
	/* users before inputs: the nodes are in topological order */
	for (int i = nn - 1; i >= 0; i--) {
		Node *n = g->nodes[i];
		Want *w = &b.W[i];
		if (w->kind == W_NONE) /* unused, or written for its effect */
			*w = ALL;
		if (n->nin > needcap) {
			needcap = n->nin;
			need = xrealloc(need, (size_t)needcap * sizeof(Want));
		}
		int part = 0;
		if (n->op == OP_CALL) {
			if (w->kind == W_PART && n->callee->noutputs == 1 && (b.callee[i] = prune(N, n->callee, w)))
				part = 1;
			for (int k = 0; k < n->nin; k++)
				need[k] = ALL;
		} else if (n->op == OP_RESULT && n->in[0]->callee->noutputs != 1) {
			for (int k = 0; k < n->nin; k++)
				need[k] = ALL;
		} else if (w->kind == W_PART && n->op != OP_INPUT) {
			part = needs(n, w, need);
		}
		if (!part && !(n->op == OP_SLICE && slice_window(n, &need[0]))) {
			for (int k = 0; k < n->nin; k++)
				need[k] = ALL;
		}
		if (part)
			b.have[i] = *w;
		else
			b.have[i] = ALL;
		for (int k = 0; k < n->nin; k++)
			merge(&b.W[n->in[k]->id], &need[k]);
	}
	/* a result holds what its call computed */
	for (int i = 0; i < nn; i++) {
		Node *n = g->nodes[i];
		if (n->op == OP_RESULT && b.have[i].kind == W_PART)
			b.have[i] = b.callee[n->in[0]->id] ? b.W[n->in[0]->id] : ALL;
		if (b.have[i].kind == W_PART) {
			changed = 1;
			*saves |= n->op == OP_MATMUL || n->op == OP_CALL;
		}
	}
	Graph *h = NULL;
	if (changed) {
		h = arena_alloc(p->arena, sizeof *h);
		*h = *g;
		h->nodes = NULL;
		h->nnodes = h->cap = 0;
		h->param_nodes = h->state_nodes = NULL;
		h->has_fp = 0;
		b.h = h;
		for (int i = 0; i < nn; i++) {
			Node *n = g->nodes[i];
			const Want *hv = &b.have[i];
			/* what this node reads of each input, as decided above */
			Want win;
			int window = hv->kind == W_ALL && n->op == OP_SLICE && slice_window(n, &win) &&
			             b.have[n->in[0]->id].kind == W_PART;
			int part = hv->kind == W_PART && n->op != OP_CALL && n->op != OP_RESULT;
			if (part)
				needs(n, hv, need);
			else
				for (int k = 0; k < n->nin; k++)
					need[k] = ALL;
			if (window)
				need[0] = win;
			if (n->op == OP_RESULT && hv->kind == W_PART)
				need[0] = *hv;
			Node *ins[64];
			Node **in = n->nin <= 64 ? ins : xcalloc((size_t)n->nin, sizeof(Node *));
			for (int k = 0; k < n->nin; k++)
				in[k] = n->op == OP_RESULT ? b.to[n->in[k]->id] : part_of(&b, n->in[k], &need[k], n->loc);
			if (window) {
				/* part_of cut its input to the window: the slice is that */
				b.to[i] = in[0];
				continue;
			}
			int64_t shape[MAX_RANK];
			if (hv->kind == W_PART && n->op != OP_CALL)
				narrow_shape(n, hv, shape);
			else
				memcpy(shape, n->shape, sizeof shape);
			Node *m = node_new(p, h, n->op, n->dtype, n->rank, shape, n->loc);
			memcpy(m->a, n->a, sizeof m->a);
			m->fval = n->fval;
			m->ival = n->ival;
			m->callee = n->op == OP_CALL && b.callee[i] ? b.callee[i] : n->callee;
			if (part && n->op == OP_CAUSAL_MASK && hv->axis == n->rank - 2)
				m->a[0] += hv->lo;
			/* a narrowed slice along its own axis reads a part cut to it */
			if (part && n->op == OP_SLICE && n->in[0]->shape[hv->axis] != n->shape[hv->axis])
				m->a[hv->axis] = 0;
			for (int k = 0; k < n->nin; k++)
				node_add_input(p, m, in[k]);
			if (in != ins)
				free(in);
			b.to[i] = m;
		}
		h->inputs = arena_alloc(p->arena, (size_t)(g->ninputs + 1) * sizeof(Node *));
		for (int i = 0; i < g->ninputs; i++)
			h->inputs[i] = b.to[g->inputs[i]->id];
		h->outputs = arena_alloc(p->arena, (size_t)(g->noutputs + 1) * sizeof(Node *));
		for (int i = 0; i < g->noutputs; i++)
			h->outputs[i] = part_of(&b, g->outputs[i], &out[i], g->outputs[i]->loc);
	}
	free(need);
	free(b.W);
	free(b.have);
	free(b.to);
	free(b.callee);
	return h;
}

/* Callee g narrowed to part w of its one result (cached per part), or NULL. */
static Graph *prune(Narrow *N, Graph *g, const Want *w)
{
	if (!narrowable(g))
		return NULL;
	for (int i = 0; i < N->from.n; i++) {
		const Want *v = N->wants.v[i];
		if (N->from.v[i] == g && same_view(v, w) && v->lo == w->lo && v->hi == w->hi)
			return N->to.v[i];
	}
	/* a narrowed variant is one more object to compile: worth it for matrix
	 * products, not for a few elementwise ops */
	int saves = 0;
	Graph *h = rebuild(N, g, w, &saves);
	if (!saves)
		h = NULL;
	if (h) {
		Program *p = N->p;
		h->id = p->graphs.n;
		avec_push(p->arena, &p->graphs, h);
		Buf b = {0};
		buf_printf(&b, "%s%sresult: rows %lld:%lld of axis %d", g->key ? g->key : "", g->key && *g->key ? "; " : "",
		           (long long)w->lo, (long long)w->hi, w->axis);
		if (w->a != 1 || w->c != 1)
			buf_printf(&b, " viewed as [%lld, %lld, %lld]", (long long)w->a, (long long)w->e, (long long)w->c);
		buf_puts(&b, " used");
		h->key = arena_strdup(p->arena, b.s);
		h->narrowed = 1;
		buf_free(&b);
	}
	Want *c = arena_alloc(N->p->arena, sizeof *c);
	*c = *w;
	vec_push(&N->from, g);
	vec_push(&N->to, h);
	vec_push(&N->wants, c);
	return h;
}

void narrow_program(Program *p)
{
	Narrow N = {.p = p};
	for (int i = 0; i < p->nentries; i++) {
		Graph *g = p->entries[i].g;
		if (!narrowable(g))
			continue;
		Want *out = xcalloc((size_t)g->noutputs + 1, sizeof(Want));
		for (int k = 0; k < g->noutputs; k++)
			out[k] = ALL;
		int saves = 0;
		Graph *h = rebuild(&N, g, out, &saves);
		free(out);
		if (!h)
			continue;
		/* the entry keeps its place in the graph list */
		p->graphs.v[g->id] = h;
		p->entries[i].g = h;
		p->entries[i].arg_names = h->input_names;
	}
	free(N.from.v);
	free(N.to.v);
	free(N.wants.v);
}

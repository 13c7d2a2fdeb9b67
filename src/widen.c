/* widen.c - computing on the storage dtypes (f16, bf16, i8, u8, i16, u16).
 *
 * These dtypes are held in memory but never computed in: as PyTorch does on
 * the CPU, an op on f16 or bf16 computes in f32 and rounds its result to
 * nearest even, and an op on a narrow integer computes in i32 and wraps its
 * result to the dtype's width (the same value as wrapping arithmetic in the
 * narrow type, since + - * agree modulo 2^n, and the narrow values fit i32).
 * A reduction or a matmul thus accumulates in f32 and rounds once at the end.
 *
 * This pass rewrites a freshly lowered graph so that only leaves (input,
 * param, state), casts, stores and region calls carry a storage dtype: every
 * other node with a storage operand reads it through a cast to the compute
 * dtype, and a node whose own dtype is a storage one is computed in the
 * compute dtype and cast back. Casts themselves are reduced to the few that
 * kernels implement: storage <-> its compute dtype (f16/bf16 <-> f32,
 * narrow <-> i32); a cast between other pairs goes through them (float to a
 * narrow integer clamps first, so that it saturates as casts to i32 do; f64
 * and integers reach f16/bf16 through f32, as PyTorch's conversions do).
 * So the interpreter's and code generation's kernels never see the new
 * dtypes except in those casts and in moving bytes. */
#include "nestc.h"

#include <stdlib.h>
#include <string.h>

typedef struct Widen {
	Program *p;
	Graph *g;
	Node **out;     /* the new node order */
	int nout, cap;
	Node **map;     /* old node id -> its value in the new graph */
	Node **wide;    /* old node id -> the cast of its value to the compute dtype, made once */
} Widen;

static void emit(Widen *w, Node *n)
{
	if (w->nout == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->out = xrealloc(w->out, (size_t)w->cap * sizeof(Node *));
	}
	w->out[w->nout++] = n;
}

/* A node made by the pass: like node_new, but placed by emit(). */
static Node *mk(Widen *w, Op op, DType dt, const Node *like, Node *in)
{
	Graph tmp = {0};
	Node *n = node_new(w->p, &tmp, op, dt, like->rank, like->shape, like->loc);
	if (in)
		node_add_input(w->p, n, in);
	emit(w, n);
	return n;
}

static Node *cast_to(Widen *w, Node *in, DType dt)
{
	if (in->dtype == dt)
		return in;
	return mk(w, OP_CAST, dt, in, in);
}

/* A 0-d constant of dtype dt. */
static Node *konst(Widen *w, DType dt, double v, const Node *like)
{
	Node *c = mk(w, OP_CONST, dt, like, NULL);
	c->rank = 0;
	c->fval = v;
	return c;
}

/* A cast from in's dtype to dt, through the casts kernels implement. */
static Node *lower_cast(Widen *w, Node *in, DType dt, Node *orig)
{
	DType s = in->dtype;
	if (s == dt)
		return in;
	if (dtype_is_storage(s)) {
		in = cast_to(w, in, dtype_compute(s)); /* exact */
		if (in->dtype == dt)
			return in;
		s = in->dtype;
	}
	if (!dtype_is_storage(dt)) {
		Node *c = mk(w, OP_CAST, dt, orig, in);
		return c;
	}
	DType mid = dtype_compute(dt);
	if (dtype_is_float(dt)) {
		/* to f16 / bf16: from f32 (rounded there if it is not) */
		in = cast_to(w, in, mid);
	} else if (dtype_is_float(s)) {
		/* float to a narrow integer saturates: clamp in the float dtype (NaN
		 * stays NaN, and becomes 0 in the cast to i32), then convert */
		int64_t lo, hi;
		dtype_int_range(dt, &lo, &hi);
		Node *clo = konst(w, s, (double)lo, in), *chi = konst(w, s, (double)hi, in);
		Node *m = mk(w, OP_MAX, s, in, in);
		node_add_input(w->p, m, clo);
		Node *n = mk(w, OP_MIN, s, in, m);
		node_add_input(w->p, n, chi);
		in = cast_to(w, n, mid);
	} else {
		/* integers and bools wrap, as C and NumPy convert */
		in = cast_to(w, in, mid);
	}
	return mk(w, OP_CAST, dt, orig, in);
}

/* The value of old node `old` in its compute dtype. */
static Node *wide_input(Widen *w, Node *old)
{
	Node *v = w->map[old->id];
	if (!dtype_is_storage(v->dtype))
		return v;
	if (!w->wide[old->id])
		w->wide[old->id] = cast_to(w, v, dtype_compute(v->dtype));
	return w->wide[old->id];
}

/* Leaves, stores and calls; and a slice, which moves bytes: a slice of a
 * 16-bit state (a cache's first P + T positions) is read as it is, and only
 * it widened, not the whole state (which would read positions not written). */
static int keeps_storage(Op op)
{
	return op == OP_INPUT || op == OP_PARAM || op == OP_STATE || op == OP_STORE || op == OP_CALL || op == OP_RESULT ||
	       op == OP_SLICE;
}

void widen_graph(Program *p, Graph *g)
{
	int any = 0;
	for (int i = 0; i < g->nnodes && !any; i++)
		any = dtype_is_storage(g->nodes[i]->dtype);
	if (!any)
		return;
	Widen w = {.p = p, .g = g};
	w.map = xcalloc((size_t)g->nnodes + 1, sizeof(Node *));
	w.wide = xcalloc((size_t)g->nnodes + 1, sizeof(Node *));
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		if (n->id != i)
			ice("widen_graph: node %d has id %d", i, n->id);
		if (n->op == OP_CAST) {
			w.map[i] = lower_cast(&w, w.map[n->in[0]->id], n->dtype, n);
			continue;
		}
		if (keeps_storage(n->op)) {
			if (n->op == OP_STORE)
				w.wide[n->in[0]->id] = NULL; /* later reads see what it wrote */
			for (int k = 0; k < n->nin; k++)
				n->in[k] = w.map[n->in[k]->id];
			/* a store's target is a state or a region input, never widened;
			 * its value has the target's dtype */
			emit(&w, n);
			w.map[i] = n;
			continue;
		}
		for (int k = 0; k < n->nin; k++)
			n->in[k] = wide_input(&w, n->in[k]);
		DType dt = n->dtype;
		if (!dtype_is_storage(dt)) {
			emit(&w, n);
			w.map[i] = n;
			continue;
		}
		n->dtype = dtype_compute(dt);
		emit(&w, n);
		Node *c = mk(&w, OP_CAST, dt, n, n);
		w.map[i] = c; /* readers widen the rounded value again */
	}
	for (int i = 0; i < g->noutputs; i++)
		g->outputs[i] = w.map[g->outputs[i]->id];
	for (int i = 0; i < g->ninputs; i++)
		g->inputs[i] = w.map[g->inputs[i]->id];
	g->nodes = arena_alloc(p->arena, (size_t)(w.nout + 1) * sizeof(Node *));
	memcpy(g->nodes, w.out, (size_t)w.nout * sizeof(Node *));
	g->nnodes = g->cap = w.nout;
	for (int i = 0; i < w.nout; i++)
		g->nodes[i]->id = i;
	free(w.out);
	free(w.map);
	free(w.wide);
}

/* plan.c - the buffer plan of a graph: every intermediate tensor gets a static
 * offset in the workspace, reused once its last reader has run (first fit over
 * live ranges). Reshapes alias their input; results are computed straight into
 * the caller's buffers where nothing else needs them. */
#include "nestc.h"

#include <stdlib.h>
#include <string.h>

typedef struct Block {
	int64_t off, size;
	int until;   /* last node (id) that reads it */
} Block;

static int64_t align64(int64_t n)
{
	return (n + 63) & ~(int64_t)63;
}

Plan *plan_graph(Program *p, Graph *g, const int64_t *max_numel)
{
	Arena *a = p->arena;
	int n = g->nnodes;
	Plan *pl = arena_alloc(a, sizeof *pl);
	pl->g = g;
	pl->kind = arena_alloc(a, (size_t)(n + 1) * sizeof(BufKind));
	pl->index = arena_alloc(a, (size_t)(n + 1) * sizeof(int64_t));
	pl->offset = arena_alloc(a, (size_t)(n + 1) * sizeof(int64_t));
	pl->copy_out = arena_alloc(a, (size_t)(g->noutputs + 1) * sizeof(int));

	/* storage roots: a reshape shares its input's storage */
	int *root = xcalloc((size_t)n + 1, sizeof(int));
	int *last = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		root[i] = x->op == OP_RESHAPE ? root[x->in[0]->id] : i;
		last[i] = i;
	}
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		for (int k = 0; k < x->nin; k++) {
			int r = root[x->in[k]->id];
			if (last[r] < i)
				last[r] = i;
		}
	}
	/* outputs live to the end; each output computed in place at most once */
	int *out_of = xmalloc(((size_t)n + 1) * sizeof(int));
	for (int i = 0; i < n; i++)
		out_of[i] = -1;
	for (int j = 0; j < g->noutputs; j++) {
		Node *o = g->outputs[j];
		int r = root[o->id];
		last[r] = n;
		Op op = g->nodes[r]->op;
		int computed = op != OP_INPUT && op != OP_PARAM && op != OP_CALL;
		if (computed && r == o->id && out_of[r] < 0)
			out_of[r] = j;
		else
			pl->copy_out[j] = 1;
	}

	Block *blocks = NULL;
	int nblocks = 0, cap = 0;
	int64_t top = 0;
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		/* free what died before this node; a call's results are written while
		 * the call still reads its arguments, so they count from the call */
		int t = x->op == OP_RESULT ? x->in[0]->id : i;
		for (int b = 0; b < nblocks; b++)
			if (blocks[b].until < t && blocks[b].size > 0)
				blocks[b].size = -blocks[b].size; /* free: negative size keeps the slot */
		switch (x->op) {
		case OP_INPUT:
			pl->kind[i] = BUF_INPUT;
			pl->index[i] = x->a[0];
			continue;
		case OP_PARAM:
			pl->kind[i] = BUF_PARAM;
			pl->index[i] = x->a[0];
			continue;
		case OP_CALL:
			pl->kind[i] = BUF_NONE;
			continue;
		case OP_RESHAPE:
			pl->kind[i] = BUF_ALIAS;
			pl->index[i] = root[i];
			continue;
		default:
			break;
		}
		if (out_of[i] >= 0) {
			pl->kind[i] = BUF_OUTPUT;
			pl->index[i] = out_of[i];
			continue;
		}
		int64_t numel = max_numel ? max_numel[i] : shape_numel(x->rank, x->shape);
		int64_t size = align64(numel * dtype_size(x->dtype));
		if (size == 0)
			size = 64;
		pl->sum_live += size;
		pl->kind[i] = BUF_WS;
		/* first fit among free blocks, splitting is not worth it here */
		int found = -1;
		for (int b = 0; b < nblocks; b++)
			if (blocks[b].size < 0 && -blocks[b].size >= size) {
				found = b;
				break;
			}
		if (found >= 0) {
			blocks[found].size = -blocks[found].size;
			blocks[found].until = last[i];
			pl->offset[i] = blocks[found].off;
			continue;
		}
		if (nblocks == cap) {
			cap = cap ? cap * 2 : 16;
			blocks = xrealloc(blocks, (size_t)cap * sizeof(Block));
		}
		blocks[nblocks].off = top;
		blocks[nblocks].size = size;
		blocks[nblocks].until = last[i];
		nblocks++;
		pl->offset[i] = top;
		top += size;
	}
	pl->ws_size = top;
	free(blocks);
	free(root);
	free(last);
	free(out_of);
	return pl;
}

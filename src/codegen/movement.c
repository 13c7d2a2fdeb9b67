/* movement.c - kernels that move elements without arithmetic: fill and
 * arange, strided copies (transpose, slice, expand), concat, gather and
 * memmove. */
#include "gen.h"

#include <string.h>

void k_fill(Fn *F, Node *n)
{
	Gen *G = F->gen;
	Loop L;
	LLVMValueRef i = loop_to(F, &L, numelv(F, n));
	LLVMValueRef v = n->op == OP_ARANGE ? i : const_value(G, n);
	store_at(F, n, i, v);
	loop_end(F, &L);
}

/* The elements of the last axes of n, from axis *from on, that are one
 * contiguous run in both the source (strides st[0]) and n (st[1]); static
 * shapes only. */
static int64_t tail_run(Fn *F, Node *n, LLVMValueRef st[2][MAX_RANK], int *from)
{
	int64_t run = 1;
	int k = n->rank;
	for (; k > 0 && field_static(F, n, k - 1); k--) {
		LLVMValueRef a = st[0][k - 1], b = st[1][k - 1];
		if (!llvm.LLVMIsAConstantInt(a) || !llvm.LLVMIsAConstantInt(b) || llvm.LLVMConstIntGetSExtValue(a) != run ||
		    llvm.LLVMConstIntGetSExtValue(b) != run)
			break;
		run *= n->shape[k - 1];
	}
	*from = k;
	return run;
}

/* Runs of at least this many bytes are copied by memmove: LLVM unrolled a
 * constant loop of 9,408 floats (a slice of Swin-T's shifted windows) into
 * a block of 4,000 instructions whose scheduling took seconds. */
#define COPY_RUN_BYTES 1024

static void k_copy_strided(Fn *F, Node *n, Node *src, LLVMValueRef *sst, LLVMValueRef base)
{
	Gen *G = F->gen;
	LLVMValueRef st[2][MAX_RANK], off[2];
	memcpy(st[0], sst, sizeof st[0]);
	strides(F, n, n->rank, NULL, st[1]);
	int from;
	int64_t run = tail_run(F, n, st, &from);
	if (run * dtype_size(n->dtype) >= COPY_RUN_BYTES && (from > 0 || !F->par_lo)) {
		Loop L[MAX_RANK];
		off[0] = base ? base : ci64(G, 0);
		off[1] = ci64(G, 0);
		for (int k = 0; k < from; k++) {
			LLVMValueRef i = k == 0 && F->par_lo ? loop_begin(F, &L[k], F->par_lo, F->par_hi)
			                                     : loop_to(F, &L[k], dimv(F, n, k));
			off[0] = elem_off(G, off[0], i, st[0][k]);
			off[1] = elem_off(G, off[1], i, st[1][k]);
		}
		LLVMTypeRef et = elem_t(G, n->dtype);
		memcpy_bytes(F, llvm.LLVMBuildGEP2(G->B, et, nptr(F, n), &off[1], 1, ""),
		             llvm.LLVMBuildGEP2(G->B, et, nptr(F, src), &off[0], 1, ""), ci64(G, run * dtype_size(n->dtype)));
		for (int k = from - 1; k >= 0; k--)
			loop_end(F, &L[k]);
		return;
	}
	Nest N;
	nest_begin_runs(F, &N, n, 2, st, off);
	LLVMValueRef o = base ? iadd(G, off[0], base) : off[0];
	store_at(F, n, off[1], load_at(F, src, o));
	nest_end(F, &N);
}

/* The vw rows v[0..vw) transposed in registers: round b (b = 1, 2, 4, ...)
 * swaps bit b of the row index with bit b of the lane index, one shuffle of
 * two vectors per row (4 rounds of 16 for a 16x16 block of f32). */
static void transpose_regs(Gen *G, LLVMValueRef *v, int vw)
{
	for (int b = 1; b < vw; b *= 2) {
		LLVMValueRef lo[64], hi[64];
		for (int l = 0; l < vw; l++) {
			lo[l] = ci32(G, (l & b) ? vw + (l & ~b) : l);
			hi[l] = ci32(G, (l & b) ? vw + l : (l | b));
		}
		LLVMValueRef mlo = llvm.LLVMConstVector(lo, (unsigned)vw), mhi = llvm.LLVMConstVector(hi, (unsigned)vw);
		for (int k = 0; k < vw; k++) {
			if (k & b)
				continue;
			LLVMValueRef a = v[k], c = v[k | b];
			v[k] = llvm.LLVMBuildShuffleVector(G->B, a, c, mlo, "");
			v[k | b] = llvm.LLVMBuildShuffleVector(G->B, a, c, mhi, "");
		}
	}
}

/* out[ob + j * osj + i] = x[ib + i * sti + j] for i in [i0, i1), j in [j0, j1) */
static void copy_block_scalar(Fn *F, Node *n, Node *x, LLVMValueRef ib, LLVMValueRef ob, LLVMValueRef sti,
                              LLVMValueRef osj, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0, LLVMValueRef j1)
{
	Gen *G = F->gen;
	Loop lj, li;
	LLVMValueRef j = loop_begin(F, &lj, j0, j1);
	LLVMValueRef i = loop_begin(F, &li, i0, i1);
	store_at(F, n, iadd(G, elem_off(G, ob, j, osj), i), load_at(F, x, iadd(G, elem_off(G, ib, i, sti), j)));
	loop_end(F, &li);
	loop_end(F, &lj);
}

/* A transpose that takes the input's contiguous axis away from the last
 * (a key matrix turned for q @ k^T: [B, S, H, D] -> [B, H, D, S]). An
 * element at a time, each read was a cache line of its own, 0.9 ns an
 * element; here blocks of vw x vw are read as vw vectors along the input's
 * rows, transposed in registers and written as vw vectors along the
 * output's, the edges element by element. Returns 0 where it does not apply
 * (elements not of 4 bytes, or the last axis kept last). */
static int transpose_blocked(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	int r = n->rank, vw = G->vbytes / 4;
	if (r < 2 || dtype_size(n->dtype) != 4 || vw < 4 || n->a[r - 1] == x->rank - 1)
		return 0;
	int q = 0; /* the output axis the input's contiguous axis becomes */
	while (n->a[q] != x->rank - 1)
		q++;
	LLVMValueRef xs[MAX_RANK], st[MAX_RANK], os[MAX_RANK];
	strides(F, x, x->rank, NULL, xs);
	for (int k = 0; k < r; k++)
		st[k] = xs[n->a[k]];
	strides(F, n, r, NULL, os);
	Loop L[MAX_RANK];
	int nl = 0;
	LLVMValueRef ib = ci64(G, 0), ob = ci64(G, 0);
	for (int k = 0; k < r - 1; k++) {
		if (k == q)
			continue;
		LLVMValueRef idx = k == 0 && F->par_lo ? loop_begin(F, &L[nl++], F->par_lo, F->par_hi)
		                                      : loop_to(F, &L[nl++], dimv(F, n, k));
		ib = elem_off(G, ib, idx, st[k]);
		ob = elem_off(G, ob, idx, os[k]);
	}
	/* j along output axis q (input stride 1), i along the output's last (output stride 1) */
	LLVMValueRef j0 = q == 0 && F->par_lo ? F->par_lo : ci64(G, 0);
	LLVMValueRef j1 = q == 0 && F->par_lo ? F->par_hi : dimv(F, n, q);
	LLVMValueRef ni = dimv(F, n, r - 1), sti = st[r - 1], osj = os[q];
	LLVMValueRef w = ci64(G, vw);
	LLVMValueRef jfull = iadd(G, j0, imul(G, idiv(G, isub(G, j1, j0), w), w));
	LLVMValueRef ifull = imul(G, idiv(G, ni, w), w);
	LLVMTypeRef et = elem_t(G, n->dtype), vt = llvm.LLVMVectorType(et, (unsigned)vw), vpt = llvm.LLVMPointerType(vt, 0);
	Loop lj, li;
	LLVMValueRef bj = loop_to(F, &lj, idiv(G, isub(G, jfull, j0), w));
	LLVMValueRef j = elem_off(G, j0, bj, w);
	LLVMValueRef bi = loop_to(F, &li, idiv(G, ifull, w));
	LLVMValueRef i = imul(G, bi, w);
	LLVMValueRef v[64];
	for (int k = 0; k < vw; k++) {
		LLVMValueRef off = iadd(G, elem_off(G, ib, iadd(G, i, ci64(G, k)), sti), j);
		LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, nptr(F, x), &off, 1, "");
		v[k] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, vpt, ""), "");
		llvm.LLVMSetAlignment(v[k], 4);
	}
	transpose_regs(G, v, vw);
	for (int k = 0; k < vw; k++) {
		LLVMValueRef off = iadd(G, elem_off(G, ob, iadd(G, j, ci64(G, k)), osj), i);
		LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, nptr(F, n), &off, 1, "");
		llvm.LLVMSetAlignment(llvm.LLVMBuildStore(B, v[k], llvm.LLVMBuildPointerCast(B, p, vpt, "")), 4);
	}
	loop_end(F, &li);
	loop_end(F, &lj);
	/* the last columns of every row, then the last rows of the blocks' columns */
	copy_block_scalar(F, n, x, ib, ob, sti, osj, ifull, ni, j0, j1);
	copy_block_scalar(F, n, x, ib, ob, sti, osj, ci64(G, 0), ifull, jfull, j1);
	for (int k = nl - 1; k >= 0; k--)
		loop_end(F, &L[k]);
	return 1;
}

void k_transpose(Fn *F, Node *n)
{
	if (transpose_blocked(F, n))
		return;
	Node *x = n->in[0];
	LLVMValueRef xs[MAX_RANK], st[MAX_RANK];
	strides(F, x, x->rank, NULL, xs);
	for (int k = 0; k < n->rank; k++)
		st[k] = xs[n->a[k]];
	k_copy_strided(F, n, x, st, NULL);
}

void k_slice(Fn *F, Node *n)
{
	Gen *G = F->gen;
	Node *x = n->in[0];
	LLVMValueRef xs[MAX_RANK];
	strides(F, x, x->rank, NULL, xs);
	LLVMValueRef base = ci64(G, 0);
	for (int k = 0; k < x->rank; k++)
		base = elem_off(G, base, attrv(F, n, k), xs[k]);
	k_copy_strided(F, n, x, xs, base);
}

/* store: the value (in[1], shaped as n) written into the target (in[0]) in
 * place, from the starts a[k] on. The loops over axes [0, rank) of the
 * value, axis 0 from lo to hi; strides st[0] the value's, st[1] the
 * target's, base the target's start. */
static void store_nest(Fn *F, Node *t, Node *v, int rank, LLVMValueRef *dims, LLVMValueRef st[2][MAX_RANK],
                       LLVMValueRef base, LLVMValueRef lo, LLVMValueRef hi)
{
	Gen *G = F->gen;
	Loop L[MAX_RANK];
	LLVMValueRef off[2] = {ci64(G, 0), base};
	for (int k = 0; k < rank; k++) {
		LLVMValueRef i = k == 0 ? loop_begin(F, &L[k], lo, hi) : loop_to(F, &L[k], dims[k]);
		off[0] = elem_off(G, off[0], i, st[0][k]);
		off[1] = elem_off(G, off[1], i, st[1][k]);
	}
	store_at(F, t, off[1], load_at(F, v, off[0]));
	for (int k = rank - 1; k >= 0; k--)
		loop_end(F, &L[k]);
}

/* A store of many short runs (a decode step's key, written as a column of
 * the transposed cache: 768 runs of one float, a cache line each) waits on a
 * miss a run, and one core keeps only a few in flight (17-25 us a layer):
 * with 256 runs or more, or 32768 elements, its axis 0 is split over the
 * pool, where the cores' misses overlap. Everything the tasks need is
 * computed here and sent along. */
#define STORE_PAR_RUNS 256
#define STORE_PAR_ELEMS 32768

void k_store(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *t = n->in[0], *v = n->in[1];
	int rank = n->rank;
	LLVMValueRef st[2][MAX_RANK], dims[MAX_RANK];
	strides(F, v, v->rank, NULL, st[0]);
	strides(F, t, t->rank, NULL, st[1]);
	LLVMValueRef base = ci64(G, 0);
	for (int k = 0; k < t->rank; k++)
		base = elem_off(G, base, attrv(F, n, k), st[1][k]);
	for (int k = 0; k < rank; k++)
		dims[k] = dimv(F, n, k);
	int may = rank >= 2 && !F->par_lo;
	if (may && !node_dynamic(F, n)) {
		int64_t last = n->shape[rank - 1], numel = shape_numel(rank, n->shape);
		may = numel > 0 && n->shape[0] > 1 &&
		      ((last * dtype_size(n->dtype) < 64 && numel / last >= STORE_PAR_RUNS) || numel >= STORE_PAR_ELEMS);
	}
	if (!may) {
		store_nest(F, t, v, rank, dims, st, base, ci64(G, 0), dims[0]);
		return;
	}
	/* on the pool when big, a run of axis 0 a task (up to 16); else here */
	LLVMValueRef numel = numelv(F, n), last = dims[rank - 1];
	LLVMValueRef lastb = imul(G, last, ci64(G, dtype_size(n->dtype)));
	LLVMValueRef runs = idiv(G, numel, llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, last, ci64(G, 1), ""),
	                                                      ci64(G, 1), last, ""));
	LLVMValueRef short_runs = llvm.LLVMBuildAnd(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, lastb, ci64(G, 64), ""),
	                                           llvm.LLVMBuildICmp(B, LLVMIntSGE, runs, ci64(G, STORE_PAR_RUNS), ""), "");
	LLVMValueRef big = llvm.LLVMBuildOr(B, short_runs,
	                                    llvm.LLVMBuildICmp(B, LLVMIntSGE, numel, ci64(G, STORE_PAR_ELEMS), ""), "");
	LLVMBasicBlockRef pool = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "storepool");
	LLVMBasicBlockRef here = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "storehere");
	LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "storedone");
	llvm.LLVMBuildCondBr(B, big, pool, here);
	llvm.LLVMPositionBuilderAtEnd(B, here);
	store_nest(F, t, v, rank, dims, st, base, ci64(G, 0), dims[0]);
	llvm.LLVMBuildBr(B, done);
	llvm.LLVMPositionBuilderAtEnd(B, pool);
	LLVMValueRef sixteen = ci64(G, 16);
	LLVMValueRef ntasks = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, dims[0], sixteen, ""), dims[0], sixteen, "");
	LLVMValueRef chunk = idiv(G, iadd(G, dims[0], isub(G, ntasks, ci64(G, 1))), ntasks);
	chunk = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, chunk, ci64(G, 1), ""), ci64(G, 1), chunk, "");
	ntasks = idiv(G, iadd(G, dims[0], isub(G, chunk, ci64(G, 1))), chunk);
	/* t, v, base, chunk, then per axis: its size and both strides */
	LLVMValueRef vals[4 + 3 * MAX_RANK], got[4 + 3 * MAX_RANK];
	vals[0] = llvm.LLVMBuildPtrToInt(B, nptr(F, t), G->i64, "");
	vals[1] = llvm.LLVMBuildPtrToInt(B, nptr(F, v), G->i64, "");
	vals[2] = base;
	vals[3] = chunk;
	for (int k = 0; k < rank; k++) {
		vals[4 + 3 * k] = dims[k];
		vals[5 + 3 * k] = st[0][k];
		vals[6 + 3 * k] = st[1][k];
	}
	Fn T;
	Task tk = task_begin(F, &T, "store", vals, 4 + 3 * rank, got);
	T.ptr[t->id] = llvm.LLVMBuildIntToPtr(B, got[0], llvm.LLVMPointerType(elem_t(G, t->dtype), 0), "t");
	T.ptr[v->id] = llvm.LLVMBuildIntToPtr(B, got[1], llvm.LLVMPointerType(elem_t(G, v->dtype), 0), "v");
	LLVMValueRef tdims[MAX_RANK], tst[2][MAX_RANK];
	for (int k = 0; k < rank; k++) {
		tdims[k] = got[4 + 3 * k];
		tst[0][k] = got[5 + 3 * k];
		tst[1][k] = got[6 + 3 * k];
	}
	LLVMValueRef lo = imul(G, llvm.LLVMGetParam(tk.fn, 1), got[3]);
	LLVMValueRef hi = imul(G, llvm.LLVMGetParam(tk.fn, 2), got[3]);
	hi = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, hi, tdims[0], ""), hi, tdims[0], "");
	store_nest(&T, t, v, rank, tdims, tst, got[2], lo, hi);
	task_end(F, &T, &tk, ntasks);
	llvm.LLVMBuildBr(B, done);
	llvm.LLVMPositionBuilderAtEnd(B, done);
}

void k_expand(Fn *F, Node *n)
{
	LLVMValueRef st[MAX_RANK];
	strides(F, n->in[0], n->rank, n, st);
	k_copy_strided(F, n, n->in[0], st, NULL);
}

/* Is x stored at byte `at` of concat n's storage (plan.c placed it there)? */
static int in_place_at(const Plan *pl, Node *n, Node *x, int64_t at)
{
	int r = x->id;
	if (pl->kind[r] == BUF_ALIAS)
		r = (int)pl->index[r];
	return pl->kind[r] == BUF_WS && pl->kind[n->id] == BUF_WS && pl->offset[r] == pl->offset[n->id] + at;
}

/* Every node is stored contiguous, so along axis ax each input is `outer`
 * runs of its own inner block, which land side by side in the result's:
 * one memmove a run (outer is 1 on a batch-1 channel concat). Small runs go
 * element by element: a call each would cost more than the copy. The
 * copies keep the entry function small: DenseNet's blocks concatenate up
 * to 48 tensors at a time, and a loop nest per input made 45,000 lines of
 * IR that took a minute and a half to optimise. */
void k_concat(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int ax = (int)n->a[0];
	int64_t inner_min = INT64_MAX;
	for (int j = 0; j < n->nin; j++) {
		int64_t e = 1;
		for (int k = ax; k < n->rank; k++)
			/* equivalent mutant [index]: which of the two paths copies a
			 * concat is a matter of speed; both copy the same elements */
			e = field_static(F, n->in[j], k) ? e * n->in[j]->shape[k] : 0;
		inner_min = e < inner_min ? e : inner_min;
	}
	LLVMValueRef outer = ci64(G, 1), row = ci64(G, 1);
	for (int k = 0; k < ax; k++)
		outer = imul(G, outer, dimv(F, n, k));
	for (int k = ax; k < n->rank; k++)
		row = imul(G, row, dimv(F, n, k));
	LLVMTypeRef et = elem_t(G, n->dtype);
	LLVMValueRef esz = ci64(G, dtype_size(n->dtype));
	LLVMValueRef at = ci64(G, 0); /* elements of a result row before input j's */
	int64_t at_bytes = 0;
	for (int j = 0; j < n->nin; j++) {
		Node *x = n->in[j];
		LLVMValueRef inner = ci64(G, 1);
		for (int k = ax; k < x->rank; k++)
			inner = imul(G, inner, dimv(F, x, k));
		/* computed in place already (plan.c's concat_in_place) */
		int in_place = in_place_at(F->plan, n, x, at_bytes);
		if (!node_dynamic(F, n))
			at_bytes += shape_numel(x->rank, x->shape) * dtype_size(x->dtype);
		if (in_place) {
			at = iadd(G, at, inner);
			continue;
		}
		if (inner_min >= 16) {
			int one = llvm.LLVMIsAConstantInt(outer) && llvm.LLVMConstIntGetSExtValue(outer) == 1;
			Loop lo;
			LLVMValueRef i = one ? ci64(G, 0) : loop_to(F, &lo, outer);
			LLVMValueRef so = imul(G, i, inner), doff = iadd(G, imul(G, i, row), at);
			memcpy_bytes(F, llvm.LLVMBuildGEP2(B, et, nptr(F, n), &doff, 1, ""),
			             llvm.LLVMBuildGEP2(B, et, nptr(F, x), &so, 1, ""), imul(G, inner, esz));
			if (!one)
				loop_end(F, &lo);
		} else {
			LLVMValueRef st[2][MAX_RANK], off[2], os[MAX_RANK];
			strides(F, n, n->rank, NULL, os);
			strides(F, x, x->rank, NULL, st[0]);
			memcpy(st[1], os, sizeof os);
			Nest N;
			nest_begin(F, &N, x, 2, st, off);
			store_at(F, n, iadd(G, off[1], at), load_at(F, x, off[0]));
			nest_end(F, &N);
		}
		at = iadd(G, at, inner);
	}
}

/* Record "WHERE: gather index V out of range [0, ROWS)" and return its -1. */
static LLVMValueRef gather_oob(Fn *F, Node *n, LLVMValueRef v, LLVMValueRef rows)
{
	Gen *G = F->gen;
	LLVMTypeRef at[4] = {G->i8p, G->i64, G->i64, G->i8p};
	LLVMValueRef av[4] = {F->ctx, v, rows, source_where(G, n)};
	return call(G, "nestrt_gather_oob_at", G->i32, at, av, 4);
}

/* index i of idx as an i64 */
static LLVMValueRef gather_index(Fn *F, Node *idx, LLVMValueRef i)
{
	LLVMValueRef v = load_at(F, idx, i);
	if (idx->dtype == DT_I32)
		v = llvm.LLVMBuildSExt(F->gen->B, v, F->gen->i64, "");
	return v;
}

/* Can the table of a gather be a weight held only packed? A float matrix
 * that may be a bound param (a param, or an argument). The pack plan
 * (matmul.c) says so with a GATHER_REC; k_gather asks at run time. */
int gather_packed_table(Node *tab)
{
	return (tab->op == OP_PARAM || tab->op == OP_INPUT) && tab->rank == 2 &&
	       (tab->dtype == DT_F32 || tab->dtype == DT_F64);
}

/* Rows idx of a [rows, cols] matrix out of its packed copy pk (nestrt.h's
 * panel layout; lay = {wide, transposed}): transposed (the copy made for
 * x @ transpose(tab, [1, 0])), row v is column v % wide of panel v / wide,
 * elements wide apart; else (for tab @ y) row v is row v of every panel. */
static void gather_from_panels(Fn *F, Node *n, Node *idx, LLVMValueRef pk, LLVMValueRef lay, LLVMValueRef rows,
                               LLVMValueRef cols)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype);
	LLVMValueRef one = ci64(G, 1);
	LLVMValueRef wide = llvm.LLVMBuildLoad2(B, G->i64, lay, "wide");
	LLVMValueRef trans = llvm.LLVMBuildLoad2(B, G->i64, llvm.LLVMBuildGEP2(B, G->i64, lay, &one, 1, ""), "trans");
	LLVMValueRef p = llvm.LLVMBuildPointerCast(B, pk, llvm.LLVMPointerType(et, 0), "");
	LLVMBasicBlockRef tb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gathertrans");
	LLVMBasicBlockRef nb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherrows");
	LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherpanels");
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntNE, trans, ci64(G, 0), ""), tb, nb);
	Loop li, lj, lp;
	/* transposed: element j of row v at (v / wide) * cols * wide + v % wide + j * wide */
	llvm.LLVMPositionBuilderAtEnd(B, tb);
	LLVMValueRef i = loop_to(F, &li, numelv(F, idx));
	LLVMValueRef v = gather_index(F, idx, i);
	LLVMValueRef base = iadd(G, imul(G, idiv(G, v, wide), imul(G, cols, wide)), irem(G, v, wide));
	LLVMValueRef dst = imul(G, i, cols);
	LLVMValueRef j = loop_to(F, &lj, cols);
	LLVMValueRef so = elem_off(G, base, j, wide);
	store_at(F, n, iadd(G, dst, j), llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, p, &so, 1, ""), ""));
	loop_end(F, &lj);
	loop_end(F, &li);
	llvm.LLVMBuildBr(B, done);
	/* plain: panel q holds columns q * wide.., row v of it at q * rows * wide + v * wide */
	llvm.LLVMPositionBuilderAtEnd(B, nb);
	i = loop_to(F, &li, numelv(F, idx));
	v = gather_index(F, idx, i);
	dst = imul(G, i, cols);
	LLVMValueRef np = idiv(G, iadd(G, cols, isub(G, wide, one)), wide);
	LLVMValueRef q = loop_to(F, &lp, np);
	LLVMValueRef c0 = imul(G, q, wide);
	LLVMValueRef left = isub(G, cols, c0);
	LLVMValueRef cnt = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, left, wide, ""), left, wide, "");
	LLVMValueRef pb = iadd(G, imul(G, q, imul(G, rows, wide)), imul(G, v, wide));
	j = loop_to(F, &lj, cnt);
	so = iadd(G, pb, j);
	store_at(F, n, iadd(G, dst, iadd(G, c0, j)), llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, p, &so, 1, ""), ""));
	loop_end(F, &lj);
	loop_end(F, &lp);
	loop_end(F, &li);
	llvm.LLVMBuildBr(B, done);
	llvm.LLVMPositionBuilderAtEnd(B, done);
}

/* Where quant byte j of column c is among a block's quants: [j][wide], or
 * in a build for integer dot products (G->dot) [j / 4][wide][4] (nestrt.h's
 * NESTRT_PACK_DOT). */
static LLVMValueRef qbyte_at(Gen *G, LLVMValueRef j, LLVMValueRef c, LLVMValueRef wide)
{
	if (!G->dot)
		return iadd(G, imul(G, j, wide), c);
	LLVMBuilderRef B = G->B;
	LLVMValueRef quad = llvm.LLVMBuildLShr(B, j, ci64(G, 2), "");
	LLVMValueRef lane = llvm.LLVMBuildAnd(B, j, ci64(G, 3), "");
	return iadd(G, imul(G, iadd(G, imul(G, quad, wide), c), ci64(G, 4)), lane);
}

/* Byte i of column c of a panel's block, its bytes from base (a row of
 * `wide` each; q4_k in a build for dot products as qbyte_at lays them), as
 * i32. */
static LLVMValueRef kq_byte(Gen *G, LLVMValueRef pk, LLVMValueRef base, LLVMValueRef c, LLVMValueRef wide, LLVMValueRef i,
                            int dot)
{
	LLVMValueRef off = iadd(G, base, dot ? qbyte_at(G, i, c, wide) : iadd(G, imul(G, i, wide), c));
	return llvm.LLVMBuildZExt(G->B, llvm.LLVMBuildLoad2(G->B, G->i8, llvm.LLVMBuildGEP2(G->B, G->i8, pk, &off, 1, ""), ""),
	                          G->i32, "");
}

/* Element e (0..255) of column c of a q4_k / q6_k super-block at base
 * (nestrt.h's panel layout: its f16 fields a row each, then its bytes a row
 * each), dequantized as ggml's dequantize_row_q4_K / _q6_K. */
static LLVMValueRef kq_element(Gen *G, LLVMValueRef pk, LLVMValueRef base, LLVMValueRef c, LLVMValueRef wide,
                               LLVMValueRef e, int wf)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef i16p = llvm.LLVMPointerType(G->i16, 0);
	LLVMValueRef half[2];
	for (int h = 0; h < (wf == WF_Q4_K ? 2 : 1); h++) {
		LLVMValueRef off = iadd(G, base, imul(G, iadd(G, imul(G, ci64(G, h), wide), c), ci64(G, 2)));
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, G->i16, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, pk, &off, 1, ""), i16p, ""), "");
		llvm.LLVMSetAlignment(x, 1);
		half[h] = widen16(G, x, 0, 0);
	}
	LLVMValueRef c4 = llvm.LLVMConstInt(G->i32, 4, 0), c6 = llvm.LLVMConstInt(G->i32, 6, 0);
	#define I32(v) llvm.LLVMConstInt(G->i32, (v), 0)
	if (wf == WF_Q4_K) {
		int dot = G->dot; /* every q4_k param's copy is for dot products then */
		LLVMValueRef rows = iadd(G, base, imul(G, wide, ci64(G, 4)));
		/* sub-block sb = e / 32: get_scale_min_k4 with both of its cases computed */
		LLVMValueRef sb = idiv(G, e, ci64(G, 32));
		LLVMValueRef lowj = llvm.LLVMBuildICmp(B, LLVMIntSLT, sb, ci64(G, 4), "");
		LLVMValueRef bj = kq_byte(G, pk, rows, c, wide, sb, dot);
		LLVMValueRef bj4 = kq_byte(G, pk, rows, c, wide, iadd(G, sb, ci64(G, 4)), dot);
		LLVMValueRef bjm4 = kq_byte(G, pk, rows, c, wide, llvm.LLVMBuildSelect(B, lowj, sb, isub(G, sb, ci64(G, 4)), ""), dot);
		LLVMValueRef sc = llvm.LLVMBuildSelect(B, lowj, llvm.LLVMBuildAnd(B, bj, I32(63), ""),
		                                       llvm.LLVMBuildOr(B, llvm.LLVMBuildAnd(B, bj4, I32(15), ""),
		                                                        llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, bjm4, c6, ""), c4, ""), ""), "");
		LLVMValueRef m = llvm.LLVMBuildSelect(B, lowj, llvm.LLVMBuildAnd(B, bj4, I32(63), ""),
		                                      llvm.LLVMBuildOr(B, llvm.LLVMBuildLShr(B, bj4, c4, ""),
		                                                       llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, bj, c6, ""), c4, ""), ""), "");
		/* byte 32 (e / 64) + e % 32 of the nibbles, high nibble for e % 64 >= 32 */
		LLVMValueRef row = iadd(G, imul(G, idiv(G, e, ci64(G, 64)), ci64(G, 32)), irem(G, e, ci64(G, 32)));
		LLVMValueRef b = kq_byte(G, pk, rows, c, wide, iadd(G, row, ci64(G, 12)), dot);
		LLVMValueRef hi = llvm.LLVMBuildICmp(B, LLVMIntSGE, irem(G, e, ci64(G, 64)), ci64(G, 32), "");
		LLVMValueRef q = llvm.LLVMBuildSelect(B, hi, llvm.LLVMBuildLShr(B, b, c4, ""), llvm.LLVMBuildAnd(B, b, I32(15), ""), "");
		LLVMValueRef d1 = llvm.LLVMBuildFMul(B, half[0], llvm.LLVMBuildSIToFP(B, sc, G->f32, ""), "");
		LLVMValueRef m1 = llvm.LLVMBuildFMul(B, half[1], llvm.LLVMBuildSIToFP(B, m, G->f32, ""), "");
		return llvm.LLVMBuildFSub(B, llvm.LLVMBuildFMul(B, d1, llvm.LLVMBuildSIToFP(B, q, G->f32, ""), ""), m1, "");
	}
	/* q6_k: e = 128 h + 32 t + l; ql byte 64 h + l + 32 (t & 1) at nibble
	 * 4 (t >> 1), qh byte 128 + 32 h + l at bits 2t, scale 192 + 8 h + l / 16 + 2t */
	LLVMValueRef rows = iadd(G, base, imul(G, wide, ci64(G, 2)));
	LLVMValueRef h = idiv(G, e, ci64(G, 128)), t = irem(G, idiv(G, e, ci64(G, 32)), ci64(G, 4)), l = irem(G, e, ci64(G, 32));
	LLVMValueRef t32 = llvm.LLVMBuildTrunc(B, t, G->i32, "");
	LLVMValueRef qlb = kq_byte(G, pk, rows, c, wide, iadd(G, iadd(G, imul(G, h, ci64(G, 64)), l),
	                                                       imul(G, llvm.LLVMBuildAnd(B, t, ci64(G, 1), ""), ci64(G, 32))), 0);
	LLVMValueRef qhb = kq_byte(G, pk, rows, c, wide, iadd(G, ci64(G, 128), iadd(G, imul(G, h, ci64(G, 32)), l)), 0);
	LLVMValueRef lo = llvm.LLVMBuildAnd(B, llvm.LLVMBuildLShr(B, qlb, llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, t32, I32(1), ""), I32(2), ""), ""), I32(15), "");
	LLVMValueRef hb = llvm.LLVMBuildAnd(B, llvm.LLVMBuildLShr(B, qhb, llvm.LLVMBuildShl(B, t32, I32(1), ""), ""), I32(3), "");
	LLVMValueRef q = llvm.LLVMBuildSub(B, llvm.LLVMBuildOr(B, lo, llvm.LLVMBuildShl(B, hb, c4, ""), ""), I32(32), "");
	LLVMValueRef si = iadd(G, ci64(G, 192), iadd(G, imul(G, h, ci64(G, 8)), iadd(G, idiv(G, l, ci64(G, 16)), imul(G, t, ci64(G, 2)))));
	LLVMValueRef sc = llvm.LLVMBuildSExt(B, llvm.LLVMBuildTrunc(B, kq_byte(G, pk, rows, c, wide, si, 0), G->i8, ""), G->i32, "");
	#undef I32
	LLVMValueRef ds = llvm.LLVMBuildFMul(B, half[0], llvm.LLVMBuildSIToFP(B, sc, G->f32, ""), "");
	return llvm.LLVMBuildFMul(B, ds, llvm.LLVMBuildSIToFP(B, q, G->f32, ""), "");
}

/* Rows idx of a [rows, cols] matrix out of its copy in format wf (nestrt.h:
 * always transposed, row v along its blocks as column v % wide of panel
 * v / wide; lay = {wide, 1}), each element widened or dequantized. */
static void gather_from_format(Fn *F, Node *n, Node *idx, int wf, LLVMValueRef pk, LLVMValueRef lay, LLVMValueRef cols)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMValueRef wide = llvm.LLVMBuildLoad2(B, G->i64, lay, "wide");
	int blk = wformat_block(wf);
	LLVMValueRef bb = ci64(G, wformat_block_bytes(wf));
	/* a panel's bytes: cols / blk rows of wide blocks */
	LLVMValueRef pbytes = imul(G, imul(G, idiv(G, cols, ci64(G, blk)), wide), bb);
	Loop li, lj;
	LLVMValueRef i = loop_to(F, &li, numelv(F, idx));
	LLVMValueRef v = gather_index(F, idx, i);
	LLVMValueRef c = irem(G, v, wide);
	LLVMValueRef panel = imul(G, idiv(G, v, wide), pbytes);
	LLVMValueRef dst = imul(G, i, cols);
	LLVMValueRef j = loop_to(F, &lj, cols);
	LLVMValueRef x;
	if (blk == 1) {
		LLVMValueRef off = iadd(G, panel, imul(G, iadd(G, imul(G, j, wide), c), ci64(G, 2)));
		LLVMValueRef h = llvm.LLVMBuildLoad2(B, G->i16, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, pk, &off, 1, ""),
		                                                                          llvm.LLVMPointerType(G->i16, 0), ""), "");
		llvm.LLVMSetAlignment(h, 1);
		x = widen16(G, h, 0, wf == WF_BF16);
	} else if (blk == 256) {
		x = kq_element(G, pk, iadd(G, panel, imul(G, imul(G, idiv(G, j, ci64(G, 256)), wide), bb)), c, wide,
		               irem(G, j, ci64(G, 256)), wf);
	} else {
		/* block j / 32: its scale at 2c, quant j % 32 of column c after the scales */
		LLVMValueRef base = iadd(G, panel, imul(G, imul(G, idiv(G, j, ci64(G, 32)), wide), bb));
		LLVMValueRef soff = iadd(G, base, imul(G, c, ci64(G, 2)));
		LLVMValueRef h = llvm.LLVMBuildLoad2(B, G->i16, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, pk, &soff, 1, ""),
		                                                                          llvm.LLVMPointerType(G->i16, 0), ""), "");
		llvm.LLVMSetAlignment(h, 1);
		LLVMValueRef d = widen16(G, h, 0, 0);
		LLVMValueRef jj = irem(G, j, ci64(G, 32));
		LLVMValueRef q;
		if (wf == WF_Q8_0) {
			LLVMValueRef qoff = iadd(G, base, iadd(G, imul(G, wide, ci64(G, 2)), qbyte_at(G, jj, c, wide)));
			LLVMValueRef b8 = llvm.LLVMBuildLoad2(B, G->i8, llvm.LLVMBuildGEP2(B, G->i8, pk, &qoff, 1, ""), "");
			if (G->dot) /* stored plus 128 */
				b8 = llvm.LLVMBuildXor(B, b8, llvm.LLVMConstInt(G->i8, 0x80, 0), "");
			q = llvm.LLVMBuildSExt(B, b8, G->i32, "");
		} else {
			LLVMValueRef hi = llvm.LLVMBuildICmp(B, LLVMIntSGE, jj, ci64(G, 16), "");
			LLVMValueRef row = irem(G, jj, ci64(G, 16));
			LLVMValueRef qoff = iadd(G, base, iadd(G, imul(G, wide, ci64(G, 2)), qbyte_at(G, row, c, wide)));
			LLVMValueRef b8 = llvm.LLVMBuildZExt(B, llvm.LLVMBuildLoad2(B, G->i8, llvm.LLVMBuildGEP2(B, G->i8, pk, &qoff, 1, ""), ""),
			                                     G->i32, "");
			LLVMValueRef nib = llvm.LLVMBuildSelect(B, hi, llvm.LLVMBuildLShr(B, b8, llvm.LLVMConstInt(G->i32, 4, 0), ""),
			                                        llvm.LLVMBuildAnd(B, b8, llvm.LLVMConstInt(G->i32, 15, 0), ""), "");
			q = llvm.LLVMBuildSub(B, nib, llvm.LLVMConstInt(G->i32, 8, 0), "");
		}
		x = llvm.LLVMBuildFMul(B, d, llvm.LLVMBuildSIToFP(B, q, G->f32, ""), "");
	}
	store_at(F, n, iadd(G, dst, j), x);
	loop_end(F, &lj);
	loop_end(F, &li);
}

void k_gather(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *tab = n->in[0], *idx = n->in[1];
	LLVMValueRef rows = dimv(F, tab, 0);
	LLVMValueRef row = ci64(G, 1);
	for (int k = 1; k < tab->rank; k++)
		row = imul(G, row, dimv(F, tab, k));
	/* every index is checked before any row is written: a failed call leaves
	 * its result untouched, and the copy loop needs no check of its own */
	Loop lc, li, lj;
	LLVMValueRef c = loop_to(F, &lc, numelv(F, idx));
	LLVMValueRef cv = gather_index(F, idx, c);
	LLVMValueRef cbad = llvm.LLVMBuildICmp(B, LLVMIntUGE, cv, rows, "");
	LLVMBasicBlockRef cok = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "indexok");
	LLVMBasicBlockRef cfail = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "indexbad");
	llvm.LLVMBuildCondBr(B, cbad, cfail, cok);
	llvm.LLVMPositionBuilderAtEnd(B, cfail);
	llvm.LLVMBuildRet(B, gather_oob(F, n, cv, rows));
	llvm.LLVMPositionBuilderAtEnd(B, cok);
	loop_end(F, &lc);
	/* a weight table the instance holds only packed (issue #14): its rows
	 * out of the panels */
	LLVMBasicBlockRef join = NULL;
	if (gather_packed_table(tab)) {
		LLVMValueRef lay = entry_alloca(F, llvm.LLVMArrayType(G->i64, 2), "packlayout");
		LLVMValueRef lay0 = llvm.LLVMBuildPointerCast(B, lay, llvm.LLVMPointerType(G->i64, 0), "");
		LLVMTypeRef at[7] = {G->i8p, G->i8p, G->i64, G->i64, G->i32, llvm.LLVMPointerType(G->i64, 0),
		                     llvm.LLVMPointerType(G->i32, 0)};
		LLVMValueRef av[7] = {F->ctx, llvm.LLVMBuildPointerCast(B, nptr(F, tab), G->i8p, ""), rows, row,
		                      ci32(G, tab->dtype == DT_F64 ? 2 : 0), lay0, NULL};
		/* the build holds weights in formats: the copy says which it is in */
		int fmts = G->wfmask && tab->dtype == DT_F32;
		LLVMValueRef fslot = fmts ? entry_alloca(F, G->i32, "pkfmt") : NULL;
		av[6] = fslot;
		LLVMValueRef pk = call(G, fmts ? "nestrt_packed_rows_format" : "nestrt_packed_rows", G->i8p, at, av, fmts ? 7 : 6);
		LLVMBasicBlockRef yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherpacked");
		LLVMBasicBlockRef no = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherplain");
		join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherdone");
		llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntNE, pk, llvm.LLVMConstPointerNull(G->i8p), ""), yes, no);
		llvm.LLVMPositionBuilderAtEnd(B, yes);
		if (fmts) {
			LLVMValueRef fv = llvm.LLVMBuildLoad2(B, G->i32, fslot, "");
			LLVMBasicBlockRef f32b = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherf32");
			LLVMValueRef sw = llvm.LLVMBuildSwitch(B, fv, f32b, WF_COUNT);
			for (int wf = WF_F32 + 1; wf < WF_COUNT; wf++) {
				if (!(G->wfmask >> wf & 1))
					continue;
				LLVMBasicBlockRef fb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "gatherfmt");
				llvm.LLVMAddCase(sw, ci32(G, wf), fb);
				llvm.LLVMPositionBuilderAtEnd(B, fb);
				gather_from_format(F, n, idx, wf, pk, lay0, row);
				llvm.LLVMBuildBr(B, join);
			}
			llvm.LLVMPositionBuilderAtEnd(B, f32b);
		}
		gather_from_panels(F, n, idx, pk, lay0, rows, row);
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, no);
	}
	LLVMValueRef i = loop_to(F, &li, numelv(F, idx));
	LLVMValueRef v = gather_index(F, idx, i);
	LLVMValueRef src = imul(G, v, row), dst = imul(G, i, row);
	if (llvm.LLVMIsAConstantInt(row) && llvm.LLVMConstIntGetSExtValue(row) * dtype_size(n->dtype) >= COPY_RUN_BYTES) {
		LLVMTypeRef et = elem_t(G, n->dtype);
		memcpy_bytes(F, llvm.LLVMBuildGEP2(B, et, nptr(F, n), &dst, 1, ""), llvm.LLVMBuildGEP2(B, et, nptr(F, tab), &src, 1, ""),
		             imul(G, row, ci64(G, dtype_size(n->dtype))));
	} else {
		LLVMValueRef j = loop_to(F, &lj, row);
		store_at(F, n, iadd(G, dst, j), load_at(F, tab, iadd(G, src, j)));
		loop_end(F, &lj);
	}
	loop_end(F, &li);
	if (join) {
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, join);
	}
}

void memcpy_bytes(Fn *F, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef bytes)
{
	Gen *G = F->gen;
	LLVMValueRef d8 = llvm.LLVMBuildPointerCast(G->B, dst, G->i8p, "");
	LLVMValueRef s8 = llvm.LLVMBuildPointerCast(G->B, src, G->i8p, "");
	LLVMTypeRef at[3] = {G->i8p, G->i8p, G->i64};
	LLVMValueRef av[3] = {d8, s8, bytes};
	call(G, "memmove", G->i8p, at, av, 3);
}

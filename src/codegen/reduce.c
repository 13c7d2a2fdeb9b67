/* reduce.c - reductions over axes (sum, mean, amax, amin), argmax, and the
 * row kernels: softmax and log_softmax, layernorm and rmsnorm, with rows
 * reduced in vectors; and the causal mask. */
#include "gen.h"

#include <math.h>

enum { RED_SUM, RED_MAX, RED_SQDEV };
static LLVMValueRef row_reduce(Fn *F, Node *x, LLVMValueRef base, LLVMValueRef len, int kind, LLVMValueRef mean);

/* sum mean amax amin prod over an axis mask: initialise, then fold every input element */
void k_reduce(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = x->dtype;
	int fl = dtype_is_float(dt);
	int64_t mask = n->a[0];
	/* A float sum or mean over the innermost axes (a global average pool, a
	 * squeeze-excite's mean over [H, W]): each result a contiguous row of the
	 * input, summed in vectors (row_reduce). The nest below adds element by
	 * element in order, a chain of dependent adds: 94 us for the mean of a
	 * [1, 672, 14, 14], about 10 times this. */
	int inner = x->rank; /* the first reduced axis, when all after it are */
	while (inner > 0 && (mask >> (inner - 1) & 1))
		inner--;
	if (inner < x->rank && !(mask & (((int64_t)1 << inner) - 1)) && (dt == DT_F32 || dt == DT_F64) &&
	    (n->op == OP_SUM || n->op == OP_MEAN)) {
		LLVMValueRef len = ci64(G, 1);
		for (int k = inner; k < x->rank; k++)
			len = imul(G, len, dimv(F, x, k));
		Loop L;
		LLVMValueRef row = loop_to(F, &L, numelv(F, n));
		LLVMValueRef s = row_reduce(F, x, imul(G, row, len), len, RED_SUM, NULL);
		if (n->op == OP_MEAN)
			s = llvm.LLVMBuildFDiv(B, s, llvm.LLVMBuildSIToFP(B, len, elem_t(G, dt), ""), "");
		store_at(F, n, row, s);
		loop_end(F, &L);
		return;
	}
	LLVMValueRef init;
	if (n->op == OP_SUM || n->op == OP_MEAN || n->op == OP_PROD)
		init = fl ? fconst(G, dt, n->op == OP_PROD) : llvm.LLVMConstInt(elem_t(G, dt), n->op == OP_PROD, 0);
	else if (fl)
		init = fconst(G, dt, n->op == OP_AMAX ? -INFINITY : INFINITY);
	else if (dt == DT_I32)
		init = llvm.LLVMConstInt(G->i32, n->op == OP_AMAX ? (unsigned long long)(uint32_t)INT32_MIN : INT32_MAX, 0);
	else
		init = llvm.LLVMConstInt(G->i64, n->op == OP_AMAX ? (unsigned long long)INT64_MIN : INT64_MAX, 0);
	Loop L;
	LLVMValueRef i = loop_to(F, &L, numelv(F, n));
	store_at(F, n, i, init);
	loop_end(F, &L);
	/* output strides on the input's axes: 0 on the reduced ones */
	LLVMValueRef st[2][MAX_RANK], off[2];
	strides(F, x, x->rank, NULL, st[0]);
	LLVMValueRef s = ci64(G, 1);
	for (int k = x->rank - 1; k >= 0; k--) {
		if (mask & ((int64_t)1 << k)) {
			st[1][k] = ci64(G, 0);
		} else {
			st[1][k] = s;
			s = imul(G, s, dimv(F, x, k));
		}
	}
	Nest N;
	nest_begin(F, &N, x, 2, st, off);
	LLVMValueRef acc = load_at(F, n, off[1]), v = load_at(F, x, off[0]), r;
	if (n->op == OP_SUM || n->op == OP_MEAN)
		r = fl ? llvm.LLVMBuildFAdd(B, acc, v, "") : iadd(G, acc, v);
	else if (n->op == OP_PROD)
		r = fl ? llvm.LLVMBuildFMul(B, acc, v, "") : imul(G, acc, v);
	else
		r = fl ? fmaxmin(G, acc, v, n->op == OP_AMAX) : imaxmin(G, acc, v, n->op == OP_AMAX);
	store_at(F, n, off[1], r);
	nest_end(F, &N);
	if (n->op == OP_MEAN) {
		LLVMValueRef cnt = ci64(G, 1);
		for (int k = 0; k < x->rank; k++)
			if (mask & ((int64_t)1 << k))
				cnt = imul(G, cnt, dimv(F, x, k));
		LLVMValueRef c = llvm.LLVMBuildSIToFP(B, cnt, elem_t(G, dt), "");
		Loop L2;
		LLVMValueRef j = loop_to(F, &L2, numelv(F, n));
		store_at(F, n, j, llvm.LLVMBuildFDiv(B, load_at(F, n, j), c, ""));
		loop_end(F, &L2);
	}
}

/* Views an axis of x as [outer, len, inner]. */
static void axis_split(Fn *F, Node *x, int ax, LLVMValueRef *outer, LLVMValueRef *len, LLVMValueRef *inner)
{
	Gen *G = F->gen;
	*outer = ci64(G, 1);
	*inner = ci64(G, 1);
	for (int k = 0; k < ax; k++)
		*outer = imul(G, *outer, dimv(F, x, k));
	for (int k = ax + 1; k < x->rank; k++)
		*inner = imul(G, *inner, dimv(F, x, k));
	*len = dimv(F, x, ax);
}

void k_argmax(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	int ax = __builtin_ctzll((unsigned long long)n->a[0]);
	int fl = dtype_is_float(x->dtype);
	LLVMValueRef outer, len, inner;
	axis_split(F, x, ax, &outer, &len, &inner);
	LLVMValueRef best = entry_alloca(F, elem_t(G, x->dtype), "best");
	LLVMValueRef besti = entry_alloca(F, G->i64, "besti");
	Loop lo, li, lk;
	LLVMValueRef o = loop_to(F, &lo, outer);
	LLVMValueRef in = loop_to(F, &li, inner);
	LLVMValueRef base = iadd(G, imul(G, imul(G, o, len), inner), in);
	llvm.LLVMBuildStore(B, load_at(F, x, base), best);
	llvm.LLVMBuildStore(B, ci64(G, 0), besti);
	LLVMValueRef k = loop_begin(F, &lk, ci64(G, 1), len);
	LLVMValueRef v = load_at(F, x, elem_off(G, base, k, inner));
	LLVMValueRef cur = llvm.LLVMBuildLoad2(B, elem_t(G, x->dtype), best, "");
	LLVMValueRef take;
	if (fl) {
		/* the first NaN wins, else the first maximum */
		LLVMValueRef curnan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, cur, cur, "");
		LLVMValueRef vnan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, v, v, "");
		LLVMValueRef gt = llvm.LLVMBuildFCmp(B, LLVMRealOGT, v, cur, "");
		take = llvm.LLVMBuildAnd(B, llvm.LLVMBuildNot(B, curnan, ""), llvm.LLVMBuildOr(B, vnan, gt, ""), "");
	} else {
		take = llvm.LLVMBuildICmp(B, LLVMIntSGT, v, cur, "");
	}
	llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, take, v, cur, ""), best);
	llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, take, k, llvm.LLVMBuildLoad2(B, G->i64, besti, ""), ""), besti);
	loop_end(F, &lk);
	store_at(F, n, iadd(G, imul(G, o, inner), in), llvm.LLVMBuildLoad2(B, G->i64, besti, ""));
	loop_end(F, &li);
	loop_end(F, &lo);
}

/* ---- row reductions in vectors ---- */

/* acc folded with x ((x - mean)^2 for RED_SQDEV), vectors or scalars alike */
static LLVMValueRef red_step(Gen *G, int kind, LLVMValueRef acc, LLVMValueRef x, LLVMValueRef mean)
{
	if (kind == RED_SQDEV) {
		x = llvm.LLVMBuildFSub(G->B, x, mean, "");
		x = llvm.LLVMBuildFMul(G->B, x, x, "");
	}
	return kind == RED_MAX ? fmaxmin(G, acc, x, 1) : llvm.LLVMBuildFAdd(G->B, acc, x, "");
}

/* The vw lanes of a folded into one by red_step, in halves (log2 steps: a
 * chain lane after lane was most of a short row's time, softmax over 128
 * keys). */
static LLVMValueRef lanes_fold(Gen *G, int kind, LLVMValueRef a, int vw)
{
	LLVMTypeRef vt = llvm.LLVMTypeOf(a);
	for (int w = vw / 2; w >= 1; w /= 2) {
		LLVMValueRef idx[64];
		for (int l = 0; l < vw; l++)
			idx[l] = ci32(G, (l + w) % vw);
		LLVMValueRef hi = llvm.LLVMBuildShuffleVector(G->B, a, llvm.LLVMGetUndef(vt), llvm.LLVMConstVector(idx, (unsigned)vw), "");
		a = red_step(G, kind, a, hi, NULL);
	}
	return llvm.LLVMBuildExtractElement(G->B, a, ci32(G, 0), "");
}

/* The sum or the maximum (NaN-propagating in the tail only) of x[base + k], k in [0, len)
 * (RED_SQDEV: the sum of (x - mean)^2), a contiguous row. The loop
 * vectoriser keeps an ordered float reduction scalar and LLVM-C before 18
 * cannot set fast-math flags, so this loop is written in vectors: one partial
 * result per lane (sums reassociated, as NumPy's pairwise sums are), folded
 * at the end, then the tail element by element. */
static LLVMValueRef row_reduce(Fn *F, Node *x, LLVMValueRef base, LLVMValueRef len, int kind, LLVMValueRef mean)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	DType dt = x->dtype;
	int vw = G->vbytes / dtype_size(dt);
	LLVMTypeRef t = elem_t(G, dt), vt = llvm.LLVMVectorType(t, (unsigned)vw);
	LLVMValueRef init = fconst(G, dt, kind == RED_MAX ? -INFINITY : 0);
	LLVMValueRef acc = entry_alloca(F, vt, "vacc"), sacc = entry_alloca(F, t, "sacc");
	llvm.LLVMBuildStore(B, splat(G, vt, vw, init), acc);
	LLVMValueRef vmean = kind == RED_SQDEV ? splat(G, vt, vw, mean) : NULL;
	LLVMValueRef nvec = idiv(G, len, ci64(G, vw));
	Loop lv, lt;
	LLVMValueRef i = loop_to(F, &lv, nvec);
	LLVMValueRef off = elem_off(G, base, i, ci64(G, vw));
	LLVMValueRef p = llvm.LLVMBuildGEP2(B, t, nptr(F, x), &off, 1, "");
	LLVMValueRef v = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""), "");
	llvm.LLVMSetAlignment(v, (unsigned)dtype_size(dt));
	LLVMValueRef a = llvm.LLVMBuildLoad2(B, vt, acc, "");
	if (kind == RED_MAX) {
		/* a plain maximum, one instruction on x86 (fmaxmin's NaN rule took
		 * six on the loop's chain); softmax, its only user, needs no NaN
		 * from it: a NaN's exponential makes the sum and the row NaN */
		llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOGT, v, a, ""), v, a, ""), acc);
	} else {
		llvm.LLVMBuildStore(B, red_step(G, kind, a, v, vmean), acc);
	}
	loop_end(F, &lv);
	llvm.LLVMBuildStore(B, lanes_fold(G, kind == RED_SQDEV ? RED_SUM : kind, llvm.LLVMBuildLoad2(B, vt, acc, ""), vw), sacc);
	LLVMValueRef k = loop_begin(F, &lt, imul(G, nvec, ci64(G, vw)), len);
	LLVMValueRef e = load_at(F, x, iadd(G, base, k));
	LLVMValueRef c = llvm.LLVMBuildLoad2(B, t, sacc, "");
	llvm.LLVMBuildStore(B, red_step(G, kind, c, e, mean), sacc);
	loop_end(F, &lt);
	return llvm.LLVMBuildLoad2(B, t, sacc, "");
}

/* softmax of an f32 row [base, base + len) of x into n: the maximum, then
 * the exponentials stored and summed in one pass, then the product with
 * the sum's reciprocal, all in vectors; the row's last elements (fewer than
 * a vector: ViT's 197 keys) by masked loads and stores, where a loop the
 * vectoriser made ran them one by one through the exponential's 30
 * instructions. */
static void softmax_row(Fn *F, Node *n, Node *x, LLVMValueRef base, LLVMValueRef len)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int vw = G->vbytes / 4;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw), vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef zero = llvm.LLVMConstNull(vt);
	LLVMValueRef m = splat(G, vt, vw, row_reduce(F, x, base, len, RED_MAX, NULL));
	LLVMValueRef acc = entry_alloca(F, vt, "esum");
	llvm.LLVMBuildStore(B, zero, acc);
	LLVMValueRef nvec = idiv(G, len, ci64(G, vw)), tail = elem_off(G, base, nvec, ci64(G, vw));
	LLVMValueRef mask = lanes_below(G, vw, isub(G, len, imul(G, nvec, ci64(G, vw))));
#define SM_AT(node, off) llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, nptr(F, node), (LLVMValueRef[]){off}, 1, ""), vpt, "")
	Loop l1, l2;
	LLVMValueRef off = elem_off(G, base, loop_to(F, &l1, nvec), ci64(G, vw));
	LLVMValueRef v = llvm.LLVMBuildLoad2(B, vt, SM_AT(x, off), "");
	llvm.LLVMSetAlignment(v, 4);
	LLVMValueRef e = exp_fast_v(G, llvm.LLVMBuildFSub(B, v, m, ""), vw);
	llvm.LLVMSetAlignment(llvm.LLVMBuildStore(B, e, SM_AT(n, off)), 4);
	llvm.LLVMBuildStore(B, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildLoad2(B, vt, acc, ""), e, ""), acc);
	loop_end(F, &l1);
	v = masked_load(G, vt, SM_AT(x, tail), mask, zero, 4);
	e = exp_fast_v(G, llvm.LLVMBuildFSub(B, v, m, ""), vw);
	masked_store(G, e, SM_AT(n, tail), mask, 4);
	LLVMValueRef s = llvm.LLVMBuildFAdd(B, llvm.LLVMBuildLoad2(B, vt, acc, ""), llvm.LLVMBuildSelect(B, mask, e, zero, ""), "");
	/* times the reciprocal, as PyTorch does: a division per element was a
	 * third of the row's time */
	LLVMValueRef rs = splat(G, vt, vw, llvm.LLVMBuildFDiv(B, fconst(G, DT_F32, 1), lanes_fold(G, RED_SUM, s, vw), ""));
	off = elem_off(G, base, loop_to(F, &l2, nvec), ci64(G, vw));
	v = llvm.LLVMBuildLoad2(B, vt, SM_AT(n, off), "");
	llvm.LLVMSetAlignment(v, 4);
	llvm.LLVMSetAlignment(llvm.LLVMBuildStore(B, llvm.LLVMBuildFMul(B, v, rs, ""), SM_AT(n, off)), 4);
	loop_end(F, &l2);
	v = masked_load(G, vt, SM_AT(n, tail), mask, zero, 4);
	masked_store(G, llvm.LLVMBuildFMul(B, v, rs, ""), SM_AT(n, tail), mask, 4);
#undef SM_AT
}

void k_softmax(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	LLVMValueRef outer, len, inner;
	axis_split(F, x, (int)n->a[0], &outer, &len, &inner);
	LLVMValueRef mx = entry_alloca(F, t, "max"), sum = entry_alloca(F, t, "sum");
	Loop lo, li, l1, l2, l3;
	LLVMValueRef o = F->par_lo ? loop_begin(F, &lo, F->par_lo, F->par_hi) : loop_to(F, &lo, outer);
	LLVMValueRef in = loop_to(F, &li, inner);
	LLVMValueRef base = iadd(G, imul(G, imul(G, o, len), inner), in);
	/* rows along the last axis are contiguous: reductions in vectors */
	int rows = n->a[0] == x->rank - 1;
	LLVMValueRef k, off, m;
	if (rows && n->op == OP_SOFTMAX && dt == DT_F32) {
		softmax_row(F, n, x, base, len);
		loop_end(F, &li);
		loop_end(F, &lo);
		return;
	}
	if (rows) {
		m = row_reduce(F, x, base, len, RED_MAX, NULL);
	} else {
		llvm.LLVMBuildStore(B, fconst(G, dt, -INFINITY), mx);
		k = loop_to(F, &l1, len);
		off = elem_off(G, base, k, inner);
		llvm.LLVMBuildStore(B, fmaxmin(G, llvm.LLVMBuildLoad2(B, t, mx, ""), load_at(F, x, off), 1), mx);
		loop_end(F, &l1);
		m = llvm.LLVMBuildLoad2(B, t, mx, "");
	}
	/* the exponentials first (a loop the vectoriser widens), their sum after */
	Loop l2s;
	k = loop_to(F, &l2, len);
	off = elem_off(G, base, k, inner);
	store_at(F, n, off, exp_fast(G, dt, llvm.LLVMBuildFSub(B, load_at(F, x, off), m, "")));
	loop_end(F, &l2);
	LLVMValueRef s;
	if (rows) {
		s = row_reduce(F, n, base, len, RED_SUM, NULL);
	} else {
		llvm.LLVMBuildStore(B, fconst(G, dt, 0), sum);
		k = loop_to(F, &l2s, len);
		off = elem_off(G, base, k, inner);
		llvm.LLVMBuildStore(B, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildLoad2(B, t, sum, ""), load_at(F, n, off), ""), sum);
		loop_end(F, &l2s);
		s = llvm.LLVMBuildLoad2(B, t, sum, "");
	}
	LLVMValueRef ls = n->op == OP_LOG_SOFTMAX ? math1(G, "llvm.log", dt, s) : NULL;
	/* times the reciprocal, as PyTorch does: a division per element was a
	 * third of the row's time */
	LLVMValueRef rs = llvm.LLVMBuildFDiv(B, fconst(G, dt, 1), s, "");
	k = loop_to(F, &l3, len);
	off = elem_off(G, base, k, inner);
	if (n->op == OP_SOFTMAX)
		store_at(F, n, off, llvm.LLVMBuildFMul(B, load_at(F, n, off), rs, ""));
	else
		store_at(F, n, off, llvm.LLVMBuildFSub(B, llvm.LLVMBuildFSub(B, load_at(F, x, off), m, ""), ls, ""));
	loop_end(F, &l3);
	loop_end(F, &li);
	loop_end(F, &lo);
}

void k_norm(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	int ln = n->op == OP_LAYERNORM;
	LLVMValueRef len = dimv(F, x, x->rank - 1);
	LLVMValueRef rows = ci64(G, 1);
	for (int k = 0; k < x->rank - 1; k++)
		rows = imul(G, rows, dimv(F, x, k));
	LLVMValueRef lenf = llvm.LLVMBuildSIToFP(B, len, t, "");
	Loop lr, l3;
	LLVMValueRef r = F->par_lo ? loop_begin(F, &lr, F->par_lo, F->par_hi) : loop_to(F, &lr, rows);
	LLVMValueRef base = imul(G, r, len);
	LLVMValueRef mean = fconst(G, dt, 0);
	if (ln)
		mean = llvm.LLVMBuildFDiv(B, row_reduce(F, x, base, len, RED_SUM, NULL), lenf, "");
	LLVMValueRef var = llvm.LLVMBuildFDiv(B, row_reduce(F, x, base, len, RED_SQDEV, mean), lenf, "");
	LLVMValueRef k;
	LLVMValueRef inv = llvm.LLVMBuildFDiv(B, fconst(G, dt, 1),
	                                 math1(G, "llvm.sqrt", dt, llvm.LLVMBuildFAdd(B, var, fconst(G, dt, n->fval), "")), "");
	k = loop_to(F, &l3, len);
	LLVMValueRef off = iadd(G, base, k);
	LLVMValueRef y = llvm.LLVMBuildFMul(B, llvm.LLVMBuildFSub(B, load_at(F, x, off), mean, ""), inv, "");
	y = llvm.LLVMBuildFMul(B, y, load_at(F, n->in[1], k), "");
	if (ln)
		y = llvm.LLVMBuildFAdd(B, y, load_at(F, n->in[2], k), "");
	store_at(F, n, off, y);
	loop_end(F, &l3);
	loop_end(F, &lr);
}

void k_causal_mask(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMValueRef st[2][MAX_RANK], off[2];
	strides(F, n->in[0], n->rank, NULL, st[0]);
	strides(F, n, n->rank, NULL, st[1]);
	Nest N;
	nest_begin(F, &N, n, 2, st, off);
	LLVMValueRef above = llvm.LLVMBuildICmp(B, LLVMIntSGT, N.idx[n->rank - 1], iadd(G, N.idx[n->rank - 2], attrv(F, n, 0)), "");
	LLVMValueRef v = llvm.LLVMBuildSelect(B, above, fconst(G, n->dtype, -INFINITY), load_at(F, n->in[0], off[0]), "");
	store_at(F, n, off[1], v);
	nest_end(F, &N);
}

/* group_norm over x viewed as [N, G, R] (builtins.c): the row's mean and
 * variance reduced in vectors as layernorm's, then per channel of the group
 * one scale and shift over its R / (C/G) contiguous elements (a loop the
 * vectoriser widens). Rows split over the pool as layernorm's. */
void k_group_norm(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	LLVMValueRef groups = dimv(F, x, 1), len = dimv(F, x, 2);
	LLVMValueRef cpg = idiv(G, dimv(F, n->in[1], 0), groups);
	LLVMValueRef per = idiv(G, len, cpg); /* elements per channel */
	LLVMValueRef rows = imul(G, dimv(F, x, 0), groups);
	LLVMValueRef lenf = llvm.LLVMBuildSIToFP(B, len, t, "");
	Loop lr, lc, ls;
	LLVMValueRef r = F->par_lo ? loop_begin(F, &lr, F->par_lo, F->par_hi) : loop_to(F, &lr, rows);
	LLVMValueRef base = imul(G, r, len);
	LLVMValueRef mean = llvm.LLVMBuildFDiv(B, row_reduce(F, x, base, len, RED_SUM, NULL), lenf, "");
	LLVMValueRef var = llvm.LLVMBuildFDiv(B, row_reduce(F, x, base, len, RED_SQDEV, mean), lenf, "");
	LLVMValueRef inv = llvm.LLVMBuildFDiv(B, fconst(G, dt, 1),
	                                      math1(G, "llvm.sqrt", dt, llvm.LLVMBuildFAdd(B, var, fconst(G, dt, n->fval), "")), "");
	LLVMValueRef ch0 = imul(G, llvm.LLVMBuildSRem(B, r, groups, ""), cpg);
	LLVMValueRef c = loop_to(F, &lc, cpg);
	LLVMValueRef ch = iadd(G, ch0, c);
	LLVMValueRef scale = llvm.LLVMBuildFMul(B, inv, load_at(F, n->in[1], ch), "");
	LLVMValueRef shift = load_at(F, n->in[2], ch);
	LLVMValueRef cbase = iadd(G, base, imul(G, c, per));
	LLVMValueRef s = loop_to(F, &ls, per);
	LLVMValueRef off = iadd(G, cbase, s);
	LLVMValueRef y = llvm.LLVMBuildFSub(B, load_at(F, x, off), mean, "");
	store_at(F, n, off, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, y, scale, ""), shift, ""));
	loop_end(F, &ls);
	loop_end(F, &lc);
	loop_end(F, &lr);
}

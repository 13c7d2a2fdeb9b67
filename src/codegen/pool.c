/* pool.c - max and average pooling (a row of outputs in registers) and
 * global average pooling; the rows of a pooling computed with the
 * convolution it reads (conv.c: k_conv2d_pool); the strided loads of a row
 * that pooling and conv.c's copies share. */
#include "gen.h"

#include <math.h>

/* A row's output columns ow that read x at ow*sw + off inside [0, W):
 * [lo, hi); and the end hv of those whose vector of sw*vw inputs (the
 * strided loads below) stays in the row as well. */
void row_range(int64_t OW, int64_t W, int64_t sw, int64_t off, int64_t *lo, int64_t *hi, int64_t *hv)
{
	*lo = 0, *hi = OW;
	while (*lo < OW && *lo * sw + off < 0)
		(*lo)++;
	while (*hi > *lo && (*hi - 1) * sw + off >= W)
		(*hi)--;
	*hv = *hi;
	while (*hv > *lo && (*hv - 1) * sw + off + sw - 1 >= W)
		(*hv)--;
}

/* vw elements of x from `at` on, sw apart, as a vector: one load of sw*vw
 * elements and a shuffle (the loop vectoriser makes gathers of them, slow
 * on AMD Zen). With `fill`, the load is masked: element e (at + e, known
 * relative to its row: rel = at - row start) is read when 0 <= rel + e < W,
 * else it is `fill`, its address untouched. */
LLVMValueRef strided_vec_masked(Fn *F, Node *x, LLVMValueRef at, int64_t rel, int64_t W, int64_t sw, int vw,
                                       LLVMValueRef fill)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	unsigned n = (unsigned)(sw * vw), align = (unsigned)dtype_size(x->dtype);
	LLVMTypeRef et = elem_t(G, x->dtype), wt = llvm.LLVMVectorType(et, n);
	LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, nptr(F, x), &at, 1, ""), ld;
	if (fill) {
		LLVMValueRef bits[64], fills[64];
		for (unsigned e = 0; e < n; e++) {
			bits[e] = llvm.LLVMConstInt(G->i1, rel + (int64_t)e >= 0 && rel + (int64_t)e < W, 0);
			fills[e] = fill;
		}
		ld = masked_load(G, wt, p, llvm.LLVMConstVector(bits, n), llvm.LLVMConstVector(fills, n), align);
	} else {
		ld = llvm.LLVMBuildLoad2(B, wt, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(wt, 0), ""), "");
		llvm.LLVMSetAlignment(ld, align);
	}
	if (sw == 1)
		return ld;
	LLVMValueRef mask[64];
	for (int l = 0; l < vw; l++)
		mask[l] = ci32(G, (int)(l * sw));
	return llvm.LLVMBuildShuffleVector(B, ld, llvm.LLVMGetUndef(wt), llvm.LLVMConstVector(mask, (unsigned)vw), "");
}

LLVMValueRef strided_vec(Fn *F, Node *x, LLVMValueRef at, int64_t sw, int vw)
{
	return strided_vec_masked(F, x, at, 0, 0, sw, vw, NULL);
}

/* Max and average pooling of static shapes, a plane a task of the pool: per
 * output row, the row's outputs as vectors in registers (a row of
 * accumulators in memory, updated at other offsets kernel column after
 * kernel column, waited on its own stores); per kernel row inside the image
 * and kernel column, a vector of inputs per vector of outputs, loaded under
 * a mask (known when compiling) where some of its outputs read outside the
 * image, the padding's value in their lanes. Strides up to 4. */
static int pool_rows_ok(Gen *G, Node *n)
{
	int vw = G->vbytes / dtype_size(n->dtype);
	int64_t nch = (n->shape[3] + vw - 1) / vw;
	return n->a[3] <= 4 && nch <= 16 && n->a[0] * n->a[1] * nch <= 1024;
}

/* The row accumulators of pooling n: nch vectors, allocas of T's entry
 * block (which become registers). */
int pool_accs(Fn *T, Node *n, LLVMValueRef *acc)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	int vw = G->vbytes / dtype_size(n->dtype), nch = (int)((n->shape[3] + vw - 1) / vw);
	if (nch > POOL_MAX_NCH)
		ice("pooling: rows of %lld", (long long)n->shape[3]);
	LLVMTypeRef vt = llvm.LLVMVectorType(elem_t(G, n->dtype), (unsigned)vw);
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T->entry));
	for (int c = 0; c < nch; c++)
		acc[c] = llvm.LLVMBuildAlloca(B, vt, "acc");
	llvm.LLVMPositionBuilderAtEnd(B, body);
	return nch;
}

/* Output row oh of a plane of pooling n (static shapes, a float type):
 * input row ih of the plane at pbase + ih * W of x's storage, the row's
 * outputs to orow of n's. */
void pool_row(Fn *T, Node *n, Node *x, LLVMValueRef *acc, int nch, LLVMValueRef pbase, LLVMValueRef oh,
                     LLVMValueRef orow)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	DType dt = n->dtype;
	LLVMTypeRef et = elem_t(G, dt);
	int is_max = n->op == OP_MAXPOOL2D, vw = G->vbytes / dtype_size(dt);
	LLVMTypeRef vt = llvm.LLVMVectorType(et, (unsigned)vw), vpt = llvm.LLVMPointerType(vt, 0);
	int64_t H = x->shape[2], W = x->shape[3], OW = n->shape[3];
	int64_t KH = n->a[0], KW = n->a[1], sh = n->a[2], sw = n->a[3], ph = n->a[4], pw = n->a[5];
	LLVMValueRef init = fconst(G, dt, is_max ? -INFINITY : 0), vinit = splat(G, vt, vw, init);
	for (int c = 0; c < nch; c++)
		llvm.LLVMBuildStore(B, vinit, acc[c]);
	for (int64_t kh = 0; kh < KH; kh++) {
		LLVMValueRef ih = iadd(G, imul(G, oh, ci64(G, sh)), ci64(G, kh - ph));
		LLVMBasicBlockRef j = if_begin(T, in_range(G, ih, ci64(G, H)));
		LLVMValueRef row = iadd(G, pbase, imul(G, ih, ci64(G, W)));
		for (int64_t kw = 0; kw < KW; kw++) {
			int64_t lo, hi, hv;
			row_range(OW, W, sw, kw - pw, &lo, &hi, &hv);
			for (int c = 0; c < nch; c++) {
				int64_t o0 = (int64_t)c * vw, o1 = o0 + vw;
				LLVMValueRef v = NULL, at = iadd(G, row, ci64(G, o0 * sw + kw - pw));
				if (o1 > lo && o0 < hi && o0 < OW) {
					if (o0 >= lo && o1 <= hv)
						v = strided_vec(T, x, at, sw, vw);
					else /* some outputs read the padding: their lanes masked */
						v = strided_vec_masked(T, x, at, o0 * sw + kw - pw, W, sw, vw, init);
				}
				if (!v)
					continue;
				LLVMValueRef cur = llvm.LLVMBuildLoad2(B, vt, acc[c], "");
				llvm.LLVMBuildStore(B, is_max ? fmaxmin(G, cur, v, 1) : llvm.LLVMBuildFAdd(B, cur, v, ""), acc[c]);
			}
		}
		if_end(T, j);
	}
	for (int c = 0; c < nch; c++) {
		int64_t o0 = (int64_t)c * vw;
		LLVMValueRef r = llvm.LLVMBuildLoad2(B, vt, acc[c], "");
		if (!is_max) /* padding counts in the average (count_include_pad) */
			r = llvm.LLVMBuildFDiv(B, r, splat(G, vt, vw, fconst(G, dt, (double)(KH * KW))), "");
		LLVMValueRef at = iadd(G, orow, ci64(G, o0));
		if (o0 + vw <= OW) {
			LLVMValueRef p = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, nptr(T, n), &at, 1, ""), vpt, "");
			llvm.LLVMSetAlignment(llvm.LLVMBuildStore(B, r, p), (unsigned)dtype_size(dt));
		} else {
			for (int64_t ow = o0; ow < OW; ow++)
				store_at(T, n, iadd(G, orow, ci64(G, ow)), llvm.LLVMBuildExtractElement(B, r, ci32(G, (int)(ow - o0)), ""));
		}
	}
}

static void k_pool_rows(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	LLVMTypeRef ept = llvm.LLVMPointerType(elem_t(G, n->dtype), 0);
	int64_t H = x->shape[2], W = x->shape[3], OH = n->shape[2], OW = n->shape[3];
	LLVMValueRef vals[2] = {llvm.LLVMBuildPtrToInt(B, nptr(F, x), G->i64, ""), llvm.LLVMBuildPtrToInt(B, nptr(F, n), G->i64, "")};
	Fn T;
	LLVMValueRef got[2], acc[POOL_MAX_NCH];
	Task tk = task_begin(F, &T, "pool", vals, 2, got);
	T.ptr[x->id] = llvm.LLVMBuildIntToPtr(B, got[0], ept, "");
	T.ptr[n->id] = llvm.LLVMBuildIntToPtr(B, got[1], ept, "");
	int nch = pool_accs(&T, n, acc);
	Loop lp, loh;
	LLVMValueRef pl = loop_begin(&T, &lp, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef oh = loop_to(&T, &loh, ci64(G, OH));
	pool_row(&T, n, x, acc, nch, imul(G, pl, ci64(G, H * W)), oh, imul(G, iadd(G, imul(G, pl, ci64(G, OH)), oh), ci64(G, OW)));
	loop_end(&T, &loh);
	loop_end(&T, &lp);
	task_end(F, &T, &tk, ci64(G, x->shape[0] * x->shape[1]));
}

void k_pool(Fn *F, Node *n)
{
	if (n->op != OP_GLOBAL_AVGPOOL2D && dtype_is_float(n->dtype) && !fn_dynamic(F) && n->a[0] * n->a[1] <= 64 &&
	    pool_rows_ok(F->gen, n)) {
		k_pool_rows(F, n);
		return;
	}
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	int is_max = n->op == OP_MAXPOOL2D, global = n->op == OP_GLOBAL_AVGPOOL2D;
	LLVMValueRef H = dimv(F, x, 2), W = dimv(F, x, 3);
	LLVMValueRef KH = global ? H : attrv(F, n, 0), KW = global ? W : attrv(F, n, 1);
	LLVMValueRef sh = global ? ci64(G, 1) : attrv(F, n, 2), sw = global ? ci64(G, 1) : attrv(F, n, 3);
	LLVMValueRef ph = global ? ci64(G, 0) : attrv(F, n, 4), pw = global ? ci64(G, 0) : attrv(F, n, 5);
	LLVMValueRef OH = dimv(F, n, 2), OW = dimv(F, n, 3);
	LLVMValueRef acc = entry_alloca(F, t, "acc");
	Loop lnc, loh, low, lkh, lkw;
	LLVMValueRef nc = loop_to(F, &lnc, imul(G, dimv(F, x, 0), dimv(F, x, 1)));
	LLVMValueRef oh = loop_to(F, &loh, OH);
	LLVMValueRef ow = loop_to(F, &low, OW);
	llvm.LLVMBuildStore(B, fconst(G, dt, is_max ? -INFINITY : 0), acc);
	LLVMValueRef kh = loop_to(F, &lkh, KH);
	LLVMValueRef ih = iadd(G, isub(G, imul(G, oh, sh), ph), kh);
	LLVMBasicBlockRef j1 = if_begin(F, in_range(G, ih, H));
	LLVMValueRef kw = loop_to(F, &lkw, KW);
	LLVMValueRef iw = iadd(G, isub(G, imul(G, ow, sw), pw), kw);
	LLVMBasicBlockRef j2 = if_begin(F, in_range(G, iw, W));
	LLVMValueRef xi = iadd(G, imul(G, iadd(G, imul(G, nc, H), ih), W), iw);
	LLVMValueRef v = load_at(F, x, xi), cur = llvm.LLVMBuildLoad2(B, t, acc, "");
	llvm.LLVMBuildStore(B, is_max ? fmaxmin(G, cur, v, 1) : llvm.LLVMBuildFAdd(B, cur, v, ""), acc);
	if_end(F, j2);
	loop_end(F, &lkw);
	if_end(F, j1);
	loop_end(F, &lkh);
	LLVMValueRef r = llvm.LLVMBuildLoad2(B, t, acc, "");
	if (!is_max) /* padding counts in the average (count_include_pad) */
		r = llvm.LLVMBuildFDiv(B, r, llvm.LLVMBuildSIToFP(B, imul(G, KH, KW), t, ""), "");
	LLVMValueRef oi = iadd(G, imul(G, iadd(G, imul(G, nc, OH), oh), OW), ow);
	store_at(F, n, oi, r);
	loop_end(F, &low);
	loop_end(F, &loh);
	loop_end(F, &lnc);
}

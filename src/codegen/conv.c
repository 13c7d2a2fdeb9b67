/* conv.c - conv2d (as a matrix product per image with the matmul's tiles
 * when it can, else direct loops) and max, average and global average
 * pooling. */
#include "gen.h"

#include <math.h>

/* Is attribute k of n taken at run time (a reuse_hash variant)? */
static int attr_dynamic(Fn *F, Node *n, int k)
{
	for (int i = 0; F->v && i < F->v->ndyn; i++)
		if (F->v->dyn[i].node == n->id && F->v->dyn[i].field == 16 + k)
			return 1;
	return gdyn_find(F->g, n->id, 16 + k) != NULL;
}

/* The input offset of kernel position k along axis ax (0: H, 1: W): k times
 * the dilation; k itself without one, so that the code of convolutions
 * without dilation stays as it was. */
static LLVMValueRef dilated(Fn *F, Node *n, int ax, LLVMValueRef k)
{
	Gen *G = F->gen;
	if (!n->a[5 + ax] && !attr_dynamic(F, n, 5 + ax))
		return k;
	LLVMValueRef d = attrv(F, n, 5 + ax), z = ci64(G, 0);
	d = llvm.LLVMBuildSelect(G->B, llvm.LLVMBuildICmp(G->B, LLVMIntEQ, d, z, ""), ci64(G, 1), d, ""); /* 0: none */
	return imul(G, k, d);
}

/* conv2d as a matrix product per image (implicit GEMM): the patches of the
 * image laid out as col[C*KH*KW, OH*OW] in the scratch area (im2col; a 1x1
 * convolution of stride 1 without padding reads the image itself), then
 * out[O, OH*OW] = w[O, C*KH*KW] @ col with the matmul's tiles, then the bias
 * by rows. Static shapes, one group. */
static void k_conv2d_gemm(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t O = n->shape[1], OH = n->shape[2], OW = n->shape[3], KH = w->shape[2], KW = w->shape[3];
	int64_t sh = n->a[0], sw = n->a[1], ph = n->a[2], pw = n->a[3];
	int64_t K = C * KH * KW, P = OH * OW;
	int direct = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
	LLVMValueRef soff = ci64(G, F->plan->scratch);
	LLVMValueRef col = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "col");
	/* the patches and the result of one image, seen as matrices */
	Node cm = {.op = OP_CONV2D, .dtype = n->dtype, .rank = 2, .shape = {K, P}, .id = F->g->nnodes};
	Node om = *n;
	om.rank = 2, om.shape[0] = O, om.shape[1] = P;
	LLVMValueRef out0 = nptr(F, n);
	Loop ln;
	LLVMValueRef nn = loop_to(F, &ln, ci64(G, n->shape[0]));
	LLVMValueRef xoff = imul(G, nn, ci64(G, C * H * W));
	if (direct) {
		F->ptr[cm.id] = llvm.LLVMBuildGEP2(B, et, nptr(F, x), &xoff, 1, "");
	} else {
		Loop lr, loh, low;
		LLVMValueRef r = loop_to(F, &lr, ci64(G, K));
		LLVMValueRef c = idiv(G, r, ci64(G, KH * KW));
		LLVMValueRef kh = idiv(G, irem(G, r, ci64(G, KH * KW)), ci64(G, KW));
		LLVMValueRef kw = irem(G, r, ci64(G, KW));
		LLVMValueRef plane = elem_off(G, xoff, c, ci64(G, H * W));
		LLVMValueRef oh = loop_to(F, &loh, ci64(G, OH));
		LLVMValueRef ih = iadd(G, isub(G, imul(G, oh, ci64(G, sh)), ci64(G, ph)), dilated(F, n, 0, kh));
		LLVMValueRef okh = in_range(G, ih, ci64(G, H));
		LLVMValueRef drow = iadd(G, imul(G, r, ci64(G, P)), imul(G, oh, ci64(G, OW)));
		LLVMValueRef ow = loop_to(F, &low, ci64(G, OW));
		LLVMValueRef iw = iadd(G, isub(G, imul(G, ow, ci64(G, sw)), ci64(G, pw)), dilated(F, n, 1, kw));
		LLVMValueRef ok = llvm.LLVMBuildAnd(B, okh, in_range(G, iw, ci64(G, W)), "");
		/* out of the image: read element 0 of the plane, store a zero */
		LLVMValueRef at = iadd(G, plane, llvm.LLVMBuildSelect(B, ok, iadd(G, imul(G, ih, ci64(G, W)), iw), ci64(G, 0), ""));
		LLVMValueRef v = llvm.LLVMBuildSelect(B, ok, load_at(F, x, at), fconst(G, n->dtype, 0), "");
		LLVMValueRef dof = iadd(G, drow, ow);
		llvm.LLVMBuildStore(B, v, llvm.LLVMBuildGEP2(B, et, col, &dof, 1, ""));
		loop_end(F, &low);
		loop_end(F, &loh);
		loop_end(F, &lr);
		F->ptr[cm.id] = col;
	}
	LLVMValueRef ooff = imul(G, nn, ci64(G, O * P));
	F->ptr[n->id] = llvm.LLVMBuildGEP2(B, et, out0, &ooff, 1, "");
	LLVMValueRef z = ci64(G, 0);
	mm_tiled(F, &om, w, &cm, ci64(G, O), ci64(G, K), ci64(G, P), z, z, z, 1, 0, NULL, NULL, NULL);
	if (b) {
		Loop lo, lp;
		LLVMValueRef o = loop_begin(F, &lo, z, ci64(G, O));
		LLVMValueRef bo = load_at(F, b, o);
		LLVMValueRef p = loop_begin(F, &lp, z, ci64(G, P));
		LLVMValueRef at = iadd(G, imul(G, o, ci64(G, P)), p);
		store_at(F, n, at, llvm.LLVMBuildFAdd(B, load_at(F, n, at), bo, ""));
		loop_end(F, &lp);
		loop_end(F, &lo);
	}
	F->ptr[n->id] = out0;
	F->ptr[cm.id] = NULL;
	loop_end(F, &ln);
}

void k_conv2d(Fn *F, Node *n)
{
	if (dtype_is_float(n->dtype) && n->a[4] == 1 && !fn_dynamic(F)) { /* its scratch is planned for static graphs only */
		k_conv2d_gemm(F, n);
		return;
	}
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	LLVMValueRef C = dimv(F, x, 1), H = dimv(F, x, 2), W = dimv(F, x, 3);
	LLVMValueRef O = dimv(F, n, 1), OH = dimv(F, n, 2), OW = dimv(F, n, 3);
	LLVMValueRef Cg = dimv(F, w, 1), KH = dimv(F, w, 2), KW = dimv(F, w, 3);
	LLVMValueRef sh = attrv(F, n, 0), sw = attrv(F, n, 1), ph = attrv(F, n, 2), pw = attrv(F, n, 3);
	LLVMValueRef groups = attrv(F, n, 4);
	LLVMValueRef Og = idiv(G, O, groups);
	LLVMValueRef acc = entry_alloca(F, t, "acc");
	Loop ln, lo, loh, low, lc, lkh, lkw;
	LLVMValueRef nn = loop_to(F, &ln, dimv(F, n, 0));
	LLVMValueRef o = loop_to(F, &lo, O);
	LLVMValueRef cbase = imul(G, idiv(G, o, Og), Cg);
	LLVMValueRef oh = loop_to(F, &loh, OH);
	LLVMValueRef ow = loop_to(F, &low, OW);
	llvm.LLVMBuildStore(B, b ? load_at(F, b, o) : fconst(G, dt, 0), acc);
	LLVMValueRef c = loop_to(F, &lc, Cg);
	LLVMValueRef kh = loop_to(F, &lkh, KH);
	LLVMValueRef ih = iadd(G, isub(G, imul(G, oh, sh), ph), dilated(F, n, 0, kh));
	LLVMBasicBlockRef j1 = if_begin(F, in_range(G, ih, H));
	LLVMValueRef kw = loop_to(F, &lkw, KW);
	LLVMValueRef iw = iadd(G, isub(G, imul(G, ow, sw), pw), dilated(F, n, 1, kw));
	LLVMBasicBlockRef j2 = if_begin(F, in_range(G, iw, W));
	LLVMValueRef xi = iadd(G, imul(G, nn, C), iadd(G, cbase, c));
	xi = iadd(G, imul(G, iadd(G, imul(G, xi, H), ih), W), iw);
	LLVMValueRef wi = iadd(G, imul(G, o, Cg), c);
	wi = iadd(G, imul(G, iadd(G, imul(G, wi, KH), kh), KW), kw);
	LLVMValueRef prod = llvm.LLVMBuildFMul(B, load_at(F, x, xi), load_at(F, w, wi), "");
	llvm.LLVMBuildStore(B, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildLoad2(B, t, acc, ""), prod, ""), acc);
	if_end(F, j2);
	loop_end(F, &lkw);
	if_end(F, j1);
	loop_end(F, &lkh);
	loop_end(F, &lc);
	LLVMValueRef oi = iadd(G, imul(G, nn, O), o);
	oi = iadd(G, imul(G, iadd(G, imul(G, oi, OH), oh), OW), ow);
	store_at(F, n, oi, llvm.LLVMBuildLoad2(B, t, acc, ""));
	loop_end(F, &low);
	loop_end(F, &loh);
	loop_end(F, &lo);
	loop_end(F, &ln);
}

void k_pool(Fn *F, Node *n)
{
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

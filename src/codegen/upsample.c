/* upsample.c - the ops that grow an image: conv_transpose2d (as a matrix
 * product per image and group with the matmul's tiles, then a col2im
 * scatter-add; direct loops for reuse_hash variants) and resizing, nearest
 * and bilinear, with PyTorch's coordinate arithmetic (interp/upsample.c says
 * which). */
#include "gen.h"

#include <math.h>

/* lo..hi-1: the input positions i in [0, size) whose output position
 * i*s + t lies in [0, outsize) (t may be negative; lo may exceed hi) */
static void tap_bounds(Gen *G, LLVMValueRef t, LLVMValueRef s, LLVMValueRef outsize, LLVMValueRef size,
                       LLVMValueRef *lo, LLVMValueRef *hi)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef z = ci64(G, 0), mt = isub(G, z, t);
	LLVMValueRef neg = llvm.LLVMBuildICmp(B, LLVMIntSLT, t, z, "");
	*lo = llvm.LLVMBuildSelect(B, neg, idiv(G, iadd(G, mt, isub(G, s, ci64(G, 1))), s), z, "");
	LLVMValueRef u = isub(G, isub(G, outsize, ci64(G, 1)), t);
	LLVMValueRef h = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, u, z, ""), z,
	                                      iadd(G, idiv(G, u, s), ci64(G, 1)), "");
	*hi = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, h, size, ""), h, size, "");
}

/* out[n, o] = bias[o] or 0, for every image and channel */
static void fill_bias(Fn *F, Node *n, Node *b)
{
	Gen *G = F->gen;
	Loop lo, lp;
	LLVMValueRef O = dimv(F, n, 1), P = imul(G, dimv(F, n, 2), dimv(F, n, 3));
	LLVMValueRef r = loop_to(F, &lo, imul(G, dimv(F, n, 0), O));
	LLVMValueRef v = b ? load_at(F, b, irem(G, r, O)) : fconst(G, n->dtype, 0);
	LLVMValueRef p = loop_to(F, &lp, P);
	store_at(F, n, iadd(G, imul(G, r, P), p), v);
	loop_end(F, &lp);
	loop_end(F, &lo);
}

/* The product of image nn and group g: cols[Og*KH*KW, H*W] = wt[g] @ x[nn, g],
 * wt[g] being group g's weights transposed (made once), with the matmul's
 * tiles on the pool; then col2im adds each row (co, kh, kw) of cols into the
 * output plane co, shifted by the tap and strided. */
static void convt_gemm_group(Fn *F, Node *n, LLVMValueRef nn, LLVMValueRef g, LLVMValueRef wt, LLVMValueRef cols)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *w = n->in[1];
	LLVMTypeRef et = elem_t(G, n->dtype);
	int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3], P = H * W, Cg = C / n->a[4];
	int64_t Og = w->shape[1], KH = w->shape[2], KW = w->shape[3], M = Og * KH * KW;
	int64_t O = n->shape[1], OH = n->shape[2], OW = n->shape[3];
	/* the operands as matrices: A (a stand-in node), B (x moved to the
	 * image and group), C (the node moved to cols) */
	Node am = {.op = n->op, .dtype = n->dtype, .rank = 2, .shape = {M, Cg}, .id = F->g->nnodes};
	Node bm = *x, cm = *n;
	bm.rank = cm.rank = 2;
	bm.shape[0] = Cg, bm.shape[1] = P;
	cm.shape[0] = M, cm.shape[1] = P;
	LLVMValueRef x0 = nptr(F, x), out0 = nptr(F, n);
	LLVMValueRef aoff = imul(G, g, ci64(G, M * Cg)), xoff = imul(G, iadd(G, imul(G, nn, ci64(G, C)), imul(G, g, ci64(G, Cg))), ci64(G, P));
	F->ptr[am.id] = llvm.LLVMBuildGEP2(B, et, wt, &aoff, 1, "");
	F->ptr[x->id] = llvm.LLVMBuildGEP2(B, et, x0, &xoff, 1, "");
	F->ptr[n->id] = cols;
	LLVMValueRef z = ci64(G, 0);
	mm_tiled(F, &cm, &am, &bm, ci64(G, M), ci64(G, Cg), ci64(G, P), z, z, z, 1, 0, NULL, NULL, NULL, NULL);
	F->ptr[x->id] = x0;
	F->ptr[n->id] = out0;
	F->ptr[am.id] = NULL;
	/* col2im: the inner loop runs over the input columns that land inside */
	Loop lm, lh, lw;
	LLVMValueRef m = loop_to(F, &lm, ci64(G, M));
	LLVMValueRef co = idiv(G, m, ci64(G, KH * KW));
	LLVMValueRef kh = idiv(G, irem(G, m, ci64(G, KH * KW)), ci64(G, KW)), kw = irem(G, m, ci64(G, KW));
	LLVMValueRef th = isub(G, imul(G, kh, ci64(G, conv_dilation(n, 0))), ci64(G, n->a[2]));
	LLVMValueRef tw = isub(G, imul(G, kw, ci64(G, conv_dilation(n, 1))), ci64(G, n->a[3]));
	LLVMValueRef ih0, ih1, iw0, iw1, sh = ci64(G, n->a[0]), sw = ci64(G, n->a[1]);
	tap_bounds(G, th, sh, ci64(G, OH), ci64(G, H), &ih0, &ih1);
	tap_bounds(G, tw, sw, ci64(G, OW), ci64(G, W), &iw0, &iw1);
	LLVMValueRef plane = imul(G, iadd(G, imul(G, nn, ci64(G, O)), iadd(G, imul(G, g, ci64(G, Og)), co)), ci64(G, OH * OW));
	LLVMValueRef ih = loop_begin(F, &lh, ih0, ih1);
	LLVMValueRef orow = iadd(G, plane, imul(G, iadd(G, imul(G, ih, sh), th), ci64(G, OW)));
	LLVMValueRef crow = iadd(G, imul(G, m, ci64(G, P)), imul(G, ih, ci64(G, W)));
	LLVMValueRef iw = loop_begin(F, &lw, iw0, iw1);
	LLVMValueRef oi = iadd(G, orow, iadd(G, imul(G, iw, sw), tw));
	LLVMValueRef ci = iadd(G, crow, iw);
	LLVMValueRef cv = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, cols, &ci, 1, ""), "");
	store_at(F, n, oi, llvm.LLVMBuildFAdd(B, load_at(F, n, oi), cv, ""));
	loop_end(F, &lw);
	loop_end(F, &lh);
	loop_end(F, &lm);
}

/* Static shapes: the weights transposed per group into the scratch area
 * (wt[g] = w[g*Cg:(g+1)*Cg] seen as [Cg, Og*KH*KW], transposed), then
 * cols after them; one product per image and group. */
static void k_convt_gemm(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *w = n->in[1];
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int64_t C = x->shape[1], Cg = C / n->a[4], M = w->shape[1] * w->shape[2] * w->shape[3];
	LLVMValueRef soff = ci64(G, F->plan->scratch);
	LLVMValueRef wt = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "wt");
	LLVMValueRef coff = ci64(G, C * M);
	LLVMValueRef cols = llvm.LLVMBuildGEP2(B, et, wt, &coff, 1, "cols");
	Loop lc, lm;
	LLVMValueRef c = loop_to(F, &lc, ci64(G, C));
	LLVMValueRef g = idiv(G, c, ci64(G, Cg)), r = irem(G, c, ci64(G, Cg));
	LLVMValueRef m = loop_to(F, &lm, ci64(G, M));
	LLVMValueRef to = iadd(G, imul(G, iadd(G, imul(G, g, ci64(G, M)), m), ci64(G, Cg)), r);
	llvm.LLVMBuildStore(B, load_at(F, w, iadd(G, imul(G, c, ci64(G, M)), m)), llvm.LLVMBuildGEP2(B, et, wt, &to, 1, ""));
	loop_end(F, &lm);
	loop_end(F, &lc);
	fill_bias(F, n, n->nin > 2 ? n->in[2] : NULL);
	Loop ln, lg;
	LLVMValueRef nn = loop_to(F, &ln, ci64(G, n->shape[0]));
	LLVMValueRef gg = loop_to(F, &lg, ci64(G, n->a[4]));
	convt_gemm_group(F, n, nn, gg, wt, cols);
	loop_end(F, &lg);
	loop_end(F, &ln);
}

void k_conv_transpose2d(Fn *F, Node *n)
{
	if (!fn_dynamic(F)) {
		k_convt_gemm(F, n);
		return;
	}
	/* a reuse_hash variant, any attribute at run time: per output row and
	 * tap, the input row it comes from, and along it the columns that land
	 * inside (the scatter of the GEMM path, one tap at a time) */
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *w = n->in[1];
	LLVMValueRef C = dimv(F, x, 1), H = dimv(F, x, 2), W = dimv(F, x, 3);
	LLVMValueRef O = dimv(F, n, 1), OH = dimv(F, n, 2), OW = dimv(F, n, 3);
	LLVMValueRef Og = dimv(F, w, 1), KH = dimv(F, w, 2), KW = dimv(F, w, 3);
	LLVMValueRef sh = attrv(F, n, 0), sw = attrv(F, n, 1), ph = attrv(F, n, 2), pw = attrv(F, n, 3);
	LLVMValueRef dh = attrv(F, n, 5), dw = attrv(F, n, 6), Cg = idiv(G, C, attrv(F, n, 4));
	fill_bias(F, n, n->nin > 2 ? n->in[2] : NULL);
	Loop ln, lc, lo, lkh, lih, lkw, liw;
	LLVMValueRef nn = loop_to(F, &ln, dimv(F, n, 0));
	LLVMValueRef c = loop_to(F, &lc, C);
	LLVMValueRef g = idiv(G, c, Cg);
	LLVMValueRef co = loop_to(F, &lo, Og);
	LLVMValueRef plane = imul(G, iadd(G, imul(G, nn, O), iadd(G, imul(G, g, Og), co)), imul(G, OH, OW));
	LLVMValueRef xplane = imul(G, iadd(G, imul(G, nn, C), c), imul(G, H, W));
	LLVMValueRef kh = loop_to(F, &lkh, KH);
	LLVMValueRef th = isub(G, imul(G, kh, dh), ph), ih0, ih1;
	tap_bounds(G, th, sh, OH, H, &ih0, &ih1);
	LLVMValueRef ih = loop_begin(F, &lih, ih0, ih1);
	LLVMValueRef orow = iadd(G, plane, imul(G, iadd(G, imul(G, ih, sh), th), OW));
	LLVMValueRef xrow = iadd(G, xplane, imul(G, ih, W));
	LLVMValueRef kw = loop_to(F, &lkw, KW);
	LLVMValueRef wv = load_at(F, w, iadd(G, imul(G, iadd(G, imul(G, iadd(G, imul(G, c, Og), co), KH), kh), KW), kw));
	LLVMValueRef tw = isub(G, imul(G, kw, dw), pw), iw0, iw1;
	tap_bounds(G, tw, sw, OW, W, &iw0, &iw1);
	LLVMValueRef iw = loop_begin(F, &liw, iw0, iw1);
	LLVMValueRef oi = iadd(G, orow, iadd(G, imul(G, iw, sw), tw));
	LLVMValueRef prod = llvm.LLVMBuildFMul(B, wv, load_at(F, x, iadd(G, xrow, iw)), "");
	store_at(F, n, oi, llvm.LLVMBuildFAdd(B, load_at(F, n, oi), prod, ""));
	loop_end(F, &liw);
	loop_end(F, &lkw);
	loop_end(F, &lih);
	loop_end(F, &lkh);
	loop_end(F, &lo);
	loop_end(F, &lc);
	loop_end(F, &ln);
}

/* ---- resize ---- */

/* Along one axis, output position i -> input positions i0, i1 and the weight
 * l of i1, in the arithmetic type ot (PyTorch's; see interp/upsample.c). */
static void resize_coord(Fn *F, Node *n, int k, LLVMTypeRef ot, LLVMValueRef i, LLVMValueRef in, LLVMValueRef out,
                         LLVMValueRef *i0, LLVMValueRef *i1, LLVMValueRef *l)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	DType odt = ot == G->f64 ? DT_F64 : DT_F32;
	LLVMValueRef one = ci64(G, 1), last = isub(G, in, one);
	LLVMValueRef sc = llvm.LLVMBuildBitCast(B, attrv(F, n, 1 + k), G->f64, "");
	if (ot != G->f64)
		sc = llvm.LLVMBuildFPTrunc(B, sc, ot, "");
	LLVMValueRef fi = llvm.LLVMBuildSIToFP(B, i, ot, "");
	if (n->op == OP_RESIZE_NEAREST) {
		LLVMValueRef j = llvm.LLVMBuildFPToSI(B, math1(G, "floor", odt, llvm.LLVMBuildFMul(B, fi, sc, "")), G->i64, "");
		j = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, j, last, ""), j, last, "");
		/* PyTorch's special cases: the same size copies, twice the size halves */
		LLVMValueRef same = llvm.LLVMBuildICmp(B, LLVMIntEQ, out, in, "");
		LLVMValueRef twice = llvm.LLVMBuildICmp(B, LLVMIntEQ, out, imul(G, in, ci64(G, 2)), "");
		j = llvm.LLVMBuildSelect(B, twice, idiv(G, i, ci64(G, 2)), j, "");
		*i0 = *i1 = llvm.LLVMBuildSelect(B, same, i, j, "");
		*l = NULL;
		return;
	}
	LLVMValueRef half = llvm.LLVMConstReal(ot, 0.5), zero = llvm.LLVMConstReal(ot, 0);
	LLVMValueRef hc = llvm.LLVMBuildFSub(B, llvm.LLVMBuildFMul(B, sc, llvm.LLVMBuildFAdd(B, fi, half, ""), ""), half, "");
	hc = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, hc, zero, ""), zero, hc, "");
	LLVMValueRef al = llvm.LLVMBuildICmp(B, LLVMIntNE, attrv(F, n, 0), ci64(G, 0), "");
	LLVMValueRef real = llvm.LLVMBuildSelect(B, al, llvm.LLVMBuildFMul(B, sc, fi, ""), hc, "");
	LLVMValueRef j = llvm.LLVMBuildFPToSI(B, math1(G, "floor", odt, real), G->i64, "");
	j = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, j, last, ""), j, last, "");
	LLVMValueRef lam = llvm.LLVMBuildFSub(B, real, llvm.LLVMBuildSIToFP(B, j, ot, ""), "");
	lam = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, lam, zero, ""), zero, lam, "");
	LLVMValueRef fone = llvm.LLVMConstReal(ot, 1);
	lam = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOGT, lam, fone, ""), fone, lam, "");
	*i0 = j;
	*i1 = iadd(G, j, llvm.LLVMBuildZExt(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, j, last, ""), G->i64, ""));
	*l = lam;
}

void k_resize(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	LLVMTypeRef et = elem_t(G, n->dtype);
	LLVMTypeRef ot = n->op == OP_RESIZE_BILINEAR && n->dtype == DT_F64 ? G->f64 : G->f32;
	LLVMValueRef C = dimv(F, x, 1), H = dimv(F, x, 2), W = dimv(F, x, 3), OH = dimv(F, n, 2), OW = dimv(F, n, 3);
	Loop ln, lc, lh, lw;
	LLVMValueRef nn = F->par_lo ? loop_begin(F, &ln, F->par_lo, F->par_hi) : loop_to(F, &ln, dimv(F, n, 0));
	LLVMValueRef c = loop_to(F, &lc, C);
	LLVMValueRef p = iadd(G, imul(G, nn, C), c);
	LLVMValueRef xp = imul(G, p, imul(G, H, W)), op = imul(G, p, imul(G, OH, OW));
	LLVMValueRef i = loop_to(F, &lh, OH), h0, h1, lhv;
	resize_coord(F, n, 0, ot, i, H, OH, &h0, &h1, &lhv);
	LLVMValueRef r0 = iadd(G, xp, imul(G, h0, W)), r1 = iadd(G, xp, imul(G, h1, W));
	LLVMValueRef orow = iadd(G, op, imul(G, i, OW));
	LLVMValueRef j = loop_to(F, &lw, OW), w0, w1, lwv;
	resize_coord(F, n, 1, ot, j, W, OW, &w0, &w1, &lwv);
	LLVMValueRef v;
	if (!lhv) {
		v = load_at(F, x, iadd(G, r0, w0));
	} else {
		/* in the element type, which is ot for bilinear */
		LLVMValueRef lh = lhv, lw = lwv, one = llvm.LLVMConstReal(et, 1);
		LLVMValueRef mh = llvm.LLVMBuildFSub(B, one, lh, ""), mw = llvm.LLVMBuildFSub(B, one, lw, "");
		LLVMValueRef top = llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, mw, load_at(F, x, iadd(G, r0, w0)), ""),
		                                      llvm.LLVMBuildFMul(B, lw, load_at(F, x, iadd(G, r0, w1)), ""), "");
		LLVMValueRef bot = llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, mw, load_at(F, x, iadd(G, r1, w0)), ""),
		                                      llvm.LLVMBuildFMul(B, lw, load_at(F, x, iadd(G, r1, w1)), ""), "");
		v = llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, mh, top, ""), llvm.LLVMBuildFMul(B, lh, bot, ""), "");
	}
	store_at(F, n, iadd(G, orow, j), v);
	loop_end(F, &lw);
	loop_end(F, &lh);
	loop_end(F, &lc);
	loop_end(F, &ln);
}

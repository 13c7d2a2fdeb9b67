/* conv_lanes.c - conv2d with output channels in the vector lanes (AVX-512,
 * a model's weights packed for it; ConvGeom.lanes): conv.c's copies of the
 * input and its epilogue, tiles of pixels by panels of channels. */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

/* ---- conv2d with output channels in the lanes (ConvGeom.lanes) ----
 *
 * A 7x7 plane is 49 pixels: the tiles above compute 64 for them. Here a
 * register tile is CL_MR pixels by CL_NV vectors of consecutive output
 * channels. The weights [O, Cg*KH*KW] are read as the transposed right
 * operand of a matmul, pre-packed in panels of CL_NV vectors of channels
 * (nestrt_packed: k rows of `wide` contiguous elements, zeros past O); the
 * pixels are broadcast from copies of whole planes (the implicit patch
 * matrix's rows, as above) or from the input itself for a 1x1. A task is a
 * panel. The reduction runs in blocks of channels (CL_KBLOCK elements) so
 * that the panel's block and the copies' stay in L2; between blocks the
 * tiles' sums wait in a buffer of the task's. Bias and epilogue are applied
 * in registers, a vector of channels at a time, and each channel's value
 * goes to its plane element by element. */

#define CL_KBLOCK 1152

/* pixels a tile: 7 when the plane is a multiple of 7 (every ResNet plane),
 * else the most up to 8 that leaves the fewest pixels over */
static int cl_mr(int64_t P)
{
	/* equivalent mutant [const 8 -> 7]: it then chooses among tiles of 5
	 * to 8 pixels all the same (the notes below) */
	int best = 8;
	/* equivalent mutant [const 8 -> 9]: a 9-pixel tile computes the same
	 * values (kernels.conv2d_lanes' 9x9 plane takes it and passes) */
	for (int m = 8; m >= 5; m--)
		/* equivalent mutant [arith]: it chooses among tiles of 5 to 8
		 * pixels, each of which computes the same values */
		if ((P + m - 1) / m * m - P < (P + best - 1) / best * best - P)
			best = m;
	/* equivalent mutant [const]: each tile it can then choose, 5 to 9
	 * pixels, computes the same values (the notes above) */
	return P % 7 == 0 ? 7 : best;
}

typedef struct ClTask {
	ConvK *k;
	LLVMValueRef base, pan, o0, ooff, part, chv[8];
	LLVMValueRef ti;  /* the tile's index */
	int64_t wide, pfsh;
} ClTask;

/* One tile: pixels [p0, p0 + mr) by the panel's CL_NV vectors of channels,
 * over channels [c0, c1) of the reduction; the sums start from the task's
 * buffer (`from_part`) or zero and end in it, or (`last`) go through bias
 * and epilogue to the result. */
static void cl_tile(Fn *F, ClTask *t, int mr, LLVMValueRef p0, LLVMValueRef c0, LLVMValueRef c1, int from_part, int last)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvK *k = t->k;
	DType dt = k->n->dtype;
	int vw = k->vw, nv = CL_NV;
	LLVMTypeRef et = elem_t(G, dt), vt = llvm.LLVMVectorType(et, (unsigned)vw), vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef init[CV_MAX_MR][CV_MAX_NV], acc[CV_MAX_MR][CV_MAX_NV];
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv && from_part; v++) {
			LLVMValueRef off = iadd(G, imul(G, iadd(G, p0, ci64(G, r)), ci64(G, t->wide)), ci64(G, v * vw));
			init[r][v] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, t->part, &off, 1, ""), vpt, ""), "");
			llvm.LLVMSetAlignment(init[r][v], 64);
		}
	TileLoop L;
	tile_loop_begin(F, &L, mr, nv, vt, c0, c1, from_part ? init : NULL, acc);
	LLVMValueRef c = L.c;
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	LLVMValueRef arow = iadd(G, imul(G, c, ci64(G, k->CP)), p0), brow = imul(G, imul(G, c, ci64(G, k->S)), ci64(G, t->wide));
	PosLoop pl;
	int run = pos_loop_begin(F, k, &pl, mr, nv, vt, acc);
	for (int u = 0; u < run; u++) {
		LLVMValueRef bv[CL_NV], s, so;
		pos_at(F, &pl, u, &s, &so);
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = iadd(G, brow, iadd(G, imul(G, s, ci64(G, t->wide)), ci64(G, v * vw)));
			bv[v] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, t->pan, &off, 1, ""), vpt, ""), "");
			llvm.LLVMSetAlignment(bv[v], (unsigned)dtype_size(dt));
		}
		{
			/* step (ti Cg + c) S + s of the panel's: line step >> pfsh of
			 * the next panel */
			LLVMValueRef step = iadd(G, imul(G, iadd(G, imul(G, t->ti, ci64(G, k->Cg)), c), ci64(G, k->S)), s);
			LLVMValueRef off = iadd(G, ci64(G, k->Kw * t->wide), llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, step, ci64(G, t->pfsh), ""), ci64(G, 4), ""));
			/* equivalent mutant [stmt]: llvm.prefetch changes no behaviour of the program */
			prefetch_line(G, llvm.LLVMBuildGEP2(B, et, t->pan, &off, 1, ""));
		}
		for (int r = 0; r < mr; r++) {
			LLVMValueRef off = iadd(G, arow, iadd(G, so, ci64(G, r)));
			LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, t->base, &off, 1, ""), "");
			LLVMValueRef bc = splat(G, vt, vw, x);
			for (int v = 0; v < nv; v++) {
				LLVMTypeRef ts[3] = {vt, vt, vt};
				LLVMValueRef vs[3] = {bc, bv[v], acc[r][v]};
				acc[r][v] = call(G, fma, vt, ts, vs, 3);
			}
		}
	}
	pos_loop_end(F, &pl, acc);
	tile_loop_end(F, &L, acc);
	if (!last) {
		for (int r = 0; r < mr; r++)
			for (int v = 0; v < nv; v++) {
				LLVMValueRef off = iadd(G, imul(G, iadd(G, p0, ci64(G, r)), ci64(G, t->wide)), ci64(G, v * vw));
				LLVMValueRef st = llvm.LLVMBuildStore(B, acc[r][v], llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, t->part, &off, 1, ""), vpt, ""));
				llvm.LLVMSetAlignment(st, 64);
			}
		return;
	}
	/* a vector of channels at a time, those below O (the last panel's may not be) */
	for (int v = 0; v < nv; v++) {
		LLVMValueRef o = iadd(G, t->o0, ci64(G, v * vw));
		LLVMBasicBlockRef j = if_begin(F, llvm.LLVMBuildICmp(B, LLVMIntSLT, o, ci64(G, k->O), ""));
		LLVMValueRef bias = NULL, chv[8] = {0};
		if (k->b) {
			LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, nptr(F, k->b), &o, 1, "");
			bias = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, vpt, ""), "");
			llvm.LLVMSetAlignment(bias, (unsigned)dtype_size(dt));
		}
		for (int e = 0; e < k->nepi; e++)
			if (t->chv[e]) {
				LLVMValueRef off = ci64(G, v * vw);
				chv[e] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, t->chv[e], &off, 1, ""), vpt, ""), "");
				/* equivalent mutant [stmt]: without it the load assumes the
				 * vector type's own alignment, at most 64 */
				llvm.LLVMSetAlignment(chv[e], 64);
			}
		/* channel l of the vector at pixel p: element (o + l) * P + p of the image */
		LLVMValueRef plane0 = iadd(G, t->ooff, imul(G, o, ci64(G, k->P)));
		for (int r = 0; r < mr; r++) {
			LLVMValueRef px = iadd(G, plane0, iadd(G, p0, ci64(G, r)));
			LLVMValueRef x = acc[r][v];
			if (bias)
				x = llvm.LLVMBuildFAdd(B, x, bias, "");
			for (int e = 0; e < k->nepi; e++) {
				Node *ot = k->other[e];
				LLVMValueRef ov = chv[e];
				if (!ov && ot && scalar_of_consts(ot, 0)) {
					ov = splat(G, vt, vw, const_scalar(F, ot));
				} else if (!ov && ot) { /* the result's shape (a residual): a lane a plane */
					ov = llvm.LLVMGetUndef(vt);
					for (int l = 0; l < vw; l++)
						ov = llvm.LLVMBuildInsertElement(B, ov, load_at(F, ot, iadd(G, px, ci64(G, (int64_t)l * k->P))), ci32(G, l), "");
				}
				x = cv_epi_op(F, k, e, x, ov);
			}
			for (int l = 0; l < vw; l++)
				store_at(F, k->n, iadd(G, px, ci64(G, (int64_t)l * k->P)), llvm.LLVMBuildExtractElement(B, x, ci32(G, l), ""));
		}
		if_end(F, j);
	}
}

/* The tiles of pixels [0, P) over channels [c0, c1) (ClTask t) */
static void cl_tiles(Fn *F, ClTask *t, int mr, LLVMValueRef c0, LLVMValueRef c1, int from_part, int last)
{
	Gen *G = F->gen;
	ConvK *k = t->k;
	int64_t nfull = k->P / mr, rest = k->P % mr;
	Loop lt;
	LLVMValueRef ti = loop_to(F, &lt, ci64(G, nfull));
	t->ti = ti;
	cl_tile(F, t, mr, imul(G, ti, ci64(G, mr)), c0, c1, from_part, last);
	loop_end(F, &lt);
	t->ti = ci64(G, nfull);
	/* equivalent mutant [cond if (...) -> if (1)]: at rest 0, a tile of no
	 * pixels: its loop keeps no sum and stores nothing */
	if (rest)
		cl_tile(F, t, (int)rest, ci64(G, nfull * mr), c0, c1, from_part, last);
}

static void k_conv2d_lanes(Fn *F, Node *n, ConvGeom *cg, LLVMValueRef packed)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvK k;
	/* equivalent mutant [const 0 -> (-1)]: x86-64's back end gives that
	 * address space no meaning (only 256-258 and 270-272 have one) */
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	cv_setup(F, &k, n, cg, cg->lcp ? cg->lcp : n->shape[2] * n->shape[3], !cg->lcp, 0);
	int64_t wide = CL_NV * k.vw, npan = (k.O + wide - 1) / wide;
	int mr = cl_mr(k.P);
	int64_t cb = CL_KBLOCK / k.S > 1 ? CL_KBLOCK / k.S : 1, nkb = (k.Cg + cb - 1) / cb;
	int nl = k.nleaf;
	LLVMValueRef vals[CV_MAX_LEAF + 4], got[CV_MAX_LEAF + 4];
	LLVMValueRef soff = ci64(G, F->plan->scratch);
	LLVMValueRef cps = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "copies");
	Loop ln, lt;
	LLVMValueRef nn = loop_to(F, &ln, ci64(G, n->shape[0]));
	cv_env(F, &k, vals);
	vals[nl] = nn;
	vals[nl + 1] = llvm.LLVMBuildPtrToInt(B, cps, G->i64, "");
	vals[nl + 2] = llvm.LLVMBuildPtrToInt(B, packed, G->i64, "");
	Fn T;
	Task tk;
	if (cg->lcp) {
		/* the copies of the image, runs of channels over the pool: every
		 * panel's task reads all of them */
		/* equivalent mutant [const 16 -> 15]: at C = 15, 16 parts of the 15
		 * channels, one of them empty: the same copies */
		int64_t parts = k.C < 16 ? k.C : 16;
		tk = task_begin(F, &T, "clcopy", vals, nl + 3, got);
		cv_unenv(&T, &k, got);
		LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
		LLVMValueRef c0 = idiv(G, imul(G, t, ci64(G, k.C)), ci64(G, parts));
		LLVMValueRef c1 = idiv(G, imul(G, iadd(G, t, ci64(G, 1)), ci64(G, k.C)), ci64(G, parts));
		cv_copy(&T, &k, llvm.LLVMBuildIntToPtr(B, got[nl + 1], ept, ""), got[nl], c0, c1, ci64(G, 0), ci64(G, cg->hr));
		loop_end(&T, &lt);
		task_end(F, &T, &tk, ci64(G, parts));
	}
	tk = task_begin(F, &T, "cl", vals, nl + 3, got);
	cv_unenv(&T, &k, got);
	ClTask a = {.k = &k, .wide = wide, .ooff = imul(G, got[nl], ci64(G, k.O * k.P))};
	/* A task's panel of the weights comes from memory (a model's weights do
	 * not stay in the caches; at 7x7, 512 channels to 2048, 4 MB), and the
	 * first tile waited for it: the tiles prefetch the next panel's Kw wide
	 * elements (Kw wide / 16 lines), a line every 2^pfsh of their (P / mr)
	 * Kw steps (ResNet-50's 1x1 convolutions at 7x7: 0.93-0.97x the time).
	 * equivalent mutant [const]: a prefetch's rate changes no behaviour
	 * of the program (LLVM's definition of llvm.prefetch) */
	while ((k.P / mr) * k.Kw >> (a.pfsh + 1) >= k.Kw * wide / 16)
		a.pfsh++;
	a.base = cg->lcp ? llvm.LLVMBuildIntToPtr(B, got[nl + 1], ept, "")
	                 : llvm.LLVMBuildGEP2(B, et, T.ptr[k.x->id], (LLVMValueRef[]){imul(G, got[nl], ci64(G, k.C * k.P))}, 1, "");
	/* the task's buffers, in its entry block: the sums between blocks, and
	 * the panel's channels' values of the per-channel operands */
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	/* equivalent mutant [cond if (...) -> if (1)]: with one block of
	 * channels the tiles neither read nor write part (from zero to the
	 * result), and an unused alloca is dropped */
	if (nkb > 1) {
		a.part = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, k.P * wide), "part");
		llvm.LLVMSetAlignment(a.part, 64);
	}
	for (int e = 0; e < k.nepi; e++)
		if (k.other[e] && !cv_full(&k, k.other[e]) && !scalar_of_consts(k.other[e], 0)) {
			a.chv[e] = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, wide), "chan");
			llvm.LLVMSetAlignment(a.chv[e], 64);
		}
	llvm.LLVMPositionBuilderAtEnd(B, body);
	LLVMValueRef j = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	a.o0 = imul(G, j, ci64(G, wide));
	LLVMValueRef po = imul(G, a.o0, ci64(G, k.Kw));
	a.pan = llvm.LLVMBuildGEP2(B, et, llvm.LLVMBuildIntToPtr(B, got[nl + 2], ept, ""), &po, 1, "panel");
	for (int e = 0; e < k.nepi; e++)
		if (a.chv[e]) {
			Loop lc;
			LLVMValueRef l = loop_to(&T, &lc, ci64(G, wide));
			LLVMValueRef o = iadd(G, a.o0, l);
			LLVMBasicBlockRef jj = if_begin(&T, llvm.LLVMBuildICmp(B, LLVMIntSLT, o, ci64(G, k.O), ""));
			llvm.LLVMBuildStore(B, cv_chan(&T, &k, k.other[e], o), llvm.LLVMBuildGEP2(B, et, a.chv[e], &l, 1, ""));
			if_end(&T, jj);
			loop_end(&T, &lc);
		}
	/* equivalent mutant [cond if (...) -> if (1)]: all the channels in one
	 * block: each sum takes the same products in the same order, without
	 * the buffer between blocks (slower, which make bench measures) */
	if (nkb == 1) {
		/* equivalent mutant [const 1 -> 2]: `last` is only tested for truth */
		cl_tiles(&T, &a, mr, ci64(G, 0), ci64(G, k.Cg), 0, 1);
	} else {
		/* the first block from zero, the middle ones through the buffer, the last to the result */
		cl_tiles(&T, &a, mr, ci64(G, 0), ci64(G, cb), 0, 0);
		if (nkb > 2) {
			Loop lb;
			LLVMValueRef kb = loop_begin(&T, &lb, ci64(G, 1), ci64(G, nkb - 1));
			LLVMValueRef c0 = imul(G, kb, ci64(G, cb));
			/* equivalent mutant [const 1 -> 2]: from_part is only tested for truth */
			cl_tiles(&T, &a, mr, c0, iadd(G, c0, ci64(G, cb)), 1, 0);
			loop_end(&T, &lb);
		}
		cl_tiles(&T, &a, mr, ci64(G, (nkb - 1) * cb), ci64(G, k.Cg), 1, 1);
	}
	loop_end(&T, &lt);
	task_end(F, &T, &tk, ci64(G, npan));
	loop_end(F, &ln);
	free(k.soff);
}

int k_conv2d_lanes_try(Fn *F, Node *n)
{
	ConvGeom cg;
	int64_t rec[4];
	Node *wt = n->in[1];
	if (conv_lanes_pack(n, fn_dynamic(F), F->gen->vbytes, rec) && (wt->op == OP_PARAM || wt->op == OP_INPUT)) {
		/* channels in the lanes when the weights were pre-packed, else
		 * pixels (NESTRT_PREPACK=0, or a request the pack plan missed) */
		Gen *G = F->gen;
		LLVMBuilderRef B = G->B;
		conv_geom(n, fn_dynamic(F), &cg);
		LLVMTypeRef at[6] = {G->i8p, G->i8p, G->i64, G->i64, G->i64, G->i32};
		LLVMValueRef av[6] = {F->ctx, llvm.LLVMBuildPointerCast(B, nptr(F, wt), G->i8p, ""), ci64(G, rec[0]), ci64(G, rec[1]),
		                      ci64(G, rec[2]), ci32(G, (int)rec[3])};
		LLVMValueRef packed = call(G, "nestrt_packed", G->i8p, at, av, 6);
		LLVMBasicBlockRef yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cllanes");
		LLVMBasicBlockRef no = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "clpixels");
		LLVMBasicBlockRef join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cldone");
		llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), ""), yes, no);
		llvm.LLVMPositionBuilderAtEnd(B, yes);
		k_conv2d_lanes(F, n, &cg, packed);
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, no);
		k_conv2d_tiled(F, n, &cg);
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, join);
		return 1;
	}
	return 0;
}

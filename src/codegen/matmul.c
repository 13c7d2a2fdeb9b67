/* matmul.c - matrix products: register tiles of FMAs over packed panels of
 * B, the rows of a panel, pre-packed weights, the fused epilogue, matmuls as
 * tasks of the thread pool (panels or a batch's matrices), and the plain
 * loops for integers and vectors. The tiles over weights in a format are
 * matmul_fmt.c's. */
#include "gen.h"
#include "wformat.h"

#include <math.h>
#include <stdlib.h>



/* One register tile of C = A @ B: mr rows by nv vectors of vw columns over
 * k in [0, K); the accumulators stay in registers for the whole k loop (phi
 * nodes). A's elements (rows K apart from arow) are broadcast,
 * B's rows (ldb apart, from column bj) loaded as vectors into FMAs; the tile
 * is stored at C[crow + r*ldc + cj]. */
static void mm_tile(Fn *F, Node *n, Node *a, int mr, int nv, int vw, LLVMValueRef K, LLVMValueRef arow, LLVMValueRef bbase, LLVMValueRef ldb,
                    LLVMValueRef bj, LLVMValueRef cbase, LLVMValueRef crow, LLVMValueRef ldc, LLVMValueRef cj,
                    LLVMValueRef pf, LLVMValueRef pfsh, int epi, int stream)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	DType dt = n->dtype;
	LLVMTypeRef et = elem_t(G, dt), vt = llvm.LLVMVectorType(et, (unsigned)vw);
	LLVMTypeRef vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef acc[MM_MAX_MR][4], cp[MM_MAX_MR][4];
	LLVMValueRef zv = llvm.LLVMConstNull(vt);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = iadd(G, elem_off(G, crow, ci64(G, r), ldc), iadd(G, cj, ci64(G, v * vw)));
			cp[r][v] = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, cbase, &off, 1, ""), vpt, "");
		}
	LLVMBasicBlockRef pre = llvm.LLVMGetInsertBlock(B);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			acc[r][v] = zv;
	LLVMBasicBlockRef head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmk");
	LLVMBasicBlockRef body = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmkbody");
	LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmkdone");
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMPositionBuilderAtEnd(B, head);
	LLVMValueRef k = llvm.LLVMBuildPhi(B, G->i64, "k");
	LLVMValueRef k0 = ci64(G, 0);
	llvm.LLVMAddIncoming(k, &k0, &pre, 1);
	LLVMValueRef phi[MM_MAX_MR][4];
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			phi[r][v] = llvm.LLVMBuildPhi(B, vt, "acc");
			llvm.LLVMAddIncoming(phi[r][v], &acc[r][v], &pre, 1);
		}
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, k, K, ""), body, done);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	LLVMValueRef bv[4], nacc[MM_MAX_MR][4];
	LLVMValueRef brow = iadd(G, imul(G, k, ldb), bj);
	for (int v = 0; v < nv; v++) {
		LLVMValueRef off = iadd(G, brow, ci64(G, v * vw));
		LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, bbase, &off, 1, "");
		bv[v] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, vpt, ""), "");
		llvm.LLVMSetAlignment(bv[v], (unsigned)dtype_size(dt));
	}
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%d%s", vw, dt == DT_F32 ? "f32" : "f64");
	for (int r = 0; r < mr; r++) {
		LLVMValueRef aoff = iadd(G, elem_off(G, arow, ci64(G, r), K), k);
		LLVMValueRef sc = load_at(F, a, aoff);
		LLVMValueRef bc = splat(G, vt, vw, sc);
		for (int v = 0; v < nv; v++) {
			LLVMTypeRef ts[3] = {vt, vt, vt};
			LLVMValueRef vs[3] = {bc, bv[v], phi[r][v]};
			nacc[r][v] = call(G, fma, vt, ts, vs, 3);
		}
	}
	if (stream && llvm.LLVMIsAConstantInt(ldb))
		prefetch_stream(G, bbase, imul(G, brow, ci64(G, dtype_size(dt))), nv * vw * dtype_size(dt));
	if (pf) {
		/* line k >> pfsh of this tile's share of the next panel (mm_rows):
		 * a prefetch every k, the same line 2^pfsh times over (a branch to
		 * skip the repeats made LLVM hoist the broadcasts above it and
		 * spill three accumulators a k step) */
		LLVMValueRef off = llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, k, pfsh, ""), ci64(G, 6), "");
		prefetch_line(G, llvm.LLVMBuildGEP2(B, G->i8, pf, &off, 1, ""));
	}
	LLVMValueRef kn = iadd(G, k, ci64(G, 1));
	LLVMBasicBlockRef end = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMAddIncoming(k, &kn, &end, 1);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			llvm.LLVMAddIncoming(phi[r][v], &nacc[r][v], &end, 1);
	llvm.LLVMPositionBuilderAtEnd(B, done);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			LLVMValueRef x = phi[r][v];
			if (epi) {
				LLVMValueRef col = iadd(G, cj, ci64(G, v * vw));
				x = mm_epi_vec(F, n, x, vw, iadd(G, elem_off(G, crow, ci64(G, r), ldc), col), col);
			}
			LLVMValueRef st = llvm.LLVMBuildStore(B, x, cp[r][v]);
			llvm.LLVMSetAlignment(st, (unsigned)dtype_size(dt));
		}
}

/* Rows [0, M) of one panel as register tiles: tiles of mr rows, then the
 * rest by 8, 4, 2 and 1 rows. Arguments as mm_tile's, with the rows' bases
 * (arow0, crow0) for row 0; with `epi`, the tiles go straight into the
 * result (cbase is its storage, ldc its N) and each is finished by the fused
 * epilogue. */
/* M and N of a matmul's result when they are compile-time constants, else
 * -1. Each on its own: a prefill's projections have a run-time M and a known
 * N, and a known N that is whole panels needs no code for a last partial one
 * (in GPT-2's prefill attention that was half the matmul code, and most of
 * the compile time). */
static int64_t mm_static_m(Fn *F, Node *n, Node *a)
{
	if (n->rank < 1)
		return -1;
	if (n->rank < 2 || a->rank == 1)
		return 1;
	/* a batch of rows times a matrix (k_matmul): all the batch's rows */
	int last = n->rank - 2, first = last;
	if (n->op == OP_MATMUL && n->nin == 2 && n->in && n->in[1]->rank == 2 && a->rank > 2 && dtype_is_float(n->dtype))
		first = 0;
	int64_t m = 1;
	for (int k = first; k <= last; k++) {
		if (!field_static(F, n, k))
			return -1;
		m *= n->shape[k];
	}
	return m;
}

static int64_t mm_static_n(Fn *F, Node *n)
{
	return n->rank < 1 || !field_static(F, n, n->rank - 1) ? -1 : n->shape[n->rank - 1];
}


static void mm_rows(Fn *F, Node *n, Node *a, int mr, int nv, int vw, LLVMValueRef M,
                    LLVMValueRef K, LLVMValueRef arow0, LLVMValueRef panel, LLVMValueRef wide,
                    LLVMValueRef cbase, LLVMValueRef crow0, LLVMValueRef ldc, LLVMValueRef cj, int epi,
                    LLVMValueRef next, int wf)
{
	Gen *G = F->gen;
	int sizes[5] = {mr, 8, 4, 2, 1};
	/* with M known, only the tile heights it needs (less code to compile) */
	int64_t Ms = mm_static_m(F, n, a), left = Ms;
	LLVMValueRef done = ci64(G, 0);
	/* With pre-packed weights (next: where the next panel is), the first
	 * tile of each panel waited for the panel to come from memory: a
	 * model's weights do not stay in the caches from call to call, and the
	 * hardware's prefetchers do not run on into the next panel. Each tile
	 * of height mr prefetches its share of the next panel, a line every
	 * 2^pfsh steps of k so that the shares cover it about once, spread over
	 * the panel's compute (an earlier version fetched all of it from the
	 * first tiles, a line every k, and ran 2.5x slower). At one thread,
	 * interleaved with the build before: GPT-2 small 0.91-0.97x the time,
	 * BERT-base 0.95-0.97x, ViT-B/16 0.91-0.99x. Only with at least 3
	 * tiles a panel, where a line every k step still covers it; with M
	 * known at run time only (a prefill), the same choice made there, and
	 * fewer tiles prefetch their own panel (lines already in the cache). */
	LLVMValueRef pfsh = NULL, pfbase = NULL, share = NULL;
	int64_t K_s = llvm.LLVMIsAConstantInt(K) ? llvm.LLVMConstIntGetSExtValue(K) : -1;
	if (next && wf == WF_F32 && K_s > 0 && llvm.LLVMIsAConstantInt(wide)) {
		int64_t lines = (K_s * llvm.LLVMConstIntGetSExtValue(wide) * dtype_size(n->dtype) + 63) / 64;
		if (Ms >= 0) {
			int64_t ntiles = Ms / mr, e = ntiles * K_s / lines, sh = 0;
			if (ntiles >= 3 && e >= 1) {
				while (((int64_t)2 << sh) <= e && sh < 20)
					sh++;
				pfsh = ci64(G, sh);
				pfbase = next;
				share = ci64(G, (K_s >> sh) * 64);
			}
		} else {
			LLVMBuilderRef B = G->B;
			LLVMValueRef ntiles = idiv(G, M, ci64(G, mr));
			LLVMValueRef e = idiv(G, imul(G, ntiles, K), ci64(G, lines));
			LLVMValueRef ok = llvm.LLVMBuildICmp(B, LLVMIntSGE, ntiles, ci64(G, 3), "");
			e = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSGE, e, ci64(G, 1), ""), e, ci64(G, 1), "");
			LLVMTypeRef ts[2] = {G->i64, G->i1};
			LLVMValueRef vs[2] = {e, llvm.LLVMConstInt(G->i1, 0, 0)};
			pfsh = isub(G, ci64(G, 63), call(G, "llvm.ctlz.i64", G->i64, ts, vs, 2));
			pfbase = llvm.LLVMBuildSelect(B, ok, next, llvm.LLVMBuildPointerCast(B, panel, G->i8p, ""), "");
			share = llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, K, pfsh, ""), ci64(G, 6), "");
		}
	}
	for (int s = 0; s < 5; s++) {
		int h = sizes[s];
		if (s > 0 && h >= mr)
			continue;
		if (Ms >= 0) {
			int64_t cnt = left / h;
			left -= cnt * h;
			if (cnt == 0)
				continue;
		}
		LLVMValueRef cnt = idiv(G, isub(G, M, done), ci64(G, h));
		Loop lt;
		LLVMValueRef t = loop_to(F, &lt, cnt);
		LLVMValueRef i = elem_off(G, done, t, ci64(G, h));
		LLVMValueRef pf = NULL;
		if (pfsh && s == 0) {
			LLVMValueRef off = imul(G, t, share);
			pf = llvm.LLVMBuildGEP2(G->B, G->i8, pfbase, &off, 1, "");
		}
		int regs = epi && mm_epi_in_regs(F, n);
		if (wf != WF_F32)
			mm_tile_fmt(F, n, a, h, nv, vw, wf, K, elem_off(G, arow0, i, K), panel, wide, cbase, elem_off(G, crow0, i, ldc),
			            ldc, cj, regs, Ms == 1);
		else
			mm_tile(F, n, a, h, nv, vw, K, elem_off(G, arow0, i, K),
			        panel, wide, ci64(G, 0), cbase, elem_off(G, crow0, i, ldc), ldc, cj, pf, pfsh, regs, Ms == 1);
		/* else the fused epilogue on the tile just stored, still in L1:
		 * over a whole panel afterwards its rows (N apart) came back from
		 * L3 */
		if (epi && !regs)
			mm_epilogue_rows(F, n, i, ci64(G, h), ldc, crow0, cj, wide);
		loop_end(F, &lt);
		done = elem_off(G, done, cnt, ci64(G, h));
	}
}

/* The register tile of a matmul: mr rows by nv vectors. On AVX-512, 8 rows
 * by 3 vectors (24 accumulators of its 32 registers; per k, 8 broadcasts and
 * 3 loads feed 24 FMAs) measured best at the GPT-2 shapes; 12 by 2 (as many
 * accumulators) when N is a multiple of 2 vectors but not of 3 and small
 * enough that a partial panel would cost. 4 by 2 elsewhere (16 registers).
 * Blocking k so a panel's slice stays in L1 measured slower at the GPT-2
 * shapes than running the whole k with the panel in L2, with or without A
 * packed. */
static void mm_shape(Gen *G, Node *n, int *mr, int *nv)
{
	int vw = G->vbytes / dtype_size(n->dtype);
	int64_t N = n->rank ? n->shape[n->rank - 1] : 1;
	if (G->vbytes != 64) {
		*mr = 4, *nv = 2;
	} else if (N > 0 && (N % (3 * vw) == 0 || N >= 1536)) {
		*mr = 8, *nv = 3;
	} else {
		*mr = 12, *nv = 2;
	}
}

/* The epilogue on columns [cw, cw + ncols) of every row, in place. */
static void mm_epilogue_apply(Fn *F, Node *n, LLVMValueRef M, LLVMValueRef Nn, LLVMValueRef oo, LLVMValueRef cw,
                              LLVMValueRef ncols)
{
	mm_epilogue_rows(F, n, ci64(F->gen, 0), M, Nn, oo, cw, ncols);
}

/* The tiles of panel cw (its `left` columns, `full` when all `wide` are
 * there) from the panel in format wf: a whole panel straight into C, the
 * last one through tmp. Leaves the builder after them. */
static void mm_panel_tiles(Fn *F, Node *n, Node *a, int wf, LLVMValueRef panel, LLVMValueRef next, LLVMValueRef tmp,
                           LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn, LLVMValueRef oa, LLVMValueRef oo,
                           LLVMValueRef cw, LLVMValueRef full, LLVMValueRef left, LLVMValueRef wide)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype);
	int vw = G->vbytes / dtype_size(n->dtype), nv, mr;
	mm_shape(G, n, &mr, &nv);
	LLVMBasicBlockRef whole = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "whole");
	LLVMBasicBlockRef part = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "part");
	LLVMBasicBlockRef after = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "panelend");
	llvm.LLVMBuildCondBr(B, full, whole, part);
	/* a whole panel: straight into C (no code when N is known to have none) */
	int64_t Ns = mm_static_n(F, n);
	llvm.LLVMPositionBuilderAtEnd(B, whole);
	if (Ns < 0 || Ns >= nv * vw)
		mm_rows(F, n, a, mr, nv, vw, M, K, oa, panel, wide, nptr(F, n), oo, Nn, cw, 1, next, wf);
	llvm.LLVMBuildBr(B, after);
	/* the last columns: into tmp, then the valid ones to C */
	llvm.LLVMPositionBuilderAtEnd(B, part);
	if (Ns >= 0 && Ns % (nv * vw) == 0) {
		llvm.LLVMBuildBr(B, after);
		llvm.LLVMPositionBuilderAtEnd(B, after);
		return;
	}
	/* MM_PART_ROWS rows at a time: tmp is on a task's stack, and M rows of
	 * it (10 MB at M = 80000) overflowed it. The chunks are whole tiles but
	 * the last, whose leftover rows are M's: mm_rows's tile heights hold.
	 * With N known at run time only, the last panel's tiles are at most 4
	 * rows high: it is one panel of many (or a small product), and a
	 * second set of the tallest tiles doubled the code LLVM compiles
	 * (GPT-2's prefill attention: 0.5 s of its 2.2). */
	int pmr = Ns < 0 && mr > 4 ? 4 : mr;
	LLVMValueRef R = ci64(G, MM_PART_ROWS);
	Loop lch, li, lj;
	LLVMValueRef r0 = imul(G, loop_to(F, &lch, idiv(G, iadd(G, M, ci64(G, MM_PART_ROWS - 1)), R)), R);
	LLVMValueRef rest = isub(G, M, r0);
	LLVMValueRef mc = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, rest, R, ""), rest, R, "");
	mm_rows(F, n, a, pmr, nv, vw, mc, K, elem_off(G, oa, r0, K), panel, wide, tmp, ci64(G, 0), wide, ci64(G, 0), 0, NULL, wf);
	LLVMValueRef i = loop_to(F, &li, mc);
	LLVMValueRef j = loop_to(F, &lj, left);
	LLVMValueRef so = iadd(G, imul(G, i, wide), j);
	LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, tmp, &so, 1, ""), "");
	store_at(F, n, iadd(G, elem_off(G, oo, iadd(G, r0, i), Nn), iadd(G, cw, j)), x);
	loop_end(F, &lj);
	loop_end(F, &li);
	mm_epilogue_rows(F, n, r0, mc, Nn, oo, cw, left);
	loop_end(F, &lch);
	llvm.LLVMBuildBr(B, after);
	llvm.LLVMPositionBuilderAtEnd(B, after);
}

/* One panel of B, columns jw*wide .. +wide, against every row of A: the
 * panel is the pre-packed copy when `packed` (a run-time pointer, NULL when
 * the runtime has none) points to one, else packed here into `buf` (B's rows
 * are far apart in memory and alias in the cache). A last, partial panel is
 * packed with zeros beyond N, its tiles go to `tmp` (MM_PART_ROWS rows of
 * wide columns at a time) and the valid columns are copied to C. */
static void mm_panel(Fn *F, Node *n, Node *a, LLVMValueRef bbase, LLVMValueRef packed, LLVMValueRef pkfmt,
                     LLVMValueRef buf, LLVMValueRef tmp, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                     LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo, LLVMValueRef jw, int tb)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype);
	int vw = G->vbytes / dtype_size(n->dtype), nv, mr;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef wide = ci64(G, nv * vw);
	LLVMTypeRef vt = llvm.LLVMVectorType(et, (unsigned)vw);
	LLVMTypeRef vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef zero = fconst(G, n->dtype, 0);
	LLVMValueRef cw = imul(G, jw, wide);
	LLVMValueRef left = isub(G, Nn, cw);
	LLVMValueRef full = llvm.LLVMBuildICmp(B, LLVMIntSGE, left, wide, "");
	LLVMValueRef lastcol = isub(G, Nn, ci64(G, 1));

	LLVMBasicBlockRef pk_yes = NULL, pk_no = NULL, join = NULL, fdone = NULL;
	LLVMValueRef pk_ptr = NULL;
	if (packed) {
		pk_yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "prepacked");
		pk_no = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "pack");
		join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packed");
		LLVMValueRef have = llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), "");
		llvm.LLVMBuildCondBr(B, have, pk_yes, pk_no);
		llvm.LLVMPositionBuilderAtEnd(B, pk_yes);
		if (pkfmt) {
			/* the weight's format, known when the instance was made: the
			 * tiles of each format the build holds, f32's by default */
			LLVMBasicBlockRef f32b = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "prepackedf32");
			fdone = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmtdone");
			LLVMValueRef sw = llvm.LLVMBuildSwitch(B, pkfmt, f32b, WF_COUNT);
			for (int wf = WF_F32 + 1; wf < WF_COUNT; wf++) {
				if (!(G->wfmask >> wf & 1))
					continue;
				LLVMBasicBlockRef fb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "prepackedfmt");
				llvm.LLVMAddCase(sw, ci32(G, wf), fb);
				llvm.LLVMPositionBuilderAtEnd(B, fb);
				LLVMValueRef off = imul(G, jw, fmt_panel_bytes(G, wf, K, wide));
				LLVMValueRef pf = llvm.LLVMBuildGEP2(B, G->i8, packed, &off, 1, "");
				mm_panel_tiles(F, n, a, wf, pf, NULL, tmp, M, K, Nn, oa, oo, cw, full, left, wide);
				llvm.LLVMBuildBr(B, fdone);
			}
			llvm.LLVMPositionBuilderAtEnd(B, f32b);
			pk_yes = f32b;
		}
		LLVMValueRef off = imul(G, cw, K);
		pk_ptr = llvm.LLVMBuildGEP2(B, et, llvm.LLVMBuildPointerCast(B, packed, llvm.LLVMPointerType(et, 0), ""), &off, 1, "");
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, pk_no);
	}
	Loop lp, lc, lk;
	if (tb) {
		/* B given transposed, Bt[N, K]: its rows cw.. become the panel's
		 * columns, read along k (contiguous); beyond N, zeros. */
		LLVMValueRef c = loop_to(F, &lc, wide);
		LLVMValueRef col = iadd(G, cw, c);
		LLVMValueRef in = llvm.LLVMBuildICmp(B, LLVMIntSLT, col, Nn, "");
		LLVMValueRef row = imul(G, llvm.LLVMBuildSelect(B, in, col, lastcol, ""), K);
		LLVMValueRef kk = loop_to(F, &lk, K);
		LLVMValueRef so = iadd(G, row, kk);
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, bbase, &so, 1, ""), "");
		LLVMValueRef dof = iadd(G, imul(G, kk, wide), c);
		llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, in, x, zero, ""), llvm.LLVMBuildGEP2(B, et, buf, &dof, 1, ""));
		loop_end(F, &lk);
		loop_end(F, &lc);
	} else {
		/* B[:, cw:cw+wide] by vectors when whole, else element by element */
		LLVMBasicBlockRef vec = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packvec");
		LLVMBasicBlockRef sca = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packone");
		LLVMBasicBlockRef pdone = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packdone");
		llvm.LLVMBuildCondBr(B, full, vec, sca);
		llvm.LLVMPositionBuilderAtEnd(B, vec);
		LLVMValueRef kp = loop_to(F, &lp, K);
		for (int v = 0; v < nv; v++) {
			LLVMValueRef so = iadd(G, elem_off(G, ob, kp, F->bview ? F->bview_ldb : Nn), iadd(G, cw, ci64(G, v * vw)));
			LLVMValueRef x = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, bbase, &so, 1, ""), vpt, ""), "");
			llvm.LLVMSetAlignment(x, (unsigned)dtype_size(n->dtype));
			LLVMValueRef dof = iadd(G, imul(G, kp, wide), ci64(G, v * vw));
			LLVMValueRef st = llvm.LLVMBuildStore(B, x, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, buf, &dof, 1, ""), vpt, ""));
			llvm.LLVMSetAlignment(st, (unsigned)dtype_size(n->dtype));
		}
		loop_end(F, &lp);
		llvm.LLVMBuildBr(B, pdone);
		llvm.LLVMPositionBuilderAtEnd(B, sca);
		LLVMValueRef k2 = loop_to(F, &lk, K);
		LLVMValueRef c = loop_to(F, &lc, wide);
		LLVMValueRef col = iadd(G, cw, c);
		LLVMValueRef in = llvm.LLVMBuildICmp(B, LLVMIntSLT, col, Nn, "");
		LLVMValueRef so = iadd(G, elem_off(G, ob, k2, F->bview ? F->bview_ldb : Nn), llvm.LLVMBuildSelect(B, in, col, lastcol, ""));
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, bbase, &so, 1, ""), "");
		LLVMValueRef dof = iadd(G, imul(G, k2, wide), c);
		llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, in, x, zero, ""), llvm.LLVMBuildGEP2(B, et, buf, &dof, 1, ""));
		loop_end(F, &lc);
		loop_end(F, &lk);
		llvm.LLVMBuildBr(B, pdone);
		llvm.LLVMPositionBuilderAtEnd(B, pdone);
	}
	LLVMValueRef panel = buf, next = NULL;
	if (packed) {
		LLVMBasicBlockRef from = llvm.LLVMGetInsertBlock(B);
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, join);
		panel = llvm.LLVMBuildPhi(B, llvm.LLVMPointerType(et, 0), "panel");
		LLVMValueRef in[2] = {pk_ptr, buf};
		LLVMBasicBlockRef bb[2] = {pk_yes, from};
		llvm.LLVMAddIncoming(panel, in, bb, 2);
		/* the next pre-packed panel, or (packed here) this one again: its
		 * prefetches then hit lines already in the cache */
		llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(pk_yes));
		LLVMValueRef poff = imul(G, K, wide);
		LLVMValueRef pk_next = llvm.LLVMBuildGEP2(B, et, pk_ptr, &poff, 1, "");
		llvm.LLVMPositionBuilderAtEnd(B, join);
		next = llvm.LLVMBuildPhi(B, llvm.LLVMPointerType(et, 0), "nextpanel");
		LLVMValueRef nin[2] = {pk_next, buf};
		llvm.LLVMAddIncoming(next, nin, bb, 2);
		next = llvm.LLVMBuildPointerCast(B, next, G->i8p, "");
	}

	mm_panel_tiles(F, n, a, WF_F32, panel, next, tmp, M, K, Nn, oa, oo, cw, full, left, wide);
	if (fdone) {
		llvm.LLVMBuildBr(B, fdone);
		llvm.LLVMPositionBuilderAtEnd(B, fdone);
	}
}

/* One row of A (M = 1) times B read in place (rows ldb apart, from ob) into
 * C's row at oo: register tiles of 1 row by 4 vectors, then by 1, then the
 * last columns one at a time. Nothing is packed: each element of B is read
 * once, as a decode step's attention over the cache wants (packing the cache
 * read it twice; a row accumulated through memory waited on its own stores,
 * k after k). */
static void mv_row(Fn *F, Node *n, Node *a, Node *bn, LLVMValueRef K, LLVMValueRef Nn, LLVMValueRef ldb,
                   LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int vw = G->vbytes / dtype_size(n->dtype);
	LLVMValueRef bbase = nptr(F, bn), cbase = nptr(F, n), done = ci64(G, 0);
	/* a long row (a decode step's scores over the cache): B's rows streamed
	 * one after the other into C's row, which stays in L1; register tiles
	 * would read B down its columns, a line of each of K rows at a time */
	LLVMBasicBlockRef wide = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvwide");
	LLVMBasicBlockRef tiles = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvtiles");
	LLVMBasicBlockRef join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvrowdone");
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSGE, Nn, ci64(G, 16 * vw), ""), wide, tiles);
	llvm.LLVMPositionBuilderAtEnd(B, wide);
	Loop lz, lk, lj;
	LLVMValueRef z = loop_to(F, &lz, Nn);
	store_at(F, n, iadd(G, oo, z), fconst(G, n->dtype, 0));
	loop_end(F, &lz);
	LLVMValueRef kk = loop_to(F, &lk, K);
	LLVMValueRef aik = load_at(F, a, iadd(G, oa, kk));
	LLVMValueRef brow = elem_off(G, ob, kk, ldb);
	LLVMValueRef j = loop_to(F, &lj, Nn);
	LLVMValueRef oidx = iadd(G, oo, j);
	LLVMValueRef prod = llvm.LLVMBuildFMul(B, aik, load_at(F, bn, iadd(G, brow, j)), "");
	store_at(F, n, oidx, llvm.LLVMBuildFAdd(B, load_at(F, n, oidx), prod, ""));
	loop_end(F, &lj);
	loop_end(F, &lk);
	llvm.LLVMBuildBr(B, join);
	/* a short row (a decode step's weighted sum of values): the row in
	 * registers, 1 by 4 vectors, then 1 by 1, then the last columns */
	llvm.LLVMPositionBuilderAtEnd(B, tiles);
	for (int nv = 4; nv >= 1; nv -= 3) {
		LLVMValueRef w = ci64(G, nv * vw);
		LLVMValueRef cnt = idiv(G, isub(G, Nn, done), w);
		Loop lt;
		LLVMValueRef cj = elem_off(G, done, loop_to(F, &lt, cnt), w);
		mm_tile(F, n, a, 1, nv, vw, K, oa, bbase, ldb, iadd(G, ob, cj), cbase, oo, Nn, cj, NULL, NULL, 0, 0);
		loop_end(F, &lt);
		done = elem_off(G, done, cnt, w);
	}
	Loop lc, lk2;
	LLVMValueRef c = iadd(G, done, loop_to(F, &lc, isub(G, Nn, done)));
	LLVMValueRef cidx = iadd(G, oo, c);
	store_at(F, n, cidx, fconst(G, n->dtype, 0));
	LLVMValueRef k2 = loop_to(F, &lk2, K);
	LLVMValueRef p2 = llvm.LLVMBuildFMul(B, load_at(F, a, iadd(G, oa, k2)),
	                                     load_at(F, bn, iadd(G, elem_off(G, ob, k2, ldb), c)), "");
	store_at(F, n, cidx, llvm.LLVMBuildFAdd(B, load_at(F, n, cidx), p2, ""));
	loop_end(F, &lk2);
	loop_end(F, &lc);
	llvm.LLVMBuildBr(B, join);
	llvm.LLVMPositionBuilderAtEnd(B, join);
}

/* When big, malloc(bytes) (abort when there is no memory: a task has no
 * way to report it), else NULL; in a block of its own. */
static LLVMValueRef mm_heap_panel(Fn *F, LLVMValueRef big, LLVMValueRef bytes)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMBasicBlockRef from = llvm.LLVMGetInsertBlock(B);
	LLVMBasicBlockRef yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmheap");
	LLVMBasicBlockRef oom = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmoom");
	LLVMBasicBlockRef join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmheapdone");
	llvm.LLVMBuildCondBr(B, big, yes, join);
	llvm.LLVMPositionBuilderAtEnd(B, yes);
	LLVMTypeRef at[1] = {G->i64};
	LLVMValueRef p = call(G, "malloc", G->i8p, at, &bytes, 1);
	LLVMValueRef null = llvm.LLVMConstPointerNull(G->i8p);
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, p, null, ""), oom, join);
	llvm.LLVMPositionBuilderAtEnd(B, oom);
	call(G, "abort", llvm.LLVMVoidTypeInContext(G->C), NULL, NULL, 0);
	llvm.LLVMBuildBr(B, join); /* not taken: abort does not return */
	llvm.LLVMPositionBuilderAtEnd(B, join);
	LLVMValueRef phi = llvm.LLVMBuildPhi(B, G->i8p, "mmheapp");
	LLVMValueRef in[3] = {p, null, null};
	LLVMBasicBlockRef bb[3] = {yes, from, oom};
	llvm.LLVMAddIncoming(phi, in, bb, 3);
	return phi;
}

/* A matmul as tasks of the runtime's thread pool: a function of this module
 * runs tasks [begin, end) with its packing buffers on its own stack; the
 * operands and sizes travel in an i64 array (a, b, c, M, K, N, packed). A
 * task is a panel of B's columns (MM_PANELS) or one matrix of a batch
 * (MM_BATCH). */
enum { MM_PANELS, MM_BATCH };

static void mm_pool(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                    LLVMValueRef ntasks, int what, int tb, LLVMValueRef packed, LLVMValueRef pkfmt)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int vw = G->vbytes / dtype_size(n->dtype);
	/* then the other operands of the fused epilogue */
	Node *ops[8], *other[8];
	int first[8];
	int nepi = mm_epilogue(F, n, ops, other, first);
	/* B through a virtual slice (MM_BATCH): its storage, row length, matrix
	 * stride and start go along after the epilogue's operands */
	Node *bv = what == MM_BATCH ? F->bview : NULL;
	int nenv = 8 + nepi + (bv ? 3 : 0);
	int ifmt = pkfmt ? nenv++ : -1; /* the packed copy's format goes last */
	int iqa = F->qa ? nenv++ : -1;   /* and the quantized activations (int8 activations) */
	/* a task a panel: the pool hands out runs of them, shorter towards the
	 * end (guided), so that the threads finish together; a matrix-vector
	 * product (a decode step) is paced by memory, and two threads that
	 * read at different speeds ended up to a sixth of it apart with three
	 * fixed runs each */
	LLVMValueRef vals[8 + 8 + 3 + 2] = {
		llvm.LLVMBuildPtrToInt(B, nptr(F, a), G->i64, ""), llvm.LLVMBuildPtrToInt(B, nptr(F, bv ? bv : b), G->i64, ""),
		llvm.LLVMBuildPtrToInt(B, nptr(F, n), G->i64, ""), M, K, Nn,
		packed ? llvm.LLVMBuildPtrToInt(B, packed, G->i64, "") : ci64(G, 0), ntasks,
	};
	for (int i = 0; i < nepi; i++)
		vals[8 + i] = other[i] && !scalar_of_consts(other[i], 0) ? llvm.LLVMBuildPtrToInt(B, nptr(F, other[i]), G->i64, "")
		                                                   : ci64(G, 0);
	if (bv) {
		vals[8 + nepi] = F->bview_ldb;
		vals[9 + nepi] = F->bview_batch;
		vals[10 + nepi] = F->bview_start;
	}
	if (pkfmt)
		vals[ifmt] = llvm.LLVMBuildZExt(B, pkfmt, G->i64, "");
	if (iqa >= 0)
		vals[iqa] = llvm.LLVMBuildPtrToInt(B, F->qa, G->i64, "");
	Fn T;
	LLVMValueRef got[8 + 8 + 3 + 2];
	Task tk = task_begin(F, &T, "mm", vals, nenv, got);
	LLVMValueRef tfmt = pkfmt ? llvm.LLVMBuildTrunc(B, got[ifmt], G->i32, "fmt") : NULL;
	if (iqa >= 0) {
		/* laid out as mm_tiled made them: M K bytes, then M K / 32 scales and sums */
		T.qa = llvm.LLVMBuildIntToPtr(B, got[iqa], G->i8p, "qa");
		LLVMValueRef mk = imul(G, got[3], got[4]);
		LLVMValueRef nblk = idiv(G, mk, ci64(G, 32));
		T.qd = llvm.LLVMBuildGEP2(B, G->i8, T.qa, &mk, 1, "qd");
		LLVMValueRef o4 = iadd(G, mk, imul(G, nblk, ci64(G, 4)));
		T.qs = llvm.LLVMBuildGEP2(B, G->i8, T.qa, &o4, 1, "qs");
		T.qoa = ci64(G, 0);
	}
	for (int i = 0; i < nepi; i++)
		if (other[i] && !scalar_of_consts(other[i], 0))
			T.ptr[other[i]->id] = llvm.LLVMBuildIntToPtr(B, got[8 + i], llvm.LLVMPointerType(elem_t(G, other[i]->dtype), 0), "");
	T.ptr[a->id] = llvm.LLVMBuildIntToPtr(B, got[0], ept, "a");
	T.ptr[bv ? bv->id : b->id] = llvm.LLVMBuildIntToPtr(B, got[1], ept, "b");
	if (bv) {
		T.bview = bv;
		T.bview_ldb = got[8 + nepi];
	}
	T.ptr[n->id] = llvm.LLVMBuildIntToPtr(B, got[2], ept, "c");
	LLVMValueRef tpk = packed ? llvm.LLVMBuildIntToPtr(B, got[6], G->i8p, "packed") : NULL;
	int mr, nv;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef wide = ci64(G, nv * vw);
	/* the packing buffers, sized at run time, on the task's stack (the
	 * entry block, so that they are allocated once per task call): a panel
	 * of K rows up to MM_STACK_PANEL bytes, else from malloc (K = 100000
	 * took 19 MB and overflowed the stack); MM_PART_ROWS rows of tiles */
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	LLVMValueRef pel = imul(G, got[4], wide);
	LLVMValueRef big = llvm.LLVMBuildICmp(B, LLVMIntSGT, pel, ci64(G, MM_STACK_PANEL / dtype_size(n->dtype)), "");
	LLVMValueRef sbuf = llvm.LLVMBuildArrayAlloca(B, et, llvm.LLVMBuildSelect(B, big, ci64(G, 1), pel, ""), "panel");
	llvm.LLVMSetAlignment(sbuf, 64);
	LLVMValueRef prow = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, got[3], ci64(G, MM_PART_ROWS), ""),
	                                         got[3], ci64(G, MM_PART_ROWS), "");
	LLVMValueRef tmp = llvm.LLVMBuildArrayAlloca(B, et, imul(G, prow, wide), "part");
	llvm.LLVMSetAlignment(tmp, 64);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	LLVMValueRef heap = mm_heap_panel(&T, big, imul(G, pel, ci64(G, dtype_size(n->dtype))));
	LLVMValueRef buf = llvm.LLVMBuildSelect(B, big, llvm.LLVMBuildPointerCast(B, heap, ept, ""), sbuf, "");
	Loop lt;
	LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef z = ci64(G, 0);
	if (what == MM_PANELS) {
		LLVMValueRef np = idiv(G, iadd(G, got[5], ci64(G, nv * vw - 1)), wide);
		LLVMValueRef p0 = idiv(G, imul(G, t, np), got[7]);
		LLVMValueRef p1 = idiv(G, imul(G, iadd(G, t, ci64(G, 1)), np), got[7]);
		Loop lp;
		LLVMValueRef jw = loop_begin(&T, &lp, p0, p1);
		mm_panel(&T, n, a, T.ptr[b->id], tpk, tfmt, buf, tmp, got[3], got[4], got[5], z, z, z, jw, tb);
		loop_end(&T, &lp);
	} else {
		LLVMValueRef oa = imul(G, t, imul(G, got[3], got[4]));
		LLVMValueRef ob = bv ? iadd(G, got[10 + nepi], imul(G, t, got[9 + nepi])) : imul(G, t, imul(G, got[4], got[5]));
		LLVMValueRef oo = imul(G, t, imul(G, got[3], got[5]));
		mm_tiled(&T, n, a, b, got[3], got[4], got[5], oa, ob, oo, 0, tb, NULL, NULL, buf, tmp);
	}
	loop_end(&T, &lt);
	LLVMTypeRef ft[1] = {G->i8p};
	call(G, "free", llvm.LLVMVoidTypeInContext(G->C), ft, &heap, 1);
	task_end(F, &T, &tk, ntasks);
}

/* C = A @ B for one matrix (offsets oa, ob, oo): panels of B two vectors
 * wide, on the thread pool when `plain` (the only matmul of its loop nest). */
void mm_tiled(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                     LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo, int plain, int tb, LLVMValueRef packed,
                     LLVMValueRef pkfmt, LLVMValueRef buf_in, LLVMValueRef tmp_in)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int vw = G->vbytes / dtype_size(n->dtype);
	int mr, nv;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef wide = ci64(G, nv * vw);
	LLVMValueRef npanels = idiv(G, iadd(G, Nn, ci64(G, nv * vw - 1)), wide);
	/* int8 activations for a weight in q8_0, q4_0 or q4_k: quantized once, for
	 * every panel (and task) to read */
	LLVMValueRef qheap = NULL;
	if (G->dot && packed && pkfmt && n->dtype == DT_F32 && a->dtype == DT_F32) {
		LLVMValueRef isq = llvm.LLVMConstInt(G->i1, 0, 0);
		for (int wf = WF_F32 + 1; wf < WF_COUNT; wf++)
			if (wformat_dot(wf))
				isq = llvm.LLVMBuildOr(B, isq, llvm.LLVMBuildICmp(B, LLVMIntEQ, pkfmt, ci32(G, wf), ""), "");
		isq = llvm.LLVMBuildAnd(B, isq, llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), ""), "");
		LLVMValueRef mk = imul(G, M, K);
		LLVMValueRef nblk = idiv(G, mk, ci64(G, 32));
		qheap = mm_heap_panel(F, isq, iadd(G, mk, imul(G, nblk, ci64(G, 8))));
		F->qa = qheap;
		F->qd = llvm.LLVMBuildGEP2(B, G->i8, qheap, &mk, 1, "qd");
		LLVMValueRef o4 = iadd(G, mk, imul(G, nblk, ci64(G, 4)));
		F->qs = llvm.LLVMBuildGEP2(B, G->i8, qheap, &o4, 1, "qs");
		F->qoa = oa;
		LLVMBasicBlockRef yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "quantize");
		LLVMBasicBlockRef after = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "quantized");
		llvm.LLVMBuildCondBr(B, isq, yes, after);
		llvm.LLVMPositionBuilderAtEnd(B, yes);
		mm_quantize_a(F, a, M, K, oa, F->qa, F->qd, F->qs);
		llvm.LLVMBuildBr(B, after);
		llvm.LLVMPositionBuilderAtEnd(B, after);
	}
	if (packed && F->kp_on && !F->par_lo) {
		/* NESTRT_PROFILE=2: the weight's bytes as held (its packed copy, or
		 * f32 read in place), per 256 elements: f32 1024, 16 bits 512, q8_0
		 * 272, q4_0 and q4_k 144, q6_k 210 */
		if (!F->kp_bytes) {
			F->kp_bytes = entry_alloca(F, G->i64, "kp.bytes");
			F->kp_fmt = entry_alloca(F, G->i32, "kp.fmt");
		}
		LLVMValueRef f = pkfmt ? pkfmt : ci32(G, WF_F32);
		f = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, packed, llvm.LLVMConstPointerNull(G->i8p), ""),
		                         ci32(G, WF_F32), f, "");
		LLVMValueRef per = ci64(G, 1024);
		for (int wf = WF_F32 + 1; wf < WF_COUNT; wf++)
			per = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, f, ci32(G, wf), ""),
			                           ci64(G, 256 / wformat_block(wf) * wformat_block_bytes(wf)), per, "");
		llvm.LLVMBuildStore(B, idiv(G, imul(G, imul(G, K, Nn), per), ci64(G, 256)), F->kp_bytes);
		llvm.LLVMBuildStore(B, f, F->kp_fmt);
		F->kp_read = 1;
	}
	if (plain) {
		/* the panels are independent: run them on the thread pool */
		mm_pool(F, n, a, b, M, K, Nn, npanels, MM_PANELS, tb, packed, pkfmt);
		if (qheap) {
			LLVMTypeRef ft[1] = {G->i8p};
			call(G, "free", llvm.LLVMVoidTypeInContext(G->C), ft, &qheap, 1);
			F->qa = F->qd = F->qs = F->qoa = NULL;
		}
		return;
	}
	/* the scratch area of the workspace: the panel, then the partial tile rows */
	LLVMValueRef buf = buf_in, tmp = tmp_in;
	if (!buf) {
		LLVMValueRef soff = ci64(G, F->plan->scratch);
		buf = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "panel");
		LLVMValueRef toff = imul(G, K, wide);
		tmp = llvm.LLVMBuildGEP2(B, et, buf, &toff, 1, "part");
	}
	Loop lw;
	LLVMValueRef jw = loop_to(F, &lw, npanels);
	mm_panel(F, n, a, F->bview ? nptr(F, F->bview) : nptr(F, b), packed, pkfmt, buf, tmp, M, K, Nn, oa, ob, oo, jw, tb);
	loop_end(F, &lw);
	if (qheap) {
		LLVMTypeRef ft[1] = {G->i8p};
		call(G, "free", llvm.LLVMVoidTypeInContext(G->C), ft, &qheap, 1);
		F->qa = F->qd = F->qs = F->qoa = NULL;
	}
}

/* Can b be a model's weight: a param or an argument, or a reshape of one
 * (the same memory: ONNX's LSTM weights [1, 4H, I] are read as [4H, I]
 * so)? pack_plan's records and mm_prepacked agree through it. */
static int mm_weight(const Node *b)
{
	while (b->op == OP_RESHAPE)
		b = b->in[0];
	return b->op == OP_PARAM || b->op == OP_INPUT;
}

/* The pre-packed copy of a matmul's right operand when it is a model's
 * weight (libnestrt packs it on first use, nestrt_packed), else NULL at run
 * time. Only for operands that may be weights (mm_weight). */
static LLVMValueRef mm_prepacked(Fn *F, Node *n, Node *b, LLVMValueRef K, LLVMValueRef Nn, int tb, LLVMValueRef *fmt)
{
	Gen *G = F->gen;
	*fmt = NULL;
	if (!mm_weight(b))
		return NULL;
	int vw = G->vbytes / dtype_size(n->dtype);
	LLVMTypeRef at[7] = {G->i8p, G->i8p, G->i64, G->i64, G->i64, G->i32, llvm.LLVMPointerType(G->i32, 0)};
	int mr, nv;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef av[7] = {F->ctx, llvm.LLVMBuildPointerCast(G->B, nptr(F, b), G->i8p, ""), K, Nn, ci64(G, nv * vw),
	                      ci32(G, (tb ? 1 : 0) | (n->dtype == DT_F64 ? 2 : 0)), NULL};
	if (!G->wfmask || n->dtype != DT_F32)
		return call(G, "nestrt_packed", G->i8p, at, av, 6);
	/* the build holds weights in formats: the copy says which it is in */
	LLVMValueRef slot = entry_alloca(F, G->i32, "pkfmt");
	av[6] = slot;
	LLVMValueRef pk = call(G, "nestrt_packed_format", G->i8p, at, av, 7);
	*fmt = llvm.LLVMBuildLoad2(G->B, G->i32, slot, "");
	return pk;
}

/* NumPy matmul with broadcast batch axes; i-k-j order so the inner loop runs
 * along contiguous rows of b and of the result */
void k_matmul(Fn *F, Node *n)
{
	if (dtype_is_float(n->dtype) && virtual_transpose(F->g, n->in[1])) {
		/* A @ transpose(Bt): Bt's rows packed as panels, the same tiles */
		Node *a = n->in[0], *bt = n->in[1]->in[0];
		LLVMValueRef z = ci64(F->gen, 0);
		/* a known weight: its panels pre-packed and on the pool, whatever M is */
		int plain = !(F->v && F->v->ndyn) && !gdyn_has(F->g, bt);
		LLVMValueRef K = dimv(F, a, 1), Nn = dimv(F, bt, 0);
		LLVMValueRef fmt = NULL, pk = plain ? mm_prepacked(F, n, bt, K, Nn, 1, &fmt) : NULL;
		mm_tiled(F, n, a, bt, dimv(F, a, 0), K, Nn, z, z, z, plain, 1, pk, fmt, NULL, NULL);
		return;
	}
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *a = n->in[0], *b = n->in[1];
	DType dt = n->dtype;
	int fl = dtype_is_float(dt);
	LLVMValueRef M = a->rank == 1 ? ci64(G, 1) : dimv(F, a, a->rank - 2);
	LLVMValueRef K = dimv(F, a, a->rank - 1);
	LLVMValueRef Nn = b->rank == 1 ? ci64(G, 1) : dimv(F, b, b->rank - 1);
	int batch = n->rank - (a->rank != 1) - (b->rank != 1);
	if (fl && b->rank == 2 && a->rank > 2) {
		/* a batch of rows times one matrix (a weight, most often): a's and
		 * the result's batch axes are more rows, one product over them all,
		 * its B pre-packed as a 2-D product's (plan_mm asks for it so) */
		LLVMValueRef rows = M, z = ci64(G, 0);
		for (int k = 0; k < a->rank - 2; k++)
			rows = imul(G, rows, dimv(F, a, k));
		int plain = !(F->v && F->v->ndyn) && !gdyn_has(F->g, b);
		LLVMValueRef fmt = NULL, pk = plain ? mm_prepacked(F, n, b, K, Nn, 0, &fmt) : NULL;
		mm_tiled(F, n, a, b, rows, K, Nn, z, z, z, plain, 0, pk, fmt, NULL, NULL);
		return;
	}
	/* batch strides (elements) of a, b and the result */
	LLVMValueRef sa[MAX_RANK], sb[MAX_RANK], so[MAX_RANK];
	LLVMValueRef mat_a = imul(G, M, K), mat_b = imul(G, K, Nn), mat_o = imul(G, M, Nn);
	/* b a virtual slice of a state (plan.c): read in place, the sliced
	 * tensor's strides, from the slice's start */
	Node *bv = fl && b->rank >= 3 && virtual_slice(F->g, b) ? b->in[0] : NULL;
	LLVMValueRef bstart = NULL;
	if (bv) {
		LLVMValueRef st[MAX_RANK];
		strides(F, bv, bv->rank, NULL, st);
		bstart = ci64(G, 0);
		for (int k = 0; k < bv->rank; k++)
			bstart = elem_off(G, bstart, attrv(F, b, k), st[k]);
		mat_b = imul(G, dimv(F, bv, bv->rank - 2), dimv(F, bv, bv->rank - 1));
	}
	LLVMValueRef ra = mat_a, rb = mat_b, ro = mat_o;
	for (int k = batch - 1; k >= 0; k--) {
		int ia = k - (batch - (a->rank - 2)), ib = k - (batch - (b->rank - 2));
		int64_t da = ia >= 0 && a->rank > 2 ? a->shape[ia] : 1;
		int64_t db = ib >= 0 && b->rank > 2 ? b->shape[ib] : 1;
		sa[k] = (ia >= 0 && a->rank > 2 && !(da == 1 && n->shape[k] != 1)) ? ra : ci64(G, 0);
		sb[k] = (ib >= 0 && b->rank > 2 && !(db == 1 && n->shape[k] != 1)) ? rb : ci64(G, 0);
		so[k] = ro;
		if (ia >= 0 && a->rank > 2)
			ra = imul(G, ra, dimv(F, a, ia));
		if (ib >= 0 && b->rank > 2)
			rb = imul(G, rb, dimv(F, bv ? bv : b, ib));
		ro = imul(G, ro, dimv(F, n, k));
	}
	/* one row per head at run time (a decode step's attention): the heads on
	 * the pool, each a row times its B read once in place, then the fused
	 * epilogue (scale, causal mask) on the row */
	LLVMBasicBlockRef mv_after = NULL;
	Node *bn = bv ? bv : b;
	if (fl && b->rank == 3 && n->rank == 3 && a->rank == 3 && batch == 1 && node_dynamic(F, n) &&
	    !gdyn_find(F->g, n->id, 0) && !gdyn_find(F->g, a->id, 0) && !gdyn_find(F->g, b->id, 0) &&
	    a->shape[0] == n->shape[0] && b->shape[0] == n->shape[0] && n->shape[0] > 1) {
		LLVMBasicBlockRef one = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvheads");
		LLVMBasicBlockRef rest = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvrest");
		mv_after = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvheadsdone");
		llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, M, ci64(G, 1), ""), one, rest);
		llvm.LLVMPositionBuilderAtEnd(B, one);
		Node *ops[8], *other[8];
		int first[8];
		int nepi = mm_epilogue(F, n, ops, other, first);
		LLVMValueRef vals[8 + 8] = {
			llvm.LLVMBuildPtrToInt(B, nptr(F, a), G->i64, ""), llvm.LLVMBuildPtrToInt(B, nptr(F, bn), G->i64, ""),
			llvm.LLVMBuildPtrToInt(B, nptr(F, n), G->i64, ""), K, Nn, bv ? dimv(F, bv, bv->rank - 1) : Nn, sb[0],
			bstart ? bstart : ci64(G, 0),
		};
		for (int i = 0; i < nepi; i++)
			vals[8 + i] = other[i] && !scalar_of_consts(other[i], 0)
			                  ? llvm.LLVMBuildPtrToInt(B, nptr(F, other[i]), G->i64, "") : ci64(G, 0);
		Fn T;
		LLVMValueRef got[8 + 8];
		Task tk = task_begin(F, &T, "mv", vals, 8 + nepi, got);
		LLVMTypeRef ept = llvm.LLVMPointerType(elem_t(G, dt), 0);
		T.ptr[a->id] = llvm.LLVMBuildIntToPtr(B, got[0], ept, "a");
		T.ptr[bn->id] = llvm.LLVMBuildIntToPtr(B, got[1], ept, "b");
		T.ptr[n->id] = llvm.LLVMBuildIntToPtr(B, got[2], ept, "c");
		for (int i = 0; i < nepi; i++)
			if (other[i] && !scalar_of_consts(other[i], 0))
				T.ptr[other[i]->id] = llvm.LLVMBuildIntToPtr(B, got[8 + i],
				                                             llvm.LLVMPointerType(elem_t(G, other[i]->dtype), 0), "");
		Loop lt;
		LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
		LLVMValueRef to = imul(G, t, got[4]);
		mv_row(&T, n, a, bn, got[3], got[4], got[5], imul(G, t, got[3]), iadd(G, got[7], imul(G, t, got[6])), to);
		mm_epilogue_rows(&T, n, ci64(G, 0), ci64(G, 1), got[4], to, ci64(G, 0), got[4]);
		loop_end(&T, &lt);
		task_end(F, &T, &tk, ci64(G, n->shape[0]));
		llvm.LLVMBuildBr(B, mv_after);
		llvm.LLVMPositionBuilderAtEnd(B, rest);
	}
	/* batched without broadcasting (attention's heads): one task per matrix;
	 * with run-time dims too when the batch axes are known, B read in place
	 * when it is a slice of a state (a prefill's attention over the cache) */
	if (batch > 0 && (!bv || batch == 1) && matmul_pooled(F->g, n, F->v && F->v->ndyn && node_dynamic(F, n))) {
		LLVMValueRef nb = ci64(G, 1);
		for (int k = 0; k < batch; k++)
			nb = imul(G, nb, dimv(F, n, k));
		if (bv) {
			F->bview = bv;
			F->bview_ldb = dimv(F, bv, bv->rank - 1);
			F->bview_batch = sb[batch - 1];
			F->bview_start = bstart;
		}
		mm_pool(F, n, a, b, M, K, Nn, nb, MM_BATCH, 0, NULL, NULL);
		F->bview = NULL;
		if (mv_after) {
			llvm.LLVMBuildBr(B, mv_after);
			llvm.LLVMPositionBuilderAtEnd(B, mv_after);
		}
		return;
	}
	Loop bl[MAX_RANK];
	LLVMValueRef oa = ci64(G, 0), ob = bstart ? bstart : ci64(G, 0), oo = ci64(G, 0);
	for (int k = 0; k < batch; k++) {
		LLVMValueRef i = loop_to(F, &bl[k], dimv(F, n, k));
		oa = elem_off(G, oa, i, sa[k]);
		ob = elem_off(G, ob, i, sb[k]);
		oo = elem_off(G, oo, i, so[k]);
	}
	if (fl && b->rank != 1) {
		int plain = batch == 0 && !(F->v && F->v->ndyn) && !gdyn_has(F->g, b);
		LLVMBasicBlockRef after = NULL;
		if (!plain && fn_dynamic(F)) {
			/* one row at run time (a decode step's attention): a plain row
			 * times B, read once in place, no packing */
			LLVMBasicBlockRef one = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvone");
			LLVMBasicBlockRef many = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvmany");
			after = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mvdone");
			llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, M, ci64(G, 1), ""), one, many);
			llvm.LLVMPositionBuilderAtEnd(B, one);
			mv_row(F, n, a, bv ? bv : b, K, Nn, bv ? dimv(F, bv, bv->rank - 1) : Nn, oa, ob, oo);
			/* the fused epilogue (scale, causal mask, ...) over the row */
			mm_epilogue_apply(F, n, ci64(G, 1), Nn, oo, ci64(G, 0), Nn);
			llvm.LLVMBuildBr(B, after);
			llvm.LLVMPositionBuilderAtEnd(B, many);
		}
		F->bview = bv;
		F->bview_ldb = bv ? dimv(F, bv, bv->rank - 1) : NULL;
		LLVMValueRef fmt = NULL, pk = plain && !bv ? mm_prepacked(F, n, b, K, Nn, 0, &fmt) : NULL;
		mm_tiled(F, n, a, b, M, K, Nn, oa, ob, oo, plain && !bv, 0, pk, fmt, NULL, NULL);
		F->bview = NULL;
		if (after) {
			llvm.LLVMBuildBr(B, after);
			llvm.LLVMPositionBuilderAtEnd(B, after);
		}
		for (int k = batch - 1; k >= 0; k--)
			loop_end(F, &bl[k]);
		if (mv_after) {
			llvm.LLVMBuildBr(B, mv_after);
			llvm.LLVMPositionBuilderAtEnd(B, mv_after);
		}
		return;
	}
	LLVMValueRef zero = fl ? fconst(G, dt, 0) : llvm.LLVMConstInt(elem_t(G, dt), 0, 0);
	Loop li, lz, lk, lj;
	LLVMValueRef i = loop_to(F, &li, M);
	LLVMValueRef orow = elem_off(G, oo, i, Nn);
	LLVMValueRef z = loop_to(F, &lz, Nn);
	store_at(F, n, iadd(G, orow, z), zero);
	loop_end(F, &lz);
	LLVMValueRef kk = loop_to(F, &lk, K);
	LLVMValueRef aik = load_at(F, a, iadd(G, oa, iadd(G, imul(G, i, K), kk)));
	LLVMValueRef brow = elem_off(G, ob, kk, Nn);
	LLVMValueRef j = loop_to(F, &lj, Nn);
	LLVMValueRef oidx = iadd(G, orow, j);
	LLVMValueRef prod = fl ? llvm.LLVMBuildFMul(B, aik, load_at(F, b, iadd(G, brow, j)), "")
	                       : imul(G, aik, load_at(F, b, iadd(G, brow, j)));
	LLVMValueRef acc = load_at(F, n, oidx);
	store_at(F, n, oidx, fl ? llvm.LLVMBuildFAdd(B, acc, prod, "") : iadd(G, acc, prod));
	loop_end(F, &lj);
	loop_end(F, &lk);
	loop_end(F, &li);
	for (int k = batch - 1; k >= 0; k--)
		loop_end(F, &bl[k]);
}

/* ---- the pack plan: what nestrt_packed will be asked for (issue #14) ----
 *
 * libnestrt packs weights when a model instance is created, never inside a
 * call, so it must know beforehand which (weight, k, n, wide, flags) compiled
 * matmuls ask it for, and which weights are also read as they are (those keep
 * their unpacked copy; the others lose it). Each variant's object and the
 * model object carry that as a table of int64: a count, then records of six
 *     PACK_REC  src k n wide flags    a prepacked matmul operand
 *     CALL_REC  src slot arg site 0   src is argument `arg` of the variant in `slot`
 *     READ_REC  src 0 0 0 0           src is read some other way
 *     GATHER_REC src rows cols flags 0 rows of src are gathered (k_gather): a
 *                                      packed copy of all of it serves them
 * where src >= 0 is the graph's input number and src < 0 param -(src + 1).
 * The decisions below mirror k_matmul and mm_prepacked exactly; a request the
 * plan missed still works (nestrt_packed returns NULL: packed as it goes). */
enum { PACK_REC = 1, CALL_REC = 2, READ_REC = 3, GATHER_REC = 4 };
#define SRC_NONE INT64_MIN

typedef struct PlanOut {
	int64_t *v;
	int n, cap;   /* int64s, records of 6 */
	int64_t sites;
} PlanOut;

static void plan_rec(PlanOut *o, int64_t kind, int64_t src, int64_t a, int64_t b, int64_t c, int64_t d)
{
	if (o->n + 6 > o->cap) {
		o->cap = o->cap ? 2 * o->cap : 64;
		o->v = xrealloc(o->v, (size_t)o->cap * sizeof *o->v);
	}
	int64_t r[6] = {kind, src, a, b, c, d};
	for (int i = 0; i < 6; i++)
		o->v[o->n++] = r[i];
}

/* The source a node stands for in this graph, or SRC_NONE. */
static int64_t plan_src(Node *s, const int64_t *map, int entry)
{
	if (s->op == OP_PARAM)
		return -(s->a[0] + 1);
	if (s->op == OP_INPUT && !entry)
		return map ? map[s->a[0]] : s->a[0];
	return SRC_NONE;
}

/* Is x (a matmul reading b as its right operand, through a virtual transpose
 * when tb) one that asks for b pre-packed? Then its request into rec. */
static int plan_mm(Gen *G, Graph *g, Variant *v, Node *x, Node *b, int tb, int dyn, int64_t rec[4])
{
	/* as k_matmul decides: a right operand whose shape is known (M may vary) */
	if (x->op != OP_MATMUL || !dtype_is_float(x->dtype) || (v && v->ndyn) || (dyn && gdyn_has(g, b)))
		return 0;
	Node *a = x->in[0];
	int64_t K, N;
	if (tb) {
		K = a->shape[1];
		N = b->shape[0];
	} else {
		/* a batch of rows times a matrix is one 2-D product (k_matmul) */
		int batch = x->rank - (a->rank != 1) - (b->rank != 1);
		if (b->rank == 1 || (batch != 0 && !(b->rank == 2 && a->rank > 2)))
			return 0;
		K = a->shape[a->rank - 1];
		N = b->shape[b->rank - 1];
	}
	int mr, nv;
	mm_shape(G, x, &mr, &nv);
	rec[0] = K;
	rec[1] = N;
	rec[2] = nv * (G->vbytes / dtype_size(x->dtype));
	rec[3] = (tb ? 1 : 0) | (x->dtype == DT_F64 ? 2 : 0);
	return 1;
}

/* The records of source src's readers in g, s being src or a reshape of it
 * (reshape: s is one; its readers read src's memory): every node after node
 * `from` that reads s. Sets *read when one reads it as it is. */
static void plan_readers(Gen *G, Graph *g, Variant *v, int dyn, int wino, PlanOut *o, int64_t src, Node *s, int from,
                         int reshape, int *read)
{
	for (int j = 0; j < g->noutputs; j++)
		*read |= g->outputs[j] == s;
	for (int u = from + 1; u < g->nnodes; u++) {
		Node *x = g->nodes[u];
		for (int k = 0; k < x->nin; k++) {
			if (x->in[k] != s)
				continue;
			int64_t rec[4];
			CallSite *cs = x->op == OP_CALL ? callsite_of(G->rt, x) : NULL;
			if (reshape && x->op != OP_MATMUL && x->op != OP_RESHAPE && !virtual_transpose(g, x)) {
				/* a reshape's readers: only its matmuls ask for a copy (mm_weight) */
				*read = 1;
			} else if (x->op == OP_RESHAPE) {
				plan_readers(G, g, v, dyn, wino, o, src, x, u, 1, read);
			} else if (x->op == OP_CALL && cs && cs->v) {
				plan_rec(o, CALL_REC, src, cs->v->id, k, (int64_t)(uintptr_t)x, 0);
			} else if (x->op == OP_CALL) {
				/* inlined: the callee's own plan, over our sources (pack_plan_graph) */
			} else if (k == 1 && x->in[0] != s && plan_mm(G, g, v, x, s, 0, dyn, rec)) {
				plan_rec(o, PACK_REC, src, rec[0], rec[1], rec[2], rec[3]);
			} else if (k == 1 && x->op == OP_CONV2D && x->in[0] != s &&
			           (conv_lanes_pack(x, (v && v->ndyn) || dyn, G->vbytes, rec) ||
			            (!G->o->no_winograd && wino && conv_wino_pack(x, (v && v->ndyn) || dyn, G->vbytes, rec)))) {
				plan_rec(o, PACK_REC, src, rec[0], rec[1], rec[2], rec[3]);
			} else if (x->op == OP_GATHER && k == 0 && !(v && v->ndyn) && !(dyn && gdyn_has(g, s)) && gather_packed_table(s)) {
				plan_rec(o, GATHER_REC, src, s->shape[0], s->shape[1], s->dtype == DT_F64 ? 2 : 0, 0);
			} else if (virtual_transpose(g, x)) {
				/* every user is a matmul reading it as B (plan.c) */
				for (int w = u + 1; w < g->nnodes; w++)
					if (g->nodes[w]->op == OP_MATMUL && g->nodes[w]->in[1] == x) {
						if (plan_mm(G, g, v, g->nodes[w], s, 1, dyn, rec))
							plan_rec(o, PACK_REC, src, rec[0], rec[1], rec[2], rec[3]);
						else
							*read = 1;
					}
			} else {
				*read = 1;
			}
		}
	}
}

/* wino: Winograd is allowed (the variant's option, which its inlined calls
 * follow) */
static void pack_plan_graph(Gen *G, Graph *g, Variant *v, int dyn, int wino, const int64_t *map, int entry, PlanOut *o,
                            int depth)
{
	for (int i = 0; i < g->nnodes; i++) {
		Node *s = g->nodes[i];
		int64_t src = plan_src(s, map, entry);
		if (src == SRC_NONE)
			continue;
		int read = 0;
		plan_readers(G, g, v, dyn, wino, o, src, s, i, 0, &read);
		if (read)
			plan_rec(o, READ_REC, src, 0, 0, 0, 0);
	}
	/* inlined calls: their code is a copy inside ours, reading our sources */
	for (int i = 0; i < g->nnodes; i++) {
		Node *x = g->nodes[i];
		CallSite *cs = x->op == OP_CALL ? callsite_of(G->rt, x) : NULL;
		if (x->op != OP_CALL || (cs && cs->v) || depth > 64)
			continue;
		int64_t *cmap = xcalloc((size_t)x->callee->ninputs + 1, sizeof *cmap);
		for (int j = 0; j < x->callee->ninputs; j++)
			cmap[j] = j < x->nin ? plan_src(x->in[j], map, entry) : SRC_NONE;
		/* params read inside the callee stay params; its inputs map to ours */
		pack_plan_graph(G, x->callee, NULL, x->callee->ngdyn != 0, wino, cmap, 0, o, depth + 1);
		free(cmap);
	}
}

/* The pack plan of graph g (a variant's, or with entry set an entry
 * point's, whose inputs are the caller's data and never weights), appended
 * to the records in *plan (*len int64s). Call sites are numbered per table. */
void pack_plan(Gen *G, Graph *g, Variant *v, int entry, int64_t **plan, int *len)
{
	PlanOut o = {*plan, *len, *len, 0};
	pack_plan_graph(G, g, v, (v && v->ndyn) || g->ngdyn, !v || v->winograd, NULL, entry, &o, 0);
	/* call sites as small numbers, in order of first appearance */
	for (int i = 0; i < o.n; i += 6) {
		if (o.v[i] != CALL_REC || o.v[i + 4] < 0)
			continue;
		int64_t key = o.v[i + 4], id = -(++o.sites);
		for (int j = i; j < o.n; j += 6)
			if (o.v[j] == CALL_REC && o.v[j + 4] == key)
				o.v[j + 4] = id;
	}
	for (int i = 0; i < o.n; i += 6)
		if (o.v[i] == CALL_REC)
			o.v[i + 4] = -o.v[i + 4] - 1;
	*plan = o.v;
	*len = o.n;
}

/* The plan as a constant global of the module: its record count, then the
 * records. */
LLVMValueRef pack_plan_global(Gen *G, const int64_t *plan, int len, const char *sym, int private)
{
	LLVMValueRef *vals = xcalloc((size_t)len + 1, sizeof(LLVMValueRef));
	vals[0] = ci64(G, len / 6);
	for (int i = 0; i < len; i++)
		vals[i + 1] = ci64(G, plan[i]);
	LLVMTypeRef t = llvm.LLVMArrayType(G->i64, (unsigned)len + 1);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, t, sym);
	llvm.LLVMSetInitializer(gv, llvm.LLVMConstArray(G->i64, vals, (unsigned)len + 1));
	llvm.LLVMSetGlobalConstant(gv, 1);
	if (private)
		llvm.LLVMSetLinkage(gv, LLVMPrivateLinkage);
	free(vals);
	return gv;
}

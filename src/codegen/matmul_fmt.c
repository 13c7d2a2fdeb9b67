/* matmul_fmt.c - matrix products over weights in a format (nestc build
 * --weights-format): the register tiles that read bf16, f16, q8_0, q4_0,
 * q4_k and q6_k panels and widen or dequantize in registers, and the int8
 * activations' quantization and dot products (--activations=int8).
 * matmul.c runs them over the panels as it runs f32's tiles. */
#include "gen.h"
#include "wformat.h"

#include <stdio.h>

/* ---- weights in a format (--weights-format, wformat.h) ----
 * A packed copy in a format has the panel layout of f32's, `wide` columns
 * a panel, zeros past the last column, with its own elements: bf16 and f16
 * as [k][wide] 16-bit elements; q8_0 and q4_0 per block of 32 k: the
 * block's `wide` f16 scales d, then its quants as [32][wide] int8 (q8_0) or
 * [16][wide] bytes whose low nibble is k and high nibble k + 16 (q4_0);
 * q4_k and q6_k per super-block of 256 k: its f16 fields (d, q4_k's dmin)
 * a row of `wide` each, then its other bytes a row each, in the block's
 * order (runtime/panel.c's nestrt__block_to_panel). The tiles read it directly and
 * widen or dequantize in registers: no f32 copy of the weight exists. A
 * block's products are summed in f32 and scaled once by d. */

/* gen.h says why and how far ahead (MM_AHEAD); locality 0: read once (the
 * f32 tiles of matmul.c call it too) */
void prefetch_stream(Gen *G, LLVMValueRef base, LLVMValueRef off, int64_t bytes)
{
	LLVMValueRef p = llvm.LLVMBuildPointerCast(G->B, base, G->i8p, "");
	for (int64_t l = 0; l < (bytes + 63) / 64; l++) {
		LLVMValueRef o = iadd(G, off, ci64(G, MM_AHEAD + 64 * l));
		prefetch_rw(G, llvm.LLVMBuildGEP2(G->B, G->i8, p, &o, 1, ""), 0, 0);
	}
}

/* A vector of vw elements of type et at byte offset off of p (i8*). */
static LLVMValueRef load_vec_at(Gen *G, LLVMValueRef p, LLVMValueRef off, LLVMTypeRef et, int vw)
{
	LLVMTypeRef vt = llvm.LLVMVectorType(et, (unsigned)vw);
	LLVMValueRef q = llvm.LLVMBuildGEP2(G->B, G->i8, p, &off, 1, "");
	LLVMValueRef x = llvm.LLVMBuildLoad2(G->B, vt, llvm.LLVMBuildPointerCast(G->B, q, llvm.LLVMPointerType(vt, 0), ""), "");
	llvm.LLVMSetAlignment(x, 1);
	return x;
}

/* Panel bytes of a packed copy in wf: k rows of `wide` columns. */
LLVMValueRef fmt_panel_bytes(Gen *G, int wf, LLVMValueRef K, LLVMValueRef wide)
{
	if (wformat_block(wf) == 1)
		return imul(G, imul(G, K, wide), ci64(G, wformat_block_bytes(wf)));
	return imul(G, imul(G, idiv(G, K, ci64(G, wformat_block(wf))), wide), ci64(G, wformat_block_bytes(wf)));
}

/* A phi of type t in the current block with `in` from block `from`. */
static LLVMValueRef phi_from(Gen *G, LLVMTypeRef t, LLVMValueRef in, LLVMBasicBlockRef from)
{
	LLVMValueRef p = llvm.LLVMBuildPhi(G->B, t, "");
	llvm.LLVMAddIncoming(p, &in, &from, 1);
	return p;
}

/* The sum of a's 32 elements from off (a block's activations), splatted to
 * vw lanes: vectors added, then halves folded (a tree, log2(vw) steps). */
static LLVMValueRef block_asum(Fn *F, Node *a, LLVMValueRef off, int vw)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	LLVMValueRef base = llvm.LLVMBuildGEP2(B, G->f32, nptr(F, a), &off, 1, "");
	LLVMValueRef sum = NULL;
	for (int i = 0; i < 32; i += vw) {
		LLVMValueRef o = ci64(G, i);
		LLVMValueRef p = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, base, &o, 1, ""), llvm.LLVMPointerType(vt, 0), "");
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, vt, p, "");
		llvm.LLVMSetAlignment(x, 4);
		sum = sum ? llvm.LLVMBuildFAdd(B, sum, x, "") : x;
	}
	/* fold: lane i += lane i ^ h, for h = vw/2 .. 1: every lane ends with the total */
	for (int h = vw / 2; h >= 1; h /= 2) {
		LLVMValueRef idx[64];
		for (int i = 0; i < vw; i++)
			idx[i] = ci32(G, i ^ h);
		LLVMValueRef sw = llvm.LLVMBuildShuffleVector(B, sum, llvm.LLVMGetUndef(vt), llvm.LLVMConstVector(idx, (unsigned)vw), "");
		sum = llvm.LLVMBuildFAdd(B, sum, sw, "");
	}
	return sum;
}

/* ---- int8 activations (nestc build --activations=int8: G->dot) ----
 * A matmul whose weight is q8_0 or q4_0 quantizes its activations as ggml
 * quantizes the other operand of its dot products (q8_0): per row and block
 * of 32 k, d = max|x| / 127 (kept in f32) and q = x / d rounded to nearest,
 * ties to even. A block's products are integer dot products of 4 k at a time
 * (vpdpbusd where the target has it: AVX512-VNNI, AVX-VNNI; the same sums in
 * plain vector code elsewhere) of the weight's quants, unsigned (q4_0's
 * nibbles as they are, q8_0's stored plus 128: NESTRT_PACK_DOT), and the
 * activations' signed ones; less 8 (q4_0) or 128 (q8_0) times the block's
 * sum of activation quants; scaled by the two d in f32. */

/* Rows [0, M) of A (from element oa, rows K apart) quantized: int8 into qa
 * (row r's block b at r K + 32 b), f32 d into qd and the i32 sum of the
 * block's quants into qs (both at r K / 32 + b). */
void mm_quantize_a(Fn *F, Node *a, LLVMValueRef M, LLVMValueRef K, LLVMValueRef oa, LLVMValueRef qa,
                          LLVMValueRef qd, LLVMValueRef qs)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int vw = G->vbytes / 4, nvec = 32 / vw;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw), vi = llvm.LLVMVectorType(G->i32, (unsigned)vw);
	LLVMTypeRef v8 = llvm.LLVMVectorType(G->i8, (unsigned)vw);
	char name[64];
	Loop lr, lb;
	LLVMValueRef nb = idiv(G, K, ci64(G, 32));
	LLVMValueRef r = loop_to(F, &lr, M);
	LLVMValueRef b = loop_to(F, &lb, nb);
	LLVMValueRef at = iadd(G, imul(G, r, K), imul(G, b, ci64(G, 32)));
	LLVMValueRef x[8], m = NULL;
	snprintf(name, sizeof name, "llvm.fabs.v%df32", vw);
	for (int i = 0; i < nvec; i++) {
		LLVMValueRef off = iadd(G, oa, iadd(G, at, ci64(G, i * vw)));
		x[i] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, nptr(F, a), &off, 1, ""),
		                                                         llvm.LLVMPointerType(vt, 0), ""), "");
		llvm.LLVMSetAlignment(x[i], 4);
		LLVMValueRef ax = call(G, name, vt, &vt, &x[i], 1);
		if (m) {
			LLVMTypeRef ts[2] = {vt, vt};
			LLVMValueRef vs[2] = {m, ax};
			char mx[64];
			snprintf(mx, sizeof mx, "llvm.maxnum.v%df32", vw);
			m = call(G, mx, vt, ts, vs, 2);
		} else {
			m = ax;
		}
	}
	snprintf(name, sizeof name, "llvm.vector.reduce.fmax.v%df32", vw);
	LLVMValueRef amax = call(G, name, G->f32, &vt, &m, 1);
	LLVMValueRef d = llvm.LLVMBuildFDiv(B, amax, llvm.LLVMConstReal(G->f32, 127.0), "");
	LLVMValueRef nz = llvm.LLVMBuildFCmp(B, LLVMRealONE, d, llvm.LLVMConstReal(G->f32, 0.0), "");
	LLVMValueRef id = llvm.LLVMBuildSelect(B, nz, llvm.LLVMBuildFDiv(B, llvm.LLVMConstReal(G->f32, 1.0), d, ""),
	                                       llvm.LLVMConstReal(G->f32, 0.0), "");
	LLVMValueRef idv = splat(G, vt, vw, id);
	/* to nearest, ties to even: |x / d| <= 127, far below 2^22 */
	LLVMValueRef magic = splat(G, vt, vw, llvm.LLVMConstReal(G->f32, 12582912.0));
	LLVMValueRef sum = NULL;
	for (int i = 0; i < nvec; i++) {
		LLVMValueRef v = llvm.LLVMBuildFMul(B, x[i], idv, "");
		v = llvm.LLVMBuildFSub(B, llvm.LLVMBuildFAdd(B, v, magic, ""), magic, "");
		LLVMValueRef q = llvm.LLVMBuildFPToSI(B, v, vi, "");
		LLVMValueRef off = iadd(G, at, ci64(G, i * vw));
		LLVMValueRef st = llvm.LLVMBuildStore(B, llvm.LLVMBuildTrunc(B, q, v8, ""),
		                                      llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, qa, &off, 1, ""),
		                                                                llvm.LLVMPointerType(v8, 0), ""));
		llvm.LLVMSetAlignment(st, 1);
		sum = sum ? llvm.LLVMBuildAdd(B, sum, q, "") : q;
	}
	snprintf(name, sizeof name, "llvm.vector.reduce.add.v%di32", vw);
	LLVMValueRef s = call(G, name, G->i32, &vi, &sum, 1);
	LLVMValueRef bi = iadd(G, imul(G, r, nb), b);
	llvm.LLVMBuildStore(B, d, llvm.LLVMBuildGEP2(B, G->f32, llvm.LLVMBuildPointerCast(B, qd, llvm.LLVMPointerType(G->f32, 0), ""), &bi, 1, ""));
	llvm.LLVMBuildStore(B, s, llvm.LLVMBuildGEP2(B, G->i32, llvm.LLVMBuildPointerCast(B, qs, llvm.LLVMPointerType(G->i32, 0), ""), &bi, 1, ""));
	loop_end(F, &lb);
	loop_end(F, &lr);
}

/* acc + the sums of 4 adjacent products of the bytes of w (unsigned) and x
 * (signed), lane by lane: vpdpbusd. w and x are <4 vw x i8>, acc <vw x i32>. */
static LLVMValueRef dpbusd(Gen *G, LLVMValueRef acc, LLVMValueRef w, LLVMValueRef x, int vw)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vi = llvm.LLVMVectorType(G->i32, (unsigned)vw);
	if (G->vnni && (vw == 16 || vw == 8)) {
		LLVMTypeRef ts[3] = {vi, vi, vi};
		LLVMValueRef vs[3] = {acc, llvm.LLVMBuildBitCast(B, w, vi, ""), llvm.LLVMBuildBitCast(B, x, vi, "")};
		return call(G, vw == 16 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256", vi, ts, vs, 3);
	}
	LLVMTypeRef wi = llvm.LLVMVectorType(G->i32, (unsigned)(4 * vw));
	LLVMValueRef p = llvm.LLVMBuildMul(B, llvm.LLVMBuildZExt(B, w, wi, ""), llvm.LLVMBuildSExt(B, x, wi, ""), "");
	for (int l = 0; l < 4; l++) {
		LLVMValueRef idx[64];
		for (int i = 0; i < vw; i++)
			idx[i] = ci32(G, 4 * i + l);
		acc = llvm.LLVMBuildAdd(B, acc, llvm.LLVMBuildShuffleVector(B, p, llvm.LLVMGetUndef(wi), llvm.LLVMConstVector(idx, (unsigned)vw), ""), "");
	}
	return acc;
}

/* The offset of block o of a q8_0 / q4_0 panel: its scales, a row of
 * `wide` f16, then its quants. */
static LLVMValueRef block_at(Gen *G, LLVMValueRef o, LLVMValueRef wide, int wf)
{
	return imul(G, o, imul(G, wide, ci64(G, wformat_block_bytes(wf))));
}

/* Block o's columns' scales d, widened, nv vectors of vw; returns the
 * offset of its quants. */
static LLVMValueRef block_scales(Gen *G, LLVMValueRef panel, LLVMValueRef o, LLVMValueRef wide, int wf, int nv, int vw,
                                 LLVMValueRef *d)
{
	LLVMValueRef base = block_at(G, o, wide, wf);
	for (int v = 0; v < nv; v++)
		d[v] = widen16(G, load_vec_at(G, panel, iadd(G, base, ci64(G, 2 * v * vw)), G->i16, vw), vw, 0);
	return iadd(G, base, imul(G, wide, ci64(G, 2)));
}

/* q4_k: sub-block sb's 6-bit scale and min (ggml's get_scale_min_k4), a lane
 * a column, from the block's scale bytes b[i] as i32 vectors (b[sb],
 * b[sb + 4], and b[sb - 4] for sb >= 4 are read). */
static void k4_scale_min(Gen *G, int vw, LLVMValueRef *b, int sb, LLVMValueRef *sc, LLVMValueRef *m)
{
	LLVMBuilderRef B = G->B;
	if (sb < 4) {
		*sc = llvm.LLVMBuildAnd(B, b[sb], vsplat32(G, vw, 63), "");
		*m = llvm.LLVMBuildAnd(B, b[sb + 4], vsplat32(G, vw, 63), "");
		return;
	}
	LLVMValueRef s6 = vsplat32(G, vw, 6), s4 = vsplat32(G, vw, 4);
	*sc = llvm.LLVMBuildOr(B, llvm.LLVMBuildAnd(B, b[sb + 4], vsplat32(G, vw, 15), ""),
	                       llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, b[sb - 4], s6, ""), s4, ""), "");
	*m = llvm.LLVMBuildOr(B, llvm.LLVMBuildLShr(B, b[sb + 4], s4, ""),
	                      llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, b[sb], s6, ""), s4, ""), "");
}

/* A k-quant super-block's f16 d (and q4_k's dmin, when dmin is not NULL) of
 * each column, widened: nv vectors of vw from base. */
static void kq_d(Gen *G, LLVMValueRef panel, LLVMValueRef base, LLVMValueRef wide, int nv, int vw, LLVMValueRef *d,
                 LLVMValueRef *dmin)
{
	for (int v = 0; v < nv; v++) {
		d[v] = widen16(G, load_vec_at(G, panel, iadd(G, base, ci64(G, 2 * v * vw)), G->i16, vw), vw, 0);
		if (dmin)
			dmin[v] = widen16(G, load_vec_at(G, panel, iadd(G, base, iadd(G, imul(G, wide, ci64(G, 2)), ci64(G, 2 * v * vw))),
			                                 G->i16, vw), vw, 0);
	}
}

/* Super-block o of a q4_k / q6_k panel (nestrt.h's layout: the block's f16
 * fields a row of `wide` each, then its other bytes a row each, in the
 * block's order), added to acc[r][v] into nacc. Passes over byte rows, each
 * summing the products of activations and unscaled quants of two or four
 * sub-blocks in as many sets of accumulators (independent FMA chains, as
 * q4_0's nibbles), then scaled once a sub-block: q4_k four passes of 32 rows
 * (a row's low nibbles k, its high ones k + 32), less dmin m times the
 * sub-block's activations summed; q6_k rows r, r + 32 (low nibbles, then
 * high) and 128 + r (two bits each), less 32: a small tile (a decode step's
 * one row) all four quants of a row in a pass of 16 rows (two a pass held
 * q6_k at half q4_k's speed), a larger one two (registers). */
typedef struct KqSet {
	int row, sh;  /* the byte row (plus the pass's j) and the nibble's shift */
	int qrow;     /* q6_k: the row of the high bits (at 2 t), else -1 */
	int t;        /* q6_k: which of a qh byte's four quants */
	int k, sub;   /* the first k (plus j), the sub-block's scale */
} KqSet;

static void kq_block(Fn *F, Node *a, int mr, int nv, int vw, int wf, LLVMValueRef K, LLVMValueRef arow,
                     LLVMValueRef panel, LLVMValueRef wide, LLVMValueRef o, LLVMValueRef acc[][4],
                     LLVMValueRef nacc[][4], int stream)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw), vi = llvm.LLVMVectorType(G->i32, (unsigned)vw);
	LLVMTypeRef ts[3] = {vt, vt, vt};
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	int q4 = wf == WF_Q4_K;
	LLVMValueRef base = imul(G, o, imul(G, wide, ci64(G, wformat_block_bytes(wf))));
	LLVMValueRef d[4], dmin[4];
	LLVMValueRef rows = iadd(G, base, imul(G, wide, ci64(G, q4 ? 4 : 2)));
	/* byte row r of vector v, as <vw x i32> */
	#define KQ_ROW(r, v) llvm.LLVMBuildZExt(B, load_vec_at(G, panel, iadd(G, rows, iadd(G, imul(G, (r), wide), ci64(G, (v) * vw))), G->i8, vw), vi, "")
	LLVMValueRef k0 = imul(G, o, ci64(G, 256));
	LLVMValueRef cur[MM_MAX_MR][4];
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			cur[r][v] = acc[r][v];
	int nsets = q4 || mr * nv > 6 ? 2 : 4;
	int nrows = q4 ? 32 : 16, npass = 256 / (nrows * nsets);
	for (int p = 0; p < npass; p++) {
		KqSet set[4];
		for (int q = 0; q < nsets; q++) {
			if (q4) {
				set[q] = (KqSet){12 + 32 * p, 4 * q, -1, 0, 64 * p + 32 * q, 2 * p + q};
			} else {
				/* pass p: half h of 128, rows 16 is.., quants t (of 4) */
				int per = 4 / nsets, h = p / (2 * per), is = p / per % 2, t = p % per * nsets + q;
				set[q] = (KqSet){64 * h + 16 * is + 32 * (t & 1), 4 * (t >> 1), 128 + 32 * h + 16 * is, t,
				                 128 * h + 16 * is + 32 * t, 8 * h + is + 2 * t};
			}
		}
		LLVMBasicBlockRef pre = llvm.LLVMGetInsertBlock(B);
		LLVMBasicBlockRef head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "kqj");
		LLVMBasicBlockRef body = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "kqjbody");
		LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "kqjdone");
		llvm.LLVMBuildBr(B, head);
		llvm.LLVMPositionBuilderAtEnd(B, head);
		LLVMValueRef j = phi_from(G, G->i64, ci64(G, 0), pre);
		LLVMValueRef s[4][MM_MAX_MR][4], ns[4][MM_MAX_MR][4];
		for (int q = 0; q < nsets; q++)
			for (int r = 0; r < mr; r++)
				for (int v = 0; v < nv; v++)
					s[q][r][v] = phi_from(G, vt, llvm.LLVMConstNull(vt), pre);
		llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, j, ci64(G, nrows), ""), body, done);
		llvm.LLVMPositionBuilderAtEnd(B, body);
		/* the pass's distinct byte rows (at most three), each loaded once */
		int rowid[3], nr = 0;
		for (int q = 0; q < nsets; q++)
			for (int x = 0; x < 2; x++) {
				int rr = x ? set[q].qrow : set[q].row, seen = 0;
				for (int i = 0; i < nr; i++)
					seen |= rowid[i] == rr;
				if (rr >= 0 && !seen)
					rowid[nr++] = rr;
			}
		if (stream) {
			/* a one-row tile: each row it reads prefetched MM_AHEAD on (a
			 * super-block's lines at once, 100 and more, ran at half the speed) */
			for (int i = 0; i < nr; i++)
				prefetch_stream(G, panel, iadd(G, rows, imul(G, iadd(G, j, ci64(G, rowid[i])), wide)), nv * vw);
		}
		LLVMValueRef w[4][4];
		for (int v = 0; v < nv; v++) {
			LLVMValueRef by[3];
			for (int i = 0; i < nr; i++)
				by[i] = KQ_ROW(iadd(G, j, ci64(G, rowid[i])), v);
			for (int q = 0; q < nsets; q++) {
				LLVMValueRef b = NULL, hb = NULL;
				for (int i = 0; i < nr; i++) {
					if (rowid[i] == set[q].row)
						b = by[i];
					if (rowid[i] == set[q].qrow)
						hb = by[i];
				}
				LLVMValueRef x = set[q].sh ? llvm.LLVMBuildLShr(B, b, vsplat32(G, vw, (uint32_t)set[q].sh), "") : b;
				if (!q4 || set[q].sh == 0)
					x = llvm.LLVMBuildAnd(B, x, vsplat32(G, vw, 15), "");
				if (hb) {
					LLVMValueRef t = set[q].t ? llvm.LLVMBuildLShr(B, hb, vsplat32(G, vw, (uint32_t)(2 * set[q].t)), "") : hb;
					t = llvm.LLVMBuildShl(B, llvm.LLVMBuildAnd(B, t, vsplat32(G, vw, 3), ""), vsplat32(G, vw, 4), "");
					x = llvm.LLVMBuildSub(B, llvm.LLVMBuildOr(B, x, t, ""), vsplat32(G, vw, 32), "");
				}
				w[q][v] = llvm.LLVMBuildSIToFP(B, x, vt, "");
			}
		}
		for (int r = 0; r < mr; r++) {
			LLVMValueRef ar = iadd(G, elem_off(G, arow, ci64(G, r), K), iadd(G, k0, j));
			for (int q = 0; q < nsets; q++) {
				LLVMValueRef bc = splat(G, vt, vw, load_at(F, a, iadd(G, ar, ci64(G, set[q].k))));
				for (int v = 0; v < nv; v++) {
					LLVMValueRef vs[3] = {bc, w[q][v], s[q][r][v]};
					ns[q][r][v] = call(G, fma, vt, ts, vs, 3);
				}
			}
		}
		LLVMValueRef jn = iadd(G, j, ci64(G, 1));
		LLVMBasicBlockRef end = llvm.LLVMGetInsertBlock(B);
		llvm.LLVMBuildBr(B, head);
		llvm.LLVMAddIncoming(j, &jn, &end, 1);
		for (int q = 0; q < nsets; q++)
			for (int r = 0; r < mr; r++)
				for (int v = 0; v < nv; v++)
					llvm.LLVMAddIncoming(s[q][r][v], &ns[q][r][v], &end, 1);
		llvm.LLVMPositionBuilderAtEnd(B, done);
		/* d (and dmin) loaded after each pass, where they are used: an f16
		 * vector live across a loop is split by LLVM 14 into scalar loads
		 * and inserts (block_scales' comment) */
		kq_d(G, panel, base, wide, nv, vw, d, q4 ? dmin : NULL);
		/* the sub-blocks' scales (q4_k: and mins, negated), per column */
		LLVMValueRef ds[4][4], dm[4][4];
		for (int v = 0; v < nv; v++)
			for (int q = 0; q < nsets; q++) {
				int sb = set[q].sub;
				if (q4) {
					/* the scale bytes this sub-block reads */
					LLVMValueRef b[12] = {NULL}, sc, m;
					for (int i = sb < 4 ? sb : sb - 4; i <= sb + 4; i += 4)
						b[i] = KQ_ROW(ci64(G, i), v);
					k4_scale_min(G, vw, b, sb, &sc, &m);
					ds[q][v] = llvm.LLVMBuildFMul(B, d[v], llvm.LLVMBuildSIToFP(B, sc, vt, ""), "");
					dm[q][v] = llvm.LLVMBuildFNeg(B, llvm.LLVMBuildFMul(B, dmin[v], llvm.LLVMBuildSIToFP(B, m, vt, ""), ""), "");
				} else {
					LLVMValueRef sc = load_vec_at(G, panel, iadd(G, rows, iadd(G, imul(G, ci64(G, 192 + sb), wide), ci64(G, v * vw))),
					                              G->i8, vw);
					ds[q][v] = llvm.LLVMBuildFMul(B, d[v], llvm.LLVMBuildSIToFP(B, llvm.LLVMBuildSExt(B, sc, vi, ""), vt, ""), "");
				}
			}
		for (int r = 0; r < mr; r++) {
			LLVMValueRef as[4] = {NULL};
			if (q4)
				for (int q = 0; q < nsets; q++)
					as[q] = block_asum(F, a, iadd(G, elem_off(G, arow, ci64(G, r), K), iadd(G, k0, ci64(G, set[q].k))), vw);
			for (int v = 0; v < nv; v++)
				for (int q = 0; q < nsets; q++) {
					LLVMValueRef vs[3] = {s[q][r][v], ds[q][v], cur[r][v]};
					cur[r][v] = call(G, fma, vt, ts, vs, 3);
					if (q4) {
						LLVMValueRef vm[3] = {as[q], dm[q][v], cur[r][v]};
						cur[r][v] = call(G, fma, vt, ts, vm, 3);
					}
				}
		}
	}
	#undef KQ_ROW
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			nacc[r][v] = cur[r][v];
}

/* Super-block o of a q4_k panel in a build for integer dot products
 * (NESTRT_PACK_DOT: a column's bytes of rows 4g..4g+3 side by side), with
 * the rows' activations quantized (mm_quantize_a: per 32 k, as a q4_k
 * sub-block): per sub-block the integer dot products of its nibbles, as
 * they are, and the activations' quants (dpbusd), times d sc and the
 * activations' d, less dmin m times their d and the sum of their quants
 * (llama.cpp's q4_K x q8_K dot product, in blocks of 32). */
static void kq_block_dot(Fn *F, int mr, int nv, int vw, LLVMValueRef K, LLVMValueRef arow, LLVMValueRef panel,
                         LLVMValueRef wide, LLVMValueRef o, LLVMValueRef acc[][4], LLVMValueRef nacc[][4], int stream)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw), vi = llvm.LLVMVectorType(G->i32, (unsigned)vw);
	LLVMTypeRef vb = llvm.LLVMVectorType(G->i8, (unsigned)(4 * vw)), i32p = llvm.LLVMPointerType(G->i32, 0);
	LLVMTypeRef ts[3] = {vt, vt, vt};
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	LLVMValueRef base = imul(G, o, imul(G, wide, ci64(G, wformat_block_bytes(WF_Q4_K))));
	LLVMValueRef d[4], dmin[4];
	kq_d(G, panel, base, wide, nv, vw, d, dmin);
	LLVMValueRef rows = iadd(G, base, imul(G, wide, ci64(G, 4)));
	/* group g of 4 byte rows, vector v: 4 vw bytes */
	#define KD_GROUP(g, v) load_vec_at(G, panel, iadd(G, rows, imul(G, iadd(G, imul(G, ci64(G, (g)), wide), ci64(G, (v) * vw)), ci64(G, 4))), G->i8, 4 * vw)
	LLVMValueRef sc_rows[4][12];   /* each column's 12 scale bytes, as i32 */
	for (int v = 0; v < nv; v++)
		for (int q = 0; q < 3; q++) {
			LLVMValueRef grp = KD_GROUP(q, v);
			for (int l = 0; l < 4; l++) {
				LLVMValueRef idx[64];
				for (int i = 0; i < vw; i++)
					idx[i] = ci32(G, 4 * i + l);
				LLVMValueRef b = llvm.LLVMBuildShuffleVector(B, grp, llvm.LLVMGetUndef(vb), llvm.LLVMConstVector(idx, (unsigned)vw), "");
				sc_rows[v][4 * q + l] = llvm.LLVMBuildZExt(B, b, vi, "");
			}
		}
	LLVMValueRef rowq[MM_MAX_MR], bidx[MM_MAX_MR], cur[MM_MAX_MR][4];
	for (int r = 0; r < mr; r++) {
		rowq[r] = iadd(G, isub(G, elem_off(G, arow, ci64(G, r), K), F->qoa), imul(G, o, ci64(G, 256)));
		bidx[r] = idiv(G, rowq[r], ci64(G, 32)); /* sub-block 0's activation block */
		for (int v = 0; v < nv; v++)
			cur[r][v] = acc[r][v];
	}
	LLVMValueRef c15 = splat(G, vb, 4 * vw, llvm.LLVMConstInt(G->i8, 15, 0)), c4 = splat(G, vb, 4 * vw, llvm.LLVMConstInt(G->i8, 4, 0));
	/* a sub-block at a time (its nibbles of 8 groups), so that one set of
	 * integer sums is live beside the tile's accumulators */
	for (int sb = 0; sb < 8; sb++) {
		int c = sb / 2, q = sb % 2;
		LLVMValueRef ia[MM_MAX_MR][4];
		for (int r = 0; r < mr; r++)
			for (int v = 0; v < nv; v++)
				ia[r][v] = llvm.LLVMConstNull(vi);
		for (int g = 0; g < 8; g++) {
			int grp = 3 + 8 * c + g; /* after the 12 scale bytes' three groups */
			if (stream && q == 0)
				prefetch_stream(G, panel, iadd(G, rows, imul(G, imul(G, ci64(G, grp), wide), ci64(G, 4))), 4 * nv * vw);
			LLVMValueRef w[4];
			for (int v = 0; v < nv; v++) {
				LLVMValueRef bytes = KD_GROUP(grp, v);
				w[v] = q ? llvm.LLVMBuildLShr(B, bytes, c4, "") : llvm.LLVMBuildAnd(B, bytes, c15, "");
			}
			for (int r = 0; r < mr; r++) {
				LLVMValueRef qoff = iadd(G, rowq[r], ci64(G, 32 * sb + 4 * g));
				LLVMValueRef x4 = llvm.LLVMBuildLoad2(B, G->i32, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->qa, &qoff, 1, ""),
				                                                                         i32p, ""), "");
				llvm.LLVMSetAlignment(x4, 1);
				LLVMValueRef xb = llvm.LLVMBuildBitCast(B, splat(G, vi, vw, x4), vb, "");
				for (int v = 0; v < nv; v++)
					ia[r][v] = dpbusd(G, ia[r][v], w[v], xb, vw);
			}
		}
		LLVMValueRef ds[4], dm[4];
		for (int v = 0; v < nv; v++) {
			LLVMValueRef sc, m;
			k4_scale_min(G, vw, sc_rows[v], sb, &sc, &m);
			ds[v] = llvm.LLVMBuildFMul(B, d[v], llvm.LLVMBuildSIToFP(B, sc, vt, ""), "");
			dm[v] = llvm.LLVMBuildFMul(B, dmin[v], llvm.LLVMBuildSIToFP(B, m, vt, ""), "");
		}
		for (int r = 0; r < mr; r++) {
			LLVMValueRef bi = iadd(G, bidx[r], ci64(G, sb));
			LLVMValueRef da = llvm.LLVMBuildLoad2(B, G->f32, llvm.LLVMBuildGEP2(B, G->f32, llvm.LLVMBuildPointerCast(B, F->qd, llvm.LLVMPointerType(G->f32, 0), ""), &bi, 1, ""), "");
			LLVMValueRef sa = llvm.LLVMBuildLoad2(B, G->i32, llvm.LLVMBuildGEP2(B, G->i32, llvm.LLVMBuildPointerCast(B, F->qs, i32p, ""), &bi, 1, ""), "");
			/* -da * sum of the quants: the mins' share */
			LLVMValueRef nm = llvm.LLVMBuildFNeg(B, llvm.LLVMBuildFMul(B, da, llvm.LLVMBuildSIToFP(B, sa, G->f32, ""), ""), "");
			LLVMValueRef dav = splat(G, vt, vw, da), nmv = splat(G, vt, vw, nm);
			for (int v = 0; v < nv; v++) {
				LLVMValueRef vs[3] = {llvm.LLVMBuildSIToFP(B, ia[r][v], vt, ""), llvm.LLVMBuildFMul(B, ds[v], dav, ""), cur[r][v]};
				cur[r][v] = call(G, fma, vt, ts, vs, 3);
				LLVMValueRef vm[3] = {dm[v], nmv, cur[r][v]};
				cur[r][v] = call(G, fma, vt, ts, vm, 3);
			}
		}
	}
	#undef KD_GROUP
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			nacc[r][v] = cur[r][v];
}

/* mm_tile over a panel in format wf (i8* panel, `wide` columns): mr rows by
 * nv vectors, the accumulators in registers over the whole k. A small tile
 * (a decode step's one row) keeps two sets of sums, even and odd k (q4_0: a
 * byte's low and high nibble), so that two FMAs into one register do not
 * wait on each other: one set held the row at one k per FMA latency, half
 * the memory's speed. */
void mm_tile_fmt(Fn *F, Node *n, Node *a, int mr, int nv, int vw, int wf, LLVMValueRef K, LLVMValueRef arow,
                        LLVMValueRef panel, LLVMValueRef wide, LLVMValueRef cbase, LLVMValueRef crow, LLVMValueRef ldc,
                        LLVMValueRef cj, int epi, int stream)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = G->f32, vt = llvm.LLVMVectorType(et, (unsigned)vw), vpt = llvm.LLVMPointerType(vt, 0);
	LLVMTypeRef vi = llvm.LLVMVectorType(G->i32, (unsigned)vw);
	LLVMValueRef zv = llvm.LLVMConstNull(vt), cp[MM_MAX_MR][4];
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = iadd(G, elem_off(G, crow, ci64(G, r), ldc), iadd(G, cj, ci64(G, v * vw)));
			cp[r][v] = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, cbase, &off, 1, ""), vpt, "");
		}
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	LLVMTypeRef ts[3] = {vt, vt, vt};
	int blocked = wformat_block(wf) > 1;
	int sets = mr * nv <= 6 ? 2 : 1;
	/* the outer loop: k (16-bit formats; pairs of k with two sets) or blocks (32 k, or 256) */
	LLVMValueRef nouter = blocked ? idiv(G, K, ci64(G, wformat_block(wf))) : sets == 2 ? idiv(G, K, ci64(G, 2)) : K;
	LLVMBasicBlockRef pre = llvm.LLVMGetInsertBlock(B);
	LLVMBasicBlockRef head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmk");
	LLVMBasicBlockRef body = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmkbody");
	LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmkdone");
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMPositionBuilderAtEnd(B, head);
	LLVMValueRef o = phi_from(G, G->i64, ci64(G, 0), pre);
	/* acc[s][r][v]: set s; 16-bit formats sum in both sets, blocked ones in set 0 */
	LLVMValueRef acc[2][MM_MAX_MR][4], nacc[2][MM_MAX_MR][4];
	int osets = blocked ? 1 : sets;
	for (int q = 0; q < osets; q++)
		for (int r = 0; r < mr; r++)
			for (int v = 0; v < nv; v++)
				acc[q][r][v] = phi_from(G, vt, zv, pre);
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, o, nouter, ""), body, done);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	if (stream && llvm.LLVMIsAConstantInt(wide) && wformat_block(wf) < 256) {
		/* the bytes of this step: a block, or one k (two with two sets) */
		int64_t step = llvm.LLVMConstIntGetSExtValue(wide) * (blocked ? wformat_block_bytes(wf) : 2 * osets);
		prefetch_stream(G, panel, imul(G, o, ci64(G, step)), step);
	}
	if (!blocked) {
		/* k = o (or 2o and 2o + 1): rows of 16-bit elements, widened */
		for (int q = 0; q < osets; q++) {
			LLVMValueRef k = sets == 2 ? iadd(G, imul(G, o, ci64(G, 2)), ci64(G, q)) : o;
			LLVMValueRef bv[4];
			for (int v = 0; v < nv; v++)
				bv[v] = widen16(G, load_vec_at(G, panel, imul(G, iadd(G, imul(G, k, wide), ci64(G, v * vw)), ci64(G, 2)), G->i16, vw),
				                vw, wf == WF_BF16);
			for (int r = 0; r < mr; r++) {
				LLVMValueRef bc = splat(G, vt, vw, load_at(F, a, iadd(G, elem_off(G, arow, ci64(G, r), K), k)));
				for (int v = 0; v < nv; v++) {
					LLVMValueRef vs[3] = {bc, bv[v], acc[q][r][v]};
					nacc[q][r][v] = call(G, fma, vt, ts, vs, 3);
				}
			}
		}
	} else if (F->qa && wf == WF_Q4_K) {
		kq_block_dot(F, mr, nv, vw, K, arow, panel, wide, o, acc[0], nacc[0], stream);
	} else if (wformat_block(wf) == 256) {
		kq_block(F, a, mr, nv, vw, wf, K, arow, panel, wide, o, acc[0], nacc[0], stream);
	} else if (F->qa && (wf == WF_Q8_0 || wf == WF_Q4_0)) {
		/* block o: the weight's scales, then 32 k as integer dot products of
		 * 4 k a lane (q4_0: a byte's low nibbles k, its high ones k + 16) */
		LLVMValueRef d[4];
		LLVMValueRef qbase = block_scales(G, panel, o, wide, wf, nv, vw, d);
		int q4 = wf == WF_Q4_0;
		LLVMTypeRef vb = llvm.LLVMVectorType(G->i8, (unsigned)(4 * vw)), i32p = llvm.LLVMPointerType(G->i32, 0);
		LLVMValueRef ia[MM_MAX_MR][4], rowq[MM_MAX_MR], bidx[MM_MAX_MR];
		for (int r = 0; r < mr; r++) {
			/* the row's quantized activations: its elements from qoa, bytes
			 * alike; the sums start at -8 or -128 times the sum of the block's
			 * quants (the weights' offset: one subtraction fewer a block) */
			rowq[r] = isub(G, elem_off(G, arow, ci64(G, r), K), F->qoa);
			bidx[r] = iadd(G, idiv(G, rowq[r], ci64(G, 32)), o);
			LLVMValueRef sa = llvm.LLVMBuildLoad2(B, G->i32, llvm.LLVMBuildGEP2(B, G->i32, llvm.LLVMBuildPointerCast(B, F->qs, llvm.LLVMPointerType(G->i32, 0), ""), &bidx[r], 1, ""), "");
			LLVMValueRef neg = llvm.LLVMBuildNeg(B, llvm.LLVMBuildShl(B, sa, llvm.LLVMConstInt(G->i32, wf == WF_Q4_0 ? 3 : 7, 0), ""), "");
			LLVMValueRef init = splat(G, vi, vw, neg);
			for (int v = 0; v < nv; v++)
				ia[r][v] = init;
		}
		LLVMValueRef blk32 = imul(G, o, ci64(G, 32));
		for (int g = 0; g < (q4 ? 4 : 8); g++) {
			LLVMValueRef w[4][2];
			for (int v = 0; v < nv; v++) {
				LLVMValueRef off = iadd(G, qbase, imul(G, iadd(G, imul(G, ci64(G, g), wide), ci64(G, v * vw)), ci64(G, 4)));
				LLVMValueRef bytes = load_vec_at(G, panel, off, G->i8, 4 * vw);
				if (q4) {
					LLVMValueRef c4 = splat(G, vb, 4 * vw, llvm.LLVMConstInt(G->i8, 4, 0));
					w[v][0] = llvm.LLVMBuildAnd(B, bytes, splat(G, vb, 4 * vw, llvm.LLVMConstInt(G->i8, 15, 0)), "");
					w[v][1] = llvm.LLVMBuildLShr(B, bytes, c4, "");
				} else {
					w[v][0] = bytes;
				}
			}
			for (int r = 0; r < mr; r++)
				for (int h = 0; h < (q4 ? 2 : 1); h++) {
					LLVMValueRef qoff = iadd(G, rowq[r], iadd(G, blk32, ci64(G, 4 * g + 16 * h)));
					LLVMValueRef x4 = llvm.LLVMBuildLoad2(B, G->i32, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->qa, &qoff, 1, ""),
					                                                                         i32p, ""), "");
					llvm.LLVMSetAlignment(x4, 1);
					LLVMValueRef xb = llvm.LLVMBuildBitCast(B, splat(G, vi, vw, x4), vb, "");
					for (int v = 0; v < nv; v++)
						ia[r][v] = dpbusd(G, ia[r][v], w[v][h], xb, vw);
				}
		}
		for (int r = 0; r < mr; r++) {
			LLVMValueRef da = llvm.LLVMBuildLoad2(B, G->f32, llvm.LLVMBuildGEP2(B, G->f32, llvm.LLVMBuildPointerCast(B, F->qd, llvm.LLVMPointerType(G->f32, 0), ""), &bidx[r], 1, ""), "");
			LLVMValueRef dav = splat(G, vt, vw, da);
			for (int v = 0; v < nv; v++) {
				LLVMValueRef f = llvm.LLVMBuildSIToFP(B, ia[r][v], vt, "");
				LLVMValueRef vs[3] = {f, llvm.LLVMBuildFMul(B, d[v], dav, ""), acc[0][r][v]};
				nacc[0][r][v] = call(G, fma, vt, ts, vs, 3);
			}
		}
	} else {
		/* block o: its scales, then 32 k (q8_0 in pairs with two sets; q4_0:
		 * 16 bytes of two k each, low nibbles into one set, high into the
		 * other) into block sums, scaled once */
		LLVMValueRef d[4];
		LLVMValueRef qbase = iadd(G, block_at(G, o, wide, wf), imul(G, wide, ci64(G, 2)));   /* its quants, after the scales' row */
		int q4 = wf == WF_Q4_0;
		/* byte rows a step: q4_0 one (two k), q8_0 one per set */
		int per = q4 ? 1 : sets;
		int steps = (q4 ? 16 : 32) / per;
		int bsets = q4 ? 2 : sets;   /* q4_0's nibbles always go to two sets */
		/* AVX-512: a nibble becomes the float q - 8 in one vpermps from a
		 * table of 16 (it reads an index's low 4 bits: no mask), where
		 * masking and converting took two operations and the 8 came off
		 * later (with the unrolling below, TinyLlama's q4_0 decode step at
		 * one thread: 34.6 -> 29.6 ms; it is still bound by these
		 * operations, not by the memory) */
		int perm = q4 && vw == 16 && G->vbytes == 64;
		LLVMValueRef table = NULL;
		if (perm) {
			LLVMValueRef t[16];
			for (int i = 0; i < 16; i++)
				t[i] = llvm.LLVMConstReal(G->f32, i - 8);
			table = llvm.LLVMConstVector(t, 16);
		}
		/* a short block's byte rows (a decode step's tile: a few vectors)
		 * written out, not looped: the loop's counting and a constant
		 * reloaded each row were a sixth of q4_0's operations */
		int unroll = mr * nv <= 6;
		LLVMBasicBlockRef bpre = llvm.LLVMGetInsertBlock(B);
		LLVMBasicBlockRef bhead = NULL, bbody = NULL, bdone = NULL;
		LLVMValueRef j = NULL;
		LLVMValueRef bs[2][MM_MAX_MR][4], nbs[2][MM_MAX_MR][4];
		if (!unroll) {
			bhead = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmj");
			bbody = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmjbody");
			bdone = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmjdone");
			llvm.LLVMBuildBr(B, bhead);
			llvm.LLVMPositionBuilderAtEnd(B, bhead);
			j = phi_from(G, G->i64, ci64(G, 0), bpre);
		}
		for (int q = 0; q < bsets; q++)
			for (int r = 0; r < mr; r++)
				for (int v = 0; v < nv; v++)
					nbs[q][r][v] = bs[q][r][v] = unroll ? zv : phi_from(G, vt, zv, bpre);
		if (!unroll) {
			llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, j, ci64(G, steps), ""), bbody, bdone);
			llvm.LLVMPositionBuilderAtEnd(B, bbody);
		}
		for (int it = 0; it < (unroll ? steps : 1); it++) {
			if (unroll)
				j = ci64(G, it);
			for (int s = 0; s < per; s++) {
				LLVMValueRef row = iadd(G, imul(G, j, ci64(G, per)), ci64(G, s));   /* the byte row */
				LLVMValueRef k0 = iadd(G, imul(G, o, ci64(G, 32)), row);
				LLVMValueRef qlo[4], qhi[4];
				for (int v = 0; v < nv; v++) {
					LLVMValueRef bytes = load_vec_at(G, panel, iadd(G, qbase, iadd(G, imul(G, row, wide), ci64(G, v * vw))), G->i8, vw);
					if (!q4) {
						qlo[v] = llvm.LLVMBuildSIToFP(B, llvm.LLVMBuildSExt(B, bytes, vi, ""), vt, "");
					} else if (perm) {
						LLVMValueRef u = llvm.LLVMBuildZExt(B, bytes, vi, "");
						LLVMTypeRef ts2[2] = {vt, vi};
						LLVMValueRef lo[2] = {table, u}, hi[2] = {table, llvm.LLVMBuildLShr(B, u, vsplat32(G, vw, 4), "")};
						qlo[v] = call(G, "llvm.x86.avx512.permvar.sf.512", vt, ts2, lo, 2);
						qhi[v] = call(G, "llvm.x86.avx512.permvar.sf.512", vt, ts2, hi, 2);
					} else {
						/* the nibbles as they are (0..15): the 8 each weight
						 * is less comes off once a block (asum below) */
						LLVMValueRef u = llvm.LLVMBuildZExt(B, bytes, vi, "");
						LLVMValueRef lo = llvm.LLVMBuildAnd(B, u, vsplat32(G, vw, 15), "");
						LLVMValueRef hi = llvm.LLVMBuildLShr(B, u, vsplat32(G, vw, 4), "");
						qlo[v] = llvm.LLVMBuildSIToFP(B, lo, vt, "");
						qhi[v] = llvm.LLVMBuildSIToFP(B, hi, vt, "");
					}
				}
				for (int r = 0; r < mr; r++) {
					LLVMValueRef ar = elem_off(G, arow, ci64(G, r), K);
					LLVMValueRef bc = splat(G, vt, vw, load_at(F, a, iadd(G, ar, k0)));
					LLVMValueRef bh = q4 ? splat(G, vt, vw, load_at(F, a, iadd(G, ar, iadd(G, k0, ci64(G, 16))))) : NULL;
					for (int v = 0; v < nv; v++) {
						LLVMValueRef vs[3] = {bc, qlo[v], nbs[s][r][v]};
						nbs[s][r][v] = call(G, fma, vt, ts, vs, 3);
						if (bh) {
							LLVMValueRef vh[3] = {bh, qhi[v], nbs[1][r][v]};
							nbs[1][r][v] = call(G, fma, vt, ts, vh, 3);
						}
					}
				}
			}
		}
		if (unroll) {
			for (int q = 0; q < bsets; q++)
				for (int r = 0; r < mr; r++)
					for (int v = 0; v < nv; v++)
						bs[q][r][v] = nbs[q][r][v];
		} else {
			LLVMValueRef jn = iadd(G, j, ci64(G, 1));
			LLVMBasicBlockRef bend = llvm.LLVMGetInsertBlock(B);
			llvm.LLVMBuildBr(B, bhead);
			llvm.LLVMAddIncoming(j, &jn, &bend, 1);
			for (int q = 0; q < bsets; q++)
				for (int r = 0; r < mr; r++)
					for (int v = 0; v < nv; v++)
						llvm.LLVMAddIncoming(bs[q][r][v], &nbs[q][r][v], &bend, 1);
			llvm.LLVMPositionBuilderAtEnd(B, bdone);
		}
		/* the scales loaded here, where they are used: loaded before the
		 * loop and widened after it, the f16 vector lived across the loop
		 * as <vw x half>, which LLVM 14 split into vw scalar loads and
		 * inserts a block (as many instructions as the block's FMAs) */
		block_scales(G, panel, o, wide, wf, nv, vw, d);
		for (int r = 0; r < mr; r++) {
			/* q4_0: sum a (q - 8) = sum a q - 8 sum a, the block's a summed once
			 * (two subtractions a byte row fewer: q4_0 ran at half q8_0's speed) */
			LLVMValueRef m8 = q4 && !perm ? llvm.LLVMBuildFMul(B, block_asum(F, a, iadd(G, elem_off(G, arow, ci64(G, r), K), imul(G, o, ci64(G, 32))), vw),
			                                          splat(G, vt, vw, llvm.LLVMConstReal(G->f32, -8.0)), "")
			                     : NULL;
			for (int v = 0; v < nv; v++) {
				LLVMValueRef sum = bsets == 2 ? llvm.LLVMBuildFAdd(B, bs[0][r][v], bs[1][r][v], "") : bs[0][r][v];
				if (m8)
					sum = llvm.LLVMBuildFAdd(B, sum, m8, "");
				LLVMValueRef vs[3] = {sum, d[v], acc[0][r][v]};
				nacc[0][r][v] = call(G, fma, vt, ts, vs, 3);
			}
		}
	}
	LLVMValueRef on = iadd(G, o, ci64(G, 1));
	LLVMBasicBlockRef end = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMAddIncoming(o, &on, &end, 1);
	for (int q = 0; q < osets; q++)
		for (int r = 0; r < mr; r++)
			for (int v = 0; v < nv; v++)
				llvm.LLVMAddIncoming(acc[q][r][v], &nacc[q][r][v], &end, 1);
	llvm.LLVMPositionBuilderAtEnd(B, done);
	LLVMValueRef fin[MM_MAX_MR][4];
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			fin[r][v] = osets == 2 ? llvm.LLVMBuildFAdd(B, acc[0][r][v], acc[1][r][v], "") : acc[0][r][v];
	if (!blocked && sets == 2) {
		/* an odd K's last k */
		LLVMBasicBlockRef odd = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmkodd");
		LLVMBasicBlockRef even = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "fmkeven");
		LLVMBasicBlockRef from = llvm.LLVMGetInsertBlock(B);
		LLVMValueRef k = isub(G, K, ci64(G, 1));
		llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntNE, irem(G, K, ci64(G, 2)), ci64(G, 0), ""), odd, even);
		llvm.LLVMPositionBuilderAtEnd(B, odd);
		LLVMValueRef last[MM_MAX_MR][4];
		LLVMValueRef bv[4];
		for (int v = 0; v < nv; v++)
			bv[v] = widen16(G, load_vec_at(G, panel, imul(G, iadd(G, imul(G, k, wide), ci64(G, v * vw)), ci64(G, 2)), G->i16, vw),
			                vw, wf == WF_BF16);
		for (int r = 0; r < mr; r++) {
			LLVMValueRef bc = splat(G, vt, vw, load_at(F, a, iadd(G, elem_off(G, arow, ci64(G, r), K), k)));
			for (int v = 0; v < nv; v++) {
				LLVMValueRef vs[3] = {bc, bv[v], fin[r][v]};
				last[r][v] = call(G, fma, vt, ts, vs, 3);
			}
		}
		LLVMBasicBlockRef oddend = llvm.LLVMGetInsertBlock(B);
		llvm.LLVMBuildBr(B, even);
		llvm.LLVMPositionBuilderAtEnd(B, even);
		for (int r = 0; r < mr; r++)
			for (int v = 0; v < nv; v++) {
				LLVMValueRef ph = llvm.LLVMBuildPhi(B, vt, "");
				LLVMValueRef in[2] = {fin[r][v], last[r][v]};
				LLVMBasicBlockRef bb[2] = {from, oddend};
				llvm.LLVMAddIncoming(ph, in, bb, 2);
				fin[r][v] = ph;
			}
	}
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			LLVMValueRef x = fin[r][v];
			if (epi) {
				LLVMValueRef col = iadd(G, cj, ci64(G, v * vw));
				x = mm_epi_vec(F, n, x, vw, iadd(G, elem_off(G, crow, ci64(G, r), ldc), col), col);
			}
			LLVMValueRef st = llvm.LLVMBuildStore(B, x, cp[r][v]);
			llvm.LLVMSetAlignment(st, 4);
		}
}

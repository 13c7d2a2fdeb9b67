/* conv_dw.c - depthwise conv2d (groups = channels in = channels out, f32,
 * static shapes: MobileNet's and EfficientNet's 3x3 and 5x5 of stride 1 and
 * 2, any dilation): each plane on its own, pixels of an output row in the
 * vector lanes, the kernel's positions unrolled, conv.c's epilogue fused.
 *
 * The general tiles (conv.c) give a depthwise convolution one output
 * channel a tile and a reduction of KH*KW elements from shifted copies of
 * the input: their setup cost more than the sums (8-18 GFLOP/s). Here a
 * task takes a run of planes; each plane is first copied into a zero-padded
 * buffer of the task's (rows and columns of padding, and room for whole
 * vectors), so that the sums need no bounds: output row oh, vector j of
 * pixels, is the sum over (kh, kw) of the weight times the vector of the
 * buffer's row oh*sh + kh*dh from column j*vw*sw + kw*dw on (stride 2: two
 * vectors, their even lanes). Up to four vectors of a row are summed at
 * once (independent FMA chains); a row's last vector is stored masked.
 * 3x3 planes of 384 channels at 14x14: 2.4x the general tiles' speed, 144
 * at 56x56: 2.3x, 576 from 14x14 at stride 2: 1.2x (one thread, Zen 4). */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

#define DW_NV 4            /* vectors of a row summed together */
#define DW_MAX_ACC 8       /* rows of a tile by its vectors, at most */
#define DW_ROOM 64         /* elements of room after the padded plane (dw_fill_small) */
#define DW_MAX_BUF (1 << 20) /* bytes of the padded plane, at most */

/* the geometry of a depthwise convolution this kernel takes, or 0 */
typedef struct DwGeom {
	int64_t C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
	int64_t nvr;      /* vectors an output row */
	int64_t PH, PW;   /* the padded plane's rows and row length */
	/* small rows (at most half a vector) of stride 1 on AVX-512: the plane
	 * as one run (below), nvf vectors; len elements of the buffer */
	int flat;
	int64_t nvf, len;
	/* small rows of stride 2 on AVX-512: a vector is two output rows, the
	 * even lanes of one load of each's input row in each half */
	int pair;
} DwGeom;

static int dw_geom(Fn *F, Node *n, int vw, DwGeom *d)
{
	Node *x = n->in[0], *w = n->in[1];
	/* equivalent mutant [const 4 -> 3]: every target's vectors hold 4
	 * floats or more (16 bytes at the least) */
	if (n->dtype != DT_F32 || fn_dynamic(F) || node_dynamic(F, n) || x->rank != 4 || w->rank != 4 || vw < 4)
		return 0;
	*d = (DwGeom){.C = x->shape[1], .H = x->shape[2], .W = x->shape[3], .OH = n->shape[2], .OW = n->shape[3],
	              .KH = w->shape[2], .KW = w->shape[3], .sh = n->a[0], .sw = n->a[1], .ph = n->a[2], .pw = n->a[3],
	              .dh = n->a[5] ? n->a[5] : 1, .dw = n->a[6] ? n->a[6] : 1};
	if (n->a[4] != d->C || n->shape[1] != d->C || w->shape[1] != 1 || d->C < 2)
		return 0;
	if (d->sw < 1 || d->sw > 2 || d->sh < 1 || d->ph < 0 || d->pw < 0 || d->OH < 1 || d->OW < 1)
		return 0;
	/* rows of at most half a vector leave most lanes idle (960 channels at
	 * 7x7 ran at 0.9x the general tiles' speed): with stride 1 the padded
	 * plane is one run, output pixel (oh, ow) at oh*PW + ow reads the
	 * buffer at that index plus kh*dh*PW + kw*dw, so vectors run on across
	 * rows, and the lanes of the pad columns are left out when stored (a
	 * residual, read at each pixel, keeps the general tiles) */
	d->PH = (d->OH - 1) * d->sh + (d->KH - 1) * d->dh + 1;
	if (d->PH < d->ph + d->H)
		d->PH = d->ph + d->H;
	/* the one run reads row oh + kh*dh for output row oh: stride 1 down
	 * too (2 down, 1 across: a row a vector, below) */
	if (d->OW * 2 <= vw && (d->sw == 2 || d->sh == 1)) {
		int full = 0;
		Node *ops[8], *other[8];
		int first[8];
		int ne = mm_epilogue(F, n, ops, other, first);
		for (int e = 0; e < ne; e++)
			full |= other[e] && other[e]->rank == 4 && !memcmp(other[e]->shape, n->shape, sizeof n->shape[0] * 4);
		if (vw != 16 || full)
			return 0;
		if (d->sw == 2) {
			/* two output rows a vector, a half each (DwGeom.pair) */
			d->pair = 1;
			d->nvr = 1;
			d->PW = vw + (d->KW - 1) * d->dw;
			if (d->PW < d->pw + d->W)
				d->PW = d->pw + d->W;
			d->len = d->PH * d->PW;
			return d->len * 4 <= DW_MAX_BUF;
		}
		d->flat = 1;
		d->PW = d->OW + (d->KW - 1) * d->dw;
		if (d->PW < d->pw + d->W)
			d->PW = d->pw + d->W;
		d->nvf = (d->OH * d->PW + vw - 1) / vw;
		if (d->nvf > 16)
			return 0;
		/* the last vector's reads, from the last kernel position */
		d->len = d->nvf * vw + (d->KH - 1) * d->dh * d->PW + (d->KW - 1) * d->dw;
		if (d->len < d->PH * d->PW)
			/* equivalent mutant [stmt]: at stride 1 the last vector's
			 * reads already reach past the last row (nvf vw >= OH PW) */
			d->len = d->PH * d->PW;
		return d->len * 4 <= DW_MAX_BUF;
	}
	d->nvr = (d->OW + vw - 1) / vw;
	/* the columns the row's whole vectors read, and the input's own */
	d->PW = d->nvr * vw * d->sw + (d->KW - 1) * d->dw;
	if (d->PW < d->pw + d->W)
		d->PW = d->pw + d->W;
	d->len = d->PH * d->PW;
	return d->len * 4 <= DW_MAX_BUF;
}

static void call_memset(Gen *G, LLVMValueRef p, LLVMValueRef bytes)
{
	LLVMTypeRef at[3] = {G->i8p, G->i32, G->i64};
	LLVMValueRef av[3] = {llvm.LLVMBuildPointerCast(G->B, p, G->i8p, ""), ci32(G, 0), bytes};
	call(G, "memset", G->i8p, at, av, 3);
}

/* elements [off, off + len) of p (floats) set to zero, when len > 0 */
static void zero_run(Gen *G, LLVMValueRef p, LLVMValueRef off, int64_t len)
{
	if (len > 0)
		call_memset(G, llvm.LLVMBuildGEP2(G->B, G->f32, p, &off, 1, ""), ci64(G, len * 4));
}

/* The plane at `in` (H rows of W) into the padded buffer pb. */
/* A vector of zeros stored at element `at` of pb */
static void zero_vec(Gen *G, LLVMValueRef pb, LLVMValueRef at, LLVMTypeRef vt)
{
	LLVMValueRef p = llvm.LLVMBuildPointerCast(G->B, llvm.LLVMBuildGEP2(G->B, G->f32, pb, &at, 1, ""),
	                                          llvm.LLVMPointerType(vt, 0), "");
	llvm.LLVMSetAlignment(llvm.LLVMBuildStore(G->B, llvm.LLVMConstNull(vt), p), 4);
}

/* The plane into the buffer when a row is at most a vector (W <= vw): each
 * buffer row is zero vectors, then the input row as one masked load stored
 * whole at column pw (its masked-off lanes zeros: the right padding). A
 * store past a row's end lands on the next row's start, which that row's
 * zeros overwrite after; past the last row, on the buffer's room (DW_ROOM).
 * The calls of memset and memmove a row cost more than the sums of a 14x14
 * plane of stride 2. */
static void dw_fill_small(Fn *T, DwGeom *d, LLVMValueRef pb, LLVMValueRef in, int vw)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	int64_t zrow = (d->PW + vw - 1) / vw;
	/* rows above the input's, and everything from the input's end on */
	for (int64_t i = 0; i < d->ph * d->PW; i += vw)
		zero_vec(G, pb, ci64(G, i), vt);
	for (int64_t i = (d->ph + d->H) * d->PW; i < d->len; i += vw)
		zero_vec(G, pb, ci64(G, i), vt);
	Loop lr;
	LLVMValueRef r = loop_to(T, &lr, ci64(G, d->H));
	LLVMValueRef row = imul(G, iadd(G, r, ci64(G, d->ph)), ci64(G, d->PW));
	for (int64_t z = 0; z < zrow; z++)
		zero_vec(G, pb, iadd(G, row, ci64(G, z * vw)), vt);
	LLVMValueRef src = imul(G, r, ci64(G, d->W)), dst = iadd(G, row, ci64(G, d->pw));
	LLVMValueRef sp = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, in, &src, 1, ""), llvm.LLVMPointerType(vt, 0), "");
	LLVMValueRef x = masked_load(G, vt, sp, lanes_below(G, vw, ci64(G, d->W)), llvm.LLVMConstNull(vt), 4);
	LLVMValueRef dp = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, pb, &dst, 1, ""), llvm.LLVMPointerType(vt, 0), "");
	llvm.LLVMSetAlignment(llvm.LLVMBuildStore(B, x, dp), 4);
	loop_end(T, &lr);
}

static void dw_fill(Fn *T, DwGeom *d, LLVMValueRef pb, LLVMValueRef in, int vw)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	if (d->W <= vw) {
		dw_fill_small(T, d, pb, in, vw);
		return;
	}
	/* the rows above and below the input's: zeros */
	zero_run(G, pb, ci64(G, 0), d->ph * d->PW);
	zero_run(G, pb, ci64(G, (d->ph + d->H) * d->PW), d->len - (d->ph + d->H) * d->PW);
	Loop lr;
	LLVMValueRef r = loop_to(T, &lr, ci64(G, d->H));
	LLVMValueRef row = imul(G, iadd(G, r, ci64(G, d->ph)), ci64(G, d->PW));
	zero_run(G, pb, row, d->pw);
	LLVMValueRef dst = iadd(G, row, ci64(G, d->pw)), src = imul(G, r, ci64(G, d->W));
	memcpy_bytes(T, llvm.LLVMBuildGEP2(B, G->f32, pb, &dst, 1, ""), llvm.LLVMBuildGEP2(B, G->f32, in, &src, 1, ""),
	             ci64(G, d->W * 4));
	zero_run(G, pb, iadd(G, dst, ci64(G, d->W)), d->PW - d->pw - d->W);
	loop_end(T, &lr);
}

/* The vector of pixels of buffer row `row` from column col on: every sw-th
 * element (stride 2: the even lanes of two vectors) */
static LLVMValueRef dw_load(Gen *G, LLVMValueRef pb, LLVMValueRef at, int vw, int sw)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	LLVMValueRef p = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, pb, &at, 1, ""),
	                                          llvm.LLVMPointerType(vt, 0), "");
	LLVMValueRef a = llvm.LLVMBuildLoad2(B, vt, p, "");
	llvm.LLVMSetAlignment(a, 4);
	if (sw == 1)
		return a;
	LLVMValueRef one = ci64(G, 1);
	LLVMValueRef q = llvm.LLVMBuildGEP2(B, vt, p, &one, 1, "");
	LLVMValueRef b = llvm.LLVMBuildLoad2(B, vt, q, "");
	llvm.LLVMSetAlignment(b, 4);
	LLVMValueRef idx[64];
	for (int i = 0; i < vw; i++)
		idx[i] = ci32(G, 2 * i);
	return llvm.LLVMBuildShuffleVector(B, a, b, llvm.LLVMConstVector(idx, (unsigned)vw), "");
}

typedef struct DwRow {
	ConvK *k;
	DwGeom *d;
	LLVMValueRef pb, wc, oplane, bias, chv[8], oh;
} DwRow;

/* R output rows from r->oh on by nv vectors from vector j0 on; each row's
 * last vector has rem valid lanes. The tile's R * nv sums are independent
 * chains (one row of one vector was a chain of KH*KW dependent FMAs: 5x5
 * planes of 14x14 at 10-13 GFLOP/s), and rows share the loads of the
 * input rows they both read. */
static void dw_tile(Fn *T, DwRow *r, int R, LLVMValueRef j0, int nv, int rem)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	ConvK *k = r->k;
	DwGeom *d = r->d;
	int vw = k->vw;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	LLVMTypeRef ts[3] = {vt, vt, vt};
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	LLVMValueRef acc[DW_MAX_ACC][DW_NV];
	for (int q = 0; q < R; q++)
		for (int v = 0; v < nv; v++)
			acc[q][v] = llvm.LLVMConstNull(vt);
	LLVMValueRef col0 = imul(G, j0, ci64(G, vw * d->sw));
	LLVMValueRef rbase = iadd(G, imul(G, r->oh, ci64(G, d->sh * d->PW)), col0);
	for (int64_t kh = 0; kh < d->KH; kh++)
		for (int64_t kw = 0; kw < d->KW; kw++) {
			LLVMValueRef wi = ci64(G, kh * d->KW + kw);
			LLVMValueRef wv = splat(G, vt, vw, llvm.LLVMBuildLoad2(B, G->f32, llvm.LLVMBuildGEP2(B, G->f32, r->wc, &wi, 1, ""), ""));
			for (int q = 0; q < R; q++) {
				LLVMValueRef at = iadd(G, rbase, ci64(G, (q * d->sh + kh * d->dh) * d->PW + kw * d->dw));
				for (int v = 0; v < nv; v++) {
					LLVMValueRef x = dw_load(G, r->pb, iadd(G, at, ci64(G, (int64_t)v * vw * d->sw)), vw, (int)d->sw);
					LLVMValueRef vs[3] = {wv, x, acc[q][v]};
					acc[q][v] = call(G, fma, vt, ts, vs, 3);
				}
			}
		}
	LLVMValueRef out = k->out ? k->out : nptr(T, k->n);
	int full_other = 0;
	for (int e = 0; e < k->nepi; e++)
		full_other |= k->other[e] && cv_full(k, k->other[e]);
	for (int q = 0; q < R; q++) {
		LLVMValueRef orow = iadd(G, r->oplane, imul(G, iadd(G, r->oh, ci64(G, q)), ci64(G, d->OW)));
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = iadd(G, orow, iadd(G, imul(G, j0, ci64(G, vw)), ci64(G, (int64_t)v * vw)));
			LLVMValueRef p = llvm.LLVMBuildGEP2(B, G->f32, out, &off, 1, "");
			if (v < nv - 1 || rem == vw) {
				LLVMValueRef x = cv_epilogue(T, k, acc[q][v], vw, r->bias, r->chv, off);
				LLVMValueRef st = llvm.LLVMBuildStore(B, x, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""));
				llvm.LLVMSetAlignment(st, 4);
			} else if (!full_other) {
				/* the row's last pixels: one masked store */
				LLVMValueRef x = cv_epilogue(T, k, acc[q][v], vw, r->bias, r->chv, off);
				masked_store(G, x, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""),
				             lanes_below(G, vw, ci64(G, rem)), 4);
			} else {
				/* a residual is read at each pixel: the valid lanes one by one */
				for (int l = 0; l < rem; l++) {
					LLVMValueRef ol = iadd(G, off, ci64(G, l));
					LLVMValueRef x = llvm.LLVMBuildExtractElement(B, acc[q][v], ci32(G, l), "");
					llvm.LLVMBuildStore(B, cv_epilogue(T, k, x, 1, r->bias, r->chv, ol),
					                    llvm.LLVMBuildGEP2(B, G->f32, out, &ol, 1, ""));
				}
			}
		}
	}
}

/* R rows from r->oh on, all their vectors: groups of DW_NV (R is 1 then),
 * then the rest, whose last may be short */
static void dw_rows(Fn *T, DwRow *r, int R)
{
	Gen *G = T->gen;
	DwGeom *d = r->d;
	int vw = r->k->vw;
	int64_t ngroups = (d->nvr - 1) / DW_NV, left = d->nvr - ngroups * DW_NV;
	int rem = (int)(d->OW - (d->nvr - 1) * vw);
	if (ngroups > 0) {
		Loop lj;
		LLVMValueRef g = loop_to(T, &lj, ci64(G, ngroups));
		dw_tile(T, r, R, imul(G, g, ci64(G, DW_NV)), DW_NV, vw);
		loop_end(T, &lj);
	}
	dw_tile(T, r, R, ci64(G, ngroups * DW_NV), (int)left, rem);
}

/* A small plane as one run (DwGeom.flat): nvf vectors of the buffer's
 * pixels, each output row's OW lanes compressed into the result */
static void dw_flat(Fn *T, DwRow *r)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	ConvK *k = r->k;
	DwGeom *d = r->d;
	int vw = k->vw;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	LLVMTypeRef ts[3] = {vt, vt, vt};
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	LLVMValueRef acc[16];
	for (int64_t j = 0; j < d->nvf; j++)
		acc[j] = llvm.LLVMConstNull(vt);
	for (int64_t kh = 0; kh < d->KH; kh++)
		for (int64_t kw = 0; kw < d->KW; kw++) {
			LLVMValueRef wi = ci64(G, kh * d->KW + kw);
			LLVMValueRef wv = splat(G, vt, vw, llvm.LLVMBuildLoad2(B, G->f32, llvm.LLVMBuildGEP2(B, G->f32, r->wc, &wi, 1, ""), ""));
			for (int64_t j = 0; j < d->nvf; j++) {
				LLVMValueRef x = dw_load(G, r->pb, ci64(G, j * vw + kh * d->dh * d->PW + kw * d->dw), vw, 1);
				LLVMValueRef vs[3] = {wv, x, acc[j]};
				acc[j] = call(G, fma, vt, ts, vs, 3);
			}
		}
	LLVMValueRef out = k->out ? k->out : nptr(T, k->n);
	int64_t at = 0; /* output pixels stored so far */
	for (int64_t j = 0; j < d->nvf; j++) {
		/* the lanes of output pixels, moved to the front by a constant
		 * permutation (a memory-destination vcompressps took over a
		 * hundred cycles on Zen 4), then stored masked */
		LLVMValueRef idx[16];
		int any = 0;
		for (int l = 0; l < vw; l++) {
			int64_t f = j * vw + l;
			if (f < d->OH * d->PW && f % d->PW < d->OW)
				idx[any++] = ci32(G, l);
		}
		if (!any)
			continue;
		for (int l = any; l < vw; l++)
			idx[l] = ci32(G, 0);
		LLVMValueRef off = iadd(G, r->oplane, ci64(G, at));
		LLVMValueRef x = cv_epilogue(T, k, acc[j], vw, r->bias, r->chv, off);
		x = llvm.LLVMBuildShuffleVector(B, x, llvm.LLVMGetUndef(vt), llvm.LLVMConstVector(idx, (unsigned)vw), "");
		LLVMValueRef p = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, out, &off, 1, ""), llvm.LLVMPointerType(vt, 0), "");
		masked_store(G, x, p, lanes_below(G, vw, ci64(G, any)), 4);
		at += any;
	}
}

/* np pairs of output rows from r->oh on (DwGeom.pair); the last pair's
 * second row is missing when `odd` */
static void dw_pairs(Fn *T, DwRow *r, int np, int odd)
{
	Gen *G = T->gen;
	LLVMBuilderRef B = G->B;
	ConvK *k = r->k;
	DwGeom *d = r->d;
	int vw = k->vw, half = vw / 2;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	LLVMTypeRef ts[3] = {vt, vt, vt};
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%df32", vw);
	LLVMValueRef even[16], hi[16];
	for (int i = 0; i < vw; i++) {
		even[i] = ci32(G, 2 * (i % half) + (i < half ? 0 : vw));
		hi[i] = ci32(G, i < half ? half + i : 0);
	}
	LLVMValueRef evenv = llvm.LLVMConstVector(even, (unsigned)vw), hiv = llvm.LLVMConstVector(hi, (unsigned)vw);
	LLVMValueRef acc[DW_MAX_ACC];
	for (int q = 0; q < np; q++)
		acc[q] = llvm.LLVMConstNull(vt);
	LLVMValueRef rbase = imul(G, r->oh, ci64(G, d->sh * d->PW));
	for (int64_t kh = 0; kh < d->KH; kh++)
		for (int64_t kw = 0; kw < d->KW; kw++) {
			LLVMValueRef wi = ci64(G, kh * d->KW + kw);
			LLVMValueRef wv = splat(G, vt, vw, llvm.LLVMBuildLoad2(B, G->f32, llvm.LLVMBuildGEP2(B, G->f32, r->wc, &wi, 1, ""), ""));
			for (int q = 0; q < np; q++) {
				/* rows 2q and 2q + 1 of the tile (the last pair of an odd
				 * count reads its first row twice) */
				int64_t r0 = 2 * q, r1 = odd && q == np - 1 ? r0 : r0 + 1;
				LLVMValueRef a = dw_load(G, r->pb, iadd(G, rbase, ci64(G, (r0 * d->sh + kh * d->dh) * d->PW + kw * d->dw)), vw, 1);
				LLVMValueRef b = dw_load(G, r->pb, iadd(G, rbase, ci64(G, (r1 * d->sh + kh * d->dh) * d->PW + kw * d->dw)), vw, 1);
				LLVMValueRef x = llvm.LLVMBuildShuffleVector(B, a, b, evenv, "");
				LLVMValueRef vs[3] = {wv, x, acc[q]};
				acc[q] = call(G, fma, vt, ts, vs, 3);
			}
		}
	LLVMValueRef out = k->out ? k->out : nptr(T, k->n);
	LLVMValueRef mask = lanes_below(G, vw, ci64(G, d->OW));
	for (int q = 0; q < np; q++) {
		LLVMValueRef off = iadd(G, r->oplane, imul(G, iadd(G, r->oh, ci64(G, 2 * q)), ci64(G, d->OW)));
		LLVMValueRef x = cv_epilogue(T, k, acc[q], vw, r->bias, r->chv, off);
		LLVMValueRef p = llvm.LLVMBuildGEP2(B, G->f32, out, &off, 1, "");
		masked_store(G, x, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""), mask, 4);
		if (odd && q == np - 1)
			continue;
		LLVMValueRef off1 = iadd(G, off, ci64(G, d->OW));
		LLVMValueRef p1 = llvm.LLVMBuildGEP2(B, G->f32, out, &off1, 1, "");
		LLVMValueRef x1 = llvm.LLVMBuildShuffleVector(B, x, llvm.LLVMGetUndef(vt), hiv, "");
		masked_store(G, x1, llvm.LLVMBuildPointerCast(B, p1, llvm.LLVMPointerType(vt, 0), ""), mask, 4);
	}
}

int k_conv2d_dw_try(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int vw = G->vbytes / 4;
	DwGeom d;
	if (!dw_geom(F, n, vw, &d))
		return 0;
	ConvGeom cg = {.sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = d.C};
	ConvK k;
	cv_setup(F, &k, n, &cg, d.OH * d.OW, 1, 1);
	int nl = k.nleaf;
	LLVMValueRef vals[CV_MAX_LEAF + 2], got[CV_MAX_LEAF + 2];
	cv_env(F, &k, vals);
	/* a task a run of planes, four runs a thread */
	int64_t planes = n->shape[0] * d.C;
	LLVMValueRef nth = llvm.LLVMBuildSExt(B, call(G, "nestrt_num_threads", G->i32, NULL, NULL, 0), G->i64, "");
	LLVMValueRef parts = imul(G, nth, ci64(G, 4));
	parts = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, parts, ci64(G, planes), ""), parts,
	                             ci64(G, planes), "");
	vals[nl] = parts;
	Fn T;
	Task tk = task_begin(F, &T, "cvdw", vals, nl + 1, got);
	cv_unenv(&T, &k, got);
	/* the padded plane: the task's own, in its entry block */
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	LLVMValueRef pb = llvm.LLVMBuildArrayAlloca(B, G->f32, ci64(G, d.len + DW_ROOM), "plane");
	llvm.LLVMSetAlignment(pb, 64);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	Loop lt, lq, lr;
	LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef q0 = idiv(G, imul(G, t, ci64(G, planes)), got[nl]);
	LLVMValueRef q1 = idiv(G, imul(G, iadd(G, t, ci64(G, 1)), ci64(G, planes)), got[nl]);
	LLVMValueRef q = loop_begin(&T, &lq, q0, q1);
	LLVMValueRef c = irem(G, q, ci64(G, d.C));
	LLVMValueRef ioff = imul(G, q, ci64(G, d.H * d.W));
	dw_fill(&T, &d, pb, llvm.LLVMBuildGEP2(B, G->f32, T.ptr[k.x->id], &ioff, 1, ""), vw);
	DwRow r = {.k = &k, .d = &d, .pb = pb, .oplane = imul(G, q, ci64(G, d.OH * d.OW))};
	LLVMValueRef woff = imul(G, c, ci64(G, d.KH * d.KW));
	r.wc = llvm.LLVMBuildGEP2(B, G->f32, T.ptr[k.w->id], &woff, 1, "");
	r.bias = k.b ? load_at(&T, k.b, c) : NULL;
	for (int e = 0; e < k.nepi; e++)
		if (k.other[e] && !cv_full(&k, k.other[e]))
			r.chv[e] = cv_chan(&T, &k, k.other[e], c);
	if (d.flat) {
		dw_flat(&T, &r);
	} else if (d.pair) {
		/* tiles of up to DW_MAX_ACC / 2 pairs of rows */
		int64_t npairs = (d.OH + 1) / 2;
		int P = npairs < DW_MAX_ACC / 2 ? (int)npairs : DW_MAX_ACC / 2;
		int64_t full = d.OH / 2 / P;   /* tiles of P whole pairs */
		if (full > 0) {
			LLVMValueRef t0 = loop_to(&T, &lr, ci64(G, full));
			r.oh = imul(G, t0, ci64(G, 2 * P));
			dw_pairs(&T, &r, P, 0);
			loop_end(&T, &lr);
		}
		int64_t done = full * 2 * P, rest = d.OH - done;
		if (rest > 0) {
			r.oh = ci64(G, done);
			dw_pairs(&T, &r, (int)((rest + 1) / 2), (int)(rest % 2));
		}
	} else {
		/* rows a tile: enough independent sums when a row is few vectors */
		int R = d.nvr >= DW_NV ? 1 : DW_MAX_ACC / (int)d.nvr;
		if (R > d.OH)
			R = (int)d.OH;
		LLVMValueRef t0 = loop_to(&T, &lr, ci64(G, d.OH / R));
		r.oh = imul(G, t0, ci64(G, R));
		dw_rows(&T, &r, R);
		loop_end(&T, &lr);
		if (d.OH % R) {
			r.oh = ci64(G, d.OH - d.OH % R);
			dw_rows(&T, &r, (int)(d.OH % R));
		}
	}
	loop_end(&T, &lq);
	loop_end(&T, &lt);
	task_end(F, &T, &tk, parts);
	free(k.soff);
	return 1;
}

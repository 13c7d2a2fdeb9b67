/* winograd.c - 3x3 convolutions of stride 1 by Winograd's F(4x4, 3x3) and
 * F(2x2, 3x3) (plan.c: conv_geom's wino), tried before conv.c's kernels
 * (graph.c), whose ConvK, epilogue and tile loop it uses. */
#include "gen.h"

#include <stdlib.h>

/* ---- conv2d by Winograd's F(4x4, 3x3) and F(2x2, 3x3) (ConvGeom.wino) ----
 *
 * Output tile (ms x ms pixels of a channel, ms 4 or 2) Y = A^T [U (.) V] A
 * where V = B^T d B is the transform of the al x al input patch d (al =
 * ms + 2) and U = G g G^T the transform of the 3x3 kernel g (Lavin and
 * Gray's matrices; F(4x4, 3x3)'s points 0, +-1, +-2 and infinity): per
 * point p of the na = al^2, the sum over input channels is a matrix
 * product M_p[tiles, O] = V_p[tiles, C] x U_p[C, O], na C O multiply-adds
 * per tile against 9 ms^2 C O for its pixels directly. U comes pre-packed
 * (NESTRT_PACK_WINO or _WINO2, runtime/panel.c) in panels of `wide` output
 * channels, U[panel][p C + c][wide], else is made at each call in the
 * scratch area in the same layout, a task a vector of output channels.
 * Then, per image, the input's transforms (wg_input) into V[p][tile][c] in
 * the scratch area, and per block of whole groups of WINO_MR tiles and
 * panel the na products as register tiles of WINO_MR tiles by nv vectors of
 * channels (V broadcast, U's panel loaded) into M[p][tile][wide] on the
 * task's stack, then the output's transforms, a vector of channels at a
 * time, through bias and the fused epilogue in registers, stored a row of a
 * tile's pixels of each channel at a time. A task is a block, its input's
 * transforms and every panel, where U takes at most 4 MiB; else the input's
 * transforms are tasks of their own and a task is a block by a panel
 * (k_conv2d_wino: fuse). */

static const double WG_BT[6 * 6] = {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                                    0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1};
static const double WG_G[6 * 3] = {1.0 / 4, 0, 0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
                                   1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0, 0, 1};
static const double WG_AT[4 * 6] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
/* F(2x2, 3x3): points 0, +-1 and infinity */
static const double WG_BT2[4 * 4] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double WG_G2[4 * 3] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double WG_AT2[2 * 4] = {1, 1, 1, 0, 0, 1, -1, -1};

/* out[r*os] = sum over c of m[r][c] in[c*is] (rows by cols), vectors of
 * vw f32: +-1 as additions, zeros skipped */
static void wg_apply(Gen *G, int vw, const double *m, int rows, int cols, LLVMValueRef *in, int is, LLVMValueRef *out,
                     int os)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	for (int r = 0; r < rows; r++) {
		LLVMValueRef acc = NULL;
		for (int c = 0; c < cols; c++) {
			double e = m[r * cols + c];
			LLVMValueRef x = in[c * is];
			if (e == 0)
				continue;
			LLVMValueRef ev = splat(G, vt, vw, llvm.LLVMConstReal(G->f32, e));
			if (!acc)
				acc = e == 1 ? x : e == -1 ? llvm.LLVMBuildFNeg(B, x, "") : llvm.LLVMBuildFMul(B, ev, x, "");
			else if (e == 1)
				acc = llvm.LLVMBuildFAdd(B, acc, x, "");
			else if (e == -1)
				acc = llvm.LLVMBuildFSub(B, acc, x, "");
			else
				acc = fma_f32(G, vw, ev, x, acc);
		}
		out[r * os] = acc ? acc : llvm.LLVMConstNull(vt);
	}
}

/* <0, s, 2s, ...> (vw lanes of i32: a gather of 32-bit offsets moves 16
 * lanes an instruction, of 64-bit ones 8), and vw lanes of true */
static LLVMValueRef wg_lanes(Gen *G, int vw, int64_t s)
{
	LLVMValueRef e[64];
	for (int l = 0; l < vw; l++)
		e[l] = ci32(G, (int)(l * s));
	return llvm.LLVMConstVector(e, (unsigned)vw);
}

static LLVMValueRef wg_all(Gen *G, int vw)
{
	return splat(G, llvm.LLVMVectorType(G->i1, (unsigned)vw), vw, llvm.LLVMConstInt(G->i1, 1, 0));
}

/* the vector at element off of p (f32) */
static LLVMValueRef wg_load(Gen *G, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef off)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef q = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, p, &off, 1, ""), llvm.LLVMPointerType(vt, 0), "");
	LLVMValueRef v = llvm.LLVMBuildLoad2(B, vt, q, "");
	llvm.LLVMSetAlignment(v, 4);
	return v;
}

static void wg_store(Gen *G, LLVMValueRef v, LLVMValueRef p, LLVMValueRef off)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef q = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->f32, p, &off, 1, ""),
	                                           llvm.LLVMPointerType(llvm.LLVMTypeOf(v), 0), "");
	llvm.LLVMSetAlignment(llvm.LLVMBuildStore(B, v, q), 4);
}

/* p + off + lane offsets lo (i32): the sum in 32 bits, so that x86 takes
 * 32-bit indices (vgatherdps, 16 lanes an instruction; through a vector
 * of 64-bit pointers, two of 8) */
static LLVMValueRef wg_ptrs(Gen *G, int vw, LLVMValueRef p, LLVMValueRef off, LLVMValueRef lo)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef it = llvm.LLVMVectorType(G->i32, (unsigned)vw);
	LLVMValueRef idx = llvm.LLVMBuildAdd(B, splat(G, it, vw, llvm.LLVMBuildTrunc(B, off, G->i32, "")), lo, "");
	return llvm.LLVMBuildGEP2(B, G->f32, p, &idx, 1, "");
}

/* vw lanes of f32 at p + off + lane offsets lo, under mask */
static LLVMValueRef wg_gather(Gen *G, int vw, LLVMValueRef p, LLVMValueRef off, LLVMValueRef lo, LLVMValueRef mask)
{
	LLVMTypeRef vt = llvm.LLVMVectorType(G->f32, (unsigned)vw);
	return masked_gather(G, vt, wg_ptrs(G, vw, p, off, lo), mask, llvm.LLVMConstNull(vt), 4);
}

/* a shuffle of a and b (b may be NULL: a's own lanes) by a constant mask */
static LLVMValueRef wg_shuf(Gen *G, LLVMValueRef a, LLVMValueRef b, const int *mask, int n)
{
	LLVMValueRef m[64];
	for (int i = 0; i < n; i++)
		m[i] = ci32(G, mask[i]);
	return llvm.LLVMBuildShuffleVector(G->B, a, b ? b : llvm.LLVMGetUndef(llvm.LLVMTypeOf(a)), llvm.LLVMConstVector(m, (unsigned)n), "");
}

/* The output's transforms hold a row of ms pixels of vw channels in x[]
 * (lanes: channels); the image wants each channel's 4 pixels side by side.
 * wg_to_runs: run l = x[0][l], .., x[ms-1][l] (ms 4 or 2); wg_from_runs the
 * inverse (a residual read the same way). 4-element loads and stores with
 * shuffles cost a fifth of the 16 scatters (or gathers) of a vector a
 * pixel, whose lanes each wrote a plane of its own. */
static void wg_to_runs(Gen *G, int vw, int ms, LLVMValueRef *x, LLVMValueRef *run)
{
	int m[64];
	for (int l = 0; l < vw; l++)
		m[2 * l] = l, m[2 * l + 1] = vw + l;
	LLVMValueRef all = wg_shuf(G, x[0], x[1], m, 2 * vw);
	if (ms == 4) {
		LLVMValueRef s23 = wg_shuf(G, x[2], x[3], m, 2 * vw);
		for (int l = 0; l < vw; l++)
			m[4 * l] = 2 * l, m[4 * l + 1] = 2 * l + 1, m[4 * l + 2] = 2 * vw + 2 * l, m[4 * l + 3] = 2 * vw + 2 * l + 1;
		all = wg_shuf(G, all, s23, m, 4 * vw);
	}
	for (int l = 0; l < vw; l++) {
		int e[4] = {ms * l, ms * l + 1, ms * l + 2, ms * l + 3};
		run[l] = wg_shuf(G, all, NULL, e, ms);
	}
}

static void wg_from_runs(Gen *G, int vw, int ms, LLVMValueRef *run, LLVMValueRef *x)
{
	LLVMValueRef cur[64];
	int m[64], n = vw, w = ms;
	for (int l = 0; l < vw; l++)
		cur[l] = run[l];
	for (; n > 1; n /= 2, w *= 2) {
		for (int i = 0; i < 2 * w; i++)
			m[i] = i;
		for (int i = 0; i < n / 2; i++)
			cur[i] = wg_shuf(G, cur[2 * i], cur[2 * i + 1], m, 2 * w);
	}
	for (int b = 0; b < ms; b++) {
		for (int l = 0; l < vw; l++)
			m[l] = ms * l + b;
		x[b] = wg_shuf(G, cur[0], NULL, m, vw);
	}
}

/* x[0..vw) (vw lanes each) transposed in place: at each step s the
 * off-diagonal blocks of s x s of every 2s x 2s block trade places */
static void wg_transpose(Gen *G, int vw, LLVMValueRef *x)
{
	int lo[64], hi[64];
	for (int s = vw / 2; s >= 1; s /= 2) {
		for (int e = 0; e < vw; e++) {
			lo[e] = e & s ? vw + e - s : e; /* row i: its own low block, then row i+s's */
			hi[e] = e & s ? vw + e : e + s;  /* row i+s: row i's high block, then its own */
		}
		for (int i = 0; i < vw; i++)
			if (!(i & s)) {
				LLVMValueRef a = x[i], b = x[i + s];
				x[i] = wg_shuf(G, a, b, lo, vw);
				x[i + s] = wg_shuf(G, a, b, hi, vw);
			}
	}
}

/* What the Winograd kernel's tasks share (k_conv2d_wino) */
typedef struct WgK {
	ConvK *k;
	ConvGeom *cg;
	int vw, ms, al, na;
	int64_t C, HW, TW, tp;
	const double *BT;
	LLVMTypeRef et, vt;
	LLVMValueRef rows, ximg, vb; /* the task's buffer of rows, the image, V */
	LLVMValueRef tbase;          /* V's first tile (a task's own V: its block's first) */
} WgK;

/* The input's transforms of tiles [lo, hi) of row th of tiles, channels
 * [c0, c0 + vw) (the lanes), into V[p][tile][c]: the al input rows the
 * tiles read are first turned channels-last into the task's buffer (vw x
 * vw blocks transposed in registers, read and written whole), then each of
 * a tile's al^2 elements is one vector load (gathers across the planes, or
 * along a plane's rows, waited on the cache for two fifths of the time). */
static void wg_input(Fn *F, WgK *w, LLVMValueRef th, LLVMValueRef c0, LLVMValueRef lo, LLVMValueRef hi)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvK *k = w->k;
	int vw = w->vw, ms = w->ms, al = w->al, na = w->na;
	int64_t C = w->C, HW = w->HW, TW = w->TW, tp = w->tp;
	LLVMTypeRef et = w->et, vt = w->vt;
	LLVMValueRef rows = w->rows, ximg = w->ximg, vb = w->vb;
	const double *BT = w->BT;
	Loop l2;
	LLVMValueRef ih0 = isub(G, imul(G, th, ci64(G, ms)), ci64(G, w->cg->ph));
	LLVMValueRef rin[6];
	int64_t nch = (k->W + vw - 1) / vw;
	for (int i = 0; i < al; i++) {
		LLVMValueRef ih = iadd(G, ih0, ci64(G, i));
		rin[i] = in_range(G, ih, ci64(G, k->H));
		LLVMBasicBlockRef jr = if_begin(F, rin[i]);
		LLVMValueRef w0 = imul(G, loop_to(F, &l2, ci64(G, nch)), ci64(G, vw));
		LLVMValueRef cols = k->W % vw ? lanes_below(G, vw, isub(G, ci64(G, k->W), w0)) : NULL;
		LLVMValueRef xb[64];
		for (int l = 0; l < vw; l++) {
			LLVMValueRef off = iadd(G, imul(G, iadd(G, c0, ci64(G, l)), ci64(G, HW)), iadd(G, imul(G, ih, ci64(G, k->W)), w0));
			LLVMValueRef q = llvm.LLVMBuildGEP2(B, et, ximg, &off, 1, "");
			xb[l] = cols ? masked_load(G, vt, q, cols, llvm.LLVMConstNull(vt), 4) : wg_load(G, vt, q, ci64(G, 0));
		}
		wg_transpose(G, vw, xb);
		/* pixel w0 + l of row i, its vw channels: those inside the row */
		for (int l = 0; l < vw; l++) {
			LLVMValueRef px = iadd(G, w0, ci64(G, l));
			LLVMBasicBlockRef jp = (k->W % vw) ? if_begin(F, llvm.LLVMBuildICmp(B, LLVMIntSLT, px, ci64(G, k->W), "")) : NULL;
			wg_store(G, xb[l], rows, imul(G, iadd(G, ci64(G, i * k->W), px), ci64(G, vw)));
			if (jp)
				if_end(F, jp);
		}
		loop_end(F, &l2);
		if_end(F, jr);
	}
	LLVMValueRef rt0 = imul(G, th, ci64(G, TW));
	LLVMValueRef tw = loop_begin(F, &l2, lo, hi);
	LLVMValueRef iw0 = isub(G, imul(G, tw, ci64(G, ms)), ci64(G, w->cg->pw));
	LLVMValueRef t = iadd(G, rt0, tw);
	LLVMTypeRef mt = llvm.LLVMVectorType(G->i1, (unsigned)vw);
	LLVMValueRef d[36], tt[36], vv[36];
	for (int j = 0; j < al; j++) {
		LLVMValueRef iw = iadd(G, iw0, ci64(G, j)), cin = in_range(G, iw, ci64(G, k->W));
		for (int i = 0; i < al; i++) {
			LLVMValueRef m = splat(G, mt, vw, llvm.LLVMBuildAnd(B, rin[i], cin, ""));
			LLVMValueRef q = llvm.LLVMBuildGEP2(B, et, rows, (LLVMValueRef[]){imul(G, iadd(G, ci64(G, i * k->W), iw), ci64(G, vw))}, 1, "");
			d[i * al + j] = masked_load(G, vt, q, m, llvm.LLVMConstNull(vt), 4);
		}
	}
	for (int j = 0; j < al; j++)
		wg_apply(G, vw, BT, al, al, &d[j], al, &tt[j], al);
	for (int i = 0; i < al; i++)
		wg_apply(G, vw, BT, al, al, &tt[i * al], 1, &vv[i * al], 1);
	t = isub(G, t, w->tbase);
	for (int p = 0; p < na; p++)
		wg_store(G, vv[p], vb, iadd(G, imul(G, iadd(G, ci64(G, p * tp), t), ci64(G, C)), c0));
	loop_end(F, &l2);
}

static void k_conv2d_wino(Fn *F, Node *n, ConvGeom *cg, LLVMValueRef packed)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvK k;
	cv_setup(F, &k, n, cg, n->shape[2] * n->shape[3], 1, 1);
	int vw = k.vw, nv = (int)(WINO_WIDE(G->vbytes) / vw), mr = WINO_MR;
	int64_t wide = WINO_WIDE(G->vbytes), npan = k.O / wide, C = k.C, HW = k.H * k.W;
	/* F(ms x ms, 3x3): al x al points (ConvGeom.wino: 4, or 2) */
	int ms = (int)cg->wino, al = ms + 2, na = al * al;
	const double *BT = ms == 4 ? WG_BT : WG_BT2, *GM = ms == 4 ? WG_G : WG_G2, *AT = ms == 4 ? WG_AT : WG_AT2;
	int64_t TW = (k.OW + ms - 1) / ms, TH = (k.OH + ms - 1) / ms, NT = TH * TW;
	/* Fused (fuse): a task a block of tiles, their input's transforms into
	 * its own V, then per panel of output channels the products and the
	 * output's transforms. A task's V is in its own stack, not the scratch
	 * area: the pool hands a block to either thread from call to call, and
	 * a V written by the other core the call before came over line by line
	 * (a 3x3 convolution of 64 channels at 56x56 took 0.74x the time at two
	 * threads with V the task's own; made by tasks of their own, 0.87x
	 * further). But each block reads all the weights' transforms: only
	 * where they take at most 4 MiB (at 7x7, 512 channels, 16.8 MB, fused
	 * took 1.2x the time). Else the input's transforms are tasks of their
	 * own, a row of tiles by a vector of channels, and a task is a block by
	 * a panel.
	 * A block is whole groups of mr tiles, its V and M (a panel's) in 1 MiB
	 * at most (M alone in 512 KiB when not fused): block b the groups
	 * [b ng / nblk, (b + 1) ng / nblk), tb tiles at most; a multiple of 4
	 * blocks where there are groups enough (2 or 4 threads share them
	 * evenly; a block more reads the weights' transforms once more). */
	int fuse = 4 * na * C * k.O <= ((int64_t)4 << 20);
	int64_t ng = (NT + mr - 1) / mr, tp = ng * mr;
	int64_t gmax = fuse ? (1 << 20) / (4 * na * (wide + C)) / mr : 512 * 1024 / (4 * na * wide) / mr;
	if (gmax < 1)
		gmax = 1;
	int64_t nblk = (ng + gmax - 1) / gmax;
	if (fuse)
		nblk = (nblk + 3) / 4 * 4 <= ng ? (nblk + 3) / 4 * 4 : ng;
	else
		while ((nblk * npan) % 4 && nblk < ng)
			nblk++;
	int64_t tb = (ng + nblk - 1) / nblk * mr;
	/* The weights' transforms come from memory at each call (a model's
	 * weights do not stay in the caches; at 14x14, 256 channels, 9.4 MB),
	 * and the first groups of tiles of a point waited for them: while a
	 * block runs a point, it prefetches the next point's (C wide elements,
	 * C wide / 16 lines), a line every 2^pfsh steps of c over its groups
	 * (at least ng / nblk of them), so that they cover it about once. */
	int64_t pfsh = 0;
	while ((ng / nblk) * C >> (pfsh + 1) >= C * wide / 16)
		pfsh++;
	LLVMTypeRef et = G->f32, ept = llvm.LLVMPointerType(et, 0), vt = llvm.LLVMVectorType(et, (unsigned)vw);
	/* scratch: the weights' transforms when they are not pre-packed
	 * (NESTRT_PACK_WINO; made here in the same layout), then the input's */
	LLVMValueRef soff = ci64(G, F->plan->scratch);
	LLVMValueRef ubuf = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "wgu");
	LLVMValueRef vbuf = llvm.LLVMBuildGEP2(B, et, ubuf, (LLVMValueRef[]){ci64(G, na * C * k.O)}, 1, "wgv");
	LLVMValueRef have = llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), "");
	ubuf = llvm.LLVMBuildSelect(B, have, llvm.LLVMBuildPointerCast(B, packed, ept, ""), ubuf, "");
	int nl = k.nleaf;
	LLVMValueRef vals[CV_MAX_LEAF + 4], got[CV_MAX_LEAF + 4];
	cv_env(F, &k, vals);
	vals[nl] = llvm.LLVMBuildPtrToInt(B, ubuf, G->i64, "");
	vals[nl + 1] = llvm.LLVMBuildPtrToInt(B, vbuf, G->i64, "");
	LLVMValueRef all = wg_all(G, vw);
	Fn T;
	Task tk;
	Loop l1, l2, l3, l4;

	/* the weights' transforms, a task a vector of output channels */
	LLVMBasicBlockRef jw = if_begin(F, llvm.LLVMBuildNot(B, have, ""));
	tk = task_begin(F, &T, "wgw", vals, nl + 1, got);
	cv_unenv(&T, &k, got);
	{
		LLVMValueRef u = llvm.LLVMBuildIntToPtr(B, got[nl], ept, "");
		LLVMValueRef gi = loop_begin(&T, &l1, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
		LLVMValueRef o0 = imul(G, gi, ci64(G, vw));
		LLVMValueRef j = idiv(G, o0, ci64(G, wide)), l0 = irem(G, o0, ci64(G, wide));
		LLVMValueRef lo = wg_lanes(G, vw, C * 9);
		LLVMValueRef c = loop_to(&T, &l2, ci64(G, C));
		LLVMValueRef g[9], t[18], uu[36];
		LLVMValueRef woff = iadd(G, imul(G, o0, ci64(G, C * 9)), imul(G, c, ci64(G, 9)));
		for (int s = 0; s < 9; s++)
			g[s] = wg_gather(G, vw, T.ptr[k.w->id], iadd(G, woff, ci64(G, s)), lo, all);
		for (int kw = 0; kw < 3; kw++)
			wg_apply(G, vw, GM, al, 3, &g[kw], 3, &t[kw], 3);
		for (int i = 0; i < al; i++)
			wg_apply(G, vw, GM, al, 3, &t[i * 3], 1, &uu[i * al], 1);
		for (int p = 0; p < na; p++) {
			LLVMValueRef off = imul(G, iadd(G, imul(G, iadd(G, imul(G, j, ci64(G, na)), ci64(G, p)), ci64(G, C)), c), ci64(G, wide));
			wg_store(G, uu[p], u, iadd(G, off, l0));
		}
		loop_end(&T, &l2);
		loop_end(&T, &l1);
	}
	task_end(F, &T, &tk, ci64(G, k.O / vw));
	if_end(F, jw);

	Loop ln;
	LLVMValueRef nn = loop_to(F, &ln, ci64(G, n->shape[0]));
	vals[nl + 2] = nn;

	WgK w = {.k = &k, .cg = cg, .vw = vw, .ms = ms, .al = al, .na = na, .C = C, .HW = HW, .TW = TW, .tp = tp, .BT = BT,
	         .et = et, .vt = vt, .tbase = ci64(G, 0)};
	if (!fuse) {
		tk = task_begin(F, &T, "wgi", vals, nl + 3, got);
		cv_unenv(&T, &k, got);
		w.vb = llvm.LLVMBuildIntToPtr(B, got[nl + 1], ept, "");
		w.ximg = llvm.LLVMBuildGEP2(B, et, T.ptr[k.x->id], (LLVMValueRef[]){imul(G, got[nl + 2], ci64(G, C * HW))}, 1, "");
		LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
		llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
		w.rows = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, al * k.W * vw), "wgrows");
		llvm.LLVMSetAlignment(w.rows, 64);
		llvm.LLVMPositionBuilderAtEnd(B, body);
		LLVMValueRef unit = loop_begin(&T, &l1, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
		wg_input(&T, &w, idiv(G, unit, ci64(G, C / vw)), imul(G, irem(G, unit, ci64(G, C / vw)), ci64(G, vw)), ci64(G, 0),
		         ci64(G, TW));
		loop_end(&T, &l1);
		task_end(F, &T, &tk, ci64(G, TH * (C / vw)));
	}

	tk = task_begin(F, &T, "wg", vals, nl + 3, got);
	cv_unenv(&T, &k, got);
	LLVMValueRef u = llvm.LLVMBuildIntToPtr(B, got[nl], ept, "");
	LLVMValueRef vb = llvm.LLVMBuildIntToPtr(B, got[nl + 1], ept, "");
	LLVMValueRef ooff = imul(G, got[nl + 2], ci64(G, k.O * k.P));
	w.vb = vb;
	w.ximg = llvm.LLVMBuildGEP2(B, et, T.ptr[k.x->id], (LLVMValueRef[]){imul(G, got[nl + 2], ci64(G, C * HW))}, 1, "");
	/* the task's buffers, in its entry block */
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	LLVMValueRef mb = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, na * tb * wide), "wgm");
	llvm.LLVMSetAlignment(mb, 64);
	if (fuse) {
		w.rows = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, al * k.W * vw), "wgrows");
		llvm.LLVMSetAlignment(w.rows, 64);
		w.vb = vb = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, na * tb * C), "wgv");
		llvm.LLVMSetAlignment(vb, 64);
		w.tp = tb;
	}
	LLVMValueRef chv[8] = {0};
	for (int e = 0; e < k.nepi; e++)
		if (k.other[e] && !cv_full(&k, k.other[e]) && !scalar_of_consts(k.other[e], 0)) {
			chv[e] = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, wide), "chan");
			llvm.LLVMSetAlignment(chv[e], 64);
		}
	llvm.LLVMPositionBuilderAtEnd(B, body);
	LLVMValueRef unit = loop_begin(&T, &l1, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef blk = fuse ? unit : idiv(G, unit, ci64(G, npan));
	LLVMValueRef g0 = idiv(G, imul(G, blk, ci64(G, ng)), ci64(G, nblk));
	LLVMValueRef g1 = idiv(G, imul(G, iadd(G, blk, ci64(G, 1)), ci64(G, ng)), ci64(G, nblk));
	LLVMValueRef t0 = imul(G, g0, ci64(G, mr)), bt = imul(G, isub(G, g1, g0), ci64(G, mr)); /* bt <= tb tiles */
	if (fuse)
		w.tbase = t0;
	Loop lj;
	LLVMValueRef j;
	if (fuse) {
		/* the input's transforms of the block's tiles in the image, a row of
		 * tiles and a vector of channels at a time */
		LLVMValueRef t1 = iadd(G, t0, bt);
		t1 = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, t1, ci64(G, NT), ""), t1, ci64(G, NT), "");
		Loop lr, lc;
		LLVMValueRef th = loop_begin(&T, &lr, idiv(G, t0, ci64(G, TW)), iadd(G, idiv(G, isub(G, t1, ci64(G, 1)), ci64(G, TW)), ci64(G, 1)));
		LLVMValueRef c0 = imul(G, loop_to(&T, &lc, ci64(G, C / vw)), ci64(G, vw));
		LLVMValueRef rt0 = imul(G, th, ci64(G, TW));
		LLVMValueRef lo = isub(G, t0, rt0), hi = isub(G, t1, rt0);
		lo = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSGT, lo, ci64(G, 0), ""), lo, ci64(G, 0), "");
		hi = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, hi, ci64(G, TW), ""), hi, ci64(G, TW), "");
		wg_input(&T, &w, th, c0, lo, hi);
		loop_end(&T, &lc);
		loop_end(&T, &lr);
		j = loop_to(&T, &lj, ci64(G, npan));
	} else {
		j = irem(G, unit, ci64(G, npan));
	}
	LLVMValueRef o0 = imul(G, j, ci64(G, wide));
	for (int e = 0; e < k.nepi; e++)
		if (chv[e]) {
			LLVMValueRef l = loop_to(&T, &l3, ci64(G, wide));
			llvm.LLVMBuildStore(B, cv_chan(&T, &k, k.other[e], iadd(G, o0, l)), llvm.LLVMBuildGEP2(B, et, chv[e], &l, 1, ""));
			loop_end(&T, &l3);
		}
	/* the na products of the block's tiles and this panel, into M[p][tile][wide] */
	{
		LLVMValueRef p = loop_to(&T, &l3, ci64(G, na));
		LLVMValueRef rg = loop_to(&T, &l4, isub(G, g1, g0));
		LLVMValueRef r0 = imul(G, rg, ci64(G, mr));
		LLVMValueRef arow = llvm.LLVMBuildGEP2(B, et, vb, (LLVMValueRef[]){imul(G, iadd(G, imul(G, p, ci64(G, w.tp)), isub(G, iadd(G, t0, r0), w.tbase)), ci64(G, C))}, 1, "");
		LLVMValueRef pan = imul(G, iadd(G, imul(G, j, ci64(G, na)), p), ci64(G, C * wide));
		LLVMValueRef bb = llvm.LLVMBuildGEP2(B, et, u, &pan, 1, "");
		LLVMValueRef acc[CV_MAX_MR][CV_MAX_NV];
		TileLoop L;
		tile_loop_begin(&T, &L, mr, nv, vt, ci64(G, 0), ci64(G, C), NULL, acc);
		/* the weights' transforms of the next point (or panel) right after
		 * these, a line every 2^pfsh steps of the block's tiles */
		LLVMValueRef pl = llvm.LLVMBuildShl(B, llvm.LLVMBuildLShr(B, iadd(G, imul(G, rg, ci64(G, C)), L.c), ci64(G, pfsh), ""), ci64(G, 6), "");
		prefetch_line(G, llvm.LLVMBuildGEP2(B, G->i8, llvm.LLVMBuildPointerCast(B, bb, G->i8p, ""),
		                                    (LLVMValueRef[]){iadd(G, pl, ci64(G, C * wide * 4))}, 1, ""));
		LLVMValueRef bv[CV_MAX_NV];
		for (int v = 0; v < nv; v++)
			bv[v] = wg_load(G, vt, bb, iadd(G, imul(G, L.c, ci64(G, wide)), ci64(G, v * vw)));
		for (int r = 0; r < mr; r++) {
			LLVMValueRef off = iadd(G, L.c, ci64(G, r * C));
			LLVMValueRef a = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, arow, &off, 1, ""), "");
			LLVMValueRef bc = splat(G, vt, vw, a);
			for (int v = 0; v < nv; v++)
				acc[r][v] = fma_f32(G, vw, bc, bv[v], acc[r][v]);
		}
		tile_loop_end(&T, &L, acc);
		LLVMValueRef row0 = iadd(G, imul(G, p, ci64(G, tb)), r0);
		for (int r = 0; r < mr; r++)
			for (int v = 0; v < nv; v++)
				wg_store(G, acc[r][v], mb, iadd(G, imul(G, iadd(G, row0, ci64(G, r)), ci64(G, wide)), ci64(G, v * vw)));
		loop_end(&T, &l4);
		loop_end(&T, &l3);
	}
	/* output transforms of the block's tiles in the image */
	{
		LLVMValueRef tl = loop_to(&T, &l3, bt);
		LLVMValueRef t = iadd(G, t0, tl);
		LLVMBasicBlockRef jt = if_begin(&T, llvm.LLVMBuildICmp(B, LLVMIntSLT, t, ci64(G, NT), ""));
		LLVMValueRef oh0 = imul(G, idiv(G, t, ci64(G, TW)), ci64(G, ms));
		LLVMValueRef ow0 = imul(G, irem(G, t, ci64(G, TW)), ci64(G, ms));
		for (int v = 0; v < nv; v++) {
			LLVMValueRef o = iadd(G, o0, ci64(G, v * vw));
			LLVMValueRef m[36], tt[24], y[16], bias = NULL, cv[8] = {0};
			for (int p = 0; p < na; p++)
				m[p] = wg_load(G, vt, mb, iadd(G, imul(G, iadd(G, ci64(G, p * tb), tl), ci64(G, wide)), ci64(G, v * vw)));
			for (int s = 0; s < al; s++)
				wg_apply(G, vw, AT, ms, al, &m[s], al, &tt[s], al);
			for (int a = 0; a < ms; a++)
				wg_apply(G, vw, AT, ms, al, &tt[a * al], 1, &y[a * ms], 1);
			if (k.b)
				bias = wg_load(G, vt, T.ptr[k.b->id], o);
			for (int e = 0; e < k.nepi; e++)
				if (chv[e])
					cv[e] = wg_load(G, vt, chv[e], ci64(G, v * vw));
			/* a row of the tile at a time: its 4 pixels of each channel
			 * (those inside the image), through bias and epilogue */
			LLVMTypeRef rt = llvm.LLVMVectorType(et, (unsigned)ms);
			LLVMValueRef cols = k.OW % ms ? lanes_below(G, ms, isub(G, ci64(G, k.OW), ow0)) : NULL;
			LLVMValueRef oimg = llvm.LLVMBuildGEP2(B, et, T.ptr[n->id], &ooff, 1, "");
			for (int a = 0; a < ms; a++) {
				LLVMValueRef oh = iadd(G, oh0, ci64(G, a));
				LLVMBasicBlockRef jin = k.OH % ms ? if_begin(&T, llvm.LLVMBuildICmp(B, LLVMIntSLT, oh, ci64(G, k.OH), "")) : NULL;
				LLVMValueRef at[64], x[4], run[64];
				for (int l = 0; l < vw; l++)
					at[l] = iadd(G, imul(G, iadd(G, o, ci64(G, l)), ci64(G, k.P)), iadd(G, imul(G, oh, ci64(G, k.OW)), ow0));
				for (int b = 0; b < ms; b++) {
					x[b] = y[a * ms + b];
					if (bias)
						x[b] = llvm.LLVMBuildFAdd(B, x[b], bias, "");
				}
				for (int e = 0; e < k.nepi; e++) {
					Node *ot = k.other[e];
					LLVMValueRef ov[4] = {cv[e], cv[e], cv[e], cv[e]};
					if (!cv[e] && ot && scalar_of_consts(ot, 0)) {
						ov[0] = ov[1] = ov[2] = ov[3] = splat(G, vt, vw, const_scalar(&T, ot));
					} else if (!cv[e] && ot) { /* the result's shape (a residual) */
						LLVMValueRef rimg = llvm.LLVMBuildGEP2(B, et, T.ptr[ot->id], &ooff, 1, "");
						for (int l = 0; l < vw; l++) {
							LLVMValueRef q = llvm.LLVMBuildGEP2(B, et, rimg, &at[l], 1, "");
							if (cols) {
								run[l] = masked_load(G, rt, q, cols, llvm.LLVMConstNull(rt), 4);
							} else {
								run[l] = llvm.LLVMBuildLoad2(B, rt, llvm.LLVMBuildPointerCast(B, q, llvm.LLVMPointerType(rt, 0), ""), "");
								llvm.LLVMSetAlignment(run[l], 4);
							}
						}
						wg_from_runs(G, vw, ms, run, ov);
					}
					for (int b = 0; b < ms; b++)
						x[b] = cv_epi_op(&T, &k, e, x[b], ov[b]);
				}
				wg_to_runs(G, vw, ms, x, run);
				for (int l = 0; l < vw; l++) {
					LLVMValueRef q = llvm.LLVMBuildGEP2(B, et, oimg, &at[l], 1, "");
					if (cols)
						masked_store(G, run[l], q, cols, 4);
					else
						wg_store(G, run[l], q, ci64(G, 0));
				}
				if (jin)
					if_end(&T, jin);
			}
		}
		if_end(&T, jt);
		loop_end(&T, &l3);
	}
	if (fuse)
		loop_end(&T, &lj);
	loop_end(&T, &l1);
	task_end(F, &T, &tk, ci64(G, fuse ? nblk : nblk * npan));
	loop_end(F, &ln);
	free(k.soff);
}

int k_conv2d_winograd(Fn *F, Node *n)
{
	Gen *G = F->gen;
	ConvGeom cg;
	int64_t rec[4];
	Node *wt = n->in[1];
	if (n->op != OP_CONV2D || G->o->no_winograd || (F->v && !F->v->winograd) ||
	    !conv_wino_pack(n, fn_dynamic(F), G->vbytes, rec))
		return 0;
	/* the weights' transforms pre-packed for a param (or an input bound to
	 * one), else NULL: made at each call */
	LLVMValueRef packed = llvm.LLVMConstPointerNull(G->i8p);
	if (wt->op == OP_PARAM || wt->op == OP_INPUT) {
		LLVMTypeRef at[6] = {G->i8p, G->i8p, G->i64, G->i64, G->i64, G->i32};
		LLVMValueRef av[6] = {F->ctx, llvm.LLVMBuildPointerCast(G->B, nptr(F, wt), G->i8p, ""), ci64(G, rec[0]),
		                      ci64(G, rec[1]), ci64(G, rec[2]), ci32(G, (int)rec[3])};
		packed = call(G, "nestrt_packed", G->i8p, at, av, 6);
	}
	conv_geom(n, fn_dynamic(F), &cg);
	k_conv2d_wino(F, n, &cg, packed);
	return 1;
}

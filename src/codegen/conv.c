/* conv.c - conv2d (register tiles over shifted copies of the input with
 * the epilogue fused, when its shapes are static: pixels or output channels
 * in the lanes (conv_lanes.c), or by Winograd's transforms for 3x3 of
 * stride 1, in winograd.c; else direct loops), and a convolution computed with the
 * pooling that reads it (its rows pooled by pool.c's code). */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

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

/* ---- conv2d from shifted copies of the input (ConvGeom, nestc.h) ----
 *
 * The implicit patch matrix of one image has a row per (c, kh, kw) and a
 * column per output pixel p = oh*OW + ow. In the copy for kernel column kw
 * and row phase q, row (c, kh, kw) is the contiguous run of OH*OW elements
 * from channel c's row kh*dh / sh: no patch matrix is written, the copies
 * hold KW * (phases) elements per input element of the output's size (3 for
 * a 3x3 convolution against im2col's 9). A register tile is mr output
 * channels by nv vectors of consecutive pixels (rows wrap: no lane is lost
 * at a row's end, only after a plane's last vector); the weights are
 * broadcast as they stand, [O, C/g*KH*KW] read along a row, the copies read
 * as vectors, and bias and the fused epilogue (plan.c: batch norm's scale
 * and shift, the residual, relu) are applied in registers before the store.
 * A task of the pool takes a band of output pixels and a share of the output
 * channels (ConvGeom, plan.c: conv_bands), makes the copies of the rows the
 * band reads in its own slot of the scratch area and computes the band's
 * tiles from them: with copies of all the rows, made by channels over the
 * pool, half of what a tile read came from the other core's cache, which
 * cost a 3x3 convolution of 256 channels at 14x14 a fifth of its speed at
 * two threads. */


/* A per-channel operand (or a scalar) is one unless it has the result's
 * shape (a residual, read at each pixel). */
int cv_full(ConvK *k, Node *o)
{
	return o->rank == 4 && !memcmp(o->shape, k->n->shape, sizeof o->shape[0] * 4);
}

static void cv_add_leaf(ConvK *k, Node *x)
{
	/* equivalent mutant [cmp < -> <=]: leaf[nleaf] is a zero slot (ConvK
	 * starts zeroed; nleaf < CV_MAX_LEAF here), and no node is NULL */
	for (int i = 0; i < k->nleaf; i++)
		if (k->leaf[i] == x)
			return;
	if (k->nleaf == CV_MAX_LEAF)
		ice("conv2d: more than %d operands", CV_MAX_LEAF);
	k->leaf[k->nleaf++] = x;
}

/* The nodes a per-channel operand reads where they are stored. */
static void cv_chan_leaves(Fn *F, ConvK *k, Node *o)
{
	/* equivalent mutant [const 0 -> 1]: a scalar of constants 8 levels deep
	 * is then walked into below, and its operands, scalars of constants at
	 * depth 0 again, add no leaf either */
	if (scalar_of_consts(o, 0))
		return;
	if (conv_chan_ready(F->plan, k->n, o)) {
		cv_add_leaf(k, o);
		return;
	}
	/* equivalent mutant [cond if (...) -> if (0)]: a slice here is of a
	 * ready node (conv_chan_operand), which the loop below adds all the same */
	if (o->op == OP_SLICE) {
		cv_add_leaf(k, o->in[0]);
		return;
	}
	for (int i = 0; i < o->nin; i++)
		cv_chan_leaves(F, k, o->in[i]);
}

/* Channel ch's element of a per-channel operand (conv_chan_operand). */
LLVMValueRef cv_chan(Fn *F, ConvK *k, Node *o, LLVMValueRef ch)
{
	/* equivalent mutant [const 0 -> 1]: a scalar of constants 9 deep then
	 * takes the general path below: the same unop and binop on the same
	 * constants as const_scalar */
	if (scalar_of_consts(o, 0))
		return const_scalar(F, o);
	if (conv_chan_ready(F->plan, k->n, o))
		return load_at(F, o, o->rank == 0 ? ci64(F->gen, 0) : ch);
	if (o->op == OP_CONST)
		return const_value(F->gen, o);
	if (o->op == OP_SLICE)
		return load_at(F, o->in[0], iadd(F->gen, ch, ci64(F->gen, slice_run(o))));
	if (o->op == OP_RESHAPE)
		return cv_chan(F, k, o->in[0], ch);
	if (o->nin == 1)
		return unop(F, o->op, o->dtype, cv_chan(F, k, o->in[0], ch));
	return binop(F, o->op, o->in[0]->dtype, cv_chan(F, k, o->in[0], ch), cv_chan(F, k, o->in[1], ch));
}

/* v (one element or a vector) through op e of the fused epilogue, whose
 * other operand (when it has one) is ov, of v's type */
LLVMValueRef cv_epi_op(Fn *F, ConvK *k, int e, LLVMValueRef v, LLVMValueRef ov)
{
	LLVMBuilderRef B = F->gen->B;
	Node *x = k->ops[e];
	if (x->op == OP_RELU) {
		LLVMValueRef z = llvm.LLVMConstNull(llvm.LLVMTypeOf(v));
		return llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, v, z, ""), z, v, ""); /* keeps NaN */
	}
	if (x->op == OP_NEG)
		return llvm.LLVMBuildFNeg(B, v, "");
	if (act_f32_op(x->op)) { /* f32 only (plan_conv_epilogues) */
		LLVMTypeRef t = llvm.LLVMTypeOf(v);
		return act_f32(F->gen, x->op, v,
		               llvm.LLVMGetTypeKind(t) == LLVMVectorTypeKind ? (int)llvm.LLVMGetVectorSize(t) : 0);
	}
	LLVMValueRef a = k->first[e] ? v : ov, b = k->first[e] ? ov : v;
	return x->op == OP_MAX || x->op == OP_MIN ? fmaxmin(F->gen, a, b, x->op == OP_MAX) : binop(F, x->op, k->n->dtype, a, b);
}

/* v (one element or a vector) of channel o at element offset off of the
 * result, through the bias and the fused epilogue; chv[e]: the channel's
 * value of op e's operand when it is per channel. */
LLVMValueRef cv_epilogue(Fn *F, ConvK *k, LLVMValueRef v, int lanes, LLVMValueRef bias, LLVMValueRef *chv,
                         LLVMValueRef off)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, k->n->dtype), vt = lanes > 1 ? llvm.LLVMVectorType(et, (unsigned)lanes) : et;
#define CV_SPLAT(s) (lanes > 1 ? splat(G, vt, lanes, (s)) : (s))
	if (bias)
		v = llvm.LLVMBuildFAdd(B, v, CV_SPLAT(bias), "");
	for (int e = 0; e < k->nepi; e++) {
		LLVMValueRef ov = NULL;
		if (chv[e]) {
			ov = CV_SPLAT(chv[e]);
		} else if (k->other[e]) {
			LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, nptr(F, k->other[e]), &off, 1, "");
			ov = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""), "");
			llvm.LLVMSetAlignment(ov, (unsigned)dtype_size(k->n->dtype));
		}
		v = cv_epi_op(F, k, e, v, ov);
	}
#undef CV_SPLAT
	return v;
}


void tile_loop_begin(Fn *F, TileLoop *L, int mr, int nv, LLVMTypeRef vt, LLVMValueRef c0, LLVMValueRef c1,
                            LLVMValueRef init[][CV_MAX_NV], LLVMValueRef acc[][CV_MAX_NV])
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMBasicBlockRef pre = llvm.LLVMGetInsertBlock(B);
	L->head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cvk");
	LLVMBasicBlockRef body = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cvkbody");
	L->done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cvkdone");
	L->mr = mr, L->nv = nv;
	llvm.LLVMBuildBr(B, L->head);
	llvm.LLVMPositionBuilderAtEnd(B, L->head);
	L->c = llvm.LLVMBuildPhi(B, G->i64, "c");
	llvm.LLVMAddIncoming(L->c, &c0, &pre, 1);
	LLVMValueRef zv = llvm.LLVMConstNull(vt);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			L->phi[r][v] = llvm.LLVMBuildPhi(B, vt, "acc");
			llvm.LLVMAddIncoming(L->phi[r][v], init ? &init[r][v] : &zv, &pre, 1);
			acc[r][v] = L->phi[r][v];
		}
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, L->c, c1, ""), body, L->done);
	llvm.LLVMPositionBuilderAtEnd(B, body);
}

void tile_loop_end(Fn *F, TileLoop *L, LLVMValueRef acc[][CV_MAX_NV])
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMValueRef cn = iadd(G, L->c, ci64(G, 1));
	LLVMBasicBlockRef end = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMBuildBr(B, L->head);
	llvm.LLVMAddIncoming(L->c, &cn, &end, 1);
	for (int r = 0; r < L->mr; r++)
		for (int v = 0; v < L->nv; v++) {
			llvm.LLVMAddIncoming(L->phi[r][v], &acc[r][v], &end, 1);
			acc[r][v] = L->phi[r][v];
		}
	llvm.LLVMPositionBuilderAtEnd(B, L->done);
}

/* Entry i of a table of ctable_i64 */
static LLVMValueRef tab_at(Gen *G, LLVMValueRef tab, LLVMValueRef i)
{
	return llvm.LLVMBuildLoad2(G->B, G->i64, llvm.LLVMBuildGEP2(G->B, G->i64, tab, &i, 1, ""), "");
}

/* Opens the loop (acc its sums, as tile_loop_begin's); the positions of a
 * run, the kernel's all when unrolled. */
int pos_loop_begin(Fn *F, ConvK *k, PosLoop *pl, int mr, int nv, LLVMTypeRef vt, LLVMValueRef acc[][CV_MAX_NV])
{
	Gen *G = F->gen;
	*pl = (PosLoop){.soff = k->soff};
	if (k->S <= CV_UNROLL)
		return (int)k->S;
	int run = 16;
	while (k->S % run)
		run--;
	pl->tab = ctable_i64(G, k->soff, k->S);
	tile_loop_begin(F, &pl->L, mr, nv, vt, ci64(G, 0), ci64(G, k->S / run), acc, acc);
	pl->s0 = imul(G, pl->L.c, ci64(G, run));
	return run;
}

/* Position u of the run: its index and its offset in the copies */
void pos_at(Fn *F, PosLoop *pl, int u, LLVMValueRef *s, LLVMValueRef *off)
{
	Gen *G = F->gen;
	if (!pl->s0) {
		*s = ci64(G, u);
		*off = ci64(G, pl->soff[u]);
		return;
	}
	*s = iadd(G, pl->s0, ci64(G, u));
	*off = tab_at(G, pl->tab, *s);
}

void pos_loop_end(Fn *F, PosLoop *pl, LLVMValueRef acc[][CV_MAX_NV])
{
	if (pl->s0)
		tile_loop_end(F, &pl->L, acc);
}

/* Where the weights of the row tile after channels o0.. (mr) start, when the
 * weights are a model's (else NULL: computed ones are in the caches). Past
 * the last channel it points beyond the weights: a prefetch does not fault. */
static LLVMValueRef prefetch_base(Fn *F, ConvK *k, LLVMValueRef o0, int mr)
{
	Gen *G = F->gen;
	if (k->w->op != OP_PARAM && k->w->op != OP_INPUT)
		return NULL;
	LLVMValueRef at = imul(G, iadd(G, o0, ci64(G, mr)), ci64(G, k->Kw));
	/* equivalent mutant [const 1 -> 0]: the address only feeds llvm.prefetch,
	 * which by LLVM's definition changes no behaviour of the program */
	return llvm.LLVMBuildGEP2(G->B, elem_t(G, k->n->dtype), nptr(F, k->w), &at, 1, "wnext");
}

/* One register tile: channels o0.. (mr) by pixels col0.. (nv vectors, of
 * which the last has `rem` valid lanes), over the channels of the group
 * whose copies start at bg, where the pixels are at icol; the result's image
 * at element ooff. */
static void cv_tile(Fn *F, ConvK *k, int mr, int nv, int rem, LLVMValueRef bg, LLVMValueRef o0, LLVMValueRef col0,
                    LLVMValueRef icol, LLVMValueRef ooff)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	DType dt = k->n->dtype;
	int vw = k->vw;
	LLVMTypeRef et = elem_t(G, dt), vt = llvm.LLVMVectorType(et, (unsigned)vw), vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef arow[CV_MAX_MR], nacc[CV_MAX_MR][CV_MAX_NV];
	for (int r = 0; r < mr; r++)
		arow[r] = imul(G, iadd(G, o0, ci64(G, r)), ci64(G, k->Kw));
	/* The next tile's lines of a residual (a tensor of the result's shape
	 * the epilogue reads): at the end of a tile they were misses, a row of
	 * a few lines every plane apart that no prefetcher follows, and a 1x1
	 * convolution of 64 channels to 256 at 56x56 waited on them (0.77-0.90x
	 * its time with them prefetched a tile ahead). */
	int64_t nr = k->rows_outer ? 0 : mr, nc = k->rows_outer ? (int64_t)nv * vw : 0;
	for (int e = 0; e < k->nepi; e++)
		if (k->other[e] && cv_full(k, k->other[e]))
			for (int r = 0; r < mr; r++)
				for (int v = 0; v < nv; v++) {
					LLVMValueRef row = iadd(G, ooff, imul(G, iadd(G, o0, ci64(G, nr + r)), ci64(G, k->P)));
					LLVMValueRef off = iadd(G, row, iadd(G, col0, ci64(G, nc + v * vw)));
					prefetch_line(G, llvm.LLVMBuildGEP2(B, et, nptr(F, k->other[e]), &off, 1, ""));
				}
	/* the next row tile's weights (below), when they are a model's;
	 * equivalent mutant [const 1 -> 2]: wpf only feeds llvm.prefetch, which
	 * by LLVM's definition changes no behaviour of the program */
	LLVMValueRef wpf = k->S == 1 ? prefetch_base(F, k, o0, mr) : NULL;
	TileLoop L;
	tile_loop_begin(F, &L, mr, nv, vt, ci64(G, 0), k->cend ? k->cend : ci64(G, k->Cg), NULL, nacc);
	LLVMValueRef c = L.c;
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fmuladd.v%d%s", vw, dt == DT_F32 ? "f32" : "f64");
	LLVMValueRef cb = iadd(G, imul(G, c, ci64(G, k->CP)), icol), ca = imul(G, c, ci64(G, k->S));
	/* The next row tile's weights (its mr rows of Kw elements): a model's
	 * weights come from memory, and a task's run of tiles waited on each
	 * tile's rows (32 1x1 convolutions of 1024 channels to 256 at 14x14, 32
	 * MB of weights: 1.15x the time at two threads of the same convolutions
	 * sharing their weights): a line every 2^pfsh steps, row after row. Only
	 * for 1x1 kernels: with the prefetches, the 49 positions of a 7x7
	 * kernel, unrolled, spilled their sums (1.3x the time of ResNet's stem). */
	if (wpf) {
		/* elements a line: 1 << lsh; equivalent mutant [const 4 -> 5]: they
		 * only place the prefetches */
		int pfsh = 0, lsh = dtype_size(dt) == 8 ? 3 : 4;
		/* equivalent mutant [const]: pfsh only spaces the prefetches */
		while ((2 << pfsh) * mr <= 1 << lsh)
			pfsh++;
		LLVMValueRef line = llvm.LLVMBuildLShr(B, c, ci64(G, pfsh), "");
		LLVMValueRef row = irem(G, line, ci64(G, mr)), col = llvm.LLVMBuildShl(B, idiv(G, line, ci64(G, mr)), ci64(G, lsh), "");
		LLVMValueRef off = iadd(G, imul(G, row, ci64(G, k->Kw)), col);
		prefetch_line(G, llvm.LLVMBuildGEP2(B, et, wpf, &off, 1, ""));
	}
	/* the kernel's positions (pos_loop_begin) */
	PosLoop pl;
	int run = pos_loop_begin(F, k, &pl, mr, nv, vt, nacc);
	for (int u = 0; u < run; u++) {
		LLVMValueRef bv[CV_MAX_NV], s, so;
		pos_at(F, &pl, u, &s, &so);
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = iadd(G, cb, iadd(G, so, ci64(G, v * vw)));
			LLVMValueRef p = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, bg, &off, 1, ""), vpt, "");
			if (v == nv - 1 && rem < vw && !k->cg.elems) {
				/* the plane's last pixels, read in place: the last plane
				 * may end the tensor */
				bv[v] = masked_load(G, vt, p, lanes_below(G, vw, ci64(G, rem)), llvm.LLVMConstNull(vt),
				                    (unsigned)dtype_size(dt));
				continue;
			}
			bv[v] = llvm.LLVMBuildLoad2(B, vt, p, "");
			llvm.LLVMSetAlignment(bv[v], (unsigned)dtype_size(dt));
		}
		for (int r = 0; r < mr; r++) {
			LLVMValueRef bc = splat(G, vt, vw, load_at(F, k->w, iadd(G, arow[r], iadd(G, ca, s))));
			for (int v = 0; v < nv; v++) {
				LLVMTypeRef ts[3] = {vt, vt, vt};
				LLVMValueRef vs[3] = {bc, bv[v], nacc[r][v]};
				nacc[r][v] = call(G, fma, vt, ts, vs, 3);
			}
		}
	}
	pos_loop_end(F, &pl, nacc);
	tile_loop_end(F, &L, nacc);
	for (int r = 0; r < mr; r++) {
		LLVMValueRef o = iadd(G, o0, ci64(G, r)), chv[8] = {0};
		LLVMValueRef bias = k->b ? load_at(F, k->b, o) : NULL;
		for (int e = 0; e < k->nepi; e++)
			if (k->other[e] && !cv_full(k, k->other[e]))
				chv[e] = cv_chan(F, k, k->other[e], o);
		LLVMValueRef row = iadd(G, iadd(G, ooff, imul(G, o, ci64(G, k->OP))), col0);
		LLVMValueRef out = k->out ? k->out : nptr(F, k->n);
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = iadd(G, row, ci64(G, v * vw));
			if (v < nv - 1 || rem == vw) {
				LLVMValueRef x = cv_epilogue(F, k, nacc[r][v], vw, bias, chv, off);
				LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, out, &off, 1, "");
				LLVMValueRef st = llvm.LLVMBuildStore(B, x, llvm.LLVMBuildPointerCast(B, p, vpt, ""));
				llvm.LLVMSetAlignment(st, (unsigned)dtype_size(dt));
				continue;
			}
			/* the band's last pixels: the valid lanes one by one */
			for (int l = 0; l < rem; l++) {
				LLVMValueRef ol = iadd(G, off, ci64(G, l));
				LLVMValueRef x = llvm.LLVMBuildExtractElement(B, nacc[r][v], ci32(G, l), "");
				llvm.LLVMBuildStore(B, cv_epilogue(F, k, x, 1, bias, chv, ol), llvm.LLVMBuildGEP2(B, et, out, &ol, 1, ""));
			}
		}
	}
}

/* The tile shape (plan.c: conv_tile_shape), with 32 vector registers (AVX-512)
 * or 16. */
static void cv_shape(Gen *G, ConvK *k)
{
	/* equivalent mutant [const 12 -> 13]: the accumulators a tile may hold
	 * choose its shape, not a value: each output's sum runs over the same
	 * channels in the same order (a register spill at worst) */
	conv_tile_shape(k->nvec, k->Og, G->vbytes >= 64 ? 24 : 12, &k->mr, &k->nv);
}

/* Code for `cond ? then : else` of two tile shapes (a, b: mr, nv, rem). */
static void cv_branch(Fn *F, LLVMValueRef cond, void (*emit)(Fn *, void *, int), void *arg)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMBasicBlockRef yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cvlast");
	LLVMBasicBlockRef no = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cvwhole");
	LLVMBasicBlockRef join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "cvjoin");
	llvm.LLVMBuildCondBr(B, cond, yes, no);
	llvm.LLVMPositionBuilderAtEnd(B, yes);
	emit(F, arg, 1);
	llvm.LLVMBuildBr(B, join);
	llvm.LLVMPositionBuilderAtEnd(B, no);
	emit(F, arg, 0);
	llvm.LLVMBuildBr(B, join);
	llvm.LLVMPositionBuilderAtEnd(B, join);
}

typedef struct CvAt {
	ConvK *k;
	LLVMValueRef bg, o0, col0, icol, ooff, lastr, lastc;
	int nv, rem; /* the column shape chosen */
} CvAt;

static void cv_rows(Fn *F, void *arg, int last)
{
	CvAt *a = arg;
	ConvK *k = a->k;
	cv_tile(F, k, last ? (int)(k->Og - (k->nrtg - 1) * k->mr) : k->mr, a->nv, a->rem, a->bg, a->o0, a->col0, a->icol,
	        a->ooff);
}

static void cv_cols(Fn *F, void *arg, int last)
{
	CvAt *a = arg;
	ConvK *k = a->k;
	a->nv = last ? (int)(k->nvec - (k->nct - 1) * k->nv) : k->nv;
	a->rem = last ? (int)(k->blen - (k->nvec - 1) * k->vw) : k->vw;
	/* the last row tile is shorter unless mr divides the group's channels */
	if (k->Og % k->mr)
		cv_branch(F, a->lastr, cv_rows, a);
	else
		cv_rows(F, a, 0);
}

/* The tile of column tile ct of the band from pixel p0 on and row tile rt,
 * with the shapes of the last row and column tiles where they differ; the
 * band's pixels are at ioff of bimg (the copies, or the image in place). */
static void cv_tile_at(Fn *F, ConvK *k, LLVMValueRef bimg, LLVMValueRef ooff, LLVMValueRef ct, LLVMValueRef rt,
                       LLVMValueRef p0, LLVMValueRef ioff)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMValueRef col = imul(G, ct, ci64(G, (int64_t)k->nv * k->vw));
	LLVMValueRef grp = idiv(G, rt, ci64(G, k->nrtg)), rtg = irem(G, rt, ci64(G, k->nrtg));
	LLVMValueRef goff = imul(G, grp, ci64(G, k->Cg * k->CP));
	CvAt a = {.k = k, .ooff = ooff,
	          .bg = llvm.LLVMBuildGEP2(B, elem_t(G, k->n->dtype), bimg, &goff, 1, ""),
	          .o0 = iadd(G, imul(G, grp, ci64(G, k->Og)), imul(G, rtg, ci64(G, k->mr))),
	          .col0 = iadd(G, p0, col), .icol = iadd(G, ioff, col),
	          .lastr = llvm.LLVMBuildICmp(B, LLVMIntEQ, rtg, ci64(G, k->nrtg - 1), ""),
	          .lastc = llvm.LLVMBuildICmp(B, LLVMIntEQ, ct, ci64(G, k->nct - 1), "")};
	int same = k->nvec % k->nv == 0 && k->blen % k->vw == 0; /* the last column tile is like the others */
	if (k->nct == 1 || same)
		cv_cols(F, &a, k->nct == 1);
	else
		cv_branch(F, a.lastc, cv_cols, &a);
}

/* Is a >= b, both constants? */
static int known_ge(LLVMValueRef a, LLVMValueRef b)
{
	return llvm.LLVMIsAConstantInt(a) && llvm.LLVMIsAConstantInt(b) &&
	       llvm.LLVMConstIntGetSExtValue(a) >= llvm.LLVMConstIntGetSExtValue(b);
}

/* Zeros into dst[at + i] for i in [lo, hi). */
static void zero_run(Fn *F, Node *n, LLVMValueRef dst, LLVMValueRef at, LLVMValueRef lo, LLVMValueRef hi)
{
	Gen *G = F->gen;
	if (known_ge(lo, hi))
		return;
	Loop l;
	LLVMValueRef i = loop_begin(F, &l, lo, hi);
	LLVMValueRef o = iadd(G, at, i);
	llvm.LLVMBuildStore(G->B, fconst(G, n->dtype, 0), llvm.LLVMBuildGEP2(G->B, elem_t(G, n->dtype), dst, &o, 1, ""));
	loop_end(F, &l);
}

/* One copy of channel c (its plane at `plane`), rows [r0, r0 + nr): the
 * rows of phase q, read from kernel column kw on, at copy dst0 + c
 * (dst0 = (kw nslot + slot) C); off, lo, hi and nvb are row_range's for kw
 * (constants, or read from a table in a loop over the copies). */
static void copy_one(Fn *F, ConvK *k, LLVMValueRef cps, LLVMValueRef plane, LLVMValueRef c, LLVMValueRef r0,
                     LLVMValueRef nr, LLVMValueRef q, LLVMValueRef dst0, LLVMValueRef off, LLVMValueRef lo,
                     LLVMValueRef hi, LLVMValueRef nvb)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvGeom *cg = &k->cg;
	LLVMTypeRef et = elem_t(G, k->n->dtype), vt = llvm.LLVMVectorType(et, (unsigned)k->vw);
	Loop lr, lv, lw;
	LLVMValueRef dst = imul(G, iadd(G, dst0, c), ci64(G, k->CP));
	LLVMValueRef r = loop_to(F, &lr, nr);
	LLVMValueRef ih = iadd(G, imul(G, iadd(G, r0, r), ci64(G, cg->sh)), isub(G, q, ci64(G, cg->ph)));
	LLVMValueRef okh = in_range(G, ih, ci64(G, k->H));
	LLVMValueRef drow = iadd(G, dst, imul(G, r, ci64(G, k->OW)));
	LLVMBasicBlockRef j = if_begin(F, llvm.LLVMBuildNot(B, okh, ""));
	zero_run(F, k->n, cps, drow, ci64(G, 0), ci64(G, k->OW));
	if_end(F, j);
	j = if_begin(F, okh);
	LLVMValueRef srow = iadd(G, iadd(G, plane, imul(G, ih, ci64(G, k->W))), off);
	zero_run(F, k->n, cps, drow, ci64(G, 0), lo);
	if (!known_ge(ci64(G, 0), nvb)) {
		LLVMValueRef t = loop_to(F, &lv, nvb);
		LLVMValueRef ow = iadd(G, lo, imul(G, t, ci64(G, k->vw)));
		LLVMValueRef v = strided_vec(F, k->x, iadd(G, srow, imul(G, ow, ci64(G, cg->sw))), cg->sw, k->vw);
		LLVMValueRef dof = iadd(G, drow, ow);
		LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, cps, &dof, 1, "");
		/* equivalent mutant [const]: x86-64's back end gives address
		 * spaces 1 and 16777215 (what -1 becomes) no meaning: the
		 * same stores */
		LLVMValueRef st = llvm.LLVMBuildStore(B, v, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""));
		llvm.LLVMSetAlignment(st, (unsigned)dtype_size(k->n->dtype));
		loop_end(F, &lv);
	}
	LLVMValueRef ow = loop_begin(F, &lw, iadd(G, lo, imul(G, nvb, ci64(G, k->vw))), hi);
	LLVMValueRef dof = iadd(G, drow, ow);
	llvm.LLVMBuildStore(B, load_at(F, k->x, iadd(G, srow, imul(G, ow, ci64(G, cg->sw)))),
	                    llvm.LLVMBuildGEP2(B, et, cps, &dof, 1, ""));
	loop_end(F, &lw);
	zero_run(F, k->n, cps, drow, hi, ci64(G, k->OW));
	if_end(F, j);
	loop_end(F, &lr);
}

/* The copies of image nn (ConvGeom) for channels [c0, c1), rows [r0, r0 +
 * nr) of each to rows [0, nr): per row, zeros where the kernel reads padding
 * and the image's columns between, by vectors. A copy per phase and kernel
 * column, each emitted on its own up to CV_COPIES of them (a 7x7 kernel of
 * stride 2 has 14), else in a loop over them (a 16x16 patch embedding of
 * stride 16 has 256; an 11x11 kernel of stride 4, 44: emitted one by one,
 * LLVM unrolled each copy's loops at a small image, 27,000 lines of IR). */
#define CV_COPIES 16

void cv_copy(Fn *F, ConvK *k, LLVMValueRef cps, LLVMValueRef nn, LLVMValueRef c0, LLVMValueRef c1, LLVMValueRef r0,
             LLVMValueRef nr)
{
	Gen *G = F->gen;
	ConvGeom *cg = &k->cg;
	int64_t KW = k->KW, *t = xcalloc((size_t)(4 * KW + cg->nslot), sizeof *t);
	for (int64_t kw = 0, hv; kw < KW; kw++) {
		t[kw] = kw * cg->dw - cg->pw;
		row_range(k->OW, k->W, cg->sw, t[kw], &t[KW + kw], &t[2 * KW + kw], &hv);
		t[3 * KW + kw] = cg->sw <= 2 ? (hv - t[KW + kw]) / k->vw : 0;
	}
	for (int64_t q = 0, slot = 0; q < cg->sh; q++)
		if (cg->phases >> q & 1)
			t[4 * KW + slot++] = q;
	Loop lc;
	LLVMValueRef c = loop_begin(F, &lc, c0, c1);
	LLVMValueRef plane = imul(G, iadd(G, imul(G, nn, ci64(G, k->C)), c), ci64(G, k->H * k->W));
	if (cg->nslot * KW <= CV_COPIES) {
		for (int64_t slot = 0; slot < cg->nslot; slot++)
			for (int64_t kw = 0; kw < KW; kw++)
				copy_one(F, k, cps, plane, c, r0, nr, ci64(G, t[4 * KW + slot]), ci64(G, (kw * cg->nslot + slot) * k->C),
				         ci64(G, t[kw]), ci64(G, t[KW + kw]), ci64(G, t[2 * KW + kw]), ci64(G, t[3 * KW + kw]));
	} else {
		LLVMValueRef tab = ctable_i64(G, t, 4 * KW + cg->nslot);
		Loop ls, lk;
		LLVMValueRef slot = loop_to(F, &ls, ci64(G, cg->nslot));
		LLVMValueRef q = tab_at(G, tab, iadd(G, slot, ci64(G, 4 * KW)));
		LLVMValueRef kw = loop_to(F, &lk, ci64(G, KW));
		LLVMValueRef dst0 = imul(G, iadd(G, imul(G, kw, ci64(G, cg->nslot)), slot), ci64(G, k->C));
		copy_one(F, k, cps, plane, c, r0, nr, q, dst0, tab_at(G, tab, kw), tab_at(G, tab, iadd(G, kw, ci64(G, KW))),
		         tab_at(G, tab, iadd(G, kw, ci64(G, 2 * KW))), tab_at(G, tab, iadd(G, kw, ci64(G, 3 * KW))));
		loop_end(F, &lk);
		loop_end(F, &ls);
	}
	loop_end(F, &lc);
	free(t);
}

/* The pointers of the nodes the tasks read, as i64s into vals; in a task,
 * back into T's pointers. */
void cv_env(Fn *F, ConvK *k, LLVMValueRef *vals)
{
	for (int i = 0; i < k->nleaf; i++)
		vals[i] = llvm.LLVMBuildPtrToInt(F->gen->B, nptr(F, k->leaf[i]), F->gen->i64, "");
}

void cv_unenv(Fn *T, ConvK *k, LLVMValueRef *got)
{
	for (int i = 0; i < k->nleaf; i++)
		/* equivalent mutant [const 0 -> 1]: x86-64's back end gives
		 * address space 1 no meaning: the same loads and stores */
		T->ptr[k->leaf[i]->id] = llvm.LLVMBuildIntToPtr(T->gen->B, got[i], llvm.LLVMPointerType(elem_t(T->gen, k->leaf[i]->dtype), 0), "");
}

/* The tiles of a band of len pixels from p0 on, whose pixels are at ioff of
 * bimg: column tiles outermost (a run reads the same pixels with every
 * channel's weights), row tiles in [rt0, rt1). */
typedef struct CvBand {
	ConvK *k;
	LLVMValueRef bimg, ooff, p0, ioff, rt0, rt1;
} CvBand;

static void cv_band(Fn *F, void *arg, int last)
{
	CvBand *a = arg;
	ConvK *k = a->k;
	k->blen = last ? k->P - (k->cg.nband - 1) * k->cg.blen : k->cg.blen;
	k->nvec = (k->blen + k->vw - 1) / k->vw;
	k->nct = (k->nvec + k->nv - 1) / k->nv;
	Loop lc, lr;
	LLVMValueRef ct = loop_to(F, &lc, ci64(F->gen, k->nct));
	LLVMValueRef rt = loop_begin(F, &lr, a->rt0, a->rt1);
	cv_tile_at(F, k, a->bimg, a->ooff, ct, rt, a->p0, a->ioff);
	loop_end(F, &lr);
	loop_end(F, &lc);
}

/* The tasks of image vals[nl] from copies: task t takes band t / nsplit and
 * share t % nsplit of the row tiles, its copies in slot t; one thread makes
 * a band's copies once (nsplit 1). */
static void cv_bands_tasks(Fn *F, ConvK *k, LLVMValueRef *vals, int nl)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvGeom *cg = &k->cg;
	Node *n = k->n;
	/* equivalent mutant [const 0 -> (-1)]: x86-64's back end gives that
	 * address space no meaning (only 256-258 and 270-272 have one) */
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	LLVMValueRef got[CV_MAX_LEAF + 4];
	Fn T;
	Loop lt;
	LLVMValueRef soff = ci64(G, F->plan->scratch);
	LLVMValueRef cps = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "copies");
	LLVMValueRef one = llvm.LLVMBuildICmp(B, LLVMIntEQ, call(G, "nestrt_num_threads", G->i32, NULL, NULL, 0), ci32(G, 1), "");
	LLVMValueRef nsplit = llvm.LLVMBuildSelect(B, one, ci64(G, 1), ci64(G, cg->nsplit), "");
	vals[nl + 1] = llvm.LLVMBuildPtrToInt(B, cps, G->i64, "");
	vals[nl + 2] = nsplit;
	LLVMValueRef ntasks = imul(G, ci64(G, cg->nband), nsplit);
	Task tk = task_begin(F, &T, "cv", vals, nl + 3, got);
	cv_unenv(&T, k, got);
	nsplit = got[nl + 2];
	LLVMValueRef ooff = imul(G, got[nl], ci64(G, k->O * k->P));
	LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef band = idiv(G, t, nsplit), share = irem(G, t, nsplit);
	/* the copies on the task's stack where they take at most 1 MiB: the
	 * pool hands task t to either thread from call to call, and a slot of
	 * the scratch area written by the other core the call before comes over
	 * line by line (3x3 convolutions of stride 2 in ResNet-50 took 0.8x the
	 * time at two threads) */
	LLVMValueRef slot;
	if (cg->slot * dtype_size(n->dtype) <= (1 << 20)) {
		LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
		llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
		slot = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, cg->slot), "slot");
		llvm.LLVMSetAlignment(slot, 64);
		llvm.LLVMPositionBuilderAtEnd(B, body);
	} else {
		LLVMValueRef so = imul(G, t, ci64(G, cg->slot));
		slot = llvm.LLVMBuildGEP2(B, et, llvm.LLVMBuildIntToPtr(B, got[nl + 1], ept, ""), &so, 1, "slot");
	}
	/* the band's last tiles load whole vectors past the copies, into the
	 * slot's 16 elements of room (plan.c): lanes past the band's pixels,
	 * never stored, so those elements need no values */
	/* the rows from the band's first on (fewer at the end of the copies) */
	LLVMValueRef p0 = imul(G, band, ci64(G, cg->blen)), r0 = idiv(G, p0, ci64(G, k->OW));
	LLVMValueRef nr = isub(G, ci64(G, cg->hr), r0);
	nr = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, nr, ci64(G, cg->brows), ""), nr, ci64(G, cg->brows), "");
	cv_copy(&T, k, slot, got[nl], ci64(G, 0), ci64(G, k->C), r0, nr);
	CvBand a = {.k = k, .bimg = slot, .ooff = ooff, .p0 = p0, .ioff = isub(G, p0, imul(G, r0, ci64(G, k->OW))),
	            .rt0 = idiv(G, imul(G, share, ci64(G, k->nrt)), nsplit),
	            .rt1 = idiv(G, imul(G, iadd(G, share, ci64(G, 1)), ci64(G, k->nrt)), nsplit)};
	/* equivalent mutant [logic || -> &&]: the branch below then emits the
	 * last band's code too where it is whole or the only one: the same tiles */
	if (k->P % cg->blen == 0 || cg->nband == 1)
		cv_band(&T, &a, k->P % cg->blen != 0);
	else
		cv_branch(&T, llvm.LLVMBuildICmp(B, LLVMIntEQ, band, ci64(G, cg->nband - 1), ""), cv_band, &a);
	loop_end(&T, &lt);
	task_end(F, &T, &tk, ntasks);
}

/* The shapes of convolution n, the copies' row offsets for a channel pitch
 * CP (none when the input is read in place, inplace), the fused epilogue and
 * the nodes the tasks read (the weights when `weights`). */
void cv_setup(Fn *F, ConvK *k, Node *n, ConvGeom *cg, int64_t CP, int inplace, int weights)
{
	*k = (ConvK){.n = n, .x = n->in[0], .w = n->in[1], .b = n->nin > 2 ? n->in[2] : NULL, .cg = *cg};
	k->C = k->x->shape[1], k->H = k->x->shape[2], k->W = k->x->shape[3];
	k->O = n->shape[1], k->OH = n->shape[2], k->OW = n->shape[3], k->KW = k->w->shape[3];
	k->Cg = k->w->shape[1], k->Og = k->O / cg->groups, k->S = k->w->shape[2] * k->KW, k->Kw = k->Cg * k->S;
	k->P = k->OP = k->OH * k->OW;
	k->CP = CP;
	k->vw = F->gen->vbytes / dtype_size(n->dtype);
	/* row (c, kh, kw)'s offset from channel c of the copies */
	k->soff = xcalloc((size_t)k->S, sizeof *k->soff);
	for (int64_t kh = 0; kh < k->w->shape[2]; kh++) {
		int64_t ph = kh * cg->dh, slot = __builtin_popcountll(cg->phases & (((uint64_t)1 << (ph % cg->sh)) - 1));
		for (int64_t kw = 0; kw < k->KW && !inplace; kw++)
			k->soff[kh * k->KW + kw] = (kw * cg->nslot + slot) * k->C * k->CP + ph / cg->sh * k->OW;
	}
	k->nepi = mm_epilogue(F, n, k->ops, k->other, k->first);
	cv_add_leaf(k, k->x);
	if (weights)
		cv_add_leaf(k, k->w);
	cv_add_leaf(k, n);
	if (k->b)
		cv_add_leaf(k, k->b);
	for (int e = 0; e < k->nepi; e++)
		if (k->other[e]) {
			if (cv_full(k, k->other[e]))
				cv_add_leaf(k, k->other[e]);
			else
				cv_chan_leaves(F, k, k->other[e]);
		}
}

void k_conv2d_tiled(Fn *F, Node *n, ConvGeom *cg)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvK k;
	LLVMTypeRef et = elem_t(G, n->dtype);
	cv_setup(F, &k, n, cg, cg->elems ? cg->bcp : n->shape[2] * n->shape[3], 0, 1);
	k.blen = cg->elems ? cg->blen : k.P; /* the tile shape fits a whole band */
	k.nvec = (k.blen + k.vw - 1) / k.vw;
	cv_shape(G, &k);
	k.nct = (k.nvec + k.nv - 1) / k.nv;
	k.nrtg = (k.Og + k.mr - 1) / k.mr;
	k.nrt = cg->groups * k.nrtg;
	k.ntiles = k.nct * k.nrt;
	int nl = k.nleaf;
	LLVMValueRef vals[CV_MAX_LEAF + 4], got[CV_MAX_LEAF + 4];
	Loop ln, lt, li;
	LLVMValueRef nn = loop_to(F, &ln, ci64(G, n->shape[0]));
	cv_env(F, &k, vals);
	vals[nl] = nn;
	Fn T;
	Task tk;
	if (!cg->elems) {
		/* the input read in place: a task a run of the tiles, four runs a
		 * thread. Column tiles outermost (a run reads the same pixels with
		 * every channel's weights), unless the input is smaller than the
		 * weights and fits in half of L2 (a 1x1 convolution at 14x14):
		 * then row tiles outermost, the weights read once from memory
		 * instead of once a column tile (256 channels to 1024 at 14x14: 0.89x
		 * the time at two threads). equivalent mutant [arith]: the
		 * order chooses no value, each output's sum is the same; only the
		 * speed differs, which make bench measures;
		 * equivalent mutant [const]: a threshold of the order, which chooses no value */
		k.rows_outer = k.C * k.P * dtype_size(n->dtype) <= (512 << 10) && k.Og * k.Kw > k.C * k.P;
		LLVMValueRef nth = llvm.LLVMBuildSExt(B, call(G, "nestrt_num_threads", G->i32, NULL, NULL, 0), G->i64, "");
		/* equivalent mutant [const 4 -> 3]: runs of tiles a thread, which
		 * only share the same tiles out otherwise */
		LLVMValueRef parts = imul(G, nth, ci64(G, 4));
		parts = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, parts, ci64(G, k.ntiles), ""), parts,
		                             ci64(G, k.ntiles), "");
		vals[nl + 1] = parts;
		tk = task_begin(F, &T, "cv", vals, nl + 2, got);
		cv_unenv(&T, &k, got);
		LLVMValueRef bimg = llvm.LLVMBuildGEP2(B, et, T.ptr[k.x->id], (LLVMValueRef[]){imul(G, got[nl], ci64(G, k.C * k.P))}, 1, "");
		LLVMValueRef ooff = imul(G, got[nl], ci64(G, k.O * k.P));
		LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
		/* equivalent mutant [arith + -> -]: got[nl - 1] is a leaf's address,
		 * so i0 is 0: each task computes the tiles before its own again, the
		 * same values written again (no output is an operand of its own
		 * tile), only slower, which make bench measures */
		LLVMValueRef i0 = idiv(G, imul(G, t, ci64(G, k.ntiles)), got[nl + 1]);
		LLVMValueRef i1 = idiv(G, imul(G, iadd(G, t, ci64(G, 1)), ci64(G, k.ntiles)), got[nl + 1]);
		LLVMValueRef i = loop_begin(&T, &li, i0, i1);
		if (k.rows_outer)
			cv_tile_at(&T, &k, bimg, ooff, irem(G, i, ci64(G, k.nct)), idiv(G, i, ci64(G, k.nct)), ci64(G, 0), ci64(G, 0));
		else
			cv_tile_at(&T, &k, bimg, ooff, idiv(G, i, ci64(G, k.nrt)), irem(G, i, ci64(G, k.nrt)), ci64(G, 0), ci64(G, 0));
		loop_end(&T, &li);
		loop_end(&T, &lt);
		task_end(F, &T, &tk, parts);
	} else {
		cv_bands_tasks(F, &k, vals, nl);
	}
	loop_end(F, &ln);
	free(k.soff);
}

void k_conv2d(Fn *F, Node *n)
{
	ConvGeom cg;
	if (conv_geom(n, fn_dynamic(F), &cg)) { /* its scratch is planned for static graphs only */
		k_conv2d_tiled(F, n, &cg);
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

/* Convolution n (from copies: ConvGeom.prows) and pooling m, which reads
 * its value, band by band: a task makes its band's copies, computes the
 * band's rows of the convolution for its share of the output channels (the
 * epilogue applied) into a buffer on its stack, then pools those channels'
 * rows of the band into m. The convolution's result, larger than the
 * caches, is neither written to memory nor read back (ResNet's stem, 64
 * channels at 112x112, 3.2 MB). */
void k_conv2d_pool(Fn *F, Node *n, Node *m)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	ConvGeom cg;
	ConvK k;
	if (!conv_pool_geom(n, m, &cg))
		ice("conv2d: no layout with its pooling");
	DType dt = n->dtype;
	LLVMTypeRef et = elem_t(G, dt);
	cv_setup(F, &k, n, &cg, cg.bcp, 0, 1);
	for (int e = 0; e < k.nepi; e++)
		if (k.other[e] && cv_full(&k, k.other[e]))
			ice("conv2d: a residual with its pooling");
	/* the tasks write the pooling's result, not the convolution's.
	 * equivalent mutant [cmp < -> <=]: leaf[nleaf] is a zero slot (nleaf <
	 * CV_MAX_LEAF), never n */
	for (int i = 0; i < k.nleaf; i++)
		if (k.leaf[i] == n)
			k.leaf[i] = m;
	k.blen = cg.blen;
	k.nvec = (k.blen + k.vw - 1) / k.vw;
	/* with the pooling's state live in the task, 8x3 tiles of ResNet's stem
	 * spilled a sum at every kernel position (1.15x the time of 6x3) */
	conv_tile_shape(k.nvec, k.Og, G->vbytes >= 64 ? 18 : 12, &k.mr, &k.nv);
	/* equivalent mutant [const 1 -> 2]: cv_band sets nct again, from its
	 * band's own length, before any use */
	/* equivalent mutant [stmt]: the same (nct is read only after cv_band) */
	k.nct = (k.nvec + k.nv - 1) / k.nv;
	k.nrtg = (k.Og + k.mr - 1) / k.mr;
	k.nrt = cg.groups * k.nrtg;
	k.OP = (cg.blen + 15) / 16 * 16;
	Node *x = m->in[0]; /* the value pooled: the convolution's, through its epilogue */
	int64_t OW = k.OW, POH = m->shape[2], POW = m->shape[3], sh = m->a[2], ph = m->a[4];
	int nl = k.nleaf;
	LLVMValueRef vals[CV_MAX_LEAF + 4], got[CV_MAX_LEAF + 4], acc[POOL_MAX_NCH];
	Loop ln, lt, lr, lo, lh;
	LLVMValueRef nn = loop_to(F, &ln, ci64(G, n->shape[0]));
	cv_env(F, &k, vals);
	vals[nl] = nn;
	LLVMValueRef one = llvm.LLVMBuildICmp(B, LLVMIntEQ, call(G, "nestrt_num_threads", G->i32, NULL, NULL, 0), ci32(G, 1), "");
	/* equivalent mutant [swap]: how a band's output channels are split among
	 * tasks chooses no value (each task computes its own channels) */
	vals[nl + 1] = llvm.LLVMBuildSelect(B, one, ci64(G, 1), ci64(G, cg.nsplit), "");
	LLVMValueRef ntasks = imul(G, ci64(G, cg.nband), vals[nl + 1]);
	vals[nl + 2] = ci64(G, k.Cg);
	Fn T;
	Task tk = task_begin(F, &T, "cvpool", vals, nl + 3, got);
	cv_unenv(&T, &k, got);
	LLVMValueRef nsplit = got[nl + 1];
	/* the channels' loop of the tiles: the unrolled positions of a 7x7
	 * kernel, unrolled again over the stem's 3 channels, spilled their sums
	 * (1.5x the time) */
	k.cend = got[nl + 2];
	/* the copies and the band's rows: allocas of the entry block */
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	LLVMValueRef slot = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, cg.slot), "slot");
	llvm.LLVMSetAlignment(slot, 64);
	LLVMValueRef rows = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, k.O * k.OP), "rows");
	llvm.LLVMSetAlignment(rows, 64);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	int nch = pool_accs(&T, m, acc);
	T.ptr[x->id] = rows;
	k.out = rows;
	LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef band = idiv(G, t, nsplit), share = irem(G, t, nsplit);
	/* the band's last tiles load whole vectors past the copies, into the
	 * slot's 16 elements of room (plan.c): lanes past the band's pixels,
	 * never stored, so those elements need no values */
	/* pooled rows [i0, i1) read rows [r0, r0 + nrows) */
	LLVMValueRef i0 = imul(G, band, ci64(G, cg.prows));
	LLVMValueRef i1 = iadd(G, i0, ci64(G, cg.prows));
	i1 = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, i1, ci64(G, POH), ""), i1, ci64(G, POH), "");
	LLVMValueRef r0 = isub(G, imul(G, i0, ci64(G, sh)), ci64(G, ph));
	r0 = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, r0, ci64(G, 0), ""), ci64(G, 0), r0, "");
	r0 = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSGT, r0, ci64(G, k.OH - cg.nrows), ""), ci64(G, k.OH - cg.nrows), r0, "");
	LLVMValueRef ncopy = isub(G, ci64(G, cg.hr), r0);
	ncopy = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, ncopy, ci64(G, cg.brows), ""), ncopy, ci64(G, cg.brows), "");
	cv_copy(&T, &k, slot, got[nl], ci64(G, 0), ci64(G, k.C), r0, ncopy);
	LLVMValueRef p0 = imul(G, r0, ci64(G, OW));
	LLVMValueRef rt0 = idiv(G, imul(G, share, ci64(G, k.nrt)), nsplit);
	LLVMValueRef rt1 = idiv(G, imul(G, iadd(G, share, ci64(G, 1)), ci64(G, k.nrt)), nsplit);
	/* the tiles store channel o's pixel p at o * OP + p - p0 of the rows */
	CvBand a = {.k = &k, .bimg = slot, .ooff = llvm.LLVMBuildNeg(B, p0, ""), .p0 = p0, .ioff = ci64(G, 0), .rt0 = rt0, .rt1 = rt1};
	cv_band(&T, &a, 0);
	/* the pooling of the share's channels: those of its row tiles */
	LLVMValueRef rt = loop_begin(&T, &lr, rt0, rt1);
	LLVMValueRef grp = idiv(G, rt, ci64(G, k.nrtg)), rtg = irem(G, rt, ci64(G, k.nrtg));
	LLVMValueRef c0 = imul(G, rtg, ci64(G, k.mr)), c1 = iadd(G, c0, ci64(G, k.mr));
	c1 = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, c1, ci64(G, k.Og), ""), c1, ci64(G, k.Og), "");
	LLVMValueRef o = iadd(G, imul(G, grp, ci64(G, k.Og)), loop_begin(&T, &lo, c0, c1));
	LLVMValueRef pbase = isub(G, imul(G, o, ci64(G, k.OP)), p0);
	LLVMValueRef oplane = imul(G, iadd(G, imul(G, got[nl], ci64(G, k.O)), o), ci64(G, POH));
	LLVMValueRef oh = loop_begin(&T, &lh, i0, i1);
	pool_row(&T, m, x, acc, nch, pbase, oh, imul(G, iadd(G, oplane, oh), ci64(G, POW)));
	loop_end(&T, &lh);
	loop_end(&T, &lo);
	loop_end(&T, &lr);
	loop_end(&T, &lt);
	task_end(F, &T, &tk, ntasks);
	loop_end(F, &ln);
	free(k.soff);
}

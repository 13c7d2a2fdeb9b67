/* index.c - kernels for indexing and scans with PyTorch / NumPy semantics:
 * take_along_axis (numpy.take_along_axis, torch.gather), whose indices are
 * all checked before anything is written, an index out of range making the
 * entry fail through nestrt_fail; topk (torch.topk's positions, by insertion
 * into the k best of each row: k is small in mixture-of-experts routing, so
 * a scan with a short sorted list beats a sort); and cumsum, a running sum in
 * the input's dtype. Same semantics as src/interp/index.c. */
#include "gen.h"

#include <string.h>

static void split_at(Fn *F, Node *x, int ax, LLVMValueRef *outer, LLVMValueRef *len, LLVMValueRef *inner)
{
	Gen *G = F->gen;
	*outer = ci64(G, 1);
	*inner = ci64(G, 1);
	for (int k = 0; k < x->rank; k++) {
		if (k < ax)
			*outer = imul(G, *outer, dimv(F, x, k));
		else if (k > ax)
			*inner = imul(G, *inner, dimv(F, x, k));
	}
	*len = dimv(F, x, ax);
}

/* return nestrt_fail(ctx, "take_along_axis index V out of range [0, LEN) on axis AX") */
static void fail_index(Fn *F, LLVMValueRef v, LLVMValueRef len, int ax)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	static const char fmt[] = "take_along_axis index %lld out of range [0, %lld) on axis %d";
	LLVMTypeRef ft = llvm.LLVMArrayType(G->i8, sizeof fmt);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, ft, "take.fmt");
	llvm.LLVMSetInitializer(gv, llvm.LLVMConstStringInContext(G->C, fmt, sizeof fmt - 1, 0));
	llvm.LLVMSetGlobalConstant(gv, 1);
	llvm.LLVMSetLinkage(gv, LLVMPrivateLinkage);
	LLVMTypeRef mt = llvm.LLVMArrayType(G->i8, 160);
	LLVMValueRef msg = llvm.LLVMBuildPointerCast(B, entry_alloca(F, mt, "msg"), G->i8p, "");
	LLVMTypeRef at[3] = {G->i8p, G->i64, G->i8p};
	LLVMTypeRef st = llvm.LLVMFunctionType(G->i32, at, 3, 1);
	LLVMValueRef av[6] = {msg, ci64(G, 160), llvm.LLVMConstPointerCast(gv, G->i8p), v, len, ci32(G, ax)};
	llvm.LLVMBuildCall2(B, st, get_fn(G, "snprintf", st), av, 6, "");
	LLVMTypeRef ft2[2] = {G->i8p, G->i8p};
	LLVMValueRef fv[2] = {F->ctx, msg};
	llvm.LLVMBuildRet(B, call(G, "nestrt_fail", G->i32, ft2, fv, 2));
}

static LLVMValueRef index_at(Fn *F, Node *idx, LLVMValueRef off)
{
	LLVMValueRef v = load_at(F, idx, off);
	return idx->dtype == DT_I32 ? llvm.LLVMBuildSExt(F->gen->B, v, F->gen->i64, "") : v;
}

void k_take_along(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *idx = n->in[1];
	int ax = (int)n->a[0], R = n->rank;
	LLVMValueRef len = dimv(F, x, ax);
	/* topk's positions are in range by construction */
	if (idx->op != OP_TOPK && idx->op != OP_TOPK_MIN) {
		Loop lc;
		LLVMValueRef c = loop_to(F, &lc, numelv(F, idx));
		LLVMValueRef v = index_at(F, idx, c);
		LLVMBasicBlockRef ok = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "take.ok");
		LLVMBasicBlockRef bad = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "take.bad");
		llvm.LLVMBuildCondBr(B, in_range(G, v, len), ok, bad);
		llvm.LLVMPositionBuilderAtEnd(B, bad);
		fail_index(F, v, len, ax);
		llvm.LLVMPositionBuilderAtEnd(B, ok);
		loop_end(F, &lc);
	}
	LLVMValueRef st[3][MAX_RANK], off[3], xs[MAX_RANK];
	strides(F, x, R, NULL, xs);
	strides(F, x, R, n, st[0]);
	st[0][ax] = ci64(G, 0); /* the position on the axis comes from the index */
	strides(F, idx, R, n, st[1]);
	strides(F, n, R, NULL, st[2]);
	Nest N;
	nest_begin(F, &N, n, 3, st, off);
	LLVMValueRef src = elem_off(G, off[0], index_at(F, idx, off[1]), xs[ax]);
	store_at(F, n, off[2], load_at(F, x, src));
	nest_end(F, &N);
}

/* a before b in topk's order: strictly, so equal values keep their order;
 * NaN above every number */
static LLVMValueRef before(Gen *G, DType dt, LLVMValueRef a, LLVMValueRef b, int largest)
{
	LLVMBuilderRef B = G->B;
	if (!dtype_is_float(dt))
		return llvm.LLVMBuildICmp(B, largest ? LLVMIntSGT : LLVMIntSLT, a, b, "");
	LLVMValueRef cmp = llvm.LLVMBuildFCmp(B, largest ? LLVMRealOGT : LLVMRealOLT, a, b, "");
	LLVMValueRef anan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, a, a, "");
	LLVMValueRef bnan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, b, b, "");
	LLVMValueRef nan = largest ? llvm.LLVMBuildAnd(B, anan, llvm.LLVMBuildNot(B, bnan, ""), "")
	                           : llvm.LLVMBuildAnd(B, bnan, llvm.LLVMBuildNot(B, anan, ""), "");
	return llvm.LLVMBuildOr(B, cmp, nan, "");
}

void k_topk(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	int ax = (int)n->a[0], largest = n->op == OP_TOPK;
	LLVMValueRef outer, len, inner;
	split_at(F, x, ax, &outer, &len, &inner);
	LLVMValueRef k = dimv(F, n, ax);
	LLVMValueRef pa = entry_alloca(F, G->i64, "topk.pos");
	Loop lo, li, lj;
	LLVMValueRef o = loop_to(F, &lo, outer);
	LLVMValueRef in = loop_to(F, &li, inner);
	LLVMValueRef xb = iadd(G, imul(G, imul(G, o, len), inner), in);
	LLVMValueRef ob = iadd(G, imul(G, imul(G, o, k), inner), in);
	LLVMBasicBlockRef join = if_begin(F, llvm.LLVMBuildICmp(B, LLVMIntSGT, k, ci64(G, 0), ""));
	/* row element j goes into the sorted list of the k best so far (out[ob + p * inner]) */
	LLVMValueRef j = loop_to(F, &lj, len);
	LLVMValueRef v = load_at(F, x, elem_off(G, xb, j, inner));
	LLVMValueRef km1 = isub(G, k, ci64(G, 1));
	LLVMValueRef fill = llvm.LLVMBuildICmp(B, LLVMIntSLT, j, k, "");
	LLVMBasicBlockRef check = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.check");
	LLVMBasicBlockRef ins = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.insert");
	LLVMBasicBlockRef head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.head");
	LLVMBasicBlockRef cmp = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.cmp");
	LLVMBasicBlockRef shift = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.shift");
	LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.done");
	LLVMBasicBlockRef next = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "topk.next");
	llvm.LLVMBuildCondBr(B, fill, ins, check);
	/* the list is full: only what beats its last entry goes in */
	llvm.LLVMPositionBuilderAtEnd(B, check);
	LLVMValueRef w = load_at(F, n, elem_off(G, ob, km1, inner));
	LLVMValueRef xw = load_at(F, x, elem_off(G, xb, w, inner));
	llvm.LLVMBuildCondBr(B, before(G, x->dtype, v, xw, largest), ins, next);
	llvm.LLVMPositionBuilderAtEnd(B, ins);
	llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, fill, j, km1, ""), pa);
	llvm.LLVMBuildBr(B, head);
	/* move the entries it beats one place down */
	llvm.LLVMPositionBuilderAtEnd(B, head);
	LLVMValueRef p = llvm.LLVMBuildLoad2(B, G->i64, pa, "");
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSGT, p, ci64(G, 0), ""), cmp, done);
	llvm.LLVMPositionBuilderAtEnd(B, cmp);
	LLVMValueRef pm1 = isub(G, p, ci64(G, 1));
	LLVMValueRef q = load_at(F, n, elem_off(G, ob, pm1, inner));
	LLVMValueRef xq = load_at(F, x, elem_off(G, xb, q, inner));
	llvm.LLVMBuildCondBr(B, before(G, x->dtype, v, xq, largest), shift, done);
	llvm.LLVMPositionBuilderAtEnd(B, shift);
	store_at(F, n, elem_off(G, ob, p, inner), q);
	llvm.LLVMBuildStore(B, pm1, pa);
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMPositionBuilderAtEnd(B, done);
	store_at(F, n, elem_off(G, ob, p, inner), j);
	llvm.LLVMBuildBr(B, next);
	llvm.LLVMPositionBuilderAtEnd(B, next);
	loop_end(F, &lj);
	if_end(F, join);
	loop_end(F, &li);
	loop_end(F, &lo);
}

void k_cumsum(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	int fl = dtype_is_float(dt);
	LLVMTypeRef t = elem_t(G, dt);
	LLVMValueRef outer, len, inner;
	split_at(F, x, (int)n->a[0], &outer, &len, &inner);
	LLVMValueRef acc = entry_alloca(F, t, "cumsum.acc");
	Loop lo, li, lj;
	LLVMValueRef o = loop_to(F, &lo, outer);
	LLVMValueRef in = loop_to(F, &li, inner);
	LLVMValueRef base = iadd(G, imul(G, imul(G, o, len), inner), in);
	llvm.LLVMBuildStore(B, fl ? fconst(G, dt, 0) : llvm.LLVMConstInt(t, 0, 0), acc);
	/* sequential, one rounding per step (as NumPy's add.accumulate) */
	LLVMValueRef j = loop_to(F, &lj, len);
	LLVMValueRef off = elem_off(G, base, j, inner);
	LLVMValueRef a = llvm.LLVMBuildLoad2(B, t, acc, ""), e = load_at(F, x, off);
	LLVMValueRef s = fl ? llvm.LLVMBuildFAdd(B, a, e, "") : llvm.LLVMBuildAdd(B, a, e, "");
	llvm.LLVMBuildStore(B, s, acc);
	store_at(F, n, off, s);
	loop_end(F, &lj);
	loop_end(F, &li);
	loop_end(F, &lo);
}

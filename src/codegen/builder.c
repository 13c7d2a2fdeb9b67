/* builder.c - the small pieces every kernel is built from: types and
 * constants, calls, loops and conditional blocks, dimensions and strides
 * (constants, or run-time values of a reuse_hash variant), element pointers,
 * loads and stores, index arithmetic, and functions the thread pool runs as
 * tasks. */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

/* ---- types and constants ---- */

LLVMTypeRef elem_t(Gen *G, DType dt)
{
	switch (dt) {
	case DT_BOOL: return G->i8;
	case DT_I32: return G->i32;
	case DT_I64: return G->i64;
	case DT_F32: return G->f32;
	case DT_F64: return G->f64;
	/* storage dtypes: moved as integers of their size, converted by
	 * elementwise.c's casts alone (widen.c) */
	case DT_F16: case DT_BF16: case DT_I16: case DT_U16: return G->i16;
	case DT_I8: case DT_U8: return G->i8;
	default: break;
	}
	ice("elem_t: dtype %d", dt);
}

LLVMValueRef ci64(Gen *G, int64_t v)
{
	return llvm.LLVMConstInt(G->i64, (unsigned long long)v, 1);
}

LLVMValueRef ci32(Gen *G, int v)
{
	return llvm.LLVMConstInt(G->i32, (unsigned long long)(int64_t)v, 1);
}

LLVMValueRef fconst(Gen *G, DType dt, double v)
{
	return llvm.LLVMConstReal(elem_t(G, dt), v);
}

LLVMValueRef splat(Gen *G, LLVMTypeRef vt, int vw, LLVMValueRef x)
{
	LLVMValueRef one = llvm.LLVMBuildInsertElement(G->B, llvm.LLVMGetUndef(vt), x, ci32(G, 0), "");
	LLVMValueRef mask0 = llvm.LLVMConstNull(llvm.LLVMVectorType(G->i32, (unsigned)vw));
	return llvm.LLVMBuildShuffleVector(G->B, one, llvm.LLVMGetUndef(vt), mask0, "");
}

/* ---- calls ---- */

LLVMValueRef get_fn(Gen *G, const char *name, LLVMTypeRef ty)
{
	LLVMValueRef f = llvm.LLVMGetNamedFunction(G->M, name);
	if (!f)
		f = llvm.LLVMAddFunction(G->M, name, ty);
	return f;
}

LLVMValueRef call(Gen *G, const char *name, LLVMTypeRef ret, LLVMTypeRef *args, LLVMValueRef *vals, int n)
{
	LLVMTypeRef ty = llvm.LLVMFunctionType(ret, args, (unsigned)n, 0);
	LLVMValueRef f = get_fn(G, name, ty);
	return llvm.LLVMBuildCall2(G->B, ty, f, vals, (unsigned)n, "");
}

/* llvm.NAME.f32 / .f64 intrinsics and libm functions, unary */
LLVMValueRef math1(Gen *G, const char *base, DType dt, LLVMValueRef x)
{
	char name[64];
	LLVMTypeRef t = elem_t(G, dt);
	if (!strncmp(base, "llvm.", 5))
		snprintf(name, sizeof name, "%s.%s", base, dt == DT_F32 ? "f32" : "f64");
	else
		snprintf(name, sizeof name, "%s%s", base, dt == DT_F32 ? "f" : "");
	return call(G, name, t, &t, &x, 1);
}

LLVMValueRef math2(Gen *G, const char *base, DType dt, LLVMValueRef x, LLVMValueRef y)
{
	char name[64];
	LLVMTypeRef t = elem_t(G, dt);
	LLVMTypeRef ts[2] = {t, t};
	LLVMValueRef vs[2] = {x, y};
	snprintf(name, sizeof name, "%s.%s", base, dt == DT_F32 ? "f32" : "f64");
	return call(G, name, t, ts, vs, 2);
}

/* llvm.masked.load / llvm.masked.store of a vector of type vt at p (a
 * pointer to its elements): lanes whose mask bit is 0 are not read (`pass`
 * in their place) or not written; their addresses may lie outside the
 * storage. The intrinsics are declared by LLVM: their names carry the
 * pointer type, typed before LLVM 15 and opaque after. */
static LLVMValueRef masked_intrinsic(Gen *G, const char *name, LLVMTypeRef vt, LLVMTypeRef *ft)
{
	unsigned id = llvm.LLVMLookupIntrinsicID(name, strlen(name));
	LLVMTypeRef tys[2] = {vt, llvm.LLVMPointerType(vt, 0)};
	*ft = llvm.LLVMIntrinsicGetType(G->C, id, tys, 2);
	return llvm.LLVMGetIntrinsicDeclaration(G->M, id, tys, 2);
}

LLVMValueRef masked_load(Gen *G, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask, LLVMValueRef pass, unsigned align)
{
	LLVMTypeRef ft;
	LLVMValueRef fn = masked_intrinsic(G, "llvm.masked.load", vt, &ft);
	LLVMValueRef args[4] = {llvm.LLVMBuildPointerCast(G->B, p, llvm.LLVMPointerType(vt, 0), ""), ci32(G, (int)align), mask, pass};
	return llvm.LLVMBuildCall2(G->B, ft, fn, args, 4, "");
}

/* llvm.masked.gather over a vector of pointers: overloaded on the value's
 * and the pointers' vector types (declared by LLVM, as above) */
static LLVMValueRef gs_intrinsic(Gen *G, const char *name, LLVMTypeRef vt, LLVMValueRef ptrs, LLVMTypeRef *ft)
{
	unsigned id = llvm.LLVMLookupIntrinsicID(name, strlen(name));
	LLVMTypeRef tys[2] = {vt, llvm.LLVMTypeOf(ptrs)};
	*ft = llvm.LLVMIntrinsicGetType(G->C, id, tys, 2);
	return llvm.LLVMGetIntrinsicDeclaration(G->M, id, tys, 2);
}

LLVMValueRef masked_gather(Gen *G, LLVMTypeRef vt, LLVMValueRef ptrs, LLVMValueRef mask, LLVMValueRef pass, unsigned align)
{
	LLVMTypeRef ft;
	LLVMValueRef fn = gs_intrinsic(G, "llvm.masked.gather", vt, ptrs, &ft);
	LLVMValueRef args[4] = {ptrs, ci32(G, (int)align), mask, pass};
	return llvm.LLVMBuildCall2(G->B, ft, fn, args, 4, "");
}

void masked_store(Gen *G, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask, unsigned align)
{
	LLVMTypeRef ft, vt = llvm.LLVMTypeOf(v);
	LLVMValueRef fn = masked_intrinsic(G, "llvm.masked.store", vt, &ft);
	LLVMValueRef args[4] = {v, llvm.LLVMBuildPointerCast(G->B, p, llvm.LLVMPointerType(vt, 0), ""), ci32(G, (int)align), mask};
	llvm.LLVMBuildCall2(G->B, ft, fn, args, 4, "");
}

/* The lanes i < n (n an i64 at run time) of a vector of vw lanes, as an i1 mask. */
LLVMValueRef lanes_below(Gen *G, int vw, LLVMValueRef n)
{
	LLVMValueRef idx[64];
	for (int l = 0; l < vw; l++)
		idx[l] = ci64(G, l);
	LLVMTypeRef it = llvm.LLVMVectorType(G->i64, (unsigned)vw);
	return llvm.LLVMBuildICmp(G->B, LLVMIntSLT, llvm.LLVMConstVector(idx, (unsigned)vw), splat(G, it, vw, n), "");
}

/* ---- loops and conditional blocks ---- */

LLVMValueRef loop_begin(Fn *F, Loop *L, LLVMValueRef lo, LLVMValueRef hi)
{
	Gen *G = F->gen;
	LLVMBasicBlockRef pre = llvm.LLVMGetInsertBlock(G->B);
	L->head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "loop");
	L->body = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "body");
	L->exit = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "done");
	llvm.LLVMBuildBr(G->B, L->head);
	llvm.LLVMPositionBuilderAtEnd(G->B, L->head);
	L->i = llvm.LLVMBuildPhi(G->B, G->i64, "i");
	llvm.LLVMAddIncoming(L->i, &lo, &pre, 1);
	LLVMValueRef c = llvm.LLVMBuildICmp(G->B, LLVMIntSLT, L->i, hi, "");
	llvm.LLVMBuildCondBr(G->B, c, L->body, L->exit);
	llvm.LLVMPositionBuilderAtEnd(G->B, L->body);
	return L->i;
}

void loop_end(Fn *F, Loop *L)
{
	Gen *G = F->gen;
	LLVMValueRef next = iadd(G, L->i, ci64(G, 1));
	LLVMBasicBlockRef cur = llvm.LLVMGetInsertBlock(G->B);
	llvm.LLVMBuildBr(G->B, L->head);
	llvm.LLVMAddIncoming(L->i, &next, &cur, 1);
	llvm.LLVMPositionBuilderAtEnd(G->B, L->exit);
}

LLVMValueRef loop_to(Fn *F, Loop *L, LLVMValueRef hi)
{
	return loop_begin(F, L, ci64(F->gen, 0), hi);
}

/* a conditional block: returns the block to continue in after `cond` */
LLVMBasicBlockRef if_begin(Fn *F, LLVMValueRef cond)
{
	Gen *G = F->gen;
	LLVMBasicBlockRef then = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "then");
	LLVMBasicBlockRef join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "join");
	llvm.LLVMBuildCondBr(G->B, cond, then, join);
	llvm.LLVMPositionBuilderAtEnd(G->B, then);
	return join;
}

void if_end(Fn *F, LLVMBasicBlockRef join)
{
	llvm.LLVMBuildBr(F->gen->B, join);
	llvm.LLVMPositionBuilderAtEnd(F->gen->B, join);
}

LLVMValueRef in_range(Gen *G, LLVMValueRef v, LLVMValueRef hi)
{
	return llvm.LLVMBuildICmp(G->B, LLVMIntULT, v, hi, "");
}

LLVMValueRef entry_alloca(Fn *F, LLVMTypeRef t, const char *name)
{
	Gen *G = F->gen;
	LLVMBasicBlockRef cur = llvm.LLVMGetInsertBlock(G->B);
	LLVMValueRef first = llvm.LLVMGetFirstInstruction(F->entry);
	if (first)
		llvm.LLVMPositionBuilderBefore(G->B, first);
	else
		llvm.LLVMPositionBuilderAtEnd(G->B, F->entry);
	LLVMValueRef a = llvm.LLVMBuildAlloca(G->B, t, name);
	llvm.LLVMPositionBuilderAtEnd(G->B, cur);
	return a;
}

/* ---- index arithmetic on i64 values: kernels read like the sums they emit ---- */

LLVMValueRef iadd(Gen *G, LLVMValueRef a, LLVMValueRef b)
{
	return llvm.LLVMBuildAdd(G->B, a, b, "");
}

LLVMValueRef isub(Gen *G, LLVMValueRef a, LLVMValueRef b)
{
	return llvm.LLVMBuildSub(G->B, a, b, "");
}

LLVMValueRef imul(Gen *G, LLVMValueRef a, LLVMValueRef b)
{
	return llvm.LLVMBuildMul(G->B, a, b, "");
}

LLVMValueRef idiv(Gen *G, LLVMValueRef a, LLVMValueRef b)
{
	return llvm.LLVMBuildSDiv(G->B, a, b, "");
}

LLVMValueRef irem(Gen *G, LLVMValueRef a, LLVMValueRef b)
{
	return llvm.LLVMBuildSRem(G->B, a, b, "");
}

LLVMValueRef elem_off(Gen *G, LLVMValueRef base, LLVMValueRef i, LLVMValueRef stride)
{
	return iadd(G, base, imul(G, i, stride));
}

/* ---- dimensions: constants, or run-time values of a reuse_hash variant ---- */

int fn_dynamic(Fn *F)
{
	return (F->v && F->v->ndyn) || F->g->ngdyn;
}

int node_dyn(Graph *g, Variant *v, Node *n)
{
	Node *ns[1 + 16];
	int cnt = 0;
	ns[cnt++] = n;
	for (int k = 0; k < n->nin && cnt < 17; k++)
		ns[cnt++] = n->in[k];
	for (int c = 0; c < cnt; c++) {
		Node *x = ns[c];
		for (int k = 0; v && k < v->ndyn; k++)
			if (v->dyn[k].node == x->id)
				return 1;
		for (int k = 0; k < g->ngdyn; k++)
			if (g->gdyn[k].node == x->id)
				return 1;
	}
	return n->nin > 16;
}

int node_dynamic(Fn *F, Node *n)
{
	return fn_dynamic(F) && node_dyn(F->g, F->v, n);
}

static LLVMValueRef dyn_field(Fn *F, Node *n, int field)
{
	Variant *v = F->v;
	Graph *g = F->g;
	if (g->ngdyn && F->dims) {
		/* an entry's run-time dims: c0 + sum coef[j] * dims[j] */
		GDyn *d = gdyn_find(g, n->id, field);
		if (!d)
			return NULL;
		Gen *G = F->gen;
		LLVMValueRef r = ci64(G, d->f.c0);
		for (int j = 0; j < g->nbasis; j++)
			if (d->f.coef[j]) {
				LLVMValueRef idx = ci64(G, j);
				LLVMValueRef pp = llvm.LLVMBuildGEP2(G->B, G->i64, F->dims, &idx, 1, "");
				LLVMValueRef dj = llvm.LLVMBuildLoad2(G->B, G->i64, pp, "dim");
				r = iadd(G, r, imul(G, dj, ci64(G, d->f.coef[j])));
			}
		return r;
	}
	if (v && v->ndyn && F->dims)
		for (int k = 0; k < v->ndyn; k++)
			if (v->dyn[k].node == n->id && v->dyn[k].field == field) {
				Gen *G = F->gen;
				LLVMValueRef idx = ci64(G, k);
				LLVMValueRef pp = llvm.LLVMBuildGEP2(G->B, G->i64, F->dims, &idx, 1, "");
				return llvm.LLVMBuildLoad2(G->B, G->i64, pp, "dim");
			}
	return NULL;
}

int field_static(Fn *F, Node *n, int field)
{
	/* as dyn_field finds them */
	Variant *v = F->v;
	Graph *g = F->g;
	if (g->ngdyn && F->dims)
		return !gdyn_find(g, n->id, field);
	if (v && v->ndyn && F->dims)
		for (int k = 0; k < v->ndyn; k++)
			if (v->dyn[k].node == n->id && v->dyn[k].field == field)
				return 0;
	return 1;
}

LLVMValueRef dimv(Fn *F, Node *n, int axis)
{
	LLVMValueRef v = dyn_field(F, n, axis);
	return v ? v : ci64(F->gen, n->shape[axis]);
}

LLVMValueRef attrv(Fn *F, Node *n, int k)
{
	LLVMValueRef v = dyn_field(F, n, 16 + k);
	return v ? v : ci64(F->gen, n->a[k]);
}

LLVMValueRef numelv(Fn *F, Node *n)
{
	LLVMValueRef v = ci64(F->gen, 1);
	for (int k = 0; k < n->rank; k++)
		v = imul(F->gen, v, dimv(F, n, k));
	return v;
}

/* row-major strides of n; with `bcast_to_rank`, aligned right to that rank with
 * 0 for broadcast (size-1 or missing) axes */
void strides(Fn *F, Node *n, int out_rank, const Node *out, LLVMValueRef *st)
{
	Gen *G = F->gen;
	LLVMValueRef s = ci64(G, 1);
	for (int k = out_rank - 1; k >= 0; k--) {
		int ik = k - (out_rank - n->rank);
		if (ik < 0) {
			st[k] = ci64(G, 0);
			continue;
		}
		int bcast = n->shape[ik] == 1 && out && out->shape[k] != 1;
		st[k] = bcast ? ci64(G, 0) : s;
		s = imul(G, s, dimv(F, n, ik));
	}
}

/* ---- elements: pointers, loads and stores, loop nests ---- */

static LLVMValueRef param_ptr(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMBasicBlockRef cur = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(F->entry));
	/* ctx->params is the first field of nestrt_ctx */
	LLVMValueRef pp = llvm.LLVMBuildPointerCast(B, F->ctx, llvm.LLVMPointerType(G->i8pp, 0), "");
	LLVMValueRef params = llvm.LLVMBuildLoad2(B, G->i8pp, pp, "params");
	LLVMValueRef idx = ci64(G, F->plan->index[n->id]);
	LLVMValueRef raw = llvm.LLVMBuildLoad2(B, G->i8p, llvm.LLVMBuildGEP2(B, G->i8p, params, &idx, 1, ""), "");
	LLVMValueRef p = llvm.LLVMBuildPointerCast(B, raw, llvm.LLVMPointerType(elem_t(G, n->dtype), 0), "");
	llvm.LLVMPositionBuilderAtEnd(B, cur);
	return p;
}

/* The typed pointer to a node's elements; params are loaded on first use, in
 * the entry block, so that a param only a rolled call chain reads costs no code. */
LLVMValueRef nptr(Fn *F, Node *n)
{
	if (!F->ptr[n->id] && n->op == OP_PARAM)
		F->ptr[n->id] = param_ptr(F, n);
	if (!F->ptr[n->id])
		ice("codegen: node %%%d (%s) has no storage", n->id, op_name(n->op));
	return F->ptr[n->id];
}

LLVMValueRef load_at(Fn *F, Node *n, LLVMValueRef off)
{
	Gen *G = F->gen;
	LLVMTypeRef t = elem_t(G, n->dtype);
	LLVMValueRef p = llvm.LLVMBuildGEP2(G->B, t, nptr(F, n), &off, 1, "");
	return llvm.LLVMBuildLoad2(G->B, t, p, "");
}

void store_at(Fn *F, Node *n, LLVMValueRef off, LLVMValueRef v)
{
	Gen *G = F->gen;
	LLVMTypeRef t = elem_t(G, n->dtype);
	LLVMValueRef p = llvm.LLVMBuildGEP2(G->B, t, nptr(F, n), &off, 1, "");
	llvm.LLVMBuildStore(G->B, v, p);
}

/* The constant value of v, or -1 */
static int64_t const_of(LLVMValueRef v)
{
	return llvm.LLVMIsAConstantInt(v) ? llvm.LLVMConstIntGetSExtValue(v) : -1;
}

static void nest_open(Fn *F, Nest *N, Node *out, int nops, LLVMValueRef st[][MAX_RANK], LLVMValueRef *off, int runs)
{
	Gen *G = F->gen;
	N->rank = out->rank;
	N->skip = 0;
	int flat = F->par_lo && F->par_flat && out->rank >= 2;
	for (int j = 0; j < nops; j++)
		off[j] = ci64(G, 0);
	/* runs: axis k joins the loop of k + 1 when every operand steps over k
	 * as over one more row of k + 1's (all static): ext[k] is then the
	 * extent of the loop that starts at k */
	int64_t ext[MAX_RANK];
	int first = F->par_lo ? (flat ? 2 : 1) : 0;
	for (int k = 0; k < out->rank; k++)
		ext[k] = -1;
	for (int k = out->rank - 2; runs && k >= first; k--) {
		int64_t d = const_of(dimv(F, out, k + 1)), e = ext[k + 1] >= 0 ? ext[k + 1] : d;
		int ok = d >= 0 && const_of(dimv(F, out, k)) >= 0;
		for (int j = 0; j < nops && ok; j++) {
			int64_t a = const_of(st[j][k]), b = const_of(st[j][k + 1]);
			/* equivalent mutant [cmp >= -> >]: axes an operand is broadcast
			 * along (strides 0) then keep loops of their own: the same values */
			ok = a >= 0 && b >= 0 && a == b * d;
		}
		if (!ok)
			continue;
		ext[k] = const_of(dimv(F, out, k)) * e;
		N->skip |= 1u << (k + 1);
	}
	for (int k = 0; k < out->rank; k++) {
		if (k == 0 && flat) {
			/* the task's units are the pairs (axis 0, axis 1) */
			LLVMValueRef u = loop_begin(F, &N->loops[0], F->par_lo, F->par_hi), d1 = dimv(F, out, 1);
			N->idx[0] = idiv(G, u, d1);
			N->idx[1] = irem(G, u, d1);
			N->skip |= 1u << 1;
			for (int j = 0; j < nops; j++)
				off[j] = elem_off(G, elem_off(G, off[j], N->idx[0], st[j][0]), N->idx[1], st[j][1]);
			k = 1;
			continue;
		}
		if (N->skip >> k & 1)
			continue;
		/* the run's stride: that of its innermost axis */
		int last = k;
		while (last + 1 < out->rank && (N->skip >> (last + 1) & 1))
			last++;
		if (k == 0 && F->par_lo)
			N->idx[k] = loop_begin(F, &N->loops[k], F->par_lo, F->par_hi);
		else
			N->idx[k] = loop_begin(F, &N->loops[k], ci64(G, 0), ext[k] >= 0 ? ci64(G, ext[k]) : dimv(F, out, k));
		for (int j = 0; j < nops; j++)
			off[j] = elem_off(G, off[j], N->idx[k], st[j][last]);
	}
}

void nest_begin(Fn *F, Nest *N, Node *out, int nops, LLVMValueRef st[][MAX_RANK], LLVMValueRef *off)
{
	nest_open(F, N, out, nops, st, off, 0);
}

void nest_begin_runs(Fn *F, Nest *N, Node *out, int nops, LLVMValueRef st[][MAX_RANK], LLVMValueRef *off)
{
	nest_open(F, N, out, nops, st, off, 1);
}

void nest_end(Fn *F, Nest *N)
{
	for (int k = N->rank - 1; k >= 0; k--)
		if (!(N->skip >> k & 1))
			loop_end(F, &N->loops[k]);
}

/* ---- functions and pool tasks ---- */

/* Attributes of every function made here: nounwind, the region's fast-math
 * option, and on AVX-512 targets loops vectorised with 512-bit vectors (LLVM
 * prefers 256 bits on these CPUs for fear of lower clocks, but the matmul
 * tiles use 512-bit registers anyway). */
void fn_attrs(Gen *G, LLVMValueRef fn, Variant *v)
{
	unsigned nounwind = llvm.LLVMGetEnumAttributeKindForName("nounwind", 8);
	llvm.LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, llvm.LLVMCreateEnumAttribute(G->C, nounwind, 0));
	if (v && v->fast_math) {
		const char *attrs[] = {"unsafe-fp-math", "no-nans-fp-math", "no-infs-fp-math", "no-signed-zeros-fp-math"};
		for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
			llvm.LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
			                        llvm.LLVMCreateStringAttribute(G->C, attrs[i], (unsigned)strlen(attrs[i]), "true", 4));
	}
	if (G->vbytes == 64)
		llvm.LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
		                        llvm.LLVMCreateStringAttribute(G->C, "prefer-vector-width", 19, "512", 3));
}

Task task_begin(Fn *F, Fn *T, const char *kind, LLVMValueRef *vals, int nvals, LLVMValueRef *got)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Task t;
	/* an entry's run-time dims go along as the last word, so that the task's
	 * shapes and attributes (dimv, attrv) read them as the caller's do */
	int nenv = nvals + (F->dims != NULL);
	LLVMTypeRef env_t = llvm.LLVMArrayType(G->i64, (unsigned)nenv);
	t.env = entry_alloca(F, env_t, "taskenv");
	for (int i = 0; i < nenv; i++) {
		LLVMValueRef ix[2] = {ci32(G, 0), ci32(G, i)};
		LLVMValueRef x = i < nvals ? vals[i] : llvm.LLVMBuildPtrToInt(B, F->dims, G->i64, "");
		llvm.LLVMBuildStore(B, x, llvm.LLVMBuildGEP2(B, env_t, t.env, ix, 2, ""));
	}
	LLVMTypeRef tt_args[3] = {G->i8p, G->i64, G->i64};
	LLVMTypeRef task_t = llvm.LLVMFunctionType(llvm.LLVMVoidTypeInContext(G->C), tt_args, 3, 0);
	char name[64];
	snprintf(name, sizeof name, "%s.task.%d", kind, G->ntask++);
	t.fn = llvm.LLVMAddFunction(G->M, name, task_t);
	llvm.LLVMSetLinkage(t.fn, LLVMInternalLinkage);
	/* its address is not significant: one identical to it may stand in
	 * (gen_module_end merges them) */
	llvm.LLVMSetUnnamedAddress(t.fn, LLVMGlobalUnnamedAddr);
	fn_attrs(G, t.fn, F->v);
	t.saved = llvm.LLVMGetInsertBlock(B);
	*T = (Fn){.gen = G, .g = F->g, .plan = F->plan, .v = F->v, .fn = t.fn};
	T->ptr = xcalloc((size_t)F->g->nnodes + 1, sizeof(LLVMValueRef));
	T->entry = llvm.LLVMAppendBasicBlockInContext(G->C, t.fn, "entry");
	LLVMBasicBlockRef start = llvm.LLVMAppendBasicBlockInContext(G->C, t.fn, "start");
	llvm.LLVMPositionBuilderAtEnd(B, T->entry);
	LLVMValueRef e = llvm.LLVMBuildPointerCast(B, llvm.LLVMGetParam(t.fn, 0), llvm.LLVMPointerType(env_t, 0), "");
	for (int i = 0; i < nenv; i++) {
		LLVMValueRef ix[2] = {ci32(G, 0), ci32(G, i)};
		/* a size known at compile time stays a constant in the task, so
		 * that its loops' addresses fold (a tile's rows K apart become
		 * immediate offsets instead of registers reloaded in the k loop) */
		if (i < nvals && llvm.LLVMIsAConstantInt(vals[i])) {
			got[i] = vals[i];
			continue;
		}
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, G->i64, llvm.LLVMBuildGEP2(B, env_t, e, ix, 2, ""), "");
		if (i < nvals)
			got[i] = x;
		else
			T->dims = llvm.LLVMBuildIntToPtr(B, x, llvm.LLVMPointerType(G->i64, 0), "dims");
	}
	/* allocas stay in the entry block, before this branch */
	llvm.LLVMBuildBr(B, start);
	llvm.LLVMPositionBuilderAtEnd(B, start);
	return t;
}

void task_end(Fn *F, Fn *T, Task *t, LLVMValueRef ntasks)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	llvm.LLVMBuildRetVoid(B);
	free(T->ptr);
	llvm.LLVMPositionBuilderAtEnd(B, t->saved);
	LLVMTypeRef tt_args[3] = {G->i8p, G->i64, G->i64};
	LLVMTypeRef task_t = llvm.LLVMFunctionType(llvm.LLVMVoidTypeInContext(G->C), tt_args, 3, 0);
	LLVMTypeRef pf_args[3] = {G->i64, llvm.LLVMPointerType(task_t, 0), G->i8p};
	LLVMValueRef pf_vals[3] = {ntasks, t->fn, llvm.LLVMBuildPointerCast(B, t->env, G->i8p, "")};
	call(G, "nestrt_parallel_for", llvm.LLVMVoidTypeInContext(G->C), pf_args, pf_vals, 3);
}

LLVMValueRef cstr(Gen *G, const char *s)
{
	size_t n = strlen(s);
	LLVMValueRef init = llvm.LLVMConstStringInContext(G->C, s, (unsigned)n, 0);
	LLVMTypeRef t = llvm.LLVMArrayType(G->i8, (unsigned)n + 1);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, t, "str");
	llvm.LLVMSetInitializer(gv, init);
	llvm.LLVMSetGlobalConstant(gv, 1);
	llvm.LLVMSetLinkage(gv, LLVMPrivateLinkage);
	llvm.LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
	return llvm.LLVMConstPointerCast(gv, G->i8p);
}

/* A private table of n constant i64s, as an i64 pointer (offsets a loop
 * reads that no formula of its counter gives). */
LLVMValueRef ctable_i64(Gen *G, const int64_t *v, int64_t n)
{
	LLVMValueRef *c = xmalloc((size_t)n * sizeof *c);
	for (int64_t i = 0; i < n; i++)
		c[i] = ci64(G, v[i]);
	LLVMTypeRef t = llvm.LLVMArrayType(G->i64, (unsigned)n);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, t, "tab");
	llvm.LLVMSetInitializer(gv, llvm.LLVMConstArray(G->i64, c, (unsigned)n));
	llvm.LLVMSetGlobalConstant(gv, 1);
	llvm.LLVMSetLinkage(gv, LLVMPrivateLinkage);
	llvm.LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
	free(c);
	return llvm.LLVMConstPointerCast(gv, G->i64p);
}

/* The interpreter's run-time errors name the same place; the cache key holds
 * it too (graph_text in cache.c). */
LLVMValueRef source_where(Gen *G, Node *n)
{
	const Source *src = G->p->src;
	char where[512] = "";
	if (src && src->line_start && n->loc.off >= 0 && (size_t)n->loc.off <= src->len) {
		int line, col;
		source_linecol(src, n->loc.off, &line, &col);
		snprintf(where, sizeof where, "%s:%d:%d", src->path, line, col);
	}
	return cstr(G, where);
}

/* A prefetch of the line at p into every cache level (prefetcht0: a repeat
 * of a line already fetched hits L1). The intrinsic's name is mangled with
 * its pointer type, which differs between typed (LLVM 14) and opaque
 * pointers (15 and later): LLVM declares it. */
void prefetch_line(Gen *G, LLVMValueRef p)
{
	prefetch_rw(G, p, 0, 3);
}

void prefetch_rw(Gen *G, LLVMValueRef p, int write, int locality)
{
	unsigned id = llvm.LLVMLookupIntrinsicID("llvm.prefetch", 13);
	LLVMTypeRef pt = G->i8p;
	LLVMValueRef fn = llvm.LLVMGetIntrinsicDeclaration(G->M, id, &pt, 1);
	LLVMTypeRef ft = llvm.LLVMIntrinsicGetType(G->C, id, &pt, 1);
	LLVMValueRef args[4] = {llvm.LLVMBuildPointerCast(G->B, p, G->i8p, ""), ci32(G, write), ci32(G, locality), ci32(G, 1)};
	llvm.LLVMBuildCall2(G->B, ft, fn, args, 4, "");
}

/* ---- 16-bit floats in registers (weight formats: matmul.c, movement.c) ---- */

/* x as an i32, or vw of them (vw > 0) */
LLVMValueRef vsplat32(Gen *G, int vw, uint32_t x)
{
	LLVMValueRef c = llvm.LLVMConstInt(G->i32, x, 0);
	return vw ? splat(G, llvm.LLVMVectorType(G->i32, (unsigned)vw), vw, c) : c;
}

/* <vw x i16> f16 or bf16 bits -> <vw x float> (vw 0: one i16 -> float),
 * exactly (f16: the bits moved into place and scaled by 2^112, inf and NaN
 * given the full exponent, as elementwise.c's f16_to_f32; integer
 * operations only, the same on every target) */
LLVMValueRef widen16(Gen *G, LLVMValueRef h, int vw, int bf16)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef vi = vw ? llvm.LLVMVectorType(G->i32, (unsigned)vw) : G->i32;
	LLVMTypeRef vf = vw ? llvm.LLVMVectorType(G->f32, (unsigned)vw) : G->f32;
	if (!bf16 && G->f16c) {
		/* F16C's vcvtph2ps: one instruction where the integer steps took
		 * eight (a q8_0 / q4_0 block's scales, every f16 weight) */
		LLVMTypeRef ht = llvm.LLVMHalfTypeInContext(G->C);
		return llvm.LLVMBuildFPExt(B, llvm.LLVMBuildBitCast(B, h, vw ? llvm.LLVMVectorType(ht, (unsigned)vw) : ht, ""), vf, "");
	}
	LLVMValueRef u = llvm.LLVMBuildZExt(B, h, vi, "");
	if (bf16)
		return llvm.LLVMBuildBitCast(B, llvm.LLVMBuildShl(B, u, vsplat32(G, vw, 16), ""), vf, "");
	LLVMValueRef em = llvm.LLVMBuildShl(B, llvm.LLVMBuildAnd(B, u, vsplat32(G, vw, 0x7fffu), ""), vsplat32(G, vw, 13), "");
	LLVMValueRef f = llvm.LLVMBuildFMul(B, llvm.LLVMBuildBitCast(B, em, vf, ""),
	                                    llvm.LLVMBuildBitCast(B, vsplat32(G, vw, 0x77800000u), vf, ""), "");
	LLVMValueRef fu = llvm.LLVMBuildBitCast(B, f, vi, "");
	LLVMValueRef infnan = llvm.LLVMBuildICmp(B, LLVMIntUGE, em, vsplat32(G, vw, 0x0f800000u), "");
	fu = llvm.LLVMBuildSelect(B, infnan, llvm.LLVMBuildOr(B, fu, vsplat32(G, vw, 0x7f800000u), ""), fu, "");
	LLVMValueRef sgn = llvm.LLVMBuildShl(B, llvm.LLVMBuildAnd(B, u, vsplat32(G, vw, 0x8000u), ""), vsplat32(G, vw, 16), "");
	return llvm.LLVMBuildBitCast(B, llvm.LLVMBuildOr(B, fu, sgn, ""), vf, "");
}

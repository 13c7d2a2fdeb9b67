/* graph.c - emitting a graph as a function. Every function has the signature
 *     int f(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
 * bufs holding the inputs then the outputs; dims the run-time dimensions of a
 * reuse_hash variant; ws the workspace (this graph's intermediates first, the
 * callees' after them). Region calls go through nestrt_call and the dispatch
 * table; calls over max_reuse_entries (or with --no-regions) get a private copy
 * of the callee's code in the caller's module. Chains of calls become loops,
 * large kernels tasks of the thread pool. */
#include "gen.h"

#include <stdlib.h>

/* ---- workspace, calls and call chains ---- */

Plan *plan_of(Gen *G, Graph *g, Variant *v)
{
	if (!G->plans[g->id])
		G->plans[g->id] = plan_variant(G->p, g, v, !G->o->no_winograd);
	return G->plans[g->id];
}

int64_t graph_need(Gen *G, Graph *g)
{
	if (G->need[g->id] >= 0)
		return G->need[g->id];
	CallSite *site = NULL;
	Variant *v = NULL;
	for (int i = 0; i < G->rt->variants.n && !v; i++) {
		Variant *vv = G->rt->variants.v[i];
		for (int c = 0; c < vv->calls.n; c++) {
			site = vv->calls.v[c];
			if (site->call->callee == g)
				v = vv;
		}
	}
	Plan *pl = plan_of(G, v ? v->g : g, v);
	int64_t callees = 0;
	Graph *body = v ? v->g : g;
	for (int i = 0; i < body->nnodes; i++) {
		Node *n = body->nodes[i];
		if (n->op != OP_CALL)
			continue;
		CallSite *cs = callsite_of(G->rt, n);
		int64_t c = graph_need(G, cs && cs->v ? cs->v->g : n->callee);
		if (c > callees)
			callees = c;
	}
	G->need[g->id] = pl->ws_size + callees;
	return G->need[g->id];
}

static void emit_call(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Graph *callee = n->callee;
	CallSite *cs = callsite_of(G->rt, n);
	int nres = callee->noutputs;
	int total = n->nin + nres;
	LLVMTypeRef arr_t = llvm.LLVMArrayType(G->i8p, (unsigned)(total ? total : 1));
	LLVMValueRef arr = entry_alloca(F, arr_t, "args");
	int k = 0;
	for (int i = 0; i < n->nin; i++, k++) {
		LLVMValueRef idx[2] = {ci32(G, 0), ci32(G, k)};
		LLVMValueRef slot = llvm.LLVMBuildGEP2(B, arr_t, arr, idx, 2, "");
		llvm.LLVMBuildStore(B, llvm.LLVMBuildPointerCast(B, nptr(F, n->in[i]), G->i8p, ""), slot);
	}
	/* results: the OP_RESULT nodes that read this call */
	for (int r = 0; r < nres; r++, k++) {
		LLVMValueRef p = NULL;
		for (int i = n->id + 1; i < F->g->nnodes && !p; i++) {
			Node *m = F->g->nodes[i];
			if (m->op == OP_RESULT && m->in[0] == n && m->a[0] == r)
				p = nptr(F, m);
		}
		if (!p)
			p = llvm.LLVMConstPointerNull(G->i8p); /* unused result: the callee must not write it */
		LLVMValueRef idx[2] = {ci32(G, 0), ci32(G, k)};
		LLVMValueRef slot = llvm.LLVMBuildGEP2(B, arr_t, arr, idx, 2, "");
		llvm.LLVMBuildStore(B, llvm.LLVMBuildPointerCast(B, p, G->i8p, ""), slot);
	}
	LLVMValueRef idx0[2] = {ci32(G, 0), ci32(G, 0)};
	LLVMValueRef bufs = llvm.LLVMBuildGEP2(B, arr_t, arr, idx0, 2, "");
	LLVMValueRef off = ci64(G, F->plan->ws_size);
	LLVMValueRef ws = llvm.LLVMBuildGEP2(B, G->i8, F->ws, &off, 1, "");
	LLVMValueRef dims = llvm.LLVMConstPointerNull(G->i64p);
	LLVMValueRef st;
	if (callee->nbasis) {
		/* the entry's run-time dims, passed on as they are */
		if (!F->dims)
			ice("a call of a graph with run-time dims from one without");
		dims = F->dims;
	}
	if (cs && cs->v) {
		if (callee->nbasis) {
		} else if (cs->v->ndyn && cs->dyn_map && F->dims) {
			/* inside shared code: the inner dims follow the caller's own */
			LLVMTypeRef dt = llvm.LLVMArrayType(G->i64, (unsigned)cs->v->ndyn);
			LLVMValueRef arr2 = entry_alloca(F, dt, "dims");
			for (int i = 0; i < cs->v->ndyn; i++) {
				LLVMValueRef val;
				if (cs->dyn_map[i] >= 0) {
					LLVMValueRef ix = ci64(G, cs->dyn_map[i]);
					val = llvm.LLVMBuildLoad2(B, G->i64, llvm.LLVMBuildGEP2(B, G->i64, F->dims, &ix, 1, ""), "");
				} else {
					val = ci64(G, cs->dyn_values[i]);
				}
				LLVMValueRef ix2[2] = {ci32(G, 0), ci32(G, i)};
				llvm.LLVMBuildStore(B, val, llvm.LLVMBuildGEP2(B, dt, arr2, ix2, 2, ""));
			}
			dims = llvm.LLVMBuildGEP2(B, dt, arr2, idx0, 2, "");
		} else if (cs->v->ndyn) {
			/* this call's own values of the variant's run-time dims */
			LLVMTypeRef dt = llvm.LLVMArrayType(G->i64, (unsigned)cs->v->ndyn);
			LLVMValueRef *vals = xmalloc((size_t)cs->v->ndyn * sizeof(LLVMValueRef));
			for (int i = 0; i < cs->v->ndyn; i++)
				vals[i] = ci64(G, cs->dyn_values[i]);
			LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, dt, "dims");
			llvm.LLVMSetInitializer(gv, llvm.LLVMConstArray(G->i64, vals, (unsigned)cs->v->ndyn));
			llvm.LLVMSetGlobalConstant(gv, 1);
			llvm.LLVMSetLinkage(gv, LLVMPrivateLinkage);
			free(vals);
			dims = llvm.LLVMBuildGEP2(B, dt, gv, idx0, 2, "");
		}
		LLVMTypeRef at[5] = {G->i8p, G->i32, G->i8pp, G->i64p, G->i8p};
		LLVMValueRef slot = ci32(G, cs->v->id);
		/* a specialised alternative (dims.c): its variant when the dim has its value */
		Node *alt = n->a[3] ? F->g->nodes[n->a[3] - 1] : NULL;
		CallSite *acs = alt ? callsite_of(G->rt, alt) : NULL;
		if (acs && acs->v && F->dims) {
			LLVMValueRef ix = ci64(G, n->a[4] - 1);
			LLVMValueRef dv = llvm.LLVMBuildLoad2(B, G->i64, llvm.LLVMBuildGEP2(B, G->i64, F->dims, &ix, 1, ""), "");
			LLVMValueRef hit = llvm.LLVMBuildICmp(B, LLVMIntEQ, dv, ci64(G, n->a[5]), "special");
			slot = llvm.LLVMBuildSelect(B, hit, ci32(G, acs->v->id), slot, "");
			if (!alt->callee->nbasis)
				dims = llvm.LLVMBuildSelect(B, hit, llvm.LLVMConstPointerNull(G->i64p), dims, "");
		}
		LLVMValueRef av[5] = {F->ctx, slot, bufs, dims, ws};
		st = call(G, "nestrt_call", G->i32, at, av, 5);
	} else {
		/* over max_reuse_entries or --no-regions: a private copy of the callee */
		char name[64];
		snprintf(name, sizeof name, "inline.%s.%d", callee->name, G->ninline++);
		LLVMValueRef f = emit_function(G, callee, NULL, name, 1);
		LLVMValueRef av[4] = {F->ctx, bufs, dims, ws};
		st = llvm.LLVMBuildCall2(B, G->fn_t, f, av, 4, "");
	}
	LLVMValueRef bad = llvm.LLVMBuildICmp(B, LLVMIntNE, st, ci32(G, 0), "");
	LLVMBasicBlockRef failb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "callfail");
	LLVMBasicBlockRef okb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "callok");
	llvm.LLVMBuildCondBr(B, bad, failb, okb);
	llvm.LLVMPositionBuilderAtEnd(B, failb);
	llvm.LLVMBuildRet(B, st);
	llvm.LLVMPositionBuilderAtEnd(B, okb);
}

static LLVMValueRef buf_ptr(Fn *F, int index)
{
	Gen *G = F->gen;
	LLVMValueRef idx = ci64(G, index);
	LLVMValueRef pp = llvm.LLVMBuildGEP2(G->B, G->i8p, F->bufs, &idx, 1, "");
	return llvm.LLVMBuildLoad2(G->B, G->i8p, pp, "");
}

/* A chain of calls of one variant, each taking the previous one's result and
 * otherwise only params (x = block(x, h[i]) unrolled): returns its length and
 * the position of the chained argument. Such a chain is emitted as a loop over
 * a table of param indices, so code size stays the same whatever the depth. */
static int call_chain(Fn *F, int i, int *chain_pos, int **users)
{
	Gen *G = F->gen;
	Graph *g = F->g;
	Node *c1 = g->nodes[i];
	CallSite *cs1 = callsite_of(G->rt, c1);
	if (!cs1 || !cs1->v || cs1->v->ndyn || c1->callee->nbasis || c1->callee->noutputs != 1)
		return 1;
	int n = 1, pos = -1;
	Node *prev = c1;
	for (int j = i + 1; j < g->nnodes; j++) {
		Node *m = g->nodes[j];
		if (m->op == OP_PARAM || (m->op == OP_RESULT && m->in[0] == prev))
			continue;
		if (m->op != OP_CALL)
			break;
		CallSite *cs = callsite_of(G->rt, m);
		if (!cs || cs->v != cs1->v || m->nin != c1->nin)
			break;
		/* the previous result, used only here, and params for everything else */
		Node *res = NULL;
		for (int k = j - 1; k > prev->id; k--)
			if (g->nodes[k]->op == OP_RESULT && g->nodes[k]->in[0] == prev)
				res = g->nodes[k];
		if (!res || users[res->id][0] != 1 || F->plan->kind[res->id] != BUF_WS)
			break;
		int p = -1, ok = 1;
		for (int k = 0; k < m->nin && ok; k++) {
			if (m->in[k] == res)
				p = p < 0 ? k : -2;
			else if (m->in[k]->op != OP_PARAM)
				ok = 0;
		}
		if (!ok || p < 0 || (pos >= 0 && p != pos))
			break;
		for (int k = 0; k < c1->nin; k++)
			if (k != p && c1->in[k]->op != OP_PARAM)
				ok = 0;
		if (!ok)
			break;
		pos = p;
		n++;
		prev = m;
	}
	*chain_pos = pos;
	return n;
}

/* Calls 0..n-2 of a chain starting at node i, as one loop; the last call is
 * left to emit_call. */
static void emit_chain(Fn *F, int i, int n, int pos)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Graph *g = F->g;
	Node *c1 = g->nodes[i];
	CallSite *cs = callsite_of(G->rt, c1);
	int m = c1->nin;
	/* per call: the param index of each argument, and the offset of its result */
	LLVMValueRef *pidx = xcalloc((size_t)(n - 1) * (size_t)m + 1, sizeof(LLVMValueRef));
	LLVMValueRef *roff = xcalloc((size_t)n + 1, sizeof(LLVMValueRef));
	Node *cn = c1;
	for (int k = 0; k < n - 1; k++) {
		for (int a = 0; a < m; a++)
			pidx[k * m + a] = ci32(G, a == pos ? -1 : (int)cn->in[a]->a[0]);
		Node *res = NULL, *next = NULL;
		for (int j = cn->id + 1; j < g->nnodes && !next; j++) {
			Node *x = g->nodes[j];
			if (x->op == OP_RESULT && x->in[0] == cn)
				res = x;
			if (x->op == OP_CALL)
				next = x;
		}
		roff[k] = ci64(G, F->plan->offset[res->id]);
		cn = next;
	}
	LLVMTypeRef pt = llvm.LLVMArrayType(G->i32, (unsigned)((n - 1) * m));
	LLVMValueRef ptab = llvm.LLVMAddGlobal(G->M, pt, "chain.params");
	llvm.LLVMSetInitializer(ptab, llvm.LLVMConstArray(G->i32, pidx, (unsigned)((n - 1) * m)));
	llvm.LLVMSetGlobalConstant(ptab, 1);
	llvm.LLVMSetLinkage(ptab, LLVMPrivateLinkage);
	LLVMTypeRef ot = llvm.LLVMArrayType(G->i64, (unsigned)(n - 1));
	LLVMValueRef otab = llvm.LLVMAddGlobal(G->M, ot, "chain.results");
	llvm.LLVMSetInitializer(otab, llvm.LLVMConstArray(G->i64, roff, (unsigned)(n - 1)));
	llvm.LLVMSetGlobalConstant(otab, 1);
	llvm.LLVMSetLinkage(otab, LLVMPrivateLinkage);
	free(pidx);
	free(roff);

	LLVMTypeRef arr_t = llvm.LLVMArrayType(G->i8p, (unsigned)m + 1);
	LLVMValueRef arr = entry_alloca(F, arr_t, "chainargs");
	LLVMValueRef cur = entry_alloca(F, G->i8p, "chainin");
	llvm.LLVMBuildStore(B, llvm.LLVMBuildPointerCast(B, nptr(F, c1->in[pos]), G->i8p, ""), cur);
	LLVMValueRef pp = llvm.LLVMBuildPointerCast(B, F->ctx, llvm.LLVMPointerType(G->i8pp, 0), "");
	LLVMValueRef params = llvm.LLVMBuildLoad2(B, G->i8pp, pp, "params");
	LLVMValueRef z = ci32(G, 0);
	LLVMValueRef off = ci64(G, F->plan->ws_size);
	LLVMValueRef ws = llvm.LLVMBuildGEP2(B, G->i8, F->ws, &off, 1, "");
	Loop L;
	LLVMValueRef k = loop_to(F, &L, ci64(G, n - 1));
	for (int a = 0; a < m; a++) {
		LLVMValueRef v;
		if (a == pos) {
			v = llvm.LLVMBuildLoad2(B, G->i8p, cur, "");
		} else {
			LLVMValueRef e = iadd(G, imul(G, k, ci64(G, m)), ci64(G, a));
			LLVMValueRef ix[2] = {ci64(G, 0), e};
			LLVMValueRef pi = llvm.LLVMBuildLoad2(B, G->i32, llvm.LLVMBuildGEP2(B, pt, ptab, ix, 2, ""), "");
			LLVMValueRef pe = llvm.LLVMBuildSExt(B, pi, G->i64, "");
			v = llvm.LLVMBuildLoad2(B, G->i8p, llvm.LLVMBuildGEP2(B, G->i8p, params, &pe, 1, ""), "");
		}
		LLVMValueRef ix[2] = {z, ci32(G, a)};
		llvm.LLVMBuildStore(B, v, llvm.LLVMBuildGEP2(B, arr_t, arr, ix, 2, ""));
	}
	LLVMValueRef ox[2] = {ci64(G, 0), k};
	LLVMValueRef ro = llvm.LLVMBuildLoad2(B, G->i64, llvm.LLVMBuildGEP2(B, ot, otab, ox, 2, ""), "");
	LLVMValueRef out = llvm.LLVMBuildGEP2(B, G->i8, F->ws, &ro, 1, "");
	LLVMValueRef ix[2] = {z, ci32(G, m)};
	llvm.LLVMBuildStore(B, out, llvm.LLVMBuildGEP2(B, arr_t, arr, ix, 2, ""));
	LLVMValueRef ix0[2] = {z, z};
	LLVMValueRef bufs = llvm.LLVMBuildGEP2(B, arr_t, arr, ix0, 2, "");
	LLVMTypeRef at[5] = {G->i8p, G->i32, G->i8pp, G->i64p, G->i8p};
	LLVMValueRef av[5] = {F->ctx, ci32(G, cs->v->id), bufs, llvm.LLVMConstPointerNull(G->i64p), ws};
	LLVMValueRef st = call(G, "nestrt_call", G->i32, at, av, 5);
	LLVMValueRef bad = llvm.LLVMBuildICmp(B, LLVMIntNE, st, ci32(G, 0), "");
	LLVMBasicBlockRef failb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "chainfail");
	LLVMBasicBlockRef okb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "chainok");
	llvm.LLVMBuildCondBr(B, bad, failb, okb);
	llvm.LLVMPositionBuilderAtEnd(B, failb);
	llvm.LLVMBuildRet(B, st);
	llvm.LLVMPositionBuilderAtEnd(B, okb);
	llvm.LLVMBuildStore(B, out, cur);
	loop_end(F, &L);
}

/* ---- kernels on the thread pool ---- */

/* The units of a kernel's outermost loop, which the pool's tasks split: the
 * rows of a row kernel, else axis 0 of the result; NULL when the kernel runs
 * inline (inside a task already, a scalar, or a static shape too small to be
 * worth a dispatch). With run-time dims the units are a run-time value and
 * par_emit decides at run time how many tasks to make. */
#define PAR_MIN_ELEMS 32768
static LLVMValueRef par_units(Fn *F, Node *n, int *flat)
{
	*flat = 0;
	Gen *G = F->gen;
	if (F->par_lo || n->rank < 1)
		return NULL;
	int dyn = node_dynamic(F, n);
	if (!dyn && shape_numel(n->rank, n->shape) < PAR_MIN_ELEMS)
		return NULL;
	/* the units' axes: [0, hi) */
	int hi = 1;
	if (n->op == OP_LAYERNORM || n->op == OP_RMSNORM)
		hi = n->rank - 1;
	else if (n->op == OP_SOFTMAX || n->op == OP_LOG_SOFTMAX)
		hi = (int)n->a[0];
	else if (n->op == OP_GROUPNORM) /* rows of [N, G, R] */
		hi = 2;
	/* equivalent mutant [const 0 -> 1]: and [const 16 -> 15]: which batches
	 * count as small is a matter of speed; the tasks compute the same */
	else if (op_elementwise(n->op) && !dyn && n->rank >= 2 && n->shape[0] < 16) {
		hi = 2; /* a batch of one image: its channels too (nest_begin) */
		*flat = 1;
	}
	int64_t su = 1;
	LLVMValueRef units = ci64(G, 1);
	for (int k = 0; k < hi; k++) {
		su *= n->shape[k];
		units = imul(G, units, dimv(F, n, k));
	}
	return !dyn && su < 2 ? NULL : units;
}

/* emit(n) as tasks of the pool, each over a range of the outermost loop's
 * units; the operands' pointers travel in an i64 array. Up to 16 tasks; one
 * (run inline by the pool) when the kernel is smaller than PAR_MIN_ELEMS at
 * run time, as a decode step's are. */
static void par_emit(Fn *F, Node *n, LLVMValueRef units, int flat, void (*emit)(Fn *, Node *))
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMValueRef sixteen = ci64(G, 16);
	LLVMValueRef ntasks = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, units, sixteen, ""), units, sixteen, "");
	if (node_dynamic(F, n)) {
		LLVMValueRef small = llvm.LLVMBuildICmp(B, LLVMIntSLT, numelv(F, n), ci64(G, PAR_MIN_ELEMS), "");
		ntasks = llvm.LLVMBuildSelect(B, small, ci64(G, 1), ntasks, "");
	}
	LLVMValueRef chunk = idiv(G, iadd(G, units, isub(G, ntasks, ci64(G, 1))), ntasks);
	/* no units (a run-time dim of 0): no tasks, and no division by 0 */
	chunk = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, chunk, ci64(G, 1), ""), ci64(G, 1), chunk, "");
	ntasks = idiv(G, iadd(G, units, isub(G, chunk, ci64(G, 1))), chunk);
	/* the tensors the kernel reads: an elementwise tree's leaves */
	Node *use[EW_LEAVES + 1];
	int nuse = 1;
	use[0] = n;
	if (op_elementwise(n->op)) {
		int nl = 0;
		ew_leaves(F, n, use + 1, &nl);
		nuse += nl;
	} else {
		for (int k = 0; k < n->nin; k++)
			use[nuse++] = n->in[k];
	}
	/* the chunk and the units go along after the pointers */
	LLVMValueRef vals[EW_LEAVES + 3], got[EW_LEAVES + 3];
	for (int i = 0; i < nuse; i++)
		vals[i] = llvm.LLVMBuildPtrToInt(B, nptr(F, use[i]), G->i64, "");
	vals[nuse] = chunk;
	vals[nuse + 1] = units;
	Fn T;
	Task tk = task_begin(F, &T, "par", vals, nuse + 2, got);
	for (int i = 0; i < nuse; i++)
		T.ptr[use[i]->id] = llvm.LLVMBuildIntToPtr(B, got[i], llvm.LLVMPointerType(elem_t(G, use[i]->dtype), 0), "");
	T.par_flat = flat;
	T.par_lo = imul(G, llvm.LLVMGetParam(tk.fn, 1), got[nuse]);
	LLVMValueRef hi = imul(G, llvm.LLVMGetParam(tk.fn, 2), got[nuse]);
	T.par_hi = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, hi, got[nuse + 1], ""), hi, got[nuse + 1], "");
	emit(&T, n);
	task_end(F, &T, &tk, ntasks);
}

/* A kernel, on the pool when large enough. */
static void kernel(Fn *F, Node *n, void (*emit)(Fn *, Node *))
{
	int flat;
	LLVMValueRef units = par_units(F, n, &flat);
	if (units)
		par_emit(F, n, units, flat, emit);
	else
		emit(F, n);
}

/* ---- the per-kernel profile (NESTRT_PROFILE=2) ---- */

/* Whether node n is emitted as a kernel of its own (the switch below). */
static int own_kernel(Fn *F, Node *n)
{
	switch (n->op) {
	case OP_INPUT: case OP_PARAM: case OP_RESHAPE: case OP_RESULT: case OP_CALL:
	case OP_STATE: /* the sequence's buffer itself */
		return 0;
	case OP_TRANSPOSE:
		return !virtual_transpose(F->g, n);
	case OP_SLICE: /* a view its matmul reads in place */
		return !virtual_slice(F->g, n);
	default:
		return 1;
	}
}

/* The kernel's static nestrt_kernel_desc (nestrt.h): { op, shape, where,
 * owner, slot, flops }. */
static LLVMValueRef kernel_desc(Fn *F, Node *n)
{
	Gen *G = F->gen;
	double numel = 1, flops;
	for (int k = 0; k < n->rank; k++)
		numel *= (double)n->shape[k];
	const char *op = op_name(n->op);
	Node *sh = n, *at = n; /* whose shape and place the profile shows */
	if (n->op == OP_MATMUL && F->plan->attn[n->id] >= 0) {
		/* an attention (attention.c): its scores' shape, both products */
		Node *qk = F->g->nodes[F->plan->attn[n->id]];
		double scores = 1;
		for (int k = 0; k < qk->rank; k++)
			scores *= (double)qk->shape[k];
		op = "attention";
		sh = qk;
		flops = 2 * scores * (double)qk->in[0]->shape[qk->rank - 1] + 2 * numel * (double)qk->shape[qk->rank - 1];
	} else if (F->plan->conv_pool[n->id] >= 0) {
		/* a convolution with the pooling that reads it (conv.c): the
		 * convolution's shape, place and operations */
		Node *c = F->g->nodes[F->plan->conv_pool[n->id]], *w = c->in[1];
		op = n->op == OP_MAXPOOL2D ? "conv2d+max_pool2d" : "conv2d+avg_pool2d";
		sh = at = c;
		flops = 2 * (double)shape_numel(c->rank, c->shape) * (double)(w->shape[1] * w->shape[2] * w->shape[3]);
	} else if (n->op == OP_MATMUL) { /* 2*M*N*K, K the left operand's last axis */
		Node *a = n->in[0];
		flops = 2 * numel * (double)(a->rank ? a->shape[a->rank - 1] : 1);
	} else if (n->op == OP_CONV2D) { /* 2 * outputs * C/g*KH*KW, the weight [O, C/g, KH, KW] */
		Node *w = n->in[1];
		double per = 1;
		for (int k = 1; k < w->rank; k++)
			per *= (double)w->shape[k];
		flops = 2 * numel * per;
	} else {
		flops = numel;
	}
	if (node_dynamic(F, n))
		flops = 0; /* the shape is known only at run time */
	Buf b = {0};
	if (F->g->ngdyn)
		dyn_shape_str(G->p->arena, &b, F->g, sh); /* f32[T, 768]: the shapes of the calls vary */
	else
		shape_str(&b, sh->dtype, sh->rank, sh->shape);
	LLVMValueRef f[6] = {cstr(G, op), cstr(G, b.s ? b.s : ""), source_where(G, at),
	                     G->kp_owner ? cstr(G, G->kp_owner) : llvm.LLVMConstPointerNull(G->i8p),
	                     ci64(G, G->kp_slot), llvm.LLVMConstReal(G->f64, flops)};
	buf_free(&b);
	LLVMValueRef init = llvm.LLVMConstStructInContext(G->C, f, 6, 0);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, llvm.LLVMTypeOf(init), "kernel");
	llvm.LLVMSetInitializer(gv, init);
	llvm.LLVMSetGlobalConstant(gv, 1);
	llvm.LLVMSetLinkage(gv, LLVMPrivateLinkage);
	return llvm.LLVMConstPointerCast(gv, G->i8p);
}

/* if (profiling kernels) t0 = nestrt_kprof_begin(ctx): t0 lives in a slot
 * of the frame, which mem2reg turns into a register. */
static LLVMValueRef kp_begin(Fn *F)
{
	Gen *G = F->gen;
	LLVMValueRef t0 = entry_alloca(F, G->i64, "kp.t0");
	LLVMBasicBlockRef join = if_begin(F, F->kp_on);
	LLVMTypeRef at[1] = {G->i8p};
	LLVMValueRef av[1] = {F->ctx};
	llvm.LLVMBuildStore(G->B, call(G, "nestrt_kprof_begin", G->i64, at, av, 1), t0);
	if_end(F, join);
	return t0;
}

static void kp_end(Fn *F, Node *n, LLVMValueRef t0)
{
	Gen *G = F->gen;
	LLVMBasicBlockRef join = if_begin(F, F->kp_on);
	LLVMTypeRef at[5] = {G->i8p, G->i8p, G->i64, G->i64, G->i32};
	LLVMValueRef av[5] = {F->ctx, kernel_desc(F, n), llvm.LLVMBuildLoad2(G->B, G->i64, t0, ""), NULL, NULL};
	if (F->kp_read) {
		/* a weight's bytes: the GB/s it was read at */
		av[3] = llvm.LLVMBuildLoad2(G->B, G->i64, F->kp_bytes, "");
		av[4] = llvm.LLVMBuildLoad2(G->B, G->i32, F->kp_fmt, "");
		call(G, "nestrt_kprof_end_read", llvm.LLVMVoidTypeInContext(G->C), at, av, 5);
		F->kp_read = 0;
	} else {
		call(G, "nestrt_kprof_end", llvm.LLVMVoidTypeInContext(G->C), at, av, 3);
	}
	if_end(F, join);
}

static void emit_graph_body(Fn *F)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Graph *g = F->g;
	Plan *pl = F->plan;
	F->ptr = xcalloc((size_t)g->nnodes + 1, sizeof(LLVMValueRef));
	/* ctx->profile, read once: 2 times every kernel (nestrt.h) */
	LLVMValueRef poff = ci64(G, CTX_PROFILE);
	LLVMValueRef pp = llvm.LLVMBuildGEP2(B, G->i8, F->ctx, &poff, 1, "");
	pp = llvm.LLVMBuildPointerCast(B, pp, llvm.LLVMPointerType(G->i32, 0), "");
	F->kp_on = llvm.LLVMBuildICmp(B, LLVMIntEQ, llvm.LLVMBuildLoad2(B, G->i32, pp, "profile"), ci32(G, 2), "");
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		LLVMTypeRef pt = llvm.LLVMPointerType(elem_t(G, n->op == OP_CALL ? DT_F32 : n->dtype), 0);
		LLVMValueRef raw = NULL;
		switch (pl->kind[i]) {
		case BUF_NONE:
			break;
		case BUF_INPUT:
			raw = buf_ptr(F, (int)pl->index[i]);
			break;
		case BUF_OUTPUT:
			raw = buf_ptr(F, g->ninputs + (int)pl->index[i]);
			break;
		case BUF_PARAM:
			break; /* loaded on first use: nptr */
		case BUF_WS: {
			LLVMValueRef off = ci64(G, pl->offset[i]);
			raw = llvm.LLVMBuildGEP2(B, G->i8, F->ws, &off, 1, "");
			break;
		}
		case BUF_ALIAS:
			raw = nptr(F, g->nodes[pl->index[i]]);
			break;
		}
		if (raw)
			F->ptr[i] = llvm.LLVMBuildPointerCast(B, raw, pt, "");
	}
	/* users of each node, for call chains */
	int **users = xcalloc((size_t)g->nnodes + 1, sizeof(int *));
	int *ucount = xcalloc((size_t)g->nnodes + 1, sizeof(int));
	for (int i = 0; i < g->nnodes; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++)
			ucount[g->nodes[i]->in[k]->id]++;
	for (int j = 0; j < g->noutputs; j++)
		ucount[g->outputs[j]->id] += 2;
	for (int i = 0; i < g->nnodes; i++)
		users[i] = &ucount[i];
	int skip_until = -1; /* calls of a chain already emitted as a loop */
	/* every pointer is known before any kernel: a call writes its results
	 * into the storage of the OP_RESULT nodes that follow it */
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		if (n->op == OP_CALL && i > skip_until) {
			int pos, len = call_chain(F, i, &pos, users);
			if (len >= 3) {
				emit_chain(F, i, len, pos);
				/* the chain's last call is emitted as usual below */
				int seen = 0;
				for (int j = i; j < g->nnodes; j++)
					if (g->nodes[j]->op == OP_CALL && ++seen == len) {
						skip_until = j - 1;
						break;
					}
			}
		}
		if (n->op == OP_CALL && i <= skip_until)
			continue;
		if (pl->fused_into[i] >= 0 || pl->ew_into[i] >= 0 || pl->attn[i] == -2 || pl->conv_pool[i] == -2)
			continue; /* applied by its matmul's tiles, inline by its reader, by its attention or its pooling */
		LLVMValueRef t0 = own_kernel(F, n) ? kp_begin(F) : NULL;
		if (pl->attn[i] >= 0 || pl->conv_pool[i] >= 0) {
			if (pl->attn[i] >= 0)
				k_attention(F, n);
			else
				k_conv2d_pool(F, g->nodes[pl->conv_pool[i]], n);
			if (t0)
				kp_end(F, n, t0);
			continue;
		}
		switch (n->op) {
		case OP_INPUT: case OP_PARAM: case OP_RESHAPE: case OP_RESULT: case OP_STATE:
			break;
		case OP_STORE: k_store(F, n); break;
		case OP_CONST: case OP_FULL: case OP_ARANGE:
			k_fill(F, n);
			break;
		case OP_NEG: case OP_NOT: case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_TANH:
		case OP_SIGMOID: case OP_RELU: case OP_GELU: case OP_GELU_TANH: case OP_SILU: case OP_ERF:
		case OP_ABS: case OP_SIN: case OP_COS: case OP_CAST: case OP_ROUND_BF16:
		case OP_FLOOR: case OP_CEIL: case OP_ROUND: case OP_FMOD: case OP_ASIN: case OP_ACOS: case OP_ATAN:
		case OP_HARDSWISH:
		case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MOD: case OP_POW: case OP_MAX:
		case OP_MIN: case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE:
		case OP_AND: case OP_OR: case OP_WHERE:
			kernel(F, n, k_elementwise);
			break;
		case OP_MATMUL: k_matmul(F, n); break;
		case OP_SUM: case OP_MEAN: case OP_AMAX: case OP_AMIN: case OP_PROD: k_reduce(F, n); break;
		case OP_ARGMAX: k_argmax(F, n); break;
		case OP_SOFTMAX: case OP_LOG_SOFTMAX: kernel(F, n, k_softmax); break;
		case OP_LAYERNORM: case OP_RMSNORM: kernel(F, n, k_norm); break;
		case OP_TRANSPOSE:
			if (!virtual_transpose(g, n))
				kernel(F, n, k_transpose);
			break;
		case OP_CONCAT: k_concat(F, n); break;
		case OP_SLICE:
			if (!virtual_slice(g, n))
				kernel(F, n, k_slice);
			break;
		case OP_EXPAND: k_expand(F, n); break;
		case OP_GATHER: k_gather(F, n); break;
		case OP_CAUSAL_MASK: kernel(F, n, k_causal_mask); break;
		case OP_CONV2D:
			if (!k_conv2d_dw_try(F, n) && !k_conv2d_winograd(F, n) && !k_conv2d_lanes_try(F, n))
				k_conv2d(F, n);
			break;
		case OP_CONV_TRANSPOSE2D: k_conv_transpose2d(F, n); break;
		case OP_RESIZE_NEAREST: case OP_RESIZE_BILINEAR: kernel(F, n, k_resize); break;
		case OP_MAXPOOL2D: case OP_AVGPOOL2D: case OP_GLOBAL_AVGPOOL2D: k_pool(F, n); break;
		case OP_CALL:
			if (!n->a[2]) /* an alternative is called by the call it stands in for */
				emit_call(F, n);
			break;
		case OP_TAKE_ALONG: k_take_along(F, n); break;
		case OP_TOPK: case OP_TOPK_MIN: k_topk(F, n); break;
		case OP_CUMSUM: k_cumsum(F, n); break;
		case OP_GROUPNORM: kernel(F, n, k_group_norm); break;
		case OP_COUNT: ice("emit: bad op");
		}
		if (t0)
			kp_end(F, n, t0);
	}
	/* results that are inputs, params, reshapes of them, or repeated */
	for (int j = 0; j < g->noutputs; j++) {
		if (!pl->copy_out[j])
			continue;
		Node *o = g->outputs[j];
		LLVMValueRef bytes = imul(G, numelv(F, o), ci64(G, dtype_size(o->dtype)));
		memcpy_bytes(F, buf_ptr(F, g->ninputs + j), nptr(F, o), bytes);
	}
	llvm.LLVMBuildRet(B, ci32(G, 0));
	free(users);
	free(ucount);
	free(F->ptr);
}

LLVMValueRef emit_function(Gen *G, Graph *g, Variant *v, const char *name, int internal)
{
	Fn F = {.gen = G, .g = g, .v = v};
	F.plan = plan_of(G, g, v);
	F.fn = llvm.LLVMAddFunction(G->M, name, G->fn_t);
	if (internal)
		llvm.LLVMSetLinkage(F.fn, LLVMInternalLinkage);
	F.ctx = llvm.LLVMGetParam(F.fn, 0);
	F.bufs = llvm.LLVMGetParam(F.fn, 1);
	F.dims = (v && v->ndyn) || g->nbasis ? llvm.LLVMGetParam(F.fn, 2) : NULL;
	F.ws = llvm.LLVMGetParam(F.fn, 3);
	fn_attrs(G, F.fn, v);
	LLVMBasicBlockRef saved = llvm.LLVMGetInsertBlock(G->B);
	F.entry = llvm.LLVMAppendBasicBlockInContext(G->C, F.fn, "entry");
	LLVMBasicBlockRef start = llvm.LLVMAppendBasicBlockInContext(G->C, F.fn, "start");
	llvm.LLVMPositionBuilderAtEnd(G->B, F.entry);
	llvm.LLVMBuildBr(G->B, start);
	llvm.LLVMPositionBuilderAtEnd(G->B, start);
	/* allocas are put before the branch of the entry block */
	emit_graph_body(&F);
	if (saved)
		llvm.LLVMPositionBuilderAtEnd(G->B, saved);
	return F.fn;
}

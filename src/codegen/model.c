/* model.c - the model module: the entry points, the param table, the
 * dispatch table of variants, the descriptor handed to nestrt_model_new and
 * NAME_new/free/workspace_size; and the weights embedded as an object of
 * their own (--embed-weights). */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

/* ---- the state an entry reads and writes, in order (checked at run time:
 * a state read before it was written is an error) ---- */

typedef struct Access {
	int state, write, rank;
	Affine st[MAX_RANK], sz[MAX_RANK];
} Access;

/* The state that node x of g stands for, or -1: map gives, per input of a
 * region graph, the state its call binds. */
static int state_of(Node *x, const int *map)
{
	while (x->op == OP_RESHAPE)
		x = x->in[0];
	if (x->op == OP_STATE)
		return (int)x->a[0];
	if (x->op == OP_INPUT && x->a[1] == 1 && map)
		return map[x->a[0]];
	return -1;
}

static void add_access(Vec *out, Graph *g, Node *n, int state, int write, Program *p)
{
	Access *a = xcalloc(1, sizeof *a);
	a->state = state;
	a->write = write;
	a->rank = p->states[state].rank;
	for (int k = 0; k < a->rank; k++) {
		if (n) {
			a->st[k] = field_form(g, n, 16 + k);
			a->sz[k] = field_form(g, n, k);
		} else {
			a->sz[k].c0 = p->states[state].shape[k]; /* the whole state */
		}
	}
	vec_push(out, a);
}

static void collect_accesses(Program *p, Graph *g, const int *map, Vec *out, int depth)
{
	for (int i = 0; i < g->nnodes && depth < 64; i++) {
		Node *n = g->nodes[i];
		if (n->op == OP_CALL && n->a[2])
			continue; /* a specialised alternative: the same reads and writes as its call */
		if (n->op == OP_CALL) {
			int *cm = xcalloc((size_t)n->nin + 1, sizeof(int));
			for (int k = 0; k < n->nin; k++)
				cm[k] = state_of(n->in[k], map);
			collect_accesses(p, n->callee, cm, out, depth + 1);
			free(cm);
			continue;
		}
		if (n->op == OP_RESHAPE)
			continue; /* its readers read the state */
		for (int k = 0; k < n->nin; k++) {
			int s = state_of(n->in[k], map);
			if (s < 0)
				continue;
			if (n->op == OP_STORE && k == 0)
				add_access(out, g, n, s, 1, p);
			else if (n->op == OP_SLICE && n->in[0]->op != OP_RESHAPE)
				add_access(out, g, n, s, 0, p);
			else
				add_access(out, g, NULL, s, 0, p);
		}
	}
}

/* The model module: param table, dispatch table, entry points, new/free. */
void model_module(Gen *G, const char *name, LLVMValueRef *variant_fns, int64_t ws_static, int64_t ws_own)
{
	Program *p = G->p;
	LLVMBuilderRef B = G->B;
	/* the entry graphs */
	LLVMValueRef *entry_fns = xcalloc((size_t)p->nentries + 1, sizeof(LLVMValueRef));
	for (int e = 0; e < p->nentries; e++) {
		char fname[256];
		snprintf(fname, sizeof fname, "%s__entry_%s", name, p->entries[e].name);
		G->kp_slot = -1;
		G->kp_owner = p->entries[e].name;
		entry_fns[e] = emit_function(G, p->entries[e].g, NULL, fname, 1);
	}
	/* param table: struct nestrt_param { const char *name; int dtype; int rank; int64_t shape[8]; } */
	LLVMTypeRef shape_t = llvm.LLVMArrayType(G->i64, MAX_RANK);
	LLVMTypeRef pf[4] = {G->i8p, G->i32, G->i32, shape_t};
	LLVMTypeRef param_t = llvm.LLVMStructTypeInContext(G->C, pf, 4, 0);
	LLVMValueRef *pvals = xcalloc((size_t)p->nparams + 1, sizeof(LLVMValueRef));
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		LLVMValueRef str = cstr(G, pi->name);
		LLVMValueRef dims[MAX_RANK];
		for (int k = 0; k < MAX_RANK; k++)
			dims[k] = ci64(G, k < pi->rank ? pi->shape[k] : 0);
		LLVMValueRef f[4] = {str, ci32(G, pi->dtype), ci32(G, pi->rank), llvm.LLVMConstArray(G->i64, dims, MAX_RANK)};
		pvals[i] = llvm.LLVMConstNamedStruct(param_t, f, 4);
	}
	LLVMTypeRef ptab_t = llvm.LLVMArrayType(param_t, (unsigned)p->nparams);
	LLVMValueRef ptab = llvm.LLVMAddGlobal(G->M, ptab_t, "params");
	llvm.LLVMSetInitializer(ptab, llvm.LLVMConstArray(param_t, pvals, (unsigned)p->nparams));
	llvm.LLVMSetGlobalConstant(ptab, 1);
	llvm.LLVMSetLinkage(ptab, LLVMPrivateLinkage);
	free(pvals);
	/* dispatch table: struct nestrt_slot { const char *name; nestrt_fn fn; } */
	LLVMTypeRef fnp = llvm.LLVMPointerType(G->fn_t, 0);
	LLVMTypeRef sf[2] = {G->i8p, fnp};
	LLVMTypeRef slot_t = llvm.LLVMStructTypeInContext(G->C, sf, 2, 0);
	int nv = G->rt->variants.n;
	LLVMValueRef *svals = xcalloc((size_t)nv + 1, sizeof(LLVMValueRef));
	for (int i = 0; i < nv; i++) {
		Variant *v = G->rt->variants.v[i];
		char vname[256], sym[300];
		/* a specialised variant's name says when it runs (profiles print it) */
		const char *when = v->g->key ? strstr(v->g->key, "; when ") : NULL;
		snprintf(vname, sizeof vname, "%s.%d%s%s%s", v->region, v->k, when ? " [" : "", when ? when + 2 : "", when ? "]" : "");
		snprintf(sym, sizeof sym, "%s__%s_%d", name, v->region, v->k);
		LLVMValueRef f = variant_fns && variant_fns[i] ? variant_fns[i] : get_fn(G, sym, G->fn_t);
		LLVMValueRef fv[2] = {cstr(G, vname), f};
		svals[i] = llvm.LLVMConstNamedStruct(slot_t, fv, 2);
	}
	LLVMTypeRef stab_t = llvm.LLVMArrayType(slot_t, (unsigned)nv);
	LLVMValueRef stab = llvm.LLVMAddGlobal(G->M, stab_t, "slots");
	llvm.LLVMSetInitializer(stab, llvm.LLVMConstArray(slot_t, svals, (unsigned)nv));
	llvm.LLVMSetGlobalConstant(stab, 1);
	llvm.LLVMSetLinkage(stab, LLVMPrivateLinkage);
	free(svals);
	/* the model descriptor handed to nestrt_model_new */
	/* each variant's object says how much workspace it needs (its callees
	 * included), so that editing a region does not change this object */
	LLVMValueRef *needs = xcalloc((size_t)nv + 1, sizeof(LLVMValueRef));
	for (int i = 0; i < nv; i++) {
		Variant *v = G->rt->variants.v[i];
		char sym[300];
		snprintf(sym, sizeof sym, "%s__%s_%d_ws", name, v->region, v->k);
		LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, G->i64, sym);
		needs[i] = llvm.LLVMConstPointerCast(gv, G->i8p);
	}
	LLVMTypeRef ntab_t = llvm.LLVMArrayType(G->i8p, (unsigned)nv);
	LLVMValueRef ntab = llvm.LLVMAddGlobal(G->M, ntab_t, "needs");
	llvm.LLVMSetInitializer(ntab, llvm.LLVMConstArray(G->i8p, needs, (unsigned)nv));
	llvm.LLVMSetGlobalConstant(ntab, 1);
	llvm.LLVMSetLinkage(ntab, LLVMPrivateLinkage);
	free(needs);
	/* the pack plans (matmul.c): each variant's in its own object, like its
	 * workspace, and the entry points' own here */
	LLVMValueRef *plans = xcalloc((size_t)nv + 1, sizeof(LLVMValueRef));
	for (int i = 0; i < nv; i++) {
		Variant *v = G->rt->variants.v[i];
		char sym[300];
		snprintf(sym, sizeof sym, "%s__%s_%d_packs", name, v->region, v->k);
		LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i64, 0), sym);
		plans[i] = llvm.LLVMConstPointerCast(gv, G->i8p);
	}
	LLVMValueRef pktab = llvm.LLVMAddGlobal(G->M, ntab_t, "plans");
	llvm.LLVMSetInitializer(pktab, llvm.LLVMConstArray(G->i8p, plans, (unsigned)nv));
	llvm.LLVMSetGlobalConstant(pktab, 1);
	llvm.LLVMSetLinkage(pktab, LLVMPrivateLinkage);
	free(plans);
	int64_t *eplan = NULL;
	int eplen = 0;
	for (int e = 0; e < p->nentries; e++)
		pack_plan(G, p->entries[e].g, NULL, 1, &eplan, &eplen);
	LLVMValueRef eplan_gv = pack_plan_global(G, eplan, eplen, "entry_packs", 1);
	free(eplan);
	/* the params' weight formats (--weights-format), NULL when all are f32 */
	LLVMValueRef fmts = llvm.LLVMConstPointerNull(G->i8p);
	if (wformat_mask(p)) {
		LLVMValueRef *fv = xcalloc((size_t)p->nparams + 1, sizeof(LLVMValueRef));
		for (int i = 0; i < p->nparams; i++)
			fv[i] = ci32(G, p->params[i].wformat | p->params[i].waxis << 8 |
			                    (G->dot && wformat_dot(p->params[i].wformat) ? 1 << 16 : 0)); /* nestrt.h's NESTRT_FMT_DOT_BIT */
		LLVMTypeRef ft = llvm.LLVMArrayType(G->i32, (unsigned)p->nparams);
		LLVMValueRef fg = llvm.LLVMAddGlobal(G->M, ft, "formats");
		llvm.LLVMSetInitializer(fg, llvm.LLVMConstArray(G->i32, fv, (unsigned)p->nparams));
		llvm.LLVMSetGlobalConstant(fg, 1);
		llvm.LLVMSetLinkage(fg, LLVMPrivateLinkage);
		fmts = llvm.LLVMConstPointerCast(fg, G->i8p);
		free(fv);
	}
	LLVMTypeRef df[12] = {G->i8p, G->i8p, G->i32, G->i8p, G->i32, G->i64, G->i8p, G->i8p, G->i64, G->i8p, G->i8p, G->i8p};
	LLVMTypeRef desc_t = llvm.LLVMStructTypeInContext(G->C, df, 12, 0);
	LLVMValueRef z2[2] = {ci32(G, 0), ci32(G, 0)};
	LLVMValueRef dv[12] = {
		cstr(G, name),
		llvm.LLVMConstPointerCast(p->nparams ? llvm.LLVMConstGEP2(ptab_t, ptab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		ci32(G, p->nparams),
		llvm.LLVMConstPointerCast(nv ? llvm.LLVMConstGEP2(stab_t, stab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		ci32(G, nv),
		ci64(G, ws_static),
		cstr(G, NESTC_VERSION),
		llvm.LLVMConstPointerCast(nv ? llvm.LLVMConstGEP2(ntab_t, ntab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		ci64(G, ws_own),
		llvm.LLVMConstPointerCast(nv ? llvm.LLVMConstGEP2(ntab_t, pktab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		llvm.LLVMConstPointerCast(eplan_gv, G->i8p),
		fmts,
	};
	char dname[256];
	snprintf(dname, sizeof dname, "%s__desc", name);
	LLVMValueRef desc = llvm.LLVMAddGlobal(G->M, desc_t, dname);
	llvm.LLVMSetInitializer(desc, llvm.LLVMConstNamedStruct(desc_t, dv, 12));
	llvm.LLVMSetGlobalConstant(desc, 1);
	llvm.LLVMSetLinkage(desc, LLVMPrivateLinkage);
	LLVMValueRef desc8 = llvm.LLVMConstPointerCast(desc, G->i8p);

	/* NAME_new(w, err) = nestrt_model_new(&desc, w, err) */
	char fname[300];
	LLVMTypeRef nt[2] = {G->i8p, G->i8p};
	LLVMTypeRef new_t = llvm.LLVMFunctionType(G->i8p, nt, 2, 0);
	snprintf(fname, sizeof fname, "%s_new", name);
	LLVMValueRef fnew = llvm.LLVMAddFunction(G->M, fname, new_t);
	llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, fnew, "entry"));
	LLVMTypeRef mt[3] = {G->i8p, G->i8p, G->i8p};
	LLVMValueRef mv[3] = {desc8, llvm.LLVMGetParam(fnew, 0), llvm.LLVMGetParam(fnew, 1)};
	llvm.LLVMBuildRet(B, call(G, "nestrt_model_new", G->i8p, mt, mv, 3));

	LLVMTypeRef free_t = llvm.LLVMFunctionType(llvm.LLVMVoidTypeInContext(G->C), &G->i8p, 1, 0);
	snprintf(fname, sizeof fname, "%s_free", name);
	LLVMValueRef ffree = llvm.LLVMAddFunction(G->M, fname, free_t);
	llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, ffree, "entry"));
	LLVMValueRef m0 = llvm.LLVMGetParam(ffree, 0);
	call(G, "nestrt_model_free", llvm.LLVMVoidTypeInContext(G->C), &G->i8p, &m0, 1);
	llvm.LLVMBuildRetVoid(B);

	LLVMTypeRef ws_t = llvm.LLVMFunctionType(G->i64, NULL, 0, 0);
	snprintf(fname, sizeof fname, "%s_workspace_size", name);
	LLVMValueRef fws = llvm.LLVMAddFunction(G->M, fname, ws_t);
	llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, fws, "entry"));
	llvm.LLVMBuildRet(B, call(G, "nestrt_model_workspace_size", G->i64, &G->i8p, &desc8, 1));

	/* NAME_seq_new/reset/free: the state per sequence */
	if (p->nstates) {
		LLVMValueRef *sz = xcalloc((size_t)p->nstates, sizeof(LLVMValueRef));
		for (int i = 0; i < p->nstates; i++)
			sz[i] = ci64(G, shape_numel(p->states[i].rank, p->states[i].shape) * dtype_size(p->states[i].dtype));
		LLVMTypeRef szt = llvm.LLVMArrayType(G->i64, (unsigned)p->nstates);
		LLVMValueRef szg = llvm.LLVMAddGlobal(G->M, szt, "state_bytes");
		llvm.LLVMSetInitializer(szg, llvm.LLVMConstArray(G->i64, sz, (unsigned)p->nstates));
		llvm.LLVMSetGlobalConstant(szg, 1);
		llvm.LLVMSetLinkage(szg, LLVMPrivateLinkage);
		free(sz);
		LLVMTypeRef snt[2] = {G->i8p, G->i8p};
		snprintf(fname, sizeof fname, "%s_seq_new", name);
		LLVMValueRef fs = llvm.LLVMAddFunction(G->M, fname, llvm.LLVMFunctionType(G->i8p, snt, 2, 0));
		llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, fs, "entry"));
		LLVMTypeRef qt[4] = {G->i8p, G->i64p, G->i32, G->i8p};
		LLVMValueRef qv[4] = {llvm.LLVMGetParam(fs, 0), llvm.LLVMBuildGEP2(B, szt, szg, z2, 2, ""), ci32(G, p->nstates),
		                      llvm.LLVMGetParam(fs, 1)};
		llvm.LLVMBuildRet(B, call(G, "nestrt_seq_new", G->i8p, qt, qv, 4));
		const char *what[2] = {"reset", "free"};
		for (int k = 0; k < 2; k++) {
			snprintf(fname, sizeof fname, "%s_seq_%s", name, what[k]);
			LLVMValueRef f = llvm.LLVMAddFunction(G->M, fname, free_t);
			llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, f, "entry"));
			LLVMValueRef s0 = llvm.LLVMGetParam(f, 0);
			char rn[64];
			snprintf(rn, sizeof rn, "nestrt_seq_%s", what[k]);
			call(G, rn, llvm.LLVMVoidTypeInContext(G->C), &G->i8p, &s0, 1);
			llvm.LLVMBuildRetVoid(B);
		}
	}

	/* NAME_ENTRY(m, inputs..., outputs...) = nestrt_model_run(m, entry, bufs);
	 * with run-time dims or state, NAME_ENTRY(m, [seq,] dims..., inputs...,
	 * outputs...) = nestrt_model_call_dims(...) */
	for (int e = 0; e < p->nentries; e++) {
		Entry *en = &p->entries[e];
		Graph *g = en->g;
		int n = g->ninputs + g->noutputs;
		int ext = en->ndims > 0 || en->uses_state;
		int first = 1 + (en->uses_state ? 1 : 0) + en->ndims; /* params before the buffers */
		LLVMTypeRef *at = xcalloc((size_t)(n + first) + 1, sizeof(LLVMTypeRef));
		for (int i = 0; i < n + first; i++)
			at[i] = G->i8p;
		for (int j = 0; j < en->ndims; j++)
			at[first - en->ndims + j] = G->i64;
		LLVMTypeRef et = llvm.LLVMFunctionType(G->i32, at, (unsigned)(n + first), 0);
		snprintf(fname, sizeof fname, "%s_%s", name, en->name);
		LLVMValueRef f = llvm.LLVMAddFunction(G->M, fname, et);
		llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, f, "entry"));
		LLVMTypeRef arr_t = llvm.LLVMArrayType(G->i8p, (unsigned)(n ? n : 1));
		LLVMValueRef arr = llvm.LLVMBuildAlloca(B, arr_t, "bufs");
		for (int i = 0; i < n; i++) {
			LLVMValueRef idx[2] = {ci32(G, 0), ci32(G, i)};
			llvm.LLVMBuildStore(B, llvm.LLVMGetParam(f, (unsigned)(i + first)), llvm.LLVMBuildGEP2(B, arr_t, arr, idx, 2, ""));
		}
		LLVMValueRef bufs = llvm.LLVMBuildGEP2(B, arr_t, arr, z2, 2, "");
		if (!ext) {
			/* nestrt_model_call checks the model and every pointer for NULL */
			LLVMTypeRef rt[5] = {G->i8p, fnp, G->i8pp, G->i32, G->i8p};
			LLVMValueRef rv[5] = {llvm.LLVMGetParam(f, 0), entry_fns[e], bufs, ci32(G, n), cstr(G, fname)};
			llvm.LLVMBuildRet(B, call(G, "nestrt_model_call", G->i32, rt, rv, 5));
			free(at);
			continue;
		}
		/* the dims, their names and the conditions checked before the call */
		int nd = en->ndims ? en->ndims : 1;
		LLVMTypeRef dt = llvm.LLVMArrayType(G->i64, (unsigned)nd);
		LLVMValueRef darr = llvm.LLVMBuildAlloca(B, dt, "dims");
		LLVMValueRef *names = xcalloc((size_t)nd, sizeof(LLVMValueRef));
		for (int j = 0; j < en->ndims; j++) {
			LLVMValueRef idx[2] = {ci32(G, 0), ci32(G, j)};
			llvm.LLVMBuildStore(B, llvm.LLVMGetParam(f, (unsigned)(first - en->ndims + j)),
			                    llvm.LLVMBuildGEP2(B, dt, darr, idx, 2, ""));
			names[j] = cstr(G, en->dim_names[j]);
		}
		if (!en->ndims)
			names[0] = llvm.LLVMConstPointerNull(G->i8p);
		LLVMTypeRef nt_t = llvm.LLVMArrayType(G->i8p, (unsigned)nd);
		LLVMValueRef ng = llvm.LLVMAddGlobal(G->M, nt_t, "dim_names");
		llvm.LLVMSetInitializer(ng, llvm.LLVMConstArray(G->i8p, names, (unsigned)nd));
		llvm.LLVMSetGlobalConstant(ng, 1);
		llvm.LLVMSetLinkage(ng, LLVMPrivateLinkage);
		free(names);
		LLVMTypeRef cf[4] = {G->i64, llvm.LLVMArrayType(G->i64, 4), G->i64, G->i8p};
		LLVMTypeRef chk_t = llvm.LLVMStructTypeInContext(G->C, cf, 4, 0);
		int nc = en->nchecks ? en->nchecks : 1;
		LLVMValueRef *cv = xcalloc((size_t)nc, sizeof(LLVMValueRef));
		for (int k = 0; k < nc; k++) {
			DimCheck *c = k < en->nchecks ? &en->checks[k] : NULL;
			LLVMValueRef co[4];
			for (int j = 0; j < 4; j++)
				co[j] = ci64(G, c && j < MAX_DIMS ? c->f.coef[j] : 0);
			LLVMValueRef fv[4] = {ci64(G, c ? c->f.c0 : 0), llvm.LLVMConstArray(G->i64, co, 4), ci64(G, c ? c->eq : 0),
			                      cstr(G, c ? c->text : "")};
			cv[k] = llvm.LLVMConstNamedStruct(chk_t, fv, 4);
		}
		LLVMTypeRef ct_t = llvm.LLVMArrayType(chk_t, (unsigned)nc);
		LLVMValueRef cg = llvm.LLVMAddGlobal(G->M, ct_t, "dim_checks");
		llvm.LLVMSetInitializer(cg, llvm.LLVMConstArray(chk_t, cv, (unsigned)nc));
		llvm.LLVMSetGlobalConstant(cg, 1);
		llvm.LLVMSetLinkage(cg, LLVMPrivateLinkage);
		free(cv);
		/* the state it reads and writes, in order: struct nestrt_access
		 * { i64 state, write, rank; i64 st[8][5], sz[8][5]; } (c0, coef[4]) */
		Vec acc = {0};
		collect_accesses(p, g, NULL, &acc, 0);
		LLVMTypeRef aff_t = llvm.LLVMArrayType(G->i64, 5);
		LLVMTypeRef box_t = llvm.LLVMArrayType(aff_t, MAX_RANK);
		LLVMTypeRef af[6] = {G->i64, G->i64, G->i64, box_t, box_t, G->i8p};
		LLVMTypeRef acc_t = llvm.LLVMStructTypeInContext(G->C, af, 6, 0);
		int na = acc.n ? acc.n : 1;
		LLVMValueRef *avs = xcalloc((size_t)na, sizeof(LLVMValueRef));
		for (int k = 0; k < na; k++) {
			Access *x = k < acc.n ? acc.v[k] : NULL;
			LLVMValueRef boxes[2];
			for (int w = 0; w < 2; w++) {
				LLVMValueRef affs[MAX_RANK];
				for (int r = 0; r < MAX_RANK; r++) {
					Affine *fa = x && r < x->rank ? (w ? &x->sz[r] : &x->st[r]) : NULL;
					LLVMValueRef e5[5];
					e5[0] = ci64(G, fa ? fa->c0 : 0);
					for (int j = 0; j < 4; j++)
						e5[1 + j] = ci64(G, fa && j < MAX_DIMS ? fa->coef[j] : 0);
					affs[r] = llvm.LLVMConstArray(G->i64, e5, 5);
				}
				boxes[w] = llvm.LLVMConstArray(aff_t, affs, MAX_RANK);
			}
			LLVMValueRef fv[6] = {ci64(G, x ? x->state : 0), ci64(G, x ? x->write : 0), ci64(G, x ? x->rank : 0),
			                      boxes[0], boxes[1], cstr(G, x ? p->states[x->state].name : "")};
			avs[k] = llvm.LLVMConstNamedStruct(acc_t, fv, 6);
		}
		LLVMTypeRef at_t = llvm.LLVMArrayType(acc_t, (unsigned)na);
		LLVMValueRef ag = llvm.LLVMAddGlobal(G->M, at_t, "state_access");
		llvm.LLVMSetInitializer(ag, llvm.LLVMConstArray(acc_t, avs, (unsigned)na));
		llvm.LLVMSetGlobalConstant(ag, 1);
		llvm.LLVMSetLinkage(ag, LLVMPrivateLinkage);
		free(avs);
		int nacc = acc.n;
		for (int k = 0; k < acc.n; k++)
			free(acc.v[k]);
		free(acc.v);
		LLVMTypeRef rt[14] = {G->i8p, G->i32, G->i8p, fnp, G->i8pp, G->i32, G->i64p, G->i32, G->i8p, G->i8p, G->i32,
		                      G->i8p, G->i32, G->i8p};
		LLVMValueRef rv[14] = {llvm.LLVMGetParam(f, 0), ci32(G, en->uses_state),
		                       en->uses_state ? llvm.LLVMGetParam(f, 1) : llvm.LLVMConstPointerNull(G->i8p),
		                       entry_fns[e], bufs, ci32(G, n),
		                       llvm.LLVMBuildGEP2(B, dt, darr, z2, 2, ""), ci32(G, en->ndims),
		                       llvm.LLVMConstPointerCast(ng, G->i8p), llvm.LLVMConstPointerCast(cg, G->i8p),
		                       ci32(G, en->nchecks), llvm.LLVMConstPointerCast(ag, G->i8p), ci32(G, nacc), cstr(G, fname)};
		llvm.LLVMBuildRet(B, call(G, "nestrt_model_call_dims", G->i32, rt, rv, 14));
		free(at);
	}
	free(entry_fns);
}

/* The weights as read-only data in an object of their own: the image of
 * the tensors kept as they are, and (--embed-weights) the matrices nestc
 * packed, each 64-byte aligned, with their table (nestrt_prepacked:
 * name, k, n, wide, flags, data). */
void weights_module(Gen *G, const char *name, const void *image, size_t len, const Prepacked *pk, int npk)
{
	char sym[300];
	snprintf(sym, sizeof sym, "%s__weights", name);
	LLVMValueRef init = llvm.LLVMConstStringInContext(G->C, image, (unsigned)len, 1);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8, (unsigned)len), sym);
	llvm.LLVMSetInitializer(gv, init);
	llvm.LLVMSetGlobalConstant(gv, 1);
	llvm.LLVMSetAlignment(gv, 64);
	snprintf(sym, sizeof sym, "%s__weights_size", name);
	LLVMValueRef sz = llvm.LLVMAddGlobal(G->M, G->i64, sym);
	llvm.LLVMSetInitializer(sz, ci64(G, (int64_t)len));
	llvm.LLVMSetGlobalConstant(sz, 1);
	LLVMTypeRef ef[6] = {G->i8p, G->i64, G->i64, G->i64, G->i32, G->i8p};
	LLVMTypeRef ent_t = llvm.LLVMStructTypeInContext(G->C, ef, 6, 0);
	LLVMValueRef *ents = xcalloc((size_t)npk + 1, sizeof *ents);
	for (int i = 0; i < npk; i++) {
		char dsym[320];
		snprintf(dsym, sizeof dsym, "%s__packed_%d", name, i);
		LLVMValueRef d = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8, (unsigned)pk[i].bytes), dsym);
		llvm.LLVMSetInitializer(d, llvm.LLVMConstStringInContext(G->C, pk[i].data, (unsigned)pk[i].bytes, 1));
		llvm.LLVMSetGlobalConstant(d, 1);
		llvm.LLVMSetAlignment(d, 64);
		llvm.LLVMSetLinkage(d, LLVMPrivateLinkage);
		LLVMValueRef v[6] = {cstr(G, pk[i].name), ci64(G, pk[i].k), ci64(G, pk[i].n), ci64(G, pk[i].wide),
		                     ci32(G, pk[i].flags), llvm.LLVMConstPointerCast(d, G->i8p)};
		ents[i] = llvm.LLVMConstNamedStruct(ent_t, v, 6);
	}
	snprintf(sym, sizeof sym, "%s__packed", name);
	LLVMValueRef tab = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(ent_t, (unsigned)npk), sym);
	llvm.LLVMSetInitializer(tab, llvm.LLVMConstArray(ent_t, ents, (unsigned)npk));
	llvm.LLVMSetGlobalConstant(tab, 1);
	free(ents);
	snprintf(sym, sizeof sym, "%s__npacked", name);
	LLVMValueRef cnt = llvm.LLVMAddGlobal(G->M, G->i32, sym);
	llvm.LLVMSetInitializer(cnt, ci32(G, npk));
	llvm.LLVMSetGlobalConstant(cnt, 1);
}

/* NAME_new_embedded(err): the model bound to the weights object. */
void embedded_new(Gen *G, const char *name)
{
	LLVMBuilderRef B = G->B;
	char sym[300];
	snprintf(sym, sizeof sym, "%s__weights", name);
	LLVMValueRef blob = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8, 0), sym);
	snprintf(sym, sizeof sym, "%s__weights_size", name);
	LLVMValueRef size = llvm.LLVMAddGlobal(G->M, G->i64, sym);
	snprintf(sym, sizeof sym, "%s__packed", name);
	LLVMValueRef packed = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8, 0), sym);
	snprintf(sym, sizeof sym, "%s__npacked", name);
	LLVMValueRef npacked = llvm.LLVMAddGlobal(G->M, G->i32, sym);
	snprintf(sym, sizeof sym, "%s__desc", name);
	LLVMValueRef desc = llvm.LLVMGetNamedGlobal(G->M, sym);
	snprintf(sym, sizeof sym, "%s_new_embedded", name);
	LLVMValueRef f = llvm.LLVMAddFunction(G->M, sym, llvm.LLVMFunctionType(G->i8p, &G->i8p, 1, 0));
	llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, f, "entry"));
	LLVMTypeRef at[6] = {G->i8p, G->i8p, G->i64, G->i8p, G->i32, G->i8p};
	LLVMValueRef av[6] = {llvm.LLVMConstPointerCast(desc, G->i8p), llvm.LLVMConstPointerCast(blob, G->i8p),
	                      llvm.LLVMBuildLoad2(B, G->i64, size, ""), llvm.LLVMConstPointerCast(packed, G->i8p),
	                      llvm.LLVMBuildLoad2(B, G->i32, npacked, ""), llvm.LLVMGetParam(f, 0)};
	llvm.LLVMBuildRet(B, call(G, "nestrt_model_new_embedded_packed", G->i8p, at, av, 6));
}

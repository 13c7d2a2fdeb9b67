/* model.c - the model module: the entry points, the param table, the
 * dispatch table of variants, the descriptor handed to nestrt_model_new and
 * NAME_new/free/workspace_size; and the weights embedded as an object of
 * their own (--embed-weights). */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

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
		snprintf(vname, sizeof vname, "%s.%d", v->region, v->k);
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
	LLVMTypeRef df[11] = {G->i8p, G->i8p, G->i32, G->i8p, G->i32, G->i64, G->i8p, G->i8p, G->i64, G->i8p, G->i8p};
	LLVMTypeRef desc_t = llvm.LLVMStructTypeInContext(G->C, df, 11, 0);
	LLVMValueRef z2[2] = {ci32(G, 0), ci32(G, 0)};
	LLVMValueRef dv[11] = {
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
	};
	char dname[256];
	snprintf(dname, sizeof dname, "%s__desc", name);
	LLVMValueRef desc = llvm.LLVMAddGlobal(G->M, desc_t, dname);
	llvm.LLVMSetInitializer(desc, llvm.LLVMConstNamedStruct(desc_t, dv, 11));
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

	/* NAME_ENTRY(m, inputs..., outputs...) = nestrt_model_run(m, entry, bufs) */
	for (int e = 0; e < p->nentries; e++) {
		Graph *g = p->entries[e].g;
		int n = g->ninputs + g->noutputs;
		LLVMTypeRef *at = xcalloc((size_t)n + 2, sizeof(LLVMTypeRef));
		for (int i = 0; i <= n; i++)
			at[i] = G->i8p;
		LLVMTypeRef et = llvm.LLVMFunctionType(G->i32, at, (unsigned)n + 1, 0);
		snprintf(fname, sizeof fname, "%s_%s", name, p->entries[e].name);
		LLVMValueRef f = llvm.LLVMAddFunction(G->M, fname, et);
		llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, f, "entry"));
		LLVMTypeRef arr_t = llvm.LLVMArrayType(G->i8p, (unsigned)(n ? n : 1));
		LLVMValueRef arr = llvm.LLVMBuildAlloca(B, arr_t, "bufs");
		for (int i = 0; i < n; i++) {
			LLVMValueRef idx[2] = {ci32(G, 0), ci32(G, i)};
			llvm.LLVMBuildStore(B, llvm.LLVMGetParam(f, (unsigned)i + 1), llvm.LLVMBuildGEP2(B, arr_t, arr, idx, 2, ""));
		}
		LLVMValueRef bufs = llvm.LLVMBuildGEP2(B, arr_t, arr, z2, 2, "");
		/* nestrt_model_call checks the model and every pointer for NULL */
		LLVMTypeRef rt[5] = {G->i8p, fnp, G->i8pp, G->i32, G->i8p};
		LLVMValueRef rv[5] = {llvm.LLVMGetParam(f, 0), entry_fns[e], bufs, ci32(G, n), cstr(G, fname)};
		llvm.LLVMBuildRet(B, call(G, "nestrt_model_call", G->i32, rt, rv, 5));
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

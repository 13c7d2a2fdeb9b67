/* build.c - `nestc build`: one module (and object) per unique region
 * variant, one for the model, the weights when embedded, and the C header.
 * Jobs run on worker threads, each with its own LLVM context, largest first;
 * objects come from the cache when it has them; the files are written through
 * temporaries and renamed only when all succeeded. Also the LLVM target
 * machine and the host's identity. */
#include "gen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

/* ---- modules, objects, files ---- */

static void gen_module_begin(Gen *G, const char *name)
{
	G->M = llvm.LLVMModuleCreateWithNameInContext(name, G->C);
	llvm.LLVMSetTarget(G->M, G->triple);
	llvm.LLVMSetDataLayout(G->M, G->layout);
	G->ninline = 0;
	G->ntask = 0;
}

static int64_t text_bytes(Gen *G, const char *data, size_t len)
{
	LLVMMemoryBufferRef mb = llvm.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len, "obj");
	char *err = NULL;
	LLVMBinaryRef bin = llvm.LLVMCreateBinary(mb, G->C, &err);
	int64_t total = 0;
	if (bin) {
		LLVMSectionIteratorRef it = llvm.LLVMObjectFileCopySectionIterator(bin);
		while (!llvm.LLVMObjectFileIsSectionIteratorAtEnd(bin, it)) {
			const char *nm = llvm.LLVMGetSectionName(it);
			if (nm && !strncmp(nm, ".text", 5))
				total += (int64_t)llvm.LLVMGetSectionSize(it);
			llvm.LLVMMoveToNextSection(it);
		}
		llvm.LLVMDisposeSectionIterator(it);
		llvm.LLVMDisposeBinary(bin);
	} else {
		llvm.LLVMDisposeMessage(err);
	}
	llvm.LLVMDisposeMemoryBuffer(mb);
	return total;
}

/* Does a variant multiply matrices whose number of rows is a run-time dim
 * (a prefill's T)? */
static int rows_field(Graph *g, int node, int field)
{
	Node *n = node >= 0 && node < g->nnodes ? g->nodes[node] : NULL;
	return n && n->op == OP_MATMUL && n->rank >= 2 && field == n->rank - 2;
}

static int runtime_rows(Variant *v)
{
	Graph *g = v->g;
	for (int k = 0; k < g->ngdyn; k++)
		if (rows_field(g, g->gdyn[k].node, g->gdyn[k].field))
			return 1;
	for (int k = 0; k < v->ndyn; k++)
		if (rows_field(g, v->dyn[k].node, v->dyn[k].field))
			return 1;
	return 0;
}

/* The kernel functions (tasks: builder.c's task_begin) the module defines. */
static int count_tasks(Gen *G)
{
	int n = 0;
	for (LLVMValueRef f = llvm.LLVMGetFirstFunction(G->M); f; f = llvm.LLVMGetNextFunction(f)) {
		size_t len;
		const char *nm = llvm.LLVMGetValueName2(f, &len);
		if (!llvm.LLVMIsDeclaration(f) && strstr(nm, ".task."))
			n++;
	}
	return n;
}

static void run_passes(Gen *G, const char *passes, LLVMPassBuilderOptionsRef po)
{
	LLVMErrorRef e = llvm.LLVMRunPasses(G->M, passes, G->tm, po);
	if (e) {
		char *m = llvm.LLVMGetErrorMessage(e);
		ice("LLVMRunPasses(%s): %s", passes, m);
	}
}

/* ---- the model object in parts ---- */

/* Instructions of a defined function: what the parts are balanced on. */
static int64_t fn_size(LLVMValueRef f)
{
	int64_t n = 0;
	for (LLVMBasicBlockRef b = llvm.LLVMGetFirstBasicBlock(f); b; b = llvm.LLVMGetNextBasicBlock(b))
		for (LLVMValueRef i = llvm.LLVMGetFirstInstruction(b); i; i = llvm.LLVMGetNextInstruction(i))
			n++;
	return n;
}

static int is_task(LLVMValueRef f)
{
	size_t len;
	return strstr(llvm.LLVMGetValueName2(f, &len), ".task.") != NULL;
}

/* f without its body: a declaration of the same name takes its uses. */
static void drop_body(Gen *G, LLVMValueRef f, int hidden)
{
	size_t len;
	const char *nm = llvm.LLVMGetValueName2(f, &len);
	char *name = xasprintf("%.*s", (int)len, nm);
	LLVMValueRef d = llvm.LLVMAddFunction(G->M, "", llvm.LLVMGlobalGetValueType(f));
	llvm.LLVMReplaceAllUsesWith(f, d);
	llvm.LLVMDeleteFunction(f);
	llvm.LLVMSetValueName2(d, name, len);
	if (hidden)
		llvm.LLVMSetVisibility(d, LLVMHiddenVisibility);
	free(name);
}

/* A global constant of this module, hidden, the marker of part k. */
static LLVMValueRef part_marker(Gen *G, int k)
{
	char sym[320];
	snprintf(sym, sizeof sym, "%s__model_part_%d", G->model, k);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, G->i8, sym);
	llvm.LLVMSetVisibility(gv, LLVMHiddenVisibility);
	return gv;
}

/* Every part of the model is the same module up to here (the same graph,
 * emitted and merged the same way), so each can work out alone which
 * functions are its own. The entry points and their helpers are part 0's;
 * the kernels (task functions), largest first, go to the part with the
 * fewest instructions so far. A kernel becomes a hidden global of the
 * model's name, defined in its part and declared in the others; part 0
 * refers to each other part's marker, so that a link from an archive takes
 * every part. globaldce then drops what this part does not use. */
static void split_module(Gen *G)
{
	int part = G->part, nparts = G->nparts, nf = 0, nt = 0;
	for (LLVMValueRef f = llvm.LLVMGetFirstFunction(G->M); f; f = llvm.LLVMGetNextFunction(f))
		nf++;
	LLVMValueRef *fs = xcalloc((size_t)nf + 1, sizeof *fs);
	int64_t *cost = xcalloc((size_t)nf + 1, sizeof *cost), load[MODEL_PARTS_MAX] = {0};
	int *owner = xcalloc((size_t)nf + 1, sizeof *owner), *tasks = xcalloc((size_t)nf + 1, sizeof *tasks);
	nf = 0;
	for (LLVMValueRef f = llvm.LLVMGetFirstFunction(G->M); f; f = llvm.LLVMGetNextFunction(f)) {
		if (llvm.LLVMIsDeclaration(f))
			continue;
		fs[nf] = f;
		cost[nf] = fn_size(f);
		if (is_task(f))
			tasks[nt++] = nf;
		else
			load[0] += cost[nf];
		nf++;
	}
	for (int a = 1; a < nt; a++) /* stable: equal sizes keep the module's order */
		for (int b = a; b > 0 && cost[tasks[b - 1]] < cost[tasks[b]]; b--) {
			int t = tasks[b];
			tasks[b] = tasks[b - 1];
			tasks[b - 1] = t;
		}
	for (int t = 0; t < nt; t++) {
		int best = 0;
		for (int k = 1; k < nparts; k++)
			if (load[k] < load[best])
				best = k;
		owner[tasks[t]] = best;
		load[best] += cost[tasks[t]];
	}
	for (int i = 0; i < nf; i++) {
		if (is_task(fs[i])) {
			size_t len;
			const char *nm = llvm.LLVMGetValueName2(fs[i], &len);
			char *name = xasprintf("%s__%.*s", G->model, (int)len, nm);
			llvm.LLVMSetValueName2(fs[i], name, strlen(name));
			free(name);
			llvm.LLVMSetLinkage(fs[i], LLVMExternalLinkage);
			llvm.LLVMSetVisibility(fs[i], LLVMHiddenVisibility);
			if (owner[i] != part)
				drop_body(G, fs[i], 1);
		} else if (part > 0) {
			LLVMLinkage l = llvm.LLVMGetLinkage(fs[i]);
			if (l != LLVMInternalLinkage && l != LLVMPrivateLinkage)
				drop_body(G, fs[i], 0);
		}
	}
	if (part > 0) {
		/* the model's tables are part 0's */
		for (LLVMValueRef g = llvm.LLVMGetFirstGlobal(G->M); g; g = llvm.LLVMGetNextGlobal(g)) {
			LLVMLinkage l = llvm.LLVMGetLinkage(g);
			if (l != LLVMInternalLinkage && l != LLVMPrivateLinkage)
				llvm.LLVMSetInitializer(g, NULL);
		}
		LLVMValueRef m = part_marker(G, part);
		llvm.LLVMSetInitializer(m, llvm.LLVMConstInt(G->i8, (unsigned long long)part, 0));
		llvm.LLVMSetGlobalConstant(m, 1);
	} else {
		LLVMValueRef refs[MODEL_PARTS_MAX];
		for (int k = 1; k < nparts; k++)
			refs[k - 1] = part_marker(G, k);
		char sym[320];
		snprintf(sym, sizeof sym, "%s__model_parts", G->model);
		LLVMValueRef all = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8p, (unsigned)(nparts - 1)), sym);
		llvm.LLVMSetInitializer(all, llvm.LLVMConstArray(G->i8p, refs, (unsigned)(nparts - 1)));
		llvm.LLVMSetGlobalConstant(all, 1);
		llvm.LLVMSetVisibility(all, LLVMHiddenVisibility);
	}
	LLVMPassBuilderOptionsRef po = llvm.LLVMCreatePassBuilderOptions();
	run_passes(G, "globaldce", po);
	llvm.LLVMDisposePassBuilderOptions(po);
	free(fs);
	free(cost);
	free(owner);
	free(tasks);
}

/* Verify, optimise and emit the current module; `no_unroll`: without LLVM's
 * loop unrolling. Kernels with identical bodies (a dense block's equal
 * convolutions; the same op, shapes and epilogue anywhere in the graph) are
 * merged first, so each is optimised and compiled once: a task function's
 * address is not significant (unnamed_addr), so its callers take the one
 * kept and it is deleted; constmerge first makes equal constant tables one. */
static int gen_module_end(Gen *G, int opt, int no_unroll, OutFile *out, ObjStats *st)
{
	char *err = NULL;
	if (llvm.LLVMVerifyModule(G->M, LLVMReturnStatusAction, &err)) {
		/* generated code that does not verify is a compiler bug */
		fprintf(stderr, "%s\n", llvm.LLVMPrintModuleToString(G->M));
		ice("LLVMVerifyModule failed: %s", err);
	}
	llvm.LLVMDisposeMessage(err);
	int kernels = count_tasks(G);
	if (kernels > 1) {
		LLVMPassBuilderOptionsRef mo = llvm.LLVMCreatePassBuilderOptions();
		run_passes(G, "constmerge,mergefunc", mo);
		llvm.LLVMDisposePassBuilderOptions(mo);
	}
	if (st) {
		st->kernels = kernels;
		st->shared = kernels - count_tasks(G);
	}
	if (G->nparts > 1)
		split_module(G);
	char passes[32];
	snprintf(passes, sizeof passes, "default<O%d>", opt);
	LLVMPassBuilderOptionsRef po = llvm.LLVMCreatePassBuilderOptions();
	llvm.LLVMPassBuilderOptionsSetLoopVectorization(po, opt >= 2);
	llvm.LLVMPassBuilderOptionsSetSLPVectorization(po, opt >= 2);
	/* At -O1 there is no vectorizer, and LLVM's full unrolling made the
	 * scalar loops of small elementwise kernels (a rotary embedding's 256
	 * elements a row) blocks of a thousand loads and stores, whose
	 * instruction selection took 16 s of a tiny LLaMA's 18 s build (-O2:
	 * 4 s). nestc's tiles are unrolled already. */
	if (no_unroll || opt == 1)
		llvm.LLVMPassBuilderOptionsSetLoopUnrolling(po, 0);
	run_passes(G, passes, po);
	llvm.LLVMDisposePassBuilderOptions(po);
	if (G->o->emit == EMIT_LLVM) {
		char *s = llvm.LLVMPrintModuleToString(G->M);
		out->len = strlen(s);
		out->data = xmalloc(out->len + 1);
		memcpy(out->data, s, out->len + 1);
		llvm.LLVMDisposeMessage(s);
	} else {
		LLVMMemoryBufferRef mb;
		if (llvm.LLVMTargetMachineEmitToMemoryBuffer(G->tm, G->M, G->o->emit == EMIT_ASM ? LLVMAssemblyFile : LLVMObjectFile,
		                                        &err, &mb)) {
			G->error = xasprintf("code generation failed: %s", err);
			llvm.LLVMDisposeMessage(err);
			llvm.LLVMDisposeModule(G->M);
			return 1;
		}
		out->len = llvm.LLVMGetBufferSize(mb);
		out->data = xmalloc(out->len + 1);
		memcpy(out->data, llvm.LLVMGetBufferStart(mb), out->len);
		llvm.LLVMDisposeMemoryBuffer(mb);
		if (st && G->o->emit == EMIT_OBJ)
			st->code_bytes = text_bytes(G, out->data, out->len);
	}
	llvm.LLVMDisposeModule(G->M);
	G->M = NULL;
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The host as a target, without LLVM: the machine and a hash of the CPU's
 * model and feature flags. It stands in the fingerprints and cache keys of
 * builds for the host, for which LLVM detects the same CPU every time. */
char *host_id(void)
{
	struct utsname u;
	if (uname(&u) < 0)
		snprintf(u.machine, sizeof u.machine, "unknown");
	XXH3_state_t *st = XXH3_createState();
	XXH3_64bits_reset(st);
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	while (f && fgets(line, sizeof line, f)) {
		if (line[0] == '\n')
			break; /* the first processor is enough */
		if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5) || !strncmp(line, "vendor_id", 9) ||
		    !strncmp(line, "cpu family", 10) || !strncmp(line, "model\t", 6) || !strncmp(line, "Features", 8) ||
		    !strncmp(line, "CPU part", 8))
			XXH3_64bits_update(st, line, strlen(line));
	}
	if (f)
		fclose(f);
	uint64_t h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return xasprintf("host-%s-%016llx", u.machine, (unsigned long long)h);
}

/* ---- jobs ---- */

static LLVMCodeGenOptLevel cg_level(int opt)
{
	return opt <= 0 ? LLVMCodeGenLevelNone : opt == 1 ? LLVMCodeGenLevelLess
	       : opt == 2 ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelAggressive;
}

/* Register tiles are sized for the widest vectors the target has. */
static int target_vbytes(Shared *sh)
{
	int vbytes = strstr(sh->features, "+avx512f") ? 64 : strstr(sh->features, "+avx2") ? 32 : 16;
	if (sh->o->cpu) {
		const char *c = sh->cpu;
		vbytes = strstr(c, "avx512") || strstr(c, "icelake") || strstr(c, "sapphirerapids") ||
		                 strstr(c, "cascadelake") || strstr(c, "cooperlake") || strstr(c, "tigerlake") ||
		                 strstr(c, "znver4")
		             ? 64
		         : strstr(c, "haswell") || strstr(c, "broadwell") || strstr(c, "skylake") || strstr(c, "znver") ||
		                 strstr(c, "x86-64-v3") || strstr(c, "alderlake")
		             ? 32
		             : 16;
	}
	return vbytes;
}

/* Does the target have vpdpbusd at vbytes wide: AVX512-VNNI (64), AVX-VNNI
 * or AVX512-VNNI with VL (32)? From the features LLVM reports for the host,
 * or for --cpu NAME from the processors LLVM 14 gives them. */
static int target_vnni(Shared *sh, int vbytes)
{
	const char *f = sh->features;
	if (!sh->o->cpu)
		return vbytes == 64 ? strstr(f, "+avx512vnni") != NULL
		       : vbytes == 32 ? strstr(f, "+avxvnni") || (strstr(f, "+avx512vnni") && strstr(f, "+avx512vl")) : 0;
	const char *c = sh->cpu;
	int v512 = strstr(c, "cascadelake") || strstr(c, "cooperlake") || strstr(c, "icelake") || strstr(c, "tigerlake") ||
	           strstr(c, "sapphirerapids") || strstr(c, "znver4");
	return vbytes == 64 ? v512 : vbytes == 32 ? v512 || strstr(c, "alderlake") != NULL : 0;
}

static void gen_init(Gen *G, Shared *sh)
{
	memset(G, 0, sizeof *G);
	G->p = sh->p;
	G->rt = sh->rt;
	G->o = sh->o;
	G->triple = sh->triple;
	G->vbytes = target_vbytes(sh);
	G->wfmask = wformat_mask(sh->p);
	G->dot = sh->o->act_int8 && (G->wfmask & (1 << WF_Q8_0 | 1 << WF_Q4_0 | 1 << WF_Q4_K));
	G->vnni = target_vnni(sh, G->vbytes);
	/* F16C: in the host's features; every processor LLVM gives AVX2 or AVX-512 has it */
	G->f16c = sh->o->cpu ? G->vbytes >= 32 : strstr(sh->features, "+f16c") != NULL;
	G->tm = llvm.LLVMCreateTargetMachine(sh->target, sh->triple, sh->cpu, sh->features, cg_level(sh->o->opt_level),
	                                LLVMRelocPIC, LLVMCodeModelDefault);
	LLVMTargetDataRef td = llvm.LLVMCreateTargetDataLayout(G->tm);
	G->layout = llvm.LLVMCopyStringRepOfTargetData(td);
	llvm.LLVMDisposeTargetData(td);
	G->C = llvm.LLVMContextCreate();
	G->B = llvm.LLVMCreateBuilderInContext(G->C);
	G->i1 = llvm.LLVMInt1TypeInContext(G->C);
	G->i8 = llvm.LLVMInt8TypeInContext(G->C);
	G->i16 = llvm.LLVMInt16TypeInContext(G->C);
	G->i32 = llvm.LLVMInt32TypeInContext(G->C);
	G->i64 = llvm.LLVMInt64TypeInContext(G->C);
	G->f32 = llvm.LLVMFloatTypeInContext(G->C);
	G->f64 = llvm.LLVMDoubleTypeInContext(G->C);
	G->i8p = llvm.LLVMPointerType(G->i8, 0);
	G->i8pp = llvm.LLVMPointerType(G->i8p, 0);
	G->i64p = llvm.LLVMPointerType(G->i64, 0);
	LLVMTypeRef ft[4] = {G->i8p, G->i8pp, G->i64p, G->i8p};
	G->fn_t = llvm.LLVMFunctionType(G->i32, ft, 4, 0);
	G->need = sh->need;
	G->plans = sh->plans;
}

static void gen_dispose(Gen *G)
{
	llvm.LLVMDisposeBuilder(G->B);
	llvm.LLVMContextDispose(G->C);
	llvm.LLVMDisposeTargetMachine(G->tm);
	llvm.LLVMDisposeMessage(G->layout);
	free(G->error);
}

static void run_job(Gen *G, Shared *sh, Job *j)
{
	double t0 = now_ms();
	OutFile f = {0};
	int rc;
	gen_module_begin(G, j->mod);
	if (j->kind == JOB_VARIANT) {
		G->kp_slot = j->v->id;
		G->kp_owner = NULL;
		emit_function(G, j->v->g, j->v, j->sym, 0);
		char ws[320];
		snprintf(ws, sizeof ws, "%s_ws", j->sym);
		LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, G->i64, ws);
		llvm.LLVMSetInitializer(gv, ci64(G, sh->need[j->v->g->id]));
		llvm.LLVMSetGlobalConstant(gv, 1);
		/* what its matmuls ask libnestrt to pre-pack (matmul.c) */
		int64_t *plan = NULL;
		int plen = 0;
		pack_plan(G, j->v->g, j->v, 0, &plan, &plen);
		snprintf(ws, sizeof ws, "%s_packs", j->sym);
		pack_plan_global(G, plan, plen, ws, 0);
		free(plan);
		/* A variant with run-time rows has tiles of every height (matmul.c),
		 * each a loop over k that LLVM unrolled 8 to 32 times: 3.4 times
		 * the code, 4 times the compile time of GPT-2's prefill layer. The
		 * tiles are unrolled over rows and vectors already; the loop's own
		 * cost hides behind their multiply-adds. */
		rc = gen_module_end(G, j->v->opt_level, runtime_rows(j->v), &f, &j->st);
	} else if (j->kind == JOB_MODEL) {
		model_module(G, sh->name, NULL, sh->ws_static, sh->ws_own);
		if (sh->o->embed)
			embedded_new(G, sh->name);
		G->part = j->part;
		G->nparts = j->nparts;
		G->model = sh->name;
		/* a large graph (its object in parts) without LLVM's unroller: its
		 * tiles are unrolled already, and DenseNet-121's build took 18 s of
		 * CPU with it, 10 s without, at the same speed (Swin-T 16 s, 5 s) */
		rc = gen_module_end(G, sh->o->opt_level, j->nparts > 1, &f, &j->st);
		G->nparts = 0;
	} else {
		weights_module(G, sh->name, sh->weights_image, sh->weights_len, sh->prepacked, sh->nprepacked);
		rc = gen_module_end(G, 0, 0, &f, NULL);
	}
	j->ms = now_ms() - t0;
	if (rc) {
		pthread_mutex_lock(&sh->mu);
		if (!sh->error)
			sh->error = G->error ? xstrdup(G->error) : xstrdup("code generation failed");
		pthread_mutex_unlock(&sh->mu);
		free(f.data);
		return;
	}
	j->data = f.data;
	j->len = f.len;
}

/* ---- workers ---- */

static void *worker(void *arg)
{
	Shared *sh = arg;
	Gen G;
	gen_init(&G, sh);
	for (;;) {
		pthread_mutex_lock(&sh->mu);
		int i = sh->next;
		while (i < sh->njobs && (!sh->jobs[sh->order[i]].selected || sh->jobs[sh->order[i]].cached))
			i++;
		sh->next = i + 1;
		int stop = i >= sh->njobs || sh->error;
		pthread_mutex_unlock(&sh->mu);
		if (stop)
			break;
		Job *j = &sh->jobs[sh->order[i]];
		run_job(&G, sh, j);
		pthread_mutex_lock(&sh->mu);
		sh->ndone++;
		char label[400];
		snprintf(label, sizeof label, "%s %.0f ms", j->label, j->ms);
		progress_step(&sh->pg, sh->ndone, label);
		pthread_mutex_unlock(&sh->mu);
	}
	gen_dispose(&G);
	return NULL;
}

static char *job_path(Shared *sh, Job *j)
{
	const char *ext = sh->o->emit == EMIT_OBJ ? "o" : sh->o->emit == EMIT_ASM ? "s" : "ll";
	if (sh->o->archive || sh->o->shared)
		return xasprintf("%s.%s", j->mod, ext);
	return xasprintf("%s/%s.%s", sh->o->out, j->mod, ext);
}

/* NAME.h (ext "h") or NAME.api.json: in the output directory, or beside
 * the archive or library */
static char *header_path(BuildOptions *o, const char *name, const char *ext)
{
	if (!o->archive && !o->shared)
		return xasprintf("%s/%s.%s", o->out, name, ext);
	const char *slash = strrchr(o->out, '/');
	return slash ? xasprintf("%.*s/%s.%s", (int)(slash - o->out), o->out, name, ext) : xasprintf("%s.%s", name, ext);
}

/* The heavy kernels (convolutions, matrix products, poolings) of graph g
 * and of the calls compiled into it. */
static int heavy_kernels(RegionTable *rt, Graph *g, int depth)
{
	int n = 0;
	for (int i = 0; i < g->nnodes; i++) {
		Node *x = g->nodes[i];
		if (x->op == OP_CONV2D || x->op == OP_MATMUL || op_info[x->op].cls == OPC_POOL)
			n++;
		else if (x->op == OP_CALL && x->callee && depth < 64) {
			CallSite *cs = callsite_of(rt, x);
			if (!cs || !cs->v)
				n += heavy_kernels(rt, x->callee, depth + 1);
		}
	}
	return n;
}

/* How many objects the model's own code is compiled as: one per
 * MODEL_PART_KERNELS heavy kernels of its entry points, at most
 * MODEL_PARTS_MAX. DenseNet-121, 124 of them, all in its entry point
 * (no region repeats: each layer reads more channels than the one before),
 * took 17 s on one core as one object. Decided from the graphs alone, not
 * from -j, so that a build writes the same files on every machine. */
static int model_parts(Shared *sh)
{
	int n = 0;
	for (int e = 0; e < sh->p->nentries; e++)
		n += heavy_kernels(sh->rt, sh->p->entries[e].g, 0);
	int parts = 1 + n / MODEL_PART_KERNELS;
	return parts > MODEL_PARTS_MAX ? MODEL_PARTS_MAX : parts;
}

static void make_jobs(Shared *sh)
{
	RegionTable *rt = sh->rt;
	int nv = rt->variants.n;
	int nparts = model_parts(sh);
	sh->jobs = xcalloc((size_t)nv + 2 + (size_t)nparts, sizeof(Job));
	for (int i = 0; i < nv; i++) {
		Variant *v = rt->variants.v[i];
		Job *j = &sh->jobs[sh->njobs++];
		j->kind = JOB_VARIANT;
		j->v = v;
		snprintf(j->sym, sizeof j->sym, "%s__%s_%d", sh->name, v->region, v->k);
		snprintf(j->mod, sizeof j->mod, "%s.%s.%d", sh->name, v->region, v->k);
		snprintf(j->label, sizeof j->label, "%s.%d", v->region, v->k);
		vec_push(&j->syms, xstrdup(j->sym));
		vec_push(&j->syms, xasprintf("%s_ws", j->sym));
		vec_push(&j->syms, xasprintf("%s_packs", j->sym));
	}
	Job *m = &sh->jobs[sh->njobs++];
	m->kind = JOB_MODEL;
	m->nparts = nparts;
	snprintf(m->sym, sizeof m->sym, "%s", sh->name);
	snprintf(m->mod, sizeof m->mod, "%s", sh->name);
	snprintf(m->label, sizeof m->label, "model");
	const char *suffix[] = {"_new", "_free", "_workspace_size"};
	for (int k = 0; k < 3; k++)
		vec_push(&m->syms, xasprintf("%s%s", sh->name, suffix[k]));
	if (sh->o->embed)
		vec_push(&m->syms, xasprintf("%s_new_embedded", sh->name));
	for (int e = 0; e < sh->p->nentries; e++)
		vec_push(&m->syms, xasprintf("%s_%s", sh->name, sh->p->entries[e].name));
	const char *seq[] = {"_seq_new", "_seq_reset", "_seq_free"};
	for (int k = 0; k < 3 && sh->p->nstates; k++)
		vec_push(&m->syms, xasprintf("%s%s", sh->name, seq[k]));
	for (int k = 1; k < nparts; k++) {
		Job *q = &sh->jobs[sh->njobs++];
		q->kind = JOB_MODEL;
		q->part = k;
		q->nparts = nparts;
		snprintf(q->sym, sizeof q->sym, "%s", sh->name);
		snprintf(q->mod, sizeof q->mod, "%s.model-%d", sh->name, k);
		snprintf(q->label, sizeof q->label, "model-%d", k);
		vec_push(&q->syms, xasprintf("%s__model_part_%d", sh->name, k));
	}
	if (sh->o->embed) {
		Job *w = &sh->jobs[sh->njobs++];
		w->kind = JOB_WEIGHTS;
		snprintf(w->sym, sizeof w->sym, "%s__weights", sh->name);
		snprintf(w->mod, sizeof w->mod, "%s.weights", sh->name);
		snprintf(w->label, sizeof w->label, "weights");
		vec_push(&w->syms, xstrdup(w->sym));
		vec_push(&w->syms, xasprintf("%s__weights_size", sh->name));
		vec_push(&w->syms, xasprintf("%s__packed", sh->name));
		vec_push(&w->syms, xasprintf("%s__npacked", sh->name));
	}
	for (int i = 0; i < sh->njobs; i++) {
		Job *j = &sh->jobs[i];
		/* --only-variant model: every part of it */
		j->selected = !sh->o->only || !strcmp(sh->o->only, j->kind == JOB_MODEL ? "model" : j->label);
	}
}

char **build_outputs(Program *p, RegionTable *rt, BuildOptions *o, int *n)
{
	Shared sh = {.p = p, .rt = rt, .o = o, .name = o->name};
	make_jobs(&sh);
	char **out = xcalloc((size_t)sh.njobs + 3, sizeof(char *));
	int k = 0;
	if (o->archive || o->shared) {
		out[k++] = xstrdup(o->out);
	} else {
		/* the model object first: it is a depfile's target */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < sh.njobs; i++)
				if (sh.jobs[i].selected && (sh.jobs[i].kind == JOB_MODEL) == (pass == 0))
					out[k++] = job_path(&sh, &sh.jobs[i]);
	}
	if (!o->only || !strcmp(o->only, "model") || o->archive || o->shared) {
		out[k++] = header_path(o, o->name, "h");
		out[k++] = header_path(o, o->name, "api.json");
	}
	for (int i = 0; i < sh.njobs; i++) {
		for (int s = 0; s < sh.jobs[i].syms.n; s++)
			free(sh.jobs[i].syms.v[s]);
		free(sh.jobs[i].syms.v);
	}
	free(sh.jobs);
	*n = k;
	return out;
}

/* Embedded weights are checked against the param table now, not at run time. */
static int check_embedded(Shared *sh, Diag *d)
{
	char err[512];
	Weights *w = weights_open(sh->o->embed, err, sizeof err);
	if (!w) {
		error_plain(d, "%s: %s", sh->o->embed, err);
		return 1;
	}
	int bad = 0;
	for (int i = 0; i < sh->p->nparams; i++) {
		ParamInfo *pi = &sh->p->params[i];
		WTensor *t = weights_find(w, pi->name);
		int same = t && t->dtype == (int)pi->dtype && t->rank == pi->rank;
		for (int k = 0; same && k < pi->rank; k++)
			same = t->shape[k] == pi->shape[k];
		if (!same) {
			error_plain(d, "%s: %s: %s", sh->o->embed, pi->name, t ? "dtype or shape differs from the model's param" : "missing parameter");
			bad = 1;
		}
	}
	weights_close(w);
	if (bad)
		return 1;
	FILE *f = fopen(sh->o->embed, "rb");
	Buf b = {0};
	char chunk[1 << 16];
	size_t got;
	while (f && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
		for (size_t i = 0; i < got; i++)
			buf_putc(&b, chunk[i]);
	if (f)
		fclose(f);
	sh->weights_image = b.s;
	sh->weights_len = b.len;
	return 0;
}

/* --embed-weights: the matrices packed now, as the instance would pack them
 * (the same pack plans the objects carry, followed by libnestrt's own walk),
 * so that nothing is packed when the program creates an instance. */
static int embed_prepack(Shared *sh, Diag *d)
{
	Program *p = sh->p;
	RegionTable *rt = sh->rt;
	Gen G = {.p = p, .rt = rt, .o = sh->o, .plans = sh->plans, .need = sh->need, .vbytes = target_vbytes(sh)};
	int nv = rt->variants.n;
	int64_t **plans = xcalloc((size_t)nv + 1, sizeof *plans);
	for (int i = 0; i < nv; i++) {
		int64_t *plan = NULL;
		int len = 0;
		Variant *v = rt->variants.v[i];
		pack_plan(&G, v->g, v, 0, &plan, &len);
		plans[i] = xcalloc((size_t)len + 1, sizeof **plans);
		plans[i][0] = len / 6;
		if (len)
			memcpy(plans[i] + 1, plan, (size_t)len * sizeof *plan);
		free(plan);
	}
	int64_t *eplan = NULL;
	int elen = 0;
	for (int e = 0; e < p->nentries; e++)
		pack_plan(&G, p->entries[e].g, NULL, 1, &eplan, &elen);
	int64_t *entry = xcalloc((size_t)elen + 1, sizeof *entry);
	entry[0] = elen / 6;
	if (elen)
		memcpy(entry + 1, eplan, (size_t)elen * sizeof *eplan);
	free(eplan);
	char err[512], *img;
	size_t len;
	int rc = weights_prepack(sh->weights_image, sh->weights_len, p->params, p->nparams, (const int64_t *const *)plans, nv,
	                         entry, &img, &len, &sh->prepacked, &sh->nprepacked, err, sizeof err);
	for (int i = 0; i < nv; i++)
		free(plans[i]);
	free(plans);
	free(entry);
	if (rc < 0) {
		error_plain(d, "%s: %s", sh->o->embed, err);
		return 1;
	}
	free((void *)sh->weights_image);
	sh->weights_image = img;
	sh->weights_len = len;
	return 0;
}

/* Objects of variants an earlier build made and this one did not
 * (NAME.REGION.K.o, NAME.weights.o): left there, a link of every object in the
 * directory would take in dead code. */
static void remove_stale(const char *dir, const char *name, Vec *written)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	size_t nl = strlen(name);
	struct dirent *de;
	while ((de = readdir(dp))) {
		const char *f = de->d_name;
		if (strncmp(f, name, nl) || f[nl] != '.')
			continue;
		const char *rest = f + nl + 1, *ext = strrchr(rest, '.');
		if (!ext || (strcmp(ext, ".o") && strcmp(ext, ".s") && strcmp(ext, ".ll")))
			continue;
		/* REGION.K or weights, nothing else */
		const char *dot = memchr(rest, '.', (size_t)(ext - rest));
		int ours = (!strncmp(rest, "weights.", 8) && rest + 7 == ext) ||
		           (!strncmp(rest, "model-", 6) && rest + 6 < ext && strspn(rest + 6, "0123456789") == (size_t)(ext - rest - 6));
		if (dot && dot < ext && dot > rest) {
			ours = 1;
			for (const char *c = dot + 1; c < ext; c++)
				ours &= *c >= '0' && *c <= '9';
			ours &= dot + 1 < ext;
		}
		if (!ours)
			continue;
		char *path = xasprintf("%s/%s", dir, f);
		int keep = 0;
		for (int i = 0; i < written->n && !keep; i++)
			keep = !strcmp(written->v[i], path);
		if (!keep)
			unlink(path);
		free(path);
	}
	closedir(dp);
}

/* LLVM-C cannot list a target's processors, and an unknown one only shows as a
 * warning on stderr (and sometimes an abort) when code is emitted: try it in a
 * child process on an empty module. */
static int cpu_known(Shared *sh)
{
	int fds[2];
	if (pipe(fds) < 0)
		return 1;
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return 1;
	}
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		LLVMTargetMachineRef tm = llvm.LLVMCreateTargetMachine(sh->target, sh->triple, sh->cpu, "",
		                                                       LLVMCodeGenLevelNone, LLVMRelocPIC,
		                                                       LLVMCodeModelDefault);
		LLVMContextRef C = llvm.LLVMContextCreate();
		LLVMModuleRef M = llvm.LLVMModuleCreateWithNameInContext("probe", C);
		llvm.LLVMSetTarget(M, sh->triple);
		char *err = NULL;
		LLVMMemoryBufferRef mb;
		int bad = llvm.LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMObjectFile, &err, &mb);
		_exit(bad ? 1 : 0);
	}
	close(fds[1]);
	char buf[4096];
	size_t got = 0;
	ssize_t r;
	while ((r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0 && got < sizeof buf - 1)
		got += (size_t)r;
	buf[got] = 0;
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(buf, "not a recognized processor");
}

/* LLVM stops on what a target cannot compile ("LLVM ERROR: ...") with
 * abort(), a signal: say it as nestc's error and exit with status 1 (a
 * model that this target cannot build). _exit: other worker threads may be
 * inside LLVM. */
static const char *fatal_triple;

static void llvm_fatal(const char *reason)
{
	fprintf(stderr, "nestc: error: LLVM cannot compile for %s: %s\n", fatal_triple ? fatal_triple : "this target",
	        reason);
	_exit(1);
}

int target_known(const char *triple, char *why, size_t n)
{
	if (llvm_load(why, n) < 0)
		return 0;
	LLVMTargetRef t;
	char *err = NULL;
	if (llvm.LLVMGetTargetFromTriple(triple, &t, &err)) {
		snprintf(why, n, "unknown target '%s': %s", triple, err);
		llvm.LLVMDisposeMessage(err);
		return 0;
	}
	return 1;
}

/* LLVM, the target machine's parameters: only when something must be compiled. */
static int setup_llvm(Shared *sh, Diag *d)
{
	char why[512];
	if (llvm_load(why, sizeof why) < 0) {
		error_plain(d, "%s", why);
		return 1;
	}
	llvm.LLVMInstallFatalErrorHandler(llvm_fatal);
	if (sh->o->target) {
		sh->triple = xstrdup(sh->o->target);
	} else {
		char *t = llvm.LLVMGetDefaultTargetTriple();
		sh->triple = xstrdup(t);
		llvm.LLVMDisposeMessage(t);
	}
	char *err = NULL;
	if (llvm.LLVMGetTargetFromTriple(sh->triple, &sh->target, &err)) {
		error_plain(d, "unknown target '%s': %s", sh->triple, err);
		llvm.LLVMDisposeMessage(err);
		return 1;
	}
	if (sh->o->cpu) {
		sh->cpu = xstrdup(sh->o->cpu);
		sh->features = xstrdup("");
		if (!cpu_known(sh)) {
			error_plain(d, "--cpu=%s: LLVM does not know this processor for %s", sh->cpu, sh->triple);
			return 1;
		}
	} else if (!sh->o->target) {
		char *c = llvm.LLVMGetHostCPUName(), *f = llvm.LLVMGetHostCPUFeatures();
		sh->cpu = xstrdup(c);
		sh->features = xstrdup(f);
		llvm.LLVMDisposeMessage(c);
		llvm.LLVMDisposeMessage(f);
	} else {
		/* "": the target's own default processor ("generic" is not one
		 * for every target: RISC-V's is "generic-rv64") */
		sh->cpu = xstrdup("");
		sh->features = xstrdup("");
	}
	fatal_triple = sh->triple;
	return 0;
}

int build_model(Program *p, RegionTable *rt, Diag *d, BuildOptions *o)
{
	Shared sh = {.p = p, .rt = rt, .o = o, .name = o->name};
	pthread_mutex_init(&sh.mu, NULL);
	if (o->target || o->cpu)
		sh.ident = xasprintf("%s cpu %s", o->target ? o->target : "host", o->cpu ? o->cpu : "host");
	else
		sh.ident = host_id();
	if (o->embed && check_embedded(&sh, d)) {
		free(sh.ident);
		return 1;
	}

	/* plans and workspace needs, before any worker: they allocate in the arena */
	sh.plans = xcalloc((size_t)p->graphs.n + 1, sizeof(Plan *));
	sh.need = xmalloc(((size_t)p->graphs.n + 1) * sizeof(int64_t));
	for (int i = 0; i <= p->graphs.n; i++)
		sh.need[i] = -1;
	{
		Gen G = {.p = p, .rt = rt, .o = o, .plans = sh.plans, .need = sh.need};
		for (int i = 0; i < rt->variants.n; i++) {
			Variant *v = rt->variants.v[i];
			plan_of(&G, v->g, v);
		}
		for (int i = 0; i < p->graphs.n; i++)
			graph_need(&G, p->graphs.v[i]);
		for (int e = 0; e < p->nentries; e++) {
			Graph *g = p->entries[e].g;
			Plan *pl = sh.plans[g->id];
			int64_t inl = 0;
			for (int i = 0; i < g->nnodes; i++) {
				CallSite *cs = g->nodes[i]->op == OP_CALL ? callsite_of(rt, g->nodes[i]) : NULL;
				if (cs && !cs->v && sh.need[g->nodes[i]->callee->id] > inl)
					inl = sh.need[g->nodes[i]->callee->id];
			}
			if (pl->ws_size + inl > sh.ws_static)
				sh.ws_static = pl->ws_size + inl;
			if (pl->ws_size > sh.ws_own)
				sh.ws_own = pl->ws_size;
		}
	}
	if (o->embed && (setup_llvm(&sh, d) || embed_prepack(&sh, d))) {
		free(sh.ident);
		return 1;
	}
	make_jobs(&sh);

	/* the cache first: what it holds needs no compiling */
	for (int i = 0; i < sh.njobs; i++) {
		Job *j = &sh.jobs[i];
		if (!j->selected)
			continue;
		job_key(&sh, j);
		if (o->cache_dir && cache_get(o->cache_dir, j->key, &j->data, &j->len, &j->st)) {
			j->cached = 1;
		} else {
			sh.ntodo++;
		}
	}
	/* the largest jobs first, so that two threads finish together; the cost
	 * estimate is the number of IR nodes to compile */
	sh.order = xcalloc((size_t)sh.njobs + 1, sizeof(int));
	int64_t *cost = xcalloc((size_t)sh.njobs + 1, sizeof(int64_t));
	for (int i = 0; i < sh.njobs; i++) {
		Job *j = &sh.jobs[i];
		sh.order[i] = i;
		if (j->kind == JOB_VARIANT)
			cost[i] = j->v->g->nnodes;
		else if (j->kind == JOB_MODEL)
			for (int e = 0; e < p->nentries; e++)
				cost[i] += p->entries[e].g->nnodes;
	}
	for (int a = 1; a < sh.njobs; a++)
		for (int b = a; b > 0 && cost[sh.order[b - 1]] < cost[sh.order[b]]; b--) {
			int t = sh.order[b];
			sh.order[b] = sh.order[b - 1];
			sh.order[b - 1] = t;
		}
	free(cost);
	int rc = 0;
	if (sh.ntodo > 0 && !sh.target && setup_llvm(&sh, d))
		rc = 1;
	int nthreads = o->jobs > 0 ? o->jobs : 1;
	if (nthreads > sh.ntodo)
		nthreads = sh.ntodo > 0 ? sh.ntodo : 1;
	if (sh.ntodo > 0 && !rc) {
		progress_start(&sh.pg, o->progress, "compiling", sh.ntodo, 0);
		pthread_t *th = xcalloc((size_t)nthreads, sizeof(pthread_t));
		for (int t = 1; t < nthreads; t++)
			if (pthread_create(&th[t], NULL, worker, &sh) != 0)
				ice("cannot start a compile thread");
		worker(&sh);
		for (int t = 1; t < nthreads; t++)
			pthread_join(th[t], NULL);
		free(th);
		progress_end(&sh.pg);
	}
	if (sh.error) {
		error_plain(d, "%s", sh.error);
		rc = 1;
	}
	for (int i = 0; i < sh.njobs && !rc; i++) {
		Job *j = &sh.jobs[i];
		if (!j->selected)
			continue;
		if (!j->cached && o->cache_dir)
			cache_put(o->cache_dir, j->key, j->data, j->len, &j->st);
		j->st.compile_ms = j->cached ? 0 : j->ms;
		j->st.cached = j->cached;
		if (j->kind == JOB_VARIANT) {
			j->v->obj = j->st;
		} else if (j->kind == JOB_MODEL && j->part == 0) {
			rt->model = j->st;
			rt->model.parts = j->nparts;
		} else if (j->kind == JOB_MODEL) {
			/* the parts' code and compile time add up; their kernels are counted once */
			rt->model.code_bytes += j->st.code_bytes;
			rt->model.compile_ms += j->st.compile_ms;
			rt->model.cached &= j->st.cached;
		}
	}

	/* write: header and objects (or one archive), each through a temporary file;
	 * they take their final names only when all are complete */
	if (!rc) {
		Vec tmps = {0}, finals = {0};
		int ok = 1, made_dir = 0;
		/* the header and the API description (api.c) made before any file is
		 * written: an internal error in them leaves nothing behind */
		Buf texts[2] = {{0}, {0}};
		header_text(p, o, &texts[0], sh.name);
		api_json_text(p, o, &texts[1], sh.name);
		const char *dir = o->archive || o->shared ? NULL : o->out;
		if (dir) {
			if (mkdir(dir, 0777) == 0)
				made_dir = 1;
			else if (errno != EEXIST) {
				error_plain(d, "cannot create %s: %s", dir, strerror(errno));
				ok = 0;
			}
		}
		int pid = (int)getpid();
		if (ok && (o->archive || o->shared)) {
			int n = 0;
			OutFile *files = xcalloc((size_t)sh.njobs + 1, sizeof(OutFile));
			Vec *syms = xcalloc((size_t)sh.njobs + 1, sizeof(Vec));
			for (int i = 0; i < sh.njobs; i++)
				if (sh.jobs[i].selected) {
					files[n].path = job_path(&sh, &sh.jobs[i]);
					files[n].data = sh.jobs[i].data;
					files[n].len = sh.jobs[i].len;
					syms[n] = sh.jobs[i].syms;
					n++;
				}
			char *tmp = xasprintf("%s.tmp.%d", o->out, pid);
			if (o->shared) {
				/* the model object's symbols are the library's API */
				Vec api = {0};
				for (int i = 0; i < sh.njobs; i++)
					if (sh.jobs[i].kind == JOB_MODEL && sh.jobs[i].part == 0)
						api = sh.jobs[i].syms;
				if (link_shared(d, o->out, tmp, files, n, &api, texts[1].s))
					ok = 0;
			} else {
				Buf ar = {0};
				write_archive(&ar, files, n, syms);
				if (write_file_atomic(tmp, ar.s, ar.len) < 0)
					ok = 0;
				buf_free(&ar);
			}
			vec_push(&tmps, tmp);
			vec_push(&finals, xstrdup(o->out));
			for (int i = 0; i < n; i++)
				free(files[i].path);
			free(files);
			free(syms);
		} else {
			for (int i = 0; i < sh.njobs && ok; i++) {
				Job *j = &sh.jobs[i];
				if (!j->selected)
					continue;
				char *path = job_path(&sh, j);
				char *tmp = xasprintf("%s.tmp.%d", path, pid);
				if (write_file_atomic(tmp, j->data, j->len) < 0)
					ok = 0;
				vec_push(&tmps, tmp);
				vec_push(&finals, path);
			}
		}
		if (ok && (!o->only || !strcmp(o->only, "model") || o->archive || o->shared)) {
			/* the header, and the same API for programs */
			for (int k = 0; k < 2 && ok; k++) {
				Buf *h = &texts[k];
				char *hpath = header_path(o, sh.name, k == 0 ? "h" : "api.json");
				if (file_holds(hpath, h->s, h->len)) {
					/* kept, mtime too: what includes the header is not
					 * rebuilt when a build changes nothing in it */
					free(hpath);
					continue;
				}
				char *tmp = xasprintf("%s.tmp.%d", hpath, pid);
				if (write_file_atomic(tmp, h->s, h->len) < 0)
					ok = 0;
				vec_push(&tmps, tmp);
				vec_push(&finals, hpath);
			}
		}
		for (int i = 0; i < tmps.n && ok; i++)
			if (rename_into(tmps.v[i], finals.v[i]) < 0) {
				error_plain(d, "cannot write %s: %s", (char *)finals.v[i], strerror(errno));
				ok = 0;
			}
		if (!ok) {
			if (!d->nerrors)
				error_plain(d, "cannot write the output files in %s: %s", o->out, strerror(errno));
			for (int i = 0; i < tmps.n; i++)
				unlink(tmps.v[i]);
			if (made_dir)
				rmdir(dir);
			rc = 1;
		}
		if (ok && dir && !o->only)
			remove_stale(dir, sh.name, &finals);
		buf_free(&texts[0]);
		buf_free(&texts[1]);
		for (int i = 0; i < tmps.n; i++) {
			free(tmps.v[i]);
			free(finals.v[i]);
		}
		free(tmps.v);
		free(finals.v);
	}
	for (int i = 0; i < sh.njobs; i++) {
		free(sh.jobs[i].data);
		for (int s = 0; s < sh.jobs[i].syms.n; s++)
			free(sh.jobs[i].syms.v[s]);
		free(sh.jobs[i].syms.v);
	}
	free(sh.jobs);
	free(sh.order);
	free(sh.plans);
	free(sh.need);
	free(sh.error);
	free((void *)sh.weights_image);
	for (int i = 0; i < sh.nprepacked; i++) {
		free(sh.prepacked[i].name);
		free(sh.prepacked[i].data);
	}
	free(sh.prepacked);
	free(sh.ident);
	free(sh.triple);
	free(sh.cpu);
	free(sh.features);
	pthread_mutex_destroy(&sh.mu);
	return rc;
}

/* codegen.c - LLVM-C code generation: one module (and object) per unique
 * region variant, one for the model (entry points, param table, dispatch
 * table), and the C header. Every function has the signature
 *     int f(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
 * bufs holding the inputs then the outputs; dims the run-time dimensions of a
 * reuse_hash variant; ws the workspace (this graph's intermediates first, the
 * callees' after them). Region calls go through nestrt_call and the dispatch
 * table; calls over max_reuse_entries (or with --no-regions) get a private copy
 * of the callee's code in the caller's module. */
#include "nestc.h"

#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Object.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <dlfcn.h>

/* LLVM is loaded on first use with dlopen: the commands that generate no code
 * (check, run, report) and builds that find every object in the cache never
 * pay the ~12 ms it takes to load and relocate libLLVM. Every LLVM-C function
 * used here is called through this table, typed from the headers themselves. */
#define LLVM_API(X) \
	X(LLVMAddAttributeAtIndex) \
	X(LLVMAddFunction) \
	X(LLVMAddGlobal) \
	X(LLVMAddIncoming) \
	X(LLVMAppendBasicBlockInContext) \
	X(LLVMArrayType) \
	X(LLVMBuildAdd) \
	X(LLVMBuildAlloca) \
	X(LLVMBuildAnd) \
	X(LLVMBuildBr) \
	X(LLVMBuildCall2) \
	X(LLVMBuildCondBr) \
	X(LLVMBuildFAdd) \
	X(LLVMBuildFCmp) \
	X(LLVMBuildFDiv) \
	X(LLVMBuildFMul) \
	X(LLVMBuildFNeg) \
	X(LLVMBuildFPExt) \
	X(LLVMBuildFPTrunc) \
	X(LLVMBuildFRem) \
	X(LLVMBuildFSub) \
	X(LLVMBuildGEP2) \
	X(LLVMBuildICmp) \
	X(LLVMBuildLoad2) \
	X(LLVMBuildMul) \
	X(LLVMBuildNeg) \
	X(LLVMBuildNot) \
	X(LLVMBuildOr) \
	X(LLVMBuildPhi) \
	X(LLVMBuildPointerCast) \
	X(LLVMBuildRet) \
	X(LLVMBuildRetVoid) \
	X(LLVMBuildSDiv) \
	X(LLVMBuildSExt) \
	X(LLVMBuildSIToFP) \
	X(LLVMBuildSRem) \
	X(LLVMBuildSelect) \
	X(LLVMBuildStore) \
	X(LLVMBuildSub) \
	X(LLVMBuildTrunc) \
	X(LLVMBuildUIToFP) \
	X(LLVMBuildXor) \
	X(LLVMBuildZExt) \
	X(LLVMConstAllOnes) \
	X(LLVMConstArray) \
	X(LLVMConstGEP2) \
	X(LLVMConstInt) \
	X(LLVMConstNamedStruct) \
	X(LLVMConstPointerCast) \
	X(LLVMConstPointerNull) \
	X(LLVMConstReal) \
	X(LLVMConstStringInContext) \
	X(LLVMContextCreate) \
	X(LLVMContextDispose) \
	X(LLVMCopyStringRepOfTargetData) \
	X(LLVMCreateBinary) \
	X(LLVMCreateBuilderInContext) \
	X(LLVMCreateEnumAttribute) \
	X(LLVMCreateMemoryBufferWithMemoryRangeCopy) \
	X(LLVMCreatePassBuilderOptions) \
	X(LLVMCreateStringAttribute) \
	X(LLVMCreateTargetDataLayout) \
	X(LLVMCreateTargetMachine) \
	X(LLVMDisposeBinary) \
	X(LLVMDisposeBuilder) \
	X(LLVMDisposeMemoryBuffer) \
	X(LLVMDisposeMessage) \
	X(LLVMDisposeModule) \
	X(LLVMDisposePassBuilderOptions) \
	X(LLVMDisposeSectionIterator) \
	X(LLVMDisposeTargetData) \
	X(LLVMDisposeTargetMachine) \
	X(LLVMDoubleTypeInContext) \
	X(LLVMFloatTypeInContext) \
	X(LLVMFunctionType) \
	X(LLVMGetBufferSize) \
	X(LLVMGetBufferStart) \
	X(LLVMGetDefaultTargetTriple) \
	X(LLVMGetEnumAttributeKindForName) \
	X(LLVMGetErrorMessage) \
	X(LLVMGetFirstInstruction) \
	X(LLVMGetHostCPUFeatures) \
	X(LLVMGetHostCPUName) \
	X(LLVMGetInsertBlock) \
	X(LLVMGetLastInstruction) \
	X(LLVMGetNamedFunction) \
	X(LLVMGetNamedGlobal) \
	X(LLVMGetParam) \
	X(LLVMGetSectionName) \
	X(LLVMGetSectionSize) \
	X(LLVMGetTargetFromTriple) \
	X(LLVMInt1TypeInContext) \
	X(LLVMInt32TypeInContext) \
	X(LLVMInt64TypeInContext) \
	X(LLVMInt8TypeInContext) \
	X(LLVMModuleCreateWithNameInContext) \
	X(LLVMMoveToNextSection) \
	X(LLVMObjectFileCopySectionIterator) \
	X(LLVMObjectFileIsSectionIteratorAtEnd) \
	X(LLVMPassBuilderOptionsSetLoopVectorization) \
	X(LLVMPassBuilderOptionsSetSLPVectorization) \
	X(LLVMPointerType) \
	X(LLVMPositionBuilderAtEnd) \
	X(LLVMPositionBuilderBefore) \
	X(LLVMPrintModuleToString) \
	X(LLVMRunPasses) \
	X(LLVMSetAlignment) \
	X(LLVMSetDataLayout) \
	X(LLVMSetGlobalConstant) \
	X(LLVMSetInitializer) \
	X(LLVMSetLinkage) \
	X(LLVMSetTarget) \
	X(LLVMSetUnnamedAddress) \
	X(LLVMStructTypeInContext) \
	X(LLVMTargetMachineEmitToMemoryBuffer) \
	X(LLVMVerifyModule) \
	X(LLVMVectorType) \
	X(LLVMConstNull) \
	X(LLVMGetUndef) \
	X(LLVMBuildInsertElement) \
	X(LLVMBuildShuffleVector) \
	X(LLVMBuildExtractElement) \
	X(LLVMConstVector) \
	X(LLVMTypeOf) \
	X(LLVMBuildFPToSI) \
	X(LLVMBuildShl) \
	X(LLVMBuildBitCast) \
	X(LLVMBuildPtrToInt) \
	X(LLVMBuildIntToPtr) \
	X(LLVMBuildArrayAlloca) \
	X(LLVMVoidTypeInContext) \
	X(LLVMLookupIntrinsicID) \
	X(LLVMGetIntrinsicDeclaration) \
	X(LLVMIntrinsicGetType)

static struct {
#define X(f) __typeof__(&f) f;
	LLVM_API(X)
#undef X
} llvm;

static void init_target(void *h, const char *name, const char *const *parts, int nparts)
{
	for (int i = 0; i < nparts; i++) {
		char sym[128];
		snprintf(sym, sizeof sym, "LLVMInitialize%s%s", name, parts[i]);
		void (*f)(void) = (void (*)(void))dlsym(h, sym);
		if (f)
			f();
	}
}

/* 0, or -1 with the reason in err. */
static int llvm_load(char *err, size_t n)
{
	static int state; /* 0 not yet, 1 loaded, -1 failed */
	static char why[512];
	if (state == 0) {
		void *h = dlopen(NESTC_LLVM_LIB, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			snprintf(why, sizeof why, "cannot load LLVM (%s): %s", NESTC_LLVM_LIB, dlerror());
			state = -1;
		} else {
			state = 1;
#define X(f) \
	if (state == 1 && !(*(void **)&llvm.f = dlsym(h, #f))) { \
		snprintf(why, sizeof why, "%s does not define %s", NESTC_LLVM_LIB, #f); \
		state = -1; \
	}
			LLVM_API(X)
#undef X
			static const char *const all[] = {"TargetInfo", "Target", "TargetMC"};
			static const char *const printer[] = {"AsmPrinter"};
#define LLVM_TARGET(T) init_target(h, #T, all, 3);
#include <llvm/Config/Targets.def>
#define LLVM_ASM_PRINTER(T) init_target(h, #T, printer, 1);
#include <llvm/Config/AsmPrinters.def>
		}
	}
	if (state < 0)
		snprintf(err, n, "%s", why);
	return state > 0 ? 0 : -1;
}

/* offsets of nestrt_ctx fields used by generated code (runtime/nestrt.h) */
enum { CTX_PARAMS = 0 };

typedef struct Gen Gen;

typedef struct Fn {
	Gen *gen;
	Graph *g;
	Plan *plan;
	Variant *v;              /* the variant compiled here, for its run-time dims */
	LLVMValueRef fn;
	LLVMValueRef ctx, bufs, dims, ws;
	LLVMValueRef *ptr;       /* per node: typed pointer to its elements */
	LLVMBasicBlockRef entry; /* allocas go here */
	LLVMValueRef par_lo, par_hi; /* in a pool task: the range of the kernel's outermost loop */
	int64_t ws_need;         /* own + callees */
} Fn;

struct Gen {
	Program *p;
	RegionTable *rt;
	Diag *d;
	BuildOptions *o;
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMBuilderRef B;
	LLVMTargetMachineRef tm;
	char *triple;
	char *layout;
	LLVMTypeRef i1, i8, i32, i64, f32, f64, vd, i8p, i8pp, i64p;
	LLVMTypeRef fn_t;        /* the variant signature */
	int ninline;             /* private copies made in this module */
	int64_t *need;           /* per graph id: workspace bytes, own + callees (-1 unknown) */
	Plan **plans;            /* per graph id; computed before any worker starts */
	char *error;             /* a code generation failure, reported by the main thread */
	int vbytes;              /* SIMD register width in bytes: 64 (AVX-512), 32 (AVX2), 16 */
	int ntask;               /* task functions made in this module */
};

static void fn_attrs(Gen *G, LLVMValueRef fn, Variant *v);

/* ---- types and small helpers ---- */

static LLVMTypeRef elem_t(Gen *G, DType dt)
{
	switch (dt) {
	case DT_BOOL: return G->i8;
	case DT_I32: return G->i32;
	case DT_I64: return G->i64;
	case DT_F32: return G->f32;
	case DT_F64: return G->f64;
	default: break;
	}
	ice("elem_t: dtype %d", dt);
}

static LLVMValueRef ci64(Gen *G, int64_t v)
{
	return llvm.LLVMConstInt(G->i64, (unsigned long long)v, 1);
}

static LLVMValueRef ci32(Gen *G, int v)
{
	return llvm.LLVMConstInt(G->i32, (unsigned long long)(int64_t)v, 1);
}

static LLVMValueRef get_fn(Gen *G, const char *name, LLVMTypeRef ty)
{
	LLVMValueRef f = llvm.LLVMGetNamedFunction(G->M, name);
	if (!f)
		f = llvm.LLVMAddFunction(G->M, name, ty);
	return f;
}

static LLVMValueRef call(Gen *G, const char *name, LLVMTypeRef ret, LLVMTypeRef *args, LLVMValueRef *vals, int n)
{
	LLVMTypeRef ty = llvm.LLVMFunctionType(ret, args, (unsigned)n, 0);
	LLVMValueRef f = get_fn(G, name, ty);
	return llvm.LLVMBuildCall2(G->B, ty, f, vals, (unsigned)n, "");
}

/* A prefetch of the line at p into L2 (prefetcht1). The intrinsic's name is
 * mangled with its pointer type, which differs between typed (LLVM 14) and
 * opaque pointers (15 and later): LLVM declares it. */
static void prefetch_l2(Gen *G, LLVMValueRef p)
{
	unsigned id = llvm.LLVMLookupIntrinsicID("llvm.prefetch", 13);
	LLVMTypeRef pt = G->i8p;
	LLVMValueRef fn = llvm.LLVMGetIntrinsicDeclaration(G->M, id, &pt, 1);
	LLVMTypeRef ft = llvm.LLVMIntrinsicGetType(G->C, id, &pt, 1);
	LLVMValueRef args[4] = {llvm.LLVMBuildPointerCast(G->B, p, G->i8p, ""), ci32(G, 0), ci32(G, 2), ci32(G, 1)};
	llvm.LLVMBuildCall2(G->B, ft, fn, args, 4, "");
}

/* llvm.NAME.f32 / .f64 intrinsics and libm functions, unary */
static LLVMValueRef math1(Gen *G, const char *base, DType dt, LLVMValueRef x)
{
	char name[64];
	LLVMTypeRef t = elem_t(G, dt);
	if (!strncmp(base, "llvm.", 5))
		snprintf(name, sizeof name, "%s.%s", base, dt == DT_F32 ? "f32" : "f64");
	else
		snprintf(name, sizeof name, "%s%s", base, dt == DT_F32 ? "f" : "");
	return call(G, name, t, &t, &x, 1);
}

static LLVMValueRef math2(Gen *G, const char *base, DType dt, LLVMValueRef x, LLVMValueRef y)
{
	char name[64];
	LLVMTypeRef t = elem_t(G, dt);
	LLVMTypeRef ts[2] = {t, t};
	LLVMValueRef vs[2] = {x, y};
	snprintf(name, sizeof name, "%s.%s", base, dt == DT_F32 ? "f32" : "f64");
	return call(G, name, t, ts, vs, 2);
}

/* A private constant C string, as an i8 pointer. */
static LLVMValueRef cstr(Gen *G, const char *s)
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

static LLVMValueRef fconst(Gen *G, DType dt, double v)
{
	return llvm.LLVMConstReal(elem_t(G, dt), v);
}

/* ---- loops ---- */

typedef struct Loop {
	LLVMBasicBlockRef head, body, exit;
	LLVMValueRef i;
} Loop;

static LLVMValueRef loop_begin(Fn *F, Loop *L, LLVMValueRef lo, LLVMValueRef hi)
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

static void loop_end(Fn *F, Loop *L)
{
	Gen *G = F->gen;
	LLVMValueRef next = llvm.LLVMBuildAdd(G->B, L->i, ci64(G, 1), "");
	LLVMBasicBlockRef cur = llvm.LLVMGetInsertBlock(G->B);
	llvm.LLVMBuildBr(G->B, L->head);
	llvm.LLVMAddIncoming(L->i, &next, &cur, 1);
	llvm.LLVMPositionBuilderAtEnd(G->B, L->exit);
}

static LLVMValueRef entry_alloca(Fn *F, LLVMTypeRef t, const char *name)
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

/* ---- dimensions: constants, or run-time values of a reuse_hash variant ---- */

static LLVMValueRef dyn_field(Fn *F, Node *n, int field)
{
	Variant *v = F->v;
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

static LLVMValueRef dimv(Fn *F, Node *n, int axis)
{
	LLVMValueRef v = dyn_field(F, n, axis);
	return v ? v : ci64(F->gen, n->shape[axis]);
}

static LLVMValueRef attrv(Fn *F, Node *n, int k)
{
	LLVMValueRef v = dyn_field(F, n, 16 + k);
	return v ? v : ci64(F->gen, n->a[k]);
}

static LLVMValueRef numelv(Fn *F, Node *n)
{
	LLVMValueRef v = ci64(F->gen, 1);
	for (int k = 0; k < n->rank; k++)
		v = llvm.LLVMBuildMul(F->gen->B, v, dimv(F, n, k), "");
	return v;
}

/* row-major strides of n; with `bcast_to_rank`, aligned right to that rank with
 * 0 for broadcast (size-1 or missing) axes */
static void strides(Fn *F, Node *n, int out_rank, const Node *out, LLVMValueRef *st)
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
		s = llvm.LLVMBuildMul(G->B, s, dimv(F, n, ik), "");
	}
}

static LLVMValueRef param_ptr(Fn *F, Node *n);

/* The typed pointer to a node's elements; params are loaded on first use, in
 * the entry block, so that a param only a rolled call chain reads costs no code. */
static LLVMValueRef nptr(Fn *F, Node *n)
{
	if (!F->ptr[n->id] && n->op == OP_PARAM)
		F->ptr[n->id] = param_ptr(F, n);
	if (!F->ptr[n->id])
		ice("codegen: node %%%d (%s) has no storage", n->id, op_name(n->op));
	return F->ptr[n->id];
}

static LLVMValueRef load_at(Fn *F, Node *n, LLVMValueRef off)
{
	Gen *G = F->gen;
	LLVMTypeRef t = elem_t(G, n->dtype);
	LLVMValueRef p = llvm.LLVMBuildGEP2(G->B, t, nptr(F, n), &off, 1, "");
	return llvm.LLVMBuildLoad2(G->B, t, p, "");
}

static void store_at(Fn *F, Node *n, LLVMValueRef off, LLVMValueRef v)
{
	Gen *G = F->gen;
	LLVMTypeRef t = elem_t(G, n->dtype);
	LLVMValueRef p = llvm.LLVMBuildGEP2(G->B, t, nptr(F, n), &off, 1, "");
	llvm.LLVMBuildStore(G->B, v, p);
}

/* Nested loops over `out`'s shape; off[j] is the running element offset of
 * operand j given its strides. The callback body runs innermost. */
typedef struct Nest {
	int rank;
	Loop loops[MAX_RANK];
	LLVMValueRef idx[MAX_RANK];
} Nest;

static void nest_begin(Fn *F, Nest *N, Node *out, int nops, LLVMValueRef st[][MAX_RANK], LLVMValueRef *off)
{
	Gen *G = F->gen;
	N->rank = out->rank;
	for (int j = 0; j < nops; j++)
		off[j] = ci64(G, 0);
	for (int k = 0; k < out->rank; k++) {
		if (k == 0 && F->par_lo)
			N->idx[k] = loop_begin(F, &N->loops[k], F->par_lo, F->par_hi);
		else
			N->idx[k] = loop_begin(F, &N->loops[k], ci64(G, 0), dimv(F, out, k));
		for (int j = 0; j < nops; j++)
			off[j] = llvm.LLVMBuildAdd(G->B, off[j], llvm.LLVMBuildMul(G->B, N->idx[k], st[j][k], ""), "");
	}
}

static void nest_end(Fn *F, Nest *N)
{
	for (int k = N->rank - 1; k >= 0; k--)
		loop_end(F, &N->loops[k]);
}

/* ---- scalar operations ---- */

static LLVMValueRef to_i1(Gen *G, LLVMValueRef b8)
{
	return llvm.LLVMBuildICmp(G->B, LLVMIntNE, b8, llvm.LLVMConstInt(G->i8, 0, 0), "");
}

static LLVMValueRef from_i1(Gen *G, LLVMValueRef b1)
{
	return llvm.LLVMBuildZExt(G->B, b1, G->i8, "");
}

/* maximum/minimum propagating NaN, as NumPy's maximum does */
static LLVMValueRef fmaxmin(Gen *G, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c = llvm.LLVMBuildFCmp(G->B, is_max ? LLVMRealOGT : LLVMRealOLT, a, b, "");
	LLVMValueRef r = llvm.LLVMBuildSelect(G->B, c, a, b, "");
	r = llvm.LLVMBuildSelect(G->B, llvm.LLVMBuildFCmp(G->B, LLVMRealUNO, a, a, ""), a, r, "");
	return llvm.LLVMBuildSelect(G->B, llvm.LLVMBuildFCmp(G->B, LLVMRealUNO, b, b, ""), b, r, "");
}

static LLVMValueRef imaxmin(Gen *G, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c = llvm.LLVMBuildICmp(G->B, is_max ? LLVMIntSGT : LLVMIntSLT, a, b, "");
	return llvm.LLVMBuildSelect(G->B, c, a, b, "");
}

/* exp for f32 as plain arithmetic that the loop vectoriser can widen (a libm
 * call per element is most of a transformer's time otherwise): Cephes' range
 * reduction to [-ln2/2, ln2/2], a degree-6 polynomial, and the power of two
 * put into the exponent bits. Relative error about 2e-7; NaN, +-inf and
 * underflow keep their meaning. f64 keeps libm's exp. */
static LLVMValueRef exp_fast(Gen *G, DType dt, LLVMValueRef x)
{
	if (dt != DT_F32)
		return math1(G, "llvm.exp", dt, x);
	LLVMBuilderRef B = G->B;
	LLVMValueRef hi = fconst(G, dt, 88.3762626647949), lo = fconst(G, dt, -88.3762626647949);
	LLVMValueRef xc = math2(G, "llvm.minnum", dt, math2(G, "llvm.maxnum", dt, x, lo), hi);
	LLVMValueRef n = math1(G, "llvm.floor", dt,
	                       llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, xc, fconst(G, dt, 1.44269504088896341), ""),
	                                          fconst(G, dt, 0.5), ""));
	LLVMValueRef r = llvm.LLVMBuildFSub(B, xc, llvm.LLVMBuildFMul(B, n, fconst(G, dt, 0.693359375), ""), "");
	r = llvm.LLVMBuildFSub(B, r, llvm.LLVMBuildFMul(B, n, fconst(G, dt, -2.12194440e-4), ""), "");
	static const double c[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
	                           1.6666665459E-1, 5.0000001201E-1};
	LLVMValueRef p = fconst(G, dt, c[0]);
	for (int i = 1; i < 6; i++)
		p = llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, p, r, ""), fconst(G, dt, c[i]), "");
	p = llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildFMul(B, p, llvm.LLVMBuildFMul(B, r, r, ""), ""), r, ""),
	                       fconst(G, dt, 1), "");
	/* 2^n: n + 127 in the exponent field */
	LLVMValueRef ni = llvm.LLVMBuildFPToSI(B, n, G->i32, "");
	LLVMValueRef bits = llvm.LLVMBuildShl(B, llvm.LLVMBuildAdd(B, ni, ci32(G, 127), ""), ci32(G, 23), "");
	LLVMValueRef e = llvm.LLVMBuildFMul(B, p, llvm.LLVMBuildBitCast(B, bits, G->f32, ""), "");
	e = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), fconst(G, dt, 0), e, "");
	e = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOGT, x, hi, ""), fconst(G, dt, INFINITY), e, "");
	return llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, e, "");
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1), through exp_fast for f32 */
static LLVMValueRef tanh_fast(Gen *G, DType dt, LLVMValueRef x)
{
	if (dt != DT_F32)
		return math1(G, "tanh", dt, x);
	LLVMBuilderRef B = G->B;
	LLVMValueRef e = exp_fast(G, dt, llvm.LLVMBuildFMul(B, x, fconst(G, dt, 2), ""));
	LLVMValueRef t = llvm.LLVMBuildFSub(B, fconst(G, dt, 1),
	                                    llvm.LLVMBuildFDiv(B, fconst(G, dt, 2), llvm.LLVMBuildFAdd(B, e, fconst(G, dt, 1), ""), ""), "");
	/* small |x|: x itself is closer than the difference of two near-equal numbers */
	LLVMValueRef small = llvm.LLVMBuildFCmp(B, LLVMRealOLT, math1(G, "llvm.fabs", dt, x), fconst(G, dt, 1e-4), "");
	return llvm.LLVMBuildSelect(B, small, x, t, "");
}

static LLVMValueRef binop(Fn *F, Op op, DType dt, LLVMValueRef a, LLVMValueRef b)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int fl = dtype_is_float(dt);
	LLVMTypeRef t = elem_t(G, dt);
	switch (op) {
	case OP_ADD: return fl ? llvm.LLVMBuildFAdd(B, a, b, "") : llvm.LLVMBuildAdd(B, a, b, "");
	case OP_SUB: return fl ? llvm.LLVMBuildFSub(B, a, b, "") : llvm.LLVMBuildSub(B, a, b, "");
	case OP_MUL: return fl ? llvm.LLVMBuildFMul(B, a, b, "") : llvm.LLVMBuildMul(B, a, b, "");
	case OP_DIV:
	case OP_MOD: {
		if (fl) {
			if (op == OP_DIV)
				return llvm.LLVMBuildFDiv(B, a, b, "");
			/* NumPy: the remainder takes the sign of the divisor */
			LLVMValueRef r = llvm.LLVMBuildFRem(B, a, b, "");
			LLVMValueRef zero = llvm.LLVMConstReal(t, 0);
			LLVMValueRef nz = llvm.LLVMBuildFCmp(B, LLVMRealONE, r, zero, "");
			LLVMValueRef sr = llvm.LLVMBuildFCmp(B, LLVMRealOLT, r, zero, "");
			LLVMValueRef sb = llvm.LLVMBuildFCmp(B, LLVMRealOLT, b, zero, "");
			LLVMValueRef fix = llvm.LLVMBuildAnd(B, nz, llvm.LLVMBuildXor(B, sr, sb, ""), "");
			return llvm.LLVMBuildSelect(B, fix, llvm.LLVMBuildFAdd(B, r, b, ""), r, "");
		}
		/* floor division and modulo; x/0 and x%0 give 0; MIN/-1 wraps; no trap */
		LLVMValueRef zero = llvm.LLVMConstInt(t, 0, 0), one = llvm.LLVMConstInt(t, 1, 0);
		LLVMValueRef minv = llvm.LLVMConstInt(t, dt == DT_I32 ? (unsigned long long)(uint32_t)INT32_MIN
		                                                 : (unsigned long long)INT64_MIN, 0);
		LLVMValueRef bz = llvm.LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
		LLVMValueRef ovf = llvm.LLVMBuildAnd(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, a, minv, ""),
		                                llvm.LLVMBuildICmp(B, LLVMIntEQ, b, llvm.LLVMConstAllOnes(t), ""), "");
		LLVMValueRef safe = llvm.LLVMBuildSelect(B, llvm.LLVMBuildOr(B, bz, ovf, ""), one, b, "");
		LLVMValueRef q = llvm.LLVMBuildSDiv(B, a, safe, "");
		LLVMValueRef r = llvm.LLVMBuildSRem(B, a, safe, "");
		LLVMValueRef adj = llvm.LLVMBuildAnd(B, llvm.LLVMBuildICmp(B, LLVMIntNE, r, zero, ""),
		                                llvm.LLVMBuildXor(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, r, zero, ""),
		                                             llvm.LLVMBuildICmp(B, LLVMIntSLT, safe, zero, ""), ""), "");
		if (op == OP_DIV) {
			q = llvm.LLVMBuildSelect(B, adj, llvm.LLVMBuildSub(B, q, one, ""), q, "");
			q = llvm.LLVMBuildSelect(B, ovf, minv, q, "");
			return llvm.LLVMBuildSelect(B, bz, zero, q, "");
		}
		r = llvm.LLVMBuildSelect(B, adj, llvm.LLVMBuildAdd(B, r, safe, ""), r, "");
		r = llvm.LLVMBuildSelect(B, ovf, zero, r, "");
		return llvm.LLVMBuildSelect(B, bz, zero, r, "");
	}
	case OP_POW: return math2(G, "llvm.pow", dt, a, b);
	case OP_MAX: return fl ? fmaxmin(G, a, b, 1) : imaxmin(G, a, b, 1);
	case OP_MIN: return fl ? fmaxmin(G, a, b, 0) : imaxmin(G, a, b, 0);
	case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE: {
		LLVMValueRef c;
		if (fl) {
			static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
			c = llvm.LLVMBuildFCmp(B, fp[op - OP_EQ], a, b, "");
		} else {
			static const LLVMIntPredicate ip[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
			c = llvm.LLVMBuildICmp(B, ip[op - OP_EQ], a, b, "");
		}
		return from_i1(G, c);
	}
	case OP_AND: return llvm.LLVMBuildAnd(B, a, b, "");
	case OP_OR: return llvm.LLVMBuildOr(B, a, b, "");
	default: break;
	}
	ice("binop: %s", op_name(op));
}

static LLVMValueRef unop(Fn *F, Op op, DType dt, LLVMValueRef x)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int fl = dtype_is_float(dt);
	switch (op) {
	case OP_NEG: return fl ? llvm.LLVMBuildFNeg(B, x, "") : llvm.LLVMBuildNeg(B, x, "");
	case OP_NOT: return llvm.LLVMBuildXor(B, x, llvm.LLVMConstInt(G->i8, 1, 0), "");
	case OP_EXP: return exp_fast(G, dt, x);
	case OP_LOG: return math1(G, "llvm.log", dt, x);
	case OP_SQRT: return math1(G, "llvm.sqrt", dt, x);
	case OP_RSQRT: return llvm.LLVMBuildFDiv(B, fconst(G, dt, 1), math1(G, "llvm.sqrt", dt, x), "");
	case OP_TANH: return tanh_fast(G, dt, x);
	case OP_SIGMOID:
		return llvm.LLVMBuildFDiv(B, fconst(G, dt, 1),
		                     llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), exp_fast(G, dt, llvm.LLVMBuildFNeg(B, x, "")), ""), "");
	case OP_RELU:
		if (fl) {
			/* max(x, 0) that keeps NaN, like the interpreter */
			LLVMValueRef c = llvm.LLVMBuildFCmp(B, LLVMRealOLT, x, fconst(G, dt, 0), "");
			return llvm.LLVMBuildSelect(B, c, fconst(G, dt, 0), x, "");
		}
		return imaxmin(G, x, llvm.LLVMConstInt(elem_t(G, dt), 0, 0), 1);
	case OP_GELU: {
		LLVMValueRef e = math1(G, "erf", dt, llvm.LLVMBuildFMul(B, x, fconst(G, dt, 0.70710678118654752440), ""));
		return llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, fconst(G, dt, 0.5), x, ""), llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), e, ""), "");
	}
	case OP_GELU_TANH: {
		LLVMValueRef x3 = llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, x, x, ""), x, "");
		LLVMValueRef in = llvm.LLVMBuildFMul(B, fconst(G, dt, 0.79788456080286535588),
		                                llvm.LLVMBuildFAdd(B, x, llvm.LLVMBuildFMul(B, fconst(G, dt, 0.044715), x3, ""), ""), "");
		LLVMValueRef t = tanh_fast(G, dt, in);
		return llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, fconst(G, dt, 0.5), x, ""), llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), t, ""), "");
	}
	case OP_SILU:
		return llvm.LLVMBuildFDiv(B, x,
		                     llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), exp_fast(G, dt, llvm.LLVMBuildFNeg(B, x, "")), ""), "");
	case OP_ERF: return math1(G, "erf", dt, x);
	case OP_ABS:
		if (fl)
			return math1(G, "llvm.fabs", dt, x);
		return llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, x, llvm.LLVMConstInt(elem_t(G, dt), 0, 0), ""),
		                       llvm.LLVMBuildNeg(B, x, ""), x, "");
	case OP_SIN: return math1(G, "llvm.sin", dt, x);
	case OP_COS: return math1(G, "llvm.cos", dt, x);
	default: break;
	}
	ice("unop: %s", op_name(op));
}

static LLVMValueRef cast(Fn *F, LLVMValueRef x, DType from, DType to)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef tt = elem_t(G, to);
	if (from == to)
		return x;
	if (to == DT_BOOL) {
		LLVMValueRef c = dtype_is_float(from) ? llvm.LLVMBuildFCmp(B, LLVMRealUNE, x, llvm.LLVMConstReal(elem_t(G, from), 0), "")
		                                      : llvm.LLVMBuildICmp(B, LLVMIntNE, x, llvm.LLVMConstInt(elem_t(G, from), 0, 0), "");
		return from_i1(G, c);
	}
	if (from == DT_BOOL)
		return dtype_is_float(to) ? llvm.LLVMBuildUIToFP(B, x, tt, "") : llvm.LLVMBuildZExt(B, x, tt, "");
	if (dtype_is_float(from) && dtype_is_float(to))
		return to == DT_F32 ? llvm.LLVMBuildFPTrunc(B, x, tt, "") : llvm.LLVMBuildFPExt(B, x, tt, "");
	if (!dtype_is_float(from) && !dtype_is_float(to))
		return to == DT_I32 ? llvm.LLVMBuildTrunc(B, x, tt, "") : llvm.LLVMBuildSExt(B, x, tt, "");
	if (!dtype_is_float(from))
		return llvm.LLVMBuildSIToFP(B, x, tt, "");
	/* float to int: truncate toward zero, saturating, NaN to 0 (no undefined behaviour) */
	char name[64];
	snprintf(name, sizeof name, "llvm.fptosi.sat.%s.%s", to == DT_I32 ? "i32" : "i64", from == DT_F32 ? "f32" : "f64");
	LLVMTypeRef ft = elem_t(G, from);
	return call(G, name, tt, &ft, &x, 1);
}

/* ---- kernels, one per op ---- */

/* The tensors an elementwise tree reads: the inputs of n and, through the
 * ops made inline into it (plan.c), theirs. */
static void ew_leaves(Fn *F, Node *n, Node **leaf, int *nleaf)
{
	for (int k = 0; k < n->nin; k++) {
		Node *x = n->in[k];
		if (F->plan->ew_into[x->id] == n->id)
			ew_leaves(F, x, leaf, nleaf);
		else
			leaf[(*nleaf)++] = x;
	}
}

/* The value of n at the loop's position: leaves are loaded (in the order
 * ew_leaves lists them), inline ops computed. */
static LLVMValueRef ew_value(Fn *F, Node *n, LLVMValueRef *off, int *next)
{
	Gen *G = F->gen;
	LLVMValueRef in[3];
	for (int k = 0; k < n->nin; k++) {
		Node *x = n->in[k];
		if (F->plan->ew_into[x->id] == n->id) {
			in[k] = ew_value(F, x, off, next);
		} else {
			in[k] = load_at(F, x, off[*next]);
			(*next)++;
		}
	}
	if (n->op == OP_WHERE)
		return llvm.LLVMBuildSelect(G->B, to_i1(G, in[0]), in[1], in[2], "");
	if (n->nin == 2)
		return binop(F, n->op, n->in[0]->dtype, in[0], in[1]);
	if (n->op == OP_CAST)
		return cast(F, in[0], n->in[0]->dtype, n->dtype);
	return unop(F, n->op, n->dtype, in[0]);
}

/* An elementwise op with the ops made inline into it: one loop nest over
 * its shape, each tensor read through its own (broadcast) strides. */
static void k_elementwise(Fn *F, Node *n)
{
	Node *leaf[EW_LEAVES];
	int nleaf = 0;
	ew_leaves(F, n, leaf, &nleaf);
	LLVMValueRef st[EW_LEAVES + 1][MAX_RANK], off[EW_LEAVES + 1];
	for (int j = 0; j < nleaf; j++)
		strides(F, leaf[j], n->rank, n, st[j]);
	strides(F, n, n->rank, NULL, st[nleaf]);
	Nest N;
	nest_begin(F, &N, n, nleaf + 1, st, off);
	int next = 0;
	LLVMValueRef v = ew_value(F, n, off, &next);
	store_at(F, n, off[nleaf], v);
	nest_end(F, &N);
}

static LLVMValueRef const_value(Gen *G, Node *n)
{
	if (dtype_is_float(n->dtype))
		return llvm.LLVMConstReal(elem_t(G, n->dtype), n->fval);
	return llvm.LLVMConstInt(elem_t(G, n->dtype), (unsigned long long)n->ival, 1);
}

static void k_fill(Fn *F, Node *n)
{
	Gen *G = F->gen;
	Loop L;
	LLVMValueRef i = loop_begin(F, &L, ci64(G, 0), numelv(F, n));
	LLVMValueRef v = n->op == OP_ARANGE ? i : const_value(G, n);
	store_at(F, n, i, v);
	loop_end(F, &L);
}

static void k_copy_strided(Fn *F, Node *n, Node *src, LLVMValueRef *sst, LLVMValueRef base)
{
	LLVMValueRef st[2][MAX_RANK], off[2];
	memcpy(st[0], sst, sizeof st[0]);
	strides(F, n, n->rank, NULL, st[1]);
	Nest N;
	nest_begin(F, &N, n, 2, st, off);
	LLVMValueRef o = base ? llvm.LLVMBuildAdd(F->gen->B, off[0], base, "") : off[0];
	store_at(F, n, off[1], load_at(F, src, o));
	nest_end(F, &N);
}

static void k_transpose(Fn *F, Node *n)
{
	Node *x = n->in[0];
	LLVMValueRef xs[MAX_RANK], st[MAX_RANK];
	strides(F, x, x->rank, NULL, xs);
	for (int k = 0; k < n->rank; k++)
		st[k] = xs[n->a[k]];
	k_copy_strided(F, n, x, st, NULL);
}

static void k_slice(Fn *F, Node *n)
{
	Gen *G = F->gen;
	Node *x = n->in[0];
	LLVMValueRef xs[MAX_RANK];
	strides(F, x, x->rank, NULL, xs);
	LLVMValueRef base = ci64(G, 0);
	for (int k = 0; k < x->rank; k++)
		base = llvm.LLVMBuildAdd(G->B, base, llvm.LLVMBuildMul(G->B, attrv(F, n, k), xs[k], ""), "");
	k_copy_strided(F, n, x, xs, base);
}

static void k_expand(Fn *F, Node *n)
{
	LLVMValueRef st[MAX_RANK];
	strides(F, n->in[0], n->rank, n, st);
	k_copy_strided(F, n, n->in[0], st, NULL);
}

static void k_concat(Fn *F, Node *n)
{
	Gen *G = F->gen;
	int ax = (int)n->a[0];
	LLVMValueRef os[MAX_RANK];
	strides(F, n, n->rank, NULL, os);
	LLVMValueRef at = ci64(G, 0);
	for (int j = 0; j < n->nin; j++) {
		Node *x = n->in[j];
		LLVMValueRef st[2][MAX_RANK], off[2];
		strides(F, x, x->rank, NULL, st[0]);
		memcpy(st[1], os, sizeof os);
		Nest N;
		nest_begin(F, &N, x, 2, st, off);
		LLVMValueRef o = llvm.LLVMBuildAdd(G->B, off[1], llvm.LLVMBuildMul(G->B, at, os[ax], ""), "");
		store_at(F, n, o, load_at(F, x, off[0]));
		nest_end(F, &N);
		at = llvm.LLVMBuildAdd(G->B, at, dimv(F, x, ax), "");
	}
}

#define MM_MAX_MR 16

/* One register tile of C = A @ B: mr rows by nv vectors of vw columns over
 * k in [0, K); the accumulators stay in registers for the whole k loop (phi
 * nodes). A's elements (rows K apart from arow) are broadcast,
 * B's rows (ldb apart, from column bj) loaded as vectors into FMAs; the tile
 * is stored at C[crow + r*ldc + cj]. */
static void mm_tile(Fn *F, Node *n, Node *a, int mr, int nv, int vw, LLVMValueRef pf, LLVMValueRef pfline,
                    LLVMValueRef pflast, LLVMValueRef K, LLVMValueRef arow, LLVMValueRef bbase, LLVMValueRef ldb,
                    LLVMValueRef bj, LLVMValueRef cbase, LLVMValueRef crow, LLVMValueRef ldc, LLVMValueRef cj)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	DType dt = n->dtype;
	LLVMTypeRef et = elem_t(G, dt), vt = llvm.LLVMVectorType(et, (unsigned)vw);
	LLVMTypeRef vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef acc[MM_MAX_MR][4], cp[MM_MAX_MR][4];
	LLVMValueRef zv = llvm.LLVMConstNull(vt);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			LLVMValueRef off = llvm.LLVMBuildAdd(B, llvm.LLVMBuildAdd(B, crow, llvm.LLVMBuildMul(B, ci64(G, r), ldc, ""), ""),
			                                     llvm.LLVMBuildAdd(B, cj, ci64(G, v * vw), ""), "");
			cp[r][v] = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, cbase, &off, 1, ""), vpt, "");
		}
	LLVMBasicBlockRef pre = llvm.LLVMGetInsertBlock(B);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			acc[r][v] = zv;
	LLVMBasicBlockRef head = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmk");
	LLVMBasicBlockRef body = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmkbody");
	LLVMBasicBlockRef done = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "mmkdone");
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMPositionBuilderAtEnd(B, head);
	LLVMValueRef k = llvm.LLVMBuildPhi(B, G->i64, "k");
	LLVMValueRef k0 = ci64(G, 0);
	llvm.LLVMAddIncoming(k, &k0, &pre, 1);
	LLVMValueRef phi[MM_MAX_MR][4];
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			phi[r][v] = llvm.LLVMBuildPhi(B, vt, "acc");
			llvm.LLVMAddIncoming(phi[r][v], &acc[r][v], &pre, 1);
		}
	llvm.LLVMBuildCondBr(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, k, K, ""), body, done);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	LLVMValueRef bv[4], nacc[MM_MAX_MR][4];
	LLVMValueRef brow = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, k, ldb, ""), bj, "");
	for (int v = 0; v < nv; v++) {
		LLVMValueRef off = llvm.LLVMBuildAdd(B, brow, ci64(G, v * vw), "");
		LLVMValueRef p = llvm.LLVMBuildGEP2(B, et, bbase, &off, 1, "");
		bv[v] = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, vpt, ""), "");
		llvm.LLVMSetAlignment(bv[v], (unsigned)dtype_size(dt));
	}
	LLVMValueRef mask0 = llvm.LLVMConstNull(llvm.LLVMVectorType(G->i32, (unsigned)vw));
	char fma[32];
	snprintf(fma, sizeof fma, "llvm.fma.v%d%s", vw, dt == DT_F32 ? "f32" : "f64");
	for (int r = 0; r < mr; r++) {
		LLVMValueRef aoff = llvm.LLVMBuildAdd(B, llvm.LLVMBuildAdd(B, arow, llvm.LLVMBuildMul(B, ci64(G, r), K, ""), ""), k, "");
		LLVMValueRef sc = load_at(F, a, aoff);
		LLVMValueRef one = llvm.LLVMBuildInsertElement(B, llvm.LLVMGetUndef(vt), sc, ci32(G, 0), "");
		LLVMValueRef bc = llvm.LLVMBuildShuffleVector(B, one, llvm.LLVMGetUndef(vt), mask0, "");
		for (int v = 0; v < nv; v++) {
			LLVMTypeRef ts[3] = {vt, vt, vt};
			LLVMValueRef vs[3] = {bc, bv[v], phi[r][v]};
			nacc[r][v] = call(G, fma, vt, ts, vs, 3);
		}
	}
	if (pf) {
		/* one line of the next panel per k (clamped to its last line) */
		LLVMValueRef line = llvm.LLVMBuildAdd(B, pfline, k, "");
		line = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, line, pflast, ""), line, pflast, "");
		LLVMValueRef off = llvm.LLVMBuildMul(B, line, ci64(G, 64), "");
		prefetch_l2(G, llvm.LLVMBuildGEP2(B, G->i8, pf, &off, 1, ""));
	}
	LLVMValueRef kn = llvm.LLVMBuildAdd(B, k, ci64(G, 1), "");
	LLVMBasicBlockRef end = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMBuildBr(B, head);
	llvm.LLVMAddIncoming(k, &kn, &end, 1);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++)
			llvm.LLVMAddIncoming(phi[r][v], &nacc[r][v], &end, 1);
	llvm.LLVMPositionBuilderAtEnd(B, done);
	for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			LLVMValueRef st = llvm.LLVMBuildStore(B, phi[r][v], cp[r][v]);
			llvm.LLVMSetAlignment(st, (unsigned)dtype_size(dt));
		}
}

/* Rows [0, M) of one panel as register tiles: tiles of mr rows, then the
 * rest by 8, 4, 2 and 1 rows. Arguments as mm_tile's, with the rows' bases
 * (arow0, crow0) for row 0. */
/* M and N of a matmul's result when they are compile-time constants, else -1. */
static int64_t mm_static_m(Fn *F, Node *n, Node *a)
{
	if ((F->v && F->v->ndyn) || n->rank < 1)
		return -1;
	return n->rank >= 2 && a->rank != 1 ? n->shape[n->rank - 2] : 1;
}

static int64_t mm_static_n(Fn *F, Node *n)
{
	return (F->v && F->v->ndyn) || n->rank < 1 ? -1 : n->shape[n->rank - 1];
}

static void mm_rows(Fn *F, Node *n, Node *a, int mr, int nv, int vw, LLVMValueRef pf, LLVMValueRef pflast, LLVMValueRef M,
                    LLVMValueRef K, LLVMValueRef arow0, LLVMValueRef panel, LLVMValueRef wide,
                    LLVMValueRef cbase, LLVMValueRef crow0, LLVMValueRef ldc, LLVMValueRef cj)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int sizes[5] = {mr, 8, 4, 2, 1};
	/* with M known, only the tile heights it needs (less code to compile) */
	int64_t Ms = mm_static_m(F, n, a), left = Ms;
	LLVMValueRef done = ci64(G, 0);
	for (int s = 0; s < 5; s++) {
		int h = sizes[s];
		if (s > 0 && h >= mr)
			continue;
		if (Ms >= 0) {
			int64_t cnt = left / h;
			left -= cnt * h;
			if (cnt == 0)
				continue;
		}
		LLVMValueRef cnt = llvm.LLVMBuildSDiv(B, llvm.LLVMBuildSub(B, M, done, ""), ci64(G, h), "");
		Loop lt;
		LLVMValueRef t = loop_begin(F, &lt, ci64(G, 0), cnt);
		LLVMValueRef i = llvm.LLVMBuildAdd(B, done, llvm.LLVMBuildMul(B, t, ci64(G, h), ""), "");
		/* tile t prefetches lines t*K.. of the next panel: the first few
		 * tiles fetch all of it while the rest compute */
		LLVMValueRef pfline = pf ? llvm.LLVMBuildMul(B, llvm.LLVMBuildSDiv(B, i, ci64(G, h), ""), K, "") : NULL;
		mm_tile(F, n, a, h, nv, vw, pf, pfline, pflast, K, llvm.LLVMBuildAdd(B, arow0, llvm.LLVMBuildMul(B, i, K, ""), ""),
		        panel, wide, ci64(G, 0), cbase, llvm.LLVMBuildAdd(B, crow0, llvm.LLVMBuildMul(B, i, ldc, ""), ""), ldc, cj);
		loop_end(F, &lt);
		done = llvm.LLVMBuildAdd(B, done, llvm.LLVMBuildMul(B, cnt, ci64(G, h), ""), "");
	}
}

/* The register tile of a matmul: mr rows by nv vectors. On AVX-512, 8 rows
 * by 3 vectors (24 accumulators of its 32 registers; per k, 8 broadcasts and
 * 3 loads feed 24 FMAs) measured best at the GPT-2 shapes; 12 by 2 (as many
 * accumulators) when N is a multiple of 2 vectors but not of 3 and small
 * enough that a partial panel would cost. 4 by 2 elsewhere (16 registers).
 * Blocking k so a panel's slice stays in L1 measured slower at the GPT-2
 * shapes than running the whole k with the panel in L2, with or without A
 * packed. */
static void mm_shape(Gen *G, Node *n, int *mr, int *nv)
{
	int vw = G->vbytes / dtype_size(n->dtype);
	int64_t N = n->rank ? n->shape[n->rank - 1] : 1;
	if (G->vbytes != 64) {
		*mr = 4, *nv = 2;
	} else if (N > 0 && (N % (3 * vw) == 0 || N >= 1536)) {
		*mr = 8, *nv = 3;
	} else {
		*mr = 12, *nv = 2;
	}
}

/* The operand other than the chain's value of each op of a matmul's fused
 * epilogue (plan.c), NULL for a unary op; returns how many ops. */
static int mm_epilogue(Fn *F, Node *n, Node **ops, Node **other)
{
	int k = 0;
	Node *prev = n;
	for (int e = F->plan->epi_next[n->id]; e >= 0; e = F->plan->epi_next[e]) {
		Node *x = F->g->nodes[e];
		ops[k] = x;
		other[k] = x->nin == 2 ? (x->in[0] == prev ? x->in[1] : x->in[0]) : NULL;
		prev = x;
		k++;
	}
	return k;
}

/* A scalar of constants (plan.c), as LLVM constants fold it. */
static LLVMValueRef const_scalar(Fn *F, Node *x)
{
	if (x->op == OP_CONST)
		return const_value(F->gen, x);
	if (x->nin == 1)
		return unop(F, x->op, x->dtype, const_scalar(F, x->in[0]));
	return binop(F, x->op, x->in[0]->dtype, const_scalar(F, x->in[0]), const_scalar(F, x->in[1]));
}

/* The epilogue on columns [cw, cw + ncols) of every row, in place: the
 * panel's results are still in the cache. */
static void mm_epilogue_apply(Fn *F, Node *n, LLVMValueRef M, LLVMValueRef Nn, LLVMValueRef oo, LLVMValueRef cw,
                              LLVMValueRef ncols)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *ops[8], *other[8];
	int k = mm_epilogue(F, n, ops, other);
	if (!k)
		return;
	Loop li, lj;
	LLVMValueRef i = loop_begin(F, &li, ci64(G, 0), M);
	LLVMValueRef row = llvm.LLVMBuildAdd(B, oo, llvm.LLVMBuildMul(B, i, Nn, ""), "");
	LLVMValueRef j = loop_begin(F, &lj, ci64(G, 0), ncols);
	LLVMValueRef col = llvm.LLVMBuildAdd(B, cw, j, "");
	LLVMValueRef off = llvm.LLVMBuildAdd(B, row, col, "");
	LLVMValueRef v = load_at(F, n, off);
	Node *prev = n;
	for (int e = 0; e < k; e++) {
		Node *x = ops[e], *o = other[e];
		if (x->op == OP_CAUSAL_MASK) {
			/* above the diagonal of each matrix */
			LLVMValueRef above = llvm.LLVMBuildICmp(B, LLVMIntSGT, col, i, "");
			v = llvm.LLVMBuildSelect(B, above, fconst(G, x->dtype, -INFINITY), v, "");
		} else if (!o) {
			v = unop(F, x->op, x->dtype, v);
		} else {
			LLVMValueRef at = o->rank == 0 ? ci64(G, 0) : o->rank == 1 || (o->rank == 2 && o->shape[0] == 1) ? col : off;
			LLVMValueRef ov = scalar_of_consts(o, 0) ? const_scalar(F, o) : load_at(F, o, at);
			v = x->in[0] == prev ? binop(F, x->op, x->dtype, v, ov) : binop(F, x->op, x->dtype, ov, v);
		}
		prev = x;
	}
	store_at(F, n, off, v);
	loop_end(F, &lj);
	loop_end(F, &li);
}

/* One panel of B, columns jw*wide .. +wide, against every row of A: the
 * panel is the pre-packed copy when `packed` (a run-time pointer, NULL when
 * the runtime has none) points to one, else packed here into `buf` (B's rows
 * are far apart in memory and alias in the cache). A last, partial panel is
 * packed with zeros beyond N, its tiles go to `tmp` (M rows of wide columns)
 * and the valid columns are copied to C. */
static void mm_panel(Fn *F, Node *n, Node *a, LLVMValueRef bbase, LLVMValueRef packed, LLVMValueRef buf,
                     LLVMValueRef tmp, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn, LLVMValueRef oa,
                     LLVMValueRef ob, LLVMValueRef oo, LLVMValueRef jw, int tb)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype);
	int vw = G->vbytes / dtype_size(n->dtype), nv, mr;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef wide = ci64(G, nv * vw);
	LLVMTypeRef vt = llvm.LLVMVectorType(et, (unsigned)vw);
	LLVMTypeRef vpt = llvm.LLVMPointerType(vt, 0);
	LLVMValueRef zero = fconst(G, n->dtype, 0);
	LLVMValueRef cw = llvm.LLVMBuildMul(B, jw, wide, "");
	LLVMValueRef left = llvm.LLVMBuildSub(B, Nn, cw, "");
	LLVMValueRef full = llvm.LLVMBuildICmp(B, LLVMIntSGE, left, wide, "");
	LLVMValueRef lastcol = llvm.LLVMBuildSub(B, Nn, ci64(G, 1), "");

	LLVMBasicBlockRef pk_yes = NULL, pk_no = NULL, join = NULL;
	LLVMValueRef pk_ptr = NULL;
	if (packed) {
		pk_yes = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "prepacked");
		pk_no = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "pack");
		join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packed");
		LLVMValueRef have = llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), "");
		llvm.LLVMBuildCondBr(B, have, pk_yes, pk_no);
		llvm.LLVMPositionBuilderAtEnd(B, pk_yes);
		LLVMValueRef off = llvm.LLVMBuildMul(B, cw, K, "");
		pk_ptr = llvm.LLVMBuildGEP2(B, et, llvm.LLVMBuildPointerCast(B, packed, llvm.LLVMPointerType(et, 0), ""), &off, 1, "");
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, pk_no);
	}
	Loop lp, lc, lk;
	if (tb) {
		/* B given transposed, Bt[N, K]: its rows cw.. become the panel's
		 * columns, read along k (contiguous); beyond N, zeros. */
		LLVMValueRef c = loop_begin(F, &lc, ci64(G, 0), wide);
		LLVMValueRef col = llvm.LLVMBuildAdd(B, cw, c, "");
		LLVMValueRef in = llvm.LLVMBuildICmp(B, LLVMIntSLT, col, Nn, "");
		LLVMValueRef row = llvm.LLVMBuildMul(B, llvm.LLVMBuildSelect(B, in, col, lastcol, ""), K, "");
		LLVMValueRef kk = loop_begin(F, &lk, ci64(G, 0), K);
		LLVMValueRef so = llvm.LLVMBuildAdd(B, row, kk, "");
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, bbase, &so, 1, ""), "");
		LLVMValueRef dof = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, kk, wide, ""), c, "");
		llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, in, x, zero, ""), llvm.LLVMBuildGEP2(B, et, buf, &dof, 1, ""));
		loop_end(F, &lk);
		loop_end(F, &lc);
	} else {
		/* B[:, cw:cw+wide] by vectors when whole, else element by element */
		LLVMBasicBlockRef vec = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packvec");
		LLVMBasicBlockRef sca = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packone");
		LLVMBasicBlockRef pdone = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "packdone");
		llvm.LLVMBuildCondBr(B, full, vec, sca);
		llvm.LLVMPositionBuilderAtEnd(B, vec);
		LLVMValueRef kp = loop_begin(F, &lp, ci64(G, 0), K);
		for (int v = 0; v < nv; v++) {
			LLVMValueRef so = llvm.LLVMBuildAdd(B, llvm.LLVMBuildAdd(B, ob, llvm.LLVMBuildMul(B, kp, Nn, ""), ""),
			                                    llvm.LLVMBuildAdd(B, cw, ci64(G, v * vw), ""), "");
			LLVMValueRef x = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, bbase, &so, 1, ""), vpt, ""), "");
			llvm.LLVMSetAlignment(x, (unsigned)dtype_size(n->dtype));
			LLVMValueRef dof = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, kp, wide, ""), ci64(G, v * vw), "");
			LLVMValueRef st = llvm.LLVMBuildStore(B, x, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, buf, &dof, 1, ""), vpt, ""));
			llvm.LLVMSetAlignment(st, (unsigned)dtype_size(n->dtype));
		}
		loop_end(F, &lp);
		llvm.LLVMBuildBr(B, pdone);
		llvm.LLVMPositionBuilderAtEnd(B, sca);
		LLVMValueRef k2 = loop_begin(F, &lk, ci64(G, 0), K);
		LLVMValueRef c = loop_begin(F, &lc, ci64(G, 0), wide);
		LLVMValueRef col = llvm.LLVMBuildAdd(B, cw, c, "");
		LLVMValueRef in = llvm.LLVMBuildICmp(B, LLVMIntSLT, col, Nn, "");
		LLVMValueRef so = llvm.LLVMBuildAdd(B, llvm.LLVMBuildAdd(B, ob, llvm.LLVMBuildMul(B, k2, Nn, ""), ""),
		                                    llvm.LLVMBuildSelect(B, in, col, lastcol, ""), "");
		LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, bbase, &so, 1, ""), "");
		LLVMValueRef dof = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, k2, wide, ""), c, "");
		llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, in, x, zero, ""), llvm.LLVMBuildGEP2(B, et, buf, &dof, 1, ""));
		loop_end(F, &lc);
		loop_end(F, &lk);
		llvm.LLVMBuildBr(B, pdone);
		llvm.LLVMPositionBuilderAtEnd(B, pdone);
	}
	LLVMValueRef panel = buf, pf = NULL, pflast = NULL;
	if (packed) {
		LLVMBasicBlockRef from = llvm.LLVMGetInsertBlock(B);
		llvm.LLVMBuildBr(B, join);
		llvm.LLVMPositionBuilderAtEnd(B, join);
		panel = llvm.LLVMBuildPhi(B, llvm.LLVMPointerType(et, 0), "panel");
		LLVMValueRef in[2] = {pk_ptr, buf};
		LLVMBasicBlockRef bb[2] = {pk_yes, from};
		llvm.LLVMAddIncoming(panel, in, bb, 2);
		{
			/* the next pre-packed panel, fetched into L2 while this one runs
			 * (after the last panel, or packed here: this one's lines again,
			 * in the cache already) */
			LLVMValueRef plen = llvm.LLVMBuildMul(B, K, wide, "");
			LLVMValueRef more = llvm.LLVMBuildAnd(B, llvm.LLVMBuildICmp(B, LLVMIntSGT, llvm.LLVMBuildSub(B, Nn, cw, ""), wide, ""),
			                                      llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), ""), "");
			LLVMValueRef step = llvm.LLVMBuildSelect(B, more, plen, ci64(G, 0), "");
			pf = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, et, panel, &step, 1, ""), G->i8p, "");
			pflast = llvm.LLVMBuildSub(B, llvm.LLVMBuildSDiv(B, llvm.LLVMBuildMul(B, plen, ci64(G, dtype_size(n->dtype)), ""), ci64(G, 64), ""), ci64(G, 1), "");
		}
	}

	LLVMBasicBlockRef whole = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "whole");
	LLVMBasicBlockRef part = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "part");
	LLVMBasicBlockRef after = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "panelend");
	llvm.LLVMBuildCondBr(B, full, whole, part);
	/* a whole panel: straight into C (no code when N is known to have none) */
	int64_t Ns = mm_static_n(F, n);
	llvm.LLVMPositionBuilderAtEnd(B, whole);
	if (Ns < 0 || Ns >= nv * vw)
		mm_rows(F, n, a, mr, nv, vw, pf, pflast, M, K, oa, panel, wide, nptr(F, n), oo, Nn, cw);
	llvm.LLVMBuildBr(B, after);
	/* the last columns: into tmp, then the valid ones to C */
	llvm.LLVMPositionBuilderAtEnd(B, part);
	if (Ns >= 0 && Ns % (nv * vw) == 0) {
		llvm.LLVMBuildBr(B, after);
		llvm.LLVMPositionBuilderAtEnd(B, after);
		mm_epilogue_apply(F, n, M, Nn, oo, cw, llvm.LLVMBuildSelect(B, full, wide, left, ""));
		return;
	}
	mm_rows(F, n, a, mr, nv, vw, NULL, NULL, M, K, oa, panel, wide, tmp, ci64(G, 0), wide, ci64(G, 0));
	Loop li, lj;
	LLVMValueRef i = loop_begin(F, &li, ci64(G, 0), M);
	LLVMValueRef j = loop_begin(F, &lj, ci64(G, 0), left);
	LLVMValueRef so = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, i, wide, ""), j, "");
	LLVMValueRef x = llvm.LLVMBuildLoad2(B, et, llvm.LLVMBuildGEP2(B, et, tmp, &so, 1, ""), "");
	store_at(F, n, llvm.LLVMBuildAdd(B, llvm.LLVMBuildAdd(B, oo, llvm.LLVMBuildMul(B, i, Nn, ""), ""), llvm.LLVMBuildAdd(B, cw, j, ""), ""), x);
	loop_end(F, &lj);
	loop_end(F, &li);
	llvm.LLVMBuildBr(B, after);
	llvm.LLVMPositionBuilderAtEnd(B, after);
	mm_epilogue_apply(F, n, M, Nn, oo, cw, llvm.LLVMBuildSelect(B, full, wide, left, ""));
}

/* A matmul as tasks of the runtime's thread pool: a function of this module
 * runs tasks [begin, end) with its packing buffers on its own stack; the
 * operands and sizes travel in an i64 array (a, b, c, M, K, N, packed). A
 * task is a panel of B's columns (MM_PANELS) or one matrix of a batch
 * (MM_BATCH). */
enum { MM_PANELS, MM_BATCH };

static void mm_tiled(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                     LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo, int plain, int tb, LLVMValueRef packed,
                     LLVMValueRef buf_in, LLVMValueRef tmp_in);

/* A function of this module that the pool runs as tasks (env, begin, end):
 * `vals` (i64s) are stored in an array of the caller's frame, T is set up
 * for the task's body with the builder at its start and the values loaded
 * into got[]. task_end closes it and runs it on the pool. */
typedef struct Task {
	LLVMValueRef fn, env;
	LLVMBasicBlockRef saved;
} Task;

static Task task_begin(Fn *F, Fn *T, const char *kind, LLVMValueRef *vals, int nvals, LLVMValueRef *got)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Task t;
	LLVMTypeRef env_t = llvm.LLVMArrayType(G->i64, (unsigned)nvals);
	t.env = entry_alloca(F, env_t, "taskenv");
	for (int i = 0; i < nvals; i++) {
		LLVMValueRef ix[2] = {ci32(G, 0), ci32(G, i)};
		llvm.LLVMBuildStore(B, vals[i], llvm.LLVMBuildGEP2(B, env_t, t.env, ix, 2, ""));
	}
	LLVMTypeRef tt_args[3] = {G->i8p, G->i64, G->i64};
	LLVMTypeRef task_t = llvm.LLVMFunctionType(llvm.LLVMVoidTypeInContext(G->C), tt_args, 3, 0);
	char name[64];
	snprintf(name, sizeof name, "%s.task.%d", kind, G->ntask++);
	t.fn = llvm.LLVMAddFunction(G->M, name, task_t);
	llvm.LLVMSetLinkage(t.fn, LLVMInternalLinkage);
	fn_attrs(G, t.fn, F->v);
	t.saved = llvm.LLVMGetInsertBlock(B);
	*T = (Fn){.gen = G, .g = F->g, .plan = F->plan, .v = F->v, .fn = t.fn};
	T->ptr = xcalloc((size_t)F->g->nnodes + 1, sizeof(LLVMValueRef));
	T->entry = llvm.LLVMAppendBasicBlockInContext(G->C, t.fn, "entry");
	LLVMBasicBlockRef start = llvm.LLVMAppendBasicBlockInContext(G->C, t.fn, "start");
	llvm.LLVMPositionBuilderAtEnd(B, T->entry);
	LLVMValueRef e = llvm.LLVMBuildPointerCast(B, llvm.LLVMGetParam(t.fn, 0), llvm.LLVMPointerType(env_t, 0), "");
	for (int i = 0; i < nvals; i++) {
		LLVMValueRef ix[2] = {ci32(G, 0), ci32(G, i)};
		got[i] = llvm.LLVMBuildLoad2(B, G->i64, llvm.LLVMBuildGEP2(B, env_t, e, ix, 2, ""), "");
	}
	/* allocas stay in the entry block, before this branch */
	llvm.LLVMBuildBr(B, start);
	llvm.LLVMPositionBuilderAtEnd(B, start);
	return t;
}

static void task_end(Fn *F, Fn *T, Task *t, LLVMValueRef ntasks)
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

static void mm_pool(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                    LLVMValueRef ntasks, int what, int tb, LLVMValueRef packed)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int vw = G->vbytes / dtype_size(n->dtype);
	/* then the other operands of the fused epilogue */
	Node *ops[8], *other[8];
	int nepi = mm_epilogue(F, n, ops, other);
	int nenv = 8 + nepi;
	/* with pre-packed panels a task takes a run of them (3 runs a thread,
	 * as even as can be), so that the next panel it prefetches is its own;
	 * else a panel a task, which balances the threads best */
	LLVMValueRef parts = ntasks;
	if (what == MM_PANELS && packed) {
		LLVMValueRef nth = call(G, "nestrt_num_threads", G->i32, NULL, NULL, 0);
		LLVMValueRef runs = llvm.LLVMBuildMul(B, llvm.LLVMBuildSExt(B, nth, G->i64, ""), ci64(G, 3), "");
		runs = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, runs, ntasks, ""), runs, ntasks, "");
		LLVMValueRef have = llvm.LLVMBuildICmp(B, LLVMIntNE, packed, llvm.LLVMConstPointerNull(G->i8p), "");
		parts = llvm.LLVMBuildSelect(B, have, runs, ntasks, "");
		ntasks = parts;
	}
	LLVMValueRef vals[8 + 8] = {
		llvm.LLVMBuildPtrToInt(B, nptr(F, a), G->i64, ""), llvm.LLVMBuildPtrToInt(B, nptr(F, b), G->i64, ""),
		llvm.LLVMBuildPtrToInt(B, nptr(F, n), G->i64, ""), M, K, Nn,
		packed ? llvm.LLVMBuildPtrToInt(B, packed, G->i64, "") : ci64(G, 0), parts,
	};
	for (int i = 0; i < nepi; i++)
		vals[8 + i] = other[i] && !scalar_of_consts(other[i], 0) ? llvm.LLVMBuildPtrToInt(B, nptr(F, other[i]), G->i64, "")
		                                                   : ci64(G, 0);
	Fn T;
	LLVMValueRef got[8 + 8];
	Task tk = task_begin(F, &T, "mm", vals, nenv, got);
	for (int i = 0; i < nepi; i++)
		if (other[i] && !scalar_of_consts(other[i], 0))
			T.ptr[other[i]->id] = llvm.LLVMBuildIntToPtr(B, got[8 + i], llvm.LLVMPointerType(elem_t(G, other[i]->dtype), 0), "");
	T.ptr[a->id] = llvm.LLVMBuildIntToPtr(B, got[0], ept, "a");
	T.ptr[b->id] = llvm.LLVMBuildIntToPtr(B, got[1], ept, "b");
	T.ptr[n->id] = llvm.LLVMBuildIntToPtr(B, got[2], ept, "c");
	LLVMValueRef tpk = packed ? llvm.LLVMBuildIntToPtr(B, got[6], G->i8p, "packed") : NULL;
	int mr, nv;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef wide = ci64(G, nv * vw);
	/* the packing buffers, sized at run time, on the task's stack (the
	 * entry block, so that they are allocated once per task call) */
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	LLVMValueRef buf = llvm.LLVMBuildArrayAlloca(B, et, llvm.LLVMBuildMul(B, got[4], wide, ""), "panel");
	llvm.LLVMSetAlignment(buf, 64);
	LLVMValueRef tmp = llvm.LLVMBuildArrayAlloca(B, et, llvm.LLVMBuildMul(B, got[3], wide, ""), "part");
	llvm.LLVMSetAlignment(tmp, 64);
	llvm.LLVMPositionBuilderAtEnd(B, body);
	Loop lt;
	LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	LLVMValueRef z = ci64(G, 0);
	if (what == MM_PANELS) {
		LLVMValueRef np = llvm.LLVMBuildSDiv(B, llvm.LLVMBuildAdd(B, got[5], ci64(G, nv * vw - 1), ""), wide, "");
		LLVMValueRef p0 = llvm.LLVMBuildSDiv(B, llvm.LLVMBuildMul(B, t, np, ""), got[7], "");
		LLVMValueRef p1 = llvm.LLVMBuildSDiv(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildAdd(B, t, ci64(G, 1), ""), np, ""), got[7], "");
		Loop lp;
		LLVMValueRef jw = loop_begin(&T, &lp, p0, p1);
		mm_panel(&T, n, a, T.ptr[b->id], tpk, buf, tmp, got[3], got[4], got[5], z, z, z, jw, tb);
		loop_end(&T, &lp);
	} else {
		LLVMValueRef oa = llvm.LLVMBuildMul(B, t, llvm.LLVMBuildMul(B, got[3], got[4], ""), "");
		LLVMValueRef ob = llvm.LLVMBuildMul(B, t, llvm.LLVMBuildMul(B, got[4], got[5], ""), "");
		LLVMValueRef oo = llvm.LLVMBuildMul(B, t, llvm.LLVMBuildMul(B, got[3], got[5], ""), "");
		mm_tiled(&T, n, a, b, got[3], got[4], got[5], oa, ob, oo, 0, tb, NULL, buf, tmp);
	}
	loop_end(&T, &lt);
	task_end(F, &T, &tk, ntasks);
}

/* C = A @ B for one matrix (offsets oa, ob, oo): panels of B two vectors
 * wide, on the thread pool when `plain` (the only matmul of its loop nest). */
static void mm_tiled(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                     LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo, int plain, int tb, LLVMValueRef packed,
                     LLVMValueRef buf_in, LLVMValueRef tmp_in)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int vw = G->vbytes / dtype_size(n->dtype);
	int mr, nv;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef wide = ci64(G, nv * vw);
	LLVMValueRef npanels = llvm.LLVMBuildSDiv(B, llvm.LLVMBuildAdd(B, Nn, ci64(G, nv * vw - 1), ""), wide, "");
	if (plain) {
		/* the panels are independent: run them on the thread pool */
		mm_pool(F, n, a, b, M, K, Nn, npanels, MM_PANELS, tb, packed);
		return;
	}
	/* the scratch area of the workspace: the panel, then the partial tile rows */
	LLVMValueRef buf = buf_in, tmp = tmp_in;
	if (!buf) {
		LLVMValueRef soff = ci64(G, F->plan->scratch);
		buf = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "panel");
		LLVMValueRef toff = llvm.LLVMBuildMul(B, K, wide, "");
		tmp = llvm.LLVMBuildGEP2(B, et, buf, &toff, 1, "part");
	}
	Loop lw;
	LLVMValueRef jw = loop_begin(F, &lw, ci64(G, 0), npanels);
	mm_panel(F, n, a, nptr(F, b), packed, buf, tmp, M, K, Nn, oa, ob, oo, jw, tb);
	loop_end(F, &lw);
}

/* The pre-packed copy of a matmul's right operand when it is a model's
 * weight (libnestrt packs it on first use, nestrt_packed), else NULL at run
 * time. Only for operands that may be weights: params and arguments. */
static LLVMValueRef mm_prepacked(Fn *F, Node *n, Node *b, LLVMValueRef K, LLVMValueRef Nn, int tb)
{
	Gen *G = F->gen;
	if (b->op != OP_PARAM && b->op != OP_INPUT)
		return NULL;
	int vw = G->vbytes / dtype_size(n->dtype);
	LLVMTypeRef at[6] = {G->i8p, G->i8p, G->i64, G->i64, G->i64, G->i32};
	int mr, nv;
	mm_shape(G, n, &mr, &nv);
	LLVMValueRef av[6] = {F->ctx, llvm.LLVMBuildPointerCast(G->B, nptr(F, b), G->i8p, ""), K, Nn, ci64(G, nv * vw),
	                      ci32(G, (tb ? 1 : 0) | (n->dtype == DT_F64 ? 2 : 0))};
	return call(G, "nestrt_packed", G->i8p, at, av, 6);
}

/* NumPy matmul with broadcast batch axes; i-k-j order so the inner loop runs
 * along contiguous rows of b and of the result */
static void k_matmul(Fn *F, Node *n)
{
	if (dtype_is_float(n->dtype) && virtual_transpose(F->g, n->in[1])) {
		/* A @ transpose(Bt): Bt's rows packed as panels, the same tiles */
		Node *a = n->in[0], *bt = n->in[1]->in[0];
		LLVMValueRef z = ci64(F->gen, 0);
		int plain = !(F->v && F->v->ndyn);
		LLVMValueRef K = dimv(F, a, 1), Nn = dimv(F, bt, 0);
		mm_tiled(F, n, a, bt, dimv(F, a, 0), K, Nn, z, z, z, plain, 1, plain ? mm_prepacked(F, n, bt, K, Nn, 1) : NULL,
		         NULL, NULL);
		return;
	}
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *a = n->in[0], *b = n->in[1];
	DType dt = n->dtype;
	int fl = dtype_is_float(dt);
	LLVMValueRef M = a->rank == 1 ? ci64(G, 1) : dimv(F, a, a->rank - 2);
	LLVMValueRef K = dimv(F, a, a->rank - 1);
	LLVMValueRef Nn = b->rank == 1 ? ci64(G, 1) : dimv(F, b, b->rank - 1);
	int batch = n->rank - (a->rank != 1) - (b->rank != 1);
	/* batch strides (elements) of a, b and the result */
	LLVMValueRef sa[MAX_RANK], sb[MAX_RANK], so[MAX_RANK];
	LLVMValueRef mat_a = llvm.LLVMBuildMul(B, M, K, ""), mat_b = llvm.LLVMBuildMul(B, K, Nn, ""), mat_o = llvm.LLVMBuildMul(B, M, Nn, "");
	LLVMValueRef ra = mat_a, rb = mat_b, ro = mat_o;
	for (int k = batch - 1; k >= 0; k--) {
		int ia = k - (batch - (a->rank - 2)), ib = k - (batch - (b->rank - 2));
		int64_t da = ia >= 0 && a->rank > 2 ? a->shape[ia] : 1;
		int64_t db = ib >= 0 && b->rank > 2 ? b->shape[ib] : 1;
		sa[k] = (ia >= 0 && a->rank > 2 && !(da == 1 && n->shape[k] != 1)) ? ra : ci64(G, 0);
		sb[k] = (ib >= 0 && b->rank > 2 && !(db == 1 && n->shape[k] != 1)) ? rb : ci64(G, 0);
		so[k] = ro;
		if (ia >= 0 && a->rank > 2)
			ra = llvm.LLVMBuildMul(B, ra, dimv(F, a, ia), "");
		if (ib >= 0 && b->rank > 2)
			rb = llvm.LLVMBuildMul(B, rb, dimv(F, b, ib), "");
		ro = llvm.LLVMBuildMul(B, ro, dimv(F, n, k), "");
	}
	/* batched without broadcasting (attention's heads): one task per matrix */
	if (batch > 0 && matmul_pooled(n, F->v && F->v->ndyn)) {
		LLVMValueRef nb = ci64(G, 1);
		for (int k = 0; k < batch; k++)
			nb = llvm.LLVMBuildMul(B, nb, dimv(F, n, k), "");
		mm_pool(F, n, a, b, M, K, Nn, nb, MM_BATCH, 0, NULL);
		return;
	}
	Loop bl[MAX_RANK];
	LLVMValueRef oa = ci64(G, 0), ob = ci64(G, 0), oo = ci64(G, 0);
	for (int k = 0; k < batch; k++) {
		LLVMValueRef i = loop_begin(F, &bl[k], ci64(G, 0), dimv(F, n, k));
		oa = llvm.LLVMBuildAdd(B, oa, llvm.LLVMBuildMul(B, i, sa[k], ""), "");
		ob = llvm.LLVMBuildAdd(B, ob, llvm.LLVMBuildMul(B, i, sb[k], ""), "");
		oo = llvm.LLVMBuildAdd(B, oo, llvm.LLVMBuildMul(B, i, so[k], ""), "");
	}
	if (fl && b->rank != 1) {
		int plain = batch == 0 && !(F->v && F->v->ndyn);
		mm_tiled(F, n, a, b, M, K, Nn, oa, ob, oo, plain, 0, plain ? mm_prepacked(F, n, b, K, Nn, 0) : NULL, NULL, NULL);
		for (int k = batch - 1; k >= 0; k--)
			loop_end(F, &bl[k]);
		return;
	}
	LLVMValueRef zero = fl ? fconst(G, dt, 0) : llvm.LLVMConstInt(elem_t(G, dt), 0, 0);
	Loop li, lz, lk, lj;
	LLVMValueRef i = loop_begin(F, &li, ci64(G, 0), M);
	LLVMValueRef orow = llvm.LLVMBuildAdd(B, oo, llvm.LLVMBuildMul(B, i, Nn, ""), "");
	LLVMValueRef z = loop_begin(F, &lz, ci64(G, 0), Nn);
	store_at(F, n, llvm.LLVMBuildAdd(B, orow, z, ""), zero);
	loop_end(F, &lz);
	LLVMValueRef kk = loop_begin(F, &lk, ci64(G, 0), K);
	LLVMValueRef aik = load_at(F, a, llvm.LLVMBuildAdd(B, oa, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, i, K, ""), kk, ""), ""));
	LLVMValueRef brow = llvm.LLVMBuildAdd(B, ob, llvm.LLVMBuildMul(B, kk, Nn, ""), "");
	LLVMValueRef j = loop_begin(F, &lj, ci64(G, 0), Nn);
	LLVMValueRef oidx = llvm.LLVMBuildAdd(B, orow, j, "");
	LLVMValueRef prod = fl ? llvm.LLVMBuildFMul(B, aik, load_at(F, b, llvm.LLVMBuildAdd(B, brow, j, "")), "")
	                       : llvm.LLVMBuildMul(B, aik, load_at(F, b, llvm.LLVMBuildAdd(B, brow, j, "")), "");
	LLVMValueRef acc = load_at(F, n, oidx);
	store_at(F, n, oidx, fl ? llvm.LLVMBuildFAdd(B, acc, prod, "") : llvm.LLVMBuildAdd(B, acc, prod, ""));
	loop_end(F, &lj);
	loop_end(F, &lk);
	loop_end(F, &li);
	for (int k = batch - 1; k >= 0; k--)
		loop_end(F, &bl[k]);
}

/* sum mean amax amin over an axis mask: initialise, then fold every input element */
static void k_reduce(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = x->dtype;
	int fl = dtype_is_float(dt);
	int64_t mask = n->a[0];
	LLVMValueRef init;
	if (n->op == OP_SUM || n->op == OP_MEAN)
		init = fl ? fconst(G, dt, 0) : llvm.LLVMConstInt(elem_t(G, dt), 0, 0);
	else if (fl)
		init = fconst(G, dt, n->op == OP_AMAX ? -INFINITY : INFINITY);
	else if (dt == DT_I32)
		init = llvm.LLVMConstInt(G->i32, n->op == OP_AMAX ? (unsigned long long)(uint32_t)INT32_MIN : INT32_MAX, 0);
	else
		init = llvm.LLVMConstInt(G->i64, n->op == OP_AMAX ? (unsigned long long)INT64_MIN : INT64_MAX, 0);
	Loop L;
	LLVMValueRef i = loop_begin(F, &L, ci64(G, 0), numelv(F, n));
	store_at(F, n, i, init);
	loop_end(F, &L);
	/* output strides on the input's axes: 0 on the reduced ones */
	LLVMValueRef st[2][MAX_RANK], off[2];
	strides(F, x, x->rank, NULL, st[0]);
	LLVMValueRef s = ci64(G, 1);
	for (int k = x->rank - 1; k >= 0; k--) {
		if (mask & ((int64_t)1 << k)) {
			st[1][k] = ci64(G, 0);
		} else {
			st[1][k] = s;
			s = llvm.LLVMBuildMul(B, s, dimv(F, x, k), "");
		}
	}
	Nest N;
	nest_begin(F, &N, x, 2, st, off);
	LLVMValueRef acc = load_at(F, n, off[1]), v = load_at(F, x, off[0]), r;
	if (n->op == OP_SUM || n->op == OP_MEAN)
		r = fl ? llvm.LLVMBuildFAdd(B, acc, v, "") : llvm.LLVMBuildAdd(B, acc, v, "");
	else
		r = fl ? fmaxmin(G, acc, v, n->op == OP_AMAX) : imaxmin(G, acc, v, n->op == OP_AMAX);
	store_at(F, n, off[1], r);
	nest_end(F, &N);
	if (n->op == OP_MEAN) {
		LLVMValueRef cnt = ci64(G, 1);
		for (int k = 0; k < x->rank; k++)
			if (mask & ((int64_t)1 << k))
				cnt = llvm.LLVMBuildMul(B, cnt, dimv(F, x, k), "");
		LLVMValueRef c = llvm.LLVMBuildSIToFP(B, cnt, elem_t(G, dt), "");
		Loop L2;
		LLVMValueRef j = loop_begin(F, &L2, ci64(G, 0), numelv(F, n));
		store_at(F, n, j, llvm.LLVMBuildFDiv(B, load_at(F, n, j), c, ""));
		loop_end(F, &L2);
	}
}

/* Views an axis of x as [outer, len, inner]. */
static void axis_split(Fn *F, Node *x, int ax, LLVMValueRef *outer, LLVMValueRef *len, LLVMValueRef *inner)
{
	Gen *G = F->gen;
	*outer = ci64(G, 1);
	*inner = ci64(G, 1);
	for (int k = 0; k < ax; k++)
		*outer = llvm.LLVMBuildMul(G->B, *outer, dimv(F, x, k), "");
	for (int k = ax + 1; k < x->rank; k++)
		*inner = llvm.LLVMBuildMul(G->B, *inner, dimv(F, x, k), "");
	*len = dimv(F, x, ax);
}

static void k_argmax(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	int ax = __builtin_ctzll((unsigned long long)n->a[0]);
	int fl = dtype_is_float(x->dtype);
	LLVMValueRef outer, len, inner;
	axis_split(F, x, ax, &outer, &len, &inner);
	LLVMValueRef best = entry_alloca(F, elem_t(G, x->dtype), "best");
	LLVMValueRef besti = entry_alloca(F, G->i64, "besti");
	Loop lo, li, lk;
	LLVMValueRef o = loop_begin(F, &lo, ci64(G, 0), outer);
	LLVMValueRef in = loop_begin(F, &li, ci64(G, 0), inner);
	LLVMValueRef base = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildMul(B, o, len, ""), inner, ""), in, "");
	llvm.LLVMBuildStore(B, load_at(F, x, base), best);
	llvm.LLVMBuildStore(B, ci64(G, 0), besti);
	LLVMValueRef k = loop_begin(F, &lk, ci64(G, 1), len);
	LLVMValueRef v = load_at(F, x, llvm.LLVMBuildAdd(B, base, llvm.LLVMBuildMul(B, k, inner, ""), ""));
	LLVMValueRef cur = llvm.LLVMBuildLoad2(B, elem_t(G, x->dtype), best, "");
	LLVMValueRef take;
	if (fl) {
		/* the first NaN wins, else the first maximum */
		LLVMValueRef curnan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, cur, cur, "");
		LLVMValueRef vnan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, v, v, "");
		LLVMValueRef gt = llvm.LLVMBuildFCmp(B, LLVMRealOGT, v, cur, "");
		take = llvm.LLVMBuildAnd(B, llvm.LLVMBuildNot(B, curnan, ""), llvm.LLVMBuildOr(B, vnan, gt, ""), "");
	} else {
		take = llvm.LLVMBuildICmp(B, LLVMIntSGT, v, cur, "");
	}
	llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, take, v, cur, ""), best);
	llvm.LLVMBuildStore(B, llvm.LLVMBuildSelect(B, take, k, llvm.LLVMBuildLoad2(B, G->i64, besti, ""), ""), besti);
	loop_end(F, &lk);
	store_at(F, n, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, o, inner, ""), in, ""), llvm.LLVMBuildLoad2(B, G->i64, besti, ""));
	loop_end(F, &li);
	loop_end(F, &lo);
}

/* ---- row reductions in vectors ---- */

static LLVMValueRef splat(Gen *G, LLVMTypeRef vt, int vw, LLVMValueRef x)
{
	LLVMValueRef one = llvm.LLVMBuildInsertElement(G->B, llvm.LLVMGetUndef(vt), x, ci32(G, 0), "");
	LLVMValueRef mask0 = llvm.LLVMConstNull(llvm.LLVMVectorType(G->i32, (unsigned)vw));
	return llvm.LLVMBuildShuffleVector(G->B, one, llvm.LLVMGetUndef(vt), mask0, "");
}

enum { RED_SUM, RED_MAX, RED_SQDEV };

/* acc folded with x ((x - mean)^2 for RED_SQDEV), vectors or scalars alike */
static LLVMValueRef red_step(Gen *G, int kind, LLVMValueRef acc, LLVMValueRef x, LLVMValueRef mean)
{
	if (kind == RED_SQDEV) {
		x = llvm.LLVMBuildFSub(G->B, x, mean, "");
		x = llvm.LLVMBuildFMul(G->B, x, x, "");
	}
	return kind == RED_MAX ? fmaxmin(G, acc, x, 1) : llvm.LLVMBuildFAdd(G->B, acc, x, "");
}

/* The sum or the NaN-propagating maximum of x[base + k], k in [0, len)
 * (RED_SQDEV: the sum of (x - mean)^2), a contiguous row. The loop
 * vectoriser keeps an ordered float reduction scalar and LLVM-C before 18
 * cannot set fast-math flags, so this loop is written in vectors: one partial
 * result per lane (sums reassociated, as NumPy's pairwise sums are), folded
 * at the end, then the tail element by element. */
static LLVMValueRef row_reduce(Fn *F, Node *x, LLVMValueRef base, LLVMValueRef len, int kind, LLVMValueRef mean)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	DType dt = x->dtype;
	int vw = G->vbytes / dtype_size(dt);
	LLVMTypeRef t = elem_t(G, dt), vt = llvm.LLVMVectorType(t, (unsigned)vw);
	LLVMValueRef init = fconst(G, dt, kind == RED_MAX ? -INFINITY : 0);
	LLVMValueRef acc = entry_alloca(F, vt, "vacc"), sacc = entry_alloca(F, t, "sacc");
	llvm.LLVMBuildStore(B, splat(G, vt, vw, init), acc);
	LLVMValueRef vmean = kind == RED_SQDEV ? splat(G, vt, vw, mean) : NULL;
	LLVMValueRef nvec = llvm.LLVMBuildSDiv(B, len, ci64(G, vw), "");
	Loop lv, lt;
	LLVMValueRef i = loop_begin(F, &lv, ci64(G, 0), nvec);
	LLVMValueRef off = llvm.LLVMBuildAdd(B, base, llvm.LLVMBuildMul(B, i, ci64(G, vw), ""), "");
	LLVMValueRef p = llvm.LLVMBuildGEP2(B, t, nptr(F, x), &off, 1, "");
	LLVMValueRef v = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, p, llvm.LLVMPointerType(vt, 0), ""), "");
	llvm.LLVMSetAlignment(v, (unsigned)dtype_size(dt));
	LLVMValueRef a = llvm.LLVMBuildLoad2(B, vt, acc, "");
	llvm.LLVMBuildStore(B, red_step(G, kind, a, v, vmean), acc);
	loop_end(F, &lv);
	a = llvm.LLVMBuildLoad2(B, vt, acc, "");
	LLVMValueRef r = llvm.LLVMBuildExtractElement(B, a, ci32(G, 0), "");
	for (int l = 1; l < vw; l++) {
		LLVMValueRef e = llvm.LLVMBuildExtractElement(B, a, ci32(G, l), "");
		r = red_step(G, kind == RED_SQDEV ? RED_SUM : kind, r, e, NULL);
	}
	llvm.LLVMBuildStore(B, r, sacc);
	LLVMValueRef k = loop_begin(F, &lt, llvm.LLVMBuildMul(B, nvec, ci64(G, vw), ""), len);
	LLVMValueRef e = load_at(F, x, llvm.LLVMBuildAdd(B, base, k, ""));
	LLVMValueRef c = llvm.LLVMBuildLoad2(B, t, sacc, "");
	llvm.LLVMBuildStore(B, red_step(G, kind, c, e, mean), sacc);
	loop_end(F, &lt);
	return llvm.LLVMBuildLoad2(B, t, sacc, "");
}

static void k_softmax(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	LLVMValueRef outer, len, inner;
	axis_split(F, x, (int)n->a[0], &outer, &len, &inner);
	LLVMValueRef mx = entry_alloca(F, t, "max"), sum = entry_alloca(F, t, "sum");
	Loop lo, li, l1, l2, l3;
	LLVMValueRef o = F->par_lo ? loop_begin(F, &lo, F->par_lo, F->par_hi) : loop_begin(F, &lo, ci64(G, 0), outer);
	LLVMValueRef in = loop_begin(F, &li, ci64(G, 0), inner);
	LLVMValueRef base = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildMul(B, o, len, ""), inner, ""), in, "");
	/* rows along the last axis are contiguous: reductions in vectors */
	int rows = n->a[0] == x->rank - 1;
	LLVMValueRef k, off, m;
	if (rows) {
		m = row_reduce(F, x, base, len, RED_MAX, NULL);
	} else {
		llvm.LLVMBuildStore(B, fconst(G, dt, -INFINITY), mx);
		k = loop_begin(F, &l1, ci64(G, 0), len);
		off = llvm.LLVMBuildAdd(B, base, llvm.LLVMBuildMul(B, k, inner, ""), "");
		llvm.LLVMBuildStore(B, fmaxmin(G, llvm.LLVMBuildLoad2(B, t, mx, ""), load_at(F, x, off), 1), mx);
		loop_end(F, &l1);
		m = llvm.LLVMBuildLoad2(B, t, mx, "");
	}
	/* the exponentials first (a loop the vectoriser widens), their sum after */
	Loop l2s;
	k = loop_begin(F, &l2, ci64(G, 0), len);
	off = llvm.LLVMBuildAdd(B, base, llvm.LLVMBuildMul(B, k, inner, ""), "");
	store_at(F, n, off, exp_fast(G, dt, llvm.LLVMBuildFSub(B, load_at(F, x, off), m, "")));
	loop_end(F, &l2);
	LLVMValueRef s;
	if (rows) {
		s = row_reduce(F, n, base, len, RED_SUM, NULL);
	} else {
		llvm.LLVMBuildStore(B, fconst(G, dt, 0), sum);
		k = loop_begin(F, &l2s, ci64(G, 0), len);
		off = llvm.LLVMBuildAdd(B, base, llvm.LLVMBuildMul(B, k, inner, ""), "");
		llvm.LLVMBuildStore(B, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildLoad2(B, t, sum, ""), load_at(F, n, off), ""), sum);
		loop_end(F, &l2s);
		s = llvm.LLVMBuildLoad2(B, t, sum, "");
	}
	LLVMValueRef ls = n->op == OP_LOG_SOFTMAX ? math1(G, "llvm.log", dt, s) : NULL;
	k = loop_begin(F, &l3, ci64(G, 0), len);
	off = llvm.LLVMBuildAdd(B, base, llvm.LLVMBuildMul(B, k, inner, ""), "");
	if (n->op == OP_SOFTMAX)
		store_at(F, n, off, llvm.LLVMBuildFDiv(B, load_at(F, n, off), s, ""));
	else
		store_at(F, n, off, llvm.LLVMBuildFSub(B, llvm.LLVMBuildFSub(B, load_at(F, x, off), m, ""), ls, ""));
	loop_end(F, &l3);
	loop_end(F, &li);
	loop_end(F, &lo);
}

static void k_norm(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	int ln = n->op == OP_LAYERNORM;
	LLVMValueRef len = dimv(F, x, x->rank - 1);
	LLVMValueRef rows = ci64(G, 1);
	for (int k = 0; k < x->rank - 1; k++)
		rows = llvm.LLVMBuildMul(B, rows, dimv(F, x, k), "");
	LLVMValueRef lenf = llvm.LLVMBuildSIToFP(B, len, t, "");
	Loop lr, l3;
	LLVMValueRef r = F->par_lo ? loop_begin(F, &lr, F->par_lo, F->par_hi) : loop_begin(F, &lr, ci64(G, 0), rows);
	LLVMValueRef base = llvm.LLVMBuildMul(B, r, len, "");
	LLVMValueRef mean = fconst(G, dt, 0);
	if (ln)
		mean = llvm.LLVMBuildFDiv(B, row_reduce(F, x, base, len, RED_SUM, NULL), lenf, "");
	LLVMValueRef var = llvm.LLVMBuildFDiv(B, row_reduce(F, x, base, len, RED_SQDEV, mean), lenf, "");
	LLVMValueRef k;
	LLVMValueRef inv = llvm.LLVMBuildFDiv(B, fconst(G, dt, 1),
	                                 math1(G, "llvm.sqrt", dt, llvm.LLVMBuildFAdd(B, var, fconst(G, dt, n->fval), "")), "");
	k = loop_begin(F, &l3, ci64(G, 0), len);
	LLVMValueRef off = llvm.LLVMBuildAdd(B, base, k, "");
	LLVMValueRef y = llvm.LLVMBuildFMul(B, llvm.LLVMBuildFSub(B, load_at(F, x, off), mean, ""), inv, "");
	y = llvm.LLVMBuildFMul(B, y, load_at(F, n->in[1], k), "");
	if (ln)
		y = llvm.LLVMBuildFAdd(B, y, load_at(F, n->in[2], k), "");
	store_at(F, n, off, y);
	loop_end(F, &l3);
	loop_end(F, &lr);
}

static void k_causal_mask(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	LLVMValueRef st[2][MAX_RANK], off[2];
	strides(F, n->in[0], n->rank, NULL, st[0]);
	strides(F, n, n->rank, NULL, st[1]);
	Nest N;
	nest_begin(F, &N, n, 2, st, off);
	LLVMValueRef above = llvm.LLVMBuildICmp(B, LLVMIntSGT, N.idx[n->rank - 1], N.idx[n->rank - 2], "");
	LLVMValueRef v = llvm.LLVMBuildSelect(B, above, fconst(G, n->dtype, -INFINITY), load_at(F, n->in[0], off[0]), "");
	store_at(F, n, off[1], v);
	nest_end(F, &N);
}

/* a conditional block: returns the block to continue in after `cond` */
static LLVMBasicBlockRef if_begin(Fn *F, LLVMValueRef cond)
{
	Gen *G = F->gen;
	LLVMBasicBlockRef then = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "then");
	LLVMBasicBlockRef join = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "join");
	llvm.LLVMBuildCondBr(G->B, cond, then, join);
	llvm.LLVMPositionBuilderAtEnd(G->B, then);
	return join;
}

static void if_end(Fn *F, LLVMBasicBlockRef join)
{
	llvm.LLVMBuildBr(F->gen->B, join);
	llvm.LLVMPositionBuilderAtEnd(F->gen->B, join);
}

static LLVMValueRef in_range(Gen *G, LLVMValueRef v, LLVMValueRef hi)
{
	return llvm.LLVMBuildICmp(G->B, LLVMIntULT, v, hi, "");
}

static void mm_tiled(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
                     LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo, int plain, int tb, LLVMValueRef packed,
                     LLVMValueRef buf_in, LLVMValueRef tmp_in);

/* conv2d as a matrix product per image (implicit GEMM): the patches of the
 * image laid out as col[C*KH*KW, OH*OW] in the scratch area (im2col; a 1x1
 * convolution of stride 1 without padding reads the image itself), then
 * out[O, OH*OW] = w[O, C*KH*KW] @ col with the matmul's tiles, then the bias
 * by rows. Static shapes, one group. */
static void k_conv2d_gemm(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
	LLVMTypeRef et = elem_t(G, n->dtype), ept = llvm.LLVMPointerType(et, 0);
	int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t O = n->shape[1], OH = n->shape[2], OW = n->shape[3], KH = w->shape[2], KW = w->shape[3];
	int64_t sh = n->a[0], sw = n->a[1], ph = n->a[2], pw = n->a[3];
	int64_t K = C * KH * KW, P = OH * OW;
	int direct = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
	LLVMValueRef soff = ci64(G, F->plan->scratch);
	LLVMValueRef col = llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, G->i8, F->ws, &soff, 1, ""), ept, "col");
	/* the patches and the result of one image, seen as matrices */
	Node cm = {.op = OP_CONV2D, .dtype = n->dtype, .rank = 2, .shape = {K, P}, .id = F->g->nnodes};
	Node om = *n;
	om.rank = 2, om.shape[0] = O, om.shape[1] = P;
	LLVMValueRef out0 = nptr(F, n);
	Loop ln;
	LLVMValueRef nn = loop_begin(F, &ln, ci64(G, 0), ci64(G, n->shape[0]));
	LLVMValueRef xoff = llvm.LLVMBuildMul(B, nn, ci64(G, C * H * W), "");
	if (direct) {
		F->ptr[cm.id] = llvm.LLVMBuildGEP2(B, et, nptr(F, x), &xoff, 1, "");
	} else {
		Loop lr, loh, low;
		LLVMValueRef r = loop_begin(F, &lr, ci64(G, 0), ci64(G, K));
		LLVMValueRef c = llvm.LLVMBuildSDiv(B, r, ci64(G, KH * KW), "");
		LLVMValueRef kh = llvm.LLVMBuildSDiv(B, llvm.LLVMBuildSRem(B, r, ci64(G, KH * KW), ""), ci64(G, KW), "");
		LLVMValueRef kw = llvm.LLVMBuildSRem(B, r, ci64(G, KW), "");
		LLVMValueRef plane = llvm.LLVMBuildAdd(B, xoff, llvm.LLVMBuildMul(B, c, ci64(G, H * W), ""), "");
		LLVMValueRef oh = loop_begin(F, &loh, ci64(G, 0), ci64(G, OH));
		LLVMValueRef ih = llvm.LLVMBuildAdd(B, llvm.LLVMBuildSub(B, llvm.LLVMBuildMul(B, oh, ci64(G, sh), ""), ci64(G, ph), ""), kh, "");
		LLVMValueRef okh = in_range(G, ih, ci64(G, H));
		LLVMValueRef drow = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, r, ci64(G, P), ""), llvm.LLVMBuildMul(B, oh, ci64(G, OW), ""), "");
		LLVMValueRef ow = loop_begin(F, &low, ci64(G, 0), ci64(G, OW));
		LLVMValueRef iw = llvm.LLVMBuildAdd(B, llvm.LLVMBuildSub(B, llvm.LLVMBuildMul(B, ow, ci64(G, sw), ""), ci64(G, pw), ""), kw, "");
		LLVMValueRef ok = llvm.LLVMBuildAnd(B, okh, in_range(G, iw, ci64(G, W)), "");
		/* out of the image: read element 0 of the plane, store a zero */
		LLVMValueRef at = llvm.LLVMBuildAdd(B, plane, llvm.LLVMBuildSelect(B, ok, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, ih, ci64(G, W), ""), iw, ""), ci64(G, 0), ""), "");
		LLVMValueRef v = llvm.LLVMBuildSelect(B, ok, load_at(F, x, at), fconst(G, n->dtype, 0), "");
		LLVMValueRef dof = llvm.LLVMBuildAdd(B, drow, ow, "");
		llvm.LLVMBuildStore(B, v, llvm.LLVMBuildGEP2(B, et, col, &dof, 1, ""));
		loop_end(F, &low);
		loop_end(F, &loh);
		loop_end(F, &lr);
		F->ptr[cm.id] = col;
	}
	LLVMValueRef ooff = llvm.LLVMBuildMul(B, nn, ci64(G, O * P), "");
	F->ptr[n->id] = llvm.LLVMBuildGEP2(B, et, out0, &ooff, 1, "");
	LLVMValueRef z = ci64(G, 0);
	mm_tiled(F, &om, w, &cm, ci64(G, O), ci64(G, K), ci64(G, P), z, z, z, 1, 0, NULL, NULL, NULL);
	if (b) {
		Loop lo, lp;
		LLVMValueRef o = loop_begin(F, &lo, z, ci64(G, O));
		LLVMValueRef bo = load_at(F, b, o);
		LLVMValueRef p = loop_begin(F, &lp, z, ci64(G, P));
		LLVMValueRef at = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, o, ci64(G, P), ""), p, "");
		store_at(F, n, at, llvm.LLVMBuildFAdd(B, load_at(F, n, at), bo, ""));
		loop_end(F, &lp);
		loop_end(F, &lo);
	}
	F->ptr[n->id] = out0;
	F->ptr[cm.id] = NULL;
	loop_end(F, &ln);
}

static void k_conv2d(Fn *F, Node *n)
{
	if (dtype_is_float(n->dtype) && n->a[4] == 1 && !(F->v && F->v->ndyn)) {
		k_conv2d_gemm(F, n);
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
	LLVMValueRef Og = llvm.LLVMBuildSDiv(B, O, groups, "");
	LLVMValueRef acc = entry_alloca(F, t, "acc");
	Loop ln, lo, loh, low, lc, lkh, lkw;
	LLVMValueRef nn = loop_begin(F, &ln, ci64(G, 0), dimv(F, n, 0));
	LLVMValueRef o = loop_begin(F, &lo, ci64(G, 0), O);
	LLVMValueRef cbase = llvm.LLVMBuildMul(B, llvm.LLVMBuildSDiv(B, o, Og, ""), Cg, "");
	LLVMValueRef oh = loop_begin(F, &loh, ci64(G, 0), OH);
	LLVMValueRef ow = loop_begin(F, &low, ci64(G, 0), OW);
	llvm.LLVMBuildStore(B, b ? load_at(F, b, o) : fconst(G, dt, 0), acc);
	LLVMValueRef c = loop_begin(F, &lc, ci64(G, 0), Cg);
	LLVMValueRef kh = loop_begin(F, &lkh, ci64(G, 0), KH);
	LLVMValueRef ih = llvm.LLVMBuildAdd(B, llvm.LLVMBuildSub(B, llvm.LLVMBuildMul(B, oh, sh, ""), ph, ""), kh, "");
	LLVMBasicBlockRef j1 = if_begin(F, in_range(G, ih, H));
	LLVMValueRef kw = loop_begin(F, &lkw, ci64(G, 0), KW);
	LLVMValueRef iw = llvm.LLVMBuildAdd(B, llvm.LLVMBuildSub(B, llvm.LLVMBuildMul(B, ow, sw, ""), pw, ""), kw, "");
	LLVMBasicBlockRef j2 = if_begin(F, in_range(G, iw, W));
	LLVMValueRef xi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, nn, C, ""), llvm.LLVMBuildAdd(B, cbase, c, ""), "");
	xi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, xi, H, ""), ih, ""), W, ""), iw, "");
	LLVMValueRef wi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, o, Cg, ""), c, "");
	wi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, wi, KH, ""), kh, ""), KW, ""), kw, "");
	LLVMValueRef prod = llvm.LLVMBuildFMul(B, load_at(F, x, xi), load_at(F, w, wi), "");
	llvm.LLVMBuildStore(B, llvm.LLVMBuildFAdd(B, llvm.LLVMBuildLoad2(B, t, acc, ""), prod, ""), acc);
	if_end(F, j2);
	loop_end(F, &lkw);
	if_end(F, j1);
	loop_end(F, &lkh);
	loop_end(F, &lc);
	LLVMValueRef oi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, nn, O, ""), o, "");
	oi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, oi, OH, ""), oh, ""), OW, ""), ow, "");
	store_at(F, n, oi, llvm.LLVMBuildLoad2(B, t, acc, ""));
	loop_end(F, &low);
	loop_end(F, &loh);
	loop_end(F, &lo);
	loop_end(F, &ln);
}

static void k_pool(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *x = n->in[0];
	DType dt = n->dtype;
	LLVMTypeRef t = elem_t(G, dt);
	int is_max = n->op == OP_MAXPOOL2D, global = n->op == OP_GLOBAL_AVGPOOL2D;
	LLVMValueRef H = dimv(F, x, 2), W = dimv(F, x, 3);
	LLVMValueRef KH = global ? H : attrv(F, n, 0), KW = global ? W : attrv(F, n, 1);
	LLVMValueRef sh = global ? ci64(G, 1) : attrv(F, n, 2), sw = global ? ci64(G, 1) : attrv(F, n, 3);
	LLVMValueRef ph = global ? ci64(G, 0) : attrv(F, n, 4), pw = global ? ci64(G, 0) : attrv(F, n, 5);
	LLVMValueRef OH = dimv(F, n, 2), OW = dimv(F, n, 3);
	LLVMValueRef acc = entry_alloca(F, t, "acc");
	Loop lnc, loh, low, lkh, lkw;
	LLVMValueRef nc = loop_begin(F, &lnc, ci64(G, 0), llvm.LLVMBuildMul(B, dimv(F, x, 0), dimv(F, x, 1), ""));
	LLVMValueRef oh = loop_begin(F, &loh, ci64(G, 0), OH);
	LLVMValueRef ow = loop_begin(F, &low, ci64(G, 0), OW);
	llvm.LLVMBuildStore(B, fconst(G, dt, is_max ? -INFINITY : 0), acc);
	LLVMValueRef kh = loop_begin(F, &lkh, ci64(G, 0), KH);
	LLVMValueRef ih = llvm.LLVMBuildAdd(B, llvm.LLVMBuildSub(B, llvm.LLVMBuildMul(B, oh, sh, ""), ph, ""), kh, "");
	LLVMBasicBlockRef j1 = if_begin(F, in_range(G, ih, H));
	LLVMValueRef kw = loop_begin(F, &lkw, ci64(G, 0), KW);
	LLVMValueRef iw = llvm.LLVMBuildAdd(B, llvm.LLVMBuildSub(B, llvm.LLVMBuildMul(B, ow, sw, ""), pw, ""), kw, "");
	LLVMBasicBlockRef j2 = if_begin(F, in_range(G, iw, W));
	LLVMValueRef xi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, nc, H, ""), ih, ""), W, ""), iw, "");
	LLVMValueRef v = load_at(F, x, xi), cur = llvm.LLVMBuildLoad2(B, t, acc, "");
	llvm.LLVMBuildStore(B, is_max ? fmaxmin(G, cur, v, 1) : llvm.LLVMBuildFAdd(B, cur, v, ""), acc);
	if_end(F, j2);
	loop_end(F, &lkw);
	if_end(F, j1);
	loop_end(F, &lkh);
	LLVMValueRef r = llvm.LLVMBuildLoad2(B, t, acc, "");
	if (!is_max) /* padding counts in the average (count_include_pad) */
		r = llvm.LLVMBuildFDiv(B, r, llvm.LLVMBuildSIToFP(B, llvm.LLVMBuildMul(B, KH, KW, ""), t, ""), "");
	LLVMValueRef oi = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, nc, OH, ""), oh, ""), OW, ""), ow, "");
	store_at(F, n, oi, r);
	loop_end(F, &low);
	loop_end(F, &loh);
	loop_end(F, &lnc);
}

static void k_gather(Fn *F, Node *n)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *tab = n->in[0], *idx = n->in[1];
	LLVMValueRef rows = dimv(F, tab, 0);
	LLVMValueRef row = ci64(G, 1);
	for (int k = 1; k < tab->rank; k++)
		row = llvm.LLVMBuildMul(B, row, dimv(F, tab, k), "");
	/* every index is checked before any row is written: a failed call leaves
	 * its result untouched */
	Loop lc, li, lj;
	LLVMValueRef c = loop_begin(F, &lc, ci64(G, 0), numelv(F, idx));
	LLVMValueRef cv = load_at(F, idx, c);
	if (idx->dtype == DT_I32)
		cv = llvm.LLVMBuildSExt(B, cv, G->i64, "");
	LLVMValueRef cbad = llvm.LLVMBuildICmp(B, LLVMIntUGE, cv, rows, "");
	LLVMBasicBlockRef cok = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "indexok");
	LLVMBasicBlockRef cfail = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "indexbad");
	llvm.LLVMBuildCondBr(B, cbad, cfail, cok);
	llvm.LLVMPositionBuilderAtEnd(B, cfail);
	{
		LLVMTypeRef at[3] = {G->i8p, G->i64, G->i64};
		LLVMValueRef av[3] = {F->ctx, cv, rows};
		llvm.LLVMBuildRet(B, call(G, "nestrt_gather_oob", G->i32, at, av, 3));
	}
	llvm.LLVMPositionBuilderAtEnd(B, cok);
	loop_end(F, &lc);
	LLVMValueRef i = loop_begin(F, &li, ci64(G, 0), numelv(F, idx));
	LLVMValueRef v = load_at(F, idx, i);
	if (idx->dtype == DT_I32)
		v = llvm.LLVMBuildSExt(B, v, G->i64, "");
	LLVMValueRef bad = llvm.LLVMBuildICmp(B, LLVMIntUGE, v, rows, "");
	LLVMBasicBlockRef okb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "inrange");
	LLVMBasicBlockRef badb = llvm.LLVMAppendBasicBlockInContext(G->C, F->fn, "outofrange");
	llvm.LLVMBuildCondBr(B, bad, badb, okb);
	llvm.LLVMPositionBuilderAtEnd(B, badb);
	LLVMTypeRef at[3] = {G->i8p, G->i64, G->i64};
	LLVMValueRef av[3] = {F->ctx, v, rows};
	LLVMValueRef st = call(G, "nestrt_gather_oob", G->i32, at, av, 3);
	llvm.LLVMBuildRet(B, st);
	llvm.LLVMPositionBuilderAtEnd(B, okb);
	LLVMValueRef src = llvm.LLVMBuildMul(B, v, row, ""), dst = llvm.LLVMBuildMul(B, i, row, "");
	LLVMValueRef j = loop_begin(F, &lj, ci64(G, 0), row);
	store_at(F, n, llvm.LLVMBuildAdd(B, dst, j, ""), load_at(F, tab, llvm.LLVMBuildAdd(B, src, j, "")));
	loop_end(F, &lj);
	loop_end(F, &li);
}

static void memcpy_bytes(Fn *F, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef bytes)
{
	Gen *G = F->gen;
	LLVMValueRef d8 = llvm.LLVMBuildPointerCast(G->B, dst, G->i8p, "");
	LLVMValueRef s8 = llvm.LLVMBuildPointerCast(G->B, src, G->i8p, "");
	LLVMTypeRef at[3] = {G->i8p, G->i8p, G->i64};
	LLVMValueRef av[3] = {d8, s8, bytes};
	call(G, "memmove", G->i8p, at, av, 3);
}

/* ---- functions ---- */

static void emit_graph_body(Fn *F);
static LLVMValueRef emit_function(Gen *G, Graph *g, Variant *v, const char *name, int internal);

static int64_t graph_need(Gen *G, Graph *g);

static Plan *plan_of(Gen *G, Graph *g, Variant *v)
{
	if (!G->plans[g->id])
		G->plans[g->id] = plan_variant(G->p, g, v);
	return G->plans[g->id];
}

static int64_t graph_need(Gen *G, Graph *g)
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
	if (cs && cs->v) {
		if (cs->v->ndyn && cs->dyn_map && F->dims) {
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
		LLVMValueRef av[5] = {F->ctx, ci32(G, cs->v->id), bufs, dims, ws};
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
	if (!cs1 || !cs1->v || cs1->v->ndyn || c1->callee->noutputs != 1)
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
	LLVMValueRef k = loop_begin(F, &L, ci64(G, 0), ci64(G, n - 1));
	for (int a = 0; a < m; a++) {
		LLVMValueRef v;
		if (a == pos) {
			v = llvm.LLVMBuildLoad2(B, G->i8p, cur, "");
		} else {
			LLVMValueRef e = llvm.LLVMBuildAdd(B, llvm.LLVMBuildMul(B, k, ci64(G, m), ""), ci64(G, a), "");
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

/* The units of a kernel's outermost loop when it is worth splitting over the
 * pool (0 if not): the rows of a row kernel, else axis 0 of the result. Only
 * static shapes, and not inside a task already. */
#define PAR_MIN_ELEMS 32768
static int64_t par_units(Fn *F, Node *n)
{
	if (F->par_lo || (F->v && F->v->ndyn) || n->rank < 1)
		return 0;
	int64_t numel = shape_numel(n->rank, n->shape);
	if (numel < PAR_MIN_ELEMS)
		return 0;
	int64_t units = n->shape[0];
	if (n->op == OP_LAYERNORM || n->op == OP_RMSNORM) {
		units = numel / n->shape[n->rank - 1];
	} else if (n->op == OP_SOFTMAX || n->op == OP_LOG_SOFTMAX) {
		units = 1;
		for (int k = 0; k < n->a[0]; k++)
			units *= n->shape[k];
	}
	return units >= 2 ? units : 0;
}

/* emit(n) as tasks of the pool, each over a range of the outermost loop's
 * units; the operands' pointers travel in an i64 array. */
static void par_emit(Fn *F, Node *n, int64_t units, void (*emit)(Fn *, Node *))
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int64_t ntasks = units < 16 ? units : 16;
	int64_t chunk = (units + ntasks - 1) / ntasks;
	ntasks = (units + chunk - 1) / chunk;
	/* the tensors the kernel reads: an elementwise tree's leaves */
	Node *use[EW_LEAVES + 1];
	int nuse = 1;
	use[0] = n;
	if (ew_op(n->op)) {
		int nl = 0;
		ew_leaves(F, n, use + 1, &nl);
		nuse += nl;
	} else {
		for (int k = 0; k < n->nin; k++)
			use[nuse++] = n->in[k];
	}
	LLVMValueRef vals[EW_LEAVES + 1], got[EW_LEAVES + 1];
	for (int i = 0; i < nuse; i++)
		vals[i] = llvm.LLVMBuildPtrToInt(B, nptr(F, use[i]), G->i64, "");
	Fn T;
	Task tk = task_begin(F, &T, "par", vals, nuse, got);
	for (int i = 0; i < nuse; i++)
		T.ptr[use[i]->id] = llvm.LLVMBuildIntToPtr(B, got[i], llvm.LLVMPointerType(elem_t(G, use[i]->dtype), 0), "");
	T.par_lo = llvm.LLVMBuildMul(B, llvm.LLVMGetParam(tk.fn, 1), ci64(G, chunk), "");
	LLVMValueRef hi = llvm.LLVMBuildMul(B, llvm.LLVMGetParam(tk.fn, 2), ci64(G, chunk), "");
	T.par_hi = llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, hi, ci64(G, units), ""), hi, ci64(G, units), "");
	emit(&T, n);
	task_end(F, &T, &tk, ci64(G, ntasks));
}

/* A kernel, on the pool when large enough. */
static void kernel(Fn *F, Node *n, void (*emit)(Fn *, Node *))
{
	int64_t units = par_units(F, n);
	if (units)
		par_emit(F, n, units, emit);
	else
		emit(F, n);
}

static void emit_graph_body(Fn *F)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Graph *g = F->g;
	Plan *pl = F->plan;
	F->ptr = xcalloc((size_t)g->nnodes + 1, sizeof(LLVMValueRef));
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
		if (pl->fused_into[i] >= 0 || pl->ew_into[i] >= 0)
			continue; /* applied by its matmul's tiles, or inline by its reader */
		switch (n->op) {
		case OP_INPUT: case OP_PARAM: case OP_RESHAPE: case OP_RESULT:
			break;
		case OP_CONST: case OP_FULL: case OP_ARANGE:
			k_fill(F, n);
			break;
		case OP_NEG: case OP_NOT: case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_TANH:
		case OP_SIGMOID: case OP_RELU: case OP_GELU: case OP_GELU_TANH: case OP_SILU: case OP_ERF:
		case OP_ABS: case OP_SIN: case OP_COS: case OP_CAST:
		case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MOD: case OP_POW: case OP_MAX:
		case OP_MIN: case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE:
		case OP_AND: case OP_OR: case OP_WHERE:
			kernel(F, n, k_elementwise);
			break;
		case OP_MATMUL: k_matmul(F, n); break;
		case OP_SUM: case OP_MEAN: case OP_AMAX: case OP_AMIN: k_reduce(F, n); break;
		case OP_ARGMAX: k_argmax(F, n); break;
		case OP_SOFTMAX: case OP_LOG_SOFTMAX: kernel(F, n, k_softmax); break;
		case OP_LAYERNORM: case OP_RMSNORM: kernel(F, n, k_norm); break;
		case OP_TRANSPOSE:
			if (!virtual_transpose(g, n))
				kernel(F, n, k_transpose);
			break;
		case OP_CONCAT: k_concat(F, n); break;
		case OP_SLICE: kernel(F, n, k_slice); break;
		case OP_EXPAND: k_expand(F, n); break;
		case OP_GATHER: k_gather(F, n); break;
		case OP_CAUSAL_MASK: kernel(F, n, k_causal_mask); break;
		case OP_CONV2D: k_conv2d(F, n); break;
		case OP_MAXPOOL2D: case OP_AVGPOOL2D: case OP_GLOBAL_AVGPOOL2D: k_pool(F, n); break;
		case OP_CALL: emit_call(F, n); break;
		case OP_COUNT: ice("emit: bad op");
		}
	}
	/* results that are inputs, params, reshapes of them, or repeated */
	for (int j = 0; j < g->noutputs; j++) {
		if (!pl->copy_out[j])
			continue;
		Node *o = g->outputs[j];
		LLVMValueRef bytes = llvm.LLVMBuildMul(B, numelv(F, o), ci64(G, dtype_size(o->dtype)), "");
		memcpy_bytes(F, buf_ptr(F, g->ninputs + j), nptr(F, o), bytes);
	}
	llvm.LLVMBuildRet(B, ci32(G, 0));
	free(users);
	free(ucount);
	free(F->ptr);
}

/* Attributes of every function made here: nounwind, the region's fast-math
 * option, and on AVX-512 targets loops vectorised with 512-bit vectors (LLVM
 * prefers 256 bits on these CPUs for fear of lower clocks, but the matmul
 * tiles use 512-bit registers anyway). */
static void fn_attrs(Gen *G, LLVMValueRef fn, Variant *v)
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

static LLVMValueRef emit_function(Gen *G, Graph *g, Variant *v, const char *name, int internal)
{
	Fn F = {.gen = G, .g = g, .v = v};
	F.plan = plan_of(G, g, v);
	F.fn = llvm.LLVMAddFunction(G->M, name, G->fn_t);
	if (internal)
		llvm.LLVMSetLinkage(F.fn, LLVMInternalLinkage);
	F.ctx = llvm.LLVMGetParam(F.fn, 0);
	F.bufs = llvm.LLVMGetParam(F.fn, 1);
	F.dims = v && v->ndyn ? llvm.LLVMGetParam(F.fn, 2) : NULL;
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

/* ---- modules, objects, files ---- */

static void gen_module_begin(Gen *G, const char *name)
{
	G->M = llvm.LLVMModuleCreateWithNameInContext(name, G->C);
	llvm.LLVMSetTarget(G->M, G->triple);
	llvm.LLVMSetDataLayout(G->M, G->layout);
	G->ninline = 0;
	G->ntask = 0;
}

typedef struct OutFile {
	char *path;      /* final name */
	char *data;
	size_t len;
} OutFile;

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

/* Verify, optimise and emit the current module. */
static int gen_module_end(Gen *G, int opt, OutFile *out, int64_t *code_bytes)
{
	char *err = NULL;
	if (llvm.LLVMVerifyModule(G->M, LLVMReturnStatusAction, &err)) {
		/* generated code that does not verify is a compiler bug */
		fprintf(stderr, "%s\n", llvm.LLVMPrintModuleToString(G->M));
		ice("LLVMVerifyModule failed: %s", err);
	}
	llvm.LLVMDisposeMessage(err);
	char passes[32];
	snprintf(passes, sizeof passes, "default<O%d>", opt);
	LLVMPassBuilderOptionsRef po = llvm.LLVMCreatePassBuilderOptions();
	llvm.LLVMPassBuilderOptionsSetLoopVectorization(po, opt >= 2);
	llvm.LLVMPassBuilderOptionsSetSLPVectorization(po, opt >= 2);
	LLVMErrorRef e = llvm.LLVMRunPasses(G->M, passes, G->tm, po);
	llvm.LLVMDisposePassBuilderOptions(po);
	if (e) {
		char *m = llvm.LLVMGetErrorMessage(e);
		ice("LLVMRunPasses: %s", m);
	}
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
		if (code_bytes && G->o->emit == EMIT_OBJ)
			*code_bytes = text_bytes(G, out->data, out->len);
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


static char *c_type(DType dt)
{
	switch (dt) {
	case DT_BOOL: return "uint8_t";
	case DT_I32: return "int32_t";
	case DT_I64: return "int64_t";
	case DT_F32: return "float";
	case DT_F64: return "double";
	default: return "void";
	}
}

/* An argument's name as a C parameter: C keywords, the model handle `m` and
 * the result names take a trailing underscore. */
static const char *c_param(const char *name, char *buf, size_t n)
{
	static const char *const reserved[] = {
		"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
		"extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
		"short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
		"volatile", "while", "bool", "true", "false", "m", "out", NULL,
	};
	int clash = !strncmp(name, "out", 3) && name[3] && strspn(name + 3, "0123456789") == strlen(name + 3);
	for (int i = 0; reserved[i] && !clash; i++)
		clash = !strcmp(reserved[i], name);
	snprintf(buf, n, "%s%s", name, clash ? "_" : "");
	return buf;
}

static void header_text(Gen *G, Buf *b, const char *name)
{
	Program *p = G->p;
	char guard[256];
	snprintf(guard, sizeof guard, "%s", name);
	for (char *c = guard; *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
	buf_printf(b, "/* %s.h - generated by nestc %s from %s. Do not edit. */\n", name, NESTC_VERSION, p->src->path);
	buf_printf(b, "#ifndef %s_H\n#define %s_H\n\n#include <stdint.h>\n#include <nestrt.h>\n\n", guard, guard);
	buf_printf(b, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
	buf_printf(b, "typedef struct %s %s;\n\n", name, name);
	buf_printf(b, "/* Bind and check every param (%d tensors); NULL with err->message on error. */\n", p->nparams);
	buf_printf(b, "%s *%s_new(nestrt_weights *w, nestrt_error *err);\nvoid %s_free(%s *m);\n", name, name, name, name);
	if (G->o->embed)
		buf_printf(b, "/* %s with the weights compiled in (--embed-weights %s). */\n%s *%s_new_embedded(nestrt_error *err);\n",
		           name, G->o->embed, name, name);
	buf_printf(b, "/* The model's workspace in bytes (allocated once by %s_new). */\nsize_t %s_workspace_size(void);\n", name, name);
	buf_printf(b, "/* Why the last call of an entry point failed, or NULL. */\n"
	              "static inline const char *%s_error(const %s *m)\n{\n\treturn nestrt_model_error((const nestrt_model *)m);\n}\n\n",
	           name, name);
	for (int e = 0; e < p->nentries; e++) {
		Entry *en = &p->entries[e];
		Graph *g = en->g;
		buf_printf(b, "/* %s(", en->name);
		for (int i = 0; i < g->ninputs; i++) {
			Buf s = {0};
			shape_str(&s, g->inputs[i]->dtype, g->inputs[i]->rank, g->inputs[i]->shape);
			buf_printf(b, "%s%s: %s", i ? ", " : "", g->input_names[i], s.s);
			buf_free(&s);
		}
		buf_puts(b, ") -> ");
		for (int j = 0; j < g->noutputs; j++) {
			Buf s = {0};
			shape_str(&s, g->outputs[j]->dtype, g->outputs[j]->rank, g->outputs[j]->shape);
			buf_printf(b, "%s%s", j ? ", " : "", s.s);
			buf_free(&s);
		}
		buf_puts(b, "\n   Returns 0, or -1 after a run-time error (nestrt_model_error(m) says which). */\n");
		/* element counts, to size buffers */
		buf_puts(b, "enum {");
		for (int i = 0; i < g->ninputs; i++) {
			char up[512], pn[300];
			snprintf(up, sizeof up, "%s_%s_%s_NUMEL", name, en->name, c_param(g->input_names[i], pn, sizeof pn));
			for (char *c = up; *c; c++)
				if (*c >= 'a' && *c <= 'z')
					*c = (char)(*c - 'a' + 'A');
			buf_printf(b, "%s %s = %lld", i ? "," : "", up, (long long)shape_numel(g->inputs[i]->rank, g->inputs[i]->shape));
		}
		for (int j = 0; j < g->noutputs; j++) {
			char up[512];
			if (g->noutputs == 1)
				snprintf(up, sizeof up, "%s_%s_OUT_NUMEL", name, en->name);
			else
				snprintf(up, sizeof up, "%s_%s_OUT%d_NUMEL", name, en->name, j);
			for (char *c = up; *c; c++)
				if (*c >= 'a' && *c <= 'z')
					*c = (char)(*c - 'a' + 'A');
			buf_printf(b, "%s %s = %lld", g->ninputs + j ? "," : "", up,
			           (long long)shape_numel(g->outputs[j]->rank, g->outputs[j]->shape));
		}
		buf_puts(b, " };\n");
		buf_printf(b, "int %s_%s(%s *m", name, en->name, name);
		for (int i = 0; i < g->ninputs; i++) {
			char pn[300];
			buf_printf(b, ", const %s *%s", c_type(g->inputs[i]->dtype), c_param(g->input_names[i], pn, sizeof pn));
		}
		for (int j = 0; j < g->noutputs; j++) {
			if (g->noutputs == 1)
				buf_printf(b, ", %s *out", c_type(g->outputs[j]->dtype));
			else
				buf_printf(b, ", %s *out%d", c_type(g->outputs[j]->dtype), j);
		}
		buf_puts(b, ");\n\n");
	}
	buf_printf(b, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
}

/* The model module: param table, dispatch table, entry points, new/free. */
static void model_module(Gen *G, const char *name, LLVMValueRef *variant_fns, int64_t ws_static, int64_t ws_own)
{
	Program *p = G->p;
	LLVMBuilderRef B = G->B;
	/* the entry graphs */
	LLVMValueRef *entry_fns = xcalloc((size_t)p->nentries + 1, sizeof(LLVMValueRef));
	for (int e = 0; e < p->nentries; e++) {
		char fname[256];
		snprintf(fname, sizeof fname, "%s__entry_%s", name, p->entries[e].name);
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
	LLVMTypeRef df[9] = {G->i8p, G->i8p, G->i32, G->i8p, G->i32, G->i64, G->i8p, G->i8p, G->i64};
	LLVMTypeRef desc_t = llvm.LLVMStructTypeInContext(G->C, df, 9, 0);
	LLVMValueRef z2[2] = {ci32(G, 0), ci32(G, 0)};
	LLVMValueRef dv[9] = {
		cstr(G, name),
		llvm.LLVMConstPointerCast(p->nparams ? llvm.LLVMConstGEP2(ptab_t, ptab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		ci32(G, p->nparams),
		llvm.LLVMConstPointerCast(nv ? llvm.LLVMConstGEP2(stab_t, stab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		ci32(G, nv),
		ci64(G, ws_static),
		cstr(G, NESTC_VERSION),
		llvm.LLVMConstPointerCast(nv ? llvm.LLVMConstGEP2(ntab_t, ntab, z2, 2) : llvm.LLVMConstPointerNull(G->i8p), G->i8p),
		ci64(G, ws_own),
	};
	char dname[256];
	snprintf(dname, sizeof dname, "%s__desc", name);
	LLVMValueRef desc = llvm.LLVMAddGlobal(G->M, desc_t, dname);
	llvm.LLVMSetInitializer(desc, llvm.LLVMConstNamedStruct(desc_t, dv, 9));
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
		LLVMTypeRef rt[3] = {G->i8p, fnp, G->i8pp};
		LLVMValueRef rv[3] = {llvm.LLVMGetParam(f, 0), entry_fns[e], bufs};
		llvm.LLVMBuildRet(B, call(G, "nestrt_model_run", G->i32, rt, rv, 3));
		free(at);
	}
	free(entry_fns);
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

/* ---- archives: the System V / GNU ar format with a symbol index ---- */

static void ar_member(Buf *b, const char *name, const char *data, size_t len)
{
	char hdr[61];
	snprintf(hdr, sizeof hdr, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0", "644", len);
	for (int i = 0; i < 60; i++)
		buf_putc(b, hdr[i]);
	for (size_t i = 0; i < len; i++)
		buf_putc(b, data[i]);
	if (len & 1)
		buf_putc(b, '\n');
}

static void put_be32(Buf *b, uint32_t v)
{
	buf_putc(b, (char)(v >> 24));
	buf_putc(b, (char)(v >> 16));
	buf_putc(b, (char)(v >> 8));
	buf_putc(b, (char)v);
}

/* syms[i] lists the global symbols member i defines */
static void write_archive(Buf *out, OutFile *files, int n, Vec *syms)
{
	/* long names table */
	Buf names = {0};
	int64_t *name_off = xcalloc((size_t)n + 1, sizeof(int64_t));
	for (int i = 0; i < n; i++) {
		const char *base = strrchr(files[i].path, '/');
		base = base ? base + 1 : files[i].path;
		name_off[i] = (int64_t)names.len;
		buf_printf(&names, "%s/\n", base);
	}
	/* symbol index: count, offsets (big-endian), names */
	int nsyms = 0;
	size_t strbytes = 0;
	for (int i = 0; i < n; i++) {
		nsyms += syms[i].n;
		for (int k = 0; k < syms[i].n; k++)
			strbytes += strlen(syms[i].v[k]) + 1;
	}
	size_t symlen = 4 + 4 * (size_t)nsyms + strbytes;
	size_t pos = 8 + 60 + symlen + (symlen & 1) + 60 + names.len + (names.len & 1);
	size_t *member_off = xcalloc((size_t)n + 1, sizeof(size_t));
	for (int i = 0; i < n; i++) {
		member_off[i] = pos;
		pos += 60 + files[i].len + (files[i].len & 1);
	}
	Buf sym = {0};
	put_be32(&sym, (uint32_t)nsyms);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < syms[i].n; k++)
			put_be32(&sym, (uint32_t)member_off[i]);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < syms[i].n; k++) {
			buf_puts(&sym, syms[i].v[k]);
			buf_putc(&sym, 0);
		}
	buf_puts(out, "!<arch>\n");
	ar_member(out, "/", sym.s, sym.len);
	ar_member(out, "//", names.s, names.len);
	for (int i = 0; i < n; i++) {
		char nm[32];
		snprintf(nm, sizeof nm, "/%lld", (long long)name_off[i]);
		ar_member(out, nm, files[i].data, files[i].len);
	}
	buf_free(&sym);
	buf_free(&names);
	free(name_off);
	free(member_off);
}


/* ---- the build: jobs, workers, the persistent cache, outputs ---- */

enum { JOB_VARIANT, JOB_MODEL, JOB_WEIGHTS };

typedef struct Job {
	int kind;
	Variant *v;
	char sym[300];      /* the function a variant defines */
	char mod[300];      /* module and file stem: NAME.REGION.K */
	char label[300];    /* for progress: block.0, model, weights */
	uint8_t key[16];    /* persistent cache key */
	char *data;         /* the object (or .s/.ll text) */
	size_t len;
	int64_t code_bytes;
	double ms;
	int cached, selected;
	Vec syms;           /* global symbols it defines, for the archive index */
} Job;

typedef struct Shared {
	Program *p;
	RegionTable *rt;
	BuildOptions *o;
	const char *name;
	char *ident;        /* the target in cache keys: --target/--cpu, or host_id() */
	char *triple, *cpu, *features;
	LLVMTargetRef target;
	Plan **plans;
	int64_t *need;
	int64_t ws_static;  /* entries' own storage plus their inlined callees */
	int64_t ws_own;     /* the largest entry's own storage; variants add theirs at run time */
	Job *jobs;
	int njobs;
	int *order;         /* jobs by estimated cost, largest first (LPT) */
	int next, ndone, ntodo;
	pthread_mutex_t mu;
	char *error;        /* the first failure */
	const void *weights_image;
	size_t weights_len;
} Shared;

static LLVMCodeGenOptLevel cg_level(int opt)
{
	return opt <= 0 ? LLVMCodeGenLevelNone : opt == 1 ? LLVMCodeGenLevelLess
	       : opt == 2 ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelAggressive;
}

static void gen_init(Gen *G, Shared *sh)
{
	memset(G, 0, sizeof *G);
	G->p = sh->p;
	G->rt = sh->rt;
	G->o = sh->o;
	G->triple = sh->triple;
	/* register tiles are sized for the widest vectors the target has */
	G->vbytes = strstr(sh->features, "+avx512f") ? 64 : strstr(sh->features, "+avx2") ? 32 : 16;
	if (sh->o->cpu) {
		const char *c = sh->cpu;
		G->vbytes = strstr(c, "avx512") || strstr(c, "icelake") || strstr(c, "sapphirerapids") ||
		                    strstr(c, "cascadelake") || strstr(c, "cooperlake") || strstr(c, "tigerlake") ||
		                    strstr(c, "znver4")
		                ? 64
		            : strstr(c, "haswell") || strstr(c, "broadwell") || strstr(c, "skylake") || strstr(c, "znver") ||
		                    strstr(c, "x86-64-v3") || strstr(c, "alderlake")
		                ? 32
		                : 16;
	}
	G->tm = llvm.LLVMCreateTargetMachine(sh->target, sh->triple, sh->cpu, sh->features, cg_level(sh->o->opt_level),
	                                LLVMRelocPIC, LLVMCodeModelDefault);
	LLVMTargetDataRef td = llvm.LLVMCreateTargetDataLayout(G->tm);
	G->layout = llvm.LLVMCopyStringRepOfTargetData(td);
	llvm.LLVMDisposeTargetData(td);
	G->C = llvm.LLVMContextCreate();
	G->B = llvm.LLVMCreateBuilderInContext(G->C);
	G->i1 = llvm.LLVMInt1TypeInContext(G->C);
	G->i8 = llvm.LLVMInt8TypeInContext(G->C);
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

/* The weights as read-only data in an object of their own. */
static void weights_module(Gen *G, Shared *sh)
{
	char sym[300];
	snprintf(sym, sizeof sym, "%s__weights", sh->name);
	LLVMValueRef init = llvm.LLVMConstStringInContext(G->C, sh->weights_image, (unsigned)sh->weights_len, 1);
	LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8, (unsigned)sh->weights_len), sym);
	llvm.LLVMSetInitializer(gv, init);
	llvm.LLVMSetGlobalConstant(gv, 1);
	llvm.LLVMSetAlignment(gv, 64);
	snprintf(sym, sizeof sym, "%s__weights_size", sh->name);
	LLVMValueRef sz = llvm.LLVMAddGlobal(G->M, G->i64, sym);
	llvm.LLVMSetInitializer(sz, ci64(G, (int64_t)sh->weights_len));
	llvm.LLVMSetGlobalConstant(sz, 1);
}

/* NAME_new_embedded(err): the model bound to the weights object. */
static void embedded_new(Gen *G, const char *name)
{
	LLVMBuilderRef B = G->B;
	char sym[300];
	snprintf(sym, sizeof sym, "%s__weights", name);
	LLVMValueRef blob = llvm.LLVMAddGlobal(G->M, llvm.LLVMArrayType(G->i8, 0), sym);
	snprintf(sym, sizeof sym, "%s__weights_size", name);
	LLVMValueRef size = llvm.LLVMAddGlobal(G->M, G->i64, sym);
	snprintf(sym, sizeof sym, "%s__desc", name);
	LLVMValueRef desc = llvm.LLVMGetNamedGlobal(G->M, sym);
	snprintf(sym, sizeof sym, "%s_new_embedded", name);
	LLVMValueRef f = llvm.LLVMAddFunction(G->M, sym, llvm.LLVMFunctionType(G->i8p, &G->i8p, 1, 0));
	llvm.LLVMPositionBuilderAtEnd(B, llvm.LLVMAppendBasicBlockInContext(G->C, f, "entry"));
	LLVMTypeRef at[4] = {G->i8p, G->i8p, G->i64, G->i8p};
	LLVMValueRef av[4] = {llvm.LLVMConstPointerCast(desc, G->i8p), llvm.LLVMConstPointerCast(blob, G->i8p),
	                      llvm.LLVMBuildLoad2(B, G->i64, size, ""), llvm.LLVMGetParam(f, 0)};
	llvm.LLVMBuildRet(B, call(G, "nestrt_model_new_embedded", G->i8p, at, av, 4));
}

static void run_job(Gen *G, Shared *sh, Job *j)
{
	double t0 = now_ms();
	OutFile f = {0};
	int rc;
	gen_module_begin(G, j->mod);
	if (j->kind == JOB_VARIANT) {
		emit_function(G, j->v->g, j->v, j->sym, 0);
		char ws[320];
		snprintf(ws, sizeof ws, "%s_ws", j->sym);
		LLVMValueRef gv = llvm.LLVMAddGlobal(G->M, G->i64, ws);
		llvm.LLVMSetInitializer(gv, ci64(G, sh->need[j->v->g->id]));
		llvm.LLVMSetGlobalConstant(gv, 1);
		rc = gen_module_end(G, j->v->opt_level, &f, &j->code_bytes);
	} else if (j->kind == JOB_MODEL) {
		model_module(G, sh->name, NULL, sh->ws_static, sh->ws_own);
		if (sh->o->embed)
			embedded_new(G, sh->name);
		rc = gen_module_end(G, sh->o->opt_level, &f, &j->code_bytes);
	} else {
		weights_module(G, sh);
		rc = gen_module_end(G, 0, &f, NULL);
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

/* ---- the cache: DIR/xx/KEY.o, a header with a checksum, written atomically ---- */

#define CACHE_MAGIC "NESTC-CACHE-1\n\0\0"

static void key_hex(const uint8_t key[16], char out[33])
{
	fp_hex(key, out);
}

static char *cache_path(const char *dir, const uint8_t key[16])
{
	char hex[33];
	key_hex(key, hex);
	return xasprintf("%s/%.2s/%s.o", dir, hex, hex + 2);
}

static int mkdirs(const char *path)
{
	char *p = xstrdup(path);
	for (char *c = p + 1; *c; c++)
		if (*c == '/') {
			*c = 0;
			if (mkdir(p, 0777) < 0 && errno != EEXIST) {
				free(p);
				return -1;
			}
			*c = '/';
		}
	int r = mkdir(p, 0777) < 0 && errno != EEXIST ? -1 : 0;
	free(p);
	return r;
}

/* 1 and the entry's bytes on a hit; a corrupt entry is removed and misses. */
static int cache_get(const char *dir, const uint8_t key[16], char **data, size_t *len, int64_t *code_bytes)
{
	char *path = cache_path(dir, key);
	FILE *f = fopen(path, "rb");
	if (!f) {
		free(path);
		return 0;
	}
	char hdr[40];
	int ok = fread(hdr, 1, 40, f) == 40 && !memcmp(hdr, CACHE_MAGIC, 16);
	uint64_t n = 0;
	if (ok)
		memcpy(&n, hdr + 16, 8);
	char *buf = NULL;
	if (ok && n < ((uint64_t)1 << 40)) {
		buf = xmalloc((size_t)n + 1);
		ok = fread(buf, 1, (size_t)n, f) == (size_t)n && fgetc(f) == EOF;
		uint64_t sum = XXH3_64bits(buf, (size_t)n);
		uint64_t want;
		memcpy(&want, hdr + 24, 8);
		ok = ok && sum == want;
		memcpy(code_bytes, hdr + 32, 8);
	} else {
		ok = 0;
	}
	fclose(f);
	if (!ok) {
		/* a torn or corrupted entry: drop it and compile again */
		unlink(path);
		free(buf);
		free(path);
		return 0;
	}
	free(path);
	*data = buf;
	*len = (size_t)n;
	return 1;
}

static void cache_put(const char *dir, const uint8_t key[16], const char *data, size_t len, int64_t code_bytes)
{
	char *path = cache_path(dir, key);
	char *slash = strrchr(path, '/');
	*slash = 0;
	int ok = mkdirs(path) == 0;
	*slash = '/';
	if (ok) {
		Buf b = {0};
		for (int i = 0; i < 16; i++)
			buf_putc(&b, CACHE_MAGIC[i]);
		uint64_t n = len, sum = XXH3_64bits(data, len), pad = (uint64_t)code_bytes;
		for (int i = 0; i < 8; i++)
			buf_putc(&b, (char)(n >> (8 * i)));
		for (int i = 0; i < 8; i++)
			buf_putc(&b, (char)(sum >> (8 * i)));
		for (int i = 0; i < 8; i++)
			buf_putc(&b, (char)(pad >> (8 * i)));
		Buf all = b;
		for (size_t i = 0; i < len; i++)
			buf_putc(&all, data[i]);
		/* a temporary file, then rename: readers never see half an entry */
		write_file_atomic(path, all.s, all.len);
		buf_free(&all);
	}
	free(path);
}

char *default_cache_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME");
	if (x && x[0] == '/')
		return xasprintf("%s/nestc", x);
	const char *h = getenv("HOME");
	if (h && *h)
		return xasprintf("%s/.cache/nestc", h);
	return NULL;
}

int cache_command(const char *dir, const char *what)
{
	if (!dir) {
		fprintf(stderr, "nestc: error: no cache directory (set XDG_CACHE_HOME or HOME, or give --cache-dir)\n");
		return 1;
	}
	int64_t entries = 0, bytes = 0, removed = 0;
	for (int a = 0; a < 256; a++) {
		char *sub = xasprintf("%s/%02x", dir, a);
		DIR *dp = opendir(sub);
		if (dp) {
			struct dirent *de;
			while ((de = readdir(dp))) {
				if (de->d_name[0] == '.')
					continue;
				char *f = xasprintf("%s/%s", sub, de->d_name);
				struct stat st;
				size_t nl = strlen(de->d_name);
				int entry = nl > 2 && !strcmp(de->d_name + nl - 2, ".o");
				if (stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
					/* temporary files of a build that was killed are not entries */
					if (entry) {
						entries++;
						bytes += st.st_size;
					}
					if (!strcmp(what, "clear") && unlink(f) == 0 && entry)
						removed++;
				}
				free(f);
			}
			closedir(dp);
			if (!strcmp(what, "clear"))
				rmdir(sub);
		}
		free(sub);
	}
	if (!strcmp(what, "clear"))
		printf("removed %lld entries (%lld bytes) from %s\n", (long long)removed, (long long)bytes, dir);
	else
		printf("cache %s: %lld entries, %lld bytes\n", dir, (long long)entries, (long long)bytes);
	return 0;
}

/* ---- keys ---- */

/* The compiler's own identity: a hash of its executable, so that a rebuilt
 * nestc never takes objects made by another build of the same version. */
static uint64_t self_hash(void)
{
	static uint64_t h;
	static int done;
	if (done)
		return h;
	done = 1;
	FILE *f = fopen("/proc/self/exe", "rb");
	if (!f)
		return h = 0;
	XXH3_state_t *st = XXH3_createState();
	XXH3_64bits_reset(st);
	char buf[1 << 16];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		XXH3_64bits_update(st, buf, n);
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	fclose(f);
	return h;
}

static void key_common(Shared *sh, Buf *b)
{
	BuildOptions *o = sh->o;
	buf_printf(b, "nestc %s %016llx llvm %s target %s emit %d O%d\n", NESTC_VERSION,
	           (unsigned long long)self_hash(), NESTC_LLVM_VERSION, sh->ident, o->emit, o->opt_level);
}

/* Everything of a graph that its code depends on, calls by slot. */
static void graph_text(Shared *sh, Graph *g, Buf *b)
{
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		node_text(b, n);
		uint64_t bits;
		memcpy(&bits, &n->fval, 8);
		buf_printf(b, " f=%llx i=%lld", (unsigned long long)bits, (long long)n->ival);
		if (n->op == OP_CALL) {
			CallSite *cs = callsite_of(sh->rt, n);
			if (cs && cs->v) {
				buf_printf(b, " slot=%d", cs->v->id);
				if (cs->v->ndyn)
					for (int k = 0; k < cs->v->ndyn; k++)
						buf_printf(b, " dim=%lld map=%d", (long long)cs->dyn_values[k],
						           cs->dyn_map ? cs->dyn_map[k] : -2);
			} else {
				char hex[33];
				fp_hex(n->callee->fp, hex);
				buf_printf(b, " inline=%s", hex);
				graph_text(sh, n->callee, b);
			}
		}
		buf_putc(b, '\n');
	}
	buf_puts(b, "out");
	for (int i = 0; i < g->noutputs; i++)
		buf_printf(b, " %d", g->outputs[i]->id);
	buf_putc(b, '\n');
}

static void job_key(Shared *sh, Job *j)
{
	Buf b = {0};
	key_common(sh, &b);
	buf_printf(&b, "job %d %s\n", j->kind, j->sym);
	if (j->kind == JOB_VARIANT) {
		Variant *v = j->v;
		char hex[33];
		fp_hex(v->fp, hex);
		buf_printf(&b, "fp %s opt %d fast %d dyn %d need %lld\n", hex, v->opt_level, v->fast_math, v->ndyn,
		           (long long)sh->need[v->g->id]);
		for (int i = 0; i < v->ndyn; i++)
			buf_printf(&b, "%d.%d ", v->dyn[i].node, v->dyn[i].field);
		graph_text(sh, v->g, &b);
	} else if (j->kind == JOB_MODEL) {
		Program *p = sh->p;
		buf_printf(&b, "ws %lld %lld embed %d\n", (long long)sh->ws_static, (long long)sh->ws_own,
		           sh->o->embed != NULL);
		for (int i = 0; i < p->nparams; i++) {
			ParamInfo *pi = &p->params[i];
			buf_printf(&b, "param %s %d", pi->name, pi->dtype);
			for (int k = 0; k < pi->rank; k++)
				buf_printf(&b, " %lld", (long long)pi->shape[k]);
			buf_putc(&b, '\n');
		}
		for (int i = 0; i < sh->rt->variants.n; i++) {
			Variant *v = sh->rt->variants.v[i];
			buf_printf(&b, "slot %s.%d\n", v->region, v->k);
		}
		for (int e = 0; e < p->nentries; e++) {
			buf_printf(&b, "entry %s\n", p->entries[e].name);
			graph_text(sh, p->entries[e].g, &b);
		}
	} else {
		buf_printf(&b, "weights %llx %zu\n", (unsigned long long)XXH3_64bits(sh->weights_image, sh->weights_len),
		           sh->weights_len);
	}
	XXH128_hash_t h = XXH3_128bits(b.s, b.len);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	memcpy(j->key, c.digest, 16);
	buf_free(&b);
}

/* ---- workers ---- */

static int progress_on(Shared *sh)
{
	return sh->o->progress && isatty(2);
}

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
		if (progress_on(sh))
			fprintf(stderr, "\r[%d/%d] %s  %.0f ms\033[K", sh->ndone, sh->ntodo, j->label, j->ms);
		pthread_mutex_unlock(&sh->mu);
	}
	gen_dispose(&G);
	return NULL;
}

static char *job_path(Shared *sh, Job *j)
{
	const char *ext = sh->o->emit == EMIT_OBJ ? "o" : sh->o->emit == EMIT_ASM ? "s" : "ll";
	if (sh->o->archive)
		return xasprintf("%s.%s", j->mod, ext);
	return xasprintf("%s/%s.%s", sh->o->out, j->mod, ext);
}

static char *header_path(BuildOptions *o, const char *name)
{
	if (!o->archive)
		return xasprintf("%s/%s.h", o->out, name);
	const char *slash = strrchr(o->out, '/');
	return slash ? xasprintf("%.*s/%s.h", (int)(slash - o->out), o->out, name) : xasprintf("%s.h", name);
}

static void make_jobs(Shared *sh)
{
	RegionTable *rt = sh->rt;
	int nv = rt->variants.n;
	sh->jobs = xcalloc((size_t)nv + 3, sizeof(Job));
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
	}
	Job *m = &sh->jobs[sh->njobs++];
	m->kind = JOB_MODEL;
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
	if (sh->o->embed) {
		Job *w = &sh->jobs[sh->njobs++];
		w->kind = JOB_WEIGHTS;
		snprintf(w->sym, sizeof w->sym, "%s__weights", sh->name);
		snprintf(w->mod, sizeof w->mod, "%s.weights", sh->name);
		snprintf(w->label, sizeof w->label, "weights");
		vec_push(&w->syms, xstrdup(w->sym));
		vec_push(&w->syms, xasprintf("%s__weights_size", sh->name));
	}
	for (int i = 0; i < sh->njobs; i++) {
		Job *j = &sh->jobs[i];
		j->selected = !sh->o->only || !strcmp(sh->o->only, j->label);
	}
}

char **build_outputs(Program *p, RegionTable *rt, BuildOptions *o, int *n)
{
	Shared sh = {.p = p, .rt = rt, .o = o, .name = o->name};
	make_jobs(&sh);
	char **out = xcalloc((size_t)sh.njobs + 2, sizeof(char *));
	int k = 0;
	if (o->archive) {
		out[k++] = xstrdup(o->out);
	} else {
		/* the model object first: it is a depfile's target */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < sh.njobs; i++)
				if (sh.jobs[i].selected && (sh.jobs[i].kind == JOB_MODEL) == (pass == 0))
					out[k++] = job_path(&sh, &sh.jobs[i]);
	}
	if (!o->only || !strcmp(o->only, "model") || o->archive)
		out[k++] = header_path(o, o->name);
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
		int ours = !strncmp(rest, "weights.", 8) && rest + 7 == ext;
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

/* LLVM, the target machine's parameters: only when something must be compiled. */
static int setup_llvm(Shared *sh, Diag *d)
{
	char why[512];
	if (llvm_load(why, sizeof why) < 0) {
		error_plain(d, "%s", why);
		return 1;
	}
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
		sh->cpu = xstrdup("generic");
		sh->features = xstrdup("");
	}
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
	make_jobs(&sh);

	/* the cache first: what it holds needs no compiling */
	for (int i = 0; i < sh.njobs; i++) {
		Job *j = &sh.jobs[i];
		if (!j->selected)
			continue;
		job_key(&sh, j);
		if (o->cache_dir && cache_get(o->cache_dir, j->key, &j->data, &j->len, &j->code_bytes)) {
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
	if (sh.ntodo > 0 && setup_llvm(&sh, d))
		rc = 1;
	int nthreads = o->jobs > 0 ? o->jobs : 1;
	if (nthreads > sh.ntodo)
		nthreads = sh.ntodo > 0 ? sh.ntodo : 1;
	if (sh.ntodo > 0 && !rc) {
		pthread_t *th = xcalloc((size_t)nthreads, sizeof(pthread_t));
		for (int t = 1; t < nthreads; t++)
			if (pthread_create(&th[t], NULL, worker, &sh) != 0)
				ice("cannot start a compile thread");
		worker(&sh);
		for (int t = 1; t < nthreads; t++)
			pthread_join(th[t], NULL);
		free(th);
		if (progress_on(&sh))
			fputs("\r\033[K", stderr);
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
			cache_put(o->cache_dir, j->key, j->data, j->len, j->code_bytes);
		if (j->kind == JOB_VARIANT) {
			j->v->code_bytes = j->code_bytes;
			j->v->compile_ms = j->cached ? 0 : j->ms;
			j->v->cached = j->cached;
		}
	}

	/* write: header and objects (or one archive), each through a temporary file;
	 * they take their final names only when all are complete */
	if (!rc) {
		Vec tmps = {0}, finals = {0};
		int ok = 1, made_dir = 0;
		const char *dir = o->archive ? NULL : o->out;
		if (dir) {
			if (mkdir(dir, 0777) == 0)
				made_dir = 1;
			else if (errno != EEXIST) {
				error_plain(d, "cannot create %s: %s", dir, strerror(errno));
				ok = 0;
			}
		}
		int pid = (int)getpid();
		if (ok && o->archive) {
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
			Buf ar = {0};
			write_archive(&ar, files, n, syms);
			char *tmp = xasprintf("%s.tmp.%d", o->out, pid);
			if (write_file_atomic(tmp, ar.s, ar.len) < 0)
				ok = 0;
			vec_push(&tmps, tmp);
			vec_push(&finals, xstrdup(o->out));
			buf_free(&ar);
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
		if (ok && (!o->only || !strcmp(o->only, "model") || o->archive)) {
			Gen G = {.p = p, .rt = rt, .o = o};
			Buf h = {0};
			header_text(&G, &h, sh.name);
			char *hpath = header_path(o, sh.name);
			char *tmp = xasprintf("%s.tmp.%d", hpath, pid);
			if (write_file_atomic(tmp, h.s, h.len) < 0)
				ok = 0;
			vec_push(&tmps, tmp);
			vec_push(&finals, hpath);
			buf_free(&h);
		}
		for (int i = 0; i < tmps.n && ok; i++)
			if (rename(tmps.v[i], finals.v[i]) < 0) {
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
	free(sh.ident);
	free(sh.triple);
	free(sh.cpu);
	free(sh.features);
	pthread_mutex_destroy(&sh.mu);
	return rc;
}

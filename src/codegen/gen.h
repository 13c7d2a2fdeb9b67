/* gen.h - the internal header of src/codegen/, LLVM-C code generation. Only
 * these files see LLVM's types: the code generator's state (Gen, Fn), loops,
 * pool tasks, the build's jobs and the table of LLVM-C functions loaded with
 * dlopen. Sectioned by owning file, like nestc.h; the files depend on each
 * other one way, in this order: llvm, builder, the kernels (elementwise,
 * movement, matmul, reduce, conv, winograd), graph, then header, model, archive, cache
 * and build. */
#ifndef NESTC_CODEGEN_GEN_H
#define NESTC_CODEGEN_GEN_H

#include "plan.h"
#include "wformat.h"

#include <pthread.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/Object.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

/* ------------------------------------------------------------------ llvm.c */

/* Every LLVM-C function the code generator uses, called through the table
 * `llvm` (typed from the headers themselves) once llvm_load has filled it. */
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
	X(LLVMConstStructInContext) \
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
	X(LLVMInstallFatalErrorHandler) \
	X(LLVMGetInsertBlock) \
	X(LLVMGetLastInstruction) \
	X(LLVMGetNamedFunction) \
	X(LLVMGetNamedGlobal) \
	X(LLVMGetParam) \
	X(LLVMGetSectionName) \
	X(LLVMGetSectionSize) \
	X(LLVMGetTargetFromTriple) \
	X(LLVMIsAConstantInt) \
	X(LLVMConstIntGetSExtValue) \
	X(LLVMInt1TypeInContext) \
	X(LLVMHalfTypeInContext) \
	X(LLVMInt32TypeInContext) \
	X(LLVMInt64TypeInContext) \
	X(LLVMInt8TypeInContext) \
	X(LLVMInt16TypeInContext) \
	X(LLVMModuleCreateWithNameInContext) \
	X(LLVMMoveToNextSection) \
	X(LLVMObjectFileCopySectionIterator) \
	X(LLVMObjectFileIsSectionIteratorAtEnd) \
	X(LLVMPassBuilderOptionsSetLoopUnrolling) \
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
	X(LLVMGetFirstFunction) \
	X(LLVMGetNextFunction) \
	X(LLVMIsDeclaration) \
	X(LLVMGetValueName2) \
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
	X(LLVMGetTypeKind) \
	X(LLVMGetVectorSize) \
	X(LLVMBuildFPToSI) \
	X(LLVMBuildShl) \
	X(LLVMBuildLShr) \
	X(LLVMBuildBitCast) \
	X(LLVMBuildPtrToInt) \
	X(LLVMBuildIntToPtr) \
	X(LLVMBuildArrayAlloca) \
	X(LLVMVoidTypeInContext) \
	X(LLVMLookupIntrinsicID) \
	X(LLVMGetIntrinsicDeclaration) \
	X(LLVMIntrinsicGetType) \
	X(LLVMBuildSwitch) \
	X(LLVMAddCase) \
	X(LLVMGetFirstBasicBlock) \
	X(LLVMGetNextBasicBlock) \
	X(LLVMGetNextInstruction) \
	X(LLVMGetFirstGlobal) \
	X(LLVMGetNextGlobal) \
	X(LLVMGetLinkage) \
	X(LLVMSetVisibility) \
	X(LLVMGlobalGetValueType) \
	X(LLVMReplaceAllUsesWith) \
	X(LLVMDeleteFunction) \
	X(LLVMSetValueName2)

struct LLVMApi {
#define X(f) __typeof__(&f) f;
	LLVM_API(X)
#undef X
};
extern struct LLVMApi llvm;

/* Load libLLVM (once): 0, or -1 with the reason in err. */
int llvm_load(char *err, size_t n);

/* ------------------------------------------------------------------ builder.c */

/* The code generator's state: Gen per worker thread (its LLVM context and
 * module), Fn per function being built. Set up by build.c, read by all. */

/* offsets of nestrt_ctx fields used by generated code (runtime/nestrt.h) */
enum { CTX_PARAMS = 0, CTX_PROFILE = 40 }; /* offsets in nestrt_ctx (LP64, nestrt.h) */

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
	int par_flat;            /* ... of axes 0 and 1 as one (an elementwise kernel of batch 1) */
	int64_t ws_need;         /* own + callees */
	LLVMValueRef kp_on;      /* NESTRT_PROFILE=2 in this call: time each kernel */
	/* a matmul reading its right operand through a virtual slice (plan.c):
	 * the sliced tensor's storage and its row length, for mm_panel */
	Node *bview;
	LLVMValueRef bview_ldb;
	LLVMValueRef bview_batch, bview_start; /* for mm_pool's matrices: their stride, the first one's start */
	/* a matmul's activations quantized for integer dot products (G->dot):
	 * int8 [M][K] from A's element qoa, and per row and block of 32 its f32
	 * scale and the sum of its quants (i32); NULL elsewhere */
	LLVMValueRef qa, qd, qs, qoa;
	/* NESTRT_PROFILE=2: the current kernel's weight, when it read one: its
	 * bytes (i64) and format (i32) slots, stored by matmul.c (else NULL) */
	LLVMValueRef kp_bytes, kp_fmt;
	int kp_read;             /* the kernel being emitted stored them */
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
	LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, vd, i8p, i8pp, i64p;
	LLVMTypeRef fn_t;        /* the variant signature */
	int ninline;             /* private copies made in this module */
	int64_t *need;           /* per graph id: workspace bytes, own + callees (-1 unknown) */
	Plan **plans;            /* per graph id; computed before any worker starts */
	char *error;             /* a code generation failure, reported by the main thread */
	int vbytes;              /* SIMD register width in bytes: 64 (AVX-512), 32 (AVX2), 16 */
	int wfmask;              /* the weight formats the program's params are in (1 << WF_*), f32's bit clear */
	int dot;                 /* --activations=int8 with q8_0 or q4_0 weights: their matmuls quantize the
	                            activations and take integer dot products (matmul.c), their copies are
	                            NESTRT_PACK_DOT's */
	int vnni;                /* the target has vpdpbusd at vbytes (AVX512-VNNI, AVX-VNNI) */
	int f16c;                /* the target converts f16 to f32 in one instruction (x86's F16C) */
	int ntask;               /* task functions made in this module */
	int part, nparts;        /* the model object in nparts parts (build.c): this module's */
	const char *model;       /* the model's name, for the parts' symbols */
	int kp_slot;             /* the kernels' owner in the profile: a dispatch slot, */
	const char *kp_owner;    /* or (kp_slot -1) an entry point */
};

typedef struct Loop {
	LLVMBasicBlockRef head, body, exit;
	LLVMValueRef i;
} Loop;

/* Nested loops over `out`'s shape; off[j] is the running element offset of
 * operand j given its strides. The callback body runs innermost. */
typedef struct Nest {
	int rank;
	unsigned skip;           /* bit k: axis k has no loop of its own (Fn.par_flat's axis 1, a run's) */
	Loop loops[MAX_RANK];
	LLVMValueRef idx[MAX_RANK];
} Nest;

/* A function of this module that the pool runs as tasks (env, begin, end):
 * `vals` (i64s) are stored in an array of the caller's frame, T is set up
 * for the task's body with the builder at its start and the values loaded
 * into got[]. task_end closes it and runs it on the pool. */
typedef struct Task {
	LLVMValueRef fn, env;
	LLVMBasicBlockRef saved;
} Task;

LLVMTypeRef elem_t(Gen *G, DType dt);
LLVMValueRef ci64(Gen *G, int64_t v);
LLVMValueRef ci32(Gen *G, int v);
LLVMValueRef fconst(Gen *G, DType dt, double v);
/* x in every lane of a vector of type vt (vw lanes) */
LLVMValueRef splat(Gen *G, LLVMTypeRef vt, int vw, LLVMValueRef x);
/* x as an i32, or vw of them (vw > 0) */
LLVMValueRef vsplat32(Gen *G, int vw, uint32_t x);
/* f16 or bf16 bits as f32: vw of them (<vw x i16>), or one (vw 0) */
LLVMValueRef widen16(Gen *G, LLVMValueRef h, int vw, int bf16);

/* A call of the function `name` of this module, declared on first use. */
LLVMValueRef get_fn(Gen *G, const char *name, LLVMTypeRef ty);
LLVMValueRef call(Gen *G, const char *name, LLVMTypeRef ret, LLVMTypeRef *args, LLVMValueRef *vals, int n);
/* A private C string of the module */
LLVMValueRef cstr(Gen *G, const char *s);
/* A private table of n constant i64s, as an i64 pointer */
LLVMValueRef ctable_i64(Gen *G, const int64_t *v, int64_t n);
/* "FILE:LINE:COL" of node n in the model's source, as cstr ("" if unknown) */
LLVMValueRef source_where(Gen *G, Node *n);
/* llvm.NAME.f32/.f64 intrinsics and libm functions of one or two arguments */
LLVMValueRef math1(Gen *G, const char *base, DType dt, LLVMValueRef x);
LLVMValueRef math2(Gen *G, const char *base, DType dt, LLVMValueRef x, LLVMValueRef y);

/* for (i = lo; i < hi; i++): loop_begin returns i; the body follows it */
LLVMValueRef loop_begin(Fn *F, Loop *L, LLVMValueRef lo, LLVMValueRef hi);
void loop_end(Fn *F, Loop *L);
/* for (i = 0; i < hi; i++) */
LLVMValueRef loop_to(Fn *F, Loop *L, LLVMValueRef hi);
/* if (cond) { ... }: if_begin returns the block if_end continues in */
LLVMBasicBlockRef if_begin(Fn *F, LLVMValueRef cond);
void if_end(Fn *F, LLVMBasicBlockRef join);
/* 0 <= v < hi, as one unsigned comparison */
LLVMValueRef in_range(Gen *G, LLVMValueRef v, LLVMValueRef hi);
/* an alloca in the function's entry block, whatever block is being built */
LLVMValueRef entry_alloca(Fn *F, LLVMTypeRef t, const char *name);

/* Index arithmetic on i64 values (signed division and remainder), and
 * elem_off: base + i * stride, the offset of element i along an axis. */
LLVMValueRef iadd(Gen *G, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef isub(Gen *G, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef imul(Gen *G, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef idiv(Gen *G, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef irem(Gen *G, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef elem_off(Gen *G, LLVMValueRef base, LLVMValueRef i, LLVMValueRef stride);

/* A node's dimension, attribute and element count: constants, or loaded from
 * the dims argument for a reuse_hash variant. */
LLVMValueRef dimv(Fn *F, Node *n, int axis);
/* The function's shapes are (partly) run-time values: a reuse_hash variant,
 * or a graph of an entry with run-time dims. */
int fn_dynamic(Fn *F);
/* Node n or one of its inputs has a shape or attribute taken at run time
 * (so its kernel is the general one); node_dyn for a graph and variant. */
int node_dynamic(Fn *F, Node *n);
/* Is a shape field of n (an axis, or 16 + an attribute) the same at every
 * value of the run-time dims (a constant of the code)? */
int field_static(Fn *F, Node *n, int field);
int node_dyn(Graph *g, Variant *v, Node *n);
LLVMValueRef attrv(Fn *F, Node *n, int k);
LLVMValueRef numelv(Fn *F, Node *n);
void strides(Fn *F, Node *n, int out_rank, const Node *out, LLVMValueRef *st);

/* the typed pointer to a node's elements, and element `off` of it */
LLVMValueRef nptr(Fn *F, Node *n);
LLVMValueRef load_at(Fn *F, Node *n, LLVMValueRef off);
void store_at(Fn *F, Node *n, LLVMValueRef off, LLVMValueRef v);
void nest_begin(Fn *F, Nest *N, Node *out, int nops, LLVMValueRef st[][MAX_RANK], LLVMValueRef *off);
/* nest_begin with adjacent static axes that every operand steps through
 * alike (contiguous, or broadcast along both) as one loop: a 56x56 plane is
 * one loop of 3136, which the vectoriser fills with whole vectors, not 56
 * of 56. N->idx is set for the loops' first axes only. */
void nest_begin_runs(Fn *F, Nest *N, Node *out, int nops, LLVMValueRef st[][MAX_RANK], LLVMValueRef *off);
void nest_end(Fn *F, Nest *N);

/* masked vector loads and stores (lanes off: not touched), and the mask of
 * lanes [0, n) */
LLVMValueRef masked_load(Gen *G, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask, LLVMValueRef pass, unsigned align);
void masked_store(Gen *G, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask, unsigned align);
LLVMValueRef lanes_below(Gen *G, int vw, LLVMValueRef n);
/* a prefetch of the line at p into every cache level (to be written: rw) */
void prefetch_line(Gen *G, LLVMValueRef p);
void prefetch_rw(Gen *G, LLVMValueRef p, int write, int locality);
/* a masked load through a vector of pointers (one per lane) */
LLVMValueRef masked_gather(Gen *G, LLVMTypeRef vt, LLVMValueRef ptrs, LLVMValueRef mask, LLVMValueRef pass, unsigned align);

void fn_attrs(Gen *G, LLVMValueRef fn, Variant *v);
Task task_begin(Fn *F, Fn *T, const char *kind, LLVMValueRef *vals, int nvals, LLVMValueRef *got);
void task_end(Fn *F, Fn *T, Task *t, LLVMValueRef ntasks);

/* ------------------------------------------------------------------ elementwise.c */

/* maximum and minimum (floats: NaN wins, as NumPy's maximum) */
LLVMValueRef fmaxmin(Gen *G, LLVMValueRef a, LLVMValueRef b, int is_max);
LLVMValueRef imaxmin(Gen *G, LLVMValueRef a, LLVMValueRef b, int is_max);
LLVMValueRef exp_fast(Gen *G, DType dt, LLVMValueRef x);
/* exp_fast of f32 x, a scalar (lanes 0) or a vector of `lanes` */
LLVMValueRef exp_fast_v(Gen *G, LLVMValueRef x, int lanes);
/* gelu of f32 x (with tanh: the tanh approximation), a scalar (lanes 0) or a
 * vector of `lanes` */
LLVMValueRef gelu_f32(Gen *G, LLVMValueRef x, int lanes, int tanh_form);
/* The activations a fused epilogue applies to f32 vectors in registers
 * (act_f32_op, plan.h), on a scalar (lanes 0) or a vector of `lanes`, as
 * unop computes them element by element. */
LLVMValueRef act_f32(Gen *G, Op op, LLVMValueRef x, int lanes);
/* a * b + c in f32 (llvm.fmuladd), a scalar (lanes 0) or a vector of `lanes` */
LLVMValueRef fma_f32(Gen *G, int lanes, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
LLVMValueRef binop(Fn *F, Op op, DType dt, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef unop(Fn *F, Op op, DType dt, LLVMValueRef x);
/* an OP_CONST, OP_FULL or OP_ARANGE node's value */
LLVMValueRef const_value(Gen *G, Node *n);
void ew_leaves(Fn *F, Node *n, Node **leaf, int *nleaf);
void k_elementwise(Fn *F, Node *n);

/* ------------------------------------------------------------------ movement.c */

void k_fill(Fn *F, Node *n);
void k_transpose(Fn *F, Node *n);
void k_slice(Fn *F, Node *n);
void k_store(Fn *F, Node *n);
void k_expand(Fn *F, Node *n);
void k_concat(Fn *F, Node *n);
void k_gather(Fn *F, Node *n);
int gather_packed_table(Node *tab);
void memcpy_bytes(Fn *F, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef bytes);

/* ------------------------------------------------------------------ matmul.c */

/* The buffers a matmul's task keeps on its stack (at least 6 MiB of it
 * free: runtime/pool.c) stay small whatever the shapes: a partial panel's tiles
 * go through MM_PART_ROWS rows at a time (a multiple of every tile height:
 * 12, 8, 4), and a panel of B longer than MM_STACK_PANEL bytes (K over
 * 10922 floats at 48 columns) is packed into memory from malloc. */
#define MM_PART_ROWS 192
#define MM_STACK_PANEL (2 << 20)

/* C = A @ B for one matrix at element offsets oa, ob, oo (conv_transpose2d's too) */
void mm_tiled(Fn *F, Node *n, Node *a, Node *b, LLVMValueRef M, LLVMValueRef K, LLVMValueRef Nn,
              LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oo, int plain, int tb, LLVMValueRef packed,
              LLVMValueRef pkfmt, LLVMValueRef buf_in, LLVMValueRef tmp_in);
void k_matmul(Fn *F, Node *n);

/* The pack plan of a graph (what libnestrt packs at model creation, issue
 * #14), appended to *plan (*len int64s), and as a constant global. */
void pack_plan(Gen *G, Graph *g, Variant *v, int entry, int64_t **plan, int *len);
LLVMValueRef pack_plan_global(Gen *G, const int64_t *plan, int len, const char *sym, int private);
/* The tallest register tile */
#define MM_MAX_MR 16

/* ------------------------------------------------------------------ epilogue.c */

/* The ops of the fused epilogue of n (plan.c) and each one's other operand
 * (NULL for a unary op; first: the chain's value is its first operand);
 * how many. A scalar computed from constants as an LLVM constant. */
int mm_epilogue(Fn *F, Node *n, Node **ops, Node **other, int *first);
LLVMValueRef const_scalar(Fn *F, Node *x);
/* Can the epilogue run on a tile's vectors in registers (mm_epi_vec: on
 * vector v, vw lanes, of the result at element off, column col), or must it
 * run over the stored rows (mm_epilogue_rows: columns [cw, cw + ncols) of
 * rows [r0, r0 + M), in place)? */
int mm_epi_in_regs(Fn *F, Node *n);
LLVMValueRef mm_epi_vec(Fn *F, Node *n, LLVMValueRef v, int vw, LLVMValueRef off, LLVMValueRef col);
void mm_epilogue_rows(Fn *F, Node *n, LLVMValueRef r0, LLVMValueRef M, LLVMValueRef Nn, LLVMValueRef oo,
                      LLVMValueRef cw, LLVMValueRef ncols);

/* ------------------------------------------------------------------ matmul_fmt.c */

/* A one-row tile (a decode step's matrix-vector product) streams its
 * weights from memory once, and at one thread the hardware's prefetchers
 * alone kept too few lines in flight: perf put the step's time on its
 * loads. It fetches the lines MM_AHEAD bytes on, non-temporal (read once):
 * prefetch_stream fetches [base + off + MM_AHEAD, + bytes), a line each
 * (matmul.c's f32 tiles call it too). TinyLlama's step at one thread, against bench/stream.c's read in the same
 * rounds (AMD Zen 5, 29 GB/s): bf16 62% -> 77%, q4_0 with int8 activations
 * 59% -> 67%; 16 KiB ahead and prefetcht0 measured the same. */
#define MM_AHEAD 4096
void prefetch_stream(Gen *G, LLVMValueRef base, LLVMValueRef off, int64_t bytes);

/* mm_tile (matmul.c) over a panel in format wf (i8* panel, `wide` columns):
 * mr rows by nv vectors, from the rows at arow (K apart) into C's at crow
 * (ldc apart, column cj; epi: the fused epilogue in registers); stream: a
 * one-row tile, prefetching. */
void mm_tile_fmt(Fn *F, Node *n, Node *a, int mr, int nv, int vw, int wf, LLVMValueRef K, LLVMValueRef arow,
                 LLVMValueRef panel, LLVMValueRef wide, LLVMValueRef cbase, LLVMValueRef crow, LLVMValueRef ldc,
                 LLVMValueRef cj, int epi, int stream);
/* Bytes of a panel of a packed copy in wf: K rows of `wide` columns. */
LLVMValueRef fmt_panel_bytes(Gen *G, int wf, LLVMValueRef K, LLVMValueRef wide);
/* --activations=int8: rows [0, M) of A (from element oa, rows K apart)
 * quantized per block of 32: int8 into qa (row r's block b at r K + 32 b),
 * f32 d into qd and the i32 sum of the block's quants into qs (both at
 * r K / 32 + b). */
void mm_quantize_a(Fn *F, Node *a, LLVMValueRef M, LLVMValueRef K, LLVMValueRef oa, LLVMValueRef qa, LLVMValueRef qd,
                   LLVMValueRef qs);

/* ------------------------------------------------------------------ attention.c */

/* softmax(q @ k [epilogue], axis=-1) @ v (Plan.attn), a matrix of the batch
 * a task, emitted at the second matmul pv */
void k_attention(Fn *F, Node *pv);

/* ------------------------------------------------------------------ reduce.c */

void k_reduce(Fn *F, Node *n);
void k_argmax(Fn *F, Node *n);
void k_softmax(Fn *F, Node *n);
void k_norm(Fn *F, Node *n);
void k_group_norm(Fn *F, Node *n); /* issue #10 */
void k_causal_mask(Fn *F, Node *n);

/* ------------------------------------------------------------------ conv.c */

void k_conv2d(Fn *F, Node *n);
/* conv2d n in register tiles of pixels (ConvGeom: static shapes) */
void k_conv2d_tiled(Fn *F, Node *n, ConvGeom *cg);
/* convolution n and pooling m, which reads its value (Plan.conv_pool) */
void k_conv2d_pool(Fn *F, Node *n, Node *m);
/* ------------------------------------------------------------------ pool.c */

void k_pool(Fn *F, Node *n);
/* A row's output columns ow that read x at ow*sw + off inside [0, W):
 * [lo, hi); and the end hv of those whose vector of sw*vw inputs stays in
 * the row as well. */
void row_range(int64_t OW, int64_t W, int64_t sw, int64_t off, int64_t *lo, int64_t *hi, int64_t *hv);
/* vw elements of x from `at` on, sw apart, as a vector (one load and a
 * shuffle); with `fill`, those outside [0, W) of their row (at is rel
 * from its start) are fill, their addresses untouched. */
LLVMValueRef strided_vec_masked(Fn *F, Node *x, LLVMValueRef at, int64_t rel, int64_t W, int64_t sw, int vw,
                                LLVMValueRef fill);
LLVMValueRef strided_vec(Fn *F, Node *x, LLVMValueRef at, int64_t sw, int vw);
#define POOL_MAX_NCH 32 /* vectors of a pooled row */
/* The row accumulators of pooling n (allocas of T's entry block): how many */
int pool_accs(Fn *T, Node *n, LLVMValueRef *acc);
/* Output row oh of a plane of pooling n: input row ih at pbase + ih * W of
 * x's storage, the outputs to orow of n's */
void pool_row(Fn *T, Node *n, Node *x, LLVMValueRef *acc, int nch, LLVMValueRef pbase, LLVMValueRef oh,
              LLVMValueRef orow);

/* A convolution's shapes, fused epilogue and the nodes its tasks read
 * (cv_setup), for conv.c's kernels and winograd.c's. */
#define CV_MAX_LEAF 40

typedef struct ConvK {
	Node *n, *x, *w, *b;
	ConvGeom cg;
	int64_t C, H, W, O, OH, OW, KW, Cg, Og, S, Kw, P, CP;
	int vw, mr, nv;
	int rows_outer;   /* the next tile is the next column tile (else the next row tile) */
	int64_t blen;     /* pixels of the band whose tiles are being made */
	int64_t nvec, nct, nrtg, nrt, ntiles; /* nvec, nct: the band's vectors and column tiles */
	int64_t *soff;    /* per kernel position s = kh*KW + kw: its row's offset in the copies */
	Node *ops[8], *other[8];
	int first[8], nepi;
	Node *leaf[CV_MAX_LEAF]; /* nodes the tasks read, by pointer */
	int nleaf;
	/* where the tiles store: the result (out NULL), channel after channel
	 * OP elements apart (P), or a task's rows of a band (a pooling's input) */
	LLVMValueRef out;
	int64_t OP;
	LLVMValueRef cend; /* Cg as a value the optimiser does not know, else NULL */
} ConvK;
void cv_setup(Fn *F, ConvK *k, Node *n, ConvGeom *cg, int64_t CP, int inplace, int weights);
/* Is o (an epilogue operand) of the result's shape (a residual)? */
int cv_full(ConvK *k, Node *o);
/* Channel ch's element of a per-channel epilogue operand */
LLVMValueRef cv_chan(Fn *F, ConvK *k, Node *o, LLVMValueRef ch);
/* v through op e of the fused epilogue, ov its other operand */
LLVMValueRef cv_epi_op(Fn *F, ConvK *k, int e, LLVMValueRef v, LLVMValueRef ov);
/* v (one element, or a vector of `lanes`) of the result at element offset
 * off through the bias and the whole fused epilogue; chv[e]: op e's
 * per-channel operand's value */
LLVMValueRef cv_epilogue(Fn *F, ConvK *k, LLVMValueRef v, int lanes, LLVMValueRef bias, LLVMValueRef *chv,
                         LLVMValueRef off);
/* conv_dw.c: a depthwise convolution's own kernel, when n is one it takes */
int k_conv2d_dw_try(Fn *F, Node *n);
/* The nodes' pointers as i64s into a task's vals, and back in the task */
void cv_env(Fn *F, ConvK *k, LLVMValueRef *vals);
void cv_unenv(Fn *T, ConvK *k, LLVMValueRef *got);
/* The loop of a register tile over channels c in [c0, c1): the
 * accumulators acc (mr by nv vectors of type vt, from `init`, or zeros when
 * init is NULL) are phis of its head; the builder is left in its body, and
 * tile_loop_end closes it with the body's sums and leaves the builder after
 * the loop, where acc holds the results. */
typedef struct TileLoop {
	LLVMBasicBlockRef head, done;
	LLVMValueRef c, phi[CV_MAX_MR][CV_MAX_NV];
	int mr, nv;
} TileLoop;
void tile_loop_begin(Fn *F, TileLoop *L, int mr, int nv, LLVMTypeRef vt, LLVMValueRef c0, LLVMValueRef c1,
                     LLVMValueRef init[][CV_MAX_NV], LLVMValueRef acc[][CV_MAX_NV]);
void tile_loop_end(Fn *F, TileLoop *L, LLVMValueRef acc[][CV_MAX_NV]);
/* A tile's kernel positions s (offset soff[s] into the copies): unrolled,
 * each offset a constant, up to CV_UNROLL of them; a larger kernel (a 16x16
 * patch embedding: 256 positions, unrolled 200,000 lines of IR and two
 * minutes to build) in a loop over runs of `run` positions, the run
 * unrolled and the offsets read from a table. */
#define CV_UNROLL 64

typedef struct PosLoop {
	TileLoop L;
	LLVMValueRef tab, s0; /* the table, the run's first position (NULL: unrolled) */
	const int64_t *soff;
} PosLoop;

/* Opens the positions' loop (acc its sums, as tile_loop_begin's); returns
 * the positions of a run, the kernel's all when unrolled. pos_at: position
 * u of the run, its index and its offset in the copies. */
int pos_loop_begin(Fn *F, ConvK *k, PosLoop *pl, int mr, int nv, LLVMTypeRef vt, LLVMValueRef acc[][CV_MAX_NV]);
void pos_at(Fn *F, PosLoop *pl, int u, LLVMValueRef *s, LLVMValueRef *off);
void pos_loop_end(Fn *F, PosLoop *pl, LLVMValueRef acc[][CV_MAX_NV]);
/* The shifted copies of channels [c0, c1) of image nn, rows r0 .. r0+nr, into cps. */
void cv_copy(Fn *F, ConvK *k, LLVMValueRef cps, LLVMValueRef nn, LLVMValueRef c0, LLVMValueRef c1, LLVMValueRef r0,
             LLVMValueRef nr);

/* ------------------------------------------------------------------ conv_lanes.c */

/* conv2d n with output channels in the lanes where it applies
 * (conv_lanes_pack; AVX-512, a model's weights): 1 when its code was
 * emitted (the lanes when the weights were pre-packed at run time, else
 * conv.c's pixels' tiles: NESTRT_PREPACK=0, or a request the pack plan
 * missed), else 0 (k_conv2d). */
int k_conv2d_lanes_try(Fn *F, Node *n);

/* ------------------------------------------------------------------ winograd.c */

/* conv2d n by Winograd where it applies (ConvGeom.wino, allowed by the
 * build and the variant): 1 when its code was emitted, else 0 (k_conv2d).
 * Called before conv.c's kernels, whose helpers it uses. */
int k_conv2d_winograd(Fn *F, Node *n);

/* ------------------------------------------------------------------ index.c */

void k_take_along(Fn *F, Node *n);
void k_topk(Fn *F, Node *n);
void k_cumsum(Fn *F, Node *n);

/* ------------------------------------------------------------------ upsample.c */

void k_conv_transpose2d(Fn *F, Node *n);
void k_resize(Fn *F, Node *n);

/* ------------------------------------------------------------------ graph.c */

/* The plan of a graph (made once), and its workspace: own plus callees'. */
Plan *plan_of(Gen *G, Graph *g, Variant *v);
int64_t graph_need(Gen *G, Graph *g);
/* Graph g as the function `name` of the current module. */
LLVMValueRef emit_function(Gen *G, Graph *g, Variant *v, const char *name, int internal);

/* ------------------------------------------------------------------ header.c */

void header_text(Program *p, BuildOptions *o, Buf *b, const char *name);
/* The C type of an element of dtype dt ("float"), and an argument's or
 * dim's name as a C parameter (a keyword or a clash takes a '_'). */
const char *header_c_type(DType dt);
const char *header_c_param(const char *name, char *buf, size_t n);

/* ------------------------------------------------------------------ api.c */

/* NAME.api.json: the model's API for bindings (schema in nestc(1)). */
void api_json_text(Program *p, BuildOptions *o, Buf *b, const char *name);

/* ------------------------------------------------------------------ model.c */

void model_module(Gen *G, const char *name, LLVMValueRef *variant_fns, int64_t ws_static, int64_t ws_own);
void embedded_new(Gen *G, const char *name);
void weights_module(Gen *G, const char *name, const void *image, size_t len, const Prepacked *pk, int npk);

/* ------------------------------------------------------------------ archive.c */

typedef struct OutFile {
	char *path;      /* final name */
	char *data;
	size_t len;
} OutFile;

void write_archive(Buf *out, OutFile *files, int n, Vec *syms);

/* ------------------------------------------------------------------ link.c */

/* The files (objects named by their paths' last parts) linked with
 * libnestrt.a into the shared library tmp_out, exporting `exports`, the
 * runtime's public API and nestc_model_api (the text api); out is the final
 * name (its soname). 0, or 1 after an error message. */
int link_shared(Diag *d, const char *out, const char *tmp_out, OutFile *files, int nfiles, Vec *exports,
                const char *api);

/* ------------------------------------------------------------------ build.c */

enum { JOB_VARIANT, JOB_MODEL, JOB_WEIGHTS };

/* A graph with many kernels is compiled as several objects (the model's
 * parts, NAME.o and NAME.model-K.o) so that -j builds it on every core. */
#define MODEL_PARTS_MAX 4
#define MODEL_PART_KERNELS 32

typedef struct Job {
	int kind;
	int part, nparts;   /* JOB_MODEL: which of the model's parts */
	Variant *v;
	char sym[300];      /* the function a variant defines */
	char mod[300];      /* module and file stem: NAME.REGION.K */
	char label[300];    /* for progress: block.0, model, weights */
	uint8_t key[16];    /* persistent cache key */
	char *data;         /* the object (or .s/.ll text) */
	size_t len;
	ObjStats st;        /* code bytes and kernels (st.cached, st.compile_ms: set at the end) */
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
	Progress pg;        /* the objects compiled, on a terminal */
	pthread_mutex_t mu;
	char *error;        /* the first failure */
	const void *weights_image;
	size_t weights_len;
	Prepacked *prepacked;   /* --embed-weights: matrices packed at build time (weights_prepack) */
	int nprepacked;
} Shared;

/* ------------------------------------------------------------------ cache.c */

/* 1 and the entry's bytes on a hit; a corrupt entry is removed and misses. */
int cache_get(const char *dir, const uint8_t key[16], char **data, size_t *len, ObjStats *st);
void cache_put(const char *dir, const uint8_t key[16], const char *data, size_t len, const ObjStats *st);
/* j->key from everything the job's code depends on */
void job_key(Shared *sh, Job *j);

#endif

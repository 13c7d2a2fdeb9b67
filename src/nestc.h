/* nestc.h - the one internal header of the nestc compiler, sectioned by owning file. */
#ifndef NESTC_H
#define NESTC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NESTC_VERSION "0.1.0"
#define MAX_RANK 8

/* ------------------------------------------------------------------ util.c */

/* x* wrappers exit with status 1 on out-of-memory ("nestc: error: out of
 * memory (N bytes)"): there is nothing useful to do then. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Internal compiler error: a bug in nestc, never the user's fault. */
_Noreturn void ice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Arena: compiler data (AST, types, IR) lives here and is freed at once. */
typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
	ArenaBlock *head;
} Arena;
void *arena_alloc(Arena *a, size_t n); /* zeroed */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(Arena *a);

/* Growable string buffer (heap). */
typedef struct Buf {
	char *s;
	size_t len, cap;
} Buf;
void buf_putc(Buf *b, char c);
void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(Buf *b);

/* Pointer vector (heap) */
typedef struct Vec {
	void **v;
	int n, cap;
} Vec;
void vec_push(Vec *v, void *p);
/* Same, with the storage in an arena (never freed on its own). */
void avec_push(Arena *a, Vec *v, void *p);

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t hash_str(const char *s);

/* A progress line on standard error for a long operation: only when it is a
 * terminal and enabled (not --quiet), only once the operation has run a
 * second; "WHAT: DONE/TOTAL (P%), M:SS left  LABEL". progress_end erases it. */
typedef struct Progress {
	const char *what;
	int64_t total;
	int bytes;      /* amounts are bytes: shown in MB or GB */
	int on, shown;
	double t0, last;
} Progress;
void progress_start(Progress *pg, int enabled, const char *what, int64_t total, int bytes);
void progress_step(Progress *pg, int64_t done, const char *label);
void progress_end(Progress *pg);

/* Write a whole file atomically: a temporary file beside PATH, then rename.
 * Returns 0, or -1 with errno set and nothing left behind. A device or FIFO
 * at PATH (/dev/stdout) is written directly; a symbolic link's file is
 * replaced, not the link. */
int write_file_atomic(const char *path, const void *data, size_t n);
/* rename(tmp, path), but a device, FIFO or /dev path gets tmp's bytes
 * written through (and tmp is removed). */
int rename_into(const char *tmp, const char *path);
/* A file's bytes given in parts (a header, then tensors where they lie). */
typedef struct Part {
	const void *p;
	size_t n;
} Part;
/* Write the parts, one after the other, as write_file_atomic does; but a
 * regular file at PATH that holds exactly these bytes already is left as it
 * is, mtime too, when kept is not NULL (*kept: 1 if it was; rebuilding a
 * model rewrote 150 MB of unchanged weights). pg: a progress line over the
 * bytes written (started by the caller), or NULL. */
int write_parts_atomic(const char *path, const Part *parts, int n, int *kept, Progress *pg);
/* Does the regular file at path hold exactly data[0..n)? */
int file_holds(const char *path, const void *data, size_t n);

/* ------------------------------------------------------------------ diag.c */

/* A location is a half-open byte range [off, end) in the one source file. */
typedef struct Loc {
	int32_t off, end;
} Loc;

typedef struct Source {
	const char *path;
	char *text; /* NUL-terminated */
	size_t len;
	int32_t *line_start; /* byte offset of each line, built once */
	int nlines;
	int32_t nul_off; /* the first NUL byte of the file (now a blank), or -1 */
} Source;

typedef struct Diag {
	Source *src;
	int nerrors, nwarnings;
	int werror;   /* warnings count as errors */
	int nowarn;   /* -w */
	Vec seen;     /* messages already printed (deduplicated across specialisations) */
	FILE *out;
} Diag;

Source *source_load(const char *path, char *err, size_t errlen);
Source *source_from_string(const char *path, const char *text);
void source_free(Source *s);
void source_linecol(const Source *s, int32_t off, int *line, int *col);
void error_at(Diag *d, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void warning_at(Diag *d, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void note_at(Diag *d, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A diagnostic without a source position ("nestc: error: ..."). */
void error_plain(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void warning_plain(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_free(Diag *d);

/* ------------------------------------------------------------------ dtype.c */

/* Appended in issue 36's order: fingerprints and nestrt.h's NESTRT_* hold the
 * numbers. f16, bf16, i8, u8, i16 and u16 are storage dtypes: lowering
 * (widen.c) computes every op on them in their compute dtype (f32, i32) and
 * rounds or wraps the result back, so only leaves, casts, stores and region
 * calls ever carry them. */
typedef enum DType { DT_BOOL, DT_I32, DT_I64, DT_F32, DT_F64, DT_F16, DT_BF16, DT_I8, DT_U8, DT_I16, DT_U16,
	DT_COUNT } DType;
const char *dtype_name(DType t);
int dtype_size(DType t);
int dtype_is_float(DType t);
/* f16, bf16, i8, u8, i16, u16: held in memory, computed in dtype_compute. */
int dtype_is_storage(DType t);
/* f32 for f16 and bf16, i32 for the narrow integers, else t itself. */
DType dtype_compute(DType t);
/* A narrow integer's range (the full range of i32 / i64 for those). */
void dtype_int_range(DType t, int64_t *lo, int64_t *hi);
/* v wrapped to integer dtype t's width, as C's conversion to it. */
int64_t dtype_wrap(DType t, int64_t v);
float round_bf16(float v);
/* The binary16 nearest to v, ties to even (NumPy's np.float16(v) for a float
 * v), as a float; overflow gives inf, NaN stays NaN. */
float round_f16(float v);
/* bits <-> float of the two 16-bit float formats (rounding as above). */
uint16_t f32_to_f16_bits(float v);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float v);
float bf16_bits_to_f32(uint16_t h);

/* ------------------------------------------------------------------ ast.c */

typedef struct Expr Expr;
typedef struct TypeExpr TypeExpr;
typedef struct Stmt Stmt;
typedef struct Decl Decl;

typedef enum ExprKind {
	E_INT, E_FLOAT, E_BOOL, E_STR, E_NAME,
	E_BINARY,  /* op: token code of the operator */
	E_UNARY,   /* op: '-' or '!' */
	E_CALL,    /* a(args); named args are E_NAMED */
	E_NAMED,   /* name = a, only inside call args */
	E_FIELD,   /* a.name */
	E_INDEX,   /* a[args]; an arg may be E_SLICE */
	E_SLICE,   /* a:b, either may be NULL */
	E_LIST,    /* [args] */
	E_RECORD,  /* { name: expr, ... }: names[i] = args[i] */
} ExprKind;

/* Binary operator codes (E_BINARY.op). */
enum { OPR_OR = 1, OPR_AND, OPR_EQ, OPR_NE, OPR_LT, OPR_LE, OPR_GT, OPR_GE,
       OPR_ADD, OPR_SUB, OPR_MUL, OPR_DIV, OPR_MOD, OPR_MATMUL, OPR_NEG, OPR_NOT };
const char *opr_text(int op);

struct Expr {
	ExprKind kind;
	int op;
	Loc loc;     /* where diagnostics point: the operator of a binary expression */
	Loc span;    /* the whole expression */
	Loc name_loc; /* E_FIELD: the field name */
	int64_t ival;
	double fval;
	const char *name; /* E_NAME, E_FIELD, E_NAMED, E_STR (the string) */
	Expr *a, *b;
	Expr **args;
	const char **names; /* E_RECORD field names */
	Loc *locs;          /* E_RECORD field name locations */
	int nargs;
	int depth;          /* the height of its tree, at most MAX_EXPR_DEPTH (grammar/nest.y) */
	unsigned char paren; /* written in parentheses: a comparison in them starts no chain */
	unsigned char chain; /* OPR_AND of a chained comparison a < b < c (mk_compare) */
};

typedef enum TypeKind {
	T_TENSOR,  /* dtype[dims]; any_shape for dtype[*]; ndims 0 for plain dtype */
	T_SCALAR,  /* int, float, bool: compile-time scalar */
	T_NAMED,   /* Name or Name(args) */
	T_RECORD,  /* { name: type, ... } */
	T_ARRAY,   /* elem[count] */
} TypeKind;

typedef enum ScalarKind { SC_INT, SC_FLOAT, SC_BOOL } ScalarKind;

typedef struct Field {
	const char *name;
	Loc loc;
	TypeExpr *type;
} Field;

struct TypeExpr {
	TypeKind kind;
	Loc loc;
	DType dtype;
	ScalarKind scalar;
	int any_shape;
	Expr **dims;
	int ndims;
	const char *name;
	Expr **args;
	int nargs;
	Field *fields;
	int nfields;
	TypeExpr *elem;
	Expr *count;
};

typedef enum StmtKind { S_LET, S_ASSIGN, S_FOR, S_RETURN, S_STORE } StmtKind;

struct Stmt {
	StmtKind kind;
	Loc loc;
	const char **names; /* S_LET, S_ASSIGN targets; S_FOR: names[0] is the variable */
	Loc *name_locs;
	int nnames;
	Expr *value;        /* S_LET, S_ASSIGN, S_STORE (the value stored) */
	Expr *target;       /* S_STORE: the E_INDEX written, state[...] = value */
	Expr *lo, *hi;      /* S_FOR */
	Stmt **body;        /* S_FOR */
	int nbody;
	Expr **values;      /* S_RETURN */
	int nvalues;
};

typedef enum DeclKind { D_CONST, D_TYPE, D_PARAM, D_FN, D_STATE } DeclKind;

typedef struct FnArg {
	const char *name;
	Loc loc;
	TypeExpr *type;
} FnArg;

typedef struct RegionAttr {
	const char *key;
	Loc loc;
	Expr *value;
} RegionAttr;

struct Decl {
	DeclKind kind;
	Loc loc;          /* whole declaration */
	Loc name_loc;
	const char *name;
	Expr *value;      /* D_CONST */
	int dtype_value;  /* D_CONST naming a dtype (const CACHE = bf16): the DType + 1, else 0 */
	const char *meta_key; /* D_CONST @gguf("llama.block_count"): its value from a GGUF file's metadata */
	int meta_optional;    /* @gguf(KEY, optional): a file without KEY keeps the declared value */
	const char **tparams; /* D_TYPE dimension parameters */
	Loc *tparam_locs;
	int ntparams;
	TypeExpr *type;   /* D_TYPE, D_PARAM */
	const char *wname; /* D_PARAM explicit weights-file name, or NULL */
	FnArg *fargs;     /* D_FN */
	int nfargs;
	TypeExpr **rets;  /* D_FN: NULL/0 when inferred */
	int nrets;
	int rets_tuple;   /* -> (A, B) */
	Stmt **body;
	int nbody;
	Expr **where;     /* D_FN: the run-time dimensions' constraints (where 1 <= T, T <= CTX) */
	int nwhere;
	Loc where_loc;
	int is_export;
	int is_region;
	int broken;       /* a statement of the body did not parse: names may be missing */
	Loc region_loc;
	RegionAttr *attrs;
	int nattrs;
	int max_reuse_entries; /* evaluated region attributes: 0 or -1 when not given */
	int opt_level;
	int fast_math;
	int winograd;          /* options' winograd: 0 false, else -1 (not given) or 1 */
};

typedef struct Module {
	Source *src;
	Decl **decls;
	int ndecls;
} Module;

/* Constructors used by the grammar actions: one call per node. */
Expr *mk_expr(Arena *a, ExprKind k, Loc loc);
Expr *mk_int(Arena *a, Loc loc, int64_t v);
Expr *mk_float(Arena *a, Loc loc, double v);
Expr *mk_bool(Arena *a, Loc loc, int v);
Expr *mk_str(Arena *a, Loc loc, const char *s);
Expr *mk_name(Arena *a, Loc loc, const char *s);
Expr *mk_binary(Arena *a, Loc loc, int op, Expr *l, Expr *r);
Expr *mk_compare(Arena *a, Loc loc, int op, Expr *l, Expr *r);
Expr *mk_paren(Expr *e);
Expr *mk_unary(Arena *a, Loc loc, int op, Expr *x);
Expr *mk_call(Arena *a, Loc loc, Expr *fn, Vec *args);
Expr *mk_named(Arena *a, Loc loc, const char *name, Expr *v);
Expr *mk_field(Arena *a, Loc loc, Expr *x, const char *name, Loc name_loc);
Expr *mk_index(Arena *a, Loc loc, Expr *x, Vec *args);
Expr *mk_slice(Arena *a, Loc loc, Expr *lo, Expr *hi);
Expr *mk_list(Arena *a, Loc loc, Vec *items);
Expr *mk_record(Arena *a, Loc loc, Vec *entries); /* entries: E_NAMED */
TypeExpr *mk_tensor_type(Arena *a, Loc loc, DType dt, Vec *dims, int any_shape);
TypeExpr *mk_scalar_type(Arena *a, Loc loc, ScalarKind k);
TypeExpr *mk_named_type(Arena *a, Loc loc, const char *name, Vec *args);
TypeExpr *mk_record_type(Arena *a, Loc loc, Vec *fields);
/* elem[dims]: an array of one length, or, for a const naming a dtype, a tensor (check.c) */
TypeExpr *mk_array_type(Arena *a, Loc loc, TypeExpr *elem, Vec *dims);
Field *mk_field_decl(Arena *a, Loc loc, const char *name, TypeExpr *t);
Stmt *mk_let(Arena *a, Loc loc, Vec *names, Expr *v, int is_let);
Stmt *mk_for(Arena *a, Loc loc, const char *var, Loc varloc, Expr *lo, Expr *hi, Vec *body);
Stmt *mk_return(Arena *a, Loc loc, Vec *values);
Decl *mk_const(Arena *a, Loc loc, const char *name, Loc nloc, Expr *v);
Decl *mk_meta_const(Arena *a, Diag *d, Loc loc, const char *annot, Loc aloc, const char *key, const char *opt,
                    Loc oloc, const char *name, Loc nloc, Expr *v);
Decl *mk_const_dtype(Arena *a, Loc loc, const char *name, Loc nloc, int dtype);
Decl *mk_typedecl(Arena *a, Loc loc, const char *name, Loc nloc, Vec *tparams, TypeExpr *t);
Decl *mk_param(Arena *a, Loc loc, const char *name, Loc nloc, TypeExpr *t, const char *wname);
/* state NAME: type ("state" is a word only there; kw is what was written). */
Decl *mk_state(Arena *a, Diag *d, Loc loc, const char *kw, Loc kwloc, const char *name, Loc nloc, TypeExpr *t);
/* fn ... where c1, c2 { } ("where" is a word only there). */
Decl *mk_where(Arena *a, Diag *d, Decl *fn, const char *kw, Loc kwloc, Vec *conds);
Stmt *mk_store(Arena *a, Loc loc, Expr *target, Expr *v);
/* A function's body after its signature (and where clause); broken: a statement did not parse. */
Decl *mk_fn_body(Arena *a, Decl *fn, Loc loc, Vec *body, int broken);
FnArg *mk_fnarg(Arena *a, Loc loc, const char *name, TypeExpr *t);
RegionAttr *mk_attr(Arena *a, Loc loc, const char *key, Expr *v);
Decl *mk_fn(Arena *a, Loc loc, const char *name, Loc nloc, Vec *args, Vec *rets, int rets_tuple, Vec *body);
Decl *mk_region_fn(Arena *a, Decl *fn, Loc rloc, Vec *attrs);
Decl *mk_export_fn(Arena *a, Decl *fn, Loc eloc);

/* Named-location list element used by the grammar (identifier with its location). */
typedef struct Ident {
	const char *name;
	Loc loc;
} Ident;
Ident *mk_ident(Arena *a, Loc loc, const char *name);

void ast_dump(FILE *f, Module *m);
void type_dump(Buf *b, TypeExpr *t);
void expr_dump(Buf *b, Expr *e);

/* ------------------------------------------------------------------ parse.c (grammar/) */

/* Limits on nesting, so that every recursive pass over the tree (the name
 * pass, eval, lowering, dumps) stays far from the end of the stack, also
 * under ASan: an expression's tree is at most MAX_EXPR_DEPTH high (a longer
 * chain, x + x + ... or x[0:4][0:4]..., is a located error), brackets of any
 * kind nest at most MAX_NEST deep, and bison's stack holds YYMAXDEPTH
 * entries (a longer run of prefix operators, - - - x, is the same error). */
#define MAX_EXPR_DEPTH 1000
#define MAX_NEST 256

/* The lexer's state (grammar/nest.l), passed to it as flex's extra data. */
struct LexState {
	Arena *arena;
	Diag *diag;
	int32_t pos;   /* byte offset of the next character */
	int depth;     /* ( and [ nesting: newlines inside are ignored */
	int can_end;   /* the last token can end a statement */
	int last;      /* the last token: after an operand, ".0" is a numbered field */
	int nest;      /* (, [ and { nesting, for MAX_NEST */
	int stop;      /* too deep: the error is said, the file ends here */
};

/* Parse a whole file. Syntax errors are reported through d; the returned module
 * holds every declaration that parsed. */
Module *parse_module(Arena *a, Diag *d, Source *src);

/* ------------------------------------------------------------------ ir.c */

/* The ops and their facts come from one table, src/ops.def. */
typedef enum Op {
#define OP(e, text, cls, lo, hi, attrs, flags, verb) OP_##e,
#include "ops.def"
#undef OP
	OP_COUNT
} Op;

/* Ops that the kernels treat alike. */
typedef enum OpClass {
	OPC_LEAF, OPC_UNARY, OPC_CAST, OPC_BINARY, OPC_COMPARE, OPC_LOGIC, OPC_SELECT,
	OPC_MATMUL, OPC_REDUCE, OPC_ROW, OPC_NORM, OPC_MOVE, OPC_MASK, OPC_CONV, OPC_POOL,
	OPC_CALL
} OpClass;

/* What a node's attributes (a[], fval, ival) hold: how --dump=ir prints them. */
typedef enum OpAttrs {
	OPA_NONE, OPA_INPUT, OPA_PARAM, OPA_VALUE, OPA_AXES, OPA_AXIS, OPA_EPS, OPA_PERM,
	OPA_START, OPA_CONV, OPA_POOL, OPA_RESULT,
	OPA_CONVT, OPA_RESIZE, /* i10conv */
	OPA_STATE
} OpAttrs;

enum {
	OPF_VALUE = 1,    /* fval/ival are part of the op's meaning (fingerprints) */
	OPF_EPILOGUE = 2, /* a matmul's tiles can apply it as they store */
};

typedef struct OpInfo {
	const char *name;   /* in dumps and messages */
	OpClass cls;
	int min_in, max_in; /* max_in -1: any number */
	OpAttrs attrs;
	int flags;
	const char *verb;   /* "cannot %s A and B" */
} OpInfo;

extern const OpInfo op_info[OP_COUNT];
const char *op_name(Op op);
/* Computed one element at a time from the same element of each input
 * (broadcast): unary ops, casts, binary ops, comparisons, logic, where. */
int op_elementwise(Op op);

typedef struct Graph Graph;
typedef struct Node Node;

struct Node {
	Op op;
	DType dtype;
	int rank;
	int64_t shape[MAX_RANK];
	int nin;
	Node **in;
	int64_t a[16];   /* integer attributes, meaning per op above */
	double fval;
	int64_t ival;
	Graph *callee;   /* OP_CALL */
	int id;          /* position in its graph's node list */
	Loc loc;         /* source expression that made it */
};

/* One specialised function body: an exported entry point or a region variant
 * candidate. Nodes are in topological order. */
struct Graph {
	const char *name;     /* "block", "forward", ... */
	const char *key;      /* specialisation key: the argument signature */
	Decl *fn;
	int is_region;
	Node **nodes;
	int nnodes, cap;
	Node **inputs;
	const char **input_names; /* "x", "p.ln_1.weight", ... */
	int ninputs;
	Node **outputs;
	int noutputs;
	Node **param_nodes;  /* per param index, the OP_PARAM node of this graph (lazy) */
	int has_fp;          /* region: its guard fingerprint (regions.c) */
	uint8_t fp[16];
	int narrowed;        /* region: computed for part of its result only (rows.c) */
	int has_reuse_hash;  /* region: the value of its reuse_hash for this specialisation */
	int64_t reuse_hash;
	int id;
	/* run-time dimensions (dims.c): the integers of this graph that are affine
	 * functions of its entry's dims; its code takes the dims as an array */
	struct GDyn *gdyn;
	int ngdyn;
	int nbasis;          /* the number of dims (0: a static graph) */
	const char **dim_names; /* their names, for dumps and reports */
	const int64_t *dim_lo, *dim_hi; /* their bounds (buffers are sized for the largest) */
	Node **state_nodes;  /* per state index, the OP_STATE node of this graph (lazy) */
};

/* Run-time dimensions: an exported function's `where` names them. */
#define MAX_DIMS 4
typedef struct Affine {
	int64_t c0;
	int64_t coef[MAX_DIMS];
} Affine;

/* An integer of a graph taken at run time: shape[field] (field < MAX_RANK) or
 * a[field - 16] of node `node`, as c0 + sum coef[j] * dims[j]. */
typedef struct GDyn {
	int node;
	int field;
	Affine f;
} GDyn;

/* A condition the entry checks before it runs: f(dims) >= 0 (== 0 when eq). */
typedef struct DimCheck {
	Affine f;
	int eq;
	Loc loc;             /* the where clause's condition, or the op it protects */
	const char *text;    /* the condition as the user reads it: "T <= 64", "P + T <= 64" */
} DimCheck;

typedef struct ParamInfo {
	const char *name;   /* weights-file name, e.g. "h.3.attn.c_attn.weight" */
	DType dtype;
	int rank;
	int64_t shape[MAX_RANK];
	Loc loc;            /* the param declaration */
	int positive;       /* reaches batch_norm's running_var: random weights draw it positive */
	int wformat;        /* its weight format (wformat.h: WF_*), WF_F32 unless --weights-format */
	int waxis;          /* the axis its blocks run along: the one its matmuls reduce */
} ParamInfo;

typedef struct Entry {
	const char *name;   /* exported function name */
	Graph *g;
	const char **arg_names;
	Decl *fn;
	int ndims;          /* run-time dimensions (where) */
	const char *dim_names[MAX_DIMS];
	int64_t dim_lo[MAX_DIMS], dim_hi[MAX_DIMS];
	DimCheck *checks;   /* checked at every call, before anything runs */
	int nchecks;
	int uses_state;     /* reads or writes the model's state: takes a sequence */
} Entry;

/* A GGUF metadata value (weights.c's gguf_meta_read). */
typedef struct MetaKV {
	const char *key;
	char kind;          /* 'i' int, 'f' float, 'b' bool, 'a' array (i its length), 's' string */
	int64_t i;
	double f;
} MetaKV;

typedef struct Program {
	Arena *arena;
	Source *src;
	ParamInfo *params;
	int nparams, capparams;
	ParamInfo *states;  /* the state tensors (state declarations), per sequence */
	int nstates, capstates;
	Entry *entries;
	int nentries;
	Vec graphs;         /* every graph: entries and region specialisations */
	Vec variance_nodes; /* batch_norm's running_var inputs (params.c marks their params) */
	int64_t bytes;      /* the size of every node's tensor, summed (mk_node) */
	int size_reported;  /* a tensor too large was reported: say it once */
	MetaKV *gguf;       /* the @gguf consts: key and value ('i', 'f' or 'b'), in declaration order */
	int ngguf;
} Program;

Graph *graph_new(Program *p, const char *name, Decl *fn);
Node *node_new(Program *p, Graph *g, Op op, DType dt, int rank, const int64_t *shape, Loc loc);
void node_add_input(Program *p, Node *n, Node *in);
/* The element count; INT64_MAX when it does not fit an int64_t. */
int64_t shape_numel(int rank, const int64_t *shape);
/* 0 when a tensor of this shape has fewer than 2^63 elements and bytes (or
 * none), 1 when its element count does not fit an int64_t, 2 when its size
 * in bytes does not. */
int shape_size_error(DType dt, int rank, const int64_t *shape);
/* The most bytes all the tensors of a program may take together, so that
 * workspace sizes and offsets, sums of them, stay far from overflow. */
#define PROGRAM_MAX_BYTES ((int64_t)1 << 62)
void shape_str(Buf *b, DType dt, int rank, const int64_t *shape); /* "f32[16, 64]" */
/* "T", "2*T + 1", "P + T - 3" (in the arena). */
const char *affine_str(Arena *a, const Affine *f, int n, const char *const *names);
/* The run-time integer of field f of node n in g, or NULL when it is constant. */
GDyn *gdyn_find(Graph *g, int node, int field);
/* Does node n of g have a shape or attribute taken at run time? */
int gdyn_has(Graph *g, const Node *n);
/* Field f of node n (an axis < MAX_RANK, 16 + k: a[k]) as an affine form of the dims (constant if static). */
Affine field_form(Graph *g, Node *n, int f);
/* A shape as the user reads it with run-time dims: "f32[T, 768]". */
void dyn_shape_str(Arena *a, Buf *b, Graph *g, Node *n);

void ir_dump(FILE *f, Program *p);
/* A node as text for fingerprints and cache keys: op, dtype, shape, the ids
 * of its inputs and its non-zero attributes (no names, no constants). */
void node_text(Buf *b, Node *n);
/* A compiler bug unless n has as many inputs as ops.def says. */
void node_check_inputs(const Node *n);
/* conv2d's and conv_transpose2d's dilation along axis k (0: H, 1: W), 1 when unset. */
int64_t conv_dilation(const Node *n, int k);
/* A resize node's coordinate scale along axis k (0: H, 1: W), from its bits in a[1 + k]. */
double resize_scale(const Node *n, int k);
int64_t resize_scale_bits(double scale);

/* ------------------------------------------------------------------ widen.c */

/* Ops on storage dtypes computed in their compute dtype, with casts (run on
 * each graph as it is lowered). */
void widen_graph(Program *p, Graph *g);

/* ------------------------------------------------------------------ values.c */

/* The value of an expression while checking and lowering. Compile-time numbers
 * are exact; tensors are IR nodes of the graph being built. */
typedef enum ValueKind {
	V_ERR,     /* an error was already reported: stay quiet */
	V_INT, V_FLOAT, V_BOOL, V_STR,
	V_TENSOR,  /* node */
	V_RECORD,  /* names[i] = items[i] */
	V_ARRAY,   /* items */
	V_LIST,    /* [a, b, ...] */
	V_TUPLE,   /* several results */
	V_PARAM,   /* a global param (sub)tree, materialised on use */
} ValueKind;

typedef struct PTree PTree;
struct PTree {
	enum { PT_LEAF, PT_RECORD, PT_ARRAY } kind;
	int param;           /* PT_LEAF: index into Program.params (Program.states when state) */
	int state;           /* a state's tree: its leaves are states */
	const char **names;  /* PT_RECORD field names */
	PTree **kids;
	int n;
};

typedef struct Value Value;
struct Value {
	ValueKind kind;
	int64_t i;
	double f;
	const char *s;
	Node *node;
	PTree *pt;
	const char **names;
	Value **items;
	int n;
};

/* The one error value: nothing more is said about it. */
extern Value value_err;
#define VERR (&value_err)

typedef struct Global Global;   /* eval.c */
typedef struct Checker Checker; /* eval.c */

typedef struct Scope Scope;
struct Scope {
	Scope *parent; /* NULL for a function's top scope */
	Vec names;
	Vec vals;
};

/* Type parameters while matching a value against Name(args): each parameter is a
 * compile-time value, or a shape variable of the function not bound yet. */
typedef struct TEnv {
	const char **names;
	Value **vals;        /* NULL where pending */
	const char **pending;
	int n;
} TEnv;

/* The state of evaluating expressions: of a constant expression for the checker
 * (g, scope NULL), or of lowering a function body. */
typedef struct LowerCtx LowerCtx;
struct LowerCtx {
	Checker *c;
	Arena *a;
	Diag *d;
	Program *p;
	Graph *g;          /* graph being built; NULL in constant expressions */
	Scope *scope;      /* innermost scope; NULL in constant expressions */
	Scope *fnscope;    /* the current function's top scope */
	TEnv *te;          /* type parameters, while matching a named type */
	int in_dim;        /* evaluating a dimension: division must be exact */
	const char *spec_tag; /* lowering an entry at a sample of its run-time dims: region specs apart */
	int quiet;         /* the function has a broken statement: no unknown-name errors */
	Vec stack;         /* functions being lowered (Decl *), to reject recursion */
	int64_t budget;    /* nodes and unrolled statements left before giving up */
	int out_of_budget;
	/* lowering's call of a user function, its arguments evaluated (lower.c);
	 * only reached with a graph, so NULL for constant expressions */
	Value *(*call_fn)(LowerCtx *x, Global *fn, Expr *call, Value **argv);
};

/* The param or state a leaf of a param tree stands for. */
const ParamInfo *ptree_info(const Program *p, const PTree *t);
Value *value_new(LowerCtx *x, ValueKind k);
Value *vint(LowerCtx *x, int64_t i);
Value *vfloat(LowerCtx *x, double f);
Value *vbool(LowerCtx *x, int b);
Value *vtensor(LowerCtx *x, Node *n);
int is_ct(Value *v); /* a compile-time int, float or bool */
void scope_bind(LowerCtx *x, Scope *s, const char *name, Value *v);
Value **scope_find(Scope *s, const char *name, Scope **where);
int v_is_tensor(Value *v); /* a tensor node or a param leaf */
void v_shape(LowerCtx *x, Value *v, DType *dt, int *rank, const int64_t **shape);
/* A value's type as messages show it; p gives the types of params. */
void value_type_str(Buf *b, const Program *p, Value *v);
/* Values, shapes and nodes as text for messages (in the arena). */
const char *tystr(LowerCtx *x, Value *v);
const char *shstr(LowerCtx *x, DType dt, int rank, const int64_t *shape);
const char *nstr(LowerCtx *x, Node *n);
/* One unit of the lowering budget; 0 (after one error) when it is spent. */
int charge_budget(LowerCtx *x, Loc loc);
/* 0 after a located error when a tensor of this shape would have 2^63
 * elements or bytes or more. */
int check_shape_size(LowerCtx *x, DType dt, int rank, const int64_t *shape, Loc loc);
Node *mk_node(LowerCtx *x, Op op, DType dt, int rank, const int64_t *shape, Loc loc);
/* The tensor a value stands for, or NULL (after an error unless quiet). */
Node *as_tensor(LowerCtx *x, Value *v, Loc loc, const char *what);
Node *const_node(LowerCtx *x, DType dt, Value *v, Loc loc);
Node *unary_node(LowerCtx *x, Op op, DType dt, Node *in, Loc loc);
Node *reshape_node(LowerCtx *x, Node *in, int rank, const int64_t *shape, Loc loc);
Node *fold_rows(LowerCtx *x, Node *t, Loc loc);
Node *unfold_rows(LowerCtx *x, Node *y, Node *like, Loc loc);
/* NumPy broadcasting of two shapes; 0 and a message on a mismatch. */
int broadcast_shapes(LowerCtx *x, Node *a, Node *b, int *rank, int64_t *shape, Op op, Loc loc);
/* Both operands of op as tensors of one dtype; 0 after an error. */
int binary_operands(LowerCtx *x, Op op, Value *va, Value *vb, Node **na, Node **nb, Loc loc);
Value *emit_binary(LowerCtx *x, Op op, Value *va, Value *vb, Loc loc);
Value *emit_matmul(LowerCtx *x, Value *va, Value *vb, Loc loc);
int ct_int(LowerCtx *x, Value *v, Loc loc, const char *what, int64_t *out);
int norm_axis(LowerCtx *x, int64_t axis, int rank, Loc loc, int *out);

/* ------------------------------------------------------------------ dims.c */

int64_t affine_eval(const Affine *f, int n, const int64_t *dims);
/* The largest element count of every node of a dynamic graph over the box of
 * its dims (malloc'd, g->nnodes entries), for the buffer plan. */
int64_t *gdyn_max_numel(Graph *g, const int64_t *lo, const int64_t *hi);
/* The largest value of field f (an axis < MAX_RANK, 16 + k: a[k]) of n over the dims' bounds. */
int64_t gdyn_max_field(Graph *g, Node *n, int f);
/* An entry's dims, bounds and checks from its where clause, and the points
 * (npts of them) at which lowering samples it. 0 after an error. */
int entry_dims(LowerCtx *x, Decl *fn, Entry *en, int64_t pts[][MAX_DIMS], int *npts);
/* Merge the graphs lowered at the sample points into gs[0] (and the region
 * graphs it calls), with their run-time integers; drops the others. 0 after
 * an error. */
int merge_samples(LowerCtx *x, Entry *en, Graph **gs, int npts, int64_t pts[][MAX_DIMS]);

/* ------------------------------------------------------------------ eval.c */

typedef enum GlobalKind { G_CONST, G_TYPE, G_PARAM, G_FN } GlobalKind;

struct Global {
	GlobalKind kind;
	const char *name;
	Decl *decl;
	Value *value;   /* G_CONST once evaluated */
	int state;      /* G_CONST: 0 new, 1 evaluating (cycle check), 2 done */
	Value *over;    /* G_CONST: the -D value, taken once the const is evaluated */
	const char *over_src; /* where over came from, for messages: NULL for -D, else "FILE: KEY" */
	PTree *ptree;   /* G_PARAM */
	Vec specs;      /* G_FN: specialised region graphs (Graph *) */
};

/* The global table and what checking hands to lowering. */
struct Checker {
	Arena *a;
	Diag *d;
	Module *m;
	Program *p;
	struct CompileOptions *opts;
	Global **globals;
	int nglobals;
	uint64_t *htab;   /* open addressing: index+1 into globals, 0 empty */
	int hcap;
	int nesting;      /* expressions and statements being evaluated, through
	                     consts and calls of functions (nesting_enter) */
	int nesting_said;
};

Global *lookup_global(Checker *c, const char *name);
/* Append to c->globals (sized by the caller) and to the hash table. */
void global_add(Checker *c, Global *g);
Value *eval_expr(LowerCtx *x, Expr *e);
/* The part of t that the indices of index expression e select (slices and
 * plain indices, no tensor index): start and size per axis, and the sizes of
 * the axes that stay. 0 after a located error. */
int index_bounds(LowerCtx *x, Node *t, Expr *e, int64_t *start, int64_t *size, int64_t *keep, int *nkeep);
/* Evaluation recurses through expressions, the consts they use and the
 * bodies of the functions they call: at most MAX_NESTING levels in all, so
 * that the stack lasts (also under ASan). 0 after a located error (said
 * once); else the caller calls nesting_leave when done. */
#define MAX_NESTING 4000
int nesting_enter(LowerCtx *x, Loc loc);
void nesting_leave(LowerCtx *x);
/* A name: a type parameter, a local, a global (consts evaluated on first use). */
Value *lookup_name(LowerCtx *x, Expr *e);
/* Evaluate a global const's expression (no locals, no tensors). */
Value *eval_const_expr(Checker *c, Expr *e);
/* Once const g's declared value is known, put its -D override (g->over) in its
 * place, or report an override of the wrong kind. Called as each const is
 * evaluated, so consts computed from it see the override. */
void const_take_override(Checker *c, Global *g);

/* ------------------------------------------------------------------ args.c */

/* A builtin call's arguments, evaluated (eval.c). */
typedef struct Args {
	Expr *call;
	const char *fname;
	Value *pos[8];
	Loc posloc[8];
	int npos;
	const char *names[8];
	Value *named[8];
	Loc namedloc[8];   /* the value */
	Loc namekeyloc[8]; /* the name */
	int nnamed;
	int used[8];
} Args;

/* Between min and max arguments, names only from allowed (NULL-terminated). */
int check_arity(LowerCtx *x, Args *a, int min, int max, const char *const *allowed);
/* The named argument (marked used), or NULL; its location. */
Value *opt_arg(Args *a, const char *name);
Loc opt_loc(Args *a, const char *name);
/* Argument i by position, or by name when name is not NULL; NULL if absent. */
Value *arg_at(Args *a, int i, const char *name, Loc *loc);
Loc arg_loc(Args *a, int pos, const char *name);
/* Argument i as a tensor node (a number becomes a constant); NULL after a message. */
Node *tensor_arg(LowerCtx *x, Args *a, int i, const char *name);
int float_tensor(LowerCtx *x, Args *a, Node *n);
/* Optional arguments with defaults: 0 after a message. */
int int_opt(LowerCtx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t *out);
int bool_opt(LowerCtx *x, Args *a, const char *name, int dflt, int *out);
int float_opt(LowerCtx *x, Args *a, int pos, const char *name, double dflt, double *out);
/* A list of at most max integers (or one, if allow_scalar) into out[*n]. */
int int_list(LowerCtx *x, Value *v, Loc loc, const char *what, int64_t *out, int max, int *n, int allow_scalar);
/* An int or a pair of ints (both dflt when absent); positive: each > 0. */
int pair_opt(LowerCtx *x, Args *a, int pos, const char *name, int64_t dflt, int64_t out[2], int positive);

/* ------------------------------------------------------------------ builtins_nn.c, builtins_index.c */

/* The builtin of that file named a->fname, or NULL if it has none of that name. */
Value *layer_builtin(LowerCtx *x, Args *a);
Value *index_builtin(LowerCtx *x, Args *a);

/* ------------------------------------------------------------------ builtins.c */

int is_builtin(const char *name);
/* A builtin that a model's own top-level definition may take the place of. */
int builtin_shadowable(const char *name);
/* Positional argument pos of the builtin is a shape: evaluated as dimensions. */
int builtin_dim_arg(const char *name, int pos);
Value *call_builtin(LowerCtx *x, Args *a);

/* ------------------------------------------------------------------ check.c */

typedef struct Define {
	const char *name;
	const char *value;
} Define;


typedef struct CompileOptions {
	Define *defines;
	int ndefines;
	int no_narrow;      /* --no-narrow: every node computed whole (rows.c) */
	const char *only_entry; /* run --entry: -D gives run-time dims of this entry alone */
	const char *consts_from; /* --consts-from FILE.gguf: the @gguf consts' values (meta, below), -D winning */
	MetaKV *meta;
	int nmeta;
	const char *meta_arch;   /* its general.architecture, or NULL */
} CompileOptions;

/* Check declarations and names; evaluate consts (with -D) and region
 * attributes. Errors are reported through d; lowering follows (lower.c). */
Checker *check_module(Arena *a, Diag *d, Module *m, CompileOptions *opts);

/* ------------------------------------------------------------------ params.c */

/* Build every param's tree and the model's param table (Program.params). */
void lower_params(LowerCtx *x);
/* After lowering: mark the params that reach batch_norm's running_var (ParamInfo.positive). */
void mark_variance_params(Program *p);

/* ------------------------------------------------------------------ lower.c */

/* Check declarations and names, then lower every export into the tensor graph IR.
 * Returns NULL when there were errors (all reported through d). */
Program *compile_module(Arena *a, Diag *d, Module *m, CompileOptions *opts);

/* ------------------------------------------------------------------ rows.c */

/* Nodes and region calls computed only for the part of their result that is
 * used (ViT's x[:, 0] of the last layer): entry graphs rebuilt, narrowed
 * region specialisations added. After lowering, before the region pass. */
void narrow_program(Program *p);

/* ------------------------------------------------------------------ regions.c */

/* One call of a region, as written in a specialised graph. */
typedef struct CallSite {
	Node *call;           /* the OP_CALL node */
	Graph *caller;
	struct Variant *v;    /* the variant it runs (NULL when inlined) */
	int is_new;           /* the first call that needed this variant */
	int inlined;          /* compiled into its caller: over max_reuse_entries, or --no-regions */
	int64_t count;        /* times executed by one run of the entry points */
	const char *differs;  /* for a new variant after the first: the guard that differed */
	int64_t *dyn_values;  /* reuse_hash groups: this call's values of the run-time dims */
	int *dyn_map;         /* inside another group's shared code: the caller's run-time dim that
	                         gives each of these (-1: the constant in dyn_values) */
} CallSite;

/* A run-time dimension of a variant shared by a reuse_hash group: an integer of
 * the representative graph (a shape entry or an attribute) that differs between
 * the calls of the group. */
typedef struct DynSlot {
	int node;             /* node id in the representative graph */
	int field;            /* 0..MAX_RANK-1: shape[field]; 16+k: a[k] */
} DynSlot;

/* An object's figures, filled by codegen (build.c); code_bytes 0 before. */
typedef struct ObjStats {
	int64_t code_bytes;   /* of its .text */
	double compile_ms;
	int cached;           /* taken from the persistent cache */
	int kernels, shared;  /* kernel functions; of them, identical to another and emitted once */
	int parts;            /* the model's object: in how many parts (objects) */
} ObjStats;

typedef struct Variant {
	int id;               /* slot in the dispatch table */
	const char *region;   /* name of the first region function that needed it */
	int k;                /* its number among that region's variants */
	uint8_t fp[16];       /* XXH3-128 guard fingerprint (or of the reuse_hash key) */
	Graph *g;             /* representative specialisation */
	const char *guards;   /* the guards in words: "x: f32[16, 64]; p: {...}" */
	Vec calls;            /* CallSite * */
	int has_hash;
	int64_t hash;
	DynSlot *dyn;
	int ndyn;
	ObjStats obj;
	int opt_level, fast_math;
	int winograd;         /* 3x3 convolutions may use Winograd (the region's option) */
} Variant;

typedef struct RegionInfo {
	Decl *fn;
	int max_entries;
	Vec variants;         /* Variant *, in order of first call */
	Vec calls;            /* CallSite * */
	int opt_level, fast_math, winograd;
} RegionInfo;

typedef struct RegionTable {
	Program *p;
	RegionInfo **regions;
	int nregions;
	Vec variants;         /* every unique variant: Variant * */
	Vec calls;            /* every call site: CallSite * */
	int no_regions;
	const char *target;
	int64_t total_calls, inlined_calls;
	ObjStats model;       /* the model's own object */
} RegionTable;

typedef struct RegionOptions {
	int no_regions;       /* --no-regions: inline every call */
	const char *target;   /* target triple (in the fingerprint) */
	const char *cpu;
	int opt_level;        /* default for regions without options */
} RegionOptions;

/* Fingerprint every region call, deduplicate, apply reuse_hash,
 * max_reuse_entries and options. Errors and warnings go to d. */
RegionTable *build_regions(Program *p, Diag *d, RegionOptions *o);
CallSite *callsite_of(RegionTable *rt, Node *call);
void fp_hex(const uint8_t fp[16], char out[33]);

/* ------------------------------------------------------- codegen/build.c, cache.c */

typedef enum EmitKind { EMIT_OBJ, EMIT_ASM, EMIT_LLVM } EmitKind;

typedef struct BuildOptions {
	const char *out;       /* directory, or FILE.a */
	const char *name;      /* model name (C prefix) */
	EmitKind emit;
	int opt_level;         /* -O0..-O3 */
	const char *target;    /* NULL: the host */
	const char *cpu;       /* NULL: the host's */
	int archive;           /* out ends in .a */
	int shared;            /* out ends in .so: linked (codegen/link.c) */
	int jobs;              /* -j N: worker threads */
	const char *cache_dir; /* NULL: no cache */
	const char *only;      /* --only-variant: "REGION.K" or "model" */
	const char *embed;     /* --embed-weights FILE.safetensors */
	const char *depfile;   /* -MD: write it here */
	int progress;          /* one-line progress on a terminal */
	int no_winograd;       /* --no-winograd: 3x3 convolutions summed directly */
	int act_int8;          /* --activations=int8: q8_0 / q4_0 matmuls on int8 activations */
} BuildOptions;

/* Generate the header, the model object and one object per unique variant.
 * Files are written to temporaries and renamed only when all succeeded.
 * Returns 0, or 1 after an error message. */
int build_model(Program *p, RegionTable *rt, Diag *d, BuildOptions *o);
/* The host as a target, computed without LLVM (malloc'd). */
char *host_id(void);
/* Is `triple` a target this LLVM builds for? Else 0 and the reason in why. */
int target_known(const char *triple, char *why, size_t n);
/* The paths build_model writes (header, objects or archive), for depfiles and
 * `nestc plan`; the caller frees each and the array. */
char **build_outputs(Program *p, RegionTable *rt, BuildOptions *o, int *n);
/* nestc cache stats|clear */
int cache_command(const char *dir, const char *what);
char *default_cache_dir(void);

/* ------------------------------------------------------------------ report.c */

typedef enum ReportFormat { REPORT_TEXT, REPORT_JSON, REPORT_DOT } ReportFormat;
/* The region table as text, JSON (schema version 1) or Graphviz DOT. */
void report_write(FILE *f, RegionTable *rt, ReportFormat fmt, const char *model);

/* ------------------------------------------------------------------ interp/ (tensor.c, graph.c) */

/* Interpreter tensors: floats are held as double (rounded to f32 after every op
 * when the dtype is f32), integers and bools as int64 (wrapped to i32 when i32). */
typedef struct Tensor {
	DType dtype;
	int rank;
	int64_t shape[MAX_RANK];
	int64_t n;          /* element count */
	double *f;          /* float dtypes */
	int64_t *i;         /* integer and bool dtypes */
} Tensor;

Tensor *tensor_new(DType dt, int rank, const int64_t *shape);
void tensor_free(Tensor *t);
/* From / to the dtype's native little-endian bytes. */
Tensor *tensor_from_bytes(DType dt, int rank, const int64_t *shape, const void *data);
void tensor_to_bytes(const Tensor *t, void *out);

/* Run graph g eagerly on inputs (g->ninputs of them) with the model's params
 * (p->nparams of them). Returns 0 and fills outs[0..g->noutputs) with new tensors,
 * or -1 after printing a run-time error (a gather index out of range) to stderr;
 * then every outs[k] is NULL and nothing is leaked. */
int interp_run(Program *p, Graph *g, Tensor **inputs, Tensor **params, Tensor **outs);
/* The same with the sequence's state tensors (p->nstates), written in place. */
int interp_run_state(Program *p, Graph *g, Tensor **inputs, Tensor **params, Tensor **states, Tensor **outs);

/* ------------------------------------------------------------------ weights.c */

/* A .safetensors file, opened and validated by the runtime's reader
 * (runtime/weights.c); these are views of its tensors, sorted by name. */
typedef struct WTensor {
	const char *name;
	const char *dtype_str; /* as in the file: "F32", "BF16", ... */
	int dtype;          /* a DType, or -1 for a valid dtype nestc has no tensors of */
	int half_dtype;     /* DT_F16 or DT_BF16 for such a tensor of a .safetensors or GGUF file, which
	                       binds that dtype as well as dtype (f32); else -1 */
	int rank;
	int64_t shape[MAX_RANK];
	const void *data;   /* in the mapping, possibly unaligned; NULL for an F16 / BF16 one (weights_data) */
	size_t nbytes;      /* of the dtype form */
	int used;
} WTensor;

typedef struct Weights {
	const char *path;
	WTensor *t;
	int n;
	struct nestrt_weights *rt; /* owns the names, the dtype strings and the mapping */
} Weights;

/* NULL on error, with the reason ("header length 123 exceeds file size 100") in err. */
Weights *weights_open(const char *path, char *err, size_t errlen);
WTensor *weights_find(Weights *w, const char *name);
/* t's elements as a dtype it binds (dtype or half_dtype), aligned; NULL with the reason in err. */
const void *weights_data(Weights *w, WTensor *t, DType dtype, char *err, size_t errlen);
void weights_close(Weights *w);
/* nestc build --embed-weights: the matrices the pack plans (slot_plans per
 * variant, entry_plan; matmul.c's tables) ask for in exactly one layout and
 * nothing reads unpacked, packed now (nestrt_packed's layout), and the image
 * of every other tensor (a .safetensors image, each tensor 64-byte aligned)
 * in *image / *len (malloc'd). 0, or -1 with the reason in err. */
typedef struct Prepacked {
	char *name;
	int64_t k, n, wide;
	int flags;
	void *data;
	size_t bytes;
} Prepacked;
int weights_prepack(const void *image, size_t len, const ParamInfo *params, int nparams, const int64_t *const *slot_plans,
                    int nslots, const int64_t *entry_plan, char **out, size_t *outlen, Prepacked **packs, int *npacks,
                    char *err, size_t errlen);
/* The reason in a runtime error about path: its message without "PATH: ". */
struct nestrt_error;
void rt_reason(char *err, size_t errlen, const char *path, const struct nestrt_error *e);

/* --consts-from: a GGUF file's metadata (its header alone is read): each
 * key's value, a number, a bool, or an array's length; a string is kind
 * 's' (its value is not needed). NULL with the reason in err. */
MetaKV *gguf_meta_read(Arena *a, const char *path, int *n, char **arch, char *err, size_t errlen);

/* ------------------------------------------------------------------ npy.c */

/* .npy files through the runtime's reader and header writer (runtime/npy.c). */
typedef struct NpyArray {
	DType dtype;
	int rank;
	int64_t shape[MAX_RANK];
	void *data;         /* malloc'd, little-endian native bytes, C order */
	size_t nbytes;
} NpyArray;

/* 0 on success; -1 with a reason in err ("fortran_order arrays are not supported"). */
int npy_read(const char *path, NpyArray *out, char *err, size_t errlen);
void npy_free(NpyArray *a);
/* Serialise to memory (numpy.save's v1.0 header); caller frees *out. */
void npy_encode(DType dt, int rank, const int64_t *shape, const void *data, char **out, size_t *outlen);

/* ------------------------------------------------------------------ run.c */

typedef struct RunOptions {
	const char *weights;   /* path, or NULL */
	int random_weights;    /* use seed below */
	uint64_t seed;
	const char *entry;     /* NULL: the only export, or "forward" */
	const char **input_names, **input_paths;
	int ninputs;
	const char **outputs;
	int noutputs;
} RunOptions;

/* nestc run: returns the process exit status. */
int run_program(Program *p, Diag *d, RunOptions *o);
/* nestc weights: write every param, filled by random_fill, as .safetensors. */
int write_random_weights(Program *p, Diag *d, uint64_t seed, const char *path, int progress);
void random_fill(Tensor *t, const char *name, uint64_t seed);
/* random_fill for param i: a variance (ParamInfo.positive) is drawn in [0.5, 1.5). */
void random_fill_param(Tensor *t, const ParamInfo *pi, uint64_t seed);
/* The tensor of w that binds param pi, as `nestc run --weights` checks it
 * (there, and in nestc weights --weights): its name, dtype and shape; NULL
 * after the error naming what is wrong. Marks it used. */
WTensor *weights_match(Diag *d, Weights *w, const ParamInfo *pi);
/* A warning for each tensor of w no param used (but batch norms' counters). */
void weights_warn_unused(Diag *d, Weights *w);

/* ------------------------------------------------------------------ gguf_write.c */

/* nestc weights -o OUT.gguf: every param into a GGUF v3 file in its weight
 * format (ParamInfo.wformat; its dtype when f32), from random values
 * (weights_in NULL: random_fill_param's, bit for bit) or from the tensors of
 * the weights file weights_in, one param at a time. name is the model's
 * (general.name). Returns the exit status; on an error nothing is left at
 * path. */
int write_gguf_weights(Program *p, Diag *d, const char *name, uint64_t seed, const char *weights_in, const char *path,
                       int progress);

/* ------------------------------------------------------------------ onnx/ (src/onnx/emit.c, read.c) */

/* ONNX in: a model file translated to Nest source text (and the weights its
 * params read, as .safetensors bytes). */
typedef struct OnnxOptions {
	const char **def_names, **def_values; /* -D NAME=VALUE: symbolic dimensions */
	int ndefs;
	const char **freeze_names, **freeze_paths; /* --freeze NAME=FILE.pb|FILE.npy */
	int nfreeze;
	int no_outline;
} OnnxOptions;

typedef struct OnnxImport {
	char *text;          /* the Nest module */
	/* the .safetensors file: its header, then each param's bytes, most of
	 * them where they lie in the model (mapped until onnx_import_free) */
	Part *weights;
	int nparts;
	size_t weights_len;  /* the file's size */
	int nweights;        /* params in it */
	int unsupported;     /* on failure: an op, dtype or attribute nestc lacks */
	char *outline;       /* the repeated layers found: regions and occurrences, or NULL */
	char **arg_onnx, **arg_nest; /* each graph input's name and the argument it became */
	int nargs;
	struct OnnxHeld *held; /* the model and the import the parts point into */
} OnnxImport;

/* 0, or 1 after a message "FILE: error: node 'NAME' (Op, opset N): reason". */
int onnx_import(const char *path, const OnnxOptions *o, OnnxImport *out);
void onnx_import_free(OnnxImport *im);
/* The Nest dtype ONNX's TensorProto.DataType t is held in (narrow integers
 * and float16 widened), or -1. */
int onnx_nest_dtype(int t);

#endif

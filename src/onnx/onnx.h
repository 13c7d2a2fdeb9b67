/* onnx.h - ONNX in (src/onnx/): an ONNX model (read with protobuf-c, from the onnx.proto
 * that Debian's libonnx-dev ships, compiled by protoc-c at build time) becomes
 * Nest source text, which the normal front end then reads.
 *
 * The translation walks the graph in order. Every tensor gets a Val: its
 * dtype and static shape (inferred here, op by op), and its value when it is
 * known at import (initializers used as shapes, Constant nodes, and whatever
 * is computed from them alone: the Shape -> Gather -> Concat -> Reshape
 * chains of exported models fold away). A value that is needed as a tensor
 * becomes a Nest expression: a `let` per node, a literal for a known scalar,
 * `full(...)` for a known splat, a `param` (with its data in the weights
 * file) for any other known tensor.
 *
 * Errors name the file and the node: "FILE: error: node 'NAME' (OpType,
 * opset N): reason". Nothing here trusts the file: protobuf-c rejects
 * malformed bytes, and every index, count and shape is checked before use.
 *
 * The files, one phase each, call downwards only: wire.c (the model
 * unpacked, its weights left in the file) <- read.c (values, tensors
 * from the file) <- fold.c (values as Nest text) <- ops_shape.c, ops_nn.c,
 * ops_conv.c, patterns.c <- ops.c (dispatch) <- outline.c (repeated layers) <- emit.c
 * (the driver). This header declares what one file uses of another, in a
 * section per owning file. */
#ifndef NESTC_ONNX_H
#define NESTC_ONNX_H

#include "nestc.h"
#include "onnx.pb-c.h"

#include <stdint.h>

/* ONNX TensorProto.DataType */
enum {
	OT_UNDEF = 0, OT_FLOAT = 1, OT_UINT8 = 2, OT_INT8 = 3, OT_UINT16 = 4, OT_INT16 = 5, OT_INT32 = 6,
	OT_INT64 = 7, OT_STRING = 8, OT_BOOL = 9, OT_FLOAT16 = 10, OT_DOUBLE = 11, OT_UINT32 = 12,
	OT_UINT64 = 13, OT_BFLOAT16 = 16,
};

/* An open-addressing index from names to positions in an array the context
 * owns (vals, ids), filled from it lazily: a big graph's lookups per node
 * input would otherwise scan everything. */
typedef struct NameTab {
	int *slot;      /* array positions, -1: empty */
	size_t cap, n;
	int synced;     /* positions below this are in the index */
} NameTab;

typedef struct Val {
	char *name;     /* ONNX name */
	char *id;       /* Nest expression naming it, or NULL (not yet materialised) */
	DType dt;
	int rank;
	int64_t shape[MAX_RANK];
	int64_t n;
	int known;      /* value below */
	double *f;      /* float dtypes */
	int64_t *i;     /* integer dtypes and bool */
	int is_input;   /* graph input (not frozen) */
	char *arg_id;   /* a graph input's argument, when it is not id (a storage dtype's) */
	int lazy;       /* an initializer not decoded: raw below, or zeros (big, in a dry pass) */
	/* an initializer's bytes, read in place (ONNX dtype raw_ot) until a fold
	 * needs its values (val_decode): weights go to the weights file as they
	 * are, never through doubles */
	const unsigned char *raw;
	int raw_ot;
	unsigned char *rawbuf;  /* external data read for it (owned), or NULL */
	int shape_use;  /* (input) used where a value must be known */
	int ot;         /* its ONNX dtype where known (inputs, initializers, Casts,
	                 * quantizations), else 0: the Nest one holds several (bfloat16
	                 * in f32, uint8 in i32), and CastLike's target and a zero
	                 * point's range need the ONNX one */
} Val;

typedef struct WEntry {
	char *name;
	char *id;       /* the flat param's Nest name */
	char *path;     /* grouped: its path expression (h[3].attn.c_attn.weight), or NULL */
	DType dt;
	int rank;
	int64_t shape[MAX_RANK];
	void *data;
	size_t nbytes;
	int borrowed;   /* data points into an initializer's bytes: not freed here */
} WEntry;

typedef struct Ctx {
	const char *path;
	const OnnxOptions *opt;
	Val **vals;
	int nvals, capvals;
	Vec ids;        /* Nest identifiers used (char *) */
	Buf consts, params, body;
	WEntry *w;
	int nw, capw;
	int opset;
	/* the node being translated, for messages */
	Onnx__NodeProto *node;
	int node_index;
	int ntmp;
	int if_depth;    /* Ifs being translated, one inside the other */
	char err[1024];
	int failed;
	int unsupported;
	/* outlining (see outline_plan): while rmode, the nodes of one segment
	 * are translated as a region template: new names are placeholders @Lk@,
	 * the segment's input is @X@, and tensors from outside (weights) are
	 * @Pk@, fields of the region's record argument */
	int dry;         /* a pass whose text and weights are thrown away: no weight bytes */
	int rmode;
	Val *rin;
	Vec inner;       /* Val * made or named during the segment */
	struct ExtRef *ext;
	int next, capext;
	int rcount;
	int broken;      /* a value named only inside a segment was used after it */
	Vec garbage;     /* strings freed with the context */
	NameTab vtab;    /* find_val's index of vals */
	NameTab idtab;   /* id_taken's index of ids */
	struct OPlan *plan;
} Ctx;

typedef struct ExtRef {
	char *id;        /* the Nest name outside */
	char *oname;     /* the ONNX name */
	char *ph;        /* "@Pk@" */
	DType dt;
	int rank;
	int64_t shape[MAX_RANK];
} ExtRef;

/* the domain of a node of a local function's body that has a subgraph */
#define SUBGRAPH_IN_FUNCTION "nestc.subgraph-in-function"
#define MAX_NODE_INPUTS 1024 /* a Concat of torch.cat([...]) or a DenseNet block */
typedef struct NodeIO {
	Val *in[MAX_NODE_INPUTS];
	int nin;
	Onnx__NodeProto *n;
} NodeIO;

/* Segments are the stretches of nodes between single-tensor cuts: points in
 * the node order where exactly one tensor computed at run time crosses from
 * the nodes before to the nodes after (the residual stream of a
 * transformer, the feature map between ResNet blocks). Each segment is
 * translated as a region template; equal templates (same ops, attributes,
 * shapes and wiring, weights aside) are isomorphic. The longest run of a
 * repeating group of L consecutive segments becomes one region, called once
 * per occurrence with that occurrence's weights as a record. */
typedef struct OPlan {
	int probe;        /* pass 1: template every segment, keep the keys */
	int n;            /* nodes */
	int nseg;
	int *start, *end; /* node range [start, end) */
	char *quiet;      /* per node (find_segments): it computes no run-time value */
	char **in_name, **out_name;
	char **key;       /* pass 1 */
	int *region;      /* pass 2: region index, or -1 */
	int *seg_at;      /* per node: the segment starting there, or -1 */
	int *seg_end;     /* per node: the segment ending after it, or -1 */
	int nregions;
	char **rname, **rtempl, **rkey;
	int *rcalls, *rnodes;
	Buf regions;      /* the region functions' text */
	Buf summary;
	int cur;          /* segment being translated, or -1 */
} OPlan;

/* A graph with every call of a model-local function (torch's
 * export_modules_as_functions) replaced by the function's nodes, renamed;
 * each call's node range is remembered and becomes a region call. */
typedef struct Expanded {
	Onnx__NodeProto **nodes;
	size_t n, cap;
	Vec owned;        /* what the copies allocated */
	int ncalls, capcalls;
	int *cstart, *cend;
	Onnx__NodeProto **ccall;
	Onnx__FunctionProto **cfn;
} Expanded;

/* ------------------------------------------------------------------ wire.c: the model unpacked, its weights left in place */

/* The model in data[0, len), its initializers' raw_data pointing into data
 * (which must outlive it), or NULL: not a ModelProto protobuf-c accepts. */
Onnx__ModelProto *onnx_model_unpack(const uint8_t *data, size_t len);
int onnx_nesting_ok(const uint8_t *data, size_t len, int limit);
/* Free a model from onnx_model_unpack(data, len). */
void onnx_model_free(Onnx__ModelProto *m, const uint8_t *data, size_t len);

/* ------------------------------------------------------------------ read.c: errors, names, values, tensors from the file, attributes, local functions */

/* Nest's keywords and names an identifier made here must not take. */
extern const char *const onnx_keywords[];
const char *onnx_dtype_name(int t);
/* The Nest storage dtype of an ONNX type onnx_nest_dtype widens (float16, bfloat16 and
 * the 8- and 16-bit integers), or -1: graph inputs and outputs of those types are
 * passed in it, converted to and from the wider one at the graph's edges. */
int onnx_storage_dtype(int t);
int nest_to_onnx(DType d);
void node_err(Ctx *c, int unsupported, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tab_free(NameTab *t);
int id_taken(Ctx *c, const char *s);
char *make_id(Ctx *c, const char *name, const char *prefix);
Val *find_val(Ctx *c, const char *name);
Val *new_val(Ctx *c, const char *name, DType dt, int rank, const int64_t *shape);
void val_alloc(Val *v);
double kget(const Val *v, int64_t k);
int64_t kgeti(const Val *v, int64_t k);
void kset(Val *v, int64_t k, double x);
void kseti(Val *v, int64_t k, int64_t x);
Val raw_one(const Val *v, int64_t k, double *f, int64_t *i);
int raw_same_layout(int ot, DType dt);
void val_decode(Val *v);
int raw_splat(const Val *v);
int read_file_all(const char *path, unsigned char **data, size_t *len, char *err, size_t errlen);
Val *tensor_val(Ctx *c, Onnx__TensorProto *t, const char *name, const char *base, int keep);
Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name);
int64_t attr_i(Onnx__NodeProto *n, const char *name, int64_t def);
double attr_f(Onnx__NodeProto *n, const char *name, double def);
int attr_ints(Onnx__NodeProto *n, const char *name, int64_t *out, int max);
char *attr_s(Onnx__NodeProto *n, const char *name);
void *own(Expanded *e, void *p);
Expanded *expand_functions(Onnx__ModelProto *m);
void expanded_free(Expanded *e);
Val *frozen_val(Ctx *c, const char *name, const char *file);
const char *lookup_define(const OnnxOptions *o, const char *name);

/* ------------------------------------------------------------------ fold.c: values as Nest text, node outputs, folding helpers */

int check_shape(Ctx *c, int rank, const int64_t *shape);
void type_text(Buf *b, DType dt, int rank, const int64_t *shape);
int float_lit(char *out, size_t n, double x, DType dt);
int is_inner(Ctx *c, Val *v);
const char *ref(Ctx *c, Val *v);
Val *in_(NodeIO *io, int k);
int inputs(Ctx *c, NodeIO *io, const char *what, int n, ...);
const char *out_name(NodeIO *io, int k);
Val *def(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
int def_list(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape, const char *fn, Val *x, int n,
             const int64_t *list);
Val *def_known(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape);
char *tmp(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void alias(Ctx *c, NodeIO *io, int k, Val *v);
int oaxis(Ctx *c, int64_t a, int rank);
int need_known(Ctx *c, Val *v, const char *what);
int broadcast(Ctx *c, int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *out);
int64_t bidx(const Val *v, int r, const int64_t *oshape, const int64_t *pos);
void unravel(int64_t k, int r, const int64_t *shape, int64_t *pos);
int fold_broadcast(Ctx *c, NodeIO *io, Val *cond, Val *a, Val *b, int r, const int64_t *sh);
int def_shaped(Ctx *c, NodeIO *io, DType dt, int r, const int64_t *sh, const char *expr);
char *fresh_name(Ctx *c, const char *base);
int all_known(NodeIO *io);
char *slice_expr(const char *x, int ax, int64_t a, int64_t b);
char *list_text(int n, const int64_t *v);

/* ------------------------------------------------------------------ ops_shape.c: shape and movement ops */

int tr_shape(Ctx *c, NodeIO *io);
int tr_reshape(Ctx *c, NodeIO *io);
int tr_flatten(Ctx *c, NodeIO *io);
int get_axes(Ctx *c, NodeIO *io, int k, int64_t *axes, int *given);
int tr_squeeze(Ctx *c, NodeIO *io);
int tr_transpose(Ctx *c, NodeIO *io);
int tr_concat(Ctx *c, NodeIO *io);
int take_positions(Ctx *c, NodeIO *io, int k, Val *a, int ax, int64_t cnt, int64_t start, int64_t step);
int tr_split(Ctx *c, NodeIO *io);
int tr_slice(Ctx *c, NodeIO *io);
int tr_gather(Ctx *c, NodeIO *io);
int tr_gather_elements(Ctx *c, NodeIO *io);
int tr_expand(Ctx *c, NodeIO *io);
int tr_constant_of_shape(Ctx *c, NodeIO *io);
int tr_range(Ctx *c, NodeIO *io);
int tr_constant(Ctx *c, NodeIO *io);
int tr_trilu(Ctx *c, NodeIO *io);
int tr_tile(Ctx *c, NodeIO *io);
int tr_pad(Ctx *c, NodeIO *io);
int tr_topk(Ctx *c, NodeIO *io);
int tr_cumsum(Ctx *c, NodeIO *io);
char *reversed(Ctx *c, NodeIO *io, const char *x, int rank, int ax, int64_t n);
int tr_depth_space(Ctx *c, NodeIO *io);

/* ------------------------------------------------------------------ ops_nn.c: products, reductions, normalisation, fused patterns */

int tr_matmul(Ctx *c, NodeIO *io);
int tr_gemm(Ctx *c, NodeIO *io);
int tr_einsum(Ctx *c, NodeIO *io);
int tr_reduce(Ctx *c, NodeIO *io, const char *fn, const char *pre, const char *post);
int tr_act(Ctx *c, NodeIO *io, const char *fmt, const char *aname, double adef, const char *bname, double bdef);
int tr_argmax(Ctx *c, NodeIO *io);
int tr_softmax(Ctx *c, NodeIO *io);
int tr_layernorm(Ctx *c, NodeIO *io);
int tr_batchnorm(Ctx *c, NodeIO *io);
int tr_instance_norm(Ctx *c, NodeIO *io);
int tr_isnan_isinf(Ctx *c, NodeIO *io);
int tr_hardmax(Ctx *c, NodeIO *io);
int tr_mvn(Ctx *c, NodeIO *io);
int tr_lrn(Ctx *c, NodeIO *io);
int tr_loss(Ctx *c, NodeIO *io);

/* ------------------------------------------------------------------ patterns.c: multi-node patterns as one builtin */

enum { PAT_NONE, PAT_LAYERNORM, PAT_GELU_TANH, PAT_GELU_ERF, PAT_SILU };
/* Per node: the pattern starting there (kind PAT_NONE: none) and its last
 * node; the nodes between are the pattern's and Constant nodes. */
typedef struct PatMark {
	int kind, last;
} PatMark;
PatMark *find_patterns(Onnx__GraphProto *g);
/* The pattern at node k as one builtin: 1 if done, 0 when its values do not
 * fit (translate the nodes one by one), -1 after an error. */
int try_pattern(Ctx *c, Onnx__GraphProto *g, int k, const PatMark *m);

/* ------------------------------------------------------------------ ops_conv.c: convolution and pooling */

int tr_conv(Ctx *c, NodeIO *io);
int tr_conv_transpose(Ctx *c, NodeIO *io);
int tr_pool(Ctx *c, NodeIO *io, int is_max);
int tr_global_pool(Ctx *c, NodeIO *io);

/* ------------------------------------------------------------------ ops_resize.c: Resize and Upsample */

int tr_resize(Ctx *c, NodeIO *io);
int tr_grid_sample(Ctx *c, NodeIO *io);

/* ------------------------------------------------------------------ ops_index.c: GatherND, OneHot, EyeLike, Size */

int tr_gather_nd(Ctx *c, NodeIO *io);
int tr_one_hot(Ctx *c, NodeIO *io);
int tr_reverse_sequence(Ctx *c, NodeIO *io);
int tr_eye_like(Ctx *c, NodeIO *io);
int tr_size(Ctx *c, NodeIO *io);
int tr_scatter(Ctx *c, NodeIO *io);

/* ------------------------------------------------------------------ ops_rnn.c: RNN, GRU, LSTM */

int tr_rnn(Ctx *c, NodeIO *io);

/* ------------------------------------------------------------------ ops_quant.c: quantization */

int tr_dequantize(Ctx *c, NodeIO *io);
int tr_quantize(Ctx *c, NodeIO *io);
int tr_dynamic_quantize(Ctx *c, NodeIO *io);
int tr_matmul_integer(Ctx *c, NodeIO *io);
int tr_qlinear_matmul(Ctx *c, NodeIO *io);
int tr_conv_integer(Ctx *c, NodeIO *io);
int tr_qlinear_conv(Ctx *c, NodeIO *io);
Val *axis_const(Ctx *c, const char *out, const char *what, int t, DType dt, int rank, int ax, int64_t len);

/* ------------------------------------------------------------------ ops.c: elementwise ops and the dispatch */

int translate_node(Ctx *c, Onnx__NodeProto *n);

/* ------------------------------------------------------------------ outline.c: repeated layers and params grouping */

void plan_free(OPlan *p);
void seg_begin(Ctx *c, int s);
void seg_end(Ctx *c, int s);
void group_params(Ctx *c, char **regions, char **body);
OPlan *plan_from_calls(Ctx *c0, Expanded *e, int nnodes);
OPlan *find_segments(Ctx *c0, Onnx__GraphProto *g);
void plan_index(OPlan *p);
OPlan *choose_regions(OPlan *p, Onnx__GraphProto *g);

/* ------------------------------------------------------------------ emit.c: the driver */



#endif

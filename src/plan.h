/* plan.h - the back end's plan of a graph (plan.c): where each node's tensor
 * lives, which nodes are fused, and the geometry of the kernels that codegen/
 * and the report read. Split from nestc.h, which the front end needs alone. */
#ifndef NESTC_PLAN_H
#define NESTC_PLAN_H

#include "nestc.h"

/* Where each node's tensor lives while its graph's code runs. */
typedef enum BufKind {
	BUF_NONE,    /* no storage: OP_CALL */
	BUF_INPUT,   /* bufs[index] */
	BUF_OUTPUT,  /* bufs[ninputs + index]: computed straight into the caller's result */
	BUF_PARAM,   /* ctx->params[index] */
	BUF_WS,      /* ws + offset */
	BUF_ALIAS,   /* the storage of node `index` (reshape: same elements, same order) */
} BufKind;

typedef struct Plan {
	Graph *g;
	BufKind *kind;
	int64_t *index;     /* BUF_INPUT/OUTPUT/PARAM/ALIAS */
	int64_t *offset;    /* BUF_WS: byte offset, 64-byte aligned */
	int64_t ws_size;    /* this graph's own intermediates and scratch (bytes) */
	int64_t scratch;    /* offset of the scratch area (a matmul's packed panel) */
	int64_t sum_live;   /* the sum of every intermediate's size, for the report */
	int *copy_out;      /* per output: 1 when the result must be copied into bufs[ninputs + j] */
	int *epi_next;      /* per node: the next op of a matmul's fused epilogue, or -1 */
	int *fused_into;    /* per node: the matmul whose tiles apply this op, or -1 */
	int *ew_into;       /* per node: the elementwise op that computes it inline, or -1 */
	/* softmax(q @ k [epilogue], axis=-1) @ v run a matrix of the batch at a
	 * time (codegen/attention.c), emitted at the second matmul: per node,
	 * for that matmul the first one's id, for the first matmul and the
	 * softmax -2, else -1. q, k, v and the epilogue's operands live until
	 * the second matmul. */
	int *attn;
	/* A convolution whose value (after its epilogue) only a max or average
	 * pooling reads is computed with it, band by band, its own result never
	 * stored (codegen/conv.c, conv_pool_geom), emitted at the pooling: per
	 * node, for that pooling the convolution's id, for the convolution -2,
	 * else -1. The convolution's operands live until the pooling. */
	int *conv_pool;
} Plan;

/* Plan a graph's buffers: liveness-based reuse of workspace offsets. `maxshape`
 * (or NULL) gives, for a reuse_hash variant, the largest size of each node
 * over its group; wino: Winograd convolutions are allowed (their scratch). */
Plan *plan_graph(Program *p, Graph *g, const int64_t *max_numel, int wino);
/* The plan of a variant's graph (a reuse_hash variant's buffers sized for the
 * largest call of its group), or of an entry's graph when v is NULL; wino:
 * Winograd allowed by the build (the variant's option is checked here). */
Plan *plan_variant(Program *p, Graph *g, struct Variant *v, int wino);
/* A float matmul whose panels (2-D) or matrices (a batch without
 * broadcasting) run as pool tasks, with packing buffers of their own; the
 * others pack into the scratch area of the workspace. */
int matmul_pooled(Graph *g, Node *x, int dynamic);
/* The most elements of an attention's scores per matrix (Plan.attn): two
 * buffers of them on a task's stack. */
#define ATTN_MAX_ELEMS 65536
#define ATTN_MAX_K 8192
/* The most tensors one loop of elementwise ops (op_elementwise) reads when
 * ops are made inline (plan.c). */
#define EW_LEAVES 12
/* A scalar computed from constants alone (rsqrt(64.0)): a matmul's epilogue
 * computes it inline. */
int scalar_of_consts(Node *x, int depth);
/* A transpose of a matrix that only matmuls read as their right operand: no
 * copy is made, the matmul reads the rows of its input. */
int virtual_transpose(Graph *g, Node *t);
/* A slice of a state with run-time size read only by the matmuls right after
 * it, as their right operand: they read the state in place. */
int virtual_slice(Graph *g, Node *s);
/* A float conv2d of a static graph is computed from shifted copies of its
 * input (codegen/conv.c): per kernel column kw and row phase q = kh*dh mod
 * sh, a copy of every channel with rows Hr = OH + max(kh*dh / sh) and
 * columns OW, zero where the kernel reads padding, so that the rows of the
 * implicit patch matrix are contiguous runs of a copy at a constant offset.
 * conv_geom fills the layout; 0 when the convolution is not one of these. */
typedef struct ConvGeom {
	int64_t sh, sw, ph, pw, dh, dw, groups;
	int64_t hr;       /* rows of one channel of a copy */
	int64_t nslot;    /* copies per kernel column: the phases in use */
	uint64_t phases;  /* bit q: phase q in use */
	int64_t extra;    /* copy rows beyond a band's output rows: max(kh*dh / sh) */
	/* The copies are made per task, for a band of output pixels: band b has
	 * pixels [b*blen, min(OH*OW, (b+1)*blen)) (blen a multiple of 16), and
	 * each of the nsplit tasks of a band (a share of the output channels)
	 * copies the rows these pixels read, from row b*blen / OW on, into its
	 * own slot of `slot` elements (bcp a channel), so that no core reads
	 * copies that another core wrote. */
	int64_t blen, nband, nsplit, brows, bcp, slot;
	int64_t elems;    /* elements of all the slots; 0 when the input is read in place */
	/* Small planes whose pixels fill vectors badly (a 7x7 plane is 49 pixels
	 * in 4 vectors of 16) may be computed with output channels in the lanes
	 * instead (codegen/conv.c, on AVX-512 with the weights pre-packed): from
	 * copies of whole planes, lcp elements a channel (0: the input read in
	 * place, a 1x1 of stride 1 without padding), lelems in all. */
	int64_t lanes, lcp, lelems;
	/* A 3x3 convolution of stride 1 on planes of enough 4x4 tiles is
	 * computed by Winograd's F(4x4, 3x3) (codegen/conv.c): a product of
	 * 36 matrices [tiles, C] x [C, O] in place of 9 [O, C] x [C, pixels],
	 * a fourth of the multiplications; welems elements of scratch hold the
	 * weights' transforms (36 C O, when they are not pre-packed) and the
	 * input's (36 C by the tiles rounded up to WINO_MR, then to 16, and 16
	 * more). */
	int64_t wino, welems;
	/* computed with the pooling that reads it (conv_pool_geom): bands of
	 * prows pooled rows, each from the nrows rows of the convolution they
	 * read, from row min(max(0, first pooled row * stride - padding),
	 * OH - nrows) on (blen = nrows * OW pixels); else 0 */
	int64_t prows, nrows;
} ConvGeom;
#define WINO_MIN_TILES 16
#define WINO_MR 6 /* tiles a register tile of the products */
/* The products' panels of output channels: 4 vectors on AVX-512, 2 on
 * AVX2 (codegen/conv.c); Winograd is taken with 32-byte vectors or wider. */
#define WINO_WIDE(vbytes) ((vbytes) >= 64 ? 64 : 16)
/* A Winograd convolution on this target asks for its weights' transforms
 * pre-packed (NESTRT_PACK_WINO): the request into rec, else 0. */
int conv_wino_pack(const Node *n, int dynamic, int vbytes, int64_t rec[4]);
#define CV_MAX_MR 12 /* a convolution's register tile: channels */
#define CV_MAX_NV 4  /* and vectors of pixels */
int conv_geom(const Node *n, int dynamic, ConvGeom *cg);
/* The layout of convolution n computed with pooling m (ConvGeom.prows), from
 * copies on the stack of each task; 0 when it is not computed so. */
int conv_pool_geom(const Node *n, const Node *m, ConvGeom *cg);
/* Output channels in the lanes (ConvGeom.lanes) are taken on AVX-512
 * (vbytes 64) for f32 with the weights pre-packed as a matmul's transposed
 * right operand, panels of CL_NV vectors of channels: the request (k, n,
 * wide, flags) into rec, else 0. The pack plan asks for the same. */
#define CL_NV 3
int conv_lanes_pack(const Node *n, int dynamic, int vbytes, int64_t rec[4]);
/* the register tile of a convolution: mr channels by nv vectors of pixels */
void conv_tile_shape(int64_t nvec, int64_t Og, int regs, int *mr, int *nv);
/* a per-channel operand of a convolution's epilogue, evaluated per channel
 * from nodes read where they are stored (conv_chan_ready) */
int conv_chan_operand(const struct Plan *pl, Node *conv, Node *o, int top, int depth);
/* The activations a convolution's epilogue applies to f32 tiles in
 * registers, besides relu (codegen/elementwise.c's act_f32). */
static inline int act_f32_op(Op op)
{
	return op == OP_SIGMOID || op == OP_SILU || op == OP_TANH || op == OP_GELU || op == OP_GELU_TANH ||
	       op == OP_HARDSWISH;
}
int conv_chan_ready(const struct Plan *pl, const Node *conv, const Node *o);
/* the start of a slice that is one run of its input's elements, else -1 */
int64_t slice_run(const Node *s);

#endif

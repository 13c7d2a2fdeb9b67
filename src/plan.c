/* plan.c - the buffer plan of a graph: every intermediate tensor gets a static
 * offset in the workspace, reused once its last reader has run (first fit over
 * live ranges). Reshapes alias their input; results are computed straight into
 * the caller's buffers where nothing else needs them. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

typedef struct Block {
	int64_t off, size;
	int until;   /* last node (id) that reads it */
} Block;

static int64_t align64(int64_t n)
{
	return (n + 63) & ~(int64_t)63;
}

/* A state, or a region's input bound to one: written in place by a store,
 * so whoever reads it must read it where it stands in node order. */
static int stateful(const Node *n)
{
	return n->op == OP_STATE || n->op == OP_STORE || (n->op == OP_INPUT && n->a[1] == 1);
}

int virtual_slice(Graph *g, Node *s)
{
	/* a slice of a state whose size varies at run time (the positions of a
	 * KV cache so far), read only by matmuls as their right operand right
	 * after it: they read the state in place (codegen/matmul.c), no copy */
	if (s->op != OP_SLICE || !dtype_is_float(s->dtype) || s->rank < 3 || !gdyn_has(g, s))
		return 0;
	Node *t = s->in[0];
	if (t->op != OP_STATE && !(t->op == OP_INPUT && t->a[1] == 1))
		return 0;
	for (int k = 0; k < s->rank - 2; k++) {
		/* whole batch axes: start 0, the state's size */
		if (gdyn_find(g, s->id, 16 + k) || s->a[k] != 0 || gdyn_find(g, s->id, k) || s->shape[k] != t->shape[k])
			return 0;
	}
	for (int j = 0; j < g->noutputs; j++)
		if (g->outputs[j] == s)
			return 0;
	int users = 0;
	for (int i = s->id + 1; i < g->nnodes; i++) {
		Node *x = g->nodes[i];
		for (int k = 0; k < x->nin; k++)
			if (x->in[k] == s) {
				if (x->op != OP_MATMUL || k != 1 || x->in[0] == s || x->rank != s->rank || x->in[0]->rank != s->rank)
					return 0;
				/* nothing between may write the state */
				for (int m = s->id + 1; m < i; m++)
					if (g->nodes[m]->op == OP_STORE || g->nodes[m]->op == OP_CALL)
						return 0;
				users++;
			}
	}
	return users > 0;
}

int virtual_transpose(Graph *g, Node *t)
{
	if (t->op == OP_TRANSPOSE && stateful(t->in[0]))
		return 0;
	if (t->op != OP_TRANSPOSE || t->rank != 2 || t->a[0] != 1 || t->a[1] != 0 || !dtype_is_float(t->dtype))
		return 0;
	int users = 0;
	for (int i = t->id + 1; i < g->nnodes; i++) {
		Node *x = g->nodes[i];
		for (int k = 0; k < x->nin; k++)
			if (x->in[k] == t) {
				if (x->op != OP_MATMUL || k != 1 || x->in[0]->rank != 2 || x->in[0] == t)
					return 0;
				users++;
			}
	}
	for (int j = 0; j < g->noutputs; j++)
		if (g->outputs[j] == t)
			return 0;
	return users > 0;
}

/* Same rank and shape, also where the shape is taken at run time (the same
 * affine form of the dims on each axis, or the same constant). */
static int same_shape(Graph *g, const Node *a, int rank, const int64_t *shape, const Node *b)
{
	if (a->rank != rank || memcmp(a->shape, shape, (size_t)rank * sizeof shape[0]) != 0)
		return 0;
	for (int k = 0; k < rank && g->ngdyn; k++) {
		GDyn *da = gdyn_find(g, a->id, k), *db = gdyn_find(g, b->id, k);
		if ((da == NULL) != (db == NULL) || (da && memcmp(&da->f, &db->f, sizeof da->f) != 0))
			return 0;
	}
	return 1;
}

/* Elementwise ops that a matmul's tiles can apply as they are stored. */
static int epilogue_op(Op op)
{
	return (op_info[op].flags & OPF_EPILOGUE) != 0;
}

int scalar_of_consts(Node *x, int depth)
{
	if (x->rank != 0 || depth > 8)
		return 0;
	if (x->op == OP_CONST)
		return 1;
	if (!epilogue_op(x->op) || x->op == OP_CAUSAL_MASK)
		return 0;
	for (int k = 0; k < x->nin; k++)
		if (!scalar_of_consts(x->in[k], depth + 1))
			return 0;
	return 1;
}

/* The first node after c that reads it. */
static Node *next_reader(Graph *g, Node *c)
{
	for (int j = c->id + 1; j < g->nnodes; j++)
		for (int k = 0; k < g->nodes[j]->nin; k++)
			if (g->nodes[j]->in[k] == c)
				return g->nodes[j];
	return NULL;
}

/* A tile of nv vectors and mr channels: the share of the FMA ports it keeps
 * busy, taken as full from 2 FMAs a load on (12 channels by 2 vectors, 1.7
 * a load, ran a 7x7 plane of 512 channels slower than 6 by 4, 2.4). */
static double tile_eff(int mr, int nv)
{
	double per = (double)(mr * nv) / (double)(mr + nv) / 2.0;
	return per < 1 ? per : 1;
}

static int tile_mr(int nv, int64_t Og, int regs)
{
	int mr = regs / nv;
	if (mr > CV_MAX_MR)
		mr = CV_MAX_MR;
	return mr > Og ? (int)Og : mr;
}

/* The register tile of a convolution over nvec vectors of pixels: up to
 * regs accumulators as mr channels by nv vectors, nv so that the vectors
 * fill the tiles (a 7x7 plane is 4 vectors of 16: one tile of 4), then the
 * shape whose k step loads least per FMA. */
void conv_tile_shape(int64_t nvec, int64_t Og, int regs, int *mr, int *nv)
{
	double best = -1;
	for (int v = CV_MAX_NV; v >= 1; v--) {
		int m = tile_mr(v, Og, regs);
		double fill = (double)nvec / (double)(((nvec + v - 1) / v) * v);
		double score = fill * tile_eff(m, v);
		if (score > best + 1e-9) {
			best = score;
			*mr = m;
			*nv = v;
		}
	}
}

/* The time of nvec vectors of pixels in tiles of the shape above (a band's
 * last tile has the vectors left), in vectors at full speed. */
static double tile_time(int64_t nvec, int64_t Og)
{
	int mr, nv;
	conv_tile_shape(nvec, Og, 24, &mr, &nv);
	int64_t tail = nvec % nv;
	double t = (double)(nvec - tail) / tile_eff(mr, nv);
	if (tail)
		t += (double)tail / tile_eff(tile_mr((int)tail, Og, 24), (int)tail);
	return t;
}

/* The copy rows of the bands of len pixels of a plane of P: each band's
 * output rows plus the extra rows the kernel reads below; their sum into
 * *sum, the most into *most. */
static void band_rows(int64_t P, int64_t len, int64_t OW, int64_t extra, double *sum, int64_t *most)
{
	*sum = 0, *most = 0;
	for (int64_t p0 = 0; p0 < P; p0 += len) {
		int64_t end = p0 + len < P ? p0 + len : P, r = (end - 1) / OW - p0 / OW + 1 + extra;
		*sum += (double)r;
		if (r > *most)
			*most = r;
	}
}

/* Layouts of bands, compared (conv_bands, conv_pool_geom): nb bands, each
 * split into ns tasks (shares of the output channels, 8 or more each), at
 * most 64 tasks; tiles a band's compute, copy a task's copying. The first
 * pass finds the least time (below), the second takes the most tasks within
 * 1% of it: key (the caller's) and ns. */
typedef struct BandPick {
	int pass;
	double best;
	int64_t key, ns, tasks;
} BandPick;

static void band_pick(BandPick *b, int64_t key, int64_t nb, int64_t Og, double tiles, double copy)
{
	for (int64_t ns = 1; ns <= 16; ns *= 2) {
		int64_t tasks = nb * ns;
		if (tasks > 64 || (ns > 1 && ns * 8 > Og))
			continue;
		double t = (double)((tasks + 1) / 2) * (tiles / (double)ns + copy) + (double)nb * (tiles + copy) / 2;
		if (tasks < 4)
			t *= 1.04;
		if (b->pass == 0 && (b->best == 0 || t < b->best))
			b->best = t;
		if (b->pass == 1 && t <= b->best * 1.01 && tasks > b->tasks)
			b->key = key, b->ns = ns, b->tasks = tasks;
	}
}

/* The tasks of a convolution from copies: bands of blen output pixels, each
 * split over nsplit shares of the output channels. A task's compute is its
 * band's tiles (tile_time: vectors of 16 pixels, AVX-512's, and the tiles'
 * shapes); its copying grows with the rows it reads (a copied element costs
 * about a vector FMA: a 3x3 convolution of 256 channels at 14x14 spends 2%
 * of its time copying). The layout chosen has the least time on two threads
 * (this machine kind's cores) plus half the time on one, where a band is
 * one task (codegen/conv.c); fewer than four tasks count 4% more (the pool
 * cannot even out a core that was held up), and among times within 1% of
 * the best the most tasks win. */
static void conv_bands(ConvGeom *cg, int64_t C, int64_t O, int64_t KH, int64_t KW, int64_t OH, int64_t OW)
{
	int64_t Og = O / cg->groups, P = OH * OW, nvec = (P + 15) / 16;
	double fma_vec = (double)O * (double)(C / cg->groups) * (double)(KH * KW); /* vector FMAs a vector of pixels */
	double copy_row = (double)(C * KW * cg->nslot * OW);                      /* elements a copied row */
	BandPick bp = {.key = nvec > 0 ? nvec : 1, .ns = 1};
	int64_t most;
	/* from the shortest bands that make at most 64 tasks (band_pick) on */
	for (bp.pass = 0; bp.pass < 2; bp.pass++)
		for (int64_t u = nvec / 64 > 1 ? nvec / 64 : 1; u <= nvec; u++) {
			int64_t len = u * 16, nb = (P + len - 1) / len;
			if (nb > 64)
				continue;
			double tiles = tile_time(u, Og) * fma_vec, rows;
			band_rows(P, len, OW, cg->extra, &rows, &most);
			double copy = rows / (double)nb * copy_row;
			band_pick(&bp, u, nb, Og, tiles, copy);
		}
	cg->blen = bp.key * 16;
	cg->nband = (P + cg->blen - 1) / cg->blen;
	cg->nsplit = bp.ns;
	double rows;
	band_rows(P, cg->blen, OW, cg->extra, &rows, &cg->brows);
}

/* Convolution n computed with pooling m (ConvGeom.prows): from copies, not
 * Winograd, not channels in the lanes; a pooling of at most 16 positions,
 * stride up to 4 across, rows of at most 64 (a row's sums in registers,
 * codegen/conv.c). A band of prows pooled rows computes the nrows rows of
 * the convolution they read, KH - stride of them shared with the next band
 * and computed twice (3x3 of stride 2: one row in 2 * prows + 1); its
 * copies and its rows of every channel on the task's stack, at most 1 MiB
 * in all, a core's L2 here (ResNet's stem in bands of 14 pooled rows, 1.4
 * MB: 1.05x the time of bands of 7 at two threads). The bands and their
 * split over the output channels are chosen as conv_bands does, the rows
 * computed twice counted. */
int conv_pool_geom(const Node *n, const Node *m, ConvGeom *cg)
{
	if ((m->op != OP_MAXPOOL2D && m->op != OP_AVGPOOL2D) || !conv_geom(n, 0, cg) || !cg->elems || cg->lanes ||
	    cg->wino)
		return 0;
	const Node *x = n->in[0], *w = n->in[1];
	int64_t KH = m->a[0], KW = m->a[1], sh = m->a[2], sw = m->a[3], ph = m->a[4];
	int64_t OH = n->shape[2], OW = n->shape[3], POH = m->shape[2], POW = m->shape[3];
	if (KH * KW > 16 || sw > 4 || POW > 64 || sh < 1 || ph >= KH || m->in[0]->rank != 4 ||
	    memcmp(m->in[0]->shape, n->shape, 4 * sizeof n->shape[0]))
		return 0;
	int64_t C = x->shape[1], O = n->shape[1], Og = O / cg->groups, CKW = w->shape[3], es = dtype_size(n->dtype);
	double fma_vec = (double)O * (double)(C / cg->groups) * (double)(w->shape[2] * CKW);
	double copy_row = (double)(C * CKW * cg->nslot * OW);
	BandPick bp = {.ns = 1};
	for (bp.pass = 0; bp.pass < 2; bp.pass++)
		for (int64_t pr = 1; pr <= POH; pr++) {
			int64_t nr = (pr - 1) * sh + KH < OH ? (pr - 1) * sh + KH : OH, nb = (POH + pr - 1) / pr;
			int64_t brows = nr + cg->extra < cg->hr ? nr + cg->extra : cg->hr;
			int64_t bytes = (O * ((nr * OW + 15) / 16 * 16) + CKW * cg->nslot * C * ((brows * OW + 15) / 16 * 16) + 16) * es;
			if (nb > 64 || bytes > ((int64_t)1 << 20))
				continue;
			double tiles = tile_time((nr * OW + 15) / 16, Og) * fma_vec, copy = (double)brows * copy_row;
			band_pick(&bp, pr, nb, Og, tiles, copy);
		}
	if (!bp.key)
		return 0;
	cg->prows = bp.key;
	cg->nrows = (bp.key - 1) * sh + KH < OH ? (bp.key - 1) * sh + KH : OH;
	cg->blen = cg->nrows * OW;
	cg->nband = (POH + bp.key - 1) / bp.key;
	cg->nsplit = bp.ns;
	cg->brows = cg->nrows + cg->extra < cg->hr ? cg->nrows + cg->extra : cg->hr;
	cg->bcp = (cg->brows * OW + 15) / 16 * 16;
	cg->slot = CKW * cg->nslot * C * cg->bcp + 16; /* + room for the tiles' whole-vector loads past the last copy */
	return 1;
}

/* conv2d: see ConvGeom (nestc.h). The input is read in place for a 1x1
 * convolution of stride 1 without padding (a plane's last vector under a
 * mask where the plane is not whole vectors: at 14x14, copying the input
 * took a tenth of the time of 1024 channels to 256). */
int conv_geom(const Node *n, int dynamic, ConvGeom *cg)
{
	if (n->op != OP_CONV2D || !dtype_is_float(n->dtype) || dynamic)
		return 0;
	const Node *x = n->in[0], *w = n->in[1];
	*cg = (ConvGeom){.sh = n->a[0], .sw = n->a[1], .ph = n->a[2], .pw = n->a[3], .groups = n->a[4],
	                 .dh = n->a[5] ? n->a[5] : 1, .dw = n->a[6] ? n->a[6] : 1};
	if (cg->sh < 1 || cg->sh > 64 || cg->groups < 1)
		return 0;
	int64_t KH = w->shape[2], KW = w->shape[3], OH = n->shape[2], OW = n->shape[3], m = 0;
	for (int64_t kh = 0; kh < KH; kh++) {
		cg->phases |= (uint64_t)1 << ((kh * cg->dh) % cg->sh);
		if ((kh * cg->dh) / cg->sh > m)
			m = (kh * cg->dh) / cg->sh;
	}
	cg->nslot = __builtin_popcountll(cg->phases);
	cg->hr = OH + m;
	cg->extra = m;
	int inplace = KH == 1 && KW == 1 && cg->sh == 1 && cg->sw == 1 && cg->ph == 0 && cg->pw == 0;
	if (inplace && (OH * OW) % 16 == 0) {
		cg->elems = 0;
		return 1;
	}
	/* Winograd F(4x4, 3x3): 4x4 output tiles, at least WINO_MIN_TILES of
	 * them to pay for the transforms (at 14x14, 16 tiles: 0.55x the time of
	 * the pixels' tiles at one thread); input channels in 16s (a task of the
	 * input's transforms takes 16), output channels in 64s (the products'
	 * panels), padding up to 2, f32 only (its rounding error, some 1e-6 of
	 * the largest output here, would be a loss in f64); the transforms'
	 * scratch (36 C O) bounded, images whose elements' offsets fit 32 bits
	 * and rows of at most 4096 (a task's 6 rows channels-last, on its
	 * stack) */
	int64_t T = ((OH + 3) / 4) * ((OW + 3) / 4), T2 = ((OH + 1) / 2) * ((OW + 1) / 2), CO = x->shape[1] * n->shape[1];
	int ok = n->dtype == DT_F32 && cg->groups == 1 && KH == 3 && KW == 3 && cg->sh == 1 && cg->sw == 1 &&
	         cg->dh == 1 && cg->dw == 1 && cg->ph <= 2 && cg->pw <= 2 && x->shape[1] % 16 == 0 && n->shape[1] % 64 == 0 &&
	         x->shape[1] * x->shape[2] * x->shape[3] < ((int64_t)1 << 30) && n->shape[1] * OH * OW < ((int64_t)1 << 30) &&
	         x->shape[3] <= 4096;
	/* F(2x2, 3x3) on smaller planes: 16 points, 2.25 times fewer
	 * multiplications than directly (7x7, 16 tiles of 2x2, 512 channels:
	 * 0.79x the time of output channels in the lanes at one thread, 0.73x
	 * at two) */
	cg->wino = ok && T >= WINO_MIN_TILES && CO <= 256 * 512 ? 4 : ok && T2 >= WINO_MIN_TILES && CO <= 512 * 512 ? 2 : 0;
	if (cg->wino == 2)
		T = T2;
	int64_t na = cg->wino == 4 ? 36 : 16;
	cg->welems = cg->wino ? na * x->shape[1] * (n->shape[1] + ((T + WINO_MR - 1) / WINO_MR * WINO_MR + 15) / 16 * 16 + 16) : 0;
	/* channels in the lanes: a plane of at most 256 pixels that wastes a
	 * tenth of its vectors' lanes or more, whole vectors of output channels,
	 * enough of a reduction to keep the tiles busy (at 14x14, 6% of the
	 * lanes lost, the pixels' tiles were 10% faster) */
	int64_t P = OH * OW, O = n->shape[1], Kt = w->shape[1] * KH * KW;
	cg->lanes = !cg->wino && cg->groups == 1 && P <= 256 && ((P + 15) / 16 * 16 - P) * 10 >= P && O % 16 == 0 && O >= 48 && Kt >= 64;
	if (cg->lanes) {
		int whole = KH == 1 && KW == 1 && cg->sh == 1 && cg->sw == 1 && cg->ph == 0 && cg->pw == 0;
		cg->lcp = whole ? 0 : (cg->hr * OW + 15) / 16 * 16;
		cg->lelems = whole ? 0 : KW * cg->nslot * x->shape[1] * cg->lcp;
	}
	if (inplace && !cg->lanes) {
		cg->elems = 0;
		return 1;
	}
	conv_bands(cg, x->shape[1], n->shape[1], KH, KW, OH, OW);
	/* a channel's copy from a 64-byte boundary: a tile's vector loads cross
	 * fewer cache lines (a 3x3 convolution of 128 channels at 28x28 in bands
	 * of 7 rows: 10% faster) */
	cg->bcp = (cg->brows * OW + 15) / 16 * 16;
	cg->slot = KW * cg->nslot * x->shape[1] * cg->bcp + 16; /* + room for the same loads */
	cg->elems = cg->nband * cg->nsplit * cg->slot;
	return 1;
}

int conv_lanes_pack(const Node *n, int dynamic, int vbytes, int64_t rec[4])
{
	ConvGeom cg;
	if (!conv_geom(n, dynamic, &cg) || !cg.lanes || vbytes != 64 || n->dtype != DT_F32)
		return 0;
	const Node *w = n->in[1];
	rec[0] = w->shape[1] * w->shape[2] * w->shape[3];
	rec[1] = n->shape[1];
	rec[2] = CL_NV * 16;
	rec[3] = 1; /* [O, K]: the transposed operand */
	return 1;
}

int conv_wino_pack(const Node *n, int dynamic, int vbytes, int64_t rec[4])
{
	ConvGeom cg;
	if (!conv_geom(n, dynamic, &cg) || !cg.wino || vbytes < 32)
		return 0;
	rec[0] = (cg.wino == 4 ? 36 : 16) * n->in[0]->shape[1];
	rec[1] = n->shape[1];
	rec[2] = WINO_WIDE(vbytes);
	rec[3] = cg.wino == 4 ? 4 : 8; /* NESTRT_PACK_WINO, NESTRT_PACK_WINO2 */
	return 1;
}

/* A slice whose elements are one run of its input's (a row of a matrix of
 * batch norm statistics): the run's start, else -1. */
int64_t slice_run(const Node *s)
{
	const Node *x = s->in[0];
	if (s->op != OP_SLICE || s->rank != x->rank)
		return -1;
	int k = 0;
	while (k < s->rank && s->shape[k] == 1)
		k++;
	for (int j = k + 1; j < s->rank; j++)
		if (s->shape[j] != x->shape[j] || s->a[j] != 0)
			return -1;
	int64_t start = 0, stride = 1;
	for (int j = s->rank - 1; j >= 0; j--) {
		start += s->a[j] * stride;
		stride *= x->shape[j];
	}
	return start;
}

/* A node that a convolution's epilogue reads where it is stored: a param,
 * an input, or a node computed before it whose storage holds its value (not
 * made inline, not a matmul's or a convolution's with an epilogue of its
 * own; elementwise nodes are computed again, per channel). */
int conv_chan_ready(const Plan *pl, const Node *conv, const Node *o)
{
	if (stateful(o))
		return 0;
	if (o->op == OP_PARAM || o->op == OP_INPUT)
		return 1;
	return o->id < conv->id && !op_elementwise(o->op) && pl->fused_into[o->id] < 0 && pl->epi_next[o->id] < 0;
}

/* Can o (an operand of an op of a convolution's epilogue; `top` for that
 * operand itself, shaped [O, 1, 1] or [1, O, 1, 1]) be evaluated channel by
 * channel when the convolution runs? Its nodes hold O elements or one and
 * are ready (conv_chan_ready), scalar constants, runs of ready nodes
 * (slice_run), or elementwise ops and reshapes of such nodes: batch_norm's
 * scale and shift, which are made after the convolution, are computed per
 * channel by its tiles. */
int conv_chan_operand(const Plan *pl, Node *conv, Node *o, int top, int depth)
{
	int64_t O = conv->shape[1], ne = shape_numel(o->rank, o->shape);
	if (depth > 16 || o->dtype != conv->dtype || stateful(o))
		return 0;
	if (top && !((o->rank == 3 && o->shape[0] == O && o->shape[1] == 1 && o->shape[2] == 1) ||
	             (o->rank == 4 && o->shape[0] == 1 && o->shape[1] == O && o->shape[2] == 1 && o->shape[3] == 1)))
		return 0;
	if (o->rank != 0 && ne != O)
		return 0;
	if (conv_chan_ready(pl, conv, o) || (o->op == OP_CONST && o->rank == 0))
		return 1;
	if (o->op == OP_SLICE)
		return slice_run(o) >= 0 && o->in[0]->dtype == o->dtype && conv_chan_ready(pl, conv, o->in[0]);
	OpClass c = op_info[o->op].cls;
	if (o->op != OP_RESHAPE && c != OPC_UNARY && c != OPC_BINARY)
		return 0;
	for (int k = 0; k < o->nin; k++) {
		Node *i = o->in[k];
		/* elements line up: the same count, or a scalar */
		if (i->rank != 0 && shape_numel(i->rank, i->shape) != ne)
			return 0;
		if (o->op != OP_RESHAPE && i->rank != 0 &&
		    (i->rank != o->rank || memcmp(i->shape, o->shape, (size_t)o->rank * sizeof o->shape[0])))
			return 0;
		if (!conv_chan_operand(pl, conv, i, 0, depth + 1))
			return 0;
	}
	return 1;
}

/* The epilogues of convolutions (codegen/conv.c applies them to its tiles in
 * registers): while the value has one reader, an op that works on vectors
 * (add, sub, mul, div, max, min, relu, neg; in f32 sigmoid, SiLU, tanh and
 * GELU: act_f32) of the same shape whose other
 * operand is a scalar, per channel (conv_chan_operand: batch_norm's scale
 * and shift) or a ready tensor of the result's shape (a residual). */
static void plan_conv_epilogues(Graph *g, Plan *pl, int dynamic, const int *users, const int *is_out)
{
	for (int i = 0; i < g->nnodes; i++) {
		Node *m = g->nodes[i], *cur = m;
		ConvGeom cg;
		if (!conv_geom(m, dynamic, &cg))
			continue;
		for (int len = 0; len < 8 && users[cur->id] == 1 && !is_out[cur->id]; len++) {
			Node *e = next_reader(g, cur);
			if (!e || e->dtype != m->dtype || !same_shape(g, e, m->rank, m->shape, m))
				break;
			Op op = e->op;
			if (op != OP_ADD && op != OP_SUB && op != OP_MUL && op != OP_DIV && op != OP_MAX && op != OP_MIN &&
			    op != OP_RELU && op != OP_NEG && !(m->dtype == DT_F32 && act_f32_op(op)))
				break;
			if (e->nin == 2) {
				Node *o = e->in[0] == cur ? e->in[1] : e->in[0];
				int ok = o != cur && o->dtype == m->dtype &&
				         (scalar_of_consts(o, 0) || conv_chan_operand(pl, m, o, 1, 0) ||
				          (same_shape(g, o, m->rank, m->shape, m) && o->id < m->id && !stateful(o)));
				if (!ok)
					break;
			}
			pl->epi_next[cur->id] = e->id;
			pl->fused_into[e->id] = m->id;
			cur = e;
		}
	}
}

/* Convolutions computed with the pooling that reads them (Plan.conv_pool):
 * the value of the convolution's epilogue (or its own) has one reader, a
 * max or average pooling of a static graph, and is not an output; the
 * epilogue reads no tensor of the result's shape; no store or call comes
 * between them (the kernel, run at the pooling, would read a state's later
 * value). */
static void plan_conv_pool(Graph *g, Plan *pl, int dynamic, const int *users, const int *is_out)
{
	for (int i = 0; i < g->nnodes; i++) {
		Node *m = g->nodes[i], *e;
		ConvGeom cg;
		if (dynamic || (m->op != OP_MAXPOOL2D && m->op != OP_AVGPOOL2D) || !dtype_is_float(m->dtype))
			continue;
		e = m->in[0];
		if (users[e->id] != 1 || is_out[e->id] || pl->epi_next[e->id] >= 0)
			continue;
		Node *c = pl->fused_into[e->id] >= 0 ? g->nodes[pl->fused_into[e->id]] : e;
		if (c->op != OP_CONV2D || c->dtype != m->dtype || !conv_pool_geom(c, m, &cg))
			continue;
		int no = 0;
		for (int k = c->id + 1; k < i; k++)
			no |= g->nodes[k]->op == OP_STORE || g->nodes[k]->op == OP_CALL;
		for (int k = pl->epi_next[c->id]; k >= 0; k = pl->epi_next[k])
			for (int q = 0; q < g->nodes[k]->nin; q++) {
				Node *o = g->nodes[k]->in[q];
				no |= o->rank == 4 && !memcmp(o->shape, c->shape, 4 * sizeof c->shape[0]) && o->id < c->id;
			}
		if (no)
			continue;
		pl->conv_pool[m->id] = c->id;
		pl->conv_pool[c->id] = -2;
	}
}

/* The chains of elementwise ops fused into the matmul that produces their
 * input (bias, activation, residual; attention's scale and causal mask): from
 * a 2-D float matmul or a batch of them on the pool, while the value has one
 * reader, that reader is an elementwise op (or a causal mask) of the same
 * shape and dtype, and its other operand (a scalar, a row of N, or a tensor
 * of the result's shape; for 2-D also a [1, N] row) is ready when the matmul
 * runs. The chain shares the matmul's
 * storage and is applied in place, panel by panel (codegen.c). */
static void plan_epilogues(Graph *g, Plan *pl, int dynamic)
{
	int n = g->nnodes;
	for (int i = 0; i < n; i++)
		pl->epi_next[i] = pl->fused_into[i] = pl->conv_pool[i] = -1;
	if (dynamic == 2)
		return; /* a reuse_hash variant's sizes are run-time values: kept simple */
	int *users = xcalloc((size_t)n + 1, sizeof(int));
	int *is_out = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		for (int k = 0; k < x->nin; k++)
			users[x->in[k]->id]++;
	}
	for (int j = 0; j < g->noutputs; j++)
		is_out[g->outputs[j]->id] = 1;
	for (int i = 0; i < n; i++) {
		Node *m = g->nodes[i];
		if (m->op != OP_MATMUL || !dtype_is_float(m->dtype))
			continue;
		int two = m->rank == 2 && m->in[0]->rank == 2 && m->in[1]->rank == 2;
		/* batched: without broadcasting (with run-time dims, its batch axes
		 * known: the loop over them applies the epilogue per matrix) */
		if (!two && !(m->rank > 2 && matmul_pooled(g, m, 0)))
			continue;
		for (int k = 0; dynamic && k < m->rank - 2; k++)
			if (gdyn_find(g, m->id, k))
				two = -1;
		if (two < 0)
			continue;
		/* the shape the chain has: the matmul's, or that of the one reshape
		 * that unfolds its rows (values.c, fold_rows), whose elements are
		 * in the same order */
		Node *sh = m;
		Node *cur = m;
		for (int len = 0; len < 8 && users[cur->id] == 1 && !is_out[cur->id]; len++) {
			Node *e = next_reader(g, cur);
			Node *view = NULL;
			/* the reshape may follow ops of the chain (linear()'s bias, then
			 * the rows unfolded for the activation and the residual) */
			if (two && sh == m && e && e->op == OP_RESHAPE && e->shape[e->rank - 1] == m->shape[1] &&
			    users[e->id] == 1 && !is_out[e->id]) {
				view = e;
				sh = e;
				e = next_reader(g, e);
			}
			int r = sh->rank;
			if (!e || !epilogue_op(e->op) || e->dtype != m->dtype || !same_shape(g, e, r, sh->shape, sh) ||
			    (sh != m && e->op == OP_CAUSAL_MASK))
				break;
			if (e->nin == 2) {
				Node *c = view ? view : cur;
				Node *o = e->in[0] == c ? e->in[1] : e->in[0];
				int fits = o->rank == 0 || (o->rank == 1 && o->shape[0] == m->shape[m->rank - 1] && !gdyn_has(g, o)) ||
				           same_shape(g, o, r, sh->shape, sh) ||
				           (sh == m && two && o->rank == 2 && o->shape[0] == 1 && o->shape[1] == m->shape[1] && !gdyn_has(g, o));
				/* available when the matmul runs: computed before it, a param,
				 * or a scalar computed from constants (inlined) */
				int ready = (o->id < m->id && !stateful(o)) || o->op == OP_PARAM || scalar_of_consts(o, 0);
				if (o == c || !ready || o->dtype != m->dtype || !fits)
					break;
			}
			pl->epi_next[cur->id] = e->id;
			pl->fused_into[e->id] = m->id;
			cur = e;
		}
	}
	plan_conv_epilogues(g, pl, dynamic, users, is_out);
	plan_conv_pool(g, pl, dynamic, users, is_out);
	free(users);
	free(is_out);
}


/* Chains and trees of elementwise ops computed in one loop: an elementwise
 * op whose value one elementwise op of the same shape reads (not a matmul's
 * epilogue, not an output) is computed inline by that reader and has no
 * storage. A tree reads at most EW_LEAVES tensors. */
static void plan_elementwise(Graph *g, Plan *pl, int dynamic)
{
	int n = g->nnodes;
	for (int i = 0; i < n; i++)
		pl->ew_into[i] = -1;
	if (dynamic == 2)
		return;
	int *users = xcalloc((size_t)n + 1, sizeof(int));
	int *is_out = xcalloc((size_t)n + 1, sizeof(int));
	int *leaves = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++)
			users[g->nodes[i]->in[k]->id]++;
	for (int j = 0; j < g->noutputs; j++)
		is_out[g->outputs[j]->id] = 1;
	for (int i = 0; i < n; i++) {
		Node *c = g->nodes[i];
		if (!op_elementwise(c->op) || pl->fused_into[i] >= 0)
			continue;
		/* inputs made inline here, while the tree stays small */
		int count = 0;
		for (int k = 0; k < c->nin; k++) {
			Node *e = c->in[k];
			int reads_state = 0;
			for (int q = 0; q < e->nin; q++)
				reads_state |= stateful(e->in[q]);
			int take = !reads_state && op_elementwise(e->op) && pl->fused_into[e->id] < 0 && pl->epi_next[e->id] < 0 && users[e->id] == 1 &&
			           !is_out[e->id] && same_shape(g, e, c->rank, c->shape, c) &&
			           count + leaves[e->id] + (c->nin - k - 1) <= EW_LEAVES;
			if (take) {
				pl->ew_into[e->id] = i;
				count += leaves[e->id];
			} else {
				count++;
			}
		}
		leaves[i] = count;
	}
	free(users);
	free(is_out);
	free(leaves);
}

int matmul_pooled(Graph *g, Node *x, int dynamic)
{
	if (x->op != OP_MATMUL || !dtype_is_float(x->dtype) || dynamic)
		return 0;
	Node *a = x->in[0], *b = x->in[1];
	if (b->rank == 1)
		return 0;
	int batch = x->rank - (a->rank != 1) - 1;
	if (batch == 0)
		return 1;
	if (a->rank != x->rank || b->rank != x->rank)
		return 0;
	/* with an entry's run-time dims, the batch axes must be known (the rows,
	 * columns and depth of each matrix go to the tasks at run time) */
	for (int k = 0; k < batch; k++)
		if (a->shape[k] != x->shape[k] || b->shape[k] != x->shape[k] || gdyn_find(g, x->id, k) ||
		    gdyn_find(g, a->id, k) || gdyn_find(g, b->id, k))
			return 0;
	return 1;
}

/* Scratch sizes from dimensions: saturating, as each dimension fits but a
 * product of them may not (the result is capped below anyway). */
static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* The readers of x in g (an output counts twice); the last one in *one. */
static int readers(Graph *g, Node *x, Node **one)
{
	int u = 0;
	for (int i = x->id + 1; i < g->nnodes; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++)
			if (g->nodes[i]->in[k] == x) {
				u++;
				*one = g->nodes[i];
			}
	for (int j = 0; j < g->noutputs; j++)
		if (g->outputs[j] == x)
			u += 2;
	return u;
}

/* Attentions run a matrix of the batch at a time (Plan.attn): f32 of static
 * shapes, q @ k batched without broadcasting (its epilogue as planned), a
 * softmax over the last axis its only reader, a matmul of the softmax by a
 * batched v the softmax's only reader and with no epilogue of its own, a
 * head's scores at most ATTN_MAX_ELEMS, both products' K at most ATTN_MAX_K
 * (their packed panels are on a task's stack). */
static void plan_attention(Graph *g, Plan *pl, int dynamic)
{
	for (int i = 0; i < g->nnodes; i++)
		pl->attn[i] = -1;
	for (int i = 0; i < g->nnodes && !dynamic; i++) {
		Node *qk = g->nodes[i], *e = qk, *sm = NULL, *pv = NULL;
		int r = qk->rank;
		if (qk->op != OP_MATMUL || qk->dtype != DT_F32 || r < 3 || !matmul_pooled(g, qk, 0) ||
		    virtual_slice(g, qk->in[1]) || qk->shape[r - 2] * qk->shape[r - 1] > ATTN_MAX_ELEMS ||
		    qk->shape[r - 1] > ATTN_MAX_K || qk->in[0]->shape[r - 1] > ATTN_MAX_K)
			continue;
		for (int k = pl->epi_next[qk->id]; k >= 0; k = pl->epi_next[k])
			e = g->nodes[k];
		if (readers(g, e, &sm) != 1 || sm->op != OP_SOFTMAX || sm->in[0] != e || sm->a[0] != r - 1 ||
		    pl->ew_into[sm->id] >= 0 || pl->fused_into[sm->id] >= 0)
			continue;
		if (readers(g, sm, &pv) != 1 || pv->op != OP_MATMUL || pv->in[0] != sm || pv->dtype != DT_F32 ||
		    pv->rank != r || !matmul_pooled(g, pv, 0) || virtual_slice(g, pv->in[1]) || pl->epi_next[pv->id] >= 0)
			continue;
		pl->attn[qk->id] = pl->attn[sm->id] = -2;
		pl->attn[pv->id] = qk->id;
	}
}

/* What convolution conv's kernel reads for its operand o (chan: a
 * per-channel operand of its epilogue, computed from the nodes it reads as
 * codegen/conv.c's cv_chan_leaves finds them) lives until node i. */
static void conv_pool_live(const Plan *pl, Node *conv, Node *o, const int *root, int *last, int i, int chan, int depth)
{
	Node *x = o;
	if (chan && (depth > 32 || scalar_of_consts(o, 0)))
		return;
	if (chan && !conv_chan_ready(pl, conv, o)) {
		if (o->op != OP_SLICE) {
			for (int k = 0; k < o->nin; k++)
				conv_pool_live(pl, conv, o->in[k], root, last, i, 1, depth + 1);
			return;
		}
		x = o->in[0];
	}
	if (last[root[x->id]] < i)
		last[root[x->id]] = i;
}

/* A concat whose first inputs are another concat's, in the same order
 * (DenseNet's torch.cat of every feature so far, a concat a layer) takes
 * that concat in their place: concat(cat_prev, f). The same elements, and
 * now the inputs chain, so that each concat can live in the next one's
 * storage (concat_in_place). Applying it again changes nothing. */
static void concat_chains(Graph *g)
{
	/* the concats so far, each with its inputs as written (before this
	 * rewrote it) */
	int *cats = xcalloc((size_t)g->nnodes + 1, sizeof(int)), nc = 0;
	Node ***orig = xcalloc((size_t)g->nnodes + 1, sizeof(Node **));
	int *onin = xcalloc((size_t)g->nnodes + 1, sizeof(int));
	for (int i = 0; i < g->nnodes; i++) {
		Node *c = g->nodes[i];
		if (c->op != OP_CONCAT)
			continue;
		orig[nc] = xmalloc((size_t)c->nin * sizeof(Node *));
		memcpy(orig[nc], c->in, (size_t)c->nin * sizeof(Node *));
		onin[nc] = c->nin;
		int best = -1;
		for (int q = 0; q < nc; q++) {
			Node *pc = g->nodes[cats[q]];
			if (pc->a[0] != c->a[0] || pc->dtype != c->dtype || onin[q] >= c->nin || (best >= 0 && onin[best] >= onin[q]))
				continue;
			int k = 0;
			while (k < onin[q] && orig[q][k] == c->in[k])
				k++;
			if (k == onin[q])
				best = q;
		}
		if (best >= 0) {
			int drop = onin[best] - 1;
			c->in[0] = g->nodes[cats[best]];
			for (int k = 1; k + drop < c->nin; k++)
				c->in[k] = c->in[k + drop];
			c->nin -= drop;
		}
		cats[nc++] = i;
	}
	for (int q = 0; q < nc; q++)
		free(orig[q]);
	free(orig);
	free(onin);
	free(cats);
}

/* Does node i get storage of its own in the workspace (plan_graph's
 * allocation, below)? */
static int own_ws(const Plan *pl, Graph *g, int i, const int *out_of)
{
	Node *x = g->nodes[i];
	switch (x->op) {
	case OP_INPUT: case OP_PARAM: case OP_STATE: case OP_CALL: case OP_STORE: case OP_RESHAPE: case OP_RESULT:
		return 0;
	case OP_TRANSPOSE:
		if (virtual_transpose(g, x))
			return 0;
		break;
	case OP_SLICE:
		if (virtual_slice(g, x))
			return 0;
		break;
	default:
		break;
	}
	/* computed inline by its reader, kept in a task's buffers, or stored
	 * with its matmul's or convolution's value (as the loop below) */
	/* equivalent mutant [const 0 -> (-1)]: and [const 2 -> 1]: and [cmp]: a
	 * concat and the storage roots of its inputs are none of these: these
	 * nodes' only readers are the ops that compute them in place */
	if (pl->ew_into[i] >= 0 || pl->fused_into[i] >= 0 || pl->attn[i] == -2 || pl->conv_pool[i] == -2)
		return 0;
	return out_of[i] < 0;
}

/* Concats in place: where a concat's axis has only axes of one element
 * before it, each input is one run of its result, and an input computed
 * here (its storage root r, of its own in the workspace, not the target of
 * a store, not placed already) is placed in the concat's storage at its
 * run: host[r] the concat, hoff[r] the run's byte offset (a multiple of
 * 64). The concat then copies only the inputs not so placed (codegen's
 * k_concat); a concat placed in a later one places its own inputs there
 * too (the later concats are seen first). DenseNet-121 copied 36 MB a
 * forward. */
static void concat_in_place(const Plan *pl, Graph *g, const int *root, const int *out_of, int *host, int64_t *hoff)
{
	int n = g->nnodes;
	int *stored = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		if (g->nodes[i]->op == OP_STORE)
			stored[root[g->nodes[i]->in[0]->id]] = 1;
	for (int i = n - 1; i >= 0; i--) {
		Node *c = g->nodes[i];
		if (c->op != OP_CONCAT || stored[i] || !own_ws(pl, g, i, out_of))
			continue;
		int ax = (int)c->a[0];
		int64_t outer = 1;
		for (int k = 0; k < ax; k++)
			outer *= c->shape[k];
		if (outer != 1)
			continue;
		int64_t at = 0;
		for (int k = 0; k < c->nin; k++) {
			Node *x = c->in[k];
			int r = root[x->id];
			if (at % 64 == 0 && r != i && host[r] < 0 && !stored[r] && own_ws(pl, g, r, out_of)) {
				host[r] = i;
				hoff[r] = at;
			}
			at += shape_numel(x->rank, x->shape) * dtype_size(x->dtype);
		}
	}
	free(stored);
}

Plan *plan_graph(Program *p, Graph *g, const int64_t *max_numel, int wino)
{
	Arena *a = p->arena;
	int n = g->nnodes;
	if (!max_numel)
		concat_chains(g);
	Plan *pl = arena_alloc(a, sizeof *pl);
	pl->g = g;
	pl->kind = arena_alloc(a, (size_t)(n + 1) * sizeof(BufKind));
	pl->index = arena_alloc(a, (size_t)(n + 1) * sizeof(int64_t));
	pl->offset = arena_alloc(a, (size_t)(n + 1) * sizeof(int64_t));
	pl->copy_out = arena_alloc(a, (size_t)(g->noutputs + 1) * sizeof(int));
	pl->epi_next = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
	pl->fused_into = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
	pl->ew_into = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
	pl->attn = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
	pl->conv_pool = arena_alloc(a, (size_t)(n + 1) * sizeof(int));

	/* storage roots: a reshape shares its input's storage, a fused
	 * elementwise op its matmul's */
	int *root = xcalloc((size_t)n + 1, sizeof(int));
	int *last = xcalloc((size_t)n + 1, sizeof(int));
	/* 0 static, 1 an entry's run-time dims (shapes compared by their
	 * forms), 2 a reuse_hash variant (no fusion) */
	int dynamic = !max_numel ? 0 : g->ngdyn ? 1 : 2;
	plan_epilogues(g, pl, dynamic);
	plan_elementwise(g, pl, dynamic);
	plan_attention(g, pl, max_numel != NULL || g->ngdyn);
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		root[i] = x->op == OP_RESHAPE ? root[x->in[0]->id] : pl->fused_into[i] >= 0 ? pl->fused_into[i] : i;
		last[i] = i;
	}
	for (int i0 = 0; i0 < n; i0++) {
		Node *x = g->nodes[i0];
		/* an op made inline reads its inputs where its tree's root runs */
		int i = i0;
		while (pl->ew_into[i] >= 0)
			i = pl->ew_into[i];
		for (int k = 0; k < x->nin; k++) {
			Node *in = x->in[k];
			/* a matmul reads a virtual transpose's or slice's input itself */
			if (virtual_transpose(g, in) || virtual_slice(g, in))
				in = in->in[0];
			int r = root[in->id];
			if (last[r] < i)
				last[r] = i;
		}
	}
	/* an attention's inputs live until it runs, at its second matmul */
	for (int i = 0; i < n; i++) {
		if (pl->attn[i] < 0)
			continue;
		Node *qk = g->nodes[pl->attn[i]];
		int r = root[qk->in[0]->id];
		last[r] = last[r] > i ? last[r] : i;
		r = root[qk->in[1]->id];
		last[r] = last[r] > i ? last[r] : i;
		for (int e = pl->epi_next[qk->id]; e >= 0; e = pl->epi_next[e])
			for (int k = 0; k < g->nodes[e]->nin; k++) {
				r = root[g->nodes[e]->in[k]->id];
				last[r] = last[r] > i ? last[r] : i;
			}
	}
	/* a convolution computed with its pooling reads its operands there:
	 * they, and what its epilogue's per-channel operands are computed from
	 * (conv_chan_leaf), live until the pooling */
	for (int i = 0; i < n; i++) {
		int c = pl->conv_pool[i];
		if (c < 0)
			continue;
		Node *cv = g->nodes[c];
		for (int q = 0; q < cv->nin; q++)
			conv_pool_live(pl, cv, cv->in[q], root, last, i, 0, 0);
		for (int e = pl->epi_next[c]; e >= 0; e = pl->epi_next[e])
			for (int q = 0; q < g->nodes[e]->nin; q++)
				if (root[g->nodes[e]->in[q]->id] != c)
					conv_pool_live(pl, cv, g->nodes[e]->in[q], root, last, i, 1, 0);
	}
	/* outputs live to the end; each output computed in place at most once */
	int *out_of = xmalloc(((size_t)n + 1) * sizeof(int));
	for (int i = 0; i < n; i++)
		out_of[i] = -1;
	for (int j = 0; j < g->noutputs; j++) {
		Node *o = g->outputs[j];
		int r = root[o->id];
		last[r] = n;
		Op op = g->nodes[r]->op;
		int computed = op != OP_INPUT && op != OP_PARAM && op != OP_CALL && op != OP_STATE;
		/* the last op of a matmul's epilogue: the matmul writes the output;
		 * through reshapes too (a batched linear's rows unfolded, values.c) */
		Node *b = o;
		while (b->op == OP_RESHAPE)
			b = b->in[0];
		int end = r == b->id || pl->fused_into[b->id] == r;
		if (computed && end && out_of[r] < 0)
			out_of[r] = j;
		else
			pl->copy_out[j] = 1;
	}

	/* concats in place: a group of storages placed, through hosts, in the
	 * top one T's, which is allocated at the first member's node and lives
	 * until the last read of any of them (gu[T]); goff[T] its offset, -1
	 * until then */
	int *host = xmalloc(((size_t)n + 1) * sizeof(int)), *gu = xmalloc(((size_t)n + 1) * sizeof(int));
	int64_t *hoff = xcalloc((size_t)n + 1, sizeof(int64_t)), *goff = xmalloc(((size_t)n + 1) * sizeof(int64_t));
	for (int i = 0; i < n; i++) {
		host[i] = -1;
		gu[i] = last[i];
		goff[i] = -1;
	}
	if (!max_numel)
		concat_in_place(pl, g, root, out_of, host, hoff);
	for (int i = 0; i < n; i++) {
		int t = i;
		while (host[t] >= 0)
			t = host[t];
		if (t != i && gu[t] < last[i])
			gu[t] = last[i];
	}

	Block *blocks = NULL;
	int nblocks = 0, cap = 0;
	int64_t top = 0;
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		/* free what died before this node; a call's results are written while
		 * the call still reads its arguments, so they count from the call */
		int t = x->op == OP_RESULT ? x->in[0]->id : i;
		for (int b = 0; b < nblocks; b++)
			if (blocks[b].until < t && blocks[b].size > 0)
				blocks[b].size = -blocks[b].size; /* free: negative size keeps the slot */
		switch (x->op) {
		case OP_INPUT:
			pl->kind[i] = BUF_INPUT;
			pl->index[i] = x->a[0];
			continue;
		case OP_PARAM:
			pl->kind[i] = BUF_PARAM;
			pl->index[i] = x->a[0];
			continue;
		case OP_STATE:
			/* the sequence's state: after the inputs and outputs in bufs */
			pl->kind[i] = BUF_INPUT;
			pl->index[i] = g->ninputs + g->noutputs + x->a[0];
			continue;
		case OP_CALL:
		case OP_STORE:
			pl->kind[i] = BUF_NONE;
			continue;
		case OP_TRANSPOSE:
			if (virtual_transpose(g, x)) {
				pl->kind[i] = BUF_NONE; /* read in place by the matmuls that use it */
				continue;
			}
			break;
		case OP_SLICE:
			if (virtual_slice(g, x)) {
				pl->kind[i] = BUF_NONE;
				continue;
			}
			break;
		case OP_RESHAPE:
			pl->kind[i] = BUF_ALIAS;
			pl->index[i] = root[i];
			continue;
		default:
			if (pl->ew_into[i] >= 0 || pl->attn[i] == -2 || (pl->fused_into[i] >= 0 && pl->attn[pl->fused_into[i]] == -2) ||
			    pl->conv_pool[i] == -2 || (pl->fused_into[i] >= 0 && pl->conv_pool[pl->fused_into[i]] == -2)) {
				/* computed inline by its reader, or an attention's scores
				 * and probabilities (buffers of its tasks) */
				pl->kind[i] = BUF_NONE;
				continue;
			}
			if (pl->fused_into[i] >= 0) {
				pl->kind[i] = BUF_ALIAS;
				pl->index[i] = root[i];
				continue;
			}
			break;
		}
		if (out_of[i] >= 0) {
			pl->kind[i] = BUF_OUTPUT;
			pl->index[i] = out_of[i];
			continue;
		}
		/* in a group of concats in place (concat_in_place): its storage
		 * within the top one's, allocated at the group's first member */
		int gt = i;
		int64_t rel = 0;
		while (host[gt] >= 0) {
			rel += hoff[gt];
			gt = host[gt];
		}
		pl->kind[i] = BUF_WS;
		if (goff[gt] >= 0) {
			pl->offset[i] = goff[gt] + rel;
			continue;
		}
		Node *sx = g->nodes[gt];
		int64_t numel = max_numel ? max_numel[gt] : shape_numel(sx->rank, sx->shape);
		int64_t size = align64(numel * dtype_size(sx->dtype));
		if (size == 0)
			size = 64;
		pl->sum_live += size;
		/* first fit among free blocks, splitting is not worth it here */
		int found = -1;
		for (int b = 0; b < nblocks; b++)
			if (blocks[b].size < 0 && -blocks[b].size >= size) {
				found = b;
				break;
			}
		if (found >= 0) {
			blocks[found].size = -blocks[found].size;
			blocks[found].until = gu[gt];
			goff[gt] = blocks[found].off;
		} else {
			if (nblocks == cap) {
				cap = cap ? cap * 2 : 16;
				blocks = xrealloc(blocks, (size_t)cap * sizeof(Block));
			}
			blocks[nblocks].off = top;
			blocks[nblocks].size = size;
			blocks[nblocks].until = gu[gt];
			nblocks++;
			goff[gt] = top;
			top += size;
		}
		pl->offset[i] = goff[gt] + rel;
	}
	/* scratch after the tensors: a packed panel of a matmul's right operand
	 * (k rows of up to 64 f32 or f64 columns) and the tiles of its last, partial
	 * panel (m rows of as many columns; codegen.c) */
	int64_t panel = 0;
	for (int i = 0; i < n; i++) {
		Node *x = g->nodes[i];
		/* pool tasks pack on their own stacks */
		if (x->op != OP_MATMUL || !dtype_is_float(x->dtype) || matmul_pooled(g, x, max_numel != NULL))
			continue;
		Node *a = x->in[0];
		int64_t k = g->ngdyn ? gdyn_max_field(g, a, a->rank - 1) : max_numel ? max_numel[a->id] : a->shape[a->rank - 1];
		int64_t m = a->rank < 2 ? 1 : g->ngdyn ? gdyn_max_field(g, a, a->rank - 2) : max_numel ? max_numel[a->id] : a->shape[a->rank - 2];
		/* a batch of rows times a matrix is one product of all the rows
		 * (codegen/matmul.c), its last panel's tiles MM_PART_ROWS (192) at a time */
		if (a->rank > 2 && x->in[1]->rank == 2)
			m = 192;
		int64_t need = sat_mul(sat_mul(k + m, 64), 8);
		if (need > panel)
			panel = need;
	}
	/* a convolution's shifted copies of one image (codegen/conv.c), then
	 * 16 elements that its last tiles read beyond them */
	for (int i = 0; i < n; i++) {
		ConvGeom cg;
		if (pl->conv_pool[i] == -2 || !conv_geom(g->nodes[i], max_numel != NULL, &cg))
			continue; /* (one computed with its pooling: copies on the stack) */
		if (!wino)
			cg.welems = 0;
		if (!cg.elems && !cg.lelems && !cg.welems)
			continue;
		int64_t e = cg.elems > cg.lelems ? cg.elems : cg.lelems;
		int64_t need = sat_mul((e > cg.welems ? e : cg.welems) + 16, dtype_size(g->nodes[i]->dtype));
		if (need > panel)
			panel = need;
	}
	/* conv_transpose2d as matmuls (codegen/upsample.c): every group's
	 * weights transposed, C*Og*KH*KW, then the product of one image and
	 * group, Og*KH*KW rows of H*W */
	for (int i = 0; i < n && !max_numel; i++) {
		Node *x = g->nodes[i];
		if (x->op != OP_CONV_TRANSPOSE2D)
			continue;
		Node *w = x->in[1];
		int64_t m = w->shape[1] * w->shape[2] * w->shape[3];
		int64_t need = (w->shape[0] + x->in[0]->shape[2] * x->in[0]->shape[3]) * m * 8;
		if (need > panel)
			panel = need;
	}
	pl->scratch = top;
	/* the tensors take at most PROGRAM_MAX_BYTES (mk_node): a scratch area
	 * as large could not be allocated either, and the sum stays an int64_t */
	if (panel > PROGRAM_MAX_BYTES)
		panel = PROGRAM_MAX_BYTES;
	pl->ws_size = top + align64(panel);
	free(blocks);
	free(root);
	free(last);
	free(out_of);
	free(host);
	free(gu);
	free(hoff);
	free(goff);
	return pl;
}

Plan *plan_variant(Program *p, Graph *g, Variant *v, int wino)
{
	int64_t *mx = NULL;
	if (g->ngdyn) {
		/* run-time dims: buffers for their largest values */
		mx = gdyn_max_numel(g, g->dim_lo, g->dim_hi);
	} else if (v && v->ndyn) {
		/* a reuse_hash variant: size buffers for the largest call of its group */
		mx = xcalloc((size_t)g->nnodes + 1, sizeof(int64_t));
		for (int c = 0; c < v->calls.n; c++) {
			Graph *cg = ((CallSite *)v->calls.v[c])->call->callee;
			for (int i = 0; i < g->nnodes && i < cg->nnodes; i++) {
				int64_t ne = shape_numel(cg->nodes[i]->rank, cg->nodes[i]->shape);
				if (ne > mx[i])
					mx[i] = ne;
			}
		}
	}
	Plan *pl = plan_graph(p, g, mx, wino && (!v || v->winograd));
	free(mx);
	return pl;
}

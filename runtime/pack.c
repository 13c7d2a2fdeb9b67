/* pack.c - weights packed for compiled matrix products, once, when a model
 * instance is created.
 *
 * A matmul's right operand that is a model weight is the same matrix at every
 * run, so the panel layout the kernels read (panels of `wide` columns, each
 * k rows of `wide` contiguous elements, zeros past the last column) is made
 * ahead of time. nestc emits a pack plan per variant and for the entry points
 * (nestrt_model_desc.slot_packs, .packs): what each matmul will ask for, by
 * input or param, and which inputs are read in other ways. Creating an
 * instance follows the plan from the entry points through every call,
 * gathers the (param, k, n, wide, flags) requests and has the weights make
 * the copies (wpack.c keeps them, shared by every instance over the same
 * weights, and drops the unpacked form of a weight nothing reads unpacked).
 * Calls only look copies up: nothing is packed inside a call, so instances
 * may be called from many threads at once. A request the plan did not
 * foresee gets NULL and is packed panel by panel as the product runs.
 * NESTRT_PREPACK=0 turns this off. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct nestrt__packs {
	int n;
	struct pack {
		const void *src;
		int64_t k, n, wide;
		int flags;
		const void *data;
	} v[];
};

static int64_t param_numel(const nestrt_param *p)
{
	int64_t e = 1;
	for (int i = 0; i < p->rank; i++)
		e *= p->shape[i];
	return e;
}

const void *nestrt_packed_format(nestrt_ctx *ctx, const void *b, int64_t k, int64_t n, int64_t wide, int flags,
                                 int *format)
{
	*format = 0;
	if (!ctx || !b || k <= 0 || n <= 0 || wide <= 0)
		return NULL;
	nestrt__ctx *c = (nestrt__ctx *)ctx;
	if (c->parent)
		c = c->parent;
	const nestrt__packs *P = c->packs;
	for (int i = 0; P && i < P->n; i++) {
		const struct pack *x = &P->v[i];
		if (x->src == b && x->k == k && x->n == n && x->wide == wide &&
		    (x->flags & ((1 << NESTRT_PACK_FMT_SHIFT) - 1) & ~NESTRT_PACK_DOT) == flags) {
			*format = x->flags >> NESTRT_PACK_FMT_SHIFT;
			return x->data;
		}
	}
	return NULL;
}

/* Only plain copies: code that knows no formats asks here. */
const void *nestrt_packed(nestrt_ctx *ctx, const void *b, int64_t k, int64_t n, int64_t wide, int flags)
{
	if (!ctx || !b || k <= 0 || n <= 0 || wide <= 0)
		return NULL;
	nestrt__ctx *c = (nestrt__ctx *)ctx;
	if (c->parent)
		c = c->parent;
	const nestrt__packs *P = c->packs;
	if (!P)
		return NULL;
	for (int i = 0; i < P->n; i++) {
		const struct pack *x = &P->v[i];
		if (x->src == b && x->k == k && x->n == n && x->wide == wide && x->flags == flags)
			return x->data;
	}
	return NULL;
}

/* Does packed copy (k, n, flags) hold all of a rows x cols matrix? A
 * copy in a format holds it transposed only: each row along its blocks. */
static int holds_rows(int64_t k, int64_t n, int flags, int64_t rows, int64_t cols, int f64)
{
	if (flags & (NESTRT_PACK_WINO | NESTRT_PACK_WINO2))
		return 0;
	if (flags >> NESTRT_PACK_FMT_SHIFT && !(flags & NESTRT_PACK_TRANS))
		return 0;
	if (!!(flags & NESTRT_PACK_F64) != !!f64)
		return 0;
	return flags & NESTRT_PACK_TRANS ? n == rows && k == cols : k == rows && n == cols;
}

const void *nestrt_packed_rows_format(nestrt_ctx *ctx, const void *b, int64_t rows, int64_t cols, int flags,
                                      int64_t *layout, int *format)
{
	*format = 0;
	if (!ctx || !b || !layout || rows <= 0 || cols <= 0)
		return NULL;
	nestrt__ctx *c = (nestrt__ctx *)ctx;
	if (c->parent)
		c = c->parent;
	const nestrt__packs *P = c->packs;
	for (int i = 0; P && i < P->n; i++) {
		const struct pack *x = &P->v[i];
		if (x->src == b && holds_rows(x->k, x->n, x->flags, rows, cols, flags & NESTRT_PACK_F64)) {
			layout[0] = x->wide;
			layout[1] = x->flags & NESTRT_PACK_TRANS ? 1 : 0;
			*format = x->flags >> NESTRT_PACK_FMT_SHIFT;
			return x->data;
		}
	}
	return NULL;
}

const void *nestrt_packed_rows(nestrt_ctx *ctx, const void *b, int64_t rows, int64_t cols, int flags, int64_t *layout)
{
	int format;
	const void *pk = nestrt_packed_rows_format(ctx, b, rows, cols, flags, layout, &format);
	return format ? NULL : pk; /* code that knows no formats */
}

void nestrt__packs_free(nestrt__packs *P)
{
	free(P); /* the copies belong to the weights */
}

/* ---- following the plans ---- */

typedef struct Walk {
	const nestrt_model_desc *d;
	nestrt__packreq *req;
	int nreq, cap;
	unsigned char *direct;   /* per param: read unpacked */
	int64_t (*gath)[4];      /* gathers: param, rows, cols, f64 */
	int ngath, gcap;
	int oom;
	int bad;                 /* a formatted param asked for in a way its format is not: param + 1 */
} Walk;

/* Param p's weight format (NESTRT_FMT_*) and the axis its blocks run along. */
static int param_format(const nestrt_model_desc *d, int p, int *axis)
{
	int32_t f = d->formats ? d->formats[p] : 0;
	*axis = (f >> 8) & 0xff;
	return f & 0xff;
}

/* Are param p's q8_0 / q4_0 / q4_k copies for integer dot products (NESTRT_PACK_DOT)? */
static int param_dot(const nestrt_model_desc *d, int p)
{
	int32_t f = d->formats ? d->formats[p] : 0;
	return (f & NESTRT_FMT_DOT_BIT) &&
	       ((f & 0xff) == NESTRT_FMT_Q8_0 || (f & 0xff) == NESTRT_FMT_Q4_0 || (f & 0xff) == NESTRT_FMT_Q4_K);
}

/* Rows of param p gathered: served by a packed copy of all of it, if the
 * plans ask for one (checked once every request is known). */
static void add_gather(Walk *W, int p, const int64_t *r)
{
	if (W->ngath == W->gcap) {
		int cap = W->gcap ? 2 * W->gcap : 8;
		int64_t(*v)[4] = realloc(W->gath, (size_t)cap * sizeof *v);
		if (!v) {
			W->oom = 1;
			return;
		}
		W->gath = v;
		W->gcap = cap;
	}
	W->gath[W->ngath][0] = p;
	W->gath[W->ngath][1] = r[2];
	W->gath[W->ngath][2] = r[3];
	W->gath[W->ngath][3] = r[4] & NESTRT_PACK_F64;
	W->ngath++;
}

static void add_req(Walk *W, int p, const int64_t *r)
{
	const nestrt_param *pp = &W->d->params[p];
	int64_t k = r[2], n = r[3], wide = r[4];
	int flags = (int)r[5] & (NESTRT_PACK_TRANS | NESTRT_PACK_F64 | NESTRT_PACK_WINO | NESTRT_PACK_WINO2);
	int na = flags & NESTRT_PACK_WINO ? 36 : flags & NESTRT_PACK_WINO2 ? 16 : 0; /* Winograd's points */
	/* only as much of the param as it holds, of its element size; the
	 * transforms of all of a convolution's f32 weights */
	if (k <= 0 || n <= 0 || wide <= 0 || nestrt_dtype_size(pp->dtype) != (flags & NESTRT_PACK_F64 ? 8u : 4u) ||
	    (!na && param_numel(pp) / k < n) ||
	    (na && ((flags != NESTRT_PACK_WINO && flags != NESTRT_PACK_WINO2) || k % na || param_numel(pp) != k / na * 9 * n)))
		return;
	int axis, fmt = param_format(W->d, p, &axis);
	if (fmt) {
		/* all of it, reduced along the axis its blocks run along */
		if (flags & ~NESTRT_PACK_TRANS || param_numel(pp) != k * n || axis != !!(flags & NESTRT_PACK_TRANS) ||
		    k % nestrt_format_block(fmt)) {
			if (!W->bad)
				W->bad = p + 1;
			return;
		}
		flags |= fmt << NESTRT_PACK_FMT_SHIFT;
		if (param_dot(W->d, p))
			flags |= NESTRT_PACK_DOT;
	}
	for (int i = 0; i < W->nreq; i++) {
		nestrt__packreq *q = &W->req[i];
		if (q->param == p && q->k == k && q->n == n && q->wide == wide && q->flags == flags)
			return;
	}
	if (W->nreq == W->cap) {
		int cap = W->cap ? 2 * W->cap : 32;
		nestrt__packreq *v = realloc(W->req, (size_t)cap * sizeof *v);
		if (!v) {
			W->oom = 1;
			return;
		}
		W->req = v;
		W->cap = cap;
	}
	W->req[W->nreq++] = (nestrt__packreq){p, k, n, wide, flags, NULL};
}

/* Follow plan, whose input i is param map[i] (-1: not a param), nmap of them. */
static void walk(Walk *W, const int64_t *plan, const int *map, int nmap, int depth)
{
	if (!plan || depth > 64 || W->oom)
		return;
	int64_t nrec = plan[0];
	const int64_t *r0 = plan + 1;
	for (int64_t i = 0; i < nrec; i++) {
		const int64_t *r = r0 + 6 * i;
		int64_t src = r[1];
		int p = src < 0 ? (-src - 1 < W->d->nparams ? (int)(-src - 1) : -1) : src < nmap ? map[src] : -1;
		if (r[0] == 1 && p >= 0)
			add_req(W, p, r);
		else if (r[0] == 3 && p >= 0)
			W->direct[p] = 1;
		else if (r[0] == 4 && p >= 0)
			add_gather(W, p, r);
		else if (r[0] != 1 && r[0] != 2 && p >= 0)
			W->direct[p] = 1; /* a kind this runtime does not know: read as it is */
	}
	/* calls: each site once, with the params it passes */
	for (int64_t i = 0; i < nrec; i++) {
		const int64_t *r = r0 + 6 * i;
		if (r[0] != 2)
			continue;
		int64_t site = r[4], slot = r[2];
		int first = 1, nargs = 0;
		for (int64_t j = 0; j < nrec && first; j++)
			if (j < i && r0[6 * j] == 2 && r0[6 * j + 4] == site)
				first = 0;
		if (!first)
			continue;
		if (slot < 0 || slot >= W->d->nslots || !W->d->slot_packs || !W->d->slot_packs[slot]) {
			/* a callee without a plan may read what it gets in any way */
			for (int64_t j = i; j < nrec; j++) {
				const int64_t *q = r0 + 6 * j;
				int64_t s = q[1];
				int p = s < 0 ? (-s - 1 < W->d->nparams ? (int)(-s - 1) : -1) : s < nmap ? map[s] : -1;
				if (q[0] == 2 && q[4] == site && p >= 0)
					W->direct[p] = 1;
			}
			continue;
		}
		for (int64_t j = i; j < nrec; j++)
			if (r0[6 * j] == 2 && r0[6 * j + 4] == site && r0[6 * j + 3] >= nargs)
				nargs = (int)r0[6 * j + 3] + 1;
		if (nargs > 4096)
			continue;
		int *cmap = malloc((size_t)(nargs ? nargs : 1) * sizeof *cmap);
		if (!cmap) {
			W->oom = 1;
			return;
		}
		for (int a = 0; a < nargs; a++)
			cmap[a] = -1;
		for (int64_t j = i; j < nrec; j++) {
			const int64_t *q = r0 + 6 * j;
			if (q[0] != 2 || q[4] != site || q[3] < 0)
				continue;
			int64_t s = q[1];
			cmap[q[3]] = s < 0 ? (-s - 1 < W->d->nparams ? (int)(-s - 1) : -1) : s < nmap ? map[s] : -1;
		}
		walk(W, W->d->slot_packs[slot], cmap, nargs, depth + 1);
		free(cmap);
	}
}

int nestrt__packs_requests(const nestrt_model_desc *d, nestrt__packreq **req, int *nreq, unsigned char **direct,
                           int *bad_param)
{
	*req = NULL;
	*nreq = 0;
	*direct = NULL;
	if (!d->packs || d->nparams == 0)
		return 0;
	Walk W = {.d = d};
	W.direct = calloc((size_t)d->nparams, 1);
	if (!W.direct)
		return -1;
	walk(&W, d->packs, NULL, 0, 0);
	/* a gathered weight that no request packs whole is read as it is */
	for (int g = 0; g < W.ngath && !W.oom; g++) {
		int p = (int)W.gath[g][0], served = 0, axis;
		for (int i = 0; i < W.nreq && !served; i++)
			served = W.req[i].param == p &&
			         holds_rows(W.req[i].k, W.req[i].n, W.req[i].flags, W.gath[g][1], W.gath[g][2], (int)W.gath[g][3]);
		if (!served && param_format(d, p, &axis) && !W.gath[g][3]) {
			/* a formatted table only gathered from: its rows, each along its blocks */
			int64_t r[6] = {1, 0, W.gath[g][2], W.gath[g][1], 1, NESTRT_PACK_TRANS};
			add_req(&W, p, r);
		} else if (!served) {
			W.direct[p] = 1;
		}
	}
	free(W.gath);
	if (W.bad && !W.oom) {
		/* the plans read a formatted weight in a way no copy of it can
		 * serve: a compiler bug, said so */
		*bad_param = W.bad - 1;
		free(W.req);
		free(W.direct);
		return -2;
	}
	/* a formatted weight read as it is: the code would read f32 elements
	 * the build means to hold in a format (a compiler bug, said so) */
	for (int p = 0; p < d->nparams && !W.oom; p++) {
		int axis;
		if (W.direct[p] && param_format(d, p, &axis)) {
			*bad_param = p;
			free(W.req);
			free(W.direct);
			return -2;
		}
	}
	if (W.oom) {
		free(W.req);
		free(W.direct);
		return -1;
	}
	*req = W.req;
	*nreq = W.nreq;
	*direct = W.direct;
	return 0;
}

int nestrt__packs_make(const nestrt_model_desc *d, nestrt_ctx *ctx, nestrt_weights *w, nestrt_error *err)
{
	nestrt__ctx *c = (nestrt__ctx *)ctx;
	const char *e = getenv("NESTRT_PREPACK");
	/* weights in a format exist only packed: NESTRT_PREPACK=0 does not apply */
	if ((e && strcmp(e, "0") == 0 && !d->formats) || !d->packs || d->nparams == 0 || !w)
		return nestrt__weights_unpacked(w, ctx->params, d->nparams, err); /* read as they are */
	nestrt__packreq *req;
	unsigned char *direct;
	int nreq, rc = 0;
	int bad = -1, got = nestrt__packs_requests(d, &req, &nreq, &direct, &bad);
	if (got == -2) {
		int axis, fmt = param_format(d, bad, &axis);
		return nestrt__seterr(err, "%s: param '%s' is held in %s, but the compiled code reads it in a way %s cannot "
		                      "serve (a nestc bug; build it with --weights-format='%s=f32')",
		                      d->name, d->params[bad].name, nestrt_format_name(fmt), nestrt_format_name(fmt),
		                      d->params[bad].name);
	}
	if (got < 0)
		return nestrt__seterr(err, "%s: out of memory", d->name);
	if (nreq == 0)
		goto done;
	/* the weights make (or find) every copy */
	if (nestrt__weights_pack(w, ctx->params, req, nreq, direct, d->nparams, err) < 0) {
		rc = -1;
		goto done;
	}
	nestrt__packs *P = malloc(sizeof *P + (size_t)nreq * sizeof P->v[0]);
	if (!P) {
		rc = nestrt__seterr(err, "%s: out of memory", d->name);
		goto done;
	}
	P->n = nreq;
	for (int i = 0; i < nreq; i++) {
		nestrt__packreq *q = &req[i];
		P->v[i] = (struct pack){ctx->params[q->param], q->k, q->n, q->wide, q->flags, q->data};
	}
	c->packs = P;
done:
	free(req);
	free(direct);
	return rc;
}

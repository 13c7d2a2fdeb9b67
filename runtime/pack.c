/* pack.c - weights packed once for compiled matrix products.
 *
 * A matmul's right operand that is a model weight is the same matrix at every
 * run, so the panel layout the kernels read (panels of `wide` columns, each
 * k rows of `wide` contiguous elements, zeros past the last column) is made
 * on first use and kept with the context. Compiled code asks with the pointer
 * it was given; anything that is not the start of one of the context's bound
 * params (an activation, a slice) gets NULL and is packed panel by panel as
 * the product runs. NESTRT_PREPACK=0 turns this off (the copy costs as much
 * memory again as the weights it packs). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct nestrt__packs {
	int n, cap;
	int off;               /* NESTRT_PREPACK=0 */
	struct pack {
		const void *src;
		int64_t k, n, wide;
		int flags;
		void *data;        /* NULL: packing failed (no memory); do not try again */
	} *v;
};

static int64_t param_numel(const nestrt_param *p)
{
	int64_t e = 1;
	for (int i = 0; i < p->rank; i++)
		e *= p->shape[i];
	return e;
}

static void *pack(const void *src, int64_t k, int64_t n, int64_t wide, int flags)
{
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	int64_t panels = (n + wide - 1) / wide;
	if (k <= 0 || panels <= 0 || (uint64_t)panels > SIZE_MAX / es / (uint64_t)k / (uint64_t)wide)
		return NULL;
	size_t bytes = (size_t)panels * (size_t)k * (size_t)wide * es;
	bytes = (bytes + 63) / 64 * 64;
	char *dst = aligned_alloc(64, bytes);
	if (!dst)
		return NULL;
	const char *s = src;
	for (int64_t p = 0; p < panels; p++) {
		char *panel = dst + (size_t)(p * k * wide) * es;
		int64_t cols = n - p * wide < wide ? n - p * wide : wide;
		if (cols < wide)
			for (int64_t i = 0; i < k; i++)
				memset(panel + (size_t)(i * wide + cols) * es, 0, (size_t)(wide - cols) * es);
		if (flags & NESTRT_PACK_TRANS) {
			/* Bt[n, k]: row c of Bt is column c of the panel */
			for (int64_t c = 0; c < cols; c++) {
				const char *row = s + (size_t)((p * wide + c) * k) * es;
				for (int64_t i = 0; i < k; i++)
					memcpy(panel + (size_t)(i * wide + c) * es, row + (size_t)i * es, es);
			}
		} else {
			for (int64_t i = 0; i < k; i++)
				memcpy(panel + (size_t)(i * wide) * es, s + (size_t)(i * n + p * wide) * es, (size_t)cols * es);
		}
	}
	return dst;
}

const void *nestrt_packed(nestrt_ctx *ctx, const void *b, int64_t k, int64_t n, int64_t wide, int flags)
{
	if (!ctx || !b || k <= 0 || n <= 0 || wide <= 0)
		return NULL;
	nestrt__ctx *c = (nestrt__ctx *)ctx;
	nestrt__packs **pp = &c->packs;
	if (!*pp) {
		*pp = calloc(1, sizeof **pp);
		if (!*pp)
			return NULL;
		const char *e = getenv("NESTRT_PREPACK");
		(*pp)->off = e && strcmp(e, "0") == 0;
	}
	nestrt__packs *P = *pp;
	if (P->off)
		return NULL;
	for (int i = 0; i < P->n; i++) {
		struct pack *x = &P->v[i];
		if (x->src == b && x->k == k && x->n == n && x->wide == wide && x->flags == flags)
			return x->data;
	}
	/* only the start of a bound param, and only as much of it as it holds */
	int nparams = c->nptab;
	const nestrt_param *params = c->ptab;
	int found = 0;
	for (int i = 0; i < nparams && !found; i++)
		found = ctx->params[i] == b && nestrt_dtype_size(params[i].dtype) == (flags & NESTRT_PACK_F64 ? 8u : 4u) &&
		        param_numel(&params[i]) / k >= n;
	if (!found)
		return NULL;
	if (P->n == P->cap) {
		int cap = P->cap ? 2 * P->cap : 16;
		struct pack *v = realloc(P->v, (size_t)cap * sizeof *v);
		if (!v)
			return NULL;
		P->v = v;
		P->cap = cap;
	}
	struct pack *x = &P->v[P->n++];
	*x = (struct pack){b, k, n, wide, flags, pack(b, k, n, wide, flags)};
	return x->data;
}

void nestrt__packs_free(nestrt__packs *P)
{
	if (!P)
		return;
	for (int i = 0; i < P->n; i++)
		free(P->v[i].data);
	free(P->v);
	free(P);
}

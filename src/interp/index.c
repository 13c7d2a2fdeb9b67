/* interp/index.c - the interpreter's indexing and scan kernels, with PyTorch
 * and NumPy semantics: take_along_axis (numpy.take_along_axis, torch.gather;
 * an index out of range is a run-time error), topk (torch.topk: the k largest
 * or smallest positions along an axis, ties to the lower position, NaN above
 * every number) and cumsum (a running sum in the input's dtype).
 */
#include "interp.h"

#include <stdio.h>

/* Row-major strides of t, with 0 on the axes where t has size 1 and the
 * result does not (NumPy broadcasting at equal rank). */
static void bcast_strides(const Tensor *t, const Node *n, int64_t *st)
{
	int64_t s = 1;
	for (int d = t->rank - 1; d >= 0; d--) {
		st[d] = t->shape[d] == 1 && n->shape[d] != 1 ? 0 : s;
		s *= t->shape[d];
	}
}

Tensor *op_take_along(Frame *fr, Node *n, Tensor *x, Tensor *idx)
{
	need_storage(n, x);
	int R = n->rank, ax = (int)n->a[0];
	if (idx->f || x->rank != R || idx->rank != R || ax < 0 || ax >= R || idx->shape[ax] != n->shape[ax])
		ice("interp: take_along_axis %%%d: shapes", n->id);
	int64_t len = x->shape[ax];
	/* every index is checked before anything is computed */
	for (int64_t k = 0; k < idx->n; k++) {
		int64_t v = idx->i[k];
		if (v < 0 || v >= len) {
			char msg[160];
			snprintf(msg, sizeof msg, "take_along_axis index %lld out of range [0, %lld) on axis %d",
			         (long long)v, (long long)len, ax);
			runtime_error(fr->c->p, n->loc, msg);
			return NULL;
		}
	}
	int64_t xs[MAX_RANK], xst[MAX_RANK], ist[MAX_RANK], s = 1;
	bcast_strides(x, n, xst);
	bcast_strides(idx, n, ist);
	for (int d = R - 1; d >= 0; d--) {
		xs[d] = s;
		s *= x->shape[d];
	}
	xst[ax] = 0; /* the axis position comes from the index */
	Tensor *o = new_out(n);
	int64_t at[MAX_RANK] = {0};
	for (int64_t k = 0; k < o->n; k++) {
		int64_t xo = 0, io = 0;
		for (int d = 0; d < R; d++) {
			xo += at[d] * xst[d];
			io += at[d] * ist[d];
		}
		xo += idx->i[io] * xs[ax];
		if (o->f)
			o->f[k] = x->f[xo];
		else
			o->i[k] = x->i[xo];
		for (int d = R - 1; d >= 0 && ++at[d] == n->shape[d]; d--)
			at[d] = 0;
	}
	return o;
}

/* Does a come before b? Strictly: equal values keep their order. */
static int before_f(double a, double b, int largest)
{
	if (largest)
		return a > b || (isnan(a) && !isnan(b));
	return a < b || (isnan(b) && !isnan(a));
}

/* Does element u of a row of x (elements base + j * inner) come before element w? */
static int before(const Tensor *x, int64_t base, int64_t inner, int64_t u, int64_t w, int largest)
{
	if (x->f)
		return before_f(x->f[base + u * inner], x->f[base + w * inner], largest);
	int64_t a = x->i[base + u * inner], b = x->i[base + w * inner];
	return largest ? a > b : a < b;
}

Tensor *op_topk(Node *n, Tensor *x)
{
	int ax = (int)n->a[0], largest = n->op == OP_TOPK;
	int64_t outer, len, inner;
	axis_split(x, ax, &outer, &len, &inner);
	int64_t k = n->shape[ax];
	Tensor *o = new_out(n);
	if (o->f || x->rank != n->rank || k > len || o->n != outer * k * inner)
		ice("interp: topk %%%d: shapes", n->id);
	for (int64_t a = 0; a < outer; a++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = a * len * inner + i;
			int64_t *out = o->i + a * k * inner + i; /* out[p * inner]: position p */
			/* insertion into the k best so far, scanning in order: a later
			 * equal value never passes an earlier one */
			for (int64_t j = 0; j < len && k > 0; j++) {
				int64_t p = j < k ? j : k - 1;
				if (j >= k && !before(x, base, inner, j, out[p * inner], largest))
					continue;
				for (; p > 0 && before(x, base, inner, j, out[(p - 1) * inner], largest); p--)
					out[p * inner] = out[(p - 1) * inner];
				out[p * inner] = j;
			}
		}
	return o;
}

Tensor *op_cumsum(Node *n, Tensor *x)
{
	int ax = (int)n->a[0];
	int64_t outer, len, inner;
	axis_split(x, ax, &outer, &len, &inner);
	need_shape(x, n, "cumsum");
	Tensor *o = new_out(n);
	if ((o->f != NULL) != (x->f != NULL))
		ice("interp: cumsum %%%d: dtype", n->id);
	for (int64_t a = 0; a < outer; a++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = a * len * inner + i;
			double fs = 0;
			int64_t is = 0;
			/* one rounding (or wrap) per step, as a sequential sum in the dtype */
			for (int64_t j = 0; j < len; j++) {
				int64_t off = base + j * inner;
				if (o->f) {
					fs += x->f[off];
					if (n->dtype == DT_F32)
						fs = (double)(float)fs;
					o->f[off] = fs;
				} else {
					is = wadd(is, x->i[off]);
					if (n->dtype == DT_I32)
						is = wrap32(is);
					o->i[off] = is;
				}
			}
		}
	return o;
}

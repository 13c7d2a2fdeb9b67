/* interp/movement.c - the interpreter's data movement and creation kernels:
 * reshape, transpose, concat, slice, gather (the one kernel with a run-time
 * error: an index out of range), the causal mask, fill and arange.
 */
#include "interp.h"

#include <stdio.h>
#include <string.h>

Tensor *op_reshape(Frame *fr, Node *n, Tensor *x)
{
	need_storage(n, x);
	if (numel_of(n->rank, n->shape) != x->n)
		ice("interp: reshape %%%d changes the element count", n->id);
	Node *m = n->in[0];
	Val *v = &fr->val[m->id];
	if (v->t == x && !v->borrowed && fr->last[m->id] == n->id) {
		/* last use: keep the data, change the shape */
		v->t = NULL;
		x->dtype = n->dtype;
		x->rank = n->rank;
		memcpy(x->shape, n->shape, sizeof x->shape);
		return x;
	}
	Tensor *o = new_out(n);
	copy_elems(o, 0, x, 0, x->n);
	return o;
}

/* Fills o (node n's shape) row by row along its last axis from x: the row at
 * index idx of o's other axes starts at base + sum of idx[d] * st[d] in x. */
static void copy_rows(const Node *n, Tensor *o, const Tensor *x, int64_t base, const int64_t *st)
{
	int R = n->rank;
	int64_t inner = R ? n->shape[R - 1] : 1, rows = inner ? o->n / inner : 0;
	int64_t idx[MAX_RANK] = {0};
	for (int64_t r = 0; r < rows; r++) {
		copy_elems(o, r * inner, x, base, inner);
		base = index_next(idx, base, st, n->shape, R - 1);
	}
}

Tensor *op_transpose(Node *n, Tensor *x)
{
	need_storage(n, x);
	int R = n->rank;
	if (x->rank != R)
		ice("interp: transpose %%%d rank", n->id);
	int64_t xs[MAX_RANK], st[MAX_RANK], s = 1;
	int seen = 0;
	for (int d = R - 1; d >= 0; d--) {
		xs[d] = s;
		s *= x->shape[d];
	}
	for (int d = 0; d < R; d++) {
		int64_t p = n->a[d];
		if (p < 0 || p >= R || (seen >> p & 1) || x->shape[p] != n->shape[d])
			ice("interp: transpose %%%d: bad perm", n->id);
		seen |= 1 << p;
		st[d] = xs[p];
	}
	Tensor *o = new_out(n);
	if (o->n == 0)
		return o;
	/* Rank-2 view with the inner output axis split off, walked in 32 x 32 tiles so
	 * both the reads (strided) and the writes stay within cache. */
	if (R >= 2 && st[R - 1] != 1) {
		int64_t rows = n->shape[R - 2], cols = n->shape[R - 1];
		int64_t rs = st[R - 2], cs = st[R - 1];
		int64_t nb = o->n / (rows * cols), idx[MAX_RANK] = {0}, base = 0;
		for (int64_t bi = 0; bi < nb; bi++) {
			int64_t ob = bi * rows * cols;
			for (int64_t r0 = 0; r0 < rows; r0 += 32)
				for (int64_t c0 = 0; c0 < cols; c0 += 32) {
					int64_t r1 = r0 + 32 < rows ? r0 + 32 : rows;
					int64_t c1 = c0 + 32 < cols ? c0 + 32 : cols;
					for (int64_t r = r0; r < r1; r++)
						for (int64_t c = c0; c < c1; c++) {
							int64_t xo = base + r * rs + c * cs;
							if (o->f)
								o->f[ob + r * cols + c] = x->f[xo];
							else
								o->i[ob + r * cols + c] = x->i[xo];
						}
				}
			base = index_next(idx, base, st, n->shape, R - 2);
		}
		return o;
	}
	/* inner axis unmoved: copy contiguous rows */
	copy_rows(n, o, x, 0, st);
	return o;
}

Tensor *op_concat(Node *n, Tensor **in)
{
	int R = n->rank;
	int64_t ax = n->a[0];
	if (ax < 0 || ax >= R || n->nin < 1)
		ice("interp: concat %%%d axis %lld", n->id, (long long)ax);
	int64_t total = 0;
	for (int k = 0; k < n->nin; k++) {
		Tensor *x = in[k];
		need_storage(n, x);
		if (x->rank != R)
			ice("interp: concat %%%d: rank", n->id);
		for (int d = 0; d < R; d++)
			if (d != ax && x->shape[d] != n->shape[d])
				ice("interp: concat %%%d: dim %d", n->id, d);
		total += x->shape[ax];
	}
	if (total != n->shape[ax])
		ice("interp: concat %%%d: axis size", n->id);
	Tensor *o = new_out(n);
	int64_t outer = 1, inner = 1;
	for (int d = 0; d < ax; d++)
		outer *= n->shape[d];
	for (int d = (int)ax + 1; d < R; d++)
		inner *= n->shape[d];
	int64_t orow = n->shape[ax] * inner, at = 0;
	for (int k = 0; k < n->nin; k++) {
		int64_t chunk = in[k]->shape[ax] * inner;
		for (int64_t a = 0; a < outer; a++)
			copy_elems(o, a * orow + at, in[k], a * chunk, chunk);
		at += chunk;
	}
	return o;
}

Tensor *op_slice(Node *n, Tensor *x)
{
	need_storage(n, x);
	int R = n->rank;
	if (x->rank != R)
		ice("interp: slice %%%d: rank", n->id);
	int64_t xs[MAX_RANK], s = 1, base = 0;
	for (int d = R - 1; d >= 0; d--) {
		if (n->a[d] < 0 || n->shape[d] > x->shape[d] - n->a[d])
			ice("interp: slice %%%d: axis %d out of bounds", n->id, d);
		xs[d] = s;
		base += n->a[d] * s;
		s *= x->shape[d];
	}
	Tensor *o = new_out(n);
	copy_rows(n, o, x, base, xs);
	return o;
}

Tensor *op_gather(Frame *fr, Node *n, Tensor *tab, Tensor *idx)
{
	need_storage(n, tab);
	if (idx->f || tab->rank < 1 || n->rank != idx->rank + tab->rank - 1 ||
	    memcmp(n->shape, idx->shape, (size_t)idx->rank * sizeof(int64_t)) ||
	    memcmp(n->shape + idx->rank, tab->shape + 1, (size_t)(tab->rank - 1) * sizeof(int64_t)))
		ice("interp: gather %%%d: shapes", n->id);
	int64_t rows = tab->shape[0], inner = 1;
	for (int d = 1; d < tab->rank; d++)
		inner *= tab->shape[d];
	for (int64_t k = 0; k < idx->n; k++) {
		int64_t v = idx->i[k];
		if (v < 0 || v >= rows) {
			char msg[128];
			snprintf(msg, sizeof msg, "gather index %lld out of range [0, %lld)",
			         (long long)v, (long long)rows);
			runtime_error(fr->c->p, n->loc, msg);
			return NULL;
		}
	}
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < idx->n; k++)
		copy_elems(o, k * inner, tab, idx->i[k] * inner, inner);
	return o;
}

Tensor *op_causal_mask(Frame *fr, Node *n, Tensor *x)
{
	need_float(n, x);
	need_shape(x, n, "causal_mask");
	if (x->rank < 2)
		ice("interp: causal_mask %%%d of rank %d", n->id, x->rank);
	Tensor *o = take_input(fr, n, 0);
	if (!o) {
		o = new_out(n);
		copy_elems(o, 0, x, 0, x->n);
	}
	int64_t T1 = x->shape[x->rank - 2], T2 = x->shape[x->rank - 1];
	int64_t nb = T1 && T2 ? x->n / (T1 * T2) : 0;
	for (int64_t b = 0; b < nb; b++)
		for (int64_t i = 0; i < T1; i++)
			for (int64_t j = i + 1 + n->a[0] < 0 ? 0 : i + 1 + n->a[0]; j < T2; j++)
				o->f[(b * T1 + i) * T2 + j] = -INFINITY;
	return o;
}

/* ------------------------------------------------------------------ creation */

Tensor *op_fill(Node *n)
{
	if (n->op == OP_CONST && n->rank != 0)
		ice("interp: const %%%d of rank %d", n->id, n->rank);
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < o->n; k++) {
		if (o->f)
			o->f[k] = n->fval;
		else
			o->i[k] = n->ival;
	}
	fix_dtype(o);
	return o;
}

Tensor *op_arange(Node *n)
{
	if (n->rank != 1)
		ice("interp: arange %%%d of rank %d", n->id, n->rank);
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < o->n; k++) {
		if (o->f)
			o->f[k] = i2f(k, n->dtype);
		else
			o->i[k] = k;
	}
	fix_dtype(o);
	return o;
}

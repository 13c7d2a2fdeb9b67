/* ops_index.c - ops that index by computed positions or are made at
 * import from shapes alone: GatherND, OneHot, EyeLike and Size. */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

/* Size: the number of elements, known at import. */
int tr_size(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	Val *o = def_known(c, io, 0, DT_I64, 0, NULL);
	if (!o)
		return -1;
	kseti(o, 0, a->n);
	return 0;
}

/* EyeLike: ones on diagonal k, known at import. */
int tr_eye_like(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (a->rank != 2)
		return node_err(c, 0, "input of rank %d, expected 2", a->rank), -1;
	DType dt = a->dt;
	if (attr(io->n, "dtype")) {
		int d = onnx_nest_dtype((int)attr_i(io->n, "dtype", 1));
		if (d < 0)
			return node_err(c, 1, "dtype %s is not supported", onnx_dtype_name((int)attr_i(io->n, "dtype", 1))), -1;
		dt = (DType)d;
	}
	int64_t k = attr_i(io->n, "k", 0);
	Val *o = def_known(c, io, 0, dt, 2, a->shape);
	if (!o)
		return -1;
	for (int64_t i = 0; i < a->shape[0]; i++)
		for (int64_t j = 0; j < a->shape[1]; j++) {
			if (dtype_is_float(dt))
				kset(o, i * a->shape[1] + j, j - i == k);
			else
				kseti(o, i * a->shape[1] + j, j - i == k);
		}
	return 0;
}

/* GatherND: data's first batch_dims + k axes made one, then rows gathered by
 * the linear index of each index tuple (negative entries wrapped, plus the
 * batch position's offset, a constant). */
int tr_gather_nd(Ctx *c, NodeIO *io)
{
	Val *d, *ix;
	if (inputs(c, io, "data and indices", 2, &d, &ix) < 0)
		return -1;
	if (ix->dt != DT_I64 && ix->dt != DT_I32)
		return node_err(c, 0, "indices of %s, expected int64", dtype_name(ix->dt)), -1;
	int64_t b = attr_i(io->n, "batch_dims", 0);
	int q = ix->rank;
	int64_t k = q ? ix->shape[q - 1] : 0;
	if (q < 1 || b < 0 || b >= q || b + k > d->rank || k < 1)
		return node_err(c, 0, "indices [.., %lld] with batch_dims %lld for data of rank %d", (long long)k,
		                (long long)b, d->rank), -1;
	if (q - 1 + d->rank - b - k > MAX_RANK)
		return node_err(c, 1, "the output's rank would pass %d", MAX_RANK), -1;
	for (int j = 0; j < b; j++)
		if (ix->shape[j] != d->shape[j])
			return node_err(c, 0, "batch axis %d: %lld indices for %lld", j, (long long)ix->shape[j],
			                (long long)d->shape[j]), -1;
	/* strides of data's first b + k axes */
	int64_t str[MAX_RANK], P = 1;
	for (int j = (int)(b + k) - 1; j >= 0; j--) {
		str[j] = P;
		P *= d->shape[j];
	}
	int64_t fsh[MAX_RANK], osh[MAX_RANK];
	int fr = 0, orank = 0;
	fsh[fr++] = P;
	for (int j = (int)(b + k); j < d->rank; j++)
		fsh[fr++] = d->shape[j];
	for (int j = 0; j < q - 1; j++)
		osh[orank++] = ix->shape[j];
	for (int j = (int)(b + k); j < d->rank; j++)
		osh[orank++] = d->shape[j];
	if (check_shape(c, orank, osh) < 0)
		return -1;
	Val *kd = axis_const(c, out_name(io, 0), "dims", 0, DT_I64, 1, 0, k);
	Val *ks = axis_const(c, out_name(io, 0), "strides", 0, DT_I64, 1, 0, k);
	for (int i = 0; i < k; i++)
		kseti(kd, i, d->shape[b + i]), kseti(ks, i, str[b + i]);
	char *fl = list_text(fr, fsh), *xi = xstrdup(ref(c, ix)), *dl = xstrdup(ref(c, kd));
	char *wi = tmp(c, "where(i64(%s) < 0, i64(%s) + %s, i64(%s))", xi, xi, dl, xi);
	/* a tuple with an entry out of its axis reads row P, which the gather
	 * reports as out of range (the linear index alone might land inside) */
	char *lin = tmp(c, "where(amax(i64((%s < 0) || (%s >= %s)), axis=-1) > 0, %lld, sum(%s * %s, axis=-1))", wi, wi, dl,
	                (long long)P, wi, ref(c, ks));
	free(wi);
	free(xi);
	free(dl);
	if (b > 0) {
		/* the batch positions' offsets: shape indices[:b] then 1s */
		int64_t bsh[MAX_RANK];
		for (int j = 0; j < q - 1; j++)
			bsh[j] = j < b ? ix->shape[j] : 1;
		char *base = xasprintf("%s::batch_offset", out_name(io, 0)), *nm = fresh_name(c, base);
		Val *ov = new_val(c, nm, DT_I64, q - 1, bsh);
		free(base);
		free(nm);
		val_alloc(ov);
		int64_t pos[MAX_RANK];
		for (int64_t e = 0; e < ov->n; e++) {
			unravel(e, q - 1, bsh, pos);
			int64_t off = 0;
			for (int j = 0; j < b; j++)
				off += pos[j] * str[j];
			kseti(ov, e, off);
		}
		char *t = tmp(c, "%s + %s", lin, ref(c, ov));
		free(lin);
		lin = t;
	}
	Val *o = def(c, io, 0, d->dt, orank, osh, "reshape(%s, %s)[%s]", ref(c, d), fl, lin);
	free(fl);
	free(lin);
	return o ? 0 : -1;
}

/* OneHot: on where the (wrapped) index equals the position along the new
 * axis, off elsewhere. */
int tr_one_hot(Ctx *c, NodeIO *io)
{
	Val *ix, *dv, *vv;
	if (inputs(c, io, "indices, depth and values", 3, &ix, &dv, &vv) < 0 || need_known(c, dv, "depth") < 0)
		return -1;
	if (dv->n != 1 || vv->n != 2 || ix->dt == DT_BOOL)
		return node_err(c, 0, "depth must be one number, values [off, on], indices numbers"), -1;
	double dep = kget(dv, 0);
	if (!(dep >= 1 && dep <= (double)(1 << 30)))
		return node_err(c, 0, "depth %g", dep), -1;
	int64_t depth = (int64_t)dep;
	if (ix->rank >= MAX_RANK)
		return node_err(c, 1, "indices of rank %d: the output's rank would pass %d", ix->rank, MAX_RANK), -1;
	int r = ix->rank + 1;
	int ax = oaxis(c, attr_i(io->n, "axis", -1), r);
	if (ax < 0)
		return -1;
	int64_t sh[MAX_RANK], ash[MAX_RANK];
	for (int j = 0, m = 0; j < r; j++) {
		sh[j] = j == ax ? depth : ix->shape[m++];
		ash[j] = j == ax ? depth : 1;
	}
	if (check_shape(c, r, sh) < 0)
		return -1;
	const char *xi = ref(c, ix);
	char *w = tmp(c, "where(i64(%s) < 0, i64(%s) + %lld, i64(%s))", xi, xi, (long long)depth, xi);
	char *al = list_text(r, ash), *vs = xstrdup(ref(c, vv));
	Val *o = def(c, io, 0, vv->dt, r, sh, "where(unsqueeze(%s, %d) == reshape(arange(%lld), %s), %s[1], %s[0])", w, ax,
	             (long long)depth, al, vs, vs);
	free(w);
	free(al);
	free(vs);
	return o ? 0 : -1;
}

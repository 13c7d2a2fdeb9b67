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

/* ScatterElements (and Scatter, its older name) and ScatterND with indices
 * known at import: every (data position, update position) pair is worked
 * out here. Each data position's k-th update (in the order the op lists
 * them) is gathered from the updates, flattened with one more element at
 * the end, by a constant of the positions (that element where a position
 * has no k-th update), and the k layers are combined with data: the last
 * one taken (reduction none: later updates overwrite), or added,
 * multiplied, or the maximum or minimum taken. */
int tr_scatter(Ctx *c, NodeIO *io)
{
	Val *d, *ix, *u;
	if (inputs(c, io, "data, indices and updates", 3, &d, &ix, &u) < 0 || need_known(c, ix, "indices") < 0)
		return -1;
	int nd = !strcmp(io->n->op_type, "ScatterND");
	char *red = attr_s(io->n, "reduction");
	int rk = !red || !strcmp(red, "none") ? 0 : !strcmp(red, "add") ? 1 : !strcmp(red, "mul") ? 2 :
	         !strcmp(red, "max") ? 3 : !strcmp(red, "min") ? 4 : -1;
	if (rk < 0)
		node_err(c, 1, "reduction '%.20s' is not supported", red);
	free(red);
	if (rk < 0)
		return -1;
	if (u->dt != d->dt || ix->dt == DT_BOOL || dtype_is_float(ix->dt))
		return node_err(c, 0, "updates must have data's dtype and indices be integers"), -1;
	int64_t Q = d->n, U = u->n;
	int64_t *dst = xcalloc((size_t)(U ? U : 1), sizeof *dst); /* the data position of update e */
	int64_t dstr[MAX_RANK], s = 1;
	for (int k = d->rank - 1; k >= 0; k--)
		dstr[k] = s, s *= d->shape[k];
	int rc = 0;
	if (!nd) {
		int ax = oaxis(c, attr_i(io->n, "axis", 0), d->rank);
		if (ax < 0 || ix->rank != d->rank || u->rank != d->rank)
			rc = ax < 0 ? -1 : (node_err(c, 0, "data, indices and updates must have one rank"), -1);
		for (int k = 0; !rc && k < d->rank; k++)
			if (ix->shape[k] != u->shape[k] || (k != ax && ix->shape[k] > d->shape[k]))
				rc = (node_err(c, 0, "indices and updates must have one shape, within data's off the axis"), -1);
		int64_t pos[MAX_RANK];
		for (int64_t e = 0; !rc && e < U; e++) {
			unravel(e, ix->rank, ix->shape, pos);
			int64_t i = kgeti(ix, e), n = d->shape[ax];
			if (i < -n || i >= n)
				rc = (node_err(c, 0, "index %lld out of range for an axis of %lld", (long long)i, (long long)n), -1);
			pos[ax] = i < 0 ? i + n : i;
			dst[e] = 0;
			for (int k = 0; k < d->rank; k++)
				dst[e] += pos[k] * dstr[k];
		}
	} else {
		int q = ix->rank;
		int64_t k = q ? ix->shape[q - 1] : 0, S = 1;
		if (q < 1 || k < 1 || k > d->rank || u->rank != q - 1 + d->rank - k)
			rc = (node_err(c, 0, "indices [.., %lld] and updates of rank %d for data of rank %d", (long long)k, u->rank,
			               d->rank), -1);
		for (int j = 0; !rc && j < u->rank; j++)
			if (u->shape[j] != (j < q - 1 ? ix->shape[j] : d->shape[k + j - (q - 1)]))
				rc = (node_err(c, 0, "updates' shape does not match indices and data"), -1);
		for (int j = (int)k; !rc && j < d->rank; j++)
			S *= d->shape[j];
		int64_t T = k ? ix->n / k : 0;
		for (int64_t t = 0; !rc && t < T; t++) {
			int64_t base = 0;
			for (int j = 0; j < k; j++) {
				int64_t i = kgeti(ix, t * k + j), n = d->shape[j];
				if (i < -n || i >= n)
					rc = (node_err(c, 0, "index %lld out of range for an axis of %lld", (long long)i, (long long)n), -1);
				base += (i < 0 ? i + n : i) * dstr[j];
			}
			for (int64_t e = 0; e < S; e++)
				dst[t * S + e] = base + e;
		}
	}
	/* layer l: per data position, its l-th update (or U: none) */
	int64_t *cnt = rc ? NULL : xcalloc((size_t)(Q ? Q : 1), sizeof *cnt), L = 0;
	for (int64_t e = 0; !rc && e < U; e++)
		if (++cnt[dst[e]] > L)
			L = cnt[dst[e]];
	if (!rc && rk == 0 && L > 1)
		L = 1; /* none: only the last update of a position counts */
	Val **lay = rc ? NULL : xcalloc((size_t)(L ? L : 1), sizeof *lay);
	for (int64_t l = 0; !rc && l < L; l++) {
		lay[l] = axis_const(c, out_name(io, 0), "scatter", (int)l, DT_I64, 1, 0, Q);
		for (int64_t q = 0; q < Q; q++)
			kseti(lay[l], q, U);
	}
	if (!rc) {
		memset(cnt, 0, (size_t)(Q ? Q : 1) * sizeof *cnt);
		for (int64_t e = 0; e < U; e++) {
			int64_t l = rk == 0 ? 0 : cnt[dst[e]]++;
			kseti(lay[l], dst[e], e);
		}
	}
	if (!rc) {
		const char *dtn = dtype_name(d->dt);
		static const char *const fill[] = {"0", "0", "1", NULL, NULL};
		char *dl = list_text(1, &Q), *sl = list_text(d->rank, d->shape);
		char *df = tmp(c, "reshape(%s, %s)", ref(c, d), dl);
		char *uf = rk >= 3 ? NULL
		                   : tmp(c, "concat([reshape(%s, [%lld]), %s(zeros([1])) + %s(%s)], axis=0)", ref(c, u),
		                         (long long)U, dtn, dtn, fill[rk]);
		char *cur = xstrdup(df);
		for (int64_t l = 0; l < L; l++) {
			const char *lv = ref(c, lay[l]);
			char *t;
			if (rk == 0)
				t = tmp(c, "where(%s == %lld, %s, %s[%s])", lv, (long long)U, cur, uf, lv);
			else if (rk == 1)
				t = tmp(c, "%s + %s[%s]", cur, uf, lv);
			else if (rk == 2)
				t = tmp(c, "%s * %s[%s]", cur, uf, lv);
			else {
				/* max and min: positions without an l-th update keep cur */
				char *ug = tmp(c, "reshape(%s, [%lld])[where(%s == %lld, 0, %s)]", ref(c, u), (long long)U, lv,
				               (long long)U, lv);
				t = tmp(c, "where(%s == %lld, %s, %s(%s, %s))", lv, (long long)U, cur, rk == 3 ? "maximum" : "minimum",
				        cur, ug);
				free(ug);
			}
			free(cur);
			cur = t;
		}
		rc = def(c, io, 0, d->dt, d->rank, d->shape, "reshape(%s, %s)", cur, sl) ? 0 : -1;
		free(cur);
		free(df);
		free(uf);
		free(dl);
		free(sl);
	}
	free(dst);
	free(cnt);
	free(lay);
	return rc;
}

/* ReverseSequence: along the time axis, the first sequence_lens[b]
 * positions of batch entry b reversed, the rest as they are: a gather
 * along the time axis at where(t < len, len - 1 - t, t), computed at run
 * time from the lengths (a length outside [0, T] is clamped to it). */
int tr_reverse_sequence(Ctx *c, NodeIO *io)
{
	Val *a, *ln;
	if (inputs(c, io, "input and sequence_lens", 2, &a, &ln) < 0)
		return -1;
	int ta = (int)attr_i(io->n, "time_axis", 0), ba = (int)attr_i(io->n, "batch_axis", 1);
	if (a->rank < 2 || (ta != 0 && ta != 1) || (ba != 0 && ba != 1) || ta == ba)
		return node_err(c, 0, "time_axis and batch_axis must be 0 and 1, or 1 and 0, of a tensor of rank 2 or more"),
		       -1;
	if ((ln->dt != DT_I64 && ln->dt != DT_I32) || ln->rank != 1 || ln->shape[0] != a->shape[ba])
		return node_err(c, 0, "sequence_lens must be integers, one per batch entry"), -1;
	int64_t T = a->shape[ta], B = a->shape[ba], ts[MAX_RANK], bs[MAX_RANK];
	for (int k = 0; k < a->rank; k++)
		ts[k] = bs[k] = 1;
	ts[ta] = T;
	bs[ba] = B;
	char *tl = list_text(a->rank, ts), *bl = list_text(a->rank, bs);
	char *t = tmp(c, "reshape(i64(arange(%lld)), %s)", (long long)T, tl);
	char *l = tmp(c, "minimum(maximum(reshape(i64(%s), %s), i64(0)), i64(%lld))", ref(c, ln), bl, (long long)T);
	char *ix = tmp(c, "where(%s < %s, %s - i64(1) - %s, %s)", t, l, l, t, t);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, "take_along_axis(%s, %s, axis=%d)", ref(c, a), ix, ta);
	free(tl);
	free(bl);
	free(t);
	free(l);
	free(ix);
	return o ? 0 : -1;
}

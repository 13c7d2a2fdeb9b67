/* ops_shape.c - the translation of shape and data-movement ops: Shape,
 * Reshape, Flatten, (Un)Squeeze, Transpose, Concat, Split, Slice, Gather,
 * GatherElements, Expand, ConstantOfShape, Range, Constant, Trilu, Tile,
 * Pad, TopK, CumSum. Each folds when its inputs are known at import. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tr_shape(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int64_t s = attr_i(io->n, "start", 0), e = attr_i(io->n, "end", a->rank);
	if (s < 0) s += a->rank;
	if (e < 0) e += a->rank;
	if (s < 0) s = 0;
	if (e > a->rank) e = a->rank;
	if (s > a->rank) s = a->rank;
	int64_t len = e > s ? e - s : 0;
	Val *o = def_known(c, io, 0, DT_I64, 1, &len);
	if (!o)
		return -1;
	for (int64_t k = 0; k < len; k++)
		o->i[k] = a->shape[s + k];
	return 0;
}

static int reshape_to(Ctx *c, NodeIO *io, Val *a, int r, const int64_t *sh)
{
	if (check_shape(c, r, sh) < 0)
		return -1;
	int64_t n = 1;
	for (int k = 0; k < r; k++)
		n *= sh[k];
	if (n != a->n)
		return node_err(c, 0, "cannot reshape %lld elements to %lld", (long long)a->n, (long long)n), -1;
	if (a->known) {
		Val *o = def_known(c, io, 0, a->dt, r, sh);
		if (!o)
			return -1;
		for (int64_t k = 0; k < n; k++) {
			if (a->f)
				o->f[k] = a->f[k];
			else
				o->i[k] = a->i[k];
		}
		return 0;
	}
	int same = r == a->rank;
	for (int k = 0; same && k < r; k++)
		same = sh[k] == a->shape[k];
	if (same) {
		alias(c, io, 0, a);
		return 0;
	}
	return def_list(c, io, 0, a->dt, r, sh, "reshape", a, r, sh);
}

int tr_reshape(Ctx *c, NodeIO *io)
{
	Val *a, *s;
	if (inputs(c, io, "data and shape", 2, &a, &s) < 0 || need_known(c, s, "shape") < 0)
		return -1;
	if (s->rank != 1 || s->n > MAX_RANK)
		return node_err(c, 1, "shape of rank %d and %lld entries", s->rank, (long long)s->n), -1;
	int allowzero = (int)attr_i(io->n, "allowzero", 0);
	int r = (int)s->n, neg = -1;
	int64_t sh[MAX_RANK], known = 1;
	for (int k = 0; k < r; k++) {
		sh[k] = kgeti(s, k);
		if (sh[k] == 0 && !allowzero) {
			if (k >= a->rank)
				return node_err(c, 0, "shape entry %d is 0 (copy) past the input's rank", k), -1;
			sh[k] = a->shape[k];
		}
		if (sh[k] == -1) {
			if (neg >= 0)
				return node_err(c, 0, "more than one -1 in the shape"), -1;
			neg = k;
		} else if (sh[k] < 0) {
			return node_err(c, 0, "shape entry %lld", (long long)sh[k]), -1;
		} else {
			known *= sh[k];
		}
	}
	if (neg >= 0) {
		if (known == 0 || a->n % known)
			return node_err(c, 0, "cannot infer the -1 dimension"), -1;
		sh[neg] = a->n / known;
	}
	return reshape_to(c, io, a, r, sh);
}

int tr_flatten(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int64_t ax = attr_i(io->n, "axis", 1);
	if (ax < 0)
		ax += a->rank;
	if (ax < 0 || ax > a->rank)
		return node_err(c, 0, "axis out of range"), -1;
	int64_t sh[2] = {1, 1};
	for (int k = 0; k < a->rank; k++)
		sh[k < ax ? 0 : 1] *= a->shape[k];
	return reshape_to(c, io, a, 2, sh);
}

/* axes from the attribute (old opsets) or input k (new ones); -1 after an
 * error, else the count (0: none given). */
int get_axes(Ctx *c, NodeIO *io, int k, int64_t *axes, int *given)
{
	*given = 0;
	int n = attr_ints(io->n, "axes", axes, MAX_RANK + 1);
	if (n >= 0) {
		*given = 1;
		return n > MAX_RANK ? (node_err(c, 0, "too many axes"), -1) : n;
	}
	Val *v = in_(io, k);
	if (!v)
		return 0;
	if (need_known(c, v, "axes") < 0)
		return -1;
	if (v->n > MAX_RANK || v->rank > 1)
		return node_err(c, 0, "too many axes"), -1;
	*given = 1;
	for (int64_t j = 0; j < v->n; j++)
		axes[j] = kgeti(v, j);
	return (int)v->n;
}

int tr_squeeze(Ctx *c, NodeIO *io)
{
	int unsq = !strcmp(io->n->op_type, "Unsqueeze");
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int64_t axes[MAX_RANK + 1];
	int given;
	int na = get_axes(c, io, 1, axes, &given);
	if (na < 0)
		return -1;
	int64_t sh[MAX_RANK];
	int r = 0;
	if (unsq) {
		int orank = a->rank + na;
		if (orank > MAX_RANK)
			return node_err(c, 1, "rank %d is more than nestc's %d", orank, MAX_RANK), -1;
		int is1[MAX_RANK] = {0};
		for (int k = 0; k < na; k++) {
			int ax = oaxis(c, axes[k], orank);
			if (ax < 0)
				return -1;
			if (is1[ax])
				return node_err(c, 0, "axis %d twice", ax), -1;
			is1[ax] = 1;
		}
		int j = 0;
		for (int k = 0; k < orank; k++)
			sh[k] = is1[k] ? 1 : a->shape[j++];
		r = orank;
	} else {
		int drop[MAX_RANK] = {0};
		if (!na)
			for (int k = 0; k < a->rank; k++)
				drop[k] = a->shape[k] == 1;
		for (int k = 0; k < na; k++) {
			int ax = oaxis(c, axes[k], a->rank);
			if (ax < 0)
				return -1;
			if (a->shape[ax] != 1)
				return node_err(c, 0, "axis %d has size %lld, not 1", ax, (long long)a->shape[ax]), -1;
			drop[ax] = 1;
		}
		for (int k = 0; k < a->rank; k++)
			if (!drop[k])
				sh[r++] = a->shape[k];
	}
	return reshape_to(c, io, a, r, sh);
}

int tr_transpose(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int64_t perm[MAX_RANK + 1];
	int np = attr_ints(io->n, "perm", perm, MAX_RANK);
	if (np < 0) {
		np = a->rank;
		for (int k = 0; k < np; k++)
			perm[k] = a->rank - 1 - k;
	}
	if (np != a->rank)
		return node_err(c, 0, "perm has %d entries for rank %d", np, a->rank), -1;
	int seen[MAX_RANK] = {0};
	int64_t sh[MAX_RANK];
	for (int k = 0; k < np; k++) {
		if (perm[k] < 0 || perm[k] >= a->rank || seen[perm[k]]++)
			return node_err(c, 0, "perm is not a permutation"), -1;
		sh[k] = a->shape[perm[k]];
	}
	if (a->known) {
		Val *o = def_known(c, io, 0, a->dt, np, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK], ip[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, np, sh, pos);
			for (int j = 0; j < np; j++)
				ip[perm[j]] = pos[j];
			int64_t off = 0;
			for (int j = 0; j < np; j++)
				off = off * a->shape[j] + ip[j];
			kset(o, k, kget(a, off));
		}
		return 0;
	}
	if (np <= 1) {
		alias(c, io, 0, a);
		return 0;
	}
	return def_list(c, io, 0, a->dt, np, sh, "transpose", a, np, perm);
}

int tr_concat(Ctx *c, NodeIO *io)
{
	Val *a = NULL;
	int cnt = 0;
	for (int k = 0; k < io->nin; k++)
		if (io->in[k] && io->in[k]->n > 0) {
			a = a ? a : io->in[k];
			cnt++;
		}
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
	int64_t sh[MAX_RANK];
	memcpy(sh, a->shape, sizeof sh);
	sh[ax] = 0;
	for (int k = 0; k < io->nin; k++) {
		Val *b = io->in[k];
		if (!b)
			continue;
		if (b->rank != a->rank || b->dt != a->dt)
			return node_err(c, 0, "inputs differ in rank or dtype"), -1;
		for (int j = 0; j < a->rank; j++)
			if (j != ax && b->shape[j] != a->shape[j])
				return node_err(c, 0, "inputs differ on axis %d", j), -1;
		sh[ax] += b->shape[ax];
	}
	if (all_known(io)) {
		Val *o = def_known(c, io, 0, a->dt, a->rank, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, a->rank, sh, pos);
			int j = 0;
			while (pos[ax] >= io->in[j]->shape[ax]) {
				pos[ax] -= io->in[j]->shape[ax];
				j++;
			}
			Val *b = io->in[j];
			int64_t off = 0;
			for (int d = 0; d < b->rank; d++)
				off = off * b->shape[d] + pos[d];
			kset(o, k, kget(b, off));
		}
		return 0;
	}
	if (cnt == 1) {
		alias(c, io, 0, a);
		return 0;
	}
	/* concat() takes 64 tensors: more are concatenated 64 at a time first */
	int given = 0;
	for (int k = 0; k < io->nin; k++)
		given += io->in[k] != NULL;
	Buf b = {0}, part = {0};
	buf_puts(&b, "concat([");
	int first = 1, inpart = 0;
	for (int k = 0; k < io->nin; k++) {
		if (!io->in[k])
			continue;
		if (given <= 64) {
			buf_printf(&b, "%s%s", first ? "" : ", ", ref(c, io->in[k]));
			first = 0;
			continue;
		}
		buf_printf(&part, "%s%s", inpart ? ", " : "concat([", ref(c, io->in[k]));
		if (++inpart == 64 || k == io->nin - 1) {
			buf_printf(&part, "], axis=%d)", ax);
			char *t = tmp(c, "%s", part.s);
			buf_printf(&b, "%s%s", first ? "" : ", ", t);
			free(t);
			buf_free(&part);
			part = (Buf){0};
			first = inpart = 0;
		}
	}
	if (inpart) {
		buf_printf(&part, "], axis=%d)", ax);
		char *t = tmp(c, "%s", part.s);
		buf_printf(&b, "%s%s", first ? "" : ", ", t);
		free(t);
		buf_free(&part);
	}
	buf_printf(&b, "], axis=%d)", ax);
	Val *o = def(c, io, 0, a->dt, a->rank, sh, "%s", b.s);
	buf_free(&b);
	return o ? 0 : -1;
}

/* Positions start, start+step, ... along axis ax of a (any step), as a new
 * value for output k. */
int take_positions(Ctx *c, NodeIO *io, int k, Val *a, int ax, int64_t cnt, int64_t start, int64_t step)
{
	int64_t sh[MAX_RANK];
	memcpy(sh, a->shape, sizeof sh);
	sh[ax] = cnt;
	if (a->known) {
		Val *o = def_known(c, io, k, a->dt, a->rank, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t j = 0; j < o->n; j++) {
			unravel(j, a->rank, sh, pos);
			pos[ax] = start + pos[ax] * step;
			int64_t off = 0;
			for (int d = 0; d < a->rank; d++)
				off = off * a->shape[d] + pos[d];
			kset(o, j, kget(a, off));
		}
		return 0;
	}
	if (step == 1) {
		if (cnt == a->shape[ax] && start == 0) {
			alias(c, io, k, a);
			return 0;
		}
		char *e = slice_expr(ref(c, a), ax, start, start + cnt);
		Val *o = def(c, io, k, a->dt, a->rank, sh, "%s", e);
		free(e);
		return o ? 0 : -1;
	}
	/* any other step: gather the positions along axis 0 */
	Val iv = {0};
	char *nm = xasprintf("%s.positions", out_name(io, k));
	iv.name = nm;
	iv.dt = DT_I64;
	iv.rank = 1;
	iv.shape[0] = cnt;
	iv.n = cnt;
	val_alloc(&iv);
	for (int64_t j = 0; j < cnt; j++)
		iv.i[j] = start + j * step;
	const char *idx = ref(c, &iv);
	int64_t perm[MAX_RANK];
	for (int d = 0; d < a->rank; d++)
		perm[d] = d;
	perm[0] = ax;
	perm[ax] = 0;
	char *pl = list_text(a->rank, perm);
	Val *o;
	if (ax == 0)
		o = def(c, io, k, a->dt, a->rank, sh, "%s[%s]", ref(c, a), idx);
	else
		o = def(c, io, k, a->dt, a->rank, sh, "transpose(transpose(%s, %s)[%s], %s)", ref(c, a), pl, idx, pl);
	free(pl);
	free(iv.id);
	free(iv.i);
	free(nm);
	return o ? 0 : -1;
}

int tr_split(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
	int no = (int)io->n->n_output;
	int64_t *parts = xcalloc((size_t)no + 1, sizeof(int64_t));
	int64_t tmpv[64];
	int np = attr_ints(io->n, "split", tmpv, 63);
	Val *sv = in_(io, 1);
	int rc = -1;
	if (np < 0 && sv) {
		if (need_known(c, sv, "split") < 0)
			goto done;
		np = (int)(sv->n < 64 ? sv->n : 64);
		for (int k = 0; k < np; k++)
			tmpv[k] = kgeti(sv, k);
	}
	if (np >= 0) {
		if (np != no) {
			node_err(c, 0, "%d split sizes for %d outputs", np, no);
			goto done;
		}
		int64_t s = 0;
		for (int k = 0; k < no; k++) {
			parts[k] = tmpv[k];
			s += tmpv[k];
		}
		if (s != a->shape[ax]) {
			node_err(c, 0, "split sizes add to %lld, the axis is %lld", (long long)s, (long long)a->shape[ax]);
			goto done;
		}
	} else {
		int64_t nout = attr_i(io->n, "num_outputs", no);
		if (nout != no || no <= 0) {
			node_err(c, 0, "num_outputs %lld for %d outputs", (long long)nout, no);
			goto done;
		}
		int64_t each = (a->shape[ax] + no - 1) / no;
		for (int k = 0; k < no; k++) {
			int64_t left = a->shape[ax] - each * k;
			parts[k] = left < each ? (left > 0 ? left : 0) : each;
		}
	}
	int64_t off = 0;
	for (int k = 0; k < no; k++) {
		if (parts[k] < 0) {
			node_err(c, 0, "split part %d has %lld elements", k, (long long)parts[k]);
			goto done;
		}
		if (take_positions(c, io, k, a, ax, parts[k], off, 1) < 0)
			goto done;
		off += parts[k];
	}
	rc = 0;
done:
	free(parts);
	return rc;
}

int tr_slice(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int64_t st[MAX_RANK + 1], en[MAX_RANK + 1], ax[MAX_RANK + 1], sp[MAX_RANK + 1];
	int n;
	if (c->opset < 10) {
		n = attr_ints(io->n, "starts", st, MAX_RANK);
		if (n < 0 || attr_ints(io->n, "ends", en, MAX_RANK) != n)
			return node_err(c, 0, "starts and ends differ in length"), -1;
		int na = attr_ints(io->n, "axes", ax, MAX_RANK);
		if (na < 0)
			for (int k = 0; k < n; k++)
				ax[k] = k;
		for (int k = 0; k < n; k++)
			sp[k] = 1;
	} else {
		Val *vs = in_(io, 1), *ve = in_(io, 2), *va = in_(io, 3), *vp = in_(io, 4);
		if (!vs || !ve)
			return node_err(c, 0, "needs starts and ends"), -1;
		if (need_known(c, vs, "starts") < 0 || need_known(c, ve, "ends") < 0 || need_known(c, va, "axes") < 0 ||
		    need_known(c, vp, "steps") < 0)
			return -1;
		n = (int)vs->n;
		if (n > MAX_RANK || ve->n != n || (va && va->n != n) || (vp && vp->n != n))
			return node_err(c, 0, "starts, ends, axes and steps differ in length"), -1;
		for (int k = 0; k < n; k++) {
			st[k] = kgeti(vs, k);
			en[k] = kgeti(ve, k);
			ax[k] = va ? kgeti(va, k) : k;
			sp[k] = vp ? kgeti(vp, k) : 1;
		}
	}
	/* one axis at a time, through temporaries */
	Val *cur = a;
	int used[MAX_RANK] = {0};
	int last = -1;
	for (int k = 0; k < n; k++) {
		int x = oaxis(c, ax[k], a->rank);
		if (x < 0)
			return -1;
		if (used[x]++)
			return node_err(c, 0, "axis %d twice", x), -1;
		last = k;
	}
	if (last < 0) {
		alias(c, io, 0, a);
		return 0;
	}
	for (int k = 0; k < n; k++) {
		int x = oaxis(c, ax[k], a->rank);
		int64_t d = a->shape[x], s = st[k], e = en[k], p = sp[k];
		if (p == 0)
			return node_err(c, 0, "step 0"), -1;
		if (s < 0) s += d;
		if (e < 0) e += d;
		int64_t cnt;
		if (p > 0) {
			s = s < 0 ? 0 : (s > d ? d : s);
			e = e < 0 ? 0 : (e > d ? d : e);
			cnt = e > s ? (e - s + p - 1) / p : 0;
		} else {
			s = s < 0 ? -1 : (s > d - 1 ? d - 1 : s);
			e = e < -1 ? -1 : (e > d - 1 ? d - 1 : e);
			cnt = s > e ? (s - e + (-p) - 1) / (-p) : 0;
		}
		NodeIO sub = *io;
		Onnx__NodeProto fake = *io->n;
		char *outs[1];
		outs[0] = k == last ? (io->n->n_output ? io->n->output[0] : "") : NULL; /* no output: as out_name() */
		char *nm = NULL;
		if (k != last) {
			nm = xasprintf("%s.axis%d", io->n->n_output ? io->n->output[0] : "slice", x);
			outs[0] = nm;
		}
		fake.output = outs;
		fake.n_output = 1;
		sub.n = &fake;
		int rc = take_positions(c, &sub, 0, cur, x, cnt, s, p);
		free(nm);
		if (rc < 0)
			return -1;
		cur = c->vals[c->nvals - 1];
	}
	return 0;
}

int tr_gather(Ctx *c, NodeIO *io)
{
	Val *a, *ix;
	if (inputs(c, io, "data and indices", 2, &a, &ix) < 0)
		return -1;
	if (ix->dt != DT_I32 && ix->dt != DT_I64)
		return node_err(c, 0, "indices of dtype %s", dtype_name(ix->dt)), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
	int r = a->rank - 1 + ix->rank;
	if (r > MAX_RANK)
		return node_err(c, 1, "rank %d is more than nestc's %d", r, MAX_RANK), -1;
	int64_t sh[MAX_RANK];
	int j = 0;
	for (int k = 0; k < ax; k++)
		sh[j++] = a->shape[k];
	for (int k = 0; k < ix->rank; k++)
		sh[j++] = ix->shape[k];
	for (int k = ax + 1; k < a->rank; k++)
		sh[j++] = a->shape[k];
	int64_t d = a->shape[ax];
	if (ix->known) {
		for (int64_t k = 0; k < ix->n; k++) {
			int64_t v = kgeti(ix, k);
			if (v < -d || v >= d)
				return node_err(c, 0, "index %lld is out of range for axis %d of size %lld", (long long)v, ax,
				                (long long)d), -1;
		}
	}
	if (a->known && ix->known) {
		Val *o = def_known(c, io, 0, a->dt, r, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK], ap[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, r, sh, pos);
			int64_t io_ = 0;
			for (int q = 0; q < ix->rank; q++)
				io_ = io_ * ix->shape[q] + pos[ax + q];
			int64_t v = kgeti(ix, io_);
			if (v < 0)
				v += d;
			for (int q = 0; q < ax; q++)
				ap[q] = pos[q];
			ap[ax] = v;
			for (int q = ax + 1; q < a->rank; q++)
				ap[q] = pos[q - 1 + ix->rank];
			int64_t off = 0;
			for (int q = 0; q < a->rank; q++)
				off = off * a->shape[q] + ap[q];
			kset(o, k, kget(a, off));
		}
		return 0;
	}
	if (ix->known && ix->rank == 0) {
		int64_t v = kgeti(ix, 0);
		if (v < 0)
			v += d;
		Buf b = {0};
		buf_printf(&b, "%s[", ref(c, a));
		for (int k = 0; k < ax; k++)
			buf_puts(&b, ":, ");
		buf_printf(&b, "%lld]", (long long)v);
		Val *o = def(c, io, 0, a->dt, r, sh, "%s", b.s);
		buf_free(&b);
		return o ? 0 : -1;
	}
	const char *idx;
	if (ix->known) {
		/* negative indices count from the end in ONNX, not in Nest */
		Val *nv = new_val(c, ix->name, ix->dt, ix->rank, ix->shape);
		char *nm = xasprintf("%s.wrapped", ix->name);
		free(nv->name);
		nv->name = nm;
		val_alloc(nv);
		for (int64_t k = 0; k < ix->n; k++) {
			int64_t v = kgeti(ix, k);
			nv->i[k] = v < 0 ? v + d : v;
		}
		idx = ref(c, nv);
	} else {
		/* negative indices count from the end in ONNX, not in Nest */
		idx = tmp(c, "where(%s < 0, %s + %lld, %s)", ref(c, ix), ref(c, ix), (long long)d, ref(c, ix));
		vec_push(&c->garbage, (void *)idx);
	}
	if (ax == 0)
		return def(c, io, 0, a->dt, r, sh, "%s[%s]", ref(c, a), idx) ? 0 : -1;
	/* move the axis to the front, gather, move the index axes back */
	int64_t perm[MAX_RANK];
	perm[0] = ax;
	for (int k = 0, q = 1; k < a->rank; k++)
		if (k != ax)
			perm[q++] = k;
	/* gathered: [idx..., a without ax in order]; want [a[:ax], idx..., a[ax+1:]] */
	int64_t back[MAX_RANK];
	int q = 0;
	for (int k = 0; k < ax; k++)
		back[q++] = ix->rank + k;
	for (int k = 0; k < ix->rank; k++)
		back[q++] = k;
	for (int k = ax + 1; k < a->rank; k++)
		back[q++] = ix->rank + k - 1;
	char *pl = list_text(a->rank, perm), *bl = list_text(r, back);
	Val *o = def(c, io, 0, a->dt, r, sh, "transpose(transpose(%s, %s)[%s], %s)", ref(c, a), pl, idx, bl);
	free(pl);
	free(bl);
	return o ? 0 : -1;
}

int tr_gather_elements(Ctx *c, NodeIO *io)
{
	Val *a, *ix;
	if (inputs(c, io, "data and indices of the same rank", 2, &a, &ix) < 0)
		return -1;
	if (ix->rank != a->rank)
		return node_err(c, 0, "needs data and indices of the same rank"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
	/* the output has the indices' shape: on the other axes they may be
	 * shorter than the data (as PyTorch's gather, which exports to this
	 * node), and the data is cut to them */
	int cut = 0;
	for (int k = 0; k < a->rank; k++) {
		if (k != ax && ix->shape[k] > a->shape[k])
			return node_err(c, 0, "indices of %lld on axis %d, more than the data's %lld", (long long)ix->shape[k], k,
			                (long long)a->shape[k]), -1;
		cut |= k != ax && ix->shape[k] < a->shape[k];
	}
	const char *data = ref(c, a);
	if (cut) {
		Buf b = {0};
		buf_printf(&b, "%s[", data);
		for (int k = 0; k < a->rank; k++)
			buf_printf(&b, k == ax ? "%s:" : "%s0:%lld", k ? ", " : "", (long long)ix->shape[k]);
		buf_putc(&b, ']');
		char *t = tmp(c, "%s", b.s);
		buf_free(&b);
		vec_push(&c->garbage, t);
		data = t;
	}
	const char *idx = NULL;
	if (!ix->known) {
		char *t = tmp(c, "where(%s < 0, %s + %lld, %s)", ref(c, ix), ref(c, ix), (long long)a->shape[ax], ref(c, ix));
		vec_push(&c->garbage, t);
		idx = t;
	}
	if (ix->known) {
		Val *nv = new_val(c, "", ix->dt, ix->rank, ix->shape);
		free(nv->name);
		nv->name = xasprintf("%s.wrapped", ix->name);
		val_alloc(nv);
		for (int64_t k = 0; k < ix->n; k++) {
			int64_t v = kgeti(ix, k);
			nv->i[k] = v < 0 ? v + a->shape[ax] : v;
		}
		idx = ref(c, nv);
	}
	return def(c, io, 0, a->dt, ix->rank, ix->shape, "take_along_axis(%s, %s, %d)", data, idx, ax) ? 0 : -1;
}

int tr_expand(Ctx *c, NodeIO *io)
{
	Val *a, *s;
	if (inputs(c, io, "data and shape", 2, &a, &s) < 0 || need_known(c, s, "shape") < 0)
		return -1;
	if (s->n > MAX_RANK || s->rank != 1)
		return node_err(c, 1, "shape of %lld entries", (long long)s->n), -1;
	int64_t want[MAX_RANK], sh[MAX_RANK];
	for (int64_t k = 0; k < s->n; k++)
		want[k] = kgeti(s, k);
	int r;
	if (broadcast(c, a->rank, a->shape, (int)s->n, want, &r, sh) < 0)
		return -1;
	if (check_shape(c, r, sh) < 0)
		return -1;
	if (a->known)
		return fold_broadcast(c, io, NULL, a, NULL, r, sh);
	return def_list(c, io, 0, a->dt, r, sh, "expand", a, r, sh);
}

int tr_constant_of_shape(Ctx *c, NodeIO *io)
{
	Val *s;
	if (inputs(c, io, "a shape", 1, &s) < 0 || need_known(c, s, "shape") < 0)
		return -1;
	if (s->n > MAX_RANK)
		return node_err(c, 1, "shape of %lld entries", (long long)s->n), -1;
	int64_t sh[MAX_RANK];
	for (int64_t k = 0; k < s->n; k++)
		sh[k] = kgeti(s, k);
	Onnx__AttributeProto *va = attr(io->n, "value");
	DType dt = DT_F32;
	double x = 0;
	if (va && va->t) {
		Val *t = tensor_val(c, va->t, "value", c->path, 0);
		if (!t)
			return -1;
		dt = t->dt;
		x = kget(t, 0);
	}
	Val *o = def_known(c, io, 0, dt, (int)s->n, sh);
	if (!o)
		return -1;
	for (int64_t k = 0; k < o->n; k++)
		kset(o, k, x);
	return 0;
}

int tr_range(Ctx *c, NodeIO *io)
{
	Val *s, *l, *d;
	if (inputs(c, io, "start, limit and delta", 3, &s, &l, &d) < 0)
		return -1;
	if (need_known(c, s, "start") < 0 || need_known(c, l, "limit") < 0 || need_known(c, d, "delta") < 0)
		return -1;
	double a = kget(s, 0), b = kget(l, 0), st = kget(d, 0);
	if (st == 0)
		return node_err(c, 0, "delta is 0"), -1;
	double cnt = ceil((b - a) / st);
	if (cnt < 0)
		cnt = 0; /* an empty range */
	if (!(cnt <= 1e9)) /* NaN too */
		return node_err(c, 0, "a range of %g elements", cnt), -1;
	int64_t n = (int64_t)cnt;
	Val *o = def_known(c, io, 0, s->dt, 1, &n);
	if (!o)
		return -1;
	for (int64_t k = 0; k < n; k++) {
		if (o->f)
			kset(o, k, a + (double)k * st);
		else
			kseti(o, k, kgeti(s, 0) + k * kgeti(d, 0));
	}
	return 0;
}

int tr_constant(Ctx *c, NodeIO *io)
{
	Onnx__AttributeProto *a;
	if ((a = attr(io->n, "value")) && a->t) {
		Val *t = tensor_val(c, a->t, out_name(io, 0), c->path, 0);
		return t ? 0 : -1;
	}
	int64_t one = 1;
	Val *o;
	if ((a = attr(io->n, "value_float")) && a->has_f) {
		if (!(o = def_known(c, io, 0, DT_F32, 0, NULL)))
			return -1;
		kset(o, 0, a->f);
		return 0;
	}
	if ((a = attr(io->n, "value_int")) && a->has_i) {
		if (!(o = def_known(c, io, 0, DT_I64, 0, NULL)))
			return -1;
		o->i[0] = a->i;
		return 0;
	}
	if ((a = attr(io->n, "value_floats")) && a->n_floats) {
		int64_t n = (int64_t)a->n_floats;
		if (!(o = def_known(c, io, 0, DT_F32, 1, &n)))
			return -1;
		for (int64_t k = 0; k < n; k++)
			kset(o, k, a->floats[k]);
		return 0;
	}
	if ((a = attr(io->n, "value_ints")) && a->n_ints) {
		int64_t n = (int64_t)a->n_ints;
		if (!(o = def_known(c, io, 0, DT_I64, 1, &n)))
			return -1;
		for (int64_t k = 0; k < n; k++)
			o->i[k] = a->ints[k];
		return 0;
	}
	(void)one;
	return node_err(c, 1, "string and sparse values are not supported"), -1;
}

int tr_trilu(Ctx *c, NodeIO *io)
{
	Val *x, *kv = in_(io, 1);
	if (inputs(c, io, "an input of rank 2 or more", 1, &x) < 0)
		return -1;
	if (x->rank < 2)
		return node_err(c, 0, "needs an input of rank 2 or more"), -1;
	if (need_known(c, kv, "k") < 0)
		return -1;
	int64_t k = kv ? kgeti(kv, 0) : 0;
	int upper = (int)attr_i(io->n, "upper", 1);
	int64_t n = x->shape[x->rank - 2], m = x->shape[x->rank - 1];
	/* keep [i, j] where j - i >= k (upper) or j - i <= k (lower) */
	char *rows = tmp(c, "unsqueeze(arange(%lld), 1) + %lld", (long long)n, (long long)k);
	char *cols = tmp(c, "unsqueeze(arange(%lld), 0)", (long long)m);
	Val *o = def(c, io, 0, x->dt, x->rank, x->shape, "where(%s %s %s, %s, %s)", cols, upper ? ">=" : "<=", rows,
	             ref(c, x), x->dt == DT_BOOL ? "false" : "0");
	free(rows);
	free(cols);
	return o ? 0 : -1;
}

int tr_tile(Ctx *c, NodeIO *io)
{
	Val *x, *r;
	if (inputs(c, io, "input and repeats", 2, &x, &r) < 0 || need_known(c, r, "repeats") < 0)
		return -1;
	if (r->n != x->rank)
		return node_err(c, 0, "repeats has %lld entries for rank %d", (long long)r->n, x->rank), -1;
	char *cur = xstrdup(ref(c, x));
	int64_t sh[MAX_RANK];
	memcpy(sh, x->shape, sizeof sh);
	for (int k = 0; k < x->rank; k++) {
		int64_t n = kgeti(r, k);
		if (n < 1 || n > 4096)
			return free(cur), node_err(c, 1, "repeats of %lld", (long long)n), -1;
		if (n == 1)
			continue;
		Buf b = {0};
		buf_puts(&b, "concat([");
		for (int64_t j = 0; j < n; j++)
			buf_printf(&b, "%s%s", j ? ", " : "", cur);
		buf_printf(&b, "], axis=%d)", k);
		char *t = tmp(c, "%s", b.s);
		buf_free(&b);
		free(cur);
		cur = t;
		sh[k] *= n;
	}
	Val *o = def(c, io, 0, x->dt, x->rank, sh, "%s", cur);
	free(cur);
	return o ? 0 : -1;
}

/* Pad's edge, reflect and wrap modes: per padded axis one gather of the
 * positions each output position copies. Negative pads crop first; the
 * positive ones then pad what is left. */
static int pad_gathered(Ctx *c, NodeIO *io, Val *x, Val *pv, const char *mode)
{
	int r = x->rank;
	int64_t sh[MAX_RANK], lo[MAX_RANK], hi[MAX_RANK], cut[MAX_RANK], len[MAX_RANK];
	for (int k = 0; k < r; k++) {
		int64_t n = x->shape[k];
		lo[k] = kgeti(pv, k), hi[k] = kgeti(pv, r + k);
		if (llabs(lo[k]) > ((int64_t)1 << 40) || llabs(hi[k]) > ((int64_t)1 << 40))
			return node_err(c, 0, "pads %lld and %lld are too big", (long long)lo[k], (long long)hi[k]), -1;
		cut[k] = lo[k] < 0 ? -lo[k] : 0;
		len[k] = n - cut[k] - (hi[k] < 0 ? -hi[k] : 0);
		int64_t plo = lo[k] > 0 ? lo[k] : 0, phi = hi[k] > 0 ? hi[k] : 0;
		if (len[k] < 0 || (len[k] == 0 && plo + phi > 0) ||
		    (!strcmp(mode, "reflect") && (plo > len[k] - 1 || phi > len[k] - 1) && plo + phi > 0))
			return node_err(c, 0, "pads %lld and %lld for an axis of %lld in mode %s", (long long)lo[k],
			                (long long)hi[k], (long long)n, mode), -1;
		sh[k] = len[k] + plo + phi;
	}
	if (check_shape(c, r, sh) < 0)
		return -1;
	char *cur = xstrdup(ref(c, x));
	for (int k = r - 1; k >= 0; k--) {
		if ((!lo[k] && !hi[k]) || sh[k] == 0)
			continue;
		int64_t plo = lo[k] > 0 ? lo[k] : 0, m = len[k];
		Val *iv = axis_const(c, out_name(io, 0), "pad", 0, DT_I64, r, k, sh[k]);
		for (int64_t j = 0; j < sh[k]; j++) {
			int64_t s = j - plo;
			if (!strcmp(mode, "edge"))
				s = s < 0 ? 0 : s >= m ? m - 1 : s;
			else if (!strcmp(mode, "wrap"))
				s = ((s % m) + m) % m;
			else
				s = s < 0 ? -s : s >= m ? 2 * (m - 1) - s : s;
			kseti(iv, j, s + cut[k]);
		}
		char *t = tmp(c, "take_along_axis(%s, %s, axis=%d)", cur, ref(c, iv), k);
		free(cur);
		cur = t;
	}
	int rc = def_shaped(c, io, x->dt, r, sh, cur);
	free(cur);
	return rc;
}

int tr_pad(Ctx *c, NodeIO *io)
{
	Val *x, *pv = in_(io, 1), *cv = in_(io, 2);
	if (inputs(c, io, "an input", 1, &x) < 0)
		return -1;
	char *mode = attr_s(io->n, "mode");
	int gathered = mode && strcmp(mode, "constant");
	if (gathered && strcmp(mode, "edge") && strcmp(mode, "reflect") && strcmp(mode, "wrap")) {
		node_err(c, 1, "mode '%.50s' is not supported (constant, edge, reflect and wrap are)", mode);
		free(mode);
		return -1;
	}
	if (need_known(c, pv, "pads") < 0 || need_known(c, cv, "constant_value") < 0) {
		free(mode);
		return -1;
	}
	if (!pv || pv->n != 2 * x->rank || in_(io, 3)) {
		free(mode);
		return node_err(c, 1, "pads must give every axis"), -1;
	}
	if (gathered) {
		int rc = pad_gathered(c, io, x, pv, mode);
		free(mode);
		return rc;
	}
	free(mode);
	double fillv = cv ? kget(cv, 0) : 0;
	char fl[64];
	if (!float_lit(fl, sizeof fl, fillv, DT_F64))
		return node_err(c, 1, "a NaN pad value is not supported"), -1;
	char *cur = xstrdup(ref(c, x));
	int64_t sh[MAX_RANK];
	memcpy(sh, x->shape, sizeof sh);
	for (int side = 0; side < 2; side++)
		for (int k = 0; k < x->rank; k++) {
			int64_t n = kgeti(pv, side * x->rank + k);
			if (n < 0) {
				free(cur);
				return node_err(c, 1, "negative pads are not supported"), -1;
			}
			if (!n)
				continue;
			int64_t ps[MAX_RANK];
			memcpy(ps, sh, sizeof ps);
			ps[k] = n;
			char *l = list_text(x->rank, ps);
			char *f = tmp(c, "%s(full(%s, %s))", dtype_name(x->dt), l, fl);
			free(l);
			char *t = side == 0 ? tmp(c, "concat([%s, %s], axis=%d)", f, cur, k)
			                    : tmp(c, "concat([%s, %s], axis=%d)", cur, f, k);
			free(f);
			free(cur);
			cur = t;
			sh[k] += n;
		}
	Val *o = def(c, io, 0, x->dt, x->rank, sh, "%s", cur);
	free(cur);
	return o ? 0 : -1;
}

int tr_topk(Ctx *c, NodeIO *io)
{
	Val *x, *kv;
	if (inputs(c, io, "X and K", 2, &x, &kv) < 0 || need_known(c, kv, "K") < 0)
		return -1;
	int ax = oaxis(c, attr_i(io->n, "axis", -1), x->rank);
	if (ax < 0)
		return -1;
	int64_t k = kgeti(kv, 0);
	if (k < 1 || k > x->shape[ax])
		return node_err(c, 0, "K %lld for an axis of %lld", (long long)k, (long long)x->shape[ax]), -1;
	if (!attr_i(io->n, "sorted", 1))
		return node_err(c, 1, "sorted=0 is not supported"), -1;
	int largest = (int)attr_i(io->n, "largest", 1);
	int64_t sh[MAX_RANK];
	memcpy(sh, x->shape, sizeof sh);
	sh[ax] = k;
	if (check_shape(c, x->rank, sh) < 0)
		return -1;
	Val *v = new_val(c, out_name(io, 0), x->dt, x->rank, sh);
	Val *ix = new_val(c, out_name(io, 1), DT_I64, x->rank, sh);
	v->id = make_id(c, v->name, "v_");
	ix->id = make_id(c, ix->name, "v_");
	buf_printf(&c->body, "  let %s, %s = topk(%s, %lld, axis=%d, largest=%s)\n", v->id, ix->id, ref(c, x), (long long)k,
	           ax, largest ? "true" : "false");
	return 0;
}

/* x (an identifier) with axis ax of n positions reversed: a gather. */
char *reversed(Ctx *c, NodeIO *io, const char *x, int rank, int ax, int64_t n)
{
	Val *iv = axis_const(c, out_name(io, 0), "reversed", 0, DT_I64, rank, ax, n);
	for (int64_t j = 0; j < n; j++)
		kseti(iv, j, n - 1 - j);
	return tmp(c, "take_along_axis(%s, %s, axis=%d)", x, ref(c, iv), ax);
}

/* CumSum; reverse: of the reversed axis, reversed back; exclusive: shifted
 * by one position, a 0 first. */
int tr_cumsum(Ctx *c, NodeIO *io)
{
	Val *x, *av;
	if (inputs(c, io, "x and axis", 2, &x, &av) < 0 || need_known(c, av, "axis") < 0)
		return -1;
	int ax = oaxis(c, kgeti(av, 0), x->rank);
	if (ax < 0)
		return -1;
	int rev = attr_i(io->n, "reverse", 0) != 0, excl = attr_i(io->n, "exclusive", 0) != 0;
	int64_t n = x->shape[ax];
	if ((!rev && !excl) || n == 0)
		return def(c, io, 0, x->dt, x->rank, x->shape, "cumsum(%s, %d)", ref(c, x), ax) ? 0 : -1;
	char *cur = rev ? reversed(c, io, ref(c, x), x->rank, ax, n) : xstrdup(ref(c, x));
	char *cs = tmp(c, "cumsum(%s, %d)", cur, ax);
	free(cur);
	cur = cs;
	if (excl) {
		int64_t zs[MAX_RANK];
		memcpy(zs, x->shape, sizeof zs);
		zs[ax] = 1;
		char *zl = list_text(x->rank, zs), *sl = slice_expr(cur, ax, 0, n - 1);
		char *t = tmp(c, "concat([%s(zeros(%s)), %s], axis=%d)", dtype_name(x->dt), zl, sl, ax);
		free(zl);
		free(sl);
		free(cur);
		cur = t;
	}
	if (rev) {
		char *t = reversed(c, io, cur, x->rank, ax, n);
		free(cur);
		cur = t;
	}
	Val *o = def(c, io, 0, x->dt, x->rank, x->shape, "%s", cur);
	free(cur);
	return o ? 0 : -1;
}

/* DepthToSpace (modes DCR and CRD) and SpaceToDepth: a reshape to rank 6,
 * a transpose and a reshape back, as ONNX's own definitions. */
int tr_depth_space(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int to_space = !strcmp(io->n->op_type, "DepthToSpace");
	int64_t b = attr_i(io->n, "blocksize", 0);
	if (a->rank != 4)
		return node_err(c, 0, "input of rank %d, expected 4 (N, C, H, W)", a->rank), -1;
	if (b < 1 || b > 4096)
		return node_err(c, 0, "blocksize %lld, expected a positive number", (long long)b), -1;
	int64_t N = a->shape[0], C = a->shape[1], H = a->shape[2], W = a->shape[3];
	int64_t mid[6], out[4];
	const int64_t *perm;
	static const int64_t dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3}, s2d[6] = {0, 3, 5, 1, 2, 4};
	if (to_space) {
		char *mode = attr_s(io->n, "mode");
		int is_crd = mode && !strcmp(mode, "CRD"), bad = mode && !is_crd && strcmp(mode, "DCR");
		if (bad)
			node_err(c, 1, "mode '%.20s' is not supported (DCR or CRD)", mode);
		free(mode);
		if (bad)
			return -1;
		if (C % (b * b))
			return node_err(c, 0, "%lld channels are not a multiple of blocksize^2 = %lld", (long long)C,
			                (long long)(b * b)), -1;
		int64_t cb = C / (b * b);
		int64_t m_dcr[6] = {N, b, b, cb, H, W}, m_crd[6] = {N, cb, b, b, H, W};
		memcpy(mid, is_crd ? m_crd : m_dcr, sizeof mid);
		perm = is_crd ? crd : dcr;
		out[0] = N, out[1] = cb, out[2] = H * b, out[3] = W * b;
	} else {
		if (H % b || W % b)
			return node_err(c, 0, "H and W (%lld, %lld) are not multiples of blocksize %lld", (long long)H,
			                (long long)W, (long long)b), -1;
		int64_t m[6] = {N, C, H / b, b, W / b, b};
		memcpy(mid, m, sizeof mid);
		perm = s2d;
		out[0] = N, out[1] = C * b * b, out[2] = H / b, out[3] = W / b;
	}
	if (check_shape(c, 4, out) < 0)
		return -1;
	char *ml = list_text(6, mid), *pl = list_text(6, perm), *ol = list_text(4, out);
	Val *o = def(c, io, 0, a->dt, 4, out, "reshape(transpose(reshape(%s, %s), %s), %s)", ref(c, a), ml, pl, ol);
	free(ml);
	free(pl);
	free(ol);
	return o ? 0 : -1;
}

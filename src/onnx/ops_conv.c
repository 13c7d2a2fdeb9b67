/* ops_conv.c - the translation of Conv, ConvTranspose and the pools
 * (MaxPool, AveragePool, GlobalAveragePool): kernel geometry, padding, and
 * pooling of any rank written as taps over strided slices. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Pads the last two axes of x (rank 4) by p[0..3] = top, left, bottom,
 * right with value fill ("0.0" or "-inf"); returns the expression. */
static char *pad2d(Ctx *c, const char *x, DType dt, const int64_t *shape, const int64_t *p, const char *fill)
{
	char *cur = xstrdup(x);
	int64_t sh[4];
	memcpy(sh, shape, sizeof sh);
	for (int side = 0; side < 4; side++) {
		int ax = 2 + (side & 1);
		int64_t n = p[side];
		if (n <= 0)
			continue;
		int64_t ps[4];
		memcpy(ps, sh, sizeof ps);
		ps[ax] = n;
		char *l = list_text(4, ps);
		char *f = tmp(c, "%s(full(%s, %s))", dtype_name(dt), l, fill);
		free(l);
		char *t = side < 2 ? tmp(c, "concat([%s, %s], axis=%d)", f, cur, ax) : tmp(c, "concat([%s, %s], axis=%d)", cur, f, ax);
		free(f);
		free(cur);
		cur = t;
		sh[ax] += n;
	}
	return cur;
}

/* Kernel geometry of Conv and the pools: pads (top, left, bottom, right)
 * from pads / auto_pad, and the output size. */
static int conv_geometry(Ctx *c, NodeIO *io, int nd, const int64_t *in, const int64_t *k, const int64_t *st,
                         const int64_t *dil, int ceil_mode, int64_t *pads, int64_t *out)
{
	char *ap = attr_s(io->n, "auto_pad");
	int64_t p[4] = {0, 0, 0, 0};
	int np = attr_ints(io->n, "pads", p, 4);
	if (np >= 0 && np != 2 * nd) {
		free(ap);
		return node_err(c, 0, "pads has %d entries, not %d", np, 2 * nd), -1;
	}
	if (nd == 1 && np == 2) {
		/* 1-d as 2-d of height 1: no pads on the height */
		p[3] = p[1], p[1] = p[0], p[0] = p[2] = 0;
	}
	for (int d = 0; d < 2; d++) {
		int64_t ek = dil[d] * (k[d] - 1) + 1;
		if (ap && (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"))) {
			int64_t o = (in[d] + st[d] - 1) / st[d];
			int64_t tot = (o - 1) * st[d] + ek - in[d];
			if (tot < 0)
				tot = 0;
			int64_t lo = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
			pads[d] = lo;
			pads[d + 2] = tot - lo;
			out[d] = o;
		} else {
			if (ap && strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
				node_err(c, 0, "auto_pad '%s'", ap);
				free(ap);
				return -1;
			}
			if (ap && !strcmp(ap, "VALID"))
				p[d] = p[d + 2] = 0;
			pads[d] = p[d];
			pads[d + 2] = p[d + 2];
			int64_t span = in[d] + pads[d] + pads[d + 2] - ek;
			if (span < 0) {
				free(ap);
				return node_err(c, 0, "the kernel is larger than the padded input"), -1;
			}
			out[d] = (ceil_mode ? (span + st[d] - 1) / st[d] : span / st[d]) + 1;
			if (ceil_mode && (out[d] - 1) * st[d] >= in[d] + pads[d])
				out[d]--;
		}
	}
	free(ap);
	return 0;
}

static int get2(Ctx *c, NodeIO *io, const char *name, int64_t *v, int64_t def)
{
	int64_t t[MAX_RANK + 1];
	int n = attr_ints(io->n, name, t, MAX_RANK);
	if (n < 0) {
		v[0] = v[1] = def;
		return 0;
	}
	if (n != 2)
		return node_err(c, 1, "%s of %d entries: only 2-d is supported", name, n), -1;
	v[0] = t[0];
	v[1] = t[1];
	if (v[0] < 1 || v[1] < 1)
		return node_err(c, 0, "%s must be positive", name), -1;
	return 0;
}

static int get_nd(Ctx *c, NodeIO *io, const char *name, int nd, int64_t *v, int64_t def, int64_t def1, int min);

/* Conv, 2-d, and 1-d as 2-d of height 1 (x and w reshaped to rank 4, the
 * result back to rank 3). */
int tr_conv(Ctx *c, NodeIO *io)
{
	Val *x, *w, *b = in_(io, 2);
	if (inputs(c, io, "X and W", 2, &x, &w) < 0)
		return -1;
	int nd = x->rank - 2;
	if ((nd != 1 && nd != 2) || w->rank != x->rank)
		return node_err(c, 1, "%d-d convolution is not supported (1-d and 2-d are)", nd), -1;
	int64_t st[2], dil[2], ks[2];
	if (get_nd(c, io, "strides", nd, st, 1, 1, 1) < 0 || get_nd(c, io, "dilations", nd, dil, 1, 1, 1) < 0 ||
	    get_nd(c, io, "kernel_shape", nd, ks, 1, 1, 1) < 0)
		return -1;
	/* as 2-d: [N, C, H, W] and [O, C / g, KH, KW] */
	int64_t xs4[4] = {x->shape[0], x->shape[1], nd == 1 ? 1 : x->shape[2], x->shape[nd + 1]};
	int64_t ws4[4] = {w->shape[0], w->shape[1], nd == 1 ? 1 : w->shape[2], w->shape[nd + 1]};
	int64_t k[2] = {ws4[2], ws4[3]}, pads[4], out[2];
	int64_t g = attr_i(io->n, "group", 1);
	if (g < 1 || x->shape[1] % g || w->shape[0] % g || w->shape[1] * g != x->shape[1])
		return node_err(c, 0, "channels do not match the groups"), -1;
	if (conv_geometry(c, io, nd, xs4 + 2, k, st, dil, 0, pads, out) < 0)
		return -1;
	char *xs, *ws;
	if (nd == 1) {
		char *xl = list_text(4, xs4), *wl = list_text(4, ws4);
		xs = tmp(c, "reshape(%s, %s)", ref(c, x), xl);
		ws = tmp(c, "reshape(%s, %s)", ref(c, w), wl);
		free(xl);
		free(wl);
	} else {
		xs = xstrdup(ref(c, x));
		ws = xstrdup(ref(c, w));
	}
	int64_t pad = 0;
	if (pads[0] != pads[2] || pads[1] != pads[3] || pads[0] != pads[1]) {
		char *t = pad2d(c, xs, x->dt, xs4, pads, "0.0");
		free(xs);
		xs = t;
	} else {
		pad = pads[0];
	}
	int64_t sh[4] = {x->shape[0], w->shape[0], out[0], out[1]};
	Buf e = {0};
	buf_printf(&e, "conv2d(%s, %s", xs, ws);
	if (b)
		buf_printf(&e, ", %s", ref(c, b));
	buf_printf(&e, ", stride=[%lld, %lld], padding=%lld, groups=%lld, dilation=[%lld, %lld])", (long long)st[0],
	           (long long)st[1], (long long)pad, (long long)g, (long long)dil[0], (long long)dil[1]);
	Val *o;
	if (nd == 1) {
		int64_t sh3[3] = {sh[0], sh[1], sh[3]};
		char *l = list_text(3, sh3);
		o = def(c, io, 0, x->dt, 3, sh3, "reshape(%s, %s)", e.s, l);
		free(l);
	} else {
		o = def(c, io, 0, x->dt, 4, sh, "%s", e.s);
	}
	buf_free(&e);
	free(xs);
	free(ws);
	return o ? 0 : -1;
}

/* Attribute name of nd (1 or 2) entries into v[0..1] (a 1-d one as
 * [def1, v]); absent: def. */
static int get_nd(Ctx *c, NodeIO *io, const char *name, int nd, int64_t *v, int64_t def, int64_t def1, int min)
{
	int64_t t[MAX_RANK + 1];
	int n = attr_ints(io->n, name, t, MAX_RANK);
	v[0] = nd == 1 ? def1 : def;
	v[1] = def;
	if (n < 0)
		return 0;
	if (n != nd)
		return node_err(c, 0, "%s has %d entries for %d-d", name, n, nd), -1;
	for (int k = 0; k < nd; k++) {
		if (t[k] < min)
			return node_err(c, 0, "%s must be %s", name, min ? "positive" : "0 or more"), -1;
		v[2 - nd + k] = t[k];
	}
	return 0;
}

/* ConvTranspose, 1-d (as 2-d of height 1) and 2-d. conv_transpose2d pads
 * both sides alike and adds output_padding at the end; other pads (given,
 * from output_shape or from auto_pad) are the smaller side's padding, then a
 * slice of the rows and columns the pads keep. */
int tr_conv_transpose(Ctx *c, NodeIO *io)
{
	Val *x, *w, *b = in_(io, 2);
	if (inputs(c, io, "X and W", 2, &x, &w) < 0)
		return -1;
	int nd = x->rank - 2;
	if ((nd != 1 && nd != 2) || w->rank != x->rank)
		return node_err(c, 1, "%d-d transposed convolution is not supported (1-d and 2-d are)", nd), -1;
	int64_t st[2], dil[2], op[2], os[2], k[2] = {1, w->shape[2 + nd - 1]}, in[2] = {1, x->shape[2 + nd - 1]};
	if (nd == 2)
		k[0] = w->shape[2], in[0] = x->shape[2];
	if (get_nd(c, io, "strides", nd, st, 1, 1, 1) < 0 || get_nd(c, io, "dilations", nd, dil, 1, 1, 1) < 0 ||
	    get_nd(c, io, "output_padding", nd, op, 0, 0, 0) < 0 || get_nd(c, io, "output_shape", nd, os, -1, 1, 1) < 0)
		return -1;
	int64_t g = attr_i(io->n, "group", 1);
	if (g < 1 || w->shape[0] != x->shape[1] || x->shape[1] % g)
		return node_err(c, 0, "channels do not match the groups"), -1;
	char *ap = attr_s(io->n, "auto_pad");
	int same = ap && (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")), upper = ap && !strcmp(ap, "SAME_UPPER");
	int valid = ap && !strcmp(ap, "VALID");
	if (ap && !same && !valid && strcmp(ap, "NOTSET")) {
		node_err(c, 0, "auto_pad '%.30s'", ap);
		free(ap);
		return -1;
	}
	free(ap);
	/* pads: lo[d], hi[d] */
	int64_t lo[2] = {0, 0}, hi[2] = {0, 0}, full[2], out[2];
	for (int d = 0; d < 2; d++)
		full[d] = (in[d] - 1) * st[d] + dil[d] * (k[d] - 1) + 1;
	if (os[1] > 0 || same) {
		for (int d = 0; d < 2; d++) {
			int64_t want = os[1] > 0 ? os[d] : in[d] * st[d];
			int64_t tot = full[d] + op[d] - want;
			/* ONNX: SAME_UPPER puts the larger half at the end */
			int64_t half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2);
			lo[d] = upper ? half : tot - half;
			hi[d] = tot - lo[d];
		}
	} else if (!valid) {
		int64_t p[MAX_RANK + 1];
		int np = attr_ints(io->n, "pads", p, MAX_RANK);
		if (np >= 0 && np != 2 * nd)
			return node_err(c, 0, "pads has %d entries for %d-d", np, nd), -1;
		for (int d = 0; np > 0 && d < nd; d++) {
			lo[2 - nd + d] = p[d];
			hi[2 - nd + d] = p[nd + d];
		}
	}
	int64_t pad[2], q[2], start[2];
	for (int d = 0; d < 2; d++) {
		out[d] = full[d] - lo[d] - hi[d] + op[d];
		pad[d] = lo[d] < hi[d] ? lo[d] : hi[d];
		if (pad[d] < 0)
			pad[d] = 0;
		start[d] = lo[d] - pad[d];
		int64_t have = full[d] - 2 * pad[d];
		q[d] = start[d] + out[d] > have ? start[d] + out[d] - have : 0;
		if (start[d] < 0 || out[d] < 1 || (q[d] && q[d] >= st[d] && q[d] >= dil[d]))
			return node_err(c, 1, "pads %lld and %lld with output_padding %lld are not supported", (long long)lo[d],
			                (long long)hi[d], (long long)op[d]), -1;
	}
	char *xs = nd == 1 ? tmp(c, "unsqueeze(%s, 2)", ref(c, x)) : xstrdup(ref(c, x));
	char *ws = nd == 1 ? tmp(c, "unsqueeze(%s, 2)", ref(c, w)) : xstrdup(ref(c, w));
	Buf e = {0};
	buf_printf(&e, "conv_transpose2d(%s, %s", xs, ws);
	if (b)
		buf_printf(&e, ", %s", ref(c, b));
	buf_printf(&e, ", stride=[%lld, %lld], padding=[%lld, %lld], output_padding=[%lld, %lld], groups=%lld, "
	               "dilation=[%lld, %lld])",
	           (long long)st[0], (long long)st[1], (long long)pad[0], (long long)pad[1], (long long)q[0],
	           (long long)q[1], (long long)g, (long long)dil[0], (long long)dil[1]);
	char *cur = tmp(c, "%s", e.s);
	buf_free(&e);
	free(xs);
	free(ws);
	for (int d = 0; d < 2; d++) {
		if (start[d] == 0 && out[d] == full[d] - 2 * pad[d] + q[d])
			continue;
		char *sl = slice_expr(cur, 2 + d, start[d], start[d] + out[d]);
		char *t = tmp(c, "%s", sl);
		free(sl);
		free(cur);
		cur = t;
	}
	int64_t sh[4] = {x->shape[0], w->shape[1] * g, out[0], out[1]};
	Val *o = nd == 1 ? def(c, io, 0, x->dt, 3, (int64_t[]){sh[0], sh[1], sh[3]}, "squeeze(%s, 2)", cur)
	                 : def(c, io, 0, x->dt, 4, sh, "%s", cur);
	free(cur);
	return o ? 0 : -1;
}

/* Pads axes 2.. of x (rank r) by lo[d], hi[d] with fill, by concatenation. */
static char *padnd(Ctx *c, const char *x, DType dt, int r, const int64_t *shape, const int64_t *lo, const int64_t *hi,
                   const char *fill)
{
	char *cur = xstrdup(x);
	int64_t sh[MAX_RANK];
	memcpy(sh, shape, sizeof(int64_t) * (size_t)r);
	for (int d = 0; d + 2 < r; d++)
		for (int side = 0; side < 2; side++) {
			int64_t n = side ? hi[d] : lo[d];
			if (n <= 0)
				continue;
			int64_t ps[MAX_RANK];
			memcpy(ps, sh, sizeof ps);
			ps[2 + d] = n;
			char *l = list_text(r, ps);
			char *f = tmp(c, "%s(full(%s, %s))", dtype_name(dt), l, fill);
			free(l);
			char *t = side ? tmp(c, "concat([%s, %s], axis=%d)", cur, f, 2 + d)
			               : tmp(c, "concat([%s, %s], axis=%d)", f, cur, 2 + d);
			free(f);
			free(cur);
			cur = t;
			sh[2 + d] += n;
		}
	return cur;
}

/* The shape of a pool's output: x's N and C, then the ns pooled sizes. */
static void pooled_shape(const Val *x, int ns, const int64_t *out, int64_t *sh)
{
	sh[0] = x->shape[0];
	sh[1] = x->shape[1];
	for (int d = 0; d < ns; d++)
		sh[2 + d] = out[d];
}

/* Pooling of any rank and dilation as a max or sum over the kernel's taps,
 * each a strided slice of the padded input; the average divides by the
 * count of counted positions under each window, computed here. */
static int pool_by_taps(Ctx *c, NodeIO *io, Val *x, int is_max, int incl, const int64_t *k, const int64_t *st,
                        const int64_t *dil, const int64_t *lo, const int64_t *hi, const int64_t *cnt_hi,
                        const int64_t *out)
{
	int ns = x->rank - 2;
	int64_t taps = 1;
	for (int d = 0; d < ns; d++)
		taps *= k[d];
	if (taps > 64)
		return node_err(c, 1, "a pooling window of %lld taps with dilation or 3 spatial axes is not supported",
		                (long long)taps), -1;
	int want_idx = is_max && io->n->n_output > 1 && io->n->output[1] && *io->n->output[1];
	int colmajor = (int)attr_i(io->n, "storage_order", 0);
	char *idx = NULL;
	char *xp = padnd(c, ref(c, x), x->dt, x->rank, x->shape, lo, hi, is_max ? "-inf" : "0.0");
	int64_t psh[MAX_RANK];
	memcpy(psh, x->shape, sizeof psh);
	for (int d = 0; d < ns; d++)
		psh[2 + d] += lo[d] + hi[d];
	char *acc = NULL;
	for (int64_t t = 0; t < taps; t++) {
		int64_t off[MAX_RANK], r = t;
		for (int d = ns - 1; d >= 0; d--) {
			off[d] = r % k[d];
			r /= k[d];
		}
		Val *cur = new_val(c, "", x->dt, x->rank, psh);
		free(cur->name);
		cur->name = xasprintf("%s.pad", out_name(io, 0));
		cur->id = xstrdup(xp);
		for (int d = 0; d < ns; d++) {
			Onnx__NodeProto fake = *io->n;
			char *nm = xasprintf("%s.tap%lld.%d", out_name(io, 0), (long long)t, d);
			char *outs[1] = {nm};
			fake.output = outs;
			fake.n_output = 1;
			NodeIO sub = *io;
			sub.n = &fake;
			int rc = take_positions(c, &sub, 0, cur, 2 + d, out[d], off[d] * dil[d], st[d]);
			free(nm);
			if (rc < 0) {
				free(xp);
				free(acc);
				return -1;
			}
			cur = c->vals[c->nvals - 1];
		}
		if (want_idx) {
			/* the flat input position each output reads at this tap (NCHW order) */
			int64_t osh2[MAX_RANK];
			pooled_shape(x, ns, out, osh2);
			Val *tv = new_val(c, "", DT_I64, x->rank, osh2);
			free(tv->name);
			tv->name = xasprintf("%s.tap%lld", out_name(io, 1), (long long)t);
			val_alloc(tv);
			int64_t pos[MAX_RANK];
			for (int64_t q = 0; q < tv->n; q++) {
				unravel(q, x->rank, osh2, pos);
				int64_t pp[MAX_RANK], sp = 0, area = 1;
				for (int d = 0; d < ns; d++) {
					pp[d] = pos[2 + d] * st[d] + off[d] * dil[d] - lo[d];
					pp[d] = pp[d] < 0 ? 0 : pp[d] >= x->shape[2 + d] ? x->shape[2 + d] - 1 : pp[d];
					area *= x->shape[2 + d];
				}
				/* storage_order 1: the spatial position in column-major order */
				for (int e = 0; e < ns; e++) {
					int d = colmajor ? ns - 1 - e : e;
					sp = sp * x->shape[2 + d] + pp[d];
				}
				tv->i[q] = (pos[0] * x->shape[1] + pos[1]) * area + sp;
			}
			char *ti = xstrdup(ref(c, tv));
			char *nidx = !idx ? xstrdup(ti) : tmp(c, "where(%s > %s, %s, %s)", cur->id, acc, ti, idx);
			free(ti);
			free(idx);
			idx = nidx;
		}
		char *nacc = !acc ? xstrdup(cur->id)
		                  : tmp(c, is_max ? "maximum(%s, %s)" : "%s + %s", acc, cur->id);
		free(acc);
		acc = nacc;
	}
	free(xp);
	if (want_idx) {
		int64_t ish[MAX_RANK];
		pooled_shape(x, ns, out, ish);
		Val *iv = def(c, io, 1, DT_I64, x->rank, ish, "%s", idx);
		free(idx);
		if (!iv) {
			free(acc);
			return -1;
		}
	}
	int64_t osh[MAX_RANK];
	pooled_shape(x, ns, out, osh);
	Val *o;
	if (is_max) {
		o = def(c, io, 0, x->dt, x->rank, osh, "%s", acc);
	} else {
		/* how many counted positions each window covers */
		int64_t csh[MAX_RANK] = {1, 1};
		for (int d = 0; d < ns; d++)
			csh[2 + d] = out[d];
		Val *cnt = new_val(c, "", x->dt, x->rank, csh);
		free(cnt->name);
		cnt->name = xasprintf("%s.count", out_name(io, 0));
		val_alloc(cnt);
		int64_t pos[MAX_RANK];
		for (int64_t q = 0; q < cnt->n; q++) {
			unravel(q, x->rank, csh, pos);
			int64_t n = 1;
			for (int d = 0; d < ns; d++) {
				int64_t m = 0;
				for (int64_t j = 0; j < k[d]; j++) {
					int64_t p = pos[2 + d] * st[d] + j * dil[d] - lo[d]; /* in input coordinates */
					/* count_include_pad counts the explicit pads, not what
					 * ceil mode adds */
					int64_t lo_ok = incl ? -lo[d] : 0;
					int64_t hi_ok = incl ? x->shape[2 + d] + cnt_hi[d] : x->shape[2 + d];
					m += p >= lo_ok && p < hi_ok;
				}
				n *= m;
			}
			kset(cnt, q, (double)n);
		}
		o = def(c, io, 0, x->dt, x->rank, osh, "(%s) / %s", acc, ref(c, cnt));
	}
	free(acc);
	return o ? 0 : -1;
}

int tr_pool(Ctx *c, NodeIO *io, int is_max)
{
	Val *x0;
	if (inputs(c, io, "an input", 1, &x0) < 0)
		return -1;
	int want_idx = io->n->n_output > 1 && io->n->output[1] && *io->n->output[1];
	if (want_idx && !is_max)
		return node_err(c, 0, "AveragePool has no Indices output"), -1;
	if (x0->rank < 3)
		return node_err(c, 0, "input of rank %d", x0->rank), -1;
	if (!dtype_is_float(x0->dt) && (!is_max || x0->dt == DT_BOOL))
		return node_err(c, 1, "average pooling of %s is not supported", dtype_name(x0->dt)), -1;
	if (!dtype_is_float(x0->dt)) {
		/* integers (uint8 images) through f64, exact below 2^53 */
		Val *w = new_val(c, "", DT_F64, x0->rank, x0->shape);
		free(w->name);
		w->name = xasprintf("%s.f64", x0->name);
		w->id = tmp(c, "f64(%s)", ref(c, x0));
		NodeIO sub = *io;
		Onnx__NodeProto fake = *io->n;
		char *nm = xasprintf("%s.f64", out_name(io, 0));
		char *outs[1] = {nm};
		fake.output = outs;
		fake.n_output = 1;
		sub.n = &fake;
		sub.in[0] = w;
		int rc = tr_pool(c, &sub, 1);
		free(nm);
		if (rc < 0)
			return -1;
		Val *r = c->vals[c->nvals - 1];
		return def(c, io, 0, x0->dt, r->rank, r->shape, "%s(%s)", dtype_name(x0->dt), r->id) ? 0 : -1;
	}
	int64_t gd[MAX_RANK + 1];
	int gdn = attr_ints(io->n, "dilations", gd, MAX_RANK);
	int dilated = 0;
	for (int d = 0; d < gdn; d++)
		dilated |= gd[d] != 1;
	if (x0->rank > 4 || dilated || want_idx) {
		int ns = x0->rank - 2;
		int64_t k[MAX_RANK], st[MAX_RANK], dl[MAX_RANK], lo[MAX_RANK], hi[MAX_RANK], out[MAX_RANK], t[2 * MAX_RANK + 1];
		int64_t xhi[MAX_RANK];
		if (attr_ints(io->n, "kernel_shape", k, MAX_RANK) != ns)
			return node_err(c, 0, "kernel_shape must have %d entries", ns), -1;
		for (int d = 0; d < ns; d++)
			st[d] = dl[d] = 1, lo[d] = hi[d] = 0;
		if (attr_ints(io->n, "strides", t, MAX_RANK) == ns)
			memcpy(st, t, sizeof(int64_t) * (size_t)ns);
		if (gdn == ns)
			memcpy(dl, gd, sizeof(int64_t) * (size_t)ns);
		if (attr_ints(io->n, "pads", t, 2 * MAX_RANK) == 2 * ns)
			for (int d = 0; d < ns; d++)
				lo[d] = t[d], hi[d] = t[ns + d];
		char *ap = attr_s(io->n, "auto_pad");
		int same = ap && !strncmp(ap, "SAME", 4), lower = ap && !strcmp(ap, "SAME_LOWER");
		free(ap);
		int ceil_mode = (int)attr_i(io->n, "ceil_mode", 0);
		for (int d = 0; d < ns; d++) {
			if (k[d] < 1 || st[d] < 1 || dl[d] < 1 || lo[d] < 0 || hi[d] < 0)
				return node_err(c, 0, "kernel_shape, strides, dilations and pads must be positive"), -1;
			int64_t ek = dl[d] * (k[d] - 1) + 1, in = x0->shape[2 + d];
			if (same) {
				out[d] = (in + st[d] - 1) / st[d];
				int64_t tot = (out[d] - 1) * st[d] + ek - in;
				tot = tot < 0 ? 0 : tot;
				lo[d] = lower ? tot - tot / 2 : tot / 2;
				hi[d] = tot - lo[d];
			} else {
				int64_t span = in + lo[d] + hi[d] - ek;
				if (span < 0)
					return node_err(c, 0, "the kernel is larger than the padded input"), -1;
				out[d] = (ceil_mode ? (span + st[d] - 1) / st[d] : span / st[d]) + 1;
				if (ceil_mode && (out[d] - 1) * st[d] >= in + lo[d])
					out[d]--;
			}
			xhi[d] = hi[d];
			int64_t need = (out[d] - 1) * st[d] + ek - (in + lo[d] + hi[d]);
			if (need > 0)
				hi[d] += need;
		}
		if (attr_i(io->n, "storage_order", 0) && !want_idx)
			return node_err(c, 1, "storage_order=1 is not supported"), -1;
		return pool_by_taps(c, io, x0, is_max, (int)attr_i(io->n, "count_include_pad", 0), k, st, dl, lo, hi, xhi,
		                    out);
	}
	int one = x0->rank == 3;
	int64_t k[2], st[2], dil[2], pads[4], out[2];
	if (one) {
		/* [N, C, L] as [N, C, 1, L] */
		int64_t t[MAX_RANK + 1];
		k[0] = st[0] = dil[0] = 1;
		if (attr_ints(io->n, "kernel_shape", t, 1) != 1)
			return node_err(c, 0, "kernel_shape must have 1 entry"), -1;
		k[1] = t[0];
		st[1] = attr_ints(io->n, "strides", t, 1) == 1 ? t[0] : 1;
		dil[1] = attr_ints(io->n, "dilations", t, 1) == 1 ? t[0] : 1;
	} else if (get2(c, io, "kernel_shape", k, 0) < 0 || get2(c, io, "strides", st, 1) < 0 ||
	           get2(c, io, "dilations", dil, 1) < 0) {
		return -1;
	}
	if (k[0] < 1 || k[1] < 1 || st[0] < 1 || st[1] < 1)
		return node_err(c, 0, "kernel_shape and strides must be positive"), -1;
	if (dil[0] != 1 || dil[1] != 1)
		return node_err(c, 1, "dilated pooling is not supported"), -1;
	if (attr_i(io->n, "storage_order", 0))
		return node_err(c, 1, "storage_order=1 is not supported"), -1;
	int ceil_mode = (int)attr_i(io->n, "ceil_mode", 0);
	int64_t xs4[4] = {x0->shape[0], x0->shape[1], one ? 1 : x0->shape[2], one ? x0->shape[2] : x0->shape[3]};
	if (one) {
		int64_t p1[4] = {0, 0, 0, 0};
		int np = attr_ints(io->n, "pads", p1, 2);
		char *ap = attr_s(io->n, "auto_pad");
		int same = ap && strncmp(ap, "SAME", 4) == 0;
		int lower = ap && !strcmp(ap, "SAME_LOWER");
		free(ap);
		for (int d = 0; d < 2; d++) {
			int64_t ek = k[d];
			if (same) {
				int64_t o = (xs4[2 + d] + st[d] - 1) / st[d];
				int64_t tot = (o - 1) * st[d] + ek - xs4[2 + d];
				tot = tot < 0 ? 0 : tot;
				pads[d] = lower ? tot - tot / 2 : tot / 2;
				pads[d + 2] = tot - pads[d];
				out[d] = o;
			} else {
				pads[d] = d == 1 && np == 2 ? p1[0] : 0;
				pads[d + 2] = d == 1 && np == 2 ? p1[1] : 0;
				int64_t span = xs4[2 + d] + pads[d] + pads[d + 2] - ek;
				if (span < 0)
					return node_err(c, 0, "the kernel is larger than the padded input"), -1;
				out[d] = (ceil_mode ? (span + st[d] - 1) / st[d] : span / st[d]) + 1;
				if (ceil_mode && (out[d] - 1) * st[d] >= xs4[2 + d] + pads[d])
					out[d]--;
			}
		}
	} else if (conv_geometry(c, io, 2, xs4 + 2, k, st, dil, ceil_mode, pads, out) < 0) {
		return -1;
	}
	/* end padding that ceil mode needs beyond the explicit pads */
	int64_t full_p[4];
	memcpy(full_p, pads, sizeof full_p);
	for (int d = 0; d < 2; d++) {
		int64_t need = (out[d] - 1) * st[d] + k[d] - (xs4[2 + d] + pads[d] + pads[d + 2]);
		if (need > 0)
			full_p[d + 2] += need;
	}
	int64_t sh4[4] = {xs4[0], xs4[1], out[0], out[1]};
	int64_t osh[MAX_RANK] = {xs4[0], xs4[1], one ? out[1] : out[0], out[1]};
	int orank = x0->rank;
	char kst[160];
	snprintf(kst, sizeof kst, "[%lld, %lld], stride=[%lld, %lld]", (long long)k[0], (long long)k[1], (long long)st[0],
	         (long long)st[1]);
	char *xs = one ? tmp(c, "reshape(%s, [%lld, %lld, 1, %lld])", ref(c, x0), (long long)xs4[0], (long long)xs4[1],
	                     (long long)xs4[3])
	               : xstrdup(ref(c, x0));
	char *res = NULL;
	int half_ok = full_p[0] * 2 <= k[0] && full_p[2] * 2 <= k[0] && full_p[1] * 2 <= k[1] && full_p[3] * 2 <= k[1];
	if (is_max) {
		int sym = full_p[0] == full_p[2] && full_p[1] == full_p[3] && half_ok;
		if (sym) {
			res = xasprintf("max_pool2d(%s, %s, padding=[%lld, %lld])", xs, kst, (long long)full_p[0],
			                (long long)full_p[1]);
		} else {
			char *p = pad2d(c, xs, x0->dt, xs4, full_p, "-inf");
			res = xasprintf("max_pool2d(%s, %s)", p, kst);
			free(p);
		}
	} else {
		int incl = (int)attr_i(io->n, "count_include_pad", 0);
		int nopad = !full_p[0] && !full_p[1] && !full_p[2] && !full_p[3];
		int sym = full_p[0] == full_p[2] && full_p[1] == full_p[3] && !memcmp(full_p, pads, sizeof full_p) && half_ok;
		if (nopad || (incl && sym)) {
			res = xasprintf("avg_pool2d(%s, %s, padding=[%lld, %lld])", xs, kst, (long long)pads[0],
			                (long long)pads[1]);
		} else {
			/* the average over the counted positions: sum / count, both by
			 * pooling zero-padded tensors */
			char *num = pad2d(c, xs, x0->dt, xs4, full_p, "0.0");
			int64_t ones_sh[4] = {1, 1, xs4[2], xs4[3]};
			char *ol = list_text(4, ones_sh);
			char *ones = tmp(c, "%s(ones(%s))", dtype_name(x0->dt), ol);
			free(ol);
			char *den;
			if (incl) {
				int64_t p2[4] = {pads[0], pads[1], pads[2], pads[3]};
				char *a = pad2d(c, ones, x0->dt, ones_sh, p2, "1.0");
				int64_t rest[4] = {0, 0, full_p[2] - pads[2], full_p[3] - pads[3]};
				int64_t s3[4] = {1, 1, xs4[2] + pads[0] + pads[2], xs4[3] + pads[1] + pads[3]};
				den = pad2d(c, a, x0->dt, s3, rest, "0.0");
				free(a);
			} else {
				den = pad2d(c, ones, x0->dt, ones_sh, full_p, "0.0");
			}
			res = xasprintf("avg_pool2d(%s, %s) / avg_pool2d(%s, %s)", num, kst, den, kst);
			free(num);
			free(ones);
			free(den);
		}
	}
	Val *o;
	if (one) {
		char *t = tmp(c, "%s", res);
		o = def(c, io, 0, x0->dt, orank, osh, "reshape(%s, [%lld, %lld, %lld])", t, (long long)sh4[0],
		        (long long)sh4[1], (long long)sh4[3]);
		free(t);
	} else {
		o = def(c, io, 0, x0->dt, 4, sh4, "%s", res);
	}
	free(res);
	free(xs);
	return o ? 0 : -1;
}

/* GlobalAveragePool and GlobalMaxPool: mean or amax over the spatial axes,
 * kept. */
int tr_global_pool(Ctx *c, NodeIO *io)
{
	Val *x;
	if (inputs(c, io, "an input of rank 3 or more", 1, &x) < 0)
		return -1;
	if (x->rank < 3)
		return node_err(c, 0, "needs an input of rank 3 or more"), -1;
	int64_t sh[MAX_RANK], ax[MAX_RANK];
	for (int k = 0; k < x->rank; k++) {
		sh[k] = k < 2 ? x->shape[k] : 1;
		ax[k] = k + 2;
	}
	const char *fn = !strcmp(io->n->op_type, "GlobalMaxPool") ? "amax" : "mean";
	char *al = list_text(x->rank - 2, ax);
	Val *o = def(c, io, 0, x->dt, x->rank, sh, "%s(%s, axis=%s, keepdim=true)", fn, ref(c, x), al);
	free(al);
	return o ? 0 : -1;
}

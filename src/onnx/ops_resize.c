/* ops_resize.c - Resize (opset 11 on) and Upsample: every mode and
 * coordinate transformation of ONNX's reference, as gathers and weights.
 *
 * The shapes are known at import, so for each axis that changes the
 * importer computes, in double as ONNX's reference does, which input
 * positions each output position reads and with which weights (2 taps for
 * nearest and linear, 4 for cubic). The axis becomes a sum over the taps
 * of take_along_axis(x, IDX, axis) * W, IDX and W constants of the output
 * axis's length; nearest is a single gather. Axes are resized one after
 * the other, last first, which is the reference's order of 1-d
 * interpolations. tf_crop_and_resize's positions outside the input get
 * extrapolation_value through a constant added where their weights are 0.
 * GridSample, whose positions are run-time values, is at the end. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { CT_HALF, CT_PYTORCH_HALF, CT_ALIGN, CT_ASYM, CT_TF_CROP, CT_TF_HALF_NN };
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL };
enum { RM_NEAREST, RM_LINEAR, RM_CUBIC };

typedef struct Rs {
	int mode, ct, nearest, exclude;
	double cubic_a, extrap;
} Rs;

static int pick(const char *s, const char *const *names, int def)
{
	if (!s)
		return def;
	for (int k = 0; names[k]; k++)
		if (!strcmp(s, names[k]))
			return k;
	return -1;
}

/* The taps of output position x of an axis from `in` to `out` positions,
 * scale `sc` (out / in, or the scales input) and roi [r0, r1] (for
 * tf_crop_and_resize): idx[t] (clamped to the input, as the reference's
 * edge padding) and w[t]; 0 when the position lies outside the input
 * (tf_crop_and_resize: extrapolation_value). */
static int taps(const Rs *o, int64_t in, double sc, double r0, double r1, int64_t x, int n, int64_t *idx,
                double *w)
{
	double ow = sc * (double)in, xo;
	switch (o->ct) {
	case CT_ALIGN:
		xo = ow == 1 ? 0.0 : (double)x * (double)(in - 1) / (ow - 1);
		break;
	case CT_ASYM:
		xo = (double)x / sc;
		break;
	case CT_TF_CROP:
		xo = ow == 1 ? (r1 - r0) * (double)(in - 1) / 2 : (double)x * (r1 - r0) * (double)(in - 1) / (ow - 1);
		xo += r0 * (double)(in - 1);
		if (xo < 0 || xo > (double)(in - 1))
			return 0;
		break;
	case CT_TF_HALF_NN:
		xo = ((double)x + 0.5) / sc;
		break;
	case CT_PYTORCH_HALF:
		xo = ow == 1 ? -0.5 : ((double)x + 0.5) / sc - 0.5;
		break;
	default:
		xo = ((double)x + 0.5) / sc - 0.5;
		break;
	}
	/* the taps around xo: the reference prefers the one below, so a ratio
	 * in (0, 1] from the tap just before ceil(xo) */
	double fl = floor(xo);
	double ratio = xo == fl ? 1.0 : xo - fl;
	int64_t first = (int64_t)ceil(xo) - n / 2;
	double c[4];
	if (o->mode == RM_NEAREST) {
		int up;
		if (xo == fl)
			up = 1;
		else if (o->nearest == NM_ROUND_FLOOR)
			up = ratio > 0.5;
		else if (o->nearest == NM_ROUND_CEIL)
			up = ratio >= 0.5;
		else
			up = o->nearest == NM_CEIL;
		c[0] = !up, c[1] = up;
	} else if (o->mode == RM_LINEAR) {
		c[0] = 1 - ratio, c[1] = ratio;
	} else {
		double A = o->cubic_a, r = ratio, s = 1 - ratio;
		c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
		c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
		c[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
		c[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
	}
	double sum = 0;
	for (int t = 0; t < n; t++) {
		int64_t i = first + t;
		if (o->exclude && (i < 0 || i >= in))
			c[t] = 0;
		sum += c[t];
		idx[t] = i < 0 ? 0 : i >= in ? in - 1 : i;
	}
	for (int t = 0; t < n; t++)
		w[t] = o->exclude && sum != 0 ? c[t] / sum : c[t];
	return 1;
}

/* A constant of the output's rank, len on axis ax, 1 elsewhere, named after
 * the node's output (a weight when not all one value); its elements are
 * set by the caller. */
Val *axis_const(Ctx *c, const char *out, const char *what, int t, DType dt, int rank, int ax, int64_t len)
{
	int64_t sh[MAX_RANK];
	for (int k = 0; k < rank; k++)
		sh[k] = k == ax ? len : 1;
	char *base = xasprintf("%s::%s.%d.%d", out, what, ax, t), *nm = fresh_name(c, base);
	Val *v = new_val(c, nm, dt, rank, sh);
	free(base);
	free(nm);
	val_alloc(v);
	return v;
}

/* x resized along axis ax from in to out positions: the expression. */
static char *resize_axis(Ctx *c, NodeIO *io, const Rs *o, const char *x, DType dt, int rank, int ax, int64_t in,
                         int64_t out, double sc, double r0, double r1)
{
	int n = o->mode == RM_CUBIC ? 4 : 2;
	const char *oname = out_name(io, 0);
	Val *iv[4], *wv[4], *ev = NULL;
	int used[4] = {0}, ident = 1;
	for (int t = 0; t < n; t++) {
		iv[t] = axis_const(c, oname, "idx", t, DT_I64, rank, ax, out);
		wv[t] = axis_const(c, oname, "w", t, dt, rank, ax, out);
	}
	for (int64_t p = 0; p < out; p++) {
		int64_t idx[4];
		double w[4];
		if (!taps(o, in, sc, r0, r1, p, n, idx, w)) {
			if (!ev)
				ev = axis_const(c, oname, "extrapolated", 0, dt, rank, ax, out);
			kset(ev, p, o->extrap);
			ident = 0;
			for (int t = 0; t < n; t++)
				kseti(iv[t], p, 0), kset(wv[t], p, 0);
			continue;
		}
		if (o->mode == RM_NEAREST) {
			/* one gather: the tap of weight 1 */
			idx[0] = w[0] != 0 ? idx[0] : idx[1];
			w[0] = 1, w[1] = 0;
		}
		for (int t = 0; t < n; t++) {
			kseti(iv[t], p, idx[t]);
			kset(wv[t], p, w[t]);
			used[t] |= w[t] != 0;
			if (w[t] != 0 && (w[t] != 1 || idx[t] != p))
				ident = 0;
		}
	}
	if (ident && in == out)
		return xstrdup(x);
	Buf b = {0};
	int terms = 0;
	for (int t = 0; t < n; t++) {
		if (!used[t])
			continue;
		/* nearest's one gather needs no product (but 0 where extrapolated) */
		int alone = !ev && o->mode == RM_NEAREST;
		buf_printf(&b, "%stake_along_axis(%s, %s, axis=%d)", terms++ ? " + " : "", x, ref(c, iv[t]), ax);
		if (!alone)
			buf_printf(&b, " * %s", ref(c, wv[t]));
	}
	if (ev)
		buf_printf(&b, "%s%s", terms++ ? " + " : "", ref(c, ev));
	if (!terms)
		buf_printf(&b, "%s * %s(0)", x, dtype_name(dt));
	char *r = tmp(c, "%s", b.s);
	buf_free(&b);
	return r;
}

int tr_resize(Ctx *c, NodeIO *io)
{
	Onnx__NodeProto *n = io->n;
	int upsample = !strcmp(n->op_type, "Upsample");
	Val *x = in_(io, 0);
	if (!x)
		return node_err(c, 0, "needs an input"), -1;
	if (!upsample && c->opset < 11)
		return node_err(c, 1, "Resize before opset 11 is not supported"), -1;
	if (!dtype_is_float(x->dt))
		return node_err(c, 1, "%s of %s is not supported", n->op_type, dtype_name(x->dt)), -1;
	Rs o = {.cubic_a = attr_f(n, "cubic_coeff_a", -0.75), .extrap = attr_f(n, "extrapolation_value", 0)};
	static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
	static const char *const cts[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
	                                  "tf_crop_and_resize", "tf_half_pixel_for_nn", NULL};
	static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
	char *ms = attr_s(n, "mode");
	/* Upsample's "bilinear" (opset 7) is its linear */
	o.mode = ms && upsample && !strcmp(ms, "bilinear") ? RM_LINEAR : pick(ms, modes, RM_NEAREST);
	if (o.mode < 0 || (upsample && o.mode == RM_CUBIC)) {
		node_err(c, 1, "mode '%.40s' is not supported", ms);
		free(ms);
		return -1;
	}
	free(ms);
	if (upsample) {
		/* Upsample reads x / scale, and nearest takes the position below */
		o.ct = CT_ASYM;
		o.nearest = NM_FLOOR;
	} else {
		char *cs = attr_s(n, "coordinate_transformation_mode"), *ns = attr_s(n, "nearest_mode");
		char *kp = attr_s(n, "keep_aspect_ratio_policy");
		o.ct = pick(cs, cts, CT_HALF);
		o.nearest = pick(ns, nms, NM_ROUND_FLOOR);
		o.exclude = attr_i(n, "exclude_outside", 0) != 0;
		int rc = 0;
		if (o.ct < 0)
			rc = -1, node_err(c, 1, "coordinate_transformation_mode '%.40s' is not supported", cs);
		else if (o.nearest < 0)
			rc = -1, node_err(c, 1, "nearest_mode '%.40s' is not supported", ns);
		else if (attr_i(n, "antialias", 0))
			rc = -1, node_err(c, 1, "antialias is not supported");
		else if (attr(n, "axes"))
			rc = -1, node_err(c, 1, "the axes attribute is not supported");
		else if (kp && strcmp(kp, "stretch"))
			rc = -1, node_err(c, 1, "keep_aspect_ratio_policy '%.40s' is not supported", kp);
		free(cs);
		free(ns);
		free(kp);
		if (rc < 0)
			return -1;
	}
	/* the scale of each axis and the output's shape */
	int r = x->rank;
	double sc[MAX_RANK], roi[2 * MAX_RANK];
	int64_t sh[MAX_RANK];
	Val *sv = NULL, *zv = NULL, *rv = NULL;
	if (upsample) {
		if (attr(n, "scales")) {
			int got = 0;
			Onnx__AttributeProto *a = attr(n, "scales");
			for (size_t k = 0; k < a->n_floats && k < MAX_RANK; k++)
				sc[got++] = a->floats[k];
			if (got != r)
				return node_err(c, 0, "scales has %d values for rank %d", got, r), -1;
		} else {
			sv = in_(io, 1);
			if (!sv)
				return node_err(c, 0, "needs scales"), -1;
		}
	} else {
		rv = in_(io, 1);
		sv = in_(io, 2);
		zv = in_(io, 3);
		if (sv && sv->n == 0)
			sv = NULL;
		if (zv && zv->n == 0)
			zv = NULL;
		if (!sv == !zv)
			return node_err(c, 0, "needs exactly one of scales and sizes"), -1;
	}
	if (need_known(c, sv, "scales") < 0 || need_known(c, zv, "sizes") < 0 ||
	    (o.ct == CT_TF_CROP && need_known(c, rv, "roi") < 0))
		return -1;
	if ((sv && sv->n != r) || (zv && zv->n != r))
		return node_err(c, 0, "%s has %lld values for rank %d", sv ? "scales" : "sizes",
		                (long long)(sv ? sv->n : zv->n), r), -1;
	if (o.ct == CT_TF_CROP && (!rv || rv->n != 2 * r))
		return node_err(c, 0, "roi must have %d values", 2 * r), -1;
	for (int k = 0; k < r; k++) {
		int64_t in = x->shape[k];
		if (zv) {
			sh[k] = kgeti(zv, k);
			if (sh[k] < 0)
				return node_err(c, 0, "a negative size %lld", (long long)sh[k]), -1;
			sc[k] = in ? (double)sh[k] / (double)in : 1;
		} else {
			if (sv)
				sc[k] = (double)(float)kget(sv, k);
			if (!(sc[k] > 0) || !isfinite(sc[k]))
				return node_err(c, 0, "scale %g is not positive", sc[k]), -1;
			double o_ = sc[k] * (double)in;
			if (o_ >= 9.2e18)
				return node_err(c, 0, "scale %g makes the output too big", sc[k]), -1;
			sh[k] = (int64_t)o_;
		}
		roi[k] = rv && o.ct == CT_TF_CROP ? kget(rv, k) : 0;
		roi[r + k] = rv && o.ct == CT_TF_CROP ? kget(rv, r + k) : 1;
	}
	if (check_shape(c, r, sh) < 0)
		return -1;
	for (int k = 0; k < r; k++)
		if (x->shape[k] == 0 && sh[k] > 0)
			return node_err(c, 0, "cannot resize an empty axis %d to %lld", k, (long long)sh[k]), -1;
	/* the axes one after the other, last first */
	char *cur = xstrdup(ref(c, x));
	for (int k = r - 1; k >= 0; k--) {
		if (sh[k] == x->shape[k] && o.ct != CT_TF_CROP && sc[k] == 1)
			continue;
		if (sh[k] == 0)
			continue;
		char *nx = resize_axis(c, io, &o, cur, x->dt, r, k, x->shape[k], sh[k], sc[k], roi[k], roi[r + k]);
		free(cur);
		cur = nx;
	}
	int rc = def_shaped(c, io, x->dt, r, sh, cur);
	free(cur);
	return rc;
}

/* ---- GridSample: X [N, C, H, W] read at grid [N, Ho, Wo, 2] of (x, y) in
 * [-1, 1], as ONNX's reference (opset 16's mode names and opset 20's): the
 * point denormalised (align_corners), rounded half to even for nearest,
 * moved inside the borders when outside them (border: clamped to the
 * pixels; reflection: reflected), then 1, 4 or 16 taps, each a
 * take_along_axis of X's flattened planes at an index the padding mode
 * keeps in range (zeros: a tap outside reads 0). Positions are computed at
 * run time, in X's dtype. */

typedef struct Gs {
	Ctx *c;
	DType dt;
	const char *dn; /* dtype name */
	int pad;        /* 0 zeros, 1 border, 2 reflection */
	int align;
} Gs;

/* v as a 0-d tensor of the dtype: f32(-0.5) */
static const char *gs_num(Gs *g, char *buf, size_t n, double v)
{
	char l[64];
	float_lit(l, sizeof l, v, g->dt);
	snprintf(buf, n, "%s(%s)", g->dn, l);
	return buf;
}

/* A point outside [lo, hi] reflected by the near border until inside, as
 * the reference's _gs_reflect. */
static char *gs_reflect(Gs *g, const char *v, double lo, double hi)
{
	Ctx *c = g->c;
	char L[80], Hh[80], R[80];
	gs_num(g, L, sizeof L, lo);
	gs_num(g, Hh, sizeof Hh, hi);
	gs_num(g, R, sizeof R, hi - lo);
	if (hi - lo <= 0)
		return tmp(c, "%s * %s(0) + %s", v, g->dn, L);
	char *dl = tmp(c, "maximum(%s - %s, %s(0))", L, v, g->dn), *dh = tmp(c, "maximum(%s - %s, %s(0))", v, Hh, g->dn);
	char *nl = tmp(c, "floor(%s / %s)", dl, R), *nh = tmp(c, "floor(%s / %s)", dh, R);
	char *o = tmp(c,
	              "where(%s < %s, where(fmod(%s, %s(2)) == %s(0), %s + (%s - %s * %s), %s - (%s - %s * %s)), "
	              "where(%s > %s, where(fmod(%s, %s(2)) == %s(0), %s - (%s - %s * %s), %s + (%s - %s * %s)), %s))",
	              v, L, nl, g->dn, g->dn, L, dl, nl, R, Hh, dl, nl, R, v, Hh, nh, g->dn, g->dn, Hh, dh, nh, R, L, dh,
	              nh, R, v);
	free(dl);
	free(dh);
	free(nl);
	free(nh);
	return o;
}

/* The index (i64) a tap at integral coordinate t of an axis of d pixels
 * reads, and for zeros padding *valid (bool) where it is inside. */
static char *gs_index(Gs *g, const char *t, int64_t d, char **valid)
{
	Ctx *c = g->c;
	char D1[80], Z[80];
	gs_num(g, D1, sizeof D1, (double)(d - 1));
	gs_num(g, Z, sizeof Z, 0);
	*valid = NULL;
	if (g->pad == 0) {
		*valid = tmp(c, "%s >= %s && %s <= %s", t, Z, t, D1);
		return tmp(c, "i64(where(%s, %s, %s))", *valid, t, Z);
	}
	if (g->pad == 1)
		return tmp(c, "i64(minimum(maximum(%s, %s), %s))", t, Z, D1);
	char *r = gs_reflect(g, t, g->align ? 0 : -0.5, g->align ? (double)(d - 1) : (double)d - 0.5);
	char *o = tmp(c, "i64(%s)", r);
	free(r);
	return o;
}

/* Tap weights of offset f = x - floor(x) (1 - f, f; or Keys' cubic, a = -0.75). */
static void gs_weights(Gs *g, const char *f, int cubic, char **w)
{
	Ctx *c = g->c;
	if (!cubic) {
		w[0] = tmp(c, "%s(1) - %s", g->dn, f);
		w[1] = xstrdup(f);
		return;
	}
	const char *d = g->dn;
	char *f1 = tmp(c, "%s + %s(1)", f, d), *g1 = tmp(c, "%s(1) - %s", d, f), *g2 = tmp(c, "%s(2) - %s", d, f);
	/* A = -0.75: A*(s)-5A = -0.75s+3.75, 8A = -6, -4A = 3, A+2 = 1.25, A+3 = 2.25 */
	w[0] = tmp(c, "((%s(-0.75) * %s + %s(3.75)) * %s - %s(6)) * %s + %s(3)", d, f1, d, f1, d, f1, d);
	w[1] = tmp(c, "(%s(1.25) * %s - %s(2.25)) * %s * %s + %s(1)", d, f, d, f, f, d);
	w[2] = tmp(c, "(%s(1.25) * %s - %s(2.25)) * %s * %s + %s(1)", d, g1, d, g1, g1, d);
	w[3] = tmp(c, "((%s(-0.75) * %s + %s(3.75)) * %s - %s(6)) * %s + %s(3)", d, g2, d, g2, d, g2, d);
	free(f1);
	free(g1);
	free(g2);
}

int tr_grid_sample(Ctx *c, NodeIO *io)
{
	Val *x, *gr;
	if (inputs(c, io, "X and grid", 2, &x, &gr) < 0)
		return -1;
	if (!dtype_is_float(x->dt) || gr->dt != x->dt)
		return node_err(c, 0, "needs float X and a grid of its dtype"), -1;
	if (x->rank != 4)
		return node_err(c, 1, "%d-d GridSample is not supported (2-d is)", x->rank - 2), -1;
	if (gr->rank != 4 || gr->shape[0] != x->shape[0] || gr->shape[3] != 2)
		return node_err(c, 0, "the grid must be [N, H_out, W_out, 2]"), -1;
	static const char *const modes[] = {"bilinear", "nearest", "bicubic", NULL};
	static const char *const modes20[] = {"linear", "nearest", "cubic", NULL};
	static const char *const pads[] = {"zeros", "border", "reflection", NULL};
	char *ms = attr_s(io->n, "mode"), *ps = attr_s(io->n, "padding_mode");
	int mode = pick(ms, modes, 0), pad = pick(ps, pads, 0);
	if (mode < 0)
		mode = pick(ms, modes20, 0);
	if (mode < 0 || pad < 0) {
		node_err(c, 1, "%s '%.40s' is not supported", mode < 0 ? "mode" : "padding_mode", mode < 0 ? ms : ps);
		free(ms);
		free(ps);
		return -1;
	}
	free(ms);
	free(ps);
	Gs g = {c, x->dt, dtype_name(x->dt), pad, (int)attr_i(io->n, "align_corners", 0)};
	int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], Ho = gr->shape[1], Wo = gr->shape[2];
	int64_t d[2] = {W, H};
	char *xf = tmp(c, "reshape(%s, [%lld, %lld, %lld])", ref(c, x), (long long)N, (long long)C, (long long)(H * W));
	Buf sum = {0};
	char *coord[2], *base[2], *frac[2], *w[2][4];
	int ntap = mode == 1 ? 1 : mode == 0 ? 2 : 4, first = mode == 2 ? -1 : 0;
	for (int k = 0; k < 2; k++) {
		char A[80], B[80], lo[80], hi[80];
		/* x = (g + 1) / 2 * (d - 1), or ((g + 1) * d - 1) / 2 */
		char *gk = tmp(c, "reshape(%s[:, :, :, %d:%d], [%lld, %lld, %lld])", ref(c, gr), k, k + 1, (long long)N,
		               (long long)Ho, (long long)Wo);
		char *v = g.align ? tmp(c, "(%s + %s(1)) / %s(2) * %s", gk, g.dn, g.dn, gs_num(&g, A, sizeof A, (double)(d[k] - 1)))
		                  : tmp(c, "((%s + %s(1)) * %s - %s(1)) / %s(2)", gk, g.dn, gs_num(&g, B, sizeof B, (double)d[k]),
		                        g.dn, g.dn);
		free(gk);
		if (mode == 1) {
			char *r = tmp(c, "round(%s)", v);
			free(v);
			v = r;
		}
		double l = g.align ? 0 : -0.5, h = g.align ? (double)(d[k] - 1) : (double)d[k] - 0.5;
		gs_num(&g, lo, sizeof lo, l);
		gs_num(&g, hi, sizeof hi, h);
		if (pad) {
			char *in = pad == 1 ? tmp(c, "minimum(maximum(%s, %s(0)), %s)", v, g.dn, gs_num(&g, A, sizeof A, (double)(d[k] - 1)))
			                    : gs_reflect(&g, v, l, h);
			char *m = tmp(c, "where(%s < %s || %s > %s, %s, %s)", v, lo, v, hi, in, v);
			free(in);
			free(v);
			v = m;
		}
		coord[k] = v;
		base[k] = mode == 1 ? xstrdup(v) : tmp(c, "floor(%s)", v);
		frac[k] = mode == 1 ? NULL : tmp(c, "%s - %s", v, base[k]);
		if (mode != 1)
			gs_weights(&g, frac[k], mode == 2, w[k]);
	}
	char shp[160];
	snprintf(shp, sizeof shp, "[%lld, 1, %lld, %lld]", (long long)N, (long long)Ho, (long long)Wo);
	for (int ty = 0; ty < ntap; ty++)
		for (int tx = 0; tx < ntap; tx++) {
			char T[80];
			char *py = ty + first ? tmp(c, "%s + %s", base[1], gs_num(&g, T, sizeof T, ty + first)) : xstrdup(base[1]);
			char *px = tx + first ? tmp(c, "%s + %s", base[0], gs_num(&g, T, sizeof T, tx + first)) : xstrdup(base[0]);
			char *vy, *vx;
			char *iy = gs_index(&g, py, H, &vy), *ix = gs_index(&g, px, W, &vx);
			char *flat = tmp(c, "reshape(%s * %lld + %s, [%lld, 1, %lld])", iy, (long long)W, ix, (long long)N,
			                 (long long)(Ho * Wo));
			char *val = tmp(c, "reshape(take_along_axis(%s, %s, axis=2), [%lld, %lld, %lld, %lld])", xf, flat,
			                (long long)N, (long long)C, (long long)Ho, (long long)Wo);
			if (vy) {
				char *m = tmp(c, "where(reshape(%s && %s, %s), %s, %s(0))", vy, vx, shp, val, g.dn);
				free(val);
				val = m;
			}
			if (mode == 1)
				buf_printf(&sum, "%s", val);
			else
				buf_printf(&sum, "%sreshape(%s * %s, %s) * %s", sum.len ? " + " : "", w[1][ty], w[0][tx], shp, val);
			free(py);
			free(px);
			free(vy);
			free(vx);
			free(iy);
			free(ix);
			free(flat);
			free(val);
		}
	int64_t osh[4] = {N, C, Ho, Wo};
	Val *o = def(c, io, 0, x->dt, 4, osh, "%s", sum.s);
	buf_free(&sum);
	free(xf);
	for (int k = 0; k < 2; k++) {
		free(coord[k]);
		free(base[k]);
		free(frac[k]);
		for (int t = 0; mode != 1 && t < ntap; t++)
			free(w[k][t]);
	}
	return o ? 0 : -1;
}

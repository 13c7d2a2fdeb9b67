/* interp/conv.c - the interpreter's 2-d convolution (grouped, strided, padded;
 * one kernel tap at a time over whole output planes) and pooling: max, average
 * and global average.
 */
#include "interp.h"

/* First and last output positions whose input position o*s - p + k lies in [0, size). */
static void conv_range(int64_t size, int64_t outsize, int64_t s, int64_t p, int64_t k,
                       int64_t *lo, int64_t *hi)
{
	int64_t t = p - k;
	*lo = t <= 0 ? 0 : (t + s - 1) / s;
	t = size - 1 + p - k;
	*hi = t < 0 ? -1 : t / s;
	if (*hi > outsize - 1)
		*hi = outsize - 1;
}

typedef struct ConvDims {
	int64_t H, W, OH, OW, sh, sw, ph, pw;
} ConvDims;

/* One kernel tap at input offset (kh, kw) (dilated): output plane += weight * the input plane it sees,
 * over just the output positions whose input lies inside (no padding tests in
 * the inner loop). */
static void conv_tap(const ConvDims *d, Tensor *o, int64_t ob, const Tensor *x, int64_t xb,
                     const Tensor *w, int64_t wi, int64_t kh, int64_t kw)
{
	int64_t oh0, oh1, ow0, ow1, sw = d->sw;
	int64_t dx = kw - d->pw; /* the input column of output column ow is ow * sw + dx */
	conv_range(d->H, d->OH, d->sh, d->ph, kh, &oh0, &oh1);
	conv_range(d->W, d->OW, sw, d->pw, kw, &ow0, &ow1);
	for (int64_t oh = oh0; oh <= oh1; oh++) {
		int64_t xr = xb + (oh * d->sh - d->ph + kh) * d->W, orow = ob + oh * d->OW;
		if (o->f) {
			double wv = w->f[wi], *op = o->f + orow;
			const double *xp = x->f + xr;
			for (int64_t ow = ow0; ow <= ow1; ow++)
				op[ow] += wv * xp[ow * sw + dx];
		} else {
			int64_t wv = w->i[wi], *op = o->i + orow;
			const int64_t *xp = x->i + xr;
			for (int64_t ow = ow0; ow <= ow1; ow++)
				op[ow] = wadd(op[ow], wmul(wv, xp[ow * sw + dx]));
		}
	}
}

Tensor *op_conv2d(Node *n, Tensor **in)
{
	Tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
	int64_t sh = n->a[0], sw = n->a[1], ph = n->a[2], pw = n->a[3], G = n->a[4];
	int64_t dh = conv_dilation(n, 0), dw = conv_dilation(n, 1);
	if (x->rank != 4 || w->rank != 4 || n->rank != 4 || sh < 1 || sw < 1 || ph < 0 || pw < 0 ||
	    G < 1)
		ice("interp: conv2d %%%d: attributes", n->id);
	int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
	int64_t OH = n->shape[2], OW = n->shape[3];
	int fl = is_float(n->dtype);
	if (Cg * G != C || O % G || n->shape[0] != N || n->shape[1] != O ||
	    OH != (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1 || OW != (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1 ||
	    OH < 0 || OW < 0 || (x->f != NULL) != fl || (w->f != NULL) != fl ||
	    (b && (b->n != O || (b->f != NULL) != fl)))
		ice("interp: conv2d %%%d: shapes", n->id);
	Tensor *o = new_out(n);
	ConvDims d = {H, W, OH, OW, sh, sw, ph, pw};
	int64_t Og = O / G, plane = OH * OW;
	for (int64_t no = 0; no < N * O; no++) {
		int64_t ni = no / O, oc = no % O, g = oc / Og, ob = no * plane;
		if (b)
			for (int64_t k = 0; k < plane; k++) {
				if (fl)
					o->f[ob + k] = b->f[oc];
				else
					o->i[ob + k] = b->i[oc];
			}
		for (int64_t c = 0; c < Cg; c++) {
			int64_t xb = (ni * C + g * Cg + c) * H * W;
			int64_t wb = (oc * Cg + c) * KH * KW;
			for (int64_t kh = 0; kh < KH; kh++)
				for (int64_t kw = 0; kw < KW; kw++)
					conv_tap(&d, o, ob, x, xb, w, wb + kh * KW + kw, kh * dh, kw * dw);
		}
	}
	fix_dtype(o);
	return o;
}

Tensor *op_pool(Node *n, Tensor *x)
{
	int64_t KH = n->a[0], KW = n->a[1], sh = n->a[2], sw = n->a[3], ph = n->a[4], pw = n->a[5];
	int avg = n->op == OP_AVGPOOL2D;
	if (x->rank != 4 || n->rank != 4 || KH < 1 || KW < 1 || sh < 1 || sw < 1 || ph < 0 ||
	    pw < 0 || (avg && !x->f))
		ice("interp: %s %%%d: attributes", op_name(n->op), n->id);
	need_storage(n, x);
	int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t OH = n->shape[2], OW = n->shape[3];
	if (n->shape[0] != x->shape[0] || n->shape[1] != x->shape[1] ||
	    OH != (H + 2 * ph - KH) / sh + 1 || OW != (W + 2 * pw - KW) / sw + 1 || OH < 0 ||
	    OW < 0)
		ice("interp: %s %%%d: shapes", op_name(n->op), n->id);
	Tensor *o = new_out(n);
	for (int64_t p = 0; p < NC; p++)
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++) {
				int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
				int64_t oi = (p * OH + oh) * OW + ow, wlo = w0 < 0 ? 0 : w0;
				double facc = avg ? 0.0 : -INFINITY;
				int64_t iacc = INT64_MIN;
				for (int64_t ih = h0 < 0 ? 0 : h0; ih < h0 + KH && ih < H; ih++)
					for (int64_t iw = wlo; iw < w0 + KW && iw < W; iw++) {
						int64_t xi = (p * H + ih) * W + iw;
						if (avg)
							facc += x->f[xi];
						else if (x->f) {
							double v = x->f[xi];
							if ((v > facc || isnan(v)) && !isnan(facc))
								facc = v;
						} else if (x->i[xi] > iacc) {
							iacc = x->i[xi];
						}
					}
				if (avg)
					o->f[oi] = facc / (double)(KH * KW); /* padding counted */
				else if (o->f)
					o->f[oi] = facc;
				else
					o->i[oi] = iacc;
			}
	fix_dtype(o);
	return o;
}

Tensor *op_global_avgpool(Node *n, Tensor *x)
{
	need_float(n, x);
	if (x->rank != 4 || n->rank != 4 || n->shape[0] != x->shape[0] ||
	    n->shape[1] != x->shape[1] || n->shape[2] != 1 || n->shape[3] != 1)
		ice("interp: global_avg_pool2d %%%d: shapes", n->id);
	Tensor *o = new_out(n);
	int64_t plane = x->shape[2] * x->shape[3];
	for (int64_t p = 0; p < o->n; p++) {
		double s = 0;
		for (int64_t k = 0; k < plane; k++)
			s += x->f[p * plane + k];
		o->f[p] = plane ? s / (double)plane : NAN;
	}
	fix_dtype(o);
	return o;
}

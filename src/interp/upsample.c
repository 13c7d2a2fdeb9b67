/* interp/upsample.c - the interpreter's ops that grow an image: the
 * transposed 2-d convolution (the scatter form: every input pixel adds the
 * kernel, weighted by it, into the output, one kernel tap at a time over whole
 * input rows) and resizing, nearest and bilinear, with PyTorch's coordinate
 * arithmetic (float for f32; see resize_axis).
 */
#include "interp.h"

#include <stdlib.h>

/* The input positions i in [0, size) whose output position i*s + t lies in
 * [0, outsize): lo..hi (empty when hi < lo). */
static void tap_range(int64_t size, int64_t outsize, int64_t s, int64_t t, int64_t *lo, int64_t *hi)
{
	*lo = t >= 0 ? 0 : (-t + s - 1) / s;
	int64_t u = outsize - 1 - t;
	*hi = u < 0 ? -1 : u / s;
	if (*hi > size - 1)
		*hi = size - 1;
}

Tensor *op_conv_transpose2d(Node *n, Tensor **in)
{
	Tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
	int64_t sh = n->a[0], sw = n->a[1], ph = n->a[2], pw = n->a[3], G = n->a[4];
	int64_t dh = conv_dilation(n, 0), dw = conv_dilation(n, 1);
	if (x->rank != 4 || w->rank != 4 || n->rank != 4 || sh < 1 || sw < 1 || G < 1 || !x->f || !w->f)
		ice("interp: conv_transpose2d %%%d: attributes", n->id);
	int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t Og = w->shape[1], KH = w->shape[2], KW = w->shape[3], O = n->shape[1];
	int64_t OH = n->shape[2], OW = n->shape[3], Cg = C / G;
	if (w->shape[0] != C || C % G || Og * G != O || n->shape[0] != N ||
	    OH != (H - 1) * sh - 2 * ph + dh * (KH - 1) + n->a[7] + 1 ||
	    OW != (W - 1) * sw - 2 * pw + dw * (KW - 1) + n->a[8] + 1 || (b && (b->n != O || !b->f)))
		ice("interp: conv_transpose2d %%%d: shapes", n->id);
	Tensor *o = new_out(n);
	for (int64_t k = 0; k < o->n; k++)
		o->f[k] = b ? b->f[k / (OH * OW) % O] : 0.0;
	for (int64_t ni = 0; ni < N; ni++)
		for (int64_t c = 0; c < C; c++) {
			const double *xp = x->f + (ni * C + c) * H * W;
			int64_t g = c / Cg;
			for (int64_t co = 0; co < Og; co++) {
				double *op = o->f + (ni * O + g * Og + co) * OH * OW;
				for (int64_t kh = 0; kh < KH; kh++)
					for (int64_t kw = 0; kw < KW; kw++) {
						double wv = w->f[((c * Og + co) * KH + kh) * KW + kw];
						int64_t th = kh * dh - ph, tw = kw * dw - pw, ih0, ih1, iw0, iw1;
						tap_range(H, OH, sh, th, &ih0, &ih1);
						tap_range(W, OW, sw, tw, &iw0, &iw1);
						for (int64_t ih = ih0; ih <= ih1; ih++) {
							double *orow = op + (ih * sh + th) * OW + tw;
							const double *xrow = xp + ih * W;
							for (int64_t iw = iw0; iw <= iw1; iw++)
								orow[iw * sw] += wv * xrow[iw];
						}
					}
			}
		}
	fix_dtype(o);
	return o;
}

/* For each output position i along one axis: the two input positions it reads
 * and the weight of the second, as PyTorch's upsample kernels compute them:
 * legacy nearest (floor of i * scale in float, with its special cases for equal
 * and double sizes) and bilinear (half-pixel centres clamped at 0, or
 * align_corners), in float arithmetic except bilinear on f64. */
static void resize_axis(const Node *n, int k, int64_t in, int64_t out, int64_t *i0, int64_t *i1, double *lam)
{
	double sc = resize_scale(n, k);
	int align = n->a[0] != 0, dbl = n->dtype == DT_F64;
	for (int64_t i = 0; i < out; i++) {
		if (n->op == OP_RESIZE_NEAREST) {
			if (out == in)
				i0[i] = i;
			else if (out == 2 * in)
				i0[i] = i >> 1;
			else
				i0[i] = (int64_t)floorf((float)i * (float)sc);
			if (i0[i] > in - 1)
				i0[i] = in - 1;
			i1[i] = i0[i];
			lam[i] = 0;
			continue;
		}
		double real, l;
		int64_t j;
		if (dbl) {
			real = align ? sc * (double)i : sc * ((double)i + 0.5) - 0.5;
			if (!align && real < 0)
				real = 0;
			j = (int64_t)floor(real);
			j = j < in - 1 ? j : in - 1;
			l = real - (double)j;
		} else {
			float fs = (float)sc, fr = align ? fs * (float)i : fs * ((float)i + 0.5f) - 0.5f;
			if (!align && fr < 0)
				fr = 0;
			j = (int64_t)floorf(fr);
			j = j < in - 1 ? j : in - 1;
			l = (double)(fr - (float)j);
		}
		lam[i] = l < 0 ? 0 : l > 1 ? 1 : l;
		i0[i] = j;
		i1[i] = j + (j < in - 1);
	}
}

Tensor *op_resize(Node *n, Tensor *x)
{
	need_float(n, x);
	if (x->rank != 4 || n->rank != 4 || n->shape[0] != x->shape[0] || n->shape[1] != x->shape[1] ||
	    n->shape[2] < 1 || n->shape[3] < 1)
		ice("interp: %s %%%d: shapes", op_name(n->op), n->id);
	int64_t H = x->shape[2], W = x->shape[3], OH = n->shape[2], OW = n->shape[3];
	int64_t *ix = xcalloc((size_t)(2 * (OH + OW)), sizeof(int64_t));
	double *lx = xcalloc((size_t)(OH + OW), sizeof(double));
	int64_t *h0 = ix, *h1 = ix + OH, *w0 = ix + 2 * OH, *w1 = ix + 2 * OH + OW;
	double *lh = lx, *lw = lx + OH;
	resize_axis(n, 0, H, OH, h0, h1, lh);
	resize_axis(n, 1, W, OW, w0, w1, lw);
	Tensor *o = new_out(n);
	for (int64_t p = 0; p < x->shape[0] * x->shape[1]; p++) {
		const double *xp = x->f + p * H * W;
		double *op = o->f + p * OH * OW;
		for (int64_t i = 0; i < OH; i++) {
			const double *r0 = xp + h0[i] * W, *r1 = xp + h1[i] * W;
			for (int64_t j = 0; j < OW; j++) {
				if (n->op == OP_RESIZE_NEAREST) { /* a copy: no 0 * inf */
					op[i * OW + j] = r0[w0[j]];
					continue;
				}
				double top = (1 - lw[j]) * r0[w0[j]] + lw[j] * r0[w1[j]];
				double bot = (1 - lw[j]) * r1[w0[j]] + lw[j] * r1[w1[j]];
				op[i * OW + j] = (1 - lh[i]) * top + lh[i] * bot;
			}
		}
	}
	free(ix);
	free(lx);
	fix_dtype(o);
	return o;
}

/* ops_quant.c - quantization: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
 * QLinearConv.
 *
 * 8-bit values are held in i32 (as every uint8 and int8 tensor is). The
 * integer products are exact: a matrix product of i32 operands, and a
 * convolution in f64 of integers (8-bit values less their zero points), whose
 * sums stay far below 2^53. (De)quantizing computes in f32, requantizing a
 * product in f64 (NumPy's int32 times float32), rounding half to even and
 * saturating to the output's 8-bit range, as ONNX's reference does. */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

/* The ONNX dtype of zero point z: its own where known (inputs,
 * initializers, Casts, and what moves them keep it); else int8 if a known
 * value is negative, else uint8, ONNX's default. */
static int zp_type(Val *z)
{
	if (!z)
		return OT_UINT8;
	if (z->ot)
		return z->ot;
	for (int64_t k = 0; z->known && !z->lazy && k < z->n; k++)
		if (kgeti(z, k) < 0)
			return OT_INT8;
	return OT_UINT8;
}

/* The saturation range of ONNX dtype ot (uint8 or int8). */
static void sat_range(int ot, int64_t *lo, int64_t *hi)
{
	if (ot == OT_INT8)
		*lo = -128, *hi = 127;
	else
		*lo = 0, *hi = 255;
}

/* A per-axis parameter (scale or zero point, [C]) made to broadcast along
 * axis of a tensor of rank r; a scalar or one value as it is. NULL: "0". */
static char *along(Ctx *c, Val *v, int r, int axis)
{
	if (!v)
		return xstrdup("0");
	if (v->rank == 0 || v->n == 1 || r < 2)
		return v->rank == 0 || v->n != 1 ? xstrdup(ref(c, v)) : tmp(c, "reshape(%s, [])", ref(c, v));
	int64_t sh[MAX_RANK];
	for (int k = 0; k < r; k++)
		sh[k] = k == axis ? v->n : 1;
	char *l = list_text(r, sh);
	char *t = tmp(c, "reshape(%s, %s)", ref(c, v), l);
	free(l);
	return t;
}

/* round(x) plus zero point zp saturated to [lo, hi], as i32: x an
 * expression of dtype ft ("f32" or "f64"). */
static char *requant(Ctx *c, const char *ft, const char *x, const char *zp, int64_t lo, int64_t hi)
{
	return tmp(c, "i32(minimum(maximum(round(%s) + %s(%s), %s(%lld)), %s(%lld)))", x, ft, zp, ft, (long long)lo, ft,
	           (long long)hi);
}

static int q_axis(Ctx *c, NodeIO *io, Val *x, Val *s)
{
	if (s->n == 1 && s->rank <= 1)
		return 0; /* one scale: the axis does not matter */
	int ax = oaxis(c, attr_i(io->n, "axis", 1), x->rank ? x->rank : 1);
	if (ax < 0)
		return -1;
	if (s->rank > 1 || (s->n > 1 && (x->rank == 0 || s->n != x->shape[ax])))
		return node_err(c, 0, "a scale of %lld values for axis %d of %lld", (long long)s->n, ax,
		                (long long)(x->rank ? x->shape[ax] : 1)), -1;
	return ax;
}

int tr_dequantize(Ctx *c, NodeIO *io)
{
	Val *x, *s, *z = in_(io, 2);
	if (inputs(c, io, "x and x_scale", 2, &x, &s) < 0)
		return -1;
	if (dtype_is_float(x->dt) || x->dt == DT_BOOL || !dtype_is_float(s->dt))
		return node_err(c, 1, "DequantizeLinear of %s by %s is not supported", dtype_name(x->dt), dtype_name(s->dt)), -1;
	int ax = q_axis(c, io, x, s);
	if (ax < 0)
		return -1;
	if (z && z->n != s->n)
		return node_err(c, 0, "a zero point of %lld values for a scale of %lld", (long long)z->n, (long long)s->n), -1;
	char *ss = along(c, s, x->rank, ax), *zs = along(c, z, x->rank, ax);
	Val *o = def(c, io, 0, s->dt, x->rank, x->shape, "(%s(%s) - %s(%s)) * %s", dtype_name(s->dt), ref(c, x),
	             dtype_name(s->dt), zs, ss);
	free(ss);
	free(zs);
	return o ? 0 : -1;
}

int tr_quantize(Ctx *c, NodeIO *io)
{
	Val *x, *s, *z = in_(io, 2);
	if (inputs(c, io, "x and y_scale", 2, &x, &s) < 0)
		return -1;
	if (x->dt != DT_F32 || s->dt != DT_F32)
		return node_err(c, 1, "QuantizeLinear of %s by %s is not supported", dtype_name(x->dt), dtype_name(s->dt)), -1;
	int ot = zp_type(z);
	if (ot != OT_UINT8 && ot != OT_INT8)
		return node_err(c, 1, "a zero point of %s is not supported (uint8 and int8 are)", onnx_dtype_name(ot)), -1;
	int ax = q_axis(c, io, x, s);
	if (ax < 0)
		return -1;
	if (z && z->n != s->n)
		return node_err(c, 0, "a zero point of %lld values for a scale of %lld", (long long)z->n, (long long)s->n), -1;
	int64_t lo, hi;
	sat_range(ot, &lo, &hi);
	char *ss = along(c, s, x->rank, ax), *zs = along(c, z, x->rank, ax);
	char *q = tmp(c, "%s / %s", ref(c, x), ss);
	char *r = requant(c, "f32", q, zs, lo, hi);
	Val *o = def(c, io, 0, DT_I32, x->rank, x->shape, "%s", r);
	free(ss);
	free(zs);
	free(q);
	free(r);
	if (!o)
		return -1;
	o->ot = ot;
	return 0;
}

/* y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point =
 * round(-min(0, min x) / y_scale) saturated, y = x quantized by them. */
int tr_dynamic_quantize(Ctx *c, NodeIO *io)
{
	Val *x;
	if (inputs(c, io, "x", 1, &x) < 0)
		return -1;
	if (x->dt != DT_F32 || x->n == 0)
		return node_err(c, 1, "DynamicQuantizeLinear of %s[%lld elements] is not supported", dtype_name(x->dt),
		                (long long)x->n), -1;
	Buf al = {0};
	buf_putc(&al, '[');
	for (int k = 0; k < x->rank; k++)
		buf_printf(&al, "%s%d", k ? ", " : "", k);
	buf_putc(&al, ']');
	const char *xs = ref(c, x);
	char *mx = x->rank ? tmp(c, "maximum(amax(%s, axis=%s), f32(0))", xs, al.s) : tmp(c, "maximum(%s, f32(0))", xs);
	char *mn = x->rank ? tmp(c, "minimum(amin(%s, axis=%s), f32(0))", xs, al.s) : tmp(c, "minimum(%s, f32(0))", xs);
	buf_free(&al);
	Val *sc = def(c, io, 1, DT_F32, 0, NULL, "(%s - %s) / f32(255)", mx, mn);
	char *zq = sc ? tmp(c, "(f32(0) - %s) / %s", mn, ref(c, sc)) : NULL;
	char *zr = zq ? requant(c, "f32", zq, "0", 0, 255) : NULL;
	Val *zp = zr ? def(c, io, 2, DT_I32, 0, NULL, "%s", zr) : NULL;
	char *q = zp ? tmp(c, "%s / %s", xs, ref(c, sc)) : NULL;
	char *yr = q ? requant(c, "f32", q, ref(c, zp), 0, 255) : NULL;
	Val *y = yr ? def(c, io, 0, DT_I32, x->rank, x->shape, "%s", yr) : NULL;
	free(mx);
	free(mn);
	free(zq);
	free(zr);
	free(q);
	free(yr);
	if (!y)
		return -1;
	y->ot = zp->ot = OT_UINT8;
	return 0;
}

/* (a - a_zero_point) @ (b - b_zero_point) in i32; a's zero point may be
 * per row, b's per column. */
static char *int_matmul(Ctx *c, Val *a, Val *az, Val *b, Val *bz)
{
	char *as = az && az->rank == 1 && az->n > 1 ? along(c, az, a->rank, a->rank - 2) : along(c, az, 0, 0);
	char *bs = along(c, bz, 0, 0);
	char *t = tmp(c, "(i32(%s) - i32(%s)) @ (i32(%s) - i32(%s))", ref(c, a), as, ref(c, b), bs);
	free(as);
	free(bs);
	return t;
}

static int mm_shape(Ctx *c, Val *a, Val *b, int *r, int64_t *sh)
{
	if (a->rank < 2 || b->rank < 2 || a->shape[a->rank - 1] != b->shape[b->rank - 2])
		return node_err(c, 0, "operands of rank %d and %d that do not multiply", a->rank, b->rank), -1;
	if (broadcast(c, a->rank - 2, a->shape, b->rank - 2, b->shape, r, sh) < 0)
		return -1;
	sh[(*r)++] = a->shape[a->rank - 2];
	sh[(*r)++] = b->shape[b->rank - 1];
	return 0;
}

int tr_matmul_integer(Ctx *c, NodeIO *io)
{
	Val *a, *b;
	if (inputs(c, io, "A and B", 2, &a, &b) < 0)
		return -1;
	if (dtype_is_float(a->dt) || dtype_is_float(b->dt))
		return node_err(c, 0, "needs integer operands"), -1;
	int r;
	int64_t sh[MAX_RANK];
	if (mm_shape(c, a, b, &r, sh) < 0)
		return -1;
	char *t = int_matmul(c, a, in_(io, 2), b, in_(io, 3));
	Val *o = def(c, io, 0, DT_I32, r, sh, "%s", t);
	free(t);
	return o ? 0 : -1;
}

int tr_qlinear_matmul(Ctx *c, NodeIO *io)
{
	Val *a, *as, *az, *b, *bs, *bz, *ys, *yz;
	if (inputs(c, io, "eight inputs", 8, &a, &as, &az, &b, &bs, &bz, &ys, &yz) < 0)
		return -1;
	int r;
	int64_t sh[MAX_RANK], lo, hi;
	if (mm_shape(c, a, b, &r, sh) < 0)
		return -1;
	sat_range(zp_type(yz), &lo, &hi);
	char *t = int_matmul(c, a, az, b, bz);
	char *asx = a->rank >= 2 && as->n > 1 ? along(c, as, a->rank, a->rank - 2) : along(c, as, 0, 0);
	char *bsx = along(c, bs, 0, 0), *ysx = along(c, ys, 0, 0), *yzx = along(c, yz, 0, 0);
	char *x = tmp(c, "f64(%s) * (f64(%s) * f64(%s) / f64(%s))", t, asx, bsx, ysx);
	char *q = requant(c, "f64", x, yzx, lo, hi);
	Val *o = def(c, io, 0, DT_I32, r, sh, "%s", q);
	free(t);
	free(asx);
	free(bsx);
	free(ysx);
	free(yzx);
	free(x);
	free(q);
	if (!o)
		return -1;
	o->ot = zp_type(yz);
	return 0;
}

/* The convolution of x less its zero point by w less its own (per output
 * channel), in f64 (exact, see the top), with a Conv node's attributes: a
 * Conv translated into a value named after the node's output. */
static Val *int_conv(Ctx *c, NodeIO *io, Val *x, Val *xz, Val *w, Val *wz, const char *what)
{
	if (x->rank != 4 || w->rank != 4)
		return node_err(c, 1, "%d-d %s is not supported (2-d is)", x->rank - 2, io->n->op_type), NULL;
	char *xzs = along(c, xz, 0, 0), *wzs = along(c, wz, 4, 0);
	char *bx = xasprintf("%s::%s.x", out_name(io, 0), what), *bw = xasprintf("%s::%s.w", out_name(io, 0), what);
	char *bc = xasprintf("%s::%s", out_name(io, 0), what);
	char *nx = fresh_name(c, bx), *nw = fresh_name(c, bw), *nc = fresh_name(c, bc);
	free(bx);
	free(bw);
	free(bc);
	Onnx__NodeProto sub = *io->n;
	char *outs[1];
	sub.output = outs;
	sub.n_output = 1;
	NodeIO s = {.n = &sub};
	Val *xf = NULL, *wf = NULL, *cv = NULL;
	outs[0] = nx;
	xf = def(c, &s, 0, DT_F64, 4, x->shape, "f64(%s) - f64(%s)", ref(c, x), xzs);
	outs[0] = nw;
	wf = xf ? def(c, &s, 0, DT_F64, 4, w->shape, "f64(%s) - f64(%s)", ref(c, w), wzs) : NULL;
	outs[0] = nc;
	s.nin = 2;
	s.in[0] = xf;
	s.in[1] = wf;
	if (wf && tr_conv(c, &s) == 0)
		cv = find_val(c, nc);
	free(xzs);
	free(wzs);
	free(nx);
	free(nw);
	free(nc);
	return cv;
}

int tr_conv_integer(Ctx *c, NodeIO *io)
{
	Val *x, *w;
	if (inputs(c, io, "x and w", 2, &x, &w) < 0)
		return -1;
	Val *cv = int_conv(c, io, x, in_(io, 2), w, in_(io, 3), "conv");
	return cv && def(c, io, 0, DT_I32, cv->rank, cv->shape, "i32(%s)", ref(c, cv)) ? 0 : -1;
}

int tr_qlinear_conv(Ctx *c, NodeIO *io)
{
	Val *x, *xs, *xz, *w, *ws, *wz, *ys, *yz, *b = in_(io, 8);
	if (inputs(c, io, "eight inputs", 8, &x, &xs, &xz, &w, &ws, &wz, &ys, &yz) < 0)
		return -1;
	Val *cv = int_conv(c, io, x, xz, w, wz, "conv");
	if (!cv)
		return -1;
	int64_t lo, hi;
	sat_range(zp_type(yz), &lo, &hi);
	/* the bias is int32 in units of x_scale * w_scale */
	char *bias = b ? along(c, b, 4, 1) : xstrdup("0");
	char *xsx = along(c, xs, 0, 0), *wsx = along(c, ws, 4, 1), *ysx = along(c, ys, 0, 0), *yzx = along(c, yz, 0, 0);
	char *acc = tmp(c, "(%s + f64(%s)) * (f64(%s) * f64(%s) / f64(%s))", ref(c, cv), bias, xsx, wsx, ysx);
	char *q = requant(c, "f64", acc, yzx, lo, hi);
	Val *o = def(c, io, 0, DT_I32, cv->rank, cv->shape, "%s", q);
	free(bias);
	free(xsx);
	free(wsx);
	free(ysx);
	free(yzx);
	free(acc);
	free(q);
	if (!o)
		return -1;
	o->ot = zp_type(yz);
	return 0;
}

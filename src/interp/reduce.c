/* interp/reduce.c - the interpreter's reductions over axes: sum, mean, amax,
 * amin, argmax, softmax and log-softmax, layernorm and rmsnorm.
 */
#include "interp.h"

Tensor *op_reduce(Node *n, Tensor *x)
{
	uint64_t mask = (uint64_t)n->a[0];
	int rank = x->rank;
	if (rank < 64 && (mask >> rank) != 0)
		ice("interp: %s %%%d: axis mask 0x%llx for rank %d", op_name(n->op), n->id,
		    (unsigned long long)mask, rank);
	if ((x->f != NULL) != is_float(n->dtype) || (n->op == OP_MEAN && !x->f))
		ice("interp: %s %%%d: dtype", op_name(n->op), n->id);
	/* where each input element lands in the output: 0 stride on reduced axes */
	int64_t ost[MAX_RANK], s = 1, count = 1;
	for (int d = rank - 1; d >= 0; d--) {
		if (mask >> d & 1) {
			ost[d] = 0;
			count *= x->shape[d];
		} else {
			ost[d] = s;
			s *= x->shape[d];
		}
	}
	Tensor *o = new_out(n);
	if (o->n != s)
		ice("interp: %s %%%d: %lld outputs for %lld kept elements", op_name(n->op), n->id,
		    (long long)o->n, (long long)s);
	Op op = n->op;
	/* identities; lowering refuses an empty amax/amin/mean with result elements */
	for (int64_t k = 0; k < o->n; k++) {
		if (o->f)
			o->f[k] = op == OP_AMAX ? -INFINITY : op == OP_AMIN ? INFINITY : op == OP_PROD ? 1.0 : 0.0;
		else
			o->i[k] = op == OP_AMAX ? INT64_MIN : op == OP_AMIN ? INT64_MAX : op == OP_PROD ? 1 : 0;
	}
	int64_t inner = rank ? x->shape[rank - 1] : 1;
	int64_t rows = inner ? x->n / inner : 0, istep = rank ? ost[rank - 1] : 0;
	int64_t idx[MAX_RANK] = {0}, base = 0;
	for (int64_t r = 0; r < rows; r++) {
		if (x->f) {
			const double *xr = x->f + r * inner;
			double *oo = o->f + base;
			switch (op) {
			case OP_SUM:
			case OP_MEAN:
				for (int64_t k = 0; k < inner; k++)
					oo[k * istep] += xr[k];
				break;
			case OP_PROD:
				/* f32 rounded at every step, as compiled code multiplies: a
				 * product overflows (or underflows) in f32 long before double */
				for (int64_t k = 0; k < inner; k++)
					oo[k * istep] = n->dtype == DT_F32 ? (double)(float)(oo[k * istep] * xr[k]) : oo[k * istep] * xr[k];
				break;
			case OP_AMAX: /* a NaN wins and stays */
				for (int64_t k = 0; k < inner; k++) {
					double *acc = oo + k * istep;
					if ((xr[k] > *acc || isnan(xr[k])) && !isnan(*acc))
						*acc = xr[k];
				}
				break;
			case OP_AMIN:
				for (int64_t k = 0; k < inner; k++) {
					double *acc = oo + k * istep;
					if ((xr[k] < *acc || isnan(xr[k])) && !isnan(*acc))
						*acc = xr[k];
				}
				break;
			default:
				ice("interp: reduction %s", op_name(op));
			}
		} else {
			const int64_t *xr = x->i + r * inner;
			int64_t *oo = o->i + base;
			switch (op) {
			case OP_SUM:
				for (int64_t k = 0; k < inner; k++)
					oo[k * istep] = wadd(oo[k * istep], xr[k]);
				break;
			case OP_PROD:
				for (int64_t k = 0; k < inner; k++)
					oo[k * istep] = wmul(oo[k * istep], xr[k]);
				break;
			case OP_AMAX:
				for (int64_t k = 0; k < inner; k++)
					if (xr[k] > oo[k * istep])
						oo[k * istep] = xr[k];
				break;
			case OP_AMIN:
				for (int64_t k = 0; k < inner; k++)
					if (xr[k] < oo[k * istep])
						oo[k * istep] = xr[k];
				break;
			default:
				ice("interp: reduction %s", op_name(op));
			}
		}
		base = index_next(idx, base, ost, x->shape, rank - 1);
	}
	if (op == OP_MEAN)
		for (int64_t k = 0; k < o->n; k++)
			o->f[k] = count ? o->f[k] / (double)count : NAN;
	fix_dtype(o);
	return o;
}

static int single_axis(const Node *n, int rank)
{
	uint64_t mask = (uint64_t)n->a[0];
	for (int d = 0; d < rank; d++)
		if (mask == (uint64_t)1 << d)
			return d;
	ice("interp: %s %%%d: axis mask 0x%llx is not one axis of rank %d", op_name(n->op), n->id,
	    (unsigned long long)mask, rank);
}

Tensor *op_argmax(Node *n, Tensor *x)
{
	int axis = single_axis(n, x->rank);
	int64_t outer, len, inner;
	axis_split(x, axis, &outer, &len, &inner);
	Tensor *o = new_out(n);
	if (o->f || o->n != outer * inner)
		ice("interp: argmax %%%d: result", n->id);
	for (int64_t a = 0; a < outer; a++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t best = 0, base = a * len * inner + i;
			/* first maximum wins; a NaN is the maximum, as in NumPy */
			if (x->f) {
				const double *xs = x->f + base;
				for (int64_t l = 1; l < len && !isnan(xs[best * inner]); l++) {
					double v = xs[l * inner];
					if (v > xs[best * inner] || isnan(v))
						best = l;
				}
			} else {
				const int64_t *xs = x->i + base;
				for (int64_t l = 1; l < len; l++)
					if (xs[l * inner] > xs[best * inner])
						best = l;
			}
			o->i[a * inner + i] = best;
		}
	return o;
}

/* Numerically stable: exp(x - max) never overflows. */
Tensor *op_softmax(Frame *fr, Node *n, Tensor *x)
{
	need_float(n, x);
	need_shape(x, n, op_name(n->op));
	int64_t outer, len, inner;
	if (n->a[0] < 0 || n->a[0] >= x->rank)
		ice("interp: softmax %%%d axis %lld", n->id, (long long)n->a[0]);
	axis_split(x, (int)n->a[0], &outer, &len, &inner);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	int log_sm = n->op == OP_LOG_SOFTMAX;
	for (int64_t a = 0; a < outer; a++)
		for (int64_t i = 0; i < inner; i++) {
			const double *xs = x->f + a * len * inner + i;
			double *os = o->f + a * len * inner + i;
			double m = -INFINITY, sum = 0;
			for (int64_t l = 0; l < len; l++)
				m = fmax_np(m, xs[l * inner]);
			if (log_sm) {
				for (int64_t l = 0; l < len; l++)
					sum += exp(xs[l * inner] - m);
				double ls = log(sum);
				for (int64_t l = 0; l < len; l++)
					os[l * inner] = xs[l * inner] - m - ls;
			} else {
				for (int64_t l = 0; l < len; l++) {
					double e = exp(xs[l * inner] - m);
					os[l * inner] = e;
					sum += e;
				}
				for (int64_t l = 0; l < len; l++)
					os[l * inner] /= sum;
			}
		}
	fix_dtype(o);
	return o;
}

Tensor *op_norm(Frame *fr, Node *n, Tensor **in)
{
	Tensor *x = in[0], *w = in[1], *b = n->op == OP_LAYERNORM ? in[2] : NULL;
	need_float(n, x);
	need_shape(x, n, op_name(n->op));
	if (x->rank < 1)
		ice("interp: %s %%%d of a 0-d tensor", op_name(n->op), n->id);
	int64_t D = x->shape[x->rank - 1], rows = D ? x->n / D : 0;
	if (!w->f || w->n != D || (b && (!b->f || b->n != D)))
		ice("interp: %s %%%d: weight/bias size", op_name(n->op), n->id);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	double eps = n->fval;
	for (int64_t r = 0; r < rows; r++) {
		const double *xr = x->f + r * D;
		double *orow = o->f + r * D;
		if (b) {
			double mean = 0, var = 0;
			for (int64_t k = 0; k < D; k++)
				mean += xr[k];
			mean /= (double)D;
			for (int64_t k = 0; k < D; k++)
				var += (xr[k] - mean) * (xr[k] - mean);
			var /= (double)D; /* biased, like PyTorch */
			double inv = 1.0 / sqrt(var + eps);
			for (int64_t k = 0; k < D; k++)
				orow[k] = (xr[k] - mean) * inv * w->f[k] + b->f[k];
		} else {
			double ms = 0;
			for (int64_t k = 0; k < D; k++)
				ms += xr[k] * xr[k];
			ms /= (double)D;
			double inv = 1.0 / sqrt(ms + eps);
			for (int64_t k = 0; k < D; k++)
				orow[k] = xr[k] * inv * w->f[k];
		}
	}
	fix_dtype(o);
	return o;
}

/* group_norm over x viewed as [N, G, R] (builtins.c): each row of R is
 * normalised with its mean and biased variance, then element k of group g
 * is scaled and shifted by channel g * C/G + k / (R / (C/G)). */
Tensor *op_group_norm(Frame *fr, Node *n, Tensor **in)
{
	Tensor *x = in[0], *w = in[1], *b = in[2];
	need_float(n, x);
	need_shape(x, n, op_name(n->op));
	if (x->rank != 3 || !w->f || !b->f || w->n != b->n || !x->shape[1] || w->n % x->shape[1])
		ice("interp: group_norm %%%d: shapes", n->id);
	int64_t G = x->shape[1], R = x->shape[2], rows = x->shape[0] * G, cpg = w->n / G;
	int64_t S = cpg ? R / cpg : 0; /* elements per channel */
	if (S * cpg != R)
		ice("interp: group_norm %%%d: %lld elements per group for %lld channels", n->id, (long long)R, (long long)cpg);
	Tensor *o = take_input(fr, n, 0);
	if (!o)
		o = new_out(n);
	for (int64_t r = 0; r < rows; r++) {
		const double *xr = x->f + r * R;
		double *orow = o->f + r * R;
		double mean = 0, var = 0;
		for (int64_t k = 0; k < R; k++)
			mean += xr[k];
		mean /= (double)R;
		for (int64_t k = 0; k < R; k++)
			var += (xr[k] - mean) * (xr[k] - mean);
		var /= (double)R; /* biased, like PyTorch */
		double inv = 1.0 / sqrt(var + n->fval);
		for (int64_t c = 0; c < cpg; c++) {
			int64_t ch = r % G * cpg + c;
			for (int64_t s = 0; s < S; s++)
				orow[c * S + s] = (xr[c * S + s] - mean) * inv * w->f[ch] + b->f[ch];
		}
	}
	fix_dtype(o);
	return o;
}

/* interp/tensor.c - the interpreter's tensors and what every kernel builds on.
 *
 * Tensors (new, copy, free, from and to little-endian bytes), the rounding of
 * fresh values to their dtype, the broadcasting iterator, and the frame helpers
 * kernels use to check a node and to overwrite an input that is read for the
 * last time. Nothing here calls a kernel or the graph walk.
 */
#include "interp.h"

#include <stdlib.h>
#include <string.h>

int64_t numel_of(int rank, const int64_t *shape)
{
	if (rank < 0 || rank > MAX_RANK)
		ice("interp: rank %d", rank);
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (shape[i] < 0)
			ice("interp: negative dimension %lld", (long long)shape[i]);
		if (shape[i] && n > INT64_MAX / 8 / shape[i])
			ice("interp: tensor too large");
		n *= shape[i];
	}
	return n;
}

/* ------------------------------------------------------------------ tensors */

Tensor *tensor_new(DType dt, int rank, const int64_t *shape)
{
	if ((int)dt < 0 || dt >= DT_COUNT)
		ice("tensor_new: bad dtype %d", (int)dt);
	int64_t n = numel_of(rank, shape);
	Tensor *t = xcalloc(1, sizeof *t);
	t->dtype = dt;
	t->rank = rank;
	if (rank)
		memcpy(t->shape, shape, (size_t)rank * sizeof(int64_t));
	t->n = n;
	/* calloc: large blocks come zeroed from the OS without touching them */
	if (is_float(dt))
		t->f = xcalloc((size_t)n, sizeof(double));
	else
		t->i = xcalloc((size_t)n, sizeof(int64_t));
	return t;
}

void tensor_free(Tensor *t)
{
	if (t) {
		free(t->f);
		free(t->i);
	}
	free(t);
}

Tensor *tensor_copy(const Tensor *s)
{
	Tensor *t = tensor_new(s->dtype, s->rank, s->shape);
	if (s->f)
		memcpy(t->f, s->f, (size_t)s->n * sizeof(double));
	else
		memcpy(t->i, s->i, (size_t)s->n * sizeof(int64_t));
	return t;
}

/* Little-endian byte order by hand, so the file format does not depend on the host. */
static uint64_t get_le(const unsigned char *p, int size)
{
	uint64_t v = 0;
	for (int k = size - 1; k >= 0; k--)
		v = v << 8 | p[k];
	return v;
}

static void put_le(unsigned char *p, uint64_t v, int size)
{
	for (int k = 0; k < size; k++) {
		p[k] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

Tensor *tensor_from_bytes(DType dt, int rank, const int64_t *shape, const void *data)
{
	Tensor *t = tensor_new(dt, rank, shape);
	const unsigned char *p = data;
	for (int64_t k = 0; k < t->n; k++) {
		switch (dt) {
		case DT_BOOL:
			t->i[k] = p[k] != 0;
			break;
		case DT_I32:
			t->i[k] = wrap32((int64_t)get_le(p + 4 * k, 4));
			break;
		case DT_I64:
			t->i[k] = (int64_t)get_le(p + 8 * k, 8);
			break;
		case DT_F32: {
			uint32_t u = (uint32_t)get_le(p + 4 * k, 4);
			float f;
			memcpy(&f, &u, 4);
			t->f[k] = f;
			break;
		}
		case DT_F64: {
			uint64_t u = get_le(p + 8 * k, 8);
			double d;
			memcpy(&d, &u, 8);
			t->f[k] = d;
			break;
		}
		case DT_F16:
			t->f[k] = f16_bits_to_f32((uint16_t)get_le(p + 2 * k, 2));
			break;
		case DT_BF16:
			t->f[k] = bf16_bits_to_f32((uint16_t)get_le(p + 2 * k, 2));
			break;
		case DT_I8: case DT_U8: case DT_I16: case DT_U16:
			t->i[k] = dtype_wrap(dt, (int64_t)get_le(p + (size_t)dtype_size(dt) * (size_t)k, dtype_size(dt)));
			break;
		default:
			ice("tensor_from_bytes: dtype %d", (int)dt);
		}
	}
	return t;
}

void tensor_to_bytes(const Tensor *t, void *out)
{
	unsigned char *p = out;
	for (int64_t k = 0; k < t->n; k++) {
		switch (t->dtype) {
		case DT_BOOL:
			p[k] = t->i[k] != 0;
			break;
		case DT_I32:
			put_le(p + 4 * k, (uint64_t)t->i[k], 4);
			break;
		case DT_I64:
			put_le(p + 8 * k, (uint64_t)t->i[k], 8);
			break;
		case DT_F32: {
			float f = (float)t->f[k];
			uint32_t u;
			memcpy(&u, &f, 4);
			put_le(p + 4 * k, u, 4);
			break;
		}
		case DT_F64: {
			uint64_t u;
			memcpy(&u, &t->f[k], 8);
			put_le(p + 8 * k, u, 8);
			break;
		}
		case DT_F16:
			put_le(p + 2 * k, f32_to_f16_bits((float)t->f[k]), 2);
			break;
		case DT_BF16:
			put_le(p + 2 * k, f32_to_bf16_bits((float)t->f[k]), 2);
			break;
		case DT_I8: case DT_U8: case DT_I16: case DT_U16:
			put_le(p + (size_t)dtype_size(t->dtype) * (size_t)k, (uint64_t)t->i[k], dtype_size(t->dtype));
			break;
		default:
			ice("tensor_to_bytes: dtype %d", (int)t->dtype);
		}
	}
}

void fix_dtype(Tensor *t)
{
	int64_t n = t->n;
	switch (t->dtype) {
	case DT_F32:
		for (int64_t k = 0; k < n; k++)
			t->f[k] = (double)(float)t->f[k];
		break;
	case DT_I32:
		for (int64_t k = 0; k < n; k++)
			t->i[k] = wrap32(t->i[k]);
		break;
	case DT_BOOL:
		for (int64_t k = 0; k < n; k++)
			t->i[k] = t->i[k] != 0;
		break;
	case DT_F16:
		/* from f32 values (widen.c casts to f16 from f32 only) */
		for (int64_t k = 0; k < n; k++)
			t->f[k] = round_f16((float)t->f[k]);
		break;
	case DT_BF16:
		for (int64_t k = 0; k < n; k++)
			t->f[k] = round_bf16((float)t->f[k]);
		break;
	case DT_I8: case DT_U8: case DT_I16: case DT_U16:
		for (int64_t k = 0; k < n; k++)
			t->i[k] = dtype_wrap(t->dtype, t->i[k]);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------------ broadcasting */

/* Strides of t seen as broadcast to (rank, shape): 0 on broadcast axes. */
static void bcast_strides(const Tensor *t, int rank, const int64_t *shape, int64_t *st)
{
	if (t->rank > rank)
		ice("interp: cannot broadcast rank %d to rank %d", t->rank, rank);
	int64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		int j = i - (rank - t->rank);
		if (j < 0) {
			st[i] = 0;
			continue;
		}
		if (t->shape[j] == shape[i])
			st[i] = t->shape[j] == 1 ? 0 : s;
		else if (t->shape[j] == 1)
			st[i] = 0;
		else
			ice("interp: cannot broadcast dim %lld to %lld", (long long)t->shape[j],
			    (long long)shape[i]);
		s *= t->shape[j];
	}
}

void biter_init(BIter *it, int rank, const int64_t *shape, Tensor **ts, int nt)
{
	memset(it, 0, sizeof *it);
	it->nt = nt;
	int64_t n = numel_of(rank, shape);
	int same = 1;
	for (int k = 0; k < nt; k++)
		if (ts[k]->rank != rank || memcmp(ts[k]->shape, shape, rank * sizeof(int64_t)))
			same = 0;
	if (same || rank == 0) {
		/* one row over everything */
		for (int k = 0; k < nt; k++) {
			if (ts[k]->n != n && ts[k]->n != 1)
				ice("interp: broadcasting %lld elements to %lld",
				    (long long)ts[k]->n, (long long)n);
			it->step[k] = ts[k]->n == n ? 1 : 0;
		}
		it->inner = n;
		it->rows = n ? 1 : 0;
		return;
	}
	int64_t st[MAX_RANK];
	for (int k = 0; k < nt; k++) {
		bcast_strides(ts[k], rank, shape, st);
		memcpy(it->st[k], st, (size_t)rank * sizeof(int64_t));
		it->step[k] = st[rank - 1];
	}
	it->orank = rank - 1;
	memcpy(it->shape, shape, (size_t)rank * sizeof(int64_t));
	it->inner = shape[rank - 1];
	it->rows = it->inner ? n / it->inner : 0;
}

void biter_next(BIter *it)
{
	for (int d = it->orank - 1; d >= 0; d--) {
		it->idx[d]++;
		for (int k = 0; k < it->nt; k++)
			it->off[k] += it->st[k][d];
		if (it->idx[d] < it->shape[d])
			return;
		for (int k = 0; k < it->nt; k++)
			it->off[k] -= it->st[k][d] * it->shape[d];
		it->idx[d] = 0;
	}
}

int64_t index_next(int64_t *idx, int64_t off, const int64_t *st, const int64_t *shape, int rank)
{
	for (int d = rank - 1; d >= 0; d--) {
		idx[d]++;
		off += st[d];
		if (idx[d] < shape[d])
			break;
		off -= st[d] * shape[d];
		idx[d] = 0;
	}
	return off;
}

void axis_split(const Tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
	if (axis < 0 || axis >= t->rank)
		ice("interp: axis %d of a rank-%d tensor", axis, t->rank);
	int64_t o = 1, i = 1;
	for (int d = 0; d < axis; d++)
		o *= t->shape[d];
	for (int d = axis + 1; d < t->rank; d++)
		i *= t->shape[d];
	*outer = o;
	*len = t->shape[axis];
	*inner = i;
}

/* ------------------------------------------------------------------ frames */

Tensor *new_out(const Node *n)
{
	return tensor_new(n->dtype, n->rank, n->shape);
}

int same_shape(const Tensor *t, const Node *n)
{
	return t->rank == n->rank && !memcmp(t->shape, n->shape, (size_t)n->rank * sizeof(int64_t));
}

void need_shape(const Tensor *t, const Node *n, const char *what)
{
	if (!same_shape(t, n))
		ice("interp: %s %%%d: a value of rank %d does not match the node's shape", what,
		    n->id, t->rank);
}

void need_float(const Node *n, const Tensor *t)
{
	if (!t->f || !is_float(n->dtype))
		ice("interp: %s %%%d needs float operands", op_name(n->op), n->id);
}

Tensor *take_input(Frame *fr, Node *n, int k)
{
	Node *m = n->in[k];
	Val *v = &fr->val[m->id];
	if (!v->t || v->borrowed || fr->last[m->id] != n->id || !same_shape(v->t, n) ||
	    (v->t->f != NULL) != is_float(n->dtype))
		return NULL;
	Tensor *t = v->t;
	v->t = NULL;
	t->dtype = n->dtype;
	return t;
}

void copy_elems(Tensor *o, int64_t oo, const Tensor *x, int64_t xo, int64_t cnt)
{
	if (o->f)
		memcpy(o->f + oo, x->f + xo, (size_t)cnt * sizeof(double));
	else
		memcpy(o->i + oo, x->i + xo, (size_t)cnt * sizeof(int64_t));
}

void need_storage(const Node *n, const Tensor *x)
{
	if ((x->f != NULL) != is_float(n->dtype))
		ice("interp: %s %%%d changes storage", op_name(n->op), n->id);
}

void runtime_error(Program *p, Loc loc, const char *msg)
{
	if (p && p->src && p->src->line_start && loc.off >= 0 && loc.end > loc.off &&
	    (size_t)loc.off <= p->src->len) {
		Diag d = {0};
		d.src = p->src;
		d.out = stderr;
		error_at(&d, loc, "%s", msg);
		diag_free(&d);
	} else {
		fprintf(stderr, "nestc: error: %s\n", msg);
	}
}


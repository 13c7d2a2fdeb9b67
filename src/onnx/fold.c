/* fold.c - values as Nest text: the expression of a value (a literal, a
 * full(), a param with its bytes in the weights, a region's placeholder),
 * the `let` of a node's output, and the helpers every op's translation and
 * constant folding share (inputs, axes, broadcasting, element positions). */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int check_shape(Ctx *c, int rank, const int64_t *shape)
{
	if (rank > MAX_RANK) {
		/* a defence: every translator bounds its output's rank first
		 * (Unsqueeze, GatherND, OneHot, Expand with their own messages; the
		 * others keep their inputs' ranks, at most MAX_RANK when read) */
		node_err(c, 1, "rank %d is more than nestc's %d", rank, MAX_RANK);
		return -1; /* equivalent mutant [const 1 -> 0]: no graph reaches it */
	}
	int64_t n = 1;
	for (int k = 0; k < rank; k++) {
		if (shape[k] == 0)
			continue; /* no elements: Nest has empty tensors; the other dims stay bounded */
		if (shape[k] < 0 || shape[k] > ((int64_t)1 << 40) || n > ((int64_t)1 << 40) / shape[k]) {
			node_err(c, 0, "dimension %d is out of range (%lld)", k, (long long)shape[k]);
			return -1;
		}
		n *= shape[k];
	}
	return 0;
}

static void shape_text(Buf *b, int rank, const int64_t *shape)
{
	buf_putc(b, '[');
	for (int k = 0; k < rank; k++)
		buf_printf(b, "%s%lld", k ? ", " : "", (long long)shape[k]);
	buf_putc(b, ']');
}

void type_text(Buf *b, DType dt, int rank, const int64_t *shape)
{
	buf_puts(b, dtype_name(dt));
	shape_text(b, rank, shape);
}

/* A float as a Nest literal, or 0 if it has none (NaN). */
int float_lit(char *out, size_t n, double x, DType dt)
{
	if (isnan(x))
		return 0;
	if (isinf(x)) {
		snprintf(out, n, "%sinf", x < 0 ? "-" : "");
		return 1;
	}
	char t[64];
	/* the shortest text that reads back as the same value */
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(t, sizeof t, "%.*g", prec, x);
		double y = strtod(t, NULL);
		if (dt == DT_F32 ? (float)y == (float)x : y == x)
			break;
	}
	Buf b = {0};
	int has_dot = 0;
	for (char *s = t; *s; s++) {
		if (*s == '.' || *s == 'e')
			has_dot = 1; /* equivalent mutant [const 1 -> 2]: only tested for truth */
		if (*s == '+')
			continue;
		buf_putc(&b, *s);
	}
	if (!has_dot)
		buf_puts(&b, ".0");
	snprintf(out, n, "%s", b.s);
	buf_free(&b);
	return 1;
}

/* Element k of v in the weights file's layout at p. */
static void put_elem(unsigned char *p, const Val *v, int64_t k)
{
	switch (v->dt) {
	case DT_F32: { float x = (float)v->f[k]; memcpy(p, &x, 4); break; }
	case DT_F64: memcpy(p, &v->f[k], 8); break;
	case DT_I32: { int32_t x = (int32_t)v->i[k]; memcpy(p, &x, 4); break; }
	case DT_I64: memcpy(p, &v->i[k], 8); break;
	case DT_BOOL: p[0] = v->i[k] != 0; break;
	default: break;
	}
}

static void add_weight(Ctx *c, const char *name, Val *v)
{
	if (c->nw == c->capw) {
		c->capw = c->capw ? 2 * c->capw : 16;
		c->w = xrealloc(c->w, (size_t)c->capw * sizeof *c->w);
	}
	WEntry *e = &c->w[c->nw++];
	memset(e, 0, sizeof *e);
	e->name = xstrdup(name);
	e->dt = v->dt;
	e->rank = v->rank;
	memcpy(e->shape, v->shape, sizeof e->shape);
	size_t es = (size_t)dtype_size(v->dt);
	e->nbytes = (size_t)v->n * es;
	if (v->lazy && v->raw && raw_same_layout(v->raw_ot, v->dt)) {
		/* the initializer's bytes are the weight's: no copy */
		e->data = (void *)v->raw;
		e->borrowed = 1;
		return;
	}
	e->data = xmalloc(e->nbytes + 1);
	unsigned char *p = e->data;
	for (int64_t k = 0; k < v->n; k++) {
		/* equivalent mutant [logic && -> ||]: a value with raw bytes is
		 * lazy, and a lazy one without them is a dry pass's, which writes
		 * no weights */
		if (v->lazy && v->raw) {
			double f;
			int64_t i;
			Val one = raw_one(v, k, &f, &i);
			put_elem(p + es * (size_t)k, &one, 0);
		} else {
			put_elem(p + es * (size_t)k, v, k);
		}
	}
}

int is_inner(Ctx *c, Val *v)
{
	for (int k = 0; k < c->inner.n; k++)
		if (c->inner.v[k] == v)
			return 1;
	return 0;
}

/* The placeholder of an outside tensor named id in the segment's template. */
static const char *ext_ref(Ctx *c, Val *v, const char *id)
{
	for (int k = 0; k < c->next; k++)
		if (!strcmp(c->ext[k].id, id))
			return c->ext[k].ph;
	if (c->next == c->capext) {
		c->capext = c->capext ? 2 * c->capext : 16;
		c->ext = xrealloc(c->ext, (size_t)c->capext * sizeof *c->ext);
	}
	ExtRef *e = &c->ext[c->next];
	e->id = xstrdup(id);
	e->oname = xstrdup(v->name);
	e->ph = xasprintf("@P%d@", c->next);
	e->dt = v->dt;
	e->rank = v->rank;
	memcpy(e->shape, v->shape, sizeof e->shape);
	c->next++;
	return e->ph;
}

/* Names known value v by a `let` of the expression in b (freed). */
static const char *let_known(Ctx *c, Val *v, Buf *b)
{
	v->id = make_id(c, v->name, "c_");
	buf_printf(&c->body, "  let %s = %s\n", v->id, b->s);
	buf_free(b);
	if (c->rmode && !is_inner(c, v))
		vec_push(&c->inner, v); /* its name is the segment's */
	return v->id;
}

/* The Nest expression of v, making it a literal, a full() or a param when
 * it is a known value not yet named. */
const char *ref(Ctx *c, Val *v)
{
	if (c->rmode) {
		if (v == c->rin)
			return "@X@";
		if (v->id && !is_inner(c, v))
			return ext_ref(c, v, v->id);
	}
	if (v->id)
		return v->id;
	if (!v->known) {
		/* only a wrong outlining plan gets here: import_model retries without */
		c->broken = 1;
		node_err(c, 0, "value '%.200s' is used outside the part of the graph that computes it", v->name);
		return "__broken__";
	}
	if (v->n == 0) {
		/* no element to write: an empty tensor of its shape */
		Buf b = {0};
		buf_printf(&b, "%s(zeros(", dtype_name(v->dt));
		shape_text(&b, v->rank, v->shape);
		buf_puts(&b, "))");
		return let_known(c, v, &b);
	}
	if (v->lazy && v->raw && raw_splat(v))
		val_decode(v); /* a splat: full() below, as when it was read at once */
	int splat = !v->lazy;
	for (int64_t k = 1; k < v->n && splat; k++)
		splat = kget(v, k) == kget(v, 0); /* false for NaN */
	char lit[128] = "";
	int have = 1;
	if (v->lazy && v->raw)
		/* not decoded: a param. equivalent mutant [stmt]: the `if
		 * (v->lazy) have = 0` below clears it for every lazy value too */
		have = 0;
	else if (dtype_is_float(v->dt))
		have = float_lit(lit, sizeof lit, v->f[0], v->dt);
	else if (v->dt == DT_BOOL)
		snprintf(lit, sizeof lit, "%s", v->i[0] ? "true" : "false");
	else
		snprintf(lit, sizeof lit, "%lld", (long long)v->i[0]);
	if (lit[0] == '-' && v->dt != DT_BOOL && have) {
		/* unary minus of a compile-time number */
		char t[128];
		snprintf(t, sizeof t, "(%.100s)", lit);
		snprintf(lit, sizeof lit, "%s", t);
	}
	Buf b = {0};
	if (v->lazy)
		have = 0;
	if (have && v->rank == 0) {
		buf_printf(&b, "%s(%s)", dtype_name(v->dt), lit);
	} else if (have && splat && v->dt != DT_BOOL && v->n > 1) {
		buf_printf(&b, "%s(full(", dtype_name(v->dt));
		shape_text(&b, v->rank, v->shape);
		buf_printf(&b, ", %s))", lit);
		if (!dtype_is_float(v->dt) && llabs(v->i[0]) > (1 << 24)) {
			buf_free(&b);
			b = (Buf){0};
		}
	}
	if (b.s)
		return let_known(c, v, &b);
	int rm = c->rmode;
	c->rmode = 0;
	v->id = make_id(c, v->name, "c_");
	c->rmode = rm;
	buf_printf(&c->params, "param %s: ", v->id);
	type_text(&c->params, v->dt, v->rank, v->shape);
	buf_printf(&c->params, " = \"%s\"\n", v->name);
	if (!c->dry) {
		add_weight(c, v->name, v);
		c->w[c->nw - 1].id = xstrdup(v->id);
	}
	if (rm) {
		/* a weight: the region reads it from its record argument */
		if (is_inner(c, v)) {
			for (int k = 0; k < c->inner.n; k++)
				if (c->inner.v[k] == v)
					c->inner.v[k] = NULL; /* its global name stays */
		}
		return ext_ref(c, v, v->id);
	}
	return v->id;
}

/* Input k, or NULL when absent or "". */
Val *in_(NodeIO *io, int k)
{
	/* equivalent mutant [cmp < -> <=]: a NodeIO starts zeroed, so in[nin]
	 * is NULL below MAX_NODE_INPUTS, and only variadic ops (which ask for
	 * k < nin) have that many inputs */
	return k < io->nin ? io->in[k] : NULL;
}

/* Inputs 0..n-1 into the n Val ** that follow, all required: -1 after
 * "needs WHAT" when one is absent. */
int inputs(Ctx *c, NodeIO *io, const char *what, int n, ...)
{
	va_list ap;
	va_start(ap, n);
	int bad = 0;
	for (int k = 0; k < n; k++) {
		Val **p = va_arg(ap, Val **);
		*p = in_(io, k);
		bad |= !*p;
	}
	va_end(ap);
	if (bad)
		node_err(c, 0, "needs %s", what);
	return bad ? -1 : 0;
}

const char *out_name(NodeIO *io, int k)
{
	return (size_t)k < io->n->n_output ? io->n->output[k] : "";
}

static char *vfmt(const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		ice("onnx: bad format");
	char *e = xmalloc((size_t)n + 1);
	vsnprintf(e, (size_t)n + 1, fmt, ap);
	return e;
}

/* A new value for output k, named by a `let` of expr (printf). */
Val *def(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape, const char *fmt, ...)
{
	if (check_shape(c, rank, shape) < 0)
		return NULL;
	const char *nm = out_name(io, k);
	Val *v = new_val(c, nm, dt, rank, shape);
	v->id = make_id(c, nm, "v_");
	va_list ap;
	va_start(ap, fmt);
	char *e = vfmt(fmt, ap);
	va_end(ap);
	buf_printf(&c->body, "  let %s = %s\n", v->id, e);
	free(e);
	return v;
}

/* Output k as the `let` of fn(x, [list]) (reshape, transpose, expand, ...);
 * 0, or -1 after an error. */
int def_list(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape, const char *fn, Val *x, int n,
             const int64_t *list)
{
	char *l = list_text(n, list);
	Val *o = def(c, io, k, dt, rank, shape, "%s(%s, %s)", fn, ref(c, x), l);
	free(l);
	return o ? 0 : -1;
}

/* A new known value for output k (filled by the caller). */
Val *def_known(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape)
{
	if (check_shape(c, rank, shape) < 0)
		return NULL;
	Val *v = new_val(c, out_name(io, k), dt, rank, shape);
	val_alloc(v);
	return v;
}

/* A temporary `let` (not an ONNX value). */
char *tmp(Ctx *c, const char *fmt, ...)
{
	char nm[32];
	snprintf(nm, sizeof nm, "t%d", c->ntmp++);
	char *id = make_id(c, nm, "t_");
	va_list ap;
	va_start(ap, fmt);
	char *e = vfmt(fmt, ap);
	va_end(ap);
	buf_printf(&c->body, "  let %s = %s\n", id, e);
	free(e);
	return id;
}

/* Alias output k to v (Identity). */
void alias(Ctx *c, NodeIO *io, int k, Val *v)
{
	const char *id = v->id || (c->rmode && v == c->rin) ? ref(c, v) : NULL;
	Val *o = new_val(c, out_name(io, k), v->dt, v->rank, v->shape);
	o->id = id ? xstrdup(id) : NULL;
	o->ot = v->ot;
	if (v->lazy && v->raw) {
		/* the same bytes (owned by v) */
		o->known = 1;
		o->lazy = 1;
		o->raw = v->raw;
		o->raw_ot = v->raw_ot;
		return;
	}
	if (v->known) {
		val_alloc(o);
		for (int64_t j = 0; j < v->n; j++) {
			if (v->f)
				o->f[j] = v->f[j];
			else
				o->i[j] = v->i[j];
		}
	}
}

int oaxis(Ctx *c, int64_t a, int rank)
{
	if (a < -rank || a >= (rank ? rank : 1)) {
		node_err(c, 0, "axis %lld is out of range for rank %d", (long long)a, rank);
		return -1;
	}
	return (int)(a < 0 ? a + rank : a);
}

/* Values that must be known at import (shapes, axes, ...). */
int need_known(Ctx *c, Val *v, const char *what)
{
	if (!v)
		return 0;
	if (v->known)
		return 0;
	if (v->is_input) {
		node_err(c, 0, "input '%s' gives the %s, which must be known at import: freeze it with --freeze %s=FILE.npy (or FILE.pb)",
		         v->name, what, v->name);
		return -1;
	}
	node_err(c, 1, "the %s ('%s') is computed at run time; nestc needs it at import", what, v->name);
	return -1;
}

int broadcast(Ctx *c, int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *out)
{
	*r = ra > rb ? ra : rb;
	for (int k = 0; k < *r; k++) {
		int64_t x = k - (*r - ra) >= 0 ? a[k - (*r - ra)] : 1;
		int64_t y = k - (*r - rb) >= 0 ? b[k - (*r - rb)] : 1;
		if (x != y && x != 1 && y != 1) {
			node_err(c, 0, "shapes do not broadcast: axis %d is %lld vs %lld", k, (long long)x, (long long)y);
			return -1;
		}
		out[k] = x == 1 ? y : x;
	}
	return 0;
}

/* Element index in a (broadcast) operand for output position idx. */
int64_t bidx(const Val *v, int r, const int64_t *oshape, const int64_t *pos)
{
	int64_t o = 0;
	int off = r - v->rank;
	for (int k = 0; k < v->rank; k++) {
		int64_t p = v->shape[k] == 1 ? 0 : pos[k + off];
		o = o * v->shape[k] + p;
	}
	(void)oshape;
	return o;
}

void unravel(int64_t k, int r, const int64_t *shape, int64_t *pos)
{
	for (int d = r - 1; d >= 0; d--) {
		pos[d] = k % shape[d];
		k /= shape[d];
	}
}

/* A name for a value the translation adds (a sum inside Mean, a gather's
 * index constant): base, or base#2, base#3, ..., the first that no value of
 * the graph has (ONNX names may be anything). */
char *fresh_name(Ctx *c, const char *base)
{
	char *nm = xstrdup(base);
	for (int k = 2; find_val(c, nm); k++) {
		free(nm);
		nm = xasprintf("%s#%d", base, k);
	}
	return nm;
}

/* Output 0 as expr, of shape sh; as zeros when sh has no element (a gather
 * over an empty axis would have nothing to read). 0, or -1 after an error. */
int def_shaped(Ctx *c, NodeIO *io, DType dt, int r, const int64_t *sh, const char *expr)
{
	int empty = 0;
	for (int k = 0; k < r; k++)
		empty |= sh[k] == 0;
	char *zl = list_text(r, sh);
	Val *o = empty ? def(c, io, 0, dt, r, sh, "%s(zeros(%s))", dtype_name(dt), zl) : def(c, io, 0, dt, r, sh, "%s", expr);
	free(zl);
	return o ? 0 : -1;
}

/* Output 0 folded, of shape sh (rank r) and a's dtype: each element is a's
 * at its broadcast position, or with cond (Where) a's where cond holds and
 * b's elsewhere. 0, or -1 after an error. */
int fold_broadcast(Ctx *c, NodeIO *io, Val *cond, Val *a, Val *b, int r, const int64_t *sh)
{
	Val *o = def_known(c, io, 0, a->dt, r, sh);
	if (!o)
		return -1;
	int64_t pos[MAX_RANK];
	for (int64_t k = 0; k < o->n; k++) {
		unravel(k, r, sh, pos);
		Val *s = !cond || kgeti(cond, bidx(cond, r, sh, pos)) ? a : b;
		kset(o, k, kget(s, bidx(s, r, sh, pos)));
	}
	return 0;
}

int all_known(NodeIO *io)
{
	int any = 0;
	for (int k = 0; k < io->nin; k++) {
		if (io->in[k] && !io->in[k]->known)
			return 0;
		any |= io->in[k] != NULL;
	}
	return any;
}

/* Index expression "x[:, :, a:b]" for axis ax. */
char *slice_expr(const char *x, int ax, int64_t a, int64_t b)
{
	Buf s = {0};
	buf_printf(&s, "%s[", x);
	for (int k = 0; k < ax; k++)
		buf_puts(&s, ":, ");
	buf_printf(&s, "%lld:%lld]", (long long)a, (long long)b);
	char *r = xstrdup(s.s);
	buf_free(&s);
	return r;
}

char *list_text(int n, const int64_t *v)
{
	Buf b = {0};
	shape_text(&b, n, v);
	char *r = xstrdup(b.s);
	buf_free(&b);
	return r;
}

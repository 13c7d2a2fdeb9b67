/* onnx.c - ONNX in: an ONNX model (read with protobuf-c, from the onnx.proto
 * that Debian's libonnx-dev ships, compiled by protoc-c at build time) becomes
 * Nest source text, which the normal front end then reads.
 *
 * The translation walks the graph in order. Every tensor gets a Val: its
 * dtype and static shape (inferred here, op by op), and its value when it is
 * known at import (initializers used as shapes, Constant nodes, and whatever
 * is computed from them alone: the Shape -> Gather -> Concat -> Reshape
 * chains of exported models fold away). A value that is needed as a tensor
 * becomes a Nest expression: a `let` per node, a literal for a known scalar,
 * `full(...)` for a known splat, a `param` (with its data in the weights
 * file) for any other known tensor.
 *
 * Errors name the file and the node: "FILE: error: node 'NAME' (OpType,
 * opset N): reason". Nothing here trusts the file: protobuf-c rejects
 * malformed bytes, and every index, count and shape is checked before use. */
#include "nestc.h"
#include "onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* ONNX TensorProto.DataType */
enum {
	OT_UNDEF = 0, OT_FLOAT = 1, OT_UINT8 = 2, OT_INT8 = 3, OT_UINT16 = 4, OT_INT16 = 5, OT_INT32 = 6,
	OT_INT64 = 7, OT_STRING = 8, OT_BOOL = 9, OT_FLOAT16 = 10, OT_DOUBLE = 11, OT_UINT32 = 12,
	OT_UINT64 = 13, OT_BFLOAT16 = 16,
};

static const char *onnx_dtype_name(int t)
{
	static const char *const n[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32",
	                                "int64", "string", "bool", "float16", "double", "uint32", "uint64",
	                                "complex64", "complex128", "bfloat16"};
	return t >= 0 && t <= 16 ? n[t] : "unknown";
}

/* The Nest dtype an ONNX dtype is held in; -1: none. Narrow integers and
 * float16 are widened (the caller converts at the boundary; every value of
 * theirs is exact in the wider type). */
int onnx_nest_dtype(int t)
{
	switch (t) {
	case OT_FLOAT: case OT_FLOAT16: case OT_BFLOAT16: return DT_F32;
	case OT_DOUBLE: return DT_F64;
	case OT_INT8: case OT_UINT8: case OT_INT16: case OT_UINT16: case OT_INT32: return DT_I32;
	case OT_UINT32: case OT_INT64: case OT_UINT64: return DT_I64;
	case OT_BOOL: return DT_BOOL;
	default: return -1;
	}
}

static int nest_to_onnx(DType d)
{
	static const int m[DT_COUNT] = {OT_BOOL, OT_INT32, OT_INT64, OT_FLOAT, OT_DOUBLE};
	return m[d];
}

typedef struct Val {
	char *name;     /* ONNX name */
	char *id;       /* Nest expression naming it, or NULL (not yet materialised) */
	DType dt;
	int rank;
	int64_t shape[MAX_RANK];
	int64_t n;
	int known;      /* value below */
	double *f;      /* float dtypes */
	int64_t *i;     /* integer dtypes and bool */
	int is_input;   /* graph input (not frozen) */
	int lazy;       /* a big initializer not decoded: zeros in a dry pass, else raw below */
	/* a big initializer's bytes, read in place (ONNX dtype raw_ot) until a fold
	 * needs its values (val_decode): weights go to the weights file as they
	 * are, never through doubles */
	const unsigned char *raw;
	int raw_ot;
	Onnx__TensorProto *src; /* the TensorProto raw points into, or NULL */
	unsigned char *rawbuf;  /* external data read for it (owned), or NULL */
	int shape_use;  /* (input) used where a value must be known */
} Val;

typedef struct WEntry {
	char *name;
	char *id;       /* the flat param's Nest name */
	char *path;     /* grouped: its path expression (h[3].attn.c_attn.weight), or NULL */
	DType dt;
	int rank;
	int64_t shape[MAX_RANK];
	void *data;
	size_t nbytes;
	int borrowed;   /* data points into an initializer's bytes: not freed here */
	Onnx__TensorProto *src; /* that initializer: its bytes are released once copied out */
} WEntry;

typedef struct Ctx {
	const char *path;
	const OnnxOptions *opt;
	Val **vals;
	int nvals, capvals;
	Vec ids;        /* Nest identifiers used (char *) */
	Buf consts, params, body;
	WEntry *w;
	int nw, capw;
	int opset;
	/* the node being translated, for messages */
	Onnx__NodeProto *node;
	int node_index;
	int ntmp;
	char err[1024];
	int failed;
	int unsupported;
	/* outlining (see outline_plan): while rmode, the nodes of one segment
	 * are translated as a region template: new names are placeholders @Lk@,
	 * the segment's input is @X@, and tensors from outside (weights) are
	 * @Pk@, fields of the region's record argument */
	int dry;         /* a pass whose text and weights are thrown away: no weight bytes */
	int rmode;
	Val *rin;
	Vec inner;       /* Val * made or named during the segment */
	struct ExtRef *ext;
	int next, capext;
	int rcount;
	int broken;      /* a value named only inside a segment was used after it */
	Vec garbage;     /* strings freed with the context */
	struct OPlan *plan;
} Ctx;

typedef struct ExtRef {
	char *id;        /* the Nest name outside */
	char *oname;     /* the ONNX name */
	char *ph;        /* "@Pk@" */
	DType dt;
	int rank;
	int64_t shape[MAX_RANK];
} ExtRef;

/* ------------------------------------------------------------------ errors */

static void node_err(Ctx *c, int unsupported, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void node_err(Ctx *c, int unsupported, const char *fmt, ...)
{
	if (c->failed)
		return;
	c->failed = 1;
	c->unsupported = unsupported;
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* a name from the file may hold anything: control characters are shown as '?' */
	for (char *q = msg; *q; q++)
		if ((unsigned char)*q < 0x20)
			*q = '?';
	if (c->node) {
		const char *nm = c->node->name && *c->node->name ? c->node->name : NULL;
		char safe[201];
		if (nm) {
			snprintf(safe, sizeof safe, "%s", nm);
			for (char *q = safe; *q; q++)
				if ((unsigned char)*q < 0x20)
					*q = '?';
			nm = safe;
		}
		char opn[101];
		snprintf(opn, sizeof opn, "%s", c->node->op_type ? c->node->op_type : "");
		for (char *q = opn; *q; q++)
			if ((unsigned char)*q < 0x20)
				*q = '?';
		if (nm)
			snprintf(c->err, sizeof c->err, "node '%.200s' (%s, opset %d): %s", nm, opn, c->opset, msg);
		else
			snprintf(c->err, sizeof c->err, "node #%d (%s, opset %d): %s", c->node_index, opn,
			         c->opset, msg);
	} else {
		snprintf(c->err, sizeof c->err, "%s", msg);
	}
}

/* ------------------------------------------------------------------ names */

static const char *const keywords[] = {"const", "param", "type", "fn", "export", "let", "for", "in", "return",
                                       "region", "true", "false", "inf", "pi", "f32", "f64", "i32", "i64",
                                       "bool", "f16", "bf16", "int", "float", "forward", NULL};

static int id_taken(Ctx *c, const char *s)
{
	for (int k = 0; keywords[k]; k++)
		if (!strcmp(keywords[k], s))
			return 1;
	if (is_builtin(s))
		return 1;
	for (int k = 0; k < c->ids.n; k++)
		if (!strcmp(c->ids.v[k], s))
			return 1;
	return 0;
}

/* A fresh Nest identifier made from an ONNX name (prefix when it is empty,
 * starts with a digit, or is taken). */
static char *make_id(Ctx *c, const char *name, const char *prefix)
{
	if (c->rmode)
		return xasprintf("@L%d@", c->rcount++);
	Buf b = {0};
	if (!name || !*name || (*name >= '0' && *name <= '9'))
		buf_puts(&b, prefix);
	for (const char *s = name ? name : ""; *s && b.len < 60; s++) {
		char ch = *s;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
		buf_putc(&b, ok ? ch : '_');
	}
	if (!b.s)
		buf_puts(&b, prefix);
	char *base = xstrdup(b.s);
	buf_free(&b);
	char *id = xstrdup(base);
	if (id_taken(c, id)) {
		free(id);
		id = xasprintf("%s%s", prefix, base);
	}
	for (int k = 2; id_taken(c, id); k++) {
		free(id);
		id = xasprintf("%s%s_%d", prefix, base, k);
	}
	free(base);
	vec_push(&c->ids, id);
	return xstrdup(id);
}

/* ------------------------------------------------------------------ values */

static Val *find_val(Ctx *c, const char *name)
{
	for (int k = c->nvals - 1; k >= 0; k--)
		if (!strcmp(c->vals[k]->name, name))
			return c->vals[k];
	return NULL;
}

static Val *new_val(Ctx *c, const char *name, DType dt, int rank, const int64_t *shape)
{
	Val *v = xcalloc(1, sizeof *v);
	v->name = xstrdup(name);
	v->dt = dt;
	v->rank = rank;
	v->n = 1;
	for (int k = 0; k < rank; k++) {
		v->shape[k] = shape[k];
		v->n *= shape[k];
	}
	if (c->nvals == c->capvals) {
		c->capvals = c->capvals ? 2 * c->capvals : 64;
		c->vals = xrealloc(c->vals, (size_t)c->capvals * sizeof *c->vals);
	}
	c->vals[c->nvals++] = v;
	if (c->rmode)
		vec_push(&c->inner, v);
	return v;
}

static void val_alloc(Val *v)
{
	if (dtype_is_float(v->dt))
		v->f = xcalloc((size_t)v->n + 1, sizeof(double));
	else
		v->i = xcalloc((size_t)v->n + 1, sizeof(int64_t));
	v->known = 1;
}

static double kget(const Val *v, int64_t k)
{
	return v->f ? v->f[k] : (double)v->i[k];
}

static int64_t kgeti(const Val *v, int64_t k)
{
	return v->f ? (int64_t)v->f[k] : v->i[k];
}

/* Store x into element k, rounded / wrapped to the dtype. */
static void kset(Val *v, int64_t k, double x)
{
	if (v->f)
		v->f[k] = v->dt == DT_F32 ? (double)(float)x : x;
	else if (v->dt == DT_BOOL)
		v->i[k] = x != 0;
	else if (v->dt == DT_I32)
		v->i[k] = (int32_t)(int64_t)x;
	else
		v->i[k] = (int64_t)x;
}

static void kseti(Val *v, int64_t k, int64_t x)
{
	if (v->f)
		kset(v, k, (double)x);
	else if (v->dt == DT_BOOL)
		v->i[k] = x != 0;
	else if (v->dt == DT_I32)
		v->i[k] = (int32_t)x;
	else
		v->i[k] = x;
}

static int check_shape(Ctx *c, int rank, const int64_t *shape)
{
	if (rank > MAX_RANK) {
		node_err(c, 1, "rank %d is more than nestc's %d", rank, MAX_RANK);
		return -1;
	}
	int64_t n = 1;
	for (int k = 0; k < rank; k++) {
		if (shape[k] == 0) {
			node_err(c, 1, "a tensor with no elements (dimension %d is 0) is not supported", k);
			return -1;
		}
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

static void type_text(Buf *b, DType dt, int rank, const int64_t *shape)
{
	buf_puts(b, dtype_name(dt));
	shape_text(b, rank, shape);
}

/* A float as a Nest literal, or 0 if it has none (NaN). */
static int float_lit(char *out, size_t n, double x, DType dt)
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
			has_dot = 1;
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

static void raw_elem(Val *v, int ot, const unsigned char *p, int64_t k);
static int elem_size(int ot);

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

/* Element k of a lazy value, decoded alone into a one-element Val. */
static Val raw_one(const Val *v, int64_t k, double *f, int64_t *i)
{
	Val one = {.dt = v->dt, .n = 1, .known = 1};
	if (dtype_is_float(v->dt))
		one.f = f;
	else
		one.i = i;
	raw_elem(&one, v->raw_ot, v->raw + (size_t)k * (size_t)elem_size(v->raw_ot), 0);
	return one;
}

/* Does the ONNX dtype store its elements as the Nest dtype does? */
static int raw_same_layout(int ot, DType dt)
{
	return (ot == OT_FLOAT && dt == DT_F32) || (ot == OT_DOUBLE && dt == DT_F64) || (ot == OT_INT32 && dt == DT_I32) ||
	       (ot == OT_INT64 && dt == DT_I64);
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
		e->src = v->src;
		return;
	}
	e->data = xmalloc(e->nbytes + 1);
	unsigned char *p = e->data;
	for (int64_t k = 0; k < v->n; k++) {
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

/* A lazy value's data decoded, as a value read at once would have it. */
static void val_decode(Val *v)
{
	if (!v->lazy || !v->raw)
		return; /* decoded, or a dry pass's zeros */
	val_alloc(v);
	size_t es = (size_t)elem_size(v->raw_ot);
	for (int64_t k = 0; k < v->n; k++)
		raw_elem(v, v->raw_ot, v->raw + (size_t)k * es, k);
	v->lazy = 0;
	v->raw = NULL;
	v->src = NULL;
}

/* Are all elements of a lazy value equal (and not NaN), as ref's test on
 * decoded data finds? Stops at the first that differs: weights differ early. */
static int raw_splat(const Val *v)
{
	double f0, f;
	int64_t i0, i;
	Val a = raw_one(v, 0, &f0, &i0);
	for (int64_t k = 1; k < v->n; k++) {
		Val b = raw_one(v, k, &f, &i);
		if (kget(&b, 0) != kget(&a, 0) || (b.f && isnan(b.f[0])))
			return 0;
	}
	return 1;
}

static int is_inner(Ctx *c, Val *v)
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

/* The Nest expression of v, making it a literal, a full() or a param when
 * it is a known value not yet named. */
static const char *ref(Ctx *c, Val *v)
{
	if (v->n == 0 && !v->known) {
		node_err(c, 1, "'%.200s' has no elements: a tensor with no elements is not supported", v->name);
		return "__empty__";
	}
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
		node_err(c, 1, "'%.200s' has no elements: a tensor with no elements is not supported", v->name);
		return "__empty__";
	}
	if (v->lazy && v->raw && raw_splat(v))
		val_decode(v); /* a splat: full() below, as when it was read at once */
	int splat = !v->lazy;
	for (int64_t k = 1; k < v->n && splat; k++)
		splat = kget(v, k) == kget(v, 0) && !(v->f && isnan(v->f[k]));
	char lit[128] = "";
	int have = 1;
	if (v->lazy && v->raw)
		have = 0; /* not decoded: a param */
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
	if (b.s) {
		v->id = make_id(c, v->name, "c_");
		buf_printf(&c->body, "  let %s = %s\n", v->id, b.s);
		buf_free(&b);
		if (c->rmode && !is_inner(c, v))
			vec_push(&c->inner, v); /* its name is the segment's */
		return v->id;
	}
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

/* ------------------------------------------------------------------ tensors from the file */

static int read_file_all(const char *path, unsigned char **data, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return -1;
	}
	size_t cap = 1 << 16, n = 0;
	unsigned char *b = xmalloc(cap);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			b = xrealloc(b, cap);
		}
		size_t got = fread(b + n, 1, cap - n, f);
		if (got == 0)
			break;
		n += got;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		snprintf(err, errlen, "cannot read: %s", strerror(errno));
		free(b);
		return -1;
	}
	*data = b;
	*len = n;
	return 0;
}

/* The directory of path, for external data ("dir/" or ""). */
static char *dir_of(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? xasprintf("%.*s/", (int)(s - path), path) : xstrdup("");
}

static int elem_size(int ot)
{
	switch (ot) {
	case OT_FLOAT: case OT_INT32: case OT_UINT32: return 4;
	case OT_DOUBLE: case OT_INT64: case OT_UINT64: return 8;
	case OT_UINT8: case OT_INT8: case OT_BOOL: return 1;
	case OT_UINT16: case OT_INT16: case OT_FLOAT16: case OT_BFLOAT16: return 2;
	default: return 0;
	}
}

static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v;
	if (e == 0)
		v = ldexp(m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexp(m + 1024, e - 25);
	return h & 0x8000 ? -v : v;
}

/* One element of raw little-endian data. */
static void raw_elem(Val *v, int ot, const unsigned char *p, int64_t k)
{
	switch (ot) {
	case OT_FLOAT: { float x; memcpy(&x, p, 4); kset(v, k, x); break; }
	case OT_DOUBLE: { double x; memcpy(&x, p, 8); kset(v, k, x); break; }
	case OT_FLOAT16: { uint16_t x; memcpy(&x, p, 2); kset(v, k, half_to_double(x)); break; }
	case OT_BFLOAT16: {
		uint16_t x;
		memcpy(&x, p, 2);
		uint32_t b = (uint32_t)x << 16;
		float f;
		memcpy(&f, &b, 4);
		kset(v, k, f);
		break;
	}
	case OT_INT8: kseti(v, k, (int8_t)p[0]); break;
	case OT_UINT8: case OT_BOOL: kseti(v, k, p[0]); break;
	case OT_INT16: { int16_t x; memcpy(&x, p, 2); kseti(v, k, x); break; }
	case OT_UINT16: { uint16_t x; memcpy(&x, p, 2); kseti(v, k, x); break; }
	case OT_INT32: { int32_t x; memcpy(&x, p, 4); kseti(v, k, x); break; }
	case OT_UINT32: { uint32_t x; memcpy(&x, p, 4); kseti(v, k, x); break; }
	case OT_INT64: case OT_UINT64: { int64_t x; memcpy(&x, p, 8); kseti(v, k, x); break; }
	default: break;
	}
}

/* Bytes [off, off + len) of a file (len < 0: to its end); its size in *flen.
 * 1: the range is outside the file (nothing read). */
static int read_file_range(const char *path, long long off, long long len, unsigned char **data, size_t *flen,
                           char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		/* not a regular file: read it whole */
		unsigned char *all;
		if (read_file_all(path, &all, flen, err, errlen) < 0)
			return -1;
		if (len < 0)
			len = (long long)*flen - off;
		if (off < 0 || len < 0 || (size_t)off > *flen || (size_t)len > *flen - (size_t)off) {
			free(all);
			return 1;
		}
		memmove(all, all + off, (size_t)len);
		*data = all;
		return 0;
	}
	*flen = (size_t)st.st_size;
	if (len < 0)
		len = (long long)*flen - off;
	if (off < 0 || len < 0 || (size_t)off > *flen || (size_t)len > *flen - (size_t)off) {
		fclose(f);
		return 1;
	}
	unsigned char *b = xmalloc((size_t)len + 1);
	if (fseeko(f, (off_t)off, SEEK_SET) < 0 || fread(b, 1, (size_t)len, f) != (size_t)len) {
		snprintf(err, errlen, "cannot read: %s", ferror(f) ? strerror(errno) : "the file is shorter than its size");
		fclose(f);
		free(b);
		return -1;
	}
	fclose(f);
	*data = b;
	return 0;
}

/* A TensorProto as a known Val named name; NULL after node_err. base: the
 * model's directory for external data. keep: t outlives the context, so a big
 * tensor's bytes may stay where they are, decoded only if a fold needs them. */
static Val *tensor_val(Ctx *c, Onnx__TensorProto *t, const char *name, const char *base, int keep)
{
	int ot = t->has_data_type ? t->data_type : 0;
	int dt = onnx_nest_dtype(ot);
	if (dt < 0) {
		node_err(c, 1, "tensor '%.200s' has dtype %s, which nestc does not support", name, onnx_dtype_name(ot));
		return NULL;
	}
	if (t->n_dims > MAX_RANK) {
		node_err(c, 1, "tensor '%.200s' has rank %zu, more than nestc's %d", name, t->n_dims, MAX_RANK);
		return NULL;
	}
	int64_t shape[MAX_RANK] = {0};
	for (size_t k = 0; k < t->n_dims; k++)
		shape[k] = t->dims[k];
	for (size_t k = 0; k < t->n_dims; k++)
		if (shape[k] < 0 || shape[k] > ((int64_t)1 << 40)) {
			node_err(c, 0, "tensor '%.200s' has dimension %lld", name, (long long)shape[k]);
			return NULL;
		}
	int64_t n = 1;
	for (size_t k = 0; k < t->n_dims; k++) {
		if (shape[k] && n > ((int64_t)1 << 40) / shape[k]) {
			node_err(c, 0, "tensor '%.200s' is too large", name);
			return NULL;
		}
		n *= shape[k];
	}
	Val *v = new_val(c, name, (DType)dt, (int)t->n_dims, shape);
	int es = elem_size(ot);
	if (c->dry && n > 65536) {
		val_alloc(v); /* calloc: pages of zeros that are never touched cost nothing */
		v->lazy = 1;
		return v;
	}
	const unsigned char *raw = NULL;
	size_t rawlen = 0;
	unsigned char *ext = NULL;
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		const char *loc = NULL;
		long long off = 0, len = -1;
		for (size_t k = 0; k < t->n_external_data; k++) {
			Onnx__StringStringEntryProto *e = t->external_data[k];
			if (!e->key || !e->value)
				continue;
			if (!strcmp(e->key, "location"))
				loc = e->value;
			else if (!strcmp(e->key, "offset"))
				off = atoll(e->value);
			else if (!strcmp(e->key, "length"))
				len = atoll(e->value);
		}
		if (!loc || strstr(loc, "..") || loc[0] == '/') {
			node_err(c, 0, "tensor '%.200s': external data without a valid location", name);
			return NULL;
		}
		char *dir = dir_of(base), *p = xasprintf("%s%s", dir, loc), err[300];
		free(dir);
		size_t flen;
		/* only the tensor's range: a model's tensors share one file */
		int rr = read_file_range(p, off, len, &ext, &flen, err, sizeof err);
		if (rr < 0) {
			node_err(c, 0, "tensor '%.200s': external data %s: %s", name, p, err);
			free(p);
			return NULL;
		}
		free(p);
		if (len < 0)
			len = (long long)flen - off;
		if (rr > 0) {
			node_err(c, 0, "tensor '%.200s': external data offset %lld length %lld outside the %zu-byte file", name,
			         off, len, flen);
			return NULL;
		}
		raw = ext;
		rawlen = (size_t)len;
	} else if (t->has_raw_data) {
		raw = t->raw_data.data;
		rawlen = t->raw_data.len;
	}
	if (raw) {
		if (rawlen != (size_t)n * (size_t)es) {
			node_err(c, 0, "tensor '%.200s' has %zu bytes of data, not the %lld its shape needs", name, rawlen,
			         (long long)n * es);
			free(ext);
			return NULL;
		}
		if (keep && n > 65536) {
			v->known = 1;
			v->lazy = 1;
			v->raw = raw;
			v->raw_ot = ot;
			v->src = ext ? NULL : t;
			v->rawbuf = ext;
			return v;
		}
		val_alloc(v);
		for (int64_t k = 0; k < n; k++)
			raw_elem(v, ot, raw + (size_t)k * (size_t)es, k);
		free(ext);
		return v;
	}
	val_alloc(v);
	size_t have = 0;
	switch (ot) {
	case OT_FLOAT: have = t->n_float_data; break;
	case OT_DOUBLE: have = t->n_double_data; break;
	case OT_INT64: have = t->n_int64_data; break;
	case OT_UINT32: case OT_UINT64: have = t->n_uint64_data; break;
	default: have = t->n_int32_data; break;
	}
	if (have != (size_t)n) {
		node_err(c, 0, "tensor '%.200s' has %zu values, not the %lld of its shape", name, have, (long long)n);
		return NULL;
	}
	for (int64_t k = 0; k < n; k++) {
		switch (ot) {
		case OT_FLOAT: kset(v, k, t->float_data[k]); break;
		case OT_DOUBLE: kset(v, k, t->double_data[k]); break;
		case OT_INT64: kseti(v, k, t->int64_data[k]); break;
		case OT_UINT32: case OT_UINT64: kseti(v, k, (int64_t)t->uint64_data[k]); break;
		case OT_FLOAT16: kset(v, k, half_to_double((uint16_t)t->int32_data[k])); break;
		case OT_BFLOAT16: {
			uint32_t b = (uint32_t)(uint16_t)t->int32_data[k] << 16;
			float f;
			memcpy(&f, &b, 4);
			kset(v, k, f);
			break;
		}
		default: kseti(v, k, t->int32_data[k]); break;
		}
	}
	return v;
}

/* ------------------------------------------------------------------ attributes */

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name)
{
	for (size_t k = 0; k < n->n_attribute; k++)
		if (n->attribute[k]->name && !strcmp(n->attribute[k]->name, name))
			return n->attribute[k];
	return NULL;
}

static int64_t attr_i(Onnx__NodeProto *n, const char *name, int64_t def)
{
	Onnx__AttributeProto *a = attr(n, name);
	return a && a->has_i ? a->i : def;
}

static double attr_f(Onnx__NodeProto *n, const char *name, double def)
{
	Onnx__AttributeProto *a = attr(n, name);
	return a && a->has_f ? a->f : def;
}

static int attr_ints(Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
	Onnx__AttributeProto *a = attr(n, name);
	if (!a)
		return -1;
	int m = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
	for (int k = 0; k < m; k++)
		out[k] = a->ints[k];
	return a->n_ints > (size_t)max ? max + 1 : m;
}

static char *attr_s(Onnx__NodeProto *n, const char *name)
{
	Onnx__AttributeProto *a = attr(n, name);
	if (!a || !a->has_s)
		return NULL;
	return xasprintf("%.*s", (int)a->s.len, (const char *)a->s.data);
}

/* ------------------------------------------------------------------ the translation of nodes */

typedef struct NodeIO {
	Val *in[16];
	int nin;
	Onnx__NodeProto *n;
} NodeIO;

/* Input k, or NULL when absent or "". */
static Val *in_(NodeIO *io, int k)
{
	return k < io->nin ? io->in[k] : NULL;
}

static const char *out_name(NodeIO *io, int k)
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
static Val *def(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
static Val *def(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape, const char *fmt, ...)
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

/* A new known value for output k (filled by the caller). */
static Val *def_known(Ctx *c, NodeIO *io, int k, DType dt, int rank, const int64_t *shape)
{
	/* a known value may have no elements (empty axes, the shape of a 0-d
	 * tensor); one that is needed as a tensor may not (ref) */
	int64_t nz[MAX_RANK];
	for (int j = 0; j < rank && j < MAX_RANK; j++)
		nz[j] = shape[j] ? shape[j] : 1;
	if (check_shape(c, rank, nz) < 0)
		return NULL;
	Val *v = new_val(c, out_name(io, k), dt, rank, shape);
	val_alloc(v);
	return v;
}

/* A temporary `let` (not an ONNX value). */
static char *tmp(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *tmp(Ctx *c, const char *fmt, ...)
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
static void alias(Ctx *c, NodeIO *io, int k, Val *v)
{
	const char *id = v->id || (c->rmode && v == c->rin) ? ref(c, v) : NULL;
	Val *o = new_val(c, out_name(io, k), v->dt, v->rank, v->shape);
	o->id = id ? xstrdup(id) : NULL;
	if (v->lazy && v->raw) {
		/* the same bytes (owned by v) */
		o->known = 1;
		o->lazy = 1;
		o->raw = v->raw;
		o->raw_ot = v->raw_ot;
		o->src = v->src;
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

static int oaxis(Ctx *c, int64_t a, int rank)
{
	if (a < -rank || a >= (rank ? rank : 1)) {
		node_err(c, 0, "axis %lld is out of range for rank %d", (long long)a, rank);
		return -1;
	}
	return (int)(a < 0 ? a + rank : a);
}

/* Values that must be known at import (shapes, axes, ...). */
static int need_known(Ctx *c, Val *v, const char *what)
{
	if (!v)
		return 0;
	if (v->known)
		return 0;
	if (v->is_input) {
		node_err(c, 0, "input '%s' gives the %s, which must be known at import: freeze it with --freeze %s=FILE.pb",
		         v->name, what, v->name);
		return -1;
	}
	node_err(c, 1, "the %s ('%s') is computed at run time; nestc needs it at import", what, v->name);
	return -1;
}

static int broadcast(Ctx *c, int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *out)
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
static int64_t bidx(const Val *v, int r, const int64_t *oshape, const int64_t *pos)
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

static void unravel(int64_t k, int r, const int64_t *shape, int64_t *pos)
{
	for (int d = r - 1; d >= 0; d--) {
		pos[d] = k % shape[d];
		k /= shape[d];
	}
}

static int all_known(NodeIO *io)
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
static char *slice_expr(const char *x, int ax, int64_t a, int64_t b)
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

static char *list_text(int n, const int64_t *v)
{
	Buf b = {0};
	shape_text(&b, n, v);
	char *r = xstrdup(b.s);
	buf_free(&b);
	return r;
}

/* ---- elementwise */

static double fold_bin(const char *op, double a, double b, int isint)
{
	if (!strcmp(op, "Add")) return a + b;
	if (!strcmp(op, "Sub")) return a - b;
	if (!strcmp(op, "Mul")) return a * b;
	if (!strcmp(op, "Div")) return isint ? (b == 0 ? 0 : trunc(a / b)) : a / b;
	if (!strcmp(op, "Pow")) return pow(a, b);
	if (!strcmp(op, "Max")) return a > b ? a : b;
	if (!strcmp(op, "Min")) return a < b ? a : b;
	if (!strcmp(op, "Equal")) return a == b;
	if (!strcmp(op, "Less")) return a < b;
	if (!strcmp(op, "Greater")) return a > b;
	if (!strcmp(op, "And")) return a && b;
	if (!strcmp(op, "Or")) return a || b;
	return 0;
}

static int tr_binary(Ctx *c, NodeIO *io, const char *op)
{
	Val *a = in_(io, 0), *b = in_(io, 1);
	if (!a || !b)
		return node_err(c, 0, "needs two inputs"), -1;
	int r;
	int64_t sh[MAX_RANK];
	if (broadcast(c, a->rank, a->shape, b->rank, b->shape, &r, sh) < 0)
		return -1;
	int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") || !strcmp(op, "LessOrEqual") ||
	          !strcmp(op, "GreaterOrEqual");
	int logic = !strcmp(op, "And") || !strcmp(op, "Or");
	DType odt = cmp ? DT_BOOL : a->dt;
	if (!cmp && !logic && strcmp(op, "Pow") && a->dt != b->dt)
		return node_err(c, 0, "operands of different dtypes (%s, %s)", dtype_name(a->dt), dtype_name(b->dt)), -1;
	if (a->known && b->known) {
		Val *o = def_known(c, io, 0, odt, r, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, r, sh, pos);
			if (!dtype_is_float(a->dt) && !dtype_is_float(b->dt) && !cmp && strcmp(op, "Pow")) {
				int64_t x = kgeti(a, bidx(a, r, sh, pos)), y = kgeti(b, bidx(b, r, sh, pos)), z = 0;
				if (!strcmp(op, "Add")) z = (int64_t)((uint64_t)x + (uint64_t)y);
				else if (!strcmp(op, "Sub")) z = (int64_t)((uint64_t)x - (uint64_t)y);
				else if (!strcmp(op, "Mul")) z = (int64_t)((uint64_t)x * (uint64_t)y);
				else if (!strcmp(op, "Div")) z = y == 0 || (y == -1 && x == INT64_MIN) ? 0 : x / y;
				else z = (int64_t)fold_bin(op, (double)x, (double)y, 1);
				kseti(o, k, z);
			} else {
				kset(o, k, fold_bin(op, kget(a, bidx(a, r, sh, pos)), kget(b, bidx(b, r, sh, pos)),
				                    !dtype_is_float(a->dt)));
			}
		}
		return 0;
	}
	if (!strcmp(op, "Pow") && b->known && b->n == 1 && dtype_is_float(a->dt) && r == a->rank) {
		/* small integer powers as products: exact, and no pow() per element */
		double e = kget(b, 0);
		const char *x = ref(c, a);
		if (e == 1)
			return def(c, io, 0, a->dt, r, sh, "%s", x) ? 0 : -1;
		if (e == 2)
			return def(c, io, 0, a->dt, r, sh, "%s * %s", x, x) ? 0 : -1;
		if (e == 3)
			return def(c, io, 0, a->dt, r, sh, "%s * %s * %s", x, x, x) ? 0 : -1;
		if (e == 0.5)
			return def(c, io, 0, a->dt, r, sh, "sqrt(%s)", x) ? 0 : -1;
	}
	const char *x = ref(c, a), *y = ref(c, b);
	if (!strcmp(op, "Pow")) {
		if (dtype_is_float(a->dt) && a->dt == b->dt)
			return def(c, io, 0, a->dt, r, sh, "pow(%s, %s)", x, y) ? 0 : -1;
		if (dtype_is_float(a->dt))
			return def(c, io, 0, a->dt, r, sh, "pow(%s, %s(%s))", x, dtype_name(a->dt), y) ? 0 : -1;
		return def(c, io, 0, a->dt, r, sh, "%s(pow(f64(%s), f64(%s)))", dtype_name(a->dt), x, y) ? 0 : -1;
	}
	if (!strcmp(op, "Max") || !strcmp(op, "Min"))
		return def(c, io, 0, odt, r, sh, "%s(%s, %s)", op[1] == 'a' ? "maximum" : "minimum", x, y) ? 0 : -1;
	if (!strcmp(op, "Div") && !dtype_is_float(a->dt)) {
		/* ONNX truncates, Nest floors */
		char *q = tmp(c, "%s / %s", x, y);
		Val *o = def(c, io, 0, odt, r, sh, "where((%s * %s != %s) && (((%s < 0) && (%s > 0)) || ((%s > 0) && (%s < 0))), %s + 1, %s)",
		             q, y, x, x, y, x, y, q, q);
		free(q);
		return o ? 0 : -1;
	}
	static const char *const ops[][2] = {{"Add", "+"}, {"Sub", "-"}, {"Mul", "*"}, {"Div", "/"}, {"Equal", "=="},
	                                      {"Less", "<"}, {"Greater", ">"}, {"LessOrEqual", "<="},
	                                      {"GreaterOrEqual", ">="}, {"And", "&&"}, {"Or", "||"}};
	for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
		if (!strcmp(ops[k][0], op))
			return def(c, io, 0, odt, r, sh, "%s %s %s", x, ops[k][1], y) ? 0 : -1;
	return -1;
}

static double fold_un(const char *op, double x)
{
	if (!strcmp(op, "Neg")) return -x;
	if (!strcmp(op, "Sqrt")) return sqrt(x);
	if (!strcmp(op, "Exp")) return exp(x);
	if (!strcmp(op, "Log")) return log(x);
	if (!strcmp(op, "Tanh")) return tanh(x);
	if (!strcmp(op, "Erf")) return erf(x);
	if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
	if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-x));
	if (!strcmp(op, "Reciprocal")) return 1 / x;
	if (!strcmp(op, "Not")) return !x;
	if (!strcmp(op, "Abs")) return fabs(x);
	return 0;
}

static int tr_unary(Ctx *c, NodeIO *io, const char *op)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	int floatonly = strcmp(op, "Neg") && strcmp(op, "Relu") && strcmp(op, "Not") && strcmp(op, "Abs");
	if (floatonly && !dtype_is_float(a->dt))
		return node_err(c, 1, "%s of %s is not supported", op, dtype_name(a->dt)), -1;
	if (a->known) {
		Val *o = def_known(c, io, 0, a->dt, a->rank, a->shape);
		if (!o)
			return -1;
		for (int64_t k = 0; k < a->n; k++)
			kset(o, k, fold_un(op, kget(a, k)));
		return 0;
	}
	const char *x = ref(c, a);
	const char *fn = NULL;
	if (!strcmp(op, "Neg"))
		return def(c, io, 0, a->dt, a->rank, a->shape, "-%s", x) ? 0 : -1;
	if (!strcmp(op, "Not"))
		return def(c, io, 0, a->dt, a->rank, a->shape, "!%s", x) ? 0 : -1;
	if (!strcmp(op, "Reciprocal"))
		return def(c, io, 0, a->dt, a->rank, a->shape, "1.0 / %s", x) ? 0 : -1;
	if (!strcmp(op, "Sqrt")) fn = "sqrt";
	if (!strcmp(op, "Exp")) fn = "exp";
	if (!strcmp(op, "Log")) fn = "log";
	if (!strcmp(op, "Tanh")) fn = "tanh";
	if (!strcmp(op, "Erf")) fn = "erf";
	if (!strcmp(op, "Relu")) fn = "relu";
	if (!strcmp(op, "Sigmoid")) fn = "sigmoid";
	if (!strcmp(op, "Abs")) fn = "abs";
	return def(c, io, 0, a->dt, a->rank, a->shape, "%s(%s)", fn, x) ? 0 : -1;
}

static int tr_variadic(Ctx *c, NodeIO *io, const char *op)
{
	Val *acc = NULL;
	int cnt = 0;
	for (int k = 0; k < io->nin; k++)
		if (io->in[k])
			cnt++;
	if (!cnt)
		return node_err(c, 0, "needs at least one input"), -1;
	if (cnt == 1) {
		for (int k = 0; k < io->nin; k++)
			if (io->in[k])
				alias(c, io, 0, io->in[k]);
		return 0;
	}
	/* fold pairwise: all but the last into temporaries */
	for (int k = 0; k < io->nin; k++) {
		if (!io->in[k])
			continue;
		if (!acc) {
			acc = io->in[k];
			continue;
		}
		NodeIO sub = {.nin = 2, .n = io->n};
		sub.in[0] = acc;
		sub.in[1] = io->in[k];
		if (tr_binary(c, &sub, op) < 0)
			return -1;
		acc = c->vals[c->nvals - 1];
		if (--cnt > 1) {
			/* rename the intermediate so the output name is defined once */
			char *nm = xasprintf("%s.%d", acc->name, k);
			free(acc->name);
			acc->name = nm;
		}
	}
	return 0;
}

static int tr_where(Ctx *c, NodeIO *io)
{
	Val *cd = in_(io, 0), *a = in_(io, 1), *b = in_(io, 2);
	if (!cd || !a || !b)
		return node_err(c, 0, "needs three inputs"), -1;
	int r1, r;
	int64_t s1[MAX_RANK], sh[MAX_RANK];
	if (broadcast(c, cd->rank, cd->shape, a->rank, a->shape, &r1, s1) < 0 ||
	    broadcast(c, r1, s1, b->rank, b->shape, &r, sh) < 0)
		return -1;
	if (all_known(io)) {
		Val *o = def_known(c, io, 0, a->dt, r, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, r, sh, pos);
			Val *s = kgeti(cd, bidx(cd, r, sh, pos)) ? a : b;
			kset(o, k, kget(s, bidx(s, r, sh, pos)));
		}
		return 0;
	}
	const char *x = ref(c, cd), *y = ref(c, a), *z = ref(c, b);
	return def(c, io, 0, a->dt, r, sh, "where(%s, %s, %s)", x, y, z) ? 0 : -1;
}

static int tr_cast(Ctx *c, NodeIO *io, int to)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	int dt = onnx_nest_dtype(to);
	if (dt < 0)
		return node_err(c, 1, "cast to %s is not supported", onnx_dtype_name(to)), -1;
	if (a->known) {
		Val *o = def_known(c, io, 0, (DType)dt, a->rank, a->shape);
		if (!o)
			return -1;
		for (int64_t k = 0; k < a->n; k++) {
			if (a->f && !o->f)
				kseti(o, k, isnan(a->f[k]) ? 0 : (int64_t)a->f[k]);
			else if (a->f)
				kset(o, k, a->f[k]);
			else
				kseti(o, k, a->i[k]);
		}
		return 0;
	}
	if ((DType)dt == a->dt) {
		alias(c, io, 0, a);
		return 0;
	}
	return def(c, io, 0, (DType)dt, a->rank, a->shape, "%s(%s)", dtype_name((DType)dt), ref(c, a)) ? 0 : -1;
}

static int tr_clip(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *lo = in_(io, 1), *hi = in_(io, 2);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	char *x = xstrdup(ref(c, a));
	char bl[64], bh[64];
	const char *l = NULL, *h = NULL;
	if (c->opset < 11) {
		Onnx__AttributeProto *ma = attr(io->n, "min"), *xa = attr(io->n, "max");
		if (ma && float_lit(bl, sizeof bl, ma->f, a->dt))
			l = bl;
		if (xa && float_lit(bh, sizeof bh, xa->f, a->dt))
			h = bh;
	} else {
		if (lo)
			l = ref(c, lo);
		if (hi)
			h = ref(c, hi);
	}
	char *cur = x;
	if (l) {
		char *t = tmp(c, "maximum(%s, %s)", cur, l);
		free(cur);
		cur = t;
	}
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, h ? "minimum(%s, %s)" : "%s", cur, h);
	free(cur);
	return o ? 0 : -1;
}

/* ---- shapes and movement */

static int tr_shape(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
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
	char *l = list_text(r, sh);
	Val *o = def(c, io, 0, a->dt, r, sh, "reshape(%s, %s)", ref(c, a), l);
	free(l);
	return o ? 0 : -1;
}

static int tr_reshape(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *s = in_(io, 1);
	if (!a || !s)
		return node_err(c, 0, "needs data and shape"), -1;
	if (need_known(c, s, "shape") < 0)
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

static int tr_flatten(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
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
static int get_axes(Ctx *c, NodeIO *io, int k, int64_t *axes, int *given)
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

static int tr_squeeze(Ctx *c, NodeIO *io, int unsq)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
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

static int tr_transpose(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
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
	char *l = list_text(np, perm);
	Val *o = def(c, io, 0, a->dt, np, sh, "transpose(%s, %s)", ref(c, a), l);
	free(l);
	return o ? 0 : -1;
}

static int tr_concat(Ctx *c, NodeIO *io)
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
	Buf b = {0};
	buf_puts(&b, "concat([");
	int first = 1;
	for (int k = 0; k < io->nin; k++)
		if (io->in[k]) {
			buf_printf(&b, "%s%s", first ? "" : ", ", ref(c, io->in[k]));
			first = 0;
		}
	buf_printf(&b, "], axis=%d)", ax);
	Val *o = def(c, io, 0, a->dt, a->rank, sh, "%s", b.s);
	buf_free(&b);
	return o ? 0 : -1;
}

/* Positions start, start+step, ... along axis ax of a (any step), as a new
 * value for output k. */
static int take_positions(Ctx *c, NodeIO *io, int k, Val *a, int ax, int64_t cnt, int64_t start, int64_t step)
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

static int tr_split(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
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
		if (parts[k] <= 0) {
			node_err(c, 1, "a split part with no elements is not supported");
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

static int tr_slice(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
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
		if (cnt == 0)
			return node_err(c, 1, "a slice with no elements is not supported"), -1;
		NodeIO sub = *io;
		Onnx__NodeProto fake = *io->n;
		char *outs[1];
		outs[0] = k == last ? io->n->output[0] : NULL;
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

static int tr_gather(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *ix = in_(io, 1);
	if (!a || !ix)
		return node_err(c, 0, "needs data and indices"), -1;
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

static int tr_gather_elements(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *ix = in_(io, 1);
	if (!a || !ix || ix->rank != a->rank)
		return node_err(c, 0, "needs data and indices of the same rank"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
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
	return def(c, io, 0, a->dt, ix->rank, ix->shape, "take_along_axis(%s, %s, %d)", ref(c, a), idx, ax) ? 0 : -1;
}

static int tr_expand(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *s = in_(io, 1);
	if (!a || !s)
		return node_err(c, 0, "needs data and shape"), -1;
	if (need_known(c, s, "shape") < 0)
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
	if (a->known) {
		Val *o = def_known(c, io, 0, a->dt, r, sh);
		if (!o)
			return -1;
		int64_t pos[MAX_RANK];
		for (int64_t k = 0; k < o->n; k++) {
			unravel(k, r, sh, pos);
			kset(o, k, kget(a, bidx(a, r, sh, pos)));
		}
		return 0;
	}
	char *l = list_text(r, sh);
	Val *o = def(c, io, 0, a->dt, r, sh, "expand(%s, %s)", ref(c, a), l);
	free(l);
	return o ? 0 : -1;
}

static int tr_constant_of_shape(Ctx *c, NodeIO *io, const char *base)
{
	Val *s = in_(io, 0);
	if (!s)
		return node_err(c, 0, "needs a shape"), -1;
	if (need_known(c, s, "shape") < 0)
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
		Val *t = tensor_val(c, va->t, "value", base, 0);
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

static int tr_range(Ctx *c, NodeIO *io)
{
	Val *s = in_(io, 0), *l = in_(io, 1), *d = in_(io, 2);
	if (!s || !l || !d)
		return node_err(c, 0, "needs start, limit and delta"), -1;
	if (need_known(c, s, "start") < 0 || need_known(c, l, "limit") < 0 || need_known(c, d, "delta") < 0)
		return -1;
	double a = kget(s, 0), b = kget(l, 0), st = kget(d, 0);
	if (st == 0)
		return node_err(c, 0, "delta is 0"), -1;
	double cnt = ceil((b - a) / st);
	if (cnt < 1)
		return node_err(c, 1, "an empty range is not supported"), -1;
	if (cnt > 1e9)
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

static int tr_constant(Ctx *c, NodeIO *io, const char *base)
{
	Onnx__AttributeProto *a;
	if ((a = attr(io->n, "value")) && a->t) {
		Val *t = tensor_val(c, a->t, out_name(io, 0), base, 0);
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

/* ---- matrix products */

static int matmul_shape(Ctx *c, Val *a, Val *b, int *r, int64_t *sh)
{
	if (a->rank < 1 || b->rank < 1)
		return node_err(c, 0, "matmul of a 0-d tensor"), -1;
	int64_t ka = a->shape[a->rank - 1], kb = b->rank == 1 ? b->shape[0] : b->shape[b->rank - 2];
	if (ka != kb)
		return node_err(c, 0, "inner dimensions differ (%lld vs %lld)", (long long)ka, (long long)kb), -1;
	int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
	int br;
	int64_t bs[MAX_RANK];
	if (broadcast(c, ba, a->shape, bb, b->shape, &br, bs) < 0)
		return -1;
	*r = br;
	memcpy(sh, bs, sizeof(int64_t) * (size_t)br);
	if (a->rank >= 2)
		sh[(*r)++] = a->shape[a->rank - 2];
	if (b->rank >= 2)
		sh[(*r)++] = b->shape[b->rank - 1];
	return 0;
}

static int tr_matmul(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *b = in_(io, 1);
	if (!a || !b)
		return node_err(c, 0, "needs two inputs"), -1;
	int r;
	int64_t sh[MAX_RANK];
	if (matmul_shape(c, a, b, &r, sh) < 0)
		return -1;
	const char *x = ref(c, a), *y = ref(c, b);
	return def(c, io, 0, a->dt, r, sh, "%s @ %s", x, y) ? 0 : -1;
}

static int tr_gemm(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *b = in_(io, 1), *cc = in_(io, 2);
	if (!a || !b || a->rank != 2 || b->rank != 2)
		return node_err(c, 0, "needs two matrices"), -1;
	int ta = (int)attr_i(io->n, "transA", 0), tb = (int)attr_i(io->n, "transB", 0);
	double alpha = attr_f(io->n, "alpha", 1), beta = attr_f(io->n, "beta", 1);
	int64_t m = ta ? a->shape[1] : a->shape[0], k1 = ta ? a->shape[0] : a->shape[1];
	int64_t k2 = tb ? b->shape[1] : b->shape[0], nn = tb ? b->shape[0] : b->shape[1];
	if (k1 != k2)
		return node_err(c, 0, "inner dimensions differ (%lld vs %lld)", (long long)k1, (long long)k2), -1;
	int64_t sh[2] = {m, nn};
	Buf e = {0};
	char lit[64];
	if (alpha != 1 && float_lit(lit, sizeof lit, alpha, a->dt))
		buf_printf(&e, "%s(%s) * ", dtype_name(a->dt), lit);
	buf_puts(&e, "(");
	if (ta)
		buf_printf(&e, "transpose(%s, [1, 0])", ref(c, a));
	else
		buf_puts(&e, ref(c, a));
	buf_puts(&e, " @ ");
	if (tb)
		buf_printf(&e, "transpose(%s, [1, 0])", ref(c, b));
	else
		buf_puts(&e, ref(c, b));
	buf_puts(&e, ")");
	if (cc && beta != 0) {
		int r;
		int64_t bs[MAX_RANK];
		if (broadcast(c, 2, sh, cc->rank, cc->shape, &r, bs) < 0 || r != 2 || bs[0] != m || bs[1] != nn) {
			buf_free(&e);
			return node_err(c, 0, "C does not broadcast to the product"), -1;
		}
		if (beta != 1 && float_lit(lit, sizeof lit, beta, a->dt))
			buf_printf(&e, " + %s(%s) * %s", dtype_name(a->dt), lit, ref(c, cc));
		else
			buf_printf(&e, " + %s", ref(c, cc));
	}
	Val *o = def(c, io, 0, a->dt, 2, sh, "%s", e.s);
	buf_free(&e);
	return o ? 0 : -1;
}

/* Einsum without repeated letters in an operand: operands are transposed to
 * one order of all letters, broadcast-multiplied and summed. */
static int tr_einsum(Ctx *c, NodeIO *io)
{
	char *eq = attr_s(io->n, "equation");
	if (!eq)
		return node_err(c, 0, "no equation"), -1;
	int rc = -1;
	char terms[4][MAX_RANK + 1];
	char outt[MAX_RANK + 1];
	int nt = 0, has_out = 0;
	memset(terms, 0, sizeof terms);
	memset(outt, 0, sizeof outt);
	/* expand "..." into upper-case letters, per operand rank */
	char *arrow = strstr(eq, "->");
	Buf lhs = {0};
	buf_printf(&lhs, "%.*s", arrow ? (int)(arrow - eq) : (int)strlen(eq), eq);
	int ell = 0; /* ellipsis rank (max over operands) */
	{
		char *s = lhs.s ? lhs.s : "";
		int k = 0;
		while (1) {
			char *comma = strchr(s, ',');
			int len = comma ? (int)(comma - s) : (int)strlen(s);
			if (nt >= 2 || k >= io->nin || !io->in[k]) {
				node_err(c, 1, "einsum of more than two operands, or of missing ones");
				goto done;
			}
			Val *v = io->in[k];
			int letters = 0, dots = 0, j = 0;
			for (int q = 0; q < len; q++) {
				if (s[q] == '.') {
					dots++;
				} else if (s[q] != ' ') {
					letters++;
				}
			}
			int er = dots ? v->rank - letters : 0;
			if ((dots && dots != 3) || er < 0 || (!dots && letters != v->rank)) {
				node_err(c, 0, "term %d does not match the rank %d of its operand", k, v->rank);
				goto done;
			}
			if (er > ell)
				ell = er;
			for (int q = 0; q < len; q++) {
				if (s[q] == ' ')
					continue;
				if (s[q] == '.') {
					if (s[q + 1] == '.' && s[q + 2] == '.') {
						for (int e = 0; e < er; e++)
							terms[nt][j++] = (char)('0' + (MAX_RANK - er) + e);
						q += 2;
					}
					continue;
				}
				if (!((s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z')) || j >= MAX_RANK) {
					node_err(c, 1, "equation '%s' is not supported", eq);
					goto done;
				}
				terms[nt][j++] = s[q];
			}
			nt++;
			k++;
			if (!comma)
				break;
			s = comma + 1;
		}
	}
	/* a letter twice in a term: that operand's diagonal, by an identity mask
	 * and a sum over the second occurrence */
	Val *opv[2] = {io->in[0], nt > 1 ? io->in[1] : NULL};
	for (int t = 0; t < nt; t++) {
		for (;;) {
			int len = (int)strlen(terms[t]), p = -1, q = -1;
			for (int a = 0; a < len && p < 0; a++)
				for (int b = a + 1; b < len && p < 0; b++)
					if (terms[t][a] == terms[t][b]) {
						p = a;
						q = b;
					}
			if (p < 0)
				break;
			Val *v = opv[t];
			int off = v->rank - len;
			int64_t nd = v->shape[p + off];
			if (nd != v->shape[q + off]) {
				node_err(c, 0, "letter %c has sizes %lld and %lld in one term", terms[t][p], (long long)nd,
				         (long long)v->shape[q + off]);
				goto done;
			}
			int64_t msh[MAX_RANK];
			for (int d = 0; d < v->rank; d++)
				msh[d] = d == p + off || d == q + off ? nd : 1;
			Val *mask = new_val(c, "", v->dt, v->rank, msh);
			free(mask->name);
			mask->name = xasprintf("%s.diagonal%d", out_name(io, 0), c->ntmp);
			val_alloc(mask);
			for (int64_t a = 0; a < nd; a++)
				kset(mask, a * nd + a, 1);
			/* the mask's elements in order: only axes p, q are > 1, so [a, b] is a * nd + b */
			char *mx = xstrdup(ref(c, mask));
			char *d = tmp(c, "sum(%s * %s, axis=%d)", ref(c, v), mx, q + off);
			free(mx);
			int64_t nsh[MAX_RANK];
			int r = 0;
			for (int e = 0; e < v->rank; e++)
				if (e != q + off)
					nsh[r++] = v->shape[e];
			Val *nv = new_val(c, "", v->dt, r, nsh);
			free(nv->name);
			nv->name = xasprintf("%s.diag", out_name(io, 0));
			nv->id = d;
			opv[t] = nv;
			memmove(terms[t] + q, terms[t] + q + 1, (size_t)(len - q));
		}
	}
	if (arrow) {
		has_out = 1;
		int j = 0;
		for (char *s = arrow + 2; *s; s++) {
			if (*s == ' ')
				continue;
			if (*s == '.') {
				if (s[1] == '.' && s[2] == '.') {
					for (int e = 0; e < ell && j < MAX_RANK; e++)
						outt[j++] = (char)('0' + (MAX_RANK - ell) + e);
					s += 2;
				}
				continue;
			}
			if (j >= MAX_RANK) {
				node_err(c, 1, "equation '%s' is not supported", eq);
				goto done;
			}
			outt[j++] = *s;
		}
	}
	/* all letters, and each one's size */
	char all[27 + MAX_RANK];
	int64_t size[128] = {0};
	int na = 0;
	for (int t = 0; t < nt; t++) {
		Val *v = opv[t];
		int off = v->rank - (int)strlen(terms[t]);
		for (int q = 0; terms[t][q]; q++) {
			unsigned char L = (unsigned char)terms[t][q];
			int64_t d = v->shape[q + off];
			if (!size[L]) {
				all[na++] = (char)L;
				size[L] = d;
			} else if (size[L] != d) {
				if (size[L] == 1)
					size[L] = d;
				else if (d != 1) {
					node_err(c, 0, "letter %c has sizes %lld and %lld", L, (long long)size[L], (long long)d);
					goto done;
				}
			}
		}
	}
	if (!has_out) {
		/* implicit: ellipsis letters, then letters appearing once, sorted */
		int j = 0;
		for (int e = 0; e < ell; e++)
			outt[j++] = (char)('0' + (MAX_RANK - ell) + e);
		for (int L = 'A'; L <= 'z'; L++) {
			if (L > 'Z' && L < 'a')
				continue;
			int cnt = 0;
			for (int t = 0; t < nt; t++)
				cnt += strchr(terms[t], L) != NULL;
			if (cnt == 1 && j < MAX_RANK)
				outt[j++] = (char)L;
		}
	}
	int orank = (int)strlen(outt);
	/* order: output letters, then the summed ones */
	char order[27 + MAX_RANK];
	int no = 0;
	for (int q = 0; q < orank; q++) {
		if (!size[(unsigned char)outt[q]]) {
			node_err(c, 0, "output letter %c is in no input", outt[q]);
			goto done;
		}
		order[no++] = outt[q];
	}
	for (int q = 0; q < na; q++)
		if (!strchr(outt, all[q]))
			order[no++] = all[q];
	if (no > MAX_RANK) {
		node_err(c, 1, "einsum over %d letters is more than nestc's rank %d", no, MAX_RANK);
		goto done;
	}
	int64_t osh[MAX_RANK];
	for (int q = 0; q < orank; q++)
		osh[q] = size[(unsigned char)outt[q]];
	char *parts[2] = {NULL, NULL};
	for (int t = 0; t < nt; t++) {
		Val *v = opv[t];
		/* transpose the operand's letters into 'order' order, then reshape with 1s */
		int len = (int)strlen(terms[t]);
		int64_t perm[MAX_RANK], sh[MAX_RANK];
		int j = 0;
		for (int q = 0; q < no; q++) {
			char *p = strchr(terms[t], order[q]);
			if (p)
				perm[j++] = p - terms[t];
		}
		int ident = 1;
		for (int q = 0; q < len; q++)
			ident &= perm[q] == q;
		char *x = xstrdup(ref(c, v));
		if (!ident) {
			char *pl = list_text(len, perm);
			char *t2 = tmp(c, "transpose(%s, %s)", x, pl);
			free(pl);
			free(x);
			x = t2;
		}
		int64_t cur[MAX_RANK];
		j = 0;
		for (int q = 0; q < len; q++)
			cur[q] = v->shape[perm[q]];
		for (int q = 0; q < no; q++)
			sh[q] = strchr(terms[t], order[q]) ? cur[j++] : 1;
		if (no != len) {
			char *l = list_text(no, sh);
			char *t2 = tmp(c, "reshape(%s, %s)", x, l);
			free(l);
			free(x);
			x = t2;
		}
		parts[t] = x;
	}
	Buf e = {0};
	if (nt == 2)
		buf_printf(&e, "%s * %s", parts[0], parts[1]);
	else
		buf_puts(&e, parts[0]);
	if (no > orank) {
		char *prod = tmp(c, "%s", e.s);
		buf_free(&e);
		e = (Buf){0};
		buf_printf(&e, "sum(%s, axis=[", prod);
		for (int q = orank; q < no; q++)
			buf_printf(&e, "%s%d", q > orank ? ", " : "", q);
		buf_puts(&e, "])");
		free(prod);
	}
	/* broadcasting of size-1 letters in the product: make sure of the final shape */
	Val *o = def(c, io, 0, io->in[0]->dt, orank, osh, "%s", e.s);
	buf_free(&e);
	free(parts[0]);
	free(parts[1]);
	rc = o ? 0 : -1;
done:
	buf_free(&lhs);
	free(eq);
	return rc;
}

/* ---- reductions and rows */

static int tr_reduce(Ctx *c, NodeIO *io, const char *fn, const char *pre, const char *post)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	int64_t axes[MAX_RANK + 1];
	int given;
	int na;
	/* ReduceSum takes axes as an input from opset 13, the others from 18 */
	na = get_axes(c, io, 1, axes, &given);
	if (na < 0)
		return -1;
	int keep = (int)attr_i(io->n, "keepdims", 1);
	int noop = (int)attr_i(io->n, "noop_with_empty_axes", 0);
	if (!na && noop) {
		alias(c, io, 0, a);
		return 0;
	}
	int red[MAX_RANK] = {0};
	if (!na)
		for (int k = 0; k < a->rank; k++)
			red[k] = 1;
	for (int k = 0; k < na; k++) {
		int x = oaxis(c, axes[k], a->rank);
		if (x < 0)
			return -1;
		red[x] = 1;
	}
	int64_t sh[MAX_RANK];
	int r = 0;
	Buf al = {0};
	buf_puts(&al, "[");
	int first = 1;
	for (int k = 0; k < a->rank; k++) {
		if (red[k]) {
			buf_printf(&al, "%s%d", first ? "" : ", ", k);
			first = 0;
		}
		if (!red[k] || keep)
			sh[r++] = red[k] ? 1 : a->shape[k];
	}
	buf_puts(&al, "]");
	if (first) {
		buf_free(&al);
		alias(c, io, 0, a);
		return 0;
	}
	if (!strcmp(fn, "mean") && !dtype_is_float(a->dt)) {
		buf_free(&al);
		return node_err(c, 1, "the mean of integers is not supported"), -1;
	}
	if ((pre || post) && !dtype_is_float(a->dt) && strcmp(pre ? pre : "", "abs(%s)")) {
		buf_free(&al);
		return node_err(c, 1, "%s of integers is not supported", io->n->op_type), -1;
	}
	char *xs = pre ? tmp(c, pre, ref(c, a)) : xstrdup(ref(c, a));
	char *e = xasprintf("%s(%s, axis=%s, keepdim=%s)", fn, xs, al.s, keep ? "true" : "false");
	Val *o = def(c, io, 0, a->dt, r, sh, post ? post : "%s", e);
	free(xs);
	free(e);
	buf_free(&al);
	return o ? 0 : -1;
}

/* Activations and other elementwise ops written with Nest's: fmt uses %1$s
 * for x, %2$s and %3$s for the attributes alpha and beta (literals). */
static int tr_act(Ctx *c, NodeIO *io, const char *fmt, const char *aname, double adef, const char *bname, double bdef)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 1, "%s of %s is not supported", io->n->op_type, dtype_name(a->dt)), -1;
	char al[64] = "0.0", bl[64] = "0.0";
	if (aname && !float_lit(al, sizeof al, attr_f(io->n, aname, adef), DT_F32))
		return node_err(c, 1, "a NaN %s is not supported", aname), -1;
	if (bname && !float_lit(bl, sizeof bl, attr_f(io->n, bname, bdef), DT_F32))
		return node_err(c, 1, "a NaN %s is not supported", bname), -1;
	char ap[80], bp[80];
	snprintf(ap, sizeof ap, "%s(%s)", dtype_name(a->dt), al);
	snprintf(bp, sizeof bp, "%s(%s)", dtype_name(a->dt), bl);
	return def(c, io, 0, a->dt, a->rank, a->shape, fmt, ref(c, a), ap, bp) ? 0 : -1;
}

static int tr_argmax(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	if (attr_i(io->n, "select_last_index", 0))
		return node_err(c, 1, "select_last_index=1 is not supported"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
	int keep = (int)attr_i(io->n, "keepdims", 1);
	int64_t sh[MAX_RANK];
	int r = 0;
	for (int k = 0; k < a->rank; k++)
		if (k != ax || keep)
			sh[r++] = k == ax ? 1 : a->shape[k];
	return def(c, io, 0, DT_I64, r, sh, "argmax(%s, axis=%d, keepdim=%s)", ref(c, a), ax, keep ? "true" : "false") ? 0
	                                                                                                               : -1;
}

static int tr_softmax(Ctx *c, NodeIO *io, const char *fn)
{
	Val *a = in_(io, 0);
	if (!a)
		return node_err(c, 0, "needs an input"), -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 0, "needs a float input"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", c->opset >= 13 ? -1 : 1), a->rank);
	if (ax < 0)
		return -1;
	if (c->opset >= 13 || ax == a->rank - 1)
		return def(c, io, 0, a->dt, a->rank, a->shape, "%s(%s, axis=%d)", fn, ref(c, a), ax) ? 0 : -1;
	/* before opset 13: the input as a matrix [prod(:axis), prod(axis:)] */
	int64_t m[2] = {1, 1};
	for (int k = 0; k < a->rank; k++)
		m[k < ax ? 0 : 1] *= a->shape[k];
	char *l = list_text(2, m), *s = list_text(a->rank, a->shape);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, "reshape(%s(reshape(%s, %s), axis=1), %s)", fn, ref(c, a), l, s);
	free(l);
	free(s);
	return o ? 0 : -1;
}

static int tr_layernorm(Ctx *c, NodeIO *io)
{
	Val *a = in_(io, 0), *sc = in_(io, 1), *b = in_(io, 2);
	if (!a || !sc)
		return node_err(c, 0, "needs X and Scale"), -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 0, "needs a float input"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", -1), a->rank);
	if (ax < 0)
		return -1;
	double eps = attr_f(io->n, "epsilon", 1e-5);
	char el[64];
	float_lit(el, sizeof el, (float)eps, DT_F32);
	int want_stats = io->n->n_output > 1;
	const char *x = ref(c, a), *s = ref(c, sc);
	if (ax == a->rank - 1 && sc->rank == 1 && b && b->rank == 1 && !want_stats)
		return def(c, io, 0, a->dt, a->rank, a->shape, "layernorm(%s, %s, %s, eps=%s)", x, s, ref(c, b), el) ? 0 : -1;
	Buf al = {0};
	buf_puts(&al, "[");
	for (int k = ax; k < a->rank; k++)
		buf_printf(&al, "%s%d", k > ax ? ", " : "", k);
	buf_puts(&al, "]");
	char *m = tmp(c, "mean(%s, axis=%s, keepdim=true)", x, al.s);
	char *d = tmp(c, "%s - %s", x, m);
	char *inv = tmp(c, "rsqrt(mean(%s * %s, axis=%s, keepdim=true) + %s(%s))", d, d, al.s, dtype_name(a->dt), el);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, b ? "%s * %s * %s + %s" : "%s * %s * %s", d, inv, s,
	             b ? ref(c, b) : "");
	int rc = o ? 0 : -1;
	if (o && want_stats) {
		int64_t sh[MAX_RANK];
		for (int k = 0; k < a->rank; k++)
			sh[k] = k < ax ? a->shape[k] : 1;
		if (io->n->n_output > 1 && *io->n->output[1])
			rc |= def(c, io, 1, a->dt, a->rank, sh, "%s", m) ? 0 : -1;
		if (io->n->n_output > 2 && *io->n->output[2])
			rc |= def(c, io, 2, a->dt, a->rank, sh, "%s", inv) ? 0 : -1;
	}
	free(m);
	free(d);
	free(inv);
	buf_free(&al);
	return rc;
}

static int tr_batchnorm(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *sc = in_(io, 1), *b = in_(io, 2), *m = in_(io, 3), *v = in_(io, 4);
	if (!x || !sc || !b || !m || !v)
		return node_err(c, 0, "needs five inputs"), -1;
	if (x->rank < 2 || !dtype_is_float(x->dt))
		return node_err(c, 0, "input of rank %d and dtype %s", x->rank, dtype_name(x->dt)), -1;
	char el[64];
	float_lit(el, sizeof el, (float)attr_f(io->n, "epsilon", 1e-5), DT_F32);
	const char *xs = ref(c, x), *ms = ref(c, m), *vs = ref(c, v), *ss = ref(c, sc), *bs = ref(c, b);
	if (!attr_i(io->n, "training_mode", 0)) {
		if (io->n->n_output > 1)
			return node_err(c, 1, "the running statistics outputs outside training mode are not supported"), -1;
		return def(c, io, 0, x->dt, x->rank, x->shape, "batch_norm(%s, %s, %s, %s, %s, eps=%s)", xs, ms, vs, ss, bs,
		           el)
		               ? 0
		               : -1;
	}
	/* training mode: the batch's statistics normalise; the running ones are
	 * updated with momentum */
	char mo[64], om[64];
	double mom = attr_f(io->n, "momentum", 0.9);
	float_lit(mo, sizeof mo, (float)mom, DT_F32);
	float_lit(om, sizeof om, (float)(1 - mom), DT_F32);
	Buf al = {0};
	buf_puts(&al, "[0");
	for (int k = 2; k < x->rank; k++)
		buf_printf(&al, ", %d", k);
	buf_puts(&al, "]");
	char *bm = tmp(c, "mean(%s, axis=%s)", xs, al.s);
	int64_t bsh[MAX_RANK];
	bsh[0] = x->shape[1];
	for (int k = 1; k < x->rank - 1; k++)
		bsh[k] = 1;
	char *bl = list_text(x->rank - 1, bsh);
	char *d = tmp(c, "%s - reshape(%s, %s)", xs, bm, bl);
	char *bv = tmp(c, "mean(%s * %s, axis=%s)", d, d, al.s);
	Val *o = def(c, io, 0, x->dt, x->rank, x->shape, "batch_norm(%s, %s, %s, %s, %s, eps=%s)", xs, bm, bv, ss, bs, el);
	int rc = o ? 0 : -1;
	if (o && io->n->n_output > 1 && *io->n->output[1])
		rc |= def(c, io, 1, m->dt, m->rank, m->shape, "%s * %s(%s) + %s * %s(%s)", ms, dtype_name(m->dt), mo, bm,
		          dtype_name(m->dt), om)
		              ? 0
		              : -1;
	if (!rc && io->n->n_output > 2 && *io->n->output[2])
		rc |= def(c, io, 2, v->dt, v->rank, v->shape, "%s * %s(%s) + %s * %s(%s)", vs, dtype_name(v->dt), mo, bv,
		          dtype_name(v->dt), om)
		              ? 0
		              : -1;
	free(bm);
	free(bl);
	free(d);
	free(bv);
	buf_free(&al);
	return rc;
}

/* ---- convolution and pooling */

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
static int conv_geometry(Ctx *c, NodeIO *io, const int64_t *in, const int64_t *k, const int64_t *st, const int64_t *dil,
                         int ceil_mode, int64_t *pads, int64_t *out)
{
	char *ap = attr_s(io->n, "auto_pad");
	int64_t p[4] = {0, 0, 0, 0};
	int np = attr_ints(io->n, "pads", p, 4);
	if (np >= 0 && np != 4) {
		free(ap);
		return node_err(c, 0, "pads has %d entries, not 4", np), -1;
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

static int tr_conv(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *w = in_(io, 1), *b = in_(io, 2);
	if (!x || !w)
		return node_err(c, 0, "needs X and W"), -1;
	if (x->rank != 4 || w->rank != 4)
		return node_err(c, 1, "%d-d convolution is not supported (2-d is)", x->rank - 2), -1;
	int64_t st[2], dil[2], k[2] = {w->shape[2], w->shape[3]}, pads[4], out[2];
	if (get2(c, io, "strides", st, 1) < 0 || get2(c, io, "dilations", dil, 1) < 0)
		return -1;
	int64_t ks[2];
	if (get2(c, io, "kernel_shape", ks, 0) < 0)
		return -1;
	int64_t g = attr_i(io->n, "group", 1);
	if (g < 1 || x->shape[1] % g || w->shape[0] % g || w->shape[1] * g != x->shape[1])
		return node_err(c, 0, "channels do not match the groups"), -1;
	if (conv_geometry(c, io, x->shape + 2, k, st, dil, 0, pads, out) < 0)
		return -1;
	char *xs = xstrdup(ref(c, x));
	int64_t pad = 0;
	if (pads[0] != pads[2] || pads[1] != pads[3] || pads[0] != pads[1]) {
		char *t = pad2d(c, xs, x->dt, x->shape, pads, "0.0");
		free(xs);
		xs = t;
	} else {
		pad = pads[0];
	}
	int64_t sh[4] = {x->shape[0], w->shape[0], out[0], out[1]};
	Buf e = {0};
	buf_printf(&e, "conv2d(%s, %s", xs, ref(c, w));
	if (b)
		buf_printf(&e, ", %s", ref(c, b));
	buf_printf(&e, ", stride=[%lld, %lld], padding=%lld, groups=%lld, dilation=[%lld, %lld])", (long long)st[0],
	           (long long)st[1], (long long)pad, (long long)g, (long long)dil[0], (long long)dil[1]);
	Val *o = def(c, io, 0, x->dt, 4, sh, "%s", e.s);
	buf_free(&e);
	free(xs);
	return o ? 0 : -1;
}

static int tr_conv_transpose(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *w = in_(io, 1), *b = in_(io, 2);
	if (!x || !w)
		return node_err(c, 0, "needs X and W"), -1;
	if (x->rank != 4 || w->rank != 4)
		return node_err(c, 1, "%d-d transposed convolution is not supported (2-d is)", x->rank - 2), -1;
	int64_t st[2], dil[2], op[2] = {0, 0}, p[4] = {0, 0, 0, 0};
	if (get2(c, io, "strides", st, 1) < 0 || get2(c, io, "dilations", dil, 1) < 0)
		return -1;
	int64_t t[8];
	if (attr_ints(io->n, "output_padding", t, 2) == 2) {
		op[0] = t[0];
		op[1] = t[1];
	}
	char *ap = attr_s(io->n, "auto_pad");
	int bad = (ap && strcmp(ap, "NOTSET")) || attr(io->n, "output_shape");
	free(ap);
	if (bad)
		return node_err(c, 1, "auto_pad and output_shape are not supported"), -1;
	int np = attr_ints(io->n, "pads", p, 4);
	if (np >= 0 && (np != 4 || p[0] != p[2] || p[1] != p[3]))
		return node_err(c, 1, "asymmetric pads are not supported"), -1;
	int64_t g = attr_i(io->n, "group", 1);
	if (g < 1 || w->shape[0] != x->shape[1] || x->shape[1] % g)
		return node_err(c, 0, "channels do not match the groups"), -1;
	int64_t sh[4] = {x->shape[0], w->shape[1] * g, 0, 0};
	for (int d = 0; d < 2; d++)
		sh[2 + d] = (x->shape[2 + d] - 1) * st[d] - 2 * p[d] + dil[d] * (w->shape[2 + d] - 1) + op[d] + 1;
	Buf e = {0};
	buf_printf(&e, "conv_transpose2d(%s, %s", ref(c, x), ref(c, w));
	if (b)
		buf_printf(&e, ", %s", ref(c, b));
	buf_printf(&e, ", stride=[%lld, %lld], padding=[%lld, %lld], output_padding=[%lld, %lld], groups=%lld, "
	               "dilation=[%lld, %lld])",
	           (long long)st[0], (long long)st[1], (long long)p[0], (long long)p[1], (long long)op[0],
	           (long long)op[1], (long long)g, (long long)dil[0], (long long)dil[1]);
	Val *o = def(c, io, 0, x->dt, 4, sh, "%s", e.s);
	buf_free(&e);
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
			osh2[0] = x->shape[0];
			osh2[1] = x->shape[1];
			for (int d = 0; d < ns; d++)
				osh2[2 + d] = out[d];
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
		ish[0] = x->shape[0];
		ish[1] = x->shape[1];
		for (int d = 0; d < ns; d++)
			ish[2 + d] = out[d];
		Val *iv = def(c, io, 1, DT_I64, x->rank, ish, "%s", idx);
		free(idx);
		if (!iv) {
			free(acc);
			return -1;
		}
	}
	int64_t osh[MAX_RANK];
	osh[0] = x->shape[0];
	osh[1] = x->shape[1];
	for (int d = 0; d < ns; d++)
		osh[2 + d] = out[d];
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

static int tr_pool(Ctx *c, NodeIO *io, int is_max)
{
	Val *x0 = in_(io, 0);
	if (!x0)
		return node_err(c, 0, "needs an input"), -1;
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
	} else if (conv_geometry(c, io, xs4 + 2, k, st, dil, ceil_mode, pads, out) < 0) {
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

static int tr_global_avg(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0);
	if (!x || x->rank < 3)
		return node_err(c, 0, "needs an input of rank 3 or more"), -1;
	int64_t sh[MAX_RANK];
	Buf al = {0};
	buf_puts(&al, "[");
	for (int k = 0; k < x->rank; k++) {
		sh[k] = k < 2 ? x->shape[k] : 1;
		if (k >= 2)
			buf_printf(&al, "%s%d", k > 2 ? ", " : "", k);
	}
	buf_puts(&al, "]");
	Val *o = def(c, io, 0, x->dt, x->rank, sh, "mean(%s, axis=%s, keepdim=true)", ref(c, x), al.s);
	buf_free(&al);
	return o ? 0 : -1;
}

static int tr_trilu(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *kv = in_(io, 1);
	if (!x || x->rank < 2)
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

static int tr_tile(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *r = in_(io, 1);
	if (!x || !r)
		return node_err(c, 0, "needs input and repeats"), -1;
	if (need_known(c, r, "repeats") < 0)
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

static int tr_pad(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *pv = in_(io, 1), *cv = in_(io, 2);
	if (!x)
		return node_err(c, 0, "needs an input"), -1;
	char *mode = attr_s(io->n, "mode");
	if (mode && strcmp(mode, "constant")) {
		node_err(c, 1, "mode '%.50s' is not supported (constant is)", mode);
		free(mode);
		return -1;
	}
	free(mode);
	if (need_known(c, pv, "pads") < 0 || need_known(c, cv, "constant_value") < 0)
		return -1;
	if (!pv || pv->n != 2 * x->rank || in_(io, 3))
		return node_err(c, 1, "pads must give every axis"), -1;
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

static int tr_topk(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *kv = in_(io, 1);
	if (!x || !kv)
		return node_err(c, 0, "needs X and K"), -1;
	if (need_known(c, kv, "K") < 0)
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

static int tr_cumsum(Ctx *c, NodeIO *io)
{
	Val *x = in_(io, 0), *av = in_(io, 1);
	if (!x || !av)
		return node_err(c, 0, "needs x and axis"), -1;
	if (need_known(c, av, "axis") < 0)
		return -1;
	if (attr_i(io->n, "exclusive", 0) || attr_i(io->n, "reverse", 0))
		return node_err(c, 1, "exclusive and reverse are not supported"), -1;
	int ax = oaxis(c, kgeti(av, 0), x->rank);
	if (ax < 0)
		return -1;
	return def(c, io, 0, x->dt, x->rank, x->shape, "cumsum(%s, %d)", ref(c, x), ax) ? 0 : -1;
}

/* ------------------------------------------------------------------ the graph */

static int translate_node(Ctx *c, Onnx__NodeProto *n, const char *base)
{
	NodeIO io = {.n = n};
	if (n->n_input > 16)
		return node_err(c, 1, "more than 16 inputs"), -1;
	io.nin = (int)n->n_input;
	for (size_t k = 0; k < n->n_input; k++) {
		if (!n->input[k] || !*n->input[k]) {
			io.in[k] = NULL;
			continue;
		}
		io.in[k] = find_val(c, n->input[k]);
		if (!io.in[k])
			return node_err(c, 0, "input '%.200s' is not defined before the node", n->input[k]), -1;
	}
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return node_err(c, 1, "operator domain '%.100s' is not supported", n->domain), -1;
	const char *op = n->op_type ? n->op_type : "";
	/* Big initializers stay undecoded where the op only names them (a
	 * weight operand next to a run-time one); everywhere else a fold may
	 * read them. Gather reads its indices, never its data. */
	static const char *const names_only[] = {"MatMul", "Gemm", "Conv", "ConvTranspose", "LayerNormalization", "Add",
	                                         "Sub", "Mul", "Div", "Gather", "Identity", NULL};
	int keep = 0;
	for (int k = 0; names_only[k] && !all_known(&io); k++)
		keep |= !strcmp(op, names_only[k]);
	for (int k = 0; k < io.nin; k++)
		if (io.in[k] && io.in[k]->lazy && !(keep && (k == 0 || strcmp(op, "Gather"))))
			val_decode(io.in[k]);
	static const char *const bin[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual",
	                                  "GreaterOrEqual", "And", "Or", NULL};
	static const char *const un[] = {"Neg", "Sqrt", "Exp", "Log", "Tanh", "Erf", "Relu", "Sigmoid", "Reciprocal",
	                                 "Not", "Abs", NULL};
	for (int k = 0; bin[k]; k++)
		if (!strcmp(op, bin[k]))
			return tr_binary(c, &io, op);
	for (int k = 0; un[k]; k++)
		if (!strcmp(op, un[k]))
			return tr_unary(c, &io, op);
	if (!strcmp(op, "Max") || !strcmp(op, "Min") || !strcmp(op, "Sum"))
		return tr_variadic(c, &io, !strcmp(op, "Sum") ? "Add" : op);
	if (!strcmp(op, "Identity") || !strcmp(op, "Dropout")) {
		if (!in_(&io, 0))
			return node_err(c, 0, "needs an input"), -1;
		Val *tm = !strcmp(op, "Dropout") ? in_(&io, 2) : NULL;
		if (tm && (!tm->known || kgeti(tm, 0)))
			return node_err(c, 1, "Dropout in training mode is not supported (inference only)"), -1;
		alias(c, &io, 0, io.in[0]);
		if (!strcmp(op, "Dropout") && n->n_output > 1 && *n->output[1]) {
			/* in inference the mask keeps everything */
			Val *mk = def_known(c, &io, 1, DT_BOOL, io.in[0]->rank, io.in[0]->shape);
			if (!mk)
				return -1;
			for (int64_t j = 0; j < mk->n; j++)
				mk->i[j] = 1;
		}
		return 0;
	}
	if (!strcmp(op, "Where")) return tr_where(c, &io);
	if (!strcmp(op, "Cast")) return tr_cast(c, &io, (int)attr_i(n, "to", 0));
	if (!strcmp(op, "CastLike")) {
		Val *t = in_(&io, 1);
		if (!t)
			return node_err(c, 0, "needs target_type"), -1;
		return tr_cast(c, &io, nest_to_onnx(t->dt));
	}
	if (!strcmp(op, "Clip")) return tr_clip(c, &io);
	if (!strcmp(op, "Shape")) return tr_shape(c, &io);
	if (!strcmp(op, "Reshape")) return tr_reshape(c, &io);
	if (!strcmp(op, "Flatten")) return tr_flatten(c, &io);
	if (!strcmp(op, "Squeeze")) return tr_squeeze(c, &io, 0);
	if (!strcmp(op, "Unsqueeze")) return tr_squeeze(c, &io, 1);
	if (!strcmp(op, "Transpose")) return tr_transpose(c, &io);
	if (!strcmp(op, "Concat")) return tr_concat(c, &io);
	if (!strcmp(op, "Split")) return tr_split(c, &io);
	if (!strcmp(op, "Slice")) return tr_slice(c, &io);
	if (!strcmp(op, "Gather")) return tr_gather(c, &io);
	if (!strcmp(op, "GatherElements")) return tr_gather_elements(c, &io);
	if (!strcmp(op, "Expand")) return tr_expand(c, &io);
	if (!strcmp(op, "ConstantOfShape")) return tr_constant_of_shape(c, &io, base);
	if (!strcmp(op, "Range")) return tr_range(c, &io);
	if (!strcmp(op, "Constant")) return tr_constant(c, &io, base);
	if (!strcmp(op, "MatMul")) return tr_matmul(c, &io);
	if (!strcmp(op, "Gemm")) return tr_gemm(c, &io);
	if (!strcmp(op, "Einsum")) return tr_einsum(c, &io);
	if (!strcmp(op, "ReduceMean")) return tr_reduce(c, &io, "mean", NULL, NULL);
	if (!strcmp(op, "ReduceSum")) return tr_reduce(c, &io, "sum", NULL, NULL);
	if (!strcmp(op, "ReduceMax")) return tr_reduce(c, &io, "amax", NULL, NULL);
	if (!strcmp(op, "ReduceMin")) return tr_reduce(c, &io, "amin", NULL, NULL);
	if (!strcmp(op, "ReduceSumSquare")) return tr_reduce(c, &io, "sum", "%1$s * %1$s", NULL);
	if (!strcmp(op, "ReduceL1")) return tr_reduce(c, &io, "sum", "abs(%s)", NULL);
	if (!strcmp(op, "ReduceL2")) return tr_reduce(c, &io, "sum", "%1$s * %1$s", "sqrt(%s)");
	if (!strcmp(op, "ReduceLogSum")) return tr_reduce(c, &io, "sum", NULL, "log(%s)");
	if (!strcmp(op, "ReduceLogSumExp")) return tr_reduce(c, &io, "sum", "exp(%s)", "log(%s)");
	if (!strcmp(op, "GlobalMaxPool")) {
		Val *x = in_(&io, 0);
		if (!x || x->rank < 3)
			return node_err(c, 0, "needs an input of rank 3 or more"), -1;
		int64_t ax[MAX_RANK];
		for (int k = 2; k < x->rank; k++)
			ax[k - 2] = k;
		/* amax over the spatial axes, kept */
		char *al = list_text(x->rank - 2, ax);
		int64_t sh[MAX_RANK];
		for (int k = 0; k < x->rank; k++)
			sh[k] = k < 2 ? x->shape[k] : 1;
		Val *o = def(c, &io, 0, x->dt, x->rank, sh, "amax(%s, axis=%s, keepdim=true)", ref(c, x), al);
		free(al);
		return o ? 0 : -1;
	}
	if (!strcmp(op, "LeakyRelu")) return tr_act(c, &io, "where(%1$s >= 0.0, %1$s, %1$s * %2$s)", "alpha", 0.01, NULL, 0);
	if (!strcmp(op, "Elu")) return tr_act(c, &io, "where(%1$s > 0.0, %1$s, %2$s * (exp(%1$s) - 1.0))", "alpha", 1, NULL, 0);
	if (!strcmp(op, "Selu"))
		return tr_act(c, &io, "where(%1$s > 0.0, %3$s * %1$s, %3$s * (%2$s * exp(%1$s) - %2$s))", "alpha",
		              1.67326319217681884765625, "gamma", 1.05070102214813232421875);
	if (!strcmp(op, "Celu"))
		return tr_act(c, &io, "maximum(%1$s, 0.0) + minimum(0.0, %2$s * (exp(%1$s / %2$s) - 1.0))", "alpha", 1, NULL, 0);
	if (!strcmp(op, "HardSigmoid"))
		return tr_act(c, &io, "maximum(0.0, minimum(1.0, %2$s * %1$s + %3$s))", "alpha", 0.2, "beta", 0.5);
	if (!strcmp(op, "HardSwish")) return tr_act(c, &io, "%1$s * maximum(0.0, minimum(1.0, %1$s / 6.0 + 0.5))", NULL, 0, NULL, 0);
	if (!strcmp(op, "Softplus")) return tr_act(c, &io, "log(exp(%1$s) + 1.0)", NULL, 0, NULL, 0);
	if (!strcmp(op, "Softsign")) return tr_act(c, &io, "%1$s / (abs(%1$s) + 1.0)", NULL, 0, NULL, 0);
	if (!strcmp(op, "ThresholdedRelu")) return tr_act(c, &io, "where(%1$s > %2$s, %1$s, 0.0)", "alpha", 1, NULL, 0);
	if (!strcmp(op, "Sin")) return tr_act(c, &io, "sin(%1$s)", NULL, 0, NULL, 0);
	if (!strcmp(op, "Cos")) return tr_act(c, &io, "cos(%1$s)", NULL, 0, NULL, 0);
	if (!strcmp(op, "Asinh")) return tr_act(c, &io, "log(%1$s + sqrt(%1$s * %1$s + 1.0))", NULL, 0, NULL, 0);
	if (!strcmp(op, "Acosh")) return tr_act(c, &io, "log(%1$s + sqrt(%1$s * %1$s - 1.0))", NULL, 0, NULL, 0);
	if (!strcmp(op, "Atanh")) return tr_act(c, &io, "log((1.0 + %1$s) / (1.0 - %1$s)) * 0.5", NULL, 0, NULL, 0);
	if (!strcmp(op, "Tan")) return tr_act(c, &io, "sin(%1$s) / cos(%1$s)", NULL, 0, NULL, 0);
	if (!strcmp(op, "Sinh")) return tr_act(c, &io, "(exp(%1$s) - exp(-%1$s)) * 0.5", NULL, 0, NULL, 0);
	if (!strcmp(op, "Cosh")) return tr_act(c, &io, "(exp(%1$s) + exp(-%1$s)) * 0.5", NULL, 0, NULL, 0);
	if (!strcmp(op, "Sign")) {
		Val *x = in_(&io, 0);
		if (!x || x->dt == DT_BOOL)
			return node_err(c, 0, "needs a numeric input"), -1;
		const char *xs = ref(c, x);
		const char *d = dtype_name(x->dt);
		return def(c, &io, 0, x->dt, x->rank, x->shape, "where(%s > 0, %s(1), where(%s < 0, %s(-1), %s(0)))", xs, d, xs, d,
		           d)
		               ? 0
		               : -1;
	}
	if (!strcmp(op, "Xor")) {
		Val *a = in_(&io, 0), *b = in_(&io, 1);
		if (!a || !b || a->dt != DT_BOOL || b->dt != DT_BOOL)
			return node_err(c, 0, "needs two bool inputs"), -1;
		int r;
		int64_t sh[MAX_RANK];
		if (broadcast(c, a->rank, a->shape, b->rank, b->shape, &r, sh) < 0)
			return -1;
		char *x = xstrdup(ref(c, a));
		const char *y = ref(c, b);
		Val *o = def(c, &io, 0, DT_BOOL, r, sh, "(%s || %s) && !(%s && %s)", x, y, x, y);
		free(x);
		return o ? 0 : -1;
	}
	if (!strcmp(op, "PRelu")) {
		Val *a = in_(&io, 0), *sl = in_(&io, 1);
		if (!a || !sl || !dtype_is_float(a->dt) || sl->dt != a->dt)
			return node_err(c, 0, "needs a float input and slope"), -1;
		int r;
		int64_t sh[MAX_RANK];
		if (broadcast(c, a->rank, a->shape, sl->rank, sl->shape, &r, sh) < 0)
			return -1;
		char *x = xstrdup(ref(c, a));
		Val *o = def(c, &io, 0, a->dt, r, sh, "where(%s < 0.0, %s * %s, %s)", x, ref(c, sl), x, x);
		free(x);
		return o ? 0 : -1;
	}
	if (!strcmp(op, "ArgMin")) {
		Val *a = in_(&io, 0);
		if (!a || a->dt == DT_BOOL)
			return node_err(c, 0, "needs a numeric input"), -1;
		if (attr_i(n, "select_last_index", 0))
			return node_err(c, 1, "select_last_index=1 is not supported"), -1;
		int ax = oaxis(c, attr_i(n, "axis", 0), a->rank);
		if (ax < 0)
			return -1;
		int keep = (int)attr_i(n, "keepdims", 1);
		int64_t sh[MAX_RANK];
		int r = 0;
		for (int k = 0; k < a->rank; k++)
			if (k != ax || keep)
				sh[r++] = k == ax ? 1 : a->shape[k];
		return def(c, &io, 0, DT_I64, r, sh, "argmax(-%s, axis=%d, keepdim=%s)", ref(c, a), ax, keep ? "true" : "false") ? 0 : -1;
	}
	if (!strcmp(op, "ArgMax")) return tr_argmax(c, &io);
	if (!strcmp(op, "Softmax")) return tr_softmax(c, &io, "softmax");
	if (!strcmp(op, "LogSoftmax")) return tr_softmax(c, &io, "log_softmax");
	if (!strcmp(op, "LayerNormalization")) return tr_layernorm(c, &io);
	if (!strcmp(op, "BatchNormalization")) return tr_batchnorm(c, &io);
	if (!strcmp(op, "Conv")) return tr_conv(c, &io);
	if (!strcmp(op, "ConvTranspose")) return tr_conv_transpose(c, &io);
	if (!strcmp(op, "MaxPool")) return tr_pool(c, &io, 1);
	if (!strcmp(op, "AveragePool")) return tr_pool(c, &io, 0);
	if (!strcmp(op, "GlobalAveragePool")) return tr_global_avg(c, &io);
	if (!strcmp(op, "Trilu")) return tr_trilu(c, &io);
	if (!strcmp(op, "Tile")) return tr_tile(c, &io);
	if (!strcmp(op, "Pad")) return tr_pad(c, &io);
	if (!strcmp(op, "TopK")) return tr_topk(c, &io);
	if (!strcmp(op, "CumSum")) return tr_cumsum(c, &io);
	return node_err(c, 1, "operator %.100s is not supported", op), -1;
}


/* ------------------------------------------------------------------ outlining repeated layers */

/* Segments are the stretches of nodes between single-tensor cuts: points in
 * the node order where exactly one tensor computed at run time crosses from
 * the nodes before to the nodes after (the residual stream of a
 * transformer, the feature map between ResNet blocks). Each segment is
 * translated as a region template; equal templates (same ops, attributes,
 * shapes and wiring, weights aside) are isomorphic. The longest run of a
 * repeating group of L consecutive segments becomes one region, called once
 * per occurrence with that occurrence's weights as a record. */
typedef struct OPlan {
	int probe;        /* pass 1: template every segment, keep the keys */
	int n;            /* nodes */
	int nseg;
	int *start, *end; /* node range [start, end) */
	char **in_name, **out_name;
	char **key;       /* pass 1 */
	int *region;      /* pass 2: region index, or -1 */
	int *seg_at;      /* per node: the segment starting there, or -1 */
	int *seg_end;     /* per node: the segment ending after it, or -1 */
	int nregions;
	char **rname, **rtempl, **rkey;
	int *rcalls, *rnodes;
	Buf regions;      /* the region functions' text */
	Buf summary;
	int cur;          /* segment being translated, or -1 */
} OPlan;

static void plan_free(OPlan *p)
{
	if (!p)
		return;
	for (int k = 0; k < p->nseg; k++) {
		free(p->in_name[k]);
		free(p->out_name[k]);
		if (p->key)
			free(p->key[k]);
	}
	for (int k = 0; k < p->nregions; k++) {
		free(p->rname[k]);
		free(p->rtempl[k]);
		free(p->rkey[k]);
	}
	free(p->rname);
	free(p->rtempl);
	free(p->rkey);
	free(p->rcalls);
	free(p->rnodes);
	free(p->start);
	free(p->end);
	free(p->in_name);
	free(p->out_name);
	free(p->key);
	free(p->region);
	free(p->seg_at);
	free(p->seg_end);
	buf_free(&p->regions);
	buf_free(&p->summary);
	free(p);
}

/* Template text with placeholders replaced: @X@ by x, @Pk@ by fields[k],
 * @Lk@ by local prefix + k. */
static char *render(const char *t, const char *x, char **fields, const char *local)
{
	Buf b = {0};
	for (const char *s = t; *s; s++) {
		if (*s == '@' && (s[1] == 'X' || s[1] == 'P' || s[1] == 'L')) {
			const char *e = strchr(s + 1, '@');
			if (e) {
				int k = atoi(s + 2);
				if (s[1] == 'X')
					buf_puts(&b, x);
				else if (s[1] == 'P')
					buf_puts(&b, fields[k]);
				else
					buf_printf(&b, "%s%d", local, k);
				s = e;
				continue;
			}
		}
		buf_putc(&b, *s);
	}
	char *r = b.s ? b.s : xstrdup("");
	return r;
}

static void seg_begin(Ctx *c, int s)
{
	OPlan *p = c->plan;
	p->cur = -1;
	if (!p->probe && p->region[s] < 0)
		return;
	Val *in = find_val(c, p->in_name[s]);
	if (!in || in->known || !in->id)
		return;
	p->cur = s;
	c->rmode = 1;
	c->rin = in;
	c->rcount = 0;
	c->inner.n = 0;
	for (int k = 0; k < c->next; k++) {
		free(c->ext[k].id);
		free(c->ext[k].oname);
		free(c->ext[k].ph);
	}
	c->next = 0;
	/* the template goes to a body of its own */
	Buf *saved = xmalloc(sizeof *saved);
	*saved = c->body;
	c->body = (Buf){0};
	vec_push(&c->inner, NULL); /* slot 0: the saved body */
	c->inner.v[0] = saved;
}

/* A field name from an ONNX weight name: what follows its layer number
 * ("h.3.attn.c_attn.weight" -> attn_c_attn_weight), or w<k>. */
static char *field_name(const char *oname, int k, char **taken, int ntaken)
{
	const char *s = oname, *best = NULL;
	for (const char *q = s; *q; q++) {
		if ((*q == '.' || *q == '/') && q[1] >= '0' && q[1] <= '9') {
			const char *r = q + 1;
			while (*r >= '0' && *r <= '9')
				r++;
			if (*r == '.' || *r == '/') {
				best = r + 1;
				break;
			}
		}
	}
	Buf b = {0};
	if (best && *best && !(*best >= '0' && *best <= '9'))
		for (const char *q = best; *q && b.len < 40; q++)
			buf_putc(&b, ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) ? *q : '_');
	char *f = b.s ? b.s : xasprintf("w%d", k);
	int bad = is_builtin(f);
	for (int j = 0; keywords[j]; j++)
		bad |= !strcmp(keywords[j], f);
	for (int j = 0; j < ntaken; j++)
		bad |= !strcmp(taken[j], f);
	if (bad) {
		free(f);
		f = xasprintf("w%d", k);
	}
	return f;
}

static void seg_end(Ctx *c, int s)
{
	OPlan *p = c->plan;
	if (p->cur != s)
		return;
	p->cur = -1;
	c->rmode = 0;
	Buf *saved = c->inner.v[0];
	char *templ = c->body.s ? c->body.s : xstrdup("");
	c->body = *saved;
	free(saved);
	c->inner.v[0] = NULL;
	Val *out = find_val(c, p->out_name[s]);
	const char *oph = out && out->id && !strncmp(out->id, "@L", 2) && is_inner(c, out) ? out->id : NULL;
	/* the key: input and output types, the template, the weights' types */
	Buf key = {0};
	type_text(&key, c->rin->dt, c->rin->rank, c->rin->shape);
	buf_puts(&key, " -> ");
	if (out)
		type_text(&key, out->dt, out->rank, out->shape);
	buf_printf(&key, " = %s\n%s", oph ? oph : "?", templ);
	for (int k = 0; k < c->next; k++) {
		buf_printf(&key, "%s: ", c->ext[k].ph);
		type_text(&key, c->ext[k].dt, c->ext[k].rank, c->ext[k].shape);
		buf_putc(&key, '\n');
	}
	char **fields = xcalloc((size_t)c->next + 1, sizeof(char *));
	for (int k = 0; k < c->next; k++)
		fields[k] = c->ext[k].id;
	char *outid = out && !c->failed ? make_id(c, out->name, "v_") : NULL;
	int r = p->probe ? -1 : p->region[s];
	if (p->probe) {
		p->key[s] = xstrdup(oph ? key.s : "");
	}
	if (r >= 0 && oph && !strcmp(p->rkey[r] ? p->rkey[r] : key.s, key.s)) {
		if (!p->rkey[r]) {
			/* the region function, from its first occurrence */
			p->rkey[r] = xstrdup(key.s);
			char **fn = xcalloc((size_t)c->next + 1, sizeof(char *));
			char **pf = xcalloc((size_t)c->next + 1, sizeof(char *));
			buf_printf(&p->regions, "\n# %d nodes, from '%s' to '%s'\n@region\nfn %s(x: ", p->end[s] - p->start[s],
			           p->in_name[s], p->out_name[s], p->rname[r]);
			type_text(&p->regions, c->rin->dt, c->rin->rank, c->rin->shape);
			if (c->next) {
				buf_puts(&p->regions, ",\n    p: {");
				for (int k = 0; k < c->next; k++) {
					fn[k] = field_name(c->ext[k].oname, k, fn, k);
					pf[k] = xasprintf("p.%s", fn[k]);
					buf_printf(&p->regions, "%s%s: ", k ? ",\n        " : " ", fn[k]);
					type_text(&p->regions, c->ext[k].dt, c->ext[k].rank, c->ext[k].shape);
				}
				buf_puts(&p->regions, " }");
			}
			buf_puts(&p->regions, ") -> ");
			type_text(&p->regions, out->dt, out->rank, out->shape);
			char *body = render(templ, "x", pf, "a");
			char *ret = render(oph, "x", pf, "a");
			buf_printf(&p->regions, " {\n%s  return %s\n}\n", body, ret);
			free(body);
			free(ret);
			p->rtempl[r] = xstrdup("");
			/* the field names, for the calls */
			Buf fl = {0};
			for (int k = 0; k < c->next; k++) {
				buf_printf(&fl, "%s%s", k ? "\n" : "", fn[k]);
				free(fn[k]);
				free(pf[k]);
			}
			free(p->rtempl[r]);
			p->rtempl[r] = fl.s ? fl.s : xstrdup("");
			free(fn);
			free(pf);
		}
		/* the call */
		buf_printf(&c->body, "  # nodes %d..%d ('%s' .. '%s')\n", p->start[s], p->end[s] - 1, p->in_name[s], p->out_name[s]);
		buf_printf(&c->body, "  let %s = %s(%s", outid, p->rname[r], c->rin->id);
		if (c->next) {
			buf_puts(&c->body, ", {");
			const char *f = p->rtempl[r];
			for (int k = 0; k < c->next; k++) {
				const char *e = strchr(f, '\n');
				int len = e ? (int)(e - f) : (int)strlen(f);
				buf_printf(&c->body, "%s%.*s: %s", k ? ", " : " ", len, f, c->ext[k].id);
				f = e ? e + 1 : f + len;
			}
			buf_puts(&c->body, " }");
		}
		buf_puts(&c->body, ")\n");
		p->rcalls[r]++;
		buf_printf(&p->summary, "    %s: nodes %d..%d ('%s' .. '%s')\n", p->rname[r], p->start[s], p->end[s] - 1,
		           p->in_name[s], p->out_name[s]);
	} else {
		/* inline: the template with names of its own */
		char *loc = xasprintf("s%d_", s);
		char *body = render(templ, c->rin->id, fields, loc);
		buf_puts(&c->body, body);
		if (outid && out) {
			char *ret = oph ? render(oph, c->rin->id, fields, loc) : xstrdup(out->id ? out->id : c->rin->id);
			buf_printf(&c->body, "  let %s = %s\n", outid, ret);
			free(ret);
		}
		free(body);
		free(loc);
	}
	/* names made in the segment end with it; the output gets its own */
	for (int k = 1; k < c->inner.n; k++) {
		Val *v = c->inner.v[k];
		if (v && v != out) {
			free(v->id);
			v->id = NULL;
		}
	}
	if (out && outid) {
		free(out->id);
		out->id = outid;
	} else {
		free(outid);
	}
	c->inner.n = 0;
	c->rin = NULL;
	free(fields);
	free(templ);
	buf_free(&key);
}


/* ------------------------------------------------------------------ fused patterns */

static const char *other_in(Onnx__NodeProto *n, const char *name);

static int uses_of(Onnx__GraphProto *g, const char *name)
{
	int n = 0;
	for (size_t k = 0; k < g->n_node; k++)
		for (size_t j = 0; j < g->node[k]->n_input; j++)
			n += g->node[k]->input[j] && !strcmp(g->node[k]->input[j], name);
	for (size_t j = 0; j < g->n_output; j++)
		n += g->output[j]->name && !strcmp(g->output[j]->name, name);
	return n;
}

static int is_op(Onnx__NodeProto *n, const char *op, size_t nin)
{
	return n->op_type && !strcmp(n->op_type, op) && n->n_input == nin && n->n_output == 1 && n->output[0];
}

static int has_in(Onnx__NodeProto *n, const char *name)
{
	for (size_t j = 0; j < n->n_input; j++)
		if (n->input[j] && !strcmp(n->input[j], name))
			return 1;
	return 0;
}

/* The first nine nodes from k on that are not Constant nodes (exporters put
 * the constants a pattern uses among its nodes); the index of the last, or
 * -1 when there are fewer. */
static int pattern_nodes(Onnx__GraphProto *g, int k, Onnx__NodeProto **q, int want)
{
	int got = 0, j = k;
	for (; j < (int)g->n_node && got < want; j++) {
		Onnx__NodeProto *n = g->node[j];
		if (n->op_type && !strcmp(n->op_type, "Constant") && j > k)
			continue;
		q[got++] = n;
	}
	return got == want ? j - 1 : -1;
}

/* LayerNormalization as exporters before opset 17 write it: ReduceMean, Sub,
 * Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul weight, Add bias (Constant
 * nodes among them), the intermediates used nowhere else. grp[k] = the last
 * node of the pattern starting at node k, or -1. */
static int *find_layernorms(Onnx__GraphProto *g)
{
	int n = (int)g->n_node;
	int *grp = xmalloc(((size_t)n + 1) * sizeof(int));
	for (int k = 0; k <= n; k++)
		grp[k] = -1;
	for (int k = 0; k < n; k++) {
		Onnx__NodeProto *q[9];
		if (!is_op(g->node[k], "ReduceMean", 1) && !is_op(g->node[k], "ReduceMean", 2))
			continue;
		int last = pattern_nodes(g, k, q, 9);
		if (last < 0)
			continue;
		const char *x = q[0]->input[0], *m = q[0]->output[0];
		if (!x || !is_op(q[1], "Sub", 2) || strcmp(q[1]->input[0], x) || strcmp(q[1]->input[1], m))
			continue;
		const char *d = q[1]->output[0];
		if (!is_op(q[2], "Pow", 2) || strcmp(q[2]->input[0], d))
			continue;
		if (!(is_op(q[3], "ReduceMean", 1) || is_op(q[3], "ReduceMean", 2)) || strcmp(q[3]->input[0], q[2]->output[0]))
			continue;
		if (!is_op(q[4], "Add", 2) || !has_in(q[4], q[3]->output[0]))
			continue;
		if (!is_op(q[5], "Sqrt", 1) || strcmp(q[5]->input[0], q[4]->output[0]))
			continue;
		if (!is_op(q[6], "Div", 2) || strcmp(q[6]->input[0], d) || strcmp(q[6]->input[1], q[5]->output[0]))
			continue;
		if (!is_op(q[7], "Mul", 2) || !has_in(q[7], q[6]->output[0]))
			continue;
		if (!is_op(q[8], "Add", 2) || !has_in(q[8], q[7]->output[0]))
			continue;
		int ok = uses_of(g, m) == 1 && uses_of(g, d) == 2;
		for (int j = 2; ok && j < 8; j++)
			ok = uses_of(g, q[j]->output[0]) == 1;
		if (ok)
			grp[k] = last;
	}
	/* GELU, tanh form: Mul x x, Mul x _, Mul _ c, Add x _, Mul _ c, Tanh,
	 * Add _ 1, Mul x _, Mul _ 0.5; kind 2 is marked as grp = -(last + 2) */
	for (int k = 0; k < n; k++) {
		Onnx__NodeProto *q[9];
		if (grp[k] != -1 || !is_op(g->node[k], "Mul", 2))
			continue;
		int last = pattern_nodes(g, k, q, 9);
		if (last < 0)
			continue;
		const char *x = q[0]->input[0];
		int ok = !strcmp(q[0]->input[1], x);
		ok = ok && is_op(q[1], "Mul", 2) && has_in(q[1], x) && has_in(q[1], q[0]->output[0]);
		ok = ok && is_op(q[2], "Mul", 2) && has_in(q[2], q[1]->output[0]);
		ok = ok && is_op(q[3], "Add", 2) && has_in(q[3], x) && has_in(q[3], q[2]->output[0]);
		ok = ok && is_op(q[4], "Mul", 2) && has_in(q[4], q[3]->output[0]);
		ok = ok && is_op(q[5], "Tanh", 1) && !strcmp(q[5]->input[0], q[4]->output[0]);
		ok = ok && is_op(q[6], "Add", 2) && has_in(q[6], q[5]->output[0]);
		ok = ok && is_op(q[7], "Mul", 2) && has_in(q[7], x) && has_in(q[7], q[6]->output[0]);
		ok = ok && is_op(q[8], "Mul", 2) && has_in(q[8], q[7]->output[0]);
		for (int j = 0; ok && j < 8; j++)
			ok = uses_of(g, q[j]->output[0]) == 1;
		if (ok)
			grp[k] = -(last + 2);
	}
	return grp;
}

static int near(Val *v, double want)
{
	return v && v->known && v->n == 1 && fabs(kget(v, 0) - want) <= 1e-6 * fabs(want) + 1e-7;
}

/* GELU's tanh form as gelu_tanh(x): 1 if done, 0 if the constants differ. */
static int try_gelu_tanh(Ctx *c, Onnx__GraphProto *g, int k)
{
	Onnx__NodeProto *q[9];
	if (pattern_nodes(g, k, q, 9) < 0)
		return 0;
	Val *x = find_val(c, q[0]->input[0]);
	if (!x || x->known || !dtype_is_float(x->dt))
		return 0;
	if (!near(find_val(c, other_in(q[2], q[1]->output[0])), 0.044715) ||
	    !near(find_val(c, other_in(q[4], q[3]->output[0])), 0.7978845608028654) ||
	    !near(find_val(c, other_in(q[6], q[5]->output[0])), 1) || !near(find_val(c, other_in(q[8], q[7]->output[0])), 0.5))
		return 0;
	c->node = q[8];
	NodeIO io = {.n = q[8]};
	return def(c, &io, 0, x->dt, x->rank, x->shape, "gelu_tanh(%s)", ref(c, x)) ? 1 : -1;
}

/* The other operand of a two-input node. */
static const char *other_in(Onnx__NodeProto *n, const char *name)
{
	return !strcmp(n->input[0], name) ? n->input[1] : n->input[0];
}

/* Translates the pattern at nodes k..k+8 as one layernorm when the values
 * allow (last axis, a known exponent 2 and eps, 1-d weight and bias); 1 if
 * done, 0 to translate the nodes one by one, -1 after an error. */
static int try_layernorm(Ctx *c, Onnx__GraphProto *g, int k)
{
	Onnx__NodeProto *q[9];
	if (pattern_nodes(g, k, q, 9) < 0)
		return 0;
	Val *x = find_val(c, q[0]->input[0]);
	if (!x || x->known || !dtype_is_float(x->dt) || x->rank < 1)
		return 0;
	int64_t last = x->shape[x->rank - 1];
	for (int j = 0; j < 4; j += 3) {
		int64_t ax[MAX_RANK + 1];
		int na = attr_ints(q[j], "axes", ax, MAX_RANK);
		if (na < 0 && q[j]->n_input == 2) {
			Val *av = find_val(c, q[j]->input[1]);
			if (!av || !av->known || av->n != 1)
				return 0;
			ax[0] = kgeti(av, 0);
			na = 1;
		}
		if (na != 1 || (ax[0] != -1 && ax[0] != x->rank - 1) || !attr_i(q[j], "keepdims", 1))
			return 0;
	}
	Val *two = find_val(c, q[2]->input[1]);
	Val *eps = find_val(c, other_in(q[4], q[3]->output[0]));
	Val *w = find_val(c, other_in(q[7], q[6]->output[0]));
	Val *b = find_val(c, other_in(q[8], q[7]->output[0]));
	if (!two || !two->known || two->n != 1 || kget(two, 0) != 2 || !eps || !eps->known || eps->n != 1 || !w || !b)
		return 0;
	if (w->rank != 1 || b->rank != 1 || w->shape[0] != last || b->shape[0] != last || w->dt != x->dt || b->dt != x->dt)
		return 0;
	char el[64];
	if (!float_lit(el, sizeof el, kget(eps, 0), x->dt))
		return 0;
	c->node = q[8];
	NodeIO io = {.n = q[8]};
	const char *xs = ref(c, x);
	char *xs2 = xstrdup(xs);
	const char *ws = ref(c, w);
	char *ws2 = xstrdup(ws);
	const char *bs = ref(c, b);
	Val *o = def(c, &io, 0, x->dt, x->rank, x->shape, "layernorm(%s, %s, %s, eps=%s)", xs2, ws2, bs, el);
	free(xs2);
	free(ws2);
	return o ? 1 : -1;
}


/* ------------------------------------------------------------------ params grouped by their dotted names */

/* Weights named h.0.attn.c_attn.weight, h.1..., wte.weight become
 * `param h: {...}[12]` and `param wte: { weight: ... }`: a tree per first
 * name part; an inner node whose keys are 0..n-1 with identical subtrees is
 * an array, any other a record (numbers are numbered fields). The flat
 * names in the text become paths. */
typedef struct GNode {
	char *key;
	int leaf;          /* weight index, or -1 */
	struct GNode **kid;
	int nkid;
} GNode;

static void gnode_free(GNode *n)
{
	if (!n)
		return;
	for (int k = 0; k < n->nkid; k++)
		gnode_free(n->kid[k]);
	free(n->kid);
	free(n->key);
	free(n);
}

static int is_ident(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

static int is_number(const char *s)
{
	if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 9)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int is_keyword(const char *s)
{
	for (int j = 0; keywords[j]; j++)
		if (!strcmp(keywords[j], s))
			return 1;
	return 0;
}

/* Type text of a subtree, or NULL when it cannot be one (a leaf with kids). */
static char *gnode_type(Ctx *c, GNode *n, int *is_array)
{
	*is_array = 0;
	if (n->leaf == -2 || (n->leaf < 0 && !n->nkid))
		return NULL;
	if (n->leaf >= 0) {
		if (n->nkid)
			return NULL;
		Buf b = {0};
		type_text(&b, c->w[n->leaf].dt, c->w[n->leaf].rank, c->w[n->leaf].shape);
		return b.s;
	}
	char **kt = xcalloc((size_t)n->nkid + 1, sizeof(char *));
	int ok = 1, arr = 1;
	for (int k = 0; k < n->nkid && ok; k++) {
		int sub;
		kt[k] = gnode_type(c, n->kid[k], &sub);
		ok = kt[k] != NULL;
		char num[16];
		snprintf(num, sizeof num, "%d", k);
		arr = arr && ok && !strcmp(n->kid[k]->key, num) && !strcmp(kt[k], kt[0]);
	}
	char *r = NULL;
	if (ok) {
		Buf b = {0};
		if (arr) {
			buf_printf(&b, "%s[%d]", kt[0], n->nkid);
			*is_array = 1;
		} else {
			buf_puts(&b, "{ ");
			for (int k = 0; k < n->nkid; k++)
				buf_printf(&b, "%s%s: %s", k ? ", " : "", n->kid[k]->key, kt[k]);
			buf_puts(&b, " }");
		}
		r = b.s;
	}
	for (int k = 0; k < n->nkid; k++)
		free(kt[k]);
	free(kt);
	return r;
}

static void gnode_paths(Ctx *c, GNode *n, const char *path)
{
	if (n->leaf >= 0) {
		c->w[n->leaf].path = xstrdup(path);
		return;
	}
	int arr;
	char *t = gnode_type(c, n, &arr);
	free(t);
	for (int k = 0; k < n->nkid; k++) {
		char *p = arr ? xasprintf("%s[%s]", path, n->kid[k]->key) : xasprintf("%s.%s", path, n->kid[k]->key);
		gnode_paths(c, n->kid[k], p);
		free(p);
	}
}

/* Replace the identifiers that are grouped params' flat names. */
static char *rename_params(Ctx *c, const char *t)
{
	Buf b = {0};
	for (const char *s = t; *s;) {
		if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_') {
			const char *e = s;
			while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') || *e == '_')
				e++;
			const char *rep = NULL;
			int prev_dot = s > t && s[-1] == '.';
			for (int k = 0; k < c->nw && !prev_dot; k++)
				if (c->w[k].path && strlen(c->w[k].id) == (size_t)(e - s) && !strncmp(c->w[k].id, s, (size_t)(e - s)))
					rep = c->w[k].path;
			if (rep)
				buf_puts(&b, rep);
			else
				buf_printf(&b, "%.*s", (int)(e - s), s);
			s = e;
		} else if (*s >= '0' && *s <= '9') {
			/* a number, perhaps 1e-05: keep its letters with it */
			const char *e = s;
			while ((*e >= '0' && *e <= '9') || *e == '.' || *e == 'e' || ((*e == '-') && e[-1] == 'e'))
				e++;
			buf_printf(&b, "%.*s", (int)(e - s), s);
			s = e;
		} else {
			buf_putc(&b, *s++);
		}
	}
	return b.s ? b.s : xstrdup("");
}

static void group_params(Ctx *c, char **regions, char **body)
{
	GNode **roots = NULL;
	int nroots = 0;
	for (int k = 0; k < c->nw; k++) {
		char *nm = xstrdup(c->w[k].name);
		char *parts[64];
		int np = 0, ok = 1;
		for (char *tok = strtok(nm, "."); tok && ok; tok = strtok(NULL, ".")) {
			if (np == 64 || (!is_ident(tok) && !is_number(tok)) || is_keyword(tok))
				ok = 0;
			else
				parts[np++] = tok;
		}
		/* the name must split cleanly: no empty parts */
		const char *wn = c->w[k].name;
		ok = ok && np >= 2 && is_ident(parts[0]) && wn[0] != '.' && wn[strlen(wn) - 1] != '.' && !strstr(wn, "..");
		if (ok && (is_builtin(parts[0]) || id_taken(c, parts[0]))) {
			/* the root may only clash with the flat names of its own params */
			int other = is_builtin(parts[0]) || is_keyword(parts[0]);
			for (int j = 0; j < c->ids.n && !other; j++)
				if (!strcmp(c->ids.v[j], parts[0])) {
					other = 1;
					for (int q = 0; q < c->nw; q++)
						if (!strcmp(c->w[q].id, parts[0]))
							other = 0;
				}
			ok = !other;
		}
		if (ok) {
			GNode *r = NULL;
			for (int j = 0; j < nroots; j++)
				if (!strcmp(roots[j]->key, parts[0]))
					r = roots[j];
			if (!r) {
				roots = xrealloc(roots, (size_t)(nroots + 1) * sizeof *roots);
				r = roots[nroots++] = xcalloc(1, sizeof(GNode));
				r->key = xstrdup(parts[0]);
				r->leaf = -1;
			}
			for (int p = 1; p < np; p++) {
				GNode *ch = NULL;
				for (int j = 0; j < r->nkid; j++)
					if (!strcmp(r->kid[j]->key, parts[p]))
						ch = r->kid[j];
				if (!ch) {
					r->kid = xrealloc(r->kid, (size_t)(r->nkid + 1) * sizeof *r->kid);
					ch = r->kid[r->nkid++] = xcalloc(1, sizeof(GNode));
					ch->key = xstrdup(parts[p]);
					ch->leaf = -1;
				}
				r = ch;
			}
			if (r->leaf >= 0 || r->nkid)
				r->leaf = -2; /* a name twice, or a leaf with children: spoils the type */
			else
				r->leaf = k;
		}
		free(nm);
	}
	Buf pl = {0};
	for (int j = 0; j < nroots; j++) {
		/* arrays need their numbered children in order */
		int arr;
		char *t = gnode_type(c, roots[j], &arr);
		if (!t || strstr(t, "(null)"))
			continue;
		gnode_paths(c, roots[j], roots[j]->key);
		buf_printf(&pl, "param %s: %s\n", roots[j]->key, t);
		free(t);
	}
	for (int k = 0; k < c->nw; k++)
		if (!c->w[k].path) {
			buf_printf(&pl, "param %s: ", c->w[k].id);
			type_text(&pl, c->w[k].dt, c->w[k].rank, c->w[k].shape);
			buf_printf(&pl, " = \"%s\"\n", c->w[k].name);
		}
	buf_free(&c->params);
	c->params = pl;
	char *r2 = rename_params(c, *regions ? *regions : ""), *b2 = rename_params(c, *body ? *body : "");
	free(*regions);
	free(*body);
	*regions = r2;
	*body = b2;
	for (int j = 0; j < nroots; j++)
		gnode_free(roots[j]);
	free(roots);
}


/* ------------------------------------------------------------------ model-local functions */

static void plan_index(OPlan *p);

/* A graph with every call of a model-local function (torch's
 * export_modules_as_functions) replaced by the function's nodes, renamed;
 * each call's node range is remembered and becomes a region call. */
typedef struct Expanded {
	Onnx__NodeProto **nodes;
	size_t n, cap;
	Vec owned;        /* what the copies allocated */
	int ncalls, capcalls;
	int *cstart, *cend;
	Onnx__NodeProto **ccall;
	Onnx__FunctionProto **cfn;
} Expanded;

static void *own(Expanded *e, void *p)
{
	vec_push(&e->owned, p);
	return p;
}

static Onnx__FunctionProto *find_function(Onnx__ModelProto *m, Onnx__NodeProto *n)
{
	for (size_t k = 0; k < m->n_functions; k++) {
		Onnx__FunctionProto *f = m->functions[k];
		const char *fd = f->domain ? f->domain : "", *nd = n->domain ? n->domain : "";
		if (f->name && n->op_type && !strcmp(f->name, n->op_type) && !strcmp(fd, nd))
			return f;
	}
	return NULL;
}

static void push_node(Expanded *e, Onnx__NodeProto *n)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 64;
		e->nodes = xrealloc(e->nodes, e->cap * sizeof *e->nodes);
	}
	e->nodes[e->n++] = n;
}

static const char *map_name(Expanded *e, Onnx__FunctionProto *f, Onnx__NodeProto *call, const char *prefix,
                            const char *name)
{
	if (!name || !*name)
		return "";
	for (size_t k = 0; k < f->n_input; k++)
		if (f->input[k] && !strcmp(f->input[k], name))
			return k < call->n_input && call->input[k] ? call->input[k] : "";
	for (size_t k = 0; k < f->n_output; k++)
		if (f->output[k] && !strcmp(f->output[k], name))
			return k < call->n_output && call->output[k] ? call->output[k] : "";
	return own(e, xasprintf("%s/%s", prefix, name));
}

static int expand_node(Expanded *e, Onnx__ModelProto *m, Onnx__NodeProto *n, int depth)
{
	Onnx__FunctionProto *f = m->n_functions ? find_function(m, n) : NULL;
	if (!f || depth > 16) {
		push_node(e, n);
		return 0;
	}
	int start = (int)e->n;
	char *prefix = own(e, xasprintf("%s", n->name && *n->name ? n->name : (n->n_output ? n->output[0] : f->name)));
	for (size_t k = 0; k < f->n_node; k++) {
		Onnx__NodeProto *b = f->node[k];
		Onnx__NodeProto *c = own(e, xmalloc(sizeof *c));
		*c = *b;
		c->name = own(e, xasprintf("%s/%s", prefix, b->name && *b->name ? b->name : b->op_type));
		c->input = own(e, xcalloc(b->n_input + 1, sizeof(char *)));
		c->output = own(e, xcalloc(b->n_output + 1, sizeof(char *)));
		for (size_t j = 0; j < b->n_input; j++)
			c->input[j] = (char *)map_name(e, f, n, prefix, b->input[j]);
		for (size_t j = 0; j < b->n_output; j++)
			c->output[j] = (char *)map_name(e, f, n, prefix, b->output[j]);
		/* attributes that refer to the call's */
		c->attribute = own(e, xcalloc(b->n_attribute + 1, sizeof(Onnx__AttributeProto *)));
		c->n_attribute = 0;
		for (size_t j = 0; j < b->n_attribute; j++) {
			Onnx__AttributeProto *a = b->attribute[j];
			if (a->ref_attr_name && *a->ref_attr_name) {
				Onnx__AttributeProto *from = attr(n, a->ref_attr_name);
				if (!from)
					continue;
				Onnx__AttributeProto *na = own(e, xmalloc(sizeof *na));
				*na = *from;
				na->name = a->name;
				c->attribute[c->n_attribute++] = na;
			} else {
				c->attribute[c->n_attribute++] = a;
			}
		}
		expand_node(e, m, c, depth + 1);
	}
	if (depth == 0 && (int)e->n > start) {
		if (e->ncalls == e->capcalls) {
			e->capcalls = e->capcalls ? 2 * e->capcalls : 16;
			e->cstart = xrealloc(e->cstart, (size_t)e->capcalls * sizeof(int));
			e->cend = xrealloc(e->cend, (size_t)e->capcalls * sizeof(int));
			e->ccall = xrealloc(e->ccall, (size_t)e->capcalls * sizeof(void *));
			e->cfn = xrealloc(e->cfn, (size_t)e->capcalls * sizeof(void *));
		}
		e->cstart[e->ncalls] = start;
		e->cend[e->ncalls] = (int)e->n;
		e->ccall[e->ncalls] = n;
		e->cfn[e->ncalls++] = f;
	}
	return 0;
}

static Expanded *expand_functions(Onnx__ModelProto *m)
{
	if (!m->n_functions)
		return NULL;
	Expanded *e = xcalloc(1, sizeof *e);
	for (size_t k = 0; k < m->graph->n_node; k++)
		expand_node(e, m, m->graph->node[k], 0);
	return e;
}

static void expanded_free(Expanded *e)
{
	if (!e)
		return;
	for (int k = 0; k < e->owned.n; k++)
		free(e->owned.v[k]);
	free(e->owned.v);
	free(e->nodes);
	free(e->cstart);
	free(e->cend);
	free(e->ccall);
	free(e->cfn);
	free(e);
}

/* The calls of local functions as region calls: one region per function,
 * for each call with one run-time input and one output (from pass 0's c0). */
static OPlan *plan_from_calls(Ctx *c0, Expanded *e, int nnodes)
{
	OPlan *q = xcalloc(1, sizeof *q);
	int m = e->ncalls;
	q->n = nnodes;
	q->start = xcalloc((size_t)m + 1, sizeof(int));
	q->end = xcalloc((size_t)m + 1, sizeof(int));
	q->in_name = xcalloc((size_t)m + 1, sizeof(char *));
	q->out_name = xcalloc((size_t)m + 1, sizeof(char *));
	q->region = xcalloc((size_t)m + 1, sizeof(int));
	q->rname = xcalloc((size_t)m + 1, sizeof(char *));
	q->rtempl = xcalloc((size_t)m + 1, sizeof(char *));
	q->rkey = xcalloc((size_t)m + 1, sizeof(char *));
	q->rcalls = xcalloc((size_t)m + 1, sizeof(int));
	q->rnodes = xcalloc((size_t)m + 1, sizeof(int));
	Onnx__FunctionProto **fns = xcalloc((size_t)m + 1, sizeof(void *));
	for (int k = 0; k < m; k++) {
		Onnx__NodeProto *call = e->ccall[k];
		const char *in = NULL;
		int nrun = 0;
		for (size_t j = 0; j < call->n_input; j++) {
			Val *v = call->input[j] && *call->input[j] ? find_val(c0, call->input[j]) : NULL;
			if (v && !v->known) {
				nrun++;
				in = call->input[j];
			}
		}
		if (nrun != 1 || call->n_output != 1 || !call->output[0] || !*call->output[0])
			continue;
		int r = -1;
		for (int x = 0; x < q->nregions; x++)
			if (fns[x] == e->cfn[k])
				r = x;
		if (r < 0) {
			r = q->nregions++;
			fns[r] = e->cfn[k];
			Buf b = {0};
			for (const char *t = e->cfn[k]->name; *t && b.len < 40; t++)
				buf_putc(&b, ((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9')) ? *t : '_');
			char *nm = b.s && !(b.s[0] >= '0' && b.s[0] <= '9') && !is_builtin(b.s) && !is_keyword(b.s)
			                   ? xasprintf("%s", b.s)
			                   : xasprintf("fn_%s", b.s ? b.s : "");
			buf_free(&b);
			for (int x = 0; x < r; x++)
				if (!strcmp(q->rname[x], nm)) {
					char *t2 = xasprintf("%s_%d", nm, r + 1);
					free(nm);
					nm = t2;
				}
			q->rname[r] = nm;
			q->rnodes[r] = e->cend[k] - e->cstart[k];
		}
		int sidx = q->nseg++;
		q->start[sidx] = e->cstart[k];
		q->end[sidx] = e->cend[k];
		q->in_name[sidx] = xstrdup(in);
		q->out_name[sidx] = xstrdup(call->output[0]);
		q->region[sidx] = r;
	}
	free(fns);
	if (!q->nseg) {
		plan_free(q);
		return NULL;
	}
	plan_index(q);
	return q;
}

/* A frozen input's value from a TensorProto (.pb) or .npy file. */
static Val *frozen_val(Ctx *c, const char *name, const char *file)
{
	size_t fl = strlen(file);
	if (fl > 4 && !strcmp(file + fl - 4, ".npy")) {
		NpyArray arr;
		char err[300];
		if (npy_read(file, &arr, err, sizeof err) < 0) {
			node_err(c, 0, "--freeze %s=%s: %s", name, file, err);
			return NULL;
		}
		Val *v = new_val(c, name, arr.dtype, arr.rank, arr.shape);
		val_alloc(v);
		Tensor *t = tensor_from_bytes(arr.dtype, arr.rank, arr.shape, arr.data);
		for (int64_t k = 0; k < v->n; k++) {
			if (v->f)
				v->f[k] = t->f[k];
			else
				v->i[k] = t->i[k];
		}
		tensor_free(t);
		npy_free(&arr);
		return v;
	}
	unsigned char *data;
	size_t len;
	char err[300];
	if (read_file_all(file, &data, &len, err, sizeof err) < 0) {
		node_err(c, 0, "--freeze %s=%s: %s", name, file, err);
		return NULL;
	}
	Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, data);
	free(data);
	if (!t) {
		node_err(c, 0, "--freeze %s=%s: not a TensorProto file (malformed or truncated)", name, file);
		return NULL;
	}
	Val *v = tensor_val(c, t, name, file, 0);
	onnx__tensor_proto__free_unpacked(t, NULL);
	return v;
}

static const char *lookup_define(const OnnxOptions *o, const char *name)
{
	for (int k = o->ndefs - 1; k >= 0; k--)
		if (!strcmp(o->def_names[k], name))
			return o->def_values[k];
	return NULL;
}

static char *safetensors_bytes(Ctx *c, size_t *len)
{
	static const char *const st_names[DT_COUNT] = {"BOOL", "I32", "I64", "F32", "F64"};
	Buf h = {0};
	buf_putc(&h, '{');
	size_t off = 0;
	for (int k = 0; k < c->nw; k++) {
		WEntry *e = &c->w[k];
		buf_printf(&h, "%s\"", k ? "," : "");
		for (const char *s = e->name; *s; s++) {
			if (*s == '"' || *s == '\\')
				buf_putc(&h, '\\');
			if ((unsigned char)*s < 0x20)
				buf_printf(&h, "\\u%04x", (unsigned char)*s);
			else
				buf_putc(&h, *s);
		}
		buf_printf(&h, "\":{\"dtype\":\"%s\",\"shape\":[", st_names[e->dt]);
		for (int j = 0; j < e->rank; j++)
			buf_printf(&h, "%s%lld", j ? "," : "", (long long)e->shape[j]);
		buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + e->nbytes);
		off += e->nbytes;
	}
	buf_putc(&h, '}');
	while ((h.len + 8) % 8)
		buf_putc(&h, ' ');
	size_t total = 8 + h.len + off;
	char *out = xmalloc(total);
	uint64_t hl = h.len;
	for (int i = 0; i < 8; i++)
		out[i] = (char)(hl >> (8 * i));
	memcpy(out + 8, h.s, h.len);
	char *p = out + 8 + h.len;
	for (int k = 0; k < c->nw; k++) {
		WEntry *e = &c->w[k];
		memcpy(p, e->data, e->nbytes);
		p += e->nbytes;
		/* an initializer's bytes, once copied out for the last time, are
		 * given back: the model's weights are not held twice over */
		int later = 0;
		for (int j = k + 1; j < c->nw && e->src && !later; j++)
			later = c->w[j].src == e->src;
		if (e->src && !later) {
			free(e->src->raw_data.data);
			e->src->raw_data.data = NULL;
			e->src->raw_data.len = 0;
			for (int j = 0; j <= k; j++)
				if (c->w[j].src == e->src)
					c->w[j].data = NULL;
		}
	}
	buf_free(&h);
	*len = total;
	return out;
}

/* Is this input used where its value must be known (shape, axes, ...)?
 * Then, if frozen, fine; else need_known reports it. */

static int import_graph(Ctx *c, Onnx__ModelProto *m)
{
	Onnx__GraphProto *g = m->graph;
	const OnnxOptions *o = c->opt;
	/* the region functions' names are taken */
	for (int r = 0; c->plan && r < c->plan->nregions; r++)
		vec_push(&c->ids, xstrdup(c->plan->rname[r]));
	/* initializers: known values */
	for (size_t k = 0; k < g->n_initializer; k++) {
		Onnx__TensorProto *t = g->initializer[k];
		if (!t->name || !*t->name)
			return node_err(c, 0, "initializer #%zu has no name", k), -1;
		if (!tensor_val(c, t, t->name, c->path, 1))
			return -1;
	}
	/* inputs */
	Buf sig = {0};
	int nargs = 0;
	for (size_t k = 0; k < g->n_input; k++) {
		Onnx__ValueInfoProto *vi = g->input[k];
		if (!vi->name || !*vi->name) {
			buf_free(&sig);
			return node_err(c, 0, "graph input #%zu has no name", k), -1;
		}
		if (find_val(c, vi->name))
			continue; /* an initializer: its value wins (old exporters list both) */
		const char *frozen = NULL;
		for (int j = 0; j < o->nfreeze; j++)
			if (!strcmp(o->freeze_names[j], vi->name))
				frozen = o->freeze_paths[j];
		if (frozen) {
			if (!frozen_val(c, vi->name, frozen)) {
				buf_free(&sig);
				return -1;
			}
			continue;
		}
		Onnx__TypeProto *tp = vi->type;
		if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' is not a tensor (sequences, maps and optionals are not supported)",
			                vi->name), -1;
		}
		int ot = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
		int dt = onnx_nest_dtype(ot);
		if (dt < 0) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' has dtype %s, which nestc does not support", vi->name,
			                onnx_dtype_name(ot)), -1;
		}
		Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
		if (!sp) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' has no shape; nestc needs every dimension", vi->name), -1;
		}
		if (sp->n_dim > MAX_RANK) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' has rank %zu, more than nestc's %d", vi->name, sp->n_dim, MAX_RANK), -1;
		}
		int64_t shape[MAX_RANK];
		Buf ty = {0};
		buf_printf(&ty, "%s[", dtype_name((DType)dt));
		for (size_t d = 0; d < sp->n_dim; d++) {
			Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
			if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
				shape[d] = dm->dim_value;
				buf_printf(&ty, "%s%lld", d ? ", " : "", (long long)dm->dim_value);
				continue;
			}
			const char *pn = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dm->dim_param : NULL;
			const char *dv = pn && *pn ? lookup_define(o, pn) : NULL;
			if (!dv) {
				buf_free(&ty);
				buf_free(&sig);
				if (pn && *pn)
					return node_err(c, 0, "input '%.200s': dimension %zu is the symbol '%.100s': bind it with -D %.100s=VALUE",
					                vi->name, d, pn, pn), -1;
				return node_err(c, 0, "input '%.200s': dimension %zu has no size (give the model a fixed shape)",
				                vi->name, d), -1;
			}
			char *end;
			long long x = strtoll(dv, &end, 10);
			if (!*dv || *end || x < 1) {
				buf_free(&ty);
				buf_free(&sig);
				return node_err(c, 0, "-D %s=%s: a dimension is a positive integer", pn, dv), -1;
			}
			shape[d] = x;
			/* a const of the symbol's name when it is an identifier */
			int ident = (pn[0] < '0' || pn[0] > '9');
			for (const char *s = pn; *s; s++)
				ident &= (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_';
			int declared = 0;
			for (int j = 0; j < c->ids.n; j++)
				declared |= !strcmp(c->ids.v[j], pn);
			if (ident && !declared && !id_taken(c, pn)) {
				vec_push(&c->ids, xstrdup(pn));
				buf_printf(&c->consts, "const %s = %lld\n", pn, x);
				declared = 1;
			}
			if (ident && declared)
				buf_printf(&ty, "%s%s", d ? ", " : "", pn);
			else
				buf_printf(&ty, "%s%lld", d ? ", " : "", x);
		}
		buf_puts(&ty, "]");
		Val *v = new_val(c, vi->name, (DType)dt, (int)sp->n_dim, shape);
		int64_t nz[MAX_RANK];
		for (int d = 0; d < v->rank; d++)
			nz[d] = shape[d] ? shape[d] : 1; /* an empty input is an error only where it is used */
		if (check_shape(c, v->rank, nz) < 0) {
			buf_free(&ty);
			buf_free(&sig);
			return -1;
		}
		v->is_input = 1;
		v->id = make_id(c, vi->name, "in_");
		buf_printf(&sig, "%s%s: %s", nargs ? ", " : "", v->id, ty.s);
		if (ot != OT_FLOAT && ot != OT_DOUBLE && ot != OT_INT32 && ot != OT_INT64 && ot != OT_BOOL)
			buf_printf(&c->consts, "# input %s: %s in the ONNX file, passed as %s\n", vi->name, onnx_dtype_name(ot),
			           dtype_name((DType)dt));
		buf_free(&ty);
		nargs++;
	}
	/* nodes */
	int *lngrp = find_layernorms(g);
	for (size_t k = 0; k < g->n_node; k++) {
		c->node = g->node[k];
		c->node_index = (int)k;
		if (c->plan && c->plan->seg_at[k] >= 0)
			seg_begin(c, c->plan->seg_at[k]);
		int fused = 0, kind = lngrp[k] >= 0 ? 1 : lngrp[k] <= -2 ? 2 : 0;
		int gend = kind == 1 ? lngrp[k] : kind == 2 ? -lngrp[k] - 2 : -1;
		if (kind) {
			/* the pattern's constants first, then the pattern as one node */
			for (int j = (int)k + 1; j <= gend && !c->failed; j++)
				if (g->node[j]->op_type && !strcmp(g->node[j]->op_type, "Constant")) {
					c->node = g->node[j];
					c->node_index = j;
					if (translate_node(c, g->node[j], c->path) < 0 && !c->failed)
						node_err(c, 0, "cannot translate");
				}
			fused = c->failed ? -1 : kind == 1 ? try_layernorm(c, g, (int)k) : try_gelu_tanh(c, g, (int)k);
			if (!fused) {
				/* translate them one by one after all (the constants are done) */
				for (int j = (int)k; j <= gend && fused >= 0; j++) {
					if (j > (int)k && g->node[j]->op_type && !strcmp(g->node[j]->op_type, "Constant"))
						continue;
					c->node = g->node[j];
					c->node_index = j;
					if (translate_node(c, g->node[j], c->path) < 0)
						fused = -1;
				}
				if (fused == 0)
					fused = 1;
			}
		}
		if (fused < 0 || (!fused && translate_node(c, g->node[k], c->path) < 0)) {
			buf_free(&sig);
			free(lngrp);
			if (!c->failed)
				node_err(c, 0, "cannot translate");
			return -1;
		}
		if (fused) {
			/* the pattern's last node ends any segment ending inside it */
			for (int j = (int)k; j < gend && c->plan; j++)
				if (c->plan->seg_end[j] >= 0)
					seg_end(c, c->plan->seg_end[j]);
			k = (size_t)gend;
			c->node_index = (int)k;
		}
		if (c->plan && c->plan->seg_end[k] >= 0)
			seg_end(c, c->plan->seg_end[k]);
		if (c->failed) {
			buf_free(&sig);
			free(lngrp);
			return -1;
		}
	}
	free(lngrp);
	c->node = NULL;
	/* outputs */
	if (!g->n_output) {
		buf_free(&sig);
		return node_err(c, 0, "the graph has no outputs"), -1;
	}
	Buf res = {0}, ret = {0};
	for (size_t k = 0; k < g->n_output; k++) {
		Onnx__ValueInfoProto *vi = g->output[k];
		Val *v = vi->name ? find_val(c, vi->name) : NULL;
		if (!v) {
			buf_free(&sig);
			buf_free(&res);
			buf_free(&ret);
			return node_err(c, 0, "graph output '%.200s' is computed by no node", vi->name ? vi->name : ""), -1;
		}
		const char *e = ref(c, v);
		if (g->n_output > 1)
			buf_puts(&res, k ? ", " : "(");
		type_text(&res, v->dt, v->rank, v->shape);
		buf_printf(&ret, "%s%s", k ? ", " : "", e);
	}
	if (g->n_output > 1)
		buf_puts(&res, ")");
	if (c->failed) {
		buf_free(&sig);
		buf_free(&res);
		buf_free(&ret);
		return -1;
	}
	Buf all = {0};
	buf_printf(&all, "# Imported by nestc %s from %s (opset %d).\n", NESTC_VERSION, c->path, c->opset);
	if (c->consts.s)
		buf_puts(&all, c->consts.s);
	char *regions = c->plan && c->plan->regions.s ? xstrdup(c->plan->regions.s) : NULL;
	Buf fb = {0};
	buf_printf(&fb, "\nexport fn forward(%s) -> %s {\n%s  return %s\n}\n", sig.s ? sig.s : "", res.s,
	           c->body.s ? c->body.s : "", ret.s);
	char *fn = fb.s;
	group_params(c, &regions, &fn);
	if (c->params.s)
		buf_printf(&all, "\n%s", c->params.s);
	if (regions)
		buf_puts(&all, regions);
	buf_puts(&all, fn);
	free(regions);
	free(fn);
	buf_free(&sig);
	buf_free(&res);
	buf_free(&ret);
	buf_free(&c->body);
	c->body = all;
	return 0;
}

static void ctx_free(Ctx *c)
{
	for (int k = 0; k < c->nvals; k++) {
		free(c->vals[k]->name);
		free(c->vals[k]->id);
		free(c->vals[k]->f);
		free(c->vals[k]->i);
		free(c->vals[k]->rawbuf);
		free(c->vals[k]);
	}
	free(c->vals);
	for (int k = 0; k < c->ids.n; k++)
		free(c->ids.v[k]);
	free(c->ids.v);
	for (int k = 0; k < c->nw; k++) {
		free(c->w[k].name);
		free(c->w[k].id);
		free(c->w[k].path);
		if (!c->w[k].borrowed)
			free(c->w[k].data);
	}
	free(c->w);
	for (int k = 0; k < c->next; k++) {
		free(c->ext[k].id);
		free(c->ext[k].oname);
		free(c->ext[k].ph);
	}
	free(c->ext);
	if (c->rmode && c->inner.n && c->inner.v[0]) {
		buf_free(c->inner.v[0]);
		free(c->inner.v[0]);
	}
	free(c->inner.v);
	for (int k = 0; k < c->garbage.n; k++)
		free(c->garbage.v[k]);
	free(c->garbage.v);
	buf_free(&c->consts);
	buf_free(&c->params);
	buf_free(&c->body);
	Ctx z = {.path = c->path, .opt = c->opt, .opset = c->opset};
	*c = z;
}

/* Segments between single-tensor cuts, from a translation without outlining
 * (c0: which values are known at import). NULL when there are fewer than 2. */
static OPlan *find_segments(Ctx *c0, Onnx__GraphProto *g)
{
	int n = (int)g->n_node;
	/* every run-time value: its producer and its last use */
	Vec names = {0};
	int cap = 0, *prod = NULL, *last = NULL;
	for (int k = -1; k < n; k++) {
		size_t no = k < 0 ? g->n_input : g->node[k]->n_output;
		for (size_t j = 0; j < no; j++) {
			const char *nm = k < 0 ? g->input[j]->name : g->node[k]->output[j];
			Val *v = nm && *nm ? find_val(c0, nm) : NULL;
			if (!v || v->known)
				continue;
			if (names.n == cap) {
				cap = cap ? 2 * cap : 64;
				prod = xrealloc(prod, (size_t)cap * sizeof *prod);
				last = xrealloc(last, (size_t)cap * sizeof *last);
			}
			prod[names.n] = k;
			last[names.n] = k;
			vec_push(&names, (void *)nm);
		}
	}
	for (int k = 0; k <= n; k++) {
		size_t ni = k < n ? g->node[k]->n_input : g->n_output;
		for (size_t j = 0; j < ni; j++) {
			const char *nm = k < n ? g->node[k]->input[j] : g->output[j]->name;
			if (!nm)
				continue;
			for (int q = names.n - 1; q >= 0; q--)
				if (!strcmp(names.v[q], nm)) {
					if (last[q] < k)
						last[q] = k;
					break;
				}
		}
	}
	/* live at cut i (between nodes i-1 and i): prod < i <= last */
	int64_t *cnt = xcalloc((size_t)n + 2, sizeof *cnt), *sum = xcalloc((size_t)n + 2, sizeof *sum);
	for (int q = 0; q < names.n; q++) {
		int a = prod[q] + 1, b = last[q];
		if (a > b)
			continue;
		cnt[a]++;
		cnt[b + 1]--;
		sum[a] += q;
		sum[b + 1] -= q;
	}
	int *cut = xcalloc((size_t)n + 1, sizeof *cut), *who = xcalloc((size_t)n + 1, sizeof *who), ncut = 0;
	int64_t cc = 0, ss = 0;
	int *lngrp = find_layernorms(g);
	char *inside = xcalloc((size_t)n + 2, 1); /* cut positions within a fused pattern */
	for (int i = 0; i < n; i++) {
		int e = lngrp[i] >= 0 ? lngrp[i] : lngrp[i] <= -2 ? -lngrp[i] - 2 : -1;
		for (int j = i + 1; j <= e; j++)
			inside[j] = 1;
	}
	for (int i = 0; i <= n; i++) {
		cc += cnt[i];
		ss += sum[i];
		if (i < n && cc == 1 && !inside[i]) {
			cut[ncut] = i;
			who[ncut++] = (int)ss;
		}
	}
	OPlan *p = NULL;
	if (ncut >= 3) {
		p = xcalloc(1, sizeof *p);
		p->n = n;
		p->start = xcalloc((size_t)ncut, sizeof(int));
		p->end = xcalloc((size_t)ncut, sizeof(int));
		p->in_name = xcalloc((size_t)ncut, sizeof(char *));
		p->out_name = xcalloc((size_t)ncut, sizeof(char *));
		for (int j = 0; j + 1 < ncut; j++) {
			if (who[j] == who[j + 1] || prod[who[j + 1]] < cut[j])
				continue; /* the segment does not compute what leaves it */
			int k = p->nseg++;
			p->start[k] = cut[j];
			p->end[k] = cut[j + 1];
			p->in_name[k] = xstrdup(names.v[who[j]]);
			p->out_name[k] = xstrdup(names.v[who[j + 1]]);
		}
		if (p->nseg < 2) {
			plan_free(p);
			p = NULL;
		}
	}
	free(lngrp);
	free(inside);
	free(cnt);
	free(sum);
	free(cut);
	free(who);
	free(prod);
	free(last);
	free(names.v);
	return p;
}

static void plan_index(OPlan *p)
{
	free(p->seg_at);
	free(p->seg_end);
	p->seg_at = xmalloc(((size_t)p->n + 1) * sizeof(int));
	p->seg_end = xmalloc(((size_t)p->n + 1) * sizeof(int));
	for (int k = 0; k <= p->n; k++)
		p->seg_at[k] = p->seg_end[k] = -1;
	for (int s = 0; s < p->nseg; s++) {
		p->seg_at[p->start[s]] = s;
		p->seg_end[p->end[s] - 1] = s;
	}
	p->cur = -1;
}

/* From the probe's keys: the group length L whose consecutive repeats cover
 * the most nodes; each repeat of the group becomes one segment of a new plan,
 * assigned to the region of its key. NULL when nothing repeats. */
static OPlan *choose_regions(OPlan *p)
{
	int m = p->nseg, bestL = 0, bestcov = 0;
	for (int L = 1; L <= m / 2; L++) {
		int cov = 0;
		for (int i = 0; i + 2 * L <= m;) {
			int runs = 1;
			for (;;) {
				int j = i + runs * L, eq = j + L <= m;
				for (int q = 0; eq && q < L; q++)
					eq = *p->key[i + q] && !strcmp(p->key[i + q], p->key[j + q]) &&
					     p->end[j + q - 1] == p->start[j + q] && p->end[i + q] == p->start[i + q + 1 < m ? i + q + 1 : i + q] + 0;
				if (!eq)
					break;
				runs++;
			}
			if (runs >= 2) {
				cov += p->end[i + runs * L - 1] - p->start[i];
				i += runs * L;
			} else {
				i++;
			}
		}
		if (cov > bestcov) {
			bestcov = cov;
			bestL = L;
		}
	}
	if (!bestL)
		return NULL;
	int L = bestL;
	OPlan *q = xcalloc(1, sizeof *q);
	q->n = p->n;
	q->start = xcalloc((size_t)m, sizeof(int));
	q->end = xcalloc((size_t)m, sizeof(int));
	q->in_name = xcalloc((size_t)m, sizeof(char *));
	q->out_name = xcalloc((size_t)m, sizeof(char *));
	q->region = xcalloc((size_t)m, sizeof(int));
	q->rname = xcalloc((size_t)m, sizeof(char *));
	q->rtempl = xcalloc((size_t)m, sizeof(char *));
	q->rkey = xcalloc((size_t)m, sizeof(char *));
	q->rcalls = xcalloc((size_t)m, sizeof(int));
	q->rnodes = xcalloc((size_t)m, sizeof(int));
	char **bkey = xcalloc((size_t)m, sizeof(char *));
	for (int i = 0; i + 2 * L <= m;) {
		int runs = 1;
		for (;;) {
			int j = i + runs * L, eq = j + L <= m;
			for (int t = 0; eq && t < L; t++)
				eq = *p->key[i + t] && !strcmp(p->key[i + t], p->key[j + t]) && p->end[j + t - 1] == p->start[j + t];
			if (!eq)
				break;
			runs++;
		}
		if (runs < 2) {
			i++;
			continue;
		}
		/* the group's key: its segments' keys */
		Buf k = {0};
		for (int t = 0; t < L; t++)
			buf_printf(&k, "%s\n--\n", p->key[i + t]);
		int r = -1;
		for (int x = 0; x < q->nregions; x++)
			if (!strcmp(bkey[x], k.s))
				r = x;
		if (r < 0) {
			r = q->nregions++;
			bkey[r] = xstrdup(k.s);
			q->rname[r] = r ? xasprintf("layer_%d", r + 1) : xstrdup("layer");
			q->rnodes[r] = p->end[i + L - 1] - p->start[i];
		}
		buf_free(&k);
		for (int b = 0; b < runs; b++) {
			int s = q->nseg++, f = i + b * L;
			q->start[s] = p->start[f];
			q->end[s] = p->end[f + L - 1];
			q->in_name[s] = xstrdup(p->in_name[f]);
			q->out_name[s] = xstrdup(p->out_name[f + L - 1]);
			q->region[s] = r;
		}
		i += runs * L;
	}
	for (int x = 0; x < q->nregions; x++)
		free(bkey[x]);
	free(bkey);
	plan_index(q);
	return q;
}

static int ctx_init(Ctx *c, Onnx__ModelProto *m, const char *path)
{
	c->opset = 0;
	for (size_t k = 0; k < m->n_opset_import; k++) {
		Onnx__OperatorSetIdProto *os = m->opset_import[k];
		if ((!os->domain || !*os->domain || !strcmp(os->domain, "ai.onnx")) && os->has_version)
			c->opset = (int)os->version;
	}
	if (!c->opset) {
		fprintf(stderr, "%s: error: the model imports no opset of the default domain (ai.onnx): other domains are not "
		                "supported\n",
		        path);
		return -1;
	}
	return 0;
}

int onnx_import(const char *path, const OnnxOptions *o, OnnxImport *out)
{
	memset(out, 0, sizeof *out);
	unsigned char *data;
	size_t len;
	char err[300];
	/* mapped, not read: the unpacked model copies what it keeps */
	void *map = MAP_FAILED;
	struct stat st;
	int fd = open(path, O_RDONLY);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (fd >= 0)
		close(fd);
	if (map != MAP_FAILED) {
		data = map;
		len = (size_t)st.st_size;
	} else if (read_file_all(path, &data, &len, err, sizeof err) < 0) {
		fprintf(stderr, "%s: error: %s\n", path, err);
		return 1;
	}
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
	if (map != MAP_FAILED)
		munmap(map, len);
	else
		free(data);
	if (!m) {
		fprintf(stderr, "%s: error: not an ONNX model: the file is malformed or truncated\n", path);
		return 1;
	}
	Ctx c = {.path = path, .opt = o};
	int rc = 1;
	OPlan *plan = NULL;
	Expanded *ex = NULL;
	Onnx__ModelProto m2, *m0 = m;
	Onnx__GraphProto g2;
	if (!m->graph) {
		fprintf(stderr, "%s: error: not an ONNX model: it has no graph\n", path);
		goto done;
	}
	if (ctx_init(&c, m, path) < 0)
		goto done;
	/* local functions: their calls expanded, in a shallow copy of the model */
	ex = expand_functions(m);
	if (ex) {
		m2 = *m;
		g2 = *m->graph;
		g2.node = ex->nodes;
		g2.n_node = ex->n;
		m2.graph = &g2;
		m = &m2;
	}
	if (ex && ex->ncalls && !o->no_outline) {
		/* each function a region: pass 0 finds the calls' run-time inputs */
		c.dry = 1;
		if (import_graph(&c, m) == 0)
			plan = plan_from_calls(&c, ex, (int)m->graph->n_node);
		ctx_free(&c);
		if (plan) {
			c.plan = plan;
			if (import_graph(&c, m) < 0) {
				ctx_free(&c);
				plan_free(plan);
				plan = NULL;
			}
		}
	} else if (!o->no_outline) {
		/* repeated layers: pass 0 (known values, so cuts), segments, a probe
		 * pass (their templates), the plan; both passes dry: big weights are
		 * not decoded, nothing is kept but the plan */
		c.dry = 1;
		OPlan *segs = import_graph(&c, m) == 0 ? find_segments(&c, m->graph) : NULL;
		ctx_free(&c);
		if (segs) {
			segs->key = xcalloc((size_t)segs->nseg, sizeof(char *));
			segs->probe = 1;
			plan_index(segs);
			Ctx c1 = {.path = path, .opt = o, .opset = c.opset, .plan = segs, .dry = 1};
			int ok = import_graph(&c1, m) == 0;
			for (int k = 0; k < segs->nseg; k++)
				if (!segs->key[k])
					segs->key[k] = xstrdup("");
			ctx_free(&c1);
			plan = ok ? choose_regions(segs) : NULL;
			plan_free(segs);
		}
		if (plan) {
			c.plan = plan;
			if (import_graph(&c, m) < 0) {
				/* a plan the translation cannot follow: translate flat */
				ctx_free(&c);
				plan_free(plan);
				plan = NULL;
			}
		}
	}
	if (!plan && import_graph(&c, m) < 0) {
		fprintf(stderr, "%s: error: %s\n", path, c.err);
		out->unsupported = c.unsupported;
		goto done;
	}
	if (plan) {
		Buf sm = {0};
		for (int r = 0; r < plan->nregions; r++)
			buf_printf(&sm, "%sregion %s: %d nodes, %d occurrences\n", r ? "" : "", plan->rname[r], plan->rnodes[r],
			           plan->rcalls[r]);
		if (plan->summary.s)
			buf_puts(&sm, plan->summary.s);
		out->outline = sm.s;
	}
	out->text = c.body.s;
	c.body = (Buf){0};
	out->nweights = c.nw;
	out->weights = safetensors_bytes(&c, &out->weights_len);
	rc = 0;
done:
	onnx__model_proto__free_unpacked(m0, NULL);
	expanded_free(ex);
	c.plan = NULL;
	ctx_free(&c);
	plan_free(plan);
	return rc;
}

void onnx_import_free(OnnxImport *im)
{
	free(im->text);
	free(im->weights);
	free(im->outline);
	memset(im, 0, sizeof *im);
}

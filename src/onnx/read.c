/* read.c - the model as read: the context's errors and Nest names, the
 * values every tensor gets (Val: dtype, shape, known data), tensors from
 * the file (raw, typed or external data; big ones read in place until a
 * fold needs them), frozen inputs, node attributes, and model-local
 * functions expanded into one flat node list. The bottom of the importer:
 * it calls nothing else in src/onnx/. */
#include "onnx.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *onnx_dtype_name(int t)
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

int onnx_storage_dtype(int t)
{
	switch (t) {
	case OT_FLOAT16: return DT_F16;
	case OT_BFLOAT16: return DT_BF16;
	case OT_INT8: return DT_I8;
	case OT_UINT8: return DT_U8;
	case OT_INT16: return DT_I16;
	case OT_UINT16: return DT_U16;
	default: return -1;
	}
}

int nest_to_onnx(DType d)
{
	static const int m[DT_COUNT] = {[DT_BOOL] = OT_BOOL, [DT_I32] = OT_INT32, [DT_I64] = OT_INT64,
	                                [DT_F32] = OT_FLOAT, [DT_F64] = OT_DOUBLE, [DT_F16] = OT_FLOAT16,
	                                [DT_BF16] = OT_BFLOAT16, [DT_I8] = OT_INT8, [DT_U8] = OT_UINT8,
	                                [DT_I16] = OT_INT16, [DT_U16] = OT_UINT16};
	return m[d];
}

void node_err(Ctx *c, int unsupported, const char *fmt, ...)
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

const char *const onnx_keywords[] = {"const", "param", "type", "fn", "export", "let", "for", "in", "return",
                                       "region", "true", "false", "inf", "pi", "f32", "f64", "i32", "i64",
                                       "bool", "f16", "bf16", "i8", "u8", "i16", "u16", "int", "float", "forward",
                                       NULL};

static const char *val_key(Ctx *c, int k)
{
	return c->vals[k]->name;
}

static const char *id_key(Ctx *c, int k)
{
	return c->ids.v[k];
}

/* Position k under its name; a later position of the same name replaces an
 * earlier one (the newest value of a name is the one found). */
static void tab_put(NameTab *t, Ctx *c, const char *(*key)(Ctx *, int), int k)
{
	if (2 * (t->n + 1) > t->cap) {
		NameTab old = *t;
		t->cap = old.cap ? 2 * old.cap : 1024;
		t->slot = xmalloc(t->cap * sizeof *t->slot);
		for (size_t j = 0; j < t->cap; j++)
			t->slot[j] = -1;
		t->n = 0;
		for (size_t j = 0; j < old.cap; j++)
			if (old.slot[j] >= 0)
				tab_put(t, c, key, old.slot[j]);
		free(old.slot);
	}
	const char *name = key(c, k);
	size_t h = (size_t)hash_str(name) & (t->cap - 1);
	for (; t->slot[h] >= 0; h = (h + 1) & (t->cap - 1))
		if (!strcmp(key(c, t->slot[h]), name)) {
			if (t->slot[h] < k)
				t->slot[h] = k;
			return;
		}
	t->slot[h] = k;
	t->n++;
}

/* The position of name among the first n of the array, or -1. */
static int tab_get(NameTab *t, Ctx *c, const char *(*key)(Ctx *, int), int n, const char *name)
{
	while (t->synced < n)
		tab_put(t, c, key, t->synced++);
	if (!t->cap)
		return -1;
	for (size_t h = (size_t)hash_str(name) & (t->cap - 1); t->slot[h] >= 0; h = (h + 1) & (t->cap - 1))
		if (!strcmp(key(c, t->slot[h]), name))
			return t->slot[h];
	return -1;
}

void tab_free(NameTab *t)
{
	free(t->slot);
	memset(t, 0, sizeof *t);
}

int id_taken(Ctx *c, const char *s)
{
	for (int k = 0; onnx_keywords[k]; k++)
		if (!strcmp(onnx_keywords[k], s))
			return 1;
	if (is_builtin(s))
		return 1;
	return tab_get(&c->idtab, c, id_key, c->ids.n, s) >= 0;
}

/* A fresh Nest identifier made from an ONNX name (prefix when it is empty,
 * starts with a digit, or is taken). */
char *make_id(Ctx *c, const char *name, const char *prefix)
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

Val *find_val(Ctx *c, const char *name)
{
	int k = tab_get(&c->vtab, c, val_key, c->nvals, name);
	return k >= 0 ? c->vals[k] : NULL;
}

Val *new_val(Ctx *c, const char *name, DType dt, int rank, const int64_t *shape)
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

void val_alloc(Val *v)
{
	if (dtype_is_float(v->dt))
		v->f = xcalloc((size_t)v->n + 1, sizeof(double));
	else
		v->i = xcalloc((size_t)v->n + 1, sizeof(int64_t));
	v->known = 1;
}

/* v, or for one not decoded element *k of its bytes decoded alone into
 * *one (and *k then 0). */
static const Val *readable(const Val *v, int64_t *k, Val *one, double *f, int64_t *i)
{
	if (!v->raw)
		return v;
	*one = raw_one(v, *k, f, i);
	*k = 0;
	return one;
}

/* Element k of a known value. */
double kget(const Val *v, int64_t k)
{
	double f;
	int64_t i;
	Val one;
	v = readable(v, &k, &one, &f, &i);
	return v->f ? v->f[k] : (double)v->i[k];
}

/* A float as an int64, saturated (NaN is 0): a cast of one out of range is
 * undefined, and a model may hold any float where an integer is expected
 * (found by fuzz_onnx: TopK's k as a float of 7e22); callers check the range. */
static int64_t f2i64(double x)
{
	if (x != x)
		return 0;
	if (x >= 9223372036854775807.0)
		return INT64_MAX;
	if (x <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)x;
}

int64_t kgeti(const Val *v, int64_t k)
{
	double f;
	int64_t i;
	Val one;
	v = readable(v, &k, &one, &f, &i);
	return v->f ? f2i64(v->f[k]) : v->i[k];
}

/* Store x into element k, rounded / wrapped to the dtype. */
void kset(Val *v, int64_t k, double x)
{
	if (v->f)
		v->f[k] = v->dt == DT_F32 ? (double)(float)x : x;
	else if (v->dt == DT_BOOL)
		v->i[k] = x != 0;
	else if (v->dt == DT_I32)
		v->i[k] = (int32_t)f2i64(x);
	else
		v->i[k] = f2i64(x);
}

void kseti(Val *v, int64_t k, int64_t x)
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

static int elem_size(int ot);
static void raw_elem(Val *v, int ot, const unsigned char *p, int64_t k);

/* Element k of a lazy value, decoded alone into a one-element Val. */
Val raw_one(const Val *v, int64_t k, double *f, int64_t *i)
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
int raw_same_layout(int ot, DType dt)
{
	return (ot == OT_FLOAT && dt == DT_F32) || (ot == OT_DOUBLE && dt == DT_F64) || (ot == OT_INT32 && dt == DT_I32) ||
	       (ot == OT_INT64 && dt == DT_I64);
}

/* A lazy value's data decoded, as a value read at once would have it. */
void val_decode(Val *v)
{
	if (!v->lazy || !v->raw)
		return; /* decoded, or a dry pass's zeros */
	val_alloc(v);
	size_t es = (size_t)elem_size(v->raw_ot);
	for (int64_t k = 0; k < v->n; k++)
		raw_elem(v, v->raw_ot, v->raw + (size_t)k * es, k);
	v->lazy = 0;
	v->raw = NULL;
}

/* Are all elements of a lazy value equal (and not NaN), as ref's test on
 * decoded data finds? Stops at the first that differs: weights differ early. */
int raw_splat(const Val *v)
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

int read_file_all(const char *path, unsigned char **data, size_t *len, char *err, size_t errlen)
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

/* Whether the data held in the model (raw bytes or typed values) is what
 * its shape needs; else a node_err saying how much it holds. */
static int data_matches(Ctx *c, const Onnx__TensorProto *t, int ot, int es, int64_t n, const char *name)
{
	if (t->has_raw_data) {
		if (t->raw_data.len == (size_t)n * (size_t)es)
			return 1;
		node_err(c, 0, "tensor '%.200s' has %zu bytes of data, not the %lld its shape needs", name, t->raw_data.len,
		         (long long)n * es);
		return 0;
	}
	size_t have;
	switch (ot) {
	case OT_FLOAT: have = t->n_float_data; break;
	case OT_DOUBLE: have = t->n_double_data; break;
	case OT_INT64: have = t->n_int64_data; break;
	case OT_UINT32: case OT_UINT64: have = t->n_uint64_data; break;
	default: have = t->n_int32_data; break;
	}
	if (have == (size_t)n)
		return 1;
	node_err(c, 0, "tensor '%.200s' has %zu values, not the %lld of its shape", name, have, (long long)n);
	return 0;
}

/* A TensorProto as a known Val named name; NULL after node_err. base: the
 * model's directory for external data. keep: t outlives the context, so the
 * tensor's bytes may stay where they are, decoded only if a fold needs them
 * (a dry pass still gives big ones zeros, and reads nothing of them). */
Val *tensor_val(Ctx *c, Onnx__TensorProto *t, const char *name, const char *base, int keep)
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
	v->ot = ot;
	int es = elem_size(ot);
	int external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	/* the data in the model must match the shape before anything is sized by
	 * the shape (a declared 2^31 elements asked a dry pass for 17 GB; found
	 * by fuzz_onnx); external data is checked once read */
	if (!external && !data_matches(c, t, ot, es, n, name))
		return NULL;
	/* a dry pass gives a big tensor zeros and reads nothing of it, unless its
	 * bytes are in the model and may stay there (then it sees what the final
	 * pass sees, and allocates nothing: glibc's calloc of these zeros was
	 * memset once the heap had grown, 300 MB for GPT-2 with 48 layers) */
	if (c->dry && n > 65536 && !(keep && !external && t->has_raw_data)) {
		val_alloc(v);
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
		if (keep) {
			v->known = 1;
			v->lazy = 1;
			v->raw = raw;
			v->raw_ot = ot;
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

Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name)
{
	for (size_t k = 0; k < n->n_attribute; k++)
		if (n->attribute[k]->name && !strcmp(n->attribute[k]->name, name))
			return n->attribute[k];
	return NULL;
}

int64_t attr_i(Onnx__NodeProto *n, const char *name, int64_t def)
{
	Onnx__AttributeProto *a = attr(n, name);
	return a && a->has_i ? a->i : def;
}

double attr_f(Onnx__NodeProto *n, const char *name, double def)
{
	Onnx__AttributeProto *a = attr(n, name);
	return a && a->has_f ? a->f : def;
}

int attr_ints(Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
	Onnx__AttributeProto *a = attr(n, name);
	if (!a)
		return -1;
	int m = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
	for (int k = 0; k < m; k++)
		out[k] = a->ints[k];
	return a->n_ints > (size_t)max ? max + 1 : m;
}

char *attr_s(Onnx__NodeProto *n, const char *name)
{
	Onnx__AttributeProto *a = attr(n, name);
	if (!a || !a->has_s)
		return NULL;
	return xasprintf("%.*s", (int)a->s.len, (const char *)a->s.data);
}

void *own(Expanded *e, void *p)
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
		/* a subgraph (If's branches) names the body's values unmapped:
		 * such a node is refused at translation (SUBGRAPH_IN_FUNCTION) */
		for (size_t j = 0; j < c->n_attribute; j++)
			if (c->attribute[j]->g || c->attribute[j]->n_graphs)
				c->domain = (char *)SUBGRAPH_IN_FUNCTION;
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

Expanded *expand_functions(Onnx__ModelProto *m)
{
	if (!m->n_functions)
		return NULL;
	Expanded *e = xcalloc(1, sizeof *e);
	for (size_t k = 0; k < m->graph->n_node; k++)
		expand_node(e, m, m->graph->node[k], 0);
	return e;
}

void expanded_free(Expanded *e)
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

/* A frozen input's value from a TensorProto (.pb) or .npy file. */
Val *frozen_val(Ctx *c, const char *name, const char *file)
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

const char *lookup_define(const OnnxOptions *o, const char *name)
{
	for (int k = o->ndefs - 1; k >= 0; k--)
		if (!strcmp(o->def_names[k], name))
			return o->def_values[k];
	return NULL;
}

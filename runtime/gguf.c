/* gguf.c - open and validate a GGUF file (llama.cpp's format), its tensor
 * types, and its metadata.
 *
 * Layout (little-endian): "GGUF", a u32 version (2 or 3), u64 n_tensors,
 * u64 n_kv; n_kv metadata entries (key string, u32 type, value); n_tensors
 * tensor infos (name string, u32 n_dims, n_dims u64 ne[] with ne[0] the
 * fastest-varying axis, u32 ggml type, u64 offset); padding to
 * general.alignment (default 32); the data section, which the offsets are
 * relative to. A string is a u64 length and its bytes; an array a u32 element
 * type, a u64 count and the elements. Every count, length, dimension, type
 * and offset is checked against the bytes the file has before anything
 * points into it, as weights.c does for safetensors; a hostile file can make
 * opening fail but never read out of bounds.
 *
 * Tensors come out as weights.c's: sorted by name, shape in row-major order
 * (ne reversed), begin and end relative to the data section. F32, I32, I64
 * and F64 tensors are held as they are; F16 and BF16 ones are kept in 16
 * bits (widened or packed from them); the block-quantized types are
 * converted to f32 (ggml's dequantization, value for value) in places of
 * their own when the first instance is made, unless its build holds them
 * in their own format (q8_0, q4_0, q4_K, q6_K): then packed from the file's
 * blocks, read or mapped, and never converted (wpack.c). */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef nestrt__tensor Tensor;
typedef nestrt__qtype QType;

/* ------------------------------------------------------------ tensor types */

float nestrt__f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u, u;
	if (e == 31)
		u = s | 0x7f800000u | m << 13; /* inf, or NaN with its payload */
	else if (e)
		u = s | (e + 112) << 23 | m << 13;
	else if (m) {
		/* subnormal, m * 2^-24: normalised, one exponent step per shift */
		e = 113;
		while (!(m & 1024)) {
			m <<= 1;
			e--;
		}
		u = s | e << 23 | (m & 1023u) << 13;
	} else
		u = s;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static float half(const unsigned char *p)
{
	return nestrt__f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* The converters follow ggml's dequantize_row_* operation for operation
 * (the same float products and sums, in the same order), so the values are
 * ggml's bit for bit. n is a whole number of blocks. */

static void f16_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = half(x + 2 * i);
}

static void bf16_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)(x[2 * i] | x[2 * i + 1] << 8) << 16;
		memcpy(&y[i], &u, sizeof u);
	}
}

/* q8_0: d, 32 int8 q; d * q */
static void q8_0_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++, x += 34, y += 32) {
		const float d = half(x);
		for (int j = 0; j < 32; j++)
			y[j] = (int8_t)x[2 + j] * d;
	}
}

/* q4_0: d, 16 bytes of nibbles (element j low, j + 16 high); d * (q - 8) */
static void q4_0_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++, x += 18, y += 32) {
		const float d = half(x);
		for (int j = 0; j < 16; j++) {
			y[j] = ((x[2 + j] & 15) - 8) * d;
			y[j + 16] = ((x[2 + j] >> 4) - 8) * d;
		}
	}
}

/* q4_1: d, m, nibbles; d * q + m */
static void q4_1_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++, x += 20, y += 32) {
		const float d = half(x), m = half(x + 2);
		for (int j = 0; j < 16; j++) {
			y[j] = (x[4 + j] & 15) * d + m;
			y[j + 16] = (x[4 + j] >> 4) * d + m;
		}
	}
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* q5_0: d, 32 fifth bits (a u32, bit j for element j), nibbles; d * (q - 16) */
static void q5_0_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++, x += 22, y += 32) {
		const float d = half(x);
		const uint32_t qh = le32(x + 2);
		for (int j = 0; j < 16; j++) {
			const int h0 = (int)((qh >> j) << 4 & 0x10), h1 = (int)((qh >> (j + 12)) & 0x10);
			y[j] = (((x[6 + j] & 15) | h0) - 16) * d;
			y[j + 16] = (((x[6 + j] >> 4) | h1) - 16) * d;
		}
	}
}

/* q5_1: d, m, fifth bits, nibbles; d * q + m */
static void q5_1_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++, x += 24, y += 32) {
		const float d = half(x), m = half(x + 2);
		const uint32_t qh = le32(x + 4);
		for (int j = 0; j < 16; j++) {
			const int h0 = (int)((qh >> j) << 4 & 0x10), h1 = (int)((qh >> (j + 12)) & 0x10);
			y[j] = ((x[8 + j] & 15) | h0) * d + m;
			y[j + 16] = ((x[8 + j] >> 4) | h1) * d + m;
		}
	}
}

/* q4_K and q6_K: nestc's formats q4_k and q6_k (quant.c) */
static void q4_k_to_f32(const unsigned char *x, float *y, int64_t n)
{
	nestrt_dequantize(NESTRT_FMT_Q4_K, x, n, y);
}

/* q5_K: q4_K with a fifth bit per element from 32 bytes of qh (bits 2i
 * and 2i + 1 for the i-th 64 elements) */
static void q5_k_to_f32(const unsigned char *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / 256; b++, x += 176) {
		const float d = half(x), min = half(x + 2);
		const unsigned char *sc = x + 4, *qh = x + 16, *ql = x + 48;
		unsigned u1 = 1, u2 = 2;
		for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
			int s, m;
			nestrt__scale_min_k4(is, sc, &s, &m);
			const float d1 = d * s, m1 = min * m;
			nestrt__scale_min_k4(is + 1, sc, &s, &m);
			const float d2 = d * s, m2 = min * m;
			for (int l = 0; l < 32; l++)
				*y++ = d1 * ((ql[l] & 15) + (qh[l] & u1 ? 16 : 0)) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
		}
	}
}

static void q6_k_to_f32(const unsigned char *x, float *y, int64_t n)
{
	nestrt_dequantize(NESTRT_FMT_Q6_K, x, n, y);
}

/* ggml's numbers. Held types have no converter; their st is the tensor's. */
#define QT(name, dt, size, ggml, block, bytes, fn) {{name, name, size, dt}, ggml, block, bytes, fn}
static const QType qtypes[] = {
	QT("f32", NESTRT_F32, 4, 0, 1, 4, NULL),
	QT("f16", NESTRT_F16, 2, 1, 1, 2, f16_to_f32),
	QT("q4_0", -1, 0, 2, 32, 18, q4_0_to_f32),
	QT("q4_1", -1, 0, 3, 32, 20, q4_1_to_f32),
	QT("q5_0", -1, 0, 6, 32, 22, q5_0_to_f32),
	QT("q5_1", -1, 0, 7, 32, 24, q5_1_to_f32),
	QT("q8_0", -1, 0, 8, 32, 34, q8_0_to_f32),
	QT("q4_K", -1, 0, 12, 256, 144, q4_k_to_f32),
	QT("q5_K", -1, 0, 13, 256, 176, q5_k_to_f32),
	QT("q6_K", -1, 0, 14, 256, 210, q6_k_to_f32),
	QT("i8", -1, 1, 24, 1, 1, NULL),
	QT("i16", -1, 2, 25, 1, 2, NULL),
	QT("i32", NESTRT_I32, 4, 26, 1, 4, NULL),
	QT("i64", NESTRT_I64, 8, 27, 1, 8, NULL),
	QT("f64", NESTRT_F64, 8, 28, 1, 8, NULL),
	QT("bf16", NESTRT_BF16, 2, 30, 1, 2, bf16_to_f32),
};
#define NQTYPES (sizeof qtypes / sizeof qtypes[0])

static void f32_copy(const unsigned char *src, float *dst, int64_t n)
{
	memcpy(dst, src, (size_t)n * sizeof(float));
}

/* An F32 tensor of llama.cpp's that is presented in another order (rows
 * moved, or transposed): read as the block types are, through a converter
 * that copies, then reordered. */
static const QType f32_moved = QT("f32", -1, 0, 0, 1, 4, f32_copy);

const nestrt__qtype *nestrt__qtype_of(uint32_t ggml_type)
{
	for (size_t i = 0; i < NQTYPES; i++)
		if (qtypes[i].ggml == ggml_type)
			return &qtypes[i];
	return NULL;
}

/* ggml's other types, named in messages. */
static const char *other_type(uint32_t t)
{
	static const char *const names[] = {
		[4] = "q4_2", [5] = "q4_3", [9] = "q8_1", [10] = "q2_K", [11] = "q3_K", [15] = "q8_K",
		[16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s", [20] = "iq4_nl",
		[21] = "iq3_s", [22] = "iq2_s", [23] = "iq4_xs", [29] = "iq1_m", [31] = "q4_0_4_4",
		[32] = "q4_0_4_8", [33] = "q4_0_8_8", [34] = "tq1_0", [35] = "tq2_0", [39] = "mxfp4",
	};
	return t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

/* ------------------------------------------------------------ metadata */

enum { MAX_NESTING = 64 };

typedef struct Meta {
	char *key;
	int type;
	int elem;          /* an array's element type, else -1 */
	uint64_t count;    /* an array's length, else 1 */
	uint64_t off;      /* the value (an array's first element) in hdr */
	uint64_t *index;   /* an array of strings: where each element starts */
} Meta;

struct nestrt__gguf {
	uint32_t version, alignment;
	const unsigned char *hdr;   /* the file from its start to the data section */
	unsigned char *own;         /* hdr, when read from a file */
	Meta *kv;
	size_t nkv;
	size_t *byname;             /* kv indices sorted by key */
};

/* Fixed sizes of the value types; 0 for string and array. */
static const int meta_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const meta_name[13] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                          "string", "array", "u64", "i64", "f64"};

static const char *type_name(int t)
{
	return t >= 0 && t < 13 ? meta_name[t] : "?";
}

void nestrt__gguf_free(nestrt__gguf *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->nkv; i++) {
		free(g->kv[i].key);
		free(g->kv[i].index);
	}
	free(g->kv);
	free(g->byname);
	free(g->own);
	free(g);
}

/* ------------------------------------------------------------ reading */

/* The file as it is read: from an image, or from fd into a buffer that
 * grows as the parse needs more (the header's length is known only once it
 * is parsed). Positions are offsets, never pointers: the buffer moves. */
typedef struct Rd {
	const char *path;
	nestrt_error *err;
	int fd;
	unsigned char *own;
	const unsigned char *buf;
	uint64_t have, size, pos;
	char what[NESTRT__SHOWN + 64];   /* the item being read, for messages */
} Rd;

static int bad(Rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(Rd *r, const char *fmt, ...)
{
	char reason[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	if (r->what[0])
		return nestrt__seterr(r->err, "%s: %s: %s", r->path, r->what, reason);
	return nestrt__seterr(r->err, "%s: %s", r->path, reason);
}

static uint64_t left(const Rd *r)
{
	return r->size - r->pos;
}

/* Make [pos, pos + n) readable. */
static int need(Rd *r, uint64_t n)
{
	if (n > left(r))
		return bad(r, "the file is truncated (%llu bytes needed at offset %llu, the file has %llu)",
		           (unsigned long long)n, (unsigned long long)r->pos, (unsigned long long)r->size);
	uint64_t end = r->pos + n;
	if (end <= r->have)
		return 0;
	uint64_t want = r->have * 2 > ((uint64_t)1 << 16) ? r->have * 2 : (uint64_t)1 << 16;
	want = want > end ? want : end;
	want = want < r->size ? want : r->size;
	if (want > SIZE_MAX)
		return bad(r, "the header is too large to read");
	unsigned char *nb = realloc(r->own, (size_t)want);
	if (!nb)
		return bad(r, "out of memory reading the header");
	r->own = nb;
	r->buf = nb;
	for (uint64_t at = r->have; at < want;) {
		ssize_t got = pread(r->fd, nb + at, (size_t)(want - at), (off_t)at);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return bad(r, "cannot read: %s", strerror(errno));
		if (got == 0)
			return bad(r, "file shrank while it was read");
		at += (uint64_t)got;
	}
	r->have = want;
	return 0;
}

static int u32(Rd *r, uint32_t *v)
{
	if (need(r, 4) < 0)
		return -1;
	*v = le32(r->buf + r->pos);
	r->pos += 4;
	return 0;
}

static int u64(Rd *r, uint64_t *v)
{
	if (need(r, 8) < 0)
		return -1;
	*v = le64(r->buf + r->pos);
	r->pos += 8;
	return 0;
}

/* A string: its offset and length. */
static int str(Rd *r, uint64_t *off, uint64_t *len, const char *what)
{
	if (u64(r, len) < 0)
		return -1;
	if (*len > left(r))
		return bad(r, "%s length %llu passes the end of the file (%llu bytes left)", what,
		           (unsigned long long)*len, (unsigned long long)left(r));
	if (need(r, *len) < 0)
		return -1;
	*off = r->pos;
	r->pos += *len;
	return 0;
}

/* A key or tensor name: a NUL-terminated copy (NULL with err set). */
static char *name_copy(Rd *r, const char *what, uint64_t *len)
{
	uint64_t off;
	if (str(r, &off, len, what) < 0)
		return NULL;
	const char *s = (const char *)r->buf + off;
	if (memchr(s, 0, (size_t)*len)) {
		char shown[NESTRT__SHOWN];
		bad(r, "%s '%s' contains a NUL character", what, nestrt__shown(shown, s, (size_t)*len));
		return NULL;
	}
	char *c = malloc((size_t)*len + 1);
	if (!c) {
		bad(r, "out of memory reading the header");
		return NULL;
	}
	memcpy(c, s, (size_t)*len);
	c[*len] = 0;
	return c;
}

/* One value of type t (an array's elements too), skipped over once checked. */
static int value(Rd *r, uint32_t t, int depth, Meta *m)
{
	if (t < 13 && meta_size[t])
		return need(r, (uint64_t)meta_size[t]) < 0 ? -1 : (r->pos += (uint64_t)meta_size[t], 0);
	if (t == 8) {
		uint64_t off, len;
		return str(r, &off, &len, "string");
	}
	if (t != 9)
		return bad(r, "unknown value type %u", t);
	if (depth >= MAX_NESTING)
		return bad(r, "arrays nested more than %d deep", MAX_NESTING);
	uint32_t et;
	uint64_t n;
	if (u32(r, &et) < 0)
		return -1;
	if (et >= 13)
		return bad(r, "array of unknown value type %u", et);
	if (u64(r, &n) < 0)
		return -1;
	/* the least each element takes: its fixed size, a string's length, an
	 * array's type and count */
	uint64_t least = meta_size[et] ? (uint64_t)meta_size[et] : et == 8 ? 8 : 12;
	if (n > left(r) / least)
		return bad(r, "array of %llu %s needs at least %llu bytes per element, %llu bytes are left",
		           (unsigned long long)n, type_name((int)et), (unsigned long long)least,
		           (unsigned long long)left(r));
	if (m) {
		m->elem = (int)et;
		m->count = n;
		m->off = r->pos;
		if (et == 8 && n > 0 && !(m->index = malloc((size_t)n * sizeof *m->index)))
			return bad(r, "out of memory reading the header");
	}
	if (meta_size[et]) {
		uint64_t nb = n * least;
		if (need(r, nb) < 0)
			return -1;
		r->pos += nb;
		return 0;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (m && m->index)
			m->index[i] = r->pos;
		if (value(r, et, depth + 1, NULL) < 0)
			return -1;
	}
	return 0;
}

static int meta_ptr_cmp(const void *a, const void *b)
{
	return strcmp((*(const Meta *const *)a)->key, (*(const Meta *const *)b)->key);
}


static const Meta *find_meta(const nestrt__gguf *g, const char *key)
{
	size_t lo = 0, hi = g ? g->nkv : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(g->kv[g->byname[mid]].key, key);
		if (c == 0)
			return &g->kv[g->byname[mid]];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The metadata entries; fills g. */
static int read_kv(Rd *r, nestrt__gguf *g, uint64_t n_kv)
{
	if (n_kv && !(g->kv = calloc((size_t)n_kv, sizeof *g->kv)))
		return bad(r, "out of memory reading the header");
	for (uint64_t i = 0; i < n_kv; i++) {
		Meta *m = &g->kv[i];
		snprintf(r->what, sizeof r->what, "key %llu", (unsigned long long)i);
		uint64_t len;
		m->key = name_copy(r, "key", &len);
		if (!m->key)
			return -1;
		g->nkv = i + 1;
		char shown[NESTRT__SHOWN];
		snprintf(r->what, sizeof r->what, "key %llu '%s'", (unsigned long long)i,
		         nestrt__shown(shown, m->key, (size_t)len));
		if (len == 0)
			return bad(r, "the key is empty");
		uint32_t t;
		if (u32(r, &t) < 0)
			return -1;
		if (t >= 13)
			return bad(r, "unknown value type %u", t);
		m->type = (int)t;
		m->elem = -1;
		m->count = 1;
		m->off = r->pos;
		if (value(r, t, 0, m) < 0)
			return -1;
	}
	r->what[0] = 0;
	/* by key, for lookups (sorted as pointers: qsort has no context) */
	const Meta **by = malloc((g->nkv ? g->nkv : 1) * sizeof *by);
	if (!by || !(g->byname = malloc((g->nkv ? g->nkv : 1) * sizeof *g->byname))) {
		free(by);
		return bad(r, "out of memory reading the header");
	}
	for (size_t i = 0; i < g->nkv; i++)
		by[i] = &g->kv[i];
	qsort(by, g->nkv, sizeof *by, meta_ptr_cmp);
	for (size_t i = 0; i < g->nkv; i++)
		g->byname[i] = (size_t)(by[i] - g->kv);
	free(by);
	for (size_t i = 1; i < g->nkv; i++)
		if (strcmp(g->kv[g->byname[i]].key, g->kv[g->byname[i - 1]].key) == 0) {
			char shown[NESTRT__SHOWN];
			const char *k = g->kv[g->byname[i]].key;
			return bad(r, "duplicate key '%s'", nestrt__shown(shown, k, strlen(k)));
		}
	const Meta *a = find_meta(g, "general.alignment");
	g->alignment = 32;
	if (a) {
		if (a->type != 4)
			return bad(r, "general.alignment is of type %s, not u32", type_name(a->type));
		g->alignment = le32(r->buf + a->off);
		if (g->alignment == 0 || (g->alignment & (g->alignment - 1)))
			return bad(r, "general.alignment %u is not a power of two", g->alignment);
	}
	return 0;
}

/* One tensor info into t; its file bytes into *nbytes. */
static int read_tensor(Rd *r, uint64_t i, Tensor *t, const QType **qt, uint64_t *nbytes, uint64_t *off)
{
	snprintf(r->what, sizeof r->what, "tensor %llu", (unsigned long long)i);
	uint64_t len;
	if (!(t->name = name_copy(r, "name", &len)))
		return -1;
	char shown[NESTRT__SHOWN];
	snprintf(r->what, sizeof r->what, "tensor %llu '%s'", (unsigned long long)i,
	         nestrt__shown(shown, t->name, (size_t)len));
	uint32_t nd;
	if (u32(r, &nd) < 0)
		return -1;
	if (nd > NESTRT_MAX_RANK)
		return bad(r, "%u dimensions, more than the %d nestc takes", nd, NESTRT_MAX_RANK);
	uint64_t ne[NESTRT_MAX_RANK];
	for (uint32_t k = 0; k < nd; k++)
		if (u64(r, &ne[k]) < 0)
			return -1;
	/* ggml's ne are int64: negative ones are refused, a product past
	 * INT64_MAX too (even with a 0 elsewhere: its strides would not fit) */
	int64_t numel = 1;
	int over = 0;
	for (uint32_t k = 0; k < nd; k++) {
		if (ne[k] > INT64_MAX)
			return bad(r, "ne[%u] = %lld is negative", k, (long long)(int64_t)ne[k]);
		over |= __builtin_mul_overflow(numel, (int64_t)ne[k], &numel);
	}
	char dims[256];
	size_t dl = (size_t)snprintf(dims, sizeof dims, "[");
	for (uint32_t k = 0; k < nd && dl < sizeof dims; k++)
		dl += (size_t)snprintf(dims + dl, sizeof dims - dl, "%s%llu", k ? ", " : "", (unsigned long long)ne[k]);
	if (dl < sizeof dims)
		snprintf(dims + dl, sizeof dims - dl, "]");
	if (over)
		return bad(r, "ne %s has more elements than fit in 64 bits", dims);
	uint32_t ty;
	if (u32(r, &ty) < 0)
		return -1;
	*qt = nestrt__qtype_of(ty);
	if (!*qt) {
		const char *o = other_type(ty);
		if (o)
			return bad(r, "type %u (%s) is not supported", ty, o);
		return bad(r, "unknown type %u", ty);
	}
	const QType *q = *qt;
	int64_t row = nd ? (int64_t)ne[0] : 1;
	if (row % q->block)
		return bad(r, "ne[0] = %lld is not a multiple of %s's block of %d elements", (long long)row, q->st.name,
		           q->block);
	uint64_t held = 0;
	*nbytes = (uint64_t)(numel / q->block) * (uint64_t)q->bytes; /* at most the f32 bytes, checked below */
	if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)(q->convert ? 4 : q->bytes), &held) || held > INT64_MAX)
		return bad(r, "ne %s of %s is too large", dims, q->st.name);
	if (u64(r, off) < 0)
		return -1;
	t->rank = (int)nd;
	for (uint32_t k = 0; k < nd; k++)
		t->shape[k] = (int64_t)ne[nd - 1 - k];
	t->begin = *off;
	t->end = *off + held; /* checked against the data section by the caller */
	return 0;
}

static int read_tensors(Rd *r, nestrt_weights *w, nestrt__gguf *g, uint64_t n, uint64_t *data_off)
{
	Tensor *t = n ? calloc((size_t)n, sizeof *t) : NULL;
	uint64_t *nbytes = n ? malloc((size_t)n * sizeof *nbytes) : NULL;
	nestrt__span *sp = n ? malloc((size_t)n * sizeof *sp) : NULL;
	int rc = -1;
	size_t got = 0;
	if (n && (!t || !nbytes || !sp)) {
		bad(r, "out of memory reading the header");
		goto out;
	}
	for (uint64_t i = 0; i < n; i++) {
		const QType *q = NULL;
		uint64_t off;
		got = (size_t)i + 1;
		if (read_tensor(r, i, &t[i], &q, &nbytes[i], &off) < 0)
			goto out;
		/* held in the type nestc binds; the file's named when converted */
		t[i].st = &q->st;
		if (q->convert) {
			t[i].stored = &q->st;
			t[i].st = &qtypes[0].st;
		}
	}
	r->what[0] = 0;
	/* the data section, at the next multiple of the alignment */
	uint64_t a = g->alignment, start = r->pos + (a - r->pos % a) % a;
	uint64_t data_len = start < r->size ? r->size - start : 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = t[i].begin, nb = nbytes[i];
		char shown[NESTRT__SHOWN];
		snprintf(r->what, sizeof r->what, "tensor %llu '%s'", (unsigned long long)i,
		         nestrt__shown(shown, t[i].name, strlen(t[i].name)));
		if (off % a) {
			bad(r, "offset %llu is not a multiple of the alignment %llu", (unsigned long long)off,
			    (unsigned long long)a);
			goto out;
		}
		if (off > data_len || nb > data_len - off) {
			bad(r, "offset %llu + %llu bytes passes the end of the data (%llu bytes)", (unsigned long long)off,
			    (unsigned long long)nb, (unsigned long long)data_len);
			goto out;
		}
		sp[i] = (nestrt__span){off, off + nb, (size_t)i};
	}
	r->what[0] = 0;
	/* no two tensors share a byte (empty ones take none) */
	if (n > 1)
		qsort(sp, (size_t)n, sizeof *sp, nestrt__span_cmp);
	size_t last = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		if (sp[i].begin == sp[i].end)
			continue;
		if (last != SIZE_MAX && sp[i].begin < sp[last].end) {
			char n1[NESTRT__SHOWN], n2[NESTRT__SHOWN];
			const char *x = t[sp[last].idx].name, *y = t[sp[i].idx].name;
			bad(r, "tensor '%s' overlaps tensor '%s'", nestrt__shown(n1, x, strlen(x)),
			    nestrt__shown(n2, y, strlen(y)));
			goto out;
		}
		if (last == SIZE_MAX || sp[i].end > sp[last].end)
			last = i;
	}
	if (n > 1)
		qsort(t, (size_t)n, sizeof *t, nestrt__tensor_cmp);
	for (size_t i = 1; i < n; i++)
		if (strcmp(t[i].name, t[i - 1].name) == 0) {
			char s[NESTRT__SHOWN];
			bad(r, "duplicate tensor name '%s'", nestrt__shown(s, t[i].name, strlen(t[i].name)));
			goto out;
		}
	*data_off = start;
	w->t = t;
	w->n = (size_t)n;
	t = NULL;
	rc = 0;
out:
	if (t)
		for (size_t i = 0; i < got; i++)
			free(t[i].name);
	free(t);
	free(nbytes);
	free(sp);
	return rc;
}

int nestrt__gguf_magic(const unsigned char *p, size_t n)
{
	return n >= 4 && memcmp(p, "GGUF", 4) == 0;
}

/* nestc's own files (nestc weights --format): a matrix whose blocks run
 * along its axis 0 (read as x @ w) is stored transposed, each row a column
 * of w along its blocks as GGUF means them, and named in the string array
 * nestc.transposed. Such a tensor is presented with w's shape; its elements
 * are transposed when converted (or kept 16-bit), and a build holding it in
 * its own format packs its rows as they are. Only block and 16-bit tensors
 * are stored so. */
static int transposed(nestrt_weights *w, const nestrt__gguf *g, nestrt_error *err)
{
	const Meta *m = find_meta(g, "nestc.transposed");
	if (!m)
		return 0;
	if (m->type != 9 || m->elem != 8)
		return nestrt__seterr(err, "%s: nestc.transposed is %s, not an array of strings", w->path,
		                      m->type == 9 ? "an array of other values" : type_name(m->type));
	for (uint64_t i = 0; i < m->count; i++) {
		const char *s;
		size_t len;
		if (nestrt_weights_meta_string(w, "nestc.transposed", i, &s, &len, err) < 0)
			return -1;
		char name[512], shown[NESTRT__SHOWN];
		nestrt__shown(shown, s, len);
		Tensor *t = len < sizeof name ? (memcpy(name, s, len), name[len] = 0, nestrt__weights_find(w, name)) : NULL;
		if (!t)
			return nestrt__seterr(err, "%s: nestc.transposed names '%s', which is not a tensor of the file", w->path, shown);
		if (t->rank != 2 || !t->stored || t->transposed)
			return nestrt__seterr(err, "%s: nestc.transposed names '%s', %s", w->path, shown,
			                      t->transposed ? "twice" : t->rank != 2 ? "which is not a matrix"
			                                                        : "whose type is not stored transposed (only "
			                                                          "block and 16-bit types are)");
		int64_t r = t->shape[0];
		t->shape[0] = t->shape[1];
		t->shape[1] = r;
		t->transposed = 1;
	}
	return 0;
}

/* A transposed tensor's elements (es bytes each, in the file's order: its
 * declared shape's columns as rows) into the declared order, in place. */
static int untranspose(Tensor *t, void *data, size_t es)
{
	int64_t rows = t->shape[1], cols = t->shape[0]; /* as in the file */
	size_t nb = (size_t)(rows * cols) * es;
	unsigned char *tmp = malloc(nb ? nb : 1), *d = data;
	if (!tmp)
		return -1;
	memcpy(tmp, d, nb);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			memcpy(d + (size_t)(c * rows + r) * es, tmp + (size_t)(r * cols + c) * es, es);
	free(tmp);
	return 0;
}

/* Rows of a rotary projection from GGML's order (as the file holds them)
 * into Hugging Face's, in place: es bytes an element. */
static int unrotate(Tensor *t, void *data, size_t es)
{
	int64_t hd = t->rotary_hd, rows = t->shape[0];
	size_t rb = (size_t)t->shape[1] * es;
	unsigned char *tmp = malloc((size_t)hd * rb + 1), *d = data;
	if (!tmp)
		return -1;
	for (int64_t h = 0; h < rows / hd; h++) {
		unsigned char *head = d + (size_t)(h * hd) * rb;
		memcpy(tmp, head, (size_t)hd * rb);
		for (int64_t j = 0; j < hd; j++)
			memcpy(head + (size_t)j * rb, tmp + (size_t)nestrt__rotary_row(j, hd) * rb, rb);
	}
	free(tmp);
	return 0;
}

/* A file of llama.cpp's (general.architecture llama or gpt2, its tensors
 * named token_embd.weight, blk.N.attn_q.weight, ...) is presented under
 * Hugging Face's names, in Hugging Face's layout (gguf_names.c): q and k
 * rows back in the rotate-half order, GPT-2's matrices as Conv1D's [in, out];
 * a LLaMA without output.weight ties lm_head.weight to the embedding, as
 * llama.cpp does. */
static int hf_names(nestrt_weights *w, nestrt_error *err)
{
	const char *a;
	size_t alen;
	char arch[32];
	if (nestrt_weights_meta_type(w, "general.architecture", NULL, NULL) != 8 ||
	    nestrt_weights_meta_string(w, "general.architecture", 0, &a, &alen, err) < 0 || alen >= sizeof arch)
		return 0;
	memcpy(arch, a, alen);
	arch[alen] = 0;
	if (!nestrt__gguf_arch_known(arch) || !nestrt__weights_find(w, "token_embd.weight"))
		return 0;
	int64_t heads = 0, kv = 0;
	char key[64];
	snprintf(key, sizeof key, "%s.attention.head_count", arch);
	if (nestrt_weights_meta_type(w, key, NULL, NULL) >= 0 && nestrt_weights_meta_int(w, key, 0, &heads, err) < 0)
		return -1;
	snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
	kv = heads;
	if (nestrt_weights_meta_type(w, key, NULL, NULL) >= 0 && nestrt_weights_meta_int(w, key, 0, &kv, err) < 0)
		return -1;
	int tie = strcmp(arch, "llama") == 0 && !nestrt__weights_find(w, "output.weight");
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		char hf[512], shown[NESTRT__SHOWN];
		int fl = nestrt__gguf_hf_name(arch, t->name, hf, sizeof hf);
		if (fl < 0)
			continue;
		nestrt__shown(shown, t->name, strlen(t->name));
		if (fl && t->rank != 2)
			return nestrt__seterr(err, "%s: tensor '%s' has %d dims; llama.cpp's %s holds a matrix", w->path, shown,
			                      t->rank, arch);
		if (fl && t->transposed)
			return nestrt__seterr(err, "%s: nestc.transposed names '%s', which llama.cpp's layout reorders", w->path,
			                      shown);
		if (fl & (NESTRT__NAME_ROPE_Q | NESTRT__NAME_ROPE_K)) {
			int q = fl & NESTRT__NAME_ROPE_Q;
			int64_t n = q ? heads : kv;
			if (n <= 0)
				return nestrt__seterr(err, "%s: tensor '%s' needs %s.attention.head_count (a positive integer) to "
				                      "order its rows", w->path, shown, arch);
			if (t->shape[0] % n || (t->shape[0] / n) % 2)
				return nestrt__seterr(err, "%s: tensor '%s' has %lld rows, not %lld heads (%s.attention.%s) of an "
				                      "even number of rows", w->path, shown, (long long)t->shape[0], (long long)n,
				                      arch, q ? "head_count" : "head_count_kv");
			t->rotary_hd = t->shape[0] / n;
		}
		if (fl & NESTRT__NAME_TRANS) {
			int64_t r = t->shape[0];
			t->shape[0] = t->shape[1];
			t->shape[1] = r;
			t->transposed = 1;
		}
		if (fl && !t->stored) {
			if (t->st != &qtypes[0].st)
				return nestrt__seterr(err, "%s: tensor '%s' is %s; llama.cpp's %s holds it in a float or block "
				                      "type", w->path, shown, t->st->name, arch);
			t->stored = &f32_moved.st;
		}
		char *nm = strdup(hf);
		if (!nm)
			return nestrt__seterr(err, "%s: out of memory", w->path);
		free(t->name);
		t->name = nm;
	}
	if (tie) {
		Tensor *e = NULL; /* renamed: the table is sorted again below */
		for (size_t i = 0; i < w->n && !e; i++)
			if (strcmp(w->t[i].name, "model.embed_tokens.weight") == 0)
				e = &w->t[i];
		Tensor *nt = e ? realloc(w->t, (w->n + 1) * sizeof *nt) : NULL;
		if (e && !nt)
			return nestrt__seterr(err, "%s: out of memory", w->path);
		if (nt) {
			size_t at = (size_t)(e - w->t);
			w->t = nt;
			nt[w->n] = nt[at];
			if (!(nt[w->n].name = strdup("lm_head.weight")))
				return nestrt__seterr(err, "%s: out of memory", w->path);
			w->n++;
		}
	}
	qsort(w->t, w->n, sizeof *w->t, nestrt__tensor_cmp);
	for (size_t i = 1; i < w->n; i++)
		if (strcmp(w->t[i].name, w->t[i - 1].name) == 0) {
			char shown[NESTRT__SHOWN];
			return nestrt__seterr(err, "%s: two tensors are named '%s' (one by llama.cpp's name)", w->path,
			                      nestrt__shown(shown, w->t[i].name, strlen(w->t[i].name)));
		}
	return 0;
}

int nestrt__gguf_parse(nestrt_weights *w, int fd, const unsigned char *image, size_t size, nestrt_error *err)
{
	Rd r = {.path = w->path, .err = err, .fd = fd, .buf = image, .have = image ? size : 0, .size = size};
	nestrt__gguf *g = calloc(1, sizeof *g);
	if (!g)
		return nestrt__seterr(err, "%s: out of memory reading the header", w->path);
	uint32_t magic, version;
	uint64_t nt, nkv, data_off;
	if (u32(&r, &magic) < 0 || u32(&r, &version) < 0)
		goto fail;
	if (version == 1 || version > 3 || version == 0) {
		if (version && !(version & 0xffff))
			bad(&r, "GGUF version %u is not supported (2 and 3 are; a big-endian file?)", version);
		else
			bad(&r, "GGUF version %u is not supported (2 and 3 are)", version);
		goto fail;
	}
	g->version = version;
	if (u64(&r, &nt) < 0 || u64(&r, &nkv) < 0)
		goto fail;
	/* counts against the least their entries take: a tensor info 24 bytes
	 * (name length, n_dims, type, offset), a key-value pair 13 */
	if (nt > left(&r) / 24) {
		bad(&r, "n_tensors %llu needs at least %llu bytes of tensor infos, the file has %llu left",
		    (unsigned long long)nt, nt > UINT64_MAX / 24 ? (unsigned long long)UINT64_MAX : (unsigned long long)(nt * 24),
		    (unsigned long long)left(&r));
		goto fail;
	}
	if (nkv > (left(&r) - nt * 24) / 13) {
		bad(&r, "n_kv %llu needs at least %llu bytes of metadata, the file has %llu left after the tensor infos",
		    (unsigned long long)nkv, nkv > UINT64_MAX / 13 ? (unsigned long long)UINT64_MAX : (unsigned long long)(nkv * 13),
		    (unsigned long long)(left(&r) - nt * 24));
		goto fail;
	}
	if (read_kv(&r, g, nkv) < 0 || read_tensors(&r, w, g, nt, &data_off) < 0)
		goto fail;
	/* what the metadata API reads: the header alone */
	if (r.own) {
		unsigned char *s = realloc(r.own, r.pos ? (size_t)r.pos : 1);
		if (s)
			r.own = s;
		g->own = r.own;
		g->hdr = r.own;
	} else {
		g->hdr = image;
	}
	w->gguf = g;
	w->data_off = data_off;
	if (transposed(w, g, err) < 0 || hf_names(w, err) < 0) {
		w->gguf = NULL;
		nestrt__gguf_free(g);
		return -1;
	}
	if (image)
		for (size_t i = 0; i < w->n; i++)
			w->t[i].data = image + data_off + w->t[i].begin;
	return 0;
fail:
	free(r.own);
	nestrt__gguf_free(g);
	return -1;
}

/* ------------------------------------------------------------ conversion */

/* Pieces of about 1 MiB of the file's blocks, converted in parallel. */
#define PIECE ((uint64_t)1 << 20)

typedef struct Piece {
	Tensor *t;
	uint64_t block0, nblocks;
} Piece;

typedef struct Job {
	const nestrt_weights *w;
	int fd;                        /* -1: from the image (t->data) */
	const unsigned char *image;
	const Piece *v;
	int err;                       /* an errno, -1 for a short file */
} Job;

static void convert_pieces(void *env, int64_t begin, int64_t end)
{
	Job *j = env;
	unsigned char *scratch = NULL;
	for (int64_t i = begin; i < end; i++) {
		const Piece *p = &j->v[i];
		const QType *q = (const QType *)p->t->stored;
		uint64_t nb = p->nblocks * (uint64_t)q->bytes, at = p->block0 * (uint64_t)q->bytes;
		const unsigned char *src;
		if (j->fd < 0) {
			src = j->image + j->w->data_off + p->t->begin + at;
		} else {
			if (!scratch && !(scratch = malloc((size_t)(PIECE + 256 * 4)))) {
				__atomic_store_n(&j->err, ENOMEM, __ATOMIC_RELAXED);
				return;
			}
			unsigned char *d = scratch;
			uint64_t off = j->w->data_off + p->t->begin + at, len = nb;
			while (len > 0) {
				ssize_t got = pread(j->fd, d, (size_t)len, (off_t)off);
				if (got < 0 && errno == EINTR)
					continue;
				if (got <= 0) {
					int e = got < 0 ? errno : -1;
					__atomic_store_n(&j->err, e, __ATOMIC_RELAXED);
					free(scratch);
					return;
				}
				d += got;
				off += (uint64_t)got;
				len -= (uint64_t)got;
			}
			src = scratch;
		}
		float *dst = (float *)p->t->data + p->block0 * (uint64_t)q->block;
		q->convert(src, dst, (int64_t)(p->nblocks * (uint64_t)q->block));
	}
	free(scratch);
}

/* F16 and BF16 tensors are not converted: they bind f16 / bf16 params as they
 * are, and are widened when an f32 param binds them (weights.c's widen_now). */
static int half16(const Tensor *t)
{
	return t->stored && (t->stored->dtype == NESTRT_F16 || t->stored->dtype == NESTRT_BF16);
}

/* Their bytes: read into the second half of their place, or the image's. */
static int keep_half(nestrt_weights *w, Tensor *t, int fd, const unsigned char *image, nestrt_error *err)
{
	size_t nb = (size_t)(t->end - t->begin) / 2;
	if (fd < 0 && (t->transposed || t->rotary_hd)) {
		/* the image is read-only: a place of our own, as a file's */
		t->owned = aligned_alloc(64, (2 * nb + 63) / 64 * 64);
		if (!t->owned)
			return nestrt__seterr(err, "%s: out of memory reading '%s'", w->path, t->name);
		memcpy((unsigned char *)t->owned + nb, image + w->data_off + t->begin, nb);
		t->data = t->owned;
		t->half = (unsigned char *)t->owned + nb;
		if ((t->transposed && untranspose(t, (void *)t->half, 2) < 0) ||
		    (t->rotary_hd && unrotate(t, (void *)t->half, 2) < 0))
			return nestrt__seterr(err, "%s: out of memory", w->path);
		return 0;
	}
	if (fd < 0) {
		t->half = image + w->data_off + t->begin;
		t->data = NULL;
		return 0;
	}
	unsigned char *d = (unsigned char *)t->data + nb;
	uint64_t off = w->data_off + t->begin;
	for (size_t left = nb; left > 0;) {
		ssize_t got = pread(fd, d, left, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? nestrt__seterr(err, "%s: cannot read: %s", w->path, strerror(errno))
			               : nestrt__seterr(err, "%s: file shrank while it was read", w->path);
		d += got;
		off += (uint64_t)got;
		left -= (size_t)got;
	}
	t->half = (unsigned char *)t->data + nb;
	if ((t->transposed && untranspose(t, (void *)t->half, 2) < 0) ||
	    (t->rotary_hd && unrotate(t, (void *)t->half, 2) < 0))
		return nestrt__seterr(err, "%s: out of memory", w->path);
	return 0;
}

int nestrt__gguf_convert(nestrt_weights *w, int fd, const unsigned char *image, int halves, nestrt_error *err)
{
	size_t np = 0;
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (!t->stored || t->end == t->begin || t->loaded)
			continue;
		if (half16(t)) {
			if (keep_half(w, t, fd, image, err) < 0)
				return -1;
			continue;
		}
		if (halves)
			continue;
		const QType *q = (const QType *)t->stored;
		uint64_t per = PIECE / (uint64_t)q->bytes, nblocks = (t->end - t->begin) / 4 / (uint64_t)q->block;
		np += (size_t)((nblocks + per - 1) / per);
		if (fd < 0 && !w->places) {
			/* mapped or in memory: the f32 values need memory of their own */
			size_t nb = (size_t)(t->end - t->begin);
			t->owned = aligned_alloc(64, (nb + 63) / 64 * 64);
			if (!t->owned)
				return nestrt__seterr(err, "%s: out of memory converting '%s' to f32", w->path, t->name);
			t->data = t->owned;
		}
	}
	for (size_t i = 0; i < w->n; i++)
		if (half16(&w->t[i]))
			w->t[i].loaded = 1;
	if (!np)
		return 0;
	Piece *pc = malloc(np * sizeof *pc);
	if (!pc)
		return nestrt__seterr(err, "%s: out of memory", w->path);
	size_t k = 0;
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (!t->stored || t->end == t->begin || half16(t) || t->loaded)
			continue;
		const QType *q = (const QType *)t->stored;
		uint64_t per = PIECE / (uint64_t)q->bytes, nblocks = (t->end - t->begin) / 4 / (uint64_t)q->block;
		for (uint64_t b = 0; b < nblocks; b += per)
			pc[k++] = (Piece){t, b, nblocks - b < per ? nblocks - b : per};
	}
	Job j = {w, fd, image, pc, 0};
	nestrt_parallel_for((int64_t)k, convert_pieces, &j);
	free(pc);
	for (size_t i = 0; i < w->n && !j.err; i++) {
		Tensor *t = &w->t[i];
		if (t->stored && !half16(t) && !t->loaded && t->end > t->begin &&
		    ((t->transposed && untranspose(t, (void *)t->data, 4) < 0) ||
		     (t->rotary_hd && unrotate(t, (void *)t->data, 4) < 0)))
			j.err = ENOMEM;
	}
	if (j.err)
		return j.err == ENOMEM ? nestrt__seterr(err, "%s: out of memory converting to f32", w->path)
		       : j.err < 0     ? nestrt__seterr(err, "%s: file shrank while it was read", w->path)
		                       : nestrt__seterr(err, "%s: cannot read: %s", w->path, strerror(j.err));
	for (size_t i = 0; i < w->n; i++)
		if (w->t[i].stored)
			w->t[i].loaded = 1;
	return 0;
}

/* A block tensor of the file in GGUF's own type (q8_0, q4_0, q4_K, q6_K),
 * not read yet: its rows r0..r1-1 (each k elements in blocks, as in the
 * file) into dst, from the file or its image. */
int nestrt__gguf_rows(nestrt_weights *w, const Tensor *t, int64_t k, int64_t r0, int64_t r1, void *dst)
{
	const QType *q = (const QType *)t->stored;
	uint64_t rb = (uint64_t)(k / q->block) * (uint64_t)q->bytes;
	const unsigned char *image = w->fd < 0 ? nestrt__gguf_image(w) : NULL;
	/* Hugging Face's rows, one at a time from where llama.cpp's order put
	 * them (or all at once: the same order) */
	int64_t step = t->rotary_hd ? 1 : r1 - r0;
	for (int64_t r = r0; r < r1; r += step) {
		uint64_t at = w->data_off + t->begin + (uint64_t)(t->rotary_hd ? nestrt__rotary_row(r, t->rotary_hd) : r) * rb;
		unsigned char *to = (unsigned char *)dst + (size_t)((uint64_t)(r - r0) * rb);
		if (image) {
			memcpy(to, image + at, (size_t)((uint64_t)step * rb));
			continue;
		}
		int e = nestrt__pread_all(w->fd, to, (size_t)((uint64_t)step * rb), at);
		if (e)
			return e;
	}
	return 0;
}

const unsigned char *nestrt__gguf_image(const nestrt_weights *w)
{
	return w->gguf && !w->gguf->own ? w->gguf->hdr : NULL;
}

uint32_t nestrt__gguf_type(const Tensor *t)
{
	return t->stored && !half16(t) ? ((const QType *)t->stored)->ggml : UINT32_MAX;
}

/* ------------------------------------------------------------ the metadata API */

int nestrt_weights_meta_count(const nestrt_weights *w)
{
	return w && w->gguf ? (int)w->gguf->nkv : 0;
}

const char *nestrt_weights_meta_key(const nestrt_weights *w, int i)
{
	if (!w || !w->gguf || i < 0 || (size_t)i >= w->gguf->nkv)
		return NULL;
	return w->gguf->kv[i].key;
}

int nestrt_weights_meta_type(const nestrt_weights *w, const char *key, int *elem_type, uint64_t *count)
{
	const Meta *m = w && key ? find_meta(w->gguf, key) : NULL;
	if (!m)
		return -1;
	if (elem_type)
		*elem_type = m->elem;
	if (count)
		*count = m->count;
	return m->type;
}

const char *nestrt_meta_type_name(int type)
{
	return type >= 0 && type < 13 ? meta_name[type] : NULL;
}

/* The element's type and bytes (an array's element i, or the value itself). */
static int element(const nestrt_weights *w, const char *key, uint64_t i, int *type, const unsigned char **p,
                   nestrt_error *err)
{
	const char *path = w ? w->path : "(no weights)";
	char shown[NESTRT__SHOWN];
	const char *ks = key ? nestrt__shown(shown, key, strlen(key)) : "(null)";
	const Meta *m = w && key ? find_meta(w->gguf, key) : NULL;
	if (!m)
		return nestrt__seterr(err, "%s: no metadata '%s'", path, ks);
	const unsigned char *v = w->gguf->hdr + m->off;
	if (m->type != 9) {
		if (i != 0)
			return nestrt__seterr(err, "%s: metadata '%s': element %llu of a value of type %s, not an array",
			                      path, ks, (unsigned long long)i, meta_name[m->type]);
		*type = m->type;
		*p = v;
		return 0;
	}
	if (i >= m->count)
		return nestrt__seterr(err, "%s: metadata '%s': element %llu of an array of %llu", path, ks,
		                      (unsigned long long)i, (unsigned long long)m->count);
	*type = m->elem;
	if (m->elem == 8)
		*p = w->gguf->hdr + m->index[i];
	else if (m->elem == 9)
		return nestrt__seterr(err, "%s: metadata '%s' is an array of arrays", path, ks);
	else
		*p = v + i * (uint64_t)meta_size[m->elem];
	return 0;
}

static int wrong(const nestrt_weights *w, const char *key, int type, const char *want, nestrt_error *err)
{
	char shown[NESTRT__SHOWN];
	return nestrt__seterr(err, "%s: metadata '%s' is of type %s, not %s", w->path,
	                      nestrt__shown(shown, key, strlen(key)), meta_name[type], want);
}

int nestrt_weights_meta_int(const nestrt_weights *w, const char *key, uint64_t i, int64_t *v, nestrt_error *err)
{
	int t;
	const unsigned char *p;
	if (element(w, key, i, &t, &p, err) < 0)
		return -1;
	switch (t) {
	case 0: *v = p[0]; return 0;
	case 1: *v = (int8_t)p[0]; return 0;
	case 2: *v = (uint16_t)(p[0] | p[1] << 8); return 0;
	case 3: *v = (int16_t)(uint16_t)(p[0] | p[1] << 8); return 0;
	case 4: *v = le32(p); return 0;
	case 5: *v = (int32_t)le32(p); return 0;
	case 7: *v = p[0] != 0; return 0;
	case 10:
		if (le64(p) > INT64_MAX) {
			char shown[NESTRT__SHOWN];
			return nestrt__seterr(err, "%s: metadata '%s': u64 %llu does not fit in an int64", w->path,
			                      nestrt__shown(shown, key, strlen(key)), (unsigned long long)le64(p));
		}
		*v = (int64_t)le64(p);
		return 0;
	case 11: *v = (int64_t)le64(p); return 0;
	default: return wrong(w, key, t, "an integer", err);
	}
}

int nestrt_weights_meta_float(const nestrt_weights *w, const char *key, uint64_t i, double *v, nestrt_error *err)
{
	int t;
	const unsigned char *p;
	if (element(w, key, i, &t, &p, err) < 0)
		return -1;
	if (t == 6) {
		uint32_t u = le32(p);
		float f;
		memcpy(&f, &u, sizeof f);
		*v = f;
		return 0;
	}
	if (t == 12) {
		uint64_t u = le64(p);
		memcpy(v, &u, sizeof *v);
		return 0;
	}
	if (t == 7 || t == 8 || t == 9)
		return wrong(w, key, t, "a number", err);
	if (t == 10) {
		*v = (double)le64(p);
		return 0;
	}
	int64_t x;
	if (nestrt_weights_meta_int(w, key, i, &x, err) < 0)
		return -1;
	*v = (double)x;
	return 0;
}

int nestrt_weights_meta_string(const nestrt_weights *w, const char *key, uint64_t i, const char **s, size_t *len,
                               nestrt_error *err)
{
	int t;
	const unsigned char *p;
	if (element(w, key, i, &t, &p, err) < 0)
		return -1;
	if (t != 8)
		return wrong(w, key, t, "a string", err);
	*len = (size_t)le64(p);
	*s = (const char *)p + 8;
	return 0;
}

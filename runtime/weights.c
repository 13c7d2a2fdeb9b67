/* weights.c - open, validate and bind a .safetensors file.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON (an object
 * mapping tensor names to {"dtype", "shape", "data_offsets"}, plus an optional
 * "__metadata__" object of strings), then the data section. Offsets are
 * relative to the start of the data section. Every entry is checked before
 * anything points into the data, so a hostile file can make
 * nestrt_weights_open fail but never read out of bounds. The checks follow
 * the reference reader. This is the one safetensors reader: nestc opens
 * weights through it too (src/weights.c adapts it to the compiler's types).
 *
 * A file's tensors go to memory of our own, each at a 64-byte boundary with
 * room for its packed form; they are read when the first instance is
 * created (nestrt__weights_settle), so that a weight the instance reads only
 * packed goes from the file straight into its panels, in its own place
 * (issue #14: held once, copied once). NESTRT_MMAP=1 maps the file instead.
 * An F16 or BF16 tensor binds f16 / bf16 parameters as it is, and f32 ones
 * widened (every such number is a float, exactly): checkpoints saved in half
 * precision bind builds of either. Its 16-bit bytes are read when the file is
 * opened, into the second half of a place of f32 size, and widened in place
 * when an f32 parameter is first bound to it (widen_now); only a tensor bound
 * both ways is held in both forms.
 * A file that starts with "GGUF" is llama.cpp's format: gguf.c validates it
 * and converts its tensors (but F16 and BF16, held as here), and this file lays them out, reads, maps and
 * binds them as a safetensors file's.
 * The packed copies, and the sharing of embedded weights, are wpack.c's. */
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation's limit: a larger header is not a real checkpoint. */
#define MAX_HEADER_LEN 100000000ull

typedef nestrt__stdtype StDType;
typedef nestrt__tensor Tensor;

static const StDType st_dtypes[] = {
	{"F64", "f64", 8, NESTRT_F64},
	{"F32", "f32", 4, NESTRT_F32},
	{"F16", "f16", 2, NESTRT_F16},
	{"BF16", "bf16", 2, NESTRT_BF16},
	{"I64", "i64", 8, NESTRT_I64},
	{"I32", "i32", 4, NESTRT_I32},
	{"I16", "i16", 2, NESTRT_I16},
	{"I8", "i8", 1, NESTRT_I8},
	{"U8", "u8", 1, NESTRT_U8},
	{"U16", "u16", 2, NESTRT_U16},
	{"U32", "u32", 4, -1},
	{"U64", "u64", 8, -1},
	{"BOOL", "bool", 1, NESTRT_BOOL},
	{"F8_E4M3", "f8_e4m3", 1, -1},
	{"F8_E5M2", "f8_e5m2", 1, -1},
};

static const StDType *st_dtype(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
		if (strlen(st_dtypes[i].name) == len && memcmp(st_dtypes[i].name, s, len) == 0)
			return &st_dtypes[i];
	return NULL;
}

const nestrt__stdtype *nestrt__stdtype_of(int dtype)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
		if (st_dtypes[i].dtype == dtype)
			return &st_dtypes[i];
	return NULL;
}

_Alignas(64) const unsigned char nestrt__empty_data[64];


/* ------------------------------------------------------------ the header */

typedef struct Ctx {
	nestrt__json j;
	const char *path;
	nestrt_error *err;
	uint64_t data_len;
} Ctx;

static int json_fail(Ctx *c)
{
	if (strcmp(c->j.err, "out of memory") == 0)
		return nestrt__seterr(c->err, "%s: out of memory reading the header", c->path);
	return nestrt__seterr(c->err, "%s: header is not valid JSON: %s (at byte %zu of the header)",
	                      c->path, c->j.err, c->j.errpos);
}

/* One entry's fields, gathered in any order, judged afterwards in a fixed
 * order so that the reason does not depend on the order of the keys. */
typedef struct Entry {
	int have_dtype, have_shape, have_offsets;
	char dtype_err[200], shape_err[200], offsets_err[200];
	const StDType *st;
	size_t rank;            /* entries in "shape", even beyond the maximum */
	int64_t shape[NESTRT_MAX_RANK];
	int noffsets;
	int64_t off[2];
	char off_text[2][32];
	int off_big[2];
} Entry;

static int read_dtype(Ctx *c, Entry *e)
{
	int ty = nestrt__json_peek(&c->j);
	if (ty < 0)
		return -1;
	if (ty != NJ_STRING) {
		snprintf(e->dtype_err, sizeof e->dtype_err, "\"dtype\" is not a string");
		return nestrt__json_skip(&c->j);
	}
	char *s;
	size_t len;
	if (nestrt__json_string(&c->j, &s, &len) < 0)
		return -1;
	e->st = st_dtype(s, len);
	if (!e->st) {
		char ds[NESTRT__SHOWN];
		snprintf(e->dtype_err, sizeof e->dtype_err, "unknown dtype '%s'", nestrt__shown(ds, s, len));
	}
	free(s);
	return 0;
}

static int read_shape(Ctx *c, Entry *e)
{
	int ty = nestrt__json_peek(&c->j);
	if (ty < 0)
		return -1;
	if (ty != NJ_ARRAY) {
		snprintf(e->shape_err, sizeof e->shape_err, "\"shape\" is not a list");
		return nestrt__json_skip(&c->j);
	}
	char first[200] = "";
	if (nestrt__json_begin(&c->j) < 0)
		return -1;
	int count = 0, r;
	while ((r = nestrt__json_next(&c->j, &count)) == 1) {
		size_t i = (size_t)count - 1;
		ty = nestrt__json_peek(&c->j);
		if (ty < 0)
			return -1;
		if (ty != NJ_NUMBER) {
			if (!first[0])
				snprintf(first, sizeof first, "shape entry %zu is not an integer", i);
			if (nestrt__json_skip(&c->j) < 0)
				return -1;
			continue;
		}
		int64_t v;
		char text[32];
		int kind = nestrt__json_number(&c->j, &v, text, sizeof text);
		if (kind < 0)
			return -1;
		if (first[0])
			continue;
		if (kind == NJ_REAL)
			snprintf(first, sizeof first, "shape entry %zu is not an integer", i);
		else if (v < 0)
			snprintf(first, sizeof first, "negative dimension %s in shape", text);
		else if (kind == NJ_BIGINT)
			snprintf(first, sizeof first, "dimension %s in shape is too large", text);
		else if (i < NESTRT_MAX_RANK)
			e->shape[i] = v;
	}
	if (r < 0)
		return -1;
	e->rank = (size_t)count;
	if (e->rank > NESTRT_MAX_RANK)
		snprintf(e->shape_err, sizeof e->shape_err, "rank %zu exceeds the maximum of %d", e->rank,
		         NESTRT_MAX_RANK);
	else if (first[0])
		snprintf(e->shape_err, sizeof e->shape_err, "%s", first);
	return 0;
}

static int read_offsets(Ctx *c, Entry *e)
{
	static const char not_two[] = "\"data_offsets\" is not a list of two integers";
	int ty = nestrt__json_peek(&c->j);
	if (ty < 0)
		return -1;
	if (ty != NJ_ARRAY) {
		snprintf(e->offsets_err, sizeof e->offsets_err, not_two);
		return nestrt__json_skip(&c->j);
	}
	if (nestrt__json_begin(&c->j) < 0)
		return -1;
	int count = 0, r, bad = 0;
	while ((r = nestrt__json_next(&c->j, &count)) == 1) {
		ty = nestrt__json_peek(&c->j);
		if (ty < 0)
			return -1;
		if (ty != NJ_NUMBER || count > 2) {
			bad = 1;
			if (nestrt__json_skip(&c->j) < 0)
				return -1;
			continue;
		}
		int i = count - 1;
		int kind = nestrt__json_number(&c->j, &e->off[i], e->off_text[i], sizeof e->off_text[i]);
		if (kind < 0)
			return -1;
		if (kind == NJ_REAL)
			bad = 1;
		e->off_big[i] = kind == NJ_BIGINT;
	}
	if (r < 0)
		return -1;
	if (bad || count != 2)
		snprintf(e->offsets_err, sizeof e->offsets_err, not_two);
	return 0;
}

/* Judge a gathered entry; fill t. Returns 0 or -1 with the reason in err. */
static int judge_entry(Ctx *c, const char *name, Entry *e, Tensor *t)
{
	if (!e->have_dtype || !e->have_shape || !e->have_offsets)
		return nestrt__seterr(c->err, "%s: tensor '%s': missing \"%s\"", c->path, name,
		                      !e->have_dtype ? "dtype" : !e->have_shape ? "shape" : "data_offsets");
	if (e->dtype_err[0])
		return nestrt__seterr(c->err, "%s: tensor '%s': %s", c->path, name, e->dtype_err);
	if (e->shape_err[0])
		return nestrt__seterr(c->err, "%s: tensor '%s': %s", c->path, name, e->shape_err);
	t->st = e->st;
	t->rank = (int)e->rank;
	memcpy(t->shape, e->shape, sizeof t->shape);
	/* An overflow anywhere is an error even if a later dimension is 0: the
	 * strides of such a shape do not fit in 64 bits. */
	int64_t numel = 1;
	uint64_t nbytes = 0;
	int overflow = 0, empty = 0;
	for (int i = 0; i < t->rank; i++) {
		empty |= t->shape[i] == 0;
		if (__builtin_mul_overflow(numel, t->shape[i], &numel))
			overflow = 1;
	}
	if (overflow || __builtin_mul_overflow((uint64_t)numel, (uint64_t)e->st->size, &nbytes)) {
		char ty[256];
		nestrt__type_text(ty, sizeof ty, e->st->lower, t->rank, t->shape);
		return nestrt__seterr(c->err, "%s: tensor '%s': shape %s %s", c->path, name, ty,
		                      overflow && empty ? "has no elements, but its strides do not fit in 64 bits"
		                                        : "is too large");
	}
	if (e->offsets_err[0])
		return nestrt__seterr(c->err, "%s: tensor '%s': %s", c->path, name, e->offsets_err);
	const char *bt = e->off_text[0], *et = e->off_text[1];
	if (e->off[0] < 0 || e->off[1] < 0)
		return nestrt__seterr(c->err, "%s: tensor '%s': negative data_offsets [%s, %s]", c->path, name,
		                      bt, et);
	if (e->off[0] > e->off[1])
		return nestrt__seterr(c->err, "%s: tensor '%s': data_offsets [%s, %s] begin after they end",
		                      c->path, name, bt, et);
	if (e->off_big[1] || (uint64_t)e->off[1] > c->data_len)
		return nestrt__seterr(c->err,
		                      "%s: tensor '%s': data_offsets [%s, %s] extend beyond the %llu-byte data section",
		                      c->path, name, bt, et, (unsigned long long)c->data_len);
	if ((uint64_t)(e->off[1] - e->off[0]) != nbytes) {
		char ty[256];
		nestrt__type_text(ty, sizeof ty, e->st->lower, t->rank, t->shape);
		return nestrt__seterr(c->err, "%s: tensor '%s': data_offsets [%s, %s] do not match %s (%llu bytes)",
		                      c->path, name, bt, et, ty, (unsigned long long)nbytes);
	}
	t->begin = (uint64_t)e->off[0];
	t->end = (uint64_t)e->off[1];
	return 0;
}

static int read_entry(Ctx *c, const char *name, Tensor *t)
{
	int ty = nestrt__json_peek(&c->j);
	if (ty < 0)
		return json_fail(c);
	if (ty != NJ_OBJECT)
		return nestrt__seterr(c->err, "%s: tensor '%s': entry is not a JSON object", c->path, name);
	Entry e;
	memset(&e, 0, sizeof e);
	if (nestrt__json_begin(&c->j) < 0)
		return json_fail(c);
	int count = 0, r;
	while ((r = nestrt__json_next(&c->j, &count)) == 1) {
		char *key;
		size_t len;
		if (nestrt__json_key(&c->j, &key, &len) < 0)
			return json_fail(c);
		int rr;
		if (strcmp(key, "dtype") == 0 && len == 5) {
			e.have_dtype = 1;
			rr = read_dtype(c, &e);
		} else if (strcmp(key, "shape") == 0 && len == 5) {
			e.have_shape = 1;
			rr = read_shape(c, &e);
		} else if (strcmp(key, "data_offsets") == 0 && len == 12) {
			e.have_offsets = 1;
			rr = read_offsets(c, &e);
		} else {
			rr = nestrt__json_skip(&c->j); /* other keys: allowed, ignored */
		}
		free(key);
		if (rr < 0)
			return json_fail(c);
	}
	if (r < 0)
		return json_fail(c);
	return judge_entry(c, name, &e, t);
}

static int read_metadata(Ctx *c)
{
	int ty = nestrt__json_peek(&c->j);
	if (ty < 0)
		return json_fail(c);
	if (ty != NJ_OBJECT)
		return nestrt__seterr(c->err, "%s: \"__metadata__\" is not a JSON object", c->path);
	if (nestrt__json_begin(&c->j) < 0)
		return json_fail(c);
	int count = 0, r;
	while ((r = nestrt__json_next(&c->j, &count)) == 1) {
		char *key;
		size_t len;
		if (nestrt__json_key(&c->j, &key, &len) < 0)
			return json_fail(c);
		ty = nestrt__json_peek(&c->j);
		if (ty != NJ_STRING) {
			char ks[NESTRT__SHOWN];
			nestrt__shown(ks, key, len);
			free(key);
			if (ty < 0)
				return json_fail(c);
			return nestrt__seterr(c->err, "%s: \"__metadata__\" value '%s' is not a string", c->path, ks);
		}
		free(key);
		if (nestrt__json_skip(&c->j) < 0)
			return json_fail(c);
	}
	return r < 0 ? json_fail(c) : 0;
}

static void free_tensors(Tensor *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].copy);
		free(t[i].owned);
		free(t[i].narrow);
	}
	free(t);
}

/* ------------------------------------------------------------ half precision */

/* n 16-bit numbers at src (little-endian, any alignment) as floats at dst.
 * dst may begin where src does, or before: element i is read before any
 * element at or after it is written. */
static void widen16(float *dst, const unsigned char *src, size_t n, int bf16)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
		if (bf16) {
			uint32_t u = (uint32_t)h << 16;
			memcpy(&dst[i], &u, sizeof u);
		} else {
			dst[i] = nestrt__f16_to_f32(h);
		}
	}
}

/* After the header: F16 and BF16 entries become F32 ones, twice as long in
 * memory (end - begin is the bytes of their f32 form; begin stays the file's
 * offset), their 16-bit bytes at half (layout_tensors, keep_half). */
static void widen_entries(nestrt_weights *w)
{
	const StDType *f32 = st_dtype("F32", 3);
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (strcmp(t->st->name, "F16") && strcmp(t->st->name, "BF16"))
			continue;
		t->stored = t->st;
		t->st = f32;
		t->end = t->begin + (t->end - t->begin) * 2;
	}
}

/* The 16-bit tensors of a mapped file or an image in memory: their bytes are
 * the file's; an f32 form, when bound, a copy of our own (widen_now). */
static void keep_half(nestrt_weights *w)
{
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (!t->stored || t->end == t->begin)
			continue;
		t->half = t->data;
		t->data = NULL;
		t->loaded = 1;
	}
}

int nestrt__is_half(const Tensor *t)
{
	return t->stored && (t->stored->dtype == NESTRT_F16 || t->stored->dtype == NESTRT_BF16);
}

/* An F16 / BF16 tensor's f32 elements at t->data: widened in place when its
 * 16-bit bytes lie in the second half of its own place and no caller holds
 * them, else into a copy. Under w->mu. */
static int widen_now(nestrt_weights *w, Tensor *t, const char *shown, nestrt_error *err)
{
	size_t nb = (size_t)(t->end - t->begin);
	if (!nestrt__is_half(t) || t->widened || nb == 0)
		return 0;
	int bf16 = t->stored->dtype == NESTRT_BF16;
	if (t->data && t->half == t->data + nb / 2 && !t->half_bound) {
		widen16((float *)t->data, t->half, nb / 4, bf16);
		t->half = NULL;
	} else {
		t->owned = aligned_alloc(64, (nb + 63) / 64 * 64);
		if (!t->owned)
			return nestrt__seterr(err, "%s: %s: out of memory widening %zu bytes to f32", w->path, shown, nb / 2);
		widen16(t->owned, t->half, nb / 4, bf16);
		t->data = t->owned;
	}
	t->widened = 1;
	return 0;
}

int nestrt__weights_widen(nestrt_weights *w, nestrt__tensor *t, nestrt_error *err)
{
	char shown[NESTRT__SHOWN];
	return widen_now(w, t, nestrt__shown(shown, t->name, strlen(t->name)), err);
}

/* The float that came from a binary16 h, as h again (payloads of NaNs kept). */
static uint16_t narrow_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	uint32_t s = u >> 16 & 0x8000u, e = u >> 23 & 0xffu, m = u & 0x7fffffu;
	if (e == 0xff)
		return (uint16_t)(s | 0x7c00u | m >> 13);
	if (e == 0)
		return (uint16_t)s;
	if (e >= 113)
		return (uint16_t)(s | (e - 112) << 10 | m >> 13);
	return (uint16_t)(s | (0x800000u | m) >> (126 - e)); /* a subnormal binary16 */
}

/* The 16-bit bytes an f16 / bf16 param gets, 2-byte aligned: half, or the
 * f32 elements narrowed again (exactly) when half went. Under w->mu; the f32
 * elements (elems) when the caller has them restored. */
const void *nestrt__half_data(nestrt_weights *w, Tensor *t, const void *elems, const char *shown, nestrt_error *err)
{
	size_t n = (size_t)(t->end - t->begin) / 4;
	if (n == 0)
		return nestrt__empty_data;
	if (t->narrow)
		return t->narrow;
	if (t->half && (uintptr_t)t->half % 2 == 0) {
		t->half_bound = 1;
		return t->half;
	}
	t->narrow = aligned_alloc(64, (n * 2 + 63) / 64 * 64);
	if (!t->narrow) {
		nestrt__seterr(err, "%s: %s: out of memory copying %zu bytes", w->path, shown, n * 2);
		return NULL;
	}
	uint16_t *d = t->narrow;
	if (t->half) {
		memcpy(d, t->half, n * 2);
	} else {
		const float *f = elems;
		int bf16 = t->stored->dtype == NESTRT_BF16;
		for (size_t i = 0; i < n; i++) {
			uint32_t u;
			memcpy(&u, &f[i], sizeof u);
			d[i] = bf16 ? (uint16_t)(u >> 16) : narrow_f16(f[i]);
		}
	}
	return t->narrow;
}

/* Parse and validate the header at base + 8; fill w->t, w->n. */
static int parse_header(nestrt_weights *w, const unsigned char *base, uint64_t hlen, uint64_t data_len,
                        nestrt_error *err)
{
	Ctx c = {.path = w->path, .err = err, .data_len = data_len};
	nestrt__json_init(&c.j, base + 8, (size_t)hlen);
	if (nestrt__json_validate(&c.j) < 0) {
		if (c.j.duplicate)
			return nestrt__seterr(err, "%s: header has a %s (at byte %zu of the header)", w->path,
			                      c.j.err, c.j.errpos);
		return json_fail(&c);
	}
	if (nestrt__json_peek(&c.j) != NJ_OBJECT)
		return nestrt__seterr(err, "%s: header is not a JSON object", w->path);
	Tensor *t = NULL;
	nestrt__span *sp = NULL;
	size_t n = 0, cap = 0;
	if (nestrt__json_begin(&c.j) < 0) {
		json_fail(&c);
		goto fail;
	}
	int count = 0, r;
	while ((r = nestrt__json_next(&c.j, &count)) == 1) {
		char *key;
		size_t len;
		if (nestrt__json_key(&c.j, &key, &len) < 0) {
			json_fail(&c);
			goto fail;
		}
		if (strcmp(key, "__metadata__") == 0 && len == 12) {
			/* Free-form strings (framework, format...): checked, not used. */
			free(key);
			if (read_metadata(&c) < 0)
				goto fail;
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			Tensor *nt = realloc(t, nc * sizeof *nt);
			if (!nt) {
				free(key);
				nestrt__seterr(err, "%s: out of memory reading the header", w->path);
				goto fail;
			}
			t = nt;
			cap = nc;
		}
		memset(&t[n], 0, sizeof t[n]);
		t[n].name = key;
		n++;
		char shown[NESTRT__SHOWN];
		nestrt__shown(shown, key, len);
		if (strlen(key) != len) {
			nestrt__seterr(err, "%s: tensor name '%s' contains a NUL character", w->path, shown);
			goto fail;
		}
		if (read_entry(&c, shown, &t[n - 1]) < 0)
			goto fail;
	}
	if (r < 0) {
		json_fail(&c);
		goto fail;
	}

	/* Overlap: sorted by begin, each non-empty tensor must start at or after
	 * the end of every earlier one. Empty tensors occupy no bytes. Gaps are allowed. */
	sp = malloc((n ? n : 1) * sizeof *sp);
	if (!sp) {
		nestrt__seterr(err, "%s: out of memory reading the header", w->path);
		goto fail;
	}
	for (size_t i = 0; i < n; i++)
		sp[i] = (nestrt__span){t[i].begin, t[i].end, i};
	qsort(sp, n, sizeof *sp, nestrt__span_cmp);
	size_t last = SIZE_MAX; /* the span reaching furthest so far */
	for (size_t i = 0; i < n; i++) {
		if (sp[i].begin == sp[i].end)
			continue;
		if (last != SIZE_MAX && sp[i].begin < sp[last].end) {
			char n1[NESTRT__SHOWN], n2[NESTRT__SHOWN];
			const char *a = t[sp[last].idx].name, *b = t[sp[i].idx].name;
			nestrt__seterr(err, "%s: tensor '%s' overlaps tensor '%s'", w->path,
			               nestrt__shown(n1, a, strlen(a)), nestrt__shown(n2, b, strlen(b)));
			goto fail;
		}
		if (last == SIZE_MAX || sp[i].end > sp[last].end)
			last = i;
	}
	free(sp);
	sp = NULL;
	for (size_t i = 0; i < n; i++)
		t[i].data = base + 8 + hlen + t[i].begin;

	/* Sorted by name: a deterministic order whatever the file's, and bsearch in bind.
	 * The JSON pass rejected duplicate keys; this is the belt to its braces. */
	if (n > 1)
		qsort(t, n, sizeof *t, nestrt__tensor_cmp);
	for (size_t i = 1; i < n; i++)
		if (strcmp(t[i].name, t[i - 1].name) == 0) {
			char s[NESTRT__SHOWN];
			nestrt__seterr(err, "%s: duplicate tensor '%s'", w->path,
			               nestrt__shown(s, t[i].name, strlen(t[i].name)));
			goto fail;
		}
	w->t = t;
	w->n = n;
	widen_entries(w);
	return 0;
fail:
	free_tensors(t, n);
	free(sp);
	return -1;
}

/* ------------------------------------------------------------ open, close */

static int load_image(nestrt_weights *w, const void *image, size_t size, const char *path, nestrt_error *err);

static nestrt_weights *new_weights(void)
{
	nestrt_weights *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->refs = 1;
	w->fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	return w;
}

/* With NESTRT_MMAP=1, the file mapped instead of read. NULL with err set. */
static void *map_file(int fd, size_t size, const char *path, nestrt_error *err)
{
	void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		nestrt__seterr(err, "%s: cannot map: %s", path, strerror(errno));
		return NULL;
	}
	return map;
}

#define READ_CHUNK ((size_t)16 << 20)


int nestrt__read_error(nestrt_error *err, const char *path, int e, const char *when)
{
	return e < 0 ? nestrt__seterr(err, "%s: file shrank %s it was read", path, when)
	             : nestrt__seterr(err, "%s: cannot read: %s", path, strerror(e));
}


size_t nestrt__page_size(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	return pg > 0 ? (size_t)pg : 4096;
}

/* The most a packed copy of a rows x cols matrix can take beyond its own
 * bytes, for any panel width compiled code uses (nv * vw of matmul.c: 2 or 3
 * vectors of 2 to 16 elements): room left after each matrix so that it can
 * be packed in place (see nestrt__weights_pack). */
static size_t pack_slack(const Tensor *t)
{
	static const int64_t wides[] = {4, 6, 8, 12, 16, 24, 32, 48};
	if (t->rank != 2 || (t->st->dtype != NESTRT_F32 && t->st->dtype != NESTRT_F64))
		return 0;
	int64_t r = t->shape[0], c = t->shape[1], most = 0;
	for (size_t i = 0; i < sizeof wides / sizeof wides[0]; i++) {
		int64_t w = wides[i];
		int64_t a = r * ((c + w - 1) / w * w) - r * c, b = c * ((r + w - 1) / w * w) - r * c;
		most = a > most ? a : most;
		most = b > most ? b : most;
	}
	return (size_t)most * (size_t)t->st->size;
}

#define HUGE_PAGE ((size_t)2 << 20)
static void *map_huge(size_t *bytes, int whole)
{
	/* From a huge page's boundary, a whole number of them: the parts of a
	 * mapping that are not whole huge pages take 4 KiB pages, and in a
	 * virtual machine each of their faults costs about what a huge page's
	 * does (GPT-2: a thousand of them, 20 ms of the cold start). Only the
	 * pages touched are taken. Not whole: the last part in 4 KiB pages,
	 * for memory filled once to its end (a packed copy), where a last huge
	 * page would hold up to 2 MiB for nothing. */
	size_t len = *bytes, over = 0;
	if (len >= HUGE_PAGE && len <= SIZE_MAX / 2) {
		len = whole ? (len + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : (len + 4095) / 4096 * 4096;
		over = HUGE_PAGE;
	}
	/* MAP_NORESERVE: a file's place is of its f32 size, and the weights a
	 * build holds in a format never touch theirs (a 7B model's 27 GB place
	 * on a 24 GB machine, 3.8 GB of it used); without it Linux's default
	 * heuristic refuses a mapping larger than the memory at once */
	unsigned char *m = mmap(NULL, len + over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (over) {
		size_t head = (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
		if (head)
			munmap(m, head);
		if (over > head)
			munmap(m + head + len, over - head);
		m += head;
	}
#ifdef MADV_HUGEPAGE
	madvise(m, len, MADV_HUGEPAGE); /* a hint */
#endif
	*bytes = len;
	return m;
}

void *nestrt__map_huge(size_t *bytes)
{
	return map_huge(bytes, 1);
}

void *nestrt__map_filled(size_t *bytes)
{
	return map_huge(bytes, 0);
}

/* Reading tensors in parallel: pieces of at most READ_CHUNK bytes. */
typedef struct Piece {
	unsigned char *dst;
	uint64_t off;
	size_t len;
} Piece;
typedef struct PieceJob {
	int fd;
	const Piece *v;
	int err;
} PieceJob;

static void read_pieces(void *env, int64_t begin, int64_t end)
{
	PieceJob *j = env;
	for (int64_t i = begin; i < end; i++) {
		int e = nestrt__pread_all(j->fd, j->v[i].dst, j->v[i].len, j->v[i].off), zero = 0;
		if (e)
			__atomic_compare_exchange_n(&j->err, &zero, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	}
}

/* The header's length from the file's first 8 bytes h8 (size in all), checked. */
static int header_len(const unsigned char *h8, size_t size, const char *path, uint64_t *len, nestrt_error *err)
{
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | h8[i];
	if (hlen == 0)
		return nestrt__seterr(err, "%s: header length is 0", path);
	if (hlen > size - 8)
		return nestrt__seterr(err, "%s: header length %llu exceeds file size %zu", path,
		                      (unsigned long long)hlen, size);
	if (hlen > MAX_HEADER_LEN)
		return nestrt__seterr(err, "%s: header length %llu is larger than the limit of %llu bytes", path,
		                      (unsigned long long)hlen, MAX_HEADER_LEN);
	*len = hlen;
	return 0;
}

/* The header, and a place in memory of our own for every tensor: each at a
 * 64-byte boundary with room after it for its packed copy
 * (pack_slack), so that a weight read only packed can be read (or
 * packed) right into its packed form, without a second copy of it ever being
 * in memory (nor page faults for one). The tensors are read later
 * (nestrt__weights_settle), when the first instance says which it wants
 * packed. */
static int layout_tensors(nestrt_weights *w, int fd, size_t size, const char *path, int gguf, nestrt_error *err)
{
	int e;
	if (gguf) {
		if (nestrt__gguf_parse(w, fd, NULL, size, err) < 0)
			return -1;
	} else {
		unsigned char h8[8];
		e = nestrt__pread_all(fd, h8, 8, 0);
		if (e)
			return nestrt__read_error(err, path, e, "while");
		uint64_t hlen;
		if (header_len(h8, size, path, &hlen, err) < 0)
			return -1;
		unsigned char *hb = malloc((size_t)hlen + 8);
		if (!hb)
			return nestrt__seterr(err, "%s: out of memory reading the header", path);
		memcpy(hb, h8, 8);
		e = nestrt__pread_all(fd, hb + 8, (size_t)hlen, 8);
		if (e) {
			free(hb);
			return nestrt__read_error(err, path, e, "while");
		}
		int rc = parse_header(w, hb, hlen, size - 8 - hlen, err);
		free(hb);
		if (rc < 0)
			return -1;
		w->data_off = 8 + hlen;
	}
	/* where each tensor goes */
	size_t total = 0;
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		size_t nb = (size_t)(t->end - t->begin);
		t->data = NULL;
		if (nb == 0)
			continue;
		size_t room = nb + pack_slack(t);
		if (room < nb || total + room + 63 < total)
			return nestrt__seterr(err, "%s: file is too large to read", path);
		t->room = room;
		total = (total + room + 63) / 64 * 64;
	}
	if (total == 0)
		return 0;
	unsigned char *buf = nestrt__map_huge(&total);
	if (!buf)
		return nestrt__seterr(err, "%s: cannot allocate %zu bytes for the weights: %s", path, total, strerror(errno));
	w->map = buf;
	w->mapsize = total;
	/* GGUF's block tensors last: a build holding them in their format never
	 * touches their places, and the small f32 ones (norms) share huge pages
	 * instead of taking one each between them (a 7B model's 65 norms: 130 MB) */
	size_t at = 0;
	for (int last = 0; last < 2; last++)
		for (size_t i = 0; i < w->n; i++) {
			Tensor *t = &w->t[i];
			int block = gguf && t->stored && t->stored->dtype != NESTRT_F16 && t->stored->dtype != NESTRT_BF16;
			if (t->end == t->begin || block != last)
				continue;
			t->data = buf + at;
			at = (at + t->room + 63) / 64 * 64;
		}
	/* the 16-bit tensors now: their bytes read into the second half of
	 * their place, widened from the front when an f32 param is bound
	 * (widen_now; GGUF's: converted from the file into their place) */
	if (w->gguf && nestrt__gguf_convert(w, fd, NULL, 1, err) < 0)
		return -1;
	for (size_t i = 0; i < w->n && !w->gguf; i++) {
		Tensor *t = &w->t[i];
		size_t nb = (size_t)(t->end - t->begin);
		if (!t->stored || nb == 0)
			continue;
		unsigned char *d = (unsigned char *)t->data;
		e = nestrt__pread_all(fd, d + nb / 2, nb / 2, w->data_off + t->begin);
		if (e)
			return nestrt__read_error(err, path, e, "while");
		t->half = d + nb / 2;
		t->loaded = 1;
	}
	w->fd = fd;
	w->pending = 1;
	return 0;
}

/* Read every tensor not read yet, and close the file: from then on nothing
 * depends on it. */
int nestrt__weights_settle(nestrt_weights *w, nestrt_error *err)
{
	if (!w->pending)
		return 0;
	/* GGUF's block tensors nothing packed from the file: converted now */
	if (w->gguf && nestrt__gguf_convert(w, w->fd, w->fd < 0 ? nestrt__gguf_image(w) : NULL, 0, err) < 0)
		return -1;
	size_t np = 0;
	for (size_t i = 0; i < w->n; i++)
		if (!w->t[i].loaded && w->t[i].end > w->t[i].begin)
			np += (size_t)(w->t[i].end - w->t[i].begin + READ_CHUNK - 1) / READ_CHUNK;
	Piece *pc = malloc((np ? np : 1) * sizeof *pc);
	if (!pc)
		return nestrt__seterr(err, "%s: out of memory", w->path);
	size_t k = 0;
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		size_t nb = (size_t)(t->end - t->begin);
		if (t->loaded || nb == 0)
			continue;
		for (size_t o = 0; o < nb; o += READ_CHUNK)
			pc[k++] = (Piece){(unsigned char *)t->data + o, w->data_off + t->begin + o,
			                  nb - o < READ_CHUNK ? nb - o : READ_CHUNK};
	}
	PieceJob j = {w->fd, pc, 0};
	nestrt_parallel_for((int64_t)k, read_pieces, &j);
	free(pc);
	if (j.err)
		return nestrt__read_error(err, w->path, j.err, "before");
	for (size_t i = 0; i < w->n; i++)
		w->t[i].loaded = 1;
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	w->pending = 0;
	return 0;
}

int nestrt__weights_ready(nestrt_weights *w, nestrt_error *err)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->mu);
	int rc = nestrt__weights_settle(w, err);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

static nestrt_weights *open_weights(const char *path, int header_only, nestrt_error *err);

nestrt_weights *nestrt_weights_open(const char *path, nestrt_error *err)
{
	return open_weights(path, 0, err);
}

nestrt_weights *nestrt__gguf_open_header(const char *path, nestrt_error *err)
{
	return open_weights(path, 1, err);
}

static nestrt_weights *open_weights(const char *path, int header_only, nestrt_error *err)
{
	nestrt_weights *w = new_weights();
	if (!w) {
		nestrt__seterr(err, "%s: out of memory", path ? path : "(no weights)");
		return NULL;
	}
	if (!path) {
		w->path = strdup("(no weights)");
		if (!w->path) {
			nestrt__weights_free(w);
			nestrt__seterr(err, "(no weights): out of memory");
			return NULL;
		}
		return w;
	}
	w->path = strdup(path);
	if (!w->path) {
		nestrt__weights_free(w);
		nestrt__seterr(err, "%s: out of memory", path);
		return NULL;
	}
	/* O_NONBLOCK: a FIFO or device is refused below instead of blocking
	 * the open; it changes nothing for a regular file */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		nestrt__seterr(err, "%s: cannot open: %s", path, strerror(errno));
		goto fail;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		nestrt__seterr(err, "%s: cannot stat: %s", path, strerror(errno));
		close(fd);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		nestrt__seterr(err, "%s: not a regular file", path);
		close(fd);
		goto fail;
	}
	if (st.st_size == 0 && !header_only) {
		/* Empty weights, for a model without params. */
		close(fd);
		return w;
	}
	unsigned char magic[4];
	int gguf = st.st_size >= 4 && nestrt__pread_all(fd, magic, 4, 0) == 0 && nestrt__gguf_magic(magic, 4);
	if (header_only) {
		int rc = gguf ? nestrt__gguf_parse(w, fd, NULL, (size_t)st.st_size, err)
		              : nestrt__seterr(err, "%s: not a GGUF file (it does not start with \"GGUF\")", path);
		close(fd);
		if (rc < 0)
			goto fail;
		return w;
	}
	if (st.st_size < 8 && !gguf) {
		nestrt__seterr(err, "%s: file is too short (%lld bytes) for a safetensors header", path,
		               (long long)st.st_size);
		close(fd);
		goto fail;
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		nestrt__seterr(err, "%s: file is too large to map", path);
		close(fd);
		goto fail;
	}
	size_t size = (size_t)st.st_size;
	const char *mm = getenv("NESTRT_MMAP");
	w->mapped = mm && strcmp(mm, "1") == 0;
	if (!w->mapped) {
		int rc = layout_tensors(w, fd, size, path, gguf, err);
		if (!w->pending)
			close(fd); /* else kept until the tensors are read */
		if (rc < 0)
			goto fail;
		return w;
	}
	void *map = map_file(fd, size, path, err);
	close(fd); /* kept alive by the mapping */
	if (!map)
		goto fail;
	w->map = map;
	w->mapsize = size;
	if (load_image(w, map, size, path, err) < 0)
		goto fail;
	return w;
fail:
	nestrt__weights_free(w);
	return NULL;
}

/* A GGUF image (mapped with NESTRT_MMAP=1, or embedded): its 16-bit tensors
 * kept, and the tensors still to convert (blocks, f32 moved) given places
 * for their f32 values that take no memory until written, left for the
 * first instance as a file read from fd leaves them (pending: converted from
 * the image by nestrt__weights_settle), so that a build holding them in
 * their own format packs them from the image: a 7B q4_0 model mapped stays
 * 3.8 GB, where converting at open took 27. 0, or -1 with err set. */
static int defer_blocks(nestrt_weights *w, const unsigned char *image, nestrt_error *err)
{
	if (nestrt__gguf_convert(w, -1, image, 1, err) < 0)
		return -1;
	size_t total = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < w->n; i++) {
			Tensor *t = &w->t[i];
			size_t nb = (size_t)(t->end - t->begin);
			if (!t->stored || nb == 0 || t->loaded) {
				t->loaded = 1; /* in the image as they are (F32, I32, ...), or kept */
				continue;
			}
			if (pass)
				t->data = (unsigned char *)w->places + total;
			if (total + nb + 63 < total)
				return nestrt__seterr(err, "%s: file is too large to read", w->path);
			total = (total + nb + 63) / 64 * 64;
		}
		if (!total)
			return 0;
		if (!pass) {
			w->places = map_huge(&total, 1);
			if (!w->places)
				return nestrt__seterr(err, "%s: cannot allocate %zu bytes for the weights: %s", w->path, total,
				                      strerror(errno));
			w->placesize = total;
			total = 0;
		}
	}
	w->pending = 1;
	return 0;
}

/* The checks shared by files and embedded images: header length, header, entries. */
static int load_image(nestrt_weights *w, const void *image, size_t size, const char *path, nestrt_error *err)
{
	const unsigned char *base = image;
	if (nestrt__gguf_magic(base, size))
		return nestrt__gguf_parse(w, -1, base, size, err) < 0 ? -1 : defer_blocks(w, base, err);
	if (size < 8)
		return nestrt__seterr(err, "%s: file is too short (%zu bytes) for a safetensors header", path, size);
	uint64_t hlen;
	if (header_len(base, size, path, &hlen, err) < 0)
		return -1;
	if (parse_header(w, base, hlen, size - 8 - hlen, err) < 0)
		return -1;
	keep_half(w);
	return 0;
}

nestrt_weights *nestrt_weights_from_memory(const void *image, size_t size, const char *name, nestrt_error *err)
{
	const char *nm = name ? name : "(embedded weights)";
	nestrt_weights *w = new_weights();
	if (!w || !(w->path = strdup(nm))) {
		if (w)
			nestrt__weights_free(w);
		nestrt__seterr(err, "%s: out of memory", nm);
		return NULL;
	}
	/* the image is not ours: nothing to unmap */
	if (size > 0 && load_image(w, image, size, nm, err) < 0) {
		nestrt__weights_free(w);
		return NULL;
	}
	return w;
}

void nestrt__weights_free(nestrt_weights *w)
{
	pthread_mutex_destroy(&w->mu);
	if (w->fd >= 0)
		close(w->fd);
	free_tensors(w->t, w->n);
	nestrt__gguf_free(w->gguf);
	if (w->map)
		munmap(w->map, w->mapsize);
	if (w->places)
		munmap(w->places, w->placesize);
	free(w->path);
	free(w);
}

/* ------------------------------------------------------------ bind */


/* The aligned pointer compiled code gets for t, or NULL (err set). */
const void *nestrt__tensor_data(nestrt_weights *w, Tensor *t, const char *shown, nestrt_error *err)
{
	size_t nbytes = (size_t)(t->end - t->begin), size = (size_t)t->st->size;
	if (nbytes == 0)
		return nestrt__empty_data;
	if (t->copy)
		return t->copy;
	/* Bool bytes other than 0 and 1 mean true (as in numpy); compiled code may
	 * rely on exactly 0 and 1, so such a tensor is normalized in a copy. */
	int normalize = 0;
	if (t->st->dtype == NESTRT_BOOL)
		for (size_t i = 0; i < nbytes && !normalize; i++)
			normalize = t->data[i] > 1;
	if (!normalize && (uintptr_t)t->data % size == 0)
		return t->data;
	size_t alloc = (nbytes + 63) / 64 * 64;
	t->copy = aligned_alloc(64, alloc);
	if (!t->copy) {
		nestrt__seterr(err, "%s: %s: out of memory copying %zu bytes", w->path, shown, nbytes);
		return NULL;
	}
	memcpy(t->copy, t->data, nbytes);
	if (normalize)
		for (size_t i = 0; i < nbytes; i++)
			((unsigned char *)t->copy)[i] = t->data[i] != 0;
	return t->copy;
}


/* ------------------------------------------------------------ inspection */


int nestrt_weights_count(const nestrt_weights *w)
{
	return w ? (int)w->n : 0;
}

const char *nestrt_weights_path(const nestrt_weights *w)
{
	return w ? w->path : NULL;
}


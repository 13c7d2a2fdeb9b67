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
 * created (settle), so that a weight the instance reads only packed goes
 * from the file straight into its panels, in its own place (issue #14: held
 * once, copied once). NESTRT_MMAP=1 maps the file instead. The packed
 * copies (the panel layout of nestrt_packed, made for pack.c's requests)
 * are kept here, shared by every instance over the weights. */
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* The reference implementation's limit: a larger header is not a real checkpoint. */
#define MAX_HEADER_LEN 100000000ull

typedef struct StDType {
	const char *name;   /* as spelled in the file */
	const char *lower;  /* for messages; nestrt_dtype_name() for ours */
	int size;
	int dtype;          /* NESTRT_*, or -1 when nestc has no such tensors */
} StDType;

static const StDType st_dtypes[] = {
	{"F64", "f64", 8, NESTRT_F64},
	{"F32", "f32", 4, NESTRT_F32},
	{"F16", "f16", 2, -1},
	{"BF16", "bf16", 2, -1},
	{"I64", "i64", 8, NESTRT_I64},
	{"I32", "i32", 4, NESTRT_I32},
	{"I16", "i16", 2, -1},
	{"I8", "i8", 1, -1},
	{"U8", "u8", 1, -1},
	{"U16", "u16", 2, -1},
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

typedef struct Tensor {
	char *name;
	const StDType *st;
	int rank;
	int64_t shape[NESTRT_MAX_RANK];
	uint64_t begin, end;          /* in the data section */
	const unsigned char *data;    /* in the mapping */
	void *copy;                   /* aligned copy, made by bind when data is not */
	int direct;                   /* some instance reads it unpacked (pack.c's plans) */
	int released;                 /* its whole pages were given back: only its packed copies hold it */
	size_t room;                  /* bytes at data that are ours (read from a file): room to pack in place */
	int loaded;                   /* read from the file already (weights.pending) */
	int inplace;                  /* data holds its packed copy; copy, when made, the unpacked form */
} Tensor;

/* A packed copy (pack.c's layout), shared by every instance over the weights. */
typedef struct WPack {
	Tensor *t;
	int64_t k, n, wide;
	int flags;
	void *data;
	size_t bytes;                 /* mapped (pack_alloc) when not 0, else malloc'd */
	int inplace;                  /* in its tensor's own room: not freed on its own */
	struct WPack *next;
} WPack;

struct nestrt_weights {
	char *path;
	void *map;                    /* the file's bytes: read into owned memory, or mapped */
	size_t mapsize;
	int mapped;                   /* NESTRT_MMAP=1: map is the file itself */
	Tensor *t;
	size_t n;
	int refs;                     /* the caller's, and one per instance */
	pthread_mutex_t mu;           /* packs, direct and released, reading */
	WPack *packs;
	int fd;                       /* the file, until its tensors are read (pending), else -1 */
	uint64_t data_off;            /* where its data section starts */
	int pending;                  /* tensors still to read: at the first instance (or bind, or info) */
	void *packmem;                /* embedded matrices packed by nestc, copied into huge pages */
	size_t packmemsize;
	const void *shared;           /* the embedded image these weights are of (the registry's key) */
};

/* A valid pointer for tensors with no elements: aligned for any dtype. */
static _Alignas(64) const unsigned char empty_data[64];

static int tensor_cmp(const void *a, const void *b)
{
	return strcmp(((const Tensor *)a)->name, ((const Tensor *)b)->name);
}

typedef struct Span {
	uint64_t begin, end;
	size_t idx;
} Span;

static int span_cmp(const void *a, const void *b)
{
	const Span *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

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
	}
	free(t);
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
	Span *sp = NULL;
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
		sp[i] = (Span){t[i].begin, t[i].end, i};
	qsort(sp, n, sizeof *sp, span_cmp);
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
		qsort(t, n, sizeof *t, tensor_cmp);
	for (size_t i = 1; i < n; i++)
		if (strcmp(t[i].name, t[i - 1].name) == 0) {
			char s[NESTRT__SHOWN];
			nestrt__seterr(err, "%s: duplicate tensor '%s'", w->path,
			               nestrt__shown(s, t[i].name, strlen(t[i].name)));
			goto fail;
		}
	w->t = t;
	w->n = n;
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

/* pread all of [off, off + len) into dst: 0, an errno, or -1 for a short file. */
static int pread_all(int fd, void *dst, size_t len, uint64_t off)
{
	unsigned char *d = dst;
	while (len > 0) {
		ssize_t r = pread(fd, d, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : -1;
		d += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
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
		int e = pread_all(j->fd, j->v[i].dst, j->v[i].len, j->v[i].off), zero = 0;
		if (e)
			__atomic_compare_exchange_n(&j->err, &zero, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	}
}

/* The header, and a place in memory of our own for every tensor: each at a
 * 64-byte boundary with room after it for its packed copy (pack_slack), so
 * that a weight read only packed can be read (or packed) right into its
 * packed form, without a second copy of it ever being in memory (nor page
 * faults for one). The tensors are read later (settle), when the first
 * instance says which it wants packed. */
static int layout_tensors(nestrt_weights *w, int fd, size_t size, const char *path, nestrt_error *err)
{
	unsigned char h8[8];
	int e = pread_all(fd, h8, 8, 0);
	if (e)
		return e < 0 ? nestrt__seterr(err, "%s: file shrank while it was read", path)
		             : nestrt__seterr(err, "%s: cannot read: %s", path, strerror(e));
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
	unsigned char *hb = malloc((size_t)hlen + 8);
	if (!hb)
		return nestrt__seterr(err, "%s: out of memory reading the header", path);
	memcpy(hb, h8, 8);
	e = pread_all(fd, hb + 8, (size_t)hlen, 8);
	if (e) {
		free(hb);
		return e < 0 ? nestrt__seterr(err, "%s: file shrank while it was read", path)
		             : nestrt__seterr(err, "%s: cannot read: %s", path, strerror(e));
	}
	int rc = parse_header(w, hb, hlen, size - 8 - hlen, err);
	free(hb);
	if (rc < 0)
		return -1;
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
	unsigned char *buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return nestrt__seterr(err, "%s: cannot allocate %zu bytes for the weights: %s", path, total, strerror(errno));
#ifdef MADV_HUGEPAGE
	madvise(buf, total, MADV_HUGEPAGE); /* fewer page faults; a hint */
#endif
	w->map = buf;
	w->mapsize = total;
	size_t at = 0;
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (t->end == t->begin)
			continue;
		t->data = buf + at;
		at = (at + t->room + 63) / 64 * 64;
	}
	w->fd = fd;
	w->data_off = 8 + hlen;
	w->pending = 1;
	return 0;
}

/* Read every tensor not read yet, and close the file: from then on nothing
 * depends on it. Under w->mu. 0, or -1 with err set (and still pending). */
static int settle(nestrt_weights *w, nestrt_error *err)
{
	if (!w->pending)
		return 0;
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
		return j.err < 0 ? nestrt__seterr(err, "%s: file shrank before it was read", w->path)
		                 : nestrt__seterr(err, "%s: cannot read: %s", w->path, strerror(j.err));
	for (size_t i = 0; i < w->n; i++)
		w->t[i].loaded = 1;
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
	int rc = settle(w, err);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

nestrt_weights *nestrt_weights_open(const char *path, nestrt_error *err)
{
	nestrt_weights *w = new_weights();
	if (!w) {
		nestrt__seterr(err, "%s: out of memory", path ? path : "(no weights)");
		return NULL;
	}
	if (!path) {
		w->path = strdup("(no weights)");
		if (!w->path) {
			nestrt_weights_close(w);
			nestrt__seterr(err, "(no weights): out of memory");
			return NULL;
		}
		return w;
	}
	w->path = strdup(path);
	if (!w->path) {
		nestrt_weights_close(w);
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
	if (st.st_size == 0) {
		/* Empty weights, for a model without params. */
		close(fd);
		return w;
	}
	if (st.st_size < 8) {
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
		int rc = layout_tensors(w, fd, size, path, err);
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
	nestrt_weights_close(w);
	return NULL;
}

/* The checks shared by files and embedded images: header length, header, entries. */
static int load_image(nestrt_weights *w, const void *image, size_t size, const char *path, nestrt_error *err)
{
	const unsigned char *base = image;
	if (size < 8)
		return nestrt__seterr(err, "%s: file is too short (%zu bytes) for a safetensors header", path, size);
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | base[i];
	if (hlen == 0)
		return nestrt__seterr(err, "%s: header length is 0", path);
	if (hlen > size - 8)
		return nestrt__seterr(err, "%s: header length %llu exceeds file size %zu", path,
		                      (unsigned long long)hlen, size);
	if (hlen > MAX_HEADER_LEN)
		return nestrt__seterr(err, "%s: header length %llu is larger than the limit of %llu bytes", path,
		                      (unsigned long long)hlen, MAX_HEADER_LEN);
	return parse_header(w, base, hlen, size - 8 - hlen, err) < 0 ? -1 : 0;
}

nestrt_weights *nestrt_weights_from_memory(const void *image, size_t size, const char *name, nestrt_error *err)
{
	const char *nm = name ? name : "(embedded weights)";
	nestrt_weights *w = new_weights();
	if (!w || !(w->path = strdup(nm))) {
		nestrt_weights_close(w);
		nestrt__seterr(err, "%s: out of memory", nm);
		return NULL;
	}
	/* the image is not ours: nothing to unmap */
	if (size > 0 && load_image(w, image, size, nm, err) < 0) {
		nestrt_weights_close(w);
		return NULL;
	}
	return w;
}

static void pack_free(WPack *p);

void nestrt__weights_ref(nestrt_weights *w)
{
	if (w)
		__atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
}

static void registry_drop(nestrt_weights *w, int *last);

void nestrt_weights_close(nestrt_weights *w)
{
	/* the last of the caller and the instances over w frees it */
	if (!w)
		return;
	if (w->shared) {
		int last;
		registry_drop(w, &last);
		if (!last)
			return;
	} else if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) > 0) {
		return;
	}
	if (w->packmem)
		munmap(w->packmem, w->packmemsize);
	for (WPack *p = w->packs, *next; p; p = next) {
		next = p->next;
		pack_free(p);
	}
	pthread_mutex_destroy(&w->mu);
	if (w->fd >= 0)
		close(w->fd);
	free_tensors(w->t, w->n);
	if (w->map)
		munmap(w->map, w->mapsize);
	free(w->path);
	free(w);
}

/* ------------------------------------------------------------ bind */

static Tensor *find(nestrt_weights *w, const char *name)
{
	if (!w->n)
		return NULL;
	Tensor key = {.name = (char *)name};
	return bsearch(&key, w->t, w->n, sizeof *w->t, tensor_cmp);
}

/* The aligned pointer compiled code gets for t, or NULL (err set). */
static const void *tensor_data(nestrt_weights *w, Tensor *t, const char *shown, nestrt_error *err)
{
	size_t nbytes = (size_t)(t->end - t->begin), size = (size_t)t->st->size;
	if (nbytes == 0)
		return empty_data;
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

static int bind(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data, nestrt_error *err);
static int restore(nestrt_weights *w, Tensor *t);
static const void *elements(const Tensor *t);
static Tensor *tensor_at(nestrt_weights *w, const void *p);

/* Params whose tensor holds only a packed copy where its elements were (in
 * place, or packed by nestc): their elements back, in a copy, and data[i]
 * pointing to it. */
int nestrt__weights_unpacked(nestrt_weights *w, const void **data, int nparams, nestrt_error *err)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->mu);
	int rc = settle(w, err);
	for (int i = 0; i < nparams && rc == 0; i++) {
		Tensor *t = data[i] ? tensor_at(w, data[i]) : NULL;
		if (!t || !t->inplace)
			continue;
		if (restore(w, t) < 0)
			rc = nestrt__seterr(err, "%s: out of memory unpacking weights", w->path);
		t->direct = 1;
		data[i] = t->copy;
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int nestrt__weights_bind_keys(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data,
                              nestrt_error *err)
{
	return bind(w, params, nparams, data, err);
}

int nestrt_weights_bind(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data,
                        nestrt_error *err)
{
	if (bind(w, params, nparams, data, err) < 0)
		return -1;
	return nestrt__weights_unpacked(w, data, nparams, err);
}

static int bind(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data, nestrt_error *err)
{
	if (nparams < 0 || (nparams > 0 && (!params || !data)))
		return nestrt__seterr(err, "nestrt_weights_bind: invalid arguments");
	if (nparams == 0)
		return 0;
	if (!w)
		return nestrt__seterr(err, "nestrt_weights_bind: no weights for %d parameters", nparams);
	for (int i = 0; i < nparams; i++)
		data[i] = NULL;
	/* a bool tensor's bytes are looked at (tensor_data): read them now */
	for (int i = 0; i < nparams; i++) {
		Tensor *t = params[i].name ? find(w, params[i].name) : NULL;
		if (t && t->st->dtype == NESTRT_BOOL) {
			if (nestrt__weights_ready(w, err) < 0)
				return -1;
			break;
		}
	}
	for (int i = 0; i < nparams; i++) {
		const nestrt_param *p = &params[i];
		char want[256], shown[NESTRT__SHOWN];
		int valid = p->name && p->dtype >= 0 && p->dtype < NESTRT_NDTYPES && p->rank >= 0 &&
		            p->rank <= NESTRT_MAX_RANK;
		for (int k = 0; valid && k < p->rank; k++)
			valid = p->shape[k] >= 0;
		if (!valid)
			return nestrt__seterr(err, "nestrt_weights_bind: parameter %d ('%s') has an invalid type", i,
			                      p->name ? nestrt__shown(shown, p->name, strlen(p->name)) : "(null)");
		nestrt__shown(shown, p->name, strlen(p->name));
		nestrt__type_text(want, sizeof want, nestrt_dtype_name(p->dtype), p->rank, p->shape);
		Tensor *t = find(w, p->name);
		if (!t)
			return nestrt__seterr(err, "%s: missing parameter '%s' (%s)%s", w->path, shown, want,
			                      w->n ? "" : ": the file has no tensors");
		int same = t->st->dtype == p->dtype && t->rank == p->rank;
		for (int k = 0; same && k < p->rank; k++)
			same = t->shape[k] == p->shape[k];
		if (!same) {
			char have[256];
			nestrt__type_text(have, sizeof have, t->st->lower, t->rank, t->shape);
			return nestrt__seterr(err, "%s: %s: expected %s, file has %s", w->path, shown, want, have);
		}
		if (!(data[i] = tensor_data(w, t, shown, err)))
			return -1;
	}
	return 0;
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

int nestrt_weights_info(const nestrt_weights *w, int i, nestrt_param *info, const char **file_dtype,
                        const void **data, size_t *nbytes)
{
	if (!w || i < 0 || (size_t)i >= w->n)
		return -1;
	const Tensor *t = &w->t[i];
	if (info) {
		memset(info, 0, sizeof *info);
		info->name = t->name;
		info->dtype = t->st->dtype;
		info->rank = t->rank;
		memcpy(info->shape, t->shape, sizeof info->shape);
	}
	if (file_dtype)
		*file_dtype = t->st->name;
	if (data) {
		/* a weight dropped for its packed copies goes back in place, and
		 * stays: the caller reads it */
		nestrt_weights *mw = (nestrt_weights *)w;
		pthread_mutex_lock(&mw->mu);
		int bad = settle(mw, NULL) < 0 || restore(mw, &mw->t[i]) < 0;
		mw->t[i].direct = 1;
		pthread_mutex_unlock(&mw->mu);
		if (bad)
			return -1;
		*data = t->end > t->begin ? elements(t) : (const void *)empty_data;
	}
	if (nbytes)
		*nbytes = (size_t)(t->end - t->begin);
	return 0;
}

/* ------------------------------------------------------------ packed copies */

/* The panel layout (nestrt_packed in nestrt.h); pack.c asks for copies,
 * weights.c makes and keeps them. */
size_t nestrt__pack_bytes(int64_t k, int64_t n, int64_t wide, int flags)
{
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	int64_t panels = (n + wide - 1) / wide;
	if (k <= 0 || n <= 0 || wide <= 0 || (uint64_t)panels > SIZE_MAX / es / (uint64_t)k / (uint64_t)wide / 2)
		return 0;
	size_t bytes = (size_t)panels * (size_t)k * (size_t)wide * es;
	return (bytes + 63) / 64 * 64;
}

/* Bt's rows c0.. (cols of them, k long) as the columns of a panel: blocks
 * of 16 k by every column, so that both the rows read and the panel's rows
 * written stay in L1. */
#define TRANS_PANEL(T)                                                                                         \
	static void trans_panel_##T(T *panel, const T *rows, int64_t k, int64_t wide, int64_t cols)              \
	{                                                                                                      \
		for (int64_t i0 = 0; i0 < k; i0 += 16) {                                                       \
			int64_t i1 = i0 + 16 < k ? i0 + 16 : k;                                                \
			for (int64_t c = 0; c < cols; c++) {                                                   \
				const T *row = rows + c * k;                                                   \
				for (int64_t i = i0; i < i1; i++)                                              \
					panel[i * wide + c] = row[i];                                          \
			}                                                                                      \
		}                                                                                              \
	}
TRANS_PANEL(uint32_t)
TRANS_PANEL(uint64_t)

/* Panels p0..p1-1 of src into dst (laid out for all of them). */
void nestrt__pack_panels(void *dst, const void *src, int64_t k, int64_t n, int64_t wide, int flags, int64_t p0,
                         int64_t p1)
{
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	const char *s = src;
	for (int64_t p = p0; p < p1; p++) {
		char *panel = (char *)dst + (size_t)(p * k * wide) * es;
		int64_t cols = n - p * wide < wide ? n - p * wide : wide;
		if (cols < wide)
			for (int64_t i = 0; i < k; i++)
				memset(panel + (size_t)(i * wide + cols) * es, 0, (size_t)(wide - cols) * es);
		if (flags & NESTRT_PACK_TRANS) {
			/* Bt[n, k]: row c of Bt is column c of the panel (bits copied) */
			const char *rows = s + (size_t)(p * wide * k) * es;
			if (es == 4)
				trans_panel_uint32_t((uint32_t *)panel, (const uint32_t *)rows, k, wide, cols);
			else
				trans_panel_uint64_t((uint64_t *)panel, (const uint64_t *)rows, k, wide, cols);
		} else {
			for (int64_t i = 0; i < k; i++)
				memcpy(panel + (size_t)(i * wide) * es, s + (size_t)(i * n + p * wide) * es, (size_t)cols * es);
		}
	}
}

/* The inverse: the k*n elements of a packed copy back in their own order
 * (weights.c restores a dropped weight from it). */
void nestrt__unpack(void *dst, const void *packed, int64_t k, int64_t n, int64_t wide, int flags)
{
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	const char *src = packed;
	char *d = dst;
	for (int64_t p = 0; p * wide < n; p++) {
		const char *panel = src + (size_t)(p * k * wide) * es;
		int64_t cols = n - p * wide < wide ? n - p * wide : wide;
		if (flags & NESTRT_PACK_TRANS) {
			for (int64_t c = 0; c < cols; c++)
				for (int64_t i = 0; i < k; i++)
					memcpy(d + (size_t)((p * wide + c) * k + i) * es, panel + (size_t)(i * wide + c) * es, es);
		} else {
			for (int64_t i = 0; i < k; i++)
				memcpy(d + (size_t)(i * n + p * wide) * es, panel + (size_t)(i * wide) * es, (size_t)cols * es);
		}
	}
}

/* The tensor whose bound data is p (tensor_data's answer), or NULL. */
static Tensor *tensor_at(nestrt_weights *w, const void *p)
{
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (t->end > t->begin && (t->copy == p || (const void *)t->data == p))
			return t;
	}
	return NULL;
}

static size_t page_size(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	return pg > 0 ? (size_t)pg : 4096;
}

/* A packed copy of all of t, from which it can be restored. */
static WPack *whole_pack(nestrt_weights *w, Tensor *t)
{
	for (WPack *p = w->packs; p; p = p->next)
		if (p->t == t && (uint64_t)(p->k * p->n) * (uint64_t)t->st->size == t->end - t->begin)
			return p;
	return NULL;
}

/* Put a released tensor's elements back in place, from a packed copy (the
 * file is not read again: it may have changed). Under w->mu. */
static int restore(nestrt_weights *w, Tensor *t)
{
	if (!t->released)
		return 0;
	if (w->mapped) {
		t->released = 0;
		return 0; /* the pages come back from the file */
	}
	WPack *p = whole_pack(w, t);
	if (t->inplace) {
		/* its place holds the packed copy: the elements go to a copy */
		size_t nb = (size_t)(t->end - t->begin);
		t->copy = aligned_alloc(64, (nb + 63) / 64 * 64);
		if (!t->copy)
			return -1;
		nestrt__unpack(t->copy, p->data, p->k, p->n, p->wide, p->flags);
	} else {
		nestrt__unpack((void *)t->data, p->data, p->k, p->n, p->wide, p->flags);
	}
	t->released = 0;
	return 0;
}

/* Where t's elements are (once restored). */
static const void *elements(const Tensor *t)
{
	return t->inplace ? (const void *)t->copy : (const void *)t->data;
}

/* Give back the pages that hold only t's bytes. Only for the file's bytes
 * (not an embedded image, not an aligned copy), and only when a packed copy
 * holds all of it. Under w->mu. */
static void release(nestrt_weights *w, Tensor *t)
{
	if (t->released || t->direct || t->copy || !w->map || !whole_pack(w, t))
		return;
	size_t pg = page_size();
	uintptr_t b = ((uintptr_t)t->data + pg - 1) / pg * pg;
	uintptr_t e = ((uintptr_t)t->data + (size_t)(t->end - t->begin)) / pg * pg;
	if (e <= b)
		return;
	if (madvise((void *)b, e - b, MADV_DONTNEED) == 0)
		t->released = 1;
}

/* Memory for a packed copy: large ones mapped on their own and advised
 * into huge pages (a few hundred page faults for GPT-2's 475 MB instead of
 * 120,000), the rest from malloc. */
#define PACK_MAP_MIN ((size_t)1 << 21)
static int pack_alloc(WPack *p, size_t bytes)
{
	if (bytes >= PACK_MAP_MIN) {
		void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -1;
#ifdef MADV_HUGEPAGE
		madvise(m, bytes, MADV_HUGEPAGE);
#endif
		p->data = m;
		p->bytes = bytes;
		return 0;
	}
	p->data = aligned_alloc(64, bytes);
	p->bytes = 0;
	return p->data ? 0 : -1;
}

static void pack_free(WPack *p)
{
	if (p->inplace)
		; /* its tensor's room, freed with the weights */
	else if (p->bytes)
		munmap(p->data, p->bytes);
	else
		free(p->data);
	free(p);
}

/* Packing on the pool, in tasks of about PACK_TASK bytes of the source. A
 * transposed copy reads Bt's rows in order, panel after panel: when the
 * unpacked form goes anyway (release), each task gives back the pages it
 * has read, so that the peak is the weights plus a few tasks' worth, not
 * plus the whole copy (GPT-2's tied embedding is 154 MB). */
#define PACK_TASK ((size_t)1 << 20)
#define NSCRATCH 64
typedef struct PackJob {
	void *dst;
	const void *src;
	int64_t k, n, wide;
	int flags;
	int64_t per;        /* panels per task */
	int give_back;      /* madvise the rows read away */
	int inplace;        /* transposed, dst == src: each task moves its rows aside first */
	size_t scratch_len;
	unsigned char *scratch[NSCRATCH];
	int busy[NSCRATCH];
	int oom;
	int fd;             /* >= 0: the rows come from the file, at foff, not from dst */
	uint64_t foff;
	int err;            /* errno of a failed read, or -1 for a short file */
} PackJob;

/* preadv of all the bytes iov asks for (it is advanced as they come). */
static int preadv_all(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t r = preadv(fd, iov, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : -1;
		off += (uint64_t)r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

static void read_failed(PackJob *j, int e)
{
	int zero = 0;
	__atomic_compare_exchange_n(&j->err, &zero, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* Rows [r0, r1) of a plain matrix read from the file straight into their
 * packed places: row i's slice of panel p is wide elements at
 * (p * k + i) * wide; the kernel copies, nothing else touches the bytes
 * (the room past the last column is fresh memory: zeros). */
#define NIOV 1024
static void scatter_rows(PackJob *j, int64_t r0, int64_t r1)
{
	size_t es = j->flags & NESTRT_PACK_F64 ? 8 : 4;
	int64_t np = (j->n + j->wide - 1) / j->wide;
	struct iovec iov[NIOV];
	int n = 0;
	uint64_t off = j->foff + (uint64_t)(r0 * j->n) * es;
	for (int64_t i = r0; i < r1; i++)
		for (int64_t p = 0; p < np; p++) {
			int64_t cols = j->n - p * j->wide < j->wide ? j->n - p * j->wide : j->wide;
			iov[n].iov_base = (char *)j->dst + (size_t)((p * j->k + i) * j->wide) * es;
			iov[n].iov_len = (size_t)cols * es;
			if (++n == NIOV || (i == r1 - 1 && p == np - 1)) {
				size_t len = 0;
				for (int q = 0; q < n; q++)
					len += iov[q].iov_len;
				int e = preadv_all(j->fd, iov, n, off);
				if (e) {
					read_failed(j, e);
					return;
				}
				off += len;
				n = 0;
			}
		}
}

/* A task's transposed panels p0..p1-1 where their rows were: a panel takes
 * exactly the bytes of the wide rows it is made of (the last one, short of
 * rows, runs into the room after the tensor), so tasks never meet. */
/* A scratch buffer of the job's for this task (busy until it is given
 * back), or -1 out of memory (noted in the job). */
static int claim_scratch(PackJob *j)
{
	int s = 0;
	for (;; s = (s + 1) % NSCRATCH) {
		int zero = 0;
		if (__atomic_compare_exchange_n(&j->busy[s], &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
	}
	if (!j->scratch[s])
		j->scratch[s] = malloc(j->scratch_len);
	if (!j->scratch[s]) {
		__atomic_store_n(&j->oom, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&j->busy[s], 0, __ATOMIC_RELEASE);
		return -1;
	}
	return s;
}

static void pack_in_place(PackJob *j, int64_t p0, int64_t p1)
{
	int s = claim_scratch(j);
	if (s < 0)
		return;
	{
		size_t es = j->flags & NESTRT_PACK_F64 ? 8 : 4;
		int64_t r0 = p0 * j->wide, r1 = p1 * j->wide < j->n ? p1 * j->wide : j->n;
		char *at = (char *)j->dst + (size_t)(r0 * j->k) * es;
		size_t len = (size_t)((r1 - r0) * j->k) * es;
		int e = 0;
		if (j->fd >= 0)
			e = pread_all(j->fd, j->scratch[s], len, j->foff + (uint64_t)(r0 * j->k) * es);
		else
			memcpy(j->scratch[s], at, len);
		if (e)
			read_failed(j, e);
		else
			nestrt__pack_panels(at, j->scratch[s], j->k, j->n - r0, j->wide, j->flags, 0, p1 - p0);
	}
	__atomic_store_n(&j->busy[s], 0, __ATOMIC_RELEASE);
}

static void pack_task(void *env, int64_t begin, int64_t end)
{
	PackJob *j = env;
	int64_t np = (j->n + j->wide - 1) / j->wide;
	for (int64_t t = begin; t < end; t++) {
		int64_t p0 = t * j->per, p1 = p0 + j->per < np ? p0 + j->per : np;
		if (j->inplace && !(j->flags & NESTRT_PACK_TRANS)) {
			/* from the file: tasks of rows (per rows each) */
			int64_t r0 = t * j->per, r1 = r0 + j->per < j->k ? r0 + j->per : j->k;
			scatter_rows(j, r0, r1);
			continue;
		}
		if (j->inplace) {
			pack_in_place(j, p0, p1);
			continue;
		}
		nestrt__pack_panels(j->dst, j->src, j->k, j->n, j->wide, j->flags, p0, p1);
		if (j->give_back) {
			size_t es = j->flags & NESTRT_PACK_F64 ? 8 : 4, pg = page_size();
			int64_t r1 = p1 * j->wide < j->n ? p1 * j->wide : j->n;
			uintptr_t a = (uintptr_t)j->src + (size_t)(p0 * j->wide * j->k) * es;
			uintptr_t e = (uintptr_t)j->src + (size_t)(r1 * j->k) * es;
			a = (a + pg - 1) / pg * pg;
			e = e / pg * pg;
			if (e > a)
				madvise((void *)a, e - a, MADV_DONTNEED);
		}
	}
}

/* memcpy on the pool, in pieces of PACK_TASK bytes. */
typedef struct CopyJob {
	unsigned char *dst;
	const unsigned char *src;
	size_t len;
} CopyJob;

static void copy_task(void *env, int64_t begin, int64_t end)
{
	CopyJob *j = env;
	for (int64_t t = begin; t < end; t++) {
		size_t off = (size_t)t * PACK_TASK;
		memcpy(j->dst + off, j->src + off, j->len - off < PACK_TASK ? j->len - off : PACK_TASK);
	}
}

static void copy_parallel(void *dst, const void *src, size_t len)
{
	CopyJob j = {dst, src, len};
	nestrt_parallel_for((int64_t)((len + PACK_TASK - 1) / PACK_TASK), copy_task, &j);
}

/* Is req[i] the only request for t, of all of it, with room to pack it
 * where it is (read from a file, read by no instance as it is)? */
static int can_pack_in_place(nestrt_weights *w, Tensor *t, const void **data, nestrt__packreq *req, int nreq, int i,
                             size_t bytes)
{
	nestrt__packreq *q = &req[i];
	size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
	if (!t || t->direct || t->copy || t->inplace || t->released || w->mapped || bytes > t->room ||
	    (uint64_t)(q->k * q->n) * es != t->end - t->begin)
		return 0;
	for (int r = 0; r < nreq; r++)
		if (r != i && tensor_at(w, data[req[r].param]) == t)
			return 0;
	return 1;
}

static void scratch_free(PackJob *j)
{
	for (int s = 0; s < NSCRATCH; s++)
		free(j->scratch[s]);
}

/* req[i] straight from the file into its tensor's place, packed, when it
 * may be packed in place and is not read yet: a plain matrix row by row
 * into the panels (preadv), a transposed one a task's rows at a time into
 * scratch and from there into its panels. 0 (also when it does not apply),
 * or -1 with err set. Under w->mu. */
static int pack_from_file(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq, int i, nestrt_error *err)
{
	nestrt__packreq *q = &req[i];
	Tensor *t = tensor_at(w, data[q->param]);
	size_t bytes = nestrt__pack_bytes(q->k, q->n, q->wide, q->flags);
	if (!t || t->loaded || !bytes || !can_pack_in_place(w, t, data, req, nreq, i, bytes))
		return 0;
	size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
	WPack *p = calloc(1, sizeof *p);
	PackJob *j = calloc(1, sizeof *j);
	if (!p || !j) {
		free(p);
		free(j);
		return nestrt__seterr(err, "%s: out of memory packing weights", w->path);
	}
	*j = (PackJob){.dst = (void *)t->data, .k = q->k, .n = q->n, .wide = q->wide, .flags = q->flags, .inplace = 1,
	               .fd = w->fd, .foff = w->data_off + t->begin};
	int64_t ntasks;
	if (q->flags & NESTRT_PACK_TRANS) {
		int64_t per = (int64_t)(PACK_TASK / ((size_t)(q->k * q->wide) * es));
		j->per = per < 1 ? 1 : per;
		j->scratch_len = (size_t)(j->per * q->k * q->wide) * es;
		ntasks = ((q->n + q->wide - 1) / q->wide + j->per - 1) / j->per;
	} else {
		int64_t per = (int64_t)(PACK_TASK / ((size_t)q->n * es));
		j->per = per < 1 ? 1 : per;
		ntasks = (q->k + j->per - 1) / j->per;
	}
	nestrt_parallel_for(ntasks, pack_task, j);
	int oom = j->oom, e = j->err;
	scratch_free(j);
	free(j);
	if (oom || e) {
		free(p);
		if (oom)
			return nestrt__seterr(err, "%s: out of memory packing weights", w->path);
		return e < 0 ? nestrt__seterr(err, "%s: file shrank before it was read", w->path)
		             : nestrt__seterr(err, "%s: cannot read: %s", w->path, strerror(e));
	}
	*p = (WPack){t, q->k, q->n, q->wide, q->flags, (void *)t->data, 0, 1, w->packs};
	w->packs = p;
	t->loaded = 1;
	t->inplace = 1;
	t->released = 1;
	return 0;
}

int nestrt__weights_pack(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq,
                         const unsigned char *direct, int nparams, nestrt_error *err)
{
	int rc = 0;
	void *whole = NULL;    /* a plain matrix packed in place: its elements, set aside */
	size_t whole_len = 0;
	pthread_mutex_lock(&w->mu);
	/* weights read unpacked: back in place first, and never dropped */
	for (int i = 0; i < nparams && rc == 0; i++) {
		Tensor *t = direct[i] ? tensor_at(w, data[i]) : NULL;
		if (!t)
			continue;
		if (restore(w, t) < 0)
			rc = nestrt__seterr(err, "%s: out of memory unpacking weights", w->path);
		t->direct = 1;
		data[i] = t->copy ? t->copy : t->data; /* as a new bind would give it */
	}
	/* not read yet: a weight packed where it goes is read from the file
	 * right into its packed form, then the rest is read */
	for (int i = 0; i < nreq && rc == 0 && w->pending; i++)
		rc = pack_from_file(w, data, req, nreq, i, err);
	if (rc == 0)
		rc = settle(w, err);
	for (int i = 0; i < nreq && rc == 0; i++) {
		nestrt__packreq *q = &req[i];
		Tensor *t = tensor_at(w, data[q->param]);
		WPack *p = NULL;
		for (WPack *x = w->packs; x && t && !p; x = x->next)
			if (x->t == t && x->k == q->k && x->n == q->n && x->wide == q->wide && x->flags == q->flags)
				p = x;
		if (!p) {
			size_t bytes = nestrt__pack_bytes(q->k, q->n, q->wide, q->flags);
			size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
			int64_t np = (q->n + q->wide - 1) / q->wide;
			int64_t per = (int64_t)(PACK_TASK / ((size_t)(q->k * q->wide) * es));
			per = per < 1 ? 1 : per;
			int inplace = bytes && can_pack_in_place(w, t, data, req, nreq, i, bytes);
			p = calloc(1, sizeof *p);
			if (!p || !bytes || (!inplace && pack_alloc(p, bytes) < 0)) {
				free(p);
				rc = nestrt__seterr(err, "%s: out of memory packing weights (%zu bytes)", w->path, bytes);
				break;
			}
			if (t && restore(w, t) < 0) {
				free(p);
				rc = nestrt__seterr(err, "%s: out of memory unpacking weights", w->path);
				break;
			}
			const void *src = t ? elements(t) : data[q->param];
			PackJob *j = calloc(1, sizeof *j);
			if (!j) {
				pack_free(p);
				rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
				break;
			}
			*j = (PackJob){.dst = p->data, .src = src, .k = q->k, .n = q->n, .wide = q->wide, .flags = q->flags,
			               .per = per, .fd = -1};
			if (inplace && (q->flags & NESTRT_PACK_TRANS)) {
				/* panel by panel, each task's rows set aside first */
				j->dst = (void *)t->data;
				j->inplace = 1;
				j->scratch_len = (size_t)(per * q->k * q->wide) * es;
			} else if (inplace) {
				/* all of it set aside, then packed from there */
				size_t nb = (size_t)(t->end - t->begin);
				if (nb > whole_len) {
					free(whole);
					whole_len = 0;
					if (!(whole = malloc(nb))) {
						free(j);
						free(p);
						rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
						break;
					}
					whole_len = nb;
				}
				copy_parallel(whole, t->data, nb);
				j->src = whole;
				j->dst = (void *)t->data;
			} else if (t && (q->flags & NESTRT_PACK_TRANS) && !t->direct && !t->copy && w->map &&
			           (uint64_t)(q->k * q->n) * es == t->end - t->begin) {
				/* the rows read can go as they are read when nothing else
				 * will want them */
				j->give_back = 1;
				for (int r = 0; r < nreq; r++)
					j->give_back &= r <= i || tensor_at(w, data[req[r].param]) != t;
			}
			nestrt_parallel_for((np + per - 1) / per, pack_task, j);
			int oom = j->oom, give_back = j->give_back;
			scratch_free(j);
			free(j);
			if (oom) {
				/* in place, a task without scratch left its rows as they were:
				 * the tensor is in neither form (cannot happen but for malloc) */
				free(p);
				rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
				break;
			}
			if (inplace) {
				p->data = (void *)t->data;
				p->inplace = 1;
				t->inplace = 1;
				t->released = 1; /* its elements are only in the packed copy */
			}
			p->t = t;
			p->k = q->k;
			p->n = q->n;
			p->wide = q->wide;
			p->flags = q->flags;
			p->next = w->packs;
			w->packs = p;
			/* drop what only the packed copies need at once, so that the
			 * peak is the weights plus one copy, not plus all of them */
			if (t && !inplace) {
				release(w, t);
				if (give_back)
					t->released = 1; /* its rows are gone whatever release() did */
			}
		}
		q->data = p->data;
	}
	pthread_mutex_unlock(&w->mu);
	free(whole);
	return rc;
}

/* ------------------------------------------------------------ packed by nestc */

/* The program's packed matrices copied into anonymous memory advised into
 * huge pages: read where they are linked, from the program's file-backed
 * 4 KiB pages, the products took 2 to 4 times as long on the machine of
 * issue #14 (a virtual machine, where every TLB miss walks two page
 * tables). Pieces of 2 MiB on the pool; each gives the program's pages it
 * has copied back (they stay in the page cache), so that the peak RSS is
 * the weights once. t->data moves to the copy. */
#define COPY_PIECE ((size_t)2 << 20)
typedef struct CopyPiece {
	unsigned char *dst;
	const unsigned char *src;
	size_t len;
} CopyPiece;
typedef struct CopyPieces {
	const CopyPiece *v;
	size_t pg;
} CopyPieces;

static void copy_pieces(void *env, int64_t begin, int64_t end)
{
	CopyPieces *j = env;
	for (int64_t i = begin; i < end; i++) {
		const CopyPiece *c = &j->v[i];
#ifdef MADV_POPULATE_READ
		/* the program's pages mapped in one call, not a fault every 64 KiB
		 * (a hint: older kernels say EINVAL) */
		uintptr_t pa = (uintptr_t)c->src / j->pg * j->pg, pe = ((uintptr_t)c->src + c->len + j->pg - 1) / j->pg * j->pg;
		madvise((void *)pa, pe - pa, MADV_POPULATE_READ);
#endif
		memcpy(c->dst, c->src, c->len);
		uintptr_t a = ((uintptr_t)c->src + j->pg - 1) / j->pg * j->pg, e = ((uintptr_t)c->src + c->len) / j->pg * j->pg;
		if (e > a)
			madvise((void *)a, e - a, MADV_DONTNEED);
	}
}

static size_t packed_len(const nestrt_prepacked *q)
{
	size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
	return (size_t)((q->n + q->wide - 1) / q->wide * q->wide * q->k) * es;
}

static int copy_packed(nestrt_weights *w, const nestrt_prepacked *packs, int npacks)
{
	size_t total = 0, npieces = 0;
	for (int i = 0; i < npacks; i++) {
		total += (packed_len(&packs[i]) + 63) / 64 * 64;
		npieces += (packed_len(&packs[i]) + COPY_PIECE - 1) / COPY_PIECE;
	}
	if (total == 0)
		return 0;
	unsigned char *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CopyPiece *pc = m == MAP_FAILED ? NULL : malloc(npieces * sizeof *pc);
	if (!pc) {
		if (m != MAP_FAILED)
			munmap(m, total);
		return -1;
	}
#ifdef MADV_HUGEPAGE
	madvise(m, total, MADV_HUGEPAGE);
#endif
	w->packmem = m;
	w->packmemsize = total;
	size_t at = 0, k = 0;
	for (int i = 0; i < npacks; i++) {
		size_t len = packed_len(&packs[i]);
		Tensor *t = find(w, packs[i].name);
		for (size_t o = 0; o < len; o += COPY_PIECE)
			pc[k++] = (CopyPiece){m + at + o, (const unsigned char *)packs[i].data + o, len - o < COPY_PIECE ? len - o : COPY_PIECE};
		t->data = m + at;
		at += (len + 63) / 64 * 64;
	}
	CopyPieces j = {pc, page_size()};
	nestrt_parallel_for((int64_t)k, copy_pieces, &j);
	free(pc);
	return 0;
}

int nestrt__weights_add_packed(nestrt_weights *w, const nestrt_param *params, int nparams,
                               const nestrt_prepacked *packs, int npacks, nestrt_error *err)
{
	if (npacks <= 0)
		return 0;
	if (!packs || w->packs)
		return nestrt__seterr(err, "%s: invalid packed weights", w->path);
	Tensor *nt = realloc(w->t, (w->n + (size_t)npacks) * sizeof *nt);
	if (!nt)
		return nestrt__seterr(err, "%s: out of memory", w->path);
	w->t = nt;
	for (int i = 0; i < npacks; i++) {
		const nestrt_prepacked *pk = &packs[i];
		const nestrt_param *p = NULL;
		for (int j = 0; j < nparams && !p; j++)
			if (pk->name && params[j].name && strcmp(params[j].name, pk->name) == 0)
				p = &params[j];
		const StDType *st = NULL;
		for (size_t j = 0; p && j < sizeof st_dtypes / sizeof st_dtypes[0] && !st; j++)
			if (st_dtypes[j].dtype == p->dtype)
				st = &st_dtypes[j];
		int64_t numel = 1;
		for (int k = 0; p && k < p->rank; k++)
			numel *= p->shape[k];
		if (!p || !st || !pk->data || pk->k <= 0 || pk->n <= 0 || pk->wide <= 0 || pk->k * pk->n != numel ||
		    (size_t)st->size != (pk->flags & NESTRT_PACK_F64 ? 8u : 4u) || find(w, pk->name))
			return nestrt__seterr(err, "%s: packed weight %d ('%s') does not fit the model", w->path, i,
			                      pk->name ? pk->name : "(null)");
		Tensor *t = &w->t[w->n];
		memset(t, 0, sizeof *t);
		if (!(t->name = strdup(pk->name)))
			return nestrt__seterr(err, "%s: out of memory", w->path);
		w->n++;
		t->st = st;
		t->rank = p->rank;
		memcpy(t->shape, p->shape, sizeof t->shape);
		t->begin = 0;
		t->end = (uint64_t)numel * (uint64_t)st->size;
		t->data = pk->data;
		t->inplace = 1;
		t->released = 1;
	}
	qsort(w->t, w->n, sizeof *w->t, tensor_cmp);
	if (copy_packed(w, packs, npacks) < 0)
		return nestrt__seterr(err, "%s: out of memory", w->path);
	for (int i = 0; i < npacks; i++) {
		Tensor *t = find(w, packs[i].name);
		WPack *p = calloc(1, sizeof *p);
		if (!p)
			return nestrt__seterr(err, "%s: out of memory", w->path);
		*p = (WPack){t, packs[i].k, packs[i].n, packs[i].wide, packs[i].flags, (void *)t->data, 0, 1, w->packs};
		w->packs = p;
	}
	return 0;
}

/* ------------------------------------------------------------ embedded, shared */

/* The weights of each embedded image in use, so that every instance of a
 * program's model shares them (and their packed copies): at most
 * NREGISTRY images at once; beyond, each instance gets weights of its own. */
#define NREGISTRY 16
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	const void *image;
	nestrt_weights *w;
} registry[NREGISTRY];

static void registry_drop(nestrt_weights *w, int *last)
{
	pthread_mutex_lock(&registry_mu);
	*last = __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) == 0;
	for (int i = 0; *last && i < NREGISTRY; i++)
		if (registry[i].w == w)
			registry[i].w = NULL, registry[i].image = NULL;
	pthread_mutex_unlock(&registry_mu);
}

nestrt_weights *nestrt__weights_embedded(const void *image, size_t size, const char *name, const nestrt_param *params,
                                         int nparams, const nestrt_prepacked *packs, int npacks, nestrt_error *err)
{
	pthread_mutex_lock(&registry_mu);
	for (int i = 0; i < NREGISTRY; i++)
		if (registry[i].w && registry[i].image == image) {
			nestrt_weights *w = registry[i].w;
			__atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&registry_mu);
			return w;
		}
	pthread_mutex_unlock(&registry_mu);
	nestrt_weights *w = nestrt_weights_from_memory(image, size, name, err);
	if (!w)
		return NULL;
	if (nestrt__weights_add_packed(w, params, nparams, packs, npacks, err) < 0) {
		nestrt_weights_close(w);
		return NULL;
	}
	pthread_mutex_lock(&registry_mu);
	int free_slot = -1;
	for (int i = 0; i < NREGISTRY; i++) {
		if (registry[i].w && registry[i].image == image) {
			/* made meanwhile by another thread: that one */
			nestrt_weights *other = registry[i].w;
			__atomic_add_fetch(&other->refs, 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&registry_mu);
			nestrt_weights_close(w);
			return other;
		}
		if (!registry[i].w && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		registry[free_slot].image = image;
		registry[free_slot].w = w;
		w->shared = image;
	}
	pthread_mutex_unlock(&registry_mu);
	return w;
}

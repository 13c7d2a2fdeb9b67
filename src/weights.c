/* weights.c - open and validate a .safetensors file.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON (an object
 * mapping tensor names to {dtype, shape, data_offsets}, plus an optional
 * "__metadata__" object of strings), then the data section. Offsets are relative
 * to the start of the data section. The whole file is mapped read-only and every
 * entry is checked before anything points into the map, so a hostile file can
 * make weights_open fail but never read out of bounds. */
#include "nestc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation's limit: a larger header is not a real checkpoint. */
#define MAX_HEADER_LEN 100000000ull

typedef struct StDType {
	const char *name;   /* as spelled in the file */
	const char *lower;  /* for messages, matching dtype_name() for ours */
	int size;
	int dtype;          /* DType, or -1 when nestc has no such tensors */
} StDType;

static const StDType st_dtypes[] = {
	{"F64", "f64", 8, DT_F64},
	{"F32", "f32", 4, DT_F32},
	{"F16", "f16", 2, -1},
	{"BF16", "bf16", 2, -1},
	{"I64", "i64", 8, DT_I64},
	{"I32", "i32", 4, DT_I32},
	{"I16", "i16", 2, -1},
	{"I8", "i8", 1, -1},
	{"U8", "u8", 1, -1},
	{"U16", "u16", 2, -1},
	{"U32", "u32", 4, -1},
	{"U64", "u64", 8, -1},
	{"BOOL", "bool", 1, DT_BOOL},
	{"F8_E4M3", "f8_e4m3", 1, -1},
	{"F8_E5M2", "f8_e5m2", 1, -1},
};

static const StDType *st_dtype(const char *s)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
		if (strcmp(st_dtypes[i].name, s) == 0)
			return &st_dtypes[i];
	return NULL;
}

/* A name from the file as it may appear in a message: control characters
 * become '?' and a very long name is cut (at a UTF-8 boundary) with "...". */
#define SHOWN 160
static const char *shown(char *buf, const char *s)
{
	size_t n = 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (n >= SHOWN - 8 && (c & 0xc0) != 0x80) {
			memcpy(buf + n, "...", 4);
			return buf;
		}
		buf[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	buf[n] = 0;
	return buf;
}

/* Per-tensor facts kept only while validating. */
typedef struct Span {
	uint64_t begin, end;
	int idx;
} Span;

static int span_cmp(const void *a, const void *b)
{
	const Span *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->idx - y->idx;
}

static int wtensor_cmp(const void *a, const void *b)
{
	return strcmp(((const WTensor *)a)->name, ((const WTensor *)b)->name);
}

/* "f32[4, 8]" into buf. */
static void type_text(char *buf, size_t len, const StDType *d, int rank, const int64_t *shape)
{
	size_t k = (size_t)snprintf(buf, len, "%s[", d->lower);
	for (int i = 0; i < rank && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (k < len)
		snprintf(buf + k, len - k, "]");
}

/* Validate one entry of the header; fill t (name already set). data_len is the
 * size of the data section. Returns 0, or -1 with the reason in err. */
static int parse_entry(const char *rawname, json_t *v, WTensor *t, Span *sp, uint64_t data_len,
                       char *err, size_t errlen)
{
	char name[SHOWN];
	shown(name, rawname);
	if (!json_is_object(v)) {
		snprintf(err, errlen, "tensor '%s': entry is not a JSON object", name);
		return -1;
	}
	json_t *jd = json_object_get(v, "dtype");
	json_t *js = json_object_get(v, "shape");
	json_t *jo = json_object_get(v, "data_offsets");
	if (!jd || !js || !jo) {
		snprintf(err, errlen, "tensor '%s': missing \"%s\"", name,
		         !jd ? "dtype" : !js ? "shape" : "data_offsets");
		return -1;
	}
	if (!json_is_string(jd)) {
		snprintf(err, errlen, "tensor '%s': \"dtype\" is not a string", name);
		return -1;
	}
	const StDType *d = st_dtype(json_string_value(jd));
	if (!d) {
		char ds[SHOWN];
		snprintf(err, errlen, "tensor '%s': unknown dtype '%s'", name,
		         shown(ds, json_string_value(jd)));
		return -1;
	}
	t->dtype_str = d->name;
	t->dtype = d->dtype;

	if (!json_is_array(js)) {
		snprintf(err, errlen, "tensor '%s': \"shape\" is not a list", name);
		return -1;
	}
	size_t rank = json_array_size(js);
	if (rank > MAX_RANK) {
		snprintf(err, errlen, "tensor '%s': rank %zu exceeds the maximum of %d", name, rank, MAX_RANK);
		return -1;
	}
	t->rank = (int)rank;
	int64_t numel = 1;
	int overflow = 0;
	for (size_t i = 0; i < rank; i++) {
		json_t *e = json_array_get(js, i);
		if (!json_is_integer(e)) {
			snprintf(err, errlen, "tensor '%s': shape entry %zu is not an integer", name, i);
			return -1;
		}
		json_int_t n = json_integer_value(e);
		if (n < 0) {
			snprintf(err, errlen, "tensor '%s': negative dimension %lld in shape", name, (long long)n);
			return -1;
		}
		t->shape[i] = (int64_t)n;
		/* Keep scanning after an overflow: a later negative dim is the clearer error. */
		if (!overflow && __builtin_mul_overflow(numel, (int64_t)n, &numel))
			overflow = 1;
	}
	uint64_t nbytes = 0;
	if (overflow || __builtin_mul_overflow((uint64_t)numel, (uint64_t)d->size, &nbytes)) {
		char ty[256];
		type_text(ty, sizeof ty, d, t->rank, t->shape);
		snprintf(err, errlen, "tensor '%s': shape %s is too large", name, ty);
		return -1;
	}

	if (!json_is_array(jo) || json_array_size(jo) != 2 ||
	    !json_is_integer(json_array_get(jo, 0)) || !json_is_integer(json_array_get(jo, 1))) {
		snprintf(err, errlen, "tensor '%s': \"data_offsets\" is not a list of two integers", name);
		return -1;
	}
	json_int_t b = json_integer_value(json_array_get(jo, 0));
	json_int_t e = json_integer_value(json_array_get(jo, 1));
	if (b < 0 || e < 0) {
		snprintf(err, errlen, "tensor '%s': negative data_offsets [%lld, %lld]", name,
		         (long long)b, (long long)e);
		return -1;
	}
	if (b > e) {
		snprintf(err, errlen, "tensor '%s': data_offsets [%lld, %lld] begin after they end", name,
		         (long long)b, (long long)e);
		return -1;
	}
	if ((uint64_t)e > data_len) {
		snprintf(err, errlen,
		         "tensor '%s': data_offsets [%lld, %lld] extend beyond the %llu-byte data section",
		         name, (long long)b, (long long)e, (unsigned long long)data_len);
		return -1;
	}
	if ((uint64_t)(e - b) != nbytes) {
		char ty[256];
		type_text(ty, sizeof ty, d, t->rank, t->shape);
		snprintf(err, errlen, "tensor '%s': data_offsets [%lld, %lld] do not match %s (%llu bytes)",
		         name, (long long)b, (long long)e, ty, (unsigned long long)nbytes);
		return -1;
	}
	sp->begin = (uint64_t)b;
	sp->end = (uint64_t)e;
	t->nbytes = (size_t)nbytes; /* <= data_len, which fits in size_t */
	return 0;
}

static void free_tensors(WTensor *t, int n)
{
	for (int i = 0; i < n; i++)
		free((char *)t[i].name);
	free(t);
}

/* Parse and validate the header; on success w->t and w->n are set. */
static int parse_header(Weights *w, const unsigned char *base, uint64_t hlen, uint64_t data_len,
                        char *err, size_t errlen)
{
	json_error_t je;
	/* Exactly hlen bytes: Jansson skips the trailing space padding and rejects
	 * anything else after the object. Duplicate names would be ambiguous. */
	json_t *root = json_loadb((const char *)base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		snprintf(err, errlen, "header is not valid JSON: %s (at byte %d of the header)", je.text,
		         je.position);
		return -1;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "header is not a JSON object");
		json_decref(root);
		return -1;
	}
	size_t cap = json_object_size(root);
	WTensor *t = xcalloc(cap ? cap : 1, sizeof *t);
	Span *sp = xcalloc(cap ? cap : 1, sizeof *sp);
	int n = 0;
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (strcmp(key, "__metadata__") == 0) {
			/* Free-form strings (framework, format...): checked, not used. */
			const char *mk;
			json_t *mv;
			if (!json_is_object(v)) {
				snprintf(err, errlen, "\"__metadata__\" is not a JSON object");
				goto fail;
			}
			json_object_foreach(v, mk, mv) {
				if (!json_is_string(mv)) {
					char ks[SHOWN];
					snprintf(err, errlen, "\"__metadata__\" value '%s' is not a string",
					         shown(ks, mk));
					goto fail;
				}
			}
			continue;
		}
		WTensor *wt = &t[n];
		wt->name = xstrdup(key);
		n++;
		if (parse_entry(key, v, wt, &sp[n - 1], data_len, err, errlen) < 0)
			goto fail;
		sp[n - 1].idx = n - 1;
	}

	/* Overlap: sorted by begin, each non-empty tensor must start at or after the
	 * end of every earlier one. Empty tensors occupy no bytes. Gaps are allowed. */
	qsort(sp, (size_t)n, sizeof *sp, span_cmp);
	int last = -1; /* the span reaching furthest so far */
	for (int i = 0; i < n; i++) {
		if (sp[i].begin == sp[i].end)
			continue;
		if (last >= 0 && sp[i].begin < sp[last].end) {
			char n1[SHOWN], n2[SHOWN];
			snprintf(err, errlen, "tensor '%s' overlaps tensor '%s'", shown(n1, t[sp[last].idx].name),
			         shown(n2, t[sp[i].idx].name));
			goto fail;
		}
		last = i;
	}
	for (int i = 0; i < n; i++)
		t[sp[i].idx].data = base + 8 + hlen + sp[i].begin;

	/* Sorted by name: a deterministic order whatever the file's, and bsearch in weights_find. */
	qsort(t, (size_t)n, sizeof *t, wtensor_cmp);
	free(sp);
	json_decref(root);
	w->t = t;
	w->n = n;
	return 0;
fail:
	free_tensors(t, n);
	free(sp);
	json_decref(root);
	return -1;
}

Weights *weights_open(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot stat: %s", strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "not a regular file");
		close(fd);
		return NULL;
	}
	if (st.st_size == 0) {
		snprintf(err, errlen, "file is empty");
		close(fd);
		return NULL;
	}
	if (st.st_size < 8) {
		snprintf(err, errlen, "file is too short (%lld bytes) for a safetensors header",
		         (long long)st.st_size);
		close(fd);
		return NULL;
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		snprintf(err, errlen, "file is too large to map");
		close(fd);
		return NULL;
	}
	size_t size = (size_t)st.st_size;
	void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd); /* the mapping keeps the file alive */
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "cannot map: %s", strerror(e));
		return NULL;
	}
	const unsigned char *base = map;
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | base[i];
	if (hlen == 0) {
		snprintf(err, errlen, "header length is 0");
		goto fail;
	}
	if (hlen > size - 8) {
		snprintf(err, errlen, "header length %llu exceeds file size %zu", (unsigned long long)hlen,
		         size);
		goto fail;
	}
	if (hlen > MAX_HEADER_LEN) {
		snprintf(err, errlen, "header length %llu is larger than the limit of %llu bytes",
		         (unsigned long long)hlen, MAX_HEADER_LEN);
		goto fail;
	}
	Weights *w = xcalloc(1, sizeof *w);
	if (parse_header(w, base, hlen, size - 8 - hlen, err, errlen) < 0) {
		free(w);
		goto fail;
	}
	w->path = xstrdup(path);
	w->map = map;
	w->mapsize = size;
	return w;
fail:
	munmap(map, size);
	return NULL;
}

WTensor *weights_find(Weights *w, const char *name)
{
	WTensor key = {.name = name};
	return bsearch(&key, w->t, (size_t)w->n, sizeof *w->t, wtensor_cmp);
}

void weights_close(Weights *w)
{
	if (!w)
		return;
	free_tensors(w->t, w->n);
	if (w->map)
		munmap(w->map, w->mapsize);
	free((char *)w->path);
	free(w);
}

/* test_runtime.c - unit tests of libnestrt (runtime/).
 *
 *   test_runtime                      run every test; last line "N passed, N failed"
 *   test_runtime --open-weights FILE  open FILE: prints OK (N tensors) or the reason; exit 0 or 1
 *   test_runtime --read-npy FILE      read FILE as .npy: the same
 *
 * Uses only the public API of nestrt.h. $PYTHON (default /usr/bin/python3)
 * with numpy writes the malformed-file corpus (tests/io/make_corpus.py, found
 * through $NESTRT_CORPUS_SCRIPT or relative to this binary's working directory)
 * and checks .npy compatibility. The profile is checked by running this
 * binary again as a child with NESTRT_PROFILE=1. GGUF files and their
 * expected values come from tests/io/gguf.py (beside the corpus script). */
#define _GNU_SOURCE /* dlsym's RTLD_NEXT, for the read faults below */
#include "nestrt.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int npass, nfail;
static char dir[256];
static const char *python = "/usr/bin/python3";
static const char *self;

#define CHECK(cond, ...) check((cond), __FILE__, __LINE__, __VA_ARGS__)
static int check(int cond, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int check(int cond, const char *file, int line, const char *fmt, ...)
{
	if (cond) {
		npass++;
		return 1;
	}
	nfail++;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s:%d: FAIL: ", file, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 0;
}

/* Check that a call failed with exactly the message want. */
#define CHECK_MSG(r, err, want) \
	CHECK((r) < 0 && strcmp((err).message, (want)) == 0, "want '%s', got %d '%s'", (want), (int)(r), \
	      (r) < 0 ? (err).message : "")

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(NULL, 0, f, ap);
	va_end(ap);
	char *s = malloc((size_t)n + 1);
	if (!s)
		abort();
	va_start(ap, f);
	vsnprintf(s, (size_t)n + 1, f, ap);
	va_end(ap);
	return s;
}

static char *tpath(const char *name)
{
	return fmt("%s/%s", dir, name);
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	size_t r;
	while (s && (r = fread(s + len, 1, cap - len, f)) > 0) {
		len += r;
		if (len == cap)
			s = realloc(s, cap *= 2);
	}
	fclose(f);
	*n = len;
	return s;
}

/* A .safetensors file in the test directory: header text (padded with pad
 * spaces), then data. Returns its path (malloc'd). */
static char *st_file(const char *name, const char *header, size_t pad, const void *data, size_t n)
{
	size_t hl = strlen(header) + pad;
	unsigned char *b = malloc(8 + hl + n + 1);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memcpy(b + 8, header, strlen(header));
	memset(b + 8 + strlen(header), ' ', pad);
	if (n)
		memcpy(b + 8 + hl, data, n);
	char *path = tpath(name);
	write_file(path, b, 8 + hl + n);
	free(b);
	return path;
}

/* Pad so that the data section starts at a multiple of 8 (plus skew). */
static size_t pad_for(const char *header, size_t skew)
{
	size_t hl = strlen(header);
	return (8 - (8 + hl) % 8) % 8 + skew;
}

static int run_python(const char *script)
{
	char *sp = tpath("script.py");
	write_file(sp, script, strlen(script));
	char *cmd = fmt("'%s' '%s' '%s'", python, sp, dir);
	int st = system(cmd);
	free(cmd);
	free(sp);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------ weights: good files */

static const char good_header[] =
	"{\"__metadata__\": {\"format\": \"pt\"},"
	" \"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
	" \"b\": {\"shape\": [3], \"data_offsets\": [24, 36], \"dtype\": \"F32\"},"
	" \"ids\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [40, 56], \"extra\": [1, {\"x\": null}]},"
	" \"m\": {\"dtype\": \"BOOL\", \"shape\": [3], \"data_offsets\": [56, 59]},"
	" \"s\": {\"dtype\": \"F64\", \"shape\": [], \"data_offsets\": [64, 72]},"
	" \"unused\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [72, 76]},"
	" \"e\": {\"dtype\": \"I32\", \"shape\": [0, 4], \"data_offsets\": [76, 76]},"
	" \"i\": {\"dtype\": \"I32\", \"shape\": [1, 1], \"data_offsets\": [76, 80]}}";

static void good_data(unsigned char *d)
{
	memset(d, 0xee, 80);
	float w[6] = {0, 1, 2, 3, 4, 5}, b[3] = {1, 1, 1};
	int64_t ids[2] = {5, -1};
	double s = 2.5;
	int32_t i = -7;
	memcpy(d, w, 24);
	memcpy(d + 24, b, 12);
	memcpy(d + 40, ids, 16);
	d[56] = 1, d[57] = 0, d[58] = 1;
	memcpy(d + 64, &s, 8);
	d[72] = 0xc0, d[73] = 0x3f, d[74] = 0x00, d[75] = 0xc0; /* bf16 1.5, -2 */
	memcpy(d + 76, &i, 4);
}

static const nestrt_param good_params[] = {
	{"w", NESTRT_F32, 2, {2, 3}},  {"b", NESTRT_F32, 1, {3}},     {"ids", NESTRT_I64, 1, {2}},
	{"m", NESTRT_BOOL, 1, {3}},    {"s", NESTRT_F64, 0, {0}},     {"e", NESTRT_I32, 2, {0, 4}},
	{"i", NESTRT_I32, 2, {1, 1}},
};
#define NGOOD ((int)(sizeof good_params / sizeof good_params[0]))

static void check_good_values(const void **data, const char *what)
{
	int ok = 1;
	const float *w = data[0], *b = data[1];
	for (int i = 0; i < 6; i++)
		ok &= w[i] == (float)i;
	for (int i = 0; i < 3; i++)
		ok &= b[i] == 1.0f;
	const int64_t *ids = data[2];
	ok &= ids[0] == 5 && ids[1] == -1;
	const unsigned char *m = data[3];
	ok &= m[0] == 1 && m[1] == 0 && m[2] == 1;
	ok &= *(const double *)data[4] == 2.5;
	ok &= data[5] != NULL;
	ok &= *(const int32_t *)data[6] == -7;
	CHECK(ok, "%s: bound values differ", what);
	int aligned = 1;
	for (int i = 0; i < NGOOD; i++)
		aligned &= (uintptr_t)data[i] % nestrt_dtype_size(good_params[i].dtype) == 0;
	CHECK(aligned, "%s: bound data not aligned to the element size", what);
}

/* F16 and BF16 tensors bind f32 parameters, widened exactly: every F16 bit
 * pattern against (-1)^s * m * 2^-24 (e = 0), (1024 + m) * 2^(e - 25), inf
 * and NaN, and BF16 as the float of its bits followed by 16 zeros; read at
 * an aligned and a skewed data section, mapped (NESTRT_MMAP=1), and from
 * memory. */
static void test_weights_half(void)
{
	enum { NH = 65536, NB = 4 };
	const char *hdr = "{\"h\": {\"dtype\": \"F16\", \"shape\": [256, 256], \"data_offsets\": [0, 131072]},"
	                  " \"b\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [131072, 131080]}}";
	unsigned char *d = malloc(2 * NH + 2 * NB);
	for (int i = 0; i < NH; i++)
		d[2 * i] = (unsigned char)i, d[2 * i + 1] = (unsigned char)(i >> 8);
	static const uint16_t bb[NB] = {0x3fc0, 0xc000, 0x7f80, 0x0001}; /* 1.5, -2, inf, the least subnormal */
	for (int i = 0; i < NB; i++)
		d[2 * NH + 2 * i] = (unsigned char)bb[i], d[2 * NH + 2 * i + 1] = (unsigned char)(bb[i] >> 8);
	const nestrt_param ps[2] = {{"h", NESTRT_F32, 2, {256, 256}}, {"b", NESTRT_F32, 1, {4}}};
	for (int mode = 0; mode < 4; mode++) {
		static const char *const what[] = {"aligned, read", "skewed, read", "skewed, mapped", "in memory"};
		char *path = st_file("half.safetensors", hdr, pad_for(hdr, mode ? 1 : 0), d, 2 * NH + 2 * NB);
		nestrt_error err = {{0}};
		nestrt_weights *w;
		char *image = NULL;
		if (mode == 3) {
			size_t n;
			image = read_file(path, &n);
			w = nestrt_weights_from_memory(image, n, "half", &err);
		} else {
			if (mode == 2)
				setenv("NESTRT_MMAP", "1", 1);
			w = nestrt_weights_open(path, &err);
			unsetenv("NESTRT_MMAP");
		}
		const void *data[2];
		if (CHECK(w != NULL, "open half (%s): %s", what[mode], err.message) &&
		    CHECK(nestrt_weights_bind(w, ps, 2, data, &err) == 0, "bind half (%s): %s", what[mode], err.message)) {
			const float *h = data[0], *b = data[1];
			int bad = -1;
			for (int i = 0; i < NH && bad < 0; i++) {
				int sg = i >> 15, e = (i >> 10) & 31, m = i & 1023;
				double want = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
				want = sg ? -want : want;
				if (e == 31 && m ? !isnan(h[i]) : (double)h[i] != want || !!signbit(h[i]) != (sg != 0))
					bad = i;
			}
			CHECK(bad < 0, "F16 bits 0x%04x (%s): widened to %g", bad, what[mode], bad < 0 ? 0.0 : (double)h[bad]);
			CHECK(b[0] == 1.5f && b[1] == -2.0f && isinf(b[2]) && b[2] > 0 && b[3] == ldexpf(1, -133),
			      "BF16 (%s): %g %g %g %g", what[mode], b[0], b[1], b[2], b[3]);
			CHECK((uintptr_t)h % 4 == 0 && (uintptr_t)b % 4 == 0, "widened data aligned (%s)", what[mode]);
		}
		if (w)
			nestrt_weights_close(w);
		free(image);
		free(path);
	}
	free(d);
}

static void test_weights_good(void)
{
	unsigned char d[80];
	good_data(d);
	nestrt_error err = {{0}};

	/* Data section at a multiple of 8: everything used in place. */
	char *path = st_file("good.safetensors", good_header, pad_for(good_header, 0), d, sizeof d);
	nestrt_weights *w = nestrt_weights_open(path, &err);
	if (CHECK(w != NULL, "open good: %s", err.message)) {
		CHECK(nestrt_weights_count(w) == 8, "count %d", nestrt_weights_count(w));
		CHECK(strcmp(nestrt_weights_path(w), path) == 0, "path");
		static const char *const sorted[] = {"b", "e", "i", "ids", "m", "s", "unused", "w"};
		int order = 1;
		for (int i = 0; i < 8; i++) {
			nestrt_param info;
			order &= nestrt_weights_info(w, i, &info, NULL, NULL, NULL) == 0 && strcmp(info.name, sorted[i]) == 0;
		}
		CHECK(order, "tensors not in name order");
		nestrt_param info;
		const char *fd;
		const void *raw;
		size_t nb;
		CHECK(nestrt_weights_info(w, 6, &info, &fd, &raw, &nb) == 0 && info.dtype == NESTRT_F32 &&
		      strcmp(fd, "BF16") == 0 && nb == 8 && info.rank == 1 && info.shape[0] == 2 &&
		      ((const float *)raw)[0] == 1.5f && ((const float *)raw)[1] == -2.0f,
		      "info of a BF16 tensor: held as f32");
		CHECK(nestrt_weights_info(w, 8, &info, NULL, NULL, NULL) == -1 &&
		      nestrt_weights_info(w, -1, &info, NULL, NULL, NULL) == -1, "info out of range");
		const void *data[NGOOD];
		int r = nestrt_weights_bind(w, good_params, NGOOD, data, &err);
		if (CHECK(r == 0, "bind good: %s", err.message)) {
			check_good_values(data, "aligned file");
			nestrt_weights_info(w, 7, NULL, NULL, &raw, NULL); /* "w" */
			CHECK(data[0] == raw, "aligned data should be used in place");
		}
		/* Binding a subset, in another order, is fine: unused tensors are allowed. */
		nestrt_param sub[2] = {good_params[3], good_params[0]};
		const void *sd[2];
		CHECK(nestrt_weights_bind(w, sub, 2, sd, &err) == 0 && sd[1] == data[0], "bind a subset: %s",
		      err.message);
		nestrt_weights_close(w);
	}
	free(path);

	/* Data section at 8k + 1: read, every tensor goes to a 64-byte boundary
	 * of its own; mapped (NESTRT_MMAP=1), every multi-byte tensor is copied
	 * to aligned memory. */
	path = st_file("skewed.safetensors", good_header, pad_for(good_header, 1), d, sizeof d);
	for (int mapped = 0; mapped < 2; mapped++) {
		if (mapped)
			setenv("NESTRT_MMAP", "1", 1);
		w = nestrt_weights_open(path, &err);
		unsetenv("NESTRT_MMAP");
		if (!CHECK(w != NULL, "open skewed (%s): %s", mapped ? "mapped" : "read", err.message))
			continue;
		const void *data[NGOOD], *again[NGOOD];
		int r = nestrt_weights_bind(w, good_params, NGOOD, data, &err);
		if (CHECK(r == 0, "bind skewed: %s", err.message)) {
			check_good_values(data, mapped ? "skewed file, mapped" : "skewed file, read");
			const void *raw;
			nestrt_weights_info(w, 7, NULL, NULL, &raw, NULL);
			if (mapped)
				CHECK(data[0] != raw && (uintptr_t)raw % 4 != 0, "skewed f32 data should be copied");
			else
				CHECK(data[0] == raw && (uintptr_t)raw % 64 == 0, "skewed f32 data read to an aligned place");
			nestrt_weights_info(w, 4, NULL, NULL, &raw, NULL); /* "m": bool, 1-byte */
			CHECK(data[3] == raw, "bool data needs no copy");
			r = nestrt_weights_bind(w, good_params, NGOOD, again, &err);
			CHECK(r == 0 && memcmp(data, again, sizeof data) == 0, "binding again reuses the copies");
		}
		nestrt_weights_close(w);
	}
	free(path);

	/* JSON corners: escapes, surrogate pairs, whitespace, numbers like -0 and 1e0 elsewhere. */
	const char *h2 = "{\n\t\"caf\\u00e9\\n\" : {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\r\n"
	                 " \"\\ud83d\\ude00\\/\\\"\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [4, 8],"
	                 " \"x\": [-0, 1e0, 2.5E-3, true, false, null, \"\\b\\f\\r\\t\\\\\", {}, []]},"
	                 " \"__metadata__\": {\"k\": \"v\", \"\\u0000\": \"nul keys are fine here\"}}";
	float one = 1.0f;
	int32_t two = 2;
	unsigned char d2[8];
	memcpy(d2, &one, 4);
	memcpy(d2 + 4, &two, 4);
	path = st_file("escapes.safetensors", h2, pad_for(h2, 0), d2, sizeof d2);
	w = nestrt_weights_open(path, &err);
	if (CHECK(w != NULL, "open escapes: %s", err.message)) {
		nestrt_param p[2] = {{"caf\xc3\xa9\n", NESTRT_F32, 1, {1}}, {"\xf0\x9f\x98\x80/\"", NESTRT_I32, 1, {1}}};
		const void *data[2];
		int r = nestrt_weights_bind(w, p, 2, data, &err);
		CHECK(r == 0 && *(const float *)data[0] == 1.0f && *(const int32_t *)data[1] == 2,
		      "bind escaped names: %s", r ? err.message : "wrong values");
		nestrt_weights_close(w);
	}
	free(path);

	/* Empty weights: a 0-byte file, a "{}" header, path NULL. */
	const char *empties[] = {"", "{}", "{}   ", "{\"__metadata__\": {}}"};
	for (int k = 0; k < 4; k++) {
		char *p = tpath("empty.safetensors");
		if (k == 0)
			write_file(p, "", 0);
		else {
			free(p);
			p = st_file("empty.safetensors", empties[k], 0, NULL, 0);
		}
		w = nestrt_weights_open(p, &err);
		if (CHECK(w != NULL, "open empty %d: %s", k, err.message)) {
			CHECK(nestrt_weights_count(w) == 0, "empty %d: count", k);
			CHECK(nestrt_weights_bind(w, NULL, 0, NULL, &err) == 0, "empty %d: bind nothing", k);
			nestrt_param a = {"a", NESTRT_F32, 1, {2}};
			const void *da;
			char *want = fmt("%s: missing parameter 'a' (f32[2]): the file has no tensors", p);
			int r = nestrt_weights_bind(w, &a, 1, &da, &err);
			CHECK_MSG(r, err, want);
			free(want);
			nestrt_weights_close(w);
		}
		free(p);
	}
	w = nestrt_weights_open(NULL, &err);
	CHECK(w && nestrt_weights_count(w) == 0 && nestrt_weights_bind(w, NULL, 0, NULL, &err) == 0,
	      "open(NULL) gives empty weights");
	nestrt_weights_close(w);
	CHECK(nestrt_weights_bind(NULL, NULL, 0, NULL, &err) == 0, "bind(NULL, 0 params)");
	nestrt_weights_close(NULL);
}

/* ------------------------------------------------------------ weights: F16 and BF16 */

/* An F16 / BF16 tensor binds an f16 / bf16 param with the file's bits and an
 * f32 one widened, in either order (the f32 form made in place or beside the
 * 16-bit bytes, the 16-bit bytes narrowed back when they went), read or
 * mapped, its data section 2-byte aligned or not. */
static void test_half_bind(void)
{
	static const uint16_t h[5] = {0x3c00, 0x0001, 0xfe01, 0x7c00, 0x8000}; /* 1, 2^-24, NaN, inf, -0 */
	static const uint32_t hw[5] = {0x3f800000, 0x33800000, 0xffc02000, 0x7f800000, 0x80000000};
	static const uint16_t b[3] = {0x3f81, 0x7fc1, 0x0001};
	unsigned char d[16];
	for (int i = 0; i < 5; i++)
		d[2 * i] = (unsigned char)h[i], d[2 * i + 1] = (unsigned char)(h[i] >> 8);
	for (int i = 0; i < 3; i++)
		d[10 + 2 * i] = (unsigned char)b[i], d[11 + 2 * i] = (unsigned char)(b[i] >> 8);
	const char *hd = "{\"h\": {\"dtype\": \"F16\", \"shape\": [5], \"data_offsets\": [0, 10]},"
	                 " \"b\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [10, 16]}}";
	const nestrt_param p16[2] = {{"h", NESTRT_F16, 1, {5}}, {"b", NESTRT_BF16, 1, {3}}};
	const nestrt_param p32[2] = {{"h", NESTRT_F32, 1, {5}}, {"b", NESTRT_F32, 1, {3}}};
	for (int skew = 0; skew < 2; skew++)
		for (int mapped = 0; mapped < 2; mapped++)
			for (int f32_first = 0; f32_first < 2; f32_first++) {
				char *path = st_file("half.safetensors", hd, pad_for(hd, (size_t)skew), d, sizeof d);
				char how[64];
				snprintf(how, sizeof how, "%s, skew %d, %s first", mapped ? "mapped" : "read", skew,
				         f32_first ? "f32" : "f16");
				nestrt_error err = {{0}};
				if (mapped)
					setenv("NESTRT_MMAP", "1", 1);
				nestrt_weights *w = nestrt_weights_open(path, &err);
				unsetenv("NESTRT_MMAP");
				free(path);
				if (!CHECK(w != NULL, "half (%s): %s", how, err.message))
					continue;
				const void *a[2] = {0}, *f[2] = {0};
				for (int pass = 0; pass < 2; pass++) {
					int as32 = pass == 0 ? f32_first : !f32_first;
					if (as32) {
						int ok = nestrt_weights_bind(w, p32, 2, f, &err) == 0;
						for (int i = 0; ok && i < 5; i++)
							ok = memcmp((const uint32_t *)f[0] + i, &hw[i], 4) == 0;
						for (int i = 0; ok && i < 3; i++)
							ok = ((const uint32_t *)f[1])[i] == (uint32_t)b[i] << 16;
						CHECK(ok && (uintptr_t)f[0] % 4 == 0, "half (%s): f32 widened: %s", how, err.message);
					} else {
						int ok = nestrt_weights_bind(w, p16, 2, a, &err) == 0;
						ok = ok && (uintptr_t)a[0] % 2 == 0 && (uintptr_t)a[1] % 2 == 0 &&
						     memcmp(a[0], h, sizeof h) == 0 && memcmp(a[1], b, sizeof b) == 0;
						CHECK(ok, "half (%s): the file's 16-bit bits: %s", how, err.message);
					}
				}
				/* the first binding's data stays as it was */
				CHECK(a[0] && memcmp(a[0], h, sizeof h) == 0 && memcmp(a[1], b, sizeof b) == 0 && f[0] &&
				      memcmp(f[0], hw, sizeof hw) == 0,
				      "half (%s): both forms held", how);
				nestrt_param info;
				const char *fd;
				const void *id;
				size_t nb;
				CHECK(nestrt_weights_info(w, 1, &info, &fd, &id, &nb) == 0 && info.dtype == NESTRT_F32 &&
				      !strcmp(fd, "F16") && nb == 20 && memcmp(id, hw, sizeof hw) == 0,
				      "half (%s): info gives the f32 form", how);
				nestrt_param bad = {"h", NESTRT_BF16, 1, {5}};
				char *want = fmt("%s: h: expected bf16[5], file has f16[5]", nestrt_weights_path(w));
				CHECK_MSG(nestrt_weights_bind(w, &bad, 1, a, &err), err, want);
				free(want);
				nestrt_weights_close(w);
			}
}

/* ------------------------------------------------------------ weights: bind errors */

/* want_tail follows "PATH: " unless bare (a message about the caller, not the file). */
static void bind_err2(const char *path, const nestrt_param *p, int n, const char *want_tail, int bare)
{
	nestrt_error err = {{0}};
	nestrt_weights *w = nestrt_weights_open(path, &err);
	if (!CHECK(w != NULL, "open %s: %s", path, err.message))
		return;
	const void *data[8];
	char *want = bare ? fmt("%s", want_tail) : fmt("%s: %s", path, want_tail);
	int r = nestrt_weights_bind(w, p, n, data, &err);
	CHECK_MSG(r, err, want);
	free(want);
	nestrt_weights_close(w);
}

static void bind_err(const char *path, const nestrt_param *p, int n, const char *want_tail)
{
	bind_err2(path, p, n, want_tail, 0);
}

static void test_bind_errors(void)
{
	nestrt_error err;
	unsigned char d[80];
	good_data(d);
	char *path = st_file("good.safetensors", good_header, pad_for(good_header, 0), d, sizeof d);

	nestrt_param p;
	p = (nestrt_param){"wte.weight", NESTRT_F32, 2, {50257, 768}};
	bind_err(path, &p, 1, "missing parameter 'wte.weight' (f32[50257, 768])");
	p = (nestrt_param){"w", NESTRT_F32, 2, {3, 2}};
	bind_err(path, &p, 1, "w: expected f32[3, 2], file has f32[2, 3]");
	p = (nestrt_param){"w", NESTRT_F64, 2, {2, 3}};
	bind_err(path, &p, 1, "w: expected f64[2, 3], file has f32[2, 3]");
	p = (nestrt_param){"w", NESTRT_F32, 1, {6}};
	bind_err(path, &p, 1, "w: expected f32[6], file has f32[2, 3]");
	p = (nestrt_param){"s", NESTRT_F64, 1, {1}};
	bind_err(path, &p, 1, "s: expected f64[1], file has f64[]");
	p = (nestrt_param){"ids", NESTRT_I32, 1, {2}};
	bind_err(path, &p, 1, "ids: expected i32[2], file has i64[2]");
	p = (nestrt_param){"unused", NESTRT_F64, 1, {2}};
	bind_err(path, &p, 1, "unused: expected f64[2], file has bf16[2]");
	p = (nestrt_param){"m", NESTRT_I32, 1, {3}};
	bind_err(path, &p, 1, "m: expected i32[3], file has bool[3]");
	p = (nestrt_param){"W", NESTRT_F32, 2, {2, 3}};
	bind_err(path, &p, 1, "missing parameter 'W' (f32[2, 3])");
	/* The first problem in table order. */
	nestrt_param two[3] = {{"b", NESTRT_F32, 1, {3}}, {"zz", NESTRT_I64, 0, {0}}, {"w", NESTRT_F32, 0, {0}}};
	bind_err(path, two, 3, "missing parameter 'zz' (i64[])");
	/* Bad param tables are the caller's bug, reported as such. */
	p = (nestrt_param){"x", NESTRT_NDTYPES, 1, {3}};
	bind_err2(path, &p, 1, "nestrt_weights_bind: parameter 0 ('x') has an invalid type", 1);
	p = (nestrt_param){"x", -1, 1, {3}};
	bind_err2(path, &p, 1, "nestrt_weights_bind: parameter 0 ('x') has an invalid type", 1);
	p = (nestrt_param){"x", NESTRT_F32, 9, {3}};
	bind_err2(path, &p, 1, "nestrt_weights_bind: parameter 0 ('x') has an invalid type", 1);
	p = (nestrt_param){"x", NESTRT_F32, -1, {3}};
	bind_err2(path, &p, 1, "nestrt_weights_bind: parameter 0 ('x') has an invalid type", 1);
	p = (nestrt_param){"x", NESTRT_F32, 1, {-3}};
	bind_err2(path, &p, 1, "nestrt_weights_bind: parameter 0 ('x') has an invalid type", 1);
	const void *dd[1];
	CHECK_MSG(nestrt_weights_bind(NULL, &p, 1, dd, &err), err, "nestrt_weights_bind: no weights for 1 parameters");
	/* what a table holds past a param's rank is not read: w binds with a stray -7
	 * there, and a param of the most dims (8) is checked to its last */
	p = (nestrt_param){"w", NESTRT_F32, 2, {2, 3, -7}};
	nestrt_weights *wb = nestrt_weights_open(path, &err);
	if (CHECK(wb != NULL, "good file: %s", err.message)) {
		int rc = nestrt_weights_bind(wb, &p, 1, dd, &err);
		CHECK(rc == 0 && dd[0] != NULL, "w with -7 past its rank: rc %d, %s", rc, rc ? err.message : "");
		nestrt_weights_close(wb);
	}
	p = (nestrt_param){"x8", NESTRT_F32, 8, {1, 2, 1, 2, 1, 2, 1, 2}};
	bind_err(path, &p, 1, "missing parameter 'x8' (f32[1, 2, 1, 2, 1, 2, 1, 2])");
	free(path);

	/* The example of the interface, full size. */
	const char *h = "{\"h.3.attn.c_attn.weight\": {\"dtype\": \"F32\", \"shape\": [768, 768], "
	                "\"data_offsets\": [0, 2359296]}}";
	unsigned char *big = calloc(1, 2359296);
	path = st_file("gpt2.safetensors", h, pad_for(h, 0), big, 2359296);
	free(big);
	p = (nestrt_param){"h.3.attn.c_attn.weight", NESTRT_F32, 2, {768, 2304}};
	bind_err(path, &p, 1, "h.3.attn.c_attn.weight: expected f32[768, 2304], file has f32[768, 768]");
	free(path);

	/* Bool bytes other than 0 and 1 are true, and compiled code sees 1. */
	const char *hb = "{\"m\": {\"dtype\": \"BOOL\", \"shape\": [4], \"data_offsets\": [0, 4]}}";
	path = st_file("bool.safetensors", hb, 0, "\1\0\2\377", 4);
	nestrt_weights *w = nestrt_weights_open(path, &err);
	if (CHECK(w != NULL, "bool file: %s", err.message)) {
		p = (nestrt_param){"m", NESTRT_BOOL, 1, {4}};
		const void *bd;
		int r = nestrt_weights_bind(w, &p, 1, &bd, &err);
		CHECK(r == 0 && memcmp(bd, "\1\0\1\1", 4) == 0, "bool normalized: %s", r ? err.message : "wrong bytes");
		nestrt_weights_close(w);
	}
	free(path);

	/* A name from the file never brings control characters into a message. */
	path = st_file("ctl.safetensors", "{\"a\\u001b[31m\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
	               0, "\0\0\0\0", 4);
	p = (nestrt_param){"a\x1b[31m", NESTRT_F32, 1, {2}};
	bind_err(path, &p, 1, "a?[31m: expected f32[2], file has f32[1]");
	free(path);
}

/* ------------------------------------------------------------ weights: open errors */

/* Open a file written from raw bytes; want is the reason after "PATH: ". */
static void open_err_raw(const void *bytes, size_t n, const char *want)
{
	char *path = tpath("bad.safetensors");
	write_file(path, bytes, n);
	nestrt_error err = {{0}};
	nestrt_weights *w = nestrt_weights_open(path, &err);
	char *full = fmt("%s: %s", path, want);
	CHECK(w == NULL && strcmp(err.message, full) == 0, "want '%s', got '%s'", full, w ? "(opened)" : err.message);
	nestrt_weights_close(w);
	free(full);
	free(path);
}

static void open_err(const char *header, const void *data, size_t n, const char *want)
{
	size_t hl = strlen(header);
	unsigned char *b = malloc(8 + hl + n + 1);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memcpy(b + 8, header, hl);
	if (n)
		memcpy(b + 8 + hl, data, n);
	open_err_raw(b, 8 + hl + n, want);
	free(b);
}

#define T2(dt, shape, b, e) "{\"a\": {\"dtype\": \"" dt "\", \"shape\": " shape ", \"data_offsets\": [" b ", " e "]}}"

static void test_open_errors(void)
{
	nestrt_error err;
	char *p = tpath("no-such-file.safetensors");
	char *want = fmt("%s: cannot open: No such file or directory", p);
	CHECK(!nestrt_weights_open(p, &err) && strcmp(err.message, want) == 0, "got '%s'", err.message);
	free(want);
	free(p);
	want = fmt("%s: not a regular file", dir);
	CHECK(!nestrt_weights_open(dir, &err) && strcmp(err.message, want) == 0, "got '%s'", err.message);
	free(want);

	/* The example of the interface: a 120-byte file claiming a 4096-byte header. */
	unsigned char b[120];
	memset(b, ' ', sizeof b);
	b[0] = 0x00, b[1] = 0x10;
	for (int i = 2; i < 8; i++)
		b[i] = 0;
	open_err_raw(b, 120, "header length 4096 exceeds file size 120");
	open_err_raw("abc", 3, "file is too short (3 bytes) for a safetensors header");
	open_err_raw("\0\0\0\0\0\0\0\0{}", 10, "header length is 0");
	open_err_raw("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10, "header length 18446744073709551615 exceeds file size 10");

	const char f8[8] = {0};
	/* JSON */
	open_err("this is not json", NULL, 0, "header is not valid JSON: unexpected character 't'; expected a value (at byte 0 of the header)");
	open_err("what", NULL, 0, "header is not valid JSON: unexpected character 'w'; expected a value (at byte 0 of the header)");
	open_err("{\"a\": 1", NULL, 0,
	         "header is not valid JSON: unexpected end of text; expected ',' or '}' (at byte 7 of the header)");
	open_err("{} {}", NULL, 0,
	         "header is not valid JSON: unexpected character '{'; expected only whitespace after the value (at byte 3 of the header)");
	open_err_raw("\4\0\0\0\0\0\0\0{}\0\0", 12,
	             "header is not valid JSON: unexpected byte 0x00; expected only whitespace after the value (at byte 2 of the header)");
	open_err("{\"a\": [1,]}", NULL, 0,
	         "header is not valid JSON: unexpected character ']'; expected a value (at byte 9 of the header)");
	open_err("{\"a\": 01}", NULL, 0,
	         "header is not valid JSON: unexpected character '1'; expected ',' or '}' (at byte 7 of the header)");
	open_err("{\"a\": -}", NULL, 0,
	         "header is not valid JSON: unexpected character '}'; expected a digit (at byte 7 of the header)");
	open_err("{\"a\": 1.}", NULL, 0,
	         "header is not valid JSON: unexpected character '}'; expected a digit after '.' (at byte 8 of the header)");
	open_err("{\"a\": tru}", NULL, 0, "header is not valid JSON: unexpected character 't'; expected a value (at byte 6 of the header)");
	open_err("{a: 1}", NULL, 0,
	         "header is not valid JSON: unexpected character 'a'; expected a string (an object key) (at byte 1 of the header)");
	open_err("{\"a\" 1}", NULL, 0,
	         "header is not valid JSON: unexpected character '1'; expected ':' after an object key (at byte 5 of the header)");
	open_err("{\"a\\u0000b\": {}}", NULL, 0, "tensor name 'a?b' contains a NUL character");
	open_err("{\"a\\x\": {}}", NULL, 0, "header is not valid JSON: invalid escape '\\x' in a string (at byte 3 of the header)");
	open_err("{\"a\\u12g4\": {}}", NULL, 0, "header is not valid JSON: invalid \\u escape in a string (at byte 3 of the header)");
	open_err("{\"\\ud800\": {}}", NULL, 0, "header is not valid JSON: unpaired surrogate \\ud800 in a string (at byte 2 of the header)");
	open_err("{\"\\udc00\": {}}", NULL, 0, "header is not valid JSON: unpaired surrogate \\udc00 in a string (at byte 2 of the header)");
	open_err("{\"\\ud800\\u0041\": {}}", NULL, 0, "header is not valid JSON: unpaired surrogate \\ud800 in a string (at byte 2 of the header)");
	open_err("{\"a\tb\": {}}", NULL, 0, "header is not valid JSON: control character 0x09 in a string (at byte 3 of the header)");
	open_err("{\"\xff\": {}}", NULL, 0, "header is not valid JSON: invalid UTF-8 in a string (at byte 2 of the header)");
	open_err("{\"\xc0\xaf\": {}}", NULL, 0, "header is not valid JSON: invalid UTF-8 in a string (at byte 2 of the header)");
	open_err("{\"\xed\xa0\x80\": {}}", NULL, 0, "header is not valid JSON: invalid UTF-8 in a string (at byte 2 of the header)");
	open_err("{\"\xf4\x90\x80\x80\": {}}", NULL, 0, "header is not valid JSON: invalid UTF-8 in a string (at byte 2 of the header)");
	open_err("{\"abc", NULL, 0, "header is not valid JSON: unterminated string (at byte 1 of the header)");
	open_err("{\"abc\\", NULL, 0, "header is not valid JSON: unterminated string (at byte 1 of the header)");
	{
		char deep[200];
		memset(deep, '[', 100);
		memset(deep + 100, ']', 99);
		deep[199] = 0;
		open_err(deep, NULL, 0, "header is not valid JSON: nesting deeper than 64 levels (at byte 64 of the header)");
	}
	open_err("{\"a\": " T2("F32", "[2]", "0", "8") ", \"a\": 1}", f8, 8, "header has a duplicate key 'a' (at byte 69 of the header)");
	open_err("{\"x\": {\"k\": 1, \"k\": 2}}", NULL, 0, "header has a duplicate key 'k' (at byte 15 of the header)");
	open_err("{\"\\u0061\": {}, \"a\": {}}", NULL, 0, "header has a duplicate key 'a' (at byte 15 of the header)");
	/* Structure */
	open_err("[1, 2]", NULL, 0, "header is not a JSON object");
	open_err("42", NULL, 0, "header is not a JSON object");
	open_err("{\"__metadata__\": [\"x\"]}", NULL, 0, "\"__metadata__\" is not a JSON object");
	open_err("{\"__metadata__\": {\"step\": 5}}", NULL, 0, "\"__metadata__\" value 'step' is not a string");
	open_err("{\"a\": [0, 8]}", f8, 8, "tensor 'a': entry is not a JSON object");
	open_err("{\"a\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", f8, 8, "tensor 'a': missing \"dtype\"");
	open_err("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", f8, 8, "tensor 'a': missing \"shape\"");
	open_err("{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", f8, 8, "tensor 'a': missing \"data_offsets\"");
	open_err("{\"a\": {\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 8]}}", f8, 8, "tensor 'a': \"dtype\" is not a string");
	open_err(T2("f32", "[2]", "0", "8"), f8, 8, "tensor 'a': unknown dtype 'f32'");
	open_err(T2("Q4\\n", "[2]", "0", "8"), f8, 8, "tensor 'a': unknown dtype 'Q4?'");
	open_err(T2("F32", "2", "0", "8"), f8, 8, "tensor 'a': \"shape\" is not a list");
	open_err(T2("F32", "[\"2\"]", "0", "8"), f8, 8, "tensor 'a': shape entry 0 is not an integer");
	open_err(T2("F32", "[2.0]", "0", "8"), f8, 8, "tensor 'a': shape entry 0 is not an integer");
	open_err(T2("F32", "[1, 2e0]", "0", "8"), f8, 8, "tensor 'a': shape entry 1 is not an integer");
	open_err(T2("F32", "[true]", "0", "8"), f8, 8, "tensor 'a': shape entry 0 is not an integer");
	open_err(T2("F32", "[-2]", "0", "8"), f8, 8, "tensor 'a': negative dimension -2 in shape");
	open_err(T2("F32", "[18446744073709551616]", "0", "8"), f8, 8,
	         "tensor 'a': dimension 18446744073709551616 in shape is too large");
	open_err(T2("F32", "[1, 1, 1, 1, 1, 1, 1, 1, 2]", "0", "8"), f8, 8, "tensor 'a': rank 9 exceeds the maximum of 8");
	open_err(T2("F32", "[4611686018427387904, 4611686018427387904]", "0", "8"), f8, 8,
	         "tensor 'a': shape f32[4611686018427387904, 4611686018427387904] is too large");
	open_err(T2("F64", "[4611686018427387904]", "0", "8"), f8, 8, "tensor 'a': shape f64[4611686018427387904] is too large");
	open_err(T2("F32", "[4294967296, 4294967296, 0]", "0", "0"), NULL, 0,
	         "tensor 'a': shape f32[4294967296, 4294967296, 0] has no elements, but its strides do not fit in 64 bits");
	open_err("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": 8}}", f8, 8,
	         "tensor 'a': \"data_offsets\" is not a list of two integers");
	open_err(T2("F32", "[2]", "0", "8, 8"), f8, 8, "tensor 'a': \"data_offsets\" is not a list of two integers");
	open_err(T2("F32", "[2]", "0.0", "8"), f8, 8, "tensor 'a': \"data_offsets\" is not a list of two integers");
	open_err(T2("F32", "[2]", "-8", "0"), f8, 8, "tensor 'a': negative data_offsets [-8, 0]");
	open_err(T2("F32", "[2]", "8", "0"), f8, 8, "tensor 'a': data_offsets [8, 0] begin after they end");
	open_err(T2("F32", "[2]", "8", "16"), f8, 8, "tensor 'a': data_offsets [8, 16] extend beyond the 8-byte data section");
	open_err(T2("F32", "[2]", "0", "99999999999999999999"), f8, 8,
	         "tensor 'a': data_offsets [0, 99999999999999999999] extend beyond the 8-byte data section");
	open_err(T2("F32", "[1]", "0", "8"), f8, 8, "tensor 'a': data_offsets [0, 8] do not match f32[1] (4 bytes)");
	open_err("{\"a\": " T2("F32", "[2]", "0", "8") "}", f8, 8, "tensor 'a': missing \"dtype\"");
	open_err("{\"a\": null}", f8, 8, "tensor 'a': entry is not a JSON object");
	char f16[16] = {0};
	open_err("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
	         " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
	         f16, 16, "tensor 'a' overlaps tensor 'b'");
	open_err("{\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
	         " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]},"
	         " \"z\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}}",
	         f16, 16, "tensor 'b' overlaps tensor 'a'");
	/* Order of reasons does not depend on the order of keys. */
	open_err("{\"a\": {\"data_offsets\": [0, 9], \"shape\": [-1], \"dtype\": \"Q\"}}", f16, 16, "tensor 'a': unknown dtype 'Q'");
	/* A very long name is cut in messages. */
	{
		char h[700];
		strcpy(h, "{\"");
		for (int i = 0; i < 300; i++)
			strcat(h, "\xc3\xa9");
		strcat(h, "\": 5}");
		char *path = tpath("bad.safetensors");
		nestrt_error e2;
		size_t hl = strlen(h);
		unsigned char *bb = malloc(8 + hl);
		for (int i = 0; i < 8; i++)
			bb[i] = (unsigned char)((uint64_t)hl >> (8 * i));
		memcpy(bb + 8, h, hl);
		write_file(path, bb, 8 + hl);
		free(bb);
		nestrt_weights *w = nestrt_weights_open(path, &e2);
		CHECK(!w && strstr(e2.message, "...': entry is not a JSON object") && strlen(e2.message) < 300,
		      "long name: '%s'", e2.message);
		free(path);
	}
}

/* A reason names the file and says something, on one line. */
static int good_reason(const char *msg, const char *path)
{
	size_t n = strlen(path);
	return strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ' && strlen(msg) > n + 5 &&
	       !strchr(msg, '\n');
}

/* Every byte of a good file replaced by a few values, and every truncation:
 * each result opens (and binds what it says) or is rejected with a reason.
 * Under AddressSanitizer this is the out-of-bounds check. */
static void test_mutations(void)
{
	unsigned char d[80];
	good_data(d);
	char *path = st_file("mut.safetensors", good_header, pad_for(good_header, 0), d, sizeof d);
	size_t n;
	unsigned char *orig = (unsigned char *)read_file(path, &n);
	unsigned char *b = malloc(n);
	static const unsigned char vals[] = {0x00, '"', '}', ']', ',', '9', '-', 0xff, '\\', ' '};
	int opened = 0, rejected = 0, bad = 0;
	for (size_t i = 0; i <= n; i++) {
		for (size_t v = 0; v <= sizeof vals; v++) {
			size_t len = n;
			memcpy(b, orig, n);
			if (v == sizeof vals)
				len = i; /* truncated */
			else if (i < n)
				b[i] = vals[v];
			else
				continue;
			write_file(path, b, len);
			nestrt_error err = {{0}};
			nestrt_weights *w = nestrt_weights_open(path, &err);
			if (!w) {
				rejected++;
				bad += !good_reason(err.message, path);
				continue;
			}
			opened++;
			for (int k = 0; k < nestrt_weights_count(w); k++) {
				nestrt_param info;
				const void *data;
				nestrt_weights_info(w, k, &info, NULL, NULL, NULL);
				if (info.dtype >= 0 && nestrt_weights_bind(w, &info, 1, &data, &err) < 0)
					bad++;
			}
			nestrt_weights_close(w);
		}
	}
	CHECK(bad == 0 && opened > 100 && rejected > 1000, "mutations: %d opened, %d rejected, %d bad", opened, rejected, bad);
	free(b);
	free(orig);
	free(path);
}

/* ------------------------------------------------------------ the corpus */

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}


/* Read path through a pipe, which has no size: a child writes the file into it. */
static int npy_read_pipe(const char *path, int *dt, int *rank, int64_t *shape, void **data, nestrt_error *err,
                         char *shown, size_t shownlen)
{
	int fd[2];
	if (pipe(fd) < 0)
		return -2;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -2;
	if (pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		close(fd[0]);
		size_t n;
		char *s = read_file(path, &n);
		size_t off = 0;
		while (s && off < n) {
			ssize_t w = write(fd[1], s + off, n - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		free(s);
		_exit(0);
	}
	close(fd[1]);
	snprintf(shown, shownlen, "/dev/fd/%d", fd[0]);
	int r = nestrt_npy_read(shown, dt, rank, shape, data, err);
	close(fd[0]);
	waitpid(pid, NULL, 0);
	return r;
}

static void test_corpus(const char *script)
{
	char *cdir = tpath("corpus");
	char *cmd = fmt("'%s' '%s' '%s'", python, script, cdir);
	int st = system(cmd);
	free(cmd);
	if (!CHECK(st == 0, "%s failed", script)) {
		free(cdir);
		return;
	}
	DIR *d = opendir(cdir);
	if (!CHECK(d != NULL, "cannot list %s", cdir)) {
		free(cdir);
		return;
	}
	int nst = 0, nnpy = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *name = e->d_name;
		if (name[0] == '.')
			continue;
		char *path = fmt("%s/%s", cdir, name);
		nestrt_error err = {{0}};
		if (ends_with(name, ".safetensors")) {
			nst++;
			nestrt_weights *w = nestrt_weights_open(path, &err);
			if (strcmp(name, "bad-empty-file.safetensors") == 0) {
				/* The one exception: an empty file is empty weights (nestrt.h),
				 * rejected as soon as a model wants a parameter from it. */
				nestrt_param a = {"a", NESTRT_F32, 1, {2}};
				const void *da;
				CHECK(w && nestrt_weights_count(w) == 0 && nestrt_weights_bind(w, &a, 1, &da, &err) < 0 &&
				      good_reason(err.message, path), "%s: '%s'", name, err.message);
			} else if (has_prefix(name, "bad-")) {
				CHECK(!w && good_reason(err.message, path), "%s: %s", name, w ? "accepted" : err.message);
			} else if (CHECK(w != NULL, "%s: %s", name, err.message)) {
				/* Bind every tensor nestc can hold, as the file describes it. */
				int n = nestrt_weights_count(w), ok = 1;
				for (int i = 0; i < n; i++) {
					nestrt_param info;
					const void *raw, *data;
					size_t nb;
					nestrt_weights_info(w, i, &info, NULL, &raw, &nb);
					if (info.dtype < 0)
						continue;
					int r = nestrt_weights_bind(w, &info, 1, &data, &err), same = r == 0;
					for (size_t k = 0; same && k < nb; k++) {
						unsigned char x = ((const unsigned char *)raw)[k], y = ((const unsigned char *)data)[k];
						same = info.dtype == NESTRT_BOOL ? y == (x != 0) : x == y;
					}
					if (!same || (uintptr_t)data % nestrt_dtype_size(info.dtype) != 0) {
						ok = 0;
						fprintf(stderr, "  %s: %s: %s\n", name, info.name, err.message);
					}
				}
				CHECK(ok, "%s: bind every tensor", name);
			}
			nestrt_weights_close(w);
		} else if (ends_with(name, ".npy")) {
			nnpy++;
			int dt, rank;
			int64_t shape[NESTRT_MAX_RANK];
			void *data = NULL;
			int r = nestrt_npy_read(path, &dt, &rank, shape, &data, &err);
			if (has_prefix(name, "bad-"))
				CHECK(r < 0 && good_reason(err.message, path), "%s: %s", name, r < 0 ? err.message : "accepted");
			else
				CHECK(r == 0, "%s: %s", name, err.message);
			free(data);
			data = NULL;
			char shown[64];
			r = npy_read_pipe(path, &dt, &rank, shape, &data, &err, shown, sizeof shown);
			if (has_prefix(name, "bad-"))
				CHECK(r == -1 && good_reason(err.message, shown), "%s (pipe): %s", name,
				      r < 0 ? err.message : "accepted");
			else
				CHECK(r == 0, "%s (pipe): %s", name, err.message);
			free(data);
		}
		free(path);
	}
	closedir(d);
	CHECK(nst >= 60 && nnpy >= 60, "corpus too small: %d safetensors, %d npy", nst, nnpy);
	cmd = fmt("rm -rf '%s'", cdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", cdir);
	free(cmd);
	free(cdir);
}

/* ------------------------------------------------------------ GGUF */

/* tests/io/gguf.py writes one tensor of every GGUF type (in v3 and v2) and
 * the f32 values NumPy's dequantization from ggml's block definitions gives
 * (DIR/NAME.npy): every tensor read, mapped and from memory must equal them
 * bit for bit, report its ggml type, and bind an f32 param. */
static nestrt_weights *open_mode(const char *path, int mode, char **image, nestrt_error *err)
{
	*image = NULL;
	if (mode == 2) {
		size_t n;
		*image = read_file(path, &n);
		return nestrt_weights_from_memory(*image, n, "image.gguf", err);
	}
	if (mode == 1)
		setenv("NESTRT_MMAP", "1", 1);
	nestrt_weights *w = nestrt_weights_open(path, err);
	unsetenv("NESTRT_MMAP");
	return w;
}

/* The process's resident memory in bytes (/proc/self/statm's second field). */
static long long resident_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long long size = -1, pages = -1;
	if (f) {
		if (fscanf(f, "%lld %lld", &size, &pages) != 2)
			pages = -1;
		fclose(f);
	}
	return pages < 0 ? -1 : pages * sysconf(_SC_PAGESIZE);
}

/* A GGUF file of one q8_0 matrix w[1024, 4096] (every block d = 1/64, q =
 * (i % 255) - 127), bound as held in q8_0 along its rows: its panels are
 * made from the file's blocks and its f32 place (16 MiB) is never touched,
 * so the instance takes about the blocks' 4.25 MiB, not 16 more (what lets
 * a 7B model in 4 bits open on a 24 GB machine) */
static void test_gguf_blocks_memory(void)
{
	enum { N = 1024, K = 4096, NB = N * K / 32 };
	unsigned char head[128];
	size_t h = 0;
	uint32_t u32;
	uint64_t u64;
#define PUT(v) (memcpy(head + h, &(v), sizeof(v)), h += sizeof(v))
	memcpy(head, "GGUF", 4), h = 4;
	u32 = 3, PUT(u32);
	u64 = 1, PUT(u64); /* tensors */
	u64 = 0, PUT(u64); /* key-values */
	u64 = 1, PUT(u64);
	head[h++] = 'w';
	u32 = 2, PUT(u32);
	u64 = K, PUT(u64); /* ne0: along the rows */
	u64 = N, PUT(u64);
	u32 = 8, PUT(u32); /* GGML_TYPE_Q8_0 */
	u64 = 0, PUT(u64);
#undef PUT
	size_t data = (h + 31) / 32 * 32;
	unsigned char *b = calloc(1, data + (size_t)NB * 34);
	memcpy(b, head, h);
	for (size_t i = 0; i < NB; i++) {
		unsigned char *blk = b + data + i * 34;
		blk[0] = 0x00, blk[1] = 0x24; /* f16 1/64 */
		for (int j = 0; j < 32; j++)
			blk[2 + j] = (unsigned char)(int8_t)((int)((i * 32 + (size_t)j) % 255) - 127);
	}
	char *path = tpath("blocks.gguf");
	write_file(path, b, data + (size_t)NB * 34);
	free(b);
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {N, K}}};
	static const int64_t plan[] = {1, 1, -1, K, N, 16, NESTRT_PACK_TRANS | NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT};
	static const int32_t formats[1] = {NESTRT_FMT_Q8_0 | 1 << 8};
	nestrt_model_desc desc = {"blk", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plan, formats};
	nestrt_error err = {{0}};
	long long before = resident_bytes();
	nestrt_weights *w = nestrt_weights_open(path, &err);
	nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
	long long grew = resident_bytes() - before;
	if (CHECK(m != NULL, "a q8_0 GGUF matrix held in q8_0: %s", err.message)) {
		int fmt = -1;
		const unsigned char *p = nestrt_packed_format(nestrt_model_ctx(m), nestrt_model_ctx(m)->params[0], K, N, 16,
		                                              NESTRT_PACK_TRANS, &fmt);
		/* panel 0, block row 0: the 16 rows' scales, then their quants */
		CHECK(p && fmt == NESTRT_FMT_Q8_0 && p[0] == 0x00 && p[1] == 0x24, "its panels hold the file's blocks");
		CHECK(before > 0 && grew < (long long)N * K * 4 / 2,
		      "it takes about its blocks' %d bytes, not its f32 size too: %lld bytes more resident", NB * 34, grew);
	}
	nestrt_model_free(m);
	nestrt_weights_close(w);
	free(path);
}

/* A bf16 .safetensors matrix w[2048, 4096] (16 MiB of 16-bit bytes) held in
 * q8_0: its copy is made from the 16-bit bytes, which are then given back
 * (pack_half), so the instance takes about the copy's 8.5 MiB (up to 2 MiB
 * more in huge pages), not the 16-bit bytes as well (a mutant that gave back
 * only a third of them passed make check: 5.3 MiB more here, 4.5 GB for a 7B
 * model in bf16) */
static void test_half_format_memory(void)
{
	enum { N = 2048, K = 4096 };
	uint16_t *hv = malloc((size_t)N * K * 2);
	for (size_t i = 0; i < (size_t)N * K; i++) {
		float f = (float)((int)(i % 200) - 100);
		uint32_t bits;
		memcpy(&bits, &f, 4);
		hv[i] = (uint16_t)(bits >> 16); /* exact in bf16 */
	}
	char hdr[128];
	snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[0,%d]}}", N, K, N * K * 2);
	char *path = st_file("half_q8.safetensors", hdr, (64 - (8 + strlen(hdr)) % 64) % 64, hv, (size_t)N * K * 2);
	free(hv);
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {N, K}}};
	static const int64_t plan[] = {1, 1, -1, K, N, 16, NESTRT_PACK_TRANS | NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT};
	static const int32_t formats[1] = {NESTRT_FMT_Q8_0 | 1 << 8};
	nestrt_model_desc desc = {"half", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plan, formats};
	nestrt_error err = {{0}};
	long long before = resident_bytes();
	nestrt_weights *w = nestrt_weights_open(path, &err);
	nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
	long long grew = resident_bytes() - before, copy = (long long)N * K / 32 * 34;
	if (CHECK(m != NULL, "a bf16 matrix held in q8_0: %s", err.message)) {
		int fmt = -1;
		const unsigned char *p = nestrt_packed_format(nestrt_model_ctx(m), nestrt_model_ctx(m)->params[0], K, N, 16,
		                                              NESTRT_PACK_TRANS, &fmt);
		CHECK(p && fmt == NESTRT_FMT_Q8_0, "its copy is in q8_0");
		CHECK(before > 0 && grew < copy + (5 << 19),
		      "it takes about its copy's %lld bytes, its 16-bit bytes given back: %lld bytes more resident", copy, grew);
	}
	nestrt_model_free(m);
	nestrt_weights_close(w);
	free(path);
}

static void test_gguf_values(const char *gdir)
{
	static const char *const files[] = {"all.gguf", "all.v2.gguf"};
	for (int f = 0; f < 2; f++) {
		for (int mode = 0; mode < 3; mode++) {
			static const char *const what[] = {"read", "mapped", "in memory"};
			char *path = fmt("%s/%s", gdir, files[f]), *image;
			nestrt_error err = {{0}};
			nestrt_weights *w = open_mode(path, mode, &image, &err);
			if (!CHECK(w != NULL, "%s (%s): %s", files[f], what[mode], err.message)) {
				free(path);
				free(image);
				continue;
			}
			int n = nestrt_weights_count(w), checked = 0;
			CHECK(n == 18, "%s: %d tensors", files[f], n);
			for (int i = 0; i < n; i++) {
				nestrt_param info;
				const char *fd;
				const void *raw, *bound;
				size_t nb;
				if (nestrt_weights_info(w, i, &info, &fd, &raw, &nb) < 0)
					continue;
				/* w_TYPE, w_TYPE_ref: the file's type as ggml spells it */
				char type[16];
				snprintf(type, sizeof type, "%s", info.name + 2);
				char *ref = strstr(type, "_ref");
				if (ref)
					*ref = 0;
				CHECK(strcmp(fd, type) == 0, "%s: %s reports type '%s'", files[f], info.name, fd);
				if (info.dtype < 0) {
					CHECK(strcmp(type, "i8") == 0 || strcmp(type, "i16") == 0, "%s: %s has no dtype",
					      files[f], info.name);
					continue;
				}
				char *np = fmt("%s/%s.npy", gdir, info.name);
				int dt, rank;
				int64_t shape[NESTRT_MAX_RANK];
				void *want = NULL;
				if (CHECK(nestrt_npy_read(np, &dt, &rank, shape, &want, &err) == 0, "%s", err.message)) {
					int same = dt == info.dtype && rank == info.rank;
					for (int k = 0; same && k < rank; k++)
						same = shape[k] == info.shape[k];
					same = same && nb == (size_t)nestrt_dtype_size(dt) * (nb / nestrt_dtype_size(dt)) &&
					       memcmp(raw, want, nb) == 0;
					CHECK(same, "%s (%s): %s differs from NumPy's dequantization", files[f], what[mode],
					      info.name);
					CHECK(nestrt_weights_bind(w, &info, 1, &bound, &err) == 0 && memcmp(bound, want, nb) == 0 &&
					      (uintptr_t)bound % nestrt_dtype_size(dt) == 0,
					      "%s (%s): bind %s: %s", files[f], what[mode], info.name, err.message);
					checked++;
				}
				free(want);
				free(np);
			}
			CHECK(checked == 16, "%s (%s): %d tensors checked", files[f], what[mode], checked);
			/* a type mismatch names the file's type */
			nestrt_param p = {"w_q6_K", NESTRT_F32, 2, {256, 3}};
			const void *d;
			char *want = fmt("%s: w_q6_K: expected f32[256, 3], file has q6_K[3, 256]",
			                 mode == 2 ? "image.gguf" : path);
			CHECK_MSG(nestrt_weights_bind(w, &p, 1, &d, &err), err, want);
			free(want);
			nestrt_weights_close(w);
			free(image);
			free(path);
		}
	}
}

static void test_gguf_meta(const char *gdir)
{
	char *path = fmt("%s/meta.gguf", gdir);
	nestrt_error err = {{0}};
	nestrt_weights *w = nestrt_weights_open(path, &err);
	if (!CHECK(w != NULL, "meta.gguf: %s", err.message)) {
		free(path);
		return;
	}
	CHECK(nestrt_weights_meta_count(w) == 32, "meta count %d", nestrt_weights_meta_count(w));
	CHECK(strcmp(nestrt_weights_meta_key(w, 0), "general.architecture") == 0 &&
	      strcmp(nestrt_weights_meta_key(w, 31), "general.alignment") == 0 && !nestrt_weights_meta_key(w, 32) &&
	      !nestrt_weights_meta_key(w, -1), "meta keys in file order");
	static const struct {
		const char *key;
		int type;
		int64_t v;
	} ints[] = {
		{"t.u8", NESTRT_META_U8, 200}, {"t.i8", NESTRT_META_I8, -100}, {"t.u16", NESTRT_META_U16, 60000},
		{"t.i16", NESTRT_META_I16, -30000}, {"t.u32", NESTRT_META_U32, 4000000000}, {"t.i32", NESTRT_META_I32, -2000000000},
		{"t.bool", NESTRT_META_BOOL, 1}, {"t.i64", NESTRT_META_I64, -(INT64_C(1) << 62)},
		{"llama.block_count", NESTRT_META_U32, 2}, {"general.alignment", NESTRT_META_U32, 64},
	};
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
		int64_t v = 0;
		int et = 0;
		uint64_t count = 0;
		CHECK(nestrt_weights_meta_type(w, ints[i].key, &et, &count) == ints[i].type && et == -1 && count == 1 &&
		      nestrt_weights_meta_int(w, ints[i].key, 0, &v, &err) == 0 && v == ints[i].v,
		      "meta %s: %lld (%s)", ints[i].key, (long long)v, err.message);
	}
	double x = 0;
	CHECK(nestrt_weights_meta_float(w, "t.f32", 0, &x, &err) == 0 && x == (double)0.1f, "t.f32 %g", x);
	CHECK(nestrt_weights_meta_float(w, "t.f64", 0, &x, &err) == 0 && x == 1e300, "t.f64 %g", x);
	CHECK(nestrt_weights_meta_float(w, "t.u64", 0, &x, &err) == 0 && x == 18446744073709551615.0, "t.u64 %g", x);
	CHECK(nestrt_weights_meta_float(w, "llama.rope.freq_base", 0, &x, &err) == 0 && x == 10000, "freq_base");
	CHECK(nestrt_weights_meta_float(w, "t.i16", 0, &x, &err) == 0 && x == -30000, "t.i16 as float");
	int64_t v;
	char *m = fmt("%s: metadata 't.u64': u64 18446744073709551615 does not fit in an int64", path);
	CHECK_MSG(nestrt_weights_meta_int(w, "t.u64", 0, &v, &err), err, m);
	free(m);
	const char *s;
	size_t len;
	CHECK(nestrt_weights_meta_string(w, "general.name", 0, &s, &len, &err) == 0 && len == 14 &&
	      memcmp(s, "tiny \xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 14) == 0, "general.name");
	CHECK(nestrt_weights_meta_string(w, "t.nul", 0, &s, &len, &err) == 0 && len == 3 && memcmp(s, "a\0b", 3) == 0,
	      "t.nul");
	CHECK(nestrt_weights_meta_string(w, "t.empty", 0, &s, &len, &err) == 0 && len == 0, "t.empty");
	/* arrays */
	int et;
	uint64_t count;
	CHECK(nestrt_weights_meta_type(w, "tokenizer.ggml.tokens", &et, &count) == NESTRT_META_ARRAY &&
	      et == NESTRT_META_STRING && count == 5, "tokens type");
	CHECK(nestrt_weights_meta_string(w, "tokenizer.ggml.tokens", 1, &s, &len, &err) == 0 && len == 6 &&
	      memcmp(s, "\xe2\x96\x81the", 6) == 0, "tokens[1]");
	CHECK(nestrt_weights_meta_string(w, "tokenizer.ggml.tokens", 2, &s, &len, &err) == 0 && len == 0, "tokens[2]");
	CHECK(nestrt_weights_meta_string(w, "tokenizer.ggml.tokens", 4, &s, &len, &err) == 0 && len == 6 &&
	      memcmp(s, "<0x0A>", 6) == 0, "tokens[4]");
	CHECK(nestrt_weights_meta_float(w, "tokenizer.ggml.scores", 2, &x, &err) == 0 && x == -2.25, "scores[2]");
	CHECK(nestrt_weights_meta_int(w, "tokenizer.ggml.token_type", 4, &v, &err) == 0 && v == 6, "token_type[4]");
	static const struct {
		const char *key;
		int et;
		uint64_t i;
		int64_t v;
	} elems[] = {{"t.a.u8", NESTRT_META_U8, 1, 255}, {"t.a.i8", NESTRT_META_I8, 0, -128},
	             {"t.a.u16", NESTRT_META_U16, 0, 65535}, {"t.a.i16", NESTRT_META_I16, 0, -32768},
	             {"t.a.u32", NESTRT_META_U32, 2, 3}, {"t.a.bool", NESTRT_META_BOOL, 1, 0},
	             {"t.a.i64", NESTRT_META_I64, 1, INT64_MAX}};
	for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++)
		CHECK(nestrt_weights_meta_type(w, elems[i].key, &et, NULL) == NESTRT_META_ARRAY && et == elems[i].et &&
		      nestrt_weights_meta_int(w, elems[i].key, elems[i].i, &v, &err) == 0 && v == elems[i].v,
		      "%s[%llu]: %lld", elems[i].key, (unsigned long long)elems[i].i, (long long)v);
	CHECK(nestrt_weights_meta_float(w, "t.a.f64", 1, &x, &err) == 0 && x == -0.25, "t.a.f64[1]");
	CHECK(nestrt_weights_meta_float(w, "t.a.u64", 0, &x, &err) == 0 && x == 9223372036854775808.0, "t.a.u64[0]");
	CHECK(nestrt_weights_meta_type(w, "t.a.empty", &et, &count) == NESTRT_META_ARRAY && et == NESTRT_META_F32 &&
	      count == 0, "empty array");
	CHECK(nestrt_weights_meta_type(w, "t.a.nested", &et, &count) == NESTRT_META_ARRAY && et == NESTRT_META_ARRAY &&
	      count == 3, "nested array");
	m = fmt("%s: metadata 't.a.nested' is an array of arrays", path);
	CHECK_MSG(nestrt_weights_meta_int(w, "t.a.nested", 0, &v, &err), err, m);
	free(m);
	m = fmt("%s: metadata 'tokenizer.ggml.scores': element 5 of an array of 5", path);
	CHECK_MSG(nestrt_weights_meta_float(w, "tokenizer.ggml.scores", 5, &x, &err), err, m);
	free(m);
	m = fmt("%s: metadata 't.u8': element 1 of a value of type u8, not an array", path);
	CHECK_MSG(nestrt_weights_meta_int(w, "t.u8", 1, &v, &err), err, m);
	free(m);
	m = fmt("%s: no metadata 'llama.context_length'", path);
	CHECK_MSG(nestrt_weights_meta_int(w, "llama.context_length", 0, &v, &err), err, m);
	CHECK(nestrt_weights_meta_type(w, "llama.context_length", &et, &count) == -1, "absent key's type");
	free(m);
	m = fmt("%s: metadata 'general.name' is of type string, not an integer", path);
	CHECK_MSG(nestrt_weights_meta_int(w, "general.name", 0, &v, &err), err, m);
	free(m);
	m = fmt("%s: metadata 't.u8' is of type u8, not a string", path);
	CHECK_MSG(nestrt_weights_meta_string(w, "t.u8", 0, &s, &len, &err), err, m);
	free(m);
	m = fmt("%s: metadata 't.bool' is of type bool, not a number", path);
	CHECK_MSG(nestrt_weights_meta_float(w, "t.bool", 0, &x, &err), err, m);
	free(m);
	CHECK(strcmp(nestrt_meta_type_name(NESTRT_META_STRING), "string") == 0 &&
	      strcmp(nestrt_meta_type_name(NESTRT_META_ARRAY), "array") == 0 && nestrt_meta_type_name(13) == NULL,
	      "type names");
	nestrt_weights_close(w);
	/* the same through a mapping; none for safetensors or no weights */
	setenv("NESTRT_MMAP", "1", 1);
	w = nestrt_weights_open(path, &err);
	unsetenv("NESTRT_MMAP");
	CHECK(w && nestrt_weights_meta_string(w, "tokenizer.ggml.tokens", 3, &s, &len, &err) == 0 && len == 2 &&
	      memcmp(s, "\xc3\xa9", 2) == 0, "mapped: tokens[3]");
	nestrt_weights_close(w);
	w = nestrt_weights_open(NULL, &err);
	CHECK(w && nestrt_weights_meta_count(w) == 0 && nestrt_weights_meta_key(w, 0) == NULL &&
	      nestrt_weights_meta_type(w, "general.name", NULL, NULL) == -1 && nestrt_weights_meta_count(NULL) == 0,
	      "no metadata without a GGUF file");
	nestrt_weights_close(w);
	free(path);
}

static void test_gguf(const char *corpus_script)
{
	/* gguf.py sits beside the corpus script */
	char *script = fmt("%.*sgguf.py", (int)(strrchr(corpus_script, '/') ? strrchr(corpus_script, '/') - corpus_script + 1 : 0),
	                   corpus_script);
	char *gdir = tpath("gguf");
	char *cmd = fmt("'%s' '%s' '%s'", python, script, gdir);
	int st = system(cmd);
	if (CHECK(st == 0, "%s failed", cmd)) {
		test_gguf_values(gdir);
		test_gguf_meta(gdir);
	}
	free(cmd);
	free(script);
	free(gdir);
}

/* ------------------------------------------------------------ dispatch */

static int block(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	int64_t *counter = bufs[0];
	*counter += dims[0];
	ws[0]++;
	(void)ctx;
	return 0;
}

static int gather(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	(void)bufs, (void)ws;
	if (dims[0] >= 256)
		return nestrt_gather_oob(ctx, dims[0], 256);
	return 0;
}

static int outer(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	for (int i = 0; i < 2; i++)
		if (nestrt_call(ctx, 0, bufs, dims, ws) < 0)
			return -1;
	return 7;
}

static const nestrt_slot test_slots[] = {{"block.0", block}, {"gather.0", gather}, {"outer", outer}, {"empty", NULL}};

typedef struct Worker {
	nestrt_ctx *ctx;
	int64_t counter;
} Worker;

static void *worker(void *arg)
{
	Worker *wk = arg;
	void *bufs[1] = {&wk->counter};
	int64_t dims[1] = {1};
	char ws[1] = {0};
	for (int i = 0; i < 10000; i++)
		nestrt_call(wk->ctx, 0, bufs, dims, ws);
	return NULL;
}

static void test_dispatch(void)
{
	nestrt_error err = {{0}};
	unsetenv("NESTRT_PROFILE");
	nestrt_ctx *ctx = nestrt_ctx_new("tiny", test_slots, 4, 3, 1000, &err);
	if (!CHECK(ctx != NULL, "ctx_new: %s", err.message))
		return;
	CHECK(ctx->nslots == 4 && ctx->slots == test_slots && strcmp(ctx->model, "tiny") == 0 && ctx->profile == 0,
	      "ctx fields");
	CHECK(ctx->ws && (uintptr_t)ctx->ws % 64 == 0 && ctx->ws_size == 1000, "workspace");
	int zero = 1;
	for (int i = 0; i < 1000; i++)
		zero &= ctx->ws[i] == 0;
	CHECK(zero, "workspace is zeroed");
	CHECK(ctx->params && !ctx->params[0] && !ctx->params[1] && !ctx->params[2], "params");
	CHECK(ctx->calls[0] == 0 && ctx->calls[3] == 0 && ctx->nanos[0] == 0 && ctx->err_code == 0, "counters start at 0");

	int64_t counter = 0, dims[1] = {1};
	void *bufs[1] = {&counter};
	int ok = 1;
	for (int i = 0; i < 12; i++)
		ok &= nestrt_call(ctx, 0, bufs, dims, ctx->ws) == 0;
	CHECK(ok && counter == 12 && ctx->calls[0] == 12 && ctx->ws[0] == 12, "12 calls: %llu", (unsigned long long)ctx->calls[0]);
	CHECK(ctx->nanos[0] == 0, "no timing without NESTRT_PROFILE");
	CHECK(nestrt_call(ctx, 2, bufs, dims, ctx->ws + 64) == 7 && ctx->calls[2] == 1 && ctx->calls[0] == 14 &&
	      ctx->ws[64] == 2, "nested calls are counted, return values passed on");

	dims[0] = 5;
	CHECK(nestrt_call(ctx, 1, bufs, dims, ctx->ws) == 0 && ctx->err_code == 0, "gather in range");
	dims[0] = 300;
	CHECK(nestrt_call(ctx, 1, bufs, dims, ctx->ws) == -1 && ctx->err_code == NESTRT_ERR_RUNTIME &&
	      strcmp(ctx->err_message, "gather index 300 out of range [0, 256)") == 0, "gather oob: %d '%s'",
	      ctx->err_code, ctx->err_message);
	CHECK(nestrt_fail(ctx, "later") == -1 && strcmp(ctx->err_message, "gather index 300 out of range [0, 256)") == 0,
	      "the first error wins");
	nestrt_clear_error(ctx);
	CHECK(ctx->err_code == 0 && ctx->err_message[0] == 0, "clear_error");
	CHECK(nestrt_gather_oob(ctx, -1, 50257) == -1 && strcmp(ctx->err_message, "gather index -1 out of range [0, 50257)") == 0,
	      "gather -1: '%s'", ctx->err_message);
	nestrt_clear_error(ctx);
	CHECK(nestrt_gather_oob_at(ctx, 7, 4, "m.nest:3:10") == -1 &&
	      strcmp(ctx->err_message, "m.nest:3:10: gather index 7 out of range [0, 4)") == 0,
	      "gather_oob_at names the place: '%s'", ctx->err_message);
	nestrt_clear_error(ctx);
	CHECK(nestrt_call(ctx, 4, bufs, dims, ctx->ws) == -1 && strcmp(ctx->err_message, "dispatch slot 4 out of range [0, 4)") == 0,
	      "bad slot: '%s'", ctx->err_message);
	nestrt_clear_error(ctx);
	CHECK(nestrt_call(ctx, -1, bufs, dims, ctx->ws) == -1 && strcmp(ctx->err_message, "dispatch slot -1 out of range [0, 4)") == 0,
	      "bad slot: '%s'", ctx->err_message);
	nestrt_clear_error(ctx);
	CHECK(nestrt_call(ctx, 3, bufs, dims, ctx->ws) == -1 && strcmp(ctx->err_message, "dispatch slot 3 has no function") == 0 &&
	      ctx->calls[3] == 0, "NULL function: '%s'", ctx->err_message);
	nestrt_clear_error(ctx);
	char longmsg[600];
	memset(longmsg, 'x', sizeof longmsg - 1);
	longmsg[sizeof longmsg - 1] = 0;
	CHECK(nestrt_fail(ctx, longmsg) == -1 && strlen(ctx->err_message) == 255, "long messages are cut");
	nestrt_clear_error(ctx);

	/* Counting is exact with several threads calling at once. */
	uint64_t before = ctx->calls[0];
	pthread_t th[4];
	Worker wk[4];
	for (int i = 0; i < 4; i++) {
		wk[i] = (Worker){ctx, 0};
		pthread_create(&th[i], NULL, worker, &wk[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK(ctx->calls[0] - before == 40000, "threads: %llu calls", (unsigned long long)(ctx->calls[0] - before));
	nestrt_ctx_free(ctx);
	nestrt_ctx_free(NULL);

	ctx = nestrt_ctx_new("none", NULL, 0, 0, 0, &err);
	CHECK(ctx && ctx->ws && (uintptr_t)ctx->ws % 64 == 0 && ctx->params && ctx->calls, "empty context: %s", err.message);
	nestrt_ctx_free(ctx);
	CHECK(!nestrt_ctx_new("m", NULL, 2, 0, 0, &err) && strcmp(err.message, "nestrt_ctx_new: invalid arguments") == 0,
	      "NULL slots: '%s'", err.message);
	CHECK(!nestrt_ctx_new("m", test_slots, -1, 0, 0, &err), "negative nslots");
	CHECK(!nestrt_ctx_new("m", test_slots, 1, 0, SIZE_MAX - 10, &err) &&
	      strstr(err.message, "cannot allocate a workspace of") != NULL, "huge workspace: '%s'", err.message);
	setenv("NESTRT_PROFILE", "0", 1);
	ctx = nestrt_ctx_new("m", test_slots, 1, 0, 0, &err);
	CHECK(ctx && ctx->profile == 0, "NESTRT_PROFILE=0 is off");
	nestrt_ctx_free(ctx);
	unsetenv("NESTRT_PROFILE");
}

/* ------------------------------------------------------------ profile */

static int busy(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	(void)ctx, (void)bufs, (void)dims, (void)ws;
	struct timespec ts = {0, 200000}; /* 0.2 ms */
	nanosleep(&ts, NULL);
	return 0;
}

static int calls_busy(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	return nestrt_call(ctx, 0, bufs, dims, ws);
}

static const nestrt_slot prof_slots[] = {
	{"block.0", busy}, {"a_rather_long_slot_name.17", calls_busy}, {"unused", busy}};
static nestrt_ctx *leaked; /* never freed: its profile comes from atexit */

/* The child: two contexts, one freed, one left for exit. */
static int profile_child(void)
{
	nestrt_error err;
	nestrt_ctx *a = nestrt_ctx_new("tiny", prof_slots, 3, 0, 64, &err);
	leaked = nestrt_ctx_new("leaked", prof_slots, 1, 0, 0, &err);
	if (!a || !leaked) {
		fprintf(stderr, "ctx_new: %s\n", err.message);
		return 1;
	}
	for (int i = 0; i < 9; i++)
		nestrt_call(a, 0, NULL, NULL, a->ws);
	for (int i = 0; i < 3; i++)
		nestrt_call(a, 1, NULL, NULL, a->ws); /* each calls block.0 once more: 12 in all */
	nestrt_call(leaked, 0, NULL, NULL, leaked->ws);
	nestrt_ctx_free(a);
	return 0;
}

/* Run this binary with --profile-child; collect stderr. */
static char *run_child(const char *profile_env, int *status)
{
	char *out = tpath("child.err");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(99);
		if (profile_env)
			setenv("NESTRT_PROFILE", profile_env, 1);
		else
			unsetenv("NESTRT_PROFILE");
		execl(self, self, "--profile-child", (char *)NULL);
		_exit(98);
	}
	waitpid(pid, status, 0);
	size_t n;
	char *s = read_file(out, &n);
	free(out);
	if (s)
		s[n] = 0; /* read_file leaves room: cap > len unless len == cap, handled by realloc */
	return s;
}

/* Parse "  NAME<spaces> COUNT calls <spaces>TIME ms"; check the column layout. */
static int parse_line(const char *line, const char *name, int namew, uint64_t *calls, double *ms, int *len)
{
	char want[128];
	snprintf(want, sizeof want, "  %-*s ", namew, name);
	if (strncmp(line, want, strlen(want)) != 0)
		return 0;
	const char *p = line + strlen(want);
	char *end;
	*calls = strtoull(p, &end, 10);
	if (end == p || strncmp(end, " calls ", 7) != 0)
		return 0;
	p = end + 7;
	*ms = strtod(p, &end);
	if (end == p || strcmp(end, " ms") != 0)
		return 0;
	*len = (int)strlen(line);
	return 1;
}

static void test_profile(void)
{
	int status;
	char *s = run_child("1", &status);
	if (!CHECK(s && WIFEXITED(status) && WEXITSTATUS(status) == 0, "profile child failed (status %d): %s", status,
	           s ? s : ""))
		goto out;
	/* Split into lines. */
	char *lines[32];
	int n = 0;
	for (char *p = s; *p && n < 32;) {
		char *nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = 0;
		lines[n++] = p;
		p = nl + 1;
	}
	if (!CHECK(n == 8, "profile: %d lines, want 8", n))
		goto out;
	CHECK(strcmp(lines[0], "nestrt profile: tiny") == 0, "line 0: '%s'", lines[0]);
	static const char *const names[] = {"block.0", "a_rather_long_slot_name.17", "unused", "total"};
	uint64_t c[4];
	double ms[4];
	int len[4], ok = 1;
	for (int i = 0; i < 4; i++)
		ok &= CHECK(parse_line(lines[1 + i], names[i], 26, &c[i], &ms[i], &len[i]), "line %d: '%s'", 1 + i, lines[1 + i]);
	if (ok) {
		CHECK(c[0] == 12 && c[1] == 3 && c[2] == 0 && c[3] == 15, "counts %llu %llu %llu %llu", (unsigned long long)c[0],
		      (unsigned long long)c[1], (unsigned long long)c[2], (unsigned long long)c[3]);
		CHECK(len[0] == len[1] && len[1] == len[2] && len[2] == len[3], "columns not aligned");
		/* Width: name 26, count 2 (for 15), time at least 9. */
		CHECK(strstr(lines[1], "  block.0                    12 calls ") == lines[1], "layout: '%s'", lines[1]);
		CHECK(strstr(lines[3], "unused                      0 calls     0.000 ms") != NULL, "layout: '%s'", lines[3]);
		CHECK(ms[0] >= 12 * 0.2 && ms[1] >= 3 * 0.2 && ms[1] <= ms[0] + 0.5, "times %.3f %.3f", ms[0], ms[1]);
		/* The total counts outermost calls only: block.0's 3 nested calls not twice. */
		CHECK(ms[3] >= ms[0] - 0.002 && ms[3] <= ms[0] + ms[1] - 0.3, "total %.3f vs %.3f + %.3f", ms[3], ms[0], ms[1]);
	}
	CHECK(strcmp(lines[5], "nestrt profile: leaked") == 0, "leaked header: '%s'", lines[5]);
	uint64_t lc;
	double lms;
	int ll;
	CHECK(parse_line(lines[6], "block.0", 16, &lc, &lms, &ll) && lc == 1 && strncmp(lines[6], "  block.0          1 calls ", 27) == 0,
	      "leaked line: '%s'", lines[6]);
	CHECK(parse_line(lines[7], "unused", 16, &lc, &lms, &ll) == 0 && parse_line(lines[7], "total", 16, &lc, &lms, &ll) && lc == 1,
	      "leaked total: '%s'", lines[7]);
	free(s);
	s = NULL;

	/* The example layout of the interface: 12 calls of block.0. */
	s = run_child(NULL, &status);
	CHECK(s && WIFEXITED(status) && WEXITSTATUS(status) == 0 && s[0] == 0, "no profile without NESTRT_PROFILE: '%s'",
	      s ? s : "");
	free(s);
	s = run_child("yes", &status);
	CHECK(s && WIFEXITED(status) && WEXITSTATUS(status) == 0 && s[0] == 0, "no profile with NESTRT_PROFILE=yes: '%s'",
	      s ? s : "");
out:
	free(s);
}

/* ------------------------------------------------------------ npy */

static void fill_pattern(int dt, void *data, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		switch (dt) {
		case NESTRT_BOOL: ((unsigned char *)data)[i] = (unsigned char)(i % 3 == 1); break;
		case NESTRT_I32: ((int32_t *)data)[i] = (int32_t)(i * 7 - 100); break;
		case NESTRT_I64: ((int64_t *)data)[i] = (int64_t)i * 1000000007LL - (1LL << 40); break;
		case NESTRT_F32: ((float *)data)[i] = (float)i * 0.25f - 3.0f; break;
		case NESTRT_F64: ((double *)data)[i] = (double)i / 3.0 - 1e10; break;
		/* finite bits of either sign (no NaN, no -0) */
		case NESTRT_F16:
		case NESTRT_BF16: ((uint16_t *)data)[i] = (uint16_t)((i * 7) % 0x7c00 | (i & 1) << 15); break;
		case NESTRT_I8: ((int8_t *)data)[i] = (int8_t)((i * 7 + 28) % 256 - 128); break;
		case NESTRT_U8: ((uint8_t *)data)[i] = (uint8_t)((i * 7) % 256); break;
		case NESTRT_I16: ((int16_t *)data)[i] = (int16_t)((i * 7 + 28) % 65536 - 32768); break;
		case NESTRT_U16: ((uint16_t *)data)[i] = (uint16_t)((i * 7) % 65536); break;
		default: abort();
		}
	}
}

static const struct {
	int rank;
	int64_t shape[NESTRT_MAX_RANK];
} rt_shapes[] = {
	{0, {0}}, {1, {5}}, {1, {0}}, {2, {3, 4}}, {3, {2, 3, 4}}, {3, {2, 0, 3}},
	{8, {1, 2, 1, 3, 1, 2, 1, 2}}, {1, {123457}}, {2, {1000000000000, 0}},
};
#define NSHAPES ((int)(sizeof rt_shapes / sizeof rt_shapes[0]))

/* Python: read each rt-D-S.npy of ours, check it against the same pattern,
 * write py-D-S.npy with np.save for a byte comparison. */
static const char numpy_checker[] =
	"import sys, glob, os, numpy as np\n"
	"d = sys.argv[1]\n"
	"names = {'bool': '|b1', 'i32': '<i4', 'i64': '<i8', 'f32': '<f4', 'f64': '<f8', 'f16': '<f2', 'bf16': '<u2',\n"
	"         'i8': '|i1', 'u8': '|u1', 'i16': '<i2', 'u16': '<u2'}\n"
	"bad = 0\n"
	"for p in sorted(glob.glob(d + '/rt-*.npy')):\n"
	"    a = np.load(p)\n"
	"    dt = os.path.basename(p).split('-')[1]\n"
	"    n = a.size\n"
	"    i = np.arange(n, dtype=np.int64)\n"
	"    if dt == 'bool': want = (i % 3 == 1)\n"
	"    elif dt == 'i32': want = (i * 7 - 100).astype('<i4')\n"
	"    elif dt == 'i64': want = i * 1000000007 - (1 << 40)\n"
	"    elif dt == 'f32': want = (i.astype('<f4') * np.float32(0.25) - np.float32(3)).astype('<f4')\n"
	"    elif dt in ('f16', 'bf16'): want = ((i * 7) % 0x7c00 | (i & 1) << 15).astype('<u2').view(names[dt])\n"
	"    elif dt == 'i8': want = ((i * 7 + 28) % 256 - 128).astype('|i1')\n"
	"    elif dt == 'u8': want = ((i * 7) % 256).astype('|u1')\n"
	"    elif dt == 'i16': want = ((i * 7 + 28) % 65536 - 32768).astype('<i2')\n"
	"    elif dt == 'u16': want = ((i * 7) % 65536).astype('<u2')\n"
	"    else: want = i.astype('<f8') / 3.0 - 1e10\n"
	"    if a.dtype != np.dtype(names[dt]) or not np.array_equal(a.reshape(-1), want):\n"
	"        print('numpy disagrees with', p); bad += 1\n"
	"    np.save(p.replace('/rt-', '/py-'), a)\n"
	"sys.exit(1 if bad else 0)\n";

static void test_npy_roundtrip(void)
{
	nestrt_error err = {{0}};
	int written = 0;
	for (int dt = 0; dt < NESTRT_NDTYPES; dt++) {
		for (int s = 0; s < NSHAPES; s++) {
			int rank = rt_shapes[s].rank;
			const int64_t *shape = rt_shapes[s].shape;
			int64_t n = 1;
			for (int i = 0; i < rank; i++)
				n *= shape[i];
			size_t nbytes = (size_t)n * nestrt_dtype_size(dt);
			void *data = malloc(nbytes ? nbytes : 1);
			fill_pattern(dt, data, n);
			char name[64];
			snprintf(name, sizeof name, "rt-%s-%d.npy", nestrt_dtype_name(dt), s);
			char *path = tpath(name);
			int r = nestrt_npy_write(path, dt, rank, shape, n ? data : NULL, &err);
			if (CHECK(r == 0, "%s: write: %s", name, err.message)) {
				written++;
				int rdt, rrank;
				int64_t rshape[NESTRT_MAX_RANK];
				void *rdata;
				r = nestrt_npy_read(path, &rdt, &rrank, rshape, &rdata, &err);
				if (CHECK(r == 0, "%s: read: %s", name, err.message)) {
					/* bf16 is written as its bits, '<u2', which reads as u16 */
					int same = rdt == (dt == NESTRT_BF16 ? NESTRT_U16 : dt) && rrank == rank && memcmp(rshape, shape, sizeof(int64_t) * (size_t)rank) == 0 &&
					           (nbytes == 0 || memcmp(rdata, data, nbytes) == 0);
					for (int i = rank; i < NESTRT_MAX_RANK; i++)
						same &= rshape[i] == 0;
					CHECK(same, "%s: round trip differs", name);
					CHECK(rdata != NULL, "%s: data is non-NULL", name);
					free(rdata);
				}
				size_t flen;
				char *f = read_file(path, &flen);
				size_t hdr = f ? flen - nbytes : 0;
				CHECK(f && hdr % 64 == 0 && f[hdr - 1] == '\n' && memcmp(f, "\x93NUMPY\x01\x00", 8) == 0 &&
				      (size_t)((unsigned char)f[8] | (unsigned char)f[9] << 8) == hdr - 10,
				      "%s: header layout", name);
				free(f);
			}
			free(path);
			free(data);
		}
	}
	if (!CHECK(run_python(numpy_checker) == 0, "numpy rejected our files"))
		return;
	/* Byte for byte what np.save writes. */
	for (int dt = 0; dt < NESTRT_NDTYPES; dt++)
		for (int s = 0; s < NSHAPES; s++) {
			char a[64], b[64];
			snprintf(a, sizeof a, "rt-%s-%d.npy", nestrt_dtype_name(dt), s);
			snprintf(b, sizeof b, "py-%s-%d.npy", nestrt_dtype_name(dt), s);
			char *pa = tpath(a), *pb = tpath(b);
			size_t na, nb;
			char *fa = read_file(pa, &na), *fb = read_file(pb, &nb);
			CHECK(fa && fb && na == nb && memcmp(fa, fb, na) == 0, "%s differs from np.save's %s", a, b);
			free(fa), free(fb), free(pa), free(pb);
		}
}

static const char numpy_writer[] =
	"import sys, numpy as np\n"
	"from numpy.lib import format as fmt\n"
	"d = sys.argv[1]\n"
	"def save(name, a): np.save(d + '/' + name, a)\n"
	"a = np.arange(12, dtype='<f4').reshape(3, 4) * 0.5\n"
	"save('np-f32.npy', a)\n"
	"save('np-f64.npy', np.arange(6, dtype='<f8').reshape(2, 1, 3) - 2.5)\n"
	"save('np-i32.npy', np.arange(5, dtype='<i4') - 2)\n"
	"save('np-i64.npy', np.array([-(2**40), 0, 2**62], dtype='<i8'))\n"
	"save('np-bool.npy', np.array([[True, False], [False, True]]))\n"
	"save('np-0d.npy', np.array(3.5, dtype='<f4'))\n"
	"save('np-empty.npy', np.zeros((2, 0), dtype='<f4'))\n"
	"save('np-bigdim.npy', np.zeros((70000,), dtype='|b1'))\n"
	"save('np-be.npy', np.arange(4, dtype='>f4'))\n"
	"save('np-fortran.npy', np.asfortranarray(a))\n"
	"save('np-object.npy', np.array([1, 'x', None], dtype=object))\n"
	"save('np-f16.npy', np.array([1.5, -2, 65504], dtype='<f2'))\n"
	"save('np-u8.npy', np.array([0, 7, 255], dtype='u1'))\n"
	"save('np-u32.npy', np.zeros(3, dtype='<u4'))\n"
	"save('np-c8.npy', np.zeros(3, dtype='<c8'))\n"
	"save('np-struct.npy', np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')]))\n"
	"for v in ((1, 0), (2, 0), (3, 0)):\n"
	"    with open(d + '/np-v%d.npy' % v[0], 'wb') as f:\n"
	"        fmt.write_array(f, a, version=v)\n";

static void *read_ok(const char *name, int dt, int rank, const int64_t *shape)
{
	char *path = tpath(name);
	int rdt, rrank;
	int64_t rshape[NESTRT_MAX_RANK];
	void *data = NULL;
	nestrt_error err;
	int r = nestrt_npy_read(path, &rdt, &rrank, rshape, &data, &err);
	free(path);
	if (!CHECK(r == 0, "%s: %s", name, err.message))
		return NULL;
	int ok = rdt == dt && rrank == rank;
	for (int i = 0; ok && i < rank; i++)
		ok = rshape[i] == shape[i];
	CHECK(ok, "%s: wrong dtype/shape", name);
	return data;
}

static void read_bad(const char *name, const char *want)
{
	char *path = tpath(name);
	int dt, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *data = NULL;
	nestrt_error err;
	int r = nestrt_npy_read(path, &dt, &rank, shape, &data, &err);
	char *full = fmt("%s: %s", path, want);
	CHECK(r < 0 && strcmp(err.message, full) == 0, "want '%s', got '%s'", full, r < 0 ? err.message : "accepted");
	free(full);
	free(path);
	free(data);
}

static void test_npy_numpy(void)
{
	if (!CHECK(run_python(numpy_writer) == 0, "numpy writer script failed"))
		return;
	float *f = read_ok("np-f32.npy", NESTRT_F32, 2, (int64_t[]){3, 4});
	if (f) {
		CHECK(f[0] == 0.0f && f[1] == 0.5f && f[11] == 5.5f, "np-f32 values");
		free(f);
	}
	for (int v = 1; v <= 3; v++) {
		char name[32];
		snprintf(name, sizeof name, "np-v%d.npy", v);
		f = read_ok(name, NESTRT_F32, 2, (int64_t[]){3, 4});
		if (f)
			CHECK(f[11] == 5.5f, "%s values", name);
		free(f);
	}
	double *d = read_ok("np-f64.npy", NESTRT_F64, 3, (int64_t[]){2, 1, 3});
	if (d)
		CHECK(d[0] == -2.5 && d[5] == 2.5, "np-f64 values");
	free(d);
	int32_t *i4 = read_ok("np-i32.npy", NESTRT_I32, 1, (int64_t[]){5});
	if (i4)
		CHECK(i4[0] == -2 && i4[4] == 2, "np-i32 values");
	free(i4);
	int64_t *i8 = read_ok("np-i64.npy", NESTRT_I64, 1, (int64_t[]){3});
	if (i8)
		CHECK(i8[0] == -(1LL << 40) && i8[2] == (1LL << 62), "np-i64 values");
	free(i8);
	unsigned char *b = read_ok("np-bool.npy", NESTRT_BOOL, 2, (int64_t[]){2, 2});
	if (b)
		CHECK(b[0] == 1 && b[1] == 0 && b[2] == 0 && b[3] == 1, "np-bool values");
	free(b);
	f = read_ok("np-0d.npy", NESTRT_F32, 0, NULL);
	if (f)
		CHECK(f[0] == 3.5f, "np-0d value");
	free(f);
	free(read_ok("np-empty.npy", NESTRT_F32, 2, (int64_t[]){2, 0}));
	free(read_ok("np-bigdim.npy", NESTRT_BOOL, 1, (int64_t[]){70000}));
	read_bad("np-be.npy", "big-endian arrays are not supported (descr '>f4')");
	read_bad("np-fortran.npy", "fortran_order arrays are not supported");
	read_bad("np-object.npy", "object arrays are not supported (descr '|O')");
	uint16_t *h = read_ok("np-f16.npy", NESTRT_F16, 1, (int64_t[]){3});
	if (h)
		CHECK(h[0] == 0x3e00 && h[1] == 0xc000 && h[2] == 0x7bff, "np-f16 bits");
	free(h);
	unsigned char *u = read_ok("np-u8.npy", NESTRT_U8, 1, (int64_t[]){3});
	if (u)
		CHECK(u[0] == 0 && u[1] == 7 && u[2] == 255, "np-u8 values");
	free(u);
	read_bad("np-u32.npy", "unsupported dtype (descr '<u4'; supported: '<f4' '<f8' '<f2' '<i4' '<i8' '<i2' '<u2' '|i1' "
	                       "'|u1' '|b1')");
	read_bad("np-c8.npy", "unsupported dtype (descr '<c8'; supported: '<f4' '<f8' '<f2' '<i4' '<i8' '<i2' '<u2' '|i1' "
	                      "'|u1' '|b1')");
	read_bad("np-struct.npy", "structured arrays are not supported");
	char *p = tpath("absent.npy");
	char *want = fmt("%s: cannot open: No such file or directory", p);
	int dt, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *data;
	nestrt_error err;
	CHECK(nestrt_npy_read(p, &dt, &rank, shape, &data, &err) < 0 && strcmp(err.message, want) == 0, "got '%s'", err.message);
	free(want);
	free(p);
}

static void test_npy_write_errors(void)
{
	nestrt_error err;
	char *p = tpath("w.npy");
	int64_t shape[2] = {2, 2};
	float v[4] = {1, 2, 3, 4};
	char *want = fmt("%s: cannot write dtype %d", p, NESTRT_NDTYPES);
	CHECK_MSG(nestrt_npy_write(p, NESTRT_NDTYPES, 2, shape, v, &err), err, want);
	free(want);
	want = fmt("%s: cannot write rank 9", p);
	CHECK_MSG(nestrt_npy_write(p, NESTRT_F32, 9, shape, v, &err), err, want);
	free(want);
	int64_t neg[1] = {-1};
	want = fmt("%s: cannot write f32[-1]: invalid shape", p);
	CHECK_MSG(nestrt_npy_write(p, NESTRT_F32, 1, neg, v, &err), err, want);
	free(want);
	want = fmt("%s: no data", p);
	CHECK_MSG(nestrt_npy_write(p, NESTRT_F32, 2, shape, NULL, &err), err, want);
	free(want);
	free(p);

	p = tpath("no-such-dir/w.npy");
	want = fmt("%s: cannot create: No such file or directory", p);
	CHECK_MSG(nestrt_npy_write(p, NESTRT_F32, 2, shape, v, &err), err, want);
	free(want);
	free(p);

	/* Replacing a file: new contents, permissions from the umask, no temp file left. */
	p = tpath("replace.npy");
	write_file(p, "old", 3);
	mode_t um = umask(022);
	int r = nestrt_npy_write(p, NESTRT_F32, 2, shape, v, &err);
	umask(um);
	struct stat st;
	CHECK(r == 0 && stat(p, &st) == 0 && (st.st_mode & 0777) == 0644 && st.st_size == 128 + 16, "replace: %s",
	      r ? err.message : "wrong mode or size");
	DIR *d = opendir(dir);
	int tmps = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		tmps += strstr(e->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	CHECK(tmps == 0, "%d temp files left behind", tmps);
	free(p);

	/* A non-regular file is written in place. */
	CHECK(nestrt_npy_write("/dev/null", NESTRT_F32, 2, shape, v, &err) == 0, "/dev/null: %s", err.message);
}

/* ------------------------------------------------------------ main */

static int single_file(const char *mode, const char *path)
{
	nestrt_error err;
	if (strcmp(mode, "--open-weights") == 0) {
		nestrt_weights *w = nestrt_weights_open(path, &err);
		if (!w) {
			printf("%s\n", err.message);
			return 1;
		}
		printf("OK (%d tensors)\n", nestrt_weights_count(w));
		nestrt_weights_close(w);
		return 0;
	}
	int dt, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *data;
	if (nestrt_npy_read(path, &dt, &rank, shape, &data, &err) < 0) {
		printf("%s\n", err.message);
		return 1;
	}
	free(data);
	printf("OK %s rank %d\n", nestrt_dtype_name(dt), rank);
	return 0;
}

/* nestrt_packed: the panel layout, what is and is not packed, the cache and
 * NESTRT_PREPACK=0. Two params: w f32[3, 5] and d f64[2, 3]. The pack plans
 * ask for w three ways from the entry points, and for d from the variant in
 * slot 0, to which the entry points pass d as argument 0: everything is
 * packed when the instance is created, nothing later. */
static const int64_t slot0_plan[] = {1, 1, 0, 2, 3, 2, NESTRT_PACK_F64};
static const int64_t *const slot_plans[1] = {slot0_plan};
static const int64_t entry_plan[] = {4,
	1, -1, 3, 5, 4, 0,
	1, -1, 5, 3, 2, NESTRT_PACK_TRANS,
	1, -1, 3, 4, 4, 0,
	2, -2, 0, 0, 0, 0};
static const nestrt_param packtest_params[2] = {
	{"w", NESTRT_F32, 2, {3, 5}},
	{"d", NESTRT_F64, 2, {2, 3}},
};
static const nestrt_slot packtest_slots[1] = {{"v.0", NULL}};
static const nestrt_model_desc packtest_desc = {"packtest", packtest_params, 2, packtest_slots, 1, 0, "test", NULL, 0,
                                                slot_plans, entry_plan, NULL};

static size_t packtest_image(char *image)
{
	const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[0,60]},"
	                  "\"d\":{\"dtype\":\"F64\",\"shape\":[2,3],\"data_offsets\":[64,112]}}";
	size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
	uint64_t n = hl + pad;
	memset(image, 0, 512);
	memcpy(image, &n, 8);
	memcpy(image + 8, hdr, hl);
	memset(image + 8 + hl, ' ', pad);
	float wv[15];
	double dv[6];
	for (int i = 0; i < 15; i++)
		wv[i] = (float)(i + 1);
	for (int i = 0; i < 6; i++)
		dv[i] = 0.5 * (i + 1);
	memcpy(image + 8 + n, wv, sizeof wv);
	memcpy(image + 8 + n + 64, dv, sizeof dv);
	return 8 + n + 112;
}

static nestrt_model *packed_model(nestrt_weights **w)
{
	static char image[512];
	size_t size = packtest_image(image);
	nestrt_error err = {{0}};
	*w = nestrt_weights_from_memory(image, size, "packtest", &err);
	if (!CHECK(*w != NULL, "packtest weights: %s", err.message))
		return NULL;
	nestrt_model *m = nestrt_model_new(&packtest_desc, *w, &err);
	CHECK(m != NULL, "packtest model: %s", err.message);
	return m;
}

static void test_packed(void)
{
	unsetenv("NESTRT_PREPACK");
	nestrt_weights *w;
	nestrt_model *m = packed_model(&w);
	if (!m) {
		nestrt_weights_close(w);
		return;
	}
	nestrt_ctx *ctx = nestrt_model_ctx(m);
	const float *b = ctx->params[0];
	/* B[3, 5] in panels of 4 columns: panel 0 holds columns 0-3 of each row,
	 * panel 1 column 4 and three zeros */
	const float *p = nestrt_packed(ctx, b, 3, 5, 4, 0);
	static const float want[24] = {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 5, 0, 0, 0, 10, 0, 0, 0, 15, 0, 0, 0};
	int same = p != NULL;
	for (int i = 0; same && i < 24; i++)
		same = p[i] == want[i];
	CHECK(same, "B[3, 5] packed in panels of 4");
	CHECK(p && (uintptr_t)p % 64 == 0, "packed copy is 64-byte aligned");
	CHECK(nestrt_packed(ctx, b, 3, 5, 4, 0) == p, "a second request gets the same copy");
	/* the same param as Bt[3, 5] of B[5, 3]: k = 5, n = 3, panels of 2 */
	const float *t = nestrt_packed(ctx, b, 5, 3, 2, NESTRT_PACK_TRANS);
	static const float want_t[20] = {1, 6, 2, 7, 3, 8, 4, 9, 5, 10, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0};
	same = t != NULL && t != p;
	for (int i = 0; same && i < 20; i++)
		same = t[i] == want_t[i];
	CHECK(same, "Bt[3, 5] packed as B[5, 3] in panels of 2");
	/* only part of the param, as a [3, 4] view from its start: still its data */
	const float *q = nestrt_packed(ctx, b, 3, 4, 4, 0);
	CHECK(q && q[0] == 1 && q[3] == 4 && q[4] == 5 && q[8] == 9, "a [3, 4] prefix is packed with its own shape");
	const double *d = nestrt_packed(ctx, ctx->params[1], 2, 3, 2, NESTRT_PACK_F64);
	CHECK(d && d[0] == 0.5 && d[1] == 1.0 && d[2] == 2.0 && d[3] == 2.5 && d[4] == 1.5 && d[5] == 0 && d[6] == 3.0 &&
	      d[7] == 0, "f64 param passed to a variant packed by the variant's plan");
	CHECK(nestrt_packed(ctx, b, 3, 5, 8, 0) == NULL, "a request no plan made: NULL (nothing packed in a call)");
	float local[15] = {0};
	CHECK(nestrt_packed(ctx, local, 3, 5, 4, 0) == NULL, "not a param: NULL");
	CHECK(nestrt_packed(ctx, b + 1, 2, 5, 4, 0) == NULL, "inside a param, not its start: NULL");
	CHECK(nestrt_packed(ctx, b, 3, 5, 4, NESTRT_PACK_F64) == NULL, "f32 param asked as f64: NULL");
	CHECK(nestrt_packed(ctx, b, 0, 5, 4, 0) == NULL && nestrt_packed(ctx, b, 3, 5, 0, 0) == NULL, "empty or bad sizes: NULL");
	/* a second instance over the same weights shares the copies */
	nestrt_error err = {{0}};
	nestrt_model *m2 = nestrt_model_new(&packtest_desc, w, &err);
	if (CHECK(m2 != NULL, "second instance: %s", err.message))
		CHECK(nestrt_packed(nestrt_model_ctx(m2), nestrt_model_ctx(m2)->params[0], 3, 5, 4, 0) == p,
		      "two instances over one weights share one packed copy");
	/* the weights may be closed before the instances: they hold them */
	nestrt_weights_close(w);
	CHECK(nestrt_packed(ctx, b, 3, 5, 4, 0) == p && p[20] == 15, "weights closed first: the instance keeps them");
	nestrt_model_free(m);
	nestrt_model_free(m2);

	setenv("NESTRT_PREPACK", "0", 1);
	m = packed_model(&w);
	if (m)
		CHECK(nestrt_packed(nestrt_model_ctx(m), nestrt_model_ctx(m)->params[0], 3, 5, 4, 0) == NULL,
		      "NESTRT_PREPACK=0: nothing packed");
	nestrt_model_free(m);
	nestrt_weights_close(w);
	unsetenv("NESTRT_PREPACK");

	nestrt_ctx *bare = nestrt_ctx_new("bare", NULL, 0, 1, 0, &err);
	float one[4] = {1, 2, 3, 4};
	if (CHECK(bare != NULL, "ctx_new: %s", err.message)) {
		bare->params[0] = one;
		CHECK(nestrt_packed(bare, one, 2, 2, 2, 0) == NULL, "a context without a param table: NULL");
	}
	nestrt_ctx_free(bare);
	CHECK(nestrt_packed(NULL, one, 2, 2, 2, 0) == NULL, "NULL context: NULL");
}

/* Panels of transposed f32 and f64 matrices whose panels are whole (the
 * SSE2 path moves 4x4 and 2x2 blocks) and partial, and the Winograd
 * transforms G g G^T of 3x3 kernels (F(4x4, 3x3) and F(2x2, 3x3), Lavin's
 * G), every element against the layout nestrt.h gives. Params: e f64[5, 6]
 * as Bt (k 6, n 5, wide 4), f f32[9, 8] as Bt (k 8, n 9, wide 8), g
 * f32[2, 3, 3, 3] as WINO (k 108, n 2, wide 4) and WINO2 (k 48), h f64[4, 2]
 * as Bt (k 2, n 4, wide 4). */
static const int64_t panels_plan[] = {5,
	1, -1, 6, 5, 4, NESTRT_PACK_TRANS | NESTRT_PACK_F64,
	1, -2, 8, 9, 8, NESTRT_PACK_TRANS,
	1, -3, 108, 2, 4, NESTRT_PACK_WINO,
	1, -3, 48, 2, 4, NESTRT_PACK_WINO2,
	1, -4, 2, 4, 4, NESTRT_PACK_TRANS | NESTRT_PACK_F64};
static const nestrt_param panels_params[4] = {
	{"e", NESTRT_F64, 2, {5, 6}},
	{"f", NESTRT_F32, 2, {9, 8}},
	{"g", NESTRT_F32, 4, {2, 3, 3, 3}},
	{"h", NESTRT_F64, 2, {4, 2}},
};
static const nestrt_model_desc panels_desc = {"panels", panels_params, 4, NULL, 0, 0, "test", NULL, 0, NULL, panels_plan, NULL};

/* Packs given to nestrt_model_new_embedded_packed (as a program built with
 * --embed-weights does) that do not fit the model's params: each is refused
 * with its index and name, and one that fits makes an instance. */
static void test_prepacked_refused(void)
{
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {4, 6}}};
	static float data[4 * 8]; /* k 4 rows of one panel of 8 */
	static char image[16];
	uint64_t hl = 8;
	memcpy(image, &hl, 8);
	memcpy(image + 8, "{}      ", 8); /* no tensors besides the packed one */
	for (int i = 0; i < 4 * 8; i++)
		data[i] = (float)i;
	static const int64_t plan[] = {1, 1, -1, 4, 6, 8, 0};
	nestrt_model_desc desc = {"pk", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plan, NULL};
	static const struct {
		nestrt_prepacked p[2];
		int n;
		const char *what;
	} bad[] = {
		{{{"w", 4, 6, 0, 0, data}}, 1, "a width of 0"},
		{{{"w", 0, 6, 8, 0, data}}, 1, "k of 0"},
		{{{"w", 4, 0, 8, 0, data}}, 1, "n of 0"},
		{{{"w", 4, 5, 8, 0, data}}, 1, "k * n not the param's 24 elements"},
		{{{"v", 4, 6, 8, 0, data}}, 1, "a name no param has"},
		{{{"w", 4, 6, 8, NESTRT_PACK_F64, data}}, 1, "f64 panels of an f32 param"},
		{{{"w", 4, 6, 8, 0, NULL}}, 1, "no data"},
		{{{"w", 4, 6, 8, 0, data}, {"w", 4, 6, 8, 0, data}}, 2, "the same param twice"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		nestrt_error err = {{0}};
		nestrt_model *m = nestrt_model_new_embedded_packed(&desc, image, sizeof image, bad[i].p, bad[i].n, &err);
		int at = bad[i].n - 1;
		char *want = fmt("packed weight %d ('%s') does not fit the model", at, bad[i].p[at].name);
		CHECK(!m && strstr(err.message, want), "a pack with %s: '%s'", bad[i].what, err.message);
		free(want);
		nestrt_model_free(m);
	}
	nestrt_error err = {{0}};
	nestrt_model *m = nestrt_model_new_embedded_packed(&desc, image, sizeof image, bad[7].p, 1, &err);
	if (CHECK(m != NULL, "a pack that fits: %s", err.message)) {
		nestrt_ctx *ctx = nestrt_model_ctx(m);
		const float *p = nestrt_packed(ctx, ctx->params[0], 4, 6, 8, 0);
		CHECK(p && p[9] == 9.0f && p[31] == 31.0f, "its packed copy is the program's panels");
	}
	nestrt_model_free(m);
}

/* Allocation failures injected: test_runtime is linked with
 * -Wl,--wrap=malloc,... (the Makefile), so the runtime's allocations come
 * here. oom_arm(n) lets n of them through, then fails one; oom_disarm()
 * says whether one failed. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);
static int oom_left = -1, oom_hit;

static int oom_now(void)
{
	int left = __atomic_load_n(&oom_left, __ATOMIC_RELAXED);
	while (left >= 0)
		if (__atomic_compare_exchange_n(&oom_left, &left, left - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			if (left > 0)
				return 0;
			__atomic_store_n(&oom_hit, 1, __ATOMIC_RELAXED);
			return 1;
		}
	return 0;
}
void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
	return oom_now() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_calloc(size_t k, size_t n)
{
	return oom_now() ? NULL : __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
	return oom_now() ? NULL : __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n)
{
	return oom_now() ? NULL : __real_aligned_alloc(a, n);
}
char *__wrap_strdup(const char *s);
char *__wrap_strdup(const char *s)
{
	return oom_now() ? NULL : __real_strdup(s);
}

static void oom_arm(int n)
{
	__atomic_store_n(&oom_hit, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&oom_left, n, __ATOMIC_RELAXED);
}

static int oom_disarm(void)
{
	__atomic_store_n(&oom_left, -1, __ATOMIC_RELAXED);
	return __atomic_load_n(&oom_hit, __ATOMIC_RELAXED);
}

/* An instance made from embedded weights with prepacked copies (as a
 * program built with --embed-weights), one over a bf16 file held in q8_0 and
 * one over an f32 file whose matrix is read straight into its panels, with
 * their 1st, 2nd, ... allocation failing in turn: each is
 * refused with "out of memory" (or made all the same), never a crash; and
 * check-asan finds nothing leaked on the way. */
static void test_out_of_memory(void)
{
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {4, 6}}};
	static float data[4 * 8];
	static char image[16];
	uint64_t hl = 8;
	memcpy(image, &hl, 8);
	memcpy(image + 8, "{}      ", 8);
	for (int i = 0; i < 4 * 8; i++)
		data[i] = (float)i;
	static const int64_t plan[] = {1, 1, -1, 4, 6, 8, 0};
	const nestrt_model_desc desc = {"pk", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plan, NULL};
	const nestrt_prepacked pack = {"w", 4, 6, 8, 0, data};
	static const nestrt_param hp[1] = {{"s", NESTRT_F32, 2, {32, 16}}};
	static const int64_t hplan[] = {1, 1, -1, 32, 16, 16, NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT};
	static const int32_t hformats[1] = {NESTRT_FMT_Q8_0};
	const nestrt_model_desc hdesc = {"sq", hp, 1, NULL, 0, 0, "test", NULL, 0, NULL, hplan, hformats};
	uint16_t hv[32 * 16];
	for (int i = 0; i < 32 * 16; i++)
		hv[i] = (uint16_t)(0x3f80 + i % 64); /* bf16 from 1 up */
	const char *hhdr = "{\"s\":{\"dtype\":\"BF16\",\"shape\":[32,16],\"data_offsets\":[0,1024]}}";
	char *hpath = st_file("oom_bf16.safetensors", hhdr, (64 - (8 + strlen(hhdr)) % 64) % 64, hv, sizeof hv);
	/* and an f32 matrix read from the file straight into its panels */
	static const nestrt_param fp[1] = {{"f", NESTRT_F32, 2, {64, 64}}};
	static const int64_t fplan[] = {1, 1, -1, 64, 64, 16, 0};
	const nestrt_model_desc fdesc = {"ff", fp, 1, NULL, 0, 0, "test", NULL, 0, NULL, fplan, NULL};
	float fv[64 * 64];
	for (int i = 0; i < 64 * 64; i++)
		fv[i] = (float)(i % 13);
	const char *fhdr = "{\"f\":{\"dtype\":\"F32\",\"shape\":[64,64],\"data_offsets\":[0,16384]}}";
	char *fpath = st_file("oom_f32.safetensors", fhdr, (64 - (8 + strlen(fhdr)) % 64) % 64, fv, sizeof fv);
	for (int which = 0; which < 3; which++) {
		int failed = 0, made = 0, n;
		char bad[700] = "";
		for (n = 0; n < 10000; n++) {
			nestrt_error err = {{0}};
			nestrt_weights *w = NULL;
			nestrt_model *m = NULL;
			oom_arm(n);
			if (which == 0) {
				m = nestrt_model_new_embedded_packed(&desc, image, sizeof image, &pack, 1, &err);
			} else {
				w = nestrt_weights_open(which == 1 ? hpath : fpath, &err);
				m = w ? nestrt_model_new(which == 1 ? &hdesc : &fdesc, w, &err) : NULL;
			}
			int hit = oom_disarm();
			const void *c = NULL;
			if (m) {
				nestrt_ctx *ctx = nestrt_model_ctx(m);
				c = which == 1 ? nestrt_packed(ctx, ctx->params[0], 32, 16, 16, (int)hplan[6])
				    : which == 2 ? nestrt_packed(ctx, ctx->params[0], 64, 64, 16, 0)
				                 : nestrt_packed(ctx, ctx->params[0], 4, 6, 8, 0);
			}
			if (m && !c && !bad[0])
				snprintf(bad, sizeof bad, "allocation %d failing: made without its packed copy", n + 1);
			if (!m && !strstr(err.message, "out of memory") && !bad[0])
				snprintf(bad, sizeof bad, "allocation %d failing: '%s'", n + 1, err.message);
			nestrt_model_free(m);
			nestrt_weights_close(w);
			if (!hit) {
				made = m != NULL;
				break;
			}
			failed++;
		}
		const char *what = which == 1   ? "an instance over a bf16 file held in q8_0"
		                   : which == 2 ? "an instance over an f32 file packed as it is read"
		                                : "an instance of embedded, prepacked weights";
		CHECK(made && failed >= 3 && !bad[0], "%s, each of its %d allocations failing in turn: %s", what, failed,
		      bad[0] ? bad : made ? "too few allocations seen (is test_runtime linked with --wrap?)" : "not made after");
	}
	free(hpath);
	free(fpath);
}

static void test_packed_panels(void)
{
	static char image[2048];
	const char *hdr = "{\"e\":{\"dtype\":\"F64\",\"shape\":[5,6],\"data_offsets\":[0,240]},"
	                  "\"f\":{\"dtype\":\"F32\",\"shape\":[9,8],\"data_offsets\":[256,544]},"
	                  "\"g\":{\"dtype\":\"F32\",\"shape\":[2,3,3,3],\"data_offsets\":[576,792]},"
	                  "\"h\":{\"dtype\":\"F64\",\"shape\":[4,2],\"data_offsets\":[800,864]}}";
	size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
	uint64_t n = hl + pad;
	memcpy(image, &n, 8);
	memcpy(image + 8, hdr, hl);
	memset(image + 8 + hl, ' ', pad);
	double e[30];
	float f[72], g[54];
	for (int i = 0; i < 30; i++)
		e[i] = 0.25 * i - 3;
	for (int i = 0; i < 72; i++)
		f[i] = (float)(i * 7 % 31) - 9.5f;
	for (int i = 0; i < 54; i++)
		g[i] = (float)((i * 13) % 17) * 0.125f - 1.0f;
	char *data = image + 8 + n;
	memcpy(data, e, sizeof e);
	memcpy(data + 256, f, sizeof f);
	memcpy(data + 576, g, sizeof g);
	double h[8];
	for (int i = 0; i < 8; i++)
		h[i] = 1.5 * i + 0.5;
	memcpy(data + 800, h, sizeof h);
	nestrt_error err = {{0}};
	nestrt_weights *w = nestrt_weights_from_memory(image, 8 + n + 864, "panels", &err);
	nestrt_model *m = w ? nestrt_model_new(&panels_desc, w, &err) : NULL;
	if (!CHECK(m != NULL, "panels model: %s", err.message)) {
		nestrt_weights_close(w);
		return;
	}
	nestrt_ctx *ctx = nestrt_model_ctx(m);
	/* Bt[n, k] packed: element (i, c) of panel p is Bt[p * wide + c][i], 0 past n */
	const double *pe = nestrt_packed(ctx, ctx->params[0], 6, 5, 4, NESTRT_PACK_TRANS | NESTRT_PACK_F64);
	int bad = !pe;
	for (int p = 0; pe && p < 2; p++)
		for (int i = 0; i < 6; i++)
			for (int c = 0; c < 4; c++) {
				int row = p * 4 + c;
				bad += pe[(p * 6 + i) * 4 + c] != (row < 5 ? e[row * 6 + i] : 0.0);
			}
	CHECK(!bad, "f64 Bt[5, 6] in panels of 4: %d elements wrong", bad);
	/* one whole panel of an even k: its 64 bytes exactly, in 2x2 blocks (a
	 * block past the last row would write past the copy: check-asan) */
	const double *ph = nestrt_packed(ctx, ctx->params[3], 2, 4, 4, NESTRT_PACK_TRANS | NESTRT_PACK_F64);
	bad = !ph;
	for (int i = 0; ph && i < 2; i++)
		for (int c = 0; c < 4; c++)
			bad += ph[i * 4 + c] != h[c * 2 + i];
	CHECK(!bad, "f64 Bt[4, 2] in one panel of 4: %d elements wrong", bad);
	const float *pf = nestrt_packed(ctx, ctx->params[1], 8, 9, 8, NESTRT_PACK_TRANS);
	bad = !pf;
	for (int p = 0; pf && p < 2; p++)
		for (int i = 0; i < 8; i++)
			for (int c = 0; c < 8; c++) {
				int row = p * 8 + c;
				bad += pf[(p * 8 + i) * 8 + c] != (row < 9 ? f[row * 8 + i] : 0.0f);
			}
	CHECK(!bad, "f32 Bt[9, 8] in panels of 8: %d elements wrong", bad);
	static const double G6[6][3] = {{1.0 / 4, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
	                                {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
	static const double G4[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
	for (int al = 4; al <= 6; al += 2) {
		const double(*G)[3] = al == 6 ? G6 : G4;
		int k = al * al * 3;
		const float *pw = nestrt_packed(ctx, ctx->params[2], k, 2, 4, al == 6 ? NESTRT_PACK_WINO : NESTRT_PACK_WINO2);
		bad = !pw;
		double worst = 0;
		for (int o = 0; pw && o < 4; o++)
			for (int i = 0; i < 3; i++)
				for (int a = 0; a < al; a++)
					for (int b = 0; b < al; b++) {
						double u = 0; /* (G g G^T)[a][b] */
						for (int r = 0; o < 2 && r < 3; r++)
							for (int q = 0; q < 3; q++)
								u += G[a][r] * g[((o * 3 + i) * 3 + r) * 3 + q] * G[b][q];
						double d = fabs(pw[((a * al + b) * 3 + i) * 4 + o] - u);
						worst = d > worst ? d : worst;
					}
		CHECK(pw && worst <= 1e-6, "Winograd F(%dx%d, 3x3) transforms of g in a panel of 4: max |error| %g", al - 2,
		      al - 2, worst);
	}
	nestrt_model_free(m);
	nestrt_weights_close(w);
}

/* A weight only read packed loses its unpacked pages (a big one: whole
 * pages), and gets them back when something reads it unpacked. */
/* Reads that fail as a disk can: this program's pread and preadv stand in
 * for the C library's (the runtime, linked statically, calls these). With
 * read_fault > 0 every read fails with that errno; with read_fault < 0 every
 * read succeeds and leaves errno at -read_fault, which a successful call may
 * do (a stale EINTR must not make the runtime read the same bytes again). */
static int read_fault, read_fault_once;
/* With read_short, reads return a little over half the bytes asked, as a
 * network or FUSE file system may: a short read is no error nor the end. */
static int read_short;

/* The bytes a read of len asks for under read_short. */
static size_t short_len(size_t len)
{
	return __atomic_load_n(&read_short, __ATOMIC_RELAXED) && len > 1 ? len / 2 + 1 : len;
}

/* Before a read: 1 (errno set) when it is to fail (and, once, the reads
 * after it not). */
static int read_fails(void)
{
	int f = __atomic_load_n(&read_fault, __ATOMIC_RELAXED);
	if (f > 0) {
		if (__atomic_load_n(&read_fault_once, __ATOMIC_RELAXED))
			__atomic_store_n(&read_fault, 0, __ATOMIC_RELAXED);
		errno = f;
	}
	return f > 0;
}

/* After a read of r bytes: r, errno left stale when asked. */
static ssize_t read_done(ssize_t r)
{
	int f = __atomic_load_n(&read_fault, __ATOMIC_RELAXED);
	if (f < 0 && r > 0)
		errno = -f;
	return r;
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	static ssize_t (*real)(int, void *, size_t, off_t);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pread");
	return read_fails() ? -1 : read_done(real(fd, buf, short_len(len), off));
}

ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	static ssize_t (*real)(int, const struct iovec *, int, off_t);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "preadv");
	if (read_fails())
		return -1;
	size_t total = 0, got = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	size_t want = short_len(total);
	struct iovec cut[n > 0 ? n : 1]; /* iov up to want bytes: the last one cut short */
	int m = 0;
	for (; m < n && got < want; m++) {
		cut[m] = iov[m];
		if (cut[m].iov_len > want - got)
			cut[m].iov_len = want - got;
		got += cut[m].iov_len;
	}
	return read_done(real(fd, cut, m, off));
}

/* Memory maps that fail: with map_fail >= 0, this program's mmap (which
 * the runtime calls for its large buffers) refuses anonymous mappings from
 * the map_fail-th one on (counted in maps_made) with ENOMEM. */
static int map_fail = -1, maps_made;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "mmap");
	if (flags & MAP_ANONYMOUS && __atomic_load_n(&map_fail, __ATOMIC_RELAXED) >= 0 &&
	    __atomic_fetch_add(&maps_made, 1, __ATOMIC_RELAXED) >= map_fail) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return real(addr, len, prot, flags, fd, off);
}

/* close() failing with EBADF: a descriptor closed twice (or never open),
 * which in a program with other threads can close another's file. */
static int closes_bad;

int close(int fd)
{
	static int (*real)(int);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "close");
	int r = real(fd);
	if (r < 0 && errno == EBADF)
		__atomic_add_fetch(&closes_bad, 1, __ATOMIC_RELAXED);
	return r;
}

/* Packs in a read-only mapping of a file, as a program's are, whose bytes
 * are not the file's (pages written privately, then made read-only; or a
 * program whose file was rewritten since it started): the instance takes
 * the mapping's bytes, and the file opened to read them faster is closed
 * once, not twice */
static void test_prepacked_mapping(void)
{
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {4, 6}}};
	static const int64_t plan[] = {1, 1, -1, 4, 6, 8, 0};
	nestrt_model_desc desc = {"pk", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plan, NULL};
	static char image[16];
	uint64_t hl = 8;
	memcpy(image, &hl, 8);
	memcpy(image + 8, "{}      ", 8);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *path = fmt("%s/packs.bin", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	float *mp = fd >= 0 && ftruncate(fd, (off_t)pg) == 0
	                ? mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0)
	                : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	if (!CHECK(mp != MAP_FAILED, "map %s", path)) {
		free(path);
		return;
	}
	for (int i = 0; i < 4 * 8; i++)
		mp[i] = (float)i; /* the file holds zeros */
	mprotect(mp, pg, PROT_READ);
	nestrt_prepacked pk = {"w", 4, 6, 8, 0, mp};
	nestrt_error err = {{0}};
	__atomic_store_n(&closes_bad, 0, __ATOMIC_RELAXED);
	nestrt_model *m = nestrt_model_new_embedded_packed(&desc, image, sizeof image, &pk, 1, &err);
	if (CHECK(m != NULL, "packs in a mapping that is not its file's bytes: %s", err.message)) {
		nestrt_ctx *ctx = nestrt_model_ctx(m);
		const float *p = nestrt_packed(ctx, ctx->params[0], 4, 6, 8, 0);
		CHECK(p && p[1] == 1.0f && p[9] == 9.0f && p[31] == 31.0f, "its packed copy is the mapping's bytes");
	}
	CHECK(__atomic_load_n(&closes_bad, __ATOMIC_RELAXED) == 0,
	      "and no descriptor was closed twice (%d close() calls failed with EBADF)", closes_bad);
	nestrt_model_free(m);
	munmap(mp, pg);
	unlink(path);
	free(path);
}

/* Are the packed copies of test_packed_release's w[1024, 1024] (element
 * (r, c) = (r * 1024 + c) % 1000 / 4) those of plan v (0: panels of 48; 1:
 * those and transposed panels of 32; 2: transposed panels of 32)? */
static int big_packed_ok(nestrt_model *m, int v)
{
	if (!m)
		return 0;
	const float *b = nestrt_model_ctx(m)->params[0];
	const float *p = nestrt_packed(nestrt_model_ctx(m), b, 1024, 1024, 48, 0);
	const float *q = nestrt_packed(nestrt_model_ctx(m), b, 1024, 1024, 32, 1);
	/* panel p, row i, column c at (p * 1024 + i) * wide + c */
	int okp = p && p[1] == 0.25f && p[48] == (float)(1024 % 1000) * 0.25f && p[48 * 1024] == 48 * 0.25f &&
	          p[1023 * 48] == (float)(1023 * 1024 % 1000) * 0.25f;
	/* transposed: panel p, row i, column c is element (p * 32 + c, i) */
	int okq = q && q[1] == (float)(1024 % 1000) * 0.25f && q[32] == 0.25f &&
	          q[(31 * 1024 + 1023) * 32 + 31] == (float)((1023 * 1024 + 1023) % 1000) * 0.25f;
	return v == 0 ? okp && !q : v == 1 ? okp && okq : okq && !p;
}

/* test_packed_release's w, and the plans v of big_packed_ok */
static const nestrt_param big_params[1] = {{"w", NESTRT_F32, 2, {1024, 1024}}};
static const int64_t big_plan1[] = {1, 1, -1, 1024, 1024, 48, 0};
static const int64_t big_plan2[] = {2, 1, -1, 1024, 1024, 48, 0, 1, -1, 1024, 1024, 32, 1};
static const int64_t big_plan3[] = {1, 1, -1, 1024, 1024, 32, 1};
static const int64_t *const big_plans[3] = {big_plan1, big_plan2, big_plan3};
static const char *const big_forms[3] = {"one form", "two forms", "one form transposed"};

/* The process's mapped memory in bytes (/proc/self/statm's first field). */
static long long mapped_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long long pages = -1;
	if (f) {
		if (fscanf(f, "%lld", &pages) != 1)
			pages = -1;
		fclose(f);
	}
	return pages < 0 ? -1 : pages * sysconf(_SC_PAGESIZE);
}

/* Weights read through short reads (read_short), packed each way (plan v
 * of big_packed_ok: row by row into the panels, copies, through a scratch
 * copy): every byte arrives */
static void test_packed_short_reads(const char *path)
{
	for (int v = 0; v < 3; v++) {
		nestrt_model_desc desc = {"big", big_params, 1, NULL, 0, 0, "test", NULL, 0, NULL, big_plans[v], NULL};
		nestrt_error err = {{0}};
		__atomic_store_n(&read_short, 1, __ATOMIC_RELAXED);
		nestrt_weights *w = nestrt_weights_open(path, &err);
		nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
		__atomic_store_n(&read_short, 0, __ATOMIC_RELAXED);
		CHECK(m != NULL, "short reads (%s): %s", big_forms[v], err.message);
		CHECK(big_packed_ok(m, v), "short reads: the packed weights are the file's (%s)", big_forms[v]);
		nestrt_model_free(m);
		nestrt_weights_close(w);
	}
}

/* Weights opened, an instance made (packing through scratch copies from
 * the file, or into copies of their own, or through scratch copies after
 * an instance of another model, which reads none of them, had the file
 * read), freed and the weights closed, four times: the packed copies are
 * right, and what was mapped is all unmapped, so the process's mapped
 * memory after the fourth round is what it was after the second (the
 * first may set up the pool's threads and malloc's arenas) */
static void test_packed_unmapped(const char *path)
{
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {1024, 1024}}};
	static const int64_t plan2[] = {2, 1, -1, 1024, 1024, 48, 0, 1, -1, 1024, 1024, 32, 1};
	static const int64_t plan3[] = {1, 1, -1, 1024, 1024, 32, 1};
	static const int64_t *const plans[3] = {plan3, plan2, plan3};
	nestrt_model_desc none = {"none", NULL, 0, NULL, 0, 0, "test", NULL, 0, NULL, NULL, NULL};
	long long size[4] = {0};
	for (int round = 0; round < 4; round++) {
		for (int v = 0; v < 3; v++) {
			nestrt_model_desc desc = {"big", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plans[v], NULL};
			nestrt_error err = {{0}};
			nestrt_weights *w = nestrt_weights_open(path, &err);
			nestrt_model *first = w && v == 2 ? nestrt_model_new(&none, w, &err) : NULL;
			CHECK(v != 2 || first, "an instance that reads no weights: %s", err.message);
			nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
			CHECK(m != NULL, "packing, round %d: %s", round + 1, err.message);
			if (round == 0)
				CHECK(big_packed_ok(m, v == 1 ? 1 : 2), "packed copies of the file's elements (%s)",
				      v == 0 ? "one form transposed" : v == 1 ? "two forms" : "one form transposed, the file read before");
			nestrt_model_free(m);
			nestrt_model_free(first);
			nestrt_weights_close(w);
		}
		size[round] = mapped_bytes();
	}
	CHECK(size[1] > 0 && size[3] == size[1],
	      "weights packed and closed again and again unmap what they mapped: %lld bytes mapped after round 2, "
	      "%lld after round 4",
	      size[1], size[3]);
}

/* A weight held only in a format for one instance (its f32 pages given
 * back) cannot be read as it is by another instance of the same weights:
 * an error that says so and what to do, which works */
static void test_format_only(const char *path)
{
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {1024, 1024}}};
	static const int64_t planq[] = {1, 1, -1, 1024, 1024, 32, NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT};
	static const int32_t formats[1] = {NESTRT_FMT_Q8_0};
	nestrt_model_desc dq = {"q", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, planq, formats};
	nestrt_model_desc df = {"f", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, NULL, NULL};
	nestrt_error err = {{0}};
	nestrt_weights *w = nestrt_weights_open(path, &err);
	nestrt_model *q = w ? nestrt_model_new(&dq, w, &err) : NULL;
	CHECK(q != NULL, "an instance holding w in q8_0: %s", err.message);
	nestrt_model *f = q ? nestrt_model_new(&df, w, &err) : NULL;
	char *want = fmt("%s: tensor 'w' is held only in a weight format now (packed so for another model over these "
	                 "weights): open the weights again for this one", path);
	CHECK(q && !f && strcmp(err.message, want) == 0, "then one reading w as it is: '%s'", err.message);
	free(want);
	nestrt_model_free(f);
	nestrt_weights *w2 = nestrt_weights_open(path, &err);
	f = w2 ? nestrt_model_new(&df, w2, &err) : NULL;
	const float *u = f ? nestrt_model_ctx(f)->params[0] : NULL;
	CHECK(u && u[1] == 0.25f && u[1024 * 1024 - 1] == (float)((1024 * 1024 - 1) % 1000) * 0.25f,
	      "and over the weights opened again, it is: %s", err.message);
	nestrt_model_free(f);
	nestrt_weights_close(w2);
	nestrt_model_free(q);
	nestrt_weights_close(w);
	/* a weight of less than a page (2 KiB, where its place starts: on a
	 * page) gives no page back: held in q8_0 for one instance, it is still
	 * read as it is by another */
	static const nestrt_param sp[1] = {{"s", NESTRT_F32, 2, {32, 16}}};
	static const int64_t splan[] = {1, 1, -1, 32, 16, 16, NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT};
	nestrt_model_desc sq = {"sq", sp, 1, NULL, 0, 0, "test", NULL, 0, NULL, splan, formats};
	nestrt_model_desc sf = {"sf", sp, 1, NULL, 0, 0, "test", NULL, 0, NULL, NULL, NULL};
	float sv[32 * 16];
	for (int i = 0; i < 32 * 16; i++)
		sv[i] = (float)(i % 7) - 3.0f;
	const char *hdr = "{\"s\":{\"dtype\":\"F32\",\"shape\":[32,16],\"data_offsets\":[0,2048]}}";
	char *spath = st_file("small.safetensors", hdr, (64 - (8 + strlen(hdr)) % 64) % 64, sv, sizeof sv);
	w = nestrt_weights_open(spath, &err);
	q = w ? nestrt_model_new(&sq, w, &err) : NULL;
	f = q ? nestrt_model_new(&sf, w, &err) : NULL;
	u = f ? nestrt_model_ctx(f)->params[0] : NULL;
	CHECK(u && memcmp(u, sv, sizeof sv) == 0,
	      "a weight of less than a page held in q8_0 for one instance is read as it is by another: %s",
	      f ? "other elements" : err.message);
	nestrt_model_free(f);
	nestrt_model_free(q);
	nestrt_weights_close(w);
	free(spath);
	/* a NaN among its elements: an instance in q8_0 is refused, naming the
	 * element, and so is the next over the same weights (the first left no
	 * copy behind for it to take) */
	sv[5] = NAN;
	char *npath = st_file("small_nan.safetensors", hdr, (64 - (8 + strlen(hdr)) % 64) % 64, sv, sizeof sv);
	w = nestrt_weights_open(npath, &err);
	for (int i = 0; i < 2 && w; i++) {
		q = nestrt_model_new(&sq, w, &err);
		CHECK(!q && strstr(err.message, "tensor 's': element 5 is nan, which q8_0 cannot hold"),
		      "a NaN in a weight held in q8_0 (instance %d): '%s'", i + 1, q ? "no error" : err.message);
		nestrt_model_free(q);
	}
	nestrt_weights_close(w);
	free(npath);
	sv[5] = (float)(5 % 7) - 3.0f;
	/* the same weight in bf16: held in q8_0, made from its 16-bit bytes,
	 * which are then given back: another instance reading it as bf16 is
	 * refused, saying so and what to do (not "out of memory"); over the
	 * weights opened again it reads the file's */
	uint16_t hv[32 * 16];
	for (int i = 0; i < 32 * 16; i++) {
		uint32_t bits;
		memcpy(&bits, &sv[i], 4);
		hv[i] = (uint16_t)(bits >> 16); /* small integers: exact in bf16 */
	}
	static const nestrt_param hp[1] = {{"s", NESTRT_BF16, 2, {32, 16}}};
	nestrt_model_desc hf = {"hf", hp, 1, NULL, 0, 0, "test", NULL, 0, NULL, NULL, NULL};
	const char *hhdr = "{\"s\":{\"dtype\":\"BF16\",\"shape\":[32,16],\"data_offsets\":[0,1024]}}";
	char *hpath = st_file("small_bf16.safetensors", hhdr, (64 - (8 + strlen(hhdr)) % 64) % 64, hv, sizeof hv);
	w = nestrt_weights_open(hpath, &err);
	q = w ? nestrt_model_new(&sq, w, &err) : NULL;
	CHECK(q != NULL, "a bf16 weight held in q8_0: %s", err.message);
	/* a second instance of the same model shares that copy (it crashed,
	 * widening the 16-bit bytes that were given back) */
	nestrt_model *q2 = q ? nestrt_model_new(&sq, w, &err) : NULL;
	const int64_t qflags = NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT;
	const void *c1 = q ? nestrt_packed(nestrt_model_ctx(q), nestrt_model_ctx(q)->params[0], 32, 16, 16, qflags) : NULL;
	const void *c2 = q2 ? nestrt_packed(nestrt_model_ctx(q2), nestrt_model_ctx(q2)->params[0], 32, 16, 16, qflags)
	                    : NULL;
	CHECK(q2 && c1 && c2 == c1, "a second instance holding the bf16 weight in q8_0 shares the first's copy: %s",
	      q2 ? "another copy" : err.message);
	nestrt_model_free(q2);
	want = fmt("%s: tensor 's' is held only in a weight format now (packed so for another model over these "
	           "weights): open the weights again for this one", hpath);
	/* read as it is, as bf16 or widened to f32, by another instance: refused */
	for (int as_f32 = 0; as_f32 < 2; as_f32++) {
		f = q ? nestrt_model_new(as_f32 ? &sf : &hf, w, &err) : NULL;
		CHECK(q && !f && strcmp(err.message, want) == 0, "then read as %s by another instance: '%s'",
		      as_f32 ? "f32" : "bf16", f ? "no error" : err.message);
		nestrt_model_free(f);
	}
	free(want);
	nestrt_model_free(q);
	nestrt_weights_close(w);
	w = nestrt_weights_open(hpath, &err);
	f = w ? nestrt_model_new(&hf, w, &err) : NULL;
	const void *hu = f ? nestrt_model_ctx(f)->params[0] : NULL;
	CHECK(hu && memcmp(hu, hv, sizeof hv) == 0, "and read as bf16 over the weights opened again: %s", err.message);
	nestrt_model_free(f);
	nestrt_weights_close(w);
	free(hpath);
}

/* Two instances of the same weights, one reading a weight as it is
 * (NESTRT_PREPACK=0, as a model built without packed copies does), the other
 * reading it only packed (plan v of big_packed_ok), made in either order:
 * the packed copies are never made where the first reads the elements, nor
 * are those pages given back, and whichever comes second still finds them */
static void test_packed_beside_unpacked(const char *path)
{
	for (int v = 0; v < 6; v++) {
		int packed_first = v >= 3;
		nestrt_model_desc desc = {"big", big_params, 1, NULL, 0, 0, "test", NULL, 0, NULL, big_plans[v % 3], NULL};
		nestrt_error err = {{0}};
		nestrt_weights *w = nestrt_weights_open(path, &err);
		nestrt_model *m[2] = {NULL, NULL}; /* unpacked, packed */
		for (int i = 0; i < 2 && w; i++) {
			int k = packed_first ? 1 - i : i;
			if (k == 0)
				setenv("NESTRT_PREPACK", "0", 1);
			m[k] = nestrt_model_new(&desc, w, &err);
			unsetenv("NESTRT_PREPACK");
			CHECK(m[k] != NULL, "%s instance (%s, %s): %s", k ? "packed" : "unpacked", big_forms[v % 3],
			      packed_first ? "packed first" : "unpacked first", err.message);
		}
		if (m[0] && m[1]) {
			const float *u = nestrt_model_ctx(m[0])->params[0];
			int64_t bad = -1;
			for (int64_t i = 0; bad < 0 && i < 1024 * 1024; i++)
				if (u[i] != (float)(i % 1000) * 0.25f)
					bad = i;
			CHECK(bad < 0, "an instance reading a weight as it is, made %s one reading it %s: element %lld is %g",
			      packed_first ? "after" : "before", big_forms[v % 3], (long long)bad, bad < 0 ? 0.0 : u[bad]);
			CHECK(big_packed_ok(m[1], v % 3), "and the other's packed copies are the file's (%s, %s)", big_forms[v % 3],
			      packed_first ? "packed first" : "unpacked first");
		}
		nestrt_model_free(m[1]);
		nestrt_model_free(m[0]);
		nestrt_weights_close(w);
	}
}

static void test_packed_release(void)
{
	/* w f32[1024, 1024] (4 MiB) at offset 0 of the data */
	const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1024,1024],\"data_offsets\":[0,4194304]}}";
	size_t hl = strlen(hdr), pad = (64 - (8 + hl) % 64) % 64;
	uint64_t n = hl + pad;
	char *path = fmt("%s/big.safetensors", dir);
	FILE *f = fopen(path, "wb");
	if (!CHECK(f != NULL, "create %s", path)) {
		free(path);
		return;
	}
	fwrite(&n, 8, 1, f);
	fwrite(hdr, 1, hl, f);
	for (size_t i = 0; i < pad; i++)
		fputc(' ', f);
	for (int i = 0; i < 1024 * 1024; i++) {
		float v = (float)(i % 1000) * 0.25f;
		fwrite(&v, 4, 1, f);
	}
	fclose(f);
	static const nestrt_param params[1] = {{"w", NESTRT_F32, 2, {1024, 1024}}};
	/* one packed form: packed where it is read; two: packed copies, and the
	 * unpacked pages given back. With two forms neither transposed (plan2n),
	 * no rows are given back while packing (that is for a transposed form):
	 * release() alone gives the pages back once both copies are made */
	static const int64_t plan1[] = {1, 1, -1, 1024, 1024, 48, 0};
	static const int64_t plan2[] = {2, 1, -1, 1024, 1024, 48, 0, 1, -1, 1024, 1024, 32, 1};
	static const int64_t plan2n[] = {2, 1, -1, 1024, 1024, 48, 0, 1, -1, 1024, 1024, 32, 0};
	/* plan2 with the transposed form asked for first: its rows are not given
	 * back as they are read, the plain form wants them after */
	static const int64_t plan2t[] = {2, 1, -1, 1024, 1024, 32, 1, 1, -1, 1024, 1024, 48, 0};
	static const int64_t *const plans12[4] = {plan1, plan2, plan2n, plan2t};
	for (int two = 0; two < 4; two++) {
		int trans = two == 1 || two == 3;
		nestrt_model_desc desc = {"big", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plans12[two], NULL};
		nestrt_error err = {{0}};
		nestrt_weights *w = nestrt_weights_open(path, &err);
		nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
		if (CHECK(m != NULL, "big model (plan %d): %s", two, err.message)) {
			const float *b = nestrt_model_ctx(m)->params[0];
			const float *p = nestrt_packed(nestrt_model_ctx(m), b, 1024, 1024, 48, 0);
			CHECK(p && p[1] == 0.25f && p[48] == (float)(1024 % 1000) * 0.25f && p[48 * 1024] == 48 * 0.25f,
			      "packed at creation%s", two ? " (one of two forms)" : "");
			if (two) {
				/* the other form: transposed (plan2, plan2t), or not (plan2n) */
				const float *q = nestrt_packed(nestrt_model_ctx(m), b, 1024, 1024, 32, trans);
				CHECK(q && q[1] == (float)(trans ? 1024 % 1000 : 1) * 0.25f &&
				          q[32] == (float)(trans ? 1 : 1024 % 1000) * 0.25f,
				      "the other form packed at creation (%s)",
				      two == 3 ? "transposed, asked for first" : trans ? "transposed" : "not transposed");
				/* the pages of the unpacked form are given back: they read as zeros */
				CHECK(p != b && q != b && b[2048] == 0 && b[4096] == 0 && b[1024 * 1024 - 1024] == 0,
				      "the unpacked form of a weight only read packed is dropped (%s)",
				      two == 3 ? "one form transposed, asked for first" : trans ? "one form transposed" : "neither transposed");
			} else {
				CHECK(p == b, "a weight with one packed form is packed where it was read: no second copy");
			}
			const void *data;
			nestrt_weights_info(w, 0, NULL, NULL, &data, NULL);
			const float *u = data;
			int same = 1;
			for (int i = 0; same && i < 1024 * 1024; i++)
				same = u[i] == (float)(i % 1000) * 0.25f;
			CHECK(same, "nestrt_weights_info restores it from the packed copy");
			p = nestrt_packed(nestrt_model_ctx(m), b, 1024, 1024, 48, 0);
			CHECK(p && p[1] == 0.25f && p[48] == (float)(1024 % 1000) * 0.25f, "and the packed copy stays");
		}
		nestrt_model_free(m);
		nestrt_weights_close(w);
	}
	test_packed_beside_unpacked(path);
	test_format_only(path);
	test_packed_unmapped(path);
	test_packed_short_reads(path);
	/* the three plans below: one form (packed where it is read, row by
	 * row from the file: preadv), two forms (packed copies), one form
	 * transposed (packed where it is read, through a scratch copy: pread) */
	static const int64_t plan3[] = {1, 1, -1, 1024, 1024, 32, 1};
	static const int64_t *const plans[3] = {plan1, plan2, plan3};
	static const char *const forms[3] = {"one form", "two forms", "one form transposed"};
	/* a read that fails while the weights are packed (every read, or only
	 * the first: not hidden by reading again) is an error naming the file
	 * and the reason, and the next instance reads again; a read that
	 * succeeds with a stale EINTR in errno is just a read */
	for (int v = 0; v < 6; v++) {
		nestrt_model_desc desc = {"big", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plans[v % 3], NULL};
		nestrt_error err = {{0}};
		nestrt_weights *w = nestrt_weights_open(path, &err);
		__atomic_store_n(&read_fault_once, v >= 3, __ATOMIC_RELAXED);
		__atomic_store_n(&read_fault, EIO, __ATOMIC_RELAXED);
		nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
		__atomic_store_n(&read_fault, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&read_fault_once, 0, __ATOMIC_RELAXED);
		char *want = fmt("%s: cannot read: %s", path, strerror(EIO));
		CHECK(w && !m && strstr(err.message, want), "%s I/O error packing %s: '%s'", v >= 3 ? "one" : "every",
		      forms[v % 3], err.message);
		free(want);
		nestrt_model_free(m);
		__atomic_store_n(&read_fault, -EINTR, __ATOMIC_RELAXED);
		m = w ? nestrt_model_new(&desc, w, &err) : NULL;
		__atomic_store_n(&read_fault, 0, __ATOMIC_RELAXED);
		CHECK(m != NULL, "after an I/O error, the next instance (reads leaving errno EINTR): %s", err.message);
		CHECK(big_packed_ok(m, v % 3), "and its packed weights are the file's (%s)", forms[v % 3]);
		nestrt_model_free(m);
		nestrt_weights_close(w);
	}
	/* out of memory at each of the maps that opening the weights and making
	 * an instance take in turn (the tensors' place, each packed copy, a
	 * scratch copy, ...): an error that says so, never a crash, and weights
	 * that opened make an instance once memory is back */
	for (int v = 0; v < 3; v++) {
		nestrt_model_desc desc = {"big", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plans[v], NULL};
		int nfail = 0, done = 0;
		for (int at = 0; !done && at < 16; at++) {
			nestrt_error err = {{0}};
			__atomic_store_n(&maps_made, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&map_fail, at, __ATOMIC_RELAXED);
			nestrt_weights *w = nestrt_weights_open(path, &err);
			nestrt_model *m = w ? nestrt_model_new(&desc, w, &err) : NULL;
			__atomic_store_n(&map_fail, -1, __ATOMIC_RELAXED);
			if (m) {
				done = 1;
				CHECK(big_packed_ok(m, v), "the file's weights packed once the maps succeed (%s)", forms[v]);
			} else {
				nfail++;
				CHECK(strstr(err.message, path) && (strstr(err.message, "out of memory") || strstr(err.message, "cannot allocate")),
				      "map %d failing (%s): '%s'", at, forms[v], err.message);
				m = w ? nestrt_model_new(&desc, w, &err) : NULL;
				CHECK(!w || big_packed_ok(m, v), "map %d failed (%s), then an instance of the same weights: %s", at,
				      forms[v], err.message);
			}
			nestrt_model_free(m);
			nestrt_weights_close(w);
		}
		CHECK(done && nfail > 0, "an instance made after %d failing maps (%s)", nfail, forms[v]);
	}
	/* the tensors are read when the first instance is created: a file cut
	 * short before then is an error then, not a crash */
	{
		nestrt_model_desc desc = {"big", params, 1, NULL, 0, 0, "test", NULL, 0, NULL, plan1, NULL};
		nestrt_error err = {{0}};
		nestrt_weights *w = nestrt_weights_open(path, &err);
		int cut = w && truncate(path, 4096) == 0;
		nestrt_model *m = cut ? nestrt_model_new(&desc, w, &err) : NULL;
		CHECK(cut && !m && strstr(err.message, "file shrank before it was read"),
		      "weights cut short between open and the first instance: '%s'", err.message);
		const void *data = NULL;
		CHECK(w && nestrt_weights_info(w, 0, NULL, NULL, &data, NULL) == -1, "and nestrt_weights_info's data: -1");
		nestrt_model_free(m);
		nestrt_weights_close(w);
	}
	unlink(path);
	free(path);
}

/* The weight formats (quant.c): names, sizes, blocks worked out by hand, the
 * errors. tests/io/quant.py compares every byte with NumPy. */
static void test_formats(void)
{
	static const char *const names[] = {"f32", "bf16", "f16", "q8_0", "q4_0", "q4_k", "q6_k"};
	static const int block[] = {1, 1, 1, 32, 32, 256, 256}, bytes[] = {4, 2, 2, 34, 18, 144, 210};
	for (int f = 0; f < 7; f++)
		CHECK(strcmp(nestrt_format_name(f), names[f]) == 0 && nestrt_format_parse(names[f]) == f &&
		              nestrt_format_block(f) == block[f] && nestrt_format_block_bytes(f) == bytes[f],
		      "format %d", f);
	CHECK(!nestrt_format_name(7) && !nestrt_format_name(-1) && nestrt_format_parse("Q8_0") == -1 &&
	              nestrt_format_parse("q4_K") == -1 && nestrt_format_parse(NULL) == -1 && nestrt_format_block(7) == 0 &&
	              nestrt_format_block_bytes(-1) == 0,
	      "unknown formats");
	CHECK(nestrt_format_bytes(NESTRT_FMT_Q8_0, 64) == 68 && nestrt_format_bytes(NESTRT_FMT_Q4_0, 96) == 54 &&
	              nestrt_format_bytes(NESTRT_FMT_BF16, 3) == 6 && nestrt_format_bytes(NESTRT_FMT_Q8_0, 100) == 0 &&
	              nestrt_format_bytes(NESTRT_FMT_F32, -4) == 0 && nestrt_format_bytes(NESTRT_FMT_F32, INT64_MAX) == 0 &&
	              nestrt_format_bytes(9, 32) == 0,
	      "nestrt_format_bytes");

	/* q4_0: x = j % 16 - 8 has m = -8 (element 0), so d = 1 (f16 0x3c00) and
	 * q = trunc(x + 8.5) = j % 16: byte j is j * 0x11 */
	float x[64], y[64];
	unsigned char b[68];
	nestrt_error err;
	for (int j = 0; j < 32; j++)
		x[j] = (float)(j % 16 - 8);
	int ok = nestrt_quantize(NESTRT_FMT_Q4_0, x, 32, b, &err) == 0 && b[0] == 0x00 && b[1] == 0x3c;
	for (int j = 0; j < 16; j++)
		ok = ok && b[2 + j] == j * 0x11;
	nestrt_dequantize(NESTRT_FMT_Q4_0, b, 32, y);
	CHECK(ok && memcmp(x, y, 32 * sizeof(float)) == 0, "q4_0 block of j %% 16 - 8");
	/* an all-zero block: m = +0, so d = -0 (f16 0x8000), q = 8 */
	memset(x, 0, sizeof x);
	CHECK(nestrt_quantize(NESTRT_FMT_Q4_0, x, 32, b, &err) == 0 && b[0] == 0 && b[1] == 0x80 && b[2] == 0x88 &&
	              b[17] == 0x88,
	      "q4_0 zero block");
	/* q8_0: max 127, so d = 1 and q = roundf(j - 16.5): halves away from zero */
	x[0] = 127;
	for (int j = 1; j < 32; j++)
		x[j] = (float)j - 16.5f;
	ok = nestrt_quantize(NESTRT_FMT_Q8_0, x, 32, b, &err) == 0 && b[0] == 0x00 && b[1] == 0x3c && b[2] == 127;
	for (int j = 1; j < 32; j++)
		ok = ok && (int8_t)b[2 + j] == (j <= 16 ? j - 17 : j - 16);
	nestrt_dequantize(NESTRT_FMT_Q8_0, b, 32, y);
	CHECK(ok && y[0] == 127 && y[1] == -16 && y[16] == -1 && y[17] == 1, "q8_0 block of halves");
	/* f16 and bf16: ties to even, and the largest values that stay finite */
	float h[4] = {1 + 0x1p-11f, 1 + 3 * 0x1p-11f, 65519.996f, -0x1p-25f};
	uint16_t hb[4];
	CHECK(nestrt_quantize(NESTRT_FMT_F16, h, 4, hb, &err) == 0 && hb[0] == 0x3c00 && hb[1] == 0x3c02 &&
	              hb[2] == 0x7bff && hb[3] == 0x8000,
	      "f16 rounding: %s", err.message);
	float g[3] = {1 + 0x1p-8f, 1 + 3 * 0x1p-8f, 0x1.fefffep127f};
	CHECK(nestrt_quantize(NESTRT_FMT_BF16, g, 3, hb, &err) == 0 && hb[0] == 0x3f80 && hb[1] == 0x3f82 &&
	              hb[2] == 0x7f7f,
	      "bf16 rounding: %s", err.message);

	/* the errors */
	int r = nestrt_quantize(NESTRT_FMT_Q8_0, x, 100, b, &err);
	CHECK_MSG(r, err, "100 elements is not a multiple of q8_0's block of 32");
	x[40] = NAN;
	r = nestrt_quantize(NESTRT_FMT_Q4_0, x, 64, b, &err);
	CHECK_MSG(r, err, "element 40 is nan: q4_0 weights must be finite numbers");
	x[40] = -INFINITY;
	r = nestrt_quantize(NESTRT_FMT_F32, x, 64, b, &err);
	CHECK_MSG(r, err, "element 40 is -inf: f32 weights must be finite numbers");
	h[1] = 65520;
	r = nestrt_quantize(NESTRT_FMT_F16, h, 4, hb, &err);
	CHECK_MSG(r, err, "element 1 is 65520, beyond f16's range (|x| >= 65520 rounds to inf)");
	r = nestrt_quantize(7, h, 4, hb, &err);
	CHECK_MSG(r, err, "unknown weight format 7");
	CHECK(nestrt_quantize(NESTRT_FMT_F16, h, 4, hb, NULL) == -1 && nestrt_quantize(NESTRT_FMT_Q8_0, NULL, 0, NULL, &err) == 0,
	      "err NULL, and no elements");
}

/* nestrt_seq and nestrt_model_call_dims called as a hand-written descriptor's
 * entry points would: a state of 65 bytes (a u8[65] cache) holds 65 zeroed
 * bytes that the entry fills, one of 0 bytes (a [0] state) is allowed, and
 * one of 2 MiB (the least that is mapped) is freed as it was allocated;
 * the dims array holds exactly ndims values (the conditions read no more,
 * here from the heap); an access naming no state of the sequence (-1, or the
 * count) is skipped rather than read or written; a write whose box holds the
 * box written so far (larger on two axes) replaces it. */
static int seq_entry(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	(void)ctx, (void)ws;
	unsigned char *st = bufs[1];
	int zero = 1;
	for (int i = 0; i < 65; i++) {
		zero &= st[i] == 0;
		st[i] = (unsigned char)(i + 1);
	}
	*(int64_t *)bufs[0] = zero ? dims[0] : -1;
	return 0;
}
static int seq_noop(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	(void)ctx, (void)bufs, (void)dims, (void)ws;
	return 0;
}
/* a call of 70 buffers: each is &out, and the state's comes after them */
static void *seq_many_state;
static int seq_many(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	(void)ctx, (void)dims, (void)ws;
	for (int i = 1; i < 70; i++)
		if (bufs[i] != bufs[0])
			return -1;
	seq_many_state = bufs[70];
	return 0;
}
static const nestrt_model_desc seqtest_desc = {"seqtest", NULL, 0, NULL, 0, 0, "test", NULL, 0, NULL, NULL, NULL};

static void test_seq(void)
{
	nestrt_error err = {{0}};
	nestrt_model *m = nestrt_model_new(&seqtest_desc, NULL, &err);
	if (!CHECK(m != NULL, "seqtest model: %s", err.message))
		return;
	int64_t bytes[3] = {65, 0, 2 << 20};
	nestrt_seq *s = nestrt_seq_new(m, bytes, 3, &err);
	if (!CHECK(s != NULL, "seqtest sequence: %s", err.message)) {
		nestrt_model_free(m);
		return;
	}
	const char *names[1] = {"T"};
	/* 1 <= T and T <= 4 */
	nestrt_dimcheck checks[2] = {{-1, {1, 0, 0, 0}, 0, "1 <= T"}, {4, {-1, 0, 0, 0}, 0, "T <= 4"}};
	/* writes st[0:65]; then accesses of no state of the sequence */
	nestrt_access acc[3] = {{0}};
	acc[0].write = 1, acc[0].rank = 1, acc[0].size[0][0] = 65, acc[0].name = "st";
	acc[1].state = -1, acc[1].rank = 1, acc[1].size[0][0] = 1, acc[1].name = "minus";
	acc[2].state = 3, acc[2].rank = 1, acc[2].size[0][0] = 1, acc[2].name = "past";
	int64_t *dims = malloc(sizeof *dims), out = 0;
	void *bufs[1] = {&out};
	dims[0] = 3;
	int rc = nestrt_model_call_dims(m, 1, s, seq_entry, bufs, 1, dims, 1, names, checks, 2, acc, 3, "seq_step");
	CHECK(rc == 0 && out == 3, "seq_step(T = 3): rc %d, out %lld (-1: the state was not zero), %s", rc,
	      (long long)out, rc ? nestrt_model_error(m) : "");
	dims[0] = 5;
	rc = nestrt_model_call_dims(m, 1, s, seq_entry, bufs, 1, dims, 1, names, checks, 2, acc, 3, "seq_step");
	const char *e = nestrt_model_error(m);
	CHECK(rc < 0 && e && strcmp(e, "seq_step: T = 5: T <= 4 does not hold") == 0, "seq_step(T = 5): rc %d, '%s'", rc,
	      e ? e : "(none)");
	/* without a name, the errors name the call nestrt_model_call_dims */
	rc = nestrt_model_call_dims(m, 1, s, seq_entry, bufs, 1, dims, 1, names, checks, 2, acc, 3, NULL);
	e = nestrt_model_error(m);
	CHECK(rc < 0 && e && strcmp(e, "nestrt_model_call_dims: T = 5: T <= 4 does not hold") == 0,
	      "no name, T = 5: rc %d, '%s'", rc, e ? e : "(none)");
	nestrt_seq_reset(s);
	dims[0] = 4;
	out = 0;
	rc = nestrt_model_call_dims(m, 1, s, seq_entry, bufs, 1, dims, 1, names, checks, 2, acc, 3, "seq_step");
	CHECK(rc == 0 && out == 4, "seq_step(T = 4) after a reset: rc %d, out %lld, %s", rc, (long long)out,
	      rc ? nestrt_model_error(m) : "");
	free(dims);
	nestrt_seq_free(s);
	/* a write whose box holds what was written (0:2 x 0:2, then 0:4 x 0:4, larger on
	 * both axes) makes it what was written: 0:4 x 0:4 reads, 0:5 x 0:4 does not */
	int64_t one[1] = {64};
	s = nestrt_seq_new(m, one, 1, &err);
	if (CHECK(s != NULL, "seqtest sequence: %s", err.message)) {
		nestrt_access box[4] = {{0}};
		for (int i = 0; i < 4; i++) {
			box[i].write = i < 2, box[i].rank = 2, box[i].name = "st";
			box[i].size[0][0] = i == 0 ? 2 : i == 3 ? 5 : 4, box[i].size[1][0] = i == 0 ? 2 : 4;
		}
		int64_t d1[1] = {2};
		for (int i = 0; i < 3; i++) {
			rc = nestrt_model_call_dims(m, 1, s, seq_noop, bufs, 1, d1, 1, names, checks, 2, &box[i], 1, "seq_box");
			CHECK(rc == 0, "seq_box call %d: %s", i, rc ? nestrt_model_error(m) : "");
		}
		rc = nestrt_model_call_dims(m, 1, s, seq_noop, bufs, 1, d1, 1, names, checks, 2, &box[3], 1, "seq_box");
		e = nestrt_model_error(m);
		CHECK(rc < 0 && e &&
		          strcmp(e, "seq_box: T = 2: reads state st at 0:5 on axis 0 before it was written there (written: 0:4)") == 0,
		      "seq_box read of 0:5 x 0:4: rc %d, '%s'", rc, e ? e : "(none)");
		/* a read of what a new sequence has not written, said of a call of 70
		 * buffers and of a dim whose name is longer than the message: refused,
		 * the message cut at its 511th character */
		nestrt_seq_reset(s);
		void *many[70];
		for (int i = 0; i < 70; i++)
			many[i] = &out;
		char longname[600];
		memset(longname, 'N', sizeof longname - 1);
		longname[sizeof longname - 1] = 0;
		const char *lnames[1] = {longname};
		rc = nestrt_model_call_dims(m, 1, s, seq_noop, many, 70, d1, 1, lnames, checks, 2, &box[2], 1, "seq_box");
		e = nestrt_model_error(m);
		CHECK(rc < 0 && e && strlen(e) == 511 && strncmp(e, "seq_box: NNN", 12) == 0,
		      "seq_box of 70 buffers, a read of a new sequence: rc %d, %zu characters", rc, e ? strlen(e) : 0);
		/* a dim's name that leaves room for the start of why the call is refused
		 * ("seq_box: " + 480 + " = 2" is 493 characters): cut there too */
		longname[480] = 0;
		rc = nestrt_model_call_dims(m, 1, s, seq_noop, many, 70, d1, 1, lnames, checks, 2, &box[2], 1, "seq_box");
		e = nestrt_model_error(m);
		CHECK(rc < 0 && e && strlen(e) == 511 && strcmp(e + 493, ": reads state st b") == 0,
		      "seq_box, a dim name of 480 characters: rc %d, %zu characters, ends '%s'", rc, e ? strlen(e) : 0,
		      e && strlen(e) > 493 ? e + 493 : "");
		/* a call of 70 buffers that is let through (more than the 64 the
		 * runtime keeps on its stack): the entry gets them, then the state's */
		seq_many_state = NULL;
		rc = nestrt_model_call_dims(m, 1, s, seq_many, many, 70, d1, 1, names, checks, 2, &box[0], 1, "seq_many");
		CHECK(rc == 0 && seq_many_state != NULL && seq_many_state != (void *)&out,
		      "seq_many of 70 buffers: rc %d (%s), the state after them %s", rc, rc ? nestrt_model_error(m) : "",
		      seq_many_state ? "given" : "missing");
		nestrt_seq_free(s);
	}
	nestrt_model_free(m);
}

/* A sequence made, and a call of 70 buffers over one (more than the runtime
 * keeps on its stack), with their 1st, 2nd, ... allocation failing in turn:
 * refused with "out of memory" (or done all the same), never a crash; after a
 * refused call the sequence takes the next (it is not left busy); check-asan
 * finds nothing leaked. */
static void test_seq_out_of_memory(void)
{
	nestrt_error err = {{0}};
	nestrt_model *m = nestrt_model_new(&seqtest_desc, NULL, &err);
	if (!CHECK(m != NULL, "seqtest model: %s", err.message))
		return;
	int64_t bytes[3] = {65, 0, 2 << 20};
	int failed = 0, n;
	char bad[600] = "";
	for (n = 0; n < 1000; n++) {
		oom_arm(n);
		nestrt_seq *s = nestrt_seq_new(m, bytes, 3, &err);
		int hit = oom_disarm();
		if (!s && !strstr(err.message, "out of memory") && !bad[0])
			snprintf(bad, sizeof bad, "allocation %d failing: '%s'", n + 1, err.message);
		nestrt_seq_free(s);
		if (!hit)
			break;
		failed++;
	}
	CHECK(failed >= 4 && !bad[0], "a sequence made, each of its %d allocations failing in turn: %s", failed,
	      bad[0] ? bad : "too few allocations seen");
	const char *names[1] = {"T"};
	nestrt_dimcheck checks[1] = {{-1, {1, 0, 0, 0}, 0, "1 <= T"}};
	nestrt_access w = {0};
	w.write = 1, w.rank = 1, w.size[0][0] = 4, w.name = "st";
	int64_t one[1] = {64}, d1[1] = {2}, out = 0;
	void *many[70];
	for (int i = 0; i < 70; i++)
		many[i] = &out;
	nestrt_seq *s = nestrt_seq_new(m, one, 1, &err);
	failed = 0, bad[0] = 0;
	for (n = 0; s && n < 1000; n++) {
		oom_arm(n);
		int rc = nestrt_model_call_dims(m, 1, s, seq_many, many, 70, d1, 1, names, checks, 1, &w, 1, "seq_many");
		int hit = oom_disarm();
		const char *e = nestrt_model_error(m);
		if (rc < 0 && !(e && strstr(e, "out of memory")) && !bad[0])
			snprintf(bad, sizeof bad, "allocation %d failing: '%s'", n + 1, e ? e : "(no message)");
		rc = nestrt_model_call_dims(m, 1, s, seq_many, many, 70, d1, 1, names, checks, 1, &w, 1, "seq_many");
		if (rc < 0 && !bad[0])
			snprintf(bad, sizeof bad, "allocation %d failing, then the next call: '%s'", n + 1, nestrt_model_error(m));
		if (!hit)
			break;
		failed++;
	}
	CHECK(s && failed >= 3 && !bad[0], "a call of 70 buffers over a sequence, each of its %d allocations failing in turn: %s",
	      failed, !s ? err.message : bad[0] ? bad : "too few allocations seen");
	nestrt_seq_free(s);
	nestrt_model_free(m);
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc == 2 && strcmp(argv[1], "--profile-child") == 0)
		return profile_child();
	if (argc == 3 && (strcmp(argv[1], "--open-weights") == 0 || strcmp(argv[1], "--read-npy") == 0))
		return single_file(argv[1], argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: %s [--open-weights FILE | --read-npy FILE]\n", argv[0]);
		return 2;
	}
	if (getenv("PYTHON"))
		python = getenv("PYTHON");
	const char *script = getenv("NESTRT_CORPUS_SCRIPT");
	if (!script)
		script = "tests/io/make_corpus.py";
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/nestrt-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 2;
	}

	test_weights_good();
	test_weights_half();
	test_half_bind();
	test_bind_errors();
	test_open_errors();
	test_mutations();
	test_corpus(script);
	test_gguf(script);
	test_dispatch();
	test_profile();
	test_npy_roundtrip();
	test_npy_numpy();
	test_npy_write_errors();
	test_packed();
	test_packed_panels();
	test_prepacked_refused();
	test_out_of_memory();
	test_prepacked_mapping();
	test_packed_release();
	test_gguf_blocks_memory();
	test_half_format_memory();
	test_formats();
	test_seq();
	test_seq_out_of_memory();

	char *cmd = fmt("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
	free(cmd);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail ? 1 : 0;
}

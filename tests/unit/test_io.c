/* test_io.c - unit tests of weights.c (safetensors, GGUF) and npy.c: nestc's
 * adapters over the runtime's readers and .npy header writer, so every case
 * here checks those through the types and reasons nestc uses.
 *
 *   test_io                      run every test; last line "N passed, M failed"
 *   test_io --open-weights FILE  open FILE as safetensors: prints OK or FILE: REASON
 *   test_io --read-npy FILE      read FILE as .npy: the same
 *
 * The single-file modes exit 0 (OK) or 1 (rejected); tests/io/run_corpus.sh
 * feeds them malformed files. NumPy compatibility is checked by running
 * $PYTHON (default /usr/bin/python3) to write and read files. */
#include "nestc.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct T {
	int pass, fail;
	char dir[256];
	const char *python;
} T;

#define CHECK(t, cond, ...) check((t), (cond), __FILE__, __LINE__, __VA_ARGS__)

static int check(T *t, int cond, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int check(T *t, int cond, const char *file, int line, const char *fmt, ...)
{
	if (cond) {
		t->pass++;
		return 1;
	}
	t->fail++;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s:%d: FAIL: ", file, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 0;
}

static char *tpath(T *t, const char *name)
{
	return xasprintf("%s/%s", t->dir, name);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
	if (write_file_atomic(path, p, n) < 0) {
		perror(path);
		exit(2);
	}
}

static char *read_bytes(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	Buf b = {0};
	int c;
	while ((c = fgetc(f)) != EOF)
		buf_putc(&b, (char)c);
	fclose(f);
	*n = b.len;
	return b.s ? b.s : xstrdup("");
}

static int run_python(T *t, const char *script)
{
	char *sp = tpath(t, "script.py");
	write_bytes(sp, script, strlen(script));
	char *cmd = xasprintf("'%s' '%s' '%s'", t->python, sp, t->dir);
	int st = system(cmd);
	free(cmd);
	free(sp);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------ npy */

static void fill_pattern(DType dt, void *data, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		switch (dt) {
		case DT_BOOL: ((unsigned char *)data)[i] = (unsigned char)(i % 3 == 1); break;
		case DT_I32: ((int32_t *)data)[i] = (int32_t)(i * 7 - 100); break;
		case DT_I64: ((int64_t *)data)[i] = (int64_t)i * 1000000007LL - (1LL << 40); break;
		case DT_F32: ((float *)data)[i] = (float)i * 0.25f - 3.0f; break;
		case DT_F64: ((double *)data)[i] = (double)i / 3.0 - 1e10; break;
		/* finite bits of either sign (no NaN, no -0) */
		case DT_F16:
		case DT_BF16: ((uint16_t *)data)[i] = (uint16_t)((i * 7) % 0x7c00 | (i & 1) << 15); break;
		case DT_I8: ((int8_t *)data)[i] = (int8_t)((i * 7 + 28) % 256 - 128); break;
		case DT_U8: ((uint8_t *)data)[i] = (uint8_t)((i * 7) % 256); break;
		case DT_I16: ((int16_t *)data)[i] = (int16_t)((i * 7 + 28) % 65536 - 32768); break;
		case DT_U16: ((uint16_t *)data)[i] = (uint16_t)((i * 7) % 65536); break;
		default: abort();
		}
	}
}

static void test_npy_roundtrip(T *t)
{
	static const struct {
		int rank;
		int64_t shape[MAX_RANK];
	} shapes[] = {
		{0, {0}}, {1, {5}}, {1, {0}}, {2, {3, 4}}, {3, {2, 3, 4}}, {3, {2, 0, 3}},
		{8, {1, 2, 1, 3, 1, 2, 1, 2}}, {1, {1234567}},
	};
	for (int d = 0; d < DT_COUNT; d++) {
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
			DType dt = (DType)d;
			int rank = shapes[s].rank;
			const int64_t *shape = shapes[s].shape;
			int64_t n = 1;
			for (int i = 0; i < rank; i++)
				n *= shape[i];
			size_t nbytes = (size_t)n * (size_t)dtype_size(dt);
			void *data = xmalloc(nbytes);
			fill_pattern(dt, data, n);
			char *enc;
			size_t enclen;
			npy_encode(dt, rank, shape, data, &enc, &enclen);
			/* numpy's layout: header (magic to '\n') a multiple of 64 bytes. */
			size_t hdr = enclen - nbytes;
			CHECK(t, hdr % 64 == 0 && enc[hdr - 1] == '\n' && memcmp(enc, "\x93NUMPY\x01\x00", 8) == 0,
			      "%s rank %d: header layout (%zu bytes)", dtype_name(dt), rank, hdr);
			char *path = tpath(t, "rt.npy");
			write_bytes(path, enc, enclen);
			NpyArray a;
			char err[512];
			int r = npy_read(path, &a, err, sizeof err);
			if (CHECK(t, r == 0, "%s rank %d: npy_read: %s", dtype_name(dt), rank, err)) {
				/* bf16 is written as its bits, '<u2', which reads as u16 */
				int same = a.dtype == (dt == DT_BF16 ? DT_U16 : dt) && a.rank == rank && a.nbytes == nbytes &&
				           memcmp(a.shape, shape, sizeof(int64_t) * (size_t)rank) == 0 &&
				           (nbytes == 0 || memcmp(a.data, data, nbytes) == 0);
				CHECK(t, same, "%s rank %d: round trip differs", dtype_name(dt), rank);
				npy_free(&a);
			}
			free(path);
			free(enc);
			free(data);
		}
	}
}

static NpyArray read_ok(T *t, const char *name, DType dt, int rank, const int64_t *shape)
{
	char *path = tpath(t, name);
	NpyArray a;
	char err[512];
	int r = npy_read(path, &a, err, sizeof err);
	free(path);
	if (!CHECK(t, r == 0, "%s: %s", name, err))
		return a;
	int ok = a.dtype == dt && a.rank == rank;
	for (int i = 0; ok && i < rank; i++)
		ok = a.shape[i] == shape[i];
	CHECK(t, ok, "%s: wrong dtype/shape", name);
	return a;
}

static void read_bad(T *t, const char *name, const char *want)
{
	char *path = tpath(t, name);
	NpyArray a;
	char err[512] = "";
	int r = npy_read(path, &a, err, sizeof err);
	free(path);
	if (CHECK(t, r < 0, "%s: accepted, should fail with '%s'", name, want))
		CHECK(t, strstr(err, want) != NULL, "%s: reason '%s' lacks '%s'", name, err, want);
	else
		npy_free(&a);
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
	"for v in ((2, 0), (3, 0)):\n"
	"    with open(d + '/np-v%d.npy' % v[0], 'wb') as f:\n"
	"        fmt.write_array(f, a, version=v)\n";

static void test_npy_numpy(T *t)
{
	if (!CHECK(t, run_python(t, numpy_writer) == 0, "numpy writer script failed"))
		return;
	NpyArray a;

	int64_t s34[] = {3, 4};
	a = read_ok(t, "np-f32.npy", DT_F32, 2, s34);
	if (a.data) {
		const float *f = a.data;
		CHECK(t, f[0] == 0.0f && f[1] == 0.5f && f[11] == 5.5f, "np-f32.npy: values");
		/* Our writer produces numpy's bytes exactly. */
		char *enc;
		size_t enclen, nplen;
		npy_encode(DT_F32, 2, s34, a.data, &enc, &enclen);
		char *path = tpath(t, "np-f32.npy");
		char *np = read_bytes(path, &nplen);
		CHECK(t, np && nplen == enclen && memcmp(np, enc, enclen) == 0,
		      "npy_encode differs from np.save for f32[3, 4]");
		free(np);
		free(path);
		free(enc);
		npy_free(&a);
	}
	int64_t s213[] = {2, 1, 3};
	a = read_ok(t, "np-f64.npy", DT_F64, 3, s213);
	if (a.data) {
		const double *f = a.data;
		CHECK(t, f[0] == -2.5 && f[5] == 2.5, "np-f64.npy: values");
		npy_free(&a);
	}
	int64_t s5[] = {5};
	a = read_ok(t, "np-i32.npy", DT_I32, 1, s5);
	if (a.data) {
		const int32_t *v = a.data;
		CHECK(t, v[0] == -2 && v[4] == 2, "np-i32.npy: values");
		npy_free(&a);
	}
	int64_t s3[] = {3};
	a = read_ok(t, "np-i64.npy", DT_I64, 1, s3);
	if (a.data) {
		const int64_t *v = a.data;
		CHECK(t, v[0] == -(1LL << 40) && v[2] == (1LL << 62), "np-i64.npy: values");
		npy_free(&a);
	}
	int64_t s22[] = {2, 2};
	a = read_ok(t, "np-bool.npy", DT_BOOL, 2, s22);
	if (a.data) {
		const unsigned char *v = a.data;
		CHECK(t, v[0] == 1 && v[1] == 0 && v[2] == 0 && v[3] == 1, "np-bool.npy: values");
		npy_free(&a);
	}
	a = read_ok(t, "np-0d.npy", DT_F32, 0, NULL);
	if (a.data) {
		CHECK(t, a.nbytes == 4 && *(const float *)a.data == 3.5f, "np-0d.npy: value");
		npy_free(&a);
	}
	int64_t s20[] = {2, 0};
	a = read_ok(t, "np-empty.npy", DT_F32, 2, s20);
	if (a.data) {
		CHECK(t, a.nbytes == 0, "np-empty.npy: size");
		npy_free(&a);
	}
	int64_t s70k[] = {70000};
	a = read_ok(t, "np-bigdim.npy", DT_BOOL, 1, s70k);
	npy_free(&a);
	a = read_ok(t, "np-v2.npy", DT_F32, 2, s34);
	npy_free(&a);
	a = read_ok(t, "np-v3.npy", DT_F32, 2, s34);
	npy_free(&a);

	read_bad(t, "np-be.npy", "big-endian arrays are not supported (descr '>f4')");
	read_bad(t, "np-fortran.npy", "fortran_order arrays are not supported");
	read_bad(t, "np-object.npy", "object arrays are not supported");
	a = read_ok(t, "np-f16.npy", DT_F16, 1, s3);
	if (a.data) {
		const uint16_t *h = a.data;
		CHECK(t, h[0] == 0x3e00 && h[1] == 0xc000 && h[2] == 0x7bff, "np-f16.npy: bits");
		npy_free(&a);
	}
	a = read_ok(t, "np-u8.npy", DT_U8, 1, s3);
	if (a.data) {
		const unsigned char *v = a.data;
		CHECK(t, v[0] == 0 && v[1] == 7 && v[2] == 255, "np-u8.npy: values");
		npy_free(&a);
	}
	read_bad(t, "np-u32.npy", "unsupported dtype (descr '<u4'");
	read_bad(t, "np-c8.npy", "unsupported dtype (descr '<c8'");
	read_bad(t, "np-struct.npy", "structured arrays are not supported");
}

/* Every dtype and several shapes written by us, loaded and checked by numpy,
 * and compared byte for byte with np.save of the same array. */
static void test_npy_numpy_reads_ours(T *t)
{
	static const struct {
		const char *name;
		int rank;
		int64_t shape[MAX_RANK];
	} cases[] = {
		{"0d", 0, {0}}, {"1d", 1, {7}}, {"3d", 3, {2, 3, 4}}, {"empty", 2, {0, 5}},
		{"long", 1, {12345678901LL / 100000}},
	};
	Buf py = {0};
	buf_puts(&py, "import sys, numpy as np\nd = sys.argv[1]\nbad = 0\n"
	              "def pat(dt, shape):\n"
	              "    i = np.arange(int(np.prod(shape)), dtype=np.int64)\n"
	              "    if dt == 'bool': a = (i % 3 == 1)\n"
	              "    elif dt == 'i32': a = (i * 7 - 100).astype('<i4')\n"
	              "    elif dt == 'i64': a = i * 1000000007 - (1 << 40)\n"
	              "    elif dt == 'f32': a = (i.astype('<f4') * np.float32(0.25) - np.float32(3))\n"
	              "    elif dt in ('f16', 'bf16'):\n"
	              "        a = ((i * 7) % 0x7c00 | (i & 1) << 15).astype('<u2')\n"
	              "        if dt == 'f16': a = a.view('<f2')\n"
	              "    elif dt == 'i8': a = ((i * 7 + 28) % 256 - 128).astype('|i1')\n"
	              "    elif dt == 'u8': a = ((i * 7) % 256).astype('|u1')\n"
	              "    elif dt == 'i16': a = ((i * 7 + 28) % 65536 - 32768).astype('<i2')\n"
	              "    elif dt == 'u16': a = ((i * 7) % 65536).astype('<u2')\n"
	              "    else: a = i / 3.0 - 1e10\n"
	              "    return a.reshape(shape)\n"
	              "import io\n"
	              "def chk(name, dt, shape):\n"
	              "    global bad\n"
	              "    a = np.load(d + '/' + name)\n"
	              "    e = pat(dt, shape)\n"
	              "    if a.dtype != e.dtype or a.shape != e.shape or not np.array_equal(a, e):\n"
	              "        print('numpy: mismatch in', name); bad = 1\n"
	              "    f = io.BytesIO(); np.save(f, e)\n"
	              "    if f.getvalue() != open(d + '/' + name, 'rb').read():\n"
	              "        print('numpy: np.save bytes differ for', name); bad = 1\n");
	for (int d = 0; d < DT_COUNT; d++) {
		for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
			DType dt = (DType)d;
			int64_t n = 1;
			for (int i = 0; i < cases[c].rank; i++)
				n *= cases[c].shape[i];
			size_t nbytes = (size_t)n * (size_t)dtype_size(dt);
			void *data = xmalloc(nbytes);
			fill_pattern(dt, data, n);
			char *enc;
			size_t enclen;
			npy_encode(dt, cases[c].rank, cases[c].shape, data, &enc, &enclen);
			char *name = xasprintf("ours-%s-%s.npy", dtype_name(dt), cases[c].name);
			char *path = tpath(t, name);
			write_bytes(path, enc, enclen);
			buf_printf(&py, "chk('%s', '%s', (", name, dtype_name(dt));
			for (int i = 0; i < cases[c].rank; i++)
				buf_printf(&py, "%lld,", (long long)cases[c].shape[i]);
			buf_puts(&py, "))\n");
			free(path);
			free(name);
			free(enc);
			free(data);
		}
	}
	buf_puts(&py, "sys.exit(bad)\n");
	CHECK(t, run_python(t, py.s) == 0, "numpy disagrees with files written by npy_encode");
	buf_free(&py);
}

/* Hand-made headers: the parser's corners. */
static void npy_raw(T *t, const char *name, int version, const char *hdr, size_t datalen)
{
	Buf b = {0};
	buf_puts(&b, "\x93NUMPY");
	size_t hl = strlen(hdr);
	char pre[6] = {(char)version, 0};
	int lb = version == 1 ? 2 : 4;
	for (int i = 0; i < lb; i++)
		pre[2 + i] = (char)(hl >> (8 * i));
	for (int i = 0; i < 2 + lb; i++)
		buf_putc(&b, pre[i]);
	buf_puts(&b, hdr);
	for (size_t i = 0; i < datalen; i++)
		buf_putc(&b, (char)i);
	char *path = tpath(t, name);
	write_bytes(path, b.s, b.len);
	free(path);
	buf_free(&b);
}

static void test_npy_parser(T *t)
{
	NpyArray a;
	int64_t s3[] = {3}, s34[] = {3, 4};
	npy_raw(t, "p1.npy", 1, "{'shape': (3,), 'fortran_order': False, 'descr': '<i4'}\n", 12);
	a = read_ok(t, "p1.npy", DT_I32, 1, s3);
	npy_free(&a);
	npy_raw(t, "p2.npy", 1, "{ \"descr\" : \"<f8\" , \"fortran_order\":False,\"shape\":( 3 , 4 , ) , }   \n", 96);
	a = read_ok(t, "p2.npy", DT_F64, 2, s34);
	npy_free(&a);
	npy_raw(t, "p3.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3L, 4L), }", 96);
	a = read_ok(t, "p3.npy", DT_I64, 2, s34);
	npy_free(&a);
	npy_raw(t, "p4.npy", 2, "{'descr': '<b1', 'fortran_order': False, 'shape': ()}", 1);
	a = read_ok(t, "p4.npy", DT_BOOL, 0, NULL);
	npy_free(&a);

	npy_raw(t, "q1.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12);
	read_bad(t, "q1.npy", "'shape' is not a tuple");
	npy_raw(t, "q2.npy", 1, "{'descr': '<f4', 'fortran_order': False}", 4);
	read_bad(t, "q2.npy", "missing key 'shape'");
	npy_raw(t, "q3.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4);
	read_bad(t, "q3.npy", "unexpected key 'x'");
	npy_raw(t, "q4.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}", 4);
	read_bad(t, "q4.npy", "duplicate key 'shape'");
	npy_raw(t, "q5.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4);
	read_bad(t, "q5.npy", "unexpected text after the dict");
	npy_raw(t, "q6.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4);
	read_bad(t, "q6.npy", "negative dimension");
	npy_raw(t, "q7.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4);
	read_bad(t, "q7.npy", "too large");
	npy_raw(t, "q8.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}", 4);
	read_bad(t, "q8.npy", "shape f32[4611686018427387904, 4] is too large");
	/* no elements, but the strides of (2^32, 2^32, 0) overflow: said so */
	npy_raw(t, "q8b.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0)}", 0);
	read_bad(t, "q8b.npy", "has no elements, but its strides do not fit in 64 bits");
	npy_raw(t, "q9.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", 4);
	read_bad(t, "q9.npy", "rank exceeds the maximum of 8");
	npy_raw(t, "q10.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 7);
	read_bad(t, "q10.npy", "truncated data: f32[2] needs 8 bytes, file has 7");
	npy_raw(t, "q11.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 9);
	read_bad(t, "q11.npy", "trailing bytes after the data: f32[2] needs 8 bytes, file has 9");
	npy_raw(t, "q12.npy", 1, "{'descr': 'f4', 'fortran_order': False, 'shape': (2,)}", 8);
	read_bad(t, "q12.npy", "unsupported dtype (descr 'f4'");
	npy_raw(t, "q13.npy", 9, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8);
	read_bad(t, "q13.npy", "unsupported .npy format version 9.0");
	npy_raw(t, "q14.npy", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8);
	read_bad(t, "q14.npy", "'fortran_order' is not True or False");
	npy_raw(t, "q15.npy", 1, "", 0);
	read_bad(t, "q15.npy", "not a dict literal");
	char *p = tpath(t, "q16.npy");
	write_bytes(p, "", 0);
	read_bad(t, "q16.npy", "file is empty");
	write_bytes(p, "\x93NUM", 4);
	read_bad(t, "q16.npy", "bad magic");
	write_bytes(p, "\x93NUMPY\x01\x00\x40", 9);
	read_bad(t, "q16.npy", "truncated in the header length");
	write_bytes(p, "\x93NUMPY\x01\x00\x40\x00{'descr'", 18);
	read_bad(t, "q16.npy", "header length 64 exceeds file size 18");
	free(p);
	read_bad(t, "does-not-exist.npy", "cannot open");
}

/* ------------------------------------------------------------ safetensors */

/* Write a safetensors file: header text padded with pad spaces, then data. */
static void st_write(T *t, const char *name, const char *hdr, int pad, const void *data, size_t n)
{
	Buf b = {0};
	uint64_t hl = strlen(hdr) + (size_t)pad;
	for (int i = 0; i < 8; i++)
		buf_putc(&b, (char)(hl >> (8 * i)));
	buf_puts(&b, hdr);
	for (int i = 0; i < pad; i++)
		buf_putc(&b, ' ');
	for (size_t i = 0; i < n; i++)
		buf_putc(&b, data ? ((const char *)data)[i] : (char)i);
	char *path = tpath(t, name);
	write_bytes(path, b.s, b.len);
	free(path);
	buf_free(&b);
}

static Weights *st_open(T *t, const char *name, char *err, size_t errlen)
{
	char *path = tpath(t, name);
	Weights *w = weights_open(path, err, errlen);
	free(path);
	return w;
}

static void st_bad(T *t, const char *name, const char *hdr, size_t n, const char *want)
{
	char err[512] = "";
	st_write(t, name, hdr, 0, NULL, n);
	Weights *w = st_open(t, name, err, sizeof err);
	if (CHECK(t, !w, "%s: accepted, should fail with '%s'", name, want))
		CHECK(t, strstr(err, want) != NULL, "%s: reason '%s' lacks '%s'", name, err, want);
	weights_close(w);
}

static void test_safetensors(T *t)
{
	char err[512];
	/* Offsets deliberately out of name order; a gap between b and c is allowed. */
	struct {
		float a[6];
		int64_t b[2];
		char gap[3];
		unsigned char c[2];
		uint16_t h[2];
	} __attribute__((packed)) data = {{1, 2, 3, 4, 5, 6}, {-7, 1LL << 50}, {0}, {1, 0}, {0x3c00, 0}};
	const char *hdr =
		"{\"__metadata__\": {\"format\": \"pt\"},"
		" \"c\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [43, 45]},"
		" \"b\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [24, 40]},"
		" \"a.w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
		" \"half\": {\"dtype\": \"BF16\", \"shape\": [1, 2], \"data_offsets\": [45, 49]},"
		" \"empty\": {\"dtype\": \"F64\", \"shape\": [0, 4], \"data_offsets\": [24, 24]},"
		" \"scalar\": {\"dtype\": \"I32\", \"shape\": [], \"data_offsets\": [0, 4]}}";
	/* hdr plus "scalar", which overlaps "a.w". */
	const char *hdr_ok =
		"{\"__metadata__\": {\"format\": \"pt\"},"
		" \"c\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [43, 45]},"
		" \"b\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [24, 40]},"
		" \"a.w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
		" \"half\": {\"dtype\": \"BF16\", \"shape\": [1, 2], \"data_offsets\": [45, 49]},"
		" \"empty\": {\"dtype\": \"F64\", \"shape\": [0, 4], \"data_offsets\": [24, 24]}}";
	st_write(t, "ok.safetensors", hdr_ok, 5, &data, sizeof data);
	Weights *w = st_open(t, "ok.safetensors", err, sizeof err);
	if (CHECK(t, w != NULL, "ok.safetensors: %s", err)) {
		CHECK(t, w->n == 5, "ok.safetensors: %d tensors", w->n);
		for (int i = 1; i < w->n; i++)
			CHECK(t, strcmp(w->t[i - 1].name, w->t[i].name) < 0, "tensors not sorted by name");
		WTensor *x = weights_find(w, "a.w");
		if (CHECK(t, x != NULL, "a.w not found")) {
			float v[6];
			memcpy(v, x->data, sizeof v);
			CHECK(t, x->dtype == DT_F32 && x->rank == 2 && x->shape[0] == 2 && x->shape[1] == 3 &&
			      x->nbytes == 24 && strcmp(x->dtype_str, "F32") == 0 && v[0] == 1 && v[5] == 6,
			      "a.w: wrong");
		}
		x = weights_find(w, "b");
		if (CHECK(t, x != NULL, "b not found")) {
			int64_t v[2];
			memcpy(v, x->data, sizeof v);
			CHECK(t, x->dtype == DT_I64 && x->rank == 1 && v[0] == -7 && v[1] == 1LL << 50, "b: wrong");
		}
		x = weights_find(w, "c");
		CHECK(t, x && x->dtype == DT_BOOL && ((const unsigned char *)x->data)[0] == 1, "c: wrong");
		x = weights_find(w, "half");
		float hv[2] = {-1, -1};
		uint16_t hb[2] = {1, 1};
		const void *hd = x ? weights_data(w, x, DT_BF16, err, sizeof err) : NULL;
		if (hd)
			memcpy(hb, hd, sizeof hb);
		hd = x ? weights_data(w, x, DT_F32, err, sizeof err) : NULL;
		if (hd && x->nbytes == 8)
			memcpy(hv, hd, sizeof hv);
		CHECK(t, x && x->dtype == DT_F32 && x->half_dtype == DT_BF16 && strcmp(x->dtype_str, "BF16") == 0 &&
		      x->nbytes == 8 && hv[0] == 0x1p-7f && hv[1] == 0 && hb[0] == 0x3c00 && hb[1] == 0,
		      "half: BF16 should bind bf16 as it is and f32 widened (0x3c00 is 2^-7)");
		x = weights_find(w, "empty");
		CHECK(t, x && x->dtype == DT_F64 && x->rank == 2 && x->shape[0] == 0 && x->nbytes == 0,
		      "empty: wrong");
		CHECK(t, weights_find(w, "__metadata__") == NULL && weights_find(w, "a") == NULL &&
		      weights_find(w, "zzz") == NULL, "weights_find finds what is not there");
		weights_close(w);
	}

	st_bad(t, "overlap.safetensors", hdr, sizeof data, "tensor 'scalar' overlaps tensor 'a.w'");

	st_write(t, "emptyobj.safetensors", "{}", 6, NULL, 0);
	w = st_open(t, "emptyobj.safetensors", err, sizeof err);
	if (CHECK(t, w != NULL, "emptyobj.safetensors: %s", err))
		CHECK(t, w->n == 0 && weights_find(w, "x") == NULL, "emptyobj: tensors");
	weights_close(w);

	/* Every known dtype, and a scalar. */
	const char *all =
		"{\"f64\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]},"
		" \"f32\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [8, 12]},"
		" \"f16\": {\"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [12, 14]},"
		" \"bf16\": {\"dtype\": \"BF16\", \"shape\": [1], \"data_offsets\": [14, 16]},"
		" \"i64\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [16, 24]},"
		" \"i32\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [24, 28]},"
		" \"i16\": {\"dtype\": \"I16\", \"shape\": [1], \"data_offsets\": [28, 30]},"
		" \"i8\": {\"dtype\": \"I8\", \"shape\": [1], \"data_offsets\": [30, 31]},"
		" \"u8\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [31, 32]},"
		" \"bool\": {\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [32, 33]},"
		" \"u16\": {\"dtype\": \"U16\", \"shape\": [1], \"data_offsets\": [33, 35]},"
		" \"u32\": {\"dtype\": \"U32\", \"shape\": [1], \"data_offsets\": [35, 39]},"
		" \"u64\": {\"dtype\": \"U64\", \"shape\": [1], \"data_offsets\": [39, 47]},"
		" \"e4\": {\"dtype\": \"F8_E4M3\", \"shape\": [1], \"data_offsets\": [47, 48]},"
		" \"e5\": {\"dtype\": \"F8_E5M2\", \"shape\": [1], \"data_offsets\": [48, 49]}}";
	st_write(t, "all.safetensors", all, 0, NULL, 49);
	w = st_open(t, "all.safetensors", err, sizeof err);
	if (CHECK(t, w != NULL, "all.safetensors: %s", err)) {
		static const struct {
			const char *name;
			int dt;
		} want[] = {{"f64", DT_F64}, {"f32", DT_F32}, {"i64", DT_I64}, {"i32", DT_I32},
		            {"bool", DT_BOOL}, {"f16", DT_F32}, {"bf16", DT_F32}, {"i16", DT_I16}, {"i8", DT_I8},
		            {"u8", DT_U8}, {"u16", DT_U16}, {"u32", -1}, {"u64", -1}, {"e4", -1}, {"e5", -1}};
		CHECK(t, w->n == 15, "all.safetensors: %d tensors", w->n);
		for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
			WTensor *x = weights_find(w, want[i].name);
			CHECK(t, x && x->dtype == want[i].dt, "all.safetensors: %s dtype", want[i].name);
		}
		WTensor *x = weights_find(w, "f32");
		CHECK(t, x && x->rank == 0 && x->nbytes == 4, "all.safetensors: scalar");
		weights_close(w);
	}

	st_bad(t, "s1.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4, 8], \"data_offsets\": [0, 64]}}",
	       64, "tensor 'a': data_offsets [0, 64] do not match f32[4, 8] (128 bytes)");
	st_bad(t, "s2.safetensors", "{\"a\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 1]}}",
	       1, "tensor 'a': unknown dtype 'Q4'");
	st_bad(t, "s3.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 8]}}",
	       4, "tensor 'a': data_offsets [0, 8] extend beyond the 4-byte data section");
	st_bad(t, "s4.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}",
	       4, "negative dimension -1");
	st_bad(t, "s5.safetensors",
	       "{\"a\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 4611686018427387904], \"data_offsets\": [0, 4]}}",
	       4, "shape f32[4611686018427387904, 4611686018427387904] is too large");
	st_bad(t, "s5b.safetensors",
	       "{\"a\": {\"dtype\": \"F64\", \"shape\": [4611686018427387904], \"data_offsets\": [0, 4]}}",
	       4, "is too large");
	st_bad(t, "s6.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}",
	       4, "negative data_offsets [-4, 0]");
	st_bad(t, "s7.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 0]}}",
	       4, "begin after they end");
	st_bad(t, "s8.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
	       "tensor 'a': missing \"data_offsets\"");
	st_bad(t, "s9.safetensors", "{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
	       "\"dtype\" is not a string");
	st_bad(t, "s10.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1.0], \"data_offsets\": [0, 4]}}",
	       4, "shape entry 0 is not an integer");
	st_bad(t, "s11.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}",
	       4, "\"shape\" is not a list");
	st_bad(t, "s12.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}",
	       8, "\"data_offsets\" is not a list of two integers");
	st_bad(t, "s13.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}",
	       8, "\"data_offsets\" is not a list of two integers");
	st_bad(t, "s14.safetensors",
	       "{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
	       "rank 9 exceeds the maximum of 8");
	st_bad(t, "s15.safetensors", "{\"a\": [1, 2]}", 0, "tensor 'a': entry is not a JSON object");
	st_bad(t, "s16.safetensors", "[1, 2]", 0, "header is not a JSON object");
	st_bad(t, "s17.safetensors", "{\"a\": ", 0, "header is not valid JSON");
	st_bad(t, "s18.safetensors", "{} x", 0, "header is not valid JSON");
	st_bad(t, "s19.safetensors", "{\"__metadata__\": {\"a\": 1}}", 0, "\"__metadata__\" value 'a' is not a string");
	st_bad(t, "s20.safetensors", "{\"__metadata__\": []}", 0, "\"__metadata__\" is not a JSON object");
	st_bad(t, "s21.safetensors",
	       "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
	       " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "duplicate");
	st_bad(t, "s22.safetensors",
	       "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
	       " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12,
	       "tensor 'a' overlaps tensor 'b'");
	st_bad(t, "s23.safetensors",
	       "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
	       " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]},"
	       " \"c\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 16,
	       "tensor 'a' overlaps tensor 'b'");

	char *p = tpath(t, "raw.safetensors");
	write_bytes(p, "", 0);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strstr(err, "file is empty"), "empty file: %s", err);
	write_bytes(p, "abc", 3);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strstr(err, "file is too short (3 bytes)"), "3-byte file: %s", err);
	write_bytes(p, "\0\0\0\0\0\0\0\0{}", 10);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strstr(err, "header length is 0"), "zero header: %s", err);
	write_bytes(p, "\0\x10\0\0\0\0\0\0{}", 10);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strstr(err, "header length 4096 exceeds file size 10"), "long header: %s", err);
	write_bytes(p, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strstr(err, "header length 18446744073709551615 exceeds file size 10"),
	      "huge header: %s", err);
	/* A header over the 100 MB limit, in a sparse file just large enough to hold it. */
	FILE *f = fopen(p, "wb");
	if (f) {
		fwrite("\x01\xe1\xf5\x05\0\0\0\0{}", 1, 10, f); /* 100000001 */
		int r = fflush(f) || ftruncate(fileno(f), 100000001 + 8 + 16);
		fclose(f);
		w = r ? NULL : weights_open(p, err, sizeof err);
		CHECK(t, !r && !w && strstr(err, "header length 100000001 is larger than the limit"),
		      "absurd header: %s", err);
	}
	free(p);

	/* Names in messages: control characters hidden, long names cut. */
	Buf name = {0};
	buf_puts(&name, "{\"a\\u0007\\n");
	for (int i = 0; i < 1000; i++)
		buf_puts(&name, "\\u00e9");
	buf_puts(&name, "\": {\"dtype\": \"Q4\", \"shape\": [], \"data_offsets\": [0, 0]}}");
	st_write(t, "longname.safetensors", name.s, 0, NULL, 0);
	buf_free(&name);
	w = st_open(t, "longname.safetensors", err, sizeof err);
	CHECK(t, !w && strncmp(err, "tensor 'a??\xc3\xa9", 10) == 0 && strstr(err, "...': unknown dtype 'Q4'") &&
	      strlen(err) < 200, "long name: %s", err);

	w = st_open(t, "does-not-exist.safetensors", err, sizeof err);
	CHECK(t, !w && strstr(err, "cannot open"), "missing file: %s", err);
	w = weights_open(t->dir, err, sizeof err);
	CHECK(t, !w && strstr(err, "not a regular file"), "directory: %s", err);
}

/* ------------------------------------------------------------ GGUF */

/* A GGUF file through nestc's adapter: tests/io/gguf.py writes one tensor
 * of every type; converted ones are f32 tensors that name the file's type. */
static void test_gguf(T *t)
{
	char *gdir = tpath(t, "gguf");
	char *cmd = xasprintf("'%s' tests/io/gguf.py '%s'", t->python, gdir);
	int st = system(cmd);
	free(cmd);
	if (!CHECK(t, st == 0, "tests/io/gguf.py failed")) {
		free(gdir);
		return;
	}
	char err[512];
	char *p = xasprintf("%s/all.gguf", gdir);
	Weights *w = weights_open(p, err, sizeof err);
	if (CHECK(t, w != NULL, "all.gguf: %s", err)) {
		CHECK(t, w->n == 18, "all.gguf: %d tensors", w->n);
		WTensor *x = weights_find(w, "w_q4_K");
		CHECK(t, x && x->dtype == DT_F32 && strcmp(x->dtype_str, "q4_K") == 0 && x->rank == 2 &&
		      x->shape[0] == 2 && x->shape[1] == 256 && x->nbytes == 2 * 256 * 4, "w_q4_K: wrong");
		x = weights_find(w, "w_f32");
		CHECK(t, x && x->dtype == DT_F32 && strcmp(x->dtype_str, "f32") == 0 && x->shape[0] == 3 &&
		      x->shape[1] == 5, "w_f32: wrong");
		x = weights_find(w, "w_i64");
		CHECK(t, x && x->dtype == DT_I64 && x->nbytes == 32, "w_i64: wrong");
		x = weights_find(w, "w_i16");
		CHECK(t, x && x->dtype == -1 && strcmp(x->dtype_str, "i16") == 0, "w_i16: wrong");
		weights_close(w);
	}
	/* F16 and BF16 bind f16 / bf16 with the file's bits and f32 widened from them,
	 * read and mapped */
	for (int mapped = 0; mapped < 2; mapped++) {
		if (mapped)
			setenv("NESTRT_MMAP", "1", 1);
		w = weights_open(p, err, sizeof err);
		unsetenv("NESTRT_MMAP");
		if (!CHECK(t, w != NULL, "all.gguf: %s", err))
			continue;
		static const char *const names[2] = {"w_f16", "w_bf16"};
		for (int k = 0; k < 2; k++) {
			DType dt = k ? DT_BF16 : DT_F16;
			WTensor *x = weights_find(w, names[k]);
			const uint16_t *h = x ? weights_data(w, x, dt, err, sizeof err) : NULL;
			const float *f = x ? weights_data(w, x, DT_F32, err, sizeof err) : NULL;
			int ok = h && f && x->half_dtype == (int)dt && x->nbytes > 0;
			for (size_t i = 0; ok && i < x->nbytes / 4; i++) {
				uint32_t u = (uint32_t)h[i] << 16;
				float want;
				memcpy(&want, &u, sizeof want);
				if (dt == DT_F16)
					want = f16_bits_to_f32(h[i]);
				ok = memcmp(&f[i], &want, sizeof want) == 0;
			}
			CHECK(t, ok, "all.gguf (%s): %s binds %s as it is and f32 widened: %s", mapped ? "mapped" : "read",
			      names[k], dtype_name(dt), err);
		}
		weights_close(w);
	}
	free(p);
	/* a reason comes without the path */
	p = xasprintf("%s/bad.gguf", gdir);
	write_bytes(p, "GGUF\x01\0\0\0", 8);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strcmp(err, "GGUF version 1 is not supported (2 and 3 are)") == 0, "bad.gguf: '%s'", err);
	write_bytes(p, "GGUF", 4);
	w = weights_open(p, err, sizeof err);
	CHECK(t, !w && strcmp(err, "the file is truncated (4 bytes needed at offset 4, the file has 4)") == 0,
	      "4-byte GGUF: '%s'", err);
	free(p);
	free(gdir);
}

/* Reasons come without the path (the callers print it), however odd the
 * path: the runtime's messages start with "PATH: ", newlines made spaces. */
/* The bytes a packed copy takes (panel.c): panels of `wide` columns, k rows
 * each (k / 32 rows of blocks in a block format), rounded up to 64 bytes;
 * 0 for shapes it cannot lay out or whose bytes would not fit in size_t,
 * which the callers take as "not packed". */
static void test_pack_bytes(T *t)
{
	int q8 = NESTRT_FMT_Q8_0 << NESTRT_PACK_FMT_SHIFT, q4 = NESTRT_FMT_Q4_0 << NESTRT_PACK_FMT_SHIFT;
	CHECK(t, nestrt__pack_bytes(64, 10, 8, 0) == 2 * 64 * 8 * 4, "f32 [64, 10] in panels of 8: %zu",
	      nestrt__pack_bytes(64, 10, 8, 0));
	CHECK(t, nestrt__pack_bytes(3, 5, 4, NESTRT_PACK_F64) == 192, "f64 [3, 5] in panels of 4 (2 * 3 * 4 * 8 = 192)");
	CHECK(t, nestrt__pack_bytes(3, 1, 1, 0) == 64, "12 bytes round up to 64");
	CHECK(t, nestrt__pack_bytes(64, 10, 8, q8) == 2 * 2 * 8 * 34, "q8_0 [64, 10]: 2 panels of 2 x 8 blocks");
	CHECK(t, nestrt__pack_bytes(96, 3, 4, q4) == 64 * 4, "q4_0 [96, 3]: 1 panel of 3 x 4 blocks of 18 bytes, rounded");
	CHECK(t, !nestrt__pack_bytes(0, 10, 8, 0) && !nestrt__pack_bytes(64, 0, 8, 0) && !nestrt__pack_bytes(64, 10, 0, 0) &&
	             !nestrt__pack_bytes(-64, 10, 8, 0),
	      "an empty or negative shape or width is not laid out");
	CHECK(t, !nestrt__pack_bytes(48, 10, 8, q8) && !nestrt__pack_bytes(0, 10, 8, q8) && !nestrt__pack_bytes(64, 10, 0, q4),
	      "a block format needs k a positive multiple of 32 and a width");
	/* 3 * 2^30: each product below wraps to a power of two that is not 0 (2^62, 2^63, 2^61,
	 * 2^63), so an unchecked size would be seen (2^31 wrapped every one to 0) */
	int64_t big = (int64_t)3 << 30;
	CHECK(t, !nestrt__pack_bytes(big, big, 16, 0) && !nestrt__pack_bytes(big, big, 16, NESTRT_PACK_F64) &&
	             !nestrt__pack_bytes(big * 32, big, 16, q8) && !nestrt__pack_bytes(big * 32, big * 4, 32, q4),
	      "bytes past size_t are 0, not a wrapped size");
	/* just inside the bound: (2^29 / 16) panels of 2^29 rows of 16 f32 = 2^60 bytes */
	CHECK(t, nestrt__pack_bytes((int64_t)1 << 29, (int64_t)1 << 29, 16, 0) == (size_t)1 << 60, "2^60 bytes fit");
	/* near the bound, which leaves room to double: 3 * 2^61 bytes of f32 and 34 * 3 * 2^56
	 * of q8_0 (past SIZE_MAX / 3, within SIZE_MAX / 2) are given */
	CHECK(t, nestrt__pack_bytes(1, (int64_t)3 << 59, 1, 0) == (size_t)3 << 61, "3 * 2^61 bytes of f32 fit: %zu",
	      nestrt__pack_bytes(1, (int64_t)3 << 59, 1, 0));
	CHECK(t, nestrt__pack_bytes(32, (int64_t)3 << 56, 1, q8) == (size_t)34 * 3 << 56, "34 * 3 * 2^56 bytes of q8_0 fit: %zu",
	      nestrt__pack_bytes(32, (int64_t)3 << 56, 1, q8));
}

static void test_reasons(T *t)
{
	char *dir = tpath(t, "odd\ndir: x");
	if (!CHECK(t, mkdir(dir, 0777) == 0, "mkdir %s", dir)) {
		free(dir);
		return;
	}
	char *wp = xasprintf("%s/w.safetensors", dir), *np = xasprintf("%s/a.npy", dir);
	char err[512];
	write_bytes(wp, "abc", 3);
	Weights *w = weights_open(wp, err, sizeof err);
	CHECK(t, !w && strcmp(err, "file is too short (3 bytes) for a safetensors header") == 0,
	      "odd path, weights: '%s'", err);
	weights_close(w);
	write_bytes(np, "\x93NUM", 4);
	NpyArray a;
	int r = npy_read(np, &a, err, sizeof err);
	CHECK(t, r < 0 && strcmp(err, "not a .npy file (bad magic)") == 0, "odd path, npy: '%s'", err);
	if (r == 0)
		npy_free(&a);
	free(wp);
	free(np);
	free(dir);
}

/* ------------------------------------------------------------ main */

static int one_file(int weights, const char *path)
{
	char err[1024];
	if (weights) {
		Weights *w = weights_open(path, err, sizeof err);
		if (!w) {
			fprintf(stderr, "%s: %s\n", path, err);
			return 1;
		}
		/* Touch every byte claimed: an unchecked offset would fault here under ASan. */
		unsigned sum = 0;
		for (int i = 0; i < w->n; i++) {
			const unsigned char *d = w->t[i].data;
			if (w->t[i].half_dtype >= 0 && !(d = weights_data(w, &w->t[i], DT_F32, err, sizeof err))) {
				fprintf(stderr, "%s: %s\n", path, err);
				weights_close(w);
				return 1;
			}
			for (size_t k = 0; k < w->t[i].nbytes; k++)
				sum += d[k];
		}
		printf("OK %d tensors (checksum %u)\n", w->n, sum);
		weights_close(w);
		return 0;
	}
	NpyArray a;
	if (npy_read(path, &a, err, sizeof err) < 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 1;
	}
	printf("OK %s rank %d, %zu bytes\n", dtype_name(a.dtype), a.rank, a.nbytes);
	npy_free(&a);
	return 0;
}

static void rm_rf(const char *dir)
{
	char *cmd = xasprintf("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
	free(cmd);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--open-weights") == 0)
		return one_file(1, argv[2]);
	if (argc == 3 && strcmp(argv[1], "--read-npy") == 0)
		return one_file(0, argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: test_io [--open-weights FILE | --read-npy FILE]\n");
		return 2;
	}
	T t = {0};
	t.python = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(t.dir, sizeof t.dir, "%s/test_io.XXXXXX", tmp);
	if (!mkdtemp(t.dir)) {
		perror("mkdtemp");
		return 2;
	}
	test_npy_roundtrip(&t);
	test_npy_parser(&t);
	test_npy_numpy(&t);
	test_npy_numpy_reads_ours(&t);
	test_safetensors(&t);
	test_gguf(&t);
	test_reasons(&t);
	test_pack_bytes(&t);
	rm_rf(t.dir);
	printf("%d passed, %d failed\n", t.pass, t.fail);
	return t.fail ? 1 : 0;
}

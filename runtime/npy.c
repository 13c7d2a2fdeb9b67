/* npy.c - read and write NumPy .npy files (format versions 1.0, 2.0 and 3.0 read; 1.0 written).
 *
 * Layout: "\x93NUMPY", major and minor version bytes, the header length
 * (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), the header (a Python
 * dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and a newline), then the raw C-order data.
 * The one .npy reader and writer: nestc's `run` reads its inputs and writes
 * its outputs through these too (src/npy.c adapts them). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The header of any array we can hold is a few hundred bytes; this bounds the
 * allocation a hostile header length can cause. */
#define MAX_HEADER_LEN (1u << 20)

static const char npy_magic[6] = "\x93NUMPY";

static void type_text(char *buf, size_t len, int dt, int rank, const int64_t *shape)
{
	nestrt__type_text(buf, len, nestrt_dtype_name(dt), rank, shape);
}

/* ------------------------------------------------------------ header dict */

typedef struct Hdr {
	const char *p, *end;
	char descr[64];
	int have_descr, have_fortran, have_shape;
	int descr_is_list; /* a structured dtype: [('a', '<f4'), ...] */
	int fortran;
	int rank;
	int64_t shape[NESTRT_MAX_RANK];
	const char *path;
	nestrt_error *err;
} Hdr;

static void skip_ws(Hdr *h)
{
	while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
		h->p++;
}

static int accept(Hdr *h, char c)
{
	skip_ws(h);
	if (h->p < h->end && *h->p == c) {
		h->p++;
		return 1;
	}
	return 0;
}

static int bad(Hdr *h, const char *what)
{
	return nestrt__seterr(h->err, "%s: malformed header: %s", h->path, what);
}

/* A Python string literal in ' or " without escapes (numpy never writes any);
 * copied into out, truncated to outlen - 1. */
static int parse_str(Hdr *h, char *out, size_t outlen)
{
	skip_ws(h);
	if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
		return bad(h, "expected a string");
	char q = *h->p++;
	size_t n = 0;
	while (h->p < h->end && *h->p != q) {
		if (*h->p == '\\' || *h->p == '\n')
			return bad(h, "unsupported character in a string");
		/* Only printable ASCII reaches messages; no valid descr has anything else. */
		unsigned char c = (unsigned char)*h->p;
		if (n + 1 < outlen)
			out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
		h->p++;
	}
	if (h->p >= h->end)
		return bad(h, "unterminated string");
	h->p++;
	out[n] = 0;
	return 0;
}

static int parse_bool(Hdr *h, int *v)
{
	skip_ws(h);
	size_t left = (size_t)(h->end - h->p);
	if (left >= 4 && memcmp(h->p, "True", 4) == 0) {
		h->p += 4;
		*v = 1;
		return 0;
	}
	if (left >= 5 && memcmp(h->p, "False", 5) == 0) {
		h->p += 5;
		*v = 0;
		return 0;
	}
	return bad(h, "'fortran_order' is not True or False");
}

/* (), (3,), (3, 4), (3, 4,); Python 2 files may spell ints 3L. */
static int parse_shape(Hdr *h)
{
	if (!accept(h, '('))
		return bad(h, "'shape' is not a tuple");
	h->rank = 0;
	int nitems = 0, comma = 0;
	for (;;) {
		if (accept(h, ')'))
			break;
		if (nitems > 0 && !comma)
			return bad(h, "expected ',' or ')' in 'shape'");
		skip_ws(h);
		if (h->p < h->end && *h->p == '-')
			return nestrt__seterr(h->err, "%s: negative dimension in shape", h->path);
		if (h->p >= h->end || *h->p < '0' || *h->p > '9')
			return bad(h, "'shape' is not a tuple of integers");
		int64_t v = 0;
		while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
			if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *h->p - '0', &v))
				return nestrt__seterr(h->err, "%s: dimension in shape is too large", h->path);
			h->p++;
		}
		if (h->p < h->end && *h->p == 'L')
			h->p++;
		if (nitems == NESTRT_MAX_RANK)
			return nestrt__seterr(h->err, "%s: rank exceeds the maximum of %d", h->path, NESTRT_MAX_RANK);
		h->shape[nitems++] = v;
		comma = accept(h, ',');
	}
	/* Python needs the comma in a 1-tuple: (3) is the integer 3. */
	if (nitems == 1 && !comma)
		return bad(h, "'shape' is not a tuple");
	h->rank = nitems;
	return 0;
}

/* Skip a structured dtype's list literal, balancing brackets, so the caller can
 * give the real reason ("structured arrays are not supported"). */
static int skip_list(Hdr *h)
{
	int depth = 0;
	skip_ws(h);
	while (h->p < h->end) {
		char c = *h->p++;
		if (c == '[' || c == '(')
			depth++;
		else if (c == ']' || c == ')') {
			if (--depth == 0)
				return 0;
		} else if (c == '\'' || c == '"') {
			while (h->p < h->end && *h->p != c)
				h->p++;
			if (h->p < h->end)
				h->p++;
		}
	}
	return bad(h, "unterminated list");
}

static int parse_dict(Hdr *h)
{
	if (!accept(h, '{'))
		return bad(h, "not a dict literal");
	int comma = 1;
	for (;;) {
		if (accept(h, '}'))
			break;
		if (!comma)
			return bad(h, "expected ',' or '}'");
		char key[32];
		if (parse_str(h, key, sizeof key) < 0)
			return -1;
		if (!accept(h, ':'))
			return bad(h, "expected ':'");
		int *seen;
		int r;
		if (strcmp(key, "descr") == 0) {
			seen = &h->have_descr;
			skip_ws(h);
			if (h->p < h->end && *h->p == '[') {
				h->descr_is_list = 1;
				r = skip_list(h);
			} else {
				r = parse_str(h, h->descr, sizeof h->descr);
			}
		} else if (strcmp(key, "fortran_order") == 0) {
			seen = &h->have_fortran;
			r = parse_bool(h, &h->fortran);
		} else if (strcmp(key, "shape") == 0) {
			seen = &h->have_shape;
			r = parse_shape(h);
		} else {
			return nestrt__seterr(h->err, "%s: malformed header: unexpected key '%s'", h->path, key);
		}
		if (r < 0)
			return -1;
		if (*seen)
			return nestrt__seterr(h->err, "%s: malformed header: duplicate key '%s'", h->path, key);
		*seen = 1;
		comma = accept(h, ',');
	}
	skip_ws(h);
	if (h->p != h->end)
		return bad(h, "unexpected text after the dict");
	if (!h->have_descr || !h->have_fortran || !h->have_shape)
		return nestrt__seterr(h->err, "%s: malformed header: missing key '%s'", h->path,
		                      !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order" : "shape");
	return 0;
}

/* ------------------------------------------------------------ descr */

static const struct {
	const char *descr;
	int dt;
} npy_descrs[] = {
	{"<f4", NESTRT_F32}, {"<f8", NESTRT_F64}, {"<i4", NESTRT_I32}, {"<i8", NESTRT_I64}, {"|b1", NESTRT_BOOL},
	{"<f2", NESTRT_F16}, {"|i1", NESTRT_I8}, {"|u1", NESTRT_U8}, {"<i2", NESTRT_I16}, {"<u2", NESTRT_U16},
	/* bfloat16 has no NumPy dtype: its bits, as ml_dtypes' .view(np.uint16) (after the
	 * '<u2' row, so that a '<u2' file reads as u16) */
	{"<u2", NESTRT_BF16},
};

static const char *descr_of(int dt)
{
	for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++)
		if (npy_descrs[i].dt == dt)
			return npy_descrs[i].descr;
	return NULL;
}

static int dtype_of(Hdr *h, int *dt)
{
	const char *descr = h->descr;
	for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++)
		if (strcmp(npy_descrs[i].descr, descr) == 0) {
			*dt = npy_descrs[i].dt;
			return 0;
		}
	/* Byte order does not apply to one-byte items: numpy itself writes '|b1'. */
	if (strcmp(descr, "<b1") == 0 || strcmp(descr, ">b1") == 0 || strcmp(descr, "=b1") == 0) {
		*dt = NESTRT_BOOL;
		return 0;
	}
	if (descr[0] && strchr("<>=", descr[0]) && (!strcmp(descr + 1, "i1") || !strcmp(descr + 1, "u1"))) {
		*dt = descr[1] == 'i' ? NESTRT_I8 : NESTRT_U8;
		return 0;
	}
	if (descr[0] == '>' && descr[1] && strcmp(descr + 2, "1") != 0)
		return nestrt__seterr(h->err, "%s: big-endian arrays are not supported (descr '%s')", h->path, descr);
	if (strchr("|<>=", descr[0]) && descr[0] && descr[1] == 'O')
		return nestrt__seterr(h->err, "%s: object arrays are not supported (descr '%s')", h->path, descr);
	return nestrt__seterr(h->err,
	                      "%s: unsupported dtype (descr '%s'; supported: '<f4' '<f8' '<f2' '<i4' '<i8' '<i2' '<u2' '|i1' '|u1' "
	                      "'|b1')",
	                      h->path, descr);
}

/* ------------------------------------------------------------ read */

static uint32_t le_u32(const unsigned char *p, int n)
{
	uint32_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Read exactly n bytes; returns how many were read before end of file. */
static size_t read_full(FILE *f, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		size_t r = fread((char *)p + got, 1, n - got, f);
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

static int read_npy(FILE *f, const char *path, int *dtype, int *rank, int64_t *shape, void **out,
                    nestrt_error *err)
{
	struct stat st;
	int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
	uint64_t fsize = regular ? (uint64_t)st.st_size : 0;

	unsigned char pre[12] = {0};
	size_t got = read_full(f, pre, 8);
	if (ferror(f))
		goto ioerr;
	if (got == 0)
		return nestrt__seterr(err, "%s: file is empty", path);
	if (got < 6 || memcmp(pre, npy_magic, 6) != 0)
		return nestrt__seterr(err, "%s: not a .npy file (bad magic)", path);
	if (got < 8)
		return nestrt__seterr(err, "%s: file is truncated in the format version", path);
	int major = pre[6], minor = pre[7];
	if ((major != 1 && major != 2 && major != 3) || minor != 0)
		return nestrt__seterr(err, "%s: unsupported .npy format version %d.%d", path, major, minor);
	int lenbytes = major == 1 ? 2 : 4;
	if (read_full(f, pre + 8, (size_t)lenbytes) != (size_t)lenbytes) {
		if (ferror(f))
			goto ioerr;
		return nestrt__seterr(err, "%s: file is truncated in the header length", path);
	}
	uint32_t hlen = le_u32(pre + 8, lenbytes);
	uint64_t prefix = 8 + (uint64_t)lenbytes;
	if (regular && (fsize < prefix || hlen > fsize - prefix))
		return nestrt__seterr(err, "%s: header length %u exceeds file size %llu", path, hlen,
		                      (unsigned long long)fsize);
	if (hlen > MAX_HEADER_LEN)
		return nestrt__seterr(err, "%s: header length %u is larger than the limit of %u bytes", path, hlen,
		                      MAX_HEADER_LEN);
	char *hdr = malloc(hlen ? hlen : 1);
	if (!hdr)
		return nestrt__seterr(err, "%s: out of memory", path);
	if (read_full(f, hdr, hlen) != hlen) {
		free(hdr);
		if (ferror(f))
			goto ioerr;
		return nestrt__seterr(err, "%s: file is truncated in the header", path);
	}
	Hdr h = {.p = hdr, .end = hdr + hlen, .path = path, .err = err};
	int r = parse_dict(&h);
	free(hdr);
	if (r < 0)
		return -1;

	if (h.descr_is_list)
		return nestrt__seterr(err, "%s: structured arrays are not supported", path);
	int dt = -1;
	if (dtype_of(&h, &dt) < 0)
		return -1;
	if (h.fortran)
		return nestrt__seterr(err, "%s: fortran_order arrays are not supported", path);
	char ty[256];
	type_text(ty, sizeof ty, dt, h.rank, h.shape);
	/* An overflow anywhere is an error even if a later dimension is 0: the
	 * strides of such a shape do not fit in 64 bits (as in .safetensors). */
	int64_t numel = 1;
	uint64_t nbytes;
	int overflow = 0, empty = 0;
	for (int i = 0; i < h.rank; i++) {
		empty |= h.shape[i] == 0;
		if (__builtin_mul_overflow(numel, h.shape[i], &numel))
			overflow = 1;
	}
	if (overflow && empty)
		return nestrt__seterr(err, "%s: shape %s has no elements, but its strides do not fit in 64 bits", path, ty);
	if (overflow || __builtin_mul_overflow((uint64_t)numel, (uint64_t)nestrt_dtype_size(dt), &nbytes) ||
	    nbytes > SIZE_MAX / 2)
		return nestrt__seterr(err, "%s: shape %s is too large", path, ty);

	uint64_t data_off = prefix + hlen;
	/* fsize >= data_off: the header length was checked against it above. */
	if (regular && fsize - data_off != nbytes)
		return nestrt__seterr(err, "%s: %s data: %s needs %llu bytes, file has %llu", path,
		                      fsize - data_off < nbytes ? "truncated" : "trailing bytes after the", ty,
		                      (unsigned long long)nbytes, (unsigned long long)(fsize - data_off));

	/* A pipe has no size to check first: grow towards nbytes as data arrives,
	 * so a lying header costs no more memory than the bytes really sent. */
	size_t cap = regular ? (size_t)nbytes : (nbytes < 65536 ? (size_t)nbytes : 65536);
	char *data = malloc(cap ? cap : 1);
	if (!data)
		return nestrt__seterr(err, "%s: out of memory for %s (%llu bytes)", path, ty,
		                      (unsigned long long)nbytes);
	size_t len = 0;
	for (;;) {
		len += read_full(f, data + len, cap - len);
		if (len < cap || cap == nbytes)
			break;
		cap = nbytes - cap > cap ? cap * 2 : (size_t)nbytes;
		char *nd = realloc(data, cap);
		if (!nd) {
			free(data);
			return nestrt__seterr(err, "%s: out of memory for %s (%llu bytes)", path, ty,
			                      (unsigned long long)nbytes);
		}
		data = nd;
	}
	if (ferror(f)) {
		free(data);
		goto ioerr;
	}
	if (len != nbytes || fgetc(f) != EOF) {
		free(data);
		if (len != nbytes)
			return nestrt__seterr(err, "%s: truncated data: %s needs %llu bytes, file has %zu", path, ty,
			                      (unsigned long long)nbytes, len);
		return nestrt__seterr(err, "%s: trailing bytes after the data: %s needs %llu bytes", path, ty,
		                      (unsigned long long)nbytes);
	}
	*dtype = dt;
	*rank = h.rank;
	for (int i = 0; i < NESTRT_MAX_RANK; i++)
		shape[i] = i < h.rank ? h.shape[i] : 0;
	*out = data;
	return 0;

ioerr:
	return nestrt__seterr(err, "%s: read error: %s", path, strerror(errno));
}

int nestrt_npy_read(const char *path, int *dtype, int *rank, int64_t *shape, void **data, nestrt_error *err)
{
	if (!path || !dtype || !rank || !shape || !data)
		return nestrt__seterr(err, "nestrt_npy_read: invalid arguments");
	*data = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return nestrt__seterr(err, "%s: cannot open: %s", path, strerror(errno));
	int r = read_npy(f, path, dtype, rank, shape, data, err);
	fclose(f);
	return r;
}

/* ------------------------------------------------------------ write */

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int nestrt__npy_header(char h[NESTRT__NPY_HEADER_MAX], int dtype, int rank, const int64_t *shape)
{
	const char *descr = descr_of(dtype);
	if (!descr || rank < 0 || rank > NESTRT_MAX_RANK || (rank > 0 && !shape))
		return -1;
	/* The header numpy.save writes (format.py, numpy >= 1.24): keys sorted, each
	 * followed by ", ", the shape tuple as Python's repr, then spaces so that the
	 * first axis could grow to 21 digits in place, then padding to a multiple
	 * of 64 bytes including the magic and length, then a newline. Matching it
	 * byte for byte makes our files indistinguishable from numpy's. With rank
	 * at most 8 the header is always well under 64 KiB: version 1.0. */
	int k = snprintf(h, NESTRT__NPY_HEADER_MAX,
	                 "\x93NUMPY\x01%c..{'descr': '%s', 'fortran_order': False, 'shape': (", 0, descr);
	for (int i = 0; i < rank; i++)
		k += snprintf(h + k, NESTRT__NPY_HEADER_MAX - (size_t)k, "%s%lld", i ? ", " : "",
		              (long long)shape[i]);
	k += snprintf(h + k, NESTRT__NPY_HEADER_MAX - (size_t)k, "%s", rank == 1 ? ",), }" : "), }");
	if (rank > 0)
		for (int i = snprintf(NULL, 0, "%lld", (long long)shape[0]); i < 21; i++)
			h[k++] = ' ';
	/* 10 bytes of preamble, the dict, spaces, the newline: a multiple of 64,
	 * with numpy's 1 to 64 spaces (64 when no padding is needed). */
	size_t total = (size_t)k + 1 + (64 - ((size_t)k + 1) % 64);
	memset(h + k, ' ', total - (size_t)k);
	h[total - 1] = '\n';
	h[8] = (char)((total - 10) & 0xff);
	h[9] = (char)((total - 10) >> 8);
	return (int)total;
}

int nestrt_npy_write(const char *path, int dtype, int rank, const int64_t *shape, const void *data,
                     nestrt_error *err)
{
	const char *descr = descr_of(dtype);
	if (!path)
		return nestrt__seterr(err, "nestrt_npy_write: no path");
	if (!descr)
		return nestrt__seterr(err, "%s: cannot write dtype %d", path, dtype);
	if (rank < 0 || rank > NESTRT_MAX_RANK || (rank > 0 && !shape))
		return nestrt__seterr(err, "%s: cannot write rank %d", path, rank);
	uint64_t nbytes = nestrt_dtype_size(dtype);
	for (int i = 0; i < rank; i++)
		if (shape[i] < 0 || __builtin_mul_overflow(nbytes, (uint64_t)shape[i], &nbytes) ||
		    nbytes > SIZE_MAX / 2) {
			char ty[256];
			type_text(ty, sizeof ty, dtype, rank, shape);
			return nestrt__seterr(err, "%s: cannot write %s: invalid shape", path, ty);
		}
	if (nbytes && !data)
		return nestrt__seterr(err, "%s: no data", path);

	char h[NESTRT__NPY_HEADER_MAX];
	size_t total = (size_t)nestrt__npy_header(h, dtype, rank, shape);

	/* A device or FIFO (/dev/stdout) cannot be replaced by a rename: write it directly. */
	struct stat st;
	int direct = stat(path, &st) == 0 && !S_ISREG(st.st_mode);
	static unsigned counter;
	char *tmp = NULL;
	int fd = -1;
	if (direct) {
		fd = open(path, O_WRONLY | O_CLOEXEC);
	} else {
		size_t tlen = strlen(path) + 64;
		tmp = malloc(tlen);
		if (!tmp)
			return nestrt__seterr(err, "%s: out of memory", path);
		for (int tries = 0; tries < 100; tries++) {
			unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
			snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(), n);
			/* 0666 & ~umask, like any new file (and like numpy's). */
			fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
			if (fd >= 0 || errno != EEXIST)
				break;
		}
	}
	if (fd < 0) {
		int e = errno;
		free(tmp);
		return nestrt__seterr(err, "%s: cannot create: %s", path, strerror(e));
	}
	if (write_all(fd, h, total) < 0 || write_all(fd, data, (size_t)nbytes) < 0) {
		int e = errno;
		close(fd);
		if (tmp)
			unlink(tmp);
		free(tmp);
		return nestrt__seterr(err, "%s: cannot write: %s", path, strerror(e));
	}
	if (close(fd) < 0) {
		int e = errno;
		if (tmp)
			unlink(tmp);
		free(tmp);
		return nestrt__seterr(err, "%s: cannot write: %s", path, strerror(e));
	}
	if (tmp && rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		free(tmp);
		return nestrt__seterr(err, "%s: cannot rename %s.tmp.* into place: %s", path, path, strerror(e));
	}
	free(tmp);
	return 0;
}

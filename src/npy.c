/* npy.c - read and write NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Layout: "\x93NUMPY", major and minor version bytes, the header length
 * (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), the header (a Python
 * dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and a newline), then the raw C-order data. */
#include "nestc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The header of any array nestc can hold is a few hundred bytes; this bounds
 * the allocation a hostile header length can cause. */
#define MAX_HEADER_LEN (1u << 20)

static const char npy_magic[6] = "\x93NUMPY";

/* "f32[3, 4]" for messages (local so that npy.c needs nothing from ir.c). */
static void type_text(char *buf, size_t len, DType dt, int rank, const int64_t *shape)
{
	size_t k = (size_t)snprintf(buf, len, "%s[", dtype_name(dt));
	for (int i = 0; i < rank && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (k < len)
		snprintf(buf + k, len - k, "]");
}

/* ------------------------------------------------------------ header dict */

typedef struct Hdr {
	const char *p, *end;
	char descr[64];
	int have_descr, have_fortran, have_shape;
	int descr_is_list; /* a structured dtype: [('a', '<f4'), ...] */
	int fortran;
	int rank;
	int64_t shape[MAX_RANK];
	char *err;
	size_t errlen;
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
	snprintf(h->err, h->errlen, "malformed header: %s", what);
	return -1;
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
		if (h->p < h->end && *h->p == '-') {
			snprintf(h->err, h->errlen, "negative dimension in shape");
			return -1;
		}
		if (h->p >= h->end || *h->p < '0' || *h->p > '9')
			return bad(h, "'shape' is not a tuple of integers");
		int64_t v = 0;
		while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
			if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *h->p - '0', &v)) {
				snprintf(h->err, h->errlen, "dimension in shape is too large");
				return -1;
			}
			h->p++;
		}
		if (h->p < h->end && *h->p == 'L')
			h->p++;
		if (nitems == MAX_RANK) {
			snprintf(h->err, h->errlen, "rank exceeds the maximum of %d", MAX_RANK);
			return -1;
		}
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
			snprintf(h->err, h->errlen, "malformed header: unexpected key '%s'", key);
			return -1;
		}
		if (r < 0)
			return -1;
		if (*seen) {
			snprintf(h->err, h->errlen, "malformed header: duplicate key '%s'", key);
			return -1;
		}
		*seen = 1;
		comma = accept(h, ',');
	}
	skip_ws(h);
	if (h->p != h->end)
		return bad(h, "unexpected text after the dict");
	if (!h->have_descr || !h->have_fortran || !h->have_shape) {
		snprintf(h->err, h->errlen, "malformed header: missing key '%s'",
		         !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order" : "shape");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ descr */

static const struct {
	const char *descr;
	DType dt;
} npy_descrs[] = {
	{"<f4", DT_F32}, {"<f8", DT_F64}, {"<i4", DT_I32}, {"<i8", DT_I64}, {"|b1", DT_BOOL},
};

static const char *descr_of(DType dt)
{
	for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++)
		if (npy_descrs[i].dt == dt)
			return npy_descrs[i].descr;
	ice("npy: no descr for dtype %d", (int)dt);
}

static int dtype_of(const char *descr, DType *dt, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++)
		if (strcmp(npy_descrs[i].descr, descr) == 0) {
			*dt = npy_descrs[i].dt;
			return 0;
		}
	/* Byte order does not apply to one-byte items: numpy itself writes '|b1'. */
	if (strcmp(descr, "<b1") == 0 || strcmp(descr, ">b1") == 0 || strcmp(descr, "=b1") == 0) {
		*dt = DT_BOOL;
		return 0;
	}
	if (descr[0] == '>' && descr[1] && strcmp(descr + 2, "1") != 0)
		snprintf(err, errlen, "big-endian arrays are not supported (descr '%s')", descr);
	else if (strchr("|<>=", descr[0]) && descr[1] == 'O')
		snprintf(err, errlen, "object arrays are not supported (descr '%s')", descr);
	else
		snprintf(err, errlen,
		         "unsupported dtype (descr '%s'; supported: '<f4' '<f8' '<i4' '<i8' '|b1')", descr);
	return -1;
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

static int read_npy(FILE *f, NpyArray *out, char *err, size_t errlen)
{
	struct stat st;
	int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
	uint64_t fsize = regular ? (uint64_t)st.st_size : 0;

	unsigned char pre[12] = {0};
	size_t got = read_full(f, pre, 8);
	if (ferror(f))
		goto ioerr;
	if (got == 0) {
		snprintf(err, errlen, "file is empty");
		return -1;
	}
	if (got < 6 || memcmp(pre, npy_magic, 6) != 0) {
		snprintf(err, errlen, "not a .npy file (bad magic)");
		return -1;
	}
	if (got < 8) {
		snprintf(err, errlen, "file is truncated in the format version");
		return -1;
	}
	int major = pre[6], minor = pre[7];
	if ((major != 1 && major != 2 && major != 3) || minor != 0) {
		snprintf(err, errlen, "unsupported .npy format version %d.%d", major, minor);
		return -1;
	}
	int lenbytes = major == 1 ? 2 : 4;
	if (read_full(f, pre + 8, (size_t)lenbytes) != (size_t)lenbytes) {
		if (ferror(f))
			goto ioerr;
		snprintf(err, errlen, "file is truncated in the header length");
		return -1;
	}
	uint32_t hlen = le_u32(pre + 8, lenbytes);
	uint64_t prefix = 8 + (uint64_t)lenbytes;
	if (regular && (fsize < prefix || hlen > fsize - prefix)) {
		snprintf(err, errlen, "header length %u exceeds file size %llu", hlen,
		         (unsigned long long)fsize);
		return -1;
	}
	if (hlen > MAX_HEADER_LEN) {
		snprintf(err, errlen, "header length %u is larger than the limit of %u bytes", hlen,
		         MAX_HEADER_LEN);
		return -1;
	}
	char *hdr = xmalloc(hlen ? hlen : 1);
	if (read_full(f, hdr, hlen) != hlen) {
		free(hdr);
		if (ferror(f))
			goto ioerr;
		snprintf(err, errlen, "file is truncated in the header");
		return -1;
	}
	Hdr h = {.p = hdr, .end = hdr + hlen, .err = err, .errlen = errlen};
	int r = parse_dict(&h);
	free(hdr);
	if (r < 0)
		return -1;

	if (h.descr_is_list) {
		snprintf(err, errlen, "structured arrays are not supported");
		return -1;
	}
	DType dt;
	if (dtype_of(h.descr, &dt, err, errlen) < 0)
		return -1;
	if (h.fortran) {
		snprintf(err, errlen, "fortran_order arrays are not supported");
		return -1;
	}
	int64_t numel = 1;
	uint64_t nbytes;
	for (int i = 0; i < h.rank; i++)
		if (__builtin_mul_overflow(numel, h.shape[i], &numel))
			goto toolarge;
	if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)dtype_size(dt), &nbytes) ||
	    nbytes > SIZE_MAX)
		goto toolarge;

	uint64_t data_off = prefix + hlen;
	/* fsize >= data_off: the header length was checked against it above. */
	if (regular && fsize - data_off != nbytes) {
		char ty[256];
		type_text(ty, sizeof ty, dt, h.rank, h.shape);
		snprintf(err, errlen, "%s data: %s needs %llu bytes, file has %llu",
		         fsize - data_off < nbytes ? "truncated" : "trailing bytes after the", ty,
		         (unsigned long long)nbytes, (unsigned long long)(fsize - data_off));
		return -1;
	}

	/* A pipe has no size to check first: grow towards nbytes as data arrives,
	 * so a lying header costs no more memory than the bytes really sent. */
	size_t cap = regular ? (size_t)nbytes : (nbytes < 65536 ? (size_t)nbytes : 65536);
	char *data = xmalloc(cap);
	size_t len = 0;
	for (;;) {
		len += read_full(f, data + len, cap - len);
		if (len < cap || cap == nbytes)
			break;
		cap = nbytes - cap > cap ? cap * 2 : (size_t)nbytes;
		data = xrealloc(data, cap);
	}
	if (ferror(f)) {
		free(data);
		goto ioerr;
	}
	if (len != nbytes || fgetc(f) != EOF) {
		free(data);
		char ty[256];
		type_text(ty, sizeof ty, dt, h.rank, h.shape);
		if (len != nbytes)
			snprintf(err, errlen, "truncated data: %s needs %llu bytes, file has %zu", ty,
			         (unsigned long long)nbytes, len);
		else
			snprintf(err, errlen, "trailing bytes after the data: %s needs %llu bytes", ty,
			         (unsigned long long)nbytes);
		return -1;
	}
	out->dtype = dt;
	out->rank = h.rank;
	memset(out->shape, 0, sizeof out->shape);
	memcpy(out->shape, h.shape, sizeof(int64_t) * (size_t)h.rank);
	out->data = data;
	out->nbytes = (size_t)nbytes;
	return 0;

toolarge:;
	char ty[256];
	type_text(ty, sizeof ty, dt, h.rank, h.shape);
	snprintf(err, errlen, "shape %s is too large", ty);
	return -1;
ioerr:
	snprintf(err, errlen, "read error: %s", strerror(errno));
	return -1;
}

int npy_read(const char *path, NpyArray *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return -1;
	}
	int r = read_npy(f, out, err, errlen);
	fclose(f);
	return r;
}

void npy_free(NpyArray *a)
{
	free(a->data);
	a->data = NULL;
	a->nbytes = 0;
}

/* ------------------------------------------------------------ write */

void npy_encode(DType dt, int rank, const int64_t *shape, const void *data, char **out, size_t *outlen)
{
	/* The header numpy.save writes (format.py, numpy >= 1.24): keys sorted, each
	 * followed by ", ", the shape tuple as Python's repr, then spaces so that the
	 * first axis could grow to 21 digits in place, then padding to a multiple
	 * of 64 bytes including the magic and length, then a newline. Matching it
	 * byte for byte makes our files indistinguishable from numpy's. */
	Buf h = {0};
	buf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr_of(dt));
	for (int i = 0; i < rank; i++)
		buf_printf(&h, "%s%lld", i ? ", " : "", (long long)shape[i]);
	buf_puts(&h, rank == 1 ? ",), }" : "), }");
	if (rank > 0) {
		int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
		for (int i = digits; i < 21; i++)
			buf_putc(&h, ' ');
	}
	size_t hlen = h.len + 1; /* the newline */
	int lenbytes = 2;
	size_t pad = 64 - (6 + 2 + 2 + hlen) % 64;
	if (hlen + pad > 65535) {
		lenbytes = 4;
		pad = 64 - (6 + 2 + 4 + hlen) % 64;
	}
	size_t total_hdr = hlen + pad;
	size_t nbytes = (size_t)dtype_size(dt);
	for (int i = 0; i < rank; i++)
		nbytes *= (size_t)shape[i];
	size_t n = 8 + (size_t)lenbytes + total_hdr + nbytes;
	char *p = xmalloc(n);
	memcpy(p, npy_magic, 6);
	p[6] = lenbytes == 2 ? 1 : 2;
	p[7] = 0;
	for (int i = 0; i < lenbytes; i++)
		p[8 + i] = (char)(total_hdr >> (8 * i) & 0xff);
	char *q = p + 8 + lenbytes;
	memcpy(q, h.s, h.len);
	memset(q + h.len, ' ', pad);
	q[h.len + pad] = '\n';
	if (nbytes)
		memcpy(q + total_hdr, data, nbytes);
	buf_free(&h);
	*out = p;
	*outlen = n;
}

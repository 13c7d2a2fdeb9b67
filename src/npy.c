/* npy.c - NumPy .npy files for `nestc run`, over the runtime's reader and
 * header writer (runtime/npy.c): one parser of the format, so inputs nestc
 * accepts are the ones compiled programs accept, and one writer of numpy's
 * exact header. This file only fits them to NpyArray, DType and the
 * in-memory encoding `nestc run` writes atomically, and turns the runtime's
 * messages into reasons without the path (rt_reason, weights.c). */
#include "nestc.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Bytes of an array (the reader checked it fits); local so that npy.c needs
 * nothing from ir.c. */
static size_t nbytes_of(DType dt, int rank, const int64_t *shape)
{
	size_t n = (size_t)dtype_size(dt);
	for (int i = 0; i < rank; i++)
		n *= (size_t)shape[i];
	return n;
}

int npy_read(const char *path, NpyArray *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	nestrt_error e;
	int dtype, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *data;
	if (nestrt_npy_read(path, &dtype, &rank, shape, &data, &e) < 0) {
		rt_reason(err, errlen, path, &e);
		return -1;
	}
	out->dtype = (DType)dtype;
	out->rank = rank;
	memcpy(out->shape, shape, sizeof out->shape);
	out->data = data;
	out->nbytes = nbytes_of(out->dtype, rank, shape);
	return 0;
}

void npy_free(NpyArray *a)
{
	free(a->data);
	a->data = NULL;
	a->nbytes = 0;
}

void npy_encode(DType dt, int rank, const int64_t *shape, const void *data, char **out, size_t *outlen)
{
	char h[NESTRT__NPY_HEADER_MAX];
	int hl = nestrt__npy_header(h, (int)dt, rank, shape);
	if (hl < 0)
		ice("npy: no header for dtype %d rank %d", (int)dt, rank);
	size_t nbytes = nbytes_of(dt, rank, shape);
	char *p = xmalloc((size_t)hl + nbytes);
	memcpy(p, h, (size_t)hl);
	if (nbytes)
		memcpy(p + hl, data, nbytes);
	*out = p;
	*outlen = (size_t)hl + nbytes;
}

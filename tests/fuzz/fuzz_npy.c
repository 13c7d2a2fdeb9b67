/* fuzz_npy.c - libFuzzer target: the input is a .npy file.
 *
 * The runtime's reader (runtime/npy.c) takes a path, so the input goes
 * 1. into a memfd, read through /proc/self/fd as a regular file (its size is
 *    checked against the header first) by nestc's adapter (src/npy.c,
 *    npy_read, over nestrt_npy_read), and
 * 2. into a pipe, read by nestrt_npy_read as an unsized file (as /dev/stdin is:
 *    the data is read as it comes, growing the buffer).
 * Both must agree: accept the same inputs with the same dtype, shape and
 * bytes. An accepted array's size must match its dtype and shape; written
 * again with nestc's encoder (numpy.save's header, npy_encode) it must read
 * back the same. A rejection from the runtime must be one line starting
 * with the path. A broken promise is a finding (abort). */
#define _GNU_SOURCE
#include "nestc.h"
#include "nestrt.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_NAME "fuzz_npy"
#include "fuzz_common.h"

static void check_array(const NpyArray *a)
{
	if (a->dtype < 0 || a->dtype >= DT_COUNT || a->rank < 0 || a->rank > MAX_RANK || !a->data)
		broken("accepted array has a bad dtype, rank or data", NULL);
	/* the reader's rule: the element count, multiplied in order, never
	 * overflows (even when a later dimension is 0); bytes follow from it */
	int64_t numel = 1;
	int overflow = 0;
	for (int i = 0; i < a->rank; i++)
		if (a->shape[i] < 0 || __builtin_mul_overflow(numel, a->shape[i], &numel))
			overflow = 1;
	uint64_t n = 0;
	if (overflow || __builtin_mul_overflow((uint64_t)numel, (uint64_t)dtype_size(a->dtype), &n))
		broken("accepted shape is negative or overflows", NULL);
	for (int i = a->rank; i < MAX_RANK; i++)
		if (a->shape[i] != 0)
			broken("shape entries past the rank are not 0", NULL);
	if (n != a->nbytes)
		broken("byte count does not match dtype and shape", NULL);
	for (size_t k = 0; k < a->nbytes; k++)
		touched += ((const unsigned char *)a->data)[k];
}

/* Through a pipe: NULL data when the pipe cannot hold the input (only when
 * run with a -max_len over the pipe's size), else 0 or -1 like the reader. */
static int read_pipe(const uint8_t *data, size_t size, NpyArray *out, nestrt_error *e, int *skipped)
{
	int p[2];
	*skipped = 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		abort();
	int cap = fcntl(p[1], F_SETPIPE_SZ, size > 65536 ? (int)size : 65536);
	if (cap < 0 || (size_t)cap < size) {
		close(p[0]);
		close(p[1]);
		*skipped = 1;
		return 0;
	}
	if (size && write(p[1], data, size) != (ssize_t)size)
		abort();
	close(p[1]);
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
	int dtype, rank;
	memset(out, 0, sizeof *out);
	int r = nestrt_npy_read(path, &dtype, &rank, out->shape, &out->data, e);
	close(p[0]);
	if (r == 0) {
		out->dtype = (DType)dtype;
		out->rank = rank;
		out->nbytes = (size_t)dtype_size(out->dtype);
		for (int i = 0; i < rank; i++)
			out->nbytes *= (size_t)out->shape[i];
	} else {
		if (!memchr(e->message, 0, sizeof e->message) || strncmp(e->message, path, strlen(path)) != 0 ||
		    strchr(e->message, '\n'))
			broken("the runtime's message is not one line starting with the path", e->message);
		if (out->data)
			broken("data left set on failure", NULL);
	}
	return r;
}

static int same(const NpyArray *a, const NpyArray *b)
{
	return a->dtype == b->dtype && a->rank == b->rank && !memcmp(a->shape, b->shape, sizeof a->shape) &&
	       a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	put_memfd(data, size);
	NpyArray a;
	char err[512];
	int r = npy_read(memfd_path, &a, err, sizeof err);
	if (r == 0)
		check_array(&a);
	else if (!err[0] || strchr(err, '\n'))
		broken("nestc's reason is empty or has a newline", err);

	NpyArray b;
	nestrt_error e;
	int skipped;
	int rp = read_pipe(data, size, &b, &e, &skipped);
	if (!skipped) {
		if ((r == 0) != (rp == 0))
			broken(r == 0 ? "a pipe rejects what a file accepts" : "a pipe accepts what a file rejects",
			       r == 0 ? e.message : err);
		if (rp == 0) {
			check_array(&b);
			if (!same(&a, &b))
				broken("a pipe and a file read differently", NULL);
			npy_free(&b);
		}
	}

	if (r == 0) {
		/* written again with numpy.save's header, it reads back the same */
		char *img;
		size_t len;
		npy_encode(a.dtype, a.rank, a.shape, a.data, &img, &len);
		put_memfd(img, len);
		free(img);
		NpyArray c;
		if (npy_read(memfd_path, &c, err, sizeof err) != 0)
			broken("our own encoding is rejected", err);
		if (!same(&a, &c))
			broken("our own encoding reads back differently", NULL);
		npy_free(&c);
		npy_free(&a);
	}
	return 0;
}

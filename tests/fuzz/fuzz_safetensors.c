/* fuzz_safetensors.c - libFuzzer target: the input is a .safetensors file.
 *
 * 1. The runtime's reader on the input in memory (nestrt_weights_from_memory,
 *    the entry point of embedded weights): libFuzzer's buffer is exactly the
 *    input's size, so ASan sees any read past the end. Accepted weights are
 *    inspected: every tensor's bytes are read, its size must match its dtype
 *    and shape, names must be sorted and unique; every tensor nestc has a type
 *    for is bound (twice: the second bind reuses any aligned copy) and the
 *    bound data must be aligned to the element size and equal to the file's
 *    (bool bytes normalized to 0 and 1). A rejection must be one line starting
 *    with the name given.
 * 2. The same bytes as a file (a memfd, opened through /proc/self/fd: the
 *    mmap path) through nestc's adapter (src/weights.c, weights_open), which
 *    must agree: accept the same files, with the same tensors.
 * A broken promise is a finding (abort). Nothing is kept between inputs. */
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

#define NAME "fuzz.safetensors"

#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_common.h"

static void check_message(const nestrt_error *e)
{
	const char *m = e->message;
	if (!memchr(m, 0, sizeof e->message))
		broken("message not NUL-terminated", NULL);
	if (strncmp(m, NAME ": ", strlen(NAME ": ")) != 0)
		broken("message does not start with the name", m);
	if (strchr(m, '\n'))
		broken("message has a newline", m);
}

static size_t elem_size(const char *file_dtype)
{
	static const struct { const char *s; size_t n; } t[] = {
		{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
		{"U8", 1}, {"U16", 2}, {"U32", 4}, {"U64", 8}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(t[i].s, file_dtype))
			return t[i].n;
	broken("unknown file dtype accepted", file_dtype);
	return 0;
}

static void inspect(nestrt_weights *w)
{
	int n = nestrt_weights_count(w);
	if (n < 0)
		broken("negative count", NULL);
	if (nestrt_weights_info(w, n, NULL, NULL, NULL, NULL) != -1 || nestrt_weights_info(w, -1, NULL, NULL, NULL, NULL) != -1)
		broken("info out of range succeeds", NULL);
	nestrt_param *params = calloc((size_t)n + 1, sizeof *params);
	const void **raw = calloc((size_t)n + 1, sizeof *raw);
	const void **bound = calloc((size_t)n + 1, sizeof *bound);
	size_t *sizes = calloc((size_t)n + 1, sizeof *sizes);
	if (!params || !raw || !bound || !sizes)
		abort();
	int np = 0;
	const char *prev = NULL;
	for (int i = 0; i < n; i++) {
		nestrt_param info;
		const char *fd;
		const void *data;
		size_t nbytes;
		if (nestrt_weights_info(w, i, &info, &fd, &data, &nbytes) != 0)
			broken("info fails in range", NULL);
		if (!info.name || !fd || !data)
			broken("info gives NULL", NULL);
		if (prev && strcmp(prev, info.name) >= 0)
			broken("names not sorted and unique", info.name);
		prev = info.name;
		if (info.rank < 0 || info.rank > NESTRT_MAX_RANK)
			broken("rank out of range", info.name);
		/* the reader's rule: the element count, multiplied in order, never
		 * overflows (even when a later dimension is 0); bytes follow from it */
		int64_t numel = 1;
		int overflow = 0;
		for (int k = 0; k < info.rank; k++) {
			if (info.shape[k] < 0)
				broken("negative dimension", info.name);
			if (__builtin_mul_overflow(numel, info.shape[k], &numel))
				overflow = 1;
		}
		uint64_t want = 0;
		/* F16 and BF16 are held widened to f32: four bytes each */
		uint64_t es = !strcmp(fd, "F16") || !strcmp(fd, "BF16") ? 4 : elem_size(fd);
		if (overflow || __builtin_mul_overflow((uint64_t)numel, es, &want))
			broken("size overflows", info.name);
		if (want != nbytes)
			broken("byte count does not match dtype and shape", info.name);
		for (size_t k = 0; k < nbytes; k++)
			touched += ((const unsigned char *)data)[k];
		if (info.dtype >= 0) {
			if (info.dtype >= NESTRT_NDTYPES)
				broken("dtype out of range", info.name);
			raw[np] = data;
			sizes[np] = nbytes;
			params[np++] = info;
		}
	}
	nestrt_error e;
	for (int round = 0; round < 2; round++) {
		if (nestrt_weights_bind(w, params, np, bound, &e) != 0)
			broken("bind of the file's own tensors fails", e.message);
		for (int i = 0; i < np; i++) {
			size_t es = nestrt_dtype_size(params[i].dtype);
			if (!bound[i] || (uintptr_t)bound[i] % es)
				broken("bound data NULL or misaligned", params[i].name);
			const unsigned char *b = bound[i], *r = raw[i];
			for (size_t k = 0; k < sizes[i]; k++)
				if (params[i].dtype == NESTRT_BOOL ? b[k] != (r[k] != 0) : b[k] != r[k])
					broken("bound data differs from the file's", params[i].name);
		}
	}
	/* a name the file lacks, and a wrong type, must fail cleanly */
	if (np > 0) {
		nestrt_param wrong = params[0];
		wrong.rank = wrong.rank < NESTRT_MAX_RANK ? wrong.rank + 1 : wrong.rank - 1;
		if (wrong.rank > 0)
			wrong.shape[wrong.rank - 1] = 1;
		if (nestrt_weights_bind(w, &wrong, 1, bound, &e) == 0)
			broken("bind with the wrong rank succeeds", wrong.name);
		check_message(&e);
	}
	free(params);
	free(raw);
	free(bound);
	free(sizes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nestrt_error e;
	memset(&e, 'x', sizeof e);
	nestrt_weights *w = nestrt_weights_from_memory(data, size, NAME, &e);
	if (w)
		inspect(w);
	else
		check_message(&e);

	/* the file path, through nestc's adapter */
	put_memfd(data, size);
	char err[512];
	Weights *cw = weights_open(memfd_path, err, sizeof err);
	/* nestc refuses an empty file given as weights; the runtime takes it as none */
	if (!!cw != (w != NULL && size > 0))
		broken(cw ? "nestc accepts what the runtime rejects" : "nestc rejects what the runtime accepts", cw ? e.message : err);
	if (cw) {
		if (cw->n != nestrt_weights_count(w))
			broken("nestc and the runtime see different tensor counts", NULL);
		for (int i = 0; i < cw->n; i++)
			if (weights_find(cw, cw->t[i].name) != &cw->t[i])
				broken("weights_find misses a tensor", cw->t[i].name);
		weights_close(cw);
	} else if (!err[0] || strchr(err, '\n')) {
		broken("nestc's reason is empty or has a newline", err);
	}
	nestrt_weights_close(w);
	return 0;
}

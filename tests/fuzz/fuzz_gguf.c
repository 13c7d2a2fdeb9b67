/* fuzz_gguf.c - libFuzzer target: the input is a GGUF file.
 *
 * 1. The runtime's reader on the input in memory (nestrt_weights_from_memory):
 *    libFuzzer's buffer is exactly the input's size, so ASan sees any read
 *    past the end. Accepted weights are inspected: every tensor's bytes are
 *    read, its size must follow from its shape (4 bytes an element for the
 *    types converted to f32), names must be sorted and unique, every tensor
 *    nestc has a type for is bound and equals its bytes; every metadata key
 *    is looked up, and every element of its value read through the accessors
 *    (strings must lie inside the input). A rejection must be one line
 *    starting with the name given.
 * 2. The same bytes as a file (a memfd, through /proc/self/fd: read, not
 *    mapped) through nestc's adapter (src/weights.c), which must agree.
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

#define NAME "fuzz.gguf"

#define FUZZ_NAME "fuzz_gguf"
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

/* Bytes an element holds: the converted types are f32. */
static size_t held_size(const char *fd)
{
	static const struct { const char *s; size_t n; } t[] = {
		{"f32", 4}, {"f16", 4}, {"bf16", 4}, {"q8_0", 4}, {"q4_0", 4}, {"q4_1", 4}, {"q5_0", 4}, {"q5_1", 4},
		{"q4_K", 4}, {"q5_K", 4}, {"q6_K", 4}, {"i8", 1}, {"i16", 2}, {"i32", 4}, {"i64", 8}, {"f64", 8},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(t[i].s, fd))
			return t[i].n;
	broken("unknown file type accepted", fd);
	return 0;
}

static void inspect_meta(nestrt_weights *w, const uint8_t *data, size_t size)
{
	int n = nestrt_weights_meta_count(w);
	nestrt_error e;
	for (int i = 0; i < n; i++) {
		const char *key = nestrt_weights_meta_key(w, i);
		if (!key)
			broken("meta key NULL in range", NULL);
		int et;
		uint64_t count;
		int t = nestrt_weights_meta_type(w, key, &et, &count);
		if (t < 0 || t > 12 || !nestrt_meta_type_name(t))
			broken("meta type out of range", key);
		if (t != NESTRT_META_ARRAY && (et != -1 || count != 1))
			broken("a value that is not an array has elements", key);
		/* every element, or the first and last thousands of a long array */
		for (uint64_t k = 0; k < count; k++) {
			if (k == 1000 && count > 2000)
				k = count - 1000;
			int64_t v;
			double x;
			const char *s;
			size_t len;
			int ri = nestrt_weights_meta_int(w, key, k, &v, &e);
			int rf = nestrt_weights_meta_float(w, key, k, &x, &e);
			int rs = nestrt_weights_meta_string(w, key, k, &s, &len, &e);
			if (rs == 0) {
				if ((const uint8_t *)s < data || len > size || (const uint8_t *)s > data + size - len)
					broken("string outside the input", key);
				for (size_t j = 0; j < len; j++)
					touched += (unsigned char)s[j];
			}
			if (ri < 0 || rf < 0 || rs < 0)
				check_message(&e);
			if (rs == 0 && (ri == 0 || rf == 0))
				broken("a string is a number too", key);
		}
		int64_t v;
		if (nestrt_weights_meta_int(w, key, count, &v, &e) == 0)
			broken("element past the end read", key);
		check_message(&e);
	}
	if (nestrt_weights_meta_key(w, n) || nestrt_weights_meta_key(w, -1))
		broken("meta key out of range", NULL);
}

static void inspect(nestrt_weights *w)
{
	int n = nestrt_weights_count(w);
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
		int64_t numel = 1;
		for (int k = 0; k < info.rank; k++) {
			if (info.shape[k] < 0)
				broken("negative dimension", info.name);
			if (__builtin_mul_overflow(numel, info.shape[k], &numel))
				broken("element count overflows", info.name);
		}
		uint64_t want;
		if (__builtin_mul_overflow((uint64_t)numel, held_size(fd), &want) || want != nbytes)
			broken("byte count does not match the type and shape", info.name);
		for (size_t k = 0; k < nbytes; k++)
			touched += ((const unsigned char *)data)[k];
		if (info.dtype >= 0) {
			raw[np] = data;
			sizes[np] = nbytes;
			params[np++] = info;
		}
	}
	nestrt_error e;
	if (nestrt_weights_bind(w, params, np, bound, &e) != 0)
		broken("bind of the file's own tensors fails", e.message);
	for (int i = 0; i < np; i++) {
		if (!bound[i] || (uintptr_t)bound[i] % nestrt_dtype_size(params[i].dtype))
			broken("bound data NULL or misaligned", params[i].name);
		if (sizes[i] && memcmp(bound[i], raw[i], sizes[i])) /* an empty tensor may have no data */
			broken("bound data differs from the tensor's", params[i].name);
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
	if (w) {
		inspect(w);
		if (size >= 4 && !memcmp(data, "GGUF", 4))
			inspect_meta(w, data, size);
	} else {
		check_message(&e);
	}

	put_memfd(data, size);
	char err[512];
	Weights *cw = weights_open(memfd_path, err, sizeof err);
	if (!!cw != (w != NULL && size > 0))
		broken(cw ? "nestc accepts what the runtime rejects" : "nestc rejects what the runtime accepts",
		       cw ? e.message : err);
	if (cw) {
		if (cw->n != nestrt_weights_count(w))
			broken("nestc and the runtime see different tensor counts", NULL);
		for (int i = 0; i < cw->n; i++) {
			if (weights_find(cw, cw->t[i].name) != &cw->t[i])
				broken("weights_find misses a tensor", cw->t[i].name);
			const void *d;
			size_t nb;
			nestrt_weights_info(w, i, NULL, NULL, &d, &nb);
			/* an F16 or BF16 tensor's data is made when it is asked for, as f32 */
			const void *cd = cw->t[i].data;
			if (cw->t[i].half_dtype >= 0)
				cd = weights_data(cw, &cw->t[i], (DType)cw->t[i].dtype, err, sizeof err);
			if (nb != cw->t[i].nbytes || (nb && (!cd || memcmp(d, cd, nb))))
				broken("read and in-memory values differ", cw->t[i].name);
		}
		weights_close(cw);
	} else if (!err[0] || strchr(err, '\n')) {
		broken("nestc's reason is empty or has a newline", err);
	}
	nestrt_weights_close(w);
	return 0;
}

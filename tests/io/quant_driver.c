/* quant_driver.c - runtime/quant.c's functions on raw bytes, for tests/io/quant.py.
 *
 *   quant_driver q FMT N        N f32 on stdin -> nestrt_quantize's bytes on stdout
 *   quant_driver h FMT BF16 N   N f16 (BF16 = 0) or bf16 (1) bits on stdin -> nestrt__quantize_half's
 *   quant_driver d FMT N        nestrt_format_bytes(FMT, N) bytes on stdin -> N f32 (nestrt_dequantize)
 *   quant_driver info           lines on stdin, one answer line each on stdout:
 *                               "name FMT", "parse NAME" ("parse" alone: NULL), "block FMT",
 *                               "bbytes FMT", "bytes FMT N"
 *
 * FMT is a number (unknown ones too). Bytes are little-endian. A quantizer's
 * error goes to stderr as "error: MESSAGE", exit 1; the call is made again
 * with err NULL, which must fail as well (exit 3 if not). Buffers are
 * exactly as large as their bytes, for the sanitizers of make check-asan. */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *slurp(size_t want)
{
	unsigned char *p = malloc(want ? want : 1);
	if (!p || fread(p, 1, want, stdin) != want) {
		fprintf(stderr, "quant_driver: expected %zu bytes on stdin\n", want);
		exit(2);
	}
	return p;
}

static int info(void)
{
	char line[256], word[32], name[200];
	while (fgets(line, sizeof line, stdin)) {
		long long a = 0, b = 0;
		int k = sscanf(line, "%31s %199s", word, name);
		if (k < 1)
			continue;
		if (strcmp(word, "parse") == 0) {
			printf("%d\n", nestrt_format_parse(k == 2 ? name : NULL));
			continue;
		}
		if (sscanf(line, "%31s %lld %lld", word, &a, &b) < 2)
			return 2;
		if (strcmp(word, "name") == 0) {
			const char *s = nestrt_format_name((int)a);
			printf("%s\n", s ? s : "(null)");
		} else if (strcmp(word, "block") == 0) {
			printf("%d\n", nestrt_format_block((int)a));
		} else if (strcmp(word, "bbytes") == 0) {
			printf("%d\n", nestrt_format_block_bytes((int)a));
		} else if (strcmp(word, "bytes") == 0) {
			printf("%zu\n", nestrt_format_bytes((int)a, (int64_t)b));
		} else {
			return 2;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "info") == 0)
		return info();
	int half = argc == 5 && strcmp(argv[1], "h") == 0;
	if (!half && (argc != 4 || (strcmp(argv[1], "q") && strcmp(argv[1], "d")))) {
		fprintf(stderr, "usage: quant_driver q|d FMT N | h FMT BF16 N | info\n");
		return 2;
	}
	int fmt = atoi(argv[2]);
	int64_t n = strtoll(argv[argc - 1], NULL, 10);
	size_t nb = nestrt_format_bytes(fmt, n);
	nestrt_error err;
	if (argv[1][0] == 'd') {
		void *src = slurp(nb);
		float *dst = malloc(n > 0 ? (size_t)n * 4 : 1);
		if (!dst)
			return 2;
		nestrt_dequantize(fmt, src, n, dst);
		fwrite(dst, 4, (size_t)n, stdout);
		free(src);
		free(dst);
		return 0;
	}
	/* a count the format refuses has no byte size: read what it would be in f32 */
	size_t elems = n > 0 ? (size_t)n : 0, esize = half ? 2 : 4;
	void *src = slurp(elems * esize);
	unsigned char *dst = malloc(nb ? nb : 1);
	if (!dst)
		return 2;
	int r, again;
	if (half) {
		int bf16 = atoi(argv[3]);
		r = nestrt__quantize_half(fmt, src, bf16, n, dst, &err);
		again = nestrt__quantize_half(fmt, src, bf16, n, dst, NULL);
	} else {
		r = nestrt_quantize(fmt, src, n, dst, &err);
		again = nestrt_quantize(fmt, src, n, dst, NULL);
	}
	if (r != again) {
		fprintf(stderr, "quant_driver: %d with err, %d with err NULL\n", r, again);
		return 3;
	}
	if (r < 0) {
		fprintf(stderr, "error: %s\n", err.message);
		free(src);
		free(dst);
		return 1;
	}
	fwrite(dst, 1, nb, stdout);
	free(src);
	free(dst);
	return 0;
}

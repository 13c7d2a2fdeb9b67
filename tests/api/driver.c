/* driver.c - one program, two ways of reaching a GPT-2 compiled by nestc:
 * linked with its objects and libnestrt.a, or (-DUSE_DLOPEN) loading the
 * shared library `nestc build -o libgpt2.so` wrote, every function through
 * dlsym. tests/api/run.py compares their outputs byte for byte.
 * Usage: driver [LIB.so] WEIGHTS.safetensors OUT.bin
 * OUT.bin: forward's logits of tokens 0..S-1 (i * 7 % V), prefill's of
 * T = 5 tokens, then 4 greedy decode steps' logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef USE_DLOPEN
#include <dlfcn.h>
#endif

#include "gpt2.h"

#ifdef USE_DLOPEN
static void *lib;
static void *sym(const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "driver: dlsym %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}
#define SYM(f) __typeof__(f) *p_##f = (__typeof__(f) *)sym(#f)
#define ARGS 4
#else
#define SYM(f) __typeof__(f) *p_##f = f
#define ARGS 3
#endif

static void put(FILE *f, const float *x, size_t n)
{
	if (fwrite(x, sizeof *x, n, f) != n) {
		perror("driver: write");
		exit(1);
	}
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

int main(int argc, char **argv)
{
	if (argc != ARGS) {
		fprintf(stderr, "usage: driver %sWEIGHTS.safetensors OUT.bin\n", ARGS == 4 ? "LIB.so " : "");
		return 2;
	}
#ifdef USE_DLOPEN
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "driver: dlopen: %s\n", dlerror());
		return 1;
	}
#endif
	SYM(nestrt_weights_open);
	SYM(nestrt_weights_close);
	SYM(nestrt_model_error);
	SYM(gpt2_new);
	SYM(gpt2_free);
	SYM(gpt2_forward);
	SYM(gpt2_seq_new);
	SYM(gpt2_seq_free);
	SYM(gpt2_prefill);
	SYM(gpt2_decode);
	const char *wpath = argv[ARGS - 2], *opath = argv[ARGS - 1];
	nestrt_error err;
	nestrt_weights *w = p_nestrt_weights_open(wpath, &err);
	if (!w) {
		fprintf(stderr, "driver: %s\n", err.message);
		return 1;
	}
	gpt2 *m = p_gpt2_new(w, &err);
	if (!m) {
		fprintf(stderr, "driver: %s\n", err.message);
		return 1;
	}
	FILE *f = fopen(opath, "wb");
	if (!f) {
		perror(opath);
		return 1;
	}
	enum { S = GPT2_FORWARD_TOKENS_NUMEL, V = GPT2_FORWARD_OUT_DIM1 };
	int32_t tokens[S];
	for (int i = 0; i < S; i++)
		tokens[i] = i * 7 % V;
	static float logits[S * V];
	if (p_gpt2_forward(m, tokens, logits)) {
		fprintf(stderr, "driver: forward: %s\n", p_nestrt_model_error((const nestrt_model *)m));
		return 1;
	}
	put(f, logits, (size_t)S * V);
	gpt2_seq *s = p_gpt2_seq_new(m, &err);
	if (!s) {
		fprintf(stderr, "driver: %s\n", err.message);
		return 1;
	}
	int64_t T = 5;
	if (p_gpt2_prefill(m, s, T, tokens, logits)) {
		fprintf(stderr, "driver: prefill: %s\n", p_nestrt_model_error((const nestrt_model *)m));
		return 1;
	}
	put(f, logits, (size_t)T * V);
	int32_t tok = argmax(logits + (T - 1) * V, V);
	for (int64_t P = T; P < T + 4; P++) {
		if (p_gpt2_decode(m, s, P, &tok, logits)) {
			fprintf(stderr, "driver: decode: %s\n", p_nestrt_model_error((const nestrt_model *)m));
			return 1;
		}
		put(f, logits, V);
		tok = argmax(logits, V);
	}
	/* a call the where clause refuses: the library's error comes back */
	if (p_gpt2_decode(m, s, 0, &tok, logits) == 0) {
		fprintf(stderr, "driver: decode at P = 0 succeeded\n");
		return 1;
	}
	printf("refused: %s\n", p_nestrt_model_error((const nestrt_model *)m));
	if (fclose(f)) {
		perror(opath);
		return 1;
	}
	p_gpt2_seq_free(s);
	p_gpt2_free(m);
	p_nestrt_weights_close(w);
	return 0;
}

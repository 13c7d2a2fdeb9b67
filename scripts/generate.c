/* generate.c - greedy generation with a model compiled by nestc: the prompt
 * runs through the model's prefill entry (any length up to its bound), then
 * each new token through decode, one position at a time, against the
 * sequence's key/value cache.
 *
 * Build with the model's objects and -DMODEL=gpt2 -DMODEL_UP=GPT2 (or llama,
 * LLAMA), the C prefix of the header MODEL.h and its capitals. Usage:
 *   generate WEIGHTS.safetensors N TOKEN... [--logits OUT.bin]
 * prints the generated ids and the tokens per second of the decode steps;
 * with --logits, the logits of every step (the prompt's last position, then
 * each decoded one) go to OUT.bin as float32, one row of V per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef MODEL
#define MODEL gpt2
#define MODEL_UP GPT2
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(a) #a
#define STR(a) STR2(a)
#define HEADER STR(MODEL.h)
#include HEADER

#define M_(x) CAT(MODEL, x)
#define UP_(x) CAT(MODEL_UP, x)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int argmax(const float *v, int64_t n)
{
	int64_t best = 0;
	for (int64_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return (int)best;
}

int main(int argc, char **argv)
{
	const char *logits_path = NULL;
	int nargs = 0;
	char **args = calloc((size_t)argc + 1, sizeof(char *));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--logits") && i + 1 < argc)
			logits_path = argv[++i];
		else
			args[nargs++] = argv[i];
	}
	if (nargs < 3) {
		fprintf(stderr, "usage: %s WEIGHTS.safetensors N TOKEN... [--logits OUT.bin]\n", argv[0]);
		return 2;
	}
	char *end;
	long n = strtol(args[1], &end, 10);
	if (*end || n < 0) {
		fprintf(stderr, "generate: N must be a number of tokens, not '%s'\n", args[1]);
		return 2;
	}
	int64_t T = nargs - 2;
	int64_t ctx = UP_(_PREFILL_T_MAX);
	if (T + n > ctx) {
		fprintf(stderr, "generate: %lld prompt tokens and %ld new ones exceed the context of %lld\n", (long long)T, n,
		        (long long)ctx);
		return 2;
	}
	int32_t *prompt = calloc((size_t)T, sizeof(int32_t));
	for (int64_t i = 0; i < T; i++) {
		long v = strtol(args[2 + i], &end, 10);
		if (*end || v < 0 || v > INT32_MAX) {
			fprintf(stderr, "generate: '%s' is not a token id\n", args[2 + i]);
			return 2;
		}
		prompt[i] = (int32_t)v;
	}
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(args[0], &err);
	if (!w) {
		fprintf(stderr, "generate: %s\n", err.message);
		return 1;
	}
	M_() *m = M_(_new)(w, &err);
	if (!m) {
		fprintf(stderr, "generate: %s\n", err.message);
		return 1;
	}
	M_(_seq) *s = M_(_seq_new)(m, &err);
	if (!s) {
		fprintf(stderr, "generate: %s\n", err.message);
		return 1;
	}
	int64_t V = UP_(_DECODE_OUT_NUMEL);
	float *logits = malloc(sizeof(float) * (size_t)(T * V));
	FILE *lf = logits_path ? fopen(logits_path, "wb") : NULL;
	if (logits_path && !lf) {
		perror(logits_path);
		return 1;
	}
	double t0 = now();
	if (M_(_prefill)(m, s, T, prompt, logits) != 0) {
		fprintf(stderr, "generate: %s\n", M_(_error)(m));
		return 1;
	}
	double t1 = now();
	const float *last = logits + (T - 1) * V;
	if (lf)
		fwrite(last, sizeof(float), (size_t)V, lf);
	int32_t tok = argmax(last, V);
	printf("prompt: %lld tokens, prefill %.2f ms\n", (long long)T, (t1 - t0) * 1e3);
	printf("ids:");
	double t2 = now();
	for (long i = 0; i < n; i++) {
		printf(" %d", tok);
		if (i + 1 == n)
			break;
		if (M_(_decode)(m, s, T + i, &tok, logits) != 0) {
			fprintf(stderr, "\ngenerate: %s\n", M_(_error)(m));
			return 1;
		}
		if (lf)
			fwrite(logits, sizeof(float), (size_t)V, lf);
		tok = argmax(logits, V);
	}
	double t3 = now();
	printf("\n");
	if (n > 1)
		printf("decode: %ld steps, %.2f ms per token, %.1f tokens/s\n", n - 1, (t3 - t2) * 1e3 / (double)(n - 1),
		       (double)(n - 1) / (t3 - t2));
	if (lf && fclose(lf) != 0) {
		perror(logits_path);
		return 1;
	}
	M_(_seq_free)(s);
	M_(_free)(m);
	nestrt_weights_close(w);
	free(logits);
	free(prompt);
	free(args);
	return 0;
}

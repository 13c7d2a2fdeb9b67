/* demo.c - a small C program using a model compiled by nestc: the GPT-2 of
 * `make demo`. Usage: demo WEIGHTS.safetensors TOKENS.npy */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpt2.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s WEIGHTS.safetensors TOKENS.npy\n", argv[0]);
		return 2;
	}
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	if (!w) {
		fprintf(stderr, "demo: %s\n", err.message);
		return 1;
	}
	gpt2 *m = gpt2_new(w, &err);
	if (!m) {
		fprintf(stderr, "demo: %s\n", err.message);
		return 1;
	}
	int dtype, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *tokens;
	if (nestrt_npy_read(argv[2], &dtype, &rank, shape, &tokens, &err) < 0) {
		fprintf(stderr, "demo: %s\n", err.message);
		return 1;
	}
	if (dtype != NESTRT_I32 || rank != 1 || shape[0] != GPT2_FORWARD_TOKENS_NUMEL) {
		fprintf(stderr, "demo: %s: expected i32[%d] tokens\n", argv[2], GPT2_FORWARD_TOKENS_NUMEL);
		return 1;
	}
	static float logits[GPT2_FORWARD_OUT_NUMEL];
	if (gpt2_forward(m, tokens, logits) != 0) {
		fprintf(stderr, "demo: %s\n", gpt2_error(m));
		return 1;
	}
	int S = GPT2_FORWARD_TOKENS_NUMEL, V = GPT2_FORWARD_OUT_NUMEL / GPT2_FORWARD_TOKENS_NUMEL;
	double mn = INFINITY, mx = -INFINITY, sum = 0;
	for (int i = 0; i < S * V; i++) {
		mn = logits[i] < mn ? logits[i] : mn;
		mx = logits[i] > mx ? logits[i] : mx;
		sum += logits[i];
	}
	printf("forward: f32[%d, %d] min=%g max=%g mean=%g [%g, %g, %g, %g, ...]\n", S, V, mn, mx, sum / (S * V),
	       logits[0], logits[1], logits[2], logits[3]);
	int best = 0;
	for (int j = 1; j < V; j++)
		if (logits[(S - 1) * V + j] > logits[(S - 1) * V + best])
			best = j;
	printf("most likely next token: %d\n", best);
	free(tokens);
	gpt2_free(m);
	nestrt_weights_close(w);
	return 0;
}

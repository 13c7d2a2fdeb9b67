/* app.c - forward once, print the argmax of the last position and a
 * checksum of the logits. Usage: app WEIGHTS.safetensors (with -DEMBEDDED,
 * the weights compiled in: no argument) */
#include <stdio.h>

#include "gpt2.h"

int main(int argc, char **argv)
{
	nestrt_error err;
#ifdef EMBEDDED
	(void)argv;
	if (argc != 1)
		return 2;
	nestrt_weights *w = NULL;
	gpt2 *m = gpt2_new_embedded(&err);
#else
	if (argc != 2)
		return 2;
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	gpt2 *m = w ? gpt2_new(w, &err) : NULL;
#endif
	if (!m) {
		fprintf(stderr, "app: %s\n", err.message);
		return 1;
	}
	int32_t tokens[GPT2_FORWARD_TOKENS_NUMEL];
	static float out[GPT2_FORWARD_OUT_NUMEL];
	for (int i = 0; i < GPT2_FORWARD_TOKENS_NUMEL; i++)
		tokens[i] = i;
	if (gpt2_forward(m, tokens, out)) {
		fprintf(stderr, "app: %s\n", gpt2_error(m));
		return 1;
	}
	int V = (int)GPT2_FORWARD_OUT_DIM1, best = 0;
	const float *last = out + (GPT2_FORWARD_TOKENS_NUMEL - 1) * V;
	double sum = 0;
	for (int j = 0; j < V; j++) {
		best = last[j] > last[best] ? j : best;
		sum += last[j];
	}
	printf("next %d sum %.6f\n", best, sum);
	gpt2_free(m);
	nestrt_weights_close(w);
	return 0;
}

/* coldstart.c - memory and start-up time of model instances (issue #14).
 *
 *   coldstart WEIGHTS N    open WEIGHTS, create N instances of the model
 *                          linked in (gpt2.h), call each once; prints the
 *                          time from opening the weights to the end of the
 *                          first call, the peak RSS and its ratio to the
 *                          weights file's size. */
#define _POSIX_C_SOURCE 200809L
#include "gpt2.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: coldstart WEIGHTS N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	struct stat st;
	if (stat(argv[1], &st) != 0 || n < 1 || n > 64) {
		fprintf(stderr, "coldstart: bad arguments\n");
		return 2;
	}
	static int32_t tokens[GPT2_FORWARD_TOKENS_NUMEL];
	static float out[GPT2_FORWARD_OUT_NUMEL];
	for (int i = 0; i < GPT2_FORWARD_TOKENS_NUMEL; i++)
		tokens[i] = i;
	nestrt_error err;
	double t0 = now();
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	gpt2 *m[64];
	double first = 0;
	for (int i = 0; w && i < n; i++) {
		m[i] = gpt2_new(w, &err);
		if (!m[i] || gpt2_forward(m[i], tokens, out) != 0) {
			fprintf(stderr, "coldstart: %s\n", m[i] ? gpt2_error(m[i]) : err.message);
			return 1;
		}
		if (i == 0)
			first = now() - t0;
	}
	if (!w) {
		fprintf(stderr, "coldstart: %s\n", err.message);
		return 1;
	}
	double all = now() - t0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double mb = (double)ru.ru_maxrss / 1024.0, file = (double)st.st_size / (1 << 20);
	printf("instances %d: open to end of first call %.3f s, all %.3f s; peak RSS %.0f MiB = %.2fx the %.0f MiB file\n",
	       n, first, all, mb, mb / file, file);
	for (int i = 0; i < n; i++)
		gpt2_free(m[i]);
	nestrt_weights_close(w);
	return 0;
}

/* coldstart.c - memory and start-up time of model instances (issue #14).
 *
 *   coldstart WEIGHTS N    open WEIGHTS, create N instances of the model
 *                          linked in (gpt2.h), call each once
 *   coldstart WEIGHTS N    built with -DEMBEDDED: the same with the weights
 *                          linked in (nestc build --embed-weights WEIGHTS);
 *                          WEIGHTS only gives the size the RSS is compared to
 *
 * Prints the time from opening the weights (creating the first instance,
 * when embedded) to the end of the first call, with its parts, the time
 * until every instance has made its first call, the peak RSS (VmHWM) and
 * its ratio to the weights' size, the first call's output checksum, and the
 * page faults of opening and creating the first instance and of its first
 * call (a count that other processes' load does not change: on a virtual
 * machine each costs some 20 us, a huge page's about as much as a small
 * page's).
 * The caller's token and output buffers are touched before the clock starts:
 * a server has them already, and their page faults are not the runtime's. */
#define _POSIX_C_SOURCE 200809L
#include "gpt2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static long faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt + ru.ru_majflt;
}

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
	if (stat(argv[1], &st) != 0)
		n = 0;
	if (n < 1 || n > 64) {
		fprintf(stderr, "coldstart: bad arguments\n");
		return 2;
	}
	static int32_t tokens[GPT2_FORWARD_TOKENS_NUMEL];
	static float out[GPT2_FORWARD_OUT_NUMEL];
	for (int i = 0; i < GPT2_FORWARD_TOKENS_NUMEL; i++)
		tokens[i] = (int32_t)((i * 7919) % GPT2_FORWARD_OUT_DIM1);
	memset(out, 0, sizeof out);
	nestrt_error err;
	long f0 = faults(), f_new = 0, f_call = 0;
	double t0 = now(), t_open = t0, t_new = t0, first = 0;
#ifndef EMBEDDED
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	if (!w) {
		fprintf(stderr, "coldstart: %s\n", err.message);
		return 1;
	}
	t_open = now();
#endif
	gpt2 *m[64];
	double sum = 0;
	for (int i = 0; i < n; i++) {
#ifdef EMBEDDED
		m[i] = gpt2_new_embedded(&err);
#else
		m[i] = gpt2_new(w, &err);
#endif
		if (i == 0) {
			t_new = now();
			f_new = faults();
		}
		if (!m[i] || gpt2_forward(m[i], tokens, out) != 0) {
			fprintf(stderr, "coldstart: %s\n", m[i] ? gpt2_error(m[i]) : err.message);
			return 1;
		}
		if (i == 0) {
			first = now() - t0;
			f_call = faults();
			for (int k = 0; k < GPT2_FORWARD_OUT_NUMEL; k++)
				sum += out[k];
		}
	}
	double all = now() - t0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double mb = (double)ru.ru_maxrss / 1024.0, file = (double)st.st_size / (1 << 20);
	printf("instances %d: open to end of first call %.3f s (open %.3f, new %.3f, call %.3f), all %.3f s; "
	       "peak RSS %.0f MiB = %.2fx the %.0f MiB weights; checksum %.6g (page faults: open and new %ld, "
	       "first call %ld)\n",
	       n, first, t_open - t0, t_new - t_open, t0 + first - t_new, all, mb, mb / file, file, sum, f_new - f0,
	       f_call - f_new);
	for (int i = 0; i < n; i++)
		gpt2_free(m[i]);
#ifndef EMBEDDED
	nestrt_weights_close(w);
#endif
	return 0;
}

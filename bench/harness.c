/* harness.c - times one entry point of a model compiled by nestc, for bench/run.py.
 *
 * Built once per model (bench/run.py does it):
 *   cc -O2 -Iruntime -IDIR -DMODEL=gpt2 '-DMODEL_H="gpt2.h"' -DOUT_NUMEL=GPT2_FORWARD_OUT_NUMEL \
 *      -DNINPUTS=1 -o harness bench/harness.c DIR/OBJECTS.o build/libnestrt.a -lm -lpthread
 * The entry point is MODEL_forward(m, in1[, in2], out).
 *
 * Usage: harness WEIGHTS.safetensors|- OUT.npy WARMUP IN1.npy [IN2.npy]
 * Loads the weights ("-" for a model without params) and the inputs, runs the
 * entry point once and writes its output to OUT.npy (f32, flat), runs WARMUP more
 * times, then prints "ready" and serves commands on standard input, one a line:
 *   run K   run K times; print the K wall times in nanoseconds on one line
 *   quit    (or end of input) exit
 * so that the driver can interleave runtimes (A B A B ...) while each keeps its
 * state warm. Threads: the runtime's own (NESTRT_NUM_THREADS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nestrt.h"
#include MODEL_H

#ifndef NINPUTS
#define NINPUTS 1
#endif

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define M_NEW CAT(MODEL, _new)
#define M_FREE CAT(MODEL, _free)
#define M_ENTRY CAT(MODEL, _forward)
#define M_ERROR CAT(MODEL, _error)
typedef struct MODEL model_t;

static model_t *model;
static void *inputs[2];
static float *out;

static int run_once(void)
{
#if NINPUTS == 1
	return M_ENTRY(model, inputs[0], out);
#elif NINPUTS == 2
	return M_ENTRY(model, inputs[0], inputs[1], out);
#else
#error "NINPUTS must be 1 or 2"
#endif
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "harness: %s: %s\n", what, msg);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 4 + NINPUTS) {
		fprintf(stderr, "usage: %s WEIGHTS|- OUT.npy WARMUP IN.npy...\n", argv[0]);
		return 2;
	}
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(strcmp(argv[1], "-") ? argv[1] : NULL, &err);
	if (!w && strcmp(argv[1], "-"))
		die("weights", err.message);
	model = M_NEW(w, &err);
	if (!model)
		die("model", err.message);
	for (int i = 0; i < NINPUTS; i++) {
		int dtype, rank;
		int64_t shape[NESTRT_MAX_RANK];
		if (nestrt_npy_read(argv[4 + i], &dtype, &rank, shape, &inputs[i], &err) < 0)
			die("input", err.message);
	}
	out = calloc(OUT_NUMEL, sizeof *out);
	if (!out)
		die("output", "out of memory");
	if (run_once() != 0)
		die("run", M_ERROR(model));
	int64_t oshape[1] = { OUT_NUMEL };
	if (nestrt_npy_write(argv[2], NESTRT_F32, 1, oshape, out, &err) < 0)
		die("output", err.message);
	int warmup = atoi(argv[3]);
	for (int i = 0; i < warmup; i++)
		if (run_once() != 0)
			die("run", M_ERROR(model));
	printf("ready\n");
	fflush(stdout);

	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		int k;
		if (sscanf(line, "run %d", &k) == 1) {
			for (int i = 0; i < k; i++) {
				long long t0 = now_ns();
				if (run_once() != 0)
					die("run", M_ERROR(model));
				long long t1 = now_ns();
				printf(i ? " %lld" : "%lld", t1 - t0);
			}
			printf("\n");
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	M_FREE(model);
	nestrt_weights_close(w);
	for (int i = 0; i < NINPUTS; i++)
		free(inputs[i]);
	free(out);
	return 0;
}

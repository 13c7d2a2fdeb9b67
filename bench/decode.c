/* decode.c - times the generation entries of a model compiled by nestc (its
 * prefill and decode over a per-sequence key/value cache), for bench/run.py.
 *
 * Built once per build of the model (bench/run.py does it):
 *   cc -O2 -Iruntime -IDIR -o decode bench/decode.c DIR/OBJECTS.o build/libnestrt.a -lm -lpthread
 * with -DSTATIC_T=n for a build made with `nestc build -D T=n` (its prefill is a
 * static entry of that T, without the T argument). -DMODEL=llama -DMODEL_UP=LLAMA
 * for another model (gpt2 by default).
 *
 * Usage: decode WEIGHTS.safetensors OUT.npy WARMUP TOKENS.npy decode P
 *        decode WEIGHTS.safetensors OUT.npy WARMUP TOKENS.npy prefill T
 * decode P: makes a sequence, prefills it with TOKENS[0:P] (positions 0..P-1), then
 *   each run is one decode step of TOKENS[P] at position P (attending to positions
 *   0..P); every step rewrites position P of the cache, so every run is the same work.
 * prefill T: each run is a prefill of TOKENS[0:T] (which rewrites the cache from 0).
 * Runs once and writes the logits of the last position (f32[V]) to OUT.npy, runs
 * WARMUP more times, then prints "ready" and serves the protocol of bench/harness.c:
 *   run K   run K times; print the K wall times in nanoseconds on one line
 *   quit    (or end of input) exit
 * Threads: the runtime's own (NESTRT_NUM_THREADS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nestrt.h"

#ifndef MODEL
#define MODEL gpt2
#define MODEL_UP GPT2
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(a) #a
#define STR(a) STR2(a)
#include STR(MODEL.h)

#define M_(x) CAT(MODEL, x)
#define UP_(x) CAT(MODEL_UP, x)

static M_() *model;
static M_(_seq) *seq;
static const int32_t *tokens;
static float *out;
static int prefill_mode;
static int64_t pos;     /* P for decode, T for prefill */

static int run_once(void)
{
	if (prefill_mode) {
#ifdef STATIC_T
		return M_(_prefill)(model, seq, tokens, out);
#else
		return M_(_prefill)(model, seq, pos, tokens, out);
#endif
	}
	return M_(_decode)(model, seq, pos, tokens + pos, out);
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "decode: %s: %s\n", what, msg);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 7 || (strcmp(argv[5], "decode") && strcmp(argv[5], "prefill"))) {
		fprintf(stderr, "usage: %s WEIGHTS OUT.npy WARMUP TOKENS.npy decode P|prefill T\n", argv[0]);
		return 2;
	}
	prefill_mode = !strcmp(argv[5], "prefill");
	pos = atoll(argv[6]);
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	if (!w)
		die("weights", err.message);
	model = M_(_new)(w, &err);
	if (!model)
		die("model", err.message);
	seq = M_(_seq_new)(model, &err);
	if (!seq)
		die("sequence", err.message);
	int dtype, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *data;
	if (nestrt_npy_read(argv[4], &dtype, &rank, shape, &data, &err) < 0)
		die("tokens", err.message);
	tokens = data;
	int64_t ntok = 1;
	for (int i = 0; i < rank; i++)
		ntok *= shape[i];
	int64_t V = UP_(_DECODE_OUT_NUMEL);
	if (dtype != NESTRT_I32)
		die("tokens", "not int32");
	if (pos < 1 || pos + !prefill_mode > ntok)
		die("tokens", "fewer tokens than the position needs");
#ifdef STATIC_T
	if (prefill_mode && pos != STATIC_T)
		die("prefill", "T differs from the build's static T");
#endif
	out = calloc((size_t)(prefill_mode ? pos : 1) * (size_t)V, sizeof *out);
	if (!out)
		die("output", "out of memory");
	if (!prefill_mode) {
		/* the past: positions 0..P-1 of the cache */
		float *past = calloc((size_t)pos * (size_t)V, sizeof *past);
		if (!past)
			die("output", "out of memory");
#ifdef STATIC_T
		if (pos != STATIC_T)
			die("prefill", "P differs from the build's static T");
		if (M_(_prefill)(model, seq, tokens, past) != 0)
#else
		if (M_(_prefill)(model, seq, pos, tokens, past) != 0)
#endif
			die("prefill", M_(_error)(model));
		free(past);
	}
	if (run_once() != 0)
		die("run", M_(_error)(model));
	int64_t oshape[1] = { V };
	if (nestrt_npy_write(argv[2], NESTRT_F32, 1, oshape, out + (prefill_mode ? pos - 1 : 0) * V, &err) < 0)
		die("output", err.message);
	int warmup = atoi(argv[3]);
	for (int i = 0; i < warmup; i++)
		if (run_once() != 0)
			die("run", M_(_error)(model));
	printf("ready\n");
	fflush(stdout);

	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		int k;
		if (sscanf(line, "run %d", &k) == 1) {
			for (int i = 0; i < k; i++) {
				long long t0 = now_ns();
				if (run_once() != 0)
					die("run", M_(_error)(model));
				long long t1 = now_ns();
				printf(i ? " %lld" : "%lld", t1 - t0);
			}
			printf("\n");
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	M_(_seq_free)(seq);
	M_(_free)(model);
	nestrt_weights_close(w);
	free(data);
	free(out);
	return 0;
}

/* test_stack.c - an entry point called from threads with small stacks
 * (tests/runtime/run_threads.py): a task keeps up to a few MiB of buffers on
 * its thread's stack (a Winograd block's transforms, a matmul's panel of
 * 10000 rows: 1.3 MB here), and a calling thread with less than the pool
 * needs has its loops run by the pool's threads instead of overflowing.
 *
 *   test_stack WEIGHTS   NESTRT_NUM_THREADS as set; last line "N passed, N failed"
 *
 * Linked with the objects of the model in run_threads.py (STACK_SRC, name
 * "stk"): forward(x: f32[1, 64, 56, 56], a: f32[64, 10000], b: f32[10000, 40]).
 * Each call must give the bits of the call from the main thread. */
#define _POSIX_C_SOURCE 200809L
#include "stk.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX (64 * 56 * 56)
#define NA (64 * 10000)
#define NB (10000 * 40)
#define NO1 (64 * 40)

static stk *model;
static float *x, *a, *b, *want0, *want1;
static int npass, nfail;

struct call {
	float *out0, *out1;
	int rc;
};

static void *run(void *arg)
{
	struct call *c = arg;
	c->rc = stk_forward(model, x, a, b, c->out0, c->out1);
	return NULL;
}

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	if (ok)
		npass++;
	else
		nfail++;
}

/* the entry from a new thread with a stack of `size` bytes */
static void on_stack(size_t size, const char *what)
{
	struct call c = {malloc(NX * sizeof(float)), malloc(NO1 * sizeof(float)), -1};
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, size);
	int started = pthread_create(&t, &attr, run, &c) == 0;
	pthread_attr_destroy(&attr);
	if (started)
		pthread_join(t, NULL);
	check(started && c.rc == 0 && !memcmp(c.out0, want0, NX * sizeof(float)) &&
	      !memcmp(c.out1, want1, NO1 * sizeof(float)), what);
	free(c.out0);
	free(c.out1);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_stack WEIGHTS\n");
		return 2;
	}
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	if (!w || !(model = stk_new(w, &err))) {
		printf("FAIL test_stack: %s\n0 passed, 1 failed\n", err.message);
		return 1;
	}
	x = malloc(NX * sizeof(float)), a = malloc(NA * sizeof(float)), b = malloc(NB * sizeof(float));
	want0 = malloc(NX * sizeof(float)), want1 = malloc(NO1 * sizeof(float));
	unsigned s = 12345;
	for (int i = 0; i < NX; i++)
		x[i] = (float)((s = s * 1103515245u + 12345u) >> 9) / (1 << 23) - 0.5f;
	for (int i = 0; i < NA; i++)
		a[i] = (float)((s = s * 1103515245u + 12345u) >> 9) / (1 << 23) - 0.5f;
	for (int i = 0; i < NB; i++)
		b[i] = (float)((s = s * 1103515245u + 12345u) >> 9) / (1 << 23) - 0.5f;
	check(stk_forward(model, x, a, b, want0, want1) == 0, "the main thread's call");
	on_stack(8u << 20, "a thread of 8 MiB: the same bits");
	on_stack(2u << 20, "a thread of 2 MiB (Rust's default): the same bits");
	on_stack(256u << 10, "a thread of 256 KiB: the same bits");
	stk_free(model);
	nestrt_weights_close(w);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail != 0;
}

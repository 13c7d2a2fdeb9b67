/* sgemm.c - times OpenBLAS cblas_sgemm, for bench/run.py: C[M,N] = A[M,K] B[K,N], row-major.
 *
 * Build: cc -O2 -Iruntime -o sgemm bench/sgemm.c build/libnestrt.a -lopenblas -lm -lpthread
 * Usage: sgemm A.npy B.npy OUT.npy WARMUP   (A f32[M, K], B f32[K, N])
 * Runs once and writes C to OUT.npy (f32, flat), runs WARMUP more times, prints
 * "ready CORENAME THREADS CONFIG" (openblas_get_corename(), openblas_get_num_threads(),
 * openblas_get_config()), then serves "run K" and "quit" on standard input: the
 * protocol of bench/harness.c. Threads and kernel: OPENBLAS_NUM_THREADS and
 * OPENBLAS_CORETYPE in the environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "nestrt.h"

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *load(const char *path, int64_t *rows, int64_t *cols)
{
	nestrt_error err;
	int dtype, rank;
	int64_t shape[NESTRT_MAX_RANK];
	void *data;
	if (nestrt_npy_read(path, &dtype, &rank, shape, &data, &err) < 0) {
		fprintf(stderr, "sgemm: %s\n", err.message);
		exit(1);
	}
	if (dtype != NESTRT_F32 || rank != 2) {
		fprintf(stderr, "sgemm: %s: expected a 2-d f32 array\n", path);
		exit(1);
	}
	*rows = shape[0];
	*cols = shape[1];
	return data;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s A.npy B.npy OUT.npy WARMUP\n", argv[0]);
		return 2;
	}
	int64_t M, K, K2, N;
	float *a = load(argv[1], &M, &K), *b = load(argv[2], &K2, &N);
	if (K != K2) {
		fprintf(stderr, "sgemm: inner dimensions %lld and %lld differ\n", (long long)K, (long long)K2);
		return 1;
	}
	float *c = calloc((size_t)(M * N), sizeof *c);
#define GEMM() cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a, (int)K, \
			   b, (int)N, 0.0f, c, (int)N)
	GEMM();
	nestrt_error err;
	int64_t oshape[1] = { M * N };
	if (nestrt_npy_write(argv[3], NESTRT_F32, 1, oshape, c, &err) < 0) {
		fprintf(stderr, "sgemm: %s\n", err.message);
		return 1;
	}
	for (int i = 0, n = atoi(argv[4]); i < n; i++)
		GEMM();
	printf("ready %s %d %s\n", openblas_get_corename(), openblas_get_num_threads(), openblas_get_config());
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		int k;
		if (sscanf(line, "run %d", &k) == 1) {
			for (int i = 0; i < k; i++) {
				long long t0 = now_ns();
				GEMM();
				printf(i ? " %lld" : "%lld", now_ns() - t0);
			}
			printf("\n");
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	free(a);
	free(b);
	free(c);
	return 0;
}

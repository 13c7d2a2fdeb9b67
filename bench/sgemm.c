/* sgemm.c - times OpenBLAS cblas_sgemm, for bench/run.py: C[M,N] = A[M,K] B[K,N], row-major.
 *
 * Build: cc -O2 -o sgemm bench/sgemm.c -lopenblas
 * Usage: sgemm A.npy B.npy OUT.npy WARMUP   (A f32[M, K], B f32[K, N])
 * Runs once and writes C to OUT.npy (f32, flat), runs WARMUP more times, prints
 * "ready CORENAME THREADS CONFIG" (openblas_get_corename(), openblas_get_num_threads(),
 * openblas_get_config()), then serves "run K" and "quit" on standard input: the
 * protocol of bench/harness.c. Threads and kernel: OPENBLAS_NUM_THREADS and
 * OPENBLAS_CORETYPE in the environment. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A 2-d little-endian f32 .npy (version 1-3, C order), as numpy.save writes it. */
static float *load(const char *path, int64_t *rows, int64_t *cols)
{
	FILE *f = fopen(path, "rb");
	unsigned char pre[12];
	if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
		fprintf(stderr, "sgemm: %s: not a .npy file\n", path);
		exit(1);
	}
	size_t hlen = pre[8] | (size_t)pre[9] << 8;
	if (pre[6] >= 2) {
		if (fread(pre + 10, 1, 2, f) != 2) {
			fprintf(stderr, "sgemm: %s: short header\n", path);
			exit(1);
		}
		hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
	}
	char *h = calloc(1, hlen + 1);
	long long r, c;
	if (!h || fread(h, 1, hlen, f) != hlen || !strstr(h, "'<f4'") || strstr(h, "True") ||
	    !strstr(h, "'shape': (") || sscanf(strstr(h, "'shape': (") + 10, "%lld, %lld)", &r, &c) != 2) {
		fprintf(stderr, "sgemm: %s: expected a 2-d little-endian f32 array in C order\n", path);
		exit(1);
	}
	free(h);
	float *data = malloc((size_t)(r * c) * sizeof *data + 1);
	if (!data || fread(data, sizeof *data, (size_t)(r * c), f) != (size_t)(r * c)) {
		fprintf(stderr, "sgemm: %s: short data\n", path);
		exit(1);
	}
	fclose(f);
	*rows = r;
	*cols = c;
	return data;
}

/* A flat f32 .npy, version 1. */
static int save(const char *path, const float *data, int64_t n)
{
	char header[128];
	int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld,), }",
			   (long long)n);
	int pad = 64 - (10 + len + 1) % 64;
	memset(header + len, ' ', (size_t)pad);
	header[len + pad] = '\n';
	len += pad + 1;
	unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff), (unsigned char)(len >> 8) };
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(pre, 1, 10, f) != 10 || fwrite(header, 1, (size_t)len, f) != (size_t)len ||
	    fwrite(data, sizeof *data, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
		fprintf(stderr, "sgemm: %s: cannot write\n", path);
		return -1;
	}
	return 0;
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
	if (save(argv[3], c, M * N) < 0)
		return 1;
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

/* peak.c - the fp32 FMA peak of this machine, for bench/run.py's "% of peak" columns.
 *
 *   cc -O2 -o peak bench/peak.c -lpthread && ./peak THREADS
 * prints "peak ISA GFLOPS" (ISA: avx512, avx2, or scalar), the best of several runs of
 * a loop of independent fused multiply-adds on THREADS threads at once. Each thread's
 * rate is its FLOPs over its own CPU time (CLOCK_THREAD_CPUTIME_ID), so that time the
 * scheduler gives to other processes on a shared machine does not count; the figure
 * is the sum of the rates of the threads, which run at the same time.
 *
 * The vector width comes from the CPU's features (__builtin_cpu_supports), never
 * from its name. Each thread keeps ACC independent accumulators so that the FMA
 * latency (4 cycles) times the 2 FMA ports is covered: 12 chains of 512- or 256-bit
 * vectors keep both ports busy on current Intel and AMD cores. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <immintrin.h>

#define ACC 12    /* chains: see CHAINS */
#define ITERS 20000000L   /* per run: ACC * ITERS FMAs of one vector per thread */
#define RUNS 20   /* best of */

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile float sink;

/* The 12 chains written out, so that they live in registers at any optimisation level. */
#define CHAINS(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)

__attribute__((target("avx512f"))) static void loop512(long n)
{
	__m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
#define INIT(i) __m512 a##i = _mm512_set1_ps((float)i);
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
	CHAINS(INIT)
	for (long k = 0; k < n; k++) {
		CHAINS(STEP)
	}
	__m512 s = _mm512_setzero_ps();
	CHAINS(SUM)
	sink = _mm512_reduce_add_ps(s);
#undef INIT
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) static void loop256(long n)
{
	__m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
#define INIT(i) __m256 a##i = _mm256_set1_ps((float)i);
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
	CHAINS(INIT)
	for (long k = 0; k < n; k++) {
		CHAINS(STEP)
	}
	__m256 s = _mm256_setzero_ps();
	CHAINS(SUM)
	float f[8];
	_mm256_storeu_ps(f, s);
	sink = f[0] + f[7];
#undef INIT
#undef STEP
#undef SUM
}

static void loop1(long n)
{
#define INIT(i) float a##i = (float)i;
#define STEP(i) a##i = a##i * 0.999999f + 1e-7f;
#define SUM(i) s += a##i;
	CHAINS(INIT)
	for (long k = 0; k < n; k++) {
		CHAINS(STEP)
	}
	float s = 0;
	CHAINS(SUM)
	sink = s;
#undef INIT
#undef STEP
#undef SUM
}

static int lanes;
static long iters;
static pthread_barrier_t start;

static void *worker(void *arg)
{
	double *rate = arg;
	pthread_barrier_wait(&start);
	double t0 = cpu_now();
	if (lanes == 16)
		loop512(iters);
	else if (lanes == 8)
		loop256(iters);
	else
		loop1(iters);
	*rate = 2.0 * lanes * ACC * (double)iters / (cpu_now() - t0) / 1e9;
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	const char *isa;
	if (threads < 1 || threads > 256) {
		fprintf(stderr, "usage: peak THREADS\n");
		return 2;
	}
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		lanes = 16, isa = "avx512";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		lanes = 8, isa = "avx2";
	else
		lanes = 1, isa = "scalar";
	iters = lanes == 1 ? ITERS / 8 : ITERS;
	double best = 0;
	pthread_t t[256];
	double rate[256];
	for (int r = 0; r < RUNS; r++) {
		pthread_barrier_init(&start, NULL, threads + 1);
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, worker, &rate[i]);
		pthread_barrier_wait(&start);
		double g = 0;
		for (int i = 0; i < threads; i++) {
			pthread_join(t[i], NULL);
			g += rate[i];
		}
		pthread_barrier_destroy(&start);
		if (g > best)
			best = g;
	}
	printf("peak %s %.1f\n", isa, best);
	return 0;
}

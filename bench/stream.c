/* stream.c - the machine's memory-read bandwidth, STREAM-style: sum a 1 GiB
 * buffer of floats (set beforehand, so every page is real; huge pages asked
 * for), with 1..N
 * threads each reading its own contiguous part; the best of 10 rounds, half
 * of them with a software prefetch 4 KiB ahead of the sums (on the AMD
 * kind's virtual machines the plain loop read as little as 0.9 times what
 * GPT-2's decode step, which prefetches, reached at two threads: the limit
 * was too low).
 * Usage: stream THREADS [MIB]; prints "read GB/s: X".
 *        stream THREADS MIB serve: sets the buffer, prints "ready", then serves
 *        the protocol of bench/harness.c ("run K": K reads of the whole buffer,
 *        their wall times in nanoseconds on one line; "quit"), so that
 *        bench/run.py reads the bandwidth in the same rounds as the runs it
 *        compares with it. Each of the K is the faster of a plain and a
 *        prefetching read back to back: which one wins changes with the machine
 *        (on a Zen 5 virtual machine the prefetching read served at 0.75 times
 *        GPT-2's decode step, the plain one did not), and a limit read by the
 *        slower loop is one the step can beat. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static float *buf;
static size_t n;
static int nth;
static double sums[64];
static int ahead; /* prefetch 4 KiB ahead (the odd rounds) */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *part(void *arg)
{
	int t = (int)(size_t)arg;
	size_t lo = n * (size_t)t / (size_t)nth, hi = n * (size_t)(t + 1) / (size_t)nth;
	/* 64 independent sums (four vectors of 16): the loads, not the adds'
	 * latency, set the pace */
	float s[64] = {0};
	size_t i = lo;
	for (; i + 64 <= hi; i += 64) {
		if (ahead && i + 1024 < hi)
			__builtin_prefetch(&buf[i + 1024], 0, 0);
		for (int k = 0; k < 64; k++)
			s[k] += buf[i + k];
	}
	double tot = 0;
	for (int k = 0; k < 64; k++)
		tot += s[k];
	for (; i < hi; i++)
		tot += buf[i];
	sums[t] = tot;
	return NULL;
}

/* One read of the whole buffer by nth threads; its wall time in seconds. */
static double read_all(double *check)
{
	pthread_t th[64];
	double t0 = now();
	for (int t = 0; t < nth; t++)
		pthread_create(&th[t], NULL, part, (void *)(size_t)t);
	for (int t = 0; t < nth; t++)
		pthread_join(th[t], NULL);
	double dt = now() - t0;
	for (int t = 0; t < nth; t++)
		*check += sums[t];
	return dt;
}

static int serve(void)
{
	char line[64];
	double check = 0;
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		int k;
		if (sscanf(line, "run %d", &k) == 1 && k > 0 && k <= 1000) {
			for (int i = 0; i < k; i++) {
				ahead = 0;
				double plain = read_all(&check);
				ahead = 1;
				double pf = read_all(&check);
				printf("%s%lld", i ? " " : "", (long long)((plain < pf ? plain : pf) * 1e9));
			}
			printf("\n");
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	fprintf(stderr, "(checksum %g)\n", check);
	return 0;
}

int main(int argc, char **argv)
{
	nth = argc > 1 ? atoi(argv[1]) : 1;
	size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
	if (nth < 1 || nth > 64 || mib < 1) {
		fprintf(stderr, "usage: stream THREADS [MIB]\n");
		return 2;
	}
	n = mib * 1024 * 1024 / sizeof(float);
	/* in 2 MiB pages where the kernel gives them, as libnestrt holds packed
	 * weights: the figure is the memory's, not the TLB's */
	size_t bytes = (n * sizeof(float) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		buf = NULL;
#ifdef MADV_HUGEPAGE
	if (buf)
		madvise(buf, bytes, MADV_HUGEPAGE);
#endif
	if (!buf) {
		fprintf(stderr, "stream: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)(i & 1023);
	if (argc > 3 && strcmp(argv[3], "serve") == 0)
		return serve();
	double best = 0, check = 0;
	for (int r = 0; r < 10; r++) {
		ahead = r & 1;
		double gbs = (double)(n * sizeof(float)) / read_all(&check) / 1e9;
		if (gbs > best)
			best = gbs;
	}
	printf("read GB/s: %.2f\n", best);
	fprintf(stderr, "(checksum %g)\n", check);
	return 0;
}

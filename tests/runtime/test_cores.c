/* test_cores.c - the pool on a machine with more cores than it has threads
 * for (tests/runtime/run_threads.py): sched_getaffinity is replaced here to
 * report 300 CPUs, NESTRT_NUM_THREADS is unset, and a parallel loop must run
 * each of its tasks once with the pool at its cap of 256 threads (a default
 * above the cap once wrote past the pool's ranges and hung the first loop). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestrt.h"

#define CPUS 300

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set)
{
	(void)pid;
	memset(set, 0, size);
	for (int i = 0; i < CPUS; i++)
		CPU_SET_S(i, size, set);
	return 0;
}

static int hits[1000];

static void task(void *env, int64_t b, int64_t e)
{
	(void)env;
	for (int64_t i = b; i < e; i++)
		__atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}

int main(void)
{
	unsetenv("NESTRT_NUM_THREADS");
	for (int it = 0; it < 20; it++) {
		memset(hits, 0, sizeof hits);
		nestrt_parallel_for(1000, task, NULL);
		for (int i = 0; i < 1000; i++)
			if (hits[i] != 1) {
				printf("FAIL %d cores: loop %d: task %d ran %d times\n", CPUS, it, i, hits[i]);
				return 1;
			}
	}
	int n = nestrt_num_threads();
	if (n != 256) {
		printf("FAIL %d cores: the pool has %d threads, not 256\n", CPUS, n);
		return 1;
	}
	printf("ok %d cores, NESTRT_NUM_THREADS unset: 256 threads, 20 loops of 1000 tasks each run once\n", CPUS);
	return 0;
}

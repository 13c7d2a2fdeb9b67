/* pool.c - the thread pool that runs compiled code's parallel loops.
 * NESTRT_NUM_THREADS sets its size (default: the cores this process may use);
 * the thread that calls nestrt_parallel_for works too. One loop runs at a
 * time; a loop started from inside another runs inline. Idle workers poll
 * for the next loop a while only when there are no more threads than cores.
 * A fork() waits for the loop under way, and the child starts a pool of its
 * own when it first needs one (pthread_atfork). A caller whose stack has
 * less than STACK_NEED left does not run tasks itself: the workers (or, in a
 * pool of one thread, a helper thread) run them while it waits. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER; /* one loop at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int nthreads = 1;
static uint64_t generation;     /* of the current loop; workers wait for it to change */
static nestrt_task job_fn;
static void *job_env;
static int64_t job_n;
static int job_ranges;
/* The tasks are dealt out in as many ranges as there are threads, in order:
 * thread i (the caller is 0) runs range i first, then helps with the
 * others'. So the same thread runs the same part of every loop (the same
 * pixels or rows of a layer after layer), and the data a task reads from
 * the loop before is mostly in its own core's cache; yet a thread that is
 * held up is covered by the others. Range r of a loop of n tasks in nr
 * ranges is [n r / nr, n (r + 1) / nr); its next task to claim is tagged
 * with its loop's generation in the high bits: a worker that wakes after
 * its loop has ended claims nothing from the next. */
#define MAX_THREADS 256
static struct {
	uint64_t next;
	char pad[56]; /* a cache line a range */
} range[MAX_THREADS];
static int64_t finished;        /* tasks of the current loop that have run */
static _Thread_local int in_task;
static _Thread_local int self;  /* this thread's range: 0 for callers, i for worker i */
static int spin = 1;            /* threads <= cores: idle workers poll before sleeping */
static int want = 1;            /* the size asked for (NESTRT_NUM_THREADS or the cores) */
static int restart;             /* in a forked child: no workers yet */
static int helper;              /* a pool of one thread: its helper for small stacks started */

/* A task keeps its buffers on its thread's stack: up to a few MiB (a
 * Winograd block's transforms and rows, a convolution's copies, a matmul's
 * panel: codegen bounds each). A calling thread with less left (Rust's 2 MiB
 * threads, glibc's own default of 2 MiB under `ulimit -s unlimited`, musl's
 * 128 KiB) would overflow it: its loops run on the pool's 16 MiB threads. */
#define STACK_NEED ((size_t)6 << 20)
static _Thread_local char *stack_lo; /* the lowest address of this thread's stack, once known */
static _Thread_local int stack_known;

static int stack_small(void)
{
	if (!stack_known) {
		pthread_attr_t a;
		void *lo;
		size_t size;
		stack_known = 1;
		if (pthread_getattr_np(pthread_self(), &a) == 0) {
			if (pthread_attr_getstack(&a, &lo, &size) == 0)
				stack_lo = lo;
			pthread_attr_destroy(&a);
		}
	}
	char here;
	return stack_lo && (size_t)(&here - stack_lo) < STACK_NEED;
}

/* A claim takes half of what is left of a range, then single tasks at its
 * end, so that a loop of many small tasks (a copy a channel) does not pay
 * two contended atomics a task, and the threads still end together. */
static int claim(uint64_t gen, int r, int64_t end, int64_t *first, int64_t *count)
{
	for (;;) {
		uint64_t c = __atomic_load_n(&range[r].next, __ATOMIC_ACQUIRE);
		if ((c >> 32) != (gen & 0xffffffffu) || (int64_t)(c & 0xffffffffu) >= end)
			return 0;
		int64_t i = (int64_t)(c & 0xffffffffu), k = (end - i) / 2;
		if (k < 1)
			k = 1;
		if (__atomic_compare_exchange_n(&range[r].next, &c, c + (uint64_t)k, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			*first = i, *count = k;
			return 1;
		}
	}
}

static void run_chunks(uint64_t gen, nestrt_task fn, void *env, int64_t n, int nr)
{
	in_task = 1;
	for (int j = 0; j < nr; j++) {
		int r = (self + j) % nr;
		int64_t i, k;
		while (claim(gen, r, n * (r + 1) / nr, &i, &k)) {
			fn(env, i, i + k);
			if (__atomic_add_fetch(&finished, k, __ATOMIC_ACQ_REL) == n) {
				pthread_mutex_lock(&mu);
				pthread_cond_signal(&done_cv);
				pthread_mutex_unlock(&mu);
			}
		}
	}
	in_task = 0;
}

/* How long an idle worker keeps polling for the next loop before it sleeps:
 * a transformer runs a matmul every few tens of microseconds, and waking a
 * sleeping thread takes about as long as a small matmul. */
#define SPIN_NANOS 2000000

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker(void *arg)
{
	self = (int)(intptr_t)arg;
	uint64_t seen = 0;
	for (;;) {
		uint64_t t0 = now_ns();
		for (int i = 0; spin && __atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen; i++) {
			if ((i & 255) == 255 && now_ns() - t0 > SPIN_NANOS)
				break;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		pthread_mutex_lock(&mu);
		while (generation == seen)
			pthread_cond_wait(&work, &mu);
		seen = generation;
		nestrt_task fn = job_fn;
		void *env = job_env;
		int64_t n = job_n;
		int nr = job_ranges;
		pthread_mutex_unlock(&mu);
		run_chunks(seen, fn, env, n, nr);
	}
	return NULL;
}

static int cores(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* NESTRT_NUM_THREADS: a whole number from 1 (at most MAX_THREADS); anything
 * else is reported once and the default used: the cores this process may
 * run on, at most MAX_THREADS too (the ranges are an array of that many). */
static int threads_wanted(void)
{
	int def = cores() < MAX_THREADS ? cores() : MAX_THREADS;
	const char *env = getenv("NESTRT_NUM_THREADS");
	if (!env)
		return def;
	/* digits only (no sign, no spaces); too many of them is MAX_THREADS */
	char *end;
	errno = 0;
	long n = *env >= '0' && *env <= '9' ? strtol(env, &end, 10) : (end = (char *)env, 0);
	if (errno == ERANGE && end != env && !*end)
		n = MAX_THREADS, errno = 0;
	if (end == env || *end || errno || n < 1) {
		char shown[NESTRT__SHOWN];
		fprintf(stderr, "nestrt: NESTRT_NUM_THREADS=%s is not a positive whole number; using %d threads\n",
		        nestrt__shown(shown, env, strlen(env)), def);
		return def;
	}
	return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* Worker i on a stack of 16 MiB (kernels keep packed panels of a matrix and
 * other buffers on their stack); 0 when it could not start. */
static int spawn(int i)
{
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 16u << 20);
	int ok = pthread_create(&t, &attr, worker, (void *)(intptr_t)i) == 0;
	if (ok)
		pthread_detach(t);
	pthread_attr_destroy(&attr);
	return ok;
}

static void start_workers(void)
{
	int started = 1;
	while (started < want && spawn(started))
		started++;
	nthreads = started;
}

/* The helper of a pool of one thread, for callers with small stacks: worker
 * 1 over the one range there is. Under submit. 0 when it could not start. */
static int start_helper(void)
{
	if (!helper)
		helper = spawn(1);
	return helper;
}

/* fork(): the parent waits for the loop under way and holds the pool's locks
 * across the fork, so that the child gets them free and consistent; the
 * child has none of the workers, and starts its own on its first loop. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&submit);
	pthread_mutex_lock(&mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&submit);
}

static void fork_child(void)
{
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&submit);
	/* the parent's sleeping workers are not here to be woken */
	pthread_cond_init(&work, NULL);
	pthread_cond_init(&done_cv, NULL);
	nthreads = 1;
	helper = 0;
	restart = want > 1;
	generation = 0;
	memset(range, 0, sizeof range);
	finished = 0;
}

static void start(void)
{
	want = threads_wanted();
	spin = want <= cores();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	start_workers();
}

int nestrt_num_threads(void)
{
	pthread_once(&once, start);
	return nthreads;
}

void nestrt_parallel_for(int64_t n, nestrt_task fn, void *env)
{
	if (n <= 0)
		return;
	pthread_once(&once, start);
	if (__atomic_load_n(&restart, __ATOMIC_ACQUIRE) && !in_task) {
		/* a forked child's first loop: its own workers */
		pthread_mutex_lock(&submit);
		if (restart) {
			start_workers();
			__atomic_store_n(&restart, 0, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&submit);
	}
	int away = !in_task && n <= 0x7fffffff && stack_small();
	if (!away && (n == 1 || nthreads == 1 || in_task || n > 0x7fffffff)) {
		fn(env, 0, n);
		return;
	}
	pthread_mutex_lock(&submit);
	if (away && nthreads == 1 && !start_helper()) {
		/* no thread to hand the loop to: run it here, as before */
		pthread_mutex_unlock(&submit);
		fn(env, 0, n);
		return;
	}
	pthread_mutex_lock(&mu);
	job_fn = fn;
	job_env = env;
	job_n = n;
	uint64_t gen = generation + 1;
	int nr = n < nthreads ? (int)n : nthreads;
	job_ranges = nr;
	__atomic_store_n(&finished, 0, __ATOMIC_RELEASE);
	for (int r = 0; r < nr; r++)
		__atomic_store_n(&range[r].next, (gen & 0xffffffffu) << 32 | (uint64_t)(n * r / nr), __ATOMIC_RELEASE);
	__atomic_store_n(&generation, gen, __ATOMIC_RELEASE);
	/* wake only as many sleeping workers as there are tasks for (all of
	 * them when this thread runs none) */
	if (n >= nthreads || away)
		pthread_cond_broadcast(&work);
	else
		for (int64_t i = 1; i < n; i++)
			pthread_cond_signal(&work);
	pthread_mutex_unlock(&mu);
	if (!away)
		run_chunks(gen, fn, env, n, nr);
	/* wait for the tasks others claimed, not for workers that never woke */
	for (int i = 0; spin && __atomic_load_n(&finished, __ATOMIC_ACQUIRE) < n && i < 4096; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	pthread_mutex_lock(&mu);
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < n)
		pthread_cond_wait(&done_cv, &mu);
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&submit);
}

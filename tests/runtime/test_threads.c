/* test_threads.c - a compiled model in a server's conditions (issue #14):
 * one instance called from many threads at once, the weights file changed
 * after creation, fork() during calls, and bad arguments and settings.
 *
 *   test_threads WEIGHTS [--no-timing]   every test; last line "N passed, N failed"
 *   test_threads --pool-size             prints nestrt_num_threads() (a child of the tests)
 *   test_threads --many-threads WEIGHTS  400 calls (a child of the tests)
 *
 * Linked with the objects of samples/gpt2.nest built small (run_threads.py:
 * -D L=2 -D D=64 -D H=4 -D V=256 -D CTX=64 -D S=16) and WEIGHTS from
 * `nestc weights --random-weights 1`. Each thread's tokens differ, so that
 * calls sharing storage would mix their results. */
#define _POSIX_C_SOURCE 200809L
#include "gpt2.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S GPT2_FORWARD_TOKENS_NUMEL
#define OUT GPT2_FORWARD_OUT_NUMEL
#define NTHREADS 8
#define NCALLS 200

static int npass, nfail;
static const char *self, *weights;

#define CHECK(cond, ...) check((cond), __LINE__, __VA_ARGS__)
static int check(int cond, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int check(int cond, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (cond) {
		npass++;
		printf("ok ");
	} else {
		nfail++;
		printf("FAIL test_threads.c:%d: ", line);
	}
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	va_end(ap);
	return cond;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Thread t's tokens (all different, in range) and their logits, computed
 * one call at a time on an instance of their own. */
static int32_t tokens[NTHREADS][S];
static float ref[NTHREADS][OUT];

static gpt2 *open_model(const char *path, nestrt_weights **wp)
{
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(path, &err);
	if (!w) {
		fprintf(stderr, "%s\n", err.message);
		return NULL;
	}
	gpt2 *m = gpt2_new(w, &err);
	if (!m)
		fprintf(stderr, "%s\n", err.message);
	if (wp)
		*wp = w;
	else
		nestrt_weights_close(w); /* the instance holds the weights */
	return m;
}

static int same_as_ref(const float *out, int t)
{
	return memcmp(out, ref[t], sizeof ref[t]) == 0;
}

/* ---- one instance, eight threads ---- */

typedef struct Worker {
	gpt2 *m;
	int t;
	pthread_barrier_t *go;
	int wrong, failed;
} Worker;

static void *worker(void *arg)
{
	Worker *wk = arg;
	static _Thread_local float out[OUT];
	pthread_barrier_wait(wk->go);
	for (int i = 0; i < NCALLS; i++) {
		if (gpt2_forward(wk->m, tokens[wk->t], out) != 0)
			wk->failed++;
		else if (!same_as_ref(out, wk->t))
			wk->wrong++;
	}
	return NULL;
}

static void test_threads(void)
{
	gpt2 *m = open_model(weights, NULL);
	if (!CHECK(m != NULL, "instance for the threads"))
		return;
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, NTHREADS);
	pthread_t th[NTHREADS];
	Worker wk[NTHREADS];
	for (int t = 0; t < NTHREADS; t++) {
		wk[t] = (Worker){m, t, &go, 0, 0};
		pthread_create(&th[t], NULL, worker, &wk[t]);
	}
	int wrong = 0, failed = 0;
	for (int t = 0; t < NTHREADS; t++) {
		pthread_join(th[t], NULL);
		wrong += wk[t].wrong;
		failed += wk[t].failed;
	}
	pthread_barrier_destroy(&go);
	CHECK(wrong == 0 && failed == 0,
	      "one instance, %d threads x %d calls (first calls together): %d results differ from one thread's, %d failed",
	      NTHREADS, NCALLS, wrong, failed);
	gpt2_free(m);
}

/* ---- the weights file changes after creation ---- */

static char *copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char buf[65536];
	size_t n;
	while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
		fwrite(buf, 1, n, b);
	if (a)
		fclose(a);
	if (b)
		fclose(b);
	return a && b ? (char *)to : NULL;
}

static void test_file_changes(const char *tmp)
{
	char path[512];
	float out[OUT];
	snprintf(path, sizeof path, "%s/changing.safetensors", tmp);
	/* truncated to nothing */
	if (!copy_file(weights, path))
		return (void)CHECK(0, "copy the weights to %s", path);
	gpt2 *m = open_model(path, NULL);
	CHECK(m != NULL && truncate(path, 0) == 0, "instance, then its weights file truncated");
	CHECK(m && gpt2_forward(m, tokens[1], out) == 0 && same_as_ref(out, 1),
	      "weights file truncated after creation: the same results, no crash");
	gpt2_free(m);
	/* rewritten in place with other bytes of the same size */
	copy_file(weights, path);
	m = open_model(path, NULL);
	struct stat st;
	int fd = open(path, O_WRONLY);
	int rewritten = m && fd >= 0 && fstat(fd, &st) == 0;
	char junk[4096];
	memset(junk, 0x5a, sizeof junk);
	for (off_t off = 64; rewritten && off < st.st_size; off += (off_t)sizeof junk) {
		size_t len = st.st_size - off < (off_t)sizeof junk ? (size_t)(st.st_size - off) : sizeof junk;
		rewritten = pwrite(fd, junk, len, off) == (ssize_t)len;
	}
	if (fd >= 0)
		close(fd);
	CHECK(rewritten, "instance, then its weights file overwritten in place");
	CHECK(m && gpt2_forward(m, tokens[2], out) == 0 && same_as_ref(out, 2),
	      "weights file overwritten after creation: the same results");
	gpt2_free(m);
	unlink(path);
}

/* ---- fork() while other threads are inside calls ---- */

static volatile int stop_calls;

static void *caller(void *arg)
{
	gpt2 *m = arg;
	float out[OUT];
	while (!__atomic_load_n(&stop_calls, __ATOMIC_RELAXED))
		gpt2_forward(m, tokens[3], out);
	return NULL;
}

static void test_fork(void)
{
	gpt2 *m = open_model(weights, NULL);
	if (!CHECK(m != NULL, "instance for fork"))
		return;
	pthread_t th[4];
	stop_calls = 0;
	for (int t = 0; t < 4; t++)
		pthread_create(&th[t], NULL, caller, m);
	int ok = 0, tries = 8;
	for (int i = 0; i < tries; i++) {
		nanosleep(&(struct timespec){0, 2000000}, NULL);
		pid_t pid = fork();
		if (pid == 0) {
			/* the child: a deadlock is killed by the alarm */
			alarm(20);
			float out[OUT];
			gpt2 *c = open_model(weights, NULL);
			int good = c && gpt2_forward(c, tokens[4], out) == 0 && same_as_ref(out, 4) &&
			           gpt2_forward(m, tokens[5], out) == 0 && same_as_ref(out, 5);
			_exit(good ? 0 : 1);
		}
		int status = 0;
		if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
			ok++;
	}
	__atomic_store_n(&stop_calls, 1, __ATOMIC_RELAXED);
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	CHECK(ok == tries, "fork during calls: %d of %d children created and called models (new and inherited)", ok,
	      tries);
	gpt2_free(m);
}

/* ---- bad arguments ---- */

static void test_bad_arguments(const char *tmp)
{
	char fifo[512];
	nestrt_error err;
	snprintf(fifo, sizeof fifo, "%s/weights.fifo", tmp);
	unlink(fifo);
	if (CHECK(mkfifo(fifo, 0600) == 0, "mkfifo")) {
		alarm(10); /* a blocking open would hang here */
		double t0 = now();
		nestrt_weights *w = nestrt_weights_open(fifo, &err);
		double dt = now() - t0;
		alarm(0);
		char want[600];
		snprintf(want, sizeof want, "%s: not a regular file", fifo);
		CHECK(w == NULL && strcmp(err.message, want) == 0 && dt < 1.0,
		      "a named pipe as weights path: '%s' in %.3f s", w ? "(opened)" : err.message, dt);
		nestrt_weights_close(w);
		unlink(fifo);
	}
	float out[OUT];
	int rc = gpt2_forward(NULL, tokens[0], out);
	const char *e = gpt2_error(NULL);
	CHECK(rc == -1 && e && strcmp(e, "nestrt_model_run: no model (NULL)") == 0, "NULL model: %d, '%s'", rc,
	      e ? e : "(no message)");
	gpt2 *m = open_model(weights, NULL);
	if (m) {
		rc = gpt2_forward(m, NULL, out);
		e = gpt2_error(m);
		CHECK(rc == -1 && e && strcmp(e, "gpt2_forward: argument 1 is NULL") == 0, "NULL input: %d, '%s'", rc,
		      e ? e : "(no message)");
		rc = gpt2_forward(m, tokens[0], NULL);
		e = gpt2_error(m);
		CHECK(rc == -1 && e && strcmp(e, "gpt2_forward: argument 2 is NULL") == 0, "NULL output: %d, '%s'", rc,
		      e ? e : "(no message)");
		CHECK(gpt2_forward(m, tokens[0], out) == 0 && gpt2_error(m) == NULL && same_as_ref(out, 0),
		      "a good call after them: 0, no error");
		gpt2_free(m);
	}
	gpt2 *none = gpt2_new(NULL, &err);
	CHECK(none == NULL && strstr(err.message, "no weights for") != NULL, "NULL weights: '%s'",
	      none ? "(created)" : err.message);
}

/* ---- NESTRT_NUM_THREADS ---- */

static int run_child(const char *value, const char *arg, char *out, size_t outlen, char *errtext, size_t errlen,
                     double *secs)
{
	int po[2], pe[2];
	if (pipe(po) < 0 || pipe(pe) < 0)
		return -1;
	double t0 = now();
	pid_t pid = fork();
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		if (value)
			setenv("NESTRT_NUM_THREADS", value, 1);
		else
			unsetenv("NESTRT_NUM_THREADS");
		execl(self, self, arg, weights, (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	ssize_t n = read(po[0], out, outlen - 1);
	out[n > 0 ? n : 0] = 0;
	size_t got = 0;
	while (got < errlen - 1 && (n = read(pe[0], errtext + got, errlen - 1 - got)) > 0)
		got += (size_t)n;
	errtext[got] = 0;
	close(po[0]);
	close(pe[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (secs)
		*secs = now() - t0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_num_threads(int timing)
{
	char out[256], errtext[1024];
	run_child(NULL, "--pool-size", out, sizeof out, errtext, sizeof errtext, NULL);
	int def = atoi(out);
	CHECK(def >= 1 && errtext[0] == 0, "default pool size %d, nothing on stderr", def);
	run_child("3", "--pool-size", out, sizeof out, errtext, sizeof errtext, NULL);
	CHECK(atoi(out) == 3 && errtext[0] == 0, "NESTRT_NUM_THREADS=3: %d threads", atoi(out));
	static const char *bad[] = {"4abc", "0", "-1", "abc", ""};
	for (int i = 0; i < 5; i++) {
		run_child(bad[i], "--pool-size", out, sizeof out, errtext, sizeof errtext, NULL);
		char want[256];
		snprintf(want, sizeof want,
		         "nestrt: NESTRT_NUM_THREADS=%s is not a positive whole number; using %d threads\n", bad[i], def);
		int same = strcmp(errtext, want) == 0;
		errtext[strcspn(errtext, "\n")] = 0;
		CHECK(atoi(out) == def && same, "NESTRT_NUM_THREADS='%s': %d threads, stderr '%s'", bad[i], atoi(out),
		      errtext);
	}
	if (!timing)
		return;
	/* more threads than cores: idle workers sleep instead of spinning */
	double secs = 0;
	int rc = run_child("256", "--many-threads", out, sizeof out, errtext, sizeof errtext, &secs);
	CHECK(rc == 0 && secs < 2.5, "NESTRT_NUM_THREADS=256: 400 calls in %.2f s (exit %d)", secs, rc);
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc >= 2 && strcmp(argv[1], "--pool-size") == 0) {
		printf("%d\n", nestrt_num_threads());
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: test_threads WEIGHTS [--no-timing]\n");
		return 2;
	}
	weights = argv[argc >= 3 && (strcmp(argv[1], "--many-threads") == 0 || strcmp(argv[1], "--profile-threads") == 0) ? 2 : 1];
	for (int t = 0; t < NTHREADS; t++)
		for (int i = 0; i < S; i++)
			tokens[t][i] = (int32_t)((i * 37 + t * 11) % (GPT2_FORWARD_OUT_NUMEL / S));
	if (strcmp(argv[1], "--many-threads") == 0) {
		gpt2 *m = open_model(weights, NULL);
		float out[OUT];
		int bad = !m;
		for (int i = 0; i < 400 && !bad; i++)
			bad = gpt2_forward(m, tokens[i % NTHREADS], out) != 0;
		gpt2_free(m);
		return bad;
	}
	int timing = !(argc >= 3 && strcmp(argv[2], "--no-timing") == 0);
	const char *tmpenv = getenv("TMPDIR");
	char tmp[256];
	snprintf(tmp, sizeof tmp, "%s/nestrt-threads.XXXXXX", tmpenv && *tmpenv ? tmpenv : "/tmp");
	if (!mkdtemp(tmp)) {
		perror(tmp);
		return 2;
	}
	/* the reference: one call at a time, on an instance of its own */
	gpt2 *m = open_model(weights, NULL);
	int ok = m != NULL;
	for (int t = 0; ok && t < NTHREADS; t++)
		ok = gpt2_forward(m, tokens[t], ref[t]) == 0;
	gpt2_free(m);
	if (argc >= 3 && strcmp(argv[1], "--profile-threads") == 0) {
		/* run_threads.py reads the NESTRT_PROFILE=2 profile this prints */
		if (CHECK(ok, "single-threaded reference"))
			test_threads();
		printf("%d passed, %d failed\n", npass, nfail);
		return nfail ? 1 : 0;
	}
	if (CHECK(ok, "single-threaded reference")) {
		test_threads();
		test_file_changes(tmp);
		test_fork();
		test_bad_arguments(tmp);
		test_num_threads(timing);
	}
	rmdir(tmp);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail ? 1 : 0;
}

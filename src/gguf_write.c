/* gguf_write.c - `nestc weights ... -o OUT.gguf`: every param of the model in
 * a GGUF v3 file, each in its weight format (--format, decided as
 * `nestc build --weights-format` decides), from random values or from the
 * tensors of a weights file, written as a stream.
 *
 * The file (what the runtime's reader takes):
 *   "GGUF", version 3, little-endian; metadata general.architecture = "nestc",
 *   general.name = the model's name, general.alignment = 32 (u32), and
 *   nestc.transposed, an array of the names of the tensors stored transposed
 *   (present, possibly empty, in every file);
 *   one tensor per param, in param order, named by its path, its type its
 *   format's (q8_0 Q8_0, q4_0 Q4_0, q4_k Q4_K, q6_k Q6_K, bf16 BF16, f16 F16) or, unformatted, its
 *   dtype's (F32 F16 BF16 F64 I8 I16 I32 I64; bool, u8 and u16 have none);
 *   ne in ggml's order (ne[0] contiguous: the declared shape reversed) and
 *   the elements row-major as declared, except a formatted param whose
 *   blocks run along axis 0 (x @ w, w [K, N]): it is stored transposed, its
 *   rows w's columns, ne = [K, N], so that each row is blocks along K as a
 *   GGUF file means them, and its name is listed in nestc.transposed;
 *   each tensor's data at a multiple of 32 from the data section, which
 *   starts at one, and the file padded to one.
 *
 * Streaming: every tensor's size and offset are known from the declared
 * shapes before anything is written; the header goes first, then each
 * tensor's data in order, made (random values, computed from the element's
 * index) or read (a file's tensor, mapped and given back after it) one param
 * at a time, a chunk of rows at a time through buffers of a few megabytes:
 * a chunk's rows are shared out to a crew of threads, then handed to a
 * writer thread while the next chunk is made. No param is ever whole in f32,
 * so the 7B LLaMA sample's 27 GB of f32 weights never exist: its q4_0 file
 * takes 10 MB of memory (the compiler's, and those buffers), converting a
 * bf16 file to it 25 MB (the input's pages are given back chunk by chunk).
 *
 * The random values are random_fill_param's (run.c) bit for bit: splitmix64
 * seeded by the seed and the param's name, whose i-th draw is the mix of
 * seed ^ hash(name) + (i + 1) * its step, so any element is computed from its
 * index alone, in any order and on any thread.
 *
 * The file is written to a temporary file beside OUT and renamed at the end;
 * on an error (or SIGINT, SIGTERM, SIGHUP) it is removed, and nothing is left
 * at OUT. */
#include "nestc.h"
#include "wformat.h"
#include "gguf_meta.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ggml's tensor types and GGUF's value types, as they number them */
enum { GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q8_0 = 8, GGML_Q4_K = 12, GGML_Q6_K = 14, GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26,
       GGML_I64 = 27, GGML_F64 = 28, GGML_BF16 = 30 };
enum { GGUF_U32 = 4, GGUF_STRING = 8, GGUF_ARRAY = 9 };
#define ALIGN 32
/* Elements a chunk: made by the crew, then written while the next one is
 * made. 2^21: two output buffers of 8 MB at most (f32; 16 of f64), 1.1 MB in q4_0. */
#define CHUNK_ELEMS ((int64_t)1 << 21)
/* The pieces of an unformatted chunk the threads share. */
#define PIECE ((int64_t)1 << 16)

_Static_assert((int)WF_F32 == (int)NESTRT_FMT_F32 && (int)WF_BF16 == (int)NESTRT_FMT_BF16 &&
               (int)WF_F16 == (int)NESTRT_FMT_F16 && (int)WF_Q8_0 == (int)NESTRT_FMT_Q8_0 &&
               (int)WF_Q4_0 == (int)NESTRT_FMT_Q4_0 && (int)WF_Q4_K == (int)NESTRT_FMT_Q4_K &&
               (int)WF_Q6_K == (int)NESTRT_FMT_Q6_K, "nestc and nestrt formats differ");

static int ggml_of_dtype(DType dt)
{
	switch (dt) {
	case DT_F32: return GGML_F32;
	case DT_F16: return GGML_F16;
	case DT_BF16: return GGML_BF16;
	case DT_F64: return GGML_F64;
	case DT_I8: return GGML_I8;
	case DT_I16: return GGML_I16;
	case DT_I32: return GGML_I32;
	case DT_I64: return GGML_I64;
	default: return -1; /* bool, u8, u16 */
	}
}

static int ggml_of_format(int wf)
{
	static const int t[WF_COUNT] = {GGML_F32, GGML_BF16, GGML_F16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_K, GGML_Q6_K};
	return t[wf];
}

/* ------------------------------------------------------------ random values */

/* random_fill_param's values of one param, by element index (run.c's
 * next_rand, its draws counted from 1). */
typedef struct Rand {
	uint64_t s0;
	double scale;
	int positive; /* a variance: [0.5, 1.5) */
} Rand;

static void rand_init(Rand *r, const ParamInfo *pi, uint64_t seed)
{
	r->s0 = seed ^ hash_str(pi->name);
	r->positive = pi->positive;
	double n = 4;
	int64_t numel = shape_numel(pi->rank, pi->shape);
	if (pi->rank == 4 && pi->shape[0] > 0)
		n = (double)(numel / pi->shape[0]);
	else if (pi->rank >= 2)
		n = (double)pi->shape[0];
	r->scale = n > 0 ? 1.0 / sqrt(n) : 1.0;
}

#define GOLDEN 0x9e3779b97f4a7c15ull /* splitmix64's step */

static inline uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* [0, 1) from 53 bits: below 2^53, exact either way, and a signed
 * conversion is one instruction (and vectorises) */
static inline double unit(uint64_t z)
{
	return (double)(int64_t)(z >> 11) * (1.0 / 9007199254740992.0);
}

static inline double rand_value(const Rand *r, uint64_t i)
{
	double u = unit(mix(r->s0 + (i + 1) * GOLDEN));
	return r->positive ? 0.5 + u : (2 * u - 1) * r->scale;
}

/* The f32 values of n elements whose draws are s, s + step, ...: 32 at a
 * time, a count -O2 vectorises; and on x86-64, a copy for AVX-512, whose
 * 64-bit products and conversions make it three times as fast. Integer
 * operations, exact conversions and one rounded product each: the same
 * values on every path. */
#define GEN(value) \
	do { \
		int64_t k = 0; \
		for (; k + 32 <= n; k += 32) \
			for (int j = 0; j < 32; j++) \
				out[k + j] = (float)(value(s + (uint64_t)(k + j) * step)); \
		for (; k < n; k++) \
			out[k] = (float)(value(s + (uint64_t)k * step)); \
	} while (0)
#define SYMMETRIC(z) ((2 * unit(mix(z)) - 1) * scale)
#define POSITIVE(z) (0.5 + unit(mix(z)))
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
__attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
static void gen_f32(uint64_t s, uint64_t step, double scale, int positive, int64_t n, float *restrict out)
{
	if (positive)
		GEN(POSITIVE);
	else
		GEN(SYMMETRIC);
}

/* Elements first, first + stride, ... (n of them) of a param, as f32. */
static void rand_f32(const Rand *r, uint64_t first, uint64_t stride, int64_t n, float *out)
{
	gen_f32(r->s0 + (first + 1) * GOLDEN, stride * GOLDEN, r->scale, r->positive, n, out);
}

/* ------------------------------------------------------------ the tensors */

typedef struct Item {
	const ParamInfo *pi;
	int ggml;            /* its tensor type */
	int fmt;             /* an f32 param's format (WF_F32 unformatted); -1: another dtype, its own bytes */
	int transposed;      /* stored as w^T (a formatted x @ w weight) */
	int nd;
	int64_t ne[MAX_RANK];
	int64_t numel;
	int64_t row, rows;   /* elements of a stored row (ne[0]; 1 for rank 0), and how many rows */
	uint64_t esize;      /* bytes of an element, unformatted; 0 for a format's rows */
	uint64_t row_bytes, nbytes, offset;
	WTensor *src;        /* converting: the file's tensor */
	/* llama.cpp's layout (llama_arch): */
	const char *gname;   /* its name there (blk.0.attn_q.weight), or NULL: the param's path */
	int64_t rotary_hd;   /* rows in GGML's rotary order, heads of rotary_hd rows (0: as declared) */
	int rowwise;         /* an f32 param made row by row (transposed or its rows moved) */
} Item;

/* Made a row at a time (a format's rows, or f32 ones moved), else in pieces of elements. */
static int by_rows(const Item *it)
{
	return it->fmt > WF_F32 || it->rowwise;
}

/* The declared row a stored row r holds: GGML's rotary order keeps row
 * 2i + t of a head where Hugging Face's has t * hd/2 + i (the inverse of
 * nestrt__rotary_row). */
static int64_t source_row(const Item *it, int64_t r)
{
	int64_t hd = it->rotary_hd;
	if (!hd)
		return r;
	int64_t f = r % hd;
	return r - f + (f % 2) * (hd / 2) + f / 2;
}

/* ------------------------------------------------------------ output */

/* The output, in order: small pieces (the header, padding) through a buffer;
 * a chunk's data handed to a thread of its own that writes it while the next
 * chunk is made (the file system's copying and the disk's throttling were a
 * third of the time, spent while no thread computed). */
typedef struct Writer {
	int fd;
	unsigned char *buf;
	size_t len, cap;
	uint64_t at;         /* bytes written, handed over or buffered */
	int err;             /* an errno, once a write failed */
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const void *job;     /* being written by the thread */
	size_t job_len;
	int busy, quit;
} Writer;

static void w_raw(Writer *w, const void *p, size_t n)
{
	const unsigned char *c = p;
	while (n > 0 && !w->err) {
		ssize_t k = write(w->fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			w->err = k < 0 ? errno : EIO;
			return;
		}
		c += k;
		n -= (size_t)k;
	}
}

static void *w_main(void *arg)
{
	Writer *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->busy && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->busy)
			break;
		const void *p = w->job;
		size_t n = w->job_len;
		pthread_mutex_unlock(&w->mu);
		w_raw(w, p, n);
		pthread_mutex_lock(&w->mu);
		w->busy = 0;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Until the thread has written what it was given. */
static void w_wait(Writer *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	while (w->busy)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

static void w_flush(Writer *w)
{
	w_wait(w);
	w_raw(w, w->buf, w->len);
	w->len = 0;
}

static void w_put(Writer *w, const void *p, size_t n)
{
	w->at += n;
	if (w->len + n > w->cap || n >= w->cap)
		w_flush(w); /* which waits for the thread: one write at a time */
	if (n >= w->cap) {
		w_raw(w, p, n);
		return;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

/* n bytes at p written after everything before them, by the thread: p must
 * stay as it is until the next w_async or w_wait returns. -1 when a write
 * failed already (w->err; nothing more is written). w->err is read only
 * while no write is under way: after w_wait, or when this returns -1. */
static int w_async(Writer *w, const void *p, size_t n)
{
	w_flush(w);
	if (w->err)
		return -1;
	w->at += n;
	if (!w->started) {
		pthread_mutex_init(&w->mu, NULL);
		pthread_cond_init(&w->cv, NULL);
		if (pthread_create(&w->thread, NULL, w_main, w) != 0) {
			pthread_cond_destroy(&w->cv);
			pthread_mutex_destroy(&w->mu);
			w_raw(w, p, n); /* no thread: written here */
			return w->err ? -1 : 0;
		}
		w->started = 1;
	}
	pthread_mutex_lock(&w->mu);
	w->job = p;
	w->job_len = n;
	w->busy = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static void w_stop(Writer *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	w->started = 0;
}

static void w_zeros(Writer *w, uint64_t n)
{
	static const unsigned char z[ALIGN];
	while (n > 0) {
		size_t k = n < sizeof z ? (size_t)n : sizeof z;
		w_put(w, z, k);
		n -= k;
	}
}

static void w_u32(Writer *w, uint32_t v)
{
	unsigned char b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	w_put(w, b, 4);
}

static void w_u64(Writer *w, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	w_put(w, b, 8);
}

static void w_str(Writer *w, const char *s)
{
	size_t n = strlen(s);
	w_u64(w, n);
	w_put(w, s, n);
}

/* The temporary file, removed by a signal that ends nestc while it is written. */
static char *volatile temp_path;
static struct sigaction old_actions[3];
static const int caught[3] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig)
{
	char *t = temp_path;
	if (t)
		unlink(t);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(int on)
{
	for (int i = 0; i < 3; i++) {
		if (on) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_signal;
			sigemptyset(&sa.sa_mask);
			sigaction(caught[i], &sa, &old_actions[i]);
		} else {
			sigaction(caught[i], &old_actions[i], NULL);
		}
	}
}

/* ------------------------------------------------------------ threads */

/* The rows of a chunk are made on a crew of threads (the caller one of
 * them): NESTRT_NUM_THREADS of them, by default the cores nestc may run on.
 * Not the runtime's pool: its idle workers poll for the next loop, and the
 * loops here are a few milliseconds apart (while a chunk is handed to the
 * writer, or a thread of a busy machine waits for a core), time a polling
 * thread takes from the others. These sleep. The tasks of a loop are claimed
 * a few at a time with the loop's number in the high bits, so that a thread
 * that wakes late claims nothing of the next loop. */
typedef struct Crew {
	int n;                      /* threads, the caller included */
	pthread_t *t;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	uint64_t gen;               /* the loop's number */
	nestrt_task fn;
	void *env;
	int64_t ntasks, grain;
	uint64_t next;              /* gen << 40 | the next task */
	int64_t finished;           /* tasks of the loop that have run */
	int quit;
} Crew;

#define TASK_BITS 40
#define TASK_MASK ((UINT64_C(1) << TASK_BITS) - 1)

static void crew_work(Crew *c, uint64_t gen, nestrt_task fn, void *env, int64_t n, int64_t grain)
{
	for (;;) {
		uint64_t v = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
		int64_t i = (int64_t)(v & TASK_MASK);
		if (v >> TASK_BITS != (gen & ((UINT64_C(1) << (64 - TASK_BITS)) - 1)) || i >= n)
			return;
		int64_t k = n - i < grain ? n - i : grain;
		if (!__atomic_compare_exchange_n(&c->next, &v, v + (uint64_t)k, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue;
		fn(env, i, i + k);
		if (__atomic_add_fetch(&c->finished, k, __ATOMIC_ACQ_REL) == n) {
			pthread_mutex_lock(&c->mu);
			pthread_cond_broadcast(&c->done);
			pthread_mutex_unlock(&c->mu);
		}
	}
}

static void *crew_main(void *arg)
{
	Crew *c = arg;
	uint64_t seen = 0;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (c->gen == seen && !c->quit)
			pthread_cond_wait(&c->go, &c->mu);
		if (c->quit)
			break;
		seen = c->gen;
		nestrt_task fn = c->fn;
		void *env = c->env;
		int64_t n = c->ntasks, grain = c->grain;
		pthread_mutex_unlock(&c->mu);
		crew_work(c, seen, fn, env, n, grain);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static int crew_size(void)
{
	const char *env = getenv("NESTRT_NUM_THREADS");
	char *end;
	long n = env && *env >= '0' && *env <= '9' ? strtol(env, &end, 10) : 0;
	if (n >= 1 && !*end)
		return n < 256 ? (int)n : 256;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set) < 256 ? CPU_COUNT(&set) : 256;
	long k = sysconf(_SC_NPROCESSORS_ONLN);
	return k > 1 ? (k < 256 ? (int)k : 256) : 1;
}

static void crew_start(Crew *c)
{
	memset(c, 0, sizeof *c);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->go, NULL);
	pthread_cond_init(&c->done, NULL);
	int want = crew_size();
	c->t = xcalloc((size_t)want, sizeof *c->t);
	c->n = 1;
	while (c->n < want && pthread_create(&c->t[c->n - 1], NULL, crew_main, c) == 0)
		c->n++;
}

static void crew_stop(Crew *c)
{
	pthread_mutex_lock(&c->mu);
	c->quit = 1;
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->mu);
	for (int i = 0; i < c->n - 1; i++)
		pthread_join(c->t[i], NULL);
	free(c->t);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->go);
	pthread_mutex_destroy(&c->mu);
}

/* fn(env, b, e) over the tasks [0, n), on every thread of the crew; returns
 * when all have run. */
static void crew_run(Crew *c, int64_t n, nestrt_task fn, void *env)
{
	if (n <= 0)
		return;
	if (c->n == 1 || n == 1) {
		fn(env, 0, n);
		return;
	}
	int64_t grain = n / ((int64_t)c->n * 8);
	grain = grain < 1 ? 1 : grain;
	pthread_mutex_lock(&c->mu);
	uint64_t gen = ++c->gen;
	c->fn = fn;
	c->env = env;
	c->ntasks = n;
	c->grain = grain;
	__atomic_store_n(&c->finished, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->next, (gen & ((UINT64_C(1) << (64 - TASK_BITS)) - 1)) << TASK_BITS, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->mu);
	crew_work(c, gen, fn, env, n, grain);
	pthread_mutex_lock(&c->mu);
	while (__atomic_load_n(&c->finished, __ATOMIC_ACQUIRE) < n)
		pthread_cond_wait(&c->done, &c->mu);
	pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------ making the data */

typedef struct Job {
	const Item *it;
	const Rand *rnd;            /* random values, or NULL: data */
	const unsigned char *data;  /* the file's elements (any alignment for f32, 2-aligned for 16 bits) */
	size_t data_bytes;          /* their bytes in the file */
	int half;                   /* data are f16 (1) or bf16 (2) bits of an f32 param */
	int64_t first;              /* the chunk's first row (formatted) or element (unformatted) */
	unsigned char *out;
	pthread_mutex_t mu;
	int64_t bad;                /* the first row that could not be converted, INT64_MAX: none */
	char why[sizeof(((nestrt_error *)0)->message)];
} Job;

static float load_f32(const unsigned char *p)
{
	float f;
	memcpy(&f, p, 4);
	return f;
}

/* The f32 elements of stored row r (one row of w, or one column when
 * transposed) into buf. */
static void row_f32(const Job *j, int64_t r, float *buf)
{
	const Item *it = j->it;
	int64_t c = it->row, n = it->rows;
	r = source_row(it, r);
	if (j->rnd) {
		if (it->transposed)
			rand_f32(j->rnd, (uint64_t)r, (uint64_t)n, c, buf);
		else
			rand_f32(j->rnd, (uint64_t)(r * c), 1, c, buf);
	} else if (it->transposed) {
		for (int64_t k = 0; k < c; k++)
			buf[k] = load_f32(j->data + (size_t)(k * n + r) * 4);
	} else {
		memcpy(buf, j->data + (size_t)(r * c) * 4, (size_t)c * 4);
	}
}

/* Formatted rows [b, e) of the chunk: quantized one at a time. */
static void format_rows(void *env, int64_t b, int64_t e)
{
	Job *j = env;
	const Item *it = j->it;
	int64_t c = it->row, n = it->rows;
	float *buf = NULL;
	uint16_t *hbuf = NULL;
	for (int64_t i = b; i < e; i++) {
		int64_t r = j->first + i;
		unsigned char *dst = j->out + (size_t)i * it->row_bytes;
		nestrt_error err;
		int rc;
		int64_t sr = source_row(it, r);
		if (j->half) {
			const uint16_t *src = (const uint16_t *)(const void *)j->data + sr * c;
			if (it->transposed) {
				if (!hbuf)
					hbuf = xmalloc((size_t)c * 2 + 2);
				const uint16_t *h = (const uint16_t *)(const void *)j->data;
				for (int64_t k = 0; k < c; k++)
					hbuf[k] = h[k * n + r];
				src = hbuf;
			}
			rc = nestrt__quantize_half(it->fmt, src, j->half == 2, c, dst, &err);
		} else {
			const float *src;
			if (!j->rnd && !it->transposed && (uintptr_t)(j->data + (size_t)(sr * c) * 4) % 4 == 0) {
				src = (const float *)(const void *)(j->data + (size_t)(sr * c) * 4); /* read in place */
			} else {
				if (!buf)
					buf = xmalloc((size_t)c * 4 + 4);
				row_f32(j, r, buf);
				src = buf;
			}
			rc = nestrt_quantize(it->fmt, src, c, dst, &err);
		}
		if (rc < 0) {
			pthread_mutex_lock(&j->mu);
			if (r < j->bad) {
				j->bad = r;
				snprintf(j->why, sizeof j->why, "%s", err.message);
			}
			pthread_mutex_unlock(&j->mu);
			break;
		}
	}
	free(buf);
	free(hbuf);
}

/* Unformatted pieces [b, e) of the chunk: elements in the param's dtype (f32
 * for an f32 param), as they are in the file or as tensor_to_bytes writes
 * random_fill_param's values. */
static void plain_pieces(void *env, int64_t b, int64_t e)
{
	Job *j = env;
	const Item *it = j->it;
	DType dt = it->pi->dtype;
	for (int64_t p = b; p < e; p++) {
		int64_t a = j->first + p * PIECE, m = it->numel - a < PIECE ? it->numel - a : PIECE;
		unsigned char *dst = j->out + (size_t)(p * PIECE) * it->esize;
		if (m <= 0)
			break;
		if (!j->rnd) {
			if (j->half) /* an f32 param from F16 / BF16: widened, exactly */
				nestrt_dequantize(j->half == 2 ? NESTRT_FMT_BF16 : NESTRT_FMT_F16, j->data + (size_t)a * 2, m,
				                  (float *)(void *)dst);
			else
				memcpy(dst, j->data + (size_t)a * it->esize, (size_t)m * it->esize);
			continue;
		}
		switch (dt) {
		case DT_F32: /* dst is 4-aligned: a multiple of PIECE floats into a malloc'ed buffer */
			rand_f32(j->rnd, (uint64_t)a, 1, m, (float *)(void *)dst);
			break;
		case DT_F64:
			for (int64_t k = 0; k < m; k++) {
				double v = rand_value(j->rnd, (uint64_t)(a + k));
				memcpy(dst + 8 * k, &v, 8);
			}
			break;
		case DT_F16:
		case DT_BF16:
			for (int64_t k = 0; k < m; k++) {
				float f = (float)rand_value(j->rnd, (uint64_t)(a + k));
				uint16_t h = dt == DT_F16 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f);
				dst[2 * k] = (unsigned char)h;
				dst[2 * k + 1] = (unsigned char)(h >> 8);
			}
			break;
		default: /* integers: 0 */
			memset(dst, 0, (size_t)m * it->esize);
			break;
		}
	}
}

/* Where a mapped file's tensor lies: its pages are given back once it is
 * written (the file's pages, read again if ever needed), so that the
 * process holds one param of the input at a time. Only pages of the
 * mapping itself: a copy the reader made is its own memory. */
static void advise(Weights *w, const void *p, size_t n, int advice)
{
	struct nestrt_weights *rt = w ? w->rt : NULL;
	if (!rt || !rt->mapped || !rt->map || n == 0)
		return;
	uintptr_t lo = (uintptr_t)rt->map, hi = lo + rt->mapsize, a = (uintptr_t)p, e = a + n;
	if (a < lo || e > hi)
		return;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	a = a / page * page;
	e = (e + page - 1) / page * page;
	if (e > hi)
		e = hi;
	madvise((void *)a, e - a, advice);
}

/* One param's data. 0, or -1 after the error. */
static int write_item(Writer *wr, Crew *crew, Diag *d, const Item *it, uint64_t seed, Weights *w)
{
	const ParamInfo *pi = it->pi;
	Job j = {.it = it, .bad = INT64_MAX};
	Rand rnd;
	if (!w) {
		rand_init(&rnd, pi, seed);
		j.rnd = &rnd;
	} else if (it->numel > 0) {
		WTensor *t = it->src;
		if (t->half_dtype >= 0 && (pi->dtype == DT_F32 || (int)pi->dtype == t->half_dtype)) {
			/* the file's 16-bit elements, as they are */
			char why[512];
			j.data = weights_data(w, t, (DType)t->half_dtype, why, sizeof why);
			if (!j.data) {
				error_plain(d, "%s: %s", w->path, why);
				return -1;
			}
			j.half = pi->dtype == DT_F32 ? (t->half_dtype == DT_BF16 ? 2 : 1) : 0;
			j.data_bytes = (size_t)it->numel * 2;
		} else {
			j.data = t->data;
			j.data_bytes = t->nbytes;
		}
		advise(w, j.data, j.data_bytes, MADV_WILLNEED);
	}
	if (it->numel == 0)
		return 0;
	int formatted = by_rows(it);
	int64_t units = formatted ? it->rows : it->numel;
	int64_t per = formatted ? (CHUNK_ELEMS / it->row > 0 ? CHUNK_ELEMS / it->row : 1) : CHUNK_ELEMS;
	size_t unit_bytes = formatted ? (size_t)it->row_bytes : (size_t)it->esize;
	/* the bytes of the input a unit is made from: a row of f32 or 16-bit
	 * elements, or an element as the output holds it (but widened from 16
	 * bits); the rows of a transposed param are read across all of it */
	size_t src_unit = (size_t)(formatted ? it->row : 1) * (j.half ? 2 : formatted ? 4 : it->esize);
	unsigned char *out[2] = {xmalloc((size_t)per * unit_bytes + 64), xmalloc((size_t)per * unit_bytes + 64)};
	pthread_mutex_init(&j.mu, NULL);
	int rc = 0;
	for (int64_t u = 0, c = 0; u < units && rc == 0; u += per, c++) {
		int64_t k = units - u < per ? units - u : per;
		j.first = u;
		j.out = out[c & 1]; /* the other one may be being written */
		if (formatted)
			crew_run(crew, k, format_rows, &j);
		else
			crew_run(crew, (k + PIECE - 1) / PIECE, plain_pieces, &j);
		if (j.bad != INT64_MAX) {
			error_plain(d, "%s%sparam '%s' in %s: %s %lld: %s", w ? w->path : "", w ? ": " : "", pi->name,
			            wformat_name(it->fmt), pi->waxis == 1 ? "row" : "column", (long long)j.bad, j.why);
			rc = -1;
			break;
		}
		if (j.data && !it->transposed && !it->rotary_hd) /* done with these rows of the input */
			advise(w, j.data + (size_t)u * src_unit, (size_t)k * src_unit, MADV_DONTNEED);
		if (w_async(wr, j.out, (size_t)k * unit_bytes) < 0)
			break;
	}
	w_wait(wr);
	if (wr->err)
		rc = -1;
	pthread_mutex_destroy(&j.mu);
	free(out[0]);
	free(out[1]);
	if (w && j.data)
		advise(w, j.data, j.data_bytes, MADV_DONTNEED);
	return rc;
}

/* ------------------------------------------------------------ the file */

/* ------------------------------------------------------------ llama.cpp's layout */

/* The architecture of the model's @gguf consts (the first part of their
 * keys, "llama" of "llama.block_count"; general.* and tokenizer.* aside) when
 * runtime/gguf_names.c knows it and has a name for every param: the file is
 * then llama.cpp's, one its tools load (names, metadata, GGML's rotary rows,
 * GPT-2's matrices [out, in]); else NULL: nestc's own. */
static const char *llama_arch(const Program *p, char *buf, size_t n)
{
	buf[0] = 0;
	for (int i = 0; i < p->ngguf; i++) {
		const char *k = p->gguf[i].key, *dot = strchr(k, '.');
		if (!dot || !strncmp(k, "general.", 8) || !strncmp(k, "tokenizer.", 10))
			continue;
		size_t len = (size_t)(dot - k);
		if (len >= n)
			return NULL;
		if (!buf[0]) {
			memcpy(buf, k, len);
			buf[len] = 0;
		} else if (strlen(buf) != len || strncmp(buf, k, len)) {
			return NULL;
		}
	}
	if (!buf[0] || !nestrt__gguf_arch_known(buf))
		return NULL;
	char g[512];
	for (int i = 0; i < p->nparams; i++)
		if (nestrt__gguf_ggml_name(buf, p->params[i].name, g, sizeof g) < 0)
			return NULL;
	return buf;
}

static const MetaKV *gguf_const(const Program *p, const char *key)
{
	for (int i = 0; i < p->ngguf; i++)
		if (!strcmp(p->gguf[i].key, key))
			return &p->gguf[i];
	return NULL;
}

/* llama.cpp's name and layout of each param: 0, or -1 after errors. */
static int llama_items(Program *p, Diag *d, const char *path, const char *arch, Item *items)
{
	char key[64];
	snprintf(key, sizeof key, "%s.attention.head_count", arch);
	const MetaKV *h = gguf_const(p, key);
	snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
	const MetaKV *kv = gguf_const(p, key);
	if (!kv)
		kv = h;
	int ok = 1;
	for (int i = 0; i < p->nparams; i++) {
		Item *it = &items[i];
		const ParamInfo *pi = it->pi;
		char g[512];
		int fl = nestrt__gguf_ggml_name(arch, pi->name, g, sizeof g);
		it->gname = arena_strdup(p->arena, g);
		if (!fl)
			continue;
		if (pi->rank != 2 || pi->dtype != DT_F32) {
			error_plain(d, "%s: param '%s' is %s; llama.cpp's %s holds an f32 matrix there", path, pi->name,
			            dtype_name(pi->dtype), arch);
			ok = 0;
			continue;
		}
		if (fl & NESTRT__NAME_TRANS) {
			if (it->fmt > WF_F32 && !it->transposed) {
				error_plain(d, "%s: param '%s' in %s: llama.cpp's %s stores it [out, in], its blocks along axis 0, "
				            "but its matmuls reduce axis 1", path, pi->name, wformat_name(it->fmt), arch);
				ok = 0;
				continue;
			}
			it->transposed = 1;
		} else if (it->transposed) {
			error_plain(d, "%s: param '%s' in %s: its matmuls reduce axis 0, and llama.cpp's %s stores it with "
			            "blocks along axis 1", path, pi->name, wformat_name(it->fmt), arch);
			ok = 0;
			continue;
		}
		if (fl & (NESTRT__NAME_ROPE_Q | NESTRT__NAME_ROPE_K)) {
			const MetaKV *m = fl & NESTRT__NAME_ROPE_Q ? h : kv;
			int64_t rows = pi->shape[0];
			if (!m || m->kind != 'i' || m->i <= 0 || rows % m->i || (rows / m->i) % 2) {
				error_plain(d, "%s: param '%s': its %lld rows are not %s.attention.head_count%s heads of an even "
				            "number of rows (the consts say %lld)", path, pi->name, (long long)rows, arch,
				            fl & NESTRT__NAME_ROPE_Q ? "" : "_kv", m ? (long long)m->i : 0LL);
				ok = 0;
				continue;
			}
			it->rotary_hd = rows / m->i;
		}
		if (it->fmt == WF_F32)
			it->rowwise = 1;
	}
	return ok ? 0 : -1;
}

/* Each param's type, shape and place; 0, or -1 after errors. */
static int lay_out(Program *p, Diag *d, const char *path, const char *arch, Item *items, uint64_t *data_len)
{
	uint64_t off = 0;
	int ok = 1;
	for (int i = 0; i < p->nparams; i++) {
		const ParamInfo *pi = &p->params[i];
		Item *it = &items[i];
		it->pi = pi;
		if (pi->wformat != WF_F32) {
			it->fmt = pi->wformat;
			it->ggml = ggml_of_format(pi->wformat);
			it->transposed = pi->waxis == 0;
		} else {
			it->ggml = ggml_of_dtype(pi->dtype);
			it->fmt = pi->dtype == DT_F32 ? WF_F32 : -1;
			if (it->ggml < 0) {
				error_plain(d, "%s: param '%s' is %s, which GGUF has no tensor type for", path, pi->name,
				            dtype_name(pi->dtype));
				ok = 0;
				continue;
			}
		}
	}
	if (!ok || (arch && llama_items(p, d, path, arch, items) < 0))
		return -1;
	for (int i = 0; i < p->nparams; i++) {
		const ParamInfo *pi = &p->params[i];
		Item *it = &items[i];
		it->nd = pi->rank;
		for (int k = 0; k < pi->rank; k++)
			it->ne[k] = pi->shape[pi->rank - 1 - k];
		if (it->transposed) { /* w [K, N] as w^T: rows of K */
			it->ne[0] = pi->shape[0];
			it->ne[1] = pi->shape[1];
		}
		it->numel = shape_numel(pi->rank, pi->shape);
		it->row = pi->rank ? it->ne[0] : 1;
		it->rows = it->row ? it->numel / it->row : 0;
		uint64_t nb;
		if (it->fmt > WF_F32) {
			if (it->row % wformat_block(it->fmt))
				ice("param '%s' in %s: rows of %lld elements", pi->name, wformat_name(it->fmt), (long long)it->row);
			it->row_bytes = (uint64_t)wformat_bytes(it->fmt, it->row);
			if (__builtin_mul_overflow(it->row_bytes, (uint64_t)it->rows, &nb))
				nb = UINT64_MAX;
		} else {
			it->esize = it->fmt == WF_F32 ? 4 : (uint64_t)dtype_size(pi->dtype);
			it->row_bytes = (uint64_t)it->row * it->esize;
			if (__builtin_mul_overflow((uint64_t)it->numel, it->esize, &nb))
				nb = UINT64_MAX;
		}
		it->nbytes = nb;
		it->offset = off;
		if (nb > (uint64_t)INT64_MAX / 4 || off + nb > (uint64_t)INT64_MAX / 4) {
			error_plain(d, "%s: the params take 2^61 bytes or more in all, too many for one file", path);
			return -1;
		}
		off = (off + nb + ALIGN - 1) / ALIGN * ALIGN;
	}
	*data_len = off;
	return 0;
}

static void write_header(Writer *wr, Program *p, const Item *items, const char *name, const GgufMeta *llama)
{
	if (llama) {
		w_put(wr, "GGUF", 4);
		w_u32(wr, 3);
		w_u64(wr, (uint64_t)p->nparams);
		w_u64(wr, llama->n);
		w_put(wr, llama->b.s, llama->b.len);
		for (int i = 0; i < p->nparams; i++) {
			const Item *it = &items[i];
			w_str(wr, it->gname);
			w_u32(wr, (uint32_t)it->nd);
			for (int k = 0; k < it->nd; k++)
				w_u64(wr, (uint64_t)it->ne[k]);
			w_u32(wr, (uint32_t)it->ggml);
			w_u64(wr, it->offset);
		}
		w_zeros(wr, (ALIGN - wr->at % ALIGN) % ALIGN);
		return;
	}

	int ntrans = 0;
	for (int i = 0; i < p->nparams; i++)
		ntrans += items[i].transposed;
	w_put(wr, "GGUF", 4);
	w_u32(wr, 3);
	w_u64(wr, (uint64_t)p->nparams);
	w_u64(wr, 4);
	w_str(wr, "general.architecture");
	w_u32(wr, GGUF_STRING);
	w_str(wr, "nestc");
	w_str(wr, "general.name");
	w_u32(wr, GGUF_STRING);
	w_str(wr, name);
	w_str(wr, "general.alignment");
	w_u32(wr, GGUF_U32);
	w_u32(wr, ALIGN);
	w_str(wr, "nestc.transposed");
	w_u32(wr, GGUF_ARRAY);
	w_u32(wr, GGUF_STRING);
	w_u64(wr, (uint64_t)ntrans);
	for (int i = 0; i < p->nparams; i++)
		if (items[i].transposed)
			w_str(wr, items[i].pi->name);
	for (int i = 0; i < p->nparams; i++) {
		const Item *it = &items[i];
		w_str(wr, it->pi->name);
		w_u32(wr, (uint32_t)it->nd);
		for (int k = 0; k < it->nd; k++)
			w_u64(wr, (uint64_t)it->ne[k]);
		w_u32(wr, (uint32_t)it->ggml);
		w_u64(wr, it->offset);
	}
	w_zeros(wr, (ALIGN - wr->at % ALIGN) % ALIGN);
}

/* A tensor of a GGUF file nestc wrote that is stored transposed: the reader
 * gives it as it is stored (w^T), which no param of shape [K, N] binds; it
 * is not taken as w. */
static int transposed_in(Weights *w, const char *name)
{
	int et = -1;
	uint64_t count = 0;
	if (nestrt_weights_meta_type(w->rt, "nestc.transposed", &et, &count) != GGUF_ARRAY || et != GGUF_STRING)
		return 0;
	size_t n = strlen(name);
	for (uint64_t i = 0; i < count; i++) {
		const char *s;
		size_t len;
		if (nestrt_weights_meta_string(w->rt, "nestc.transposed", i, &s, &len, NULL) == 0 && len == n &&
		    !memcmp(s, name, n))
			return 1;
	}
	return 0;
}

/* The input, mapped (NESTRT_MMAP=1): its pages are read as each param is
 * written and given back after it, never all at once. */
static Weights *open_input(Diag *d, const char *path)
{
	const char *old = getenv("NESTRT_MMAP");
	char *keep = old ? xstrdup(old) : NULL;
	setenv("NESTRT_MMAP", "1", 1);
	char err[512];
	Weights *w = weights_open(path, err, sizeof err);
	if (keep)
		setenv("NESTRT_MMAP", keep, 1);
	else
		unsetenv("NESTRT_MMAP");
	free(keep);
	if (!w)
		error_plain(d, "%s: %s", path, err);
	return w;
}

int write_gguf_weights(Program *p, Diag *d, const char *name, uint64_t seed, const char *weights_in, const char *path,
                       int progress)
{
	Item *items = xcalloc((size_t)p->nparams + 1, sizeof *items);
	Weights *w = NULL;
	char *real = NULL, *tmp = NULL;
	int rc = 1, fd = -1;
	uint64_t data_len;
	Writer wr = {.fd = -1};
	GgufMeta meta = {{0}, 0};
	char archbuf[32];
	const char *arch = llama_arch(p, archbuf, sizeof archbuf);
	if (lay_out(p, d, path, arch, items, &data_len) < 0)
		goto out;
	if (weights_in) {
		if (!(w = open_input(d, weights_in)))
			goto out;
		int ok = 1;
		for (int i = 0; i < p->nparams; i++) {
			const char *pn = p->params[i].name;
			WTensor *t = weights_find(w, pn);
			if (t && w->rt->gguf && transposed_in(w, pn)) {
				t->used = 1;
				error_plain(d, "%s: %s: the tensor is stored transposed (nestc.transposed); a file in weight formats "
				               "is not converted again", w->path, pn);
				ok = 0;
			} else if (!(items[i].src = weights_match(d, w, &p->params[i]))) {
				ok = 0;
			}
		}
		weights_warn_unused(d, w);
		if (!ok || d->nerrors)
			goto out;
	}

	if (arch && gguf_llama_meta(&meta, p, d, arch, name, w, ALIGN) < 0)
		goto out;
	/* beside OUT (its file, when OUT is a symbolic link to one), renamed at the end */
	struct stat st, lst;
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && stat(path, &st) == 0)
		real = realpath(path, NULL);
	tmp = xasprintf("%s.tmp.XXXXXX", real ? real : path);
	catch_signals(1);
	fd = mkstemp(tmp);
	if (fd < 0) {
		error_plain(d, "cannot write %s: %s", path, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	temp_path = tmp;
	wr.fd = fd;
	wr.cap = (size_t)1 << 20;
	wr.buf = xmalloc(wr.cap);
	write_header(&wr, p, items, name, arch ? &meta : NULL);
	uint64_t data_start = wr.at;
	Crew crew;
	crew_start(&crew);
	Progress pg;
	progress_start(&pg, progress, "writing", (int64_t)data_len, 1);
	for (int i = 0; i < p->nparams && !wr.err; i++) {
		w_zeros(&wr, data_start + items[i].offset - wr.at);
		if (write_item(&wr, &crew, d, &items[i], seed, w) < 0)
			break;
		progress_step(&pg, (int64_t)(wr.at - data_start), p->params[i].name);
	}
	progress_end(&pg);
	crew_stop(&crew);
	if (!d->nerrors && !wr.err) {
		w_zeros(&wr, data_start + data_len - wr.at);
		w_flush(&wr);
	}
	w_wait(&wr);
	w_stop(&wr);
	if (!d->nerrors && !wr.err && (fchmod(fd, 0644) < 0 || close(fd) < 0))
		wr.err = errno;
	else if (d->nerrors || wr.err)
		close(fd);
	fd = -1;
	if (!d->nerrors && !wr.err && rename(tmp, real ? real : path) < 0)
		wr.err = errno;
	if (wr.err)
		error_plain(d, "cannot write %s: %s", path, strerror(wr.err));
	if (d->nerrors || wr.err)
		unlink(tmp);
	else
		rc = 0;
	temp_path = NULL;
	catch_signals(0);
out:
	free(wr.buf);
	buf_free(&meta.b);
	free(tmp);
	free(real);
	free(items);
	if (w)
		weights_close(w);
	return rc;
}

/* dispatch.c - model contexts: the workspace, the dispatch table through which
 * every region call runs, call counting, NESTRT_PROFILE=1 and =2 profiles, run-time
 * errors raised by compiled code. */
#include "internal.h"

#include <sys/mman.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Compiled code addresses the public fields by offset (nestrt.h lists them). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(offsetof(nestrt_ctx, params) == 0, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, slots) == 8, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, nslots) == 16, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, calls) == 24, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, nanos) == 32, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, profile) == 40, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, model) == 48, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, ws) == 56, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, ws_size) == 64, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, err_code) == 72, "nestrt_ctx layout");
_Static_assert(offsetof(nestrt_ctx, err_message) == 76, "nestrt_ctx layout");
_Static_assert(sizeof(nestrt_ctx) == 336, "nestrt_ctx layout");
#endif

#define WS_ALIGN 64

/* The context with the runtime's own fields (internal.h). pub comes first, so a
 * nestrt_ctx * is a Ctx *. */
typedef nestrt__ctx Ctx;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static Ctx *live;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

/* How deep this thread is in nestrt_call, so nested calls are not counted
 * twice in the total. */
static _Thread_local int call_depth;

/* Workspaces: a large one is mapped, zero pages that take memory only where
 * a call touches them (an instance whose entries take prompts of up to
 * CTX tokens does not hold their buffers until a call needs them); a small
 * one comes from the heap. Either way it starts zeroed. One of 2 MiB or more
 * is mapped in huge pages (nestrt__map_huge): GPT-2 small's first call took
 * 1,600 faults of 4 KiB pages in it, about 30 ms on a virtual machine. */
#define WS_MAP_MIN ((size_t)1 << 20)
#define WS_HUGE ((size_t)2 << 20)
/* Above this, 4 KiB pages again: a 7B model's prefill workspace (1.6 GB, for
 * prompts up to 4096 tokens) was touched where each tensor starts by a
 * 5-token prompt, and each touch took a 2 MiB page: 1.5 GB held for nothing */
#define WS_HUGE_MAX ((size_t)512 << 20)

/* the length nestrt__map_huge maps for a workspace of alloc bytes */
static size_t ws_mapped(size_t alloc)
{
	return alloc >= WS_HUGE && alloc <= WS_HUGE_MAX ? (alloc + WS_HUGE - 1) / WS_HUGE * WS_HUGE : alloc;
}

static size_t ws_bytes(size_t ws)
{
	return ws ? (ws + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN : WS_ALIGN;
}

static char *ws_alloc(size_t alloc)
{
	if (alloc >= WS_HUGE && alloc <= WS_HUGE_MAX) {
		size_t len = alloc;
		void *p = nestrt__map_huge(&len);
		if (p && len != ws_mapped(alloc))
			abort(); /* ws_free would unmap another length */
		return p;
	}
	if (alloc >= WS_MAP_MIN) {
		void *p = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	char *p = aligned_alloc(WS_ALIGN, alloc);
	if (p)
		memset(p, 0, alloc);
	return p;
}

static void ws_free(char *p, size_t alloc)
{
	if (p && alloc >= WS_MAP_MIN)
		munmap(p, ws_mapped(alloc));
	else
		free(p);
}

static uint64_t now_nanos(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ profile */

static int digits(uint64_t v)
{
	int n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

typedef struct Out {
	char *s;
	size_t len, cap;
} Out;

static void out_printf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(Out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !o->s)
		return;
	if (o->len + (size_t)n + 1 > o->cap) {
		size_t nc = (o->len + (size_t)n + 1) * 2;
		char *ns = realloc(o->s, nc);
		if (!ns) {
			free(o->s);
			o->s = NULL;
			return;
		}
		o->s = ns;
		o->cap = nc;
	}
	va_start(ap, fmt);
	vsnprintf(o->s + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	o->len += (size_t)n;
}

/* ------------------------------------------------------------ kernels */

/* Per-kernel counters of a context (NESTRT_PROFILE=2), open-addressed by the
 * descriptor's address: claimed with a compare-and-swap, so any number of
 * threads add to them without a lock. */
#define KSTATS 8192 /* kernel sites; a model has hundreds at most */
struct nestrt__kstat {
	const nestrt_kernel_desc *k;
	uint64_t nanos, calls;
	uint64_t bytes;     /* of the weights it read (nestrt_kprof_end_read) */
	int fmt;            /* their format + 1, or 0 */
};

uint64_t nestrt_kprof_begin(nestrt_ctx *x)
{
	(void)x;
	return now_nanos();
}

static void kprof_add(nestrt_ctx *x, const nestrt_kernel_desc *k, uint64_t t0, int64_t bytes, int fmt);

void nestrt_kprof_end(nestrt_ctx *x, const nestrt_kernel_desc *k, uint64_t t0)
{
	kprof_add(x, k, t0, 0, -1);
}

void nestrt_kprof_end_read(nestrt_ctx *x, const nestrt_kernel_desc *k, uint64_t t0, int64_t bytes, int format)
{
	kprof_add(x, k, t0, bytes, format);
}

static void kprof_add(nestrt_ctx *x, const nestrt_kernel_desc *k, uint64_t t0, int64_t bytes, int fmt)
{
	uint64_t dt = now_nanos() - t0;
	Ctx *c = (Ctx *)x;
	if (c->parent)
		c = c->parent;
	if (!c->kstats)
		return;
	size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15u % KSTATS;
	for (size_t i = 0; i < KSTATS; i++, h = (h + 1) % KSTATS) {
		struct nestrt__kstat *e = &c->kstats[h];
		const nestrt_kernel_desc *cur = __atomic_load_n(&e->k, __ATOMIC_ACQUIRE);
		if (!cur && __atomic_compare_exchange_n(&e->k, &cur, k, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			cur = k;
		if (cur == k) {
			__atomic_fetch_add(&e->nanos, dt, __ATOMIC_RELAXED);
			__atomic_fetch_add(&e->calls, 1, __ATOMIC_RELAXED);
			if (bytes > 0) {
				__atomic_fetch_add(&e->bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
				__atomic_store_n(&e->fmt, fmt + 1, __ATOMIC_RELAXED);
			}
			return;
		}
	}
	__atomic_fetch_add(&c->kstats_lost, 1, __ATOMIC_RELAXED);
}

static int by_time(const void *a, const void *b)
{
	const struct nestrt__kstat *x = a, *y = b;
	return x->nanos < y->nanos ? 1 : x->nanos > y->nanos ? -1 : 0;
}

/* The kernels of slot `slot` (or, when slot < 0, of entry point `owner`),
 * slowest first, then their sum against the variant's own time (own < 0: an
 * entry point, whose time is not measured). */
static void print_kernels(Ctx *c, Out *o, int slot, const char *owner, double own_ms)
{
	struct nestrt__kstat *v = malloc(KSTATS * sizeof *v);
	if (!v)
		return;
	int n = 0, opw = 0, shw = 0, ww = 0;
	for (int i = 0; i < KSTATS; i++) {
		const nestrt_kernel_desc *k = __atomic_load_n(&c->kstats[i].k, __ATOMIC_ACQUIRE);
		if (!k || k->slot != slot || (slot < 0 && strcmp(k->owner ? k->owner : "", owner) != 0))
			continue;
		v[n].k = k;
		v[n].nanos = __atomic_load_n(&c->kstats[i].nanos, __ATOMIC_RELAXED);
		v[n].calls = __atomic_load_n(&c->kstats[i].calls, __ATOMIC_RELAXED);
		v[n].bytes = __atomic_load_n(&c->kstats[i].bytes, __ATOMIC_RELAXED);
		v[n].fmt = __atomic_load_n(&c->kstats[i].fmt, __ATOMIC_RELAXED);
		int a = (int)strlen(k->op), b = (int)strlen(k->shape), w = (int)strlen(k->where);
		opw = a > opw ? a : opw;
		shw = b > shw ? b : shw;
		ww = w > ww ? w : ww;
		n++;
	}
	qsort(v, (size_t)n, sizeof *v, by_time);
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		char rate[32] = "-";
		if (v[i].k->flops > 0 && v[i].nanos > 0)
			snprintf(rate, sizeof rate, "%.1f", v[i].k->flops * (double)v[i].calls / (double)v[i].nanos);
		/* a weight's bytes as the instance holds them, read per call, and how fast */
		char read[96] = "";
		if (v[i].bytes > 0 && v[i].calls > 0) {
			const char *fn = v[i].fmt > 0 ? nestrt_format_name(v[i].fmt - 1) : NULL;
			double per = (double)v[i].bytes / (double)v[i].calls;
			snprintf(read, sizeof read, "  %s weights %.*f %s a call, %.1f GB/s", fn ? fn : "?", per < 1e6 ? 1 : 2,
			         per < 1e6 ? per / 1e3 : per / 1e6, per < 1e6 ? "KB" : "MB",
			         v[i].nanos > 0 ? (double)v[i].bytes / (double)v[i].nanos : 0.0);
		}
		out_printf(o, "    %-*s %-*s  %-*s  %9.3f ms  %7s GFLOP/s  (%llu calls)%s\n", opw, v[i].k->op, shw,
		           v[i].k->shape, ww, v[i].k->where, (double)v[i].nanos / 1e6, rate,
		           (unsigned long long)v[i].calls, read);
		sum += v[i].nanos;
	}
	if (own_ms < 0)
		out_printf(o, "    kernels %.3f ms\n", (double)sum / 1e6);
	else
		out_printf(o, "    kernels %.3f ms of %.3f ms (%.1f%%)\n", (double)sum / 1e6, own_ms,
		           own_ms > 0 ? (double)sum / 1e6 / own_ms * 100 : 0.0);
	free(v);
}

/* The entry points that ran kernels, each once, in table order of first sight. */
static void print_entry_kernels(Ctx *c, Out *o)
{
	for (int i = 0; i < KSTATS; i++) {
		const nestrt_kernel_desc *k = __atomic_load_n(&c->kstats[i].k, __ATOMIC_ACQUIRE);
		if (!k || k->slot >= 0)
			continue;
		const char *owner = k->owner ? k->owner : "";
		int seen = 0;
		for (int j = 0; j < i && !seen; j++) {
			const nestrt_kernel_desc *p = __atomic_load_n(&c->kstats[j].k, __ATOMIC_ACQUIRE);
			seen = p && p->slot < 0 && strcmp(p->owner ? p->owner : "", owner) == 0;
		}
		if (seen)
			continue;
		out_printf(o, "  %s (entry point)\n", owner);
		print_kernels(c, o, -1, owner, -1);
	}
	uint64_t lost = __atomic_load_n(&c->kstats_lost, __ATOMIC_RELAXED);
	if (lost)
		out_printf(o, "  (%llu kernel calls not counted: more than %d kernels)\n", (unsigned long long)lost,
		           KSTATS);
}

/* Write the profile to stderr in one piece. */
static void print_profile(Ctx *c)
{
	nestrt_ctx *x = &c->pub;
	uint64_t total_calls = 0;
	int namew = 16;
	for (int i = 0; i < x->nslots; i++) {
		uint64_t n = __atomic_load_n(&x->calls[i], __ATOMIC_RELAXED);
		total_calls += n;
		const char *name = x->slots[i].name ? x->slots[i].name : "?";
		int len = (int)strlen(name);
		if (len > namew)
			namew = len;
	}
	uint64_t top = __atomic_load_n(&c->top_nanos, __ATOMIC_RELAXED);
	int countw = digits(total_calls);
	int timew = snprintf(NULL, 0, "%.3f", (double)top / 1e6);
	for (int i = 0; i < x->nslots; i++) {
		int w = snprintf(NULL, 0, "%.3f", (double)__atomic_load_n(&x->nanos[i], __ATOMIC_RELAXED) / 1e6);
		if (w > timew)
			timew = w;
	}
	if (timew < 9)
		timew = 9;
	Out o = {malloc(256), 0, 256};
	out_printf(&o, "nestrt profile: %s\n", x->model ? x->model : "?");
	for (int i = 0; i < x->nslots; i++) {
		double ms = (double)__atomic_load_n(&x->nanos[i], __ATOMIC_RELAXED) / 1e6;
		out_printf(&o, "  %-*s %*llu calls %*.3f ms\n", namew, x->slots[i].name ? x->slots[i].name : "?",
		           countw, (unsigned long long)__atomic_load_n(&x->calls[i], __ATOMIC_RELAXED), timew, ms);
		if (c->kstats)
			print_kernels(c, &o, i, NULL, ms);
	}
	if (c->kstats)
		print_entry_kernels(c, &o);
	out_printf(&o, "  %-*s %*llu calls %*.3f ms\n", namew, "total", countw,
	           (unsigned long long)total_calls, timew, (double)top / 1e6);
	if (o.s) {
		fputs(o.s, stderr);
		fflush(stderr);
		free(o.s);
	}
}

static void print_live_at_exit(void)
{
	pthread_mutex_lock(&live_lock);
	for (Ctx *c = live; c; c = c->next)
		if (!c->printed) {
			c->printed = 1;
			print_profile(c);
		}
	pthread_mutex_unlock(&live_lock);
}

static void register_atexit(void)
{
	atexit(print_live_at_exit);
}

/* ------------------------------------------------------------ contexts */

nestrt_ctx *nestrt_ctx_new(const char *model, const nestrt_slot *slots, int nslots, int nparams,
                           size_t ws_size, nestrt_error *err)
{
	if (nslots < 0 || nparams < 0 || (nslots > 0 && !slots)) {
		nestrt__seterr(err, "nestrt_ctx_new: invalid arguments");
		return NULL;
	}
	if (ws_size > SIZE_MAX - WS_ALIGN) {
		nestrt__seterr(err, "%s: cannot allocate a workspace of %zu bytes", model ? model : "model",
		               ws_size);
		return NULL;
	}
	Ctx *c = calloc(1, sizeof *c);
	if (!c) {
		nestrt__seterr(err, "%s: out of memory", model ? model : "model");
		return NULL;
	}
	nestrt_ctx *x = &c->pub;
	x->model = model;
	x->slots = slots;
	x->nslots = nslots;
	x->params = calloc(nparams ? (size_t)nparams : 1, sizeof *x->params);
	x->calls = calloc(nslots ? (size_t)nslots : 1, sizeof *x->calls);
	x->nanos = calloc(nslots ? (size_t)nslots : 1, sizeof *x->nanos);
	if (!x->params || !x->calls || !x->nanos) {
		nestrt__seterr(err, "%s: out of memory", model ? model : "model");
		goto fail;
	}
	/* Rounded up to the alignment, as aligned_alloc requires; at least one line. */
	size_t alloc = ws_bytes(ws_size);
	x->ws = ws_alloc(alloc);
	if (!x->ws) {
		nestrt__seterr(err, "%s: out of memory allocating a workspace of %zu bytes", model ? model : "model", alloc);
		goto fail;
	}
	x->ws_size = ws_size;
	const char *env = getenv("NESTRT_PROFILE");
	x->profile = env && strcmp(env, "1") == 0 ? 1 : env && strcmp(env, "2") == 0 ? 2 : 0;
	if (x->profile == 2 && !(c->kstats = calloc(KSTATS, sizeof *c->kstats)))
		x->profile = 1; /* no memory for the kernels: the variants' profile still works */
	if (x->profile) {
		pthread_once(&atexit_once, register_atexit);
		pthread_mutex_lock(&live_lock);
		c->next = live;
		if (live)
			live->prev = c;
		live = c;
		pthread_mutex_unlock(&live_lock);
	}
	return x;
fail:
	nestrt__packs_free(c->packs);
	free(x->params);
	free(x->calls);
	free(x->nanos);
	free(c);
	return NULL;
}

void nestrt_ctx_free(nestrt_ctx *x)
{
	if (!x)
		return;
	Ctx *c = (Ctx *)x;
	if (x->profile) {
		pthread_mutex_lock(&live_lock);
		if (c->prev)
			c->prev->next = c->next;
		else
			live = c->next;
		if (c->next)
			c->next->prev = c->prev;
		int print = !c->printed;
		c->printed = 1;
		/* Printed under the lock: profiles of contexts freed at once do not interleave. */
		if (print)
			print_profile(c);
		pthread_mutex_unlock(&live_lock);
	}
	nestrt__packs_free(c->packs);
	free(x->params);
	free(x->calls);
	free(x->nanos);
	ws_free(x->ws, ws_bytes(x->ws_size));
	free(c->kstats);
	free(c);
}

nestrt_ctx *nestrt__ctx_clone(nestrt_ctx *parent, nestrt_error *err)
{
	Ctx *c = calloc(1, sizeof *c);
	size_t ws = parent->ws_size, alloc = ws_bytes(ws);
	char *mem = c ? ws_alloc(alloc) : NULL;
	if (!mem) {
		free(c);
		nestrt__seterr(err, "%s: out of memory allocating a workspace of %zu bytes",
		               parent->model ? parent->model : "model", alloc);
		return NULL;
	}
	/* the same params, table and counters; a workspace and error of its own */
	c->pub.params = parent->params;
	c->pub.slots = parent->slots;
	c->pub.nslots = parent->nslots;
	c->pub.calls = parent->calls;
	c->pub.nanos = parent->nanos;
	c->pub.profile = parent->profile;
	c->pub.model = parent->model;
	c->pub.ws = mem;
	c->pub.ws_size = ws;
	c->parent = (Ctx *)parent;
	return &c->pub;
}

void nestrt__ctx_clone_free(nestrt_ctx *x)
{
	if (!x)
		return;
	ws_free(x->ws, ws_bytes(x->ws_size));
	free(x);
}

void nestrt__ctx_set_params(nestrt_ctx *x, const nestrt_param *params, int nparams)
{
	((Ctx *)x)->ptab = params;
	((Ctx *)x)->nptab = nparams;
}

/* ------------------------------------------------------------ calls */

int nestrt_call(nestrt_ctx *x, int slot, void **bufs, const int64_t *dims, char *ws)
{
	if (slot < 0 || slot >= x->nslots || !x->slots[slot].fn) {
		char m[96];
		snprintf(m, sizeof m, slot < 0 || slot >= x->nslots ? "dispatch slot %d out of range [0, %d)"
		                                                    : "dispatch slot %d has no function",
		         slot, x->nslots);
		return nestrt_fail(x, m);
	}
	__atomic_fetch_add(&x->calls[slot], 1, __ATOMIC_RELAXED);
	if (!x->profile)
		return x->slots[slot].fn(x, bufs, dims, ws);
	uint64_t t0 = now_nanos();
	call_depth++;
	int r = x->slots[slot].fn(x, bufs, dims, ws);
	call_depth--;
	uint64_t dt = now_nanos() - t0;
	__atomic_fetch_add(&x->nanos[slot], dt, __ATOMIC_RELAXED);
	if (call_depth == 0) {
		Ctx *c = (Ctx *)x;
		__atomic_fetch_add(&(c->parent ? c->parent : c)->top_nanos, dt, __ATOMIC_RELAXED);
	}
	return r;
}

int nestrt_fail(nestrt_ctx *x, const char *message)
{
	int zero = 0;
	/* The first error wins; its message is written by the thread that won. */
	if (__atomic_compare_exchange_n(&x->err_code, &zero, NESTRT_ERR_RUNTIME, 0, __ATOMIC_ACQ_REL,
	                                __ATOMIC_ACQUIRE))
		snprintf(x->err_message, sizeof x->err_message, "%s", message ? message : "run-time error");
	return -1;
}

int nestrt_gather_oob(nestrt_ctx *x, int64_t index, int64_t limit)
{
	char m[128];
	snprintf(m, sizeof m, "gather index %lld out of range [0, %lld)", (long long)index, (long long)limit);
	return nestrt_fail(x, m);
}

int nestrt_gather_oob_at(nestrt_ctx *x, int64_t index, int64_t limit, const char *where)
{
	if (!where || !*where)
		return nestrt_gather_oob(x, index, limit);
	char m[256];
	snprintf(m, sizeof m, "%s: gather index %lld out of range [0, %lld)", where, (long long)index,
	         (long long)limit);
	return nestrt_fail(x, m);
}

void nestrt_clear_error(nestrt_ctx *x)
{
	__atomic_store_n(&x->err_code, 0, __ATOMIC_RELEASE);
	x->err_message[0] = 0;
}

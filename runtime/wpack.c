/* wpack.c - weights in packed form (panel.c has their layout): the
 * copies pack.c's requests ask for (made once, kept with the weights and
 * shared by every instance over them), read straight from the file into
 * their panels where they may be, their memory (huge pages), the unpacked
 * form given back when nothing reads it (the matrices nestc packed ahead of
 * time: prepacked.c), and the registry that shares embedded weights between
 * instances. weights.c reads the files. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

typedef nestrt__tensor Tensor;
typedef nestrt__wpack WPack;

/* The tensor whose bound data is p (tensor_data's answer), or NULL. */
static Tensor *tensor_at(nestrt_weights *w, const void *p)
{
	for (size_t i = 0; i < w->n; i++) {
		Tensor *t = &w->t[i];
		if (t->end > t->begin && (t->copy == p || (const void *)t->data == p))
			return t;
	}
	return NULL;
}

/* A packed copy of all of t, from which it can be restored. */
static void pack_free(WPack *p);

/* lossless: one the elements can be restored from (not in a format) */
static WPack *whole_pack(nestrt_weights *w, Tensor *t, int lossless)
{
	for (WPack *p = w->packs; p; p = p->next)
		if (p->t == t && (uint64_t)(p->k * p->n) * (uint64_t)t->st->size == t->end - t->begin &&
		    !(lossless && p->flags >> NESTRT_PACK_FMT_SHIFT))
			return p;
	return NULL;
}

/* Put a released tensor's elements back in place, from a packed copy (the
 * file is not read again: it may have changed). Under w->mu. */
static int restore(nestrt_weights *w, Tensor *t)
{
	if (!t->released)
		return 0;
	if (w->mapped) {
		t->released = 0;
		return 0; /* the pages come back from the file */
	}
	WPack *p = whole_pack(w, t, 1);
	if (!p)
		return -2; /* only in a format now: its f32 elements are gone */
	if (t->inplace) {
		/* its place holds the packed copy: the elements go to a copy */
		size_t nb = (size_t)(t->end - t->begin);
		t->copy = aligned_alloc(64, (nb + 63) / 64 * 64);
		if (!t->copy)
			return -1;
		nestrt__unpack(t->copy, p->data, p->k, p->n, p->wide, p->flags);
	} else {
		nestrt__unpack((void *)t->data, p->data, p->k, p->n, p->wide, p->flags);
	}
	t->released = 0;
	return 0;
}

/* restore's failure as a message: out of memory, or the elements are gone
 * (released after packing in a format, which cannot give them back). */
static int restore_error(nestrt_weights *w, Tensor *t, int rc, nestrt_error *err)
{
	if (rc == -2)
		return nestrt__seterr(err, "%s: tensor '%s' is held only in a weight format now (packed so for another "
		                      "model over these weights): open the weights again for this one", w->path, t->name);
	return nestrt__seterr(err, "%s: out of memory unpacking weights", w->path);
}

/* A copy in a format is made of finite elements only (no block holds a
 * NaN or an infinity, and f16 none beyond its range): else the message
 * names the tensor, the element and the format. */
static int finite_or_error(nestrt_weights *w, Tensor *t, const void *src, const nestrt__packreq *q, nestrt_error *err)
{
	const float *x = src;
	int fmt = q->flags >> NESTRT_PACK_FMT_SHIFT;
	for (int64_t i = 0; i < q->k * q->n; i++)
		if (!(x[i] - x[i] == 0.0f) || (fmt == NESTRT_FMT_F16 && (x[i] >= 65520.0f || x[i] <= -65520.0f)))
			return nestrt__seterr(err, "%s: tensor '%s': element %lld is %g, which %s cannot hold", w->path,
			                      t ? t->name : "?", (long long)i, (double)x[i], nestrt_format_name(fmt));
	return 0;
}

/* Where t's elements are (once restored). */
static const void *elements(const Tensor *t)
{
	return t->inplace ? (const void *)t->copy : (const void *)t->data;
}

int nestrt__weights_elements(nestrt_weights *w, Tensor *t, const void **elems)
{
	if (nestrt__weights_settle(w, NULL) < 0)
		return -1;
	int rc = restore(w, t);
	if (rc < 0)
		return rc; /* -2: only in a format now (restore_error) */
	*elems = elements(t);
	return 0; /* equivalent mutant [const 0 -> 1]: its one caller tests < 0 */
}

/* Param i read as it is: its elements back where they were given back or
 * packed over (packed in place: in a copy), data[i] pointing to them, and
 * its tensor marked so that no packing made later (for another instance)
 * takes their place or gives their pages back. Under w->mu. */
static int read_as_is(nestrt_weights *w, const void **data, int i, nestrt_error *err)
{
	Tensor *t = data[i] ? tensor_at(w, data[i]) : NULL;
	if (!t)
		return 0;
	int got = restore(w, t);
	if (got < 0)
		return restore_error(w, t, got, err);
	t->direct = 1;
	data[i] = t->copy ? t->copy : t->data; /* as a new bind would give it */
	return 0;
}

/* Every param read as it is (NESTRT_PREPACK=0, a model without packed
 * copies, a bind). */
int nestrt__weights_unpacked(nestrt_weights *w, const void **data, int nparams, nestrt_error *err)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->mu);
	int rc = nestrt__weights_settle(w, err);
	for (int i = 0; i < nparams && rc == 0; i++)
		rc = read_as_is(w, data, i, err);
	pthread_mutex_unlock(&w->mu);
	return rc;
}


/* Give back the pages that hold only t's bytes. Only for the file's bytes
 * (not an embedded image, not an aligned copy), and only when a packed copy
 * holds all of it. Under w->mu. */
static void release(nestrt_weights *w, Tensor *t)
{
	if (t->released || t->direct || t->copy || t->owned || !w->map || !whole_pack(w, t, 0))
		return;
	size_t pg = nestrt__page_size();
	/* equivalent mutant [const 1 -> 2]: t->data is aligned to its elements
	 * (4 or 8 bytes: an unaligned tensor has a copy, returned above), so
	 * data + pg - 2 rounds up to the same page as data + pg - 1 */
	uintptr_t b = ((uintptr_t)t->data + pg - 1) / pg * pg;
	uintptr_t e = ((uintptr_t)t->data + (size_t)(t->end - t->begin)) / pg * pg;
	if (e <= b)
		return;
	if (madvise((void *)b, e - b, MADV_DONTNEED) == 0)
		t->released = 1;
}

/* Memory for a packed copy: large ones mapped on their own and advised
 * into huge pages (a few hundred page faults for GPT-2's 475 MB instead of
 * 120,000), the rest from malloc. */
#define PACK_MAP_MIN ((size_t)1 << 21)
static int pack_alloc(WPack *p, size_t bytes)
{
	if (bytes >= PACK_MAP_MIN) {
		void *m = nestrt__map_filled(&bytes);
		if (!m)
			return -1;
		p->data = m;
		p->bytes = bytes;
		return 0;
	}
	p->data = aligned_alloc(64, bytes);
	p->bytes = 0;
	return p->data ? 0 : -1;
}

static void pack_free(WPack *p)
{
	if (p->inplace)
		; /* its tensor's room, freed with the weights */
	else if (p->bytes)
		munmap(p->data, p->bytes);
	else
		free(p->data);
	free(p);
}

/* Packing on the pool, in tasks of about PACK_TASK bytes of the source. A
 * transposed copy reads Bt's rows in order, panel after panel: when the
 * unpacked form goes anyway (release), each task gives back the pages it
 * has read, so that the peak is the weights plus a few tasks' worth, not
 * plus the whole copy (GPT-2's tied embedding is 154 MB). */
#define PACK_TASK ((size_t)1 << 20)
#define NSCRATCH 64
typedef struct PackJob {
	void *dst;
	const void *src;
	int64_t k, n, wide;
	int flags;
	int64_t per;        /* panels per task */
	int give_back;      /* madvise the rows read away */
	int inplace;        /* transposed, dst == src: each task moves its rows aside first */
	size_t scratch_len;
	unsigned char *scratch[NSCRATCH];
	size_t scratch_map[NSCRATCH];  /* each one's mapped length */
	int busy[NSCRATCH];
	int oom;
	int fd;             /* >= 0: the rows come from the file, at foff, not from dst */
	uint64_t foff;
	int err;            /* errno of a failed read, or -1 for a short file */
	Tensor *t;          /* from the file: the tensor packed in its place */
} PackJob;

/* preadv of all the bytes iov asks for (it is advanced as they come). */
static int preadv_all(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t r = preadv(fd, iov, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : -1;
		off += (uint64_t)r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

static void read_failed(PackJob *j, int e)
{
	int zero = 0;
	__atomic_compare_exchange_n(&j->err, &zero, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* Rows [r0, r1) of a plain matrix read from the file straight into their
 * packed places: row i's slice of panel p is wide elements at
 * (p * k + i) * wide; the kernel copies, nothing else touches the bytes
 * (the room past the last column is fresh memory: zeros). */
#define NIOV 1024
static void scatter_rows(PackJob *j, int64_t r0, int64_t r1)
{
	size_t es = j->flags & NESTRT_PACK_F64 ? 8 : 4;
	int64_t np = (j->n + j->wide - 1) / j->wide;
	struct iovec iov[NIOV];
	int n = 0;
	uint64_t off = j->foff + (uint64_t)(r0 * j->n) * es;
	for (int64_t i = r0; i < r1; i++)
		for (int64_t p = 0; p < np; p++) {
			int64_t cols = j->n - p * j->wide < j->wide ? j->n - p * j->wide : j->wide;
			iov[n].iov_base = (char *)j->dst + (size_t)((p * j->k + i) * j->wide) * es;
			iov[n].iov_len = (size_t)cols * es;
			if (++n == NIOV || (i == r1 - 1 && p == np - 1)) {
				size_t len = 0;
				for (int q = 0; q < n; q++)
					len += iov[q].iov_len;
				int e = preadv_all(j->fd, iov, n, off);
				if (e) {
					read_failed(j, e);
					return;
				}
				off += len;
				n = 0;
			}
		}
}

/* A task's transposed panels p0..p1-1 where their rows were: a panel takes
 * exactly the bytes of the wide rows it is made of (the last one, short of
 * rows, runs into the room after the tensor), so tasks never meet. */
/* A scratch buffer of the job's for this task (busy until it is given
 * back), or -1 out of memory (noted in the job). One huge page: in 4 KiB
 * pages each buffer's first use took 256 page faults. */
static int claim_scratch(PackJob *j)
{
	int s = 0;
	for (;; s = (s + 1) % NSCRATCH) {
		int zero = 0;
		if (__atomic_compare_exchange_n(&j->busy[s], &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
	}
	if (!j->scratch[s]) {
		size_t len = j->scratch_len < PACK_MAP_MIN ? PACK_MAP_MIN : j->scratch_len;
		if ((j->scratch[s] = nestrt__map_huge(&len)))
			j->scratch_map[s] = len;
	}
	if (!j->scratch[s]) {
		__atomic_store_n(&j->oom, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&j->busy[s], 0, __ATOMIC_RELEASE);
		return -1;
	}
	return s;
}

static void pack_in_place(PackJob *j, int64_t p0, int64_t p1)
{
	int s = claim_scratch(j);
	if (s < 0)
		return;
	{
		size_t es = j->flags & NESTRT_PACK_F64 ? 8 : 4;
		int64_t r0 = p0 * j->wide, r1 = p1 * j->wide < j->n ? p1 * j->wide : j->n;
		char *at = (char *)j->dst + (size_t)(r0 * j->k) * es;
		size_t len = (size_t)((r1 - r0) * j->k) * es;
		int e = 0;
		if (j->fd >= 0)
			e = nestrt__pread_all(j->fd, j->scratch[s], len, j->foff + (uint64_t)(r0 * j->k) * es);
		else
			memcpy(j->scratch[s], at, len);
		if (e)
			read_failed(j, e);
		else
			nestrt__pack_panels(at, j->scratch[s], j->k, j->n - r0, j->wide, j->flags, 0, p1 - p0);
	}
	__atomic_store_n(&j->busy[s], 0, __ATOMIC_RELEASE);
}

static void pack_task(void *env, int64_t begin, int64_t end)
{
	PackJob *j = env;
	int64_t np = (j->n + j->wide - 1) / j->wide;
	for (int64_t t = begin; t < end; t++) {
		int64_t p0 = t * j->per, p1 = p0 + j->per < np ? p0 + j->per : np;
		if (j->inplace && !(j->flags & NESTRT_PACK_TRANS)) {
			/* from the file: tasks of rows (per rows each);
			 * equivalent mutant [cmp < -> <=]: where r0 + per is k, both arms are k */
			int64_t r0 = t * j->per, r1 = r0 + j->per < j->k ? r0 + j->per : j->k;
			scatter_rows(j, r0, r1);
			continue;
		}
		if (j->inplace) {
			pack_in_place(j, p0, p1);
			continue;
		}
		nestrt__pack_panels(j->dst, j->src, j->k, j->n, j->wide, j->flags, p0, p1);
		if (j->give_back) {
			size_t es = j->flags & NESTRT_PACK_F64 ? 8 : 4, pg = nestrt__page_size();
			/* equivalent mutant [cmp < -> <=]: where p1 * wide is n, both arms are n */
			int64_t r1 = p1 * j->wide < j->n ? p1 * j->wide : j->n;
			uintptr_t a = (uintptr_t)j->src + (size_t)(p0 * j->wide * j->k) * es;
			/* equivalent mutant [arith * -> /]: fewer rows given back while
			 * packing; release() gives back all of the tensor's pages once it is
			 * packed (nestrt__weights_pack): the same pages, later */
			uintptr_t e = (uintptr_t)j->src + (size_t)(r1 * j->k) * es;
			a = (a + pg - 1) / pg * pg;
			e = e / pg * pg;
			if (e > a)
				madvise((void *)a, e - a, MADV_DONTNEED);
		}
	}
}

/* memcpy on the pool, in pieces of PACK_TASK bytes. */
typedef struct CopyJob {
	unsigned char *dst;
	const unsigned char *src;
	size_t len;
} CopyJob;

static void copy_task(void *env, int64_t begin, int64_t end)
{
	CopyJob *j = env;
	for (int64_t t = begin; t < end; t++) {
		size_t off = (size_t)t * PACK_TASK;
		memcpy(j->dst + off, j->src + off, j->len - off < PACK_TASK ? j->len - off : PACK_TASK);
	}
}

static void copy_parallel(void *dst, const void *src, size_t len)
{
	CopyJob j = {dst, src, len};
	/* equivalent mutant [const 1 -> 2]: its one caller copies a matrix of
	 * f32 or f64 elements, never 1 byte past a multiple of PACK_TASK, where
	 * the count of tasks would differ */
	nestrt_parallel_for((int64_t)((len + PACK_TASK - 1) / PACK_TASK), copy_task, &j);
}

/* Is req[i] the only request for t, of all of it, with room to pack it
 * where it is (read from a file, read by no instance as it is)? */
static int can_pack_in_place(nestrt_weights *w, Tensor *t, const void **data, nestrt__packreq *req, int nreq, int i,
                             size_t bytes)
{
	nestrt__packreq *q = &req[i];
	size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
	if (q->flags >> NESTRT_PACK_FMT_SHIFT)
		return 0; /* smaller than the elements, and made from all of them */
	if (!t || t->direct || t->copy || t->inplace || t->released || w->mapped || bytes > t->room ||
	    (uint64_t)(q->k * q->n) * es != t->end - t->begin)
		return 0;
	for (int r = 0; r < nreq; r++)
		if (r != i && tensor_at(w, data[req[r].param]) == t)
			return 0;
	return 1;
}

static void scratch_free(PackJob *j)
{
	for (int s = 0; s < NSCRATCH; s++)
		if (j->scratch[s])
			munmap(j->scratch[s], j->scratch_map[s]);
}

/* Several jobs in one loop on the pool: task t is job v[i]'s task
 * t - first[i]. One loop for all of a file's matrices, not one each: at
 * the end of each loop a thread waits for the other's last task. */
typedef struct PackJobs {
	PackJob **v;
	int64_t *first;     /* n + 1 of them */
	int n;
} PackJobs;

static void pack_jobs_task(void *env, int64_t begin, int64_t end)
{
	PackJobs *js = env;
	for (int64_t t = begin; t < end; t++) {
		int lo = 0, hi = js->n - 1;
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;
			if (js->first[mid] <= t)
				lo = mid;
			else
				hi = mid - 1;
		}
		pack_task(js->v[lo], t - js->first[lo], t - js->first[lo] + 1);
	}
}

/* A GGUF block tensor (q8_0, q4_0, q4_K, q6_K) that a build holds in that same format:
 * its panels made from the file's blocks as they are, rows of Bt read a
 * panel at a time and each block's scale and quants moved to their places
 * (nestrt.h's layout), on the pool. No f32 form of it is ever made: a 7B
 * model's 3.8 GB of q4_0 stay 3.8 GB. */
typedef struct BlockJob {
	nestrt_weights *w;
	const Tensor *t;
	unsigned char *dst;
	int64_t k, n, wide;
	int bb;             /* bytes a block */
	int err;            /* a read's errno (or -1), or ENOMEM */
	int flags;          /* the copy's (NESTRT_PACK_DOT: its layout) */
} BlockJob;

static void block_task(void *env, int64_t begin, int64_t end)
{
	BlockJob *j = env;
	int fmt = j->flags >> NESTRT_PACK_FMT_SHIFT;
	int64_t nkb = j->k / nestrt_format_block(fmt);
	/* equivalent mutant [cmp <= -> <]: nkb is at least 1, a block format's
	 * k being a positive multiple of its block (else nestrt__pack_bytes
	 * gives 0 and the request is refused before any task runs) */
	/* equivalent mutant [logic || -> &&]: none of the three holds for a job
	 * made (nkb as above; bb, a block's bytes, is 18 or more; wide > 0) */
	if (nkb <= 0 || j->bb <= 2 || j->wide <= 0)
		return;
	size_t rb = (size_t)nkb * (size_t)j->bb, exact = rb * (size_t)j->wide;
	unsigned char *rows = exact <= PTRDIFF_MAX ? malloc(exact) : NULL;
	if (!rows) {
		__atomic_store_n(&j->err, ENOMEM, __ATOMIC_RELAXED);
		return;
	}
	for (int64_t p = begin; p < end; p++) {
		int64_t r0 = p * j->wide, r1 = r0 + j->wide < j->n ? r0 + j->wide : j->n;
		int e = nestrt__gguf_rows(j->w, j->t, j->k, r0, r1, rows);
		if (e) {
			__atomic_store_n(&j->err, e, __ATOMIC_RELAXED);
			break;
		}
		unsigned char *panel = j->dst + (size_t)p * exact;
		memset(panel, 0, exact);
		for (int64_t kb = 0; kb < nkb; kb++) {
			unsigned char *row = panel + (size_t)(kb * j->wide) * (size_t)j->bb;
			for (int64_t c = 0; c < r1 - r0; c++)
				nestrt__block_to_panel(fmt, rows + (size_t)c * rb + (size_t)kb * (size_t)j->bb, row, c, j->wide, j->flags);
		}
	}
	free(rows);
}

/* Panel p of B (k x n, or Bt n x k when trans) in format fmt from 16-bit
 * elements in their declared order (f16 bits, or bf16 when bf16), through
 * nestrt__quantize_half: as format_panel, without an f32 form. Finite
 * elements (checked before). */
static void half_panel(unsigned char *panel, const uint16_t *src, int bf16, int64_t k, int64_t n, int64_t wide,
                       int64_t p, int trans, int flags)
{
	int fmt = flags >> NESTRT_PACK_FMT_SHIFT;
	int blk = nestrt_format_block(fmt), bb = nestrt_format_block_bytes(fmt);
	uint16_t x[64];
	unsigned char q[64];
	/* equivalent mutant [const]: the block path below lays out a 16-bit
	 * format's one-element blocks the same way (bb - 2 = 0 bytes past the
	 * scale), only an element at a time; no format has blocks of 0 or 2 */
	if (blk == 1) {
		for (int64_t i = 0; i < k; i++)
			for (int64_t c0 = 0; c0 < wide; c0 += 64) {
				/* equivalent mutant [arith - -> +]: matmul's panels are at
				 * most 4 vectors of 16 lanes wide, so c0 is 0 here */
				int64_t m = wide - c0 < 64 ? wide - c0 : 64;
				for (int64_t c = 0; c < m; c++) {
					int64_t col = p * wide + c0 + c;
					x[c] = col >= n ? 0 : trans ? src[col * k + i] : src[i * n + col];
				}
				nestrt__quantize_half(fmt, x, bf16, m, panel + (size_t)(i * wide + c0) * (size_t)bb, NULL);
			}
		return;
	}
	for (int64_t kb = 0; kb < k / blk; kb++) {
		unsigned char *row = panel + (size_t)(kb * wide) * (size_t)bb;
		for (int64_t c = 0; c < wide; c++) {
			int64_t col = p * wide + c;
			for (int j = 0; j < blk; j++)
				x[j] = col >= n ? 0 : trans ? src[col * k + kb * blk + j] : src[(kb * blk + j) * n + col];
			nestrt__quantize_half(fmt, x, bf16, blk, q, NULL);
			memcpy(row + 2 * c, q, 2);
			for (int j = 0; j < bb - 2; j++)
				row[2 * wide + nestrt__qbyte_at(j, c, wide, flags)] = nestrt__qbyte(q[2 + j], flags);
		}
	}
}

typedef struct HalfJob {
	const uint16_t *src;
	int bf16, trans, flags;
	unsigned char *dst;
	int64_t k, n, wide;
	size_t panel;       /* bytes a panel */
} HalfJob;

static void half_task(void *env, int64_t begin, int64_t end)
{
	HalfJob *j = env;
	for (int64_t p = begin; p < end; p++)
		half_panel(j->dst + (size_t)p * j->panel, j->src, j->bf16, j->k, j->n, j->wide, p, j->trans, j->flags);
}

/* An F16 or BF16 tensor whose every request is in a format: each copy made
 * from its 16-bit bytes (no f32 form: a 7B model's 13.5 GB of bf16 were
 * widened to 27 GB before), then its bytes given back, so that the peak is
 * the file and one tensor. 0, or -1 with err set. Under w->mu. */
static int pack_half(nestrt_weights *w, Tensor *t, const void **data, nestrt__packreq *req, int nreq, nestrt_error *err)
{
	for (int r = 0; r < nreq; r++)
		if (tensor_at(w, data[req[r].param]) == t && !(req[r].flags >> NESTRT_PACK_FMT_SHIFT))
			return 0; /* also wanted in f32: the usual way */
	int bf16 = t->stored->dtype == NESTRT_BF16;
	size_t n = (size_t)(t->end - t->begin) / 4;
	const uint16_t *src = (const uint16_t *)t->half;
	for (size_t i = 0; i < n; i++)
		if ((src[i] & (bf16 ? 0x7f80u : 0x7c00u)) == (bf16 ? 0x7f80u : 0x7c00u))
			return nestrt__seterr(err, "%s: tensor '%s': element %zu is %s, which a weight format cannot hold", w->path,
			                      t->name, i, src[i] & (bf16 ? 0x7fu : 0x3ffu) ? "nan" : "inf");
	for (int r = 0; r < nreq; r++) {
		nestrt__packreq *x = &req[r];
		if (tensor_at(w, data[x->param]) != t)
			continue;
		WPack *p = NULL;
		for (WPack *y = w->packs; y && !p; y = y->next)
			/* equivalent mutant [cond if (...) -> if (0)]: it finds none (the
			 * note below) */
			if (y->t == t && y->k == x->k && y->n == x->n && y->wide == x->wide && y->flags == x->flags)
				p = y;
		/* equivalent mutant [cond if (...) -> if (1)]: no such copy exists
		 * yet: requests are unique per param (pack.c's add_req), and a
		 * tensor comes here once (it is released below) */
		if (!p) {
			int fmt = x->flags >> NESTRT_PACK_FMT_SHIFT;
			/* equivalent mutant [swap arguments 3 and 4 of nestrt__pack_bytes swapped]: a
			 * larger size (a format's flags, 768 or more, taken for wide), of
			 * which half_task touches only the copy's pages: the same values,
			 * at most one huge page more resident */
			size_t bytes = nestrt__pack_bytes(x->k, x->n, x->wide, x->flags);
			if (x->k * x->n != (int64_t)n)
				return nestrt__seterr(err, "%s: tensor '%s': a copy of %lld x %lld of its %zu elements", w->path, t->name,
				                      (long long)x->k, (long long)x->n, n);
			p = calloc(1, sizeof *p);
			if (!p || !bytes || pack_alloc(p, bytes) < 0) {
				free(p);
				return nestrt__seterr(err, "%s: out of memory packing weights (%zu bytes)", w->path, bytes);
			}
			HalfJob j = {src, bf16, !!(x->flags & NESTRT_PACK_TRANS), x->flags, p->data, x->k, x->n, x->wide,
			             (size_t)(x->k / nestrt_format_block(fmt)) * (size_t)x->wide * (size_t)nestrt_format_block_bytes(fmt)};
			nestrt_parallel_for((x->n + x->wide - 1) / x->wide, half_task, &j);
			*p = (WPack){t, x->k, x->n, x->wide, x->flags, p->data, p->bytes, 0, w->packs};
			w->packs = p;
		}
		x->data = p->data;
	}
	/* its 16-bit bytes, when in a place of ours (read from the file): given back */
	size_t nb = (size_t)(t->end - t->begin);
	if (t->data && t->half == (const unsigned char *)t->data + nb / 2) {
		size_t pg = nestrt__page_size();
		/* equivalent mutant [const 1 -> 0]: with t->half on a page, one page
		 * fewer given back (4 KiB more resident), nothing else */
		uintptr_t b = ((uintptr_t)t->half + pg - 1) / pg * pg, e = ((uintptr_t)t->half + nb / 2) / pg * pg;
		if (e > b)
			madvise((void *)b, e - b, MADV_DONTNEED);
		t->half = NULL;
	}
	t->released = 1;
	return 0;
}

/* The requests of every tensor still in the file whose requests all ask for
 * its own block type, transposed (rows along the blocks), and that nothing
 * reads unpacked: packed from the blocks, the tensor marked read and given
 * back (its f32 place is never touched). 0, or -1 with err set. Under w->mu. */
static int pack_blocks_from_file(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq,
                                 nestrt_error *err)
{
	for (int i = 0; i < nreq; i++) {
		nestrt__packreq *q = &req[i];
		Tensor *t = tensor_at(w, data[q->param]);
		if (t && nestrt__is_half(t) && t->half && !t->widened && !t->half_bound && !t->direct && !t->released &&
		    q->flags >> NESTRT_PACK_FMT_SHIFT) {
			if (pack_half(w, t, data, req, nreq, err) < 0)
				return -1;
			continue;
		}
		if (!t || t->loaded || t->direct || !w->pending || (w->fd < 0 && !nestrt__gguf_image(w)))
			continue;
		int all = 1;
		for (int r = 0; r < nreq && all; r++) {
			nestrt__packreq *x = &req[r];
			if (tensor_at(w, data[x->param]) != t)
				continue;
			int fmt = x->flags >> NESTRT_PACK_FMT_SHIFT;
			/* ggml's type numbers */
			uint32_t want = fmt == NESTRT_FMT_Q8_0 ? 8 : fmt == NESTRT_FMT_Q4_0 ? 2 : fmt == NESTRT_FMT_Q4_K ? 12
			                : fmt == NESTRT_FMT_Q6_K ? 14 : UINT32_MAX;
			/* the file's rows along the blocks: Bt's (x @ transpose(w)), or w's
			 * columns (x @ w) in a file that holds w transposed */
			int trans = !!(x->flags & NESTRT_PACK_TRANS);
			all = want != UINT32_MAX && nestrt__gguf_type(t) == want && t->rank == 2 && trans != t->transposed &&
			      x->n == t->shape[!trans] && x->k == t->shape[trans] && x->k % nestrt_format_block(fmt) == 0;
		}
		if (!all)
			continue;
		for (int r = 0; r < nreq; r++) {
			nestrt__packreq *x = &req[r];
			if (tensor_at(w, data[x->param]) != t)
				continue;
			WPack *p = NULL;
			for (WPack *y = w->packs; y && !p; y = y->next)
				/* equivalent mutant [cond if (...) -> if (0)]: no such copy exists
				 * yet: requests are unique per param and layout (pack.c's add_req),
				 * and a tensor comes here once (loaded below) */
				if (y->t == t && y->k == x->k && y->n == x->n && y->wide == x->wide && y->flags == x->flags)
					p = y;
			if (p) {
				x->data = p->data;
				continue;
			}
			size_t bytes = nestrt__pack_bytes(x->k, x->n, x->wide, x->flags);
			p = calloc(1, sizeof *p);
			if (!p || !bytes || pack_alloc(p, bytes) < 0) {
				free(p);
				return nestrt__seterr(err, "%s: out of memory packing weights (%zu bytes)", w->path, bytes);
			}
			int fmt = x->flags >> NESTRT_PACK_FMT_SHIFT;
			BlockJob j = {w, t, p->data, x->k, x->n, x->wide, nestrt_format_block_bytes(fmt), 0, x->flags};
			nestrt_parallel_for((x->n + x->wide - 1) / x->wide, block_task, &j);
			if (j.err) {
				pack_free(p);
				return j.err == ENOMEM ? nestrt__seterr(err, "%s: out of memory packing weights", w->path)
				                       : nestrt__read_error(err, w->path, j.err, "before");
			}
			p->t = t;
			p->k = x->k;
			p->n = x->n;
			p->wide = x->wide;
			p->flags = x->flags;
			p->next = w->packs;
			w->packs = p;
			x->data = p->data;
		}
		t->loaded = 1;
		/* equivalent mutant [const 1 -> 2]: released is only tested for truth */
		t->released = 1; /* only its copies in its format hold it */
	}
	return 0;
}

/* Straight from the file into their tensors' places, packed, every request
 * that may be packed in place and is not read yet: a plain matrix row by
 * row into the panels (preadv), a transposed one a task's rows at a time
 * into scratch and from there into its panels; all in one loop. 0 (also
 * when none applies), or -1 with err set (the requests that failed stay
 * unread). Under w->mu. */
static int pack_from_file(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq, nestrt_error *err)
{
	/* equivalent mutant [const 0 -> 1]: a lone request is then packed in the
	 * same place once the file is read (nestrt__weights_pack's in-place
	 * path): the same copy and values, a read and a pass more */
	if (nreq <= 0)
		return 0;
	PackJobs js = {calloc((size_t)nreq, sizeof *js.v), calloc((size_t)nreq + 1, sizeof *js.first), 0};
	int rc = 0;
	if (!js.v || !js.first)
		rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
	for (int i = 0; i < nreq && rc == 0; i++) {
		nestrt__packreq *q = &req[i];
		Tensor *t = tensor_at(w, data[q->param]);
		size_t bytes = nestrt__pack_bytes(q->k, q->n, q->wide, q->flags);
		/* equivalent mutant [cond if (...) -> if (1)]: then nothing is packed
		 * as it is read: each weight is read into its place and packed there
		 * by nestrt__weights_pack's loop, the same panels at the same peak
		 * memory (6.3 MB for test_runtime's 4 MiB weight, measured): only
		 * the reading differs */
		if (!t || t->loaded || t->stored || !bytes || !can_pack_in_place(w, t, data, req, nreq, i, bytes))
			continue;
		size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
		PackJob *j = calloc(1, sizeof *j);
		if (!j) {
			rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
			break;
		}
		*j = (PackJob){.dst = (void *)t->data, .k = q->k, .n = q->n, .wide = q->wide, .flags = q->flags,
		               .inplace = 1, .fd = w->fd, .foff = w->data_off + t->begin, .t = t};
		int64_t ntasks;
		if (q->flags & NESTRT_PACK_TRANS) {
			int64_t per = (int64_t)(PACK_TASK / ((size_t)(q->k * q->wide) * es));
			j->per = per < 1 ? 1 : per;
			j->scratch_len = (size_t)(j->per * q->k * q->wide) * es;
			ntasks = ((q->n + q->wide - 1) / q->wide + j->per - 1) / j->per;
		} else {
			int64_t per = (int64_t)(PACK_TASK / ((size_t)q->n * es));
			j->per = per < 1 ? 1 : per;
			ntasks = (q->k + j->per - 1) / j->per;
		}
		js.v[js.n] = j;
		js.first[js.n + 1] = js.first[js.n] + ntasks;
		js.n++;
	}
	if (rc == 0 && js.n)
		nestrt_parallel_for(js.first[js.n], pack_jobs_task, &js);
	for (int i = 0; i < js.n; i++) {
		PackJob *j = js.v[i];
		Tensor *t = j->t;
		WPack *p = rc == 0 && !j->oom && !j->err ? calloc(1, sizeof *p) : NULL;
		if (p) {
			*p = (WPack){t, j->k, j->n, j->wide, j->flags, (void *)t->data, 0, 1, w->packs};
			w->packs = p;
			t->loaded = 1;
			t->inplace = 1;
			/* equivalent mutant [const 1 -> 2]: released is only tested for truth */
			t->released = 1;
		} else if (rc == 0) {
			/* left unread: read again (whole) when asked again */
			if (j->oom || !j->err)
				rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
			else
				rc = nestrt__read_error(err, w->path, j->err, "before");
		}
		scratch_free(j);
		free(j);
	}
	free(js.v);
	free(js.first);
	return rc;
}

int nestrt__weights_pack(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq,
                         const unsigned char *direct, int nparams, nestrt_error *err)
{
	int rc = 0;
	void *whole = NULL;    /* a plain matrix packed in place: its elements, set aside */
	size_t whole_len = 0;
	pthread_mutex_lock(&w->mu);
	/* weights read unpacked: back in place first, and never dropped */
	for (int i = 0; i < nparams && rc == 0; i++)
		if (direct[i])
			rc = read_as_is(w, data, i, err);
	/* not read yet: a weight packed where it goes is read from the file
	 * right into its packed form, then the rest is read */
	if (rc == 0)
		rc = pack_blocks_from_file(w, data, req, nreq, err);
	if (rc == 0 && w->pending)
		rc = pack_from_file(w, data, req, nreq, err);
	if (rc == 0)
		rc = nestrt__weights_settle(w, err);
	for (int i = 0; i < nreq && rc == 0; i++) {
		nestrt__packreq *q = &req[i];
		Tensor *t = tensor_at(w, data[q->param]);
		WPack *p = NULL;
		for (WPack *x = w->packs; x && t && !p; x = x->next)
			if (x->t == t && x->k == q->k && x->n == q->n && x->wide == q->wide && x->flags == q->flags)
				p = x;
		if (!p) {
			size_t bytes = nestrt__pack_bytes(q->k, q->n, q->wide, q->flags);
			size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
			int64_t np = (q->n + q->wide - 1) / q->wide;
			int64_t per = (int64_t)(PACK_TASK / ((size_t)(q->k * q->wide) * es));
			per = per < 1 ? 1 : per;
			int inplace = bytes && can_pack_in_place(w, t, data, req, nreq, i, bytes);
			p = calloc(1, sizeof *p);
			if (!p || !bytes || (!inplace && pack_alloc(p, bytes) < 0)) {
				free(p);
				rc = nestrt__seterr(err, "%s: out of memory packing weights (%zu bytes)", w->path, bytes);
				break;
			}
			/* equivalent mutant [const 0 -> (-1)]: t is not NULL here: a
			 * param's data is one of w's tensors' (its place or its copy) but
			 * for an empty one, which has no bytes to pack (refused above) */
			int got = t ? restore(w, t) : 0;
			if (got < 0) {
				pack_free(p); /* and the memory pack_alloc gave it */
				rc = restore_error(w, t, got, err);
				break;
			}
			if (q->flags >> NESTRT_PACK_FMT_SHIFT && (rc = finite_or_error(w, t, t ? elements(t) : data[q->param], q, err)) < 0) {
				pack_free(p);
				break;
			}
			const void *src = t ? elements(t) : data[q->param];
			/* equivalent mutant [const 1 -> 2]: room for two jobs, zeroed: the same job */
			PackJob *j = calloc(1, sizeof *j);
			if (!j) {
				pack_free(p);
				rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
				break;
			}
			*j = (PackJob){.dst = p->data, .src = src, .k = q->k, .n = q->n, .wide = q->wide, .flags = q->flags,
			               .per = per, .fd = -1};
			/* equivalent mutant [cond if (...) -> if (0)]: the branch below packs
			 * a transposed matrix in place too, from a copy of all of it: the
			 * same panels, a tensor's size more memory meanwhile */
			if (inplace && (q->flags & NESTRT_PACK_TRANS)) {
				/* panel by panel, each task's rows set aside first */
				j->dst = (void *)t->data;
				j->inplace = 1;
				j->scratch_len = (size_t)(per * q->k * q->wide) * es;
			} else if (inplace) {
				/* all of it set aside, then packed from there */
				size_t nb = (size_t)(t->end - t->begin);
				if (nb > whole_len) {
					free(whole);
					whole_len = 0; /* equivalent mutant [const 0 -> 1]: not read once malloc fails (break) */
					if (!(whole = malloc(nb))) {
						free(j);
						free(p);
						rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
						break;
					}
					whole_len = nb;
				}
				copy_parallel(whole, t->data, nb);
				j->src = whole;
				j->dst = (void *)t->data;
			} else if (t && (q->flags & NESTRT_PACK_TRANS) && !t->direct && !t->copy && !t->owned && w->map &&
			           (uint64_t)(q->k * q->n) * es == t->end - t->begin) {
				/* the rows read can go as they are read when nothing else
				 * will want them */
				j->give_back = 1;
				/* equivalent mutant [const 0 -> (-1)]: r <= i holds at -1, so
				 * req[-1] is never read and give_back stays as it is */
				for (int r = 0; r < nreq; r++)
					j->give_back &= r <= i || tensor_at(w, data[req[r].param]) != t;
			}
			nestrt_parallel_for((np + per - 1) / per, pack_task, j);
			int oom = j->oom, give_back = j->give_back;
			scratch_free(j);
			free(j);
			if (oom) {
				/* in place, a task without scratch left its rows as they were:
				 * the tensor is in neither form (cannot happen but for malloc) */
				free(p);
				rc = nestrt__seterr(err, "%s: out of memory packing weights", w->path);
				break;
			}
			if (inplace) {
				p->data = (void *)t->data;
				p->inplace = 1;
				t->inplace = 1;
				t->released = 1; /* its elements are only in the packed copy */
			}
			p->t = t;
			p->k = q->k;
			p->n = q->n;
			p->wide = q->wide;
			p->flags = q->flags;
			p->next = w->packs;
			w->packs = p;
			/* drop what only the packed copies need at once, so that the
			 * peak is the weights plus one copy, not plus all of them */
			if (t && !inplace) {
				release(w, t);
				if (give_back)
					t->released = 1; /* its rows are gone whatever release() did */
			}
		}
		q->data = p->data;
	}
	pthread_mutex_unlock(&w->mu);
	free(whole);
	return rc;
}

/* ------------------------------------------------------------ embedded, shared */

/* The weights of each embedded image in use, so that every instance of a
 * program's model shares them (and their packed copies): at most
 * NREGISTRY images at once; beyond, each instance gets weights of its own. */
#define NREGISTRY 16
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	const void *image;
	nestrt_weights *w;
} registry[NREGISTRY];

static int registry_drop(nestrt_weights *w)
{
	pthread_mutex_lock(&registry_mu);
	int last = __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) == 0;
	for (int i = 0; last && i < NREGISTRY; i++)
		if (registry[i].w == w)
			registry[i].w = NULL, registry[i].image = NULL;
	pthread_mutex_unlock(&registry_mu);
	return last;
}

nestrt_weights *nestrt__weights_embedded(const void *image, size_t size, const char *name, const nestrt_param *params,
                                         int nparams, const nestrt_prepacked *packs, int npacks, nestrt_error *err)
{
	pthread_mutex_lock(&registry_mu);
	for (int i = 0; i < NREGISTRY; i++)
		if (registry[i].w && registry[i].image == image) {
			nestrt_weights *w = registry[i].w;
			__atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&registry_mu);
			return w;
		}
	pthread_mutex_unlock(&registry_mu);
	nestrt_weights *w = nestrt_weights_from_memory(image, size, name, err);
	if (!w)
		return NULL;
	if (nestrt__weights_add_packed(w, params, nparams, packs, npacks, err) < 0) {
		nestrt_weights_close(w);
		return NULL;
	}
	pthread_mutex_lock(&registry_mu);
	int free_slot = -1;
	for (int i = 0; i < NREGISTRY; i++) {
		if (registry[i].w && registry[i].image == image) {
			/* made meanwhile by another thread: that one */
			nestrt_weights *other = registry[i].w;
			__atomic_add_fetch(&other->refs, 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&registry_mu);
			nestrt_weights_close(w);
			return other;
		}
		if (!registry[i].w && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		registry[free_slot].image = image;
		registry[free_slot].w = w;
		w->shared = image;
	}
	pthread_mutex_unlock(&registry_mu);
	return w;
}

/* ------------------------------------------------------------ references, bind, inspection */

void nestrt__weights_ref(nestrt_weights *w)
{
	if (w)
		__atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
}

void nestrt_weights_close(nestrt_weights *w)
{
	/* the last of the caller and the instances over w frees it */
	if (!w)
		return;
	if (w->shared) {
		if (!registry_drop(w))
			return;
	} else if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) > 0) {
		return;
	}
	if (w->packmem)
		munmap(w->packmem, w->packmemsize);
	for (WPack *p = w->packs, *next; p; p = next) {
		next = p->next;
		pack_free(p);
	}
	nestrt__weights_free(w);
}

/* (weights.c has the files; binding, which may restore a packed weight for an
 * f16 / bf16 param, is here) */
int nestrt__weights_bind_keys(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data,
                              const int32_t *formats, nestrt_error *err)
{
	if (nparams < 0 || (nparams > 0 && (!params || !data)))
		return nestrt__seterr(err, "nestrt_weights_bind: invalid arguments");
	if (nparams == 0)
		return 0;
	if (!w)
		return nestrt__seterr(err, "nestrt_weights_bind: no weights for %d parameters", nparams);
	for (int i = 0; i < nparams; i++)
		data[i] = NULL;
	/* a bool tensor's bytes are looked at (tensor_data): read them now */
	for (int i = 0; i < nparams; i++) {
		Tensor *t = params[i].name ? nestrt__weights_find(w, params[i].name) : NULL;
		if (t && t->st->dtype == NESTRT_BOOL) {
			if (nestrt__weights_ready(w, err) < 0)
				return -1;
			break;
		}
	}
	for (int i = 0; i < nparams; i++) {
		const nestrt_param *p = &params[i];
		char want[256], shown[NESTRT__SHOWN];
		int valid = p->name && p->dtype >= 0 && p->dtype < NESTRT_NDTYPES && p->rank >= 0 &&
		            p->rank <= NESTRT_MAX_RANK;
		for (int k = 0; valid && k < p->rank; k++)
			valid = p->shape[k] >= 0;
		if (!valid)
			return nestrt__seterr(err, "nestrt_weights_bind: parameter %d ('%s') has an invalid type", i,
			                      p->name ? nestrt__shown(shown, p->name, strlen(p->name)) : "(null)");
		nestrt__shown(shown, p->name, strlen(p->name));
		nestrt__type_text(want, sizeof want, nestrt_dtype_name(p->dtype), p->rank, p->shape);
		Tensor *t = nestrt__weights_find(w, p->name);
		if (!t)
			return nestrt__seterr(err, "%s: missing parameter '%s' (%s)%s", w->path, shown, want,
			                      w->n ? "" : ": the file has no tensors");
		int as_half = nestrt__is_half(t) && p->dtype == t->stored->dtype;
		int same = (t->st->dtype == p->dtype || as_half) && t->rank == p->rank;
		for (int k = 0; same && k < p->rank; k++)
			same = t->shape[k] == p->shape[k];
		if (!same) {
			char have[256];
			nestrt__type_text(have, sizeof have, (t->stored ? t->stored : t->st)->lower, t->rank, t->shape);
			return nestrt__seterr(err, "%s: %s: expected %s, file has %s", w->path, shown, want, have);
		}
		if (nestrt__is_half(t)) {
			pthread_mutex_lock(&w->mu);
			/* packed in a format from its 16-bit bytes, which were then given
			 * back (wpack.c's pack_half): only its copies hold it */
			int format_only = !t->widened && !t->half && t->released;
			const void *elems = NULL;
			int rc = 0;
			if (as_half && !t->half && !t->narrow)
				rc = nestrt__weights_elements(w, t, &elems);
			if (rc == -2)
				restore_error(w, t, rc, err);
			else if (rc < 0)
				nestrt__seterr(err, "%s: %s: out of memory unpacking weights", w->path, shown);
			else if (as_half)
				rc = (data[i] = nestrt__half_data(w, t, elems, shown, err)) ? 0 : -1;
			else if (formats && formats[i] & 0xff && t->data && (t->half || format_only) && !t->widened &&
			         !t->half_bound)
				rc = 0; /* held in a format: packed from its 16-bit bytes (pack_half), never widened */
			else if (format_only)
				rc = restore_error(w, t, -2, err); /* no 16-bit bytes left to widen */
			else
				rc = nestrt__weights_widen(w, t, err);
			pthread_mutex_unlock(&w->mu);
			if (rc < 0)
				return -1;
			if (as_half)
				continue;
		}
		if (!(data[i] = nestrt__tensor_data(w, t, shown, err)))
			return -1;
	}
	return 0;
}

int nestrt_weights_bind(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data,
                        nestrt_error *err)
{
	if (nestrt__weights_bind_keys(w, params, nparams, data, NULL, err) < 0)
		return -1;
	return nestrt__weights_unpacked(w, data, nparams, err);
}

/* Also the elements of a weight whose unpacked form went (restored from its
 * packed copy, and kept). */
int nestrt_weights_info(const nestrt_weights *w, int i, nestrt_param *info, const char **file_dtype,
                        const void **data, size_t *nbytes)
{
	if (!w || i < 0 || (size_t)i >= w->n)
		return -1;
	const Tensor *t = &w->t[i];
	if (info) {
		memset(info, 0, sizeof *info);
		info->name = t->name;
		info->dtype = t->st->dtype;
		info->rank = t->rank;
		memcpy(info->shape, t->shape, sizeof info->shape);
	}
	if (file_dtype)
		*file_dtype = (t->stored ? t->stored : t->st)->name;
	if (data) {
		/* a weight dropped for its packed copies goes back in place, and
		 * stays: the caller reads it */
		nestrt_weights *mw = (nestrt_weights *)w;
		pthread_mutex_lock(&mw->mu);
		int bad = nestrt__weights_settle(mw, NULL) < 0 || nestrt__weights_widen(mw, &mw->t[i], NULL) < 0 ||
		          restore(mw, &mw->t[i]) < 0;
		mw->t[i].direct = 1;
		pthread_mutex_unlock(&mw->mu);
		if (bad)
			return -1;
		*data = t->end > t->begin ? elements(t) : (const void *)nestrt__empty_data;
	}
	if (nbytes)
		*nbytes = (size_t)(t->end - t->begin);
	return 0;
}

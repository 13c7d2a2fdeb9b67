/* seq.c - sequences (the state a model declares, per sequence being
 * generated) and the calls of entry points with run-time dims: their
 * conditions are checked before anything runs, so a bad call writes nothing
 * and leaves the instance and the sequence as they were. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct nestrt_seq {
	const nestrt_model_desc *desc; /* the model it was made for */
	int n;
	void **bufs;                   /* 64-byte aligned, zeroed */
	size_t *bytes;                 /* of each; those of STATE_MAP_MIN and more are mapped */
	int busy;                      /* a call is using it */
	int64_t (*box)[2][NESTRT_MAX_RANK]; /* per state, what was written: [lo, hi) per axis */
	int *written;
};

/* A state of 2 MiB or more (a layer's key or value cache) is mapped and
 * asked for huge pages: a decode step writes one column of a transposed key
 * cache, a store every row of 4 KiB, and reads the cache's rows one by one;
 * with 4 KiB pages each is a TLB miss. Mapped pages are zero until written. */
#define STATE_MAP_MIN ((size_t)2 << 20)
/* Not above this: a 7B model's cache of one layer's keys, [32, 2048, 128]
 * floats, has a head every MiB, and a short sequence took each head's huge
 * page for its few positions (2 GB held for 16 tokens). At most this, a
 * huge page holds several heads' rows (GPT-2 small's 3 MiB: 8 heads). */
#define STATE_HUGE_MAX ((size_t)8 << 20)

static void *state_alloc(size_t b)
{
	if (b < STATE_MAP_MIN) {
		void *p = aligned_alloc(64, b);
		if (p)
			memset(p, 0, b);
		return p;
	}
	void *p = mmap(NULL, b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	if (b <= STATE_HUGE_MAX)
		madvise(p, b, MADV_HUGEPAGE); /* a hint */
#endif
	return p;
}

static void state_free(void *p, size_t b)
{
	if (p && b >= STATE_MAP_MIN)
		munmap(p, b);
	else
		free(p);
}

nestrt_seq *nestrt_seq_new(nestrt_model *m, const int64_t *state_bytes, int nstates, nestrt_error *err)
{
	if (!m) {
		nestrt__seterr(err, "nestrt_seq_new: no model (NULL)");
		return NULL;
	}
	if (nstates < 0 || (nstates > 0 && !state_bytes)) {
		nestrt__seterr(err, "nestrt_seq_new: bad state table");
		return NULL;
	}
	nestrt_seq *s = calloc(1, sizeof *s);
	if (!s) {
		nestrt__seterr(err, "nestrt_seq_new: out of memory");
		return NULL;
	}
	s->desc = nestrt__model_desc(m);
	s->n = nstates;
	s->bufs = calloc((size_t)nstates + 1, sizeof(void *));
	s->bytes = calloc((size_t)nstates + 1, sizeof(size_t));
	s->box = calloc((size_t)nstates + 1, sizeof *s->box);
	s->written = calloc((size_t)nstates + 1, sizeof(int));
	if (!s->bufs || !s->bytes || !s->box || !s->written)
		goto oom;
	for (int i = 0; i < nstates; i++) {
		/* equivalent mutant [cmp > -> >=]: SIZE_MAX - 64 bytes passes, then
		 * its map fails, with the same message */
		if (state_bytes[i] < 0 || (uint64_t)state_bytes[i] > SIZE_MAX - 64)
			goto oom;
		size_t b = ((size_t)state_bytes[i] + 63) / 64 * 64;
		s->bytes[i] = b ? b : 64;
		if (!(s->bufs[i] = state_alloc(s->bytes[i])))
			goto oom;
	}
	return s;
oom:
	nestrt__seterr(err, "nestrt_seq_new: out of memory for the state of a sequence");
	nestrt_seq_free(s);
	return NULL;
}

void nestrt_seq_reset(nestrt_seq *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		memset(s->bufs[i], 0, s->bytes[i]);
	memset(s->written, 0, (size_t)s->n * sizeof(int));
}

void nestrt_seq_free(nestrt_seq *s)
{
	if (!s)
		return;
	for (int i = 0; s->bufs && s->bytes && i < s->n; i++)
		state_free(s->bufs[i], s->bytes[i]);
	free(s->bufs);
	free(s->bytes);
	free(s->box);
	free(s->written);
	free(s);
}

static int64_t form(const int64_t *f, const int64_t *dims, int ndims)
{
	int64_t v = f[0];
	for (int j = 0; j < ndims && j < NESTRT_MAX_DIMS; j++)
		v += f[1 + j] * dims[j];
	return v;
}

/* Replay what the call reads and writes of the state on a copy of what the
 * sequence holds: 0, or -1 with the first read of something not written yet
 * in msg. On success the copy (box, written) is what the call leaves. */
static int replay(const nestrt_access *acc, int nacc, const int64_t *dims, int ndims,
                  int64_t (*box)[2][NESTRT_MAX_RANK], int *written, int nstates, char *msg, size_t len)
{
	for (int i = 0; i < nacc; i++) {
		const nestrt_access *a = &acc[i];
		if (a->state < 0 || a->state >= nstates || a->rank < 0 || a->rank > NESTRT_MAX_RANK)
			continue;
		int64_t lo[NESTRT_MAX_RANK], hi[NESTRT_MAX_RANK];
		int empty = 0;
		for (int k = 0; k < a->rank; k++) {
			lo[k] = form(a->start[k], dims, ndims);
			hi[k] = lo[k] + form(a->size[k], dims, ndims);
			empty |= hi[k] <= lo[k];
		}
		if (empty)
			continue;
		int64_t(*b)[NESTRT_MAX_RANK] = box[a->state];
		if (a->write) {
			/* what is written stays one box: a write that extends it along
			 * one axis (the next positions of a cache) grows it; one that
			 * leaves a gap is not counted, so reading past the gap fails
			 * (one inside it, differing on one axis, grows it by nothing).
			 * equivalent mutant [const 1 -> 0]: axis is read only when
			 * differ is 1, and then the loop has set it */
			int contains = 1, differ = 0, axis = -1;
			for (int k = 0; k < a->rank; k++) {
				contains &= lo[k] <= b[0][k] && hi[k] >= b[1][k];
				if (lo[k] != b[0][k] || hi[k] != b[1][k]) {
					differ++;
					axis = k;
				}
			}
			if (!written[a->state] || contains) {
				for (int k = 0; k < a->rank; k++) {
					b[0][k] = lo[k];
					b[1][k] = hi[k];
				}
			} else if (differ == 1 && lo[axis] <= b[1][axis] && hi[axis] >= b[0][axis]) {
				if (lo[axis] < b[0][axis])
					b[0][axis] = lo[axis];
				if (hi[axis] > b[1][axis])
					b[1][axis] = hi[axis];
			}
			written[a->state] = 1;
			continue;
		}
		for (int k = 0; k < a->rank; k++)
			if (!written[a->state] || lo[k] < b[0][k] || hi[k] > b[1][k]) {
				if (written[a->state])
					snprintf(msg, len, "reads state %s at %" PRId64 ":%" PRId64 " on axis %d before it was written there "
					         "(written: %" PRId64 ":%" PRId64 ")", a->name ? a->name : "?", lo[k], hi[k], k, b[0][k], b[1][k]);
				else
					snprintf(msg, len, "reads state %s before it was written (a new or reset sequence)", a->name ? a->name : "?");
				return -1;
			}
	}
	return 0;
}

int nestrt_model_call_dims(nestrt_model *m, int uses_seq, nestrt_seq *s, nestrt_fn entry, void **bufs, int nbufs,
                           const int64_t *dims, int ndims, const char *const *dim_names,
                           const nestrt_dimcheck *checks, int nchecks, const nestrt_access *acc, int nacc,
                           const char *name)
{
	char msg[512];
	if (!name)
		name = "nestrt_model_call_dims";
	if (!m) {
		snprintf(msg, sizeof msg, "%s: no model (NULL)", name);
		return nestrt__model_fail(NULL, msg);
	}
	if (uses_seq && !s) {
		snprintf(msg, sizeof msg, "%s: no sequence (NULL): make one with the model's _seq_new", name);
		return nestrt__model_fail(m, msg);
	}
	for (int i = 0; i < nbufs; i++)
		if (!bufs[i]) {
			snprintf(msg, sizeof msg, "%s: argument %d is NULL", name, i + 1);
			return nestrt__model_fail(m, msg);
		}
	for (int k = 0; k < nchecks; k++) {
		const nestrt_dimcheck *c = &checks[k];
		/* in 128 bits: a dim near INT64_MAX must not wrap into range */
		__int128 v = c->c0;
		for (int j = 0; j < ndims && j < NESTRT_MAX_DIMS; j++)
			v += (__int128)c->coef[j] * dims[j];
		if (c->eq ? v == 0 : v >= 0)
			continue;
		int at = snprintf(msg, sizeof msg, "%s: ", name);
		for (int j = 0; j < ndims && at < (int)sizeof msg; j++)
			at += snprintf(msg + at, sizeof msg - (size_t)at, "%s%s = %" PRId64, j ? ", " : "", dim_names[j], dims[j]);
		if (at < (int)sizeof msg)
			snprintf(msg + at, sizeof msg - (size_t)at, ": %s does not hold", c->text);
		return nestrt__model_fail(m, msg);
	}
	if (!uses_seq)
		return nestrt__model_run_dims(m, entry, bufs, dims);
	if (s->desc != nestrt__model_desc(m)) {
		snprintf(msg, sizeof msg, "%s: the sequence was made for another model", name);
		return nestrt__model_fail(m, msg);
	}
	int free_ = 0;
	if (!__atomic_compare_exchange_n(&s->busy, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		snprintf(msg, sizeof msg, "%s: the sequence is in another call (one call at a time per sequence)", name);
		return nestrt__model_fail(m, msg);
	}
	/* what it reads of the state must have been written */
	int64_t(*box)[2][NESTRT_MAX_RANK] = malloc((size_t)(s->n + 1) * sizeof *box);
	int *written = malloc((size_t)(s->n + 1) * sizeof(int));
	void *small[64], **all = small;
	if (!box || !written || (nbufs + s->n > 64 && !(all = malloc((size_t)(nbufs + s->n) * sizeof(void *))))) {
		free(box);
		free(written);
		__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
		snprintf(msg, sizeof msg, "%s: out of memory", name);
		return nestrt__model_fail(m, msg);
	}
	memcpy(box, s->box, (size_t)s->n * sizeof *box);
	memcpy(written, s->written, (size_t)s->n * sizeof(int));
	char why[300];
	if (replay(acc, nacc, dims, ndims, box, written, s->n, why, sizeof why) < 0) {
		int at = snprintf(msg, sizeof msg, "%s: ", name);
		for (int j = 0; j < ndims && at < (int)sizeof msg; j++)
			at += snprintf(msg + at, sizeof msg - (size_t)at, "%s%s = %" PRId64, j ? ", " : "", dim_names[j], dims[j]);
		if (at < (int)sizeof msg)
			snprintf(msg + at, sizeof msg - (size_t)at, "%s%s", ndims ? ": " : "", why);
		free(box);
		free(written);
		if (all != small)
			free(all);
		__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
		return nestrt__model_fail(m, msg);
	}
	memcpy(all, bufs, (size_t)nbufs * sizeof(void *));
	memcpy(all + nbufs, s->bufs, (size_t)s->n * sizeof(void *));
	int rc = nestrt__model_run_dims(m, entry, all, dims);
	if (rc == 0) {
		memcpy(s->box, box, (size_t)s->n * sizeof *box);
		memcpy(s->written, written, (size_t)s->n * sizeof(int));
	}
	free(box);
	free(written);
	if (all != small)
		free(all);
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
	return rc;
}

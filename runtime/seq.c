/* seq.c - sequences (the state a model declares, per sequence being
 * generated) and the calls of entry points with run-time dims: their
 * conditions are checked before anything runs, so a bad call writes nothing
 * and leaves the instance and the sequence as they were. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct nestrt_seq {
	const nestrt_model_desc *desc; /* the model it was made for */
	int n;
	void **bufs;                   /* 64-byte aligned, zeroed */
	size_t *bytes;
	int busy;                      /* a call is using it */
};

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
	if (!s->bufs || !s->bytes)
		goto oom;
	for (int i = 0; i < nstates; i++) {
		if (state_bytes[i] < 0 || (uint64_t)state_bytes[i] > SIZE_MAX - 64)
			goto oom;
		size_t b = ((size_t)state_bytes[i] + 63) / 64 * 64;
		s->bufs[i] = aligned_alloc(64, b ? b : 64);
		if (!s->bufs[i])
			goto oom;
		memset(s->bufs[i], 0, b ? b : 64);
		s->bytes[i] = b ? b : 64;
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
}

void nestrt_seq_free(nestrt_seq *s)
{
	if (!s)
		return;
	for (int i = 0; s->bufs && i < s->n; i++)
		free(s->bufs[i]);
	free(s->bufs);
	free(s->bytes);
	free(s);
}

int nestrt_model_call_dims(nestrt_model *m, int uses_seq, nestrt_seq *s, nestrt_fn entry, void **bufs, int nbufs,
                           const int64_t *dims, int ndims, const char *const *dim_names,
                           const nestrt_dimcheck *checks, int nchecks, const char *name)
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
	void *small[64], **all = small;
	if (nbufs + s->n > 64 && !(all = malloc((size_t)(nbufs + s->n) * sizeof(void *)))) {
		__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
		snprintf(msg, sizeof msg, "%s: out of memory", name);
		return nestrt__model_fail(m, msg);
	}
	memcpy(all, bufs, (size_t)nbufs * sizeof(void *));
	memcpy(all + nbufs, s->bufs, (size_t)s->n * sizeof(void *));
	int rc = nestrt__model_run_dims(m, entry, all, dims);
	if (all != small)
		free(all);
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
	return rc;
}

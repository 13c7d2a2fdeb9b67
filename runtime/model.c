/* model.c - a compiled model's instance: the descriptor nestc emits (param
 * table, dispatch table, workspace size, pack plans) bound to weights, and
 * the call of an entry point.
 *
 * An instance may be called from many threads at once. Everything the calls
 * share is read-only after creation (params, packed weights, the dispatch
 * table) or atomic (the counters); what a call writes, its workspace and its
 * error, is its own: the instance's context when it is free (a call from one
 * thread at a time never uses another), else a context of its own, taken
 * from the instance's spares or made and kept there for the next time. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSPARE 64   /* call contexts kept for reuse; more callers at once make and free their own */

struct nestrt_model {
	const nestrt_model_desc *desc;
	nestrt_ctx *ctx;
	nestrt_weights *w;       /* referenced while the instance lives */
	uint64_t id;             /* names the instance in a thread's last error */
	int busy;                /* ctx is in a call */
	nestrt_ctx *spare[NSPARE];
};

/* The outcome of this thread's last call of each of the models it called
 * lately (per thread, since calls of one instance from several threads
 * fail or succeed on their own; per model, since a server thread that runs
 * two models must not lose the first one's failure to the second's
 * success), and which of them came last (nestrt_model_error(NULL)). */
#define NLAST 8
typedef struct Outcome {
	uint64_t model;          /* id of the instance, 0 for a call without one */
	uint64_t when;           /* this thread's count of calls at the time */
	int failed;
	char message[sizeof(nestrt_error)];
} Outcome;
static _Thread_local Outcome last[NLAST];
static _Thread_local uint64_t ncalls;
static uint64_t next_id = 1;

size_t nestrt_model_workspace_size(const nestrt_model_desc *d)
{
	if (!d)
		return 0;
	int64_t most = 0;
	for (int i = 0; i < d->nslots; i++)
		if (d->slot_ws && d->slot_ws[i] && *d->slot_ws[i] > most)
			most = *d->slot_ws[i];
	int64_t ws = d->ws_own + most;
	return (size_t)(ws > d->ws_size ? ws : d->ws_size);
}

nestrt_model *nestrt_model_new(const nestrt_model_desc *d, nestrt_weights *w, nestrt_error *err)
{
	if (!d) {
		nestrt__seterr(err, "nestrt_model_new: no model");
		return NULL;
	}
	nestrt_model *m = calloc(1, sizeof *m);
	if (!m) {
		nestrt__seterr(err, "%s: out of memory", d->name);
		return NULL;
	}
	m->desc = d;
	m->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
	m->ctx = nestrt_ctx_new(d->name, d->slots, d->nslots, d->nparams, nestrt_model_workspace_size(d), err);
	if (!m->ctx) {
		free(m);
		return NULL;
	}
	if (nestrt__weights_bind_keys(w, d->params, d->nparams, m->ctx->params, d->formats, err) < 0) {
		nestrt_ctx_free(m->ctx);
		free(m);
		return NULL;
	}
	nestrt__ctx_set_params(m->ctx, d->params, d->nparams);
	/* the weights' packed copies, made now rather than in a call */
	if (nestrt__packs_make(d, m->ctx, w, err) < 0 || nestrt__weights_ready(w, err) < 0) {
		nestrt_ctx_free(m->ctx);
		free(m);
		return NULL;
	}
	nestrt__weights_ref(w);
	m->w = w;
	return m;
}

nestrt_model *nestrt_model_new_embedded(const nestrt_model_desc *d, const void *image, size_t size, nestrt_error *err)
{
	return nestrt_model_new_embedded_packed(d, image, size, NULL, 0, err);
}

nestrt_model *nestrt_model_new_embedded_packed(const nestrt_model_desc *d, const void *image, size_t size,
                                               const nestrt_prepacked *packs, int npacks, nestrt_error *err)
{
	char name[300];
	snprintf(name, sizeof name, "%s (embedded weights)", d && d->name ? d->name : "model");
	if (!d) {
		nestrt__seterr(err, "nestrt_model_new: no model");
		return NULL;
	}
	/* every instance of the program's model shares these weights */
	nestrt_weights *w = nestrt__weights_embedded(image, size, name, d->params, d->nparams, packs, npacks, err);
	if (!w)
		return NULL;
	nestrt_model *m = nestrt_model_new(d, w, err);
	nestrt_weights_close(w); /* the instance holds them */
	return m;
}

void nestrt_model_free(nestrt_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < NSPARE; i++)
		nestrt__ctx_clone_free(m->spare[i]);
	nestrt_ctx_free(m->ctx);
	nestrt_weights_close(m->w);
	free(m);
}

/* Record this thread's outcome of a call of model id (0: none), in its own
 * entry, else in place of the one called longest ago. */
static int outcome(uint64_t id, const char *message)
{
	Outcome *o = &last[0];
	for (int i = 0; i < NLAST; i++) {
		if (last[i].model == id && last[i].when) {
			o = &last[i];
			break;
		}
		if (last[i].when < o->when)
			o = &last[i];
	}
	o->model = id;
	o->when = ++ncalls;
	o->failed = message != NULL;
	if (message)
		snprintf(o->message, sizeof o->message, "%s", message);
	return message ? -1 : 0;
}

static nestrt_ctx *take(nestrt_model *m, nestrt_error *err)
{
	int free_ = 0;
	if (__atomic_compare_exchange_n(&m->busy, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return m->ctx;
	for (int i = 0; i < NSPARE; i++) {
		if (!__atomic_load_n(&m->spare[i], __ATOMIC_RELAXED))
			continue;
		nestrt_ctx *c = __atomic_exchange_n(&m->spare[i], NULL, __ATOMIC_ACQUIRE);
		if (c)
			return c;
	}
	return nestrt__ctx_clone(m->ctx, err);
}

static void give_back(nestrt_model *m, nestrt_ctx *c)
{
	if (c == m->ctx) {
		__atomic_store_n(&m->busy, 0, __ATOMIC_RELEASE);
		return;
	}
	for (int i = 0; i < NSPARE; i++) {
		nestrt_ctx *none = NULL;
		if (__atomic_compare_exchange_n(&m->spare[i], &none, c, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	nestrt__ctx_clone_free(c);
}

int nestrt_model_run(nestrt_model *m, nestrt_fn entry, void **bufs)
{
	return nestrt__model_run_dims(m, entry, bufs, NULL);
}

int nestrt__model_fail(const nestrt_model *m, const char *message)
{
	return outcome(m ? m->id : 0, message);
}

const nestrt_model_desc *nestrt__model_desc(const nestrt_model *m)
{
	return m->desc;
}

int nestrt__model_run_dims(nestrt_model *m, nestrt_fn entry, void **bufs, const int64_t *dims)
{
	if (!m)
		return outcome(0, "nestrt_model_run: no model (NULL)");
	if (!entry || !bufs)
		return outcome(m->id, !entry ? "nestrt_model_run: no entry point (NULL)"
		                             : "nestrt_model_run: no arguments (NULL)");
	nestrt_error err;
	nestrt_ctx *c = take(m, &err);
	if (!c)
		return outcome(m->id, err.message);
	nestrt_clear_error(c);
	int rc = entry(c, bufs, dims, c->ws);
	if (rc != 0 && !c->err_code)
		nestrt_fail(c, "run-time error");
	outcome(m->id, rc ? c->err_message : NULL);
	give_back(m, c);
	return rc ? -1 : 0;
}

int nestrt_model_call(nestrt_model *m, nestrt_fn entry, void **bufs, int nbufs, const char *name)
{
	if (!m)
		return outcome(0, "nestrt_model_run: no model (NULL)");
	for (int i = 0; i < nbufs; i++)
		if (!bufs[i]) {
			char msg[256];
			snprintf(msg, sizeof msg, "%s: argument %d is NULL", name ? name : "nestrt_model_call", i + 1);
			return outcome(m->id, msg);
		}
	return nestrt_model_run(m, entry, bufs);
}

const char *nestrt_model_error(const nestrt_model *m)
{
	const Outcome *o = NULL;
	for (int i = 0; i < NLAST; i++) {
		if (!last[i].when)
			continue;
		if (m ? last[i].model == m->id : (!o || last[i].when > o->when))
			o = &last[i];
	}
	return o && o->failed ? o->message : NULL;
}

nestrt_ctx *nestrt_model_ctx(nestrt_model *m)
{
	return m ? m->ctx : NULL;
}

/* model.c - a compiled model's instance: the descriptor nestc emits (param
 * table, dispatch table, workspace size) bound to weights, and the call of an
 * entry point. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nestrt_model {
	const nestrt_model_desc *desc;
	nestrt_ctx *ctx;
	nestrt_weights *owned;   /* embedded weights, closed with the model */
};

size_t nestrt_model_workspace_size(const nestrt_model_desc *d)
{
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
		if (err)
			snprintf(err->message, sizeof err->message, "nestrt_model_new: no model");
		return NULL;
	}
	nestrt_model *m = calloc(1, sizeof *m);
	if (!m) {
		if (err)
			snprintf(err->message, sizeof err->message, "%s: out of memory", d->name);
		return NULL;
	}
	m->desc = d;
	m->ctx = nestrt_ctx_new(d->name, d->slots, d->nslots, d->nparams, nestrt_model_workspace_size(d), err);
	if (!m->ctx) {
		free(m);
		return NULL;
	}
	if (nestrt_weights_bind(w, d->params, d->nparams, m->ctx->params, err) < 0) {
		nestrt_ctx_free(m->ctx);
		free(m);
		return NULL;
	}
	nestrt__ctx_set_params(m->ctx, d->params, d->nparams);
	return m;
}

nestrt_model *nestrt_model_new_embedded(const nestrt_model_desc *d, const void *image, size_t size, nestrt_error *err)
{
	char name[300];
	snprintf(name, sizeof name, "%s (embedded weights)", d && d->name ? d->name : "model");
	nestrt_weights *w = nestrt_weights_from_memory(image, size, name, err);
	if (!w)
		return NULL;
	nestrt_model *m = nestrt_model_new(d, w, err);
	if (!m) {
		nestrt_weights_close(w);
		return NULL;
	}
	m->owned = w;
	return m;
}

void nestrt_model_free(nestrt_model *m)
{
	if (!m)
		return;
	nestrt_ctx_free(m->ctx);
	nestrt_weights_close(m->owned);
	free(m);
}

int nestrt_model_run(nestrt_model *m, nestrt_fn entry, void **bufs)
{
	nestrt_clear_error(m->ctx);
	int rc = entry(m->ctx, bufs, NULL, m->ctx->ws);
	if (rc != 0 && !m->ctx->err_code)
		nestrt_fail(m->ctx, "run-time error");
	return rc ? -1 : 0;
}

const char *nestrt_model_error(const nestrt_model *m)
{
	return m && m->ctx->err_code ? m->ctx->err_message : NULL;
}

nestrt_ctx *nestrt_model_ctx(nestrt_model *m)
{
	return m ? m->ctx : NULL;
}

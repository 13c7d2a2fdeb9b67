/* api.c - NAME.api.json, the machine-readable description of a model's C API
 * that every build writes beside its header (nestc(1), THE API DESCRIPTION):
 * entry points, their arguments and results, run-time dims and their bounds,
 * the sequence functions, the state, and the weights with their formats. It
 * is made from the same tables as the header, with header.c's C names and
 * types, so the two say the same thing; the Python package (nestrt) and any
 * other binding reads it instead of parsing C. */
#include "gen.h"
#include "wformat.h"

#include <jansson.h>
#include <string.h>

#define API_SCHEMA_VERSION 1

static json_t *shape_json(int rank, const int64_t *shape)
{
	json_t *a = json_array();
	for (int i = 0; i < rank; i++)
		json_array_append_new(a, json_integer(shape[i]));
	return a;
}

/* c0 + sum coef[j] dims[j]: an integer when no dim is in it, else
 * {"const": c0, "dims": {"T": coef, ...}} */
static json_t *affine_json(const Affine *f, Entry *en)
{
	json_t *dims = json_object();
	/* equivalent mutant [cmp < -> <=]: below MAX_DIMS dims, coef[ndims] is
	 * an unused entry, 0, and a 0 adds no key (at MAX_DIMS it would read past
	 * the array: no model of the tests has four run-time dims) */
	for (int j = 0; j < en->ndims; j++)
		if (f->coef[j])
			json_object_set_new(dims, en->dim_names[j], json_integer(f->coef[j]));
	if (!json_object_size(dims)) {
		json_decref(dims);
		return json_integer(f->c0);
	}
	return json_pack("{s:I,s:o}", "const", (json_int_t)f->c0, "dims", dims);
}

static json_t *tensor_json(Graph *g, Entry *en, Node *v, const char *name, const char *c_name)
{
	json_t *shape = json_array();
	for (int i = 0; i < v->rank; i++) {
		GDyn *d = gdyn_find(g, v->id, i);
		json_array_append_new(shape, d ? affine_json(&d->f, en) : json_integer(v->shape[i]));
	}
	return json_pack("{s:s,s:s,s:s,s:s,s:i,s:o}", "name", name, "c_name", c_name, "dtype", dtype_name(v->dtype),
	                 "c_type", header_c_type(v->dtype), "rank", v->rank, "shape", shape);
}

static json_t *entry_json(Entry *en, const char *name)
{
	Graph *g = en->g;
	char sym[512], pn[300];
	snprintf(sym, sizeof sym, "%s_%s", name, en->name);
	json_t *dims = json_array(), *checks = json_array(), *ins = json_array(), *outs = json_array();
	for (int j = 0; j < en->ndims; j++)
		json_array_append_new(dims, json_pack("{s:s,s:s,s:I,s:I}", "name", en->dim_names[j], "c_name",
		                                      header_c_param(en->dim_names[j], pn, sizeof pn), "min",
		                                      (json_int_t)en->dim_lo[j], "max", (json_int_t)en->dim_hi[j]));
	for (int k = 0; k < en->nchecks; k++)
		json_array_append_new(checks, json_string(en->checks[k].text));
	for (int i = 0; i < g->ninputs; i++)
		json_array_append_new(ins, tensor_json(g, en, g->inputs[i], g->input_names[i],
		                                       header_c_param(g->input_names[i], pn, sizeof pn)));
	for (int j = 0; j < g->noutputs; j++) {
		char on[32];
		snprintf(on, sizeof on, g->noutputs == 1 ? "out" : "out%d", j);
		json_array_append_new(outs, tensor_json(g, en, g->outputs[j], on, on));
	}
	/* the C parameters in order: m, the sequence, the dims, the inputs, the results */
	return json_pack("{s:s,s:s,s:b,s:o,s:o,s:o,s:o}", "name", en->name, "symbol", sym, "sequence", en->uses_state,
	                 "dims", dims, "checks", checks, "inputs", ins, "outputs", outs);
}

void api_json_text(Program *p, BuildOptions *o, Buf *b, const char *name)
{
	char sym[512];
	json_t *fns = json_object();
#define FN(key, suffix) (snprintf(sym, sizeof sym, "%s%s", name, suffix), json_object_set_new(fns, key, json_string(sym)))
	FN("new", "_new");
	FN("free", "_free");
	FN("workspace_size", "_workspace_size");
	if (o->embed)
		FN("new_embedded", "_new_embedded");
	if (p->nstates) {
		FN("seq_new", "_seq_new");
		FN("seq_reset", "_seq_reset");
		FN("seq_free", "_seq_free");
	}
#undef FN
	json_object_set_new(fns, "error", json_string("nestrt_model_error"));
	json_t *entries = json_array();
	for (int e = 0; e < p->nentries; e++)
		json_array_append_new(entries, entry_json(&p->entries[e], name));
	json_t *state = json_array();
	for (int i = 0; i < p->nstates; i++) {
		ParamInfo *s = &p->states[i];
		json_array_append_new(state, json_pack("{s:s,s:s,s:o}", "name", s->name, "dtype", dtype_name(s->dtype),
		                                       "shape", shape_json(s->rank, s->shape)));
	}
	json_t *weights = json_array();
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		int64_t n = shape_numel(pi->rank, pi->shape);
		int64_t by = pi->wformat == WF_F32 ? n * dtype_size(pi->dtype) : wformat_bytes(pi->wformat, n);
		json_t *w = json_pack("{s:s,s:s,s:o,s:s,s:I}", "name", pi->name, "dtype", dtype_name(pi->dtype), "shape",
		                      shape_json(pi->rank, pi->shape), "format", wformat_name(pi->wformat), "bytes",
		                      (json_int_t)by);
		if (pi->wformat != WF_F32)
			json_object_set_new(w, "block_axis", json_integer(pi->waxis));
		json_array_append_new(weights, w);
	}
	char hdr[300];
	snprintf(hdr, sizeof hdr, "%s.h", name);
	json_t *root = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o}", "schema", "nestc-api", "version",
	                         API_SCHEMA_VERSION, "nestc", NESTC_VERSION, "model", name, "source", p->src->path, "header",
	                         hdr, "functions", fns, "entries", entries, "state", state, "weights", weights);
	if (!root)
		ice("api_json_text: json_pack failed");
	/* equivalent mutant [const 2 -> 1]: the indentation, not the values */
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!s)
		ice("api_json_text: json_dumps failed");
	buf_puts(b, s);
	buf_putc(b, '\n');
	free(s);
	json_decref(root);
}

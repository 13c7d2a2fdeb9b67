/* run.c - `nestc run`: bind weights (or random ones), read .npy inputs, run the
 * reference interpreter, write .npy outputs only when everything succeeded. */
#include "nestc.h"
#include "wformat.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* splitmix64: small, good enough, and the same on every machine */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void random_fill(Tensor *t, const char *name, uint64_t seed)
{
	/* seeded by the name, so a param's values do not depend on declaration order */
	uint64_t s = seed ^ hash_str(name);
	if (!dtype_is_float(t->dtype)) {
		for (int64_t i = 0; i < t->n; i++)
			t->i[i] = 0;
		return;
	}
	double n = 4;
	if (t->rank == 4 && t->shape[0] > 0)
		n = (double)(t->n / t->shape[0]);
	else if (t->rank >= 2)
		n = (double)t->shape[0];
	double scale = n > 0 ? 1.0 / sqrt(n) : 1.0;
	for (int64_t i = 0; i < t->n; i++) {
		double u = (double)(next_rand(&s) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
		double v = (2 * u - 1) * scale;
		t->f[i] = t->dtype == DT_F32 ? (double)(float)v : v;
	}
}

void random_fill_param(Tensor *t, const ParamInfo *pi, uint64_t seed)
{
	if (!pi->positive || !dtype_is_float(t->dtype)) {
		random_fill(t, pi->name, seed);
		return;
	}
	/* a variance: uniform in [0.5, 1.5), near 1 as a trained batch norm's, never
	 * negative (NaN) nor near 0 (huge scales) */
	uint64_t s = seed ^ hash_str(pi->name);
	for (int64_t i = 0; i < t->n; i++) {
		double v = 0.5 + (double)(next_rand(&s) >> 11) * (1.0 / 9007199254740992.0);
		t->f[i] = t->dtype == DT_F32 ? (double)(float)v : v;
	}
}

static void summary(const char *name, Tensor *t)
{
	Buf b = {0};
	shape_str(&b, t->dtype, t->rank, t->shape);
	printf("%s: %s", name, b.s);
	buf_free(&b);
	if (t->n > 0) {
		double mn = INFINITY, mx = -INFINITY, sum = 0;
		int64_t nans = 0;
		for (int64_t i = 0; i < t->n; i++) {
			double v = dtype_is_float(t->dtype) ? t->f[i] : (double)t->i[i];
			nans += isnan(v);
			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
			sum += v;
		}
		if (nans)
			/* NumPy's min, max and mean of an array with a NaN are all NaN; the
			 * comparisons above skipped them, so say it plainly with the count */
			printf(" min=nan max=nan mean=nan nans=%lld [", (long long)nans);
		else if (isnan(sum)) /* inf - inf: "nan", not "-nan" */
			printf(" min=%.6g max=%.6g mean=nan [", mn, mx);
		else
			printf(" min=%.6g max=%.6g mean=%.6g [", mn, mx, sum / (double)t->n);
		for (int64_t i = 0; i < t->n && i < 4; i++) {
			if (dtype_is_float(t->dtype) && isnan(t->f[i]))
				printf("%snan", i ? ", " : ""); /* never "-nan": the sign of a NaN means nothing */
			else if (dtype_is_float(t->dtype))
				printf("%s%.6g", i ? ", " : "", t->f[i]);
			else
				printf("%s%lld", i ? ", " : "", (long long)t->i[i]);
		}
		printf("%s]", t->n > 4 ? ", ..." : "");
	}
	putchar('\n');
}

static Entry *pick_entry(Program *p, Diag *d, const char *want)
{
	if (want) {
		for (int i = 0; i < p->nentries; i++)
			if (!strcmp(p->entries[i].name, want))
				return &p->entries[i];
		Buf b = {0};
		for (int i = 0; i < p->nentries; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", p->entries[i].name);
		error_plain(d, "no exported function '%s' (exported: %s)", want, b.s ? b.s : "none");
		buf_free(&b);
		return NULL;
	}
	if (p->nentries == 1)
		return &p->entries[0];
	for (int i = 0; i < p->nentries; i++)
		if (!strcmp(p->entries[i].name, "forward"))
			return &p->entries[i];
	if (p->nentries == 0) {
		error_plain(d, "%s has no exported function to run", p->src->path);
		return NULL;
	}
	Buf b = {0};
	for (int i = 0; i < p->nentries; i++)
		buf_printf(&b, "%s%s", i ? ", " : "", p->entries[i].name);
	error_plain(d, "%s exports several functions (%s): choose one with --entry", p->src->path, b.s);
	buf_free(&b);
	return NULL;
}

static int shapes_equal(int ra, const int64_t *a, int rb, const int64_t *b)
{
	return ra == rb && (ra == 0 || !memcmp(a, b, (size_t)ra * sizeof(int64_t)));
}

static char *shape_text(DType dt, int rank, const int64_t *shape)
{
	Buf b = {0};
	shape_str(&b, dt, rank, shape);
	return b.s;
}

/* PyTorch's batch-norm step counter: training state that inference never reads,
 * present in every checkpoint of a model with batch norm; not worth a warning. */
static int batch_counter(const char *name)
{
	static const char suffix[] = "num_batches_tracked";
	size_t n = strlen(name), k = sizeof suffix - 1;
	return n >= k && !strcmp(name + n - k, suffix) && (n == k || name[n - k - 1] == '.');
}

WTensor *weights_match(Diag *d, Weights *w, const ParamInfo *pi)
{
	WTensor *wt = weights_find(w, pi->name);
	char *want = shape_text(pi->dtype, pi->rank, pi->shape);
	if (!wt) {
		error_plain(d, "%s: missing parameter '%s' (%s)", w->path, pi->name, want);
	} else {
		wt->used = 1;
		if ((wt->dtype != (int)pi->dtype && wt->half_dtype != (int)pi->dtype) ||
		    !shapes_equal(wt->rank, wt->shape, pi->rank, pi->shape)) {
			Buf b = {0};
			/* F16, BF16 and GGUF's quantized types are held widened: the
			 * file's type is the one to name, in lower case as compiled
			 * programs name it */
			if (wt->dtype >= 0 && !strcasecmp(wt->dtype_str, dtype_name((DType)wt->dtype))) {
				shape_str(&b, (DType)wt->dtype, wt->rank, wt->shape);
			} else {
				for (const char *c = wt->dtype_str; *c; c++)
					buf_putc(&b, (char)tolower((unsigned char)*c));
				buf_putc(&b, '[');
				for (int k = 0; k < wt->rank; k++)
					buf_printf(&b, "%s%lld", k ? ", " : "", (long long)wt->shape[k]);
				buf_putc(&b, ']');
			}
			error_plain(d, "%s: %s: expected %s, file has %s", w->path, pi->name, want, b.s);
			buf_free(&b);
			wt = NULL;
		}
	}
	free(want);
	return wt;
}

void weights_warn_unused(Diag *d, Weights *w)
{
	for (int i = 0; i < w->n; i++)
		if (!w->t[i].used && !batch_counter(w->t[i].name))
			warning_plain(d, "%s: tensor '%s' is not a parameter of the model", w->path, w->t[i].name);
}

/* Bind every param from the weights file; 0 after errors. */
static int bind_weights(Program *p, Diag *d, Weights *w, Tensor **params)
{
	int ok = 1;
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		WTensor *wt = weights_match(d, w, pi);
		if (!wt) {
			ok = 0;
			continue;
		}
		char why[512];
		const void *data = weights_data(w, wt, pi->dtype, why, sizeof why);
		if (!data) {
			error_plain(d, "%s: %s", w->path, why);
			ok = 0;
		} else {
			params[i] = tensor_from_bytes(pi->dtype, pi->rank, pi->shape, data);
		}
	}
	weights_warn_unused(d, w);
	return ok;
}

/* The interpreter holds every element in 8 bytes (a double or an int64_t):
 * a tensor that cannot is a located error before anything runs, not an
 * internal error in the middle (a tensor that fits but not in memory is
 * "out of memory", exit 1: util.c). */
static int interp_fits(Diag *d, Graph *g, int depth)
{
	int ok = 1;
	for (int i = 0; i < g->nnodes && ok; i++) {
		Node *n = g->nodes[i];
		if (shape_numel(n->rank, n->shape) > INT64_MAX / 8) {
			Buf b = {0};
			shape_str(&b, n->dtype, n->rank, n->shape);
			error_at(d, n->loc, "%s is too large for the interpreter (more than 2^60 elements)", b.s);
			buf_free(&b);
			ok = 0;
		}
		/* calls nest at most 200 deep (lower.c) */
		if (ok && n->callee && depth < 256)
			ok = interp_fits(d, n->callee, depth + 1);
	}
	return ok;
}

static int params_fit(Program *p, Diag *d)
{
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		if (shape_numel(pi->rank, pi->shape) > INT64_MAX / 8) {
			Buf b = {0};
			shape_str(&b, pi->dtype, pi->rank, pi->shape);
			error_at(d, pi->loc, "param '%s' (%s) is too large for the interpreter (more than 2^60 elements)",
			         pi->name, b.s);
			buf_free(&b);
			return 0;
		}
	}
	return 1;
}

int run_program(Program *p, Diag *d, RunOptions *o)
{
	Entry *e = pick_entry(p, d, o->entry);
	if (!e)
		return 1;
	Graph *g = e->g;
	if (e->ndims) {
		Buf b = {0};
		for (int j = 0; j < e->ndims; j++)
			buf_printf(&b, "%s-D %s=N", j ? " " : "", e->dim_names[j]);
		error_plain(d, "'%s' has run-time dimensions: give their values to run it (%s)", e->name, b.s);
		buf_free(&b);
		return 1;
	}
	if (!params_fit(p, d) || !interp_fits(d, g, 0))
		return 1;
	int rc = 1;
	char err[512];
	Tensor **params = xcalloc((size_t)p->nparams + 1, sizeof(Tensor *));
	Tensor **ins = xcalloc((size_t)g->ninputs + 1, sizeof(Tensor *));
	Tensor **outs = xcalloc((size_t)g->noutputs + 1, sizeof(Tensor *));
	char **bufs = xcalloc((size_t)g->noutputs + 1, sizeof(char *));
	size_t *lens = xcalloc((size_t)g->noutputs + 1, sizeof(size_t));
	Weights *w = NULL;

	if (o->weights) {
		w = weights_open(o->weights, err, sizeof err);
		if (!w) {
			error_plain(d, "%s: %s", o->weights, err);
			goto out;
		}
		if (!bind_weights(p, d, w, params))
			goto out;
	} else if (o->random_weights) {
		for (int i = 0; i < p->nparams; i++) {
			ParamInfo *pi = &p->params[i];
			params[i] = tensor_new(pi->dtype, pi->rank, pi->shape);
			random_fill_param(params[i], pi, o->seed);
		}
	} else if (p->nparams > 0) {
		error_plain(d, "the model has %d param tensor%s: give --weights FILE.safetensors or --random-weights SEED",
		            p->nparams, p->nparams == 1 ? "" : "s");
		goto out;
	}
	/* --weights-format: each formatted param as its format holds it */
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		if (pi->wformat == WF_F32 || !params[i])
			continue;
		float *f = xcalloc((size_t)params[i]->n + 1, sizeof *f);
		for (int64_t k = 0; k < params[i]->n; k++)
			f[k] = (float)params[i]->f[k];
		int bad_w = wformat_round_trip(pi, f, err, sizeof err);
		for (int64_t k = 0; k < params[i]->n; k++)
			params[i]->f[k] = f[k];
		free(f);
		if (bad_w < 0) {
			error_plain(d, "%s", err);
			goto out;
		}
	}

	/* inputs, by name */
	int bad = 0;
	for (int k = 0; k < o->ninputs; k++) {
		int found = -1;
		for (int i = 0; i < g->ninputs; i++)
			if (!strcmp(g->input_names[i], o->input_names[k]))
				found = i;
		if (found < 0) {
			Buf names = {0};
			for (int i = 0; i < g->ninputs; i++)
				buf_printf(&names, "%s%s", i ? ", " : "", g->input_names[i]);
			error_plain(d, "--input %s: '%s' has no argument named '%s' (its arguments: %s)", o->input_names[k], e->name,
			            o->input_names[k], names.s ? names.s : "none");
			buf_free(&names);
			bad = 1;
			continue;
		}
		if (ins[found]) {
			error_plain(d, "--input %s is given twice", o->input_names[k]);
			bad = 1;
			continue;
		}
		NpyArray arr;
		if (npy_read(o->input_paths[k], &arr, err, sizeof err) < 0) {
			error_plain(d, "%s: %s", o->input_paths[k], err);
			bad = 1;
			continue;
		}
		Node *in = g->inputs[found];
		/* bfloat16 has no NumPy dtype: a bf16 argument takes its bits from a '<u2' file */
		if (arr.dtype == DT_U16 && in->dtype == DT_BF16)
			arr.dtype = DT_BF16;
		if (arr.dtype != in->dtype || !shapes_equal(arr.rank, arr.shape, in->rank, in->shape)) {
			char *want = shape_text(in->dtype, in->rank, in->shape);
			char *have = shape_text(arr.dtype, arr.rank, arr.shape);
			error_plain(d, "%s: argument '%s' of '%s' is %s, the file holds %s", o->input_paths[k], o->input_names[k],
			            e->name, want, have);
			free(want);
			free(have);
			bad = 1;
		} else {
			ins[found] = tensor_from_bytes(arr.dtype, arr.rank, arr.shape, arr.data);
		}
		npy_free(&arr);
	}
	int given_bad = bad;
	for (int i = 0; i < g->ninputs; i++)
		if (!ins[i] && !given_bad) {
			Node *in = g->inputs[i];
			char *want = shape_text(in->dtype, in->rank, in->shape);
			error_plain(d, "missing input: give --input %s=FILE.npy (%s)", g->input_names[i], want);
			free(want);
			bad = 1;
		}
	if (o->noutputs && o->noutputs != g->noutputs) {
		error_plain(d, "'%s' returns %d result%s, but %d --output file%s given", e->name, g->noutputs,
		            g->noutputs == 1 ? "" : "s", o->noutputs, o->noutputs == 1 ? " is" : "s are");
		bad = 1;
	}
	if (bad || d->nerrors)
		goto out;

	/* a fresh sequence: the state starts zeroed */
	Tensor **states = xcalloc((size_t)p->nstates + 1, sizeof(Tensor *));
	for (int i = 0; i < p->nstates; i++)
		states[i] = tensor_new(p->states[i].dtype, p->states[i].rank, p->states[i].shape);
	int irc = interp_run_state(p, g, ins, params, states, outs);
	for (int i = 0; i < p->nstates; i++)
		tensor_free(states[i]);
	free(states);
	if (irc < 0)
		goto out;

	if (!o->noutputs) {
		for (int i = 0; i < g->noutputs; i++) {
			char name[256];
			if (g->noutputs == 1)
				snprintf(name, sizeof name, "%s", e->name);
			else
				snprintf(name, sizeof name, "%s.%d", e->name, i);
			summary(name, outs[i]);
		}
		rc = 0;
		goto out;
	}
	/* encode every output first, then write them: a failure leaves no partial set */
	for (int i = 0; i < g->noutputs; i++) {
		Tensor *t = outs[i];
		size_t nb = (size_t)t->n * (size_t)dtype_size(t->dtype);
		void *raw = xmalloc(nb ? nb : 1);
		tensor_to_bytes(t, raw);
		npy_encode(t->dtype, t->rank, t->shape, raw, &bufs[i], &lens[i]);
		free(raw);
	}
	for (int i = 0; i < g->noutputs; i++)
		if (write_file_atomic(o->outputs[i], bufs[i], lens[i]) < 0) {
			error_plain(d, "cannot write %s: %s", o->outputs[i], strerror(errno));
			goto out;
		}
	rc = 0;
out:
	for (int i = 0; i < p->nparams; i++)
		tensor_free(params[i]);
	for (int i = 0; i < g->ninputs; i++)
		tensor_free(ins[i]);
	for (int i = 0; i < g->noutputs; i++) {
		tensor_free(outs[i]);
		free(bufs[i]);
	}
	free(params);
	free(ins);
	free(outs);
	free(bufs);
	free(lens);
	if (w)
		weights_close(w);
	return rc;
}

int write_random_weights(Program *p, Diag *d, uint64_t seed, const char *path, int progress)
{
	/* header: names, dtypes, shapes and offsets; data in param order */
	static const char *const st_names[DT_COUNT] = {"BOOL", "I32", "I64", "F32", "F64", "F16", "BF16", "I8", "U8", "I16", "U16"};
	json_t *h = json_object();
	size_t off = 0;
	if (!params_fit(p, d)) {
		json_decref(h);
		return 1;
	}
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		size_t nb = (size_t)shape_numel(pi->rank, pi->shape) * (size_t)dtype_size(pi->dtype);
		/* each fits (check_shape_size), all of them may not: one file */
		if (off + nb < off || off + nb > (size_t)INT64_MAX / 2) {
			error_at(d, pi->loc, "the params take 2^62 bytes or more in all, too many for one file");
			json_decref(h);
			return 1;
		}
		json_t *e = json_object(), *sh = json_array(), *offs = json_array();
		for (int k = 0; k < pi->rank; k++)
			json_array_append_new(sh, json_integer(pi->shape[k]));
		json_array_append_new(offs, json_integer((json_int_t)off));
		json_array_append_new(offs, json_integer((json_int_t)(off + nb)));
		json_object_set_new(e, "dtype", json_string(st_names[pi->dtype]));
		json_object_set_new(e, "shape", sh);
		json_object_set_new(e, "data_offsets", offs);
		json_object_set_new(h, pi->name, e);
		off += nb;
	}
	char *hs = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	size_t hl = strlen(hs), pad = (8 - hl % 8) % 8;
	size_t total = 8 + hl + pad + off;
	char *buf = xmalloc(total);
	uint64_t hlen = hl + pad;
	for (int i = 0; i < 8; i++)
		buf[i] = (char)(hlen >> (8 * i));
	memcpy(buf + 8, hs, hl);
	memset(buf + 8 + hl, ' ', pad);
	free(hs);
	char *data = buf + 8 + hl + pad;
	Progress pg;
	progress_start(&pg, progress, "making", (int64_t)off, 1);
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		Tensor *t = tensor_new(pi->dtype, pi->rank, pi->shape);
		random_fill_param(t, pi, seed);
		tensor_to_bytes(t, data);
		data += (size_t)t->n * (size_t)dtype_size(pi->dtype);
		tensor_free(t);
		progress_step(&pg, (int64_t)(data - (buf + 8 + hl + pad)), pi->name);
	}
	progress_end(&pg);
	int rc = 0;
	if (write_file_atomic(path, buf, total) < 0) {
		error_plain(d, "cannot write %s: %s", path, strerror(errno));
		rc = 1;
	}
	free(buf);
	return rc;
}

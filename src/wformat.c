/* wformat.c - weight formats: `--weights-format` parsed, and each param's
 * format decided on the lowered program.
 *
 * A format is a property of a weight, not of an op: a param held in q8_0
 * means the dequantized values everywhere, in the interpreter as in compiled
 * code. The blocks run along the axis its matmuls reduce (GGUF's layout: a
 * block is 32 consecutive elements of a row of W^T for x @ W), so a param is
 * eligible when every reader agrees on that axis and can read the format
 * directly: a 2-D matmul reading it as its right operand (axis 0), the same
 * through transpose(w, [1, 0]) (axis 1, the tied LM head), or a gather of
 * its rows (axis 1, the embedding). Norms' weights and biases are read by
 * elementwise ops and stay f32. Region calls are followed into the callee,
 * so a layer's weights passed to a region are judged by what the region does
 * with them. */
#include "wformat.h"

#include "nestrt.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[WF_COUNT] = {"f32", "bf16", "f16", "q8_0", "q4_0", "q4_k", "q6_k"};
static const int BLOCK[WF_COUNT] = {1, 1, 1, 32, 32, 256, 256};
static const int BLOCK_BYTES[WF_COUNT] = {4, 2, 2, 34, 18, 144, 210};

const char *wformat_name(int wf)
{
	return wf >= 0 && wf < WF_COUNT ? NAMES[wf] : "?";
}

int wformat_block(int wf)
{
	return wf >= 0 && wf < WF_COUNT ? BLOCK[wf] : 1;
}

int wformat_block_bytes(int wf)
{
	return wf >= 0 && wf < WF_COUNT ? BLOCK_BYTES[wf] : 4;
}

int wformat_dot(int wf)
{
	return wf == WF_Q8_0 || wf == WF_Q4_0 || wf == WF_Q4_K;
}

int64_t wformat_bytes(int wf, int64_t n)
{
	return n / wformat_block(wf) * wformat_block_bytes(wf);
}

static int find_format(const char *s, size_t len)
{
	for (int f = 0; f < WF_COUNT; f++)
		if (strlen(NAMES[f]) == len && !strncmp(NAMES[f], s, len))
			return f;
	return -1;
}

int wformat_parse(WFormatSpec *s, const char *arg)
{
	const char *p = arg;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		const char *f = eq ? eq + 1 : p;
		size_t flen = len - (size_t)(f - p);
		int fmt = find_format(f, flen);
		if (len == 0 || (eq && eq == p) || fmt < 0) {
			fprintf(stderr, "nestc: error: --weights-format: '%.*s' is not FMT or PATTERN=FMT, FMT one of "
			                "f32, bf16, f16, q8_0, q4_0, q4_k, q6_k\n", (int)len, p);
			return -1;
		}
		if (eq) {
			s->pat = xrealloc(s->pat, (size_t)(s->n + 1) * sizeof *s->pat);
			s->fmt = xrealloc(s->fmt, (size_t)(s->n + 1) * sizeof *s->fmt);
			char *pat = xcalloc((size_t)(eq - p) + 1, 1);
			memcpy(pat, p, (size_t)(eq - p));
			s->pat[s->n] = pat;
			s->fmt[s->n++] = fmt;
		} else {
			s->deflt = fmt;
		}
		if (!end)
			return 0;
		p = end + 1;
	}
}

void wformat_spec_free(WFormatSpec *s)
{
	for (int i = 0; i < s->n; i++)
		free((char *)s->pat[i]);
	free(s->pat);
	free(s->fmt);
	s->pat = NULL;
	s->fmt = NULL;
	s->n = 0;
}

/* ---- who reads a param ---- */

typedef struct Readers {
	int axis;           /* the axis the readers so far agree on, -1 none yet */
	const Node *bad;    /* the first reader that cannot take a format */
	const char *why;
} Readers;

static void reject(Readers *r, const Node *x, const char *why)
{
	if (!r->bad) {
		r->bad = x;
		r->why = why;
	}
}

static void read_along(Readers *r, const Node *x, int axis)
{
	if (r->axis >= 0 && r->axis != axis)
		reject(r, x, "reads it along its other axis");
	r->axis = axis;
}

/* Is x a matmul reading matrix m as its right operand (and not also as its
 * left)? Its left may be a vector, a matrix or a batch of them (one product
 * of all their rows, codegen/matmul.c). */
static int mm_right(const Node *x, const Node *m)
{
	return x->op == OP_MATMUL && x->in[1] == m && x->in[0] != m && m->rank == 2;
}

/* Every reader of n (a [rows, cols] matrix) in g, and through calls in the callees. */
static void readers(Graph *g, Node *n, Readers *r, int depth)
{
	for (int j = 0; j < g->noutputs; j++)
		if (g->outputs[j] == n)
			reject(r, n, "returns it");
	for (int i = n->id + 1; i < g->nnodes && !r->bad; i++) {
		Node *x = g->nodes[i];
		for (int k = 0; k < x->nin && !r->bad; k++) {
			if (x->in[k] != n)
				continue;
			if (x->op == OP_CALL) {
				if (depth > 64 || k >= x->callee->ninputs)
					reject(r, x, "passes it on");
				else
					readers(x->callee, x->callee->inputs[k], r, depth + 1);
			} else if (mm_right(x, n)) {
				read_along(r, x, 0);
			} else if (x->op == OP_GATHER && k == 0) {
				read_along(r, x, 1);
			} else if (x->op == OP_TRANSPOSE && x->a[0] == 1 && x->a[1] == 0) {
				int users = 0;
				for (int u = i + 1; u < g->nnodes; u++)
					for (int q = 0; q < g->nodes[u]->nin; q++)
						if (g->nodes[u]->in[q] == x) {
							/* as plan.c's virtual_transpose: a 2-D product reads it in place */
							if (!mm_right(g->nodes[u], x) || g->nodes[u]->in[0]->rank != 2)
								reject(r, g->nodes[u], "reads its transpose other than as a 2-D matmul's right operand");
							users++;
						}
				for (int j = 0; j < g->noutputs; j++)
					if (g->outputs[j] == x)
						reject(r, x, "returns its transpose");
				if (users)
					read_along(r, x, 1);
			} else {
				reject(r, x, NULL);
			}
		}
	}
}

/* The reasons a param cannot be held in wf: NULL when it can (axis set). */
static const char *eligible(Program *p, int i, int wf, int *axis, const Node **at, char *buf, size_t len)
{
	ParamInfo *pi = &p->params[i];
	*at = NULL;
	if (pi->dtype != DT_F32) {
		snprintf(buf, len, "it is %s; weight formats hold f32 params", dtype_name(pi->dtype));
		return buf;
	}
	if (pi->rank != 2) {
		snprintf(buf, len, "it has rank %d; weight formats hold matrices", pi->rank);
		return buf;
	}
	Readers r = {.axis = -1};
	int seen = 0;
	for (int e = 0; e < p->nentries && !r.bad; e++) {
		Graph *g = p->entries[e].g;
		for (int k = 0; k < g->nnodes && !r.bad; k++)
			if (g->nodes[k]->op == OP_PARAM && g->nodes[k]->a[0] == i) {
				readers(g, g->nodes[k], &r, 0);
				seen = 1;
			}
	}
	if (r.bad) {
		*at = r.bad;
		snprintf(buf, len, "%s %s", r.bad->op == OP_CALL ? "a call" : op_name(r.bad->op),
		         r.why ? r.why : "reads it (only matmuls and gathers read a formatted weight)");
		return buf;
	}
	if (!seen || r.axis < 0) {
		snprintf(buf, len, "nothing reads it");
		return buf;
	}
	int64_t len_ax = pi->shape[r.axis];
	if (len_ax % wformat_block(wf)) {
		snprintf(buf, len, "its axis %d (%lld long, the one its matmuls reduce) is not a multiple of %s's block of %d",
		         r.axis, (long long)len_ax, wformat_name(wf), wformat_block(wf));
		return buf;
	}
	*axis = r.axis;
	return NULL;
}

int wformat_assign(Program *p, Diag *d, const WFormatSpec *s)
{
	int errors = 0;
	for (int i = 0; i < p->nparams; i++) {
		p->params[i].wformat = WF_F32;
		p->params[i].waxis = 0;
	}
	if (s->deflt < 0 && s->n == 0)
		return 0;
	int *used = xcalloc((size_t)s->n + 1, sizeof *used);
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		int wf = s->deflt, explicit = -1;
		for (int k = 0; k < s->n; k++)
			if (fnmatch(s->pat[k], pi->name, 0) == 0) {
				wf = s->fmt[k];
				explicit = k;
				used[k] = 1;
			}
		if (wf <= WF_F32)
			continue;
		int axis = 0;
		const Node *at;
		char buf[256];
		const char *why = eligible(p, i, wf, &axis, &at, buf, sizeof buf);
		if (why && explicit < 0 && wformat_block(wf) == 256 && !eligible(p, i, WF_Q8_0, &axis, &at, buf, sizeof buf)) {
			/* a k-quant's super-block does not divide the axis (LLaMA's F = 688
			 * at a small size): llama.cpp's quantizer falls back too */
			wf = WF_Q8_0;
			why = NULL;
		}
		if (!why) {
			pi->wformat = wf;
			pi->waxis = axis;
		} else if (explicit >= 0) {
			/* asked for by name: say why it cannot be */
			error_at(d, at ? at->loc : pi->loc, "--weights-format '%s=%s': param '%s' cannot be %s: %s", s->pat[explicit],
			         wformat_name(wf), pi->name, wformat_name(wf), why);
			errors++;
		}
	}
	for (int k = 0; k < s->n; k++)
		if (!used[k])
			warning_plain(d, "--weights-format '%s=%s': the pattern matches no param", s->pat[k], wformat_name(s->fmt[k]));
	free(used);
	return errors;
}

int wformat_round_trip(const ParamInfo *pi, float *data, char *why, size_t len)
{
	if (pi->wformat == WF_F32)
		return 0;
	int64_t rows = pi->shape[0], cols = pi->shape[1];
	/* the lines the blocks run along: rows (axis 1) or columns (axis 0) */
	int64_t nl = pi->waxis == 1 ? rows : cols, ll = pi->waxis == 1 ? cols : rows;
	float *line = xcalloc((size_t)ll + 1, sizeof *line);
	void *q = xcalloc((size_t)wformat_bytes(pi->wformat, ll) + 1, 1);
	int rc = 0;
	for (int64_t l = 0; l < nl && rc == 0; l++) {
		for (int64_t j = 0; j < ll; j++)
			line[j] = pi->waxis == 1 ? data[l * cols + j] : data[j * cols + l];
		nestrt_error e;
		if (nestrt_quantize(pi->wformat, line, ll, q, &e) < 0) {
			snprintf(why, len, "param '%s' in %s: %s %lld: %s", pi->name, wformat_name(pi->wformat),
			         pi->waxis == 1 ? "row" : "column", (long long)l, e.message);
			rc = -1;
			break;
		}
		nestrt_dequantize(pi->wformat, q, ll, line);
		for (int64_t j = 0; j < ll; j++)
			*(pi->waxis == 1 ? &data[l * cols + j] : &data[j * cols + l]) = line[j];
	}
	free(line);
	free(q);
	return rc;
}

int wformat_mask(const Program *p)
{
	int m = 0;
	for (int i = 0; i < p->nparams; i++)
		if (p->params[i].wformat != WF_F32)
			m |= 1 << p->params[i].wformat;
	return m;
}

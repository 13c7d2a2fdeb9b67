/* patterns.c - the multi-node subgraphs exporters write for one function,
 * recognised and translated as the Nest builtin that is that function:
 * layernorm (ReduceMean .. Add, before opset 17), tanh-GELU, exact (erf)
 * GELU and SiLU (x * Sigmoid(x): torch's nn.SiLU before opset 14's
 * functions, EfficientNet's activation). The builtin is what the
 * hand-written samples use, and what the fusion planner knows: GELU becomes
 * a matmul epilogue and SiLU a convolution's, where the nodes one by one
 * were a separate elementwise pass (x is read twice, so the chain could not
 * follow the product).
 *
 * Two steps: find_patterns looks at the graph's structure alone (ops,
 * wiring, intermediates used once); try_pattern, when the nodes are
 * translated, checks the values (constants, shapes) and falls back to the
 * nodes one by one when they do not fit. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every name the graph reads (node inputs, graph outputs), sorted: the uses
 * of a name are a range of it. */
typedef struct Uses {
	const char **name;
	size_t n;
} Uses;

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static Uses uses_index(Onnx__GraphProto *g)
{
	Uses u = {0};
	size_t cap = g->n_output;
	for (size_t k = 0; k < g->n_node; k++)
		cap += g->node[k]->n_input;
	u.name = xmalloc((cap + 1) * sizeof *u.name);
	for (size_t k = 0; k < g->n_node; k++)
		for (size_t j = 0; j < g->node[k]->n_input; j++)
			if (g->node[k]->input[j])
				u.name[u.n++] = g->node[k]->input[j];
	for (size_t j = 0; j < g->n_output; j++)
		if (g->output[j]->name)
			u.name[u.n++] = g->output[j]->name;
	qsort(u.name, u.n, sizeof *u.name, cmp_name);
	return u;
}

static int uses_of(const Uses *u, const char *name)
{
	size_t lo = 0, hi = u->n;
	while (lo < hi) { /* the first not below name */
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(u->name[mid], name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int n = 0;
	while (lo + (size_t)n < u->n && !strcmp(u->name[lo + (size_t)n], name))
		n++;
	return n;
}

static int is_op(Onnx__NodeProto *n, const char *op, size_t nin)
{
	if (!n->op_type || strcmp(n->op_type, op) || n->n_input != nin || n->n_output != 1 || !n->output[0])
		return 0;
	for (size_t j = 0; j < nin; j++)
		if (!n->input[j])
			return 0;
	return 1;
}

static int has_in(Onnx__NodeProto *n, const char *name)
{
	for (size_t j = 0; j < n->n_input; j++)
		if (n->input[j] && !strcmp(n->input[j], name))
			return 1;
	return 0;
}

/* The other operand of a two-input node. */
static const char *other_in(Onnx__NodeProto *n, const char *name)
{
	return !strcmp(n->input[0], name) ? n->input[1] : n->input[0];
}

/* The first `want` nodes from k on that are not Constant nodes (exporters
 * put the constants a pattern uses among its nodes); the index of the last,
 * or -1 when there are fewer. */
static int pattern_nodes(Onnx__GraphProto *g, int k, Onnx__NodeProto **q, int want)
{
	int got = 0, j = k;
	for (; j < (int)g->n_node && got < want; j++) {
		Onnx__NodeProto *n = g->node[j];
		if (n->op_type && !strcmp(n->op_type, "Constant") && j > k)
			continue;
		q[got++] = n;
	}
	return got == want ? j - 1 : -1;
}

static int near(Val *v, double want)
{
	return v && v->known && v->n == 1 && fabs(kget(v, 0) - want) <= 1e-6 * fabs(want) + 1e-7;
}

/* ---------------------------------------------------------------- layernorm */

/* LayerNormalization as exporters before opset 17 write it: ReduceMean, Sub,
 * Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul weight, Add bias (Constant
 * nodes among them), the intermediates used nowhere else. The last node's
 * index, or -1. */
static int match_layernorm(Onnx__GraphProto *g, const Uses *uses, int k)
{
	Onnx__NodeProto *q[9];
	if (!is_op(g->node[k], "ReduceMean", 1) && !is_op(g->node[k], "ReduceMean", 2))
		return -1;
	int last = pattern_nodes(g, k, q, 9);
	if (last < 0)
		return -1;
	const char *x = q[0]->input[0], *m = q[0]->output[0];
	if (!is_op(q[1], "Sub", 2) || strcmp(q[1]->input[0], x) || strcmp(q[1]->input[1], m))
		return -1;
	const char *d = q[1]->output[0];
	if (!is_op(q[2], "Pow", 2) || strcmp(q[2]->input[0], d))
		return -1;
	if (!(is_op(q[3], "ReduceMean", 1) || is_op(q[3], "ReduceMean", 2)) || strcmp(q[3]->input[0], q[2]->output[0]))
		return -1;
	if (!is_op(q[4], "Add", 2) || !has_in(q[4], q[3]->output[0]))
		return -1;
	if (!is_op(q[5], "Sqrt", 1) || strcmp(q[5]->input[0], q[4]->output[0]))
		return -1;
	if (!is_op(q[6], "Div", 2) || strcmp(q[6]->input[0], d) || strcmp(q[6]->input[1], q[5]->output[0]))
		return -1;
	if (!is_op(q[7], "Mul", 2) || !has_in(q[7], q[6]->output[0]))
		return -1;
	if (!is_op(q[8], "Add", 2) || !has_in(q[8], q[7]->output[0]))
		return -1;
	int ok = uses_of(uses, m) == 1 && uses_of(uses, d) == 2;
	for (int j = 2; ok && j < 8; j++)
		ok = uses_of(uses, q[j]->output[0]) == 1;
	return ok ? last : -1;
}

/* Translates the pattern at nodes k.. as one layernorm when the values
 * allow (last axis, a known exponent 2 and eps, 1-d weight and bias); 1 if
 * done, 0 to translate the nodes one by one, -1 after an error. */
static int try_layernorm(Ctx *c, Onnx__GraphProto *g, int k)
{
	Onnx__NodeProto *q[9];
	if (pattern_nodes(g, k, q, 9) < 0)
		return 0;
	Val *x = find_val(c, q[0]->input[0]);
	if (!x || x->known || !dtype_is_float(x->dt) || x->rank < 1)
		return 0;
	int64_t last = x->shape[x->rank - 1];
	for (int j = 0; j < 4; j += 3) {
		int64_t ax[MAX_RANK + 1];
		int na = attr_ints(q[j], "axes", ax, MAX_RANK);
		if (na < 0 && q[j]->n_input == 2) {
			Val *av = find_val(c, q[j]->input[1]);
			if (!av || !av->known || av->n != 1)
				return 0;
			ax[0] = kgeti(av, 0);
			na = 1;
		}
		if (na != 1 || (ax[0] != -1 && ax[0] != x->rank - 1) || !attr_i(q[j], "keepdims", 1))
			return 0;
	}
	Val *two = find_val(c, q[2]->input[1]);
	Val *eps = find_val(c, other_in(q[4], q[3]->output[0]));
	Val *w = find_val(c, other_in(q[7], q[6]->output[0]));
	Val *b = find_val(c, other_in(q[8], q[7]->output[0]));
	if (!two || !two->known || two->n != 1 || kget(two, 0) != 2 || !eps || !eps->known || eps->n != 1 || !w || !b)
		return 0;
	if (w->rank != 1 || b->rank != 1 || w->shape[0] != last || b->shape[0] != last || w->dt != x->dt || b->dt != x->dt)
		return 0;
	char el[64];
	if (!float_lit(el, sizeof el, kget(eps, 0), x->dt))
		return 0;
	c->node = q[8];
	NodeIO io = {.n = q[8]};
	const char *xs = ref(c, x);
	char *xs2 = xstrdup(xs);
	const char *ws = ref(c, w);
	char *ws2 = xstrdup(ws);
	const char *bs = ref(c, b);
	Val *o = def(c, &io, 0, x->dt, x->rank, x->shape, "layernorm(%s, %s, %s, eps=%s)", xs2, ws2, bs, el);
	free(xs2);
	free(ws2);
	return o ? 1 : -1;
}

/* ---------------------------------------------------------------- GELU, tanh form */

/* Mul x x, Mul x _, Mul _ c, Add x _, Mul _ c, Tanh, Add _ 1, Mul x _,
 * Mul _ 0.5, the intermediates used once. The last node's index, or -1. */
static int match_gelu_tanh(Onnx__GraphProto *g, const Uses *uses, int k)
{
	Onnx__NodeProto *q[9];
	if (!is_op(g->node[k], "Mul", 2))
		return -1;
	int last = pattern_nodes(g, k, q, 9);
	if (last < 0)
		return -1;
	const char *x = q[0]->input[0];
	int ok = !strcmp(q[0]->input[1], x);
	ok = ok && is_op(q[1], "Mul", 2) && has_in(q[1], x) && has_in(q[1], q[0]->output[0]);
	ok = ok && is_op(q[2], "Mul", 2) && has_in(q[2], q[1]->output[0]);
	ok = ok && is_op(q[3], "Add", 2) && has_in(q[3], x) && has_in(q[3], q[2]->output[0]);
	ok = ok && is_op(q[4], "Mul", 2) && has_in(q[4], q[3]->output[0]);
	ok = ok && is_op(q[5], "Tanh", 1) && !strcmp(q[5]->input[0], q[4]->output[0]);
	ok = ok && is_op(q[6], "Add", 2) && has_in(q[6], q[5]->output[0]);
	ok = ok && is_op(q[7], "Mul", 2) && has_in(q[7], x) && has_in(q[7], q[6]->output[0]);
	ok = ok && is_op(q[8], "Mul", 2) && has_in(q[8], q[7]->output[0]);
	for (int j = 0; ok && j < 8; j++)
		ok = uses_of(uses, q[j]->output[0]) == 1;
	return ok ? last : -1;
}

/* As gelu_tanh(x): 1 if done, 0 if the constants differ. */
static int try_gelu_tanh(Ctx *c, Onnx__GraphProto *g, int k)
{
	Onnx__NodeProto *q[9];
	if (pattern_nodes(g, k, q, 9) < 0)
		return 0;
	Val *x = find_val(c, q[0]->input[0]);
	if (!x || x->known || !dtype_is_float(x->dt))
		return 0;
	if (!near(find_val(c, other_in(q[2], q[1]->output[0])), 0.044715) ||
	    !near(find_val(c, other_in(q[4], q[3]->output[0])), 0.7978845608028654) ||
	    !near(find_val(c, other_in(q[6], q[5]->output[0])), 1) || !near(find_val(c, other_in(q[8], q[7]->output[0])), 0.5))
		return 0;
	c->node = q[8];
	NodeIO io = {.n = q[8]};
	return def(c, &io, 0, x->dt, x->rank, x->shape, "gelu_tanh(%s)", ref(c, x)) ? 1 : -1;
}

/* ---------------------------------------------------------------- GELU, erf form */

/* x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes, in any of the orders
 * exporters write: s = Div x c (or Mul x c), e = Erf s, a = Add e c, and two
 * Muls that multiply x, a and a constant (x * a, then * 0.5: torch's
 * F.gelu; x * 0.5 first, then * a: Hugging Face's gelu), the last node
 * the second Mul, every intermediate used once. The names of the
 * constants (checked when translated) in the roles below. */
typedef struct GeluErf {
	const char *x, *scale, *one, *half;
	int div;          /* the scale divides (by sqrt 2), else multiplies (by 1/sqrt 2) */
	Onnx__NodeProto *out;
} GeluErf;

static int match_gelu_erf(Onnx__GraphProto *g, const Uses *uses, int k, GeluErf *m)
{
	Onnx__NodeProto *q[5];
	if (!is_op(g->node[k], "Div", 2) && !is_op(g->node[k], "Mul", 2))
		return -1;
	int last = pattern_nodes(g, k, q, 5);
	if (last < 0)
		return -1;
	int e = -1, s = -1, a = -1, m1 = -1;
	for (int j = 0; j < 5; j++)
		if (is_op(q[j], "Erf", 1))
			e = e < 0 ? j : 9;
	if (e < 1 || e > 3)
		return -1;
	for (int j = 0; j < e; j++)
		if (!strcmp(q[j]->output[0], q[e]->input[0]))
			s = j;
	for (int j = e + 1; j < 5; j++)
		if (is_op(q[j], "Add", 2) && has_in(q[j], q[e]->output[0]))
			a = j;
	if (s < 0 || a < 0 || a == 4 || !(is_op(q[s], "Div", 2) || is_op(q[s], "Mul", 2)))
		return -1;
	for (int j = 0; j < 4; j++)
		if (j != s && j != e && j != a)
			m1 = j;
	Onnx__NodeProto *p = q[m1], *y = q[4];
	if (!is_op(p, "Mul", 2) || !is_op(y, "Mul", 2) || !has_in(y, p->output[0]) || !strcmp(y->input[0], y->input[1]))
		return -1;
	/* the three operands of the two Muls: x, a and the half */
	const char *leaf[3] = {p->input[0], p->input[1], other_in(y, p->output[0])};
	const char *aout = q[a]->output[0];
	int ia = -1;
	for (int j = 0; j < 3; j++)
		if (!strcmp(leaf[j], aout))
			ia = ia < 0 ? j : 9;
	if (ia < 0 || ia > 2)
		return -1;
	const char *x = NULL;
	int ix = -1;
	for (int t = 0; t < (is_op(q[s], "Div", 2) ? 1 : 2); t++)
		for (int j = 0; j < 3; j++)
			if (j != ia && !strcmp(leaf[j], q[s]->input[t])) {
				if (x && strcmp(x, q[s]->input[t]))
					return -1; /* both operands of the scale are there: which is x? */
				x = q[s]->input[t];
				ix = j;
			}
	if (!x)
		return -1;
	int ih = 3 - ia - ix;
	if (ih == ia || ih == ix || !strcmp(leaf[ih], x) || !strcmp(leaf[ih], aout))
		return -1;
	/* every intermediate used once (uses NULL: known to be) */
	const char *mid[4] = {q[s]->output[0], q[e]->output[0], aout, p->output[0]};
	for (int j = 0; uses && j < 4; j++)
		if (uses_of(uses, mid[j]) != 1)
			return -1;
	*m = (GeluErf){.x = x, .scale = other_in(q[s], x), .one = other_in(q[a], q[e]->output[0]), .half = leaf[ih],
	               .div = is_op(q[s], "Div", 2), .out = y};
	return last;
}

/* As gelu(x) (Nest's is exact: 0.5 x (1 + erf(x / sqrt 2))): 1 if done, 0
 * if the values differ. */
static int try_gelu_erf(Ctx *c, Onnx__GraphProto *g, int k)
{
	GeluErf m;
	if (match_gelu_erf(g, NULL, k, &m) < 0) /* the roles (find_patterns checked the uses) */
		return 0;
	Val *x = find_val(c, m.x);
	if (!x || x->known || !dtype_is_float(x->dt))
		return 0;
	Val *sc = find_val(c, m.scale), *one = find_val(c, m.one), *half = find_val(c, m.half);
	if (!near(sc, m.div ? 1.4142135623730951 : 0.7071067811865476) || !near(one, 1) || !near(half, 0.5))
		return 0;
	/* scalars that do not widen x's shape, of its dtype */
	Val *cs[3] = {sc, one, half};
	for (int j = 0; j < 3; j++)
		if (cs[j]->rank > x->rank || cs[j]->dt != x->dt)
			return 0;
	c->node = m.out;
	NodeIO io = {.n = m.out};
	return def(c, &io, 0, x->dt, x->rank, x->shape, "gelu(%s)", ref(c, x)) ? 1 : -1;
}

/* ---------------------------------------------------------------- SiLU */

/* Sigmoid x, Mul x _ (either order), the sigmoid used once. The last node's
 * index, or -1. */
static int match_silu(Onnx__GraphProto *g, const Uses *uses, int k)
{
	Onnx__NodeProto *q[2];
	if (!is_op(g->node[k], "Sigmoid", 1))
		return -1;
	int last = pattern_nodes(g, k, q, 2);
	if (last < 0)
		return -1;
	const char *x = q[0]->input[0], *s = q[0]->output[0];
	int ok = strcmp(x, s) && is_op(q[1], "Mul", 2) && has_in(q[1], x) && has_in(q[1], s) &&
	         strcmp(q[1]->input[0], q[1]->input[1]) && uses_of(uses, s) == 1;
	return ok ? last : -1;
}

/* As silu(x): 1 if done, 0 if x is not a float tensor. */
static int try_silu(Ctx *c, Onnx__GraphProto *g, int k)
{
	Onnx__NodeProto *q[2];
	/* equivalent mutant [cmp < -> <=]: the index of the second node, past
	 * k's, is never 0 */
	if (pattern_nodes(g, k, q, 2) < 0)
		return 0;
	Val *x = find_val(c, q[0]->input[0]);
	if (!x || x->known || !dtype_is_float(x->dt))
		return 0;
	c->node = q[1];
	NodeIO io = {.n = q[1]};
	return def(c, &io, 0, x->dt, x->rank, x->shape, "silu(%s)", ref(c, x)) ? 1 : -1;
}

/* ---------------------------------------------------------------- both steps */

PatMark *find_patterns(Onnx__GraphProto *g)
{
	int n = (int)g->n_node;
	PatMark *pm = xcalloc((size_t)n + 1, sizeof *pm);
	Uses uses = uses_index(g);
	for (int k = 0, end = -1; k < n; k++) {
		if (k <= end || !g->node[k]->op_type)
			continue; /* inside the pattern before */
		GeluErf ge;
		int last;
		if ((last = match_layernorm(g, &uses, k)) >= 0)
			pm[k].kind = PAT_LAYERNORM;
		else if ((last = match_gelu_tanh(g, &uses, k)) >= 0)
			pm[k].kind = PAT_GELU_TANH;
		else if ((last = match_gelu_erf(g, &uses, k, &ge)) >= 0)
			pm[k].kind = PAT_GELU_ERF;
		else if ((last = match_silu(g, &uses, k)) >= 0)
			pm[k].kind = PAT_SILU;
		if (pm[k].kind) {
			pm[k].last = last;
			end = last;
		}
	}
	free(uses.name);
	return pm;
}

int try_pattern(Ctx *c, Onnx__GraphProto *g, int k, const PatMark *m)
{
	switch (m->kind) {
	case PAT_LAYERNORM: return try_layernorm(c, g, k);
	case PAT_GELU_TANH: return try_gelu_tanh(c, g, k);
	case PAT_GELU_ERF: return try_gelu_erf(c, g, k);
	case PAT_SILU: return try_silu(c, g, k);
	default: return 0;
	}
}

/* ir.c - the tensor graph IR: the table of ops (from ops.def), construction,
 * the text of a node for fingerprints, and the --dump=ir text. */
#include "nestc.h"

#include <string.h>

const OpInfo op_info[OP_COUNT] = {
#define OP(e, text, cls, lo, hi, attrs, flags, verb) [OP_##e] = {text, cls, lo, hi, attrs, flags, verb},
#include "ops.def"
#undef OP
};

const char *op_name(Op op)
{
	if ((int)op < 0 || op >= OP_COUNT)
		ice("op_name: bad op %d", (int)op);
	return op_info[op].name;
}

int op_elementwise(Op op)
{
	switch (op_info[op].cls) {
	case OPC_UNARY: case OPC_CAST: case OPC_BINARY: case OPC_COMPARE: case OPC_LOGIC: case OPC_SELECT:
		return 1;
	default:
		return 0;
	}
}

void node_check_inputs(const Node *n)
{
	const OpInfo *oi = &op_info[n->op];
	if (n->nin < oi->min_in || (oi->max_in >= 0 && n->nin > oi->max_in))
		ice("%s %%%d has %d inputs", oi->name, n->id, n->nin);
}

int64_t conv_dilation(const Node *n, int k)
{
	return n->a[5 + k] ? n->a[5 + k] : 1;
}

/* A double's bits in an integer attribute: a[] is all integers, and the
 * region pass compares and fingerprints it like any other. */
int64_t resize_scale_bits(double scale)
{
	int64_t b;
	memcpy(&b, &scale, sizeof b);
	return b;
}

double resize_scale(const Node *n, int k)
{
	double s;
	memcpy(&s, &n->a[1 + k], sizeof s);
	return s;
}

Graph *graph_new(Program *p, const char *name, Decl *fn)
{
	Graph *g = arena_alloc(p->arena, sizeof *g);
	g->name = name;
	g->fn = fn;
	g->id = p->graphs.n;
	avec_push(p->arena, &p->graphs, g);
	return g;
}

Node *node_new(Program *p, Graph *g, Op op, DType dt, int rank, const int64_t *shape, Loc loc)
{
	if (rank < 0 || rank > MAX_RANK)
		ice("node_new: rank %d", rank);
	Node *n = arena_alloc(p->arena, sizeof *n);
	n->op = op;
	n->dtype = dt;
	n->rank = rank;
	if (rank)
		memcpy(n->shape, shape, (size_t)rank * sizeof(int64_t));
	n->loc = loc;
	if (g->nnodes == g->cap) {
		int cap = g->cap ? g->cap * 2 : 16;
		Node **nodes = arena_alloc(p->arena, (size_t)cap * sizeof(Node *));
		if (g->nnodes)
			memcpy(nodes, g->nodes, (size_t)g->nnodes * sizeof(Node *));
		g->nodes = nodes;
		g->cap = cap;
	}
	n->id = g->nnodes;
	g->nodes[g->nnodes++] = n;
	return n;
}

void node_add_input(Program *p, Node *n, Node *in)
{
	/* inputs arrays are small; grow by copying into the arena */
	Node **v = arena_alloc(p->arena, (size_t)(n->nin + 1) * sizeof(Node *));
	if (n->nin)
		memcpy(v, n->in, (size_t)n->nin * sizeof(Node *));
	v[n->nin++] = in;
	n->in = v;
}

int64_t shape_numel(int rank, const int64_t *shape)
{
	/* saturating: a count that does not fit is INT64_MAX, never a wrapped
	 * value (shape_size_error reports such shapes where they are made) */
	int64_t n = 1;
	for (int i = 0; i < rank; i++)
		if (shape[i] == 0)
			return 0;
	for (int i = 0; i < rank; i++)
		if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n))
			return INT64_MAX;
	return n;
}

int shape_size_error(DType dt, int rank, const int64_t *shape)
{
	int64_t n = 1, bytes;
	for (int i = 0; i < rank; i++)
		if (shape[i] == 0)
			return 0; /* an empty tensor, whatever its other dimensions */
	for (int i = 0; i < rank; i++)
		if (__builtin_mul_overflow(n, shape[i], &n))
			return 1;
	if (__builtin_mul_overflow(n, (int64_t)dtype_size(dt), &bytes))
		return 2;
	return 0;
}

void node_text(Buf *b, Node *n)
{
	buf_printf(b, "%d %d %d [", n->op, n->dtype, n->rank);
	for (int k = 0; k < n->rank; k++)
		buf_printf(b, "%lld ", (long long)n->shape[k]);
	buf_puts(b, "] (");
	for (int k = 0; k < n->nin; k++)
		buf_printf(b, "%d ", n->in[k]->id);
	buf_puts(b, ")");
	for (int k = 0; k < 16; k++)
		if (n->a[k])
			buf_printf(b, " a%d=%lld", k, (long long)n->a[k]);
}

void shape_str(Buf *b, DType dt, int rank, const int64_t *shape)
{
	buf_puts(b, dtype_name(dt));
	buf_putc(b, '[');
	for (int i = 0; i < rank; i++)
		buf_printf(b, "%s%lld", i ? ", " : "", (long long)shape[i]);
	buf_putc(b, ']');
}

static void dump_node(FILE *f, Program *p, Graph *g, Node *n)
{
	if (n->op == OP_CALL) {
		fprintf(f, "  %%%d = call @%s(", n->id, n->callee->name);
		for (int i = 0; i < n->nin; i++)
			fprintf(f, "%s%%%d", i ? ", " : "", n->in[i]->id);
		fputc(')', f);
		if (n->a[3])
			fprintf(f, " or %%%lld when %s == %lld", (long long)(n->a[3] - 1),
			         g->dim_names ? g->dim_names[n->a[4] - 1] : "?", (long long)n->a[5]);
		if (n->a[2])
			fputs(" (specialised alternative)", f);
		fputc('\n', f);
		return;
	}
	Buf b = {0};
	if (g->ngdyn)
		dyn_shape_str(p->arena, &b, g, n);
	else
		shape_str(&b, n->dtype, n->rank, n->shape);
	fprintf(f, "  %%%d = %s %s", n->id, op_name(n->op), b.s);
	buf_free(&b);
	for (int i = 0; i < n->nin; i++)
		fprintf(f, "%s%%%d", i ? ", " : " ", n->in[i]->id);
	switch (op_info[n->op].attrs) {
	case OPA_INPUT:
		fprintf(f, " #%lld", (long long)n->a[0]);
		break;
	case OPA_PARAM:
		fprintf(f, " \"%s\"", p->params[n->a[0]].name);
		break;
	case OPA_STATE:
		fprintf(f, " \"%s\"", p->states[n->a[0]].name);
		break;
	case OPA_VALUE:
		if (dtype_is_float(n->dtype))
			fprintf(f, " %.17g", n->fval);
		else
			fprintf(f, " %lld", (long long)n->ival);
		break;
	case OPA_AXES:
		fprintf(f, " axes=0x%llx keepdim=%lld", (unsigned long long)n->a[0], (long long)n->a[1]);
		break;
	case OPA_AXIS:
		fprintf(f, " axis=%lld", (long long)n->a[0]);
		break;
	case OPA_EPS:
		fprintf(f, " eps=%g", n->fval);
		break;
	case OPA_PERM:
	case OPA_START: {
		int start = op_info[n->op].attrs == OPA_START;
		int r = start ? n->in[0]->rank : n->rank;
		fprintf(f, " %s=[", start ? "start" : "perm");
		for (int i = 0; i < r; i++)
			fprintf(f, "%s%lld", i ? ", " : "", (long long)n->a[i]);
		fputc(']', f);
		break;
	}
	case OPA_CONV:
		fprintf(f, " stride=[%lld, %lld] padding=[%lld, %lld] groups=%lld", (long long)n->a[0],
		        (long long)n->a[1], (long long)n->a[2], (long long)n->a[3], (long long)n->a[4]);
		if (n->a[5] || n->a[6])
			fprintf(f, " dilation=[%lld, %lld]", (long long)n->a[5], (long long)n->a[6]);
		break;
	case OPA_CONVT:
		fprintf(f, " stride=[%lld, %lld] padding=[%lld, %lld] groups=%lld dilation=[%lld, %lld] output_padding=[%lld, %lld]",
		        (long long)n->a[0], (long long)n->a[1], (long long)n->a[2], (long long)n->a[3],
		        (long long)n->a[4], (long long)n->a[5], (long long)n->a[6], (long long)n->a[7],
		        (long long)n->a[8]);
		break;
	case OPA_RESIZE:
		fprintf(f, " scale=[%.9g, %.9g]%s", resize_scale(n, 0), resize_scale(n, 1),
		        n->a[0] ? " align_corners" : "");
		break;
	case OPA_POOL:
		fprintf(f, " kernel=[%lld, %lld] stride=[%lld, %lld] padding=[%lld, %lld]",
		        (long long)n->a[0], (long long)n->a[1], (long long)n->a[2], (long long)n->a[3],
		        (long long)n->a[4], (long long)n->a[5]);
		break;
	case OPA_RESULT:
		fprintf(f, " .%lld", (long long)n->a[0]);
		break;
	case OPA_NONE:
		/* causal_mask's offset (narrowing moves it), unless taken at run time (below) */
		if (n->op == OP_CAUSAL_MASK && n->a[0] && !gdyn_find(g, n->id, 16))
			fprintf(f, " offset=%lld", (long long)n->a[0]);
		break;
	}
	/* the integers taken at run time */
	for (int k = 0; k < g->ngdyn; k++)
		if (g->gdyn[k].node == n->id && g->gdyn[k].field >= MAX_RANK) {
			GDyn *d = &g->gdyn[k];
			int fld = d->field;
			fprintf(f, " a%d=%s", fld - 16, affine_str(p->arena, &d->f, g->nbasis, g->dim_names));
		}
	fputc('\n', f);
}

void ir_dump(FILE *f, Program *p)
{
	for (int i = 0; i < p->nparams; i++) {
		Buf b = {0};
		shape_str(&b, p->params[i].dtype, p->params[i].rank, p->params[i].shape);
		fprintf(f, "param %d \"%s\" %s\n", i, p->params[i].name, b.s);
		buf_free(&b);
	}
	for (int gi = 0; gi < p->graphs.n; gi++) {
		Graph *g = p->graphs.v[gi];
		if (gi > 0 || p->nparams > 0)
			fputc('\n', f);
		fprintf(f, "%s %s", g->is_region ? "region" : "entry", g->name);
		if (g->key)
			fprintf(f, " [%s]", g->key);
		for (int k = 0; k < g->nbasis; k++)
			fprintf(f, "%s%s", k ? ", " : " dims ", g->dim_names[k]);
		fputs(" (", f);
		for (int i = 0; i < g->ninputs; i++)
			fprintf(f, "%s%%%d %s", i ? ", " : "", g->inputs[i]->id,
			        g->input_names ? g->input_names[i] : "");
		fputs(") {\n", f);
		for (int i = 0; i < g->nnodes; i++)
			dump_node(f, p, g, g->nodes[i]);
		fputs("  return", f);
		for (int i = 0; i < g->noutputs; i++)
			fprintf(f, "%s%%%d", i ? ", " : " ", g->outputs[i]->id);
		fputs("\n}\n", f);
	}
}

/* ---- run-time dims (dims.c makes them) ---- */

const char *affine_str(Arena *a, const Affine *f, int n, const char *const *names)
{
	Buf b = {0};
	for (int j = 0; j < n; j++) {
		int64_t c = f->coef[j];
		if (!c)
			continue;
		if (b.len)
			buf_puts(&b, c < 0 ? " - " : " + ");
		else if (c < 0)
			buf_putc(&b, '-');
		int64_t m = c < 0 ? -c : c;
		if (m != 1)
			buf_printf(&b, "%lld*", (long long)m);
		buf_puts(&b, names[j]);
	}
	if (f->c0 || !b.len) {
		if (b.len)
			buf_printf(&b, " %c %lld", f->c0 < 0 ? '-' : '+', (long long)(f->c0 < 0 ? -f->c0 : f->c0));
		else
			buf_printf(&b, "%lld", (long long)f->c0);
	}
	const char *r = arena_strdup(a, b.s);
	buf_free(&b);
	return r;
}

GDyn *gdyn_find(Graph *g, int node, int field)
{
	for (int k = 0; k < g->ngdyn; k++)
		if (g->gdyn[k].node == node && g->gdyn[k].field == field)
			return &g->gdyn[k];
	return NULL;
}

void dyn_shape_str(Arena *a, Buf *b, Graph *g, Node *n)
{
	buf_puts(b, dtype_name(n->dtype));
	buf_putc(b, '[');
	for (int i = 0; i < n->rank; i++) {
		GDyn *d = g ? gdyn_find(g, n->id, i) : NULL;
		if (i)
			buf_puts(b, ", ");
		if (d)
			buf_puts(b, affine_str(a, &d->f, g->nbasis, g->dim_names));
		else
			buf_printf(b, "%lld", (long long)n->shape[i]);
	}
	buf_putc(b, ']');
}


int gdyn_has(Graph *g, const Node *n)
{
	for (int k = 0; k < g->ngdyn; k++)
		if (g->gdyn[k].node == n->id)
			return 1;
	return 0;
}

Affine field_form(Graph *g, Node *n, int f)
{
	GDyn *d = gdyn_find(g, n->id, f);
	Affine r = {0};
	if (d)
		return d->f;
	r.c0 = f < MAX_RANK ? n->shape[f] : n->a[f - 16];
	return r;
}

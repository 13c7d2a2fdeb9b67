/* interp/graph.c - the interpreter's graph walk: interp_run, region calls as
 * nested runs, each node dispatched to its kernel (eval_node), values freed
 * after their last reader, inputs reused in place, and transposes of weights
 * left to the matmuls that read them.
 */
#include "interp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 1000 /* nested region calls; deeper means a cycle in the IR */

static int run_graph(Ctx *c, Graph *g, Tensor **inputs, Tensor **outs);

/* A graph input or param handed in by the caller: it must be what the node says. */
static void check_given(const Node *n, const Tensor *t, const char *what)
{
	if (!t)
		ice("interp: %s %lld is missing", what, (long long)n->a[0]);
	if (t->dtype != n->dtype || !same_shape(t, n) || (t->f != NULL) != is_float(t->dtype) ||
	    t->n != numel_of(t->rank, t->shape))
		ice("interp: %s %lld does not match node %%%d", what, (long long)n->a[0], n->id);
}

/* Computes node n (not input, param, call or result) from its input tensors.
 * NULL after a run-time error has been reported. */
static Tensor *eval_node(Frame *fr, Node *n, Tensor **in)
{
	node_check_inputs(n);
	if (n->op == OP_GROUPNORM) /* an OPC_NORM with its own kernel */
		return op_group_norm(fr, n, in);
	switch (op_info[n->op].cls) {
	case OPC_UNARY:
		return op_unary(fr, n, in[0]);
	case OPC_CAST:
		return op_cast(fr, n, in[0]);
	case OPC_BINARY: case OPC_COMPARE: case OPC_LOGIC:
		return op_binary(fr, n, in[0], in[1]);
	case OPC_SELECT:
		return op_where(fr, n, in[0], in[1], in[2]);
	case OPC_MATMUL:
		return op_matmul(n, in[0], in[1], fr->val[n->in[1]->id].trans);
	case OPC_ROW:
		return op_softmax(fr, n, in[0]);
	case OPC_NORM:
		return op_norm(fr, n, in);
	case OPC_CONV:
		if (n->op == OP_CONV_TRANSPOSE2D)
			return op_conv_transpose2d(n, in);
		return op_conv2d(n, in);
	default:
		break;
	}
	switch (n->op) {
	case OP_CONST: case OP_FULL:
		return op_fill(n);
	case OP_ARANGE:
		return op_arange(n);
	case OP_SUM: case OP_MEAN: case OP_AMAX: case OP_AMIN: case OP_PROD:
		return op_reduce(n, in[0]);
	case OP_ARGMAX:
		return op_argmax(n, in[0]);
	case OP_RESHAPE:
		return op_reshape(fr, n, in[0]);
	case OP_TRANSPOSE:
		return op_transpose(n, in[0]);
	case OP_CONCAT:
		return op_concat(n, in);
	case OP_SLICE:
		return op_slice(n, in[0]);
	case OP_EXPAND:
		return op_expand(fr, n, in[0]);
	case OP_GATHER:
		return op_gather(fr, n, in[0], in[1]);
	case OP_CAUSAL_MASK:
		return op_causal_mask(fr, n, in[0]);
	case OP_MAXPOOL2D: case OP_AVGPOOL2D:
		return op_pool(n, in[0]);
	case OP_GLOBAL_AVGPOOL2D:
		return op_global_avgpool(n, in[0]);
	case OP_RESIZE_NEAREST: case OP_RESIZE_BILINEAR:
		return op_resize(n, in[0]);
	case OP_TAKE_ALONG:
		return op_take_along(fr, n, in[0], in[1]);
	case OP_TOPK: case OP_TOPK_MIN:
		return op_topk(n, in[0]);
	case OP_CUMSUM:
		return op_cumsum(n, in[0]);
	default:
		ice("interp: unexpected op %s at %%%d", op_name(n->op), n->id);
	}
}

/* A transpose of the last two axes of a graph input or param, read only as the B
 * operand of matmuls, is never materialised: the matmul reads B transposed.
 * Borrowed, so it lives as long as the run (this is `x @ transpose(wte, [1, 0])`
 * of tied embeddings, where a copy would be the largest tensor of the model). */
static int lazy_transpose(const Node *n)
{
	/* not of a state: a store may change it before the matmul reads it */
	if (n->op != OP_TRANSPOSE || n->nin != 1 || n->rank < 2 ||
	    (n->in[0]->op != OP_INPUT && n->in[0]->op != OP_PARAM) || (n->in[0]->op == OP_INPUT && n->in[0]->a[1] == 1))
		return 0;
	for (int d = 0; d < n->rank - 2; d++)
		if (n->a[d] != d)
			return 0;
	return n->a[n->rank - 2] == n->rank - 1 && n->a[n->rank - 1] == n->rank - 2;
}

/* The sequence's state that node n reads or writes, as libnestrt checks it
 * (runtime/seq.c): a store extends what was written when it adds to it along
 * one axis; a read outside it is an error. */
static int state_access(Ctx *c, Node *n, Tensor **in, char *why, size_t len)
{
	for (int k = 0; k < n->nin; k++) {
		int s = -1;
		for (int i = 0; i < c->p->nstates && s < 0; i++)
			if (in[k] == c->states[i])
				s = i;
		if (s < 0)
			continue;
		Tensor *t = c->states[s];
		int64_t lo[MAX_RANK], hi[MAX_RANK];
		int empty = 0;
		for (int d = 0; d < t->rank; d++) {
			int part = (n->op == OP_STORE && k == 0) || (n->op == OP_SLICE);
			lo[d] = part ? n->a[d] : 0;
			hi[d] = lo[d] + (part ? n->shape[d] : t->shape[d]);
			empty |= hi[d] <= lo[d];
		}
		if (empty)
			continue;
		int64_t(*b)[MAX_RANK] = c->box[s];
		if (n->op == OP_STORE && k == 0) {
			int contains = 1, inside = 1, differ = 0, axis = -1;
			for (int d = 0; d < t->rank; d++) {
				contains &= lo[d] <= b[0][d] && hi[d] >= b[1][d];
				inside &= lo[d] >= b[0][d] && hi[d] <= b[1][d];
				if (lo[d] != b[0][d] || hi[d] != b[1][d]) {
					differ++;
					axis = d;
				}
			}
			if (!c->written[s] || contains) {
				for (int d = 0; d < t->rank; d++) {
					b[0][d] = lo[d];
					b[1][d] = hi[d];
				}
			} else if (!inside && differ == 1 && lo[axis] <= b[1][axis] && hi[axis] >= b[0][axis]) {
				b[0][axis] = lo[axis] < b[0][axis] ? lo[axis] : b[0][axis];
				b[1][axis] = hi[axis] > b[1][axis] ? hi[axis] : b[1][axis];
			}
			c->written[s] = 1;
			continue;
		}
		for (int d = 0; d < t->rank; d++)
			if (!c->written[s] || lo[d] < b[0][d] || hi[d] > b[1][d]) {
				if (c->written[s])
					snprintf(why, len, "reads state %s at %lld:%lld on axis %d before it was written there (written: %lld:%lld)",
					         c->p->states[s].name, (long long)lo[d], (long long)hi[d], d, (long long)b[0][d],
					         (long long)b[1][d]);
				else
					snprintf(why, len, "reads state %s before it was written (a new sequence)", c->p->states[s].name);
				return -1;
			}
	}
	return 0;
}

static void free_val(Val *v)
{
	if (v->t && !v->borrowed)
		tensor_free(v->t);
	v->t = NULL;
	if (v->outs) {
		for (int k = 0; k < v->nouts; k++)
			tensor_free(v->outs[k]);
		free(v->outs);
		v->outs = NULL;
	}
}

/* Is result node r the last one in g to read output a[0] of its call? Then it may
 * take that tensor instead of copying it. */
static int last_result_reader(Graph *g, Node *r)
{
	for (int j = r->id + 1; j < g->nnodes; j++) {
		Node *m = g->nodes[j];
		if (m->op == OP_RESULT && m->nin == 1 && m->in[0] == r->in[0] && m->a[0] == r->a[0])
			return 0;
	}
	return 1;
}

static int run_graph(Ctx *c, Graph *g, Tensor **inputs, Tensor **outs)
{
	if (c->depth >= MAX_DEPTH)
		ice("interp: region calls nested more than %d deep", MAX_DEPTH);
	int nn = g->nnodes, maxin = 1, rc = 0;
	Frame fr = {c, xcalloc((size_t)nn + 1, sizeof(Val)),
	            xmalloc(((size_t)nn + 1) * sizeof(int)), xcalloc((size_t)nn + 1, 1)};
	char *other_use = xcalloc((size_t)nn + 1, 1); /* read by anything but a matmul's B */
	for (int i = 0; i < nn; i++) {
		Node *n = g->nodes[i];
		if (!n || n->id != i)
			ice("interp: graph %s: node %d has id %d", g->name ? g->name : "?", i,
			    n ? n->id : -1);
		fr.last[i] = i;
		if (n->nin > maxin)
			maxin = n->nin;
		for (int k = 0; k < n->nin; k++) {
			Node *m = n->in[k];
			if (!m || m->id < 0 || m->id >= i || g->nodes[m->id] != m)
				ice("interp: graph %s: %%%d reads a node that is not before it",
				    g->name ? g->name : "?", i);
			fr.last[m->id] = i;
			if (n->op != OP_MATMUL || k != 1)
				other_use[m->id] = 1;
		}
	}
	for (int k = 0; k < g->noutputs; k++) {
		Node *m = g->outputs[k];
		if (!m || m->id < 0 || m->id >= nn || g->nodes[m->id] != m || m->op == OP_CALL)
			ice("interp: graph %s: bad output %d", g->name ? g->name : "?", k);
		fr.last[m->id] = INT_MAX;
		other_use[m->id] = 1;
	}
	for (int i = 0; i < nn; i++)
		fr.lazy[i] = !other_use[i] && lazy_transpose(g->nodes[i]);
	free(other_use);
	Tensor **in = xcalloc((size_t)maxin, sizeof(Tensor *));
	c->depth++;
	char why[300];
	for (int i = 0; i < nn && rc == 0; i++) {
		Node *n = g->nodes[i];
		Val *v = &fr.val[i];
		if (n->op != OP_RESULT)
			for (int k = 0; k < n->nin; k++) {
				in[k] = fr.val[n->in[k]->id].t;
				if (!in[k])
					ice("interp: %%%d reads %%%d, which has no value", i,
					    n->in[k]->id);
			}
		if (n->op != OP_RESULT && n->op != OP_CALL && n->op != OP_RESHAPE && c->states &&
		    state_access(c, n, in, why, sizeof why) < 0) {
			runtime_error(c->p, n->loc, why);
			rc = -1;
			break;
		}
		switch (n->op) {
		case OP_INPUT:
			if (n->a[0] < 0 || n->a[0] >= g->ninputs)
				ice("interp: input %lld of %d", (long long)n->a[0], g->ninputs);
			v->t = inputs[n->a[0]];
			v->borrowed = 1;
			check_given(n, v->t, "input");
			break;
		case OP_PARAM:
			if (!c->p || n->a[0] < 0 || n->a[0] >= c->p->nparams)
				ice("interp: param %lld out of range", (long long)n->a[0]);
			v->t = c->params[n->a[0]];
			v->borrowed = 1;
			check_given(n, v->t, "param");
			break;
		case OP_STATE:
			if (!c->states || n->a[0] < 0 || !c->p || n->a[0] >= c->p->nstates)
				ice("interp: state %lld without a sequence", (long long)n->a[0]);
			v->t = c->states[n->a[0]];
			v->borrowed = 1;
			check_given(n, v->t, "state");
			break;
		case OP_STORE: {
			/* in place: the value (shaped as n) into the target from a[k] on */
			Tensor *t = in[0], *x = in[1];
			if (t->dtype != x->dtype || t->rank != n->rank || !same_shape(x, n))
				ice("interp: store %%%d: shapes", i);
			int64_t tst[MAX_RANK], idx[MAX_RANK] = {0};
			int64_t s1 = 1;
			for (int k = t->rank - 1; k >= 0; k--) {
				tst[k] = s1;
				s1 *= t->shape[k];
			}
			for (int k = 0; k < t->rank; k++)
				if (n->a[k] < 0 || n->a[k] + n->shape[k] > t->shape[k])
					ice("interp: store %%%d out of its target", i);
			for (int64_t e = 0; e < x->n; e++) {
				int64_t off = 0;
				for (int k = 0; k < t->rank; k++)
					off += (n->a[k] + idx[k]) * tst[k];
				if (dtype_is_float(t->dtype))
					t->f[off] = x->f[e];
				else
					t->i[off] = x->i[e];
				for (int k = t->rank - 1; k >= 0; k--) {
					if (++idx[k] < n->shape[k])
						break;
					idx[k] = 0;
				}
			}
			v->t = t;
			v->borrowed = 1;
			break;
		}
		case OP_CALL: {
			Graph *cg = n->callee;
			if (n->a[2]) {
				/* a specialised alternative of another call: the same values */
				v->nouts = 0;
				break;
			}
			if (!cg || cg->ninputs != n->nin)
				ice("interp: call %%%d: %d arguments", i, n->nin);
			v->nouts = cg->noutputs;
			v->outs = xcalloc((size_t)cg->noutputs + 1, sizeof(Tensor *));
			rc = run_graph(c, cg, in, v->outs);
			break;
		}
		case OP_TRANSPOSE:
			if (!fr.lazy[i]) {
				v->t = eval_node(&fr, n, in);
				break;
			}
			if (in[0]->dtype != n->dtype || in[0]->rank != n->rank ||
			    memcmp(in[0]->shape, n->shape, (n->rank - 2) * sizeof(int64_t)) ||
			    in[0]->shape[n->rank - 2] != n->shape[n->rank - 1] ||
			    in[0]->shape[n->rank - 1] != n->shape[n->rank - 2])
				ice("interp: transpose %%%d: shapes", i);
			v->t = in[0];
			v->borrowed = 1;
			v->trans = 1;
			break;
		case OP_RESULT: {
			Node *call = n->nin == 1 ? n->in[0] : NULL;
			Val *cv = call ? &fr.val[call->id] : NULL;
			if (!call || call->op != OP_CALL || !cv->outs || n->a[0] < 0 ||
			    n->a[0] >= cv->nouts || !cv->outs[n->a[0]])
				ice("interp: result %%%d", i);
			Tensor *t = cv->outs[n->a[0]];
			if (t->dtype != n->dtype || !same_shape(t, n))
				ice("interp: result %%%d does not match the callee's output", i);
			if (last_result_reader(g, n)) {
				v->t = t;
				cv->outs[n->a[0]] = NULL;
			} else {
				v->t = tensor_copy(t);
			}
			break;
		}
		default:
			v->t = eval_node(&fr, n, in);
			if (!v->t)
				rc = -1;
			else if (v->t->dtype != n->dtype || !same_shape(v->t, n))
				ice("interp: %s %%%d produced the wrong shape", op_name(n->op), i);
			break;
		}
		if (rc)
			break;
		/* free what nobody reads any more */
		for (int k = 0; k < n->nin; k++) {
			int j = n->in[k]->id;
			if (fr.last[j] == i)
				free_val(&fr.val[j]);
		}
		if (fr.last[i] == i)
			free_val(v);
	}
	c->depth--;
	if (rc == 0) {
		for (int k = 0; k < g->noutputs; k++) {
			Val *v = &fr.val[g->outputs[k]->id];
			if (!v->t)
				ice("interp: output %d has no value", k);
			if (v->borrowed) {
				outs[k] = tensor_copy(v->t);
			} else {
				outs[k] = v->t; /* hand it over; later uses of the same node copy */
				v->borrowed = 1;
			}
		}
	}
	for (int i = 0; i < nn; i++)
		free_val(&fr.val[i]);
	free(in);
	free(fr.val);
	free(fr.last);
	free(fr.lazy);
	return rc;
}

int interp_run(Program *p, Graph *g, Tensor **inputs, Tensor **params, Tensor **outs)
{
	return interp_run_state(p, g, inputs, params, NULL, outs);
}

int interp_run_state(Program *p, Graph *g, Tensor **inputs, Tensor **params, Tensor **states, Tensor **outs)
{
	Ctx c = {p, params, 0, states, NULL, NULL};
	for (int k = 0; k < g->noutputs; k++)
		outs[k] = NULL;
	if (states) {
		c.box = xcalloc((size_t)p->nstates + 1, sizeof *c.box);
		c.written = xcalloc((size_t)p->nstates + 1, sizeof(int));
	}
	int rc = run_graph(&c, g, inputs, outs);
	free(c.box);
	free(c.written);
	return rc;
}

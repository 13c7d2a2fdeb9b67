/* builtins_nn.c - the builtins of neural-network layers, with PyTorch's
 * meaning and argument order: convolution (conv2d with dilation,
 * conv_transpose2d), pooling, interpolate, linear, flatten and the
 * normalisations that are not row kernels of their own (batch_norm folded
 * to a scale and shift, group_norm). Like builtins.c, each rule checks its
 * arguments (args.c), works out the result's shape and dtype and makes the
 * nodes through values.c. */
#include "nestc.h"

#include <math.h>
#include <string.h>

/* batch_norm(x, running_mean, running_var, weight, bias, eps=1e-5): PyTorch's
 * F.batch_norm(..., training=False) over axis 1. No op of its own: the [C]
 * statistics fold into one scale and one shift per channel, and x * scale + shift
 * is an elementwise chain that the planner runs as one loop over x. */
static Value *b_batch_norm(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"eps", NULL};
	static const char *const what[5] = {NULL, "running_mean", "running_var", "weight", "bias"};
	if (!check_arity(x, a, 5, 6, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank < 2) {
		error_at(x->d, a->posloc[0], "batch_norm() needs x of at least two axes [N, C, ...], not %s", nstr(x, t));
		return VERR;
	}
	int64_t c = t->shape[1];
	Node *in[5] = {t};
	for (int i = 1; i < 5; i++) {
		in[i] = tensor_arg(x, a, i, NULL);
		if (!in[i])
			return VERR;
		if (in[i]->rank != 1 || in[i]->shape[0] != c || in[i]->dtype != t->dtype) {
			error_at(x->d, a->posloc[i], "batch_norm() of %s needs a %s of %s, not %s", nstr(x, t), what[i],
			         shstr(x, t->dtype, 1, &c), nstr(x, in[i]));
			return VERR;
		}
	}
	double eps;
	if (!float_opt(x, a, 5, "eps", 1e-5, &eps))
		return VERR;
	if (!(eps >= 0)) {
		error_at(x->d, arg_loc(a, 5, "eps"), "eps of batch_norm() must not be negative");
		return VERR;
	}
	/* random weights draw this param positive (params.c) */
	avec_push(x->a, &x->p->variance_nodes, in[2]);
	Loc loc = a->call->loc;
	Value *var_eps = emit_binary(x, OP_ADD, vtensor(x, in[2]), vfloat(x, eps), loc);
	if (var_eps->kind == V_ERR)
		return VERR;
	Node *inv = unary_node(x, OP_RSQRT, t->dtype, var_eps->node, loc);
	Value *scale = emit_binary(x, OP_MUL, vtensor(x, in[3]), vtensor(x, inv), loc);
	Value *shift = emit_binary(x, OP_SUB, vtensor(x, in[4]), emit_binary(x, OP_MUL, vtensor(x, in[1]), scale, loc), loc);
	if (shift->kind == V_ERR)
		return VERR;
	/* [C] -> [C, 1, ...]: broadcasts over the axes after the channel's */
	int64_t cs[MAX_RANK];
	cs[0] = c;
	for (int i = 1; i < t->rank - 1; i++)
		cs[i] = 1;
	Node *sc = reshape_node(x, scale->node, t->rank - 1, cs, loc);
	Node *sh = reshape_node(x, shift->node, t->rank - 1, cs, loc);
	return emit_binary(x, OP_ADD, emit_binary(x, OP_MUL, vtensor(x, t), vtensor(x, sc), loc), vtensor(x, sh), loc);
}

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p)
{
	return (in + 2 * p - k) / s + 1;
}

static Value *b_conv2d(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"stride", "padding", "groups", "dilation", NULL};
	if (!check_arity(x, a, 2, 7, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, NULL), *b = NULL;
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (a->npos >= 3 && !(b = tensor_arg(x, a, 2, NULL)))
		return VERR;
	/* positional: conv2d(x, w, b, stride, padding, groups, dilation) */
	int64_t stride[2], pad[2], groups, dil[2];
	if (!pair_opt(x, a, 3, "stride", 1, stride, 1) || !pair_opt(x, a, 4, "padding", 0, pad, 0) ||
	    !int_opt(x, a, 5, "groups", 1, &groups) || !pair_opt(x, a, 6, "dilation", 1, dil, 1))
		return VERR;
	if (t->rank != 4 || w->rank != 4 || w->dtype != t->dtype) {
		error_at(x->d, a->call->loc, "conv2d() needs x as %s[N, C, H, W] and w as %s[O, C/groups, KH, KW], not %s and %s",
		         dtype_name(t->dtype), dtype_name(t->dtype), nstr(x, t), nstr(x, w));
		return VERR;
	}
	if (groups < 1 || t->shape[1] % groups || w->shape[0] % groups || w->shape[1] * groups != t->shape[1]) {
		error_at(x->d, a->call->loc, "conv2d(): %s does not fit %s with groups=%lld (channels %lld, weight takes %lld per group)",
		         nstr(x, w), nstr(x, t), (long long)groups, (long long)t->shape[1], (long long)w->shape[1]);
		return VERR;
	}
	if (b && (b->rank != 1 || b->shape[0] != w->shape[0] || b->dtype != t->dtype)) {
		error_at(x->d, a->posloc[2], "conv2d(): the bias must be %s, not %s", shstr(x, t->dtype, 1, &w->shape[0]),
		         nstr(x, b));
		return VERR;
	}
	/* the extent of the dilated kernel */
	int64_t kh = dil[0] * (w->shape[2] - 1) + 1, kw = dil[1] * (w->shape[3] - 1) + 1;
	int64_t shape[4] = {t->shape[0], w->shape[0], pool_out(t->shape[2], kh, stride[0], pad[0]),
	                    pool_out(t->shape[3], kw, stride[1], pad[1])};
	if (t->shape[2] + 2 * pad[0] < kh || t->shape[3] + 2 * pad[1] < kw) {
		error_at(x->d, a->call->loc, "conv2d(): the %skernel %lldx%lld is larger than the padded input of %s",
		         kh != w->shape[2] || kw != w->shape[3] ? "dilated " : "", (long long)kh, (long long)kw, nstr(x, t));
		return VERR;
	}
	Node *r = mk_node(x, OP_CONV2D, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	node_add_input(x->p, r, w);
	if (b)
		node_add_input(x->p, r, b);
	r->a[0] = stride[0];
	r->a[1] = stride[1];
	r->a[2] = pad[0];
	r->a[3] = pad[1];
	r->a[4] = groups;
	if (dil[0] != 1 || dil[1] != 1) { /* none stays 0: the fingerprints of models without it */
		r->a[5] = dil[0];
		r->a[6] = dil[1];
	}
	return vtensor(x, r);
}

static Value *b_pool(LowerCtx *x, Args *a, Op op)
{
	static const char *const allowed[] = {"stride", "padding", NULL};
	if (op == OP_GLOBAL_AVGPOOL2D) {
		if (!check_arity(x, a, 1, 1, NULL))
			return VERR;
	} else if (!check_arity(x, a, 2, 4, allowed)) {
		return VERR;
	}
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank != 4) {
		error_at(x->d, a->call->loc, "%s() needs %s[N, C, H, W], not %s", a->fname, dtype_name(t->dtype), nstr(x, t));
		return VERR;
	}
	if (op == OP_GLOBAL_AVGPOOL2D) {
		/* a mean of no elements, as mean() */
		if (!(t->shape[2] && t->shape[3]) && t->shape[0] && t->shape[1]) {
			error_at(x->d, a->call->loc, "%s() of %s: the mean of no elements is undefined", a->fname, nstr(x, t));
			return VERR;
		}
		int64_t shape[4] = {t->shape[0], t->shape[1], 1, 1};
		Node *r = mk_node(x, op, t->dtype, 4, shape, a->call->loc);
		node_add_input(x->p, r, t);
		return vtensor(x, r);
	}
	int64_t k[2], s[2], p[2];
	if (!pair_opt(x, a, 1, "kernel", 1, k, 1))
		return VERR;
	/* positional: max_pool2d(x, k, stride, padding); the stride defaults to the kernel */
	int given = a->npos > 2 || opt_arg(a, "stride");
	if (!pair_opt(x, a, 2, "stride", k[0], s, 1) || !pair_opt(x, a, 3, "padding", 0, p, 0))
		return VERR;
	if (!given)
		s[1] = k[1];
	if (p[0] * 2 > k[0] || p[1] * 2 > k[1]) {
		error_at(x->d, a->call->loc, "%s(): padding must be at most half the kernel size", a->fname);
		return VERR;
	}
	if (t->shape[2] + 2 * p[0] < k[0] || t->shape[3] + 2 * p[1] < k[1]) {
		error_at(x->d, a->call->loc, "%s(): the kernel %lldx%lld is larger than the padded input of %s", a->fname,
		         (long long)k[0], (long long)k[1], nstr(x, t));
		return VERR;
	}
	int64_t shape[4] = {t->shape[0], t->shape[1], pool_out(t->shape[2], k[0], s[0], p[0]),
	                    pool_out(t->shape[3], k[1], s[1], p[1])};
	Node *r = mk_node(x, op, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	r->a[0] = k[0];
	r->a[1] = k[1];
	r->a[2] = s[0];
	r->a[3] = s[1];
	r->a[4] = p[0];
	r->a[5] = p[1];
	return vtensor(x, r);
}

/* linear(x, weight[out, in], bias[out]): x @ transpose(weight, [1, 0]) + bias,
 * the nodes the hand-written form makes, so that the matmul reads the
 * transposed weight from its rows (plan.c, virtual_transpose), packs it and
 * applies the bias as its epilogue. Those need a 2-D left operand: other
 * ranks are reshaped to [rows, in] and back, which costs nothing. */
static Value *b_linear(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"weight", "bias", NULL};
	if (!check_arity(x, a, 2, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, "weight");
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (t->rank < 1) {
		error_at(x->d, a->posloc[0], "linear() needs x with at least one axis, not %s", nstr(x, t));
		return VERR;
	}
	int64_t in = t->shape[t->rank - 1];
	if (w->rank != 2 || w->dtype != t->dtype || w->shape[1] != in) {
		error_at(x->d, arg_loc(a, 1, "weight"), "linear() of %s needs a weight of %s[out, %lld], not %s", nstr(x, t),
		         dtype_name(t->dtype), (long long)in, nstr(x, w));
		return VERR;
	}
	int64_t out = w->shape[0];
	Node *x2 = t;
	if (t->rank != 2)
		x2 = fold_rows(x, t, a->call->loc);
	Node *wt = mk_node(x, OP_TRANSPOSE, w->dtype, 2, (int64_t[]){in, out}, a->call->loc);
	node_add_input(x->p, wt, w);
	wt->a[0] = 1;
	wt->a[1] = 0;
	Value *y = emit_matmul(x, vtensor(x, x2), vtensor(x, wt), a->call->loc);
	Loc bloc;
	Value *bv = arg_at(a, 2, "bias", &bloc);
	if (y->kind != V_ERR && bv) {
		Node *b = as_tensor(x, bv, bloc, "the bias of linear()");
		if (!b)
			return VERR;
		if (b->rank != 1 || b->shape[0] != out || b->dtype != t->dtype) {
			error_at(x->d, bloc, "linear() with a weight of %s needs a bias of %s, not %s", nstr(x, w),
			         shstr(x, t->dtype, 1, &out), nstr(x, b));
			return VERR;
		}
		y = emit_binary(x, OP_ADD, y, vtensor(x, b), a->call->loc);
	}
	if (y->kind == V_ERR || t->rank == 2)
		return y;
	return vtensor(x, unfold_rows(x, y->node, t, a->call->loc));
}

/* flatten(x, start_dim=0, end_dim=-1): axes start_dim..end_dim as one; a 0-d
 * tensor becomes 1-d, as in PyTorch. */
static Value *b_flatten(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"start_dim", "end_dim", NULL};
	if (!check_arity(x, a, 1, 3, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!t)
		return VERR;
	int64_t sd, ed;
	int s0, e0, r = t->rank ? t->rank : 1;
	if (!int_opt(x, a, 1, "start_dim", 0, &sd) || !norm_axis(x, sd, r, arg_loc(a, 1, "start_dim"), &s0) ||
	    !int_opt(x, a, 2, "end_dim", -1, &ed) || !norm_axis(x, ed, r, arg_loc(a, 2, "end_dim"), &e0))
		return VERR;
	if (s0 > e0) {
		error_at(x->d, arg_loc(a, 1, "start_dim"), "flatten() of %s: start_dim %d is after end_dim %d", nstr(x, t),
		         s0, e0);
		return VERR;
	}
	if (t->rank == 0)
		return vtensor(x, reshape_node(x, t, 1, (int64_t[]){1}, a->call->loc));
	int64_t s[MAX_RANK];
	int n = 0;
	for (int i = 0; i < s0; i++)
		s[n++] = t->shape[i];
	s[n++] = shape_numel(e0 - s0 + 1, t->shape + s0);
	for (int i = e0 + 1; i < t->rank; i++)
		s[n++] = t->shape[i];
	return vtensor(x, reshape_node(x, t, n, s, a->call->loc));
}

/* group_norm(x[N, C, *], num_groups, weight[C], bias[C], eps=1e-5), as
 * PyTorch's: one OP_GROUPNORM row kernel over x viewed as [N, G, C/G * rest]
 * (statistics of each row in vectors, then the per-channel affine), between
 * two free reshapes. */
static Value *b_group_norm(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"num_groups", "weight", "bias", "eps", NULL};
	if (!check_arity(x, a, 4, 5, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank < 2) {
		error_at(x->d, a->posloc[0], "group_norm() needs x as %s[N, C, ...], not %s", dtype_name(t->dtype), nstr(x, t));
		return VERR;
	}
	int64_t c = t->shape[1], groups;
	Loc gloc;
	Value *gv = arg_at(a, 1, "num_groups", &gloc);
	if (!gv) {
		error_at(x->d, a->call->loc, "group_norm() needs num_groups");
		return VERR;
	}
	if (!ct_int(x, gv, gloc, "num_groups of group_norm()", &groups))
		return VERR;
	if (groups < 1 || c % groups) {
		error_at(x->d, gloc, "group_norm(): %lld groups do not divide the %lld channels of %s", (long long)groups,
		         (long long)c, nstr(x, t));
		return VERR;
	}
	Node *in[3] = {NULL};
	static const char *const names[3] = {NULL, "weight", "bias"};
	for (int i = 1; i < 3; i++) {
		in[i] = tensor_arg(x, a, i + 1, names[i]);
		if (!in[i])
			return VERR;
		if (in[i]->rank != 1 || in[i]->shape[0] != c || in[i]->dtype != t->dtype) {
			error_at(x->d, arg_loc(a, i + 1, names[i]), "group_norm() of %s needs a %s of %s, not %s", nstr(x, t),
			         names[i], shstr(x, t->dtype, 1, &c), nstr(x, in[i]));
			return VERR;
		}
	}
	double eps;
	if (!float_opt(x, a, 4, "eps", 1e-5, &eps))
		return VERR;
	int64_t rows[3] = {t->shape[0], groups, shape_numel(t->rank - 1, t->shape + 1) / groups};
	in[0] = reshape_node(x, t, 3, rows, a->call->loc);
	Node *n = mk_node(x, OP_GROUPNORM, t->dtype, 3, rows, a->call->loc);
	for (int i = 0; i < 3; i++)
		node_add_input(x->p, n, in[i]);
	n->fval = eps;
	return vtensor(x, reshape_node(x, n, t->rank, t->shape, a->call->loc));
}

static Value *b_conv_transpose2d(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"stride", "padding", "output_padding", "groups", "dilation", NULL};
	if (!check_arity(x, a, 2, 8, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL), *w = tensor_arg(x, a, 1, NULL), *b = NULL;
	if (!float_tensor(x, a, t) || !w)
		return VERR;
	if (a->npos >= 3 && !(b = tensor_arg(x, a, 2, NULL)))
		return VERR;
	/* positional as PyTorch's: (x, w, b, stride, padding, output_padding, groups, dilation) */
	int64_t s[2], p[2], op[2], groups, dil[2];
	if (!pair_opt(x, a, 3, "stride", 1, s, 1) || !pair_opt(x, a, 4, "padding", 0, p, 0) ||
	    !pair_opt(x, a, 5, "output_padding", 0, op, 0) || !int_opt(x, a, 6, "groups", 1, &groups) ||
	    !pair_opt(x, a, 7, "dilation", 1, dil, 1))
		return VERR;
	if (t->rank != 4 || w->rank != 4 || w->dtype != t->dtype) {
		error_at(x->d, a->call->loc,
		         "conv_transpose2d() needs x as %s[N, C, H, W] and w as %s[C, O/groups, KH, KW], not %s and %s",
		         dtype_name(t->dtype), dtype_name(t->dtype), nstr(x, t), nstr(x, w));
		return VERR;
	}
	if (groups < 1 || t->shape[1] % groups || w->shape[0] != t->shape[1]) {
		error_at(x->d, a->call->loc, "conv_transpose2d(): %s does not fit %s with groups=%lld (channels %lld, weight has %lld)",
		         nstr(x, w), nstr(x, t), (long long)groups, (long long)t->shape[1], (long long)w->shape[0]);
		return VERR;
	}
	int64_t O = w->shape[1] * groups;
	if (b && (b->rank != 1 || b->shape[0] != O || b->dtype != t->dtype)) {
		error_at(x->d, a->posloc[2], "conv_transpose2d(): the bias must be %s, not %s", shstr(x, t->dtype, 1, &O),
		         nstr(x, b));
		return VERR;
	}
	for (int k = 0; k < 2; k++)
		if (op[k] >= s[k] && op[k] >= dil[k]) {
			error_at(x->d, arg_loc(a, 5, "output_padding"),
			         "conv_transpose2d(): output_padding must be smaller than either stride or dilation");
			return VERR;
		}
	int64_t shape[4] = {t->shape[0], O, 0, 0};
	for (int k = 0; k < 2; k++)
		shape[2 + k] = (t->shape[2 + k] - 1) * s[k] - 2 * p[k] + dil[k] * (w->shape[2 + k] - 1) + op[k] + 1;
	if (shape[2] < 1 || shape[3] < 1) {
		error_at(x->d, a->call->loc, "conv_transpose2d(): the padding leaves no output of %s (%lldx%lld)", nstr(x, t),
		         (long long)shape[2], (long long)shape[3]);
		return VERR;
	}
	Node *r = mk_node(x, OP_CONV_TRANSPOSE2D, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	node_add_input(x->p, r, w);
	if (b)
		node_add_input(x->p, r, b);
	int64_t attrs[9] = {s[0], s[1], p[0], p[1], groups, dil[0], dil[1], op[0], op[1]};
	memcpy(r->a, attrs, sizeof attrs);
	return vtensor(x, r);
}

/* scale_factor: a positive number or [h, w] of them */
static int scale_pair(LowerCtx *x, Value *v, Loc loc, double out[2])
{
	int n = v->kind == V_LIST ? v->n : 1;
	for (int i = 0; i < n; i++) {
		Value *e = v->kind == V_LIST ? v->items[i] : v;
		if (e->kind == V_ERR)
			return 0;
		if ((e->kind != V_INT && e->kind != V_FLOAT) || n > 2) {
			error_at(x->d, loc, "scale_factor of interpolate() must be a number or [h, w] of numbers");
			return 0;
		}
		out[i] = e->kind == V_FLOAT ? e->f : (double)e->i;
		if (!(out[i] > 0)) {
			error_at(x->d, loc, "scale_factor of interpolate() must be positive");
			return 0;
		}
	}
	if (n < 1) {
		error_at(x->d, loc, "scale_factor of interpolate() must be a number or [h, w] of numbers");
		return 0;
	}
	if (n == 1)
		out[1] = out[0];
	return 1;
}

static Value *b_interpolate(LowerCtx *x, Args *a)
{
	static const char *const allowed[] = {"size", "scale_factor", "mode", "align_corners", NULL};
	if (!check_arity(x, a, 1, 5, allowed))
		return VERR;
	Node *t = tensor_arg(x, a, 0, NULL);
	if (!float_tensor(x, a, t))
		return VERR;
	if (t->rank != 4) {
		error_at(x->d, a->call->loc, "interpolate() needs %s[N, C, H, W], not %s", dtype_name(t->dtype), nstr(x, t));
		return VERR;
	}
	/* positional as PyTorch's: (x, size, scale_factor, mode, align_corners) */
	Loc sloc, floc, mloc, aloc;
	Value *sv = arg_at(a, 1, "size", &sloc), *fv = arg_at(a, 2, "scale_factor", &floc);
	Value *mv = arg_at(a, 3, "mode", &mloc), *av = arg_at(a, 4, "align_corners", &aloc);
	if (!sv == !fv) {
		error_at(x->d, a->call->loc, "interpolate() needs either size or scale_factor%s", sv ? ", not both" : "");
		return VERR;
	}
	int bilinear = 0;
	if (mv) {
		if (mv->kind != V_STR || (strcmp(mv->s, "nearest") && strcmp(mv->s, "bilinear"))) {
			if (mv->kind == V_STR)
				error_at(x->d, mloc, "mode of interpolate() must be \"nearest\" or \"bilinear\", not \"%s\"", mv->s);
			else if (mv->kind != V_ERR)
				error_at(x->d, mloc, "mode of interpolate() must be the string \"nearest\" or \"bilinear\"");
			return VERR;
		}
		bilinear = !strcmp(mv->s, "bilinear");
	}
	int align = 0;
	if (av) {
		if (av->kind != V_BOOL) {
			if (av->kind != V_ERR)
				error_at(x->d, aloc, "align_corners of interpolate() must be true or false");
			return VERR;
		}
		if (!bilinear) { /* as PyTorch: it means nothing for nearest */
			error_at(x->d, aloc, "align_corners of interpolate() can only be given with mode=\"bilinear\"");
			return VERR;
		}
		align = (int)av->i;
	}
	int64_t out[2];
	double sf[2] = {0, 0};
	if (sv) {
		if (!pair_opt(x, a, 1, "size", 1, out, 1))
			return VERR;
	} else {
		if (!scale_pair(x, fv, floc, sf))
			return VERR;
		for (int k = 0; k < 2; k++) {
			out[k] = (int64_t)floor((double)t->shape[2 + k] * sf[k]);
			if (out[k] < 1) {
				error_at(x->d, floc, "interpolate(): scale_factor %g leaves no output of %s", sf[k], nstr(x, t));
				return VERR;
			}
		}
	}
	int64_t shape[4] = {t->shape[0], t->shape[1], out[0], out[1]};
	Node *r = mk_node(x, bilinear ? OP_RESIZE_BILINEAR : OP_RESIZE_NEAREST, t->dtype, 4, shape, a->call->loc);
	node_add_input(x->p, r, t);
	r->a[0] = align;
	/* PyTorch's coordinate scale: float arithmetic except bilinear on f64 */
	int dbl = bilinear && t->dtype == DT_F64;
	for (int k = 0; k < 2; k++) {
		int64_t in = t->shape[2 + k];
		double sc;
		if (align)
			sc = out[k] > 1 ? (dbl ? (double)(in - 1) / (double)(out[k] - 1) : (float)(in - 1) / (float)(out[k] - 1)) : 0;
		else if (sf[k] > 0)
			sc = dbl ? 1.0 / sf[k] : (float)(1.0 / sf[k]);
		else
			sc = dbl ? (double)in / (double)out[k] : (float)in / (float)out[k];
		r->a[1 + k] = resize_scale_bits(sc);
	}
	return vtensor(x, r);
}

Value *layer_builtin(LowerCtx *x, Args *a)
{
	if (!strcmp(a->fname, "conv2d")) return b_conv2d(x, a);
	if (!strcmp(a->fname, "max_pool2d")) return b_pool(x, a, OP_MAXPOOL2D);
	if (!strcmp(a->fname, "avg_pool2d")) return b_pool(x, a, OP_AVGPOOL2D);
	if (!strcmp(a->fname, "global_avg_pool2d")) return b_pool(x, a, OP_GLOBAL_AVGPOOL2D);
	if (!strcmp(a->fname, "conv_transpose2d")) return b_conv_transpose2d(x, a);
	if (!strcmp(a->fname, "interpolate")) return b_interpolate(x, a);
	if (!strcmp(a->fname, "batch_norm")) return b_batch_norm(x, a);
	if (!strcmp(a->fname, "linear")) return b_linear(x, a);
	if (!strcmp(a->fname, "flatten")) return b_flatten(x, a);
	if (!strcmp(a->fname, "group_norm")) return b_group_norm(x, a);
	return NULL;
}

/* ops_rnn.c - RNN, GRU and LSTM, unrolled over the sequence (its length is
 * known at import).
 *
 * Per direction, the input's part of every gate for every time step is one
 * matrix product (the steps as rows); each step then adds its hidden
 * state's product and applies the gates, as ONNX's definitions write them
 * (gate order: GRU z r h, LSTM i o f c). A reverse direction runs the steps
 * from the last. sequence_lens, when given, must be known and equal the
 * sequence's length. Activations: Sigmoid, Tanh and Relu. */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

enum { K_RNN, K_GRU, K_LSTM };

/* A gate's activation applied to expression x (fmt "%s(%s)"). */
static const char *act_fn(const char *name)
{
	if (!strcmp(name, "Sigmoid"))
		return "sigmoid";
	if (!strcmp(name, "Tanh"))
		return "tanh";
	if (!strcmp(name, "Relu"))
		return "relu";
	return NULL;
}

/* The clipped pre-activation of a gate: an expression (owned). */
static char *clipped(Ctx *c, const char *x, const char *clip, const char *dt)
{
	if (!clip)
		return tmp(c, "%s", x);
	return tmp(c, "minimum(maximum(%s, -%s(%s)), %s(%s))", x, dt, clip, dt, clip);
}

static char *gate(Ctx *c, const char *fn, const char *x, const char *clip, const char *dt)
{
	char *p = clipped(c, x, clip, dt);
	char *r = tmp(c, "%s(%s)", fn, p);
	free(p);
	return r;
}

/* Row d of w ([D, n, m]) as an [n, m] matrix, transposed to [m, n]. */
static char *dir_matrix_t(Ctx *c, Val *w, int d)
{
	return tmp(c, "transpose(reshape(%s[%d:%d], [%lld, %lld]), [1, 0])", ref(c, w), d, d + 1, (long long)w->shape[1],
	           (long long)w->shape[2]);
}

/* Row d of a [D, B, H] state as [B, H], or zeros. */
static char *dir_state(Ctx *c, Val *v, int d, int64_t B, int64_t H, const char *dt, int layout)
{
	if (!v)
		return tmp(c, "%s(zeros([%lld, %lld]))", dt, (long long)B, (long long)H);
	if (layout)
		return tmp(c, "reshape(%s[:, %d:%d], [%lld, %lld])", ref(c, v), d, d + 1, (long long)B, (long long)H);
	return tmp(c, "reshape(%s[%d:%d], [%lld, %lld])", ref(c, v), d, d + 1, (long long)B, (long long)H);
}

/* Columns [k H, (k+1) H) of x. */
static char *cols(const char *x, int k, int64_t H)
{
	return slice_expr(x, 1, k * H, (k + 1) * H);
}

int tr_rnn(Ctx *c, NodeIO *io)
{
	Onnx__NodeProto *n = io->n;
	int kind = !strcmp(n->op_type, "GRU") ? K_GRU : !strcmp(n->op_type, "LSTM") ? K_LSTM : K_RNN;
	int G = kind == K_GRU ? 3 : kind == K_LSTM ? 4 : 1, nact = kind == K_GRU ? 2 : kind == K_LSTM ? 3 : 1;
	Val *x, *w, *r, *b = in_(io, 3), *sl = in_(io, 4), *h0 = in_(io, 5);
	Val *c0 = kind == K_LSTM ? in_(io, 6) : NULL, *pv = kind == K_LSTM ? in_(io, 7) : NULL;
	if (inputs(c, io, "X, W and R", 3, &x, &w, &r) < 0)
		return -1;
	int64_t H = attr_i(n, "hidden_size", r->rank == 3 ? r->shape[2] : 0);
	int layout = (int)attr_i(n, "layout", 0);
	char *dir = attr_s(n, "direction");
	int D = dir && !strcmp(dir, "bidirectional") ? 2 : 1, rev = dir && !strcmp(dir, "reverse");
	int bad_dir = dir && strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional");
	free(dir);
	if (bad_dir)
		return node_err(c, 0, "direction must be forward, reverse or bidirectional"), -1;
	if (!dtype_is_float(x->dt) || x->rank != 3 || w->rank != 3 || r->rank != 3 || (layout != 0 && layout != 1))
		return node_err(c, 0, "X, W and R must be float tensors of rank 3 (layout 0 or 1)"), -1;
	int64_t T = x->shape[layout ? 1 : 0], B = x->shape[layout ? 0 : 1], I = x->shape[2];
	if (H < 1 || w->shape[0] != D || w->shape[1] != G * H || w->shape[2] != I || r->shape[0] != D ||
	    r->shape[1] != G * H || r->shape[2] != H || (b && (b->rank != 2 || b->shape[0] != D || b->shape[1] != 2 * G * H)) ||
	    (pv && (pv->rank != 2 || pv->shape[0] != D || pv->shape[1] != 3 * H)) || T < 1)
		return node_err(c, 0, "the shapes of X, W, R, B and P do not agree with hidden_size %lld", (long long)H), -1;
	Val *same[6] = {w, r, b, h0, c0, pv};
	for (int k = 0; k < 6; k++)
		if (same[k] && same[k]->dt != x->dt)
			return node_err(c, 0, "W, R, B, initial_h, initial_c and P must have X's dtype %s", dtype_name(x->dt)), -1;
	int64_t st[3] = {layout ? B : D, layout ? D : B, H};
	for (int k = 0; k < 2; k++) {
		Val *v = k ? c0 : h0;
		if (v && (v->rank != 3 || v->shape[0] != st[0] || v->shape[1] != st[1] || v->shape[2] != st[2]))
			return node_err(c, 0, "%s must be [%lld, %lld, %lld]", k ? "initial_c" : "initial_h", (long long)st[0],
			                (long long)st[1], (long long)st[2]), -1;
	}
	if (sl) {
		if (need_known(c, sl, "sequence_lens") < 0)
			return -1;
		for (int64_t k = 0; k < sl->n; k++)
			if (kgeti(sl, k) != T)
				return node_err(c, 1, "sequence_lens shorter than the sequence (%lld of %lld) are not supported",
				                (long long)kgeti(sl, k), (long long)T), -1;
	}
	int forget1 = kind == K_LSTM && attr_i(n, "input_forget", 0);
	int lbr = kind == K_GRU && attr_i(n, "linear_before_reset", 0);
	const char *acts[6] = {"sigmoid", "tanh", "tanh", "sigmoid", "tanh", "tanh"};
	if (kind == K_RNN)
		acts[0] = acts[3] = "tanh";
	if (kind == K_GRU)
		acts[3] = "sigmoid", acts[4] = "tanh";
	Onnx__AttributeProto *aa = attr(n, "activations");
	if (aa) {
		if ((int)aa->n_strings != nact * D)
			return node_err(c, 0, "%d activations for %d direction%s", (int)aa->n_strings, D, D > 1 ? "s" : ""), -1;
		for (int k = 0; k < nact * D; k++) {
			char nm[32];
			snprintf(nm, sizeof nm, "%.*s", (int)(aa->strings[k].len < 31 ? aa->strings[k].len : 31),
			         (const char *)aa->strings[k].data);
			const char *f = act_fn(nm);
			if (!f)
				return node_err(c, 1, "activation %s is not supported (Sigmoid, Tanh, Relu are)", nm), -1;
			acts[(k / nact) * 3 + k % nact] = f;
		}
	}
	char clipbuf[64], *clip = NULL;
	if (attr(n, "clip")) {
		if (!float_lit(clipbuf, sizeof clipbuf, attr_f(n, "clip", 0), x->dt))
			return node_err(c, 1, "a NaN clip is not supported"), -1;
		clip = clipbuf;
	}
	const char *dt = dtype_name(x->dt);
	/* the sequence as [T * B, I] rows, step t's rows t B .. (t+1) B */
	char *xs = layout ? tmp(c, "reshape(transpose(%s, [1, 0, 2]), [%lld, %lld])", ref(c, x), (long long)(T * B), (long long)I)
	                  : tmp(c, "reshape(%s, [%lld, %lld])", ref(c, x), (long long)(T * B), (long long)I);
	char **ys = xcalloc((size_t)(T * D), sizeof *ys); /* h of step t, direction d: [t * D + d] */
	char *hl[2] = {NULL, NULL}, *cl[2] = {NULL, NULL};
	for (int d = 0; d < D; d++) {
		const char **A = acts + 3 * d;
		char *wt = dir_matrix_t(c, w, d), *rt = dir_matrix_t(c, r, d);
		char *wb = NULL, *rb = NULL;
		if (b) {
			char *bd = tmp(c, "reshape(%s[%d:%d], [%lld])", ref(c, b), d, d + 1, (long long)(2 * G * H));
			wb = tmp(c, "%s[0:%lld]", bd, (long long)(G * H));
			rb = tmp(c, "%s[%lld:%lld]", bd, (long long)(G * H), (long long)(2 * G * H));
			free(bd);
		}
		char *xw = wb ? tmp(c, "%s @ %s + %s", xs, wt, wb) : tmp(c, "%s @ %s", xs, wt);
		char *h = dir_state(c, h0, d, B, H, dt, layout), *cs = kind == K_LSTM ? dir_state(c, c0, d, B, H, dt, layout) : NULL;
		char *pi = NULL, *po = NULL, *pf = NULL;
		if (pv) {
			char *pd = tmp(c, "reshape(%s[%d:%d], [%lld])", ref(c, pv), d, d + 1, (long long)(3 * H));
			pi = tmp(c, "%s[0:%lld]", pd, (long long)H);
			po = tmp(c, "%s[%lld:%lld]", pd, (long long)H, (long long)(2 * H));
			pf = tmp(c, "%s[%lld:%lld]", pd, (long long)(2 * H), (long long)(3 * H));
			free(pd);
		}
		int back = rev || d == 1;
		for (int64_t s = 0; s < T; s++) {
			int64_t t = back ? T - 1 - s : s;
			char *xg = tmp(c, "%s[%lld:%lld]", xw, (long long)(t * B), (long long)((t + 1) * B));
			char *hr = rb ? tmp(c, "%s @ %s + %s", h, rt, rb) : tmp(c, "%s @ %s", h, rt);
			char *nh = NULL;
			if (kind == K_RNN) {
				char *pre = tmp(c, "%s + %s", xg, hr);
				nh = gate(c, A[0], pre, clip, dt);
				free(pre);
			} else if (kind == K_GRU) {
				char *xz = cols(xg, 0, H), *xr = cols(xg, 1, H), *xh = cols(xg, 2, H);
				char *hz = cols(hr, 0, H), *hrr = cols(hr, 1, H), *hh = cols(hr, 2, H);
				char *pz = tmp(c, "%s + %s", xz, hz), *pr = tmp(c, "%s + %s", xr, hrr);
				char *z = gate(c, A[0], pz, clip, dt), *rr = gate(c, A[0], pr, clip, dt);
				char *ph;
				if (lbr) {
					ph = tmp(c, "%s + %s * %s", xh, rr, hh);
				} else {
					/* (r h) R_h^T + Rb_h */
					char *rth = cols(rt, 2, H);
					char *rbh = rb ? tmp(c, "%s[%lld:%lld]", rb, (long long)(2 * H), (long long)(3 * H)) : NULL;
					ph = rbh ? tmp(c, "%s + (%s * %s) @ %s + %s", xh, rr, h, rth, rbh)
					         : tmp(c, "%s + (%s * %s) @ %s", xh, rr, h, rth);
					free(rth);
					free(rbh);
				}
				char *cand = gate(c, A[1], ph, clip, dt);
				nh = tmp(c, "(%s(1) - %s) * %s + %s * %s", dt, z, cand, z, h);
				free(xz), free(xr), free(xh), free(hz), free(hrr), free(hh), free(pz), free(pr);
				free(z), free(rr), free(ph), free(cand);
			} else {
				char *g = tmp(c, "%s + %s", xg, hr);
				char *gi = cols(g, 0, H), *go = cols(g, 1, H), *gf = cols(g, 2, H), *gc = cols(g, 3, H);
				char *pii = pi ? tmp(c, "%s + %s * %s", gi, pi, cs) : tmp(c, "%s", gi);
				char *ig = gate(c, A[0], pii, clip, dt);
				char *fg;
				if (forget1) {
					fg = tmp(c, "%s(1) - %s", dt, ig);
				} else {
					char *pff = pf ? tmp(c, "%s + %s * %s", gf, pf, cs) : tmp(c, "%s", gf);
					fg = gate(c, A[0], pff, clip, dt);
					free(pff);
				}
				char *cc = gate(c, A[1], gc, clip, dt);
				char *nc = tmp(c, "%s * %s + %s * %s", fg, cs, ig, cc);
				char *poo = po ? tmp(c, "%s + %s * %s", go, po, nc) : tmp(c, "%s", go);
				char *og = gate(c, A[0], poo, clip, dt);
				nh = tmp(c, "%s * %s(%s)", og, A[2], nc);
				free(cs);
				cs = nc;
				free(g), free(gi), free(go), free(gf), free(gc), free(pii), free(ig), free(fg), free(cc);
				free(poo), free(og);
			}
			free(xg);
			free(hr);
			free(h);
			h = nh;
			ys[t * D + d] = xstrdup(h);
		}
		hl[d] = h;
		cl[d] = cs;
		free(wt), free(rt), free(wb), free(rb), free(xw), free(pi), free(po), free(pf);
	}
	int rc = 0;
	/* Y: [T, D, B, H], or [B, T, D, H] with layout 1: each step's h reshaped
	 * to [1, 1, B, H] (or [B, 1, 1, H]) and joined along D, then T */
	char sh4[96], sh3[96];
	snprintf(sh4, sizeof sh4, layout ? "[%lld, 1, 1, %lld]" : "[1, 1, %lld, %lld]", (long long)B, (long long)H);
	snprintf(sh3, sizeof sh3, layout ? "[%lld, 1, %lld]" : "[1, %lld, %lld]", (long long)B, (long long)H);
	if (n->n_output > 0 && *n->output[0]) {
		/* the steps joined 64 at a time: concat takes at most 64 tensors */
		char **steps = xcalloc((size_t)T, sizeof *steps);
		for (int64_t t = 0; t < T; t++) {
			Buf f = {0};
			buf_puts(&f, "concat([");
			for (int d = 0; d < D; d++)
				buf_printf(&f, "%sreshape(%s, %s)", d ? ", " : "", ys[t * D + d], sh4);
			buf_printf(&f, "], axis=%d)", layout ? 2 : 1);
			steps[t] = tmp(c, "%s", f.s);
			buf_free(&f);
		}
		int64_t cnt = T;
		while (cnt > 1) {
			int64_t m = 0;
			for (int64_t i = 0; i < cnt; i += 64, m++) {
				Buf f = {0};
				buf_puts(&f, "concat([");
				for (int64_t j = i; j < cnt && j < i + 64; j++)
					buf_printf(&f, "%s%s", j > i ? ", " : "", steps[j]);
				buf_printf(&f, "], axis=%d)", layout ? 1 : 0);
				char *t = tmp(c, "%s", f.s);
				buf_free(&f);
				for (int64_t j = i; j < cnt && j < i + 64; j++)
					free(steps[j]), steps[j] = NULL;
				steps[m] = t;
			}
			cnt = m;
		}
		int64_t ysh[4] = {T, D, B, H}, ysh1[4] = {B, T, D, H};
		rc |= def(c, io, 0, x->dt, 4, layout ? ysh1 : ysh, "%s", steps[0]) ? 0 : -1;
		free(steps[0]);
		free(steps);
	}
	/* Y_h and Y_c: [D, B, H], or [B, D, H] with layout 1 */
	for (int k = 1; k <= (kind == K_LSTM ? 2 : 1) && !rc; k++) {
		if (n->n_output <= (size_t)k || !*n->output[k])
			continue;
		Buf f = {0};
		buf_puts(&f, "concat([");
		for (int d = 0; d < D; d++)
			buf_printf(&f, "%sreshape(%s, %s)", d ? ", " : "", k == 1 ? hl[d] : cl[d], sh3);
		buf_printf(&f, "], axis=%d)", layout ? 1 : 0);
		int64_t sh[3] = {D, B, H}, sh1[3] = {B, D, H};
		rc |= def(c, io, k, x->dt, 3, layout ? sh1 : sh, "%s", f.s) ? 0 : -1;
		buf_free(&f);
	}
	for (int64_t k = 0; k < T * D; k++)
		free(ys[k]);
	free(ys);
	for (int d = 0; d < D; d++)
		free(hl[d]), free(cl[d]);
	free(xs);
	return rc;
}

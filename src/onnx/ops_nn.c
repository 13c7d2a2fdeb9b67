/* ops_nn.c - the translation of matrix products (MatMul, Gemm, Einsum),
 * reductions, activations, Softmax, LayerNormalization and
 * BatchNormalization (the multi-node patterns exporters write for them are
 * in patterns.c). */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int matmul_shape(Ctx *c, Val *a, Val *b, int *r, int64_t *sh)
{
	if (a->rank < 1 || b->rank < 1)
		return node_err(c, 0, "matmul of a 0-d tensor"), -1;
	int64_t ka = a->shape[a->rank - 1], kb = b->rank == 1 ? b->shape[0] : b->shape[b->rank - 2];
	if (ka != kb)
		return node_err(c, 0, "inner dimensions differ (%lld vs %lld)", (long long)ka, (long long)kb), -1;
	int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
	int br;
	int64_t bs[MAX_RANK];
	if (broadcast(c, ba, a->shape, bb, b->shape, &br, bs) < 0)
		return -1;
	*r = br;
	memcpy(sh, bs, sizeof(int64_t) * (size_t)br);
	if (a->rank >= 2)
		sh[(*r)++] = a->shape[a->rank - 2];
	if (b->rank >= 2)
		sh[(*r)++] = b->shape[b->rank - 1];
	return 0;
}

int tr_matmul(Ctx *c, NodeIO *io)
{
	Val *a, *b;
	if (inputs(c, io, "two inputs", 2, &a, &b) < 0)
		return -1;
	int r;
	int64_t sh[MAX_RANK];
	if (matmul_shape(c, a, b, &r, sh) < 0)
		return -1;
	const char *x = ref(c, a), *y = ref(c, b);
	return def(c, io, 0, a->dt, r, sh, "%s @ %s", x, y) ? 0 : -1;
}

int tr_gemm(Ctx *c, NodeIO *io)
{
	Val *a, *b, *cc = in_(io, 2);
	if (inputs(c, io, "two matrices", 2, &a, &b) < 0)
		return -1;
	if (a->rank != 2 || b->rank != 2)
		return node_err(c, 0, "needs two matrices"), -1;
	int ta = (int)attr_i(io->n, "transA", 0), tb = (int)attr_i(io->n, "transB", 0);
	double alpha = attr_f(io->n, "alpha", 1), beta = attr_f(io->n, "beta", 1);
	int64_t m = ta ? a->shape[1] : a->shape[0], k1 = ta ? a->shape[0] : a->shape[1];
	int64_t k2 = tb ? b->shape[1] : b->shape[0], nn = tb ? b->shape[0] : b->shape[1];
	if (k1 != k2)
		return node_err(c, 0, "inner dimensions differ (%lld vs %lld)", (long long)k1, (long long)k2), -1;
	int64_t sh[2] = {m, nn};
	Buf e = {0};
	char lit[64];
	if (alpha != 1 && float_lit(lit, sizeof lit, alpha, a->dt))
		buf_printf(&e, "%s(%s) * ", dtype_name(a->dt), lit);
	buf_puts(&e, "(");
	if (ta)
		buf_printf(&e, "transpose(%s, [1, 0])", ref(c, a));
	else
		buf_puts(&e, ref(c, a));
	buf_puts(&e, " @ ");
	if (tb)
		buf_printf(&e, "transpose(%s, [1, 0])", ref(c, b));
	else
		buf_puts(&e, ref(c, b));
	buf_puts(&e, ")");
	if (cc && beta != 0) {
		int r;
		int64_t bs[MAX_RANK];
		if (broadcast(c, 2, sh, cc->rank, cc->shape, &r, bs) < 0 || r != 2 || bs[0] != m || bs[1] != nn) {
			buf_free(&e);
			return node_err(c, 0, "C does not broadcast to the product"), -1;
		}
		if (beta != 1 && float_lit(lit, sizeof lit, beta, a->dt))
			buf_printf(&e, " + %s(%s) * %s", dtype_name(a->dt), lit, ref(c, cc));
		else
			buf_printf(&e, " + %s", ref(c, cc));
	}
	Val *o = def(c, io, 0, a->dt, 2, sh, "%s", e.s);
	buf_free(&e);
	return o ? 0 : -1;
}

/* Einsum without repeated letters in an operand: operands are transposed to
 * one order of all letters, broadcast-multiplied and summed. */
/* A term's letters with "..." as '.' (one mark for the ellipsis). */
static void einsum_term(const char *s, int len, char *out)
{
	int j = 0;
	for (int q = 0; q < len && j < MAX_RANK + 1; q++) {
		if (s[q] == '.') {
			if (!j || out[j - 1] != '.')
				out[j++] = '.';
		} else if (s[q] != ' ') {
			out[j++] = s[q];
		}
	}
	out[j] = 0;
}

/* An einsum of three or more operands as two-operand ones, left to right:
 * each step keeps the letters that a later operand or the output still
 * needs (the order of their first appearance), and the ellipsis. */
static int einsum_chain(Ctx *c, NodeIO *io, const char *eq, int nterms)
{
	if (nterms > io->nin || nterms > 64)
		return node_err(c, 0, "equation '%s' has %d terms for %d inputs", eq, nterms, io->nin), -1;
	for (const char *q = eq; *q; q++)
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || strchr(".,-> ", *q)))
			return node_err(c, 1, "equation '%s' is not supported", eq), -1;
	char terms[64][64], outt[64];
	const char *arrow = strstr(eq, "->");
	const char *s = eq;
	for (int t = 0; t < nterms; t++) {
		const char *comma = strchr(s, ',');
		const char *end = comma && (!arrow || comma < arrow) ? comma : arrow ? arrow : s + strlen(s);
		einsum_term(s, (int)(end - s), terms[t]);
		s = end + 1;
	}
	if (arrow) {
		einsum_term(arrow + 2, (int)strlen(arrow + 2), outt);
	} else {
		/* implicit: the letters that appear once, in alphabetical order */
		int cnt[128] = {0}, dots = 0, j = 0;
		for (int t = 0; t < nterms; t++)
			for (const char *q = terms[t]; *q; q++)
				*q == '.' ? (void)(dots = 1) : (void)cnt[(unsigned char)*q]++;
		if (dots)
			outt[j++] = '.';
		for (int L = 'A'; L <= 'z'; L++)
			if (cnt[L] == 1)
				outt[j++] = (char)L;
		outt[j] = 0;
	}
	Val *acc = io->in[0];
	char cur[64];
	snprintf(cur, sizeof cur, "%s", terms[0]);
	for (int t = 1; t < nterms; t++) {
		if (!io->in[t])
			return node_err(c, 0, "operand %d is missing", t), -1;
		int last = t == nterms - 1;
		char keep[64] = "";
		if (last) {
			snprintf(keep, sizeof keep, "%s", outt);
		} else {
			/* the letters of cur and terms[t] that later terms or the output use */
			char later[64 * (MAX_RANK + 2) + MAX_RANK + 2] = "";
			for (int u = t + 1; u < nterms; u++)
				strcat(later, terms[u]);
			strcat(later, outt);
			int j = 0;
			char both[128];
			snprintf(both, sizeof both, "%s%s", cur, terms[t]);
			for (const char *q = both; *q && j < 60; q++)
				if (!memchr(keep, *q, (size_t)j) && (*q == '.' || strchr(later, *q)))
					keep[j++] = *q, keep[j] = 0;
		}
		/* '.' back to "..." */
		Buf e = {0};
		const char *parts[3] = {cur, terms[t], keep};
		for (int p = 0; p < 3; p++) {
			buf_puts(&e, p == 1 ? "," : p == 2 ? "->" : "");
			for (const char *q = parts[p]; *q; q++)
				buf_puts(&e, *q == '.' ? "..." : (char[2]){*q, 0});
		}
		Onnx__AttributeProto at;
		onnx__attribute_proto__init(&at);
		at.name = "equation";
		at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
		at.has_s = 1;
		at.s.data = (uint8_t *)(e.s ? e.s : "");
		at.s.len = e.len;
		Onnx__AttributeProto *ap[1] = {&at};
		Onnx__NodeProto node = *io->n;
		node.attribute = ap;
		node.n_attribute = 1;
		char *base = xasprintf("%s.einsum%d", out_name(io, 0), t), *nm = last ? NULL : fresh_name(c, base);
		char *outs[1] = {nm};
		if (nm) {
			node.output = outs;
			node.n_output = 1;
		}
		NodeIO sub = {.nin = 2, .n = &node};
		sub.in[0] = acc;
		sub.in[1] = io->in[t];
		int rc = tr_einsum(c, &sub);
		acc = rc == 0 && nm ? find_val(c, nm) : NULL;
		buf_free(&e);
		free(base);
		free(nm);
		if (rc < 0)
			return -1;
		if (!last && !acc)
			ice("onnx: einsum step without a value");
		snprintf(cur, sizeof cur, "%s", keep);
	}
	return 0;
}

int tr_einsum(Ctx *c, NodeIO *io)
{
	char *eq = attr_s(io->n, "equation");
	if (!eq)
		return node_err(c, 0, "no equation"), -1;
	int nterms = 1;
	for (const char *q = eq; *q && strncmp(q, "->", 2); q++)
		nterms += *q == ',';
	if (nterms > 2) {
		int r = einsum_chain(c, io, eq, nterms);
		free(eq);
		return r;
	}
	int rc = -1;
	char terms[4][MAX_RANK + 1];
	char outt[MAX_RANK + 1];
	int nt = 0, has_out = 0;
	memset(terms, 0, sizeof terms);
	memset(outt, 0, sizeof outt);
	/* expand "..." into upper-case letters, per operand rank */
	char *arrow = strstr(eq, "->");
	Buf lhs = {0};
	buf_printf(&lhs, "%.*s", arrow ? (int)(arrow - eq) : (int)strlen(eq), eq);
	int ell = 0; /* ellipsis rank (max over operands) */
	{
		char *s = lhs.s ? lhs.s : "";
		int k = 0;
		while (1) {
			char *comma = strchr(s, ',');
			int len = comma ? (int)(comma - s) : (int)strlen(s);
			if (nt >= 2 || k >= io->nin || !io->in[k]) {
				node_err(c, 1, "einsum of more than two operands, or of missing ones");
				goto done;
			}
			Val *v = io->in[k];
			int letters = 0, dots = 0, j = 0;
			for (int q = 0; q < len; q++) {
				if (s[q] == '.') {
					dots++;
				} else if (s[q] != ' ') {
					letters++;
				}
			}
			int er = dots ? v->rank - letters : 0;
			if ((dots && dots != 3) || er < 0 || (!dots && letters != v->rank)) {
				node_err(c, 0, "term %d does not match the rank %d of its operand", k, v->rank);
				goto done;
			}
			if (er > ell)
				ell = er;
			for (int q = 0; q < len; q++) {
				if (s[q] == ' ')
					continue;
				if (s[q] == '.') {
					if (s[q + 1] == '.' && s[q + 2] == '.') {
						for (int e = 0; e < er; e++)
							terms[nt][j++] = (char)('0' + (MAX_RANK - er) + e);
						q += 2;
					}
					continue;
				}
				if (!((s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z')) || j >= MAX_RANK) {
					node_err(c, 1, "equation '%s' is not supported", eq);
					goto done;
				}
				terms[nt][j++] = s[q];
			}
			nt++;
			k++;
			if (!comma)
				break;
			s = comma + 1;
		}
	}
	/* a letter twice in a term: that operand's diagonal, by an identity mask
	 * and a sum over the second occurrence */
	Val *opv[2] = {io->in[0], nt > 1 ? io->in[1] : NULL};
	for (int t = 0; t < nt; t++) {
		for (;;) {
			int len = (int)strlen(terms[t]), p = -1, q = -1;
			for (int a = 0; a < len && p < 0; a++)
				for (int b = a + 1; b < len && p < 0; b++)
					if (terms[t][a] == terms[t][b]) {
						p = a;
						q = b;
					}
			if (p < 0)
				break;
			Val *v = opv[t];
			int off = v->rank - len;
			int64_t nd = v->shape[p + off];
			if (nd != v->shape[q + off]) {
				node_err(c, 0, "letter %c has sizes %lld and %lld in one term", terms[t][p], (long long)nd,
				         (long long)v->shape[q + off]);
				goto done;
			}
			int64_t msh[MAX_RANK];
			for (int d = 0; d < v->rank; d++)
				msh[d] = d == p + off || d == q + off ? nd : 1;
			Val *mask = new_val(c, "", v->dt, v->rank, msh);
			free(mask->name);
			mask->name = xasprintf("%s.diagonal%d", out_name(io, 0), c->ntmp);
			val_alloc(mask);
			for (int64_t a = 0; a < nd; a++)
				kset(mask, a * nd + a, 1);
			/* the mask's elements in order: only axes p, q are > 1, so [a, b] is a * nd + b */
			char *mx = xstrdup(ref(c, mask));
			char *d = tmp(c, "sum(%s * %s, axis=%d)", ref(c, v), mx, q + off);
			free(mx);
			int64_t nsh[MAX_RANK];
			int r = 0;
			for (int e = 0; e < v->rank; e++)
				if (e != q + off)
					nsh[r++] = v->shape[e];
			Val *nv = new_val(c, "", v->dt, r, nsh);
			free(nv->name);
			nv->name = xasprintf("%s.diag", out_name(io, 0));
			nv->id = d;
			opv[t] = nv;
			memmove(terms[t] + q, terms[t] + q + 1, (size_t)(len - q));
		}
	}
	if (arrow) {
		has_out = 1;
		int j = 0;
		for (char *s = arrow + 2; *s; s++) {
			if (*s == ' ')
				continue;
			if (*s == '.') {
				if (s[1] == '.' && s[2] == '.') {
					for (int e = 0; e < ell && j < MAX_RANK; e++)
						outt[j++] = (char)('0' + (MAX_RANK - ell) + e);
					s += 2;
				}
				continue;
			}
			/* letters only, as in the terms: a letter indexes size[128] */
			if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) || j >= MAX_RANK) {
				node_err(c, 1, "equation '%s' is not supported", eq);
				goto done;
			}
			outt[j++] = *s;
		}
	}
	/* all letters, and each one's size */
	char all[27 + MAX_RANK];
	int64_t size[128] = {0};
	int na = 0;
	for (int t = 0; t < nt; t++) {
		Val *v = opv[t];
		int off = v->rank - (int)strlen(terms[t]);
		for (int q = 0; terms[t][q]; q++) {
			unsigned char L = (unsigned char)terms[t][q];
			int64_t d = v->shape[q + off];
			if (!size[L]) {
				all[na++] = (char)L;
				size[L] = d;
			} else if (size[L] != d) {
				if (size[L] == 1)
					size[L] = d;
				else if (d != 1) {
					node_err(c, 0, "letter %c has sizes %lld and %lld", L, (long long)size[L], (long long)d);
					goto done;
				}
			}
		}
	}
	if (!has_out) {
		/* implicit: ellipsis letters, then letters appearing once, sorted */
		int j = 0;
		for (int e = 0; e < ell; e++)
			outt[j++] = (char)('0' + (MAX_RANK - ell) + e);
		for (int L = 'A'; L <= 'z'; L++) {
			if (L > 'Z' && L < 'a')
				continue;
			int cnt = 0;
			for (int t = 0; t < nt; t++)
				cnt += strchr(terms[t], L) != NULL;
			if (cnt == 1 && j < MAX_RANK)
				outt[j++] = (char)L;
		}
	}
	int orank = (int)strlen(outt);
	/* order: output letters, then the summed ones */
	char order[27 + MAX_RANK];
	int no = 0;
	for (int q = 0; q < orank; q++) {
		if (!size[(unsigned char)outt[q]]) {
			node_err(c, 0, "output letter %c is in no input", outt[q]);
			goto done;
		}
		order[no++] = outt[q];
	}
	for (int q = 0; q < na; q++)
		if (!strchr(outt, all[q]))
			order[no++] = all[q];
	if (no > MAX_RANK) {
		node_err(c, 1, "einsum over %d letters is more than nestc's rank %d", no, MAX_RANK);
		goto done;
	}
	int64_t osh[MAX_RANK];
	for (int q = 0; q < orank; q++)
		osh[q] = size[(unsigned char)outt[q]];
	char *parts[2] = {NULL, NULL};
	for (int t = 0; t < nt; t++) {
		Val *v = opv[t];
		/* transpose the operand's letters into 'order' order, then reshape with 1s */
		int len = (int)strlen(terms[t]);
		int64_t perm[MAX_RANK], sh[MAX_RANK];
		int j = 0;
		for (int q = 0; q < no; q++) {
			char *p = strchr(terms[t], order[q]);
			if (p)
				perm[j++] = p - terms[t];
		}
		int ident = 1;
		for (int q = 0; q < len; q++)
			ident &= perm[q] == q;
		char *x = xstrdup(ref(c, v));
		if (!ident) {
			char *pl = list_text(len, perm);
			char *t2 = tmp(c, "transpose(%s, %s)", x, pl);
			free(pl);
			free(x);
			x = t2;
		}
		int64_t cur[MAX_RANK];
		j = 0;
		for (int q = 0; q < len; q++)
			cur[q] = v->shape[perm[q]];
		for (int q = 0; q < no; q++)
			sh[q] = strchr(terms[t], order[q]) ? cur[j++] : 1;
		if (no != len) {
			char *l = list_text(no, sh);
			char *t2 = tmp(c, "reshape(%s, %s)", x, l);
			free(l);
			free(x);
			x = t2;
		}
		parts[t] = x;
	}
	Buf e = {0};
	if (nt == 2)
		buf_printf(&e, "%s * %s", parts[0], parts[1]);
	else
		buf_puts(&e, parts[0]);
	if (no > orank) {
		char *prod = tmp(c, "%s", e.s);
		buf_free(&e);
		e = (Buf){0};
		buf_printf(&e, "sum(%s, axis=[", prod);
		for (int q = orank; q < no; q++)
			buf_printf(&e, "%s%d", q > orank ? ", " : "", q);
		buf_puts(&e, "])");
		free(prod);
	}
	/* broadcasting of size-1 letters in the product: make sure of the final shape */
	Val *o = def(c, io, 0, io->in[0]->dt, orank, osh, "%s", e.s);
	buf_free(&e);
	free(parts[0]);
	free(parts[1]);
	rc = o ? 0 : -1;
done:
	buf_free(&lhs);
	free(eq);
	return rc;
}

int tr_reduce(Ctx *c, NodeIO *io, const char *fn, const char *pre, const char *post)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	int64_t axes[MAX_RANK + 1];
	int given;
	int na;
	/* ReduceSum takes axes as an input from opset 13, the others from 18 */
	na = get_axes(c, io, 1, axes, &given);
	if (na < 0)
		return -1;
	int keep = (int)attr_i(io->n, "keepdims", 1);
	int noop = (int)attr_i(io->n, "noop_with_empty_axes", 0);
	if (!na && noop) {
		alias(c, io, 0, a);
		return 0;
	}
	int red[MAX_RANK] = {0};
	if (!na)
		for (int k = 0; k < a->rank; k++)
			red[k] = 1;
	for (int k = 0; k < na; k++) {
		int x = oaxis(c, axes[k], a->rank);
		if (x < 0)
			return -1;
		red[x] = 1;
	}
	int64_t sh[MAX_RANK];
	int r = 0;
	Buf al = {0};
	buf_puts(&al, "[");
	int first = 1;
	for (int k = 0; k < a->rank; k++) {
		if (red[k]) {
			buf_printf(&al, "%s%d", first ? "" : ", ", k);
			first = 0;
		}
		if (!red[k] || keep)
			sh[r++] = red[k] ? 1 : a->shape[k];
	}
	buf_puts(&al, "]");
	if (first) {
		buf_free(&al);
		alias(c, io, 0, a);
		return 0;
	}
	if (!strcmp(fn, "mean") && !dtype_is_float(a->dt)) {
		buf_free(&al);
		return node_err(c, 1, "the mean of integers is not supported"), -1;
	}
	if ((pre || post) && !dtype_is_float(a->dt) && strcmp(pre ? pre : "", "abs(%s)")) {
		buf_free(&al);
		return node_err(c, 1, "%s of integers is not supported", io->n->op_type), -1;
	}
	if (a->known && !pre && !post && strcmp(fn, "mean")) {
		/* folded (a shape's product or sum, as exporters compute them) */
		buf_free(&al);
		Val *o = def_known(c, io, 0, a->dt, r, sh);
		if (!o)
			return -1;
		int p = !strcmp(fn, "prod"), mx = !strcmp(fn, "amax"), mn = !strcmp(fn, "amin");
		int64_t ost[MAX_RANK], pos[MAX_RANK], s = 1;
		for (int k = a->rank - 1; k >= 0; k--) {
			ost[k] = red[k] ? 0 : s;
			s *= red[k] ? 1 : a->shape[k];
		}
		char *seen = xcalloc((size_t)(o->n ? o->n : 1), 1);
		for (int64_t k = 0; k < o->n; k++)
			dtype_is_float(a->dt) ? kset(o, k, p) : kseti(o, k, p);
		for (int64_t e = 0; e < a->n; e++) {
			unravel(e, a->rank, a->shape, pos);
			int64_t q = 0;
			for (int k = 0; k < a->rank; k++)
				q += pos[k] * ost[k];
			if (dtype_is_float(a->dt)) {
				double v = kget(a, e), w = kget(o, q);
				/* a NaN wins a maximum or minimum, as amax and amin */
				double m = isnan(v) || isnan(w) ? NAN : mx ? fmax(w, v) : fmin(w, v);
				kset(o, q, !seen[q] && (mx || mn) ? v : mx || mn ? m : p ? w * v : w + v);
			} else {
				int64_t v = kgeti(a, e), w = kgeti(o, q);
				kseti(o, q, !seen[q] && (mx || mn) ? v : mx ? (v > w ? v : w) : mn ? (v < w ? v : w)
				                : p ? (int64_t)((uint64_t)w * (uint64_t)v) : (int64_t)((uint64_t)w + (uint64_t)v));
			}
			seen[q] = 1;
		}
		int none = 0;
		for (int64_t k = 0; k < o->n && (mx || mn); k++)
			none |= !seen[k];
		free(seen);
		if (none)
			return node_err(c, 0, "the %s of no elements is undefined", mx ? "maximum" : "minimum"), -1;
		return 0;
	}
	char *xs = pre ? tmp(c, pre, ref(c, a)) : xstrdup(ref(c, a));
	char *e = xasprintf("%s(%s, axis=%s, keepdim=%s)", fn, xs, al.s, keep ? "true" : "false");
	Val *o = def(c, io, 0, a->dt, r, sh, post ? post : "%s", e);
	free(xs);
	free(e);
	buf_free(&al);
	return o ? 0 : -1;
}

/* Activations and other elementwise ops written with Nest's: fmt uses %1$s
 * for x, %2$s and %3$s for the attributes alpha and beta (literals). */
int tr_act(Ctx *c, NodeIO *io, const char *fmt, const char *aname, double adef, const char *bname, double bdef)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 1, "%s of %s is not supported", io->n->op_type, dtype_name(a->dt)), -1;
	char al[64] = "0.0", bl[64] = "0.0";
	if (aname && !float_lit(al, sizeof al, attr_f(io->n, aname, adef), DT_F32))
		return node_err(c, 1, "a NaN %s is not supported", aname), -1;
	if (bname && !float_lit(bl, sizeof bl, attr_f(io->n, bname, bdef), DT_F32))
		return node_err(c, 1, "a NaN %s is not supported", bname), -1;
	char ap[80], bp[80];
	snprintf(ap, sizeof ap, "%s(%s)", dtype_name(a->dt), al);
	snprintf(bp, sizeof bp, "%s(%s)", dtype_name(a->dt), bl);
	return def(c, io, 0, a->dt, a->rank, a->shape, fmt, ref(c, a), ap, bp) ? 0 : -1;
}

/* ArgMax, and ArgMin as the argmax of the negated input. */
int tr_argmax(Ctx *c, NodeIO *io)
{
	int neg = !strcmp(io->n->op_type, "ArgMin");
	Val *a;
	if (inputs(c, io, neg ? "a numeric input" : "an input", 1, &a) < 0)
		return -1;
	if (neg && a->dt == DT_BOOL)
		return node_err(c, 0, "needs a numeric input"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", 0), a->rank);
	if (ax < 0)
		return -1;
	int keep = (int)attr_i(io->n, "keepdims", 1);
	int64_t sh[MAX_RANK];
	int r = 0;
	for (int k = 0; k < a->rank; k++)
		if (k != ax || keep)
			sh[r++] = k == ax ? 1 : a->shape[k];
	int last = attr_i(io->n, "select_last_index", 0) && a->shape[ax] > 0;
	/* the first of the reversed axis, counted from the end */
	char *src = last ? reversed(c, io, ref(c, a), a->rank, ax, a->shape[ax]) : xstrdup(ref(c, a));
	/* ArgMin: the argmax of -x, of -x - 1 for integers (no overflow at the
	 * smallest: it wraps to the largest, and the order is reversed) */
	char *arg = !neg ? xstrdup(src) : dtype_is_float(a->dt) ? xasprintf("-%s", src) : xasprintf("(-%s - 1)", src);
	Val *o = last ? def(c, io, 0, DT_I64, r, sh, "%lld - argmax(%s, axis=%d, keepdim=%s)", (long long)(a->shape[ax] - 1),
	                    arg, ax, keep ? "true" : "false")
	              : def(c, io, 0, DT_I64, r, sh, "argmax(%s, axis=%d, keepdim=%s)", arg, ax, keep ? "true" : "false");
	free(src);
	free(arg);
	return o ? 0 : -1;
}

int tr_softmax(Ctx *c, NodeIO *io)
{
	const char *fn = !strcmp(io->n->op_type, "LogSoftmax") ? "log_softmax" : "softmax";
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 0, "needs a float input"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", c->opset >= 13 ? -1 : 1), a->rank);
	if (ax < 0)
		return -1;
	if (c->opset >= 13 || ax == a->rank - 1)
		return def(c, io, 0, a->dt, a->rank, a->shape, "%s(%s, axis=%d)", fn, ref(c, a), ax) ? 0 : -1;
	/* before opset 13: the input as a matrix [prod(:axis), prod(axis:)] */
	int64_t m[2] = {1, 1};
	for (int k = 0; k < a->rank; k++)
		m[k < ax ? 0 : 1] *= a->shape[k];
	char *l = list_text(2, m), *s = list_text(a->rank, a->shape);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, "reshape(%s(reshape(%s, %s), axis=1), %s)", fn, ref(c, a), l, s);
	free(l);
	free(s);
	return o ? 0 : -1;
}

int tr_layernorm(Ctx *c, NodeIO *io)
{
	Val *a, *sc, *b = in_(io, 2);
	if (inputs(c, io, "X and Scale", 2, &a, &sc) < 0)
		return -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 0, "needs a float input"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", -1), a->rank);
	if (ax < 0)
		return -1;
	double eps = attr_f(io->n, "epsilon", 1e-5);
	char el[64];
	float_lit(el, sizeof el, (float)eps, DT_F32);
	int want_stats = io->n->n_output > 1;
	const char *x = ref(c, a), *s = ref(c, sc);
	if (ax == a->rank - 1 && sc->rank == 1 && b && b->rank == 1 && !want_stats)
		return def(c, io, 0, a->dt, a->rank, a->shape, "layernorm(%s, %s, %s, eps=%s)", x, s, ref(c, b), el) ? 0 : -1;
	Buf al = {0};
	buf_puts(&al, "[");
	for (int k = ax; k < a->rank; k++)
		buf_printf(&al, "%s%d", k > ax ? ", " : "", k);
	buf_puts(&al, "]");
	char *m = tmp(c, "mean(%s, axis=%s, keepdim=true)", x, al.s);
	char *d = tmp(c, "%s - %s", x, m);
	char *inv = tmp(c, "rsqrt(mean(%s * %s, axis=%s, keepdim=true) + %s(%s))", d, d, al.s, dtype_name(a->dt), el);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, b ? "%s * %s * %s + %s" : "%s * %s * %s", d, inv, s,
	             b ? ref(c, b) : "");
	int rc = o ? 0 : -1;
	if (o && want_stats) {
		int64_t sh[MAX_RANK];
		for (int k = 0; k < a->rank; k++)
			sh[k] = k < ax ? a->shape[k] : 1;
		if (io->n->n_output > 1 && *io->n->output[1])
			rc |= def(c, io, 1, a->dt, a->rank, sh, "%s", m) ? 0 : -1;
		if (io->n->n_output > 2 && *io->n->output[2])
			rc |= def(c, io, 2, a->dt, a->rank, sh, "%s", inv) ? 0 : -1;
	}
	free(m);
	free(d);
	free(inv);
	buf_free(&al);
	return rc;
}

int tr_batchnorm(Ctx *c, NodeIO *io)
{
	Val *x, *sc, *b, *m, *v;
	if (inputs(c, io, "five inputs", 5, &x, &sc, &b, &m, &v) < 0)
		return -1;
	if (x->rank < 2 || !dtype_is_float(x->dt))
		return node_err(c, 0, "input of rank %d and dtype %s", x->rank, dtype_name(x->dt)), -1;
	char el[64];
	float_lit(el, sizeof el, (float)attr_f(io->n, "epsilon", 1e-5), DT_F32);
	const char *xs = ref(c, x), *ms = ref(c, m), *vs = ref(c, v), *ss = ref(c, sc), *bs = ref(c, b);
	if (!attr_i(io->n, "training_mode", 0)) {
		if (io->n->n_output > 1)
			return node_err(c, 1, "the running statistics outputs outside training mode are not supported"), -1;
		return def(c, io, 0, x->dt, x->rank, x->shape, "batch_norm(%s, %s, %s, %s, %s, eps=%s)", xs, ms, vs, ss, bs,
		           el)
		               ? 0
		               : -1;
	}
	/* training mode: the batch's statistics normalise; the running ones are
	 * updated with momentum */
	char mo[64], om[64];
	double mom = attr_f(io->n, "momentum", 0.9);
	float_lit(mo, sizeof mo, (float)mom, DT_F32);
	float_lit(om, sizeof om, (float)(1 - mom), DT_F32);
	Buf al = {0};
	buf_puts(&al, "[0");
	for (int k = 2; k < x->rank; k++)
		buf_printf(&al, ", %d", k);
	buf_puts(&al, "]");
	char *bm = tmp(c, "mean(%s, axis=%s)", xs, al.s);
	int64_t bsh[MAX_RANK];
	bsh[0] = x->shape[1];
	for (int k = 1; k < x->rank - 1; k++)
		bsh[k] = 1;
	char *bl = list_text(x->rank - 1, bsh);
	char *d = tmp(c, "%s - reshape(%s, %s)", xs, bm, bl);
	char *bv = tmp(c, "mean(%s * %s, axis=%s)", d, d, al.s);
	Val *o = def(c, io, 0, x->dt, x->rank, x->shape, "batch_norm(%s, %s, %s, %s, %s, eps=%s)", xs, bm, bv, ss, bs, el);
	int rc = o ? 0 : -1;
	if (o && io->n->n_output > 1 && *io->n->output[1])
		rc |= def(c, io, 1, m->dt, m->rank, m->shape, "%s * %s(%s) + %s * %s(%s)", ms, dtype_name(m->dt), mo, bm,
		          dtype_name(m->dt), om)
		              ? 0
		              : -1;
	if (!rc && io->n->n_output > 2 && *io->n->output[2])
		rc |= def(c, io, 2, v->dt, v->rank, v->shape, "%s * %s(%s) + %s * %s(%s)", vs, dtype_name(v->dt), mo, bv,
		          dtype_name(v->dt), om)
		              ? 0
		              : -1;
	free(bm);
	free(bl);
	free(d);
	free(bv);
	buf_free(&al);
	return rc;
}

/* InstanceNormalization: PyTorch's group_norm with a group per channel. */
int tr_instance_norm(Ctx *c, NodeIO *io)
{
	Val *x, *sc, *b;
	if (inputs(c, io, "three inputs", 3, &x, &sc, &b) < 0)
		return -1;
	if (x->rank < 3 || !dtype_is_float(x->dt))
		return node_err(c, 0, "input of rank %d and dtype %s", x->rank, dtype_name(x->dt)), -1;
	if (sc->rank != 1 || b->rank != 1 || sc->shape[0] != x->shape[1] || b->shape[0] != x->shape[1])
		return node_err(c, 0, "scale and B must be [%lld], the input's channels", (long long)x->shape[1]), -1;
	char el[64];
	if (!float_lit(el, sizeof el, (float)attr_f(io->n, "epsilon", 1e-5), DT_F32))
		return node_err(c, 1, "a NaN epsilon is not supported"), -1;
	return def(c, io, 0, x->dt, x->rank, x->shape, "group_norm(%s, %lld, %s, %s, eps=%s)", ref(c, x),
	           (long long)x->shape[1], ref(c, sc), ref(c, b), el)
	           ? 0
	           : -1;
}

/* IsNaN (x != x) and IsInf (past the largest finite value, of the signs
 * asked for; of none, false): bool. */
int tr_isnan_isinf(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 1, "%s of %s is not supported", io->n->op_type, dtype_name(a->dt)), -1;
	const char *x = ref(c, a);
	if (!strcmp(io->n->op_type, "IsNaN"))
		return def(c, io, 0, DT_BOOL, a->rank, a->shape, "%s != %s", x, x) ? 0 : -1;
	int pos = (int)attr_i(io->n, "detect_positive", 1), neg = (int)attr_i(io->n, "detect_negative", 1);
	const char *big = a->dt == DT_F64 ? "1.7976931348623157e308" : "3.4028234663852886e38";
	if (pos && neg)
		return def(c, io, 0, DT_BOOL, a->rank, a->shape, "abs(%s) > %s(%s)", x, dtype_name(a->dt), big) ? 0 : -1;
	if (pos)
		return def(c, io, 0, DT_BOOL, a->rank, a->shape, "%s > %s(%s)", x, dtype_name(a->dt), big) ? 0 : -1;
	if (neg)
		return def(c, io, 0, DT_BOOL, a->rank, a->shape, "%s < -%s(%s)", x, dtype_name(a->dt), big) ? 0 : -1;
	return def(c, io, 0, DT_BOOL, a->rank, a->shape, "abs(%s) < %s(0)", x, dtype_name(a->dt)) ? 0 : -1;
}

/* Hardmax: 1 at the first maximum along the axis, 0 elsewhere; before
 * opset 13, of the input seen as a matrix split at the axis. */
int tr_hardmax(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (!dtype_is_float(a->dt) || a->rank < 1)
		return node_err(c, 0, "needs a float input of rank 1 or more"), -1;
	int ax = oaxis(c, attr_i(io->n, "axis", c->opset < 13 ? 1 : -1), a->rank);
	if (ax < 0)
		return -1;
	const char *x = ref(c, a);
	char *src = xstrdup(x);
	int r = a->rank;
	int64_t msh[MAX_RANK];
	memcpy(msh, a->shape, sizeof msh);
	if (c->opset < 13) {
		int64_t rows = 1, cols = 1;
		for (int k = 0; k < a->rank; k++)
			*(k < ax ? &rows : &cols) *= a->shape[k];
		free(src);
		src = tmp(c, "reshape(%s, [%lld, %lld])", x, (long long)rows, (long long)cols);
		r = 2, ax = 1, msh[0] = rows, msh[1] = cols;
	}
	int64_t ash[MAX_RANK];
	for (int k = 0; k < r; k++)
		ash[k] = k == ax ? msh[ax] : 1;
	char *al = list_text(r, ash), *sl = list_text(a->rank, a->shape);
	char *h = tmp(c, "where(reshape(arange(%lld), %s) == argmax(%s, axis=%d, keepdim=true), %s(1), %s(0))",
	              (long long)msh[ax], al, src, ax, dtype_name(a->dt), dtype_name(a->dt));
	Val *o = c->opset < 13 ? def(c, io, 0, a->dt, a->rank, a->shape, "reshape(%s, %s)", h, sl)
	                       : def(c, io, 0, a->dt, a->rank, a->shape, "%s", h);
	free(al);
	free(sl);
	free(src);
	free(h);
	return o ? 0 : -1;
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(variance) + 1e-9) over the
 * axes (default 0, 2, 3), as ONNX's function body. */
int tr_mvn(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (!dtype_is_float(a->dt))
		return node_err(c, 0, "needs a float input"), -1;
	int64_t axes[MAX_RANK + 1] = {0, 2, 3};
	int na = attr_ints(io->n, "axes", axes, MAX_RANK);
	if (na < 0)
		na = 3;
	Buf al = {0};
	buf_putc(&al, '[');
	for (int k = 0; k < na; k++) {
		int ax = oaxis(c, axes[k], a->rank);
		if (ax < 0) {
			buf_free(&al);
			return -1;
		}
		buf_printf(&al, "%s%d", k ? ", " : "", ax);
	}
	buf_putc(&al, ']');
	const char *x = ref(c, a);
	char *d = tmp(c, "%s - mean(%s, axis=%s, keepdim=true)", x, x, al.s);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, "%s / (sqrt(mean(%s * %s, axis=%s, keepdim=true)) + %s(1e-9))", d,
	             d, d, al.s, dtype_name(a->dt));
	free(d);
	buf_free(&al);
	return o ? 0 : -1;
}

/* LRN: x / (bias + alpha / size * (sum of the squares of the channels
 * c - (size - 1) / 2 .. c + size / 2))^beta, the window's sum as size
 * slices of the squares padded with zeros along the channels. */
int tr_lrn(Ctx *c, NodeIO *io)
{
	Val *a;
	if (inputs(c, io, "an input", 1, &a) < 0)
		return -1;
	if (!dtype_is_float(a->dt) || a->rank < 2)
		return node_err(c, 0, "needs a float input of rank 2 or more"), -1;
	int64_t size = attr_i(io->n, "size", 0);
	if (size < 1 || size > 256)
		return node_err(c, size < 1 ? 0 : 1, "size %lld is not supported", (long long)size), -1;
	char al[64], be[64], bi[64];
	if (!float_lit(al, sizeof al, attr_f(io->n, "alpha", 1e-4) / (double)size, a->dt) ||
	    !float_lit(be, sizeof be, attr_f(io->n, "beta", 0.75), a->dt) ||
	    !float_lit(bi, sizeof bi, attr_f(io->n, "bias", 1), a->dt))
		return node_err(c, 1, "a NaN alpha, beta or bias is not supported"), -1;
	int64_t C = a->shape[1], lo = (size - 1) / 2, hi = size / 2;
	const char *x = ref(c, a), *dt = dtype_name(a->dt);
	int64_t zs[MAX_RANK];
	memcpy(zs, a->shape, sizeof zs);
	Buf parts = {0};
	buf_puts(&parts, "[");
	if (lo) {
		zs[1] = lo;
		char *zl = list_text(a->rank, zs);
		buf_printf(&parts, "%s(zeros(%s)), ", dt, zl);
		free(zl);
	}
	buf_printf(&parts, "%s * %s", x, x);
	if (hi) {
		zs[1] = hi;
		char *zl = list_text(a->rank, zs);
		buf_printf(&parts, ", %s(zeros(%s))", dt, zl);
		free(zl);
	}
	buf_puts(&parts, "]");
	char *p = tmp(c, "concat(%s, axis=1)", parts.s);
	buf_free(&parts);
	Buf sum = {0};
	for (int64_t j = 0; j < size; j++) {
		char *sl = slice_expr(p, 1, j, j + C);
		buf_printf(&sum, "%s%s", j ? " + " : "", sl);
		free(sl);
	}
	char *s = tmp(c, "%s", sum.s);
	buf_free(&sum);
	Val *o = def(c, io, 0, a->dt, a->rank, a->shape, "%s / pow(%s(%s) + %s(%s) * %s, %s(%s))", x, dt, bi, dt, al, s,
	             dt, be);
	free(p);
	free(s);
	return o ? 0 : -1;
}

/* NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss (the same of
 * log_softmax over axis 1, which is its second output): loss[n, d..] =
 * -x[n, t[n, d..], d..] * weight[t[n, d..]], 0 where t is ignore_index;
 * reduced by none, sum, or mean = sum(loss) / sum(weight[t]) with the
 * ignored targets weighing 0 (a count of the others without weights), as
 * ONNX's function bodies. An ignored target is replaced by 0 before the
 * gathers, so that it may be any value; another one out of [0, C) is a
 * run-time error of take_along_axis(). */
int tr_loss(Ctx *c, NodeIO *io)
{
	int sce = !strcmp(io->n->op_type, "SoftmaxCrossEntropyLoss");
	Val *x, *t, *w = in_(io, 2);
	if (inputs(c, io, "scores and labels", 2, &x, &t) < 0)
		return -1;
	if (!dtype_is_float(x->dt) || x->rank < 2)
		return node_err(c, 0, "needs float scores of rank 2 or more"), -1;
	if (t->dt != DT_I32 && t->dt != DT_I64)
		return node_err(c, 0, "labels of dtype %s (int32 or int64 expected)", dtype_name(t->dt)), -1;
	int64_t C = x->shape[1];
	int bad = t->rank != x->rank - 1 || t->shape[0] != x->shape[0];
	for (int k = 1; k < t->rank && !bad; k++)
		bad = t->shape[k] != x->shape[k + 1];
	if (bad)
		return node_err(c, 0, "labels must have the shape of the scores without axis 1"), -1;
	if (w && (w->rank != 1 || w->shape[0] != C || w->dt != x->dt))
		return node_err(c, 0, "weights must be %s[%lld], one per class", dtype_name(x->dt), (long long)C), -1;
	char *red = attr_s(io->n, "reduction");
	const char *rd = red ? red : "mean";
	if (strcmp(rd, "none") && strcmp(rd, "sum") && strcmp(rd, "mean")) {
		node_err(c, 1, "reduction '%.20s' is not supported (none, sum or mean)", rd);
		free(red);
		return -1;
	}
	int ignore = attr(io->n, "ignore_index") != NULL;
	long long ii = (long long)attr_i(io->n, "ignore_index", 0);
	const char *dt = dtype_name(x->dt), *tt = dtype_name(t->dt);
	const char *lp = ref(c, x);
	if (sce) {
		/* log_prob, the second output when asked for: a value either way */
		Val *l = io->n->n_output > 1 && out_name(io, 1)[0]
		               ? def(c, io, 1, x->dt, x->rank, x->shape, "log_softmax(%s, axis=1)", lp)
		               : NULL;
		if (io->n->n_output > 1 && out_name(io, 1)[0] && !l) {
			free(red);
			return -1;
		}
		lp = l ? l->id : tmp(c, "log_softmax(%s, axis=1)", lp);
		if (!l)
			vec_push(&c->garbage, (void *)lp);
	}
	const char *tl = ref(c, t);
	char *tc = ignore ? tmp(c, "where(%s == %s(%lld), %s(0), %s)", tl, tt, ii, tt, tl) : xstrdup(tl);
	int64_t ish[MAX_RANK];
	ish[0] = t->shape[0], ish[1] = 1;
	for (int k = 1; k < t->rank; k++)
		ish[k + 1] = t->shape[k];
	char *il = list_text(x->rank, ish), *tsl = list_text(t->rank, t->shape);
	char *nl = ignore ? tmp(c, "where(%s == %s(%lld), %s(0), -reshape(take_along_axis(%s, reshape(%s, %s), axis=1), %s))",
	                        tl, tt, ii, dt, lp, tc, il, tsl)
	                  : tmp(c, "-reshape(take_along_axis(%s, reshape(%s, %s), axis=1), %s)", lp, tc, il, tsl);
	char *wt = NULL;
	if (w && ignore)
		wt = tmp(c, "where(%s == %s(%lld), %s(0), %s[%s])", tl, tt, ii, dt, ref(c, w), tc);
	else if (w)
		wt = tmp(c, "%s[%s]", ref(c, w), tc);
	else if (ignore)
		wt = tmp(c, "where(%s == %s(%lld), %s(0), %s(1))", tl, tt, ii, dt, dt);
	char *el = wt ? tmp(c, "%s * %s", nl, wt) : xstrdup(nl);
	Val *o;
	if (!strcmp(rd, "none"))
		o = def(c, io, 0, x->dt, t->rank, t->shape, "%s", el);
	else if (!strcmp(rd, "sum") || (!strcmp(rd, "mean") && !wt))
		o = def(c, io, 0, x->dt, 0, NULL, "%s(%s)", rd, el);
	else
		o = def(c, io, 0, x->dt, 0, NULL, "sum(%s) / sum(%s)", el, wt);
	free(red);
	free(tc);
	free(il);
	free(tsl);
	free(nl);
	free(wt);
	free(el);
	return o ? 0 : -1;
}

/* outline.c - repeated layers as @regions: the cuts of the node order
 * where one run-time tensor passes, segment templates and their keys, the
 * choice of the repeating group, region text with a record of weights per
 * call, the regions of model-local functions, and the grouping of dotted
 * weight names into records and arrays. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n strings and their array (NULL: nothing). */
static void free_strs(char **v, int n)
{
	for (int k = 0; v && k < n; k++)
		free(v[k]);
	free(v);
}

void plan_free(OPlan *p)
{
	if (!p)
		return;
	free_strs(p->in_name, p->nseg);
	free_strs(p->out_name, p->nseg);
	free_strs(p->key, p->nseg);
	free_strs(p->rname, p->nregions);
	free_strs(p->rtempl, p->nregions);
	free_strs(p->rkey, p->nregions);
	free(p->rcalls);
	free(p->rnodes);
	free(p->start);
	free(p->end);
	free(p->quiet);
	free(p->region);
	free(p->seg_at);
	free(p->seg_end);
	buf_free(&p->regions);
	buf_free(&p->summary);
	free(p);
}

/* Template text with placeholders replaced: @X@ by x, @Pk@ by fields[k],
 * @Lk@ by local prefix + k. */
static char *render(const char *t, const char *x, char **fields, const char *local)
{
	Buf b = {0};
	for (const char *s = t; *s; s++) {
		if (*s == '@' && (s[1] == 'X' || s[1] == 'P' || s[1] == 'L')) {
			const char *e = strchr(s + 1, '@');
			if (e) {
				int k = atoi(s + 2);
				if (s[1] == 'X')
					buf_puts(&b, x);
				else if (s[1] == 'P')
					buf_puts(&b, fields[k]);
				else
					buf_printf(&b, "%s%d", local, k);
				s = e;
				continue;
			}
		}
		buf_putc(&b, *s);
	}
	char *r = b.s ? b.s : xstrdup("");
	return r;
}

void seg_begin(Ctx *c, int s)
{
	OPlan *p = c->plan;
	p->cur = -1;
	if (!p->probe && p->region[s] < 0)
		return;
	Val *in = find_val(c, p->in_name[s]);
	if (!in || in->known || !in->id)
		return;
	p->cur = s;
	c->rmode = 1;
	c->rin = in;
	c->rcount = 0;
	c->inner.n = 0;
	for (int k = 0; k < c->next; k++) {
		free(c->ext[k].id);
		free(c->ext[k].oname);
		free(c->ext[k].ph);
	}
	c->next = 0;
	/* the template goes to a body of its own */
	Buf *saved = xmalloc(sizeof *saved);
	*saved = c->body;
	c->body = (Buf){0};
	vec_push(&c->inner, NULL); /* slot 0: the saved body */
	c->inner.v[0] = saved;
}

/* A field name from an ONNX weight name: what follows its layer number
 * ("h.3.attn.c_attn.weight" -> attn_c_attn_weight), or w<k>. */
static char *field_name(const char *oname, int k, char **taken, int ntaken)
{
	const char *s = oname, *best = NULL;
	for (const char *q = s; *q; q++) {
		if ((*q == '.' || *q == '/') && q[1] >= '0' && q[1] <= '9') {
			const char *r = q + 1;
			while (*r >= '0' && *r <= '9')
				r++;
			if (*r == '.' || *r == '/') {
				best = r + 1;
				break;
			}
		}
	}
	Buf b = {0};
	if (best && *best && !(*best >= '0' && *best <= '9'))
		for (const char *q = best; *q && b.len < 40; q++)
			buf_putc(&b, ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) ? *q : '_');
	char *f = b.s ? b.s : xasprintf("w%d", k);
	int bad = is_builtin(f);
	for (int j = 0; onnx_keywords[j]; j++)
		bad |= !strcmp(onnx_keywords[j], f);
	for (int j = 0; j < ntaken; j++)
		bad |= !strcmp(taken[j], f);
	if (bad) {
		free(f);
		f = xasprintf("w%d", k);
	}
	return f;
}

void seg_end(Ctx *c, int s)
{
	OPlan *p = c->plan;
	if (p->cur != s)
		return;
	p->cur = -1;
	c->rmode = 0;
	Buf *saved = c->inner.v[0];
	char *templ = c->body.s ? c->body.s : xstrdup("");
	c->body = *saved;
	free(saved);
	c->inner.v[0] = NULL;
	Val *out = find_val(c, p->out_name[s]);
	const char *oph = out && out->id && !strncmp(out->id, "@L", 2) && is_inner(c, out) ? out->id : NULL;
	/* the key: input and output types, the template, the weights' types */
	Buf key = {0};
	type_text(&key, c->rin->dt, c->rin->rank, c->rin->shape);
	buf_puts(&key, " -> ");
	if (out)
		type_text(&key, out->dt, out->rank, out->shape);
	buf_printf(&key, " = %s\n%s", oph ? oph : "?", templ);
	for (int k = 0; k < c->next; k++) {
		buf_printf(&key, "%s: ", c->ext[k].ph);
		type_text(&key, c->ext[k].dt, c->ext[k].rank, c->ext[k].shape);
		buf_putc(&key, '\n');
	}
	char **fields = xcalloc((size_t)c->next + 1, sizeof(char *));
	for (int k = 0; k < c->next; k++)
		fields[k] = c->ext[k].id;
	char *outid = out && !c->failed ? make_id(c, out->name, "v_") : NULL;
	int r = p->probe ? -1 : p->region[s];
	if (p->probe) {
		p->key[s] = xstrdup(oph ? key.s : "");
	}
	if (r >= 0 && oph && !strcmp(p->rkey[r] ? p->rkey[r] : key.s, key.s)) {
		if (!p->rkey[r]) {
			/* the region function, from its first occurrence */
			p->rkey[r] = xstrdup(key.s);
			char **fn = xcalloc((size_t)c->next + 1, sizeof(char *));
			char **pf = xcalloc((size_t)c->next + 1, sizeof(char *));
			buf_printf(&p->regions, "\n# %d nodes, from '%s' to '%s'\n@region\nfn %s(x: ", p->end[s] - p->start[s],
			           p->in_name[s], p->out_name[s], p->rname[r]);
			type_text(&p->regions, c->rin->dt, c->rin->rank, c->rin->shape);
			if (c->next) {
				buf_puts(&p->regions, ",\n    p: {");
				for (int k = 0; k < c->next; k++) {
					fn[k] = field_name(c->ext[k].oname, k, fn, k);
					pf[k] = xasprintf("p.%s", fn[k]);
					buf_printf(&p->regions, "%s%s: ", k ? ",\n        " : " ", fn[k]);
					type_text(&p->regions, c->ext[k].dt, c->ext[k].rank, c->ext[k].shape);
				}
				buf_puts(&p->regions, " }");
			}
			buf_puts(&p->regions, ") -> ");
			type_text(&p->regions, out->dt, out->rank, out->shape);
			char *body = render(templ, "x", pf, "a");
			char *ret = render(oph, "x", pf, "a");
			buf_printf(&p->regions, " {\n%s  return %s\n}\n", body, ret);
			free(body);
			free(ret);
			p->rtempl[r] = xstrdup("");
			/* the field names, for the calls */
			Buf fl = {0};
			for (int k = 0; k < c->next; k++) {
				buf_printf(&fl, "%s%s", k ? "\n" : "", fn[k]);
				free(fn[k]);
				free(pf[k]);
			}
			free(p->rtempl[r]);
			p->rtempl[r] = fl.s ? fl.s : xstrdup("");
			free(fn);
			free(pf);
		}
		/* the call */
		buf_printf(&c->body, "  # nodes %d..%d ('%s' .. '%s')\n", p->start[s], p->end[s] - 1, p->in_name[s], p->out_name[s]);
		buf_printf(&c->body, "  let %s = %s(%s", outid, p->rname[r], c->rin->id);
		if (c->next) {
			buf_puts(&c->body, ", {");
			const char *f = p->rtempl[r];
			for (int k = 0; k < c->next; k++) {
				const char *e = strchr(f, '\n');
				int len = e ? (int)(e - f) : (int)strlen(f);
				buf_printf(&c->body, "%s%.*s: %s", k ? ", " : " ", len, f, c->ext[k].id);
				f = e ? e + 1 : f + len;
			}
			buf_puts(&c->body, " }");
		}
		buf_puts(&c->body, ")\n");
		p->rcalls[r]++;
		buf_printf(&p->summary, "    %s: nodes %d..%d ('%s' .. '%s')\n", p->rname[r], p->start[s], p->end[s] - 1,
		           p->in_name[s], p->out_name[s]);
	} else {
		/* inline: the template with names of its own */
		char *loc = xasprintf("s%d_", s);
		char *body = render(templ, c->rin->id, fields, loc);
		buf_puts(&c->body, body);
		if (outid && out) {
			char *ret = oph ? render(oph, c->rin->id, fields, loc) : xstrdup(out->id ? out->id : c->rin->id);
			buf_printf(&c->body, "  let %s = %s\n", outid, ret);
			free(ret);
		}
		free(body);
		free(loc);
	}
	/* names made in the segment end with it; the output gets its own */
	for (int k = 1; k < c->inner.n; k++) {
		Val *v = c->inner.v[k];
		if (v && v != out) {
			free(v->id);
			v->id = NULL;
		}
	}
	if (out && outid) {
		free(out->id);
		out->id = outid;
	} else {
		free(outid);
	}
	c->inner.n = 0;
	c->rin = NULL;
	free(fields);
	free(templ);
	buf_free(&key);
}

/* Weights named h.0.attn.c_attn.weight, h.1..., wte.weight become
 * `param h: {...}[12]` and `param wte: { weight: ... }`: a tree per first
 * name part; an inner node whose keys are 0..n-1 with identical subtrees is
 * an array, any other a record (numbers are numbered fields). The flat
 * names in the text become paths. */
typedef struct GNode {
	char *key;
	int leaf;          /* weight index, or -1 */
	struct GNode **kid;
	int nkid;
} GNode;

static void gnode_free(GNode *n)
{
	if (!n)
		return;
	for (int k = 0; k < n->nkid; k++)
		gnode_free(n->kid[k]);
	free(n->kid);
	free(n->key);
	free(n);
}

static int is_ident(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

static int is_number(const char *s)
{
	if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 9)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int is_keyword(const char *s)
{
	for (int j = 0; onnx_keywords[j]; j++)
		if (!strcmp(onnx_keywords[j], s))
			return 1;
	return 0;
}

/* Type text of a subtree, or NULL when it cannot be one (a leaf with kids). */
static char *gnode_type(Ctx *c, GNode *n, int *is_array)
{
	*is_array = 0;
	if (n->leaf == -2 || (n->leaf < 0 && !n->nkid))
		return NULL;
	if (n->leaf >= 0) {
		if (n->nkid)
			return NULL;
		Buf b = {0};
		type_text(&b, c->w[n->leaf].dt, c->w[n->leaf].rank, c->w[n->leaf].shape);
		return b.s;
	}
	char **kt = xcalloc((size_t)n->nkid + 1, sizeof(char *));
	int ok = 1, arr = 1;
	for (int k = 0; k < n->nkid && ok; k++) {
		int sub;
		kt[k] = gnode_type(c, n->kid[k], &sub);
		ok = kt[k] != NULL;
		char num[16];
		snprintf(num, sizeof num, "%d", k);
		arr = arr && ok && !strcmp(n->kid[k]->key, num) && !strcmp(kt[k], kt[0]);
	}
	char *r = NULL;
	if (ok) {
		Buf b = {0};
		if (arr) {
			buf_printf(&b, "%s[%d]", kt[0], n->nkid);
			*is_array = 1;
		} else {
			buf_puts(&b, "{ ");
			for (int k = 0; k < n->nkid; k++)
				buf_printf(&b, "%s%s: %s", k ? ", " : "", n->kid[k]->key, kt[k]);
			buf_puts(&b, " }");
		}
		r = b.s;
	}
	for (int k = 0; k < n->nkid; k++)
		free(kt[k]);
	free(kt);
	return r;
}

static void gnode_paths(Ctx *c, GNode *n, const char *path)
{
	if (n->leaf >= 0) {
		c->w[n->leaf].path = xstrdup(path);
		return;
	}
	int arr;
	char *t = gnode_type(c, n, &arr);
	free(t);
	for (int k = 0; k < n->nkid; k++) {
		char *p = arr ? xasprintf("%s[%s]", path, n->kid[k]->key) : xasprintf("%s.%s", path, n->kid[k]->key);
		gnode_paths(c, n->kid[k], p);
		free(p);
	}
}

/* Replace the identifiers that are grouped params' flat names. */
static char *rename_params(Ctx *c, const char *t)
{
	Buf b = {0};
	for (const char *s = t; *s;) {
		if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_') {
			const char *e = s;
			while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') || *e == '_')
				e++;
			const char *rep = NULL;
			int prev_dot = s > t && s[-1] == '.';
			for (int k = 0; k < c->nw && !prev_dot; k++)
				if (c->w[k].path && strlen(c->w[k].id) == (size_t)(e - s) && !strncmp(c->w[k].id, s, (size_t)(e - s)))
					rep = c->w[k].path;
			if (rep)
				buf_puts(&b, rep);
			else
				buf_printf(&b, "%.*s", (int)(e - s), s);
			s = e;
		} else if (*s >= '0' && *s <= '9') {
			/* a number, perhaps 1e-05: keep its letters with it */
			const char *e = s;
			while ((*e >= '0' && *e <= '9') || *e == '.' || *e == 'e' || ((*e == '-') && e[-1] == 'e'))
				e++;
			buf_printf(&b, "%.*s", (int)(e - s), s);
			s = e;
		} else {
			buf_putc(&b, *s++);
		}
	}
	return b.s ? b.s : xstrdup("");
}

void group_params(Ctx *c, char **regions, char **body)
{
	GNode **roots = NULL;
	int nroots = 0;
	for (int k = 0; k < c->nw; k++) {
		char *nm = xstrdup(c->w[k].name);
		char *parts[64];
		int np = 0, ok = 1;
		for (char *tok = strtok(nm, "."); tok && ok; tok = strtok(NULL, ".")) {
			if (np == 64 || (!is_ident(tok) && !is_number(tok)) || is_keyword(tok))
				ok = 0;
			else
				parts[np++] = tok;
		}
		/* the name must split cleanly: no empty parts */
		const char *wn = c->w[k].name;
		ok = ok && np >= 2 && is_ident(parts[0]) && wn[0] != '.' && wn[strlen(wn) - 1] != '.' && !strstr(wn, "..");
		if (ok && (is_builtin(parts[0]) || id_taken(c, parts[0]))) {
			/* the root may only clash with the flat names of its own params:
			 * not with one of another root's (v.2 stays flat as v_2 when v's
			 * group cannot be a type; v_2.wrapped may not make a root v_2) */
			int other = is_builtin(parts[0]) || is_keyword(parts[0]);
			size_t rl = strlen(parts[0]);
			for (int j = 0; j < c->ids.n && !other; j++)
				if (!strcmp(c->ids.v[j], parts[0])) {
					other = 1;
					for (int q = 0; q < c->nw; q++)
						if (!strcmp(c->w[q].id, parts[0]) && !strncmp(c->w[q].name, parts[0], rl) &&
						    c->w[q].name[rl] == '.')
							other = 0;
				}
			/* a param of that very name stays flat (it has no dot): the root
			 * would be a second 'idx' beside it */
			for (int q = 0; q < c->nw && !other; q++)
				other = !strcmp(c->w[q].name, parts[0]);
			ok = !other;
		}
		if (ok) {
			GNode *r = NULL;
			for (int j = 0; j < nroots; j++)
				if (!strcmp(roots[j]->key, parts[0]))
					r = roots[j];
			if (!r) {
				roots = xrealloc(roots, (size_t)(nroots + 1) * sizeof *roots);
				r = roots[nroots++] = xcalloc(1, sizeof(GNode));
				r->key = xstrdup(parts[0]);
				r->leaf = -1;
			}
			for (int p = 1; p < np; p++) {
				GNode *ch = NULL;
				for (int j = 0; j < r->nkid; j++)
					if (!strcmp(r->kid[j]->key, parts[p]))
						ch = r->kid[j];
				if (!ch) {
					r->kid = xrealloc(r->kid, (size_t)(r->nkid + 1) * sizeof *r->kid);
					ch = r->kid[r->nkid++] = xcalloc(1, sizeof(GNode));
					ch->key = xstrdup(parts[p]);
					ch->leaf = -1;
				}
				r = ch;
			}
			if (r->leaf >= 0 || r->nkid)
				r->leaf = -2; /* a name twice, or a leaf with children: spoils the type */
			else
				r->leaf = k;
		}
		free(nm);
	}
	Buf pl = {0};
	for (int j = 0; j < nroots; j++) {
		/* arrays need their numbered children in order */
		int arr;
		char *t = gnode_type(c, roots[j], &arr);
		if (!t || strstr(t, "(null)"))
			continue;
		gnode_paths(c, roots[j], roots[j]->key);
		buf_printf(&pl, "param %s: %s\n", roots[j]->key, t);
		free(t);
	}
	for (int k = 0; k < c->nw; k++)
		if (!c->w[k].path) {
			buf_printf(&pl, "param %s: ", c->w[k].id);
			type_text(&pl, c->w[k].dt, c->w[k].rank, c->w[k].shape);
			buf_printf(&pl, " = \"%s\"\n", c->w[k].name);
		}
	buf_free(&c->params);
	c->params = pl;
	char *r2 = rename_params(c, *regions ? *regions : ""), *b2 = rename_params(c, *body ? *body : "");
	free(*regions);
	free(*body);
	*regions = r2;
	*body = b2;
	for (int j = 0; j < nroots; j++)
		gnode_free(roots[j]);
	free(roots);
}

/* The calls of local functions as region calls: one region per function,
 * for each call with one run-time input and one output (from pass 0's c0). */
OPlan *plan_from_calls(Ctx *c0, Expanded *e, int nnodes)
{
	OPlan *q = xcalloc(1, sizeof *q);
	int m = e->ncalls;
	q->n = nnodes;
	q->start = xcalloc((size_t)m + 1, sizeof(int));
	q->end = xcalloc((size_t)m + 1, sizeof(int));
	q->in_name = xcalloc((size_t)m + 1, sizeof(char *));
	q->out_name = xcalloc((size_t)m + 1, sizeof(char *));
	q->region = xcalloc((size_t)m + 1, sizeof(int));
	q->rname = xcalloc((size_t)m + 1, sizeof(char *));
	q->rtempl = xcalloc((size_t)m + 1, sizeof(char *));
	q->rkey = xcalloc((size_t)m + 1, sizeof(char *));
	q->rcalls = xcalloc((size_t)m + 1, sizeof(int));
	q->rnodes = xcalloc((size_t)m + 1, sizeof(int));
	Onnx__FunctionProto **fns = xcalloc((size_t)m + 1, sizeof(void *));
	for (int k = 0; k < m; k++) {
		Onnx__NodeProto *call = e->ccall[k];
		const char *in = NULL;
		int nrun = 0;
		for (size_t j = 0; j < call->n_input; j++) {
			Val *v = call->input[j] && *call->input[j] ? find_val(c0, call->input[j]) : NULL;
			if (v && !v->known) {
				nrun++;
				in = call->input[j];
			}
		}
		if (nrun != 1 || call->n_output != 1 || !call->output[0] || !*call->output[0])
			continue;
		int r = -1;
		for (int x = 0; x < q->nregions; x++)
			if (fns[x] == e->cfn[k])
				r = x;
		if (r < 0) {
			r = q->nregions++;
			fns[r] = e->cfn[k];
			Buf b = {0};
			for (const char *t = e->cfn[k]->name; *t && b.len < 40; t++)
				buf_putc(&b, ((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9')) ? *t : '_');
			char *nm = b.s && !(b.s[0] >= '0' && b.s[0] <= '9') && !is_builtin(b.s) && !is_keyword(b.s)
			                   ? xasprintf("%s", b.s)
			                   : xasprintf("fn_%s", b.s ? b.s : "");
			buf_free(&b);
			for (int x = 0; x < r; x++)
				if (!strcmp(q->rname[x], nm)) {
					char *t2 = xasprintf("%s_%d", nm, r + 1);
					free(nm);
					nm = t2;
				}
			q->rname[r] = nm;
			q->rnodes[r] = e->cend[k] - e->cstart[k];
		}
		int sidx = q->nseg++;
		q->start[sidx] = e->cstart[k];
		q->end[sidx] = e->cend[k];
		q->in_name[sidx] = xstrdup(in);
		q->out_name[sidx] = xstrdup(call->output[0]);
		q->region[sidx] = r;
	}
	free(fns);
	if (!q->nseg) {
		plan_free(q);
		return NULL;
	}
	plan_index(q);
	return q;
}

/* Segments between single-tensor cuts, from a translation without outlining
 * (c0: which values are known at import). NULL when there are fewer than 2. */
OPlan *find_segments(Ctx *c0, Onnx__GraphProto *g)
{
	int n = (int)g->n_node;
	/* every run-time value: its producer and its last use */
	Vec names = {0};
	int cap = 0, *prod = NULL, *last = NULL;
	for (int k = -1; k < n; k++) {
		size_t no = k < 0 ? g->n_input : g->node[k]->n_output;
		for (size_t j = 0; j < no; j++) {
			const char *nm = k < 0 ? g->input[j]->name : g->node[k]->output[j];
			Val *v = nm && *nm ? find_val(c0, nm) : NULL;
			if (!v || v->known)
				continue;
			if (names.n == cap) {
				cap = cap ? 2 * cap : 64;
				prod = xrealloc(prod, (size_t)cap * sizeof *prod);
				last = xrealloc(last, (size_t)cap * sizeof *last);
			}
			prod[names.n] = k;
			last[names.n] = k;
			vec_push(&names, (void *)nm);
		}
	}
	/* the last of names by name, hashed: a scan of names per node input was
	 * quadratic (a fifth of importing GPT-2 with 48 layers) */
	size_t hcap = 16;
	while (hcap < 2 * (size_t)names.n)
		hcap *= 2;
	int *slot = xmalloc(hcap * sizeof *slot);
	for (size_t h = 0; h < hcap; h++)
		slot[h] = -1;
	for (int q = 0; q < names.n; q++) {
		size_t h = (size_t)hash_str(names.v[q]) & (hcap - 1);
		while (slot[h] >= 0 && strcmp(names.v[slot[h]], names.v[q]))
			h = (h + 1) & (hcap - 1);
		slot[h] = q;
	}
	for (int k = 0; k <= n; k++) {
		size_t ni = k < n ? g->node[k]->n_input : g->n_output;
		for (size_t j = 0; j < ni; j++) {
			const char *nm = k < n ? g->node[k]->input[j] : g->output[j]->name;
			if (!nm)
				continue;
			size_t h = (size_t)hash_str(nm) & (hcap - 1);
			while (slot[h] >= 0 && strcmp(names.v[slot[h]], nm))
				h = (h + 1) & (hcap - 1);
			int q = slot[h];
			if (q >= 0 && last[q] < k)
				last[q] = k;
		}
	}
	free(slot);
	/* live at cut i (between nodes i-1 and i): prod < i <= last */
	int64_t *cnt = xcalloc((size_t)n + 2, sizeof *cnt), *sum = xcalloc((size_t)n + 2, sizeof *sum);
	for (int q = 0; q < names.n; q++) {
		int a = prod[q] + 1, b = last[q];
		if (a > b)
			continue;
		cnt[a]++;
		cnt[b + 1]--;
		sum[a] += q;
		sum[b + 1] -= q;
	}
	int *cut = xcalloc((size_t)n + 1, sizeof *cut), *who = xcalloc((size_t)n + 1, sizeof *who), ncut = 0;
	int64_t cc = 0, ss = 0;
	PatMark *pat = find_patterns(g);
	char *inside = xcalloc((size_t)n + 2, 1); /* cut positions within a fused pattern */
	for (int i = 0; i < n; i++) {
		int e = pat[i].kind ? pat[i].last : -1;
		for (int j = i + 1; j <= e; j++)
			inside[j] = 1;
	}
	for (int i = 0; i <= n; i++) {
		cc += cnt[i];
		ss += sum[i];
		/* at n, after the last node: the graph's one output (so a last
		 * layer whose output is the graph's is a segment too) */
		if (cc == 1 && (i == n || !inside[i])) {
			cut[ncut] = i;
			who[ncut++] = (int)ss;
		}
	}
	OPlan *p = NULL;
	if (ncut >= 3) {
		p = xcalloc(1, sizeof *p);
		p->n = n;
		p->start = xcalloc((size_t)ncut, sizeof(int));
		p->end = xcalloc((size_t)ncut, sizeof(int));
		p->in_name = xcalloc((size_t)ncut, sizeof(char *));
		p->out_name = xcalloc((size_t)ncut, sizeof(char *));
		p->quiet = xmalloc((size_t)n + 1);
		memset(p->quiet, 1, (size_t)n + 1);
		for (int q = 0; q < names.n; q++)
			if (prod[q] >= 0)
				p->quiet[prod[q]] = 0;
		for (int j = 0; j + 1 < ncut; j++) {
			if (who[j] == who[j + 1] || prod[who[j + 1]] < cut[j])
				continue; /* the segment does not compute what leaves it */
			int k = p->nseg++;
			p->start[k] = cut[j];
			p->end[k] = cut[j + 1];
			p->in_name[k] = xstrdup(names.v[who[j]]);
			p->out_name[k] = xstrdup(names.v[who[j + 1]]);
		}
		if (p->nseg < 2) {
			plan_free(p);
			p = NULL;
		}
	}
	free(pat);
	free(inside);
	free(cnt);
	free(sum);
	free(cut);
	free(who);
	free(prod);
	free(last);
	free(names.v);
	return p;
}

void plan_index(OPlan *p)
{
	free(p->seg_at);
	free(p->seg_end);
	p->seg_at = xmalloc(((size_t)p->n + 1) * sizeof(int));
	p->seg_end = xmalloc(((size_t)p->n + 1) * sizeof(int));
	for (int k = 0; k <= p->n; k++)
		p->seg_at[k] = p->seg_end[k] = -1;
	for (int s = 0; s < p->nseg; s++) {
		p->seg_at[p->start[s]] = s;
		p->seg_end[p->end[s] - 1] = s;
	}
	p->cur = -1;
}

/* Whether segment b follows segment a with nothing between them but nodes
 * of values known at import (torch's Constant nodes, and the Shape, Gather
 * and Mul of a chunk's bounds that shufflenet computes between its units):
 * they are translated where they stand, in a region or between its calls. */
static int adjacent(const OPlan *p, int a, int b)
{
	for (int k = p->end[a]; k < p->start[b]; k++)
		if (!p->quiet || !p->quiet[k])
			return 0;
	return p->end[a] <= p->start[b];
}

/* How many times segments [i, i + L) repeat back to back from i. */
static int group_runs(OPlan *p, int i, int L)
{
	int m = p->nseg, runs = 1;
	for (;;) {
		int j = i + runs * L, eq = j + L <= m;
		for (int t = 0; eq && t < L; t++)
			eq = *p->key[i + t] && !strcmp(p->key[i + t], p->key[j + t]) && adjacent(p, j + t - 1, j + t);
		if (!eq)
			return runs;
		runs++;
	}
}

/* Whether segment i is one elementwise activation node. */
static int lone_activation(Onnx__GraphProto *g, OPlan *p, int i)
{
	static const char *const acts[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish"};
	if (p->end[i] - p->start[i] != 1)
		return 0;
	const char *op = g->node[p->start[i]]->op_type;
	for (size_t k = 0; k < sizeof acts / sizeof *acts; k++)
		if (op && !strcmp(op, acts[k]))
			return 1;
	return 0;
}

/* From the probe's keys: the group length L whose consecutive repeats cover
 * the most nodes; each repeat of the group becomes one segment of a new plan,
 * assigned to the region of its key. NULL when nothing repeats. */
OPlan *choose_regions(OPlan *p, Onnx__GraphProto *g)
{
	int m = p->nseg, bestL = 0, bestcov = 0;
	for (int L = 1; L <= m / 2; L++) {
		int cov = 0;
		for (int i = 0; i + 2 * L <= m;) {
			int runs = 1;
			for (;;) {
				int j = i + runs * L, eq = j + L <= m;
				for (int q = 0; eq && q < L; q++)
					eq = *p->key[i + q] && !strcmp(p->key[i + q], p->key[j + q]) && adjacent(p, j + q - 1, j + q) &&
					     adjacent(p, i + q, i + q + 1);
				if (!eq)
					break;
				runs++;
			}
			if (runs >= 2) {
				cov += p->end[i + runs * L - 1] - p->start[i];
				i += runs * L;
			} else {
				i++;
			}
		}
		if (cov > bestcov) {
			bestcov = cov;
			bestL = L;
		}
	}
	if (!bestL)
		return NULL;
	int L = bestL;
	OPlan *q = xcalloc(1, sizeof *q);
	q->n = p->n;
	q->start = xcalloc((size_t)m, sizeof(int));
	q->end = xcalloc((size_t)m, sizeof(int));
	q->in_name = xcalloc((size_t)m, sizeof(char *));
	q->out_name = xcalloc((size_t)m, sizeof(char *));
	q->region = xcalloc((size_t)m, sizeof(int));
	q->rname = xcalloc((size_t)m, sizeof(char *));
	q->rtempl = xcalloc((size_t)m, sizeof(char *));
	q->rkey = xcalloc((size_t)m, sizeof(char *));
	q->rcalls = xcalloc((size_t)m, sizeof(int));
	q->rnodes = xcalloc((size_t)m, sizeof(int));
	char **bkey = xcalloc((size_t)m, sizeof(char *));
	for (int i = 0; i + 2 * L <= m;) {
		int runs = group_runs(p, i, L);
		if (runs < 2) {
			i++;
			continue;
		}
		/* a group that starts with a lone activation (the previous block's
		 * Add -> Relu, cut between them) starts one segment later when it
		 * repeats as often there: the activation then ends each region, where
		 * the block's last convolution or matmul applies it */
		if (L > 1 && lone_activation(g, p, i) && i + 1 + 2 * L <= m && group_runs(p, i + 1, L) >= runs) {
			i++;
			runs = group_runs(p, i, L);
		}
		/* the group's key: its segments' keys */
		Buf k = {0};
		for (int t = 0; t < L; t++)
			buf_printf(&k, "%s\n--\n", p->key[i + t]);
		int r = -1;
		for (int x = 0; x < q->nregions; x++)
			if (!strcmp(bkey[x], k.s))
				r = x;
		if (r < 0) {
			r = q->nregions++;
			bkey[r] = xstrdup(k.s);
			q->rname[r] = r ? xasprintf("layer_%d", r + 1) : xstrdup("layer");
			q->rnodes[r] = p->end[i + L - 1] - p->start[i];
		}
		buf_free(&k);
		for (int b = 0; b < runs; b++) {
			int s = q->nseg++, f = i + b * L;
			q->start[s] = p->start[f];
			q->end[s] = p->end[f + L - 1];
			q->in_name[s] = xstrdup(p->in_name[f]);
			q->out_name[s] = xstrdup(p->out_name[f + L - 1]);
			q->region[s] = r;
		}
		i += runs * L;
	}
	for (int x = 0; x < q->nregions; x++)
		free(bkey[x]);
	free(bkey);
	plan_index(q);
	return q;
}

/* regions.c - the region pass: fingerprint every region call, deduplicate
 * variants (also across differently named regions), apply reuse_hash,
 * max_reuse_entries and options, and record every decision in the region table
 * that code generation and the reports read. */
#include "nestc.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct GraphInfo {
	int visited;
	int order;          /* position in execution (DFS) order */
	int has_fp;
	uint8_t fp[16];
	int64_t count;      /* executions per run of all entries */
} GraphInfo;

typedef struct RP {
	Program *p;
	Diag *d;
	RegionOptions *o;
	RegionTable *rt;
	GraphInfo *gi;      /* per graph id */
	Vec order;          /* graphs in DFS order (callers first) */
} RP;

void fp_hex(const uint8_t fp[16], char out[33])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[fp[i] >> 4];
		out[2 * i + 1] = hex[fp[i] & 15];
	}
	out[32] = 0;
}

static void digest(Buf *b, uint8_t fp[16])
{
	XXH128_hash_t h = XXH3_128bits(b->s ? b->s : "", b->len);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	memcpy(fp, c.digest, 16);
}

static RegionInfo *region_of(RP *r, Decl *fn)
{
	RegionTable *rt = r->rt;
	for (int i = 0; i < rt->nregions; i++)
		if (rt->regions[i]->fn == fn)
			return rt->regions[i];
	RegionInfo *ri = arena_alloc(r->p->arena, sizeof *ri);
	ri->fn = fn;
	/* the attributes were checked and evaluated by check.c */
	ri->max_entries = fn->max_reuse_entries > 0 ? fn->max_reuse_entries : 8;
	ri->opt_level = fn->opt_level >= 0 ? fn->opt_level : r->o->opt_level;
	ri->fast_math = fn->fast_math > 0;
	ri->winograd = fn->winograd != 0;
	RegionInfo **nr = arena_alloc(r->p->arena, (size_t)(rt->nregions + 1) * sizeof(RegionInfo *));
	if (rt->nregions)
		memcpy(nr, rt->regions, (size_t)rt->nregions * sizeof(RegionInfo *));
	nr[rt->nregions++] = ri;
	rt->regions = nr;
	return ri;
}

/* Execution order: entries in order, each call site's callee visited at its
 * first call. */
static void dfs(RP *r, Graph *g)
{
	GraphInfo *gi = &r->gi[g->id];
	if (gi->visited)
		return;
	gi->visited = 1;
	gi->order = r->order.n;
	vec_push(&r->order, g);
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		if (n->op != OP_CALL)
			continue;
		CallSite *cs = arena_alloc(r->p->arena, sizeof *cs);
		cs->call = n;
		cs->caller = g;
		avec_push(r->p->arena, &r->rt->calls, cs);
		dfs(r, n->callee);
	}
}

/* Canonical text of everything that makes code differ: the body with its
 * shapes and constants, the arguments' dtypes, shapes and strides (row-major
 * today), the globals read, the variants called, options, device and target.
 * Names of the region and of its arguments are left out on purpose. */
static void serialise(RP *r, Graph *g, RegionInfo *ri, Buf *b)
{
	/* winograd only when off: the fingerprints of everything else stay */
	buf_printf(b, "nest-fp-1 device=cpu target=%s opt=%d fast=%d%s\n", r->o->target ? r->o->target : "",
	           ri->opt_level, ri->fast_math, ri->winograd ? "" : " wino=0");
	for (int i = 0; i < g->ninputs; i++) {
		Node *in = g->inputs[i];
		buf_printf(b, "in %d %d [", in->dtype, in->rank);
		int64_t stride = 1;
		int64_t strides[MAX_RANK];
		for (int k = in->rank - 1; k >= 0; k--) {
			strides[k] = stride;
			stride *= in->shape[k];
		}
		for (int k = 0; k < in->rank; k++)
			buf_printf(b, "%lld:%lld ", (long long)in->shape[k], (long long)strides[k]);
		buf_puts(b, "]\n");
	}
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		node_text(b, n);
		if (op_info[n->op].flags & OPF_VALUE) {
			uint64_t bits;
			memcpy(&bits, &n->fval, sizeof bits);
			buf_printf(b, " f=%llx i=%lld", (unsigned long long)bits, (long long)n->ival);
		}
		if (n->op == OP_PARAM) {
			ParamInfo *pi = &r->p->params[n->a[0]];
			buf_printf(b, " global=%s", pi->name);
		}
		if (n->op == OP_CALL) {
			GraphInfo *ci = &r->gi[n->callee->id];
			char hex[33];
			fp_hex(ci->fp, hex);
			buf_printf(b, " calls=%s", hex);
		}
		buf_putc(b, '\n');
	}
	buf_puts(b, "out");
	for (int i = 0; i < g->noutputs; i++)
		buf_printf(b, " %d", g->outputs[i]->id);
	buf_putc(b, '\n');
	/* run-time dims: the integers taken at run time, and how */
	if (g->nbasis)
		buf_printf(b, "dims %d\n", g->nbasis);
	for (int k = 0; k < g->ngdyn; k++) {
		GDyn *d = &g->gdyn[k];
		buf_printf(b, "dyn %d.%d %lld", d->node, d->field, (long long)d->f.c0);
		for (int j = 0; j < g->nbasis; j++)
			buf_printf(b, " %lld", (long long)d->f.coef[j]);
		buf_putc(b, '\n');
	}
}

CallSite *callsite_of(RegionTable *rt, Node *call)
{
	/* call sites are few (one per OP_CALL node): a scan is fine */
	for (int i = 0; i < rt->calls.n; i++) {
		CallSite *cs = rt->calls.v[i];
		if (cs->call == call)
			return cs;
	}
	return NULL;
}

static const char *where(RP *r, Loc loc)
{
	int line, col;
	source_linecol(r->p->src, loc.off, &line, &col);
	return arena_printf(r->p->arena, "%s:%d:%d", r->p->src->path, line, col);
}

/* The guard that differs between two specialisations of a region, in words. */
static const char *guard_diff(RP *r, Graph *g, Variant *v)
{
	Graph *h = v->g;
	Arena *a = r->p->arena;
	for (int i = 0; i < g->ninputs; i++) {
		const char *name = g->input_names[i];
		Node *x = g->inputs[i];
		Node *y = NULL;
		for (int k = 0; k < h->ninputs; k++)
			if (!strcmp(h->input_names[k], name))
				y = h->inputs[k];
		if (!y)
			return arena_printf(a, "arg %s: not in variant %d", name, v->k);
		if (x->dtype != y->dtype)
			return arena_printf(a, "arg %s: dtype is %s, variant %d has %s", name, dtype_name(x->dtype), v->k,
			                    dtype_name(y->dtype));
		if (x->rank != y->rank)
			return arena_printf(a, "arg %s: rank is %d, variant %d has %d", name, x->rank, v->k, y->rank);
		for (int d = 0; d < x->rank; d++)
			if (x->shape[d] != y->shape[d]) {
				/* a variant of run-time dims holds a sample size: its key has the symbol */
				const char *seg = NULL;
				size_t nl = strlen(name);
				for (const char *k = h->nbasis && h->key ? h->key : ""; *k && !seg; k = strstr(k, "; ") ? strstr(k, "; ") + 2 : "")
					if (!strncmp(k, name, nl) && !strncmp(k + nl, ": ", 2))
						seg = k + nl + 2;
				if (seg) {
					size_t sl = strstr(seg, "; ") ? (size_t)(strstr(seg, "; ") - seg) : strlen(seg);
					Buf t = {0};
					shape_str(&t, x->dtype, x->rank, x->shape);
					const char *r = arena_printf(a, "arg %s: %s, variant %d has %.*s", name, t.s, v->k, (int)sl, seg);
					buf_free(&t);
					return r;
				}
				return arena_printf(a, "arg %s: dim %d is %lld, variant %d has %lld", name, d,
				                    (long long)x->shape[d], v->k, (long long)y->shape[d]);
			}
	}
	/* same tensors: a compile-time scalar, a global, or the body itself */
	const char *ks = g->key, *kv = h->key;
	while (*ks && *kv) {
		const char *es = strstr(ks, "; "), *ev = strstr(kv, "; ");
		size_t ls = es ? (size_t)(es - ks) : strlen(ks), lv = ev ? (size_t)(ev - kv) : strlen(kv);
		if (ls != lv || strncmp(ks, kv, ls)) {
			const char *colon = memchr(ks, ':', ls);
			if (!colon) /* "run-time P", "when T == 1" (dims.c) */
				return arena_printf(a, "%.*s, variant %d: %.*s", (int)ls, ks, v->k, (int)lv, kv);
			size_t nl = colon ? (size_t)(colon - ks) : ls;
			const char *cv = memchr(kv, ':', lv);
			return arena_printf(a, "arg %.*s: %.*s, variant %d has %.*s", (int)nl, ks,
			                    (int)(ls - nl - (colon ? 2 : 0)), colon ? colon + 2 : ks, v->k,
			                    (int)(cv ? lv - (size_t)(cv - kv) - 2 : lv), cv ? cv + 2 : kv);
		}
		ks += ls + (es ? 2 : 0);
		kv += lv + (ev ? 2 : 0);
	}
	/* a variant narrowed to the part of its result the caller uses (rows.c) */
	if (*ks && !*kv)
		return arena_printf(a, "%s, variant %d computes all of it", ks, v->k);
	if (*kv && !*ks)
		return arena_printf(a, "all of the result used, variant %d: %s", v->k, kv);
	return arena_printf(a, "the body differs from variant %d (other globals, constants or callees)", v->k);
}

/* How far apart two specialisations are: differing dims count, and by how
 * much (in factors of two), so 256 channels is nearer 128 than 64. */
static double count_diffs(Graph *g, Graph *h)
{
	double n = 0;
	for (int i = 0; i < g->ninputs; i++) {
		Node *y = NULL;
		for (int k = 0; k < h->ninputs; k++)
			if (!strcmp(h->input_names[k], g->input_names[i]))
				y = h->inputs[k];
		if (!y || y->dtype != g->inputs[i]->dtype || y->rank != g->inputs[i]->rank) {
			n += 100;
			continue;
		}
		for (int d = 0; d < y->rank; d++) {
			int64_t p = y->shape[d], q = g->inputs[i]->shape[d];
			if (p == q)
				continue;
			n += 1;
			for (int64_t lo = p < q ? p : q, hi = p < q ? q : p; lo > 0 && lo < hi; lo *= 2)
				n += 0.01;
		}
	}
	return n;
}

/* reuse_hash: can g run the code of representative h, with integers taken at run
 * time? NULL if so, else the reason. Differing integers are added to dyn. */
static const char *compatible(RP *r, Graph *g, Graph *h, Vec *dyn, int *bcast)
{
	Arena *a = r->p->arena;
	if (g->nnodes != h->nnodes || g->ninputs != h->ninputs || g->noutputs != h->noutputs)
		return "their bodies differ in structure";
	for (int i = 0; i < g->nnodes; i++) {
		Node *x = g->nodes[i], *y = h->nodes[i];
		if (x->op != y->op || x->nin != y->nin)
			return "their bodies differ in structure";
		if (x->op == OP_INPUT && (x->dtype != y->dtype || x->rank != y->rank)) {
			Buf bx = {0}, by = {0};
			shape_str(&bx, x->dtype, x->rank, x->shape);
			shape_str(&by, y->dtype, y->rank, y->shape);
			const char *m = arena_printf(a, "arg %s is %s here and %s there (%s cannot be taken at run time)",
			                             g->input_names[x->a[0]], bx.s, by.s, x->dtype != y->dtype ? "a dtype" : "a rank");
			buf_free(&bx);
			buf_free(&by);
			return m;
		}
		if (x->dtype != y->dtype)
			return "their bodies compute in different dtypes";
		if (x->rank != y->rank)
			return "their bodies differ in rank";
		for (int k = 0; k < x->nin; k++)
			if (x->in[k]->id != y->in[k]->id)
				return "their bodies differ in structure";
		if (x->fval != y->fval || x->ival != y->ival)
			if (!(x->fval != x->fval && y->fval != y->fval))
				return "their bodies use different constants";
		if (x->op == OP_PARAM && x->a[0] != y->a[0])
			return "they read different globals";
		/* an inner region of the same reuse_hash group takes its dims at run time too */
		int same_group = x->op == OP_CALL && x->callee->has_reuse_hash && y->callee->has_reuse_hash &&
		                 x->callee->fn == y->callee->fn && x->callee->reuse_hash == y->callee->reuse_hash;
		if (x->op == OP_CALL && x->callee != y->callee && !same_group &&
		    memcmp(r->gi[x->callee->id].fp, r->gi[y->callee->id].fp, 16))
			return x->callee->has_reuse_hash
			               ? "an inner region would need its own run-time dims inside the shared code, which nestc does not support yet"
			               : "they call different variants of an inner region";
		/* fields: 0..MAX_RANK-1 the shape, 16..31 the attributes a[0..15] */
		for (int f = 0; f < 32; f++) {
			if ((f >= x->rank && f < MAX_RANK) || (f >= MAX_RANK && f < 16))
				continue;
			int64_t xv = f < MAX_RANK ? x->shape[f] : x->a[f - 16];
			int64_t yv = f < MAX_RANK ? y->shape[f] : y->a[f - 16];
			if (xv == yv)
				continue;
			if (x->op == OP_PARAM || x->op == OP_INPUT) {
				if (f >= 16)
					return "their bodies differ in structure";
			}
			/* whether an axis broadcasts is decided when the code is generated */
			*bcast = f < MAX_RANK && (xv == 1) != (yv == 1);
			if (*bcast)
				return x->op == OP_INPUT
				               ? arena_printf(a, "arg %s dim %d is %lld here and %lld there (broadcasting a size-1 "
				                                 "axis cannot be decided at run time)",
				                              g->input_names[x->a[0]], f, (long long)xv, (long long)yv)
				               : arena_printf(a, "a size-1 axis in one call is %lld long in the other "
				                                 "(broadcasting cannot be decided at run time)",
				                              (long long)(xv == 1 ? yv : xv));
			int seen = 0;
			for (int k = 0; k < dyn->n; k++) {
				DynSlot *ds = dyn->v[k];
				if (ds->node == i && ds->field == f)
					seen = 1;
			}
			if (!seen) {
				DynSlot *ds = arena_alloc(a, sizeof *ds);
				ds->node = i;
				ds->field = f;
				vec_push(dyn, ds);
			}
		}
	}
	return NULL;
}

static int64_t slot_value(Graph *g, DynSlot *ds)
{
	Node *n = g->nodes[ds->node];
	return ds->field < MAX_RANK ? n->shape[ds->field] : n->a[ds->field - 16];
}

/* The run-time dims a specialisation takes from its exported function, and
 * how (dims.c), appended to a reuse_hash key: a group's shared code takes
 * differing sizes at run time as its own dims (DynSlot), or an entry's dims
 * as they are, never both, so calls of one key that differ here get
 * variants of their own. */
static void runtime_dims_text(Graph *g, Buf *b)
{
	if (!g->nbasis)
		return;
	buf_printf(b, " dims %d", g->nbasis);
	for (int k = 0; k < g->ngdyn; k++) {
		GDyn *d = &g->gdyn[k];
		buf_printf(b, " %d.%d:%lld", d->node, d->field, (long long)d->f.c0);
		for (int j = 0; j < g->nbasis; j++)
			buf_printf(b, ",%lld", (long long)d->f.coef[j]);
	}
}

static Variant *new_variant(RP *r, RegionInfo *ri, Graph *g, const uint8_t fp[16])
{
	Variant *v = arena_alloc(r->p->arena, sizeof *v);
	v->id = r->rt->variants.n;
	v->region = ri->fn->name;
	v->k = ri->variants.n;
	memcpy(v->fp, fp, 16);
	v->g = g;
	v->guards = g->key;
	v->opt_level = ri->opt_level;
	v->fast_math = ri->fast_math;
	v->winograd = ri->winograd;
	avec_push(r->p->arena, &r->rt->variants, v);
	avec_push(r->p->arena, &ri->variants, v);
	return v;
}

RegionTable *build_regions(Program *p, Diag *d, RegionOptions *o)
{
	RP r = {.p = p, .d = d, .o = o};
	RegionTable *rt = arena_alloc(p->arena, sizeof *rt);
	rt->p = p;
	rt->no_regions = o->no_regions;
	rt->target = o->target;
	r.rt = rt;
	r.gi = xcalloc((size_t)p->graphs.n + 1, sizeof(GraphInfo));
	for (int i = 0; i < p->nentries; i++)
		dfs(&r, p->entries[i].g);

	/* executions per run: entries once; callers before callees in DFS order
	 * does not hold for DAGs, so propagate until nothing changes (graphs are few) */
	for (int i = 0; i < p->nentries; i++)
		r.gi[p->entries[i].g->id].count = 1;
	for (int round = 0; round < r.order.n + 1; round++) {
		int64_t *next = xcalloc((size_t)p->graphs.n + 1, sizeof(int64_t));
		for (int i = 0; i < p->nentries; i++)
			next[p->entries[i].g->id] = 1;
		for (int k = 0; k < rt->calls.n; k++) {
			CallSite *cs = rt->calls.v[k];
			next[cs->call->callee->id] += r.gi[cs->caller->id].count;
		}
		int changed = 0;
		for (int i = 0; i < r.order.n; i++) {
			Graph *g = r.order.v[i];
			if (next[g->id] != r.gi[g->id].count)
				changed = 1;
			r.gi[g->id].count = next[g->id];
		}
		free(next);
		if (!changed)
			break;
	}
	for (int k = 0; k < rt->calls.n; k++) {
		CallSite *cs = rt->calls.v[k];
		cs->count = r.gi[cs->caller->id].count;
		rt->total_calls += cs->count;
	}

	/* fingerprints, innermost first: a region's fingerprint covers the variants it calls */
	for (int i = r.order.n - 1; i >= 0; i--) {
		Graph *g = r.order.v[i];
		if (!g->is_region)
			continue;
		RegionInfo *ri = region_of(&r, g->fn);
		Buf b = {0};
		serialise(&r, g, ri, &b);
		digest(&b, r.gi[g->id].fp);
		buf_free(&b);
		memcpy(g->fp, r.gi[g->id].fp, 16);
		g->has_fp = 1;
	}

	for (int k = 0; k < rt->calls.n; k++) {
		CallSite *cs = rt->calls.v[k];
		avec_push(p->arena, &region_of(&r, cs->call->callee->fn)->calls, cs);
	}
	/* variants, in execution order of the calls; the narrowed ones (rows.c)
	 * after, from the slots of max_reuse_entries the calls as written left */
	for (int k = 0; k < 2 * rt->calls.n; k++) {
		CallSite *cs = rt->calls.v[k % rt->calls.n];
		Graph *g = cs->call->callee;
		if (g->narrowed != (k >= rt->calls.n))
			continue;
		RegionInfo *ri = region_of(&r, g->fn);
		if (o->no_regions) {
			cs->inlined = 1;
			rt->inlined_calls += cs->count;
			continue;
		}
		uint8_t *fp = r.gi[g->id].fp;
		Variant *found = NULL;
		if (g->has_reuse_hash) {
			/* the user's key replaces the automatic fingerprint */
			Buf b = {0};
			buf_printf(&b, "nest-hash-1 %s %lld opt=%d fast=%d target=%s%s", ri->fn->name, (long long)g->reuse_hash,
			           ri->opt_level, ri->fast_math, o->target ? o->target : "", ri->winograd ? "" : " wino=0");
			runtime_dims_text(g, &b);
			uint8_t hfp[16];
			digest(&b, hfp);
			buf_free(&b);
			/* the first variant of the key whose code can take this call; one
			 * whose run-time dims differ, or a size-1 axis where the other has
			 * more (broadcasting is decided when code is generated), makes a
			 * variant of its own, anything else is an error */
			const char *split = NULL;
			int near = 0, bad = 0, rt_split = 0;
			for (int i = 0; i < ri->variants.n && !found && !bad; i++) {
				Variant *v = ri->variants.v[i];
				if (!v->has_hash || v->hash != g->reuse_hash)
					continue;
				if (memcmp(v->fp, hfp, 16)) {
					rt_split |= !split;
					if (!split)
						split = arena_printf(p->arena, "%s, variant %d: %s", g->nbasis ? "run-time dims of the "
						                     "exported function" : "fixed dims", v->k,
						                     v->g->nbasis ? "run-time dims" : "fixed dims");
					continue;
				}
				Vec dyn = {0};
				for (int k = 0; k < v->ndyn; k++)
					vec_push(&dyn, &v->dyn[k]);
				int bcast = 0;
				const char *why = v->g == g ? NULL : compatible(&r, g, v->g, &dyn, &bcast);
				if (!why && g->nbasis && dyn.n)
					why = "their sizes differ beyond the run-time dims of their exported functions (shared code "
					      "takes those, or sizes of its own at run time, not both)";
				if (why && bcast) {
					if (!split) {
						split = why;
						near = v->k;
					}
				} else if (why) {
					CallSite *first = v->calls.v[0];
					error_at(d, cs->call->loc,
					         "reuse_hash = %lld puts this call of '%s' in one variant with the call at %s, but %s",
					         (long long)g->reuse_hash, ri->fn->name, where(&r, first->call->loc), why);
					bad = 1;
				} else {
					if (dyn.n != v->ndyn) {
						DynSlot *ds = arena_alloc(p->arena, (size_t)dyn.n * sizeof(DynSlot));
						for (int k = 0; k < dyn.n; k++)
							ds[k] = *(DynSlot *)dyn.v[k];
						v->dyn = ds;
						v->ndyn = dyn.n;
					}
					found = v;
				}
				free(dyn.v);
			}
			if (bad)
				continue;
			if (!found && ri->variants.n < ri->max_entries) {
				found = new_variant(&r, ri, g, hfp);
				found->has_hash = 1;
				found->hash = g->reuse_hash;
				cs->is_new = 1;
				if (split && rt_split)
					cs->differs = arena_printf(p->arena, "%s (reuse_hash = %lld shares code only between calls "
					                           "whose dims are taken alike)", split, (long long)g->reuse_hash);
				else if (split)
					cs->differs = arena_printf(p->arena, "%s; variant %d's code cannot take it (reuse_hash = %lld)", split,
					                           near, (long long)g->reuse_hash);
			}
		} else {
			for (int i = 0; i < rt->variants.n && !found; i++) {
				Variant *v = rt->variants.v[i];
				if (!v->has_hash && !memcmp(v->fp, fp, 16))
					found = v;
			}
			if (!found && ri->variants.n < ri->max_entries) {
				Variant *nearest = NULL;
				double best = 1e300;
				for (int i = 0; i < ri->variants.n; i++) {
					Variant *v = ri->variants.v[i];
					double c = count_diffs(g, v->g);
					if (c < best) {
						best = c;
						nearest = v;
					}
				}
				if (nearest)
					cs->differs = guard_diff(&r, g, nearest);
				found = new_variant(&r, ri, g, fp);
				cs->is_new = 1;
			} else if (found) {
				/* a variant made for another region function with the same body */
				int mine = 0;
				for (int i = 0; i < ri->variants.n; i++)
					if (ri->variants.v[i] == found)
						mine = 1;
				if (!mine)
					avec_push(p->arena, &ri->variants, found);
			}
		}
		if (!found) {
			cs->inlined = 1;
			rt->inlined_calls += cs->count;
			/* a narrowed specialisation is the compiler's choice, not a guard the user's calls differ in */
			if (!g->narrowed)
				warning_at(d, cs->call->loc,
				           "region '%s' already has %d compiled variant%s (max_reuse_entries = %d); this call is compiled inline",
				           ri->fn->name, ri->max_entries, ri->max_entries == 1 ? "" : "s", ri->max_entries);
			continue;
		}
		cs->v = found;
		avec_push(p->arena, &found->calls, cs);
	}
	/* run-time dims: each call's own values */
	for (int k = 0; k < rt->calls.n; k++) {
		CallSite *cs = rt->calls.v[k];
		if (!cs->v || !cs->v->ndyn)
			continue;
		cs->dyn_values = arena_alloc(p->arena, (size_t)cs->v->ndyn * sizeof(int64_t));
		for (int i = 0; i < cs->v->ndyn; i++)
			cs->dyn_values[i] = slot_value(cs->call->callee, &cs->v->dyn[i]);
	}
	/* a group's shared code calling an inner group: each inner run-time dim
	 * comes from one of the outer's (the same values at every call) or is constant */
	for (int i = 0; i < rt->variants.n; i++) {
		Variant *v = rt->variants.v[i];
		if (!v->ndyn)
			continue;
		for (int c = 0; c < v->g->nnodes; c++) {
			Node *cn = v->g->nodes[c];
			CallSite *rep = cn->op == OP_CALL ? callsite_of(rt, cn) : NULL;
			if (!rep || !rep->v || !rep->v->ndyn)
				continue;
			Variant *w = rep->v;
			rep->dyn_map = arena_alloc(p->arena, (size_t)w->ndyn * sizeof(int));
			for (int k = 0; k < w->ndyn; k++) {
				int constant = 1, found = -1;
				for (int m = 0; m < v->calls.n; m++) {
					CallSite *mine = callsite_of(rt, ((CallSite *)v->calls.v[m])->call->callee->nodes[c]);
					if (!mine || !mine->dyn_values || mine->v != w || mine->dyn_values[k] != rep->dyn_values[k])
						constant = 0;
				}
				for (int j = 0; j < v->ndyn && !constant && found < 0; j++) {
					int same = 1;
					for (int m = 0; m < v->calls.n && same; m++) {
						CallSite *outer = v->calls.v[m];
						CallSite *mine = callsite_of(rt, outer->call->callee->nodes[c]);
						same = mine && mine->dyn_values && outer->dyn_values &&
						       mine->dyn_values[k] == outer->dyn_values[j];
					}
					if (same)
						found = j;
				}
				if (!constant && found < 0)
					error_at(d, cn->loc, "this call of '%s' needs a run-time dim that the shared code of '%s' cannot "
					         "compute from its own (give the two regions reuse_hash keys that group alike)",
					         cn->callee->fn->name, v->region);
				rep->dyn_map[k] = constant ? -1 : found;
			}
		}
	}
	/* regions in the order they are defined in the file */
	for (int i = 1; i < rt->nregions; i++)
		for (int k = i; k > 0 && rt->regions[k - 1]->fn->loc.off > rt->regions[k]->fn->loc.off; k--) {
			RegionInfo *t = rt->regions[k];
			rt->regions[k] = rt->regions[k - 1];
			rt->regions[k - 1] = t;
		}
	free(r.gi);
	free(r.order.v);
	return rt;
}

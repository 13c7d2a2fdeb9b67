/* report.c - the region table for people (text), tools (JSON through Jansson,
 * schema version 1, documented in nestc(1)) and pictures (Graphviz DOT). */
#include "plan.h"
#include "wformat.h"

#include <jansson.h>
#include <string.h>

static void loc_str(RegionTable *rt, Loc loc, char *out, size_t n)
{
	int line, col;
	source_linecol(rt->p->src, loc.off, &line, &col);
	snprintf(out, n, "%s:%d:%d", rt->p->src->path, line, col);
}

static void variant_name(Variant *v, char *out, size_t n)
{
	snprintf(out, n, "%s.%d", v->region, v->k);
}

static double total_compile_ms(RegionTable *rt)
{
	double ms = 0;
	for (int i = 0; i < rt->variants.n; i++)
		ms += ((Variant *)rt->variants.v[i])->obj.compile_ms;
	return ms;
}

/* ", N bytes of code, compiled in X ms; K kernels, S shared": an object's
 * figures once built (nothing before); S, the kernels identical to another
 * and emitted once, only when there are some. */
static void obj_figures(FILE *f, const ObjStats *st)
{
	if (st->cached)
		fprintf(f, ", %lld bytes of code, taken from the cache", (long long)st->code_bytes);
	else if (st->code_bytes)
		fprintf(f, ", %lld bytes of code, compiled in %.1f ms", (long long)st->code_bytes, st->compile_ms);
	else
		return;
	if (st->kernels)
		fprintf(f, "; %d kernel%s", st->kernels, st->kernels == 1 ? "" : "s");
	if (st->shared)
		fprintf(f, ", %d shared", st->shared);
}

static void obj_json(json_t *o, const ObjStats *st)
{
	json_object_set_new(o, "code_bytes", json_integer(st->code_bytes));
	json_object_set_new(o, "compile_ms", json_real(st->compile_ms));
	json_object_set_new(o, "cached", json_boolean(st->cached));
	json_object_set_new(o, "kernels", json_integer(st->kernels));
	json_object_set_new(o, "kernels_shared", json_integer(st->shared));
}

/* Compile time the reused calls would have cost had each been compiled anew. */
static double saved_ms(RegionTable *rt)
{
	double ms = 0;
	for (int i = 0; i < rt->calls.n; i++) {
		CallSite *cs = rt->calls.v[i];
		if (cs->v)
			ms += cs->v->obj.compile_ms * (double)(cs->count - (cs->is_new ? 1 : 0));
	}
	return ms;
}

static int64_t variant_calls(Variant *v)
{
	int64_t n = 0;
	for (int i = 0; i < v->calls.n; i++)
		n += ((CallSite *)v->calls.v[i])->count;
	return n;
}

static double reuse_ratio(RegionTable *rt)
{
	int64_t compiled = rt->total_calls - rt->inlined_calls;
	return rt->variants.n ? (double)compiled / (double)rt->variants.n : 0.0;
}

/* A variant's workspace from its buffer plan: the intermediates as placed
 * (reused by liveness), their sum if none shared storage, and the kernels'
 * scratch (packed panels, a convolution's patches). */
typedef struct WsFigures { int64_t total, tensors, unshared, scratch; } WsFigures;

static WsFigures ws_figures(RegionTable *rt, Variant *v)
{
	Plan *pl = plan_variant(rt->p, v->g, v, 1);
	return (WsFigures){pl->ws_size, pl->scratch, pl->sum_live, pl->ws_size - pl->scratch};
}

/* The variant whose code holds graph g (a region's specialised body), or NULL
 * for an entry or code compiled inline. */
static Variant *caller_variant(RegionTable *rt, Graph *g)
{
	for (int k = 0; k < rt->calls.n; k++) {
		CallSite *o = rt->calls.v[k];
		if (o->call->callee == g && o->v)
			return o->v;
	}
	return NULL;
}

/* After "in CALLER": which of the caller's variants the line's calls are in,
 * when the caller is a region of several variants (else the same call site
 * shows twice with nothing to tell the lines apart). */
static void caller_variants_str(RegionTable *rt, RegionInfo *ri, int i, char *out, size_t size)
{
	CallSite *cs = ri->calls.v[i];
	out[0] = 0;
	RegionInfo *cr = NULL;
	for (int r = 0; r < rt->nregions; r++)
		if (rt->regions[r]->fn == cs->caller->fn)
			cr = rt->regions[r];
	if (!cr || cr->variants.n < 2)
		return;
	Variant *seen[64];
	int nseen = 0;
	for (int k = i; k < ri->calls.n; k++) {
		CallSite *o = ri->calls.v[k];
		if (o->call->loc.off != cs->call->loc.off || o->v != cs->v || o->inlined != cs->inlined ||
		    o->caller->fn != cs->caller->fn)
			continue;
		Variant *cv = caller_variant(rt, o->caller);
		int dup = !cv;
		for (int j = 0; j < nseen && !dup; j++)
			dup = seen[j] == cv;
		if (!dup && nseen < 64)
			seen[nseen++] = cv;
	}
	if (!nseen)
		return;
	size_t len = (size_t)snprintf(out, size, " (variant%s ", nseen > 1 ? "s" : "");
	for (int j = 0; j < nseen && len < size; j++) {
		char nm[256];
		variant_name(seen[j], nm, sizeof nm);
		len += (size_t)snprintf(out + len, size - len, "%s%s", j ? ", " : "", nm);
	}
	if (len < size)
		snprintf(out + len, size - len, ")");
}

/* A param's bytes as held: in its format, else its dtype's. */
static int64_t param_bytes(const ParamInfo *pi)
{
	int64_t n = shape_numel(pi->rank, pi->shape);
	return pi->wformat != WF_F32 ? wformat_bytes(pi->wformat, n) : n * dtype_size(pi->dtype);
}

/* --weights-format: each param's format and bytes, and the totals. */
static void text_weights(FILE *f, Program *p)
{
	int64_t held = 0, f32 = 0;
	for (int i = 0; i < p->nparams; i++) {
		held += param_bytes(&p->params[i]);
		f32 += shape_numel(p->params[i].rank, p->params[i].shape) * dtype_size(p->params[i].dtype);
	}
	fprintf(f, "\nweights: %d params, %lld bytes (%lld as declared)\n", p->nparams, (long long)held, (long long)f32);
	for (int wf = 0; wf < WF_COUNT; wf++) {
		int n = 0;
		int64_t b = 0;
		for (int i = 0; i < p->nparams; i++)
			if (p->params[i].wformat == wf) {
				n++;
				b += param_bytes(&p->params[i]);
			}
		if (n)
			fprintf(f, "  %-5s %d param%s, %lld bytes%s\n", wformat_name(wf), n, n == 1 ? "" : "s", (long long)b,
			        wf == WF_F32 ? " (as declared: any dtype)" : "");
	}
	for (int i = 0; i < p->nparams; i++) {
		ParamInfo *pi = &p->params[i];
		if (pi->wformat == WF_F32)
			continue;
		Buf sh = {0};
		shape_str(&sh, pi->dtype, pi->rank, pi->shape);
		fprintf(f, "  %s: %s, %s, blocks along axis %d, %lld bytes\n", pi->name, sh.s, wformat_name(pi->wformat), pi->waxis,
		        (long long)param_bytes(pi));
		free(sh.s);
	}
}

static void text_report(FILE *f, RegionTable *rt, const char *model)
{
	char buf[512], nm[256];
	fprintf(f, "region reuse report: %s (%s)%s\n", model, rt->p->src->path, rt->no_regions ? ", --no-regions" : "");
	for (int r = 0; r < rt->nregions; r++) {
		RegionInfo *ri = rt->regions[r];
		int64_t calls = 0;
		for (int i = 0; i < ri->calls.n; i++)
			calls += ((CallSite *)ri->calls.v[i])->count;
		loc_str(rt, ri->fn->name_loc, buf, sizeof buf);
		fprintf(f, "\nregion %s  (defined at %s; max_reuse_entries %d; opt_level %d%s%s)\n", ri->fn->name, buf,
		        ri->max_entries, ri->opt_level, ri->fast_math ? ", fast_math" : "", ri->winograd ? "" : ", no winograd");
		fprintf(f, "  %lld call%s -> %d variant%s\n", (long long)calls, calls == 1 ? "" : "s", ri->variants.n,
		        ri->variants.n == 1 ? "" : "s");
		for (int i = 0; i < ri->variants.n; i++) {
			Variant *v = ri->variants.v[i];
			char hex[33];
			fp_hex(v->fp, hex);
			variant_name(v, nm, sizeof nm);
			fprintf(f, "  variant %s  fingerprint %.16s  %lld call%s", nm, hex, (long long)variant_calls(v),
			        variant_calls(v) == 1 ? "" : "s");
			if (strcmp(v->region, ri->fn->name))
				fprintf(f, "  (shared: same code as %s)", nm);
			fputc('\n', f);
			fprintf(f, "    object %s.%s.o", model, nm);
			obj_figures(f, &v->obj);
			fputc('\n', f);
			WsFigures ws = ws_figures(rt, v);
			fprintf(f, "    workspace %lld bytes: intermediates %lld (%lld if none shared storage), scratch %lld\n",
			        (long long)ws.total, (long long)ws.tensors, (long long)ws.unshared, (long long)ws.scratch);
			if (v->has_hash)
				fprintf(f, "    reuse_hash = %lld; %d run-time dim%s\n", (long long)v->hash, v->ndyn,
				        v->ndyn == 1 ? "" : "s");
			fprintf(f, "    guards: %s\n", v->guards ? v->guards : "");
		}
		/* call sites, one line per source position and outcome */
		for (int i = 0; i < ri->calls.n; i++) {
			CallSite *cs = ri->calls.v[i];
			int dup = 0;
			for (int k = 0; k < i && !dup; k++) {
				CallSite *o = ri->calls.v[k];
				if (o->call->loc.off == cs->call->loc.off && o->v == cs->v && o->inlined == cs->inlined &&
				    o->caller->fn == cs->caller->fn)
					dup = 1;
			}
			if (dup)
				continue;
			int64_t n = 0, news = 0;
			for (int k = i; k < ri->calls.n; k++) {
				CallSite *o = ri->calls.v[k];
				if (o->call->loc.off == cs->call->loc.off && o->v == cs->v && o->inlined == cs->inlined &&
				    o->caller->fn == cs->caller->fn) {
					n += o->count;
					news += o->is_new;
				}
			}
			loc_str(rt, cs->call->loc, buf, sizeof buf);
			char cvs[1024];
			caller_variants_str(rt, ri, i, cvs, sizeof cvs);
			if (cs->inlined) {
				fprintf(f, "  call %s in %s%s: %lld inlined (%s)\n", buf, cs->caller->name, cvs, (long long)n,
				        rt->no_regions                ? "--no-regions"
				        : cs->call->callee->narrowed ? "narrowed, over max_reuse_entries"
				                                     : "over max_reuse_entries");
				continue;
			}
			variant_name(cs->v, nm, sizeof nm);
			fprintf(f, "  call %s in %s%s: %lld -> %s", buf, cs->caller->name, cvs, (long long)n, nm);
			if (news)
				fprintf(f, " (%lld new, %lld reused)", (long long)news, (long long)(n - news));
			else
				fprintf(f, " (reused)");
			fputc('\n', f);
			for (int k = i; k < ri->calls.n; k++) {
				CallSite *o = ri->calls.v[k];
				if (o->differs && o->call->loc.off == cs->call->loc.off && o->v == cs->v)
					fprintf(f, "    new variant %s because %s\n", nm, o->differs);
			}
		}
	}
	if (rt->model.code_bytes) {
		fprintf(f, "\nmodel object %s.o", model);
		if (rt->model.parts > 1) {
			fprintf(f, " in %d parts (%s.o", rt->model.parts, model);
			for (int k = 1; k < rt->model.parts; k++)
				fprintf(f, ", %s.model-%d.o", model, k);
			fputc(')', f);
		}
		obj_figures(f, &rt->model);
		fputc('\n', f);
	}
	fprintf(f, "\ntotals: %lld region call%s, %d unique variant%s, %lld inlined, reuse ratio %.2f\n",
	        (long long)rt->total_calls, rt->total_calls == 1 ? "" : "s", rt->variants.n,
	        rt->variants.n == 1 ? "" : "s", (long long)rt->inlined_calls, reuse_ratio(rt));
	if (total_compile_ms(rt) > 0)
		fprintf(f, "compile time: %.1f ms for the variants, about %.1f ms saved by reuse\n", total_compile_ms(rt),
		        saved_ms(rt));
	if (wformat_mask(rt->p))
		text_weights(f, rt->p);
}

static json_t *json_report(RegionTable *rt, const char *model)
{
	char buf[512], nm[256], hex[33];
	json_t *root = json_object();
	json_object_set_new(root, "version", json_integer(1));
	json_object_set_new(root, "model", json_string(model));
	json_object_set_new(root, "source", json_string(rt->p->src->path));
	json_object_set_new(root, "target", rt->target ? json_string(rt->target) : json_null());
	json_object_set_new(root, "no_regions", json_boolean(rt->no_regions));

	json_t *regions = json_array();
	for (int r = 0; r < rt->nregions; r++) {
		RegionInfo *ri = rt->regions[r];
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(ri->fn->name));
		loc_str(rt, ri->fn->name_loc, buf, sizeof buf);
		json_object_set_new(o, "defined_at", json_string(buf));
		json_object_set_new(o, "max_reuse_entries", json_integer(ri->max_entries));
		json_t *opts = json_object();
		json_object_set_new(opts, "opt_level", json_integer(ri->opt_level));
		json_object_set_new(opts, "fast_math", json_boolean(ri->fast_math));
		json_object_set_new(opts, "winograd", json_boolean(ri->winograd));
		json_object_set_new(o, "options", opts);
		json_t *vs = json_array();
		for (int i = 0; i < ri->variants.n; i++) {
			variant_name(ri->variants.v[i], nm, sizeof nm);
			json_array_append_new(vs, json_string(nm));
		}
		json_object_set_new(o, "variants", vs);
		int64_t calls = 0;
		for (int i = 0; i < ri->calls.n; i++)
			calls += ((CallSite *)ri->calls.v[i])->count;
		json_object_set_new(o, "calls", json_integer(calls));
		json_array_append_new(regions, o);
	}
	json_object_set_new(root, "regions", regions);

	json_t *variants = json_array();
	for (int i = 0; i < rt->variants.n; i++) {
		Variant *v = rt->variants.v[i];
		json_t *o = json_object();
		variant_name(v, nm, sizeof nm);
		fp_hex(v->fp, hex);
		json_object_set_new(o, "id", json_integer(v->id));
		json_object_set_new(o, "name", json_string(nm));
		json_object_set_new(o, "region", json_string(v->region));
		json_object_set_new(o, "fingerprint", json_string(hex));
		json_object_set_new(o, "guards", json_string(v->guards ? v->guards : ""));
		snprintf(buf, sizeof buf, "%s.%s.o", model, nm);
		json_object_set_new(o, "object", json_string(buf));
		obj_json(o, &v->obj);
		json_object_set_new(o, "reuse_hash", v->has_hash ? json_integer(v->hash) : json_null());
		json_object_set_new(o, "runtime_dims", json_integer(v->ndyn));
		json_object_set_new(o, "calls", json_integer(variant_calls(v)));
		WsFigures ws = ws_figures(rt, v);
		json_object_set_new(o, "workspace_bytes", json_integer(ws.total));
		json_object_set_new(o, "intermediate_bytes", json_integer(ws.tensors));
		json_object_set_new(o, "intermediate_bytes_unshared", json_integer(ws.unshared));
		json_object_set_new(o, "scratch_bytes", json_integer(ws.scratch));
		json_array_append_new(variants, o);
	}
	json_object_set_new(root, "variants", variants);
	if (wformat_mask(rt->p)) {
		json_t *ws = json_array();
		for (int i = 0; i < rt->p->nparams; i++) {
			ParamInfo *pi = &rt->p->params[i];
			json_t *o = json_object();
			json_object_set_new(o, "name", json_string(pi->name));
			json_object_set_new(o, "format", json_string(pi->wformat != WF_F32 ? wformat_name(pi->wformat) : dtype_name(pi->dtype)));
			json_object_set_new(o, "axis", pi->wformat != WF_F32 ? json_integer(pi->waxis) : json_null());
			json_object_set_new(o, "bytes", json_integer(param_bytes(pi)));
			json_array_append_new(ws, o);
		}
		json_object_set_new(root, "weights", ws);
	}

	json_t *calls = json_array();
	for (int i = 0; i < rt->calls.n; i++) {
		CallSite *cs = rt->calls.v[i];
		json_t *o = json_object();
		json_object_set_new(o, "region", json_string(cs->call->callee->fn->name));
		loc_str(rt, cs->call->loc, buf, sizeof buf);
		json_object_set_new(o, "site", json_string(buf));
		json_object_set_new(o, "caller", json_string(cs->caller->name));
		{
			/* added: the caller's variant, to tell apart the calls of one site in
			 * a region of several variants */
			Variant *cv = caller_variant(rt, cs->caller);
			if (cv)
				variant_name(cv, nm, sizeof nm);
			json_object_set_new(o, "caller_variant", cv ? json_string(nm) : json_null());
		}
		if (cs->v) {
			variant_name(cs->v, nm, sizeof nm);
			json_object_set_new(o, "variant", json_string(nm));
		} else {
			json_object_set_new(o, "variant", json_null());
		}
		json_object_set_new(o, "status", json_string(cs->inlined ? "inlined" : cs->is_new ? "new" : "reused"));
		json_object_set_new(o, "count", json_integer(cs->count));
		json_object_set_new(o, "differs", cs->differs ? json_string(cs->differs) : json_null());
		if (cs->v && cs->v->ndyn) {
			json_t *dv = json_array();
			for (int k = 0; k < cs->v->ndyn; k++)
				json_array_append_new(dv, json_integer(cs->dyn_values[k]));
			json_object_set_new(o, "runtime_dims", dv);
		}
		json_array_append_new(calls, o);
	}
	json_object_set_new(root, "calls", calls);

	json_t *mo = json_null();
	if (rt->model.code_bytes) {
		mo = json_object();
		snprintf(buf, sizeof buf, "%s.o", model);
		json_object_set_new(mo, "object", json_string(buf));
		json_t *parts = json_array();
		json_array_append_new(parts, json_string(buf));
		for (int k = 1; k < rt->model.parts; k++) {
			snprintf(buf, sizeof buf, "%s.model-%d.o", model, k);
			json_array_append_new(parts, json_string(buf));
		}
		json_object_set_new(mo, "parts", parts);
		obj_json(mo, &rt->model);
	}
	json_object_set_new(root, "model_object", mo);

	json_t *tot = json_object();
	json_object_set_new(tot, "region_calls", json_integer(rt->total_calls));
	json_object_set_new(tot, "unique_variants", json_integer(rt->variants.n));
	json_object_set_new(tot, "inlined_calls", json_integer(rt->inlined_calls));
	json_object_set_new(tot, "reuse_ratio", json_real(reuse_ratio(rt)));
	json_object_set_new(tot, "compile_ms", json_real(total_compile_ms(rt)));
	json_object_set_new(tot, "compile_ms_saved", json_real(saved_ms(rt)));
	json_object_set_new(root, "totals", tot);
	return root;
}

static void dot_id(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void dot_report(FILE *f, RegionTable *rt, const char *model)
{
	char nm[256];
	fputs("digraph ", f);
	dot_id(f, model);
	fputs(" {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n", f);
	for (int i = 0; i < rt->p->nentries; i++) {
		fputs("  ", f);
		dot_id(f, rt->p->entries[i].name);
		fputs(" [shape=ellipse];\n", f);
	}
	for (int i = 0; i < rt->variants.n; i++) {
		Variant *v = rt->variants.v[i];
		variant_name(v, nm, sizeof nm);
		fputs("  ", f);
		dot_id(f, nm);
		fprintf(f, " [label=\"%s\\n%lld calls\"];\n", nm, (long long)variant_calls(v));
	}
	/* edges: caller function (or variant) -> callee variant, with call counts */
	for (int i = 0; i < rt->calls.n; i++) {
		CallSite *cs = rt->calls.v[i];
		int dup = 0;
		for (int k = 0; k < i && !dup; k++) {
			CallSite *o = rt->calls.v[k];
			dup = o->caller == cs->caller && o->v == cs->v && o->inlined == cs->inlined &&
			      o->call->callee->fn == cs->call->callee->fn;
		}
		if (dup)
			continue;
		int64_t n = 0;
		for (int k = i; k < rt->calls.n; k++) {
			CallSite *o = rt->calls.v[k];
			if (o->caller == cs->caller && o->v == cs->v && o->inlined == cs->inlined &&
			    o->call->callee->fn == cs->call->callee->fn)
				n += o->count;
		}
		/* the caller's node: an entry, or the variant whose code it is */
		const char *from = cs->caller->name;
		char fromv[256];
		for (int k = 0; k < rt->calls.n; k++) {
			CallSite *o = rt->calls.v[k];
			if (o->call->callee == cs->caller && o->v) {
				variant_name(o->v, fromv, sizeof fromv);
				from = fromv;
				break;
			}
		}
		fputs("  ", f);
		dot_id(f, from);
		fputs(" -> ", f);
		if (cs->v) {
			variant_name(cs->v, nm, sizeof nm);
			dot_id(f, nm);
			fprintf(f, " [label=\"%lld\"];\n", (long long)n);
		} else {
			snprintf(nm, sizeof nm, "%s (inlined)", cs->call->callee->fn->name);
			dot_id(f, nm);
			fprintf(f, " [label=\"%lld\", style=dashed];\n", (long long)n);
		}
	}
	fputs("}\n", f);
}

void report_write(FILE *f, RegionTable *rt, ReportFormat fmt, const char *model)
{
	switch (fmt) {
	case REPORT_TEXT:
		text_report(f, rt, model);
		break;
	case REPORT_JSON: {
		json_t *j = json_report(rt, model);
		json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', f);
		json_decref(j);
		break;
	}
	case REPORT_DOT:
		dot_report(f, rt, model);
		break;
	}
}

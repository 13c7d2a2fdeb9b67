/* emit.c - the import driver: translating the graph (inputs, nodes with
 * their fused patterns and segments, outputs) into the Nest module text,
 * the passes that find the repeated layers first, and the weights as the
 * parts of a .safetensors file. */
#include "onnx.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The .safetensors file as parts: the header, then each weight's bytes where
 * they are (most in the mapped model: nothing is copied). */
static void safetensors_parts(Ctx *c, OnnxImport *out, char **head)
{
	static const char *const st_names[DT_COUNT] = {"BOOL", "I32", "I64", "F32", "F64"};
	Buf h = {0};
	buf_printf(&h, "%8s{", "");
	size_t off = 0;
	for (int k = 0; k < c->nw; k++) {
		WEntry *e = &c->w[k];
		buf_printf(&h, "%s\"", k ? "," : "");
		for (const char *s = e->name; *s; s++) {
			if (*s == '"' || *s == '\\')
				buf_putc(&h, '\\');
			if ((unsigned char)*s < 0x20)
				buf_printf(&h, "\\u%04x", (unsigned char)*s);
			else
				buf_putc(&h, *s);
		}
		buf_printf(&h, "\":{\"dtype\":\"%s\",\"shape\":[", st_names[e->dt]);
		for (int j = 0; j < e->rank; j++)
			buf_printf(&h, "%s%lld", j ? "," : "", (long long)e->shape[j]);
		buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + e->nbytes);
		off += e->nbytes;
	}
	buf_putc(&h, '}');
	while (h.len % 8)
		buf_putc(&h, ' ');
	uint64_t hl = h.len - 8;
	for (int i = 0; i < 8; i++)
		h.s[i] = (char)(hl >> (8 * i));
	out->weights = xmalloc((size_t)(c->nw + 1) * sizeof *out->weights);
	out->weights[0] = (Part){h.s, h.len};
	for (int k = 0; k < c->nw; k++)
		out->weights[k + 1] = (Part){c->w[k].data, c->w[k].nbytes};
	out->nparts = c->nw + 1;
	out->weights_len = h.len + off;
	*head = h.s;
}

static int import_graph(Ctx *c, Onnx__ModelProto *m)
{
	Onnx__GraphProto *g = m->graph;
	const OnnxOptions *o = c->opt;
	/* the region functions' names are taken */
	for (int r = 0; c->plan && r < c->plan->nregions; r++)
		vec_push(&c->ids, xstrdup(c->plan->rname[r]));
	/* initializers: known values */
	for (size_t k = 0; k < g->n_initializer; k++) {
		Onnx__TensorProto *t = g->initializer[k];
		if (!t->name || !*t->name)
			return node_err(c, 0, "initializer #%zu has no name", k), -1;
		if (!tensor_val(c, t, t->name, c->path, 1))
			return -1;
	}
	/* inputs */
	Buf sig = {0};
	int nargs = 0;
	for (size_t k = 0; k < g->n_input; k++) {
		Onnx__ValueInfoProto *vi = g->input[k];
		if (!vi->name || !*vi->name) {
			buf_free(&sig);
			return node_err(c, 0, "graph input #%zu has no name", k), -1;
		}
		if (find_val(c, vi->name))
			continue; /* an initializer: its value wins (old exporters list both) */
		const char *frozen = NULL;
		for (int j = 0; j < o->nfreeze; j++)
			if (!strcmp(o->freeze_names[j], vi->name))
				frozen = o->freeze_paths[j];
		if (frozen) {
			if (!frozen_val(c, vi->name, frozen)) {
				buf_free(&sig);
				return -1;
			}
			continue;
		}
		Onnx__TypeProto *tp = vi->type;
		if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' is not a tensor (sequences, maps and optionals are not supported)",
			                vi->name), -1;
		}
		int ot = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
		int dt = onnx_nest_dtype(ot);
		if (dt < 0) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' has dtype %s, which nestc does not support", vi->name,
			                onnx_dtype_name(ot)), -1;
		}
		Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
		if (!sp) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' has no shape; nestc needs every dimension", vi->name), -1;
		}
		if (sp->n_dim > MAX_RANK) {
			buf_free(&sig);
			return node_err(c, 1, "input '%.200s' has rank %zu, more than nestc's %d", vi->name, sp->n_dim, MAX_RANK), -1;
		}
		int64_t shape[MAX_RANK];
		Buf ty = {0};
		int sdt = onnx_storage_dtype(ot);
		buf_printf(&ty, "%s[", dtype_name((DType)(sdt >= 0 ? sdt : dt)));
		for (size_t d = 0; d < sp->n_dim; d++) {
			Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
			if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
				shape[d] = dm->dim_value;
				buf_printf(&ty, "%s%lld", d ? ", " : "", (long long)dm->dim_value);
				continue;
			}
			const char *pn = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dm->dim_param : NULL;
			const char *dv = pn && *pn ? lookup_define(o, pn) : NULL;
			if (!dv) {
				buf_free(&ty);
				buf_free(&sig);
				if (pn && *pn)
					return node_err(c, 0, "input '%.200s': dimension %zu is the symbol '%.100s': bind it with -D %.100s=VALUE",
					                vi->name, d, pn, pn), -1;
				return node_err(c, 0, "input '%.200s': dimension %zu has no size (give the model a fixed shape)",
				                vi->name, d), -1;
			}
			char *end;
			long long x = strtoll(dv, &end, 10);
			if (!*dv || *end || x < 0) {
				buf_free(&ty);
				buf_free(&sig);
				return node_err(c, 0, "-D %s=%s: a dimension is 0 or a positive integer", pn, dv), -1;
			}
			shape[d] = x;
			/* a const of the symbol's name when it is an identifier */
			int ident = (pn[0] < '0' || pn[0] > '9');
			for (const char *s = pn; *s; s++)
				ident &= (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_';
			int declared = 0;
			for (int j = 0; j < c->ids.n; j++)
				declared |= !strcmp(c->ids.v[j], pn);
			if (ident && !declared && !id_taken(c, pn)) {
				vec_push(&c->ids, xstrdup(pn));
				buf_printf(&c->consts, "const %s = %lld\n", pn, x);
				declared = 1;
			}
			if (ident && declared)
				buf_printf(&ty, "%s%s", d ? ", " : "", pn);
			else
				buf_printf(&ty, "%s%lld", d ? ", " : "", x);
		}
		buf_puts(&ty, "]");
		Val *v = new_val(c, vi->name, (DType)dt, (int)sp->n_dim, shape);
		if (check_shape(c, v->rank, shape) < 0) {
			buf_free(&ty);
			buf_free(&sig);
			return -1;
		}
		v->is_input = 1;
		v->ot = ot;
		/* one of a storage dtype is passed in it under its own name, and computed
		 * in the wider dtype under another */
		char *raw = sdt >= 0 ? make_id(c, vi->name, "in_") : NULL;
		v->id = make_id(c, vi->name, "in_");
		if (raw) {
			buf_printf(&sig, "%s%s: %s", nargs ? ", " : "", raw, ty.s);
			buf_printf(&c->body, "  let %s = %s(%s)\n", v->id, dtype_name((DType)dt), raw);
			v->arg_id = raw;
		} else {
			buf_printf(&sig, "%s%s: %s", nargs ? ", " : "", v->id, ty.s);
		}
		if (ot != OT_FLOAT && ot != OT_DOUBLE && ot != OT_INT32 && ot != OT_INT64 && ot != OT_BOOL)
			buf_printf(&c->consts, "# input %s: %s in the ONNX file, passed as %s%s%s\n", vi->name,
			           onnx_dtype_name(ot), dtype_name((DType)(sdt >= 0 ? sdt : dt)), sdt >= 0 ? ", computed in " : "",
			           sdt >= 0 ? dtype_name((DType)dt) : "");
		buf_free(&ty);
		nargs++;
	}
	/* nodes */
	PatMark *pat = find_patterns(g);
	for (size_t k = 0; k < g->n_node; k++) {
		c->node = g->node[k];
		c->node_index = (int)k;
		if (c->plan && c->plan->seg_at[k] >= 0)
			seg_begin(c, c->plan->seg_at[k]);
		int fused = 0, kind = pat[k].kind;
		int gend = kind ? pat[k].last : -1;
		if (kind) {
			/* the pattern's constants first, then the pattern as one node */
			for (int j = (int)k + 1; j <= gend && !c->failed; j++)
				if (g->node[j]->op_type && !strcmp(g->node[j]->op_type, "Constant")) {
					c->node = g->node[j];
					c->node_index = j;
					if (translate_node(c, g->node[j]) < 0 && !c->failed)
						node_err(c, 0, "cannot translate");
				}
			fused = c->failed ? -1 : try_pattern(c, g, (int)k, &pat[k]);
			if (!fused) {
				/* translate them one by one after all (the constants are done) */
				for (int j = (int)k; j <= gend && fused >= 0; j++) {
					if (j > (int)k && g->node[j]->op_type && !strcmp(g->node[j]->op_type, "Constant"))
						continue;
					c->node = g->node[j];
					c->node_index = j;
					if (translate_node(c, g->node[j]) < 0)
						fused = -1;
				}
				if (fused == 0)
					fused = 1;
			}
		}
		if (fused < 0 || (!fused && translate_node(c, g->node[k]) < 0)) {
			buf_free(&sig);
			free(pat);
			if (!c->failed)
				node_err(c, 0, "cannot translate");
			return -1;
		}
		if (fused) {
			/* the pattern's last node ends any segment ending inside it */
			for (int j = (int)k; j < gend && c->plan; j++)
				if (c->plan->seg_end[j] >= 0)
					seg_end(c, c->plan->seg_end[j]);
			k = (size_t)gend;
			c->node_index = (int)k;
		}
		if (c->plan && c->plan->seg_end[k] >= 0)
			seg_end(c, c->plan->seg_end[k]);
		if (c->failed) {
			buf_free(&sig);
			free(pat);
			return -1;
		}
	}
	free(pat);
	c->node = NULL;
	/* outputs */
	if (!g->n_output) {
		buf_free(&sig);
		return node_err(c, 0, "the graph has no outputs"), -1;
	}
	Buf res = {0}, ret = {0};
	for (size_t k = 0; k < g->n_output; k++) {
		Onnx__ValueInfoProto *vi = g->output[k];
		Val *v = vi->name ? find_val(c, vi->name) : NULL;
		if (!v) {
			buf_free(&sig);
			buf_free(&res);
			buf_free(&ret);
			return node_err(c, 0, "graph output '%.200s' is computed by no node", vi->name ? vi->name : ""), -1;
		}
		/* a symbolic dimension of an output given with -D: the size computed */
		Onnx__TensorShapeProto *osp =
			vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && vi->type->tensor_type
				? vi->type->tensor_type->shape
				: NULL;
		for (size_t d = 0; osp && d < osp->n_dim && (int)d < v->rank; d++) {
			Onnx__TensorShapeProto__Dimension *dm = osp->dim[d];
			const char *pn = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dm->dim_param : NULL;
			const char *dv = pn && *pn ? lookup_define(o, pn) : NULL;
			char *end;
			if (dv && (strtoll(dv, &end, 10) != v->shape[d] || *end || !*dv)) {
				buf_free(&sig);
				buf_free(&res);
				buf_free(&ret);
				return node_err(c, 0, "-D %s=%s: dimension %zu of output '%.200s', which the file calls '%s', is %lld", pn,
				                dv, d, vi->name, pn, (long long)v->shape[d]), -1;
			}
		}
		const char *e = ref(c, v);
		if (g->n_output > 1)
			buf_puts(&res, k ? ", " : "(");
		/* an output of a storage dtype is returned in it (rounded, or wrapped) */
		int oot = osp ? vi->type->tensor_type->elem_type : 0;
		int sdt = onnx_storage_dtype(oot);
		if (sdt >= 0 && onnx_nest_dtype(oot) == (int)v->dt) {
			type_text(&res, (DType)sdt, v->rank, v->shape);
			buf_printf(&ret, "%s%s(%s)", k ? ", " : "", dtype_name((DType)sdt), e);
		} else {
			type_text(&res, v->dt, v->rank, v->shape);
			buf_printf(&ret, "%s%s", k ? ", " : "", e);
		}
	}
	if (g->n_output > 1)
		buf_puts(&res, ")");
	if (c->failed) {
		buf_free(&sig);
		buf_free(&res);
		buf_free(&ret);
		return -1;
	}
	Buf all = {0};
	buf_printf(&all, "# Imported by nestc %s from %s (opset %d).\n", NESTC_VERSION, c->path, c->opset);
	if (c->consts.s)
		buf_puts(&all, c->consts.s);
	char *regions = c->plan && c->plan->regions.s ? xstrdup(c->plan->regions.s) : NULL;
	Buf fb = {0};
	buf_printf(&fb, "\nexport fn forward(%s) -> %s {\n%s  return %s\n}\n", sig.s ? sig.s : "", res.s,
	           c->body.s ? c->body.s : "", ret.s);
	char *fn = fb.s;
	group_params(c, &regions, &fn);
	if (c->params.s)
		buf_printf(&all, "\n%s", c->params.s);
	if (regions)
		buf_puts(&all, regions);
	buf_puts(&all, fn);
	free(regions);
	free(fn);
	buf_free(&sig);
	buf_free(&res);
	buf_free(&ret);
	buf_free(&c->body);
	c->body = all;
	return 0;
}

static void ctx_free(Ctx *c)
{
	for (int k = 0; k < c->nvals; k++) {
		free(c->vals[k]->name);
		free(c->vals[k]->id);
		free(c->vals[k]->arg_id);
		free(c->vals[k]->f);
		free(c->vals[k]->i);
		free(c->vals[k]->rawbuf);
		free(c->vals[k]);
	}
	free(c->vals);
	tab_free(&c->vtab);
	tab_free(&c->idtab);
	for (int k = 0; k < c->ids.n; k++)
		free(c->ids.v[k]);
	free(c->ids.v);
	for (int k = 0; k < c->nw; k++) {
		free(c->w[k].name);
		free(c->w[k].id);
		free(c->w[k].path);
		if (!c->w[k].borrowed)
			free(c->w[k].data);
	}
	free(c->w);
	for (int k = 0; k < c->next; k++) {
		free(c->ext[k].id);
		free(c->ext[k].oname);
		free(c->ext[k].ph);
	}
	free(c->ext);
	if (c->rmode && c->inner.n && c->inner.v[0]) {
		buf_free(c->inner.v[0]);
		free(c->inner.v[0]);
	}
	free(c->inner.v);
	for (int k = 0; k < c->garbage.n; k++)
		free(c->garbage.v[k]);
	free(c->garbage.v);
	buf_free(&c->consts);
	buf_free(&c->params);
	buf_free(&c->body);
	Ctx z = {.path = c->path, .opt = c->opt, .opset = c->opset};
	*c = z;
}

static int ctx_init(Ctx *c, Onnx__ModelProto *m, const char *path)
{
	c->opset = 0;
	for (size_t k = 0; k < m->n_opset_import; k++) {
		Onnx__OperatorSetIdProto *os = m->opset_import[k];
		if ((!os->domain || !*os->domain || !strcmp(os->domain, "ai.onnx")) && os->has_version)
			c->opset = (int)os->version;
	}
	if (!c->opset) {
		fprintf(stderr, "%s: error: the model imports no opset of the default domain (ai.onnx): other domains are not "
		                "supported\n",
		        path);
		return -1;
	}
	return 0;
}

/* The translation with the regions of plan: plan, or NULL (freed) when the
 * translation cannot follow it; the caller then translates flat. */
static OPlan *follow_plan(Ctx *c, Onnx__ModelProto *m, OPlan *plan)
{
	if (!plan)
		return NULL;
	c->plan = plan;
	if (import_graph(c, m) == 0)
		return plan;
	ctx_free(c);
	plan_free(plan);
	return NULL;
}

/* What an import's weight parts point into, kept until onnx_import_free. */
typedef struct OnnxHeld {
	unsigned char *data; /* the file, */
	size_t len;
	int mapped;          /* mapped (else read into memory) */
	Onnx__ModelProto *m; /* its initializers' bytes in data */
	Ctx *c;              /* the weights decoded or read from external files */
	char *head;          /* the .safetensors header */
} OnnxHeld;

static void release_file(unsigned char *data, size_t len, int mapped)
{
	if (mapped)
		munmap(data, len);
	else
		free(data);
}

/* Does a dimension of one of the n values vs bear the symbol name? */
static int has_symbol(Onnx__ValueInfoProto **vs, size_t n, const char *name, Buf *all)
{
	int found = 0;
	for (size_t k = 0; k < n; k++) {
		Onnx__TypeProto *tp = vs[k]->type;
		if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type || !tp->tensor_type->shape)
			continue;
		Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
		for (size_t d = 0; d < sp->n_dim; d++) {
			Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
			if (dm->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM || !dm->dim_param ||
			    !*dm->dim_param)
				continue;
			found |= !strcmp(dm->dim_param, name);
			if (all) {
				char *q = xasprintf("'%s'", dm->dim_param);
				if (!strstr(all->s ? all->s : "", q))
					buf_printf(all, "%s%s", all->len ? ", " : "", q);
				free(q);
			}
		}
	}
	return found;
}

/* Every -D names a symbolic dimension of the graph's inputs or outputs: a
 * misspelt one would be ignored otherwise. */
static int check_defines(Onnx__GraphProto *g, const OnnxOptions *o, const char *path)
{
	for (int k = 0; k < o->ndefs; k++) {
		if (has_symbol(g->input, g->n_input, o->def_names[k], NULL) ||
		    has_symbol(g->output, g->n_output, o->def_names[k], NULL))
			continue;
		Buf all = {0};
		has_symbol(g->input, g->n_input, "", &all);
		has_symbol(g->output, g->n_output, "", &all);
		fprintf(stderr, "%s: error: -D %s=%s: the model has no symbolic dimension '%s' (%s%s)\n", path,
		        o->def_names[k], o->def_values[k], o->def_names[k], all.len ? "its symbols: " : "it has none",
		        all.len ? all.s : "");
		buf_free(&all);
		return -1;
	}
	return 0;
}

int onnx_import(const char *path, const OnnxOptions *o, OnnxImport *out)
{
	memset(out, 0, sizeof *out);
	unsigned char *data;
	size_t len;
	char err[300];
	/* mapped, not read: the weights stay where they are in the file, and the
	 * pages of a big model are not copied (a file truncated by another
	 * process meanwhile is a SIGBUS, as for any tool that maps its input) */
	void *map = MAP_FAILED;
	struct stat st;
	int fd = open(path, O_RDONLY);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (fd >= 0)
		close(fd);
	if (map != MAP_FAILED) {
		data = map;
		len = (size_t)st.st_size;
	} else if (read_file_all(path, &data, &len, err, sizeof err) < 0) {
		fprintf(stderr, "%s: error: %s\n", path, err);
		return 1;
	}
	int mapped = map != MAP_FAILED;
	if (!onnx_nesting_ok(data, len, 200)) {
		release_file(data, len, mapped);
		fprintf(stderr, "%s: error: the model's graphs or types are nested more than 200 deep\n", path);
		return 1;
	}
	Onnx__ModelProto *m = onnx_model_unpack(data, len);
	if (!m) {
		release_file(data, len, mapped);
		fprintf(stderr, "%s: error: not an ONNX model: the file is malformed or truncated\n", path);
		return 1;
	}
	Ctx c = {.path = path, .opt = o};
	int rc = 1;
	OPlan *plan = NULL;
	Expanded *ex = NULL;
	Onnx__ModelProto m2, *m0 = m;
	Onnx__GraphProto g2;
	if (!m->graph) {
		fprintf(stderr, "%s: error: not an ONNX model: it has no graph\n", path);
		goto done;
	}
	if (ctx_init(&c, m, path) < 0 || check_defines(m->graph, o, path) < 0)
		goto done;
	/* local functions: their calls expanded, in a shallow copy of the model */
	ex = expand_functions(m);
	if (ex) {
		m2 = *m;
		g2 = *m->graph;
		g2.node = ex->nodes;
		g2.n_node = ex->n;
		m2.graph = &g2;
		m = &m2;
	}
	if (ex && ex->ncalls && !o->no_outline) {
		/* each function a region: pass 0 finds the calls' run-time inputs */
		c.dry = 1;
		if (import_graph(&c, m) == 0)
			plan = plan_from_calls(&c, ex, (int)m->graph->n_node);
		ctx_free(&c);
	} else if (!o->no_outline) {
		/* repeated layers: pass 0 (known values, so cuts), segments, a probe
		 * pass (their templates), the plan; both passes dry: big weights are
		 * not decoded, nothing is kept but the plan */
		c.dry = 1;
		OPlan *segs = import_graph(&c, m) == 0 ? find_segments(&c, m->graph) : NULL;
		ctx_free(&c);
		if (segs) {
			segs->key = xcalloc((size_t)segs->nseg, sizeof(char *));
			segs->probe = 1;
			plan_index(segs);
			Ctx c1 = {.path = path, .opt = o, .opset = c.opset, .plan = segs, .dry = 1};
			int ok = import_graph(&c1, m) == 0;
			for (int k = 0; k < segs->nseg; k++)
				if (!segs->key[k])
					segs->key[k] = xstrdup("");
			ctx_free(&c1);
			plan = ok ? choose_regions(segs, m->graph) : NULL;
			plan_free(segs);
		}
	}
	plan = follow_plan(&c, m, plan);
	if (!plan && import_graph(&c, m) < 0) {
		fprintf(stderr, "%s: error: %s\n", path, c.err);
		out->unsupported = c.unsupported;
		goto done;
	}
	if (plan) {
		Buf sm = {0};
		for (int r = 0; r < plan->nregions; r++)
			buf_printf(&sm, "%sregion %s: %d nodes, %d occurrences\n", r ? "" : "", plan->rname[r], plan->rnodes[r],
			           plan->rcalls[r]);
		if (plan->summary.s)
			buf_puts(&sm, plan->summary.s);
		out->outline = sm.s;
	}
	out->text = c.body.s;
	c.body = (Buf){0};
	out->nweights = c.nw;
	/* the arguments' ONNX names (nestc run --input takes either) */
	out->arg_onnx = xcalloc(m->graph->n_input + 1, sizeof(char *));
	out->arg_nest = xcalloc(m->graph->n_input + 1, sizeof(char *));
	for (size_t k = 0; k < m->graph->n_input; k++) {
		Val *v = m->graph->input[k]->name ? find_val(&c, m->graph->input[k]->name) : NULL;
		if (v && v->is_input && v->id) {
			out->arg_onnx[out->nargs] = xstrdup(m->graph->input[k]->name);
			out->arg_nest[out->nargs++] = xstrdup(v->arg_id ? v->arg_id : v->id);
		}
	}
	rc = 0;
done:
	expanded_free(ex);
	c.plan = NULL;
	if (rc == 0) {
		OnnxHeld *h = xcalloc(1, sizeof *h);
		*h = (OnnxHeld){.data = data, .len = len, .mapped = mapped, .m = m0, .c = xmalloc(sizeof c)};
		safetensors_parts(&c, out, &h->head);
		*h->c = c;
		out->held = h;
	} else {
		onnx_model_free(m0, data, len);
		ctx_free(&c);
		release_file(data, len, mapped);
	}
	plan_free(plan);
	return rc;
}

void onnx_import_free(OnnxImport *im)
{
	free(im->text);
	free(im->weights);
	free(im->outline);
	for (int k = 0; k < im->nargs; k++) {
		free(im->arg_onnx[k]);
		free(im->arg_nest[k]);
	}
	free(im->arg_onnx);
	free(im->arg_nest);
	OnnxHeld *h = im->held;
	if (h) {
		ctx_free(h->c);
		free(h->c);
		onnx_model_free(h->m, h->data, h->len);
		release_file(h->data, h->len, h->mapped);
		free(h->head);
		free(h);
	}
	memset(im, 0, sizeof *im);
}

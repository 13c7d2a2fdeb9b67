/* header.c - the C header of a model: its type, new/free, the workspace
 * size and one function per entry point, with the element counts, ranks
 * and dims of its arguments and results. */
#include "gen.h"

#include <limits.h>
#include <string.h>

const char *header_c_type(DType dt)
{
	switch (dt) {
	case DT_BOOL: return "uint8_t";
	case DT_I32: return "int32_t";
	case DT_I64: return "int64_t";
	case DT_F32: return "float";
	case DT_F64: return "double";
	case DT_F16: case DT_BF16: return "uint16_t"; /* the bits; the comment above says which */
	case DT_I8: return "int8_t";
	case DT_U8: return "uint8_t";
	case DT_I16: return "int16_t";
	case DT_U16: return "uint16_t";
	default: return "void";
	}
}

/* An argument's name as a C parameter: C keywords, the model handle `m` and
 * the result names take a trailing underscore. */
const char *header_c_param(const char *name, char *buf, size_t n)
{
	static const char *const reserved[] = {
		"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
		"extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
		"short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
		"volatile", "while", "bool", "true", "false", "m", "out", NULL,
	};
	int clash = !strncmp(name, "out", 3) && name[3] && strspn(name + 3, "0123456789") == strlen(name + 3);
	for (int i = 0; reserved[i] && !clash; i++)
		clash = !strcmp(reserved[i], name);
	snprintf(buf, n, "%s%s", name, clash ? "_" : "");
	return buf;
}

/* MODEL_ENTRY_ARG_SUFFIX in capitals for argument k of an entry, or for
 * result k - ninputs (OUT, or OUT0, OUT1, ... when there are several). */
static void arg_macro(char *up, size_t n, const char *name, Entry *en, int k, const char *suffix)
{
	Graph *g = en->g;
	char pn[300];
	if (k < g->ninputs)
		snprintf(up, n, "%s_%s_%s_%s", name, en->name, header_c_param(g->input_names[k], pn, sizeof pn), suffix);
	else if (g->noutputs == 1)
		snprintf(up, n, "%s_%s_OUT_%s", name, en->name, suffix);
	else
		snprintf(up, n, "%s_%s_OUT%d_%s", name, en->name, k - g->ninputs, suffix);
	for (char *c = up; *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
}

/* An entry's C prototype: the model, the sequence (if it has state), the
 * run-time dims, the inputs, the results. */
static void prototype(Buf *b, const char *name, Entry *en)
{
	Graph *g = en->g;
	buf_printf(b, "int %s_%s(%s *m", name, en->name, name);
	if (en->uses_state) {
		/* the sequence is s, unless an argument or dim is named so */
		int taken = 0;
		for (int i = 0; i < g->ninputs; i++)
			taken |= !strcmp(g->input_names[i], "s");
		for (int j = 0; j < en->ndims; j++)
			taken |= !strcmp(en->dim_names[j], "s");
		buf_printf(b, ", %s_seq *%s", name, taken ? "seq_" : "s");
	}
	for (int j = 0; j < en->ndims; j++) {
		char dn[300];
		buf_printf(b, ", int64_t %s", header_c_param(en->dim_names[j], dn, sizeof dn));
	}
	for (int i = 0; i < g->ninputs; i++) {
		char pn[300];
		buf_printf(b, ", const %s *%s", header_c_type(g->inputs[i]->dtype), header_c_param(g->input_names[i], pn, sizeof pn));
	}
	for (int j = 0; j < g->noutputs; j++) {
		if (g->noutputs == 1)
			buf_printf(b, ", %s *out", header_c_type(g->outputs[j]->dtype));
		else
			buf_printf(b, ", %s *out%d", header_c_type(g->outputs[j]->dtype), j);
	}
	buf_puts(b, ");\n\n");
}

/* A dimension or element count as a C expression of the run-time dims. */
static void c_affine(Buf *b, const Affine *f, Entry *en)
{
	buf_printf(b, "INT64_C(%lld)", (long long)f->c0);
	for (int j = 0; j < en->ndims; j++)
		if (f->coef[j])
			buf_printf(b, " + INT64_C(%lld) * (int64_t)(%s)", (long long)f->coef[j], en->dim_names[j]);
}

/* An entry with run-time dims or state: the dims as arguments, and the
 * sizes as macros of them. */
static void dyn_entry_text(Program *p, Buf *b, const char *name, Entry *en)
{
	Graph *g = en->g;
	buf_printf(b, "/* %s(", en->name);
	for (int i = 0; i < g->ninputs; i++) {
		buf_printf(b, "%s%s: ", i ? ", " : "", g->input_names[i]);
		dyn_shape_str(p->arena, b, g, g->inputs[i]);
	}
	buf_puts(b, ") -> ");
	for (int j = 0; j < g->noutputs; j++) {
		if (j)
			buf_puts(b, ", ");
		dyn_shape_str(p->arena, b, g, g->outputs[j]);
	}
	for (int k = 0; k < en->nchecks; k++)
		buf_printf(b, "%s%s", k ? ", " : "\n   where ", en->checks[k].text);
	buf_puts(b, "\n   Returns 0, or -1 (nestrt_model_error(m) says why) when a condition of the\n"
	            "   where clause fails (then nothing was written) or after a run-time error (an\n"
	            "   index out of range: results written before it may be partial). */\n");
	char up[512], dl[256];
	for (int j = 0; j < en->ndims; j++) {
		snprintf(up, sizeof up, "%s_%s_%s", name, en->name, en->dim_names[j]);
		for (char *c = up; *c; c++)
			if (*c >= 'a' && *c <= 'z')
				*c = (char)(*c - 'a' + 'A');
		buf_printf(b, "#define %s_MIN INT64_C(%lld)\n#define %s_MAX INT64_C(%lld)\n", up, (long long)en->dim_lo[j], up,
		           (long long)en->dim_hi[j]);
	}
	dl[0] = 0;
	for (int j = 0; j < en->ndims; j++)
		snprintf(dl + strlen(dl), sizeof dl - strlen(dl), "%s%s", j ? ", " : "", en->dim_names[j]);
	int nt = g->ninputs + g->noutputs;
	for (int k = 0; k < nt; k++) {
		Node *v = k < g->ninputs ? g->inputs[k] : g->outputs[k - g->ninputs];
		int dyn = 0;
		for (int i = 0; i < v->rank; i++)
			dyn |= gdyn_find(g, v->id, i) != NULL;
		arg_macro(up, sizeof up, name, en, k, "NUMEL");
		if (!dyn) {
			buf_printf(b, "#define %s INT64_C(%lld)\n", up, (long long)shape_numel(v->rank, v->shape));
		} else {
			buf_printf(b, "#define %s(%s) (INT64_C(1)", up, dl);
			for (int i = 0; i < v->rank; i++) {
				GDyn *d = gdyn_find(g, v->id, i);
				buf_puts(b, " * (");
				if (d)
					c_affine(b, &d->f, en);
				else
					buf_printf(b, "INT64_C(%lld)", (long long)v->shape[i]);
				buf_putc(b, ')');
			}
			buf_puts(b, ")\n");
		}
		arg_macro(up, sizeof up, name, en, k, "RANK");
		buf_printf(b, "#define %s %d\n", up, v->rank);
		for (int i = 0; i < v->rank; i++) {
			char suf[16];
			snprintf(suf, sizeof suf, "DIM%d", i);
			arg_macro(up, sizeof up, name, en, k, suf);
			GDyn *d = gdyn_find(g, v->id, i);
			if (!d) {
				buf_printf(b, "#define %s INT64_C(%lld)\n", up, (long long)v->shape[i]);
				continue;
			}
			buf_printf(b, "#define %s(%s) (", up, dl);
			c_affine(b, &d->f, en);
			buf_puts(b, ")\n");
		}
	}
	prototype(b, name, en);
}

void header_text(Program *p, BuildOptions *o, Buf *b, const char *name)
{
	char guard[256];
	snprintf(guard, sizeof guard, "%s", name);
	for (char *c = guard; *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
	buf_printf(b, "/* %s.h - generated by nestc %s from %s. Do not edit. */\n", name, NESTC_VERSION, p->src->path);
	buf_printf(b, "#ifndef %s_H\n#define %s_H\n\n#include <stdint.h>\n#include <nestrt.h>\n\n", guard, guard);
	buf_printf(b, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
	buf_printf(b, "typedef struct %s %s;\n\n", name, name);
	buf_printf(b, "/* Bind and check every param (%d tensors); NULL with err->message on error. */\n", p->nparams);
	buf_printf(b, "%s *%s_new(nestrt_weights *w, nestrt_error *err);\nvoid %s_free(%s *m);\n", name, name, name, name);
	if (wformat_mask(p)) {
		/* --weights-format: what the instance holds, per format */
		int64_t held = 0, f32 = 0;
		buf_printf(b, "/* Weights held in formats (--weights-format), converted from the file's F32, F16\n"
		              "   or BF16 tensors when %s_new binds them:", name);
		for (int wf = 0; wf < WF_COUNT; wf++) {
			int np = 0;
			int64_t by = 0;
			for (int i = 0; i < p->nparams; i++) {
				ParamInfo *pi = &p->params[i];
				int64_t n = shape_numel(pi->rank, pi->shape);
				if (pi->wformat != wf)
					continue;
				np++;
				by += wf == WF_F32 ? n * dtype_size(pi->dtype) : wformat_bytes(wf, n);
			}
			if (np)
				buf_printf(b, "\n   %s: %d param%s, %lld bytes", wformat_name(wf), np, np == 1 ? "" : "s", (long long)by);
			held += by;
		}
		for (int i = 0; i < p->nparams; i++)
			f32 += shape_numel(p->params[i].rank, p->params[i].shape) * dtype_size(p->params[i].dtype);
		buf_printf(b, " (f32 holds params of other dtypes too). */\n");
		buf_printf(b, "#define %s_WEIGHT_BYTES INT64_C(%lld) /* %lld as declared */\n", guard, (long long)held, (long long)f32);
	}
	if (o->embed)
		buf_printf(b, "/* %s with the weights compiled in (--embed-weights %s). */\n%s *%s_new_embedded(nestrt_error *err);\n",
		           name, o->embed, name, name);
	buf_printf(b, "/* The workspace of a call in bytes: %s_new allocates one; calls that run at once\n"
	              "   get their own. */\nsize_t %s_workspace_size(void);\n", name, name);
	buf_printf(b, "/* Why this thread's last call of an entry point of m failed, or NULL. Any number\n"
	              "   of threads may call the entry points of one instance at once. */\n"
	              "static inline const char *%s_error(const %s *m)\n{\n\treturn nestrt_model_error((const nestrt_model *)m);\n}\n\n",
	           name, name);
	if (p->nstates) {
		buf_printf(b, "/* A sequence: the model's state (%d tensors, zeroed) for one sequence being\n"
		              "   generated; entry points that read or write it take one. NULL with\n"
		              "   err->message on error. Calls on different sequences may run at once. */\n",
		           p->nstates);
		buf_printf(b, "typedef struct %s_seq %s_seq;\n", name, name);
		buf_printf(b, "%s_seq *%s_seq_new(%s *m, nestrt_error *err);\n", name, name, name);
		buf_printf(b, "void %s_seq_reset(%s_seq *s);\nvoid %s_seq_free(%s_seq *s);\n\n", name, name, name, name);
	}
	for (int e = 0; e < p->nentries; e++) {
		Entry *en = &p->entries[e];
		Graph *g = en->g;
		if (en->ndims || en->uses_state) {
			dyn_entry_text(p, b, name, en);
			continue;
		}
		buf_printf(b, "/* %s(", en->name);
		for (int i = 0; i < g->ninputs; i++) {
			Buf s = {0};
			shape_str(&s, g->inputs[i]->dtype, g->inputs[i]->rank, g->inputs[i]->shape);
			buf_printf(b, "%s%s: %s", i ? ", " : "", g->input_names[i], s.s);
			buf_free(&s);
		}
		buf_puts(b, ") -> ");
		for (int j = 0; j < g->noutputs; j++) {
			Buf s = {0};
			shape_str(&s, g->outputs[j]->dtype, g->outputs[j]->rank, g->outputs[j]->shape);
			buf_printf(b, "%s%s", j ? ", " : "", s.s);
			buf_free(&s);
		}
		buf_puts(b, "\n   Returns 0, or -1 after a run-time error (nestrt_model_error(m) says which). */\n");
		/* element counts, to size buffers: enum constants as before where
		 * they fit an int (an enum constant must), INT64_C macros where not;
		 * then every rank and dim */
		int nt = g->ninputs + g->noutputs, in_enum = 0;
		for (int k = 0; k < nt; k++) {
			Node *v = k < g->ninputs ? g->inputs[k] : g->outputs[k - g->ninputs];
			int64_t numel = shape_numel(v->rank, v->shape);
			if (numel > INT_MAX)
				continue;
			char up[512];
			arg_macro(up, sizeof up, name, en, k, "NUMEL");
			buf_printf(b, "%s %s = %lld", in_enum++ ? "," : "enum {", up, (long long)numel);
		}
		if (in_enum)
			buf_puts(b, " };\n");
		for (int k = 0; k < nt; k++) {
			Node *v = k < g->ninputs ? g->inputs[k] : g->outputs[k - g->ninputs];
			char up[512];
			int64_t numel = shape_numel(v->rank, v->shape);
			if (numel > INT_MAX) {
				arg_macro(up, sizeof up, name, en, k, "NUMEL");
				buf_printf(b, "#define %s INT64_C(%lld)\n", up, (long long)numel);
			}
			arg_macro(up, sizeof up, name, en, k, "RANK");
			buf_printf(b, "#define %s %d\n", up, v->rank);
			for (int i = 0; i < v->rank; i++) {
				char suf[16];
				snprintf(suf, sizeof suf, "DIM%d", i);
				arg_macro(up, sizeof up, name, en, k, suf);
				buf_printf(b, "#define %s INT64_C(%lld)\n", up, (long long)v->shape[i]);
			}
		}
		prototype(b, name, en);
	}
	buf_printf(b, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
}

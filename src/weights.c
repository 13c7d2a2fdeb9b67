/* weights.c - the compiler's view of a .safetensors or GGUF file, over the
 * runtime's reader (runtime/weights.c, gguf.c), the one that validates every entry and never
 * reads out of bounds: compiled programs and `nestc run` accept and reject
 * exactly the same files. This file only turns the runtime's tensors into
 * WTensors and its messages ("PATH: REASON") into the reasons nestc's
 * callers expect (they print the path themselves). */
#include "nestc.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The runtime's dtype codes are nestc's: a WTensor's dtype is the runtime's. */
_Static_assert((int)DT_BOOL == NESTRT_BOOL && (int)DT_I32 == NESTRT_I32 && (int)DT_I64 == NESTRT_I64 &&
               (int)DT_F32 == NESTRT_F32 && (int)DT_F64 == NESTRT_F64 && (int)DT_U16 == NESTRT_U16 &&
               (int)DT_COUNT == NESTRT_NDTYPES && MAX_RANK == NESTRT_MAX_RANK,
               "nestc and nestrt dtypes differ");

void rt_reason(char *err, size_t errlen, const char *path, const struct nestrt_error *e)
{
	/* The runtime wrote "%s: " with path, its newlines made spaces. */
	const char *m = e->message;
	size_t n = strlen(path), k = 0;
	while (k < n && m[k] && (m[k] == path[k] || (m[k] == ' ' && (path[k] == '\n' || path[k] == '\r'))))
		k++;
	if (k == n && m[k] == ':' && m[k + 1] == ' ')
		m += n + 2;
	snprintf(err, errlen, "%s", m);
}

Weights *weights_open(const char *path, char *err, size_t errlen)
{
	nestrt_error e;
	nestrt_weights *rt = nestrt_weights_open(path, &e);
	if (!rt) {
		rt_reason(err, errlen, path, &e);
		return NULL;
	}
	int n = nestrt_weights_count(rt);
	/* The runtime takes a 0-byte file as weights for a model without params;
	 * given as weights on purpose, it is a mistake. */
	struct stat st;
	if (n == 0 && stat(path, &st) == 0 && st.st_size == 0) {
		nestrt_weights_close(rt);
		snprintf(err, errlen, "file is empty");
		return NULL;
	}
	Weights *w = xcalloc(1, sizeof *w);
	w->rt = rt;
	w->path = nestrt_weights_path(rt);
	w->n = n;
	w->t = xcalloc(n ? (size_t)n : 1, sizeof *w->t);
	for (int i = 0; i < n; i++) {
		WTensor *t = &w->t[i];
		nestrt_param info;
		/* an F16 or BF16 tensor's data when a param binds it (weights_data):
		 * widened only for an f32 param */
		const nestrt__stdtype *stored = rt->t[i].stored;
		int half = stored && (stored->dtype == NESTRT_F16 || stored->dtype == NESTRT_BF16);
		nestrt_weights_info(rt, i, &info, &t->dtype_str, half ? NULL : &t->data, &t->nbytes);
		t->name = info.name;
		t->dtype = info.dtype;
		t->half_dtype = half ? stored->dtype : -1;
		t->rank = info.rank;
		memcpy(t->shape, info.shape, sizeof t->shape);
	}
	return w;
}

const void *weights_data(Weights *w, WTensor *t, DType dtype, char *err, size_t errlen)
{
	nestrt_param p = {t->name, (int)dtype, t->rank, {0}};
	memcpy(p.shape, t->shape, sizeof p.shape);
	const void *data;
	nestrt_error e;
	if (nestrt_weights_bind(w->rt, &p, 1, &data, &e) < 0) {
		rt_reason(err, errlen, w->path, &e);
		return NULL;
	}
	return data;
}

static int wtensor_cmp(const void *a, const void *b)
{
	return strcmp(((const WTensor *)a)->name, ((const WTensor *)b)->name);
}

WTensor *weights_find(Weights *w, const char *name)
{
	/* The runtime lists its tensors sorted by name (strcmp). */
	WTensor key = {.name = name};
	return w->n ? bsearch(&key, w->t, (size_t)w->n, sizeof *w->t, wtensor_cmp) : NULL;
}

void weights_close(Weights *w)
{
	if (w) {
		nestrt_weights_close(w->rt); /* NULL is fine */
		free(w->t);
		free(w);
	}
}

/* ---- packed ahead of time (--embed-weights) ---- */

static void json_str(Buf *b, const char *s)
{
	buf_putc(b, '"');
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			buf_printf(b, "\\%c", *c);
		else if (*c < 0x20)
			buf_printf(b, "\\u%04x", *c);
		else
			buf_putc(b, (char)*c);
	}
	buf_putc(b, '"');
}

int weights_prepack(const void *image, size_t len, const ParamInfo *params, int nparams, const int64_t *const *slot_plans,
                    int nslots, const int64_t *entry_plan, char **out, size_t *outlen, Prepacked **packs, int *npacks,
                    char *err, size_t errlen)
{
	*out = NULL;
	*outlen = 0;
	*packs = NULL;
	*npacks = 0;
	nestrt_error e;
	nestrt_weights *w = nestrt_weights_from_memory(image, len, "(embedded weights)", &e);
	if (!w) {
		snprintf(err, errlen, "%s", e.message);
		return -1;
	}
	nestrt_param *pt = xcalloc((size_t)nparams + 1, sizeof *pt);
	for (int i = 0; i < nparams; i++) {
		pt[i].name = params[i].name;
		pt[i].dtype = (int)params[i].dtype;
		pt[i].rank = params[i].rank;
		memcpy(pt[i].shape, params[i].shape, sizeof pt[i].shape);
	}
	nestrt_model_desc d = {.name = "model", .params = pt, .nparams = nparams, .nslots = nslots,
	                       .slot_packs = slot_plans, .packs = entry_plan};
	nestrt__packreq *req = NULL;
	unsigned char *direct = NULL;
	int nreq = 0, bad = -1;
	if (nestrt__packs_requests(&d, &req, &nreq, &direct, &bad) < 0) {
		snprintf(err, errlen, "out of memory");
		free(pt);
		nestrt_weights_close(w);
		return -1;
	}
	/* the data of each tensor, by the file's (sorted) order */
	int nt = nestrt_weights_count(w);
	unsigned char *packed = xcalloc((size_t)nt + 1, 1);
	Prepacked *pk = xcalloc((size_t)nparams + 1, sizeof *pk);
	int np = 0;
	for (int p = 0; p < nparams && nreq; p++) {
		int only = -1, count = 0;
		for (int i = 0; i < nreq; i++)
			if (req[i].param == p) {
				only = i;
				count++;
			}
		int64_t numel = 1;
		for (int k = 0; k < params[p].rank; k++)
			numel *= params[p].shape[k];
		if (count != 1 || direct[p] || req[only].k * req[only].n != numel)
			continue;
		for (int i = 0; i < nt; i++) {
			nestrt_param info;
			const void *data;
			size_t nb;
			if (nestrt_weights_info(w, i, &info, NULL, &data, &nb) < 0 || strcmp(info.name, params[p].name) != 0)
				continue;
			nestrt__packreq *q = &req[only];
			size_t bytes = nestrt__pack_bytes(q->k, q->n, q->wide, q->flags);
			if (!bytes)
				break;
			void *dst = xmalloc(bytes);
			memset(dst, 0, bytes);
			nestrt__pack_panels(dst, data, q->k, q->n, q->wide, q->flags, 0, (q->n + q->wide - 1) / q->wide);
			pk[np++] = (Prepacked){xstrdup(params[p].name), q->k, q->n, q->wide, q->flags, dst, bytes};
			packed[i] = 1;
			break;
		}
	}
	/* the image of the rest: a header padded so that the data starts at a
	 * multiple of 64, each tensor at a multiple of 64 */
	Buf h = {0};
	uint64_t at = 0;
	buf_putc(&h, '{');
	int first = 1;
	for (int i = 0; i < nt; i++) {
		nestrt_param info;
		const char *dt;
		size_t nb;
		if (packed[i] || nestrt_weights_info(w, i, &info, &dt, NULL, &nb) < 0)
			continue;
		if (!first)
			buf_putc(&h, ',');
		first = 0;
		json_str(&h, info.name);
		/* the bytes as held: F16 and BF16 were widened to F32 */
		static const char *const held[] = {"BOOL", "I32", "I64", "F32", "F64"};
		char upper[16];
		if (info.dtype >= 0 && info.dtype < (int)(sizeof held / sizeof held[0])) {
			dt = held[info.dtype];
		} else {
			/* a GGUF file's i8 and i16 are safetensors' I8 and I16 */
			size_t k = 0;
			for (; dt[k] && k + 1 < sizeof upper; k++)
				upper[k] = (char)(dt[k] >= 'a' && dt[k] <= 'z' ? dt[k] - 32 : dt[k]);
			upper[k] = 0;
			dt = upper;
		}
		buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", dt);
		for (int k = 0; k < info.rank; k++)
			buf_printf(&h, "%s%lld", k ? "," : "", (long long)info.shape[k]);
		buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at, (unsigned long long)(at + nb));
		at = (at + nb + 63) / 64 * 64;
	}
	buf_putc(&h, '}');
	while ((h.len + 8) % 64)
		buf_putc(&h, ' ');
	size_t total = 8 + h.len + (size_t)at;
	unsigned char *img = xcalloc(total + 1, 1);
	for (int k = 0; k < 8; k++)
		img[k] = (unsigned char)((uint64_t)h.len >> (8 * k));
	memcpy(img + 8, h.s, h.len);
	at = 0;
	for (int i = 0; i < nt; i++) {
		nestrt_param info;
		const void *data;
		size_t nb;
		if (packed[i] || nestrt_weights_info(w, i, &info, NULL, &data, &nb) < 0)
			continue;
		memcpy(img + 8 + h.len + at, data, nb);
		at = (at + nb + 63) / 64 * 64;
	}
	buf_free(&h);
	free(packed);
	free(req);
	free(direct);
	free(pt);
	nestrt_weights_close(w);
	*out = (char *)img;
	*outlen = total;
	*packs = pk;
	*npacks = np;
	return 0;
}

MetaKV *gguf_meta_read(Arena *a, const char *path, int *n, char **arch, char *err, size_t errlen)
{
	nestrt_error e;
	nestrt_weights *w = nestrt__gguf_open_header(path, &e);
	if (!w) {
		rt_reason(err, errlen, path, &e);
		return NULL;
	}
	int nk = nestrt_weights_meta_count(w);
	MetaKV *kv = arena_alloc(a, (size_t)(nk ? nk : 1) * sizeof *kv);
	*arch = NULL;
	for (int i = 0; i < nk; i++) {
		const char *key = nestrt_weights_meta_key(w, i);
		int et, ty = nestrt_weights_meta_type(w, key, &et, NULL);
		uint64_t count = 0;
		MetaKV *m = &kv[i];
		m->key = arena_strdup(a, key);
		int rc = 0;
		if (ty == 9) {
			nestrt_weights_meta_type(w, key, NULL, &count);
			m->kind = 'a';
			m->i = (int64_t)count;
		} else if (ty == 8) {
			const char *s;
			size_t len;
			m->kind = 's';
			if (strcmp(key, "general.architecture") == 0 && (rc = nestrt_weights_meta_string(w, key, 0, &s, &len, &e)) == 0)
				*arch = arena_strndup(a, s, len);
		} else if (ty == 6 || ty == 12) {
			m->kind = 'f';
			rc = nestrt_weights_meta_float(w, key, 0, &m->f, &e);
		} else {
			m->kind = ty == 7 ? 'b' : 'i';
			rc = nestrt_weights_meta_int(w, key, 0, &m->i, &e);
		}
		if (rc < 0) {
			rt_reason(err, errlen, path, &e);
			nestrt_weights_close(w);
			return NULL;
		}
	}
	nestrt_weights_close(w);
	*n = nk;
	return kv;
}

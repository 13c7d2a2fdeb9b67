/* weights.c - the compiler's view of a .safetensors file, over the runtime's
 * reader (runtime/weights.c), the one that validates every entry and never
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
               (int)DT_F32 == NESTRT_F32 && (int)DT_F64 == NESTRT_F64 && MAX_RANK == NESTRT_MAX_RANK,
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
		nestrt_weights_info(rt, i, &info, &t->dtype_str, &t->data, &t->nbytes);
		t->name = info.name;
		t->dtype = info.dtype;
		t->rank = info.rank;
		memcpy(t->shape, info.shape, sizeof t->shape);
	}
	return w;
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

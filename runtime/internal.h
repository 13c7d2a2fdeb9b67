/* internal.h - shared by the runtime's own files, and by the compiler's thin
 * adapters over the runtime's file readers (src/weights.c, src/npy.c); not
 * installed. Every external symbol here starts with nestrt__ and is hidden
 * from a shared build, so the static library adds nothing to a program's
 * namespace but the public nestrt_ API. */
#ifndef NESTRT_INTERNAL_H
#define NESTRT_INTERNAL_H

/* POSIX 2008 (mmap, strdup, clock_gettime, O_CLOEXEC), whatever the build says;
 * every runtime .c includes this before any system header. */
#if !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "nestrt.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#define NESTRT_HIDDEN __attribute__((visibility("hidden")))

/* Format into err->message (if err is not NULL); always returns -1. */
NESTRT_HIDDEN int nestrt__seterr(nestrt_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "f32[4, 8]" ("f32[]" for a scalar) into buf; lower is the dtype's name. */
NESTRT_HIDDEN void nestrt__type_text(char *buf, size_t len, const char *lower, int rank, const int64_t *shape);

/* Text from a file as it may appear in a message: control characters and
 * DEL become '?', and anything longer than NESTRT__SHOWN - 8 bytes is cut
 * at a UTF-8 boundary with "...". n is the length (text may hold NULs). */
#define NESTRT__SHOWN 160
NESTRT_HIDDEN const char *nestrt__shown(char buf[NESTRT__SHOWN], const char *s, size_t n);

/* A context as the runtime sees it (dispatch.c makes it): the public part
 * that generated code reads, the profile's list, and what pre-packing
 * (pack.c) reads from it, so that pack.c needs no call into dispatch.c. */
typedef struct nestrt__packs nestrt__packs;
typedef struct nestrt__ctx {
	nestrt_ctx pub;
	uint64_t top_nanos;               /* time in outermost calls (profile total) */
	int printed;                      /* the profile went out already */
	struct nestrt__ctx *prev, *next;  /* live profiled contexts, for atexit */
	const nestrt_param *ptab;         /* the bound params' table (nestrt_model_new) */
	int nptab;
	nestrt__packs *packs;             /* pre-packed weights (pack.c), read-only after creation */
	struct nestrt__ctx *parent;       /* a call's own context (model.c): the instance's */
	struct nestrt__kstat *kstats;     /* NESTRT_PROFILE=2: open-addressed by descriptor */
	uint64_t kstats_lost;             /* kernels that found the table full */
} nestrt__ctx;
/* A call's context: the instance's public part with a workspace of its own,
 * counting into the instance's counters (dispatch.c). */
NESTRT_HIDDEN nestrt_ctx *nestrt__ctx_clone(nestrt_ctx *parent, nestrt_error *err);
NESTRT_HIDDEN void nestrt__ctx_clone_free(nestrt_ctx *ctx);

/* ---- pre-packing at creation (pack.c, weights.c) ---- */
typedef struct nestrt__packreq {
	int param;                 /* index into the model's params */
	int64_t k, n, wide;
	int flags;
	const void *data;          /* filled by nestrt__weights_pack */
} nestrt__packreq;
/* Follow the model's pack plans and make its copies; sets the context's
 * lookup table. 0, or -1 with err set. */
NESTRT_HIDDEN int nestrt__packs_make(const nestrt_model_desc *d, nestrt_ctx *ctx, nestrt_weights *w, nestrt_error *err);
/* The plans' requests alone (deduplicated; data unset), and per param
 * whether it is read unpacked (gathers no request serves count as read):
 * what packs_make follows, and what nestc build --embed-weights packs
 * ahead of time. Both malloc'd (NULL when none); 0, or -1 out of memory. */
NESTRT_HIDDEN int nestrt__packs_requests(const nestrt_model_desc *d, nestrt__packreq **req, int *nreq,
                                         unsigned char **direct);
/* Embedded weights packed ahead of time (nestc build --embed-weights): each
 * becomes a tensor of w held only in that packed form, bound like any
 * other (params gives its dtype and shape); nothing packs it again. */
NESTRT_HIDDEN int nestrt__weights_add_packed(nestrt_weights *w, const nestrt_param *params, int nparams,
                                             const nestrt_prepacked *packs, int npacks, nestrt_error *err);
NESTRT_HIDDEN size_t nestrt__pack_bytes(int64_t k, int64_t n, int64_t wide, int flags);
NESTRT_HIDDEN void nestrt__pack_panels(void *dst, const void *src, int64_t k, int64_t n, int64_t wide, int flags,
                                       int64_t p0, int64_t p1);
NESTRT_HIDDEN void nestrt__unpack(void *dst, const void *packed, int64_t k, int64_t n, int64_t wide, int flags);
/* The weights' side: find or make the copy of each request (param data[i]
 * bound from w), shared by every instance over w; note which params are read
 * unpacked (direct, nparams flags), and drop the unpacked form of weights
 * that no instance reads unpacked. 0, or -1 with err set. */
NESTRT_HIDDEN int nestrt__weights_pack(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq,
                                       const unsigned char *direct, int nparams, nestrt_error *err);
/* The weights of an embedded image (and its packed matrices), shared by
 * every instance over the same image while one lives; a reference the
 * caller closes. NULL with err set. */
NESTRT_HIDDEN nestrt_weights *nestrt__weights_embedded(const void *image, size_t size, const char *name,
                                                       const nestrt_param *params, int nparams,
                                                       const nestrt_prepacked *packs, int npacks, nestrt_error *err);
/* nestrt_weights_bind without its last step: data[i] may be a packed copy
 * standing for its param (the key nestrt_packed looks it up by), which
 * nestrt__weights_pack or nestrt__weights_unpacked then settles. */
NESTRT_HIDDEN int nestrt__weights_bind_keys(nestrt_weights *w, const nestrt_param *params, int nparams,
                                            const void **data, nestrt_error *err);
NESTRT_HIDDEN int nestrt__weights_unpacked(nestrt_weights *w, const void **data, int nparams, nestrt_error *err);
/* Weights from a file are read when the first instance is created (packed
 * straight from the file where they may be): this reads whatever is not
 * read yet and closes the file. 0, or -1 with err set. */
NESTRT_HIDDEN int nestrt__weights_ready(nestrt_weights *w, nestrt_error *err);
/* Instances hold a reference to their weights (weights.c). */
NESTRT_HIDDEN void nestrt__weights_ref(nestrt_weights *w);
NESTRT_HIDDEN void nestrt__ctx_set_params(nestrt_ctx *ctx, const nestrt_param *params, int nparams);
NESTRT_HIDDEN void nestrt__packs_free(nestrt__packs *p);

/* The .npy header (magic to newline) numpy.save writes for an array of this
 * dtype and shape, into h (npy.c): nestrt_npy_write puts it before the data
 * in a file, nestc's npy_encode in memory. Returns its length, a multiple of
 * 64 and at most NESTRT__NPY_HEADER_MAX, or -1 for a dtype or rank .npy
 * files of ours cannot hold. */
#define NESTRT__NPY_HEADER_MAX 512
NESTRT_HIDDEN int nestrt__npy_header(char h[NESTRT__NPY_HEADER_MAX], int dtype, int rank, const int64_t *shape);

/* ---- entry points with run-time dims and sequences (model.c, seq.c) ---- */
/* nestrt_model_run with the entry's run-time dims (NULL: none). */
NESTRT_HIDDEN int nestrt__model_run_dims(nestrt_model *m, nestrt_fn entry, void **bufs, const int64_t *dims);
/* Record message as this thread's last error of m; returns -1. */
NESTRT_HIDDEN int nestrt__model_fail(const nestrt_model *m, const char *message);
NESTRT_HIDDEN const nestrt_model_desc *nestrt__model_desc(const nestrt_model *m);

#endif

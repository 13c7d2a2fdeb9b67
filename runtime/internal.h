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
	nestrt__packs *packs;             /* pre-packed weights (pack.c) */
} nestrt__ctx;
NESTRT_HIDDEN void nestrt__ctx_set_params(nestrt_ctx *ctx, const nestrt_param *params, int nparams);
NESTRT_HIDDEN void nestrt__packs_free(nestrt__packs *p);

/* The .npy header (magic to newline) numpy.save writes for an array of this
 * dtype and shape, into h (npy.c): nestrt_npy_write puts it before the data
 * in a file, nestc's npy_encode in memory. Returns its length, a multiple of
 * 64 and at most NESTRT__NPY_HEADER_MAX, or -1 for a dtype or rank .npy
 * files of ours cannot hold. */
#define NESTRT__NPY_HEADER_MAX 512
NESTRT_HIDDEN int nestrt__npy_header(char h[NESTRT__NPY_HEADER_MAX], int dtype, int rank, const int64_t *shape);

#endif

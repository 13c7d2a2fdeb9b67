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

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#define NESTRT_HIDDEN __attribute__((visibility("hidden")))

/* Format into err->message (if err is not NULL); always returns -1. */
NESTRT_HIDDEN int nestrt__seterr(nestrt_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "f32[4, 8]" ("f32[]" for a scalar) into buf; lower is the dtype's name. */
NESTRT_HIDDEN void nestrt__type_text(char *buf, size_t len, const char *lower, int rank, const int64_t *shape);

/* A tensor's bytes [begin, end) in a file, and its index: the readers sort
 * them (by begin, end, index) to find overlaps. */
typedef struct nestrt__span {
	uint64_t begin, end;
	size_t idx;
} nestrt__span;
NESTRT_HIDDEN int nestrt__span_cmp(const void *a, const void *b);

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

/* ---- weights (weights.c: the .safetensors reader; wpack.c, above it:
 * packed memory, sharing, and the public calls that need both) ---- */
/* A dtype as a .safetensors file spells it. */
typedef struct nestrt__stdtype {
	const char *name;   /* as spelled in the file */
	const char *lower;  /* for messages; nestrt_dtype_name() for ours */
	int size;
	int dtype;          /* NESTRT_*, or -1 when nestc has no such tensors */
} nestrt__stdtype;

typedef struct nestrt__tensor {
	char *name;
	const nestrt__stdtype *st;
	int rank;
	int64_t shape[NESTRT_MAX_RANK];
	uint64_t begin, end;          /* in the data section */
	const unsigned char *data;    /* in the mapping */
	void *copy;                   /* aligned copy, made by bind when data is not */
	int direct;                   /* some instance reads it unpacked (pack.c's plans) */
	int released;                 /* its whole pages were given back: only its packed copies hold it */
	size_t room;                  /* bytes at data that are ours (read from a file): room to pack in place */
	int loaded;                   /* read from the file already (weights.pending) */
	int inplace;                  /* data holds its packed copy; copy, when made, the unpacked form */
	const nestrt__stdtype *stored; /* the file's type when converted to F32 at open (F16, BF16; GGUF's
	                                  F16, BF16 and block types, where it is a nestrt__qtype); else NULL */
	void *owned;                  /* the widened copy of a mapped or embedded tensor */
	/* An F16 or BF16 tensor of a .safetensors or GGUF file (stored is one of those) binds f16/bf16
	 * params as it is and f32 params widened, when first bound so (weights.c's widen_now). */
	const unsigned char *half;    /* its 16-bit bytes, while they are there (else NULL) */
	void *narrow;                 /* its 16-bit bytes again, made from the f32 ones when half went */
	int widened;                  /* data holds the f32 elements */
	int half_bound;               /* half was given to a caller: it stays */
	int transposed;               /* GGUF, named by nestc.transposed: the file holds its transpose
	                                 (shape is as declared, the file's rows its columns) */
	int64_t rotary_hd;            /* GGUF of llama.cpp: a q or k projection whose rows the file holds in
	                                 GGML's rotary order, heads of rotary_hd rows (gguf_names.c); shape
	                                 and elements are presented in Hugging Face's order */
} nestrt__tensor;

/* A packed copy (pack.c's layout), shared by every instance over the weights. */
typedef struct nestrt__wpack {
	nestrt__tensor *t;
	int64_t k, n, wide;
	int flags;
	void *data;
	size_t bytes;                 /* mapped (wpack.c's pack_alloc) when not 0, else malloc'd */
	int inplace;                  /* in its tensor's own room: not freed on its own */
	struct nestrt__wpack *next;
} nestrt__wpack;

struct nestrt_weights {
	char *path;
	void *map;                    /* the file's bytes: read into owned memory, or mapped */
	size_t mapsize;
	int mapped;                   /* NESTRT_MMAP=1: map is the file itself */
	nestrt__tensor *t;            /* sorted by name */
	size_t n;
	int refs;                     /* the caller's, and one per instance */
	pthread_mutex_t mu;           /* packs, direct and released, reading */
	nestrt__wpack *packs;
	int fd;                       /* the file, until its tensors are read (pending), else -1 */
	uint64_t data_off;            /* where its data section starts */
	int pending;                  /* tensors still to read: at the first instance (or bind, or info) */
	void *packmem;                /* embedded matrices packed by nestc, copied into huge pages */
	size_t packmemsize;
	const void *shared;           /* the embedded image these weights are of (the registry's key) */
	struct nestrt__gguf *gguf;    /* a GGUF file's metadata (gguf.c), else NULL */
	void *places;                 /* a mapped GGUF's block tensors' f32 places (gguf.c) */
	size_t placesize;
};

/* weights.c (wpack.c and the compiler's adapters use these) */
/* The file's dtype for one of ours (NULL: none). */
NESTRT_HIDDEN const nestrt__stdtype *nestrt__stdtype_of(int dtype);
NESTRT_HIDDEN nestrt__tensor *nestrt__weights_find(nestrt_weights *w, const char *name);
/* by name (util.c): the order of a reader's tensors */
NESTRT_HIDDEN int nestrt__tensor_cmp(const void *a, const void *b);
/* pread all of [off, off + len) into dst: 0, an errno, or -1 for a short file. */
NESTRT_HIDDEN int nestrt__pread_all(int fd, void *dst, size_t len, uint64_t off);
/* The message for nestrt__pread_all's answer e (not 0) about path: "file
 * shrank WHEN it was read" or the errno's; returns -1. */
NESTRT_HIDDEN int nestrt__read_error(nestrt_error *err, const char *path, int e, const char *when);
/* Anonymous memory of at least *bytes advised into huge pages (a few
 * hundred page faults for GPT-2's 475 MB instead of 120,000); *bytes
 * becomes its length, for munmap. NULL with errno set. */
NESTRT_HIDDEN void *nestrt__map_huge(size_t *bytes);
/* The system's page size (4096 if it will not say). */
NESTRT_HIDDEN size_t nestrt__page_size(void);
/* The same for memory filled once to its end (a packed copy): its last part
 * in 4 KiB pages, not a last huge page held half empty. */
NESTRT_HIDDEN void *nestrt__map_filled(size_t *bytes);
/* Read every tensor not read yet, and close the file. Under w->mu. 0, or -1
 * with err set (and still pending). */
NESTRT_HIDDEN int nestrt__weights_settle(nestrt_weights *w, nestrt_error *err);
/* Free what the reader made of w (its last reference is gone, its packed
 * copies freed already). */
NESTRT_HIDDEN void nestrt__weights_free(nestrt_weights *w);
/* A valid pointer for tensors with no elements: aligned for any dtype. */
NESTRT_HIDDEN extern const unsigned char nestrt__empty_data[64];
/* nestrt_weights_bind without its last step: data[i] may be a packed copy
 * standing for its param (the key nestrt_packed looks it up by), which
 * nestrt__weights_pack or nestrt__weights_unpacked then settles. */
NESTRT_HIDDEN int nestrt__weights_bind_keys(nestrt_weights *w, const nestrt_param *params, int nparams,
                                            const void **data, const int32_t *formats, nestrt_error *err);
/* Weights from a file are read when the first instance is created (packed
 * straight from the file where they may be): this reads whatever is not
 * read yet and closes the file. 0, or -1 with err set. */
NESTRT_HIDDEN int nestrt__weights_ready(nestrt_weights *w, nestrt_error *err);

/* gguf.c (below weights.c): the GGUF reader and its tensor types. */
/* A GGUF tensor type as ggml defines it. A type nestc holds as it is (f32,
 * i32, i64, f64; i8 and i16 unbound) has no converter and st is the
 * tensor's; the others are converted to f32 at open and st is the name
 * their tensors report. convert turns n elements (whole blocks) at src
 * into floats at dst, ggml's dequantize_row_* value for value; src and dst
 * do not overlap. */
typedef struct nestrt__qtype {
	nestrt__stdtype st;           /* ggml's name ("q4_0", "q4_K"); size: bytes per element, 0 for blocks */
	uint32_t ggml;                /* GGML_TYPE_* */
	int block;                    /* elements per block: 1, 32 or 256 */
	int bytes;                    /* bytes per block */
	void (*convert)(const unsigned char *src, float *dst, int64_t n);
} nestrt__qtype;
typedef struct nestrt__gguf nestrt__gguf;
/* The type of ggml's number, or NULL when the reader has none. */
NESTRT_HIDDEN const nestrt__qtype *nestrt__qtype_of(uint32_t ggml_type);
/* gguf_names.c: llama.cpp's tensor names of an architecture (llama, gpt2)
 * and Hugging Face's. How llama.cpp's layout differs: */
enum {
	NESTRT__NAME_ROPE_Q = 1,   /* q_proj: rows in GGML's rotary order, heads of llama.attention.head_count */
	NESTRT__NAME_ROPE_K = 2,   /* k_proj: likewise, heads of head_count_kv */
	NESTRT__NAME_TRANS = 4,    /* GPT-2's Conv1D [in, out], stored [out, in] */
};
NESTRT_HIDDEN int nestrt__gguf_arch_known(const char *arch);
/* The other name of a tensor into out (n bytes): its flags (>= 0), or -1 when
 * the architecture's table has no such name (or it does not fit). */
NESTRT_HIDDEN int nestrt__gguf_hf_name(const char *arch, const char *ggml_name, char *out, size_t n);
NESTRT_HIDDEN int nestrt__gguf_ggml_name(const char *arch, const char *hf_name, char *out, size_t n);
/* Hugging Face's row r of a rotary projection (heads of hd rows) is llama.cpp's row: */
NESTRT_HIDDEN int64_t nestrt__rotary_row(int64_t r, int64_t hd);
/* weights.c: a GGUF file's header alone (its metadata and tensor infos; no
 * tensor read), for the compiler's --consts-from. NULL with err set. */
NESTRT_HIDDEN nestrt_weights *nestrt__gguf_open_header(const char *path, nestrt_error *err);
/* An IEEE half's bits as a float (exactly). */
NESTRT_HIDDEN float nestrt__f16_to_f32(uint16_t h);
/* The first bytes of a file are GGUF's magic. */
NESTRT_HIDDEN int nestrt__gguf_magic(const unsigned char *p, size_t n);
/* Validate a GGUF file's header, read from fd (image NULL) or in image
 * (size bytes): fills w->t and w->n (sorted by name; begin and end in the
 * data section, end - begin the bytes held, f32 for converted tensors),
 * w->gguf and w->data_off; t->data points into an image. 0, or -1 with err
 * set and w unchanged. */
NESTRT_HIDDEN int nestrt__gguf_parse(nestrt_weights *w, int fd, const unsigned char *image, size_t size,
                                     nestrt_error *err);
/* Convert every tensor with a stored type not loaded yet to f32: read from
 * fd into the places t->data gives, or from image into those places (a
 * deferred image's) or copies of their own (owned); with halves, only the
 * F16/BF16 ones (kept as they are). Marks them loaded. 0, or -1 with err
 * set. A file read from fd keeps its block tensors for the first instance
 * (nestrt__weights_settle), so that a build holding them in their own
 * format packs them from the file. */
NESTRT_HIDDEN int nestrt__gguf_convert(nestrt_weights *w, int fd, const unsigned char *image, int halves,
                                       nestrt_error *err);
/* A tensor's GGML_TYPE_* when it is held in the file as blocks not converted
 * yet (else UINT32_MAX), and its rows r0..r1-1 of k elements read from the
 * file as they are (weights still pending): a build holding it in that
 * format packs them without an f32 copy (wpack.c). */
NESTRT_HIDDEN uint32_t nestrt__gguf_type(const nestrt__tensor *t);
/* The image a GGUF's tensors are in (mapped or embedded), else NULL (read from fd). */
NESTRT_HIDDEN const unsigned char *nestrt__gguf_image(const nestrt_weights *w);
NESTRT_HIDDEN int nestrt__gguf_rows(nestrt_weights *w, const nestrt__tensor *t, int64_t k, int64_t r0, int64_t r1,
                                    void *dst);
NESTRT_HIDDEN void nestrt__gguf_free(nestrt__gguf *g);

/* panel.c and wpack.c (above weights.c; pack.c and model.c use these) */
/* A request for a packed copy (pack.c gathers them from the plans). */
typedef struct nestrt__packreq {
	int param;                 /* index into the model's params */
	int64_t k, n, wide;
	int flags;
	const void *data;          /* filled by nestrt__weights_pack */
} nestrt__packreq;
/* The panel layout: bytes of a copy, panels p0..p1-1 of src into dst, and
 * back (the k*n elements in their own order). */
NESTRT_HIDDEN size_t nestrt__pack_bytes(int64_t k, int64_t n, int64_t wide, int flags);
/* Where quant byte j of column c of a block goes among the block's quants,
 * and its value there: the plain layout's [j][wide], or NESTRT_PACK_DOT's
 * [j / 4][wide][4] with q8_0's bytes offset to unsigned (nestrt.h). */
static inline size_t nestrt__qbyte_at(int64_t j, int64_t c, int64_t wide, int flags)
{
	return flags & NESTRT_PACK_DOT ? (size_t)(((j >> 2) * wide + c) * 4 + (j & 3)) : (size_t)(j * wide + c);
}
static inline unsigned char nestrt__qbyte(unsigned char b, int flags)
{
	return (flags & NESTRT_PACK_DOT) && (flags >> NESTRT_PACK_FMT_SHIFT) == NESTRT_FMT_Q8_0 ? (unsigned char)(b ^ 0x80) : b;
}
NESTRT_HIDDEN void nestrt__pack_panels(void *dst, const void *src, int64_t k, int64_t n, int64_t wide, int flags,
                                       int64_t p0, int64_t p1);
NESTRT_HIDDEN void nestrt__unpack(void *dst, const void *packed, int64_t k, int64_t n, int64_t wide, int flags);
/* GGUF block b of format fmt as column c of a panel's block row `row`. */
NESTRT_HIDDEN void nestrt__block_to_panel(int fmt, const unsigned char *b, unsigned char *row, int64_t c, int64_t wide,
                                          int flags);
/* The weights' side: find or make the copy of each request (param data[i]
 * bound from w), shared by every instance over w; note which params are read
 * unpacked (direct, nparams flags), and drop the unpacked form of weights
 * that no instance reads unpacked. 0, or -1 with err set. */
NESTRT_HIDDEN int nestrt__weights_pack(nestrt_weights *w, const void **data, nestrt__packreq *req, int nreq,
                                       const unsigned char *direct, int nparams, nestrt_error *err);
/* Params whose tensor holds only a packed copy: their elements back, in a
 * copy, and data[i] pointing to it. 0, or -1 with err set. */
/* An F16 / BF16 tensor's f32 form at t->data, made now if it is not yet (weights.c).
 * Under w->mu. */
NESTRT_HIDDEN int nestrt__weights_widen(nestrt_weights *w, nestrt__tensor *t, nestrt_error *err);
/* t's elements in *elems, restored from a packed copy if they went (wpack.c): -1 out of
 * memory, -2 held only in a format now. Under w->mu. */
NESTRT_HIDDEN int nestrt__weights_elements(nestrt_weights *w, nestrt__tensor *t, const void **elems);
/* An F16 / BF16 tensor of a .safetensors or GGUF file (weights.c)? */
NESTRT_HIDDEN int nestrt__is_half(const nestrt__tensor *t);
/* Its 16-bit bytes, 2-byte aligned (elems: its f32 elements, needed when they are
 * all it has). Under w->mu. */
NESTRT_HIDDEN const void *nestrt__half_data(nestrt_weights *w, nestrt__tensor *t, const void *elems, const char *shown,
                                            nestrt_error *err);
/* The aligned pointer compiled code gets for t, or NULL (err set). */
NESTRT_HIDDEN const void *nestrt__tensor_data(nestrt_weights *w, nestrt__tensor *t, const char *shown,
                                              nestrt_error *err);
NESTRT_HIDDEN int nestrt__weights_unpacked(nestrt_weights *w, const void **data, int nparams, nestrt_error *err);
/* prepacked.c: embedded weights packed ahead of time (nestc build --embed-weights): each
 * becomes a tensor of w held only in that packed form, bound like any
 * other (params gives its dtype and shape); nothing packs it again. */
NESTRT_HIDDEN int nestrt__weights_add_packed(nestrt_weights *w, const nestrt_param *params, int nparams,
                                             const nestrt_prepacked *packs, int npacks, nestrt_error *err);
/* The weights of an embedded image (and its packed matrices), shared by
 * every instance over the same image while one lives; a reference the
 * caller closes. NULL with err set. */
NESTRT_HIDDEN nestrt_weights *nestrt__weights_embedded(const void *image, size_t size, const char *name,
                                                       const nestrt_param *params, int nparams,
                                                       const nestrt_prepacked *packs, int npacks, nestrt_error *err);
/* Instances hold a reference to their weights (wpack.c). */
NESTRT_HIDDEN void nestrt__weights_ref(nestrt_weights *w);

/* ---- pre-packing at creation (pack.c) ---- */
/* Follow the model's pack plans and make its copies; sets the context's
 * lookup table. 0, or -1 with err set. */
NESTRT_HIDDEN int nestrt__packs_make(const nestrt_model_desc *d, nestrt_ctx *ctx, nestrt_weights *w, nestrt_error *err);
/* The plans' requests alone (deduplicated; data unset), and per param
 * whether it is read unpacked (gathers no request serves count as read):
 * what packs_make follows, and what nestc build --embed-weights packs
 * ahead of time. Both malloc'd (NULL when none); 0, -1 out of memory, or
 * -2 when a param in a format (desc->formats) is read in a way no copy in
 * its format serves (*bad_param says which). */
NESTRT_HIDDEN int nestrt__packs_requests(const nestrt_model_desc *d, nestrt__packreq **req, int *nreq,
                                         unsigned char **direct, int *bad_param);
/* The instance's bound params (dispatch.c). */
NESTRT_HIDDEN void nestrt__ctx_set_params(nestrt_ctx *ctx, const nestrt_param *params, int nparams);
NESTRT_HIDDEN void nestrt__packs_free(nestrt__packs *p);

/* ---- weight formats (quant.c: nestrt_quantize and its kin) ---- */
/* nestrt_quantize from 16-bit elements: src holds f16 bits, or bf16 bits when
 * src_bf16 (a uint16_t array, so 2-byte aligned; a file's little-endian bytes
 * as they are on the little-endian hosts the runtime runs on); the same bytes
 * and errors as widening them to f32 and calling nestrt_quantize, without an
 * f32 copy (512 elements at a time through a buffer on the stack). */
/* Sub-block j's 6-bit scale and min out of a q4_k block's 12 bytes at q
 * (ggml's get_scale_min_k4). */
NESTRT_HIDDEN void nestrt__scale_min_k4(int j, const unsigned char *q, int *sc, int *m);
NESTRT_HIDDEN int nestrt__quantize_half(int fmt, const uint16_t *src, int src_bf16, int64_t n, void *dst,
                                        nestrt_error *err);
/* f32 to f16 and to bf16 bits, round to nearest, ties to even (NaNs stay NaNs),
 * as the compiler's casts (src/dtype.c) bit for bit. */
NESTRT_HIDDEN uint16_t nestrt__f32_to_f16(float f);
NESTRT_HIDDEN uint16_t nestrt__f32_to_bf16(float f);

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

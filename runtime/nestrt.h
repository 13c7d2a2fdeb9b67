/* nestrt.h - the runtime library of code compiled by nestc (libnestrt).
 *
 * Dependency-free beyond libc, libm and pthreads. Link with
 *     cc prog.o `pkg-config --libs nestrt`     (-lnestrt -lm -lpthread)
 *
 * Every function that can fail takes a nestrt_error and fills its message with
 * a one-line, NUL-terminated reason (no trailing newline). Messages about a file
 * start with its path: "gpt2.safetensors: header length 4096 exceeds file size 120".
 *
 * Thread safety: the entry points of one model instance may run in any
 * number of threads at once (each call has its own workspace and error).
 * nestrt_call, nestrt_fail and nestrt_gather_oob may be called from several
 * threads at once on one context (counters are updated atomically; the first
 * failure wins). Opening, binding and closing weights and creating and
 * freeing contexts are not to be run concurrently on one object. */
#ifndef NESTRT_H
#define NESTRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. Sizes: bool 1 byte (0 or 1), i32 4, i64 8, f32 4, f64 8,
 * f16 2 (IEEE binary16 bits), bf16 2 (bfloat16 bits: the upper half of a
 * binary32), i8 1, u8 1, i16 2, u16 2. */
enum { NESTRT_BOOL = 0, NESTRT_I32 = 1, NESTRT_I64 = 2, NESTRT_F32 = 3, NESTRT_F64 = 4, NESTRT_F16 = 5,
       NESTRT_BF16 = 6, NESTRT_I8 = 7, NESTRT_U8 = 8, NESTRT_I16 = 9, NESTRT_U16 = 10 };
#define NESTRT_NDTYPES 11
#define NESTRT_MAX_RANK 8

typedef struct nestrt_error { char message[512]; } nestrt_error;   /* NUL-terminated reason */

/* ------------------------------------------------------------ weights */

typedef struct nestrt_weights nestrt_weights;

/* Read a .safetensors or a GGUF file (below) into owned memory (NESTRT_MMAP=1: map it; the file
 * must then stay unchanged) and validate all of it before anything points into
 * it; a path that is not a regular file (a FIFO) is refused without blocking: the 8-byte little-endian header length, the header
 * (strict JSON: UTF-8, no duplicate keys, nesting at most 64 deep, only spaces
 * or other JSON whitespace after the object), each entry's dtype, shape and
 * data_offsets (in range, matching dtype x shape, no overlaps). A malformed
 * file is rejected with the reason; nothing is ever read out of bounds.
 * An empty (0-byte) file, a file whose header is "{}", and path == NULL all
 * give empty weights: for models without params. NULL on error. */
nestrt_weights *nestrt_weights_open(const char *path, nestrt_error *err);
/* A file that starts with "GGUF" is llama.cpp's format, versions 2 and 3:
 * the header (counts, keys, strings, arrays, general.alignment, each
 * tensor's name, dims, type and offset) is checked as strictly, with the
 * item and the reason in the message ("m.gguf: tensor 3 'blk.0.attn_q.weight':
 * offset 128 + 4096 bytes passes the end of the data (2000 bytes)"). A
 * tensor with ne = [K, N] (ne[0] varying fastest) is the row-major [N, K].
 * Types F32, I32, I64 and F64 are held as they are (I8, I16 listed with
 * dtype -1); F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K
 * are converted to F32 as ggml dequantizes them, value for value, when the
 * file is opened (mapped: into memory of their own); a block type's ne[0]
 * must be a multiple of its block (32, or 256 for the K types). */
void nestrt_weights_close(nestrt_weights *w);   /* NULL is fine; data from bind dies here */
/* The same checks on a safetensors or GGUF image in memory (weights embedded by
 * `nestc build --embed-weights`); the image must outlive the weights. */
nestrt_weights *nestrt_weights_from_memory(const void *image, size_t size, const char *name, nestrt_error *err);

/* A parameter a model binds: its name, NESTRT_* dtype and shape. */
typedef struct nestrt_param { const char *name; int dtype; int rank; int64_t shape[NESTRT_MAX_RANK]; } nestrt_param;

/* Bind every param of a model: checks each name, dtype and shape; fills data[i].
 * On error returns -1 with a message like
 *     "gpt2.safetensors: h.3.attn.c_attn.weight: expected f32[768, 2304], file has f32[768, 768]"
 *     "gpt2.safetensors: missing parameter 'wte.weight' (f32[50257, 768])"
 * (the first problem in param-table order). Unused tensors in the file are allowed.
 *
 * Alignment: every data[i] is aligned to its element size. Tensors in the
 * mapping are used in place when they are so aligned (a safetensors writer pads
 * the header to 8 bytes for this); otherwise bind copies the tensor into an
 * aligned heap buffer owned by w (once, however often it is bound). Nothing
 * beyond the element size is promised, so compiled code must use unaligned
 * (align = element size) vector loads. Bool data is always bytes 0 and 1: a
 * tensor holding other bytes (true, as in numpy) is normalized in such a copy.
 * A zero-element tensor gets a valid non-NULL pointer, aligned to 64.
 * w may be NULL when nparams == 0. Returns 0 on success. */
int nestrt_weights_bind(nestrt_weights *w, const nestrt_param *params, int nparams, const void **data, nestrt_error *err);

/* Added: inspection. Tensors are in name order (strcmp). info->dtype is -1 for
 * a dtype nestc has no tensors of (U8, I16...); F16 and BF16 tensors (and
 * GGUF's block types) are converted to F32 at open and described (data,
 * nbytes) as such. *file_dtype (if not NULL) gets the file's spelling ("F32",
 * "BF16"; GGUF's as ggml names them: "f32", "q4_0", "q6_K"). data is the raw,
 * possibly unaligned, pointer into the mapping. Returns -1 if i is out of
 * range. */
int nestrt_weights_count(const nestrt_weights *w);
int nestrt_weights_info(const nestrt_weights *w, int i, nestrt_param *info, const char **file_dtype,
                        const void **data, size_t *nbytes);
const char *nestrt_weights_path(const nestrt_weights *w);

/* GGUF metadata (a .safetensors file has none). Value types, as GGUF
 * numbers them: */
enum {
	NESTRT_META_U8 = 0, NESTRT_META_I8 = 1, NESTRT_META_U16 = 2, NESTRT_META_I16 = 3, NESTRT_META_U32 = 4,
	NESTRT_META_I32 = 5, NESTRT_META_F32 = 6, NESTRT_META_BOOL = 7, NESTRT_META_STRING = 8,
	NESTRT_META_ARRAY = 9, NESTRT_META_U64 = 10, NESTRT_META_I64 = 11, NESTRT_META_F64 = 12
};
/* The number of keys, and key i in the file's order (NULL out of range). */
int nestrt_weights_meta_count(const nestrt_weights *w);
const char *nestrt_weights_meta_key(const nestrt_weights *w, int i);
/* The type of key's value, or -1 when there is no such key. For an array,
 * *elem_type (if not NULL) gets its elements' type and *count their number;
 * otherwise -1 and 1. */
int nestrt_weights_meta_type(const nestrt_weights *w, const char *key, int *elem_type, uint64_t *count);
/* "u8" ... "f64", "string", "array"; NULL for another number. */
const char *nestrt_meta_type_name(int type);
/* A value: key's own (i = 0), or element i of its array. _int takes every
 * integer type and bool (0 or 1); a u64 above INT64_MAX is an error. _float
 * takes f32 and f64 (as their values), and the integer types (converted).
 * _string gives the bytes in the file and their length: not NUL-terminated
 * (they may hold NULs), valid while w is open. 0, or -1 with a message like
 *     "m.gguf: metadata 'llama.block_count' is of type string, not an integer"
 *     "m.gguf: no metadata 'llama.rope.freq_base'"
 * An array's elements are read one at a time; those of an array of arrays
 * are not reachable (its type and count are). */
int nestrt_weights_meta_int(const nestrt_weights *w, const char *key, uint64_t i, int64_t *v, nestrt_error *err);
int nestrt_weights_meta_float(const nestrt_weights *w, const char *key, uint64_t i, double *v, nestrt_error *err);
int nestrt_weights_meta_string(const nestrt_weights *w, const char *key, uint64_t i, const char **s, size_t *len,
                               nestrt_error *err);

/* ------------------------------------------------------------ tokenizer */

/* The tokenizer of a GGUF file's metadata (tokenize.c), as llama.cpp's
 * (release v0.4.0) tokenizes and detokenizes; see nestrt(3):
 *   tokenizer.ggml.model "llama": SentencePiece-style BPE over
 *     tokenizer.ggml.scores, spaces as U+2581, a space put before the text
 *     (tokenizer.ggml.add_space_prefix, default true), byte fallback to the
 *     <0xXX> tokens;
 *   "gpt2": byte-level BPE over tokenizer.ggml.merges, after the split of
 *     tokenizer.ggml.pre: GPT-2's ("gpt-2" and llama.cpp's aliases of it),
 *     LLaMA-3's ("llama-bpe", "llama3", ...) or llama.cpp's "default" (also
 *     when the key is absent).
 * tokenizer.ggml.tokens is required, tokenizer.ggml.token_type optional
 * (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; all
 * normal without it). BOS and EOS ids from tokenizer.ggml.bos_token_id and
 * eos_token_id (llama.cpp's defaults 1 and 2, or 11, when absent),
 * tokenizer.ggml.add_bos_token (default: true for llama, false for gpt2,
 * true for LLaMA-3's pre-tokenizer) and add_eos_token (false).
 * Malformed metadata is refused with the file, the key and the reason
 * ("v.gguf: metadata 'tokenizer.ggml.scores' has 10 elements for 12 tokens"):
 * a missing or mistyped array, lengths that disagree, ids outside the
 * vocabulary, token types outside 0-6, a byte token that is not <0xXX>,
 * tokens that are not UTF-8 or hold a NUL, a repeated token, a merge without
 * its space, an unsupported model or pre-tokenizer. The tokenizer copies
 * what it needs: the weights may be closed. nestrt_tokenizer_open reads the
 * file's metadata alone (its tensors are neither read nor checked; a file
 * whose keys it cannot cut out so goes through nestrt_weights_open, whose
 * message then says what is wrong). A tokenizer is read-only once made: any
 * number of threads may use one at once. */
typedef struct nestrt_tokenizer nestrt_tokenizer;
nestrt_tokenizer *nestrt_tokenizer_open(const char *gguf_path, nestrt_error *err);
nestrt_tokenizer *nestrt_tokenizer_from_weights(const nestrt_weights *w, nestrt_error *err);
void nestrt_tokenizer_free(nestrt_tokenizer *t);   /* NULL is fine */
int nestrt_tokenizer_n_vocab(const nestrt_tokenizer *t);
int32_t nestrt_tokenizer_bos(const nestrt_tokenizer *t);   /* -1: none */
int32_t nestrt_tokenizer_eos(const nestrt_tokenizer *t);   /* -1: none */
/* Token id's text as the file has it (not NUL-terminated), its length and its
 * type (0-6, above); NULL when id is outside the vocabulary. */
const char *nestrt_tokenizer_token(const nestrt_tokenizer *t, int32_t id, size_t *len, int *type);

/* Tokenize text[0..len): ADD_SPECIAL puts BOS first (and EOS last) when the
 * file says so; PARSE_SPECIAL takes control and unknown tokens' texts in the
 * input as those tokens ("<s>"; user-defined ones always are). Writes at
 * most cap ids and returns how many there are (more than cap: call again
 * with that room), or -1 with err set. Invalid UTF-8 in text is not an
 * error: llama splits bytes as llama.cpp does (its byte tokens); gpt2 splits
 * words as llama.cpp does (an invalid byte as U+FFFD) but keeps the bytes,
 * so that decoding gives them back. */
enum { NESTRT_TOKENIZE_ADD_SPECIAL = 1, NESTRT_TOKENIZE_PARSE_SPECIAL = 2 };
int nestrt_tokenize(const nestrt_tokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int cap,
                    nestrt_error *err);
/* Token id's bytes (llama.cpp's token_to_piece): U+2581 as a space, a byte
 * token as its byte, gpt2's code points as their bytes; control and unknown
 * tokens give nothing unless flags has NESTRT_DETOKENIZE_SPECIAL (then
 * their text), unused ones nothing. Writes at most cap bytes (no NUL) and
 * returns the piece's length, or -1 (id outside the vocabulary). */
enum { NESTRT_DETOKENIZE_SPECIAL = 1, NESTRT_DETOKENIZE_KEEP_SPACE = 2 };
int nestrt_token_to_piece(const nestrt_tokenizer *t, int32_t id, int flags, char *buf, int cap, nestrt_error *err);
/* The text of n ids: their pieces, less the space a llama tokenizer puts
 * before text at the start and after each special token (unless
 * NESTRT_DETOKENIZE_KEEP_SPACE), so that detokenizing what nestrt_tokenize
 * made gives the text back (with NESTRT_DETOKENIZE_SPECIAL when it parsed
 * special tokens). Unlike llama.cpp's detokenize, no "clean-up" of spaces
 * before punctuation. Writes at most cap bytes (no NUL) and returns the
 * text's length (more than cap: the bytes written are unspecified; call
 * again with that room), or -1 with err set (an id outside the vocabulary). */
int nestrt_detokenize(const nestrt_tokenizer *t, const int32_t *ids, int n, int flags, char *buf, int cap,
                      nestrt_error *err);

/* ------------------------------------------------------------ dispatch */

/* Dispatch: every region call of compiled code runs through nestrt_call. */
typedef struct nestrt_ctx nestrt_ctx;
typedef int (*nestrt_fn)(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws);
typedef struct nestrt_slot { const char *name; nestrt_fn fn; } nestrt_slot;   /* name like "block.0" */

/* Compiled code reads these fields at fixed offsets; on LP64 targets:
 * params 0, slots 8, nslots 16, calls 24, nanos 32, profile 40, model 48,
 * ws 56, ws_size 64, err_code 72, err_message 76; sizeof 336 (checked by
 * static assertions in dispatch.c). The context is allocated by
 * nestrt_ctx_new; its private state lives after this public part. */
struct nestrt_ctx {
	const void **params;        /* bound param data, in param-table order */
	const nestrt_slot *slots;   /* the model's dispatch table */
	int nslots;
	uint64_t *calls;            /* per slot */
	uint64_t *nanos;            /* per slot, when profiling */
	int profile;                /* NESTRT_PROFILE: 1, or 2 with kernels */
	const char *model;          /* model name for the profile output */
	char *ws;                   /* workspace, allocated once (64-byte aligned) */
	size_t ws_size;
	int err_code;               /* set by compiled code on a run-time error (e.g. gather index) */
	char err_message[256];
};

/* Allocate a context: params (nparams entries, NULL until bound), per-slot
 * counters (calls and nanos, zeroed, always allocated) and the workspace of
 * ws_size bytes (zeroed, 64-byte aligned, non-NULL even when ws_size is 0).
 * slots and model are not copied and must outlive the context (compiled code
 * passes static tables). Profiling is on when the environment variable
 * NESTRT_PROFILE is "1" at this call; "2" adds the kernels of every variant. NULL on error (bad arguments, no memory). */
nestrt_ctx *nestrt_ctx_new(const char *model, const nestrt_slot *slots, int nslots, int nparams, size_t ws_size, nestrt_error *err);

/* Free the context; prints the profile (if on). A profiled context never freed
 * prints its profile when the program exits (atexit). NULL is fine.
 *
 * The profile, to stderr, in one write:
 *     nestrt profile: MODEL
 *       block.0          12 calls     3.412 ms
 *       ...one line per slot, in table order...
 *       total            12 calls     3.412 ms
 * Names are padded to at least 16 columns, counts and times right-aligned.
 * A slot's time includes the regions it calls itself; the total counts all
 * calls and the time of outermost calls only (nothing twice). */
void nestrt_ctx_free(nestrt_ctx *ctx);

/* NESTRT_PROFILE=2: the kernels inside variants and entry points. Compiled
 * code keeps one static descriptor per kernel it emits and, when
 * ctx->profile is 2, brackets the kernel with these calls; time and calls add
 * up per descriptor (atomically) in the context, and the profile lists them
 * under their variant's line, slowest first:
 *     block.0          12 calls     3.412 ms
 *       matmul f32[128, 3072]  m.nest:12:9  1.234 ms  95.1 GFLOP/s  (12 calls)
 *       kernels 3.101 ms of 3.412 ms (90.9%)
 * Kernels fused into others (inlined elementwise ops, epilogues) have no
 * descriptor of their own. */
typedef struct nestrt_kernel_desc {
	const char *op;      /* the op as in nestc --dump=ir: "matmul" */
	const char *shape;   /* the result's type: "f32[128, 3072]" */
	const char *where;   /* "m.nest:12:9", or "" */
	const char *owner;   /* the entry point's name when slot is -1 */
	int64_t slot;        /* the variant's dispatch slot; -1 in an entry point */
	double flops;        /* per call; 0 when unknown (run-time shapes) */
} nestrt_kernel_desc;
/* The start time to hand to nestrt_kprof_end. */
uint64_t nestrt_kprof_begin(nestrt_ctx *ctx);
void nestrt_kprof_end(nestrt_ctx *ctx, const nestrt_kernel_desc *kernel, uint64_t t0);
/* The same for a kernel that read a weight: its bytes this call, in the
 * format the instance holds it in (NESTRT_FMT_*), for the profile's GB/s. */
void nestrt_kprof_end_read(nestrt_ctx *ctx, const nestrt_kernel_desc *kernel, uint64_t t0, int64_t bytes, int format);

/* Call slot `slot`: counts the call (always), times it (when profiling),
 * returns what the function returns. An out-of-range slot or a NULL function
 * fails through nestrt_fail. */
int nestrt_call(nestrt_ctx *ctx, int slot, void **bufs, const int64_t *dims, char *ws);

/* Called by compiled code on a run-time error; returns -1 so code can `return nestrt_fail(...)`.
 * Sets err_code to NESTRT_ERR_RUNTIME and err_message (truncated to 255 bytes)
 * unless an error is already recorded: the first error wins. */
int nestrt_fail(nestrt_ctx *ctx, const char *message);
int nestrt_gather_oob(nestrt_ctx *ctx, int64_t index, int64_t limit);  /* message "gather index 300 out of range [0, 256)" */
/* Added: the same message after the indexing's place in the source, WHERE
 * ("m.nest:7:10: gather index 300 out of range [0, 256)"); compiled code calls this. */
int nestrt_gather_oob_at(nestrt_ctx *ctx, int64_t index, int64_t limit, const char *where);
#define NESTRT_ERR_RUNTIME 1
/* Added: forget a recorded error (err_code 0, empty message). */
void nestrt_clear_error(nestrt_ctx *ctx);

/* ------------------------------------------------------------ .npy */

/* .npy helpers (v1-v3 read, little-endian, C order; dtypes f4 f8 f2 i4 i8 i2 u2 i1 u1 b1; v1 write via temp
 * file + rename). bf16 has no NumPy dtype: it is written as its bits, '<u2', and a '<u2' file is read as
 * NESTRT_U16 (a bf16 input takes it as bits). */
/* Read: shape must have NESTRT_MAX_RANK entries; *data is malloc'd (non-NULL even
 * for zero elements) and freed by the caller with free(). Pipes and other
 * unsized files (/dev/stdin) are read too. Returns 0, or -1 with err set. */
int nestrt_npy_read(const char *path, int *dtype, int *rank, int64_t *shape, void **data, nestrt_error *err); /* data malloc'd */
/* Write: the header byte for byte as numpy.save writes it. The file is written
 * to PATH.tmp.PID.N beside it and renamed over PATH, so readers never see half
 * a file; an existing non-regular PATH (/dev/stdout, a FIFO) is written
 * directly. data may be NULL for zero elements. Returns 0, or -1 with err set. */
int nestrt_npy_write(const char *path, int dtype, int rank, const int64_t *shape, const void *data, nestrt_error *err);

/* "bool" "i32" "i64" "f32" "f64"; "?" for anything else. */
const char *nestrt_dtype_name(int dtype);
/* Added: bytes per element, 0 for an unknown dtype. */
size_t nestrt_dtype_size(int dtype);


/* ---- weight formats (nestc build --weights-format) ---- */
/* How a build holds a weight: f32; bf16 or f16 (rounded to nearest, ties to
 * even); or GGUF's blocks of 32 elements, each as ggml's reference quantizers
 * make it and little-endian as in a GGUF file:
 *   q8_0, 34 bytes: uint16 f16 d, int8 q[32]. d = max|x| / 127, id = d ? 1/d : 0
 *     (from the float d, before it is rounded to f16), q[j] = roundf(x[j] * id);
 *     x[j] means d * q[j].
 *   q4_0, 18 bytes: uint16 f16 d, uint8 qs[16]. m = the first element of largest
 *     magnitude, sign kept; d = m / -8, id = d ? 1/d : 0; q = min(15, (int8)(x * id
 *     + 8.5)), element j in the low nibble of qs[j], element j + 16 in its high
 *     nibble; x means d * (q - 8).
 * (Where 1/d overflows, |d| < 2^-128 and an f16 d of 0, every q is 0.)
 * The k-quants, super-blocks of 256 as ggml's block_q4_K and block_q6_K, made as
 * ggml's quantize_row_q4_K_ref and quantize_row_q6_K_ref make them (no importance
 * matrix):
 *   q4_k, 144 bytes: f16 d, f16 dmin, 12 bytes of eight 6-bit scales sc and mins m
 *     (ggml's get_scale_min_k4), 128 bytes of nibbles: byte 32c + l holds element
 *     64c + l (low nibble) and 64c + 32 + l (high); element i means
 *     d * sc[i / 32] * q - dmin * m[i / 32].
 *   q6_k, 210 bytes: ql[128] low nibbles, qh[64] 2-bit highs, int8 sc[16], f16 d;
 *     element i means d * sc[i / 16] * (q - 32) (ggml's dequantize_row_q6_K). */
enum { NESTRT_FMT_F32 = 0, NESTRT_FMT_BF16 = 1, NESTRT_FMT_F16 = 2, NESTRT_FMT_Q8_0 = 3, NESTRT_FMT_Q4_0 = 4,
       NESTRT_FMT_Q4_K = 5, NESTRT_FMT_Q6_K = 6 };
/* "f32" "bf16" "f16" "q8_0" "q4_0" "q4_k" "q6_k"; NULL when unknown */
const char *nestrt_format_name(int fmt);
int nestrt_format_parse(const char *name);   /* the inverse; -1 when unknown (or NULL) */
int nestrt_format_block(int fmt);            /* elements per block: 1, 1, 1, 32, 32, 256, 256 (0 unknown) */
int nestrt_format_block_bytes(int fmt);      /* bytes per block: 4, 2, 2, 34, 18, 144, 210 (0 unknown) */
/* Bytes of n elements; 0 when n < 0, not a multiple of the block, or overflowing
 * (and for an unknown format). */
size_t nestrt_format_bytes(int fmt, int64_t n);
/* n f32 elements into dst (nestrt_format_bytes(fmt, n) bytes) in fmt. 0, or -1 with
 * err->message saying why: an unknown format, n < 0, n not a multiple of the block
 * ("100 elements is not a multiple of q8_0's block of 32"), a NaN or an infinity
 * ("element 7 is -inf: q4_0 weights must be finite numbers"; the first one), a
 * finite value that rounds to inf in f16 (|x| >= 65520) or bf16 (|x| >=
 * 3.39617753e38) ("element 3 is 70000, beyond f16's range (|x| >= 65520 rounds to
 * inf)"). A q8_0 or q4_0 block's d may round to inf (max |x| >= 127 * 65520 for
 * q8_0, 8 * 65520 for q4_0) and is stored so, as ggml does. err may be NULL. dst is
 * unspecified on error. src and dst do not overlap. Both calls keep no state:
 * threads may convert disjoint ranges of whole blocks at once. */
int nestrt_quantize(int fmt, const float *src, int64_t n, void *dst, nestrt_error *err);
/* The inverse, exactly: each weight as the format means it (bf16 and f16 widened;
 * q8_0: f16 d times q; q4_0: d * (q - 8)). n must be a multiple of the block;
 * nothing is written when it is not (or fmt is unknown). */
void nestrt_dequantize(int fmt, const void *src, int64_t n, float *dst);


/* ---- parallel loops (pool.c) ----
 * Compiled code splits its large loops into n tasks run by a thread pool of
 * NESTRT_NUM_THREADS threads (default: the available cores), the calling
 * thread included; fn(env, begin, end) runs tasks [begin, end). */
typedef void (*nestrt_task)(void *env, int64_t begin, int64_t end);
void nestrt_parallel_for(int64_t n, nestrt_task fn, void *env);
int nestrt_num_threads(void);

/* ---- pre-packed weights (pack.c) ----
 * A compiled matrix product whose right operand B (k x n, or n x k when
 * NESTRT_PACK_TRANS) is one of the context's bound params asks for it in the
 * kernels' layout: panels of `wide` columns, each k rows of `wide` contiguous
 * elements, zero past column n. The copies are made when the instance is
 * created (from the desc's pack plans), shared by the instances over the same
 * weights and kept with them. NULL when there is no such copy (b is not the
 * start of a bound param the plans ask for in this shape, or the environment
 * variable NESTRT_PREPACK was "0"); the caller then packs as it goes. */
enum { NESTRT_PACK_TRANS = 1, NESTRT_PACK_F64 = 2, NESTRT_PACK_WINO = 4, NESTRT_PACK_WINO2 = 8 };
/* NESTRT_PACK_WINO (f32): b is a 3x3 convolution's weights [n, c, 3, 3]
 * and the copy holds their Winograd F(4x4, 3x3) transforms G g G^T as a
 * k x n matrix of k = 36 c rows, row p*c + i the 36 points' p-th of input
 * channel i; NESTRT_PACK_WINO2 the same for F(2x2, 3x3), k = 16 c. */
const void *nestrt_packed(nestrt_ctx *ctx, const void *b, int64_t k, int64_t n, int64_t wide, int flags);
/* A packed copy that holds all of the rows x cols matrix b (a bound param),
 * for a compiled gather of its rows: made for b as a right operand
 * (k = rows, n = cols) or transposed (NESTRT_PACK_TRANS, n = rows,
 * k = cols); flags is NESTRT_PACK_F64 or 0. Sets layout[0] to its `wide`
 * and layout[1] to 1 when transposed, else 0. NULL when there is none: b is
 * then read as it is. A weight whose every reader is a compiled matmul or
 * gather is held only packed (its unpacked pages are given back). */
const void *nestrt_packed_rows(nestrt_ctx *ctx, const void *b, int64_t rows, int64_t cols, int flags, int64_t *layout);
/* Weights in a format (nestc build --weights-format; the formats are
 * NESTRT_FMT_*): the copies of a formatted param hold its format in the
 * same panels, each panel's elements in it: bf16 and f16 as k rows of `wide`
 * 16-bit elements; q8_0 and q4_0 per block of 32 rows, the block's `wide`
 * f16 scales, then its quants, 32 rows of `wide` int8 (q8_0) or 16 rows of
 * `wide` bytes whose low nibble is row j and high nibble row j + 16 of the
 * block (q4_0). A copy's flags carry its format at NESTRT_PACK_FMT_SHIFT.
 * These are nestrt_packed and nestrt_packed_rows that also find such copies
 * and set *format to theirs (NESTRT_FMT_F32, 0, for a plain one). */
enum { NESTRT_PACK_FMT_SHIFT = 8 };
/* NESTRT_PACK_DOT: q8_0, q4_0 and q4_k copies for integer dot products (nestc
 * build --activations=int8): a block's quants (q4_k: its bytes after d and
 * dmin, scales included) are laid out [j / 4][wide][4], quant byte j of
 * column c at ((j / 4) * wide + c) * 4 + j % 4, so that a column's four
 * consecutive bytes are the four k a dot-product lane takes; q8_0's bytes are
 * stored plus 128 (unsigned). Such copies are asked for by a build's
 * weight formats (nestrt_model_desc's formats: NESTRT_FMT_DOT_BIT) and found
 * by the calls below with flags that leave the bit out. */
enum { NESTRT_PACK_DOT = 16, NESTRT_FMT_DOT_BIT = 1 << 16 };
const void *nestrt_packed_format(nestrt_ctx *ctx, const void *b, int64_t k, int64_t n, int64_t wide, int flags,
                                 int *format);
const void *nestrt_packed_rows_format(nestrt_ctx *ctx, const void *b, int64_t rows, int64_t cols, int flags,
                                      int64_t *layout, int *format);

/* ---- compiled models ----
 * nestc emits one descriptor per model; NAME_new, NAME_free and the entry
 * points in the generated header are thin wrappers around these. */
typedef struct nestrt_model_desc {
	const char *name;            /* the model's C prefix */
	const nestrt_param *params;  /* the param table, in the order of ctx->params */
	int nparams;
	const nestrt_slot *slots;    /* the dispatch table: one slot per unique region variant */
	int nslots;
	int64_t ws_size;             /* workspace bytes the entry points need without the variants */
	const char *version;         /* nestc's version */
	const int64_t *const *slot_ws; /* per slot: the workspace its variant needs (in its own object) */
	int64_t ws_own;              /* the entry points' own storage, before a variant's */
	/* Pack plans: what compiled matmuls will ask nestrt_packed for, so that
	 * weights are packed when the instance is created. Each is a count, then
	 * records of six int64 {kind, src, ...} (src >= 0: the function's input,
	 * < 0: param -(src + 1)): kind 1 {k, n, wide, flags} a pre-packed matmul
	 * operand, 2 {slot, arg, site} passed as argument arg of the variant in
	 * slot at call site site, 3 read in some other way, 4 {rows, cols,
	 * flags} rows gathered (read through nestrt_packed_rows). NULL: none. */
	const int64_t *const *slot_packs; /* per slot (in the variant's object) */
	const int64_t *packs;        /* the entry points' own */
	/* Per param: its weight format (NESTRT_FMT_*) | the axis its blocks
	 * run along (the one its matmuls reduce) << 8; NULL: all f32. */
	const int32_t *formats;
} nestrt_model_desc;
/* The workspace a model instance allocates: max(ws_size, ws_own + the largest slot_ws). */
size_t nestrt_model_workspace_size(const nestrt_model_desc *d);
typedef struct nestrt_model nestrt_model;
/* Binds and checks every param; NULL with err->message on error. w may be NULL
 * (or an empty file) for a model without params. */
nestrt_model *nestrt_model_new(const nestrt_model_desc *d, nestrt_weights *w, nestrt_error *err);
/* The same with weights embedded in the program (nestc build --embed-weights). */
nestrt_model *nestrt_model_new_embedded(const nestrt_model_desc *d, const void *image, size_t size, nestrt_error *err);
/* Embedded weights whose matrices nestc packed when it built the program:
 * packs[i] is param `name` in the panel layout of nestrt_packed (k, n,
 * wide, flags), and image holds the other params. Nothing is packed when
 * the instance is created; a param also read unpacked is unpacked into a
 * copy of its own then. */
typedef struct nestrt_prepacked {
	const char *name;
	int64_t k, n, wide;
	int flags;
	const void *data;
} nestrt_prepacked;
nestrt_model *nestrt_model_new_embedded_packed(const nestrt_model_desc *d, const void *image, size_t size,
                                               const nestrt_prepacked *packs, int npacks, nestrt_error *err);
void nestrt_model_free(nestrt_model *m);
/* Runs an entry point: 0, or -1 with the reason in nestrt_model_error(m).
 * Any number of threads may run entry points of one instance at once: each
 * call has a workspace and an error of its own (see nestrt(3)). */
int nestrt_model_run(nestrt_model *m, nestrt_fn entry, void **bufs);
/* The same after checking that none of the nbufs pointers is NULL ("NAME:
 * argument 2 is NULL"): what the generated NAME_ENTRY functions call. */
int nestrt_model_call(nestrt_model *m, nestrt_fn entry, void **bufs, int nbufs, const char *name);
/* Why this thread's last call of an entry point of m failed, or NULL. */
const char *nestrt_model_error(const nestrt_model *m);

/* ---- run-time dimensions and sequences ----
 * An entry point with run-time dims (`where 1 <= T, T <= CTX`) checks every
 * condition before it runs, as c0 + sum coef[j] * dims[j] >= 0 (== 0 when
 * eq); a condition that fails is the call's error ("NAME: T = 0: 1 <= T does
 * not hold") and nothing is written. */
#define NESTRT_MAX_DIMS 4
typedef struct nestrt_dimcheck {
	int64_t c0;
	int64_t coef[NESTRT_MAX_DIMS];
	int64_t eq;
	const char *text;            /* the condition as written in the model */
} nestrt_dimcheck;
/* A sequence: the state a model declares (`state cache: ...`, a KV cache),
 * one per sequence being generated, zeroed at creation and by reset. It
 * belongs to the model descriptor it was made for: any instance of that
 * model may use it, one call at a time (calls on different sequences may
 * run at once, on one instance or several). */
typedef struct nestrt_seq nestrt_seq;
nestrt_seq *nestrt_seq_new(nestrt_model *m, const int64_t *state_bytes, int nstates, nestrt_error *err);
void nestrt_seq_reset(nestrt_seq *s);
void nestrt_seq_free(nestrt_seq *s);
/* What the generated entry points with run-time dims or state call: checks
 * m, s (when uses_seq: the entry reads or writes state), the nbufs pointers and the dims,
 * then runs entry with s's state after the inputs and outputs in bufs. */
/* What an entry reads and writes of the state, in order, as boxes (start
 * and size per axis, each c0 + sum coef[j] * dims[j]): a read outside what
 * the sequence's earlier calls (or this one, before it) wrote is an error
 * ("a state read before it was written"), found before anything runs. */
typedef struct nestrt_access {
	int64_t state, write, rank;
	int64_t start[NESTRT_MAX_RANK][1 + NESTRT_MAX_DIMS];
	int64_t size[NESTRT_MAX_RANK][1 + NESTRT_MAX_DIMS];
	const char *name;            /* the state's name: "cache.3.k" */
} nestrt_access;
int nestrt_model_call_dims(nestrt_model *m, int uses_seq, nestrt_seq *s, nestrt_fn entry, void **bufs, int nbufs,
                           const int64_t *dims, int ndims, const char *const *dim_names,
                           const nestrt_dimcheck *checks, int nchecks, const nestrt_access *acc, int nacc,
                           const char *name);
nestrt_ctx *nestrt_model_ctx(nestrt_model *m);

#ifdef __cplusplus
}
#endif
#endif

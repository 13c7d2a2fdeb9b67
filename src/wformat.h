/* wformat.h - weight formats (nestc build/run --weights-format): which
 * params are held in bf16, f16, q8_0, q4_0, q4_k or q6_k, decided once on the lowered
 * program (wformat.c) and read by the interpreter (run.c), code generation
 * (codegen/) and the report. */
#ifndef NESTC_WFORMAT_H
#define NESTC_WFORMAT_H

#include "nestc.h"

/* The formats, numbered as libnestrt's NESTRT_FMT_* (nestrt.h). */
enum { WF_F32 = 0, WF_BF16 = 1, WF_F16 = 2, WF_Q8_0 = 3, WF_Q4_0 = 4, WF_Q4_K = 5, WF_Q6_K = 6, WF_COUNT = 7 };

const char *wformat_name(int wf);        /* "f32", "bf16", ... */
int wformat_block(int wf);               /* elements per block: 1, 32 or 256 */
int wformat_block_bytes(int wf);         /* bytes per block */
/* Does --activations=int8 read wf with integer dot products (q8_0, q4_0,
 * q4_k; its copies laid out for them, NESTRT_PACK_DOT)? */
int wformat_dot(int wf);
/* The bytes of n elements in wf (n a multiple of its block). */
int64_t wformat_bytes(int wf, int64_t n);

/* The --weights-format values given (each "FMT" or "PATTERN=FMT", or a
 * comma-separated list of those), checked: 0, or -1 after a message on
 * stderr naming the bad item. */
typedef struct WFormatSpec {
	int deflt;            /* a bare FMT: for every param a matmul or gather reads; -1: none */
	int n;
	const char **pat;     /* glob patterns over param paths ('*' any run of characters) */
	int *fmt;
} WFormatSpec;
int wformat_parse(WFormatSpec *s, const char *arg);
void wformat_spec_free(WFormatSpec *s);

/* Set Program.params[i].wformat and .waxis from the spec: a bare format for
 * every f32 param whose every reader is a 2-D matmul (as its right operand,
 * or transposed) or a gather from its rows (a bare k-quant, for such a param
 * whose axis is a multiple of 32 but not of 256, gives q8_0, as llama.cpp's
 * quantizer falls back); a pattern for the params it
 * matches (the last match wins), which must be read so, else an error at the
 * reader. Returns the errors reported through d. */
int wformat_assign(Program *p, Diag *d, const WFormatSpec *s);

/* The formats the params are in, 1 << WF_* each (f32's bit clear): the
 * code generated for prepacked matmuls reads each of them. */
int wformat_mask(const Program *p);

/* A formatted param's values as the format holds them (quantized, then
 * dequantized, along its axis): the interpreter's weights. data is the
 * param's f32 elements. 0, or -1 with the reason in why (a NaN or an
 * infinity, which no block holds). */
int wformat_round_trip(const ParamInfo *pi, float *data, char *why, size_t len);

#endif

/* gguf_meta.h - llama.cpp's metadata for nestc weights (gguf_meta.c). */
#ifndef GGUF_META_H
#define GGUF_META_H

#include <stdint.h>

/* Key-value pairs in GGUF's encoding, assembled before the header: b holds
 * them, n counts them. */
typedef struct GgufMeta {
	Buf b;
	uint64_t n;
} GgufMeta;

/* llama.cpp's metadata of architecture arch: general.architecture, .name and
 * .alignment (align), each @gguf const's key (an integer as u32, a float as
 * f32), and the tokenizer: the input's tokenizer.* keys when in is a GGUF file
 * with them (its length must be the tokenizer.ggml.tokens const's), else a
 * placeholder vocabulary of that many pieces. 0, or -1 after an error. */
int gguf_llama_meta(GgufMeta *m, Program *p, Diag *d, const char *arch, const char *name, Weights *in, uint32_t align);

#endif

/* gguf_meta.c - the metadata of a GGUF file in llama.cpp's layout, for
 * `nestc weights -o OUT.gguf` (gguf_write.c) of a model whose @gguf consts
 * name an architecture llama.cpp knows: the architecture, the consts' keys,
 * and the tokenizer (the input file's, or a placeholder vocabulary). */
#include "nestc.h"
#include "gguf_meta.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* GGUF's value types, as it numbers them */
enum { GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_I64 = 11,
       GGUF_F64 = 12 };


static void m_bytes(GgufMeta *m, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf_putc(&m->b, ((const char *)p)[i]);
}

static void m_u32(GgufMeta *m, uint32_t v)
{
	unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
	m_bytes(m, b, 4);
}

static void m_u64(GgufMeta *m, uint64_t v)
{
	m_u32(m, (uint32_t)v);
	m_u32(m, (uint32_t)(v >> 32));
}

static void m_strn(GgufMeta *m, const char *s, size_t n)
{
	m_u64(m, n);
	m_bytes(m, s, n);
}

static void m_key(GgufMeta *m, const char *key, uint32_t type)
{
	m_strn(m, key, strlen(key));
	m_u32(m, type);
	m->n++;
}

static void m_f32(GgufMeta *m, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	m_u32(m, u);
}

/* One value of type t of the input's key (element i of an array): as it is. */
static int m_copy_value(GgufMeta *m, const struct nestrt_weights *rt, const char *key, uint64_t i, int t)
{
	int64_t v;
	double f;
	const char *s;
	size_t len;
	static const int size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	if (t == GGUF_STRING) {
		if (nestrt_weights_meta_string(rt, key, i, &s, &len, NULL) < 0)
			return -1;
		m_strn(m, s, len);
	} else if (t == GGUF_F32 || t == GGUF_F64) {
		if (nestrt_weights_meta_float(rt, key, i, &f, NULL) < 0)
			return -1;
		if (t == GGUF_F32) {
			m_f32(m, (float)f);
		} else {
			uint64_t u;
			memcpy(&u, &f, 8);
			m_u64(m, u);
		}
	} else if (t >= 0 && t < 13 && size[t]) {
		if (nestrt_weights_meta_int(rt, key, i, &v, NULL) < 0)
			return -1;
		uint64_t u = (uint64_t)v;
		for (int k = 0; k < size[t]; k++)
			buf_putc(&m->b, (char)(unsigned char)(u >> (8 * k)));
	} else {
		return -1;
	}
	return 0;
}

/* The input's tokenizer.* keys, as they are (arrays of arrays have none). */
static void m_copy_tokenizer(GgufMeta *m, const struct nestrt_weights *rt)
{
	int nk = nestrt_weights_meta_count(rt);
	for (int k = 0; k < nk; k++) {
		const char *key = nestrt_weights_meta_key(rt, k);
		int et;
		uint64_t count;
		int t = nestrt_weights_meta_type(rt, key, &et, &count);
		if (strncmp(key, "tokenizer.", 10) || (t == GGUF_ARRAY && et == GGUF_ARRAY))
			continue;
		GgufMeta one = {{0}, 0};
		m_key(&one, key, (uint32_t)t);
		int ok = 1;
		if (t == GGUF_ARRAY) {
			m_u32(&one, (uint32_t)et);
			m_u64(&one, count);
			for (uint64_t i = 0; i < count && ok; i++)
				ok = m_copy_value(&one, rt, key, i, et) == 0;
		} else {
			ok = m_copy_value(&one, rt, key, 0, t) == 0;
		}
		if (ok) {
			m_bytes(m, one.b.s, one.b.len);
			m->n++;
		}
		buf_free(&one.b);
	}
}

/* GPT-2's byte-level alphabet: byte b as a code point (bytes_to_unicode). */
static unsigned gpt2_char(unsigned b)
{
	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		return b;
	unsigned n = 0;
	for (unsigned x = 0; x < b; x++)
		n += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
	return 256 + n;
}

static size_t utf8(unsigned cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	out[0] = (char)(0xc0 | (cp >> 6));
	out[1] = (char)(0x80 | (cp & 0x3f));
	return 2;
}

/* A placeholder vocabulary of v pieces, for files of random weights that
 * llama.cpp's tools are to load: llama's (<unk> <s> </s>, the byte pieces
 * <0x00>.., then letters and letter strings with and without the space
 * mark, scored by their order) or gpt2's (the byte-level alphabet, pairs of
 * letters with their merges, <|endoftext|> last). */
static void m_vocab(GgufMeta *m, const char *arch, int64_t v)
{
	static const char letters[] = "etaoinshrdlucmfwypvbgkqjxz";
	int llama = strcmp(arch, "llama") == 0;
	Buf toks = {0}, merges = {0};
	uint64_t nmerges = 0;
	int64_t n = 0;
	int32_t *types = xcalloc((size_t)v + 1, sizeof *types);
	if (llama) {
		static const char *const special[3] = {"<unk>", "<s>", "</s>"};
		for (; n < 3 && n < v; n++) {
			GgufMeta t = {toks, 0};
			m_strn(&t, special[n], strlen(special[n]));
			toks = t.b;
			types[n] = n == 0 ? 2 : 3;
		}
		for (int b = 0; b < 256 && n < v; b++, n++) {
			char piece[8];
			snprintf(piece, sizeof piece, "<0x%02X>", b);
			GgufMeta t = {toks, 0};
			m_strn(&t, piece, 6);
			toks = t.b;
			types[n] = 6;
		}
		/* strings of len letters, odometer order; each with the space mark and without */
		for (int len = 1; n < v && len < 8; len++) {
			int idx[8] = {0};
			for (;;) {
				char piece[32];
				size_t k = 0;
				for (int w = 0; w < 2 && n < v; w++) {
					k = 0;
					if (w == 0) {
						memcpy(piece, "\xe2\x96\x81", 3); /* U+2581 */
						k = 3;
					}
					for (int c = 0; c < len; c++)
						piece[k++] = letters[idx[c]];
					GgufMeta t = {toks, 0};
					m_strn(&t, piece, k);
					toks = t.b;
					types[n++] = 1;
				}
				int c = len - 1;
				while (c >= 0 && ++idx[c] == 26)
					idx[c--] = 0;
				if (c < 0 || n >= v)
					break;
			}
		}
	} else {
		int64_t nbytes = v - 1 < 256 ? v - 1 : 256;
		for (; n < nbytes; n++) {
			char piece[4];
			GgufMeta t = {toks, 0};
			m_strn(&t, piece, utf8(gpt2_char((unsigned)n), piece));
			toks = t.b;
			types[n] = 1;
		}
		for (int a = -1; a < 26 && n < v - 1; a++)
			for (int b = 0; b < 26 && n < v - 1; b++) {
				char x[4], y[4], piece[8], merge[16];
				size_t lx = a < 0 ? utf8(gpt2_char(' '), x) : (x[0] = letters[a], 1);
				size_t ly = (y[0] = letters[b], 1);
				memcpy(piece, x, lx);
				memcpy(piece + lx, y, ly);
				GgufMeta t = {toks, 0};
				m_strn(&t, piece, lx + ly);
				toks = t.b;
				types[n++] = 1;
				memcpy(merge, x, lx);
				merge[lx] = ' ';
				memcpy(merge + lx + 1, y, ly);
				GgufMeta mm = {merges, 0};
				m_strn(&mm, merge, lx + 1 + ly);
				merges = mm.b;
				nmerges++;
			}
		for (int64_t k = 0; n < v - 1; k++) {
			char piece[32];
			int len = snprintf(piece, sizeof piece, "<|pad_%lld|>", (long long)k);
			GgufMeta t = {toks, 0};
			m_strn(&t, piece, (size_t)len);
			toks = t.b;
			types[n++] = 5;
		}
		if (n < v) {
			GgufMeta t = {toks, 0};
			m_strn(&t, "<|endoftext|>", 13);
			toks = t.b;
			types[n++] = 3;
		}
	}
	m_key(m, "tokenizer.ggml.model", GGUF_STRING);
	m_strn(m, llama ? "llama" : "gpt2", llama ? 5 : 4);
	if (!llama) {
		m_key(m, "tokenizer.ggml.pre", GGUF_STRING);
		m_strn(m, "gpt-2", 5);
	}
	m_key(m, "tokenizer.ggml.tokens", GGUF_ARRAY);
	m_u32(m, GGUF_STRING);
	m_u64(m, (uint64_t)n);
	m_bytes(m, toks.s, toks.len);
	m_key(m, "tokenizer.ggml.token_type", GGUF_ARRAY);
	m_u32(m, GGUF_I32);
	m_u64(m, (uint64_t)n);
	for (int64_t i = 0; i < n; i++)
		m_u32(m, (uint32_t)types[i]);
	if (llama) {
		m_key(m, "tokenizer.ggml.scores", GGUF_ARRAY);
		m_u32(m, GGUF_F32);
		m_u64(m, (uint64_t)n);
		for (int64_t i = 0; i < n; i++)
			m_f32(m, i < 259 ? 0.0f : -(float)(i - 259));
	} else {
		m_key(m, "tokenizer.ggml.merges", GGUF_ARRAY);
		m_u32(m, GGUF_STRING);
		m_u64(m, nmerges);
		m_bytes(m, merges.s, merges.len);
	}
	uint32_t bos = llama ? 1 : (uint32_t)(n - 1), eos = llama ? 2 : (uint32_t)(n - 1);
	if ((int64_t)bos < n && (int64_t)eos < n) {
		m_key(m, "tokenizer.ggml.bos_token_id", GGUF_U32);
		m_u32(m, bos);
		m_key(m, "tokenizer.ggml.eos_token_id", GGUF_U32);
		m_u32(m, eos);
	}
	if (llama && n > 0) {
		m_key(m, "tokenizer.ggml.unknown_token_id", GGUF_U32);
		m_u32(m, 0);
	}
	buf_free(&toks);
	buf_free(&merges);
	free(types);
}

/* llama.cpp's metadata: the architecture, the @gguf consts (an integer as
 * u32, as llama.cpp reads its counts, a float as f32), and the tokenizer:
 * the input's (a GGUF file converted), else a placeholder of V pieces. 0, or
 * -1 after an error. */
int gguf_llama_meta(GgufMeta *m, Program *p, Diag *d, const char *arch, const char *name, Weights *in, uint32_t align)
{
	m_key(m, "general.architecture", GGUF_STRING);
	m_strn(m, arch, strlen(arch));
	m_key(m, "general.name", GGUF_STRING);
	m_strn(m, name, strlen(name));
	m_key(m, "general.alignment", GGUF_U32);
	m_u32(m, align);
	const MetaKV *vocab = NULL;
	for (int i = 0; i < p->ngguf; i++) {
		const MetaKV *c = &p->gguf[i];
		if (!strncmp(c->key, "tokenizer.", 10) || !strncmp(c->key, "general.", 8)) {
			if (!strcmp(c->key, "tokenizer.ggml.tokens"))
				vocab = c;
			continue;
		}
		if (c->kind == 'f') {
			m_key(m, c->key, GGUF_F32);
			m_f32(m, (float)c->f);
		} else if (c->kind == 'b') {
			m_key(m, c->key, GGUF_BOOL);
			buf_putc(&m->b, (char)(c->i != 0));
		} else if (c->i >= 0 && c->i <= UINT32_MAX) {
			m_key(m, c->key, GGUF_U32);
			m_u32(m, (uint32_t)c->i);
		} else {
			m_key(m, c->key, GGUF_I64);
			m_u64(m, (uint64_t)c->i);
		}
	}
	uint64_t count = 0;
	if (in && in->rt->gguf && nestrt_weights_meta_type(in->rt, "tokenizer.ggml.tokens", NULL, &count) == GGUF_ARRAY) {
		if (vocab && vocab->kind == 'i' && (uint64_t)vocab->i != count) {
			error_plain(d, "%s: its vocabulary has %llu tokens, and the model's is %lld (the const of "
			            "tokenizer.ggml.tokens)", in->path, (unsigned long long)count, (long long)vocab->i);
			return -1;
		}
		m_copy_tokenizer(m, in->rt);
	} else if (vocab && vocab->kind == 'i' && vocab->i > 0) {
		m_vocab(m, arch, vocab->i);
	}
	return 0;
}

/* llama.cpp's tensor names and Hugging Face's, for the architectures a GGUF
 * file from llama.cpp's converter holds and nestc's samples are written for:
 * llama (LlamaForCausalLM's names) and gpt2 (GPT2Model's). The reader
 * (gguf.c) presents such a file's tensors under Hugging Face's names, and the
 * writer (the compiler's gguf_write.c) writes llama.cpp's; the flags say how
 * the two layouts differ (nestrt(3), "GGUF files of llama.cpp").
 *
 * The table follows llama.cpp's gguf-py/gguf/tensor_mapping.py, read the
 * other way. Its rows are GGUF's row-major [ne1, ne0]: */
#include "internal.h"

#include <string.h>

typedef struct Name {
	const char *ggml;   /* "{N}" stands for the layer number */
	const char *hf;
	int flags;
} Name;

enum { Q = NESTRT__NAME_ROPE_Q, K = NESTRT__NAME_ROPE_K, T = NESTRT__NAME_TRANS };

/* LLaMA: nn.Linear's weight is [out, in] in both; llama.cpp's converter
 * permutes q_proj's and k_proj's rows into GGML's rotary order (pairs of
 * adjacent rows, where Hugging Face rotates halves of each head). */
static const Name llama[] = {
	{"token_embd.weight", "model.embed_tokens.weight", 0},
	{"output_norm.weight", "model.norm.weight", 0},
	{"output.weight", "lm_head.weight", 0},
	{"blk.{N}.attn_norm.weight", "model.layers.{N}.input_layernorm.weight", 0},
	{"blk.{N}.attn_q.weight", "model.layers.{N}.self_attn.q_proj.weight", Q},
	{"blk.{N}.attn_k.weight", "model.layers.{N}.self_attn.k_proj.weight", K},
	{"blk.{N}.attn_v.weight", "model.layers.{N}.self_attn.v_proj.weight", 0},
	{"blk.{N}.attn_output.weight", "model.layers.{N}.self_attn.o_proj.weight", 0},
	{"blk.{N}.ffn_norm.weight", "model.layers.{N}.post_attention_layernorm.weight", 0},
	{"blk.{N}.ffn_gate.weight", "model.layers.{N}.mlp.gate_proj.weight", 0},
	{"blk.{N}.ffn_up.weight", "model.layers.{N}.mlp.up_proj.weight", 0},
	{"blk.{N}.ffn_down.weight", "model.layers.{N}.mlp.down_proj.weight", 0},
};

/* GPT-2: Hugging Face's Conv1D holds [in, out], llama.cpp's converter
 * transposes the four matrices of a block to [out, in]. */
static const Name gpt2[] = {
	{"token_embd.weight", "wte.weight", 0},
	{"position_embd.weight", "wpe.weight", 0},
	{"output_norm.weight", "ln_f.weight", 0},
	{"output_norm.bias", "ln_f.bias", 0},
	{"blk.{N}.attn_norm.weight", "h.{N}.ln_1.weight", 0},
	{"blk.{N}.attn_norm.bias", "h.{N}.ln_1.bias", 0},
	{"blk.{N}.attn_qkv.weight", "h.{N}.attn.c_attn.weight", T},
	{"blk.{N}.attn_qkv.bias", "h.{N}.attn.c_attn.bias", 0},
	{"blk.{N}.attn_output.weight", "h.{N}.attn.c_proj.weight", T},
	{"blk.{N}.attn_output.bias", "h.{N}.attn.c_proj.bias", 0},
	{"blk.{N}.ffn_norm.weight", "h.{N}.ln_2.weight", 0},
	{"blk.{N}.ffn_norm.bias", "h.{N}.ln_2.bias", 0},
	{"blk.{N}.ffn_up.weight", "h.{N}.mlp.c_fc.weight", T},
	{"blk.{N}.ffn_up.bias", "h.{N}.mlp.c_fc.bias", 0},
	{"blk.{N}.ffn_down.weight", "h.{N}.mlp.c_proj.weight", T},
	{"blk.{N}.ffn_down.bias", "h.{N}.mlp.c_proj.bias", 0},
};

static const Name *table(const char *arch, size_t *n)
{
	if (arch && strcmp(arch, "llama") == 0) {
		*n = sizeof llama / sizeof llama[0];
		return llama;
	}
	if (arch && strcmp(arch, "gpt2") == 0) {
		*n = sizeof gpt2 / sizeof gpt2[0];
		return gpt2;
	}
	*n = 0;
	return NULL;
}

int nestrt__gguf_arch_known(const char *arch)
{
	size_t n;
	return table(arch, &n) != NULL;
}

/* name against pattern: the layer number (digits without a leading zero,
 * below 10^9) where "{N}" stands, -2 for a pattern without one; -1: no match */
static long match(const char *pat, const char *name)
{
	long layer = -2;
	while (*pat) {
		if (strncmp(pat, "{N}", 3) == 0) {
			if (*name < '0' || *name > '9' || (name[0] == '0' && name[1] >= '0' && name[1] <= '9'))
				return -1;
			long v = 0;
			int digits = 0;
			for (; *name >= '0' && *name <= '9'; name++, digits++)
				v = v * 10 + (*name - '0');
			if (digits > 9)
				return -1;
			layer = v;
			pat += 3;
		} else if (*pat++ != *name++) {
			return -1;
		}
	}
	return *name ? -1 : layer;
}

/* pattern with its "{N}" as layer into out: 0, or -1 when it does not fit */
static int format(const char *pat, long layer, char *out, size_t n)
{
	size_t k = 0;
	for (; *pat; pat++) {
		char num[16];
		const char *s = num;
		size_t len = 1;
		if (strncmp(pat, "{N}", 3) == 0) {
			int d = 0;
			char rev[16];
			do
				rev[d++] = (char)('0' + layer % 10);
			while ((layer /= 10) > 0 && d < 15);
			for (int i = 0; i < d; i++)
				num[i] = rev[d - 1 - i];
			len = (size_t)d;
			pat += 2;
		} else {
			s = pat;
		}
		if (k + len >= n)
			return -1;
		memcpy(out + k, s, len);
		k += len;
	}
	out[k] = 0;
	return 0;
}

static int lookup(const char *arch, const char *name, int to_hf, char *out, size_t n)
{
	size_t nt;
	const Name *t = table(arch, &nt);
	for (size_t i = 0; i < nt; i++) {
		long layer = match(to_hf ? t[i].ggml : t[i].hf, name);
		if (layer == -1)
			continue;
		return format(to_hf ? t[i].hf : t[i].ggml, layer, out, n) < 0 ? -1 : t[i].flags;
	}
	return -1;
}

int nestrt__gguf_hf_name(const char *arch, const char *name, char *out, size_t n)
{
	return lookup(arch, name, 1, out, n);
}

int nestrt__gguf_ggml_name(const char *arch, const char *hf, char *out, size_t n)
{
	return lookup(arch, hf, 0, out, n);
}

/* Row r of a q or k projection in Hugging Face's order (heads of hd rows,
 * each rotated by halves) is row rotary_row(r, hd) of llama.cpp's (each head
 * rotated by adjacent pairs): Hugging Face's row j = t * hd/2 + i of a head is
 * llama.cpp's row 2i + t of it. */
int64_t nestrt__rotary_row(int64_t r, int64_t hd)
{
	int64_t h = r / hd, j = r % hd, half = hd / 2;
	return h * hd + 2 * (j % half) + j / half;
}

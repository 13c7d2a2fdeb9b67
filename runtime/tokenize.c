/* tokenize.c - the tokenizer of a GGUF file's metadata, as llama.cpp's
 * llama-vocab.cpp and unicode.cpp (release v0.4.0, the one node-llama-cpp
 * 3.21.1 bundles) tokenize and detokenize:
 *
 *   tokenizer.ggml.model "llama": SentencePiece-style BPE over the tokens'
 *     scores (llm_tokenizer_spm): spaces become U+2581, a space is put before
 *     each piece of text that starts the input or follows a special token
 *     (tokenizer.ggml.add_space_prefix, default true), then the adjacent pair
 *     of symbols whose concatenation is the token of highest score merges
 *     (the leftmost of equal scores first) until none does; a symbol that is
 *     no token becomes its bytes' <0xXX> tokens.
 *   tokenizer.ggml.model "gpt2": byte-level BPE over tokenizer.ggml.merges
 *     (rank = index): the text splits into words by the pre-tokenizer of
 *     tokenizer.ggml.pre (GPT-2's or LLaMA-3's regular expression, as
 *     unicode.cpp's hand-written matchers of them, or llama.cpp's default
 *     cascade of four expressions, the one a file without the key gets),
 *     each word's bytes map to
 *     GPT-2's printable code points (bytes_to_unicode), then the adjacent pair
 *     of lowest merge rank merges until none does.
 *
 * Special tokens (types control, user-defined and unknown) are cut out of the
 * text first, longest first (tokenizer_st_partition): user-defined ones
 * always, control and unknown ones when the caller asks. Every array is
 * copied out of the file and checked when the tokenizer is made; nothing
 * points into the weights afterwards. */
#include "internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unicode_ranges.h"

enum { SPM = 1, BPE = 2 };
enum { PRE_GPT2 = 1, PRE_LLAMA3 = 2, PRE_DEFAULT = 3 };
/* token types, as GGUF numbers them (llama_token_type) */
enum { T_UNDEFINED = 0, T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

/* An open-addressed table of byte strings to int32 values. */
typedef struct {
	int32_t *slot;   /* -1 empty, else an index into the owner's strings */
	size_t mask;
} Table;

struct nestrt_tokenizer {
	int kind, pre;
	int32_t n;            /* tokens */
	char *text;           /* all token texts, back to back */
	size_t *off;          /* n + 1 offsets into text */
	float *score;
	unsigned char *type;
	Table tokens;
	int32_t nmerges;
	char *mtext;          /* merges ("left right"), back to back */
	size_t *moff;         /* nmerges + 1 */
	Table merges;
	int32_t bos, eos;
	int add_bos, add_eos, add_space_prefix, ignore_merges;
	int32_t *special;     /* control, user-defined and unknown tokens, longest first */
	int nspecial;
	int32_t byte_token[256];
	uint16_t bmap[256];        /* gpt2: the code point of each byte */
	int16_t binv[324];         /* and the byte of each such code point, -1: none */   /* the token of each byte (llama: <0xXX>; gpt2: its code point), -1: none */
	char path[256];
};

/* ------------------------------------------------------------ helpers */

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int table_init(Table *t, size_t count)
{
	size_t cap = 16;
	while (cap < count * 2)
		cap *= 2;
	t->slot = malloc(cap * sizeof *t->slot);
	if (!t->slot)
		return -1;
	memset(t->slot, 0xff, cap * sizeof *t->slot);
	t->mask = cap - 1;
	return 0;
}

/* The value of string s[0..n) in a table over strings (base, off): its index, or -1. */
static int32_t table_find(const Table *t, const char *base, const size_t *off, const char *s, size_t n)
{
	for (size_t i = hash(s, n) & t->mask;; i = (i + 1) & t->mask) {
		int32_t v = t->slot[i];
		if (v < 0)
			return -1;
		if (off[v + 1] - off[v] == n && !memcmp(base + off[v], s, n))
			return v;
	}
}

/* Adds index v (its string base[off[v]..off[v+1])); returns the index already
 * there with the same string, or -1 when v went in. */
static int32_t table_add(Table *t, const char *base, const size_t *off, int32_t v)
{
	const char *s = base + off[v];
	size_t n = off[v + 1] - off[v];
	size_t i = hash(s, n) & t->mask;
	for (; t->slot[i] >= 0; i = (i + 1) & t->mask) {
		int32_t u = t->slot[i];
		if (off[u + 1] - off[u] == n && !memcmp(base + off[u], s, n))
			return u;
	}
	t->slot[i] = v;
	return -1;
}

static int32_t token_of(const nestrt_tokenizer *t, const char *s, size_t n)
{
	return table_find(&t->tokens, t->text, t->off, s, n);
}

/* The length of a UTF-8 sequence by its first byte, as llama.cpp's
 * unicode_len_utf8 says (no check of what follows). */
static size_t len_utf8(unsigned char c)
{
	static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	return lookup[c >> 4];
}

/* Strict UTF-8: the length of the valid sequence at s[0..n), 0 if invalid. */
static size_t valid_utf8(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t k = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!k || k > n)
		return 0;
	for (size_t i = 1; i < k; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
	    (c == 0xf4 && s[1] > 0x8f))
		return 0;
	return k;
}

/* A code point as llama.cpp's unicode_cpt_from_utf8 decodes it (no check for
 * overlong forms or surrogates); *len gets the bytes it takes. An invalid
 * sequence is U+FFFD of one byte, as unicode_cpts_from_utf8 makes it. */
static uint32_t decode_cpt(const unsigned char *s, size_t n, size_t *len)
{
	unsigned c = s[0];
	*len = 1;
	if (c < 0x80)
		return c;
	size_t k = !(c & 0x40) ? 0 : !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
	if (!k || k > n)
		return 0xfffd;
	for (size_t i = 1; i < k; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0xfffd;
	uint32_t v = c & (0x7f >> k);
	for (size_t i = 1; i < k; i++)
		v = v << 6 | (s[i] & 0x3f);
	*len = k;
	return v;
}

/* The UTF-8 of a code point below U+0800 (GPT-2's byte map goes to U+0143). */
static size_t encode_cpt(uint32_t c, char *out)
{
	unsigned char *o = (unsigned char *)out;
	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	o[0] = (unsigned char)(0xc0 | c >> 6);
	o[1] = (unsigned char)(0x80 | (c & 0x3f));
	return 2;
}

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c < r[mid][0])
			hi = mid;
		else if (c > r[mid][1])
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

/* Code point classes of the pre-tokenizers: 0 only past the word's end. */
enum { C_ANY = 1, C_LETTER = 2, C_NUMBER = 4, C_SPACE = 8 };

static int cpt_class(uint32_t c)
{
	/* Unicode's White_Space, as llama.cpp's unicode_set_whitespace */
	static const uint32_t spaces[] = {0x9,    0xa,    0xb,    0xc,    0xd,    0x20,   0x85,   0xa0,   0x1680,
	                                  0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
	                                  0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
	int k = C_ANY;
	for (size_t i = 0; i < sizeof spaces / sizeof *spaces; i++)
		if (c == spaces[i])
			k |= C_SPACE;
	if (c < 0x80) {
		if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
			k |= C_LETTER;
		else if (c >= '0' && c <= '9')
			k |= C_NUMBER;
		return k;
	}
	if (in_ranges(nestrt__letters, sizeof nestrt__letters / sizeof *nestrt__letters, c))
		k |= C_LETTER;
	else if (in_ranges(nestrt__numbers, sizeof nestrt__numbers / sizeof *nestrt__numbers, c))
		k |= C_NUMBER;
	return k;
}

/* GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the
 * others for 256, 257, ... in order; and its inverse. */
static void byte_map(nestrt_tokenizer *t)
{
	unsigned n = 0;
	for (unsigned c = 0; c < 324; c++)
		t->binv[c] = -1;
	for (unsigned b = 0; b < 256; b++) {
		int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		t->bmap[b] = (uint16_t)(printable ? b : 256 + n++);
		t->binv[t->bmap[b]] = (int16_t)b;
	}
}

/* ------------------------------------------------------------ loading */

void nestrt_tokenizer_free(nestrt_tokenizer *t)
{
	if (!t)
		return;
	free(t->text);
	free(t->off);
	free(t->score);
	free(t->type);
	free(t->tokens.slot);
	free(t->mtext);
	free(t->moff);
	free(t->merges.slot);
	free(t->special);
	free(t);
}

/* An array of key: its element type and count, or an error (missing, not an array). */
static int array_of(const nestrt_weights *w, const char *path, const char *key, int *et, uint64_t *count,
                    nestrt_error *err)
{
	int type = nestrt_weights_meta_type(w, key, et, count);
	if (type < 0)
		return nestrt__seterr(err, "%s: no metadata '%s'", path, key);
	if (type != NESTRT_META_ARRAY)
		return nestrt__seterr(err, "%s: metadata '%s' is of type %s, not an array", path, key,
		                      nestrt_meta_type_name(type));
	return 0;
}

/* An optional bool (or integer 0/1) key; *v keeps its default when absent. */
static int flag_of(const nestrt_weights *w, const char *path, const char *key, int *v, nestrt_error *err)
{
	if (nestrt_weights_meta_type(w, key, NULL, NULL) < 0)
		return 0;
	int64_t x;
	if (nestrt_weights_meta_int(w, key, 0, &x, err) < 0)
		return -1;
	if (x != 0 && x != 1)
		return nestrt__seterr(err, "%s: metadata '%s' is %lld, not a boolean", path, key, (long long)x);
	*v = (int)x;
	return 0;
}

/* An optional token id; must name a token of the vocabulary. */
static int id_of(const nestrt_weights *w, const char *path, const char *key, int32_t n, int32_t *v, nestrt_error *err)
{
	if (nestrt_weights_meta_type(w, key, NULL, NULL) < 0)
		return 0;
	int64_t x;
	if (nestrt_weights_meta_int(w, key, 0, &x, err) < 0)
		return -1;
	if (x < 0 || x >= n)
		return nestrt__seterr(err, "%s: metadata '%s' is %lld, outside the vocabulary of %d tokens", path, key,
		                      (long long)x, (int)n);
	*v = (int32_t)x;
	return 0;
}

/* Copies the strings of array key (count n) back to back into *text with
 * offsets *off (n + 1); each must be UTF-8 without NUL. what names an
 * element in messages ("token", "merge"). */
static int strings_of(const nestrt_weights *w, const char *path, const char *key, int32_t n, const char *what,
                      char **text, size_t **off, nestrt_error *err)
{
	size_t total = 0;
	*off = malloc(((size_t)n + 1) * sizeof **off);
	if (!*off)
		return nestrt__seterr(err, "%s: out of memory for %s", path, key);
	for (int32_t i = 0; i < n; i++) {
		const char *s;
		size_t len;
		if (nestrt_weights_meta_string(w, key, (uint64_t)i, &s, &len, err) < 0)
			return -1;
		char shown[NESTRT__SHOWN];
		for (size_t k = 0; k < len;) {
			size_t m = s[k] ? valid_utf8((const unsigned char *)s + k, len - k) : 0;
			if (!m)
				return nestrt__seterr(err, "%s: metadata '%s': %s %d '%s' is not valid UTF-8 (byte %zu)%s", path,
				                      key, what, (int)i, nestrt__shown(shown, s, len), k,
				                      s[k] ? "" : ": a NUL");
			k += m;
		}
		(*off)[i] = total;
		total += len;
	}
	(*off)[n] = total;
	*text = malloc(total ? total : 1);
	if (!*text)
		return nestrt__seterr(err, "%s: out of memory for %s", path, key);
	for (int32_t i = 0; i < n; i++) {
		const char *s;
		size_t len;
		nestrt_weights_meta_string(w, key, (uint64_t)i, &s, &len, NULL);
		memcpy(*text + (*off)[i], s, len);
	}
	return 0;
}

static int special_cmp(const void *a, const void *b, void *t_)
{
	const nestrt_tokenizer *t = t_;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	size_t lx = t->off[x + 1] - t->off[x], ly = t->off[y + 1] - t->off[y];
	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Insertion sort of the special tokens (few), longest first, then by id. */
static void sort_special(nestrt_tokenizer *t)
{
	for (int i = 1; i < t->nspecial; i++)
		for (int j = i; j > 0 && special_cmp(&t->special[j - 1], &t->special[j], t) > 0; j--) {
			int32_t x = t->special[j];
			t->special[j] = t->special[j - 1];
			t->special[j - 1] = x;
		}
}

static int load(nestrt_tokenizer *t, const nestrt_weights *w, nestrt_error *err)
{
	const char *path = t->path;
	const char *s;
	size_t len;
	char shown[NESTRT__SHOWN];
	if (nestrt_weights_meta_type(w, "tokenizer.ggml.model", NULL, NULL) < 0)
		return nestrt__seterr(err, "%s: no tokenizer (no metadata 'tokenizer.ggml.model')", path);
	if (nestrt_weights_meta_string(w, "tokenizer.ggml.model", 0, &s, &len, err) < 0)
		return -1;
	if (len == 5 && !memcmp(s, "llama", 5))
		t->kind = SPM;
	else if (len == 4 && !memcmp(s, "gpt2", 4))
		t->kind = BPE;
	else
		return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.model' is '%s': only 'llama' and 'gpt2' are "
		                      "supported", path, nestrt__shown(shown, s, len));

	int et;
	uint64_t count;
	if (array_of(w, path, "tokenizer.ggml.tokens", &et, &count, err) < 0)
		return -1;
	if (et != NESTRT_META_STRING)
		return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.tokens' is an array of %s, not of strings", path,
		                      nestrt_meta_type_name(et) ? nestrt_meta_type_name(et) : "?");
	if (count == 0 || count > INT32_MAX - 1)
		return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.tokens' has %llu tokens", path,
		                      (unsigned long long)count);
	t->n = (int32_t)count;
	if (strings_of(w, path, "tokenizer.ggml.tokens", t->n, "token", &t->text, &t->off, err) < 0)
		return -1;

	t->score = calloc((size_t)t->n, sizeof *t->score);
	t->type = malloc((size_t)t->n);
	if (!t->score || !t->type)
		return nestrt__seterr(err, "%s: out of memory for the vocabulary", path);
	memset(t->type, T_NORMAL, (size_t)t->n);

	/* scores: llama's merges go by them; a gpt2 vocabulary may have them too */
	if (t->kind == SPM || nestrt_weights_meta_type(w, "tokenizer.ggml.scores", NULL, NULL) >= 0) {
		if (array_of(w, path, "tokenizer.ggml.scores", &et, &count, err) < 0)
			return -1;
		if (et != NESTRT_META_F32 && et != NESTRT_META_I32)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.scores' is an array of %s, not of f32", path,
			                      nestrt_meta_type_name(et) ? nestrt_meta_type_name(et) : "?");
		if (count != (uint64_t)t->n)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.scores' has %llu elements for %d tokens",
			                      path, (unsigned long long)count, (int)t->n);
		for (int32_t i = 0; i < t->n; i++) {
			double v;
			if (nestrt_weights_meta_float(w, "tokenizer.ggml.scores", (uint64_t)i, &v, err) < 0)
				return -1;
			t->score[i] = (float)v;
		}
	}
	if (nestrt_weights_meta_type(w, "tokenizer.ggml.token_type", NULL, NULL) >= 0) {
		if (array_of(w, path, "tokenizer.ggml.token_type", &et, &count, err) < 0)
			return -1;
		if (et != NESTRT_META_I32)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.token_type' is an array of %s, not of i32",
			                      path, nestrt_meta_type_name(et) ? nestrt_meta_type_name(et) : "?");
		if (count != (uint64_t)t->n)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.token_type' has %llu elements for %d tokens",
			                      path, (unsigned long long)count, (int)t->n);
		for (int32_t i = 0; i < t->n; i++) {
			int64_t v;
			if (nestrt_weights_meta_int(w, "tokenizer.ggml.token_type", (uint64_t)i, &v, err) < 0)
				return -1;
			if (v < 0 || v > T_BYTE)
				return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.token_type': token %d has type %lld, "
				                      "not one of 0-6", path, (int)i, (long long)v);
			t->type[i] = (unsigned char)v;
		}
	}

	if (table_init(&t->tokens, (size_t)t->n) < 0)
		return nestrt__seterr(err, "%s: out of memory for the vocabulary", path);
	for (int32_t i = 0; i < t->n; i++) {
		size_t n = t->off[i + 1] - t->off[i];
		if (n == 0)
			continue; /* never matched (llama.cpp names it [EMPTY_i]) */
		int32_t dup = table_add(&t->tokens, t->text, t->off, i);
		if (dup >= 0)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.tokens': token %d '%s' repeats token %d", path,
			                      (int)i, nestrt__shown(shown, t->text + t->off[i], n), (int)dup);
	}

	byte_map(t);
	/* byte tokens: <0xXX>, as the bytes they stand for */
	for (int b = 0; b < 256; b++)
		t->byte_token[b] = -1;
	for (int32_t i = 0; i < t->n; i++) {
		const char *x = t->text + t->off[i];
		size_t n = t->off[i + 1] - t->off[i];
		if (t->type[i] != T_BYTE)
			continue;
		unsigned v = 0;
		int ok = n == 6 && !memcmp(x, "<0x", 3) && x[5] == '>';
		for (int k = 3; ok && k < 5; k++) {
			char c = x[k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			ok = d >= 0;
			v = v * 16 + (unsigned)(d < 0 ? 0 : d);
		}
		if (!ok)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.token_type': token %d '%s' is of type byte "
			                      "but is not <0xXX>", path, (int)i, nestrt__shown(shown, x, n));
	}
	for (int b = 0; b < 256; b++) {
		char buf[8];
		if (t->kind == SPM) {
			/* llama.cpp's byte_to_token: <0xXX>, else the byte itself */
			snprintf(buf, sizeof buf, "<0x%02X>", (unsigned)b);
			t->byte_token[b] = token_of(t, buf, 6);
			if (t->byte_token[b] < 0) {
				buf[0] = (char)b;
				t->byte_token[b] = token_of(t, buf, 1);
			}
		} else {
			t->byte_token[b] = token_of(t, buf, encode_cpt(t->bmap[b], buf));
		}
	}

	if (t->kind == BPE) {
		if (array_of(w, path, "tokenizer.ggml.merges", &et, &count, err) < 0)
			return -1;
		if (et != NESTRT_META_STRING)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.merges' is an array of %s, not of strings",
			                      path, nestrt_meta_type_name(et) ? nestrt_meta_type_name(et) : "?");
		if (count > INT32_MAX - 1)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.merges' has %llu merges", path,
			                      (unsigned long long)count);
		t->nmerges = (int32_t)count;
		if (strings_of(w, path, "tokenizer.ggml.merges", t->nmerges, "merge", &t->mtext, &t->moff, err) < 0)
			return -1;
		if (table_init(&t->merges, (size_t)t->nmerges) < 0)
			return nestrt__seterr(err, "%s: out of memory for the merges", path);
		for (int32_t i = 0; i < t->nmerges; i++) {
			const char *m = t->mtext + t->moff[i];
			size_t n = t->moff[i + 1] - t->moff[i];
			const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
			if (!sp || sp == m + n - 1)
				return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.merges': merge %d '%s' is not two "
				                      "pieces separated by a space", path, (int)i, nestrt__shown(shown, m, n));
			table_add(&t->merges, t->mtext, t->moff, i); /* a repeated merge keeps its first rank */
		}
		/* no tokenizer.ggml.pre: llama.cpp's default, as llama.cpp takes it */
		const char *pre = "default";
		size_t plen = 7;
		if (nestrt_weights_meta_type(w, "tokenizer.ggml.pre", NULL, NULL) >= 0 &&
		    nestrt_weights_meta_string(w, "tokenizer.ggml.pre", 0, &pre, &plen, err) < 0)
			return -1;
		if (plen == 7 && !memcmp(pre, "default", 7))
			t->pre = PRE_DEFAULT;
		static const char *const gpt2[] = {"gpt-2",      "phi-2",      "jina-es", "jina-de", "gigachat",
		                                   "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",  "modern-bert",
		                                   "mpt",        "olmo",       "jais",    "exaone4", "trillion",
		                                   "granite-docling"};
		static const char *const llama3[] = {"llama3", "llama-v3",  "llama-bpe", "falcon3",     "falcon-h1",
		                                     "pixtral", "midm-2.0", "lfm2",      "jina-v5-nano", "dbrx",
		                                     "smaug-bpe"};
		for (size_t i = 0; i < sizeof gpt2 / sizeof *gpt2; i++)
			if (strlen(gpt2[i]) == plen && !memcmp(pre, gpt2[i], plen))
				t->pre = PRE_GPT2;
		for (size_t i = 0; i < sizeof llama3 / sizeof *llama3; i++)
			if (strlen(llama3[i]) == plen && !memcmp(pre, llama3[i], plen)) {
				t->pre = PRE_LLAMA3;
				/* llama.cpp: LLaMA-3's own take a word that is a token whole, and add BOS (not dbrx, smaug-bpe) */
				if (i < 9) {
					t->ignore_merges = 1;
					t->add_bos = 1;
				}
			}
		if (!t->pre)
			return nestrt__seterr(err, "%s: metadata 'tokenizer.ggml.pre' is '%s': supported are llama.cpp's "
			                      "default, GPT-2's (gpt-2 and its aliases) and LLaMA-3's (llama-bpe, llama3 ...)", path,
			                      nestrt__shown(shown, pre, plen));
	}

	/* BOS and EOS: llama.cpp's defaults, then the file's */
	t->bos = t->kind == SPM ? 1 : 11;
	t->eos = t->kind == SPM ? 2 : 11;
	if (t->bos >= t->n)
		t->bos = -1;
	if (t->eos >= t->n)
		t->eos = -1;
	if (t->kind == SPM) {
		t->add_bos = 1;
		t->add_space_prefix = 1;
	}
	if (id_of(w, path, "tokenizer.ggml.bos_token_id", t->n, &t->bos, err) < 0 ||
	    id_of(w, path, "tokenizer.ggml.eos_token_id", t->n, &t->eos, err) < 0 ||
	    flag_of(w, path, "tokenizer.ggml.add_bos_token", &t->add_bos, err) < 0 ||
	    flag_of(w, path, "tokenizer.ggml.add_eos_token", &t->add_eos, err) < 0)
		return -1;
	if (t->kind == SPM && flag_of(w, path, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err) < 0)
		return -1;
	if (t->add_bos && t->bos < 0)
		return nestrt__seterr(err, "%s: the tokenizer adds a BOS token but has none (no "
		                      "'tokenizer.ggml.bos_token_id', and %d tokens)", path, (int)t->n);
	if (t->add_eos && t->eos < 0)
		return nestrt__seterr(err, "%s: the tokenizer adds an EOS token but has none (no "
		                      "'tokenizer.ggml.eos_token_id', and %d tokens)", path, (int)t->n);

	for (int32_t i = 0; i < t->n; i++)
		if ((t->type[i] == T_CONTROL || t->type[i] == T_USER || t->type[i] == T_UNKNOWN) && t->off[i + 1] > t->off[i])
			t->nspecial++;
	t->special = malloc(((size_t)t->nspecial + 1) * sizeof *t->special);
	if (!t->special)
		return nestrt__seterr(err, "%s: out of memory", path);
	t->nspecial = 0;
	for (int32_t i = 0; i < t->n; i++)
		if ((t->type[i] == T_CONTROL || t->type[i] == T_USER || t->type[i] == T_UNKNOWN) && t->off[i + 1] > t->off[i])
			t->special[t->nspecial++] = i;
	sort_special(t);
	return 0;
}

nestrt_tokenizer *nestrt_tokenizer_from_weights(const nestrt_weights *w, nestrt_error *err)
{
	if (!w) {
		nestrt__seterr(err, "no weights to take a tokenizer from");
		return NULL;
	}
	nestrt_tokenizer *t = calloc(1, sizeof *t);
	if (!t) {
		nestrt__seterr(err, "out of memory");
		return NULL;
	}
	const char *p = nestrt_weights_path(w);
	snprintf(t->path, sizeof t->path, "%s", p ? p : "(weights)");
	if (load(t, w, err) < 0) {
		nestrt_tokenizer_free(t);
		return NULL;
	}
	return t;
}

/* The end of a GGUF value of type ty at p[0..n) (skipped, with nested
 * arrays), or 0 when it does not end inside the bytes (or is malformed: the
 * reader then says why). */
static size_t skip_value(const unsigned char *p, size_t at, size_t n, uint32_t ty, int depth)
{
	static const unsigned char size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	if (ty > 12 || depth > 4)
		return 0;
	if (ty == 8) {
		if (n - at < 8)
			return 0;
		uint64_t l = 0;
		for (int i = 7; i >= 0; i--)
			l = l << 8 | p[at + (size_t)i];
		return l > n - at - 8 ? 0 : at + 8 + (size_t)l;
	}
	if (ty != 9)
		return n - at < size[ty] ? 0 : at + size[ty];
	if (n - at < 12)
		return 0;
	uint32_t et = (uint32_t)p[at] | (uint32_t)p[at + 1] << 8 | (uint32_t)p[at + 2] << 16 | (uint32_t)p[at + 3] << 24;
	uint64_t count = 0;
	for (int i = 7; i >= 0; i--)
		count = count << 8 | p[at + 4 + (size_t)i];
	at += 12;
	if (et <= 12 && et != 8 && et != 9)
		return count > (n - at) / size[et] ? 0 : at + (size_t)count * size[et];
	for (uint64_t i = 0; i < count; i++)
		if (!(at = skip_value(p, at, n, et, depth + 1)))
			return 0;
	return at;
}

/* The metadata of the GGUF file at path alone, as an image of a file without
 * tensors (n_tensors 0, the file cut after its keys): a tokenizer needs no
 * weights, and reading a model's whole file (converting its tensors) for one
 * would cost its size in memory. NULL (nothing allocated) when the file is
 * not such a file or its keys do not end inside it: the full reader then
 * takes it, and says what is wrong. */
static unsigned char *meta_image(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	unsigned char *buf = NULL;
	size_t have = 0, want = 1 << 20;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 24)
		goto fail;
	for (;;) {
		size_t size = (uint64_t)st.st_size < want ? (size_t)st.st_size : want;
		unsigned char *nb = realloc(buf, size + 64);
		if (!nb)
			goto fail;
		buf = nb;
		if (nestrt__pread_all(fd, buf + have, size - have, have) != 0)
			goto fail;
		have = size;
		if (memcmp(buf, "GGUF", 4) != 0)
			goto fail;
		uint64_t nkv = 0;
		for (int i = 7; i >= 0; i--)
			nkv = nkv << 8 | buf[16 + i];
		size_t at = 24;
		uint64_t k = 0;
		for (; k < nkv; k++) {
			if (!(at = skip_value(buf, at, have, 8, 0)) || have - at < 4)
				break;
			uint32_t ty = (uint32_t)buf[at] | (uint32_t)buf[at + 1] << 8 | (uint32_t)buf[at + 2] << 16 |
			              (uint32_t)buf[at + 3] << 24;
			if (ty > 12)
				goto fail;
			if (!(at = skip_value(buf, at + 4, have, ty, 0)))
				break;
		}
		if (k == nkv) {
			memset(buf + 8, 0, 8); /* no tensors */
			memset(buf + at, 0, 64); /* room to the data section's alignment (32 by default) */
			*len = at;
			close(fd);
			return buf;
		}
		if (have == (size_t)st.st_size || want > ((size_t)1 << 40))
			goto fail;
		want *= 4;
	}
fail:
	free(buf);
	close(fd);
	return NULL;
}

nestrt_tokenizer *nestrt_tokenizer_open(const char *gguf_path, nestrt_error *err)
{
	if (!gguf_path) {
		nestrt__seterr(err, "no file to take a tokenizer from");
		return NULL;
	}
	size_t len = 0;
	unsigned char *image = meta_image(gguf_path, &len);
	nestrt_weights *w = image ? nestrt_weights_from_memory(image, len, gguf_path, NULL) : NULL;
	if (!w) /* not cut so: the whole file, whose reader says what is wrong */
		w = nestrt_weights_open(gguf_path, err);
	if (!w) {
		free(image);
		return NULL;
	}
	nestrt_tokenizer *t = nestrt_tokenizer_from_weights(w, err);
	nestrt_weights_close(w);
	free(image);
	return t;
}

int nestrt_tokenizer_n_vocab(const nestrt_tokenizer *t)
{
	return t ? t->n : 0;
}

int32_t nestrt_tokenizer_bos(const nestrt_tokenizer *t)
{
	return t ? t->bos : -1;
}

int32_t nestrt_tokenizer_eos(const nestrt_tokenizer *t)
{
	return t ? t->eos : -1;
}

const char *nestrt_tokenizer_token(const nestrt_tokenizer *t, int32_t id, size_t *len, int *type)
{
	if (!t || id < 0 || id >= t->n)
		return NULL;
	if (len)
		*len = t->off[id + 1] - t->off[id];
	if (type)
		*type = t->type[id];
	return t->text + t->off[id];
}

/* ------------------------------------------------------------ encoding */

/* What an encoding writes: ids up to cap, and the count of all. */
typedef struct {
	int32_t *ids;
	int cap;
	int n;
	const nestrt_tokenizer *t;
	nestrt_error *err;
	/* scratch, grown as needed and kept across words */
	char *buf;
	size_t bufcap;
	struct Sym { int prev, next; size_t at, n; } *sym;
	size_t symcap;
	struct Big { int left, right; float score; int rank; size_t size; } *heap;
	size_t nheap, heapcap;
	uint32_t *cpt;
	size_t *cpos;
	size_t cptcap;
} Enc;

static int push(Enc *e, int32_t id)
{
	if (e->n == INT_MAX)
		return nestrt__seterr(e->err, "%s: more than %d tokens", e->t->path, INT_MAX);
	if (e->n < e->cap)
		e->ids[e->n] = id;
	e->n++;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

/* The bigram queue: SPM's highest score first, BPE's lowest rank; then the leftmost. */
static int before(const Enc *e, const struct Big *a, const struct Big *b)
{
	if (e->t->kind == SPM) {
		if (a->score != b->score)
			return a->score > b->score;
	} else if (a->rank != b->rank)
		return a->rank < b->rank;
	return a->left < b->left;
}

static int heap_push(Enc *e, struct Big b)
{
	size_t hc = e->heapcap;
	if (grow((void **)&e->heap, &hc, e->nheap + 1, sizeof *e->heap) < 0)
		return nestrt__seterr(e->err, "out of memory");
	e->heapcap = hc;
	size_t i = e->nheap++;
	while (i > 0 && before(e, &b, &e->heap[(i - 1) / 2])) {
		e->heap[i] = e->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	e->heap[i] = b;
	return 0;
}

static struct Big heap_pop(Enc *e)
{
	struct Big top = e->heap[0], last = e->heap[--e->nheap];
	size_t i = 0, n = e->nheap;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && before(e, &e->heap[c + 1], &e->heap[c]))
			c++;
		if (!before(e, &e->heap[c], &last))
			break;
		e->heap[i] = e->heap[c];
		i = c;
	}
	if (n)
		e->heap[i] = last;
	return top;
}

/* Symbols of s[0..n) at their UTF-8 lengths (llama.cpp's split, cut at the end). */
static int split_symbols(Enc *e, size_t n, int *count)
{
	size_t k = 0;
	for (size_t at = 0; at < n; k++)
		at += len_utf8((unsigned char)e->buf[at]) < n - at ? len_utf8((unsigned char)e->buf[at]) : n - at;
	size_t sc = e->symcap;
	if (grow((void **)&e->sym, &sc, k + 1, sizeof *e->sym) < 0)
		return nestrt__seterr(e->err, "out of memory");
	e->symcap = sc;
	k = 0;
	for (size_t at = 0; at < n; k++) {
		size_t l = len_utf8((unsigned char)e->buf[at]);
		if (l > n - at)
			l = n - at;
		e->sym[k] = (struct Sym){(int)k - 1, at + l == n ? -1 : (int)k + 1, at, l};
		at += l;
	}
	*count = (int)k;
	return 0;
}

/* SPM: the pair (left, right) into the queue when it makes a token. */
static int spm_bigram(Enc *e, int left, int right)
{
	if (left < 0 || right < 0)
		return 0;
	size_t size = e->sym[left].n + e->sym[right].n;
	int32_t id = token_of(e->t, e->buf + e->sym[left].at, size);
	if (id < 0)
		return 0;
	return heap_push(e, (struct Big){left, right, e->t->score[id], 0, size});
}

/* SPM over e->buf[0..n) (spaces already escaped). */
static int spm_text(Enc *e, size_t n)
{
	const nestrt_tokenizer *t = e->t;
	int count;
	if (split_symbols(e, n, &count) < 0)
		return -1;
	e->nheap = 0;
	for (int i = 1; i < count; i++)
		if (spm_bigram(e, i - 1, i) < 0)
			return -1;
	while (e->nheap) {
		struct Big b = heap_pop(e);
		struct Sym *l = &e->sym[b.left], *r = &e->sym[b.right];
		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			e->sym[r->next].prev = b.left;
		if (spm_bigram(e, l->prev, b.left) < 0 || spm_bigram(e, b.left, e->sym[b.left].next) < 0)
			return -1;
	}
	for (int i = count ? 0 : -1; i != -1; i = e->sym[i].next) {
		const struct Sym *s = &e->sym[i];
		int32_t id = token_of(t, e->buf + s->at, s->n);
		if (id >= 0) {
			if (push(e, id) < 0)
				return -1;
			continue;
		}
		for (size_t j = 0; j < s->n; j++) {
			unsigned char c = (unsigned char)e->buf[s->at + j];
			if (t->byte_token[c] < 0)
				return nestrt__seterr(e->err, "%s: no token for byte 0x%02X (no <0x%02X> token)", t->path, c, c);
			if (push(e, t->byte_token[c]) < 0)
				return -1;
		}
	}
	return 0;
}

/* A fragment of llama text: a space before it when asked, spaces as U+2581. */
static int spm_fragment(Enc *e, const char *s, size_t n, int space)
{
	size_t need = 3 * (n + 1);
	if (grow((void **)&e->buf, &e->bufcap, need, 1) < 0)
		return nestrt__seterr(e->err, "out of memory");
	size_t k = 0;
	if (space) {
		memcpy(e->buf, "\xe2\x96\x81", 3);
		k = 3;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == ' ') {
			memcpy(e->buf + k, "\xe2\x96\x81", 3);
			k += 3;
		} else
			e->buf[k++] = s[i];
	}
	return spm_text(e, k);
}

/* BPE: the pair (left, right) into the queue when a merge makes it. */
static int bpe_bigram(Enc *e, int left, int right, char *scratch)
{
	if (left < 0 || right < 0)
		return 0;
	const struct Sym *l = &e->sym[left], *r = &e->sym[right];
	memcpy(scratch, e->buf + l->at, l->n);
	scratch[l->n] = ' ';
	memcpy(scratch + l->n + 1, e->buf + r->at, r->n);
	int32_t rank = table_find(&e->t->merges, e->t->mtext, e->t->moff, scratch, l->n + 1 + r->n);
	if (rank < 0)
		return 0;
	return heap_push(e, (struct Big){left, right, 0, rank, l->n + r->n});
}

/* One word of byte-level BPE: s[0..n) of the text, its bytes mapped to code points. */
static int bpe_word(Enc *e, const char *s, size_t n)
{
	const nestrt_tokenizer *t = e->t;
	if (grow((void **)&e->buf, &e->bufcap, 2 * n + 2 * n + 1, 1) < 0)
		return nestrt__seterr(e->err, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += encode_cpt(t->bmap[(unsigned char)s[i]], e->buf + k);
	char *scratch = e->buf + k; /* room for two symbols and a space: at most k + 1 */
	if (t->ignore_merges) {
		int32_t id = token_of(t, e->buf, k);
		if (id >= 0)
			return push(e, id);
	}
	int count;
	if (split_symbols(e, k, &count) < 0)
		return -1;
	e->nheap = 0;
	for (int i = 1; i < count; i++)
		if (bpe_bigram(e, i - 1, i, scratch) < 0)
			return -1;
	while (e->nheap) {
		struct Big b = heap_pop(e);
		struct Sym *l = &e->sym[b.left], *r = &e->sym[b.right];
		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			e->sym[r->next].prev = b.left;
		if (bpe_bigram(e, l->prev, b.left, scratch) < 0 || bpe_bigram(e, b.left, e->sym[b.left].next, scratch) < 0)
			return -1;
	}
	for (int i = 0; i < count; i++) {
		const struct Sym *y = &e->sym[i];
		if (y->n == 0)
			continue;
		int32_t id = token_of(t, e->buf + y->at, y->n);
		if (id >= 0) {
			if (push(e, id) < 0)
				return -1;
			continue;
		}
		/* llama.cpp: each byte of the mapped text that is a token alone (others are dropped) */
		for (size_t j = 0; j < y->n; j++) {
			id = token_of(t, e->buf + y->at + j, 1);
			if (id >= 0 && push(e, id) < 0)
				return -1;
		}
	}
	return 0;
}

static uint32_t cpt_at(const uint32_t *cpt, size_t m, size_t p)
{
	return p < m ? cpt[p] : 0xffffffffu;
}

static int class_at(const uint32_t *cpt, size_t m, size_t p)
{
	return p < m ? cpt_class(cpt[p]) : 0;
}

/* Spans of code points [sp[2i], sp[2i+1]) of the text: the words, as the
 * pre-tokenizer's stages cut them. */
typedef struct {
	size_t *sp;
	size_t n, cap;
} Spans;

static int span_add(Spans *o, size_t a, size_t b)
{
	if (b <= a)
		return 0;
	if (grow((void **)&o->sp, &o->cap, 2 * (o->n + 1), sizeof *o->sp) < 0)
		return -1;
	o->sp[2 * o->n] = a;
	o->sp[2 * o->n + 1] = b;
	o->n++;
	return 0;
}

/* GPT-2's and LLaMA-3's expressions on span [lo, m) (unicode.cpp's
 * unicode_regex_split_custom_gpt2 and _llama3): the words into o. */
static int split_custom(const uint32_t *cpt, size_t lo, size_t m, int llama3, Spans *o)
{
/* (functions, not macros: their arguments have side effects) */
#define CPT(p) cpt_at(cpt, m, (p))
#define CLS(p) class_at(cpt, m, (p))
#define LOWER(c) ((c) >= 'A' && (c) <= 'Z' ? (c) + 32 : (c))
	size_t prev = lo;
	/* a word ends at code point `end` */
#define WORD(end)                                                                                                      \
	do {                                                                                                               \
		size_t end_ = (end);                                                                                           \
		if (end_ > prev) {                                                                                             \
			if (span_add(o, prev, end_) < 0)                                                                           \
				return -1;                                                                                             \
			prev = end_;                                                                                               \
		}                                                                                                              \
	} while (0)
	for (size_t pos = lo; pos < m;) {
		uint32_t c = CPT(pos);
		int f = CLS(pos);
		/* 's|'t|'re|'ve|'m|'ll|'d (LLaMA-3: either case) */
		if (c == '\'' && pos + 1 < m) {
			uint32_t c1 = CPT(pos + 1);
			if (llama3)
				c1 = LOWER(c1);
			if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
				WORD(pos + 2);
				pos += 2;
				continue;
			}
			if (pos + 2 < m) {
				uint32_t c2 = CPT(pos + 2);
				if (llama3)
					c2 = LOWER(c2);
				if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
					WORD(pos + 3);
					pos += 3;
					continue;
				}
			}
		}
		if (!llama3) {
			int f2 = c == ' ' ? CLS(pos + 1) : f;
			/*  ?\p{L}+ */
			if (f2 & C_LETTER) {
				pos += c == ' ';
				while (f2 & C_LETTER)
					f2 = CLS(++pos);
				WORD(pos);
				continue;
			}
			/*  ?\p{N}+ */
			if (f2 & C_NUMBER) {
				pos += c == ' ';
				while (f2 & C_NUMBER)
					f2 = CLS(++pos);
				WORD(pos);
				continue;
			}
			/*  ?[^\s\p{L}\p{N}]+ */
			if (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2) {
				pos += c == ' ';
				while (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2)
					f2 = CLS(++pos);
				WORD(pos);
				continue;
			}
			size_t ns = 0;
			while (CLS(pos + ns) & C_SPACE)
				ns++;
			/* \s+(?!\S) */
			if (ns > 1 && pos + ns < m) {
				pos += ns - 1;
				WORD(pos);
				continue;
			}
			/* \s+ */
			if (ns > 0) {
				pos += ns;
				WORD(pos);
				continue;
			}
			WORD(++pos);
			continue;
		}
		/* [^\r\n\p{L}\p{N}]?\p{L}+ */
		if (!(c == '\r' || c == '\n' || (f & C_NUMBER))) {
			if ((f & C_LETTER) || (CLS(pos + 1) & C_LETTER)) {
				pos++;
				while (CLS(pos) & C_LETTER)
					pos++;
				WORD(pos);
				continue;
			}
		}
		/* \p{N}{1,3} */
		if (f & C_NUMBER) {
			size_t ini = pos;
			while (CLS(pos) & C_NUMBER) {
				if (++pos - ini >= 3) {
					WORD(pos);
					ini = pos;
				}
			}
			WORD(pos);
			continue;
		}
		/*  ?[^\s\p{L}\p{N}]+[\r\n]* */
		int f2 = c == ' ' ? CLS(pos + 1) : f;
		if (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f) {
			pos += c == ' ';
			while (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2)
				f2 = CLS(++pos);
			uint32_t c2 = CPT(pos);
			while (c2 == '\r' || c2 == '\n')
				c2 = CPT(++pos);
			WORD(pos);
			continue;
		}
		size_t ns = 0, last_rn = 0;
		while (CLS(pos + ns) & C_SPACE) {
			uint32_t c2 = CPT(pos + ns);
			if (c2 == '\r' || c2 == '\n')
				last_rn = pos + ns + 1;
			ns++;
		}
		/* \s*[\r\n]+ */
		if (last_rn > 0) {
			pos = last_rn;
			WORD(pos);
			continue;
		}
		/* \s+(?!\S) */
		if (ns > 1 && pos + ns < m) {
			pos += ns - 1;
			WORD(pos);
			continue;
		}
		/* \s+ */
		if (ns > 0) {
			pos += ns;
			WORD(pos);
			continue;
		}
		WORD(++pos);
	}
#undef CPT
#undef CLS
#undef LOWER
#undef WORD
	return 0;
}

/* A run of one class of code points as a word of its own, the rest between
 * (std::regex_iterator's matches and what lies between them, as
 * unicode_regex_split_stl cuts): in(c) says which class. */
static int split_runs(const uint32_t *cpt, size_t lo, size_t hi, int (*in)(uint32_t), Spans *o)
{
	size_t prev = lo;
	for (size_t p = lo; p < hi;) {
		if (!in(cpt[p])) {
			p++;
			continue;
		}
		size_t q = p;
		while (q < hi && in(cpt[q]))
			q++;
		if (span_add(o, prev, p) < 0 || span_add(o, p, q) < 0)
			return -1;
		prev = p = q;
	}
	return span_add(o, prev, hi);
}

/* [\p{P}\$\+<=>\^~\|]: punctuation, and ASCII's symbols but the backquote */
static int is_punct_run(uint32_t c)
{
	if (c < 0x80)
		return c > 0x20 && c < 0x7f && !(c >= '0' && c <= '9') && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && c != '`';
	return in_ranges(nestrt__puncts, sizeof nestrt__puncts / sizeof *nestrt__puncts, c);
}

static int is_number(uint32_t c)
{
	return (cpt_class(c) & C_NUMBER) != 0;
}

/* [0-9][0-9][0-9]: three ASCII digits in a row, leftmost first */
static int split_triples(const uint32_t *cpt, size_t lo, size_t hi, Spans *o)
{
	size_t prev = lo;
	for (size_t p = lo; p + 3 <= hi;) {
		int d = 1;
		for (size_t k = p; k < p + 3; k++)
			d &= cpt[k] >= '0' && cpt[k] <= '9';
		if (!d) {
			p++;
			continue;
		}
		if (span_add(o, prev, p) < 0 || span_add(o, p, p + 3) < 0)
			return -1;
		prev = p += 3;
	}
	return span_add(o, prev, hi);
}

/* The pre-tokenizer's split of s[0..n) into words (unicode.cpp's
 * unicode_regex_split with llama.cpp's expressions of the file's
 * tokenizer.ggml.pre), each word to bpe_word. */
static int bpe_fragment(Enc *e, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t cc = e->cptcap, cc2 = e->cptcap;
	if (grow((void **)&e->cpt, &cc, n + 1, sizeof *e->cpt) < 0 ||
	    grow((void **)&e->cpos, &cc2, n + 1, sizeof *e->cpos) < 0)
		return nestrt__seterr(e->err, "out of memory");
	e->cptcap = cc < cc2 ? cc : cc2;
	size_t m = 0;
	for (size_t at = 0; at < n; m++) {
		size_t l;
		e->cpt[m] = decode_cpt(u + at, n - at, &l);
		e->cpos[m] = at;
		at += l;
	}
	e->cpos[m] = n;
	/* the stages, each cutting every span of the one before */
	int stages[4], ns = 0;
	if (e->t->pre == PRE_DEFAULT) {
		/* llama.cpp's default: [\p{P}\$\+<=>\^~\|]+, GPT-2's, \p{N}+, [0-9][0-9][0-9] */
		stages[ns++] = 1;
		stages[ns++] = 2;
		stages[ns++] = 3;
		stages[ns++] = 4;
	} else
		stages[ns++] = e->t->pre == PRE_LLAMA3 ? 5 : 2;
	Spans a = {0}, b = {0};
	int rc = span_add(&a, 0, m);
	for (int k = 0; k < ns && rc == 0; k++) {
		b.n = 0;
		for (size_t i = 0; i < a.n && rc == 0; i++) {
			size_t lo = a.sp[2 * i], hi = a.sp[2 * i + 1];
			switch (stages[k]) {
			case 1: rc = split_runs(e->cpt, lo, hi, is_punct_run, &b); break;
			case 2: rc = split_custom(e->cpt, lo, hi, 0, &b); break;
			case 3: rc = split_runs(e->cpt, lo, hi, is_number, &b); break;
			case 4: rc = split_triples(e->cpt, lo, hi, &b); break;
			default: rc = split_custom(e->cpt, lo, hi, 1, &b); break;
			}
		}
		Spans t = a;
		a = b;
		b = t;
	}
	if (rc < 0)
		rc = nestrt__seterr(e->err, "out of memory");
	for (size_t i = 0; i < a.n && rc == 0; i++) {
		size_t b0 = e->cpos[a.sp[2 * i]], b1 = e->cpos[a.sp[2 * i + 1]];
		rc = bpe_word(e, s + b0, b1 - b0);
	}
	free(a.sp);
	free(b.sp);
	return rc;
}

/* A piece of the input: text [at, at + n), or a special token (id >= 0). */
typedef struct {
	size_t at, n;
	int32_t id;
} Frag;

/* llama.cpp's tokenizer_st_partition: each special token in turn (longest
 * first) cut out of every text fragment, left to right. */
static int partition(const nestrt_tokenizer *t, const char *text, size_t len, int parse_special, Frag **out,
                     size_t *nout, nestrt_error *err)
{
	size_t n = 0, cap = 0;
	Frag *f = NULL;
	if (len) {
		if (grow((void **)&f, &cap, 1, sizeof *f) < 0)
			return nestrt__seterr(err, "out of memory");
		f[n++] = (Frag){0, len, -1};
	}
	for (int k = 0; k < t->nspecial; k++) {
		int32_t id = t->special[k];
		if (!parse_special && t->type[id] != T_USER)
			continue;
		const char *tok = t->text + t->off[id];
		size_t tl = t->off[id + 1] - t->off[id];
		for (size_t i = 0; i < n; i++) {
			if (f[i].id >= 0 || f[i].n < tl)
				continue;
			const char *base = text + f[i].at;
			const char *hit = NULL;
			for (size_t p = 0; p + tl <= f[i].n && !hit; p++)
				if (base[p] == tok[0] && !memcmp(base + p, tok, tl))
					hit = base + p;
			if (!hit)
				continue;
			/* the fragment becomes: left text, the token, the rest (looked at next) */
			size_t at = f[i].at, fn = f[i].n, h = (size_t)(hit - text);
			size_t pieces = (h > at) + 1 + (h + tl < at + fn);
			if (grow((void **)&f, &cap, n + pieces, sizeof *f) < 0) {
				free(f);
				return nestrt__seterr(err, "out of memory");
			}
			memmove(f + i + pieces, f + i + 1, (n - i - 1) * sizeof *f);
			n += pieces - 1;
			size_t j = i;
			if (h > at)
				f[j++] = (Frag){at, h - at, -1};
			f[j++] = (Frag){h, tl, id};
			if (h + tl < at + fn)
				f[j] = (Frag){h + tl, at + fn - h - tl, -1};
			i = j - 1; /* the loop steps onto the rest */
		}
	}
	*out = f;
	*nout = n;
	return 0;
}

int nestrt_tokenize(const nestrt_tokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int cap,
                    nestrt_error *err)
{
	if (!t)
		return nestrt__seterr(err, "no tokenizer");
	if (!text && len)
		return nestrt__seterr(err, "%s: text is NULL", t->path);
	if (cap < 0 || (cap > 0 && !ids))
		return nestrt__seterr(err, "%s: no room for ids (cap %d)", t->path, cap);
	if (flags & ~(NESTRT_TOKENIZE_ADD_SPECIAL | NESTRT_TOKENIZE_PARSE_SPECIAL))
		return nestrt__seterr(err, "%s: unknown tokenize flags 0x%x", t->path, (unsigned)flags);
	Frag *f = NULL;
	size_t nf = 0;
	if (partition(t, text, len, flags & NESTRT_TOKENIZE_PARSE_SPECIAL, &f, &nf, err) < 0)
		return -1;
	Enc e = {.ids = ids, .cap = cap, .t = t, .err = err};
	int rc = 0, add = flags & NESTRT_TOKENIZE_ADD_SPECIAL;
	if (add && t->add_bos)
		rc = push(&e, t->bos);
	int prev_special = 1;
	for (size_t i = 0; i < nf && rc == 0; i++) {
		if (f[i].id >= 0) {
			rc = push(&e, f[i].id);
			prev_special = 1;
		} else if (t->kind == SPM) {
			rc = spm_fragment(&e, text + f[i].at, f[i].n, t->add_space_prefix && prev_special);
			prev_special = 0;
		} else
			rc = bpe_fragment(&e, text + f[i].at, f[i].n);
	}
	if (rc == 0 && add && t->add_eos)
		rc = push(&e, t->eos);
	free(f);
	free(e.buf);
	free(e.sym);
	free(e.heap);
	free(e.cpt);
	free(e.cpos);
	return rc < 0 ? -1 : e.n;
}

/* ------------------------------------------------------------ decoding */

/* Appends s[0..n) at *k of buf (cap bytes), counting what does not fit. */
static void put(char *buf, size_t cap, size_t *k, const char *s, size_t n)
{
	if (*k < cap)
		memcpy(buf + *k, s, n < cap - *k ? n : cap - *k);
	*k += n;
}

/* The piece of token id into buf at *k (as token_to_piece). */
static void piece(const nestrt_tokenizer *t, int32_t id, int special, char *buf, size_t cap, size_t *k)
{
	const char *s = t->text + t->off[id];
	size_t n = t->off[id + 1] - t->off[id];
	switch (t->type[id]) {
	case T_CONTROL:
	case T_UNKNOWN:
		if (special)
			put(buf, cap, k, s, n);
		return;
	case T_USER:
		put(buf, cap, k, s, n);
		return;
	case T_BYTE: {
		unsigned v = 0;
		for (int i = 3; i < 5; i++)
			v = v * 16 + (unsigned)(s[i] <= '9' ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10);
		char c = (char)v;
		put(buf, cap, k, &c, 1);
		return;
	}
	case T_NORMAL:
		if (t->kind == SPM) {
			for (size_t i = 0; i < n; i++) {
				if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
					put(buf, cap, k, " ", 1);
					i += 2;
				} else
					put(buf, cap, k, s + i, 1);
			}
			return;
		}
		for (size_t i = 0; i < n;) {
			size_t l;
			uint32_t c = decode_cpt((const unsigned char *)s + i, n - i, &l);
			int b = c < 324 ? t->binv[c] : -1;
			if (b >= 0) {
				char x = (char)b;
				put(buf, cap, k, &x, 1);
			} else {
				/* as llama.cpp's llama_decode_text */
				char hex[16];
				put(buf, cap, k, "[UNK_BYTE_0x", 12);
				for (size_t j = 0; j < l; j++) {
					snprintf(hex, sizeof hex, "%02x", (unsigned char)s[i + j]);
					put(buf, cap, k, hex, 2);
				}
				put(buf, cap, k, s, n);
				put(buf, cap, k, "]", 1);
			}
			i += l;
		}
		return;
	default: /* unused, undefined: nothing, as llama.cpp */
		return;
	}
}

int nestrt_token_to_piece(const nestrt_tokenizer *t, int32_t id, int flags, char *buf, int cap, nestrt_error *err)
{
	if (!t)
		return nestrt__seterr(err, "no tokenizer");
	if (id < 0 || id >= t->n)
		return nestrt__seterr(err, "%s: token %lld is outside the vocabulary of %d tokens", t->path, (long long)id,
		                      (int)t->n);
	if (cap < 0 || (cap > 0 && !buf))
		return nestrt__seterr(err, "%s: no room for the piece (cap %d)", t->path, cap);
	size_t k = 0;
	piece(t, id, flags & NESTRT_DETOKENIZE_SPECIAL, buf, (size_t)cap, &k);
	return (int)k;
}

int nestrt_detokenize(const nestrt_tokenizer *t, const int32_t *ids, int n, int flags, char *buf, int cap,
                      nestrt_error *err)
{
	if (!t)
		return nestrt__seterr(err, "no tokenizer");
	if (n < 0 || (n > 0 && !ids))
		return nestrt__seterr(err, "%s: no ids (n %d)", t->path, n);
	if (cap < 0 || (cap > 0 && !buf))
		return nestrt__seterr(err, "%s: no room for the text (cap %d)", t->path, cap);
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= t->n)
			return nestrt__seterr(err, "%s: id %d (element %d) is outside the vocabulary of %d tokens", t->path,
			                      (int)ids[i], i, (int)t->n);
	size_t k = 0;
	int after_special = 1;
	char local[256];
	for (int i = 0; i < n; i++) {
		int ty = t->type[ids[i]];
		int special = ty == T_CONTROL || ty == T_UNKNOWN || ty == T_USER;
		int dflags = flags & NESTRT_DETOKENIZE_SPECIAL;
		size_t len = 0;
		piece(t, ids[i], dflags, NULL, 0, &len);
		char *p = len <= sizeof local ? local : malloc(len);
		if (!p)
			return nestrt__seterr(err, "%s: out of memory", t->path);
		size_t got = 0;
		piece(t, ids[i], dflags, p, len, &got);
		/* the space the encoder put before text that starts the input or follows a special token */
		size_t skip = !special && after_special && t->add_space_prefix && !(flags & NESTRT_DETOKENIZE_KEEP_SPACE) &&
		              len > 0 && p[0] == ' ';
		put(buf, (size_t)cap, &k, p + skip, len - skip);
		if (p != local)
			free(p);
		if (!(ty == T_UNUSED || ty == T_UNDEFINED))
			after_special = special;
		if (k > INT_MAX)
			return nestrt__seterr(err, "%s: the text passes %d bytes", t->path, INT_MAX);
	}
	return (int)k;
}

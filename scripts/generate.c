/* generate.c - greedy generation with a model compiled by nestc: the prompt
 * runs through the model's prefill entry (any length up to its bound), then
 * each new token through decode, one position at a time, against the
 * sequence's key/value cache.
 *
 * Build with the model's objects and -DMODEL=gpt2 -DMODEL_UP=GPT2 (or llama,
 * LLAMA), the C prefix of the header MODEL.h and its capitals. Usage:
 *   generate WEIGHTS N TOKEN... [--logits OUT.bin]
 * prints the generated ids and the tokens per second of the decode steps;
 *   generate WEIGHTS N --prompt TEXT [--vocab FILE.gguf] [--logits OUT.bin]
 * tokenizes TEXT with the tokenizer of a GGUF file (--vocab, else WEIGHTS
 * itself: nestrt_tokenize with BOS as the file says and special tokens'
 * texts taken as those tokens), generates at most N tokens and prints their
 * text to stdout as they come (each piece flushed at once, but the bytes
 * of a UTF-8 character that the next token completes held back until it
 * does), stopping at the tokenizer's EOS (not printed); the counts and times
 * go to stderr. With --logits, the logits of every step (the prompt's last
 * position, then each decoded one) go to OUT.bin as float32, one row of V
 * per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef MODEL
#define MODEL gpt2
#define MODEL_UP GPT2
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(a) #a
#define STR(a) STR2(a)
#define HEADER STR(MODEL.h)
#include HEADER

#define M_(x) CAT(MODEL, x)
#define UP_(x) CAT(MODEL_UP, x)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Text as it is generated: bytes go out as soon as they end a whole UTF-8
 * character (or one that cannot be completed); a character cut between two
 * tokens waits for the rest. */
typedef struct {
	char pending[8];
	int n;
} utf8_out;

/* The bytes of a[0..n) that may go out now: all but a last, incomplete sequence. */
static int utf8_complete(const unsigned char *a, int n)
{
	for (int back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = a[n - back];
		if ((c & 0xc0) == 0x80)
			continue;   /* a continuation byte: look further back */
		int need = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 1;
		return need > back ? n - back : n;
	}
	return n;
}

static void emit(utf8_out *o, const char *s, int len, int last)
{
	for (int i = 0; i < len || (last && o->n); ) {
		if (i < len)
			o->pending[o->n++] = s[i++];
		int k = last && i == len ? o->n : utf8_complete((const unsigned char *)o->pending, o->n);
		if (o->n == (int)sizeof o->pending)
			k = o->n;   /* not a character any more: out with it */
		fwrite(o->pending, 1, (size_t)k, stdout);
		memmove(o->pending, o->pending + k, (size_t)(o->n - k));
		o->n -= k;
	}
	fflush(stdout);
}

/* Token tok's piece (nestrt_token_to_piece) out through o. */
static int emit_token(utf8_out *o, const nestrt_tokenizer *tk, int32_t tok)
{
	char small[64];
	nestrt_error err;
	int n = nestrt_token_to_piece(tk, tok, 0, small, (int)sizeof small, &err);
	if (n < 0) {
		fprintf(stderr, "\ngenerate: %s\n", err.message);
		return -1;
	}
	char *p = n <= (int)sizeof small ? small : malloc((size_t)n);
	if (!p) {
		fprintf(stderr, "\ngenerate: out of memory\n");
		return -1;
	}
	if (p != small)
		nestrt_token_to_piece(tk, tok, 0, p, n, &err);
	emit(o, p, n, 0);
	if (p != small)
		free(p);
	return 0;
}

static int argmax(const float *v, int64_t n)
{
	int64_t best = 0;
	for (int64_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return (int)best;
}

int main(int argc, char **argv)
{
	const char *logits_path = NULL, *prompt_text = NULL, *vocab_path = NULL;
	int nargs = 0;
	char **args = calloc((size_t)argc + 1, sizeof(char *));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--logits") && i + 1 < argc)
			logits_path = argv[++i];
		else if (!strcmp(argv[i], "--prompt") && i + 1 < argc)
			prompt_text = argv[++i];
		else if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
			vocab_path = argv[++i];
		else
			args[nargs++] = argv[i];
	}
	if (prompt_text ? nargs != 2 : nargs < 3 || vocab_path) {
		fprintf(stderr,
		        "usage: %s WEIGHTS N TOKEN... [--logits OUT.bin]\n"
		        "       %s WEIGHTS N --prompt TEXT [--vocab FILE.gguf] [--logits OUT.bin]\n",
		        argv[0], argv[0]);
		free(args);
		return 2;
	}
	char *end;
	long n = strtol(args[1], &end, 10);
	if (*end || n < 0) {
		fprintf(stderr, "generate: N must be a number of tokens, not '%s'\n", args[1]);
		free(args);
		return 2;
	}
	int64_t ctx = UP_(_PREFILL_T_MAX);
	int64_t V = UP_(_DECODE_OUT_NUMEL);
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(args[0], &err);
	if (!w) {
		fprintf(stderr, "generate: %s\n", err.message);
		free(args);
		return 1;
	}
	nestrt_tokenizer *tk = NULL;
	int64_t T;
	int32_t *prompt;
	if (prompt_text) {
		tk = vocab_path ? nestrt_tokenizer_open(vocab_path, &err) : nestrt_tokenizer_from_weights(w, &err);
		if (!tk) {
			fprintf(stderr, "generate: %s%s\n", err.message,
			        vocab_path ? "" : " (give the tokenizer's GGUF file with --vocab)");
			nestrt_weights_close(w);
			free(args);
			return 1;
		}
		if (nestrt_tokenizer_n_vocab(tk) > V) {
			fprintf(stderr, "generate: the tokenizer has %d tokens, more than the model's %lld\n",
			        nestrt_tokenizer_n_vocab(tk), (long long)V);
			nestrt_tokenizer_free(tk);
			nestrt_weights_close(w);
			free(args);
			return 1;
		}
		int flags = NESTRT_TOKENIZE_ADD_SPECIAL | NESTRT_TOKENIZE_PARSE_SPECIAL;
		int count = nestrt_tokenize(tk, prompt_text, strlen(prompt_text), flags, NULL, 0, &err);
		prompt = count > 0 ? calloc((size_t)count, sizeof(int32_t)) : NULL;
		if (count <= 0 || !prompt || nestrt_tokenize(tk, prompt_text, strlen(prompt_text), flags, prompt, count, &err) != count) {
			fprintf(stderr, "generate: %s\n", count < 0 ? err.message : count == 0 ? "the prompt has no tokens" : "out of memory");
			free(prompt);
			nestrt_tokenizer_free(tk);
			nestrt_weights_close(w);
			free(args);
			return count == 0 ? 2 : 1;
		}
		T = count;
	} else {
		T = nargs - 2;
		prompt = calloc((size_t)T, sizeof(int32_t));
		for (int64_t i = 0; i < T; i++) {
			long v = strtol(args[2 + i], &end, 10);
			if (*end || v < 0 || v > INT32_MAX) {
				fprintf(stderr, "generate: '%s' is not a token id\n", args[2 + i]);
				free(prompt);
				nestrt_weights_close(w);
				free(args);
				return 2;
			}
			prompt[i] = (int32_t)v;
		}
	}
	if (T + n > ctx) {
		fprintf(stderr, "generate: %lld prompt tokens and %ld new ones exceed the context of %lld\n", (long long)T, n,
		        (long long)ctx);
		free(prompt);
		nestrt_tokenizer_free(tk);
		nestrt_weights_close(w);
		free(args);
		return 2;
	}
	M_() *m = M_(_new)(w, &err);
	if (!m) {
		fprintf(stderr, "generate: %s\n", err.message);
		return 1;
	}
	M_(_seq) *s = M_(_seq_new)(m, &err);
	if (!s) {
		fprintf(stderr, "generate: %s\n", err.message);
		return 1;
	}
	float *logits = malloc(sizeof(float) * (size_t)(T * V));
	FILE *lf = logits_path ? fopen(logits_path, "wb") : NULL;
	if (logits_path && !lf) {
		perror(logits_path);
		return 1;
	}
	/* ids mode: the report on stdout; text mode: the text there, the report on stderr */
	FILE *rep = tk ? stderr : stdout;
	double t0 = now();
	if (M_(_prefill)(m, s, T, prompt, logits) != 0) {
		fprintf(stderr, "generate: %s\n", M_(_error)(m));
		return 1;
	}
	double t1 = now();
	const float *last = logits + (T - 1) * V;
	if (lf)
		fwrite(last, sizeof(float), (size_t)V, lf);
	int32_t tok = argmax(last, V);
	fprintf(rep, "prompt: %lld tokens, prefill %.2f ms\n", (long long)T, (t1 - t0) * 1e3);
	if (!tk)
		printf("ids:");
	fflush(rep);
	utf8_out out = {.n = 0};
	int32_t eos = tk ? nestrt_tokenizer_eos(tk) : -1;
	long made = 0;
	int at_eos = 0;
	double t2 = now();
	for (long i = 0; i < n; i++) {
		if (tk && tok == eos) {
			at_eos = 1;
			break;
		}
		made++;
		if (!tk)
			printf(" %d", tok);
		else if (tok >= nestrt_tokenizer_n_vocab(tk)) {
			fprintf(stderr, "\ngenerate: generated id %d is outside the tokenizer's %d tokens\n", (int)tok,
			        nestrt_tokenizer_n_vocab(tk));
			return 1;
		} else if (emit_token(&out, tk, tok) < 0)
			return 1;
		if (i + 1 == n)
			break;
		if (M_(_decode)(m, s, T + i, &tok, logits) != 0) {
			fprintf(stderr, "\ngenerate: %s\n", M_(_error)(m));
			return 1;
		}
		if (lf)
			fwrite(logits, sizeof(float), (size_t)V, lf);
		tok = argmax(logits, V);
	}
	double t3 = now();
	if (tk)
		emit(&out, NULL, 0, 1);
	else
		printf("\n");
	if (tk)
		fprintf(rep, "\n%ld tokens%s\n", made, at_eos ? ", stopped at EOS" : "");
	if (made > 1)
		fprintf(rep, "decode: %ld steps, %.2f ms per token, %.1f tokens/s\n", made - 1,
		        (t3 - t2) * 1e3 / (double)(made - 1), (double)(made - 1) / (t3 - t2));
	if (lf && fclose(lf) != 0) {
		perror(logits_path);
		return 1;
	}
	M_(_seq_free)(s);
	M_(_free)(m);
	nestrt_tokenizer_free(tk);
	nestrt_weights_close(w);
	free(logits);
	free(prompt);
	free(args);
	return 0;
}

/* driver.c - the tokenizer's C API for tests/tokenize/run.py. Frees all it
 * allocates (check-asan runs it under LeakSanitizer).
 *
 *   driver open FILE.gguf
 *       "ok N_VOCAB BOS EOS", or "error: MESSAGE" (exit 1)
 *   driver openw FILE.gguf
 *       the same through nestrt_weights_open and nestrt_tokenizer_from_weights
 *   driver tokenize FILE.gguf < CASES
 *       each line "FLAGS HEX" (FLAGS: nestrt_tokenize's, in decimal; HEX: the
 *       text's bytes, or "-" for none) prints "ids ID... | HEX" (the ids, then
 *       the hex of nestrt_detokenize of them, with NESTRT_DETOKENIZE_SPECIAL
 *       when FLAGS parse special tokens), or "error: MESSAGE". Each case is
 *       also run with too little room (cap 0 and half): the counts must agree
 *       and the ids written must be the prefix; a disagreement is an "error:".
 *   driver piece FILE.gguf FLAGS ID...
 *       the hex of each id's piece (nestrt_token_to_piece), one a line, or
 *       "error: MESSAGE" for one outside the vocabulary.
 *   driver detok FILE.gguf FLAGS ID...
 *       the hex of nestrt_detokenize of the ids with FLAGS, or "error: MESSAGE".
 *   driver token FILE.gguf ID...
 *       "HEX TYPE" of each id's text (nestrt_tokenizer_token), "none" outside.
 *   driver api FILE.gguf
 *       argument checks of the API: prints "ok NAME" or "FAIL NAME" lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestrt.h"

static int unhex(const char *h, char **out, size_t *len)
{
	size_t n = strlen(h);
	if (!strcmp(h, "-"))
		n = 0;
	if (n % 2)
		return -1;
	char *b = malloc(n / 2 + 1);
	if (!b)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1) {
			free(b);
			return -1;
		}
		b[i] = (char)v;
	}
	*out = b;
	*len = n / 2;
	return 0;
}

static void puthex(const char *s, int n)
{
	if (n == 0)
		fputs("-", stdout);
	for (int i = 0; i < n; i++)
		printf("%02x", (unsigned char)s[i]);
}

static int tokenize_case(const nestrt_tokenizer *t, int flags, const char *text, size_t len)
{
	nestrt_error err;
	int n = nestrt_tokenize(t, text, len, flags, NULL, 0, &err);
	if (n < 0) {
		printf("error: %s\n", err.message);
		return 0;
	}
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
	int32_t *half = malloc(sizeof(int32_t) * (size_t)(n + 1));
	int m = nestrt_tokenize(t, text, len, flags, ids, n, &err);
	int h = nestrt_tokenize(t, text, len, flags, half, n / 2, &err);
	int bad = m != n || h != n || (n > 0 && memcmp(ids, half, sizeof(int32_t) * (size_t)(n / 2)) != 0);
	if (bad) {
		printf("error: counts disagree: %d with no room, %d with room, %d with half\n", n, m, h);
		free(ids);
		free(half);
		return 1;
	}
	int dflags = flags & NESTRT_TOKENIZE_PARSE_SPECIAL ? NESTRT_DETOKENIZE_SPECIAL : 0;
	int need = nestrt_detokenize(t, ids, n, dflags, NULL, 0, &err);
	char *text_out = need >= 0 ? malloc((size_t)need + 1) : NULL;
	char *small = need >= 0 ? malloc((size_t)need / 2 + 1) : NULL;
	int got = need >= 0 ? nestrt_detokenize(t, ids, n, dflags, text_out, need, &err) : -1;
	int got_small = need >= 0 ? nestrt_detokenize(t, ids, n, dflags, small, need / 2, &err) : -1;
	if (need < 0 || got != need || got_small != need) {
		printf("error: detokenize: %d with no room, %d with room, %d with half: %s\n", need, got, got_small,
		       need < 0 ? err.message : "");
	} else {
		printf("ids");
		for (int i = 0; i < n; i++)
			printf(" %d", (int)ids[i]);
		printf(" | ");
		puthex(text_out, got);
		printf("\n");
	}
	free(text_out);
	free(small);
	free(ids);
	free(half);
	return need < 0 || got != need || got_small != need;
}

static int api(const nestrt_tokenizer *t)
{
	int fails = 0;
	nestrt_error err;
	int32_t ids[4];
	char buf[16];
#define CHECK(name, cond)                                                                                              \
	do {                                                                                                               \
		int ok_ = (cond);                                                                                              \
		printf("%s %s\n", ok_ ? "ok" : "FAIL", name);                                                                  \
		fails += !ok_;                                                                                                 \
	} while (0)
	err.message[0] = 0;
	CHECK("tokenize NULL tokenizer", nestrt_tokenize(NULL, "a", 1, 0, ids, 4, &err) == -1 && err.message[0]);
	CHECK("tokenize NULL text", nestrt_tokenize(t, NULL, 3, 0, ids, 4, &err) == -1 && strstr(err.message, "NULL"));
	CHECK("tokenize NULL text of length 0", nestrt_tokenize(t, NULL, 0, 0, ids, 4, &err) == 0);
	CHECK("tokenize negative cap", nestrt_tokenize(t, "a", 1, 0, ids, -1, &err) == -1);
	CHECK("tokenize NULL ids with room", nestrt_tokenize(t, "a", 1, 0, NULL, 4, &err) == -1);
	CHECK("tokenize unknown flags", nestrt_tokenize(t, "a", 1, 64, ids, 4, &err) == -1 &&
	                                    strstr(err.message, "unknown tokenize flags 0x40"));
	CHECK("tokenize NULL err", nestrt_tokenize(t, "a", 1, 64, ids, 4, NULL) == -1);
	int32_t n = nestrt_tokenizer_n_vocab(t);
	CHECK("piece of -1", nestrt_token_to_piece(t, -1, 0, buf, 16, &err) == -1 &&
	                         strstr(err.message, "token -1 is outside the vocabulary"));
	CHECK("piece of n_vocab", nestrt_token_to_piece(t, n, 0, buf, 16, &err) == -1);
	CHECK("piece with no room", nestrt_token_to_piece(t, 0, NESTRT_DETOKENIZE_SPECIAL, NULL, 0, &err) >= 0);
	int32_t bad[2] = {0, n};
	CHECK("detokenize an id outside", nestrt_detokenize(t, bad, 2, 0, buf, 16, &err) == -1 &&
	                                      strstr(err.message, "(element 1) is outside the vocabulary"));
	CHECK("detokenize NULL ids", nestrt_detokenize(t, NULL, 2, 0, buf, 16, &err) == -1);
	CHECK("detokenize nothing", nestrt_detokenize(t, NULL, 0, 0, buf, 16, &err) == 0);
	size_t len;
	int type;
	CHECK("token text", nestrt_tokenizer_token(t, 0, &len, &type) != NULL && type >= 0 && type <= 6);
	CHECK("token text outside", nestrt_tokenizer_token(t, n, &len, &type) == NULL &&
	                                nestrt_tokenizer_token(t, -1, NULL, NULL) == NULL);
	CHECK("NULL tokenizer queries", nestrt_tokenizer_n_vocab(NULL) == 0 && nestrt_tokenizer_bos(NULL) == -1 &&
	                                    nestrt_tokenizer_eos(NULL) == -1);
	CHECK("open NULL", nestrt_tokenizer_open(NULL, &err) == NULL && err.message[0]);
	CHECK("from NULL weights", nestrt_tokenizer_from_weights(NULL, &err) == NULL && err.message[0]);
	nestrt_tokenizer_free(NULL);
	printf("%d api failures\n", fails);
	return fails != 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: driver open|tokenize|piece|api FILE.gguf ...\n");
		return 2;
	}
	nestrt_error err;
	nestrt_tokenizer *t = NULL;
	if (!strcmp(argv[1], "openw")) {
		nestrt_weights *w = nestrt_weights_open(argv[2], &err);
		t = w ? nestrt_tokenizer_from_weights(w, &err) : NULL;
		nestrt_weights_close(w);
	} else
		t = nestrt_tokenizer_open(argv[2], &err);
	if (!t) {
		printf("error: %s\n", err.message);
		return 1;
	}
	int rc = 0;
	if (!strcmp(argv[1], "open") || !strcmp(argv[1], "openw")) {
		printf("ok %d %d %d\n", nestrt_tokenizer_n_vocab(t), (int)nestrt_tokenizer_bos(t), (int)nestrt_tokenizer_eos(t));
	} else if (!strcmp(argv[1], "tokenize")) {
		char line[1 << 16];
		while (fgets(line, sizeof line, stdin)) {
			line[strcspn(line, "\n")] = 0;
			int flags;
			char hex[sizeof line];
			char *text;
			size_t len;
			if (sscanf(line, "%d %s", &flags, hex) != 2 || unhex(hex, &text, &len) < 0) {
				printf("error: bad case line\n");
				rc = 1;
				continue;
			}
			rc |= tokenize_case(t, flags, text, len);
			free(text);
		}
	} else if (!strcmp(argv[1], "piece") && argc >= 4) {
		int flags = atoi(argv[3]);
		for (int i = 4; i < argc; i++) {
			int need = nestrt_token_to_piece(t, atoi(argv[i]), flags, NULL, 0, &err);
			if (need < 0) {
				printf("error: %s\n", err.message);
				continue;
			}
			char *b = malloc((size_t)need + 1);
			int got = nestrt_token_to_piece(t, atoi(argv[i]), flags, b, need, &err);
			if (got != need)
				printf("error: piece lengths disagree: %d, %d\n", need, got);
			else {
				puthex(b, got);
				printf("\n");
			}
			free(b);
		}
	} else if (!strcmp(argv[1], "detok") && argc >= 4) {
		int n = argc - 4;
		int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
		for (int i = 0; i < n; i++)
			ids[i] = (int32_t)atoi(argv[4 + i]);
		int need = nestrt_detokenize(t, ids, n, atoi(argv[3]), NULL, 0, &err);
		char *b = need >= 0 ? malloc((size_t)need + 1) : NULL;
		if (need < 0)
			printf("error: %s\n", err.message);
		else if (nestrt_detokenize(t, ids, n, atoi(argv[3]), b, need, &err) != need)
			printf("error: detokenized lengths disagree\n");
		else {
			puthex(b, need);
			printf("\n");
		}
		free(b);
		free(ids);
	} else if (!strcmp(argv[1], "token")) {
		for (int i = 3; i < argc; i++) {
			size_t len;
			int type;
			const char *s = nestrt_tokenizer_token(t, (int32_t)atoi(argv[i]), &len, &type);
			if (!s)
				printf("none\n");
			else {
				puthex(s, (int)len);
				printf(" %d\n", type);
			}
		}
	} else if (!strcmp(argv[1], "api")) {
		rc = api(t);
	} else {
		fprintf(stderr, "driver: unknown command '%s'\n", argv[1]);
		rc = 2;
	}
	nestrt_tokenizer_free(t);
	return rc;
}

/* fuzz_tokenize.c - libFuzzer target: the tokenizer (runtime/tokenize.c).
 *
 * The input is a text and a GGUF file: a 2-byte little-endian length L, L
 * bytes of text (fewer if the input ends), then the file. The file is read
 * from a copy in memory (nestrt_weights_from_memory), the tokenizer made from
 * it, and the weights and the copy freed at once: the tokenizer must hold
 * nothing of them (ASan sees a use after free). A rejection must be one line
 * starting with the name given. The file is also opened by its path (a memfd)
 * with nestrt_tokenizer_open, which reads its metadata alone: where the whole
 * file gave a tokenizer, it must give the same. An accepted tokenizer tokenizes the text with
 * each combination of flags: the count must not depend on the room given,
 * the ids written with half the room must be the first ones, every id must be
 * in the vocabulary; the ids are detokenized (again with no, half and all the
 * room, which must agree), and the pieces of the first 4,096 ids are made.
 * Seeds: tests/fuzz/corpus/tokenize/ (tests/tokenize/vocab.py --fuzz-seeds).
 * A broken promise is a finding (abort). Nothing is kept between inputs. */
#define _GNU_SOURCE
#include "nestrt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.gguf"

#define FUZZ_NAME "fuzz_tokenize"
#include "fuzz_common.h"

static void check_message(const nestrt_error *e)
{
	const char *m = e->message;
	if (!memchr(m, 0, sizeof e->message))
		broken("message not NUL-terminated", NULL);
	if (strncmp(m, NAME ": ", strlen(NAME ": ")) != 0)
		broken("message does not start with the name", m);
	if (strchr(m, '\n'))
		broken("message has a newline", m);
}

static void run_text(const nestrt_tokenizer *t, const char *text, size_t len, int flags)
{
	nestrt_error e;
	int nv = nestrt_tokenizer_n_vocab(t);
	int n = nestrt_tokenize(t, text, len, flags, NULL, 0, &e);
	if (n < 0) {
		check_message(&e);
		return;
	}
	int32_t *ids = malloc(sizeof(int32_t) * ((size_t)n + 1));
	int32_t *half = malloc(sizeof(int32_t) * ((size_t)n / 2 + 1));
	if (!ids || !half)
		abort();
	if (nestrt_tokenize(t, text, len, flags, ids, n, &e) != n)
		broken("the count depends on the room", NULL);
	if (nestrt_tokenize(t, text, len, flags, half, n / 2, &e) != n)
		broken("the count depends on the room (half)", NULL);
	if (memcmp(ids, half, sizeof(int32_t) * (size_t)(n / 2)) != 0)
		broken("the ids written with half the room differ", NULL);
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= nv)
			broken("an id outside the vocabulary", NULL);
	int dflags = flags & NESTRT_TOKENIZE_PARSE_SPECIAL ? NESTRT_DETOKENIZE_SPECIAL : 0;
	int need = nestrt_detokenize(t, ids, n, dflags, NULL, 0, &e);
	if (need < 0)
		broken("the ids tokenize made do not detokenize", e.message);
	char *buf = malloc((size_t)need + 1), *small = malloc((size_t)need / 2 + 1);
	if (!buf || !small)
		abort();
	if (nestrt_detokenize(t, ids, n, dflags, buf, need, &e) != need ||
	    nestrt_detokenize(t, ids, n, dflags, small, need / 2, &e) != need)
		broken("the detokenized length depends on the room", NULL);
	for (int i = 0; i < need; i++)
		touched += (unsigned char)buf[i];
	free(buf);
	free(small);
	free(ids);
	free(half);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t len = (size_t)data[0] | (size_t)data[1] << 8;
	if (len > size - 2)
		len = size - 2;
	const char *text = (const char *)data + 2;
	size_t isize = size - 2 - len;
	unsigned char *image = malloc(isize ? isize : 1);
	if (!image)
		abort();
	memcpy(image, data + 2 + len, isize);
	nestrt_error e;
	nestrt_tokenizer *t = NULL;
	nestrt_weights *w = nestrt_weights_from_memory(image, isize, NAME, &e);
	if (!w)
		check_message(&e);
	else {
		t = nestrt_tokenizer_from_weights(w, &e);
		if (!t)
			check_message(&e);
		nestrt_weights_close(w);
	}
	/* the same file opened by path (a memfd): its metadata is read alone, which
	 * must give the same tokenizer when the whole file gave one */
	put_memfd(data + 2 + len, isize);
	nestrt_tokenizer *tp = nestrt_tokenizer_open(memfd_path, &e);
	if (!tp && strncmp(e.message, memfd_path, strlen(memfd_path)) != 0)
		broken("message does not start with the path", e.message);
	if (t && (!tp || nestrt_tokenizer_n_vocab(tp) != nestrt_tokenizer_n_vocab(t) ||
	          nestrt_tokenizer_bos(tp) != nestrt_tokenizer_bos(t) || nestrt_tokenizer_eos(tp) != nestrt_tokenizer_eos(t)))
		broken("opened by path, the tokenizer differs", tp ? NULL : e.message);
	nestrt_tokenizer_free(tp);
	free(image);
	if (!t)
		return 0;
	for (int flags = 0; flags < 4; flags++)
		run_text(t, text, len, flags);
	int nv = nestrt_tokenizer_n_vocab(t);
	char piece[64];
	for (int32_t id = 0; id < nv && id < 4096; id++) {
		int k = nestrt_token_to_piece(t, id, id & 1 ? NESTRT_DETOKENIZE_SPECIAL : 0, piece, (int)sizeof piece, &e);
		if (k < 0)
			broken("no piece for an id of the vocabulary", e.message);
		for (int i = 0; i < k && i < (int)sizeof piece; i++)
			touched += (unsigned char)piece[i];
		size_t tl;
		if (!nestrt_tokenizer_token(t, id, &tl, NULL))
			broken("no text for an id of the vocabulary", NULL);
	}
	nestrt_tokenizer_free(t);
	return 0;
}

/* fuzz_frontend.c - libFuzzer target: the input is a .nest file, run through
 * what `nestc check --dump=ast` and `--dump=ir` do: parse, check, lower, the
 * region pass. Diagnostics and dumps go to one /dev/null stream, so that
 * their formatting runs (and is checked by the sanitizers) but costs no
 * terminal. Everything is freed per input: the arena, the diagnostics, the
 * source. Inputs with a NUL byte are refused (-1): nestc rejects such files
 * before parsing (source_load), so they would only waste the corpus.
 *
 *   make fuzz FUZZ_SECONDS=60          (all targets; see the Makefile)
 *   build-fuzz/fuzz_frontend -max_len=262144 -dict=tests/fuzz/nest.dict DIR...
 *
 * Deep nesting: the front end recurses on the syntax tree (a 30,000-term
 * chain a+a+...+a overflows the stack; being fixed in src/). Such inputs are
 * refused here above NEST_FUZZ_MAX_DEPTH (see below) so that the fuzzer looks
 * for other bugs; the chain tests of the robustness work cover them. */
#include "nestc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Operators and brackets: a bound on how deep any syntax tree of the input
 * can be (each level of a tree needs one of them). Big enough for every model
 * in the tree, small enough for the recursion under ASan on an 8 MB stack. */
#ifndef NEST_FUZZ_MAX_DEPTH
#define NEST_FUZZ_MAX_DEPTH 2000
#endif

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sink = fopen("/dev/null", "w");
	if (!sink)
		abort();
	static char buf[1 << 16];
	setvbuf(sink, buf, _IOFBF, sizeof buf);
	return 0;
}

static int too_deep(const uint8_t *data, size_t size)
{
	size_t n = 0;
	for (size_t i = 0; i < size; i++)
		if (strchr("([{+-*/%@<>=!&|.,:", data[i]) && data[i])
			n++;
	return n > NEST_FUZZ_MAX_DEPTH;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (memchr(data, 0, size) || too_deep(data, size))
		return -1;
	char *text = xmalloc(size + 1);
	memcpy(text, data, size);
	text[size] = 0;
	Source *src = source_from_string("fuzz.nest", text);
	free(text);

	Diag d = {.src = src, .out = sink};
	Arena arena = {0};
	Module *m = parse_module(&arena, &d, src);
	int syntax_errors = d.nerrors;
	if (!syntax_errors)
		ast_dump(sink, m);
	CompileOptions co = {0};
	Program *p = compile_module(&arena, &d, m, &co);
	if (syntax_errors)
		p = NULL;
	if (p)
		ir_dump(sink, p);
	if (p && !d.nerrors) {
		RegionOptions ro = {.opt_level = 2, .target = "x86_64-unknown-linux-gnu"};
		build_regions(p, &d, &ro);
	}
	diag_free(&d);
	arena_free(&arena);
	source_free(src);
	return 0;
}

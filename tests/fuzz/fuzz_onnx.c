/* fuzz_onnx.c - libFuzzer target: the input is a .onnx file, imported the way
 * `nestc import` and `nestc check M.onnx` do (onnx_import, default options:
 * no -D, no --freeze, outlining on). The bytes are put in a memfd, opened
 * through /proc/self/fd (the importer maps the file). An import that succeeds
 * must give Nest text (and weights bytes when it has params); that text then
 * goes through the front end as fuzz_frontend runs it: parse, check, lower, the
 * region pass. The importer's messages (stdio stderr) and the front end's
 * diagnostics go to one /dev/null stream; sanitizer reports still go to fd 2.
 * Everything is freed per input (the import, the arena, the diagnostics, the
 * source), so a leak is a finding; a broken promise aborts.
 *
 *   make fuzz FUZZ_SECONDS=60          (all targets; see the Makefile)
 *   build-fuzz/fuzz_onnx -max_len=262144 -dict=tests/fuzz/onnx.dict DIR... */
#define _GNU_SOURCE
#include "nestc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_onnx"
#include "fuzz_common.h"

static FILE *sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!sink) {
		sink = fopen("/dev/null", "w");
		if (!sink)
			abort();
		static char buf[1 << 16];
		setvbuf(sink, buf, _IOFBF, sizeof buf);
	}
	put_memfd(data, size);

	OnnxOptions oo = {0};
	OnnxImport im;
	memset(&im, 'x', sizeof im);
	/* the importer writes its one message to stderr: glibc's stderr is a
	 * variable, pointed at the sink for the call */
	FILE *err = stderr;
	stderr = sink;
	int rc = onnx_import(memfd_path, &oo, &im);
	stderr = err;
	if (rc != 0 && rc != 1)
		broken("onnx_import returns neither 0 nor 1", NULL);
	if (rc) {
		if (im.text || im.weights || im.outline)
			broken("a failed import keeps text, weights or an outline", NULL);
		onnx_import_free(&im);
		return 0;
	}
	if (!im.text)
		broken("a successful import has no text", NULL);
	if (im.nweights < 0 || (im.nweights && (!im.weights || im.nparts != im.nweights + 1 || im.weights_len < 8)))
		broken("params without weights bytes", NULL);
	/* the weights bytes are read (ASan checks they are all there) */
	size_t total = 0;
	for (int p = 0; im.weights && p < im.nparts; p++) {
		const unsigned char *b = im.weights[p].p;
		for (size_t k = 0; k < im.weights[p].n; k++)
			touched += b[k];
		total += im.weights[p].n;
	}
	if (total != im.weights_len)
		broken("the weights parts do not add up to weights_len", NULL);
	if (im.outline)
		touched += (unsigned)strlen(im.outline);

	Source *src = source_from_string("fuzz.onnx", im.text);
	onnx_import_free(&im);
	Diag d = {.src = src, .out = sink};
	Arena arena = {0};
	Module *m = parse_module(&arena, &d, src);
	int syntax_errors = d.nerrors;
	CompileOptions co = {0};
	Program *p = compile_module(&arena, &d, m, &co);
	if (syntax_errors)
		p = NULL;
	if (p && !d.nerrors) {
		RegionOptions ro = {.opt_level = 2, .target = "x86_64-unknown-linux-gnu"};
		build_regions(p, &d, &ro);
	}
	diag_free(&d);
	arena_free(&arena);
	source_free(src);
	return 0;
}

# nestc - POSIX-style Makefile.
.POSIX:
.SUFFIXES:

PREFIX = /usr/local
BINDIR = $(PREFIX)/bin
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
# Debian's python3 reads packages under /usr/local from here
PYTHONDIR = $(LIBDIR)/python3/dist-packages
MANDIR = $(PREFIX)/share/man
DESTDIR =

CC = cc
LLVM_CONFIG = llvm-config
PYTHON = /usr/bin/python3
CFLAGS = -O2 -g
WARN = -Wall -Wextra -Wno-unused-parameter
XCFLAGS = -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE $(WARN) -Isrc -I$(B)
JANSSON_CFLAGS = `pkg-config --cflags jansson`
JANSSON_LIBS = `pkg-config --libs jansson`
LLVM_CFLAGS = `$(LLVM_CONFIG) --cflags`
# libLLVM is loaded with dlopen when code is generated (src/codegen/llvm.c): its path.
LLVM_LIB = `$(LLVM_CONFIG) --libdir`/lib`$(LLVM_CONFIG) --libs | sed 's/^-l//'`.so
LDLIBS = $(JANSSON_LIBS) -lxxhash -lprotobuf-c -ldl -lpthread -lm
# ONNX in (src/onnx/): Debian's onnx.proto (libonnx-dev), compiled by protoc-c.
ONNX_PROTO = /usr/include/onnx/onnx.proto
PROTOC_C = protoc-c

B = build
# The ONNX importer, src/onnx/: one object per phase.
ONNX_OBJS = $(B)/onnx_wire.o $(B)/onnx_read.o $(B)/onnx_fold.o $(B)/onnx_ops_shape.o $(B)/onnx_ops_nn.o \
	$(B)/onnx_ops_conv.o $(B)/onnx_ops_resize.o $(B)/onnx_ops_index.o $(B)/onnx_ops_quant.o $(B)/onnx_ops_rnn.o $(B)/onnx_patterns.o $(B)/onnx_ops.o $(B)/onnx_outline.o $(B)/onnx_emit.o
ONNX_HDRS = $(HDRS) src/onnx/onnx.h $(B)/onnx.pb-c.h
# The compiler's internal header and the table of ops it includes.
HDRS = src/nestc.h src/plan.h src/wformat.h src/ops.def
# The code generator, src/codegen/: one object per concern.
CG_OBJS = $(B)/cg_llvm.o $(B)/cg_builder.o $(B)/cg_elementwise.o $(B)/cg_movement.o $(B)/cg_matmul.o $(B)/cg_matmul_fmt.o $(B)/cg_epilogue.o \
	$(B)/cg_reduce.o $(B)/cg_conv.o $(B)/cg_conv_lanes.o $(B)/cg_conv_dw.o $(B)/cg_pool.o $(B)/cg_graph.o $(B)/cg_header.o $(B)/cg_model.o $(B)/cg_archive.o $(B)/cg_link.o $(B)/cg_api.o \
	$(B)/cg_cache.o $(B)/cg_build.o \
	$(B)/cg_index.o $(B)/cg_upsample.o $(B)/cg_attention.o $(B)/cg_winograd.o
# The reference interpreter, src/interp/: one object per kernel family.
INTERP_OBJS = $(B)/interp_tensor.o $(B)/interp_elementwise.o $(B)/interp_matmul.o $(B)/interp_reduce.o \
	$(B)/interp_movement.o $(B)/interp_conv.o $(B)/interp_graph.o \
	$(B)/interp_index.o $(B)/interp_upsample.o
INTERP_HDRS = $(HDRS) src/interp/interp.h
# The front end (parse, check, lower, regions): nestc's first phases, and the
# fuzz target's whole program.
FRONT_OBJS = $(B)/util.o $(B)/diag.o $(B)/dtype.o $(B)/ast.o $(B)/parse.o $(B)/lex.o $(B)/ir.o \
       $(B)/values.o $(B)/eval.o $(B)/args.o $(B)/builtins.o $(B)/builtins_nn.o $(B)/builtins_index.o \
       $(B)/check.o $(B)/params.o $(B)/lower.o $(B)/widen.o $(B)/dims.o $(B)/rows.o $(B)/regions.o
OBJS = $(FRONT_OBJS) $(B)/report.o $(B)/plan.o $(B)/wformat.o $(CG_OBJS) $(INTERP_OBJS) $(B)/weights.o $(B)/npy.o $(B)/run.o $(B)/gguf_write.o $(B)/gguf_meta.o \
       $(ONNX_OBJS) $(B)/onnx.pb-c.o $(B)/main.o
# The runtime's file readers (and its .npy header writer) serve nestc too: one
# reader per format. src/weights.c and src/npy.c adapt them to nestc's types.
RT_IO_OBJS = $(B)/rt_util.o $(B)/rt_json.o $(B)/rt_weights.o $(B)/rt_panel.o $(B)/rt_wpack.o $(B)/rt_prepacked.o $(B)/rt_npy.o $(B)/rt_pool.o \
	$(B)/rt_pack.o $(B)/rt_gguf.o $(B)/rt_quant.o $(B)/rt_gguf_names.o

# libnestrt.so's version and soname (runtime/nestrt.map versions its symbols)
RT_VERSION = 0.1.0
RT_SONAME = libnestrt.so.0

all: deps $(B)/nestc $(B)/libnestrt.a $(B)/libnestrt.so.$(RT_VERSION) $(B)/nestrt.pc

deps: $(B)/stamp
	@sh scripts/deps.sh

# The small GPT-2 of the README: compiled with regions, linked into a C program,
# run on random weights, checked against the reference interpreter; then the report.
DEMO_FLAGS = -D L=2 -D D=64 -D H=4 -D V=256 -D CTX=64 -D S=16
DEMO = $(B)/demo
demo: all
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@$(PYTHON) scripts/tokens.py $(DEMO)/tokens.npy 16 256 1
	$(B)/nestc build samples/gpt2.nest $(DEMO_FLAGS) -o $(DEMO)/out --report-file $(DEMO)/report.txt
	$(B)/nestc weights samples/gpt2.nest $(DEMO_FLAGS) --random-weights 1 -o $(DEMO)/gpt2.safetensors
	$(CC) -O2 -Iruntime -I$(DEMO)/out -o $(DEMO)/demo scripts/demo.c $(DEMO)/out/*.o $(B)/libnestrt.a -lm -lpthread
	@echo "== compiled:"
	@$(DEMO)/demo $(DEMO)/gpt2.safetensors $(DEMO)/tokens.npy
	@echo "== reference interpreter (nestc run):"
	@$(B)/nestc run samples/gpt2.nest $(DEMO_FLAGS) --weights $(DEMO)/gpt2.safetensors --input tokens=$(DEMO)/tokens.npy
	@echo "== region-reuse report:"
	@cat $(DEMO)/report.txt
	$(CC) -O2 -Iruntime -I$(DEMO)/out -o $(DEMO)/generate scripts/generate.c $(DEMO)/out/*.o $(B)/libnestrt.a -lm -lpthread
	@echo "== greedy generation (prefill + decode over the KV cache), 24 tokens:"
	@$(DEMO)/generate $(DEMO)/gpt2.safetensors 24 5 17 3 99 42 7 7 200

check: all $(B)/test_io $(B)/test_interp $(B)/test_runtime
	@NESTC_OBJS="$(OBJS) $(RT_IO_OBJS)" NESTRT_OBJS="$(RT_OBJS)" sh tests/check.sh $(B)

# The ONNX backend node tests of libonnx-testdata, all of them: pass / fail /
# unsupported per op and totals (tests/onnx/run.py; make check runs the float32
# tests of issue #11's 48 ops).
check-onnx: all
	@$(PYTHON) tests/onnx/run.py $(B)/nestc --all

check-run:
	@NESTC_OBJS="$(OBJS) $(RT_IO_OBJS)" NESTRT_OBJS="$(RT_OBJS)" sh tests/check.sh $(B)

# The whole suite again, built with AddressSanitizer and UBSan; then each
# libFuzzer target on its seeds and FUZZ_SMOKE_RUNS inputs from a fixed seed
# (at most FUZZ_SMOKE_SECONDS; see fuzz below). LeakSanitizer does not scan
# thread-local storage (use_tls=0): GCC 12's reads a bogus dynamic TLS range of
# the dlopen'ed libLLVM on Debian 12's glibc (0x458-0x18000155a, "Tracer caught
# signal 11") for some builds, e.g. a 2x2/2 average pool of a 6x6 image; nestc
# keeps no heap pointer only in TLS, and the suite reports no leak without it.
ASAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
check-asan: deps
	@$(MAKE) --no-print-directory B=build-asan CFLAGS="$(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)" \
		build-asan/nestc build-asan/libnestrt.a build-asan/test_io build-asan/test_interp build-asan/test_runtime \
		build-asan/libnestrt.so.$(RT_VERSION) build-asan/nestrt.pc
	@ASAN_OPTIONS=exitcode=86:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LSAN_OPTIONS=use_tls=0 \
		NESTC_TEST_LDFLAGS="-fsanitize=address,undefined" $(MAKE) --no-print-directory B=build-asan check-run
	@FUZZ_RUNS=$(FUZZ_SMOKE_RUNS) $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS)

# libFuzzer targets (tests/fuzz/fuzz_*.c): the front end, the .safetensors,
# GGUF and .npy readers, the tokenizer (a text and a GGUF file's vocabulary), the ONNX importer (then the front end on its text; about
# 8,000 inputs a second, so the smoke run's 20,000 take seconds). They need clang (scripts/deps.sh installs it); every object
# they use is built again into build-fuzz/ with coverage, ASan and UBSan.
#   make fuzz                    each target FUZZ_SECONDS (60) seconds, one after
#                                another; one line per target with its exec count;
#                                exit status 1 on a finding (kept in build-fuzz/findings/)
#   make fuzz FUZZ_SECONDS=600   what issue #14 asks before a release
# check-asan runs each on FUZZ_SMOKE_RUNS inputs from a fixed seed (FUZZ_RUNS).
# tests/fuzz/libfuzzer.sh runs them.
FUZZ_CC = clang
FUZZ_FLAGS = -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SECONDS = 60
FUZZ_SMOKE_SECONDS = 30
FUZZ_SMOKE_RUNS = 20000
FUZZ_BINS = build-fuzz/fuzz_frontend build-fuzz/fuzz_safetensors build-fuzz/fuzz_npy build-fuzz/fuzz_onnx \
	build-fuzz/fuzz_gguf build-fuzz/fuzz_tokenize
fuzz: deps
	@$(MAKE) --no-print-directory B=build-fuzz CC="$(FUZZ_CC)" CFLAGS="$(FUZZ_FLAGS)" $(FUZZ_BINS)
	@sh tests/fuzz/libfuzzer.sh build-fuzz $(FUZZ_SECONDS)

$(B)/fuzz_frontend: tests/fuzz/fuzz_frontend.c $(FRONT_OBJS)
	$(CC) $(XCFLAGS) $(CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz/fuzz_frontend.c $(FRONT_OBJS) $(LDLIBS)
$(B)/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c tests/fuzz/fuzz_common.h $(B)/weights.o $(B)/util.o $(RT_IO_OBJS)
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz/fuzz_safetensors.c $(B)/weights.o \
		$(B)/util.o $(RT_IO_OBJS) $(LDLIBS)
$(B)/fuzz_gguf: tests/fuzz/fuzz_gguf.c tests/fuzz/fuzz_common.h $(B)/weights.o $(B)/util.o $(RT_IO_OBJS)
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz/fuzz_gguf.c $(B)/weights.o \
		$(B)/util.o $(RT_IO_OBJS) $(LDLIBS)
$(B)/fuzz_tokenize: tests/fuzz/fuzz_tokenize.c tests/fuzz/fuzz_common.h $(RT_IO_OBJS) $(B)/rt_tokenize.o
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz/fuzz_tokenize.c $(RT_IO_OBJS) \
		$(B)/rt_tokenize.o -lm -lpthread
$(B)/fuzz_npy: tests/fuzz/fuzz_npy.c tests/fuzz/fuzz_common.h $(B)/npy.o $(B)/weights.o $(B)/util.o $(B)/dtype.o $(RT_IO_OBJS)
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz/fuzz_npy.c $(B)/npy.o $(B)/weights.o \
		$(B)/util.o $(B)/dtype.o $(RT_IO_OBJS) $(LDLIBS)
# the ONNX importer, then the front end on the Nest text it writes
FUZZ_ONNX_OBJS = $(ONNX_OBJS) $(B)/onnx.pb-c.o $(FRONT_OBJS) $(B)/interp_tensor.o $(B)/weights.o $(B)/npy.o $(RT_IO_OBJS)
$(B)/fuzz_onnx: tests/fuzz/fuzz_onnx.c tests/fuzz/fuzz_common.h $(FUZZ_ONNX_OBJS)
	$(CC) $(XCFLAGS) $(CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz/fuzz_onnx.c $(FUZZ_ONNX_OBJS) $(LDLIBS)

# libnestrt built with ThreadSanitizer, and tests/runtime/test_threads.c (one
# instance called from eight threads, fork during calls) linked with it.
TSAN_FLAGS = -O1 -g -fsanitize=thread -fno-omit-frame-pointer
check-tsan: all
	@$(MAKE) --no-print-directory B=build-tsan CFLAGS="$(TSAN_FLAGS)" LDFLAGS="$(TSAN_FLAGS)" build-tsan/libnestrt.a
	@NESTC_TEST_LDFLAGS="-fsanitize=thread" TSAN_OPTIONS=halt_on_error=1:exitcode=66:die_after_fork=0 \
		/usr/bin/python3 tests/runtime/run_threads.py $(B)/nestc build-tsan/libnestrt.a

$(B)/test_io: tests/unit/test_io.c $(B)/weights.o $(B)/npy.o $(B)/util.o $(B)/dtype.o $(B)/diag.o $(RT_IO_OBJS)
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) $(LDFLAGS) -o $@ tests/unit/test_io.c $(B)/weights.o $(B)/npy.o \
		$(B)/util.o $(B)/dtype.o $(B)/diag.o $(RT_IO_OBJS) $(LDLIBS)
$(B)/test_interp: tests/unit/test_interp.c $(INTERP_OBJS) $(B)/ir.o $(B)/util.o $(B)/dtype.o $(B)/diag.o
	$(CC) $(XCFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ tests/unit/test_interp.c $(INTERP_OBJS) $(B)/ir.o \
		$(B)/util.o $(B)/dtype.o $(B)/diag.o $(LDLIBS)

# -fPIC: the one archive also links into shared libraries (nestc build -o
# FILE.so, libnestrt.so)
RT_CFLAGS = -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE $(WARN) -fPIC -Iruntime
RT_HDRS = runtime/nestrt.h runtime/internal.h runtime/json.h
RT_OBJS = $(B)/rt_util.o $(B)/rt_json.o $(B)/rt_weights.o $(B)/rt_panel.o $(B)/rt_wpack.o $(B)/rt_prepacked.o $(B)/rt_dispatch.o $(B)/rt_npy.o \
	$(B)/rt_model.o $(B)/rt_pool.o $(B)/rt_pack.o $(B)/rt_seq.o $(B)/rt_gguf.o $(B)/rt_quant.o \
	$(B)/rt_gguf_names.o $(B)/rt_tokenize.o

$(B)/libnestrt.a: $(RT_OBJS)
	rm -f $@
	ar rcs $@ $(RT_OBJS)
$(B)/libnestrt.so.$(RT_VERSION): $(RT_OBJS) runtime/nestrt.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(RT_SONAME) -Wl,--version-script=runtime/nestrt.map -Wl,-z,noexecstack \
		-Wl,--no-undefined -o $@ $(RT_OBJS) -lm -lpthread
$(B)/rt_util.o: runtime/util.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/util.c
$(B)/rt_json.o: runtime/json.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/json.c
$(B)/rt_weights.o: runtime/weights.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/weights.c
$(B)/rt_gguf.o: runtime/gguf.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/gguf.c
$(B)/rt_gguf_names.o: runtime/gguf_names.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/gguf_names.c
$(B)/rt_tokenize.o: runtime/tokenize.c runtime/unicode_ranges.h $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/tokenize.c
$(B)/rt_quant.o: runtime/quant.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/quant.c
$(B)/rt_panel.o: runtime/panel.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/panel.c
$(B)/rt_wpack.o: runtime/wpack.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/wpack.c
$(B)/rt_prepacked.o: runtime/prepacked.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/prepacked.c
$(B)/rt_dispatch.o: runtime/dispatch.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/dispatch.c
$(B)/rt_npy.o: runtime/npy.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/npy.c
$(B)/rt_seq.o: runtime/seq.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/seq.c
$(B)/rt_pool.o: runtime/pool.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) -D_GNU_SOURCE $(CFLAGS) -c -o $@ runtime/pool.c
$(B)/rt_pack.o: runtime/pack.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/pack.c
$(B)/rt_model.o: runtime/model.c $(RT_HDRS) $(B)/stamp
	$(CC) $(RT_CFLAGS) $(CFLAGS) -c -o $@ runtime/model.c
$(B)/nestrt.pc: runtime/nestrt.pc.in $(B)/stamp
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
		runtime/nestrt.pc.in > $@
# test_runtime fails the runtime's allocations one at a time (test_out_of_memory)
OOM_WRAP = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,--wrap=strdup
$(B)/test_runtime: tests/runtime/test_runtime.c runtime/nestrt.h $(B)/libnestrt.a
	$(CC) $(RT_CFLAGS) $(CFLAGS) $(LDFLAGS) $(OOM_WRAP) -o $@ tests/runtime/test_runtime.c $(B)/libnestrt.a -lm -lpthread

# Random differential testing (tests/diff/): random Nest programs built for the
# native CPU, AVX2 and SSE2 against the interpreter, and random ONNX graphs
# against NumPy, with fresh seeds for SECONDS seconds (half each); make check
# runs a fixed-seed batch of both. Findings are written to build/diff-findings/.
SECONDS = 600
fuzz-diff: all
	@half=`expr $(SECONDS) / 2`; a=0; b=0; \
	$(PYTHON) tests/diff/nest_diff.py $(B)/nestc --seconds $$half || a=1; \
	$(PYTHON) tests/diff/onnx_diff.py $(B)/nestc --seconds $$half || b=1; \
	test $$a = 0 && test $$b = 0

# Mutation testing (tests/mutate.py): standard mutations planted one at a time in
# FILES, or in the lines changed since BASE (neither: the uncommitted changes),
# each rebuilt in a private copy and run against the suites that cover its file;
# prints the survivors with their diffs.
#   make mutate BASE=origin/main      the lines a change touched
#   make mutate FILES="src/dims.c runtime/seq.c" MUTATE_FLAGS="--max 60 --fail-under 90"
BASE =
FILES =
MUTATE_FLAGS =
mutate: all
	@b='$(BASE)'; f='$(FILES)'; [ -n "$$b$$f" ] || b=HEAD; \
	$(PYTHON) tests/mutate.py $${b:+--base "$$b"} $(MUTATE_FLAGS) $(FILES)

# Run-time figures of compiled code against ONNX Runtime, PyTorch and OpenBLAS (not a test).
bench: all
	@sh scripts/bench-deps.sh && $(PYTHON) bench/run.py $(B)/nestc

# The tokenizer suite's expectations (tests/tokenize/expected_*.json): llama.cpp's own ids
# for its strings, through node-llama-cpp (scripts/bench-deps.sh installs it into
# bench/.node). make check reads the stored files and needs no node.
tokenize-expected:
	@sh scripts/bench-deps.sh && $(PYTHON) tests/tokenize/expected.py

# Compile-time figures of hierarchical against flat compilation (not a test).
bench-compile: all
	$(PYTHON) bench/compile.py $(B)/nestc

install: all
	mkdir -p $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	cp $(B)/nestc $(DESTDIR)$(BINDIR)/nestc
	cp man/nestc.1 $(DESTDIR)$(MANDIR)/man1/nestc.1
	cp man/nest.7 $(DESTDIR)$(MANDIR)/man7/nest.7
	cp man/nestrt.3 $(DESTDIR)$(MANDIR)/man3/nestrt.3
	mkdir -p $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	cp runtime/nestrt.h $(DESTDIR)$(INCLUDEDIR)/nestrt.h
	cp $(B)/libnestrt.a $(DESTDIR)$(LIBDIR)/libnestrt.a
	cp $(B)/libnestrt.so.$(RT_VERSION) $(DESTDIR)$(LIBDIR)/libnestrt.so.$(RT_VERSION)
	ln -sf libnestrt.so.$(RT_VERSION) $(DESTDIR)$(LIBDIR)/$(RT_SONAME)
	ln -sf $(RT_SONAME) $(DESTDIR)$(LIBDIR)/libnestrt.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
		runtime/nestrt.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/nestrt.pc
	mkdir -p $(DESTDIR)$(PYTHONDIR)/nestrt $(DESTDIR)$(LIBDIR)/cmake/nestc
	cp runtime/python/nestrt/__init__.py $(DESTDIR)$(PYTHONDIR)/nestrt/__init__.py
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
		-e 's|@RT_VERSION@|$(RT_VERSION)|g' -e 's|@RT_SONAME@|$(RT_SONAME)|g' \
		cmake/nestcConfig.cmake.in > $(DESTDIR)$(LIBDIR)/cmake/nestc/nestcConfig.cmake
	sed -e 's|@VERSION@|$(RT_VERSION)|g' -e 's|@VERSION_MAJOR@|0|g' \
		cmake/nestcConfigVersion.cmake.in > $(DESTDIR)$(LIBDIR)/cmake/nestc/nestcConfigVersion.cmake
	if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null 2>&1; then ldconfig || true; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/nestc $(DESTDIR)$(MANDIR)/man1/nestc.1 $(DESTDIR)$(MANDIR)/man7/nest.7 \
		$(DESTDIR)$(MANDIR)/man3/nestrt.3
	rm -f $(DESTDIR)$(INCLUDEDIR)/nestrt.h $(DESTDIR)$(LIBDIR)/libnestrt.a $(DESTDIR)$(LIBDIR)/pkgconfig/nestrt.pc
	rm -f $(DESTDIR)$(LIBDIR)/libnestrt.so.$(RT_VERSION) $(DESTDIR)$(LIBDIR)/$(RT_SONAME) $(DESTDIR)$(LIBDIR)/libnestrt.so
	rm -rf $(DESTDIR)$(PYTHONDIR)/nestrt $(DESTDIR)$(LIBDIR)/cmake/nestc

$(B)/nestc: $(OBJS) $(RT_IO_OBJS)
	$(CC) $(LDFLAGS) -o $@ $(OBJS) $(RT_IO_OBJS) $(LDLIBS)

# The build directory, made once the dependencies are installed: every
# generated file and object waits for it, so make -j builds nothing before
# apt-get is done.
$(B)/stamp:
	@sh scripts/deps.sh
	mkdir -p $(B)
	touch $@

$(B)/parse.c $(B)/parse.h: grammar/nest.y $(B)/stamp
	bison -Wall -Werror --defines=$(B)/parse.h -o $(B)/parse.c grammar/nest.y

$(B)/lex.c $(B)/lex.h: grammar/nest.l $(B)/stamp
	flex --header-file=$(B)/lex.h -o $(B)/lex.c grammar/nest.l

# Generated scanner and parser: their own warnings are not ours to fix.
$(B)/parse.o: $(B)/parse.c $(B)/lex.h $(HDRS)
	$(CC) $(XCFLAGS) $(CFLAGS) -Wno-unused-function -c -o $@ $(B)/parse.c
$(B)/lex.o: $(B)/lex.c $(B)/parse.h $(HDRS)
	$(CC) $(XCFLAGS) $(CFLAGS) -Wno-unused-function -Wno-sign-compare -c -o $@ $(B)/lex.c

$(B)/weights.o: src/weights.c $(HDRS) $(RT_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) -c -o $@ src/weights.c
$(B)/util.o: src/util.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/util.c
$(B)/diag.o: src/diag.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/diag.c
$(B)/dtype.o: src/dtype.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/dtype.c
$(B)/ast.o: src/ast.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/ast.c
$(B)/ir.o: src/ir.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/ir.c
$(B)/values.o: src/values.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/values.c
$(B)/eval.o: src/eval.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/eval.c
$(B)/builtins.o: src/builtins.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/builtins.c
$(B)/args.o: src/args.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/args.c
$(B)/builtins_nn.o: src/builtins_nn.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/builtins_nn.c
$(B)/builtins_index.o: src/builtins_index.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/builtins_index.c
$(B)/check.o: src/check.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/check.c
$(B)/params.o: src/params.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/params.c
$(B)/lower.o: src/lower.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/lower.c
$(B)/widen.o: src/widen.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/widen.c
$(B)/dims.o: src/dims.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/dims.c
$(B)/rows.o: src/rows.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/rows.c
$(B)/regions.o: src/regions.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/regions.c
$(B)/wformat.o: src/wformat.c $(HDRS) runtime/nestrt.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -Iruntime -c -o $@ src/wformat.c
$(B)/report.o: src/report.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) $(JANSSON_CFLAGS) -c -o $@ src/report.c
$(B)/plan.o: src/plan.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/plan.c
# LLVM's headers want _GNU_SOURCE and the C99 limit macros; keep our own -std.
CG_CFLAGS = $(XCFLAGS) $(CFLAGS) `$(LLVM_CONFIG) --includedir | sed 's/^/-I/'`
CG_HDRS = src/codegen/gen.h $(HDRS) $(B)/stamp
$(B)/cg_llvm.o: src/codegen/llvm.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -DNESTC_LLVM_LIB=\"$(LLVM_LIB)\" -c -o $@ src/codegen/llvm.c
$(B)/cg_builder.o: src/codegen/builder.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/builder.c
$(B)/cg_elementwise.o: src/codegen/elementwise.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/elementwise.c
$(B)/cg_movement.o: src/codegen/movement.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/movement.c
$(B)/cg_matmul.o: src/codegen/matmul.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/matmul.c
$(B)/cg_matmul_fmt.o: src/codegen/matmul_fmt.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/matmul_fmt.c
$(B)/cg_epilogue.o: src/codegen/epilogue.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/epilogue.c
$(B)/cg_reduce.o: src/codegen/reduce.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/reduce.c
$(B)/cg_attention.o: src/codegen/attention.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/attention.c
$(B)/cg_conv.o: src/codegen/conv.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/conv.c
$(B)/cg_conv_lanes.o: src/codegen/conv_lanes.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/conv_lanes.c
$(B)/cg_pool.o: src/codegen/pool.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/pool.c
$(B)/cg_winograd.o: src/codegen/winograd.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/winograd.c
$(B)/cg_graph.o: src/codegen/graph.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/graph.c
$(B)/cg_header.o: src/codegen/header.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/header.c
$(B)/cg_model.o: src/codegen/model.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/model.c
$(B)/cg_archive.o: src/codegen/archive.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/archive.c
$(B)/cg_api.o: src/codegen/api.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) $(JANSSON_CFLAGS) -c -o $@ src/codegen/api.c
$(B)/cg_conv_dw.o: src/codegen/conv_dw.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/conv_dw.c
$(B)/cg_link.o: src/codegen/link.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -DNESTC_LIBDIR=\"$(LIBDIR)\" -c -o $@ src/codegen/link.c
$(B)/cg_cache.o: src/codegen/cache.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -DNESTC_LLVM_VERSION=\"`$(LLVM_CONFIG) --version`\" -c -o $@ src/codegen/cache.c
$(B)/cg_build.o: src/codegen/build.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/build.c
$(B)/interp_tensor.o: src/interp/tensor.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/tensor.c
$(B)/interp_elementwise.o: src/interp/elementwise.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/elementwise.c
$(B)/interp_matmul.o: src/interp/matmul.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/matmul.c
$(B)/interp_reduce.o: src/interp/reduce.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/reduce.c
$(B)/interp_movement.o: src/interp/movement.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/movement.c
$(B)/interp_conv.o: src/interp/conv.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/conv.c
$(B)/interp_graph.o: src/interp/graph.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/graph.c
$(B)/interp_upsample.o: src/interp/upsample.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/upsample.c
$(B)/cg_upsample.o: src/codegen/upsample.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/upsample.c
$(B)/interp_index.o: src/interp/index.c $(INTERP_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp/index.c
$(B)/cg_index.o: src/codegen/index.c $(CG_HDRS)
	$(CC) $(CG_CFLAGS) -c -o $@ src/codegen/index.c
$(B)/npy.o: src/npy.c $(HDRS) $(RT_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) -Iruntime $(CFLAGS) -c -o $@ src/npy.c
$(B)/run.o: src/run.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/run.c
$(B)/gguf_write.o: src/gguf_write.c src/gguf_meta.h $(HDRS) $(RT_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) -D_GNU_SOURCE -Iruntime $(CFLAGS) -c -o $@ src/gguf_write.c
$(B)/gguf_meta.o: src/gguf_meta.c src/gguf_meta.h $(HDRS) $(RT_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) -D_GNU_SOURCE -Iruntime $(CFLAGS) -c -o $@ src/gguf_meta.c
# protoc-c writes onnx.pb-c.[ch] next to its copy of the .proto, in $(B).
# Not a prerequisite: the .proto may not be installed yet when make starts
# (a fresh machine; scripts/deps.sh installs it first, see $(B)/stamp).
$(B)/onnx.pb-c.c $(B)/onnx.pb-c.h: $(B)/stamp
	cp $(ONNX_PROTO) $(B)/onnx.proto
	cd $(B) && $(PROTOC_C) --c_out=. onnx.proto
$(B)/onnx.pb-c.o: $(B)/onnx.pb-c.c $(B)/onnx.pb-c.h
	$(CC) -std=c11 $(CFLAGS) -I$(B) -c -o $@ $(B)/onnx.pb-c.c
$(B)/onnx_wire.o: src/onnx/wire.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/wire.c
$(B)/onnx_read.o: src/onnx/read.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/read.c
$(B)/onnx_fold.o: src/onnx/fold.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/fold.c
$(B)/onnx_ops_shape.o: src/onnx/ops_shape.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_shape.c
$(B)/onnx_ops_nn.o: src/onnx/ops_nn.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_nn.c
$(B)/onnx_ops_conv.o: src/onnx/ops_conv.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_conv.c
$(B)/onnx_ops_resize.o: src/onnx/ops_resize.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_resize.c
$(B)/onnx_ops_index.o: src/onnx/ops_index.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_index.c
$(B)/onnx_ops_quant.o: src/onnx/ops_quant.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_quant.c
$(B)/onnx_ops_rnn.o: src/onnx/ops_rnn.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops_rnn.c
$(B)/onnx_patterns.o: src/onnx/patterns.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/patterns.c
$(B)/onnx_ops.o: src/onnx/ops.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/ops.c
$(B)/onnx_outline.o: src/onnx/outline.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/outline.c
$(B)/onnx_emit.o: src/onnx/emit.c $(ONNX_HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/onnx/emit.c
$(B)/main.o: src/main.c $(HDRS) $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/main.c

clean:
	rm -rf build build-asan build-fuzz

.PHONY: all deps demo check check-onnx check-run check-asan check-tsan fuzz fuzz-diff mutate bench bench-compile tokenize-expected install uninstall clean

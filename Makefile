# nestc - POSIX-style Makefile.
.POSIX:
.SUFFIXES:

PREFIX = /usr/local
BINDIR = $(PREFIX)/bin
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
MANDIR = $(PREFIX)/share/man
DESTDIR =

CC = cc
LLVM_CONFIG = llvm-config
PYTHON = /usr/bin/python3
CFLAGS = -O2 -g
WARN = -Wall -Wextra -Wno-unused-parameter
XCFLAGS = -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE $(WARN) -Isrc -Ibuild
JANSSON_CFLAGS = `pkg-config --cflags jansson`
JANSSON_LIBS = `pkg-config --libs jansson`
LDLIBS = $(JANSSON_LIBS) -lm

B = build
OBJS = $(B)/util.o $(B)/diag.o $(B)/ast.o $(B)/parse.o $(B)/lex.o $(B)/ir.o \
       $(B)/check.o $(B)/lower.o $(B)/interp.o $(B)/weights.o $(B)/npy.o $(B)/run.o \
       $(B)/main.o

all: deps $(B)/nestc

deps:
	@sh scripts/deps.sh

$(B)/nestc: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(B)/stamp:
	mkdir -p $(B)
	touch $@

$(B)/parse.c $(B)/parse.h: grammar/nest.y $(B)/stamp
	bison -Wall -Werror --defines=$(B)/parse.h -o $(B)/parse.c grammar/nest.y

$(B)/lex.c $(B)/lex.h: grammar/nest.l $(B)/stamp
	flex --header-file=$(B)/lex.h -o $(B)/lex.c grammar/nest.l

# Generated scanner and parser: their own warnings are not ours to fix.
$(B)/parse.o: $(B)/parse.c $(B)/lex.h src/nestc.h
	$(CC) $(XCFLAGS) $(CFLAGS) -Wno-unused-function -c -o $@ $(B)/parse.c
$(B)/lex.o: $(B)/lex.c $(B)/parse.h src/nestc.h
	$(CC) $(XCFLAGS) $(CFLAGS) -Wno-unused-function -Wno-sign-compare -c -o $@ $(B)/lex.c

$(B)/weights.o: src/weights.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) $(JANSSON_CFLAGS) -c -o $@ src/weights.c
$(B)/util.o: src/util.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/util.c
$(B)/diag.o: src/diag.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/diag.c
$(B)/ast.o: src/ast.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/ast.c
$(B)/ir.o: src/ir.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/ir.c
$(B)/check.o: src/check.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/check.c
$(B)/lower.o: src/lower.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/lower.c
$(B)/interp.o: src/interp.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/interp.c
$(B)/npy.o: src/npy.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/npy.c
$(B)/run.o: src/run.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/run.c
$(B)/main.o: src/main.c src/nestc.h $(B)/stamp
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ src/main.c

clean:
	rm -rf $(B)

.PHONY: all deps clean

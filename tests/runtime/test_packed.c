/* test_packed.c - weights held once, packed (issue #14): a weight that only
 * compiled matmuls and gathers read is packed where it was read, the
 * compiled embedding gather reads its rows out of the packed panels, and
 * with --embed-weights the matrices come packed in the program.
 *
 *   test_packed WEIGHTS V D NPARAMS   last line "N passed, N failed"
 *
 * Linked with two builds of samples/gpt2.nest (run_threads.py): `gpt2`, and
 * `gpt2e` built with --name gpt2e --embed-weights WEIGHTS. V and D are the
 * vocabulary and width (wte.weight is [V, D]), NPARAMS the params' count.
 * Every result is compared bit for bit with an instance made with
 * NESTRT_PREPACK=0, which packs nothing and reads every weight as it is.
 * The program replaces its own file on disk once (and puts a copy back). */
#define _POSIX_C_SOURCE 200809L
#include "gpt2.h"
#include "gpt2e.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S GPT2_FORWARD_TOKENS_NUMEL
#define OUT GPT2_FORWARD_OUT_NUMEL

extern const nestrt_prepacked gpt2e__packed[];
extern const int gpt2e__npacked;

static int npass, nfail;

#define CHECK(cond, ...) check((cond), __LINE__, __VA_ARGS__)
static int check(int cond, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int check(int cond, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (cond) {
		npass++;
		printf("ok ");
	} else {
		nfail++;
		printf("FAIL test_packed.c:%d: ", line);
	}
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	va_end(ap);
	return cond;
}

static int32_t tokens[S];
static float ref[OUT], out[OUT];

static int same(void)
{
	return memcmp(out, ref, sizeof out) == 0;
}

/* Embedded instances created from several threads at once (behind a
 * barrier): they share one set of weights. */
#define NCONC 4
static pthread_barrier_t barrier;
static gpt2e *conc[NCONC];
static float conc_out[NCONC][OUT];
static int conc_rc[NCONC];

static void *create_and_call(void *arg)
{
	int k = (int)(intptr_t)arg;
	nestrt_error err;
	pthread_barrier_wait(&barrier);
	conc[k] = gpt2e_new_embedded(&err);
	conc_rc[k] = conc[k] ? gpt2e_forward(conc[k], tokens, conc_out[k]) : -1;
	return NULL;
}

/* A copy of this program's file at dst, every byte XORed with x. 0, or -1. */
static int copy_self(const char *dst, unsigned char x)
{
	FILE *in = fopen("/proc/self/exe", "rb"), *out = in ? fopen(dst, "wb") : NULL;
	unsigned char buf[1 << 16];
	size_t n;
	int rc = out ? 0 : -1;
	while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0) {
		for (size_t i = 0; i < n; i++)
			buf[i] ^= x;
		rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
	}
	if (in && ferror(in))
		rc = -1;
	if (out && fclose(out) != 0)
		rc = -1;
	if (in)
		fclose(in);
	return rc == 0 ? chmod(dst, 0755) : -1;
}

/* The packed matrices of embedded weights are read from the program's file
 * while it is the file mapped; replaced on disk by other bytes (as by an
 * upgrade) while the program runs, they come from the mapping. The kernel
 * then names the mapping "PATH (deleted)": a file of that name, of other
 * bytes, is not the program's either. No embedded instance may live (it
 * would share its copy). */
static void replaced_program(void)
{
	char self[4096], keep[4200], bad[4200], gone[4200];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (!CHECK(n > 0 && (size_t)n < sizeof self - 1, "readlink /proc/self/exe"))
		return;
	self[n] = 0;
	snprintf(keep, sizeof keep, "%s.keep", self);
	snprintf(bad, sizeof bad, "%s.bad", self);
	snprintf(gone, sizeof gone, "%s (deleted)", self);
	int ok = copy_self(keep, 0) == 0 && copy_self(gone, 0x5a) == 0 && copy_self(bad, 0xff) == 0 &&
	         rename(bad, self) == 0;
	nestrt_error err;
	gpt2e *m = ok ? gpt2e_new_embedded(&err) : NULL;
	CHECK(ok && m && gpt2e_forward(m, tokens, out) == 0 && same(),
	      "embedded, the program's file replaced by other bytes as it runs: bit-identical");
	gpt2e_free(m);
	CHECK(rename(keep, self) == 0, "the program's file put back");
	unlink(bad);
	unlink(gone);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: test_packed WEIGHTS V D NPARAMS\n");
		return 2;
	}
	const char *path = argv[1];
	int64_t V = atoll(argv[2]), D = atoll(argv[3]);
	int nparams = atoi(argv[4]);
	for (int i = 0; i < S; i++)
		tokens[i] = (int32_t)((i * 37 + 5) % V);
	tokens[S - 1] = (int32_t)(V - 1); /* the last row: in the last, partial panel when V is not a multiple */
	nestrt_error err;

	/* the reference: nothing packed, every weight read as it is */
	setenv("NESTRT_PREPACK", "0", 1);
	nestrt_weights *wa = nestrt_weights_open(path, &err);
	gpt2 *ma = wa ? gpt2_new(wa, &err) : NULL;
	if (!CHECK(ma && gpt2_forward(ma, tokens, ref) == 0, "reference instance, NESTRT_PREPACK=0"))
		return 1;
	unsetenv("NESTRT_PREPACK");

	/* packed at creation: the tied embedding read by the gather and by the
	 * LM head, held once, where it was read */
	nestrt_weights *wb = nestrt_weights_open(path, &err);
	gpt2 *mb = wb ? gpt2_new(wb, &err) : NULL;
	CHECK(mb && gpt2_forward(mb, tokens, out) == 0 && same(), "packed instance: bit-identical to the reference");
	nestrt_ctx *cb = nestrt_model_ctx((nestrt_model *)mb);
	int rows_found = 0, in_place = 0, transposed = 0;
	for (int i = 0; cb && i < nparams; i++) {
		int64_t lay[2] = {0, 0};
		const void *pk = nestrt_packed_rows(cb, cb->params[i], V, D, 0, lay);
		/* (a [4D, D] matrix is a [V, D] one too when V = 4D: packed plain) */
		if (pk && lay[1] == 1) {
			rows_found++;
			in_place += pk == cb->params[i];
			transposed += lay[0] > 0;
		}
	}
	CHECK(rows_found == 1 && transposed == 1,
	      "wte.weight: one packed copy serves the gather's rows (transposed, for the LM head): %d found", rows_found);
	CHECK(in_place == 1, "wte.weight: packed where it was read, no second copy");

	/* the public bind gives the elements back, not the packed copy */
	nestrt_param wte = {"wte.weight", NESTRT_F32, 2, {V, D}};
	const void *pa = NULL, *pb = NULL;
	CHECK(nestrt_weights_bind(wa, &wte, 1, &pa, &err) == 0 && nestrt_weights_bind(wb, &wte, 1, &pb, &err) == 0 &&
	          memcmp(pa, pb, (size_t)(V * D) * sizeof(float)) == 0,
	      "nestrt_weights_bind after packing in place: wte.weight's own elements");
	CHECK(gpt2_forward(mb, tokens, out) == 0 && same(), "packed instance after that bind: still bit-identical");

	/* a second instance over the same weights that reads them unpacked */
	setenv("NESTRT_PREPACK", "0", 1);
	gpt2 *mc = gpt2_new(wb, &err);
	unsetenv("NESTRT_PREPACK");
	CHECK(mc && gpt2_forward(mc, tokens, out) == 0 && same(),
	      "NESTRT_PREPACK=0 instance over weights packed in place: bit-identical");
	CHECK(gpt2_forward(mb, tokens, out) == 0 && same(), "the packed instance beside it: bit-identical");
	gpt2 *md = gpt2_new(wb, &err);
	CHECK(md && gpt2_forward(md, tokens, out) == 0 && same(), "a third instance over those weights: bit-identical");

	/* embedded: the matrices come packed; nothing is packed at creation */
	gpt2e *me[3];
	for (int k = 0; k < 3; k++) {
		me[k] = gpt2e_new_embedded(&err);
		CHECK(me[k] && gpt2e_forward(me[k], tokens, out) == 0 && same(),
		      "embedded instance %d: bit-identical to the reference", k + 1);
	}
	/* each matrix nestc packed is what the products of every instance read:
	 * one copy of its bytes (in huge pages), shared */
	int served = 0;
	for (int j = 0; me[0] && me[1] && me[2] && j < gpt2e__npacked; j++) {
		const nestrt_prepacked *q = &gpt2e__packed[j];
		size_t len = (size_t)((q->n + q->wide - 1) / q->wide * q->wide * q->k) * (q->flags & NESTRT_PACK_F64 ? 8 : 4);
		const void *seen[3] = {NULL, NULL, NULL};
		for (int k = 0; k < 3; k++) {
			nestrt_ctx *c = nestrt_model_ctx((nestrt_model *)me[k]);
			for (int i = 0; c && i < nparams && !seen[k]; i++) {
				const void *pk = nestrt_packed(c, c->params[i], q->k, q->n, q->wide, q->flags);
				if (pk && memcmp(pk, q->data, len) == 0)
					seen[k] = pk;
			}
		}
		served += seen[0] && seen[0] == seen[1] && seen[1] == seen[2];
	}
	/* wte, and per block c_attn, attn.c_proj, c_fc, mlp.c_proj */
	int want = (nparams - 4) / 12 * 4 + 1;
	CHECK(gpt2e__npacked == want && served == want,
	      "embedded: %d matrices linked in packed (want %d), %d of them read as linked by every instance, one copy",
	      gpt2e__npacked, want, served);
	/* and from threads at once, while none lives */
	for (int k = 0; k < 3; k++)
		gpt2e_free(me[k]);
	pthread_t th[NCONC];
	pthread_barrier_init(&barrier, NULL, NCONC);
	for (int k = 0; k < NCONC; k++)
		pthread_create(&th[k], NULL, create_and_call, (void *)(intptr_t)k);
	int good = 0, shared = 0;
	for (int k = 0; k < NCONC; k++)
		pthread_join(th[k], NULL);
	pthread_barrier_destroy(&barrier);
	const nestrt_prepacked *q0 = &gpt2e__packed[0];
	const void *first = NULL;
	for (int k = 0; k < NCONC; k++) {
		good += conc_rc[k] == 0 && memcmp(conc_out[k], ref, sizeof ref) == 0;
		nestrt_ctx *c = conc[k] ? nestrt_model_ctx((nestrt_model *)conc[k]) : NULL;
		const void *pk = NULL;
		for (int i = 0; c && i < nparams && !pk; i++)
			pk = nestrt_packed(c, c->params[i], q0->k, q0->n, q0->wide, q0->flags);
		if (k == 0)
			first = pk;
		shared += pk && pk == first;
	}
	CHECK(good == NCONC && shared == NCONC,
	      "%d embedded instances created by threads at once: %d bit-identical, %d sharing one packed copy", NCONC, good,
	      shared);
	for (int k = 0; k < NCONC; k++)
		gpt2e_free(conc[k]);
	for (int k = 0; k < 3; k++)
		me[k] = NULL;

	setenv("NESTRT_PREPACK", "0", 1);
	gpt2e *mf = gpt2e_new_embedded(&err);
	unsetenv("NESTRT_PREPACK");
	CHECK(mf && gpt2e_forward(mf, tokens, out) == 0 && same(),
	      "embedded with NESTRT_PREPACK=0 (the packed matrices unpacked): bit-identical");

	gpt2e_free(mf);
	replaced_program();
	for (int k = 0; k < 3; k++)
		gpt2e_free(me[k]);
	gpt2_free(md);
	gpt2_free(mc);
	gpt2_free(mb);
	gpt2_free(ma);
	nestrt_weights_close(wb);
	nestrt_weights_close(wa);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail ? 1 : 0;
}

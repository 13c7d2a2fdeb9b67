/* driver.c - run-time dims and sequences of the compiled GPT-2 sample, for
 * tests/generate/run.py. Usage: driver WEIGHTS CMD...; commands:
 *   prefill T OUT.bin     tokens 1..T (mod V), a fresh sequence; logits to OUT.bin
 *   bad                   every bad call below must fail with its message,
 *                         write nothing, and leave the instance usable */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"

static int fails(gpt2 *m, int rc, const char *want, const float *out, size_t n, const char *what)
{
	const char *msg = gpt2_error(m);
	if (rc != -1 || !msg || !strstr(msg, want)) {
		printf("FAIL %s: rc %d, message '%s', wanted '%s'\n", what, rc, msg ? msg : "(none)", want);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		if (out[i] != 12345.0f) {
			printf("FAIL %s: the failed call wrote into its output\n", what);
			return 1;
		}
	printf("ok %s: %s\n", what, msg);
	return 0;
}

int main(int argc, char **argv)
{
	nestrt_error err;
	nestrt_weights *w = nestrt_weights_open(argv[1], &err);
	gpt2 *m = w ? gpt2_new(w, &err) : NULL;
	gpt2_seq *s = m ? gpt2_seq_new(m, &err) : NULL;
	if (!s) {
		printf("FAIL setup: %s\n", err.message);
		return 1;
	}
	int64_t ctx = GPT2_PREFILL_T_MAX, V = GPT2_DECODE_OUT_NUMEL;
	int32_t *tok = calloc((size_t)ctx + 2, sizeof(int32_t));
	for (int64_t i = 0; i < ctx + 2; i++)
		tok[i] = (int32_t)((i * 7 + 1) % V);
	float *out = malloc(sizeof(float) * (size_t)((ctx + 2) * V));
	if (!strcmp(argv[2], "prefill")) {
		int64_t T = atoll(argv[3]);
		if (gpt2_prefill(m, s, T, tok, out) != 0) {
			printf("FAIL prefill: %s\n", gpt2_error(m));
			return 1;
		}
		FILE *f = fopen(argv[4], "wb");
		fwrite(out, sizeof(float), (size_t)(T * V), f);
		fclose(f);
		gpt2_seq_free(s);
		gpt2_free(m);
		nestrt_weights_close(w);
		free(tok);
		free(out);
		return 0;
	}
	int bad = 0;
	size_t n = (size_t)((ctx + 1) * V);
#define RESET() for (size_t i = 0; i < n; i++) out[i] = 12345.0f
	RESET();
	bad += fails(m, gpt2_prefill(m, s, 0, tok, out), "T = 0: 1 <= T does not hold", out, n, "prefill T=0");
	RESET();
	bad += fails(m, gpt2_prefill(m, s, ctx + 1, tok, out), "T <= CTX does not hold", out, n, "prefill T=CTX+1");
	RESET();
	bad += fails(m, gpt2_prefill(m, s, -5, tok, out), "1 <= T does not hold", out, n, "prefill T=-5");
	RESET();
	bad += fails(m, gpt2_decode(m, s, ctx, tok, out), "P < CTX does not hold", out, n, "decode P=CTX (beyond the cache)");
	RESET();
	bad += fails(m, gpt2_decode(m, s, 0, tok, out), "P = 0: 1 <= P does not hold", out, n, "decode P=0");
	RESET();
	bad += fails(m, gpt2_decode(m, NULL, 3, tok, out), "no sequence (NULL)", out, n, "decode without a sequence");
	/* the state read before it was written: decode on a fresh sequence, and
	 * past a gap after a prefill of 4 positions */
	gpt2_seq *fresh = gpt2_seq_new(m, &err);
	RESET();
	bad += fails(m, gpt2_decode(m, fresh, 5, tok, out), "P = 5: reads state cache.0.k at 0:6 on axis 2 before it was written there (written: 5:6)",
	             out, n, "decode on a fresh sequence");
	RESET();
	gpt2_seq_reset(fresh);
	if (gpt2_prefill(m, fresh, 4, tok, out)) {
		printf("FAIL prefill 4: %s\n", gpt2_error(m));
		bad++;
	}
	RESET();
	bad += fails(m, gpt2_decode(m, fresh, 6, tok, out), "reads state cache.0.k at 0:7 on axis 2 before it was written there (written: 0:4)",
	             out, n, "decode past a gap in the cache");
	RESET();
	if (gpt2_decode(m, fresh, 4, tok, out) != 0) {
		printf("FAIL decode at the next position after the errors: %s\n", gpt2_error(m));
		bad++;
	} else {
		printf("ok decode at the next position after the errors\n");
	}
	gpt2_seq_free(fresh);
	/* errors per model and thread: a failure of m is still m's after a
	 * success of another instance m2; NULL asks for the last call of any */
	{
		gpt2 *m2 = gpt2_new(w, &err);
		gpt2_seq *s3 = m2 ? gpt2_seq_new(m2, &err) : NULL;
		float *o2 = malloc(sizeof(float) * (size_t)V);
		int rc1 = gpt2_prefill(m, s, 0, tok, o2);
		int rc2 = s3 ? gpt2_prefill(m2, s3, 1, tok, o2) : -1;
		const char *e1 = gpt2_error(m), *e2 = m2 ? gpt2_error(m2) : "no m2", *eany = nestrt_model_error(NULL);
		int rc3 = gpt2_prefill(m, s, 0, tok, o2);
		const char *eany2 = nestrt_model_error(NULL);
		if (rc1 != -1 || rc2 != 0 || !e1 || !strstr(e1, "T = 0") || e2 || eany || rc3 != -1 || !eany2 ||
		    !strstr(eany2, "T = 0")) {
			printf("FAIL errors per model: rc %d %d %d, m '%s', m2 '%s', any '%s' then '%s'\n", rc1, rc2, rc3,
			       e1 ? e1 : "(none)", e2 ? e2 : "(none)", eany ? eany : "(none)", eany2 ? eany2 : "(none)");
			bad++;
		} else {
			printf("ok an error of m stays m's after a success of m2; NULL gives the last call's\n");
		}
		gpt2_seq_free(s3);
		gpt2_free(m2);
		free(o2);
	}
	/* still usable: the same prefill twice gives the same bits, and a
	 * decode after it the same as a prefill of the longer prompt's last row */
	float *a = malloc(sizeof(float) * (size_t)(4 * V)), *b = malloc(sizeof(float) * (size_t)(5 * V));
	float *c = malloc(sizeof(float) * (size_t)V);
	gpt2_seq *s2 = gpt2_seq_new(m, &err);
	if (gpt2_prefill(m, s, 4, tok, a) || gpt2_decode(m, s, 4, tok + 4, c) || gpt2_prefill(m, s2, 5, tok, b)) {
		printf("FAIL usable after errors: %s\n", gpt2_error(m));
		return 1;
	}
	double worst = 0;
	for (int64_t i = 0; i < V; i++) {
		double d = c[i] - b[4 * V + i];
		d = d < 0 ? -d : d;
		worst = d > worst ? d : worst;
	}
	if (worst > 1e-4) {
		printf("FAIL decode after prefill: differs from prefill of 5 by %g\n", worst);
		bad++;
	} else {
		printf("ok decode after prefill equals prefill of the longer prompt (%g)\n", worst);
	}
	gpt2_seq_reset(s);
	float *a2 = malloc(sizeof(float) * (size_t)(4 * V));
	if (gpt2_prefill(m, s, 4, tok, a2) || memcmp(a, a2, sizeof(float) * (size_t)(4 * V))) {
		printf("FAIL prefill after reset differs\n");
		bad++;
	} else {
		printf("ok prefill after errors and reset gives the same bits\n");
	}
	gpt2_seq_free(s2);
	gpt2_seq_free(s);
	gpt2_free(m);
	nestrt_weights_close(w);
	free(a);
	free(a2);
	free(b);
	free(c);
	free(tok);
	free(out);
	return bad != 0;
}

/* bounds.c - tests/generate/bounds.nest compiled: the where clauses' bounds
 * as the header and the entry points hold them (a strict bound, a bound with
 * a coefficient that a huge dim must not wrap past), and the state read only
 * where it was written (after a reset; in boxes). Prints ok/FAIL lines; exit
 * status 1 on a failure. Every failing call must leave its output as it was. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"

static int bad;

static void check(int ok, const char *what, const char *detail)
{
	printf("%s %s%s%s\n", ok ? "ok" : "FAIL", what, detail && *detail ? ": " : "", detail ? detail : "");
	bad += !ok;
}

/* rc must be -1 with want in the message, and out[0..n) still 777 */
static void fails(bounds *m, int rc, const float *out, int n, const char *want, const char *what)
{
	const char *msg = bounds_error(m);
	int kept = 1;
	for (int i = 0; i < n; i++)
		kept &= out[i] == 777.0f;
	char d[600];
	snprintf(d, sizeof d, "rc %d, message '%s'%s", rc, msg ? msg : "(none)", kept ? "" : ", output written");
	check(rc == -1 && msg && strstr(msg, want) && kept, what, d);
}

/* An entry point of our own for nestrt_model_call_dims: counts its runs and,
 * asked to, calls again on the sequence it was given (one call at a time per
 * sequence: the inner call must fail). */
static int entry_runs;
static nestrt_model *reenter_m;
static nestrt_seq *reenter_s;
static char reenter_msg[512];

static void *seen_bufs[72]; /* the first buffers of the last call (then freed) */
static int nseen;

static int fake_entry(nestrt_ctx *ctx, void **bufs, const int64_t *dims, char *ws)
{
	entry_runs++;
	for (int i = 0; i < nseen; i++)
		seen_bufs[i] = bufs[i];
	if (reenter_s) {
		nestrt_seq *s = reenter_s;
		reenter_s = NULL;
		int64_t d[1] = {1};
		const char *names[1] = {"T"};
		int rc = nestrt_model_call_dims(reenter_m, 1, s, fake_entry, bufs, 0, d, 1, names, NULL, 0, NULL, 0, "inner");
		snprintf(reenter_msg, sizeof reenter_msg, "%d %s", rc, nestrt_model_error(reenter_m));
	}
	return 0;
}

static const nestrt_model_desc other_desc = {"other", NULL, 0, NULL, 0, 0, "test", NULL, 0, NULL, NULL, NULL};

static void fill(float *p, int n, float v)
{
	for (int i = 0; i < n; i++)
		p[i] = v;
}

int main(void)
{
	nestrt_error err;
	setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps the lines before it */
	bounds *m = bounds_new(NULL, &err); /* no params */
	bounds_seq *s = m ? bounds_seq_new(m, &err) : NULL;
	if (!s) {
		printf("FAIL setup: %s\n", err.message);
		return 1;
	}
	float x[256], out[256];
	for (int i = 0; i < 256; i++)
		x[i] = (float)i;

	/* where T > 1, T < 9: T from 2 to 8 */
	check(BOUNDS_STRICT_T_MIN == 2 && BOUNDS_STRICT_T_MAX == 8, "strict.header_min_max", "");
	fill(out, 16, 777.0f);
	fails(m, bounds_strict(m, 1, x, out), out, 16, "T = 1: T > 1 does not hold", "strict.T1_refused");
	fails(m, bounds_strict(m, 9, x, out), out, 16, "T = 9: T < 9 does not hold", "strict.T9_refused");
	fails(m, bounds_strict(m, INT64_MIN, x, out), out, 16, "T > 1 does not hold", "strict.T_min_refused");
	int rc = bounds_strict(m, 2, x, out);
	check(rc == 0 && out[0] == 0.0f && out[1] == 2.0f, "strict.T2_runs", bounds_error(m));
	rc = bounds_strict(m, 8, x, out);
	check(rc == 0 && out[7] == 14.0f, "strict.T8_runs", bounds_error(m));

	/* where 1 <= T, 2 * T <= 16: 2 * T computed in 64 bits wraps for these
	 * T (2 * INT64_MAX is -2, 2 * (2^62 + 4) is INT64_MIN + 8) */
	check(BOUNDS_COEF_T_MIN == 1 && BOUNDS_COEF_T_MAX == 8, "coef.header_min_max", "");
	fill(out, 16, 777.0f);
	fails(m, bounds_coef(m, 9, x, out), out, 16, "T = 9: 2 * T <= 16 does not hold", "coef.T9_refused");
	fails(m, bounds_coef(m, INT64_MAX, x, out), out, 16, "2 * T <= 16 does not hold", "coef.T_int64_max_refused");
	fails(m, bounds_coef(m, ((int64_t)1 << 62) + 4, x, out), out, 16, "2 * T <= 16 does not hold",
	      "coef.T_2pow62_refused");
	fails(m, bounds_coef(m, INT64_MIN / 2, x, out), out, 16, "1 <= T does not hold", "coef.T_negative_refused");
	rc = bounds_coef(m, 8, x, out);
	check(rc == 0 && out[7] == 8.0f, "coef.T8_runs", bounds_error(m));

	/* lower bounds: the larger of two, 0 for one below 0 or none; sizes
	 * are never negative */
	check(BOUNDS_LOWER_T_MIN == 4 && BOUNDS_LOWER_T_MAX == 16 && BOUNDS_LOWER_P_MIN == 0 && BOUNDS_LOWER_P_MAX == 4,
	      "lower.header_min_max", "");
	fill(out, 16, 777.0f);
	fails(m, bounds_lower(m, 0, 3, x, out), out, 16, "T = 3: 4 <= T does not hold", "lower.T3_refused");
	fails(m, bounds_lower(m, 0, 17, x, out), out, 16, "T = 17: T <= 16 does not hold", "lower.T17_refused");
	rc = bounds_lower(m, 4, 4, x, out);
	check(rc == 0 && out[3] == 4.0f, "lower.T4_runs", bounds_error(m));
	check(BOUNDS_NEG_T_MIN == 0 && BOUNDS_NEG_T_MAX == 12 && BOUNDS_NOLO_T_MIN == 0 && BOUNDS_NOLO_T_MAX == 12,
	      "negative_bounds.header_min_max", "");
	fill(out, 16, 777.0f);
	fails(m, bounds_neg(m, -1, x, out), out, 16, "T = -1: 0 <= T", "negative_bounds.neg_T_minus1_refused");
	fails(m, bounds_nolo(m, -1, x, out), out, 16, "T = -1: 0 <= T does not hold", "negative_bounds.nolo_T_minus1_refused");
	fails(m, bounds_nolo(m, INT64_MIN, x, out), out, 16, "0 <= T does not hold", "negative_bounds.nolo_T_min_refused");
	rc = bounds_neg(m, 0, x, out) | bounds_nolo(m, 0, x, out);
	check(rc == 0, "negative_bounds.T0_runs", bounds_error(m));
	rc = bounds_nolo(m, 12, x, out);
	check(rc == 0 && out[11] == 10.0f, "negative_bounds.T12_runs", bounds_error(m));
	/* P + T <= 9 */
	float y[16] = {0};
	rc = bounds_edge(m, 4, 5, x, y, out);
	check(rc == 0 && out[0] == 4.0f && out[4] == 8.0f, "edge.P4_T5_runs", bounds_error(m));
	rc = bounds_edge(m, 1, 8, x, y, out);
	check(rc == 0 && out[7] == 8.0f, "edge.P1_T8_runs", bounds_error(m));
	fill(out, 16, 777.0f);
	fails(m, bounds_edge(m, 2, 8, x, y, out), out, 16, "P = 2, T = 8: P + T <= 9 does not hold", "edge.P2_T8_refused");

	/* mix(x[P:P + T], y[0:P + 1]) = 2 x[P:P + T] + P + 1 (y all ones),
	 * through the variant for T == 1 and the general one */
	{
		float ones[16];
		fill(ones, 16, 1.0f);
		int ok = 1;
		for (int P = 0; P <= 8; P += 3)
			for (int T = 1; T <= 3; T++) {
				fill(out, 16, 777.0f);
				ok &= bounds_spec(m, P, T, x, ones, out) == 0;
				for (int i = 0; i < T; i++)
					ok &= out[i] == 2.0f * (float)(P + i) + (float)(P + 1);
				ok &= out[T] == 777.0f;
			}
		check(ok, "specialize.other_dim_at_run_time", bounds_error(m));
		fill(out, 16, 777.0f);
		fails(m, bounds_start(m, 1, 4, x, ones, out), out, 16,
		      "P = 1, T = 4: 2 <= P (the start of the slice at bounds.nest:", "start.P1_refused");
		rc = bounds_start(m, 2, 4, x, ones, out);
		check(rc == 0 && out[0] == 1.0f && out[3] == 4.0f, "start.P2_runs", bounds_error(m));
	}

	check(BOUNDS_COEFS_T_MIN == 3 && BOUNDS_COEFS_T_MAX == 8, "coefs.header_min_max", "");
	fill(out, 16, 777.0f);
	fails(m, bounds_coefs(m, 2, x, out), out, 16, "T = 2: 3 * T >= 7 does not hold", "coefs.T2_refused");
	fails(m, bounds_coefs(m, 9, x, out), out, 16, "T = 9: 17 >= 2 * T does not hold", "coefs.T9_refused");
	rc = bounds_coefs(m, 3, x, out) | bounds_coefs(m, 8, x, out);
	check(rc == 0 && out[7] == 9.0f, "coefs.T3_T8_run", bounds_error(m));

	/* a state written, then reset, is unwritten again */
	float zero[256] = {0};
	rc = bounds_put(m, s, 0, 0, 4, 4, x, out);
	check(rc == 0, "state.put_4x4", bounds_error(m));
	rc = bounds_get(m, s, 4, 4, zero, out);
	check(rc == 0 && out[5] == 5.0f && out[15] == 15.0f, "state.get_what_was_put", bounds_error(m));
	bounds_seq_reset(s);
	fill(out, 256, 777.0f);
	fails(m, bounds_get(m, s, 4, 4, zero, out), out, 16, "reads state s before it was written (a new or reset sequence)",
	      "state.read_after_reset_refused");
	fails(m, bounds_get(m, s, 1, 1, zero, out), out, 1, "before it was written", "state.read_one_after_reset_refused");

	/* boxes: rows 0:4 x cols 0:4, then row 2 x cols 0:8 (differs on both
	 * axes: not one box); 0:4 x 0:8 has unwritten elements */
	rc = bounds_put(m, s, 0, 0, 4, 4, x, out);
	rc |= bounds_put(m, s, 2, 0, 1, 8, x + 100, out);
	check(rc == 0, "state.put_two_boxes", bounds_error(m));
	fill(out, 256, 777.0f);
	fails(m, bounds_get(m, s, 4, 8, zero, out), out, 32, "reads state s at 0:8 on axis 1 before it was written there (written: 0:4)",
	      "state.read_past_box_refused");
	fails(m, bounds_get(m, s, 4, 5, zero, out), out, 20, "before it was written there", "state.read_one_column_past_refused");
	rc = bounds_get(m, s, 4, 4, zero, out);
	/* row 2 is b's first 4 elements now, the others a's */
	check(rc == 0 && out[0] == 0.0f && out[4 * 1 + 3] == 7.0f && out[4 * 2 + 1] == 101.0f && out[4 * 3 + 3] == 15.0f,
	      "state.read_inside_box", bounds_error(m));
	/* one that extends it along one axis grows it: rows 4:6 */
	rc = bounds_put(m, s, 4, 0, 2, 4, x + 200, out);
	rc |= bounds_get(m, s, 6, 4, zero, out);
	check(rc == 0 && out[4 * 5 + 3] == 207.0f, "state.box_grows_along_one_axis", bounds_error(m));
	fails(m, bounds_get(m, s, 7, 4, zero, out), out, 0, "at 0:7 on axis 0 before it was written there (written: 0:6)",
	      "state.read_past_grown_box_refused");
	/* and a gap is no growth: rows 8:9 leave 6:8 unwritten */
	rc = bounds_put(m, s, 8, 0, 1, 4, x, out);
	check(rc == 0, "state.put_past_gap", bounds_error(m));
	fails(m, bounds_get(m, s, 9, 4, zero, out), out, 0, "on axis 0 before it was written there", "state.read_over_gap_refused");

	/* a write that contains the box replaces it; one inside leaves it; one
	 * below it on one axis grows it downwards; one that overlaps it on one
	 * axis grows it */
	bounds_seq *t = bounds_seq_new(m, &err);
	rc = bounds_put(m, t, 4, 0, 4, 4, x, out) | bounds_put(m, t, 2, 0, 2, 4, x, out);
	fill(out, 256, 777.0f);
	fails(m, bounds_get(m, t, 8, 4, zero, out), out, 32, "at 0:8 on axis 0 before it was written there (written: 2:8)",
	      "state.box_grows_downwards");
	rc |= bounds_put(m, t, 0, 0, 8, 8, x, out) | bounds_put(m, t, 2, 3, 2, 2, x, out);
	rc |= bounds_get(m, t, 8, 8, zero, out);
	check(rc == 0 && out[8 * 7 + 7] == 63.0f && out[8 * 2 + 3] == 0.0f, "state.box_contained_and_inside", bounds_error(m));
	bounds_seq_reset(t);
	rc = bounds_put(m, t, 0, 0, 4, 4, x, out) | bounds_put(m, t, 2, 0, 4, 4, x, out) | bounds_get(m, t, 6, 4, zero, out);
	check(rc == 0 && out[4 * 5 + 3] == 15.0f, "state.box_overlap_grows", bounds_error(m));
	fails(m, bounds_get(m, t, 7, 4, zero, out), out, 0, "(written: 0:6)", "state.box_overlap_grown_to_6");
	/* boxes whose starts differ per axis: rows 2:6 x cols 1:5, then a write
	 * of rows 1:8 x cols 1:8 contains it (the box is that write), then one
	 * of rows 0:1 x cols 1:8 grows it upwards, one of rows 3:5 x cols 0:8
	 * (both axes differ) changes nothing */
	bounds_seq_reset(t);
	rc = bounds_put(m, t, 2, 1, 4, 4, x, out) | bounds_put(m, t, 1, 1, 7, 7, x, out);
	rc |= bounds_getat(m, t, 1, 1, 7, 7, zero, out);
	check(rc == 0 && out[0] == 0.0f && out[7 * 6 + 6] == 48.0f, "state.box_contained_other_starts", bounds_error(m));
	fails(m, bounds_getat(m, t, 0, 1, 8, 7, zero, out), out, 0, "at 0:8 on axis 0 before it was written there (written: 1:8)",
	      "state.box_contained_other_starts_exact");
	rc = bounds_put(m, t, 0, 1, 1, 7, x, out) | bounds_getat(m, t, 0, 1, 8, 7, zero, out);
	check(rc == 0, "state.box_grows_upwards", bounds_error(m));
	rc = bounds_put(m, t, 3, 0, 2, 8, x, out);
	fails(m, bounds_getat(m, t, 0, 0, 8, 8, zero, out), out, 0, "at 0:8 on axis 1 before it was written there (written: 1:8)",
	      "state.box_two_axes_differ_unchanged");
	/* rows 2:4 (the box's end, another start) x cols 4:8: two axes differ, no growth */
	bounds_seq_reset(t);
	rc = bounds_put(m, t, 0, 0, 4, 4, x, out) | bounds_put(m, t, 2, 4, 2, 4, x, out);
	check(rc == 0, "state.put_end_aligned_box", bounds_error(m));
	fails(m, bounds_getat(m, t, 0, 0, 4, 8, zero, out), out, 0, "at 0:8 on axis 1 before it was written there (written: 0:4)",
	      "state.box_one_end_shared_no_growth");
	/* a write of no rows writes nothing: still unwritten */
	bounds_seq_reset(t);
	rc = bounds_putr(m, t, 3, 0, x, out);
	check(rc == 0, "state.empty_write_runs", bounds_error(m));
	fails(m, bounds_get(m, t, 1, 1, zero, out), out, 0, "reads state s before it was written (a new or reset sequence)",
	      "state.empty_write_writes_nothing");
	bounds_seq_free(t);

	/* a state of 2 MiB or more: mapped, zero, written and read, reset */
	{
		float *row = malloc(sizeof(float) * 4 * 1024), *got = malloc(sizeof(float) * 640 * 1024);
		for (int i = 0; i < 4 * 1024; i++)
			row[i] = (float)(i % 977) - 3.0f;
		bounds_seq *b = bounds_seq_new(m, &err);
		check(b != NULL, "big_state.seq_new", b ? "" : err.message);
		rc = b ? bounds_putbig(m, b, 0, row, out) | bounds_putbig(m, b, 4, row, out) | bounds_getbig(m, b, 8, got) : -1;
		check(rc == 0 && got[0] == -3.0f && got[4 * 1024 + 5] == 2.0f && got[8 * 1024 - 1] == row[4 * 1024 - 1],
		      "big_state.write_read", bounds_error(m));
		fails(m, b ? bounds_getbig(m, b, 9, got) : -1, out, 0, "reads state big at 0:9 on axis 0", "big_state.read_past");
		if (b)
			bounds_seq_reset(b);
		fails(m, b ? bounds_getbig(m, b, 1, got) : -1, out, 0, "reads state big before it was written",
		      "big_state.reset_unwritten");
		rc = b ? bounds_putbig(m, b, 636, row, out) : -1;
		rc |= b ? bounds_putbig(m, b, 632, row, out) : -1;
		check(rc == 0, "big_state.write_last_rows", bounds_error(m));
		bounds_seq_free(b);
		free(row);
		free(got);
	}

	/* 65 bools of state, written and read back */
	{
		bounds_seq *f = bounds_seq_new(m, &err);
		unsigned char in[65], got[65];
		for (int i = 0; i < 65; i++)
			in[i] = (unsigned char)(i % 3 == 0);
		memset(got, 7, sizeof got);
		rc = f ? bounds_setflags(m, f, in, out) | bounds_getflags(m, f, got) : -1;
		check(rc == 0 && !memcmp(in, got, 65), "state.65_bools", bounds_error(m));
		bounds_seq_free(f);
	}

	/* the sequence API's own errors */
	{
		int64_t bytes[2] = {64, -1};
		nestrt_seq *q = nestrt_seq_new(NULL, bytes, 1, &err);
		check(!q && strstr(err.message, "nestrt_seq_new: no model (NULL)"), "seq_api.no_model", q ? "made" : err.message);
		q = nestrt_seq_new((nestrt_model *)m, NULL, 2, &err);
		check(!q && strstr(err.message, "bad state table"), "seq_api.no_table", q ? "made" : err.message);
		q = nestrt_seq_new((nestrt_model *)m, NULL, 1, &err);
		check(!q && strstr(err.message, "bad state table"), "seq_api.no_table_one_state", q ? "made" : err.message);
		q = nestrt_seq_new((nestrt_model *)m, NULL, 0, &err);
		check(q != NULL, "seq_api.no_state_no_table", q ? "" : err.message);
		nestrt_seq_reset(q);
		nestrt_seq_free(q);
		q = nestrt_seq_new((nestrt_model *)m, bytes, -1, &err);
		check(!q && strstr(err.message, "bad state table"), "seq_api.negative_count", q ? "made" : err.message);
		q = nestrt_seq_new((nestrt_model *)m, bytes, 2, &err);
		check(!q && strstr(err.message, "out of memory"), "seq_api.negative_bytes", q ? "made" : err.message);
		int64_t huge[1] = {INT64_MAX};
		q = nestrt_seq_new((nestrt_model *)m, huge, 1, &err);
		check(!q && strstr(err.message, "out of memory"), "seq_api.huge_bytes", q ? "made" : err.message);
		nestrt_seq_reset(NULL);
		nestrt_seq_free(NULL);
		check(1, "seq_api.reset_and_free_of_null", "");
		fill(out, 16, 777.0f);
		fails(m, bounds_strict(m, 2, NULL, out), out, 16, "bounds_strict: argument 1 is NULL", "call.null_argument");
		fails(m, bounds_get(m, NULL, 2, 2, zero, out), out, 16, "bounds_get: no sequence (NULL)", "call.no_sequence");
		check(bounds_strict(NULL, 2, x, out) == -1 && strstr(nestrt_model_error(NULL), "no model (NULL)"),
		      "call.no_model", nestrt_model_error(NULL));
	}

	/* nestrt_model_call_dims itself: accesses no compiled model makes
	 * (a state out of range, a rank past the largest) are passed over; a
	 * read of a fresh sequence names the state (or '?'); a call inside a
	 * call on the same sequence fails; a sequence of another model too */
	{
		nestrt_model *nm = (nestrt_model *)m;
		bounds_seq *q = bounds_seq_new(m, &err);
		nestrt_seq *ns = (nestrt_seq *)q;
		static nestrt_access acc[4];
		memset(acc, 0, sizeof acc);
		acc[0].state = 99;
		acc[1].state = -1;
		acc[2].state = 0;
		acc[2].rank = NESTRT_MAX_RANK + 1;
		acc[3].state = 0;
		acc[3].rank = 1;
		acc[3].size[0][0] = 2;
		acc[3].name = "fake";
		void *bufs[1] = {out};
		int64_t d[1] = {3};
		const char *names[1] = {"T"};
		entry_runs = 0;
		rc = nestrt_model_call_dims(nm, 1, ns, fake_entry, bufs, 1, d, 1, names, NULL, 0, acc, 3, "direct");
		check(rc == 0 && entry_runs == 1, "call_dims.bad_accesses_passed_over", nestrt_model_error(nm));
		rc = nestrt_model_call_dims(nm, 1, ns, fake_entry, bufs, 1, d, 1, names, NULL, 0, acc, 4, "direct");
		const char *e = nestrt_model_error(nm);
		check(rc == -1 && entry_runs == 1 && e && !strcmp(e, "direct: T = 3: reads state fake before it was written "
		      "(a new or reset sequence)"), "call_dims.fresh_read_named", e);
		acc[3].name = NULL;
		acc[3].write = 1;
		rc = nestrt_model_call_dims(nm, 1, ns, fake_entry, bufs, 1, d, 0, names, NULL, 0, acc, 4, "direct");
		acc[3].write = 0;
		acc[3].size[0][0] = 3;
		rc |= nestrt_model_call_dims(nm, 1, ns, fake_entry, bufs, 1, d, 0, names, NULL, 0, acc, 4, "direct") != -1;
		e = nestrt_model_error(nm);
		check(rc == 0 && entry_runs == 2 && e && !strcmp(e, "direct: reads state ? at 0:3 on axis 0 before it was "
		      "written there (written: 0:2)"), "call_dims.unnamed_state_no_dims", e);
		reenter_m = nm;
		reenter_s = ns;
		rc = nestrt_model_call_dims(nm, 1, ns, fake_entry, bufs, 1, d, 1, names, NULL, 0, NULL, 0, "direct");
		check(rc == 0 && !strcmp(reenter_msg, "-1 inner: the sequence is in another call (one call at a time per "
		      "sequence)"), "call_dims.one_call_at_a_time", reenter_msg);
		rc = nestrt_model_call_dims(nm, 1, ns, fake_entry, bufs, 1, d, 1, names, NULL, 0, NULL, 0, "direct");
		check(rc == 0, "call_dims.free_again_after_the_call", nestrt_model_error(nm));
		/* a condition T == 3 (eq), and more buffers than the 64 kept on the stack */
		nestrt_dimcheck eq3 = {.c0 = -3, .coef = {1}, .eq = 1, .text = "T == 3"};
		entry_runs = 0;
		rc = nestrt_model_call_dims(nm, 0, NULL, fake_entry, bufs, 1, d, 1, names, &eq3, 1, NULL, 0, "direct");
		d[0] = 4;
		rc |= nestrt_model_call_dims(nm, 0, NULL, fake_entry, bufs, 1, d, 1, names, &eq3, 1, NULL, 0, "direct") != -1;
		e = nestrt_model_error(nm);
		check(rc == 0 && entry_runs == 1 && e && !strcmp(e, "direct: T = 4: T == 3 does not hold"), "call_dims.eq_condition", e);
		static float many[70];
		void *mb[70];
		for (int i = 0; i < 70; i++)
			mb[i] = &many[i];
		nseen = 72;
		rc = nestrt_model_call_dims(nm, 1, ns, fake_entry, mb, 70, d, 1, names, NULL, 0, NULL, 0, "direct");
		nseen = 0;
		int same = rc == 0;
		for (int i = 0; same && i < 70; i++)
			same = seen_bufs[i] == &many[i];
		check(same && seen_bufs[70] && seen_bufs[71] && seen_bufs[70] != seen_bufs[71], "call_dims.70_buffers_and_the_state",
		      nestrt_model_error(nm));
		nestrt_model *om = nestrt_model_new(&other_desc, NULL, &err);
		int64_t b1[1] = {64};
		nestrt_seq *os = om ? nestrt_seq_new(om, b1, 1, &err) : NULL;
		rc = nestrt_model_call_dims(nm, 1, os, fake_entry, bufs, 1, d, 1, names, NULL, 0, NULL, 0, "direct");
		e = nestrt_model_error(nm);
		check(os && rc == -1 && e && strstr(e, "direct: the sequence was made for another model"),
		      "call_dims.sequence_of_another_model", e);
		nestrt_seq_free(os);
		nestrt_model_free(om);
		bounds_seq_free(q);
	}

	/* within one call, the same */
	fill(out, 32, 777.0f);
	bounds_seq *fresh = bounds_seq_new(m, &err);
	fails(m, bounds_boxy(m, fresh, x, x + 100, out), out, 32, "reads state s at 0:8 on axis 1 before it was written there (written: 0:4)",
	      "state.boxy_refused");
	bounds_seq_free(fresh);

	bounds_seq_free(s);
	bounds_free(m);
	return bad != 0;
}

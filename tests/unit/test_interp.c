/* test_interp.c - the reference interpreter on small hand-built graphs, checked
 * against hand-computed values (and, for matmul and conv2d, against naive loops).
 *
 * Build and run (from the repository root):
 *   cc -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE -Wall -Wextra -Wno-unused-parameter \
 *      -Isrc -o build/test_interp tests/unit/test_interp.c src/interp/[a-z]*.c src/ir.c src/dtype.c \
 *      src/diag.c src/util.c -lm && build/test_interp
 */
#include "nestc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct T {
	int pass, fail;
	const char *name; /* the current test */
} T;

static void check(T *t, int ok, const char *what)
{
	if (ok) {
		t->pass++;
	} else {
		t->fail++;
		printf("FAIL %s: %s\n", t->name, what);
	}
}

/* ------------------------------------------------------------------ graph building */

#define MAXIO 16

typedef struct B {
	Program *p;
	Graph *g;
} B;

static Program *prog_new(void)
{
	Program *p = xcalloc(1, sizeof *p);
	p->arena = xcalloc(1, sizeof *p->arena);
	return p;
}

static void prog_free(Program *p)
{
	arena_free(p->arena);
	free(p->arena);
	if (p->src)
		source_free(p->src);
	free(p);
}

static B graph(Program *p, const char *name)
{
	B b = {p, graph_new(p, name, NULL)};
	b.g->inputs = arena_alloc(p->arena, MAXIO * sizeof(Node *));
	b.g->outputs = arena_alloc(p->arena, MAXIO * sizeof(Node *));
	return b;
}

static int64_t *shp(int rank, const int64_t *s)
{
	return rank ? (int64_t *)s : NULL;
}

/* A node with inputs (NULL-terminated). */
static Node *node(B *b, Op op, DType dt, int rank, const int64_t *shape, ...)
{
	Loc loc = {0, 0};
	Node *n = node_new(b->p, b->g, op, dt, rank, shp(rank, shape), loc);
	va_list ap;
	va_start(ap, shape);
	Node *in;
	while ((in = va_arg(ap, Node *)) != NULL)
		node_add_input(b->p, n, in);
	va_end(ap);
	return n;
}

static Node *input(B *b, DType dt, int rank, const int64_t *shape)
{
	Node *n = node(b, OP_INPUT, dt, rank, shape, NULL);
	n->a[0] = b->g->ninputs;
	b->g->inputs[b->g->ninputs++] = n;
	return n;
}

static void output(B *b, Node *n)
{
	b->g->outputs[b->g->noutputs++] = n;
}

static Node *cnst(B *b, DType dt, double v)
{
	Node *n = node(b, OP_CONST, dt, 0, NULL, NULL);
	n->fval = v;
	n->ival = (int64_t)v;
	return n;
}

/* ------------------------------------------------------------------ tensors */

static Tensor *tf(DType dt, int rank, const int64_t *shape, const double *v)
{
	Tensor *x = tensor_new(dt, rank, shp(rank, shape));
	for (int64_t k = 0; k < x->n; k++) {
		if (x->f)
			x->f[k] = dt == DT_F32 ? (double)(float)v[k] : v[k];
		else
			x->i[k] = (int64_t)v[k];
	}
	return x;
}

static Tensor *ti(DType dt, int rank, const int64_t *shape, const int64_t *v)
{
	Tensor *x = tensor_new(dt, rank, shp(rank, shape));
	memcpy(x->i, v, (size_t)x->n * sizeof(int64_t));
	return x;
}

/* Deterministic values in [-1, 1). */
static Tensor *trand(DType dt, int rank, const int64_t *shape, uint64_t *seed)
{
	Tensor *x = tensor_new(dt, rank, shape);
	for (int64_t k = 0; k < x->n; k++) {
		*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
		double v = (double)(*seed >> 11) / 9007199254740992.0 * 2 - 1;
		x->f[k] = dt == DT_F32 ? (double)(float)v : v;
	}
	return x;
}

static int close_to(double a, double b, double tol)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	if (isinf(a) || isinf(b))
		return a == b;
	return fabs(a - b) <= tol * (1 + fabs(b));
}

static void expect_f(T *t, const Tensor *x, int rank, const int64_t *shape, const double *v,
                     double tol)
{
	char what[256];
	if (!x) {
		check(t, 0, "no tensor");
		return;
	}
	if (x->rank != rank || (rank && memcmp(x->shape, shape, (size_t)rank * sizeof(int64_t))) ||
	    !x->f) {
		check(t, 0, "shape or storage");
		return;
	}
	for (int64_t k = 0; k < x->n; k++)
		if (!close_to(x->f[k], v[k], tol)) {
			snprintf(what, sizeof what, "element %lld is %.17g, expected %.17g",
			         (long long)k, x->f[k], v[k]);
			check(t, 0, what);
			return;
		}
	check(t, 1, "");
}

static void expect_i(T *t, const Tensor *x, int rank, const int64_t *shape, const int64_t *v)
{
	char what[256];
	if (!x) {
		check(t, 0, "no tensor");
		return;
	}
	if (x->rank != rank || (rank && memcmp(x->shape, shape, (size_t)rank * sizeof(int64_t))) ||
	    !x->i) {
		check(t, 0, "shape or storage");
		return;
	}
	for (int64_t k = 0; k < x->n; k++)
		if (x->i[k] != v[k]) {
			snprintf(what, sizeof what, "element %lld is %lld, expected %lld",
			         (long long)k, (long long)x->i[k], (long long)v[k]);
			check(t, 0, what);
			return;
		}
	check(t, 1, "");
}

/* Runs b's graph; outs must have room for its outputs. Returns interp_run's result. */
static int run(B *b, Tensor **in, Tensor **params, Tensor **outs)
{
	return interp_run(b->p, b->g, in, params, outs);
}

static void free_all(Tensor **ts, int n)
{
	for (int k = 0; k < n; k++)
		tensor_free(ts[k]);
}

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define I(...) ((const int64_t[]){__VA_ARGS__})

/* A one-op graph: op over the given inputs; returns 0 and the single output. */
static Tensor *run1(T *t, Op op, DType dt, int rank, const int64_t *shape, Tensor **ins, int nin,
                    const int64_t *attrs, int nattrs, double fval)
{
	Program *p = prog_new();
	B b = graph(p, "t");
	Node *in[8];
	for (int k = 0; k < nin; k++)
		in[k] = input(&b, ins[k]->dtype, ins[k]->rank, ins[k]->shape);
	Node *n = node(&b, op, dt, rank, shape, NULL);
	for (int k = 0; k < nin; k++)
		node_add_input(p, n, in[k]);
	for (int k = 0; k < nattrs; k++)
		n->a[k] = attrs[k];
	n->fval = fval;
	output(&b, n);
	Tensor *out = NULL;
	int rc = run(&b, ins, NULL, &out);
	check(t, rc == 0, "interp_run failed");
	prog_free(p);
	return out;
}

/* ------------------------------------------------------------------ tests */

static void test_bytes(T *t)
{
	t->name = "bytes";
	unsigned char raw[12] = {0};
	float fv[3] = {1.5f, -0.1f, 3e38f};
	memcpy(raw, fv, sizeof fv);
	Tensor *x = tensor_from_bytes(DT_F32, 1, S(3), raw);
	expect_f(t, x, 1, S(3), V(1.5, (double)-0.1f, (double)3e38f), 0);
	unsigned char back[12];
	tensor_to_bytes(x, back);
	check(t, memcmp(raw, back, 12) == 0, "f32 round trip");
	tensor_free(x);

	int32_t iv[3] = {-5, INT32_MAX, INT32_MIN};
	x = tensor_from_bytes(DT_I32, 1, S(3), iv);
	expect_i(t, x, 1, S(3), I(-5, INT32_MAX, INT32_MIN));
	int32_t ib[3];
	tensor_to_bytes(x, ib);
	check(t, memcmp(iv, ib, sizeof iv) == 0, "i32 round trip");
	tensor_free(x);

	unsigned char bv[3] = {0, 1, 7};
	x = tensor_from_bytes(DT_BOOL, 1, S(3), bv);
	expect_i(t, x, 1, S(3), I(0, 1, 1));
	tensor_free(x);

	int64_t lv[2] = {INT64_MIN, 42};
	x = tensor_from_bytes(DT_I64, 1, S(2), lv);
	expect_i(t, x, 1, S(2), I(INT64_MIN, 42));
	tensor_free(x);
}

static void test_broadcast(T *t)
{
	t->name = "broadcast";
	Tensor *a = tf(DT_F32, 2, S(2, 3), V(1, 2, 3, 4, 5, 6));
	Tensor *b = tf(DT_F32, 1, S(3), V(10, 20, 30));
	Tensor *ins[2] = {a, b};
	Tensor *o = run1(t, OP_ADD, DT_F32, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_f(t, o, 2, S(2, 3), V(11, 22, 33, 14, 25, 36), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* [2,1] - [1,3] -> [2,3] */
	a = tf(DT_F64, 2, S(2, 1), V(1, 2));
	b = tf(DT_F64, 2, S(1, 3), V(10, 20, 30));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_SUB, DT_F64, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_f(t, o, 2, S(2, 3), V(-9, -19, -29, -8, -18, -28), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* 0-d times [2,2,2]: scalar broadcast, and f32 rounding of the product */
	a = tf(DT_F32, 0, NULL, V(0.1));
	b = tf(DT_F32, 3, S(2, 2, 2), V(1, 2, 3, 4, 5, 6, 7, 8));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MUL, DT_F32, 3, S(2, 2, 2), ins, 2, NULL, 0, 0);
	double want[8];
	for (int k = 0; k < 8; k++)
		want[k] = (double)(0.1f * (float)(k + 1));
	expect_f(t, o, 3, S(2, 2, 2), want, 0);
	tensor_free(o);
	free_all(ins, 2);

	/* [3,1,2] >= [2,1]: middle axis broadcast on both sides, bool result */
	a = tf(DT_F32, 3, S(3, 1, 2), V(0, 1, 2, 3, 4, 5));
	b = tf(DT_F32, 2, S(2, 1), V(1, 4));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_GE, DT_BOOL, 3, S(3, 2, 2), ins, 2, NULL, 0, 0);
	expect_i(t, o, 3, S(3, 2, 2), I(0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1));
	tensor_free(o);
	free_all(ins, 2);

	/* f32: 0.1 + 0.2 rounds like float32 arithmetic */
	a = tf(DT_F32, 1, S(1), V(0.1));
	b = tf(DT_F32, 1, S(1), V(0.2));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_ADD, DT_F32, 1, S(1), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(1), V((double)(0.1f + 0.2f)), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* where(c[2,1], a[3], b 0-d) */
	Tensor *c = ti(DT_BOOL, 2, S(2, 1), I(1, 0));
	a = tf(DT_F32, 1, S(3), V(1, 2, 3));
	b = tf(DT_F32, 0, NULL, V(-1));
	Tensor *w3[3] = {c, a, b};
	o = run1(t, OP_WHERE, DT_F32, 2, S(2, 3), w3, 3, NULL, 0, 0);
	expect_f(t, o, 2, S(2, 3), V(1, 2, 3, -1, -1, -1), 0);
	tensor_free(o);
	free_all(w3, 3);

	/* expand [3,1] -> [2,3,4] */
	a = tf(DT_F32, 2, S(3, 1), V(1, 2, 3));
	o = run1(t, OP_EXPAND, DT_F32, 3, S(2, 3, 2), &a, 1, NULL, 0, 0);
	expect_f(t, o, 3, S(2, 3, 2), V(1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3), 0);
	tensor_free(o);
	tensor_free(a);
}

static void test_intdiv(T *t)
{
	t->name = "int div/mod";
	Tensor *a = ti(DT_I64, 1, S(8), I(-7, 7, -7, 7, 5, -5, INT64_MIN, INT64_MIN));
	Tensor *b = ti(DT_I64, 1, S(8), I(2, -2, -2, 2, 0, 0, -1, 1));
	Tensor *ins[2] = {a, b};
	Tensor *o = run1(t, OP_DIV, DT_I64, 1, S(8), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(8), I(-4, -4, 3, 3, 0, 0, INT64_MIN, INT64_MIN));
	tensor_free(o);
	o = run1(t, OP_MOD, DT_I64, 1, S(8), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(8), I(1, -1, -1, 1, 0, 0, 0, 0));
	tensor_free(o);
	free_all(ins, 2);

	/* i32: INT32_MIN // -1 wraps, INT32_MAX + 1 wraps */
	a = ti(DT_I32, 1, S(3), I(INT32_MIN, INT32_MAX, -9));
	b = ti(DT_I32, 1, S(3), I(-1, 1, 4));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_DIV, DT_I32, 1, S(3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(3), I(INT32_MIN, INT32_MAX, -3));
	tensor_free(o);
	o = run1(t, OP_ADD, DT_I32, 1, S(3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(3), I(INT32_MAX, INT32_MIN, -5));
	tensor_free(o);
	o = run1(t, OP_MOD, DT_I32, 1, S(3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(3), I(0, 0, 3));
	tensor_free(o);
	free_all(ins, 2);

	/* float %: the sign of the divisor, as NumPy */
	a = tf(DT_F64, 1, S(5), V(-7, 7, -7, 6, 1));
	b = tf(DT_F64, 1, S(5), V(2, -2, -2, 3, 0));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MOD, DT_F64, 1, S(5), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(1, -1, -1, 0, NAN), 0);
	check(t, o && !signbit(o->f[3]), "6 % 3 is +0");
	tensor_free(o);
	o = run1(t, OP_DIV, DT_F64, 1, S(5), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(-3.5, -3.5, 3.5, 2, INFINITY), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* pow on ints, including a negative exponent */
	a = ti(DT_I64, 1, S(5), I(2, -3, 2, -1, 1));
	b = ti(DT_I64, 1, S(5), I(10, 3, -1, -3, -5));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_POW, DT_I64, 1, S(5), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(5), I(1024, -27, 0, -1, 1));
	tensor_free(o);
	free_all(ins, 2);
}

static void test_elementwise(T *t)
{
	t->name = "elementwise";
	Tensor *x = tf(DT_F64, 1, S(5), V(-1000, -1, 0, 1, 1000));
	Tensor *o = run1(t, OP_SIGMOID, DT_F64, 1, S(5), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(0, 0.2689414213699951, 0.5, 0.7310585786300049, 1), 1e-15);
	tensor_free(o);
	o = run1(t, OP_GELU, DT_F64, 1, S(5), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(-0.0, -0.15865525393145707, 0, 0.8413447460685429, 1000), 1e-15);
	tensor_free(o);
	o = run1(t, OP_GELU_TANH, DT_F64, 1, S(5), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(-0.0, -0.15880800939172324, 0, 0.8411919906082768, 1000), 1e-15);
	tensor_free(o);
	o = run1(t, OP_SILU, DT_F64, 1, S(5), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(-0.0, -0.2689414213699951, 0, 0.7310585786300049, 1000), 1e-15);
	tensor_free(o);
	o = run1(t, OP_RELU, DT_F64, 1, S(5), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(5), V(0, 0, 0, 1, 1000), 0);
	tensor_free(o);
	tensor_free(x);

	x = tf(DT_F32, 1, S(2), V(4, 0.25));
	o = run1(t, OP_RSQRT, DT_F32, 1, S(2), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(2), V(0.5, 2), 0);
	tensor_free(o);
	tensor_free(x);

	Tensor *ii = ti(DT_I32, 1, S(3), I(INT32_MIN, -4, 5));
	o = run1(t, OP_ABS, DT_I32, 1, S(3), &ii, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(3), I(INT32_MIN, 4, 5));
	tensor_free(o);
	o = run1(t, OP_NEG, DT_I32, 1, S(3), &ii, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(3), I(INT32_MIN, 4, -5));
	tensor_free(o);
	tensor_free(ii);

	/* maximum/minimum propagate NaN from either side */
	Tensor *a = tf(DT_F64, 1, S(3), V(NAN, 1, 3));
	Tensor *b = tf(DT_F64, 1, S(3), V(1, NAN, 2));
	Tensor *ins[2] = {a, b};
	o = run1(t, OP_MAX, DT_F64, 1, S(3), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(3), V(NAN, NAN, 3), 0);
	tensor_free(o);
	o = run1(t, OP_MIN, DT_F64, 1, S(3), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(3), V(NAN, NAN, 2), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* casts: truncation toward zero, NaN -> 0, saturation; int64 -> f32 rounds once */
	x = tf(DT_F64, 1, S(7), V(-1.7, 2.9, NAN, 1e20, -1e20, INFINITY, 0.5));
	o = run1(t, OP_CAST, DT_I32, 1, S(7), &x, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(7), I(-1, 2, 0, INT32_MAX, INT32_MIN, INT32_MAX, 0));
	tensor_free(o);
	o = run1(t, OP_CAST, DT_I64, 1, S(7), &x, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(7), I(-1, 2, 0, INT64_MAX, INT64_MIN, INT64_MAX, 0));
	tensor_free(o);
	o = run1(t, OP_CAST, DT_BOOL, 1, S(7), &x, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(7), I(1, 1, 1, 1, 1, 1, 1));
	tensor_free(o);
	o = run1(t, OP_CAST, DT_F32, 1, S(7), &x, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(7), V((double)-1.7f, (double)2.9f, NAN, (double)1e20f, (double)-1e20f,
	                         INFINITY, 0.5), 0);
	tensor_free(o);
	tensor_free(x);
	ii = ti(DT_I64, 1, S(2), I(16777217, -3));
	o = run1(t, OP_CAST, DT_F32, 1, S(2), &ii, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(2), V(16777216, -3), 0);
	tensor_free(o);
	o = run1(t, OP_CAST, DT_I32, 1, S(2), &ii, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(2), I(16777217, -3));
	tensor_free(o);
	tensor_free(ii);
}

static void naive_mm(int64_t M, int64_t N, int64_t K, const double *a, const double *b, double *c)
{
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double s = 0;
			for (int64_t k = 0; k < K; k++)
				s += a[i * K + k] * b[k * N + j];
			c[i * N + j] = s;
		}
}

static void test_matmul(T *t)
{
	t->name = "matmul";
	Tensor *a = tf(DT_F64, 2, S(2, 3), V(1, 2, 3, 4, 5, 6));
	Tensor *b = tf(DT_F64, 2, S(3, 2), V(7, 8, 9, 10, 11, 12));
	Tensor *ins[2] = {a, b};
	Tensor *o = run1(t, OP_MATMUL, DT_F64, 2, S(2, 2), ins, 2, NULL, 0, 0);
	expect_f(t, o, 2, S(2, 2), V(58, 64, 139, 154), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* 1-d @ 2-d -> [N]; 2-d @ 1-d -> [M]; 1-d @ 1-d -> 0-d */
	a = tf(DT_F64, 1, S(3), V(1, 2, 3));
	b = tf(DT_F64, 2, S(3, 2), V(7, 8, 9, 10, 11, 12));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_F64, 1, S(2), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(2), V(58, 64), 0);
	tensor_free(o);
	free_all(ins, 2);
	a = tf(DT_F64, 2, S(2, 3), V(1, 2, 3, 4, 5, 6));
	b = tf(DT_F64, 1, S(3), V(1, 0, -1));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_F64, 1, S(2), ins, 2, NULL, 0, 0);
	expect_f(t, o, 1, S(2), V(-2, -2), 0);
	tensor_free(o);
	free_all(ins, 2);
	a = tf(DT_F64, 1, S(3), V(1, 2, 3));
	b = tf(DT_F64, 1, S(3), V(4, 5, 6));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_F64, 0, NULL, ins, 2, NULL, 0, 0);
	expect_f(t, o, 0, NULL, V(32), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* batched: [2,1,2,2] @ [3,2,2] -> [2,3,2,2] */
	a = tf(DT_F64, 4, S(2, 1, 2, 2), V(1, 0, 0, 1, 2, 0, 0, 2));
	b = tf(DT_F64, 3, S(3, 2, 2), V(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_F64, 4, S(2, 3, 2, 2), ins, 2, NULL, 0, 0);
	expect_f(t, o, 4, S(2, 3, 2, 2),
	         V(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
	           2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* batched 3-d @ 1-d: [2,2,3] @ [3] -> [2,2] */
	a = tf(DT_F64, 3, S(2, 2, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
	b = tf(DT_F64, 1, S(3), V(1, 1, 1));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_F64, 2, S(2, 2), ins, 2, NULL, 0, 0);
	expect_f(t, o, 2, S(2, 2), V(6, 15, 24, 33), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* integer matmul wraps */
	a = ti(DT_I32, 2, S(1, 2), I(65536, 1));
	b = ti(DT_I32, 2, S(2, 1), I(32768, 5));
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_I32, 2, S(1, 1), ins, 2, NULL, 0, 0);
	expect_i(t, o, 2, S(1, 1), I(INT32_MIN + 5));
	tensor_free(o);
	free_all(ins, 2);

	/* odd sizes across the block edges against the naive loop, f32 rounding */
	uint64_t seed = 1;
	int64_t M = 37, K = 300, N = 530;
	a = trand(DT_F32, 2, S(M, K), &seed);
	b = trand(DT_F32, 2, S(K, N), &seed);
	ins[0] = a, ins[1] = b;
	o = run1(t, OP_MATMUL, DT_F32, 2, S(M, N), ins, 2, NULL, 0, 0);
	double *want = xmalloc((size_t)(M * N) * sizeof(double));
	naive_mm(M, N, K, a->f, b->f, want);
	for (int64_t k = 0; k < M * N; k++)
		want[k] = (double)(float)want[k];
	expect_f(t, o, 2, S(M, N), want, 1e-6);
	free(want);
	tensor_free(o);
	free_all(ins, 2);
}

/* x @ transpose(w) with w a graph input: the matmul reads w transposed in place. */
static void test_matmul_transposed(T *t)
{
	t->name = "matmul of a transpose";
	uint64_t seed = 3;
	for (int variant = 0; variant < 3; variant++) {
		/* 0: M=6 packed path; 1: M=2 dot path; 2: transpose also an output (copied) */
		int64_t M = variant == 1 ? 2 : 6, K = 7, N = 9;
		Program *p = prog_new();
		B b = graph(p, "g");
		Node *x = input(&b, DT_F64, 2, S(M, K));
		Node *w = input(&b, DT_F64, 3, S(2, N, K));
		Node *tr = node(&b, OP_TRANSPOSE, DT_F64, 3, S(2, K, N), w, NULL);
		tr->a[0] = 0, tr->a[1] = 2, tr->a[2] = 1;
		Node *mm = node(&b, OP_MATMUL, DT_F64, 3, S(2, M, N), x, tr, NULL);
		output(&b, mm);
		if (variant == 2)
			output(&b, tr);
		Tensor *in[2] = {trand(DT_F64, 2, S(M, K), &seed),
		                 trand(DT_F64, 3, S(2, N, K), &seed)};
		Tensor *outs[2] = {NULL, NULL};
		check(t, run(&b, in, NULL, outs) == 0, "run");
		double want[2 * 6 * 9];
		for (int64_t bi = 0; bi < 2; bi++)
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < N; j++) {
					double s = 0;
					for (int64_t k = 0; k < K; k++)
						s += in[0]->f[i * K + k] *
						     in[1]->f[(bi * N + j) * K + k];
					want[(bi * M + i) * N + j] = s;
				}
		expect_f(t, outs[0], 3, S(2, M, N), want, 1e-14);
		if (variant == 2)
			check(t, outs[1] && outs[1]->shape[1] == K &&
			         outs[1]->f[1 * N + 2] == in[1]->f[2 * K + 1], "transpose output");
		free_all(outs, 2);
		free_all(in, 2);
		prog_free(p);
	}
	/* integers, 2-d */
	Program *p = prog_new();
	B b = graph(p, "g");
	Node *x = input(&b, DT_I64, 2, S(1, 2));
	Node *w = input(&b, DT_I64, 2, S(3, 2));
	Node *tr = node(&b, OP_TRANSPOSE, DT_I64, 2, S(2, 3), w, NULL);
	tr->a[0] = 1, tr->a[1] = 0;
	output(&b, node(&b, OP_MATMUL, DT_I64, 2, S(1, 3), x, tr, NULL));
	Tensor *in[2] = {ti(DT_I64, 2, S(1, 2), I(1, 10)),
	                 ti(DT_I64, 2, S(3, 2), I(1, 2, 3, 4, 5, 6))};
	Tensor *o = NULL;
	check(t, run(&b, in, NULL, &o) == 0, "run");
	expect_i(t, o, 2, S(1, 3), I(21, 43, 65));
	tensor_free(o);
	free_all(in, 2);
	prog_free(p);
}

static void test_reduce(T *t)
{
	t->name = "reductions";
	Tensor *x = tf(DT_F64, 3, S(2, 2, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
	/* sum over axes 0 and 2, keepdim */
	Tensor *o = run1(t, OP_SUM, DT_F64, 3, S(1, 2, 1), &x, 1, I(5, 1), 2, 0);
	expect_f(t, o, 3, S(1, 2, 1), V(1 + 2 + 3 + 7 + 8 + 9, 4 + 5 + 6 + 10 + 11 + 12), 0);
	tensor_free(o);
	/* mean over axis 1, no keepdim */
	o = run1(t, OP_MEAN, DT_F64, 2, S(2, 3), &x, 1, I(2, 0), 2, 0);
	expect_f(t, o, 2, S(2, 3), V(2.5, 3.5, 4.5, 8.5, 9.5, 10.5), 0);
	tensor_free(o);
	/* amax over everything -> 0-d */
	o = run1(t, OP_AMAX, DT_F64, 0, NULL, &x, 1, I(7, 0), 2, 0);
	expect_f(t, o, 0, NULL, V(12), 0);
	tensor_free(o);
	o = run1(t, OP_AMIN, DT_F64, 2, S(2, 2), &x, 1, I(4, 0), 2, 0);
	expect_f(t, o, 2, S(2, 2), V(1, 4, 7, 10), 0);
	tensor_free(o);
	tensor_free(x);

	x = tf(DT_F64, 2, S(2, 3), V(1, NAN, 3, 4, 5, 6));
	o = run1(t, OP_AMAX, DT_F64, 1, S(2), &x, 1, I(2, 0), 2, 0);
	expect_f(t, o, 1, S(2), V(NAN, 6), 0);
	tensor_free(o);
	tensor_free(x);

	/* argmax: ties go to the first */
	x = tf(DT_F32, 2, S(2, 4), V(1, 3, 3, 2, 5, 5, 0, 5));
	o = run1(t, OP_ARGMAX, DT_I64, 1, S(2), &x, 1, I(2, 0), 2, 0);
	expect_i(t, o, 1, S(2), I(1, 0));
	tensor_free(o);
	o = run1(t, OP_ARGMAX, DT_I64, 2, S(1, 4), &x, 1, I(1, 1), 2, 0);
	expect_i(t, o, 2, S(1, 4), I(1, 1, 0, 1));
	tensor_free(o);
	tensor_free(x);

	/* int sum wraps in i32 */
	x = ti(DT_I32, 1, S(2), I(INT32_MAX, 1));
	o = run1(t, OP_SUM, DT_I32, 0, NULL, &x, 1, I(1, 0), 2, 0);
	expect_i(t, o, 0, NULL, I(INT32_MIN));
	tensor_free(o);
	tensor_free(x);

	/* softmax of large values: no overflow */
	x = tf(DT_F64, 2, S(2, 3), V(1000, 1001, 1002, -INFINITY, 0, -INFINITY));
	o = run1(t, OP_SOFTMAX, DT_F64, 2, S(2, 3), &x, 1, I(1), 1, 0);
	expect_f(t, o, 2, S(2, 3),
	         V(0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 0, 1, 0), 1e-15);
	tensor_free(o);
	o = run1(t, OP_LOG_SOFTMAX, DT_F64, 2, S(2, 3), &x, 1, I(1), 1, 0);
	expect_f(t, o, 2, S(2, 3),
	         V(-2.4076059644443806, -1.4076059644443806, -0.4076059644443806, -INFINITY, 0,
	           -INFINITY), 1e-15);
	tensor_free(o);
	/* along axis 0 */
	o = run1(t, OP_SOFTMAX, DT_F64, 2, S(2, 3), &x, 1, I(0), 1, 0);
	expect_f(t, o, 2, S(2, 3), V(1, 1, 1, 0, 0, 0), 1e-15);
	tensor_free(o);
	tensor_free(x);
}

static void test_norm(T *t)
{
	t->name = "norms";
	Tensor *x = tf(DT_F64, 2, S(2, 4), V(1, 2, 3, 4, 2, 2, 2, 2));
	Tensor *w = tf(DT_F64, 1, S(4), V(1, 1, 2, 2));
	Tensor *b = tf(DT_F64, 1, S(4), V(0, 1, 0, 1));
	Tensor *ins[3] = {x, w, b};
	/* row 0: mean 2.5, var 1.25 */
	double s = 1 / sqrt(1.25 + 1e-5);
	Tensor *o = run1(t, OP_LAYERNORM, DT_F64, 2, S(2, 4), ins, 3, NULL, 0, 1e-5);
	expect_f(t, o, 2, S(2, 4),
	         V(-1.5 * s, -0.5 * s + 1, 2 * 0.5 * s, 2 * 1.5 * s + 1, 0, 1, 0, 1), 1e-14);
	tensor_free(o);
	double r0 = 1 / sqrt(7.5 + 1e-6), r1 = 1 / sqrt(4 + 1e-6);
	o = run1(t, OP_RMSNORM, DT_F64, 2, S(2, 4), ins, 2, NULL, 0, 1e-6);
	expect_f(t, o, 2, S(2, 4),
	         V(r0, 2 * r0, 6 * r0, 8 * r0, 2 * r1, 2 * r1, 4 * r1, 4 * r1), 1e-14);
	tensor_free(o);
	free_all(ins, 3);
}

static void test_shape_ops(T *t)
{
	t->name = "shape ops";
	Tensor *x = tf(DT_F64, 3, S(2, 3, 2), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
	/* transpose [2,3,2] by [2,0,1] -> [2,2,3]: out[i,j,k] = x[j,k,i] */
	Tensor *o = run1(t, OP_TRANSPOSE, DT_F64, 3, S(2, 2, 3), &x, 1, I(2, 0, 1), 3, 0);
	expect_f(t, o, 3, S(2, 2, 3), V(0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11), 0);
	tensor_free(o);
	/* [1,0,2]: inner axis unmoved */
	o = run1(t, OP_TRANSPOSE, DT_F64, 3, S(3, 2, 2), &x, 1, I(1, 0, 2), 3, 0);
	expect_f(t, o, 3, S(3, 2, 2), V(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11), 0);
	tensor_free(o);
	/* slice x[1:2, 1:3, 1:2] */
	o = run1(t, OP_SLICE, DT_F64, 3, S(1, 2, 1), &x, 1, I(1, 1, 1), 3, 0);
	expect_f(t, o, 3, S(1, 2, 1), V(9, 11), 0);
	tensor_free(o);
	o = run1(t, OP_RESHAPE, DT_F64, 2, S(4, 3), &x, 1, NULL, 0, 0);
	expect_f(t, o, 2, S(4, 3), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), 0);
	tensor_free(o);

	/* concat along axis 1: [2,3,2] ++ [2,1,2] */
	Tensor *y = tf(DT_F64, 3, S(2, 1, 2), V(-1, -2, -3, -4));
	Tensor *ins[2] = {x, y};
	o = run1(t, OP_CONCAT, DT_F64, 3, S(2, 4, 2), ins, 2, I(1), 1, 0);
	expect_f(t, o, 3, S(2, 4, 2), V(0, 1, 2, 3, 4, 5, -1, -2, 6, 7, 8, 9, 10, 11, -3, -4), 0);
	tensor_free(o);
	tensor_free(y);

	/* causal mask on the last two axes of [2,2,3] */
	o = run1(t, OP_CAUSAL_MASK, DT_F64, 3, S(2, 3, 2), &x, 1, NULL, 0, 0);
	double m = -INFINITY;
	expect_f(t, o, 3, S(2, 3, 2), V(0, m, 2, 3, 4, 5, 6, m, 8, 9, 10, 11), 0);
	tensor_free(o);
	tensor_free(x);

	/* a 40 x 70 transpose crosses the 32 x 32 tiles */
	x = tensor_new(DT_I64, 2, S(40, 70));
	for (int64_t k = 0; k < x->n; k++)
		x->i[k] = k;
	o = run1(t, OP_TRANSPOSE, DT_I64, 2, S(70, 40), &x, 1, I(1, 0), 2, 0);
	int ok = o != NULL;
	for (int64_t i = 0; ok && i < 70; i++)
		for (int64_t j = 0; j < 40; j++)
			if (o->i[i * 40 + j] != j * 70 + i)
				ok = 0;
	check(t, ok, "tiled transpose");
	tensor_free(o);
	tensor_free(x);

	/* creation */
	Program *p = prog_new();
	B bb = graph(p, "create");
	Node *ar = node(&bb, OP_ARANGE, DT_I64, 1, S(4), NULL);
	Node *fu = node(&bb, OP_FULL, DT_F32, 2, S(2, 2), NULL);
	fu->fval = 0.1;
	Node *ci = cnst(&bb, DT_I32, 0);
	ci->ival = 4294967297; /* wraps to 1 */
	output(&bb, ar);
	output(&bb, fu);
	output(&bb, ci);
	Tensor *outs[3];
	check(t, run(&bb, NULL, NULL, outs) == 0, "creation run");
	expect_i(t, outs[0], 1, S(4), I(0, 1, 2, 3));
	double f = (double)0.1f; /* rounded to f32 */
	expect_f(t, outs[1], 2, S(2, 2), V(f, f, f, f), 0);
	expect_i(t, outs[2], 0, NULL, I(1));
	free_all(outs, 3);
	prog_free(p);
}

/* Straight from the definition, for comparison. */
static double conv_ref(const Tensor *x, const Tensor *w, const Tensor *b, int64_t n, int64_t o,
                       int64_t oh, int64_t ow, int64_t s, int64_t pad, int64_t groups)
{
	int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3];
	int64_t Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
	int64_t g = o / (w->shape[0] / groups);
	double acc = b ? b->f[o] : 0;
	for (int64_t c = 0; c < Cg; c++)
		for (int64_t kh = 0; kh < KH; kh++)
			for (int64_t kw = 0; kw < KW; kw++) {
				int64_t ih = oh * s - pad + kh, iw = ow * s - pad + kw;
				if (ih < 0 || ih >= H || iw < 0 || iw >= W)
					continue;
				acc += x->f[((n * C + g * Cg + c) * H + ih) * W + iw] *
				       w->f[((o * Cg + c) * KH + kh) * KW + kw];
			}
	return acc;
}

static void test_conv(T *t)
{
	t->name = "conv2d";
	Tensor *x = tf(DT_F64, 4, S(1, 1, 3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
	Tensor *w = tf(DT_F64, 4, S(1, 1, 2, 2), V(1, 1, 1, 1));
	Tensor *ins[3] = {x, w, NULL};
	Tensor *o = run1(t, OP_CONV2D, DT_F64, 4, S(1, 1, 2, 2), ins, 2, I(1, 1, 0, 0, 1), 5, 0);
	expect_f(t, o, 4, S(1, 1, 2, 2), V(12, 16, 24, 28), 0);
	tensor_free(o);
	/* padding 1, stride 2 */
	o = run1(t, OP_CONV2D, DT_F64, 4, S(1, 1, 2, 2), ins, 2, I(2, 2, 1, 1, 1), 5, 0);
	expect_f(t, o, 4, S(1, 1, 2, 2), V(1, 5, 11, 28), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* groups = 2 with bias: each channel scaled by its own weight */
	x = tf(DT_F64, 4, S(1, 2, 2, 2), V(1, 2, 3, 4, 5, 6, 7, 8));
	w = tf(DT_F64, 4, S(2, 1, 1, 1), V(2, 3));
	Tensor *b = tf(DT_F64, 1, S(2), V(1, -1));
	ins[0] = x, ins[1] = w, ins[2] = b;
	o = run1(t, OP_CONV2D, DT_F64, 4, S(1, 2, 2, 2), ins, 3, I(1, 1, 0, 0, 2), 5, 0);
	expect_f(t, o, 4, S(1, 2, 2, 2), V(3, 5, 7, 9, 14, 17, 20, 23), 0);
	tensor_free(o);
	free_all(ins, 3);

	/* random: N=2, C=4, 7x6, O=6, 3x3, groups 2, stride 2, padding 1 */
	uint64_t seed = 7;
	x = trand(DT_F64, 4, S(2, 4, 7, 6), &seed);
	w = trand(DT_F64, 4, S(6, 2, 3, 3), &seed);
	b = trand(DT_F64, 1, S(6), &seed);
	ins[0] = x, ins[1] = w, ins[2] = b;
	int64_t OH = (7 + 2 - 3) / 2 + 1, OW = (6 + 2 - 3) / 2 + 1;
	o = run1(t, OP_CONV2D, DT_F64, 4, S(2, 6, OH, OW), ins, 3, I(2, 2, 1, 1, 2), 5, 0);
	double want[2 * 6 * 4 * 3];
	for (int64_t n = 0, k = 0; n < 2; n++)
		for (int64_t oc = 0; oc < 6; oc++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++)
					want[k++] = conv_ref(x, w, b, n, oc, oh, ow, 2, 1, 2);
	expect_f(t, o, 4, S(2, 6, OH, OW), want, 1e-12);
	tensor_free(o);
	/* stride 1, padding 2 (wider than the kernel reach on one side), 1x... kernel 3 */
	OH = 7 + 4 - 3 + 1, OW = 6 + 4 - 3 + 1;
	o = run1(t, OP_CONV2D, DT_F64, 4, S(2, 6, OH, OW), ins, 3, I(1, 1, 2, 2, 2), 5, 0);
	double *want2 = xmalloc((size_t)(2 * 6 * OH * OW) * sizeof(double));
	for (int64_t n = 0, k = 0; n < 2; n++)
		for (int64_t oc = 0; oc < 6; oc++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++)
					want2[k++] = conv_ref(x, w, b, n, oc, oh, ow, 1, 2, 2);
	expect_f(t, o, 4, S(2, 6, OH, OW), want2, 1e-12);
	free(want2);
	tensor_free(o);
	free_all(ins, 3);
}

static void test_pool(T *t)
{
	t->name = "pools";
	Tensor *x = tf(DT_F64, 4, S(1, 1, 3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
	/* k 2, stride 2, padding 1: windows partly outside */
	Tensor *o;
	o = run1(t, OP_AVGPOOL2D, DT_F64, 4, S(1, 1, 2, 2), &x, 1, I(2, 2, 2, 2, 1, 1), 6, 0);
	expect_f(t, o, 4, S(1, 1, 2, 2), V(0.25, 1.25, 2.75, 7), 0);
	tensor_free(o);
	o = run1(t, OP_MAXPOOL2D, DT_F64, 4, S(1, 1, 2, 2), &x, 1, I(2, 2, 2, 2, 1, 1), 6, 0);
	expect_f(t, o, 4, S(1, 1, 2, 2), V(1, 3, 7, 9), 0);
	tensor_free(o);
	tensor_free(x);
	/* max pool pads with -inf, not 0: all-negative input */
	x = tf(DT_F64, 4, S(1, 1, 2, 2), V(-1, -2, -3, -4));
	o = run1(t, OP_MAXPOOL2D, DT_F64, 4, S(1, 1, 3, 3), &x, 1, I(2, 2, 1, 1, 1, 1), 6, 0);
	expect_f(t, o, 4, S(1, 1, 3, 3), V(-1, -1, -2, -1, -1, -2, -3, -3, -4), 0);
	tensor_free(o);
	/* k 3 stride 1 padding 1 on 2x2: 3x3 window over 4 values */
	o = run1(t, OP_AVGPOOL2D, DT_F64, 4, S(1, 1, 2, 2), &x, 1, I(3, 3, 1, 1, 1, 1), 6, 0);
	expect_f(t, o, 4, S(1, 1, 2, 2), V(-10.0 / 9, -10.0 / 9, -10.0 / 9, -10.0 / 9), 1e-15);
	tensor_free(o);
	tensor_free(x);
	/* max pool 2x2 stride 2 over 4x4, two channels */
	x = tensor_new(DT_F32, 4, S(1, 2, 4, 4));
	for (int k = 0; k < 32; k++)
		x->f[k] = (k * 7) % 11;
	o = run1(t, OP_MAXPOOL2D, DT_F32, 4, S(1, 2, 2, 2), &x, 1, I(2, 2, 2, 2, 0, 0), 6, 0);
	/* 7k mod 11: channel 0 rows [0 7 3 10] [6 2 9 5] [1 8 4 0] [7 3 10 6],
	 * channel 1 rows [2 9 5 1] [8 4 0 7] [3 10 6 2] [9 5 1 8] */
	expect_f(t, o, 4, S(1, 2, 2, 2), V(7, 10, 8, 10, 9, 7, 10, 8), 0);
	tensor_free(o);
	o = run1(t, OP_GLOBAL_AVGPOOL2D, DT_F32, 4, S(1, 2, 1, 1), &x, 1, NULL, 0, 0);
	double s0 = 0, s1 = 0;
	for (int k = 0; k < 16; k++)
		s0 += x->f[k], s1 += x->f[16 + k];
	expect_f(t, o, 4, S(1, 2, 1, 1), V((double)(float)(s0 / 16), (double)(float)(s1 / 16)), 0);
	tensor_free(o);
	tensor_free(x);
}

/* Integer and bool paths of ops mostly used on floats. */
static void test_ints(T *t)
{
	t->name = "integers";
	Tensor *a = ti(DT_I32, 2, S(2, 3), I(1, 5, 3, -4, 0, 7));
	Tensor *b = ti(DT_I32, 1, S(3), I(2, 5, -1));
	Tensor *ins[3] = {a, b, NULL};
	Tensor *o = run1(t, OP_LT, DT_BOOL, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(1, 0, 0, 1, 1, 0));
	tensor_free(o);
	o = run1(t, OP_MAX, DT_I32, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(2, 5, 3, 2, 5, 7));
	tensor_free(o);
	o = run1(t, OP_MIN, DT_I32, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(1, 5, -1, -4, 0, -1));
	tensor_free(o);
	o = run1(t, OP_SUB, DT_I32, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(-1, 0, 4, -6, -5, 8));
	tensor_free(o);
	o = run1(t, OP_MUL, DT_I32, 2, S(2, 3), ins, 2, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(2, 25, -3, -8, 0, -7));
	tensor_free(o);
	o = run1(t, OP_AMAX, DT_I32, 1, S(3), &a, 1, I(1, 0), 2, 0);
	expect_i(t, o, 1, S(3), I(1, 5, 7));
	tensor_free(o);
	o = run1(t, OP_AMIN, DT_I32, 2, S(2, 1), &a, 1, I(2, 1), 2, 0);
	expect_i(t, o, 2, S(2, 1), I(1, -4));
	tensor_free(o);
	o = run1(t, OP_ARGMAX, DT_I64, 1, S(2), &a, 1, I(2, 0), 2, 0);
	expect_i(t, o, 1, S(2), I(1, 2));
	tensor_free(o);
	o = run1(t, OP_EXPAND, DT_I32, 2, S(2, 3), &b, 1, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(2, 5, -1, 2, 5, -1));
	tensor_free(o);
	o = run1(t, OP_RELU, DT_I32, 1, S(3), &b, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(3), I(2, 5, 0));
	tensor_free(o);

	/* where on ints with a broadcast condition */
	Tensor *c = ti(DT_BOOL, 1, S(3), I(1, 0, 1));
	ins[0] = c, ins[1] = a, ins[2] = b;
	o = run1(t, OP_WHERE, DT_I32, 2, S(2, 3), ins, 3, NULL, 0, 0);
	expect_i(t, o, 2, S(2, 3), I(1, 5, 3, -4, 5, 7));
	tensor_free(o);
	free_all(ins, 3);

	/* bool logic */
	Tensor *p = ti(DT_BOOL, 1, S(4), I(0, 0, 1, 1));
	Tensor *q = ti(DT_BOOL, 1, S(4), I(0, 1, 0, 1));
	ins[0] = p, ins[1] = q;
	o = run1(t, OP_AND, DT_BOOL, 1, S(4), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(4), I(0, 0, 0, 1));
	tensor_free(o);
	o = run1(t, OP_OR, DT_BOOL, 1, S(4), ins, 2, NULL, 0, 0);
	expect_i(t, o, 1, S(4), I(0, 1, 1, 1));
	tensor_free(o);
	o = run1(t, OP_NOT, DT_BOOL, 1, S(4), ins, 1, NULL, 0, 0);
	expect_i(t, o, 1, S(4), I(1, 1, 0, 0));
	tensor_free(o);
	o = run1(t, OP_CAST, DT_F32, 1, S(4), ins, 1, NULL, 0, 0);
	expect_f(t, o, 1, S(4), V(0, 0, 1, 1), 0);
	tensor_free(o);
	free_all(ins, 2);

	/* conv2d and max pool on ints */
	Tensor *x = ti(DT_I64, 4, S(1, 1, 3, 3), I(1, 2, 3, 4, 5, 6, 7, 8, 9));
	Tensor *w = ti(DT_I64, 4, S(1, 1, 2, 2), I(1, 0, 0, -1));
	Tensor *bias = ti(DT_I64, 1, S(1), I(100));
	ins[0] = x, ins[1] = w, ins[2] = bias;
	o = run1(t, OP_CONV2D, DT_I64, 4, S(1, 1, 2, 2), ins, 3, I(1, 1, 0, 0, 1), 5, 0);
	expect_i(t, o, 4, S(1, 1, 2, 2), I(96, 96, 96, 96));
	tensor_free(o);
	o = run1(t, OP_MAXPOOL2D, DT_I64, 4, S(1, 1, 2, 2), &x, 1, I(2, 2, 2, 2, 1, 1), 6, 0);
	expect_i(t, o, 4, S(1, 1, 2, 2), I(1, 3, 7, 9));
	tensor_free(o);
	free_all(ins, 3);

	/* f64 bytes, arange as floats, and a node nobody reads */
	double dv[2] = {-0.0, 1e300};
	x = tensor_from_bytes(DT_F64, 1, S(2), dv);
	double back[2];
	tensor_to_bytes(x, back);
	check(t, memcmp(dv, back, sizeof dv) == 0, "f64 round trip");
	tensor_free(x);
	Program *pr = prog_new();
	B bb = graph(pr, "g");
	Node *in = input(&bb, DT_I64, 1, S(3));
	node(&bb, OP_NEG, DT_I64, 1, S(3), in, NULL); /* dead */
	Node *ar = node(&bb, OP_ARANGE, DT_F32, 1, S(3), NULL);
	output(&bb, ar);
	output(&bb, in);
	Tensor *iv = ti(DT_I64, 1, S(3), I(4, 5, 6));
	Tensor *outs[2];
	check(t, run(&bb, &iv, NULL, outs) == 0, "run");
	expect_f(t, outs[0], 1, S(3), V(0, 1, 2), 0);
	expect_i(t, outs[1], 1, S(3), I(4, 5, 6));
	free_all(outs, 2);
	tensor_free(iv);
	prog_free(pr);
}

/* Capture stderr while running g. */
static int run_capture(B *b, Tensor **in, Tensor **outs, char *buf, size_t len)
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int rc = run(b, in, NULL, outs);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(buf, 1, len - 1, tmp);
	buf[n] = 0;
	fclose(tmp);
	return rc;
}

static void test_gather(T *t)
{
	t->name = "gather";
	Program *p = prog_new();
	p->src = source_from_string("m.nest", "fn f(t: i32[4]) {\n  let x = tab[t]\n}\n");
	B b = graph(p, "g");
	Node *tab = input(&b, DT_F32, 2, S(3, 2));
	Node *idx = input(&b, DT_I32, 2, S(2, 2));
	Node *g = node(&b, OP_GATHER, DT_F32, 3, S(2, 2, 2), tab, idx, NULL);
	g->loc.off = 28; /* "tab[t]" on line 2 */
	g->loc.end = 34;
	Node *r = node(&b, OP_RELU, DT_F32, 3, S(2, 2, 2), g, NULL);
	output(&b, r);
	Tensor *in[2] = {tf(DT_F32, 2, S(3, 2), V(1, -2, 3, -4, 5, -6)),
	                 ti(DT_I32, 2, S(2, 2), I(2, 0, 0, 1))};
	Tensor *o = NULL;
	check(t, run(&b, in, NULL, &o) == 0, "in range");
	expect_f(t, o, 3, S(2, 2, 2), V(5, 0, 1, 0, 1, 0, 3, 0), 0);
	tensor_free(o);
	o = NULL;
	in[1]->i[3] = 300;
	char msg[512];
	int rc = run_capture(&b, in, &o, msg, sizeof msg);
	check(t, rc == -1 && o == NULL, "out of range returns -1");
	check(t, strstr(msg, "m.nest:2:11: error: gather index 300 out of range [0, 3)") != NULL,
	      "message with position");
	check(t, strstr(msg, "^~~~~~") != NULL, "caret line");
	in[1]->i[3] = -1;
	g->loc.end = 0; /* no position: plain message */
	rc = run_capture(&b, in, &o, msg, sizeof msg);
	check(t, rc == -1, "out of range returns -1 again");
	check(t, strcmp(msg, "nestc: error: gather index -1 out of range [0, 3)\n") == 0,
	      "plain message");
	free_all(in, 2);

	/* the same error inside a region call: the caller's values are freed too */
	B cb = graph(p, "callee");
	Node *ct = input(&cb, DT_F32, 2, S(3, 2));
	Node *ci = input(&cb, DT_I32, 2, S(2, 2));
	output(&cb, node(&cb, OP_GATHER, DT_F32, 3, S(2, 2, 2), ct, ci, NULL));
	B mb = graph(p, "main");
	Node *mt = input(&mb, DT_F32, 2, S(3, 2));
	Node *mi = input(&mb, DT_I32, 2, S(2, 2));
	Node *neg = node(&mb, OP_NEG, DT_F32, 2, S(3, 2), mt, NULL);
	Node *call = node(&mb, OP_CALL, DT_F32, 0, NULL, neg, mi, NULL);
	call->callee = cb.g;
	Node *res = node(&mb, OP_RESULT, DT_F32, 3, S(2, 2, 2), call, NULL);
	output(&mb, node(&mb, OP_EXP, DT_F32, 3, S(2, 2, 2), res, NULL));
	output(&mb, neg);
	Tensor *in2[2] = {tf(DT_F32, 2, S(3, 2), V(1, 2, 3, 4, 5, 6)),
	                  ti(DT_I32, 2, S(2, 2), I(0, 1, 2, 3))};
	Tensor *outs[2] = {NULL, NULL};
	rc = run_capture(&mb, in2, outs, msg, sizeof msg);
	check(t, rc == -1 && !outs[0] && !outs[1], "error in a call");
	check(t, strstr(msg, "gather index 3 out of range [0, 3)") != NULL, "message from a call");
	in2[1]->i[3] = 2;
	check(t, run(&mb, in2, NULL, outs) == 0, "call in range");
	expect_f(t, outs[0], 3, S(2, 2, 2),
	         V(exp(-1.0), exp(-2.0), exp(-3.0), exp(-4.0), exp(-5.0), exp(-6.0), exp(-5.0),
	           exp(-6.0)), 1e-7);
	free_all(outs, 2);
	free_all(in2, 2);
	prog_free(p);
}

/* Region calls: a callee with two outputs, called twice, one result read twice,
 * a param read inside the callee, and a graph output that is also an input. */
static void test_call(T *t)
{
	t->name = "call";
	Program *p = prog_new();
	p->nparams = 1;
	p->params = arena_alloc(p->arena, sizeof(ParamInfo));
	p->params[0].name = "w";
	p->params[0].dtype = DT_F32;
	p->params[0].rank = 1;
	p->params[0].shape[0] = 3;

	B cb = graph(p, "callee");
	Node *cx = input(&cb, DT_F32, 1, S(3));
	Node *cw = node(&cb, OP_PARAM, DT_F32, 1, S(3), NULL);
	cw->a[0] = 0;
	Node *sum = node(&cb, OP_ADD, DT_F32, 1, S(3), cx, cw, NULL);
	Node *prod = node(&cb, OP_MUL, DT_F32, 1, S(3), cx, cw, NULL);
	output(&cb, sum);
	output(&cb, prod);
	output(&cb, cx); /* an input handed back: must be copied */

	B b = graph(p, "main");
	Node *x = input(&b, DT_F32, 1, S(3));
	Node *c1 = node(&b, OP_CALL, DT_F32, 0, NULL, x, NULL);
	c1->callee = cb.g;
	Node *r1 = node(&b, OP_RESULT, DT_F32, 1, S(3), c1, NULL);
	r1->a[0] = 0;
	Node *r1b = node(&b, OP_RESULT, DT_F32, 1, S(3), c1, NULL);
	r1b->a[0] = 0; /* read twice: the first must copy */
	Node *c2 = node(&b, OP_CALL, DT_F32, 0, NULL, r1, NULL);
	c2->callee = cb.g;
	Node *r2 = node(&b, OP_RESULT, DT_F32, 1, S(3), c2, NULL);
	r2->a[0] = 1;
	Node *r3 = node(&b, OP_RESULT, DT_F32, 1, S(3), c2, NULL);
	r3->a[0] = 2;
	Node *e = node(&b, OP_SUB, DT_F32, 1, S(3), r2, r1b, NULL);
	output(&b, e);
	output(&b, x);
	output(&b, x);
	output(&b, r3);

	Tensor *w = tf(DT_F32, 1, S(3), V(1, 2, 3));
	Tensor *in = tf(DT_F32, 1, S(3), V(10, 20, 30));
	Tensor *outs[4];
	check(t, interp_run(p, b.g, &in, &w, outs) == 0, "run");
	/* r1 = x + w = [11, 22, 33]; r2 = r1 * w = [11, 44, 99]; e = r2 - r1 */
	expect_f(t, outs[0], 1, S(3), V(0, 22, 66), 0);
	expect_f(t, outs[1], 1, S(3), V(10, 20, 30), 0);
	expect_f(t, outs[2], 1, S(3), V(10, 20, 30), 0);
	expect_f(t, outs[3], 1, S(3), V(11, 22, 33), 0);
	check(t, outs[1] != in && outs[2] != in && outs[1] != outs[2], "outputs are fresh tensors");
	free_all(outs, 4);
	check(t, in->f[0] == 10 && w->f[2] == 3, "caller's tensors untouched");
	tensor_free(in);
	tensor_free(w);
	prog_free(p);
}

/* Values reused after an in-place candidate: a node read by two later nodes must
 * not be overwritten by the first. */
static void test_inplace(T *t)
{
	t->name = "in place";
	Program *p = prog_new();
	B b = graph(p, "g");
	Node *x = input(&b, DT_F64, 1, S(3));
	Node *e = node(&b, OP_EXP, DT_F64, 1, S(3), x, NULL);
	Node *n1 = node(&b, OP_NEG, DT_F64, 1, S(3), e, NULL);  /* e still needed */
	Node *s = node(&b, OP_ADD, DT_F64, 1, S(3), e, n1, NULL); /* last use of both */
	Node *sq = node(&b, OP_MUL, DT_F64, 1, S(3), x, x, NULL);
	Node *r = node(&b, OP_RESHAPE, DT_F64, 2, S(3, 1), sq, NULL);
	Node *sq2 = node(&b, OP_MUL, DT_F64, 2, S(3, 1), r, r, NULL); /* same node twice */
	output(&b, s);
	output(&b, sq2);
	Tensor *in = tf(DT_F64, 1, S(3), V(0, 1, 2));
	Tensor *outs[2];
	check(t, run(&b, &in, NULL, outs) == 0, "run");
	expect_f(t, outs[0], 1, S(3), V(0, 0, 0), 0);
	expect_f(t, outs[1], 2, S(3, 1), V(0, 1, 16), 0);
	expect_f(t, in, 1, S(3), V(0, 1, 2), 0);
	free_all(outs, 2);
	tensor_free(in);
	prog_free(p);
}

int main(void)
{
	T t = {0, 0, ""};
	test_bytes(&t);
	test_broadcast(&t);
	test_intdiv(&t);
	test_elementwise(&t);
	test_matmul(&t);
	test_matmul_transposed(&t);
	test_reduce(&t);
	test_norm(&t);
	test_shape_ops(&t);
	test_conv(&t);
	test_pool(&t);
	test_ints(&t);
	test_gather(&t);
	test_call(&t);
	test_inplace(&t);
	printf("%d passed, %d failed\n", t.pass, t.fail);
	return t.fail != 0;
}

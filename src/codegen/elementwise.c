/* elementwise.c - scalar operations (arithmetic with NumPy's meaning,
 * fast exp and tanh, casts) and the elementwise kernel: an op with the ops
 * plan.c made inline into it, as one loop nest. */
#include "gen.h"

#include <math.h>
#include <string.h>

/* ---- scalar operations ---- */

static LLVMValueRef to_i1(Gen *G, LLVMValueRef b8)
{
	return llvm.LLVMBuildICmp(G->B, LLVMIntNE, b8, llvm.LLVMConstInt(G->i8, 0, 0), "");
}

static LLVMValueRef from_i1(Gen *G, LLVMValueRef b1)
{
	return llvm.LLVMBuildZExt(G->B, b1, G->i8, "");
}

/* maximum/minimum propagating NaN, as NumPy's maximum does */
LLVMValueRef fmaxmin(Gen *G, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c = llvm.LLVMBuildFCmp(G->B, is_max ? LLVMRealOGT : LLVMRealOLT, a, b, "");
	LLVMValueRef r = llvm.LLVMBuildSelect(G->B, c, a, b, "");
	r = llvm.LLVMBuildSelect(G->B, llvm.LLVMBuildFCmp(G->B, LLVMRealUNO, a, a, ""), a, r, "");
	return llvm.LLVMBuildSelect(G->B, llvm.LLVMBuildFCmp(G->B, LLVMRealUNO, b, b, ""), b, r, "");
}

LLVMValueRef imaxmin(Gen *G, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c = llvm.LLVMBuildICmp(G->B, is_max ? LLVMIntSGT : LLVMIntSLT, a, b, "");
	return llvm.LLVMBuildSelect(G->B, c, a, b, "");
}

/* exp for f32 as plain arithmetic that the loop vectoriser can widen (a libm
 * call per element is most of a transformer's time otherwise): Cephes' range
 * reduction to [-ln2/2, ln2/2], a degree-6 polynomial, and the power of two
 * put into the exponent bits. Relative error about 2e-7; NaN, +-inf and
 * underflow keep their meaning. f64 keeps libm's exp. The clamps are
 * compare-and-selects, which x86 does in one max or min (llvm.minnum and
 * maxnum cost two more instructions each for their NaN rule); NaN passes
 * them and is given back at the end. Clamped below, the power of two is
 * 2^-127, whose exponent bits are 0: the product is 0 with no select of its
 * own. Above, the clamp gives 2^127 * 1.41, so overflow is selected. */
LLVMValueRef exp_fast(Gen *G, DType dt, LLVMValueRef x)
{
	if (dt != DT_F32)
		return math1(G, "llvm.exp", dt, x);
	return exp_fast_v(G, x, 0);
}

/* a * b + c for f32 scalars or vectors of `lanes`, as llvm.fmuladd: one
 * fused instruction where the target has FMA, a multiply and an add where
 * it has not (x86-64 without AVX2: llvm.fma would be a libm call a lane) */
LLVMValueRef fma_f32(Gen *G, int lanes, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMTypeRef ft = lanes ? llvm.LLVMVectorType(G->f32, (unsigned)lanes) : G->f32;
	char name[40];
	snprintf(name, sizeof name, lanes ? "llvm.fmuladd.v%df32" : "llvm.fmuladd.f32", lanes);
	LLVMTypeRef ts[3] = {ft, ft, ft};
	LLVMValueRef vs[3] = {a, b, c};
	return call(G, name, ft, ts, vs, 3);
}

LLVMValueRef exp_fast_v(Gen *G, LLVMValueRef x, int lanes)
{
	LLVMBuilderRef B = G->B;
	LLVMTypeRef ft = lanes ? llvm.LLVMVectorType(G->f32, (unsigned)lanes) : G->f32;
	LLVMTypeRef it = lanes ? llvm.LLVMVectorType(G->i32, (unsigned)lanes) : G->i32;
#define KF(v) (lanes ? splat(G, ft, lanes, fconst(G, DT_F32, (v))) : fconst(G, DT_F32, (v)))
#define KI(v) (lanes ? splat(G, it, lanes, ci32(G, (v))) : ci32(G, (v)))
	LLVMValueRef hi = KF(88.3762626647949), lo = KF(-88.3762626647949);
	LLVMValueRef xc = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), lo, x, "");
	xc = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOGT, xc, hi, ""), hi, xc, "");
	char fl[32];
	snprintf(fl, sizeof fl, lanes ? "llvm.floor.v%df32" : "llvm.floor.f32", lanes);
	/* fused multiply-adds: the reduction's two steps and Horner's scheme
	 * were a multiply and an add each, 12 of the 37 instructions of an exp
	 * of 16 lanes (softmax's exps were a fifth of BERT's attention) */
	LLVMValueRef fa = fma_f32(G, lanes, xc, KF(1.44269504088896341), KF(0.5));
	LLVMValueRef n = call(G, fl, ft, &ft, &fa, 1);
	LLVMValueRef r = fma_f32(G, lanes, n, KF(-0.693359375), xc);
	r = fma_f32(G, lanes, n, KF(2.12194440e-4), r);
	static const double c[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
	                           1.6666665459E-1, 5.0000001201E-1};
	LLVMValueRef p = KF(c[0]);
	for (int i = 1; i < 6; i++)
		p = fma_f32(G, lanes, p, r, KF(c[i]));
	p = llvm.LLVMBuildFAdd(B, fma_f32(G, lanes, p, llvm.LLVMBuildFMul(B, r, r, ""), r), KF(1), "");
	/* 2^n: n + 127 in the exponent field */
	LLVMValueRef ni = llvm.LLVMBuildFPToSI(B, n, it, "");
	LLVMValueRef bits = llvm.LLVMBuildShl(B, llvm.LLVMBuildAdd(B, ni, KI(127), ""), KI(23), "");
	LLVMValueRef e = llvm.LLVMBuildFMul(B, p, llvm.LLVMBuildBitCast(B, bits, ft, ""), "");
	e = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOGT, x, hi, ""), KF(INFINITY), e, "");
	return llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, e, "");
#undef KF
#undef KI
}

/* An f32 constant, or a vector of `lanes` of it; an f32 intrinsic of one
 * operand on either */
#define KF(v) (lanes ? splat(G, llvm.LLVMVectorType(G->f32, (unsigned)lanes), lanes, fconst(G, DT_F32, (v))) \
                     : fconst(G, DT_F32, (v)))
static LLVMValueRef math1_v(Gen *G, const char *base, LLVMValueRef x, int lanes)
{
	char name[64];
	LLVMTypeRef t = lanes ? llvm.LLVMVectorType(G->f32, (unsigned)lanes) : G->f32;
	if (lanes)
		snprintf(name, sizeof name, "%s.v%df32", base, lanes);
	else
		snprintf(name, sizeof name, "%s.f32", base);
	return call(G, name, t, &t, &x, 1);
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1) for f32 x, a scalar (lanes 0) or a
 * vector of `lanes`, through exp_fast */
static LLVMValueRef tanh_fast_v(Gen *G, LLVMValueRef x, int lanes)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef e = exp_fast_v(G, llvm.LLVMBuildFMul(B, x, KF(2), ""), lanes);
	LLVMValueRef t = llvm.LLVMBuildFSub(B, KF(1), llvm.LLVMBuildFDiv(B, KF(2), llvm.LLVMBuildFAdd(B, e, KF(1), ""), ""), "");
	/* small |x|: x itself is closer than the difference of two near-equal numbers */
	LLVMValueRef small = llvm.LLVMBuildFCmp(B, LLVMRealOLT, math1_v(G, "llvm.fabs", x, lanes), KF(1e-4), "");
	return llvm.LLVMBuildSelect(B, small, x, t, "");
}

static LLVMValueRef tanh_fast(Gen *G, DType dt, LLVMValueRef x)
{
	return dt == DT_F32 ? tanh_fast_v(G, x, 0) : math1(G, "tanh", dt, x);
}

/* Horner's scheme in t over coefficients c[0] (highest) .. c[n - 1] */
static LLVMValueRef horner(Gen *G, LLVMValueRef t, const float *c, int n, int lanes)
{
	LLVMValueRef p = KF(c[0]);
	for (int i = 1; i < n; i++)
		p = fma_f32(G, lanes, p, t, KF(c[i]));
	return p;
}

/* erf for f32 without branches or a libm call, so that loops of it (exact
 * gelu) vectorise: N. Juffa's minimax approximations, x + x * P(x^2) for
 * |x| <= 0.927734375 and 1 - exp(Q(|x|)) with the sign of x beyond, both
 * computed and one selected; exp through exp_fast. 0.94 ulp at most over a
 * strided sweep of every f32 (tests/compiled/run.py, erf_sweep); NaN, +-inf and -0 keep their
 * meaning (exp_fast gives 0 below -88, so large |x| is exactly +-1). A
 * scalar (lanes 0) or a vector of `lanes`; f64 keeps libm's erf. */
static LLVMValueRef erf_fast_v(Gen *G, LLVMValueRef x, int lanes)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef t = math1_v(G, "llvm.fabs", x, lanes), s = llvm.LLVMBuildFMul(B, x, x, "");
	static const float small[] = {-5.96761703e-4f, 4.99119423e-3f, -2.67681349e-2f, 1.12819925e-1f, -3.76125336e-1f,
	                              1.28379166e-1f};
	LLVMValueRef rs = fma_f32(G, lanes, horner(G, s, small, 6, lanes), x, x);
	LLVMValueRef r = fma_f32(G, lanes, KF(-1.72853470e-5f), t, KF(3.83197126e-4f));
	LLVMValueRef u = fma_f32(G, lanes, KF(-3.88396438e-3f), t, KF(2.42546219e-2f));
	r = fma_f32(G, lanes, r, s, u);
	static const float big[] = {-1.06777877e-1f, -6.34846687e-1f, -1.28717512e-1f};
	for (int i = 0; i < 3; i++)
		r = fma_f32(G, lanes, r, t, KF(big[i]));
	r = fma_f32(G, lanes, r, t, llvm.LLVMBuildFNeg(B, t, ""));
	LLVMValueRef rb = llvm.LLVMBuildFSub(B, KF(1), exp_fast_v(G, r, lanes), "");
	LLVMTypeRef ft = lanes ? llvm.LLVMVectorType(G->f32, (unsigned)lanes) : G->f32;
	char cs[40];
	snprintf(cs, sizeof cs, lanes ? "llvm.copysign.v%df32" : "llvm.copysign.f32", lanes);
	LLVMTypeRef ts[2] = {ft, ft};
	LLVMValueRef vs[2] = {rb, x};
	rb = call(G, cs, ft, ts, vs, 2);
	LLVMValueRef isbig = llvm.LLVMBuildFCmp(B, LLVMRealOGT, t, KF(0.927734375), "");
	return llvm.LLVMBuildSelect(B, isbig, rb, rs, "");
}

static LLVMValueRef erf_fast(Gen *G, DType dt, LLVMValueRef x)
{
	return dt == DT_F32 ? erf_fast_v(G, x, 0) : math1(G, "erf", dt, x);
}

LLVMValueRef gelu_f32(Gen *G, LLVMValueRef x, int lanes, int tanh_form)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef half_x = llvm.LLVMBuildFMul(B, KF(0.5), x, "");
	if (!tanh_form)
		return llvm.LLVMBuildFMul(B, half_x,
		                          llvm.LLVMBuildFAdd(B, KF(1), erf_fast_v(G, llvm.LLVMBuildFMul(B, x, KF(0.70710678118654752440), ""), lanes), ""), "");
	LLVMValueRef x3 = llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, x, x, ""), x, "");
	LLVMValueRef in = llvm.LLVMBuildFMul(B, KF(0.79788456080286535588), llvm.LLVMBuildFAdd(B, x, llvm.LLVMBuildFMul(B, KF(0.044715), x3, ""), ""), "");
	return llvm.LLVMBuildFMul(B, half_x, llvm.LLVMBuildFAdd(B, KF(1), tanh_fast_v(G, in, lanes), ""), "");
}

LLVMValueRef act_f32(Gen *G, Op op, LLVMValueRef x, int lanes)
{
	LLVMBuilderRef B = G->B;
	switch (op) {
	case OP_SIGMOID: /* as unop: 1 / (1 + exp(-x)), x / (1 + exp(-x)) */
	case OP_SILU: {
		LLVMValueRef d = llvm.LLVMBuildFAdd(B, KF(1), exp_fast_v(G, llvm.LLVMBuildFNeg(B, x, ""), lanes), "");
		return llvm.LLVMBuildFDiv(B, op == OP_SILU ? x : KF(1), d, "");
	}
	case OP_TANH: return tanh_fast_v(G, x, lanes);
	case OP_GELU: case OP_GELU_TANH: return gelu_f32(G, x, lanes, op == OP_GELU_TANH);
	case OP_HARDSWISH: { /* x * min(max(x + 3, 0), 6) / 6; NaN stays NaN (a NaN is not < 0 nor > 6) */
		LLVMValueRef t = llvm.LLVMBuildFAdd(B, x, KF(3), "");
		t = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, t, KF(0), ""), KF(0), t, "");
		t = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOGT, t, KF(6), ""), KF(6), t, "");
		return llvm.LLVMBuildFDiv(B, llvm.LLVMBuildFMul(B, x, t, ""), KF(6), "");
	}
	default: ice("act_f32: %s", op_name(op));
	}
}
#undef KF

LLVMValueRef binop(Fn *F, Op op, DType dt, LLVMValueRef a, LLVMValueRef b)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int fl = dtype_is_float(dt);
	LLVMTypeRef t = elem_t(G, dt);
	switch (op) {
	case OP_ADD: return fl ? llvm.LLVMBuildFAdd(B, a, b, "") : llvm.LLVMBuildAdd(B, a, b, "");
	case OP_SUB: return fl ? llvm.LLVMBuildFSub(B, a, b, "") : llvm.LLVMBuildSub(B, a, b, "");
	case OP_MUL: return fl ? llvm.LLVMBuildFMul(B, a, b, "") : llvm.LLVMBuildMul(B, a, b, "");
	case OP_DIV:
	case OP_MOD: {
		if (fl) {
			if (op == OP_DIV)
				return llvm.LLVMBuildFDiv(B, a, b, "");
			/* NumPy: the remainder takes the sign of the divisor */
			LLVMValueRef r = llvm.LLVMBuildFRem(B, a, b, "");
			LLVMValueRef zero = llvm.LLVMConstReal(t, 0);
			LLVMValueRef nz = llvm.LLVMBuildFCmp(B, LLVMRealONE, r, zero, "");
			LLVMValueRef sr = llvm.LLVMBuildFCmp(B, LLVMRealOLT, r, zero, "");
			LLVMValueRef sb = llvm.LLVMBuildFCmp(B, LLVMRealOLT, b, zero, "");
			LLVMValueRef fix = llvm.LLVMBuildAnd(B, nz, llvm.LLVMBuildXor(B, sr, sb, ""), "");
			r = llvm.LLVMBuildSelect(B, fix, llvm.LLVMBuildFAdd(B, r, b, ""), r, "");
			/* a zero remainder too: -2.0 % 1.0 is +0.0, 2.0 % -1.0 is -0.0 */
			LLVMValueRef z = llvm.LLVMBuildFCmp(B, LLVMRealOEQ, r, zero, "");
			LLVMValueRef sz = llvm.LLVMBuildSelect(B, sb, llvm.LLVMConstReal(t, -0.0), zero, "");
			return llvm.LLVMBuildSelect(B, z, sz, r, "");
		}
		/* floor division and modulo; x/0 and x%0 give 0; MIN/-1 wraps; no trap */
		LLVMValueRef zero = llvm.LLVMConstInt(t, 0, 0), one = llvm.LLVMConstInt(t, 1, 0);
		LLVMValueRef minv = llvm.LLVMConstInt(t, dt == DT_I32 ? (unsigned long long)(uint32_t)INT32_MIN
		                                                 : (unsigned long long)INT64_MIN, 0);
		LLVMValueRef bz = llvm.LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
		LLVMValueRef ovf = llvm.LLVMBuildAnd(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, a, minv, ""),
		                                llvm.LLVMBuildICmp(B, LLVMIntEQ, b, llvm.LLVMConstAllOnes(t), ""), "");
		LLVMValueRef safe = llvm.LLVMBuildSelect(B, llvm.LLVMBuildOr(B, bz, ovf, ""), one, b, "");
		LLVMValueRef q = llvm.LLVMBuildSDiv(B, a, safe, "");
		LLVMValueRef r = llvm.LLVMBuildSRem(B, a, safe, "");
		LLVMValueRef adj = llvm.LLVMBuildAnd(B, llvm.LLVMBuildICmp(B, LLVMIntNE, r, zero, ""),
		                                llvm.LLVMBuildXor(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, r, zero, ""),
		                                             llvm.LLVMBuildICmp(B, LLVMIntSLT, safe, zero, ""), ""), "");
		if (op == OP_DIV) {
			q = llvm.LLVMBuildSelect(B, adj, llvm.LLVMBuildSub(B, q, one, ""), q, "");
			q = llvm.LLVMBuildSelect(B, ovf, minv, q, "");
			return llvm.LLVMBuildSelect(B, bz, zero, q, "");
		}
		r = llvm.LLVMBuildSelect(B, adj, llvm.LLVMBuildAdd(B, r, safe, ""), r, "");
		r = llvm.LLVMBuildSelect(B, ovf, zero, r, "");
		return llvm.LLVMBuildSelect(B, bz, zero, r, "");
	}
	case OP_FMOD: {
		if (fl)
			return llvm.LLVMBuildFRem(B, a, b, "");
		/* x fmod 0 and x fmod -1 are 0: no trap */
		LLVMValueRef zero = llvm.LLVMConstInt(t, 0, 0);
		LLVMValueRef odd = llvm.LLVMBuildOr(B, llvm.LLVMBuildICmp(B, LLVMIntEQ, b, zero, ""),
		                                    llvm.LLVMBuildICmp(B, LLVMIntEQ, b, llvm.LLVMConstAllOnes(t), ""), "");
		LLVMValueRef safe = llvm.LLVMBuildSelect(B, odd, llvm.LLVMConstInt(t, 1, 0), b, "");
		return llvm.LLVMBuildSelect(B, odd, zero, llvm.LLVMBuildSRem(B, a, safe, ""), "");
	}
	case OP_POW: return math2(G, "llvm.pow", dt, a, b);
	case OP_MAX: return fl ? fmaxmin(G, a, b, 1) : imaxmin(G, a, b, 1);
	case OP_MIN: return fl ? fmaxmin(G, a, b, 0) : imaxmin(G, a, b, 0);
	case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE: {
		LLVMValueRef c;
		if (fl) {
			static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
			c = llvm.LLVMBuildFCmp(B, fp[op - OP_EQ], a, b, "");
		} else {
			static const LLVMIntPredicate ip[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
			c = llvm.LLVMBuildICmp(B, ip[op - OP_EQ], a, b, "");
		}
		return from_i1(G, c);
	}
	case OP_AND: return llvm.LLVMBuildAnd(B, a, b, "");
	case OP_OR: return llvm.LLVMBuildOr(B, a, b, "");
	default: break;
	}
	ice("binop: %s", op_name(op));
}

LLVMValueRef unop(Fn *F, Op op, DType dt, LLVMValueRef x)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	int fl = dtype_is_float(dt);
	switch (op) {
	case OP_NEG: return fl ? llvm.LLVMBuildFNeg(B, x, "") : llvm.LLVMBuildNeg(B, x, "");
	case OP_NOT: return llvm.LLVMBuildXor(B, x, llvm.LLVMConstInt(G->i8, 1, 0), "");
	case OP_EXP: return exp_fast(G, dt, x);
	case OP_LOG: return math1(G, "llvm.log", dt, x);
	case OP_SQRT: return math1(G, "llvm.sqrt", dt, x);
	case OP_RSQRT: return llvm.LLVMBuildFDiv(B, fconst(G, dt, 1), math1(G, "llvm.sqrt", dt, x), "");
	case OP_TANH: return tanh_fast(G, dt, x);
	case OP_SIGMOID:
		return llvm.LLVMBuildFDiv(B, fconst(G, dt, 1),
		                     llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), exp_fast(G, dt, llvm.LLVMBuildFNeg(B, x, "")), ""), "");
	case OP_RELU:
		if (fl) {
			/* max(x, 0) that keeps NaN, like the interpreter */
			LLVMValueRef c = llvm.LLVMBuildFCmp(B, LLVMRealOLT, x, fconst(G, dt, 0), "");
			return llvm.LLVMBuildSelect(B, c, fconst(G, dt, 0), x, "");
		}
		return imaxmin(G, x, llvm.LLVMConstInt(elem_t(G, dt), 0, 0), 1);
	case OP_GELU:
	case OP_GELU_TANH:
		if (dt == DT_F32)
			return gelu_f32(G, x, 0, op == OP_GELU_TANH);
		if (op == OP_GELU) {
			LLVMValueRef e = erf_fast(G, dt, llvm.LLVMBuildFMul(B, x, fconst(G, dt, 0.70710678118654752440), ""));
			return llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, fconst(G, dt, 0.5), x, ""), llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), e, ""), "");
		} else {
			LLVMValueRef x3 = llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, x, x, ""), x, "");
			LLVMValueRef in = llvm.LLVMBuildFMul(B, fconst(G, dt, 0.79788456080286535588),
			                                llvm.LLVMBuildFAdd(B, x, llvm.LLVMBuildFMul(B, fconst(G, dt, 0.044715), x3, ""), ""), "");
			LLVMValueRef t = tanh_fast(G, dt, in);
			return llvm.LLVMBuildFMul(B, llvm.LLVMBuildFMul(B, fconst(G, dt, 0.5), x, ""), llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), t, ""), "");
		}
	case OP_SILU:
		return llvm.LLVMBuildFDiv(B, x,
		                     llvm.LLVMBuildFAdd(B, fconst(G, dt, 1), exp_fast(G, dt, llvm.LLVMBuildFNeg(B, x, "")), ""), "");
	case OP_ERF: return erf_fast(G, dt, x);
	case OP_ABS:
		if (fl)
			return math1(G, "llvm.fabs", dt, x);
		return llvm.LLVMBuildSelect(B, llvm.LLVMBuildICmp(B, LLVMIntSLT, x, llvm.LLVMConstInt(elem_t(G, dt), 0, 0), ""),
		                       llvm.LLVMBuildNeg(B, x, ""), x, "");
	case OP_SIN: return math1(G, "llvm.sin", dt, x);
	case OP_COS: return math1(G, "llvm.cos", dt, x);
	case OP_FLOOR: return math1(G, "llvm.floor", dt, x);
	case OP_ASIN: return math1(G, "asin", dt, x);
	case OP_ACOS: return math1(G, "acos", dt, x);
	case OP_ATAN: return math1(G, "atan", dt, x);
	case OP_HARDSWISH:
		if (dt == DT_F32)
			return act_f32(G, op, x, 0);
		return llvm.LLVMBuildFDiv(B, llvm.LLVMBuildFMul(B, x, fmaxmin(G, fmaxmin(G, llvm.LLVMBuildFAdd(B, x, fconst(G, dt, 3), ""), fconst(G, dt, 0), 1), fconst(G, dt, 6), 0), ""), fconst(G, dt, 6), "");
	case OP_CEIL: return math1(G, "llvm.ceil", dt, x);
	case OP_ROUND: return math1(G, "llvm.roundeven", dt, x);
	case OP_ROUND_BF16: {
		/* as round_bf16() (dtype.c): add half an ulp of bfloat16, less one
		 * unless the kept part is odd, and clear the low 16 bits; NaN kept */
		LLVMTypeRef i32 = G->i32;
		LLVMValueRef u = llvm.LLVMBuildBitCast(B, x, i32, "");
		LLVMValueRef odd = llvm.LLVMBuildAnd(B, llvm.LLVMBuildLShr(B, u, llvm.LLVMConstInt(i32, 16, 0), ""),
		                                     llvm.LLVMConstInt(i32, 1, 0), "");
		LLVMValueRef r = llvm.LLVMBuildAdd(B, u, llvm.LLVMBuildAdd(B, odd, llvm.LLVMConstInt(i32, 0x7fff, 0), ""), "");
		r = llvm.LLVMBuildAnd(B, r, llvm.LLVMConstInt(i32, 0xffff0000u, 0), "");
		LLVMValueRef nan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
		return llvm.LLVMBuildSelect(B, nan, x, llvm.LLVMBuildBitCast(B, r, elem_t(G, dt), ""), "");
	}
	default: break;
	}
	ice("unop: %s", op_name(op));
}

/* ---- the storage dtypes' casts ----
 * widen.c leaves only these: f16 / bf16 <-> f32 and a narrow integer <->
 * i32. The 16-bit floats are held as i16 bits and converted with integer
 * operations, the same on every target and LLVM version (no half or bfloat
 * type, no libcalls), bit-exact with dtype.c. */

static LLVMValueRef k32(Gen *G, uint32_t v)
{
	return llvm.LLVMConstInt(G->i32, v, 0);
}

/* binary32 -> binary16, ties to even (F. Giesen's float_to_half_fast3_rtne):
 * subnormal results by adding 0.5, whose exponent aligns the 10 bits kept at
 * the bottom so that the FP add rounds them. */
static LLVMValueRef f32_to_f16(Gen *G, LLVMValueRef x)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef u = llvm.LLVMBuildBitCast(B, x, G->i32, "");
	LLVMValueRef sgn = llvm.LLVMBuildAnd(B, u, k32(G, 0x80000000u), "");
	LLVMValueRef a = llvm.LLVMBuildXor(B, u, sgn, "");
	/* inf or NaN (or too large) */
	LLVMValueRef big = llvm.LLVMBuildICmp(B, LLVMIntUGE, a, k32(G, 0x47800000u), "");
	LLVMValueRef nan = llvm.LLVMBuildICmp(B, LLVMIntUGT, a, k32(G, 0x7f800000u), "");
	LLVMValueRef infnan = llvm.LLVMBuildSelect(B, nan, k32(G, 0x7e00u), k32(G, 0x7c00u), "");
	/* subnormal or zero */
	LLVMValueRef small = llvm.LLVMBuildICmp(B, LLVMIntULT, a, k32(G, 0x38800000u), "");
	LLVMValueRef af = llvm.LLVMBuildBitCast(B, a, G->f32, "");
	LLVMValueRef sum = llvm.LLVMBuildFAdd(B, af, llvm.LLVMConstReal(G->f32, 0.5), "");
	LLVMValueRef sub = llvm.LLVMBuildSub(B, llvm.LLVMBuildBitCast(B, sum, G->i32, ""), k32(G, 0x3f000000u), "");
	/* normal: rebias, round half to even on the 13 bits dropped */
	LLVMValueRef odd = llvm.LLVMBuildAnd(B, llvm.LLVMBuildLShr(B, a, k32(G, 13), ""), k32(G, 1), "");
	LLVMValueRef r = llvm.LLVMBuildAdd(B, a, k32(G, (uint32_t)(15 - 127) * (1u << 23) + 0xfffu), "");
	r = llvm.LLVMBuildLShr(B, llvm.LLVMBuildAdd(B, r, odd, ""), k32(G, 13), "");
	LLVMValueRef o = llvm.LLVMBuildSelect(B, big, infnan, llvm.LLVMBuildSelect(B, small, sub, r, ""), "");
	o = llvm.LLVMBuildOr(B, o, llvm.LLVMBuildLShr(B, sgn, k32(G, 16), ""), "");
	return llvm.LLVMBuildTrunc(B, o, G->i16, "");
}

/* binary16 -> binary32, exact: the bits moved into place and scaled by
 * 2^112 (subnormals too), inf and NaN given the full exponent. */
static LLVMValueRef f16_to_f32(Gen *G, LLVMValueRef h)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef u = llvm.LLVMBuildZExt(B, h, G->i32, "");
	LLVMValueRef em = llvm.LLVMBuildShl(B, llvm.LLVMBuildAnd(B, u, k32(G, 0x7fffu), ""), k32(G, 13), "");
	LLVMValueRef f = llvm.LLVMBuildFMul(B, llvm.LLVMBuildBitCast(B, em, G->f32, ""),
	                                    llvm.LLVMBuildBitCast(B, k32(G, 0x77800000u), G->f32, ""), "");
	LLVMValueRef fu = llvm.LLVMBuildBitCast(B, f, G->i32, "");
	LLVMValueRef infnan = llvm.LLVMBuildICmp(B, LLVMIntUGE, em, k32(G, 0x0f800000u), "");
	fu = llvm.LLVMBuildSelect(B, infnan, llvm.LLVMBuildOr(B, fu, k32(G, 0x7f800000u), ""), fu, "");
	LLVMValueRef sgn = llvm.LLVMBuildShl(B, llvm.LLVMBuildAnd(B, u, k32(G, 0x8000u), ""), k32(G, 16), "");
	return llvm.LLVMBuildBitCast(B, llvm.LLVMBuildOr(B, fu, sgn, ""), G->f32, "");
}

/* binary32 -> bfloat16: round_bf16 of dtype.c (NaN stays a quiet NaN). */
static LLVMValueRef f32_to_bf16(Gen *G, LLVMValueRef x)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef u = llvm.LLVMBuildBitCast(B, x, G->i32, "");
	LLVMValueRef hi = llvm.LLVMBuildLShr(B, u, k32(G, 16), "");
	LLVMValueRef r = llvm.LLVMBuildAdd(B, u, llvm.LLVMBuildAdd(B, k32(G, 0x7fffu), llvm.LLVMBuildAnd(B, hi, k32(G, 1), ""), ""), "");
	r = llvm.LLVMBuildLShr(B, r, k32(G, 16), "");
	LLVMValueRef nan = llvm.LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
	r = llvm.LLVMBuildSelect(B, nan, llvm.LLVMBuildOr(B, hi, k32(G, 0x40u), ""), r, "");
	return llvm.LLVMBuildTrunc(B, r, G->i16, "");
}

static LLVMValueRef bf16_to_f32(Gen *G, LLVMValueRef h)
{
	LLVMBuilderRef B = G->B;
	LLVMValueRef u = llvm.LLVMBuildShl(B, llvm.LLVMBuildZExt(B, h, G->i32, ""), k32(G, 16), "");
	return llvm.LLVMBuildBitCast(B, u, G->f32, "");
}

static LLVMValueRef storage_cast(Gen *G, LLVMValueRef x, DType from, DType to)
{
	LLVMBuilderRef B = G->B;
	if (from == DT_F32 && to == DT_F16)
		return f32_to_f16(G, x);
	if (from == DT_F32 && to == DT_BF16)
		return f32_to_bf16(G, x);
	if (from == DT_F16 && to == DT_F32)
		return f16_to_f32(G, x);
	if (from == DT_BF16 && to == DT_F32)
		return bf16_to_f32(G, x);
	if (from == DT_I32 && (to == DT_I8 || to == DT_U8 || to == DT_I16 || to == DT_U16))
		return llvm.LLVMBuildTrunc(B, x, elem_t(G, to), ""); /* wraps */
	if (to == DT_I32 && (from == DT_I8 || from == DT_I16))
		return llvm.LLVMBuildSExt(B, x, G->i32, "");
	if (to == DT_I32 && (from == DT_U8 || from == DT_U16))
		return llvm.LLVMBuildZExt(B, x, G->i32, "");
	ice("cast: %s to %s (widen.c makes no such cast)", dtype_name(from), dtype_name(to));
}

static LLVMValueRef cast(Fn *F, LLVMValueRef x, DType from, DType to)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	if (from == to)
		return x;
	if (dtype_is_storage(from) || dtype_is_storage(to))
		return storage_cast(G, x, from, to);
	LLVMTypeRef tt = elem_t(G, to);
	if (to == DT_BOOL) {
		LLVMValueRef c = dtype_is_float(from) ? llvm.LLVMBuildFCmp(B, LLVMRealUNE, x, llvm.LLVMConstReal(elem_t(G, from), 0), "")
		                                      : llvm.LLVMBuildICmp(B, LLVMIntNE, x, llvm.LLVMConstInt(elem_t(G, from), 0, 0), "");
		return from_i1(G, c);
	}
	if (from == DT_BOOL)
		return dtype_is_float(to) ? llvm.LLVMBuildUIToFP(B, x, tt, "") : llvm.LLVMBuildZExt(B, x, tt, "");
	if (dtype_is_float(from) && dtype_is_float(to))
		return to == DT_F32 ? llvm.LLVMBuildFPTrunc(B, x, tt, "") : llvm.LLVMBuildFPExt(B, x, tt, "");
	if (!dtype_is_float(from) && !dtype_is_float(to))
		return to == DT_I32 ? llvm.LLVMBuildTrunc(B, x, tt, "") : llvm.LLVMBuildSExt(B, x, tt, "");
	if (!dtype_is_float(from))
		return llvm.LLVMBuildSIToFP(B, x, tt, "");
	/* float to int: truncate toward zero, saturating, NaN to 0 (no undefined behaviour) */
	char name[64];
	snprintf(name, sizeof name, "llvm.fptosi.sat.%s.%s", to == DT_I32 ? "i32" : "i64", from == DT_F32 ? "f32" : "f64");
	LLVMTypeRef ft = elem_t(G, from);
	return call(G, name, tt, &ft, &x, 1);
}

/* ---- the elementwise kernel ---- */

/* The tensors an elementwise tree reads: the inputs of n and, through the
 * ops made inline into it (plan.c), theirs. */
void ew_leaves(Fn *F, Node *n, Node **leaf, int *nleaf)
{
	for (int k = 0; k < n->nin; k++) {
		Node *x = n->in[k];
		if (F->plan->ew_into[x->id] == n->id)
			ew_leaves(F, x, leaf, nleaf);
		else
			leaf[(*nleaf)++] = x;
	}
}

/* The value of n at the loop's position: leaves are loaded (in the order
 * ew_leaves lists them), inline ops computed. */
static LLVMValueRef ew_value(Fn *F, Node *n, LLVMValueRef *off, int *next)
{
	Gen *G = F->gen;
	LLVMValueRef in[3];
	for (int k = 0; k < n->nin; k++) {
		Node *x = n->in[k];
		if (F->plan->ew_into[x->id] == n->id) {
			in[k] = ew_value(F, x, off, next);
		} else {
			in[k] = load_at(F, x, off[*next]);
			(*next)++;
		}
	}
	if (n->op == OP_WHERE)
		return llvm.LLVMBuildSelect(G->B, to_i1(G, in[0]), in[1], in[2], "");
	if (n->nin == 2)
		return binop(F, n->op, n->in[0]->dtype, in[0], in[1]);
	if (n->op == OP_CAST)
		return cast(F, in[0], n->in[0]->dtype, n->dtype);
	return unop(F, n->op, n->dtype, in[0]);
}

/* An elementwise op with the ops made inline into it: one loop nest over
 * its shape, each tensor read through its own (broadcast) strides. */
void k_elementwise(Fn *F, Node *n)
{
	Node *leaf[EW_LEAVES];
	int nleaf = 0;
	ew_leaves(F, n, leaf, &nleaf);
	LLVMValueRef st[EW_LEAVES + 1][MAX_RANK], off[EW_LEAVES + 1];
	for (int j = 0; j < nleaf; j++)
		strides(F, leaf[j], n->rank, n, st[j]);
	strides(F, n, n->rank, NULL, st[nleaf]);
	Nest N;
	nest_begin_runs(F, &N, n, nleaf + 1, st, off);
	int next = 0;
	LLVMValueRef v = ew_value(F, n, off, &next);
	store_at(F, n, off[nleaf], v);
	nest_end(F, &N);
}

LLVMValueRef const_value(Gen *G, Node *n)
{
	if (dtype_is_float(n->dtype))
		return llvm.LLVMConstReal(elem_t(G, n->dtype), n->fval);
	return llvm.LLVMConstInt(elem_t(G, n->dtype), (unsigned long long)n->ival, 1);
}

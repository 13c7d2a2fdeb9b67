/* quant.c - weights in the formats of `nestc build --weights-format`: f32,
 * bf16 and f16 (rounded to nearest, ties to even), and GGUF's q8_0 and q4_0
 * blocks and its k-quants q4_K and q6_K (below), made from f32 (or 16-bit)
 * elements and turned back into them.
 *
 * The block types are ggml's (ggml-common.h), little-endian as in a GGUF
 * file, and are quantized as ggml's reference quantizers do it
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref), operation for operation in
 * float, so that a block is byte for byte what ggml writes:
 *   q8_0, 34 bytes: f16 d, then 32 int8 q. amax = max |x|, d = amax / 127,
 *     id = d ? 1 / d : 0 (from the f32 d), q = roundf(x * id); x means d * q.
 *   q4_0, 18 bytes: f16 d, then 16 bytes, element j in the low nibble of
 *     byte j and element j + 16 in its high nibble. m = the first element of
 *     largest magnitude (sign kept; +0 when all are zero), d = m / -8,
 *     id = d ? 1 / d : 0, q = min(15, (int8)(x * id + 8.5)); x means
 *     d * (q - 8).
 * Where 1 / d overflows (|d| < 2^-128, whose f16 is 0 anyway) ggml converts
 * an infinity or a NaN to an integer, which C leaves undefined; every q of
 * such a block is 0 here, what ggml's x86 builds write.
 *
 * Only finite numbers are taken: a NaN or an infinity among the weights is an
 * error naming it, and so is a number that would round to infinity in f16 or
 * bf16. A block's d may still overflow f16 (from max |x| >= 127 * 65520 in
 * q8_0, 8 * 65520 in q4_0) and is then inf, as in ggml.
 *
 * The 16-bit conversions are integer work on the bits, and float products
 * and differences that are exact and never subnormal (for subnormal
 * halves), so they depend neither on the rounding mode nor on the
 * flush-to-zero and denormals-are-zero modes a program built with
 * -ffast-math runs in; the blocks' d and q are ggml's float operations and
 * do, but the modes only where d is below 2^-126 (its f16 is 0 then: the
 * weights are 0 either way). This file calls no other file of the runtime
 * but util.c's error message, so that any of them may call it. */
#include "internal.h"

#include <math.h>
#include <string.h>

typedef struct Format {
	const char *name;
	int block;   /* elements per block */
	int bytes;   /* bytes per block */
} Format;

static const Format formats[] = {
	[NESTRT_FMT_F32] = {"f32", 1, 4},
	[NESTRT_FMT_BF16] = {"bf16", 1, 2},
	[NESTRT_FMT_F16] = {"f16", 1, 2},
	[NESTRT_FMT_Q8_0] = {"q8_0", 32, 34},
	[NESTRT_FMT_Q4_0] = {"q4_0", 32, 18},
	[NESTRT_FMT_Q4_K] = {"q4_k", 256, 144},
	[NESTRT_FMT_Q6_K] = {"q6_k", 256, 210},
};
#define NFORMATS ((int)(sizeof formats / sizeof formats[0]))

static const Format *format(int fmt)
{
	return fmt >= 0 && fmt < NFORMATS ? &formats[fmt] : NULL;
}

const char *nestrt_format_name(int fmt)
{
	const Format *f = format(fmt);
	return f ? f->name : NULL;
}

int nestrt_format_parse(const char *name)
{
	for (int i = 0; name && i < NFORMATS; i++)
		if (strcmp(name, formats[i].name) == 0)
			return i;
	return -1;
}

int nestrt_format_block(int fmt)
{
	const Format *f = format(fmt);
	return f ? f->block : 0;
}

int nestrt_format_block_bytes(int fmt)
{
	const Format *f = format(fmt);
	return f ? f->bytes : 0;
}

size_t nestrt_format_bytes(int fmt, int64_t n)
{
	const Format *f = format(fmt);
	if (!f || n < 0 || n % f->block)
		return 0;
	uint64_t blocks = (uint64_t)(n / f->block);
	if (blocks > SIZE_MAX / (uint64_t)f->bytes)
		return 0;
	return (size_t)blocks * (size_t)f->bytes;
}

/* ------------------------------------------------------------ bits */

static inline uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* |f| as bits, signed: compared as int32, for SSE2's signed compares. For
 * numbers that are not NaNs, the order of these is the order of the |f|. */
static inline int32_t mag(float f)
{
	return (int32_t)(bits(f) & 0x7fffffffu);
}

/* f32 to f16 bits, round to nearest, ties to even, for |f| below 65520
 * (finite, and not rounding to inf), without a branch, so that loops of it
 * vectorise. A normal half (2^-14 and up) is the bits rebiased (127 - 15 =
 * 112) and cut to 10 of 23, adding 0xfff and the lowest kept bit first: that
 * carries exactly past half-way, and at it when the kept bit is odd (a carry
 * into the exponent is right). A subnormal one is |f| * 2^24 (exact: a power
 * of two, and no result below 2^-125) rounded to an integer, which its exact
 * fraction decides. */
static inline uint16_t f16_finite(float f)
{
	uint32_t u = bits(f), s = u >> 16 & 0x8000u, a = u & 0x7fffffffu;
	uint32_t hn = (a - 0x38000000u + 0xfffu + (a >> 13 & 1u)) >> 13;
	float w = from_bits(a < 0x38800000u ? a : 0x38800000u) * 0x1p24f;
	int t = (int)w;
	float r = w - (float)t;
	uint32_t hs = (uint32_t)t + ((r > 0.5f) | ((r == 0.5f) & t));
	uint32_t normal = -(uint32_t)(a >= 0x38800000u); /* a mask, as f16_to_f32's */
	return (uint16_t)(s | (hn & normal) | (hs & ~normal));
}

/* Any float: as src/dtype.c's f32_to_f16_bits (the compiler's f16 casts)
 * bit for bit, NaNs included. 65520 and up (the tie between 65504 and 2^16
 * goes to the even one) become inf. */
static inline uint16_t f16_any(float f)
{
	uint32_t u = bits(f), s = u >> 16 & 0x8000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u) {
		/* a NaN keeps its payload's top bits, and stays a NaN when they are all 0 */
		uint32_t h = 0x7c00u | (a & 0x7fffffu) >> 13;
		return (uint16_t)(s | (h == 0x7c00u ? h + 1 : h));
	}
	if (a >= 0x477ff000u)
		return (uint16_t)(s | 0x7c00u);
	return f16_finite(f);
}

uint16_t nestrt__f32_to_f16(float f)
{
	return f16_any(f);
}

/* The same for bfloat16 (the upper half of the bits), as src/dtype.c's
 * f32_to_bf16_bits: past the largest bfloat16 the carry gives inf. */
static inline uint16_t bf16_finite(float f)
{
	uint32_t u = bits(f);
	return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

uint16_t nestrt__f32_to_bf16(float f)
{
	uint32_t u = bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)(u >> 16 | 0x40u); /* quiet, a NaN even when its payload is in the low half */
	return bf16_finite(f);
}

/* binary16 bits as a float, exactly. A subnormal is its integer times 2^-24
 * (both exact, and the product a normal float). Selected with masks: GCC
 * will not vectorise a select it would have to compute a float operation
 * (which may trap) for. */
static inline float f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 31u, m = h & 1023u;
	uint32_t sub = bits((float)m * 0x1p-24f);
	uint32_t norm = (e + 112) << 23 | m << 13 | (e == 31) * 0x7f800000u;
	uint32_t zero = -(uint32_t)(e == 0);
	return from_bits(s | (norm & ~zero) | (sub & zero));
}

static inline float bf16_to_f32(uint16_t h)
{
	return from_bits((uint32_t)h << 16);
}

static inline uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline void put16(unsigned char *p, uint16_t h)
{
	p[0] = (unsigned char)h;
	p[1] = (unsigned char)(h >> 8);
}

/* ------------------------------------------------------------ checks */

/* |x| in bits above which a format has no finite value for x: inf and NaN
 * for all of them, and f16's and bf16's rounding to inf (at 65520, and at
 * the float 0x7f7f8000, 3.39617753e38). */
static int32_t limit_bits(int fmt)
{
	return fmt == NESTRT_FMT_F16 ? 0x477fefff : fmt == NESTRT_FMT_BF16 ? 0x7f7f7fff : 0x7f7fffff;
}

/* 0 when every element of x[0..n) has a value in fmt; else -1 naming the
 * first that has none, as element at + i: a pass that vectorises, and a
 * second only when it found one. */
static int check(int fmt, const float *x, int64_t n, int64_t at, nestrt_error *err)
{
	const int32_t lim = limit_bits(fmt);
	int over = 0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) /* a fixed count, which -O2 vectorises */
		for (int j = 0; j < 32; j++)
			over |= mag(x[i + j]) > lim;
	for (; i < n; i++)
		over |= mag(x[i]) > lim;
	if (!over)
		return 0;
	i = 0;
	while (mag(x[i]) <= lim)
		i++;
	const char *name = formats[fmt].name;
	if (!isfinite(x[i]))
		return nestrt__seterr(err, "element %lld is %g: %s weights must be finite numbers", (long long)(at + i),
		                      (double)x[i], name);
	return nestrt__seterr(err, "element %lld is %.9g, beyond %s's range (|x| >= %.9g rounds to inf)",
	                      (long long)(at + i), (double)x[i], name, (double)from_bits((uint32_t)lim + 1));
}

/* ------------------------------------------------------------ blocks */

/* max |x| of a block, as mag's bits (an integer max vectorises; a float
 * one needs -ffinite-math-only). */
static int32_t amax_bits(const float *x)
{
	int32_t m = 0;
	for (int j = 0; j < 32; j++) {
		int32_t a = mag(x[j]);
		m = a > m ? a : m;
	}
	return m;
}

/* roundf (halves away from zero) for |v| < 2^31: the fraction v - trunc(v)
 * is exact, so comparing it with 1/2 decides. */
static inline int round_away(float v)
{
	int t = (int)v;
	float r = v - (float)t;
	return t + (r >= 0.5f) - (r <= -0.5f);
}

/* Each x * id here is within 127 (1 + 2^-21) of 0 (id is finite, so d is at
 * least 2^-128 and has 22 significant bits or more), and so in int8 range. */
static void q8_0_block(const float *restrict x, unsigned char *restrict y)
{
	const float amax = from_bits((uint32_t)amax_bits(x));
	const float d = amax / 127;
	const float id = d != 0 ? 1.0f / d : 0.0f;
	put16(y, f16_any(d));
	if (isinf(id)) {
		memset(y + 2, 0, 32);
		return;
	}
	for (int j = 0; j < 32; j++) {
		const float v = x[j] * id;
		y[2 + j] = (unsigned char)(int8_t)round_away(v);
	}
}

/* x * id is within 8 (1 + 2^-21) of 0, so x * id + 8.5 is in [0.49, 16.6]
 * and its truncation in [0, 16]. The product and the sum are rounded
 * apart, as ggml's two statements are (C11 mode: no contraction to fma). */
static void q4_0_block(const float *restrict x, unsigned char *restrict y)
{
	const int32_t am = amax_bits(x);
	float m = 0.0f; /* ggml's start: an all-zero block has m = +0, so d = -0 */
	if (am) {
		int j = 0;
		while (mag(x[j]) != am)
			j++;
		m = x[j];
	}
	const float d = m / -8;
	const float id = d != 0 ? 1.0f / d : 0.0f;
	put16(y, f16_any(d));
	if (isinf(id)) {
		memset(y + 2, 0, 16);
		return;
	}
	for (int j = 0; j < 16; j++) {
		const float v0 = x[j] * id, v1 = x[j + 16] * id;
		const int q0 = (int)(v0 + 8.5f), q1 = (int)(v1 + 8.5f);
		y[2 + j] = (unsigned char)((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
	}
}

/* ------------------------------------------------------------ k-quants */

/* ggml's k-quants (ggml-common.h), super-blocks of 256 quantized as ggml's
 * reference quantizers do it (quantize_row_q4_K_ref, quantize_row_q6_K_ref,
 * no importance matrix), operation for operation in float:
 *   q4_k, 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins (8
 *     each, nestrt__scale_min_k4), 128 bytes of nibbles: bytes 32c..32c+31
 *     hold elements 64c + l (low nibble) and 64c + 32 + l (high). Element i
 *     of sub-block j (32 long) means d * sc[j] * q - dmin * m[j].
 *   q6_k, 210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8
 *     scales (one per 16 elements), f16 d last; d * sc * (q - 32). */

/* nearest, ties to even, for |f| <= 4194303 (ggml's nearest_int) */
static inline int nearest(float f)
{
	float v = f + 12582912.f;
	return (int)(bits(v) & 0x007fffff) - 0x00400000;
}

/* sub-block j's 6-bit scale and min out of a q4_k block's 12 bytes */
void nestrt__scale_min_k4(int j, const unsigned char *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
		*m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
	}
}

#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))

/* ggml's make_qkx2_quants: a scale and a min (returned in *the_min, as a
 * positive number to subtract) for n values into 0..nmax, the weighted
 * squared error least over nstep + 1 trial scales. */
static float qkx2(int n, int nmax, const float *restrict x, const float *restrict w, unsigned char *restrict L,
                  float *the_min, float rmin, float rdelta, int nstep)
{
	unsigned char aux[32];
	float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*the_min = -min;
		return 0.f;
	}
	float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
	for (int i = 0; i < n; i++) {
		int l = nearest(iscale * (x[i] - min));
		L[i] = (unsigned char)CLAMP(l, 0, nmax);
		float diff = scale * L[i] + min - x[i];
		best += w[i] * (diff * diff);
	}
	for (int is = 0; is <= nstep; is++) {
		iscale = (rmin + rdelta * is + nmax) / (max - min);
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;
		for (int i = 0; i < n; i++) {
			int l = nearest(iscale * (x[i] - min));
			l = CLAMP(l, 0, nmax);
			aux[i] = (unsigned char)l;
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;
		if (D > 0) {
			float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
			float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
			if (this_min > 0) {
				this_min = 0;
				this_scale = sum_xl / sum_l2;
			}
			float err = 0;
			for (int i = 0; i < n; i++) {
				float diff = this_scale * aux[i] + this_min - x[i];
				err += w[i] * (diff * diff);
			}
			if (err < best) {
				memcpy(L, aux, (size_t)n);
				best = err;
				scale = this_scale;
				min = this_min;
			}
		}
	}
	*the_min = -min;
	return scale;
}

static void q4_k_block(const float *restrict x, unsigned char *restrict y)
{
	unsigned char L[256];
	float w[32], mins[8], scales[8], max_scale = 0, max_min = 0;
	for (int j = 0; j < 8; j++) {
		float sum_x2 = 0;
		for (int l = 0; l < 32; l++)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		float av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; l++)
			w[l] = av_x + fabsf(x[32 * j + l]);
		scales[j] = qkx2(32, 15, x + 32 * j, w, L + 32 * j, &mins[j], -1.f, 0.1f, 20);
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
	unsigned char *sc = y + 4;
	memset(sc, 0, 12);
	for (int j = 0; j < 8; j++) {
		/* ggml stores these through uint8_t: the int's low byte */
		unsigned ls = (unsigned char)nearest(inv_scale * scales[j]), lm = (unsigned char)nearest(inv_min * mins[j]);
		ls = ls < 63 ? ls : 63;
		lm = lm < 63 ? lm : 63;
		if (j < 4) {
			sc[j] = (unsigned char)ls;
			sc[j + 4] = (unsigned char)lm;
		} else {
			sc[j + 4] = (unsigned char)((ls & 15) | (lm & 15) << 4);
			sc[j - 4] |= (unsigned char)((ls >> 4) << 6);
			sc[j] |= (unsigned char)((lm >> 4) << 6);
		}
	}
	put16(y, f16_any(max_scale / 63.f));
	put16(y + 2, f16_any(max_min / 63.f));
	const float d = f16_to_f32(le16(y)), dmin = f16_to_f32(le16(y + 2));
	for (int j = 0; j < 8; j++) {
		int s, m;
		nestrt__scale_min_k4(j, sc, &s, &m);
		const float dj = d * s;
		if (!dj)
			continue;
		const float dm = dmin * m;
		for (int i = 0; i < 32; i++) {
			int l = nearest((x[32 * j + i] + dm) / dj);
			L[32 * j + i] = (unsigned char)CLAMP(l, 0, 15);
		}
	}
	unsigned char *q = y + 16;
	for (int j = 0; j < 256; j += 64, q += 32)
		for (int l = 0; l < 32; l++)
			q[l] = (unsigned char)(L[j + l] | L[j + l + 32] << 4);
}

/* ggml's make_qx_quants with rmse_type 1 and no importance weights: a
 * scale for n values into -nmax..nmax-1 (stored plus nmax in L), the
 * x^2-weighted error least over 19 trial scales. */
static float qx(int n, int nmax, const float *restrict x, signed char *restrict L)
{
	float max = 0, amax = 0;
	for (int i = 0; i < n; i++) {
		float ax = fabsf(x[i]);
		if (ax > amax) {
			amax = ax;
			max = x[i];
		}
	}
	if (amax < 1e-15f) { /* ggml's GROUP_MAX_EPS: all zero */
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = -nmax / max, sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = nearest(iscale * x[i]);
		l = CLAMP(l, -nmax, nmax - 1);
		L[i] = (signed char)(l + nmax);
		float w = x[i] * x[i];
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; i++) {
			int l = nearest(iscale * x[i]);
			l = CLAMP(l, -nmax, nmax - 1);
			float w = x[i] * x[i];
			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; i++) {
				int l = nearest(iscale * x[i]);
				L[i] = (signed char)(nmax + CLAMP(l, -nmax, nmax - 1));
			}
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

static void q6_k_block(const float *restrict x, unsigned char *restrict y)
{
	signed char L[256];
	float scales[16], max_scale = 0, max_abs = 0;
	for (int ib = 0; ib < 16; ib++) {
		scales[ib] = qx(16, 32, x + 16 * ib, L + 16 * ib);
		if (fabsf(scales[ib]) > max_abs) {
			max_abs = fabsf(scales[ib]);
			max_scale = scales[ib];
		}
	}
	if (max_abs < 1e-15f) {
		memset(y, 0, 210);
		return;
	}
	float iscale = -128.f / max_scale;
	put16(y + 208, f16_any(1 / iscale));
	signed char *sc = (signed char *)(y + 192);
	for (int ib = 0; ib < 16; ib++) {
		int s = nearest(iscale * scales[ib]);
		sc[ib] = (signed char)(s < 127 ? s : 127);
	}
	const float d = f16_to_f32(le16(y + 208));
	for (int j = 0; j < 16; j++) {
		const float dj = d * sc[j];
		if (!dj)
			continue;
		for (int i = 0; i < 16; i++) {
			int l = nearest(x[16 * j + i] / dj);
			L[16 * j + i] = (signed char)(CLAMP(l, -32, 31) + 32);
		}
	}
	unsigned char *ql = y, *qh = y + 128;
	for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
		for (int l = 0; l < 32; l++) {
			const int q1 = L[j + l] & 15, q2 = L[j + l + 32] & 15, q3 = L[j + l + 64] & 15, q4 = L[j + l + 96] & 15;
			ql[l] = (unsigned char)(q1 | q3 << 4);
			ql[l + 32] = (unsigned char)(q2 | q4 << 4);
			qh[l] = (unsigned char)(L[j + l] >> 4 | (L[j + l + 32] >> 4) << 2 | (L[j + l + 64] >> 4) << 4 |
			                        (L[j + l + 96] >> 4) << 6);
		}
}

static void from_q4_k(const unsigned char *restrict x, int64_t n, float *restrict y)
{
	for (int64_t b = 0; b < n / 256; b++, x += 144) {
		const float d = f16_to_f32(le16(x)), min = f16_to_f32(le16(x + 2));
		const unsigned char *q = x + 16;
		for (int j = 0; j < 8; j += 2, q += 32) {
			int s, m;
			nestrt__scale_min_k4(j, x + 4, &s, &m);
			const float d1 = d * s, m1 = min * m;
			nestrt__scale_min_k4(j + 1, x + 4, &s, &m);
			const float d2 = d * s, m2 = min * m;
			for (int l = 0; l < 32; l++)
				*y++ = d1 * (q[l] & 15) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

static void from_q6_k(const unsigned char *restrict x, int64_t n, float *restrict y)
{
	for (int64_t b = 0; b < n / 256; b++, x += 210) {
		const float d = f16_to_f32(le16(x + 208));
		const unsigned char *ql = x, *qh = x + 128;
		const signed char *sc = (const signed char *)(x + 192);
		for (int k = 0; k < 256; k += 128, y += 128, ql += 64, qh += 32, sc += 8)
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				const int q1 = ((ql[l] & 15) | (qh[l] & 3) << 4) - 32;
				const int q2 = ((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4) - 32;
				const int q3 = ((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32;
				const int q4 = ((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4) - 32;
				y[l] = d * sc[is] * q1;
				y[l + 32] = d * sc[is + 2] * q2;
				y[l + 64] = d * sc[is + 4] * q3;
				y[l + 96] = d * sc[is + 6] * q4;
			}
	}
}

/* ------------------------------------------------------------ conversion */

/* stmt for each k in [0, n): 32 at a time, a count that -O2 vectorises (its
 * cost model takes no loop that needs a remainder), then the rest. The
 * loops below are in functions of their own with restrict pointers, for the
 * same reason: bytes may alias anything, and -O2 makes no run-time check. */
#define EACH(n, k, stmt) \
	do { \
		int64_t k##0 = 0; \
		for (; k##0 + 32 <= (n); k##0 += 32) \
			for (int k##1 = 0; k##1 < 32; k##1++) { \
				int64_t k = k##0 + k##1; \
				stmt; \
			} \
		for (int64_t k = k##0; k < (n); k++) \
			stmt; \
	} while (0)

static void to_bf16(const float *restrict x, int64_t n, unsigned char *restrict y)
{
	EACH(n, i, put16(y + 2 * i, bf16_finite(x[i])));
}

static void to_f16(const float *restrict x, int64_t n, unsigned char *restrict y)
{
	EACH(n, i, put16(y + 2 * i, f16_finite(x[i])));
}

static void widen_bf16(const uint16_t *restrict h, int64_t n, float *restrict y)
{
	EACH(n, i, y[i] = bf16_to_f32(h[i]));
}

static void widen_f16(const uint16_t *restrict h, int64_t n, float *restrict y)
{
	EACH(n, i, y[i] = f16_to_f32(h[i]));
}

static void from_bf16(const unsigned char *restrict x, int64_t n, float *restrict y)
{
	EACH(n, i, y[i] = bf16_to_f32(le16(x + 2 * i)));
}

static void from_f16(const unsigned char *restrict x, int64_t n, float *restrict y)
{
	EACH(n, i, y[i] = f16_to_f32(le16(x + 2 * i)));
}

static void from_q8_0(const unsigned char *restrict x, int64_t n, float *restrict y)
{
	for (int64_t b = 0; b < n / 32; b++, x += 34, y += 32) {
		const float d = f16_to_f32(le16(x));
		for (int j = 0; j < 32; j++)
			y[j] = (float)(int8_t)x[2 + j] * d;
	}
}

static void from_q4_0(const unsigned char *restrict x, int64_t n, float *restrict y)
{
	for (int64_t b = 0; b < n / 32; b++, x += 18, y += 32) {
		const float d = f16_to_f32(le16(x));
		for (int j = 0; j < 16; j++) {
			y[j] = (float)((x[2 + j] & 15) - 8) * d;
			y[j + 16] = (float)((x[2 + j] >> 4) - 8) * d;
		}
	}
}

/* n elements (whole blocks), checked already, into dst. */
static void convert(int fmt, const float *restrict x, int64_t n, unsigned char *restrict dst)
{
	switch (fmt) {
	case NESTRT_FMT_F32:
		memcpy(dst, x, (size_t)n * 4);
		break;
	case NESTRT_FMT_BF16:
		to_bf16(x, n, dst);
		break;
	case NESTRT_FMT_F16:
		to_f16(x, n, dst);
		break;
	case NESTRT_FMT_Q8_0:
		for (int64_t b = 0; b < n / 32; b++)
			q8_0_block(x + 32 * b, dst + 34 * b);
		break;
	case NESTRT_FMT_Q4_0:
		for (int64_t b = 0; b < n / 32; b++)
			q4_0_block(x + 32 * b, dst + 18 * b);
		break;
	case NESTRT_FMT_Q4_K:
		for (int64_t b = 0; b < n / 256; b++)
			q4_k_block(x + 256 * b, dst + 144 * b);
		break;
	case NESTRT_FMT_Q6_K:
		for (int64_t b = 0; b < n / 256; b++)
			q6_k_block(x + 256 * b, dst + 210 * b);
		break;
	}
}

/* Elements a pass checks and converts: checked while they are in the
 * cache, and the stack buffer of nestrt__quantize_half. A multiple of
 * every block. */
#define CHUNK 512

/* The checks common to both entry points: fmt and n. */
static const Format *arguments(int fmt, int64_t n, nestrt_error *err)
{
	const Format *f = format(fmt);
	if (!f) {
		nestrt__seterr(err, "unknown weight format %d", fmt);
		return NULL;
	}
	if (n < 0) {
		nestrt__seterr(err, "%lld elements: a count cannot be negative", (long long)n);
		return NULL;
	}
	if (n % f->block) {
		nestrt__seterr(err, "%lld elements is not a multiple of %s's block of %d", (long long)n, f->name, f->block);
		return NULL;
	}
	return f;
}

int nestrt_quantize(int fmt, const float *src, int64_t n, void *dst, nestrt_error *err)
{
	const Format *f = arguments(fmt, n, err);
	if (!f)
		return -1;
	unsigned char *out = dst;
	for (int64_t i = 0; i < n; i += CHUNK) {
		int64_t k = n - i < CHUNK ? n - i : CHUNK;
		if (check(fmt, src + i, k, i, err) < 0)
			return -1;
		convert(fmt, src + i, k, out + i / f->block * f->bytes);
	}
	return 0;
}

int nestrt__quantize_half(int fmt, const uint16_t *src, int src_bf16, int64_t n, void *dst, nestrt_error *err)
{
	const Format *f = arguments(fmt, n, err);
	if (!f)
		return -1;
	unsigned char *out = dst;
	float buf[CHUNK];
	for (int64_t i = 0; i < n; i += CHUNK) {
		int64_t k = n - i < CHUNK ? n - i : CHUNK;
		if (src_bf16)
			widen_bf16(src + i, k, buf);
		else
			widen_f16(src + i, k, buf);
		if (check(fmt, buf, k, i, err) < 0)
			return -1;
		convert(fmt, buf, k, out + i / f->block * f->bytes);
	}
	return 0;
}

void nestrt_dequantize(int fmt, const void *src, int64_t n, float *dst)
{
	const Format *f = format(fmt);
	if (!f || n <= 0 || n % f->block)
		return;
	switch (fmt) {
	case NESTRT_FMT_F32:
		memcpy(dst, src, (size_t)n * 4);
		break;
	case NESTRT_FMT_BF16:
		from_bf16(src, n, dst);
		break;
	case NESTRT_FMT_F16:
		from_f16(src, n, dst);
		break;
	case NESTRT_FMT_Q8_0:
		from_q8_0(src, n, dst);
		break;
	case NESTRT_FMT_Q4_0:
		from_q4_0(src, n, dst);
		break;
	case NESTRT_FMT_Q4_K:
		from_q4_k(src, n, dst);
		break;
	case NESTRT_FMT_Q6_K:
		from_q6_k(src, n, dst);
		break;
	}
}

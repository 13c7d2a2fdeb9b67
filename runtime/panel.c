/* panel.c - the panel layout of packed weights (nestrt_packed in nestrt.h):
 * the bytes of a copy, the panels of f32, f64 and weight-format matrices
 * (transposed or not, Winograd's transforms, GGUF blocks a column of a
 * panel), and the elements back in their own order. Pure functions of their
 * arguments; wpack.c makes and keeps the copies pack.c asks for. */
#include "internal.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

size_t nestrt__pack_bytes(int64_t k, int64_t n, int64_t wide, int flags)
{
	if (k <= 0 || n <= 0 || wide <= 0)
		return 0;
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	int64_t panels = n / wide + (n % wide != 0);
	int fmt = flags >> NESTRT_PACK_FMT_SHIFT;
	if (fmt) {
		/* k / block rows of `wide` blocks a panel */
		int64_t blk = nestrt_format_block(fmt), bb = nestrt_format_block_bytes(fmt);
		if (!blk || k % blk || (uint64_t)panels > SIZE_MAX / 2 / (uint64_t)bb / (uint64_t)(k / blk) / (uint64_t)wide)
			return 0;
		size_t bytes = (size_t)panels * (size_t)(k / blk) * (size_t)wide * (size_t)bb;
		return (bytes + 63) / 64 * 64;
	}
	if ((uint64_t)panels > SIZE_MAX / es / (uint64_t)k / (uint64_t)wide / 2)
		return 0;
	size_t bytes = (size_t)panels * (size_t)k * (size_t)wide * es;
	return (bytes + 63) / 64 * 64;
}

/* Bt's rows c0.. (cols of them, k long) as the columns of a panel. With
 * SSE2 through registers, 4x4 blocks of 4-byte elements and 2x2 of 8-byte
 * ones (bits moved, never converted): GPT-2's tied embedding (154 MB,
 * transposed for the LM head) took some 165 ms of a thread element by
 * element, 46 ms so. The edges go element by element. */
#if defined(__SSE2__)
static void trans_panel_4(uint32_t *panel, const uint32_t *rows, int64_t k, int64_t wide, int64_t cols)
{
	int64_t k4 = k / 4 * 4, c4 = cols / 4 * 4;
	for (int64_t i = 0; i < k4; i += 4)
		for (int64_t c = 0; c < c4; c += 4) {
			const float *r = (const float *)(rows + c * k + i);
			__m128 r0 = _mm_loadu_ps(r), r1 = _mm_loadu_ps(r + k), r2 = _mm_loadu_ps(r + 2 * k),
			       r3 = _mm_loadu_ps(r + 3 * k);
			_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
			float *d = (float *)(panel + i * wide + c);
			_mm_storeu_ps(d, r0);
			_mm_storeu_ps(d + wide, r1);
			_mm_storeu_ps(d + 2 * wide, r2);
			_mm_storeu_ps(d + 3 * wide, r3);
		}
	for (int64_t i = 0; i < k; i++)
		for (int64_t c = i < k4 ? c4 : 0; c < cols; c++)
			panel[i * wide + c] = rows[c * k + i];
}

static void trans_panel_8(uint64_t *panel, const uint64_t *rows, int64_t k, int64_t wide, int64_t cols)
{
	int64_t k2 = k / 2 * 2, c2 = cols / 2 * 2;
	for (int64_t i = 0; i < k2; i += 2)
		for (int64_t c = 0; c < c2; c += 2) {
			const double *r = (const double *)(rows + c * k + i);
			__m128d r0 = _mm_loadu_pd(r), r1 = _mm_loadu_pd(r + k);
			double *d = (double *)(panel + i * wide + c);
			_mm_storeu_pd(d, _mm_unpacklo_pd(r0, r1));
			_mm_storeu_pd(d + wide, _mm_unpackhi_pd(r0, r1));
		}
	for (int64_t i = 0; i < k; i++)
		for (int64_t c = i < k2 ? c2 : 0; c < cols; c++)
			panel[i * wide + c] = rows[c * k + i];
}
#else
/* Element by element: blocks of 16 k by every column, so that both the
 * rows read and the panel's rows written stay in L1. */
#define TRANS_PANEL(T)                                                                                         \
	static void trans_panel_##T(T *panel, const T *rows, int64_t k, int64_t wide, int64_t cols)              \
	{                                                                                                      \
		for (int64_t i0 = 0; i0 < k; i0 += 16) {                                                       \
			int64_t i1 = i0 + 16 < k ? i0 + 16 : k;                                                \
			for (int64_t c = 0; c < cols; c++) {                                                   \
				const T *row = rows + c * k;                                                   \
				for (int64_t i = i0; i < i1; i++)                                              \
					panel[i * wide + c] = row[i];                                          \
			}                                                                                      \
		}                                                                                              \
	}
TRANS_PANEL(uint32_t)
TRANS_PANEL(uint64_t)

#define trans_panel_4 trans_panel_uint32_t
#define trans_panel_8 trans_panel_uint64_t
#endif

/* Winograd's G for F(4x4, 3x3) (6x3) and F(2x2, 3x3) (4x3), as
 * codegen/conv.c's: panel p of the transforms of src [n, c, 3, 3]
 * (NESTRT_PACK_WINO, NESTRT_PACK_WINO2), computed in double. */
static const double WINO_G[6][3] = {{1.0 / 4, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
static const double WINO_G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

static void wino_panel(float *panel, const float *src, int64_t k, int64_t n, int64_t wide, int64_t p, int al)
{
	const double(*gm)[3] = al == 6 ? WINO_G : WINO_G2;
	int64_t c = k / (al * al);
	for (int64_t o = p * wide; o < n && o < (p + 1) * wide; o++)
		for (int64_t i = 0; i < c; i++) {
			const float *g = src + (o * c + i) * 9;
			double t[6][3];
			for (int a = 0; a < al; a++)
				for (int b = 0; b < 3; b++)
					t[a][b] = gm[a][0] * g[b] + gm[a][1] * g[3 + b] + gm[a][2] * g[6 + b];
			for (int a = 0; a < al; a++)
				for (int b = 0; b < al; b++) {
					double u = t[a][0] * gm[b][0] + t[a][1] * gm[b][1] + t[a][2] * gm[b][2];
					panel[((a * al + b) * c + i) * wide + (o - p * wide)] = (float)u;
				}
		}
}

/* Block b of format fmt (its bytes as a GGUF file holds them) as column c of
 * a panel's block row `row` (nestrt.h's layout: the block's f16 fields a row
 * of `wide` each, then its other bytes a row each, in the block's order; q8_0
 * and q4_0 quants in a build for dot products four of a column together,
 * NESTRT_PACK_DOT). q6_k's d, last in the file, comes first. */
void nestrt__block_to_panel(int fmt, const unsigned char *b, unsigned char *row, int64_t c, int64_t wide, int flags)
{
	int bb = nestrt_format_block_bytes(fmt);
	if (fmt == NESTRT_FMT_Q6_K) {
		memcpy(row + 2 * c, b + 208, 2);
		for (int j = 0; j < 208; j++)
			row[(2 + j) * wide + c] = b[j];
		return;
	}
	int nh = fmt == NESTRT_FMT_Q4_K ? 2 : 1; /* d (and q4_k's dmin) */
	for (int h = 0; h < nh; h++)
		memcpy(row + 2 * (h * wide + c), b + 2 * h, 2);
	unsigned char *q = row + 2 * nh * wide;
	for (int j = 0; j < bb - 2 * nh; j++)
		q[nestrt__qbyte_at(j, c, wide, flags)] = nestrt__qbyte(b[2 * nh + j], flags);
}

/* Panel p of f32 src in format fmt (nestrt.h's layout): column c of the
 * panel is column p*wide + c of B (row of Bt when trans), zeros past n.
 * Blocks of 32 rows by every column, so that the rows read stay in L1;
 * 16-bit formats a row of the panel at a time. The elements are finite
 * (checked before: nothing here can fail). */
static void format_panel(unsigned char *panel, const float *src, int64_t k, int64_t n, int64_t wide, int64_t p, int trans,
                         int flags)
{
	int fmt = flags >> NESTRT_PACK_FMT_SHIFT;
	int blk = nestrt_format_block(fmt), bb = nestrt_format_block_bytes(fmt);
	float x[256];
	unsigned char q[256];
	/* equivalent mutant [cond if (...) -> if (0)]: the block path below
	 * lays out a 16-bit format's one-element blocks the same way, only
	 * slower (an element at a time) */
	if (blk == 1) {
		for (int64_t i = 0; i < k; i++)
			for (int64_t c0 = 0; c0 < wide; c0 += 64) {
				int64_t m = wide - c0 < 64 ? wide - c0 : 64;
				for (int64_t c = 0; c < m; c++) {
					int64_t col = p * wide + c0 + c;
					x[c] = col >= n ? 0.0f : trans ? src[col * k + i] : src[i * n + col];
				}
				nestrt_quantize(fmt, x, m, panel + (size_t)(i * wide + c0) * (size_t)bb, NULL);
			}
		return;
	}
	for (int64_t kb = 0; kb < k / blk; kb++) {
		unsigned char *row = panel + (size_t)(kb * wide) * (size_t)bb;
		for (int64_t c = 0; c < wide; c++) {
			int64_t col = p * wide + c;
			for (int j = 0; j < blk; j++)
				x[j] = col >= n ? 0.0f : trans ? src[col * k + kb * blk + j] : src[(kb * blk + j) * n + col];
			nestrt_quantize(fmt, x, blk, q, NULL);
			nestrt__block_to_panel(fmt, q, row, c, wide, flags);
		}
	}
}

/* Panels p0..p1-1 of src into dst (laid out for all of them). */
void nestrt__pack_panels(void *dst, const void *src, int64_t k, int64_t n, int64_t wide, int flags, int64_t p0,
                         int64_t p1)
{
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	const char *s = src;
	int fmt = flags >> NESTRT_PACK_FMT_SHIFT;
	if (fmt) {
		size_t exact = (size_t)(k / nestrt_format_block(fmt)) * (size_t)wide * (size_t)nestrt_format_block_bytes(fmt);
		for (int64_t p = p0; p < p1; p++)
			format_panel((unsigned char *)dst + (size_t)p * exact, src, k, n, wide, p, flags & NESTRT_PACK_TRANS, flags);
		return;
	}
	for (int64_t p = p0; p < p1; p++) {
		char *panel = (char *)dst + (size_t)(p * k * wide) * es;
		int64_t cols = n - p * wide < wide ? n - p * wide : wide;
		/* equivalent mutant [cond if (...) -> if (1)]: at cols == wide the memsets zero no byte */
		if (cols < wide)
			for (int64_t i = 0; i < k; i++)
				memset(panel + (size_t)(i * wide + cols) * es, 0, (size_t)(wide - cols) * es);
		if (flags & (NESTRT_PACK_WINO | NESTRT_PACK_WINO2)) {
			wino_panel((float *)panel, src, k, n, wide, p, flags & NESTRT_PACK_WINO ? 6 : 4);
		} else if (flags & NESTRT_PACK_TRANS) {
			/* Bt[n, k]: row c of Bt is column c of the panel (bits copied) */
			const char *rows = s + (size_t)(p * wide * k) * es;
			if (es == 4)
				trans_panel_4((uint32_t *)panel, (const uint32_t *)rows, k, wide, cols);
			else
				trans_panel_8((uint64_t *)panel, (const uint64_t *)rows, k, wide, cols);
		} else {
			for (int64_t i = 0; i < k; i++)
				memcpy(panel + (size_t)(i * wide) * es, s + (size_t)(i * n + p * wide) * es, (size_t)cols * es);
		}
	}
}

/* The inverse: the k*n elements of a packed copy back in their own order
 * (restore puts a dropped weight back from it). */
void nestrt__unpack(void *dst, const void *packed, int64_t k, int64_t n, int64_t wide, int flags)
{
	size_t es = flags & NESTRT_PACK_F64 ? 8 : 4;
	const char *src = packed;
	char *d = dst;
	for (int64_t p = 0; p * wide < n; p++) {
		const char *panel = src + (size_t)(p * k * wide) * es;
		int64_t cols = n - p * wide < wide ? n - p * wide : wide;
		if (flags & NESTRT_PACK_TRANS) {
			for (int64_t c = 0; c < cols; c++)
				for (int64_t i = 0; i < k; i++)
					memcpy(d + (size_t)((p * wide + c) * k + i) * es, panel + (size_t)(i * wide + c) * es, es);
		} else {
			for (int64_t i = 0; i < k; i++)
				memcpy(d + (size_t)(i * n + p * wide) * es, panel + (size_t)(i * wide) * es, (size_t)cols * es);
		}
	}
}

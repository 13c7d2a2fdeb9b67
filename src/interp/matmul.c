/* interp/matmul.c - the interpreter's matmul: batched and broadcast like NumPy's,
 * blocked and packed for doubles, plain loops for integers; B may be read
 * transposed in place (a lazy transpose, see graph.c).
 */
#include "interp.h"

#include <stdlib.h>
#include <string.h>

/* Matmul on doubles: blocked and packed, in the classic BLIS shape. B is copied
 * in blocks of MM_KC rows x MM_NC columns into panels of MM_NR columns, A into
 * tiles of MM_MR rows, both k-major, so the micro-kernel reads both contiguously
 * and keeps an MM_MR x MM_NR tile of C in registers over a whole block of k. The
 * fixed-size inner loops are what lets the compiler vectorise them even at -O2. */
#define MM_MR 4
#define MM_NR 4
#define MM_KC 256
#define MM_NC 512

typedef struct MMBuf {
	double *ap; /* MM_KC x MM_MR */
	double *bp; /* MM_KC x MM_NC */
} MMBuf;

/* On x86-64 with glibc (ifunc), an AVX2 copy is chosen at load time where the CPU
 * has it: twice the width of the SSE2 baseline. Still no FMA, so both copies
 * compute bit-identical results. -DNESTC_NO_CLONES turns it off. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__) && !defined(NESTC_NO_CLONES)
__attribute__((target_clones("avx2", "default")))
#endif
static void mm_kernel(int64_t kc, const double *ap, const double *bp, double acc[MM_MR][MM_NR])
{
	/* spelled out so that the 16 sums live in registers */
	double c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
	double c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
	for (int64_t k = 0; k < kc; k++) {
		const double *a = ap + k * MM_MR, *b = bp + k * MM_NR;
		double b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
		double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
		c00 += a0 * b0, c01 += a0 * b1, c02 += a0 * b2, c03 += a0 * b3;
		c10 += a1 * b0, c11 += a1 * b1, c12 += a1 * b2, c13 += a1 * b3;
		c20 += a2 * b0, c21 += a2 * b1, c22 += a2 * b2, c23 += a2 * b3;
		c30 += a3 * b0, c31 += a3 * b1, c32 += a3 * b2, c33 += a3 * b3;
	}
	acc[0][0] = c00, acc[0][1] = c01, acc[0][2] = c02, acc[0][3] = c03;
	acc[1][0] = c10, acc[1][1] = c11, acc[1][2] = c12, acc[1][3] = c13;
	acc[2][0] = c20, acc[2][1] = c21, acc[2][2] = c22, acc[2][3] = c23;
	acc[3][0] = c30, acc[3][1] = c31, acc[3][2] = c32, acc[3][3] = c33;
}

/* One panel: rows k0 .. k0+kc of columns jb .. jb+NR of b, zero past column jend. */
static void mm_pack_b(const double *b, int bt, int64_t N, int64_t K, int64_t k0, int64_t kc,
                      int64_t jb, int64_t jend, double *dst)
{
	for (int64_t k = 0; k < kc; k++, dst += MM_NR)
		for (int j = 0; j < MM_NR; j++) {
			int64_t bi = bt ? (jb + j) * K + k0 + k : (k0 + k) * N + jb + j;
			dst[j] = jb + j < jend ? b[bi] : 0.0;
		}
}

/* c[M,N] = a[M,K] @ b[K,N], c zeroed by the caller; with bt, b is stored
 * transposed, as [N,K]. */
static void mm_f(int64_t M, int64_t N, int64_t K, const double *a, const double *b, int bt,
                 double *c, MMBuf *buf)
{
	if (N == 1) {
		for (int64_t i = 0; i < M; i++) {
			double s = 0;
			const double *ar = a + i * K;
			for (int64_t k = 0; k < K; k++)
				s += ar[k] * b[k];
			c[i] = s;
		}
		return;
	}
	if (M < MM_MR && bt) {
		/* a few rows: dot products of contiguous rows */
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++) {
				const double *ar = a + i * K, *bc = b + j * K;
				double s = 0;
				for (int64_t k = 0; k < K; k++)
					s += ar[k] * bc[k];
				c[i * N + j] = s;
			}
		return;
	}
	if (M < MM_MR) {
		/* a few rows: i-k-j along contiguous rows of b and c */
		for (int64_t i = 0; i < M; i++)
			for (int64_t k = 0; k < K; k++) {
				double x = a[i * K + k];
				const double *br = b + k * N;
				double *cr = c + i * N;
				for (int64_t j = 0; j < N; j++)
					cr[j] += x * br[j];
			}
		return;
	}
	if (!buf->ap) {
		buf->ap = xmalloc(MM_KC * MM_MR * sizeof(double));
		buf->bp = xmalloc(MM_KC * MM_NC * sizeof(double));
	}
	double *ap = buf->ap, *bp = buf->bp;
	for (int64_t k0 = 0; k0 < K; k0 += MM_KC) {
		int64_t kc = K - k0 < MM_KC ? K - k0 : MM_KC;
		for (int64_t j0 = 0; j0 < N; j0 += MM_NC) {
			int64_t nc = N - j0 < MM_NC ? N - j0 : MM_NC;
			/* panel p holds columns j0 + p*NR .. +NR, zero-padded past N */
			for (int64_t p = 0; p * MM_NR < nc; p++)
				mm_pack_b(b, bt, N, K, k0, kc, j0 + p * MM_NR, j0 + nc,
				          bp + p * kc * MM_NR);
			for (int64_t i0 = 0; i0 < M; i0 += MM_MR) {
				int64_t mr = M - i0 < MM_MR ? M - i0 : MM_MR;
				const double *as = a + i0 * K + k0;
				for (int64_t k = 0; k < kc; k++)
					for (int r = 0; r < MM_MR; r++)
						ap[k * MM_MR + r] = r < mr ? as[r * K + k] : 0.0;
				for (int64_t p = 0; p * MM_NR < nc; p++) {
					double acc[MM_MR][MM_NR];
					mm_kernel(kc, ap, bp + p * kc * MM_NR, acc);
					int64_t jb = j0 + p * MM_NR;
					int64_t nr = N - jb < MM_NR ? N - jb : MM_NR;
					for (int64_t r = 0; r < mr; r++)
						for (int64_t j = 0; j < nr; j++)
							c[(i0 + r) * N + jb + j] += acc[r][j];
				}
			}
		}
	}
}

static void mm_i(int64_t M, int64_t N, int64_t K, const int64_t *a, const int64_t *b, int bt,
                 int64_t *c)
{
	int64_t sk = bt ? 1 : N, sj = bt ? K : 1;
	for (int64_t i = 0; i < M; i++)
		for (int64_t k = 0; k < K; k++) {
			int64_t x = a[i * K + k];
			for (int64_t j = 0; j < N; j++)
				c[i * N + j] = wadd(c[i * N + j], wmul(x, b[k * sk + j * sj]));
		}
}

/* Batch strides of one matmul operand: its dims before the last `mat` (the matrix
 * dims, 0..2 of them) aligned right against the output's batch dims. */
static void mm_batch_strides(int rank, const int64_t *shape, int mat, int br,
                             const int64_t *bshape, int64_t matsize, int64_t *st)
{
	int tb = rank - mat;
	int64_t s = matsize;
	for (int d = br - 1; d >= 0; d--) {
		int j = d - (br - tb);
		if (j < 0) {
			st[d] = 0;
			continue;
		}
		if (shape[j] == bshape[d])
			st[d] = shape[j] == 1 ? 0 : s;
		else if (shape[j] == 1)
			st[d] = 0;
		else
			ice("interp: matmul batch dim %lld vs %lld", (long long)shape[j],
			    (long long)bshape[d]);
		s *= shape[j];
	}
}

/* With bt, B is the untransposed input of a transpose of its last two axes
 * (a lazy transpose: see lazy_transpose). */
Tensor *op_matmul(Node *n, Tensor *A, Tensor *B, int bt)
{
	int ra = A->rank, rb = B->rank, R = n->rank;
	if (ra < 1 || rb < 1 || (A->f != NULL) != (B->f != NULL) ||
	    (A->f != NULL) != is_float(n->dtype) || (bt && rb < 2))
		ice("interp: matmul %%%d: operands of rank %d and %d", n->id, ra, rb);
	int64_t bsh[MAX_RANK];
	memcpy(bsh, B->shape, sizeof bsh);
	if (bt) {
		bsh[rb - 2] = B->shape[rb - 1];
		bsh[rb - 1] = B->shape[rb - 2];
	}
	int ma = ra >= 2 ? 2 : 1, mb = rb >= 2 ? 2 : 1;
	int64_t M = ra >= 2 ? A->shape[ra - 2] : 1, K = A->shape[ra - 1];
	int64_t Kb = rb >= 2 ? bsh[rb - 2] : bsh[0], N = rb >= 2 ? bsh[rb - 1] : 1;
	int br = R - (ra >= 2) - (rb >= 2);
	if (K != Kb || br < 0 || ra - ma > br || rb - mb > br || (ra >= 2 && n->shape[br] != M) ||
	    (rb >= 2 && n->shape[R - 1] != N))
		ice("interp: matmul %%%d: shapes do not match the node", n->id);
	int64_t sa[MAX_RANK], sb[MAX_RANK], idx[MAX_RANK] = {0};
	mm_batch_strides(ra, A->shape, ma, br, n->shape, M * K, sa);
	mm_batch_strides(rb, bsh, mb, br, n->shape, K * N, sb);
	Tensor *C = new_out(n);
	MMBuf buf = {NULL, NULL};
	int64_t nb = 1, aoff = 0, boff = 0;
	for (int d = 0; d < br; d++)
		nb *= n->shape[d];
	for (int64_t bi = 0; bi < nb; bi++) {
		if (C->f)
			mm_f(M, N, K, A->f + aoff, B->f + boff, bt, C->f + bi * M * N, &buf);
		else
			mm_i(M, N, K, A->i + aoff, B->i + boff, bt, C->i + bi * M * N);
		for (int d = br - 1; d >= 0; d--) {
			idx[d]++;
			aoff += sa[d];
			boff += sb[d];
			if (idx[d] < n->shape[d])
				break;
			aoff -= sa[d] * n->shape[d];
			boff -= sb[d] * n->shape[d];
			idx[d] = 0;
		}
	}
	free(buf.ap);
	free(buf.bp);
	fix_dtype(C);
	return C;
}

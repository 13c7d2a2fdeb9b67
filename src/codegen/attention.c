/* attention.c - softmax(q @ k ...) @ v a matrix of the batch at a time.
 *
 * As three kernels, the scores of every head (a [B, H, S, S] tensor, 3.7 MB
 * for ViT-B's 197 tokens) went out to memory after q @ k, came back for the
 * softmax, went out again and came back for the product with v, with the
 * pool's tasks waiting for each other between the three. Here one task of
 * the pool takes a matrix of the batch (a head) through all three: q @ k
 * with its fused epilogue (scale, mask) into a buffer of the task's, the
 * softmax of its rows into a second one (separate, so that the softmax's
 * loops vectorise without overlap checks failing), then the product with v
 * into the result. A head's scores stay in L2. The kernels are the usual
 * ones (matmul.c, reduce.c) over pointers moved so that the global offsets
 * they compute land in the buffers. The three run where the second matmul
 * stood (plan.c keeps q, k and v alive until then): ops between them in the
 * graph (a scale's constant) may write storage that the first one's
 * position would have given to the result. */
#include "gen.h"

/* The tiles' packing buffers of matmul n over K: a panel (K rows) and a
 * partial panel's tiles (MM_PART_ROWS rows at most), in elements; panels are at most three
 * vectors wide (matmul.c, mm_shape). */
static void attn_bufs(Gen *G, Node *n, int64_t K, int64_t *panel, int64_t *part)
{
	int64_t M = n->shape[n->rank - 2] < MM_PART_ROWS ? n->shape[n->rank - 2] : MM_PART_ROWS;
	int64_t wide = 3 * (G->vbytes / dtype_size(n->dtype)), p = K * wide, t = M * wide;
	if (p > *panel)
		*panel = p;
	if (t > *part)
		*part = t;
}

void k_attention(Fn *F, Node *pv)
{
	Gen *G = F->gen;
	Node *qk = F->g->nodes[F->plan->attn[pv->id]], *sm = pv->in[0];
	LLVMBuilderRef B = G->B;
	Node *q = qk->in[0], *kt = qk->in[1], *v = pv->in[1];
	int r = qk->rank;
	int64_t M = qk->shape[r - 2], Kd = q->shape[r - 1], N = qk->shape[r - 1], Dv = pv->shape[r - 1], nb = 1;
	for (int k = 0; k < r - 2; k++)
		nb *= qk->shape[k];
	LLVMTypeRef et = elem_t(G, qk->dtype), ept = llvm.LLVMPointerType(et, 0);
	Node *ops[8], *other[8];
	int first[8];
	int nepi = mm_epilogue(F, qk, ops, other, first);
	LLVMValueRef vals[4 + 8], got[4 + 8];
	Node *ins[4] = {q, kt, v, pv};
	for (int i = 0; i < 4; i++)
		vals[i] = llvm.LLVMBuildPtrToInt(B, nptr(F, ins[i]), G->i64, "");
	for (int i = 0; i < nepi; i++)
		vals[4 + i] = other[i] && !scalar_of_consts(other[i], 0) ? llvm.LLVMBuildPtrToInt(B, nptr(F, other[i]), G->i64, "")
		                                                      : ci64(G, 0);
	Fn T;
	Task tk = task_begin(F, &T, "attn", vals, 4 + nepi, got);
	for (int i = 0; i < 4; i++)
		T.ptr[ins[i]->id] = llvm.LLVMBuildIntToPtr(B, got[i], ept, "");
	for (int i = 0; i < nepi; i++)
		if (other[i] && !scalar_of_consts(other[i], 0))
			T.ptr[other[i]->id] = llvm.LLVMBuildIntToPtr(B, got[4 + i], llvm.LLVMPointerType(elem_t(G, other[i]->dtype), 0), "");
	/* the task's buffers, in its entry block */
	int64_t panel = 0, part = 0;
	attn_bufs(G, qk, Kd, &panel, &part);
	attn_bufs(G, pv, N, &panel, &part);
	LLVMBasicBlockRef body = llvm.LLVMGetInsertBlock(B);
	llvm.LLVMPositionBuilderBefore(B, llvm.LLVMGetLastInstruction(T.entry));
	LLVMValueRef bufs[4];
	int64_t sizes[4] = {M * N, M * N, panel, part};
	for (int i = 0; i < 4; i++) {
		bufs[i] = llvm.LLVMBuildArrayAlloca(B, et, ci64(G, sizes[i]), "attnbuf");
		llvm.LLVMSetAlignment(bufs[i], 64);
	}
	llvm.LLVMPositionBuilderAtEnd(B, body);
	Loop lt;
	LLVMValueRef t = loop_begin(&T, &lt, llvm.LLVMGetParam(tk.fn, 1), llvm.LLVMGetParam(tk.fn, 2));
	/* the scores and the probabilities of matrix t at their global offsets */
	LLVMValueRef at = imul(G, t, ci64(G, M * N)), back = llvm.LLVMBuildNeg(B, at, "");
	LLVMValueRef scores = llvm.LLVMBuildGEP2(B, et, bufs[0], &back, 1, "scores");
	LLVMValueRef probs = llvm.LLVMBuildGEP2(B, et, bufs[1], &back, 1, "probs");
	T.ptr[qk->id] = scores;
	for (int i = F->plan->epi_next[qk->id]; i >= 0; i = F->plan->epi_next[i])
		T.ptr[i] = scores;
	mm_tiled(&T, qk, q, kt, ci64(G, M), ci64(G, Kd), ci64(G, N), imul(G, t, ci64(G, M * Kd)), imul(G, t, ci64(G, Kd * N)),
	         at, 0, 0, NULL, NULL, bufs[2], bufs[3]);
	T.ptr[sm->id] = probs;
	T.par_lo = imul(G, t, ci64(G, M));
	T.par_hi = iadd(G, T.par_lo, ci64(G, M));
	k_softmax(&T, sm);
	T.par_lo = T.par_hi = NULL;
	mm_tiled(&T, pv, sm, v, ci64(G, M), ci64(G, N), ci64(G, Dv), at, imul(G, t, ci64(G, N * Dv)),
	         imul(G, t, ci64(G, M * Dv)), 0, 0, NULL, NULL, bufs[2], bufs[3]);
	loop_end(&T, &lt);
	task_end(F, &T, &tk, ci64(G, nb));
}

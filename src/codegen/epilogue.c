/* epilogue.c - a matmul's fused epilogue (plan.c: the elementwise ops that
 * follow it, a bias, a residual, an activation, a causal mask): on a tile's
 * vectors in registers, or over the rows of a stored tile. Shared by the
 * tiles of matmul.c and matmul_fmt.c and by conv.c. */
#include "gen.h"

#include <math.h>

/* The operand other than the chain's value of each op of a matmul's fused
 * epilogue (plan.c), NULL for a unary op; returns how many ops. */
int mm_epilogue(Fn *F, Node *n, Node **ops, Node **other, int *first)
{
	int k = 0;
	Node *prev = n;
	for (int e = F->plan->epi_next[n->id]; e >= 0; e = F->plan->epi_next[e]) {
		Node *x = F->g->nodes[e];
		ops[k] = x;
		/* the chain's value, or the reshape that unfolds the matmul's rows */
		Node *c = x->in[0];
		first[k] = c == prev || (c->op == OP_RESHAPE && c->in[0] == prev);
		other[k] = x->nin == 2 ? (first[k] ? x->in[1] : x->in[0]) : NULL;
		prev = x;
		k++;
	}
	return k;
}

/* A scalar of constants (plan.c), as LLVM constants fold it. */
LLVMValueRef const_scalar(Fn *F, Node *x)
{
	if (x->op == OP_CONST)
		return const_value(F->gen, x);
	if (x->nin == 1)
		return unop(F, x->op, x->dtype, const_scalar(F, x->in[0]));
	return binop(F, x->op, x->in[0]->dtype, const_scalar(F, x->in[0]), const_scalar(F, x->in[1]));
}

/* The epilogue on columns [cw, cw + ncols) of rows [r0, r0 + M), in place. */
void mm_epilogue_rows(Fn *F, Node *n, LLVMValueRef r0, LLVMValueRef M, LLVMValueRef Nn, LLVMValueRef oo,
                             LLVMValueRef cw, LLVMValueRef ncols)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *ops[8], *other[8];
	int first[8];
	int k = mm_epilogue(F, n, ops, other, first);
	if (!k)
		return;
	Loop li, lj;
	LLVMValueRef i = iadd(G, r0, loop_to(F, &li, M));
	LLVMValueRef row = elem_off(G, oo, i, Nn);
	LLVMValueRef j = loop_to(F, &lj, ncols);
	LLVMValueRef col = iadd(G, cw, j);
	LLVMValueRef off = iadd(G, row, col);
	LLVMValueRef v = load_at(F, n, off);
	for (int e = 0; e < k; e++) {
		Node *x = ops[e], *o = other[e];
		if (x->op == OP_CAUSAL_MASK) {
			/* above the diagonal of each matrix */
			LLVMValueRef above = llvm.LLVMBuildICmp(B, LLVMIntSGT, col, iadd(G, i, attrv(F, x, 0)), "");
			v = llvm.LLVMBuildSelect(B, above, fconst(G, x->dtype, -INFINITY), v, "");
		} else if (!o) {
			v = unop(F, x->op, x->dtype, v);
		} else {
			LLVMValueRef at = o->rank == 0 ? ci64(G, 0) : o->rank == 1 || (o->rank == 2 && o->shape[0] == 1) ? col : off;
			LLVMValueRef ov = scalar_of_consts(o, 0) ? const_scalar(F, o) : load_at(F, o, at);
			v = first[e] ? binop(F, x->op, x->dtype, v, ov) : binop(F, x->op, x->dtype, ov, v);
		}
	}
	store_at(F, n, off, v);
	loop_end(F, &lj);
	loop_end(F, &li);
}

/* Can the fused epilogue run on a tile's vectors in registers, before they
 * are stored? Floats, and ops that take vectors as they are: +, -, *, /,
 * max, min, relu, negation and f32 GELU (a bias, batch norm's scale and
 * shift, a residual, a transformer's MLP). Others (a causal mask, tanh)
 * run over the stored tile (mm_epilogue_rows). Storing a tile, reading it back and storing it again
 * took about a thirtieth of a linear's time (ViT-B/16's, with a bias). */
int mm_epi_in_regs(Fn *F, Node *n)
{
	Node *ops[8], *other[8];
	int first[8];
	int k = mm_epilogue(F, n, ops, other, first);
	if (!dtype_is_float(n->dtype))
		return 0;
	for (int e = 0; e < k; e++) {
		Op op = ops[e]->op;
		int gelu = (op == OP_GELU || op == OP_GELU_TANH) && n->dtype == DT_F32;
		if (other[e] ? op != OP_ADD && op != OP_SUB && op != OP_MUL && op != OP_DIV && op != OP_MAX && op != OP_MIN
		             : op != OP_RELU && op != OP_NEG && !gelu)
			return 0;
	}
	return 1;
}

/* The epilogue on vector v of the result at element off, columns col.. (as
 * mm_epilogue_rows on its elements) */
LLVMValueRef mm_epi_vec(Fn *F, Node *n, LLVMValueRef v, int vw, LLVMValueRef off, LLVMValueRef col)
{
	Gen *G = F->gen;
	LLVMBuilderRef B = G->B;
	Node *ops[8], *other[8];
	int first[8];
	int k = mm_epilogue(F, n, ops, other, first);
	LLVMTypeRef vt = llvm.LLVMTypeOf(v), vpt = llvm.LLVMPointerType(vt, 0);
	for (int e = 0; e < k; e++) {
		Node *x = ops[e], *o = other[e];
		if (!o) {
			if (x->op == OP_NEG) {
				v = llvm.LLVMBuildFNeg(B, v, "");
			} else if (x->op == OP_GELU || x->op == OP_GELU_TANH) {
				v = gelu_f32(G, v, vw, x->op == OP_GELU_TANH);
			} else { /* relu: max(x, 0) that keeps NaN */
				LLVMValueRef z = llvm.LLVMConstNull(vt);
				v = llvm.LLVMBuildSelect(B, llvm.LLVMBuildFCmp(B, LLVMRealOLT, v, z, ""), z, v, "");
			}
			continue;
		}
		LLVMValueRef ov;
		if (scalar_of_consts(o, 0)) {
			ov = splat(G, vt, vw, const_scalar(F, o));
		} else if (o->rank == 0) {
			ov = splat(G, vt, vw, load_at(F, o, ci64(G, 0)));
		} else {
			LLVMValueRef at = o->rank == 1 || (o->rank == 2 && o->shape[0] == 1) ? col : off;
			ov = llvm.LLVMBuildLoad2(B, vt, llvm.LLVMBuildPointerCast(B, llvm.LLVMBuildGEP2(B, elem_t(G, o->dtype), nptr(F, o), &at, 1, ""), vpt, ""), "");
			llvm.LLVMSetAlignment(ov, (unsigned)dtype_size(o->dtype));
		}
		v = first[e] ? binop(F, x->op, x->dtype, v, ov) : binop(F, x->op, x->dtype, ov, v);
	}
	return v;
}

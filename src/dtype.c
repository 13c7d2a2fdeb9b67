/* dtype.c - the element types of tensors (DType): names, sizes, float or not.
 * Below both the AST and the IR, and everything that reads or writes tensors. */
#include "nestc.h"

#include <string.h>

static const char *dtype_names[DT_COUNT] = {"bool", "i32", "i64", "f32", "f64"};
static const int dtype_sizes[DT_COUNT] = {1, 4, 8, 4, 8};

const char *dtype_name(DType t)
{
	if ((int)t < 0 || t >= DT_COUNT)
		ice("dtype_name: bad dtype %d", (int)t);
	return dtype_names[t];
}

int dtype_size(DType t)
{
	if ((int)t < 0 || t >= DT_COUNT)
		ice("dtype_size: bad dtype %d", (int)t);
	return dtype_sizes[t];
}

int dtype_is_float(DType t)
{
	return t == DT_F32 || t == DT_F64;
}

/* The bfloat16 nearest to v, ties to even (the upper half of its binary32
 * bits), as a float; NaN stays NaN. Past the largest bfloat16 the carry
 * reaches the exponent and gives inf, as IEEE rounding does. */
float round_bf16(float v)
{
	if (v != v)
		return v;
	uint32_t u;
	memcpy(&u, &v, sizeof u);
	u = (u + 0x7fffu + (u >> 16 & 1u)) & 0xffff0000u;
	memcpy(&v, &u, sizeof v);
	return v;
}

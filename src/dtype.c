/* dtype.c - the element types of tensors (DType): names, sizes, float or not,
 * and the rounding of the 16-bit floats.
 * Below both the AST and the IR, and everything that reads or writes tensors. */
#include "nestc.h"

#include <string.h>

static const char *dtype_names[DT_COUNT] = {"bool", "i32", "i64", "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "u16"};
static const int dtype_sizes[DT_COUNT] = {1, 4, 8, 4, 8, 2, 2, 1, 1, 2, 2};

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
	return t == DT_F32 || t == DT_F64 || t == DT_F16 || t == DT_BF16;
}

int dtype_is_storage(DType t)
{
	return t >= DT_F16 && t <= DT_U16;
}

DType dtype_compute(DType t)
{
	if (t == DT_F16 || t == DT_BF16)
		return DT_F32;
	if (dtype_is_storage(t))
		return DT_I32;
	return t;
}

void dtype_int_range(DType t, int64_t *lo, int64_t *hi)
{
	switch (t) {
	case DT_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
	case DT_U8: *lo = 0; *hi = UINT8_MAX; break;
	case DT_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
	case DT_U16: *lo = 0; *hi = UINT16_MAX; break;
	case DT_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
	case DT_BOOL: *lo = 0; *hi = 1; break;
	default: *lo = INT64_MIN; *hi = INT64_MAX; break;
	}
}

int64_t dtype_wrap(DType t, int64_t v)
{
	uint64_t u = (uint64_t)v;
	switch (t) {
	case DT_I8: return (int8_t)(uint8_t)u;
	case DT_U8: return (uint8_t)u;
	case DT_I16: return (int16_t)(uint16_t)u;
	case DT_U16: return (uint16_t)u;
	case DT_I32: return (int32_t)(uint32_t)u;
	case DT_BOOL: return v != 0;
	default: return v;
	}
}

uint16_t f32_to_bf16_bits(float v)
{
	uint32_t u;
	memcpy(&u, &v, sizeof u);
	if (v != v)
		return (uint16_t)(u >> 16 | 0x40); /* stays a NaN (quiet) even when its payload is in the low half */
	return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

float bf16_bits_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float v;
	memcpy(&v, &u, sizeof v);
	return v;
}

/* The bfloat16 nearest to v, ties to even (the upper half of its binary32
 * bits), as a float; NaN stays NaN. Past the largest bfloat16 the carry
 * reaches the exponent and gives inf, as IEEE rounding does. */
float round_bf16(float v)
{
	if (v != v)
		return v;
	return bf16_bits_to_f32(f32_to_bf16_bits(v));
}

/* binary32 -> binary16, round to nearest even, as NumPy's npy_floatbits_to_halfbits. */
uint16_t f32_to_f16_bits(float v)
{
	uint32_t f;
	memcpy(&f, &v, sizeof f);
	uint32_t sign = (f >> 16) & 0x8000u, e = f & 0x7f800000u, m;
	if (e >= 0x47800000u) { /* overflow, inf or NaN */
		if (e == 0x7f800000u && (f & 0x007fffffu)) {
			uint16_t r = (uint16_t)(0x7c00u + ((f & 0x007fffffu) >> 13));
			if (r == 0x7c00u)
				r++; /* a NaN whose payload is in the low bits stays a NaN */
			return (uint16_t)(sign + r);
		}
		return (uint16_t)(sign + 0x7c00u);
	}
	if (e <= 0x38000000u) { /* subnormal or zero */
		if (e < 0x33000000u)
			return (uint16_t)sign;
		e >>= 23;
		m = 0x00800000u + (f & 0x007fffffu);
		/* the bits shifted out decide: above half, or half and odd, round up */
		uint32_t shift = 126 - e, lost = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		m >>= shift;
		if (lost > half || (lost == half && (m & 1u)))
			m++;
		return (uint16_t)(sign + m);
	}
	e -= 0x38000000u;
	m = f & 0x007fffffu;
	uint32_t h = (e >> 13) + (m >> 13), lost = m & 0x1fffu;
	if (lost > 0x1000u || (lost == 0x1000u && (h & 1u)))
		h++; /* a carry into the exponent is right, up to inf */
	return (uint16_t)(sign + h);
}

float f16_bits_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu, u;
	if (e == 0x1f) {
		u = sign | 0x7f800000u | m << 13;
	} else if (e == 0) {
		if (!m) {
			u = sign;
		} else {
			/* subnormal: normalise */
			e = 113;
			while (!(m & 0x400u)) {
				m <<= 1;
				e--;
			}
			u = sign | e << 23 | (m & 0x3ffu) << 13;
		}
	} else {
		u = sign | (e + 112) << 23 | m << 13;
	}
	float v;
	memcpy(&v, &u, sizeof v);
	return v;
}

float round_f16(float v)
{
	return f16_bits_to_f32(f32_to_f16_bits(v));
}

/* util.c - error messages, dtype names. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int nestrt__seterr(nestrt_error *err, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	/* One line, always: a reason never carries a newline from a file. */
	for (char *p = err->message; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return -1;
}

void nestrt__type_text(char *buf, size_t len, const char *lower, int rank, const int64_t *shape)
{
	size_t k = (size_t)snprintf(buf, len, "%s[", lower);
	for (int i = 0; i < rank && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (k < len)
		snprintf(buf + k, len - k, "]");
}

const char *nestrt__shown(char buf[NESTRT__SHOWN], const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (k >= NESTRT__SHOWN - 8 && ((c & 0xc0) != 0x80 || k >= NESTRT__SHOWN - 4)) {
			memcpy(buf + k, "...", 4);
			return buf;
		}
		buf[k++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	buf[k] = 0;
	return buf;
}

static const char *const dtype_names[NESTRT_NDTYPES] = {"bool", "i32", "i64", "f32", "f64", "f16", "bf16",
                                                        "i8",   "u8",  "i16", "u16"};
static const size_t dtype_sizes[NESTRT_NDTYPES] = {1, 4, 8, 4, 8, 2, 2, 1, 1, 2, 2};

const char *nestrt_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < NESTRT_NDTYPES ? dtype_names[dtype] : "?";
}

size_t nestrt_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < NESTRT_NDTYPES ? dtype_sizes[dtype] : 0;
}

int nestrt__tensor_cmp(const void *a, const void *b)
{
	return strcmp(((const nestrt__tensor *)a)->name, ((const nestrt__tensor *)b)->name);
}

int nestrt__span_cmp(const void *a, const void *b)
{
	const nestrt__span *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* (gguf.c and weights.c read files and find tensors so: below both) */
int nestrt__pread_all(int fd, void *dst, size_t len, uint64_t off)
{
	unsigned char *d = dst;
	while (len > 0) {
		ssize_t r = pread(fd, d, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : -1;
		d += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

nestrt__tensor *nestrt__weights_find(nestrt_weights *w, const char *name)
{
	if (!w->n)
		return NULL;
	nestrt__tensor key = {.name = (char *)name};
	return bsearch(&key, w->t, w->n, sizeof *w->t, nestrt__tensor_cmp);
}

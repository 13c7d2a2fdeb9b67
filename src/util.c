/* util.c - allocation wrappers, the arena, string buffers, hashing, atomic writes. */
#include "nestc.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Out of memory is the input's fault (a model, weights or inputs too large
 * for this machine), not a crash: exit status 1 with the size asked for. */
static _Noreturn void oom(size_t n)
{
	fprintf(stderr, "nestc: error: out of memory (%zu bytes)\n", n);
	_exit(1); /* not exit(): code generator threads may be inside LLVM */
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p) {
		size_t total;
		oom(__builtin_mul_overflow(n, size, &total) ? SIZE_MAX : total);
	}
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

_Noreturn void ice(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("nestc: internal compiler error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n(this is a bug in nestc; please report it with the input that caused it)\n", stderr);
	va_end(ap);
	abort();
}

/* Arena: a list of blocks; large requests get a block of their own. */
struct ArenaBlock {
	ArenaBlock *next;
	size_t used, cap;
	max_align_t data[];
};

#define ARENA_BLOCK (64 * 1024)

void *arena_alloc(Arena *a, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	ArenaBlock *b = a->head;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
		b = xmalloc(sizeof(ArenaBlock) + cap);
		b->used = 0;
		b->cap = cap;
		if (a->head && n > ARENA_BLOCK) {
			/* keep the current block in front: it still has room */
			b->next = a->head->next;
			a->head->next = b;
		} else {
			b->next = a->head;
			a->head = b;
		}
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	memset(p, 0, n);
	return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *arena_strdup(Arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = arena_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

void arena_free(Arena *a)
{
	ArenaBlock *b = a->head;
	while (b) {
		ArenaBlock *next = b->next;
		free(b);
		b = next;
	}
	a->head = NULL;
}

void buf_putc(Buf *b, char c)
{
	if (b->len + 2 > b->cap) {
		b->cap = b->cap ? b->cap * 2 : 64;
		b->s = xrealloc(b->s, b->cap);
	}
	b->s[b->len++] = c;
	b->s[b->len] = 0;
}

void buf_puts(Buf *b, const char *s)
{
	size_t n = strlen(s);
	if (b->len + n + 1 > b->cap) {
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap ? b->cap * 2 : 64;
		b->s = xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

void buf_printf(Buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (b->len + (size_t)n + 1 > b->cap) {
		while (b->len + (size_t)n + 1 > b->cap)
			b->cap = b->cap ? b->cap * 2 : 64;
		b->s = xrealloc(b->s, b->cap);
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void buf_free(Buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

void vec_push(Vec *v, void *p)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 8;
		v->v = xrealloc(v->v, (size_t)v->cap * sizeof(void *));
	}
	v->v[v->n++] = p;
}

void avec_push(Arena *a, Vec *v, void *p)
{
	if (v->n == v->cap) {
		int cap = v->cap ? v->cap * 2 : 4;
		void **nv = arena_alloc(a, (size_t)cap * sizeof(void *));
		if (v->n)
			memcpy(nv, v->v, (size_t)v->n * sizeof(void *));
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = p;
}

/* FNV-1a, 64-bit: for hash tables only, never for fingerprints. */
uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

uint64_t hash_str(const char *s)
{
	return hash_bytes(s, strlen(s), 0);
}

int write_file_atomic(const char *path, const void *data, size_t n)
{
	char *tmp = xasprintf("%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		errno = e;
		return -1;
	}
	const char *p = data;
	size_t left = n;
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		p += w;
		left -= (size_t)w;
	}
	if (fchmod(fd, 0644) < 0 || close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		fd = -1;
		goto fail;
	}
	free(tmp);
	return 0;
fail:;
	int e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	errno = e;
	return -1;
}

/* util.c - allocation wrappers, the arena, string buffers, hashing, atomic writes. */
#include "nestc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* Does the regular file at path hold exactly these bytes? Read in chunks and
 * compared as read: a changed file differs early or in its size. */
static int same_content(const char *path, const Part *parts, int n, size_t total)
{
	/* O_NONBLOCK: a FIFO is not waited for (it is not a regular file) */
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != total) {
		close(fd);
		return 0;
	}
	enum { CHUNK = 1 << 18 };
	char *buf = xmalloc(CHUNK);
	int k = 0, same = 1;
	size_t at = 0; /* into parts[k] */
	size_t left = total;
	while (left && same) {
		ssize_t r = read(fd, buf, left < CHUNK ? left : CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			same = 0;
			break;
		}
		left -= (size_t)r;
		for (size_t got = 0; got < (size_t)r && same;) {
			while (k < n && at == parts[k].n) {
				k++;
				at = 0;
			}
			size_t m = parts[k].n - at < (size_t)r - got ? parts[k].n - at : (size_t)r - got;
			same = !memcmp(buf + got, (const char *)parts[k].p + at, m);
			got += m;
			at += m;
		}
	}
	free(buf);
	close(fd);
	return same;
}

/* pg: a progress line over the bytes, written 64 MB at a time (or NULL) */
static int write_all_fd(int fd, const Part *parts, int n, Progress *pg)
{
	int64_t done = 0;
	for (int k = 0; k < n; k++) {
		const char *p = parts[k].p;
		size_t left = parts[k].n;
		while (left > 0) {
			size_t step = pg && left > ((size_t)64 << 20) ? (size_t)64 << 20 : left;
			ssize_t w = write(fd, p, step);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return -1;
			}
			p += w;
			left -= (size_t)w;
			done += w;
			if (pg)
				progress_step(pg, done, NULL);
		}
	}
	return 0;
}

/* The descriptor a path names itself (/dev/stdout, /dev/fd/2,
 * /proc/self/fd/1), or -1: written as it is, so that `>> log` appends. */
static int own_fd(const char *path)
{
	if (!strcmp(path, "/dev/stdout"))
		return 1;
	if (!strcmp(path, "/dev/stderr"))
		return 2;
	const char *num = !strncmp(path, "/dev/fd/", 8) ? path + 8 : !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
	if (!num || !*num || strspn(num, "0123456789") != strlen(num) || strlen(num) > 6)
		return -1;
	return atoi(num);
}

/* /dev and /proc are written through, never replaced by a rename: a
 * descriptor's file (/dev/stdout redirected to a file), a device, a FIFO. */
static int write_through(const char *path)
{
	struct stat st;
	return !strncmp(path, "/dev/", 5) || !strncmp(path, "/proc/", 6) ||
	       (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode));
}

static int write_parts_direct(const char *path, const Part *parts, int n)
{
	int own = own_fd(path);
	if (own >= 0)
		return write_all_fd(own, parts, n, NULL);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write_all_fd(fd, parts, n, NULL) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

int file_holds(const char *path, const void *data, size_t n)
{
	Part p = {data, n};
	return same_content(path, &p, 1, n);
}

int write_parts_atomic(const char *path, const Part *parts, int n, int *kept, Progress *pg)
{
	size_t total = 0;
	for (int k = 0; k < n; k++)
		total += parts[k].n;
	if (kept)
		*kept = 0;
	if (kept && same_content(path, parts, n, total)) {
		*kept = 1;
		return 0;
	}
	/* A device or FIFO (-o /dev/stdout) is written as it is: a rename
	 * would put a file in its place. A symbolic link to a file has the
	 * file replaced, not the link. */
	struct stat st, lst;
	if (write_through(path))
		return write_parts_direct(path, parts, n);
	char *real = NULL;
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && stat(path, &st) == 0)
		real = realpath(path, NULL);
	if (real)
		path = real;
	char *tmp = xasprintf("%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		errno = e;
		return -1;
	}
	if (write_all_fd(fd, parts, n, pg) < 0)
		goto fail;
	if (fchmod(fd, 0644) < 0 || close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		fd = -1;
		goto fail;
	}
	free(tmp);
	free(real);
	return 0;
fail:;
	int e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	free(real);
	errno = e;
	return -1;
}

int rename_into(const char *tmp, const char *path)
{
	if (write_through(path)) {
		int own = own_fd(path);
		int in = open(tmp, O_RDONLY | O_CLOEXEC), out = in < 0 ? -1 : own >= 0 ? dup(own) : open(path, O_WRONLY | O_CLOEXEC);
		int rc = in < 0 || out < 0 ? -1 : 0;
		char chunk[1 << 16];
		ssize_t r;
		while (rc == 0 && (r = read(in, chunk, sizeof chunk)) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			Part p = {chunk, r < 0 ? 0 : (size_t)r};
			if (r < 0 || write_all_fd(out, &p, 1, NULL) < 0)
				rc = -1;
		}
		int e = errno;
		if (in >= 0)
			close(in);
		if (out >= 0 && close(out) < 0 && rc == 0)
			rc = -1, e = errno;
		if (rc == 0)
			unlink(tmp);
		errno = e;
		return rc;
	}
	/* tmp lies beside path: a symbolic link is replaced (its file may be on
	 * another file system, where no rename reaches) */
	return rename(tmp, path);
}

int write_file_atomic(const char *path, const void *data, size_t n)
{
	Part p = {data, n};
	return write_parts_atomic(path, &p, 1, NULL, NULL);
}

/* ---- progress lines ---- */

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void progress_start(Progress *pg, int enabled, const char *what, int64_t total, int bytes)
{
	*pg = (Progress){.what = what, .total = total, .bytes = bytes, .on = enabled && isatty(2), .t0 = mono_s()};
}

static void amount(char *b, size_t n, int64_t v, int bytes)
{
	if (!bytes)
		snprintf(b, n, "%lld", (long long)v);
	else if (v >= (int64_t)1 << 30)
		snprintf(b, n, "%.1f GB", v / 1073741824.0);
	else
		snprintf(b, n, "%.1f MB", v / 1048576.0);
}

void progress_step(Progress *pg, int64_t done, const char *label)
{
	if (!pg->on)
		return;
	double t = mono_s(), el = t - pg->t0;
	/* quick operations show nothing; a line at most ten times a second */
	if (el < 1.0 || (t - pg->last < 0.1 && done < pg->total))
		return;
	pg->last = t;
	pg->shown = 1;
	char d[32], tot[32], eta[48] = "";
	amount(d, sizeof d, done, pg->bytes);
	amount(tot, sizeof tot, pg->total, pg->bytes);
	if (done > 0 && done < pg->total) {
		long left = (long)(el * (double)(pg->total - done) / (double)done + 0.5);
		snprintf(eta, sizeof eta, ", %ld:%02ld left", left / 60, left % 60);
	}
	fprintf(stderr, "\r%s: %s%s%s (%d%%)%s%s%s\033[K", pg->what, d, pg->bytes ? " of " : "/", tot,
	        pg->total ? (int)(100.0 * (double)done / (double)pg->total) : 100, eta, label ? "  " : "", label ? label : "");
}

void progress_end(Progress *pg)
{
	if (pg->on && pg->shown)
		fputs("\r\033[K", stderr);
	pg->shown = 0;
}

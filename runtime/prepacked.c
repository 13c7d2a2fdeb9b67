/* prepacked.c - the matrices nestc packed ahead of time (--embed-weights):
 * their copies taken in place from the program's image, or copied into
 * memory of their own when the image's pages cannot be given back. wpack.c
 * keeps the copies, and shares an embedded image's weights between the
 * program's instances. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

typedef nestrt__tensor Tensor;
typedef nestrt__wpack WPack;

/* ------------------------------------------------------------ packed by nestc */

/* The program's packed matrices copied into anonymous memory advised into
 * huge pages: read where they are linked, from the program's file-backed
 * 4 KiB pages, the products took 2 to 4 times as long on the machine of
 * issue #14 (a virtual machine, where every TLB miss walks two page
 * tables). Pieces of 2 MiB on the pool. Where the matrices are in a
 * read-only mapping of a file (the program), the pieces are read from that
 * file: the kernel copies them from the page cache, and the program's
 * 4 KiB pages are never mapped nor unmapped (GPT-2 small: 8,000 page
 * faults at creation before, 330 now). Else each piece is copied from the mapping, and the program's
 * pages it has copied are given back (they stay in the page cache), so that
 * the peak RSS is the weights once. t->data moves to the copy. */
#define COPY_PIECE ((size_t)2 << 20)
typedef struct CopyPiece {
	unsigned char *dst;
	const unsigned char *src;
	size_t len;
	uint64_t off;       /* of src in the file, when fd >= 0 */
} CopyPiece;
typedef struct CopyPieces {
	const CopyPiece *v;
	size_t pg;
	int fd;             /* the file src is mapped from (a piece it fails to give is copied), or -1 */
} CopyPieces;

static void copy_pieces(void *env, int64_t begin, int64_t end)
{
	CopyPieces *j = env;
	for (int64_t i = begin; i < end; i++) {
		const CopyPiece *c = &j->v[i];
		if (j->fd >= 0 && nestrt__pread_all(j->fd, c->dst, c->len, c->off) == 0)
			continue;
#ifdef MADV_POPULATE_READ
		/* the program's pages mapped in one call, not a fault every 64 KiB
		 * (a hint: older kernels say EINVAL);
		 * equivalent mutant [arith]: a wrong range only loses the hint
		 * (madvise fails, its result unused, or populates other pages);
		 * equivalent mutant [const]: a wrong range only loses the hint */
		uintptr_t pa = (uintptr_t)c->src / j->pg * j->pg, pe = ((uintptr_t)c->src + c->len + j->pg - 1) / j->pg * j->pg;
		/* equivalent mutant [swap arguments 2 and 3 of madvise swapped]: the
		 * range's length as the advice is refused (EINVAL), and the pages
		 * are faulted in as they are read instead: the same bytes */
		madvise((void *)pa, pe - pa, MADV_POPULATE_READ);
#endif
		memcpy(c->dst, c->src, c->len);
		uintptr_t a = ((uintptr_t)c->src + j->pg - 1) / j->pg * j->pg, e = ((uintptr_t)c->src + c->len) / j->pg * j->pg;
		if (e > a)
			madvise((void *)a, e - a, MADV_DONTNEED);
	}
}

static size_t packed_len(const nestrt_prepacked *q)
{
	size_t es = q->flags & NESTRT_PACK_F64 ? 8 : 4;
	return (size_t)((q->n + q->wide - 1) / q->wide * q->wide * q->k) * es;
}

/* The file whose read-only mapping holds every pack (/proc/self/maps: the
 * same device and inode once opened), open, and the address its offset 0
 * would have (*base); -1 when there is none (no /proc, an anonymous or
 * writable mapping, a file replaced since, packs in several mappings). Its
 * bytes are then the mapping's: a read-only private mapping shows the page
 * cache. The first bytes of each pack are compared all the same. */
static int image_file(const nestrt_prepacked *packs, int npacks, uintptr_t *base)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < npacks; i++) {
		uintptr_t a = (uintptr_t)packs[i].data, e = a + packed_len(&packs[i]);
		lo = a < lo ? a : lo;
		hi = e > hi ? e : hi;
	}
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	char line[4096 + 128];
	int fd = -1;
	while (fd < 0 && fgets(line, sizeof line, f)) {
		unsigned long start, end, off, ino;
		unsigned maj, mnr;
		char perms[8];
		/* equivalent mutant [const 0 -> 1]: a line with an inode has its
		 * path after the spaces, so %n sets at before it is used */
		int at = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &mnr, &ino, &at) != 7 ||
		    lo < start || /* equivalent mutant [cmp < -> <=]: packs at a mapping's start then come
		                    * from the mapping, not its file: the same bytes */
		    hi > end)      /* equivalent mutant [cmp > -> >=]: so do packs that end at its end */
			continue;
		char *path = line + at, *nl = strchr(path, '\n');
		if (nl)
			*nl = 0;
		if (ino == 0 || perms[1] != '-' || path[0] != '/')
			break;
		int f2 = open(path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		/* equivalent mutant [logic && -> ||]: another file at the path is
		 * refused below too, where each copy's first bytes are compared with
		 * the file's (unless it holds the same bytes there) */
		if (f2 >= 0 && fstat(f2, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino == ino && major(st.st_dev) == maj &&
		    minor(st.st_dev) == mnr) {
			fd = f2;
			*base = start - off;
		} else if (f2 >= 0) {
			close(f2);
		}
		break;
	}
	fclose(f);
	for (int i = 0; fd >= 0 && i < npacks; i++) {
		unsigned char head[64];
		size_t n = packed_len(&packs[i]) < sizeof head ? packed_len(&packs[i]) : sizeof head;
		if (nestrt__pread_all(fd, head, n, (uint64_t)((uintptr_t)packs[i].data - *base)) != 0 ||
		    memcmp(head, packs[i].data, n) != 0) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static int copy_packed(nestrt_weights *w, const nestrt_prepacked *packs, int npacks)
{
	/* equivalent mutant [const 0 -> (-1)]: a byte less of a map of whole
	 * pages, each pack a multiple of 64 bytes: the same pages */
	size_t total = 0, npieces = 0;
	for (int i = 0; i < npacks; i++) {
		total += (packed_len(&packs[i]) + 63) / 64 * 64;
		/* equivalent mutant [const 1 -> 2]: a copy's length is a multiple of 4
		 * (packed_len), never one past a multiple of COPY_PIECE */
		npieces += (packed_len(&packs[i]) + COPY_PIECE - 1) / COPY_PIECE;
	}
	if (total == 0)
		return 0;
	unsigned char *m = nestrt__map_huge(&total);
	CopyPiece *pc = m ? malloc(npieces * sizeof *pc) : NULL;
	if (!pc) {
		if (m)
			munmap(m, total);
		return -1;
	}
	w->packmem = m;
	w->packmemsize = total;
	uintptr_t base = 0; /* equivalent mutant [const]: read only when image_file found the file, which sets it */
	int fd = image_file(packs, npacks, &base);
	size_t at = 0, k = 0;
	for (int i = 0; i < npacks; i++) {
		size_t len = packed_len(&packs[i]);
		Tensor *t = nestrt__weights_find(w, packs[i].name);
		const unsigned char *src = packs[i].data;
		for (size_t o = 0; o < len; o += COPY_PIECE)
			pc[k++] = (CopyPiece){m + at + o, src + o, len - o < COPY_PIECE ? len - o : COPY_PIECE,
			                      (uint64_t)((uintptr_t)src + o - base)};
		t->data = m + at;
		at += (len + 63) / 64 * 64;
	}
	CopyPieces j = {pc, nestrt__page_size(), fd};
	nestrt_parallel_for((int64_t)k, copy_pieces, &j);
	free(pc);
	if (fd >= 0)
		close(fd);
	return 0;
}

int nestrt__weights_add_packed(nestrt_weights *w, const nestrt_param *params, int nparams,
                               const nestrt_prepacked *packs, int npacks, nestrt_error *err)
{
	if (npacks <= 0)
		return 0;
	if (!packs || w->packs)
		return nestrt__seterr(err, "%s: invalid packed weights", w->path);
	Tensor *nt = realloc(w->t, (w->n + (size_t)npacks) * sizeof *nt);
	if (!nt)
		return nestrt__seterr(err, "%s: out of memory", w->path);
	w->t = nt;
	for (int i = 0; i < npacks; i++) {
		const nestrt_prepacked *pk = &packs[i];
		const nestrt_param *p = NULL;
		for (int j = 0; j < nparams && !p; j++)
			if (pk->name && params[j].name && strcmp(params[j].name, pk->name) == 0)
				p = &params[j];
		const nestrt__stdtype *st = p ? nestrt__stdtype_of(p->dtype) : NULL;
		int64_t numel = 1;
		for (int k = 0; p && k < p->rank; k++)
			numel *= p->shape[k];
		if (!p || !st || !pk->data || pk->k <= 0 || pk->n <= 0 || pk->wide <= 0 || pk->k * pk->n != numel ||
		    (size_t)st->size != (pk->flags & NESTRT_PACK_F64 ? 8u : 4u) || nestrt__weights_find(w, pk->name))
			return nestrt__seterr(err, "%s: packed weight %d ('%s') does not fit the model", w->path, i,
			                      pk->name ? pk->name : "(null)");
		Tensor *t = &w->t[w->n];
		memset(t, 0, sizeof *t);
		if (!(t->name = strdup(pk->name)))
			return nestrt__seterr(err, "%s: out of memory", w->path);
		w->n++;
		t->st = st;
		t->rank = p->rank;
		memcpy(t->shape, p->shape, sizeof t->shape);
		t->begin = 0;
		t->end = (uint64_t)numel * (uint64_t)st->size;
		t->data = pk->data;
		t->inplace = 1;
		t->released = 1;
	}
	qsort(w->t, w->n, sizeof *w->t, nestrt__tensor_cmp);
	if (copy_packed(w, packs, npacks) < 0)
		return nestrt__seterr(err, "%s: out of memory", w->path);
	for (int i = 0; i < npacks; i++) {
		Tensor *t = nestrt__weights_find(w, packs[i].name);
		WPack *p = calloc(1, sizeof *p);
		if (!p)
			return nestrt__seterr(err, "%s: out of memory", w->path);
		/* equivalent mutant [const 0 -> 1]: bytes is read only by pack_free,
		 * for a copy not in place, and this one is (inplace 1) */
		*p = (WPack){t, packs[i].k, packs[i].n, packs[i].wide, packs[i].flags, (void *)t->data, 0, 1, w->packs};
		w->packs = p;
	}
	return 0;
}

/* cache.c - the persistent compile cache (DIR/xx/KEY.o, a header with a
 * checksum, written atomically), `nestc cache`, and the cache keys of jobs:
 * everything an object's code depends on. */
#include "gen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

/* ---- the cache: DIR/xx/KEY.o, a header with a checksum, written atomically ---- */

/* the header: magic, length, checksum, code bytes, kernels, shared kernels
 * (little-endian u64s; an entry of another version misses and is replaced) */
#define CACHE_MAGIC "NESTC-CACHE-2\n\0\0"
#define CACHE_HDR 56

static uint64_t get_u64(const char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

static void key_hex(const uint8_t key[16], char out[33])
{
	fp_hex(key, out);
}

static char *cache_path(const char *dir, const uint8_t key[16])
{
	char hex[33];
	key_hex(key, hex);
	return xasprintf("%s/%.2s/%s.o", dir, hex, hex + 2);
}

static int mkdirs(const char *path)
{
	char *p = xstrdup(path);
	for (char *c = p + 1; *c; c++)
		if (*c == '/') {
			*c = 0;
			if (mkdir(p, 0777) < 0 && errno != EEXIST) {
				free(p);
				return -1;
			}
			*c = '/';
		}
	int r = mkdir(p, 0777) < 0 && errno != EEXIST ? -1 : 0;
	free(p);
	return r;
}

/* 1 and the entry's bytes on a hit; a corrupt entry is removed and misses. */
int cache_get(const char *dir, const uint8_t key[16], char **data, size_t *len, ObjStats *st)
{
	char *path = cache_path(dir, key);
	FILE *f = fopen(path, "rb");
	if (!f) {
		free(path);
		return 0;
	}
	char hdr[CACHE_HDR];
	/* equivalent mutant [const 16 -> 15]: the magic's last byte is padding,
	 * 0 in every version */
	int ok = fread(hdr, 1, CACHE_HDR, f) == CACHE_HDR && !memcmp(hdr, CACHE_MAGIC, 16);
	uint64_t n = ok ? get_u64(hdr + 16) : 0;
	char *buf = NULL;
	if (ok && n < ((uint64_t)1 << 40)) {
		buf = xmalloc((size_t)n + 1);
		ok = fread(buf, 1, (size_t)n, f) == (size_t)n && fgetc(f) == EOF;
		ok = ok && XXH3_64bits(buf, (size_t)n) == get_u64(hdr + 24);
		st->code_bytes = (int64_t)get_u64(hdr + 32);
		st->kernels = (int)get_u64(hdr + 40);
		st->shared = (int)get_u64(hdr + 48);
	} else {
		ok = 0;
	}
	fclose(f);
	if (!ok) {
		/* a torn or corrupted entry: drop it and compile again */
		unlink(path);
		free(buf);
		free(path);
		return 0;
	}
	free(path);
	*data = buf;
	*len = (size_t)n;
	return 1;
}

void cache_put(const char *dir, const uint8_t key[16], const char *data, size_t len, const ObjStats *st)
{
	char *path = cache_path(dir, key);
	char *slash = strrchr(path, '/');
	*slash = 0;
	int ok = mkdirs(path) == 0;
	*slash = '/';
	if (ok) {
		Buf b = {0};
		for (int i = 0; i < 16; i++)
			buf_putc(&b, CACHE_MAGIC[i]);
		uint64_t w[5] = {len, XXH3_64bits(data, len), (uint64_t)st->code_bytes, (uint64_t)st->kernels,
		                 (uint64_t)st->shared};
		for (int k = 0; k < 5; k++)
			for (int i = 0; i < 8; i++)
				buf_putc(&b, (char)(w[k] >> (8 * i)));
		Buf all = b;
		for (size_t i = 0; i < len; i++)
			buf_putc(&all, data[i]);
		/* a temporary file, then rename: readers never see half an entry */
		write_file_atomic(path, all.s, all.len);
		buf_free(&all);
	}
	free(path);
}

char *default_cache_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME");
	if (x && x[0] == '/')
		return xasprintf("%s/nestc", x);
	const char *h = getenv("HOME");
	if (h && *h)
		return xasprintf("%s/.cache/nestc", h);
	return NULL;
}

int cache_command(const char *dir, const char *what)
{
	if (!dir) {
		fprintf(stderr, "nestc: error: no cache directory (set XDG_CACHE_HOME or HOME, or give --cache-dir)\n");
		return 1;
	}
	int64_t entries = 0, bytes = 0, removed = 0;
	for (int a = 0; a < 256; a++) {
		char *sub = xasprintf("%s/%02x", dir, a);
		DIR *dp = opendir(sub);
		if (dp) {
			struct dirent *de;
			while ((de = readdir(dp))) {
				if (de->d_name[0] == '.')
					continue;
				char *f = xasprintf("%s/%s", sub, de->d_name);
				struct stat st;
				size_t nl = strlen(de->d_name);
				int entry = nl > 2 && !strcmp(de->d_name + nl - 2, ".o");
				if (stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
					/* temporary files of a build that was killed are not entries */
					if (entry) {
						entries++;
						bytes += st.st_size;
					}
					if (!strcmp(what, "clear") && unlink(f) == 0 && entry)
						removed++;
				}
				free(f);
			}
			closedir(dp);
			if (!strcmp(what, "clear"))
				rmdir(sub);
		}
		free(sub);
	}
	if (!strcmp(what, "clear"))
		printf("removed %lld entries (%lld bytes) from %s\n", (long long)removed, (long long)bytes, dir);
	else
		printf("cache %s: %lld entries, %lld bytes\n", dir, (long long)entries, (long long)bytes);
	return 0;
}

/* ---- keys ---- */

/* The compiler's own identity: a hash of its executable, so that a rebuilt
 * nestc never takes objects made by another build of the same version. */
static uint64_t self_hash(void)
{
	static uint64_t h;
	static int done;
	if (done)
		return h;
	done = 1;
	FILE *f = fopen("/proc/self/exe", "rb");
	if (!f)
		return h = 0;
	XXH3_state_t *st = XXH3_createState();
	XXH3_64bits_reset(st);
	char buf[1 << 16];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		XXH3_64bits_update(st, buf, n);
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	fclose(f);
	return h;
}

static void key_common(Shared *sh, Buf *b)
{
	BuildOptions *o = sh->o;
	buf_printf(b, "nestc %s %016llx llvm %s target %s emit %d O%d wino %d wf %d act %d\n", NESTC_VERSION,
	           (unsigned long long)self_hash(), NESTC_LLVM_VERSION, sh->ident, o->emit, o->opt_level, !o->no_winograd,
	           wformat_mask(sh->p), o->act_int8);
}

/* Everything of a graph that its code depends on, calls by slot. */
static void graph_text(Shared *sh, Graph *g, Buf *b)
{
	for (int i = 0; i < g->nnodes; i++) {
		Node *n = g->nodes[i];
		node_text(b, n);
		uint64_t bits;
		memcpy(&bits, &n->fval, 8);
		buf_printf(b, " f=%llx i=%lld", (unsigned long long)bits, (long long)n->ival);
		if (n->op == OP_GATHER && sh->p->src && sh->p->src->line_start) {
			/* its run-time error names its place in the source (k_gather) */
			int line, col;
			source_linecol(sh->p->src, n->loc.off, &line, &col);
			buf_printf(b, " at %s:%d:%d", sh->p->src->path, line, col);
		}
		if (n->op == OP_CALL) {
			CallSite *cs = callsite_of(sh->rt, n);
			if (cs && cs->v) {
				buf_printf(b, " slot=%d", cs->v->id);
				if (cs->v->ndyn)
					for (int k = 0; k < cs->v->ndyn; k++)
						buf_printf(b, " dim=%lld map=%d", (long long)cs->dyn_values[k],
						           cs->dyn_map ? cs->dyn_map[k] : -2);
			} else {
				char hex[33];
				fp_hex(n->callee->fp, hex);
				buf_printf(b, " inline=%s", hex);
				graph_text(sh, n->callee, b);
			}
		}
		buf_putc(b, '\n');
	}
	buf_puts(b, "out");
	for (int i = 0; i < g->noutputs; i++)
		buf_printf(b, " %d", g->outputs[i]->id);
	buf_putc(b, '\n');
}

void job_key(Shared *sh, Job *j)
{
	Buf b = {0};
	key_common(sh, &b);
	buf_printf(&b, "job %d %s\n", j->kind, j->sym);
	if (j->kind == JOB_VARIANT) {
		Variant *v = j->v;
		char hex[33];
		fp_hex(v->fp, hex);
		buf_printf(&b, "fp %s opt %d fast %d%s dyn %d need %lld\n", hex, v->opt_level, v->fast_math, v->winograd ? "" : " wino 0", v->ndyn,
		           (long long)sh->need[v->g->id]);
		for (int i = 0; i < v->ndyn; i++)
			buf_printf(&b, "%d.%d ", v->dyn[i].node, v->dyn[i].field);
		graph_text(sh, v->g, &b);
	} else if (j->kind == JOB_MODEL) {
		Program *p = sh->p;
		buf_printf(&b, "ws %lld %lld embed %d\n", (long long)sh->ws_static, (long long)sh->ws_own,
		           sh->o->embed != NULL);
		/* equivalent mutant [swap]: the two numbers the other way round key
		 * the parts apart as well */
		buf_printf(&b, "part %d of %d\n", j->part, j->nparts);
		for (int i = 0; i < p->nparams; i++) {
			ParamInfo *pi = &p->params[i];
			buf_printf(&b, "param %s %d", pi->name, pi->dtype);
			for (int k = 0; k < pi->rank; k++)
				buf_printf(&b, " %lld", (long long)pi->shape[k]);
			buf_putc(&b, '\n');
		}
		for (int i = 0; i < sh->rt->variants.n; i++) {
			Variant *v = sh->rt->variants.v[i];
			buf_printf(&b, "slot %s.%d\n", v->region, v->k);
		}
		for (int e = 0; e < p->nentries; e++) {
			buf_printf(&b, "entry %s\n", p->entries[e].name);
			graph_text(sh, p->entries[e].g, &b);
		}
	} else {
		buf_printf(&b, "weights %llx %zu\n", (unsigned long long)XXH3_64bits(sh->weights_image, sh->weights_len),
		           sh->weights_len);
		for (int i = 0; i < sh->nprepacked; i++) {
			Prepacked *q = &sh->prepacked[i];
			buf_printf(&b, "packed %s %lld %lld %lld %d %llx\n", q->name, (long long)q->k, (long long)q->n,
			           (long long)q->wide, q->flags, (unsigned long long)XXH3_64bits(q->data, q->bytes));
		}
	}
	XXH128_hash_t h = XXH3_128bits(b.s, b.len);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	memcpy(j->key, c.digest, 16);
	buf_free(&b);
}

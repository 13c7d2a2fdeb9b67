/* archive.c - writing a static library: the System V / GNU ar format with a
 * symbol index, for `nestc build -o FILE.a`. */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

static void ar_member(Buf *b, const char *name, const char *data, size_t len)
{
	char hdr[61];
	snprintf(hdr, sizeof hdr, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0", "644", len);
	for (int i = 0; i < 60; i++)
		buf_putc(b, hdr[i]);
	for (size_t i = 0; i < len; i++)
		buf_putc(b, data[i]);
	if (len & 1)
		buf_putc(b, '\n');
}

static void put_be32(Buf *b, uint32_t v)
{
	buf_putc(b, (char)(v >> 24));
	buf_putc(b, (char)(v >> 16));
	buf_putc(b, (char)(v >> 8));
	buf_putc(b, (char)v);
}

/* syms[i] lists the global symbols member i defines */
void write_archive(Buf *out, OutFile *files, int n, Vec *syms)
{
	/* long names table */
	Buf names = {0};
	int64_t *name_off = xcalloc((size_t)n + 1, sizeof(int64_t));
	for (int i = 0; i < n; i++) {
		const char *base = strrchr(files[i].path, '/');
		base = base ? base + 1 : files[i].path;
		name_off[i] = (int64_t)names.len;
		buf_printf(&names, "%s/\n", base);
	}
	/* symbol index: count, offsets (big-endian), names */
	int nsyms = 0;
	size_t strbytes = 0;
	for (int i = 0; i < n; i++) {
		nsyms += syms[i].n;
		for (int k = 0; k < syms[i].n; k++)
			strbytes += strlen(syms[i].v[k]) + 1;
	}
	size_t symlen = 4 + 4 * (size_t)nsyms + strbytes;
	size_t pos = 8 + 60 + symlen + (symlen & 1) + 60 + names.len + (names.len & 1);
	size_t *member_off = xcalloc((size_t)n + 1, sizeof(size_t));
	for (int i = 0; i < n; i++) {
		member_off[i] = pos;
		pos += 60 + files[i].len + (files[i].len & 1);
	}
	Buf sym = {0};
	put_be32(&sym, (uint32_t)nsyms);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < syms[i].n; k++)
			put_be32(&sym, (uint32_t)member_off[i]);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < syms[i].n; k++) {
			buf_puts(&sym, syms[i].v[k]);
			buf_putc(&sym, 0);
		}
	buf_puts(out, "!<arch>\n");
	ar_member(out, "/", sym.s, sym.len);
	ar_member(out, "//", names.s, names.len);
	for (int i = 0; i < n; i++) {
		char nm[32];
		snprintf(nm, sizeof nm, "/%lld", (long long)name_off[i]);
		ar_member(out, nm, files[i].data, files[i].len);
	}
	buf_free(&sym);
	buf_free(&names);
	free(name_off);
	free(member_off);
}

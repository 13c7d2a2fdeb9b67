/* diag.c - source files, the line map, and diagnostics with a caret under the span. */
#include "nestc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void build_line_map(Source *s)
{
	int cap = 64;
	s->line_start = xmalloc((size_t)cap * sizeof(int32_t));
	s->nlines = 0;
	s->line_start[s->nlines++] = 0;
	for (size_t i = 0; i < s->len; i++) {
		if (s->text[i] == '\n') {
			if (s->nlines == cap) {
				cap *= 2;
				s->line_start = xrealloc(s->line_start, (size_t)cap * sizeof(int32_t));
			}
			s->line_start[s->nlines++] = (int32_t)(i + 1);
		}
	}
}

Source *source_from_string(const char *path, const char *text)
{
	Source *s = xcalloc(1, sizeof *s);
	s->path = xstrdup(path);
	s->len = strlen(text);
	s->text = xstrdup(text);
	s->nul_off = -1;
	build_line_map(s);
	return s;
}

Source *source_load(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	Buf b = {0};
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (b.len + n > (size_t)INT32_MAX - 1) {
			snprintf(err, errlen, "%s: file too large", path);
			fclose(f);
			buf_free(&b);
			return NULL;
		}
		for (size_t i = 0; i < n; i++)
			buf_putc(&b, chunk[i]);
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		snprintf(err, errlen, "cannot read %s", path);
		buf_free(&b);
		return NULL;
	}
	Source *s = xcalloc(1, sizeof *s);
	s->path = xstrdup(path);
	s->text = b.s ? b.s : xstrdup("");
	s->len = b.len;
	/* A NUL byte is reported where it is (parse_module): blanked here, so
	 * that the text stays one C string and its line prints whole. */
	s->nul_off = -1;
	for (char *z = s->text; (z = memchr(z, 0, s->len - (size_t)(z - s->text))) != NULL; z++) {
		if (s->nul_off < 0)
			s->nul_off = (int32_t)(z - s->text);
		*z = ' ';
	}
	build_line_map(s);
	return s;
}

void source_free(Source *s)
{
	if (!s)
		return;
	free((char *)s->path);
	free(s->text);
	free(s->line_start);
	free(s);
}

void source_linecol(const Source *s, int32_t off, int *line, int *col)
{
	if (off < 0)
		off = 0;
	if ((size_t)off > s->len)
		off = (int32_t)s->len;
	int lo = 0, hi = s->nlines - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (s->line_start[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	*line = lo + 1;
	/* columns count characters, not bytes: skip UTF-8 continuation bytes */
	int c = 1;
	for (int32_t i = s->line_start[lo]; i < off; i++)
		if (((unsigned char)s->text[i] & 0xc0) != 0x80)
			c++;
	*col = c;
}

/* Same position and text twice means the same mistake seen through two
 * specialisations of one function: report it once. */
static int already_seen(Diag *d, const char *key)
{
	for (int i = 0; i < d->seen.n; i++)
		if (strcmp(d->seen.v[i], key) == 0)
			return 1;
	vec_push(&d->seen, xstrdup(key));
	return 0;
}

static void vreport(Diag *d, Loc loc, const char *kind, const char *fmt, va_list ap)
{
	FILE *out = d->out ? d->out : stderr;
	Source *s = d->src;
	char *msg;
	{
		va_list cp;
		va_copy(cp, ap);
		int n = vsnprintf(NULL, 0, fmt, cp);
		va_end(cp);
		msg = xmalloc((size_t)n + 1);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
	}
	int line, col;
	source_linecol(s, loc.off, &line, &col);
	/* one diagnostic of a kind per position: a mistake in a function body seen
	 * through several specialisations is reported once, with the first shapes */
	char *key = xasprintf("%d:%d:%s", line, col, kind);
	if (already_seen(d, key)) {
		free(key);
		free(msg);
		return;
	}
	free(key);
	if (strcmp(kind, "error") == 0)
		d->nerrors++;
	else if (strcmp(kind, "warning") == 0)
		d->nwarnings++;
	fprintf(out, "%s:%d:%d: %s: %s\n", s->path, line, col, kind, msg);
	free(msg);

	/* the source line, tabs kept so the caret lines up */
	int32_t ls = s->line_start[line - 1];
	int32_t le = ls;
	while ((size_t)le < s->len && s->text[le] != '\n')
		le++;
	if (le > ls && s->text[le - 1] == '\r')
		le--; /* a CRLF file's line without its carriage return */
	fprintf(out, "%5d | %.*s\n", line, (int)(le - ls), s->text + ls);
	fputs("      | ", out);
	for (int32_t i = ls; i < loc.off && i < le; i++)
		if (((unsigned char)s->text[i] & 0xc0) != 0x80)
			fputc(s->text[i] == '\t' ? '\t' : ' ', out);
	fputc('^', out);
	int32_t end = loc.end < le ? loc.end : le;
	for (int32_t i = loc.off + 1; i < end; i++)
		if (((unsigned char)s->text[i] & 0xc0) != 0x80)
			fputc('~', out);
	fputc('\n', out);
}

void error_at(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(d, loc, "error", fmt, ap);
	va_end(ap);
}

void warning_at(Diag *d, Loc loc, const char *fmt, ...)
{
	if (d->nowarn && !d->werror)
		return;
	va_list ap;
	va_start(ap, fmt);
	vreport(d, loc, d->werror ? "error" : "warning", fmt, ap);
	va_end(ap);
}

void note_at(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(d, loc, "note", fmt, ap);
	va_end(ap);
}

void error_plain(Diag *d, const char *fmt, ...)
{
	FILE *out = d->out ? d->out : stderr;
	va_list ap;
	va_start(ap, fmt);
	fputs("nestc: error: ", out);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	va_end(ap);
	d->nerrors++;
}

void warning_plain(Diag *d, const char *fmt, ...)
{
	if (d->nowarn && !d->werror)
		return;
	FILE *out = d->out ? d->out : stderr;
	va_list ap;
	va_start(ap, fmt);
	fprintf(out, "nestc: %s: ", d->werror ? "error" : "warning");
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	va_end(ap);
	if (d->werror)
		d->nerrors++;
	else
		d->nwarnings++;
}

void diag_free(Diag *d)
{
	for (int i = 0; i < d->seen.n; i++)
		free(d->seen.v[i]);
	free(d->seen.v);
	d->seen.v = NULL;
	d->seen.n = d->seen.cap = 0;
}

/* json.c - a small strict JSON reader; see json.h. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

typedef nestrt__json J;

void nestrt__json_init(J *j, const void *text, size_t len)
{
	memset(j, 0, sizeof *j);
	j->begin = j->p = text;
	j->end = j->begin + len;
}

static int fail_at(J *j, const unsigned char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_at(J *j, const unsigned char *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->err, sizeof j->err, fmt, ap);
	va_end(ap);
	j->errpos = (size_t)(at - j->begin);
	return NJ_ERROR;
}

/* "unexpected character 'x'", "unexpected byte 0xff", "unexpected end of text". */
static int unexpected(J *j, const char *wanted)
{
	const char *sep = wanted ? "; expected " : "";
	if (!wanted)
		wanted = "";
	if (j->p >= j->end)
		return fail_at(j, j->p, "unexpected end of text%s%s", sep, wanted);
	unsigned char c = *j->p;
	if (c > 0x20 && c < 0x7f)
		return fail_at(j, j->p, "unexpected character '%c'%s%s", c, sep, wanted);
	return fail_at(j, j->p, "unexpected byte 0x%02x%s%s", c, sep, wanted);
}

static void ws(J *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

/* ------------------------------------------------------------ strings */

/* Length of the valid UTF-8 sequence of a non-ASCII byte at p, or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f; /* no UTF-16 surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* nothing beyond U+10FFFF */
	} else
		return 0;
	if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *v)
{
	if (end - p < 4)
		return -1;
	*v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* The string at j->p (which is '"'): validated and, if out is not NULL,
 * decoded into a malloc'd buffer. The decoded text is never longer than the
 * quoted one, so one allocation of that size suffices. */
static int string(J *j, char **out, size_t *outlen)
{
	const unsigned char *open = j->p, *q = j->p + 1;
	while (q < j->end && *q != '"')
		q += *q == '\\' && j->end - q > 1 ? 2 : 1;
	if (q >= j->end)
		return fail_at(j, open, "unterminated string");
	char *buf = NULL, *o = NULL;
	if (out) {
		buf = o = malloc((size_t)(q - open));
		if (!buf)
			return fail_at(j, open, "out of memory");
	}
	const unsigned char *p = open + 1;
	while (p < q) {
		unsigned char c = *p;
		if (c < 0x20) {
			fail_at(j, p, "control character 0x%02x in a string", c);
			goto bad;
		}
		if (c >= 0x80) {
			size_t n = utf8_len(p, q);
			if (!n) {
				fail_at(j, p, "invalid UTF-8 in a string");
				goto bad;
			}
			if (o) {
				memcpy(o, p, n);
				o += n;
			}
			p += n;
			continue;
		}
		if (c != '\\') {
			if (o)
				*o++ = (char)c;
			p++;
			continue;
		}
		/* An escape; the scan above made sure p + 1 < q or p + 1 == q ('"'). */
		unsigned char e = p[1];
		const char *simple = strchr("\"\\/bfnrt", e);
		if (e && simple) {
			static const char map[] = "\"\\/\b\f\n\r\t";
			if (o)
				*o++ = map[simple - "\"\\/bfnrt"];
			p += 2;
			continue;
		}
		if (e != 'u') {
			if (e > 0x20 && e < 0x7f)
				fail_at(j, p, "invalid escape '\\%c' in a string", e);
			else
				fail_at(j, p, "invalid escape in a string");
			goto bad;
		}
		unsigned cp, lo;
		if (hex4(p + 2, q, &cp) < 0) {
			fail_at(j, p, "invalid \\u escape in a string");
			goto bad;
		}
		const unsigned char *esc = p;
		p += 6;
		if (cp >= 0xdc00 && cp <= 0xdfff) {
			fail_at(j, esc, "unpaired surrogate \\u%04x in a string", cp);
			goto bad;
		}
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (q - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, q, &lo) < 0 || lo < 0xdc00 ||
			    lo > 0xdfff) {
				fail_at(j, esc, "unpaired surrogate \\u%04x in a string", cp);
				goto bad;
			}
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			p += 6;
		}
		if (o)
			o += put_utf8(o, cp);
	}
	j->p = q + 1;
	if (out) {
		*o = 0;
		*out = buf;
		*outlen = (size_t)(o - buf);
	}
	return NJ_STRING;
bad:
	free(buf);
	return NJ_ERROR;
}

/* ------------------------------------------------------------ numbers */

static int is_digit(const J *j, const unsigned char *p)
{
	return p < j->end && *p >= '0' && *p <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at j->p. */
static int number(J *j, int64_t *v)
{
	const unsigned char *p = j->p;
	int neg = 0, real = 0, big = 0;
	uint64_t mag = 0;
	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (!is_digit(j, p)) {
		j->p = p;
		return unexpected(j, "a digit");
	}
	if (*p == '0') {
		p++;
	} else {
		while (is_digit(j, p)) {
			unsigned d = (unsigned)(*p++ - '0');
			if (mag > (UINT64_MAX - d) / 10)
				big = 1;
			else
				mag = mag * 10 + d;
		}
	}
	if (p < j->end && *p == '.') {
		real = 1;
		p++;
		if (!is_digit(j, p)) {
			j->p = p;
			return unexpected(j, "a digit after '.'");
		}
		while (is_digit(j, p))
			p++;
	}
	if (p < j->end && (*p == 'e' || *p == 'E')) {
		real = 1;
		p++;
		if (p < j->end && (*p == '+' || *p == '-'))
			p++;
		if (!is_digit(j, p)) {
			j->p = p;
			return unexpected(j, "a digit in the exponent");
		}
		while (is_digit(j, p))
			p++;
	}
	j->p = p;
	if (real)
		return NJ_REAL;
	if (!big && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
		*v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
		return NJ_INT;
	}
	*v = neg ? INT64_MIN : INT64_MAX;
	return NJ_BIGINT;
}

static int literal(J *j, const char *word, int type)
{
	size_t n = strlen(word);
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
		return unexpected(j, "a value");
	j->p += n;
	return type;
}

/* ------------------------------------------------------------ pass 1 */

typedef struct Key {
	char *s;
	size_t len;
	size_t pos;
} Key;

static int key_cmp(const void *a, const void *b)
{
	const Key *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	/* Equal keys: the later one is the duplicate to report. */
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int value(J *j, int depth);

static int object(J *j, int depth)
{
	Key *keys = NULL;
	size_t n = 0, cap = 0;
	int r = NJ_ERROR;
	j->p++; /* '{' */
	ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return NJ_OBJECT;
	}
	for (;;) {
		ws(j);
		if (j->p >= j->end || *j->p != '"') {
			unexpected(j, "a string (an object key)");
			goto out;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			Key *nk = realloc(keys, nc * sizeof *nk);
			if (!nk) {
				fail_at(j, j->p, "out of memory");
				goto out;
			}
			keys = nk;
			cap = nc;
		}
		keys[n].pos = (size_t)(j->p - j->begin);
		if (string(j, &keys[n].s, &keys[n].len) < 0)
			goto out;
		n++;
		ws(j);
		if (j->p >= j->end || *j->p != ':') {
			unexpected(j, "':' after an object key");
			goto out;
		}
		j->p++;
		if (value(j, depth + 1) < 0)
			goto out;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			break;
		}
		unexpected(j, "',' or '}'");
		goto out;
	}
	qsort(keys, n, sizeof *keys, key_cmp);
	r = NJ_OBJECT;
	for (size_t i = 1; i < n; i++) {
		if (keys[i].len == keys[i - 1].len && memcmp(keys[i].s, keys[i - 1].s, keys[i].len) == 0) {
			/* Report the first duplicate in text order. */
			size_t best = i;
			for (size_t k = i + 1; k < n; k++)
				if (keys[k].len == keys[k - 1].len &&
				    memcmp(keys[k].s, keys[k - 1].s, keys[k].len) == 0 && keys[k].pos < keys[best].pos)
					best = k;
			char shown[NESTRT__SHOWN];
			fail_at(j, j->begin + keys[best].pos, "duplicate key '%s'",
			        nestrt__shown(shown, keys[best].s, keys[best].len));
			j->duplicate = 1;
			r = NJ_ERROR;
			break;
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		free(keys[i].s);
	free(keys);
	return r;
}

static int array(J *j, int depth)
{
	j->p++; /* '[' */
	ws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return NJ_ARRAY;
	}
	for (;;) {
		if (value(j, depth + 1) < 0)
			return NJ_ERROR;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			return NJ_ARRAY;
		}
		return unexpected(j, "',' or ']'");
	}
}

/* depth counts the enclosing containers of this value. */
static int value(J *j, int depth)
{
	ws(j);
	if (j->p >= j->end)
		return unexpected(j, "a value");
	int64_t v;
	switch (*j->p) {
	case '{':
	case '[':
		if (depth >= NESTRT__JSON_MAX_DEPTH)
			return fail_at(j, j->p, "nesting deeper than %d levels", NESTRT__JSON_MAX_DEPTH);
		return *j->p == '{' ? object(j, depth) : array(j, depth);
	case '"':
		return string(j, NULL, NULL);
	case 't':
		return literal(j, "true", NJ_TRUE);
	case 'f':
		return literal(j, "false", NJ_FALSE);
	case 'n':
		return literal(j, "null", NJ_NULL);
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			return number(j, &v) < 0 ? NJ_ERROR : NJ_NUMBER;
		return unexpected(j, "a value");
	}
}

int nestrt__json_validate(J *j)
{
	j->p = j->begin;
	j->duplicate = 0;
	if (value(j, 0) < 0)
		return -1;
	ws(j);
	if (j->p != j->end)
		return unexpected(j, "only whitespace after the value");
	j->p = j->begin;
	return 0;
}

/* ------------------------------------------------------------ pass 2 */

int nestrt__json_peek(J *j)
{
	ws(j);
	if (j->p >= j->end)
		return unexpected(j, "a value");
	switch (*j->p) {
	case '{': return NJ_OBJECT;
	case '[': return NJ_ARRAY;
	case '"': return NJ_STRING;
	case 't': return NJ_TRUE;
	case 'f': return NJ_FALSE;
	case 'n': return NJ_NULL;
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			return NJ_NUMBER;
		return unexpected(j, "a value");
	}
}

int nestrt__json_begin(J *j)
{
	ws(j);
	if (j->p >= j->end || (*j->p != '{' && *j->p != '['))
		return unexpected(j, "'{' or '['");
	j->p++;
	return 0;
}

int nestrt__json_next(J *j, int *count)
{
	ws(j);
	if (j->p < j->end && (*j->p == '}' || *j->p == ']')) {
		j->p++;
		return 0;
	}
	if (*count > 0) {
		if (j->p >= j->end || *j->p != ',')
			return unexpected(j, "','");
		j->p++;
	}
	(*count)++;
	return 1;
}

int nestrt__json_string(J *j, char **out, size_t *len)
{
	ws(j);
	if (j->p >= j->end || *j->p != '"')
		return unexpected(j, "a string");
	return string(j, out, len) < 0 ? -1 : 0;
}

int nestrt__json_key(J *j, char **out, size_t *len)
{
	if (nestrt__json_string(j, out, len) < 0)
		return -1;
	ws(j);
	if (j->p >= j->end || *j->p != ':') {
		free(*out);
		*out = NULL;
		return unexpected(j, "':'");
	}
	j->p++;
	return 0;
}

int nestrt__json_number(J *j, int64_t *v, char *text, size_t textlen)
{
	ws(j);
	const unsigned char *start = j->p;
	if (j->p >= j->end || (*j->p != '-' && (*j->p < '0' || *j->p > '9')))
		return unexpected(j, "a number");
	int r = number(j, v);
	if (r > 0 && text && textlen) {
		size_t n = (size_t)(j->p - start);
		if (n > textlen - 1)
			n = textlen - 1;
		memcpy(text, start, n);
		text[n] = 0;
	}
	return r;
}

int nestrt__json_skip(J *j)
{
	/* The text was validated; a generous depth keeps this from recursing forever
	 * if it was not. */
	return value(j, 0) < 0 ? -1 : 0;
}

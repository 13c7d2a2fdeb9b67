/* wire.c - a model unpacked without copying its weights. protobuf-c copies
 * every bytes field it decodes, and the raw_data of a model's initializers
 * is nearly all of its bytes: for GPT-2 D=256 with 48 layers (150 MB), the
 * page faults of that copy took as long as compiling the model.
 *
 * So the wire format is walked here only to find field boundaries (a tag,
 * its wire type, a length: no value is decoded). The graph's initializer
 * fields are cut out of the model, and each initializer's raw_data out of
 * it; protobuf-c decodes everything that is left, and each raw_data is then
 * pointed at its bytes in the caller's buffer, which must outlive the model
 * (onnx_model_free). Whatever this walk does not expect (a group, the graph
 * or a raw_data given twice, which protobuf merges, a field running past its
 * message) makes it give up: protobuf-c's own unpack of the whole buffer
 * decides then, so nothing malformed is accepted here that protobuf-c
 * rejects. */
#include "onnx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ModelProto.graph, GraphProto.initializer, TensorProto.raw_data */
enum { F_GRAPH = 7, F_INITIALIZER = 5, F_RAW_DATA = 9, WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct WField {
	uint64_t num;
	int wt;
	size_t start, pay, end; /* the tag's first byte, a LEN field's payload, one past the field */
} WField;

/* A varint of at most max bytes (10: any value; 5: what protobuf-c takes for
 * a tag or a length, read as 32 bits). */
static int varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *v, int max)
{
	uint64_t r = 0;
	for (int k = 0; k < max; k++) {
		if (*pos >= n)
			return -1;
		uint8_t b = p[(*pos)++];
		if (k == 9 && b > 1)
			return -1; /* more than 64 bits */
		r |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -1;
}

/* The field at *pos of p[0, n), *pos moved past it; -1: not a field this
 * walk knows how to skip. */
static int next_field(const uint8_t *p, size_t n, size_t *pos, WField *f)
{
	uint64_t tag, len;
	f->start = *pos;
	/* a tag or length protobuf-c would read otherwise (wider than 32 bits,
	 * overlong, a length over 2^31 - 1): not skipped here, so protobuf-c
	 * sees it and decides */
	if (varint(p, n, pos, &tag, 5) < 0 || tag >> 32 || tag >> 3 == 0)
		return -1;
	f->num = tag >> 3;
	f->wt = (int)(tag & 7);
	switch (f->wt) {
	case WT_VARINT:
		if (varint(p, n, pos, &len, 10) < 0)
			return -1;
		break;
	case WT_I64:
	case WT_I32: {
		size_t w = f->wt == WT_I64 ? 8 : 4;
		if (n - *pos < w)
			return -1;
		*pos += w;
		break;
	}
	case WT_LEN:
		if (varint(p, n, pos, &len, 5) < 0 || len > INT32_MAX || len > n - *pos)
			return -1;
		f->pay = *pos;
		*pos += (size_t)len;
		break;
	default:
		return -1; /* groups (deprecated, not in onnx.proto) */
	}
	f->end = *pos;
	return 0;
}

static void put_varint(Buf *b, uint64_t v)
{
	do {
		buf_putc(b, (char)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
		v >>= 7;
	} while (v);
}

static void put_bytes(Buf *b, const uint8_t *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = 2 * (b->len + n + 1);
		b->s = xrealloc(b->s, b->cap);
	}
	if (n)
		memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = 0;
}

/* One initializer's TensorProto without its raw_data, which then points
 * into p; NULL: protobuf-c rejects it, or raw_data comes twice. */
static Onnx__TensorProto *tensor_unpack(const uint8_t *p, size_t n)
{
	Buf rest = {0};
	size_t pos = 0, copied = 0;
	WField f, raw = {0};
	int nraw = 0;
	while (pos < n) {
		if (next_field(p, n, &pos, &f) < 0) {
			buf_free(&rest);
			return NULL;
		}
		if (f.num == F_RAW_DATA && f.wt == WT_LEN) {
			put_bytes(&rest, p + copied, f.start - copied);
			copied = f.end;
			raw = f;
			nraw++;
		}
	}
	put_bytes(&rest, p + copied, n - copied);
	Onnx__TensorProto *t = nraw > 1 ? NULL : onnx__tensor_proto__unpack(NULL, rest.len, (const uint8_t *)rest.s);
	buf_free(&rest);
	if (t && nraw) {
		/* as protobuf-c has it: empty bytes are NULL */
		t->has_raw_data = 1;
		t->raw_data.data = raw.end > raw.pay ? (uint8_t *)(p + raw.pay) : NULL;
		t->raw_data.len = raw.end - raw.pay;
	}
	return t;
}

/* The model, its initializers' raw_data in data; NULL: give up (see top). */
static Onnx__ModelProto *split_unpack(const uint8_t *data, size_t len)
{
	size_t pos = 0;
	WField f, g = {0};
	int ngraph = 0;
	while (pos < len) {
		if (next_field(data, len, &pos, &f) < 0)
			return NULL;
		if (f.num == F_GRAPH && f.wt == WT_LEN) {
			g = f;
			ngraph++;
		}
	}
	if (ngraph != 1)
		return NULL;
	/* the model without its graph, then the graph without its initializers
	 * (field order does not matter to protobuf; a repeated field's does, and
	 * is kept) */
	Buf sk = {0}, gb = {0};
	put_bytes(&sk, data, g.start);
	put_bytes(&sk, data + g.end, len - g.end);
	const uint8_t *gp = data + g.pay;
	size_t glen = g.end - g.pay, copied = 0;
	size_t *init = NULL;
	int ninit = 0, cap = 0;
	pos = 0;
	while (pos < glen) {
		if (next_field(gp, glen, &pos, &f) < 0)
			goto fail;
		if (f.num == F_INITIALIZER && f.wt == WT_LEN) {
			put_bytes(&gb, gp + copied, f.start - copied);
			copied = f.end;
			if (ninit == cap) {
				cap = cap ? 2 * cap : 64;
				init = xrealloc(init, 2 * (size_t)cap * sizeof *init);
			}
			init[2 * ninit] = g.pay + f.pay;
			init[2 * ninit + 1] = f.end - f.pay;
			ninit++;
		}
	}
	put_bytes(&gb, gp + copied, glen - copied);
	put_varint(&sk, (uint64_t)F_GRAPH << 3 | WT_LEN);
	put_varint(&sk, gb.len);
	if (gb.len)
		put_bytes(&sk, (const uint8_t *)gb.s, gb.len);
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, sk.len, (const uint8_t *)sk.s);
	if (!m || !m->graph || m->graph->n_initializer)
		goto fail_model;
	Onnx__GraphProto *gr = m->graph;
	if (ninit) {
		gr->initializer = xcalloc((size_t)ninit, sizeof *gr->initializer);
		for (int k = 0; k < ninit; k++) {
			gr->initializer[k] = tensor_unpack(data + init[2 * k], init[2 * k + 1]);
			if (!gr->initializer[k])
				goto fail_model;
			gr->n_initializer = (size_t)k + 1;
		}
	}
	free(init);
	buf_free(&sk);
	buf_free(&gb);
	return m;
fail_model:
	if (m)
		onnx_model_free(m, data, len);
fail:
	free(init);
	buf_free(&sk);
	buf_free(&gb);
	return NULL;
}

/* The messages of onnx.proto that hold messages that can nest again:
 * graphs in attributes (If, Loop), types in types (sequences, maps,
 * optionals). For each, the fields to follow and the kind each leads to. */
enum { K_MODEL, K_GRAPH, K_NODE, K_ATTR, K_FUNC, K_VINFO, K_TYPE, K_ELEM, K_MAP, K_NONE };
static const struct {
	int kind, num, to;
} follow[] = {
	{K_MODEL, 7, K_GRAPH},  {K_MODEL, 25, K_FUNC},  {K_GRAPH, 1, K_NODE},  {K_GRAPH, 11, K_VINFO},
	{K_GRAPH, 12, K_VINFO}, {K_GRAPH, 13, K_VINFO}, {K_NODE, 5, K_ATTR},   {K_ATTR, 6, K_GRAPH},
	{K_ATTR, 11, K_GRAPH},  {K_ATTR, 14, K_TYPE},   {K_ATTR, 15, K_TYPE},  {K_FUNC, 7, K_NODE},
	{K_FUNC, 11, K_ATTR},   {K_FUNC, 12, K_VINFO},  {K_VINFO, 2, K_TYPE},  {K_TYPE, 4, K_ELEM},
	{K_TYPE, 5, K_MAP},     {K_TYPE, 9, K_ELEM},    {K_ELEM, 1, K_TYPE},   {K_MAP, 2, K_TYPE},
};

/* The nesting depth of message p (kind k) along those fields, or more than
 * limit as soon as it is known to be; a field that does not parse is left
 * to protobuf-c, which rejects it. */
static int depth_of(const uint8_t *p, size_t n, int k, int depth, int limit)
{
	if (depth > limit)
		return depth;
	int most = depth;
	size_t pos = 0;
	WField f;
	while (pos < n && most <= limit) {
		if (next_field(p, n, &pos, &f) < 0)
			return most;
		if (f.wt != WT_LEN)
			continue;
		for (size_t i = 0; i < sizeof follow / sizeof follow[0]; i++)
			if (follow[i].kind == k && (uint64_t)follow[i].num == f.num) {
				int d = depth_of(p + f.pay, f.end - f.pay, follow[i].to, depth + 1, limit);
				most = d > most ? d : most;
			}
	}
	return most;
}

/* protobuf-c unpacks nested messages by recursion: a model nested
 * thousands deep (an If in an If in ...) would overflow the stack there. */
int onnx_nesting_ok(const uint8_t *data, size_t len, int limit)
{
	return depth_of(data, len, K_MODEL, 0, limit) <= limit;
}

Onnx__ModelProto *onnx_model_unpack(const uint8_t *data, size_t len)
{
	Onnx__ModelProto *m = split_unpack(data, len);
	return m ? m : onnx__model_proto__unpack(NULL, len, data);
}

void onnx_model_free(Onnx__ModelProto *m, const uint8_t *data, size_t len)
{
	if (!m)
		return;
	/* borrowed bytes are not protobuf-c's to free */
	for (size_t k = 0; m->graph && k < m->graph->n_initializer; k++) {
		Onnx__TensorProto *t = m->graph->initializer[k];
		uintptr_t a = t ? (uintptr_t)t->raw_data.data : 0;
		if (a && a >= (uintptr_t)data && a <= (uintptr_t)data + len) {
			t->raw_data.data = NULL;
			t->raw_data.len = 0;
		}
	}
	onnx__model_proto__free_unpacked(m, NULL);
}

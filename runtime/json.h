/* json.h - a small strict JSON reader (RFC 8259) for the safetensors header.
 *
 * Two passes over the text, neither building a tree, so memory stays bounded
 * by the text itself however hostile it is:
 *   1. nestrt__json_validate checks the whole text: one value, then only
 *      whitespace; UTF-8 throughout; no control characters or bad escapes in
 *      strings; no lone surrogates; numbers in JSON's grammar; nesting at most
 *      NESTRT__JSON_MAX_DEPTH; no duplicate key in any object (after decoding).
 *   2. A pull reader (peek / begin / next / key / string / number / skip)
 *      walks the validated text for the caller's schema.
 * Not internal to JSON but needed by the caller: integers are told apart from
 * reals (2 vs 2.0 vs 2e0), and integers beyond int64 are flagged, not rounded. */
#ifndef NESTRT_JSON_H
#define NESTRT_JSON_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

#define NESTRT__JSON_MAX_DEPTH 64

enum {
	NJ_ERROR = -1,
	NJ_OBJECT = 1,
	NJ_ARRAY,
	NJ_STRING,
	NJ_NUMBER,
	NJ_TRUE,
	NJ_FALSE,
	NJ_NULL,
};

/* What nestrt__json_number found. */
enum { NJ_INT = 1, NJ_BIGINT, NJ_REAL };

typedef struct nestrt__json {
	const unsigned char *begin, *p, *end;
	char err[256];      /* the reason, when a call returned an error */
	size_t errpos;      /* byte offset of the problem in the text */
	int duplicate;      /* the error is a duplicate key (valid syntax) */
} nestrt__json;

NESTRT_HIDDEN void nestrt__json_init(nestrt__json *j, const void *text, size_t len);
/* Pass 1 over the whole text; leaves the reader at the start. 0 or -1. */
NESTRT_HIDDEN int nestrt__json_validate(nestrt__json *j);

/* Pass 2. The type of the next value (NJ_OBJECT...), after whitespace. */
NESTRT_HIDDEN int nestrt__json_peek(nestrt__json *j);
/* Consume the '{' or '[' of the next value. */
NESTRT_HIDDEN int nestrt__json_begin(nestrt__json *j);
/* In an object or array: 1 if another member/element follows (its ',' is
 * consumed; *count says how many came before and is incremented), 0 if the
 * closing bracket was consumed, -1 on an error. */
NESTRT_HIDDEN int nestrt__json_next(nestrt__json *j, int *count);
/* A string value, decoded into a malloc'd NUL-terminated buffer (*len excludes
 * the terminator; the string itself may hold NULs). */
NESTRT_HIDDEN int nestrt__json_string(nestrt__json *j, char **out, size_t *len);
/* An object member's key and its ':'. */
NESTRT_HIDDEN int nestrt__json_key(nestrt__json *j, char **out, size_t *len);
/* A number: returns NJ_INT (value in *v), NJ_BIGINT (an integer beyond int64;
 * *v is INT64_MIN or INT64_MAX by sign) or NJ_REAL, or NJ_ERROR. The literal
 * text is copied to text (cut to textlen - 1 bytes) for messages. */
NESTRT_HIDDEN int nestrt__json_number(nestrt__json *j, int64_t *v, char *text, size_t textlen);
/* Skip the next value, whatever it is. */
NESTRT_HIDDEN int nestrt__json_skip(nestrt__json *j);

#endif

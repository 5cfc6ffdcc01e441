/* symmem-info's writer: the same calls print indented "key: value" text or
 * JSON, so the two forms cannot drift apart.  Keys are the JSON field
 * names in both (docs/symmem-info.md). */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "info.h"

void info_say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

#define MAX_DEPTH ((int)(sizeof(((struct out *)0)->count) / sizeof(int)))

static void indent(struct out *o, int extra)
{
	for (int i = 0; i < o->depth * 2 + extra; i++)
		fputc(' ', o->f);
}

/* A UTF-8 sequence starting at s, its length, or 0 when it is not one.
 * The second byte's range rules out what strict decoders refuse:
 * overlong forms (e0 80..9f, f0 80..8f), UTF-16 surrogates (ed a0..bf)
 * and code points past U+10FFFF (f4 90..bf). */
static size_t utf8_len(const unsigned char *s)
{
	size_t n = *s >= 0xf0 && *s < 0xf5 ? 4 : *s >= 0xe0 && *s < 0xf0 ? 3 :
		   *s >= 0xc2 && *s < 0xe0 ? 2 : 0;
	unsigned char lo = *s == 0xe0 ? 0xa0 : *s == 0xf0 ? 0x90 : 0x80;
	unsigned char hi = *s == 0xed ? 0x9f : *s == 0xf4 ? 0x8f : 0xbf;

	if (n && (s[1] < lo || s[1] > hi))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* A JSON string: quotes, backslashes and control bytes escaped, bytes that
 * are not UTF-8 replaced (a value from the environment may be anything). */
static void json_string(FILE *f, const char *v)
{
	const unsigned char *s = (const unsigned char *)v;

	fputc('"', f);
	while (*s) {
		size_t n;

		if (*s == '"' || *s == '\\') {
			fprintf(f, "\\%c", *s++);
			continue;
		}
		if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s++);
			continue;
		}
		if (*s < 0x80) {
			fputc(*s++, f);
			continue;
		}
		n = utf8_len(s);
		if (!n) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		fwrite(s, 1, n, f);
		s += n;
	}
	fputc('"', f);
}

/* Text: control bytes would break the one-line-per-field layout. */
static void text_string(FILE *f, const char *v)
{
	for (const unsigned char *s = (const unsigned char *)v; *s; s++)
		fputc(*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

/* Starts a member: the separator and key in JSON, the indent and key in
 * text ("- " first where it opens a list item; `scalar`: a value follows
 * on the same line). */
static void member_as(struct out *o, const char *key, int scalar)
{
	if (o->json) {
		fputs(o->count[o->depth]++ ? ",\n" : "\n", o->f);
		indent(o, 0);
		if (key) {
			json_string(o->f, key);
			fputs(": ", o->f);
		}
		return;
	}
	if (o->pending_list) {
		fputc('\n', o->f);
		o->pending_list = 0;
	}
	o->count[o->depth]++;
	if (o->item) {
		indent(o, -2);
		fputs("- ", o->f);
		o->item = 0;
	} else {
		indent(o, 0);
	}
	if (key)
		fprintf(o->f, scalar ? "%s: " : "%s:", key);
}

static void member(struct out *o, const char *key)
{
	member_as(o, key, 1);
}

static void open_level(struct out *o, char bracket)
{
	if (o->json)
		fputc(bracket, o->f);
	if (o->depth + 1 < MAX_DEPTH)
		o->depth++;
	o->count[o->depth] = 0;
}

static void close_level(struct out *o, char bracket)
{
	int empty = o->count[o->depth] == 0;

	if (o->depth > 0)
		o->depth--;
	if (!o->json)
		return;
	if (!empty) {
		fputc('\n', o->f);
		indent(o, 0);
	}
	fputc(bracket, o->f);
}

void out_begin(struct out *o, FILE *f, int json)
{
	memset(o, 0, sizeof(*o));
	o->f = f;
	o->json = json;
	if (json)
		fputc('{', f);
	o->depth = json ? 1 : 0;
}

void out_end(struct out *o)
{
	if (o->json)
		fputs("\n}\n", o->f);
	fflush(o->f);
}

void out_obj(struct out *o, const char *key)
{
	member_as(o, key, 0);
	if (!o->json)
		fputc('\n', o->f);
	open_level(o, '{');
}

void out_obj_end(struct out *o)
{
	close_level(o, '}');
}

void out_list(struct out *o, const char *key)
{
	member_as(o, key, 0);
	if (!o->json)
		o->pending_list = 1;
	open_level(o, '[');
}

void out_list_end(struct out *o)
{
	if (!o->json && o->pending_list) {
		fputs(" none\n", o->f);
		o->pending_list = 0;
	}
	close_level(o, ']');
}

void out_item(struct out *o)
{
	if (o->json) {
		member(o, NULL);
		open_level(o, '{');
		return;
	}
	/* Text: the item's first field carries the "- ". */
	if (o->pending_list) {
		fputc('\n', o->f);
		o->pending_list = 0;
	}
	o->count[o->depth]++;
	open_level(o, '{');
	o->item = 1;
}

void out_item_end(struct out *o)
{
	o->item = 0;
	close_level(o, '}');
}

void out_elem(struct out *o, const char *v)
{
	if (o->json) {
		member(o, NULL);
		json_string(o->f, v);
		return;
	}
	o->item = 1;
	o->depth++;
	member(o, NULL);
	o->depth--;
	text_string(o->f, v);
	fputc('\n', o->f);
}

void out_str(struct out *o, const char *key, const char *v)
{
	/* Text leaves out what is not there. */
	if (!o->json && !v)
		return;
	member(o, key);
	if (o->json && !v)
		fputs("null", o->f);
	else if (o->json)
		json_string(o->f, v);
	else
		text_string(o->f, v[0] ? v : "\"\"");
	if (!o->json)
		fputc('\n', o->f);
}

void out_strf(struct out *o, const char *key, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	out_str(o, key, buf);
}

void out_int(struct out *o, const char *key, long long v)
{
	member(o, key);
	fprintf(o->f, o->json ? "%lld" : "%lld\n", v);
}

void out_num(struct out *o, const char *key, double v)
{
	if (!o->json && !isfinite(v))
		return;
	member(o, key);
	if (!isfinite(v))
		fputs("null", o->f);
	else
		fprintf(o->f, o->json ? "%.4g" : "%.4g\n", v);
}

void out_bool(struct out *o, const char *key, int v)
{
	member(o, key);
	if (o->json)
		fputs(v ? "true" : "false", o->f);
	else
		fputs(v ? "yes\n" : "no\n", o->f);
}

void out_words(struct out *o, const char *key, const char *list, char sep)
{
	char word[INFO_PATH];
	int n = 0;

	if (!o->json) {
		/* One line: "key: a, b" */
		member(o, key);
		for (const char *p = list; p && *p;) {
			const char *end = strchr(p, sep);
			size_t len = end ? (size_t)(end - p) : strlen(p);

			if (len) {
				info_say(word, sizeof(word), "%.*s", (int)len, p);
				fputs(n++ ? ", " : "", o->f);
				text_string(o->f, word);
			}
			p = end ? end + 1 : p + len;
		}
		fputs(n ? "\n" : "none\n", o->f);
		return;
	}
	out_list(o, key);
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, sep);
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len) {
			info_say(word, sizeof(word), "%.*s", (int)len, p);
			out_elem(o, word);
		}
		p = end ? end + 1 : p + len;
	}
	out_list_end(o);
}

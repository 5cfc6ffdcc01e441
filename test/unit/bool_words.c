/* The boolean words and their spellings (bool_words.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <string.h>

#include "bool_words.h"

const char *const bool_true[NBOOL_WORDS] = { "1", "true", "yes", "on" };
const char *const bool_false[NBOOL_WORDS] = { "0", "false", "no", "off" };

void spell(const char *word, int how, char *out, size_t len)
{
	size_t i, n = strlen(word);
	char *p = out;

	assert_true(n + 5 < len);
	if (how == 4) {
		strcpy(p, " \t");
		p += 2;
	}
	for (i = 0; i < n; i++) {
		int c = (unsigned char)word[i];

		switch (how) {
		case 1: c = toupper(c); break;
		case 2: c = i == 0 ? toupper(c) : c; break;
		case 3: c = i % 2 ? toupper(c) : c; break;
		default: break;
		}
		*p++ = (char)c;
	}
	if (how == 4) {
		strcpy(p, " \n");
		p += 2;
	}
	*p = '\0';
}

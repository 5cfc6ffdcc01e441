/* The boolean words every variable of the plugin takes, and the ways a
 * user may write them: shared by the parser's tests and the variables'. */
#ifndef SYMMEM_TEST_BOOL_WORDS_H
#define SYMMEM_TEST_BOOL_WORDS_H

#include <stddef.h>

#define NBOOL_WORDS 4
#define NSPELLINGS 5

extern const char *const bool_true[NBOOL_WORDS];
extern const char *const bool_false[NBOOL_WORDS];

/* Writes `word` in spelling `how` (0..NSPELLINGS-1): as it is, upper
 * case, capitalised, alternating, and padded with whitespace. */
void spell(const char *word, int how, char *out, size_t len);

#endif

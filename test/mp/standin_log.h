/* The test side of the stand-in inner net plugin (inner_standin.c): the
 * log it writes at every close, in a temporary file the tests name in
 * INNER_STANDIN_LOG, and ranks whose lines in it carry their name. */
#ifndef SYMMEM_TEST_STANDIN_LOG_H
#define SYMMEM_TEST_STANDIN_LOG_H

#include <stdint.h>

/* Makes the log file and names it in INNER_STANDIN_LOG: 0, or -1. */
int standin_log_create(void);
/* Removes it, unless KEEP_LOG is set (to read it after a failure). */
void standin_log_remove(void);
/* Empties it (fails the test when it cannot). */
void standin_log_reset(void);

/* Lines of the log that hold `text`. */
int standin_log_count(const char *text);
/* Lines whose first two words are `tag` and `kind`, and the sum of their
 * `key`=N fields (-1 for no such line). */
long long standin_log_sum(const char *tag, const char *kind, const char *key, int *lines);
int standin_log_lines(const char *tag, const char *kind);

/* init of `net` (harness.h) for rank `rank`, whose log lines say
 * "rank<rank>": its context, or NULL. */
void *standin_rank_init(int rank, uint64_t comm_id, int traffic_class);

#endif

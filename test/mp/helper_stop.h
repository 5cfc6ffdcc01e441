/* The copy helper's stop lines (smfree/copy_helper.c), read back by the
 * benchmarks: what the helper did per copy over its life. */
#ifndef SYMMEM_TEST_HELPER_STOP_H
#define SYMMEM_TEST_HELPER_STOP_H

struct helper_stop {
	double work_us;			/* work per copy: turns that took, queued or ended copies */
	double calls_per_copy;		/* copy-engine calls per copy (merges and batch calls) */
	double driver_us_per_call;	/* in the driver per call: the copy and its landing mark */
};

/* Sets every member to -1: not seen yet. */
void helper_stop_reset(struct helper_stop *s);
/* Takes what one log line holds; other lines leave *s as it is. */
void helper_stop_read(struct helper_stop *s, const char *line);
/* The helper's own work per copy, its driver calls left out; -1 if unknown. */
double helper_stop_own_us(const struct helper_stop *s);

#endif

/* Time histograms in 1 us buckets: medians for the statistics lines,
 * where a mean would mostly show the first message's setup cost. */
#include "symmem.h"

void sm_hist_add(struct sm_hist *h, uint64_t ns)
{
	uint64_t us = ns / 1000;

	h->n[us < SM_HIST_BUCKETS - 1 ? us : SM_HIST_BUCKETS - 1]++;
}

double sm_hist_median(const struct sm_hist *h)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i < SM_HIST_BUCKETS; i++)
		total += h->n[i];
	if (!total)
		return -1;
	for (int i = 0; i < SM_HIST_BUCKETS - 1; i++) {
		seen += h->n[i];
		if (2 * seen >= total)
			return i + 0.5;
	}
	return SM_HIST_BUCKETS;
}

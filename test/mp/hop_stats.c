/* Percentiles of per-round times, for the hop benchmarks (hop.h). */
#include <stdlib.h>

#include "hop.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void hop_percentiles(double *v, int n, double *p10, double *p50, double *p90)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	if (p10)
		*p10 = v[n / 10];
	*p50 = v[n / 2];
	if (p90)
		*p90 = v[n * 9 / 10];
}

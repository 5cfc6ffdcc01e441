/* The copy helper's stop lines, read back (helper_stop.h).  The figures
 * follow fixed words of the lines, so a changed wording reads as -1 and
 * the benchmark's row says so, rather than a wrong figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_stop.h"

void helper_stop_reset(struct helper_stop *s)
{
	s->work_us = -1;
	s->calls_per_copy = -1;
	s->driver_us_per_call = -1;
}

void helper_stop_read(struct helper_stop *s, const char *line)
{
	unsigned long long copies, calls;
	double copy_us, mark_us;
	const char *p;

	p = strstr(line, "): ");
	if (p && sscanf(p, "): %llu copies as %llu copy-engine calls", &copies, &calls) == 2 &&
	    copies)
		s->calls_per_copy = (double)calls / (double)copies;
	p = strstr(line, "(of it per copy-engine call ");
	if (p && sscanf(p, "(of it per copy-engine call %lf us in the copy call, %lf", &copy_us,
			&mark_us) == 2)
		s->driver_us_per_call = copy_us + mark_us;
	p = strstr(line, " us of work per copy");
	if (p) {
		while (p > line && p[-1] != ' ')
			p--;
		s->work_us = strtod(p, NULL);
	}
}

double helper_stop_own_us(const struct helper_stop *s)
{
	if (s->work_us < 0 || s->calls_per_copy < 0 || s->driver_us_per_call < 0)
		return -1;
	return s->work_us - s->calls_per_copy * s->driver_us_per_call;
}

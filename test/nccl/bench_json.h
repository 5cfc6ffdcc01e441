/* nccl_bench -j: machine-readable rows, one JSON object per line, for the
 * sweep scripts (bench/e2e/rows.py).  Apart from bench.h so that it builds
 * and is tested without NCCL's header (test/nccl/test_bench_json.c). */
#ifndef SYMMEM_BENCH_JSON_H
#define SYMMEM_BENCH_JSON_H

#include <stdint.h>
#include <stdio.h>

/* What holds for every row of one invocation. */
struct bench_json_run {
	const char *nccl_version;	/* "2.28.9" */
	const char *route;		/* how the plugin phase was routed */
	int ranks, iters, graph, registered, cumem_bufs, hosts;
	char *const *plugin_env;	/* the -E NAME=VALUE settings */
	int nplugin_env;
};

/* One timed size of one op; a phase that did not run has ran[p] == 0 and
 * is written as null. */
struct bench_json_row {
	const char *op, *dtype, *redop;
	uint64_t bytes;
	int ran[2];			/* native, plugin */
	double us[2];			/* slowest rank's mean per call */
	double busbw[2];		/* GB/s */
	uint64_t errors;
};

/* Writes `row` as one line to `f`; returns 0, or -1 on a write error. */
int bench_json_row(FILE *f, const struct bench_json_run *run, const struct bench_json_row *row);

#endif

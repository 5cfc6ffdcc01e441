/* nccl_bench -j: one JSON object per timed size (bench_json.h). */
#include <math.h>

#include "bench_json.h"

/* A JSON string: quotes, backslashes and control characters escaped;
 * other bytes pass as they are (the names and settings are ASCII). */
static void put_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* A number, or null for a phase that did not run (JSON has no NaN).
 * Bandwidths in significant digits: 8 bytes move at 1e-4 GB/s. */
static void put_num(FILE *f, int ran, double v, const char *fmt)
{
	if (!ran || !isfinite(v)) {
		fputs("null", f);
		return;
	}
	fprintf(f, fmt, v);
}

int bench_json_row(FILE *f, const struct bench_json_run *run, const struct bench_json_row *row)
{
	static const char *phase[2] = { "native", "plugin" };

	fputs("{\"op\":", f);
	put_str(f, row->op);
	fprintf(f, ",\"ranks\":%d,\"bytes\":%llu,\"dtype\":", run->ranks,
		(unsigned long long)row->bytes);
	put_str(f, row->dtype);
	fputs(",\"redop\":", f);
	put_str(f, row->redop);
	for (int p = 0; p < 2; p++) {
		fprintf(f, ",\"%s_us\":", phase[p]);
		put_num(f, row->ran[p], row->us[p], "%.3f");
		fprintf(f, ",\"%s_busbw\":", phase[p]);
		put_num(f, row->ran[p], row->busbw[p], "%.6g");
	}
	fprintf(f, ",\"errors\":%llu,\"nccl_version\":", (unsigned long long)row->errors);
	put_str(f, run->nccl_version);
	fputs(",\"route\":", f);
	put_str(f, run->route);
	fprintf(f, ",\"iters\":%d,\"graph\":%d,\"registered\":%d,\"cumem_bufs\":%d,\"hosts\":%d"
		",\"plugin_env\":[", run->iters, run->graph, run->registered, run->cumem_bufs,
		run->hosts);
	for (int i = 0; i < run->nplugin_env; i++) {
		if (i)
			fputc(',', f);
		put_str(f, run->plugin_env[i]);
	}
	fputs("]}\n", f);
	return ferror(f) ? -1 : 0;
}

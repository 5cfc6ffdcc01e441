/* Inputs and expected values for the NCCL driver.
 *
 * Rank r's element k is 1 + (7k + 13r + seed) mod period, encoded in the
 * data type.  The period is small enough that sums over every rank stay
 * exact integers, so results are compared bit for bit, never with a
 * tolerance.  Because inputs repeat with the period, every expected value
 * is a table lookup and checking a GiB costs about as much as reading it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const struct bench_dtype bench_dtypes[] = {
	{ ncclFloat32, "float", 4, 16777216.0, 0 },
	{ ncclFloat64, "double", 8, 9007199254740992.0, 0 },
	{ ncclFloat16, "half", 2, 2048.0, 0 },
	{ ncclBfloat16, "bf16", 2, 256.0, 0 },
	{ ncclInt8, "int8", 1, 127.0, 1 },
	{ ncclUint8, "uint8", 1, 255.0, 1 },
	{ ncclInt32, "int32", 4, 2147483647.0, 1 },
	{ ncclInt64, "int64", 8, 9007199254740992.0, 1 },
};
const int bench_ndtypes = sizeof(bench_dtypes) / sizeof(bench_dtypes[0]);

int bench_dtype_find(const char *name)
{
	for (int i = 0; i < bench_ndtypes; i++)
		if (!strcmp(bench_dtypes[i].name, name))
			return i;
	return -1;
}

const char *bench_op_name(int op)
{
	static const char *names[OP_COUNT] = {
		"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "alltoall",
		"sendrecv",
	};
	return op >= 0 && op < OP_COUNT ? names[op] : "?";
}

const char *bench_redop_name(ncclRedOp_t r)
{
	switch (r) {
	case ncclSum: return "sum";
	case ncclProd: return "prod";
	case ncclMax: return "max";
	case ncclMin: return "min";
	case ncclAvg: return "avg";
	default: return "?";
	}
}

/* Sizes as nccl-tests counts them: the larger of the two buffers for
 * all_gather, reduce_scatter and alltoall, the buffer otherwise. */
int bench_shape(int op, int nranks, size_t elsize, size_t bytes, struct bench_shape *s)
{
	size_t n = (size_t)nranks, count = bytes / elsize;

	memset(s, 0, sizeof(*s));
	if (bytes % elsize)
		return 0;
	switch (op) {
	case OP_ALLGATHER:
	case OP_REDUCESCATTER:
	case OP_ALLTOALL:
		if (count % n)
			return 0;
		s->unit = count / n;
		s->send_count = op == OP_ALLGATHER ? s->unit : count;
		s->recv_count = op == OP_REDUCESCATTER ? s->unit : count;
		s->bus_factor = (double)(n - 1) / (double)n;
		break;
	case OP_ALLREDUCE:
		s->unit = s->send_count = s->recv_count = count;
		s->bus_factor = 2.0 * (double)(n - 1) / (double)n;
		break;
	default:
		s->unit = s->send_count = s->recv_count = count;
		s->bus_factor = 1.0;
		break;
	}
	return 1;
}

static uint16_t float_to_half(float f)
{
	uint32_t x;
	int exp;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) == 0)
		return (uint16_t)(x >> 16);
	exp = (int)((x >> 23) & 0xff) - 127 + 15;
	/* Only exact, normal values occur here (small integers, k / 2^m). */
	return (uint16_t)(((x >> 16) & 0x8000) | ((uint32_t)exp << 10) | ((x >> 13) & 0x3ff));
}

static void encode(int dtype, double v, uint8_t *dst)
{
	float f = (float)v;
	uint32_t bits;

	switch (bench_dtypes[dtype].nccl) {
	case ncclFloat32: memcpy(dst, &f, 4); break;
	case ncclFloat64: memcpy(dst, &v, 8); break;
	case ncclFloat16: { uint16_t h = float_to_half(f); memcpy(dst, &h, 2); break; }
	case ncclBfloat16: { memcpy(&bits, &f, 4); uint16_t b = (uint16_t)(bits >> 16); memcpy(dst, &b, 2); break; }
	case ncclInt8: { int8_t i = (int8_t)v; memcpy(dst, &i, 1); break; }
	case ncclUint8: { uint8_t i = (uint8_t)v; memcpy(dst, &i, 1); break; }
	case ncclInt32: { int32_t i = (int32_t)v; memcpy(dst, &i, 4); break; }
	case ncclInt64: { int64_t i = (int64_t)v; memcpy(dst, &i, 8); break; }
	default: break;
	}
}

static double combine(ncclRedOp_t op, double a, double b)
{
	switch (op) {
	case ncclProd: return a * b;
	case ncclMax: return a > b ? a : b;
	case ncclMin: return a < b ? a : b;
	default: return a + b;		/* sum, and avg before the division */
	}
}

int bench_pattern_make(struct bench_pattern *p, int dtype, ncclRedOp_t redop, int nranks,
		       int seed)
{
	const struct bench_dtype *d = &bench_dtypes[dtype];
	int period = 61, values;

	memset(p, 0, sizeof(*p));
	if (redop == ncclProd) {
		values = 2;		/* inputs 1 or 2: the product is at most 2^n */
		if (ldexp(1.0, nranks) > d->exact)
			return -1;
	} else if (redop == ncclSum || redop == ncclAvg) {
		values = (int)fmin(61.0, floor(d->exact / nranks));
	} else {
		values = (int)fmin(61.0, d->exact);
	}
	/* avg divides by the rank count: exact only for powers of two. */
	if (redop == ncclAvg && (nranks & (nranks - 1)))
		return -1;
	if (values < 2)
		return -1;
	p->period = period;
	p->nranks = nranks;
	p->elsize = d->size;
	p->tab = malloc((size_t)nranks * (size_t)period * d->size);
	p->red = malloc((size_t)period * d->size);
	if (!p->tab || !p->red)
		return -1;
	for (int k = 0; k < period; k++) {
		double acc = 0;

		for (int r = 0; r < nranks; r++) {
			double v = 1 + (7 * k + 13 * r + seed) % values;

			encode(dtype, v, p->tab + ((size_t)r * (size_t)period + (size_t)k) * d->size);
			acc = r == 0 ? v : combine(redop, acc, v);
		}
		if (redop == ncclAvg)
			acc = d->is_int ? floor(acc / nranks) : acc / nranks;
		encode(dtype, acc, p->red + (size_t)k * d->size);
	}
	return 0;
}

void bench_pattern_free(struct bench_pattern *p)
{
	free(p->tab);
	free(p->red);
	memset(p, 0, sizeof(*p));
}

void bench_fill(const struct bench_pattern *p, int rank, uint8_t *dst, size_t count)
{
	size_t row = (size_t)p->period * p->elsize;
	const uint8_t *src = p->tab + (size_t)rank * row;

	for (size_t k = 0; k < count; k += (size_t)p->period) {
		size_t n = count - k < (size_t)p->period ? count - k : (size_t)p->period;

		memcpy(dst + k * p->elsize, src, n * p->elsize);
	}
}

/* Compares `len` elements at out with the sequence starting at element k0
 * of `row` (a period-long table). */
static uint64_t compare_run(const struct bench_pattern *p, const uint8_t *out, size_t len,
			    const uint8_t *row, size_t k0, size_t at, int report, uint64_t *shown)
{
	size_t es = p->elsize, period = (size_t)p->period, kk = k0 % period;
	uint64_t bad = 0;

	for (size_t j = 0; j < len; j++) {
		if (memcmp(out + j * es, row + kk * es, es) != 0) {
			if (report && (*shown)++ < 3)
				fprintf(stderr, "    element %zu differs (byte 0x%02x, expected 0x%02x)\n",
					at + j, out[j * es], row[kk * es]);
			bad++;
		}
		if (++kk == period)
			kk = 0;
	}
	return bad;
}

uint64_t bench_check(const struct bench_pattern *p, int op, int rank, const uint8_t *out,
		     const struct bench_shape *s, int report)
{
	size_t row = (size_t)p->period * p->elsize, unit = s->unit;
	int n = p->nranks;
	uint64_t bad = 0, shown = 0;

	switch (op) {
	case OP_ALLREDUCE:
		return compare_run(p, out, s->recv_count, p->red, 0, 0, report, &shown);
	case OP_REDUCE:
		if (rank != BENCH_ROOT)
			return 0;	/* nothing is written there; checked as poison below */
		return compare_run(p, out, s->recv_count, p->red, 0, 0, report, &shown);
	case OP_REDUCESCATTER:
		return compare_run(p, out, unit, p->red, (size_t)rank * unit, 0, report, &shown);
	case OP_BROADCAST:
		return compare_run(p, out, s->recv_count, p->tab + BENCH_ROOT * row, 0, 0, report,
				   &shown);
	case OP_SENDRECV:
		return compare_run(p, out, s->recv_count, p->tab + (size_t)((rank + n - 1) % n) * row,
				   0, 0, report, &shown);
	case OP_ALLGATHER:
		for (int r = 0; r < n; r++)
			bad += compare_run(p, out + (size_t)r * unit * p->elsize, unit,
					   p->tab + (size_t)r * row, 0, (size_t)r * unit, report, &shown);
		return bad;
	case OP_ALLTOALL:
		for (int r = 0; r < n; r++)
			bad += compare_run(p, out + (size_t)r * unit * p->elsize, unit,
					   p->tab + (size_t)r * row, (size_t)rank * unit,
					   (size_t)r * unit, report, &shown);
		return bad;
	default:
		return 1;
	}
}

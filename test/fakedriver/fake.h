/* A CUDA driver for a machine without a GPU, built as libcuda.so.1 alone
 * in its build directory; only the tests that ask for it load it, through
 * LD_LIBRARY_PATH or their run path.  It lets the plugin, its copy helper,
 * symmem-info, bench_hop, the stand-in inner plugin and the copy helper's
 * fuzz target run end to end in CI.
 *
 * What it is: one device, 0000:00:00.0, whose "GPU memory" is host pages.
 * cuMem allocations are memfds, so an export is a dup() and an import a
 * mapping; every copy and stream write happens at once in the calling
 * thread, so a stream is always idle and an event always complete.  The
 * plugin's entry points come from cuGetProcAddress_v2 (fake_table.c); the
 * stand-in's are looked up by name and exported as such, next to
 * fake_dev_alloc(), whose pages the CPU cannot touch (fake_devmem.c).
 *
 * What it is not: a model of a GPU's timing, of more than one device or of
 * legacy IPC; no measurement through it means anything about a GPU.
 *
 * FAKE_CUDA_MODE, read once when the library is loaded:
 *   unset or "default"  the above;
 *   "strict"            a GPU's own checks, for the copy helper's fuzz
 *                       target: a copy or stream write outside registered
 *                       host memory and the driver's own mappings aborts
 *                       (on a GPU it faults and poisons the context), and
 *                       imports of other processes' memory are refused. */
#ifndef FAKE_H
#define FAKE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_BUS_ID "0000:00:00.0"

/* An entry point cuGetProcAddress_v2 hands out; each file lists its own,
 * ending with a NULL name. */
struct fake_entry {
	const char *name;
	void (*fn)(void);
};

#define FAKE_ENTRY(name, f) { name, (void (*)(void))(f) }

extern const struct fake_entry fake_device_entries[];
extern const struct fake_entry fake_mem_entries[];
extern const struct fake_entry fake_copy_entries[];

/* FAKE_CUDA_MODE=strict (fake_table.c). */
extern int fake_strict;

/* What the one context points at (fake_device.c). */
extern int fake_ctx;

/* Whether [p, p + len) lies inside [va, va + size), written so that no
 * end wraps: the ranges come from fuzzed requests and tests' pointers. */
static inline int fake_inside(uintptr_t va, size_t size, uintptr_t p, size_t len)
{
	return p >= va && len <= size && p - va <= size - len;
}

/* Whether [p, p + len) lies inside registered host memory or one mapping
 * of the driver's own (fake_mem.c): what a GPU's copy engine may touch. */
int fake_reachable(CUdeviceptr p, size_t len);

/* CUDA_SUCCESS for a stream this driver made or the default one (NULL),
 * else CUDA_ERROR_INVALID_HANDLE (fake_copy.c). */
CUresult fake_stream_check(CUstream s);

/* The no-access region holding [p, p + len), or -1 (fake_devmem.c). */
int fake_dev_find(CUdeviceptr p, size_t len);

#endif

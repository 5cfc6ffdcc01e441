/* symmem: the lowest layer.  Status codes with a message for the layers
 * above, a log hook the plugin fills in, and the CUDA driver opened at run
 * time (no link-time libcuda, so the library loads on hosts without a GPU).
 *
 * Owns: status codes and messages, the CUDA driver, export and import of
 * GPU allocations, the staging pool, shared memfds.  Must not touch:
 * anything above it (smfree/, transport/, plugin/), NCCL's structs,
 * environment variables. */
#ifndef SYMMEM_SYMMEM_H
#define SYMMEM_SYMMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h>

/* What went wrong, coarse enough for plugin/ to pick an ncclResult_t. */
enum sm_status {
	SM_OK = 0,
	SM_ERR_SYSTEM,		/* OS or library failure */
	SM_ERR_INTERNAL,	/* the caller broke a contract (too many requests, bad pointer) */
	SM_ERR_INVALID,		/* malformed input: corrupt handle, bad argument */
	SM_ERR_USAGE,		/* configuration or size mismatch */
	SM_ERR_REMOTE,		/* the peer died, hung up or misbehaved */
	SM_ERR_CUDA,		/* a CUDA driver call failed */
};

/* Records a one-line message for this thread and returns `status`.
 * The layers below plugin/ report errors only through this. */
int sm_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *sm_last_error(void);

/* CLOCK_MONOTONIC in nanoseconds: deadlines, latencies, intervals. */
uint64_t sm_now_ns(void);

/* Durations in 1 us buckets; the last bucket holds everything longer. */
#define SM_HIST_BUCKETS 128
struct sm_hist {
	uint64_t n[SM_HIST_BUCKETS];
};

void sm_hist_add(struct sm_hist *h, uint64_t ns);
/* The median in us (its bucket's midpoint); -1 when empty, and
 * SM_HIST_BUCKETS when more than half lie in the last bucket. */
double sm_hist_median(const struct sm_hist *h);

/* Lines from lower layers go through a sink that plugin/ installs (NCCL's
 * logger).  Without one, info lines are dropped and warnings go to stderr. */
typedef void (*sm_log_sink)(int warn, const char *msg);
void sm_set_log_sink(sm_log_sink sink);
void sm_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Text another process sent, made fit for a log line: the bytes of `in`
 * up to its first NUL (or `in_len`), printable ASCII as it is, a
 * backslash doubled and every other byte as \xNN, cut at a whole escape
 * to fit `out` (NUL-terminated).  Returns `out`. */
char *sm_escape(char *out, size_t len, const char *in, size_t in_len);

/* Socket I/O that never blocks.  Returns bytes moved (0 = would
 * block) or -1 with sm_fail() set (a hang-up on receive is an error too).
 * `pass_fd` >= 0 rides along with the first byte (SCM_RIGHTS); `got_fd`
 * receives the first one that arrives (close-on-exec) and every other is
 * closed.  *got_fd must be -1 on entry: one already held there makes all
 * that arrive be closed, which is how a caller reading the rest of a
 * message refuses more. */
ssize_t sm_send_some(int fd, const void *buf, size_t len, int pass_fd);
ssize_t sm_recv_some(int fd, void *buf, size_t len, int *got_fd);
/* The same for two pieces in one call (a header and its payload): bytes
 * moved of both together. */
ssize_t sm_send_two(int fd, const void *a, size_t alen, const void *b, size_t blen);
/* A shared memfd named `name` of `size` bytes, sealed against shrinking,
 * its first `map_len` bytes mapped read-write at *map; on failure nothing
 * is left open (*fd = -1). */
int sm_memfd_map(const char *name, uint64_t size, uint64_t map_len, int *fd, void **map);
/* Before mapping another process's memfd: it holds `size` bytes (exactly,
 * or at least) and is sealed against shrinking, so it stays that size.
 * SM_ERR_INVALID naming `what` otherwise. */
int sm_memfd_check(int fd, uint64_t size, int exact, const char *what);
/* poll() on one descriptor for `events`, resumed after a signal (an
 * interrupted wait must not read as a timeout): > 0 ready, 0 timed out,
 * -1 failed. */
int sm_wait_fd(int fd, short events, int timeout_ms);

/* CUDA driver, resolved with dlopen("libcuda.so.1") + cuGetProcAddress. */
struct sm_cuda_info {
	int loaded;		/* driver opened and cuInit succeeded */
	int driver_version;	/* e.g. 13000 */
	int device_count;
	char reason[160];	/* why not loaded */
};

/* Opens the driver once per process; safe from any thread. */
const struct sm_cuda_info *sm_cuda_load(void);

/* The driver entry points the data path uses, resolved once by
 * sm_cuda_load().  sm_cu() is NULL when the driver is not loaded. */
struct sm_cuda_api {
	CUresult (*get_error_string)(CUresult, const char **);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_get_pci_bus_id)(char *, int, CUdevice);
	CUresult (*device_get_by_pci_bus_id)(CUdevice *, const char *);
	CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
	CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
	CUresult (*primary_ctx_release)(CUdevice);
	CUresult (*ctx_get_current)(CUcontext *);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*ctx_get_device)(CUdevice *);
	CUresult (*ctx_enable_peer_access)(CUcontext, unsigned int);
	CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*mem_get_address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
	CUresult (*mem_retain_allocation_handle)(CUmemGenericAllocationHandle *, void *);
	CUresult (*mem_get_allocation_properties)(CUmemAllocationProp *,
						  CUmemGenericAllocationHandle);
	CUresult (*mem_export)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
			       unsigned long long);
	CUresult (*mem_import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
	CUresult (*mem_address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
					unsigned long long);
	CUresult (*mem_address_free)(CUdeviceptr, size_t);
	CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			    unsigned long long);
	CUresult (*mem_unmap)(CUdeviceptr, size_t);
	CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*mem_release)(CUmemGenericAllocationHandle);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			       unsigned long long);
	CUresult (*mem_get_allocation_granularity)(size_t *, const CUmemAllocationProp *,
						   CUmemAllocationGranularity_flags);
	CUresult (*ipc_get_mem_handle)(CUipcMemHandle *, CUdeviceptr);
	CUresult (*ipc_open_mem_handle)(CUdeviceptr *, CUipcMemHandle, unsigned int);
	CUresult (*ipc_close_mem_handle)(CUdeviceptr);
	CUresult (*stream_create)(CUstream *, unsigned int);
	CUresult (*stream_destroy)(CUstream);
	CUresult (*stream_synchronize)(CUstream);
	CUresult (*stream_query)(CUstream);
	CUresult (*event_create)(CUevent *, unsigned int);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_query)(CUevent);
	CUresult (*event_destroy)(CUevent);
	CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*memcpy_2d_async)(const CUDA_MEMCPY2D *, CUstream);
	/* NULL where the driver lacks it (before CUDA 13). */
	CUresult (*memcpy_batch_async)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				       CUmemcpyAttributes *, size_t *, size_t, CUstream);
	CUresult (*mem_host_register)(void *, size_t, unsigned int);
	CUresult (*mem_host_unregister)(void *);
	CUresult (*mem_host_get_device_pointer)(CUdeviceptr *, void *, unsigned int);
	/* Stream memory operations (CUDA 12's v2 ABI); NULL where the driver
	 * lacks them: copies then report landing through events. */
	CUresult (*stream_write_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	CUresult (*stream_wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	/* Several of them in one call; NULL where the driver lacks it. */
	CUresult (*stream_batch_mem_op)(CUstream, unsigned int, CUstreamBatchMemOpParams *,
					unsigned int);
	/* NULL where the driver lacks it (before CUDA 11.7). */
	CUresult (*mem_get_handle_for_address_range)(void *, CUdeviceptr, size_t,
						     CUmemRangeHandleType, unsigned long long);
};

const struct sm_cuda_api *sm_cu(void);

/* Any other entry point, CUDA 12.0's ABI, into the function pointer at
 * `fnp`, for callers beyond the data path (symmem-info); -1 when the
 * driver is not loaded or lacks it. */
int sm_cuda_symbol(const char *name, void *fnp);

/* sm_fail(SM_ERR_CUDA, ...) with the driver's name for `rc` appended. */
int sm_cuda_fail(CUresult rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes sure the calling thread has a CUDA context: the one already current
 * (NCCL's proxy threads have one), else the primary context of GPU
 * `ordinal`.  *device receives the context's device ordinal. */
int sm_ctx_enter(int ordinal, int *device, CUcontext *ctx);

/* dmabuf.c: GPU memory for an RDMA device (GPUDirect RDMA without
 * nvidia-peermem).  sm_dmabuf_gpu_supported: 1 if GPU `ordinal` hands out
 * DMA-BUF handles (the driver has the call and the GPU the attribute),
 * else 0 with the reason in why[].  sm_dmabuf_fd: a DMA-BUF fd for the
 * host pages holding [ptr, ptr + size), *span bytes from *base; the fd is
 * the caller's to close. */
int sm_dmabuf_gpu_supported(int ordinal, char *why, size_t len);
int sm_dmabuf_fd(const void *ptr, size_t size, int *fd, uintptr_t *base, size_t *span);

/* Exporting memory to another process of this host.  One record per
 * allocation and process, shared by every registration inside it. */
enum sm_share_kind {
	SM_SHARE_POSIX_FD = 1,	/* cuMem allocation: a POSIX fd passed with SCM_RIGHTS */
	SM_SHARE_LEGACY_IPC = 2,	/* cudaMalloc allocation: a CUDA IPC handle */
	SM_SHARE_HOST_FD = 3,	/* plain shared host memory (memfd), for the copy helper */
};

/* What the importing process needs, apart from the fd itself. */
struct sm_share_info {
	uint64_t alloc_id;	/* exporter-unique while the export lives */
	uint64_t alloc_size;	/* bytes mapped from the allocation's start */
	uint32_t kind;		/* enum sm_share_kind */
	int32_t device;		/* exporter's GPU ordinal, for messages */
	char bus_id[32];	/* exporter's GPU as cuDeviceGetPCIBusId names it, "" for
				 * host memory: ordinals differ between processes, and
				 * the driver will not say where a legacy IPC import
				 * lives (the copy helper's phases need it) */
	uint64_t addr;		/* the allocation's address in the exporter */
	uint8_t ipc[64];	/* SM_SHARE_LEGACY_IPC: the CUipcMemHandle bytes */
};

struct sm_export;

/* Finds the allocation holding [ptr, ptr + size) and exports it (or takes
 * another reference on the existing export).  *offset is ptr's offset in
 * the allocation; *fd (borrowed, -1 for IPC) stays open until the last put. */
int sm_export_get(const void *ptr, size_t size, struct sm_export **out,
		  struct sm_share_info *info, uint64_t *offset, int *fd);
void sm_export_put(struct sm_export *e);

struct sm_mapping;

/* Maps a peer's export into the calling thread's context (cached per owner
 * process and allocation; refcounted).  Consumes `fd` in every case. */
int sm_import_get(int owner_pid, const struct sm_share_info *info, int fd,
		  struct sm_mapping **out);
/* The local address of the allocation's first byte. */
uint8_t *sm_mapping_base(const struct sm_mapping *m);
void sm_import_put(struct sm_mapping *m);

/* cumem_map.c: reserves address space (aligned to `align`, 0 = the
 * driver's choice) for `size` bytes of allocation `h`, maps it and grants
 * `access` (the first entry names the GPU in messages); on failure nothing
 * stays mapped or reserved, and `h` is still the caller's.  `what` names
 * the memory in messages ("a peer allocation"). */
int sm_cumem_map(CUmemGenericAllocationHandle h, size_t size, size_t align,
		 const CUmemAccessDesc *access, int naccess, const char *what, CUdeviceptr *out);
void sm_cumem_unmap(CUdeviceptr va, size_t size);

/* A fresh allocation id for sm_share_info (exports and anything else this
 * process shares: an importer caches mappings by owner and id). */
uint64_t sm_alloc_id_new(void);

/* Host memory from the CUDA driver (host_cumem.c, NCCL_CUMEM_HOST_ENABLE=1):
 * pinned on the current GPU's NUMA node, readable and writable by this CPU
 * and GPU, shared as a POSIX fd (SM_SHARE_POSIX_FD, owned here until free). */
struct sm_host_cumem {
	uint8_t *ptr;
	uint64_t size;		/* the request rounded up to the granularity */
	int fd;
	int numa;
	uint64_t alloc_id;
};

int sm_host_cumem_alloc(uint64_t want, struct sm_host_cumem *out);
void sm_host_cumem_free(struct sm_host_cumem *m);

/* Live export records and peer mappings in this process (leak checks). */
int sm_export_count(void);
int sm_import_count(void);

/* The staging pool (pool.c): spans of a few large exportable segments, for
 * receives into memory that cannot be exported or with NCCL_ZERO_COPY=0.
 * Sizes follow NCCL_CUMEM_POOL_SIZE, _PREALLOC, _GROWTH_FACTOR, _MAX_SIZE
 * and _TRIM_THRESHOLD. */
struct sm_pool_config {
	uint64_t initial;	/* first segment (0 = just what the first request needs) */
	int prealloc;		/* make the first segment when the pool is made */
	double growth;		/* each further segment this many times the previous, >= 1 */
	uint64_t max;		/* all segments together never exceed this */
	uint64_t trim;		/* idle bytes above this go back (whole segments) */
	int legacy;		/* cudaMalloc-style segments, shared as legacy IPC handles
				 * (NCCL_CUMEM_ENABLE=0), instead of cuMem ones */
};

/* Where segments come from.  alloc gets a multiple of `granularity`. */
struct sm_pool_backend {
	int (*alloc)(void *arg, uint64_t size, void **base, uint64_t *cookie);
	void (*free)(void *arg, void *base, uint64_t size, uint64_t cookie);
	uint64_t granularity;
	void *arg;
	char what[32];		/* "GPU 0", for messages */
};

struct sm_pool_stats {
	uint64_t size;		/* bytes in segments now */
	uint64_t used;		/* bytes handed out now */
	uint64_t peak;		/* most ever handed out at once */
	unsigned segments;
	unsigned spans;		/* pieces handed out now */
	uint64_t grows;		/* segments ever made */
	uint64_t trims;		/* segments given back while the pool lived */
	uint64_t failures;	/* requests refused (cap or backend) */
};

/* A piece handed out: where it is and the segment it lies in (what gets
 * exported; one export per segment). */
struct sm_pool_piece {
	uint8_t *ptr;
	uint64_t size;		/* rounded up to the span alignment */
	uint8_t *seg_base;
	uint64_t seg_size;
};

struct sm_pool;

int sm_pool_create(const struct sm_pool_backend *be, const struct sm_pool_config *cfg,
		   struct sm_pool **out);
/* Gives every segment back (a WARN if pieces are still out). */
void sm_pool_destroy(struct sm_pool *p);
/* Fails with SM_ERR_USAGE and a message naming the cap when it is reached. */
int sm_pool_alloc(struct sm_pool *p, uint64_t size, struct sm_pool_piece *out);
/* `ptr` must be a piece's ptr; anything else (twice, foreign) is an error
 * that changes nothing. */
int sm_pool_free(struct sm_pool *p, void *ptr);
void sm_pool_get_stats(struct sm_pool *p, struct sm_pool_stats *out);

/* The GPU pools (pool_cumem.c): one per GPU and process, cuMem memory with
 * a POSIX-fd handle type (or cuMemAlloc memory with cfg->legacy),
 * refcounted by the connections that may use it.
 * Taken with the current context's GPU; `cfg` of the first taker wins. */
int sm_pool_gpu_get(const struct sm_pool_config *cfg, struct sm_pool **out);
void sm_pool_gpu_put(struct sm_pool *p);
/* Live GPU pools (leak checks) and a one-line summary of each for the
 * monitor ("GPU 0: 64.0 MiB in 1 segment(s), 4.0 MiB used, peak 8.0 MiB"). */
int sm_pool_gpu_count(void);
void sm_pool_gpu_describe(char *buf, size_t len);

#endif

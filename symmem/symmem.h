/* symmem: the lowest layer.  Status codes with a message for the layers
 * above, a log hook the plugin fills in, and the CUDA driver opened at run
 * time (no link-time libcuda, so the library loads on hosts without a GPU). */
#ifndef SYMMEM_SYMMEM_H
#define SYMMEM_SYMMEM_H

#include <stddef.h>

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

/* Informational lines from lower layers go through a sink that plugin/
 * installs (NCCL's logger); without one they are dropped. */
typedef void (*sm_log_sink)(const char *msg);
void sm_set_log_sink(sm_log_sink sink);
void sm_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CUDA driver, resolved with dlopen("libcuda.so.1") + cuGetProcAddress. */
struct sm_cuda_info {
	int loaded;		/* driver opened and cuInit succeeded */
	int driver_version;	/* e.g. 13000 */
	int device_count;
	char reason[160];	/* why not loaded */
};

/* Opens the driver once per process; safe from any thread. */
const struct sm_cuda_info *sm_cuda_load(void);

#endif

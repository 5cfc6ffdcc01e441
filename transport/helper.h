/* This process's buffers made known to its copy helper, so that copies
 * between them need no CUDA call in NCCL's process: what the shared-memory
 * and TCP backends' registrations and staging areas have in common. */
#ifndef SYMMEM_TRANSPORT_HELPER_H
#define SYMMEM_TRANSPORT_HELPER_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"

/* A field group of the registrations whose copies the helper may run. */
struct helper_range {
	struct sm_export *exp;
	uint64_t offset;		/* base's offset in the exported allocation */
	struct smf_engine *ce;		/* hid != 0: the engine holding it */
	uint32_t hid;			/* the copy helper's name for it, or 0 */
};

/* Exports [ptr, ptr + size) to this process's copy helper; *hid = 0 and
 * an error when either step fails (nothing is kept). */
int helper_export(struct tp_comm *c, const void *ptr, size_t size, struct sm_export **exp,
		  uint64_t *offset, uint32_t *hid);
/* Registration r's buffer to the helper, into h (engine held); a buffer
 * it cannot take stays with in-process copies, logged once. */
void helper_own_buffer(struct tp_comm *c, const struct tp_region *r, struct helper_range *h);
/* Drops h's export and its name in the helper (not the engine). */
void helper_range_drop(struct helper_range *h);

/* NCCL_SM_FREE_VERBOSE: where an allocation the helper maps sits in its
 * owner `owner`, and how long the helper took to answer (`ns`). */
void helper_log_range(const struct tp_comm *c, const char *what, int owner,
		      const struct sm_share_info *info, uint32_t hid, uint64_t ns);
/* Whether to log a buffer left to in-process copies (once per process
 * unless verbose), and the hint that goes with that line. */
int helper_log_in_process(const struct tp_comm *c);
const char *helper_more_with_verbose(const struct tp_comm *c);

/* A shared memfd of `size` bytes mapped here, described for the copy
 * helper (which maps it and registers it with the driver). */
int host_memfd_open(const char *name, uint64_t size, struct sm_share_info *info, int *fd,
		    uint8_t **buf);

#endif

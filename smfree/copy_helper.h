/* The copy helper seen from the plugin (copy_helper.c); private to smfree/,
 * which offers it to the layers above through the engine (smfree.h). */
#ifndef SYMMEM_SMFREE_COPY_HELPER_H
#define SYMMEM_SMFREE_COPY_HELPER_H

#include <stdint.h>
#include <sys/types.h>

#include "smfree.h"
#include "symmem.h"

struct smf_helper;

struct smf_helper_params {
	int nstreams;		/* streams its copies go round */
	int depth;		/* copies queued per stream at most (the rest may merge) */
	uint64_t merge_max;	/* largest copy merged from consecutive requests, 0 = none */
	int batch;		/* copies per copy-engine call at most (batch calls) */
	uint64_t phase_ns;	/* time per destination GPU, 0 = in posting order */
	int all_gpus;		/* start it without CUDA_VISIBLE_DEVICES: it opens its GPU
				 * by bus id and must see the peers it copies into */
	int landing;		/* copies report landing by stream writes the client
				 * polls (copyd_proto.h), where the driver can */
	int request_timeout_ms;	/* how long a mapping request waits for its answer before
				 * the helper is given up; 0 = 30 s (tests shorten it) */
};

/* The environment the helper starts with: `env` itself, or with
 * `all_gpus` a copy without CUDA_VISIBLE_DEVICES (the array is malloc'd,
 * the strings are env's).  NULL when out of memory. */
char **smf_helper_env(char **env, int all_gpus);

/* Starts `path` for the GPU with this PCI bus id and waits (bounded) until
 * it has a context, its streams and the request ring. */
int smf_helper_start(const char *path, const char *pci_bus_id,
		     const struct smf_helper_params *p, struct smf_helper **out);
/* Hangs up; the helper finishes queued copies, unmaps and exits (killed
 * after 5 s, and left unreaped if even that has not ended it 3 s later).
 * NULL is fine. */
void smf_helper_stop(struct smf_helper *h);
pid_t smf_helper_pid(const struct smf_helper *h);

/* Has the helper map an export of `owner_pid` (fd borrowed; -1 for IPC
 * handles); *id names it in copies.  A helper that does not answer in
 * time is given up: this and every later request fails. */
int smf_helper_add(struct smf_helper *h, int owner_pid, const struct sm_share_info *info, int fd,
		   uint32_t *id);
void smf_helper_del(struct smf_helper *h, uint32_t id);
/* The same without waiting, for NCCL's progress thread.  add_post sends
 * the request (fd borrowed, passed before it returns) and names it by
 * *ticket; *posted = 0 (and SM_OK) when it cannot be sent at once (another
 * request is being answered, the socket or the table of posted requests
 * is full): try again later.  add_test reads the answers there are, with
 * no wait: *done = 1 with *id, or with an error (the mapping failed, the
 * helper died, or it did not answer in its request time and was given
 * up).  add_cancel forgets a posted request whose poster goes away; a
 * mapping its answer brings is dropped. */
int smf_helper_add_post(struct smf_helper *h, int owner_pid, const struct sm_share_info *info,
			int fd, uint64_t *ticket, int *posted);
int smf_helper_add_test(struct smf_helper *h, uint64_t ticket, int *done, uint32_t *id);
void smf_helper_add_cancel(struct smf_helper *h, uint64_t ticket);

/* Posts a copy between two mappings; *started = 0 when the ring is full.
 * No system call, no CUDA call. */
int smf_helper_post(struct smf_helper *h, uint32_t dst_id, uint64_t dst_off, uint32_t src_id,
		    uint64_t src_off, uint64_t len, uint64_t *seq, int *started);
/* The same with a watch word (smfree.h; NULL: none). */
int smf_helper_post_watched(struct smf_helper *h, uint32_t dst_id, uint64_t dst_off,
			    uint32_t src_id, uint64_t src_off, uint64_t len,
			    const struct smf_watch *w, uint64_t *seq, int *started);
/* *done = 1 once copy `seq` landed; an error if it failed or the helper died. */
int smf_helper_test(struct smf_helper *h, uint64_t seq, int *done);
void smf_helper_abandon(struct smf_helper *h, uint64_t seq);
/* The request's state word as a word ("posted", "done", ...). */
const char *smf_helper_state(const struct smf_helper *h, uint64_t seq);

#endif

/* What each connection moved, for users watching a job: with
 * NCCL_CUMEM_MONITOR=1 every NCCL_CUMEM_MONITOR_INTERVAL seconds and at
 * close (NCCL_SM_FREE_VERBOSE=1: at close only), and at finalize the CUDA
 * objects still live in the process (a leak check). */
#ifndef SYMMEM_PLUGIN_MONITOR_H
#define SYMMEM_PLUGIN_MONITOR_H

#include <stdint.h>

#include "transport.h"

struct monitor_state {
	uint64_t interval_ns;	/* 0: NCCL_CUMEM_MONITOR is off */
	uint64_t start_ns;
	uint64_t last_ns;	/* end of the last interval logged */
	struct tp_stats last;	/* the counters then */
};

void monitor_open(struct monitor_state *m);
/* Called where the connection posts work, on its progress thread (the
 * thread that also updates its counters), so an idle connection is quiet. */
void monitor_tick(struct monitor_state *m, const struct tp_comm *tp, const void *who,
		  int is_send, int dev);
void monitor_close(const struct monitor_state *m, const struct tp_comm *tp, const void *who,
		   int is_send, int dev);
void monitor_finalize(void);

#endif

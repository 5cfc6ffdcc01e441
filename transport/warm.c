/* The copy engine made ahead of the first connection.  A GPU's engine, and
 * the copy helper process it starts (with a CUDA context of its own), used
 * to be made by the first connection: 0.4 s on 2 x H200 and 0.7 s on 4
 * (helpers starting together) inside the job's first collective
 * (bench/results/setup.md).  Made on a thread of its own at the plugin's
 * init, it overlaps NCCL's own setup; a connection that comes first waits
 * for it on the engines' lock and then finds it made. */
#include <pthread.h>

#include "internal.h"

static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int state;			/* 0 never, 1 running or holding, 2 over */
	pthread_t thread;
	CUcontext ctx;
	struct smf_engine_options eo;
	struct smf_engine *engine;	/* the warm-up's reference, or NULL */
} warm;

static void *warm_main(void *arg)
{
	(void)arg;
	/* A failure here is the first connection's to report: it tries again. */
	if (sm_cu()->ctx_set_current(warm.ctx) == CUDA_SUCCESS &&
	    smf_engine_get(&warm.eo, &warm.engine) != SM_OK)
		warm.engine = NULL;
	return NULL;
}

void tp_engine_warm(const struct tp_options *opt)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUcontext ctx = NULL;

	/* The GPU is the one NCCL made current; with none, nothing is known. */
	if (!opt->gpu || !opt->copy_helper || !cu || cu->ctx_get_current(&ctx) != CUDA_SUCCESS ||
	    !ctx)
		return;
	pthread_mutex_lock(&warm_lock);
	if (warm.state == 0) {
		warm.ctx = ctx;
		comm_engine_options(opt, &warm.eo);
		if (pthread_create(&warm.thread, NULL, warm_main, NULL) == 0)
			warm.state = 1;
		else
			warm.state = 2;
	}
	pthread_mutex_unlock(&warm_lock);
}

void tp_engine_unwarm(void)
{
	pthread_mutex_lock(&warm_lock);
	if (warm.state == 1) {
		pthread_join(warm.thread, NULL);
		smf_engine_put(warm.engine);
		warm.engine = NULL;
		warm.state = 2;
	}
	pthread_mutex_unlock(&warm_lock);
}

/* A kernel on every SM of GPU 0, as NCCL's and a training step's are, so
 * that the hop can be timed beside it.  The library has no kernels; this
 * benchmark loads one from PTX through the driver, so it needs no nvcc.
 * Kernels of about 20 ms run back to back, two queued at a time, until
 * hop_hog_stop(). */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hop.h"

/* Spins until clock64() has advanced by its argument. */
static const char spin_ptx[] =
	".version 7.8\n"
	".target sm_75\n"
	".address_size 64\n"
	".visible .entry spin(.param .u64 cycles)\n"
	"{\n"
	"	.reg .pred %p;\n"
	"	.reg .b64 %r<5>;\n"
	"	ld.param.u64 %r1, [cycles];\n"
	"	mov.u64 %r2, %clock64;\n"
	"L:\n"
	"	mov.u64 %r3, %clock64;\n"
	"	sub.s64 %r4, %r3, %r2;\n"
	"	setp.lt.s64 %p, %r4, %r1;\n"
	"	@%p bra L;\n"
	"	ret;\n"
	"}\n";

typedef CUresult (*load_fn)(CUmodule *, const void *);
typedef CUresult (*func_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);

struct hop_hog {
	pid_t pid;		/* a process of its own, or 0 */
	int stop_fd;		/* ... told to stop by closing this */
	pthread_t thread;	/* or a thread of this process */
	_Atomic int stop;
	long kernels;
	int failed;
	int device;		/* the GPU whose SMs it fills */
};

/* Launches until told to stop; the number of kernels, or -1. */
static long spin_loop(_Atomic int *stop, int stop_fd, int ordinal)
{
	const struct sm_cuda_api *cu = sm_cu();
	load_fn load;
	func_fn func;
	launch_fn launch;
	CUmodule mod;
	CUfunction fn;
	CUstream st;
	CUevent ev[2];
	int device, sms = 0, clock_khz = 0;
	unsigned long long cycles;
	void *args[1];
	long n = 0;

	if (!cu || sm_ctx_enter(ordinal, &device, NULL) ||
	    sm_cuda_symbol("cuModuleLoadData", &load) ||
	    sm_cuda_symbol("cuModuleGetFunction", &func) ||
	    sm_cuda_symbol("cuLaunchKernel", &launch))
		return -1;
	if (load(&mod, spin_ptx) || func(&fn, mod, "spin") ||
	    cu->device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) ||
	    cu->device_get_attribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device) ||
	    cu->stream_create(&st, CU_STREAM_NON_BLOCKING) ||
	    cu->event_create(&ev[0], CU_EVENT_DISABLE_TIMING) ||
	    cu->event_create(&ev[1], CU_EVENT_DISABLE_TIMING))
		return -1;
	cycles = (unsigned long long)clock_khz * 20;	/* about 20 ms */
	args[0] = &cycles;
	for (;;) {
		char c;

		if (stop && atomic_load(stop))
			break;
		if (stop_fd >= 0 && read(stop_fd, &c, 1) == 0)
			break;	/* the parent closed its end */
		/* Two kernels queued, so the next is there when one ends:
		 * wait for the one before the last.  Eight blocks of 256
		 * threads per SM fill every SM. */
		while (n >= 2) {
			CUresult q = cu->event_query(ev[n % 2]);

			if (q == CUDA_SUCCESS)
				break;
			if (q != CUDA_ERROR_NOT_READY)
				return -1;
			usleep(100);
		}
		if (launch(fn, (unsigned)sms * 8, 1, 1, 256, 1, 1, 0, st, args, NULL) ||
		    cu->event_record(ev[n % 2], st))
			return -1;
		n++;
	}
	cu->stream_synchronize(st);
	return n;
}

static void *hog_thread(void *arg)
{
	struct hop_hog *h = arg;

	h->kernels = spin_loop(&h->stop, -1, h->device);
	return NULL;
}

int hop_hog_start(int self, int device, struct hop_hog **out)
{
	struct hop_hog *h = calloc(1, sizeof(*h));
	int p[2];

	*out = NULL;
	if (!h)
		return -1;
	h->stop_fd = -1;
	h->device = device;
	if (self) {
		if (pthread_create(&h->thread, NULL, hog_thread, h)) {
			free(h);
			return -1;
		}
	} else {
		if (pipe(p)) {
			free(h);
			return -1;
		}
		h->pid = fork();
		if (h->pid == 0) {
			long n;

			close(p[1]);
			/* Read without waiting: EOF once the parent closes it. */
			fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
			n = spin_loop(NULL, p[0], device);
			_exit(n > 0 ? 0 : 1);
		}
		close(p[0]);
		if (h->pid < 0) {
			close(p[1]);
			free(h);
			return -1;
		}
		h->stop_fd = p[1];
	}
	usleep(200 * 1000);	/* the first kernels are on every SM */
	*out = h;
	return 0;
}

long hop_hog_stop(struct hop_hog *h)
{
	long n;
	int status;

	if (!h)
		return 0;
	if (h->pid > 0) {
		close(h->stop_fd);
		if (waitpid(h->pid, &status, 0) != h->pid)
			status = -1;
		n = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 1 : -1;
	} else {
		atomic_store(&h->stop, 1);
		pthread_join(h->thread, NULL);
		n = h->kernels;
	}
	free(h);
	return n;
}

/* GPUDirect RDMA for the ibverbs backend without a GPU or an RDMA device:
 * the DMA-BUF probe's verdict on each answer a driver may give, and GPU
 * memory registered through a DMA-BUF descriptor (page-rounded, closed
 * after registering when the plugin asked the driver for it, left open
 * when NCCL handed it over).
 *
 * symmem/dmabuf.c and transport/ib_dmabuf.c are included whole.  What
 * cannot run here is stood in for: the CUDA driver's few calls (sm_cu()
 * below hands out memfds as DMA-BUF descriptors), and the device's
 * ibv_reg_dmabuf_mr, which needs a protection domain and so an RDMA
 * device (the seam: the ib_fns table the functions are given; test_ib.c
 * asks a real Soft-RoCE device under scripts/rdma_vm.sh).  The loader
 * (ib_dev.c) and libibverbs itself are the real ones. */
#include "dmabuf.c"
#include "ib_dmabuf.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "fd_util.h"

#define PAGE 4096ull

/* ---- the CUDA driver's stand-in ------------------------------------------ */

static struct {
	int absent;		/* sm_cu() NULL: no driver */
	int attr;		/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	CUresult fail;		/* cuMemGetHandleForAddressRange's answer */
	int calls;
	CUdeviceptr ptr;	/* what it was asked for */
	size_t size;
	int type;
	unsigned long long flags;
	int fd;			/* the descriptor it handed out */
} drv;

static CUresult d_device_get(CUdevice *dev, int ordinal)
{
	*dev = ordinal;
	return CUDA_SUCCESS;
}

static CUresult d_attribute(int *v, CUdevice_attribute a, CUdevice dev)
{
	(void)dev;
	assert_int_equal(a, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
	*v = drv.attr;
	return CUDA_SUCCESS;
}

static CUresult d_range_handle(void *handle, CUdeviceptr ptr, size_t size,
			       CUmemRangeHandleType type, unsigned long long flags)
{
	drv.calls++;
	drv.ptr = ptr;
	drv.size = size;
	drv.type = (int)type;
	drv.flags = flags;
	if (drv.fail != CUDA_SUCCESS)
		return drv.fail;
	drv.fd = memfd_create("standin-dmabuf", MFD_CLOEXEC);
	assert_true(drv.fd >= 0);
	memcpy(handle, &drv.fd, sizeof(drv.fd));
	return CUDA_SUCCESS;
}

static struct sm_cuda_api driver = {
	.device_get = d_device_get,
	.device_get_attribute = d_attribute,
	.mem_get_handle_for_address_range = d_range_handle,
};

const struct sm_cuda_api *sm_cu(void)
{
	return drv.absent ? NULL : &driver;
}

const struct sm_cuda_info *sm_cuda_load(void)
{
	static const struct sm_cuda_info none = { .reason = "libcuda.so.1: not here" };

	return &none;
}

int sm_cuda_fail(CUresult rc, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sm_fail(SM_ERR_CUDA, "%s: CUDA error %d", what, (int)rc);
}

/* ---- the device's ibv_reg_dmabuf_mr, which needs a real device ----------- */

static struct {
	int answer;		/* errno for a refusal, 0 = register */
	int calls, deregs;
	struct ibv_pd *pd;
	uint64_t offset, iova;
	size_t length;
	int fd, access;
	int fd_open;		/* the descriptor was open during the call */
} dev;

static struct ibv_mr fake_mr;
static struct ibv_pd fake_pd;

static struct ibv_mr *v_reg_dmabuf(struct ibv_pd *pd, uint64_t offset, size_t length,
				   uint64_t iova, int fd, int access)
{
	dev.calls++;
	dev.pd = pd;
	dev.offset = offset;
	dev.length = length;
	dev.iova = iova;
	dev.fd = fd;
	dev.access = access;
	dev.fd_open = fd >= 0 && fcntl(fd, F_GETFD) != -1;
	if (dev.answer) {
		errno = dev.answer;
		return NULL;
	}
	return &fake_mr;
}

static int v_dereg(struct ibv_mr *mr)
{
	assert_ptr_equal(mr, &fake_mr);
	dev.deregs++;
	return 0;
}

static const struct ib_fns verbs = {
	.loaded = 1,
	.reg_dmabuf_mr = v_reg_dmabuf,
	.dereg_mr = v_dereg,
};

static int reset(void **state)
{
	(void)state;
	memset(&drv, 0, sizeof(drv));
	drv.attr = 1;
	drv.fd = -1;
	memset(&dev, 0, sizeof(dev));
	return 0;
}

/* A device that passed the probe. */
static struct ib_dev probed_dev(void)
{
	struct ib_dev d;

	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "mlx5_7");
	d.pd = &fake_pd;
	d.dmabuf = 1;
	return d;
}

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

/* ---- the probe ------------------------------------------------------------ */

/* What each answer to a registration of fd -1 means: EBADF (the driver
 * looked the descriptor up) is support, the "not supported" errnos and
 * anything unexpected are not; the probe asks exactly what NCCL asks. */
static void test_probe_answers(void **state)
{
	static const struct {
		int err, ok;
		const char *says;
	} rows[] = {
		{ EBADF, 1, "answered EBADF" },
		{ EOPNOTSUPP, 0, "answered EOPNOTSUPP: its driver has no DMA-BUF" },
		{ EPROTONOSUPPORT, 0, "answered EPROTONOSUPPORT: its driver has no DMA-BUF" },
		{ ENOSYS, 0, "answered ENOSYS: its driver has no DMA-BUF" },
		{ EINVAL, 0, "answered EINVAL (Invalid argument), not EBADF" },
		{ EIO, 0, "answered an unexpected error (Input/output error), not EBADF" },
	};
	char why[IB_WHY_BYTES];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		dev.answer = rows[i].err;
		why[0] = '\0';
		assert_int_equal(ib_dmabuf_probe(&verbs, &fake_pd, why, sizeof(why)), rows[i].ok);
		print_message("# errno %d: %s\n", rows[i].err, why);
		assert_non_null(strstr(why, rows[i].says));
		assert_int_equal(dev.calls, (int)i + 1);
		assert_ptr_equal(dev.pd, &fake_pd);
		assert_int_equal(dev.offset, 0);
		assert_int_equal(dev.length, 0);
		assert_int_equal(dev.iova, 0);
		assert_int_equal(dev.fd, -1);
		assert_int_equal(dev.access, 0);
	}
	assert_int_equal(dev.deregs, 0);
}

/* A driver that registers no descriptor at all is trusted with nothing,
 * and what it registered is released. */
static void test_probe_success_refused(void **state)
{
	char why[IB_WHY_BYTES];

	(void)state;
	dev.answer = 0;
	assert_int_equal(ib_dmabuf_probe(&verbs, &fake_pd, why, sizeof(why)), 0);
	assert_int_equal(dev.deregs, 1);
	assert_non_null(strstr(why, "succeeded"));
}

/* A libibverbs from before IBVERBS_1.12 has no such call: no probe, no
 * GPUDirect RDMA, and the reason says which library is too old. */
static void test_probe_without_verb(void **state)
{
	struct ib_fns old = verbs;
	char why[IB_WHY_BYTES];

	(void)state;
	old.reg_dmabuf_mr = NULL;
	assert_int_equal(ib_dmabuf_probe(&old, &fake_pd, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no ibv_reg_dmabuf_mr"));
	assert_int_equal(dev.calls, 0);
}

/* ---- GPU memory registered through DMA-BUF -------------------------------- */

/* The plugin asks the driver for the whole pages holding the range, the
 * device registers them at their own address (so the range's keys work
 * wherever it starts in its page), and the descriptor is closed once the
 * memory region holds the memory. */
static void test_gpu_mr_from_driver(void **state)
{
	struct ib_dev d = probed_dev();
	const uintptr_t base = 0x7f0000001234;
	struct ibv_mr *mr = NULL;
	int before = open_fds();

	(void)state;
	assert_int_equal(ib_gpu_mr(&verbs, &d, base, 10000, -1, 0, &mr), SM_OK);
	assert_ptr_equal(mr, &fake_mr);
	assert_int_equal(drv.calls, 1);
	assert_int_equal(drv.ptr, 0x7f0000001000);
	assert_int_equal(drv.size, 3 * PAGE);		/* 0x...1000 up to 0x...4000 */
	assert_int_equal(drv.type, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
	assert_int_equal(drv.flags, 0);
	assert_int_equal(dev.calls, 1);
	assert_ptr_equal(dev.pd, &fake_pd);
	assert_int_equal(dev.fd, drv.fd);
	assert_true(dev.fd_open);
	assert_int_equal(dev.offset, 0);
	assert_int_equal(dev.length, 3 * PAGE);
	assert_int_equal(dev.iova, 0x7f0000001000);
	assert_int_equal(dev.access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_false(is_open(drv.fd));
	assert_int_equal(open_fds(), before);
}

/* NCCL's own descriptor (regMrDmaBuf): registered at NCCL's offset, no
 * driver call, and left open, since NCCL closes it itself. */
static void test_gpu_mr_from_nccl(void **state)
{
	struct ib_dev d = probed_dev();
	struct ibv_mr *mr = NULL;
	int fd = memfd_create("nccl-dmabuf", MFD_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ib_gpu_mr(&verbs, &d, 0x7f0000010000, 65536, fd, 8192, &mr), SM_OK);
	assert_ptr_equal(mr, &fake_mr);
	assert_int_equal(drv.calls, 0);
	assert_int_equal(dev.fd, fd);
	assert_int_equal(dev.offset, 8192);
	assert_int_equal(dev.length, 65536);
	assert_int_equal(dev.iova, 0x7f0000010000);
	assert_true(is_open(fd));
	close(fd);
}

/* The driver refuses the handle: a CUDA error naming the call and the
 * device, and the device is never asked. */
static void test_gpu_mr_driver_refuses(void **state)
{
	struct ib_dev d = probed_dev();
	struct ibv_mr *mr = &fake_mr;

	(void)state;
	drv.fail = CUDA_ERROR_NOT_SUPPORTED;
	assert_int_equal(ib_gpu_mr(&verbs, &d, 0x7f0000000000, 4096, -1, 0, &mr), SM_ERR_CUDA);
	assert_null(mr);
	assert_non_null(strstr(sm_last_error(), "mlx5_7"));
	assert_non_null(strstr(sm_last_error(), "cuMemGetHandleForAddressRange"));
	assert_int_equal(dev.calls, 0);
}

/* The device refuses the registration: the error names it and the
 * driver's descriptor is closed all the same. */
static void test_gpu_mr_device_refuses(void **state)
{
	struct ib_dev d = probed_dev();
	struct ibv_mr *mr = &fake_mr;
	int before = open_fds();

	(void)state;
	dev.answer = EFAULT;
	assert_int_equal(ib_gpu_mr(&verbs, &d, 0x7f0000000000, 4096, -1, 0, &mr), SM_ERR_SYSTEM);
	assert_null(mr);
	assert_non_null(strstr(sm_last_error(), "ibv_reg_dmabuf_mr"));
	assert_non_null(strstr(sm_last_error(), "mlx5_7"));
	assert_non_null(strstr(sm_last_error(), strerror(EFAULT)));
	assert_false(is_open(drv.fd));
	assert_int_equal(open_fds(), before);
}

/* A device whose probe said no: refused before the driver or the device
 * is asked, with the probe's answer in the message. */
static void test_gpu_mr_unprobed_device(void **state)
{
	struct ib_dev d = probed_dev();
	struct ibv_mr *mr = &fake_mr;

	(void)state;
	d.dmabuf = 0;
	snprintf(d.dmabuf_why, sizeof(d.dmabuf_why), "the DMA-BUF probe answered EOPNOTSUPP");
	assert_int_equal(ib_gpu_mr(&verbs, &d, 0x7f0000000000, 4096, -1, 0, &mr), SM_ERR_USAGE);
	assert_null(mr);
	assert_non_null(strstr(sm_last_error(), "answered EOPNOTSUPP"));
	assert_int_equal(drv.calls + dev.calls, 0);
}

/* ---- the GPU's side -------------------------------------------------------- */

static void test_gpu_supported(void **state)
{
	char why[160];

	(void)state;
	assert_int_equal(sm_dmabuf_gpu_supported(3, why, sizeof(why)), 1);
	drv.attr = 0;
	assert_int_equal(sm_dmabuf_gpu_supported(3, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "GPU 3 does not support DMA-BUF"));
	drv.attr = 1;
	driver.mem_get_handle_for_address_range = NULL;
	assert_int_equal(sm_dmabuf_gpu_supported(3, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no cuMemGetHandleForAddressRange"));
	driver.mem_get_handle_for_address_range = d_range_handle;
	drv.absent = 1;
	assert_int_equal(sm_dmabuf_gpu_supported(3, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no CUDA driver (libcuda.so.1: not here)"));
}

/* No driver: no descriptor, an error instead of a crash. */
static void test_fd_without_driver(void **state)
{
	uintptr_t base = 1;
	size_t span = 1;
	int fd = 5;

	(void)state;
	drv.absent = 1;
	assert_int_equal(sm_dmabuf_fd((void *)0x7f0000000000, 4096, &fd, &base, &span),
			 SM_ERR_CUDA);
	assert_int_equal(fd, -1);
}

/* ---- the real libibverbs --------------------------------------------------- */

/* The loader finds ibv_reg_dmabuf_mr wherever the installed libibverbs
 * has it (IBVERBS_1.12 on), and still loads where it has not. */
static void test_loader_finds_reg_dmabuf(void **state)
{
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	const struct ib_fns *f = ib_fns();
	void *sym, *got;

	(void)state;
	if (!lib) {
		assert_null(f);
		skip();
	}
	assert_non_null(f);
	sym = dlvsym(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
	memcpy(&got, &f->reg_dmabuf_mr, sizeof(got));
	print_message("# libibverbs.so.1 %s ibv_reg_dmabuf_mr\n", sym ? "has" : "lacks");
	assert_ptr_equal(got, sym);
	dlclose(lib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_probe_answers, reset),
		cmocka_unit_test_setup(test_probe_success_refused, reset),
		cmocka_unit_test_setup(test_probe_without_verb, reset),
		cmocka_unit_test_setup(test_gpu_mr_from_driver, reset),
		cmocka_unit_test_setup(test_gpu_mr_from_nccl, reset),
		cmocka_unit_test_setup(test_gpu_mr_driver_refuses, reset),
		cmocka_unit_test_setup(test_gpu_mr_device_refuses, reset),
		cmocka_unit_test_setup(test_gpu_mr_unprobed_device, reset),
		cmocka_unit_test_setup(test_gpu_supported, reset),
		cmocka_unit_test_setup(test_fd_without_driver, reset),
		cmocka_unit_test(test_loader_finds_reg_dmabuf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* What ibverbs says at setup (tp_ops.offer, .pick): a listener offers its
 * RDMA device, with the port's address in the handle; a connector takes
 * ibverbs where both ends have a device, and fails with this host's
 * reason where NCCL_SYMMEM_BACKEND=ib requires it.  Built with or without
 * verbs: without, no device is ever usable. */
#include "ib.h"

int ib_offer(const struct tp_options *opt, void **held, uint8_t offer[TP_OFFER_BYTES])
{
	if (!ib_usable(opt, NULL, held))
		return 0;
	ib_held_gid(*held, offer);
	return 1;
}

int ib_pick(const struct tp_options *opt, const struct tp_handle_info *info, int *picked,
	    void **held)
{
	int required = opt->ib == 2;
	void *d;

	*picked = 0;
	*held = NULL;
	if (opt->backend != TP_BACKEND_AUTO && opt->backend != TP_BACKEND_IB)
		return SM_OK;	/* another kind was named */
	/* Set up over TCP: a listener without a port is refused by TCP's
	 * pick, unless ibverbs was named. */
	if (info->no_tcp)
		return opt->backend == TP_BACKEND_IB ? tp_handle_tcp(info, opt, "ibverbs") : SM_OK;
	if (!opt->ib)
		return SM_OK;
	/* The device is opened here first, so that a failure names this
	 * host's reason rather than the peer's missing offer. */
	if (!ib_usable(opt, info->offered ? info->offer : NULL, &d)) {
		if (!required)
			return SM_OK;
		return sm_fail(SM_ERR_USAGE, "NCCL_SYMMEM_BACKEND=ib, but no RDMA device of this "
			       "host can be used (NCCL_IB_HCA=%s): %s",
			       opt->ib_hca && *opt->ib_hca ? opt->ib_hca : "(unset)", sm_last_error());
	}
	if (!info->offered) {
		ib_held_put(d);
		if (!required)
			return SM_OK;
		return sm_fail(SM_ERR_USAGE, "NCCL_SYMMEM_BACKEND=ib, but the peer (pid %d) has no "
			       "RDMA device it can use", info->pid);
	}
	*held = d;
	*picked = 1;
	return SM_OK;
}

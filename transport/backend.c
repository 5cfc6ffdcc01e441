/* The backends by kind (backend.h), and switching a connection being set
 * up from one kind to another. */
#include "backend.h"
#include "ib.h"
#include "shm.h"
#include "tcp.h"

const struct tp_ops *backend_ops(int backend)
{
	switch (backend) {
	case TP_BACKEND_SHM:
		return &tp_shm_ops;
	case TP_BACKEND_TCP:
		return &tp_tcp_ops;
	case TP_BACKEND_IB:
		return &tp_ib_ops;
	default:
		return NULL;
	}
}

int backend_switch(struct tp_comm **c, int backend, const struct tp_options *opt)
{
	struct tp_comm *old = *c, *n;

	n = comm_new(old->is_send, backend_ops(backend), old->fd);
	if (!n)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	n->peer_pid = old->peer_pid;
	old->fd = -1;		/* the new comm's now */
	tp_close(old);
	*c = n;
	return comm_setup(n, opt);
}

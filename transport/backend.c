/* The backends by kind and in setup's order (backend.h), and switching a
 * connection being set up from one kind to another. */
#include "backend.h"
#include "ib.h"
#include "shm.h"
#include "tcp.h"

static const struct tp_ops *const kinds[] = { &tp_shm_ops, &tp_tcp_ops, &tp_ib_ops };
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

const struct tp_ops *backend_ops(int backend)
{
	for (unsigned i = 0; i < NKINDS; i++)
		if (kinds[i]->kind == backend)
			return kinds[i];
	return NULL;
}

const struct tp_ops *backend_ranked(unsigned i)
{
	const struct tp_ops *order[NKINDS];

	if (i >= NKINDS)
		return NULL;
	/* Three kinds, asked at setup only: sorting each time costs nothing. */
	for (unsigned k = 0; k < NKINDS; k++) {
		unsigned j = k;

		for (; j > 0 && order[j - 1]->priority < kinds[k]->priority; j--)
			order[j] = order[j - 1];
		order[j] = kinds[k];
	}
	return order[i];
}

const struct tp_ops *backend_plain(void)
{
	return &tp_tcp_ops;
}

int backend_required(const struct tp_options *opt)
{
	return opt->ib == 2;
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

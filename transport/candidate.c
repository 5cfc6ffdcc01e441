/* One connection a listener serves, from accept until it proved the
 * token and its comm is ready (or it is dropped).
 *
 * Every step is one non-blocking read or write; a candidate that has not
 * proved the token within CANDIDATE_PATIENCE_NS is dropped, so a silent
 * or slow one holds its slot for that long at most and never holds up
 * the others. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "listen.h"
#include "sock.h"
#include "symmem.h"

/* One log line per listener for the connections it turned away (a flood
 * would fill the log); the rest are counted for the deadline's error. */
void listen_note_refusal(struct tp_listener *l, const char *why)
{
	if (l->refused++ == 0)
		sm_info("refused a connection: %s (further refusals of this listener are "
			"counted, not logged)", why);
}

void cand_init(struct cand *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->memfd = -1;
}

void cand_drop(struct cand *c)
{
	if (c->comm)
		tp_close(c->comm);	/* owns fd */
	else if (c->fd >= 0)
		close(c->fd);
	if (c->memfd >= 0)
		close(c->memfd);
	cand_init(c);
}

void cand_start(struct cand *c, int fd, int uds, const struct cand_peer *peer, uint64_t now)
{
	cand_drop(c);
	c->fd = fd;
	c->uds = uds;
	c->state = CAND_HELLO;
	c->peer = *peer;
	c->since_ns = now;
	c->deadline_ns = now + CANDIDATE_PATIENCE_NS;
}

/* Best effort: tell a refused connector why before hanging up on it, in
 * the message it waits for (the challenge, or the reply once it sent
 * its setup). */
static void refuse(struct tp_listener *l, struct cand *c, int status, const char *why)
{
	if (c->state <= CAND_CHALLENGE) {
		struct wire_challenge r = { .magic = WIRE_MAGIC, .status = status };

		snprintf(r.reason, sizeof(r.reason), "%s", why);
		sm_send_some(c->fd, &r, sizeof(r), -1);
	} else {
		struct wire_reply r = { .magic = WIRE_MAGIC, .status = status };

		snprintf(r.reason, sizeof(r.reason), "%s", why);
		sm_send_some(c->fd, &r, sizeof(r), -1);
	}
	listen_note_refusal(l, why);
	cand_drop(c);
}

/* 1 for the nonce of a good hello not seen before, which is kept; 0 for
 * a copy. */
static int nonce_fresh(struct tp_listener *l, const uint8_t nonce[WIRE_NONCE])
{
	unsigned n = l->nnonces < CAND_NONCES ? l->nnonces : CAND_NONCES;

	for (unsigned i = 0; i < n; i++)
		if (!memcmp(l->nonces[i], nonce, WIRE_NONCE))
			return 0;
	memcpy(l->nonces[l->nnonces++ % CAND_NONCES], nonce, WIRE_NONCE);
	return 1;
}

static int speaks_ours(const struct wire_hello *h)
{
	return h->magic == WIRE_MAGIC && h->version == WIRE_VERSION;
}

/* The hello is whole (or its head is not ours): answer with our nonce
 * and proof, or refuse.  Only a holder of the token gets further than
 * its ticket. */
static void on_hello(struct tp_listener *l, struct cand *c, uint64_t now)
{
	const struct wire_hello *h = &c->hello;
	const struct tp_ops *ops = backend_ops(h->backend);
	uint8_t want[WIRE_MAC];
	char why[96];

	if (!speaks_ours(h)) {
		snprintf(why, sizeof(why), "not a symmem connector speaking wire version %d "
			 "(mixed plugin versions?)", WIRE_VERSION);
		refuse(l, c, SM_ERR_INVALID, why);
		return;
	}
	wire_ticket(l->token, h, want);
	if (!wire_mac_equal(h->ticket, want)) {
		refuse(l, c, SM_ERR_INVALID, "the connector did not prove it holds the "
		       "connection token");
		return;
	}
	if (!nonce_fresh(l, h->nonce)) {
		refuse(l, c, SM_ERR_INVALID, "the connector's hello was seen before (a copy)");
		return;
	}
	if (c->uds != (ops && ops->local)) {
		refuse(l, c, SM_ERR_INVALID, "connector asked for a data path this socket cannot "
		       "carry");
		return;
	}
	if (ops && ops->offer && !l->held[ops->kind]) {
		snprintf(why, sizeof(why), "connector asked for %s, which this listener does not "
			 "take", ops->title);
		refuse(l, c, SM_ERR_INVALID, why);
		return;
	}
	memset(&c->chal, 0, sizeof(c->chal));
	c->chal.magic = WIRE_MAGIC;
	if (sock_random(c->chal.nonce, sizeof(c->chal.nonce))) {
		refuse(l, c, SM_ERR_SYSTEM, sm_last_error());
		return;
	}
	wire_proof(l->token, 1, h, c->chal.nonce, c->chal.proof);
	c->state = CAND_CHALLENGE;
	c->since_ns = now;
	c->done = 0;
}

/* The connector proved the token: its comm, and the reply. */
static int build_comm(struct tp_listener *l, struct cand *c)
{
	const struct wire_hello *h = &c->hello;
	const struct tp_ops *ops = backend_ops(h->backend);
	int rc;

	/* on_hello let through only kinds this socket carries, and over
	 * TCP kinds this build does not know, which get the plain one. */
	if (!ops)
		ops = backend_plain();

	c->comm = comm_new(0, ops, c->fd);
	if (!c->comm)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	/* For log lines; on the Unix socket the kernel's word, else the peer's. */
	c->comm->peer_pid = c->uds ? c->peer.pid : (int)h->pid;
	memset(&c->reply, 0, sizeof(c->reply));
	c->reply.backend = h->backend;
	c->reply.flags = backend_required(&l->opt) ? WIRE_REQUIRED : 0;
	rc = comm_setup(c->comm, &l->opt);
	if (!rc && ops->accept_open)
		rc = ops->accept_open(c->comm, &l->opt, l->held[ops->kind], h, &c->setup,
				      c->memfd, &c->reply);
	/* The backend's path cannot reach the connector (ibverbs ports on
	 * different networks): the plain kind, which the reply tells it. */
	if (!rc && c->reply.backend != h->backend) {
		c->reply.backend = backend_plain()->kind;
		rc = backend_switch(&c->comm, c->reply.backend, &l->opt);
	}
	if (c->memfd >= 0)
		close(c->memfd);
	c->memfd = -1;
	if (rc) {
		c->comm->fd = -1;	/* refuse() still needs the socket */
		tp_close(c->comm);
		c->comm = NULL;
		return rc;
	}
	c->reply.magic = WIRE_MAGIC;
	c->reply.status = SM_OK;
	return SM_OK;
}

/* The setup is whole: check the connector's proof, then build its comm.
 * A stranger is dropped (SM_OK); a failure of the real connector's setup
 * is the accept's error. */
static int on_setup(struct tp_listener *l, struct cand *c)
{
	uint8_t want[WIRE_MAC];
	char why[sizeof(c->reply.reason)];
	int rc;

	wire_proof(l->token, 0, &c->hello, c->chal.nonce, want);
	if (c->setup.magic != WIRE_MAGIC || !wire_mac_equal(c->setup.proof, want)) {
		refuse(l, c, SM_ERR_INVALID, "the connector did not prove it holds the "
		       "connection token");
		return SM_OK;
	}
	rc = build_comm(l, c);
	if (rc) {
		snprintf(why, sizeof(why), "%s", sm_last_error());
		refuse(l, c, rc, why);
		return sm_fail(rc, "%s", why);
	}
	c->state = CAND_REPLY;
	c->done = 0;
	return SM_OK;
}

/* Moves `len` bytes of message `buf` on: 1 once whole, 0 not yet, -1
 * when the peer hung up (sm_last_error says how). */
static int move(struct cand *c, void *buf, size_t len, int writing, int *fd)
{
	ssize_t n = writing ? sm_send_some(c->fd, (uint8_t *)buf + c->done, len - c->done, -1) :
			      sm_recv_some(c->fd, (uint8_t *)buf + c->done, len - c->done, fd);

	if (n < 0)
		return -1;
	c->done += (size_t)n;
	return c->done == len;
}

/* A kind with a last step (ops->connect_join: ibverbs, whose queue pair
 * may take no receive before the connector's is ready and its probe write
 * came back) waits for the connector's verdict.  1 once it came, 0 not
 * yet. */
static int verdict(struct tp_listener *l, struct cand *c, int *rc)
{
	char v, route[200];
	ssize_t n = sm_recv_some(c->fd, &v, 1, NULL);

	*rc = SM_OK;
	if (n == 0)
		return 0;
	if (n < 0 || v == VERDICT_FAIL) {
		route[0] = '\0';
		if (c->comm->ops->route)
			c->comm->ops->route(c->comm, route, sizeof(route));
		*rc = n < 0 ? sm_fail(SM_ERR_REMOTE, "connector hung up during setup") :
		      sm_fail(SM_ERR_REMOTE, "%s %s cannot reach each other, the connector "
			      "found (NCCL_SYMMEM_BACKEND=%s requires %s)", c->comm->ops->title,
			      route, c->comm->ops->name, c->comm->ops->title);
		cand_drop(c);
		return 0;
	}
	if (v == VERDICT_PLAIN) {
		sm_info("the connector (pid %d) cannot reach this host's %s port: this "
			"connection uses %s", c->comm->peer_pid, c->comm->ops->title,
			backend_plain()->title);
		*rc = backend_switch(&c->comm, backend_plain()->kind, &l->opt);
		if (*rc)
			cand_drop(c);
	}
	return *rc == SM_OK;
}

int cand_step(struct tp_listener *l, struct cand *c, uint64_t now, struct tp_comm **out)
{
	int rc, r = 0;

	if (c->state < CAND_REPLY && now > c->deadline_ns) {
		listen_note_refusal(l, "a connection did not prove the token in time");
		cand_drop(c);
		return SM_OK;
	}
	switch (c->state) {
	case CAND_HELLO:
		r = move(c, &c->hello, sizeof(c->hello), 0, NULL);
		if (r > 0 || (r == 0 && c->done >= WIRE_HELLO_HEAD && !speaks_ours(&c->hello)))
			on_hello(l, c, now);
		break;
	case CAND_CHALLENGE:
		r = move(c, &c->chal, sizeof(c->chal), 1, NULL);
		if (r > 0) {
			c->state = CAND_SETUP;
			c->done = 0;
		}
		break;
	case CAND_SETUP:
		r = move(c, &c->setup, sizeof(c->setup), 0, c->uds ? &c->memfd : NULL);
		if (r > 0)
			return on_setup(l, c);
		break;
	case CAND_REPLY:
		r = move(c, &c->reply, sizeof(c->reply), 1, NULL);
		if (r < 0) {
			rc = sm_fail(SM_ERR_REMOTE, "connector hung up during setup");
			cand_drop(c);
			return rc;
		}
		if (r == 0)
			return SM_OK;
		if (!c->comm->ops->connect_join)
			goto done;	/* no verdict to wait for */
		c->state = CAND_VERDICT;
		/* fall through */
	case CAND_VERDICT:
		if (verdict(l, c, &rc))
			goto done;
		return rc;
	}
	if (r < 0)
		cand_drop(c);	/* hung up before proving the token */
	return SM_OK;

done:
	*out = c->comm;
	c->comm = NULL;
	c->fd = -1;
	cand_drop(c);
	return SM_OK;
}

/* The connecting (sending) side of connection setup.
 *
 * NCCL calls connect() again and again with the same handle until it hands
 * back a comm, and the matching accept() may run on the same thread in
 * between, so nothing here may block.  The state of a connect in progress
 * is kept in a process-wide list keyed by the handle's random token: the
 * handle itself stays exactly as the listener wrote it. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "sock.h"
#include "symmem.h"

enum conn_state {
	CONN_CONNECTING,
	CONN_HELLO,
	CONN_CHALLENGE,		/* waiting for the listener's proof */
	CONN_SETUP,		/* sending ours (and the ring) */
	CONN_REPLY,
	CONN_JOIN,		/* the backend's last step (ibverbs: its probe write) */
	CONN_VERDICT,		/* telling the listener how data will move */
};

struct pending {
	struct pending *next;
	uint8_t token[16];
	int state;
	int backend;
	int local;		/* over the Unix socket (tp_ops.local) */
	int fd;
	int memfd;
	struct tp_handle_info info;
	struct tp_options opt;	/* the first call's */
	struct tp_comm *comm;
	struct wire_hello hello;
	struct wire_challenge chal;
	struct wire_setup setup;
	size_t sent;
	struct wire_reply reply;
	size_t got;
	uint64_t deadline_ns;
	/* The listener hung up before a byte of its reply: it turns a
	 * newcomer away, or sheds one that is still silent, when flooded
	 * (listen.h), so this is dialled again after a short pause, until
	 * the deadline. */
	int hung_up_early;
	unsigned redials;
	uint64_t redial_ns;	/* the next redial's pause */
	/* NCCL_ENABLE_FAULT_TOLERANCE: a listener that cannot be reached yet
	 * is tried again after a growing pause, until the deadline. */
	int fault_tolerance;
	unsigned retries;
	uint64_t retry_at_ns;	/* also for a redial */
	uint64_t backoff_ns;	/* the next retry's pause */
	char last_error[160];
	const void *owner;	/* tp_options.owner */
	char verdict;		/* enum wire_verdict */
	char why[512];		/* VERDICT_FAIL: the error once it is sent */
};

/* Characters of a listener's refusal that reach the log at most. */
#define REASON_LOGGED 200

#define RETRY_FIRST_NS (10ull * 1000 * 1000)	/* 10 ms, doubling ... */
#define RETRY_MAX_NS (1000ull * 1000 * 1000)	/* ... up to 1 s */
/* A redial's pause: the listener is there and busy, so short, doubling
 * up to a few ms on one host and a little more between hosts (a dial
 * costs a round trip there), and back to the first once a listener
 * proved the token, whatever happens after. */
#define REDIAL_FIRST_NS (1000ull * 1000)		/* 1 ms */
#define REDIAL_MAX_LOCAL_NS (8ull * 1000 * 1000)	/* 8 ms */
#define REDIAL_MAX_NS (50ull * 1000 * 1000)		/* 50 ms */

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending *pending_list;

static struct pending *pending_find(const uint8_t *token)
{
	for (struct pending *p = pending_list; p; p = p->next)
		if (!memcmp(p->token, token, 16))
			return p;
	return NULL;
}

static void pending_free(struct pending *p)
{
	struct pending **pp;

	for (pp = &pending_list; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (p->memfd >= 0)
		close(p->memfd);
	/* A TCP socket still connecting is not the comm's yet. */
	if (p->fd >= 0 && (!p->comm || p->comm->fd != p->fd))
		close(p->fd);
	if (p->comm)
		tp_close(p->comm);	/* closes its own socket */
	free(p);
}

/* The kind that carries the connection: the first, in the registry's
 * order, that picks it.  A pick may fail the connect instead (a kind opt
 * requires that cannot be had); *held is what the picked kind holds for
 * the comm. */
static int choose_backend(const struct tp_options *opt, const struct tp_handle_info *info,
			  void **held)
{
	const struct tp_ops *ops;

	*held = NULL;
	for (unsigned i = 0; (ops = backend_ranked(i)) != NULL; i++) {
		int picked = 0;

		if (ops->pick(opt, info, &picked, held))
			return -1;
		if (picked)
			return ops->kind;
	}
	sm_fail(SM_ERR_USAGE, "no backend of this build reaches the listener (pid %d)", info->pid);
	return -1;
}

/* Lets go of what choose_backend held for the comm (which took its own). */
static void put_held(int backend, void *held)
{
	const struct tp_ops *ops = backend_ops(backend);

	if (ops && ops->put && held)
		ops->put(held);
}

/* First call for a handle: open the socket and, on one host, the ring. */
static int pending_start(const struct tp_options *opt, const struct tp_handle_info *info,
			 struct pending **out)
{
	void *held = NULL;
	struct pending *p;
	int rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	memcpy(p->token, info->token, 16);
	p->info = *info;
	p->opt = *opt;
	p->fd = -1;
	p->memfd = -1;
	p->backend = choose_backend(opt, info, &held);
	p->local = p->backend >= 0 && backend_ops(p->backend)->local;
	p->deadline_ns = sm_now_ns() + (uint64_t)(opt->connect_timeout * 1e9);
	p->fault_tolerance = opt->fault_tolerance;
	p->owner = opt->owner;
	p->backoff_ns = RETRY_FIRST_NS;
	p->redial_ns = REDIAL_FIRST_NS;
	p->hello.magic = WIRE_MAGIC;
	p->hello.version = WIRE_VERSION;
	p->hello.backend = (uint16_t)p->backend;
	p->hello.pid = (uint32_t)getpid();
	p->hello.flags = backend_required(opt) ? WIRE_REQUIRED : 0;
	p->setup.magic = WIRE_MAGIC;
	p->next = pending_list;
	pending_list = p;

	if (p->backend < 0) {
		rc = SM_ERR_USAGE;
		goto fail;
	}
	rc = sock_random(p->hello.nonce, sizeof(p->hello.nonce));
	if (rc)
		goto fail;
	/* The socket is opened by the first step (and again by a retry); on
	 * one host the backend makes the ring, passed with the setup. */
	p->comm = comm_new(1, backend_ops(p->backend), -1);
	if (!p->comm) {
		rc = sm_fail(SM_ERR_SYSTEM, "out of memory");
		goto fail;
	}
	p->comm->peer_pid = info->pid;	/* the listener's, for log lines */
	rc = comm_setup(p->comm, opt);
	if (!rc && p->comm->ops->connect_open)
		rc = p->comm->ops->connect_open(p->comm, opt, held, &p->setup, &p->memfd);
	if (rc)
		goto fail;
	p->state = CONN_CONNECTING;
	put_held(p->backend, held);	/* the comm holds its own */
	*out = p;
	return SM_OK;

fail:
	put_held(p->backend, held);
	pending_free(p);
	return rc;
}

/* The ring's fd goes only to the rank that made the handle: an abstract
 * socket name has no permissions, and once that rank's listener is gone
 * (a restart NCCL_ENABLE_FAULT_TOLERANCE retries through) anyone on the
 * host could bind the name and read every byte sent through the ring. */
static int check_listener(const struct pending *p)
{
	int pid, uid;

	if (sock_peer_cred(p->fd, &pid, &uid))
		return sm_fail(SM_ERR_SYSTEM, "SO_PEERCRED of the listener's socket: %s",
			       strerror(errno));
	if (pid != p->info.pid || uid != (int)getuid())
		return sm_fail(SM_ERR_REMOTE, "the listener's socket is held by pid %d (uid %d), "
			       "not by pid %d that made the handle: not connecting", pid, uid,
			       p->info.pid);
	return SM_OK;
}

/* Where the listener was to be found, for messages. */
static void listener_place(const struct pending *p, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN];

	if (p->local) {
		snprintf(buf, len, "socket @%s", p->info.uds_name);
		return;
	}
	if (!inet_ntop(p->info.family, p->info.addr, addr, sizeof(addr)))
		snprintf(addr, sizeof(addr), "?");
	snprintf(buf, len, "%s port %u", addr, p->info.port);
}

/* The listener's reason for a refusal: unauthenticated (anyone at its
 * address may send it), so it reaches the log escaped and bounded. */
static int refused(const char *reason, size_t len)
{
	char why[REASON_LOGGED];

	return sm_fail(SM_ERR_REMOTE, "listener refused the connection: %s",
		       sm_escape(why, sizeof(why), reason, len));
}

/* The challenge is whole: the listener must prove the token before our
 * proof, or the ring, goes out. */
static int check_challenge(struct pending *p)
{
	uint8_t want[WIRE_MAC];
	char place[96];

	if (p->chal.magic != WIRE_MAGIC)
		return sm_fail(SM_ERR_REMOTE, "listener answered with a malformed challenge");
	if (p->chal.status != SM_OK)
		return refused(p->chal.reason, sizeof(p->chal.reason));
	wire_proof(p->token, 1, &p->hello, p->chal.nonce, want);
	if (!wire_mac_equal(p->chal.proof, want)) {
		listener_place(p, place, sizeof(place));
		return sm_fail(SM_ERR_REMOTE, "the process at %s did not prove it holds this "
			       "connection's token: it is not the listener (pid %d) that made the "
			       "handle, which may be gone; not connecting", place, p->info.pid);
	}
	wire_proof(p->token, 0, &p->hello, p->chal.nonce, p->setup.proof);
	p->comm->fd = p->fd;
	p->redial_ns = REDIAL_FIRST_NS;
	return SM_OK;
}

/* Hello out, challenge in, setup out (the ring rides along with its
 * first byte); CONN_REPLY once all is sent. */
static int handshake(struct pending *p)
{
	ssize_t n;
	int rc;

	if (p->state == CONN_HELLO) {
		n = sm_send_some(p->fd, (uint8_t *)&p->hello + p->sent, sizeof(p->hello) - p->sent,
				 -1);
		if (n < 0)
			goto hung_up;
		p->sent += (size_t)n;
		if (p->sent < sizeof(p->hello))
			return SM_OK;
		p->state = CONN_CHALLENGE;
		p->got = 0;
	}
	if (p->state == CONN_CHALLENGE) {
		n = sm_recv_some(p->fd, (uint8_t *)&p->chal + p->got, sizeof(p->chal) - p->got,
				 NULL);
		if (n < 0)
			goto hung_up;
		p->got += (size_t)n;
		if (p->got < sizeof(p->chal))
			return SM_OK;
		rc = check_challenge(p);
		if (rc)
			return rc;
		p->state = CONN_SETUP;
		p->sent = 0;
	}
	/* The ring goes with every setup sent: kept until the reply, for a
	 * redial. */
	n = sm_send_some(p->fd, (uint8_t *)&p->setup + p->sent, sizeof(p->setup) - p->sent,
			 p->sent == 0 ? p->memfd : -1);
	if (n < 0) {
		p->hung_up_early = 1;
		return sm_fail(SM_ERR_REMOTE, "the listener hung up before reading our setup: %s",
			       sm_last_error());
	}
	p->sent += (size_t)n;
	if (p->sent < sizeof(p->setup))
		return SM_OK;
	p->state = CONN_REPLY;
	p->got = 0;
	return SM_OK;

hung_up:
	p->hung_up_early = 1;
	return sm_fail(SM_ERR_REMOTE, "the listener hung up before proving the token: %s",
		       sm_last_error());
}

/* Advances one step at a time; *done = 1 once the listener said yes. */
static int pending_step(struct pending *p, int *done)
{
	ssize_t n;
	int rc;

	*done = 0;
	if (p->state == CONN_CONNECTING) {
		if (p->local) {
			rc = sock_uds_connect(p->info.uds_name, &p->fd);
			if (rc)
				return rc;
			if (p->fd < 0)
				return SM_OK;	/* listener backlog full: later */
			rc = check_listener(p);
			if (rc)
				return rc;
		} else {
			int inprogress = 0;

			/* Checked at once too: the hello goes out as soon as it
			 * can, a silent connection being the first a flooded
			 * listener lets go (listen.h). */
			if (p->fd < 0) {
				rc = sock_tcp_connect(&p->info, &p->fd, &inprogress);
				if (rc)
					return rc;
			}
			rc = sock_connect_done(p->fd);
			if (rc < 0)
				return SM_ERR_REMOTE;
			if (rc == 0)
				return SM_OK;
		}
		wire_ticket(p->token, &p->hello, p->hello.ticket);	/* over this dial's nonce */
		p->state = CONN_HELLO;
		p->sent = 0;
	}
	if (p->state <= CONN_SETUP) {
		rc = handshake(p);
		if (rc || p->state != CONN_REPLY)
			return rc;
	}
	if (p->state == CONN_JOIN)
		goto join;
	if (p->state == CONN_VERDICT)
		goto verdict;
	n = sm_recv_some(p->fd, (uint8_t *)&p->reply + p->got, sizeof(p->reply) - p->got, NULL);
	if (n < 0) {
		/* Not a byte of the reply: a flooded listener dropped this
		 * connection before it read the setup (it never drops one it
		 * read), so dial again; after a byte it is a failure. */
		p->hung_up_early = p->got == 0;
		return sm_fail(SM_ERR_REMOTE, "listener hung up during setup: %s", sm_last_error());
	}
	p->got += (size_t)n;
	if (p->got < sizeof(p->reply))
		return SM_OK;
	if (p->memfd >= 0) {
		close(p->memfd);	/* the listener holds its own copy now */
		p->memfd = -1;
	}
	if (p->reply.magic != WIRE_MAGIC)
		return sm_fail(SM_ERR_REMOTE, "listener answered with a malformed reply");
	if (p->reply.status != SM_OK)
		return refused(p->reply.reason, sizeof(p->reply.reason));
	if (!p->comm->ops->connect_join) {
		*done = 1;
		return SM_OK;
	}
	if (p->reply.backend == backend_plain()->kind) {
		/* The listener's end could not join ours; its log says why. */
		sm_info("the listener (pid %d) cannot reach this host's %s port: this "
			"connection uses %s", p->info.pid, p->comm->ops->title,
			backend_plain()->title);
		rc = backend_switch(&p->comm, p->reply.backend, &p->opt);
		*done = rc == SM_OK;
		return rc;
	}
	p->state = CONN_JOIN;
join:
	/* The verdict goes to the listener once the backend has one. */
	rc = p->comm->ops->connect_join(p->comm, &p->opt, &p->reply, &p->verdict);
	if (rc || p->verdict == VERDICT_NONE)
		return rc;
	if (p->verdict == VERDICT_FAIL)
		snprintf(p->why, sizeof(p->why), "%s", sm_last_error());
verdict:
	p->state = CONN_VERDICT;
	n = sm_send_some(p->fd, &p->verdict, 1, -1);
	if (n < 0 && p->verdict != VERDICT_FAIL)
		return sm_fail(SM_ERR_REMOTE, "listener hung up during setup: %s", sm_last_error());
	if (n == 0)
		return SM_OK;
	if (p->verdict == VERDICT_FAIL)
		return sm_fail(SM_ERR_REMOTE, "%s", p->why);
	if (p->verdict == VERDICT_PLAIN) {
		rc = backend_switch(&p->comm, backend_plain()->kind, &p->opt);
		if (rc)
			return rc;
	}
	*done = 1;
	return SM_OK;
}

/* NCCL may give up on a connect (an abort, another rank's failure) and
 * never call again with that handle: entries past their deadline are
 * freed by the next connect of any handle, and every entry of a context
 * when NCCL finalizes it (tp_connect_abandon), so an abandoned one holds
 * its socket, ring and comm at most until then. */
static void pending_sweep(const uint8_t *keep)
{
	uint64_t now = sm_now_ns();
	struct pending *p = pending_list, *next;

	for (; p; p = next) {
		next = p->next;
		if (now > p->deadline_ns && memcmp(p->token, keep, 16))
			pending_free(p);
	}
}

int tp_connect_abandon(const void *owner)
{
	struct pending *p, *next;
	int n = 0;

	if (!owner)
		return 0;
	pthread_mutex_lock(&pending_lock);
	for (p = pending_list; p; p = next) {
		next = p->next;
		if (p->owner != owner)
			continue;
		pending_free(p);
		n++;
	}
	pthread_mutex_unlock(&pending_lock);
	return n;
}

int tp_pending_connects(void)
{
	int n = 0;

	pthread_mutex_lock(&pending_lock);
	for (struct pending *p = pending_list; p; p = p->next)
		n++;
	pthread_mutex_unlock(&pending_lock);
	return n;
}

/* Connects whose setup is all sent, waiting for the listener's reply or
 * past it: a test stops driving one there to kill its listener. */
int tp_connects_awaiting_reply(void)
{
	int n = 0;

	pthread_mutex_lock(&pending_lock);
	for (struct pending *p = pending_list; p; p = p->next)
		n += p->state >= CONN_REPLY;
	pthread_mutex_unlock(&pending_lock);
	return n;
}

/* Closes the socket; the next step dials again once `pause` is over. */
static void pause_then_dial(struct pending *p, uint64_t now, uint64_t pause)
{
	if (p->comm && p->comm->fd == p->fd)
		p->comm->fd = -1;	/* given to the comm by the challenge: not its any more */
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->state = CONN_CONNECTING;
	/* The last pause ends at the deadline, so the connect gives up there
	 * and not up to a whole pause early. */
	p->retry_at_ns = now + pause;
	if (p->retry_at_ns > p->deadline_ns)
		p->retry_at_ns = p->deadline_ns;
}

static uint64_t doubled(uint64_t ns, uint64_t max)
{
	return ns * 2 > max ? max : ns * 2;
}

/* With NCCL_ENABLE_FAULT_TOLERANCE, a listener that could not be reached
 * (refused, unreachable: it may be restarting, or the network flapping)
 * is tried again with a fresh socket after a pause that doubles up to 1 s,
 * while the connect deadline allows.  Anything after the socket connected
 * (a refusal by the listener, a malformed reply) is not transient.
 * Returns 1 when a retry is scheduled. */
static int pending_retry(struct pending *p)
{
	uint64_t now = sm_now_ns();

	if (!p->fault_tolerance || p->state != CONN_CONNECTING || now >= p->deadline_ns)
		return 0;
	snprintf(p->last_error, sizeof(p->last_error), "%s", sm_last_error());
	if (p->retries == 0)
		sm_info("listener of pid %d not reachable (%s); retrying until the connect deadline "
			"(NCCL_ENABLE_FAULT_TOLERANCE=1)", p->info.pid, p->last_error);
	p->retries++;
	pause_then_dial(p, now, p->backoff_ns);
	p->backoff_ns = doubled(p->backoff_ns, RETRY_MAX_NS);
	return 1;
}

/* A listener that hung up before a byte of its reply turned this
 * connection away or dropped it to make room (listen.h), or is gone:
 * dialled again with a fresh nonce, always (a gone one refuses the next
 * dial at once).  Returns 1 when a redial is scheduled. */
static int pending_redial(struct pending *p)
{
	uint64_t now = sm_now_ns();

	if (!p->hung_up_early || now >= p->deadline_ns)
		return 0;
	p->hung_up_early = 0;
	snprintf(p->last_error, sizeof(p->last_error), "%s", sm_last_error());
	if (sock_random(p->hello.nonce, sizeof(p->hello.nonce)))
		return 0;
	p->redials++;
	pause_then_dial(p, now, p->redial_ns);
	p->redial_ns = doubled(p->redial_ns, p->local ? REDIAL_MAX_LOCAL_NS :
				REDIAL_MAX_NS);
	return 1;
}

/* A connect that ran out of time redialling a listener that hung up
 * `times`, the last with `why`. */
static int hung_up_error(const struct pending *p, const struct tp_options *opt, unsigned times,
			 const char *why)
{
	return sm_fail(SM_ERR_REMOTE, "the listener (pid %d) hung up %u times before proving the "
		       "token or reading our setup within %.1f s (NCCL_SYMMEM_CONNECT_TIMEOUT; "
		       "flooded with connections?): %s", p->info.pid, times, opt->connect_timeout,
		       why);
}

int tp_connect(const struct tp_options *opt, const void *handle, struct tp_comm **out)
{
	struct tp_handle_info info;
	struct pending *p;
	int rc, done = 0;

	*out = NULL;
	rc = tp_handle_decode(handle, &info);
	if (rc)
		return rc;
	pthread_mutex_lock(&pending_lock);
	pending_sweep(info.token);
	p = pending_find(info.token);
	if (!p) {
		rc = pending_start(opt, &info, &p);
		if (rc)
			goto out;
	}
	if (sm_now_ns() < p->retry_at_ns)
		goto waiting;
	rc = pending_step(p, &done);
	if (rc && (pending_retry(p) || pending_redial(p))) {
		rc = SM_OK;
		goto waiting;
	}
	if (rc) {
		if (p->retries)
			rc = sm_fail(rc, "%s (after %u retries over %.1f s, NCCL_ENABLE_FAULT_TOLERANCE=1)",
				     sm_last_error(), p->retries, opt->connect_timeout);
		else if (p->redials && p->hung_up_early)	/* the last at the deadline */
			rc = hung_up_error(p, opt, p->redials + 1, sm_last_error());
		pending_free(p);
		goto out;
	}
	if (done) {
		*out = p->comm;
		p->comm = NULL;
		p->fd = -1;
		pending_free(p);
		goto out;
	}
waiting:
	if (sm_now_ns() > p->deadline_ns) {
		if (p->retries)
			rc = sm_fail(SM_ERR_REMOTE, "listener of pid %d not reachable after %u retries "
				     "within %.1f s (NCCL_ENABLE_FAULT_TOLERANCE=1): %s", info.pid,
				     p->retries, opt->connect_timeout, p->last_error);
		else if (p->redials)
			rc = hung_up_error(p, opt, p->redials, p->last_error);
		else
			rc = sm_fail(SM_ERR_REMOTE,
				     "no answer from the listener (pid %d, socket @%s) within %.1f s "
				     "(NCCL_SYMMEM_CONNECT_TIMEOUT)",
				     info.pid, info.uds_name, opt->connect_timeout);
		pending_free(p);
	}
out:
	pthread_mutex_unlock(&pending_lock);
	return rc;
}

/* The plugin's side of the copy helper (symmem-copyd, copyd.c): starting
 * it, asking it to map memory, posting copies into the shared ring and
 * reading their state.  Posting and testing make no CUDA call and no
 * system call, so NCCL's progress thread cannot block inside the driver
 * (copyd_proto.h says why that matters). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy_helper.h"
#include "copyd_proto.h"

extern char **environ;

/* The helper opens a CUDA context and makes its events in the hello:
 * seconds on a loaded host.  A mapping is tens of microseconds. */
#define HELLO_TIMEOUT_MS 60000
#define REQUEST_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 5000
/* After SIGKILL: a helper stuck inside the driver (uninterruptible sleep)
 * dies only when the driver lets go, which may be never. */
#define KILL_TIMEOUT_MS 3000
/* How often a waiting test looks whether the helper still lives. */
#define ALIVE_CHECK_NS (100ull * 1000 * 1000)

/* Mapping requests sent without waiting for their answers
 * (smf_helper_add_post) at most; a later post waits for a free one. */
#define ADD_SLOTS 32

/* An add_slot's state. */
enum {
	ADD_FREE = 0,
	ADD_SENT,		/* its answer is still to read */
	ADD_ANSWERED,		/* read, for its poster to collect */
	ADD_CANCELLED,		/* its poster is gone: the answer's mapping is dropped */
};

/* One mapping request in flight without its poster waiting.  The helper
 * answers requests in the order they came and its replies carry no
 * request number, so the n-th reply read belongs to the n-th request
 * sent: every reader (a waiting request, a poll) reads the posted ones'
 * answers first and files them here. */
struct add_slot {
	int state;
	int status;
	uint32_t id;
	uint64_t sent_ns;
	char msg[160];
};

/* struct smf_helper's reaped: whether its exit status was collected. */
enum {
	REAP_NOT_YET = 0,
	REAP_BUSY,		/* a thread is in waitpid() for it */
	REAP_DONE,		/* collected: its pid is no longer ours to wait on or kill */
};

/* struct smf_helper's dead. */
enum {
	HELPER_ALIVE = 0,
	HELPER_EXITED,		/* its end of the socket is gone */
	HELPER_GIVEN_UP,	/* it did not answer in time: we no longer talk to it */
};

struct smf_helper {
	pid_t pid;
	int ctrl;
	int request_timeout_ms;
	struct cd_ring *ring;
	pthread_mutex_t ctrl_lock;	/* one request and its reply at a time */
	pthread_mutex_t ring_lock;	/* posting order = message order */
	uint64_t next_seq;
	uint64_t started_ns;
	uint8_t orphan[CD_SLOTS];	/* given up while queued: free it once it ends */
	/* Mappings posted without waiting (under ctrl_lock): request n's
	 * answer goes to add[n % ADD_SLOTS]. */
	uint64_t adds_sent, adds_read;
	struct add_slot add[ADD_SLOTS];
	_Atomic uint64_t next_check_ns;
	_Atomic int dead;
	_Atomic int reaped;
};

/* Collects a helper that has exited as soon as it is seen gone, not at
 * smf_helper_stop(), which may be hours later: a zombie until then.  Any
 * thread may get here; one at a time calls waitpid(), and once the pid is
 * collected nobody waits on it or kills it again, since it may by then
 * name another process (a later helper of ours, even). */
static void reap(struct smf_helper *h)
{
	int expect = REAP_NOT_YET, status;
	pid_t r;

	if (h->pid <= 0 || !atomic_compare_exchange_strong(&h->reaped, &expect, REAP_BUSY))
		return;
	r = waitpid(h->pid, &status, WNOHANG);
	/* ECHILD: collected by someone else (SIGCHLD ignored, the
	 * application's waitpid(-1)); the pid is not ours either way.  0: the
	 * socket closes a moment before the exit completes, or a helper
	 * given up still runs; a later call tries again. */
	if (r == h->pid || (r < 0 && errno == ECHILD))
		atomic_store(&h->reaped, REAP_DONE);
	else
		atomic_store(&h->reaped, REAP_NOT_YET);
}

static int helper_gone(struct smf_helper *h)
{
	struct pollfd p = { .fd = h->ctrl, .events = POLLRDHUP };

	if (!atomic_load(&h->dead) && poll(&p, 1, 0) > 0 &&
	    (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
		atomic_store(&h->dead, HELPER_EXITED);
	if (atomic_load(&h->dead) == HELPER_ALIVE)
		return 0;
	reap(h);
	return 1;
}

static int dead_error(struct smf_helper *h)
{
	if (atomic_load(&h->dead) == HELPER_GIVEN_UP)
		return sm_fail(SM_ERR_SYSTEM, "the copy helper (symmem-copyd, pid %d) stopped "
			       "answering; no further requests go to it", (int)h->pid);
	return sm_fail(SM_ERR_SYSTEM, "the copy helper (symmem-copyd, pid %d) has exited",
		       (int)h->pid);
}

/* A helper that did not answer in time.  Its answer may still come.
 * Replies carry no request number, so the next request would take it for
 * its own (a mapping would get the previous one's id, and copies would go
 * to the wrong buffer): this helper gets no more requests.  Under
 * ctrl_lock. */
static int give_up(struct smf_helper *h, int timeout_ms)
{
	atomic_store(&h->dead, HELPER_GIVEN_UP);
	/* Copies it still holds would go on writing into buffers whose
	 * requests now fail and whose owners may reuse them: it is ended,
	 * and they with its context.  Not reaped yet, so the pid is still
	 * this child's. */
	if (atomic_load(&h->reaped) != REAP_DONE)
		kill(h->pid, SIGKILL);
	return sm_fail(SM_ERR_SYSTEM, "the copy helper (pid %d) did not answer in %.1f s; "
		       "it was stopped and no further requests go to it", (int)h->pid,
		       timeout_ms / 1000.0);
}

/* Reads one reply that is there to read.  Under ctrl_lock. */
static int read_reply(struct smf_helper *h, struct cd_reply *r)
{
	int got = -1;
	ssize_t n = sm_recv_some(h->ctrl, r, sizeof(*r), &got);

	if (got >= 0)
		close(got);
	if (n != (ssize_t)sizeof(*r) || r->magic != CD_MAGIC) {
		atomic_store(&h->dead, HELPER_EXITED);
		return dead_error(h);
	}
	return SM_OK;
}

static void send_del(struct smf_helper *h, uint32_t id)
{
	struct cd_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_DEL;
	m.id = id;
	if (sm_wait_fd(h->ctrl, POLLOUT, h->request_timeout_ms) > 0)
		sm_send_some(h->ctrl, &m, sizeof(m), -1);
}

/* Files the answer to the oldest posted mapping; a cancelled one's
 * mapping is dropped at once.  Under ctrl_lock. */
static void file_answer(struct smf_helper *h, const struct cd_reply *r)
{
	struct add_slot *a = &h->add[h->adds_read++ % ADD_SLOTS];

	if (a->state == ADD_CANCELLED) {
		if (!r->status && r->id)
			send_del(h, r->id);
		a->state = ADD_FREE;
		return;
	}
	a->status = r->status;
	a->id = r->id;
	snprintf(a->msg, sizeof(a->msg), "%.150s", r->msg);
	a->state = ADD_ANSWERED;
}

/* Reads the answers to posted mappings: those already there (wait = 0),
 * or all of them, each within timeout_ms (a request whose own answer
 * follows them).  A posted mapping unanswered past the helper's request
 * time gives the helper up, as a waiting request would.  Under ctrl_lock. */
static int read_posted(struct smf_helper *h, int timeout_ms, int wait)
{
	struct cd_reply r;
	int rc;

	while (h->adds_read != h->adds_sent) {
		const struct add_slot *a = &h->add[h->adds_read % ADD_SLOTS];
		uint64_t waited = (sm_now_ns() - a->sent_ns) / 1000000;
		int ready = sm_wait_fd(h->ctrl, POLLIN, wait ? timeout_ms : 0);

		if (ready <= 0 && (wait || waited >= (uint64_t)h->request_timeout_ms))
			return give_up(h, wait ? timeout_ms : h->request_timeout_ms);
		if (ready <= 0)
			return SM_OK;
		rc = read_reply(h, &r);
		if (rc)
			return rc;
		file_answer(h, &r);
	}
	return SM_OK;
}

/* Sends `m` (with `fd` if >= 0) and, unless no_reply, waits for the answer. */
static int request(struct smf_helper *h, const struct cd_msg *m, int fd, int timeout_ms,
		   struct cd_reply *r)
{
	int rc = SM_OK;

	pthread_mutex_lock(&h->ctrl_lock);
	if (helper_gone(h)) {
		rc = dead_error(h);
		goto out;
	}
	/* Answers to mappings posted earlier come before this one's. */
	rc = read_posted(h, timeout_ms, r != NULL);
	if (rc)
		goto out;
	if (sm_wait_fd(h->ctrl, POLLOUT, timeout_ms) <= 0 ||
	    sm_send_some(h->ctrl, m, sizeof(*m), fd) != (ssize_t)sizeof(*m)) {
		rc = helper_gone(h) ? dead_error(h) :
		     sm_fail(SM_ERR_SYSTEM, "the copy helper (pid %d) does not take requests",
			     (int)h->pid);
		goto out;
	}
	if (!r)
		goto out;
	if (sm_wait_fd(h->ctrl, POLLIN, timeout_ms) <= 0) {
		rc = give_up(h, timeout_ms);
		goto out;
	}
	rc = read_reply(h, r);
	if (rc)
		goto out;
	if (r->status)
		rc = sm_fail(r->status, "copy helper: %.180s", r->msg);
out:
	pthread_mutex_unlock(&h->ctrl_lock);
	return rc;
}

char **smf_helper_env(char **env, int all_gpus)
{
	static const char drop[] = "CUDA_VISIBLE_DEVICES=";
	size_t n = 0, k = 0;
	char **out;

	if (!all_gpus)
		return env;
	while (env[n])
		n++;
	out = malloc((n + 1) * sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(env[i], drop, sizeof(drop) - 1) != 0)
			out[k++] = env[i];
	out[k] = NULL;
	return out;
}

/* The helper's end of the socket must be fd 3 in the child and the only
 * descriptor it inherits besides stdio (it closes the rest itself). */
static int spawn(const char *path, int child_end, int all_gpus, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	char client[24], *argv[3], **env;
	sigset_t none, all;
	int rc;

	env = smf_helper_env(environ, all_gpus);
	if (!env)
		return sm_fail(SM_ERR_SYSTEM, "out of memory starting the copy helper");
	snprintf(client, sizeof(client), "%d", (int)getpid());
	argv[0] = (char *)path;
	argv[1] = client;
	argv[2] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, child_end, CD_CTRL_FD);
	/* The calling thread (NCCL's) may block or ignore signals; the helper
	 * starts with none blocked and default actions, so a job's SIGTERM or
	 * Ctrl-C ends it too. */
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(pid, path, &fa, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (env != environ)
		free(env);
	if (rc)
		return sm_fail(SM_ERR_SYSTEM, "cannot start the copy helper %s: %s", path,
			       strerror(rc));
	return SM_OK;
}

static int make_ring(struct cd_ring **ring, int *fd)
{
	void *p;
	int rc = sm_memfd_map("symmem-copyd-ring", sizeof(struct cd_ring), sizeof(struct cd_ring),
			      fd, &p);

	if (rc)
		return rc;
	*ring = p;
	(*ring)->magic = CD_MAGIC;
	(*ring)->nslots = CD_SLOTS;
	return SM_OK;
}

int smf_helper_start(const char *path, const char *pci_bus_id,
		     const struct smf_helper_params *p, struct smf_helper **out)
{
	struct smf_helper *h;
	struct cd_reply r;
	struct cd_msg m;
	int sv[2], child_end, ringfd = -1, rc;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return sm_fail(SM_ERR_SYSTEM, "out of memory starting the copy helper");
	h->ctrl = -1;
	h->pid = -1;
	h->request_timeout_ms = p->request_timeout_ms > 0 ? p->request_timeout_ms :
				REQUEST_TIMEOUT_MS;
	h->started_ns = sm_now_ns();
	pthread_mutex_init(&h->ctrl_lock, NULL);
	pthread_mutex_init(&h->ring_lock, NULL);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "socketpair: %s", strerror(errno));
		goto fail;
	}
	h->ctrl = sv[0];
	/* dup2 onto itself would keep close-on-exec: move it off fd 3. */
	child_end = sv[1];
	if (child_end == CD_CTRL_FD) {
		child_end = fcntl(sv[1], F_DUPFD_CLOEXEC, CD_CTRL_FD + 1);
		close(sv[1]);
		if (child_end < 0) {
			rc = sm_fail(SM_ERR_SYSTEM, "dup: %s", strerror(errno));
			goto fail;
		}
	}
	rc = spawn(path, child_end, p->all_gpus, &h->pid);
	close(child_end);
	if (rc)
		goto fail;
	rc = make_ring(&h->ring, &ringfd);
	if (rc)
		goto fail;
	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_HELLO;
	m.version = CD_VERSION;
	m.nstreams = (uint32_t)p->nstreams;
	m.depth = (uint32_t)p->depth;
	m.merge_max = p->merge_max;
	m.batch = (uint32_t)p->batch;
	m.phase_ns = p->phase_ns;
	m.flags = p->landing ? CD_LANDING_WORDS : 0;
	snprintf(m.pci_bus_id, sizeof(m.pci_bus_id), "%s", pci_bus_id);
	rc = request(h, &m, ringfd, HELLO_TIMEOUT_MS, &r);
	close(ringfd);
	if (rc)
		goto fail;
	*out = h;
	return SM_OK;
fail:
	smf_helper_stop(h);
	return rc;
}

/* Once it has exited: was the copy engine kept busy, and how fast did it
 * move bytes while it was?  (Busy is "some copy queued and not yet seen
 * landed", so a pipeline that starves shows as low busy time.) */
static void report_stats(const struct smf_helper *h)
{
	const struct cd_stats *s = &h->ring->stats;
	double life = (double)(sm_now_ns() - h->started_ns);

	if (!s->copies)
		return;
	sm_info("copy helper (pid %d): %llu copies as %llu copy-engine calls, %.1f MiB over its "
		"%.2f s life; copies in flight %.1f %% of it (idle time included), %.1f GB/s while "
		"in flight; %.1f us mean "
		"from posted to queued (of it per copy-engine call %.2f us in the copy call, %.2f us "
		"in %s), %.1f us from queued to seen landed; medians: posted to taken "
		"%.1f, to queued %.1f, queued to landed %.1f us (%d = over %d us); at most %llu "
		"copies waited for a stream; %llu copies were 2D (evenly spaced steps); %llu calls were "
		"batch calls of %llu copies", (int)h->pid,
		(unsigned long long)s->copies, (unsigned long long)s->issued,
		(double)s->bytes / (1 << 20), life / 1e9, 100.0 * (double)s->busy_ns / life,
		s->busy_ns ? (double)s->bytes / (double)s->busy_ns : 0.0,
		(double)s->queue_ns / (double)s->copies / 1e3,
		s->issued ? (double)s->copy_call_ns / (double)s->issued / 1e3 : 0.0,
		s->issued ? (double)s->event_call_ns / (double)s->issued / 1e3 : 0.0,
		s->landing_words ? "cuStreamWriteValue32" : "cuEventRecord",
		(double)s->landed_ns / (double)s->copies / 1e3, sm_hist_median(&s->take_hist),
		sm_hist_median(&s->queue_hist),
		sm_hist_median(&s->landed_hist), SM_HIST_BUCKETS, SM_HIST_BUCKETS - 1,
		(unsigned long long)s->waiting_max, (unsigned long long)s->strided,
		(unsigned long long)s->batches, (unsigned long long)s->batched);
	/* A line of its own: NCCL cuts long log lines. */
	sm_info("copy helper (pid %d): longest copy call %.0f us, queued to landed %.0f us, "
		"busy turn %.0f us; %llu mapping(s) dropped while copies named them; %llu short "
		"host-to-GPU copies as 2D copies; %llu mapping(s) made, %.0f us mean, longest "
		"%.0f us", (int)h->pid,
		(double)s->call_max_ns / 1e3, (double)s->landed_max_ns / 1e3,
		(double)s->turn_max_ns / 1e3, (unsigned long long)s->dropped_busy,
		(unsigned long long)s->small_2d, (unsigned long long)s->maps,
		s->maps ? (double)s->map_ns / (double)s->maps / 1e3 : 0.0,
		(double)s->map_max_ns / 1e3);
	sm_info("copy helper (pid %d): %.3f us of work per copy (turns that took, queued or "
		"ended copies) over %llu copies; landings seen by %s%s", (int)h->pid,
		(double)s->work_ns / (double)s->copies / 1e3, (unsigned long long)s->copies,
		s->landing_words ? "a stream write into host memory" : "event queries",
		s->watch_refused ? "; watch words stopped: the driver refused a batch of memory "
				   "operations" : "");
	if (s->phased_bytes)
		sm_info("copy helper (pid %d): phases: %.1f %% of %.1f MiB went to the GPU whose "
			"turn it was when the copy was due to run", (int)h->pid,
			100.0 * (double)s->in_phase_bytes / (double)s->phased_bytes,
			(double)s->phased_bytes / (1 << 20));
}

/* Waits up to timeout_ms for `pid` to exit and collects it; 0 when it
 * did (or is not our child any more), -1 when it is still there. */
static int wait_exit(pid_t pid, int timeout_ms)
{
	uint64_t limit = sm_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int status;

	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (sm_now_ns() > limit)
			return -1;
		usleep(1000);
	}
	return 0;
}

void smf_helper_stop(struct smf_helper *h)
{
	uint64_t t0 = sm_now_ns();
	pid_t pid;

	if (!h)
		return;
	if (h->ctrl >= 0)
		close(h->ctrl);	/* the helper's cue: finish queued copies, unmap, exit */
	/* Collected already (reap()): the number may be another's now. */
	pid = atomic_load(&h->reaped) == REAP_DONE ? -1 : h->pid;
	if (pid > 0 && wait_exit(pid, STOP_TIMEOUT_MS) != 0) {
		sm_warn("copy helper (pid %d) did not exit in %d s; killed", (int)pid,
			STOP_TIMEOUT_MS / 1000);
		kill(pid, SIGKILL);
		/* Better a zombie than a close that never returns. */
		if (wait_exit(pid, KILL_TIMEOUT_MS) != 0)
			sm_warn("copy helper (pid %d) still there %d s after SIGKILL (stuck in "
				"the driver?); left behind without being reaped", (int)pid,
				KILL_TIMEOUT_MS / 1000);
	} else if (pid > 0) {
		/* Part of every ncclCommAbort/Destroy that closes the last
		 * connection of this GPU (bench/results/failures.md). */
		sm_info("copy helper (pid %d) exited %.0f ms after it was told to stop",
			(int)pid, (double)(sm_now_ns() - t0) / 1e6);
	}
	if (h->ring) {
		report_stats(h);
		munmap(h->ring, sizeof(*h->ring));
	}
	pthread_mutex_destroy(&h->ctrl_lock);
	pthread_mutex_destroy(&h->ring_lock);
	free(h);
}

pid_t smf_helper_pid(const struct smf_helper *h)
{
	return h->pid;
}

/* The CD_ADD message for `info`; returns the descriptor to pass with it
 * (none for a legacy IPC handle, which travels in the message). */
static int add_msg(struct cd_msg *m, int owner_pid, const struct sm_share_info *info, int fd)
{
	memset(m, 0, sizeof(*m));
	m->magic = CD_MAGIC;
	m->op = CD_ADD;
	m->owner_pid = owner_pid;
	m->info = *info;
	return info->kind == SM_SHARE_LEGACY_IPC ? -1 : fd;
}

int smf_helper_add(struct smf_helper *h, int owner_pid, const struct sm_share_info *info, int fd,
		   uint32_t *id)
{
	struct cd_reply r;
	struct cd_msg m;
	int rc;

	*id = 0;
	fd = add_msg(&m, owner_pid, info, fd);
	rc = request(h, &m, fd, h->request_timeout_ms, &r);
	if (rc)
		return rc;
	if (r.id == 0)
		return sm_fail(SM_ERR_SYSTEM, "copy helper answered a mapping without a name");
	*id = r.id;
	return SM_OK;
}

int smf_helper_add_post(struct smf_helper *h, int owner_pid, const struct sm_share_info *info,
			int fd, uint64_t *ticket, int *posted)
{
	struct add_slot *a;
	struct cd_msg m;
	int rc = SM_OK;

	*posted = 0;
	fd = add_msg(&m, owner_pid, info, fd);
	/* Never waits: the lock is held through a waiting request's answer
	 * (up to the request time), and a full socket or a full table is
	 * the caller's cue to try again. */
	if (pthread_mutex_trylock(&h->ctrl_lock) != 0)
		return SM_OK;
	a = &h->add[h->adds_sent % ADD_SLOTS];
	if (helper_gone(h)) {
		rc = dead_error(h);
		goto out;
	}
	if (a->state != ADD_FREE || sm_wait_fd(h->ctrl, POLLOUT, 0) <= 0)
		goto out;
	if (sm_send_some(h->ctrl, &m, sizeof(m), fd) != (ssize_t)sizeof(m)) {
		rc = helper_gone(h) ? dead_error(h) :
		     sm_fail(SM_ERR_SYSTEM, "the copy helper (pid %d) does not take requests",
			     (int)h->pid);
		goto out;
	}
	a->state = ADD_SENT;
	a->sent_ns = sm_now_ns();
	*ticket = h->adds_sent++;
	*posted = 1;
out:
	pthread_mutex_unlock(&h->ctrl_lock);
	return rc;
}

int smf_helper_add_test(struct smf_helper *h, uint64_t ticket, int *done, uint32_t *id)
{
	struct add_slot *a = &h->add[ticket % ADD_SLOTS];
	int rc;

	*done = 0;
	*id = 0;
	if (pthread_mutex_trylock(&h->ctrl_lock) != 0)
		return SM_OK;	/* a request is being answered: later */
	rc = read_posted(h, 0, 0);
	if (a->state == ADD_ANSWERED) {
		*done = 1;
		a->state = ADD_FREE;
		rc = SM_OK;	/* a later request's trouble is not this one's */
		if (a->status)
			rc = sm_fail(a->status, "copy helper: %.150s", a->msg);
		else if (a->id == 0)
			rc = sm_fail(SM_ERR_SYSTEM, "copy helper answered a mapping without a name");
		else
			*id = a->id;
	} else if (!rc && helper_gone(h)) {
		rc = dead_error(h);
	}
	if (rc && a->state == ADD_SENT)
		a->state = ADD_CANCELLED;	/* never answered now: nobody asks again */
	*done = *done || rc;
	pthread_mutex_unlock(&h->ctrl_lock);
	return rc;
}

void smf_helper_add_cancel(struct smf_helper *h, uint64_t ticket)
{
	struct add_slot *a = &h->add[ticket % ADD_SLOTS];

	pthread_mutex_lock(&h->ctrl_lock);
	if (a->state == ADD_ANSWERED) {
		if (!a->status && a->id)
			send_del(h, a->id);
		a->state = ADD_FREE;
	} else if (a->state == ADD_SENT) {
		a->state = ADD_CANCELLED;
	}
	pthread_mutex_unlock(&h->ctrl_lock);
}

void smf_helper_del(struct smf_helper *h, uint32_t id)
{
	struct cd_msg m;

	if (!id)
		return;
	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_DEL;
	m.id = id;
	/* No answer to wait for; a dead helper has nothing mapped. */
	request(h, &m, -1, h->request_timeout_ms, NULL);
}

int smf_helper_post_watched(struct smf_helper *h, uint32_t dst_id, uint64_t dst_off,
			    uint32_t src_id, uint64_t src_off, uint64_t len,
			    const struct smf_watch *w, uint64_t *seq, int *started)
{
	struct cd_slot *s;
	uint32_t st;

	*started = 0;
	if (atomic_load(&h->dead)) {
		reap(h);
		return dead_error(h);
	}
	pthread_mutex_lock(&h->ring_lock);
	s = &h->ring->slot[h->next_seq % CD_SLOTS];
	st = atomic_load_explicit(&s->state, memory_order_acquire);
	if (h->orphan[h->next_seq % CD_SLOTS] && (st == CD_DONE || st == CD_FAILED)) {
		h->orphan[h->next_seq % CD_SLOTS] = 0;
		st = CD_FREE;
	}
	if (st != CD_FREE) {
		pthread_mutex_unlock(&h->ring_lock);
		return SM_OK;	/* CD_SLOTS copies in flight: the caller retries */
	}
	s->src_id = src_id;
	s->dst_id = dst_id;
	s->src_off = src_off;
	s->dst_off = dst_off;
	s->len = len;
	s->watch_id = w ? w->id : 0;
	s->watch_off = w ? w->off : 0;
	s->watch_val = w ? w->val : 0;
	s->post_ns = sm_now_ns();
	s->seq = h->next_seq;
	*seq = h->next_seq++;
	atomic_store_explicit(&s->state, CD_POSTED, memory_order_release);
	pthread_mutex_unlock(&h->ring_lock);
	*started = 1;
	return SM_OK;
}

int smf_helper_post(struct smf_helper *h, uint32_t dst_id, uint64_t dst_off, uint32_t src_id,
		    uint64_t src_off, uint64_t len, uint64_t *seq, int *started)
{
	return smf_helper_post_watched(h, dst_id, dst_off, src_id, src_off, len, NULL, seq,
				       started);
}

/* Whether the copy of a CD_QUEUED slot landed: its call's ticket has
 * reached the landing word of its stream (copyd_proto.h). */
static int queued_landed(const struct smf_helper *h, const struct cd_slot *s)
{
	uint32_t stream = s->stream, ticket = s->ticket;

	if (stream >= sizeof(h->ring->landed) / sizeof(h->ring->landed[0]))
		return 0;	/* not a helper of ours: it ends the slot itself, or times out */
	return (int32_t)(atomic_load_explicit(&h->ring->landed[stream], memory_order_acquire) -
			 ticket) >= 0;
}

int smf_helper_test(struct smf_helper *h, uint64_t seq, int *done)
{
	struct cd_slot *s = &h->ring->slot[seq % CD_SLOTS];
	uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
	uint64_t now;
	int rc;

	*done = 0;
	if (s->seq != seq)
		return sm_fail(SM_ERR_INTERNAL, "copy %llu tested after its slot was reused",
			       (unsigned long long)seq);
	if (st == CD_DONE) {
		atomic_store_explicit(&s->state, CD_FREE, memory_order_release);
		*done = 1;
		return SM_OK;
	}
	if (st == CD_QUEUED && queued_landed(h, s)) {
		/* The helper ends the request on its own later (CD_DONE);
		 * the slot is free for reuse from then on. */
		pthread_mutex_lock(&h->ring_lock);
		h->orphan[seq % CD_SLOTS] = 1;
		pthread_mutex_unlock(&h->ring_lock);
		*done = 1;
		return SM_OK;
	}
	if (st == CD_FAILED) {
		rc = sm_fail(SM_ERR_CUDA, "copy helper: %.80s", s->err);
		atomic_store_explicit(&s->state, CD_FREE, memory_order_release);
		return rc;
	}
	/* Still queued: now and then make sure someone is there to finish it. */
	now = sm_now_ns();
	if (now >= atomic_load(&h->next_check_ns)) {
		atomic_store(&h->next_check_ns, now + ALIVE_CHECK_NS);
		if (helper_gone(h))
			return dead_error(h);
	}
	return SM_OK;
}

const char *smf_helper_state(const struct smf_helper *h, uint64_t seq)
{
	static const char *const names[] = { "free", "posted", "done", "failed", "queued" };
	const struct cd_slot *s = &h->ring->slot[seq % CD_SLOTS];
	uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);

	if (s->seq != seq)
		return "reused";
	return st < sizeof(names) / sizeof(names[0]) ? names[st] : "corrupt";
}

/* A copy given up (timed out, or its connection failed): its slot is
 * reused once the helper has finished with it. */
void smf_helper_abandon(struct smf_helper *h, uint64_t seq)
{
	struct cd_slot *s = &h->ring->slot[seq % CD_SLOTS];

	pthread_mutex_lock(&h->ring_lock);
	if (s->seq == seq)
		h->orphan[seq % CD_SLOTS] = 1;
	pthread_mutex_unlock(&h->ring_lock);
}

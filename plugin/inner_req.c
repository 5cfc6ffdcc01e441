/* The wrappers NCCL holds for the inner plugin's requests.
 *
 * test() gets a bare pointer and must know which path it belongs to.
 * Wrappers come from chunks this file allocates and never moves, so a
 * pointer is a wrapper exactly when its address falls on one inside a
 * chunk: no byte behind it is read to decide, and the copy-engine path's
 * test pays a few compares (none while no inner plugin is loaded). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "inner_internal.h"

/* NCCL keeps at most 32 requests per connection in flight (times
 * maxRecvs on a send comm); 256 chunks serve 8192 connections at once. */
#define REQS_PER_CHUNK 1024
#define MAX_CHUNKS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct inner_req *_Atomic chunks[MAX_CHUNKS];
static atomic_int nchunks;
static struct inner_req *free_list;

/* A new chunk onto the free list; the caller holds the lock. */
static int grow(void)
{
	int n = atomic_load(&nchunks);
	struct inner_req *c;

	if (n == MAX_CHUNKS)
		return -1;
	c = calloc(REQS_PER_CHUNK, sizeof(*c));
	if (!c)
		return -1;
	for (int i = REQS_PER_CHUNK - 1; i >= 0; i--) {
		c[i].next = free_list;
		free_list = &c[i];
	}
	atomic_store_explicit(&chunks[n], c, memory_order_relaxed);
	atomic_store_explicit(&nchunks, n + 1, memory_order_release);
	return 0;
}

struct inner_req *inner_req_get(struct inner_comm *comm, int kind)
{
	struct inner_req *r = NULL;

	pthread_mutex_lock(&lock);
	if (free_list || grow() == 0) {
		r = free_list;
		free_list = r->next;
		r->next = NULL;
		r->comm = comm;
		r->kind = kind;
		r->req = NULL;
		r->n = 0;
		r->size = 0;
		r->done = 0;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* The caller holds the lock. */
static void put_locked(struct inner_req *r)
{
	r->comm = NULL;
	r->req = NULL;
	r->next = free_list;
	free_list = r;
}

void inner_req_put(struct inner_req *r)
{
	pthread_mutex_lock(&lock);
	put_locked(r);
	pthread_mutex_unlock(&lock);
}

int inner_req_owned(const void *p)
{
	int n = atomic_load_explicit(&nchunks, memory_order_acquire);
	uintptr_t a = (uintptr_t)p;

	for (int i = 0; i < n; i++) {
		uintptr_t base = (uintptr_t)atomic_load_explicit(&chunks[i], memory_order_relaxed);

		if (a >= base && a - base < REQS_PER_CHUNK * sizeof(struct inner_req))
			return (a - base) % sizeof(struct inner_req) == 0;
	}
	return 0;
}

void inner_req_drop(const struct inner_comm *comm)
{
	int n;

	pthread_mutex_lock(&lock);
	n = atomic_load(&nchunks);
	for (int i = 0; i < n; i++) {
		struct inner_req *c = atomic_load(&chunks[i]);

		for (int k = 0; k < REQS_PER_CHUNK; k++)
			if (c[k].comm == comm)
				put_locked(&c[k]);
	}
	pthread_mutex_unlock(&lock);
}

void inner_req_reset(void)
{
	int n;

	pthread_mutex_lock(&lock);
	n = atomic_load(&nchunks);
	/* Count first: a test() racing this compares against no chunk. */
	atomic_store_explicit(&nchunks, 0, memory_order_release);
	for (int i = 0; i < n; i++) {
		free(atomic_load(&chunks[i]));
		atomic_store(&chunks[i], NULL);
	}
	free_list = NULL;
	pthread_mutex_unlock(&lock);
}

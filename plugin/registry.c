/* A small set of live pointers under one lock.  Only setup and teardown
 * touch it, never the data path, so a flat array is plenty. */
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "registry.h"

struct entry {
	void *p;
	int kind;
};

/* Objects taken back are freed only after RETIRED_MAX later ones: glibc
 * hands a freed block straight to the next allocation of its size, so a
 * stale pointer NCCL closes twice would otherwise name the next comm or
 * memory handle and tear down a live object without a word. */
#define RETIRED_MAX 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;
static int used, cap;
static void *retired[RETIRED_MAX];
static unsigned retired_next, retired_n;

static int find(void *p, int kind)
{
	for (int i = 0; i < used; i++)
		if (entries[i].p == p && entries[i].kind == kind)
			return i;
	return -1;
}

int registry_add(void *p, int kind)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (used == cap) {
		int ncap = cap ? cap * 2 : 64;
		struct entry *n = realloc(entries, (size_t)ncap * sizeof(*n));

		if (!n) {
			rc = -1;
			goto out;
		}
		entries = n;
		cap = ncap;
	}
	entries[used].p = p;
	entries[used].kind = kind;
	used++;
out:
	pthread_mutex_unlock(&lock);
	return rc;
}

int registry_remove(void *p, int kind)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(p, kind);
	if (i >= 0)
		entries[i] = entries[--used];
	if (used == 0) {
		/* Nothing left: give the array back so a finished job holds
		 * no plugin memory at all. */
		free(entries);
		entries = NULL;
		cap = 0;
	}
	pthread_mutex_unlock(&lock);
	return i >= 0 ? 0 : -1;
}

static const char *registry_kind_name(int kind)
{
	switch (kind) {
	case OBJ_CTX:
		return "context";
	case OBJ_LISTEN:
		return "listen comm";
	case OBJ_SEND:
		return "send comm";
	case OBJ_RECV:
		return "receive comm";
	case OBJ_MR:
		return "memory handle";
	case OBJ_TUNER:
		return "tuner context";
	default:
		return "object";
	}
}

int registry_take(void *p, int kind, const char *what)
{
	if (registry_remove(p, kind) == 0)
		return 0;
	LOG_WARN("NET/symmem: %s of %p, which is not a live %s (closed or freed twice?)", what, p,
		 registry_kind_name(kind));
	return -1;
}

/* Frees every retired object; the caller holds the lock. */
static void retired_flush(void)
{
	for (unsigned i = 0; i < retired_n; i++)
		free(retired[i]);
	retired_n = 0;
	retired_next = 0;
}

void registry_retire(void *p)
{
	pthread_mutex_lock(&lock);
	if (retired_n == RETIRED_MAX)
		free(retired[retired_next]);	/* the oldest */
	else
		retired_n++;
	retired[retired_next] = p;
	retired_next = (retired_next + 1) % RETIRED_MAX;
	/* With nothing live left (the job closed everything), no pointer
	 * NCCL holds can name a new object yet: the memory goes back. */
	if (used == 0)
		retired_flush();
	pthread_mutex_unlock(&lock);
}

int registry_has(void *p, int kind)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(p, kind);
	pthread_mutex_unlock(&lock);
	return i >= 0;
}

/* The touch hook (touch_hook.h): page protection and the trap flag. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "touch_hook.h"

#if defined(__x86_64__) && defined(__linux__)

#define TRAP_FLAG 0x100ul	/* EFLAGS.TF: trap after the next instruction */

/* The handlers' state lives in a page of its own: were it next to the
 * watched memory, the handlers would fault on it themselves. */
struct hook {
	uintptr_t page, lo, hi;
	size_t page_size;
	void (*fn)(void *arg);
	void *arg;
	int stepping;		/* an access is being let through */
	int hit;		/* ... and it starts inside the range */
	int fired;
	struct sigaction old_segv, old_trap;
};

static struct hook *h;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	(void)sig;
	if (a < h->page || a >= h->page + h->page_size) {
		/* A fault of the code's own: it repeats under the old action. */
		sigaction(SIGSEGV, &h->old_segv, NULL);
		return;
	}
	mprotect((void *)h->page, h->page_size, PROT_READ | PROT_WRITE);
	h->hit = a >= h->lo && a < h->hi;
	h->stepping = 1;
	((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] |= (greg_t)TRAP_FLAG;
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	if (!h->stepping) {
		sigaction(SIGTRAP, &h->old_trap, NULL);
		raise(SIGTRAP);
		return;
	}
	((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)TRAP_FLAG;
	h->stepping = 0;
	if (!h->hit) {
		mprotect((void *)h->page, h->page_size, PROT_NONE);
		return;
	}
	h->fired = 1;
	h->fn(h->arg);
}

int touch_hook_arm(void *addr, size_t len, void (*fn)(void *arg), void *arg)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)addr;
	struct sigaction sa;
	void *p;

	if (h || (lo & ~(ps - 1)) != ((lo + len - 1) & ~(ps - 1)))
		return -1;
	p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	h = p;
	memset(h, 0, sizeof(*h));
	h->page_size = ps;
	h->page = lo & ~(ps - 1);
	h->lo = lo;
	h->hi = lo + len;
	h->fn = fn;
	h->arg = arg;
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_segv;
	sigaction(SIGSEGV, &sa, &h->old_segv);
	sa.sa_sigaction = on_trap;
	sigaction(SIGTRAP, &sa, &h->old_trap);
	if (mprotect((void *)h->page, ps, PROT_NONE) == 0)
		return 0;
	touch_hook_disarm();
	return -1;
}

int touch_hook_disarm(void)
{
	int fired;

	if (!h)
		return 0;
	mprotect((void *)h->page, h->page_size, PROT_READ | PROT_WRITE);
	sigaction(SIGSEGV, &h->old_segv, NULL);
	sigaction(SIGTRAP, &h->old_trap, NULL);
	fired = h->fired;
	munmap(h, h->page_size);
	h = NULL;
	return fired;
}

#else

int touch_hook_arm(void *addr, size_t len, void (*fn)(void *arg), void *arg)
{
	(void)addr;
	(void)len;
	(void)fn;
	(void)arg;
	return -1;
}

int touch_hook_disarm(void)
{
	return 0;
}

#endif

/* Runs a test's callback in the middle of the code under test: right
 * after the first instruction of this thread whose access starts inside a
 * given range of memory.  A test can then act as the other process at the
 * worst moment, every time: a client rewriting a request the helper has
 * just read, a receiver closing right after the sender looked at its
 * receives.
 *
 * How: the page holding the range is made inaccessible; every access to
 * it faults, is let through for one instruction (the x86 trap flag), and
 * the page is closed again, until an access starts inside the range.  The
 * callback then runs and the page stays open.  x86-64 Linux only. */
#ifndef SYMMEM_TEST_TOUCH_HOOK_H
#define SYMMEM_TEST_TOUCH_HOOK_H

#include <stddef.h>

/* Arms the hook on [addr, addr + len), which must lie in one page that
 * no system call of the code under test reads or writes (the kernel would
 * fail the call instead of faulting).  `fn` runs inside a signal handler
 * on the thread that touched the range: async-signal-safe calls only.
 * 0 when armed; -1 where this machine cannot (the caller skips). */
int touch_hook_arm(void *addr, size_t len, void (*fn)(void *arg), void *arg);
/* Disarms it (the page open again, the signal handlers restored);
 * returns 1 if the callback ran. */
int touch_hook_disarm(void);

#endif

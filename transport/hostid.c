/* Which host are we on?  Two processes share memory and Unix sockets only
 * when they run under the same kernel, so the boot id is the identity. */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static uint64_t host_id;

/* FNV-1a: stable across processes, which is all that matters here. */
static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void host_read(void)
{
	char buf[128];
	ssize_t n = -1;
	int fd;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	if (n <= 0) {
		/* No procfs: fall back to the host name, which is weaker but
		 * still separates real hosts. */
		if (gethostname(buf, sizeof(buf) - 1) != 0)
			strcpy(buf, "unknown-host");
		buf[sizeof(buf) - 1] = '\0';
		n = (ssize_t)strlen(buf);
	}
	host_id = fnv1a(buf, (size_t)n);
	if (host_id == 0)
		host_id = 1;
}

uint64_t tp_host_id(void)
{
	pthread_once(&host_once, host_read);
	return host_id;
}

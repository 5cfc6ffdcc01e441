/* Which host are we on, as far as the shared-memory path is concerned?
 * Two processes can use it when they run under the same kernel (the boot
 * id), in the same network namespace (the listener's abstract Unix socket
 * lives there) and in the same PID namespace (mappings are cached by the
 * owner's pid, and a pid means another process in another namespace: two
 * ranks of per-GPU containers can both be pid 1).  Processes that differ in
 * any of these talk over TCP, as if on two hosts. */
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

/* Appends the namespace `link` names ("net:[4026531840]") to buf; nothing
 * where the kernel does not show it (then only the boot id counts). */
static size_t add_namespace(char *buf, size_t n, size_t cap, const char *link)
{
	ssize_t m;

	if (n + 2 >= cap)
		return n;
	buf[n++] = '/';
	m = readlink(link, buf + n, cap - n);
	return m > 0 && (size_t)m < cap - n ? n + (size_t)m : n - 1;
}

/* Room for the boot id (or host name); the namespaces follow it. */
#define HOST_PART 128

uint64_t tp_host_id_read(void)
{
	char buf[2 * HOST_PART];
	ssize_t n = -1;
	size_t len;
	uint64_t id;
	int fd;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, HOST_PART);
		close(fd);
	}
	if (n <= 0) {
		/* No procfs: fall back to the host name, which is weaker but
		 * still separates real hosts. */
		if (gethostname(buf, HOST_PART - 1) != 0)
			strcpy(buf, "unknown-host");
		buf[HOST_PART - 1] = '\0';
		n = (ssize_t)strlen(buf);
	}
	len = add_namespace(buf, (size_t)n, sizeof(buf), "/proc/self/ns/net");
	len = add_namespace(buf, len, sizeof(buf), "/proc/self/ns/pid");
	id = fnv1a(buf, len);
	return id ? id : 1;
}

static void host_read(void)
{
	host_id = tp_host_id_read();
}

uint64_t tp_host_id(void)
{
	pthread_once(&host_once, host_read);
	return host_id;
}

/* What the fuzz targets share (fuzz.h): input, checks, descriptors. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fuzz.h"
#include "symmem.h"

void fz_abort(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: broken promise: %s (the last error message, maybe older: %s)\n",
		file, line, what, sm_last_error());
	abort();
}

size_t fz_take(struct fz_in *in, void *dst, size_t n)
{
	size_t got = n < in->n ? n : in->n;

	memcpy(dst, in->p, got);
	memset((uint8_t *)dst + got, 0, n - got);
	in->p += got;
	in->n -= got;
	return got;
}

uint8_t fz_u8(struct fz_in *in)
{
	uint8_t v;

	fz_take(in, &v, sizeof(v));
	return v;
}

uint16_t fz_u16(struct fz_in *in)
{
	uint16_t v;

	fz_take(in, &v, sizeof(v));
	return v;
}

uint32_t fz_u32(struct fz_in *in)
{
	uint32_t v;

	fz_take(in, &v, sizeof(v));
	return v;
}

uint64_t fz_u64(struct fz_in *in)
{
	uint64_t v;

	fz_take(in, &v, sizeof(v));
	return v;
}

static void drop_line(int warn, const char *msg)
{
	(void)warn;
	(void)msg;
}

void fz_quiet(void)
{
	sm_set_log_sink(drop_line);
}

size_t fz_send(int fd, const void *buf, size_t n, int pass_fd)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = sm_send_some(fd, (const uint8_t *)buf + done, n - done,
					 done ? -1 : pass_fd);

		if (k <= 0)
			break;
		done += (size_t)k;
	}
	return done;
}

int fz_push(int sock, struct fz_msg *m)
{
	while (m->done < m->len) {
		ssize_t k = sm_send_some(sock, (const uint8_t *)m->buf + m->done, m->len - m->done,
					 m->done ? -1 : m->fd);

		if (k < 0)
			return -1;
		if (k == 0)
			return 0;
		m->done += (size_t)k;
	}
	return 1;
}

int fz_pull(int sock, struct fz_msg *m)
{
	while (m->done < m->len) {
		ssize_t k = sm_recv_some(sock, (uint8_t *)m->buf + m->done, m->len - m->done, &m->fd);

		if (k < 0)
			return -1;
		if (k == 0)
			return 0;
		m->done += (size_t)k;
	}
	return 1;
}

int fz_memfd(uint64_t size)
{
	void *map;
	int fd;

	if (sm_memfd_map("symmem-fuzz", size, 1, &fd, &map))
		return -1;
	munmap(map, 1);
	return fd;
}

int fz_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	FZ_CHECK(d != NULL);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* What the libFuzzer targets share: the input read as fields, a silent
 * log, a check that aborts (libFuzzer reports the input), and real
 * connections driven by one thread.  Each target is one file,
 * test/fuzz/fuzz_<name>.c, with its seeds in test/fuzz/corpus/<name>/. */
#ifndef SYMMEM_FUZZ_H
#define SYMMEM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

/* A property the code under test promises: broken, the run aborts, and
 * libFuzzer keeps the input that broke it. */
#define FZ_CHECK(cond)                                                          \
	do {                                                                    \
		if (!(cond))                                                    \
			fz_abort(__FILE__, __LINE__, #cond);                    \
	} while (0)

void fz_abort(const char *file, int line, const char *what) __attribute__((noreturn));

/* The input, consumed front to back; past its end every field reads 0. */
struct fz_in {
	const uint8_t *p;
	size_t n;
};

uint8_t fz_u8(struct fz_in *in);
uint16_t fz_u16(struct fz_in *in);
uint32_t fz_u32(struct fz_in *in);
uint64_t fz_u64(struct fz_in *in);
/* Copies up to n bytes into dst, zero-filling what the input lacks;
 * returns how many came from the input. */
size_t fz_take(struct fz_in *in, void *dst, size_t n);

/* Drops the library's log lines: thousands of runs a second would bury
 * libFuzzer's own output. */
void fz_quiet(void);

/* The plugin's defaults for a connection over `backend`, with short
 * deadlines: a run must end in milliseconds. */
struct tp_options fz_options(int backend);

/* A real connection in this process: listens with `lo`, connects with
 * `co` and drives both until both ends exist.  SM_OK or the error. */
int fz_pair(const struct tp_options *lo, const struct tp_options *co, struct tp_comm **s,
	    struct tp_comm **r);

/* Writes what the non-blocking socket takes now, `pass_fd` (>= 0) with
 * the first byte; returns the bytes written. */
size_t fz_send(int fd, const void *buf, size_t n, int pass_fd);

/* One message of a setup moved over a non-blocking socket a piece at a
 * time, as the target's end of it: `fd`, when sending, rides with the
 * first byte (the caller's to close); when receiving, it is the first
 * descriptor that came (the caller's to close), any other is closed. */
struct fz_msg {
	void *buf;
	size_t len, done;
	int fd;
};

/* 1 once the message is whole, 0 not yet, -1 when the peer hung up. */
int fz_push(int sock, struct fz_msg *m);
int fz_pull(int sock, struct fz_msg *m);

/* Descriptors open in this process: a run must leave as many as it found. */
int fz_fd_count(void);

/* A sealed memfd of `size` bytes (how peers share memory), or -1. */
int fz_memfd(uint64_t size);

#endif

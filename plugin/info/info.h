/* plugin/info/: symmem-info, what the plugin would do on this host, and a
 * self-test of its data paths through its own net table.  One job per file
 * (info_*.c); docs/symmem-info.md lists the output's fields.
 *
 * Owns: the tool and its output.  Must not touch: the libraries' insides.
 * It loads the net plugin as NCCL does and calls transport/, symmem/ and
 * plugin/config/ through their public headers; nothing of the libraries
 * includes this header.
 *
 * The tool's own process never initialises CUDA: a process that has
 * cannot fork a child that uses it, and every GPU question is asked in a
 * child (info_proc.c). */
#ifndef SYMMEM_PLUGIN_INFO_H
#define SYMMEM_PLUGIN_INFO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <cuda.h>

#include "config.h"

/* The exit statuses, also in the output ("exit_status"). */
enum info_exit {
	INFO_USABLE = 0,
	INFO_NOT_USABLE = 1,
	INFO_BAD_CONFIG = 2,
};

#define INFO_PATH 4096
#define INFO_WHY 256
#define INFO_MAX_GPUS 16

/* ---- info_out.c: one writer for both forms, text or JSON ----------- */

/* snprintf for messages, which may be cut at `len`. */
void info_say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

struct out {
	FILE *f;
	int json;
	int depth;
	int count[16];		/* members written so far at each depth */
	int item;		/* text: the next field opens a list item */
	int pending_list;	/* text: a list's key is out, no element yet */
};

void out_begin(struct out *o, FILE *f, int json);
void out_end(struct out *o);
void out_obj(struct out *o, const char *key);
void out_obj_end(struct out *o);
void out_list(struct out *o, const char *key);
void out_list_end(struct out *o);
/* An object inside a list. */
void out_item(struct out *o);
void out_item_end(struct out *o);
/* A string inside a list. */
void out_elem(struct out *o, const char *v);
/* NULL is JSON's null, left out in text. */
void out_str(struct out *o, const char *key, const char *v);
void out_strf(struct out *o, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void out_int(struct out *o, const char *key, long long v);
/* Not finite: null, left out in text. */
void out_num(struct out *o, const char *key, double v);
void out_bool(struct out *o, const char *key, int v);
/* A `sep`-separated list as a list of strings. */
void out_words(struct out *o, const char *key, const char *list, char sep);

/* ---- info_proc.c: child processes and what they send back ----------- */

/* Flushes stdout, forks, runs fn(arg, wr) in the child with `wr` the
 * write end of a pipe whose read end lands in *rd, and exits with what
 * fn returns.  Returns the child's pid, or -1. */
pid_t proc_start(int (*fn)(void *arg, int wr), void *arg, int *rd);
/* All of `len` bytes before `deadline` (sm_now_ns()), or -1. */
int proc_read(int fd, void *buf, size_t len, uint64_t deadline);
int proc_write(int fd, const void *buf, size_t len);
/* A message over a Unix socket, a descriptor riding along (-1: none;
 * *fd receives one or -1). */
int proc_send_fd(int sock, const void *buf, size_t len, int fd, uint64_t deadline);
int proc_recv_fd(int sock, void *buf, size_t len, int *fd, uint64_t deadline);
/* The child's exit status; past `deadline` it is killed and this is -1,
 * as for a child ended by a signal. */
int proc_reap(pid_t pid, uint64_t deadline);
/* sm_now_ns() + seconds. */
uint64_t proc_deadline(double seconds);

/* ---- info_cuda.c: driver entry points beyond the data path's -------- */

struct info_cu {
	CUresult (*device_name)(char *, int, CUdevice);
	CUresult (*can_access_peer)(int *, CUdevice, CUdevice);
	CUresult (*p2p_attribute)(int *, CUdevice_P2PAttribute, CUdevice, CUdevice);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
};

/* Loads the driver (symmem's loader) in this process: children only.
 * NULL with the reason in `why`. */
const struct info_cu *info_cu(char *why, size_t len);
/* "call: CUDA_ERROR_X (CUDA error n)" into `why`; returns -1. */
int info_cu_fail(CUresult rc, const char *call, char *why, size_t len);

/* ---- info_lib.c: the files NCCL would open ------------------------- */

struct info_file {
	char path[INFO_PATH];	/* "" when none */
	char how[INFO_WHY];	/* how it was found, or why not */
	char build[128];	/* version and commit from its build id, "" unknown */
};

struct info_libs {
	struct info_file env;	/* libnccl-env-symmem.so */
	struct info_file net;	/* libnccl-net-symmem.so */
	struct info_file helper;	/* symmem-copyd */
	int env_plugin_ours;	/* NCCL_ENV_PLUGIN opens this project's env plugin */
	char env_net_path[INFO_PATH];	/* the NCCL_NET_PLUGIN it sets ("" = symmem) */
	int env_plugin_ran;	/* ... and set its variables here */
	char env_set[1024];	/* which, "NAME=value ..." */
	int net_plugin_ours;	/* NCCL's net plugin lookup reaches this plugin */
	char nccl_opens[INFO_WHY];	/* what that lookup opens, in words */
	char net_tables[256], tuner_tables[256], env_tables[128];	/* found, space-separated */
	char plugin_name[32];	/* the net table's name, "" */
	char net_error[INFO_WHY], env_error[INFO_WHY];	/* dlopen's, "" */
};

/* `cfg` NULL: the configuration does not parse; defaults then.  Where
 * NCCL_ENV_PLUGIN opens this project's env plugin, sets what it sets, in
 * this process's environment, as it would in a job's. */
void info_libs_find(struct info_libs *l, const struct config *cfg);
void info_libs_emit(struct out *o, const struct info_libs *l);
/* This tool's own version and commit. */
const char *info_build(void);
/* File `path` mapped read-only, NULL when it cannot be or holds `min`
 * bytes or fewer; munmap(map, *size) when done. */
const char *info_map_file(const char *path, size_t min, size_t *size);

/* ---- info_gpu.c, info_nvlink.c, info_probe.c: the GPUs ------------- */

struct info_gpu {
	char name[96];
	char bus_id[32];	/* as sysfs names it: 0000:06:00.0 */
	int numa;		/* -1 unknown */
	int copy_engines;	/* asynchronous engines */
	int nvlinks;		/* active NVLink links, -1 unknown */
};

struct info_pair {
	int p2p;		/* the driver allows peer access, -1 unknown */
	int perf_rank;		/* its performance rank of the link, -1 unknown */
	int nvlinks;		/* links joining the two directly, -1 unknown */
	int switched;		/* both have links to NVSwitches */
	int cumem, ipc;		/* tried: 1 worked, 0 failed, -1 not tried */
	char cumem_why[200], ipc_why[200];
};

/* ---- info_nccl.c: the NCCL on the loader path --------------------- */

enum { INFO_NCCL_NET, INFO_NCCL_TUNER, INFO_NCCL_ENV, INFO_NCCL_KINDS };

struct info_nccl {
	int version;		/* ncclGetVersion, 0 unknown */
	char library[INFO_WHY];	/* where it is, or why unknown */
	int read;		/* its binary names plugin tables: probes[] known */
	uint32_t probes[INFO_NCCL_KINDS];	/* bit v: it looks for table vN of the kind */
};

/* Loads libnccl.so.2 (in a child: its constructors may run) and reads its
 * version and the tables it looks for. */
void info_nccl_find(struct info_nccl *n);
/* The version of the kind's table NCCL takes from this project's
 * libraries: 0 none, -1 unknown (no NCCL, or none of its tables named). */
int info_nccl_takes(const struct info_nccl *n, const struct info_libs *l, int kind);
void info_nccl_emit(struct out *o, const struct info_nccl *n, const struct info_libs *l);

struct info_gpus {
	int loaded;		/* driver opened, cuInit fine */
	int driver_version;
	int count;		/* GPUs the driver shows */
	int shown;		/* of which described here (INFO_MAX_GPUS) */
	char why[200];		/* no driver, or the survey failed */
	char nvml[INFO_WHY];	/* why NVLink links are unknown, "" known */
	struct info_nccl nccl;	/* the NCCL on the loader path */
	char probe_why[INFO_WHY];	/* why the tries did not run, "" */
	struct info_gpu gpu[INFO_MAX_GPUS];
	struct info_pair pair[INFO_MAX_GPUS][INFO_MAX_GPUS];	/* [from][to] */
};

/* In a child process: driver, GPUs, links, NCCL's version. */
void info_gpus_survey(struct info_gpus *g);
/* Fills pair[][].nvlinks/switched and gpu[].nvlinks, or g->nvml. */
void info_nvlinks(struct info_gpus *g);
/* Tries cuMem POSIX-fd and legacy IPC export/import between every pair
 * (a process per GPU; two on GPU 0 of a one-GPU host). */
void info_gpus_probe(struct info_gpus *g);
void info_gpus_emit(struct out *o, const struct info_gpus *g, const struct info_libs *l);
/* "gpu0" or "gpu1", the pair's processes' GPUs: one GPU shows as itself twice. */
int info_pair_count(const struct info_gpus *g);
void info_pair_at(const struct info_gpus *g, int k, int *from, int *to);

/* ---- info_route.c, info_vars.c: what a job would get ---------------- */

#define INFO_MAX_DEFAULTS 16

/* What the env plugin and the net plugin would set in a job's
 * environment, run here with the plugins' own functions. */
struct info_sim {
	int cfg_ok;
	struct config cfg;	/* defaults when !cfg_ok */
	char err[512];		/* the plugin's init error */
	int gpu_path;		/* the net plugin's devices are GPUs */
	int rings_hinted;	/* NCCL says which connections are rings (2.28 on) */
	int ndef;
	struct {
		char name[48];
		char value[64];
		int applied;
		const char *why;
	} def[INFO_MAX_DEFAULTS];
	int nadvice;
	struct {
		char name[48];
		char value[32];
		const char *why;
	} advice[4];
};

struct info_rdma {
	int selected;
	char found[256], chosen[256], why[96];
};

/* Parses the configuration as the plugin's init does. */
void info_parse(struct info_sim *s);
/* Sets what the two plugins would set (this process's environment
 * changes: call after every child that needs the user's). */
void info_simulate(struct info_sim *s, const struct info_libs *l, const struct info_gpus *g);
void info_rdma_find(struct info_rdma *r, const struct info_sim *s);
/* The verdict; returns the exit status. */
int info_verdict_emit(struct out *o, const struct info_sim *s, const struct info_libs *l,
		      const struct info_gpus *g, const struct info_rdma *r);
void info_rdma_emit(struct out *o, const struct info_sim *s, const struct info_rdma *r);
/* Every variable the plugin reads: value, origin, meaning, error. */
void info_vars_emit(struct out *o, const struct info_sim *s, const struct info_libs *l);

/* ---- info_selftest.c, info_xfer.c: the self-test ------------------- */

/* Every path the library can take here, each between two processes;
 * returns the exit status. */
int info_selftest(struct out *o, const struct info_sim *s, const struct info_libs *l,
		  const struct info_gpus *g);

struct xfer_args {
	const char *lib;	/* the net plugin */
	const char *path;	/* its name, for messages and the corruption knob */
	const char *backend;	/* NCCL_SYMMEM_BACKEND for it */
	int ctl;		/* socket to the other side */
	int other;		/* the other side's end, closed */
	int side;		/* 0 or 1: 0 sends first */
	int gpu;		/* GPU ordinal of the buffers, -1: host memory */
	size_t msg;		/* bytes per bandwidth message */
	int nmsg;		/* messages per round */
};

struct xfer_result {
	int ok;
	double lat_us;		/* one way, 8-byte messages */
	double gbps;		/* into this side */
	char why[400];
};

/* One side, in a child: writes a struct xfer_result to `wr`. */
int xfer_side(void *arg, int wr);
/* The hidden test knob: SYMMEM_INFO_TEST_CORRUPT names the path whose
 * first side flips one byte of what it sends. */
#define INFO_CORRUPT_ENV "SYMMEM_INFO_TEST_CORRUPT"

#endif

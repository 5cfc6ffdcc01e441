/* The driver and the GPUs as the plugin sees them: asked in a child
 * process (info.h says why), which also reads NVLink links (NVML) and
 * the NCCL on the loader path (info_nccl.c). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "info.h"
#include "symmem.h"

/* sysfs's name of a PCI function: lower case, a 4-digit domain (the
 * driver may give 8). */
static void sysfs_bus_id(const char *bus, char *out, size_t len)
{
	const char *colon = strchr(bus, ':');
	size_t i;

	if (colon && colon - bus > 4)
		bus = colon - 4;
	for (i = 0; bus[i] && i + 1 < len; i++)
		out[i] = (char)tolower((unsigned char)bus[i]);
	out[i] = '\0';
}

static int numa_node(const char *bus_id)
{
	char path[128];
	int node = -1;
	FILE *f;

	info_say(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus_id);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node;
}

static void survey_gpu(const struct info_cu *cu, int i, struct info_gpu *d)
{
	const struct sm_cuda_api *api = sm_cu();
	char bus[32] = "";
	CUdevice dev;

	d->numa = -1;
	d->copy_engines = -1;
	d->nvlinks = -1;
	if (api->device_get(&dev, i) != CUDA_SUCCESS)
		return;
	if (cu->device_name(d->name, (int)sizeof(d->name), dev) != CUDA_SUCCESS)
		d->name[0] = '\0';
	if (api->device_get_pci_bus_id(bus, (int)sizeof(bus), dev) == CUDA_SUCCESS) {
		bus[sizeof(bus) - 1] = '\0';
		sysfs_bus_id(bus, d->bus_id, sizeof(d->bus_id));
		d->numa = numa_node(d->bus_id);
	}
	if (api->device_get_attribute(&d->copy_engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT,
				      dev) != CUDA_SUCCESS)
		d->copy_engines = -1;
}

/* pair[from][to]: whether `to` may access `from`'s memory. */
static void survey_pair(const struct info_cu *cu, int from, int to, struct info_pair *p)
{
	CUdevice a, b;

	p->p2p = -1;
	p->perf_rank = -1;
	if (sm_cu()->device_get(&a, from) != CUDA_SUCCESS ||
	    sm_cu()->device_get(&b, to) != CUDA_SUCCESS)
		return;
	if (cu->can_access_peer(&p->p2p, b, a) != CUDA_SUCCESS)
		p->p2p = -1;
	if (p->p2p == 1 &&
	    cu->p2p_attribute(&p->perf_rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, a, b) !=
		    CUDA_SUCCESS)
		p->perf_rank = -1;
}

static int survey_child(void *arg, int wr)
{
	struct info_gpus *g = arg;
	const struct sm_cuda_info *ci = sm_cuda_load();
	const struct info_cu *cu;

	info_nccl_find(&g->nccl);
	g->loaded = ci->loaded;
	g->driver_version = ci->driver_version;
	g->count = ci->device_count;
	cu = info_cu(g->why, sizeof(g->why));
	if (!cu) {
		g->loaded = 0;
		return proc_write(wr, g, sizeof(*g)) ? 1 : 0;
	}
	g->shown = g->count < INFO_MAX_GPUS ? g->count : INFO_MAX_GPUS;
	for (int i = 0; i < g->shown; i++)
		survey_gpu(cu, i, &g->gpu[i]);
	for (int i = 0; i < g->shown; i++)
		for (int j = 0; j < g->shown; j++)
			if (i != j)
				survey_pair(cu, i, j, &g->pair[i][j]);
	info_nvlinks(g);
	return proc_write(wr, g, sizeof(*g)) ? 1 : 0;
}

void info_gpus_survey(struct info_gpus *g)
{
	int rd = -1, ok;
	pid_t pid;

	memset(g, 0, sizeof(*g));
	for (int i = 0; i < INFO_MAX_GPUS; i++)
		for (int j = 0; j < INFO_MAX_GPUS; j++)
			g->pair[i][j].cumem = g->pair[i][j].ipc = g->pair[i][j].nvlinks = -1;
	pid = proc_start(survey_child, g, &rd);
	if (pid < 0) {
		info_say(g->why, sizeof(g->why), "cannot start a process to ask the driver");
		return;
	}
	/* cuInit on a host of many GPUs takes seconds. */
	ok = proc_read(rd, g, sizeof(*g), proc_deadline(120)) == 0;
	close(rd);
	if (proc_reap(pid, proc_deadline(10)) != 0 || !ok) {
		memset(g, 0, sizeof(*g));
		info_say(g->why, sizeof(g->why), "the process asking the CUDA driver failed or did "
			 "not answer within 120 s");
	}
}

int info_pair_count(const struct info_gpus *g)
{
	if (!g->loaded || g->shown < 1)
		return 0;
	return g->shown == 1 ? 1 : g->shown * (g->shown - 1) / 2;
}

/* The k-th pair, from < to; a one-GPU host's only pair is the GPU with
 * itself (two processes on it). */
void info_pair_at(const struct info_gpus *g, int k, int *from, int *to)
{
	*from = *to = 0;
	if (g->shown == 1)
		return;
	for (int i = 0; i < g->shown; i++) {
		for (int j = i + 1; j < g->shown; j++) {
			if (k-- == 0) {
				*from = i;
				*to = j;
				return;
			}
		}
	}
}

static void link_text(const struct info_gpus *g, int a, int b, char *buf, size_t len)
{
	const struct info_pair *p = &g->pair[a][b];

	if (a == b)
		info_say(buf, len, "same GPU (two processes on it)");
	else if (p->nvlinks > 0)
		info_say(buf, len, "NVLink x%d", p->nvlinks);
	else if (p->switched)
		info_say(buf, len, "NVLink through NVSwitch");
	else if (p->p2p != 1 || g->pair[b][a].p2p != 1)
		info_say(buf, len, "no peer access: copies cannot go GPU to GPU");
	else if (p->nvlinks == 0)
		info_say(buf, len, "PCIe");
	else
		info_say(buf, len, "peer access, link unknown (%s)", g->nvml);
}

/* One try's outcome over both directions: "yes", "no" or NULL (not
 * tried); the first failure's text in `why`. */
static int tried(const struct info_gpus *g, int a, int b, int ipc, char *why, size_t len)
{
	const struct info_pair *ab = &g->pair[a][b], *ba = &g->pair[b][a];
	int x = ipc ? ab->ipc : ab->cumem, y = ipc ? ba->ipc : ba->cumem;

	why[0] = '\0';
	if (x == 0)
		info_say(why, len, "GPU %d to GPU %d: %s", a, b, ipc ? ab->ipc_why : ab->cumem_why);
	else if (y == 0)
		info_say(why, len, "GPU %d to GPU %d: %s", b, a, ipc ? ba->ipc_why : ba->cumem_why);
	if (x < 0 || (a != b && y < 0))
		return -1;
	return x == 1 && (a == b || y == 1);
}

static void emit_try(struct out *o, const char *key, const struct info_gpus *g, int a, int b,
		     int ipc)
{
	char why[INFO_WHY + 32], ekey[48];
	int r = tried(g, a, b, ipc, why, sizeof(why));

	info_say(ekey, sizeof(ekey), "%s_error", key);
	if (r < 0)
		out_str(o, key, "not tried");
	else
		out_str(o, key, r ? "works" : "fails");
	out_str(o, ekey, why[0] ? why : NULL);
}

static void emit_pair(struct out *o, const struct info_gpus *g, int a, int b)
{
	const struct info_pair *p = &g->pair[a][b];
	char link[INFO_WHY + 64];

	link_text(g, a, b, link, sizeof(link));
	out_item(o);
	out_int(o, "gpu_a", a);
	out_int(o, "gpu_b", b);
	out_str(o, "link", link);
	out_int(o, "nvlinks", a == b ? 0 : p->nvlinks);
	out_bool(o, "peer_access", a == b || (p->p2p == 1 && g->pair[b][a].p2p == 1));
	out_int(o, "perf_rank", p->perf_rank);
	emit_try(o, "cumem_fd", g, a, b, 0);
	emit_try(o, "legacy_ipc", g, a, b, 1);
	out_item_end(o);
}

void info_gpus_emit(struct out *o, const struct info_gpus *g, const struct info_libs *l)
{
	out_obj(o, "driver");
	out_bool(o, "loaded", g->loaded);
	if (g->loaded)
		out_strf(o, "version", "%d.%d", g->driver_version / 1000,
			 g->driver_version % 1000 / 10);
	else
		out_str(o, "version", NULL);
	out_str(o, "why", g->loaded ? NULL : g->why);
	out_obj_end(o);
	out_int(o, "gpu_count", g->loaded ? g->count : 0);
	out_list(o, "gpus");
	for (int i = 0; i < g->shown; i++) {
		const struct info_gpu *d = &g->gpu[i];

		out_item(o);
		out_int(o, "index", i);
		out_str(o, "name", d->name);
		out_str(o, "bus_id", d->bus_id[0] ? d->bus_id : NULL);
		out_int(o, "numa_node", d->numa);
		out_int(o, "copy_engines", d->copy_engines);
		out_int(o, "nvlinks", d->nvlinks);
		out_item_end(o);
	}
	out_list_end(o);
	out_str(o, "nvlink_info", g->shown < 1 ? NULL : g->nvml[0] ? g->nvml : "NVML");
	out_list(o, "gpu_pairs");
	for (int k = 0; k < info_pair_count(g); k++) {
		int a, b;

		info_pair_at(g, k, &a, &b);
		emit_pair(o, g, a, b);
	}
	out_list_end(o);
	out_str(o, "pair_tries", g->probe_why[0] ? g->probe_why : NULL);
	out_obj(o, "nccl");
	info_nccl_emit(o, &g->nccl, l);
	out_obj_end(o);
}

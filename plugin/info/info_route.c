/* What an NCCL job on this host would get: the configuration parsed as
 * the plugin's init parses it, the NCCL variables the net plugin would
 * set (its own functions, run here), the RDMA devices, and the verdict:
 * usable or not, routed through the plugin or not, and why. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "info.h"
#include "transport.h"

static const char *env_get(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

void info_parse(struct info_sim *s)
{
	memset(s, 0, sizeof(*s));
	s->cfg_ok = config_parse(&s->cfg, env_get, NULL, s->err, sizeof(s->err)) == 0;
	if (!s->cfg_ok)
		config_parse(&s->cfg, NULL, NULL, NULL, 0);
}

static void note_default(const char *name, const char *value, int applied, const char *why,
			 void *arg)
{
	struct info_sim *s = arg;

	if (s->ndef >= INFO_MAX_DEFAULTS)
		return;
	info_say(s->def[s->ndef].name, sizeof(s->def[0].name), "%s", name);
	info_say(s->def[s->ndef].value, sizeof(s->def[0].value), "%s", value);
	s->def[s->ndef].applied = applied;
	s->def[s->ndef].why = why;
	s->ndef++;
}

static void note_advice(const char *name, const char *value, const char *why, void *arg)
{
	struct info_sim *s = arg;
	int n = s->nadvice;

	if (n >= (int)(sizeof(s->advice) / sizeof(s->advice[0])))
		return;
	info_say(s->advice[n].name, sizeof(s->advice[n].name), "%s", name);
	info_say(s->advice[n].value, sizeof(s->advice[n].value), "%s", value);
	s->advice[n].why = why;
	s->nadvice++;
}

static int other_net(void)
{
	const char *net = getenv("NCCL_NET");

	return net && strcasecmp(net, "symmem") != 0;
}

/* An NCCL switch as NCCL reads it (an integer, non-zero for on). */
static int nccl_on(const char *name)
{
	const char *v = getenv(name);

	return v && strtoll(v, NULL, 0) != 0;
}

void info_simulate(struct info_sim *s, const struct info_libs *l, const struct info_gpus *g)
{
	/* Again: the env plugin may have set NCCL_NET_PLUGIN_REF_COUNT. */
	info_parse(s);
	s->gpu_path = s->cfg_ok && g->loaded && g->count > 0 && s->cfg.dma_enable;
	/* Net v11 (NCCL 2.28 on) says which connections are rings; an NCCL
	 * not found is taken to be recent. */
	s->rings_hinted = !g->nccl.version || g->nccl.version >= 22800;
	if (!l->net_plugin_ours || other_net() || !s->gpu_path)
		return;
	config_apply_nccl_defaults(&s->cfg, s->rings_hinted, note_default, s);
	config_nccl_advice(&s->cfg, note_advice, s);
}

void info_rdma_find(struct info_rdma *r, const struct info_sim *s)
{
	memset(r, 0, sizeof(*r));
	r->selected = tp_rdma_devices(s->cfg.ib_hca, r->found, sizeof(r->found), r->chosen,
				      sizeof(r->chosen), r->why, sizeof(r->why));
}

/* How connections to other hosts go, as notes.c's notes_rdma says it. */
static void between_hosts(const struct info_sim *s, const struct info_rdma *r, char *buf,
			  size_t len)
{
	const char *passed = config_rdma_passed_over(&s->cfg);
	int mode = config_ib_mode(&s->cfg);

	if (s->cfg.inner_net[0] && (s->cfg.backend == CONFIG_BACKEND_TCP ||
				    s->cfg.backend == CONFIG_BACKEND_IB))
		info_say(buf, len, "none: NCCL_SYMMEM_INNER_NET with NCCL_SYMMEM_BACKEND=%s fails "
			 "the plugin's init", s->cfg.backend == CONFIG_BACKEND_TCP ? "tcp" : "ib");
	else if (s->cfg.inner_net[0])
		info_say(buf, len, "the inner net plugin NCCL_SYMMEM_INNER_NET=%s "
			 "(docs/multi-node.md)", s->cfg.inner_net);
	else if (s->cfg.backend == CONFIG_BACKEND_SHM)
		info_say(buf, len, "refused: NCCL_SYMMEM_BACKEND=shm serves one host only");
	else if (mode == 2)
		info_say(buf, len, "ibverbs only (NCCL_SYMMEM_BACKEND=ib)%s",
			 r->selected ? "" : "; no RDMA device selected here, so they fail");
	else if (mode == 0 && passed)
		info_say(buf, len, "TCP: %s", passed);
	else if (mode == 0)
		info_say(buf, len, "TCP (NCCL_SYMMEM_BACKEND=%s)",
			 s->cfg.backend == CONFIG_BACKEND_TCP ? "tcp" : "auto");
	else if (r->selected)
		info_say(buf, len, "ibverbs where the peer has an RDMA device too, else TCP");
	else
		info_say(buf, len, "TCP: no RDMA device selected here%s%s", r->why[0] ? ": " : "",
			 r->why);
}

static void intra_host(const struct info_sim *s, const struct info_gpus *g, char *buf,
		       size_t len)
{
	if (g->count < 2)
		info_say(buf, len, "no GPU traffic inside this host (%d GPU)", g->count);
	else if (!config_p2p_off())
		info_say(buf, len, "NCCL's own P2P transport: NCCL_P2P_DISABLE is not on, so the "
			 "plugin carries traffic between hosts only");
	else if (!nccl_on("NCCL_SHM_DISABLE"))
		info_say(buf, len, "NCCL's own SHM transport: NCCL_P2P_DISABLE is on but "
			 "NCCL_SHM_DISABLE is not");
	else if (s->cfg.backend == CONFIG_BACKEND_TCP)
		info_say(buf, len, "the plugin, over TCP loopback (NCCL_SYMMEM_BACKEND=tcp)");
	else if (s->cfg.backend == CONFIG_BACKEND_IB)
		info_say(buf, len, "the plugin, over RDMA loopback, host memory "
			 "(NCCL_SYMMEM_BACKEND=ib)");
	else if (!s->cfg.dma_enable)
		info_say(buf, len, "the plugin, host memory through shared memory "
			 "(NCCL_DMA_ENABLE=0)");
	else
		info_say(buf, len, "the plugin: copy engines write into peer-mapped GPU buffers");
}

/* Whether NCCL would run the plugin, and why (not). */
static int loaded(const struct info_sim *s, const struct info_libs *l, char *buf, size_t len)
{
	const char *net = getenv("NCCL_NET");

	if (!l->net_plugin_ours) {
		info_say(buf, len, "NCCL opens %s; NCCL_ENV_PLUGIN=symmem (NCCL 2.28.7 on) or "
			 "NCCL_NET_PLUGIN=symmem loads this plugin", l->nccl_opens);
		return 0;
	}
	if (other_net()) {
		info_say(buf, len, "NCCL opens it, but NCCL_NET=%s picks another net", net);
		return 0;
	}
	if (!s->cfg_ok) {
		info_say(buf, len, "NCCL opens it, but its init fails (the configuration): %s",
			 net ? "with NCCL_NET=symmem the job fails" :
			       "NCCL then quietly uses its own IB or Socket net");
		return 0;
	}
	info_say(buf, len, "NCCL_NET_PLUGIN opens it; %s", net ?
		 "NCCL_NET=symmem: a job fails rather than run without it" :
		 "NCCL_NET is unset: NCCL tries it first, then its own IB and Socket nets");
	return 1;
}

static int usable(const struct info_sim *s, const struct info_libs *l,
		  const struct info_gpus *g, char *buf, size_t len)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");

	if (!s->cfg_ok) {
		info_say(buf, len, "bad configuration: the plugin's init fails with NET/symmem: %s",
			 s->err);
		return INFO_BAD_CONFIG;
	}
	if (!l->net.path[0]) {
		info_say(buf, len, "no net plugin: %s", l->net.how);
		return INFO_NOT_USABLE;
	}
	if (!l->net_tables[0]) {
		info_say(buf, len, "%s exports no net table%s%s", l->net.path,
			 l->net_error[0] ? ": " : "", l->net_error);
		return INFO_NOT_USABLE;
	}
	if (!g->loaded) {
		info_say(buf, len, "%s", g->why);
		return INFO_NOT_USABLE;
	}
	if (g->count < 1) {
		info_say(buf, len, "the CUDA driver shows no GPU%s%s%s",
			 cvd ? " (CUDA_VISIBLE_DEVICES=" : "", cvd ? cvd : "", cvd ? ")" : "");
		return INFO_NOT_USABLE;
	}
	info_say(buf, len, "usable: %d GPU(s), CUDA driver %d.%d", g->count,
		 g->driver_version / 1000, g->driver_version % 1000 / 10);
	return INFO_USABLE;
}

static void note_builds(struct out *o, const struct info_libs *l)
{
	if (l->net.build[0] && strcmp(l->net.build, info_build()))
		out_elem(o, "the net plugin is another build than symmem-info: this report may not "
			 "fit it");
	if (l->helper.build[0] && l->net.build[0] && strcmp(l->helper.build, l->net.build))
		out_elem(o, "the copy helper is another build than the net plugin: copies fail "
			 "(their protocol is checked)");
}

static void note_pairs(struct out *o, const struct info_gpus *g)
{
	char line[600];

	for (int a = 0; a < g->shown; a++) {
		for (int b = 0; b < g->shown; b++) {
			const struct info_pair *p = &g->pair[a][b];

			if (a != b && p->p2p == 0) {
				info_say(line, sizeof(line), "GPU %d cannot access GPU %d's "
					 "memory: copies between them fail unless "
					 "NCCL_DIRECT_PATH=0 bounces them through host memory",
					 b, a);
				out_elem(o, line);
			}
			if (p->cumem == 0) {
				info_say(line, sizeof(line), "GPU %d to GPU %d: cuMem POSIX-fd "
					 "export/import fails (NCCL's default buffers): %s", a, b,
					 p->cumem_why);
				out_elem(o, line);
			}
			if (p->ipc == 0) {
				info_say(line, sizeof(line), "GPU %d to GPU %d: legacy IPC fails "
					 "(cudaMalloc buffers): %s", a, b, p->ipc_why);
				out_elem(o, line);
			}
		}
	}
}

static void notes(struct out *o, const struct info_sim *s, const struct info_libs *l,
		  const struct info_gpus *g)
{
	char line[1024], unknown[512];

	out_list(o, "notes");
	if (s->cfg.copy_helper && !l->helper.path[0])
		out_elem(o, l->helper.how);
	note_builds(o, l);
	if (info_nccl_takes(&g->nccl, l, INFO_NCCL_NET) == 0) {
		info_say(line, sizeof(line), "the NCCL on the loader path (%s) looks for no net "
			 "table this plugin exports (gpu.nccl.net_abi): it never loads the plugin",
			 g->nccl.library);
		out_elem(o, line);
	}
	if (l->env_plugin_ours && g->nccl.version && g->nccl.version < 22807) {
		info_say(line, sizeof(line), "NCCL %d.%d.%d on the loader path loads no env "
			 "plugin (2.28.7 on): there NCCL_ENV_PLUGIN=symmem does nothing",
			 g->nccl.version / 10000, g->nccl.version / 100 % 100,
			 g->nccl.version % 100);
		out_elem(o, line);
	}
	for (int i = 0; i < s->nadvice; i++) {
		info_say(line, sizeof(line), "%s is unset: set %s=%s before the job starts, or "
			 "NCCL_ENV_PLUGIN=symmem, which sets it: %s", s->advice[i].name,
			 s->advice[i].name, s->advice[i].value, s->advice[i].why);
		out_elem(o, line);
	}
	if (s->cfg.warnings[0]) {
		info_say(line, sizeof(line), "the plugin WARNs at init: %s", s->cfg.warnings);
		out_elem(o, line);
	}
	if (config_unknown_vars(unknown, sizeof(unknown)) > 0) {
		info_say(line, sizeof(line), "the plugin ignores unknown variable(s), with a "
			 "WARN: %s", unknown);
		out_elem(o, line);
	}
	if (s->cfg.ngpus_visible == 1 && g->count >= 1)
		out_elem(o, "CUDA_VISIBLE_DEVICES shows one GPU: every peer GPU is hidden from "
			 "this process (the copy helper runs without it: "
			 "NCCL_SYMMEM_HELPER_ALL_GPUS)");
	note_pairs(o, g);
	out_list_end(o);
}

int info_verdict_emit(struct out *o, const struct info_sim *s, const struct info_libs *l,
		      const struct info_gpus *g, const struct info_rdma *r)
{
	char why[1024], route[1024];
	int status = usable(s, l, g, why, sizeof(why));
	int on = loaded(s, l, route, sizeof(route));

	out_obj(o, "verdict");
	out_int(o, "exit_status", status);
	out_bool(o, "usable", status == INFO_USABLE);
	out_str(o, "why", why);
	out_bool(o, "nccl_runs_plugin", on);
	out_str(o, "nccl_runs_plugin_why", route);
	if (on && status == INFO_USABLE) {
		intra_host(s, g, route, sizeof(route));
		out_str(o, "inside_host", route);
		between_hosts(s, r, route, sizeof(route));
		out_str(o, "between_hosts", route);
	} else {
		out_str(o, "inside_host", on ? NULL : "NCCL's own transports");
		out_str(o, "between_hosts", on ? NULL : "NCCL's own IB or Socket net");
	}
	notes(o, s, l, g);
	out_obj_end(o);
	return status;
}

/* What GPU buffers a job with an inner net plugin gets: NCCL's own
 * GPU-NIC rule decides per NIC (the plugin sets no NCCL_NET_GDR_LEVEL
 * then), and the NICs' choice holds for this host's connections too. */
static const char *inner_gpu_buffers(char *buf, size_t len)
{
	const char *lvl = getenv("NCCL_NET_GDR_LEVEL");

	if (lvl && *lvl)
		info_say(buf, len, "NCCL_NET_GDR_LEVEL=%s (yours): NCCL hands GPU buffers to each "
			 "NIC within that distance of the GPU, where the inner plugin offers "
			 "NCCL_PTR_CUDA or DMABUF, and stages in host memory for the others", lvl);
	else
		info_say(buf, len, "NCCL's own GPU-NIC distance rule, per NIC (the plugin sets no "
			 "NCCL_NET_GDR_LEVEL with an inner plugin): GPUDirect RDMA to other hosts "
			 "where the inner plugin offers NCCL_PTR_CUDA or DMABUF and the NIC is close "
			 "to the GPU, host staging elsewhere");
	if (config_p2p_off())
		info_say(buf + strlen(buf), len - strlen(buf), "; with P2P off, connections inside "
			 "this host on a NIC that gets GPU buffers go through the copy engines, on "
			 "one that does not through the shared-memory ring from host memory "
			 "(slower)");
	return buf;
}

void info_rdma_emit(struct out *o, const struct info_sim *s, const struct info_rdma *r)
{
	char gpu[640];
	const char *inner = s->cfg.inner_net[0] ? s->cfg.inner_net : NULL;
	char route[512];

	between_hosts(s, r, route, sizeof(route));
	out_obj(o, "rdma");
	out_bool(o, "ibverbs_backend", tp_rdma_built());
	out_words(o, "devices", r->found, ',');
	out_str(o, "ib_hca", s->cfg.ib_hca[0] ? s->cfg.ib_hca : NULL);
	out_words(o, "selected", r->chosen, ',');
	out_str(o, "why_none", r->why[0] ? r->why : NULL);
	out_str(o, "other_hosts", route);
	out_str(o, "inner_net", inner);
	out_str(o, "inner_net_note", inner ? "every connection to another host goes through it; "
		"symmem-info does not load it (the plugin's init does)" : NULL);
	out_str(o, "inner_gpu_buffers", inner ? inner_gpu_buffers(gpu, sizeof(gpu)) : NULL);
	out_obj_end(o);
}

/* symmem-info: what libnccl-net-symmem would do on this host, and with
 * --selftest whether its data paths move bytes correctly here.  Needs no
 * NCCL, and runs on a host without GPU or driver, which it says. */
#include <stdio.h>
#include <string.h>

#include "info.h"

static const char usage[] =
	"usage: symmem-info [--json] [--selftest]\n"
	"\n"
	"Says what an NCCL job on this host would get from libnccl-net-symmem: the\n"
	"libraries and copy helper it would load (with their builds and NCCL tables),\n"
	"the CUDA driver and GPUs (peer access and memory sharing between every pair,\n"
	"tried in real processes), RDMA devices, every variable the plugin reads\n"
	"(value, origin: user, env plugin, net plugin or default, and meaning) and\n"
	"whether the job's GPU traffic goes through the plugin, and why.\n"
	"\n"
	"  --json      the same as one JSON object; its fields (stable names) are listed\n"
	"              in docs/symmem-info.md: tool, build, verdict {exit_status, usable,\n"
	"              why, nccl_runs_plugin, inside_host, between_hosts, notes}, files,\n"
	"              gpu {driver, gpu_count, gpus, gpu_pairs, nccl}, rdma, config_error,\n"
	"              variables, nccl_variables; with --selftest: selftest {paths,\n"
	"              passed, failed, skipped}, exit_status\n"
	"  --selftest  moves bytes between two processes through the plugin's own net\n"
	"              table on every path it can take here (host memory through shared\n"
	"              memory, TCP loopback, GPU memory between each pair of GPUs by copy\n"
	"              engines), checks every byte and prints latency and bandwidth;\n"
	"              paths that cannot run here are skipped, with the reason\n"
	"\n"
	"Exit status: 0 usable (with --selftest: every path that ran passed),\n"
	"1 not usable (no driver, no GPU, no library; a path failed), 2 bad\n"
	"configuration (a malformed variable, shown with the plugin's own error text)\n"
	"or command line.\n";

static void report(struct out *o, struct info_sim *sim, struct info_libs *libs,
		   struct info_gpus *gpus, int *status)
{
	struct info_rdma rdma;

	/* The tries first: they need the user's environment, and the
	 * simulation changes this process's. */
	info_gpus_probe(gpus);
	info_simulate(sim, libs, gpus);
	info_rdma_find(&rdma, sim);
	*status = info_verdict_emit(o, sim, libs, gpus, &rdma);
	out_obj(o, "files");
	info_libs_emit(o, libs);
	out_obj_end(o);
	out_obj(o, "gpu");
	info_gpus_emit(o, gpus, libs);
	out_obj_end(o);
	info_rdma_emit(o, sim, &rdma);
	info_vars_emit(o, sim, libs);
}

static int selftest(struct out *o, struct info_sim *sim, struct info_libs *libs,
		    struct info_gpus *gpus)
{
	int status;

	/* As the plugin's init would see it, after the env plugin. */
	info_parse(sim);
	if (!sim->cfg_ok) {
		out_str(o, "config_error", sim->err);
		status = INFO_BAD_CONFIG;
	} else {
		status = info_selftest(o, sim, libs, gpus);
	}
	out_int(o, "exit_status", status);
	return status;
}

int main(int argc, char **argv)
{
	static struct info_sim sim;
	static struct info_libs libs;
	static struct info_gpus gpus;
	int json = 0, test = 0, status = INFO_USABLE;
	struct out o;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--selftest")) {
			test = 1;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else {
			fprintf(stderr, "symmem-info: unknown argument '%s'\n\n%s", argv[i], usage);
			return INFO_BAD_CONFIG;
		}
	}
	info_parse(&sim);
	info_libs_find(&libs, sim.cfg_ok ? &sim.cfg : NULL);
	info_gpus_survey(&gpus);
	out_begin(&o, stdout, json);
	out_str(&o, "tool", "symmem-info");
	out_str(&o, "build", info_build());
	if (test)
		status = selftest(&o, &sim, &libs, &gpus);
	else
		report(&o, &sim, &libs, &gpus, &status);
	out_end(&o);
	return status;
}

/* The NCCL on the loader path: its version, and which plugin tables it
 * looks for, read from its binary.  NCCL takes the newest table of each
 * kind that it knows and the plugin exports (shared/docs/nccl-plugin-abi.md
 * 1.2), so the two lists say which ABI a job gets before any job runs:
 * an NCCL too old for every net table the plugin has never loads it.
 *
 * The lookup runs in the survey's child (info_gpu.c): loading NCCL may run
 * its constructors. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>

#include "info.h"

#define TABLE_MARK "Plugin_v"

static const char *const kind_prefix[INFO_NCCL_KINDS] = { "ncclNet", "ncclTuner", "ncclEnv" };
static const char *const kind_name[INFO_NCCL_KINDS] = { "net", "tuner", "env" };

/* The kind whose name ends right before `mark` in [base, mark), or -1:
 * "ncclNetPlugin_v8" is net, "ncclCollNetPlugin_v8" none of ours. */
static int kind_before(const char *base, const char *mark)
{
	for (int k = 0; k < INFO_NCCL_KINDS; k++) {
		size_t n = strlen(kind_prefix[k]);

		if ((size_t)(mark - base) >= n && !memcmp(mark - n, kind_prefix[k], n))
			return k;
	}
	return -1;
}

/* The version whose digits start at p (before end), 1-31, and in *next
 * where they stop; 0 for no digits or a version out of that range. */
static unsigned version_at(const char *p, const char *end, const char **next)
{
	unsigned v = 0;

	while (p < end && *p >= '0' && *p <= '9' && v < 100)
		v = v * 10 + (unsigned)(*p++ - '0');
	*next = p;
	return v <= 31 ? v : 0;
}

/* Every "ncclNetPlugin_vN", "ncclTunerPlugin_vN" and "ncclEnvPlugin_vN"
 * string in the file, as bit N of n->probes[kind].  One pass: the mark
 * occurs a few dozen times in NCCL's 30-40 MB. */
static void read_probes(struct info_nccl *n, const char *path)
{
	size_t size;
	const char *map = info_map_file(path, strlen(TABLE_MARK), &size), *p, *end;

	if (!map)
		return;
	end = map + size;
	for (p = map; (p = memmem(p, (size_t)(end - p), TABLE_MARK, strlen(TABLE_MARK)));) {
		int kind = kind_before(map, p);
		const char *d;
		unsigned v;

		p += strlen(TABLE_MARK);
		v = version_at(p, end, &d);
		/* The whole string, no more: "_v1" of "_v12" is not v1. */
		if (kind < 0 || !v || d >= end || *d != '\0')
			continue;
		n->probes[kind] |= 1u << v;
		n->read = 1;
	}
	munmap((void *)map, size);
}

void info_nccl_find(struct info_nccl *n)
{
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	int (*get)(int *) = NULL;
	struct link_map *map = NULL;
	void *sym;

	memset(n, 0, sizeof(*n));
	if (!h) {
		info_say(n->library, sizeof(n->library), "libnccl.so.2 is not on the loader path (a "
			 "job's own NCCL, e.g. in a Python wheel, is not looked for)");
		return;
	}
	sym = dlsym(h, "ncclGetVersion");
	if (sym)
		memcpy(&get, &sym, sizeof(sym));
	if (!get || get(&n->version) != 0)
		n->version = 0;
	if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) {
		info_say(n->library, sizeof(n->library), "%s", map->l_name);
		read_probes(n, map->l_name);
	}
}

/* The versions named in a space-separated list of table names. */
static uint32_t table_bits(const char *list, int kind)
{
	uint32_t bits = 0;
	size_t n = strlen(kind_prefix[kind]);

	for (const char *p = list; (p = strstr(p, kind_prefix[kind]));) {
		unsigned v;

		p += n;
		if (strncmp(p, TABLE_MARK, strlen(TABLE_MARK)))
			continue;
		p += strlen(TABLE_MARK);
		v = version_at(p, p + strlen(p), &p);
		if (v)
			bits |= 1u << v;
	}
	return bits;
}

static uint32_t plugin_bits(const struct info_libs *l, int kind)
{
	return table_bits(kind == INFO_NCCL_ENV ? l->env_tables :
			  kind == INFO_NCCL_TUNER ? l->tuner_tables : l->net_tables, kind);
}

static int highest(uint32_t bits)
{
	return bits ? 31 - __builtin_clz(bits) : 0;
}

int info_nccl_takes(const struct info_nccl *n, const struct info_libs *l, int kind)
{
	if (!n->read)
		return -1;
	return highest(n->probes[kind] & plugin_bits(l, kind));
}

/* The versions as "v8, v7, v6", newest first. */
static void versions(uint32_t bits, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int v = 31; v > 0; v--)
		if (bits & (1u << v))
			used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%sv%d",
						 used ? ", " : "", v);
}

void info_nccl_emit(struct out *o, const struct info_nccl *n, const struct info_libs *l)
{
	char key[32], have[96], wants[96];

	if (n->version)
		out_strf(o, "version", "%d.%d.%d", n->version / 10000, n->version / 100 % 100,
			 n->version % 100);
	else
		out_str(o, "version", NULL);
	out_str(o, "library", n->library);
	for (int k = 0; k < INFO_NCCL_KINDS; k++) {
		int v = info_nccl_takes(n, l, k);

		info_say(key, sizeof(key), "%s_abi", kind_name[k]);
		versions(n->probes[k], wants, sizeof(wants));
		versions(plugin_bits(l, k), have, sizeof(have));
		if (v < 0)
			out_str(o, key, NULL);	/* no NCCL, or no table names in it */
		else if (v > 0)
			out_strf(o, key, "v%d (it looks for %s)", v, wants);
		else if (!n->probes[k])
			out_strf(o, key, "none: this NCCL loads no %s plugin", kind_name[k]);
		else
			out_strf(o, key, "none: it looks for %s, the plugin has %s", wants,
				 have[0] ? have : "none");
	}
}

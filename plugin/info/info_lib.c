/* The files a job would open: the env plugin and net plugin NCCL finds
 * from NCCL_ENV_PLUGIN and NCCL_NET_PLUGIN (looked up by NCCL's rules,
 * shared/docs/nccl-plugin-abi.md 1.1), the copy helper the net plugin
 * finds (helper_path.c's rule), each one's build, and the NCCL tables the
 * libraries export.
 *
 * A name is looked up by dlopen() in a child: a library of someone
 * else's may run code when loaded.  Only files that carry this project's
 * build id are opened here, to read their tables. */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_id.h"
#include "helper_path.h"
#include "info.h"
#include "symmem.h"

#define NET_FILE "libnccl-net-symmem.so"
#define ENV_FILE "libnccl-env-symmem.so"

const char *info_build(void)
{
	return symmem_build_id + strlen(BUILD_ID_MARKER);
}

const char *info_map_file(const char *path, size_t min, size_t *size)
{
	struct stat st;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || st.st_size <= (off_t)min) {
		close(fd);
		return NULL;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	*size = (size_t)st.st_size;
	return map;
}

/* The build id in file `path` ("0.1.0 (a5b8389)"), "" when it has none. */
static void file_build(const char *path, char *out, size_t len)
{
	size_t mlen = strlen(BUILD_ID_MARKER), size;
	const char *map = info_map_file(path, mlen, &size), *hit;

	out[0] = '\0';
	if (!map)
		return;
	hit = memmem(map, size, BUILD_ID_MARKER, mlen);
	if (hit) {
		const char *v = hit + mlen, *end = map + size;
		size_t n = 0;

		while (v + n < end && v[n] && n + 1 < len)
			n++;
		memcpy(out, v, n);
		out[n] = '\0';
	}
	munmap((void *)map, size);
}

static void dir_of(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');

	info_say(out, len, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
}

struct lookup {
	char value[INFO_PATH];	/* the variable's value, "" unset */
	char prefix[32];	/* "libnccl-net" */
	int found;
	char path[INFO_PATH];
	char tried[INFO_WHY];	/* the names tried, or dlopen's error */
};

/* One name as NCCL opens it; its file in l->path. */
static int try_name(struct lookup *l, const char *name)
{
	struct link_map *map = NULL;
	size_t used = strlen(l->tried);
	char *real;
	void *h;

	info_say(l->tried + used, sizeof(l->tried) - used, "%s%s", used ? " " : "", name);
	h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();

		/* Anything but a missing file is worth its own words. */
		if (e && !strstr(e, "No such file"))
			info_say(l->tried, sizeof(l->tried), "%s", e);
		return 0;
	}
	if (dlinfo(h, RTLD_DI_LINKMAP, &map) || !map || !map->l_name || !map->l_name[0])
		return 0;
	real = realpath(map->l_name, NULL);
	info_say(l->path, sizeof(l->path), "%s", real ? real : map->l_name);
	free(real);
	return 1;
}

/* NCCL's rule for one entry: as written, then <prefix>-<entry>.so unless it
 * holds a '/' or already reads lib*.so. */
static int try_entry(struct lookup *l, const char *v)
{
	char name[INFO_PATH];
	size_t n = strlen(v);

	if (try_name(l, v))
		return 1;
	if (strchr(v, '/') || (!strncmp(v, "lib", 3) && n >= 3 && !strcmp(v + n - 3, ".so")))
		return 0;
	info_say(name, sizeof(name), "%s-%s.so", l->prefix, v);
	return try_name(l, name);
}

static int lookup_child(void *arg, int wr)
{
	struct lookup *l = arg;
	char entry[INFO_PATH];

	if (!l->value[0]) {
		info_say(entry, sizeof(entry), "%s.so", l->prefix);
		l->found = try_name(l, entry);
	}
	for (const char *p = l->value; *p && !l->found;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		info_say(entry, sizeof(entry), "%.*s", (int)n, p);
		if (entry[0])
			l->found = try_entry(l, entry);
		p = comma ? comma + 1 : p + n;
	}
	return proc_write(wr, l, sizeof(*l)) ? 1 : 0;
}

/* Where NCCL's lookup of `value` lands; 1 with l->path, 0 with l->tried. */
static int nccl_lookup(struct lookup *l, const char *prefix, const char *value)
{
	int rd = -1, ok;
	pid_t pid;

	memset(l, 0, sizeof(*l));
	info_say(l->prefix, sizeof(l->prefix), "%s", prefix);
	info_say(l->value, sizeof(l->value), "%s", value ? value : "");
	pid = proc_start(lookup_child, l, &rd);
	if (pid < 0) {
		info_say(l->tried, sizeof(l->tried), "cannot start a process to look it up");
		return 0;
	}
	ok = proc_read(rd, l, sizeof(*l), proc_deadline(10)) == 0;
	close(rd);
	proc_reap(pid, proc_deadline(5));
	if (!ok)
		info_say(l->tried, sizeof(l->tried), "the lookup did not answer");
	return ok && l->found;
}

static int is_ours(const char *path)
{
	char build[128];

	file_build(path, build, sizeof(build));
	return build[0] != '\0';
}

/* The project's file `name` beside this executable (a build tree), else
 * in the library directory it was installed for. */
static int own_copy(const char *name, struct info_file *f)
{
	char exe[INFO_PATH], dir[INFO_PATH];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		dir_of(exe, dir, sizeof(dir));
		info_say(f->path, sizeof(f->path), "%s/%s", dir, name);
		if (access(f->path, R_OK) == 0) {
			info_say(f->how, sizeof(f->how), "beside symmem-info");
			return 1;
		}
	}
	info_say(f->path, sizeof(f->path), "%s/%s", SYMMEM_LIBDIR, name);
	if (access(f->path, R_OK) == 0) {
		info_say(f->how, sizeof(f->how), "in %s, where it was installed", SYMMEM_LIBDIR);
		return 1;
	}
	f->path[0] = '\0';
	return 0;
}

/* Whether `name` is in the env plugin's list of what it set. */
static int env_plugin_set(const struct info_libs *l, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = l->env_set; (p = strstr(p, name)); p += n)
		if ((p == l->env_set || p[-1] == ' ') && p[n] == '=')
			return 1;
	return 0;
}

/* NCCL_ENV_PLUGIN: whether it opens this project's env plugin; if so,
 * what that plugin sets is set here too, by the same function and with
 * the same NCCL_NET_PLUGIN (env_plugin.c: the net plugin beside it, links
 * resolved, where it is there). */
static void find_env(struct info_libs *l)
{
	const char *v = getenv("NCCL_ENV_PLUGIN");
	char dir[INFO_PATH], why[INFO_WHY];
	struct lookup lk;

	if (!v || !*v) {
		info_say(why, sizeof(why), "NCCL_ENV_PLUGIN is unset");
	} else if (!nccl_lookup(&lk, "libnccl-env", v)) {
		info_say(why, sizeof(why), "NCCL_ENV_PLUGIN=%s opens nothing (tried %s)", v,
			 lk.tried);
	} else if (!is_ours(lk.path)) {
		info_say(why, sizeof(why), "NCCL_ENV_PLUGIN=%s opens %s, another env plugin", v,
			 lk.path);
	} else {
		l->env_plugin_ours = 1;
		info_say(l->env.path, sizeof(l->env.path), "%s", lk.path);
		info_say(l->env.how, sizeof(l->env.how), "NCCL_ENV_PLUGIN=%s opens it", v);
		dir_of(lk.path, dir, sizeof(dir));
		info_say(l->env_net_path, sizeof(l->env_net_path), "%s/%s", dir, NET_FILE);
		if (strlen(dir) + sizeof(NET_FILE) >= sizeof(l->env_net_path) ||
		    access(l->env_net_path, R_OK) != 0)
			l->env_net_path[0] = '\0';
		l->env_plugin_ran = config_apply_env_plugin_defaults(l->env_net_path) >= 0;
		info_say(l->env_set, sizeof(l->env_set), "%s", config_env_plugin_applied());
	}
	if (!l->env.path[0] && own_copy(ENV_FILE, &l->env)) {
		size_t n = strlen(l->env.how);

		info_say(l->env.how + n, sizeof(l->env.how) - n, "; NCCL does not load it: %s",
			 why);
	}
	if (!l->env.path[0])
		info_say(l->env.how, sizeof(l->env.how), "%s; none beside symmem-info nor in %s",
			 why, SYMMEM_LIBDIR);
	else
		file_build(l->env.path, l->env.build, sizeof(l->env.build));
}

static void find_net(struct info_libs *l)
{
	const char *v = getenv("NCCL_NET_PLUGIN");
	const char *origin = env_plugin_set(l, "NCCL_NET_PLUGIN") ? " (set by the env plugin)" : "";
	struct lookup lk;

	if (v && !strcasecmp(v, "none")) {
		info_say(l->nccl_opens, sizeof(l->nccl_opens), "no external net plugin "
			 "(NCCL_NET_PLUGIN=none)");
	} else if (!nccl_lookup(&lk, "libnccl-net", v)) {
		info_say(l->nccl_opens, sizeof(l->nccl_opens), "nothing for NCCL_NET_PLUGIN=%s%s "
			 "(tried %s): NCCL uses its own IB or Socket net", v ? v : "(unset)",
			 origin, lk.tried);
	} else if (!is_ours(lk.path)) {
		info_say(l->nccl_opens, sizeof(l->nccl_opens), "%s for NCCL_NET_PLUGIN=%s%s, not "
			 "this plugin", lk.path, v ? v : "(unset)", origin);
	} else {
		l->net_plugin_ours = 1;
		info_say(l->net.path, sizeof(l->net.path), "%s", lk.path);
		info_say(l->net.how, sizeof(l->net.how), "NCCL_NET_PLUGIN=%s%s opens it", v,
			 origin);
		info_say(l->nccl_opens, sizeof(l->nccl_opens), "%s", lk.path);
	}
	if (!l->net.path[0] && own_copy(NET_FILE, &l->net)) {
		size_t n = strlen(l->net.how);

		info_say(l->net.how + n, sizeof(l->net.how) - n, "; NCCL does not open it here");
	}
	if (!l->net.path[0])
		info_say(l->net.how, sizeof(l->net.how), "not found: neither NCCL's lookup, nor "
			 "beside symmem-info, nor in %s", SYMMEM_LIBDIR);
	else
		file_build(l->net.path, l->net.build, sizeof(l->net.build));
}

/* The table symbols of `names` that `path` exports, into `out`. */
static void tables(const char *path, const char *const *names, size_t n, char *out, size_t len,
		   char *plugin_name, size_t nlen, char *err, size_t elen)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	size_t used = 0;

	out[0] = '\0';
	if (!h) {
		info_say(err, elen, "%s", dlerror());
		return;
	}
	for (size_t i = 0; i < n; i++) {
		void *sym = dlsym(h, names[i]);
		const char *name = NULL;

		if (!sym)
			continue;
		used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s",
					 used ? " " : "", names[i]);
		/* Every table's first member is its name. */
		memcpy(&name, sym, sizeof(name));
		if (plugin_name && !plugin_name[0] && name)
			info_say(plugin_name, nlen, "%s", name);
	}
	dlclose(h);
}

static void find_tables(struct info_libs *l)
{
	static const char *const net[] = {
		"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
		"ncclNetPlugin_v8", "ncclNetPlugin_v7", "ncclNetPlugin_v6",
	};
	static const char *const tuner[] = {
		"ncclTunerPlugin_v7", "ncclTunerPlugin_v6", "ncclTunerPlugin_v5",
		"ncclTunerPlugin_v4", "ncclTunerPlugin_v3", "ncclTunerPlugin_v2",
	};
	static const char *const env[] = { "ncclEnvPlugin_v2", "ncclEnvPlugin_v1" };

	if (l->net.path[0]) {
		tables(l->net.path, net, sizeof(net) / sizeof(net[0]), l->net_tables,
		       sizeof(l->net_tables), l->plugin_name, sizeof(l->plugin_name),
		       l->net_error, sizeof(l->net_error));
		tables(l->net.path, tuner, sizeof(tuner) / sizeof(tuner[0]), l->tuner_tables,
		       sizeof(l->tuner_tables), NULL, 0, l->net_error, sizeof(l->net_error));
	}
	if (l->env.path[0])
		tables(l->env.path, env, sizeof(env) / sizeof(env[0]), l->env_tables,
		       sizeof(l->env_tables), NULL, 0, l->env_error, sizeof(l->env_error));
}

static void find_helper(struct info_libs *l, const struct config *cfg)
{
	struct info_file *h = &l->helper;
	char dir[INFO_PATH];
	enum helper_where where;

	if (l->net.path[0])
		dir_of(l->net.path, dir, sizeof(dir));
	where = helper_path_lookup(cfg, l->net.path[0] ? dir : NULL, SYMMEM_LIBEXECDIR, h->path,
				   sizeof(h->path));
	switch (where) {
	case HELPER_EXPLICIT:
		info_say(h->how, sizeof(h->how), "NCCL_SYMMEM_COPY_HELPER_PATH");
		break;
	case HELPER_BESIDE_LIBRARY:
		info_say(h->how, sizeof(h->how), "beside the net plugin");
		break;
	case HELPER_LIBEXEC:
		info_say(h->how, sizeof(h->how), "in %s, where it was installed",
			 SYMMEM_LIBEXECDIR);
		break;
	case HELPER_NOT_FOUND:
		h->path[0] = '\0';
		if (cfg->copy_helper_path[0])
			info_say(h->how, sizeof(h->how), "NCCL_SYMMEM_COPY_HELPER_PATH=%s is not "
				 "an executable file; copies run in the NCCL process",
				 cfg->copy_helper_path);
		else
			info_say(h->how, sizeof(h->how), "not found beside the net plugin nor in "
				 "%s; copies run in the NCCL process", SYMMEM_LIBEXECDIR);
		break;
	}
	if (!cfg->copy_helper)
		info_say(h->how, sizeof(h->how), "not started: NCCL_SYMMEM_COPY_HELPER=0, copies "
			 "run in the NCCL process");
	if (h->path[0])
		file_build(h->path, h->build, sizeof(h->build));
}

void info_libs_find(struct info_libs *l, const struct config *cfg)
{
	struct config defaults;

	memset(l, 0, sizeof(*l));
	if (!cfg) {
		config_parse(&defaults, NULL, NULL, NULL, 0);
		cfg = &defaults;
	}
	find_env(l);
	find_net(l);
	find_tables(l);
	find_helper(l, cfg);
}

static void emit_file(struct out *o, const char *key, const struct info_file *f)
{
	out_obj(o, key);
	out_str(o, "path", f->path[0] ? f->path : NULL);
	out_str(o, "found", f->how);
	out_str(o, "build", f->build[0] ? f->build : NULL);
	out_obj_end(o);
}

void info_libs_emit(struct out *o, const struct info_libs *l)
{
	emit_file(o, "net_plugin", &l->net);
	out_bool(o, "nccl_opens_it", l->net_plugin_ours);
	out_str(o, "nccl_opens", l->nccl_opens);
	out_str(o, "plugin_name", l->plugin_name[0] ? l->plugin_name : NULL);
	out_str(o, "load_error", l->net_error[0] ? l->net_error : NULL);
	out_words(o, "net_tables", l->net_tables, ' ');
	out_words(o, "tuner_tables", l->tuner_tables, ' ');
	emit_file(o, "env_plugin", &l->env);
	out_bool(o, "env_plugin_in_use", l->env_plugin_ours);
	out_words(o, "env_plugin_set", l->env_set, ' ');
	out_str(o, "env_load_error", l->env_error[0] ? l->env_error : NULL);
	out_words(o, "env_tables", l->env_tables, ' ');
	emit_file(o, "copy_helper", &l->helper);
}

/* RDMA devices opened for the ibverbs backend: libibverbs loaded at run
 * time, one open context and protection domain per device and process,
 * shared by every connection on it and kept while any connection or
 * memory registration holds it.
 *
 * Which device a connection uses: of the devices NCCL_IB_HCA selects, the
 * one closest to the connection's GPU on the PCI tree (tp_nic_closest);
 * equally close ones, or all when the GPU's place is unknown, are taken in
 * turn by the plugin's devices (one per GPU).  Which port: the one
 * NCCL_IB_HCA names ("mlx5_0:2"), else the first active one.  Which GID:
 * NCCL_IB_GID_INDEX, or else the first RoCE v2 GID holding an IPv4 address
 * (what routes on an IPv4 RoCE fabric), then any RoCE v2 GID, then any GID
 * at all; on an InfiniBand link the LID addresses the peer and no GID is
 * needed. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"

#ifdef SYMMEM_HAVE_VERBS

static struct ib_fns fns;
static const char *load_error;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ib_dev *devs;

static void load(void)
{
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	const struct {
		const char *name;
		void *fn;
		size_t size;
	} table[] = {
		{ "ibv_get_device_list", &fns.get_device_list, sizeof(fns.get_device_list) },
		{ "ibv_free_device_list", &fns.free_device_list, sizeof(fns.free_device_list) },
		{ "ibv_get_device_name", &fns.get_device_name, sizeof(fns.get_device_name) },
		{ "ibv_open_device", &fns.open_device, sizeof(fns.open_device) },
		{ "ibv_close_device", &fns.close_device, sizeof(fns.close_device) },
		{ "ibv_query_device", &fns.query_device, sizeof(fns.query_device) },
		{ "ibv_query_port", &fns.query_port, sizeof(fns.query_port) },
		{ "ibv_query_gid", &fns.query_gid, sizeof(fns.query_gid) },
		{ "ibv_alloc_pd", &fns.alloc_pd, sizeof(fns.alloc_pd) },
		{ "ibv_dealloc_pd", &fns.dealloc_pd, sizeof(fns.dealloc_pd) },
		{ "ibv_reg_mr", &fns.reg_mr, sizeof(fns.reg_mr) },
		{ "ibv_dereg_mr", &fns.dereg_mr, sizeof(fns.dereg_mr) },
		{ "ibv_create_cq", &fns.create_cq, sizeof(fns.create_cq) },
		{ "ibv_destroy_cq", &fns.destroy_cq, sizeof(fns.destroy_cq) },
		{ "ibv_create_qp", &fns.create_qp, sizeof(fns.create_qp) },
		{ "ibv_destroy_qp", &fns.destroy_qp, sizeof(fns.destroy_qp) },
		{ "ibv_modify_qp", &fns.modify_qp, sizeof(fns.modify_qp) },
		{ "ibv_wc_status_str", &fns.wc_status_str, sizeof(fns.wc_status_str) },
	};

	if (!lib) {
		load_error = "libibverbs.so.1 not found";
		return;
	}
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (tp_ibv_symbol(lib, table[i].name, table[i].fn, table[i].size)) {
			load_error = "libibverbs.so.1 lacks a verb the data path needs";
			return;	/* the library stays loaded: nothing of it is used */
		}
	}
	/* Optional: without it GPU memory stays off ibverbs (ib_dmabuf.c). */
	if (tp_ibv_symbol(lib, "ibv_reg_dmabuf_mr", &fns.reg_dmabuf_mr, sizeof(fns.reg_dmabuf_mr)))
		fns.reg_dmabuf_mr = NULL;
	fns.loaded = 1;
}

/* The DMA-BUF probe's answers, by device name: asked once per device and
 * process, however often its context is opened again.  devs_lock held. */
#define PROBES_KEPT 32
static struct {
	char name[64];
	int ok;
	char why[IB_WHY_BYTES];
} probes[PROBES_KEPT];
static int nprobes;

static void probe_dmabuf(struct ib_dev *d)
{
	for (int i = 0; i < nprobes; i++) {
		if (!strcmp(probes[i].name, d->name)) {
			d->dmabuf = probes[i].ok;
			memcpy(d->dmabuf_why, probes[i].why, sizeof(d->dmabuf_why));
			return;
		}
	}
	d->dmabuf = ib_dmabuf_probe(&fns, d->pd, d->dmabuf_why, sizeof(d->dmabuf_why));
	if (nprobes == PROBES_KEPT)
		return;		/* more devices than any host has: ask again next time */
	snprintf(probes[nprobes].name, sizeof(probes[0].name), "%s", d->name);
	probes[nprobes].ok = d->dmabuf;
	memcpy(probes[nprobes].why, d->dmabuf_why, sizeof(d->dmabuf_why));
	nprobes++;
}

const struct ib_fns *ib_fns(void)
{
	pthread_once(&load_once, load);
	return fns.loaded ? &fns : NULL;
}

/* The GID's type as the kernel names it ("RoCE v2", "IB/RoCE v1"). */
static int gid_is_v2(const char *dev, int port, int index)
{
	char path[256], type[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev,
		 port, index);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(type, sizeof(type), f))
		type[0] = '\0';
	fclose(f);
	return strncmp(type, "RoCE v2", 7) == 0;
}

static int pick_gid(struct ib_dev *d, int tbl_len, int want)
{
	int best = -1, best_score = 0;

	if (want >= 0) {
		if (want >= tbl_len || fns.query_gid(d->ctx, (uint8_t)d->port, want,
						     (union ibv_gid *)d->gid) ||
		    tp_gid_zero(d->gid))
			return sm_fail(SM_ERR_USAGE, "NCCL_IB_GID_INDEX=%d: %s port %d has no GID "
				       "there (%d entries)", want, d->name, d->port, tbl_len);
		d->gid_index = want;
		return SM_OK;
	}
	for (int i = 0; i < tbl_len && i < 256; i++) {
		union ibv_gid g;
		int score;

		/* The table has room for more GIDs than the port has: an
		 * all-zero entry is no address. */
		if (fns.query_gid(d->ctx, (uint8_t)d->port, i, &g) || tp_gid_zero(g.raw))
			continue;
		score = 1;
		if (gid_is_v2(d->name, d->port, i))
			score = tp_gid_ipv4(g.raw) ? 3 : 2;
		if (score > best_score) {
			best = i;
			best_score = score;
			memcpy(d->gid, g.raw, 16);
		}
	}
	if (best < 0)
		return sm_fail(SM_ERR_SYSTEM, "%s port %d has no usable GID", d->name, d->port);
	d->gid_index = best;
	return SM_OK;
}

/* Opens device `dev` and finds its port (`want`, or else the first active
 * one an exclusion list `spec` does not leave out) and address. */
static int dev_open(struct ibv_device *dev, const char *spec, int want, int gid_index,
		    struct ib_dev *d)
{
	struct ibv_device_attr da;
	int rc, left_out = 0;

	snprintf(d->name, sizeof(d->name), "%s", fns.get_device_name(dev));
	d->ctx = fns.open_device(dev);
	if (!d->ctx)
		return sm_fail(SM_ERR_SYSTEM, "ibv_open_device(%s) failed", d->name);
	if (fns.query_device(d->ctx, &da))
		return sm_fail(SM_ERR_SYSTEM, "ibv_query_device(%s) failed", d->name);
	d->max_qp_wr = da.max_qp_wr;
	for (int p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;

		memset(&pa, 0, sizeof(pa));
		if (want && p != want)
			continue;
		if (fns.query_port(d->ctx, (uint8_t)p, (struct _compat_ibv_port_attr *)&pa) ||
		    pa.state != IBV_PORT_ACTIVE)
			continue;
		if (tp_namelist_port_excluded(spec, d->name, p)) {
			left_out++;
			continue;
		}
		d->port = p;
		d->lid = pa.lid;
		d->mtu = pa.active_mtu;
		d->link_layer = pa.link_layer;
		d->max_msg = pa.max_msg_sz;
		rc = pick_gid(d, pa.gid_tbl_len, gid_index);
		if (rc && d->link_layer == IBV_LINK_LAYER_INFINIBAND && gid_index < 0)
			rc = SM_OK;	/* the LID is enough on IB */
		if (rc)
			return rc;
		d->pd = fns.alloc_pd(d->ctx);
		if (!d->pd)
			return sm_fail(SM_ERR_SYSTEM, "ibv_alloc_pd(%s) failed", d->name);
		probe_dmabuf(d);
		return SM_OK;
	}
	if (want)
		return sm_fail(SM_ERR_USAGE, "NCCL_IB_HCA names port %d of %s, which is not an "
			       "active port (%d port(s))", want, d->name, da.phys_port_cnt);
	if (left_out)
		return sm_fail(SM_ERR_USAGE, "NCCL_IB_HCA=%s leaves out every active port of %s",
			       spec, d->name);
	return sm_fail(SM_ERR_SYSTEM, "%s has no active port", d->name);
}

static void dev_free(struct ib_dev *d)
{
	/* Every queue pair and memory region on it is gone by now; if the
	 * driver still says busy, that is a leak worth one line. */
	if (d->pd && fns.dealloc_pd(d->pd))
		sm_warn("closing RDMA device %s: its protection domain is still in use", d->name);
	if (d->ctx)
		fns.close_device(d->ctx);
	free(d);
}

/* The process's open device for `dev` and the port `spec` names for it,
 * opened now if none is; devs_lock held. */
static int dev_get_locked(struct ibv_device *dev, const char *spec, int gid_index,
			  struct ib_dev **out)
{
	int port = tp_namelist_port(spec, fns.get_device_name(dev)), rc;
	struct ib_dev *d;

	for (d = devs; d; d = d->next) {
		/* A context opened before a fork is the parent's: objects a
		 * child made in it would pin the parent's protection domain. */
		if (!strcmp(d->name, fns.get_device_name(dev)) && d->want_gid == gid_index &&
		    d->want_port == port && d->pid == getpid()) {
			d->refs++;
			*out = d;
			return SM_OK;
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	d->want_gid = gid_index;
	d->want_port = port;
	d->pid = getpid();
	rc = dev_open(dev, spec, port, gid_index, d);
	if (rc) {
		dev_free(d);
		return rc;
	}
	d->refs = 1;
	d->next = devs;
	devs = d;
	*out = d;
	return SM_OK;
}

static void dev_put_locked(struct ib_dev *d)
{
	struct ib_dev **pp;

	if (--d->refs)
		return;
	for (pp = &devs; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	dev_free(d);
}

/* "10.0.2.15" for an IPv4 GID, the IPv6 form otherwise. */
static void gid_text(const uint8_t *g, char *buf, size_t len)
{
	if (tp_gid_ipv4(g))
		inet_ntop(AF_INET, g + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, g, buf, (socklen_t)len);
}

/* The closest device `d` is on another network than the listener's port
 * `peer_gid`: another selected device that is on it replaces d (rails;
 * gid_net.c).  Devices that are not are closed again.  devs_lock held. */
static struct ib_dev *same_rail(struct ib_dev *d, struct ibv_device **sel, int nsel,
				const char *spec, int gid_index, const uint8_t *peer_gid)
{
	char near[INET6_ADDRSTRLEN], taken[INET6_ADDRSTRLEN], theirs[INET6_ADDRSTRLEN];

	for (int i = 0; i < nsel; i++) {
		struct ib_dev *c;

		if (!strcmp(fns.get_device_name(sel[i]), d->name))
			continue;
		if (dev_get_locked(sel[i], spec, gid_index, &c))
			continue;	/* not usable here: no reason to name it */
		if (tp_gid_same_net(c->gid, peer_gid) != 1) {
			dev_put_locked(c);
			continue;
		}
		gid_text(d->gid, near, sizeof(near));
		gid_text(c->gid, taken, sizeof(taken));
		gid_text(peer_gid, theirs, sizeof(theirs));
		sm_info("RDMA: the listener's port (%s) is on the network of %s port %d (%s), not "
			"on that of the closest, %s port %d (%s): the connection takes %s",
			theirs, c->name, c->port, taken, d->name, d->port, near, c->name);
		dev_put_locked(d);
		return c;
	}
	return d;
}

int ib_dev_get(const char *spec, int which, const char *gpu_pci, int gid_index,
	       const uint8_t *peer_gid, struct ib_dev **out)
{
	struct ibv_device **list = NULL, *pick = NULL, **sel = NULL;
	char **paths = NULL;
	struct ib_dev *d;
	int n = 0, nsel = 0, rc = SM_OK;

	*out = NULL;
	if (!ib_fns())
		return sm_fail(SM_ERR_SYSTEM, "%s", load_error ? load_error : "libibverbs not loaded");
	pthread_mutex_lock(&devs_lock);
	list = fns.get_device_list(&n);
	if (!list) {
		rc = sm_fail(SM_ERR_SYSTEM, "no RDMA device list (no RDMA driver loaded)");
		goto out;
	}
	sel = calloc((size_t)n + 1, sizeof(*sel));
	paths = calloc((size_t)n + 1, sizeof(*paths));
	if (!sel || !paths) {
		rc = sm_fail(SM_ERR_SYSTEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		char link[192];

		if (!tp_hca_selected(spec, fns.get_device_name(list[i])))
			continue;
		snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device",
			 fns.get_device_name(list[i]));
		sel[nsel] = list[i];
		paths[nsel++] = realpath(link, NULL);	/* NULL for a software device */
	}
	if (nsel) {
		int k = tp_nic_closest(gpu_pci, (const char *const *)paths, nsel, which);

		pick = sel[k < 0 ? 0 : k];
	}
	if (!pick) {
		rc = sm_fail(SM_ERR_SYSTEM, "NCCL_IB_HCA=%s selects none of this host's %d RDMA "
			     "device(s)", spec && *spec ? spec : "(unset)", n);
		goto out;
	}
	rc = dev_get_locked(pick, spec, gid_index, &d);
	if (rc)
		goto out;
	if (peer_gid && tp_gid_same_net(d->gid, peer_gid) == 0)
		d = same_rail(d, sel, nsel, spec, gid_index, peer_gid);
	*out = d;
out:
	for (int i = 0; paths && i < nsel; i++)
		free(paths[i]);
	free(paths);
	free(sel);
	if (list)
		fns.free_device_list(list);
	pthread_mutex_unlock(&devs_lock);
	return rc;
}

void ib_dev_hold(struct ib_dev *d)
{
	pthread_mutex_lock(&devs_lock);
	d->refs++;
	pthread_mutex_unlock(&devs_lock);
}

void ib_dev_put(struct ib_dev *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&devs_lock);
	dev_put_locked(d);
	pthread_mutex_unlock(&devs_lock);
}

#else	/* built without <infiniband/verbs.h> */

const struct ib_fns *ib_fns(void)
{
	return NULL;
}

int ib_dev_get(const char *spec, int which, const char *gpu_pci, int gid_index,
	       const uint8_t *peer_gid, struct ib_dev **out)
{
	(void)peer_gid;
	(void)spec;
	(void)which;
	(void)gpu_pci;
	(void)gid_index;
	*out = NULL;
	return sm_fail(SM_ERR_SYSTEM, "this build has no ibverbs backend (no libibverbs headers "
		       "when it was built)");
}

void ib_dev_put(struct ib_dev *d)
{
	(void)d;
}

#endif

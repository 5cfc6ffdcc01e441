/* The one file that names every path (path.h): which one the process
 * takes, and whose a request is. */
#include "path.h"

const struct net_path *net_path(const struct config *cfg)
{
	return cfg && cfg->inner_net[0] ? &path_inner : &path_local;
}

/* The inner path's requests are wrappers in chunks it allocates, told by
 * address alone (inner_req.c); every other request is this plugin's
 * transport's.  No inner plugin loaded: a load and a compare. */
const struct net_path *net_path_of_request(const void *request)
{
	return path_inner.owns_request(request) ? &path_inner : &path_local;
}

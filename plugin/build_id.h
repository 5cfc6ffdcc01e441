/* The version and commit of a build, in every binary of the project
 * (build_id.c, made by meson's vcs_tag from build_id.c.in), so that
 * symmem-info can tell which build a library or helper file is by reading
 * the file, without loading it. */
#ifndef SYMMEM_PLUGIN_BUILD_ID_H
#define SYMMEM_PLUGIN_BUILD_ID_H

/* What precedes "<version> (<commit>)", or "<version>" alone where the
 * commit is unknown (scripts/build_id.sh), in the file (the "@(#)" of
 * what(1)). */
#define BUILD_ID_MARKER "@(#)libnccl-net-symmem "

extern const char symmem_build_id[];

#endif

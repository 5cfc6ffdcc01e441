/* Which file a library name the user gave names, and whether another user
 * could have put it there: the plugin refuses to load such a file, since
 * a library's constructor runs inside dlopen, before any check of what
 * the library holds. */
#ifndef SYMMEM_PLUGIN_LIB_PATH_H
#define SYMMEM_PLUGIN_LIB_PATH_H

#include <stddef.h>

enum lib_path_verdict {
	LIB_PATH_SAFE,		/* *resolved: the file, no symbolic link left */
	LIB_PATH_UNSAFE,	/* *why: which file or directory, and why */
	LIB_PATH_MISSING,	/* nothing there: the loader says so itself */
};

/* `path` (with a '/'; a relative one from the working directory, as the
 * loader takes it): every directory on the way to it, as written and as
 * resolved, and the file itself, must belong to root or to this user
 * and be writable by no one else (a directory writable by every user is
 * refused, sticky bit or not). */
int lib_path_check(const char *path, char *resolved, size_t rlen, char *why, size_t wlen);

/* A bare `name` (no '/'): the first file of that name in a directory of
 * LD_LIBRARY_PATH (an empty entry is the working directory), where the
 * loader would look before its cache; 0 when none holds one, or the
 * loader ignores LD_LIBRARY_PATH in this process (set-user-ID). */
int lib_path_search(const char *name, char *out, size_t len);

#endif

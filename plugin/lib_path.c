/* Whether another user could have put the library the plugin is told to
 * load where it is (lib_path.h).  The rule is sshd's StrictModes, not
 * ld.so's trust in its own paths: each directory on the way and the file
 * belong to root or to this user, and no one else may write them.  A
 * group-writable one passes only when its group is this user's private
 * group (the user-private-group scheme, where umask 002 is the default).
 * A sticky directory of root's or ours (/tmp) passes although others may
 * write it: they can add entries but not rename or remove ours, and the
 * entry on the way is checked in turn (it must be root's or ours). */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib_path.h"

/* A group of this user alone: its own name, no member but the user. */
static int group_private(gid_t gid)
{
	char pbuf[4096], gbuf[16384];
	struct passwd pw, *p = NULL;
	struct group gr, *g = NULL;

	if (gid == 0)
		return 1;	/* root's: its members are root's anyway */
	if (getpwuid_r(geteuid(), &pw, pbuf, sizeof(pbuf), &p) || !p || p->pw_gid != gid)
		return 0;
	if (getgrgid_r(gid, &gr, gbuf, sizeof(gbuf), &g) || !g || strcmp(g->gr_name, p->pw_name))
		return 0;
	for (char **m = g->gr_mem; *m; m++)
		if (strcmp(*m, p->pw_name))
			return 0;
	return 1;
}

/* 0 when no one but root and this user can change what `path` names. */
static int unsafe(const char *path, char *why, size_t len)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return errno == ENOENT || errno == ENOTDIR ? -1 : 1;
	}
	if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) &&
	    (st.st_uid == 0 || st.st_uid == geteuid()))
		return 0;
	if (st.st_mode & S_IWOTH) {
		snprintf(why, len, "%s is writable by every user (mode %04o)", path,
			 (unsigned)(st.st_mode & 07777));
		return 1;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(why, len, "%s belongs to another user (uid %u)", path, (unsigned)st.st_uid);
		return 1;
	}
	if ((st.st_mode & S_IWGRP) && !group_private(st.st_gid)) {
		snprintf(why, len, "%s is writable by its group (gid %u, mode %04o)", path,
			 (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
		return 1;
	}
	return 0;
}

/* Every prefix of absolute `path` ending at a '/', and with `whole` the
 * path itself: 0 when all are safe, else unsafe()'s answer. */
static int chain(const char *path, int whole, char *why, size_t len)
{
	char prefix[PATH_MAX];
	size_t n = strlen(path);
	int rc;

	if (n >= sizeof(prefix)) {
		snprintf(why, len, "a path of %zu characters", n);
		return 1;
	}
	for (size_t i = 1; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		if (i == n && !whole)
			break;
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		rc = unsafe(prefix, why, len);
		if (rc)
			return rc;
	}
	return unsafe("/", why, len);
}

int lib_path_check(const char *path, char *resolved, size_t rlen, char *why, size_t wlen)
{
	char abs[PATH_MAX], real[PATH_MAX], cwd[PATH_MAX];
	int rc, n;

	if (path[0] == '/') {
		n = snprintf(abs, sizeof(abs), "%s", path);
	} else if (getcwd(cwd, sizeof(cwd))) {
		n = snprintf(abs, sizeof(abs), "%s/%s", cwd, path);
	} else {
		snprintf(why, wlen, "the working directory: %s", strerror(errno));
		return LIB_PATH_UNSAFE;
	}
	if (n < 0 || (size_t)n >= sizeof(abs)) {
		snprintf(why, wlen, "%s: too long a path", path);
		return LIB_PATH_UNSAFE;
	}
	/* The directories as written (a symbolic link's own), then the
	 * file and the directories it really lies in. */
	rc = chain(abs, 0, why, wlen);
	if (!rc) {
		if (!realpath(abs, real)) {
			snprintf(why, wlen, "%s: %s", abs, strerror(errno));
			return errno == ENOENT || errno == ENOTDIR ? LIB_PATH_MISSING : LIB_PATH_UNSAFE;
		}
		rc = chain(real, 1, why, wlen);
	}
	if (rc < 0)
		return LIB_PATH_MISSING;
	if (rc)
		return LIB_PATH_UNSAFE;
	snprintf(resolved, rlen, "%s", real);
	return LIB_PATH_SAFE;
}

int lib_path_search(const char *name, char *out, size_t len)
{
	const char *list = getenv("LD_LIBRARY_PATH");

	if (!list || getauxval(AT_SECURE))
		return 0;
	for (const char *p = list;; p++) {
		size_t n = strcspn(p, ":;");

		if (n)
			snprintf(out, len, "%.*s/%s", (int)n, p, name);
		else
			snprintf(out, len, "%s", name);	/* the working directory */
		if (access(out, F_OK) == 0) {
			if (!n)
				snprintf(out, len, "./%s", name);
			return 1;
		}
		p += n;
		if (!*p)
			return 0;
	}
}

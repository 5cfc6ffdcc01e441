/* plugin/lib_path.c: which library files the plugin agrees to load.  A
 * scratch tree under the directory given as the first argument (it and
 * the directories above it must be safe themselves: root's or ours, and
 * writable by no one else), with files and directories of each kind of
 * unsafe.  Owner and group cases need root (chown), else they skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib_path.h"

#define NOBODY 65534
#define DAEMON_GROUP 1

static char base[1024];

static void path_of(char *out, size_t len, const char *rel)
{
	assert_true(snprintf(out, len, "%s/%s", base, rel) < (int)len);
}

static void make_dir(const char *rel, mode_t mode)
{
	char p[2048];

	path_of(p, sizeof(p), rel);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, mode), 0);
}

static void make_file(const char *rel, mode_t mode)
{
	char p[2048];
	int fd;

	path_of(p, sizeof(p), rel);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(chmod(p, mode), 0);
}

/* lib_path_check on base/rel: its verdict, *why holding `says`. */
static void verdict(const char *rel, int want, const char *says)
{
	char p[2048], real[4096], why[512] = "";
	int got;

	path_of(p, sizeof(p), rel);
	got = lib_path_check(p, real, sizeof(real), why, sizeof(why));
	if (got != want)
		fail_msg("%s: verdict %d, not %d (%s)", rel, got, want, why);
	if (says && !strstr(why, says))
		fail_msg("%s: \"%s\" does not say \"%s\"", rel, why, says);
}

static int setup(void **state)
{
	char p[sizeof(base)];

	(void)state;
	if (snprintf(p, sizeof(p), "%s/lib-path-XXXXXX", base) >= (int)sizeof(p))
		return -1;
	if (!mkdtemp(p) || chmod(p, 0755))
		return -1;
	snprintf(base, sizeof(base), "%s", p);
	return 0;
}

static int teardown(void **state)
{
	char cmd[sizeof(base) + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

/* Directories and file of root or ours, writable by no one else: loaded,
 * by the path with no link left. */
static void test_safe(void **state)
{
	char p[2048], real[4096], why[512];

	(void)state;
	make_dir("ok", 0755);
	make_file("ok/lib.so", 0755);
	verdict("ok/lib.so", LIB_PATH_SAFE, NULL);
	make_file("ok/private.so", 0700);
	verdict("ok/private.so", LIB_PATH_SAFE, NULL);
	verdict("ok/none.so", LIB_PATH_MISSING, NULL);
	path_of(p, sizeof(p), "ok/../ok/lib.so");
	assert_int_equal(lib_path_check(p, real, sizeof(real), why, sizeof(why)), LIB_PATH_SAFE);
	path_of(p, sizeof(p), "ok/lib.so");
	assert_string_equal(real, p);
}

/* A directory anyone may write, sticky (as /tmp) or not, on the way or
 * holding the file; a file anyone may write. */
static void test_writable_by_anyone(void **state)
{
	(void)state;
	make_dir("ww", 0777);
	make_file("ww/lib.so", 0755);
	verdict("ww/lib.so", LIB_PATH_UNSAFE, "ww is writable by every user (mode 0777)");
	/* Sticky (as /tmp): others cannot move or remove what is ours in it,
	 * so ours passes; theirs does not (test_owner_and_group). */
	make_dir("sticky", 01777);
	make_file("sticky/lib.so", 0755);
	verdict("sticky/lib.so", LIB_PATH_SAFE, NULL);
	make_dir("sticky/sub", 0755);
	make_file("sticky/sub/lib.so", 0755);
	verdict("sticky/sub/lib.so", LIB_PATH_SAFE, NULL);
	make_dir("sticky/open", 0777);
	make_file("sticky/open/lib.so", 0755);
	verdict("sticky/open/lib.so", LIB_PATH_UNSAFE, "open is writable by every user");
	make_file("sticky/anyone.so", 0777);
	verdict("sticky/anyone.so", LIB_PATH_UNSAFE, "anyone.so is writable by every user");
	make_dir("ok2", 0755);
	make_file("ok2/open.so", 0666);
	verdict("ok2/open.so", LIB_PATH_UNSAFE, "open.so is writable by every user (mode 0666)");
}

/* A link is followed: the file it names and the directories it lies in
 * are checked, and so is the directory that holds the link. */
static void test_links(void **state)
{
	char from[2048], to[2048];

	(void)state;
	make_dir("l", 0755);
	make_file("l/lib.so", 0755);
	make_dir("lww", 0777);
	make_file("lww/lib.so", 0755);
	path_of(to, sizeof(to), "lww/lib.so");
	path_of(from, sizeof(from), "l/to-writable.so");
	assert_int_equal(symlink(to, from), 0);
	verdict("l/to-writable.so", LIB_PATH_UNSAFE, "lww is writable by every user");
	path_of(to, sizeof(to), "l/lib.so");
	path_of(from, sizeof(from), "lww/to-safe.so");
	assert_int_equal(symlink(to, from), 0);
	verdict("lww/to-safe.so", LIB_PATH_UNSAFE, "lww is writable by every user");
	path_of(to, sizeof(to), "l");
	path_of(from, sizeof(from), "dirlink");
	assert_int_equal(symlink(to, from), 0);
	verdict("dirlink/lib.so", LIB_PATH_SAFE, NULL);
}

/* A path without a leading '/' is the working directory's, as the
 * loader takes it. */
static void test_relative(void **state)
{
	char cwd[1024], p[2048], real[4096], why[512];
	int rc;

	(void)state;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	make_dir("rel", 0755);
	make_file("rel/lib.so", 0755);
	make_dir("relww", 0777);
	make_file("relww/lib.so", 0755);
	path_of(p, sizeof(p), "rel");
	assert_int_equal(chdir(p), 0);
	rc = lib_path_check("./lib.so", real, sizeof(real), why, sizeof(why));
	assert_int_equal(rc, LIB_PATH_SAFE);
	path_of(p, sizeof(p), "relww");
	assert_int_equal(chdir(p), 0);
	rc = lib_path_check("./lib.so", real, sizeof(real), why, sizeof(why));
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rc, LIB_PATH_UNSAFE);
	assert_non_null(strstr(why, "relww is writable by every user"));
}

/* Another user's file or directory, and one its group may write (a group
 * that is not this user's own). */
static void test_owner_and_group(void **state)
{
	char p[2048];

	(void)state;
	if (geteuid() != 0)
		skip();
	make_dir("own", 0755);
	make_file("own/theirs.so", 0755);
	path_of(p, sizeof(p), "own/theirs.so");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	verdict("own/theirs.so", LIB_PATH_UNSAFE, "theirs.so belongs to another user (uid 65534)");
	make_dir("theirdir", 0755);
	make_file("theirdir/lib.so", 0755);
	path_of(p, sizeof(p), "theirdir");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	verdict("theirdir/lib.so", LIB_PATH_UNSAFE, "theirdir belongs to another user");
	make_dir("grp", 0775);
	make_file("grp/lib.so", 0755);
	path_of(p, sizeof(p), "grp");
	assert_int_equal(chown(p, 0, DAEMON_GROUP), 0);
	verdict("grp/lib.so", LIB_PATH_UNSAFE, "grp is writable by its group (gid 1, mode 0775)");
	make_dir("osticky", 01777);
	make_file("osticky/theirs.so", 0755);
	path_of(p, sizeof(p), "osticky/theirs.so");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	verdict("osticky/theirs.so", LIB_PATH_UNSAFE, "theirs.so belongs to another user");
	make_dir("osticky/theirdir", 0755);
	make_file("osticky/theirdir/lib.so", 0755);
	path_of(p, sizeof(p), "osticky/theirdir");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	verdict("osticky/theirdir/lib.so", LIB_PATH_UNSAFE, "theirdir belongs to another user");
	make_dir("theirsticky", 01777);		/* a sticky directory of another user's */
	make_file("theirsticky/lib.so", 0755);
	path_of(p, sizeof(p), "theirsticky");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	verdict("theirsticky/lib.so", LIB_PATH_UNSAFE, "theirsticky");
	make_dir("rootgrp", 0775);	/* root's own group */
	make_file("rootgrp/lib.so", 0755);
	verdict("rootgrp/lib.so", LIB_PATH_SAFE, NULL);
}

/* A bare name: the first directory of LD_LIBRARY_PATH that holds it (an
 * empty entry is the working directory), or none. */
static void test_search(void **state)
{
	char list[4096], out[4096], cwd[1024], p[2048];

	(void)state;
	make_dir("s1", 0755);
	make_dir("s2", 0755);
	make_file("s2/libx.so", 0755);
	snprintf(list, sizeof(list), "%s/none:%s/s1;%s/s2", base, base, base);
	setenv("LD_LIBRARY_PATH", list, 1);
	assert_int_equal(lib_path_search("libx.so", out, sizeof(out)), 1);
	path_of(p, sizeof(p), "s2/libx.so");
	assert_string_equal(out, p);
	assert_int_equal(lib_path_search("liby.so", out, sizeof(out)), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	path_of(p, sizeof(p), "s2");
	assert_int_equal(chdir(p), 0);
	setenv("LD_LIBRARY_PATH", "/nonexistent::", 1);
	assert_int_equal(lib_path_search("libx.so", out, sizeof(out)), 1);
	assert_int_equal(chdir(cwd), 0);
	assert_string_equal(out, "./libx.so");
	unsetenv("LD_LIBRARY_PATH");
	assert_int_equal(lib_path_search("libx.so", out, sizeof(out)), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_safe),
		cmocka_unit_test(test_writable_by_anyone),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_relative),
		cmocka_unit_test(test_owner_and_group),
		cmocka_unit_test(test_search),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s SCRATCH_PARENT\n", argv[0]);
		return 2;
	}
	snprintf(base, sizeof(base), "%s", argv[1]);
	return cmocka_run_group_tests(tests, setup, teardown);
}

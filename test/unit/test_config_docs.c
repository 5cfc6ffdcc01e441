/* docs/env.md against the code, so the page cannot drift from it:
 *  - every variable of plugin/config/config_vars.h has exactly one row;
 *  - its default is the one config_describe() gives, and its accepted
 *    column holds the form the parser's error message gives;
 *  - the last column says "env plugin" for exactly what the env plugin
 *    sets, "net plugin" for what the net plugin sets, "no" elsewhere;
 *  - no row names an NCCL_SYMMEM_ variable the code does not know.
 * The page's path is the first argument. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_internal.h"
#include "config_parse.h"
#include "config_vars.h"

#define MAX_ROWS 128
#define NCELLS 5

struct row {
	int line;
	/* name (without backticks), default, accepted, what it does, set by */
	char cell[NCELLS][1024];
};

static const char *doc_path;
static struct row rows[MAX_ROWS];
static int nrows;

/* A row of the table, one variable per line: "| `NAME` | ... |", no '|'
 * inside a cell.  0, or -1 with why on stderr (in the group's setup,
 * where cmocka's asserts cannot run). */
static int read_row(char *text, int line)
{
	struct row *r = &rows[nrows];
	char *cell = text + 1, *bar;
	int n = 0;

	if (nrows == MAX_ROWS) {
		print_error("%s: more than %d rows\n", doc_path, MAX_ROWS);
		return -1;
	}
	while ((bar = strchr(cell, '|'))) {
		char *end = bar;

		if (n == NCELLS) {
			print_error("%s:%d: more than %d cells\n", doc_path, line, NCELLS);
			return -1;
		}
		while (*cell == ' ')
			cell++;
		while (end > cell && end[-1] == ' ')
			end--;
		snprintf(r->cell[n++], sizeof(r->cell[0]), "%.*s", (int)(end - cell), cell);
		cell = bar + 1;
	}
	if (n != NCELLS) {
		print_error("%s:%d: %d cells, expected %d\n", doc_path, line, n, NCELLS);
		return -1;
	}
	/* "`NAME`" to NAME */
	n = (int)strlen(r->cell[0]);
	if (n < 3 || r->cell[0][0] != '`' || strchr(r->cell[0] + 1, '`') != r->cell[0] + n - 1) {
		print_error("%s:%d: the first cell is not one `NAME`: %s\n", doc_path, line,
			    r->cell[0]);
		return -1;
	}
	memmove(r->cell[0], r->cell[0] + 1, (size_t)n - 2);
	r->cell[0][n - 2] = '\0';
	r->line = line;
	nrows++;
	return 0;
}

static int load_doc(void **state)
{
	char text[4096];
	FILE *f;
	int line = 0, rc = 0;

	(void)state;
	if (!doc_path) {
		print_error("usage: test_config_docs docs/env.md\n");
		return -1;
	}
	f = fopen(doc_path, "r");
	if (!f) {
		print_error("%s: cannot be read\n", doc_path);
		return -1;
	}
	while (rc == 0 && fgets(text, sizeof(text), f)) {
		line++;
		if (!strncmp(text, "| `", 3))
			rc = read_row(text, line);
	}
	fclose(f);
	if (rc == 0 && nrows == 0) {
		print_error("%s: no table rows\n", doc_path);
		rc = -1;
	}
	return rc;
}

static const struct row *find_row(const char *name)
{
	for (int i = 0; i < nrows; i++)
		if (!strcmp(rows[i].cell[0], name))
			return &rows[i];
	return NULL;
}

#define NAME_OF(nm, kd, fld, d, lo, hi, owner) #nm,
static const char *const table_names[] = { CONFIG_VARS(NAME_OF) };
#define NTABLE (sizeof(table_names) / sizeof(table_names[0]))

static int in_table(const char *name)
{
	for (size_t i = 0; i < NTABLE; i++)
		if (!strcmp(table_names[i], name))
			return 1;
	return 0;
}

/* One row per variable: none missing, none twice. */
static void test_every_variable_once(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTABLE; i++) {
		int hits = 0;

		for (int r = 0; r < nrows; r++)
			hits += !strcmp(rows[r].cell[0], table_names[i]);
		if (hits != 1)
			fail_msg("%s: %s has %d rows, expected 1", doc_path, table_names[i], hits);
	}
	for (int r = 0; r < nrows; r++)
		for (int s = r + 1; s < nrows; s++)
			if (!strcmp(rows[r].cell[0], rows[s].cell[0]))
				fail_msg("%s:%d: %s again (line %d)", doc_path, rows[s].line,
					 rows[s].cell[0], rows[r].line);
}

/* An NCCL_SYMMEM_ row the code does not read is a variable that is gone
 * (or a typo): the table's and the plugin's two notes are all there are. */
static void test_no_stale_rows(void **state)
{
	(void)state;
	for (int r = 0; r < nrows; r++) {
		const char *name = rows[r].cell[0];

		if (strncmp(name, "NCCL_SYMMEM_", 12) || in_table(name) ||
		    !strcmp(name, CONFIG_DEFAULTS_SET) || !strcmp(name, CONFIG_ENV_PLUGIN_SET))
			continue;
		fail_msg("%s:%d: %s is not a variable the plugin reads", doc_path, rows[r].line,
			 name);
	}
}

static void check_default(const char *line, void *arg)
{
	const char *eq = strchr(line, '='), *sp = strrchr(line, ' ');
	char name[128], value[300], want[310];
	const struct row *r;

	(void)arg;
	assert_non_null(eq);
	assert_non_null(sp);
	snprintf(name, sizeof(name), "%.*s", (int)(eq - line), line);
	snprintf(value, sizeof(value), "%.*s", (int)(sp - eq - 1), eq + 1);
	r = find_row(name);
	assert_non_null(r);
	if (!value[0]) {
		if (strcmp(r->cell[1], "unset"))
			fail_msg("%s:%d: %s defaults to unset, the page says %s", doc_path, r->line,
				 name, r->cell[1]);
		return;
	}
	snprintf(want, sizeof(want), "`%s`", value);
	if (strncmp(r->cell[1], want, strlen(want)))
		fail_msg("%s:%d: %s defaults to %s, the page says %s", doc_path, r->line, name,
			 want, r->cell[1]);
}

/* The default column starts with the value the INFO line shows. */
static void test_defaults(void **state)
{
	struct config cfg;

	(void)state;
	assert_int_equal(config_parse(&cfg, NULL, NULL, NULL, 0), 0);
	config_describe(&cfg, NULL, NULL, 1, check_default, NULL);
}

static const char *one_get(const char *name, void *arg)
{
	const char *const *kv = arg;

	return strcmp(name, kv[0]) ? NULL : kv[1];
}

/* The form an error message gives for `name` (a control character is
 * malformed in every kind), or NULL where the value is never refused:
 * NCCL's own numbers, which are read as NCCL reads them. */
static const char *refused_form(const char *name, char *err, size_t len)
{
	const char *kv[2] = { name, "\x01" };
	struct config cfg;
	char *form, *end;

	if (config_parse(&cfg, one_get, kv, err, len) == 0)
		return NULL;
	form = strstr(err, "(accepted: ");
	assert_non_null(form);
	form += strlen("(accepted: ");
	end = strrchr(form, ')');
	assert_non_null(end);
	*end = '\0';
	return form;
}

#define FORM_OF(nm, kd, fld, d, lo, hi, owner) \
	do { \
		const struct row *r = find_row(#nm); \
		const char *form = refused_form(#nm, err, sizeof(err)); \
		\
		assert_non_null(r); \
		if (!form && CONFIG_KIND_##kd == CONFIG_KIND_INT) \
			snprintf(form_buf, sizeof(form_buf), "an integer %lld..%lld", \
				 (long long)(lo), (long long)(hi)); \
		else if (!form) \
			snprintf(form_buf, sizeof(form_buf), "an integer, <0 auto, 0 off, >0 on"); \
		if (!form) \
			form = form_buf; \
		if (!strstr(r->cell[2], form)) \
			fail_msg("%s:%d: %s accepts \"%s\", the page says \"%s\"", doc_path, \
				 r->line, #nm, form, r->cell[2]); \
	} while (0);

/* The accepted column holds what an error message says is accepted (for
 * NCCL's numbers, which are never refused, the range the plugin uses). */
static void test_accepted(void **state)
{
	char err[600], form_buf[128];

	(void)state;
	CONFIG_VARS(FORM_OF)
}

struct names {
	int n;
	char name[64][128];
};

static void add_name(struct names *l, const char *name, size_t len)
{
	assert_true(l->n < 64);
	assert_true(len < sizeof(l->name[0]));
	memcpy(l->name[l->n], name, len);
	l->name[l->n++][len] = '\0';
}

static int has_name(const struct names *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return 1;
	return 0;
}

static void note_default(const char *name, const char *value, int applied, const char *why,
			 void *arg)
{
	(void)value;
	(void)applied;
	(void)why;
	add_name(arg, name, strlen(name));
}

extern char **environ;

/* Unsets every NCCL_ variable (not clearenv(): cmocka reads its own),
 * names gathered first so that no unsetenv() moves what is read. */
static void unset_nccl(void)
{
	struct names found = { 0 };

	for (char **e = environ; e && *e; e++) {
		const char *eq = strchr(*e, '=');

		if (!strncmp(*e, "NCCL_", 5) && eq)
			add_name(&found, *e, (size_t)(eq - *e));
	}
	for (int i = 0; i < found.n; i++)
		assert_int_equal(unsetenv(found.name[i]), 0);
}

/* What the env plugin sets with no NCCL_ variable set (everything it
 * may), and every variable the net plugin's defaults name, set or not. */
static void plugin_sets(struct names *env, struct names *net)
{
	const char *p;
	struct config cfg;

	unset_nccl();
	assert_true(config_apply_env_plugin_defaults(NULL) > 0);
	for (p = config_env_plugin_applied(); *p;) {
		const char *eq = strchr(p, '='), *sp = strchr(p, ' ');

		assert_non_null(eq);
		add_name(env, p, (size_t)(eq - p));
		p = sp ? sp + 1 : p + strlen(p);
	}
	add_name(env, CONFIG_ENV_PLUGIN_SET, strlen(CONFIG_ENV_PLUGIN_SET));

	assert_int_equal(config_parse(&cfg, NULL, NULL, NULL, 0), 0);
	config_apply_nccl_defaults(&cfg, 0, note_default, net);
	add_name(net, CONFIG_DEFAULTS_SET, strlen(CONFIG_DEFAULTS_SET));
	unset_nccl();
}

/* "Set by the plugin": what the code sets, and nothing else. */
static void test_set_by(void **state)
{
	struct names env = { 0 }, net = { 0 };

	(void)state;
	plugin_sets(&env, &net);
	assert_true(env.n > 1 && net.n > 1);
	for (int i = 0; i < env.n; i++)
		if (!find_row(env.name[i]))
			fail_msg("%s: no row for %s, which the env plugin sets", doc_path,
				 env.name[i]);
	for (int i = 0; i < net.n; i++)
		if (!find_row(net.name[i]))
			fail_msg("%s: no row for %s, which the net plugin sets", doc_path,
				 net.name[i]);
	for (int r = 0; r < nrows; r++) {
		const char *want = has_name(&env, rows[r].cell[0]) ? "env plugin" :
				   has_name(&net, rows[r].cell[0]) ? "net plugin" : "no";

		if (strcmp(rows[r].cell[4], want))
			fail_msg("%s:%d: %s is set by: %s, the page says %s", doc_path,
				 rows[r].line, rows[r].cell[0], want, rows[r].cell[4]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_variable_once),
		cmocka_unit_test(test_no_stale_rows),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_set_by),
	};

	doc_path = argc > 1 ? argv[1] : NULL;
	return cmocka_run_group_tests(tests, load_doc, NULL);
}

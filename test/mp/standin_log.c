#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "standin_log.h"

static char log_path[] = "/tmp/symmem-standin-XXXXXX";

int standin_log_create(void)
{
	int fd = mkstemp(log_path);

	if (fd < 0)
		return -1;
	close(fd);
	return setenv("INNER_STANDIN_LOG", log_path, 1);
}

void standin_log_remove(void)
{
	if (!getenv("KEEP_LOG"))
		unlink(log_path);
}

void standin_log_reset(void)
{
	int fd = open(log_path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	close(fd);
}

int standin_log_count(const char *text)
{
	char line[512];
	FILE *f = fopen(log_path, "r");
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

long long standin_log_sum(const char *tag, const char *kind, const char *key, int *lines)
{
	char line[512], want[64], field[40];
	long long sum = -1;
	FILE *f = fopen(log_path, "r");

	*lines = 0;
	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%s %s", tag, kind);
	snprintf(field, sizeof(field), " %s=", key);
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(want);
		const char *v;

		if (strncmp(line, want, n) != 0 || (line[n] != ' ' && line[n] != '\n'))
			continue;
		(*lines)++;
		v = strstr(line, field);
		if (v)
			sum = (sum < 0 ? 0 : sum) + strtoll(v + strlen(field), NULL, 10);
	}
	fclose(f);
	return sum;
}

int standin_log_lines(const char *tag, const char *kind)
{
	int n;

	standin_log_sum(tag, kind, "-", &n);
	return n;
}

void *standin_rank_init(int rank, uint64_t comm_id, int traffic_class)
{
	ncclNetCommConfig_v11_t cfg = { .trafficClass = traffic_class };
	char tag[16];
	void *ctx = NULL;

	snprintf(tag, sizeof(tag), "rank%d", rank);
	setenv("INNER_STANDIN_TAG", tag, 1);
	return net->init(&ctx, comm_id, &cfg, harness_logger, NULL) == ncclSuccess ? ctx : NULL;
}

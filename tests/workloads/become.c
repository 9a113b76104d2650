/*
 * A process that becomes another user, for the test of who may trace what:
 *
 *   become read FILE            reads FILE and prints its size (installed
 *                               setuid root by the test: it reads a file
 *                               only root may)
 *   become drop BEFORE AFTER UID
 *                               reads BEFORE, calls setuid(UID) (given
 *                               cap_setuid by the test), then reads AFTER
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long slurp(const char *path)
{
	char buf[4096];
	long n = 0, r;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	while ((r = read(fd, buf, sizeof buf)) > 0)
		n += r;
	close(fd);
	return n;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "read")) {
		printf("read %ld\n", slurp(argv[2]));
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "drop")) {
		long before = slurp(argv[2]);
		if (setuid((uid_t)atoi(argv[4]))) {
			perror("setuid");
			return 1;
		}
		printf("before %ld after %ld uid %d\n", before, slurp(argv[3]), (int)getuid());
		return 0;
	}
	fprintf(stderr, "usage: become read FILE | become drop BEFORE AFTER UID\n");
	return 2;
}

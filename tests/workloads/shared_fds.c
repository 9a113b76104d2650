/*
 * Files used by a task other than the one that opened them, and two files
 * read in turns: every read must still carry its file's path.
 * Usage: shared_fds A B C   (each at least 4 KiB)
 * Prints "reads N": the reads of 1 KiB it made.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static int fd_a;

static void *reader(void *arg)
{
	char buf[1024];

	(void)arg;
	for (int i = 0; i < 4; i++)
		if (pread(fd_a, buf, sizeof buf, i * 1024) != 1024)
			return (void *)1;
	return NULL;
}

int main(int argc, char **argv)
{
	char buf[1024];
	pthread_t t;
	void *bad = NULL;
	int st = 0;

	if (argc != 4)
		return 2;
	/* Opened here, read by a thread and by a forked child. */
	fd_a = open(argv[1], O_RDONLY);
	if (fd_a < 0 || pthread_create(&t, NULL, reader, NULL) || pthread_join(t, &bad) || bad)
		return 1;
	pid_t c = fork();
	if (c == 0) {
		for (int i = 0; i < 4; i++)
			if (pread(fd_a, buf, sizeof buf, i * 1024) != 1024)
				_exit(1);
		_exit(0);
	}
	if (c < 0 || waitpid(c, &st, 0) != c || st != 0)
		return 1;
	/* Two files open at once, read in turns by one thread. */
	int b = open(argv[2], O_RDONLY), cc = open(argv[3], O_RDONLY);
	if (b < 0 || cc < 0)
		return 1;
	for (int i = 0; i < 4; i++)
		if (read(b, buf, sizeof buf) != 1024 || read(cc, buf, sizeof buf) != 1024)
			return 1;
	close(b);
	close(cc);
	close(fd_a);
	printf("reads %d\n", 4 + 4 + 8);
	return 0;
}

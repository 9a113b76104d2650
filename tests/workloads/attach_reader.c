/*
 * A running job to attach to: opens every FILE given, prints "ready", then
 * until killed, every 5 ms, preads 4 KiB of each file in its main thread
 * and in a second thread started before "ready"; every 300 ms it forks a
 * child that preads each file once and exits. Syscalls go through
 * syscall(2) so libc adds none.
 *
 * usage: attach_reader FILE...
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXF 8

static int fds[MAXF];
static int nf;

static void read_all(void)
{
	char buf[4096];

	for (int i = 0; i < nf; i++)
		syscall(SYS_pread64, fds[i], buf, sizeof buf, 0);
}

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		read_all();
		nap(5);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	for (int i = 1; i < argc && nf < MAXF; i++) {
		fds[nf] = open(argv[i], O_RDONLY);
		if (fds[nf] < 0) {
			perror(argv[i]);
			return 1;
		}
		nf++;
	}
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (long n = 1;; n++) {
		read_all();
		if (n % 60 == 0) {
			pid_t c = fork();
			if (c == 0) {
				read_all();
				_exit(0);
			}
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		nap(5);
	}
}

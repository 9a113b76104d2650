/*
 * I/O the kernel counts in task->ioac, in the awkward shapes: threads that
 * end before the process, threads still inside a blocking read when the
 * process exits (exit_group kills them there), failed calls the kernel
 * counts or not depending on where they fail, sendfile and copy_file_range
 * (one read and one write each, or none when nothing is asked), a child
 * that execs (exec's own reads are the kernel's, not the trace's), and a
 * grandchild still running when the command ends.
 *
 * usage: acct_mix DIR          (the command)
 *        acct_mix --exec DIR   (the exec'd child)
 *        acct_mix --linger DIR (the grandchild)
 * Prints `key value` lines: pids.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static char path[4096];
static int blocker[2];

static void some_io(const char *name, int rounds, int size) {
	char buf[65536];
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", path, name);
	int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0600);
	memset(buf, 'm', sizeof buf);
	for (int i = 0; i < rounds; i++)
		syscall(SYS_write, fd, buf, size + i);
	struct iovec v[3] = {{buf, 10}, {buf + 10, 20}, {buf + 30, size}};
	syscall(SYS_pwritev, fd, v, 3, 7L, 0L);
	for (int i = 0; i < rounds; i++)
		syscall(SYS_pread64, fd, buf, size, (long)i * 3);
	syscall(SYS_lseek, fd, 0L, SEEK_SET);
	while (syscall(SYS_readv, fd, v, 3) > 0)
		;
	syscall(SYS_preadv2, fd, v, 2, -1L, 0L, 0);
	syscall(SYS_close, fd);
}

static void *worker(void *arg) {
	long n = (long)arg;
	char name[32];
	snprintf(name, sizeof name, "thread%ld.bin", n);
	some_io(name, 20 + (int)n * 7, 1000 + (int)n * 333);
	return NULL;
}

static volatile pid_t stuck_tid[2];

/* Blocks in read() until the process exits around it. */
static void *stuck(void *arg) {
	char c;
	stuck_tid[(long)arg] = (pid_t)syscall(SYS_gettid);
	syscall(SYS_read, blocker[0], &c, 1);
	return NULL;
}

/*
 * Waits (up to 10 s) until thread `i` of `stuck` sleeps inside read(): on
 * a busy machine it may not have got there by the time the process exits.
 * Its /proc syscall file starts with read's number once it blocks.
 */
static void wait_in_read(int i) {
	char p[64], b[64], want[16];
	int w = snprintf(want, sizeof want, "%d ", SYS_read);
	for (int tries = 0; tries < 10000; tries++) {
		if (stuck_tid[i] != 0) {
			snprintf(p, sizeof p, "/proc/self/task/%d/syscall", (int)stuck_tid[i]);
			int fd = open(p, O_RDONLY);
			ssize_t n = fd < 0 ? -1 : read(fd, b, sizeof b - 1);
			if (fd >= 0)
				close(fd);
			if (n >= w && memcmp(b, want, (size_t)w) == 0)
				return;
		}
		usleep(1000);
	}
}

static void failures(void) {
	char buf[64];
	struct iovec v = {buf, 8};
	int p[2];
	syscall(SYS_pipe2, p, 0);
	syscall(SYS_read, 987, buf, 8);        /* EBADF: not counted */
	syscall(SYS_readv, 987, &v, 1);        /* EBADF: counted */
	syscall(SYS_write, 987, buf, 8);       /* EBADF: not counted */
	syscall(SYS_writev, 987, &v, 1);       /* EBADF: counted */
	syscall(SYS_pread64, p[0], buf, 8, 0L); /* ESPIPE: not counted */
	syscall(SYS_read, p[1], buf, 8);       /* EBADF (write end): not counted */
	syscall(SYS_write, p[1], "xyz", 3);
	syscall(SYS_read, p[0], buf, 8);
	syscall(SYS_close, p[0]);
	syscall(SYS_close, p[1]);
}

static void transfers(void) {
	char a[4200], b[4200];
	snprintf(a, sizeof a, "%s/thread0.bin", path);
	snprintf(b, sizeof b, "%s/copy.bin", path);
	int in = open(a, O_RDONLY);
	int out = open(b, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	loff_t off = 0;
	syscall(SYS_sendfile, out, in, &off, 5000L);
	syscall(SYS_copy_file_range, in, &off, out, NULL, 777L, 0);
	syscall(SYS_copy_file_range, in, &off, out, NULL, 0L, 0); /* nothing asked: not counted */
	syscall(SYS_sendfile, 987, in, &off, 10L);                 /* EBADF */
	syscall(SYS_close, in);
	syscall(SYS_close, out);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--exec") == 0) {
		snprintf(path, sizeof path, "%s", argv[2]);
		some_io("exec.bin", 30, 4096);
		failures();
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "--linger") == 0) {
		snprintf(path, sizeof path, "%s", argv[2]);
		some_io("linger.bin", 10, 100);
		/* Tell the command (fd 3), then wait until it has ended (its pipe
		 * on stdin closes), then a while more. */
		char c = '!';
		syscall(SYS_write, 3, &c, 1);
		syscall(SYS_close, 3);
		while (syscall(SYS_read, 0, &c, 1) > 0)
			;
		usleep(800 * 1000);
		some_io("linger2.bin", 5, 10);
		return 0;
	}
	if (argc != 2)
		return 2;
	snprintf(path, sizeof path, "%s", argv[1]);
	syscall(SYS_pipe2, blocker, 0);

	pthread_t t[4], s[2];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_create(&s[i], NULL, stuck, (void *)(long)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	failures();
	transfers();

	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		execl("/proc/self/exe", "acct_mix", "--exec", path, (char *)NULL);
		_exit(99);
	}
	int linger_in[2], ready[2];
	syscall(SYS_pipe2, linger_in, 0);
	syscall(SYS_pipe2, ready, 0);
	pid_t linger = fork();
	if (linger == 0) {
		/* A grandchild: forks again and lets its parent go, so it outlives the command. */
		if (fork() == 0) {
			dup2(linger_in[0], 0);
			dup2(ready[1], 3);
			close(linger_in[1]);
			close(ready[0]);
			execl("/proc/self/exe", "acct_mix", "--linger", path, (char *)NULL);
			_exit(99);
		}
		_exit(0);
	}
	close(linger_in[0]);
	close(ready[1]);
	char c;
	syscall(SYS_read, ready[0], &c, 1); /* the grandchild has done its I/O */
	int st;
	waitpid(linger, &st, 0);
	waitpid(child, &st, 0);
	printf("pid %d\nchild_pid %d\nchild_status %d\n", getpid(), child, st);
	fflush(stdout);
	/* exit_group with the two `stuck` threads inside read(). */
	wait_in_read(0);
	wait_in_read(1);
	return 0;
}

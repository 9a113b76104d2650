/*
 * A program whose file I/O is known exactly, for the end-to-end tests.
 * Every syscall goes through syscall(2) so libc cannot add, merge or split
 * any. It prints what the test needs to check against (pids, and the
 * /proc/self/io snapshots taken by each process itself) to stdout as
 * `key value` lines.
 *
 * usage: known_io   (run in an empty directory)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define DIRNAME "dir_with_a_rather_long_name_to_check_that_paths_are_not_cut_at_sixty_three_bytes_like_bpftrace_0123456789"
#define FILENAME "file_whose_name_alone_is_longer_than_one_hundred_characters_so_the_absolute_path_is_far_beyond_any_small_limit_abcdefghij.bin"

static char buf[8192];

static long sys_open(int dirfd, const char *p, int flags, int mode) { return syscall(SYS_openat, dirfd, p, flags, mode); }
static long sys_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static long sys_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static long sys_close(int fd) { return syscall(SYS_close, fd); }

/* One read of /proc/self/io: the kernel fills it before counting the read itself. */
static void snapshot(const char *tag, char *out, size_t cap) {
	int fd = sys_open(AT_FDCWD, "/proc/self/io", O_RDONLY, 0);
	long n = sys_read(fd, out, cap - 1);
	sys_close(fd);
	out[n > 0 ? n : 0] = 0;
	(void)tag;
}

static void print_snapshot(const char *tag, const char *s) {
	const char *keys[] = {"rchar", "wchar", "syscr", "syscw"};
	for (int i = 0; i < 4; i++) {
		const char *p = strstr(s, keys[i]);
		unsigned long v = 0;
		if (p)
			sscanf(p + strlen(keys[i]) + 1, "%lu", &v);
		printf("%s_%s %lu\n", tag, keys[i], v);
	}
}

static void *thread_main(void *arg) {
	int fd = *(int *)arg;
	printf("thread_tid %ld\n", (long)syscall(SYS_gettid));
	syscall(SYS_pread64, fd, buf, 33, 1L);
	return NULL;
}

int main(void) {
	char s0[512], s1[512], c0[512], c1[512];
	int pipefd[2];

	snapshot("start", s0, sizeof s0);
#ifdef SYS_mkdir
	syscall(SYS_mkdir, DIRNAME, 0755);
#else /* arm64 has only mkdirat */
	syscall(SYS_mkdirat, AT_FDCWD, DIRNAME, 0755);
#endif

	/* Relative path from the cwd; write, pwrite64, writev. */
	int fd = sys_open(AT_FDCWD, DIRNAME "/" FILENAME, O_CREAT | O_WRONLY | O_TRUNC, 0640);
	memset(buf, 'a', sizeof buf);
	sys_write(fd, buf, 1000);
	syscall(SYS_pwrite64, fd, buf, 200, 5000L);
	struct iovec wv[2] = {{buf, 300}, {buf, 400}};
	syscall(SYS_writev, fd, wv, 2);
	sys_close(fd);

	/* openat relative to a directory fd; read, pread64, readv, preadv. */
	int dfd = sys_open(AT_FDCWD, DIRNAME, O_RDONLY | O_DIRECTORY, 0);
	fd = sys_open(dfd, FILENAME, O_RDONLY, 0);
	sys_read(fd, buf, 100);
	syscall(SYS_pread64, fd, buf, 50, 10L);
	struct iovec rv[2] = {{buf, 64}, {buf + 64, 36}};
	syscall(SYS_readv, fd, rv, 2);
	struct iovec pv[1] = {{buf, 16}};
	syscall(SYS_preadv, fd, pv, 1, 4096L, 0L);
	while (sys_read(fd, buf, 4096) > 0)
		;

	/* A thread. */
	pthread_t t;
	pthread_create(&t, NULL, thread_main, &fd);
	pthread_join(t, NULL);

	/* A forked child: its own reads, a pipe to us, and its own counters. */
	syscall(SYS_pipe2, pipefd, 0);
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		snapshot("child_start", c0, sizeof c0);
		int cfd = sys_open(dfd, FILENAME, O_RDONLY, 0);
		sys_read(cfd, buf, 777);
		sys_close(cfd);
		sys_write(pipefd[1], "hello", 5);
		snapshot("child_end", c1, sizeof c1);
		print_snapshot("child_start", c0);
		print_snapshot("child_end", c1);
		fflush(stdout);
		syscall(SYS_exit_group, 3);
	}
	sys_read(pipefd[0], buf, 5);
	int status;
	waitpid(child, &status, 0);

	/* A failed relative open, and an in-kernel copy. */
	sys_open(AT_FDCWD, "does/not/exist.txt", O_RDONLY, 0);
	int out = sys_open(AT_FDCWD, "copy.bin", O_CREAT | O_WRONLY | O_TRUNC, 0600);
	loff_t off_in = 0;
	syscall(SYS_copy_file_range, fd, &off_in, out, NULL, 128, 0);
	sys_close(out);
	sys_close(fd);
	sys_close(dfd);

	snapshot("end", s1, sizeof s1);
	printf("pid %d\nchild_pid %d\nchild_status %d\n", getpid(), child, status);
	print_snapshot("start", s0);
	print_snapshot("end", s1);
	return 0;
}

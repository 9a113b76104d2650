/*
 * For the bound on mltrace's table of file names: the main thread reads
 * KEEP; a child opens N files of DIR (named 0..N-1) and holds them all
 * open while it reads each (N distinct file identities), then exits; after
 * PAUSE_MS the main thread reads KEEP again, having touched no other file
 * in between, so only the recorder's "files forgotten" signal can make the
 * kernel side name KEEP again if the recorder forgot it.
 *
 * usage: forget KEEP DIR N PAUSE_MS
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 5)
		return 2;
	int n = atoi(argv[3]), pause_ms = atoi(argv[4]);
	char c;
	int keep = open(argv[1], O_RDONLY);
	if (keep < 0 || read(keep, &c, 1) != 1)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		int *fds = calloc(n, sizeof *fds);
		char path[4096];
		for (int i = 0; i < n; i++) {
			snprintf(path, sizeof path, "%s/%d", argv[2], i);
			fds[i] = open(path, O_RDONLY);
			if (fds[i] < 0 || read(fds[i], &c, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	usleep(pause_ms * 1000);
	return read(keep, &c, 1) == 1 ? 0 : 1;
}

/*
 * A small training job: MLLOG phases (INIT, then EPOCH 1..E, each with an
 * eval_accuracy mark) around bursts of reads by the main process and a
 * worker forked per epoch, with O_DIRECT reads so there are real block
 * requests (and arrows from calls to them).
 *
 * usage: epochs FILE EPOCHS PREADS_PER_EPOCH
 * FILE must be on a real disk and at least 1 MiB long.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void mllog(const char *type, const char *key, const char *value, int epoch) {
	printf(":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, \"event_type\": \"%s\", \"key\": \"%s\", "
	       "\"value\": %s, \"metadata\": {\"epoch_num\": %d}}\n",
	       now_ms(), type, key, value, epoch);
	fflush(stdout);
}

static void reads(const char *file, long n) {
	int fd = open(file, O_RDONLY);
	char buf[4096];
	for (long i = 0; i < n; i++)
		syscall(SYS_pread64, fd, buf, sizeof buf, (i % 256) * 4096L);
	close(fd);
}

int main(int argc, char **argv) {
	if (argc < 4)
		return 2;
	int epochs = atoi(argv[2]);
	long per = atol(argv[3]);
	void *direct;
	if (posix_memalign(&direct, 4096, 65536))
		return 1;
	mllog("INTERVAL_START", "init_start", "null", 0);
	usleep(50000);
	mllog("INTERVAL_END", "init_stop", "null", 0);
	for (int e = 1; e <= epochs; e++) {
		mllog("INTERVAL_START", "epoch_start", "null", e);
		pid_t w = fork();
		if (w == 0) {
			reads(argv[1], per / 2);
			_exit(0);
		}
		reads(argv[1], per / 2);
		int fd = open(argv[1], O_RDONLY | O_DIRECT);
		for (int k = 0; k < 4; k++)
			pread(fd, direct, 65536, (long)((e * 4 + k) % 16) * 65536);
		close(fd);
		waitpid(w, NULL, 0);
		mllog("INTERVAL_END", "epoch_stop", "null", e);
		char acc[32];
		snprintf(acc, sizeof acc, "0.%d", e);
		mllog("POINT_IN_TIME", "eval_accuracy", acc, e);
	}
	return 0;
}

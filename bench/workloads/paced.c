/*
 * RATE preads per second of one byte for SECONDS, paced by the clock, from
 * THREADS threads (default 1) sharing the rate (the sustained-rate test).
 * A thread ahead of its schedule sleeps, leaving the CPU to the tracer.
 * Prints the rate achieved.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static double rate, secs;
static int threads = 1;

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *run(void *arg) {
	long long *done = arg;
	double r = rate / threads;
	long long t0 = now(), total = (long long)(r * secs);
	struct timespec nap = {0, 100000};
	char c;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		exit(1);
	while (*done < total) {
		long long due = (long long)((now() - t0) * r / 1e9);
		if (due > total)
			due = total;
		if (*done >= due) {
			nanosleep(&nap, NULL);
			continue;
		}
		for (; *done < due; (*done)++)
			syscall(SYS_pread64, fd, &c, 1, 0L);
	}
	return NULL;
}

int main(int argc, char **argv) {
	path = argv[1];
	rate = atof(argv[2]);
	secs = atof(argv[3]);
	if (argc > 4)
		threads = atoi(argv[4]);
	pthread_t t[64];
	long long done[64] = {0}, sum = 0;
	long long t0 = now();

	if (threads < 1 || threads > 64)
		return 2;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, run, &done[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		sum += done[i];
	}
	printf("%.0f\n", sum / ((now() - t0) / 1e9));
	return 0;
}

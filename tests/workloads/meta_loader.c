/* A loader of many small files that looks for each sample before opening
 * it (PROBES names that do not exist, as a loader trying extensions
 * does): its opens, not its reads, take its time in file calls. A
 * trainer takes a batch from a forked worker through a pipe and computes.
 *
 *   meta_loader LIST STEPS PER_BATCH PROBES COMPUTE_US
 *
 * The worker, per batch: for PER_BATCH files of LIST (one path a line,
 * in turn) opens PROBES missing names (PATH.missingN), then the file,
 * reads it whole, closes it; then writes one byte on the pipe. The
 * trainer, per step: reads a byte (its wait) and sleeps COMPUTE_US.
 * Before it forks the worker, the trainer looks for every name the worker
 * will and reads every file once: on the VMs the tests run on, a cached
 * page left untouched for a second or more costs tens of µs at its next
 * read (the host maps it back in), so without that pass a run's split
 * between opens and reads depended on how long its files had lain idle
 * (measured: 4,000 files of 512 bytes read at 0.2-0.3 µs each right
 * after a pass, 22-63 µs each 0.5-6 s later; the split read 0.24-0.70 in
 * runs seconds apart).
 * Written in C so that its own clock around each call adds next to
 * nothing to the call. It prints `key value` lines: `pid`, `total_ns`,
 * `blocked_ns`; the worker's `w0_pid`, `w0_wall_ns`, `w0_opens` (failed
 * ones too), `w0_meta_ns` (in opens and closes), `w0_read_ns` (in reads),
 * `w0_reads`, `w0_queued_ns` (its time waiting for a CPU, the kernel's run
 * delay: the most that preemption can have put inside its clocks). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The calling thread's run delay so far (ns), from its schedstat. */
static long long queued_ns(void)
{
	char b[96];
	long long on_cpu, queued;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, b, sizeof b - 1);
	if (n <= 0)
		_exit(5);
	close(fd);
	b[n] = 0;
	if (sscanf(b, "%lld %lld", &on_cpu, &queued) != 2)
		_exit(5);
	return queued;
}

static char **paths;
static int npaths;

/* The missing name number `j` looked for before `path` is opened. */
static void missing_name(char *name, size_t size, const char *path, int j)
{
	snprintf(name, size, "%s.missing%d", path, j);
}

static void load_list(const char *list)
{
	FILE *f = fopen(list, "r");
	char line[4096];
	int cap = 1024;
	paths = malloc(cap * sizeof *paths);
	if (!f || !paths)
		exit(2);
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (npaths == cap)
			paths = realloc(paths, (cap *= 2) * sizeof *paths);
		paths[npaths++] = strdup(line);
	}
	fclose(f);
	if (!npaths)
		exit(2);
}

static void worker(int steps, int per_batch, int probes, int out)
{
	long long queued = queued_ns();
	long long start = now_ns(), meta = 0, rd = 0, opens = 0, reads = 0, last = start;
	char buf[65536], name[4200];
	int next = 0;
	for (int s = 0; s < steps; s++) {
		for (int k = 0; k < per_batch; k++, next = (next + 1) % npaths) {
			const char *p = paths[next];
			for (int j = 0; j < probes; j++) {
				missing_name(name, sizeof name, p, j);
				long long a = now_ns();
				int fd = open(name, O_RDONLY);
				meta += now_ns() - a;
				opens++;
				if (fd >= 0)
					close(fd);
			}
			long long a = now_ns();
			int fd = open(p, O_RDONLY);
			meta += now_ns() - a;
			opens++;
			if (fd < 0)
				_exit(3);
			for (;;) {
				a = now_ns();
				ssize_t n = read(fd, buf, sizeof buf);
				rd += now_ns() - a;
				reads++;
				if (n <= 0)
					break;
			}
			a = now_ns();
			close(fd);
			meta += now_ns() - a;
		}
		if (write(out, "b", 1) != 1)
			_exit(4);
		last = now_ns();
	}
	queued = queued_ns() - queued;
	printf("w0_pid %d\nw0_wall_ns %lld\nw0_opens %lld\nw0_meta_ns %lld\nw0_read_ns %lld\nw0_reads %lld\n"
	       "w0_queued_ns %lld\n",
	       getpid(), last - start, opens, meta, rd, reads, queued);
	fflush(stdout);
	_exit(0);
}

/* Every name the worker opens looked for, every file read, once (see above). */
static void touch_all(int probes)
{
	char buf[65536], name[4200];
	for (int i = 0; i < npaths; i++) {
		for (int j = 0; j < probes; j++) {
			missing_name(name, sizeof name, paths[i], j);
			int fd = open(name, O_RDONLY);
			if (fd >= 0)
				close(fd);
		}
		int fd = open(paths[i], O_RDONLY);
		if (fd < 0)
			exit(3);
		while (read(fd, buf, sizeof buf) > 0)
			;
		close(fd);
	}
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s LIST STEPS PER_BATCH PROBES COMPUTE_US\n", argv[0]);
		return 2;
	}
	load_list(argv[1]);
	int steps = atoi(argv[2]), per_batch = atoi(argv[3]), probes = atoi(argv[4]);
	long compute_us = atol(argv[5]);
	int p[2];
	if (pipe(p))
		return 2;
	touch_all(probes);
	fflush(stdout);
	long long start = now_ns(), blocked = 0;
	pid_t w = fork();
	if (w == 0) {
		close(p[0]);
		worker(steps, per_batch, probes, p[1]);
	}
	close(p[1]);
	for (int s = 0; s < steps; s++) {
		char c;
		long long a = now_ns();
		if (read(p[0], &c, 1) != 1)
			return 3;
		blocked += now_ns() - a;
		struct timespec t = { compute_us / 1000000, (compute_us % 1000000) * 1000 };
		nanosleep(&t, NULL);
	}
	long long total = now_ns() - start;
	waitpid(w, NULL, 0);
	printf("pid %d\ntotal_ns %lld\nblocked_ns %lld\n", getpid(), total, blocked);
	return 0;
}

/*
 * N calls of cuStreamSynchronize on the stand-in libcuda.so.1 (LIB), which
 * returns at once: what a sync call costs by itself, traced or not.
 * Prints the ns per call. cuda_sync LIB N
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
	void *lib = dlopen(argv[1], RTLD_NOW);
	long n = atol(argv[2]);
	if (!lib)
		return 1;
	int (*sync)(void *) = (int (*)(void *))dlsym(lib, "cuStreamSynchronize");
	void (*set)(long long, int) = (void (*)(long long, int))dlsym(lib, "fakeCudaSet");
	if (!sync || !set)
		return 1;
	set(0, 0);
	long long t0 = now();
	for (long i = 0; i < n; i++)
		sync((void *)0x5100);
	printf("%.1f\n", (double)(now() - t0) / n);
	return 0;
}

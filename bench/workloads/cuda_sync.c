/*
 * N calls of one CUDA driver entry point on the stand-in libcuda.so.1
 * (LIB), which returns at once: what a call costs by itself, traced or
 * not. Prints the ns per call. cuda_sync LIB N [sync|query|eventquery|launch]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*launchfn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			void **, void **);

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
	void *lib = dlopen(argv[1], RTLD_NOW);
	long n = atol(argv[2]);
	const char *what = argc > 3 ? argv[3] : "sync";
	if (!lib)
		return 1;
	int (*sync)(void *) = (int (*)(void *))dlsym(lib, "cuStreamSynchronize");
	int (*query)(void *) = (int (*)(void *))dlsym(lib, "cuStreamQuery");
	int (*equery)(void *) = (int (*)(void *))dlsym(lib, "cuEventQuery");
	launchfn launch = (launchfn)dlsym(lib, "cuLaunchKernel");
	void (*set)(long long, int) = (void (*)(long long, int))dlsym(lib, "fakeCudaSet");
	if (!sync || !query || !equery || !launch || !set)
		return 1;
	set(0, 0);
	long long t0 = now();
	if (strcmp(what, "launch") == 0)
		for (long i = 0; i < n; i++)
			launch(NULL, 1, 1, 1, 32, 1, 1, 0, (void *)0x5100, NULL, NULL);
	else if (strcmp(what, "eventquery") == 0)
		for (long i = 0; i < n; i++)
			equery((void *)0x7700);
	else if (strcmp(what, "query") == 0)
		for (long i = 0; i < n; i++)
			query((void *)0x5100);
	else
		for (long i = 0; i < n; i++)
			sync((void *)0x5100);
	printf("%.1f\n", (double)(now() - t0) / n);
	return 0;
}

/*
 * Reads a file through the 32-bit system call entry (int $0x80), which the
 * kernel counts in the process's I/O accounting but mltrace does not trace
 * (its table is the 64-bit one): the kernel-accounting check must notice.
 *
 * usage: untraced_read FILE
 * Prints `ret N`: the bytes read, or -errno (-38: no IA32 emulation here).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	/* The 32-bit entry takes 32-bit pointers. */
	char *buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (fd < 0 || buf == MAP_FAILED)
		return 1;
	long r;
	asm volatile("int $0x80" : "=a"(r) : "a"(3 /* i386 read */), "b"(fd), "c"((unsigned)(unsigned long)buf), "d"(100)
		     : "memory");
	printf("ret %ld\n", r);
	return 0;
}

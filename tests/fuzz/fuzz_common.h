/* fuzz_common.h - what the reader targets share: a memfd that holds the
 * current input as a file (opened through /proc/self/fd), the sink that keeps
 * reads from being optimised away, and the abort that makes a broken promise
 * a finding. Each target defines FUZZ_NAME before including it. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* read bytes are added here, so that reading them is not optimized away */
static volatile unsigned touched;
static int memfd = -1;
static char memfd_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create(FUZZ_NAME, MFD_CLOEXEC);
	if (memfd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d", memfd);
	return 0;
}

static void broken(const char *what, const char *detail)
{
	fprintf(stderr, "%s: broken promise: %s%s%s\n", FUZZ_NAME, what, detail ? ": " : "", detail ? detail : "");
	abort();
}

/* The memfd's contents become data. */
static void put_memfd(const void *data, size_t size)
{
	if (ftruncate(memfd, 0) < 0 || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
		abort();
}

#endif

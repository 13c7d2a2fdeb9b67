/* llvm.c - loading libLLVM. LLVM is loaded on first use with dlopen: the
 * commands that generate no code (check, run, report) and builds that find
 * every object in the cache never pay the ~12 ms it takes to load and relocate
 * libLLVM. Every LLVM-C function the code generator uses is called through the
 * table `llvm`, typed from the headers themselves (LLVM_API in gen.h). */
#include "gen.h"

#include <dlfcn.h>

struct LLVMApi llvm;

static void init_target(void *h, const char *name, const char *const *parts, int nparts)
{
	for (int i = 0; i < nparts; i++) {
		char sym[128];
		snprintf(sym, sizeof sym, "LLVMInitialize%s%s", name, parts[i]);
		void (*f)(void) = (void (*)(void))dlsym(h, sym);
		if (f)
			f();
	}
}

/* 0, or -1 with the reason in err. */
int llvm_load(char *err, size_t n)
{
	static int state; /* 0 not yet, 1 loaded, -1 failed */
	static char why[512];
	if (state == 0) {
		void *h = dlopen(NESTC_LLVM_LIB, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			snprintf(why, sizeof why, "cannot load LLVM (%s): %s", NESTC_LLVM_LIB, dlerror());
			state = -1;
		} else {
			state = 1;
#define X(f) \
	if (state == 1 && !(*(void **)&llvm.f = dlsym(h, #f))) { \
		snprintf(why, sizeof why, "%s does not define %s", NESTC_LLVM_LIB, #f); \
		state = -1; \
	}
			LLVM_API(X)
#undef X
			static const char *const all[] = {"TargetInfo", "Target", "TargetMC"};
			static const char *const printer[] = {"AsmPrinter"};
#define LLVM_TARGET(T) init_target(h, #T, all, 3);
#include <llvm/Config/Targets.def>
#define LLVM_ASM_PRINTER(T) init_target(h, #T, printer, 1);
#include <llvm/Config/AsmPrinters.def>
		}
	}
	if (state < 0)
		snprintf(err, n, "%s", why);
	return state > 0 ? 0 : -1;
}

/* link.c - writing a shared library, for `nestc build -o FILE.so`: the
 * objects of the model are linked with libnestrt.a (built position-
 * independent) by the system's C compiler (`$CC`, else cc) into one
 * self-contained library that dlopen loads with no search path set. A
 * version script exports the model's API and the runtime's public one
 * (nestrt.h: the caller opens weights and reads errors through it), and
 * nestc_model_api, the text of NAME.api.json, and hides everything else; -Bsymbolic binds the library's calls to its own copy of
 * the runtime, whatever else the process has loaded. */
#include "gen.h"

#include <errno.h>
#include <libgen.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef NESTC_LIBDIR
#define NESTC_LIBDIR "/usr/local/lib"
#endif

/* libnestrt.a: beside the nestc executable (the build directory), in
 * ../lib from it (an installed tree, wherever it was moved), then in the
 * LIBDIR nestc was built for. NULL if none exists; `tried` lists them. */
static char *runtime_archive(Buf *tried)
{
	char exe[4096];
	/* equivalent mutant [const 1 -> 0]: only a path of 4096 bytes reaches
	 * the last one, and no path here is that long */
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	char *cand[3] = {0};
	int k = 0;
	if (n > 0) {
		exe[n] = 0;
		char *dir = dirname(exe);
		cand[k++] = xasprintf("%s/libnestrt.a", dir);
		cand[k++] = xasprintf("%s/../lib/libnestrt.a", dir);
	}
	cand[k++] = xstrdup(NESTC_LIBDIR "/libnestrt.a");
	char *found = NULL;
	for (int i = 0; i < k; i++) {
		if (!found && access(cand[i], R_OK) == 0)
			found = cand[i];
		else {
			buf_printf(tried, "%s%s", tried->len ? ", " : "", cand[i]);
			free(cand[i]);
		}
	}
	return found;
}

/* argv of the C compiler: $CC split at blanks ("ccache gcc"), else cc */
static int cc_argv(Vec *args, char **spare)
{
	const char *cc = getenv("CC");
	if (!cc || !*cc)
		cc = "cc";
	*spare = xstrdup(cc);
	for (char *t = strtok(*spare, " \t"); t; t = strtok(NULL, " \t"))
		vec_push(args, t);
	return args->n;
}

static void rm_tree(const char *dir, Vec *files)
{
	for (int i = 0; i < files->n; i++)
		unlink(files->v[i]);
	rmdir(dir);
}

/* An assembly file defining nestc_model_api, the API description's text
 * (NUL-terminated) from the file at json */
static void api_asm(Buf *b, const char *json)
{
	buf_puts(b, "\t.section .rodata\n\t.globl nestc_model_api\n\t.type nestc_model_api, %object\n"
	            "nestc_model_api:\n\t.incbin \"");
	for (const char *c = json; *c; c++) {
		if (*c == '"' || *c == '\\')
			buf_putc(b, '\\');
		buf_putc(b, *c);
	}
	buf_puts(b, "\"\n\t.byte 0\n\t.size nestc_model_api, . - nestc_model_api\n"
	            "\t.section .note.GNU-stack,\"\",%progbits\n");
}

int link_shared(Diag *d, const char *out, const char *tmp_out, OutFile *files, int nfiles, Vec *exports,
                const char *api)
{
	Buf tried = {0};
	char *rtlib = runtime_archive(&tried);
	if (!rtlib) {
		error_plain(d, "-o %s: cannot find libnestrt.a to link into the library (looked at %s)", out, tried.s);
		buf_free(&tried);
		return 1;
	}
	buf_free(&tried);
	/* the objects in a directory of their own beside the output */
	char *outcopy = xstrdup(out);
	char *tmpdir = xasprintf("%s/.nestc-link-XXXXXX", dirname(outcopy));
	free(outcopy);
	if (!mkdtemp(tmpdir)) {
		error_plain(d, "-o %s: cannot make a temporary directory %s: %s", out, tmpdir, strerror(errno));
		free(tmpdir);
		free(rtlib);
		return 1;
	}
	Vec written = {0};
	int rc = 0;
	for (int i = 0; i < nfiles && !rc; i++) {
		char *p = xasprintf("%s/%s", tmpdir, files[i].path);
		vec_push(&written, p);
		if (write_file_atomic(p, files[i].data, files[i].len) < 0) {
			error_plain(d, "cannot write %s: %s", p, strerror(errno));
			rc = 1;
		}
	}
	/* the version script: the API, and nothing else */
	Buf map = {0};
	buf_puts(&map, "{\n  global:\n");
	for (int i = 0; i < exports->n; i++)
		buf_printf(&map, "    %s;\n", (char *)exports->v[i]);
	buf_puts(&map, "    nestc_model_api;\n    nestrt_[a-z]*;\n  local:\n    *;\n};\n");
	char *mapfile = xasprintf("%s/exports.map", tmpdir);
	vec_push(&written, mapfile);
	if (!rc && write_file_atomic(mapfile, map.s, map.len) < 0) {
		error_plain(d, "cannot write %s: %s", mapfile, strerror(errno));
		rc = 1;
	}
	buf_free(&map);
	/* the API description inside the library, for bindings that have only
	 * the library (nestc(1), THE API DESCRIPTION) */
	char *apifile = xasprintf("%s/api.json", tmpdir), *apis = xasprintf("%s/api.s", tmpdir);
	vec_push(&written, apifile);
	vec_push(&written, apis);
	Buf as = {0};
	api_asm(&as, apifile);
	if (!rc && (write_file_atomic(apifile, api, strlen(api)) < 0 || write_file_atomic(apis, as.s, as.len) < 0)) {
		error_plain(d, "cannot write in %s: %s", tmpdir, strerror(errno));
		rc = 1;
	}
	buf_free(&as);
	if (!rc) {
		const char *base = strrchr(out, '/');
		base = base ? base + 1 : out;
		char *soname = xasprintf("-Wl,-soname,%s", base);
		char *vscript = xasprintf("-Wl,--version-script=%s", mapfile);
		char *spare = NULL;
		Vec args = {0};
		cc_argv(&args, &spare);
		const char *fixed[] = {"-shared", "-o", tmp_out, soname, vscript, "-Wl,-Bsymbolic", "-Wl,-z,noexecstack",
		                       "-Wl,-z,now", "-Wl,--no-undefined"};
		for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
			vec_push(&args, (void *)fixed[i]);
		for (int i = 0; i < nfiles; i++)
			vec_push(&args, written.v[i]);
		vec_push(&args, apis);
		/* all of it: the library's users call the runtime's API too (a
		 * tokenizer, .npy files), not only what the model's code calls */
		vec_push(&args, "-Wl,--whole-archive");
		vec_push(&args, rtlib);
		vec_push(&args, "-Wl,--no-whole-archive");
		vec_push(&args, "-lm");
		vec_push(&args, "-lpthread");
		vec_push(&args, NULL);
		pid_t pid;
		int err = posix_spawnp(&pid, args.v[0], NULL, NULL, (char **)args.v, environ);
		int status = 0;
		if (err) {
			error_plain(d, "-o %s: cannot run the C compiler '%s' to link it: %s (set CC to one)", out,
			            (char *)args.v[0], strerror(err));
			rc = 1;
		} else if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			error_plain(d, "-o %s: linking failed: '%s' %s %d", out, (char *)args.v[0],
			            WIFSIGNALED(status) ? "died of signal" : "exited with status",
			            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			unlink(tmp_out);
			rc = 1;
		}
		free(args.v);
		free(spare);
		free(soname);
		free(vscript);
	}
	rm_tree(tmpdir, &written);
	for (int i = 0; i < written.n; i++)
		free(written.v[i]);
	free(written.v);
	free(tmpdir);
	free(rtlib);
	return rc;
}

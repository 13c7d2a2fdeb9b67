/* main.c - the nestc command line: subcommands, flags, exit statuses. */
#include "nestc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
	"usage: nestc check FILE [-D NAME=VALUE]... [--dump=ast|ir|regions] [--no-regions] [-Werror] [-w]\n"
	"       nestc build FILE -o DIR|FILE.a [--emit=obj|asm|llvm] [-O0|-O1|-O2|-O3]\n"
	"                 [--target=TRIPLE] [--cpu=NAME] [--name NAME] [--no-regions]\n"
	"                 [--report[=text|json|dot]] [--report-file PATH] [-D NAME=VALUE]... [-Werror] [-w]\n"
	"       nestc weights FILE --random-weights SEED -o OUT.safetensors [-D NAME=VALUE]...\n"
	"       nestc report FILE [--format=text|json|dot] [--report-file PATH] [--no-regions]\n"
	"                 [-D NAME=VALUE]... [-Werror] [-w]\n"
	"       nestc run FILE [--weights FILE.safetensors | --random-weights SEED]\n"
	"                 [--input NAME=PATH.npy]... [--output PATH.npy]... [--entry NAME]\n"
	"                 [-D NAME=VALUE]... [-Werror] [-w]\n"
	"       nestc --version | --help\n";

static int usage_error(const char *fmt, const char *arg)
{
	fputs("nestc: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	return 2;
}

/* Value of a flag given as "--flag=VALUE" or "--flag VALUE"; NULL when argv[*i]
 * is not that flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, int *missing)
{
	size_t n = strlen(flag);
	const char *a = argv[*i];
	if (strncmp(a, flag, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != 0)
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

/* The model's name: the file's stem ("samples/gpt2.nest" -> "gpt2"), made a C identifier. */
static char *model_name(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	char *s = xstrdup(base);
	char *dot = strrchr(s, '.');
	if (dot && dot != s)
		*dot = 0;
	for (char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
			*c = '_';
	if (!*s || (*s >= '0' && *s <= '9')) {
		char *t = xasprintf("m_%s", s);
		free(s);
		s = t;
	}
	return s;
}

/* A report to stdout, or to a file written atomically. */
static int write_report(RegionTable *rt, ReportFormat fmt, const char *model, const char *path)
{
	if (!path) {
		report_write(stdout, rt, fmt, model);
		return 0;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m) {
		fprintf(stderr, "nestc: error: out of memory\n");
		return 1;
	}
	report_write(m, rt, fmt, model);
	fclose(m);
	int rc = 0;
	if (write_file_atomic(path, buf, len) < 0) {
		fprintf(stderr, "nestc: error: cannot write %s: %s\n", path, strerror(errno));
		rc = 1;
	}
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("%s", "no command given");
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("nestc %s\n", NESTC_VERSION);
		return 0;
	}
	int is_run = !strcmp(cmd, "run");
	int is_report = !strcmp(cmd, "report");
	int is_build = !strcmp(cmd, "build");
	int is_weights = !strcmp(cmd, "weights");
	if (!is_run && !is_report && !is_build && !is_weights && strcmp(cmd, "check"))
		return usage_error("unknown command '%s'", cmd);

	const char *file = NULL, *dump = NULL;
	Vec defs = {0}, ins = {0}, outs = {0};
	RunOptions ro = {0};
	int werror = 0, nowarn = 0, rc = 2, no_regions = 0;
	ReportFormat fmt = REPORT_TEXT;
	const char *report_file = NULL;
	int want_report = 0;
	BuildOptions bo = {.emit = EMIT_OBJ, .opt_level = 2};
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v;
		int missing = 0;
		if (!strcmp(a, "-Werror")) {
			werror = 1;
		} else if (!strcmp(a, "-w")) {
			nowarn = 1;
		} else if (!strcmp(a, "--no-regions") && !is_run) {
			no_regions = 1;
		} else if (is_build && (!strcmp(a, "-O0") || !strcmp(a, "-O1") || !strcmp(a, "-O2") || !strcmp(a, "-O3"))) {
			bo.opt_level = a[2] - '0';
		} else if ((is_build || is_weights) && (v = flag_value(argc, argv, &i, "-o", &missing))) {
			bo.out = v;
		} else if (is_build && (v = flag_value(argc, argv, &i, "--emit", &missing))) {
			if (!strcmp(v, "obj"))
				bo.emit = EMIT_OBJ;
			else if (!strcmp(v, "asm"))
				bo.emit = EMIT_ASM;
			else if (!strcmp(v, "llvm"))
				bo.emit = EMIT_LLVM;
			else {
				rc = usage_error("--emit takes obj, asm or llvm, not '%s'", v);
				goto out;
			}
		} else if (is_build && (v = flag_value(argc, argv, &i, "--target", &missing))) {
			bo.target = v;
		} else if (is_build && (v = flag_value(argc, argv, &i, "--cpu", &missing))) {
			bo.cpu = v;
		} else if (is_build && (v = flag_value(argc, argv, &i, "--name", &missing))) {
			bo.name = v;
		} else if (is_build && (!strcmp(a, "--report") || !strncmp(a, "--report=", 9))) {
			want_report = 1;
			v = a[8] == '=' ? a + 9 : "text";
			if (!strcmp(v, "text"))
				fmt = REPORT_TEXT;
			else if (!strcmp(v, "json"))
				fmt = REPORT_JSON;
			else if (!strcmp(v, "dot"))
				fmt = REPORT_DOT;
			else {
				rc = usage_error("--report takes text, json or dot, not '%s'", v);
				goto out;
			}
		} else if (is_build && (v = flag_value(argc, argv, &i, "--report-file", &missing))) {
			report_file = v;
			want_report = 1;
		} else if (is_report && (v = flag_value(argc, argv, &i, "--format", &missing))) {
			if (!strcmp(v, "text"))
				fmt = REPORT_TEXT;
			else if (!strcmp(v, "json"))
				fmt = REPORT_JSON;
			else if (!strcmp(v, "dot"))
				fmt = REPORT_DOT;
			else {
				rc = usage_error("--format takes text, json or dot, not '%s'", v);
				goto out;
			}
		} else if (is_report && (v = flag_value(argc, argv, &i, "--report-file", &missing))) {
			report_file = v;
		} else if (!strncmp(a, "-D", 2)) {
			v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v || !strchr(v, '=') || v[0] == '=') {
				rc = usage_error("-D needs NAME=VALUE, got '%s'", v ? v : "");
				goto out;
			}
			vec_push(&defs, (void *)v);
		} else if (!is_run && !is_report && (v = flag_value(argc, argv, &i, "--dump", &missing))) {
			if (strcmp(v, "ast") && strcmp(v, "ir") && strcmp(v, "regions")) {
				rc = usage_error("--dump takes ast, ir or regions, not '%s'", v);
				goto out;
			}
			dump = v;
		} else if (is_run && (v = flag_value(argc, argv, &i, "--weights", &missing))) {
			ro.weights = v;
		} else if ((is_run || is_weights) && (v = flag_value(argc, argv, &i, "--random-weights", &missing))) {
			char *end;
			ro.seed = strtoull(v, &end, 10);
			if (!*v || *end) {
				rc = usage_error("--random-weights needs an integer seed, got '%s'", v);
				goto out;
			}
			ro.random_weights = 1;
		} else if (is_run && (v = flag_value(argc, argv, &i, "--input", &missing))) {
			if (!strchr(v, '=') || v[0] == '=') {
				rc = usage_error("--input needs NAME=PATH.npy, got '%s'", v);
				goto out;
			}
			vec_push(&ins, (void *)v);
		} else if (is_run && (v = flag_value(argc, argv, &i, "--output", &missing))) {
			vec_push(&outs, (void *)v);
		} else if (is_run && (v = flag_value(argc, argv, &i, "--entry", &missing))) {
			ro.entry = v;
		} else if (missing) {
			rc = usage_error("%s needs a value", a);
			goto out;
		} else if (a[0] == '-' && a[1]) {
			rc = usage_error("unknown option '%s'", a);
			goto out;
		} else if (!file) {
			file = a;
		} else {
			rc = usage_error("more than one input file ('%s')", a);
			goto out;
		}
	}
	if (!file) {
		rc = usage_error("%s", "no input file");
		goto out;
	}
	if (is_weights && (!bo.out || !ro.random_weights)) {
		rc = usage_error("%s", "weights needs --random-weights SEED and -o OUT.safetensors");
		goto out;
	}
	if (is_build && !bo.out) {
		rc = usage_error("%s", "build needs -o DIR or -o FILE.a");
		goto out;
	}
	if (bo.name) {
		int ok = (bo.name[0] < '0' || bo.name[0] > '9') && bo.name[0];
		for (const char *c = bo.name; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
				ok = 0;
		if (!ok) {
			rc = usage_error("--name must be a C identifier, not '%s'", bo.name);
			goto out;
		}
	}
	if (is_run && ro.weights && ro.random_weights) {
		rc = usage_error("%s", "--weights and --random-weights exclude each other");
		goto out;
	}

	char err[512];
	Source *src = source_load(file, err, sizeof err);
	if (!src) {
		fprintf(stderr, "nestc: error: %s\n", err);
		rc = 1;
		goto out;
	}
	Diag d = {.src = src, .werror = werror, .nowarn = nowarn};
	Arena arena = {0};
	Module *m = parse_module(&arena, &d, src);
	if (dump && !strcmp(dump, "ast") && d.nerrors == 0)
		ast_dump(stdout, m);
	/* Keep going after syntax errors: the declarations that parsed are still
	 * checked, so one run reports as many mistakes as it can. */
	Program *p;
	{
		Define *dv = xcalloc((size_t)defs.n + 1, sizeof(Define));
		for (int k = 0; k < defs.n; k++) {
			const char *s = defs.v[k];
			const char *eq = strchr(s, '=');
			dv[k].name = arena_strndup(&arena, s, (size_t)(eq - s));
			dv[k].value = eq + 1;
		}
		CompileOptions co = {.defines = dv, .ndefines = defs.n};
		int syntax_errors = d.nerrors;
		p = compile_module(&arena, &d, m, &co);
		free(dv);
		if (syntax_errors)
			p = NULL;
	}
	if (p && dump && !strcmp(dump, "ir"))
		ir_dump(stdout, p);
	/* the region pass runs for every command but run, which ignores regions */
	RegionTable *rt = NULL;
	if (p && !d.nerrors && !is_run && !is_weights) {
		char *triple = bo.target ? NULL : host_triple();
		RegionOptions rop = {.no_regions = no_regions, .opt_level = is_build ? bo.opt_level : 2,
		                     .target = bo.target ? bo.target : arena_strdup(&arena, triple), .cpu = bo.cpu};
		free(triple);
		rt = build_regions(p, &d, &rop);
	}
	char *model = model_name(file);
	if (rt && !d.nerrors && dump && !strcmp(dump, "regions"))
		report_write(stdout, rt, REPORT_TEXT, model);
	if (!p || d.nerrors) {
		rc = 1;
	} else if (is_report) {
		rc = write_report(rt, fmt, model, report_file);
	} else if (is_weights) {
		rc = write_random_weights(p, &d, ro.seed, bo.out);
	} else if (is_build) {
		size_t ol = strlen(bo.out);
		bo.archive = ol > 2 && !strcmp(bo.out + ol - 2, ".a");
		bo.name = bo.name ? bo.name : model;
		rc = build_model(p, rt, &d, &bo);
		if (rc == 0 && want_report)
			rc = write_report(rt, fmt, bo.name, report_file);
	} else if (is_run) {
		ro.ninputs = ins.n;
		ro.input_names = xcalloc((size_t)ins.n + 1, sizeof(char *));
		ro.input_paths = xcalloc((size_t)ins.n + 1, sizeof(char *));
		for (int k = 0; k < ins.n; k++) {
			const char *s = ins.v[k];
			const char *eq = strchr(s, '=');
			ro.input_names[k] = arena_strndup(&arena, s, (size_t)(eq - s));
			ro.input_paths[k] = eq + 1;
		}
		ro.outputs = (const char **)outs.v;
		ro.noutputs = outs.n;
		rc = run_program(p, &d, &ro);
		free(ro.input_names);
		free(ro.input_paths);
	} else {
		rc = 0;
	}
	if (d.nerrors && rc == 0)
		rc = 1;
	if (d.nerrors)
		fprintf(stderr, "%d error%s generated.\n", d.nerrors, d.nerrors == 1 ? "" : "s");
	free(model);
	diag_free(&d);
	arena_free(&arena);
	source_free(src);
out:
	free(defs.v);
	free(ins.v);
	free(outs.v);
	return rc;
}

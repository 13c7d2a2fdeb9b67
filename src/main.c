/* main.c - the nestc command line: subcommands, flags, exit statuses. */
#include "nestc.h"
#include "wformat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: nestc check FILE [-D NAME=VALUE]... [--dump=ast|ir|regions] [--no-regions] [--no-narrow] [-Werror] [-w]\n"
	"       nestc build FILE -o DIR|FILE.a|FILE.so [--emit=obj|asm|llvm] [-O0|-O1|-O2|-O3]\n"
	"                 [--target=TRIPLE] [--cpu=NAME] [--name NAME] [--no-regions]\n"
	"                 [--report[=text|json|dot]] [--report-file PATH] [-D NAME=VALUE]... [-Werror] [-w]\n"
	"                 [-j N] [-q] [--cache-dir DIR | --no-cache] [--only-variant ID] [--embed-weights W.safetensors]\n"
	"                 [-MD] [-MF FILE] [-M] [--no-winograd] [--no-narrow] [--weights-format=[PATTERN=]FMT,...]\n"
	"                 [--activations=f32|int8]\n"
	"       nestc plan FILE -o DIR [build flags]   (a Ninja file: one edge per variant)\n"
	"       nestc cache stats|clear [--cache-dir DIR]\n"
	"       nestc weights FILE --random-weights SEED -o OUT.safetensors [-q] [-D NAME=VALUE]...\n"
	"       nestc weights FILE --random-weights SEED | --weights IN.safetensors|IN.gguf\n"
	"                 [--format=[PATTERN=]FMT,...] -o OUT.gguf [-q] [-D NAME=VALUE]...\n"
	"       nestc report FILE [--format=text|json|dot] [--report-file PATH] [--target=TRIPLE] [--no-regions]\n"
	"                 [--no-narrow] [--weights-format=SPEC] [-D NAME=VALUE]... [-Werror] [-w]\n"
	"       nestc run FILE [--weights FILE.safetensors | --random-weights SEED]\n"
	"                 [--input NAME=PATH.npy]... [--output PATH.npy]... [--entry NAME]\n"
	"                 [--no-narrow] [--weights-format=SPEC] [-D NAME=VALUE]... [-Werror] [-w]\n"
	"       nestc import MODEL.onnx -o OUT.nest [-w WEIGHTS.safetensors] [-q] [-D NAME=VALUE]...\n"
	"                 [--freeze NAME=FILE.pb|FILE.npy]...\n"
	"       (check, build, plan, report, run and weights also take a MODEL.onnx, with -D and --freeze;\n"
	"        build writes its weights to --weights-out FILE, by default OUT.safetensors beside -o OUT)\n"
	"       (FMT: f32, bf16, f16, q8_0, q4_0, q4_k or q6_k; see nestc(1))\n"
	"       (every command that compiles also takes --consts-from FILE.gguf: the @gguf consts' values)\n"
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

/* nestc weights --format=SPEC: the syntax of --weights-format, checked
 * here so that the message names the flag given. 0, or -1 after it. */
static int format_spec_ok(const char *v)
{
	for (const char *p = v;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		const char *f = eq ? eq + 1 : p;
		size_t flen = len - (size_t)(f - p);
		int known = 0;
		for (int k = 0; k < WF_COUNT; k++)
			known |= strlen(wformat_name(k)) == flen && !strncmp(wformat_name(k), f, flen);
		if (len == 0 || (eq && eq == p) || !known) {
			fprintf(stderr, "nestc: error: --format: '%.*s' is not FMT or PATTERN=FMT, FMT one of "
			                "f32, bf16, f16, q8_0, q4_0, q4_k, q6_k\n", (int)len, p);
			return -1;
		}
		if (!end)
			return 0;
		p = end + 1;
	}
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
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
/* "text", "json" or "dot" into *fmt; -1 for anything else. */
static int report_format(const char *v, ReportFormat *fmt)
{
	if (!strcmp(v, "text"))
		*fmt = REPORT_TEXT;
	else if (!strcmp(v, "json"))
		*fmt = REPORT_JSON;
	else if (!strcmp(v, "dot"))
		*fmt = REPORT_DOT;
	else
		return -1;
	return 0;
}

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

/* Make and Ninja escape spaces and '$' differently; this form reads in both. */
static void dep_escape(Buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == ' ' || *s == '#')
			buf_putc(b, '\\');
		if (*s == '$')
			buf_putc(b, '$');
		buf_putc(b, *s);
	}
}

/* -MD / -M: the outputs depend on the model file (and embedded weights). */
static int write_depfile(Program *p, RegionTable *rt, BuildOptions *bo, const char *model_file, const char *path,
                         int print)
{
	int n;
	char **outs = build_outputs(p, rt, bo, &n);
	Buf b = {0};
	/* the first output is the target: Ninja wants exactly one */
	dep_escape(&b, outs[0]);
	buf_puts(&b, ":");
	buf_putc(&b, ' ');
	dep_escape(&b, model_file);
	if (bo->embed) {
		buf_puts(&b, " \\\n  ");
		dep_escape(&b, bo->embed);
	}
	buf_putc(&b, '\n');
	int rc = 0;
	if (print) {
		fputs(b.s, stdout);
	} else if (!path) {
		char *def = NULL;
		if (bo->archive)
			def = xasprintf("%.*s.d", (int)(strlen(bo->out) - 2), bo->out);
		else if (bo->shared)
			def = xasprintf("%.*s.d", (int)(strlen(bo->out) - 3), bo->out);
		else if (!bo->only)
			def = xasprintf("%s/%s.d", bo->out, bo->name);
		if (def && bo->out && !path && rc == 0) {
			if (write_file_atomic(def, b.s, b.len) < 0) {
				fprintf(stderr, "nestc: error: cannot write %s: %s\n", def, strerror(errno));
				rc = 1;
			}
		} else {
			fputs(b.s, stdout);
		}
		free(def);
	} else if (write_file_atomic(path, b.s, b.len) < 0) {
		fprintf(stderr, "nestc: error: cannot write %s: %s\n", path, strerror(errno));
		rc = 1;
	}
	for (int i = 0; i < n; i++)
		free(outs[i]);
	free(outs);
	buf_free(&b);
	return rc;
}

static void ninja_escape(Buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == ' ' || *s == ':' || *s == '$')
			buf_putc(b, '$');
		buf_putc(b, *s);
	}
}

/* nestc plan: a Ninja file with one edge per variant (nestc build --only-variant). */
static int print_plan(Program *p, RegionTable *rt, BuildOptions *bo, const char *self, const char *model_file, Vec *flags)
{
	Buf b = {0};
	buf_printf(&b, "# Generated by nestc %s from %s: ninja -f THIS builds every object.\n", NESTC_VERSION, model_file);
	buf_puts(&b, "nestc = ");
	buf_puts(&b, strchr(self, '/') ? self : "nestc");
	buf_puts(&b, "\nflags =");
	for (int i = 0; i < flags->n; i++)
		buf_printf(&b, " %s", (char *)flags->v[i]);
	buf_puts(&b, "\n\nrule nestc_part\n"
	             "  command = $nestc build $in -o $outdir --only-variant $part -j1 -MD -MF $dep $flags\n"
	             "  description = nestc $part\n  depfile = $dep\n  deps = gcc\n\n");
	int nparts = rt->variants.n + 1 + (bo->embed != NULL);
	Vec all = {0};
	for (int i = 0; i < nparts; i++) {
		BuildOptions one = *bo;
		char id[300];
		if (i < rt->variants.n) {
			Variant *v = rt->variants.v[i];
			snprintf(id, sizeof id, "%s.%d", v->region, v->k);
		} else {
			snprintf(id, sizeof id, "%s", i == rt->variants.n ? "model" : "weights");
		}
		one.only = id;
		one.archive = 0;
		int n;
		char **outs = build_outputs(p, rt, &one, &n);
		buf_puts(&b, "build");
		for (int k = 0; k < n; k++) {
			buf_putc(&b, ' ');
			ninja_escape(&b, outs[k]);
			vec_push(&all, outs[k]);
		}
		buf_puts(&b, ": nestc_part ");
		ninja_escape(&b, model_file);
		if (bo->embed) {
			buf_puts(&b, " | ");
			ninja_escape(&b, bo->embed);
		}
		buf_printf(&b, "\n  part = %s\n  outdir = %s\n  dep = ", id, bo->out);
		ninja_escape(&b, outs[0]);
		buf_puts(&b, ".d\n");
		free(outs);
	}
	buf_puts(&b, "\nbuild all: phony");
	for (int k = 0; k < all.n; k++) {
		buf_putc(&b, ' ');
		ninja_escape(&b, all.v[k]);
		free(all.v[k]);
	}
	buf_puts(&b, "\ndefault all\n");
	free(all.v);
	fputs(b.s, stdout);
	buf_free(&b);
	return 0;
}

/* The entry `run` will run (run.c pick_entry, on the parsed module): -D
 * gives its run-time dims alone a value. NULL when it cannot tell. */
static const char *run_entry_name(Module *m, const char *want)
{
	if (want || !m)
		return want;
	const char *only = NULL;
	int n = 0;
	for (int i = 0; i < m->ndecls; i++) {
		Decl *d = m->decls[i];
		if (d->kind != D_FN || !d->is_export)
			continue;
		n++;
		only = d->name;
		if (!strcmp(d->name, "forward"))
			return d->name;
	}
	return n == 1 ? only : NULL;
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
	int is_plan = !strcmp(cmd, "plan");
	int is_import = !strcmp(cmd, "import");
	if (!strcmp(cmd, "cache")) {
		const char *what = NULL, *dir = NULL;
		for (int i = 2; i < argc; i++) {
			int missing = 0;
			const char *v = flag_value(argc, argv, &i, "--cache-dir", &missing);
			if (v)
				dir = v;
			else if (missing)
				return usage_error("%s needs a value", argv[i]);
			else if (!what && (!strcmp(argv[i], "stats") || !strcmp(argv[i], "clear")))
				what = argv[i];
			else
				return usage_error("cache takes stats or clear, not '%s'", argv[i]);
		}
		if (!what)
			return usage_error("%s", "cache takes stats or clear");
		char *def = dir ? NULL : default_cache_dir();
		int r = cache_command(dir ? dir : def, what);
		free(def);
		return r;
	}
	/* plan takes the build flags and passes them on to each edge */
	if (is_plan)
		is_build = 1;
	if (!is_run && !is_report && !is_build && !is_weights && !is_import && strcmp(cmd, "check"))
		return usage_error("unknown command '%s'", cmd);

	const char *file = NULL, *dump = NULL;
	Vec defs = {0}, ins = {0}, outs = {0};
	RunOptions ro = {0};
	Vec argmap = {0}; /* an ONNX model's graph input names, each followed by its argument's */
	int counted = 0;  /* the errors' count line is out */
	int werror = 0, nowarn = 0, rc = 2, no_regions = 0, no_narrow = 0;
	ReportFormat fmt = REPORT_TEXT;
	const char *report_file = NULL;
	int want_report = 0;
	BuildOptions bo = {.emit = EMIT_OBJ, .opt_level = 2, .progress = 1};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	bo.jobs = ncpu > 0 ? (int)ncpu : 1;
	int no_cache = 0, dep_md = 0, dep_print = 0;
	const char *cache_dir = NULL, *dep_mf = NULL;
	Vec passthru = {0}; /* build flags `nestc plan` hands to each edge */
	Vec freezes = {0};
	const char *import_out = NULL, *import_weights = NULL;
	int no_outline = 0;
	WFormatSpec wfs = {.deflt = -1};
	int weights_format = 0; /* nestc weights --format: a GGUF file in formats */
	const char *consts_from = NULL; /* --consts-from FILE.gguf: the @gguf consts' values */
	char *tmp_weights = NULL;
	char *outline = NULL; /* the repeated layers the import found, for report */
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v;
		int missing = 0;
		if (is_import && (v = flag_value(argc, argv, &i, "-w", &missing))) {
			import_weights = v; /* import compiles nothing: -w names the weights it writes */
		} else if (!strcmp(a, "-Werror")) {
			werror = 1;
		} else if ((is_build || is_weights || is_import) && (!strcmp(a, "--quiet") || !strcmp(a, "-q"))) {
			bo.progress = 0; /* no progress line, even on a terminal */
		} else if (!strcmp(a, "-w")) {
			nowarn = 1;
		} else if (!strcmp(a, "--no-regions") && !is_run) {
			no_regions = 1;
			vec_push(&passthru, (void *)a);
		} else if (!strcmp(a, "--no-narrow") && !is_import) {
			no_narrow = 1;
			vec_push(&passthru, (void *)a);
		} else if ((is_build || is_run || is_report) && (v = flag_value(argc, argv, &i, "--weights-format", &missing))) {
			if (wformat_parse(&wfs, v) < 0) {
				rc = 2;
				goto out;
			}
			if (is_build)
				vec_push(&passthru, xasprintf("--weights-format=%s", v));
		} else if (!is_import && (v = flag_value(argc, argv, &i, "--consts-from", &missing))) {
			consts_from = v;
			vec_push(&passthru, xasprintf("--consts-from=%s", v));
		} else if (is_build && (v = flag_value(argc, argv, &i, "--activations", &missing))) {
			if (strcmp(v, "f32") && strcmp(v, "int8")) {
				rc = usage_error("--activations takes f32 (the default) or int8, not '%s'", v);
				goto out;
			}
			bo.act_int8 = !strcmp(v, "int8");
			vec_push(&passthru, xasprintf("--activations=%s", v));
		} else if (is_build && !strcmp(a, "--no-winograd")) {
			bo.no_winograd = 1;
			vec_push(&passthru, (void *)a);
		} else if (is_build && (!strcmp(a, "-O0") || !strcmp(a, "-O1") || !strcmp(a, "-O2") || !strcmp(a, "-O3"))) {
			bo.opt_level = a[2] - '0';
			vec_push(&passthru, (void *)a);
		} else if (is_build && !strncmp(a, "-j", 2)) {
			v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			char *end;
			long nj = v ? strtol(v, &end, 10) : 0;
			if (!v || !*v || *end || nj < 1 || nj > 1024) {
				rc = usage_error("-j needs a number of threads from 1 to 1024, got '%s'", v ? v : "");
				goto out;
			}
			bo.jobs = (int)nj;
		} else if (is_build && (v = flag_value(argc, argv, &i, "--cache-dir", &missing))) {
			cache_dir = v;
		} else if (is_build && !strcmp(a, "--no-cache")) {
			no_cache = 1;
		} else if (is_build && (v = flag_value(argc, argv, &i, "--only-variant", &missing))) {
			bo.only = v;
		} else if (is_build && (v = flag_value(argc, argv, &i, "--embed-weights", &missing))) {
			bo.embed = v;
			vec_push(&passthru, xasprintf("--embed-weights=%s", v));
		} else if (is_build && !strcmp(a, "-MD")) {
			dep_md = 1;
		} else if (is_build && !strcmp(a, "-M")) {
			dep_print = 1;
		} else if (is_build && (v = flag_value(argc, argv, &i, "-MF", &missing))) {
			dep_mf = v;
			dep_md = 1;
		} else if ((v = flag_value(argc, argv, &i, "--freeze", &missing))) {
			if (!strchr(v, '=') || v[0] == '=') {
				rc = usage_error("--freeze needs NAME=FILE.pb, got '%s'", v);
				goto out;
			}
			vec_push(&freezes, (void *)v);
		} else if (!strcmp(a, "--no-outline")) {
			no_outline = 1;
		} else if (is_import && (v = flag_value(argc, argv, &i, "-o", &missing))) {
			import_out = v;
		} else if ((is_import || is_build) && (v = flag_value(argc, argv, &i, "--weights-out", &missing))) {
			import_weights = v;
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
		} else if ((is_build || is_report) && (v = flag_value(argc, argv, &i, "--target", &missing))) {
			bo.target = v;
			if (is_build)
				vec_push(&passthru, xasprintf("--target=%s", v));
		} else if (is_build && (v = flag_value(argc, argv, &i, "--cpu", &missing))) {
			bo.cpu = v;
			vec_push(&passthru, xasprintf("--cpu=%s", v));
		} else if (is_build && (v = flag_value(argc, argv, &i, "--name", &missing))) {
			bo.name = v;
			vec_push(&passthru, xasprintf("--name=%s", v));
		} else if (is_build && (!strcmp(a, "--report") || !strncmp(a, "--report=", 9))) {
			want_report = 1;
			v = a[8] == '=' ? a + 9 : "text";
			if (report_format(v, &fmt) < 0) {
				rc = usage_error("--report takes text, json or dot, not '%s'", v);
				goto out;
			}
		} else if (is_build && (v = flag_value(argc, argv, &i, "--report-file", &missing))) {
			report_file = v;
			want_report = 1;
		} else if (is_weights && (v = flag_value(argc, argv, &i, "--format", &missing))) {
			if (format_spec_ok(v) < 0 || wformat_parse(&wfs, v) < 0) {
				rc = 2;
				goto out;
			}
			weights_format = 1;
		} else if (is_report && (v = flag_value(argc, argv, &i, "--format", &missing))) {
			if (report_format(v, &fmt) < 0) {
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
			vec_push(&passthru, xasprintf("-D%s", v));
		} else if (!is_run && !is_report && (v = flag_value(argc, argv, &i, "--dump", &missing))) {
			if (strcmp(v, "ast") && strcmp(v, "ir") && strcmp(v, "regions")) {
				rc = usage_error("--dump takes ast, ir or regions, not '%s'", v);
				goto out;
			}
			dump = v;
		} else if ((is_run || is_weights) && (v = flag_value(argc, argv, &i, "--weights", &missing))) {
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
	if (is_weights && ro.weights && ro.random_weights) {
		rc = usage_error("%s", "--weights and --random-weights exclude each other");
		goto out;
	}
	if (is_weights && (!bo.out || (!ro.random_weights && !ro.weights))) {
		rc = usage_error("%s", "weights needs --random-weights SEED (or --weights IN) and -o OUT.safetensors or OUT.gguf");
		goto out;
	}
	if (is_weights && (weights_format || ro.weights) && !ends_with(bo.out, ".gguf")) {
		rc = usage_error(weights_format ? "weights --format writes a GGUF file: -o must name a .gguf file, not '%s'"
		                                : "weights --weights converts into a GGUF file: -o must name a .gguf file, not '%s'",
		                 bo.out);
		goto out;
	}
	if (is_build && !bo.out) {
		rc = usage_error("%s", is_plan ? "plan needs -o DIR (where the edges write)" : "build needs -o DIR, -o FILE.a or -o FILE.so");
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

	size_t flen = strlen(file);
	int is_onnx = flen > 5 && !strcmp(file + flen - 5, ".onnx");
	if (is_import && !is_onnx) {
		rc = usage_error("import reads a .onnx file, not '%s'", file);
		goto out;
	}
	if (is_import && !import_out) {
		rc = usage_error("%s", "import needs -o OUT.nest");
		goto out;
	}
	if (!is_onnx && (freezes.n || import_weights || no_outline)) {
		rc = usage_error("%s", "--freeze, -w and --no-outline go with a .onnx file");
		goto out;
	}
	if (dep_mf) {
		/* the dependency file is written last: a directory it cannot go to
		 * must fail the build before anything is written */
		const char *sl = strrchr(dep_mf, '/');
		char *dir = sl ? xasprintf("%.*s", sl == dep_mf ? 1 : (int)(sl - dep_mf), dep_mf) : xstrdup(".");
		/* (the output directory itself is made by the build: compared
		 * without leading ./ and trailing slashes) */
		const char *o = bo.out ? bo.out : "", *dd = dir;
		while (!strncmp(o, "./", 2))
			o += 2;
		while (!strncmp(dd, "./", 2))
			dd += 2;
		size_t ol = strlen(o), dl = strlen(dd);
		while (ol > 1 && o[ol - 1] == '/')
			ol--;
		while (dl > 1 && dd[dl - 1] == '/')
			dl--;
		int ok = access(dir, W_OK | X_OK) == 0 || (bo.out && dl == ol && !strncmp(dd, o, ol));
		if (!ok)
			fprintf(stderr, "nestc: error: cannot write %s: %s\n", dep_mf, strerror(errno));
		free(dir);
		if (!ok) {
			rc = 1;
			goto out;
		}
	}
	char err[512];
	Source *src;
	if (is_onnx) {
		OnnxOptions oo = {.ndefs = defs.n, .nfreeze = freezes.n, .no_outline = no_outline};
		oo.def_names = xcalloc((size_t)defs.n + 1, sizeof(char *));
		oo.def_values = xcalloc((size_t)defs.n + 1, sizeof(char *));
		oo.freeze_names = xcalloc((size_t)freezes.n + 1, sizeof(char *));
		oo.freeze_paths = xcalloc((size_t)freezes.n + 1, sizeof(char *));
		for (int k = 0; k < defs.n; k++) {
			const char *s = defs.v[k], *eq = strchr(s, '=');
			oo.def_names[k] = xasprintf("%.*s", (int)(eq - s), s);
			oo.def_values[k] = eq + 1;
		}
		for (int k = 0; k < freezes.n; k++) {
			const char *s = freezes.v[k], *eq = strchr(s, '=');
			oo.freeze_names[k] = xasprintf("%.*s", (int)(eq - s), s);
			oo.freeze_paths[k] = eq + 1;
		}
		OnnxImport im;
		int irc = onnx_import(file, &oo, &im);
		for (int k = 0; k < defs.n; k++)
			free((char *)oo.def_names[k]);
		for (int k = 0; k < freezes.n; k++)
			free((char *)oo.freeze_names[k]);
		free(oo.def_names);
		free(oo.def_values);
		free(oo.freeze_names);
		free(oo.freeze_paths);
		if (irc) {
			rc = 1;
			goto out;
		}
		/* the weights its params read: -w, or beside what build writes, or a
		 * temporary file for run */
		const char *wpath = import_weights;
		if (!wpath && is_build) { /* even with no params: a Makefile can count on it */
			size_t ol = strlen(bo.out);
			if (ol > 2 && !strcmp(bo.out + ol - 2, ".a"))
				wpath = tmp_weights = xasprintf("%.*s.safetensors", (int)(ol - 2), bo.out);
			else if (ol > 3 && !strcmp(bo.out + ol - 3, ".so"))
				wpath = tmp_weights = xasprintf("%.*s.safetensors", (int)(ol - 3), bo.out);
			else
				wpath = tmp_weights = xasprintf("%s.safetensors", bo.out);
		}
		if (!wpath && im.nweights && is_run && !ro.weights && !ro.random_weights) {
			const char *td = getenv("TMPDIR");
			char *t = xasprintf("%s/nestc-onnx-XXXXXX", td && *td ? td : "/tmp");
			int fd = mkstemp(t);
			if (fd < 0) {
				fprintf(stderr, "nestc: error: cannot make a temporary file %s: %s\n", t, strerror(errno));
				free(t);
				onnx_import_free(&im);
				rc = 1;
				goto out;
			}
			close(fd);
			wpath = tmp_weights = t;
			ro.weights = t;
		} else if (wpath && is_run && !ro.weights) {
			ro.weights = wpath;
		}
		int kept;
		Progress wpg;
		progress_start(&wpg, bo.progress, "writing weights", (int64_t)im.weights_len, 1);
		if (wpath && (im.nweights || import_weights || is_build) && write_parts_atomic(wpath, im.weights, im.nparts, &kept, &wpg) < 0) {
			progress_end(&wpg);
			fprintf(stderr, "nestc: error: cannot write %s: %s\n", wpath, strerror(errno));
			onnx_import_free(&im);
			rc = 1;
			goto out;
		}
		progress_end(&wpg);
		if (is_build && !import_weights && tmp_weights) {
			free(tmp_weights); /* kept: the compiled model reads it */
			tmp_weights = NULL;
		}
		if (is_import) {
			rc = 0;
			if (write_file_atomic(import_out, im.text, strlen(im.text)) < 0) {
				fprintf(stderr, "nestc: error: cannot write %s: %s\n", import_out, strerror(errno));
				rc = 1;
			}
			onnx_import_free(&im);
			goto out;
		}
		src = source_from_string(file, im.text);
		if (im.outline)
			outline = xstrdup(im.outline);
		for (int k = 0; k < im.nargs; k++) {
			vec_push(&argmap, xstrdup(im.arg_onnx[k]));
			vec_push(&argmap, xstrdup(im.arg_nest[k]));
		}
		onnx_import_free(&im);
	} else {
		src = source_load(file, err, sizeof err);
	}
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
		/* an ONNX model's -D bound its symbolic dimensions at import: the
		 * Nest it became declares them (or holds the numbers) already */
		CompileOptions co = {.defines = dv, .ndefines = is_onnx ? 0 : defs.n, .no_narrow = no_narrow,
		                     .only_entry = is_run ? run_entry_name(m, ro.entry) : NULL};
		if (consts_from) {
			char why[512];
			co.consts_from = consts_from;
			co.meta = gguf_meta_read(&arena, consts_from, &co.nmeta, (char **)&co.meta_arch, why, sizeof why);
			if (!co.meta)
				error_plain(&d, "--consts-from %s: %s", consts_from, why);
		}
		int syntax_errors = d.nerrors;
		p = compile_module(&arena, &d, m, &co);
		free(dv);
		if (syntax_errors)
			p = NULL;
	}
	if (p && !d.nerrors)
		wformat_assign(p, &d, &wfs);
	if (p && dump && !strcmp(dump, "ir"))
		ir_dump(stdout, p);
	/* the region pass runs for every command but run, which ignores regions */
	RegionTable *rt = NULL;
	if (p && !d.nerrors && is_report && bo.target) {
		/* the fingerprints of a cross build: its triple must be one LLVM builds for */
		char why[512];
		if (!target_known(bo.target, why, sizeof why))
			error_plain(&d, "%s", why);
	}
	if (p && !d.nerrors && !is_weights) { /* run too: it checks as check does */
		char *triple = bo.target ? NULL : host_id();
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
		if (is_onnx && fmt == REPORT_TEXT && !report_file)
			printf("repeated layers found in %s:%s\n%s\n", file, outline ? "" : " none (or --no-outline)",
			       outline ? outline : "");
		rc = write_report(rt, fmt, model, report_file);
	} else if (is_weights && ends_with(bo.out, ".gguf")) {
		rc = write_gguf_weights(p, &d, model, ro.seed, ro.weights, bo.out, bo.progress);
	} else if (is_weights) {
		rc = write_random_weights(p, &d, ro.seed, bo.out, bo.progress);
	} else if (is_plan) {
		bo.name = bo.name ? bo.name : model;
		rc = print_plan(p, rt, &bo, argv[0], file, &passthru);
	} else if (is_build) {
		size_t ol = strlen(bo.out);
		bo.archive = ol > 2 && !strcmp(bo.out + ol - 2, ".a");
		bo.shared = ol > 3 && !strcmp(bo.out + ol - 3, ".so");
		bo.name = bo.name ? bo.name : model;
		char *def = NULL;
		if (!no_cache)
			bo.cache_dir = cache_dir ? cache_dir : (def = default_cache_dir());
		if (bo.only && bo.shared) {
			error_plain(&d, "-o %s: a shared library is linked from every object; --only-variant writes to a directory", bo.out);
			rc = 1;
		} else if (bo.only && !bo.archive) {
			int known = !strcmp(bo.only, "model") || (bo.embed && !strcmp(bo.only, "weights"));
			for (int k = 0; k < rt->variants.n && !known; k++) {
				Variant *vv = rt->variants.v[k];
				char id[300];
				snprintf(id, sizeof id, "%s.%d", vv->region, vv->k);
				known = !strcmp(id, bo.only);
			}
			if (!known) {
				error_plain(&d, "--only-variant %s: no such variant (see nestc report; 'model' is the model object)", bo.only);
				rc = 1;
			}
		}
		if (rc != 1 && bo.embed && wformat_mask(p)) {
			error_plain(&d, "--embed-weights: weights in a format (--weights-format) are not embedded yet; "
			                "link the model and open the weights file at run time");
			rc = 1;
		}
		if (rc != 1 && bo.archive && bo.emit != EMIT_OBJ) {
			error_plain(&d, "-o %s: an archive holds objects; --emit=asm and --emit=llvm write to a directory", bo.out);
			rc = 1;
		} else if (rc != 1 && bo.shared && bo.emit != EMIT_OBJ) {
			error_plain(&d, "-o %s: a shared library is linked from objects; --emit=asm and --emit=llvm write to a directory", bo.out);
			rc = 1;
		} else if (rc != 1 && bo.shared && bo.target) {
			error_plain(&d, "-o %s: a shared library is linked by the host's C compiler; with --target, write objects "
			                "(-o DIR) or an archive (-o FILE.a) and link them with that target's tools", bo.out);
			rc = 1;
		} else if (rc != 1 && dep_print) {
			rc = write_depfile(p, rt, &bo, file, dep_mf, dep_mf == NULL);
		} else if (rc != 1) {
			rc = build_model(p, rt, &d, &bo);
			if (rc == 0 && dep_md)
				rc = write_depfile(p, rt, &bo, file, dep_mf, 0);
			if (rc == 0 && want_report)
				rc = write_report(rt, fmt, bo.name, report_file);
		}
		free(def);
	} else if (is_run) {
		ro.ninputs = ins.n;
		ro.input_names = xcalloc((size_t)ins.n + 1, sizeof(char *));
		ro.input_paths = xcalloc((size_t)ins.n + 1, sizeof(char *));
		for (int k = 0; k < ins.n; k++) {
			const char *s = ins.v[k];
			const char *eq = strchr(s, '=');
			ro.input_names[k] = arena_strndup(&arena, s, (size_t)(eq - s));
			ro.input_paths[k] = eq + 1;
			/* an ONNX graph input's own name for the argument it became */
			/* one renaming: x.1's argument may be x_1, another input's name */
			for (int j = 0; j + 1 < argmap.n; j += 2)
				if (!strcmp(argmap.v[j], ro.input_names[k])) {
					ro.input_names[k] = argmap.v[j + 1];
					break;
				}
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
	counted = 1;
	if (!d.nerrors && rc == 1)
		fprintf(stderr, "1 error generated.\n"); /* one the run stopped at (an index out of range) */
	free(model);
	diag_free(&d);
	arena_free(&arena);
	source_free(src);
out:
	if (!counted && rc == 1)
		fprintf(stderr, "1 error generated.\n"); /* one error that stopped nestc early */
	for (int k = 0; k < passthru.n; k++)
		if (((char *)passthru.v[k])[0] == '-' && ((char *)passthru.v[k])[1] != 'O' && strcmp(passthru.v[k], "--no-regions") &&
		    strcmp(passthru.v[k], "--no-winograd") && strcmp(passthru.v[k], "--no-narrow"))
			free(passthru.v[k]);
	free(passthru.v);
	wformat_spec_free(&wfs);
	free(freezes.v);
	free(outline);
	if (tmp_weights) {
		unlink(tmp_weights);
		free(tmp_weights);
	}
	free(defs.v);
	free(ins.v);
	free(outs.v);
	for (int k = 0; k < argmap.n; k++)
		free(argmap.v[k]);
	free(argmap.v);
	return rc;
}

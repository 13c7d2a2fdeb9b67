#!/bin/sh
# Run every test suite against the binaries in build directory $1 and print one
# total line. Each suite prints "N passed, N failed" as its last line.
B=${1:-build}
# A verdict must not depend on how the suite was invoked: make -s, -j2 or -k
# reach the makes a test runs through these.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEFILES MAKEOVERRIDES GNUMAKEFLAGS
PY=${PYTHON:-/usr/bin/python3}
NESTC=$B/nestc
total_pass=0
total_fail=0
failed_suites=""
log=$(mktemp)
trap 'rm -f "$log"' EXIT INT TERM

suite() {
	name=$1
	shift
	printf '== %s\n' "$name"
	"$@" >"$log" 2>&1
	status=$?
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -z "$last" ]; then
		cat "$log"
		echo "suite $name printed no result line (exit $status)"
		total_fail=$((total_fail + 1))
		failed_suites="$failed_suites $name"
		return
	fi
	p=$(echo "$last" | sed -E 's/^([0-9]+) passed.*/\1/')
	f=$(echo "$last" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
	if [ "$status" -ne 0 ] || [ "$f" -ne 0 ]; then
		grep -v '^ok ' "$log"
		[ "$f" -eq 0 ] && f=1
		failed_suites="$failed_suites $name"
	fi
	echo "   $last"
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
}

# Phases call each other in one direction: no loop between the compiler's
# objects, nor between the runtime's.
layers() {
	pass=0
	fail=0
	for set in compiler runtime; do
		# the Makefile passes the objects it links; a stale object in $B would
		# otherwise count
		if [ $set = runtime ]; then
			objs=${NESTRT_OBJS:-$(ls "$B"/rt_*.o)}
		else
			objs=${NESTC_OBJS:-$(ls "$B"/*.o | grep -v '/rt_[^/]*$')}
		fi
		# shellcheck disable=SC2086
		if sh tests/layers.sh $objs; then
			echo "ok layers.$set"
			pass=$((pass + 1))
		else
			echo "FAIL layers.$set"
			fail=$((fail + 1))
		fi
	done
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}

suite layers layers
suite unit-io "$B/test_io"
suite io-corpus sh tests/io/run_corpus.sh "$B/test_io"
suite unit-interp "$B/test_interp"
suite unit-runtime "$B/test_runtime"
suite quant "$PY" tests/io/quant.py "$NESTC"
suite gguf-write "$PY" tests/io/gguf_write.py "$NESTC"
suite gguf-llama "$PY" tests/io/gguf_llama.py "$NESTC"
suite threads "$PY" tests/runtime/run_threads.py "$NESTC"
suite dump "$PY" tests/dump/run.py "$NESTC"
suite diagnostics "$PY" tests/diag/run.py "$NESTC"
suite cli "$PY" tests/cli/run.py "$NESTC"
suite builtins "$PY" tests/builtins/run.py "$NESTC"
suite models "$PY" tests/models/run.py "$NESTC"
suite nets "$PY" tests/nets/run.py "$NESTC"
suite compiled "$PY" tests/compiled/run.py "$NESTC"
suite incremental "$PY" tests/incremental/run.py "$NESTC"
suite generate "$PY" tests/generate/run.py "$NESTC"
suite generate-prompt "$PY" tests/generate/prompt.py "$NESTC"
suite formats "$PY" tests/formats/run.py "$NESTC"
suite tokenize "$PY" tests/tokenize/run.py "$NESTC"
suite diff-nest "$PY" tests/diff/nest_diff.py "$NESTC"
suite diff-onnx "$PY" tests/diff/onnx_diff.py "$NESTC"
suite fuzz "$PY" tests/fuzz/run.py "$NESTC"
suite onnx "$PY" tests/onnx/run.py "$NESTC" --check
suite man sh tests/man/lint.sh
suite mutate-notes "$PY" tests/mutate.py --check-notes

echo
[ -n "$failed_suites" ] && echo "failing suites:$failed_suites"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

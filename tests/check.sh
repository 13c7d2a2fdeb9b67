#!/bin/sh
# Run every test suite against the binaries in build directory $1 and print one
# total line. Each suite prints "N passed, N failed" as its last line.
#
# The suites run in two lanes side by side, so that make check takes under ten
# minutes on two cores (one after another it took 16); the lanes are balanced
# by the suites' times, and the suites that share out their own cases over
# threads (onnx, compiled) are one in each. CHECK_LANES=1 runs them one after
# another. A suite's line is printed when it ends; the output of the suites
# that failed, and the totals, at the end in the order below.
B=${1:-build}
# A verdict must not depend on how the suite was invoked: make -s, -j2 or -k
# reach the makes a test runs through these.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEFILES MAKEOVERRIDES GNUMAKEFLAGS
PY=${PYTHON:-/usr/bin/python3}
NESTC=$B/nestc
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# One suite: its output in $dir/NAME.log, its verdict ("passed failed bad") in
# $dir/NAME.res, one line on stdout.
suite() {
	name=$1
	shift
	t0=$(date +%s)
	"$@" >"$dir/$name.log" 2>&1
	status=$?
	t1=$(date +%s)
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$dir/$name.log" | tail -n 1)
	if [ -z "$last" ]; then
		p=0 f=1 bad=1
		last="printed no result line (exit $status)"
	else
		p=$(echo "$last" | sed -E 's/^([0-9]+) passed.*/\1/')
		f=$(echo "$last" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
		bad=0
		if [ "$status" -ne 0 ] || [ "$f" -ne 0 ]; then
			bad=1
			[ "$f" -eq 0 ] && f=1
		fi
	fi
	echo "$p $f $bad" >"$dir/$name.res"
	printf '== %-16s %s (%d s)\n' "$name" "$last" $((t1 - t0))
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

# the order of the report at the end
SUITES="layers unit-io io-corpus unit-interp unit-runtime quant gguf-write gguf-llama threads dump diagnostics
cli builtins models nets compiled incremental generate generate-prompt formats tokenize diff-nest diff-onnx fuzz
onnx api cmake man mutate-notes"

# about 340 s each on two cores
lane1() {
	suite onnx "$PY" tests/onnx/run.py "$NESTC" --check
	suite generate "$PY" tests/generate/run.py "$NESTC"
	suite tokenize "$PY" tests/tokenize/run.py "$NESTC"
	suite diff-onnx "$PY" tests/diff/onnx_diff.py "$NESTC"
	suite generate-prompt "$PY" tests/generate/prompt.py "$NESTC"
	suite unit-io "$B/test_io"
	suite io-corpus sh tests/io/run_corpus.sh "$B/test_io"
	suite unit-interp "$B/test_interp"
	suite quant "$PY" tests/io/quant.py "$NESTC"
	suite gguf-write "$PY" tests/io/gguf_write.py "$NESTC"
	suite diff-nest "$PY" tests/diff/nest_diff.py "$NESTC"
	suite dump "$PY" tests/dump/run.py "$NESTC"
	suite diagnostics "$PY" tests/diag/run.py "$NESTC"
	suite man sh tests/man/lint.sh
	suite mutate-notes "$PY" tests/mutate.py --check-notes
}

lane2() {
	suite formats "$PY" tests/formats/run.py "$NESTC"
	suite compiled "$PY" tests/compiled/run.py "$NESTC"
	suite gguf-llama "$PY" tests/io/gguf_llama.py "$NESTC"
	suite incremental "$PY" tests/incremental/run.py "$NESTC"
	suite threads "$PY" tests/runtime/run_threads.py "$NESTC"
	suite fuzz "$PY" tests/fuzz/run.py "$NESTC"
	suite layers layers
	suite unit-runtime "$B/test_runtime"
	suite cli "$PY" tests/cli/run.py "$NESTC"
	suite api "$PY" tests/api/run.py "$NESTC"
	suite cmake "$PY" tests/cmake/run.py "$NESTC"
	suite builtins "$PY" tests/builtins/run.py "$NESTC"
	suite models "$PY" tests/models/run.py "$NESTC"
	suite nets "$PY" tests/nets/run.py "$NESTC"
}

if [ "${CHECK_LANES:-2}" = 1 ]; then
	lane1
	lane2
else
	lane1 &
	l1=$!
	lane2 &
	l2=$!
	wait "$l1"
	wait "$l2"
fi

total_pass=0
total_fail=0
failed_suites=""
for name in $SUITES; do
	if [ ! -f "$dir/$name.res" ]; then
		echo "suite $name did not run"
		total_fail=$((total_fail + 1))
		failed_suites="$failed_suites $name"
		continue
	fi
	read -r p f bad <"$dir/$name.res"
	if [ "$bad" -ne 0 ]; then
		echo
		echo "-- $name:"
		if grep -qE '^[0-9]+ passed, [0-9]+ failed' "$dir/$name.log"; then
			grep -v '^ok ' "$dir/$name.log"
		else
			cat "$dir/$name.log"
		fi
		failed_suites="$failed_suites $name"
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
done

echo
[ -n "$failed_suites" ] && echo "failing suites:$failed_suites"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

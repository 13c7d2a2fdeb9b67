#!/bin/sh
# Run the libFuzzer targets of tests/fuzz/ one after another, SECONDS each.
#
#   sh tests/fuzz/libfuzzer.sh BUILD_DIR SECONDS [TARGET...]
#
# TARGETs are fuzz_frontend, fuzz_safetensors, fuzz_npy, fuzz_onnx, fuzz_gguf and fuzz_tokenize (all by
# default), built by `make fuzz` into BUILD_DIR. Each target fuzzes a corpus
# of its own, BUILD_DIR/corpus/TARGET (kept between runs, so it grows), seeded
# from tests/fuzz/corpus/KIND and, for the front end, from every .nest file of
# samples/ and tests/; its dictionary is tests/fuzz/KIND.dict if there is one
# (nest.dict for the front end). Inputs are at most 256 KB; an input running over
# FUZZ_TIMEOUT seconds (default 20) or FUZZ_RSS_MB of memory (default 2048)
# is a finding too, as is a leak. A finding is kept in BUILD_DIR/findings/
# (crash-*, leak-*, timeout-*, oom-*), with the log in BUILD_DIR/logs/.
# Prints one line per target with its exec count; exit status 1 on a finding.
set -u

if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD_DIR SECONDS [TARGET...]" >&2
	exit 2
fi
B=$1
secs=$2
shift 2
[ $# -eq 0 ] && set -- fuzz_frontend fuzz_safetensors fuzz_npy fuzz_onnx fuzz_gguf fuzz_tokenize
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
timeout=${FUZZ_TIMEOUT:-20}
# FUZZ_RUNS=N (with FUZZ_SEED, default 1): at most N inputs from a fixed seed, so
# that a smoke run (make check-asan) tries the same inputs every time: a
# regression test of the seeds and of N mutations, not a search that may fail
# CI by chance. Without it, a run is a search for FUZZ_SECONDS.
det=
[ -n "${FUZZ_RUNS:-}" ] && det="-runs=$FUZZ_RUNS -seed=${FUZZ_SEED:-1}"
rss=${FUZZ_RSS_MB:-2048}

# Sanitizer reports end the run with a non-zero status and an artifact.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS

mkdir -p "$B/findings" "$B/logs" || exit 2
found=0
for t in "$@"; do
	bin=$B/$t
	if [ ! -x "$bin" ]; then
		echo "$t: $bin is missing (make fuzz builds it)"
		found=1
		continue
	fi
	kind=${t#fuzz_}
	corpus=$B/corpus/$t
	mkdir -p "$corpus"
	seeddirs=$here/corpus/$kind
	extra=
	[ -f "$here/$kind.dict" ] && extra=-dict=$here/$kind.dict
	if [ "$kind" = frontend ]; then
		seeds=$B/seeds/frontend
		rm -rf "$seeds" && mkdir -p "$seeds"
		find "$root/samples" "$root/tests" -name '*.nest' -type f | while read -r f; do
			cp "$f" "$seeds/$(echo "${f#"$root"/}" | tr / _)"
		done
		seeddirs="$seeddirs $seeds"
		extra=-dict=$here/nest.dict
	fi
	log=$B/logs/$t.log
	before=$(ls "$B/findings" | wc -l)
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$secs" -max_len=262144 -timeout="$timeout" -rss_limit_mb="$rss" \
		-detect_leaks=1 -print_final_stats=1 -artifact_prefix="$B/findings/$t-" $extra $det \
		"$corpus" $seeddirs >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	size=$(ls "$corpus" | wc -l)
	after=$(ls "$B/findings" | wc -l)
	if [ $rc -ne 0 ] || [ "$after" -ne "$before" ]; then
		found=1
		echo "$t: FOUND something after ${execs:-?} execs (exit status $rc); log $log:"
		{
			grep -E -m 1 -A 8 'ERROR: |runtime error:|broken promise|internal compiler error' "$log"
			grep -E '^SUMMARY: ' "$log"
		} | sed 's/^/    /'
		ls -t "$B/findings" | head -n $((after - before > 0 ? after - before : 1)) | sed "s|^|    kept: $B/findings/|"
	else
		echo "$t: ${execs:-?} execs in $secs s, corpus $size inputs, nothing found"
	fi
done
exit $found

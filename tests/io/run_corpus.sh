#!/bin/sh
# Feed the malformed-file corpus to a test_io binary.
#
#   tests/io/run_corpus.sh TEST_IO_BINARY [CORPUS_DIR]
#
# Generates the corpus with make_corpus.py (into CORPUS_DIR, or a temporary
# directory removed afterwards), then runs `TEST_IO_BINARY --open-weights F` for
# each .safetensors file and `--read-npy F` for each .npy file. bad-* files must
# exit 1 with a one-line reason naming the file; good-* files must exit 0 with
# "OK". A signal, another exit status or any sanitizer report fails the file.
# Each .npy file is also read from a pipe (/dev/stdin), which has no size.
# Builds nothing. Last line: "N passed, M failed"; exit status 1 on any failure.
set -u

PYTHON=${PYTHON:-/usr/bin/python3}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 TEST_IO_BINARY [CORPUS_DIR]" >&2
	exit 2
fi
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -eq 2 ]; then
	dir=$2
	cleanup=
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/nestc-corpus.XXXXXX") || exit 2
	cleanup=$dir
fi
out=$(mktemp "${TMPDIR:-/tmp}/nestc-corpus-out.XXXXXX") || exit 2
trap 'rm -f "$out"; [ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT
trap 'exit 2' HUP INT TERM

"$PYTHON" "$here/make_corpus.py" "$dir" || { echo "make_corpus.py failed" >&2; exit 2; }

# Sanitizers must turn every finding into a failure we can see.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=99}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=99}
export ASAN_OPTIONS UBSAN_OPTIONS

pass=0
fail=0
# check NAME SHOWN_PATH < OUTPUT: judge one run whose status is in $rc.
check() {
	why=
	if grep -q -e 'Sanitizer' -e 'runtime error' "$out"; then
		why="sanitizer report"
	elif [ $rc -gt 128 ]; then
		why="killed by signal $((rc - 128))"
	else
		case $1 in
		bad-*)
			if [ $rc -ne 1 ]; then
				why="exit status $rc, expected 1"
			elif [ "$(wc -l <"$out")" -ne 1 ] || ! grep -q -F "$2: " "$out"; then
				why="expected one line '$2: REASON'"
			fi
			;;
		good-*)
			if [ $rc -ne 0 ]; then
				why="exit status $rc, expected 0"
			elif ! grep -q '^OK' "$out"; then
				why="no OK line"
			fi
			;;
		*) why="file name is neither bad-* nor good-*" ;;
		esac
	fi
	if [ -n "$why" ]; then
		fail=$((fail + 1))
		echo "FAIL: $1${3:-}: $why" >&2
		sed 's/^/    /' "$out" >&2
	else
		pass=$((pass + 1))
		if [ -n "${VERBOSE:-}" ]; then
			printf '%s%s: ' "$1" "${3:-}"
			cat "$out"
		fi
	fi
}

for f in "$dir"/*.safetensors "$dir"/*.npy; do
	[ -e "$f" ] || continue
	name=$(basename "$f")
	case $name in
	*.safetensors)
		"$bin" --open-weights "$f" >"$out" 2>&1
		rc=$?
		check "$name" "$f"
		;;
	*)
		"$bin" --read-npy "$f" >"$out" 2>&1
		rc=$?
		check "$name" "$f"
		# Again through a pipe: no file size to check against up front.
		cat "$f" | "$bin" --read-npy /dev/stdin >"$out" 2>&1
		rc=$?
		check "$name" /dev/stdin " (pipe)"
		;;
	esac
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

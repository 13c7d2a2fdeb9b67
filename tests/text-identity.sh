#!/bin/sh
# Print a SHA-256 of the .text section of every object that `nestc build` writes for
# each sample (at the sizes bench-compile and the README use, without the cache), one
# line an object. Run it before and after a change that must not alter generated code
# and compare the two outputs: any line that differs is a change in the code.
#   sh tests/text-identity.sh build/nestc > before.txt
set -e
NESTC=${1:-build/nestc}
TARGETS=${TARGETS:-"x86_64-linux-gnu:skylake-avx512 x86_64-linux-gnu:haswell x86_64-linux-gnu:x86-64 aarch64-linux-gnu:generic"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
build() {
	name=$1
	shift
	for t in $TARGETS; do
		triple=${t%%:*}
		cpu=${t#*:}
		out=$tmp/$name-$cpu
		"$NESTC" build --no-cache -j 2 --target="$triple" --cpu="$cpu" "$@" -o "$out"
		for o in "$out"/*.o; do
			objcopy -O binary --only-section=.text "$o" "$tmp/text" 2>/dev/null ||
				llvm-objcopy -O binary --only-section=.text "$o" "$tmp/text"
			printf '%s %s/%s %s\n' "$(sha256sum < "$tmp/text" | cut -c1-16)" "$name-$cpu" "$(basename "$o")" \
				"$(wc -c < "$tmp/text" | tr -d ' ')"
		done
	done
}
build gpt2 samples/gpt2.nest -D L=2 -D D=64 -D H=4 -D V=256 -D CTX=64 -D S=16
build gpt2-small samples/gpt2.nest -D L=2
build llama samples/llama.nest -D L=2 -D D=256 -D H=8 -D KVH=4 -D F=512 -D V=512 -D S=32
build mlp samples/mlp.nest
build resnet samples/resnet.nest -D IMG=64

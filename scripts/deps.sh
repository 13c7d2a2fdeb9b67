#!/bin/sh
# Install the build and test dependencies of nestc that are missing, with apt-get.
# Does nothing (and needs no network) when everything is already there.
set -eu
# protobuf-c reads ONNX files: protoc-c compiles Debian's onnx.proto (libonnx-dev)
# at build time (src/onnx/). libonnx-testdata holds ONNX's backend node tests,
# python3-onnx reads their TensorProto files in tests/onnx/run.py. cmake (and
# ninja-build) build the CMake test project of tests/cmake/run.py.
need="flex bison libjansson-dev libxxhash-dev llvm-dev pkg-config make gcc python3-numpy mandoc ninja-build cmake clang libclang-rt-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx"
missing=""
for p in $need; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0
echo "deps.sh: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null

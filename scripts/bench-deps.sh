#!/bin/sh
# Install the peer runtimes of `make bench` that are missing (not needed to build or test):
#   Debian: python3-numpy, python3-torch (PyTorch, CPU), python3-onnx, libopenblas-dev
#   npm:    onnxruntime-node, into bench/.node (ignored by git), with --ignore-scripts
#           (its install script would download GPU binaries; the CPU ones ship in the package);
#           node-llama-cpp (llama.cpp, release v0.4.0 in 3.21.1), pinned exactly, into the same
#           place, with --ignore-scripts (nothing is built: its prebuilt CPU libraries come in
#           @node-llama-cpp/linux-x64, one of its optional dependencies). A benchmark and
#           reference peer only: bench/llamacpp_tokenize.mjs prints its token ids (make
#           tokenize-expected stores them for make check, which needs no node).
# Does nothing (and needs no network) when everything is already there. A peer that
# cannot be installed is reported ("bench-deps: unavailable: ...") and skipped: this
# script always exits 0 so that the benchmark runs with the peers it has.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ORT_VERSION=${ORT_VERSION:-1.30.0}
LLAMACPP_VERSION=${LLAMACPP_VERSION:-3.21.1}
NODE_DIR="$ROOT/bench/.node"

if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
updated=0

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

apt_install() {   # apt_install PKG...: installs what is missing; 1 on failure
	missing=""
	for p in "$@"; do
		installed "$p" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "bench-deps: installing (apt):$missing" >&2
	if [ "$updated" = 0 ]; then
		$SUDO apt-get update -qq >/dev/null 2>&1 || true
		updated=1
	fi
	log=$(mktemp)
	# shellcheck disable=SC2086
	if ! $SUDO apt-get install -y -qq --no-install-recommends $missing >"$log" 2>&1; then
		tail -n 5 "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

# Each peer separately, so that one that fails leaves the others installed.
apt_install python3-numpy || echo "bench-deps: unavailable: python3-numpy (apt-get install failed)" >&2
apt_install libopenblas-dev || echo "bench-deps: unavailable: libopenblas-dev (apt-get install failed)" >&2
apt_install python3-torch || echo "bench-deps: unavailable: python3-torch (apt-get install failed)" >&2
apt_install python3-onnx || echo "bench-deps: unavailable: python3-onnx (apt-get install failed)" >&2

# ONNX Runtime for Node.js.
ort_ok() {
	[ -f "$NODE_DIR/node_modules/onnxruntime-node/package.json" ] &&
		(cd "$NODE_DIR" && node -e "require('onnxruntime-node')" >/dev/null 2>&1)
}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	apt_install nodejs npm || true
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "bench-deps: unavailable: onnxruntime-node (no node/npm)" >&2
elif ! ort_ok; then
	echo "bench-deps: installing (npm): onnxruntime-node@$ORT_VERSION into bench/.node" >&2
	mkdir -p "$NODE_DIR"
	[ -f "$NODE_DIR/package.json" ] || echo '{ "name": "nestc-bench-peers", "private": true }' > "$NODE_DIR/package.json"
	if ! (cd "$NODE_DIR" && npm install --ignore-scripts --save-exact --no-audit --no-fund --loglevel=error \
		"onnxruntime-node@$ORT_VERSION" >/dev/null); then
		echo "bench-deps: unavailable: onnxruntime-node (npm install failed)" >&2
	elif ! ort_ok; then
		echo "bench-deps: unavailable: onnxruntime-node (installed but does not load in node $(node --version))" >&2
	fi
fi

# llama.cpp for Node.js: loads when its package resolves at the pinned version.
llamacpp_ok() {
	[ -f "$NODE_DIR/node_modules/node-llama-cpp/package.json" ] &&
		(cd "$NODE_DIR" && node -e "
			const v = require('./node_modules/node-llama-cpp/package.json').version;
			if (v !== '$LLAMACPP_VERSION') process.exit(1);
			import('node-llama-cpp').then(() => process.exit(0), () => process.exit(1));" >/dev/null 2>&1)
}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "bench-deps: unavailable: node-llama-cpp (no node/npm)" >&2
elif ! llamacpp_ok; then
	echo "bench-deps: installing (npm): node-llama-cpp@$LLAMACPP_VERSION into bench/.node" >&2
	mkdir -p "$NODE_DIR"
	[ -f "$NODE_DIR/package.json" ] || echo '{ "name": "nestc-bench-peers", "private": true }' > "$NODE_DIR/package.json"
	if ! (cd "$NODE_DIR" && npm install --ignore-scripts --save-exact --no-audit --no-fund --loglevel=error \
		"node-llama-cpp@$LLAMACPP_VERSION" >/dev/null); then
		echo "bench-deps: unavailable: node-llama-cpp (npm install failed)" >&2
	elif ! llamacpp_ok; then
		echo "bench-deps: unavailable: node-llama-cpp (installed but does not load in node $(node --version))" >&2
	fi
fi
exit 0

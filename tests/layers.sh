#!/bin/sh
# Layering check: for the object files given, print every pair that reference each
# other (each uses a symbol the other defines, by nm's defined and undefined
# symbols), with the symbols of each direction, and exit 1 if there is one.
#   sh tests/layers.sh build/*.o
# Files of one program should call each other in one direction only: a phase
# below never calls a phase above.
set -e
if [ $# -lt 2 ]; then
	echo "usage: sh tests/layers.sh OBJECT..." >&2
	exit 2
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT INT TERM
# one line a symbol: OBJECT D|U NAME (D: defined with external linkage)
for o in "$@"; do
	nm "$o" | awk -v o="$(basename "$o")" '
		NF == 2 && $1 == "U" { print o, "U", $2 }
		NF == 3 && $2 ~ /^[A-TV-Z]$/ { print o, "D", $3 }'
done > "$tmp"
awk '
	$2 == "D" { def[$3] = $1 }
	$2 == "U" { use[NR] = $1 " " $3 }
	END {
		for (k in use) {
			split(use[k], f, " ")
			d = def[f[2]]
			if (d == "" || d == f[1])
				continue
			e = f[1] SUBSEP d
			if (!(e in syms))
				syms[e] = f[2]
			else if (index(" " syms[e] " ", " " f[2] " ") == 0)
				syms[e] = syms[e] " " f[2]
		}
		n = 0
		for (e in syms) {
			split(e, p, SUBSEP)
			r = p[2] SUBSEP p[1]
			if (p[1] < p[2] && (r in syms)) {
				printf "%s <-> %s\n  %s uses %s\n  %s uses %s\n", p[1], p[2], p[1], syms[e], p[2], syms[r]
				n++
			}
		}
		if (n)
			printf "%d pair%s of objects reference each other\n", n, n == 1 ? "" : "s"
		else
			print "no two objects reference each other"
		exit n ? 1 : 0
	}' "$tmp"

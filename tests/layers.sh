#!/bin/sh
# Check that no two object files call each other: for every pair A, B where A
# uses a symbol B defines and B uses one A defines, print the pair and the
# symbols, and exit 1. Dependencies between the files of src/ must go one way.
#   sh tests/layers.sh build/*.o
# Defined symbols are nm's global kinds (T, D, B, R, ...); used ones are U.
if [ $# -lt 2 ]; then
	echo "usage: sh tests/layers.sh FILE.o FILE.o..." >&2
	exit 2
fi
NM=${NM:-nm}
for o in "$@"; do
	"$NM" -g "$o" | awk -v o="$o" 'NF == 2 && $1 == "U" { print "U", o, $2 }
		NF == 3 && $2 ~ /^[A-TV-Z]$/ { print "D", o, $3 }'
done | awk '
	$1 == "D" { def[$3] = $2; next }
	{ use[++n] = $2; sym[n] = $3 }
	END {
		for (i = 1; i <= n; i++) {
			d = def[sym[i]]
			if (d == "" || d == use[i])
				continue
			k = use[i] SUBSEP d
			if (!(k in seen))
				seen[k] = sym[i]
			else if (index(" " seen[k] " ", " " sym[i] " ") == 0)
				seen[k] = seen[k] " " sym[i]
		}
		bad = 0
		for (k in seen) {
			split(k, ab, SUBSEP)
			r = ab[2] SUBSEP ab[1]
			if (ab[1] < ab[2] && (r in seen)) {
				printf "%s <-> %s\n  %s uses %s\n  %s uses %s\n", ab[1], ab[2], ab[1], seen[k], ab[2], seen[r]
				bad = 1
			}
		}
		exit bad
	}'

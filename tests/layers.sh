#!/bin/sh
# Layering check: the files of one program must depend on each other in one
# direction only (a phase below never calls a phase above). For the object
# files given, every use of a symbol that another object defines (nm's U
# against its global kinds T, D, B, R, ...) is an edge; a loop of any length
# is printed with the symbols that make each edge, and the exit status is 1.
#   sh tests/layers.sh build/*.o
if [ $# -lt 2 ]; then
	echo "usage: sh tests/layers.sh OBJECT OBJECT..." >&2
	exit 2
fi
NM=${NM:-nm}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT INT TERM
for o in "$@"; do
	"$NM" -g "$o" | awk -v o="$(basename "$o")" '
		NF == 2 && $1 == "U" { print "U", o, $2 }
		NF == 3 && $2 ~ /^[A-TV-Z]$/ { print "D", o, $3 }'
done > "$tmp" || exit 2
# Definitions first (sorted, D before U), then edges "user -> definer" with
# their symbols, then a depth-first search for a back edge.
sort "$tmp" | awk '
	$1 == "D" { def[$3] = $2; next }
	{
		d = def[$3]
		if (d == "" || d == $2)
			next
		k = $2 SUBSEP d
		if (!(k in syms)) {
			syms[k] = $3
			succ[$2] = succ[$2] " " d
		} else if (length(syms[k]) < 60)
			syms[k] = syms[k] " " $3
		node[$2] = node[d] = 1
	}
	function visit(v,    n, s, i, w, j, cyc) {
		state[v] = 1
		stack[++depth] = v
		n = split(succ[v], s, " ")
		for (i = 1; i <= n; i++) {
			w = s[i]
			if (state[w] == 1 && !found) {
				found = 1
				for (j = depth; j >= 1 && stack[j] != w; j--)
					;
				cyc = ""
				for (; j <= depth; j++) {
					nxt = j < depth ? stack[j + 1] : w
					printf "  %s uses %s of %s\n", stack[j], syms[stack[j] SUBSEP nxt], nxt
					cyc = cyc stack[j] " -> "
				}
				print "loop: " cyc w
			} else if (!state[w])
				visit(w)
		}
		depth--
		state[v] = 2
	}
	END {
		for (v in node)
			if (!state[v] && !found)
				visit(v)
		if (found)
			exit 1
		print "no loop between the objects"
	}'

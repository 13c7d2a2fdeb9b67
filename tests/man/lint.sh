#!/bin/sh
# mandoc -T lint must report nothing above style level for every man page.
pass=0
fail=0
for m in man/*.[0-9]; do
	out=$(mandoc -T lint -W warning "$m" 2>&1)
	if [ -z "$out" ]; then
		echo "ok $m"
		pass=$((pass + 1))
	else
		echo "FAIL $m"
		echo "$out"
		fail=$((fail + 1))
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

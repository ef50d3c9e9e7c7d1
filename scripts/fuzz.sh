#!/usr/bin/env bash
# Runs each fuzz target for FUZZTIME: scripts/fuzz.sh GO FUZZTIME Name:pkg...
#
# A target fails the run when the fuzzer finds an input that fails (it is
# written to <pkg>/testdata/fuzz/<Name>/ and printed here). Go's fuzzing
# coordinator can also end a run with a bare "context deadline exceeded" and
# no failing input: its -fuzztime deadline fires while a worker is still
# minimizing a newly interesting input (seen in CI on FuzzACLFile: execs
# stall at 0/sec for the minimization, then the deadline). That is the
# harness, not a finding: such a target replays its seed and testdata corpus
# and is fuzzed once more; it fails only if the replay fails or the second
# run fails too.
set -u
go=$1 fuzztime=$2
shift 2
# Minimizing a new input may take this long; Go's default is 60s, longer
# than the whole run, which is what leaves a worker busy at the deadline.
minimize=${FUZZMINIMIZETIME:-3s}

run() { # name pkg -> 0 ok, 1 a finding, 2 a harness deadline
	local name=$1 pkg=$2 out dir before after rc
	dir=$pkg/testdata/fuzz/$name
	before=$(ls "$dir" 2>/dev/null | sort)
	echo "$go test -run '^\$' -fuzz '^$name\$' -fuzztime $fuzztime -fuzzminimizetime $minimize $pkg"
	out=$(mktemp)
	"$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	after=$(ls "$dir" 2>/dev/null | sort)
	if [ "$rc" -eq 0 ]; then rm -f "$out"; return 0; fi
	if [ "$before" != "$after" ]; then
		echo "fuzz: $name found a failing input:"
		comm -13 <(echo "$before") <(echo "$after") | while read -r f; do echo "== $dir/$f"; cat "$dir/$f"; done
		rm -f "$out"; return 1
	fi
	if grep -q '^    context deadline exceeded$' "$out"; then rm -f "$out"; return 2; fi
	rm -f "$out"; return 1
}

for t in "$@"; do
	name=${t%%:*} pkg=${t#*:}
	run "$name" "$pkg"; rc=$?
	if [ "$rc" -eq 2 ]; then
		echo "fuzz: $name ended on the fuzzing coordinator's deadline with no failing input; replaying its corpus and fuzzing it once more"
		"$go" test -count=1 -run "^$name\$" "$pkg" || exit 1
		run "$name" "$pkg"; rc=$?
	fi
	[ "$rc" -eq 0 ] || { echo "fuzz: $name FAILED"; exit 1; }
done

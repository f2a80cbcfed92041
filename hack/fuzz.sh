#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time each (`make fuzz`; .ci/run runs it
# after `make test`).
#
#   hack/fuzz.sh                 every target, FUZZTIME each
#   hack/fuzz.sh ./runner/...    the targets of some packages
#
# Environment:
#   FUZZTIME   how long each target fuzzes (go test -fuzztime; default 3s).
#
# A target's seed corpus is its f.Add calls plus testdata/fuzz/<Target>/ beside it; every
# plain `go test` run (make test) replays both. When fuzzing finds a failing input, go test
# writes it to testdata/fuzz/<Target>/ in the package and this script fails naming the
# target: commit that file with the fix, so the input stays in the corpus.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fuzztime=${FUZZTIME:-3s}
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=(./...)

# Fuzz targets, package by package: the Fuzz functions of the test files the go tool
# selects for this platform (so build constraints count), read from the files rather than
# from `go test -list`, which would compile every test binary a second time.
mapfile -t lines < <(go list -f '{{$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$d}}/{{.}}{{end}}' "${patterns[@]}")

out=$(mktemp)
trap 'rm -f "$out"' EXIT
targets=0
raced=0
failed=()
start=$SECONDS
for line in "${lines[@]}"; do
	read -r pkg files <<<"$line"
	[ -n "$files" ] || continue
	# shellcheck disable=SC2086 # files is a list of paths without spaces
	mapfile -t fuzzes < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $files | sort -u)
	for fz in "${fuzzes[@]}"; do
		[ -n "$fz" ] || continue
		targets=$((targets + 1))
		printf '[fuzz] %s %s (%s)\n' "$pkg" "$fz" "$fuzztime" >&2
		# -parallel 2: the CI machine has two cores; more workers only thrash.
		if go test -run '^$' -fuzz "^${fz}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" 2>&1 | tee "$out"; then
			continue
		fi
		# Go's fuzz coordinator can end a duration-bounded run with a bare "context
		# deadline exceeded" and no failing input (golang/go#75804, fixed in Go 1.27):
		# not a finding. Anything else, or any failing input written, is.
		if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
			printf '[fuzz] %s %s: ended by the fuzz coordinator'"'"'s deadline race (golang/go#75804), no failing input: not a finding\n' "$pkg" "$fz" >&2
			raced=$((raced + 1))
			continue
		fi
		failed+=("$pkg $fz")
	done
done

printf '[fuzz] %d targets (%d ended by the deadline race), %ds\n' "$targets" "$raced" "$((SECONDS - start))" >&2
if [ ${#failed[@]} -gt 0 ]; then
	printf '[fuzz] FAILED: %s\n' "${failed[@]}" >&2
	printf '[fuzz] each failing input is in testdata/fuzz/<Target>/ of its package; fix the bug and commit the input\n' >&2
	exit 1
fi
if [ "$targets" -eq 0 ]; then
	echo '[fuzz] no fuzz targets found: the package patterns match nothing fuzzable' >&2
	exit 1
fi

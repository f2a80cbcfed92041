#!/usr/bin/env bash
# Generates prometheus-operator's ServiceMonitor CRD from the Go types of its monitoring API
# module, the way prometheus-operator generates the CRDs it publishes (controller-gen over
# pkg/apis/monitoring/v1). The chart tests install it into the test API server so that the
# chart's opt-in ServiceMonitor is validated against the real schema, not merely parsed.
#
#   hack/servicemonitor-crd.sh CONTROLLER_GEN VERSION OUTPUT_FILE
#
# Needs Go and the Go module proxy; `make servicemonitor-crd` runs it.
set -euo pipefail

if [[ $# -ne 3 ]]; then
	echo "usage: $0 CONTROLLER_GEN VERSION OUTPUT_FILE" >&2
	exit 2
fi
controller_gen=$1
version=$2
out=$3
module=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring

dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [[ -z "$dir" || ! -d "$dir" ]]; then
	echo "$0: go mod download $module@$version gave no module directory" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The module cache is read-only; controller-gen loads the packages from a writable copy.
cp -R "$dir/." "$work/src"
chmod -R u+w "$work/src"
(
	cd "$work/src"
	"$controller_gen" crd:crdVersions=v1,maxDescLen=0 paths=./v1/... output:crd:dir="$work/out"
)
mkdir -p "$(dirname "$out")"
cp "$work/out/monitoring.coreos.com_servicemonitors.yaml" "$out"
echo "wrote $out" >&2

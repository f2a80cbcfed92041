#!/usr/bin/env bash
# Provides the binaries and the sandbox image of a real Kubernetes node for
# this project's Kubernetes release, with nothing pulled from a registry:
#
#   kubelet, kube-scheduler, kube-controller-manager  built by hack/envtest.sh
#                           (AERIE_ENVTEST_EXTRA) into the envtest directory
#   containerd, containerd-shim-runc-v2, ctr        built from the containerd module
#   runc                                             built from its module (cgo, libseccomp)
#   bridge, host-local, loopback                    built from the CNI plugins module
#   pause.tar                                        the sandbox image, an OCI archive of
#                                                    hack/node/pause built statically
#
# runc needs cgo and libseccomp (Debian: `apt-get install gcc libseccomp-dev
# pkg-config`): Debian 12's runc 1.1.5 and crun 1.8.1 cannot run the OCI 1.3
# specs containerd 2.x writes ("can't get final child's PID from pipe",
# "unknown version specified").
#
# Prints exactly one line on stdout: the directory holding the node's own
# binaries and pause.tar. Progress goes to stderr. hack/testenv's StartNode
# and `go run ./hack/node` use it.
#
#   AERIE_NODE_DIR   cache root (default $XDG_CACHE_HOME/aerie/node, i.e.
#                    ~/.cache/aerie/node); binaries land in <root>/<key>/.
#
# Warm: returns at once. Cold: builds containerd, the CNI plugins and runc
# (about 4 minutes on a 2-core machine) and, through hack/envtest.sh, the
# three Kubernetes commands (about 6 minutes).
set -euo pipefail

CONTAINERD_VERSION=v2.4.2
CNI_PLUGINS_VERSION=v1.10.0
RUNC_VERSION=v1.5.3
# The sandbox image's reference; containerd's configuration pins it.
PAUSE_IMAGE=localhost/aerie/pause:1
# Bump when the build steps below change.
RECIPE_REV=1

log() { printf '[node] %s\n' "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

command -v go >/dev/null || die "go is not on PATH"

case "$(uname -m)" in
x86_64 | amd64) ARCH=amd64 ;;
aarch64 | arm64) ARCH=arm64 ;;
*) ARCH=$(go env GOHOSTARCH) ;;
esac
[[ "$(uname -s)" == Linux ]] || die "a node runs on Linux only (this is $(uname -s))"

recipe_hash() {
	{
		printf 'rev=%s containerd=%s cni=%s runc=%s pause=%s arch=%s\n' \
			"$RECIPE_REV" "$CONTAINERD_VERSION" "$CNI_PLUGINS_VERSION" "$RUNC_VERSION" "$PAUSE_IMAGE" "$ARCH"
		cat "$REPO_ROOT/hack/node/pause/main.go"
	} | sha256sum | cut -c1-16
}
CACHE_ROOT=${AERIE_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/aerie/node}
mkdir -p "$CACHE_ROOT"
CACHE_ROOT=$(cd "$CACHE_ROOT" && pwd)
KEY=$(recipe_hash)
OUT="$CACHE_ROOT/$KEY"
BINS=(containerd containerd-shim-runc-v2 ctr runc bridge host-local loopback)

complete() {
	local b
	for b in "${BINS[@]}"; do [[ -x "$OUT/$b" ]] || return 1; done
	[[ -f "$OUT/pause.tar" && -f "$OUT/.complete" ]]
}
# kube_bins: the Kubernetes commands, beside kube-apiserver and etcd.
kube_bins() {
	AERIE_ENVTEST_EXTRA="kubelet kube-scheduler kube-controller-manager" "$REPO_ROOT/hack/envtest.sh" >/dev/null ||
		die "hack/envtest.sh could not provide kubelet, kube-scheduler and kube-controller-manager"
}
if complete; then
	kube_bins
	printf '%s\n' "$OUT"
	exit 0
fi

exec 9>"$CACHE_ROOT/.lock"
flock 9
if complete; then
	kube_bins
	printf '%s\n' "$OUT"
	exit 0
fi
rm -rf "$CACHE_ROOT"/tmp.*
TMP=$(mktemp -d "$CACHE_ROOT/tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOOS=linux GOARCH="$ARCH"

# Scratch module for the containerd and CNI builds, kept for a warm go cache.
BUILD="$CACHE_ROOT/build"
mkdir -p "$BUILD"
cat >"$BUILD/go.mod" <<EOF
module aerie-node-build

go 1.25

require (
	github.com/containerd/containerd/v2 $CONTAINERD_VERSION
	github.com/containernetworking/plugins $CNI_PLUGINS_VERSION
	github.com/opencontainers/runc $RUNC_VERSION
)
EOF
log "building containerd $CONTAINERD_VERSION and CNI plugins $CNI_PLUGINS_VERSION (cold: minutes)"
# btrfs and devmapper snapshotters need cgo; overlayfs is the one used.
(cd "$BUILD" && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
	-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
	-o "$TMP/" \
	github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr \
	github.com/containernetworking/plugins/plugins/main/bridge \
	github.com/containernetworking/plugins/plugins/ipam/host-local \
	github.com/containernetworking/plugins/plugins/main/loopback) >&2 ||
	die "building containerd or the CNI plugins failed (see above)"
"$TMP/containerd" --version >&2 || die "the built containerd does not run"

log "building runc $RUNC_VERSION (cgo, libseccomp)"
command -v gcc >/dev/null && pkg-config --exists libseccomp 2>/dev/null ||
	die "building runc needs gcc, pkg-config and libseccomp's headers (Debian: apt-get install gcc pkg-config libseccomp-dev)"
(cd "$BUILD" && CGO_ENABLED=1 go build -trimpath -tags seccomp \
	-ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$TMP/runc" github.com/opencontainers/runc) >&2 ||
	die "building runc failed (see above)"
"$TMP/runc" --version >&2 || die "the built runc does not run"

log "building the sandbox image $PAUSE_IMAGE"
mkdir -p "$TMP/pause-root"
(cd "$REPO_ROOT" && go build -trimpath -ldflags "-s -w" -o "$TMP/pause-root/pause" ./hack/node/pause) >&2 ||
	die "building hack/node/pause failed"
"$REPO_ROOT/hack/node/oci-archive.sh" "$TMP/pause.tar" "$PAUSE_IMAGE" "$TMP/pause-root" \
	'{"Entrypoint":["/pause"],"User":"65535:65535"}' "$ARCH" ||
	die "packing the sandbox image failed"

for b in "${BINS[@]}" pause.tar; do
	mkdir -p "$OUT"
	mv -f "$TMP/$b" "$OUT/$b"
done
printf 'containerd=%s cni=%s runc=%s pause=%s\n' "$CONTAINERD_VERSION" "$CNI_PLUGINS_VERSION" "$RUNC_VERSION" "$PAUSE_IMAGE" >"$OUT/.complete"
# Older recipes' binaries.
for d in "$CACHE_ROOT"/*/; do
	d=${d%/}
	[[ "$d" == "$OUT" || "$d" == "$BUILD" ]] || rm -rf "$d"
done
exec 9>&-
kube_bins
log "ready: $OUT"
printf '%s\n' "$OUT"

#!/usr/bin/env bash
# Builds aerie's two images from the Dockerfile with buildah, with no
# registry: the base images are made here and given as build arguments.
#
#   runner base      a Debian trixie rootfs made with mmdebstrap, with the
#                    packages the Dockerfile's runner stage installs
#   build base       the runner base with this machine's Go toolchain (GOROOT),
#                    building with this machine's module and build caches
#                    (mounted; GOPROXY=off: what the tree needs is there once
#                    it has been built here)
#   controller base  an empty image with /etc/passwd, /etc/group, /tmp and the
#                    CA bundle, standing in for distroless/static:nonroot
#
# Writes docker archives for `ctr images import` and prints their directory:
#   <dir>/aerie-runner.tar      localhost/aerie/aerie-runner:dev
#   <dir>/aerie-controller.tar  localhost/aerie/aerie-controller:dev
#
# Needs root, buildah and mmdebstrap (Debian: apt-get install buildah
# mmdebstrap) and a reachable Debian mirror and Go module proxy (the runner
# stage's apt-get, the build stage's go mod download).
#
#   AERIE_IMAGES_DIR  cache root (default ~/.cache/aerie/images). The base
#                     rootfs is kept there; delete it to remake it.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=trixie
# What the Dockerfile's runner stage installs.
PACKAGES=ca-certificates,curl,diffutils,git,jq,less,make,openssh-client,patch,procps,unzip,xz-utils
RUNNER_IMG=localhost/aerie/aerie-runner:dev
CONTROLLER_IMG=localhost/aerie/aerie-controller:dev

log() { printf '[images] %s\n' "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}
for tool in buildah mmdebstrap go; do
	command -v "$tool" >/dev/null || die "$tool is not on PATH (Debian: apt-get install buildah mmdebstrap)"
done
[[ $(id -u) == 0 ]] || die "building images with buildah here needs root"

ROOT=${AERIE_IMAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/aerie/images}
mkdir -p "$ROOT"
ROOT=$(cd "$ROOT" && pwd)
exec 9>"$ROOT/.lock"
flock 9

base_tar="$ROOT/runner-base-$SUITE.tar"
if [[ ! -f "$base_tar" || ! -s "$base_tar" ]]; then
	rm -rf "$base_tar" "$base_tar.tmp"
	log "making the $SUITE rootfs with mmdebstrap (cold: a few minutes)"
	# --format: mmdebstrap infers it from the name otherwise, and .tmp is a directory.
	mmdebstrap --variant=minbase --format=tar --include="$PACKAGES" "$SUITE" "$base_tar.tmp" >&2 ||
		die "mmdebstrap $SUITE failed (is the Debian mirror reachable?)"
	mv -f "$base_tar.tmp" "$base_tar"
fi

# image_exists NAME
image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# from_tar NAME TAR: an image of one layer, the rootfs in TAR.
from_tar() {
	local c
	c=$(buildah from scratch)
	buildah add "$c" "$1" / >/dev/null
	buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
	buildah commit --rm "$c" "$2" >/dev/null
}

key=$(sha256sum "$base_tar" | cut -c1-12)
RUNNER_BASE=localhost/aerie/runner-base:$key
if ! image_exists "$RUNNER_BASE"; then
	log "importing the rootfs as $RUNNER_BASE"
	from_tar "$base_tar" "$RUNNER_BASE"
fi

go_version=$(go env GOVERSION)
BUILD_BASE=localhost/aerie/build-base:$key-$go_version-1
if ! image_exists "$BUILD_BASE"; then
	log "making $BUILD_BASE with this machine's $go_version"
	c=$(buildah from "$RUNNER_BASE")
	buildah copy "$c" "$(go env GOROOT)" /usr/local/go >/dev/null
	buildah config --env GOPATH=/go --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env GOMODCACHE=/host/gomodcache --env GOCACHE=/host/gocache --env GOPROXY=off --env GOFLAGS=-mod=readonly "$c"
	buildah commit --rm "$c" "$BUILD_BASE" >/dev/null
fi

CONTROLLER_BASE=localhost/aerie/static-base:1
if ! image_exists "$CONTROLLER_BASE"; then
	log "making $CONTROLLER_BASE"
	work=$(mktemp -d)
	mkdir -p "$work/etc/ssl/certs" "$work/tmp" "$work/home/nonroot"
	chmod 1777 "$work/tmp"
	chown 65532:65532 "$work/home/nonroot"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$work/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$work/etc/group"
	cp /etc/ssl/certs/ca-certificates.crt "$work/etc/ssl/certs/"
	tar -C "$work" -cf "$work.tar" .
	from_tar "$work.tar" "$CONTROLLER_BASE"
	rm -rf "$work" "$work.tar"
fi

# The build stage runs `go mod download` with GOPROXY=off on this machine's
# module cache: fill it first, for every module go.mod lists, not only those
# this machine has built.
log "downloading the modules go.mod lists into this machine's module cache"
(cd "$REPO_ROOT" && go mod download) >&2 || die "go mod download failed (is the Go module proxy reachable?)"

version=$(git -C "$REPO_ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)
commit=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
OUT="$ROOT/out"
mkdir -p "$OUT"
for target in runner controller; do
	img=$RUNNER_IMG
	[[ $target == controller ]] && img=$CONTROLLER_IMG
	log "building $img (Dockerfile target $target)"
	# chroot isolation and the host's network: no runtime or CNI of buildah's
	# own is needed, and apt-get and go reach the mirror and the proxy.
	buildah bud --isolation chroot --network host --layers \
		--build-arg BUILD_IMAGE="$BUILD_BASE" --build-arg RUNNER_BASE="$RUNNER_BASE" \
		--build-arg CONTROLLER_BASE="$CONTROLLER_BASE" \
		--build-arg VERSION="$version" --build-arg COMMIT="$commit" \
		--build-arg TARGETOS=linux --build-arg TARGETARCH="$(go env GOARCH)" \
		--volume "$(go env GOMODCACHE):/host/gomodcache" --volume "$(go env GOCACHE):/host/gocache" \
		--target "$target" -t "$img" -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT" >&2 ||
		die "building $img failed (see above)"
	rm -f "$OUT/aerie-$target.tar"
	buildah push "$img" "docker-archive:$OUT/aerie-$target.tar:$img" >&2 ||
		die "writing $img to $OUT/aerie-$target.tar failed"
done
log "ready: $OUT"
printf '%s\n' "$OUT"

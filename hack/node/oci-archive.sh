#!/usr/bin/env bash
# Packs a directory into a one-layer OCI image archive that `ctr images
# import` reads, with no registry and no image builder:
#
#   hack/node/oci-archive.sh OUT.tar REFERENCE ROOTFS_DIR CONFIG_JSON [ARCH]
#
# CONFIG_JSON is the image configuration's "config" object, e.g.
# '{"Entrypoint":["/pause"],"User":"65535:65535"}'. The layer is reproducible
# (sorted, owned by root, mtime 0).
set -euo pipefail

(($# >= 4)) || {
	echo "usage: $0 OUT.tar REFERENCE ROOTFS_DIR CONFIG_JSON [ARCH]" >&2
	exit 2
}
out=$1 ref=$2 root=$3 config=$4 arch=${5:-amd64}
[[ -d "$root" ]] || {
	echo "oci-archive: ROOTFS_DIR $root is not a directory" >&2
	exit 2
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/blobs/sha256"

# blob FILE: store FILE as a blob, print "DIGEST SIZE".
blob() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$work/blobs/sha256/$d"
	printf '%s %s\n' "$d" "$s"
}

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$work/layer" .
read -r ld ls < <(blob "$work/layer")

printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
	"$arch" "$config" "$ld" >"$work/config"
read -r cd cs < <(blob "$work/config")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
	"$cd" "$cs" "$ld" "$ls" >"$work/manifest"
read -r md ms < <(blob "$work/manifest")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
	"$md" "$ms" "$ref" "${ref##*:}" >"$work/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" -cf "$out.tmp" oci-layout index.json blobs
mv -f "$out.tmp" "$out"

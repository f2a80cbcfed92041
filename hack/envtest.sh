#!/usr/bin/env bash
# Provides the envtest binaries (kube-apiserver, etcd, kubectl) for the
# Kubernetes release this project is built against.
#
# Prints exactly one line on stdout: the absolute directory holding them, i.e.
# what KUBEBUILDER_ASSETS should be set to. Progress goes to stderr.
#
#   export KUBEBUILDER_ASSETS="$(hack/envtest.sh)"
#
# Environment:
#   KUBEBUILDER_ASSETS    if it already names a directory with the binaries,
#                         it is printed as is and nothing else happens.
#   AERIE_ENVTEST_DIR     cache root (default $XDG_CACHE_HOME/aerie/envtest,
#                         i.e. ~/.cache/aerie/envtest). Binaries land in
#                         <root>/k8s/<version>-<os>-<arch>/, setup-envtest's
#                         store layout; scratch build modules in <root>/build/.
#   AERIE_ENVTEST_EXTRA   extra k8s.io/kubernetes commands to build into the
#                         same directory, comma or space separated, e.g.
#                         kube-controller-manager. Not built by default.
#   AERIE_ENVTEST_SETUP_ENVTEST=0
#                         skip the attempt with setup-envtest (which downloads
#                         prebuilt release archives) and build straight away.
#
# Route: a warm cache (binaries present, stamp matching) returns at once
# without running go. Otherwise setup-envtest is tried first; where its
# download hosts are unreachable, the binaries are built from the Go modules of
# the same releases, which only needs the Go module proxy (cold: about 5-6
# minutes and 2.5 GB of memory on an idle 2-core machine; far longer when the
# machine is busy).
set -euo pipefail

KUBE_VERSION=v1.37.2
# etcd for envtest: this project pins the 3.6 line. (k8s.io/kubernetes v1.37.2
# itself names etcd 3.7.0 in its build/dependencies.yaml.)
ETCD_VERSION=v3.6.16
# Only tagged release of the setup-envtest module (go 1.26, apimachinery 0.37).
SETUP_ENVTEST_VERSION=v0.25.1
# Bump when the build steps below change in a way that should rebuild caches.
# (The templates under hack/envtest/ are hashed into the stamp by themselves.)
RECIPE_REV=1

BASE_BINS=(kube-apiserver etcd kubectl)

log() { printf '[envtest] %s\n' "$*" >&2; }
die() {
	log "ERROR: $*"
	log "Building needs Go and the Go module proxy reachable. To skip this script, set"
	log "KUBEBUILDER_ASSETS to a directory holding kube-apiserver, etcd and kubectl ($KUBE_VERSION)."
	exit 1
}

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TEMPLATES="$REPO_ROOT/hack/envtest"

EXTRA=${AERIE_ENVTEST_EXTRA:-}
read -r -a EXTRA_BINS <<<"${EXTRA//,/ }"
WANT_BINS=("${BASE_BINS[@]}" "${EXTRA_BINS[@]}")

# has_bins DIR NAME... : all named binaries are executable files in DIR.
has_bins() {
	local dir=$1 b
	shift
	for b in "$@"; do
		[[ -f "$dir/$b" && -x "$dir/$b" ]] || return 1
	done
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
	if has_bins "$KUBEBUILDER_ASSETS" "${WANT_BINS[@]}"; then
		printf '%s\n' "$KUBEBUILDER_ASSETS"
		exit 0
	fi
	log "ignoring KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS: it lacks some of ${WANT_BINS[*]}"
fi

# GOOS/GOARCH of this host (the binaries must run here, whatever GOOS/GOARCH
# the caller may have exported), from uname so that the warm path runs no go.
host_platform() {
	local os arch
	case "$(uname -s)" in
	Linux) os=linux ;;
	Darwin) os=darwin ;;
	*) os=$(go env GOHOSTOS) ;;
	esac
	case "$(uname -m)" in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	ppc64le) arch=ppc64le ;;
	s390x) arch=s390x ;;
	*) arch=$(go env GOHOSTARCH) ;;
	esac
	printf '%s/%s\n' "$os" "$arch"
}
PLATFORM=$(host_platform)
GOOS_=${PLATFORM%/*}
GOARCH_=${PLATFORM#*/}

CACHE_ROOT=${AERIE_ENVTEST_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/aerie/envtest}
mkdir -p "$CACHE_ROOT"
CACHE_ROOT=$(cd "$CACHE_ROOT" && pwd)
ASSETS="$CACHE_ROOT/k8s/${KUBE_VERSION#v}-$GOOS_-$GOARCH_"
STAMP="$ASSETS/.aerie-envtest-stamp"

# What a directory must have been made for to be reused: the requested
# versions, the platform and the build recipe. The Go version used is recorded
# in the stamp but not compared: a Go upgrade alone is no reason to rebuild.
recipe_hash() {
	{
		printf 'rev=%s\n' "$RECIPE_REV"
		cat "$TEMPLATES/kube.go.mod.in" "$TEMPLATES/etcd.go.mod.in"
	} | sha256sum | cut -c1-16
}
KEY="kubernetes=$KUBE_VERSION etcd=$ETCD_VERSION platform=$GOOS_-$GOARCH_ recipe=$(recipe_hash)"

stamp_ok() { [[ -f "$STAMP" ]] && grep -qxF "key=$KEY" "$STAMP"; }

# Warm path.
if stamp_ok && has_bins "$ASSETS" "${WANT_BINS[@]}"; then
	printf '%s\n' "$ASSETS"
	exit 0
fi

# ---------------------------------------------------------------------------
# Cold path. Serialise concurrent callers (e.g. several test packages at once):
# the first builds, the others wait and then find a warm cache.
mkdir -p "$ASSETS"
if command -v flock >/dev/null; then
	exec 9>"$CACHE_ROOT/.lock"
	if ! flock -n 9; then
		log "another hack/envtest.sh is preparing $ASSETS; waiting for it"
		flock 9
	fi
	if stamp_ok && has_bins "$ASSETS" "${WANT_BINS[@]}"; then
		printf '%s\n' "$ASSETS"
		exit 0
	fi
	# Holding the lock, any scratch directory left is from a killed run.
	chmod -R u+w "$CACHE_ROOT"/tmp.* 2>/dev/null || true
	rm -rf "$CACHE_ROOT"/tmp.*
fi

command -v go >/dev/null || die "go is not on PATH"

# Scratch space on the same file system as $ASSETS, so that finished binaries
# can be renamed into place atomically.
TMP=$(mktemp -d "$CACHE_ROOT/tmp.XXXXXX")
# (setup-envtest leaves its store read-only.)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT

# The go commands below build other modules, never this repository's: keep
# any go.work out, and let them write their own go.mod/go.sum.
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOOS="$GOOS_" GOARCH="$GOARCH_"

# gomod_field JSON FIELD: a string field of `go mod download -json` output.
gomod_field() { sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"$1"; }

# download MODULE@VERSION: fetch it into the module cache, print its JSON.
download() {
	local out dl="$TMP/download"
	# Run in a throwaway module so that no other go.mod or go.sum is touched
	# (the cache directory might be inside some module).
	if [[ ! -f "$dl/go.mod" ]]; then
		mkdir -p "$dl"
		printf 'module download\n' >"$dl/go.mod"
	fi
	out=$(cd "$dl" && go mod download -json "$1") ||
		die "could not download $1 through the Go module proxy ($(go env GOPROXY))"
	printf '%s\n' "$out"
}

# go_directive GOMOD: the `go` line of a go.mod file.
go_directive() { awk '$1 == "go" { print $2; exit }' "$1"; }

# install_bin SRC NAME: rename a verified binary into $ASSETS atomically.
install_bin() {
	chmod 0755 "$1"
	mv -f "$1" "$ASSETS/$2"
}

# check_version BIN PATTERN ARGS...: BIN ARGS prints something matching PATTERN.
check_version() {
	local bin=$1 pattern=$2 out
	shift 2
	out=$("$bin" "$@" 2>&1) || die "$(basename "$bin") $* failed: $out"
	grep -qE -- "$pattern" <<<"$out" ||
		die "$(basename "$bin") $* printed '$(head -n1 <<<"$out")', expected /$pattern/"
	log "$(basename "$bin"): $(grep -E -m1 -- "$pattern" <<<"$out")"
}

KUBE_RE="v${KUBE_VERSION#v}([^0-9.]|\$)"
KUBE_RE=${KUBE_RE//./\\.}
verify_kube_bin() { # PATH NAME
	case "$2" in
	kubectl) check_version "$1" "Client Version: $KUBE_RE" version --client ;;
	*) check_version "$1" "Kubernetes $KUBE_RE" --version ;;
	esac
}

# --- route 1: setup-envtest -------------------------------------------------
try_setup_envtest() {
	local tool="$REPO_ROOT/bin/setup-envtest-$SETUP_ENVTEST_VERSION" out b
	if [[ ! -x "$tool" ]]; then
		log "installing setup-envtest $SETUP_ENVTEST_VERSION into bin/"
		mkdir -p "$TMP/gobin"
		GOBIN="$TMP/gobin" GOFLAGS='' go install \
			"sigs.k8s.io/controller-runtime/tools/setup-envtest@$SETUP_ENVTEST_VERSION" >&2 || return 1
		mkdir -p "$REPO_ROOT/bin"
		mv -f "$TMP/gobin/setup-envtest" "$tool"
	fi
	log "trying setup-envtest use ${KUBE_VERSION#v} (downloads release archives)"
	# Into a fresh store of its own: given ours, it would take the (empty or
	# stale) version directory there for an installed version. A short timeout:
	# where the download hosts are unreachable it fails fast by itself, but a
	# black-holed connection could otherwise hang.
	out=$(timeout 60 "$tool" use "${KUBE_VERSION#v}" --bin-dir "$TMP/setup-envtest" -p path) || {
		log "setup-envtest failed (exit $?)"
		return 1
	}
	if [[ -z "$out" ]] || ! has_bins "$out" "${BASE_BINS[@]}"; then
		log "setup-envtest printed '$out', which lacks some of ${BASE_BINS[*]}"
		return 1
	fi
	for b in "${BASE_BINS[@]}"; do
		cp "$out/$b" "$TMP/$b" || return 1
		install_bin "$TMP/$b" "$b"
	done
	for b in kube-apiserver kubectl; do verify_kube_bin "$ASSETS/$b" "$b"; done
	check_version "$ASSETS/etcd" '^etcd Version: 3\.' --version
}

# --- route 2: build from the Go modules ---------------------------------------
# build_kube NAME...: build k8s.io/kubernetes/cmd/NAME for each NAME.
build_kube() {
	local json gomod dir staging mod replaces="" b pkgs=() bdir="$CACHE_ROOT/build/kube"
	log "resolving k8s.io/kubernetes@$KUBE_VERSION"
	json=$(download "k8s.io/kubernetes@$KUBE_VERSION")
	gomod=$(gomod_field "$json" GoMod)
	dir=$(gomod_field "$json" Dir)
	[[ -f "$gomod" && -d "$dir" ]] || die "unexpected go mod download output for k8s.io/kubernetes: $json"

	# Staging modules: required at v0.0.0, published as v0.<minor>.<patch>.
	staging="v0.${KUBE_VERSION#v1.}"
	while read -r mod; do
		replaces+="replace $mod => $mod $staging"$'\n'
	done < <(awk '
		$1 == "require" { $1 = ""; $0 = $0 }   # one-line form: require mod ver
		$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }
	' "$gomod")
	[[ -n "$replaces" ]] || die "found no k8s.io/* v0.0.0 requirements in $gomod"

	for b in "$@"; do
		[[ -d "$dir/cmd/$b" ]] || die "k8s.io/kubernetes@$KUBE_VERSION has no cmd/$b (check AERIE_ENVTEST_EXTRA)"
		pkgs+=("k8s.io/kubernetes/cmd/$b")
	done

	mkdir -p "$bdir"
	render "$TEMPLATES/kube.go.mod.in" "$bdir/go.mod" \
		GO_DIRECTIVE "$(go_directive "$gomod")" \
		KUBE_VERSION "$KUBE_VERSION" \
		KUBE_REPLACES "${replaces%$'\n'}"

	# Without these the binaries report v0.0.0, and kube-apiserver derives its
	# binary/emulation version from them.
	local minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	local ld="-s -w" p now
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$now"
	done

	log "building ${*} from k8s.io/kubernetes@$KUBE_VERSION (cold: several minutes)"
	mkdir -p "$TMP/kube"
	(cd "$bdir" && go build -trimpath -ldflags "$ld" -o "$TMP/kube/" "${pkgs[@]}") >&2 ||
		die "building ${*} failed (see above)"
	for b in "$@"; do verify_kube_bin "$TMP/kube/$b" "$b"; done
	for b in "$@"; do install_bin "$TMP/kube/$b" "$b"; done
}

build_etcd() {
	local json gomod bdir="$CACHE_ROOT/build/etcd" ver=${ETCD_VERSION#v}
	log "resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
	json=$(download "go.etcd.io/etcd/server/v3@$ETCD_VERSION")
	gomod=$(gomod_field "$json" GoMod)
	[[ -f "$gomod" ]] || die "unexpected go mod download output for etcd: $json"

	mkdir -p "$bdir"
	render "$TEMPLATES/etcd.go.mod.in" "$bdir/go.mod" \
		GO_DIRECTIVE "$(go_directive "$gomod")" \
		ETCD_VERSION "$ETCD_VERSION"

	log "building etcd $ETCD_VERSION"
	(cd "$bdir" && go build -trimpath \
		-ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" \
		-o "$TMP/etcd" go.etcd.io/etcd/server/v3) >&2 ||
		die "building etcd $ETCD_VERSION failed (see above)"
	check_version "$TMP/etcd" "^etcd Version: ${ver//./\\.}\$" --version
	install_bin "$TMP/etcd" etcd
}

# render TEMPLATE OUT NAME VALUE...: copy TEMPLATE to OUT with each @NAME@
# replaced by VALUE (which may span lines).
render() {
	local content out=$2
	content=$(<"$1")
	shift 2
	while (($#)); do
		content=${content//"@$1@"/"$2"}
		shift 2
	done
	printf '%s\n' "$content" >"$out.tmp"
	mv -f "$out.tmp" "$out"
}

write_stamp() { # SOURCE
	local f extras=()
	for f in "$ASSETS"/*; do
		case "${f##*/}" in kube-apiserver | etcd | kubectl) ;; *) extras+=("${f##*/}") ;; esac
	done
	{
		echo "# Written by hack/envtest.sh when this directory was complete; delete to redo it."
		echo "key=$KEY"
		echo "source=$1"
		echo "kubernetes=$KUBE_VERSION"
		echo "etcd=$("$ASSETS/etcd" --version 2>/dev/null | sed -n 's/^etcd Version: //p')"
		echo "go=$(go version "$ASSETS/kube-apiserver" | awk '{ print $NF }')"
		echo "extras=${extras[*]}"
		echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	} >"$STAMP.tmp"
	mv -f "$STAMP.tmp" "$STAMP"
}

if stamp_ok && has_bins "$ASSETS" "${BASE_BINS[@]}"; then
	# Only extras are missing: build just those, keep the rest.
	missing=()
	for b in "${EXTRA_BINS[@]}"; do
		has_bins "$ASSETS" "$b" || missing+=("$b")
	done
	build_kube "${missing[@]}"
	source=$(sed -n 's/^source=//p' "$STAMP")
	write_stamp "${source:-build}"
else
	# Start over: drop the stamp first, so that an interrupted run is redone
	# rather than half-used, and any binaries of an older recipe or version.
	chmod -R u+w "$ASSETS"
	rm -f "$STAMP"
	find "$ASSETS" -mindepth 1 -maxdepth 1 -type f -delete

	source=build
	if [[ "${AERIE_ENVTEST_SETUP_ENVTEST:-1}" != 0 ]] && try_setup_envtest; then
		source=setup-envtest
		if ((${#EXTRA_BINS[@]})); then build_kube "${EXTRA_BINS[@]}"; fi
	else
		[[ "${AERIE_ENVTEST_SETUP_ENVTEST:-1}" == 0 ]] ||
			log "setup-envtest could not provide the binaries; building them from source instead"
		find "$ASSETS" -mindepth 1 -maxdepth 1 -type f -delete
		build_kube kube-apiserver kubectl "${EXTRA_BINS[@]}"
		build_etcd
	fi
	has_bins "$ASSETS" "${WANT_BINS[@]}" || die "internal error: $ASSETS lacks some of ${WANT_BINS[*]}"
	write_stamp "$source"
fi

log "ready: $ASSETS"
printf '%s\n' "$ASSETS"

#!/usr/bin/env bash
# Tries aerie on a real Kubernetes cluster running in Docker (kind): creates a cluster, builds
# the controller and runner images and loads them into it, installs the chart with the
# development PostgreSQL, runs a sample AgentSession to its end, shows the result, and deletes
# the cluster.
#
#   hack/kind.sh                 # the whole round trip (make kind-demo runs the same)
#   KEEP=1 hack/kind.sh          # keep the cluster afterwards, and print how to reach it
#   hack/kind.sh delete          # delete a cluster a KEEP=1 run left behind
#
# Needs Docker, Go and make; kind and helm are built into bin/ at their pinned versions, and
# kubectl is taken from PATH (or from hack/envtest.sh, which has the project's release).
#
# The sample session uses the scripted model (no API key; the script comes from an image
# layer built from hack/kind/layer/ and mounted as an image volume, on by default since
# Kubernetes 1.35). With ANTHROPIC_API_KEY or OPENAI_API_KEY set, it runs against that
# provider instead; the key goes into a Secret, never onto a command line.
#
# Environment:
#   KEEP=1                 keep the cluster; otherwise it is deleted on exit, even on failure
#   AERIE_KIND_CLUSTER     cluster name (default aerie)
#   AERIE_KIND_NODE_IMAGE  kindest/node image (default: the one kind's release pins)
#   AERIE_KIND_TIMEOUT     seconds to wait for the session to finish (default 600)
#   KUBECTL                kubectl to use
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER=${AERIE_KIND_CLUSTER:-aerie}
NODE_IMAGE=${AERIE_KIND_NODE_IMAGE:-}
TIMEOUT=${AERIE_KIND_TIMEOUT:-600}
KEEP=${KEEP:-0}
RELEASE=aerie
SYSTEM_NS=aerie-system
DEMO_NS=aerie-demo
SESSION=kind-hello
# The tag hack/kind/values.yaml names; images are loaded into the nodes, never pulled.
TAG=dev
CONTROLLER_IMG=ghcr.io/aerie-run/aerie-controller:$TAG
RUNNER_IMG=ghcr.io/aerie-run/aerie-runner:$TAG
LAYER_IMG=aerie-kind-layer:$TAG
KIND=$REPO_ROOT/bin/kind
HELM=$REPO_ROOT/bin/helm

log() { printf '\n[kind] %s\n' "$*" >&2; }
die() {
	printf '[kind] ERROR: %s\n' "$*" >&2
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "$1 is not installed: $2"
}

cleanup() {
	local status=$?
	if [[ $status -ne 0 ]]; then
		diagnose || true
	fi
	if [[ $KEEP == 1 ]]; then
		if [[ -s $KUBECONFIG ]]; then
			cp "$KUBECONFIG" "$REPO_ROOT/bin/kind-$CLUSTER.kubeconfig"
			log "cluster $CLUSTER kept. Reach it with:
  export KUBECONFIG=$REPO_ROOT/bin/kind-$CLUSTER.kubeconfig
  kubectl -n $DEMO_NS get agentsessions
Delete it with: hack/kind.sh delete"
		fi
	elif [[ -x $KIND ]] && "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
		log "deleting cluster $CLUSTER"
		"$KIND" delete cluster --name "$CLUSTER" || true
	fi
	rm -rf "$WORK"
	exit "$status"
}

# diagnose prints what a person needs to see when a step failed.
diagnose() {
	[[ -s $KUBECONFIG ]] || return 0
	local kubectl=${KUBECTL:-kubectl}
	log "diagnostics"
	"$kubectl" get pods -A -o wide || true
	"$kubectl" -n "$DEMO_NS" get events --sort-by=.lastTimestamp || true
	"$kubectl" -n "$DEMO_NS" describe agentsession "$SESSION" || true
	"$kubectl" -n "$SYSTEM_NS" logs "deployment/$RELEASE-controller" --tail=100 || true
}

if [[ ${1:-} == delete ]]; then
	make -C "$REPO_ROOT" --no-print-directory kind >&2
	"$KIND" delete cluster --name "$CLUSTER"
	rm -f "$REPO_ROOT/bin/kind-$CLUSTER.kubeconfig"
	exit 0
elif [[ $# -gt 0 ]]; then
	die "unknown argument $1: run hack/kind.sh, or hack/kind.sh delete"
fi

need docker "see https://docs.docker.com/engine/install/"
need go "install Go (the version go.mod names)"
need make "install make"
docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable: start it (docker info must work)"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "AERIE_KIND_TIMEOUT=$TIMEOUT: want a number of seconds"

log "building kind and helm into bin/"
make -C "$REPO_ROOT" --no-print-directory kind helm >&2

if [[ -n ${KUBECTL:-} ]]; then
	:
elif command -v kubectl >/dev/null 2>&1; then
	KUBECTL=kubectl
else
	log "no kubectl on PATH: taking the one hack/envtest.sh provides"
	KUBECTL="$("$REPO_ROOT/hack/envtest.sh")/kubectl"
fi

if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
	die "a kind cluster named $CLUSTER exists already: delete it (hack/kind.sh delete) or set AERIE_KIND_CLUSTER"
fi

# A private kubeconfig: the script never changes the user's current context.
WORK=$(mktemp -d)
export KUBECONFIG=$WORK/kubeconfig
# From here on the cluster is this run's own, so cleanup may delete it.
trap cleanup EXIT

log "creating kind cluster $CLUSTER"
create=(create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" --wait 180s)
if [[ -n $NODE_IMAGE ]]; then
	create+=(--image "$NODE_IMAGE")
fi
"$KIND" "${create[@]}"

log "building the images"
make -C "$REPO_ROOT" --no-print-directory docker-build CONTROLLER_IMG="$CONTROLLER_IMG" RUNNER_IMG="$RUNNER_IMG" >&2
docker build -t "$LAYER_IMG" -f "$REPO_ROOT/hack/kind/layer.Dockerfile" "$REPO_ROOT/hack/kind/layer"

log "loading the images into the cluster"
"$KIND" load docker-image --name "$CLUSTER" "$CONTROLLER_IMG" "$RUNNER_IMG" "$LAYER_IMG"

log "installing the chart into $SYSTEM_NS"
# Both namespaces enforce Pod Security "restricted": every pod aerie starts must meet it.
for ns in "$SYSTEM_NS" "$DEMO_NS"; do
	"$KUBECTL" create namespace "$ns"
	"$KUBECTL" label namespace "$ns" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted
done
"$HELM" install "$RELEASE" "$REPO_ROOT/charts/aerie" --namespace "$SYSTEM_NS" \
	--values "$REPO_ROOT/hack/kind/values.yaml" --wait --timeout 5m
"$KUBECTL" -n "$SYSTEM_NS" get pods -o wide

# The controller gives runner pods the database URL from a Secret in the
# session's own namespace, so that each namespace can have credentials of its
# own; here the demo namespace gets the development database's.
db_secret=$("$KUBECTL" -n "$SYSTEM_NS" get deployment -l app.kubernetes.io/component=controller \
	-o jsonpath='{.items[0].spec.template.spec.containers[0].args}' | grep -o -- '--database-secret=[^",]*' | cut -d= -f2)
log "copying Secret $SYSTEM_NS/$db_secret into $DEMO_NS"
"$KUBECTL" -n "$SYSTEM_NS" get secret "$db_secret" -o jsonpath='{.data.DATABASE_URL}' | base64 -d >"$WORK/database-url"
"$KUBECTL" -n "$DEMO_NS" create secret generic "$db_secret" --from-file=DATABASE_URL="$WORK/database-url"
rm -f "$WORK/database-url"

session=$REPO_ROOT/hack/kind/session-scripted.yaml
key_env=
if [[ -n ${ANTHROPIC_API_KEY:-} ]]; then
	session=$REPO_ROOT/hack/kind/session-anthropic.yaml
	key_env=ANTHROPIC_API_KEY
elif [[ -n ${OPENAI_API_KEY:-} ]]; then
	session=$REPO_ROOT/hack/kind/session-openai.yaml
	key_env=OPENAI_API_KEY
fi
if [[ -n $key_env ]]; then
	log "storing $key_env in Secret $DEMO_NS/model-credentials"
	# From a file, so that the key is never on a command line (ps shows those).
	printf '%s' "${!key_env}" >"$WORK/api-key"
	"$KUBECTL" -n "$DEMO_NS" create secret generic model-credentials --from-file=api-key="$WORK/api-key"
	rm -f "$WORK/api-key"
fi

log "applying the sample session ($(basename "$session"))"
"$KUBECTL" -n "$DEMO_NS" apply --server-side -f "$session"

log "waiting up to ${TIMEOUT}s for session $SESSION to finish"
phase=
deadline=$((SECONDS + TIMEOUT))
while ((SECONDS < deadline)); do
	# A failed read (the API server busy, say) is retried like an unfinished session.
	phase=$("$KUBECTL" -n "$DEMO_NS" get agentsession "$SESSION" -o jsonpath='{.status.phase}') || phase=
	case $phase in
	Succeeded | Failed | Cancelled) break ;;
	esac
	printf '[kind] phase: %s\n' "${phase:-<none yet>}" >&2
	sleep 5
done

log "result"
"$KUBECTL" -n "$DEMO_NS" get agentsession "$SESSION" -o wide
"$KUBECTL" -n "$DEMO_NS" get agentsession "$SESSION" -o jsonpath='{.status.result}{"\n"}'
log "the session's events (kubectl logs of its runner pod)"
"$KUBECTL" -n "$DEMO_NS" logs -l "aerie.run/session=$SESSION" --all-containers --prefix --tail=-1 || true

case $phase in
Succeeded) log "session $SESSION succeeded" ;;
"") die "session $SESSION did not finish within ${TIMEOUT}s" ;;
*) die "session $SESSION ended $phase" ;;
esac

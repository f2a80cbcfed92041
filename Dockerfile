# syntax=docker/dockerfile:1
# aerie's two images, from one build of its static binaries:
#
#   docker build --target controller -t ghcr.io/aerie-run/aerie-controller:dev .
#   docker build --target runner     -t ghcr.io/aerie-run/aerie-runner:dev .
#
# The controller image holds aerie-controller alone, on distroless (no shell, no package
# manager). The runner image holds aerie and the tools an agent works with (a shell, git,
# coreutils, ...). Both run as a non-root numeric user, so Pod Security "restricted" can
# verify runAsNonRoot. `make docker-build` passes VERSION and COMMIT; `aerie version` prints them.

ARG GO_VERSION=1.26
# The base images, arguments so that a build without a registry can use local ones
# (`make images-local` builds them with buildah: hack/images.sh).
ARG BUILD_IMAGE=golang:${GO_VERSION}
ARG RUNNER_BASE=debian:trixie-slim
ARG CONTROLLER_BASE=gcr.io/distroless/static-debian13:nonroot

# The build runs on the builder's platform and cross-compiles: the binaries are static
# (CGO_ENABLED=0), so no emulation is needed for other architectures.
FROM --platform=$BUILDPLATFORM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/ ./cmd/aerie ./cmd/aerie-controller

FROM ${RUNNER_BASE} AS runner
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="aerie-runner" \
      org.opencontainers.image.description="aerie's runner: the agent loop and the executor its tools run in" \
      org.opencontainers.image.source="https://github.com/aerie-run/aerie" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl diffutils git jq less make openssh-client patch procps unzip xz-utils \
 && rm -rf /var/lib/apt/lists/*
# Two users: aerie (the agent container) and workspace (the executor container, which runs
# every tool under another uid). git and ssh want a passwd entry for the uid they run as.
# A workspace cloned or mounted under another uid is still a repository git works in.
RUN groupadd --gid 65532 aerie \
 && useradd --uid 65532 --gid 65532 --home-dir /home/aerie --create-home --shell /bin/bash aerie \
 && groupadd --gid 65533 workspace \
 && useradd --uid 65533 --gid 65533 --home-dir /home/workspace --create-home --shell /bin/bash workspace \
 && install -d -o 65533 -g 65533 -m 0775 /workspace \
 && git config --system --add safe.directory '*'
COPY --from=build /out/aerie /usr/local/bin/aerie
ENV HOME=/home/aerie
WORKDIR /workspace
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/aerie"]
CMD ["version"]

# The controller stage comes last, so a plain `docker build .` builds the controller image.
FROM ${CONTROLLER_BASE} AS controller
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="aerie-controller" \
      org.opencontainers.image.description="aerie's controller: runs each AgentSession in a runner pod" \
      org.opencontainers.image.source="https://github.com/aerie-run/aerie" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/aerie-controller /aerie-controller
USER 65532:65532
ENTRYPOINT ["/aerie-controller"]

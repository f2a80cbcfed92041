# syntax=docker/dockerfile:1
# Builds aerie's two binaries statically and ships them in a minimal non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/ ./cmd/aerie ./cmd/aerie-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/aerie /out/aerie-controller /
USER 65532:65532
ENTRYPOINT ["/aerie-controller"]

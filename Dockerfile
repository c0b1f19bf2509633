# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# Two images from one build, static binaries on distroless, non-root:
#   docker build --target sluice-scheduler     -t sluice-scheduler .
#   docker build --target sluice-overflow-node -t sluice-overflow-node .
#
# Multi-arch (make image-push): the build stage runs on the builder's own
# platform and cross-compiles for each target platform (static binaries,
# no cgo), so no emulation is needed.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG SLUICE_VERSION=v0.0.0-docker
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN GOOS=${TARGETOS} GOARCH=${TARGETARCH} make build SLUICE_VERSION=${SLUICE_VERSION}

FROM gcr.io/distroless/static-debian12:nonroot AS sluice-overflow-node
COPY --from=build /src/bin/sluice-overflow-node /usr/local/bin/sluice-overflow-node
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sluice-overflow-node"]

FROM gcr.io/distroless/static-debian12:nonroot AS sluice-scheduler
COPY --from=build /src/bin/sluice-scheduler /usr/local/bin/sluice-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sluice-scheduler"]

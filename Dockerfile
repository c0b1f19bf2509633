# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# Two images from one build, for those with Docker. `make image` builds the
# same contents without Docker (internal/ociimage): a static binary on an
# empty base, the CA bundle, the non-root user, nothing else.
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

FROM scratch AS base
COPY hack/image/rootfs/etc/passwd hack/image/rootfs/etc/group /etc/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532

FROM base AS sluice-overflow-node
COPY --from=build /src/bin/sluice-overflow-node /usr/local/bin/sluice-overflow-node
ENTRYPOINT ["/usr/local/bin/sluice-overflow-node"]

FROM base AS sluice-scheduler
COPY --from=build /src/bin/sluice-scheduler /usr/local/bin/sluice-scheduler
ENTRYPOINT ["/usr/local/bin/sluice-scheduler"]

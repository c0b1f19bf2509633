# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# sluice-scheduler: a static binary on distroless, running as non-root.
#   docker build --build-arg SLUICE_VERSION=v0.1.0 -t sluice-scheduler .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG SLUICE_VERSION=v0.0.0-docker
RUN make build SLUICE_VERSION=${SLUICE_VERSION}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/sluice-scheduler /usr/local/bin/sluice-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sluice-scheduler"]

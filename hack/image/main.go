// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command image builds one of sluice's container images as an OCI image
// layout tarball, without Docker or a registry (internal/ociimage); `make
// image` runs it for both binaries:
//
//	go run ./hack/image -name sluice-scheduler -ref local/sluice-scheduler:dev \
//	    -binary linux/amd64=_output/build/linux-amd64/sluice-scheduler \
//	    -version dev -created 1733500000 -o _output/images/sluice-scheduler.oci.tar
//
// Load it with `ctr -n k8s.io images import --platform linux/amd64 FILE`, or
// push it with `crane push FILE REF` / `skopeo copy oci-archive:FILE docker://REF`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-sched/sluice/internal/ociimage"
)

type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || platform == "" || path == "" {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	b[platform] = path
	return nil
}

func main() {
	bins := binaries{}
	var s ociimage.Spec
	flag.StringVar(&s.Name, "name", "", "the program: /usr/local/bin/NAME, the entrypoint")
	flag.StringVar(&s.Ref, "ref", "", "the image reference it is tagged with")
	flag.Var(bins, "binary", "os/arch=path of the static binary for that platform (repeat per platform)")
	flag.StringVar(&s.CABundle, "ca-bundle", ociimage.CABundlePath, "PEM CA bundle to include")
	flag.StringVar(&s.Version, "version", "", "the version label")
	flag.StringVar(&s.Revision, "revision", "", "the git commit label")
	flag.StringVar(&s.Source, "source", "https://github.com/sluice-sched/sluice", "the source label")
	created := flag.String("created", "", "the time of every file and of the image: Unix seconds (SOURCE_DATE_EPOCH) or RFC 3339")
	out := flag.String("o", "", "the tarball to write")
	flag.Parse()
	s.Binaries = bins
	if err := run(&s, *created, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(s *ociimage.Spec, created, out string) error {
	switch {
	case s.Name == "":
		return fmt.Errorf("-name is required")
	case s.Ref == "":
		return fmt.Errorf("-ref is required")
	case s.Version == "":
		return fmt.Errorf("-version is required")
	case out == "":
		return fmt.Errorf("-o is required")
	}
	if secs, err := strconv.ParseInt(created, 10, 64); err == nil {
		s.Created = time.Unix(secs, 0).UTC()
	} else if t, err := time.Parse(time.RFC3339, created); err == nil {
		s.Created = t.UTC()
	} else {
		return fmt.Errorf("-created %q: want Unix seconds or an RFC 3339 time", created)
	}
	digest, err := ociimage.Write(*s, out)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s -> %s\n", s.Ref, digest, out)
	return nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// untar extracts a tarball into a new directory.
func untar(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// files lists an image layer's entries: mode and content by path.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v, want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		hdr.PAXRecords = map[string]string{"content": string(data)}
		out[hdr.Name] = hdr
	}
}

// TestImage: an index of one image per platform, tagged for containerd's
// import; each image runs its binary as the non-root user, with the CA
// bundle, the version labels, and nothing else; the same inputs give the
// same bytes.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		path := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(path, []byte("\x7fELF program for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = path
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := Spec{Name: "sluice-scheduler", Ref: "local/sluice-scheduler:v0.3.0", Binaries: bins, CABundle: ca,
		Version: "v0.3.0", Revision: "abc123", Source: "https://github.com/sluice-sched/sluice", Created: created}
	out := filepath.Join(dir, "a.tar")
	digest, err := Write(s, out)
	if err != nil {
		t.Fatal(err)
	}

	lp, err := layout.FromPath(untar(t, out))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index.json: %+v %v, want one index", im, err)
	}
	desc := im.Manifests[0]
	if desc.Digest != digest || desc.Annotations["io.containerd.image.name"] != "docker.io/local/sluice-scheduler:v0.3.0" ||
		desc.Annotations["org.opencontainers.image.ref.name"] != "v0.3.0" {
		t.Errorf("index.json names %+v (digest %s), want the reference and digest %s", desc.Annotations, desc.Digest, digest)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	children, err := idx.IndexManifest()
	if err != nil || len(children.Manifests) != 2 {
		t.Fatalf("image index: %+v %v, want 2 platforms", children, err)
	}
	for _, m := range children.Manifests {
		p := m.Platform.OS + "/" + m.Platform.Architecture
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != p || cf.Config.User != NonRoot || len(cf.Config.Entrypoint) != 1 ||
			cf.Config.Entrypoint[0] != "/usr/local/bin/sluice-scheduler" || !cf.Created.Equal(created) {
			t.Errorf("%s config: os/arch %s/%s user %q entrypoint %v created %v", p, cf.OS, cf.Architecture, cf.Config.User, cf.Config.Entrypoint, cf.Created)
		}
		for k, v := range map[string]string{"org.opencontainers.image.version": "v0.3.0", "org.opencontainers.image.revision": "abc123",
			"org.opencontainers.image.title": "sluice-scheduler"} {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s label %s = %q, want %q", p, k, cf.Config.Labels[k], v)
			}
		}
		got := files(t, img)
		want := map[string]struct {
			mode    int64
			content string
		}{
			"etc/":                              {0o755, ""},
			"etc/group":                         {0o644, Group},
			"etc/passwd":                        {0o644, Passwd},
			"etc/ssl/":                          {0o755, ""},
			"etc/ssl/certs/":                    {0o755, ""},
			"etc/ssl/certs/ca-certificates.crt": {0o644, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
			"usr/":                              {0o755, ""},
			"usr/local/":                        {0o755, ""},
			"usr/local/bin/":                    {0o755, ""},
			"usr/local/bin/sluice-scheduler":    {0o755, "\x7fELF program for " + p},
		}
		for name, w := range want {
			h := got[name]
			if h == nil || h.Mode != w.mode || h.PAXRecords["content"] != w.content || h.Uid != 0 || !h.ModTime.Equal(created) {
				t.Errorf("%s: %s = %+v, want mode %o, root's, at %v, with its content", p, name, h, w.mode, created)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d entries, want %d", p, len(got), len(want))
		}
	}

	// Reproducible.
	again := filepath.Join(dir, "b.tar")
	if d, err := Write(s, again); err != nil || d != digest {
		t.Errorf("a second build: %s %v, want %s", d, err, digest)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same inputs differ")
	}

	// Bad input names what is wrong.
	for name, bad := range map[string]func(*Spec){
		"not ELF":     func(s *Spec) { s.Binaries = map[string]string{"linux/amd64": ca} },
		"no platform": func(s *Spec) { s.Binaries = map[string]string{"amd64": bins["linux/amd64"]} },
		"no CA":       func(s *Spec) { s.CABundle = bins["linux/amd64"] },
		"bad ref":     func(s *Spec) { s.Ref = "Local/UPPER:tag" },
		"no binary":   func(s *Spec) { s.Binaries = nil },
	} {
		c := s
		bad(&c)
		if _, err := Write(c, filepath.Join(dir, "bad.tar")); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

// TestDockerfileUsers: the Dockerfile copies the same users the Go build
// writes.
func TestDockerfileUsers(t *testing.T) {
	for file, want := range map[string]string{"passwd": Passwd, "group": Group} {
		got, err := os.ReadFile(filepath.Join("..", "..", "hack", "image", "rootfs", "etc", file))
		if err != nil || string(got) != want {
			t.Errorf("hack/image/rootfs/etc/%s = %q (%v), want %q", file, got, err, want)
		}
	}
	dockerfile, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"COPY hack/image/rootfs/etc/passwd hack/image/rootfs/etc/group /etc/",
		"COPY --from=build /etc/ssl/certs/ca-certificates.crt " + CABundlePath, "USER " + NonRoot} {
		if !strings.Contains(string(dockerfile), line) {
			t.Errorf("Dockerfile lacks %q", line)
		}
	}
}

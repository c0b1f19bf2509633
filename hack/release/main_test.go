// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"
)

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRelease: the chart's OCI form is Helm's artifact, the krew manifest
// names each archive with its checksum, the notes are the version's
// changelog with the upgrade notes first, the SBOM lists the binary's
// modules, and SHA256SUMS covers every file.
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sluice-0.2.0.tgz", tgz(t, map[string]string{"sluice/Chart.yaml": "apiVersion: v2\nname: sluice\nversion: 0.2.0\n", "sluice/values.yaml": "{}\n"}))
	write("kubectl-sluice_v0.2.0_linux_amd64.tar.gz", tgz(t, map[string]string{"kubectl-sluice": "bin", "LICENSE": "Apache"}))
	changelog := filepath.Join(dir, "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte("# Changelog\n\n## Unreleased\n\n### Changed\n- A thing. **Upgrading: relabel.** (#1)\n- Another. (#2)\n\n## v0.1.0\n\n- Old.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &Release{Version: "v0.2.0-rc.1", Dir: dir, Chart: "sluice-0.2.0.tgz", Changelog: changelog, Binaries: []string{self},
		Plugins: map[string]string{"linux/amd64": "kubectl-sluice_v0.2.0_linux_amd64.tar.gz"}, URL: "https://example.test/dl", Created: time.Unix(1796675582, 0).UTC()}
	if err := r.Run(); err != nil {
		t.Fatal(err)
	}

	// The chart as Helm's OCI artifact.
	ociDir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, "sluice-0.2.0.oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		p := filepath.Join(ociDir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			_ = os.MkdirAll(p, 0o755)
			continue
		}
		body := new(bytes.Buffer)
		_, _ = body.ReadFrom(tr)
		_ = os.WriteFile(p, body.Bytes(), 0o644)
	}
	lp, err := layout.FromPath(ociDir)
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := lp.ImageIndex()
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "0.2.0" {
		t.Fatalf("chart OCI index: %+v %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil || m.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Fatalf("chart OCI manifest: %+v %v", m, err)
	}
	cfg, _ := img.RawConfigFile()
	if !strings.Contains(string(cfg), `"name":"sluice"`) || !strings.Contains(string(cfg), `"version":"0.2.0"`) {
		t.Errorf("chart OCI config = %s, want Chart.yaml's metadata", cfg)
	}

	// krew.
	var plugin struct {
		Spec struct {
			Version   string
			Platforms []struct {
				URI, Sha256 string
			}
		}
	}
	kdata, _ := os.ReadFile(filepath.Join(dir, "sluice.krew.yaml"))
	if err := yaml.Unmarshal(kdata, &plugin); err != nil {
		t.Fatal(err)
	}
	sum, _ := sha256File(filepath.Join(dir, "kubectl-sluice_v0.2.0_linux_amd64.tar.gz"))
	if plugin.Spec.Version != "v0.2.0-rc.1" || len(plugin.Spec.Platforms) != 1 || plugin.Spec.Platforms[0].Sha256 != sum ||
		plugin.Spec.Platforms[0].URI != "https://example.test/dl/v0.2.0-rc.1/kubectl-sluice_v0.2.0_linux_amd64.tar.gz" {
		t.Errorf("krew manifest:\n%s", kdata)
	}

	// Notes.
	notes, _ := os.ReadFile(filepath.Join(dir, "RELEASE-NOTES.md"))
	if n := string(notes); !strings.HasPrefix(n, "# sluice v0.2.0-rc.1\n\n## Upgrade notes\n\n- A thing. **Upgrading: relabel.** (#1)\n") ||
		!strings.Contains(n, "- Another. (#2)") || strings.Contains(n, "Old.") {
		t.Errorf("release notes:\n%s", notes)
	}

	// SBOM.
	var doc struct {
		Packages []struct{ Name string }
	}
	sdata, _ := os.ReadFile(filepath.Join(dir, "sbom.spdx.json"))
	if err := json.Unmarshal(sdata, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	if !names["stdlib"] || !names["github.com/google/go-containerregistry"] || !names[filepath.Base(self)] {
		t.Errorf("SBOM packages %v, want stdlib, go-containerregistry and the binary", names)
	}

	// Checksums of every file.
	sums, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == "SHA256SUMS" {
			continue
		}
		s, _ := sha256File(filepath.Join(dir, e.Name()))
		if !strings.Contains(string(sums), s+"  "+e.Name()+"\n") {
			t.Errorf("SHA256SUMS lacks %s", e.Name())
		}
	}

	r.Version = "0.2"
	if err := r.Run(); err == nil || !strings.Contains(err.Error(), "want vX.Y.Z") {
		t.Errorf("version 0.2: %v", err)
	}
	// A release needs its own section; a pre-release takes Unreleased.
	r.Version = "v0.3.0"
	if err := r.Run(); err == nil || !strings.Contains(err.Error(), `no section "## v0.3.0"`) {
		t.Errorf("v0.3.0 without its section: %v", err)
	}
	r.Version = "v0.3.0-rc.1"
	if err := r.Run(); err != nil {
		t.Errorf("a pre-release from Unreleased: %v", err)
	}
}

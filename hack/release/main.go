// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command release finishes a release directory that `make release` has
// filled with the images, the chart package and the kubectl-sluice
// archives: it writes the chart's OCI form, the krew manifest, the release
// notes (the version's CHANGELOG section, its upgrade notes first), an
// SPDX SBOM of every Go binary, and SHA256SUMS of everything.
//
//	go run ./hack/release -version v0.2.0 -dir _output/release/v0.2.0 \
//	    -chart sluice-0.2.0.tgz -binary _output/build/linux-amd64/sluice-scheduler ...
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sluice-sched/sluice/internal/ociimage"
)

// Release is what the tool is given.
type Release struct {
	Version   string   // vX.Y.Z
	Dir       string   // the release directory
	Chart     string   // the chart package in Dir
	Changelog string   // CHANGELOG.md
	Binaries  []string // Go binaries to describe in the SBOM
	// Plugins are the kubectl-sluice archives in Dir, by krew platform
	// ("linux/amd64").
	Plugins map[string]string
	// URL is where the release's files are downloaded from.
	URL     string
	Created time.Time
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var r Release
	var bins, plugins list
	flag.StringVar(&r.Version, "version", "", "the release version, vX.Y.Z")
	flag.StringVar(&r.Dir, "dir", "", "the release directory")
	flag.StringVar(&r.Chart, "chart", "", "the chart package's file name in -dir")
	flag.StringVar(&r.Changelog, "changelog", "CHANGELOG.md", "the changelog")
	flag.Var(&bins, "binary", "a Go binary for the SBOM (repeat)")
	flag.Var(&plugins, "plugin", "os/arch=archive of kubectl-sluice in -dir (repeat)")
	flag.StringVar(&r.URL, "url", "https://github.com/sluice-sched/sluice/releases/download", "base URL of release downloads")
	created := flag.Int64("created", 0, "Unix time of the release (SOURCE_DATE_EPOCH)")
	flag.Parse()
	r.Binaries, r.Created = bins, time.Unix(*created, 0).UTC()
	r.Plugins = map[string]string{}
	for _, p := range plugins {
		platform, file, ok := strings.Cut(p, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "release: -plugin %q: want os/arch=file\n", p)
			os.Exit(2)
		}
		r.Plugins[platform] = file
	}
	if err := r.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// semver is a release version.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// Run writes the release's remaining files.
func (r *Release) Run() error {
	if !semver.MatchString(r.Version) {
		return fmt.Errorf("version %q: want vX.Y.Z", r.Version)
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"chart OCI form", r.chartOCI},
		{"krew manifest", r.krew},
		{"release notes", r.notes},
		{"SBOM", r.sbom},
		{"checksums", r.checksums},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// chartOCI writes the chart as Helm's OCI artifact (what `helm push`
// uploads) in an OCI image layout tarball: `oras copy` or `crane push`
// put it in any registry, and `helm install oci://...` reads it there.
func (r *Release) chartOCI() error {
	tgz, err := os.ReadFile(filepath.Join(r.Dir, r.Chart))
	if err != nil {
		return err
	}
	meta, err := chartMeta(tgz)
	if err != nil {
		return err
	}
	config, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	layer := static.NewLayer(tgz, "application/vnd.cncf.helm.chart.content.v1.tar+gzip")
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer})
	if err != nil {
		return err
	}
	img = &rawConfig{Image: mutate.ConfigMediaType(img, "application/vnd.cncf.helm.config.v1+json"), config: config}
	dir, err := os.MkdirTemp("", "sluice-chart-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// Tagged with the chart's own version, as `helm push` tags it.
	version, _ := meta["version"].(string)
	if version == "" {
		return fmt.Errorf("%s: Chart.yaml has no version", r.Chart)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		return err
	}
	return ociimage.TarDir(dir, filepath.Join(r.Dir, strings.TrimSuffix(r.Chart, ".tgz")+".oci.tar"), r.Created)
}

// chartMeta is Chart.yaml of a chart package, as Helm's OCI config.
func chartMeta(tgz []byte) (map[string]any, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no Chart.yaml in the package")
		}
		if err != nil {
			return nil, err
		}
		if strings.Count(hdr.Name, "/") == 1 && strings.HasSuffix(hdr.Name, "/Chart.yaml") {
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			meta := map[string]any{}
			return meta, yaml.Unmarshal(data, &meta)
		}
	}
}

// rawConfig is an image whose config blob is given bytes (Helm's chart
// metadata, not an image config).
type rawConfig struct {
	v1.Image
	config []byte
}

func (i *rawConfig) RawConfigFile() ([]byte, error) { return i.config, nil }

func (i *rawConfig) ConfigName() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(i.config))
	return h, err
}

func (i *rawConfig) Manifest() (*v1.Manifest, error) {
	m, err := i.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	h, err := i.ConfigName()
	if err != nil {
		return nil, err
	}
	m.Config.Digest, m.Config.Size = h, int64(len(i.config))
	return m, nil
}

func (i *rawConfig) RawManifest() ([]byte, error) {
	m, err := i.Manifest()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func (i *rawConfig) Digest() (v1.Hash, error) {
	raw, err := i.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}

func (i *rawConfig) Size() (int64, error) {
	raw, err := i.RawManifest()
	return int64(len(raw)), err
}

// krew writes the krew plugin manifest for the kubectl-sluice archives.
func (r *Release) krew() error {
	if len(r.Plugins) == 0 {
		return fmt.Errorf("no kubectl-sluice archive")
	}
	var platforms []map[string]any
	keys := make([]string, 0, len(r.Plugins))
	for k := range r.Plugins {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, p := range keys {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q: want os/arch", p)
		}
		sum, err := sha256File(filepath.Join(r.Dir, r.Plugins[p]))
		if err != nil {
			return err
		}
		platforms = append(platforms, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]string{"os": osName, "arch": arch}},
			"uri":      r.URL + "/" + r.Version + "/" + r.Plugins[p],
			"sha256":   sum,
			"bin":      "kubectl-sluice",
			"files":    []map[string]string{{"from": "kubectl-sluice", "to": "."}, {"from": "LICENSE", "to": "."}},
		})
	}
	manifest := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]string{"name": "sluice"},
		"spec": map[string]any{
			"version":          r.Version,
			"homepage":         "https://github.com/sluice-sched/sluice",
			"shortDescription": "See sluice's gangs, claims and overflowed production",
			"description":      "kubectl sluice shows what the sluice scheduler does: gangs and their fabric placement, research claims and the production they move, and what runs on overflow nodes.",
			"platforms":        platforms,
		},
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.Dir, "sluice.krew.yaml"), data, 0o644)
}

// notes writes the version's CHANGELOG section (its own heading, or
// Unreleased) as RELEASE-NOTES.md, the upgrade notes (lines saying
// "Upgrading") gathered first.
func (r *Release) notes() error {
	data, err := os.ReadFile(r.Changelog)
	if err != nil {
		return err
	}
	section := changelogSection(string(data), r.Version)
	if section == "" {
		return fmt.Errorf("%s has no section \"## %s\" (rename \"## Unreleased\" to it for the release; a pre-release takes Unreleased)", r.Changelog, r.Version)
	}
	var upgrading []string
	for _, entry := range strings.Split(section, "\n- ") {
		if strings.Contains(entry, "Upgrading") {
			upgrading = append(upgrading, "- "+strings.TrimSpace(strings.TrimPrefix(entry, "- ")))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# sluice %s\n\n", r.Version)
	if len(upgrading) > 0 {
		b.WriteString("## Upgrade notes\n\n" + strings.Join(upgrading, "\n") + "\n\n")
	} else {
		b.WriteString("## Upgrade notes\n\nNone: `helm upgrade` and `kubectl apply --server-side -f manifests/crds/`.\n\n")
	}
	b.WriteString("## Changes\n\n" + strings.TrimSpace(section) + "\n")
	return os.WriteFile(filepath.Join(r.Dir, "RELEASE-NOTES.md"), []byte(b.String()), 0o644)
}

// changelogSection is the body under "## <version>"; a pre-release
// (vX.Y.Z-rc.N) without one takes "## Unreleased".
func changelogSection(changelog, version string) string {
	find := func(heading string) string {
		i := strings.Index(changelog, "\n## "+heading+"\n")
		if i < 0 {
			return ""
		}
		rest := changelog[i+len("\n## "+heading+"\n"):]
		if j := strings.Index(rest, "\n## "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	if s := find(version); s != "" || !strings.Contains(version, "-") {
		return s
	}
	return find("Unreleased")
}

// sbom writes an SPDX 2.3 document listing every Go module each binary
// was built from (its build information), as sbom.spdx.json.
func (r *Release) sbom() error {
	type pkg struct {
		SPDXID           string `json:"SPDXID"`
		Name             string `json:"name"`
		FilesAnalyzed    bool   `json:"filesAnalyzed"`
		VersionInfo      string `json:"versionInfo,omitempty"`
		DownloadLocation string `json:"downloadLocation"`
		ExternalRefs     []any  `json:"externalRefs,omitempty"`
		Checksums        []any  `json:"checksums,omitempty"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	var pkgs []pkg
	var rels []rel
	seen := map[string]bool{}
	unsafe := regexp.MustCompile(`[^A-Za-z0-9.-]+`)
	id := func(s string) string { return "SPDXRef-" + unsafe.ReplaceAllString(s, "-") }
	for _, b := range r.Binaries {
		info, err := buildinfo.ReadFile(b)
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		sum, err := sha256File(b)
		if err != nil {
			return err
		}
		binID := id("bin-" + filepath.Base(filepath.Dir(b)) + "-" + filepath.Base(b))
		pkgs = append(pkgs, pkg{SPDXID: binID, Name: filepath.Base(b), VersionInfo: r.Version, DownloadLocation: "NOASSERTION",
			Checksums: []any{map[string]string{"algorithm": "SHA256", "checksumValue": sum}}})
		rels = append(rels, rel{"SPDXRef-DOCUMENT", "DESCRIBES", binID})
		mods := append([]*debugModule{{Path: "stdlib", Version: info.GoVersion}}, modules(info)...)
		for _, m := range mods {
			mid := id(m.Path + "@" + m.Version)
			if !seen[mid] {
				seen[mid] = true
				p := pkg{SPDXID: mid, Name: m.Path, VersionInfo: m.Version, DownloadLocation: "NOASSERTION"}
				if m.Path != "stdlib" && m.Version != "" && m.Version != "(devel)" {
					p.ExternalRefs = []any{map[string]string{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
						"referenceLocator": "pkg:golang/" + m.Path + "@" + strings.ReplaceAll(m.Version, "+", "%2B")}}
				}
				pkgs = append(pkgs, p)
			}
			rels = append(rels, rel{binID, "CONTAINS", mid})
		}
	}
	doc := map[string]any{
		"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
		"name": "sluice-" + r.Version, "documentNamespace": "https://github.com/sluice-sched/sluice/releases/" + r.Version + "/sbom",
		"creationInfo": map[string]any{"created": r.Created.Format(time.RFC3339), "creators": []string{"Tool: sluice hack/release"}},
		"packages":     pkgs, "relationships": rels,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.Dir, "sbom.spdx.json"), append(data, '\n'), 0o644)
}

type debugModule struct{ Path, Version string }

// modules are the main module and its dependencies (replacements
// resolved).
func modules(info *buildinfo.BuildInfo) []*debugModule {
	out := []*debugModule{{Path: info.Main.Path, Version: info.Main.Version}}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		out = append(out, &debugModule{Path: d.Path, Version: d.Version})
	}
	return out
}

// checksums writes SHA256SUMS of every other file in the directory.
func (r *Release) checksums() error {
	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == "SHA256SUMS" {
			continue
		}
		sum, err := sha256File(filepath.Join(r.Dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(r.Dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package ociimage builds sluice's container images without Docker or a
// registry: one static binary per platform on an empty base, with the CA
// bundle and a non-root user, written as an OCI image layout in a tarball
// (what `ctr images import`, `crane push` and `skopeo copy oci-archive:`
// read). The Dockerfile produces the same files. A build is reproducible:
// every time in it is the one given (the commit's), so the same inputs give
// the same digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user every image runs as (distroless's nonroot).
const NonRoot = "65532:65532"

// Passwd and Group name the users of the image (the Dockerfile copies the
// same, from hack/image/rootfs).
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group  = "root:x:0:\nnonroot:x:65532:\n"
)

// CABundlePath is where the image keeps the CA bundle (Go's first place
// to look on Linux).
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// Spec is one image.
type Spec struct {
	// Name is the program's name: the binary is /usr/local/bin/<Name>,
	// the entrypoint, and the image's title.
	Name string
	// Ref is the image reference it is tagged with (e.g.
	// ghcr.io/sluice-sched/sluice-scheduler:v0.3.0, or local/…).
	Ref string
	// Binaries are the program's static binary by platform ("linux/amd64").
	Binaries map[string]string
	// CABundle is the file of PEM CA certificates to include.
	CABundle string
	// Version, Revision and Source label the image (OCI annotations).
	Version, Revision, Source string
	// Created is the time of every file and of the image (the commit's,
	// for a reproducible build).
	Created time.Time
}

// Write builds the image (an index of one image per platform) and writes
// it as an OCI layout tarball to out. It returns the index's digest.
func Write(s Spec, out string) (v1.Hash, error) {
	ref, err := name.ParseReference(s.Ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", s.Ref, err)
	}
	if len(s.Binaries) == 0 {
		return v1.Hash{}, fmt.Errorf("image %s: no binary", s.Name)
	}
	ca, err := os.ReadFile(s.CABundle)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("CA bundle: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return v1.Hash{}, fmt.Errorf("CA bundle %s holds no PEM certificate", s.CABundle)
	}
	platforms := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" {
			return v1.Hash{}, fmt.Errorf("platform %q: want os/arch", p)
		}
		img, err := s.image(plat, s.Binaries[p], ca)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image %s for %s: %w", s.Name, p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	idx = mutate.Annotations(idx, s.labels()).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp("", "sluice-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	tag := ref.Identifier()
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// The tag, as the OCI layout names it, and the whole reference,
		// as containerd's import does.
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          containerdName(ref),
	})); err != nil {
		return v1.Hash{}, err
	}
	return digest, TarDir(dir, out, s.Created)
}

// containerdName is the reference as containerd's CRI normalizes what a
// pod names (docker.io, not index.docker.io, for Docker Hub), so a pod's
// image finds the imported one.
func containerdName(ref name.Reference) string {
	n := ref.Name()
	if ref.Context().RegistryStr() == name.DefaultRegistry {
		n = "docker.io/" + strings.TrimPrefix(n, name.DefaultRegistry+"/")
	}
	return n
}

// labels are the OCI annotations and config labels.
func (s Spec) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    s.Name,
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	if s.Source != "" {
		l["org.opencontainers.image.source"] = s.Source
	}
	return l
}

// image is one platform's image: one layer of the files.
func (s Spec) image(plat *v1.Platform, binary string, ca []byte) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	if len(bin) < 4 || string(bin[1:4]) != "ELF" {
		return nil, fmt.Errorf("%s is not a Linux (ELF) binary", binary)
	}
	data, err := s.layer([]file{
		{path: "etc/group", mode: 0o644, data: []byte(Group)},
		{path: "etc/passwd", mode: 0o644, data: []byte(Passwd)},
		{path: strings.TrimPrefix(CABundlePath, "/"), mode: 0o644, data: ca},
		{path: "usr/local/bin/" + s.Name, mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "sluice ociimage: " + s.Name}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: s.Created}
	cf.Config.Entrypoint = []string{"/usr/local/bin/" + s.Name}
	cf.Config.User = NonRoot
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundlePath}
	cf.Config.Labels = s.labels()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, s.labels()).(v1.Image), nil
}

type file struct {
	path string
	mode int64
	data []byte
}

// layer is a tar of files and their parent directories, owned by root,
// every time Created.
func (s Spec) layer(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		parts := strings.Split(f.path, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: s.Created, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(f.data)), ModTime: s.Created, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TarDir writes dir's files (an OCI image layout), in name order, every
// time mtime, as a tarball at out.
func TarDir(dir, out string, mtime time.Time) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Stat(p)
		if err != nil {
			_ = f.Close()
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: mtime, Format: tar.FormatPAX}
		if fi.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			if err := tw.WriteHeader(hdr); err != nil {
				_ = f.Close()
				return err
			}
			continue
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		data, err := os.ReadFile(p)
		if err == nil {
			err = tw.WriteHeader(hdr)
		}
		if err == nil {
			_, err = tw.Write(data)
		}
		if err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

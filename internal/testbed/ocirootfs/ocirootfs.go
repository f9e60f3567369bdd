// Package ocirootfs unpacks an OCI image layout archive (oci-archive) into
// a root filesystem the way a container runtime does: the index's one
// manifest, its config, then each layer in order, applying whiteouts. It
// checks every blob's digest and size against its descriptor on the way,
// so a test of an image built here reads it through documents parsed
// apart from the library that wrote them.
package ocirootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform,omitempty"`
}

// Index is index.json.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is an image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Config is the part of an image config a runtime reads.
type Config struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Created      string `json:"created"`
	Config       struct {
		User       string            `json:"User"`
		Env        []string          `json:"Env"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// Image is an archive's content, read and checked.
type Image struct {
	Layout   string // the oci-layout file
	Index    Index
	Manifest Manifest
	Config   Config
	blobs    map[string][]byte
}

// Read reads an oci-archive whose index names exactly one image and
// checks every blob it references.
func Read(archive string) (*Image, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[path.Clean(h.Name)] = b
	}
	img := &Image{Layout: string(files["oci-layout"]), blobs: files}
	if err := json.Unmarshal(files["index.json"], &img.Index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if len(img.Index.Manifests) != 1 {
		return nil, fmt.Errorf("index.json names %d manifests, want 1", len(img.Index.Manifests))
	}
	mb, err := img.Blob(img.Index.Manifests[0])
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mb, &img.Manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	cb, err := img.Blob(img.Manifest.Config)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(cb, &img.Config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(img.Config.RootFS.DiffIDs) != len(img.Manifest.Layers) {
		return nil, fmt.Errorf("config lists %d diff_ids for %d layers", len(img.Config.RootFS.DiffIDs), len(img.Manifest.Layers))
	}
	return img, nil
}

// Blob returns the blob d names, checked against d's digest and size.
func (img *Image) Blob(d Descriptor) ([]byte, error) {
	alg, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || alg != "sha256" {
		return nil, fmt.Errorf("descriptor digest %q: not sha256:<hex>", d.Digest)
	}
	b, ok := img.blobs["blobs/sha256/"+hexDigest]
	if !ok {
		return nil, fmt.Errorf("blob %s is not in the archive", d.Digest)
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	if got := sha256Hex(b); got != hexDigest {
		return nil, fmt.Errorf("blob %s: content has digest sha256:%s", d.Digest, got)
	}
	return b, nil
}

// WriteLayout writes the archive's files into dir as an OCI image layout
// directory, the form tools such as umoci and skopeo read.
func (img *Image) WriteLayout(dir string) error {
	for name, b := range img.blobs {
		if name == ".." || strings.HasPrefix(name, "../") || path.IsAbs(name) {
			return fmt.Errorf("archive entry %q leaves the layout", name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Unpack applies the layers in order into root, as root (owners kept),
// checking each uncompressed layer against the config's diff_id.
func (img *Image) Unpack(root string) error {
	for i, d := range img.Manifest.Layers {
		b, err := img.Blob(d)
		if err != nil {
			return err
		}
		var r io.Reader = bytes.NewReader(b)
		switch d.MediaType {
		case "application/vnd.oci.image.layer.v1.tar+gzip":
			gz, err := gzip.NewReader(r)
			if err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
			r = gz
		case "application/vnd.oci.image.layer.v1.tar":
		default:
			return fmt.Errorf("layer %d: media type %q", i, d.MediaType)
		}
		raw, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		if got := "sha256:" + sha256Hex(raw); got != img.Config.RootFS.DiffIDs[i] {
			return fmt.Errorf("layer %d: uncompressed digest %s, config's diff_id %s", i, got, img.Config.RootFS.DiffIDs[i])
		}
		if err := ApplyLayer(root, bytes.NewReader(raw)); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}

// ApplyLayer applies one uncompressed layer tar onto root: ".wh.<name>"
// removes <name> of the layers below, ".wh..wh..opq" empties its
// directory of what the layers below put there.
func ApplyLayer(root string, r io.Reader) error {
	created := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		dst := filepath.Join(root, name)
		dirName, base := path.Split(name)
		if base == ".wh..wh..opq" {
			entries, err := os.ReadDir(filepath.Join(root, dirName))
			if err != nil && !os.IsNotExist(err) {
				return err
			}
			for _, e := range entries {
				if !created[path.Join(dirName, e.Name())] {
					if err := os.RemoveAll(filepath.Join(root, dirName, e.Name())); err != nil {
						return err
					}
				}
			}
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			if err := os.RemoveAll(filepath.Join(root, dirName, strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if fi, err := os.Lstat(dst); err == nil && !(fi.IsDir() && h.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(dst); err != nil {
				return err
			}
		}
		mode := os.FileMode(h.Mode & 0o777)
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return err
			}
		case tar.TypeLink:
			target := filepath.Join(root, path.Clean("/"+h.Linkname))
			if err := os.Link(target, dst); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry type %q is not unpacked here", h.Name, h.Typeflag)
		}
		created[name] = true
		if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeSymlink {
			if err := os.Chmod(dst, mode); err != nil {
				return err
			}
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

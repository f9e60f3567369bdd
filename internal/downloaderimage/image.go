package downloaderimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ironic-go/ironic-agent/internal/downloader"
)

// The image's fixed names.
const (
	// Entrypoint is the command Metal3's manifests run (BMO's kustomize
	// names it as the container's command); it links to Binary.
	Entrypoint = "/usr/local/bin/get-resource.sh"
	Binary     = "/usr/local/bin/ironic-agent-downloader"
	// UID and GID are ironic-image's ironic user and group, which
	// ironic-standalone-operator and BMO's manifests run the downloader as.
	UID = 997
	GID = 994
	// RefName is the name the archive's index gives the image
	// (ironic-agent-downloader:<version>).
	RefName = "ironic-agent-downloader"
	// DefaultSource is the org.opencontainers.image.source label.
	DefaultSource = "https://github.com/ironic-go/ironic-agent"
)

// Options say what to build.
type Options struct {
	Release    Release
	Entrypoint string    // the static ironic-agent-downloader built for Arch
	Arch       string    // the image's platform: amd64 or arm64
	Created    time.Time // every time in the image (SOURCE_DATE_EPOCH)
	Source     string    // org.opencontainers.image.source
	Revision   string    // org.opencontainers.image.revision, when known
}

// Env is the image's environment.
var Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}

// Labels are the image's labels.
func Labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "ironic-agent downloader",
		"org.opencontainers.image.description": "Installs ironic-agent's kernel and initramfs for Metal3's ironic-image: a drop-in for ironic-ipa-downloader, with the release embedded",
		"org.opencontainers.image.version":     o.Release.Version,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// entry is one file of a layer.
type entry struct {
	name     string // absolute, cleaned
	mode     fs.FileMode
	uid, gid int
	link     string // symbolic link target
	data     []byte // small files
	src      string // large files, copied from here
	size     int64
}

// Build writes the image as an OCI image layout archive (oci-archive) to
// out. Two builds from the same inputs give the same bytes.
func Build(o Options, out io.Writer) (v1.Hash, error) {
	if o.Arch != "amd64" && o.Arch != "arm64" {
		return v1.Hash{}, fmt.Errorf("image architecture %q: amd64 or arm64", o.Arch)
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	work, err := os.MkdirTemp("", "mkdownloader-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(work)

	epoch := o.Created.UTC().Truncate(time.Second)
	bin, err := os.Stat(o.Entrypoint)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("entrypoint binary: %w", err)
	}
	base := []entry{
		dir("/etc", 0o755), dir("/usr", 0o755), dir("/usr/local", 0o755), dir("/usr/local/bin", 0o755),
		dir("/tmp", fs.ModeSticky|0o777),
		{name: "/shared", mode: fs.ModeDir | 0o755, uid: UID, gid: GID},
		{name: "/etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nironic:x:%d:%d:ironic:/shared:/sbin/nologin\n", UID, GID))},
		{name: "/etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nironic:x:%d:\n", GID))},
		{name: Binary, mode: 0o755, src: o.Entrypoint, size: bin.Size()},
		{name: Entrypoint, mode: fs.ModeSymlink | 0o777, link: path.Base(Binary)},
	}
	ramdisk := []entry{dir("/usr", 0o755), dir("/usr/share", 0o755), dir("/usr/share/ironic-agent", 0o755),
		dir(downloader.EmbeddedDir, 0o755), dir(downloader.EmbeddedDir+"/files", 0o755)}
	for _, f := range o.Release.Files {
		p := downloader.EmbeddedDir + "/files/" + f.Name
		ramdisk = append(ramdisk,
			entry{name: p, mode: 0o644, src: f.Path, size: f.Size},
			entry{name: p + ".sha256", mode: 0o644, data: []byte(f.SHA256 + "  " + f.Name + "\n")})
	}

	var adds []mutate.Addendum
	for i, l := range []struct {
		entries []entry
		what    string
	}{
		{base, "the entrypoint " + Binary + " (" + Entrypoint + "), the ironic user, /shared"},
		{ramdisk, fmt.Sprintf("ironic-agent %s's kernel and initramfs in %s", o.Release.Version, downloader.EmbeddedDir)},
	} {
		p := filepath.Join(work, fmt.Sprintf("layer%d.tar", i))
		if err := writeLayer(p, l.entries, epoch); err != nil {
			return v1.Hash{}, err
		}
		layer, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %d: %w", i, err)
		}
		adds = append(adds, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "mkdownloader: " + l.what, Comment: "ironic-agent " + o.Release.Version}})
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = o.Arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Env:        Env,
		Entrypoint: []string{Entrypoint},
		WorkingDir: "/",
		Labels:     Labels(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	lp, err := layout.Write(filepath.Join(work, "oci"), empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	err = lp.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: o.Arch}),
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": RefName + ":" + o.Release.Version}))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image layout: %w", err)
	}
	if err := tarDir(filepath.Join(work, "oci"), out, epoch); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

func dir(name string, mode fs.FileMode) entry {
	return entry{name: name, mode: fs.ModeDir | mode}
}

// writeLayer writes entries as an uncompressed layer tar: sorted by name,
// owned by root unless said otherwise, every time the epoch.
func writeLayer(p string, entries []entry, epoch time.Time) error {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range entries {
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.name, "/"),
			Mode:    int64(e.mode.Perm()),
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if e.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch {
		case e.mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		case e.src != "":
			h.Typeflag, h.Size = tar.TypeReg, e.size
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer %s: %w", e.name, err)
		}
		if e.src != "" {
			if err := copyExactly(tw, e.src, e.size); err != nil {
				return err
			}
		} else if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// copyExactly copies size bytes of src, failing if the file changed size
// since it was measured.
func copyExactly(w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if n != size {
		return fmt.Errorf("%s: %d bytes, %d when measured: it changed during the build", src, n, size)
	}
	return nil
}

// tarDir writes the image layout directory as the oci-archive tar:
// sorted entries, fixed times and owners.
func tarDir(root string, out io.Writer, epoch time.Time) error {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tw := tar.NewWriter(out)
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			return fmt.Errorf("image layout: %s is neither a file nor a directory", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyExactly(tw, p, fi.Size()); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

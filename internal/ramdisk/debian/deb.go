package debian

import (
	"archive/tar"
	"bufio"
	"bytes"

	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// ArMember is one member of an ar archive (a .deb's outer format).
type ArMember struct {
	Name string
	Size int64
}

// ReadAr calls fn for every member of the ar archive r with a reader of
// its data; fn need not read it all. It stops early, without error, when
// fn returns errStop.
func ReadAr(r io.Reader, fn func(ArMember, io.Reader) error) error {
	br := bufio.NewReader(r)
	magic := make([]byte, 8)
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != "!<arch>\n" {
		return errors.New("not an ar archive (no !<arch> magic)")
	}
	hdr := make([]byte, 60)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("ar member header: %w", err)
		}
		if string(hdr[58:60]) != "`\n" {
			return fmt.Errorf("ar member header %q: bad terminator", hdr[:16])
		}
		name := strings.TrimRight(strings.TrimSpace(string(hdr[:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("ar member %q: bad size %q", name, hdr[48:58])
		}
		lr := &io.LimitedReader{R: br, N: size}
		if err := fn(ArMember{Name: name, Size: size}, lr); err != nil {
			if err == errStop {
				return nil
			}
			return err
		}
		// Skip what fn left, and the padding to an even offset.
		if _, err := io.Copy(io.Discard, lr); err != nil {
			return fmt.Errorf("ar member %q: %w", name, err)
		}
		if lr.N > 0 {
			return fmt.Errorf("ar member %q: truncated", name)
		}
		if size%2 == 1 {
			if _, err := br.ReadByte(); err != nil && err != io.EOF {
				return fmt.Errorf("ar member %q: %w", name, err)
			}
		}
	}
}

var errStop = errors.New("stop")

// decompress returns a reader of member name's contents by its suffix
// (.gz, .xz, .zst or none), and a function to release it.
func decompress(name string, r io.Reader) (io.Reader, func(), error) {
	switch {
	case strings.HasSuffix(name, ".gz"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case strings.HasSuffix(name, ".xz"):
		zr, err := xz.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() {}, nil
	case strings.HasSuffix(name, ".zst"):
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	case strings.HasSuffix(name, ".tar"), !strings.Contains(path.Base(name), "."):
		return r, func() {}, nil
	}
	return nil, nil, fmt.Errorf("compression of %s not supported (want .gz, .xz or .zst)", name)
}

// debTar calls fn with the tar stream of the .deb's member called
// prefix.tar[.gz|.xz|.zst] ("control" or "data").
func debTar(deb, prefix string, fn func(*tar.Reader) error) error {
	f, err := os.Open(deb)
	if err != nil {
		return fmt.Errorf("debian: %w", err)
	}
	defer f.Close()
	found := false
	err = ReadAr(f, func(m ArMember, r io.Reader) error {
		if m.Name != prefix+".tar" && !strings.HasPrefix(m.Name, prefix+".tar.") {
			return nil
		}
		found = true
		zr, done, err := decompress(m.Name, r)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		defer done()
		if err := fn(tar.NewReader(zr)); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		return errStop
	})
	if err != nil {
		return fmt.Errorf("debian: %s: %w", deb, err)
	}
	if !found {
		return fmt.Errorf("debian: %s: no %s.tar member: not a Debian package", deb, prefix)
	}
	return nil
}

// Control returns the control paragraph (./control of control.tar) of
// the .deb at deb: Package, Version, Depends, Pre-Depends...
func Control(deb string) (Stanza, error) {
	var st Stanza
	err := debTar(deb, "control", func(tr *tar.Reader) error {
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return errors.New("no control file")
			}
			if err != nil {
				return err
			}
			if path.Clean(h.Name) != "control" {
				continue
			}
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return err
			}
			return ReadStanzas(bytes.NewReader(b), "control", func(s Stanza) error {
				if st == nil {
					st = s
				}
				return nil
			})
		}
	})
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("debian: %s: empty control file", deb)
	}
	return st, nil
}

// Extract unpacks the data.tar of the .deb at deb into the directory dir
// (created when missing), as dpkg-deb -x does for an unprivileged user:
// regular files, directories, symbolic links and hard links with their
// permission bits and modification times; owners are not kept. A member
// whose path leaves dir (an absolute path, "..", or through a symbolic
// link of the package) fails the extraction, as does a device, a FIFO or
// any other kind of member.
func Extract(deb, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("debian: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("debian: %w", err)
	}
	defer root.Close()
	return debTar(deb, "data", func(tr *tar.Reader) error {
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := extractOne(root, h, tr); err != nil {
				return err
			}
		}
	})
}

// memberPath returns a tar member's path relative to the extraction
// root, or an error when it would leave it.
func memberPath(name string) (string, error) {
	p := strings.TrimPrefix(name, "./")
	if p == "" || p == "." || p == "./" {
		return ".", nil
	}
	p = strings.TrimSuffix(p, "/")
	if !fs.ValidPath(p) {
		return "", fmt.Errorf("member %q: path leaves the target directory", name)
	}
	return p, nil
}

func extractOne(root *os.Root, h *tar.Header, r io.Reader) error {
	p, err := memberPath(h.Name)
	if err != nil {
		return err
	}
	mode := fs.FileMode(h.Mode).Perm()
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if p == "." {
			return nil
		}
		if err := root.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return root.Chmod(p, mode|0o700)
	case tar.TypeReg:
		_ = root.Remove(p)
		f, err := root.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode|0o200)
		if err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		if err := root.Chmod(p, mode); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return root.Chtimes(p, h.ModTime, h.ModTime)
	case tar.TypeSymlink:
		// The target is not resolved here: a package's absolute links
		// name the installed system, and whoever follows them checks.
		_ = root.Remove(p)
		if err := root.Symlink(h.Linkname, p); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return nil
	case tar.TypeLink:
		old, err := memberPath(h.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %q: %w", h.Name, err)
		}
		_ = root.Remove(p)
		if err := root.Link(old, p); err != nil {
			return fmt.Errorf("member %q: %w", h.Name, err)
		}
		return nil
	}
	return fmt.Errorf("member %q: type %q is not a file, directory or link", h.Name, h.Typeflag)
}

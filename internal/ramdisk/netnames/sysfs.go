package netnames

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// sysfs reads a sysfs tree below root (the machine's /sys, or a fixture's
// copy). Paths are slash-separated and relative to root; symbolic links are
// followed by this code, never by the kernel, so a link pointing out of
// the tree (a fixture's, or a hostile one) is an error, not a read of the
// host's files.
type sysfs struct {
	root string
	// visit, when set, is told every path read below root (dir: listed),
	// so a capture can copy what naming needs (see Trace).
	visit func(rel string, dir bool)
}

func (s sysfs) seen(rel string, dir bool) {
	if s.visit != nil {
		s.visit(rel, dir)
	}
}

// list returns the entries of directory rel, sorted by name.
func (s sysfs) list(rel string) ([]os.DirEntry, error) {
	s.seen(rel, true)
	p, err := s.resolve(rel)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(filepath.Join(s.root, filepath.FromSlash(p)))
}

// maxLinks bounds the links followed in one path, as the kernel's 40.
const maxLinks = 40

var errOutside = errors.New("path leaves the sysfs tree")

// resolve returns the canonical form of p: every symbolic link followed,
// "." and ".." applied.
func (s sysfs) resolve(p string) (string, error) {
	var done []string
	rest := strings.Split(p, "/")
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", fmt.Errorf("%s: %w", p, errOutside)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(cur)))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many symbolic links", p)
		}
		target, err := os.Readlink(filepath.Join(s.root, filepath.FromSlash(cur)))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			// sysfs makes relative links only.
			return "", fmt.Errorf("%s: absolute link %q: %w", cur, target, errOutside)
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return path.Join(done...), nil
}

// read returns attribute name of the device at dev, without the trailing
// newline (as sd-device reads one); ok is false when it cannot be read,
// which for sysfs includes attributes the driver does not support.
func (s sysfs) read(dev, name string) (string, bool) {
	s.seen(dev+"/"+name, false)
	p, err := s.resolve(dev + "/" + name)
	if err != nil {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(p)))
	if err != nil {
		return "", false
	}
	return strings.TrimRight(string(b), "\n\r"), true
}

// readBytes returns up to n bytes of attribute name (binary ones: a PCI
// function's config space).
func (s sysfs) readBytes(dev, name string, n int) ([]byte, bool) {
	s.seen(dev+"/"+name, false)
	p, err := s.resolve(dev + "/" + name)
	if err != nil {
		return nil, false
	}
	f, err := os.Open(filepath.Join(s.root, filepath.FromSlash(p)))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, n)
	m, _ := f.Read(buf)
	return buf[:m], true
}

// exists reports whether p (relative to dev) is there, links followed.
func (s sysfs) exists(dev, name string) bool {
	s.seen(dev+"/"+name, false)
	p, err := s.resolve(dev + "/" + name)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(s.root, filepath.FromSlash(p)))
	return err == nil
}

// subsystem is the name of the subsystem dev belongs to ("" for none).
func (s sysfs) subsystem(dev string) string {
	s.seen(dev+"/subsystem", false)
	p, err := s.resolve(dev + "/subsystem")
	if err != nil {
		return ""
	}
	return path.Base(p)
}

// uevent returns key from dev's uevent file (DEVTYPE, IFINDEX).
func (s sysfs) uevent(dev, key string) (string, bool) {
	v, ok := s.read(dev, "uevent")
	if !ok {
		return "", false
	}
	for line := range strings.SplitSeq(v, "\n") {
		if k, val, ok := strings.Cut(line, "="); ok && k == key {
			return val, true
		}
	}
	return "", false
}

// isDevice reports whether dir is a device (as sd-device decides: it has a
// uevent file; a fixture's copy may have only the subsystem link).
func (s sysfs) isDevice(dir string) bool {
	return s.exists(dir, "uevent") || s.exists(dir, "subsystem")
}

// parent returns dev's parent device, or "" at the top of devices/.
func (s sysfs) parent(dev string) string {
	for p := path.Dir(dev); p != "." && p != "/" && p != "devices"; p = path.Dir(p) {
		if s.isDevice(p) {
			return p
		}
	}
	return ""
}

// ancestor returns the nearest ancestor of dev in subsystem (and, when
// devtype is set, of that DEVTYPE), or "".
func (s sysfs) ancestor(dev, subsystem, devtype string) string {
	for p := s.parent(dev); p != ""; p = s.parent(p) {
		if s.subsystem(p) != subsystem {
			continue
		}
		if devtype != "" {
			if t, _ := s.uevent(p, "DEVTYPE"); t != devtype {
				continue
			}
		}
		return p
	}
	return ""
}

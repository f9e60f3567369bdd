package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// rootFS reads files below one root directory, the way prometheus/procfs's
// FS values do: every reader of the collector goes through it, never through
// an absolute path, so the same code reads "/" and a fixture tree.
//
// Paths given to it are slash-separated and relative to the root
// ("sys/class/net"). When trace is set (capture-fixture), every path asked
// for is remembered, so the capture copies exactly the files the collector
// read: a new reader needs no change to the capture code as long as it uses
// rootFS.
type rootFS struct {
	root  string
	trace *tracer
}

// newRootFS returns a rootFS for root ("" means "/").
func newRootFS(root string, trace *tracer) rootFS {
	if root == "" {
		root = "/"
	}
	return rootFS{root: filepath.Clean(root), trace: trace}
}

// live reports whether the root is the running system, the only case in
// which netlink, ethtool and uname may be asked.
func (f rootFS) live() bool { return f.root == "/" }

// Path returns the host path of rel below the root.
func (f rootFS) Path(rel string) string { return joinRoot(f.root, rel) }

// joinRoot is filepath.Join(root, rel) for a slash-separated rel. Most
// paths are clean already; those are joined with one allocation instead
// of filepath.Join's three, which the thousand-odd reads of one
// inventory feel.
func joinRoot(root, rel string) string {
	if rel == "" || rel[0] == '/' || strings.Contains(rel, "..") || path.Clean(rel) != rel ||
		root == "" || filepath.Clean(root) != root {
		return filepath.Join(root, filepath.FromSlash(rel))
	}
	if root == "/" {
		return "/" + rel
	}
	return root + "/" + rel
}

// ReadFile reads rel below the root.
func (f rootFS) ReadFile(rel string) ([]byte, error) {
	f.trace.add(rel, accessRead)
	b, err := readFile(f.Path(rel), maxFileSize)
	if err == nil {
		f.trace.content(rel, b)
	}
	return b, err
}

// maxFileSize bounds one read; the largest inputs are SMBIOS tables and
// /proc/cpuinfo of big machines (about 1 KiB per CPU).
const maxFileSize = 16 << 20

// readFile reads a whole file with plain open/read/close system calls.
// os.ReadFile also registers every file with the runtime poller (fcntl,
// epoll_ctl) and fstats it: four extra system calls per sysfs attribute,
// which were half of the inventory's system calls. A file longer than limit
// is an error, so a garbled source cannot exhaust memory.
func readFile(name string, limit int) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("larger than %d bytes", limit)}
			}
			buf = slices.Grow(buf, len(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			if len(buf) > limit {
				return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("larger than %d bytes", limit)}
			}
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// ReadAttr reads a small sysfs attribute into buf in one read and returns
// it without surrounding white space, as ReadString. sysfs serves a text
// attribute whole in its first read, so a read that leaves room in buf
// has the whole file; one that fills buf falls back to ReadString.
func (f rootFS) ReadAttr(rel string, buf []byte) (string, error) {
	f.trace.add(rel, accessRead)
	name := f.Path(rel)
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var n int
	for {
		n, err = unix.Read(fd, buf)
		if err != unix.EINTR {
			break
		}
	}
	unix.Close(fd)
	if err != nil {
		return "", &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if n == len(buf) {
		return f.ReadString(rel)
	}
	f.trace.content(rel, buf[:n])
	return strings.TrimSpace(string(buf[:n])), nil
}

// ReadString reads rel and trims surrounding white space, as sysfs attribute
// files end with a newline.
func (f rootFS) ReadString(rel string) (string, error) {
	b, err := f.ReadFile(rel)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Readlink returns the target of the symbolic link rel.
func (f rootFS) Readlink(rel string) (string, error) {
	f.trace.add(rel, accessLink)
	return os.Readlink(f.Path(rel))
}

// Stat follows symbolic links.
func (f rootFS) Stat(rel string) (fs.FileInfo, error) {
	f.trace.add(rel, accessStat)
	return os.Stat(f.Path(rel))
}

// Lstat does not follow a final symbolic link.
func (f rootFS) Lstat(rel string) (fs.FileInfo, error) {
	f.trace.add(rel, accessLink)
	return os.Lstat(f.Path(rel))
}

// ReadDir lists rel sorted by name. Sorting (rather than the kernel's
// hash order, which IPA's os.listdir returns) keeps the inventory stable and
// identical between a live root and its captured copy; the one listing
// whose order the inventory shows, sys/class/net's, uses ReadDirOrder.
func (f rootFS) ReadDir(rel string) ([]fs.DirEntry, error) {
	f.trace.add(rel, accessDir)
	entries, err := os.ReadDir(f.Path(rel))
	// Git keeps no empty directory, so captures put a keepFile into each
	// (sys/firmware/efi must survive); it is not part of the machine.
	return slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return e.Name() == keepFile }), err
}

// ReadDirOrder lists rel in the directory's own order, unsorted: for sysfs
// kernfs's, which IPA's os.listdir keeps and the inventory's NICs follow.
func (f rootFS) ReadDirOrder(rel string) ([]fs.DirEntry, error) {
	f.trace.add(rel, accessDir)
	d, err := os.Open(f.Path(rel))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	return slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return e.Name() == keepFile }), err
}

// keepFile marks an empty directory of a fixture tree so git keeps it.
// Neither sysfs nor procfs has an entry of that name.
const keepFile = ".gitkeep"

// Exists reports whether rel exists (following links); errors other than
// "does not exist" count as existing so that they surface at the read.
func (f rootFS) Exists(rel string) bool {
	_, err := f.Stat(rel)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// accessKind says what a traced path was used for, which decides how the
// capture copies it.
type accessKind uint8

const (
	accessStat accessKind = 1 << iota // existence and type
	accessRead                        // file content
	accessLink                        // the link itself
	accessDir                         // directory listing
)

// tracer collects the paths the collector touched during one Collect, and
// the bytes of every file it read: the capture writes those bytes rather
// than reading the file again, so a value that changes between two reads
// (cpu MHz, a counter) cannot make the tree disagree with the inventory.
type tracer struct {
	mu    sync.Mutex
	paths map[string]*tracedPath
}

func newTracer() *tracer { return &tracer{paths: map[string]*tracedPath{}} }

func (t *tracer) entry(rel string) *tracedPath {
	rel = path.Clean("/" + filepath.ToSlash(rel))[1:]
	e, ok := t.paths[rel]
	if !ok {
		e = &tracedPath{Path: rel}
		t.paths[rel] = e
	}
	return e
}

func (t *tracer) add(rel string, k accessKind) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.entry(rel).Kind |= k
	t.mu.Unlock()
}

// content remembers the bytes of the first successful read of rel.
func (t *tracer) content(rel string, b []byte) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if e := t.entry(rel); e.Data == nil {
		e.Data = append([]byte{}, b...)
	}
	t.mu.Unlock()
}

// tracedPath is one path, everything done with it, and what was read.
type tracedPath struct {
	Path string
	Kind accessKind
	Data []byte // non-nil once read
}

// list returns the traced paths sorted, so captures are reproducible.
func (t *tracer) list() []tracedPath {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]tracedPath, 0, len(t.paths))
	for _, e := range t.paths {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

// sysReader reads files below one root directory on behalf of the disk
// collector. Paths are slash-separated and relative to the root
// ("sys/block/sda/size"); symlinks are followed inside the root only, so an
// absolute link in a fixture tree cannot escape to the host's /sys.
//
// It also remembers which files it already warned about: the brief is one
// warning per bad file, however many fields that file feeds.
type sysReader struct {
	root   string
	log    *slog.Logger
	warned logging.Once
	// trace records the paths used, for capture-fixture (nil otherwise).
	trace *tracer
}

func newSysReader(root string, log *slog.Logger) *sysReader {
	return &sysReader{root: root, log: log}
}

// abs turns a root-relative path into a host path.
func (r *sysReader) abs(rel string) string {
	return joinRoot(r.root, rel)
}

// warnOnce logs a warning naming the file and why its value is unknown,
// unless one was logged for that file already (a file that failed to read
// is not warned about again as missing).
func (r *sysReader) warnOnce(rel, reason string) {
	r.warned.Warn(r.log, rel, "disk inventory: value unknown", "file", "/"+rel, "reason", reason)
}

// maxAttr bounds a sysfs attribute read; VPD pages are the largest at a
// few KiB.
const maxAttr = 64 << 10

// read returns a file's bytes. A missing file is reported as
// fs.ErrNotExist without a warning (most attributes are optional); any
// other failure is warned about and returned.
func (r *sysReader) read(rel string) ([]byte, error) {
	r.trace.add(rel, accessRead)
	// readFile (fs.go) uses plain open/read/close: sysfs attributes are
	// most of the disk collector's system calls.
	b, err := readFile(r.abs(rel), maxAttr)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fs.ErrNotExist
		}
		r.warnOnce(rel, err.Error())
		return nil, err
	}
	return b, nil
}

// attr reads a text attribute without its trailing newline (what
// util-linux's ul_path_read_string returns). ok is false when the file is
// missing or unreadable.
func (r *sysReader) attr(rel string) (string, bool) {
	b, err := r.read(rel)
	if err != nil {
		return "", false
	}
	return strings.TrimSuffix(string(b), "\n"), true
}

// attrInt reads a decimal integer attribute; a missing file gives ok false
// silently, a garbled one warns.
func (r *sysReader) attrInt(rel string) (int64, bool) {
	s, ok := r.attr(rel)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		r.warnOnce(rel, fmt.Sprintf("not a decimal integer: %q", truncate(s, 40)))
		return 0, false
	}
	return v, true
}

// exists tells whether a path exists (following links).
func (r *sysReader) exists(rel string) bool {
	r.trace.add(rel, accessStat)
	_, err := os.Stat(r.abs(rel))
	return err == nil
}

// isDir tells whether a path is a directory (following links).
func (r *sysReader) isDir(rel string) bool {
	r.trace.add(rel, accessStat)
	fi, err := os.Stat(r.abs(rel))
	return err == nil && fi.IsDir()
}

// entries lists a directory's names, sorted; nil when it does not exist.
func (r *sysReader) entries(rel string) []string {
	r.trace.add(rel, accessDir)
	des, err := os.ReadDir(r.abs(rel))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(des))
	for _, de := range des {
		if de.Name() == keepFile {
			continue // fixture marker, not part of the machine
		}
		out = append(out, de.Name())
	}
	return out
}

// readlink returns a symlink's target as stored.
func (r *sysReader) readlink(rel string) (string, bool) {
	r.trace.add(rel, accessLink)
	t, err := os.Readlink(r.abs(rel))
	if err != nil {
		return "", false
	}
	return filepath.ToSlash(t), true
}

// maxLinkHops matches the kernel's limit on nested symlinks.
const maxLinkHops = 40

// resolve follows every symlink in rel and returns the canonical
// root-relative path. Absolute link targets are taken relative to the root,
// and ".." never climbs above it, as if the root were chrooted.
func (r *sysReader) resolve(rel string) (string, error) {
	pending := splitPath(rel)
	// done is the resolved part, kept joined: every component is a plain
	// name, so this is path.Join of them without a join per step.
	done := ""
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case ".":
			continue
		case "..":
			if i := strings.LastIndexByte(done, '/'); i >= 0 {
				done = done[:i]
			} else {
				done = ""
			}
			continue
		}
		cand := c
		if done != "" {
			cand = done + "/" + c
		}
		r.trace.add(cand, accessLink)
		fi, err := os.Lstat(r.abs(cand))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = cand
			continue
		}
		hops++
		if hops > maxLinkHops {
			return "", fmt.Errorf("/%s: more than %d symlinks", rel, maxLinkHops)
		}
		t, err := os.Readlink(r.abs(cand))
		if err != nil {
			return "", err
		}
		t = filepath.ToSlash(t)
		if strings.HasPrefix(t, "/") {
			done = ""
		}
		pending = append(splitPath(t), pending...)
	}
	return done, nil
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

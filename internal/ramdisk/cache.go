package ramdisk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"golang.org/x/sys/unix"
)

// cacheFormat changes whenever an entry's layout or meaning changes, so an
// older entry is never taken for a newer one.
const cacheFormat = "ironic-agent ramdisk cache 3"

// cacheEntryMaxAge is how long an entry nobody used is kept: every agent
// change makes a new entry (about 26 MiB), and a day is more than any test
// run.
const cacheEntryMaxAge = 48 * time.Hour

// entryMeta is an entry's result.json: what Build returned, plus the
// digests the files are checked against before every reuse.
type entryMeta struct {
	Key          string
	Modules      []kmod.Module
	Uncompressed int64
	Report       Report
	SHA256       map[string]string // file name in the entry -> hex digest
}

// BuildCached is Build through a content-keyed cache in
// cacheDir/ramdisk: the key is the hash of the agent binary, the kernel
// (package, version, bzImage), the module names, every extra file and the
// CA bundle Build copies in, plus keyExtra (for what Build's caller knows
// changes the output, e.g. the source of the ramdisk code itself). Parallel
// callers, in one process or many (go test runs packages in parallel),
// build an entry once: the first takes an flock on the key, builds into a
// temporary directory and renames it into place; the others wait on the
// lock and reuse it. An entry is used only when its result.json exists and
// every file matches the digest recorded in it, so a partial or damaged
// entry is rebuilt, never booted. The result's Agent is the copy of the
// binary kept in the entry.
func BuildCached(ctx context.Context, opts Options, cacheDir string, keyExtra ...string) (*Result, error) {
	if opts.Kernel == nil || opts.Agent == "" {
		return nil, fmt.Errorf("ramdisk: need a kernel and an agent binary")
	}
	key, err := cacheKey(opts, keyExtra)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cacheDir, "ramdisk")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: cache: %w", err)
	}
	entry := filepath.Join(root, key)
	if res, err := loadEntry(entry, key); err == nil {
		return res, nil
	}
	unlock, err := lockFile(ctx, entry+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Whoever held the lock before may have built it.
	if res, err := loadEntry(entry, key); err == nil {
		return res, nil
	}
	// A damaged entry, or the leftovers of a build that was killed.
	if err := os.RemoveAll(entry); err != nil {
		return nil, fmt.Errorf("ramdisk: cache: %w", err)
	}
	stale, _ := filepath.Glob(entry + ".tmp-*")
	for _, s := range stale {
		_ = os.RemoveAll(s)
	}
	tmp, err := os.MkdirTemp(root, key+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("ramdisk: cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	// The VM tests boot the uncompressed archive (see Options.Raw).
	opts.Raw = true
	res, err := Build(ctx, opts, tmp)
	if err != nil {
		return nil, err
	}
	if err := copyFile(opts.Agent, filepath.Join(tmp, agentName)); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(tmp, agentName), 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: cache: %w", err)
	}
	meta := entryMeta{Key: key, Modules: res.Modules, Uncompressed: res.Uncompressed, Report: res.Report, SHA256: map[string]string{}}
	for _, name := range entryFiles() {
		sum, err := FileSHA256(filepath.Join(tmp, name))
		if err != nil {
			return nil, err
		}
		meta.SHA256[name] = sum
		if err := syncFile(filepath.Join(tmp, name)); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	// result.json last: its presence says the files before it are whole.
	if err := os.WriteFile(filepath.Join(tmp, "result.json"), b, 0o644); err != nil {
		return nil, fmt.Errorf("ramdisk: cache: %w", err)
	}
	if err := syncFile(filepath.Join(tmp, "result.json")); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, entry); err != nil {
		return nil, fmt.Errorf("ramdisk: cache: %w", err)
	}
	PruneCache(root, key, cacheEntryMaxAge)
	res, err = loadEntry(entry, key)
	if err != nil {
		return nil, err
	}
	res.Cached = false
	return res, nil
}

// agentName is the agent binary's name inside a cache entry.
const agentName = "ironic-agent"

// entryFiles are the files of a cache entry, each checked against its
// digest before the entry is used.
func entryFiles() []string {
	return []string{KernelName, InitramfsName, InitramfsRawName, agentName}
}

func loadEntry(dir, key string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, err
	}
	var meta entryMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("ramdisk: cache entry %s: %w", dir, err)
	}
	if meta.Key != key {
		return nil, fmt.Errorf("ramdisk: cache entry %s is for key %s", dir, meta.Key)
	}
	for _, name := range entryFiles() {
		sum, err := FileSHA256(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if sum != meta.SHA256[name] {
			return nil, fmt.Errorf("ramdisk: cache entry %s: %s does not match its digest", dir, name)
		}
	}
	// Recently used: pruning keeps it.
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	return &Result{
		Kernel:       filepath.Join(dir, KernelName),
		Initramfs:    filepath.Join(dir, InitramfsName),
		InitramfsRaw: filepath.Join(dir, InitramfsRawName),
		Agent:        filepath.Join(dir, agentName),
		Modules:      meta.Modules,
		Uncompressed: meta.Uncompressed,
		Report:       meta.Report,
		Cached:       true,
	}, nil
}

// cacheKey hashes everything Build's output depends on.
func cacheKey(opts Options, extra []string) (string, error) {
	h := sha256.New()
	line := func(f string, a ...any) { fmt.Fprintf(h, f+"\n", a...) }
	line("%s", cacheFormat)
	sum, err := FileSHA256(opts.Agent)
	if err != nil {
		return "", err
	}
	line("agent %s", sum)
	if sum, err = FileSHA256(opts.Kernel.Vmlinuz); err != nil {
		return "", err
	}
	line("kernel %s %s %s", opts.Kernel.Package, opts.Kernel.Version, sum)
	names := opts.Modules
	if names == nil {
		names = DefaultModules()
	}
	line("modules %s", strings.Join(names, ","))
	// The manifest's optional marks change what is an error, not the
	// output; the firmware packages are keyed by content.
	for _, p := range opts.Firmware {
		line("firmware %s %s", p.Name, p.SHA256)
	}
	if opts.Programs != nil {
		for _, p := range opts.Programs.Packages {
			line("program package %s %s", p.Name, p.SHA256)
		}
	}
	for _, dst := range slices.Sorted(maps.Keys(opts.Files)) {
		if sum, err = FileSHA256(opts.Files[dst]); err != nil {
			return "", err
		}
		line("file %s %s", dst, sum)
	}
	if fileExists(caBundle) {
		if sum, err = FileSHA256(caBundle); err != nil {
			return "", err
		}
		line("ca %s", sum)
	}
	for _, e := range extra {
		line("extra %s", e)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// FileSHA256 is the hex SHA-256 of the file at p (cache keys, entry checks).
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("ramdisk: read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("ramdisk: sync %s: %w", p, err)
	}
	return nil
}

// LockFile takes an exclusive flock on path (created if missing), waiting
// for other holders, in this process or another, until ctx ends. The lock
// goes with the process: a holder that dies releases it.
func LockFile(ctx context.Context, path string) (unlock func(), err error) {
	return lockFile(ctx, path)
}

func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ramdisk: lock: %w", err)
	}
	// flock has no timeout; poll with LOCK_NB so ctx is honoured.
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("ramdisk: flock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("ramdisk: waiting for the lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PruneCache removes the entries (directories) below root nobody used for
// maxAge, except keep: an entry's modification time is its last use (the
// cache touches it on every reuse). Lock files stay: removing one another
// process waits on would let a third take a fresh lock beside it. Best
// effort: a failure only leaves disk space used.
func PruneCache(root, keep string, maxAge time.Duration) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == keep || strings.Contains(e.Name(), ".tmp-") {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < maxAge {
			continue
		}
		_ = os.RemoveAll(filepath.Join(root, e.Name()))
	}
}

// Package cachedir is the one on-disk cache of the build and test tools:
// the ramdisk builder's ramdisks, the Ironic root filesystems and IPA's
// ramdisk of the test bed. An entry is a directory named by its caller,
// holding the files a build made and a meta file, written last, that
// records the entry's key (and the digests of the files worth checking).
// Parallel callers, in one process or many (go test runs packages at
// once), build an entry once: the first takes an flock on the entry's
// lock file, builds into a temporary directory beside it and renames it
// into place; the others wait on the lock and reuse it. An entry is used
// only when its meta file has the expected key and every checked file
// matches its digest, so a partial or damaged entry is rebuilt, never
// used. After a build, entries nobody used for MaxAge are pruned.
//
// The layout is the callers' own from before this package existed (entry
// names, meta file names, key fields), so existing caches stay valid.
package cachedir

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is the cache's root: $IRONIC_AGENT_CACHE, else the user cache
// directory ($XDG_CACHE_HOME or ~/.cache) /ironic-agent.
func Dir() (string, error) {
	if d := os.Getenv("IRONIC_AGENT_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cachedir: no cache directory (set IRONIC_AGENT_CACHE): %w", err)
	}
	return filepath.Join(d, "ironic-agent"), nil
}

// Stamp is what the cache itself reads from an entry's meta file. A
// caller's meta type embeds it, so its fields sit at the top level of the
// JSON beside the caller's own.
type Stamp struct {
	Key string
	// SHA256 maps a file name in the entry to its hex digest, for the
	// files of Cache.Check.
	SHA256 map[string]string `json:",omitempty"`
}

// CacheStamp returns s; a meta type that embeds Stamp has it.
func (s *Stamp) CacheStamp() *Stamp { return s }

// Stamper is a meta value the cache can stamp: a pointer to a struct that
// embeds Stamp.
type Stamper interface{ CacheStamp() *Stamp }

// Cache is one kind of entry, below Root.
type Cache struct {
	// Root holds the entries, their lock files and their temporary
	// build directories; it is created when missing.
	Root string
	// Meta is the meta file's name in an entry.
	Meta string
	// Check lists the files of an entry whose digests the meta records
	// and every use verifies; none when empty.
	Check []string
	// MaxAge is how long an entry nobody used is kept; zero prunes
	// nothing.
	MaxAge time.Duration
	// MarkMeta marks an entry's last use on its meta file instead of on
	// its directory: for entries whose directory is a tree others write
	// into (a root filesystem).
	MarkMeta bool
}

// Build makes an entry's files in tmp and returns its meta value.
type Build func(ctx context.Context, tmp string) (Stamper, error)

// Entry is a usable entry.
type Entry struct {
	Dir string
	// Meta is the meta file's contents, for the caller to decode into
	// its own type.
	Meta []byte
	// Built says this call built the entry; false: it was reused.
	Built bool
}

// Ensure returns the entry name with key, building it with build first
// when there is none or it is damaged or for another key.
func (c Cache) Ensure(ctx context.Context, name, key string, build Build) (*Entry, error) {
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		return nil, fmt.Errorf("cachedir: %w", err)
	}
	dir := filepath.Join(c.Root, name)
	if e, err := c.Load(name, key); err == nil {
		return e, nil
	}
	unlock, err := Lock(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Whoever held the lock before may have built it.
	if e, err := c.Load(name, key); err == nil {
		return e, nil
	}
	// A damaged entry, or the leftovers of a build that was killed.
	stale, _ := filepath.Glob(dir + ".tmp-*")
	for _, d := range append(stale, dir) {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("cachedir: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(c.Root, name+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("cachedir: %w", err)
	}
	defer os.RemoveAll(tmp)
	meta, err := build(ctx, tmp)
	if err != nil {
		return nil, err
	}
	if err := c.seal(tmp, key, meta); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("cachedir: %w", err)
	}
	c.Prune(name)
	e, err := c.Load(name, key)
	if err != nil {
		return nil, err
	}
	e.Built = true
	return e, nil
}

// seal stamps meta with key and the digests of the checked files, syncs
// those files, and writes the meta file last: its presence says the files
// before it are whole.
func (c Cache) seal(tmp, key string, meta Stamper) error {
	st := meta.CacheStamp()
	st.Key = key
	if len(c.Check) > 0 {
		st.SHA256 = map[string]string{}
	}
	for _, name := range c.Check {
		p := filepath.Join(tmp, name)
		sum, err := FileSHA256(p)
		if err != nil {
			return err
		}
		st.SHA256[name] = sum
		if err := syncFile(p); err != nil {
			return err
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("cachedir: %w", err)
	}
	p := filepath.Join(tmp, c.Meta)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return fmt.Errorf("cachedir: %w", err)
	}
	return syncFile(p)
}

// Load returns the entry name when it is whole and for key, and marks it
// used.
func (c Cache) Load(name, key string) (*Entry, error) {
	dir := filepath.Join(c.Root, name)
	b, err := os.ReadFile(filepath.Join(dir, c.Meta))
	if err != nil {
		return nil, err
	}
	var st Stamp
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("cachedir: entry %s: %w", dir, err)
	}
	if st.Key != key {
		return nil, fmt.Errorf("cachedir: entry %s is for key %s", dir, st.Key)
	}
	for _, f := range c.Check {
		sum, err := FileSHA256(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		if sum != st.SHA256[f] {
			return nil, fmt.Errorf("cachedir: entry %s: %s does not match its digest", dir, f)
		}
	}
	// Recently used: Prune keeps it.
	now := time.Now()
	_ = os.Chtimes(c.marker(dir), now, now)
	return &Entry{Dir: dir, Meta: b}, nil
}

// marker is the file whose modification time is the entry's last use.
func (c Cache) marker(dir string) string {
	if c.MarkMeta {
		return filepath.Join(dir, c.Meta)
	}
	return dir
}

// Prune removes the entries nobody used for MaxAge, except keep. Lock
// files stay: removing one another process waits on would let a third
// take a fresh lock beside it. Best effort: a failure only leaves disk
// space used.
func (c Cache) Prune(keep string) {
	if c.MaxAge <= 0 {
		return
	}
	ents, err := os.ReadDir(c.Root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == keep || strings.Contains(e.Name(), ".tmp-") {
			continue
		}
		dir := filepath.Join(c.Root, e.Name())
		fi, err := os.Stat(c.marker(dir))
		if err != nil || time.Since(fi.ModTime()) < c.MaxAge {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// FileSHA256 is the hex SHA-256 of the file at p (cache keys, entry
// checks).
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("cachedir: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("cachedir: read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("cachedir: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cachedir: sync %s: %w", p, err)
	}
	return nil
}

// Lock takes an exclusive flock on path (created if missing), waiting for
// other holders, in this process or another, until ctx ends. The lock goes
// with the process: a holder that dies releases it.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cachedir: lock: %w", err)
	}
	// flock has no timeout; poll with LOCK_NB so ctx is honoured.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("cachedir: flock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cachedir: waiting for the lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}

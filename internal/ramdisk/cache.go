package ramdisk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
)

// cacheFormat changes whenever an entry's layout or meaning changes, so an
// older entry is never taken for a newer one.
const cacheFormat = "ironic-agent ramdisk cache 4"

// cacheEntryMaxAge is how long an entry nobody used is kept: every agent
// change makes a new entry (about 26 MiB), and a day is more than any test
// run.
const cacheEntryMaxAge = 48 * time.Hour

// entryMeta is an entry's result.json: what Build returned, plus the
// key and the digests the files are checked against before every reuse.
type entryMeta struct {
	cachedir.Stamp
	Modules      []kmod.Module
	Uncompressed int64
	Report       Report
}

// BuildCached is Build through a content-keyed cache in
// cacheDir/ramdisk: the key is the hash of the agent binary, the kernel
// (package, version, bzImage), the module names, every extra file and the
// CA bundle Build copies in, plus keyExtra (for what Build's caller knows
// changes the output, e.g. the source of the ramdisk code itself). Parallel
// callers build an entry once, and an entry is used only when every file
// matches the digest recorded in its result.json (see cachedir). The
// result's Agent is the copy of the binary kept in the entry.
func BuildCached(ctx context.Context, opts Options, cacheDir string, keyExtra ...string) (*Result, error) {
	if opts.Kernel == nil || opts.Agent == "" {
		return nil, fmt.Errorf("ramdisk: need a kernel and an agent binary")
	}
	key, err := cacheKey(opts, keyExtra)
	if err != nil {
		return nil, err
	}
	c := entryCache(cacheDir)
	e, err := c.Ensure(ctx, key, key, func(ctx context.Context, tmp string) (cachedir.Stamper, error) {
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
		return &entryMeta{Modules: res.Modules, Uncompressed: res.Uncompressed, Report: res.Report}, nil
	})
	if err != nil {
		return nil, err
	}
	var meta entryMeta
	if err := json.Unmarshal(e.Meta, &meta); err != nil {
		return nil, fmt.Errorf("ramdisk: cache entry %s: %w", e.Dir, err)
	}
	return &Result{
		Kernel:       filepath.Join(e.Dir, KernelName),
		Initramfs:    filepath.Join(e.Dir, InitramfsName),
		InitramfsRaw: filepath.Join(e.Dir, InitramfsRawName),
		Agent:        filepath.Join(e.Dir, agentName),
		Modules:      meta.Modules,
		Uncompressed: meta.Uncompressed,
		Report:       meta.Report,
		Cached:       !e.Built,
	}, nil
}

// entryCache is the ramdisk entries' cache below cacheDir.
func entryCache(cacheDir string) cachedir.Cache {
	return cachedir.Cache{Root: filepath.Join(cacheDir, "ramdisk"), Meta: "result.json",
		Check: []string{KernelName, InitramfsName, InitramfsRawName, agentName}, MaxAge: cacheEntryMaxAge}
}

// agentName is the agent binary's name inside a cache entry.
const agentName = "ironic-agent"

// cacheKey hashes everything Build's output depends on.
func cacheKey(opts Options, extra []string) (string, error) {
	h := sha256.New()
	line := func(f string, a ...any) { fmt.Fprintf(h, f+"\n", a...) }
	line("%s", cacheFormat)
	sum, err := cachedir.FileSHA256(opts.Agent)
	if err != nil {
		return "", err
	}
	line("agent %s", sum)
	if sum, err = cachedir.FileSHA256(opts.Kernel.Vmlinuz); err != nil {
		return "", err
	}
	line("kernel %s %s %s", opts.Kernel.Package, opts.Kernel.Version, sum)
	if opts.Modules == nil {
		mh := sha256.Sum256([]byte(modulesManifest))
		line("manifest %s", hex.EncodeToString(mh[:]))
		for _, e := range opts.Manifest {
			line("manifest entry %+v", e)
		}
	}
	line("modules %s add %s", strings.Join(opts.Modules, ","), strings.Join(opts.AddModules, ","))
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
		if sum, err = cachedir.FileSHA256(opts.Files[dst]); err != nil {
			return "", err
		}
		line("file %s %s", dst, sum)
	}
	if opts.Release != nil {
		rh := sha256.Sum256(opts.Release)
		line("release %s", hex.EncodeToString(rh[:]))
	}
	if fileExists(caBundle) {
		if sum, err = cachedir.FileSHA256(caBundle); err != nil {
			return "", err
		}
		line("ca %s", sum)
	}
	for _, e := range extra {
		line("extra %s", e)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

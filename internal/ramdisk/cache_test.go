package ramdisk

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
)

// tinyAgent is a stand-in for the agent binary: an ELF file with no
// interpreter (Build's only check), small enough that the cache tests
// spend their time on the cache, not on gzip.
func tinyAgent(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(p, kmodtest.Module("stand-in=agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The helper process of TestBuildCachedProcesses: it builds through the
// cache named in the environment and prints its result.
func TestBuildCachedHelperProcess(t *testing.T) {
	spec := os.Getenv("RAMDISK_CACHE_HELPER")
	if spec == "" {
		t.Skip("helper process of TestBuildCachedProcesses")
	}
	var in struct {
		Kernel Kernel
		Agent  string
		Cache  string
	}
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		t.Fatal(err)
	}
	res, err := BuildCached(context.Background(), Options{Kernel: &in.Kernel, Agent: in.Agent}, in.Cache)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	os.Stdout.Write(append([]byte("RESULT "), append(b, '\n')...))
}

// TestBuildCachedProcesses runs four processes (as go test runs packages)
// that want the same ramdisk at once: exactly one builds it, the others
// wait on the lock and reuse the entry.
func TestBuildCachedProcesses(t *testing.T) {
	k := fakeKernel(t)
	agent := tinyAgent(t)
	cache := t.TempDir()
	spec, _ := json.Marshal(map[string]any{"Kernel": k, "Agent": agent, "Cache": cache})
	const n = 4
	type out struct {
		res Result
		err error
	}
	outs := make(chan out, n)
	for range n {
		go func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBuildCachedHelperProcess$", "-test.v")
			cmd.Env = append(os.Environ(), "RAMDISK_CACHE_HELPER="+string(spec))
			b, err := cmd.CombinedOutput()
			var o out
			o.err = err
			if _, line, ok := strings.Cut(string(b), "RESULT "); ok {
				line, _, _ = strings.Cut(line, "\n")
				if jerr := json.Unmarshal([]byte(line), &o.res); jerr != nil && o.err == nil {
					o.err = jerr
				}
			} else if o.err == nil {
				o.err = &exec.ExitError{}
			}
			if o.err != nil {
				t.Logf("helper output:\n%s", b)
			}
			outs <- o
		}()
	}
	built := 0
	var initramfs string
	for range n {
		o := <-outs
		if o.err != nil {
			t.Fatalf("helper: %v", o.err)
		}
		if !o.res.Cached {
			built++
		}
		if initramfs == "" {
			initramfs = o.res.Initramfs
		} else if o.res.Initramfs != initramfs {
			t.Errorf("helpers got different entries: %s and %s", initramfs, o.res.Initramfs)
		}
	}
	if built != 1 {
		t.Errorf("%d of %d processes built the ramdisk, want 1", built, n)
	}
	if !strings.HasPrefix(initramfs, filepath.Join(cache, "ramdisk")+"/") {
		t.Errorf("initramfs %s is not in the cache", initramfs)
	}
	if tmps, _ := filepath.Glob(filepath.Join(cache, "ramdisk", "*.tmp-*")); len(tmps) != 0 {
		t.Errorf("temporary directories left: %v", tmps)
	}
}

// TestBuildCachedDamaged: an entry with a truncated file, one without its
// result.json (a partial copy) and the temporary directory of a killed
// build are never used; the next build replaces them.
func TestBuildCachedDamaged(t *testing.T) {
	k := fakeKernel(t)
	agent := tinyAgent(t)
	cache := t.TempDir()
	ctx := context.Background()
	first, err := BuildCached(ctx, Options{Kernel: k, Agent: agent}, cache)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached {
		t.Error("first build reported as cached")
	}
	want, err := os.ReadFile(first.Initramfs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := BuildCached(ctx, Options{Kernel: k, Agent: agent}, cache)
	if err != nil || !again.Cached || again.Initramfs != first.Initramfs {
		t.Fatalf("second build: %+v %v", again, err)
	}
	entry := filepath.Dir(first.Initramfs)
	damage := map[string]func(){
		"truncated initramfs": func() { os.Truncate(first.Initramfs, 100) },
		"truncated agent":     func() { os.Truncate(first.Agent, 0) },
		"no result.json":      func() { os.Remove(filepath.Join(entry, "result.json")) },
		"garbled result.json": func() { os.WriteFile(filepath.Join(entry, "result.json"), []byte("{"), 0o644) },
	}
	for name, do := range damage {
		do()
		os.MkdirAll(entry+".tmp-killed", 0o755)
		res, err := BuildCached(ctx, Options{Kernel: k, Agent: agent}, cache)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Cached {
			t.Errorf("%s: the damaged entry was used", name)
		}
		got, err := os.ReadFile(res.Initramfs)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: rebuilt initramfs differs from the first build", name)
		}
		if _, err := os.Stat(entry + ".tmp-killed"); err == nil {
			t.Errorf("%s: a killed build's temporary directory was left", name)
		}
	}
}

// TestBuildCachedKey: a different agent, module list or extra file, or
// extra key material, makes another entry.
func TestBuildCachedKey(t *testing.T) {
	k := fakeKernel(t)
	agent := tinyAgent(t)
	cache := t.TempDir()
	ctx := context.Background()
	base, err := BuildCached(ctx, Options{Kernel: k, Agent: agent}, cache)
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(t.TempDir(), "extra")
	os.WriteFile(extra, []byte("one"), 0o644)
	withFile, err := BuildCached(ctx, Options{Kernel: k, Agent: agent, Files: map[string]string{"etc/x": extra}}, cache)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(extra, []byte("two"), 0o644)
	fileChanged, err := BuildCached(ctx, Options{Kernel: k, Agent: agent, Files: map[string]string{"etc/x": extra}}, cache)
	if err != nil {
		t.Fatal(err)
	}
	fewer, err := BuildCached(ctx, Options{Kernel: k, Agent: agent, Modules: []string{"sd_mod"}}, cache)
	if err != nil {
		t.Fatal(err)
	}
	salted, err := BuildCached(ctx, Options{Kernel: k, Agent: agent}, cache, "source abc")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for name, r := range map[string]*Result{"base": base, "file": withFile, "file changed": fileChanged, "modules": fewer, "extra key": salted} {
		if r.Cached {
			t.Errorf("%s: served from another entry", name)
		}
		if other, ok := seen[r.Initramfs]; ok {
			t.Errorf("%s and %s share an entry", name, other)
		}
		seen[r.Initramfs] = name
	}
}

func TestLockFileContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l.lock")
	unlock, err := cachedir.Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := cachedir.Lock(ctx, p); err == nil || !strings.Contains(err.Error(), "waiting for the lock") {
		t.Errorf("second lock while held: %v", err)
	}
	unlock()
	unlock2, err := cachedir.Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

// TestBuildRaw: the uncompressed archive is the gzip'ed one's content.
func TestBuildRaw(t *testing.T) {
	res, err := Build(context.Background(), Options{Kernel: fakeKernel(t), Agent: tinyAgent(t), Raw: true}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(res.InitramfsRaw)
	if err != nil {
		t.Fatal(err)
	}
	unz := gunzipFile(t, res.Initramfs)
	if !bytes.Equal(raw, unz) || int64(len(raw)) != res.Uncompressed {
		t.Errorf("raw archive %d bytes, gunzip'ed %d, Uncompressed %d", len(raw), len(unz), res.Uncompressed)
	}
	if tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(res.InitramfsRaw), "*.tmp")); len(tmps) != 0 {
		t.Errorf("left %v", tmps)
	}
}

package injectfiles

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

func TestParse(t *testing.T) {
	files, err := Parse(json.RawMessage(`[{"path": "/etc/a", "content": "YQ=="}]`),
		json.RawMessage(`[{"path": "/etc/b", "deleted": true}, {"path": "/c", "partition": 2, "mode": 384, "dirmode": 448, "owner": 0}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[0].Path != "/etc/a" || !files[1].Deleted || files[2].Partition != 2.0 || files[2].Mode != 0o600 ||
		files[2].DirMode != 0o700 || *files[2].Owner != 0 || files[2].Group != nil {
		t.Errorf("%+v", files)
	}
	for _, none := range []string{``, `null`, `[]`, `""`} {
		if files, err := Parse(json.RawMessage(none), nil); err != nil || len(files) != 0 {
			t.Errorf("%q: %v %v", none, files, err)
		}
	}
	for _, tc := range []struct{ props, args, want string }{
		{`{"path": "/etc/a"}`, ``, "The `inject_files` node property must be a list, got dict"},
		{``, `"x"`, "The `files` argument must be a list, got str"},
		{``, `[{"path": "/etc/a", "size": 1}]`, "unexpected fields in"},
		{``, `[{"content": "YQ=="}]`, "expected a path in"},
		{``, `[{"path": "/a", "content": "YQ=="}]`, `in root directory requires "partition"`},
		{``, `[{"path": "/etc/", "content": "YQ=="}]`, "directories not supported"},
		{``, `[{"path": "/etc/a", "content": "YQ==", "deleted": true}]`, "content cannot be used with deleted"},
		{``, `[{"path": "/etc/a", "mode": "0644"}]`, "mode must be a number"},
		{``, `[{"path": "/etc/a", "owner": true}]`, "owner must be a number"},
		{``, `[{"path": "/etc/a", "dirmode": 1.5}]`, "dirmode must be a number"},
		{``, `[{"path": "/etc/../../x", "partition": 1}]`, "leaves its filesystem"},
		{``, `["/etc/a"]`, "expected an object"},
	} {
		_, err := Parse(json.RawMessage(tc.props), json.RawMessage(tc.args))
		var ie *ipaerror.Error
		if !errors.As(err, &ie) || ie.Type != "InvalidCommandParamsError" || !strings.Contains(ie.Details, tc.want) {
			t.Errorf("%s %s: %v, want InvalidCommandParamsError with %q", tc.props, tc.args, err, tc.want)
		}
	}
}

func TestFormatURL(t *testing.T) {
	node := map[string]any{"uuid": "u-1", "properties": map[string]any{"cpus": 4.0}}
	ports := []any{map[string]any{"address": "52:54:00:12:34:56"}}
	got, err := FormatURL("http://x/{node[uuid]}/{node[properties][cpus]}/{ports[0][address]}/{{lit}}", node, ports)
	if err != nil || got != "http://x/u-1/4/52:54:00:12:34:56/{lit}" {
		t.Errorf("%q %v", got, err)
	}
	for _, bad := range []string{"http://x/{node.uuid}", "http://x/{node[nope]}", "http://x/{ports[3]}", "http://x/{other}", "http://x/{node", "http://x/}", "http://x/{node[uuid]!r}"} {
		if _, err := FormatURL(bad, node, ports); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// loopDisk makes a GPT loop disk: partition 1 ext4 labelled ESP (not FAT:
// the test machine's kernel may have no vfat), partition 2 ext4 (label
// root) holding /etc, whose etc/escape is an absolute link to outside, a
// directory of the test's own.
func loopDisk(t *testing.T) (dev, outside string) {
	t.Helper()
	looptest.RequireTools(t, "sgdisk", "mkfs.ext4", "partprobe")
	dev = looptest.Attach(t, 64<<20, "--partscan")
	looptest.Run(t, "sgdisk", "-n", "1:2048:+16M", "-t", "1:ef00", "-c", "1:esp-part", "-n", "2:0:0", "-t", "2:8300", "-c", "2:root-part", dev)
	looptest.Run(t, "partprobe", dev)
	p1, p2 := blockdev.PartitionPath(dev, 1), blockdev.PartitionPath(dev, 2)
	looptest.WaitFor(t, p1)
	looptest.WaitFor(t, p2)
	looptest.Run(t, "mkfs.ext4", "-q", "-F", "-L", "ESP", p1)
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "etc/old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "etc/old/gone"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An absolute link inside the image must not lead a write out of it.
	// An absolute link out of the image, to a directory of this test's
	// own: a write that followed it would land there.
	outside = t.TempDir()
	if err := os.Symlink(outside, filepath.Join(tree, "etc/escape")); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "mkfs.ext4", "-q", "-F", "-L", "root", "-d", tree, p2)
	return dev, outside
}

// readBack mounts part read-only and returns what fn saw.
func readBack(t *testing.T, part string, fn func(dir string)) {
	t.Helper()
	dir := t.TempDir()
	fstype, err := blockdev.FSType(part)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(part, dir, fstype, unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	}()
	fn(dir)
}

func TestInjectOnLoop(t *testing.T) {
	dev, outside := loopDisk(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("fetched " + r.URL.Path))
	}))
	defer srv.Close()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	files, err := Parse(json.RawMessage(`[{"path": "/etc/motd", "content": "`+b64("by path")+`", "mode": 384}]`), mustJSON(t, []map[string]any{
		{"path": "/etc/new/dir/conf", "content": b64("new dir"), "dirmode": 0o700},
		{"path": "/etc/old/gone", "deleted": true},
		{"path": "/etc/url", "content": srv.URL + "/{node[uuid]}/{ports[0][address]}"},
		{"path": "/by-number", "partition": 2, "content": b64("two")},
		{"path": "/by-string-number", "partition": " 2 ", "content": b64("two")},
		{"path": "/by-device", "partition": blockdev.PartitionPath(dev, 1), "content": b64("esp")},
		{"path": "/EFI/by-label", "partition": "LABEL=ESP", "content": b64("label")},
		{"path": "/by-partlabel", "partition": "PARTLABEL=root-part", "content": b64("partlabel")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	in := &Injector{Guard: blockdev.NewGuard([]string{dev}), RootDevice: dev, Disks: []string{dev}}
	node := map[string]any{"uuid": "n-1"}
	ports := []any{map[string]any{"address": "aa:bb"}}
	if err := in.Inject(context.Background(), files, node, ports); err != nil {
		t.Fatal(err)
	}
	readBack(t, blockdev.PartitionPath(dev, 2), func(dir string) {
		for name, want := range map[string]string{"etc/motd": "by path", "etc/new/dir/conf": "new dir", "etc/url": "fetched /n-1/aa:bb",
			"by-number": "two", "by-string-number": "two", "by-partlabel": "partlabel"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
				t.Errorf("%s: %q %v, want %q", name, b, err, want)
			}
		}
		if st, err := os.Stat(filepath.Join(dir, "etc/motd")); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("etc/motd mode %v %v", st.Mode(), err)
		}
		if st, err := os.Stat(filepath.Join(dir, "etc/new/dir")); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("leaf directory mode %v %v", st.Mode(), err)
		}
		if _, err := os.Stat(filepath.Join(dir, "etc/old/gone")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("deleted file still there: %v", err)
		}
	})
	readBack(t, blockdev.PartitionPath(dev, 1), func(dir string) {
		for name, want := range map[string]string{"by-device": "esp", "EFI/by-label": "label"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
				t.Errorf("ESP %s: %q %v, want %q", name, b, err, want)
			}
		}
	})

	// Every failure leaves nothing mounted: a file through an absolute
	// link in the image, a path no partition has, a device the guard does
	// not allow, no content.
	for _, tc := range []struct{ files, want string }{
		{`[{"path": "/etc/escape/x", "content": "eA=="}]`, "Failed to process file"},
		{`[{"path": "/nowhere/x", "content": "eA=="}]`, "No partition found with path nowhere"},
		{`[{"path": "/x", "partition": "/dev/null", "content": "eA=="}]`, "/dev/null"},
		{`[{"path": "/etc/nocontent"}]`, "no content"},
		{`[{"path": "/x", "partition": "UUID=00000000-0000-0000-0000-000000000000", "content": "eA=="}]`, "no partition with UUID="},
	} {
		files, err := Parse(nil, json.RawMessage(tc.files))
		if err != nil {
			t.Fatal(err)
		}
		err = in.Inject(context.Background(), files, node, ports)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.files, err, tc.want)
		}
		mounts, _ := os.ReadFile("/proc/self/mounts")
		if strings.Contains(string(mounts), dev) {
			t.Fatalf("%s: left mounted:\n%s", tc.files, mounts)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Errorf("a write escaped through the image's absolute link to %s", outside)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package hostguard

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

func TestDiff(t *testing.T) {
	before := &Snapshot{Items: map[string]string{
		"file /etc/resolv.conf":      `"nameserver 10.0.0.1\n"`,
		"link eth0":                  "device",
		"module loop":                "",
		"sysctl net/ipv4/ip_forward": `"0"`,
		"etc /etc/same":              "-rw-r--r-- 0:0 sha256:aa",
	}}
	after := &Snapshot{Items: map[string]string{
		"file /etc/resolv.conf":      `"# written by ironic-agent init from the DHCP lease\n"`,
		"module loop":                "",
		"module veth":                "",
		"sysctl net/ipv4/ip_forward": `"1"`,
		"loop /dev/loop7":            `"/tmp/x/disk.img"`,
		"etc /etc/same":              "-rw-r--r-- 0:0 sha256:aa",
	}}
	got := Diff(before, after)
	want := []string{
		`file /etc/resolv.conf: changed from "nameserver 10.0.0.1\n" to "# written by ironic-agent init from the DHCP lease\n"` + " fails",
		"link eth0: disappeared (was device) fails",
		`loop /dev/loop7: appeared ("/tmp/x/disk.img") fails`,
		"module veth: appeared reported",
		`sysctl net/ipv4/ip_forward: changed from "0" to "1" fails`,
	}
	var lines []string
	for _, d := range got {
		verdict := "reported"
		if d.Fails {
			verdict = "fails"
		}
		lines = append(lines, d.String()+" "+verdict)
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if d := Diff(after, after); len(d) != 0 {
		t.Errorf("Diff of a snapshot with itself: %v", d)
	}
}

func TestParseStat(t *testing.T) {
	st, err := parseStat("4242 (qemu (x) y) S 17 4242 4242 0 -1")
	if err != nil || st.comm != "qemu (x) y" || st.ppid != 17 {
		t.Errorf("parseStat: %+v, %v", st, err)
	}
	for _, bad := range []string{"", "12 qemu S 1", "12 (qemu) S", "12 (qemu) S x"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{`/mnt/a\040b`: "/mnt/a b", `/x\`: `/x\`, `/x\04`: `/x\04`, `/plain`: "/plain"} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeRoot is a machine tree for Take: every file the guard reads, with
// the host's names, in a temporary directory the test may change freely.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/resolv.conf":                             "nameserver 192.0.2.53\n",
		"etc/hosts":                                   "127.0.0.1 localhost\n",
		"etc/hostname":                                "builder\n",
		"etc/ld.so.cache":                             "cache 1",
		"etc/apt/sources.list":                        "deb http://deb.example/debian bookworm main\n",
		"proc/sys/kernel/hostname":                    "builder\n",
		"proc/sys/kernel/domainname":                  "(none)\n",
		"proc/sys/net/ipv4/ip_forward":                "0\n",
		"proc/sys/net/ipv6/conf/all/forwarding":       "0\n",
		"proc/sys/net/ipv6/conf/default/disable_ipv6": "0\n",
		"proc/modules":                                "loop 40960 0 - Live 0x0000000000000000\n",
		"sys/fs/pstore/dmesg-efi-176543210001":        "Panic#1 Part1\n",
		"proc/self/mountinfo":                         "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
		"sys/firmware/efi/efivars/BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c": "\x07\x00\x00\x00\x01\x00",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(root, name), content)
	}
	if err := os.MkdirAll(filepath.Join(root, "run/netns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/mounts", filepath.Join(root, "etc/mtab")); err != nil {
		t.Fatal(err)
	}
	return root
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func take(t *testing.T, o Options) *Snapshot {
	t.Helper()
	s, err := Take(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot must survive the trip through the file test.sh keeps.
	var buf bytes.Buffer
	if err := s.Write(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantDiff checks that every wanted item differs, with the wanted verdict,
// and reports any other difference when exact is set.
func wantDiff(t *testing.T, got []Difference, want map[string]bool, exact bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range got {
		fails, ok := want[d.Item]
		switch {
		case ok && fails != d.Fails:
			t.Errorf("%s: Fails = %v, want %v", d, d.Fails, fails)
		case !ok && exact:
			t.Errorf("unexpected difference: %s", d)
		}
		seen[d.Item] = true
	}
	for item := range want {
		if !seen[item] {
			t.Errorf("no difference reported for %s; got %v", item, got)
		}
	}
}

// misbehave is what a leaky test would do to a machine, done to the tree.
func misbehave(t *testing.T, root string) {
	t.Helper()
	writeFile(t, filepath.Join(root, "etc/resolv.conf"), "# written by ironic-agent init from the DHCP lease\n")
	writeFile(t, filepath.Join(root, "etc/ironic-agent/steps.d/x"), "#!/bin/sh\n")
	writeFile(t, filepath.Join(root, "proc/sys/kernel/hostname"), "rdinit-test\n")
	writeFile(t, filepath.Join(root, "proc/sys/net/ipv4/ip_forward"), "1\n")
	writeFile(t, filepath.Join(root, "proc/sys/net/ipv6/conf/all/forwarding"), "1\n")
	writeFile(t, filepath.Join(root, "run/netns/leaked"), "")
	writeFile(t, filepath.Join(root, "sys/firmware/efi/efivars/BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c"), "\x07\x00\x00\x00\x02\x00\x01\x00")
	writeFile(t, filepath.Join(root, "proc/modules"), "loop 40960 0 - Live 0x0\nveth 45056 0 - Live 0x0\n")
	if err := os.Remove(filepath.Join(root, "sys/fs/pstore/dmesg-efi-176543210001")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "proc/self/mountinfo"), "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"+
		`90 22 7:3 / /tmp/esp\040x rw - vfat /dev/loop3 rw`+"\n"+
		"91 22 0:4 net:[4026532] /run/netns/other rw - nsfs nsfs rw\n"+
		"92 22 0:25 /run/netns /run/netns rw - tmpfs tmpfs rw\n")
	if err := os.Chmod(filepath.Join(root, "etc/apt/sources.list"), 0o666); err != nil {
		t.Fatal(err)
	}
	// Legitimate churn: ldconfig's cache, and times.
	writeFile(t, filepath.Join(root, "etc/ld.so.cache"), "cache 2")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "etc/hosts"), later, later); err != nil {
		t.Fatal(err)
	}
}

func TestTakeFindsChangesBelowRoot(t *testing.T) {
	root := fakeRoot(t)
	before := take(t, Options{Root: root})
	if d := Diff(before, take(t, Options{Root: root})); len(d) != 0 {
		t.Fatalf("two snapshots of an unchanged tree differ: %v", d)
	}
	misbehave(t, root)
	after := take(t, Options{Root: root})
	got := Diff(before, after)
	wantDiff(t, got, map[string]bool{
		"file /etc/resolv.conf":                                 true,
		"etc /etc/ironic-agent":                                 true,
		"etc /etc/ironic-agent/steps.d":                         true,
		"etc /etc/ironic-agent/steps.d/x":                       true,
		"etc /etc/apt/sources.list":                             true,
		"hostname kernel hostname":                              true,
		"sysctl net/ipv4/ip_forward":                            true,
		"sysctl net/ipv6/conf/all/forwarding":                   true,
		"netns /run/netns/leaked":                               true,
		"netns /run/netns/other":                                true,
		"mount /tmp/esp x vfat /dev/loop3":                      true,
		"efivar BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c": true,
		"module veth":                                           false,
		"pstore dmesg-efi-176543210001":                         true,
	}, true)
	for _, d := range got {
		if d.Item == "file /etc/resolv.conf" && !strings.Contains(d.String(), "written by ironic-agent init") {
			t.Errorf("the difference does not show what was written: %s", d)
		}
	}
}

// TestTakeFindsNetworkChanges has a helper add a link, an address and
// routes in a namespace the test made, and the guard pointed there names
// each.
func TestTakeFindsNetworkChanges(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.NewNetns(t, "hguard-"+netnstest.ID(t))
	o := Options{Root: fakeRoot(t), NetNS: filepath.Join("/run/netns", ns.Name)}
	before := take(t, o)
	if d := Diff(before, take(t, o)); len(d) != 0 {
		t.Fatalf("two snapshots of an unchanged namespace differ: %v", d)
	}
	ns.IP("link", "add", "hgleak0", "type", "veth", "peer", "name", "hgleak1")
	ns.IP("link", "set", "hgleak0", "up")
	ns.IP("link", "set", "hgleak1", "up")
	ns.IP("addr", "add", "198.51.100.7/24", "dev", "hgleak0")
	ns.IP("-6", "addr", "add", "2001:db8::7/64", "dev", "hgleak0", "nodad")
	ns.IP("route", "add", "203.0.113.0/24", "via", "198.51.100.1")
	ns.IP("-6", "route", "add", "2001:db8:1::/48", "via", "2001:db8::1")
	got := Diff(before, take(t, o))
	wantDiff(t, got, map[string]bool{
		"link hgleak0":                 true,
		"addr hgleak0 198.51.100.7/24": true,
		"addr hgleak0 2001:db8::7/64":  true,
		"route main inet unicast 203.0.113.0/24 via 198.51.100.1 dev hgleak0 metric 0":     true,
		"route main inet6 unicast 2001:db8:1::/48 via 2001:db8::1 dev hgleak0 metric 1024": true,
	}, false)
	for _, d := range got {
		if !d.Fails {
			t.Errorf("a network difference that does not fail: %s", d)
		}
	}
}

// TestTakeFindsLoopDevice leaves a loop device attached across the second
// snapshot, as a leaky test would, then detaches it.
func TestTakeFindsLoopDevice(t *testing.T) {
	// looptest's leak check uses this package: attach with losetup.
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: attaches a loop device")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skipf("SKIPPED: needs losetup (./test.sh installs it): %v", err)
	}
	// Files from the fake tree, loop devices from the kernel's sysfs.
	root := fakeRoot(t)
	if err := os.Symlink("/sys", filepath.Join(root, "sys-real")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "sys")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "sys-real"), filepath.Join(root, "sys")); err != nil {
		t.Fatal(err)
	}
	before := take(t, Options{Root: root})
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show %s: %v\n%s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	// Other tests on the machine attach their own devices meanwhile: only
	// ours is required.
	wantDiff(t, Diff(before, take(t, Options{Root: root})), map[string]bool{"loop " + dev: true}, false)
}

// TestTakeFindsLeftoverProcess starts a process carrying the run's mark
// and does not wait for it before the second snapshot.
func TestTakeFindsLeftoverProcess(t *testing.T) {
	mark := "HOSTGUARD_TEST=" + fmt.Sprint(time.Now().UnixNano())
	root := fakeRoot(t)
	if err := os.RemoveAll(filepath.Join(root, "proc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc", filepath.Join(root, "proc")); err != nil {
		t.Fatal(err)
	}
	o := Options{Root: root, Mark: mark}
	before := take(t, o)
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The process's ancestors (this test binary, go test) are the run, not
	// leftovers: the mark in their environment does not count.
	t.Setenv("HOSTGUARD_TEST", strings.TrimPrefix(mark, "HOSTGUARD_TEST="))
	got := Diff(before, take(t, o))
	wantDiff(t, got, map[string]bool{fmt.Sprintf("process %d sleep", cmd.Process.Pid): true}, false)
	for _, d := range got {
		if strings.HasPrefix(d.Item, "process") && !strings.Contains(d.After, "sleep 60") {
			t.Errorf("the process is not named by its command line: %s", d)
		}
	}
}

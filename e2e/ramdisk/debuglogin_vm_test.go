package ramdisk_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/logwatch"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/rescue"
)

// debugPassword has a blank and a shell character, which neither the
// hash on the command line nor the console login may mangle.
const debugPassword = "d3bug me$now"

// debugToken is the standalone agent's pre-shared token (IPA's
// ipa-agent-token: at least 32 characters).
const debugToken = "debuglogin0123456789abcdef0123456789"

// TestDebugLoginInVM boots the agent ramdisk as IPA's images are booted
// for troubleshooting, with dynamic-login's sshkey="..." and
// rootpwd="..." (base64 of a SHA-512 crypt hash) and an Ironic that does
// not answer, so the agent is in its lookup loop the whole time: root
// logs in over SSH with the key (a command runs and says it is root),
// another key is refused, and root logs in on the serial console with the
// password. A second boot, a standalone agent with a clean step added by
// an overlay that waits for an operator, is entered the same ways while
// the step runs: the login sees the step's process and the agent's log
// saying it runs, and releases it; the step then succeeds. A third boot
// without the parameters has nothing on port 22, and its log bundle reads
// as Metal3 prints it.
func TestDebugLoginInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	netnstest.RequireRoot(t, "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("login", func(t *testing.T) { debugLoginVM(ctx, t, rd) })
	t.Run("step", func(t *testing.T) {
		// A fourth boot: the default suite keeps within its time.
		if os.Getenv("E2E_VM_SLOW") != "1" {
			t.Skip("SKIPPED: slow scenario; E2E_VM_SLOW=1 runs it (docs/testing.md: Environment switches)")
		}
		debugLoginStepVM(ctx, t, rd)
	})
	t.Run("none", func(t *testing.T) { noDebugLoginVM(ctx, t, rd) })
	t.Run("rescue", func(t *testing.T) { debugLoginRescueVM(ctx, t, rd) })
}

// debugMachine is a machine with one disk and one NIC, slirp, with port
// 22 of the guest and the agent's API port (9999) on loopback ports of
// the host, booting the ramdisk with appendArgs; it returns the machine,
// the SSH address and the API's URL.
func debugMachine(t *testing.T, rd *qemu.Ramdisk, name, appendArgs string) (m qemu.Machine, ssh, api string) {
	port := netnstest.FreeTCPPorts(t, 2)
	m = qemu.DefaultMachine("bios")
	m.Name = name
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks = []qemu.Disk{{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 64, Serial: "LAB-VBLK-0001"}}
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:12:34:31", Backend: qemu.NICUser}}
	m.HostFwd = map[int]int{port: 22, port + 1: 9999}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = appendArgs + " ironic_agent.dhcp_timeout=30 net.ifnames=0"
	return m, fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port+1)
}

// debugCredentials are a key for sshkey=, another key, and the
// parameters sshkey="..." rootpwd="..." (debugPassword's hash, base64).
type debugCredentials struct {
	signer, other ssh.Signer
	sshkey        string // the authorized_keys line
	rootpwd       string // the value of rootpwd=
}

func (c debugCredentials) params() string {
	return fmt.Sprintf(`sshkey="%s" rootpwd="%s"`, c.sshkey, c.rootpwd)
}

func newDebugCredentials(t *testing.T) debugCredentials {
	t.Helper()
	var keys [2]ssh.Signer
	for i := range keys {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if keys[i], err = ssh.NewSignerFromKey(priv); err != nil {
			t.Fatal(err)
		}
	}
	h, err := shacrypt.New(shacrypt.SHA512, []byte(debugPassword), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return debugCredentials{signer: keys[0], other: keys[1],
		sshkey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(keys[0].PublicKey()))) + " operator@desk",
		// Base64, as dynamic-login's README makes it: no "$" on the line.
		rootpwd: base64.StdEncoding.EncodeToString([]byte(h.String()))}
}

// debugBanner is the debug login's console prompt's first line.
const debugBanner = "log in as root with the debug login password"

func debugLoginVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk) {
	creds := newDebugCredentials(t)
	signer, other, params := creds.signer, creds.other, creds.params()
	// restrict=on: 10.0.2.2:9 answers nothing, so the agent keeps
	// looking the node up.
	m, addr, _ := debugMachine(t, rd, "ironic-agent-debuglogin", params+" ipa-api-url=http://10.0.2.2:9")
	vm, fail := startVM(ctx, t, m)
	listening, err := vm.WaitFor(ctx, logtext.Msg(rescue.EventDebugSSHListening))
	if err != nil {
		fail("%v", err)
	}
	t.Logf("%v %s", listening.At, listening.Text)
	started, _ := vm.Find(logtext.Msg(rdinit.EventDebugLoginStarted))
	modules, _ := vm.Find(logtext.Msg(rdinit.EventModulesLoaded))
	if started.Text == "" || modules.Text != "" && modules.At < started.At {
		t.Errorf("the debug login started at %v, after the modules (%v): want it first", started.At, modules.At)
	}
	// The host key's fingerprint is on the console, as rescue prints it.
	fp := fieldOf(listening.Text, "host_key")
	if !strings.HasPrefix(fp, "SHA256:") {
		fail("no host key fingerprint in %q", listening.Text)
	}
	// The agent must be busy: its lookup of an unreachable Ironic.
	if _, err := vm.WaitFor(ctx, logtext.Msg(ironic.EventLookupRetrying)); err != nil {
		fail("%v", err)
	}

	out, hostKey, err := sshRun(ctx, addr, signer, "echo SSH-$((6*7)) $(id -u); cat /proc/1/comm")
	if err != nil {
		fail("SSH as root with the key of sshkey=: %v", err)
	}
	if f := strings.Fields(out); len(f) < 3 || f[0] != "SSH-42" || f[1] != "0" {
		fail("SSH command printed %q; want SSH-42, uid 0 and PID 1's name", out)
	}
	if got := ssh.FingerprintSHA256(hostKey); got != fp {
		t.Errorf("the SSH server's host key is %s; the console said %s", got, fp)
	}
	if _, _, err := sshRun(ctx, addr, other, "true"); err == nil {
		t.Error("SSH with a key sshkey= does not hold logged in")
	} else {
		t.Logf("another key: %v", err)
	}
	if l, ok := vm.Find(logtext.Msg(ironic.EventLookupRetrying)); ok {
		t.Logf("agent busy: %v %s", l.At, l.Text)
	}

	for _, l := range []qemu.ConsoleLogin{
		{Banner: debugBanner, User: "root", Password: "not the password", Want: "Login incorrect"},
		{Banner: debugBanner, User: "root", Password: debugPassword, Want: "SERIAL-42 as root"},
	} {
		if err := vm.Login(ctx, l); err != nil {
			fail("console login with %q: %v", l.Password, err)
		}
	}
	// Still looking the node up: the logins ran beside the agent.
	n := len(vm.Lines())
	if err := vm.WaitAfter(ctx, n, logtext.Msg(ironic.EventLookupRetrying)); err != nil {
		fail("the agent stopped looking the node up: %v", err)
	}
}

// noDebugLoginVM boots a standalone agent (its API forwarded) without
// sshkey= and rootpwd=: nothing listens on port 22, and the log bundle of
// log.collect_system_logs reads as Metal3's log watcher prints it, with
// every entry, the init's log from its first line (with the boot MAC).
func noDebugLoginVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk) {
	m, addr, api := debugMachine(t, rd, "ironic-agent-nodebuglogin", "ipa-standalone=1 ipa-agent-token="+debugToken)
	vm, fail := startVM(ctx, t, m)
	c := &agentclient.Client{Base: api, Token: debugToken}
	wctx, wcancel := context.WithTimeout(ctx, 8*time.Minute)
	defer wcancel()
	// Well after the point a debug login would listen: the agent serves.
	if err := c.WaitReady(wctx, 2*time.Second, func() bool { exited, _ := vm.Exited(); return exited }); err != nil {
		fail("agent API: %v", err)
	}
	for _, s := range []string{rdinit.EventDebugLoginStarted, rescue.EventDebugSSHListening} {
		if l, ok := vm.Find(logtext.Msg(s)); ok {
			t.Errorf("without sshkey= and rootpwd= the console says %q", l.Text)
		}
	}
	// slirp accepts the host's connection and closes it when the guest
	// refuses: nothing must send an SSH banner.
	if conn, err := net.DialTimeout("tcp", addr, 10*time.Second); err != nil {
		t.Logf("port 22: %v", err)
	} else {
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		if line, err := bufio.NewReader(conn).ReadString('\n'); err == nil || line != "" {
			t.Errorf("port 22 of a boot without sshkey= answered %q (%v)", line, err)
		}
		conn.Close()
	}

	entries := collectLogs(wctx, t, c)
	problems, notes := logwatch.Problems(entries, "mdstat")
	for _, p := range problems {
		t.Error(p)
	}
	for _, n := range notes {
		t.Log(n)
	}
	// The init's log from its first line: the console's first init line.
	first, ok := vm.Find(logtext.Msg(rdinit.EventVersion))
	var initLog string
	for _, e := range entries {
		if e.Name == "init.log" {
			initLog = e.Text
		}
	}
	got, _, _ := strings.Cut(initLog, "\n")
	if !ok || !strings.Contains(first.Text, got) || !strings.Contains(got, "boot_mac=") {
		t.Errorf("init.log starts with %q; want the init's first console line %q with its boot MAC", got, first.Text)
	}
	if t.Failed() {
		for _, e := range entries {
			t.Logf("**** Entry: %s ****\n%s", e.Name, e.Text)
		}
	}
}

// collectLogs calls log.collect_system_logs and reads the bundle as
// Metal3's log watcher prints it.
func collectLogs(ctx context.Context, t *testing.T, c *agentclient.Client) []logwatch.Entry {
	t.Helper()
	r, err := c.Post(ctx, "log.collect_system_logs", nil, true)
	if err != nil || r.Status != "SUCCEEDED" {
		t.Fatalf("collect_system_logs: %v %+v", err, r)
	}
	var res struct {
		Logs string `json:"system_logs"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	tgz, err := base64.StdEncoding.DecodeString(res.Logs)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, err := logwatch.Read(ctx, t.TempDir(), "4c616273-0000-4000-8000-000000000001_cleaning_2026-01-01-00-00-00.tar.gz", tgz)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bundle: %d bytes, %d entries", len(tgz), len(entries))
	return entries
}

// debugLoginRescueVM boots a standalone agent with a good sshkey= and a
// rootpwd= in a format the agent cannot check (yescrypt): the console
// says why rootpwd= opened nothing and shows no debug login prompt, SSH
// takes the key; then finalize_rescue: the debug login makes way and the
// rescue user logs in over SSH with the rescue password.
func debugLoginRescueVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	m, addr, api := debugMachine(t, rd, "ironic-agent-debugrescue",
		fmt.Sprintf(`sshkey="%s" rootpwd="$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7" ipa-standalone=1 ipa-agent-token=%s`, authorized, debugToken))
	vm, fail := startVM(ctx, t, m)
	if _, err := vm.WaitFor(ctx, logtext.Msg(rescue.EventDebugSSHListening)); err != nil {
		fail("%v", err)
	}
	refused, ok := vm.Find(logtext.Msg(rescue.EventDebugLoginRefused))
	if !ok || !strings.Contains(refused.Text, "yescrypt") {
		fail("no refusal of rootpwd= naming yescrypt on the console: %q", refused.Text)
	}
	t.Logf("%s", refused.Text)
	if out, _, err := sshRun(ctx, addr, signer, "id -u"); err != nil || strings.TrimSpace(out) != "0" {
		fail("SSH with the key: %q %v", out, err)
	}
	c := &agentclient.Client{Base: api, Token: debugToken}
	if err := c.WaitReady(ctx, 2*time.Second, func() bool { exited, _ := vm.Exited(); return exited }); err != nil {
		fail("agent API: %v", err)
	}
	if l, ok := vm.Find("log in as root with the debug login password"); ok {
		t.Errorf("a console login for a refused rootpwd=: %q", l.Text)
	}
	// The debug login's log is in the init's, in the log bundle.
	entries := collectLogs(ctx, t, c)
	for _, e := range entries {
		if e.Name == "init.log" && !strings.Contains(e.Text, logtext.Msg(rescue.EventDebugLoginRefused)) {
			t.Errorf("init.log lacks the debug login's refusal:\n%s", e.Text)
		}
	}
	const password = "rescue after debug"
	if r, err := c.Post(ctx, "rescue.finalize_rescue", map[string]any{"rescue_password": password}, true); err != nil || r.HTTPStatus != 200 {
		fail("finalize_rescue: %v %+v", err, r)
	}
	l, err := vm.WaitFor(ctx, logtext.Msg(rescue.EventSSHListening))
	if err != nil {
		fail("the rescue's SSH server did not take port 22 from the debug login: %v", err)
	}
	t.Logf("%v %s", l.At, l.Text)
	cfg := &ssh.ClientConfig{User: rescue.User, Auth: []ssh.AuthMethod{ssh.Password(password)}, Timeout: time.Minute,
		HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	client, err := ssh.Dial("tcp", addr, cfg)
	if err != nil {
		fail("SSH as rescue after the debug login made way: %v", err)
	}
	defer client.Close()
	s, err := client.NewSession()
	if err != nil {
		fail("%v", err)
	}
	if out, err := s.CombinedOutput("echo RESCUE-$((6*7))"); err != nil || strings.TrimSpace(string(out)) != "RESCUE-42" {
		fail("rescue command: %q %v", out, err)
	}
}

// startVM starts m with console input and returns it with a fatal error
// that shows the console's tail.
func startVM(ctx context.Context, t *testing.T, m qemu.Machine) (*qemu.VM, func(format string, args ...any)) {
	t.Helper()
	vm, err := qemu.Start(ctx, m, qemu.Options{ConsoleInput: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	return vm, func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n%s", append(args, consoleTail(vm))...)
	}
}

// sshRun runs command as root on addr with key and returns its output and
// the server's host key.
func sshRun(ctx context.Context, addr string, key ssh.Signer, command string) (string, ssh.PublicKey, error) {
	return sshRunDial(ctx, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}, key, command)
}

// sshRunDial is sshRun over the connection dial makes (one made in a
// network namespace).
func sshRunDial(ctx context.Context, dial func(context.Context) (net.Conn, error), key ssh.Signer, command string) (string, ssh.PublicKey, error) {
	var hostKey ssh.PublicKey
	cfg := &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, Timeout: time.Minute,
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error { hostKey = k; return nil }}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	raw, err := dial(ctx)
	if err != nil {
		return "", nil, err
	}
	addr := raw.RemoteAddr().String()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	conn, chans, reqs, err := ssh.NewClientConn(raw, addr, cfg)
	if err != nil {
		raw.Close()
		return "", hostKey, err
	}
	c := ssh.NewClient(conn, chans, reqs)
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return "", hostKey, err
	}
	out, err := s.CombinedOutput(command)
	return string(out), hostKey, err
}

// fieldOf is the value of key=value in a log line.
func fieldOf(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

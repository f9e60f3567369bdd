package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/e2e/ironictest"
	"github.com/ironic-go/ironic-agent/internal/vmtest"
)

// rescuePorts is the first of the rescue tests' ports (beside the block
// in main_test.go, moved by the same $E2E_PORT_OFFSET), four per test
// (BIOS 9560-9563, UEFI 9564-9567): the hostfwd to the guest's SSH server
// and agent API, and its BMC's LAN channel and QEMU end.
var rescuePorts = portOffset() + 9560

// rescuePassword has a blank and a shell character, which neither Ironic's
// hash nor the logins may mangle.
const rescuePassword = "S3cret rescue$pw"

// TestVMRescue is rescue as an operator uses it, with Ironic holding the
// power through ipmi_sim (ipmi hardware type, pxe boot, agent rescue
// interface) under SeaBIOS: a deploy of a whole-disk image whose boot
// sector prints diskBootMarker, so the reboot to disk is seen; then
// `rescue` with a password: Ironic boots the agent ramdisk, the agent's
// finalize_rescue takes Ironic's hashed password and the node reaches
// "rescue"; Debian's ssh logs in as rescue over a hostfwd and runs
// commands with and without a terminal, a wrong password is refused, and
// the serial console's login works (and refuses a wrong password); then
// `unrescue` brings the node back to active and the machine boots its
// disk again.
func TestVMRescue(t *testing.T) { rescueLifecycle(t, "bios", 0) }

// TestVMRescueUEFI is TestVMRescue under OVMF: the image is
// TestVMDeployUEFI's, whose GRUB, started from the boot entry the agent
// wrote, prints uefiLoaderSays and powers off.
func TestVMRescueUEFI(t *testing.T) {
	slowScenario(t)
	rescueLifecycle(t, "uefi", 1)
}

// rescueLifecycle runs the scenario for firmware fw; n tells the tests'
// MACs, ports and BMC addresses apart.
func rescueLifecycle(t *testing.T, fw string, n int) {
	rd := ramdisk(t)
	for _, p := range []string{"ipmi_sim", "ipmitool", "ssh"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian packages openipmi, ipmitool, openssh-client; in test.sh)", p)
		}
	}
	s := services(t)
	if !s.series.Host() {
		t.Skipf("SKIPPED: the ipmi hardware type runs with the host's Ironic (2023.1) only, not %s", s.series)
	}
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	macs := [2]string{fmt.Sprintf("52:54:00:6d:%02x:01", 0x0a+n), fmt.Sprintf("52:54:00:6d:%02x:02", 0x0a+n)}
	sshPort, agentPort := rescuePorts+4*n, rescuePorts+4*n+1
	m := serviceMachine(t, rd, fw, agentPort, macs)
	m.HostFwd[sshPort] = 22
	// One disk, the deploy target: SeaBIOS boots the first disk it finds,
	// which must be the one the image went to. OVMF sees a virtio-scsi
	// disk at target 0, LUN 0 only (see TestVMDeployUEFI).
	m.Disks = slices.DeleteFunc(m.Disks, func(d vmtest.Disk) bool { return d.Serial != deployTarget })
	m.Disks[0].SCSITarget, m.Disks[0].SCSILun = 0, 0
	m.BMC = &vmtest.BMC{Kind: vmtest.BMCOpenIPMI, MfgID: 0xc0de, ProductID: 0x0b0c,
		LANAddress: fmt.Sprintf("127.95.40.%d", 10+n), LANPort: rescuePorts + 4*n + 2, LANMAC: fmt.Sprintf("02:00:00:95:40:%02x", 0x10+n),
		User: "ironic", Password: "ipmi-s3cret", VMPort: rescuePorts + 4*n + 3}

	// The image: under SeaBIOS an MBR disk whose boot code prints
	// diskBootMarker, under OVMF a GPT disk whose EFI loader prints
	// uefiLoaderSays.
	img, marker := mbrImage(), diskBootMarker
	copy(img[:440], markerBootSector()[:440])
	if fw == "uefi" {
		img, marker = uefiImage(t), uefiLoaderSays
	}
	files := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/deploy.kernel":
			http.ServeFile(w, r, rd.KernelFor(m.Firmware))
		case "/deploy.initramfs":
			http.ServeFile(w, r, rd.InitrdFor(m.Firmware))
		case "/image.raw":
			http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
		default:
			http.NotFound(w, r)
		}
	}))
	m.GuestFwd[guestHost+":80"] = files
	bmc, err := vmtest.StartIPMISim(ctx, m, vmtest.Options{ConsoleInput: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("BMC events: %s", strings.Join(bmc.Events(), "; "))
			if vm := bmc.VM(); vm != nil {
				t.Logf("serial console of the last boot (end; all of it in %s):\n%s", vm.LogPath, consoleTail(vm, 100))
			}
		}
		bmc.Close()
	})
	bmc.SetKernelArgs(agentArgs(agentPort) + " ironic_agent.dhcp=" + macs[0])
	kernel, initramfs := "http://"+files+"/deploy.kernel", "http://"+files+"/deploy.initramfs"
	driverInfo := map[string]any{
		"ipmi_address": m.BMC.LANAddress, "ipmi_port": m.BMC.LANPort,
		"ipmi_username": m.BMC.User, "ipmi_password": m.BMC.Password,
		"ipmi_cipher_suite": 3, // see ipmiLifecycle
		"deploy_kernel":     kernel, "deploy_ramdisk": initramfs,
		// The pxe boot interface's rescue boots these.
		"rescue_kernel": kernel, "rescue_ramdisk": initramfs,
	}
	noClean := false
	node := enroll(t, ctx, s, ironictest.NodeSpec{Name: "vm-rescue-" + fw, IPMI: driverInfo, AutomatedClean: &noClean,
		Properties: map[string]any{"capabilities": "boot_mode:" + fw, "vendor": nil}}, macs)
	ops := append(imageInfo("http://"+files+"/image.raw", img),
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/rescue_interface", Value: "agent"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"},
	)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "available", time.Minute); err != nil {
		t.Fatal(err)
	}

	// Deploy; Ironic boots the ramdisk, then the disk.
	step := time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "active", 8*time.Minute); err != nil {
		t.Fatal(err)
	}
	diskBoot(t, ctx, bmc, 0, marker, "after the deploy")
	t.Logf("deploy: %.1fs to active and the disk booted", time.Since(step).Seconds())

	// Rescue.
	step = time.Now()
	boots := bmc.Boots()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetRescue, RescuePassword: rescuePassword}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "rescue", 8*time.Minute); err != nil {
		t.Fatal(err)
	}
	vm := bmc.VM()
	if bmc.Boots() != boots+1 || vm == nil {
		t.Fatalf("rescue: %d power-ons, want 1", bmc.Boots()-boots)
	}
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	_, err = vm.WaitFor(lctx, "rescue: SSH server listening")
	lcancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rescue: %.1fs from Ironic's request to the rescue state and the SSH server listening", time.Since(step).Seconds())

	step = time.Now()
	out, err := rescueSSH(t, ctx, sshPort, rescuePassword, nil, "echo rescued as $USER on $(cat /proc/sys/kernel/hostname); ls /dev/ipmi0; exit 3")
	if code := exitCode(err); code != 3 || !strings.Contains(out, "rescued as rescue on") || !strings.Contains(out, "/dev/ipmi0") {
		t.Errorf("ssh exec: exit status %d (%v), output:\n%s", code, err, out)
	}
	out, err = rescueSSH(t, ctx, sshPort, rescuePassword, []string{"-tt"}, "tty")
	if exitCode(err) != 0 || !strings.Contains(out, "/dev/pts/") {
		t.Errorf("ssh with a terminal: %v, output:\n%s", err, out)
	}
	out, err = rescueSSH(t, ctx, sshPort, "not the password", nil, "echo in")
	if err == nil || strings.Contains(out, "in\n") || !strings.Contains(out, "Permission denied") {
		t.Errorf("ssh with a wrong password: %v, output:\n%s", err, out)
	}
	t.Logf("ssh: three logins in %.1fs", time.Since(step).Seconds())

	step = time.Now()
	consoleLogin(t, ctx, vm, "not the password", "Login incorrect")
	consoleLogin(t, ctx, vm, rescuePassword, "SERIAL-42 as rescue")
	t.Logf("serial console: two logins in %.1fs", time.Since(step).Seconds())

	// Unrescue: back to active, the disk boots again.
	step = time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetUnrescue}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "active", 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	diskBoot(t, ctx, bmc, boots+1, marker, "after unrescue")
	t.Logf("unrescue: %.1fs to active and the disk booted; whole test %.1fs; BMC events: %s",
		time.Since(step).Seconds(), time.Since(testStart).Seconds(), strings.Join(bmc.Events(), "; "))
}

// diskBoot waits for a power-on after the first `after` ones that boots
// the disk and prints marker (OVMF's loader then powers the machine off,
// so the VM may have exited already).
func diskBoot(t *testing.T, ctx context.Context, bmc *vmtest.IPMISim, after int, marker, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if vm := bmc.VM(); bmc.Boots() > after && vm != nil && !slices.Contains(vm.Cmdline, "-kernel") {
			if _, err := vm.WaitFor(ctx, marker); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no disk boot after power-on %d (BMC boot device %q, %d power-ons)", when, after, bmc.BootDevice(), bmc.Boots())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// rescueSSH runs command as rescue through the SSH hostfwd with Debian's
// ssh, the password given through SSH_ASKPASS, and returns its output.
func rescueSSH(t *testing.T, ctx context.Context, port int, password string, args []string, command string) (string, error) {
	t.Helper()
	askpass := filepath.Join(t.TempDir(), "askpass")
	script := "#!/bin/sh\nprintf '%s\\n' '" + strings.ReplaceAll(password, "'", `'\''`) + "'\n"
	if err := os.WriteFile(askpass, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	all := append([]string{"-F", "/dev/null", "-p", strconv.Itoa(port),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1", "-o", "ConnectTimeout=60"}, args...)
	all = append(all, "rescue@127.0.0.1", command)
	cmd := exec.CommandContext(ctx, "ssh", all...)
	cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
	out, err := cmd.CombinedOutput()
	t.Logf("ssh %s %q: %v\n%s", strings.Join(args, " "), command, err, out)
	return string(out), err
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// consoleLogin logs in as rescue on the serial console with password and
// waits for want: "Login incorrect", or what the shell's command prints.
func consoleLogin(t *testing.T, ctx context.Context, vm *vmtest.VM, password, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// A prompt may be stale or have the agent's log lines after it: an
	// empty user name brings a fresh one, whose first line is the banner
	// (the prompt itself ends without a newline).
	seen := len(vm.Lines())
	if err := vm.Type("\n"); err != nil {
		t.Fatal(err)
	}
	banner, err := waitLine(ctx, vm, seen, "the login banner", func(l string) bool {
		return strings.Contains(l, "log in as rescue with the rescue password")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Type("rescue\n"); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the user name as it arrives, before the login
	// reads it; then let the login turn the echo off before the password
	// comes.
	if _, err := waitLine(ctx, vm, banner+1, "the user name's echo", func(l string) bool {
		return strings.HasSuffix(strings.TrimSpace(l), "rescue")
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := vm.Type(password + "\n"); err != nil {
		t.Fatal(err)
	}
	if want != "Login incorrect" {
		if err := vm.Type("echo SERIAL-$((6*7)) as $USER\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitAfter(ctx, vm, seen, want); err != nil {
		t.Fatal(err)
	}
	if want != "Login incorrect" {
		// Not on the command's line: the kernel hangs up a serial line
		// whose session leader exits, dropping output still queued.
		n := len(vm.Lines())
		if err := vm.Type("exit\n"); err != nil {
			t.Fatal(err)
		}
		if err := waitAfter(ctx, vm, n, "log in as rescue with the rescue password"); err != nil {
			t.Fatalf("no login prompt after the shell's exit: %v", err)
		}
	}
	for _, l := range vm.Lines()[seen:] {
		if strings.Contains(l.Text, password) {
			t.Errorf("the console echoed the password: %q", l.Text)
		}
	}
}

// waitAfter waits for a console line holding s among the lines after the
// first n.
func waitAfter(ctx context.Context, vm *vmtest.VM, n int, s string) error {
	_, err := waitLine(ctx, vm, n, s, func(l string) bool { return strings.Contains(l, s) })
	return err
}

// waitLine waits for a console line after the first n that match accepts
// and returns its index; what names it in an error.
func waitLine(ctx context.Context, vm *vmtest.VM, n int, what string, match func(string) bool) (int, error) {
	for {
		lines := vm.Lines()
		for i := min(n, len(lines)); i < len(lines); i++ {
			if match(lines[i].Text) {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no %q on the console after line %d: %w", what, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

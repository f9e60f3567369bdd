package downloader_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/testbed/ocirootfs"
)

// helperEnv marks the copy of the test binary that plays the container
// runtime for one run of the image's entrypoint.
const helperEnv = "DOWNLOADER_RUNTIME_HELPER"

// runSpec is what the runtime helper runs: the image's entrypoint in
// RootFS, as the image's user, with SharedDir bound at /shared.
type runSpec struct {
	RootFS     string
	SharedDir  string
	Entrypoint []string
	Env        []string
	UID, GID   int
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		if err := runtimeHelper(spec); err != nil {
			fmt.Fprintln(os.Stderr, "runtime helper:", err)
			os.Exit(125)
		}
	}
	os.Exit(m.Run())
}

// runImage runs the image's entrypoint as a container runtime would, in a
// copy of this binary started in a mount namespace of its own (Go makes
// its mounts private, so the bind mount never reaches the host), and
// returns its combined output and exit status.
func runImage(t *testing.T, rootfs string, cfg ocirootfs.Config, shared string, extraEnv ...string) (string, int) {
	t.Helper()
	uid, gid, err := parseUser(cfg.Config.User)
	if err != nil {
		t.Fatal(err)
	}
	spec := runSpec{RootFS: rootfs, SharedDir: shared, Entrypoint: append(cfg.Config.Entrypoint, cfg.Config.Cmd...),
		Env: append(append([]string{}, cfg.Config.Env...), extraEnv...), UID: uid, GID: gid}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{helperEnv + "=" + string(b)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the image: %v", err)
	}
	if code == 125 {
		t.Fatalf("the runtime helper failed:\n%s", out.String())
	}
	t.Logf("entrypoint %v with %v: exit %d\n%s", spec.Entrypoint, extraEnv, code, out.String())
	return out.String(), code
}

func parseUser(u string) (int, int, error) {
	us, gs, ok := strings.Cut(u, ":")
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("image user %q: want numeric uid:gid", u)
	}
	return uid, gid, nil
}

// runtimeHelper is the runtime's part in the new mount namespace: bind the
// shared volume, enter the root filesystem, become the image's user with
// no capabilities and no way to gain any, and exec the entrypoint.
func runtimeHelper(specJSON string) error {
	var s runSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return err
	}
	target := filepath.Join(s.RootFS, "shared")
	if err := unix.Mount(s.SharedDir, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s at %s: %w", s.SharedDir, target, err)
	}
	if err := unix.Chroot(s.RootFS); err != nil {
		return fmt.Errorf("chroot %s: %w", s.RootFS, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		// EINVAL: a capability this kernel does not have.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setresgid(s.GID, s.GID, s.GID); err != nil {
		return err
	}
	if err := syscall.Setresuid(s.UID, s.UID, s.UID); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, d := range data {
		if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after the change of user: %+v", data)
		}
	}
	if len(s.Entrypoint) == 0 {
		return fmt.Errorf("the image has no entrypoint")
	}
	return syscall.Exec(s.Entrypoint[0], s.Entrypoint, s.Env)
}

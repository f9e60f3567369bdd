// Package ironic runs Debian's real Ironic 21.4 and ironic-inspector 11.1
// on 127.0.0.1 for end-to-end tests of the agent, and speaks their REST APIs.
//
// Everything it starts listens on loopback only and uses Ironic's fake-hardware
// driver, so Ironic never talks to a BMC, DHCP, TFTP, Keystone, Glance, Neutron
// or RabbitMQ; with Config.IPMI, nodes of the ipmi hardware type talk IPMI to
// the BMC their driver_info names (a test's ipmi_sim on a loopback address). The packaged services, /etc/ironic and /etc/ironic-inspector are
// never used: configs, sqlite databases and logs live in a work directory the
// caller owns.
package ironic

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Packages returns the Debian packages the harness runs. test.sh installs
// the same list in CI; EnsurePackages is the fallback for a developer machine.
func Packages() []string { return Series2023_1.packages() }

// debconfAnswers keep the maintainer scripts away from MySQL, RabbitMQ and
// Keystone. They default to false already; preseeding makes that explicit.
const debconfAnswers = `ironic-common ironic/configure_db boolean false
ironic-common ironic/ksat-create-service-user boolean false
ironic-api ironic/configure_api-endpoint boolean false
ironic-inspector ironic-inspector/configure_db boolean false
ironic-inspector ironic-inspector/configure_api-endpoint boolean false
ironic-inspector ironic-inspector/ksat-create-service-user boolean false
`

// MissingPackages returns the members of Packages() that dpkg does not report
// as installed.
func MissingPackages(ctx context.Context) []string {
	var missing []string
	for _, p := range Packages() {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, p)
		}
	}
	return missing
}

// EnsurePackages installs the missing Debian packages with apt-get (root
// only) and reports how long that took (zero when nothing was missing).
// Maintainer scripts are kept from starting daemons (tftpd-hpa, xinetd,
// the packaged ironic services) by a temporary policy-rc.d.
func EnsurePackages(ctx context.Context) (time.Duration, error) {
	missing := MissingPackages(ctx)
	if len(missing) == 0 {
		return 0, nil
	}
	if os.Geteuid() != 0 {
		return 0, fmt.Errorf("the Debian packages %s are missing and installing them needs root", strings.Join(missing, " "))
	}
	start := time.Now()
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
			return 0, fmt.Errorf("writing %s: %w", policy, err)
		}
		defer os.Remove(policy)
	}
	sel := exec.CommandContext(ctx, "debconf-set-selections")
	sel.Stdin = strings.NewReader(debconfAnswers)
	if err := runLogged(sel); err != nil {
		return 0, err
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	update := exec.CommandContext(ctx, "apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-qq")
	update.Env = env
	if err := runLogged(update); err != nil {
		return 0, err
	}
	args := append([]string{"-o", "DPkg::Lock::Timeout=900", "install", "-y", "-qq", "--no-install-recommends"}, missing...)
	install := exec.CommandContext(ctx, "apt-get", args...)
	install.Env = env
	if err := runLogged(install); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// runLogged runs cmd and, on failure, returns an error with its command
// line, exit status and the tail of its output.
func runLogged(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, tail(out.String(), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

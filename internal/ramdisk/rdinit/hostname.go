package rdinit

import (
	"os"
	"strings"
)

// FallbackHostname is the host name the init sets when the kernel has
// none: systemd's fallback, which every IPA image (systemd as init) has
// when neither /etc/hostname nor DHCP names the machine, so IPA reports
// hostname "localhost" where the kernel's default would be "(none)".
const FallbackHostname = "localhost"

// setFallbackHostname writes FallbackHostname into file (the kernel's
// /proc/sys/kernel/hostname) when it holds no name, "" or the kernel's
// "(none)". It says whether it did. A later DHCP lease with a host name
// (option 12) replaces it, as systemd-networkd's does.
func setFallbackHostname(file string) (bool, error) {
	if file == "" {
		return false, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	if h := strings.TrimSpace(string(b)); h != "" && h != "(none)" {
		return false, nil
	}
	if err := os.WriteFile(file, []byte(FallbackHostname), 0o644); err != nil {
		return false, err
	}
	return true, nil
}

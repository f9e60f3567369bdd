package ironic

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Series is the OpenStack release of the Ironic the harness runs.
type Series string

// The series the test bed knows. 2023.1 is the host's own Debian bookworm
// packages; the newer ones run from Debian root filesystems (see RootFS).
const (
	Series2023_1 Series = "2023.1"
	Series2025_1 Series = "2025.1"
	Series2026_1 Series = "2026.1"
)

// SeriesEnv is the environment variable that picks the series for e2e and
// e2e/vm.
const SeriesEnv = "IRONIC_SERIES"

// seriesInfo is how a series is installed and what it offers.
type seriesInfo struct {
	// suite is the Debian release that carries the series; empty for the
	// host's own packages.
	suite string
	// script is debootstrap's script for suite: bookworm's debootstrap
	// knows trixie but not forky, whose script is sid's.
	script string
	// ironic is the packaged Ironic version, for messages.
	ironic string
	// inspector says ironic-inspector is packaged and Ironic still has its
	// inspector inspect interface (removed in Ironic 33).
	inspector bool
	// noValidUntil: the suite's Release file is past its Valid-Until date
	// (forky's was), so apt inside must not check it.
	noValidUntil bool
	// requireTLS: [agent]require_tls defaults to true (Ironic >= 26): the
	// harness keeps Ironic's default, so the agent must use auto-TLS.
	requireTLS bool
	// netBoot are the packages of the boot loaders the network-boot tests
	// have Ironic copy ([pxe]loader_file_paths) that ironic-conductor does
	// not pull in (it brings ipxe, pxelinux and ipmitool): PXELINUX's
	// ldlinux.c32 (syslinux-common; without it Ironic refuses to load the
	// pxe interface with pxelinux.0 configured) and the network GRUB of
	// the pxe interface under UEFI (grub-efi-amd64-bin).
	netBoot []string
}

var seriesTable = map[Series]seriesInfo{
	Series2023_1: {ironic: "21.4", inspector: true},
	Series2025_1: {suite: "trixie", script: "trixie", ironic: "29.0", inspector: true, requireTLS: true},
	Series2026_1: {suite: "forky", script: "sid", ironic: "35.0", noValidUntil: true, requireTLS: true,
		netBoot: []string{"syslinux-common", "grub-efi-amd64-bin"}},
}

// AllSeries lists the series the harness knows, oldest first.
func AllSeries() []Series {
	s := make([]Series, 0, len(seriesTable))
	for k := range seriesTable {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// ParseSeries checks a series name; empty means the default, 2023.1.
func ParseSeries(name string) (Series, error) {
	if name == "" {
		return Series2023_1, nil
	}
	s := Series(strings.TrimSpace(name))
	if _, ok := seriesTable[s]; !ok {
		names := make([]string, 0, len(seriesTable))
		for _, k := range AllSeries() {
			names = append(names, string(k))
		}
		return "", fmt.Errorf("testbed ironic: unknown Ironic series %q (known: %s)", name, strings.Join(names, ", "))
	}
	return s, nil
}

// SeriesFromEnv is ParseSeries of $IRONIC_SERIES.
func SeriesFromEnv() (Series, error) {
	s, err := ParseSeries(os.Getenv(SeriesEnv))
	if err != nil {
		return "", fmt.Errorf("%s: %w", SeriesEnv, err)
	}
	return s, nil
}

func (s Series) info() seriesInfo { return seriesTable[s] }

// HasInspector says whether the series ships ironic-inspector and Ironic's
// inspector inspect interface (2023.1 and 2025.1; 2026.1 has only the
// built-in agent inspection).
func (s Series) HasInspector() bool { return s.info().inspector }

// HasAgentInspection says whether Ironic has the built-in agent inspect
// interface (/v1/continue_inspection, Ironic >= 22.1).
func (s Series) HasAgentInspection() bool { return s != Series2023_1 }

// HasHTTPBoot says whether Ironic has the http boot interface (UEFI HTTP
// boot of GRUB through the node's DHCP: pxe.HttpBoot, Ironic >= 24.1,
// the 2024.1 series): 2025.1 and 2026.1, not the host's 21.4.
func (s Series) HasHTTPBoot() bool { return s != Series2023_1 }

// RequiresTLS says whether Ironic, at its defaults, refuses a plain-http
// agent callback ([agent]require_tls, true since Ironic 26).
func (s Series) RequiresTLS() bool { return s.info().requireTLS }

// TokenOnGET says whether Ironic's conductor sends agent_token on its
// GET /v1/commands polls (Ironic >= 29), which locks the agent's GETs in.
func (s Series) TokenOnGET() bool { return s != Series2023_1 }

// HasNetBootLoaders says whether the series' Ironic finds every boot
// loader the network-boot tests configure (iPXE's, PXELINUX's and the
// network GRUB): the host's packages (test.sh installs them) or a root
// filesystem that carries them.
func (s Series) HasNetBootLoaders() bool { return s.Host() || len(s.info().netBoot) > 0 }

// Host says whether the series is the host's own Debian packages rather than
// a root filesystem.
func (s Series) Host() bool { return s.info().suite == "" }

// String is the series name with the Ironic version, e.g. "2026.1 (Ironic 35.0)".
func (s Series) String() string { return fmt.Sprintf("%s (Ironic %s)", string(s), s.info().ironic) }

// optionalHooks are the inspection hooks the harness adds to Ironic's
// defaults for built-in inspection: every one that reads agent data and
// needs no site configuration (physical-network needs a mapping,
// extra-hardware python-hardware's data). cpus is new in Ironic 35.
func (s Series) optionalHooks() []string {
	h := []string{"parse-lldp", "local-link-connection", "memory", "cpu-capabilities", "root-device", "raid-device", "pci-devices", "accelerators", "boot-mode"}
	if s == Series2026_1 {
		h = append(h, "cpus")
	}
	return h
}

// packages are the Debian packages the series runs.
func (s Series) packages() []string {
	p := []string{"ironic-api", "ironic-conductor", "python3-ironic"}
	if s.HasInspector() {
		p = append(p, "ironic-inspector", "python3-ironic-inspector")
	}
	return append(p, s.info().netBoot...)
}

package rdinit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/netnames"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/vmedia"
	"github.com/ironic-go/ironic-agent/rescue"
)

// Kernel command line parameters read by the init. Dotted names are ignored
// by the kernel itself (it takes them for module parameters of a module
// that does not exist) and, unlike undotted ones, are not copied into the
// environment of /init.
const (
	ParamCommand      = "ironic_agent.cmd"          // subcommand and arguments, comma-separated (default "run")
	ParamExit         = "ironic_agent.exit"         // after the command exits: restart|poweroff|reboot|hold
	ParamUpload       = "ironic_agent.upload"       // URL: POST a tar.gz of ironic_agent.upload_dir there after the command
	ParamUploadDir    = "ironic_agent.upload_dir"   // directory to upload
	ParamDHCP         = netup.ParamDHCP             // all (default) | none | MAC[,MAC]; with network data: the NICs it does not name (default none)
	ParamDHCPTimeout  = "ironic_agent.dhcp_timeout" // seconds to wait for the first lease (default 60)
	ParamModules      = "ironic_agent.modules"      // extra modules (names) to load, comma-separated; "all" for every one
	ParamDebug        = "ironic_agent.debug"        // 1: log DHCP exchanges
	ParamModuleJobs   = "ironic_agent.module_jobs"  // modules loaded at once (default 1)
	ParamIPv6         = "ironic_agent.ipv6"         // 0: no IPv6 (router advertisements, SLAAC, DHCPv6); default 1
	ParamNetworkData  = "ironic_agent.network_data" // 0: do not look for a config drive's network_data.json; default 1
	defaultModuleJobs = 1
	maxModuleJobs     = 64
	defaultDHCPWait   = 60 * time.Second
	// defaultDHCPRetry paces the background DHCP attempts after the
	// first window (dhclient's "retry" is 300 s; a shorter pause costs a
	// few DISCOVERs and gives a late server's address sooner).
	defaultDHCPRetry  = 30 * time.Second
	defaultLLDPWait   = 30 * time.Second // IPA's lldp_timeout
	defaultCommand    = "run"
	exitRestart       = "restart"
	exitPoweroff      = "poweroff"
	exitReboot        = "reboot"
	exitHold          = "hold"
	restartBackoffMin = 2 * time.Second
	restartBackoffMax = 60 * time.Second
)

// ParamBootMethod is Ironic's: vmedia when it booted the ramdisk from
// virtual media, whose configuration and parameters are then taken
// (package vmedia).
const ParamBootMethod = vmedia.ParamBootMethod

// ParamPublisherID is Ironic's: the publisher ID of the virtual-media ISO
// it built, whose config drive is the only one to take.
const ParamPublisherID = netup.ParamPublisherID

// IPA's parameters the init reads for tagged provisioning networks (see
// netup.ParseVLANs). The agent parses them too (agent/config); the init acts
// on them because it owns the ramdisk's network: the VLAN links must exist
// and hold a lease before the agent looks the node up over them.
const (
	ParamVLANs       = netup.ParamVLANs       // IFACE.VLAN | MAC.VLAN | IFACE | all, comma-separated
	ParamCollectLLDP = netup.ParamCollectLLDP // IFACE and all learn VLANs from LLDP only when set, as in IPA
	ParamLLDPTimeout = netup.ParamLLDPTimeout // seconds to listen for LLDP (IPA's default 30)
)

// systemd's parameters for the NICs' names, which the init honours as
// IPA's images' udev does (see package netnames). systemd reads a dash and
// an underscore in a parameter's name as the same character.
const (
	ParamIfnames          = "net.ifnames"       // 0: keep the kernel's names (eth0, ...)
	ParamNamingScheme     = "net.naming_scheme" // systemd's naming scheme (default: forky's, v261)
	paramNamingSchemeDash = "net.naming-scheme" // the same, as systemd also spells it
)

// Param describes one kernel parameter the init reads, for the
// configuration reference (tools/refdocs writes docs/configuration.md from
// Params). Names and defaults are the constants ParseConfig uses, so the
// reference cannot drift from the parser.
type Param struct {
	Name    string
	Default string // as written on the command line; "" for none
	Meaning string
}

// Params lists the init's own parameters, then those of Ironic and IPA it
// reads too.
func Params() []Param {
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	return []Param{
		{ParamCommand, defaultCommand, "the agent subcommand to run and its arguments, comma-separated"},
		{ParamExit, exitRestart, "what to do when the command exits: " + strings.Join([]string{exitRestart, exitPoweroff, exitReboot, exitHold}, ", ") +
			"; " + exitPoweroff + " by default when the command is not " + defaultCommand},
		{ParamUpload, "", "an http(s) URL: POST a tar.gz of " + ParamUploadDir + " there once the command exits (captures a machine over the network)"},
		{ParamUploadDir, "", "the directory to upload; goes with " + ParamUpload},
		{ParamDHCP, "all", "NICs to run DHCP on: all, none, or MACs comma-separated; with network data, the NICs the document does not name (then none by default)"},
		{ParamDHCPTimeout, secs(defaultDHCPWait), "seconds of the first DHCP attempt on each NIC; a NIC without a lease then keeps trying every " + secs(defaultDHCPRetry) + " s"},
		{ParamModules, "", "extra kernel modules to load, comma-separated; all for every module in the ramdisk"},
		{ParamModuleJobs, strconv.Itoa(defaultModuleJobs), fmt.Sprintf("modules loaded at once (1 to %d)", maxModuleJobs)},
		{ParamDebug, "0", "1: log DHCP exchanges"},
		{ParamIPv6, "1", "0: no IPv6 (router advertisements, SLAAC, DHCPv6)"},
		{ParamNetworkData, "1", "0: do not look for a config drive's network_data.json"},
		{ParamPublisherID, "", "Ironic's virtual-media ISO publisher ID: only a config drive (or boot ISO) with this ISO 9660 publisher ID is taken"},
		{ParamBootMethod, "", "Ironic's; " + vmedia.BootMethodVmedia + " (a virtual-media boot): the boot ISO's etc/ironic-python-agent and etc/ironic-python-agent.d are copied into /etc, and parameters.txt of the medium labelled " +
			vmedia.ParametersLabel + " is merged into the command line, its values replacing the kernel's, for the init, the agent and the debug login (a value with blanks in double quotes)"},
		{ParamVLANs, "", "VLAN interfaces to create and run DHCP on before the agent starts: IFACE.VLAN, MAC.VLAN, IFACE or all (VLANs learnt from LLDP), comma-separated"},
		{ParamCollectLLDP, "false", "with IFACE or all in " + ParamVLANs + ": learn the VLANs from LLDP"},
		{ParamLLDPTimeout, secs(defaultLLDPWait), "seconds to listen for LLDP when learning VLANs"},
		{rescue.ParamSSHKey, "", "diskimage-builder's dynamic-login: authorized_keys line(s), quoted (" + rescue.ParamSSHKey + "=\"ssh-ed25519 AAAA... operator@desk\"); root logs in over SSH with them from the first seconds of the boot, " +
			"whatever the agent does; several keys one after another, or several " + rescue.ParamSSHKey + "= parameters; an unparsable key opens no SSH and is logged with why; also taken from virtual media's " + vmedia.ParametersFile},
		{rescue.ParamRootPassword, "", "diskimage-builder's dynamic-login: root's password as a SHA-crypt hash (openssl passwd -6), or the base64 of one (openssl passwd -6 | base64 -w 0), which keeps $ off the command line; " +
			"root logs in with it on every kernel console; another hash format opens nothing and is logged with why; also taken from virtual media's " + vmedia.ParametersFile},
		{ParamIfnames, "1", "0: keep the kernel's NIC names (eth0, ...) instead of systemd's predictable names (eno1, ens3, enp1s0, ...) as IPA's images give them; " +
			"a Dell iDRAC's or IBM IMM's USB NIC is still named idrac or ibmimm, as udev's rules name it"},
		{ParamNamingScheme, netnames.DefaultScheme, "systemd's naming scheme for the predictable names (also spelt " + paramNamingSchemeDash + "): latest or one of " +
			strings.Join(netnames.SchemeNames(), ", ") + "; another is logged and the default used, as systemd does"},
	}
}

// Cmdline is the parsed kernel command line: key -> value, the last
// occurrence winning. Bare words map to "".
type Cmdline map[string]string

// ParseCmdline splits /proc/cmdline on white space like IPA does, and takes
// a value between double quotes (the kernel's own syntax, `k="a b"`) as one
// value.
func ParseCmdline(s string) Cmdline {
	c := Cmdline{}
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t\n\r")
		if s == "" {
			break
		}
		i, inq := 0, false
		for ; i < len(s); i++ {
			ch := s[i]
			if ch == '"' {
				inq = !inq
			} else if !inq && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
				break
			}
		}
		tok := s[:i]
		s = s[i:]
		k, v, _ := strings.Cut(tok, "=")
		k = strings.ReplaceAll(k, `"`, "")
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if k != "" {
			c[k] = v
		}
	}
	return c
}

// Config is what the init does, from the kernel command line.
type Config struct {
	Command   []string
	Exit      string
	UploadURL string
	UploadDir string
	// Config is the network set-up's part: the NICs and VLANs to
	// configure and how, and the files a lease is written to.
	netup.Config
	Modules    []string
	ModuleJobs int
	// NetworkData looks for a config drive (label config-2) with
	// openstack/latest/network_data.json and, when there is one,
	// configures the network from it instead of DHCP on every NIC.
	NetworkData bool
	// PublisherID is ir_pub_id: when set, only a config drive whose ISO
	// 9660 publisher ID is this (without case) is taken; when not, only
	// one without a publisher ID, and none at all with BOOTIF (a network
	// boot), as IPA's images decide (ironic-python-agent-builder's
	// ironic-python-agent-resolve-configdrive.sh).
	PublisherID string
	// Ifnames renames the NICs as udev does in IPA's images (package
	// netnames) under NamingScheme; net.ifnames=0 turns it off.
	Ifnames      bool
	NamingScheme netnames.Scheme
	// NamingProblems are bad values of systemd's naming parameters: like
	// systemd, the init says so and goes on with its default.
	NamingProblems []error
	// KernelCmdline, when set, is the file `ironic-agent run` reads as
	// the kernel command line (MergedCmdline).
	KernelCmdline string
}

// The ramdisk's own files, written by ParseConfig's configuration.
const (
	DefaultResolvConf   = "/etc/resolv.conf"
	DefaultHostnameFile = "/proc/sys/kernel/hostname"
	DefaultIPv6Conf     = "/proc/sys/net/ipv6/conf"
	// ConfigDriveMount is where the config drive is mounted, read-only,
	// while its network data is read.
	ConfigDriveMount = "/run/ironic-agent/config-2"
	// VirtualMediaMount holds the mounts of virtual media while their
	// configuration and parameters are read.
	VirtualMediaMount = "/run/ironic-agent/vmedia"
	// MergedCmdline is the kernel command line with virtual media's
	// parameters after it, which the agent reads (run --kernel-cmdline).
	MergedCmdline = "/run/ironic-agent/cmdline"
)

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParseConfig reads the init's parameters; a bad value is an error naming
// the parameter, never a silent default.
func ParseConfig(c Cmdline) (Config, error) {
	cfg := Config{Command: []string{defaultCommand}, ModuleJobs: defaultModuleJobs, NetworkData: true,
		Config: netup.Config{DHCPTimeout: defaultDHCPWait, DHCPRetry: defaultDHCPRetry, ResolvConf: DefaultResolvConf, HostnameFile: DefaultHostnameFile,
			LLDPTimeout: defaultLLDPWait, IPv6: true, IPv6Conf: DefaultIPv6Conf}}
	// IPA's parameters first: they never stop the init (the agent reports
	// its own parameters' bad values), so a bad one of ours below cannot
	// hide them.
	cfg.VLANs, cfg.VLANProblems = netup.ParseVLANs(c[ParamVLANs])
	cfg.Ifnames, cfg.NamingScheme, cfg.NamingProblems = parseNaming(c)
	if v, ok := c[ParamCollectLLDP]; ok {
		b, err := pyconv.ParseBool(v)
		if err != nil {
			cfg.VLANProblems = append(cfg.VLANProblems, fmt.Errorf("%s=%q: %v", ParamCollectLLDP, v, err))
		}
		cfg.CollectLLDP = b
	}
	if v, ok := c[ParamLLDPTimeout]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0 && f <= 3600) {
			cfg.VLANProblems = append(cfg.VLANProblems, fmt.Errorf("%s=%q: want seconds from 0 to 3600; listening %v", ParamLLDPTimeout, v, defaultLLDPWait))
		} else {
			cfg.LLDPTimeout = time.Duration(f * float64(time.Second))
		}
	}
	if v, ok := c[ParamCommand]; ok {
		cfg.Command = splitList(v)
		if len(cfg.Command) == 0 {
			return cfg, fmt.Errorf("%s=%q: empty command", ParamCommand, v)
		}
	}
	cfg.Exit = exitPoweroff
	if cfg.Command[0] == defaultCommand {
		cfg.Exit = exitRestart
	}
	if v, ok := c[ParamExit]; ok {
		switch v {
		case exitRestart, exitPoweroff, exitReboot, exitHold:
			cfg.Exit = v
		default:
			return cfg, fmt.Errorf("%s=%q: want restart, poweroff, reboot or hold", ParamExit, v)
		}
	}
	cfg.UploadURL = c[ParamUpload]
	cfg.UploadDir = c[ParamUploadDir]
	if (cfg.UploadURL == "") != (cfg.UploadDir == "") {
		return cfg, fmt.Errorf("%s and %s go together", ParamUpload, ParamUploadDir)
	}
	if cfg.UploadURL != "" && !strings.HasPrefix(cfg.UploadURL, "http://") && !strings.HasPrefix(cfg.UploadURL, "https://") {
		return cfg, fmt.Errorf("%s=%q: want an http(s) URL", ParamUpload, cfg.UploadURL)
	}
	if v, ok := c[ParamDHCP]; ok {
		cfg.DHCPGiven = true
		switch v {
		case "all", "":
		case "none":
			cfg.DHCP = []string{}
		default:
			cfg.DHCP = []string{}
			for _, m := range splitList(v) {
				mac, err := netup.NormalizeMAC(m)
				if err != nil {
					return cfg, fmt.Errorf("%s=%q: %v", ParamDHCP, v, err)
				}
				cfg.DHCP = append(cfg.DHCP, mac)
			}
		}
	}
	if v, ok := c[ParamDHCPTimeout]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("%s=%q: want a positive number of seconds", ParamDHCPTimeout, v)
		}
		cfg.DHCPTimeout = time.Duration(n) * time.Second
	}
	cfg.Modules = splitList(c[ParamModules])
	cfg.ModuleJobs = defaultModuleJobs
	if v, ok := c[ParamModuleJobs]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxModuleJobs {
			return cfg, fmt.Errorf("%s=%q: want a number from 1 to %d", ParamModuleJobs, v, maxModuleJobs)
		}
		cfg.ModuleJobs = n
	}
	cfg.Debug = c[ParamDebug] == "1"
	for _, sw := range []struct {
		param string
		on    *bool
	}{{ParamIPv6, &cfg.IPv6}, {ParamNetworkData, &cfg.NetworkData}} {
		if v, ok := c[sw.param]; ok {
			switch v {
			case "0":
				*sw.on = false
			case "1", "":
			default:
				return cfg, fmt.Errorf("%s=%q: want 0 or 1", sw.param, v)
			}
		}
	}
	cfg.PublisherID = c[ParamPublisherID]
	if v, ok := c["BOOTIF"]; ok && v != "" {
		// PXE passes "01-aa-bb-cc-dd-ee-ff" (ARP type 1 first); iPXE configs
		// from Ironic pass a plain MAC.
		m := v
		if len(m) == 20 && strings.HasPrefix(m, "01-") {
			m = m[3:]
		}
		mac, err := netup.NormalizeMAC(strings.ReplaceAll(m, "-", ":"))
		if err != nil {
			return cfg, fmt.Errorf("BOOTIF=%q: %v", v, err)
		}
		cfg.BootIF = mac
	}
	return cfg, nil
}

// parseNaming reads net.ifnames= (systemd's boolean; a bad value leaves
// naming on, as systemd does) and net.naming_scheme= (an unknown scheme
// gives the default, as systemd does), each bad value a problem to log.
func parseNaming(c Cmdline) (on bool, scheme netnames.Scheme, problems []error) {
	on, scheme = true, netnames.Default()
	if v, ok := c[ParamIfnames]; ok {
		switch strings.ToLower(v) {
		case "0", "no", "n", "false", "f", "off":
			on = false
		case "1", "yes", "y", "true", "t", "on", "":
		default:
			problems = append(problems, fmt.Errorf("%s=%q: want a boolean (0 or 1); NICs renamed", ParamIfnames, v))
		}
	}
	for _, k := range []string{ParamNamingScheme, paramNamingSchemeDash} {
		v, ok := c[k]
		if !ok {
			continue
		}
		s, err := netnames.ParseScheme(v)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s=%q: %v; using %s", k, v, err, s.Name))
		}
		scheme = s
	}
	return on, scheme, problems
}

// lookForConfigDrive reports whether the init looks for a config drive's
// network data and, when it does not, why, for the log ("" when
// ironic_agent.network_data=0 turned it off, which needs no saying).
func (c Config) lookForConfigDrive() (look bool, why string) {
	switch {
	case !c.NetworkData:
		return false, ""
	case c.BootIF != "" && c.PublisherID == "":
		// A network boot (iPXE and PXE give BOOTIF; Ironic's virtual
		// media gives ir_pub_id beside it): a config drive there is a
		// virtual medium left from an earlier boot, as IPA's images judge.
		return false, "network boot (BOOTIF without " + ParamPublisherID + "): no config drive taken"
	}
	return true, ""
}

// agentArgv is the command line of the agent process: the configured
// command, and for the agent itself (run) its log file, for a debug
// login's shell to read, and the merged kernel command line when there is
// one.
func agentArgv(cfg Config) []string {
	argv := append([]string{"ironic-agent"}, cfg.Command...)
	if cfg.Command[0] != defaultCommand {
		return argv
	}
	flags := []string{"--log-file", logging.AgentLogFile}
	if cfg.KernelCmdline != "" {
		flags = append(flags, "--kernel-cmdline", cfg.KernelCmdline)
	}
	return slices.Concat(argv[:2], flags, argv[2:])
}

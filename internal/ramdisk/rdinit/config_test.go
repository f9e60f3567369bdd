package rdinit

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCmdline(t *testing.T) {
	c := ParseCmdline(`BOOT_IMAGE=/vmlinuz console=ttyS0,115200 quiet ipa-api-url=http://10.0.2.100:6385 x="a b" x2="q" ` +
		"ironic_agent.cmd=capture-fixture,/run/fx\n")
	want := Cmdline{
		"BOOT_IMAGE": "/vmlinuz", "console": "ttyS0,115200", "quiet": "", "ipa-api-url": "http://10.0.2.100:6385",
		"x": "a b", "x2": "q", "ironic_agent.cmd": "capture-fixture,/run/fx",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %q\nwant %q", c, want)
	}
	if c := ParseCmdline("a=1 a=2"); c["a"] != "2" {
		t.Errorf("last occurrence should win: %q", c)
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(ParseCmdline("BOOTIF=01-52-54-00-12-34-01"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Command, []string{"run"}) || cfg.Exit != "restart" || cfg.DHCP != nil ||
		cfg.DHCPTimeout != 60*time.Second || cfg.BootIF != "52:54:00:12:34:01" || cfg.ModuleJobs != 1 ||
		cfg.ResolvConf != "/etc/resolv.conf" || cfg.HostnameFile != "/proc/sys/kernel/hostname" ||
		!cfg.IPv6 || cfg.IPv6Conf != "/proc/sys/net/ipv6/conf" || !cfg.NetworkData || cfg.DHCPGiven {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg, err := ParseConfig(ParseCmdline("ironic_agent.network_data=0")); err != nil || cfg.NetworkData {
		t.Errorf("network_data=0: %v %v", cfg.NetworkData, err)
	}
	if cfg, err := ParseConfig(ParseCmdline("ironic_agent.ipv6=0")); err != nil || cfg.IPv6 {
		t.Errorf("ipv6=0: %v %v", cfg.IPv6, err)
	}
	if cfg, err := ParseConfig(ParseCmdline("ironic_agent.module_jobs=4")); err != nil || cfg.ModuleJobs != 4 {
		t.Errorf("module_jobs=4: %d %v", cfg.ModuleJobs, err)
	}
	cfg, err = ParseConfig(ParseCmdline("ironic_agent.cmd=capture-fixture,/run/fx ironic_agent.upload=http://10.0.2.100/up " +
		"ironic_agent.upload_dir=/run/fx ironic_agent.dhcp=52:54:00:AB:CD:EF ironic_agent.dhcp_timeout=5 ironic_agent.modules=loop,vfat BOOTIF=52:54:00:12:34:01"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Command, []string{"capture-fixture", "/run/fx"}) || cfg.Exit != "poweroff" ||
		cfg.UploadURL != "http://10.0.2.100/up" || cfg.UploadDir != "/run/fx" ||
		!reflect.DeepEqual(cfg.DHCP, []string{"52:54:00:ab:cd:ef"}) || cfg.DHCPTimeout != 5*time.Second ||
		!reflect.DeepEqual(cfg.Modules, []string{"loop", "vfat"}) || cfg.BootIF != "52:54:00:12:34:01" {
		t.Errorf("parsed: %+v", cfg)
	}
	if cfg, _ := ParseConfig(ParseCmdline("ironic_agent.dhcp=none")); cfg.DHCP == nil || len(cfg.DHCP) != 0 || !cfg.DHCPGiven {
		t.Errorf("dhcp=none: %#v", cfg.DHCP)
	}
	// "all" is the default's selection, but given: with network data it
	// turns glean's DHCP fallback on.
	if cfg, _ := ParseConfig(ParseCmdline("ironic_agent.dhcp=all")); cfg.DHCP != nil || !cfg.DHCPGiven {
		t.Errorf("dhcp=all: %#v given %v", cfg.DHCP, cfg.DHCPGiven)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for line, want := range map[string]string{
		"ironic_agent.cmd=,":                                      "ironic_agent.cmd",
		"ironic_agent.exit=explode":                               "ironic_agent.exit",
		"ironic_agent.upload=http://x/":                           "go together",
		"ironic_agent.upload=ftp://x/ ironic_agent.upload_dir=/d": "http(s) URL",
		"ironic_agent.dhcp=52:54:00":                              "not a MAC",
		"ironic_agent.dhcp_timeout=-1":                            "ironic_agent.dhcp_timeout",
		"ironic_agent.dhcp_timeout=soon":                          "ironic_agent.dhcp_timeout",
		"BOOTIF=01-zz-54-00-12-34-01":                             "BOOTIF",
		"ironic_agent.module_jobs=0":                              "ironic_agent.module_jobs",
		"ironic_agent.module_jobs=many":                           "ironic_agent.module_jobs",
		"ironic_agent.ipv6=no":                                    "ironic_agent.ipv6",
		"ironic_agent.network_data=off":                           "ironic_agent.network_data",
	} {
		_, err := ParseConfig(ParseCmdline(line))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", line, err, want)
		}
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add(`console=ttyS0 x="a b" BOOTIF=01-52-54-00-12-34-01 ironic_agent.cmd=inventory`)
	f.Add(`"="" =" a=`)
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseCmdline(s)
		for k := range c {
			if k == "" || strings.Contains(k, `"`) {
				t.Fatalf("bad key %q", k)
			}
		}
		_, _ = ParseConfig(c) // must not panic
	})
}

// TestBootParameters parses the kernel command lines Ironic and Metal3
// write for the agent ramdisk, and checks the NIC BOOTIF picks and whether
// the init looks for a config drive: iPXE's boot.ipxe (BOOTIF=${mac}, a
// plain MAC), PXELINUX's (the ARP type first), Ironic 2026.1's virtual
// media ISO (image_utils.prepare_iso_image: [redfish]kernel_append_params,
// ir_pub_id, the agent's parameters, BOOTIF only for a node with a single
// port bound to a VIF, boot_method=vmedia), Metal3's (no VIFs, so no
// BOOTIF), and 2025.1's ISO (no ir_pub_id). None of them writes ip=: the
// kernel's and dracut's parameter, which neither IPA's images (no dracut
// network) nor the init read.
func TestBootParameters(t *testing.T) {
	const token = "ipa-agent-token=tok ipa-api-url=http://192.0.2.1:6385 ipa-inspection-callback-url=http://192.0.2.1:6385/v1/continue_inspection"
	for _, tc := range []struct {
		name, cmdline, bootIF string
		configDrive           bool
	}{
		{"ipxe", "selinux=0 troubleshoot=0 text nofb nomodeset vga=normal ipa-insecure=1 BOOTIF=52:54:00:12:34:56 initrd=deploy_ramdisk", "52:54:00:12:34:56", false},
		{"pxelinux", "nofb vga=normal ipa-debug=1 BOOTIF=01-52-54-00-12-34-56", "52:54:00:12:34:56", false},
		{"vmedia", "nofb vga=normal ir_pub_id=6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44 " + token + " BOOTIF=52:54:00:12:34:56 ipa-debug=1 boot_method=vmedia",
			"52:54:00:12:34:56", true},
		{"vmedia-metal3", "nofb vga=normal ir_pub_id=6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44 " + token + " boot_method=vmedia", "", true},
		{"vmedia-2025.1", "nofb vga=normal " + token + " boot_method=vmedia", "", true},
		{"off", "ironic_agent.network_data=0 boot_method=vmedia", "", false},
	} {
		cfg, err := ParseConfig(ParseCmdline(tc.cmdline))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		look, why := cfg.lookForConfigDrive()
		if cfg.BootIF != tc.bootIF || look != tc.configDrive {
			t.Errorf("%s: BOOTIF %q, config drive %v; want %q, %v", tc.name, cfg.BootIF, look, tc.bootIF, tc.configDrive)
		}
		if wantWhy := !look && cfg.NetworkData; (why != "") != wantWhy {
			t.Errorf("%s: reason %q; want one: %v", tc.name, why, wantWhy)
		}
		if strings.Contains(tc.name, "vmedia") && strings.Contains(tc.cmdline, "ir_pub_id") && cfg.PublisherID != "6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44" {
			t.Errorf("%s: publisher ID %q", tc.name, cfg.PublisherID)
		}
	}
}

func TestParseConfigVLANs(t *testing.T) {
	cfg, err := ParseConfig(ParseCmdline("ipa-enable-vlan-interfaces=all,eth0.x ipa-collect-lldp=True ipa-lldp-timeout=2.5"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VLANs) != 1 || !cfg.VLANs[0].All || len(cfg.VLANProblems) != 1 || !cfg.CollectLLDP || cfg.LLDPTimeout != 2500*time.Millisecond {
		t.Errorf("%+v", cfg)
	}
	cfg, err = ParseConfig(ParseCmdline("ipa-collect-lldp=maybe ipa-lldp-timeout=-1"))
	if err != nil || cfg.CollectLLDP || cfg.LLDPTimeout != 30*time.Second || len(cfg.VLANProblems) != 2 {
		t.Errorf("bad IPA values must be reported, not stop the init: %+v %v", cfg, err)
	}
	// A bad parameter of ours does not lose IPA's.
	cfg, err = ParseConfig(ParseCmdline("ironic_agent.exit=never ipa-enable-vlan-interfaces=eth0.5"))
	if err == nil || len(cfg.VLANs) != 1 {
		t.Errorf("%+v %v", cfg, err)
	}
}

func TestParseNaming(t *testing.T) {
	for _, c := range []struct {
		cmdline  string
		on       bool
		scheme   string
		problems int
	}{
		{"", true, "v261", 0},
		{"net.ifnames=0", false, "v261", 0},
		{"net.ifnames=off net.naming_scheme=v255", false, "v255", 0},
		{"net.naming-scheme=latest", true, "v261", 0},
		{"net.ifnames=maybe net.naming-scheme=v256", true, "v261", 2},
		// A bad parameter of the init's own stops its parsing, not this.
		{"ironic_agent.exit=never net.naming_scheme=v247", true, "v247", 0},
	} {
		cfg, _ := ParseConfig(ParseCmdline(c.cmdline))
		if cfg.Ifnames != c.on || cfg.NamingScheme.Name != c.scheme || len(cfg.NamingProblems) != c.problems {
			t.Errorf("%q: ifnames %v scheme %s problems %v; want %v %s %d", c.cmdline, cfg.Ifnames, cfg.NamingScheme.Name, cfg.NamingProblems, c.on, c.scheme, c.problems)
		}
	}
}

// TestAgentArgv: the agent writes its log file and reads the merged
// command line of a virtual-media boot with parameters; other commands get
// no flag.
func TestAgentArgv(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		file string
		want string
	}{
		{[]string{"run"}, "", "ironic-agent run --log-file /run/ironic-agent/agent.log"},
		{[]string{"run", "--debug"}, MergedCmdline, "ironic-agent run --log-file /run/ironic-agent/agent.log --kernel-cmdline /run/ironic-agent/cmdline --debug"},
		{[]string{"inventory"}, MergedCmdline, "ironic-agent inventory"},
	} {
		if got := strings.Join(agentArgv(Config{Command: tc.cmd, KernelCmdline: tc.file}), " "); got != tc.want {
			t.Errorf("%v %q: %q, want %q", tc.cmd, tc.file, got, tc.want)
		}
	}
}

package bmcsim

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want controlRequest
		err  string
	}{
		{args: []string{"chassis", "get", "power"}, want: controlRequest{get: []string{"power"}}},
		{args: []string{"chassis", "get", "power", "boot"}, want: controlRequest{get: []string{"power", "boot"}}},
		{args: []string{"chassis", "set", "power", "1"}, want: controlRequest{set: [][2]string{{"power", "1"}}}},
		{args: []string{"chassis", "set", "boot", "default"}, want: controlRequest{set: [][2]string{{"boot", BootDisk}}}},
		{args: []string{"chassis", "set", "boot", "pxe", "power", "0"}, want: controlRequest{set: [][2]string{{"boot", BootPXE}, {"power", "0"}}}},
		{args: []string{"lan", "get", "ip_addr", "mac_addr"}, want: controlRequest{get: []string{"ip_addr", "mac_addr"}}},
		{args: []string{"lan", "set", "ip_addr", "10.0.0.1"}, want: controlRequest{set: [][2]string{{"ip_addr", "10.0.0.1"}}}},
		{args: []string{"lan", "check", "ip_addr_src", "dhcp"}},
		{args: []string{"chassis"}, err: "want chassis|lan"},
		{args: []string{"fan", "get", "speed"}, err: "unknown control program kind"},
		{args: []string{"chassis", "toggle"}, err: "unknown operation"},
		{args: []string{"chassis", "get", "reset"}, err: "unknown parameter"},
		{args: []string{"chassis", "get", "ip_addr"}, err: "unknown parameter"},
		{args: []string{"chassis", "set", "power"}, err: "without a value"},
		{args: []string{"chassis", "set", "power", "2"}, err: "want 0 or 1"},
		{args: []string{"chassis", "set", "boot", "bios"}, err: "not simulated"},
		{args: []string{"lan", "set", "power", "1"}, err: "unknown parameter"},
	} {
		got, err := parseControl(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseControl(%q) = %v, want an error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseControl(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

// FuzzParseControl: the arguments come from ipmi_sim, which builds them from
// what a LAN client sent.
func FuzzParseControl(f *testing.F) {
	f.Add("chassis set boot pxe power 1")
	f.Add("lan get ip_addr mac_addr subnet_mask")
	f.Add("chassis get")
	f.Fuzz(func(t *testing.T, line string) {
		r, err := parseControl(strings.Fields(line))
		if err != nil {
			return
		}
		for _, kv := range r.set {
			if kv[0] == "boot" && !slices.Contains([]string{BootNone, BootPXE, BootDisk, BootCDROM}, kv[1]) {
				t.Errorf("%q: boot device %q accepted", line, kv[1])
			}
		}
	})
}

func TestIPMISimConfig(t *testing.T) {
	m := OpenIPMIMachine(t, "/work/vm")
	c, err := ipmiSimConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	lan := c.lan("/bin/test -vmtest-bmc-control /work/vm/bmc/control.sock")
	for _, want := range []string{
		"addr 127.77.0.9 ",
		`lan_config_program "/bin/test -vmtest-bmc-control /work/vm/bmc/control.sock lan"`,
		`chassis_control "/bin/test -vmtest-bmc-control /work/vm/bmc/control.sock chassis"`,
		"serial kcs 127.0.0.1 ",
		`user 2 true "admin" "s3cret" admin 10 md5`,
	} {
		if !strings.Contains(lan, want) {
			t.Errorf("lan.conf lacks %q:\n%s", want, lan)
		}
	}
	if emu := c.emu(); !strings.Contains(emu, "mc_add 0x20 0 no-device-sdrs 0x01 1 0 0x9f 0x1234 0xbeb") {
		t.Errorf("command file:\n%s", emu)
	}
	a, err := m.Args(qemu.RelayCommand, -1)
	if err != nil {
		t.Fatal(err)
	}
	if cl := strings.Join(a, " "); !strings.Contains(cl, "-device ipmi-bmc-extern,id=bmc0,chardev=ipmi0 -device isa-ipmi-kcs,bmc=bmc0") {
		t.Errorf("QEMU command line has no external BMC: %s", cl)
	}
	for _, bad := range []func(*qemu.BMC){
		func(b *qemu.BMC) { b.LANAddress = "::1" },
		func(b *qemu.BMC) { b.LANPort = 0 },
		func(b *qemu.BMC) { b.LANMAC = "02:00:00:77:00" },
		func(b *qemu.BMC) { b.Password = `pass"word` },
		func(b *qemu.BMC) { b.User = "" },
	} {
		m := OpenIPMIMachine(t, "/work/vm")
		bad(m.BMC)
		if _, err := ipmiSimConfig(m); err == nil {
			t.Errorf("BMC %+v accepted", *m.BMC)
		}
	}
}

func TestBootMachine(t *testing.T) {
	s := &IPMISim{machine: qemu.DefaultMachine(qemu.BIOS), appendArgs: "ipa-api-url=x"}
	s.machine.Kernel, s.machine.Initrd = "/k", "/i"
	m, err := s.bootMachine(BootPXE)
	if err != nil || m.Kernel != "/k" || m.Append != "ipa-api-url=x" {
		t.Errorf("pxe boot: %+v, %v", m, err)
	}
	if m, err := s.bootMachine(BootDisk); err != nil || m.Kernel != "" || m.Initrd != "" || m.ISO != "" {
		t.Errorf("disk boot: kernel %q initrd %q ISO %q, %v", m.Kernel, m.Initrd, m.ISO, err)
	}
	if _, err := s.bootMachine(BootCDROM); err == nil {
		t.Error("CD boot without an ISO accepted")
	}
}

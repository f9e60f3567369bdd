package ironic

import (
	"strings"
	"testing"
	"time"
)

// TestIronicConfIPMI: Config.IPMI enables the ipmi hardware type and drops
// the fake defaults, which Ironic refuses for a hardware type that does not
// support them; without it the fake defaults stay.
func TestIronicConfIPMI(t *testing.T) {
	c := Config{Dir: "/work/ironic", IPMI: true, InspectorCallbackURL: "http://10.0.2.100:9511"}
	c.defaults()
	conf := ironicConf(c, c.Dir)
	for _, want := range []string{
		"enabled_hardware_types = fake-hardware,ipmi\n",
		"enabled_power_interfaces = fake,ipmitool\n",
		"enabled_management_interfaces = fake,noop,ipmitool\n",
		"enabled_boot_interfaces = fake,pxe\n",
		"[ipmi]\nmin_command_interval = 1\n",
		"callback_endpoint_override = http://10.0.2.100:9511\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf with IPMI lacks %q:\n%s", want, conf)
		}
	}
	for _, unwanted := range []string{"default_power_interface", "default_management_interface", "default_boot_interface"} {
		if strings.Contains(conf, unwanted) {
			t.Errorf("ironic.conf with IPMI sets %s", unwanted)
		}
	}
	c.IPMI, c.InspectorCallbackURL = false, ""
	conf = ironicConf(c, c.Dir)
	for _, want := range []string{"default_power_interface = fake\n", "default_boot_interface = fake\n",
		"callback_endpoint_override = http://127.0.0.1:5050\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf without IPMI lacks %q", want)
		}
	}
	if strings.Contains(conf, "ipmi") {
		t.Errorf("ironic.conf without IPMI mentions ipmi:\n%s", conf)
	}
}

// TestIronicConfNetBoot: Config.NetBoot enables ipxe beside pxe and writes
// the provisioning network's settings.
func TestIronicConfNetBoot(t *testing.T) {
	c := Config{Dir: "/work/ironic", IPMI: true, NetBoot: &NetBoot{HTTPURL: "http://10.99.0.1:8088",
		KernelParams: "nofb console=ttyS0,115200", InspectionParams: "ipa-collect-lldp=1",
		Loaders: map[string]string{"undionly.kpxe": "/usr/lib/ipxe/undionly.kpxe", "ipxe.efi": "/usr/lib/ipxe/ipxe.efi"}}}
	c.defaults()
	conf := ironicConf(c, c.Dir)
	for _, want := range []string{
		"enabled_boot_interfaces = fake,pxe,ipxe\n",
		"http_url = http://10.99.0.1:8088\n",
		"kernel_append_params = nofb console=ttyS0,115200\n",
		"loader_file_paths = ipxe.efi:/usr/lib/ipxe/ipxe.efi,undionly.kpxe:/usr/lib/ipxe/undionly.kpxe\n",
		"extra_kernel_params = ipa-collect-lldp=1\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf with NetBoot lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "uefi_pxe_config_template") {
		t.Errorf("ironic.conf without UEFIConfigTemplate sets uefi_pxe_config_template:\n%s", conf)
	}
	if strings.Contains(conf, "by_arch") {
		t.Errorf("ironic.conf without per-architecture settings has some:\n%s", conf)
	}
	c.NetBoot.UEFIConfigTemplate = "/work/grub-pxe.template"
	c.NetBoot.ConfigTemplateByArch = map[string]string{"aarch64": "/work/grub-linux.template"}
	c.NetBoot.BootfileByArch = map[string]string{"aarch64": "grubaa64.efi"}
	conf = ironicConf(c, c.Dir)
	for _, want := range []string{"\nuefi_pxe_config_template = /work/grub-pxe.template\n",
		"\npxe_config_template_by_arch = aarch64:/work/grub-linux.template\n", "\npxe_bootfile_name_by_arch = aarch64:grubaa64.efi\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf lacks %q:\n%s", want, conf)
		}
	}
}

// TestIronicConfCallbackTimeout: Config.CallbackTimeout sets both callback
// timeouts; unset, they stay at 600 s.
func TestIronicConfCallbackTimeout(t *testing.T) {
	for _, tc := range []struct {
		set  time.Duration
		want string
	}{{0, "600"}, {75 * time.Second, "75"}} {
		c := Config{Dir: "/work/ironic", CallbackTimeout: tc.set}
		c.defaults()
		conf := ironicConf(c, c.Dir)
		for _, key := range []string{"clean_callback_timeout", "deploy_callback_timeout"} {
			if want := key + " = " + tc.want + "\n"; !strings.Contains(conf, want) {
				t.Errorf("CallbackTimeout %s: ironic.conf lacks %q", tc.set, want)
			}
		}
	}
}

// TestIronicConfRedfish: Config.Redfish enables the redfish hardware type
// beside ipmi, the ISOLINUX Ironic builds BIOS ISOs with, and the ISOs'
// kernel line.
func TestIronicConfRedfish(t *testing.T) {
	c := Config{Dir: "/work/ironic", IPMI: true, Redfish: true, NetBoot: &NetBoot{HTTPURL: "http://10.99.0.1:8088", KernelParams: "nofb console=ttyS0,115200"}}
	c.defaults()
	conf := ironicConf(c, c.Dir)
	for _, want := range []string{
		"enabled_hardware_types = fake-hardware,ipmi,redfish\n",
		"enabled_power_interfaces = fake,ipmitool,redfish\n",
		"enabled_management_interfaces = fake,noop,ipmitool,redfish\n",
		"enabled_boot_interfaces = fake,pxe,ipxe,redfish-virtual-media\n",
		"isolinux_bin = /usr/lib/ISOLINUX/isolinux.bin\n",
		"[redfish]\nuse_swift = false\nkernel_append_params = nofb console=ttyS0,115200\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf with Redfish lacks %q:\n%s", want, conf)
		}
	}
	c.IPMI, c.NetBoot = false, nil
	if conf := ironicConf(c, c.Dir); strings.Contains(conf, "default_power_interface") || !strings.Contains(conf, "[redfish]\nuse_swift = false\n\n") {
		t.Errorf("ironic.conf with Redfish alone keeps the fake defaults or lacks use_swift = false alone in [redfish]:\n%s", conf)
	}
}

// TestIronicConfHTTPBoot: NetBoot.HTTPBoot enables the http boot
// interface after the others and makes tftp_root the HTTP root; the files
// of the test's below Config.Dir are named as the services see them.
func TestIronicConfHTTPBoot(t *testing.T) {
	c := Config{Dir: "/work/ironic", IPMI: true, Redfish: true, Series: Series2026_1, NetBoot: &NetBoot{HTTPURL: "http://10.99.0.1:8088", HTTPBoot: true,
		Loaders:              map[string]string{"grubaa64.efi": "/work/ironic/etc/grubnetaa64.efi", "bootx64.efi": "/usr/lib/grub/x86_64-efi/monolithic/grubnetx64.efi"},
		ConfigTemplateByArch: map[string]string{"aarch64": "/work/ironic/etc/grub-linux.template"}}}
	c.defaults()
	conf := ironicConf(c, "/ironictest")
	for _, want := range []string{
		"enabled_boot_interfaces = fake,pxe,ipxe,redfish-virtual-media,http\n",
		"\nhttp_root = /ironictest/http/httpboot\n",
		"\ntftp_root = /ironictest/http/httpboot\n",
		"\ntftp_master_path = /ironictest/state/tftpboot/master_images\n",
		"\nloader_file_paths = bootx64.efi:/usr/lib/grub/x86_64-efi/monolithic/grubnetx64.efi,grubaa64.efi:/ironictest/etc/grubnetaa64.efi\n",
		"\npxe_config_template_by_arch = aarch64:/ironictest/etc/grub-linux.template\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf with HTTPBoot lacks %q:\n%s", want, conf)
		}
	}
	if _, err := Start(t.Context(), Config{Dir: t.TempDir(), Series: Series2023_1, NetBoot: &NetBoot{HTTPBoot: true}}); err == nil || !strings.Contains(err.Error(), "no http boot interface") {
		t.Errorf("Start of 2023.1 (Ironic 21.4) with HTTPBoot: %v, want a refusal", err)
	}
	c.NetBoot.HTTPBoot = false
	if conf := ironicConf(c, "/ironictest"); strings.Contains(conf, ",http\n") || !strings.Contains(conf, "\ntftp_root = /ironictest/state/tftpboot\n") {
		t.Errorf("ironic.conf without HTTPBoot enables http or serves tftp_root over HTTP:\n%s", conf)
	}
}

// TestIronicConfVirtualMediaUEFI: Config.VirtualMediaUEFI sets the ESP in
// [conductor] and where and how the ISO's GRUB configuration is written in
// [DEFAULT]; without it none of the three is set.
func TestIronicConfVirtualMediaUEFI(t *testing.T) {
	c := Config{Dir: "/work/ironic", Redfish: true, VirtualMediaUEFI: &VirtualMediaUEFI{Bootloader: "http://10.99.0.1:8088/images/esp",
		GrubConfigPath: "EFI/debian/grub.cfg", GrubConfigTemplate: "/work/grub.template"}}
	c.defaults()
	conf := ironicConf(c, c.Dir)
	for _, want := range []string{
		"\ngrub_config_path = EFI/debian/grub.cfg\ngrub_config_template = /work/grub.template\n\n[api]\n",
		"\nbootloader = http://10.99.0.1:8088/images/esp\n\n[agent]\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf lacks %q:\n%s", want, conf)
		}
	}
	c.VirtualMediaUEFI = nil
	for _, opt := range []string{"grub_config_path", "grub_config_template", "bootloader"} {
		if conf := ironicConf(c, c.Dir); strings.Contains(conf, "\n"+opt+" ") {
			t.Errorf("ironic.conf without VirtualMediaUEFI sets %s:\n%s", opt, conf)
		}
	}
}

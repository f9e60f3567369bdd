package ironic

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// confWriter returns a path maker below dir, a line writer and the buffer
// it writes to.
func confWriter(dir string) (path func(...string) string, line func(string, ...any), b *strings.Builder) {
	b = &strings.Builder{}
	path = func(parts ...string) string { return filepath.Join(append([]string{dir}, parts...)...) }
	line = func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	return path, line, b
}

// ironicConf is Ironic's config for the single `ironic` process. The why of
// each setting:
//   - auth_strategy noauth, rpc_transport none: no Keystone, no RabbitMQ; the
//     all-in-one process calls its conductor in-process. Split mode uses
//     json-rpc on loopback instead; host must then be a loopback address,
//     as the API calls the conductor at http://<host>:<json_rpc port>.
//   - fake-hardware with fake power/management/boot: no BMC, DHCP or TFTP.
//     (manual-management cannot load: it supports only pxe/ipxe boot.)
//     Config.IPMI adds the ipmi hardware type with ipmitool power and
//     management and pxe boot, for nodes behind a simulated BMC;
//     Config.NetBoot adds ipxe and the settings a provisioning network
//     needs (http_url, kernel parameters, boot loaders, inspection's
//     kernel parameters). Config.Redfish adds the redfish hardware type
//     with redfish power and management and the redfish-virtual-media
//     boot interface, which builds an ISO of the deploy kernel and
//     ramdisk and has the BMC insert it; with NetBoot.HTTPBoot also the
//     http boot interface (UEFI HTTP boot), tftp_root then being the
//     HTTP root.
//   - deploy direct: the agent deploy interface; inspect inspector: Ironic
//     drives ironic-inspector; raid agent: nodes accept RAID steps from the agent.
//   - ramdisk_heartbeat_timeout short: the agent heartbeats every 0.3-0.6 of
//     it, and each heartbeat is what moves the conductor on.
//   - [agent] short waits: Ironic polls install_bootloader every
//     command_wait_interval (for up to 5 min: a partition image's own
//     grub-install and grub-mkconfig take minutes in a VM under TCG), and
//     after standby.power_off waits for fake power (which never reports
//     off) only 2 x 1 s before forcing it.
//   - [deploy] erase priorities: what automated cleaning runs; the default
//     here keeps the full shred out of it.
//   - graceful_shutdown_timeout: a stopped ironic must not linger 60 s.
//   - [deploy] fast_track: off unless Config.FastTrack; on, Ironic reuses a
//     heartbeating agent instead of rebooting the node for each operation.
//
// Per series: 2023.1 turns [agent]require_tls off (it was off by default
// then); newer series keep Ironic's default (on since Ironic 26), so the
// agent must call back over auto-TLS. The agent inspect interface (built-in
// inspection) exists from Ironic 22.1; the inspector one is gone in 33, and
// with it the [inspector] client settings; 2026.1 instead enrolls unknown
// machines itself ([auto_discovery]). dir is the work directory as the
// services see it.
func ironicConf(c Config, dir string) string {
	p, w, b := confWriter(dir)
	w("# Written by ironictest for an end-to-end test.")
	w("[DEFAULT]")
	w("debug = true")
	w("use_stderr = false")
	w("host = 127.0.0.1")
	w("my_ip = %s", c.Host)
	w("auth_strategy = noauth")
	if c.Split {
		w("rpc_transport = json-rpc")
	} else {
		w("rpc_transport = none")
	}
	w("state_path = %s", p("state"))
	w("tempdir = %s", p("state", "tmp"))
	w("graceful_shutdown_timeout = 5")
	// ipmi supports only the pxe and ipxe boot interfaces; with
	// dhcp_provider none, pxe writes its files below tftp_root and nothing
	// serves them (the VM is handed the kernel directly). A default
	// interface must suit every enabled hardware type, so with ipmi each
	// type takes the first of its own that is enabled (fake for
	// fake-hardware, as before).
	hw, power, mgmt, boot := "fake-hardware", "fake", "fake,noop", "fake"
	defaultFake := w
	if c.IPMI {
		hw, power, mgmt, boot = hw+",ipmi", power+",ipmitool", mgmt+",ipmitool", boot+",pxe"
		defaultFake = func(string, ...any) {}
		if c.NetBoot != nil {
			boot += ",ipxe"
		}
	}
	if c.Redfish {
		hw, power, mgmt, boot = hw+",redfish", power+",redfish", mgmt+",redfish", boot+",redfish-virtual-media"
		if c.NetBoot != nil && c.NetBoot.HTTPBoot {
			// Last: a hardware type's default boot interface is the
			// first of its own enabled, which stays what it was.
			boot += ",http"
		}
		defaultFake = func(string, ...any) {}
		// The BIOS ISOs Ironic builds boot through ISOLINUX (Debian's
		// isolinux; ldlinux.c32 it finds in syslinux-common's directory).
		w("isolinux_bin = /usr/lib/ISOLINUX/isolinux.bin")
	}
	w("enabled_hardware_types = %s", hw)
	w("enabled_power_interfaces = %s", power)
	defaultFake("default_power_interface = fake")
	w("enabled_management_interfaces = %s", mgmt)
	defaultFake("default_management_interface = fake")
	// custom-agent: Metal3's deploy of in-band steps only (no image write).
	w("enabled_deploy_interfaces = direct,fake,custom-agent")
	w("default_deploy_interface = direct")
	w("enabled_boot_interfaces = %s", boot)
	defaultFake("default_boot_interface = fake")
	inspect := "no-inspect,fake"
	if c.Series.HasAgentInspection() {
		inspect += ",agent"
	}
	if c.Series.HasInspector() {
		inspect += ",inspector"
	}
	w("enabled_inspect_interfaces = %s", inspect)
	if c.Series.HasAgentInspection() {
		// Nodes Ironic discovers by itself take the default; nodes the
		// tests enroll name theirs.
		w("default_inspect_interface = agent")
	} else {
		w("default_inspect_interface = no-inspect")
	}
	w("enabled_network_interfaces = noop")
	w("default_network_interface = noop")
	w("enabled_raid_interfaces = no-raid,agent,fake")
	w("default_raid_interface = no-raid")
	w("enabled_rescue_interfaces = no-rescue,agent,fake")
	w("default_rescue_interface = no-rescue")
	w("enabled_bios_interfaces = no-bios,fake")
	w("enabled_console_interfaces = no-console,fake")
	w("enabled_storage_interfaces = noop,fake")
	w("enabled_vendor_interfaces = no-vendor,fake")
	w("default_resource_class = baremetal")
	w("force_raw_images = true")
	w("minimum_memory_warning_only = true")
	if v := c.VirtualMediaUEFI; v != nil {
		w("grub_config_path = %s", v.GrubConfigPath)
		if v.GrubConfigTemplate != "" {
			w("grub_config_template = %s", v.GrubConfigTemplate)
		}
	}
	w("")
	w("[api]")
	w("host_ip = %s", c.Host)
	w("port = %d", c.IronicPort)
	w("api_workers = 1")
	w("ramdisk_heartbeat_timeout = %d", int(c.HeartbeatTimeout.Seconds()))
	w("restrict_lookup = true")
	if c.TLS {
		// Read by the API of every series: oslo.service's wsgi server
		// (21.4, 29.0) through the [ssl] group, and cheroot (35.0)
		// through [api]cert_file/key_file, falling back to [ssl]; an
		// option a series does not know is ignored.
		w("enable_ssl_api = true")
		w("cert_file = %s", p("etc", "tls", tlsCert))
		w("key_file = %s", p("etc", "tls", tlsKey))
	}
	w("")
	if c.TLS {
		w("[ssl]")
		w("cert_file = %s", p("etc", "tls", tlsCert))
		w("key_file = %s", p("etc", "tls", tlsKey))
		w("")
	}
	w("[conductor]")
	w("automated_clean = true")
	w("clean_callback_timeout = %d", int(c.CallbackTimeout.Seconds()))
	w("deploy_callback_timeout = %d", int(c.CallbackTimeout.Seconds()))
	// Above the longest wait of a test for the end of an inspection (20
	// minutes: IPA's own ramdisk on the server-shaped machine boots
	// systemd, waits for its disks and collects for over ten minutes
	// under TCG on a loaded host), so the test's own wait, which logs
	// the console, is what ends a hung inspection.
	w("inspect_wait_timeout = 1500")
	w("check_provision_state_interval = 10")
	w("sync_power_state_interval = 60")
	w("heartbeat_interval = 5")
	w("api_url = %s", c.ironicURL())
	w("power_state_change_timeout = 5")
	w("node_locked_retry_attempts = 5")
	w("node_locked_retry_interval = 1")
	if v := c.VirtualMediaUEFI; v != nil {
		w("bootloader = %s", v.Bootloader)
	}
	w("")
	w("[agent]")
	w("image_download_source = http")
	w("command_timeout = 30")
	w("max_command_attempts = 3")
	w("command_wait_attempts = 150")
	w("command_wait_interval = 2")
	w("post_deploy_get_power_state_retries = 2")
	w("post_deploy_get_power_state_retry_interval = 1")
	w("deploy_logs_collect = on_failure")
	w("deploy_logs_storage_backend = local")
	w("deploy_logs_local_path = %s", p("state", "deploy_logs"))
	if !c.Series.RequiresTLS() {
		w("require_tls = false")
	}
	if c.TLS {
		// The CA the agent needs for the HTTPS API: Ironic puts it (and
		// an ironic-python-agent.d file naming it) on the virtual-media
		// ISOs it builds.
		w("api_ca_file = %s", p("etc", "tls", tlsCA))
	}
	// Ironic stores each agent's auto-TLS certificate here; the default is
	// below /var/lib/ironic.
	w("certificates_path = %s", p("state", "certificates"))
	w("")
	w("[deploy]")
	if c.NetBoot != nil {
		w("http_url = %s", c.NetBoot.HTTPURL)
	} else {
		w("http_url = http://127.0.0.1:8088/httpboot")
	}
	w("http_root = %s", p(httpRootDir))
	w("fast_track = %t", c.FastTrack)
	if !c.DefaultErasePriorities {
		w("erase_devices_priority = %d", c.EraseDevicesPriority)
		w("erase_devices_metadata_priority = %d", *c.EraseDevicesMetadataPriority)
	}
	w("power_off_after_deploy_failure = true")
	w("default_boot_mode = uefi")
	w("iso_master_path = %s", p("state", "master_iso_images"))
	w("")
	// The image caches default to /var/lib/ironic and /tftpboot; the
	// direct deploy interface creates them even when unused.
	w("[pxe]")
	w("images_path = %s", p("state", "images"))
	w("instance_master_path = %s", p("state", "master_images"))
	w("tftp_root = %s", p(c.tftpRootDir()))
	w("tftp_master_path = %s", p("state", "tftpboot", "master_images"))
	if nb := c.NetBoot; nb != nil {
		w("kernel_append_params = %s", nb.KernelParams)
		// inner is a file of the test's as the services see it.
		inner := func(host string) string {
			if rel, err := filepath.Rel(c.Dir, host); err == nil && c.Dir != "" && filepath.IsLocal(rel) {
				return p(rel)
			}
			return host
		}
		innerDict := func(d map[string]string) map[string]string {
			out := make(map[string]string, len(d))
			for k, v := range d {
				out[k] = inner(v)
			}
			return out
		}
		for _, o := range []struct {
			name string
			dict map[string]string
		}{{"loader_file_paths", innerDict(nb.Loaders)}, {"pxe_config_template_by_arch", innerDict(nb.ConfigTemplateByArch)}, {"pxe_bootfile_name_by_arch", nb.BootfileByArch}} {
			if len(o.dict) > 0 {
				w("%s = %s", o.name, confDict(o.dict))
			}
		}
		if nb.UEFIConfigTemplate != "" {
			w("uefi_pxe_config_template = %s", inner(nb.UEFIConfigTemplate))
		}
	}
	w("")
	w("[dhcp]")
	w("dhcp_provider = none")
	w("")
	if c.Redfish {
		w("[redfish]")
		// The ISOs redfish-virtual-media builds go to [deploy]http_root,
		// not to Swift (the default, which needs Keystone).
		w("use_swift = false")
		if c.NetBoot != nil {
			// Their kernel line: the operator's part, as [pxe]'s for
			// network boots.
			w("kernel_append_params = %s", c.NetBoot.KernelParams)
		}
		w("")
	}
	if c.IPMI {
		// The BMC is a local ipmi_sim that answers at once: the default
		// 5 s between two commands to it would outlast
		// power_state_change_timeout.
		w("[ipmi]")
		w("min_command_interval = 1")
		w("")
	}
	// Split mode: the API reaches the conductor at http://<host>:port.
	w("[json_rpc]")
	w("auth_strategy = noauth")
	w("host_ip = 127.0.0.1")
	w("port = %d", c.JSONRPCPort)
	w("")
	w("[database]")
	w("connection = sqlite:///%s", p("state", "ironic.sqlite"))
	w("")
	w("[oslo_concurrency]")
	w("lock_path = %s", p("state", "lock"))
	w("")
	w("[nova]")
	w("send_power_notifications = false")
	w("")
	w("[inspector]")
	if c.Series.HasInspector() {
		w("auth_type = none")
		w("endpoint_override = %s", c.url(c.InspectorPort))
		if c.InspectorCallbackURL != "" {
			w("callback_endpoint_override = %s", c.InspectorCallbackURL)
		} else {
			w("callback_endpoint_override = %s", c.url(c.InspectorPort))
		}
		w("status_check_period = 2")
	}
	w("power_off = true")
	w("require_managed_boot = false")
	if c.NetBoot != nil && c.NetBoot.InspectionParams != "" {
		w("extra_kernel_params = %s", c.NetBoot.InspectionParams)
	}
	if c.Series.HasAgentInspection() {
		// Built-in inspection: Ironic's default hooks plus the optional
		// ones that read what the agent sends (LLDP, memory, CPUs, disks,
		// PCI devices, boot mode), as Metal3 adds parse-lldp and
		// local-link-connection; a port for every NIC, as with inspector.
		w("hooks = $default_hooks,%s", strings.Join(c.Series.optionalHooks(), ","))
		w("add_ports = all")
		w("keep_ports = all")
	}
	w("")
	if c.Series.HasAgentInspection() {
		// Unknown machines posting to /v1/continue_inspection are enrolled
		// as fake-hardware, as ironic-inspector's enroll hook did.
		w("[auto_discovery]")
		w("enabled = true")
		w("driver = fake-hardware")
		w("")
	}
	w("[service_catalog]")
	w("auth_type = none")
	w("endpoint_override = %s", c.ironicURL())
	if c.TLS {
		w("cafile = %s", p("etc", "tls", tlsCA))
	}
	return b.String()
}

// inspectorConf is ironic-inspector's config: standalone (API and conductor
// in one process) with the fake:// transport (else oslo.messaging wants
// RabbitMQ), data stored in the database so the data API answers, unknown
// machines enrolled into Ironic as fake-hardware with a port per MAC, and
// the LLDP hook on top of the defaults.
func inspectorConf(c Config, dir string) string {
	p, w, b := confWriter(dir)
	w("# Written by ironictest for an end-to-end test.")
	w("[DEFAULT]")
	w("debug = true")
	w("log_file = %s", p("log", "inspector.log"))
	w("use_stderr = false")
	w("auth_strategy = noauth")
	w("standalone = true")
	w("transport_url = fake://")
	w("host = 127.0.0.1")
	w("listen_address = %s", c.Host)
	w("listen_port = %d", c.InspectorPort)
	w("timeout = 600")
	w("can_manage_boot = true")
	w("graceful_shutdown_timeout = 5")
	w("")
	w("[database]")
	w("connection = sqlite:///%s", p("state", "inspector.sqlite"))
	w("")
	w("[ironic]")
	w("auth_type = none")
	w("endpoint_override = %s", c.ironicURL())
	if c.TLS {
		w("cafile = %s", p("etc", "tls", tlsCA))
	}
	w("")
	w("[processing]")
	w("store_data = database")
	w("node_not_found_hook = enroll")
	w("add_ports = all")
	w("keep_ports = all")
	w("ramdisk_logs_dir = %s", p("state", "inspector_ramdisk_logs"))
	w("always_store_ramdisk_logs = true")
	// A power-off after introspection makes Ironic wipe the agent's token
	// and URL (a new boot would follow), so with fast track inspector
	// leaves the node on, as Metal3 configures it.
	w("power_off = %t", !c.FastTrack)
	w("processing_hooks = $default_processing_hooks,lldp_basic,extra_hardware")
	w("")
	w("[extra_hardware]")
	w("strict = true")
	w("")
	w("[discovery]")
	w("enroll_node_driver = fake-hardware")
	w("")
	w("[pxe_filter]")
	w("driver = noop")
	w("")
	w("[oslo_concurrency]")
	w("lock_path = %s", p("state", "lock"))
	return b.String()
}

// confDict is d as oslo.config writes a dict option: key:value pairs,
// comma-separated, in key order.
func confDict(d map[string]string) string {
	var l []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		l = append(l, k+":"+d[k])
	}
	return strings.Join(l, ",")
}

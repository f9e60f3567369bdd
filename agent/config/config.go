// Package config builds the agent's configuration from the three places
// Ironic Python Agent reads it: the kernel command line (ipa-* parameters),
// an INI config file with IPA's option names, and command-line flags.
//
// Precedence, lowest first: built-in defaults, then the kernel command line,
// then the config file(s), then flags. This is IPA's order (every ipa-*
// kernel parameter only supplies the default of the oslo.config option of the
// same meaning, so a config file wins over it), with flags on top as the
// most explicit source. A value that does not parse is a start-up error that
// names the parameter and where it came from.
package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/agent/agenttls"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/internal/sntp"
)

// Config is the agent's resolved configuration.
type Config struct {
	// APIURLs are the Ironic API endpoints (api_url, comma-separated).
	APIURLs []string
	// InspectionCallbackURL is where inspection data is posted; "" disables
	// inspection.
	InspectionCallbackURL string
	// InspectionCollectors are the inspection collectors to run.
	InspectionCollectors []string
	// InspectionDHCPWaitTimeout bounds the wait for the PXE NIC's IPv4
	// address before inspection; 0 disables the wait.
	InspectionDHCPWaitTimeout time.Duration
	// InspectionDHCPAllInterfaces waits for every NIC instead of the PXE NIC.
	InspectionDHCPAllInterfaces bool
	// CollectLLDP fills interfaces[].lldp in the inventory.
	CollectLLDP bool
	// LLDPTimeout bounds one LLDP listening round.
	LLDPTimeout time.Duration

	// TLS client options for every call the agent makes (Ironic, inspector,
	// image servers).
	Insecure bool
	CAFile   string
	CertFile string
	KeyFile  string
	// TLSPolicy is tls_min_version + tls_cipher_suites, for the API server
	// and every outgoing connection (a lookup may override it, as IPA 12+).
	TLSPolicy agenttls.Policy
	// TLSMinVersion and TLSCipherSuites are the options TLSPolicy is
	// made from, as given.
	TLSMinVersion, TLSCipherSuites string
	// TLSCertificateCurve is the automatic TLS key's curve (p256, p384,
	// p521).
	TLSCertificateCurve string

	Debug           bool
	GlobalRequestID string

	// ListenHost and ListenPort are the API bind address; "" means the
	// wildcard address ("::" when IPv6 works, else "0.0.0.0").
	ListenHost string
	ListenPort int
	// AdvertiseHost, AdvertisePort and AdvertiseProtocol make the callback
	// URL sent in heartbeats; "" host means "the source address of the route
	// to Ironic".
	AdvertiseHost     string
	AdvertisePort     int
	AdvertiseProtocol string
	IPLookupAttempts  int
	IPLookupSleep     time.Duration
	NetworkInterface  string

	// ListenTLS with TLSCertFile/TLSKeyFile serves the API with a static
	// certificate (config file only, as in IPA).
	ListenTLS   bool
	TLSCertFile string
	TLSKeyFile  string
	// EnableAutoTLS generates a self-signed certificate when Ironic's API is
	// new enough (>= 1.68).
	EnableAutoTLS           bool
	AutoTLSAllowedClockSkew time.Duration

	LookupTimeout               time.Duration
	LookupInterval              time.Duration
	HardwareInitializationDelay time.Duration
	DiskWaitAttempts            int
	DiskWaitDelay               time.Duration
	// AgentToken is a pre-shared token (virtual media boots).
	AgentToken string
	// AgentTokenOnGet is "auto" (GETs need the token once one GET
	// presented it: IPA 10.2, works with Ironic 21.4 and 35) or "required"
	// (every GET needs it: IPA 12+, Ironic >= 2025.1 only).
	AgentTokenOnGet string
	// AgentTokenRequired is IPA 10.2's agent_token_required: a lookup that
	// brings no token is logged as an error (Ironic decides; IPA did no more).
	AgentTokenRequired bool
	// NTPServer is one address or host name the agent sets the clock from
	// at start-up and before power_off/run_image; "" leaves the clock alone.
	NTPServer string
	// FailIfClockNotSet makes a failed clock sync fatal: the agent exits
	// at start-up, power_off and run_image fail (config file only, as IPA).
	FailIfClockNotSet bool

	ImageDownloadConnectionTimeout    time.Duration
	ImageDownloadConnectionRetries    int
	ImageDownloadConnectionRetryDelay time.Duration
	// ImageDownloadMaxDuration aborts one download attempt that takes
	// longer (0: no limit), with IPA's non-retried ImageDownloadTimeoutError.
	ImageDownloadMaxDuration time.Duration
	// UseMDNS is IPA's [mdns]use_mdns: find Ironic by mDNS when no
	// api_url is given (agent.ResolveMDNS). api_url or
	// inspection_callback_url "mdns" asks for it explicitly.
	UseMDNS bool
	// MDNSAllowedOverrides, MDNSLookupAttempts and MDNSInterfaces are
	// IPA's [mdns]allowed_overrides, lookup_attempts and interfaces.
	MDNSAllowedOverrides []string
	MDNSLookupAttempts   int
	MDNSInterfaces       []string

	// IronicAPIVersion skips version discovery when set ("1.68").
	IronicAPIVersion        string
	EnableVLANInterfaces    string
	IgnoreBootloaderFailure bool
	// EnableBIOSBootloaderInstall allows install_bootloader to run the
	// image's grub-install for partition images (IPA's CVE-2026-43003
	// mitigation defaults it off; a lookup config may switch it on).
	EnableBIOSBootloaderInstall bool
	// MD5Enabled, DisableDeepImageInspection and PermittedImageFormats are
	// IPA's image options (config file; Ironic's lookup config overrides
	// them).
	MD5Enabled                 bool
	DisableDeepImageInspection bool
	PermittedImageFormats      []string
	InjectFilesPriority        int
	GuardSpecialFilesystems    bool
	HTTPRequestTimeout         time.Duration

	// Standalone skips lookup and heartbeats (an agent driven directly
	// through its API).
	Standalone bool
	// AllowedDevices confines every disk the agent sees for steps and
	// root-disk choice, and every write or erase, to these /dev paths.
	AllowedDevices []string
	// StepsDir holds executable steps dropped in by an operator.
	StepsDir string
	// StateDir keeps per-node state of this boot (token, auto-TLS
	// certificate) so a restarted agent process can carry on.
	StateDir string
	// InventoryRoot is the directory the machine is read below ("/"; a
	// fixture tree in tests).
	InventoryRoot string

	// BootIF is the raw BOOTIF kernel parameter (PXE MAC).
	BootIF string
	// KernelParams is the whole parsed kernel command line, for parameters
	// read directly (ipa-inspection-benchmarks, boot_method).
	KernelParams map[string]string

	// Origins records, per option name, where its value came from.
	Origins map[string]string
}

// kind is how an option's text is parsed.
type kind int

const (
	kString kind = iota
	kBool
	kInt
	kSeconds
	kList
)

// option describes one configuration option: its oslo name (INI key and, with
// dashes, flag name), its kernel parameter (if any), the default, and where
// the parsed value goes.
type option struct {
	name string
	// ini is "section.key" for an option IPA keeps outside [DEFAULT]
	// ("mdns.use_mdns"); "" means [DEFAULT] name.
	ini string
	// kernel is the kernel command-line parameter, "" when the option can
	// only come from the config file or a flag.
	kernel string
	kind   kind
	def    string
	help   string
	// group is the heading the option is listed under in help texts.
	group group
	// meta names the value in help texts (URL, SECONDS); "" for booleans.
	meta  string
	set   func(c *Config, v any)
	check func(v any) error
}

// group is a heading of the help text; options are listed under their
// group in the order of this list.
type group string

const (
	gIronic     group = "Ironic"
	gInspection group = "Inspection"
	gNetwork    group = "Network and agent API"
	gTLS        group = "TLS"
	gDisks      group = "Disks"
	gImages     group = "Images and bootloader"
	gLogging    group = "Logging"
	gAgent      group = "Agent"
	// gTesting options point the agent at test fixtures; they work but
	// are left out of help texts.
	gTesting group = ""
)

// Groups lists the help-text headings in the order they are printed.
func Groups() []string {
	return []string{string(gIronic), string(gInspection), string(gNetwork), string(gTLS), string(gDisks),
		string(gImages), string(gLogging), string(gAgent)}
}

func options() []option {
	return []option{
		{name: "api_url", group: gIronic, meta: "URL[,URL...]", kernel: "ipa-api-url", kind: kList, help: "Ironic API URL(s), comma-separated, or mdns to find it by mDNS",
			set: func(c *Config, v any) { c.APIURLs = v.([]string) }, check: checkURLs},
		{name: "inspection_callback_url", group: gInspection, meta: "URL", kernel: "ipa-inspection-callback-url", kind: kString, help: "ironic-inspector /v1/continue URL, or mdns to find ironic-inspector by mDNS; enables inspection",
			set: func(c *Config, v any) { c.InspectionCallbackURL = v.(string) }, check: checkOptionalURL},
		{name: "inspection_collectors", group: gInspection, meta: "NAME[,NAME...]", kernel: "ipa-inspection-collectors", kind: kList, def: "default,logs", help: "inspection collectors",
			set: func(c *Config, v any) { c.InspectionCollectors = v.([]string) }},
		{name: "inspection_dhcp_wait_timeout", group: gInspection, meta: "SECONDS", kernel: "ipa-inspection-dhcp-wait-timeout", kind: kSeconds, def: "60", help: "seconds to wait for DHCP before inspection (0: no wait)",
			set: func(c *Config, v any) { c.InspectionDHCPWaitTimeout = v.(time.Duration) }},
		{name: "inspection_dhcp_all_interfaces", group: gInspection, kernel: "ipa-inspection-dhcp-all-interfaces", kind: kBool, def: "false", help: "wait for DHCP on every interface",
			set: func(c *Config, v any) { c.InspectionDHCPAllInterfaces = v.(bool) }},
		{name: "collect_lldp", group: gInspection, kernel: "ipa-collect-lldp", kind: kBool, def: "false", help: "collect LLDP on every interface for the inventory",
			set: func(c *Config, v any) { c.CollectLLDP = v.(bool) }},
		{name: "lldp_timeout", group: gInspection, meta: "SECONDS", kernel: "ipa-lldp-timeout", kind: kSeconds, def: "30", help: "seconds to listen for LLDP",
			set: func(c *Config, v any) { c.LLDPTimeout = v.(time.Duration) }},
		{name: "insecure", group: gTLS, kernel: "ipa-insecure", kind: kBool, def: "false", help: "do not verify TLS certificates of Ironic, inspector and image servers",
			set: func(c *Config, v any) { c.Insecure = v.(bool) }},
		{name: "cafile", group: gTLS, meta: "PATH", kind: kString, help: "CA bundle for TLS verification",
			set: func(c *Config, v any) { c.CAFile = v.(string) }},
		{name: "certfile", group: gTLS, meta: "PATH", kind: kString, help: "client certificate (PEM) for TLS",
			set: func(c *Config, v any) { c.CertFile = v.(string) }},
		{name: "keyfile", group: gTLS, meta: "PATH", kind: kString, help: "client key (PEM) for TLS",
			set: func(c *Config, v any) { c.KeyFile = v.(string) }},
		{name: "tls_min_version", group: gTLS, meta: "1.2|1.3", kernel: "ipa-tls-min-version", kind: kString, def: "1.2", help: "lowest TLS version of the API server and outgoing connections (1.3: 1.3 only)",
			set: func(c *Config, v any) { c.TLSMinVersion = v.(string) }, check: checkOneOf("1.2", "1.3")},
		{name: "tls_cipher_suites", group: gTLS, meta: "SUITE[:SUITE...]", kernel: "ipa-tls-cipher-suites", kind: kString, help: "TLS 1.2 cipher suites, OpenSSL names colon-separated; empty: ECDHE with AES-GCM",
			set: func(c *Config, v any) { c.TLSCipherSuites = v.(string) }, check: checkCipherSuites},
		{name: "tls_certificate_curve", group: gTLS, meta: "p256|p384|p521", kernel: "ipa-tls-certificate-curve", kind: kString, def: "p384", help: "curve of the automatic TLS certificate's key",
			set: func(c *Config, v any) { c.TLSCertificateCurve = v.(string) }, check: checkOneOf("p256", "p384", "p521")},
		{name: "debug", group: gLogging, kernel: "ipa-debug", kind: kBool, def: "false", help: "debug logging",
			set: func(c *Config, v any) { c.Debug = v.(bool) }},
		{name: "global_request_id", group: gIronic, meta: "ID", kernel: "ipa-global-request-id", kind: kString, help: "sent as X-OpenStack-Request-ID",
			set: func(c *Config, v any) { c.GlobalRequestID = v.(string) }},
		{name: "listen_host", group: gNetwork, meta: "ADDRESS", kernel: "ipa-listen-host", kind: kString, help: "API bind address; empty: the wildcard address",
			set: func(c *Config, v any) { c.ListenHost = v.(string) }},
		{name: "listen_port", group: gNetwork, meta: "PORT", kernel: "ipa-listen-port", kind: kInt, def: "9999", help: "API port",
			set: func(c *Config, v any) { c.ListenPort = v.(int) }, check: checkPort},
		{name: "advertise_host", group: gNetwork, meta: "ADDRESS", kernel: "ipa-advertise-host", kind: kString, help: "address Ironic calls back; empty: the source address of the route to Ironic",
			set: func(c *Config, v any) { c.AdvertiseHost = v.(string) }},
		{name: "advertise_port", group: gNetwork, meta: "PORT", kernel: "ipa-advertise-port", kind: kInt, def: "9999", help: "port Ironic calls back",
			set: func(c *Config, v any) { c.AdvertisePort = v.(int) }, check: checkPort},
		{name: "advertise_protocol", group: gNetwork, meta: "http|https", kernel: "ipa-advertise-protocol", kind: kString, def: "http", help: "scheme of the callback URL sent to Ironic",
			set: func(c *Config, v any) { c.AdvertiseProtocol = v.(string) }, check: checkOneOf("http", "https")},
		{name: "ip_lookup_attempts", group: gNetwork, meta: "N", kernel: "ipa-ip-lookup-attempts", kind: kInt, def: "6", help: "attempts to find the advertised address",
			set: func(c *Config, v any) { c.IPLookupAttempts = v.(int) }, check: checkPositive},
		{name: "ip_lookup_sleep", group: gNetwork, meta: "SECONDS", kernel: "ipa-ip-lookup-timeout", kind: kSeconds, def: "10", help: "seconds between those attempts",
			set: func(c *Config, v any) { c.IPLookupSleep = v.(time.Duration) }},
		{name: "network_interface", group: gNetwork, meta: "INTERFACE", kernel: "ipa-network-interface", kind: kString, help: "legacy: advertise this interface's IPv4 address",
			set: func(c *Config, v any) { c.NetworkInterface = v.(string) }},
		{name: "listen_tls", group: gTLS, kind: kBool, def: "false", help: "serve the API over TLS with tls_cert_file/tls_key_file",
			set: func(c *Config, v any) { c.ListenTLS = v.(bool) }},
		{name: "tls_cert_file", group: gTLS, meta: "PATH", kind: kString, help: "API server certificate",
			set: func(c *Config, v any) { c.TLSCertFile = v.(string) }},
		{name: "tls_key_file", group: gTLS, meta: "PATH", kind: kString, help: "API server key",
			set: func(c *Config, v any) { c.TLSKeyFile = v.(string) }},
		{name: "enable_auto_tls", group: gTLS, kind: kBool, def: "true", help: "self-signed API certificate when Ironic supports it",
			set: func(c *Config, v any) { c.EnableAutoTLS = v.(bool) }},
		{name: "auto_tls_allowed_clock_skew", group: gTLS, meta: "SECONDS", kind: kSeconds, def: "3600", help: "seconds the certificate is valid before now",
			set: func(c *Config, v any) { c.AutoTLSAllowedClockSkew = v.(time.Duration) }},
		// 300 s is the 2023.1 default, the IPA line paired with Ironic 21.4.
		{name: "lookup_timeout", group: gIronic, meta: "SECONDS", kernel: "ipa-lookup-timeout", kind: kSeconds, def: "300", help: "seconds to keep retrying lookup",
			set: func(c *Config, v any) { c.LookupTimeout = v.(time.Duration) }},
		{name: "lookup_interval", group: gIronic, meta: "SECONDS", kernel: "ipa-lookup-interval", kind: kSeconds, def: "1", help: "minimum seconds between lookups",
			set: func(c *Config, v any) { c.LookupInterval = v.(time.Duration) }},
		{name: "hardware_initialization_delay", group: gAgent, meta: "SECONDS", kernel: "ipa-hardware-initialization-delay", kind: kSeconds, def: "0", help: "seconds to sleep before anything",
			set: func(c *Config, v any) { c.HardwareInitializationDelay = v.(time.Duration) }},
		{name: "disk_wait_attempts", group: gDisks, meta: "N", kernel: "ipa-disk-wait-attempts", kind: kInt, def: "10", help: "attempts to find a root disk candidate",
			set: func(c *Config, v any) { c.DiskWaitAttempts = v.(int) }},
		{name: "disk_wait_delay", group: gDisks, meta: "SECONDS", kernel: "ipa-disk-wait-delay", kind: kSeconds, def: "3", help: "seconds between those attempts",
			set: func(c *Config, v any) { c.DiskWaitDelay = v.(time.Duration) }},
		{name: "agent_token", group: gIronic, meta: "TOKEN", kernel: "ipa-agent-token", kind: kString, help: "pre-shared agent token",
			set: func(c *Config, v any) { c.AgentToken = v.(string) }},
		{name: "agent_token_on_get", group: gIronic, meta: "auto|required", kernel: "ipa-agent-token-on-get", kind: kString, def: "auto", help: "GET /v1/commands needs the token: auto (once a GET presented it; Ironic 21.4 polls without) or required (always, as IPA 12+)",
			set: func(c *Config, v any) { c.AgentTokenOnGet = v.(string) }, check: checkOneOf("auto", "required")},
		// IPA 10.2's option (gone in IPA 11, which always requires the
		// token on POST, as this agent does).
		{name: "agent_token_required", group: gIronic, kernel: "ipa-agent-token-required", kind: kBool, def: "false", help: "log an error when a lookup brings no agent token (IPA 10.2)",
			set: func(c *Config, v any) { c.AgentTokenRequired = v.(bool) }},
		{name: "ntp_server", group: gNetwork, meta: "ADDRESS", kernel: "ipa-ntp-server", kind: kString, help: "NTP server to set the clock from (an IP address or host name)",
			set: func(c *Config, v any) { c.NTPServer = v.(string) }, check: checkNTPServer},
		{name: "fail_if_clock_not_set", group: gNetwork, kind: kBool, def: "false", help: "a failed clock sync stops the agent and fails power_off/run_image",
			set: func(c *Config, v any) { c.FailIfClockNotSet = v.(bool) }},
		{name: "image_download_connection_timeout", group: gImages, meta: "SECONDS", kernel: "ipa-image-download-connection-timeout", kind: kSeconds, def: "60", help: "per-connection timeout of image downloads",
			set: func(c *Config, v any) { c.ImageDownloadConnectionTimeout = v.(time.Duration) }},
		{name: "image_download_connection_retries", group: gImages, meta: "N", kernel: "ipa-image-download-connection-retries", kind: kInt, def: "9", help: "image download retries",
			set: func(c *Config, v any) { c.ImageDownloadConnectionRetries = v.(int) }},
		{name: "image_download_connection_retry_interval", group: gImages, meta: "SECONDS", kernel: "ipa-image-download-connection-retry-interval", kind: kSeconds, def: "10", help: "seconds between image download retries",
			set: func(c *Config, v any) { c.ImageDownloadConnectionRetryDelay = v.(time.Duration) }},
		{name: "image_download_max_duration", group: gImages, meta: "SECONDS", kernel: "ipa-image-download-max-duration", kind: kInt, def: "0", help: "abort an image download attempt taking longer (0: no limit)",
			set: func(c *Config, v any) { c.ImageDownloadMaxDuration = time.Duration(v.(int)) * time.Second }, check: checkNonNegative},
		{name: "use_mdns", ini: "mdns.use_mdns", group: gIronic, kernel: "ipa-use-mdns", kind: kBool, def: "false",
			help: "without api_url, find Ironic's API by mDNS (the service baremetal its conductor publishes with [conductor]enable_mdns); mDNS answers are not authenticated: only on a trusted network",
			set:  func(c *Config, v any) { c.UseMDNS = v.(bool) }},
		{name: "mdns_allowed_overrides", ini: "mdns.allowed_overrides", group: gIronic, meta: "OPTION[,OPTION...]", kind: kList, def: "inspection_callback_url,ntp_server",
			help: "options an mDNS answer's ipa_* parameters may set (without the ipa_ prefix; empty: none)",
			set:  func(c *Config, v any) { c.MDNSAllowedOverrides = v.([]string) }},
		{name: "mdns_lookup_attempts", ini: "mdns.lookup_attempts", group: gIronic, meta: "N", kind: kInt, def: "3", help: "mDNS queries before giving up",
			set: func(c *Config, v any) { c.MDNSLookupAttempts = v.(int) }, check: checkPositive},
		{name: "mdns_interfaces", ini: "mdns.interfaces", group: gIronic, meta: "ADDRESS[,ADDRESS...]", kind: kList,
			help: "IP addresses of the interfaces to query mDNS on (empty: every interface that is up)",
			set:  func(c *Config, v any) { c.MDNSInterfaces = v.([]string) }},
		{name: "ironic_api_version", group: gIronic, meta: "X.Y", kernel: "ipa-ironic-api-version", kind: kString, help: "Ironic API version to use instead of discovering it",
			set: func(c *Config, v any) { c.IronicAPIVersion = v.(string) }, check: checkOptionalVersion},
		{name: "enable_vlan_interfaces", group: gNetwork, meta: "IFACE.VLAN|MAC.VLAN|IFACE|all[,...]", kernel: "ipa-enable-vlan-interfaces", kind: kString, help: "VLAN interfaces the ramdisk's init creates and runs DHCP on (IFACE, all: VLANs from LLDP, with ipa-collect-lldp)",
			set: func(c *Config, v any) { c.EnableVLANInterfaces = v.(string) }},
		{name: "ignore_bootloader_failure", group: gImages, kernel: "ipa-ignore-bootloader-failure", kind: kBool, def: "false", help: "do not fail install_bootloader",
			set: func(c *Config, v any) { c.IgnoreBootloaderFailure = v.(bool) }},
		// IPA has no kernel parameter for it: config file, flag, or Ironic's
		// lookup config.
		{name: "enable_bios_bootloader_install", group: gImages, kind: kBool, def: "false", help: "let install_bootloader run the image's grub-install for partition images",
			set: func(c *Config, v any) { c.EnableBIOSBootloaderInstall = v.(bool) }},
		// IPA has no kernel parameters for these three either.
		{name: "md5_enabled", group: gImages, kind: kBool, def: "true", help: "accept MD5 image checksums (Ironic's agent_md5_checksum_enable overrides it)",
			set: func(c *Config, v any) { c.MD5Enabled = v.(bool) }},
		{name: "disable_deep_image_inspection", group: gImages, kind: kBool, def: "false", help: "trust the image format Ironic names instead of checking the image (Ironic's lookup config overrides it)",
			set: func(c *Config, v any) { c.DisableDeepImageInspection = v.(bool) }},
		{name: "permitted_image_formats", group: gImages, meta: "FORMAT[,FORMAT...]", kind: kList, def: "raw,gpt,qcow2", help: "image formats write_image accepts (Ironic's lookup config overrides it)",
			set: func(c *Config, v any) { c.PermittedImageFormats = v.([]string) }},
		{name: "inject_files_priority", group: gImages, meta: "N", kernel: "ipa-inject-files-priority", kind: kInt, def: "0", help: "priority of the inject_files deploy step",
			set: func(c *Config, v any) { c.InjectFilesPriority = v.(int) }},
		{name: "guard_special_filesystems", group: gDisks, kernel: "ipa-guard-special-filesystems", kind: kBool, def: "true", help: "refuse to wipe shared-cluster filesystems",
			set: func(c *Config, v any) { c.GuardSpecialFilesystems = v.(bool) }},
		{name: "http_request_timeout", group: gIronic, meta: "SECONDS", kernel: "ipa-http-request-timeout", kind: kSeconds, def: "30", help: "seconds per call to Ironic and inspector",
			set: func(c *Config, v any) { c.HTTPRequestTimeout = v.(time.Duration) }},
		// IPA's entry point has no standalone kernel parameter; we accept
		// one so a ramdisk can be driven without Ironic.
		{name: "standalone", group: gAgent, kernel: "ipa-standalone", kind: kBool, def: "false", help: "skip lookup and heartbeats",
			set: func(c *Config, v any) { c.Standalone = v.(bool) }},
		{name: "allowed_devices", group: gDisks, meta: "DEVICES", kernel: "ipa-allowed-devices", kind: kList, help: "confine disk steps to these /dev paths, comma-separated",
			set: func(c *Config, v any) { c.AllowedDevices = v.([]string) }, check: checkDevPaths},
		{name: "steps_dir", group: gAgent, meta: "DIR", kernel: "ipa-steps-dir", kind: kString, def: "/etc/ironic-agent/steps.d", help: "directory of executable steps",
			set: func(c *Config, v any) { c.StepsDir = v.(string) }},
		{name: "state_dir", group: gAgent, meta: "DIR", kind: kString, def: "/run/ironic-agent", help: "where this boot's token and TLS certificate are kept for a restart (tmpfs)",
			set: func(c *Config, v any) { c.StateDir = v.(string) }},
		{name: "inventory_root", group: gTesting, meta: "DIR", kind: kString, def: "/", help: "read the machine below this directory (test fixtures)",
			set: func(c *Config, v any) { c.InventoryRoot = v.(string) }},
	}
}

// Source is where one raw option value came from.
type Source struct {
	// Kind is "kernel command line", "config file" or "flag".
	Kind string
	// Where names the exact place: "ipa-api-url", "/etc/x.conf:12", "--api-url".
	Where string
}

func (s Source) String() string { return s.Kind + " (" + s.Where + ")" }

// Inputs are the raw sources Load resolves.
type Inputs struct {
	// Cmdline is the kernel command line text (/proc/cmdline).
	Cmdline string
	// ConfigFiles are read in order; later files win. A missing file named
	// here is an error.
	ConfigFiles []string
	// ConfigDirs: every *.conf file inside, sorted, read after ConfigFiles.
	ConfigDirs []string
	// Flags maps option name to the raw text given with --option-name, in
	// the form FlagSet records them.
	Flags map[string]string
	// ReadFile reads a config file; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
	// ReadDir lists a config directory; nil means os.ReadDir names.
	ReadDir func(string) ([]string, error)
}

type raw struct {
	value string
	src   Source
}

// Load resolves the configuration: defaults < kernel command line < config
// files < flags.
func Load(in Inputs) (*Config, error) {
	readFile := in.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	readDir := in.ReadDir
	if readDir == nil {
		readDir = func(d string) ([]string, error) {
			ents, err := os.ReadDir(d)
			if err != nil {
				return nil, err
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return names, nil
		}
	}
	opts := options()
	known := map[string]bool{}
	byKernel := map[string]string{}
	// iniNames maps "section.key" to the option IPA keeps there; such an
	// option is not read from [DEFAULT] (sectioned), as in IPA.
	iniNames := map[string]string{}
	sectioned := map[string]bool{}
	for _, o := range opts {
		known[o.name] = true
		if o.kernel != "" {
			byKernel[o.kernel] = o.name
		}
		if o.ini != "" {
			iniNames[o.ini] = o.name
			sectioned[o.name] = true
		}
	}
	values := map[string]raw{}

	kp := ParseCmdline(in.Cmdline)
	for k, v := range kp {
		if name, ok := byKernel[k]; ok {
			values[name] = raw{v, Source{"kernel command line", k}}
		}
	}

	files := slices.Clone(in.ConfigFiles)
	for _, d := range in.ConfigDirs {
		names, err := readDir(d)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("config directory %s: %w", d, err)
		}
		sort.Strings(names)
		for _, n := range names {
			if strings.HasSuffix(n, ".conf") {
				files = append(files, filepath.Join(d, n))
			}
		}
	}
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("config file %s: %w", f, err)
		}
		secs, err := parseINI(data)
		if err != nil {
			return nil, fmt.Errorf("config file %s: %w", f, err)
		}
		for sec, kv := range secs {
			for k, v := range kv {
				name := k
				if sec != "DEFAULT" {
					name = iniNames[sec+"."+k]
				} else if sectioned[k] {
					name = ""
				}
				if !known[name] {
					// oslo.config ignores options it does not know; so do
					// we, so an IPA config file with extra options still works.
					continue
				}
				values[name] = raw{v.value, Source{"config file", fmt.Sprintf("%s:%d [%s] %s", f, v.line, sec, k)}}
			}
		}
	}
	for k, v := range in.Flags {
		if !known[k] {
			return nil, fmt.Errorf("flag --%s: unknown option", strings.ReplaceAll(k, "_", "-"))
		}
		values[k] = raw{v, Source{"flag", "--" + strings.ReplaceAll(k, "_", "-")}}
	}

	c := &Config{KernelParams: kp, BootIF: kp["BOOTIF"], Origins: map[string]string{}}
	for _, o := range opts {
		r, ok := values[o.name]
		if !ok {
			r = raw{o.def, Source{"default", o.name}}
		}
		v, err := parseValue(o.kind, r.value)
		if err == nil && o.check != nil {
			err = o.check(v)
		}
		if err != nil {
			return nil, fmt.Errorf("bad value %q for %s from %s: %w", r.value, o.name, r.src, err)
		}
		o.set(c, v)
		c.Origins[o.name] = r.src.String()
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, fmt.Errorf("certfile and keyfile must be given together (certfile from %s, keyfile from %s)",
			c.Origins["certfile"], c.Origins["keyfile"])
	}
	if c.ListenTLS && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return nil, fmt.Errorf("listen_tls needs tls_cert_file and tls_key_file (listen_tls from %s)", c.Origins["listen_tls"])
	}
	pol, err := agenttls.ParsePolicy(c.TLSMinVersion, c.TLSCipherSuites)
	if err != nil {
		return nil, fmt.Errorf("%w (tls_min_version from %s, tls_cipher_suites from %s)", err, c.Origins["tls_min_version"], c.Origins["tls_cipher_suites"])
	}
	c.TLSPolicy = pol
	if !c.Standalone && len(c.APIURLs) == 0 && !c.UseMDNS {
		if c.InspectionCallbackURL == "" {
			return nil, errors.New("no Ironic API URL: set ipa-api-url on the kernel command line (or ipa-api-url=mdns, or ipa-use-mdns=1, to find it by mDNS), api_url in the config file or --api-url (or use --standalone)")
		}
		// Ironic 21.4 boots managed inspection (without fast track) with only
		// ipa-inspection-callback-url. IPA then inspects, skips lookup and
		// heartbeats, and serves its API: exactly our standalone mode.
		c.Standalone = true
		c.Origins["standalone"] = "implied: inspection_callback_url without api_url"
	}
	return c, nil
}

func parseValue(k kind, s string) (any, error) {
	switch k {
	case kString:
		return s, nil
	case kBool:
		return pyconv.ParseBool(s)
	case kInt:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, errors.New("not an integer")
		}
		return n, nil
	case kSeconds:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, errors.New("not a number of seconds")
		}
		if f < 0 || f > 1e9 || math.IsNaN(f) {
			return nil, errors.New("seconds must be between 0 and 1e9")
		}
		return time.Duration(f * float64(time.Second)), nil
	case kList:
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown option kind %d", k)
}

func checkURLs(v any) error {
	urls := v.([]string)
	for _, u := range urls {
		if u == "mdns" {
			// IPA's special value: the URL comes from mDNS
			// (agent.ResolveMDNS).
			if len(urls) > 1 {
				return errors.New(`"mdns" stands alone: it is not a URL to list with others`)
			}
			continue
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%q is not an http(s):// URL", u)
		}
	}
	return nil
}

func checkOptionalURL(v any) error {
	s := v.(string)
	if s == "" {
		return nil
	}
	return checkURLs([]string{s})
}

// checkNTPServer refuses at load what IPA's sync_clock refuses when it
// runs (and, at start-up, dies of): anything but one address or host name.
func checkNTPServer(v any) error {
	if v.(string) == "" {
		return nil
	}
	_, err := sntp.ParseServer(v.(string))
	return err
}

func checkPort(v any) error {
	if n := v.(int); n < 1 || n > 65535 {
		return errors.New("port must be 1..65535")
	}
	return nil
}

func checkNonNegative(v any) error {
	if v.(int) < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

func checkCipherSuites(v any) error {
	_, err := agenttls.ParsePolicy("1.2", v.(string))
	return err
}

func checkPositive(v any) error {
	if v.(int) < 1 {
		return errors.New("must be at least 1")
	}
	return nil
}

func checkOneOf(allowed ...string) func(any) error {
	return func(v any) error {
		if !slices.Contains(allowed, v.(string)) {
			return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
		}
		return nil
	}
}

func checkOptionalVersion(v any) error {
	s := v.(string)
	if s == "" {
		return nil
	}
	var a, b int
	if n, err := fmt.Sscanf(s, "%d.%d", &a, &b); err != nil || n != 2 || fmt.Sprintf("%d.%d", a, b) != s {
		return errors.New("want MAJOR.MINOR, e.g. 1.68")
	}
	return nil
}

func checkDevPaths(v any) error {
	for _, d := range v.([]string) {
		if !strings.HasPrefix(d, "/dev/") || filepath.Clean(d) != d || len(d) <= len("/dev/") {
			return fmt.Errorf("%q is not a /dev path", d)
		}
	}
	return nil
}

// Option describes one option for help texts and flag registration.
type Option struct {
	Name   string // option name, e.g. api_url (the INI key in [DEFAULT])
	INI    string // where a config file holds it: "[DEFAULT] api_url", "[mdns] use_mdns"
	Flag   string // flag name, e.g. api-url
	Kernel string // kernel parameter or ""
	Bool   bool
	Help   string
	// Default is the built-in default as text.
	Default string
	// Group is the help-text heading (one of Groups); "" for options that
	// only tests use, which help texts leave out.
	Group string
	// Placeholder names the value in help texts ("URL", "SECONDS"); ""
	// for booleans.
	Placeholder string
}

// Options lists every option in a stable order.
func Options() []Option {
	var out []Option
	for _, o := range options() {
		ini := "[DEFAULT] " + o.name
		if sec, key, ok := strings.Cut(o.ini, "."); ok {
			ini = "[" + sec + "] " + key
		}
		out = append(out, Option{Name: o.name, INI: ini, Flag: strings.ReplaceAll(o.name, "_", "-"), Kernel: o.kernel,
			Bool: o.kind == kBool, Help: o.help, Default: o.def, Group: string(o.group), Placeholder: o.meta})
	}
	return out
}

// Override sets option name to value as IPA's config.override does for
// an mDNS answer's parameters: parsed and checked as from any other
// source, its origin recorded as source.
func (c *Config) Override(name, value, source string) error {
	for _, o := range options() {
		if o.name != name {
			continue
		}
		v, err := parseValue(o.kind, value)
		if err == nil && o.check != nil {
			err = o.check(v)
		}
		if err != nil {
			return fmt.Errorf("bad value %q for %s from %s: %w", value, name, source, err)
		}
		o.set(c, v)
		c.Origins[name] = source
		return nil
	}
	return fmt.Errorf("%s (from %s): unknown option", name, source)
}

package ironic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says where and how the services run. Zero values take the
// defaults named on each field.
type Config struct {
	// Dir receives etc/, log/ and state/; it must exist and belong to the
	// caller (a test's temp dir).
	Dir string
	// IronicPort is Ironic's API port (6385).
	IronicPort int
	// InspectorPort is ironic-inspector's API port (5050).
	InspectorPort int
	// HeartbeatTimeout is [api] ramdisk_heartbeat_timeout, handed to the agent
	// at lookup; the agent heartbeats every 0.3-0.6 of it (10 s).
	HeartbeatTimeout time.Duration
	// CallbackTimeout is [conductor] clean_callback_timeout and
	// deploy_callback_timeout: how long Ironic waits in clean wait or
	// deploy wait for the next heartbeat before it fails the operation
	// (a node whose power was cut stops heartbeating). Default 600 s.
	CallbackTimeout time.Duration
	// EraseDevicesPriority and EraseDevicesMetadataPriority are the
	// priorities of the agent's erase steps in automated cleaning; 0 disables
	// a step. Defaults: 0 (no full shred in automated cleaning) and 99.
	EraseDevicesPriority         int
	EraseDevicesMetadataPriority *int
	// DefaultErasePriorities leaves both unset, as a deployment that
	// does not configure them: Ironic then takes the agent's own
	// priorities (erase_devices 10, erase_devices_metadata 99).
	DefaultErasePriorities bool
	// NoInspector leaves ironic-inspector stopped.
	NoInspector bool
	// Split runs ironic-api and ironic-conductor as two processes over
	// JSON-RPC on 127.0.0.1:JSONRPCPort instead of the single ironic
	// process, so the API can be stopped while the conductor goes on.
	Split       bool
	JSONRPCPort int
	// Netns, when set, runs the services inside that network namespace
	// (a name under /run/netns, made by the test), listening on Host,
	// and this process reaches them with Dial. Empty: the host's own
	// namespace on 127.0.0.1.
	Netns string
	// Host is the address the services listen on and give each other
	// (127.0.0.1); an IPv6 address is written bare ("fd00::1").
	Host string
	// Dial connects this process to a service (for the readiness probes
	// and the clients of HTTPClient); nil dials from this namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// IPMI also enables Ironic's ipmi hardware type (ipmitool power and
	// management, pxe boot) for nodes behind a real IPMI LAN endpoint, such
	// as bmcsim's ipmi_sim.
	IPMI bool
	// NetBoot, with IPMI, also enables the ipxe boot interface and
	// configures what Ironic writes for network boots on a provisioning
	// network the test serves (DHCP, TFTP and HTTP are the test's).
	NetBoot *NetBoot
	// Redfish also enables Ironic's redfish hardware type (redfish power
	// and management, the redfish-virtual-media boot interface) for nodes
	// behind a Redfish BMC such as bmcsim's RedfishBMC; with NetBoot, the
	// ISOs' kernel line takes NetBoot.KernelParams and they are published
	// below NetBoot.HTTPURL.
	Redfish bool
	// InspectorCallbackURL is ironic-inspector's address as the machines
	// reach it, which Ironic writes into the ramdisk's parameters when it
	// boots an inspection itself (a pxe boot interface); Ironic refuses a
	// loopback one. Default http://127.0.0.1:InspectorPort, for tests
	// where the inspector manages the boot.
	InspectorCallbackURL string
	// Series is the Ironic release to run (2023.1: the host's packages).
	Series Series
	// RootFS is the root filesystem (EnsureRootFS) a series other than
	// 2023.1 runs from, chrooted in a private mount namespace.
	RootFS string
	// TLS serves Ironic's API over HTTPS ([api]enable_ssl_api) with a
	// CA made for this run and a certificate for Host, written to
	// Dir/etc/tls (Services.TLS names them); the clients of Client and
	// HTTPClient trust that CA. ironic-inspector stays on http and trusts
	// the CA toward Ironic; [agent]api_ca_file puts it on virtual-media
	// ISOs. Off: plain http, as before.
	TLS bool
	// FastTrack sets [deploy]fast_track (Metal3's default): one agent boot
	// serves inspection, cleaning and deploy; ironic-inspector then leaves
	// the node powered on after introspection. Default off.
	FastTrack bool
	// VirtualMediaUEFI, when set, is the boot loader of the UEFI ISOs
	// redfish-virtual-media builds, for every node.
	VirtualMediaUEFI *VirtualMediaUEFI
}

// VirtualMediaUEFI is what Ironic puts into a UEFI virtual-media ISO
// beside the kernel and the initramfs.
type VirtualMediaUEFI struct {
	// Bootloader is [conductor]bootloader: the URL of the ESP image.
	Bootloader string
	// GrubConfigPath is [DEFAULT]grub_config_path: where in the ISO
	// Ironic writes the GRUB configuration.
	GrubConfigPath string
	// GrubConfigTemplate is [DEFAULT]grub_config_template, "" for
	// Ironic's own.
	GrubConfigTemplate string
}

// NetBoot is what Ironic's pxe and ipxe boot interfaces are told about the
// provisioning network.
type NetBoot struct {
	// HTTPURL is [deploy]http_url: Config.Dir/http/httpboot (HTTPRoot) as
	// the machines reach it; Ironic's iPXE scripts and the ramdisks it
	// stages are fetched from there.
	HTTPURL string
	// KernelParams is [pxe]kernel_append_params, the operator's part of
	// the ramdisk's command line (Ironic adds ipa-api-url and the rest).
	KernelParams string
	// Loaders is [pxe]loader_file_paths: boot loaders Ironic copies from
	// the host into its HTTP root (name -> host file). A series run from
	// a root filesystem reads the file there, unless it lies below
	// Config.Dir, which the services see bound in (as for the template
	// files below): a file the test makes goes there.
	Loaders map[string]string
	// InspectionParams is [inspector]extra_kernel_params, added to the
	// command line of an inspection Ironic boots.
	InspectionParams string
	// UEFIConfigTemplate is [pxe]uefi_pxe_config_template, the GRUB
	// configuration template of UEFI network boots, "" for Ironic's own
	// (whose linuxefi and initrdefi Debian's signed GRUB lacks).
	UEFIConfigTemplate string
	// ConfigTemplateByArch is [pxe]pxe_config_template_by_arch: the
	// template of the nodes whose cpu_arch property is the key (aarch64),
	// taken before UEFIConfigTemplate.
	ConfigTemplateByArch map[string]string
	// BootfileByArch is [pxe]pxe_bootfile_name_by_arch: the boot file
	// Ironic's DHCP provider names to the nodes of that cpu_arch, taken
	// before [pxe]uefi_pxe_bootfile_name. With dhcp_provider none it
	// only records the operator's setting: the provisioning network's
	// dnsmasq names the file by the client's architecture itself.
	BootfileByArch map[string]string
	// HTTPBoot also enables Ironic's http boot interface (UEFI HTTP boot,
	// Ironic >= 24.1: Series.HasHTTPBoot) and makes [pxe]tftp_root the
	// HTTP root: that interface stages the ramdisk below
	// [deploy]http_root but writes the node's GRUB configuration and its
	// MAC links below [pxe]tftp_root, with the ramdisk's paths relative
	// to tftp_root, so only one directory, served over HTTP, has both.
	// The firmware fetches the boot file from HTTPURL (the DHCP server
	// names the URL), GRUB the rest.
	HTTPBoot bool
}

func (c *Config) defaults() {
	if c.IronicPort == 0 {
		c.IronicPort = 6385
	}
	if c.InspectorPort == 0 {
		c.InspectorPort = 5050
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 10 * time.Second
	}
	if c.CallbackTimeout == 0 {
		c.CallbackTimeout = 600 * time.Second
	}
	if c.JSONRPCPort == 0 {
		c.JSONRPCPort = 8089
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Series == "" {
		c.Series = Series2023_1
	}
	if !c.Series.HasInspector() {
		c.NoInspector = true
	}
	if c.EraseDevicesMetadataPriority == nil {
		p := 99
		c.EraseDevicesMetadataPriority = &p
	}
}

// Timings are what starting the services cost.
type Timings struct {
	// DBSync covers ironic-dbsync create_schema and ironic-inspector-dbsync upgrade.
	DBSync time.Duration
	// Ironic is from starting the process to its API answering with the
	// fake-hardware driver registered by the conductor.
	Ironic time.Duration
	// Inspector is from starting the process to its API answering.
	Inspector time.Duration
}

// Services are a running Ironic (single process: API and conductor with
// rpc_transport none; or, split, ironic-api and ironic-conductor) and,
// unless disabled, ironic-inspector.
type Services struct {
	cfg          Config
	IronicURL    string
	InspectorURL string
	Timings      Timings
	// TLS are the CA and Ironic's certificate and key on the host when
	// Config.TLS is set; empty otherwise.
	TLS TLSFiles
	// caPool holds TLS.CA for this process's clients; nil without TLS.
	caPool *x509.CertPool
	// portLocks release the host-wide locks on the ports, held until Close.
	portLocks []func()

	mu sync.Mutex
	// ironic is the single process, or the API of a split Ironic.
	ironic    *process
	conductor *process
	inspector *process
}

// Start writes the configs, creates the databases, starts the services and
// waits until their APIs answer. On error everything started is stopped.
func Start(ctx context.Context, cfg Config) (*Services, error) {
	if cfg.Netns == "" {
		// On the host's loopback several test processes (go test runs
		// packages in parallel) each start their own Ironic: fixed ports
		// would clash, so unset ones are picked free. A namespace is the
		// test's own, so there the well-known ports stay.
		for _, p := range []*int{&cfg.IronicPort, &cfg.InspectorPort, &cfg.JSONRPCPort} {
			if *p != 0 {
				continue
			}
			free, err := freePort(cfg.Host)
			if err != nil {
				return nil, err
			}
			*p = free
		}
	}
	cfg.defaults()
	if cfg.Dir == "" {
		return nil, errors.New("testbed ironic: Config.Dir is required")
	}
	if _, err := ParseSeries(string(cfg.Series)); err != nil {
		return nil, err
	}
	if cfg.NetBoot != nil && cfg.NetBoot.HTTPBoot && !cfg.Series.HasHTTPBoot() {
		return nil, fmt.Errorf("testbed ironic: series %s has no http boot interface (Ironic >= 24.1)", cfg.Series)
	}
	if !cfg.Series.Host() && cfg.RootFS == "" {
		return nil, fmt.Errorf("testbed ironic: series %s runs from a root filesystem: set Config.RootFS (EnsureRootFS)", string(cfg.Series))
	}
	for _, sub := range []string{"etc", "log", "state/tmp", "state/lock", "state/deploy_logs", "state/inspector_ramdisk_logs", "state/tftpboot", httpRootDir} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	s := &Services{
		cfg:          cfg,
		IronicURL:    cfg.ironicURL(),
		InspectorURL: cfg.url(cfg.InspectorPort),
	}
	if cfg.TLS {
		dir := filepath.Join(cfg.Dir, "etc", "tls")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var err error
		if s.TLS, err = WriteTLS(dir, cfg.Host); err != nil {
			return nil, err
		}
		if s.caPool, err = certPool(s.TLS.CA); err != nil {
			return nil, err
		}
	}
	ports := []int{cfg.IronicPort}
	if cfg.Split {
		ports = append(ports, cfg.JSONRPCPort)
	}
	if !cfg.NoInspector {
		ports = append(ports, cfg.InspectorPort)
	}
	if cfg.Netns == "" { // a namespace is the test's own: its ports are free
		for _, p := range ports {
			// A test that asked for a fixed port waits for another process
			// of this suite holding it (e.g. a second checkout's e2e/vm)
			// instead of failing on it.
			unlock, err := lockPort(ctx, p)
			if err != nil {
				s.releasePorts()
				return nil, err
			}
			s.portLocks = append(s.portLocks, unlock)
			if err := portFree(p); err != nil {
				s.releasePorts()
				return nil, err
			}
		}
	}
	started := false
	defer func() {
		if !started {
			s.releasePorts()
		}
	}()
	if err := os.WriteFile(filepath.Join(cfg.Dir, "etc", "ironic.conf"), []byte(ironicConf(cfg, s.procDir())), 0o644); err != nil {
		return nil, err
	}
	if !cfg.NoInspector {
		if err := os.WriteFile(filepath.Join(cfg.Dir, "etc", "inspector.conf"), []byte(inspectorConf(cfg, s.procDir())), 0o644); err != nil {
			return nil, err
		}
	}
	// The two services are independent and each spends seconds importing
	// Python modules, so their databases and processes are made in parallel.
	start := time.Now()
	var dbErrs [2]error
	var wg sync.WaitGroup
	wg.Go(func() {
		dbErrs[0] = runLogged(s.command(ctx, "ironic-dbsync", "--config-file", s.ironicConf(), "create_schema"))
	})
	if !cfg.NoInspector {
		wg.Go(func() {
			dbErrs[1] = runLogged(s.command(ctx, "ironic-inspector-dbsync", "--config-file", s.inspectorConf(), "upgrade"))
		})
	}
	wg.Wait()
	if err := errors.Join(dbErrs[:]...); err != nil {
		return nil, err
	}
	s.Timings.DBSync = time.Since(start)

	var startErrs [2]error
	wg.Go(func() { startErrs[0] = s.StartIronic(ctx) })
	if !cfg.NoInspector {
		wg.Go(func() { startErrs[1] = s.StartInspector(ctx) })
	}
	wg.Wait()
	if err := errors.Join(startErrs[:]...); err != nil {
		s.Close()
		return nil, err
	}
	started = true
	return s, nil
}

// procDir is the work directory as the services see it: Config.Dir on the
// host, chrootInner inside a root filesystem.
func (s *Services) procDir() string {
	if s.cfg.Series.Host() {
		return s.cfg.Dir
	}
	return chrootInner
}

// HostPath maps a path a service reported (driver_internal_info's
// agent_verify_ca, say) to the host: the work directory as the services
// see it is Config.Dir, anything else is inside the root filesystem.
func (s *Services) HostPath(p string) string {
	if s.cfg.Series.Host() {
		return p
	}
	if rel, ok := strings.CutPrefix(p, chrootInner+"/"); ok {
		return filepath.Join(s.cfg.Dir, rel)
	}
	return filepath.Join(s.cfg.RootFS, p)
}

// Series is the Ironic release that runs.
func (s *Services) Series() Series { return s.cfg.Series }

// HTTPRoot is [deploy]http_root on the host: the files Ironic serves to
// network-booting machines (Config.NetBoot's HTTPURL).
func (s *Services) HTTPRoot() string { return filepath.Join(s.cfg.Dir, httpRootDir) }

// TFTPRoot is [pxe]tftp_root on the host, where the pxe boot interface
// puts Config.NetBoot's loaders: HTTPRoot with NetBoot.HTTPBoot.
func (s *Services) TFTPRoot() string { return filepath.Join(s.cfg.Dir, s.cfg.tftpRootDir()) }

// httpRootDir is [deploy]http_root below Config.Dir.
const httpRootDir = "http/httpboot"

// tftpRootDir is [pxe]tftp_root below Config.Dir: with NetBoot.HTTPBoot
// the HTTP root, so the http interface's GRUB configurations and its
// ramdisks are in one directory served over HTTP.
func (c Config) tftpRootDir() string {
	if c.NetBoot != nil && c.NetBoot.HTTPBoot {
		return httpRootDir
	}
	return "state/tftpboot"
}

func (s *Services) ironicConf() string    { return filepath.Join(s.procDir(), "etc", "ironic.conf") }
func (s *Services) inspectorConf() string { return filepath.Join(s.procDir(), "etc", "inspector.conf") }

// command runs a program of the series: on the host, or chrooted into its
// root filesystem with the work directory bound in. ctx may be
// context.Background() for a service that must outlive the call.
func (s *Services) command(ctx context.Context, argv ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if s.cfg.Series.Host() {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	} else {
		cmd = chrootCommand(ctx, s.cfg.RootFS, s.cfg.Dir, argv...)
	}
	if s.cfg.Netns != "" {
		// Outermost, so a chroot's mount namespace and root are made
		// inside the test's network namespace.
		cmd.Args = append([]string{"ip", "netns", "exec", s.cfg.Netns}, cmd.Args...)
		if p, err := exec.LookPath("ip"); err == nil {
			cmd.Path = p
		} else {
			cmd.Err = err
		}
	}
	return cmd
}

// LogFiles lists every log the services wrote, for attaching to a failed test.
func (s *Services) LogFiles() []string {
	m, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "log", "*"))
	return m
}

// StartIronic starts Ironic (split: the conductor, then the API) and waits
// until the conductor has registered fake-hardware (until then node
// creation fails).
func (s *Services) StartIronic(ctx context.Context) error {
	if !s.cfg.Split {
		return s.startAPI(ctx, "ironic")
	}
	if err := s.startService(ctx, &s.conductor, nil, "", nil, s.ironicArgs("ironic-conductor")...); err != nil {
		return err
	}
	return s.startAPI(ctx, "ironic-api")
}

// StopIronic stops Ironic (API and conductor) and waits for it.
func (s *Services) StopIronic() error {
	return errors.Join(s.stopService(&s.ironic), s.stopService(&s.conductor))
}

// StartAPI starts the API process of a split Ironic again.
func (s *Services) StartAPI(ctx context.Context) error {
	if !s.cfg.Split {
		return errors.New("testbed ironic: StartAPI needs Config.Split")
	}
	return s.startAPI(ctx, "ironic-api")
}

// StopAPI stops only the API process of a split Ironic; the conductor
// goes on.
func (s *Services) StopAPI() error {
	if !s.cfg.Split {
		return errors.New("testbed ironic: StopAPI needs Config.Split")
	}
	return s.stopService(&s.ironic)
}

func (s *Services) startAPI(ctx context.Context, name string) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	return s.startService(ctx, &s.ironic, &s.Timings.Ironic, s.IronicURL, func(ctx context.Context) error {
		return c.driverRegistered(ctx, "fake-hardware")
	}, s.ironicArgs(name)...)
}

// ironicArgs is the command line of an Ironic program; each writes its own
// log file.
func (s *Services) ironicArgs(name string) []string {
	return []string{name, "--config-file", s.ironicConf(), "--log-file", filepath.Join(s.procDir(), "log", name+".log")}
}

// StartInspector starts ironic-inspector and waits for its API.
func (s *Services) StartInspector(ctx context.Context) error {
	return s.startService(ctx, &s.inspector, &s.Timings.Inspector, s.InspectorURL, func(ctx context.Context) error {
		return getOK(ctx, s.HTTPClient(5*time.Second), s.InspectorURL+"/")
	}, "ironic-inspector", "--config-file", s.inspectorConf())
}

// StopInspector stops ironic-inspector and waits for it.
func (s *Services) StopInspector() error { return s.stopService(&s.inspector) }

// startService starts argv into *slot (guarded by s.mu, not held while
// waiting, so two services can start at once) and waits until ready.
func (s *Services) startService(ctx context.Context, slot **process, took *time.Duration, url string, ready func(context.Context) error, argv ...string) error {
	name := argv[0]
	start := time.Now()
	s.mu.Lock()
	if *slot != nil {
		s.mu.Unlock()
		return fmt.Errorf("%s is already running", name)
	}
	// Not CommandContext: the process must outlive the context of the
	// call that started it; stop() ends it.
	p, err := startProcess(name, filepath.Join(s.cfg.Dir, "log", name+".out"), s.command(context.Background(), argv...))
	if err != nil {
		s.mu.Unlock()
		return err
	}
	*slot = p
	s.mu.Unlock()
	if ready == nil {
		// No API of its own (ironic-conductor): the API's readiness
		// probe covers it.
		return nil
	}
	if err := waitUntil(ctx, 90*time.Second, p, ready); err != nil {
		return fmt.Errorf("%s did not come up at %s (log %s): %w", name, url, p.log, err)
	}
	s.mu.Lock()
	*took = time.Since(start)
	s.mu.Unlock()
	return nil
}

func (s *Services) stopService(slot **process) error {
	s.mu.Lock()
	p := *slot
	*slot = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop()
}

// url is a service's base URL at Host.
func (c Config) url(port int) string {
	return "http://" + net.JoinHostPort(c.Host, strconv.Itoa(port))
}

// ironicURL is Ironic's base URL: https with Config.TLS.
func (c Config) ironicURL() string {
	if c.TLS {
		return "https://" + net.JoinHostPort(c.Host, strconv.Itoa(c.IronicPort))
	}
	return c.url(c.IronicPort)
}

// HTTPClient reaches the services from this process (through Config.Dial
// when they run in a namespace, trusting Services.TLS.CA with Config.TLS).
func (s *Services) HTTPClient(timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout}
	if s.cfg.Dial != nil || s.caPool != nil {
		t := &http.Transport{DialContext: s.cfg.Dial}
		if s.caPool != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: s.caPool}
		}
		c.Transport = t
	}
	return c
}

// Client is an Ironic client for these services.
func (s *Services) Client() (*Client, error) {
	c, err := NewClient(s.IronicURL)
	if err != nil {
		return nil, err
	}
	c.Service.HTTPClient = *s.HTTPClient(30 * time.Second)
	return c, nil
}

// InspectorClient is an ironic-inspector client for these services.
func (s *Services) InspectorClient() (*InspectorClient, error) {
	c, err := NewInspectorClient(s.InspectorURL)
	if err != nil {
		return nil, err
	}
	c.Service.HTTPClient = *s.HTTPClient(30 * time.Second)
	return c, nil
}

// Close stops everything that runs.
func (s *Services) Close() error {
	err := errors.Join(s.StopInspector(), s.StopIronic())
	s.releasePorts()
	return err
}

func (s *Services) releasePorts() {
	for _, unlock := range s.portLocks {
		unlock()
	}
	s.portLocks = nil
}

// process is one service started in its own session, so that stopping it
// also reaches the workers it forks.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

func startProcess(name, logPath string, cmd *exec.Cmd) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "==== %s: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after 15 s.
func (p *process) stop() error {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Workers that ignored SIGTERM but outlived the leader.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// exited reports the process's exit, if it has exited.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// waitUntil polls ready every 250 ms until it succeeds, the process dies,
// the timeout passes or ctx ends.
func waitUntil(ctx context.Context, timeout time.Duration, p *process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if dead, err := p.exited(); dead {
			return fmt.Errorf("%s exited: %v; last probe: %v", p.name, err, last)
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		last = ready(rctx)
		rcancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last probe: %v", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func getOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freePort returns a TCP port nothing listens on at host (default
// 127.0.0.1) now.
func freePort(host string) (int, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("testbed ironic: no free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port 127.0.0.1:%d is taken by another process: %w", port, err)
	}
	return l.Close()
}

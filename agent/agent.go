// Package agent is the Ironic agent itself: start-up (inspection, lookup),
// heartbeats, the command extensions Ironic calls, and the generic hardware
// manager. Sub-packages hold the parts: config, api (REST server), command
// (results and dispatch), hwmgr (hardware-manager framework), ironic (the
// Ironic client), inspect (inspection data), agenttls (TLS material).
package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/agent/agenttls"
	"github.com/ironic-go/ironic-agent/agent/api"
	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
	"github.com/ironic-go/ironic-agent/internal/sntp"
	"github.com/ironic-go/ironic-agent/internal/version"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/lldp"
)

// Options are what the agent is built from. Only Config is required: the
// zero value of every other field is IPA's behaviour on the real machine.
type Options struct {
	Config *config.Config
	Log    *slog.Logger
	// LogRing holds the agent's own log for collect_system_logs; nil: a
	// fresh 1 MiB ring that only sees what the caller also writes to it.
	LogRing *LogRing
	// Managers are extra hardware managers registered at build time; the
	// generic manager and the executable-steps manager are always added.
	Managers []func() hwmgr.Manager
	// Rescue serves the rescuer's logins once finalize_rescue stopped the
	// API (and after a restart on a rescued machine), until ctx ends; nil:
	// the agent only stays alive.
	Rescue func(ctx context.Context, password *shacrypt.Hash) error
	// StateRoot prefixes the paths the agent itself writes or checks
	// (/etc/.rescued, the rescue password); "" means "/".
	StateRoot string
	// EFIVars is the efivarfs directory boot entries are written to; "":
	// /sys/firmware/efi/efivars.
	EFIVars string
	// InitLog is the ramdisk init's log file for collect_system_logs;
	// "": logging.InitLogFile.
	InitLog string
	// SkipRAIDAssembly leaves the machine's md arrays alone at start.
	// Otherwise they are assembled as IPA's initialize does, on the live
	// machine, for an agent not confined to allowed devices. Tests that
	// run the agent on the host set it.
	SkipRAIDAssembly bool
	// DisableMultipath makes no multipath maps of the disks reached over
	// several SCSI paths. Otherwise the maps are made as IPA's initialize
	// does (same rule as SkipRAIDAssembly).
	DisableMultipath bool
	// Hooks replace the machine, the network and time in tests.
	Hooks Hooks
}

// Hooks are the agent's test seams. The zero value is the real machine:
// every nil or zero field below says what it is replaced by.
type Hooks struct {
	// Machine powers off, reboots and flushes; nil: the real host.
	Machine Machine
	// Inventory collects the inventory; nil: collector.Collect below
	// Config.InventoryRoot.
	Inventory func(ctx context.Context) (*inventory.Inventory, error)
	// Disks lists the machine's disks for steps; nil: collector.Disks below
	// Config.InventoryRoot, or the disks of Inventory when that is given.
	Disks func(ctx context.Context) ([]inventory.Disk, error)
	// BlockDevices lists exactly the named devices for a confined agent;
	// nil: collector.BlockDevices of the live machine ("/").
	BlockDevices func(ctx context.Context, names []string) ([]inventory.Disk, error)
	// Listener is used instead of listening on listen_host:listen_port.
	Listener net.Listener
	// Backoff (lookup and inspection retries) and Clock (start-up waits
	// and deadlines, heartbeats, the shutdown's wait) replace time and
	// randomness.
	Backoff ironic.Backoff
	Clock   Clock
	// Ready is called with the API's base URL once it is listening.
	Ready func(url string)
	// InterfaceWait bounds the wait for an interface with a MAC (60 s).
	InterfaceWait time.Duration
	// ShutdownDelay is how long power_off and run_image wait before acting,
	// so their HTTP reply reaches Ironic (1 s).
	ShutdownDelay time.Duration
	// NTP measures the clock's offset from ntp_server; nil: the SNTP
	// client on port 123. The clock itself is set through Machine.
	NTP func(ctx context.Context, server string) (sntp.Sample, error)
	// LockdownNICs brings the machine's NICs down after system.lockdown
	// stopped the API; nil: the candidate NICs of this machine through
	// netlink, or none when the inventory is not this machine's (a fixture
	// tree, or Inventory given).
	LockdownNICs func(ctx context.Context) error
}

// Agent is one running agent.
type Agent struct {
	cfg      *config.Config
	log      *slog.Logger
	ring     *LogRing
	http     *http.Client
	ironic   *ironic.Client
	managers *hwmgr.Set
	generic  *GenericManager
	exec     *command.Executor
	tokens   *api.Tokens
	machine  Machine
	opts     Options

	startedAt time.Time
	hb        *Heartbeater

	mu           sync.Mutex
	inv          *inventory.Inventory
	node         map[string]any
	nodeUUID     string
	lookupConfig ironic.LookupConfig
	// lookupTLS is the TLS policy the last lookup set, nil if none.
	lookupTLS        *agenttls.Policy
	heartbeatTimeout time.Duration
	callbackURL      string
	verifyCA         string
	partitionUUIDs   map[string]any
	images           imageCache // the last image written, for prepare_image's cache hit
	stopServing      chan struct{}
	stopOnce         sync.Once
	// lockedDown: system.lockdown ran; Run brings the NICs down once the
	// API stopped and does not return until its context ends.
	lockedDown bool
	// injectedInventory: Options.Hooks.Inventory was given, so the inventory may
	// not describe this machine (see defaultLockdownNICs).
	injectedInventory bool
	// multipathMu serialises enableMultipath and watchMultipath's passes.
	multipathMu sync.Mutex
	// lookupMu serialises processLookup: its token decisions and the
	// token files, which are not done under mu.
	lookupMu sync.Mutex
}

// New builds an agent. It loads the hardware managers; nothing is sent
// anywhere yet.
func New(ctx context.Context, opts Options) (*Agent, error) {
	if opts.Config == nil {
		return nil, errors.New("agent: no configuration")
	}
	cfg := opts.Config
	opts.Log = logging.OrDiscard(opts.Log)
	if opts.LogRing == nil {
		opts.LogRing = NewLogRing(1 << 20)
	}
	if opts.Hooks.Machine == nil {
		opts.Hooks.Machine = HostMachine{}
	}
	if opts.Hooks.Clock == nil {
		opts.Hooks.Clock = clock.Real{}
	}
	if opts.Hooks.InterfaceWait == 0 {
		opts.Hooks.InterfaceWait = 60 * time.Second
	}
	if opts.Hooks.ShutdownDelay == 0 {
		opts.Hooks.ShutdownDelay = time.Second
	}
	if opts.StateRoot == "" {
		opts.StateRoot = "/"
	}
	a := &Agent{
		cfg:              cfg,
		log:              opts.Log,
		ring:             opts.LogRing,
		machine:          opts.Hooks.Machine,
		opts:             opts,
		tokens:           &api.Tokens{},
		heartbeatTimeout: 300 * time.Second,
		stopServing:      make(chan struct{}),
	}
	a.injectedInventory = opts.Hooks.Inventory != nil
	if opts.Hooks.LockdownNICs == nil {
		a.opts.Hooks.LockdownNICs = a.defaultLockdownNICs
	}
	if opts.Hooks.Inventory == nil {
		a.opts.Hooks.Inventory = func(ctx context.Context) (*inventory.Inventory, error) {
			return collector.Collect(ctx, collector.Options{
				Root: cfg.InventoryRoot, Logger: a.log, CollectLLDP: cfg.CollectLLDP, LLDPTimeout: cfg.LLDPTimeout,
				LLDP: a.lldpCapturer(), SkipBMC: a.skipBMC(),
			})
		}
	}
	if opts.Hooks.Disks == nil {
		a.opts.Hooks.Disks = func(ctx context.Context) ([]inventory.Disk, error) {
			if opts.Hooks.Inventory != nil {
				inv, err := opts.Hooks.Inventory(ctx)
				if err != nil {
					return nil, err
				}
				return inv.Disks, nil
			}
			return collector.Disks(ctx, collector.Options{Root: cfg.InventoryRoot, Logger: a.log})
		}
	}
	if opts.Hooks.BlockDevices == nil {
		// The allowed devices are real /dev paths that steps erase and
		// write, so their records come from the live machine even when the
		// inventory is read from a fixture tree (--inventory-root): a
		// recorded tree knows other devices, or stale sizes of the same names.
		a.opts.Hooks.BlockDevices = func(ctx context.Context, names []string) ([]inventory.Disk, error) {
			return collector.BlockDevices(ctx, collector.Options{Logger: a.log}, names)
		}
	}
	hc, err := agenttls.NewHTTPClient(a.TLSClientOptions(cfg.HTTPRequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("TLS client options: %w", err)
	}
	a.http = hc
	if cfg.AgentToken != "" {
		a.tokens.SetToken(cfg.AgentToken)
	}
	if cfg.AgentTokenOnGet == "required" {
		a.tokens.RequireOnGet()
	}
	if !cfg.Standalone {
		a.ironic, err = ironic.NewClient(cfg.APIURLs, hc, cfg.IronicAPIVersion)
		if err != nil {
			return nil, err
		}
		a.ironic.RequestID = cfg.GlobalRequestID
		a.ironic.TrustedCAs = trustedCAs(cfg)
		a.ironic.Log = a.log
	} else {
		a.tokens.AllowTokenless(true)
	}
	a.generic = &GenericManager{Disks: a.Disks, InjectFilesPriority: cfg.InjectFilesPriority, agent: a, AllowedDevices: cfg.AllowedDevices, Log: a.log, SkipSpecialFilesystemGuard: !cfg.GuardSpecialFilesystems}
	execSteps := hwmgr.NewExecSteps(cfg.StepsDir, func(ctx context.Context) (any, error) {
		inv, err := a.Inventory(ctx)
		if err != nil {
			a.log.Warn("executable step: no inventory for its input", "error", err)
			return nil, err
		}
		return inv, nil
	})
	if err := execSteps.LoadError(); err != nil {
		return nil, err
	}
	ctors := []func() hwmgr.Manager{func() hwmgr.Manager { return a.generic }, func() hwmgr.Manager { return execSteps }}
	ctors = append(ctors, opts.Managers...)
	a.managers, err = hwmgr.Load(ctx, ctors, a.log)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// TLSClientOptions returns the TLS client options of every outgoing call,
// with the given per-request timeout (0: none). deploy's image downloads
// use them through HTTPClient.
func (a *Agent) TLSClientOptions(timeout time.Duration) agenttls.ClientOptions {
	return agenttls.ClientOptions{Insecure: a.cfg.Insecure, CAFile: a.cfg.CAFile, CertFile: a.cfg.CertFile, KeyFile: a.cfg.KeyFile,
		Policy: a.TLSPolicy(), Timeout: timeout}
}

// trustedCAs says what the agent verifies Ironic's certificate against,
// for the error when that fails.
func trustedCAs(cfg *config.Config) string {
	if cfg.CAFile != "" {
		return "the CA file " + cfg.CAFile + " ([DEFAULT]cafile)"
	}
	return "the system's CA certificates (name Ironic's CA with [DEFAULT]cafile, or set ipa-insecure=1)"
}

// TLSPolicy is the TLS version and cipher policy in force: the
// configuration's, with the last lookup's tls_min_version and
// tls_cipher_suites over it (IPA 12+). Connections opened before the
// lookup (the Ironic client's) keep the configuration's.
func (a *Agent) TLSPolicy() agenttls.Policy {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lookupTLS != nil {
		return *a.lookupTLS
	}
	return a.cfg.TLSPolicy
}

// lookupTLSPolicy applies a lookup config's tls_min_version and
// tls_cipher_suites over the configured ones, as IPA's
// process_lookup_data does; nil when the config sets neither. A value this
// agent cannot honour is logged and ignored: a lookup never fails on it.
func lookupTLSPolicy(cfg *config.Config, lc ironic.LookupConfig, log *slog.Logger) *agenttls.Policy {
	minV, suites := cfg.TLSMinVersion, cfg.TLSCipherSuites
	if lc.TLSMinVersion == "" && lc.TLSCipherSuites == "" {
		return nil
	}
	if lc.TLSMinVersion != "" {
		minV = lc.TLSMinVersion
	}
	if lc.TLSCipherSuites != "" {
		suites = lc.TLSCipherSuites
	}
	p, err := agenttls.ParsePolicy(minV, suites)
	if err != nil {
		log.Warn("ignoring the TLS settings of Ironic's lookup config", "tls_min_version", lc.TLSMinVersion, "tls_cipher_suites", lc.TLSCipherSuites, "error", err)
		return nil
	}
	log.Info("TLS policy set from Ironic's lookup config", "policy", p.String())
	return &p
}

// unusedLookupKey says why a lookup config key has no effect here.
func unusedLookupKey(k string) string {
	switch k {
	case "metrics", "metrics_statsd":
		return "this agent sends no StatsD metrics"
	case "agent_containers":
		return "this agent runs no container steps (no podman or docker in its ramdisk)"
	}
	return "unknown to this agent (a newer Ironic?)"
}

// HTTPClient returns a client with the agent's TLS options and the given
// whole-request timeout (0 for downloads that bound themselves).
func (a *Agent) HTTPClient(timeout time.Duration) (*http.Client, error) {
	return agenttls.NewHTTPClient(a.TLSClientOptions(timeout))
}

// Executor returns the command executor (nil before Run starts it).
func (a *Agent) Executor() *command.Executor { return a.exec }

func (a *Agent) skipBMC() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.lookupConfig.AgentSkipBMCDetect
	return v != nil && *v
}

// Inventory returns the cached inventory, collecting it the first time.
func (a *Agent) Inventory(ctx context.Context) (*inventory.Inventory, error) {
	a.mu.Lock()
	inv := a.inv
	a.mu.Unlock()
	if inv != nil {
		return inv, nil
	}
	return a.refreshInventory(ctx)
}

func (a *Agent) refreshInventory(ctx context.Context) (*inventory.Inventory, error) {
	a.enableMultipath(ctx)
	inv, err := a.opts.Hooks.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.inv = inv
	a.mu.Unlock()
	return inv, nil
}

// Disks returns the disks steps may touch: exactly the allowed devices
// when the agent is confined, else the inventory's disks.
func (a *Agent) Disks(ctx context.Context) ([]inventory.Disk, error) {
	if len(a.cfg.AllowedDevices) > 0 {
		return a.opts.Hooks.BlockDevices(ctx, a.cfg.AllowedDevices)
	}
	// Listed afresh each time, as IPA lists block devices for every erase:
	// disks can appear after start-up (RAID volumes, slow controllers).
	a.enableMultipath(ctx)
	return a.opts.Hooks.Disks(ctx)
}

// Node returns the node last received (lookup or a command's node
// parameter), nil if none.
func (a *Agent) Node() map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.node
}

// LookupConfig returns the config of the last lookup.
func (a *Agent) LookupConfig() ironic.LookupConfig {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookupConfig
}

// cacheNode records the node a command was given (IPA's cache_node).
func (a *Agent) cacheNode(node map[string]any) {
	if node == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node = node
	if u, ok := node["uuid"].(string); ok && u != "" && a.nodeUUID == "" {
		a.nodeUUID = u
	}
}

// SetPartitionUUIDs records what standby.get_partition_uuids returns after
// an image write (deploy-image calls it).
func (a *Agent) SetPartitionUUIDs(v map[string]any) {
	a.mu.Lock()
	a.partitionUUIDs = v
	a.mu.Unlock()
}

// processLookup applies a lookup reply (IPA's process_lookup_data): the
// node and config under mu, then the agent token, whose keeping across
// restarts reads and writes files and so runs outside mu.
func (a *Agent) processLookup(res *ironic.LookupResult) {
	a.lookupMu.Lock()
	defer a.lookupMu.Unlock()
	a.applyLookupConfig(res)
	a.applyLookupToken(res)
}

// applyLookupConfig records the reply's node and config.
func (a *Agent) applyLookupConfig(res *ironic.LookupResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node = res.Node
	a.nodeUUID = res.NodeUUID
	a.lookupConfig = res.Config
	for _, why := range res.Config.Ignored {
		a.log.Warn("ignoring a lookup config value this agent cannot use", "reason", why)
	}
	for _, k := range res.Config.Unused {
		a.log.Info("lookup config key not used by this agent", "key", k, "why", unusedLookupKey(k))
	}
	a.lookupTLS = lookupTLSPolicy(a.cfg, res.Config, a.log)
	if res.Config.HeartbeatTimeout > 0 {
		a.heartbeatTimeout = time.Duration(res.Config.HeartbeatTimeout * float64(time.Second))
	}
}

// applyLookupToken takes the reply's agent token, keeping it for a
// restarted process of this boot.
func (a *Agent) applyLookupToken(res *ironic.LookupResult) {
	tok := res.Config.AgentToken
	switch {
	case tok == nil:
		if (res.Config.AgentTokenRequired || a.cfg.AgentTokenRequired) && a.tokens.Token() == "" {
			a.log.Error("Ironic requires an agent token but sent none")
		}
	case *tok == "******":
		a.takeMaskedToken(res.NodeUUID)
	case len(*tok) >= 32:
		a.tokens.SetToken(*tok)
		a.saveToken(res.NodeUUID, *tok)
		a.log.Info(EventTokenReceived)
	default:
		a.log.Warn("ignoring an agent token shorter than 32 characters", "length", len(*tok))
	}
}

// takeMaskedToken handles the "******" mask. A token is issued once per
// operation: a later lookup gets the mask and must never replace the token
// already held; with none held, the one an earlier process of this boot
// kept is used, and the step that process did not finish is reported.
func (a *Agent) takeMaskedToken(uuid string) {
	if a.tokens.Token() != "" {
		a.log.Info(EventMaskedTokenKept)
		return
	}
	if kept := a.loadToken(uuid); kept != "" {
		a.tokens.SetToken(kept)
		a.log.Info("lookup returned the masked token; using the one an earlier agent process of this boot kept")
		a.reportInterruptedStep(uuid)
		return
	}
	a.log.Error("Ironic sent a masked agent token and this agent holds none (restarted mid-operation?); commands will be refused until a new operation issues one")
}

// StopServing ends the API (rescue): Run returns.
func (a *Agent) StopServing() {
	a.stopOnce.Do(func() { close(a.stopServing) })
}

// Run starts the agent and serves until ctx ends or a command stops it.
func (a *Agent) Run(ctx context.Context) error {
	if a.rescued() {
		// A restart after finalize_rescue: IPA looks the node up again
		// (which Ironic refuses in the rescue state) and then idles; the
		// rescuer's logins are all that is left to serve.
		a.log.Warn("this machine was rescued (/etc/.rescued exists): not serving the API")
		return a.serveRescue(ctx)
	}
	stopWatch, err := a.startup(ctx)
	if err != nil {
		return err
	}
	defer stopWatch()
	apiVersion, err := a.findNode(ctx)
	if err != nil {
		return err
	}
	s, err := a.serve(ctx, apiVersion)
	if err != nil {
		return err
	}
	return a.shutdown(ctx, s, a.waitForStop(ctx, s))
}

// startup readies the machine as IPA's start does: the clock, the command
// executor, the hardware initialisation delay, the md arrays and the
// multipath maps. It returns the stop of the multipath path checker,
// which runs until Run returns.
func (a *Agent) startup(ctx context.Context) (stopWatch func(), err error) {
	// First, as in IPA: lookup, the TLS certificate and downloads need
	// the right time; started_at is then read from the clock as set.
	if err := a.syncClockAtStart(ctx); err != nil {
		return nil, err
	}
	a.startedAt = a.opts.Hooks.Clock.Now()
	a.exec = command.NewExecutor(ctx, a.extensions(), a.log, func(*command.Result) {
		if a.hb != nil {
			a.hb.Force()
		}
	})
	if d := a.cfg.HardwareInitializationDelay; d > 0 {
		a.log.Info("hardware initialization delay", "delay", d)
		if err := a.sleep(ctx, d); err != nil {
			return nil, err
		}
	}
	a.assembleRAID(ctx)
	a.enableMultipath(ctx)
	// The maps' paths are checked for as long as the agent runs, as
	// multipathd does beside IPA.
	mpCtx, stopMP := context.WithCancel(ctx)
	mpDone := make(chan struct{})
	go func() { defer close(mpDone); a.watchMultipath(mpCtx) }()
	return func() { stopMP(); <-mpDone }, nil
}

// findNode waits for the root disk and the network, inspects when asked
// to, and looks the node up in Ironic. It returns Ironic's API version
// (zero when standalone).
func (a *Agent) findNode(ctx context.Context) (ironic.Version, error) {
	var apiVersion ironic.Version
	if err := a.waitForRootDisk(ctx); err != nil {
		return apiVersion, err
	}
	var inv *inventory.Inventory
	var err error
	if a.cfg.Standalone && a.cfg.InspectionCallbackURL == "" {
		// Nothing to look up: no need to wait for the network.
		inv, err = a.refreshInventory(ctx)
	} else {
		inv, err = a.waitForInterfaces(ctx)
	}
	if err != nil {
		return apiVersion, err
	}
	a.logVLANs(inv)

	var inspectedUUID string
	if a.cfg.InspectionCallbackURL != "" {
		inv = a.waitForDHCP(ctx, inv)
		inspectedUUID = a.inspect(ctx, inv)
		if ctx.Err() != nil {
			return apiVersion, ctx.Err()
		}
	}
	if a.cfg.Standalone {
		return apiVersion, nil
	}
	macs := inv.MACs()
	a.log.Info(EventLookingUp, "addresses", macs, "node_uuid", inspectedUUID)
	res, err := a.ironic.LookupNode(ctx, a.opts.Hooks.Backoff, macs, inspectedUUID, a.cfg.LookupTimeout, a.cfg.LookupInterval)
	if err != nil {
		return apiVersion, fmt.Errorf("lookup: %w", err)
	}
	a.processLookup(res)
	a.log.Info(EventLookupSucceeded, "node", res.NodeUUID, "heartbeat_timeout", res.Config.HeartbeatTimeout)
	return a.ironic.APIVersion(ctx), nil
}

// serving is the API server and the heartbeat loop while the agent serves.
type serving struct {
	srv      *http.Server
	serveErr chan error
	stopHB   context.CancelFunc
	hbDone   chan struct{}
}

// serve starts the API (with TLS when configured) and, once it listens,
// the heartbeats.
func (a *Agent) serve(ctx context.Context, apiVersion ironic.Version) (*serving, error) {
	tlsCfg, err := a.setupTLS(ctx, apiVersion)
	if err != nil {
		return nil, err
	}
	ln := a.opts.Hooks.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", net.JoinHostPort(a.cfg.ListenHost, strconv.Itoa(a.cfg.ListenPort)))
		if err != nil {
			return nil, fmt.Errorf("API listener on %s port %d: %w", a.cfg.ListenHost, a.cfg.ListenPort, err)
		}
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	if !a.cfg.Standalone {
		// Made before the API serves: finished async commands force a
		// heartbeat through it.
		a.hb = NewHeartbeater(a.sendHeartbeat, a.currentHeartbeatTimeout, a.log)
		a.hb.Clock = a.opts.Hooks.Clock
		if a.opts.Hooks.Backoff.Float64 != nil {
			a.hb.Float64 = a.opts.Hooks.Backoff.Float64
		}
	}
	s := &serving{serveErr: make(chan error, 1), hbDone: make(chan struct{})}
	s.srv = &http.Server{
		Handler: (&api.Server{Exec: a.exec, Tokens: a.tokens, Version: version.Version(),
			StartedAt: func() time.Time { return a.startedAt }, Log: a.log}).Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	a.log.Info(EventAPIListening, "address", ln.Addr().String(), "scheme", scheme, "callback_url", a.callbackURL)
	if a.opts.Hooks.Ready != nil {
		a.opts.Hooks.Ready(scheme + "://" + ln.Addr().String())
	}

	var hbCtx context.Context
	hbCtx, s.stopHB = context.WithCancel(ctx)
	if a.hb != nil {
		// First heartbeat once the API listens, as IPA does.
		go func() { defer close(s.hbDone); a.hb.Run(hbCtx) }()
	} else {
		close(s.hbDone)
	}
	return s, nil
}

// waitForStop blocks until ctx ends, a command stops the API, or the
// server fails; it returns the server's failure.
func (a *Agent) waitForStop(ctx context.Context, s *serving) error {
	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
	case <-a.stopServing:
		a.log.Info("stopped serving on request")
	case err := <-s.serveErr:
		return fmt.Errorf("API server: %w", err)
	}
	return nil
}

// shutdown stops the heartbeats and the API, gives a running command a
// little time, then locks the machine down or serves the rescuer when a
// command asked for it. runErr is the server's failure, returned as is.
func (a *Agent) shutdown(ctx context.Context, s *serving, runErr error) error {
	s.stopHB()
	<-s.hbDone
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(shutCtx)
	waitDone := make(chan struct{})
	go func() { a.exec.Wait(); close(waitDone) }()
	timeout, stop := a.opts.Hooks.Clock.After(10 * time.Second)
	select {
	case <-waitDone:
	case <-timeout:
		a.log.Warn("async command still running at shutdown")
	}
	stop()
	if runErr == nil && a.isLockedDown() {
		a.lockdownSystem(ctx)
	}
	if runErr == nil && ctx.Err() == nil && a.rescued() {
		return a.serveRescue(ctx)
	}
	return runErr
}

// sleep waits d on the agent's clock, or until ctx ends.
func (a *Agent) sleep(ctx context.Context, d time.Duration) error {
	return clock.SleepOn(ctx, a.opts.Hooks.Clock, d)
}

func (a *Agent) currentHeartbeatTimeout() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heartbeatTimeout
}

func (a *Agent) sendHeartbeat(ctx context.Context) error {
	a.mu.Lock()
	uuid, cb, ca := a.nodeUUID, a.callbackURL, a.verifyCA
	a.mu.Unlock()
	return a.ironic.SendHeartbeat(ctx, uuid, ironic.Heartbeat{
		CallbackURL: cb, Token: a.tokens.Token(), AgentVersion: version.Version(), VerifyCA: ca,
	})
}

// rawJSON returns v unchanged, for results that must carry a value as
// received, and nil (JSON null) for an absent one.
func rawJSON(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return v
}

// liveMachine reports whether the inventory is this machine's own. A
// fixture tree (inventory_root, as the end-to-end tests use) names NICs
// that are not this machine's: an LLDP capture on them would bring up,
// join multicast groups on, or stop the i40e firmware LLDP agent of the
// host's own NICs that happen to share those names.
func (a *Agent) liveMachine() bool {
	r := a.cfg.InventoryRoot
	return r == "" || filepath.Clean(r) == "/"
}

// lldpCapturer listens on the machine's NICs, or on none when the
// inventory is a fixture's (see liveMachine).
func (a *Agent) lldpCapturer() collector.LLDPCapturer {
	if !a.liveMachine() {
		return silentLLDP{}
	}
	return lldp.Capturer{Logger: a.log}
}

// silentLLDP is the capture of a fixture machine: every NIC heard nothing,
// as IPA reports a NIC without a neighbour.
type silentLLDP struct{}

func (silentLLDP) Capture(_ context.Context, names []string, _ time.Duration) (map[string][]inventory.LLDPTLV, error) {
	out := make(map[string][]inventory.LLDPTLV, len(names))
	for _, n := range names {
		out[n] = []inventory.LLDPTLV{}
	}
	return out, nil
}

package bmcsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Redfish boot source override targets (BootSourceOverrideTarget) the
// RedfishBMC simulates, as Ironic's redfish management sets them.
const (
	RedfishBootNone = "None" // no override: the disks, in the firmware's order
	RedfishBootPxe  = "Pxe"  // the NICs with PXE (Machine.NetBoot)
	RedfishBootHdd  = "Hdd"  // the disks
	RedfishBootCd   = "Cd"   // the image inserted in the virtual CD
	// RedfishBootUefiHttp is the firmware's UEFI HTTP boot, which Ironic's
	// http boot interface asks for: the NICs with PXE first, as for Pxe,
	// with the firmware's PXE clients switched off (Machine.HTTPBoot), so
	// it boots the NIC's HTTP boot option (QEMU's boot order cannot name
	// one boot option of a NIC).
	RedfishBootUefiHttp = "UefiHttp"
)

// Virtual media devices of a RedfishBMC: the CD Ironic boots the ramdisk
// ISO from, and the USB stick it puts a configuration (or a ramdisk
// deploy's config drive) on.
const (
	RedfishMediaCd       = "Cd"
	RedfishMediaUsbStick = "UsbStick"
)

// The resource paths of a RedfishBMC: one system, one manager, one chassis.
const (
	redfishRoot     = "/redfish/v1"
	redfishSystem   = redfishRoot + "/Systems/system"
	redfishSecure   = redfishSystem + "/SecureBoot"
	redfishManager  = redfishRoot + "/Managers/bmc"
	redfishChassis  = redfishRoot + "/Chassis/chassis"
	redfishSessions = redfishRoot + "/SessionService/Sessions"
)

// RedfishConfig is where a RedfishBMC listens and whom it lets in.
type RedfishConfig struct {
	// Addr is the TCP address of the Redfish service (plain HTTP), inside
	// Options.Netns when that is set: Ironic's redfish_address is
	// http://Addr.
	Addr string
	// User and Password are the one account: HTTP basic authentication
	// or a session (SessionService) with these.
	User, Password string
}

// RedfishBMC is a Redfish service acting as a machine's BMC, the resources
// Ironic's redfish hardware type (power, management, and the
// redfish-virtual-media boot interface) reads and changes through sushy:
// the service root, one ComputerSystem (power state, boot source override
// with target, enabled and mode, the Reset action), its Manager with
// VirtualMedia (a CD and a USB stick, InsertMedia and EjectMedia), a
// Chassis, and the SessionService. As with IPMISim, the BMC holds the
// power: a power-on starts QEMU as a child of the test, a power-off kills
// it, and each power-on boots what the boot override says. An inserted
// image is downloaded at once, from inside the BMC's network namespace,
// into the machine's directory; a power-on with target Cd boots that file
// as the machine's CD, and an image in the USB stick is attached to every
// boot as a removable USB disk (qemu.Machine.USBStick). The boot mode
// (Legacy or UEFI) is the firmware of the next power-on (SeaBIOS or OVMF).
// A machine with Secure Boot firmware (qemu.Machine.SecureBoot) also has
// the system's SecureBoot resource, which Ironic's redfish management
// reads and PATCHes for a node with the secure_boot capability:
// SecureBootEnable is the firmware's setting for the next power-on
// (qemu.Machine.SecureBootDisabled), SecureBootCurrentBoot what the
// running boot has.
type RedfishBMC struct {
	machinePower
	machine qemu.Machine
	opts    qemu.Options
	conf    RedfishConfig
	ctx     context.Context
	cancel  context.CancelFunc
	srv     *http.Server
	client  *http.Client // downloads of inserted images
	// start boots a machine: Start, or a unit test's stand-in.
	start func(context.Context, qemu.Machine, qemu.Options) (*qemu.VM, error)

	// Guarded by machinePower.mu:
	target, enabled, mode string // the boot source override
	secureBootEnable      bool   // SecureBootEnable: the next power-on's setting
	media                 map[string]*redfishMedia
	sessions              map[string]string // session ID -> token
	nextSession           int
}

// redfishMedia is one virtual media device.
type redfishMedia struct {
	id, name       string
	types          []string // Redfish MediaTypes
	image          string   // the URL Ironic gave, "" when ejected
	file           string   // the downloaded image
	inserted       bool
	writeProtected bool
	transferMethod string
}

// StartRedfishBMC serves a Redfish BMC for m on c.Addr (inside opts.Netns
// when set), the machine powered off. Its downloads and log are in
// m.Dir/bmc; ctx bounds the service and every VM it starts. Close stops
// both.
func StartRedfishBMC(ctx context.Context, m qemu.Machine, opts qemu.Options, c RedfishConfig) (*RedfishBMC, error) {
	b, err := newRedfishBMC(ctx, m, opts, c)
	if err != nil {
		return nil, err
	}
	var l net.Listener
	listen := func() (err error) { l, err = net.Listen("tcp", c.Addr); return err }
	if opts.Netns != "" {
		err = netnstest.Do(opts.Netns, listen)
	} else {
		err = listen()
	}
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("bmcsim: Redfish BMC on %s: %w", c.Addr, err)
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = b.srv.Serve(l) }()
	return b, nil
}

func newRedfishBMC(ctx context.Context, m qemu.Machine, opts qemu.Options, c RedfishConfig) (*RedfishBMC, error) {
	if m.Dir == "" {
		return nil, errors.New("bmcsim: Machine.Dir is empty")
	}
	if m.BMC != nil {
		return nil, errors.New("bmcsim: a machine behind a Redfish BMC has no Machine.BMC (no in-band IPMI interface)")
	}
	if c.Addr == "" || c.User == "" || c.Password == "" {
		return nil, errors.New("bmcsim: RedfishConfig needs Addr, User and Password")
	}
	mode, err := redfishBootMode(m.Firmware)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(m.Dir, "bmc"), 0o755); err != nil {
		return nil, fmt.Errorf("bmcsim: %w", err)
	}
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		d := func() (err error) { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return err }
		if opts.Netns != "" {
			return c, netnstest.Do(opts.Netns, d)
		}
		return c, d()
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &RedfishBMC{machine: m, opts: opts, conf: c, ctx: ctx, cancel: cancel, start: qemu.Start,
		client: &http.Client{Transport: &http.Transport{DialContext: dial, Proxy: nil}},
		target: RedfishBootNone, enabled: "Disabled", mode: mode,
		secureBootEnable: m.SecureBoot && !m.SecureBootDisabled,
		sessions:         map[string]string{},
		media: map[string]*redfishMedia{
			RedfishMediaCd:       {id: RedfishMediaCd, name: "Virtual CD", types: []string{"CD", "DVD"}, writeProtected: true},
			RedfishMediaUsbStick: {id: RedfishMediaUsbStick, name: "Virtual USB stick", types: []string{"USBStick"}, writeProtected: true},
		}}
	return b, nil
}

func redfishBootMode(firmware qemu.Firmware) (string, error) {
	switch firmware {
	case qemu.BIOS:
		return "Legacy", nil
	case qemu.UEFI:
		return "UEFI", nil
	}
	return "", fmt.Errorf("bmcsim: firmware %q: want bios or uefi", firmware)
}

// URL is the service's address as Ironic's redfish_address takes it.
func (b *RedfishBMC) URL() string { return "http://" + b.conf.Addr }

// Close powers the machine off and stops the service; the downloaded
// images stay in m.Dir/bmc with the test's other files.
func (b *RedfishBMC) Close() {
	b.cancel()
	if b.srv != nil {
		_ = b.srv.Close()
	}
	b.mu.Lock()
	b.powerOffLocked("the test's end")
	b.mu.Unlock()
}

// BootOverride is the boot source override: target, enabled (Disabled,
// Once, Continuous) and mode (Legacy, UEFI).
func (b *RedfishBMC) BootOverride() (target, enabled, mode string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.target, b.enabled, b.mode
}

// Media is the URL of the image inserted in virtual media device dev and
// the file it was downloaded to; "" when none is inserted.
func (b *RedfishBMC) Media(dev string) (image, file string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.media[dev]; m != nil && m.inserted {
		return m.image, m.file
	}
	return "", ""
}

// bootMachineLocked is the machine a power-on starts under the current
// boot override, and how the events list names that boot.
func (b *RedfishBMC) bootMachineLocked() (qemu.Machine, string, error) {
	m := b.machine
	m.Firmware = map[string]qemu.Firmware{"Legacy": qemu.BIOS, "UEFI": qemu.UEFI}[b.mode]
	target := b.target
	if b.enabled == "Disabled" {
		target = RedfishBootNone
	}
	desc := fmt.Sprintf("boot %s, %s, %s", target, b.enabled, b.mode)
	m.Kernel, m.Initrd, m.ISO, m.NetBoot, m.HTTPBoot, m.USBStick = "", "", "", false, false, ""
	if m.SecureBoot {
		m.SecureBootDisabled = !b.secureBootEnable
		if m.SecureBootDisabled {
			desc += ", Secure Boot disabled"
		}
	}
	switch target {
	case RedfishBootNone, RedfishBootHdd:
	case RedfishBootPxe, RedfishBootUefiHttp:
		if !slices.ContainsFunc(m.NICs, func(n qemu.NIC) bool { return n.PXE }) {
			return m, desc, fmt.Errorf("boot override %s: the machine has no NIC with PXE", target)
		}
		m.NetBoot = true
		m.HTTPBoot = target == RedfishBootUefiHttp
	case RedfishBootCd:
		cd := b.media[RedfishMediaCd]
		if !cd.inserted {
			return m, desc, errors.New("boot override Cd: no image is inserted in the virtual CD")
		}
		m.ISO = cd.file
		desc += " from " + cd.image
	default:
		return m, desc, fmt.Errorf("boot override target %q is not simulated", target)
	}
	// The stick is attached whatever the boot: Ironic's configuration
	// for the ramdisk (config_via_removable) is read from it, not booted.
	if usb := b.media[RedfishMediaUsbStick]; usb.inserted {
		m.USBStick = usb.file
		desc += ", USB stick " + usb.image
	}
	return m, desc, nil
}

func (b *RedfishBMC) powerOnLocked(how string) error {
	if b.onLocked() {
		return nil
	}
	m, desc, err := b.bootMachineLocked()
	if err != nil {
		return err
	}
	again := func() (qemu.Machine, error) {
		m, _, err := b.bootMachineLocked()
		return m, err
	}
	if err := b.startLocked(b.ctx, m, b.opts, b.start, fmt.Sprintf("power on by Redfish %s (%s)", how, desc), again); err != nil {
		return err
	}
	// The override was for this boot only.
	if b.enabled == "Once" {
		b.enabled = "Disabled"
	}
	return nil
}

// ServeHTTP answers Redfish requests.
func (b *RedfishBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	// The service root is open to all (DMTF DSP0266 13.3.1), and so is
	// the login.
	open := path == "/redfish" || path == redfishRoot || (path == redfishSessions && r.Method == http.MethodPost)
	if !open && !b.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="vmtest Redfish BMC"`)
		redfishError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "no valid session or basic credentials")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		doc, ok := b.resource(path)
		if !ok {
			redfishError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no resource at "+r.URL.Path)
			return
		}
		writeJSON(w, http.StatusOK, doc)
	case http.MethodPost, http.MethodPatch, http.MethodDelete:
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
		if err == nil && len(body) > 64<<10 {
			err = errors.New("request body longer than 64 KiB")
		}
		if err != nil {
			redfishError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", err.Error())
			return
		}
		b.change(w, r, path, body)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, PATCH, DELETE")
		redfishError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", r.Method+" is not allowed here")
	}
}

// authorized accepts the account's basic credentials or a session's token.
func (b *RedfishBMC) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, t := range b.sessions {
			if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
				return true
			}
		}
		return false
	}
	u, p, ok := r.BasicAuth()
	return ok && b.credentials(u, p)
}

func (b *RedfishBMC) credentials(user, password string) bool {
	return subtle.ConstantTimeCompare([]byte(user), []byte(b.conf.User)) == 1 &&
		subtle.ConstantTimeCompare([]byte(password), []byte(b.conf.Password)) == 1
}

func odataID(path string) map[string]any { return map[string]any{"@odata.id": path} }

func collection(path, typ, name string, members ...string) map[string]any {
	var ms []any
	for _, m := range members {
		ms = append(ms, odataID(m))
	}
	return map[string]any{"@odata.id": path, "@odata.type": "#" + typ + "." + typ, "Name": name,
		"Members": ms, "Members@odata.count": len(ms)}
}

var redfishResetTypes = []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle"}

// resource is the document at path.
func (b *RedfishBMC) resource(path string) (map[string]any, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.machine
	enabled := map[string]any{"State": "Enabled", "Health": "OK"}
	switch path {
	case "/redfish":
		return map[string]any{"v1": redfishRoot + "/"}, true
	case redfishRoot:
		return map[string]any{"@odata.id": redfishRoot + "/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
			"Id": "RootService", "Name": "vmtest Redfish BMC", "RedfishVersion": "1.8.0", "UUID": m.SMBIOS.UUID,
			"Systems": odataID(redfishRoot + "/Systems"), "Managers": odataID(redfishRoot + "/Managers"),
			"Chassis": odataID(redfishRoot + "/Chassis"), "SessionService": odataID(redfishRoot + "/SessionService"),
			"Links": map[string]any{"Sessions": odataID(redfishSessions)}}, true
	case redfishRoot + "/Systems":
		return collection(path, "ComputerSystemCollection", "Computer Systems", redfishSystem), true
	case redfishSystem:
		power := "Off"
		if b.onLocked() {
			power = "On"
		}
		sys := map[string]any{"@odata.id": path, "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem",
			"Id": "system", "Name": m.Name, "UUID": m.SMBIOS.UUID, "SystemType": "Physical",
			"Manufacturer": m.SMBIOS.SystemManufacturer, "Model": m.SMBIOS.SystemProduct,
			"SerialNumber": m.SMBIOS.SystemSerial, "SKU": m.SMBIOS.SKU, "BiosVersion": m.SMBIOS.BIOSVersion,
			"PowerState": power, "Status": enabled,
			"ProcessorSummary": map[string]any{"Count": m.CPUs},
			"MemorySummary":    map[string]any{"TotalSystemMemoryGiB": float64(m.MemoryMB) / 1024},
			"Boot": map[string]any{"BootSourceOverrideTarget": b.target, "BootSourceOverrideEnabled": b.enabled,
				"BootSourceOverrideMode":                           b.mode,
				"BootSourceOverrideTarget@Redfish.AllowableValues": []string{RedfishBootNone, RedfishBootPxe, RedfishBootHdd, RedfishBootCd, RedfishBootUefiHttp}},
			"Links": map[string]any{"ManagedBy": []any{odataID(redfishManager)}, "Chassis": []any{odataID(redfishChassis)}},
			"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
				"target": redfishSystem + "/Actions/ComputerSystem.Reset", "ResetType@Redfish.AllowableValues": redfishResetTypes}},
		}
		if m.SecureBoot {
			sys["SecureBoot"] = odataID(redfishSecure)
		}
		return sys, true
	case redfishSecure:
		if !m.SecureBoot {
			return nil, false
		}
		current := "Disabled"
		if b.onLocked() && b.vm.Machine.SecureBoot && !b.vm.Machine.SecureBootDisabled {
			current = "Enabled"
		}
		// OVMF_VARS_4M.ms.fd's keys stay enrolled whatever the setting:
		// a platform key makes it user mode.
		return map[string]any{"@odata.id": path, "@odata.type": "#SecureBoot.v1_1_0.SecureBoot",
			"Id": "SecureBoot", "Name": "UEFI Secure Boot", "SecureBootEnable": b.secureBootEnable,
			"SecureBootCurrentBoot": current, "SecureBootMode": "UserMode"}, true
	case redfishRoot + "/Managers":
		return collection(path, "ManagerCollection", "Managers", redfishManager), true
	case redfishManager:
		return map[string]any{"@odata.id": path, "@odata.type": "#Manager.v1_10_0.Manager",
			"Id": "bmc", "Name": "vmtest BMC", "ManagerType": "BMC", "FirmwareVersion": "1.0.0", "Status": enabled,
			"VirtualMedia": odataID(redfishManager + "/VirtualMedia"),
			"Links":        map[string]any{"ManagerForServers": []any{odataID(redfishSystem)}, "ManagerForChassis": []any{odataID(redfishChassis)}},
		}, true
	case redfishManager + "/VirtualMedia":
		return collection(path, "VirtualMediaCollection", "Virtual Media",
			redfishManager+"/VirtualMedia/"+RedfishMediaCd, redfishManager+"/VirtualMedia/"+RedfishMediaUsbStick), true
	case redfishRoot + "/Chassis":
		return collection(path, "ChassisCollection", "Chassis", redfishChassis), true
	case redfishChassis:
		return map[string]any{"@odata.id": path, "@odata.type": "#Chassis.v1_10_0.Chassis",
			"Id": "chassis", "Name": "vmtest chassis", "ChassisType": "RackMount", "Status": enabled,
			"Manufacturer": m.SMBIOS.ChassisManufacturer, "SerialNumber": m.SMBIOS.ChassisSerial,
			"Links": map[string]any{"ComputerSystems": []any{odataID(redfishSystem)}, "ManagedBy": []any{odataID(redfishManager)}},
		}, true
	case redfishRoot + "/SessionService":
		return map[string]any{"@odata.id": path, "@odata.type": "#SessionService.v1_1_8.SessionService",
			"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true, "SessionTimeout": 3600,
			"Sessions": odataID(redfishSessions)}, true
	case redfishSessions:
		var ids []string
		for _, id := range slices.Sorted(maps.Keys(b.sessions)) {
			ids = append(ids, redfishSessions+"/"+id)
		}
		return collection(path, "SessionCollection", "Sessions", ids...), true
	}
	if id, ok := strings.CutPrefix(path, redfishSessions+"/"); ok {
		if _, ok := b.sessions[id]; ok {
			return b.sessionDoc(id), true
		}
	}
	if id, ok := strings.CutPrefix(path, redfishManager+"/VirtualMedia/"); ok {
		if v := b.media[id]; v != nil {
			return v.doc(), true
		}
	}
	return nil, false
}

func (b *RedfishBMC) sessionDoc(id string) map[string]any {
	return map[string]any{"@odata.id": redfishSessions + "/" + id, "@odata.type": "#Session.v1_3_0.Session",
		"Id": id, "Name": "User Session", "UserName": b.conf.User}
}

func (v *redfishMedia) doc() map[string]any {
	path := redfishManager + "/VirtualMedia/" + v.id
	var image, imageName any // null when nothing is attached
	connected := "NotConnected"
	if v.image != "" {
		image, imageName, connected = v.image, imageNameOf(v.image), "URI"
	}
	d := map[string]any{"@odata.id": path, "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia",
		"Id": v.id, "Name": v.name, "MediaTypes": v.types, "Image": image, "ImageName": imageName,
		"Inserted": v.inserted, "WriteProtected": v.writeProtected, "ConnectedVia": connected,
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": path + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": path + "/Actions/VirtualMedia.EjectMedia"},
		}}
	if v.transferMethod != "" {
		d["TransferMethod"] = v.transferMethod
	}
	return d
}

func imageNameOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Path != "" {
		return filepath.Base(p.Path)
	}
	return u
}

// change carries out a POST, PATCH or DELETE with its (bounded) body.
func (b *RedfishBMC) change(w http.ResponseWriter, r *http.Request, path string, body []byte) {
	bad := func(err error) {
		redfishError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", err.Error())
	}
	switch {
	case r.Method == http.MethodPost && path == redfishSessions:
		user, password, err := parseSessionCreate(body)
		if err != nil {
			bad(err)
			return
		}
		if !b.credentials(user, password) {
			redfishError(w, http.StatusUnauthorized, "Base.1.8.InsufficientPrivilege", "wrong user name or password")
			return
		}
		tok := make([]byte, 16)
		_, _ = rand.Read(tok)
		b.mu.Lock()
		b.nextSession++
		id := fmt.Sprint(b.nextSession)
		b.sessions[id] = hex.EncodeToString(tok)
		doc := b.sessionDoc(id)
		b.mu.Unlock()
		w.Header().Set("X-Auth-Token", hex.EncodeToString(tok))
		w.Header().Set("Location", redfishSessions+"/"+id)
		writeJSON(w, http.StatusCreated, doc)
	case r.Method == http.MethodDelete && strings.HasPrefix(path, redfishSessions+"/"):
		id := strings.TrimPrefix(path, redfishSessions+"/")
		b.mu.Lock()
		_, ok := b.sessions[id]
		delete(b.sessions, id)
		b.mu.Unlock()
		if !ok {
			redfishError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no session "+id)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPatch && path == redfishSystem:
		p, err := parseBootPatch(body)
		if err != nil {
			bad(err)
			return
		}
		b.mu.Lock()
		var changed []string
		if p.target != "" {
			b.target = p.target
			changed = append(changed, "target "+p.target)
		}
		if p.enabled != "" {
			b.enabled = p.enabled
			changed = append(changed, "enabled "+p.enabled)
		}
		if p.mode != "" {
			b.mode = p.mode
			changed = append(changed, "mode "+p.mode)
		}
		b.events = append(b.events, "boot override "+strings.Join(changed, ", "))
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPatch && path == redfishSecure && b.machine.SecureBoot:
		on, err := parseSecureBootPatch(body)
		if err != nil {
			bad(err)
			return
		}
		b.mu.Lock()
		if on && b.mode != "UEFI" {
			b.mu.Unlock()
			redfishError(w, http.StatusBadRequest, "Base.1.8.PropertyValueConflict", "SecureBootEnable: Secure Boot needs boot mode UEFI, not "+b.mode)
			return
		}
		b.secureBootEnable = on
		b.events = append(b.events, fmt.Sprintf("SecureBootEnable %v", on))
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && path == redfishSystem+"/Actions/ComputerSystem.Reset":
		reset, err := parseReset(body)
		if err != nil {
			bad(err)
			return
		}
		if err := b.reset(reset); err != nil {
			redfishError(w, http.StatusInternalServerError, "Base.1.8.GeneralError", fmt.Sprintf("ResetType %s: %v", reset, err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && strings.HasPrefix(path, redfishManager+"/VirtualMedia/"):
		dev, action, _ := strings.Cut(strings.TrimPrefix(path, redfishManager+"/VirtualMedia/"), "/Actions/")
		b.mu.Lock()
		v := b.media[dev]
		b.mu.Unlock()
		if v == nil || (action != "VirtualMedia.InsertMedia" && action != "VirtualMedia.EjectMedia") {
			redfishError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no action at "+r.URL.Path)
			return
		}
		if action == "VirtualMedia.EjectMedia" {
			// sushy posts no body, or {} for BMCs that want one.
			if len(bytes.TrimSpace(body)) > 0 {
				if err := parseEmptyObject(body); err != nil {
					bad(fmt.Errorf("EjectMedia takes no parameters: %w", err))
					return
				}
			}
			b.mu.Lock()
			v.image, v.file, v.inserted, v.transferMethod = "", "", false, ""
			b.events = append(b.events, "ejected "+dev)
			b.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		ins, err := parseInsertMedia(body)
		if err != nil {
			bad(err)
			return
		}
		file, err := b.download(r.Context(), dev, ins)
		if err != nil {
			redfishError(w, http.StatusBadRequest, "Base.1.8.ResourceAtUriUnauthorized", fmt.Sprintf("InsertMedia %s: %v", dev, err))
			return
		}
		b.mu.Lock()
		v.image, v.file, v.inserted, v.writeProtected, v.transferMethod = ins.image, file, ins.inserted, ins.writeProtected, ins.transferMethod
		b.events = append(b.events, fmt.Sprintf("inserted %s into %s", ins.image, dev))
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		redfishError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", r.Method+" "+r.URL.Path+" is not supported")
	}
}

// reset carries out a ComputerSystem.Reset. There is no ACPI button from
// here: the graceful types are the forced ones.
func (b *RedfishBMC) reset(t string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	how := "ResetType " + t
	switch t {
	case "On", "ForceOn":
		return b.powerOnLocked(how)
	case "ForceOff", "GracefulShutdown":
		b.powerOffLocked("Redfish " + how)
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		// A restart reads the boot override again, which QEMU's own reset
		// would not.
		b.powerOffLocked("Redfish " + how)
		return b.powerOnLocked(how)
	default:
		return fmt.Errorf("not simulated")
	}
	return nil
}

// download fetches an inserted image into the machine's directory. The
// request of Ironic waits for it, so a URL that fails fails InsertMedia.
func (b *RedfishBMC) download(ctx context.Context, dev string, ins insertMedia) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ins.image, nil)
	if err != nil {
		return "", err
	}
	if ins.user != "" || ins.password != "" {
		req.SetBasicAuth(ins.user, ins.password)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", ins.image, resp.Status)
	}
	// A new file each time: a QEMU still reading the previous image keeps
	// its own.
	dir := filepath.Join(b.machine.Dir, "bmc")
	f, err := os.CreateTemp(dir, "media-"+dev+"-*.img")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("GET %s: %w", ins.image, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func writeJSON(w http.ResponseWriter, code int, doc any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(doc)
}

// redfishError writes Redfish's error envelope (DSP0266 9.6.2).
func redfishError(w http.ResponseWriter, code int, id, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": id, "message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}}}})
}

// bootPatch is what a PATCH of the system changes: the boot source
// override, each part optional.
type bootPatch struct{ target, enabled, mode string }

// decodeObject decodes a JSON object whose keys must all be in known.
func decodeObject(body []byte, where string, known ...string) (map[string]json.RawMessage, error) {
	var o map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&o); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %w", where, err)
	}
	if o == nil {
		return nil, fmt.Errorf("%s: not a JSON object: null", where)
	}
	if d.More() {
		return nil, fmt.Errorf("%s: data after the JSON object", where)
	}
	for k := range o {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%s: property %q is not supported (want %s)", where, k, strings.Join(known, ", "))
		}
	}
	return o, nil
}

// stringIn decodes o[key], when present, as one of the allowed strings.
func stringIn(o map[string]json.RawMessage, where, key string, allowed ...string) (string, error) {
	raw, ok := o[key]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s.%s: want a string: %w", where, key, err)
	}
	if allowed != nil && !slices.Contains(allowed, s) {
		return "", fmt.Errorf("%s.%s: %q is not one of %s", where, key, s, strings.Join(allowed, ", "))
	}
	return s, nil
}

func boolOf(o map[string]json.RawMessage, where, key string, def bool) (bool, error) {
	raw, ok := o[key]
	if !ok {
		return def, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, fmt.Errorf("%s.%s: want true or false: %w", where, key, err)
	}
	return v, nil
}

// parseBootPatch reads a PATCH of the system: {"Boot": {...}} with the
// override's target, enabled and mode, as sushy's set_system_boot_options
// sends them.
func parseBootPatch(body []byte) (bootPatch, error) {
	var p bootPatch
	o, err := decodeObject(body, "ComputerSystem", "Boot")
	if err != nil {
		return p, err
	}
	raw, ok := o["Boot"]
	if !ok {
		return p, errors.New("nothing to change in ComputerSystem (want Boot)")
	}
	boot, err := decodeObject(raw, "Boot", "BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode")
	if err != nil {
		return p, err
	}
	if p.target, err = stringIn(boot, "Boot", "BootSourceOverrideTarget", RedfishBootNone, RedfishBootPxe, RedfishBootHdd, RedfishBootCd, RedfishBootUefiHttp); err != nil {
		return p, err
	}
	if p.enabled, err = stringIn(boot, "Boot", "BootSourceOverrideEnabled", "Disabled", "Once", "Continuous"); err != nil {
		return p, err
	}
	if p.mode, err = stringIn(boot, "Boot", "BootSourceOverrideMode", "Legacy", "UEFI"); err != nil {
		return p, err
	}
	if p == (bootPatch{}) {
		return p, errors.New("nothing to change in Boot")
	}
	return p, nil
}

// parseSecureBootPatch reads a PATCH of the SecureBoot resource:
// {"SecureBootEnable": true or false}, the one property a client sets.
func parseSecureBootPatch(body []byte) (bool, error) {
	o, err := decodeObject(body, "SecureBoot", "SecureBootEnable")
	if err != nil {
		return false, err
	}
	if _, ok := o["SecureBootEnable"]; !ok {
		return false, errors.New("nothing to change in SecureBoot (want SecureBootEnable)")
	}
	return boolOf(o, "SecureBoot", "SecureBootEnable", false)
}

// parseReset reads ComputerSystem.Reset's parameters: {"ResetType": ...}.
func parseReset(body []byte) (string, error) {
	o, err := decodeObject(body, "ComputerSystem.Reset", "ResetType")
	if err != nil {
		return "", err
	}
	t, err := stringIn(o, "ComputerSystem.Reset", "ResetType", redfishResetTypes...)
	if err == nil && t == "" {
		err = errors.New("no ResetType in ComputerSystem.Reset")
	}
	return t, err
}

// insertMedia is VirtualMedia.InsertMedia's parameters.
type insertMedia struct {
	image                    string
	inserted, writeProtected bool
	user, password           string
	transferMethod           string
}

// parseInsertMedia reads VirtualMedia.InsertMedia's parameters: the image
// URL (http or https, as the BMC downloads it), and the optional ones
// sushy may send.
func parseInsertMedia(body []byte) (insertMedia, error) {
	const where = "VirtualMedia.InsertMedia"
	var in insertMedia
	o, err := decodeObject(body, where, "Image", "Inserted", "WriteProtected", "UserName", "Password", "TransferMethod", "TransferProtocolType")
	if err != nil {
		return in, err
	}
	if in.image, err = stringIn(o, where, "Image"); err != nil {
		return in, err
	}
	u, err := url.Parse(in.image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return in, fmt.Errorf("%s.Image: %q is not an http or https URL", where, in.image)
	}
	if in.inserted, err = boolOf(o, where, "Inserted", true); err != nil {
		return in, err
	}
	if in.writeProtected, err = boolOf(o, where, "WriteProtected", true); err != nil {
		return in, err
	}
	if in.user, err = stringIn(o, where, "UserName"); err != nil {
		return in, err
	}
	if in.password, err = stringIn(o, where, "Password"); err != nil {
		return in, err
	}
	// Both methods end the same here: the image is downloaded whole
	// before the action answers.
	if in.transferMethod, err = stringIn(o, where, "TransferMethod", "Stream", "Upload"); err != nil {
		return in, err
	}
	proto, err := stringIn(o, where, "TransferProtocolType", "HTTP", "HTTPS")
	if err != nil {
		return in, err
	}
	if proto != "" && !strings.EqualFold(proto, u.Scheme) {
		return in, fmt.Errorf("%s: TransferProtocolType %s does not match the image URL %s", where, proto, in.image)
	}
	return in, nil
}

// parseEmptyObject accepts {} only.
func parseEmptyObject(body []byte) error {
	_, err := decodeObject(body, "body")
	return err
}

// parseSessionCreate reads a login: {"UserName": ..., "Password": ...}.
func parseSessionCreate(body []byte) (user, password string, err error) {
	const where = "Session"
	o, err := decodeObject(body, where, "UserName", "Password")
	if err != nil {
		return "", "", err
	}
	if user, err = stringIn(o, where, "UserName"); err != nil {
		return "", "", err
	}
	if password, err = stringIn(o, where, "Password"); err != nil {
		return "", "", err
	}
	if user == "" || password == "" {
		return "", "", errors.New("a Session needs UserName and Password")
	}
	return user, password, nil
}

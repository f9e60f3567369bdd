package bmcsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// redfishBed is a RedfishBMC behind httptest, whose power-ons start a
// sleep(1) instead of QEMU, and an image server for InsertMedia.
type redfishBed struct {
	t      *testing.T
	bmc    *RedfishBMC
	srv    *httptest.Server
	images *httptest.Server
	mu     sync.Mutex
	booted []qemu.Machine // what each power-on was asked to boot
	cmds   []*exec.Cmd    // the stand-in QEMUs, in order
}

const rfUser, rfPassword = "admin", "redfish-s3cret"

func newRedfishBed(t *testing.T, firmware qemu.Firmware) *redfishBed {
	t.Helper()
	return newRedfishBedFor(t, qemu.DefaultMachine(firmware))
}

// newRedfishBedFor is newRedfishBed for machine m.
func newRedfishBedFor(t *testing.T, m qemu.Machine) *redfishBed {
	t.Helper()
	m.Dir = t.TempDir()
	bmc, err := newRedfishBMC(t.Context(), m, qemu.Options{}, RedfishConfig{Addr: "unused", User: rfUser, Password: rfPassword})
	if err != nil {
		t.Fatal(err)
	}
	b := &redfishBed{t: t, bmc: bmc}
	bmc.start = func(ctx context.Context, m qemu.Machine, _ qemu.Options) (*qemu.VM, error) {
		// A process that stands for QEMU: killed like one, and it exits
		// when the "guest" powers off.
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		vm := qemu.StandIn(m, cmd)
		b.mu.Lock()
		b.booted = append(b.booted, m)
		b.cmds = append(b.cmds, cmd)
		b.mu.Unlock()
		return vm, nil
	}
	b.srv = httptest.NewServer(bmc)
	b.images = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing.iso" {
			http.NotFound(w, r)
			return
		}
		if u, p, ok := r.BasicAuth(); ok && (u != "img" || p != "pw") {
			http.Error(w, "wrong image credentials", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ISO of "+r.URL.Path)
	}))
	t.Cleanup(func() { b.srv.Close(); b.images.Close(); bmc.Close() })
	return b
}

// do sends a request with the account's basic credentials (auth "") or
// none ("none") or a session token, and decodes the JSON reply, if any.
func (b *redfishBed) do(method, path, auth, body string) (int, map[string]any, http.Header) {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	switch auth {
	case "":
		req.SetBasicAuth(rfUser, rfPassword)
	case "none":
	default:
		req.Header.Set("X-Auth-Token", auth)
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			b.t.Fatalf("%s %s: reply is not JSON: %v: %q", method, path, err, raw)
		}
	}
	return resp.StatusCode, doc, resp.Header
}

func (b *redfishBed) want(method, path, body string, code int) map[string]any {
	b.t.Helper()
	got, doc, _ := b.do(method, path, "", body)
	if got != code {
		b.t.Fatalf("%s %s %s: status %d, want %d: %v", method, path, body, got, code, doc)
	}
	return doc
}

func field(doc map[string]any, path ...string) any {
	var v any = doc
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func TestRedfishAuthentication(t *testing.T) {
	b := newRedfishBed(t, "bios")
	for _, p := range []string{"/redfish", "/redfish/v1", "/redfish/v1/"} {
		if code, _, _ := b.do("GET", p, "none", ""); code != http.StatusOK {
			t.Errorf("GET %s without credentials: %d, want 200 (the service root is open)", p, code)
		}
	}
	if code, doc, h := b.do("GET", redfishSystem, "none", ""); code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Errorf("GET the system without credentials: %d %v, want 401 with WWW-Authenticate", code, doc)
	} else if field(doc, "error", "code") != "Base.1.8.NoValidSession" {
		t.Errorf("401 without Redfish's error envelope: %v", doc)
	}
	if code, _, _ := b.do("GET", redfishSystem, "bogus-token", ""); code != http.StatusUnauthorized {
		t.Errorf("GET with an unknown session token: %d, want 401", code)
	}
	if code, _, _ := b.do("POST", redfishSessions, "none", `{"UserName": "admin", "Password": "wrong"}`); code != http.StatusUnauthorized {
		t.Errorf("login with a wrong password: %d, want 401", code)
	}
	code, doc, h := b.do("POST", redfishSessions, "none", `{"UserName": "admin", "Password": "redfish-s3cret"}`)
	tok, loc := h.Get("X-Auth-Token"), h.Get("Location")
	if code != http.StatusCreated || tok == "" || loc != redfishSessions+"/1" || doc["Id"] != "1" {
		t.Fatalf("login: %d %v token %q location %q; want 201, a token, the session's URI", code, doc, tok, loc)
	}
	if code, doc, _ := b.do("GET", redfishSystem, tok, ""); code != http.StatusOK || doc["Id"] != "system" {
		t.Errorf("GET with the session token: %d %v", code, doc)
	}
	if code, doc, _ := b.do("GET", redfishSessions, tok, ""); code != http.StatusOK || field(doc, "Members@odata.count") != 1.0 {
		t.Errorf("sessions: %d %v, want one", code, doc)
	}
	if code, _, _ := b.do("DELETE", loc, tok, ""); code != http.StatusNoContent {
		t.Errorf("logout: %d, want 204", code)
	}
	if code, _, _ := b.do("GET", redfishSystem, tok, ""); code != http.StatusUnauthorized {
		t.Errorf("GET with the token after logout: %d, want 401", code)
	}
}

// TestRedfishResources follows the links sushy follows, from the service
// root to the system, its manager's virtual media and its chassis.
func TestRedfishResources(t *testing.T) {
	b := newRedfishBed(t, "uefi")
	root := b.want("GET", "/redfish/v1/", "", 200)
	sysColl := b.want("GET", field(root, "Systems", "@odata.id").(string), "", 200)
	members, _ := sysColl["Members"].([]any)
	if len(members) != 1 {
		t.Fatalf("systems: %v", sysColl)
	}
	sys := b.want("GET", field(members[0].(map[string]any), "@odata.id").(string), "", 200)
	m := qemu.DefaultMachine(qemu.UEFI)
	for k, want := range map[string]any{"PowerState": "Off", "UUID": m.SMBIOS.UUID, "Manufacturer": m.SMBIOS.SystemManufacturer,
		"SerialNumber": m.SMBIOS.SystemSerial} {
		if sys[k] != want {
			t.Errorf("system %s = %v, want %v", k, sys[k], want)
		}
	}
	for k, want := range map[string]any{"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideMode": "UEFI"} {
		if got := field(sys, "Boot", k); got != want {
			t.Errorf("system Boot.%s = %v, want %v", k, got, want)
		}
	}
	reset := field(sys, "Actions", "#ComputerSystem.Reset", "target")
	if reset != redfishSystem+"/Actions/ComputerSystem.Reset" {
		t.Errorf("reset target %v", reset)
	}
	managedBy, _ := field(sys, "Links", "ManagedBy").([]any)
	if len(managedBy) != 1 {
		t.Fatalf("ManagedBy: %v", field(sys, "Links"))
	}
	mgr := b.want("GET", field(managedBy[0].(map[string]any), "@odata.id").(string), "", 200)
	if mgr["ManagerType"] != "BMC" {
		t.Errorf("manager: %v", mgr)
	}
	vmColl := b.want("GET", field(mgr, "VirtualMedia", "@odata.id").(string), "", 200)
	types := map[string]any{}
	for _, mem := range vmColl["Members"].([]any) {
		v := b.want("GET", field(mem.(map[string]any), "@odata.id").(string), "", 200)
		types[v["Id"].(string)] = v["MediaTypes"]
		if v["Inserted"] != false || v["Image"] != nil {
			t.Errorf("virtual media %s starts with something inserted: %v", v["Id"], v)
		}
		if field(v, "Actions", "#VirtualMedia.InsertMedia", "target") == nil || field(v, "Actions", "#VirtualMedia.EjectMedia", "target") == nil {
			t.Errorf("virtual media %s lacks its actions: %v", v["Id"], v)
		}
	}
	if len(types) != 2 || len(types["Cd"].([]any)) != 2 || types["UsbStick"].([]any)[0] != "USBStick" {
		t.Errorf("virtual media types: %v", types)
	}
	chassis, _ := field(sys, "Links", "Chassis").([]any)
	if c := b.want("GET", field(chassis[0].(map[string]any), "@odata.id").(string), "", 200); c["SerialNumber"] != m.SMBIOS.ChassisSerial {
		t.Errorf("chassis: %v", c)
	}
	if code, _, _ := b.do("GET", redfishRoot+"/Systems/other", "", ""); code != http.StatusNotFound {
		t.Errorf("an unknown system: %d, want 404", code)
	}
	if code, _, _ := b.do("PUT", redfishSystem, "", "{}"); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d, want 405", code)
	}
}

// TestRedfishVirtualMediaBoot is what Ironic's redfish-virtual-media does
// for a ramdisk boot and then a disk boot: insert the ISO, set the
// override to Cd once, power on; then eject, boot the disk for good.
func TestRedfishVirtualMediaBoot(t *testing.T) {
	b := newRedfishBed(t, "bios")
	cd := redfishManager + "/VirtualMedia/Cd"
	b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}`, 204)
	// Nothing inserted: the power-on fails and says why.
	if code, doc, _ := b.do("POST", redfishSystem+"/Actions/ComputerSystem.Reset", "", `{"ResetType": "On"}`); code != 500 ||
		!strings.Contains(field(doc, "error", "message").(string), "no image is inserted") {
		t.Errorf("power-on from an empty CD: %d %v", code, doc)
	}
	if code, doc, _ := b.do("POST", cd+"/Actions/VirtualMedia.InsertMedia", "", `{"Image": "`+b.images.URL+`/missing.iso"}`); code != 400 ||
		!strings.Contains(field(doc, "error", "message").(string), "404") {
		t.Errorf("inserting a missing image: %d %v, want 400 naming the 404", code, doc)
	}
	img := b.images.URL + "/redfish/boot-node.iso"
	b.want("POST", cd+"/Actions/VirtualMedia.InsertMedia", `{"Image": "`+img+`", "TransferMethod": "Upload"}`, 204)
	v := b.want("GET", cd, "", 200)
	if v["Image"] != img || v["Inserted"] != true || v["ImageName"] != "boot-node.iso" || v["TransferMethod"] != "Upload" {
		t.Errorf("virtual CD after InsertMedia: %v", v)
	}
	gotImg, file := b.bmc.Media(RedfishMediaCd)
	if content, err := os.ReadFile(file); gotImg != img || err != nil || string(content) != "ISO of /redfish/boot-node.iso" {
		t.Errorf("downloaded image %s: %q, %v", file, content, err)
	}
	if filepath.Dir(file) != filepath.Join(b.bmc.machine.Dir, "bmc") {
		t.Errorf("image downloaded to %s, not the machine's bmc directory", file)
	}
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	if sys := b.want("GET", redfishSystem, "", 200); sys["PowerState"] != "On" || field(sys, "Boot", "BootSourceOverrideEnabled") != "Disabled" {
		t.Errorf("after the power-on: power %v, override %v; want On, and the Once override used up", sys["PowerState"], field(sys, "Boot"))
	}
	if m := b.booted[0]; m.ISO != file || m.Kernel != "" || m.NetBoot || m.Firmware != "bios" {
		t.Errorf("the Cd boot started ISO %q kernel %q netboot %v firmware %s; want the downloaded image under bios", m.ISO, m.Kernel, m.NetBoot, m.Firmware)
	}
	// On when on: nothing happens, as on a BMC.
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	if b.bmc.Boots() != 1 {
		t.Errorf("a second On started the machine again: %d power-ons", b.bmc.Boots())
	}
	// The guest powers itself off.
	b.mu.Lock()
	last := b.cmds[len(b.cmds)-1]
	b.mu.Unlock()
	_ = syscall.Kill(-last.Process.Pid, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.bmc.WaitOff(ctx); err != nil {
		t.Fatal(err)
	}
	b.want("POST", cd+"/Actions/VirtualMedia.EjectMedia", "", 204)
	b.want("POST", cd+"/Actions/VirtualMedia.EjectMedia", "{}", 204)
	if v := b.want("GET", cd, "", 200); v["Image"] != nil || v["Inserted"] != false {
		t.Errorf("virtual CD after EjectMedia: %v", v)
	}
	b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideMode": "UEFI"}}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceRestart"}`, 204)
	if b.bmc.Boots() != 3 {
		t.Fatalf("%d power-ons, want 3; events %q", b.bmc.Boots(), b.bmc.Events())
	}
	for _, m := range b.booted[1:] {
		if m.ISO != "" || m.Kernel != "" || m.NetBoot || m.Firmware != "uefi" {
			t.Errorf("an Hdd boot in UEFI mode started ISO %q kernel %q netboot %v firmware %s", m.ISO, m.Kernel, m.NetBoot, m.Firmware)
		}
	}
	if target, enabled, mode := b.bmc.BootOverride(); target != "Hdd" || enabled != "Continuous" || mode != "UEFI" {
		t.Errorf("override after two boots: %s %s %s; a Continuous one stays", target, enabled, mode)
	}
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceOff"}`, 204)
	if sys := b.want("GET", redfishSystem, "", 200); sys["PowerState"] != "Off" || b.bmc.On() {
		t.Errorf("after ForceOff: %v", sys["PowerState"])
	}
	// Pxe and UefiHttp on a machine with no PXE NIC are refused.
	for _, target := range []string{"Pxe", "UefiHttp"} {
		b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideTarget": "`+target+`"}}`, 204)
		if code, _, _ := b.do("POST", redfishSystem+"/Actions/ComputerSystem.Reset", "", `{"ResetType": "On"}`); code != 500 {
			t.Errorf("a %s boot without a PXE NIC: %d, want 500", target, code)
		}
	}
	events := strings.Join(b.bmc.Events(), "; ")
	for _, e := range []string{"inserted " + img + " into Cd", "power on by Redfish ResetType On (boot Cd, Once, Legacy from " + img + ")",
		"powered off by the guest", "ejected Cd", "power off by Redfish ResetType ForceRestart", "power on by Redfish ResetType ForceRestart (boot Hdd, Continuous, UEFI)"} {
		if !strings.Contains(events, e) {
			t.Errorf("events lack %q: %s", e, events)
		}
	}
}

func TestRedfishInsertMediaCredentials(t *testing.T) {
	b := newRedfishBed(t, "bios")
	usb := redfishManager + "/VirtualMedia/UsbStick/Actions/VirtualMedia.InsertMedia"
	if code, _, _ := b.do("POST", usb, "", `{"Image": "`+b.images.URL+`/c.img", "UserName": "img", "Password": "bad"}`); code != 400 {
		t.Errorf("wrong image credentials: %d, want 400", code)
	}
	b.want("POST", usb, `{"Image": "`+b.images.URL+`/c.img", "UserName": "img", "Password": "pw", "Inserted": false, "WriteProtected": false}`, 204)
	v := b.want("GET", redfishManager+"/VirtualMedia/UsbStick", "", 200)
	if v["Inserted"] != false || v["WriteProtected"] != false || v["Image"] != b.images.URL+"/c.img" {
		t.Errorf("USB stick after InsertMedia with Inserted false: %v", v)
	}
}

// TestRedfishUefiHttpBoot: the override UefiHttp (Ironic's http boot
// interface) boots the machine from its NICs with PXE, as Pxe does, with
// the firmware's PXE clients off; a Pxe boot after it has them on.
func TestRedfishUefiHttpBoot(t *testing.T) {
	m := qemu.DefaultMachine("uefi")
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:6d:3c:01", Backend: qemu.NICTap, PXE: true}}
	b := newRedfishBedFor(t, m)
	if v := b.want("GET", redfishSystem, "", 200); !slices.Contains(field(v, "Boot", "BootSourceOverrideTarget@Redfish.AllowableValues").([]any), any("UefiHttp")) {
		t.Errorf("UefiHttp is not among the allowed boot targets: %v", v["Boot"])
	}
	b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	if len(b.booted) != 1 || !b.booted[0].NetBoot || !b.booted[0].HTTPBoot || b.booted[0].ISO != "" || b.booted[0].Kernel != "" {
		t.Fatalf("a UefiHttp boot started %+v, want an HTTP network boot", b.booted)
	}
	if events := strings.Join(b.bmc.Events(), "; "); !strings.Contains(events, "(boot UefiHttp, Once, UEFI)") {
		t.Errorf("events do not name the UefiHttp boot: %s", events)
	}
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceOff"}`, 204)
	b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	if len(b.booted) != 2 || !b.booted[1].NetBoot || b.booted[1].HTTPBoot {
		t.Errorf("a Pxe boot after UefiHttp started %+v, want a PXE network boot", b.booted[1:])
	}
}

func TestParseRedfishBodies(t *testing.T) {
	for _, tc := range []struct {
		name, body, err string
		parse           func([]byte) error
	}{
		{"boot target", `{"Boot": {"BootSourceOverrideTarget": "Cd"}}`, "", parseBootPatchErr},
		{"boot all", `{"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideMode": "Legacy"}}`, "", parseBootPatchErr},
		{"boot unknown target", `{"Boot": {"BootSourceOverrideTarget": "Floppy"}}`, `"Floppy" is not one of`, parseBootPatchErr},
		{"boot bad enabled", `{"Boot": {"BootSourceOverrideEnabled": "Always"}}`, "BootSourceOverrideEnabled", parseBootPatchErr},
		{"boot not a string", `{"Boot": {"BootSourceOverrideMode": 1}}`, "want a string", parseBootPatchErr},
		{"boot empty", `{"Boot": {}}`, "nothing to change", parseBootPatchErr},
		{"system other property", `{"AssetTag": "x"}`, `property "AssetTag" is not supported`, parseBootPatchErr},
		{"system nothing", `{}`, "nothing to change", parseBootPatchErr},
		{"boot unknown key", `{"Boot": {"UefiTargetBootSourceOverride": "x"}}`, "not supported", parseBootPatchErr},
		{"not JSON", `Boot=Cd`, "not a JSON object", parseBootPatchErr},
		{"null", `null`, "null", parseBootPatchErr},
		{"trailing", `{"Boot": {"BootSourceOverrideTarget": "Cd"}} {}`, "data after", parseBootPatchErr},
		{"reset", `{"ResetType": "ForceOff"}`, "", parseResetErr},
		{"reset nmi", `{"ResetType": "Nmi"}`, "is not one of", parseResetErr},
		{"reset missing", `{}`, "no ResetType", parseResetErr},
		{"insert", `{"Image": "http://10.99.0.1:8088/redfish/boot.iso"}`, "", parseInsertErr},
		{"insert https with protocol", `{"Image": "https://h/b.iso", "TransferProtocolType": "HTTPS"}`, "", parseInsertErr},
		{"insert protocol mismatch", `{"Image": "http://h/b.iso", "TransferProtocolType": "HTTPS"}`, "does not match", parseInsertErr},
		{"insert nfs", `{"Image": "nfs://h/b.iso"}`, "not an http or https URL", parseInsertErr},
		{"insert no image", `{"Inserted": true}`, "not an http or https URL", parseInsertErr},
		{"insert bad bool", `{"Image": "http://h/b.iso", "Inserted": "yes"}`, "want true or false", parseInsertErr},
		{"insert bad method", `{"Image": "http://h/b.iso", "TransferMethod": "Push"}`, "is not one of", parseInsertErr},
		{"session", `{"UserName": "a", "Password": "b"}`, "", parseSessionErr},
		{"session no password", `{"UserName": "a"}`, "needs UserName and Password", parseSessionErr},
		{"session extra", `{"UserName": "a", "Password": "b", "Oem": {}}`, "not supported", parseSessionErr},
		{"empty object", `{}`, "", parseEmptyObject},
		{"eject with a parameter", `{"Image": "x"}`, "not supported", parseEmptyObject},
	} {
		err := tc.parse([]byte(tc.body))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %s: error %v, want %q", tc.name, tc.body, err, tc.err)
		}
	}
}

func parseBootPatchErr(b []byte) error { _, err := parseBootPatch(b); return err }
func parseResetErr(b []byte) error     { _, err := parseReset(b); return err }
func parseInsertErr(b []byte) error    { _, err := parseInsertMedia(b); return err }
func parseSessionErr(b []byte) error   { _, _, err := parseSessionCreate(b); return err }

// FuzzRedfishBodies feeds every parser of a request body the same bytes:
// none may panic, and what they accept keeps to the simulated values.
func FuzzRedfishBodies(f *testing.F) {
	for _, s := range []string{`{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}`,
		`{"ResetType": "On"}`, `{"Image": "http://10.99.0.1:8088/redfish/boot.iso", "Inserted": true, "WriteProtected": true}`,
		`{"UserName": "admin", "Password": "x"}`, `{}`, `null`, `[]`, `{"Boot": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if p, err := parseBootPatch(body); err == nil {
			if p == (bootPatch{}) || (p.target != "" && !strings.Contains("None Pxe Hdd Cd", p.target)) {
				t.Errorf("%q: accepted %+v", body, p)
			}
		}
		if r, err := parseReset(body); err == nil && r == "" {
			t.Errorf("%q: accepted an empty ResetType", body)
		}
		if in, err := parseInsertMedia(body); err == nil && !strings.HasPrefix(in.image, "http") {
			t.Errorf("%q: accepted image %q", body, in.image)
		}
		if u, p, err := parseSessionCreate(body); err == nil && (u == "" || p == "") {
			t.Errorf("%q: accepted an empty login", body)
		}
		_ = parseEmptyObject(body)
	})
}

// sushyScript drives a Redfish service with python3-sushy as Ironic's
// redfish interfaces do (connection with each authentication, power,
// boot override, virtual media), printing what it read as JSON lines.
const sushyScript = `
import json, sys
import sushy
from sushy import auth
url, user, password, image = sys.argv[1:5]
out = lambda **kw: print(json.dumps(kw), flush=True)
for name, a in (("basic", auth.BasicAuth(user, password)), ("session", auth.SessionAuth(user, password))):
    conn = sushy.Sushy(url, auth=a)
    s = conn.get_system()
    out(auth=name, power=str(s.power_state.value), mode=str(s.boot.get("mode").value), vendor=s.manufacturer,
        allowed=sorted(v.value for v in s.get_allowed_system_boot_source_values()),
        resets=sorted(v.value for v in s.get_allowed_reset_system_values()))
s.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_CD, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
s.set_system_boot_options(mode=sushy.BOOT_SOURCE_MODE_BIOS)
media = {}
for m in s.managers:
    for v in m.virtual_media.get_members():
        media[v.identity] = sorted(t.value for t in v.media_types)
        if sushy.VIRTUAL_MEDIA_CD in v.media_types:
            v.eject_media()
            v.insert_media(image, inserted=True, write_protected=True)
            v.refresh()
            out(inserted=v.inserted, image=v.image)
out(media=media)
s.reset_system(sushy.RESET_ON)
s.refresh()
out(power=str(s.power_state.value), target=str(s.boot.get("target").value), enabled=str(s.boot.get("enabled").value))
s.reset_system(sushy.RESET_FORCE_OFF)
s.refresh()
out(power=str(s.power_state.value))
`

// TestRedfishWithSushy has Debian's python3-sushy, the library Ironic's
// redfish hardware type speaks through, drive the BMC: the oracle that the
// resources are the ones it reads.
func TestRedfishWithSushy(t *testing.T) {
	if err := exec.Command(debianPython, "-c", "import sushy").Run(); err != nil {
		t.Skipf("SKIPPED: needs /usr/bin/python3 with sushy (Debian package python3-sushy; in test.sh): %v", err)
	}
	b := newRedfishBed(t, "uefi")
	img := b.images.URL + "/redfish/boot.iso"
	out, err := exec.CommandContext(t.Context(), debianPython, "-c", sushyScript, b.srv.URL, rfUser, rfPassword, img).CombinedOutput()
	if err != nil {
		t.Fatalf("sushy against the BMC: %v\n%s", err, out)
	}
	got := string(out)
	t.Logf("sushy read:\n%s", got)
	for _, want := range []string{
		`{"auth": "basic", "power": "Off", "mode": "UEFI", "vendor": "Lab Systems", "allowed": ["Cd", "Hdd", "None", "Pxe", "UefiHttp"], "resets": ["ForceOff", "ForceOn", "ForceRestart", "GracefulRestart", "GracefulShutdown", "On", "PowerCycle"]}`,
		`{"auth": "session", "power": "Off"`,
		`{"inserted": true, "image": "` + img + `"}`,
		`{"media": {"Cd": ["CD", "DVD"], "UsbStick": ["USBStick"]}}`,
		`{"power": "On", "target": "Cd", "enabled": "Disabled"}`,
		`{"power": "Off"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sushy's view lacks %s", want)
		}
	}
	if len(b.booted) != 1 || b.booted[0].Firmware != "bios" || b.booted[0].ISO == "" {
		t.Errorf("sushy's power-on booted %+v; want one Legacy boot from the CD", b.booted)
	}
}

// debianPython is Debian's interpreter, whose dist-packages hold
// python3-sushy (a python3 earlier on PATH, pyenv's say, does not).
const debianPython = "/usr/bin/python3"

// TestRedfishUSBStickAttached is Ironic's config_via_removable: the
// parameters' image in the USB stick is attached to the Cd boot as a
// removable USB disk, and no longer once ejected.
func TestRedfishUSBStickAttached(t *testing.T) {
	b := newRedfishBed(t, "bios")
	usb := redfishManager + "/VirtualMedia/UsbStick"
	b.want("POST", usb+"/Actions/VirtualMedia.InsertMedia", `{"Image": "`+b.images.URL+`/redfish/image-node.img", "Inserted": true, "WriteProtected": true}`, 204)
	b.want("POST", redfishManager+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image": "`+b.images.URL+`/redfish/boot-node.iso"}`, 204)
	b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	_, stick := b.bmc.Media(RedfishMediaUsbStick)
	if m := b.booted[0]; m.USBStick != stick || stick == "" || m.ISO == "" {
		t.Errorf("the Cd boot attached USB stick %q (ISO %q), want %q", m.USBStick, m.ISO, stick)
	}
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceOff"}`, 204)
	b.want("POST", usb+"/Actions/VirtualMedia.EjectMedia", `{}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	if m := b.booted[len(b.booted)-1]; m.USBStick != "" {
		t.Errorf("a boot after the eject attached USB stick %q", m.USBStick)
	}
	if events := strings.Join(b.bmc.Events(), "; "); !strings.Contains(events, ", USB stick "+b.images.URL+"/redfish/image-node.img)") {
		t.Errorf("events do not name the stick: %s", events)
	}
}

// TestRedfishSecureBoot: a machine with Secure Boot firmware has the
// system's SecureBoot resource, as Ironic's redfish management reads it
// (SecureBootEnable, SecureBootCurrentBoot, SecureBootMode); a PATCH of
// SecureBootEnable is the firmware's setting at the next power-on, not
// the running boot's; enabling it in Legacy mode and other properties are
// refused; a machine without that firmware has no such resource.
func TestRedfishSecureBoot(t *testing.T) {
	m := qemu.DefaultMachine(qemu.UEFI)
	m.SecureBoot = true
	b := newRedfishBedFor(t, m)
	sys := b.want("GET", redfishSystem, "", 200)
	if link, _ := sys["SecureBoot"].(map[string]any); link["@odata.id"] != redfishSecure {
		t.Fatalf("the system links SecureBoot as %v, want %s", sys["SecureBoot"], redfishSecure)
	}
	if sb := b.want("GET", redfishSecure, "", 200); sb["SecureBootEnable"] != true || sb["SecureBootCurrentBoot"] != "Disabled" || sb["SecureBootMode"] != "UserMode" {
		t.Errorf("SecureBoot of a machine off with Secure Boot on: %v", sb)
	}
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, 204)
	if sb := b.want("GET", redfishSecure, "", 200); sb["SecureBootCurrentBoot"] != "Enabled" {
		t.Errorf("SecureBoot while a Secure Boot boot runs: %v", sb)
	}
	b.want("PATCH", redfishSecure, `{"SecureBootEnable": false}`, 204)
	if sb := b.want("GET", redfishSecure, "", 200); sb["SecureBootEnable"] != false || sb["SecureBootCurrentBoot"] != "Enabled" {
		t.Errorf("SecureBoot after disabling it, the same boot running: %v", sb)
	}
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceRestart"}`, 204)
	if sb := b.want("GET", redfishSecure, "", 200); sb["SecureBootCurrentBoot"] != "Disabled" {
		t.Errorf("SecureBoot after a restart with it disabled: %v", sb)
	}
	b.want("PATCH", redfishSecure, `{"SecureBootEnable": true}`, 204)
	b.want("POST", redfishSystem+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceRestart"}`, 204)
	b.mu.Lock()
	booted := slices.Clone(b.booted)
	b.mu.Unlock()
	if len(booted) != 3 {
		t.Fatalf("%d boots, want 3", len(booted))
	}
	for i, want := range []bool{false, true, false} {
		if m := booted[i]; !m.SecureBoot || m.SecureBootDisabled != want {
			t.Errorf("boot %d: SecureBoot %v, SecureBootDisabled %v; want true, %v", i+1, m.SecureBoot, m.SecureBootDisabled, want)
		}
	}
	for _, body := range []string{`{}`, `{"SecureBootEnable": "yes"}`, `{"SecureBootMode": "SetupMode"}`, `[]`} {
		if code, _, _ := b.do("PATCH", redfishSecure, "", body); code != 400 {
			t.Errorf("PATCH SecureBoot %s: %d, want 400", body, code)
		}
	}
	b.want("PATCH", redfishSystem, `{"Boot": {"BootSourceOverrideMode": "Legacy"}}`, 204)
	if code, _, _ := b.do("PATCH", redfishSecure, "", `{"SecureBootEnable": true}`); code != 400 {
		t.Errorf("enabling Secure Boot in Legacy mode: %d, want 400", code)
	}
	events := strings.Join(b.bmc.Events(), "; ")
	for _, e := range []string{"SecureBootEnable false", "(boot None, Disabled, UEFI, Secure Boot disabled)", "SecureBootEnable true"} {
		if !strings.Contains(events, e) {
			t.Errorf("events lack %q: %s", e, events)
		}
	}

	plain := newRedfishBed(t, qemu.UEFI)
	if sys := plain.want("GET", redfishSystem, "", 200); sys["SecureBoot"] != nil {
		t.Errorf("a machine without Secure Boot firmware links SecureBoot: %v", sys["SecureBoot"])
	}
	for _, method := range []string{"GET", "PATCH"} {
		if code, _, _ := plain.do(method, redfishSecure, "", `{"SecureBootEnable": true}`); code != 404 && code != 405 {
			t.Errorf("%s SecureBoot of a machine without Secure Boot firmware: %d, want 404", method, code)
		}
	}
}

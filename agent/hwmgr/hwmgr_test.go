package hwmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/ipaerror"
)

type fakeMgr struct {
	name, class string
	support     Support
	steps       []Step
	run         map[string]func() (any, error)
}

func (m *fakeMgr) Name() string                                    { return m.name }
func (m *fakeMgr) ClassName() string                               { return m.class }
func (m *fakeMgr) Version() string                                 { return "1.0" }
func (m *fakeMgr) EvaluateHardwareSupport(context.Context) Support { return m.support }
func (m *fakeMgr) DeploySteps(context.Context, map[string]any, []any) ([]Step, error) {
	return nil, nil
}
func (m *fakeMgr) CleanSteps(context.Context, map[string]any, []any) ([]Step, error) {
	return m.steps, nil
}
func (m *fakeMgr) ExecuteStep(_ context.Context, step string, _ Request) (any, error) {
	if f, ok := m.run[step]; ok {
		return f()
	}
	return nil, ErrNoSuchMethod
}

func ctors(ms ...*fakeMgr) []func() Manager {
	var out []func() Manager
	for _, m := range ms {
		out = append(out, func() Manager { return m })
	}
	return out
}

func TestDeduplicate(t *testing.T) {
	generic := &fakeMgr{name: "generic_hardware_manager", class: "GenericHardwareManager", support: SupportGeneric, steps: []Step{
		{Step: "erase_devices", Priority: 10, Interface: "deploy"},
		{Step: "erase_devices_metadata", Priority: 99, Interface: "deploy"},
		{Step: "shared", Priority: 50, Interface: "deploy"},
	}}
	vendor := &fakeMgr{name: "vendor", class: "VendorHardwareManager", support: SupportMainline, steps: []Step{
		{Step: "erase_devices", Priority: 5, Interface: "deploy"}, // higher support wins despite lower priority
		{Step: "firmware", Priority: 0, Interface: "management"},
	}}
	twinA := &fakeMgr{name: "a", class: "AManager", support: SupportGeneric, steps: []Step{{Step: "shared", Priority: 50, Interface: "deploy"}}}
	twinZ := &fakeMgr{name: "z", class: "ZManager", support: SupportGeneric, steps: []Step{{Step: "shared", Priority: 60, Interface: "deploy"}}}
	none := &fakeMgr{name: "none", class: "NoneManager", support: SupportNone, steps: []Step{{Step: "x"}}}
	s, err := Load(context.Background(), ctors(generic, vendor, twinA, twinZ, none), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.CleanSteps(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	want := `{"GenericHardwareManager":[{"step":"erase_devices_metadata","priority":99,"interface":"deploy","reboot_requested":false}],` +
		`"VendorHardwareManager":[{"step":"erase_devices","priority":5,"interface":"deploy","reboot_requested":false},{"step":"firmware","priority":0,"interface":"management","reboot_requested":false}],` +
		`"ZManager":[{"step":"shared","priority":60,"interface":"deploy","reboot_requested":false}]}`
	if string(b) != want {
		t.Errorf("steps\n got %s\nwant %s", b, want)
	}
	// Equal support and priority: the class name first in the alphabet.
	twinZ.steps[0].Priority = 50
	got, _ = s.CleanSteps(context.Background(), nil, nil)
	if _, ok := got["AManager"]; !ok {
		t.Errorf("tie not broken by class name: %v", got)
	}
	if v := s.Versions(); len(v) != 4 || v["none"] != "" {
		t.Errorf("versions %v: managers without support must not appear", v)
	}
	if s.Managers()[0].Name() != "vendor" {
		t.Errorf("most specific manager not first")
	}
}

func TestDispatchFallThrough(t *testing.T) {
	generic := &fakeMgr{name: "g", class: "G", support: SupportGeneric, run: map[string]func() (any, error){
		"erase": func() (any, error) { return "generic erase", nil },
	}}
	vendor := &fakeMgr{name: "v", class: "V", support: SupportMainline, run: map[string]func() (any, error){
		"erase": func() (any, error) { return nil, fmt.Errorf("not my disks: %w", ErrIncompatibleHardware) },
		"fail":  func() (any, error) { return nil, errors.New("broken") },
	}}
	s, _ := Load(context.Background(), ctors(generic, vendor), nil)
	if v, err := s.Dispatch(context.Background(), "erase", Request{}); err != nil || v != "generic erase" {
		t.Errorf("fall-through: %v %v", v, err)
	}
	if _, err := s.Dispatch(context.Background(), "fail", Request{}); err == nil || err.Error() != "broken" {
		t.Errorf("a real failure must not fall through: %v", err)
	}
	_, err := s.Dispatch(context.Background(), "nothing", Request{})
	var ce *ipaerror.Error
	if !errors.As(err, &ce) || ce.Type != "HardwareManagerMethodNotFound" || ce.Details != "Could not find method: nothing" {
		t.Errorf("unknown method: %v", err)
	}
	if _, err := Load(context.Background(), nil, nil); err == nil {
		t.Errorf("no managers must be an error")
	}
}

func TestCheckVersions(t *testing.T) {
	s, _ := Load(context.Background(), ctors(&fakeMgr{name: "generic_hardware_manager", class: "G", support: SupportGeneric}), nil)
	for _, ok := range []string{"", "null", `{"generic_hardware_manager": "1.0"}`} {
		if err := s.CheckVersions(json.RawMessage(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{`{"generic_hardware_manager": "1.2"}`, `{}`, `{"generic_hardware_manager": 1.0}`, `{"generic_hardware_manager": "1.0", "x": "1"}`} {
		err := s.CheckVersions(json.RawMessage(bad))
		var ce *ipaerror.Error
		if !errors.As(err, &ce) || ce.Type != "VersionMismatch" || ce.Code != 409 ||
			ce.Details != `Current versions: {"generic_hardware_manager":"1.0"}, versions used by ironic: `+bad {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func writeStep(t *testing.T, dir, name, manifest, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestExecSteps(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "input.json")
	writeStep(t, dir, "flash_firmware", `{"interface": "management", "priority": 20, "abortable": false, "deploy": true, "service": true,
		"argsinfo": {"url": {"description": "firmware URL", "required": true}}}`,
		"#!/bin/sh\nread input\necho \"$input\" > "+out+"\necho '{\"flashed\": true}'\n")
	writeStep(t, dir, "always_fails", `{"clean": true, "timeout": 10}`,
		"#!/bin/sh\necho 'bad things on /dev/loop5' >&2\nexit 3\n")
	x := NewExecSteps(dir, func(context.Context) (any, error) { return map[string]any{"cpu": map[string]any{"count": 4}}, nil })
	if err := x.LoadError(); err != nil {
		t.Fatal(err)
	}
	if x.EvaluateHardwareSupport(context.Background()) != SupportMainline {
		t.Errorf("support")
	}
	clean, _ := x.CleanSteps(context.Background(), nil, nil)
	deploy, _ := x.DeploySteps(context.Background(), nil, nil)
	cb, _ := json.Marshal(clean)
	db, _ := json.Marshal(deploy)
	if string(cb) != `[{"step":"always_fails","priority":0,"interface":"deploy","reboot_requested":false,"abortable":false},{"step":"flash_firmware","priority":20,"interface":"management","reboot_requested":false,"abortable":false,"argsinfo":{"url":{"description":"firmware URL","required":true}}}]` {
		t.Errorf("clean steps %s", cb)
	}
	if string(db) != `[{"step":"flash_firmware","priority":20,"interface":"management","reboot_requested":false,"argsinfo":{"url":{"description":"firmware URL","required":true}}}]` {
		t.Errorf("deploy steps %s", db)
	}
	service, _ := x.ServiceSteps(context.Background(), nil, nil)
	if sb, _ := json.Marshal(service); string(sb) != `[{"step":"flash_firmware","priority":20,"interface":"management","reboot_requested":false,"abortable":false,"argsinfo":{"url":{"description":"firmware URL","required":true}}}]` {
		t.Errorf("service steps %s", sb)
	}
	res, err := x.ExecuteStep(context.Background(), "flash_firmware", Request{
		Node: map[string]any{"uuid": "n1"}, Ports: []any{}, Args: map[string]json.RawMessage{"url": json.RawMessage(`"http://fw"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := res.(map[string]any); !ok || m["flashed"] != true {
		t.Errorf("result %v", res)
	}
	in, _ := os.ReadFile(out)
	if strings.TrimSpace(string(in)) != `{"args":{"url":"http://fw"},"inventory":{"cpu":{"count":4}},"node":{"uuid":"n1"},"ports":[],"step":"flash_firmware"}` {
		t.Errorf("step input %s", in)
	}
	_, err = x.ExecuteStep(context.Background(), "always_fails", Request{})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "bad things on /dev/loop5") ||
		!strings.Contains(err.Error(), filepath.Join(dir, "always_fails")) {
		t.Errorf("failure %v", err)
	}
	if _, err := x.ExecuteStep(context.Background(), "nope", Request{}); !errors.Is(err, ErrNoSuchMethod) {
		t.Errorf("unknown step %v", err)
	}
	v1 := x.Version()
	if v2 := NewExecSteps(dir, nil).Version(); v1 != v2 || !strings.HasPrefix(v1, "1.0-") {
		t.Errorf("version not stable: %s %s", v1, v2)
	}
}

func TestExecStepsBrokenManifest(t *testing.T) {
	dir := t.TempDir()
	writeStep(t, dir, "s", `{"stepp": "typo"}`, "#!/bin/sh\n")
	if err := NewExecSteps(dir, nil).LoadError(); err == nil || !strings.Contains(err.Error(), `unknown field "stepp"`) {
		t.Errorf("error %v", err)
	}
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, "x.json"), []byte(`{}`), 0o644)
	if err := NewExecSteps(dir2, nil).LoadError(); err == nil || !strings.Contains(err.Error(), "executable") {
		t.Errorf("missing executable: %v", err)
	}
	if x := NewExecSteps(filepath.Join(dir, "missing"), nil); x.LoadError() != nil || x.EvaluateHardwareSupport(context.Background()) != SupportNone {
		t.Errorf("a missing directory is no error and no manager")
	}
}

// TestExecStepsAsManager: what a Python hardware manager does in IPA, a
// steps directory does beside the generic manager: re-list a built-in
// step (moved, or kept out of automated cleaning), add one, fall through
// to the built-in one when the hardware is not its own, and fail with
// what the step printed when it hangs past its timeout.
func TestExecStepsAsManager(t *testing.T) {
	dir := t.TempDir()
	// erase_devices re-listed at priority 0: no longer automatic.
	if err := os.WriteFile(filepath.Join(dir, "erase_devices.json"), []byte(`{"builtin": true, "priority": 0, "abortable": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// erase_devices_metadata: the site's own for its hardware, else the
	// generic one.
	marker := filepath.Join(t.TempDir(), "vendor-ran")
	writeStep(t, dir, "erase_devices_metadata", `{"priority": 99}`,
		"#!/bin/sh\nif grep -q '\"vendor\":\"ACME\"'; then touch "+marker+"; exit 0; fi\necho 'not an ACME machine' >&2\nexit 77\n")
	writeStep(t, dir, "hangs", `{"priority": 0, "timeout": 1}`, "#!/bin/sh\necho 'flashing bank 2'\nsleep 60\n")
	generic := &fakeMgr{name: "generic_hardware_manager", class: "GenericHardwareManager", support: SupportGeneric, steps: []Step{
		{Step: "erase_devices", Priority: 10, Interface: "deploy"},
		{Step: "erase_devices_metadata", Priority: 99, Interface: "deploy"},
	}, run: map[string]func() (any, error){
		"erase_devices":          func() (any, error) { return "generic erase_devices", nil },
		"erase_devices_metadata": func() (any, error) { return "generic erase_devices_metadata", nil },
	}}
	vendor := "ACME"
	x := NewExecSteps(dir, func(context.Context) (any, error) {
		return map[string]any{"system_vendor": map[string]any{"vendor": vendor}}, nil
	})
	if err := x.LoadError(); err != nil {
		t.Fatal(err)
	}
	s, err := Load(context.Background(), []func() Manager{func() Manager { return generic }, func() Manager { return x }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := s.CleanSteps(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(steps)
	want := `{"ExecStepsHardwareManager":[{"step":"erase_devices","priority":0,"interface":"deploy","reboot_requested":false,"abortable":true},` +
		`{"step":"erase_devices_metadata","priority":99,"interface":"deploy","reboot_requested":false,"abortable":false},` +
		`{"step":"hangs","priority":0,"interface":"deploy","reboot_requested":false,"abortable":false}]}`
	if string(b) != want {
		t.Errorf("clean steps\n got %s\nwant %s", b, want)
	}
	if v, err := s.Dispatch(context.Background(), "erase_devices", Request{}); err != nil || v != "generic erase_devices" {
		t.Errorf("a builtin manifest's step must run the generic one: %v, %v", v, err)
	}
	if v, err := s.Dispatch(context.Background(), "erase_devices_metadata", Request{}); err != nil || v != nil {
		t.Errorf("on its own hardware the executable runs: %v, %v", v, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the executable did not see the inventory's vendor: %v", err)
	}
	vendor = "Other"
	if v, err := s.Dispatch(context.Background(), "erase_devices_metadata", Request{}); err != nil || v != "generic erase_devices_metadata" {
		t.Errorf("exit status 77 must fall through to the generic step: %v, %v", v, err)
	}
	_, err = s.Dispatch(context.Background(), "hangs", Request{})
	if err == nil || !strings.Contains(err.Error(), "killed after the manifest's timeout of 1s") || !strings.Contains(err.Error(), "flashing bank 2") {
		t.Errorf("a hung step: %v", err)
	}
}

func TestExecStepsBuiltinMistakes(t *testing.T) {
	for name, c := range map[string]struct{ manifest, exe, want string }{
		"builtin with an executable": {`{"builtin": true}`, "#!/bin/sh\n", "remove one of the two"},
		"builtin with a timeout":     {`{"builtin": true, "timeout": 5}`, "", `"timeout" applies to an executable`},
		"no executable":              {`{"priority": 5}`, "", `needs "builtin": true`},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "s.json"), []byte(c.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.exe != "" {
			if err := os.WriteFile(filepath.Join(dir, "s"), []byte(c.exe), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := NewExecSteps(dir, nil).LoadError(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// serviceMgr lists its clean steps as service steps too.
type serviceMgr struct{ fakeMgr }

func (m *serviceMgr) ServiceSteps(ctx context.Context, node map[string]any, ports []any) ([]Step, error) {
	return m.CleanSteps(ctx, node, ports)
}

func TestServiceSteps(t *testing.T) {
	old := &fakeMgr{name: "old", class: "OldManager", support: SupportMainline, steps: []Step{{Step: "flash", Interface: "management"}}}
	svc := &serviceMgr{fakeMgr{name: "svc", class: "SvcManager", support: SupportGeneric, steps: []Step{{Step: "burnin_cpu", Interface: "deploy"}}}}
	s, err := Load(context.Background(), []func() Manager{func() Manager { return old }, func() Manager { return svc }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A manager without ServiceSteps lists none, as IPA's base class.
	got, err := s.ServiceSteps(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if string(b) != `{"SvcManager":[{"step":"burnin_cpu","priority":0,"interface":"deploy","reboot_requested":false}]}` {
		t.Errorf("%s", b)
	}
}

package metric

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what is logged.
type recorder struct {
	testing.TB
	logs, errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Log(a ...any)              { r.logs = append(r.logs, fmt.Sprint(a...)) }
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

func TestReportLine(t *testing.T) {
	r := &recorder{TB: t}
	Report(r, "vm.lifecycle_bios.inspection_s", 31.23456, "s")
	Report(r, "image.raw.agent", 812.5, "MB/s", Limit(900), Target(765))
	Seconds(r, "vm.boot_s", 1500*time.Millisecond)
	Report(r, "inventory.ratio", 0.012345, "x")
	want := []string{
		"METRIC name=vm.lifecycle_bios.inspection_s value=31.235 unit=s",
		"METRIC name=image.raw.agent value=812.5 unit=MB/s limit=900 target=765",
		"METRIC name=vm.boot_s value=1.5 unit=s",
		"METRIC name=inventory.ratio value=0.01235 unit=x",
	}
	if strings.Join(r.logs, "\n") != strings.Join(want, "\n") || len(r.errs) > 0 {
		t.Errorf("logged %q, errors %q", r.logs, r.errs)
	}
}

func TestReportRefusesBadMetrics(t *testing.T) {
	for _, c := range []struct {
		name, unit string
		v          float64
	}{{"VM.Boot", "s", 1}, {"vm boot", "s", 1}, {"vm..boot", "s", 1}, {"vm.boot", "", 1}, {"vm.boot", "s s", 1}, {"vm.boot", "s", math.NaN()}, {"vm.boot", "s", math.Inf(1)}} {
		r := &recorder{TB: t}
		Report(r, c.name, c.v, c.unit)
		if len(r.errs) != 1 || len(r.logs) != 0 {
			t.Errorf("%q %v %q: logs %q errors %q", c.name, c.v, c.unit, r.logs, r.errs)
		}
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		Name("vm", "PXE/UEFI", "boot_s"):          "vm.pxe_uefi.boot_s",
		Name("vm", "TestVMDeploy", "write-image"): "vm.testvmdeploy.write_image",
		Name("a", "", "--b--"):                    "a.b",
	} {
		if in != want {
			t.Errorf("got %q, want %q", in, want)
		}
	}
}

func TestParseRoundTrip(t *testing.T) {
	m := New("image.raw.agent", 812.5, "MB/s", Limit(900), Target(765))
	m.Set("test", "TestX/sub")
	m.Set("package", "example.com/p")
	m.Set("test", "TestY")
	got, ok := Parse("    bench_test.go:12: " + m.String())
	if !ok || got.String() != m.String() || got.Get("test") != "TestY" || got.Get("missing") != "" {
		t.Errorf("Parse(%q) = %v %v", m.String(), got, ok)
	}
	for _, bad := range []string{"no metric here", "METRIC name=a value=x unit=s", "METRIC name=a value=1", "METRIC name=a value=1 unit=s value=2",
		"METRIC name=a value=1 unit=s junk", "METRIC name=A value=1 unit=s"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1448.1234: "1448.123", -2.5: "-2.5", 0.000123456: "0.0001235", 1e9: "1000000000"} {
		if got := Number(v); got != want {
			t.Errorf("Number(%v) = %q, want %q", v, got, want)
		}
	}
}

// A limit measured apart from the figure is named by limit_from, which
// must be another metric's name and not come with limit= too; beside
// names another metric too.
func TestLimitFrom(t *testing.T) {
	r := &recorder{TB: t}
	Report(r, "vm.deploy_bios.first_heartbeat_s", 12.9, "s", LimitFrom("vm.floor.kernel_boot_bios_s"))
	want := "METRIC name=vm.deploy_bios.first_heartbeat_s value=12.9 unit=s limit_from=vm.floor.kernel_boot_bios_s"
	if len(r.logs) != 1 || r.logs[0] != want || len(r.errs) > 0 {
		t.Errorf("logged %q, errors %q; want %q", r.logs, r.errs, want)
	}
	if m, ok := Parse(want); !ok || m.Get(LimitFromKey) != "vm.floor.kernel_boot_bios_s" {
		t.Errorf("Parse(%q) = %v %v", want, m, ok)
	}
	if m := New("vm.arm64.a_s", 1, "s", Beside("vm.a_s")); m.Validate() != nil || m.String() != "METRIC name=vm.arm64.a_s value=1 unit=s beside=vm.a_s" {
		t.Errorf("%s: %v", m, m.Validate())
	}
	for _, bad := range []Metric{
		New("vm.a_s", 1, "s", LimitFrom("Not A Name")),
		New("vm.a_s", 1, "s", LimitFrom("vm.a_s")),
		New("vm.a_s", 1, "s", Limit(2), LimitFrom("vm.b_s")),
		New("vm.a_s", 1, "s", Beside("Not A Name")),
		New("vm.a_s", 1, "s", Beside("vm.a_s")),
	} {
		if bad.Validate() == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

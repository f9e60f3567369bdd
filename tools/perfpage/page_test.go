package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
)

var update = flag.Bool("update", false, "rewrite testdata/page.golden")

const (
	testRound = `METRIC name=vm.lifecycle_bios.inspection_s value=31.2 unit=s package=example.com/e2e/vm test=TestVMLifecycle/bios
METRIC name=vm.deploy_s value=80 unit=s package=example.com/e2e/vm test=TestVMDeploy
METRIC name=vm.lifecycle_bios.inspection_s value=30.5 unit=s package=example.com/e2e/vm test=TestVMLifecycle/bios
METRIC name=builder.build_s value=12 unit=s package=example.com/internal/ramdisk test=TestBuild
METRIC name=Bad value=1 unit=s
METRIC name=vm.deploy_bios.first_heartbeat_s value=12.9 unit=s limit_from=vm.floor.kernel_boot_bios_s package=example.com/e2e/vm test=TestVMDeployBIOS
METRIC name=vm.floor.kernel_boot_bios_s value=4.2 unit=s package=example.com/e2e/vm test=TestVMKernelBootFloor/bios
METRIC name=vm.deploy_uefi.first_heartbeat_s value=30 unit=s limit_from=vm.floor.kernel_boot_uefi_s package=example.com/e2e/vm test=TestVMDeployUEFI
METRIC name=vm.ipadeploy.ipa.raw.image_mb_s value=12.5 unit=MB/s package=example.com/e2e/vm test=TestVMIPADeploy
METRIC name=vm.ipadeploy.ours.raw.image_mb_s value=20 unit=MB/s beside=vm.ipadeploy.ipa.raw.image_mb_s package=example.com/e2e/vm test=TestVMIPADeploy
`
	inventoryOutput = `binary: 9000000 bytes
ironic-agent inventory: runs=100 wall_ms_median=20.1
METRIC name=inventory.agent.wall_ms value=20.1 unit=ms limit=15.5 target=25
METRIC name=inventory.agent.peak_rss value=12.5 unit=MiB target=20
METRIC name=inventory.wall_ms_median value=20.1 unit=ms limit=15.5 target=25
ratio (median wall): 0.8x
`
)

func testSources(t *testing.T) []source {
	t.Helper()
	round, err := readSource("go-test.metrics", strings.NewReader(testRound))
	if err != nil {
		t.Fatal(err)
	}
	round.modified = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	inv, err := readSource("bench-inventory.out", strings.NewReader(inventoryOutput))
	if err != nil {
		t.Fatal(err)
	}
	return []source{round, inv}
}

func TestReadSource(t *testing.T) {
	s := testSources(t)
	if len(s[0].metrics) != 9 || s[0].skipped != 1 {
		t.Errorf("round: %d metrics, %d skipped; want 9 and 1", len(s[0].metrics), s[0].skipped)
	}
	if len(s[1].metrics) != 3 || s[1].skipped != 0 || s[1].metrics[0].Limit != 15.5 {
		t.Errorf("script output: %+v", s[1])
	}
}

// TestRenderGolden: sections in the catalogue's order (one with no
// figures says so), then unknown prefixes; the last value of a name wins;
// limits, targets and tests in their columns; the stamp.
func TestRenderGolden(t *testing.T) {
	st := stamp{Commit: "0123456789ab", Date: time.Date(2030, 1, 2, 4, 5, 0, 0, time.UTC), CPU: "Example CPU @ 2.00GHz", Cores: 2, Memory: "11.0 GiB", Kernel: "6.1.0-test", Load: "1.50 1.20 0.90"}
	var out bytes.Buffer
	if err := render(&out, testSources(t), st); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "page.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("page differs from %s (go test ./tools/perfpage -update rewrites it):\n%s", golden, out.Bytes())
	}
	for _, s := range []string{
		"| `vm.lifecycle_bios.inspection_s` | 30.5 s |  |  | `TestVMLifecycle/bios` |",
		"| `inventory.agent.wall_ms` | 20.1 ms | 15.5 ms | 25 ms |",
		"## Image writing\n\n", "Not measured in this run.",
		"## `builder`",
		"Measured at commit `0123456789ab`, 2030-01-02 04:05 UTC, on Example CPU @ 2.00GHz (2 cores, 11.0 GiB memory), Linux 6.1.0-test; load average 1.50 1.20 0.90 when the page was written.",
		"- `go-test.metrics`: 9 figures, written 2030-01-02 03:04 UTC, 1 malformed METRIC lines left out",
		"| `vm.deploy_bios.first_heartbeat_s` | 12.9 s | 4.2 s |  | `TestVMDeployBIOS` |",
		"| `vm.deploy_uefi.first_heartbeat_s` | 30 s | not measured |  | `TestVMDeployUEFI` |",
		// The headline table takes the rows' values, limits and IPA's.
		"| `ironic-agent inventory`, wall time (median) (`inventory.wall_ms_median`) | 20.1 ms | 15.5 ms |  |",
		"| deploy: a 1 GiB raw image from HTTP to the disk (`vm.ipadeploy.ours.raw.image_mb_s`) | 20 MB/s |  | 12.5 MB/s |",
		"| ramdisk: kernel and initramfs (`ramdisk.total_mib`) | not measured |  | not measured |",
		// Ours stands after IPA's.
		"| `vm.ipadeploy.ipa.raw.image_mb_s` | 12.5 MB/s |  |  | `TestVMIPADeploy` |\n| `vm.ipadeploy.ours.raw.image_mb_s` | 20 MB/s |  |  | `TestVMIPADeploy` |",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	if strings.Contains(out.String(), "31.2 s") {
		t.Error("an earlier value of a name is on the page")
	}
}

func TestMachine(t *testing.T) {
	st := machine()
	if st.Cores < 1 || st.CPU == "" || st.Kernel == "" || st.Load == "" || st.Date.IsZero() {
		t.Errorf("machine() = %+v", st)
	}
}

// A name in two files takes the first file's value; a second file adds
// the names the first lacks.
func TestLatestFirstSourceWins(t *testing.T) {
	main, _ := readSource("go-test.metrics", strings.NewReader("METRIC name=vm.a value=1 unit=s\nMETRIC name=vm.a value=2 unit=s\n"))
	series, _ := readSource("go-test-ironic-2026.1.metrics", strings.NewReader("METRIC name=vm.a value=3 unit=s\nMETRIC name=vm.b value=4 unit=s\n"))
	names, by := latest([]source{main, series})
	if strings.Join(names, ",") != "vm.a,vm.b" || by["vm.a"].m.Value != 2 || by["vm.b"].m.Value != 4 || by["vm.b"].source != series.name {
		t.Errorf("names %v, values %+v", names, by)
	}
}

// A limit named by limit_from comes from the figure's own file, the same
// run: the same name in another file is not its limit; a limit of another
// unit is refused.
func TestLimitFromSameRun(t *testing.T) {
	main, _ := readSource("go-test.metrics", strings.NewReader("METRIC name=vm.a_s value=10 unit=s limit_from=vm.floor_s\n"))
	other, _ := readSource("go-test-ironic-2026.1.metrics", strings.NewReader("METRIC name=vm.floor_s value=3 unit=s\nMETRIC name=vm.b_s value=9 unit=s limit_from=vm.floor_s\n"))
	var out bytes.Buffer
	if err := render(&out, []source{main, other}, stamp{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `vm.a_s` | 10 s | not measured |", "| `vm.b_s` | 9 s | 3 s |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the page lacks %q:\n%s", want, out.String())
		}
	}
	bad, _ := readSource("go-test.metrics", strings.NewReader("METRIC name=vm.a_s value=10 unit=s limit_from=vm.floor_mib\nMETRIC name=vm.floor_mib value=3 unit=MiB\n"))
	if err := render(&out, []source{bad}, stamp{}); err == nil || !strings.Contains(err.Error(), "vm.floor_mib") {
		t.Errorf("a limit in MiB beside a figure in s: err = %v", err)
	}
}

// A figure of another run (a slow scenario's go test -v output, given
// after ./test.sh's files) that names the figure it stands beside comes
// right after that figure's row, with its limit from its own file.
func TestBesideRow(t *testing.T) {
	main, _ := readSource("go-test.metrics", strings.NewReader(`METRIC name=vm.deploy_uefi.first_heartbeat_s value=24.3 unit=s limit_from=vm.floor.kernel_boot_uefi_s
METRIC name=vm.floor.kernel_boot_uefi_s value=10.4 unit=s
METRIC name=vm.ipmi_bios.cleaning_s value=31 unit=s
`))
	slow, _ := readSource("arm64.out", strings.NewReader(`=== RUN   TestVMArm64Lifecycle
    arm64_test.go:120: METRIC name=vm.floor.kernel_boot_arm64_s value=21.5 unit=s
    arm64_test.go:140: METRIC name=vm.arm64.boot_to_heartbeat_s value=30.6 unit=s limit_from=vm.floor.kernel_boot_arm64_s beside=vm.deploy_uefi.first_heartbeat_s
--- PASS: TestVMArm64Lifecycle (283.00s)
`))
	var out bytes.Buffer
	if err := render(&out, []source{main, slow}, stamp{}); err != nil {
		t.Fatal(err)
	}
	want := "| `vm.deploy_uefi.first_heartbeat_s` | 24.3 s | 10.4 s |  |\n| `vm.arm64.boot_to_heartbeat_s` | 30.6 s | 21.5 s |  |\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the page lacks\n%s\n%s", want, out.String())
	}
}

// besideOrder moves rows after the root they name, in their order; a row
// naming a missing figure, or one that names another, keeps its place.
func TestBesideOrder(t *testing.T) {
	row := func(name, beside string) entry {
		m := metric.New(name, 1, "s")
		if beside != "" {
			m.Set(metric.BesideKey, beside)
		}
		return entry{m: m}
	}
	rows := []entry{row("vm.a", ""), row("vm.b", ""), row("vm.c", "vm.a"), row("vm.d", "vm.gone"), row("vm.e", "vm.a"), row("vm.f", "vm.c")}
	var got []string
	for _, r := range besideOrder(rows) {
		got = append(got, r.m.Name)
	}
	if want := "vm.a,vm.c,vm.e,vm.b,vm.d,vm.f"; strings.Join(got, ",") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

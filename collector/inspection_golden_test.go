package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// inspectionGoldens are the inspection collectors whose output each
// fixture keeps beside inventory.json, as fixtures/<machine>/<name>.json.
func inspectionGoldens() []struct {
	name    string
	collect func(ctx context.Context, opts Options) (any, error)
} {
	return []struct {
		name    string
		collect func(ctx context.Context, opts Options) (any, error)
	}{
		{"dmi-decode", func(ctx context.Context, o Options) (any, error) { return DMIDecode(ctx, o) }},
		{"usb-devices", func(ctx context.Context, o Options) (any, error) { return USBDevices(ctx, o) }},
		{"extra-hardware", func(ctx context.Context, o Options) (any, error) { return ExtraHardware(ctx, o, nil) }},
	}
}

// TestFixturesInspectionGolden runs the inspection collectors over every
// fixture tree and compares with their golden files; -update rewrites
// them (go test ./collector -run TestFixtures -update).
func TestFixturesInspectionGolden(t *testing.T) {
	for _, m := range fixtureMachines(t) {
		for _, c := range inspectionGoldens() {
			t.Run(m+"/"+c.name, func(t *testing.T) {
				dir := filepath.Join(fixturesDir, m)
				v, err := c.collect(context.Background(), Options{Root: filepath.Join(dir, "root"), Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				enc := json.NewEncoder(&got)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if items, ok := v.([]HardwareItem); ok {
					// One 4-tuple a line: the list diffs like a table.
					got.WriteString("[\n")
					for i, it := range items {
						b, err := json.Marshal(it)
						if err != nil {
							t.Fatal(err)
						}
						got.WriteString("  ")
						got.Write(b)
						if i < len(items)-1 {
							got.WriteString(",")
						}
						got.WriteString("\n")
					}
					got.WriteString("]\n")
				} else if err := enc.Encode(v); err != nil {
					t.Fatal(err)
				}
				checkGolden(t, filepath.Join(dir, c.name+".json"), got.Bytes(), "TestFixturesInspectionGolden")
			})
		}
	}
}

// checkGolden compares got with the golden file, or rewrites the file
// under -update; test names the test to run with -update.
func checkGolden(t *testing.T, golden string, got []byte, test string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./collector -run %s -update to create it)", err, test)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the collector reads now:\n%s", golden, lineDiff(string(want), string(got)))
	}
}

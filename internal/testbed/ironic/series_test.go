package ironic

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// TestSeriesStarts builds (or takes from the cache) the root filesystem of
// $IRONIC_SERIES, starts its services and checks the API answers with the
// series' Ironic. It reports the cold build, the warm start and the cache
// entry's size. The host's 2023.1 is covered by every e2e test.
func TestSeriesStarts(t *testing.T) {
	series, err := SeriesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if series.Host() {
		t.Skipf("SKIPPED: %s=%s runs the host's packages (set %s=2025.1 or 2026.1)", SeriesEnv, string(series), SeriesEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: debootstrap, chroot and mount namespaces")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	rfs, err := EnsureRootFS(ctx, series, cache)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s root filesystem %s: cached %v, built in %s, %d MiB, %v", series, rfs.Dir, rfs.Cached, rfs.BuildTime.Round(time.Second), rfs.SizeBytes>>20, rfs.Versions)
	start := time.Now()
	svc, err := Start(ctx, Config{Dir: t.TempDir(), IronicPort: 9385, InspectorPort: 9050, Series: series, RootFS: rfs.Dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	t.Logf("started in %s (dbsync %s, ironic %s, inspector %s)", time.Since(start).Round(time.Millisecond),
		svc.Timings.DBSync.Round(time.Millisecond), svc.Timings.Ironic.Round(time.Millisecond), svc.Timings.Inspector.Round(time.Millisecond))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, svc.IronicURL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var root struct {
		DefaultVersion struct{ Version string } `json:"default_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
		t.Fatal(err)
	}
	t.Logf("API maximum %s", root.DefaultVersion.Version)
	got, err := ironic.ParseVersion(root.DefaultVersion.Version)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := ironic.ParseVersion(APIVersion); !want.Less(got) {
		t.Errorf("API maximum %s: want a newer Ironic than 21.4's %s", root.DefaultVersion.Version, APIVersion)
	}
}

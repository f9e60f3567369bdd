package partition

import (
	"context"
	"strings"
	"testing"
)

// FuzzLoadConfigDrive checks that any configdrive parameter ends in ISO
// bytes or an error, within the size limit.
func FuzzLoadConfigDrive(f *testing.F) {
	f.Add("H4sIAAAAAAAA/0rOzy0oSi0uTk1RSM7PLShKLS5OTQEAAAD//wMAyvRPixoAAAA=")
	f.Add("not base64 !!!")
	f.Add("aGVsbG8=")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
			return // URLs are tested against a local server, never fuzzed onto the network
		}
		iso, err := loadConfigDrive(context.Background(), nil, s, 1<<20)
		if err == nil && len(iso) > 1<<20 {
			t.Fatalf("%d bytes past the limit", len(iso))
		}
	})
}

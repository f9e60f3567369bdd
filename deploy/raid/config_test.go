package raid

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustConfig(t *testing.T, js string) Config {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(v)
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", js, err)
	}
	return c
}

// The cases of IPA's test_validate_configuration_*, with IPA's messages.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   string
		skip  []string
		disks int
		want  string // "" valid, else a substring of the error
	}{
		{"raid1", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`, nil, 2, ""},
		{"raid1 raidN", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, nil, 2, ""},
		{"root volume", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software","is_root_volume":true},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, nil, 2, ""},
		{"raid 1+0", `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"1+0","controller":"software"}]}`, nil, 2, ""},
		{"MAX MAX", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, nil, 2,
			"Software RAID can have only one RAID device with size 'MAX'"},
		{"raid level 42", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"42","controller":"software"}]}`, nil, 2,
			"Software RAID configuration does not support RAID level 42"},
		{"three volumes", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software"},{"size_gb":"100","raid_level":"0","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, nil, 2,
			"Software RAID configuration requires one or two logical disks"},
		{"duplicate name", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software","volume_name":"thedisk"},{"size_gb":"MAX","raid_level":"0","controller":"software","volume_name":"thedisk"}]}`, nil, 2,
			"Duplicate software RAID device name thedisk detected"},
		{"two roots", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software","is_root_volume":true},{"size_gb":"MAX","raid_level":"0","controller":"software","is_root_volume":true}]}`, nil, 2,
			"Software RAID configuration allows only one logical disk to be marked as is_root_volume"},
		{"first not raid1", `{"logical_disks":[{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, nil, 2,
			"Software RAID Configuration requires RAID-1 for the first logical disk"},
		{"not software", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"megaraid"}]}`, nil, 2,
			"requires all logical disks to have 'controller'='software'"},
		{"raid5 two disks", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"5","controller":"software"}]}`, nil, 2,
			"not possible for RAID level 5 with only 2 block devices found."},
		{"raid5 three disks", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"5","controller":"software"}]}`, nil, 3, ""},
		{"raid6 three disks", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"6","controller":"software"}]}`, nil, 3,
			"not possible for RAID level 6 with only 3 block devices found."},
		{"skip needs names", `{"logical_disks":[{"size_gb":"100","raid_level":"1","controller":"software","volume_name":"root"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, []string{"root"}, 2,
			"All logical disks are required to have a volume name"},
		{"one physical disk", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":[{"size":">= 10"}]}]}`, nil, 2,
			"must be a list with at least 2 items"},
		{"physical disk not a dict", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":["/dev/sda","/dev/sdb"]}]}`, nil, 2,
			"must be a list of device hints (dictionaries)"},
		{"no logical disks", `{"logical_disks":[]}`, nil, 2, "RAID config contains no logical disks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := mustConfig(t, c.cfg).Validate("node-1", c.skip, c.disks)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate = %v, want %q", err, c.want)
			}
		})
	}
}

func TestParseConfigRefuses(t *testing.T) {
	for _, js := range []string{
		`[]`,
		`{"logical_disks":{}}`,
		`{"logical_disks":[1]}`,
		`{"logical_disks":[{"raid_level":"1"}]}`,
		`{"logical_disks":[{"size_gb":"big","raid_level":"1"}]}`,
		`{"logical_disks":[{"size_gb":2.5,"raid_level":"1"}]}`,
		`{"logical_disks":[{"size_gb":0,"raid_level":"1"}]}`,
		`{"logical_disks":[{"size_gb":10}]}`,
		`{"logical_disks":[{"size_gb":10,"raid_level":"1","is_root_volume":"perhaps"}]}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseConfig(v); err == nil || !strings.Contains(err.Error(), "Software RAID caused unknown error") {
			t.Errorf("ParseConfig(%s) = %v, want a SoftwareRAIDError", js, err)
		}
	}
}

func TestSkipVolumeNames(t *testing.T) {
	node := map[string]any{"properties": map[string]any{"skip_block_devices": []any{
		map[string]any{"name": "/dev/sda"}, map[string]any{"volume_name": "root"}, map[string]any{"volume_name": "data"}, map[string]any{"volume_name": "root"},
	}}}
	if got := SkipVolumeNames(node); strings.Join(got, ",") != "root,data" {
		t.Errorf("SkipVolumeNames = %q", got)
	}
	if got := SkipVolumeNames(map[string]any{}); got != nil {
		t.Errorf("SkipVolumeNames(no properties) = %q", got)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(`{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software","physical_disks":[{"name":"/dev/sda"},{"size":">= 10"}]}]}`)
	f.Add(`{"logical_disks":[{"size_gb":1e300,"raid_level":null,"volume_name":7}]}`)
	f.Fuzz(func(t *testing.T, js string) {
		var v any
		if json.Unmarshal([]byte(js), &v) != nil {
			return
		}
		c, err := ParseConfig(v)
		if err != nil {
			return
		}
		_ = c.Validate("n", SkipVolumeNames(map[string]any{}), 3)
		_, _ = MakePlan(c.LogicalDisks, nil, nil, "bios", "msdos", nil)
	})
}

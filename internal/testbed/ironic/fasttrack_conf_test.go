package ironic

import (
	"strings"
	"testing"
)

// TestIronicConfFastTrack: Config.FastTrack turns [deploy]fast_track on
// and inspector's power-off after introspection off; the default leaves
// both as every other test expects.
func TestIronicConfFastTrack(t *testing.T) {
	c := Config{Dir: "/work/ironic"}
	c.defaults()
	if conf := ironicConf(c, c.Dir); !strings.Contains(conf, "[deploy]\n") || !strings.Contains(conf, "fast_track = false\n") {
		t.Errorf("default ironic.conf lacks fast_track = false:\n%s", conf)
	}
	if conf := inspectorConf(c, c.Dir); !strings.Contains(conf, "[processing]\n") || !strings.Contains(conf, "power_off = true\n") {
		t.Errorf("default inspector.conf lacks power_off = true:\n%s", conf)
	}
	c.FastTrack = true
	if conf := ironicConf(c, c.Dir); !strings.Contains(conf, "fast_track = true\n") {
		t.Errorf("ironic.conf with FastTrack lacks fast_track = true:\n%s", conf)
	}
	if conf := inspectorConf(c, c.Dir); !strings.Contains(conf, "power_off = false\n") {
		t.Errorf("inspector.conf with FastTrack lacks power_off = false:\n%s", conf)
	}
}

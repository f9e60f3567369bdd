package ironic

import (
	"slices"
	"strings"
	"testing"
)

// TestParseLookupConfigTolerant: every key Ironic 21.4 to 35 sends is
// decoded; a value of the wrong type is ignored and reported instead of
// failing the lookup (which would strand the node); keys this agent has
// no use for are listed.
func TestParseLookupConfigTolerant(t *testing.T) {
	body := `{"node": {"uuid": "n1"}, "config": {
		"heartbeat_timeout": 300, "agent_token": "` + strings.Repeat("t", 43) + `", "agent_token_required": true,
		"agent_md5_checksum_enable": false, "disable_deep_image_inspection": "yes",
		"permitted_image_formats": "raw, qcow2", "agent_skip_bmc_detect": true,
		"enable_bios_bootloader_install": false, "tls_min_version": "1.3", "tls_cipher_suites": null,
		"metrics": {"backend": "noop"}, "metrics_statsd": {}, "agent_containers": {"runner": "podman"},
		"some_2027_key": 1}}`
	res, err := ParseLookup([]byte(body), "u")
	if err != nil {
		t.Fatal(err)
	}
	c := res.Config
	if c.HeartbeatTimeout != 300 || c.AgentToken == nil || !c.AgentTokenRequired || c.AgentMD5ChecksumEnable == nil || *c.AgentMD5ChecksumEnable ||
		c.DisableDeepImageInspection != nil || !slices.Equal(c.PermittedImageFormats, []string{"raw", "qcow2"}) ||
		c.AgentSkipBMCDetect == nil || !*c.AgentSkipBMCDetect || c.EnableBIOSBootloaderInstall == nil || *c.EnableBIOSBootloaderInstall ||
		c.TLSMinVersion != "1.3" || c.TLSCipherSuites != "" {
		t.Errorf("config %+v", c)
	}
	if len(c.Ignored) != 1 || !strings.HasPrefix(c.Ignored[0], "disable_deep_image_inspection: ") {
		t.Errorf("ignored %q", c.Ignored)
	}
	if !slices.Equal(c.Unused, []string{"agent_containers", "metrics", "metrics_statsd", "some_2027_key"}) {
		t.Errorf("unused %q", c.Unused)
	}
	res, err = ParseLookup([]byte(`{"node": {"uuid": "n1"}, "config": {"heartbeat_timeout": 300, "permitted_image_formats": ["raw"]}}`), "u")
	if err != nil || !slices.Equal(res.Config.PermittedImageFormats, []string{"raw"}) {
		t.Errorf("list form: %+v, %v", res, err)
	}
	for _, bad := range []string{
		`{"node": {"uuid": "n1"}, "config": {"heartbeat_timeout": "300"}}`,
		`{"node": {"uuid": "n1"}, "config": {}}`,
		`{"node": {"uuid": "n1"}, "config": []}`,
	} {
		if _, err := ParseLookup([]byte(bad), "u"); err == nil {
			t.Errorf("%s accepted: without a heartbeat timeout the agent cannot pace heartbeats", bad)
		}
	}
}

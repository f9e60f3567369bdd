package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCmdline(t *testing.T) {
	got := ParseCmdline("BOOT_IMAGE=/vmlinuz ro quiet ipa-api-url=http://a:6385 x==y ipa-debug=1 \"ipa-debug=0\" BOOTIF=01-52-54-00-12-34-56 ipa-api-url=http://b:6385 =z empty=\n")
	want := map[string]string{
		"BOOT_IMAGE":  "/vmlinuz",
		"ipa-api-url": "http://b:6385", // later wins
		"x":           "=y",            // split at the first '='
		"ipa-debug":   "1",
		"\"ipa-debug": "0\"", // no dequoting
		"BOOTIF":      "01-52-54-00-12-34-56",
		"":            "z",
		"empty":       "",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := m[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
}

func TestPrecedence(t *testing.T) {
	cmdline := "ipa-api-url=http://kernel:6385 ipa-lookup-timeout=100 ipa-debug=1 ipa-listen-port=1111 ipa-insecure=yes ipa-allowed-devices=/dev/loop3,/dev/loop4 BOOTIF=52:54:00:12:34:56"
	conf := "# IPA config\n[DEFAULT]\napi_url = http://file:6385\nlookup_timeout: 200\nunknown_option = ignored\ncafile=/etc/ca.pem\n\n[other]\nlisten_port = 2\n"
	c, err := Load(Inputs{
		Cmdline:     cmdline,
		ConfigFiles: []string{"/etc/ipa.conf"},
		ReadFile:    files(map[string]string{"/etc/ipa.conf": conf}),
		Flags:       map[string]string{"lookup_timeout": "300.5", "advertise_host": "192.0.2.10"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.APIURLs, ","); got != "http://file:6385" {
		t.Errorf("api_url %s: the config file wins over the kernel command line", got)
	}
	if c.LookupTimeout != 300500*time.Millisecond {
		t.Errorf("lookup_timeout %v: flags win", c.LookupTimeout)
	}
	if !c.Debug || !c.Insecure || c.ListenPort != 1111 || c.CAFile != "/etc/ca.pem" || c.AdvertiseHost != "192.0.2.10" {
		t.Errorf("debug %v insecure %v port %d cafile %q advertise %q", c.Debug, c.Insecure, c.ListenPort, c.CAFile, c.AdvertiseHost)
	}
	if got := strings.Join(c.AllowedDevices, ","); got != "/dev/loop3,/dev/loop4" {
		t.Errorf("allowed devices %s", got)
	}
	if c.BootIF != "52:54:00:12:34:56" {
		t.Errorf("BOOTIF %q", c.BootIF)
	}
	// Defaults.
	if c.AdvertisePort != 9999 || c.LLDPTimeout != 30*time.Second || !c.EnableAutoTLS || strings.Join(c.InspectionCollectors, ",") != "default,logs" {
		t.Errorf("defaults: %+v", c)
	}
	if c.Origins["api_url"] != "config file (/etc/ipa.conf:3 [DEFAULT] api_url)" || c.Origins["lookup_timeout"] != "flag (--lookup-timeout)" ||
		c.Origins["listen_port"] != "kernel command line (ipa-listen-port)" {
		t.Errorf("origins %v", c.Origins)
	}
}

func TestBadValues(t *testing.T) {
	cases := []struct {
		in   Inputs
		want string
	}{
		{Inputs{Cmdline: "ipa-api-url=http://x ipa-lookup-timeout=soon"},
			`bad value "soon" for lookup_timeout from kernel command line (ipa-lookup-timeout): not a number of seconds`},
		{Inputs{Cmdline: "ipa-api-url=ftp://x"},
			`bad value "ftp://x" for api_url from kernel command line (ipa-api-url): "ftp://x" is not an http(s):// URL`},
		{Inputs{Flags: map[string]string{"api_url": "http://x", "listen_port": "99999"}},
			`bad value "99999" for listen_port from flag (--listen-port): port must be 1..65535`},
		{Inputs{Flags: map[string]string{"api_url": "http://x", "insecure": "maybe"}},
			`bad value "maybe" for insecure from flag (--insecure): not a boolean`},
		{Inputs{Cmdline: "ipa-api-url=http://x", ConfigFiles: []string{"/c"}, ReadFile: files(map[string]string{"/c": "[DEFAULT]\nallowed_devices = sda\n"})},
			`bad value "sda" for allowed_devices from config file (/c:2 [DEFAULT] allowed_devices): "sda" is not a /dev path`},
		{Inputs{Cmdline: "ipa-api-url=http://x ipa-ironic-api-version=1.x"},
			`bad value "1.x" for ironic_api_version from kernel command line (ipa-ironic-api-version): want MAJOR.MINOR`},
		{Inputs{}, "no Ironic API URL"},
		{Inputs{Cmdline: "ipa-api-url=http://x", ConfigFiles: []string{"/missing"}, ReadFile: files(nil)}, "config file /missing: "},
		{Inputs{Cmdline: "ipa-api-url=http://x", ConfigFiles: []string{"/c"}, ReadFile: files(map[string]string{"/c": "api_url = http://y\n"})},
			`config file /c: line 1: option "api_url = http://y" outside any [section]`},
		{Inputs{Flags: map[string]string{"api_url": "http://x", "certfile": "/c.pem"}}, "certfile and keyfile must be given together"},
		{Inputs{Flags: map[string]string{"nonsense": "1"}}, "flag --nonsense: unknown option"},
		{Inputs{Cmdline: "ipa-api-url=http://x ipa-ntp-server=192.0.2.1,192.0.2.2"},
			`bad value "192.0.2.1,192.0.2.2" for ntp_server from kernel command line (ipa-ntp-server): invalid NTP server address`},
	}
	for _, c := range cases {
		_, err := Load(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to contain %q", err, c.want)
		}
	}
}

func TestNTPServer(t *testing.T) {
	c, err := Load(Inputs{Cmdline: "ipa-api-url=http://x ipa-ntp-server=[2001:db8::1]"})
	if err != nil || c.NTPServer != "[2001:db8::1]" || c.FailIfClockNotSet {
		t.Fatalf("%v %q %v", err, c.NTPServer, c.FailIfClockNotSet)
	}
	c, err = Load(Inputs{Cmdline: "ipa-api-url=http://x", ConfigFiles: []string{"/c"},
		ReadFile: files(map[string]string{"/c": "[DEFAULT]\nntp_server = ntp.example.com\nfail_if_clock_not_set = true\n"})})
	if err != nil || c.NTPServer != "ntp.example.com" || !c.FailIfClockNotSet {
		t.Fatalf("%v %q %v", err, c.NTPServer, c.FailIfClockNotSet)
	}
}

func TestStandaloneNeedsNoURL(t *testing.T) {
	c, err := Load(Inputs{Cmdline: "ipa-standalone=1"})
	if err != nil || !c.Standalone {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestInspectionOnlyBootIsStandalone(t *testing.T) {
	// What Ironic 21.4's managed inspection puts on the command line.
	c, err := Load(Inputs{Cmdline: "ipa-inspection-callback-url=http://192.0.2.1:5050/v1/continue BOOTIF=01-52-54-00-12-34-56"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Standalone || c.InspectionCallbackURL != "http://192.0.2.1:5050/v1/continue" {
		t.Fatalf("standalone %v, callback %q", c.Standalone, c.InspectionCallbackURL)
	}
	if !strings.Contains(c.Origins["standalone"], "implied") {
		t.Errorf("origin of standalone: %q", c.Origins["standalone"])
	}
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fv := RegisterFlags(fs)
	err := fs.Parse([]string{"--api-url", "http://f:6385", "--standalone", "--insecure=false", "--config-file", "/a.conf", "--allowed-devices=/dev/loop1", "--inspection-callback-url", "http://i:5050/v1/continue"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"api_url": "http://f:6385", "standalone": "true", "insecure": "false", "allowed_devices": "/dev/loop1", "inspection_callback_url": "http://i:5050/v1/continue"}
	if !reflect.DeepEqual(fv.Options, want) || !reflect.DeepEqual(fv.ConfigFiles, []string{"/a.conf"}) {
		t.Errorf("flags %v files %v", fv.Options, fv.ConfigFiles)
	}
}

func TestINIContinuationAndComments(t *testing.T) {
	secs, err := parseINI([]byte("\ufeff; comment\n[DEFAULT]\nAPI_URL = http://a,\n  http://b\n# x\n[s]\nk:v\n"))
	if err != nil {
		t.Fatal(err)
	}
	if secs["DEFAULT"]["api_url"].value != "http://a,\nhttp://b" || secs["s"]["k"].value != "v" {
		t.Errorf("%v", secs)
	}
	c, err := Load(Inputs{ConfigFiles: []string{"/c"}, ReadFile: files(map[string]string{"/c": "[DEFAULT]\napi_url = http://a,\n  http://b\n"})})
	if err != nil || strings.Join(c.APIURLs, " ") != "http://a http://b" {
		t.Errorf("%v %v", err, c.APIURLs)
	}
}

func FuzzParseCmdline(f *testing.F) {
	for _, s := range []string{"", "a=b c=d", "ipa-api-url=http://x==y BOOTIF=01-aa", "=\t=\n==", "\x00=\x00 a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := ParseCmdline(s)
		for k, v := range m {
			if strings.ContainsAny(k, " \t\n") || strings.ContainsAny(v, " \t\n") || strings.Contains(k, "=") {
				t.Fatalf("bad pair %q=%q from %q", k, v, s)
			}
		}
		// Loading never panics, whatever the command line holds.
		_, _ = Load(Inputs{Cmdline: s})
	})
}

func FuzzParseINI(f *testing.F) {
	for _, s := range []string{"[DEFAULT]\napi_url = http://x\n", "[a]\n k\n", "[]\n", "x=y", "[DEFAULT]\nlisten_port: 1\n  2\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		secs, err := parseINI(b)
		if err != nil {
			return
		}
		for name, s := range secs {
			if name == "" || s == nil {
				t.Fatalf("bad section %q", name)
			}
		}
		_, err = Load(Inputs{ConfigFiles: []string{"/c"}, ReadFile: func(string) ([]byte, error) { return b, nil }})
		if err != nil && errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	})
}

// Every option is listed under a help heading (or is a test-fixture
// option) and names its value, so run --help never shows a bare "value".
func TestOptionsHelpMetadata(t *testing.T) {
	groups := map[string]bool{"": true}
	for _, g := range Groups() {
		groups[g] = true
	}
	for _, o := range Options() {
		if !groups[o.Group] {
			t.Errorf("%s: group %q is not one of Groups()", o.Name, o.Group)
		}
		if o.Bool != (o.Placeholder == "") {
			t.Errorf("%s: bool %v with placeholder %q", o.Name, o.Bool, o.Placeholder)
		}
		if o.Help == "" {
			t.Errorf("%s: no help", o.Name)
		}
	}
}

// TestMDNSOptions: IPA's [mdns] options come from their own section, the
// special value "mdns" is accepted where IPA accepts it, use_mdns without
// any URL defers the choice to the mDNS lookup, and Override applies an
// answer's parameter as any other source, checked.
func TestMDNSOptions(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "ipa.conf")
	if err := os.WriteFile(conf, []byte("[DEFAULT]\nuse_mdns = false\n[mdns]\nuse_mdns = true\nallowed_overrides = ntp_server\nlookup_attempts = 5\ninterfaces = 192.0.2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(Inputs{ConfigFiles: []string{conf}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.UseMDNS || c.MDNSLookupAttempts != 5 || strings.Join(c.MDNSAllowedOverrides, ",") != "ntp_server" || strings.Join(c.MDNSInterfaces, ",") != "192.0.2.2" || c.Standalone || len(c.APIURLs) != 0 {
		t.Errorf("config %+v", c)
	}
	if !strings.Contains(c.Origins["use_mdns"], "[mdns] use_mdns") {
		t.Errorf("use_mdns origin %q", c.Origins["use_mdns"])
	}
	c, err = Load(Inputs{Cmdline: "ipa-api-url=mdns ipa-inspection-callback-url=mdns"})
	if err != nil || strings.Join(c.APIURLs, ",") != "mdns" || c.InspectionCallbackURL != "mdns" {
		t.Fatalf("mdns values: %+v %v", c, err)
	}
	if c.MDNSLookupAttempts != 3 || strings.Join(c.MDNSAllowedOverrides, ",") != "inspection_callback_url,ntp_server" {
		t.Errorf("IPA's defaults: attempts %d, allowed %v", c.MDNSLookupAttempts, c.MDNSAllowedOverrides)
	}
	if err := c.Override("ntp_server", "192.0.2.1", "mDNS"); err != nil || c.NTPServer != "192.0.2.1" || c.Origins["ntp_server"] != "mDNS" {
		t.Errorf("override: %v %q %q", err, c.NTPServer, c.Origins["ntp_server"])
	}
	if err := c.Override("ntp_server", "not a server!", "mDNS"); err == nil || !strings.Contains(err.Error(), "from mDNS") {
		t.Errorf("a bad override: %v", err)
	}
	if err := c.Override("no_such_option", "1", "mDNS"); err == nil {
		t.Errorf("an unknown option must be an error")
	}
	var found bool
	for _, o := range Options() {
		if o.Name == "mdns_allowed_overrides" {
			found = o.INI == "[mdns] allowed_overrides"
		}
	}
	if !found {
		t.Errorf("Options() does not name [mdns] allowed_overrides")
	}
}

// TestIPA13KernelParameters covers the parameters IPA 11.2-13 added: each
// is applied with IPA's meaning or refused, never parsed and dropped.
func TestIPA13KernelParameters(t *testing.T) {
	c, err := Load(Inputs{Cmdline: "ipa-api-url=https://[fd00::1]:6385 ipa-tls-min-version=1.3 ipa-tls-certificate-curve=p521 ipa-image-download-max-duration=900 ipa-use-mdns=true"})
	if err != nil {
		t.Fatal(err)
	}
	if c.TLSPolicy.MinVersion != 0x0304 || c.TLSCertificateCurve != "p521" || c.ImageDownloadMaxDuration != 900*time.Second || !c.UseMDNS {
		t.Errorf("policy %+v curve %q max duration %v use_mdns %v", c.TLSPolicy, c.TLSCertificateCurve, c.ImageDownloadMaxDuration, c.UseMDNS)
	}
	c, err = Load(Inputs{Cmdline: "ipa-api-url=http://a:6385 ipa-agent-token-on-get=required ipa-agent-token-required=1"})
	if err != nil || c.AgentTokenOnGet != "required" || !c.AgentTokenRequired {
		t.Fatalf("token options: %+v, %v", c, err)
	}
	c, err = Load(Inputs{Cmdline: "ipa-api-url=http://a:6385 ipa-tls-cipher-suites=ECDHE-RSA-AES256-GCM-SHA384"})
	if err != nil {
		t.Fatal(err)
	}
	if c.TLSPolicy.MinVersion != 0x0303 || len(c.TLSPolicy.CipherSuites) != 1 || c.TLSCertificateCurve != "p384" || c.ImageDownloadMaxDuration != 0 {
		t.Errorf("policy %+v curve %q max %v", c.TLSPolicy, c.TLSCertificateCurve, c.ImageDownloadMaxDuration)
	}
	for cmdline, want := range map[string]string{
		"ipa-api-url=http://a:6385 ipa-tls-min-version=1.1":             "ipa-tls-min-version",
		"ipa-api-url=http://a:6385 ipa-tls-cipher-suites=HIGH:!aNULL":   `"HIGH" is not a TLS 1.2 cipher suite`,
		"ipa-api-url=http://a:6385 ipa-tls-certificate-curve=secp256k1": "ipa-tls-certificate-curve",
		"ipa-api-url=http://a:6385 ipa-image-download-max-duration=-5":  "ipa-image-download-max-duration",
		"ipa-api-url=http://a:6385 ipa-image-download-max-duration=1.5": "ipa-image-download-max-duration",
		"ipa-api-url=mdns,http://a:6385":                                `"mdns" stands alone`,
		"ipa-api-url=http://a:6385 ipa-agent-token-on-get=always":       "ipa-agent-token-on-get",
	} {
		if _, err := Load(Inputs{Cmdline: cmdline}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to name %q", cmdline, err, want)
		}
	}
}

package downloader

import (
	"strings"
	"testing"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func TestFromEnvDefaults(t *testing.T) {
	c, err := FromEnv(envOf())
	if err != nil {
		t.Fatal(err)
	}
	if !c.Embedded() || c.SharedDir != "/shared" || c.Branch != "master" || c.Flavor != "goagent" ||
		c.Filename != "ipa-goagent-master.tar.gz" || c.Stem != "ipa-goagent-master" || c.DestName != "ironic-python-agent" ||
		c.ImagesDir() != "/shared/html/images" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestFromEnvAsGetResource(t *testing.T) {
	for _, tc := range []struct {
		env                             []string
		filename, stem, dest, flav, uri string
	}{
		{[]string{"IPA_ARCH=aarch64"}, "ipa-goagent-arm64-master.tar.gz", "ipa-goagent-arm64-master", "ironic-python-agent_aarch64", "goagent-arm64", ""},
		{[]string{"IPA_BRANCH=stable/2025.1", "IPA_FLAVOR=centos9", "IPA_BASEURI=https://example.org/dib/"},
			"ipa-centos9-stable-2025.1.tar.gz", "ipa-centos9-stable-2025.1", "ironic-python-agent", "centos9", "https://example.org/dib"},
		{[]string{"IPA_FILENAME=custom.tar.xz", "IPA_BASEURI=http://h"}, "custom.tar.xz", "custom", "ironic-python-agent", "goagent", "http://h"},
		{[]string{"IPA_FILENAME=a.b.c.d", "EXTENSIONS=.d", "IPA_BASEURI=http://h"}, "a.b.c.d", "a.b.c", "ironic-python-agent", "goagent", "http://h"},
		{[]string{"IPA_BASEURI=" + EmbeddedBaseURI, "IPA_ARCH=x86_64"}, "ipa-goagent-master.tar.gz", "ipa-goagent-master", "ironic-python-agent_x86_64", "goagent", ""},
	} {
		c, err := FromEnv(envOf(tc.env...))
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if c.Filename != tc.filename || c.Stem != tc.stem || c.DestName != tc.dest || c.Flavor != tc.flav || c.BaseURI != tc.uri {
			t.Errorf("%v: got %q %q %q %q %q", tc.env, c.Filename, c.Stem, c.DestName, c.Flavor, c.BaseURI)
		}
	}
}

func TestFromEnvRefuses(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"IPA_ARCH=ppc64le"}, "set IPA_FLAVOR"},
		{[]string{"CURL_INSECURE=yes"}, "CURL_INSECURE"},
		{[]string{"IPA_BASEURI=ftp://h/x"}, "scheme"},
		{[]string{"IPA_BASEURI=http:///x"}, "no host"},
		{[]string{"CACHEURL=file://host/x"}, "CACHEURL"},
		{[]string{"SHARED_DIR=shared"}, "absolute"},
		{[]string{"IPA_FILENAME=../x.tar.gz"}, "plain file name"},
		{[]string{"IPA_ARCH=a/b", "IPA_FLAVOR=x"}, "IPA_ARCH"},
	} {
		_, err := FromEnv(envOf(tc.env...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %q", tc.env, err, tc.want)
		}
	}
}

func TestProxiesLowerCaseFirst(t *testing.T) {
	c, err := FromEnv(envOf("HTTP_PROXY=http://upper:3128", "http_proxy=http://lower:3128", "HTTPS_PROXY=http://s:3128", "NO_PROXY=.local"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	c.ExportProxies(func(k, v string) error { got[k] = v; return nil })
	if got["HTTP_PROXY"] != "http://lower:3128" || got["https_proxy"] != "http://s:3128" || got["no_proxy"] != ".local" {
		t.Errorf("exported %v", got)
	}
}

func TestStripExtension(t *testing.T) {
	ext := strings.Fields(DefaultExtensions)
	for in, want := range map[string]string{
		"ipa-centos9-master.tar.gz":        "ipa-centos9-master",
		"ipa-centos9-master.tar.gz.sha256": "ipa-centos9-master",
		"x.tar.xz":                         "x",
		"noext":                            "noext",
		"one.ext":                          "one.ext",
		"a.b.c.tar.zst":                    "a.b.c",
	} {
		if got := StripExtension(in, ext); got != want {
			t.Errorf("StripExtension(%q) = %q, want %q", in, got, want)
		}
	}
}

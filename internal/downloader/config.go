// Package downloader is the entrypoint of the Metal3 downloader image
// (cmd/ironic-agent-downloader): a drop-in for Metal3's
// ironic-ipa-downloader, whose get-resource.sh it follows name for name.
// It reads the same environment, writes the same paths below
// ${SHARED_DIR}/html/images and keeps the same cache, so ironic-image
// serves what it writes unchanged. Without IPA_BASEURI it installs the
// kernel and initramfs embedded in the image, so a cluster needs no
// network access to get its ramdisk.
package downloader

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// EmbeddedDir is where the image carries the release's IPA-layout copies
// (files/ipa-<flavour>-<branch>.kernel and .initramfs, each with its
// .sha256), as the release directory's dib/ holds them.
const EmbeddedDir = "/usr/share/ironic-agent/dib"

// EmbeddedBaseURI is the IPA_BASEURI that names the embedded files; it
// means the same as no IPA_BASEURI at all.
const EmbeddedBaseURI = "file://" + EmbeddedDir

// Defaults of get-resource.sh that this image keeps.
const (
	DefaultSharedDir  = "/shared"
	DefaultBranch     = "master"
	DefaultExtensions = ".tar.gz .tar.gz.sha256"
)

// Config is what one run does, read from the environment as
// get-resource.sh reads it.
type Config struct {
	// SharedDir is SHARED_DIR: the files go to SharedDir/html/images,
	// temporary directories to SharedDir/tmp.
	SharedDir string
	// BaseURI is IPA_BASEURI; "" installs the embedded files.
	BaseURI string
	// Branch is IPA_BRANCH with "/" replaced by "-", as get-resource.sh
	// does (stable/2025.1 becomes stable-2025.1).
	Branch string
	// Flavor is IPA_FLAVOR, by default the flavour of the release's
	// IPA-layout copies for IPA_ARCH (goagent, goagent-arm64).
	Flavor string
	// Arch is IPA_ARCH: when set, the names carry _<arch>.
	Arch string
	// Filename is IPA_FILENAME, by default ipa-<flavour>-<branch>.tar.gz.
	Filename string
	// Stem is Filename without its extension: the tarball's members are
	// <Stem>.kernel and <Stem>.initramfs.
	Stem string
	// DestName is ironic-python-agent or ironic-python-agent_<arch>.
	DestName string
	// CacheURL is CACHEURL: a server holding <Filename>.headers and
	// <Stem>-<etag>/<Filename>, asked when the base URI has nothing new.
	CacheURL string
	// Insecure is CURL_INSECURE=true: TLS certificates are not checked.
	Insecure bool
	// Verbose is CURL_VERBOSE=true: every request and response is logged.
	Verbose bool
	// HTTPProxy, HTTPSProxy and NoProxy are http(s)_proxy and no_proxy,
	// else HTTP(S)_PROXY and NO_PROXY, as get-resource.sh exports them for
	// curl (ExportProxies hands them to Go's HTTP client).
	HTTPProxy, HTTPSProxy, NoProxy string
	// EmbeddedDir is where the embedded files are (EmbeddedDir in the
	// image; tests point it elsewhere).
	EmbeddedDir string
}

// Embedded reports whether the run installs the embedded files.
func (c Config) Embedded() bool { return c.BaseURI == "" }

// ImagesDir is the directory ironic-image serves as /images.
func (c Config) ImagesDir() string { return path.Join(c.SharedDir, "html", "images") }

// FromEnv reads the configuration from getenv (os.Getenv in the image).
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		SharedDir:   getenv("SHARED_DIR"),
		BaseURI:     strings.TrimRight(getenv("IPA_BASEURI"), "/"),
		Arch:        getenv("IPA_ARCH"),
		Flavor:      getenv("IPA_FLAVOR"),
		CacheURL:    strings.TrimRight(getenv("CACHEURL"), "/"),
		EmbeddedDir: EmbeddedDir,
	}
	if c.SharedDir == "" {
		c.SharedDir = DefaultSharedDir
	}
	if !path.IsAbs(c.SharedDir) {
		return Config{}, fmt.Errorf("SHARED_DIR=%q: not an absolute path", c.SharedDir)
	}
	if c.BaseURI == EmbeddedBaseURI {
		c.BaseURI = ""
	}
	if c.BaseURI != "" {
		if err := checkURL("IPA_BASEURI", c.BaseURI); err != nil {
			return Config{}, err
		}
	}
	if c.CacheURL != "" {
		if err := checkURL("CACHEURL", c.CacheURL); err != nil {
			return Config{}, err
		}
	}
	var err error
	if c.Insecure, err = curlBool(getenv, "CURL_INSECURE"); err != nil {
		return Config{}, err
	}
	if c.Verbose, err = curlBool(getenv, "CURL_VERBOSE"); err != nil {
		return Config{}, err
	}
	if strings.ContainsAny(c.Arch, "/\x00") {
		return Config{}, fmt.Errorf("IPA_ARCH=%q: not a file name part", c.Arch)
	}
	c.Branch = getenv("IPA_BRANCH")
	if c.Branch == "" {
		c.Branch = DefaultBranch
	}
	c.Branch = strings.ReplaceAll(c.Branch, "/", "-")
	if c.Flavor == "" {
		if c.Flavor, err = DefaultFlavor(c.Arch); err != nil {
			return Config{}, err
		}
	}
	c.Filename = getenv("IPA_FILENAME")
	if c.Filename == "" {
		c.Filename = "ipa-" + c.Flavor + "-" + c.Branch + ".tar.gz"
	}
	if c.Filename != path.Base(c.Filename) || c.Filename == "." || c.Filename == ".." {
		return Config{}, fmt.Errorf("IPA_FILENAME=%q: not a plain file name", c.Filename)
	}
	extensions := DefaultExtensions
	if e, ok := lookup(getenv, "EXTENSIONS"); ok {
		extensions = e
	}
	c.Stem = StripExtension(c.Filename, strings.Fields(extensions))
	if c.Stem == "" {
		return Config{}, fmt.Errorf("IPA_FILENAME=%q: nothing is left once its extension is taken off", c.Filename)
	}
	c.DestName = DestName(c.Arch)
	c.HTTPProxy = firstSet(getenv, "http_proxy", "HTTP_PROXY")
	c.HTTPSProxy = firstSet(getenv, "https_proxy", "HTTPS_PROXY")
	c.NoProxy = firstSet(getenv, "no_proxy", "NO_PROXY")
	return c, nil
}

// ExportProxies sets both spellings of the proxy variables to the values
// get-resource.sh would give curl (the lower-case ones win), since Go's
// HTTP client reads the upper-case ones first. The image's process calls
// it once, before any request.
func (c Config) ExportProxies(setenv func(string, string) error) error {
	for _, v := range []struct{ upper, lower, value string }{
		{"HTTP_PROXY", "http_proxy", c.HTTPProxy},
		{"HTTPS_PROXY", "https_proxy", c.HTTPSProxy},
		{"NO_PROXY", "no_proxy", c.NoProxy},
	} {
		if err := setenv(v.upper, v.value); err != nil {
			return err
		}
		if err := setenv(v.lower, v.value); err != nil {
			return err
		}
	}
	return nil
}

// DestName is the name ironic-image serves: ironic-python-agent, with
// _<arch> when IPA_ARCH is set (ironic-python-agent_aarch64).
func DestName(arch string) string {
	if arch == "" {
		return "ironic-python-agent"
	}
	return "ironic-python-agent_" + arch
}

// DefaultFlavor is the flavour of the release's IPA-layout copies for an
// IPA_ARCH: goagent for x86-64 (or no IPA_ARCH), goagent-arm64 for
// aarch64, as IPA names its debian and debian-arm64 builds.
func DefaultFlavor(arch string) (string, error) {
	switch arch {
	case "", "x86_64", "amd64":
		return "goagent", nil
	case "aarch64", "arm64":
		return "goagent-arm64", nil
	}
	return "", fmt.Errorf("IPA_ARCH=%q: no default flavour for this architecture (goagent is built for x86_64 and aarch64); set IPA_FLAVOR", arch)
}

// StripExtension is get-resource.sh's get_filename_without_extension:
// the name without the first of extensions it ends in, else without its
// last two dot-separated parts (${filename%.*.*}).
func StripExtension(name string, extensions []string) string {
	for _, ext := range extensions {
		if ext != "" && strings.HasSuffix(name, ext) && len(name) > len(ext) {
			return strings.TrimSuffix(name, ext)
		}
	}
	// ${filename%.*.*}: the shortest suffix matching ".*.*", i.e. from the
	// second-to-last dot; no change when the name has fewer than two dots.
	last := strings.LastIndexByte(name, '.')
	if last < 0 {
		return name
	}
	second := strings.LastIndexByte(name[:last], '.')
	if second < 0 {
		return name
	}
	return name[:second]
}

func checkURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", name, raw, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%s=%q: no host", name, raw)
		}
	case "file":
		if u.Host != "" || !path.IsAbs(u.Path) {
			return fmt.Errorf("%s=%q: a file URL needs an absolute path and no host (file:///dir)", name, raw)
		}
	default:
		return fmt.Errorf("%s=%q: scheme %q is not http, https or file", name, raw, u.Scheme)
	}
	return nil
}

// curlBool reads a switch get-resource.sh compares with "true": only
// "true" turns it on; any other value but "" and "false" is refused rather
// than read as off.
func curlBool(getenv func(string) string, name string) (bool, error) {
	switch v := getenv(name); v {
	case "true":
		return true, nil
	case "", "false":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: get-resource.sh turns it on with \"true\" only; use true or false", name, v)
	}
}

func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

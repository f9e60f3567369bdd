package ramdisk

import (
	"fmt"
	"strings"
	"time"
)

// ReleasePath is where the initramfs says which agent and kernel it
// carries, in os-release style (KEY="value" lines), for an operator on the
// ramdisk's console and for tools reading an unpacked initramfs.
const ReleasePath = "etc/ironic-agent-release"

// ReleaseInfo is the content of ReleasePath.
type ReleaseInfo struct {
	Version string    // the VERSION file, as agent_version
	Build   string    // internal/version.Build of the agent
	Commit  string    // the full commit, "-dirty" for a modified tree
	Date    time.Time // the commit's time: the build date a rebuild keeps
	Kernel  *Kernel
}

// Format renders the file: os-release's NAME, ID, VERSION_ID and BUILD_ID,
// then the agent's own keys. Every value is double-quoted, with
// os-release's escapes.
func (r ReleaseInfo) Format() []byte {
	var b strings.Builder
	kv := func(k, v string) {
		r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
		fmt.Fprintf(&b, "%s=\"%s\"\n", k, r.Replace(v))
	}
	kv("NAME", "ironic-agent")
	kv("ID", "ironic-agent")
	kv("VERSION_ID", r.Version)
	kv("BUILD_ID", r.Build)
	kv("IRONIC_AGENT_VERSION", r.Version)
	kv("IRONIC_AGENT_COMMIT", r.Commit)
	kv("IRONIC_AGENT_BUILD_DATE", r.Date.UTC().Format(time.RFC3339))
	if k := r.Kernel; k != nil {
		kv("KERNEL_FLAVOUR", k.Flavour)
		kv("KERNEL_RELEASE", k.Version)
		kv("KERNEL_PACKAGE", k.Package)
		v := ""
		if len(k.Debs) > 0 {
			v = k.Debs[0].Version
		}
		kv("KERNEL_PACKAGE_VERSION", v)
	}
	return []byte(b.String())
}

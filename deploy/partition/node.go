package partition

import (
	"encoding/json"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
)

// What a partition image deploy reads from the cached node, as IPA's
// utils.get_node_boot_mode and get_partition_table_type_from_specs do.

// ParseCapabilities is IPA's parse_capabilities of one capabilities value:
// a JSON object, a string holding one, or "key1:value1,key2:value2"
// (malformed pairs are ignored). Anything else gives an empty map.
func ParseCapabilities(v any) map[string]string {
	out := map[string]string{}
	switch c := v.(type) {
	case map[string]any:
		for k, x := range c {
			out[k] = pyconv.Str(x)
		}
	case string:
		var m map[string]any
		if err := json.Unmarshal([]byte(c), &m); err == nil {
			return ParseCapabilities(m)
		}
		var probe any
		if json.Unmarshal([]byte(c), &probe) == nil {
			// Valid JSON that is not an object: IPA logs "Invalid
			// capabilities" and uses none.
			return out
		}
		for _, pair := range strings.Split(c, ",") {
			parts := strings.Split(pair, ":")
			if len(parts) == 2 && parts[0] != "" && parts[1] != "" {
				out[parts[0]] = parts[1]
			}
		}
	}
	return out
}

func nodeSection(node map[string]any, key string) map[string]any {
	m, _ := node[key].(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

// NodeBootMode is the boot mode a partition image is laid out for: uefi
// when secure_boot is true in instance_info or properties capabilities;
// else instance_info.deploy_boot_mode, the boot_mode capability of the
// node's properties, driver_internal_info.deploy_boot_mode, and finally
// the mode the ramdisk itself booted in; a value other than bios or uefi
// also falls back to the ramdisk's mode.
func NodeBootMode(node map[string]any, ramdiskUEFI bool) string {
	ramdisk := "bios"
	if ramdiskUEFI {
		ramdisk = "uefi"
	}
	ii := nodeSection(node, "instance_info")
	iiCaps := ParseCapabilities(ii["capabilities"])
	nodeCaps := ParseCapabilities(nodeSection(node, "properties")["capabilities"])
	secure, ok := iiCaps["secure_boot"]
	if !ok {
		secure, ok = nodeCaps["secure_boot"]
	}
	if ok && strings.ToLower(secure) == "true" {
		return "uefi"
	}
	var mode string
	if v, ok := ii["deploy_boot_mode"]; ok {
		mode = pyconv.Str(v)
	} else if v, ok := nodeCaps["boot_mode"]; ok {
		mode = v
	} else if v, ok := nodeSection(node, "driver_internal_info")["deploy_boot_mode"]; ok {
		mode = pyconv.Str(v)
	} else {
		mode = ramdisk
	}
	mode = strings.ToLower(mode)
	if mode != "uefi" && mode != "bios" {
		return ramdisk
	}
	return mode
}

// NodeDiskLabel is the partition table type: gpt for UEFI, else the
// disk_label capability (instance_info's before the node's), msdos by
// default; anything but gpt is msdos.
func NodeDiskLabel(node map[string]any, ramdiskUEFI bool) string {
	if NodeBootMode(node, ramdiskUEFI) == "uefi" {
		return "gpt"
	}
	label, ok := ParseCapabilities(nodeSection(node, "instance_info")["capabilities"])["disk_label"]
	if !ok {
		label, ok = ParseCapabilities(nodeSection(node, "properties")["capabilities"])["disk_label"]
	}
	if ok && label == "gpt" {
		return "gpt"
	}
	return "msdos"
}

package erase

import (
	"errors"
	"fmt"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
)

// EraseOptions are the knobs Ironic passes in the node's
// driver_internal_info (agent_add_clean_params) and properties.
type EraseOptions struct {
	Iterations                  int  // agent_erase_devices_iterations (1)
	Zeroize                     bool // agent_erase_devices_zeroize (true)
	ContinueIfSecureEraseFailed bool // agent_continue_if_secure_erase_failed, legacy agent_continue_if_ata_erase_failed (false)
	EnableATASecureErase        bool // agent_enable_ata_secure_erase (true)
	EnableNVMeSecureErase       bool // agent_enable_nvme_secure_erase (true)
	SkipReadOnly                bool // agent_erase_skip_read_only (false)
	WipeSpecialFilesystems      bool // wipe_special_filesystems (true): false disables the shared-filesystem check
	// GuardSpecialFilesystems is the agent's own guard_special_filesystems
	// (ipa-guard-special-filesystems, true), not a node key: false
	// disables the shared-filesystem check for every node, as in IPA.
	GuardSpecialFilesystems bool
	Concurrency             int // disk_erasure_concurrency (1)
	// SkipBlockDevices is properties.skip_block_devices: hint dicts.
	SkipBlockDevices []map[string]any
}

// DefaultEraseOptions are IPA's defaults when the node says nothing.
func DefaultEraseOptions() EraseOptions {
	return EraseOptions{Iterations: 1, Zeroize: true, EnableATASecureErase: true,
		EnableNVMeSecureErase: true, WipeSpecialFilesystems: true, GuardSpecialFilesystems: true, Concurrency: 1}
}

// EraseOptionsFromNode reads the options from a node document as Ironic
// sends it with clean steps (driver_internal_info and properties). A
// value of the wrong type is an error naming the key.
func EraseOptionsFromNode(node map[string]any) (EraseOptions, error) {
	o := DefaultEraseOptions()
	info, _ := node["driver_internal_info"].(map[string]any)
	boolOpt := func(key string, dst *bool) error {
		v, ok := info[key]
		if !ok || v == nil {
			return nil
		}
		b, err := pyconv.Bool(v)
		if err != nil {
			return fmt.Errorf("driver_internal_info.%s: %w", key, err)
		}
		*dst = b
		return nil
	}
	intOpt := func(key string, dst *int, least int) error {
		v, ok := info[key]
		if !ok || v == nil {
			return nil
		}
		n, err := pyconv.Int(v)
		if err != nil {
			return fmt.Errorf("driver_internal_info.%s: %w", key, err)
		}
		if n < int64(least) {
			return fmt.Errorf("driver_internal_info.%s: %d is below %d", key, n, least)
		}
		*dst = int(n)
		return nil
	}
	var errs []error
	errs = append(errs,
		intOpt("agent_erase_devices_iterations", &o.Iterations, 0),
		boolOpt("agent_erase_devices_zeroize", &o.Zeroize),
		boolOpt("agent_enable_ata_secure_erase", &o.EnableATASecureErase),
		boolOpt("agent_enable_nvme_secure_erase", &o.EnableNVMeSecureErase),
		boolOpt("agent_erase_skip_read_only", &o.SkipReadOnly),
		boolOpt("wipe_special_filesystems", &o.WipeSpecialFilesystems),
		intOpt("disk_erasure_concurrency", &o.Concurrency, 1),
	)
	// The new name wins; the legacy ATA name applies only when the new one
	// is absent (IPA's compatibility rule).
	if _, ok := info["agent_continue_if_secure_erase_failed"]; ok {
		errs = append(errs, boolOpt("agent_continue_if_secure_erase_failed", &o.ContinueIfSecureEraseFailed))
	} else {
		errs = append(errs, boolOpt("agent_continue_if_ata_erase_failed", &o.ContinueIfSecureEraseFailed))
	}
	if props, ok := node["properties"].(map[string]any); ok {
		if raw, ok := props["skip_block_devices"]; ok && raw != nil {
			list, ok := raw.([]any)
			if !ok {
				errs = append(errs, fmt.Errorf("properties.skip_block_devices: want a list of hint objects, got %T", raw))
			}
			for i, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					errs = append(errs, fmt.Errorf("properties.skip_block_devices[%d]: want an object, got %T", i, e))
					continue
				}
				o.SkipBlockDevices = append(o.SkipBlockDevices, m)
			}
		}
	}
	return o, errors.Join(errs...)
}

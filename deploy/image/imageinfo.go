package image

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
)

// ImageInfo is the image_info parameter of standby.prepare_image and of the
// write_image deploy step (built by Ironic's AgentDeploy.write_image).
type ImageInfo struct {
	ID              string
	URLs            []string
	DiskFormat      string
	ContainerFormat string
	StreamRawImages bool
	Checksum        string // hex digest or http(s) URL of a checksum file
	OSHashAlgo      string
	OSHashValue     string
	Proxies         map[string]string
	NoProxy         string
	NodeUUID        string
	ImageType       string // "partition" for partition images, else ""
	DeployBootMode  string
	Configdrive     string
	// Authorization is image_request_authorization decoded: the whole
	// value of the Authorization header for image requests.
	Authorization string
	// User and Password come with image_server_auth_strategy=http_basic.
	AuthStrategy string
	User         string
	Password     string
	// Fields is image_info as received, for the partition image fields
	// (PartitionParams).
	Fields map[string]any
}

// ParseImageInfo validates image_info exactly as IPA's _validate_image_info
// (same checks, same order, same words) and decodes it. md5Enabled is IPA's
// md5_enabled: a 32-character checksum only counts when it is true.
func ParseImageInfo(m map[string]any, md5Enabled bool) (*ImageInfo, error) {
	if m == nil {
		m = map[string]any{}
	}
	for _, field := range []string{"id", "urls"} {
		if _, ok := m[field]; !ok {
			return nil, errInvalidParams(fmt.Sprintf("Image is missing '%s' field.", field))
		}
	}
	rawURLs, ok := m["urls"].([]any)
	if !ok || len(rawURLs) == 0 {
		if s, isStrings := m["urls"].([]string); isStrings && len(s) > 0 {
			rawURLs = make([]any, len(s))
			for i := range s {
				rawURLs[i] = s[i]
			}
		} else {
			return nil, errInvalidParams("Image 'urls' must be a list with at least one element.")
		}
	}
	info := &ImageInfo{StreamRawImages: true, Fields: m}
	for _, u := range rawURLs {
		s, ok := u.(string)
		if !ok || s == "" {
			return nil, errInvalidParams(fmt.Sprintf("Image 'urls' must hold non-empty strings, got %v.", u))
		}
		info.URLs = append(info.URLs, s)
	}
	checksumAvail, md5Avail, osHashAvail := false, false, false
	if v, present := m["checksum"]; present && v != nil {
		s, ok := v.(string)
		if !ok || s == "" {
			return nil, errInvalidParams("Image 'checksum' must be a non-empty string.")
		}
		if isChecksumURL(s) || len(s) > 32 {
			checksumAvail = true
		} else if md5Enabled {
			md5Avail = true
		}
		info.Checksum = s
	}
	algo, value := m["os_hash_algo"], m["os_hash_value"]
	if pyconv.Truthy(algo) || pyconv.Truthy(value) {
		if s, ok := algo.(string); !ok || s == "" {
			return nil, errInvalidParams("Image 'os_hash_algo' must be a non-empty string.")
		}
		if s, ok := value.(string); !ok || s == "" {
			return nil, errInvalidParams("Image 'os_hash_value' must be a non-empty string.")
		}
		info.OSHashAlgo, info.OSHashValue = algo.(string), value.(string)
		osHashAvail = true
	}
	if !checksumAvail && !md5Avail && !osHashAvail {
		return nil, errInvalidParams("Image checksum is not available, either the 'checksum' field " +
			"or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification.")
	}
	info.ID = fmt.Sprint(m["id"])
	if s, ok := m["id"].(string); ok {
		info.ID = s
	}
	info.DiskFormat = str(m["disk_format"])
	info.ContainerFormat = str(m["container_format"])
	if b, ok := m["stream_raw_images"].(bool); ok {
		info.StreamRawImages = b
	}
	info.NoProxy = str(m["no_proxy"])
	info.NodeUUID = str(m["node_uuid"])
	info.ImageType = str(m["image_type"])
	info.DeployBootMode = str(m["deploy_boot_mode"])
	info.Configdrive = str(m["configdrive"])
	if p, ok := m["proxies"].(map[string]any); ok {
		info.Proxies = map[string]string{}
		for k, v := range p {
			if s, ok := v.(string); ok && s != "" {
				info.Proxies[k] = s
			}
		}
	}
	if a := str(m["image_request_authorization"]); a != "" {
		dec, err := base64.StdEncoding.DecodeString(a)
		if err != nil {
			return nil, errInvalidParams("Image 'image_request_authorization' is not valid base64: " + err.Error())
		}
		info.Authorization = string(dec)
	}
	info.AuthStrategy = str(m["image_server_auth_strategy"])
	info.User = str(m["image_server_user"])
	info.Password = str(m["image_server_password"])
	return info, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func isChecksumURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// PartitionParams are the partition image fields of image_info (Ironic
// copies them from instance_info: root_mb = 1024 * root_gb, swap_mb,
// ephemeral_mb, ephemeral_format, preserve_ephemeral).
type PartitionParams struct {
	RootMiB           int64
	SwapMiB           int64
	EphemeralMiB      int64
	EphemeralFormat   string
	PreserveEphemeral bool
}

// PartitionParams reads and checks the partition image fields; IPA takes
// int() of each size, so integral numbers and numeric strings are
// accepted, and root_mb is required.
func (i *ImageInfo) PartitionParams() (PartitionParams, error) {
	var p PartitionParams
	for _, f := range []struct {
		key      string
		dst      *int64
		required bool
	}{{"root_mb", &p.RootMiB, true}, {"swap_mb", &p.SwapMiB, false}, {"ephemeral_mb", &p.EphemeralMiB, false}} {
		v, err := pyInt(i.Fields[f.key])
		if err != nil {
			return p, errInvalidParams(fmt.Sprintf("image_info %s: %v", f.key, err))
		}
		if v == nil {
			if f.required {
				return p, errInvalidParams(fmt.Sprintf("image_info %s is required for partition images (image_type=partition): set instance_info root_gb", f.key))
			}
			continue
		}
		if *v < 0 {
			return p, errInvalidParams(fmt.Sprintf("image_info %s must not be negative, got %d", f.key, *v))
		}
		*f.dst = *v
	}
	p.EphemeralFormat = str(i.Fields["ephemeral_format"])
	// oslo's bool_from_string, as Ironic parses it; an empty string is
	// as good as absent.
	if v := i.Fields["preserve_ephemeral"]; v != nil && v != "" {
		b, err := pyconv.Bool(v)
		if err != nil {
			return p, errInvalidParams(fmt.Sprintf("image_info preserve_ephemeral: %v", err))
		}
		p.PreserveEphemeral = b
	}
	return p, nil
}

// pyInt is Python's int() of a JSON value: nil for null or absent.
func pyInt(v any) (*int64, error) {
	if v == nil {
		return nil, nil
	}
	n, err := pyconv.Int(v)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

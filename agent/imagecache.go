package agent

import (
	"sync"

	"github.com/ironic-go/ironic-agent/deploy/image"
)

// imageCache is IPA's StandbyExtension.cached_image_id: when prepare_image
// is sent again for the image this agent last wrote (Ironic retrying a
// deploy whose config drive or partition check failed), the image is not
// downloaded and written again; the partition check, the config drive and
// the partition UUIDs still run.
//
// IPA sets cached_image_id only in _cache_and_write_image, the path taken
// unless stream_raw_images is true and disk_format is "raw"; a streamed
// raw image never counts as cached, so sending it again rewrites it. This
// agent streams every image but keeps that rule, so Ironic sees the same
// behaviour. Three rules are stricter than IPA, which compares the id
// only: the hit also needs the same install device (root-device hints can
// change between attempts); the id is forgotten when a write starts (IPA
// keeps the old id across a failed or streamed write of another image,
// after which the disk no longer holds it); and the erase steps forget it
// (with fast-track the same agent can clean the disk and then be asked to
// deploy the same image again).
type imageCache struct {
	mu     sync.Mutex
	id     string
	device string
}

// hit reports whether id was the last image written to device.
func (c *imageCache) hit(id, device string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id != "" && c.id == id && c.device == device
}

// forget drops the entry; called before anything writes a disk.
func (c *imageCache) forget() {
	c.mu.Lock()
	c.id, c.device = "", ""
	c.mu.Unlock()
}

// written records a successful write of info to device, unless IPA would
// have streamed it (and so not cached it).
func (c *imageCache) written(info *image.ImageInfo, device string) {
	if info.StreamRawImages && info.DiskFormat == "raw" {
		return
	}
	c.mu.Lock()
	c.id, c.device = info.ID, device
	c.mu.Unlock()
}

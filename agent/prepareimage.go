package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/image"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// imageProgressInterval is how often a running image write logs progress.
const imageProgressInterval = 10 * time.Second

// bindPrepareImage is standby.prepare_image: image_info is validated at
// bind time with IPA's checks (a 400 before anything runs), then the image
// is streamed onto the install device, verified, synced, the config drive
// written, and the partition UUIDs recorded.
func (a *Agent) bindPrepareImage(p command.Params) (command.Func, error) {
	var args struct {
		ImageInfo   map[string]any `json:"image_info"`
		Configdrive *string        `json:"configdrive"`
	}
	if err := p.Decode(&args); err != nil {
		return nil, err
	}
	info, err := image.ParseImageInfo(args.ImageInfo, true)
	if err != nil {
		return nil, err
	}
	configdrive := info.Configdrive
	if args.Configdrive != nil {
		configdrive = *args.Configdrive
	}
	return func(ctx context.Context) (any, error) {
		msg, err := a.prepareImage(ctx, info, configdrive)
		return msg, err
	}, nil
}

func (a *Agent) prepareImage(ctx context.Context, info *image.ImageInfo, configdrive string) (string, error) {
	guard := blockdev.NewGuard(a.generic.AllowedDevices)
	disks, err := a.installDisks(ctx)
	if err != nil {
		return "", err
	}
	disk, err := a.installDevice(guard, disks)
	if err != nil {
		return "", ipaerror.DeploymentError(err.Error())
	}
	tlsConf, err := a.TLSClientOptions(0).TLSConfig()
	if err != nil {
		return "", err
	}
	opts := image.WriteOptions{
		Download:         image.NewDownloadOptions(),
		Guard:            guard,
		Logger:           a.log,
		ProgressInterval: imageProgressInterval,
	}
	opts.Download.TLS = tlsConf
	// The operator's image_download_connection_* options (kernel
	// ipa-image-download-connection-*), not only IPA's defaults.
	opts.Download.ConnectionTimeout = a.cfg.ImageDownloadConnectionTimeout
	opts.Download.Retries = a.cfg.ImageDownloadConnectionRetries
	opts.Download.RetryInterval = a.cfg.ImageDownloadConnectionRetryDelay
	opts.Download.MaxDuration = a.cfg.ImageDownloadMaxDuration
	// The config file's values, which Ironic's lookup config overrides
	// (Debian's Ironic 21.4 sends all three).
	opts.MD5Enabled = a.cfg.MD5Enabled
	opts.DisableDeepInspection = a.cfg.DisableDeepImageInspection
	opts.PermittedFormats = a.cfg.PermittedImageFormats
	lc := a.LookupConfig()
	if v := lc.AgentMD5ChecksumEnable; v != nil {
		opts.MD5Enabled = *v
	}
	if v := lc.DisableDeepImageInspection; v != nil {
		opts.DisableDeepInspection = *v
	}
	if lc.PermittedImageFormats != nil {
		opts.PermittedFormats = lc.PermittedImageFormats
	}
	opts.Progress = func(p image.WriteProgress) {
		a.log.Info(EventWritingImage, "image", info.ID, "device", disk.Name, "received", p.Received, "total", p.Total, "written", p.Written, "elapsed", p.Elapsed.Round(time.Second))
	}
	if info.ImageType == "partition" {
		return a.preparePartitionImage(ctx, info, disk.Name, configdrive, guard, opts)
	}
	if a.images.hit(info.ID, disk.Name) {
		// IPA's "don't write image again if already cached".
		a.log.Info(EventImageAlreadyWritten, "image", info.ID, "device", disk.Name)
	} else if err := a.writeWholeDiskImage(ctx, info, disk.Name, guard, opts); err != nil {
		return "", err
	}
	if err := image.ValidatePartitioning(disk.Name); err != nil {
		return "", err
	}
	uuids, err := a.generic.finishWholeDiskImage(ctx, disk.Name, configdrive)
	if err != nil {
		return "", err
	}
	return imageWrittenMessage(info, disk.Name, uuids), nil
}

// imageWrittenMessage is IPA's _message_format: the result Ironic logs,
// with the root UUID (and, for UEFI, the ESP's).
func imageWrittenMessage(info *image.ImageInfo, dev string, uuids map[string]any) string {
	root := uuids["root uuid"]
	if root == nil {
		root = "None" // Python's format() of a missing UUID
	}
	if efi, ok := uuids["efi system partition uuid"]; ok && efi != nil && efi != "" && info.DeployBootMode == "uefi" {
		return fmt.Sprintf("image (%s) written to device %s root_uuid=%v efi_system_partition_uuid=%v", info.ID, dev, root, efi)
	}
	return fmt.Sprintf("image (%s) written to device %s root_uuid=%v", info.ID, dev, root)
}

// writeWholeDiskImage streams the image onto dev and moves a GPT backup
// header to the disk's end, as IPA's _write_image does.
func (a *Agent) writeWholeDiskImage(ctx context.Context, info *image.ImageInfo, dev string, guard *blockdev.Guard, opts image.WriteOptions) error {
	a.images.forget()
	res, err := image.WriteImage(ctx, info, dev, opts)
	if err != nil {
		return err
	}
	a.log.Info(res.Summary())
	if moved, err := image.FixGPTBackup(guard, dev); err != nil {
		return err
	} else if moved {
		a.log.Info("moved the GPT backup header to the end of the disk", "device", dev)
	}
	a.images.written(info, dev)
	return nil
}

// writeImageStep is the write_image deploy step: IPA runs prepare_image
// inside it without adding it to the command list (Ironic only looks at
// the last command, which must stay execute_deploy_step) and returns its
// command_result.
func (g *GenericManager) writeImageStep(ctx context.Context, req hwmgr.Request) (any, error) {
	if g.agent == nil || g.agent.Executor() == nil {
		return nil, errors.New("write_image needs a running agent")
	}
	params := command.Params{}
	for _, k := range []string{"image_info", "configdrive"} {
		if v, ok := req.Args[k]; ok {
			params[k] = v
		}
	}
	if _, ok := params["image_info"]; !ok {
		params["image_info"] = json.RawMessage("null")
	}
	return g.agent.Executor().RunNested(ctx, "standby.prepare_image", params)
}

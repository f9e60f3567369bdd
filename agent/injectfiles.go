package agent

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/ironic-go/ironic-agent/agent/agenttls"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/injectfiles"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// injectFilesStep is inject_files (deploy and service step): the files of
// node.properties[inject_files] then the files argument, on partitions of
// the install disk (deploy/injectfiles). verify_ca is IPA's: true (the
// agent's TLS options), false (no verification) or a CA bundle path.
func (g *GenericManager) injectFilesStep(ctx context.Context, req hwmgr.Request) (any, error) {
	var fromProps json.RawMessage
	if props, ok := req.Node["properties"].(map[string]any); ok {
		if v, ok := props["inject_files"]; ok {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, ipaerror.InvalidCommandParams("node.properties.inject_files: %v", err)
			}
			fromProps = b
		}
	}
	files, err := injectfiles.Parse(fromProps, req.Args["files"])
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		g.logger().Info("no files to inject")
		return nil, nil
	}
	client, err := g.injectFilesClient(req.Args["verify_ca"])
	if err != nil {
		return nil, err
	}
	disks, err := g.Disks(ctx)
	if err != nil {
		return nil, err
	}
	guard := blockdev.NewGuard(g.AllowedDevices)
	root, err := deploy.InstallDevice(guard, disks, req.Node)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range guard.Filter(disks) {
		names = append(names, d.Name)
	}
	if g.agent != nil {
		// The install disk will no longer hold exactly the image last
		// written: a later prepare_image of it must write it again.
		g.agent.images.forget()
	}
	in := &injectfiles.Injector{Guard: guard, RootDevice: root.Name, Disks: names, HTTP: client, Log: g.logger()}
	return nil, in.Inject(ctx, files, req.Node, req.Ports)
}

// injectFilesClient is the HTTP client for URL contents: the agent's TLS
// options, without verification when verify_ca is false (Python's truth
// value, as IPA's StreamingClient tests it: false, 0, "" and null
// disable it; any other value keeps the agent's settings).
func (g *GenericManager) injectFilesClient(raw json.RawMessage) (*http.Client, error) {
	var opts agenttls.ClientOptions
	if g.agent != nil {
		opts = g.agent.TLSClientOptions(0)
	}
	if len(raw) > 0 {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, ipaerror.InvalidCommandParams("verify_ca: %v", err)
		}
		opts.Insecure = opts.Insecure || !pyconv.Truthy(v)
	}
	return agenttls.NewHTTPClient(opts)
}

package lldp

import (
	"context"
	"log/slog"
	"time"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
)

// InspectionRaw is what IPA's inspection collector "lldp" adds to the
// inspection data as "lldp_raw": for every interface of the inventory
// except lo, the TLVs of the first frame heard, {"eth0": [[1, "04..."],
// ...], "eth1": []}. Ironic's and ironic-inspector's LLDP hooks prefer it to
// interfaces[].lldp.
//
// Capture failures are logged and leave the interface out, as IPA leaves
// out what it could not capture; the result is never nil, so it encodes as
// {} at worst.
func InspectionRaw(ctx context.Context, inv *inventory.Inventory, timeout time.Duration, logger *slog.Logger) map[string][]inventory.LLDPTLV {
	return inspectionRaw(ctx, inv, timeout, logger, Capture)
}

// Source listens for LLDP on named interfaces: Capturer, or a stand-in
// such as the agent's for a machine it only reads from a fixture tree
// (collector.LLDPCapturer has the same method).
type Source interface {
	Capture(ctx context.Context, ifaces []string, timeout time.Duration) (map[string][]inventory.LLDPTLV, error)
}

// InspectionRawFrom is InspectionRaw listening through src.
func InspectionRawFrom(ctx context.Context, inv *inventory.Inventory, timeout time.Duration, logger *slog.Logger, src Source) map[string][]inventory.LLDPTLV {
	return inspectionRaw(ctx, inv, timeout, logger, func(ctx context.Context, ifaces []string, timeout time.Duration, _ *slog.Logger) (map[string][]inventory.LLDPTLV, error) {
		return src.Capture(ctx, ifaces, timeout)
	})
}

func inspectionRaw(ctx context.Context, inv *inventory.Inventory, timeout time.Duration, logger *slog.Logger,
	capture func(context.Context, []string, time.Duration, *slog.Logger) (map[string][]inventory.LLDPTLV, error)) map[string][]inventory.LLDPTLV {
	logger = logging.OrDiscard(logger)
	var names []string
	for _, iface := range inv.Interfaces {
		if iface.Name != "lo" {
			names = append(names, iface.Name)
		}
	}
	out := map[string][]inventory.LLDPTLV{}
	if len(names) == 0 {
		return out
	}
	got, err := capture(ctx, names, timeout, logger)
	if err != nil {
		logger.Warn("LLDP capture for inspection incomplete", "error", err)
	}
	for name, tlvs := range got {
		out[name] = tlvs
	}
	return out
}

// Capturer is Capture for collector.Options.LLDP (collector.LLDPCapturer).
// The collector treats any error as "no LLDP data at all", so Capturer
// logs the failures of single interfaces (they come back as []) and fails
// only when nothing could be listened on or the context ended.
type Capturer struct {
	Logger *slog.Logger
}

// Capture implements collector.LLDPCapturer.
func (c Capturer) Capture(ctx context.Context, ifaces []string, timeout time.Duration) (map[string][]inventory.LLDPTLV, error) {
	got, err := Capture(ctx, ifaces, timeout, c.Logger)
	if err != nil && len(got) > 0 && ctx.Err() == nil {
		if c.Logger != nil {
			c.Logger.Warn("LLDP capture incomplete", "error", err)
		}
		return got, nil
	}
	return got, err
}

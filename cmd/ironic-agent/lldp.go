package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/lldp"
)

// stringList is a flag that may be repeated and takes comma-separated values.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

func runLLDP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lldp", "[--interface X[,Y]] [--timeout D] [--format json|table] [--verbose]",
		"Listen for LLDP on this machine's NICs (all of IPA's candidate interfaces: physical\n"+
			"NICs, VLANs and bonds) at once and print each NIC's switch neighbour: the raw TLVs\n"+
			"exactly as the inventory's interfaces[].lldp carries them, and their decoding.\n"+
			"Returns once every NIC has heard a frame or the timeout passes. Needs root.", stderr)
	var ifaces stringList
	fs.Var(&ifaces, "interface", "listen on this interface only (repeatable, or comma-separated)")
	timeout := fs.Duration("timeout", lldp.DefaultTimeout, "give up on NICs that heard nothing after this long (IPA's ipa-lldp-timeout)")
	format := fs.String("format", "table", "output format: table or json")
	verbose := fs.Bool("verbose", false, "log each frame as it arrives")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "json" && *format != "table" {
		return fmt.Errorf("--format %q: want json or table", *format)
	}
	if *timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", *timeout)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	names := []string(ifaces)
	if len(names) == 0 {
		var err error
		if names, err = collector.InterfaceNames(collector.Options{}); err != nil {
			return fmt.Errorf("listing interfaces: %w", err)
		}
		if len(names) == 0 {
			return fmt.Errorf("no candidate interfaces (physical NICs, VLANs, bonds) in /sys/class/net; name one with --interface")
		}
	}
	got, err := lldp.Capture(ctx, names, *timeout, logger)
	if err != nil && len(got) == 0 {
		return err
	}
	if err != nil {
		logger.Warn("LLDP capture incomplete", "error", err)
	}
	if *format == "json" {
		return writeLLDPJSON(stdout, names, got)
	}
	return writeLLDPTable(stdout, names, got)
}

// lldpReport is one interface in the JSON output: the raw TLVs as the
// inventory carries them, and what they say.
type lldpReport struct {
	LLDP     []inventory.LLDPTLV `json:"lldp"`
	Neighbor *lldp.Neighbor      `json:"neighbor"`
	Error    string              `json:"error,omitempty"`
}

func writeLLDPJSON(w io.Writer, names []string, got map[string][]inventory.LLDPTLV) error {
	out := map[string]lldpReport{}
	for _, name := range names {
		tlvs, ok := got[name]
		if !ok {
			out[name] = lldpReport{Error: "not captured (see the log)"}
			continue
		}
		r := lldpReport{LLDP: tlvs}
		if len(tlvs) > 0 {
			n, err := lldp.Decode(tlvs)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Neighbor = &n
			}
		}
		out[name] = r
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeLLDPTable(w io.Writer, names []string, got map[string][]inventory.LLDPTLV) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tCHASSIS ID\tPORT ID\tPORT DESCRIPTION\tSYSTEM NAME\tPVID\tVLANS\tMTU\tLAG\tMGMT ADDRESSES")
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		tlvs, ok := got[name]
		switch {
		case !ok:
			fmt.Fprintf(tw, "%s\t(not captured)\n", name)
			continue
		case len(tlvs) == 0:
			fmt.Fprintf(tw, "%s\t(nothing heard)\n", name)
			continue
		}
		n, err := lldp.Decode(tlvs)
		if err != nil {
			fmt.Fprintf(tw, "%s\t(%v)\n", name, err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name,
			dash(n.ChassisID), dash(n.PortID), dash(n.PortDescription), dash(n.SystemName),
			optInt(n.PortVLANID), vlanList(n.VLANs), optInt(n.MTU), lag(n.LinkAggregation),
			dash(strings.Join(n.ManagementAddresses, ",")))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func vlanList(vs []lldp.VLAN) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%d(%s)", v.ID, v.Name))
	}
	return dash(strings.Join(parts, ","))
}

func lag(l *lldp.LinkAggregation) string {
	switch {
	case l == nil:
		return "-"
	case l.Enabled:
		return fmt.Sprintf("on(%d)", l.PortID)
	case l.Supported:
		return "off"
	}
	return "no"
}

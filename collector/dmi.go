package collector

import (
	"context"
	"fmt"

	"github.com/ironic-go/ironic-agent/collector/internal/dmidecode"
)

// DMI is the inspection data's "dmi" (IPA's dmi-decode collector):
// dmidecode's BIOS, processor and memory blocks as IPA's parse_dmi splits
// them. Keys are dmidecode's labels ("Vendor", "Max Speed", ...), values
// its text.
type DMI struct {
	// BIOS is the last type 0 block ({} when there is none).
	BIOS DMIRecord `json:"bios"`
	// CPU has one block per type 4 structure.
	CPU []DMIRecord `json:"cpu"`
	// Memory is the first type 16 block without its "Handle", with
	// "Number Of Devices" summed over every type 16 block (a number) and
	// "devices" holding the type 17 blocks; {"devices": []} when the
	// table has no type 16.
	Memory DMIRecord `json:"memory"`
}

// DMIRecord is one dmidecode block with its keys in dmidecode's order
// (IPA's dict keeps insertion order and so does its JSON). A value is a
// string, a []string (a list attribute such as "Characteristics", or an
// attribute dmidecode printed empty), an int, or a []DMIRecord.
type DMIRecord struct {
	r dmidecode.Record
}

// Get returns the value of key.
func (r DMIRecord) Get(key string) (any, bool) {
	v, ok := r.r.Get(key)
	if l, isList := v.([]dmidecode.Record); isList {
		return dmiRecords(l), ok
	}
	return v, ok
}

// Keys lists the keys in order.
func (r DMIRecord) Keys() []string { return r.r.Keys() }

// MarshalJSON writes the record as an object in key order; an empty
// record is {}.
func (r DMIRecord) MarshalJSON() ([]byte, error) { return r.r.MarshalJSON() }

func dmiRecords(l []dmidecode.Record) []DMIRecord {
	out := make([]DMIRecord, len(l))
	for i, r := range l {
		out[i] = DMIRecord{r}
	}
	return out
}

// DMIDecode builds IPA's dmi-decode collector data from the SMBIOS table
// below opts.Root (sys/firmware/dmi/tables), without running dmidecode:
// the text dmidecode 3.6 prints for `-t bios -t processor -t memory`,
// split by a port of IPA's parser. A machine without a table gives the
// empty document, as dmidecode's "No SMBIOS nor DMI entry point found"
// does on x86. A damaged table gives the structures before the damage
// (with one warning). An unreadable table is an error, as is a memory
// array block without a device count, which makes IPA's parser fail.
func DMIDecode(ctx context.Context, opts Options) (*DMI, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &collection{opts: opts, fs: opts.fs(), log: opts.logger()}
	si, err := c.smbiosTable()
	if err != nil {
		return nil, fmt.Errorf("reading the SMBIOS table %s: %w", c.fs.Path(smbiosTablePath), err)
	}
	text := ""
	if si != nil {
		text = dmidecodeText(si)
	}
	doc, err := dmidecode.Parse(text)
	if err != nil {
		return nil, err
	}
	return &DMI{BIOS: DMIRecord{doc.BIOS}, CPU: dmiRecords(doc.CPU), Memory: DMIRecord{doc.Memory}}, nil
}

// dmidecodeText is the text dmidecode prints for the decoded table.
func dmidecodeText(si *smbiosInfo) string {
	structs := make([]dmidecode.Structure, len(si.Structures))
	for i, s := range si.Structures {
		structs[i] = dmidecode.Structure(s)
	}
	return dmidecode.Text(structs, dmiVersion(si.EntryPoint))
}

// dmiVersion is dmidecode's SMBIOS version number for the entry point
// (nil when there is none).
func dmiVersion(ep *smbiosEntryPoint) uint16 {
	if ep == nil {
		return dmidecode.Version(nil)
	}
	return dmidecode.Version(&dmidecode.EntryPoint{Major: ep.Major, Minor: ep.Minor})
}

// ErrDMIUnparsable marks a table whose dmidecode text IPA's parser
// rejects: a memory array block without "Number Of Devices" (a type 16
// structure shorter than 15 bytes). IPA then sends "dmi": {} and reports
// the collector as failed.
var ErrDMIUnparsable = dmidecode.ErrUnparsable

package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	fields []dmiField
}

type dmiField struct {
	key   string
	value any
}

// Get returns the value of key.
func (r DMIRecord) Get(key string) (any, bool) {
	for _, f := range r.fields {
		if f.key == key {
			return f.value, true
		}
	}
	return nil, false
}

// Keys lists the keys in order.
func (r DMIRecord) Keys() []string {
	keys := make([]string, len(r.fields))
	for i, f := range r.fields {
		keys[i] = f.key
	}
	return keys
}

// set replaces the value of an existing key in place, as a Python dict
// does, or appends the key.
func (r *DMIRecord) set(key string, value any) {
	for i := range r.fields {
		if r.fields[i].key == key {
			r.fields[i].value = value
			return
		}
	}
	r.fields = append(r.fields, dmiField{key, value})
}

func (r *DMIRecord) remove(key string) {
	for i := range r.fields {
		if r.fields[i].key == key {
			r.fields = append(r.fields[:i], r.fields[i+1:]...)
			return
		}
	}
}

// MarshalJSON writes the record as an object in key order; an empty
// record is {}.
func (r DMIRecord) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range r.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("dmi key %q: %w", f.key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
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
	if si == nil {
		return parseDMIText("")
	}
	return parseDMIText(dmidecodeText(si.Structures, dmiVersion(si.EntryPoint)))
}

// ErrDMIUnparsable marks a table whose dmidecode text IPA's parser
// rejects: a memory array block without "Number Of Devices" (a type 16
// structure shorter than 15 bytes). IPA then sends "dmi": {} and reports
// the collector as failed.
var ErrDMIUnparsable = errors.New("IPA's dmidecode parser fails on this table")

// errNoDeviceCount is IPA's KeyError.
var errNoDeviceCount = fmt.Errorf("%w: a Physical Memory Array block has no 'Number Of Devices'", ErrDMIUnparsable)

// parseDMIText is IPA's parse_dmi (ironic_python_agent/dmi_inspector.py)
// over dmidecode's text: blocks split at blank lines, those starting with
// "Handle 0x" of types 0, 4, 16 and 17 kept, each line "key: value" (an
// empty value starts a list that the following lines without a colon
// fill), the handle line kept as "Handle".
func parseDMIText(text string) (*DMI, error) {
	dmi := &DMI{CPU: []DMIRecord{}}
	var arrays, devices []DMIRecord
	for block := range strings.SplitSeq(text, "\n\n") {
		if !strings.HasPrefix(block, "Handle 0x") {
			continue
		}
		// "Handle 0x0018, DMI type 17, 27 bytes"
		parts := strings.SplitN(block, ",", 3)
		if len(parts) < 2 {
			continue
		}
		typ, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(parts[1]), "DMI type")))
		if err != nil {
			continue
		}
		switch typ {
		case 0:
			dmi.BIOS = parseDMIBlock(block)
		case 4:
			dmi.CPU = append(dmi.CPU, parseDMIBlock(block))
		case 16:
			arrays = append(arrays, parseDMIBlock(block))
		case 17:
			devices = append(devices, parseDMIBlock(block))
		}
	}
	if len(arrays) == 0 {
		dmi.Memory.set("devices", []DMIRecord{})
		if len(devices) > 0 {
			dmi.Memory.set("devices", devices)
		}
		return dmi, nil
	}
	count := 0
	for _, a := range arrays {
		v, ok := a.Get("Number Of Devices")
		s, isString := v.(string)
		if !ok || !isString {
			return nil, errNoDeviceCount
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%w: a Physical Memory Array's 'Number Of Devices' %q is not a number", ErrDMIUnparsable, s)
		}
		count += n
	}
	dmi.Memory = arrays[0]
	dmi.Memory.set("Number Of Devices", count)
	dmi.Memory.remove("Handle")
	if len(devices) > 0 {
		dmi.Memory.set("devices", devices)
	}
	return dmi, nil
}

// parseDMIBlock is IPA's _parse_handle_block.
func parseDMIBlock(block string) DMIRecord {
	var r DMIRecord
	var listKey string
	inList := false
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, ":"):
			k, v, _ := strings.Cut(line, ":")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			inList = v == ""
			if inList {
				listKey = k
				r.set(k, []string{})
			} else {
				r.set(k, v)
			}
		case strings.Contains(line, "Handle 0x"):
			r.set("Handle", line)
		case inList:
			v, _ := r.Get(listKey)
			l, _ := v.([]string)
			r.set(listKey, append(l, line))
		}
	}
	return r
}

package dmidecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Doc is dmidecode's BIOS, processor and memory blocks as IPA's parse_dmi
// splits them. Keys are dmidecode's labels ("Vendor", "Max Speed", ...),
// values its text.
type Doc struct {
	// BIOS is the last type 0 block ({} when there is none).
	BIOS Record `json:"bios"`
	// CPU has one block per type 4 structure.
	CPU []Record `json:"cpu"`
	// Memory is the first type 16 block without its "Handle", with
	// "Number Of Devices" summed over every type 16 block (a number) and
	// "devices" holding the type 17 blocks; {"devices": []} when the
	// table has no type 16.
	Memory Record `json:"memory"`
}

// Record is one dmidecode block with its keys in dmidecode's order (IPA's
// dict keeps insertion order and so does its JSON). A value is a string, a
// []string (a list attribute such as "Characteristics", or an attribute
// dmidecode printed empty), an int, or a []Record.
type Record struct {
	fields []field
}

type field struct {
	key   string
	value any
}

// Get returns the value of key.
func (r Record) Get(key string) (any, bool) {
	for _, f := range r.fields {
		if f.key == key {
			return f.value, true
		}
	}
	return nil, false
}

// Keys lists the keys in order.
func (r Record) Keys() []string {
	keys := make([]string, len(r.fields))
	for i, f := range r.fields {
		keys[i] = f.key
	}
	return keys
}

// set replaces the value of an existing key in place, as a Python dict
// does, or appends the key.
func (r *Record) set(key string, value any) {
	for i := range r.fields {
		if r.fields[i].key == key {
			r.fields[i].value = value
			return
		}
	}
	r.fields = append(r.fields, field{key, value})
}

func (r *Record) remove(key string) {
	for i := range r.fields {
		if r.fields[i].key == key {
			r.fields = append(r.fields[:i], r.fields[i+1:]...)
			return
		}
	}
}

// MarshalJSON writes the record as an object in key order; an empty
// record is {}.
func (r Record) MarshalJSON() ([]byte, error) {
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

// ErrUnparsable marks a table whose dmidecode text IPA's parser rejects: a
// memory array block without "Number Of Devices" (a type 16 structure
// shorter than 15 bytes). IPA then sends "dmi": {} and reports the
// collector as failed.
var ErrUnparsable = errors.New("IPA's dmidecode parser fails on this table")

// ErrNoDeviceCount is IPA's KeyError. It is its own type rather than
// fmt.Errorf's so that no package initialiser formats it.
var ErrNoDeviceCount error = noDeviceCount{}

type noDeviceCount struct{}

func (noDeviceCount) Error() string {
	return ErrUnparsable.Error() + ": a Physical Memory Array block has no 'Number Of Devices'"
}

func (noDeviceCount) Unwrap() error { return ErrUnparsable }

// Parse is IPA's parse_dmi (ironic_python_agent/dmi_inspector.py) over
// dmidecode's text: blocks split at blank lines, those starting with
// "Handle 0x" of types 0, 4, 16 and 17 kept, each line "key: value" (an
// empty value starts a list that the following lines without a colon
// fill), the handle line kept as "Handle".
func Parse(text string) (*Doc, error) {
	dmi := &Doc{CPU: []Record{}}
	var arrays, devices []Record
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
			dmi.BIOS = parseBlock(block)
		case 4:
			dmi.CPU = append(dmi.CPU, parseBlock(block))
		case 16:
			arrays = append(arrays, parseBlock(block))
		case 17:
			devices = append(devices, parseBlock(block))
		}
	}
	if len(arrays) == 0 {
		dmi.Memory.set("devices", []Record{})
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
			return nil, ErrNoDeviceCount
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%w: a Physical Memory Array's 'Number Of Devices' %q is not a number", ErrUnparsable, s)
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

// parseBlock is IPA's _parse_handle_block.
func parseBlock(block string) Record {
	var r Record
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

package image

import (
	"encoding/json"
	"testing"
)

func TestDetect(t *testing.T) {
	iso := make([]byte, 0x8006)
	copy(iso[0x8001:], "CD001")
	gpt := make([]byte, 512)
	gpt[450], gpt[510], gpt[511] = 0xee, 0x55, 0xaa
	for _, tc := range []struct {
		head   []byte
		comp   Compression
		format string
	}{
		{[]byte{0x1f, 0x8b, 8}, CompressionGzip, FormatRaw},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd}, CompressionZstd, FormatRaw},
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, CompressionXz, FormatRaw},
		{[]byte("BZh9"), CompressionBzip2, FormatRaw},
		{[]byte("BZhx"), CompressionNone, FormatRaw},
		{[]byte("QFI\xfb\x00\x00\x00\x03"), CompressionNone, FormatQcow2},
		{[]byte("KDMV"), CompressionNone, FormatVMDK},
		{[]byte("vhdxfile"), CompressionNone, FormatVHDX},
		{[]byte("conectix"), CompressionNone, FormatVHD},
		{iso, CompressionNone, FormatISO},
		{gpt, CompressionNone, FormatGPT},
		{nil, CompressionNone, FormatRaw},
	} {
		if c := DetectCompression(tc.head); c != tc.comp {
			t.Errorf("%q: compression %q, want %q", tc.head[:min(len(tc.head), 8)], c, tc.comp)
		}
		if tc.comp == CompressionNone {
			if f := DetectFormat(tc.head); f != tc.format {
				t.Errorf("%q: format %q, want %q", tc.head[:min(len(tc.head), 8)], f, tc.format)
			}
		}
	}
}

// FuzzDetect: the sniffer takes any prefix of any file.
func FuzzDetect(f *testing.F) {
	f.Add([]byte("QFI\xfb"))
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte("BZh1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = DetectCompression(b)
		_ = DetectFormat(b)
	})
}

// FuzzParseChecksumFile: checksum files come from any server.
func FuzzParseChecksumFile(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef  a.img\n", "http://x/a.img")
	f.Add("SHA256 (a.img) = 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", "http://x/a.img")
	f.Add("# c\n\n", "http://x/(a+.img")
	f.Fuzz(func(t *testing.T, body, u string) {
		v, err := ParseChecksumFile(body, u)
		if err == nil && !isHex(v) {
			t.Fatalf("returned non-hex checksum %q", v)
		}
	})
}

// FuzzParseImageInfo: image_info is JSON from Ironic.
func FuzzParseImageInfo(f *testing.F) {
	f.Add(`{"id":"i","urls":["http://x/i"],"checksum":"http://x/SUMS","proxies":{"http":"p"}}`)
	f.Add(`{"id":1,"urls":[null],"os_hash_algo":"sha256","os_hash_value":"00"}`)
	f.Add(`{"id":"i","urls":["u"],"image_request_authorization":"!!"}`)
	f.Add(`{"id":"i","urls":["u"],"checksum":"http://x/S","image_type":"partition","root_mb":"64","swap_mb":1e3,"ephemeral_mb":null,"preserve_ephemeral":"yes"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil {
			return
		}
		info, err := ParseImageInfo(m, true)
		if err == nil && (len(info.URLs) == 0 || info.URLs[0] == "") {
			t.Fatalf("accepted image_info without a URL: %s", s)
		}
		if err == nil {
			if p, err := info.PartitionParams(); err == nil && (p.RootMiB < 0 || p.SwapMiB < 0 || p.EphemeralMiB < 0) {
				t.Fatalf("negative partition size accepted: %+v from %s", p, s)
			}
		}
	})
}

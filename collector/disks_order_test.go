package collector

import (
	"fmt"
	"testing"
)

// TestSortByDevno pins lsblk's order, glibc's dev_t: a minor above 255 sorts
// after the next major's small minors.
func TestSortByDevno(t *testing.T) {
	var devs []*blockDev
	for _, n := range [][2]uint64{{259, 256}, {260, 0}, {259, 255}, {8, 0}, {259, 1}} {
		devs = append(devs, &blockDev{major: n[0], minor: n[1]})
	}
	sortByDevno(devs)
	var got []string
	for _, d := range devs {
		got = append(got, fmt.Sprintf("%d:%d", d.major, d.minor))
	}
	if want := "[8:0 259:1 259:255 260:0 259:256]"; fmt.Sprint(got) != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

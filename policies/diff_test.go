package policies

import (
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	old := mustParse(t, `
stores:
  - {name: nas, kind: posix, location: onprem:lab, path: /mnt/nas}
  - {name: old, kind: posix, location: onprem:lab, path: /mnt/old}
buckets:
  - name: imagenet
    placement: {single: nas}
    cache: {ttl: 0s}
  - name: gone
    placement: {single: old}
`, AllFeatures())
	next := mustParse(t, `
stores:
  - {name: nas, kind: posix, location: onprem:lab, path: /mnt/nas2}
  - {name: old, kind: posix, location: onprem:lab, path: /mnt/old}
buckets:
  - name: scratch
    placement: {single: nas}
  - name: imagenet
    placement: {single: nas}
    write: write-back
    cache: {ttl: 24h, pin: true}
`, AllFeatures())
	got := Diff(old, next)
	want := []string{
		"~ store nas: path: /mnt/nas -> /mnt/nas2",
		"+ bucket scratch",
		"~ bucket imagenet: write: write-through -> write-back",
		"~ bucket imagenet: cache.ttl: 0s -> 24h0m0s",
		"~ bucket imagenet: cache.pin: false -> true",
		"- bucket gone",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff =\n%q\nwant\n%q", got, want)
	}
	if d := Diff(next, next); len(d) != 0 {
		t.Fatalf("Diff of a policy with itself = %q", d)
	}
	if d := Diff(nil, old); !slices.Contains(d, "+ store nas") || !slices.Contains(d, "+ bucket gone") {
		t.Fatalf("Diff from the embedded defaults = %q", d)
	}
}

package versiontest

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Three PUTs of a key are three versions with distinct ids, each readable
// by id byte for byte (whole, ranged, HEAD), the newest being the key's
// object. A fourth PUT of identical bytes is a version of its own.
func testVersions(t *testing.T, tg Target) {
	tg.enable(t)
	tg.optional(t, CapBucketVersioning, func(t *testing.T) {
		out, err := tg.Client.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: &tg.Bucket})
		if err != nil || out.Status != types.BucketVersioningStatusEnabled {
			t.Fatalf("GetBucketVersioning: %v %v, want Enabled", out, err)
		}
	})
	m := newModel()
	const key = "dir/ckpt.bin"
	var ids []string
	var bodies [][]byte
	for i := range 3 {
		body := data(fmt.Sprint(key, i), 300<<10+1111*i)
		ids, bodies = append(ids, tg.putVersion(t, m, key, body)), append(bodies, body)
	}
	for i, id := range ids {
		tg.mustRead(t, key, id, bodies[i], id)
		e, _ := m.find(key, id)
		_, out := tg.get(t, key, id)
		if aws.ToString(out.ETag) != e.ETag || aws.ToInt64(out.ContentLength) != e.Size {
			t.Fatalf("GET version %d: ETag %s length %d, want %s %d", i, aws.ToString(out.ETag), aws.ToInt64(out.ContentLength), e.ETag, e.Size)
		}
		h, err := tg.head(t, key, id)
		if err != nil {
			t.Fatalf("HEAD version %d: %v", i, err)
		}
		if aws.ToString(h.VersionId) != id || aws.ToString(h.ETag) != e.ETag || aws.ToInt64(h.ContentLength) != e.Size {
			t.Fatalf("HEAD version %d: id %s ETag %s length %d, want %s %s %d", i,
				aws.ToString(h.VersionId), aws.ToString(h.ETag), aws.ToInt64(h.ContentLength), id, e.ETag, e.Size)
		}
	}
	// The newest version is the key's object.
	tg.mustRead(t, key, "", bodies[2], ids[2])
	if h, err := tg.head(t, key, ""); err != nil || aws.ToString(h.VersionId) != ids[2] {
		t.Fatalf("HEAD of the key: %v, version %s, want %s", err, aws.ToString(h.VersionId), ids[2])
	}
	// Ranges of an old version.
	for _, r := range []struct {
		hdr        string
		start, end int // inclusive
	}{{"bytes=1000-70999", 1000, 70999}, {"bytes=-500", len(bodies[0]) - 500, len(bodies[0]) - 1}, {"bytes=300000-", 300000, len(bodies[0]) - 1}} {
		got, out := tg.get(t, key, ids[0], func(in *s3.GetObjectInput) { in.Range = aws.String(r.hdr) })
		wantRange := fmt.Sprintf("bytes %d-%d/%d", r.start, r.end, len(bodies[0]))
		if !equal(got, bodies[0][r.start:r.end+1]) || aws.ToString(out.ContentRange) != wantRange || aws.ToString(out.VersionId) != ids[0] {
			t.Fatalf("GET %s of the first version: %d bytes, Content-Range %q, version %s; want the bytes of %q of %s",
				r.hdr, len(got), aws.ToString(out.ContentRange), aws.ToString(out.VersionId), wantRange, ids[0])
		}
	}
	// Identical bytes again: still a new version.
	ids = append(ids, tg.putVersion(t, m, key, bodies[2]))
	tg.mustRead(t, key, ids[2], bodies[2], ids[2])
	tg.mustRead(t, key, "", bodies[2], ids[3])
	tg.checkList(t, m, "", "", 0)
}

// DELETE without a version id adds a delete marker: the key reads as 404
// with x-amz-delete-marker, its versions stay readable by id, and removing
// the marker by its id brings the object back.
func testDeleteMarker(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	const key = "k"
	b0, b1 := data("dm0", 10<<10), data("dm1", 12<<10)
	v0 := tg.putVersion(t, m, key, b0)
	v1 := tg.putVersion(t, m, key, b1)
	dm := tg.mark(t, m, key)

	_, _, err := tg.tryGet(t, key, "")
	wantMarkerHeader(t, wantErr(t, err, "GET of a key whose newest version is a delete marker", http.StatusNotFound, "NoSuchKey"), "GET")
	_, err = tg.head(t, key, "")
	wantMarkerHeader(t, wantErr(t, err, "HEAD of a key whose newest version is a delete marker", http.StatusNotFound), "HEAD")
	tg.mustRead(t, key, v0, b0, v0)
	tg.mustRead(t, key, v1, b1, v1)
	tg.checkList(t, m, "", "", 0)

	tg.optional(t, CapMarkerByID, func(t *testing.T) {
		// GetObject and HeadObject: "If the specified version is a delete
		// marker, the response returns a 405 Method Not Allowed error".
		_, _, err := tg.tryGet(t, key, dm)
		wantMarkerHeader(t, wantErr(t, err, "GET of a delete marker's id", http.StatusMethodNotAllowed, "MethodNotAllowed"), "GET")
		_, err = tg.head(t, key, dm)
		wantMarkerHeader(t, wantErr(t, err, "HEAD of a delete marker's id", http.StatusMethodNotAllowed), "HEAD")
	})

	tg.optional(t, CapMarkerOverMarker, func(t *testing.T) {
		// "A simple DELETE on a delete marker removes nothing, but adds a
		// new delete marker" (S3 user guide, Working with delete markers).
		dm2 := tg.mark(t, m, key)
		tg.checkList(t, m, "", "", 0)
		tg.remove(t, m, key, dm2)
		_, _, err := tg.tryGet(t, key, "")
		wantErr(t, err, "GET with the older delete marker newest again", http.StatusNotFound, "NoSuchKey")
	})
	tg.remove(t, m, key, dm)
	tg.mustRead(t, key, "", b1, v1)
	tg.checkList(t, m, "", "", 0)

	tg.optional(t, CapDeleteAbsent, func(t *testing.T) {
		// A DELETE of a key that never existed still adds a marker.
		tg.mark(t, m, "never-written")
		tg.checkList(t, m, "", "", 0)
		tg.checkCurrent(t, m, "", "")
	})
}

// DELETE with a version id removes that version for good; removing the
// newest makes the one before it the key's object, removing the last one
// leaves no key (and no delete marker).
func testDeleteVersion(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	const key = "k"
	var ids []string
	var bodies [][]byte
	for i := range 3 {
		b := data(fmt.Sprint("dv", i), 8<<10+i)
		ids, bodies = append(ids, tg.putVersion(t, m, key, b)), append(bodies, b)
	}
	tg.remove(t, m, key, ids[2])
	tg.mustRead(t, key, "", bodies[1], ids[1])
	_, _, err := tg.tryGet(t, key, ids[2])
	wantErr(t, err, "GET of a removed version", http.StatusNotFound, "NoSuchVersion")
	tg.checkList(t, m, "", "", 0)
	tg.remove(t, m, key, ids[0])
	tg.mustRead(t, key, ids[1], bodies[1], ids[1])
	tg.checkList(t, m, "", "", 0)
	tg.remove(t, m, key, ids[1])
	_, _, err = tg.tryGet(t, key, "")
	h := wantErr(t, err, "GET of a key whose versions were all removed", http.StatusNotFound, "NoSuchKey")
	if h.Get("x-amz-delete-marker") != "" {
		t.Fatalf("GET of a key with no versions left: x-amz-delete-marker %q", h.Get("x-amz-delete-marker"))
	}
	tg.checkList(t, m, "", "", 0)
	tg.checkCurrent(t, m, "", "")
}

// Version ids that are not there: GET and HEAD answer 404 NoSuchVersion
// (also for the id of another key's version, and for "null" when the key
// has no null version); DELETE answers 204 and removes nothing.
func testMissingVersion(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	ba, bb := data("a", 4<<10), data("b", 5<<10)
	va := tg.putVersion(t, m, "a", ba)
	vb := tg.putVersion(t, m, "b", bb)
	missing := otherID(va)
	if missing == vb {
		missing = otherID(missing)
	}
	for _, c := range []struct{ key, id, why string }{
		{"a", missing, "an id no version has"},
		{"b", va, "the id of another key's version"},
		{"a", nullID, "null, with no null version"},
	} {
		_, _, err := tg.tryGet(t, c.key, c.id)
		wantErr(t, err, fmt.Sprintf("GET %s?versionId=%s (%s)", c.key, c.id, c.why), http.StatusNotFound, "NoSuchVersion")
		_, err = tg.head(t, c.key, c.id)
		wantErr(t, err, fmt.Sprintf("HEAD %s?versionId=%s (%s)", c.key, c.id, c.why), http.StatusNotFound)
	}
	// DeleteObject of a version that is not there succeeds and removes
	// nothing, not even the other key's version of that id.
	for _, c := range []struct{ key, id string }{{"a", missing}, {"b", va}} {
		out := tg.del(t, c.key, c.id)
		if id := aws.ToString(out.VersionId); aws.ToBool(out.DeleteMarker) || (id != c.id && id != "") {
			t.Fatalf("DELETE %s?versionId=%s of no version: x-amz-delete-marker %v, x-amz-version-id %q",
				c.key, c.id, aws.ToBool(out.DeleteMarker), aws.ToString(out.VersionId))
		}
	}
	tg.mustRead(t, "a", va, ba, va)
	tg.mustRead(t, "b", vb, bb, vb)
	tg.checkList(t, m, "", "", 0)

	tg.optional(t, CapMalformedID, func(t *testing.T) {
		// AWS answers 400 InvalidArgument for an id it cannot parse; an
		// implementation that parses nothing answers 404 NoSuchVersion.
		_, _, err := tg.tryGet(t, "a", "not-a-version-id")
		st, code, _ := errInfo(err)
		if !(st == http.StatusBadRequest && code == "InvalidArgument") && !(st == http.StatusNotFound && code == "NoSuchVersion") {
			t.Fatalf("GET of a malformed version id: %d %s (%v), want 400 InvalidArgument or 404 NoSuchVersion", st, code, err)
		}
	})
}

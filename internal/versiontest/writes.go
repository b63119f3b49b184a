package versiontest

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Suspended: a PUT writes the key's null version, replacing the previous
// null version; versions with ids stay. A DELETE adds a null delete marker
// (replacing the null version too).
func testSuspend(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	const key = "k"
	b1 := data("s1", 6<<10)
	v1 := tg.putVersion(t, m, key, b1)
	tg.setVersioning(t, types.BucketVersioningStatusSuspended)
	gv, err := tg.Client.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: &tg.Bucket})
	if err != nil || gv.Status != types.BucketVersioningStatusSuspended {
		t.Fatalf("GetBucketVersioning after suspending: %v %v", gv, err)
	}
	putNull := func(key string, body []byte) {
		t.Helper()
		out := tg.put(t, key, body)
		// S3 answers x-amz-version-id: null, or no version id at all.
		if id := aws.ToString(out.VersionId); id != nullID && id != "" {
			t.Fatalf("PUT %s while Suspended: x-amz-version-id %q, want null", key, id)
		}
		m.push(key, entry{ID: nullID, ETag: aws.ToString(out.ETag), Size: int64(len(body))})
	}
	b2, b3 := data("s2", 7<<10), data("s3", 8<<10)
	putNull(key, b2)
	tg.checkList(t, m, "", "", 0)
	putNull(key, b3) // replaces the null version b2
	tg.checkList(t, m, "", "", 0)
	tg.mustRead(t, key, "", b3, "")
	tg.mustRead(t, key, nullID, b3, nullID)
	tg.mustRead(t, key, v1, b1, v1)

	// A DELETE is a null delete marker, in place of the null version.
	out := tg.del(t, key, "")
	tg.optional(t, CapSuspendedDelete, func(t *testing.T) {
		if !aws.ToBool(out.DeleteMarker) || aws.ToString(out.VersionId) != nullID {
			t.Fatalf("DELETE while Suspended: x-amz-delete-marker %v x-amz-version-id %q, want true and null",
				aws.ToBool(out.DeleteMarker), aws.ToString(out.VersionId))
		}
	})
	m.push(key, entry{ID: nullID, Marker: true})
	tg.checkList(t, m, "", "", 0)
	_, _, err = tg.tryGet(t, key, "")
	wantErr(t, err, "GET under a null delete marker", http.StatusNotFound, "NoSuchKey")
	tg.mustRead(t, key, v1, b1, v1)

	// A key first written while Suspended has only its null version.
	putNull("fresh", b2)
	tg.mustRead(t, "fresh", nullID, b2, nullID)
	tg.checkList(t, m, "", "", 0)
	tg.checkCurrent(t, m, "", "")
}

// Objects written before versioning was enabled are their keys' null
// versions afterwards, readable by versionId=null after newer versions or a
// delete marker, and removable by it.
func testPreExisting(t *testing.T, tg Target) {
	m := newModel()
	b0, c0 := data("pre-k", 9<<10), data("pre-k2", 3<<10)
	for key, body := range map[string][]byte{"k": b0, "k2": c0} {
		out := tg.put(t, key, body)
		if id := aws.ToString(out.VersionId); id != "" && id != nullID {
			t.Fatalf("PUT %s to an unversioned bucket: x-amz-version-id %q", key, id)
		}
		m.push(key, entry{ID: nullID, ETag: aws.ToString(out.ETag), Size: int64(len(body))})
	}
	tg.setVersioning(t, types.BucketVersioningStatusEnabled)
	tg.checkList(t, m, "", "", 0)
	tg.mustRead(t, "k", nullID, b0, nullID)
	if h, err := tg.head(t, "k", nullID); err != nil || aws.ToInt64(h.ContentLength) != int64(len(b0)) {
		t.Fatalf("HEAD k?versionId=null: %v", err)
	}

	b1 := data("pre-k-1", 10<<10)
	v1 := tg.putVersion(t, m, "k", b1)
	tg.mustRead(t, "k", "", b1, v1)
	tg.mustRead(t, "k", nullID, b0, nullID)
	tg.checkList(t, m, "", "", 0)

	tg.mark(t, m, "k2")
	tg.mustRead(t, "k2", nullID, c0, nullID)
	tg.checkList(t, m, "", "", 0)
	tg.checkCurrent(t, m, "", "")

	tg.optional(t, CapRemoveNull, func(t *testing.T) {
		// Removed by id, the object from before versioning is gone: not
		// readable as the null version, and not back as the key's object
		// once its newer versions are removed too.
		tg.remove(t, m, "k", nullID)
		tg.mustRead(t, "k", "", b1, v1)
		_, _, err := tg.tryGet(t, "k", nullID)
		wantErr(t, err, "GET of a removed null version", http.StatusNotFound, "NoSuchVersion")
		tg.checkList(t, m, "", "", 0)
		tg.remove(t, m, "k", v1)
		_, _, err = tg.tryGet(t, "k", "")
		wantErr(t, err, "GET of a key whose versions were all removed", http.StatusNotFound, "NoSuchKey")
		tg.checkList(t, m, "", "", 0)
		tg.checkCurrent(t, m, "", "")
	})
}

// CopyObject with x-amz-copy-source ...?versionId= copies that version; the
// copy is a new version of the destination (also when the destination is
// the source's own key: the usual roll-back).
func testCopy(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	b1, b2 := data("c1", 40<<10), data("c2", 50<<10)
	v1 := tg.putVersion(t, m, "src", b1)
	tg.putVersion(t, m, "src", b2)
	copyVersion := func(dst, id string) string {
		t.Helper()
		out, err := tg.tryCopy(t, dst, "src", id)
		if err != nil {
			t.Fatalf("CopyObject src?versionId=%s to %s: %v", id, dst, err)
		}
		nv := aws.ToString(out.VersionId)
		if aws.ToString(out.CopySourceVersionId) != id || nv == "" || nv == nullID || m.has(dst, nv) || nv == id {
			t.Fatalf("CopyObject src?versionId=%s to %s: x-amz-copy-source-version-id %q, x-amz-version-id %q; want %s and a new version id",
				id, dst, aws.ToString(out.CopySourceVersionId), nv, id)
		}
		etag := ""
		if out.CopyObjectResult != nil {
			etag = aws.ToString(out.CopyObjectResult.ETag)
		}
		m.push(dst, entry{ID: nv, ETag: etag, Size: int64(len(b1))})
		return nv
	}
	dv := copyVersion("dst", v1)
	tg.mustRead(t, "dst", "", b1, dv)
	rv := copyVersion("src", v1) // roll back
	tg.mustRead(t, "src", "", b1, rv)
	tg.mustRead(t, "src", v1, b1, v1)
	tg.checkList(t, m, "", "", 0)

	tg.optional(t, CapCopyFromMarker, func(t *testing.T) {
		// CopyObject: with the source's newest version a delete marker, a
		// copy without a version id is 404; naming a delete marker's id
		// is 400.
		dm := tg.mark(t, m, "src")
		_, err := tg.tryCopy(t, "dst2", "src", "")
		wantErr(t, err, "CopyObject from a key under a delete marker", http.StatusNotFound)
		_, err = tg.tryCopy(t, "dst2", "src", dm)
		wantErr(t, err, "CopyObject naming a delete marker's id", http.StatusBadRequest)
		tg.checkList(t, m, "", "", 0)
	})
}

func (tg Target) tryCopy(t *testing.T, dst, src, id string) (*s3.CopyObjectOutput, error) {
	t.Helper()
	source := tg.Bucket + "/" + src
	if id != "" {
		source += "?versionId=" + id
	}
	return tg.Client.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: &tg.Bucket, Key: &dst, CopySource: &source})
}

// A completed multipart upload is a new version of its key.
func testMultipart(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	const key = "mp.bin"
	b0 := data("mp0", 20<<10)
	v0 := tg.putVersion(t, m, key, b0)
	parts := [][]byte{data("mp-part1", 5<<20), data("mp-part2", 100<<10)}
	cu, err := tg.Client.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: &tg.Bucket, Key: aws.String(key)})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	var done []types.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		up, err := tg.Client.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: &tg.Bucket, Key: aws.String(key), UploadId: cu.UploadId,
			PartNumber: &n, Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		done = append(done, types.CompletedPart{PartNumber: &n, ETag: up.ETag})
	}
	out, err := tg.Client.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: &tg.Bucket, Key: aws.String(key),
		UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	vm := aws.ToString(out.VersionId)
	if vm == "" || vm == nullID || vm == v0 {
		t.Fatalf("CompleteMultipartUpload in a versioned bucket: x-amz-version-id %q, want a new version id", vm)
	}
	whole := append(append([]byte{}, parts[0]...), parts[1]...)
	m.push(key, entry{ID: vm, ETag: aws.ToString(out.ETag), Size: int64(len(whole))})
	tg.mustRead(t, key, "", whole, vm)
	tg.mustRead(t, key, vm, whole, vm)
	tg.mustRead(t, key, v0, b0, v0)
	if h, err := tg.head(t, key, vm); err != nil || aws.ToString(h.ETag) != aws.ToString(out.ETag) {
		t.Fatalf("HEAD of the completed upload's version: %v, ETag %s, want %s", err, aws.ToString(h.ETag), aws.ToString(out.ETag))
	}
	tg.checkList(t, m, "", "", 0)
}

// DeleteObjects with VersionId entries removes those versions; a removed
// delete marker is reported with DeleteMarker and DeleteMarkerVersionId, an
// entry without VersionId adds a marker and reports its id.
func testDeleteObjects(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	ba1, ba2, bb, bc := data("do-a1", 1000), data("do-a2", 1001), data("do-b", 1002), data("do-c", 1003)
	va1 := tg.putVersion(t, m, "a", ba1)
	va2 := tg.putVersion(t, m, "a", ba2)
	vb := tg.putVersion(t, m, "b", bb)
	mb := tg.mark(t, m, "b")
	tg.putVersion(t, m, "c", bc)

	out, err := tg.Client.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: &tg.Bucket, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("a"), VersionId: aws.String(va1)},
		{Key: aws.String("b"), VersionId: aws.String(mb)},
		{Key: aws.String("c")},
	}}})
	if err != nil {
		t.Fatalf("DeleteObjects: %v", err)
	}
	if len(out.Errors) != 0 || len(out.Deleted) != 3 {
		t.Fatalf("DeleteObjects: deleted %s, errors %s", deletedString(out.Deleted), errorsString(out.Errors))
	}
	for _, d := range out.Deleted {
		key, id, dm, dmID := aws.ToString(d.Key), aws.ToString(d.VersionId), aws.ToBool(d.DeleteMarker), aws.ToString(d.DeleteMarkerVersionId)
		switch key {
		case "a":
			if id != va1 || dm {
				t.Fatalf("DeleteObjects a?versionId=%s: Deleted %s", va1, deletedString(out.Deleted))
			}
			m.drop("a", va1)
		case "b":
			if id != mb {
				t.Fatalf("DeleteObjects of b's delete marker %s: Deleted %s", mb, deletedString(out.Deleted))
			}
			m.drop("b", mb)
			tg.optional(t, CapDeleteObjectsDM, func(t *testing.T) {
				// DeletedObject: DeleteMarker says the version removed was
				// a delete marker; DeleteMarkerVersionId is its id.
				if !dm || dmID != mb {
					t.Fatalf("DeleteObjects of b's delete marker %s: Deleted %s, want DeleteMarker true, DeleteMarkerVersionId %s",
						mb, deletedString(out.Deleted), mb)
				}
			})
		case "c":
			if !dm || dmID == "" || m.has("c", dmID) {
				t.Fatalf("DeleteObjects of c without a version id: Deleted %s, want DeleteMarker true and the new marker's id", deletedString(out.Deleted))
			}
			m.push("c", entry{ID: dmID, Marker: true})
		default:
			t.Fatalf("DeleteObjects: Deleted %s", deletedString(out.Deleted))
		}
	}
	tg.mustRead(t, "a", "", ba2, va2)
	tg.mustRead(t, "b", "", bb, vb)
	_, _, err = tg.tryGet(t, "c", "")
	wantErr(t, err, "GET of c after DeleteObjects added a marker", http.StatusNotFound, "NoSuchKey")
	tg.checkList(t, m, "", "", 0)

	tg.optional(t, CapDeleteObjectsGap, func(t *testing.T) {
		// As DeleteObject: a version that is not there is deleted already.
		missing := otherID(va2)
		out, err := tg.Client.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: &tg.Bucket, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
			{Key: aws.String("a"), VersionId: aws.String(missing)},
		}}})
		if err != nil || len(out.Errors) != 0 || len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].VersionId) != missing {
			t.Fatalf("DeleteObjects of a missing version: %v; deleted %s, errors %s", err, deletedString(out.Deleted), errorsString(out.Errors))
		}
		tg.checkList(t, m, "", "", 0)
	})
}

func deletedString(ds []types.DeletedObject) string {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintf(&b, "{%s %s marker=%v markerId=%s}", aws.ToString(d.Key), aws.ToString(d.VersionId),
			aws.ToBool(d.DeleteMarker), aws.ToString(d.DeleteMarkerVersionId))
	}
	return "[" + b.String() + "]"
}

func errorsString(es []types.Error) string {
	var b bytes.Buffer
	for _, e := range es {
		fmt.Fprintf(&b, "{%s %s %s %s}", aws.ToString(e.Key), aws.ToString(e.VersionId), aws.ToString(e.Code), aws.ToString(e.Message))
	}
	return "[" + b.String() + "]"
}

// Conditional writes check the key's newest version: If-None-Match: * is
// refused (412) while it is an object, If-Match needs its ETag. A delete
// marker is no object: If-None-Match: * succeeds over it, If-Match finds
// nothing (404 NoSuchKey).
func testConditional(t *testing.T, tg Target) {
	tg.enable(t)
	m := newModel()
	const key = "lock"
	ifNone := func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }
	ifMatch := func(etag string) func(*s3.PutObjectInput) {
		return func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) }
	}
	b1, b2, b3 := data("cw1", 2000), data("cw2", 2001), data("cw3", 2002)
	out, err := tg.tryPut(t, key, b1, ifNone)
	if err != nil {
		t.Fatalf("PUT If-None-Match: * of a new key: %v", err)
	}
	v1 := aws.ToString(out.VersionId)
	m.push(key, entry{ID: v1, ETag: aws.ToString(out.ETag), Size: int64(len(b1))})
	_, err = tg.tryPut(t, key, b2, ifNone)
	wantErr(t, err, "PUT If-None-Match: * over an object", http.StatusPreconditionFailed, "PreconditionFailed")
	e1, _ := m.find(key, v1)
	out, err = tg.tryPut(t, key, b2, ifMatch(e1.ETag))
	if err != nil {
		t.Fatalf("PUT If-Match of the newest version's ETag: %v", err)
	}
	v2 := aws.ToString(out.VersionId)
	if v2 == "" || v2 == v1 {
		t.Fatalf("PUT If-Match: x-amz-version-id %q, want a new version id", v2)
	}
	m.push(key, entry{ID: v2, ETag: aws.ToString(out.ETag), Size: int64(len(b2))})
	_, err = tg.tryPut(t, key, b3, ifMatch(e1.ETag))
	wantErr(t, err, "PUT If-Match of an older version's ETag", http.StatusPreconditionFailed, "PreconditionFailed")
	tg.mustRead(t, key, "", b2, v2)
	tg.checkList(t, m, "", "", 0)

	tg.optional(t, CapConditionalOver, func(t *testing.T) {
		tg.mark(t, m, key)
		e2, _ := m.find(key, v2)
		_, err := tg.tryPut(t, key, b3, ifMatch(e2.ETag))
		wantErr(t, err, "PUT If-Match with the newest version a delete marker", http.StatusNotFound, "NoSuchKey")
		out, err := tg.tryPut(t, key, b3, ifNone)
		if err != nil {
			t.Fatalf("PUT If-None-Match: * with the newest version a delete marker: %v", err)
		}
		v3 := aws.ToString(out.VersionId)
		m.push(key, entry{ID: v3, ETag: aws.ToString(out.ETag), Size: int64(len(b3))})
		tg.mustRead(t, key, "", b3, v3)
		tg.checkList(t, m, "", "", 0)
	})
}

package fs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/fs"
	"github.com/fedgate/fedgate/store/storetest"
)

// TestGatewayListsBigDirPaged: ListObjectsV2 of aws-sdk-go-v2, paged by
// its paginator at the default 1000 keys, over an fs store whose one
// directory holds 3,500 files written by another program, with files added
// after the cursor and the cursor's file removed between pages: every key
// comes once, in byte order, with the added ones.
func TestGatewayListsBigDirPaged(t *testing.T) {
	dir := t.TempDir()
	// XML 1.0 cannot carry control bytes (the gateway writes U+FFFD for
	// them without encoding-type=url): the store tests cover those keys.
	keys := slices.DeleteFunc(storetest.BigDirKeys("flat/", 3500, true), func(k string) bool {
		return strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 })
	})
	write := func(k string) {
		p := filepath.Join(dir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		write(k)
	}
	origin, err := fs.New("origin", policies.Location{Cloud: "onprem", Region: "lab"}, dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { origin.Close() })
	st := testserver.InProcess(t, origin, testserver.StackOptions{})
	c := s3.NewFromConfig(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(testserver.RootAccessKey, testserver.RootSecretKey, "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(st.Endpoint); o.UsePathStyle = true })

	var got, added []string
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("data"), Prefix: aws.String("flat/")})
	for page := 0; pages.HasMorePages(); page++ {
		out, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Contents) > 1000 {
			t.Fatalf("page %d holds %d keys", page, len(out.Contents))
		}
		for _, o := range out.Contents {
			got = append(got, *o.Key)
		}
		if !pages.HasMorePages() {
			break
		}
		last := got[len(got)-1]
		switch page {
		case 0:
			k := fmt.Sprintf("flat/s%05dx", 2500)
			write(k)
			added = append(added, k)
			write("flat/a1") // before the cursor: not listed
		case 1:
			if err := os.Remove(filepath.Join(dir, last)); err != nil {
				t.Fatal(err)
			}
			k := last + "0"
			write(k)
			added = append(added, k)
		}
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(keys), added...)))
	wantEntries := storetest.Expected(want, store.ListOptions{Prefix: "flat/"})
	gotEntries := make([]store.Entry, len(got))
	for i, k := range got {
		gotEntries[i] = store.Entry{Key: k}
	}
	storetest.SameEntries(t, "ListObjectsV2 pages", gotEntries, wantEntries)
}

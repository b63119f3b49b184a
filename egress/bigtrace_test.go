package egress_test

import (
	"bufio"
	"os"
	"testing"
	"time"

	"github.com/fedgate/fedgate/egress/egresstest"
)

// TestWriteBigTrace writes the 10-million-row trace docs/egress.md
// ("Memory and speed") times `fedgate egress simulate` on, when
// FEDGATE_BIG_TRACE names the file: 60 days, three regions of
// testdata/families-policy.yaml, a daily epoch over 50,000 objects, two
// Zipf mixes of 300,000 objects (3 million reads each) and 1,000,000
// one-shot reads; 1.4 million distinct objects.
//
//	FEDGATE_BIG_TRACE=/tmp/big.csv go test ./egress -run TestWriteBigTrace
func TestWriteBigTrace(t *testing.T) {
	out := os.Getenv("FEDGATE_BIG_TRACE")
	if out == "" {
		t.Skip("set FEDGATE_BIG_TRACE to write the trace")
	}
	start := time.Date(2026, 9, 3, 0, 0, 0, 0, time.UTC)
	const day = 24 * time.Hour
	trace := egresstest.Merge(
		egresstest.Epochs{Region: "gpu-gcp", Bucket: "data-s3", Prefix: "train/big/", Objects: 50000, Size: 64 << 20, Start: start,
			Epochs: 60, Period: day, Duration: 12 * time.Hour, Seed: 1}.Events(),
		egresstest.Zipf{Region: "gpu-aws", Bucket: "data-gcs", Prefix: "zipf/a/", Objects: 300000, Size: 16 << 20, Start: start,
			Reads: 3000000, Span: 60 * day, S: 1.1, Seed: 2}.Events(),
		egresstest.Zipf{Region: "gpu-aws-west", Bucket: "data-blob", Prefix: "zipf/b/", Objects: 300000, Size: 16 << 20, Start: start,
			Reads: 3000000, Span: 60 * day, S: 1.1, Seed: 3}.Events(),
		egresstest.Scans{Region: "gpu-gcp", Bucket: "data-s3", Prefixes: 1000, Objects: 1000, Size: 8 << 20, Start: start, Span: 60 * day}.Events())
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := egresstest.WriteCSV(w, trace); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

package regionstate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// benchState is a State with 1000 users, buckets and grants.
func benchState(b *testing.B) (*State, []string) {
	f := newTestFSM(b, b.TempDir())
	var cmds []Command
	var keys []string
	for i := range 1000 {
		name, ak := fmt.Sprintf("user%d", i), fmt.Sprintf("AKIA%016d", i)
		keys = append(keys, ak)
		cmds = append(cmds,
			PutUser{User: User{Name: name, AccessKey: ak, SecretKey: "secret"}},
			CreateBucket{Bucket: Bucket{Name: fmt.Sprintf("bucket%d", i), Owner: name}},
			Grant{User: name, Bucket: fmt.Sprintf("bucket%d", (i+1)%1000), Perm: PermRead})
	}
	for i, r := range applyFSM(b, f, 1, cmds...) {
		if r != nil {
			b.Fatalf("command %d: %v", i, r)
		}
	}
	return f.state, keys
}

func BenchmarkUserByAccessKey(b *testing.B) {
	s, keys := benchState(b)
	for i := 0; b.Loop(); i++ {
		if _, ok := s.UserByAccessKey(keys[i%len(keys)]); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkUserByAccessKeyParallel(b *testing.B) {
	s, keys := benchState(b)
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			s.UserByAccessKey(keys[i%len(keys)])
		}
	})
}

func BenchmarkBucket(b *testing.B) {
	s, _ := benchState(b)
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("bucket%d", i)
	}
	for i := 0; b.Loop(); i++ {
		if _, ok := s.Bucket(names[i%len(names)]); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkCanRead(b *testing.B) {
	s, _ := benchState(b)
	for b.Loop() {
		if !s.CanRead("user7", "bucket8") {
			b.Fatal("denied")
		}
	}
}

// BenchmarkApply measures one committed, applied and persisted command
// (two fsyncs: the Raft log and the FSM file).
func BenchmarkApply(b *testing.B) {
	n := openNode(b, testConfig(b, b.TempDir()))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := n.Apply(ctx, SetSetting{Key: "k", Value: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyParallel shows batching: concurrent commands share fsyncs.
func BenchmarkApplyParallel(b *testing.B) {
	n := openNode(b, testConfig(b, b.TempDir()))
	ctx := context.Background()
	var seq atomic.Int64
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := n.Apply(ctx, SetSetting{Key: fmt.Sprint(seq.Add(1) % 64), Value: "v"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

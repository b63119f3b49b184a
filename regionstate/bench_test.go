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

// BenchmarkFSMWriteScale times the FSM's apply of one batch of 16 writes
// (no Raft: the cost a write adds on every node) with size buckets, each
// with one grant (to one of 100 users) and one configuration, so that a
// cost growing with the tables shows without Raft's noise.
func BenchmarkFSMWriteScale(b *testing.B) {
	for _, size := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("buckets=%d", size), func(b *testing.B) {
			f := newTestFSM(b, b.TempDir())
			index := uint64(1)
			run := func(cmds []Command) {
				for i, r := range applyFSM(b, f, index, cmds...) {
					if r != nil {
						b.Fatalf("command %d: %v", i, r)
					}
				}
				index += uint64(len(cmds))
			}
			var cmds []Command
			for i := range 100 {
				cmds = append(cmds, PutUser{User: User{Name: fmt.Sprintf("user%d", i), AccessKey: fmt.Sprintf("AK%d", i), SecretKey: "s"}})
			}
			run(cmds)
			for lo := 0; lo < size; lo += 1000 {
				cmds = cmds[:0]
				for i := lo; i < min(lo+1000, size); i++ {
					bucket := fmt.Sprintf("bucket-%08d", i)
					cmds = append(cmds, CreateBucket{Bucket: Bucket{Name: bucket, Owner: "root"}},
						Grant{User: fmt.Sprintf("user%d", i%100), Bucket: bucket, Perm: PermRead},
						SetBucketConfig{Bucket: bucket, Kind: BucketConfTagging, Value: "t"})
				}
				run(cmds)
			}
			write := map[string]func(i int) Command{
				"grant": func(i int) Command {
					perm := PermWrite
					if i/size%2 == 1 {
						perm = PermRead
					}
					return Grant{User: fmt.Sprintf("user%d", i%size%100), Bucket: fmt.Sprintf("bucket-%08d", i%size), Perm: perm}
				},
				"bucket-config": func(i int) Command {
					return SetBucketConfig{Bucket: fmt.Sprintf("bucket-%08d", i%size), Kind: BucketConfTagging, Value: fmt.Sprint(i)}
				},
			}
			for _, name := range []string{"grant", "bucket-config"} {
				b.Run(name, func(b *testing.B) {
					next := 0
					for b.Loop() {
						cmds = cmds[:0]
						for range 16 {
							cmds = append(cmds, write[name](next))
							next++
						}
						run(cmds)
					}
				})
			}
		})
	}
}

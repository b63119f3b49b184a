package cachetier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// ringKey is the i-th of a set of chunk keys shaped like a dataset's: 16
// chunks per object.
func ringKey(i int) ChunkKey {
	return ChunkKey{
		ObjectID: ObjectID{
			Store:     "s3-east",
			Key:       fmt.Sprintf("datasets/train/shard-%05d.tar", i/16),
			Validator: store.Validator(fmt.Sprintf(`"%032x"`, i/16)),
			Size:      16 * DefaultChunkSize,
		},
		Index: int64(i % 16),
	}
}

func nodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("fedgate-%d", i+1)
	}
	return out
}

func TestRingEmpty(t *testing.T) {
	for _, r := range []*Ring{nil, NewRing(nil), NewRing([]string{"", ""})} {
		if got := r.Owner(ringKey(1)); got != "" {
			t.Errorf("Owner on an empty ring: %q", got)
		}
		if m := r.Members(); len(m) != 0 {
			t.Errorf("Members of an empty ring: %v", m)
		}
		if r.Contains("") || r.Contains("a") {
			t.Error("an empty ring contains something")
		}
	}
}

func TestRingMembersSortedDistinct(t *testing.T) {
	in := []string{"c", "a", "", "c", "b", "a"}
	r := NewRing(in)
	if got := r.Members(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Members %v", got)
	}
	if !slices.Equal(in, []string{"c", "a", "", "c", "b", "a"}) {
		t.Fatalf("NewRing changed its argument: %v", in)
	}
	r.Members()[0] = "x"
	if !r.Contains("a") || r.Contains("x") || r.Contains("") {
		t.Fatal("Contains")
	}
	// The order and repetition of the members make no difference.
	r2 := NewRing([]string{"b", "a", "c"})
	for i := range 1000 {
		if r.Owner(ringKey(i)) != r2.Owner(ringKey(i)) {
			t.Fatalf("key %d: owners differ with the members' order", i)
		}
	}
	if one := NewRing([]string{"solo"}); one.Owner(ringKey(3)) != "solo" {
		t.Fatal("a one-node ring does not own everything")
	}
}

// Each member owns its fair share of 30k chunk keys, within ±15%.
func TestRingDistribution(t *testing.T) {
	const keys = 30000
	for _, n := range []int{3, 5} {
		r := NewRing(nodes(n))
		count := make(map[string]int)
		for i := range keys {
			count[r.Owner(ringKey(i))]++
		}
		fair := float64(keys) / float64(n)
		for _, m := range r.Members() {
			if got := float64(count[m]); got < 0.85*fair || got > 1.15*fair {
				t.Errorf("%d nodes: %s owns %d keys, fair share %.0f", n, m, count[m], fair)
			}
		}
		if len(count) != n {
			t.Errorf("%d nodes: owners %v", n, count)
		}
	}
}

// When a member leaves, only its chunks move (spread over the others);
// when one joins, it takes chunks from the others and nothing else moves.
func TestRingMinimalMovement(t *testing.T) {
	const keys = 30000
	all := nodes(5)
	four := NewRing(all[:4])
	three := NewRing(slices.Delete(slices.Clone(all[:4]), 1, 2)) // fedgate-2 leaves
	five := NewRing(all)                                         // fedgate-5 joins
	left, joined := all[1], all[4]
	takenBy := make(map[string]int)
	gained := 0
	for i := range keys {
		k := ringKey(i)
		before := four.Owner(k)
		if after := three.Owner(k); before != left && after != before {
			t.Fatalf("key %d moved from %s to %s when %s left", i, before, after, left)
		} else if before == left {
			if after == left || !three.Contains(after) {
				t.Fatalf("key %d of the leaving node went to %q", i, after)
			}
			takenBy[after]++
		}
		if after := five.Owner(k); after != before {
			if after != joined {
				t.Fatalf("key %d moved from %s to %s when %s joined", i, before, after, joined)
			}
			gained++
		}
	}
	// The leaver's chunks spread over all three others.
	if len(takenBy) != 3 {
		t.Fatalf("the leaving node's chunks went to %v", takenBy)
	}
	if fair := keys / 5; gained < fair*85/100 || gained > fair*115/100 {
		t.Fatalf("the joining node took %d keys, fair share %d", gained, fair)
	}
}

// The hash is part of the region's protocol: every node, of every version,
// must name the same owner. These values were computed by an independent
// implementation of the hash as Ring's comment describes it; a change here
// is a change of the protocol.
func TestRingStable(t *testing.T) {
	r := NewRing(nodes(5))
	var got []string
	for _, i := range []int{0, 1, 2, 17, 100, 1000, 12345, 29999} {
		got = append(got, r.Owner(ringKey(i)))
	}
	want := []string{"fedgate-1", "fedgate-5", "fedgate-2", "fedgate-3", "fedgate-4", "fedgate-1", "fedgate-3", "fedgate-4"}
	if !slices.Equal(got, want) {
		t.Fatalf("owners %q, want %q", got, want)
	}
	if h := chunkHash(ringKey(1)); h != 0x1b5ccea16487d144 {
		t.Fatalf("chunkHash = %#x", h)
	}
}

func BenchmarkRingOwner(b *testing.B) {
	r := NewRing(nodes(5))
	rnd := rand.New(rand.NewPCG(1, 2))
	k := ringKey(rnd.IntN(1000))
	for b.Loop() {
		r.Owner(k)
	}
}

package policies

// Features is what the running build can do. Parse refuses a well-formed
// policy that asks for something switched off here, with a "not supported
// yet" error at the key that asks for it. Single placement and write-through
// are always on: they are what every build does.
type Features struct {
	StoreKinds map[StoreKind]bool // kinds a store may have

	Replicate bool // placement.replicate
	Erasure   bool // placement.erasure
	WriteBack bool // write: write-back
	Origin    bool // buckets[].origin

	Cache    bool // buckets[].cache.ttl and .quota
	Pin      bool // buckets[].cache.pin
	Prefetch bool // buckets[].cache.prefetch
	Priority bool // buckets[].cache.priority

	Routing        bool // routing.prefer
	EgressPrices   bool // egress.prices (non-empty)
	Budgets        bool // egress.budgets (non-empty)
	BlockColdReads bool // budget action block-cold-reads
}

// AllFeatures is every feature of the schema: what the finished gateway does.
func AllFeatures() Features {
	kinds := make(map[StoreKind]bool, len(StoreKinds))
	for _, k := range StoreKinds {
		kinds[k] = true
	}
	return Features{
		StoreKinds: kinds,
		Replicate:  true, Erasure: true, WriteBack: true, Origin: true,
		Cache: true, Pin: true, Prefetch: true, Priority: true,
		Routing: true, EgressPrices: true, Budgets: true, BlockColdReads: true,
	}
}

// SkeletonFeatures is what the server does today: posix stores, single
// placement, write-through, and nothing else.
func SkeletonFeatures() Features {
	return Features{StoreKinds: map[StoreKind]bool{KindPosix: true}}
}

// storeKindNames lists the enabled kinds, in StoreKinds order.
func (f Features) storeKindNames() []string {
	var names []string
	for _, k := range StoreKinds {
		if f.StoreKinds[k] {
			names = append(names, string(k))
		}
	}
	return names
}

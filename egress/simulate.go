package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// The simulator replays an access trace (TraceReader) against a policy's
// regions, buckets and stores and prices what each strategy for keeping
// copies in the reading regions would have cost: transfer (with the same
// table, tiers and free tiers as the egress report), storage and requests.
// docs/egress.md ("Simulating strategies") describes the model; in short:
//
//   - Every strategy but single-region keeps each object where the policy
//     places it (single, replicate or erasure: its base copies), pays for
//     writing it there from the writing region and for storing it there.
//     single-region keeps everything in one location instead.
//   - A read is served by a copy in the reading region's own location when
//     the strategy holds one (a hit: no transfer), else from the base (the
//     cheapest member of a replicate placement, the cheapest K shards of an
//     erasure one), paying transfer and GET requests.
//   - After a read that crossed, a copy strategy may keep a copy of the
//     whole object in the reading region, paying a PUT and its storage
//     until it expires (a time after the last read, refreshed by each hit),
//     the object changes or is deleted, or the trace ends.
//
// Memory grows with the distinct objects of the trace (their state, see
// SimOptions.MaxObjects), never with its rows.

// StrategyKind names a strategy.
type StrategyKind string

// The strategies.
const (
	// StrategyAdvisor: fedgate's advisor, online: every AdviseEvery the
	// simulator asks Advise about the ledger the replay has written so far
	// (the last AdviseWindow of it) and keeps copies as it says (Keep:
	// per prefix and reading region).
	StrategyAdvisor StrategyKind = "advisor"
	// StrategyAdvisorMonthly: the same, but the ledger has no reuse
	// distances, like the ledger of a gateway before it recorded them (or
	// of nodes run with --egress-reuse-objects 0): Advise weighs each
	// prefix by its monthly egress against a whole copy, and a recommended
	// prefix's objects are kept while the advice stands. Not among the
	// defaults: it shows what learning keep times changed.
	StrategyAdvisorMonthly StrategyKind = "advisor-monthly"
	// StrategyTEven: SkyStore's T_even: after each read keep the copy for
	// (fetch cost) / (storage cost per hour) hours, per object.
	StrategyTEven StrategyKind = "t-even"
	// StrategyAlwaysStore: keep every copy until the end.
	StrategyAlwaysStore StrategyKind = "always-store"
	// StrategyAlwaysEvict: never keep a copy.
	StrategyAlwaysEvict StrategyKind = "always-evict"
	// StrategyTTL: keep a copy for a fixed time after each read.
	StrategyTTL StrategyKind = "ttl"
	// StrategySingleRegion: every object lives in one store, its bucket's
	// home (the first store of its placement, or its origin), and is read
	// from there; no copies. It differs from always-evict only for
	// replicate and erasure placements, which it writes once.
	StrategySingleRegion StrategyKind = "single-region"
	// StrategyPolicy: the policy file as written: its placements and
	// read routing, no copies (the region cache is not modelled).
	StrategyPolicy StrategyKind = "policy"
)

// Strategy is one way of keeping copies, as the simulator runs it.
type Strategy struct {
	Kind StrategyKind
	TTL  time.Duration // StrategyTTL only
}

// Name is how the strategy is written on the command line and in results:
// "advisor", "ttl-12h", ...
func (s Strategy) Name() string {
	if s.Kind == StrategyTTL {
		return "ttl-" + durationText(s.TTL)
	}
	return string(s.Kind)
}

func durationText(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0 && d >= 48*time.Hour:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// copies says whether the strategy keeps copies in reading regions.
func (s Strategy) copies() bool {
	switch s.Kind {
	case StrategyAdvisor, StrategyAdvisorMonthly, StrategyTEven, StrategyAlwaysStore, StrategyTTL:
		return true
	}
	return false
}

// Describe says in a few words what the strategy does.
func (s Strategy) Describe() string {
	switch s.Kind {
	case StrategyAdvisor:
		return "fedgate egress advise, re-run on the replay's ledger: keeps copies as long as it learns they pay"
	case StrategyAdvisorMonthly:
		return "fedgate egress advise without reuse distances in the ledger: copies of a prefix while its monthly ski-rental says so"
	case StrategyTEven:
		return "SkyStore T_even: keep a copy fetch-cost / storage-cost-per-hour hours after each read"
	case StrategyAlwaysStore:
		return "keep a copy of everything read, until the end"
	case StrategyAlwaysEvict:
		return "never keep a copy: every read from another location crosses"
	case StrategyTTL:
		return "keep a copy " + durationText(s.TTL) + " after each read"
	case StrategySingleRegion:
		return "each bucket in its home store alone (no replicas, no copies), every read from there"
	case StrategyPolicy:
		return "the policy file's placements as written, no copies"
	}
	return ""
}

// ParseStrategy reads a strategy's name: advisor, t-even, always-store,
// always-evict, single-region, policy, or ttl-DURATION (ttl-12h, ttl-2d).
func ParseStrategy(v string) (Strategy, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	if d, ok := strings.CutPrefix(v, "ttl"); ok && d != "" && strings.ContainsAny(d[:1], "-:=") {
		dur, err := policies.ParseDuration(d[1:])
		if err != nil || dur <= 0 {
			return Strategy{}, fmt.Errorf("strategy %q: want ttl-DURATION with a positive duration, like ttl-12h or ttl-2d", v)
		}
		return Strategy{Kind: StrategyTTL, TTL: dur}, nil
	}
	for _, k := range []StrategyKind{StrategyAdvisor, StrategyAdvisorMonthly, StrategyTEven, StrategyAlwaysStore, StrategyAlwaysEvict, StrategySingleRegion, StrategyPolicy} {
		if v == string(k) {
			return Strategy{Kind: k}, nil
		}
	}
	return Strategy{}, fmt.Errorf("unknown strategy %q: want advisor, advisor-monthly, t-even, always-store, always-evict, ttl-DURATION (like ttl-12h), single-region or policy", v)
}

// DefaultStrategies are the strategies simulated when none are named:
// the advisor, T_even, always-store, always-evict, fixed TTLs of 12 and 24
// hours, single-region and the policy as written.
func DefaultStrategies() []Strategy {
	return []Strategy{{Kind: StrategyAdvisor}, {Kind: StrategyTEven}, {Kind: StrategyAlwaysStore}, {Kind: StrategyAlwaysEvict},
		{Kind: StrategyTTL, TTL: 12 * time.Hour}, {Kind: StrategyTTL, TTL: 24 * time.Hour}, {Kind: StrategySingleRegion}, {Kind: StrategyPolicy}}
}

// SimOptions configure Simulate.
type SimOptions struct {
	Policy *policies.Policy // regions, buckets and stores; required
	// Transfer prices bytes moved (nil: the built-in table; give
	// NewTable(policy.Egress.Prices) for the policy's overrides).
	Transfer *Table
	Storage  *StorageTable // nil: the built-in prices
	Requests *RequestTable // nil: the built-in prices
	Strategy []Strategy    // nil: DefaultStrategies
	// AdviseEvery is how often the advisor re-runs (default 6 h, an
	// operator re-advising a few times a day; whole hours, as the ledger is
	// hourly) and AdviseWindow how much of the ledger it reads (default 14
	// days).
	AdviseEvery, AdviseWindow time.Duration
	// MaxObjects bounds the distinct objects (bucket and key) the trace
	// may hold, and so the memory: about 100 bytes plus the key per object,
	// plus 8 bytes per region, 16 per region and copy strategy and 1 per
	// region for the offline optimum (default 10,000,000).
	MaxObjects int
	// Progress, when set, is called with the rows replayed so far every
	// 4096 rows and at the end.
	Progress func(rows int64)
	// OnAdvice, when set, is given every advice an advisor strategy takes
	// (at: the end of its window), as Advise returned it: the same
	// function, on the same kind of ledger, as `fedgate egress advise`.
	OnAdvice func(strategy string, at time.Time, advice []Advice)
	Logger   *slog.Logger
}

// SimResult is what Simulate found.
type SimResult struct {
	Start, End          time.Time
	Rows                int64 // trace rows
	Gets, Puts, Deletes int64
	Objects             int // distinct (bucket, key)
	Regions             []string
	Strategies          []StrategyResult
	// Optimum is the offline optimum (see docs/egress.md, "The offline
	// optimum"): per object and reading region, a copy is kept across the
	// gap between two reads exactly when holding it costs less than
	// fetching again (transfer and GET, plus the PUT that makes the copy),
	// and what it fetches, keeps and requests is priced like every
	// strategy's. Apart from what tiers and free tiers shift between
	// months, a strategy that keeps the policy's placements costs at
	// least this.
	Optimum USD
	Notes   []string
}

// StrategyResult is one strategy's cost over the trace.
type StrategyResult struct {
	Strategy    Strategy
	Name        string
	Description string
	Egress      USD // transfer between locations (reads, writes, fills)
	Storage     USD // base copies and copies in regions
	CopyStorage USD // the part of Storage that copies in regions cost
	Requests    USD
	Total       USD
	// BytesMoved crossed a location boundary (reads and writes).
	BytesMoved int64
	// ReadBytes were read; LocalBytes of them were served in the reading
	// region's own location (a copy there, or a base copy that lives
	// there): HitRatio = LocalBytes / ReadBytes. CopyHitBytes were served
	// by a copy the strategy kept.
	ReadBytes, LocalBytes, CopyHitBytes int64
	HitRatio                            float64
	Gets, Puts                          int64
	// VsBest is Total / the cheapest strategy's Total (1 for the best).
	VsBest float64
	// VsOptimum is Total / SimResult.Optimum (+Inf when the optimum is 0
	// and Total is not; 1 when both are 0).
	VsOptimum float64
}

// Simulate replays the trace and prices every strategy. It reads the
// trace once, streaming; on a bad row or a row the policy cannot place it
// returns the reader's *TraceError and no result.
func Simulate(ctx context.Context, tr *TraceReader, opts SimOptions) (*SimResult, error) {
	s, err := newSim(opts)
	if err != nil {
		return nil, err
	}
	// The trace is read and parsed on another goroutine, a batch of rows
	// at a time, while the rows before are replayed.
	batches, free, done := make(chan *rowBatch, 2), make(chan *rowBatch, 4), make(chan struct{})
	for range cap(free) {
		free <- &rowBatch{}
	}
	go readBatches(tr, batches, free, done)
	defer close(done)
	var n int64
	for b := range batches {
		for i := range b.evs {
			if n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if opts.Progress != nil {
					opts.Progress(n)
				}
			}
			if err := s.event(&b.pos[i], b.evs[i]); err != nil {
				return nil, err
			}
			n++
		}
		if b.err != nil {
			return nil, b.err
		}
		free <- b
	}
	if opts.Progress != nil {
		opts.Progress(n)
	}
	if s.res.Rows == 0 {
		if tr.csv != nil {
			return nil, fmt.Errorf("simulate: %s: the trace has a header but no rows", tr.file)
		}
		return nil, fmt.Errorf("simulate: %s: the trace has no rows", tr.file)
	}
	return s.finish()
}

// rowBatch is rows of the trace with where each is, or the error that
// ended the trace.
type rowBatch struct {
	evs []TraceEvent
	pos []rowPos
	err error
}

// readBatches reads the trace into batches of up to 4096 rows, taken from
// free, until the trace ends (io.EOF: the channel is closed) or fails (a
// batch with err), or done is closed.
func readBatches(tr *TraceReader, batches chan<- *rowBatch, free <-chan *rowBatch, done <-chan struct{}) {
	defer close(batches)
	for {
		var b *rowBatch
		select {
		case b = <-free:
		case <-done:
			return
		}
		b.evs, b.pos = b.evs[:0], b.pos[:0]
		end := false
		for len(b.evs) < 4096 {
			ev, err := tr.Next()
			if err != nil {
				if err != io.EOF {
					b.err = err
				}
				end = true
				break
			}
			b.evs = append(b.evs, ev)
			b.pos = append(b.pos, tr.position())
		}
		select {
		case batches <- b:
		case <-done:
			return
		}
		if end {
			return
		}
	}
}

// --- the model ---

const (
	usPerHour = int64(time.Hour / time.Microsecond)
	never     = math.MinInt64 // a region never read the object
	forever   = math.MaxInt64 // a copy kept to the end
)

type simPart struct {
	store string
	sidx  int32 // index into sim.stores
	loc   int   // index into sim.locs
	num   int64 // bytes = size × num / den, rounded up
	den   int64
}

// simPlan is where a bucket's bytes go for one region: the parts written
// (and stored), or read.
type simPlan struct {
	parts []simPart
	local bool // every part is in the region's location
}

func (p simPlan) bytes(i int, size int64) int64 {
	pt := p.parts[i]
	if pt.num == pt.den {
		return size
	}
	return (size*pt.num + pt.den - 1) / pt.den
}

type simBucket struct {
	name string
	// per region: how reads and writes go (base = the placement;
	// home = single-region's location)
	readBase, writeBase []simPlan
	readHome, writeHome []simPlan
	// per region: T_even's figures for a read of the base: USD per byte
	// fetched, USD per fetch (GET requests), USD per byte-hour stored in
	// the region
	rate, getUSD, storeRate []float64
	// per region: the schedules of readBase's and writeBase's parts, and
	// the USD of a GET and a PUT in the region's location (the optimum's)
	readSch, writeSch [][]*Schedule
	regGet, regPut    []float64
	stored            simPlan // where the base copies are stored (write plan of region 0)
}

type simObj struct {
	size   int64
	born   int64 // µs: when the current version began to be stored
	bucket int32
	prefix int32 // into sim.prefixes
	alive  bool
}

// u128 accumulates byte-µs without overflow.
type u128 struct{ hi, lo uint64 }

func (a *u128) addMul(x, y int64) {
	if x <= 0 || y <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	var c uint64
	a.lo, c = bits.Add64(a.lo, lo, 0)
	a.hi += hi + c
}

func (a u128) big() *big.Int {
	b := new(big.Int).SetUint64(a.hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(a.lo))
}

type simStrat struct {
	Strategy
	copyIdx                 int // index among copy strategies; -1 for none
	home                    bool
	rows                    map[rowID]*Row // the current hour's ledger
	used                    map[PoolMonth]int64
	egress                  *big.Rat
	readEgress              *big.Rat // the part of egress that reads paid
	hidden                  bool     // the optimum: priced, not reported
	baseByteUs, copyByteUs  []u128   // per location
	gets, puts              []int64
	moved, read, local, hit int64
	adv                     *advisorState // advisors only
}

// advisorState is what an advisor strategy keeps: its ledger of the
// advice window, priced, one slice per hour, and the keep times of its
// last advice.
type advisorState struct {
	reuse  bool // record reuse distances in the ledger
	window [][]Priced
	keep   map[keepKey]float64 // hours
}

// rowID names a row of the hour's ledger by indexes: a key of ints hashes
// faster than Key's strings.
type rowID struct {
	src, dst, bucket, store int32 // into sim.locs, sim.locs, sim.buckets, sim.stores
	prefix                  int32 // into sim.prefixes; -1: ""
	write                   bool
}

type prefixKey struct {
	bucket int32
	prefix string
}

type keepKey struct {
	prefix int32 // into sim.prefixes; -1 for the bucket level
	bucket int32
	loc    string
}

type sim struct {
	opts    SimOptions
	pol     *policies.Policy
	log     *slog.Logger
	regions []policies.Region
	regIdx  map[string]int
	regLoc  []int // region -> location index
	locs    []policies.Location
	locStr  []string // locs as "cloud:region"
	locIdx  map[string]int
	buckets []*simBucket
	bIdx    map[string]int32
	strats  []*simStrat
	nCopy   int

	objs     []simObj
	objIdx   map[string]int32
	keyBuf   []byte
	stride   int
	slab     [][]int64 // per object, in chunks: lastRead per region, then (start, until) per copy strategy and region
	prefixes []prefixKey
	pIdx     map[prefixKey]int32
	pBytes   []int64 // live bytes per prefix, for Advise's Size

	hour     int64          // the hour being counted; math.MinInt64 before the first row
	tracked  map[int32]bool // advisors' ledgers: prefixes tracked this hour
	nTracked map[int32]int  // and how many, per bucket
	stores   []string       // store names, by simPart.sidx
	storeIdx map[string]int32
	advisors []*simStrat
	nextAdv  int64

	// The offline optimum (optRead): a strategy that knows, at each
	// re-read, the gap since the read before; held: per object and
	// region, whether it kept a copy across the last gap; optPos
	// always-evict's running bytes per pool and month, whose marginal
	// rate prices a fetch for its choice.
	optimum *simStrat
	held    [][]uint8
	optPos  map[optPool]int64
	// month's memory
	monthFrom, monthTo int64
	monthName          string

	res        SimResult
	multiStore bool // a bucket of the trace has a replicate or erasure placement
	first      bool
	last       int64
	approx     map[string]bool // approximate prices used
}

func newSim(opts SimOptions) (*sim, error) {
	if opts.Policy == nil {
		return nil, errors.New("simulate: no policy")
	}
	if len(opts.Policy.Regions) == 0 {
		return nil, fmt.Errorf("simulate: policy %s declares no regions: the trace's rows name the region that read or wrote", opts.Policy.File)
	}
	if opts.Transfer == nil {
		opts.Transfer = DefaultTable()
	}
	if opts.Storage == nil {
		opts.Storage = NewStorageTable()
	}
	if opts.Requests == nil {
		opts.Requests = NewRequestTable()
	}
	if len(opts.Strategy) == 0 {
		opts.Strategy = DefaultStrategies()
	}
	if opts.AdviseEvery <= 0 {
		opts.AdviseEvery = 6 * time.Hour
	}
	if opts.AdviseWindow <= 0 {
		opts.AdviseWindow = 14 * 24 * time.Hour
	}
	if opts.MaxObjects <= 0 {
		opts.MaxObjects = 10_000_000
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &sim{opts: opts, pol: opts.Policy, log: log, regIdx: map[string]int{}, locIdx: map[string]int{}, bIdx: map[string]int32{},
		objIdx: map[string]int32{}, pIdx: map[prefixKey]int32{}, hour: math.MinInt64, first: true,
		approx: map[string]bool{}, optPos: map[optPool]int64{}}
	for i, r := range s.pol.Regions {
		s.regions = append(s.regions, r)
		s.regIdx[r.Name] = i
		s.regLoc = append(s.regLoc, s.loc(r.Location))
		s.res.Regions = append(s.res.Regions, r.Name)
	}
	seen := map[string]bool{}
	for _, st := range opts.Strategy {
		if seen[st.Name()] {
			return nil, fmt.Errorf("simulate: strategy %s given twice", st.Name())
		}
		seen[st.Name()] = true
		ss := &simStrat{Strategy: st, copyIdx: -1, home: st.Kind == StrategySingleRegion, used: map[PoolMonth]int64{}, egress: new(big.Rat),
			readEgress: new(big.Rat), rows: map[rowID]*Row{}}
		if st.copies() {
			ss.copyIdx = s.nCopy
			s.nCopy++
		}
		if st.Kind == StrategyAdvisor || st.Kind == StrategyAdvisorMonthly {
			ss.adv = &advisorState{reuse: st.Kind == StrategyAdvisor, keep: map[keepKey]float64{}}
			s.advisors = append(s.advisors, ss)
		}
		s.strats = append(s.strats, ss)
		ss.grow(len(s.locs))
	}
	s.optimum = &simStrat{Strategy: Strategy{Kind: StrategyAlwaysEvict}, copyIdx: -1, used: map[PoolMonth]int64{}, egress: new(big.Rat),
		readEgress: new(big.Rat), rows: map[rowID]*Row{}, hidden: true}
	s.strats = append(s.strats, s.optimum)
	s.optimum.grow(len(s.locs))
	s.stride = len(s.regions) * (1 + 2*s.nCopy)
	return s, nil
}

func (s *sim) loc(l policies.Location) int {
	k := l.String()
	if i, ok := s.locIdx[k]; ok {
		return i
	}
	s.locs = append(s.locs, l)
	s.locStr = append(s.locStr, k)
	s.locIdx[k] = len(s.locs) - 1
	for _, st := range s.strats {
		st.grow(len(s.locs))
	}
	return len(s.locs) - 1
}

// store returns the index of a store name in sim.stores.
func (s *sim) store(name string) int32 {
	if i, ok := s.storeIdx[name]; ok {
		return i
	}
	if s.storeIdx == nil {
		s.storeIdx = map[string]int32{}
	}
	s.stores = append(s.stores, name)
	s.storeIdx[name] = int32(len(s.stores) - 1)
	return int32(len(s.stores) - 1)
}

func (st *simStrat) grow(n int) {
	for len(st.baseByteUs) < n {
		st.baseByteUs = append(st.baseByteUs, u128{})
		st.copyByteUs = append(st.copyByteUs, u128{})
		st.gets = append(st.gets, 0)
		st.puts = append(st.puts, 0)
	}
}

// bucket returns the index of a bucket, building its plans the first time.
func (s *sim) bucket(tr *rowPos, name string) (int32, error) {
	if len(s.buckets) <= 8 {
		for i, b := range s.buckets {
			if b.name == name {
				return int32(i), nil
			}
		}
	} else if i, ok := s.bIdx[name]; ok {
		return i, nil
	}
	b, declared := s.pol.Bucket(name)
	if !declared {
		b, declared = s.pol.MatchGlob(name)
	}
	place := b.Placement
	if place.Kind == policies.PlacementDefault {
		switch {
		case b.Origin != nil:
			place = policies.Placement{Kind: policies.PlacementSingle, Stores: []string{b.Origin.Store}}
		case s.pol.Defaults.Store != "":
			place = policies.Placement{Kind: policies.PlacementSingle, Stores: []string{s.pol.Defaults.Store}}
		}
	}
	if len(place.Stores) == 0 {
		what := "is not a bucket of the policy, and the policy has no defaults.store for buckets created through S3"
		if declared {
			what = "has no placement, origin or defaults.store in the policy: it would live in a region's embedded store, which other regions cannot read"
		}
		return 0, tr.ErrorAt("bucket", fmt.Sprintf("%q %s (%s)", name, what, s.pol.File))
	}
	sb := &simBucket{name: name}
	s.multiStore = s.multiStore || len(place.Stores) > 1
	for r := range s.regions {
		w, rd, err := s.plans(place, r)
		if err != nil {
			return 0, tr.ErrorAt("bucket", fmt.Sprintf("%q: %v", name, err))
		}
		sb.writeBase = append(sb.writeBase, w)
		sb.readBase = append(sb.readBase, rd)
		// single-region: the placement's first store alone.
		first, _ := s.pol.Store(place.Stores[0])
		home := simPlan{parts: []simPart{{store: first.Name, sidx: s.store(first.Name), loc: s.loc(first.Location), num: 1, den: 1}}}
		home.local = first.Location == s.regions[r].Location
		sb.writeHome = append(sb.writeHome, home)
		sb.readHome = append(sb.readHome, home)
		// T_even's figures: the base read's rate and requests, the
		// region's storage.
		to := s.regions[r].Location
		var rate, get float64
		for _, pt := range rd.parts {
			from := s.locs[pt.loc]
			f, _ := s.opts.Transfer.Schedule(from, to).PaidRate().Float64()
			rate += f * float64(pt.num) / float64(pt.den)
			rp, _ := s.opts.Requests.Lookup(from)
			get += float64(rp.GetMicrosPer1000) / 1e9
		}
		sp, _ := s.opts.Storage.Lookup(to)
		sr, _ := sp.PerByteHour().Float64()
		sb.rate, sb.getUSD, sb.storeRate = append(sb.rate, rate), append(sb.getUSD, get), append(sb.storeRate, sr)
		var rs, ws []*Schedule
		for _, pt := range rd.parts {
			rs = append(rs, s.opts.Transfer.Schedule(s.locs[pt.loc], to))
		}
		for _, pt := range w.parts {
			ws = append(ws, s.opts.Transfer.Schedule(to, s.locs[pt.loc]))
		}
		rp, _ := s.opts.Requests.Lookup(to)
		sb.readSch, sb.writeSch = append(sb.readSch, rs), append(sb.writeSch, ws)
		sb.regGet = append(sb.regGet, float64(rp.GetMicrosPer1000)/1e9)
		sb.regPut = append(sb.regPut, float64(rp.PutMicrosPer1000)/1e9)
	}
	sb.stored = sb.writeBase[0]
	s.buckets = append(s.buckets, sb)
	s.bIdx[name] = int32(len(s.buckets) - 1)
	return int32(len(s.buckets) - 1), nil
}

// plans returns how a placement writes from region r, and how r reads it:
// the cheapest member of a replicate placement, the cheapest K shards of
// an erasure one (shards go round-robin over the stores).
func (s *sim) plans(place policies.Placement, r int) (write, read simPlan, err error) {
	to := s.regions[r].Location
	type member struct {
		store string
		loc   int
		rate  *big.Rat
	}
	var members []member
	for _, name := range place.Stores {
		st, ok := s.pol.Store(name)
		if !ok {
			return write, read, fmt.Errorf("placement names store %q, which the policy does not declare", name)
		}
		members = append(members, member{store: name, loc: s.loc(st.Location), rate: s.opts.Transfer.Schedule(st.Location, to).PaidRate()})
	}
	cheapest := func(ms []member) []member {
		c := slices.Clone(ms)
		slices.SortStableFunc(c, func(a, b member) int { return a.rate.Cmp(b.rate) })
		return c
	}
	switch place.Kind {
	case policies.PlacementErasure:
		k, n := int64(place.Data), place.Data+place.Parity
		shards := make([]member, n)
		for i := range n {
			shards[i] = members[i%len(members)]
		}
		for _, m := range shards {
			write.parts = append(write.parts, simPart{store: m.store, sidx: s.store(m.store), loc: m.loc, num: 1, den: k})
		}
		for _, m := range cheapest(shards)[:k] {
			read.parts = append(read.parts, simPart{store: m.store, sidx: s.store(m.store), loc: m.loc, num: 1, den: k})
		}
	case policies.PlacementReplicate:
		for _, m := range members {
			write.parts = append(write.parts, simPart{store: m.store, sidx: s.store(m.store), loc: m.loc, num: 1, den: 1})
		}
		m := cheapest(members)[0]
		read.parts = []simPart{{store: m.store, sidx: s.store(m.store), loc: m.loc, num: 1, den: 1}}
	default:
		m := members[0]
		write.parts = []simPart{{store: m.store, sidx: s.store(m.store), loc: m.loc, num: 1, den: 1}}
		read.parts = write.parts
	}
	local := func(p simPlan) bool {
		for _, pt := range p.parts {
			if s.locs[pt.loc] != to {
				return false
			}
		}
		return true
	}
	write.local, read.local = local(write), local(read)
	return write, read, nil
}

func (s *sim) prefix(b int32, key string) int32 {
	k := prefixKey{b, AdvisePrefix(key)}
	if i, ok := s.pIdx[k]; ok {
		return i
	}
	s.prefixes = append(s.prefixes, k)
	s.pBytes = append(s.pBytes, 0)
	s.pIdx[k] = int32(len(s.prefixes) - 1)
	return int32(len(s.prefixes) - 1)
}

func (s *sim) object(tr *rowPos, b int32, key string, t int64) (int32, bool, error) {
	s.keyBuf = append(append(append(s.keyBuf[:0], s.buckets[b].name...), 0), key...)
	if i, ok := s.objIdx[string(s.keyBuf)]; ok {
		return i, false, nil
	}
	k := string(s.keyBuf)
	if len(s.objs) >= s.opts.MaxObjects {
		return 0, false, tr.ErrorAt("key", fmt.Sprintf("the trace holds more than %d distinct objects: raise the limit (--max-objects; each object costs about %d bytes of memory plus its key)",
			s.opts.MaxObjects, 100+8*s.stride+len(s.regions)))
	}
	i := int32(len(s.objs))
	s.objs = append(s.objs, simObj{bucket: b, prefix: s.prefix(b, key), born: t})
	// The per-object state lives in chunks of slabChunk objects, each
	// allocated whole: no slice of every object is copied as it grows.
	if int(i)%slabChunk == 0 {
		sl := make([]int64, slabChunk*s.stride)
		for j := range sl {
			sl[j] = never
		}
		s.slab, s.held = append(s.slab, sl), append(s.held, make([]uint8, slabChunk*len(s.regions)))
	}
	s.objIdx[k] = i
	return i, true, nil
}

// slabChunk is how many objects' state one chunk of sim.slab and sim.opt
// holds.
const slabChunk = 1 << 14

func (s *sim) lastRead(o int32, r int) *int64 {
	return &s.slab[int(o)/slabChunk][int(o)%slabChunk*s.stride+r]
}

// heldCopy says whether the optimum kept a copy of o in r across the
// last gap.
func (s *sim) heldCopy(o int32, r int) *uint8 {
	return &s.held[int(o)/slabChunk][int(o)%slabChunk*len(s.regions)+r]
}

// copyState returns a copy's (start, until); until == never: no copy.
func (s *sim) copyState(o int32, ci, r int) (*int64, *int64) {
	c := s.slab[int(o)/slabChunk]
	base := int(o)%slabChunk*s.stride + len(s.regions) + 2*(ci*len(s.regions)+r)
	return &c[base], &c[base+1]
}

// regionOf returns a region's index: a policy has a few, compared in
// turn faster than hashed.
func (s *sim) regionOf(name string) (int, bool) {
	if len(s.regions) > 8 {
		r, ok := s.regIdx[name]
		return r, ok
	}
	for i := range s.regions {
		if s.regions[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

func (s *sim) event(tr *rowPos, ev TraceEvent) error {
	r, ok := s.regionOf(ev.Region)
	if !ok {
		names := make([]string, len(s.regions))
		for i, x := range s.regions {
			names[i] = x.Name
		}
		return tr.ErrorAt("region", fmt.Sprintf("%q is not a region of the policy %s (it has %s)", ev.Region, s.pol.File, strings.Join(names, ", ")))
	}
	b, err := s.bucket(tr, ev.Bucket)
	if err != nil {
		return err
	}
	t := ev.Time.UnixMicro()
	if s.first {
		s.res.Start, s.first = ev.Time, false
	}
	s.res.End, s.last = ev.Time, t
	s.res.Rows++
	if h := t / usPerHour; h != s.hour {
		s.flushHour(h)
	}
	o, fresh, err := s.object(tr, b, ev.Key, t)
	if err != nil {
		return err
	}
	obj := &s.objs[o]
	switch ev.Op {
	case OpPut:
		s.res.Puts++
		if obj.alive {
			s.endVersion(o, t)
		}
		s.begin(o, ev.Size, t)
		s.optAdvance(s.regions[r].Location.Cloud, s.buckets[b].writeBase[r], s.buckets[b].writeSch[r], ev.Size, t)
		for _, st := range s.strats {
			plan := s.buckets[b].writeBase[r]
			if st.home {
				plan = s.buckets[b].writeHome[r]
			}
			for i, pt := range plan.parts {
				n := plan.bytes(i, ev.Size)
				st.puts[pt.loc]++
				s.count(st, rowID{src: int32(s.regLoc[r]), dst: int32(pt.loc), bucket: b, store: pt.sidx, prefix: -1, write: true}, n, 0, nil)
			}
		}
	case OpDelete:
		s.res.Deletes++
		if obj.alive {
			s.endVersion(o, t)
			obj.alive = false
		}
	case OpGet:
		s.res.Gets++
		if !obj.alive || fresh {
			s.begin(o, ev.Size, t) // data that was there before the trace began
		} else if ev.Size > obj.size {
			// A read larger than the object known: it was bigger (it was
			// there before the trace, or changed outside fedgate).
			s.endVersion(o, t)
			s.begin(o, ev.Size, t)
		}
		s.read(o, r, ev, t)
	}
	return nil
}

// begin starts a version of an object (size bytes stored from t).
func (s *sim) begin(o int32, size, t int64) {
	obj := &s.objs[o]
	obj.size, obj.born, obj.alive = size, t, true
	s.pBytes[obj.prefix] += size
	if len(s.objIdx) > s.res.Objects {
		s.res.Objects = len(s.objIdx)
	}
}

// endVersion ends the storage of an object's version at t: its base
// copies and every copy in a region; a new version is read afresh.
func (s *sim) endVersion(o int32, t int64) {
	obj := &s.objs[o]
	sb := s.buckets[obj.bucket]
	for _, st := range s.strats {
		plan := sb.stored
		if st.home {
			plan = sb.writeHome[0]
		}
		for i, pt := range plan.parts {
			st.baseByteUs[pt.loc].addMul(plan.bytes(i, obj.size), t-obj.born)
		}
		if st.copyIdx >= 0 {
			for r := range s.regions {
				s.dropCopy(st, o, r, t)
			}
		}
	}
	for r := range s.regions {
		*s.lastRead(o, r) = never
		*s.heldCopy(o, r) = 0
	}
	s.pBytes[obj.prefix] -= obj.size
	obj.alive = false
}

// dropCopy ends a copy at t (or when it expired, if earlier).
func (s *sim) dropCopy(st *simStrat, o int32, r int, t int64) {
	start, until := s.copyState(o, st.copyIdx, r)
	if *until == never {
		return
	}
	end := min(*until, t)
	st.copyByteUs[s.regLoc[r]].addMul(s.objs[o].size, end-*start)
	*start, *until = never, never
}

func (s *sim) read(o int32, r int, ev TraceEvent, t int64) {
	obj := &s.objs[o]
	sb := s.buckets[obj.bucket]
	n := ev.Size
	lr := s.lastRead(o, r)
	rb := 0
	if *lr != never {
		rb = ReuseBucket(time.Duration(t-*lr)*time.Microsecond, false)
	}
	if !sb.readBase[r].local {
		s.optRead(o, r, ev, t, *lr)
	}
	*lr = t
	regLoc := s.regLoc[r]
	for _, st := range s.strats {
		st.read += n
		plan := sb.readBase[r]
		if st.home {
			plan = sb.readHome[r]
		}
		if st == s.optimum && !plan.local {
			continue // optRead
		}
		if plan.local {
			st.local += n
			s.fetch(st, plan, obj, ev, regLoc, -1)
			continue
		}
		if st.copyIdx >= 0 {
			start, until := s.copyState(o, st.copyIdx, r)
			if *until != never && t <= *until {
				// A hit: the region's copy serves the read.
				st.local += n
				st.hit += n
				st.gets[s.regLoc[r]]++
				if st.adv != nil {
					pt := plan.parts[0]
					k := rowID{src: int32(pt.loc), dst: int32(regLoc), bucket: obj.bucket, store: pt.sidx, prefix: s.advisorPrefix(obj)}
					if st.adv.reuse {
						s.count(st, k, 0, n, &rb)
					} else {
						s.count(st, k, 0, n, nil)
					}
				}
				// The gap after this read is held for the keep time in
				// force now (T_even, a TTL, or the advice just given).
				if k := s.keepFor(st, obj, r, n); k > 0 {
					*until = addKeep(t, k)
				} else {
					s.dropCopy(st, o, r, t)
				}
				continue
			}
			if *until != never {
				s.dropCopy(st, o, r, t)
			}
			s.fetch(st, plan, obj, ev, regLoc, rb)
			if k := s.keepFor(st, obj, r, n); k > 0 {
				*start, *until = t, addKeep(t, k)
				st.puts[s.regLoc[r]]++
			}
			continue
		}
		s.fetch(st, plan, obj, ev, regLoc, rb)
	}
}

// optAdvance adds the bytes of a write, which every strategy keeping the
// placements makes, to always-evict's running total that the optimum
// prices its choices at, per pool and month.
func (s *sim) optAdvance(cloud string, plan simPlan, sch []*Schedule, size, t int64) {
	if plan.local {
		return
	}
	for i := range plan.parts {
		s.optTransfer(cloud, sch[i], plan.bytes(i, size), t)
	}
}

// optTransfer prices n bytes for the optimum's choice: at the marginal
// rate that always-evict's running total of the pool and month (writes
// and every crossing read) has reached with them; within a free tier, at
// the first paid rate (the optimum's own fetches may have used the free
// bytes up: which fetches are free depends on the month's total).
func (s *sim) optTransfer(cloud string, sc *Schedule, n, t int64) float64 {
	used := int64(0)
	if !sc.Flat() {
		s.month(t)
		k := optPool{cloud: cloud, pool: sc.Pool, month: s.monthFrom}
		used = s.optPos[k] + n
		s.optPos[k] = used
	}
	rate := sc.RateAt(used)
	if rate == 0 {
		rate = firstPaid(sc)
	}
	return float64(n) * float64(rate) / (float64(sc.Unit) * 1e6)
}

// optPool is PoolMonth with the month as its first µs.
type optPool struct {
	cloud, pool string
	month       int64
}

// firstPaid returns a schedule's first rate above 0 (micros per unit).
func firstPaid(sc *Schedule) int64 {
	for _, t := range sc.Tiers {
		if t.MicrosPerUnit > 0 {
			return t.MicrosPerUnit
		}
	}
	return 0
}

// month is monthOf for a time in µs, remembered for the month last asked.
func (s *sim) month(t int64) string {
	if t >= s.monthFrom && t < s.monthTo && s.monthName != "" {
		return s.monthName
	}
	tm := time.UnixMicro(t).UTC()
	from := time.Date(tm.Year(), tm.Month(), 1, 0, 0, 0, 0, time.UTC)
	s.monthFrom, s.monthTo, s.monthName = from.UnixMicro(), from.AddDate(0, 1, 0).UnixMicro(), from.Format("2006-01")
	return s.monthName
}

// optRead is the optimum's read of ev at t by region r, whose previous
// read of the object was at prev (never: none, or another version): it
// kept a copy across the gap since prev exactly when holding it (its
// storage over the gap, a GET of the copy, and the PUT that made it
// unless the copy was already held across the gap before) cost less than
// fetching again (transfer at the marginal rate always-evict's running
// total of the month has reached, and the GETs of the base); else it
// fetches. What it fetches, keeps and requests is
// priced like every strategy's.
func (s *sim) optRead(o int32, r int, ev TraceEvent, t, prev int64) {
	st := s.optimum
	obj := &s.objs[o]
	sb := s.buckets[obj.bucket]
	plan := sb.readBase[r]
	n := ev.Size
	to := s.regions[r].Location
	fetch := sb.getUSD[r]
	for i, pt := range plan.parts {
		if s.locs[pt.loc] != to {
			fetch += s.optTransfer(s.locs[pt.loc].Cloud, sb.readSch[r][i], plan.bytes(i, n), t)
		}
	}
	held := s.heldCopy(o, r)
	if prev != never {
		gap := t - prev
		hold := float64(obj.size)*sb.storeRate[r]*float64(gap)/float64(usPerHour) + sb.regGet[r]
		if *held == 0 {
			hold += sb.regPut[r]
		}
		if hold < fetch {
			loc := s.regLoc[r]
			st.copyByteUs[loc].addMul(obj.size, gap)
			st.gets[loc]++
			if *held == 0 {
				st.puts[loc]++
			}
			*held = 1
			st.local += n
			st.hit += n
			return
		}
	}
	*held = 0
	s.fetch(st, plan, obj, ev, s.regLoc[r], -1)
}

// fetch reads an object from its base copies into location dst.
func (s *sim) fetch(st *simStrat, plan simPlan, obj *simObj, ev TraceEvent, dst int, rb int) {
	for i, pt := range plan.parts {
		n := plan.bytes(i, ev.Size)
		st.gets[pt.loc]++
		k := rowID{src: int32(pt.loc), dst: int32(dst), bucket: obj.bucket, store: pt.sidx, prefix: -1}
		var reuse *int
		if st.adv != nil && rb >= 0 && i == 0 {
			k.prefix = s.advisorPrefix(obj)
			if st.adv.reuse {
				reuse = &rb
			}
		}
		// The reuse of the read goes with its first part (all of it for a
		// single or replicated bucket).
		var demand int64
		if reuse != nil {
			demand = ev.Size
		}
		s.countReuse(st, k, n, 0, reuse, demand)
	}
}

func (s *sim) count(st *simStrat, k rowID, n, avoided int64, reuse *int) {
	var demand int64
	if reuse != nil {
		demand = n + avoided
	}
	s.countReuse(st, k, n, avoided, reuse, demand)
}

func (s *sim) countReuse(st *simStrat, id rowID, n, avoided int64, reuse *int, demand int64) {
	row := st.rows[id]
	if row == nil {
		row = &Row{Key: Key{Hour: s.hour, Src: s.locStr[id.src], Dst: s.locStr[id.dst], Bucket: s.buckets[id.bucket].name,
			Store: s.stores[id.store], Direction: Read}}
		if id.write {
			row.Direction = Write
		}
		if id.prefix >= 0 {
			row.Prefix = s.prefixes[id.prefix].prefix
		}
		st.rows[id] = row
	}
	c := &row.Counts
	c.Bytes += n
	c.AvoidedBytes += avoided
	if reuse != nil {
		if c.Reuse == nil {
			c.Reuse = make([]int64, ReuseBuckets)
		}
		c.Reuse[*reuse] += demand
	}
	if id.src != id.dst {
		st.moved += n
	}
}

// advisorPrefix is the prefix the advisor's ledger counts a read of obj
// under (an index into sim.prefixes, -1 for ""): the key's, while the
// bucket has fewer than MaxPrefixes this hour (as a gateway counts).
func (s *sim) advisorPrefix(obj *simObj) int32 {
	if s.prefixes[obj.prefix].prefix == "" {
		return -1
	}
	if s.tracked == nil {
		s.tracked, s.nTracked = map[int32]bool{}, map[int32]int{}
	}
	if !s.tracked[obj.prefix] {
		if s.nTracked[obj.bucket] >= MaxPrefixes {
			return -1
		}
		s.tracked[obj.prefix] = true
		s.nTracked[obj.bucket]++
	}
	return obj.prefix
}

// keepFor returns how long (µs) the strategy keeps a copy of obj in
// region r after a read: 0 not at all, forever for ever.
func (s *sim) keepFor(st *simStrat, obj *simObj, r int, n int64) int64 {
	sb := s.buckets[obj.bucket]
	switch st.Kind {
	case StrategyAlwaysStore:
		return forever
	case StrategyTTL:
		return st.TTL.Microseconds()
	case StrategyTEven:
		if sb.storeRate[r] <= 0 {
			return forever
		}
		return hoursToUs((float64(n)*sb.rate[r] + sb.getUSD[r]) / (float64(max(n, 1)) * sb.storeRate[r]))
	case StrategyAdvisorMonthly:
		loc := s.locStr[s.regLoc[r]]
		if h, ok := st.adv.keep[keepKey{prefix: obj.prefix, bucket: obj.bucket, loc: loc}]; ok {
			return hoursToUs(h)
		}
		if h, ok := st.adv.keep[keepKey{prefix: -1, bucket: obj.bucket, loc: loc}]; ok {
			return hoursToUs(h)
		}
		return 0 // no advice: no copy
	case StrategyAdvisor:
		loc := s.locStr[s.regLoc[r]]
		h, ok := st.adv.keep[keepKey{prefix: obj.prefix, bucket: obj.bucket, loc: loc}]
		if !ok {
			h, ok = st.adv.keep[keepKey{prefix: -1, bucket: obj.bucket, loc: loc}]
		}
		if !ok {
			// No advice yet for this bucket and region: what Advise
			// gives data without history, the break-even time.
			h = math.Inf(1)
			if sb.storeRate[r] > 0 {
				h = sb.rate[r] / sb.storeRate[r]
			}
		}
		return hoursToUs(min(h, s.copyPays(sb, r, n)))
	}
	return 0
}

// copyPays is the longest a copy of an object of n bytes in region r can
// pay for itself, in hours: the advice is per byte, requests are per
// object. A copy costs its PUT and a GET of it at the re-read it serves;
// when fetching again costs no more than that (n×rate + the base's GETs
// <= PUT + GET), it never pays: 0. Otherwise holding it longer than
// (fetch - GET) / storage per hour costs more than the fetch it saves.
func (s *sim) copyPays(sb *simBucket, r int, n int64) float64 {
	fetch := float64(n)*sb.rate[r] + sb.getUSD[r]
	if fetch <= sb.regPut[r]+sb.regGet[r] {
		return 0
	}
	hold := float64(max(n, 1)) * sb.storeRate[r]
	if hold <= 0 {
		return math.Inf(1)
	}
	return (fetch - sb.regGet[r]) / hold
}

func hoursToUs(h float64) int64 {
	switch {
	case math.IsInf(h, 1) || h*float64(usPerHour) >= float64(math.MaxInt64/2):
		return forever
	case h <= 0 || math.IsNaN(h):
		return 0
	}
	return int64(h * float64(usPerHour))
}

func addKeep(t, k int64) int64 {
	if k == forever || t > math.MaxInt64-k {
		return forever
	}
	return t + k
}

// flushHour prices the hour's ledger of every strategy, feeds the
// advisor's to its window and re-runs it when due; then counting moves to
// hour h.
func (s *sim) flushHour(h int64) {
	if s.hour != math.MinInt64 {
		for _, st := range s.strats {
			s.priceHour(st)
		}
	}
	s.hour = h
	s.tracked = nil
	if len(s.advisors) == 0 {
		return
	}
	every := max(int64(s.opts.AdviseEvery/time.Hour), 1)
	if s.nextAdv == 0 {
		s.nextAdv = h
	}
	// Advice runs on the trace's clock: every AdviseEvery, whether rows
	// came or not (a silence is re-advised as it passes).
	for s.nextAdv <= h {
		for _, st := range s.advisors {
			s.advise(st, s.nextAdv)
		}
		s.nextAdv += every
	}
}

func (s *sim) priceHour(st *simStrat) {
	if len(st.rows) == 0 {
		return
	}
	rows := make([]Row, 0, len(st.rows))
	for _, r := range st.rows {
		rows = append(rows, *r)
	}
	clear(st.rows)
	priced, err := Price(rows, s.opts.Transfer, Options{Prior: st.used})
	if err != nil {
		// Locations come from a parsed policy: they always parse.
		panic(fmt.Sprintf("simulate: pricing the ledger: %v", err))
	}
	for _, p := range priced {
		if p.Schedule.Approx && p.Bytes > 0 {
			s.approx["transfer: "+p.Schedule.Name+" ("+p.Schedule.Note+")"] = true
		}
		st.egress.Add(st.egress, p.Cost.rat())
		if p.Direction == Read {
			st.readEgress.Add(st.readEgress, p.Cost.rat())
		}
		if !p.Schedule.Flat() {
			st.used[PoolMonth{Account: p.Account, Pool: p.Schedule.Pool, Month: monthOf(p.Hour)}] += p.Bytes
		}
	}
	if a := st.adv; a != nil {
		a.window = append(a.window, priced)
		keepFrom := s.hour - int64(s.opts.AdviseWindow/time.Hour)
		for len(a.window) > 0 && (len(a.window[0]) == 0 || a.window[0][0].Hour < keepFrom) {
			a.window = a.window[1:]
		}
	}
}

// advise runs Advise on an advisor's ledger of the window before hour h
// and takes its keep times: Advice.Keep from rows with reuse distances;
// without them, a recommended prefix is kept for ever (until the advice
// changes), any other not at all.
func (s *sim) advise(st *simStrat, h int64) {
	var rows []Priced
	since := h - int64(s.opts.AdviseWindow/time.Hour)
	for _, hr := range st.adv.window {
		if len(hr) > 0 && hr[0].Hour >= since {
			rows = append(rows, hr...)
		}
	}
	until := time.Unix(h*3600, 0).UTC()
	advice := Advise(rows, AdviseOptions{Since: time.Unix(since*3600, 0).UTC(), Until: until, Storage: s.opts.Storage,
		Size: func(bucket, prefix, _ string) (int64, bool) {
			b, ok := s.bIdx[bucket]
			if !ok {
				return 0, false
			}
			i, ok := s.pIdx[prefixKey{b, prefix}]
			if !ok {
				return 0, false
			}
			return s.pBytes[i], true
		}})
	if s.opts.OnAdvice != nil {
		s.opts.OnAdvice(st.Name(), until, advice)
	}
	keep := st.adv.keep
	clear(keep)
	for _, a := range advice {
		b, ok := s.bIdx[a.Bucket]
		if !ok {
			continue
		}
		hours := 0.0
		switch {
		case a.Keep != nil:
			hours = a.Keep.Hours
			if a.BucketKeep != nil && a.BucketKeep.Scope != "default" {
				keep[keepKey{prefix: -1, bucket: b, loc: a.To}] = a.BucketKeep.Hours
			}
		case a.Recommend:
			hours = math.Inf(1)
		}
		if i, ok := s.pIdx[prefixKey{b, a.Prefix}]; ok {
			keep[keepKey{prefix: i, bucket: b, loc: a.To}] = hours
		}
		s.log.Debug("simulate: advice", "strategy", st.Name(), "hour", until, "bucket", a.Bucket, "prefix", a.Prefix, "to", a.To, "keep_hours", hours)
	}
}

func (s *sim) finish() (*SimResult, error) {
	if s.res.Rows == 0 {
		return nil, errors.New("simulate: the trace has no rows")
	}
	end := s.last
	for o := range s.objs {
		if s.objs[o].alive {
			s.endVersion(int32(o), end)
		}
	}
	for _, st := range s.strats {
		s.priceHour(st)
	}
	approx := s.approx
	for _, st := range s.strats {
		r := StrategyResult{Strategy: st.Strategy, Name: st.Name(), Description: st.Describe(), Egress: USD{st.egress},
			BytesMoved: st.moved, ReadBytes: st.read, LocalBytes: st.local, CopyHitBytes: st.hit}
		for i, l := range s.locs {
			sp, _ := s.opts.Storage.Lookup(l)
			perUs := new(big.Rat).Quo(sp.PerByteHour(), new(big.Rat).SetInt64(usPerHour))
			base := new(big.Rat).Mul(new(big.Rat).SetInt(st.baseByteUs[i].big()), perUs)
			cp := new(big.Rat).Mul(new(big.Rat).SetInt(st.copyByteUs[i].big()), perUs)
			r.Storage = r.Storage.Add(USD{base}).Add(USD{cp})
			r.CopyStorage = r.CopyStorage.Add(USD{cp})
			rp, _ := s.opts.Requests.Lookup(l)
			r.Requests = r.Requests.Add(rp.Cost(st.gets[i], st.puts[i]))
			r.Gets += st.gets[i]
			r.Puts += st.puts[i]
			if (st.baseByteUs[i] != u128{} || st.copyByteUs[i] != u128{}) && sp.Approx {
				approx["storage: "+sp.Name+", "+sp.AsOf] = true
			}
			if (st.gets[i] > 0 || st.puts[i] > 0) && rp.Approx {
				approx["requests: "+rp.Name+", "+rp.AsOf] = true
			}
		}
		r.Total = r.Egress.Add(r.Storage).Add(r.Requests)
		if r.ReadBytes > 0 {
			r.HitRatio = float64(r.LocalBytes) / float64(r.ReadBytes)
		}
		if st == s.optimum {
			s.res.Optimum = r.Total
		}
		if !st.hidden {
			s.res.Strategies = append(s.res.Strategies, r)
		}
	}
	// The rule prices a fetch at list rates; a month's free tier or a
	// cheaper tier can make fetching cost less than that, and a strategy
	// that fetched then can cost less than the rule: the optimum is then
	// that strategy's total, and a note says so.
	for _, r := range s.res.Strategies {
		if r.Strategy.Kind != StrategySingleRegion && r.Total.Cmp(s.res.Optimum) < 0 {
			s.res.Notes = append(s.res.Notes, fmt.Sprintf("%s (%s USD) cost less than the offline rule (%s USD), with tiers the rule's fetch prices do not know: the optimum shown is %s's.",
				r.Name, r.Total, s.res.Optimum, r.Name))
			s.res.Optimum = r.Total
		}
	}
	for i := range s.res.Strategies {
		r := &s.res.Strategies[i]
		switch {
		case s.res.Optimum.Sign() > 0:
			r.VsOptimum, _ = new(big.Rat).Quo(r.Total.rat(), s.res.Optimum.rat()).Float64()
		case r.Total.Sign() == 0:
			r.VsOptimum = 1
		default:
			r.VsOptimum = math.Inf(1)
		}
	}
	best := s.res.Strategies[0].Total
	for _, r := range s.res.Strategies {
		if r.Total.Cmp(best) < 0 {
			best = r.Total
		}
	}
	for i := range s.res.Strategies {
		r := &s.res.Strategies[i]
		if best.Sign() > 0 {
			q, _ := new(big.Rat).Quo(r.Total.rat(), best.rat()).Float64()
			r.VsBest = q
		} else if r.Total.Sign() == 0 {
			r.VsBest = 1
		} else {
			r.VsBest = math.Inf(1)
		}
	}
	s.res.Notes = append(s.res.Notes,
		"Transfer is priced like the egress report (tiers and free tiers per calendar month, from the first row); storage per byte-hour of a 730-hour month; requests per GET and PUT. Prices marked approximate below are assumptions: override them with --storage-price and --request-price, and transfer with the policy's egress.prices.",
		"Copies live in each reading region's own location and hold whole objects; a copy is made by the read that fetched the object, and dropped when it expires, the object is written again or deleted, or the trace ends. Storage is counted only up to the trace's last row.")
	s.res.Notes = append(s.res.Notes, sameCost(s.res.Strategies, s.multiStore)...)
	for _, a := range sortedKeys(approx) {
		s.res.Notes = append(s.res.Notes, "approximate: "+a)
	}
	res := s.res // not &s.res: that would keep the whole simulation alive
	return &res, nil
}

// sameCost notes the strategies that cost exactly the same, and why when
// it is known.
func sameCost(rs []StrategyResult, multiStore bool) []string {
	var notes []string
	done := make([]bool, len(rs))
	for i := range rs {
		if done[i] {
			continue
		}
		group := []string{rs[i].Name}
		kinds := map[StrategyKind]bool{rs[i].Strategy.Kind: true}
		for j := i + 1; j < len(rs); j++ {
			if !done[j] && rs[j].Total.Cmp(rs[i].Total) == 0 {
				done[j] = true
				group = append(group, rs[j].Name)
				kinds[rs[j].Strategy.Kind] = true
			}
		}
		if len(group) < 2 {
			continue
		}
		// Each reason names the strategies it explains; the others in
		// the group made the same choices on this trace.
		var why []string
		explained := map[StrategyKind]bool{}
		if kinds[StrategyPolicy] && kinds[StrategyAlwaysEvict] {
			why = append(why, "policy is always-evict by construction (the policy keeps its placements' copies and nothing more; the region cache is not modelled)")
			explained[StrategyPolicy], explained[StrategyAlwaysEvict] = true, true
		}
		if kinds[StrategySingleRegion] && kinds[StrategyAlwaysEvict] && !multiStore {
			why = append(why, "single-region differs from always-evict only for replicate and erasure placements, and the trace has none")
			explained[StrategySingleRegion], explained[StrategyAlwaysEvict] = true, true
		}
		if kinds[StrategyTEven] && kinds[StrategyAlwaysStore] {
			why = append(why, "t-even kept every copy past the end of the trace, as always-store does")
			explained[StrategyTEven], explained[StrategyAlwaysStore] = true, true
		}
		if len(why) > 0 {
			var rest []string
			for _, n := range group {
				st, _ := ParseStrategy(n)
				if !explained[st.Kind] {
					rest = append(rest, n)
				}
			}
			if len(rest) > 0 {
				why = append(why, strings.Join(rest, ", ")+" kept and dropped the same copies on this trace")
			}
		}
		note := strings.Join(group[:len(group)-1], ", ") + " and " + group[len(group)-1] + " cost exactly the same"
		if len(why) > 0 {
			note += ": " + strings.Join(why, "; ")
		}
		notes = append(notes, note+".")
	}
	return notes
}

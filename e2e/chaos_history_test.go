package e2e

import (
	"cmp"
	bin "encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Bodies of chaos objects say who wrote them: bytes 0-7 are the write's id,
// 8-15 the size, the rest a pattern derived from both. A GET proves which
// write it returned, and any byte from elsewhere is caught.

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// fillBody writes bytes [off, off+len(b)) of write id's body of size bytes.
func fillBody(b []byte, id uint64, size, off int64) {
	var word uint64
	wordAt := int64(-1)
	for i := range b {
		p := off + int64(i)
		switch {
		case p < 8:
			b[i] = byte(id >> (8 * p))
		case p < 16:
			b[i] = byte(uint64(size) >> (8 * (p - 8)))
		default:
			if w := p / 8; w != wordAt {
				word, wordAt = splitmix(id*0x100000001b3+uint64(w)), w
			}
			b[i] = byte(word >> (8 * (p % 8)))
		}
	}
}

func makeBody(id uint64, size int64) []byte {
	b := make([]byte, size)
	fillBody(b, id, size, 0)
	return b
}

// bodyCheck is an io.Writer that checks a body as it streams past.
type bodyCheck struct {
	head [16]byte
	n    int64
	id   uint64
	size int64
	bad  string
	buf  []byte
}

func (c *bodyCheck) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 && c.n < 16 {
		c.head[c.n] = p[0]
		p, c.n = p[1:], c.n+1
		if c.n == 16 {
			c.id = bin.LittleEndian.Uint64(c.head[:8])
			c.size = int64(bin.LittleEndian.Uint64(c.head[8:]))
		}
	}
	if len(p) > 0 && c.bad == "" {
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		want := c.buf[:len(p)]
		fillBody(want, c.id, c.size, c.n)
		if i := firstDiff(want, p); i >= 0 {
			c.bad = fmt.Sprintf("byte %d differs from write %d's body", c.n+int64(i), c.id)
		}
	}
	c.n += int64(len(p))
	return total, nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// verdict says what a complete body of n bytes was: the write's id, or why
// it is no write's body.
func (c *bodyCheck) verdict() (uint64, error) {
	switch {
	case c.bad != "":
		return 0, fmt.Errorf("foreign body: %s", c.bad)
	case c.n < 16 || c.n != c.size:
		return 0, fmt.Errorf("foreign body: %d bytes, header says %d", c.n, c.size)
	}
	return c.id, nil
}

// readBody streams r through a bodyCheck.
func readBody(r io.Reader) (id uint64, n int64, err error) {
	var c bodyCheck
	n, err = io.Copy(&c, r)
	if err != nil {
		return 0, n, err
	}
	id, err = c.verdict()
	return id, n, err
}

// The register model: each key holds one write's id (0: absent).

type regKind byte

const (
	opPut     regKind = 'P'
	opCondPut regKind = 'C' // If-None-Match: *
	opDelete  regKind = 'D'
	opGet     regKind = 'G'
)

type regInput struct {
	Kind regKind
	ID   uint64 // the write's id (puts)
}

type regOutput struct {
	Unknown bool   // a write whose outcome the client cannot know
	Failed  bool   // a conditional put answered 412
	ID      uint64 // what a GET returned (0: 404)
}

var registerModel = porcupine.Model{
	Init: func() interface{} { return uint64(0) },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(uint64), input.(regInput), output.(regOutput)
		switch in.Kind {
		case opPut:
			return true, in.ID
		case opCondPut:
			switch {
			case out.Unknown:
				if s == 0 {
					return true, in.ID
				}
				return true, s
			case out.Failed:
				return s != 0, s
			default:
				return s == 0, in.ID
			}
		case opDelete:
			return true, uint64(0)
		default:
			return out.ID == s, s
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(regInput), output.(regOutput)
		res := "ok"
		switch {
		case out.Unknown:
			res = "unknown"
		case out.Failed:
			res = "412"
		}
		switch in.Kind {
		case opGet:
			return fmt.Sprintf("get() -> %d", out.ID)
		case opDelete:
			return "delete() -> " + res
		case opCondPut:
			return fmt.Sprintf("put-if-absent(%d) -> %s", in.ID, res)
		}
		return fmt.Sprintf("put(%d) -> %s", in.ID, res)
	},
	DescribeState: func(state interface{}) string { return fmt.Sprint(state.(uint64)) },
}

// histOp is one operation as a client saw it.
type histOp struct {
	Key       string // bucket/key
	Client    int
	Node      int
	In        regInput
	Out       regOutput
	Call, Ret time.Duration // since the run started; Ret is forever for unknown outcomes
	Err       string
}

const forever = time.Duration(math.MaxInt64)

// history collects operations from every client.
type history struct {
	mu  sync.Mutex
	ops []histOp
}

func (h *history) add(op histOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *history) byKey() map[string][]histOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]histOp{}
	for _, op := range h.ops {
		out[op.Key] = append(out[op.Key], op)
	}
	return out
}

func toPorcupine(ops []histOp) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		out[i] = porcupine.Operation{ClientId: op.Client, Input: op.In, Output: op.Out, Call: int64(op.Call), Return: int64(op.Ret)}
	}
	return out
}

// checkLinearizable checks each key's history as a register. For a key
// that fails it returns the shortest failing prefix of its history (by
// invocation) as text, which is where the violation shows.
func checkLinearizable(byKey map[string][]histOp, timeout time.Duration) (failures []string, unknown []string) {
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops := slices.Clone(byKey[k])
		slices.SortFunc(ops, func(a, b histOp) int { return cmp.Compare(a.Call, b.Call) })
		switch porcupine.CheckOperationsTimeout(registerModel, toPorcupine(ops), timeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			unknown = append(unknown, k)
			continue
		}
		// Shortest prefix that is still not linearizable (a prefix of
		// a linearizable history by invocation is linearizable).
		n := sort.Search(len(ops), func(n int) bool {
			return porcupine.CheckOperationsTimeout(registerModel, toPorcupine(ops[:n+1]), timeout) == porcupine.Illegal
		}) + 1
		n = min(n, len(ops))
		// The last operation of that prefix is the one no order admits;
		// show it with what ran in the second before it.
		last := ops[n-1]
		from := n - 1
		for from > 0 && n-from < 40 && (ops[from-1].Ret == forever || ops[from-1].Ret >= last.Call-time.Second) {
			from--
		}
		failures = append(failures, fmt.Sprintf("%s: not linearizable; the shortest failing history is its first %d of %d operations, ending (%d earlier not shown):\n%s",
			k, n, len(ops), from, describeOps(ops[from:n])))
	}
	return failures, unknown
}

func describeOps(ops []histOp) string {
	var b strings.Builder
	for _, op := range ops {
		ret := "never (outcome unknown)"
		if op.Ret != forever {
			ret = fmt.Sprintf("%.3fs", op.Ret.Seconds())
		}
		fmt.Fprintf(&b, "  client %2d node %d  [%.3fs, %s]  %s", op.Client, op.Node+1, op.Call.Seconds(), ret,
			registerModel.DescribeOperation(op.In, op.Out))
		if op.Err != "" {
			fmt.Fprintf(&b, "  (%s)", op.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

package egress

import "strings"

// MaxPrefixes bounds the key prefixes one node tracks per bucket and hour
// in the ledger; reads of further prefixes count under "" (the rest of the
// bucket).
const MaxPrefixes = 32

// maxPrefixLen bounds a tracked prefix.
const maxPrefixLen = 256

// AdvisePrefix is the part of an object key that reads are counted under
// in the ledger (Key.Prefix): its first two path segments
// ("train/shard-00/x" -> "train/shard-00/"), its first when it has only
// one or the two are too long, "" when it has none.
func AdvisePrefix(key string) string {
	i := strings.IndexByte(key, '/')
	if i < 0 || i >= maxPrefixLen {
		return ""
	}
	if j := strings.IndexByte(key[i+1:], '/'); j >= 0 && i+j+2 <= maxPrefixLen {
		return key[:i+j+2]
	}
	return key[:i+1]
}

package policies

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Clouds lists the clouds a location may name.
var Clouds = []string{"aws", "gcp", "azure", "onprem"}

var (
	regionPart = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	namePat    = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	envPat     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	sizePat    = regexp.MustCompile(`^([0-9]{1,20})(?:\.([0-9]{1,9}))? ?([A-Za-z]*)$`)
	moneyPat   = regexp.MustCompile(`^([0-9]{1,12})(?:\.([0-9]{1,6}))? ?([A-Za-z]*)$`)
	daysPat    = regexp.MustCompile(`^([0-9]{1,5})d(.*)$`)
)

// ParseLocation parses "cloud:region", cloud one of Clouds. It is the one
// location parser of fedgate: policy files, store configurations and the
// egress ledger all go through it (or ParseLocationOrCloud).
func ParseLocation(s string) (Location, error) {
	return parseLocation(s, false)
}

// ParseLocationOrCloud parses "cloud:region" or a bare cloud ("aws", which
// has an empty Region and stands for every region of the cloud), as the
// egress prices and budgets of a policy, and the egress ledger, write them.
func ParseLocationOrCloud(s string) (Location, error) {
	return parseLocation(s, true)
}

// parseLocation parses a location; with cloudOnly a bare cloud is allowed.
func parseLocation(s string, cloudOnly bool) (Location, error) {
	cloud, region, found := strings.Cut(s, ":")
	if !slices.Contains(Clouds, cloud) {
		if !found && !cloudOnly {
			return Location{}, fmt.Errorf("invalid location %s: expected cloud:region like aws:us-east-1", quote(s))
		}
		return Location{}, fmt.Errorf("unknown cloud %s in location %s %s", quote(cloud), quote(s), oneOf(Clouds))
	}
	if !found {
		if cloudOnly {
			return Location{Cloud: cloud}, nil
		}
		return Location{}, fmt.Errorf("location %s has no region: expected cloud:region like %s:REGION", quote(s), cloud)
	}
	if !regionPart.MatchString(region) {
		return Location{}, fmt.Errorf("invalid region %s in location %s: use lowercase letters, digits, '.', '_' and '-'", quote(region), quote(s))
	}
	return Location{Cloud: cloud, Region: region}, nil
}

// validName checks a region or store name.
func validName(s string) error {
	if !namePat.MatchString(s) {
		return fmt.Errorf("invalid name %s: use 1 to 63 lowercase letters, digits, '-' and '_', starting and ending with a letter or digit", quote(s))
	}
	return nil
}

// ValidBucketName reports whether name follows the S3 bucket naming rules:
// 3 to 63 characters; lowercase letters, digits, '.' and '-'; starting and
// ending with a letter or digit; no "..", not an IP address, and none of
// the prefixes and suffixes S3 reserves. (So no bucket starts with '_' and
// /_fedgate/ never collides with one.)
func ValidBucketName(name string) error {
	if n := utf8.RuneCountInString(name); n < 3 || n > 63 {
		return fmt.Errorf("bucket name %s must be 3 to 63 characters long (it has %d)", quote(name), n)
	}
	for i, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '-' {
			return fmt.Errorf("bucket name %s may contain only lowercase letters, digits, '.' and '-' (found %q at offset %d)", quote(name), r, i)
		}
	}
	alnum := func(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return fmt.Errorf("bucket name %s must start and end with a lowercase letter or digit", quote(name))
	}
	if strings.Contains(name, "..") {
		return fmt.Errorf("bucket name %s must not contain two adjacent periods", quote(name))
	}
	if looksLikeIPv4(name) {
		return fmt.Errorf("bucket name %s must not be formatted as an IP address", quote(name))
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("bucket name %s must not start with %q (reserved by S3)", quote(name), p)
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return fmt.Errorf("bucket name %s must not end with %q (reserved by S3)", quote(name), s)
		}
	}
	return nil
}

func looksLikeIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 8); err != nil {
			return false
		}
	}
	return true
}

// parseDuration reads a Go duration ("24h", "90m", "0s") or days ("7d",
// "1d12h"). Negative durations are refused.
func parseDuration(s string) (time.Duration, error) {
	const msg = "expected a duration like 30s, 15m, 24h or 7d"
	var days time.Duration
	rest := s
	if m := daysPat.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		days, rest = time.Duration(n)*24*time.Hour, m[2]
		if rest == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %s: %s", quote(s), msg)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %s: must not be negative", quote(s))
	}
	if d+days < d {
		return 0, fmt.Errorf("duration %s is too long", quote(s))
	}
	return d + days, nil
}

var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
}

var sizeUnitNames = []string{"B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"}

// ParseSize reads a byte size like the policy file's: "500GiB", "2TiB",
// "1.5TB", "4096". Flags use it too.
func ParseSize(s string) (int64, error) { return parseSize(s) }

// parseSize reads a byte size: a number and an optional unit, "500GiB",
// "2TiB", "1.5TB", "4096".
func parseSize(s string) (int64, error) {
	m := sizePat.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid size %s: expected a number and a unit like 500GiB or 2TiB", quote(s))
	}
	mult, ok := sizeUnits[m[3]]
	if !ok {
		hint := oneOf(sizeUnitNames)
		if sug := suggest(m[3], sizeUnitNames); sug != "" {
			hint = fmt.Sprintf("(did you mean %q?)", sug)
		}
		return 0, fmt.Errorf("unknown size unit %s in %s %s", quote(m[3]), quote(s), hint)
	}
	v, exact := scaleDecimal(m[1], m[2], big.NewInt(mult))
	if !exact {
		return 0, fmt.Errorf("size %s is not a whole number of bytes", quote(s))
	}
	if !v.IsInt64() {
		return 0, fmt.Errorf("size %s is too large", quote(s))
	}
	return v.Int64(), nil
}

// scaleDecimal returns (whole.frac) * mult and whether it is a whole number.
func scaleDecimal(whole, frac string, mult *big.Int) (*big.Int, bool) {
	n, _ := new(big.Int).SetString(whole+frac, 10)
	n.Mul(n, mult)
	div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, r := new(big.Int).QuoRem(n, div, new(big.Int))
	return q, r.Sign() == 0
}

// parseMoney reads an amount of US dollars: "500USD", "0.09USD",
// "12.50 USD". Up to six decimal places.
func parseMoney(s string) (Money, error) {
	m := moneyPat.FindStringSubmatch(s)
	if m == nil {
		return Money{}, fmt.Errorf("invalid amount %s: expected a number and a currency like 500USD or 0.09USD", quote(s))
	}
	if m[3] != "USD" {
		if m[3] == "" {
			return Money{}, fmt.Errorf("amount %s has no currency: expected like %sUSD", quote(s), s)
		}
		return Money{}, fmt.Errorf("unknown currency %s in %s (expected USD)", quote(m[3]), quote(s))
	}
	v, _ := scaleDecimal(m[1], m[2], big.NewInt(1e6))
	return Money{Micros: v.Int64(), Currency: "USD"}, nil
}

var errBadEnv = errors.New("expected the name of an environment variable: letters, digits and '_', not starting with a digit")

// validEnv checks an environment variable name. The message never repeats
// the value: someone may have pasted a secret where a name belongs.
func validEnv(s string) error {
	if !envPat.MatchString(s) {
		return errBadEnv
	}
	return nil
}

// ParseDuration parses a duration the way the policy file writes one
// (30s, 15m, 24h, 7d).
func ParseDuration(s string) (time.Duration, error) { return parseDuration(s) }

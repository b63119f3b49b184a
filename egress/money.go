package egress

import (
	"fmt"
	"math/big"

	"github.com/fedgate/fedgate/policies"
)

// USD is an exact amount of US dollars: a rational number, so that pricing
// a byte count at a per-GiB rate loses nothing and sums of many rows are
// exact. It is rounded (half to even, to the cent) only when it is shown:
// String, Cents and MarshalJSON. The zero value is $0. A USD is immutable;
// its methods return new values.
type USD struct{ r *big.Rat }

// Dollars returns the exact amount num/den dollars; den must not be zero.
func Dollars(num, den int64) USD { return USD{big.NewRat(num, den)} }

// MicroUSD returns micros millionths of a dollar.
func MicroUSD(micros int64) USD { return USD{big.NewRat(micros, 1e6)} }

// FromMoney converts a policy amount. It fails for a currency other than
// USD (an empty currency is taken as USD).
func FromMoney(m policies.Money) (USD, error) {
	if m.Currency != "" && m.Currency != "USD" {
		return USD{}, fmt.Errorf("egress: amount %s is not in USD", m)
	}
	return MicroUSD(m.Micros), nil
}

func (u USD) rat() *big.Rat {
	if u.r == nil {
		return new(big.Rat)
	}
	return u.r
}

// Rat returns a copy of the exact amount.
func (u USD) Rat() *big.Rat { return new(big.Rat).Set(u.rat()) }

// Add returns u + v.
func (u USD) Add(v USD) USD { return USD{new(big.Rat).Add(u.rat(), v.rat())} }

// Sub returns u - v.
func (u USD) Sub(v USD) USD { return USD{new(big.Rat).Sub(u.rat(), v.rat())} }

// MulRat returns u × q.
func (u USD) MulRat(q *big.Rat) USD { return USD{new(big.Rat).Mul(u.rat(), q)} }

// Cmp compares u and v: -1, 0 or +1.
func (u USD) Cmp(v USD) int { return u.rat().Cmp(v.rat()) }

// Sign is -1, 0 or +1.
func (u USD) Sign() int { return u.rat().Sign() }

// IsZero says whether u is exactly $0.
func (u USD) IsZero() bool { return u.rat().Sign() == 0 }

// Cents returns u rounded to whole cents, half to even: 0.125 -> 12,
// 0.135 -> 14, 0.1251 -> 13.
func (u USD) Cents() int64 {
	return roundHalfEven(new(big.Rat).Mul(u.rat(), big.NewRat(100, 1))).Int64()
}

// Micros returns u rounded to millionths of a dollar, half to even.
func (u USD) Micros() int64 {
	return roundHalfEven(new(big.Rat).Mul(u.rat(), big.NewRat(1e6, 1))).Int64()
}

// Float64 returns the nearest float64: for drawing charts and ratios, never
// for sums.
func (u USD) Float64() float64 { f, _ := u.rat().Float64(); return f }

// String shows u rounded half to even to the cent, like "1234.57" or
// "-0.01", without a currency sign.
func (u USD) String() string {
	c := u.Cents()
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// MarshalJSON writes u as a JSON number with two decimals (12.30).
func (u USD) MarshalJSON() ([]byte, error) { return []byte(u.String()), nil }

// roundHalfEven rounds q to the nearest integer, ties to the even one.
func roundHalfEven(q *big.Rat) *big.Int {
	num, den := q.Num(), q.Denom() // den > 0
	neg := num.Sign() < 0
	n := new(big.Int).Abs(num)
	quo, rem := new(big.Int).QuoRem(n, den, new(big.Int))
	twice := new(big.Int).Lsh(rem, 1)
	switch c := twice.Cmp(den); {
	case c > 0, c == 0 && quo.Bit(0) == 1:
		quo.Add(quo, big.NewInt(1))
	}
	if neg {
		quo.Neg(quo)
	}
	return quo
}

package policies

import "strings"

func (d *decoder) routing(e entry) Routing {
	r := Routing{Prefer: PreferCheapest}
	m, ok := d.fields(e.val, e.vpos, "routing", []string{"prefer"})
	if !ok {
		return r
	}
	if e, ok := m["prefer"]; ok {
		if !d.feat.Routing {
			d.unsupported(e.kpos, "routing.prefer", "read routing", nil)
		}
		if v, ok := d.enum(e, "routing.prefer", "routing rule", []string{string(PreferCheapest), string(PreferNearest)}); ok {
			r.Prefer = Prefer(v)
		}
	}
	return r
}

func (d *decoder) egress(e entry, r *refs) Egress {
	var eg Egress
	m, ok := d.fields(e.val, e.vpos, "egress", []string{"prices", "budgets"})
	if !ok {
		return eg
	}
	if e, ok := m["prices"]; ok {
		eg.Prices = d.prices(e)
		if len(eg.Prices) > 0 && !d.feat.EgressPrices {
			d.unsupported(e.kpos, "egress.prices", "overriding the egress price table", nil)
		}
	}
	if e, ok := m["budgets"]; ok {
		eg.Budgets = d.budgets(e, r)
		if len(eg.Budgets) > 0 && !d.feat.Budgets {
			d.unsupported(e.kpos, "egress.budgets", "enforcing egress budgets", nil)
		}
	}
	return eg
}

// prices reads {FROM: {TO: PRICE}}, FROM and TO a cloud or cloud:region,
// PRICE per GB like 0.09USD.
func (d *decoder) prices(e entry) []Price {
	const pth = "egress.prices"
	if _, ok := mappingValues(e.val); !ok && e.val != nil {
		d.errorf(e.vpos, pth, "expected a mapping FROM: {TO: PRICE_PER_GB} (FROM and TO a cloud or cloud:region), got %s", describe(e.val))
		return nil
	}
	var out []Price
	for _, from := range d.entries(e.val, pth) {
		fpth := join(pth, short(from.key))
		fl, err := parseLocation(from.key, true)
		if err != nil {
			d.errorf(from.kpos, fpth, "%v", err)
			continue
		}
		if _, ok := mappingValues(from.val); !ok {
			d.errorf(from.vpos, fpth, "expected a mapping TO: PRICE_PER_GB, got %s", describe(from.val))
			continue
		}
		for _, to := range d.entries(from.val, fpth) {
			tpth := join(fpth, short(to.key))
			tl, err := parseLocation(to.key, true)
			if err != nil {
				d.errorf(to.kpos, tpth, "%v", err)
				continue
			}
			s, ok := d.str(to, tpth, "a price per GB like 0.09USD")
			if !ok {
				continue
			}
			money, err := parseMoney(s)
			if err != nil {
				d.errorf(to.vpos, tpth, "%v", err)
				continue
			}
			out = append(out, Price{From: fl, To: tl, PerGB: money})
		}
	}
	return out
}

var (
	budgetActions = []string{string(ActionAlert), string(ActionBlockColdReads)}
	budgetKeys    = []string{"bucket", "from", "to", "monthly", "action"}
)

// budgets reads the list of budgets: each names a bucket, a region pair
// (from, to: a cloud or cloud:region), or both, and a monthly amount.
func (d *decoder) budgets(e entry, r *refs) []Budget {
	items, _ := d.list(e.val, e.vpos, "egress.budgets", "budgets")
	var out []Budget
	seen := names{}
	for i, item := range items {
		pth := index("egress.budgets", i)
		n, p := d.value(item, e.vpos, pth)
		m, ok := d.fields(n, p, pth, budgetKeys)
		if !ok {
			continue
		}
		b := Budget{Action: ActionAlert}
		if e, ok := m["bucket"]; ok {
			if b.Bucket, ok = d.str(e, join(pth, "bucket"), "a bucket name"); ok {
				r.buckets = append(r.buckets, ref{b.Bucket, e.vpos, join(pth, "bucket")})
			}
		}
		for _, side := range []struct {
			key string
			loc *Location
		}{{"from", &b.From}, {"to", &b.To}} {
			e, ok := m[side.key]
			if !ok {
				continue
			}
			s, ok := d.str(e, join(pth, side.key), "a cloud or cloud:region like aws or gcp:us-central1")
			if !ok {
				continue
			}
			l, err := parseLocation(s, true)
			if err != nil {
				d.errorf(e.vpos, join(pth, side.key), "%v", err)
				continue
			}
			*side.loc = l
		}
		_, hasBucket := m["bucket"]
		_, hasFrom := m["from"]
		_, hasTo := m["to"]
		if !hasBucket && !hasFrom && !hasTo {
			d.errorf(p, pth, "a budget needs \"bucket\", a region pair (\"from\" and/or \"to\"), or both: it says what the monthly limit covers")
		} else {
			key := b.Bucket + "\x00" + b.From.String() + "\x00" + b.To.String()
			at, apth := p, pth
			if e, ok := m["bucket"]; ok {
				at, apth = e.vpos, join(pth, "bucket")
			}
			if first, dup := seen[key]; dup {
				d.errorf(at, apth, "%s already has a budget (at %d:%d)", budgetName(b), first.line, first.col)
			} else {
				seen[key] = at
			}
		}
		if e, ok := m["monthly"]; !ok {
			d.errorf(p, join(pth, "monthly"), "missing required key (the monthly limit, like 500USD)")
		} else if s, ok := d.str(e, join(pth, "monthly"), "an amount like 500USD"); ok {
			money, err := parseMoney(s)
			switch {
			case err != nil:
				d.errorf(e.vpos, join(pth, "monthly"), "%v", err)
			case money.Micros == 0:
				d.errorf(e.vpos, join(pth, "monthly"), "expected an amount above zero, got %s", money)
			default:
				b.Monthly = money
			}
		}
		if e, ok := m["action"]; ok {
			if v, ok := d.enum(e, join(pth, "action"), "budget action", budgetActions); ok {
				b.Action = BudgetAction(v)
				if b.Action == ActionBlockColdReads && !d.feat.BlockColdReads {
					d.unsupported(e.vpos, join(pth, "action"), "budget action \"block-cold-reads\"", []string{string(ActionAlert)})
				}
			}
		}
		out = append(out, b)
	}
	return out
}

// budgetName says what a budget covers, like `bucket "imagenet"` or
// `region pair aws:us-east-1 -> gcp`.
func budgetName(b Budget) string {
	var parts []string
	if b.Bucket != "" {
		parts = append(parts, "bucket "+quote(b.Bucket))
	}
	if b.From.Cloud != "" || b.To.Cloud != "" {
		parts = append(parts, "region pair "+anyLoc(b.From)+" -> "+anyLoc(b.To))
	}
	return strings.Join(parts, " on ")
}

func anyLoc(l Location) string {
	if l.Cloud == "" {
		return "*"
	}
	return l.String()
}

func (d *decoder) defaults(e entry, r *refs) Defaults {
	var df Defaults
	m, ok := d.fields(e.val, e.vpos, "defaults", []string{"store", "public_access_block"})
	if !ok {
		return df
	}
	if e, ok := m["public_access_block"]; ok {
		df.PublicAccessBlock = d.publicAccessBlock(e)
	}
	if e, ok := m["store"]; ok {
		if s, ok := d.str(e, "defaults.store", "a store name"); ok {
			df.Store = s
			r.stores = append(r.stores, ref{s, e.vpos, "defaults.store"})
		}
	}
	return df
}

// publicAccessBlockKeys are the keys of defaults.public_access_block, in
// S3's order.
var publicAccessBlockKeys = []string{"block_public_acls", "ignore_public_acls", "block_public_policy", "restrict_public_buckets"}

func (d *decoder) publicAccessBlock(e entry) *PublicAccessBlock {
	const pth = "defaults.public_access_block"
	m, ok := d.fields(e.val, e.vpos, pth, publicAccessBlockKeys)
	if !ok {
		return nil
	}
	pab := &PublicAccessBlock{}
	for _, k := range publicAccessBlockKeys {
		f, ok := m[k]
		if !ok {
			continue
		}
		v, ok := d.boolean(f, pth+"."+k)
		if !ok {
			continue
		}
		switch k {
		case "block_public_acls":
			pab.BlockPublicACLs = v
		case "ignore_public_acls":
			pab.IgnorePublicACLs = v
		case "block_public_policy":
			pab.BlockPublicPolicy = v
		case "restrict_public_buckets":
			pab.RestrictPublicBuckets = v
		}
	}
	return pab
}

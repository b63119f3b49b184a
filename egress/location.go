package egress

import (
	"strings"

	"github.com/fedgate/fedgate/policies"
)

// The clouds a location may name.
const (
	AWS    = "aws"
	GCP    = "gcp"
	Azure  = "azure"
	OnPrem = "onprem"
)

// Continent is the part of the world a region is in, as the clouds' price
// lists group regions.
type Continent string

// The continents. Unknown is every region the table below does not
// recognise, and every on-prem location.
const (
	NorthAmerica Continent = "north-america"
	SouthAmerica Continent = "south-america"
	Europe       Continent = "europe"
	Asia         Continent = "asia"
	Oceania      Continent = "oceania"
	MiddleEast   Continent = "middle-east"
	Africa       Continent = "africa"
	Unknown      Continent = "unknown"
)

// geo is where a region is, for pricing: its continent and the two
// countries that GCP prices apart as internet destinations.
type geo struct {
	continent Continent
	china     bool
	australia bool
}

// regionExact names regions whose name alone does not tell the continent
// by the prefix rules of regionPrefixes.
var regionExact = map[string]geo{
	// AWS Asia Pacific regions in Oceania, and Israel.
	"aws:ap-southeast-2": {continent: Oceania, australia: true}, // Sydney
	"aws:ap-southeast-4": {continent: Oceania, australia: true}, // Melbourne
	"aws:ap-southeast-6": {continent: Oceania},                  // New Zealand
	"aws:il-central-1":   {continent: MiddleEast},               // Tel Aviv
}

// regionPrefixes maps a cloud's region-name prefixes to continents, tried
// in order (the first match wins). Azure names have no dashes, so its
// rules are prefixes and suffixes of the bare name.
var regionPrefixes = map[string][]struct {
	prefix string
	geo    geo
}{
	AWS: {
		{"us-", geo{continent: NorthAmerica}}, // includes us-gov-*
		{"ca-", geo{continent: NorthAmerica}},
		{"mx-", geo{continent: NorthAmerica}},
		{"sa-", geo{continent: SouthAmerica}},
		{"eu-", geo{continent: Europe}},
		{"me-", geo{continent: MiddleEast}},
		{"il-", geo{continent: MiddleEast}},
		{"af-", geo{continent: Africa}},
		{"cn-", geo{continent: Asia, china: true}},
		{"ap-", geo{continent: Asia}},
	},
	GCP: {
		{"us-", geo{continent: NorthAmerica}},
		{"northamerica-", geo{continent: NorthAmerica}},
		{"southamerica-", geo{continent: SouthAmerica}},
		{"europe-", geo{continent: Europe}},
		{"asia-", geo{continent: Asia}},
		{"australia-", geo{continent: Oceania, australia: true}},
		{"me-", geo{continent: MiddleEast}},
		{"africa-", geo{continent: Africa}},
	},
	Azure: {
		{"china", geo{continent: Asia, china: true}},
		{"australia", geo{continent: Oceania, australia: true}},
		{"newzealand", geo{continent: Oceania}},
		{"canada", geo{continent: NorthAmerica}},
		{"mexico", geo{continent: NorthAmerica}},
		{"usgov", geo{continent: NorthAmerica}},
		{"brazil", geo{continent: SouthAmerica}},
		{"chile", geo{continent: SouthAmerica}},
		{"southafrica", geo{continent: Africa}},
		{"uae", geo{continent: MiddleEast}},
		{"qatar", geo{continent: MiddleEast}},
		{"israel", geo{continent: MiddleEast}},
		{"saudi", geo{continent: MiddleEast}},
		{"northeurope", geo{continent: Europe}},
		{"westeurope", geo{continent: Europe}},
		{"uk", geo{continent: Europe}},
		{"france", geo{continent: Europe}},
		{"germany", geo{continent: Europe}},
		{"norway", geo{continent: Europe}},
		{"sweden", geo{continent: Europe}},
		{"switzerland", geo{continent: Europe}},
		{"poland", geo{continent: Europe}},
		{"italy", geo{continent: Europe}},
		{"spain", geo{continent: Europe}},
		{"austria", geo{continent: Europe}},
		{"belgium", geo{continent: Europe}},
		{"denmark", geo{continent: Europe}},
		{"finland", geo{continent: Europe}},
		{"greece", geo{continent: Europe}},
		{"japan", geo{continent: Asia}},
		{"korea", geo{continent: Asia}},
		{"eastasia", geo{continent: Asia}},
		{"southeastasia", geo{continent: Asia}},
		{"centralindia", geo{continent: Asia}},
		{"southindia", geo{continent: Asia}},
		{"westindia", geo{continent: Asia}},
		{"jioindia", geo{continent: Asia}},
		{"indonesia", geo{continent: Asia}},
		{"malaysia", geo{continent: Asia}},
		{"taiwan", geo{continent: Asia}},
	},
}

// azureUSSuffixes end the names of Azure's United States regions: eastus,
// eastus2, westus3, centralus, northcentralus, southcentralus, ...
var azureUSSuffixes = []string{"us", "us2", "us3", "useuap", "us2euap"}

// ContinentOf returns the continent of a location. Well-known region names
// are recognised by a table (AWS us-*, eu-*, ap-*, ...; GCP us-*,
// europe-*, asia-*, australia-*, ...; Azure eastus, westeurope,
// japaneast, ...); anything else, and every on-prem location, is Unknown.
// Pricing treats Unknown as "another continent" than any other region, the
// dearer assumption.
func ContinentOf(l policies.Location) Continent { return geoOf(l).continent }

func geoOf(l policies.Location) geo {
	if g, ok := regionExact[l.String()]; ok {
		return g
	}
	for _, p := range regionPrefixes[l.Cloud] {
		if strings.HasPrefix(l.Region, p.prefix) {
			return p.geo
		}
	}
	if l.Cloud == Azure {
		for _, s := range azureUSSuffixes {
			if strings.HasSuffix(l.Region, s) {
				return geo{continent: NorthAmerica}
			}
		}
	}
	return geo{continent: Unknown}
}

package access

import (
	"encoding/xml"
	"fmt"
	"net/netip"
	"strings"
)

// Actions are the S3 actions a bucket policy may name (without
// wildcards). fedgate checks the ones its operations perform; the others
// are accepted so that policies written for AWS load unchanged.
var Actions = []string{
	"s3:AbortMultipartUpload", "s3:CreateBucket", "s3:DeleteBucket", "s3:DeleteBucketPolicy",
	"s3:DeleteObject", "s3:DeleteObjectTagging", "s3:DeleteObjectVersion", "s3:DeleteObjectVersionTagging",
	"s3:GetBucketAcl", "s3:GetBucketCORS", "s3:GetBucketLocation", "s3:GetBucketPolicy",
	"s3:GetBucketPolicyStatus", "s3:GetBucketPublicAccessBlock", "s3:GetBucketTagging", "s3:GetBucketVersioning",
	"s3:GetLifecycleConfiguration", "s3:GetObject", "s3:GetObjectAcl", "s3:GetObjectAttributes",
	"s3:GetObjectTagging", "s3:GetObjectVersion", "s3:GetObjectVersionAcl", "s3:GetObjectVersionAttributes",
	"s3:GetObjectVersionTagging", "s3:ListAllMyBuckets", "s3:ListBucket", "s3:ListBucketMultipartUploads",
	"s3:ListBucketVersions", "s3:ListMultipartUploadParts", "s3:PutBucketAcl", "s3:PutBucketCORS",
	"s3:PutBucketPolicy", "s3:PutBucketPublicAccessBlock", "s3:PutBucketTagging", "s3:PutBucketVersioning",
	"s3:PutLifecycleConfiguration", "s3:PutObject", "s3:PutObjectAcl", "s3:PutObjectTagging",
	"s3:PutObjectVersionAcl", "s3:PutObjectVersionTagging", "s3:RestoreObject", "s3:GetEncryptionConfiguration",
	"s3:PutEncryptionConfiguration", "s3:GetBucketOwnershipControls", "s3:PutBucketOwnershipControls",
	"s3:GetBucketNotification", "s3:PutBucketNotification", "s3:GetBucketLogging", "s3:PutBucketLogging",
	"s3:GetBucketWebsite", "s3:PutBucketWebsite", "s3:DeleteBucketWebsite", "s3:GetReplicationConfiguration",
	"s3:PutReplicationConfiguration", "s3:BypassGovernanceRetention", "s3:GetObjectRetention",
	"s3:PutObjectRetention", "s3:GetObjectLegalHold", "s3:PutObjectLegalHold", "s3:GetBucketObjectLockConfiguration",
	"s3:PutBucketObjectLockConfiguration", "s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags",
	"s3:GetAccelerateConfiguration", "s3:PutAccelerateConfiguration", "s3:GetBucketRequestPayment",
	"s3:PutBucketRequestPayment", "s3:GetInventoryConfiguration", "s3:PutInventoryConfiguration",
	"s3:GetMetricsConfiguration", "s3:PutMetricsConfiguration", "s3:GetAnalyticsConfiguration",
	"s3:PutAnalyticsConfiguration", "s3:GetIntelligentTieringConfiguration", "s3:PutIntelligentTieringConfiguration",
	"s3:ObjectOwnerOverrideToBucketOwner", "s3:ListBucketByTags", "s3:GetObjectTorrent",
}

// PublicAccessBlock is S3's Block Public Access configuration.
type PublicAccessBlock struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration"`
	Xmlns                 string   `xml:"xmlns,attr,omitempty"`
	BlockPublicAcls       bool     `xml:"BlockPublicAcls"`
	IgnorePublicAcls      bool     `xml:"IgnorePublicAcls"`
	BlockPublicPolicy     bool     `xml:"BlockPublicPolicy"`
	RestrictPublicBuckets bool     `xml:"RestrictPublicBuckets"`
}

// Or returns the flags set in either p or q (a bucket's own setting and
// the region's default).
func (p PublicAccessBlock) Or(q PublicAccessBlock) PublicAccessBlock {
	return PublicAccessBlock{
		BlockPublicAcls:       p.BlockPublicAcls || q.BlockPublicAcls,
		IgnorePublicAcls:      p.IgnorePublicAcls || q.IgnorePublicAcls,
		BlockPublicPolicy:     p.BlockPublicPolicy || q.BlockPublicPolicy,
		RestrictPublicBuckets: p.RestrictPublicBuckets || q.RestrictPublicBuckets,
	}
}

// ParsePublicAccessBlock reads a PutPublicAccessBlock body.
func ParsePublicAccessBlock(body []byte) (PublicAccessBlock, error) {
	var p PublicAccessBlock
	if err := xml.Unmarshal(body, &p); err != nil {
		return p, &Error{Message: "The XML you provided was not well-formed or did not validate against our published schema: " + err.Error()}
	}
	return p, nil
}

// Encode is the stored form of a configuration (its XML without the
// namespace).
func (p PublicAccessBlock) Encode() string {
	p.Xmlns = ""
	b, _ := xml.Marshal(p)
	return string(b)
}

// Public reports whether p grants anything to everyone, as S3 decides it
// for policy status and BlockPublicPolicy: an Allow statement whose
// principal is "*" (or NotPrincipal) and whose conditions do not pin the
// caller to fixed values (an IP range narrower than /8, a user name or id,
// or a CanonicalUser id) is public.
func (p *Policy) Public() bool {
	if p == nil {
		return false
	}
	for _, st := range p.Statements {
		if st.Effect != Allow {
			continue
		}
		if st.Principal.set && !st.Principal.any {
			continue
		}
		if !st.restricted() {
			return true
		}
	}
	return false
}

// restricted reports conditions that limit a statement to known callers.
func (st *Statement) restricted() bool {
	for _, c := range st.Condition {
		if c.ifExists || c.forAll || c.negated() {
			continue
		}
		switch c.key {
		case "aws:sourceip":
			if c.op != "ipaddress" {
				continue
			}
			narrow := true
			for _, n := range c.nets {
				if !fixedNet(n) {
					narrow = false
				}
			}
			if narrow {
				return true
			}
		case "aws:username", "aws:userid":
			if c.op == "stringequals" || c.op == "stringequalsignorecase" {
				return true
			}
			if c.op == "stringlike" && !strings.ContainsAny(strings.Join(c.values, ""), "*?") {
				return true
			}
		}
	}
	return false
}

// fixedNet is an address range S3 does not count as public: IPv4 /8 or
// narrower, IPv6 /32 or narrower.
func fixedNet(n netip.Prefix) bool {
	if n.Addr().Is4() {
		return n.Bits() >= 8
	}
	return n.Bits() >= 32
}

// Resource is the ARN of a bucket (key "") or an object.
func Resource(bucket, key string) string {
	if key == "" {
		return "arn:aws:s3:::" + bucket
	}
	return fmt.Sprintf("arn:aws:s3:::%s/%s", bucket, key)
}

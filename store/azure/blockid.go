package azure

// Block IDs. Azure wants every block ID of one blob to have the same length
// (at most 64 bytes before base64), so every ID fedgate stages is 48 bytes,
// 64 characters of standard base64 without padding:
//
//	[0]      kind: 'P' a block of a Put, 'B' a block of a multipart part,
//	         'F' the last block of a part, 'E' the marker of an empty part
//	[1:17]   the upload ID (multipart) or a random nonce (Put)
//	[17:19]  part number, big-endian (0 for a Put)
//	[19:27]  attempt: milliseconds since 1970 (6 bytes) and 2 random bytes;
//	         every UploadPart call stages its blocks under a new attempt
//	[27:31]  index of the block in its part (or Put), big-endian
//	[31:47]  'F' and 'E': the part's MD5; zero otherwise
//	[47]     format version, 1
//
// So an upload's parts, their MD5s and their sizes (GetBlockList reports
// each block's size) can be found again from the blob's uncommitted block
// list alone, after a gateway restart and on any gateway node: the part's
// ETag is in the ID of its last block, which is staged only after the
// part's other blocks were, and only when its body was read to io.EOF.

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"time"
)

const (
	blockIDLen     = 48
	blockIDVersion = 1

	kindPut        = 'P'
	kindPartBlock  = 'B'
	kindPartFinal  = 'F'
	kindEmptyPart  = 'E'
	maxBlockNumber = 1<<32 - 1
)

type blockID struct {
	kind    byte
	id      [16]byte
	part    uint16
	attempt uint64 // ms<<16 | random
	index   uint32
	md5     [16]byte
}

func (b blockID) String() string {
	var raw [blockIDLen]byte
	raw[0] = b.kind
	copy(raw[1:17], b.id[:])
	binary.BigEndian.PutUint16(raw[17:19], b.part)
	binary.BigEndian.PutUint64(raw[19:27], b.attempt)
	binary.BigEndian.PutUint32(raw[27:31], b.index)
	copy(raw[31:47], b.md5[:])
	raw[47] = blockIDVersion
	return base64.StdEncoding.EncodeToString(raw[:])
}

// parseBlockID decodes an ID fedgate staged; ok is false for any other.
func parseBlockID(s string) (blockID, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != blockIDLen || raw[47] != blockIDVersion {
		return blockID{}, false
	}
	b := blockID{
		kind:    raw[0],
		part:    binary.BigEndian.Uint16(raw[17:19]),
		attempt: binary.BigEndian.Uint64(raw[19:27]),
		index:   binary.BigEndian.Uint32(raw[27:31]),
	}
	copy(b.id[:], raw[1:17])
	copy(b.md5[:], raw[31:47])
	switch b.kind {
	case kindPut, kindPartBlock, kindPartFinal, kindEmptyPart:
		return b, true
	}
	return blockID{}, false
}

// newAttempt returns a fresh attempt stamp: later attempts sort higher
// (to the millisecond, across nodes with synchronized clocks).
func newAttempt(now time.Time) uint64 {
	var r [2]byte
	rand.Read(r[:])
	return uint64(now.UnixMilli())<<16 | uint64(binary.BigEndian.Uint16(r[:]))
}

func randomID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	return id
}

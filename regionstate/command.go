package regionstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fedgate/fedgate/raft/envelope"
)

// CommandType is the first byte of every Raft log entry of the region; the
// rest is the command's JSON body (raft/envelope). Types are only ever
// appended: a number, once released, keeps its meaning forever, and a body
// only gains fields.
type CommandType = envelope.Type

// IgnoreUnknown, set in a CommandType, lets a node that does not know the
// type skip the entry. Without it, an unknown type fails with
// ErrUnknownCommand (the entry is still consumed; state does not change).
const IgnoreUnknown = envelope.IgnoreUnknown

// Command types. Append only; never renumber or reuse.
const (
	TypeCreateBucket   CommandType = 1
	TypeDeleteBucket   CommandType = 2
	TypePutUser        CommandType = 3
	TypeDeleteUser     CommandType = 4
	TypeGrant          CommandType = 5
	TypeRevoke         CommandType = 6
	TypeCreateUpload   CommandType = 7
	TypePutPart        CommandType = 8
	TypeCompleteUpload CommandType = 9
	TypeAbortUpload    CommandType = 10
	TypeSetPolicy      CommandType = 11
	TypeSetSetting     CommandType = 12
	TypeStageObject    CommandType = 13
	TypeClaimDrain     CommandType = 14
	TypeFinishDrain    CommandType = 15
	TypeSetPin         CommandType = 16
	TypePutJob         CommandType = 17
	TypeJobProgress    CommandType = 18
	TypeDeleteJob      CommandType = 19
	// TypeTouch is ignorable: it changes no state (see Touch).
	TypeTouch     CommandType = 20 | IgnoreUnknown
	TypeAddEgress CommandType = 21
	// TypeLeaderMark is ignorable: it changes no state (see LeaderMark).
	TypeLeaderMark CommandType = 22 | IgnoreUnknown
	// TypePruneEgress is ignorable: a node that does not know it keeps old
	// ledger rows, which changes no answer about the hours still kept.
	TypePruneEgress CommandType = 23 | IgnoreUnknown
	// TypeSetRegionID is ignorable: a node that does not know it does not
	// know the region's id either, and checks nothing with it.
	TypeSetRegionID CommandType = 24 | IgnoreUnknown
	// TypeClaimUpload is ignorable: a node that does not know it lets a
	// completion and an abort of one upload race, as before it existed.
	TypeClaimUpload CommandType = 25 | IgnoreUnknown
	// TypeSetBucketConfig is not ignorable: a node that skipped a bucket
	// policy or ACL would not enforce it.
	TypeSetBucketConfig CommandType = 26
	// The version index (versions.go) is not ignorable: a node that
	// skipped it would serve other versions than its region.
	TypePutVersion            CommandType = 27
	TypeDeleteVersion         CommandType = 28
	TypeCollectVersionGarbage CommandType = 29
	// TypeBatch is a group of commands committed as one log entry (see
	// group.go); it is never a Command of its own.
	TypeBatch CommandType = 30
	// TypeSetVersionLock changes an object version's lock (objectlock.go);
	// not ignorable: a node that skipped it would let a locked version be
	// deleted, or refuse a delete its region allows.
	TypeSetVersionLock CommandType = 31
)

// Command is a typed FSM command. Type must return a constant.
type Command interface {
	Type() CommandType
}

// A command is applied on the FSM goroutine through its apply method. It
// must validate before it changes anything, so an error leaves no trace.
type applier interface {
	apply(b *batch) error
}

// def is the command table's row of the command *T.
func def[T any, P interface {
	*T
	Command
	applier
}](name string) envelope.Def[Command] {
	return envelope.Def[Command]{Name: name, Decode: func(body []byte) (Command, error) {
		p := P(new(T))
		if err := json.Unmarshal(body, p); err != nil {
			return nil, invalid("%s: %v", name, err)
		}
		return p, nil
	}}
}

// commands lists every command type the region's FSM applies.
var commands = envelope.NewTable(map[CommandType]envelope.Def[Command]{
	TypeCreateBucket:          def[CreateBucket]("CreateBucket"),
	TypeDeleteBucket:          def[DeleteBucket]("DeleteBucket"),
	TypePutUser:               def[PutUser]("PutUser"),
	TypeDeleteUser:            def[DeleteUser]("DeleteUser"),
	TypeGrant:                 def[Grant]("Grant"),
	TypeRevoke:                def[Revoke]("Revoke"),
	TypeCreateUpload:          def[CreateUpload]("CreateUpload"),
	TypePutPart:               def[PutPart]("PutPart"),
	TypeCompleteUpload:        def[CompleteUpload]("CompleteUpload"),
	TypeAbortUpload:           def[AbortUpload]("AbortUpload"),
	TypeSetPolicy:             def[SetPolicy]("SetPolicy"),
	TypeSetSetting:            def[SetSetting]("SetSetting"),
	TypeStageObject:           def[StageObject]("StageObject"),
	TypeClaimDrain:            def[ClaimDrain]("ClaimDrain"),
	TypeFinishDrain:           def[FinishDrain]("FinishDrain"),
	TypeSetPin:                def[SetPin]("SetPin"),
	TypePutJob:                def[PutJob]("PutJob"),
	TypeJobProgress:           def[JobProgressUpdate]("JobProgressUpdate"),
	TypeDeleteJob:             def[DeleteJob]("DeleteJob"),
	TypeTouch:                 def[Touch]("Touch"),
	TypeAddEgress:             def[AddEgress]("AddEgress"),
	TypeLeaderMark:            def[LeaderMark]("LeaderMark"),
	TypePruneEgress:           def[PruneEgress]("PruneEgress"),
	TypeSetRegionID:           def[SetRegionID]("SetRegionID"),
	TypeClaimUpload:           def[ClaimUpload]("ClaimUpload"),
	TypeSetBucketConfig:       def[SetBucketConfig]("SetBucketConfig"),
	TypePutVersion:            def[PutVersion]("PutVersion"),
	TypeDeleteVersion:         def[DeleteVersion]("DeleteVersion"),
	TypeCollectVersionGarbage: def[CollectVersionGarbage]("CollectVersionGarbage"),
	TypeSetVersionLock:        def[SetVersionLock]("SetVersionLock"),
})

// Encode returns the log entry for cmd: its type byte and JSON body.
func Encode(cmd Command) ([]byte, error) { return envelope.Encode(cmd.Type(), cmd) }

// Decode parses a log entry into a pointer to the command's struct
// (*CreateBucket, ...). It returns (nil, nil) for an unknown type
// marked IgnoreUnknown, ErrUnknownCommand for another unknown type, and an
// error wrapping ErrInvalid for a malformed entry.
func Decode(data []byte) (Command, error) {
	cmd, _, err := commands.Decode(data)
	switch {
	case errors.Is(err, envelope.ErrEmpty):
		return nil, invalid("empty log entry")
	case errors.Is(err, envelope.ErrUnknownType):
		return nil, fmt.Errorf("%w: %d", ErrUnknownCommand, data[0])
	}
	return cmd, err
}

// CreateBucket records a new bucket. It fails with a *BucketExistsError
// (matching ErrBucketExists) when the name is taken. A zero Created is set
// to the time the leader appended the entry.
type CreateBucket struct{ Bucket Bucket }

// DeleteBucket removes a bucket and every grant on it. It fails with
// ErrNoSuchBucket. Multipart sessions of the bucket are left for the caller
// to abort (their parts in the store need aborting too).
type DeleteBucket struct{ Name string }

// PutUser adds a user, or replaces one when Replace is set. It fails with
// ErrUserExists (the name is taken and Replace is not set) or
// ErrAccessKeyInUse (another user has the access key).
type PutUser struct {
	User    User
	Replace bool
}

// DeleteUser removes a user and its grants (buckets it owns stay). It fails
// with ErrNoSuchUser, or ErrRootUser for a root user unless Force is set.
type DeleteUser struct {
	Name  string
	Force bool
}

// Grant gives User Perm on Bucket, replacing an earlier grant. The bucket
// need not be recorded here (policy-file buckets are not). Prefix, when
// set, names the incarnation of the bucket the grant is for: the grant
// fails with ErrNoSuchBucket unless the bucket recorded under the name
// has that prefix when the entry applies (so a grant checked against one
// owner's bucket never lands on a bucket recreated under the name since).
// It fails with ErrNoSuchUser, or ErrInvalid for a Perm other than read or
// write.
type Grant struct {
	User   string
	Bucket string
	Perm   Perm
	Prefix string `json:",omitempty"`
}

// Revoke takes Perm away from User on Bucket: revoking write leaves read,
// revoking read (or an empty Perm) removes the grant. Revoking what was not
// granted is not an error. It fails with ErrNoSuchUser, or ErrInvalid for
// an unknown Perm.
type Revoke struct {
	User   string
	Bucket string
	Perm   Perm
}

// CreateUpload starts a multipart session (its ID is chosen by the caller,
// so every node applies the same value). It fails with ErrUploadExists.
type CreateUpload struct{ Upload MultipartUpload }

// PutPart records an uploaded part, replacing one with the same number. It
// fails with ErrNoSuchUpload, or ErrInvalid for a number outside 1..10000.
type PutPart struct {
	UploadID string
	Part     Part
}

// CompleteUpload ends a session whose object has been assembled. It fails
// with ErrNoSuchUpload. Stage, for a write-back upload, is the journal
// entry of the completed object, recorded in the same step (as by
// StageObject).
type CompleteUpload struct {
	UploadID string
	Stage    *JournalEntry `json:",omitempty"`
	// IfUnchangedSince: as StageObject's, for a conditional completion.
	IfUnchangedSince uint64 `json:",omitempty"`
	// Superseded: as StageObject's, set when applied.
	Superseded []string `json:"-"`
	// Version, for a versioned write-back bucket, makes Stage the bytes of
	// this new version of the upload's key (PutVersion with Stage), with
	// Conditional and IfLatest as PutVersion's.
	Version     *ObjectVersion `json:",omitempty"`
	Conditional bool           `json:",omitempty"`
	IfLatest    uint64         `json:",omitempty"`
}

// AbortUpload ends a session whose parts have been discarded. It fails with
// ErrNoSuchUpload.
type AbortUpload struct{ UploadID string }

// ClaimUpload marks a session as being ended by one completion or abort,
// so that of a completion and an abort racing exactly one goes ahead: the
// first claim wins, another fails with ErrUploadClaimed until the winner
// ends the session (CompleteUpload, AbortUpload) or releases its claim
// (Release: its operation failed, and the session may be completed,
// aborted or given parts again). Claim is an id the caller chooses; At is
// the caller's clock, and a claim older than ClaimTTL at At is taken over
// (its holder died). While claimed, PutPart fails with ErrUploadClaimed.
// It fails with ErrNoSuchUpload when the session is gone.
type ClaimUpload struct {
	UploadID string
	Claim    string
	At       time.Time
	Release  bool `json:",omitempty"`
}

// ClaimTTL is how long a claim on a session holds before another may take
// it over (a completion that takes longer is not cut short: it only loses
// the guarantee that no abort runs meanwhile).
const ClaimTTL = 15 * time.Minute

// SetPolicy makes YAML the active policy file. Version must be greater than
// the active policy's version, else it fails with ErrStalePolicy.
type SetPolicy struct {
	YAML    []byte
	Version uint64
}

// SetSetting sets (or, with Delete, removes) a region setting such as the
// region id.
type SetSetting struct {
	Key    string
	Value  string
	Delete bool
}

// Type implements Command.
func (CreateBucket) Type() CommandType { return TypeCreateBucket }

// Type implements Command.
func (DeleteBucket) Type() CommandType { return TypeDeleteBucket }

// Type implements Command.
func (PutUser) Type() CommandType { return TypePutUser }

// Type implements Command.
func (DeleteUser) Type() CommandType { return TypeDeleteUser }

// Type implements Command.
func (Grant) Type() CommandType { return TypeGrant }

// Type implements Command.
func (Revoke) Type() CommandType { return TypeRevoke }

// Type implements Command.
func (CreateUpload) Type() CommandType { return TypeCreateUpload }

// Type implements Command.
func (PutPart) Type() CommandType { return TypePutPart }

// Type implements Command.
func (CompleteUpload) Type() CommandType { return TypeCompleteUpload }

// Type implements Command.
func (AbortUpload) Type() CommandType { return TypeAbortUpload }

// Type implements Command.
func (SetPolicy) Type() CommandType { return TypeSetPolicy }

// Type implements Command.
func (SetSetting) Type() CommandType { return TypeSetSetting }

// SetRegionID records the region's identity, once, when the region forms:
// nodes refuse to join, or to be added to, a region whose id differs from
// their own, and a region refuses a shared store another region has
// claimed. It fails with ErrRegionIDSet when another id is recorded (the
// same id again changes nothing).
type SetRegionID struct{ ID string }

// Type implements Command.
func (SetRegionID) Type() CommandType { return TypeSetRegionID }
func (ClaimUpload) Type() CommandType { return TypeClaimUpload }

// Bucket configuration kinds (SetBucketConfig). Values are the documents
// the S3 layer validated (JSON or XML); the FSM stores them as they are.
const (
	BucketConfPolicy       = "policy"
	BucketConfACL          = "acl"
	BucketConfPublicAccess = "public-access-block"
	BucketConfTagging      = "tagging"
	BucketConfCORS         = "cors"
	BucketConfLifecycle    = "lifecycle"
	// BucketConfVersioning is "Enabled" or "Suspended" (absent: never
	// versioned).
	BucketConfVersioning = "versioning"
	// BucketConfObjectLock is the bucket's ObjectLockConfiguration XML
	// (object lock enabled, and its default retention). It can be set only
	// while versioning is Enabled, and never removed; while it is set,
	// versioning cannot be suspended (ErrBucketState).
	BucketConfObjectLock = "object-lock"
)

// BucketConfigKinds are the kinds SetBucketConfig accepts.
var BucketConfigKinds = []string{BucketConfPolicy, BucketConfACL, BucketConfPublicAccess, BucketConfTagging, BucketConfCORS, BucketConfLifecycle, BucketConfVersioning, BucketConfObjectLock}

// MaxBucketConfig bounds one configuration document (S3's bucket policy
// limit is 20 KiB; a CORS configuration of 100 rules fits too; a
// lifecycle configuration of 1000 rules may not, and is refused).
const MaxBucketConfig = 64 << 10

// SetBucketConfig sets (or, with Delete, removes) one S3 configuration of
// a bucket. The bucket's existence is checked by the caller: a policy-file
// bucket has no record here. CreateBucket and DeleteBucket clear a name's
// configurations.
type SetBucketConfig struct {
	Bucket string `json:"bucket"`
	Kind   string `json:"kind"`
	Value  string `json:"value,omitempty"`
	Delete bool   `json:"delete,omitempty"`
}

func (SetBucketConfig) Type() CommandType { return TypeSetBucketConfig }

// RegionIDSetting is the region setting that holds the region's id.
const RegionIDSetting = "region_id"

// ErrRegionIDSet: the region already has another id.
var ErrRegionIDSet = errors.New("raft: the region already has an id")

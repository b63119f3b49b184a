// Package s3 is the store kind "s3": one bucket of Amazon S3 or of any
// S3-compatible server (MinIO, Ceph RGW), on aws-sdk-go-v2.
//
// Names. ObjectInfo.ETag is the S3-facing ETag fedgate computed while
// streaming (hex MD5 for Put, "<md5 of part MD5s>-N" for a multipart
// upload), kept in the object's metadata as x-amz-meta-fedgate-etag; for an
// object written by someone else it is the server's ETag. The Validator is
// the server's own (strong) ETag: content-derived, so a rewrite with
// identical bytes may keep it (storetest's ContentValidator).
//
// Writes. S3 metadata is fixed when an object is created, and the MD5 (and
// trailer checksums, PutOptions.LateChecksums) are known only at the body's
// end, so:
//   - a body of at most Config.PartSize bytes is read into a pooled buffer
//     and sent in one conditional PutObject with Content-MD5 and all its
//     metadata;
//   - a larger body (or one of unknown size that turns out larger) is
//     uploaded as one multipart upload straight to its key,
//     Config.Concurrency parts at a time, created with its metadata; the
//     MD5 ETag and late checksums, known only at the end, go to a small
//     sidecar object under MetaPrefix written before the upload is
//     completed with the write's conditions (sidecar.go). The object is
//     written once: no staging copy, no server-side copy.
//
// In both cases the body is read to io.EOF before anything becomes visible
// under the key, and memory is bounded store-wide by Config.MaxBufferMemory.
// Multipart uploads (Multiparter) go straight to S3 multipart on the key.
//
// Limits: SSE-KMS and SSE-C buckets are not supported (their ETags are not
// MD5s); an interrupted large Put can leave an incomplete upload behind
// (expire incomplete uploads with a bucket lifecycle rule), and a deleted
// or overwritten large object (but for an overwrite by a large Put in an
// unversioned bucket) leaves its sidecar, a few hundred bytes under
// MetaPrefix. StagingPrefix, where earlier versions staged large Puts, is
// still refused and never listed.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

var (
	_ store.Store       = (*Store)(nil)
	_ store.Multiparter = (*Store)(nil)
)

// StagingPrefix is where large Puts stage their bytes before the final
// server-side copy. Keys under it are refused (ErrInvalidKey) and never
// listed.
const StagingPrefix = ".fedgate-staging/"

// Defaults of Config.
const (
	DefaultPartSize        = 16 << 20
	DefaultConcurrency     = 4
	DefaultMaxBufferMemory = 1 << 30
	DefaultMaxRetries      = 5
	minPartSize            = 5 << 20 // S3's smallest part but the last
	maxCopySize            = 5 << 30 // S3's largest CopyObject / PutObject
)

// Config describes one S3 store. Credentials are given here only when the
// policy file names them (cmd reads them from the environment or a file);
// with AccessKey empty the SDK's default chain finds them.
type Config struct {
	Name     string
	Location policies.Location
	Bucket   string
	// Region is the bucket's region; empty: the SDK's (AWS_REGION, profile),
	// else us-east-1.
	Region string
	// Endpoint is the base URL of an S3-compatible server; empty for AWS.
	Endpoint  string
	PathStyle bool

	// Static credentials. Never logged: Config's String, GoString and
	// LogValue redact them.
	AccessKey, SecretKey, SessionToken string
	// Credentials, when set, provides the keys instead (credential files
	// read again when they change); it is cached by the SDK until the
	// credentials it returns expire.
	Credentials aws.CredentialsProvider
	// Profile and CredentialsFile select a shared-config profile and file.
	Profile, CredentialsFile string

	// MaxRetries is the number of attempts per request (default 5);
	// throttling, 5xx and connection errors are retried with exponential
	// backoff and jitter, bounded by the caller's ctx.
	MaxRetries int
	// PartSize is both the largest body sent in one PutObject and the part
	// size of large Puts (default 16 MiB, at least 5 MiB).
	PartSize int64
	// Concurrency is the number of parts of one large Put in flight (default
	// 4); one more part is read meanwhile, so a large Put buffers up to
	// Concurrency+1 parts (within MaxBufferMemory).
	Concurrency int
	// MaxBufferMemory bounds the bytes buffered by all writes of this store
	// at once (default 1 GiB, at least PartSize). Writes wait for room.
	MaxBufferMemory int64
	// HTTPClient, when set, replaces the SDK's HTTP client.
	HTTPClient *http.Client
	// MinIOKeyRules makes the store refuse (ErrInvalidKey, no request) the
	// keys MinIO cannot hold faithfully; see MinIORefuses. Set it for MinIO.
	MinIOKeyRules bool
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "REDACTED"
}

// String describes c with its secrets redacted.
func (c Config) String() string {
	return fmt.Sprintf("s3.Config{Name:%q Location:%s Bucket:%q Region:%q Endpoint:%q PathStyle:%t AccessKey:%q SecretKey:%q SessionToken:%q Profile:%q CredentialsFile:%q}",
		c.Name, c.Location, c.Bucket, c.Region, c.Endpoint, c.PathStyle,
		redact(c.AccessKey), redact(c.SecretKey), redact(c.SessionToken), c.Profile, c.CredentialsFile)
}

// GoString is String, so %#v redacts too.
func (c Config) GoString() string { return c.String() }

// LogValue makes slog log c with its secrets redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", c.Name), slog.String("location", c.Location.String()),
		slog.String("bucket", c.Bucket), slog.String("region", c.Region),
		slog.String("endpoint", c.Endpoint), slog.Bool("path_style", c.PathStyle),
		slog.String("access_key", redact(c.AccessKey)), slog.String("secret_key", redact(c.SecretKey)),
		slog.String("profile", c.Profile))
}

// Store is one S3 bucket. It is safe for concurrent use.
type Store struct {
	name     string
	loc      policies.Location
	bucket   string
	client   *awss3.Client
	partSize int64
	conc     int
	mem      *budget
	bufs     bufPool
	// minioKeys: Config.MinIOKeyRules.
	minioKeys bool
	// versionPage, when set, is the MaxKeys of ListObjectVersions (tests
	// lower it; the server's default is 1,000).
	versionPage int32
}

// New checks cfg and builds the store's client. It makes no request: a
// wrong bucket or credential shows in the first call. Credentials: the
// static keys of cfg when AccessKey is set, else the SDK's default chain
// (environment, shared config and credentials files with cfg.Profile and
// cfg.CredentialsFile, web identity / IRSA, ECS, IMDS).
func New(ctx context.Context, cfg Config) (*Store, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("s3: empty store name")
	case cfg.Bucket == "":
		return nil, fmt.Errorf("s3: store %q: empty bucket", cfg.Name)
	case cfg.Location.Cloud == "" || cfg.Location.Region == "":
		return nil, fmt.Errorf("s3: store %q: location %q: want cloud:region", cfg.Name, cfg.Location)
	case (cfg.AccessKey == "") != (cfg.SecretKey == ""):
		return nil, fmt.Errorf("s3: store %q: set both access key and secret key, or neither", cfg.Name)
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < minPartSize || cfg.PartSize > maxCopySize {
		return nil, fmt.Errorf("s3: store %q: part size %d: want 5 MiB to 5 GiB", cfg.Name, cfg.PartSize)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.MaxBufferMemory == 0 {
		cfg.MaxBufferMemory = DefaultMaxBufferMemory
	}
	if cfg.MaxBufferMemory < cfg.PartSize {
		return nil, fmt.Errorf("s3: store %q: max buffer memory %d is below the part size %d", cfg.Name, cfg.MaxBufferMemory, cfg.PartSize)
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}

	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxRetries
				o.MaxBackoff = 20 * time.Second
				// No client-side retry quota: a throttled burst must back off,
				// not fail fast with "retry quota exceeded".
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	switch {
	case cfg.Credentials != nil:
		opts = append(opts, config.WithCredentialsProvider(aws.NewCredentialsCache(cfg.Credentials)))
	case cfg.AccessKey != "":
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)))
	}
	if cfg.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, config.WithSharedCredentialsFiles([]string{cfg.CredentialsFile}))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	} else {
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = 4 * max(cfg.Concurrency, 16)
		})))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: store %q: load AWS config: %w", cfg.Name, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		if cfg.Credentials != nil {
			o.HTTPSignerV4 = newRotatingSigner()
		}
		// fedgate sends Content-MD5 itself and checks ETags; the SDK's
		// default CRC trailers are not understood by every S3 server.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{
		name: cfg.Name, loc: cfg.Location, bucket: cfg.Bucket, client: client,
		partSize: cfg.PartSize, conc: cfg.Concurrency,
		mem:  newBudget(cfg.MaxBufferMemory),
		bufs: bufPool{size: int(cfg.PartSize)}, minioKeys: cfg.MinIOKeyRules,
	}, nil
}

// Name is the store's name in the policy file.
func (s *Store) Name() string { return s.name }

// Location is the bucket's cloud and region, for routing and egress.
func (s *Store) Location() policies.Location { return s.loc }

// checkKey refuses keys no store holds (empty, over MaxKeyLen bytes, NUL,
// invalid UTF-8), keys under StagingPrefix and MetaPrefix and, with MinIOKeyRules, the
// keys MinIO cannot hold faithfully, with ErrInvalidKey.
func (s *Store) checkKey(op, key string) error {
	switch {
	case key == "", len(key) > store.MaxKeyLen, strings.IndexByte(key, 0) >= 0, !utf8.ValidString(key):
		return fmt.Errorf("s3: %s %q: %w", op, key, store.ErrInvalidKey)
	case reservedKey(key):
		return fmt.Errorf("s3: %s %q: %w: reserved for fedgate's staging and sidecars", op, key, store.ErrInvalidKey)
	case s.minioKeys && MinIORefuses(key):
		return fmt.Errorf("s3: %s %q: %w: MinIO cannot hold this key", op, key, store.ErrInvalidKey)
	}
	return nil
}

// MinIORefuses reports whether MinIO cannot hold key faithfully: a leading
// "/" (which MinIO drops, so "/a" would alias "a"), an empty, "." or ".."
// segment (MinIO refuses them, and its HEAD answers a bare 400), or a
// segment of over 255 bytes (a file name on its disks; 246 before a
// trailing "/", which MinIO stores as a "__XLDIR__" suffix).
func MinIORefuses(key string) bool {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		limit := 255
		if i == len(segs)-2 && segs[i+1] == "" {
			limit -= len("__XLDIR__")
		}
		switch {
		case seg == "" && !(last && i > 0), seg == ".", seg == "..", len(seg) > limit:
			return true
		}
	}
	return false
}

// checkUploadID refuses, as an unknown upload, an id that is not one
// path-safe token (no S3 server makes one; MinIO answers such ids with a
// resource-name error).
func checkUploadID(op, key, id string) error {
	if id == "" || strings.ContainsAny(id, "/\\") || strings.Contains(id, "..") {
		return fmt.Errorf("s3: %s %q: upload %q: %w", op, key, id, store.ErrNoSuchUpload)
	}
	return nil
}

// Stat returns the object's info from a HEAD request. ErrNotFound when key
// does not exist; ErrInvalidKey for a key no store holds; ErrAccessDenied,
// ErrThrottled (after retries) as the server says.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if err := s.checkKey("stat", key); err != nil {
		return store.ObjectInfo{}, err
	}
	return s.head(ctx, key, "")
}

// head HEADs key, with If-Match when ifMatch is set, and reads its
// sidecar when it has one.
func (s *Store) head(ctx context.Context, key string, ifMatch store.Validator) (store.ObjectInfo, error) {
	info, meta, err := s.headRaw(ctx, key, ifMatch)
	if err != nil {
		return info, err
	}
	if err := s.resolveSidecar(ctx, key, meta, &info); err != nil {
		return store.ObjectInfo{}, err
	}
	return info, nil
}

// statErr maps the error of a HEAD or GET of key's current version: a
// delete marker (S3: 404 with x-amz-delete-marker and the marker's id)
// becomes a *store.DeleteMarker, the rest as mapErr says.
func statErr(key string, err error) error {
	if isDeleteMarker(err) {
		var re *smithyhttp.ResponseError
		errors.As(err, &re)
		dm := &store.DeleteMarker{Key: key, VersionID: re.Response.Header.Get("X-Amz-Version-Id"), Latest: true}
		return store.Retried(fmt.Errorf("s3: stat %q: %w", key, dm))
	}
	return mapErr("stat", key, err)
}

// headRaw is head without the sidecar: the ETag is the S3 ETag for an
// object that has one, and meta tells (hasSidecar).
func (s *Store) headRaw(ctx context.Context, key string, ifMatch store.Validator) (store.ObjectInfo, map[string]string, error) {
	in := &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key}
	if ifMatch != "" {
		in.IfMatch = aws.String(quoteETag(string(ifMatch)))
	}
	out, err := s.client.HeadObject(ctx, in)
	if err != nil {
		return store.ObjectInfo{}, nil, statErr(key, err)
	}
	h := headers{
		contentType: out.ContentType, cacheControl: out.CacheControl, contentDisposition: out.ContentDisposition,
		contentEncoding: out.ContentEncoding, contentLanguage: out.ContentLanguage, expires: out.ExpiresString,
		meta: out.Metadata,
	}
	info := h.info(key, aws.ToString(out.ETag))
	info.Size = aws.ToInt64(out.ContentLength)
	info.ModTime = aws.ToTime(out.LastModified)
	info.VersionID = aws.ToString(out.VersionId) // the bucket's own version, where it keeps versions
	return info, out.Metadata, nil
}

// ReadRange streams length bytes from offset (length < 0: to the end) with
// a ranged GET, conditional on ifMatch when set. ErrNotFound when key does
// not exist; ErrPreconditionFailed when ifMatch differs from the object's
// Validator. A range starting at or after the end yields no bytes.
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	if err := s.checkKey("read", key); err != nil {
		return nil, err
	}
	offset = max(offset, 0)
	if length == 0 {
		if _, err := s.head(ctx, key, ifMatch); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	in := &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if ifMatch != "" {
		in.IfMatch = aws.String(quoteETag(string(ifMatch)))
	}
	in.Range = rangeHeader(offset, length)
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isCode(err, "InvalidRange") {
			// The range starts past the end: no bytes, if the object is there.
			if _, herr := s.head(ctx, key, ifMatch); herr != nil {
				return nil, herr
			}
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, mapErr("read", key, err)
	}
	return out.Body, nil
}

// ReadFirst implements store.FirstReader with one ranged GET of the first
// n bytes: its headers are a HEAD's (Content-Range gives the size), its
// body the bytes. An empty object (S3 refuses the range) is HEADed.
func (s *Store) ReadFirst(ctx context.Context, key string, n int64) (store.ObjectInfo, io.ReadCloser, error) {
	if err := s.checkKey("stat", key); err != nil {
		return store.ObjectInfo{}, nil, err
	}
	if n <= 0 {
		return store.ObjectInfo{}, nil, fmt.Errorf("s3: read first %d bytes of %q: %w", n, key, store.ErrNotSupported)
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: rangeHeader(0, n)})
	if err != nil {
		if isCode(err, "InvalidRange") {
			info, err := s.head(ctx, key, "")
			if err != nil {
				return info, nil, err
			}
			return info, io.NopCloser(strings.NewReader("")), nil
		}
		return store.ObjectInfo{}, nil, statErr(key, err)
	}
	h := headers{
		contentType: out.ContentType, cacheControl: out.CacheControl, contentDisposition: out.ContentDisposition,
		contentEncoding: out.ContentEncoding, contentLanguage: out.ContentLanguage, expires: out.ExpiresString,
		meta: out.Metadata,
	}
	info := h.info(key, aws.ToString(out.ETag))
	info.ModTime = aws.ToTime(out.LastModified)
	info.VersionID = aws.ToString(out.VersionId)
	info.Size = aws.ToInt64(out.ContentLength) // a 200 answer: the whole object
	if cr := aws.ToString(out.ContentRange); cr != "" {
		total, ok := contentRangeTotal(cr)
		if !ok {
			out.Body.Close()
			return store.ObjectInfo{}, nil, store.Retried(fmt.Errorf("s3: stat %q: the GET's Content-Range %q gives no size", key, cr))
		}
		info.Size = total
	}
	if err := s.resolveSidecar(ctx, key, out.Metadata, &info); err != nil {
		out.Body.Close()
		return store.ObjectInfo{}, nil, err
	}
	return info, out.Body, nil
}

// contentRangeTotal returns the complete length of "bytes FIRST-LAST/TOTAL".
func contentRangeTotal(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 || !strings.HasPrefix(cr, "bytes ") {
		return 0, false
	}
	total, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return total, err == nil && total >= 0
}

// rangeHeader is the Range of a read of length bytes (< 0: to the end)
// from offset; nil for the whole object.
func rangeHeader(offset, length int64) *string {
	switch {
	case length > 0:
		return aws.String("bytes=" + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(offset+length-1, 10))
	case offset > 0:
		return aws.String("bytes=" + strconv.FormatInt(offset, 10) + "-")
	}
	return nil
}

// Delete removes the object. A missing key is not an error;
// ErrInvalidKey for a key no store holds; ErrAccessDenied, ErrThrottled as
// the server says.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.checkKey("delete", key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		if err := mapErr("delete", key, err); !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// quoteETag puts an ETag in the double quotes S3 conditions expect.
func quoteETag(e string) string {
	if strings.HasPrefix(e, `"`) || e == "*" {
		return e
	}
	return `"` + e + `"`
}

// unquoteETag strips the double quotes (and a weak prefix) of a server ETag.
func unquoteETag(e string) string {
	e = strings.TrimPrefix(e, "W/")
	return strings.Trim(e, `"`)
}

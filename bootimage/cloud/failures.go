package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// Failure is a failed cloud API call as the operator reports it: the API, the region, the API's
// error code and HTTP status, and its message without request ids or timestamps, so one fault
// reads the same on every retry and an outage is one message, not one per call.
type Failure struct {
	API    string
	Region string
	// Code is the API's error code (RequestLimitExceeded, backendError); empty without an answer.
	Code string
	// Status is the HTTP status of the answer; 0 without an answer (connection refused, timeout).
	Status  int
	Message string
	// retryAt is when the failure is forgotten and the call may be sent again.
	retryAt time.Time
	err     error
}

func (f *Failure) Error() string {
	var b strings.Builder
	b.WriteString(f.API)
	if f.Region != "" {
		b.WriteString(" in " + f.Region)
	}
	b.WriteString(": ")
	if f.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d ", f.Status)
	}
	if f.Code != "" {
		b.WriteString(f.Code + ": ")
	}
	b.WriteString(f.Message)
	return b.String()
}

// Unwrap returns the SDK's error.
func (f *Failure) Unwrap() error { return f.err }

// Key identifies the fault: the API, its error code and HTTP status, or without an answer the
// cleaned message. Two failures with one key are the same fault.
func (f *Failure) Key() string {
	if f.Code == "" && f.Status == 0 {
		return f.API + "|" + f.Message
	}
	return fmt.Sprintf("%s|%s|%d", f.API, f.Code, f.Status)
}

// regionWide reports whether the failure says nothing about the query itself: throttling, a
// server error or no answer. Every query to the endpoint and region then waits.
func (f *Failure) regionWide() bool {
	return f.Status == 0 || f.Status == http.StatusTooManyRequests || f.Status >= 500 || throttleCodes[f.Code]
}

// throttleCodes are the error codes AWS and GCP answer when they throttle.
var throttleCodes = map[string]bool{
	"RequestLimitExceeded": true, "Throttling": true, "ThrottlingException": true, "RequestThrottled": true,
	"TooManyRequestsException": true, "rateLimitExceeded": true, "userRateLimitExceeded": true,
}

// FailureKey returns what identifies err as a fault for deduplication: Failure.Key for a cloud
// failure, else the message without request ids and timestamps.
func FailureKey(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Key()
	}
	return clean(err.Error())
}

// RetryAfter returns how long until the cloud call that failed with err may be sent again; false
// when err is no remembered cloud failure.
func RetryAfter(err error) (time.Duration, bool) {
	var f *Failure
	if !errors.As(err, &f) || f.retryAt.IsZero() {
		return 0, false
	}
	return max(time.Until(f.retryAt), 0), true
}

// NewFailure describes err, returned by api in region. A context error of the caller is no
// cloud failure and is returned as it is.
func NewFailure(api, region string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	f := &Failure{API: api, Region: region, err: err}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		f.Message = "no answer in time"
	default:
		f.Message = err.Error()
	}
	f.Message = clean(f.Message)
	return f
}

// NewAPIFailure describes err, which api answered in region with an HTTP status, an error code and
// a message, as the adapter's SDK reports them: this package links no SDK.
func NewAPIFailure(api, region string, err error, status int, code, message string) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	return &Failure{API: api, Region: region, err: err, Status: status, Code: code, Message: clean(message)}
}

// Request ids and timestamps change on every call; a message that carries them never repeats.
var (
	requestIDs = regexp.MustCompile(`(?i)(request[ -]?id|x-amz-request-id|x-amz-id-2)[:=]\s*[^\s,;)]+[,;]?\s*`)
	uuids      = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	timestamps = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?`)
)

// CleanMessage returns msg without request ids, UUIDs and timestamps, which change on every call:
// for messages of errors no cloud adapter described (a vCenter import).
func CleanMessage(msg string) string { return clean(msg) }

func clean(msg string) string {
	msg = requestIDs.ReplaceAllString(msg, "")
	msg = uuids.ReplaceAllString(msg, "<id>")
	msg = timestamps.ReplaceAllString(msg, "<time>")
	return strings.TrimSpace(msg)
}

// Backoff is how long a failed cloud call is remembered: Initial after the first failure,
// doubling with each failure that follows, at most Max. Every caller asking meanwhile gets the
// remembered failure without a call, so a throttled or failing cloud sees fewer calls, not the
// same rate. Zero fields take the defaults.
type Backoff struct {
	Initial, Max time.Duration
}

// Default failure backoff: the cap keeps recovery within seconds of the cloud healing.
const (
	defaultBackoffInitial = time.Second
	defaultBackoffMax     = 16 * time.Second
)

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = defaultBackoffInitial
	}
	if b.Max <= 0 {
		b.Max = defaultBackoffMax
	}
	return b
}

// failures remembers failed calls by key (endpoint, region and query) and region-wide faults by
// scope (endpoint and region), each for its current interval. Bounded like the answers.
type failures struct {
	backoff Backoff
	mu      sync.Mutex
	// last holds the last failure of each key and scope, kept past its interval (for Max) so the
	// next failure doubles it; a success forgets it.
	last *utilcache.LRUExpireCache
}

type remembered struct {
	failure  *Failure
	interval time.Duration
}

// maxFailures bounds the failures remembered, one per lookup key and scope: far above what one
// cluster needs.
const maxFailures = 1024

func newFailures(b Backoff) *failures {
	return &failures{backoff: b.withDefaults(), last: utilcache.NewLRUExpireCache(maxFailures)}
}

// active returns the remembered failure of key or scope, if its interval has not passed.
func (f *failures) active(now time.Time, keys ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		if v, ok := f.last.Get(k); ok {
			if r := v.(remembered); now.Before(r.failure.retryAt) {
				return r.failure
			}
		}
	}
	return nil
}

// record remembers err for key, and for scope too when the fault is region-wide, and returns it
// with when it may be retried.
func (f *failures) record(now time.Time, key, scope string, err error) error {
	var failure *Failure
	if !errors.As(err, &failure) {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	interval := f.backoff.Initial
	k := key
	if failure.regionWide() {
		k = scope
	}
	if v, ok := f.last.Get(k); ok {
		interval = min(2*v.(remembered).interval, f.backoff.Max)
	}
	copied := *failure
	copied.retryAt = now.Add(interval)
	f.last.Add(k, remembered{failure: &copied, interval: interval}, interval+f.backoff.Max)
	return &copied
}

// forget drops what is remembered for key and scope after a success.
func (f *failures) forget(key, scope string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last.Remove(key)
	f.last.Remove(scope)
}

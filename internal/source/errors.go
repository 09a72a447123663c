package source

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

var (
	errGone = errors.New("resource version too old")
	errEmit = errors.New("emit")
)

// Reasons of a Fault: short and stable, for logs, /readyz and the degraded metric.
const (
	ReasonForbidden    = "forbidden"    // RBAC denies list or watch (revoked while running)
	ReasonUnauthorized = "unauthorized" // the credentials were refused
	ReasonNotServed    = "not served"   // the server does not serve the resource: a CRD not (yet, or no longer) there
	ReasonInvalidRV    = "invalid resource version"
	ReasonDiscovery    = "discovery failed" // the server could not say whether it serves the resource
)

// Fault is an error of one resource that retrying at once cannot heal but time may:
// permissions granted again, a CRD created or recreated, a server upgraded. The stream
// does not retry it itself; the pipeline (pipeline.Fault) degrades that resource alone
// and streams it again later, with a capped backoff. A Fault is also marked
// retry.Terminal, so a caller that knows nothing of faults stops rather than spins.
type Fault struct {
	Resource string // the resource's ID
	Reason   string // one of the Reason… constants
	Err      error  // names the resource and the request
}

func (f *Fault) Error() string { return f.Err.Error() }
func (f *Fault) Unwrap() error { return f.Err }

// FaultReason is Reason: what pipeline.Fault asks of a resource's error.
func (f *Fault) FaultReason() string { return f.Reason }

// fault marks err, which names the resource, as a Fault of r with reason.
func fault(r change.Resource, reason string, err error) error {
	return retry.Terminal(&Fault{Resource: r.ID(), Reason: reason, Err: err})
}

// classify marks an apiserver error where retrying at once cannot help: a Fault of the
// resource (Forbidden, Unauthorized, not served). Anything else is retried.
func classify(r change.Resource, verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fault(r, ReasonForbidden, fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err))
	case apierrors.IsUnauthorized(err):
		return fault(r, ReasonUnauthorized, fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err))
	case notServed(err):
		return fault(r, ReasonNotServed, fmt.Errorf("resource %s: %s: the server does not serve it (was its CRD deleted?): %w", r.ID(), verb, err))
	}
	return fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err)
}

// notServed reports whether err says the server does not serve the resource (or not
// with this verb): a CRD deleted, or recreated without this version.
func notServed(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// unanswered reports whether err says the server gave no answer to act on: no response
// at all (a refused or dropped connection, a timeout) or one that asks to try again
// later (429, 500, 502, 503, 504). Anything else (Forbidden, not served, a bad request)
// is an answer, which the request that follows reports as it does.
func unanswered(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	switch st.Status().Code {
	case 429, 500, 502, 503, 504:
		return true
	}
	return false
}

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

// classify marks an apiserver error terminal where retrying cannot help.
func classify(r change.Resource, verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return retry.Terminal(fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err))
	case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return retry.Terminal(fmt.Errorf("resource %s: %s: the server does not serve it (was its CRD deleted?): %w", r.ID(), verb, err))
	}
	return fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err)
}

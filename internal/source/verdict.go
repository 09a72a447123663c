package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// CheckAccess is `kube-cdc check`'s row of one configured resource: run LISTs and then
// WATCHes it, so both verbs are asked for where run asks (ReviewAccess, which the running
// daemon's periodic AccessCheck asks through too). A user who may list but not watch
// passes the LIST, writes the whole snapshot and only then fails, so the error names the
// verb that is missing, as an *AccessDenied; any other error is a review the apiserver
// could not answer.
func CheckAccess(ctx context.Context, cs kubernetes.Interface, tg Target) (string, error) {
	a, err := ReviewAccess(ctx, cs, tg)
	if err != nil {
		return "", err
	}
	res := tg.Resource.ID()
	var denied, may string
	switch {
	case len(a.Denied) == 0:
		return fmt.Sprintf("list, watch allowed %s (%s/%s)", a.Where, tg.Resource.Group, tg.Resource.Version), nil
	case len(a.Allowed) == 0:
		denied, may = "list", "may neither list nor watch"
	case a.Denied[0] == "list":
		denied, may = "list", "may watch but not list"
	default:
		denied, may = "watch", "may list but not watch"
	}
	msg := fmt.Sprintf("%s %s not allowed: %s %s %s %s", denied, res, whoAmI(ctx, cs), may, res, a.Where)
	if len(a.Reasons) > 0 {
		msg += " (" + strings.Join(a.Reasons, "; ") + ")"
	}
	return "", &AccessDenied{msg: msg}
}

// AccessDenied is CheckAccess's error when a verb is denied, as opposed to an access
// review the apiserver could not answer.
type AccessDenied struct{ msg string }

func (e *AccessDenied) Error() string { return e.msg }

// whoAmI names the user the apiserver sees, for messages; "the user" when it will not say.
func whoAmI(ctx context.Context, cs kubernetes.Interface) string {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "the user"
	}
	return "user " + r.Status.UserInfo.Username
}

// MayStream refuses run's start, before anything is written, when a resource may be
// listed but not watched (or not listed): the stream would write a whole snapshot and
// only then fail. It asks what `check` asks (CheckAccess); when the apiserver cannot
// answer, it logs that and lets the stream find out.
func MayStream(ctx context.Context, cs kubernetes.Interface, targets []Target, log *slog.Logger) error {
	for _, tg := range targets {
		_, err := CheckAccess(ctx, cs, tg)
		var denied *AccessDenied
		switch {
		case errors.As(err, &denied):
			return retry.Terminal(fmt.Errorf("resource %s: %w", tg.Resource.ID(), err))
		case err != nil:
			log.Warn("cannot ask the apiserver what kube-cdc may read; streaming anyway", "resource", tg.Resource.ID(), "error", err)
		}
	}
	return nil
}

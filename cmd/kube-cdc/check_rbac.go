package main

import (
	"context"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/source"
)

// checkRBAC is the row of one configured resource: run LISTs and then WATCHes it, so both
// verbs are asked for where run asks (source.ReviewAccess, which the running daemon's
// periodic AccessCheck asks through too). A user who may list but not watch passes the
// LIST, writes the whole snapshot and only then fails, so check must name the verb that
// is missing.
func checkRBAC(ctx context.Context, cs kubernetes.Interface, tg source.Target) (string, error) {
	a, err := source.ReviewAccess(ctx, cs, tg)
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
	return "", deniedError(msg)
}

// deniedError is checkRBAC's answer when a verb is denied, as opposed to an access review
// the apiserver could not answer.
type deniedError string

func (e deniedError) Error() string { return string(e) }

// whoAmI names the user the apiserver sees, for messages; "the user" when it will not say.
func whoAmI(ctx context.Context, cs kubernetes.Interface) string {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "the user"
	}
	return "user " + r.Status.UserInfo.Username
}

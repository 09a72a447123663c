package main

import (
	"context"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/source"
)

// checkRBAC is the row of one configured resource: run LISTs and then WATCHes it, so both
// verbs are asked for (SelfSubjectAccessReview), where run asks: in its namespace for a
// target of one namespace (source.Resolve gives each configured namespace its own), else
// cluster-wide. A user who may list but not watch passes the LIST, writes
// the whole snapshot and only then fails, so check must name the verb that is missing.
func checkRBAC(ctx context.Context, cs kubernetes.Interface, tg source.Target) (string, error) {
	ns, where := "", "cluster-wide"
	switch {
	case len(tg.Namespaces) == 1:
		ns = tg.Namespaces[0]
		where = "in namespace " + ns
	case len(tg.Namespaces) > 1:
		where = "cluster-wide (namespaces " + strings.Join(tg.Namespaces, ", ") + " are read through one cluster-wide list and watch)"
	}
	verbs := []string{"list", "watch"}
	allowed := map[string]bool{}
	var reasons []string
	for _, verb := range verbs {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Verb: verb, Group: tg.Resource.Group, Resource: tg.Resource.Resource, Namespace: ns,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("access review of %s %s: %w", verb, tg.Resource.ID(), err)
		}
		allowed[verb] = r.Status.Allowed
		// RBAC denies by having no opinion: its reason is empty. Other authorizers (a
		// webhook) may say why; keep what they say.
		if !r.Status.Allowed {
			for _, s := range []string{r.Status.Reason, r.Status.EvaluationError} {
				if s != "" {
					reasons = append(reasons, s)
				}
			}
		}
	}
	res := tg.Resource.ID()
	var denied, may string
	switch {
	case allowed["list"] && allowed["watch"]:
		return fmt.Sprintf("list, watch allowed %s (%s/%s)", where, tg.Resource.Group, tg.Resource.Version), nil
	case !allowed["list"] && !allowed["watch"]:
		denied, may = "list", "may neither list nor watch"
	case !allowed["list"]:
		denied, may = "list", "may watch but not list"
	default:
		denied, may = "watch", "may list but not watch"
	}
	msg := fmt.Sprintf("%s %s not allowed: %s %s %s %s", denied, res, whoAmI(ctx, cs), may, res, where)
	if len(reasons) > 0 {
		msg += " (" + strings.Join(reasons, "; ") + ")"
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

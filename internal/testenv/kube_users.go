package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// restrictedNamespace holds the ServiceAccounts behind RestrictedUser.
const restrictedNamespace = "kube-cdc-testenv"

// RestrictedUser returns a client config and a kubeconfig path for a user that may do
// exactly what rules allow (plus what every authenticated user may: discovery, self
// reviews). The user is the ServiceAccount name in namespace "kube-cdc-testenv"
// (system:serviceaccount:kube-cdc-testenv:<name>), authenticated by a token from the
// TokenRequest API, bound to a ClusterRole "kube-cdc-testenv:<name>" with these rules. A
// ServiceAccount rather than a static token, so any number of users can be added without
// restarting the apiserver; tokens stay valid across RestartAPIServer. Calling it again
// with the same name replaces the rules.
func (k *Kube) RestrictedUser(ctx context.Context, name string, rules []rbacv1.PolicyRule) (*rest.Config, string, error) {
	cs := k.clientset
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restrictedNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: restrictedNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(restrictedNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	roleName := restrictedNamespace + ":" + name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := cs.RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		old.Rules = rules
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return nil, "", err
		}
	} else if err != nil {
		return nil, "", err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: restrictedNamespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	expiry := int64((24 * time.Hour).Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(restrictedNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("request a token for ServiceAccount %s: %w", name, err)
	}
	cfg := k.creds.restConfig(k.Config.Host, tr.Status.Token)
	user := "system:serviceaccount:" + restrictedNamespace + ":" + name
	if err := k.waitRulesEffective(ctx, cfg, user, rules); err != nil {
		return nil, "", err
	}
	path := filepath.Join(k.Dir, "restricted-"+name+".kubeconfig")
	if err := writeKubeconfig(path, name, cfg); err != nil {
		return nil, "", err
	}
	return cfg, path, nil
}

// waitRulesEffective waits until the new token authenticates and the RBAC authorizer (fed
// by informers) has seen the binding, so the caller's first request is judged by the rules.
func (k *Kube) waitRulesEffective(ctx context.Context, cfg *rest.Config, user string, rules []rbacv1.PolicyRule) error {
	asUser, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := k.checkRulesEffective(ctx, asUser, user, rules)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("RBAC for %s not effective: %w", user, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (k *Kube) checkRulesEffective(ctx context.Context, asUser kubernetes.Interface, user string, rules []rbacv1.PolicyRule) error {
	review, err := asUser.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	if got := review.Status.UserInfo.Username; got != user {
		return fmt.Errorf("token authenticates as %q, want %q", got, user)
	}
	for _, r := range rules {
		spec := authorizationv1.SubjectAccessReviewSpec{User: user}
		if len(r.Verbs) == 0 {
			continue
		}
		switch {
		case len(r.NonResourceURLs) > 0:
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: r.Verbs[0]}
		case len(r.Resources) > 0 && len(r.APIGroups) > 0:
			attrs := &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
			if res, sub, ok := strings.Cut(attrs.Resource, "/"); ok {
				attrs.Resource, attrs.Subresource = res, sub
			}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			spec.ResourceAttributes = attrs
		default:
			continue
		}
		sar, err := k.clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not yet allowed: %+v", r)
		}
	}
	return nil
}

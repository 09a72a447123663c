package testenv

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CreateCRD creates crd and returns once it is Established and every served version is in
// discovery and answers a LIST, so a client that starts now can resolve and use it.
func (k *Kube) CreateCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := k.apiext.ApiextensionsV1().CustomResourceDefinitions()
	created, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pending := func() string {
		got, err := crds.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		established := false
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			return "not Established"
		}
		plural := got.Spec.Names.Plural
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := got.Spec.Group + "/" + v.Name
			list, err := k.clientset.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return fmt.Sprintf("discovery of %s: %v", gv, err)
			}
			found := false
			for _, r := range list.APIResources {
				found = found || r.Name == plural
			}
			if !found {
				return fmt.Sprintf("%s not yet in discovery of %s", plural, gv)
			}
			gvr := schema.GroupVersionResource{Group: got.Spec.Group, Version: v.Name, Resource: plural}
			if _, err := k.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return fmt.Sprintf("list %s: %v", gvr, err)
			}
		}
		return ""
	}
	for {
		last := pending()
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not served: %s: %w", created.Name, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

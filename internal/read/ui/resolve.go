package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
)

// shortNames are kubectl's short names of the built-in resources. The sink records no
// discovery, so a CRD's short names are not known here (its plural and kind are).
var shortNames = map[string]string{
	"cm": "configmaps", "cj": "cronjobs.batch", "cs": "componentstatuses",
	"csr": "certificatesigningrequests.certificates.k8s.io", "deploy": "deployments.apps",
	"ds": "daemonsets.apps", "ep": "endpoints", "ev": "events", "hpa": "horizontalpodautoscalers.autoscaling",
	"ing": "ingresses.networking.k8s.io", "limits": "limitranges", "netpol": "networkpolicies.networking.k8s.io",
	"no": "nodes", "ns": "namespaces", "pc": "priorityclasses.scheduling.k8s.io", "pdb": "poddisruptionbudgets.policy",
	"po": "pods", "pv": "persistentvolumes", "pvc": "persistentvolumeclaims", "quota": "resourcequotas",
	"rc": "replicationcontrollers", "rs": "replicasets.apps", "sa": "serviceaccounts", "sc": "storageclasses.storage.k8s.io",
	"sts": "statefulsets.apps", "svc": "services", "crd": "customresourcedefinitions.apiextensions.k8s.io",
	"crds": "customresourcedefinitions.apiextensions.k8s.io",
}

// errUnknownResource marks a resource name that names no recorded resource.
var errUnknownResource = errors.New("resource")

// resolveResource reads a resource as a person types it, case-insensitively, against the
// resources the cluster records: its id as the pages write it (deployments.apps), a
// plural (deployments), a kubectl short name (deploy) or a kind (Deployment), as
// history.MatchRecorded reads the CLI's. "" is every resource.
func (s *Server) resolveResource(ctx context.Context, cluster, name string) (change.Resource, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return change.Resource{}, nil
	}
	recorded, err := s.o.Store.RecordedResourcesOf(ctx, cluster)
	if err != nil {
		return change.Resource{}, err
	}
	if full, ok := shortNames[name]; ok {
		name = full
	}
	for _, r := range recorded {
		if r.ID() == name {
			return r, nil
		}
	}
	if !strings.Contains(name, ".") {
		if r, err := history.MatchRecorded(name, recorded); err == nil {
			return r, nil
		}
	}
	ids := make([]string, len(recorded))
	for i, r := range recorded {
		ids[i] = r.ID()
	}
	known := "nothing yet"
	if len(ids) > 0 {
		known = strings.Join(ids, ", ")
	}
	return change.Resource{}, fmt.Errorf("%w %q: none of the resources cluster %s records (%s) has that plural, short name or kind", errUnknownResource, name, cluster, known)
}

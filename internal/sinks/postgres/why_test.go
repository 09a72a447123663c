package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// why() of a pod names the changes of the pod, its controllers, the ConfigMap and Secret
// it references, its node, the Service selecting it and the Ingress in front of that
// Service, and nothing unrelated; outside the window, nothing.
func TestWhyListsTheChangesOfEverythingAPodDependsOnInTheWindow(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	res := func(group, resource, kind string, namespaced bool) change.Resource {
		return change.Resource{Group: group, Version: "v1", Resource: resource, Kind: kind, Namespaced: namespaced}
	}
	configMaps := res("", "configmaps", "ConfigMap", true)
	writeObject(t, s, res("", "nodes", "Node", false), "", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`)
	writeObject(t, s, res("", "nodes", "Node", false), "", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"}}`)
	writeObject(t, s, res("apps", "deployments", "Deployment", true), "shop", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
		"spec":{"template":{"metadata":{"labels":{"app":"web"}},"spec":{"volumes":[{"name":"conf","configMap":{"name":"cfg"}}]}}}}`)
	writeObject(t, s, res("apps", "replicasets", "ReplicaSet", true), "shop", `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1",
		"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"uid-web","controller":true}]}}`)
	writeObject(t, s, configMaps, "shop", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"v":"1"}}`)
	writeObject(t, s, configMaps, "shop", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"env"}}`)
	writeObject(t, s, configMaps, "shop", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unrelated"}}`)
	writeObject(t, s, res("", "secrets", "Secret", true), "shop", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds"},"data":{"p":"hmac-sha256:00"}}`)
	writeObject(t, s, res("", "pods", "Pod", true), "shop", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1-a","labels":{"app":"web","pod-template-hash":"1"},
		"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","uid":"uid-web-1","controller":true}]},
		"spec":{"nodeName":"n1","volumes":[{"name":"conf","configMap":{"name":"cfg"}}],
		        "containers":[{"name":"app","envFrom":[{"configMapRef":{"name":"env"}}],
		                       "env":[{"name":"P","valueFrom":{"secretKeyRef":{"name":"creds","key":"p"}}}]}]}}`)
	writeObject(t, s, res("", "services", "Service", true), "shop", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"selector":{"app":"web"}}}`)
	writeObject(t, s, res("", "services", "Service", true), "shop", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"other"},"spec":{"selector":{"app":"other"}}}`)
	writeObject(t, s, res("networking.k8s.io", "ingresses", "Ingress", true), "shop", `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"front"},
		"spec":{"rules":[{"http":{"paths":[{"path":"/","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}`)
	writeObject(t, s, res("networking.k8s.io", "ingresses", "Ingress", true), "shop", `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"elsewhere"},
		"spec":{"defaultBackend":{"service":{"name":"other","port":{"number":80}}}}}`)
	// The ConfigMap edited.
	edit := change.Change{Cluster: cluster, Resource: configMaps, Key: change.Key{Namespace: "shop", Name: "cfg"}, UID: "uid-cfg", RV: 20,
		Op: change.OpUpdate, Labels: json.RawMessage(`{}`), ChangedBy: "kubectl-edit/Update", ObservedAt: time.Now(),
		Object: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"shop","uid":"uid-cfg"},"data":{"v":"2"}}`)}
	write(t, s, change.Batch{Resource: configMaps, Changes: []change.Change{edit}, Checkpoint: 20})

	checkRel(t, dsn, "why(pods, shop, web-1-a)",
		`SELECT relation, depth, resource, namespace, name, op, rv, changed_by FROM kube_cdc.why('pods', 'shop', 'web-1-a')`,
		"self 0 pods shop web-1-a create 10 ",
		"controller 1 replicasets shop web-1 create 10 ",
		"controller 2 deployments shop web create 10 ",
		"configmap 0 configmaps shop cfg create 10 ",
		"configmap 0 configmaps shop cfg update 20 kubectl-edit/Update",
		"configmap 0 configmaps shop env create 10 ",
		"secret 0 secrets shop creds create 10 ",
		"node 0 nodes  n1 create 10 ",
		"service 0 services shop web create 10 ",
		"ingress 0 ingresses shop front create 10 ",
		// writeObject's deleted "gone" copies of the first Service and Ingress: deleted
		// within the window, in front of the pod until then, so named too.
		"service 0 services shop gone delete 11 ",
		"ingress 0 ingresses shop gone delete 11 ")
	checkRel(t, dsn, "why(pods, shop, web-1-a) an hour ago",
		`SELECT relation, name FROM kube_cdc.why('pods', 'shop', 'web-1-a', now() - interval '1 hour')`)
	// The read store's Why is the same query: its window and moment are why()'s.
	whyRows := func(q store.WhyQuery) []string {
		t.Helper()
		rows, err := readerOf(t, s).Why(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%s %s %s %d %s", r.Relation, r.Key.Name, r.Op, r.RV, r.ChangedBy))
		}
		return out
	}
	pod := store.WhyQuery{Resource: "pods", Namespace: "shop", Name: "web-1-a"}
	if got := whyRows(pod); !slices.Contains(got, "configmap cfg update 20 kubectl-edit/Update") || len(got) != 12 {
		t.Errorf("store.Why(pods shop/web-1-a) = %q, want why()'s 12 rows, the ConfigMap's edit among them", got)
	}
	pod.At = time.Now().Add(-time.Hour)
	if got := whyRows(pod); len(got) != 0 {
		t.Errorf("store.Why an hour ago = %q, want none", got)
	}
	pod.At, pod.Lookback = time.Now().Add(time.Hour), 10*time.Minute
	if got := whyRows(pod); len(got) != 0 {
		t.Errorf("store.Why over the 10 minutes before an hour from now = %q, want none", got)
	}
	checkRel(t, dsn, "why(deployments.apps, shop, web): the template's references",
		`SELECT relation, name, op FROM kube_cdc.why('deployments.apps', 'shop', 'web') WHERE relation <> 'self'`,
		"configmap cfg create", "configmap cfg update", "service web create", "service gone delete",
		"ingress front create", "ingress gone delete")
}

package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// relRows is a query's rows as lines of text columns, "<null>" for NULL, sorted.
func relRows(t *testing.T, dsn, sql string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), sql, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var cols []string
		for _, raw := range rows.RawValues() {
			if raw == nil {
				cols = append(cols, "<null>")
			} else {
				cols = append(cols, string(raw))
			}
		}
		out = append(out, strings.Join(cols, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func checkRel(t *testing.T, dsn, what, sql string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := relRows(t, dsn, sql); !slices.Equal(got, want) {
		t.Errorf("%s:\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// The edges of each relation on hand-made objects (every uid is "uid-<name>";
// writeObject also writes a deleted object "gone" of each resource, which no view shows).
func TestTheRelationViewsResolveEachEndAndLineageFollowsControllersOnly(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	res := func(group, resource, kind string, namespaced bool) change.Resource {
		return change.Resource{Group: group, Version: "v1", Resource: resource, Kind: kind, Namespaced: namespaced}
	}
	pods, nodes := res("", "pods", "Pod", true), res("", "nodes", "Node", false)
	writeObject(t, s, nodes, "", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`)
	writeObject(t, s, res("apps", "deployments", "Deployment", true), "shop", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)
	writeObject(t, s, res("apps", "replicasets", "ReplicaSet", true), "shop", `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1",
		"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"uid-web","controller":true}]}}`)
	writeObject(t, s, res("", "configmaps", "ConfigMap", true), "shop", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}`)
	// A pod of the ReplicaSet, also owned (not controlled) by a ConfigMap, with a claim,
	// a generic ephemeral volume and a volume that is no claim.
	writeObject(t, s, pods, "shop", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1-a",
		"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","uid":"uid-web-1","controller":true,"blockOwnerDeletion":true},
		                   {"apiVersion":"v1","kind":"ConfigMap","name":"cfg","uid":"uid-cfg"}]},
		"spec":{"nodeName":"n1","volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data","readOnly":true}},
		                                   {"name":"scratch","ephemeral":{"volumeClaimTemplate":{}}},{"name":"conf","configMap":{"name":"cfg"}}]},
		"status":{"phase":"Running","podIP":"10.0.0.7"}}`)
	// A mirror pod, owned by its (cluster-scoped) Node; a pod whose ReplicaSet is gone;
	// an unscheduled pod.
	writeObject(t, s, pods, "shop", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"mirror",
		"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n1","uid":"uid-n1","controller":true}]},"spec":{"nodeName":"n1"}}`)
	writeObject(t, s, pods, "shop", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"orphan",
		"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"old","uid":"uid-old","controller":true}]}}`)
	writeObject(t, s, pods, "shop", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pending"},"spec":{}}`)
	writeObject(t, s, res("", "persistentvolumeclaims", "PersistentVolumeClaim", true), "shop", `{"apiVersion":"v1","kind":"PersistentVolumeClaim",
		"metadata":{"name":"data"},"spec":{"volumeName":"pv1","storageClassName":"fast"},"status":{"phase":"Bound"}}`)
	writeObject(t, s, res("", "persistentvolumeclaims", "PersistentVolumeClaim", true), "shop", `{"apiVersion":"v1","kind":"PersistentVolumeClaim",
		"metadata":{"name":"web-1-a-scratch"},"spec":{"volumeName":"pv2","storageClassName":"fast"},"status":{"phase":"Bound"}}`)
	writeObject(t, s, res("", "persistentvolumes", "PersistentVolume", false), "", `{"apiVersion":"v1","kind":"PersistentVolume",
		"metadata":{"name":"pv1"},"spec":{"storageClassName":"fast"}}`)
	writeObject(t, s, res("", "persistentvolumes", "PersistentVolume", false), "", `{"apiVersion":"v1","kind":"PersistentVolume",
		"metadata":{"name":"pv2"},"spec":{}}`)
	writeObject(t, s, res("storage.k8s.io", "storageclasses", "StorageClass", false), "", `{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass",
		"metadata":{"name":"fast"},"provisioner":"example.com/fast"}`)
	writeObject(t, s, res("", "services", "Service", true), "shop", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}}`)
	writeObject(t, s, res("", "services", "Service", true), "shop", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"idle"}}`)
	writeObject(t, s, res("discovery.k8s.io", "endpointslices", "EndpointSlice", true), "shop", `{"apiVersion":"discovery.k8s.io/v1",
		"kind":"EndpointSlice","metadata":{"name":"web-x1","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4",
		"endpoints":[{"addresses":["10.0.0.7"],"nodeName":"n1","targetRef":{"kind":"Pod","name":"web-1-a","namespace":"shop","uid":"uid-web-1-a"}},
		             {"addresses":["10.0.0.8"],"conditions":{"ready":false},"targetRef":{"kind":"Pod","name":"web-1-b","uid":"uid-web-1-b"}}]}`)
	writeObject(t, s, res("networking.k8s.io", "ingresses", "Ingress", true), "shop", `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress",
		"metadata":{"name":"shop"},"spec":{"ingressClassName":"nginx","defaultBackend":{"service":{"name":"web","port":{"number":80}}},
		"rules":[{"host":"shop.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"name":"http"}}}},
		                                                {"path":"/img","pathType":"Exact","backend":{"resource":{"kind":"Bucket","name":"img"}}}]}}]}}`)

	checkRel(t, dsn, "owners", `SELECT name, owner_api_group, owner_kind, owner_name, owner_uid, owner_resource, owner_namespace, controller, block_owner_deletion
		FROM kube_cdc.owners`,
		"web-1 apps Deployment web uid-web deployments shop t f",
		"web-1-a apps ReplicaSet web-1 uid-web-1 replicasets shop t t",
		"web-1-a  ConfigMap cfg uid-cfg configmaps shop f f",
		"mirror  Node n1 uid-n1 nodes  t f",
		"orphan apps ReplicaSet old uid-old <null> <null> t f")
	checkRel(t, dsn, "pod_placement", `SELECT pod, node, node_uid, phase FROM kube_cdc.pod_placement`,
		"web-1-a n1 uid-n1 Running", "mirror n1 uid-n1 <null>", "orphan <null> <null> <null>", "pending <null> <null> <null>")
	checkRel(t, dsn, "pod_storage", `SELECT pod, volume, claim, ephemeral, read_only, claim_uid, claim_phase, persistent_volume,
		persistent_volume_uid, storage_class, storage_class_uid, provisioner FROM kube_cdc.pod_storage`,
		"web-1-a data data f t uid-data Bound pv1 uid-pv1 fast uid-fast example.com/fast",
		"web-1-a scratch web-1-a-scratch t f uid-web-1-a-scratch Bound pv2 uid-pv2 fast uid-fast example.com/fast")
	checkRel(t, dsn, "service_backends", `SELECT service, endpointslice, address, ready, node, target_name, pod, pod_uid FROM kube_cdc.service_backends`,
		"web web-x1 10.0.0.7 t n1 web-1-a web-1-a uid-web-1-a",
		"web web-x1 10.0.0.8 f <null> web-1-b <null> <null>",
		"idle <null> <null> <null> <null> <null> <null> <null>")
	checkRel(t, dsn, "ingress_routes", `SELECT ingress, ingress_class, host, path, path_type, default_backend, service, service_port, service_uid
		FROM kube_cdc.ingress_routes`,
		"shop nginx shop.example / Prefix f web http uid-web",
		"shop nginx shop.example /img Exact f <null> <null> <null>",
		"shop nginx <null> <null> <null> t web 80 uid-web")
	lineage := `SELECT depth, api_group, resource, kind, namespace, name, uid, found FROM kube_cdc.lineage(`
	checkRel(t, dsn, "lineage of a pod", lineage+`'pods', 'shop', 'web-1-a')`,
		"0  pods Pod shop web-1-a uid-web-1-a t", "1 apps replicasets ReplicaSet shop web-1 uid-web-1 t",
		"2 apps deployments Deployment shop web uid-web t")
	checkRel(t, dsn, "lineage of a mirror pod", lineage+`'pods', 'shop', 'mirror', 'test')`,
		"0  pods Pod shop mirror uid-mirror t", "1  nodes Node  n1 uid-n1 t")
	checkRel(t, dsn, "lineage of an orphan", lineage+`'pods', 'shop', 'orphan')`,
		"0  pods Pod shop orphan uid-orphan t", "1 apps <null> ReplicaSet <null> old uid-old f")
	checkRel(t, dsn, "lineage of a ReplicaSet", lineage+`'replicasets.apps', 'shop', 'web-1')`,
		"0 apps replicasets ReplicaSet shop web-1 uid-web-1 t", "1 apps deployments Deployment shop web uid-web t")
	checkRel(t, dsn, "lineage of a deleted object", lineage+`'pods', 'shop', 'gone')`)
	checkRel(t, dsn, "lineage in another cluster", lineage+`'pods', 'shop', 'web-1-a', 'elsewhere')`)
}

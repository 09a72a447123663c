package columns

import (
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/health"
)

// Objects as the apiserver serves them, trimmed; each row is what kubectl get printed
// for such an object at the moment at (AGE and the restart's "ago" count from at).
func TestOfPrintsEachKindAsKubectlGetDidAtTheMoment(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	meta := `"metadata":{"name":"x","creationTimestamp":"2026-11-28T11:55:00Z"`
	for _, tc := range []struct {
		name, group, resource, object string
		want                          string // the cells' texts joined by " | "
	}{
		{"a running ready pod", "", "pods", `{` + meta + `},"spec":{"nodeName":"node-1","containers":[{"name":"app","image":"shop/checkout:v1"}]},
			"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
			"containerStatuses":[{"name":"app","ready":true,"restartCount":0,"state":{"running":{}}}]}}`,
			"1/1 | Running | 0 | 5m | node-1 | shop/checkout:v1"},
		{"a new pod of a rollout, its container being created", "", "pods", `{` + meta + `},"spec":{"nodeName":"node-2","containers":[{"name":"app","image":"shop/checkout:v2"},{"name":"proxy","image":"envoy:1"}]},
			"status":{"phase":"Pending","containerStatuses":[{"name":"app","ready":false,"state":{"waiting":{"reason":"ContainerCreating"}}},
			{"name":"proxy","ready":true,"state":{"running":{}}}]}}`,
			"1/2 | ContainerCreating | 0 | 5m | node-2 | shop/checkout:v2,envoy:1"},
		{"a crash-looping pod, restarted 2 minutes before the moment", "", "pods", `{` + meta + `},"spec":{"containers":[{"name":"app","image":"a"}]},
			"status":{"phase":"Running","containerStatuses":[{"name":"app","restartCount":4,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
			"lastState":{"terminated":{"exitCode":1,"reason":"Error","finishedAt":"2026-11-28T11:58:00Z"}}}]}}`,
			"0/1 | CrashLoopBackOff | 4 (2m ago) | 5m | <none> | a"},
		{"a pod in its second init container", "", "pods", `{` + meta + `},"spec":{"initContainers":[{"name":"a"},{"name":"b"}],"containers":[{"name":"app","image":"a"}]},
			"status":{"phase":"Pending","initContainerStatuses":[{"name":"a","state":{"terminated":{"exitCode":0}}},{"name":"b","state":{"running":{}}}]}}`,
			"0/1 | Init:1/2 | 0 | 5m | <none> | a"},
		{"a pod being deleted", "", "pods", `{"metadata":{"name":"x","creationTimestamp":"2026-11-25T12:00:00Z","deletionTimestamp":"2026-11-28T11:59:00Z"},
			"spec":{"containers":[{"name":"app","image":"a"}]},"status":{"phase":"Running","containerStatuses":[{"name":"app","ready":true,"state":{"running":{}}}]}}`,
			"1/1 | Terminating | 0 | 3d | <none> | a"},
		{"a deployment mid-rollout", "apps", "deployments", `{` + meta + `,"generation":2},"spec":{"replicas":3},
			"status":{"observedGeneration":2,"replicas":4,"updatedReplicas":1,"readyReplicas":2,"availableReplicas":2}}`,
			"2/3 | 1 | 2 | 5m"},
		{"a replicaset", "apps", "replicasets", `{` + meta + `},"spec":{"replicas":2},"status":{"replicas":2,"readyReplicas":1}}`, "2 | 2 | 1 | 5m"},
		{"a statefulset", "apps", "statefulsets", `{` + meta + `},"spec":{"replicas":3},"status":{"readyReplicas":3}}`, "3/3 | 5m"},
		{"a daemonset", "apps", "daemonsets", `{` + meta + `},"status":{"desiredNumberScheduled":3,"currentNumberScheduled":3,"numberReady":2,"updatedNumberScheduled":1,"numberAvailable":2}}`,
			"3 | 3 | 2 | 1 | 2 | 5m"},
		{"a NodePort service", "", "services", `{` + meta + `},"spec":{"type":"NodePort","clusterIP":"10.0.0.7","ports":[{"port":80,"nodePort":30080},{"port":53,"protocol":"UDP"}]}}`,
			"NodePort | 10.0.0.7 | 80:30080/TCP,53/UDP | 5m"},
		{"a cordoned control-plane node", "", "nodes", `{` + meta + `,"labels":{"node-role.kubernetes.io/control-plane":""}},"spec":{"unschedulable":true},
			"status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.35.0"}}}`,
			"Ready,SchedulingDisabled | control-plane | 5m | v1.35.0"},
		{"a job", "batch", "jobs", `{` + meta + `},"spec":{"completions":3},"status":{"succeeded":1}}`, "1/3 | 5m"},
		{"a configmap", "", "configmaps", `{` + meta + `},"data":{"a":"1","b":"2"},"binaryData":{"c":"AA=="}}`, "3 | 5m"},
		{"a secret as the sink holds it (digests, not base64)", "", "secrets", `{` + meta + `},"type":"Opaque","data":{"password":"hmac-sha256:0f1e"}}`,
			"Opaque | 1 | 5m"},
		{"a custom resource", "example.com", "widgets", `{` + meta + `,"labels":{"b":"2","a":"1"}}}`, "5m | a=1,b=2"},
		{"an object without a creationTimestamp", "example.com", "widgets", `{"metadata":{"name":"x"}}`, "<unknown> | <none>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row, err := Of(tc.group, tc.resource, []byte(tc.object), at)
			if err != nil {
				t.Fatal(err)
			}
			texts := make([]string, len(row.Cells))
			for i, c := range row.Cells {
				texts[i] = c.Text
			}
			if got := strings.Join(texts, " | "); got != tc.want {
				t.Errorf("row %q, want %q", got, tc.want)
			}
			if n := len(For(tc.group, tc.resource)); n != len(row.Cells) {
				t.Errorf("%d cells under %d columns %v", len(row.Cells), n, For(tc.group, tc.resource))
			}
		})
	}
}

func TestALongValueIsCutVisiblyAndKeptWhole(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("k", 80)
	row, err := Of("example.com", "widgets", []byte(`{"metadata":{"name":"x","labels":{"`+long+`":"v"}}}`), at)
	if err != nil {
		t.Fatal(err)
	}
	labels := row.Cells[1]
	if !strings.HasSuffix(labels.Text, "…") || len([]rune(labels.Text)) != labelsWidth || labels.Full != long+"=v" {
		t.Errorf("labels cell %+v: want %d runes ending in … and the whole value kept", labels, labelsWidth)
	}
}

func TestARowCarriesTheObjectsHealthAndAnUndecodableObjectIsAnError(t *testing.T) {
	at := time.Now()
	row, err := Of("", "pods", []byte(`{"metadata":{"name":"x"},"status":{"phase":"Running","containerStatuses":[{"name":"app","restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}`), at)
	if err != nil || row.Health.State != health.Failed {
		t.Errorf("a crash-looping pod's row: health %v (%v), want failed", row.Health, err)
	}
	if _, err := Of("apps", "deployments", []byte(`{"spec":{"replicas":"three"}}`), at); err == nil || !strings.Contains(err.Error(), "deployments.apps") {
		t.Errorf("an undecodable deployment: %v, want an error naming deployments.apps", err)
	}
}

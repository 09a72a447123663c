package health

import "testing"

// Objects as the apiserver serves them (status as kubelets and controllers write it),
// trimmed to what the rules read plus a little around it.
func TestOfReadsEachKindsStatusAsAPersonWould(t *testing.T) {
	for _, tc := range []struct {
		name, group, resource, object string
		want                          Health
	}{
		{"a running ready pod", "", "pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"status":{"phase":"Running",
			"conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"},{"type":"PodScheduled","status":"True"}],
			"containerStatuses":[{"name":"app","ready":true,"restartCount":0,"state":{"running":{"startedAt":"2026-11-28T10:00:00Z"}}}]}}`,
			Health{OK, "running, ready"}},
		{"a ready pod that restarted once", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Running",
			"conditions":[{"type":"Ready","status":"True"}],
			"containerStatuses":[{"name":"app","ready":true,"restartCount":1,"state":{"running":{}},"lastState":{"terminated":{"exitCode":1,"reason":"Error"}}}]}}`,
			Health{OK, "running, ready, 1 restart"}},
		{"a crash-looping pod", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Running",
			"conditions":[{"type":"Ready","status":"False","reason":"ContainersNotReady"}],
			"containerStatuses":[{"name":"app","ready":false,"restartCount":4,
			  "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 1m20s restarting failed container=app"}},
			  "lastState":{"terminated":{"exitCode":1,"reason":"Error"}}}]}}`,
			Health{Failed, "CrashLoopBackOff: container app, 4 restarts"}},
		{"a pod crash-looping after OOM kills", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Running",
			"containerStatuses":[{"name":"app","restartCount":2,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
			  "lastState":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}]}}`,
			Health{Failed, "CrashLoopBackOff: container app OOMKilled, 2 restarts"}},
		{"a running pod OOM-killed once, back up", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Running",
			"conditions":[{"type":"Ready","status":"True"}],
			"containerStatuses":[{"name":"side","restartCount":0,"state":{"running":{}}},
			  {"name":"app","restartCount":1,"state":{"running":{}},"lastState":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}]}}`,
			Health{Degraded, "container app OOMKilled, 1 restart"}},
		{"an init container that cannot pull its image", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Pending",
			"initContainerStatuses":[{"name":"init","restartCount":0,"state":{"waiting":{"reason":"ImagePullBackOff"}}}],
			"containerStatuses":[{"name":"app","restartCount":0,"state":{"waiting":{"reason":"PodInitializing"}}}]}}`,
			Health{Failed, "ImagePullBackOff: container init"}},
		{"an unschedulable pod", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Pending",
			"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes are available: 3 Insufficient memory."}]}}`,
			Health{Degraded, "unschedulable: 0/3 nodes are available: 3 Insufficient memory."}},
		{"a pending pod", "", "pods", `{"metadata":{"name":"web"},"spec":{},"status":{"phase":"Pending"}}`, Health{Progressing, "pending"}},
		{"a pod not ready yet", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}],
			"containerStatuses":[{"name":"app","restartCount":0,"state":{"running":{}}}]}}`, Health{Progressing, "running, not ready yet"}},
		{"a pod evicted", "", "pods", `{"metadata":{"name":"web"},"status":{"phase":"Failed","reason":"Evicted","message":"The node was low on resource: memory."}}`,
			Health{Failed, "Evicted"}},
		{"a pod that completed", "", "pods", `{"metadata":{"name":"job-x"},"status":{"phase":"Succeeded"}}`, Health{OK, "completed"}},
		{"a pod being deleted", "", "pods", `{"metadata":{"name":"web","deletionTimestamp":"2026-11-28T10:00:00Z"},"status":{"phase":"Running"}}`,
			Health{Progressing, "terminating"}},
		{"a pod with no status yet", "", "pods", `{"metadata":{"name":"web"}}`, Health{Unknown, "no phase reported"}},

		{"an available deployment", "apps", "deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","generation":3},
			"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,
			"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"},
			              {"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"}]}}`,
			Health{OK, "3 of 3 available"}},
		{"a deployment mid-rollout", "apps", "deployments", `{"metadata":{"name":"web","generation":4},"spec":{"replicas":3},
			"status":{"observedGeneration":4,"replicas":4,"updatedReplicas":1,"readyReplicas":3,"availableReplicas":3,
			"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"True","reason":"ReplicaSetUpdated"}]}}`,
			Health{Progressing, "rolling out: 1 of 3 updated"}},
		{"a deployment whose new generation is not observed yet", "apps", "deployments", `{"metadata":{"name":"web","generation":5},"spec":{"replicas":3},
			"status":{"observedGeneration":4,"replicas":3,"updatedReplicas":3,"availableReplicas":3}}`,
			Health{Progressing, "generation 5 not observed yet (at 4)"}},
		{"a deployment past its progress deadline", "apps", "deployments", `{"metadata":{"name":"web","generation":4},"spec":{"replicas":3},
			"status":{"observedGeneration":4,"replicas":4,"updatedReplicas":1,"availableReplicas":3,
			"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded",
			  "message":"ReplicaSet \"web-5d9\" has timed out progressing."}]}}`,
			Health{Failed, `ProgressDeadlineExceeded: ReplicaSet "web-5d9" has timed out progressing.`}},
		{"a deployment that cannot create pods", "apps", "deployments", `{"metadata":{"name":"web","generation":1},"spec":{"replicas":2},
			"status":{"observedGeneration":1,"conditions":[{"type":"ReplicaFailure","status":"True","reason":"FailedCreate","message":"pods \"web-\" is forbidden: exceeded quota"}]}}`,
			Health{Degraded, `FailedCreate: pods "web-" is forbidden: exceeded quota`}},
		{"an unavailable deployment", "apps", "deployments", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":2},
			"status":{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"availableReplicas":0,"unavailableReplicas":2,
			"conditions":[{"type":"Available","status":"False","reason":"MinimumReplicasUnavailable"},{"type":"Progressing","status":"True"}]}}`,
			Health{Degraded, "unavailable: 0 of 2 available"}},
		{"a deployment whose new pods are starting", "apps", "deployments", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":2},
			"status":{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"availableReplicas":1,
			"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"True"}]}}`,
			Health{Progressing, "1 of 2 available"}},

		{"a ready statefulset", "apps", "statefulsets", `{"metadata":{"name":"db","generation":1},"spec":{"replicas":3},
			"status":{"observedGeneration":1,"replicas":3,"readyReplicas":3,"currentReplicas":3,"updatedReplicas":3,
			"currentRevision":"db-7c","updateRevision":"db-7c","availableReplicas":3}}`, Health{OK, "3 of 3 ready"}},
		{"a statefulset rolling out", "apps", "statefulsets", `{"metadata":{"name":"db","generation":2},"spec":{"replicas":3},
			"status":{"observedGeneration":2,"replicas":3,"readyReplicas":3,"currentReplicas":2,"updatedReplicas":1,
			"currentRevision":"db-7c","updateRevision":"db-9f"}}`, Health{Progressing, "rolling out: 1 of 3 updated"}},
		{"a statefulset with a replica down", "apps", "statefulsets", `{"metadata":{"name":"db","generation":1},"spec":{"replicas":3},
			"status":{"observedGeneration":1,"replicas":3,"readyReplicas":2,"currentRevision":"db-7c","updateRevision":"db-7c","updatedReplicas":3}}`,
			Health{Degraded, "2 of 3 ready"}},

		{"a daemonset on every node", "apps", "daemonsets", `{"metadata":{"name":"agent","generation":1},"status":{"observedGeneration":1,
			"currentNumberScheduled":4,"desiredNumberScheduled":4,"numberAvailable":4,"numberReady":4,"updatedNumberScheduled":4,"numberMisscheduled":0}}`,
			Health{OK, "4 of 4 nodes available"}},
		{"a daemonset unavailable on a node", "apps", "daemonsets", `{"metadata":{"name":"agent","generation":1},"status":{"observedGeneration":1,
			"desiredNumberScheduled":4,"numberAvailable":3,"numberUnavailable":1,"updatedNumberScheduled":4}}`,
			Health{Degraded, "1 of 4 nodes unavailable"}},

		{"a ready node", "", "nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"conditions":[
			{"type":"MemoryPressure","status":"False"},{"type":"DiskPressure","status":"False"},{"type":"PIDPressure","status":"False"},
			{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`, Health{OK, "ready"}},
		{"a node whose kubelet stopped posting", "", "nodes", `{"metadata":{"name":"n1"},"status":{"conditions":[
			{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}}`,
			Health{Failed, "NotReady: status unknown (NodeStatusUnknown)"}},
		{"a node not ready", "", "nodes", `{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady"}]}}`,
			Health{Failed, "NotReady: KubeletNotReady"}},
		{"a node under disk pressure", "", "nodes", `{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"DiskPressure","status":"True"},
			{"type":"Ready","status":"True"}]}}`, Health{Degraded, "ready, DiskPressure"}},
		{"a cordoned node", "", "nodes", `{"metadata":{"name":"n1"},"spec":{"unschedulable":true},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			Health{OK, "ready, cordoned"}},

		{"a failed job", "batch", "jobs", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"migrate"},"status":{"failed":7,
			"conditions":[{"type":"FailureTarget","status":"True"},{"type":"Failed","status":"True","reason":"BackoffLimitExceeded","message":"Job has reached the specified backoff limit"}]}}`,
			Health{Failed, "BackoffLimitExceeded: Job has reached the specified backoff limit"}},
		{"a complete job", "batch", "jobs", `{"metadata":{"name":"migrate"},"status":{"succeeded":1,"conditions":[{"type":"Complete","status":"True"}]}}`,
			Health{OK, "complete: 1 succeeded"}},
		{"a job retrying failed pods", "batch", "jobs", `{"metadata":{"name":"migrate"},"status":{"active":1,"failed":2}}`,
			Health{Degraded, "2 pods failed, 1 active"}},
		{"a running job", "batch", "jobs", `{"metadata":{"name":"migrate"},"status":{"active":1}}`, Health{Progressing, "1 active, 0 succeeded"}},

		{"a resource without a rule", "", "configmaps", `{"metadata":{"name":"cfg"}}`, Health{Unknown, "no health rule for configmaps"}},
		{"a custom resource", "example.com", "widgets", `{"metadata":{"name":"w"}}`, Health{Unknown, "no health rule for widgets.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Of(tc.group, tc.resource, []byte(tc.object))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Of = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOfRefusesAnObjectItCannotDecode(t *testing.T) {
	if h, err := Of("", "pods", []byte(`{"status":{"phase":7}}`)); err == nil || h.State != Unknown {
		t.Errorf("Of(an undecodable pod) = %v, %v; want unknown and an error", h, err)
	}
}

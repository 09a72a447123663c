package health

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// stuck are the container waiting reasons that do not heal without a change: the pod
// has failed even while its phase says Pending or Running.
var stuck = map[string]bool{
	"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

func podHealth(p *corev1.Pod) Health {
	st := p.Status
	statuses := append(append([]corev1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...)
	var restarts int32
	oom := ""
	for _, c := range statuses {
		restarts += c.RestartCount
		if t := c.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" && oom == "" {
			oom = c.Name
		}
		if t := c.State.Terminated; t != nil && t.Reason == "OOMKilled" && oom == "" {
			oom = c.Name
		}
	}
	for _, c := range statuses {
		if w := c.State.Waiting; w != nil && stuck[w.Reason] {
			reason := fmt.Sprintf("%s: container %s", w.Reason, c.Name)
			if c.Name == oom {
				reason += " OOMKilled"
			}
			return Health{Failed, reason + restartsNote(c.RestartCount)}
		}
	}
	switch st.Phase {
	case corev1.PodFailed:
		return Health{Failed, nonEmpty(st.Reason, "phase Failed") + oomNote(oom)}
	case corev1.PodSucceeded:
		return Health{OK, "completed"}
	case corev1.PodPending:
		for _, c := range st.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return Health{Degraded, withMessage("unschedulable", c.Message)}
			}
		}
		return Health{Progressing, "pending"}
	case corev1.PodRunning:
		if oom != "" {
			return Health{Degraded, "container " + oom + " OOMKilled" + restartsNote(restarts)}
		}
		if podReady(p) {
			return Health{OK, "running, ready" + restartsNote(restarts)}
		}
		if restarts > 0 {
			return Health{Degraded, "running, not ready" + restartsNote(restarts)}
		}
		return Health{Progressing, "running, not ready yet"}
	}
	return Health{Unknown, nonEmpty(string(st.Phase), "no phase reported")}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentHealth(d *appsv1.Deployment) Health {
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return Health{Progressing, fmt.Sprintf("generation %d not observed yet (at %d)", d.Generation, st.ObservedGeneration)}
	}
	want := replicas(d.Spec.Replicas)
	for _, c := range st.Conditions {
		switch {
		case c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse:
			return Health{Failed, withMessage(nonEmpty(c.Reason, "not progressing"), c.Message)}
		case c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue:
			return Health{Degraded, withMessage(nonEmpty(c.Reason, "replica failure"), c.Message)}
		}
	}
	if st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas {
		return Health{Progressing, fmt.Sprintf("rolling out: %d of %d updated", st.UpdatedReplicas, want)}
	}
	// Every replica updated: fewer available is the Available condition's call (below
	// the minimum, maxUnavailable) or pods still starting.
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionFalse {
			return Health{Degraded, fmt.Sprintf("unavailable: %d of %d available", st.AvailableReplicas, want)}
		}
	}
	if st.AvailableReplicas < want {
		return Health{Progressing, fmt.Sprintf("%d of %d available", st.AvailableReplicas, want)}
	}
	return Health{OK, fmt.Sprintf("%d of %d available", st.AvailableReplicas, want)}
}

func statefulSetHealth(s *appsv1.StatefulSet) Health {
	st := s.Status
	if st.ObservedGeneration < s.Generation {
		return Health{Progressing, fmt.Sprintf("generation %d not observed yet (at %d)", s.Generation, st.ObservedGeneration)}
	}
	want := replicas(s.Spec.Replicas)
	if st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision && st.UpdatedReplicas < want {
		return Health{Progressing, fmt.Sprintf("rolling out: %d of %d updated", st.UpdatedReplicas, want)}
	}
	if st.Replicas < want {
		return Health{Progressing, fmt.Sprintf("scaling: %d of %d created", st.Replicas, want)}
	}
	if st.ReadyReplicas < want {
		return Health{Degraded, fmt.Sprintf("%d of %d ready", st.ReadyReplicas, want)}
	}
	return Health{OK, fmt.Sprintf("%d of %d ready", st.ReadyReplicas, want)}
}

func daemonSetHealth(d *appsv1.DaemonSet) Health {
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return Health{Progressing, fmt.Sprintf("generation %d not observed yet (at %d)", d.Generation, st.ObservedGeneration)}
	}
	switch {
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return Health{Progressing, fmt.Sprintf("rolling out: %d of %d nodes updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)}
	case st.NumberUnavailable > 0:
		return Health{Degraded, fmt.Sprintf("%d of %d nodes unavailable", st.NumberUnavailable, st.DesiredNumberScheduled)}
	case st.NumberMisscheduled > 0:
		return Health{Degraded, fmt.Sprintf("%d misscheduled", st.NumberMisscheduled)}
	}
	return Health{OK, fmt.Sprintf("%d of %d nodes available", st.NumberAvailable, st.DesiredNumberScheduled)}
}

func nodeHealth(n *corev1.Node) Health {
	var pressure []string
	ready := (*corev1.NodeCondition)(nil)
	for i, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			ready = &n.Status.Conditions[i]
		case corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable:
			if c.Status == corev1.ConditionTrue {
				pressure = append(pressure, string(c.Type))
			}
		}
	}
	switch {
	case ready == nil:
		return Health{Unknown, "no Ready condition"}
	case ready.Status == corev1.ConditionFalse:
		return Health{Failed, "NotReady: " + nonEmpty(ready.Reason, "Ready False")}
	case ready.Status != corev1.ConditionTrue:
		return Health{Failed, "NotReady: status unknown (" + nonEmpty(ready.Reason, "no heartbeat") + ")"}
	case len(pressure) > 0:
		return Health{Degraded, "ready, " + strings.Join(pressure, ", ")}
	case n.Spec.Unschedulable:
		return Health{OK, "ready, cordoned"}
	}
	return Health{OK, "ready"}
}

func jobHealth(j *batchv1.Job) Health {
	st := j.Status
	for _, c := range st.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailed:
			return Health{Failed, withMessage(nonEmpty(c.Reason, "failed"), c.Message)}
		case batchv1.JobComplete:
			return Health{OK, fmt.Sprintf("complete: %d succeeded", st.Succeeded)}
		case batchv1.JobSuspended:
			return Health{OK, "suspended"}
		}
	}
	if st.Failed > 0 {
		return Health{Degraded, fmt.Sprintf("%d pods failed, %d active", st.Failed, st.Active)}
	}
	return Health{Progressing, fmt.Sprintf("%d active, %d succeeded", st.Active, st.Succeeded)}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func restartsNote(n int32) string {
	switch n {
	case 0:
		return ""
	case 1:
		return ", 1 restart"
	}
	return fmt.Sprintf(", %d restarts", n)
}

func oomNote(container string) string {
	if container == "" {
		return ""
	}
	return ", container " + container + " OOMKilled"
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// withMessage is reason, then the first line of message (at most 120 bytes) when there
// is one.
func withMessage(reason, message string) string {
	message, _, _ = strings.Cut(strings.TrimSpace(message), "\n")
	if message == "" {
		return reason
	}
	if len(message) > 120 {
		message = message[:117] + "..."
	}
	return reason + ": " + message
}

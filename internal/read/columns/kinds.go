package columns

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// podRow follows kubectl's pod printer: STATUS is the phase unless a reason says more
// (an init container's progress, a container's waiting or terminated reason,
// Terminating), READY counts ready running containers, RESTARTS adds when the last
// restart was, before the moment.
func podRow(p *corev1.Pod, at time.Time) []Cell {
	st := p.Status
	reason := string(st.Phase)
	if st.Reason != "" {
		reason = st.Reason
	}
	var restarts int32
	var lastRestart time.Time
	noteRestart := func(c corev1.ContainerStatus) {
		restarts += c.RestartCount
		if t := c.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
	}
	initializing := false
	for i, c := range st.InitContainerStatuses {
		noteRestart(c)
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case c.State.Terminated != nil:
			t := c.State.Terminated
			switch {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}
	ready := 0
	if !initializing {
		restarts, lastRestart = 0, time.Time{}
		running := false
		for i := len(st.ContainerStatuses) - 1; i >= 0; i-- {
			c := st.ContainerStatuses[i]
			noteRestart(c)
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				running = true
				ready++
			}
		}
		if reason == "Completed" && running {
			reason = "NotReady"
			for _, c := range st.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					reason = "Running"
				}
			}
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
		if st.Reason == "NodeLost" {
			reason = "Unknown"
		}
	}
	restartText := fmt.Sprint(restarts)
	if restarts > 0 && !lastRestart.IsZero() && !lastRestart.After(at) {
		restartText += " (" + duration.HumanDuration(at.Sub(lastRestart)) + " ago)"
	}
	images := make([]string, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		images[i] = c.Image
	}
	return []Cell{
		text(fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers))),
		text(orNone(reason)),
		text(restartText),
		age(p.CreationTimestamp, at),
		text(orNone(p.Spec.NodeName)),
		cut(orNone(strings.Join(images, ",")), imageWidth),
	}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func deploymentRow(d *appsv1.Deployment, at time.Time) []Cell {
	st := d.Status
	return []Cell{text(fmt.Sprintf("%d/%d", st.ReadyReplicas, replicas(d.Spec.Replicas))), num(st.UpdatedReplicas),
		num(st.AvailableReplicas), age(d.CreationTimestamp, at)}
}

func replicaSetRow(r *appsv1.ReplicaSet, at time.Time) []Cell {
	return []Cell{num(replicas(r.Spec.Replicas)), num(r.Status.Replicas), num(r.Status.ReadyReplicas), age(r.CreationTimestamp, at)}
}

func statefulSetRow(s *appsv1.StatefulSet, at time.Time) []Cell {
	return []Cell{text(fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, replicas(s.Spec.Replicas))), age(s.CreationTimestamp, at)}
}

func daemonSetRow(d *appsv1.DaemonSet, at time.Time) []Cell {
	st := d.Status
	return []Cell{num(st.DesiredNumberScheduled), num(st.CurrentNumberScheduled), num(st.NumberReady),
		num(st.UpdatedNumberScheduled), num(st.NumberAvailable), age(d.CreationTimestamp, at)}
}

func serviceRow(s *corev1.Service, at time.Time) []Cell {
	typ := s.Spec.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	ports := make([]string, len(s.Spec.Ports))
	for i, p := range s.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if p.NodePort > 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto)
		} else {
			ports[i] = fmt.Sprintf("%d/%s", p.Port, proto)
		}
	}
	return []Cell{text(string(typ)), text(orNone(s.Spec.ClusterIP)), cut(orNone(strings.Join(ports, ",")), listWidth), age(s.CreationTimestamp, at)}
}

const (
	roleLabelPrefix = "node-role.kubernetes.io/"
	roleLabel       = "kubernetes.io/role"
)

func nodeRow(n *corev1.Node, at time.Time) []Cell {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			switch c.Status {
			case corev1.ConditionTrue:
				status = "Ready"
			case corev1.ConditionFalse:
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	var roles []string
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, roleLabelPrefix) && k != roleLabelPrefix:
			roles = append(roles, strings.TrimPrefix(k, roleLabelPrefix))
		case k == roleLabel && v != "":
			roles = append(roles, v)
		}
	}
	sort.Strings(roles)
	return []Cell{text(status), cut(orNone(strings.Join(roles, ",")), listWidth), age(n.CreationTimestamp, at), text(orNone(n.Status.NodeInfo.KubeletVersion))}
}

func jobRow(j *batchv1.Job, at time.Time) []Cell {
	var completions string
	switch {
	case j.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	case j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	default:
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
	}
	return []Cell{text(completions), age(j.CreationTimestamp, at)}
}

func configMapRow(c *corev1.ConfigMap, at time.Time) []Cell {
	return []Cell{num(len(c.Data) + len(c.BinaryData)), age(c.CreationTimestamp, at)}
}

// secret is a Secret as the sink holds it: each value of data is a keyed digest, not
// base64, so corev1.Secret would not decode it; the keys are what kubectl counts.
type secret struct {
	metav1.ObjectMeta `json:"metadata"`
	Type              string                     `json:"type"`
	Data              map[string]json.RawMessage `json:"data"`
	StringData        map[string]json.RawMessage `json:"stringData"`
}

func secretRow(s *secret, at time.Time) []Cell {
	return []Cell{text(string(s.Type)), num(len(s.Data) + len(s.StringData)), age(s.CreationTimestamp, at)}
}

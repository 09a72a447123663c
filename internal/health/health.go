package health

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is an object's health.
type State string

// The states, from good to bad; Unknown is outside the order.
const (
	OK          State = "ok"
	Progressing State = "progressing"
	Degraded    State = "degraded"
	Failed      State = "failed"
	Unknown     State = "unknown"
)

// Health is a State and the short reason for it ("CrashLoopBackOff: container app, 4
// restarts").
type Health struct {
	State  State  `json:"state"`
	Reason string `json:"reason"`
}

func (h Health) String() string { return string(h.State) + ": " + h.Reason }

// rule computes the health of one resource's object from its JSON.
type rule func(object []byte) (Health, error)

var rules = map[[2]string]rule{
	{"", "pods"}:             decoded(podHealth),
	{"apps", "deployments"}:  decoded(deploymentHealth),
	{"apps", "statefulsets"}: decoded(statefulSetHealth),
	{"apps", "daemonsets"}:   decoded(daemonSetHealth),
	{"", "nodes"}:            decoded(nodeHealth),
	{"batch", "jobs"}:        decoded(jobHealth),
}

// Of is the health of object, an object of the resource (group, plural resource) as the
// change log stores it. Resources without a rule are Unknown.
func Of(group, resource string, object []byte) (Health, error) {
	r, ok := rules[[2]string{group, resource}]
	if !ok {
		name := resource
		if group != "" {
			name += "." + group
		}
		return Health{Unknown, "no health rule for " + name}, nil
	}
	return r(object)
}

// Known reports whether Of has a rule for the resource.
func Known(group, resource string) bool {
	_, ok := rules[[2]string{group, resource}]
	return ok
}

// Resources are the resources Of has a rule for, as (group, plural resource) pairs,
// sorted: what a reader asks the objects of to compute their health.
func Resources() [][2]string {
	out := make([][2]string, 0, len(rules))
	for k := range rules {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	return out
}

// decoded turns a rule over a typed object into a rule over its JSON: one decode, into
// the published API types.
func decoded[T any, P interface {
	*T
	GetDeletionTimestamp() *metav1.Time
}](f func(P) Health) rule {
	return func(object []byte) (Health, error) {
		var v T
		if err := json.Unmarshal(object, &v); err != nil {
			return Health{Unknown, "undecodable object"}, fmt.Errorf("decode the object: %w", err)
		}
		p := P(&v)
		if p.GetDeletionTimestamp() != nil {
			return Health{Progressing, "terminating"}, nil
		}
		return f(p), nil
	}
}

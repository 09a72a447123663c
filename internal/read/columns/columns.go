package columns

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kube-cdc/kube-cdc/internal/health"
)

// Cell is one value of a row: Text as shown, cut to its column's width with "…", and
// Full, the whole value, when Text is cut ("" otherwise).
type Cell struct {
	Text string
	Full string
}

// Row is one object's cells, in the order For names the columns, and its health.
type Row struct {
	Cells  []Cell
	Health health.Health
}

// kind is one resource's columns and how to compute them from its JSON.
type kind struct {
	headers []string
	row     func(object []byte, at time.Time) ([]Cell, error)
}

var kinds = map[[2]string]kind{
	{"", "pods"}:             {[]string{"READY", "STATUS", "RESTARTS", "AGE", "NODE", "IMAGE"}, decoded(podRow)},
	{"apps", "deployments"}:  {[]string{"READY", "UP-TO-DATE", "AVAILABLE", "AGE"}, decoded(deploymentRow)},
	{"apps", "replicasets"}:  {[]string{"DESIRED", "CURRENT", "READY", "AGE"}, decoded(replicaSetRow)},
	{"apps", "statefulsets"}: {[]string{"READY", "AGE"}, decoded(statefulSetRow)},
	{"apps", "daemonsets"}:   {[]string{"DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}, decoded(daemonSetRow)},
	{"", "services"}:         {[]string{"TYPE", "CLUSTER-IP", "PORT(S)", "AGE"}, decoded(serviceRow)},
	{"", "nodes"}:            {[]string{"STATUS", "ROLES", "AGE", "VERSION"}, decoded(nodeRow)},
	{"batch", "jobs"}:        {[]string{"COMPLETIONS", "AGE"}, decoded(jobRow)},
	{"", "configmaps"}:       {[]string{"DATA", "AGE"}, decoded(configMapRow)},
	{"", "secrets"}:          {[]string{"TYPE", "DATA", "AGE"}, decoded(secretRow)},
}

var generic = kind{[]string{"AGE", "LABELS"}, decoded(genericRow)}

func kindOf(group, resource string) kind {
	if k, ok := kinds[[2]string{group, resource}]; ok {
		return k
	}
	return generic
}

// For names the columns after NAME (and NAMESPACE) for the resource, as kubectl get
// prints them.
func For(group, resource string) []string {
	return append([]string(nil), kindOf(group, resource).headers...)
}

// Known reports whether the resource has columns of its own (not the generic AGE and
// LABELS).
func Known(group, resource string) bool {
	_, ok := kinds[[2]string{group, resource}]
	return ok
}

// Of computes the row of object, an object of the resource as the change log stores
// it, as kubectl get would have printed it at the moment at.
func Of(group, resource string, object []byte, at time.Time) (Row, error) {
	cells, err := kindOf(group, resource).row(object, at)
	if err != nil {
		return Row{}, fmt.Errorf("%s: %w", id(group, resource), err)
	}
	h, err := health.Of(group, resource, object)
	if err != nil {
		return Row{}, fmt.Errorf("%s: %w", id(group, resource), err)
	}
	return Row{Cells: cells, Health: h}, nil
}

func id(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// decoded turns a row function over a typed object into one over its JSON: one decode,
// into the published API types.
func decoded[T any, P interface {
	*T
	GetCreationTimestamp() metav1.Time
}](f func(P, time.Time) []Cell) func([]byte, time.Time) ([]Cell, error) {
	return func(object []byte, at time.Time) ([]Cell, error) {
		var v T
		if err := json.Unmarshal(object, &v); err != nil {
			return nil, fmt.Errorf("decode the object: %w", err)
		}
		return f(P(&v), at), nil
	}
}

// age is kubectl's AGE of an object created at created, at the moment at.
func age(created metav1.Time, at time.Time) Cell {
	if created.IsZero() {
		return text("<unknown>")
	}
	return text(duration.HumanDuration(at.Sub(created.Time)))
}

func text(s string) Cell { return Cell{Text: s} }

func num[T ~int32 | ~int64 | ~int](n T) Cell { return text(fmt.Sprint(n)) }

// cut is s cut to width runes, with a visible "…" and the whole value kept.
func cut(s string, width int) Cell {
	if utf8.RuneCountInString(s) <= width {
		return text(s)
	}
	r := []rune(s)
	return Cell{Text: string(r[:width-1]) + "…", Full: s}
}

// The widths long values are cut to.
const (
	imageWidth  = 60
	labelsWidth = 60
	listWidth   = 40
)

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func genericRow(o *metav1.PartialObjectMetadata, at time.Time) []Cell {
	keys := make([]string, 0, len(o.Labels))
	for k := range o.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + o.Labels[k]
	}
	return []Cell{age(o.CreationTimestamp, at), cut(orNone(strings.Join(pairs, ",")), labelsWidth)}
}

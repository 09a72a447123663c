package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// ParseSince reads --since: a duration back from now, or an RFC 3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a positive duration (90m, 48h) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
}

// MatchRecorded resolves a resource as the config names one, against the resources the
// sink records rather than the apiserver's discovery: history reads only the database,
// works when the cluster is unreachable or a CRD is gone, and can only show what was
// recorded anyway. A name with its group (plural.group, group/version/resource,
// version/resource for the core group) is taken as it is; a bare plural or a kind must
// match one recorded resource, and the core group wins a tie as with kubectl. Short names
// (cm, deploy) need discovery and are not known here.
func MatchRecorded(name string, recorded []change.Resource) (change.Resource, error) {
	name = strings.TrimSpace(name)
	switch parts := strings.Split(name, "/"); len(parts) {
	case 3:
		return change.Resource{Group: parts[0], Resource: parts[2]}, nil
	case 2:
		return change.Resource{Resource: parts[1]}, nil
	case 1:
		if plural, group, ok := strings.Cut(name, "."); ok {
			return change.Resource{Group: group, Resource: plural}, nil
		}
	default:
		return change.Resource{}, fmt.Errorf("resource %q: want a plural, plural.group or group/version/resource", name)
	}
	var found []change.Resource
	for _, r := range recorded {
		if r.Resource == strings.ToLower(name) {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		for _, r := range recorded {
			if r.Kind != "" && strings.EqualFold(r.Kind, name) {
				found = append(found, r)
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		ids := make([]string, len(found))
		for i, r := range found {
			if r.Group == "" {
				return r, nil
			}
			ids[i] = r.ID()
		}
		return change.Resource{}, fmt.Errorf("resource %q is ambiguous: %s", name, strings.Join(ids, ", "))
	}
	ids := make([]string, len(recorded))
	for i, r := range recorded {
		ids[i] = r.ID()
	}
	known := "nothing yet"
	if len(ids) > 0 {
		known = strings.Join(ids, ", ")
	}
	return change.Resource{}, fmt.Errorf("resource %q is none of the resources recorded (%s); name it as a plural, plural.group, group/version/resource or kind", name, known)
}

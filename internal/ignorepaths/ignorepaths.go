package ignorepaths

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ResourceVersion is ignored whenever any path is: every version changes it.
const ResourceVersion = "/metadata/resourceVersion"

// Defaults are the paths ignored by default for the resource (group "" for the core
// group, plural), nil for most. They are what a heartbeat changes and nothing else:
//
//   - nodes: each condition's lastHeartbeatTime, which the kubelet (and KWOK) rewrites
//     at every node status report (every nodeStatusReportFrequency, 5 minutes by
//     default, and at every status change) although nothing else changed. A condition's
//     status, reason, message and lastTransitionTime are real changes and stay.
//   - leases (coordination.k8s.io): spec.renewTime, which the holder rewrites every few
//     seconds (a node's kubelet every 10 s, leader elections every 2 s). A new holder,
//     acquireTime or leaseTransitions are real changes and stay.
func Defaults(group, resource string) []string {
	switch {
	case group == "" && resource == "nodes":
		return []string{"/status/conditions/*/lastHeartbeatTime"}
	case group == "coordination.k8s.io" && resource == "leases":
		return []string{"/spec/renewTime"}
	}
	return nil
}

// For is the list a resource's history ignores: its defaults unless useDefaults is
// false, then the configured paths; ResourceVersion is added whenever the list is not
// empty. Duplicates are dropped; the order is the defaults', then the configured paths'.
func For(group, resource string, configured []string, useDefaults bool) []string {
	var out []string
	if useDefaults {
		out = append(out, Defaults(group, resource)...)
	}
	for _, p := range configured {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) > 0 && !slices.Contains(out, ResourceVersion) {
		out = append(out, ResourceVersion)
	}
	return out
}

// Validate says why p is not an ignore path, or nil.
func Validate(p string) error {
	if p == "" || p == "/" {
		return fmt.Errorf("%q would ignore the whole object", p)
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%q does not start with \"/\" (want a JSON pointer like \"/status/conditions/*/lastHeartbeatTime\")", p)
	}
	for i, seg := range strings.Split(p[1:], "/") {
		if seg == "" {
			return fmt.Errorf("%q: segment %d is empty", p, i+1)
		}
		if strings.Contains(seg, "*") && seg != "*" {
			return fmt.Errorf("%q: \"*\" stands for a whole segment, not part of one (segment %q)", p, seg)
		}
		for j := 0; j < len(seg); j++ {
			if seg[j] == '~' && (j+1 == len(seg) || seg[j+1] != '0' && seg[j+1] != '1') {
				return fmt.Errorf("%q: \"~\" must be escaped as \"~0\" (and \"/\" in a key as \"~1\")", p)
			}
		}
	}
	return nil
}

// Regexp is the regular expression that matches a JSON pointer equal to or below any of
// paths (which Validate accepted), written in the syntax both Go and PostgreSQL's
// advanced regular expressions read the same: "^(?:/a/[^/]+/b|/c)(?:/|$)". Pointers are
// compared as changed_paths() writes them (RFC 6901 escapes). "" for no paths.
func Regexp(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	alts := make([]string, len(paths))
	for i, p := range paths {
		segs := strings.Split(p[1:], "/")
		for j, s := range segs {
			if s == "*" {
				segs[j] = "[^/]+"
			} else {
				segs[j] = regexp.QuoteMeta(s)
			}
		}
		alts[i] = "/" + strings.Join(segs, "/")
	}
	return "^(?:" + strings.Join(alts, "|") + ")(?:/|$)"
}

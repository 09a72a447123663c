// Package version holds kube-cdc's version, set at build time with
// -ldflags "-X github.com/kube-cdc/kube-cdc/internal/version.Version=…".
package version

import "runtime/debug"

// Version is the release, or "dev".
var Version = "dev"

// String is the version and, when the binary knows it, the commit it was built from.
func String() string {
	v := Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		v += " " + bi.GoVersion
	}
	return v
}

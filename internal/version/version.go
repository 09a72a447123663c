// Package version is kube-cdc's build identity: the semantic version, the commit and the
// build date, set at build time by the Makefile (make build, make release, make image):
//
//	-ldflags "-X github.com/kube-cdc/kube-cdc/internal/version.Version=0.1.0
//	          -X github.com/kube-cdc/kube-cdc/internal/version.Commit=<hash>
//	          -X github.com/kube-cdc/kube-cdc/internal/version.Date=<commit time, RFC 3339>"
//
// hack/version computes them (RELEASING.md, "Versions"). A binary built without them
// (go build, go install) falls back to what the Go toolchain stamped: the module's version
// (v0.1.0 for go install …@v0.1.0, a pseudo-version in a checkout) and the VCS revision
// and time, else "dev" and "unknown".
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by -ldflags -X; empty: Get falls back to the build info.
var (
	Version string
	Commit  string
	Date    string
)

// Info is the build's identity, as `kube-cdc version -o json` prints it.
type Info struct {
	Version   string `json:"version"`   // semantic, without a leading v: 0.1.0, 0.1.1-0.20261128173000-4f3c2a1b9d0e
	Commit    string `json:"commit"`    // the full commit hash, or "unknown"
	Date      string `json:"date"`      // the commit's time (reproducible builds: never the time of the build), or "unknown"
	GoVersion string `json:"goVersion"` // the toolchain that built it: go1.26.8
	Platform  string `json:"platform"`  // linux/amd64
}

// Get is this binary's identity.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Date: Date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = strings.TrimPrefix(bi.Main.Version, "v")
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				if info.Date == "" {
					info.Date = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && Commit == "" && info.Commit != "" {
			info.Commit += "-dirty"
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Date == "" {
		info.Date = "unknown"
	}
	return info
}

// Short is the version alone, as schema_migrations records it.
func Short() string { return Get().Version }

// String is the version with its commit, build date and toolchain, for a log line.
func String() string {
	i := Get()
	commit := i.Commit
	if len(commit) > 12 && !strings.Contains(commit, "-") {
		commit = commit[:12]
	}
	return fmt.Sprintf("%s (commit %s, built %s, %s %s)", i.Version, commit, i.Date, i.GoVersion, i.Platform)
}

// Print writes Get() as `kube-cdc version -o output` does: text ("" too), or json
// ({"version","commit","date","goVersion","platform"}); another output is an error.
func Print(w io.Writer, output string) error {
	i := Get()
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(i)
	case "text", "":
		_, err := fmt.Fprintf(w, "kube-cdc %s\ncommit:   %s\nbuilt:    %s\ngo:       %s %s\n", i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
		return err
	}
	return fmt.Errorf("--output %q: want text or json", output)
}

// Command version prints the version, commit and build date of the tree it runs in, for
// the Makefile's -ldflags (make build, make release, make image):
//
//	go run ./hack/version            # 0.1.0
//	go run ./hack/version -commit    # the full commit hash
//	go run ./hack/version -date      # the commit's time, UTC, RFC 3339 (the build date)
//
// The version is semantic (RELEASING.md, "Versions"):
//
//   - HEAD carries a release tag vX.Y.Z: X.Y.Z.
//   - No tag vX.Y.Z of CHANGELOG.md's newest release is in this clone (tags do not travel
//     with every clone) and the changelog's Unreleased section is empty: this tree is that
//     release, X.Y.Z.
//   - Otherwise a development build after the newest release known (the newest tag
//     reachable from HEAD or the changelog's newest release, whichever is newer), in the
//     form of a Go pseudo-version: X.Y.(Z+1)-0.<commit time yyyymmddhhmmss>-<commit, 12
//     hex>, which sorts after X.Y.Z and before X.Y.(Z+1). With no release at all,
//     0.0.0-<time>-<commit>.
//
// Uncommitted changes to tracked files add +dirty. Without git (a source archive) the
// commit is "unknown" and a development build is X.Y.(Z+1)-dev.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/migrations"
)

func main() {
	commit := flag.Bool("commit", false, "print the commit instead of the version")
	date := flag.Bool("date", false, "print the commit's time (UTC, RFC 3339) instead of the version")
	dir := flag.String("C", ".", "the repository's directory")
	flag.Parse()
	d, err := describe(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "version:", err)
		os.Exit(1)
	}
	switch {
	case *commit:
		fmt.Println(d.Commit)
	case *date:
		fmt.Println(d.Date)
	default:
		fmt.Println(d.Version)
	}
}

// build is what describe finds.
type build struct {
	Version string
	Commit  string // full hash, or "unknown"
	Date    string // the commit's time, UTC, RFC 3339, or "unknown"
}

// changelog is what the version needs of CHANGELOG.md.
type changelog struct {
	newest     *migrations.Release // the newest released entry; nil: none
	unreleased bool                // the Unreleased section lists something
}

var releaseHeading = regexp.MustCompile(`^## \[(\d+\.\d+\.\d+)\]`)

// parseChangelog reads a Keep a Changelog file: "## [Unreleased]" then "## [X.Y.Z] - date"
// sections, newest first. An Unreleased section lists something when it has a line other
// than blank lines and ### headings.
func parseChangelog(data []byte) (changelog, error) {
	var cl changelog
	sc := bufio.NewScanner(bytes.NewReader(data))
	inUnreleased := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			inUnreleased = strings.HasPrefix(strings.ToLower(line), "## [unreleased]")
			if m := releaseHeading.FindStringSubmatch(line); m != nil {
				r, err := migrations.ParseRelease(m[1])
				if err != nil {
					return cl, err
				}
				if cl.newest == nil || r.Compare(*cl.newest) > 0 {
					cl.newest = &r
				}
			}
		case inUnreleased && line != "" && !strings.HasPrefix(line, "#"):
			cl.unreleased = true
		}
	}
	return cl, sc.Err()
}

func describe(dir string) (build, error) {
	data, err := os.ReadFile(dir + "/CHANGELOG.md")
	if err != nil {
		return build{}, err
	}
	cl, err := parseChangelog(data)
	if err != nil {
		return build{}, fmt.Errorf("CHANGELOG.md: %w", err)
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(exit.Stderr))
		}
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		// No repository: the changelog alone.
		v := "0.0.0-dev"
		if cl.newest != nil {
			v = cl.newest.String()
			if cl.unreleased {
				v = nextPatch(*cl.newest).String() + "-dev"
			}
		}
		return build{Version: v, Commit: "unknown", Date: "unknown"}, nil
	}
	secs, err := git("log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return build{}, err
	}
	unix, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return build{}, fmt.Errorf("the commit time %q: %w", secs, err)
	}
	at := time.Unix(unix, 0).UTC()
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return build{}, err
	}
	dirty := ""
	if status != "" {
		dirty = "+dirty"
	}
	b := build{Commit: commit, Date: at.Format(time.RFC3339)}

	tags := map[migrations.Release]bool{}
	list, err := git("tag", "--list", "v*")
	if err != nil {
		return build{}, err
	}
	for _, t := range strings.Fields(list) {
		if r, err := migrations.ParseRelease(t); err == nil {
			tags[r] = true
		}
	}
	pointing, err := git("tag", "--points-at", "HEAD", "--list", "v*")
	if err != nil {
		return build{}, err
	}
	var exact *migrations.Release
	for _, t := range strings.Fields(pointing) {
		if r, err := migrations.ParseRelease(t); err == nil && (exact == nil || r.Compare(*exact) > 0) {
			exact = &r
		}
	}
	if exact != nil {
		b.Version = exact.String() + dirty
		return b, nil
	}
	if cl.newest != nil && !cl.unreleased && !tags[*cl.newest] {
		b.Version = cl.newest.String() + dirty
		return b, nil
	}
	base := cl.newest
	if t, err := git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD"); err == nil {
		if r, err := migrations.ParseRelease(t); err == nil && (base == nil || r.Compare(*base) > 0) {
			base = &r
		}
	}
	stamp := at.Format("20060102150405") + "-" + commit[:12]
	if base == nil {
		b.Version = "0.0.0-" + stamp + dirty
	} else {
		b.Version = nextPatch(*base).String() + "-0." + stamp + dirty
	}
	return b, nil
}

func nextPatch(r migrations.Release) migrations.Release {
	r[2]++
	return r
}

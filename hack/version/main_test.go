package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	released = "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-11-28\n\n### Added\n\n- everything\n"
	// ### headings alone are not an entry.
	releasedWithHeadings = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n## [0.2.0] - 2026-12-28\n\n- more\n\n## [0.1.0] - 2026-11-28\n"
	unreleased           = "# Changelog\n\n## [Unreleased]\n\n### Fixed\n\n- a bug\n\n## [0.1.0] - 2026-11-28\n\n- everything\n"
	commitTime           = "2026-01-02T03:04:05Z"
)

// repo is a git repository in a temporary directory whose commits all have commitTime.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_COMMITTER_DATE="+commitTime, "GIT_AUTHOR_DATE="+commitTime, "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes CHANGELOG.md and commits it; it returns the commit.
func (r *repo) commit(changelog string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "CHANGELOG.md"), []byte(changelog), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("add", "CHANGELOG.md")
	r.git("commit", "-q", "--allow-empty", "-m", "c")
	return r.git("rev-parse", "HEAD")
}

func TestTheVersionFollowsTheTagsAndElseTheChangelog(t *testing.T) {
	for _, tc := range []struct {
		name string
		// build makes the repository and returns HEAD's commit.
		build func(r *repo) string
		want  string // %c: HEAD's first 12 hex digits
	}{
		{"a clone without tags of a release commit: the changelog's release",
			func(r *repo) string { return r.commit(released) }, "0.1.0"},
		{"the newest release of the changelog, whatever its order, when Unreleased has headings only",
			func(r *repo) string { return r.commit(releasedWithHeadings) }, "0.2.0"},
		{"a clone without tags, with unreleased entries: a development build after the release",
			func(r *repo) string { return r.commit(unreleased) }, "0.1.1-0.20260102030405-%c"},
		{"HEAD tagged: the tag, whatever the changelog says",
			func(r *repo) string { c := r.commit(unreleased); r.git("tag", "v0.1.0"); return c }, "0.1.0"},
		{"a commit after the tagged release, Unreleased still empty: a development build",
			func(r *repo) string { r.commit(released); r.git("tag", "v0.1.0"); return r.commit(released + "\n") },
			"0.1.1-0.20260102030405-%c"},
		{"a newer tag reachable than the changelog's release: after the tag",
			func(r *repo) string { r.commit(unreleased); r.git("tag", "v0.3.1"); return r.commit(unreleased + "\n") },
			"0.3.2-0.20260102030405-%c"},
		{"tags that are no release are ignored",
			func(r *repo) string {
				c := r.commit(unreleased)
				r.git("tag", "v0.2.0-rc.1")
				r.git("tag", "latest")
				return c
			},
			"0.1.1-0.20260102030405-%c"},
		{"no release anywhere: 0.0.0-…",
			func(r *repo) string { return r.commit("# Changelog\n\n## [Unreleased]\n\n- first steps\n") }, "0.0.0-20260102030405-%c"},
		{"uncommitted changes: +dirty",
			func(r *repo) string {
				c := r.commit(released)
				os.WriteFile(filepath.Join(r.dir, "CHANGELOG.md"), []byte(released+"x\n"), 0o644)
				return c
			}, "0.1.0+dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t)
			commit := tc.build(r)
			b, err := describe(r.dir)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.want, "%c", commit[:12])
			if b.Version != want || b.Commit != commit || b.Date != commitTime {
				t.Errorf("describe = %+v, want version %s, commit %s, date %s", b, want, commit, commitTime)
			}
		})
	}
}

func TestWithoutGitTheChangelogAloneGivesTheVersion(t *testing.T) {
	for _, tc := range []struct{ changelog, want string }{
		{released, "0.1.0"},
		{unreleased, "0.1.1-dev"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(tc.changelog), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := describe(dir)
		if err != nil {
			t.Fatal(err)
		}
		if b != (build{Version: tc.want, Commit: "unknown", Date: "unknown"}) {
			t.Errorf("describe without git = %+v, want version %s", b, tc.want)
		}
	}
}

func TestThisRepositorysChangelogNamesARelease(t *testing.T) {
	data, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := parseChangelog(data)
	if err != nil || cl.newest == nil {
		t.Fatalf("CHANGELOG.md: newest release %v, %v; want a \"## [X.Y.Z] - date\" entry", cl.newest, err)
	}
}

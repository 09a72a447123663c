package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/version"
)

// The Makefile's -ldflags set the version package's variables by their import path: a
// typo there sets nothing, silently.
func TestTheMakefilesLdflagsSetTheVersionPackagesVariables(t *testing.T) {
	out, err := exec.Command("make", "-s", "-C", "../..", "print-ldflags", "VERSION=1.2.3", "COMMIT=c0ffee", "DATE=2026-01-02T03:04:05Z").Output()
	if err != nil {
		t.Fatalf("make print-ldflags: %v", err)
	}
	pkg := reflect.TypeFor[version.Info]().PkgPath()
	for _, want := range []string{"-X " + pkg + ".Version=1.2.3", "-X " + pkg + ".Commit=c0ffee", "-X " + pkg + ".Date=2026-01-02T03:04:05Z"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make print-ldflags = %q, want it to contain %q", out, want)
		}
	}
}

func TestVersionPrintsTheVersionCommitBuildDateAndGoVersion(t *testing.T) {
	want := version.Info{Version: "1.2.3-0.20260102030405-c0ffee000000", Commit: "c0ffee0000000000000000000000000000000000",
		Date: "2026-01-02T03:04:05Z", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	// What -ldflags -X sets in a build.
	saved := [3]string{version.Version, version.Commit, version.Date}
	version.Version, version.Commit, version.Date = want.Version, want.Commit, want.Date
	t.Cleanup(func() { version.Version, version.Commit, version.Date = saved[0], saved[1], saved[2] })

	run := func(args ...string) []byte {
		t.Helper()
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("kube-cdc %s: %v", strings.Join(args, " "), err)
		}
		return out.Bytes()
	}
	// The field names are the contract: read them as a consumer would, not through Info.
	var got map[string]string
	wantJSON := map[string]string{"version": want.Version, "commit": want.Commit, "date": want.Date, "goVersion": want.GoVersion, "platform": want.Platform}
	if out := run("version", "-o", "json"); json.Unmarshal(out, &got) != nil || !maps.Equal(got, wantJSON) {
		t.Errorf("kube-cdc version -o json printed %s, want %v", out, wantJSON)
	}
	text := "kube-cdc " + want.Version + "\ncommit:   " + want.Commit + "\nbuilt:    " + want.Date + "\ngo:       " + want.GoVersion + " " + want.Platform + "\n"
	if out := run("version"); string(out) != text {
		t.Errorf("kube-cdc version printed\n%s\nwant\n%s", out, text)
	}
}

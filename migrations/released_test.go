package migrations

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func readReleased(t *testing.T) []Released {
	t.Helper()
	data, err := os.ReadFile(ReleasedFile)
	if err != nil {
		t.Fatalf("read %s (make release-sums VERSION=x.y.z writes it): %v", ReleasedFile, err)
	}
	rs, err := ParseReleased(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatalf("%s lists no release", ReleasedFile)
	}
	return rs
}

func TestEveryReleasedMigrationIsEmbeddedUnchanged(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]File{}
	for _, f := range files {
		byName[f.Name] = f
	}
	for _, r := range readReleased(t) {
		f, ok := byName[r.Name]
		if !ok {
			t.Errorf("migration %s of release %s is no longer embedded: a released migration never changes (add the next number instead)", r.Name, r.Release)
			continue
		}
		if f.SHA256 != r.SHA256 {
			t.Errorf("migration %s of release %s changed: released sha256 %s, embedded %s; a released migration never changes (restore it and add the next number instead)",
				r.Name, r.Release, r.SHA256, f.SHA256)
		}
	}
}

func TestAMigrationNotYetReleasedSortsAfterEveryReleasedOne(t *testing.T) {
	// Files apply in name order: one slipped in between released files would be applied
	// after newer ones on an upgraded database but before them on a new one.
	var newest string
	released := map[string]bool{}
	for _, r := range readReleased(t) {
		released[r.Name] = true
		newest = max(newest, r.Name)
	}
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !released[f.Name] && f.Name < newest {
			t.Errorf("migration %s is not released yet but sorts before the released %s: number it after", f.Name, newest)
		}
	}
}

func TestReleasedSumsIsAsMakeReleaseSumsWritesIt(t *testing.T) {
	data, err := os.ReadFile(ReleasedFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(FormatReleased(readReleased(t))); got != string(data) {
		t.Errorf("%s is not in the form make release-sums writes (edited by hand?):\n%s", ReleasedFile, got)
	}
}

func TestSetReleaseRecordsTheNewFilesAndKeepsEarlierReleases(t *testing.T) {
	f := func(name, sum string) File { return File{Name: name, SHA256: strings.Repeat(sum, 64)} }
	r := func(rel, name, sum string) Released {
		return Released{Release: rel, Name: name, SHA256: strings.Repeat(sum, 64)}
	}
	files := []File{f("001_a.sql", "a"), f("002_b.sql", "b"), f("003_c.sql", "c")}
	for _, tc := range []struct {
		name     string
		released []Released
		release  string
		want     []Released
		wantErr  string
	}{
		{name: "the first release ships every file", release: "0.1.0",
			want: []Released{r("0.1.0", "001_a.sql", "a"), r("0.1.0", "002_b.sql", "b"), r("0.1.0", "003_c.sql", "c")}},
		{name: "a leading v is dropped", release: "v0.1.0",
			want: []Released{r("0.1.0", "001_a.sql", "a"), r("0.1.0", "002_b.sql", "b"), r("0.1.0", "003_c.sql", "c")}},
		{name: "the next release ships the files added since", release: "0.2.0",
			released: []Released{r("0.1.0", "001_a.sql", "a")},
			want:     []Released{r("0.1.0", "001_a.sql", "a"), r("0.2.0", "002_b.sql", "b"), r("0.2.0", "003_c.sql", "c")}},
		{name: "the same release again takes the files added since it was written", release: "0.1.0",
			released: []Released{r("0.1.0", "001_a.sql", "a"), r("0.1.0", "002_b.sql", "x")},
			want:     []Released{r("0.1.0", "001_a.sql", "a"), r("0.1.0", "002_b.sql", "b"), r("0.1.0", "003_c.sql", "c")}},
		{name: "a changed file of an earlier release is refused", release: "0.2.0",
			released: []Released{r("0.1.0", "001_a.sql", "x")},
			wantErr:  "migration 001_a.sql of release 0.1.0 changed: released sha256 xxxx"},
		{name: "a gone file of an earlier release is refused", release: "0.2.0",
			released: []Released{r("0.1.0", "000_gone.sql", "a")},
			wantErr:  "migration 000_gone.sql of release 0.1.0 is gone"},
		{name: "an older release than one listed is refused", release: "0.1.0",
			released: []Released{r("0.2.0", "001_a.sql", "a")},
			wantErr:  "already lists release 0.2.0, newer than 0.1.0"},
		{name: "a pre-release is no release", release: "0.2.0-rc.1", wantErr: `release "0.2.0-rc.1" is not MAJOR.MINOR.PATCH`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetRelease(tc.released, tc.release, files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SetRelease: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("SetRelease = %v\nwant %v", got, tc.want)
			}
			back, err := ParseReleased(FormatReleased(got))
			if err != nil || !slices.Equal(back, tc.want) {
				t.Errorf("ParseReleased(FormatReleased) = %v, %v", back, err)
			}
		})
	}
}

package migrations

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ReleasedFile is the file, in this directory, that lists the migrations of every released
// version: make release-sums writes it, the immutability test reads it.
const ReleasedFile = "released.sums"

// Released is one line of released.sums: a migration file as the release that first
// shipped it shipped it.
type Released struct {
	Release string // "0.1.0"
	Name    string // "001_init.sql"
	SHA256  string // hex SHA-256 of the file's bytes
}

const releasedHeader = `# The migrations of each released kube-cdc version, with the SHA-256 of each file as shipped:
# "<version> <file> <sha256>", one line per migration, under the release that first shipped it.
# A released migration never changes (released_test.go compares the embedded files to this).
# Written by make release-sums VERSION=x.y.z (RELEASING.md); do not edit by hand.
`

// ParseReleased reads released.sums: lines "<version> <file> <sha256>"; blank lines and
// lines starting with # are ignored.
func ParseReleased(data []byte) ([]Released, error) {
	var out []Released
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s line %d: want \"<version> <file> <sha256>\", got %q", ReleasedFile, n, line)
		}
		if _, err := ParseRelease(f[0]); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", ReleasedFile, n, err)
		}
		if len(f[2]) != 64 {
			return nil, fmt.Errorf("%s line %d: %q is not a hex SHA-256", ReleasedFile, n, f[2])
		}
		out = append(out, Released{Release: f[0], Name: f[1], SHA256: f[2]})
	}
	return out, sc.Err()
}

// FormatReleased writes released.sums: the header, then the lines by release, then file.
func FormatReleased(rs []Released) []byte {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Released) int {
		ra, _ := ParseRelease(a.Release)
		rb, _ := ParseRelease(b.Release)
		if c := ra.Compare(rb); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var b bytes.Buffer
	b.WriteString(releasedHeader)
	for _, r := range rs {
		fmt.Fprintf(&b, "%s %s %s\n", r.Release, r.Name, r.SHA256)
	}
	return b.Bytes()
}

// Release is a released version: MAJOR.MINOR.PATCH, nothing else (a release is never a
// pre-release).
type Release [3]int

// ParseRelease parses "0.1.0" (a leading v is accepted).
func ParseRelease(s string) (Release, error) {
	var r Release
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return r, fmt.Errorf("release %q is not MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return r, fmt.Errorf("release %q is not MAJOR.MINOR.PATCH", s)
		}
		r[i] = n
	}
	return r, nil
}

// Compare is -1, 0 or 1 as r is older than, the same as or newer than o.
func (r Release) Compare(o Release) int { return slices.Compare(r[:], o[:]) }

func (r Release) String() string { return fmt.Sprintf("%d.%d.%d", r[0], r[1], r[2]) }

// SetRelease returns released with release's set replaced by every file not shipped by
// another release: what make release-sums writes. It refuses a release older than one
// already listed, and a file of another release that no longer matches its checksum
// (or is gone).
func SetRelease(released []Released, release string, files []File) ([]Released, error) {
	rel, err := ParseRelease(release)
	if err != nil {
		return nil, err
	}
	release = rel.String()
	byName := map[string]File{}
	for _, f := range files {
		byName[f.Name] = f
	}
	var out []Released
	shipped := map[string]bool{}
	for _, r := range released {
		if r.Release == release {
			continue
		}
		other, _ := ParseRelease(r.Release)
		if other.Compare(rel) > 0 {
			return nil, fmt.Errorf("%s already lists release %s, newer than %s", ReleasedFile, r.Release, release)
		}
		f, ok := byName[r.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("migration %s of release %s is gone: a released migration never changes", r.Name, r.Release)
		case f.SHA256 != r.SHA256:
			return nil, fmt.Errorf("migration %s of release %s changed: released sha256 %s, the file's %s: a released migration never changes", r.Name, r.Release, r.SHA256, f.SHA256)
		}
		shipped[r.Name] = true
		out = append(out, r)
	}
	for _, f := range files {
		if !shipped[f.Name] {
			out = append(out, Released{Release: release, Name: f.Name, SHA256: f.SHA256})
		}
	}
	return out, nil
}

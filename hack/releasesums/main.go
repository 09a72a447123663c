// Command releasesums writes migrations/released.sums: the migrations a release ships,
// each with the SHA-256 of its file (make release-sums VERSION=x.y.z, RELEASING.md).
//
// The named release gets every embedded migration that no earlier release shipped; the
// lines of earlier releases are kept, and the command refuses when one of their files
// changed. Run it again for the same version while that release is not cut yet (a
// migration added since): its set is rewritten.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kube-cdc/kube-cdc/migrations"
)

func main() {
	version := flag.String("version", "", "the release whose migrations to record (MAJOR.MINOR.PATCH)")
	dir := flag.String("dir", "migrations", "the migrations directory (the file is written there)")
	flag.Parse()
	if err := run(*version, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "releasesums:", err)
		os.Exit(1)
	}
}

func run(version, dir string) error {
	if version == "" {
		return errors.New("-version is required (make release-sums VERSION=x.y.z)")
	}
	rel, err := migrations.ParseRelease(version)
	if err != nil {
		return err
	}
	version = rel.String()
	path := filepath.Join(dir, migrations.ReleasedFile)
	var released []migrations.Released
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if released, err = migrations.ParseReleased(data); err != nil {
			return err
		}
	}
	// The files on disk, not the ones compiled into this command: the same bytes when
	// built from this tree, and no doubt about it.
	files, err := migrations.ReadFiles(os.DirFS(dir))
	if err != nil {
		return err
	}
	out, err := migrations.SetRelease(released, version, files)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, migrations.FormatReleased(out), 0o644); err != nil {
		return err
	}
	n := 0
	for _, r := range out {
		if r.Release == version {
			n++
		}
	}
	fmt.Printf("%s: release %s ships %d migrations\n", path, version, n)
	return nil
}

// Package rolling proves a rolling upgrade of two kube-cdc replicas under load, against a
// real kube-apiserver and PostgreSQL (rolling_test.go, behind the rollingupgrade build
// tag: `make upgrade-test`).
//
// The contract it checks (docs/operations.md, "Upgrade"): with the old version leading
// and the new one standing by while ConfigMaps change at 100 writes/s, a SIGTERM to the
// old leader hands the Lease to the new replica within the lease bounds; the new one
// migrates the schema and resumes every stream from the stored checkpoint with a watch
// (no LIST); an old replica that leads afterwards refuses, in one line naming both
// versions, to write to the schema the new one migrated; and the database holds every
// acknowledged write exactly once, in per-key order.
//
// "Old" is this tree built as it is (the version hack/version computes); "new" is the same
// tree with one extra, test-only migration (testdata/999_rolling_upgrade.sql, added to
// the migrations package by `go build -overlay`, so no production file knows it) and a
// newer version string. The package holds no code: only the test.
package rolling

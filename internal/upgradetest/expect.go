package upgradetest

// expectations are what the fixture's generator saw in the database it dumped
// (testdata/<name>.json): the upgrade must keep them.
type expectations struct {
	Checkpoints []checkpoint   `json:"checkpoints"`
	Rows        map[string]int `json:"rows"` // table → rows
}

type checkpoint struct {
	Cluster  string `json:"cluster"`
	Sink     string `json:"sink"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
	Scope    string `json:"scope"`
	RV       int64  `json:"rv"`
	Epoch    int32  `json:"epoch"`
}

// fixtureTables are the tables whose every row the upgrade must keep unchanged.
var fixtureTables = []string{"objects", "changes", "checkpoints", "epochs", "quarantine", "audit_events", "audit_log_positions", "retention", "history_skipped", "schema_migrations"}

package asof

// Help is `kube-cdc as-of --help`'s long text: what the command reads and how this package prints
// it, kept beside the code it describes.
const Help = `Show every object of RESOURCE in the configured cluster as a PostgreSQL sink had observed it
at TIME, printed like kubectl get: the newest version kube-cdc had received at or before
TIME, for each object not deleted by then (the SQL function as_of; docs/reading.md, "As of a
moment"). "Observed" is kube-cdc's time of receipt: a change made while kube-cdc was not
running shows from the relist that found it, an object deleted meanwhile disappears at the
relist that inferred its delete.

TIME is an RFC 3339 time (2026-05-01T14:03:00Z), "now", or a duration back from now
(15m, 1h30m, "2h ago"; -15m only after "--"). RESOURCE is named as in the config (plural,
plural.group, group/version/resource or kind) and matched against the resources the sink
records, so as-of needs only the database. Without -n every namespace is shown.`

package ui

// Help is `kube-cdc ui --help`'s long text: what the command reads and how this package prints
// it, kept beside the code it describes.
const Help = `Serve a read-only web UI over a PostgreSQL sink's schema: a timeline of changes (a chart
by resource, deletes and inferred deletes apart, and the feed below it with filters, all
in the URL), lanes of each object over time coloured by op and health with its
Kubernetes Events (/lanes), every version of an object with its diff (as kube-cdc history shows it),
the objects as of a moment (when the schema has as_of), and kube-cdc status. It reads
the first PostgreSQL sink (or --sink, or the key ui.sink) of the configured cluster
(--cluster); a database several clusters write to shows a cluster picker.

It listens on this machine only by default. ui.token (better: KUBE_CDC_UI__TOKEN) demands
a bearer token, or basic auth with the token as the password; ui.trustedHeader demands
the header an authenticating proxy sets. A role with SELECT on the schema is enough
(docs/operations.md, "Web UI").`

package status

// Help is `kube-cdc status --help`'s long text: what the command reads and how this package prints
// it, kept beside the code it describes.
const Help = `Show, per sink, resource and scope, the checkpoint (resourceVersion, age, epoch), the
object counts and the quarantined changes; who writes each PostgreSQL sink (its writer
lock's holder and waiters); and, asked of the running kube-cdc at metrics.address, the
resources it does not stream now, and those it streams but may no longer list or watch
(their next re-watch will fail). A scope is shown by its namespaces and selectors.
-o json and -o yaml print the same as a document (field names in docs/operations.md).`

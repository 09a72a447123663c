package history

// Help is `kube-cdc history --help`'s long text: what the command reads and how this package prints
// it, kept beside the code it describes.
const Help = `Show every version of one object in a PostgreSQL sink's changes table (the configured
cluster's), in the order they were written: when kube-cdc observed it, the op, the
resourceVersion, who changed it (field manager/operation) and, for a delete, whether it
was observed or inferred and why; then what changed against the version before, as a
unified diff of the YAML (metadata.resourceVersion is left out: the header has it). The
first version is shown whole, and so is the first after a delete or of a new uid. -o json
prints a JSON array, one element per version, with the change as an RFC 6902 JSON Patch
(resourceVersion included): applied in order to {}, the patches rebuild every version
exactly.

RESOURCE is named as in the config's resources (a plural, plural.group,
group/version/resource, or a kind) and matched against the resources the sink records,
so history needs no access to the cluster. Without -n, the one namespace whose history
holds the name is taken; when several do, history exits 1 naming them.

Characters that are invisible or reorder text (bidirectional controls such as U+202E,
zero-width characters, other format and control characters) are shown as markers like
⟨U+202E⟩ in the text, so no line can pass for another; -o json keeps values exact.`

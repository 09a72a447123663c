// Package why prints what `kube-cdc why` reads (store.Why, the SQL function why()): the
// changes in the window before an object broke, to the object and to what it depends on,
// oldest first, each with who made it.
//
// The text form is one line per change: when it was observed (UTC), how the changed object
// relates to the one that broke, which object, the op and resourceVersion, who made it
// (the audit user, impersonator and client, and how the event was joined, where kube-cdc
// has them; the field manager always), and the changed paths of a watch update where they
// were stored; a closing line says how to see a change's diff (`kube-cdc history`). -o
// json prints the rows as an array. Values are shown as history shows them: characters
// that reorder or hide text are markers (history.Visible) in the text form, exact in JSON.
package why

package change_test

import (
	"fmt"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// A Key names one object within a resource; its String is the Kafka record key and the
// key index's key, and ParseKey reads it back.
func ExampleParseKey() {
	namespaced := change.Key{Namespace: "team-a", Name: "settings"}
	clusterScoped := change.Key{Name: "team-a"} // a Namespace object, say
	fmt.Println(namespaced, clusterScoped)

	for _, s := range []string{"team-a/settings", "team-a"} {
		k := change.ParseKey(s)
		fmt.Printf("namespace=%q name=%q\n", k.Namespace, k.Name)
	}
	// Output:
	// team-a/settings team-a
	// namespace="team-a" name="settings"
	// namespace="" name="team-a"
}

// An RV is a resourceVersion read as an unsigned integer, so RVs compare with <. The
// empty string is zero, "none", and zero formats back as "".
func ExampleParseRV() {
	a, _ := change.ParseRV("1042")
	b, _ := change.ParseRV("987")
	fmt.Println(a > b, a.String())

	none, _ := change.ParseRV("")
	fmt.Printf("%d %q\n", none, none.String())

	if _, err := change.ParseRV("12abc"); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// true 1042
	// 0 ""
	// error: resourceVersion "12abc" is not an unsigned integer: strconv.ParseUint: parsing "12abc": invalid syntax
}

// A Version orders by (Epoch, RV), never by RV alone: after a time travel (an etcd
// restored from a backup) the cluster issues lower RVs again, in a new epoch, and they
// come after everything of the old one.
func ExampleVersion_Compare() {
	beforeRestore := change.Version{Epoch: 0, RV: 9000}
	afterRestore := change.Version{Epoch: 1, RV: 45}

	fmt.Println(beforeRestore.Compare(afterRestore)) // before
	fmt.Println(afterRestore.Compare(beforeRestore)) // after
	fmt.Println(afterRestore.Compare(change.Version{Epoch: 1, RV: 45}))
	// Output:
	// -1
	// 1
	// 0
}

// Within one epoch RVs order versions; across epochs they say nothing (a restored etcd
// issues its RVs again), and CompareInEpoch says so.
func ExampleVersion_CompareInEpoch() {
	held := change.Version{Epoch: 1, RV: 50}
	fmt.Println(change.Version{Epoch: 1, RV: 45}.CompareInEpoch(held)) // older, same epoch
	fmt.Println(change.Version{Epoch: 1, RV: 50}.CompareInEpoch(held)) // the same version
	fmt.Println(change.Version{Epoch: 0, RV: 9000}.CompareInEpoch(held))
	// Output:
	// -1 true
	// 0 true
	// 0 false
}

// A Version's String is its RV, prefixed by "EPOCH/" outside epoch 0; ParseVersion reads
// it back.
func ExampleParseVersion() {
	for _, v := range []change.Version{{RV: 123}, {Epoch: 2, RV: 45}} {
		back, err := change.ParseVersion(v.String())
		fmt.Printf("%s -> epoch=%d rv=%d %v\n", v, back.Epoch, back.RV, err)
	}
	if _, err := change.ParseVersion("x/45"); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// 123 -> epoch=0 rv=123 <nil>
	// 2/45 -> epoch=2 rv=45 <nil>
	// error: version "x/45": the epoch is not a natural number
}

// After a relist, a key the sink holds (under uid "u1") that the LIST did not show is
// looked up in the cluster (pipeline.Target.Lookup). Presence is what the lookup found;
// End reads it as the reason of the held object's inferred delete, or "" when the object
// lives on in some scope, whose stream writes it.
func ExamplePresence_End() {
	const held = "u1"
	cases := []struct {
		what string
		p    change.Presence
	}{
		{"nothing under the key", change.Presence{}},
		{"the same object, out of every scope", change.Presence{UID: held}},
		{"the same object, in another scope", change.Presence{UID: held, InScope: true}},
		{"another object, in some scope", change.Presence{UID: "u2", InScope: true}},
		{"another object, out of every scope", change.Presence{UID: "u2"}},
		{"a namespace we may not read", change.Presence{Unreadable: true}},
	}
	for _, c := range cases {
		fmt.Printf("%-36s %q\n", c.what+":", c.p.End(held))
	}
	// Output:
	// nothing under the key:               "gone"
	// the same object, out of every scope: "out-of-scope"
	// the same object, in another scope:   ""
	// another object, in some scope:       "recreated"
	// another object, out of every scope:  "gone"
	// a namespace we may not read:         "out-of-scope"
}

// A source emits Events in order. A relist is RelistBegin, one Listed event per object
// (Op left to the pipeline's reconcile diff), then RelistEnd at the LIST's RV;
// Established says the watch from there was accepted; Changed events carry the watch's
// changes and Progress the bookmarks.
func ExampleEvent() {
	cms := change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	obj := func(name string, rv change.RV) change.Change {
		return change.Change{Resource: cms, Key: change.Key{Namespace: "ns", Name: name}, UID: "uid-" + name, RV: rv, Object: []byte(`{}`)}
	}
	listed := func(c change.Change) change.Change { c.Snapshot = true; return c }
	updated := func(c change.Change) change.Change { c.Op = change.OpUpdate; return c }

	stream := []change.Event{
		{Type: change.RelistBegin},
		{Type: change.Listed, Change: listed(obj("a", 7))},
		{Type: change.Listed, Change: listed(obj("b", 9))},
		{Type: change.RelistEnd, RV: 10},
		{Type: change.Established, RV: 10},
		{Type: change.Changed, Change: updated(obj("a", 11))},
		{Type: change.Progress, RV: 15},
	}
	for _, ev := range stream {
		switch ev.Type {
		case change.Listed, change.Changed:
			c := ev.Change
			fmt.Printf("%-12s %s %s rv=%d op=%q snapshot=%v\n", ev.Type, c.Resource.ID(), c.Key, c.RV, c.Op, c.Snapshot)
		case change.RelistBegin:
			fmt.Println(ev.Type)
		default:
			fmt.Printf("%-12s rv=%d\n", ev.Type, ev.RV)
		}
	}
	// Output:
	// relist-begin
	// listed       configmaps ns/a rv=7 op="" snapshot=true
	// listed       configmaps ns/b rv=9 op="" snapshot=true
	// relist-end   rv=10
	// established  rv=10
	// changed      configmaps ns/a rv=11 op="update" snapshot=false
	// progress     rv=15
}

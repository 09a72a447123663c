package envelope

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

var observed = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC) // 1772366400123 ms

func configMap(op change.Op, obj string) change.Change {
	c := change.Change{
		Cluster:    "prod",
		Resource:   change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true},
		Key:        change.Key{Namespace: "ns", Name: "a"},
		UID:        "u-1",
		RV:         42,
		Op:         op,
		ChangedBy:  "kubectl/Update",
		ObservedAt: observed,
	}
	if obj != "" {
		c.Object = json.RawMessage(obj)
	}
	return c
}

func TestAppendWritesTheGoldenEnvelope(t *testing.T) {
	const src = `"source":{"cluster":"prod","group":"","version":"v1","resource":"configmaps","kind":"ConfigMap","namespace":"ns","name":"a","uid":"u-1","resourceVersion":"42","epoch":0,`
	obj := `{"metadata":{"name":"a"}}`
	tests := []struct {
		name string
		c    change.Change
		want string
	}{
		{"create", configMap(change.OpCreate, obj),
			`{"op":"c","ts_ms":1772366400123,"before":null,"after":{"metadata":{"name":"a"}},` + src + `"snapshot":false,"inferred":false,"reason":"","changedBy":"kubectl/Update"}}`},
		{"update", configMap(change.OpUpdate, obj),
			`{"op":"u","ts_ms":1772366400123,"before":null,"after":{"metadata":{"name":"a"}},` + src + `"snapshot":false,"inferred":false,"reason":"","changedBy":"kubectl/Update"}}`},
		{"delete", configMap(change.OpDelete, obj),
			`{"op":"d","ts_ms":1772366400123,"before":{"metadata":{"name":"a"}},"after":null,` + src + `"snapshot":false,"inferred":false,"reason":"","changedBy":"kubectl/Update"}}`},
		{"inferred delete", func() change.Change {
			c := configMap(change.OpDelete, "")
			c.Inferred = true
			c.Reason = change.ReasonGone
			return c
		}(),
			`{"op":"d","ts_ms":1772366400123,"before":null,"after":null,` + src + `"snapshot":false,"inferred":true,"reason":"gone","changedBy":"kubectl/Update"}}`},
		{"snapshot create", func() change.Change {
			c := configMap(change.OpCreate, obj)
			c.Snapshot = true
			return c
		}(),
			`{"op":"r","ts_ms":1772366400123,"before":null,"after":{"metadata":{"name":"a"}},` + src + `"snapshot":true,"inferred":false,"reason":"","changedBy":"kubectl/Update"}}`},
		{"snapshot update", func() change.Change {
			c := configMap(change.OpUpdate, obj)
			c.Snapshot = true
			return c
		}(),
			`{"op":"r","ts_ms":1772366400123,"before":null,"after":{"metadata":{"name":"a"}},` + src + `"snapshot":true,"inferred":false,"reason":"","changedBy":"kubectl/Update"}}`},
		{"a later epoch", func() change.Change {
			c := configMap(change.OpUpdate, obj)
			c.Epoch = 3
			return c
		}(),
			`{"op":"u","ts_ms":1772366400123,"before":null,"after":{"metadata":{"name":"a"}},` + strings.Replace(src, `"epoch":0`, `"epoch":3`, 1) + `"snapshot":false,"inferred":false,"reason":"","changedBy":"kubectl/Update"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Append(nil, &tt.c))
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
		})
	}
}

func TestAppendWritesValidJSONWithoutAnObjectOrTimestamp(t *testing.T) {
	for _, op := range []change.Op{change.OpCreate, change.OpUpdate, change.OpDelete} {
		c := configMap(op, "")
		c.ObservedAt = time.Time{}
		c.Object = json.RawMessage{} // empty but non-nil
		got := Append(nil, &c)
		var env struct {
			Op     string          `json:"op"`
			TS     int64           `json:"ts_ms"`
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
		}
		if err := json.Unmarshal(got, &env); err != nil {
			t.Fatalf("%s: %v: %s", op, err, got)
		}
		if env.TS != 0 || string(env.Before) != "null" || string(env.After) != "null" {
			t.Errorf("%s: got %s", op, got)
		}
	}
}

func TestAppendAppendsToWhatIsAlreadyThere(t *testing.T) {
	c := configMap(change.OpCreate, `{}`)
	got := Append([]byte("prefix "), &c)
	if string(got[:7]) != "prefix " || !json.Valid(got[7:]) {
		t.Errorf("got %s", got)
	}
}

func TestAppendStringEscapesLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quo"te`, `back\slash`, "new\nline\r\t", "\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "ünïcødé ✓ 日本", "line\u2028sep\u2029", "bad\xffutf8\xc3",
		"emoji 🙂",
	} {
		got := AppendString(nil, s)
		want, _ := json.Marshal(s)
		if string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestAppendEscapesSourceFields(t *testing.T) {
	c := configMap(change.OpUpdate, `{}`)
	c.Key.Name = "we\"ird\\name\n"
	c.ChangedBy = "mgr<x>"
	got := Append(nil, &c)
	var env struct {
		Source struct {
			Name      string `json:"name"`
			ChangedBy string `json:"changedBy"`
			RV        string `json:"resourceVersion"`
		} `json:"source"`
	}
	if err := json.Unmarshal(got, &env); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if env.Source.Name != c.Key.Name || env.Source.ChangedBy != c.ChangedBy || env.Source.RV != "42" {
		t.Errorf("got %+v", env.Source)
	}
}

func TestOpCode(t *testing.T) {
	tests := []struct {
		op       change.Op
		snapshot bool
		inferred bool
		want     string
	}{
		{change.OpCreate, false, false, "c"},
		{change.OpUpdate, false, false, "u"},
		{change.OpDelete, false, false, "d"},
		{change.OpDelete, false, true, "d"},
		{change.OpCreate, true, false, "r"},
		{change.OpUpdate, true, false, "r"},
	}
	for _, tt := range tests {
		c := change.Change{Op: tt.op, Snapshot: tt.snapshot, Inferred: tt.inferred}
		if got := OpCode(&c); got != tt.want {
			t.Errorf("OpCode(%s, snapshot=%v, inferred=%v) = %q, want %q", tt.op, tt.snapshot, tt.inferred, got, tt.want)
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	c := configMap(change.OpUpdate, `{"metadata":{"name":"a","namespace":"ns"},"data":{"k":"v"}}`)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], &c)
	}
}

func TestAppendWithAnActorWritesItLastInTheSource(t *testing.T) {
	c := &change.Change{Cluster: "c", Resource: change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap"},
		Key: change.Key{Namespace: "a", Name: "x"}, RV: 5, Op: change.OpUpdate, Object: []byte(`{}`)}
	plain := string(Append(nil, c))
	with := string(AppendWith(nil, c, &change.Actor{Username: "dev-a@example.com", UserAgent: "kubectl/v1.36.5", AuditID: "id"}))
	want := strings.TrimSuffix(plain, "}}") + `,"user":"dev-a@example.com","userAgent":"kubectl/v1.36.5","auditID":"id"}}`
	if with != want {
		t.Errorf("got  %s\nwant %s", with, want)
	}
	if !json.Valid([]byte(with)) {
		t.Errorf("not JSON: %s", with)
	}
}

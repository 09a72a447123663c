package kafka

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
)

func TestTopicNameExpandsTheTemplate(t *testing.T) {
	res := change.Resource{Group: "example.com", Version: "v1beta1", Resource: "widgets"}
	for tmpl, want := range map[string]string{
		"":                         "kube.prod.example.com.widgets",
		"cdc-{cluster}-{resource}": "cdc-prod-widgets",
		"{group}.{version}":        "example.com.v1beta1",
		"fixed":                    "fixed",
	} {
		if got := TopicName(tmpl, "prod", res); got != want {
			t.Errorf("TopicName(%q) = %q, want %q", tmpl, got, want)
		}
	}
	if got := TopicName("", "prod", change.Resource{Resource: "configmaps"}); got != "kube.prod.core.configmaps" {
		t.Errorf("core group: %q", got)
	}
	// The same as one strings.Replacer pass (what TopicName was), on templates that are
	// not the usual ones: unknown and broken placeholders stay, values are not expanded
	// again.
	for _, tmpl := range []string{"{topic}.dlq", "{{cluster}}", "{cluster", "a{", "}{resource}{resource}", "{group}{", "x{versio}{version}"} {
		for _, r := range []change.Resource{res, {Resource: "pods", Version: "v1"}} {
			group := r.Group
			if group == "" {
				group = "core"
			}
			want := strings.NewReplacer("{cluster}", "c-{group}", "{group}", group, "{version}", r.Version, "{resource}", r.Resource).Replace(tmpl)
			if got := TopicName(tmpl, "c-{group}", r); got != want {
				t.Errorf("TopicName(%q, %+v) = %q, want %q", tmpl, r, got, want)
			}
		}
	}
}

func TestDecodeSourceFindsTheEnvelopesSourceEvenWhenTheObjectHasOne(t *testing.T) {
	c := change.Change{
		Resource: change.Resource{Version: "v1", Resource: "configmaps"},
		Key:      change.Key{Namespace: "ns", Name: "a"},
		UID:      "the-uid", RV: 42, Op: change.OpUpdate,
		Object:    json.RawMessage(`{"source":{"uid":"wrong","cluster":"wrong"}}`),
		ChangedBy: `evil,"source":{"uid":"worse"}`,
	}
	c.Cluster = "prod"
	v := envelope.Append(nil, &c)
	if !json.Valid(v) {
		t.Fatalf("invalid envelope %s", v)
	}
	src, err := decodeSource(v)
	if err != nil || src.UID != "the-uid" || src.Cluster != "prod" || src.ResourceVersion != "42" {
		t.Errorf("decodeSource = %+v, %v", src, err)
	}
}

func TestTheRecordTimeAndTsMsAreTheChangesOwnTimeElseWhenItWasObserved(t *testing.T) {
	own := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	seen := own.Add(time.Hour)
	for _, tc := range []struct {
		name       string
		time, seen time.Time
		want       time.Time
	}{
		{"own time", own, seen, own},
		{"no own time", time.Time{}, seen, seen},
		{"neither", time.Time{}, time.Time{}, time.UnixMilli(0)},
	} {
		c := chg(deployments, "ns", "a", 1, change.OpDelete, `{}`)
		c.Time, c.ObservedAt = tc.time, tc.seen
		msgs := appendMessages(nil, "t", &c, nil)
		var e decodedEnvelope
		if err := json.Unmarshal(msgs[0].Value, &e); err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs { // the delete and its tombstone
			if !m.Time.Equal(tc.want) {
				t.Errorf("%s: record %d time %v, want %v", tc.name, i, m.Time, tc.want)
			}
		}
		if e.TsMs != tc.want.UnixMilli() {
			t.Errorf("%s: ts_ms %d, want %d", tc.name, e.TsMs, tc.want.UnixMilli())
		}
	}
}

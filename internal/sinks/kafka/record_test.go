package kafka

import (
	"encoding/json"
	"testing"

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

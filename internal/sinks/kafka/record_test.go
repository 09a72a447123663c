package kafka

import (
	"encoding/json"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

func TestAppendStringEscapesLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "ctl\x00\x1f\n\r\t", "ünïcødé ✓", "bad\xffutf8", "<&>"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q encoded as %s: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q round-trips as %q, want %q", s, back, wantBack)
		}
	}
}

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

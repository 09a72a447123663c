package change

import (
	"encoding/json"
	"testing"
	"time"
)

func TestAnActorPrintsANearestMatchsDistanceToTheMillisecondAndNoneWhenExact(t *testing.T) {
	for _, tc := range []struct {
		a    Actor
		want string
	}{
		{Actor{Username: "dev", UserAgent: "kubectl/v1", Verb: "patch", AuditID: "a1", Match: MatchNearest, Distance: 1234567 * time.Microsecond},
			`{"username":"dev","userAgent":"kubectl/v1","verb":"patch","auditID":"a1","match":"nearest","distance":"1.235s"}`},
		{Actor{Username: "dev", Impersonator: "admin", Verb: "update", Subresource: "status", AuditID: "a2", Match: MatchExact, Distance: time.Second},
			`{"username":"dev","impersonator":"admin","userAgent":"","verb":"update","subresource":"status","auditID":"a2","match":"exact"}`},
	} {
		got, err := json.Marshal(&tc.a)
		if err != nil || string(got) != tc.want {
			t.Errorf("json.Marshal(%+v) = %s, %v\nwant %s", tc.a, got, err, tc.want)
		}
	}
}

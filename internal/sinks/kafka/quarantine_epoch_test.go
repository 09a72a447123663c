package kafka

import (
	"strings"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// After a time travel the restored cluster issues its RVs again: a dead-letter record
// carries its change's epoch (HeaderEpoch), and the newest quarantined version of a key is
// the one of the latest epoch, even at a lower RV than one of an earlier epoch.
func TestADeadLetterRecordCarriesItsEpochAndTheLatestEpochsIsTheNewest(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	s, _, _ := quarantineSink(t, k, Options{CreateTopics: true})
	big := `{"v":"` + strings.Repeat("x", quarantineLimit) + `"}`
	old := change.Batch{Resource: deployments, Checkpoint: 150, Changes: []change.Change{
		chg(deployments, "ns", "big", 150, change.OpCreate, big)}}
	if err := s.Write(ctx, old); err != nil {
		t.Fatal(err)
	}
	restored := chg(deployments, "ns", "big", 120, change.OpCreate, big)
	restored.Epoch = 1
	travel := change.Batch{Resource: deployments, Checkpoint: 130, Epoch: 1, Changes: []change.Change{restored},
		TimeTravel: &change.TimeTravel{Epoch: 1, Reason: change.TravelListBelowCheckpoint, Checkpoint: 150, ListRV: 130}}
	if err := s.Write(ctx, travel); err != nil {
		t.Fatal(err)
	}

	msgs, err := k.ReadAll(ctx, DeadLetterTopicName("", DefaultTopic, "prod", deployments))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, header(m, HeaderRV)+"@"+header(m, HeaderEpoch))
	}
	if strings.Join(got, " ") != "150@<missing> 120@1" {
		t.Errorf("dead-letter records (rv@epoch): %v, want 150@<missing> 120@1", got)
	}
	q, err := ReadQuarantine(ctx, "prod", s.opts, deployments, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r := q[change.Key{Namespace: "ns", Name: "big"}]; r.RV != 120 || r.Epoch != 1 {
		t.Errorf("ReadQuarantine's newest of ns/big: %+v, want RV 120 of epoch 1", r)
	}
}

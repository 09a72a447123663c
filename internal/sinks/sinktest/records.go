package sinktest

import (
	"fmt"
	"strings"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// checkOrder checks the per-key delivery property (as CockroachDB's cdctest validator
// does): each record of a key is either a copy of one already seen for that key (an
// at-least-once re-emit) or newer than every record seen for it, so a consumer that skips
// what it has seen never goes back in time. It returns one line per violation.
func checkOrder(recs []Record) []string {
	type seen struct {
		newest change.RV
		all    map[Record]bool
	}
	byKey := map[change.Key]*seen{}
	var bad []string
	for i, r := range recs {
		s := byKey[r.Key]
		if s == nil {
			s = &seen{all: map[Record]bool{}}
			byKey[r.Key] = s
		}
		switch {
		case s.all[r]:
		case len(s.all) > 0 && r.RV <= s.newest:
			bad = append(bad, fmt.Sprintf("record %d: %s after %s@%d", i, r, r.Key, s.newest))
		default:
			s.newest = r.RV
		}
		s.all[r] = true
	}
	return bad
}

// counts counts the records of each change.
func counts(recs []Record) map[Record]int {
	n := map[Record]int{}
	for _, r := range recs {
		n[r]++
	}
	return n
}

func recordOf(c change.Change) Record { return Record{Key: c.Key, RV: c.RV, Op: c.Op} }

func (r Record) String() string { return fmt.Sprintf("%s@%d:%s", r.Key, r.RV, r.Op) }

func formatRecords(recs []Record) string {
	s := make([]string, len(recs))
	for i, r := range recs {
		s[i] = r.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

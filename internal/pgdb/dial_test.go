package pgdb

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestWritersApplicationNameKeepsThePidWithinPostgreSQLsLimit(t *testing.T) {
	n := ApplicationName()
	if len(n) > 63 || !strings.HasPrefix(n, "kube-cdc/") || !strings.HasSuffix(n, fmt.Sprintf("/%d", os.Getpid())) {
		t.Errorf("ApplicationName() = %q", n)
	}
}

func TestScrubPasswordReplacesEveryPasswordGivenAndNothingForAnEmptyOne(t *testing.T) {
	if got := ScrubPassword("user u:hunter2 at db, again hunter2; pw2 too", "hunter2", "", "pw2"); got != "user u:******** at db, again ********; ******** too" {
		t.Errorf("got %q", got)
	}
	if got := ScrubPassword("nothing to hide", ""); got != "nothing to hide" {
		t.Errorf("an empty password changed %q", got)
	}
}

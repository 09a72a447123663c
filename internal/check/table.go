package check

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Table is check's output: a CHECK, STATUS, DETAIL table, written as rows come.
type Table struct {
	w            *tabwriter.Writer
	rows, failed int
}

// NewTable writes a table to w (Flush ends it).
func NewTable(w io.Writer) *Table {
	return &Table{w: tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)}
}

// Row adds a row with its status as it is (ok, warn).
func (t *Table) Row(what, status, detail string) {
	if t.rows == 0 {
		fmt.Fprintln(t.w, "CHECK\tSTATUS\tDETAIL")
	}
	t.rows++
	fmt.Fprintf(t.w, "%s\t%s\t%s\n", what, status, detail)
}

// Result adds a FAIL row with err when it is not nil, else an ok row with detail ok.
func (t *Table) Result(what string, err error, ok string) {
	if err != nil {
		t.failed++
		// One line per check: drivers' messages sometimes carry newlines.
		t.Row(what, "FAIL", strings.Join(strings.Fields(err.Error()), " "))
		return
	}
	t.Row(what, "ok", ok)
}

// Flush writes the table out, and fails naming how many checks failed, if any did.
func (t *Table) Flush() error {
	t.w.Flush()
	if t.failed > 0 {
		return fmt.Errorf("check: %d of %d checks failed", t.failed, t.rows)
	}
	return nil
}

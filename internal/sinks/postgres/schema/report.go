package schema

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// MigrateReporting brings one sink's schema up to date as `kube-cdc migrate` does and
// writes what it did to w, each line led by the sink's name: with partition, the steps
// of PartitionChanges as they end (with their time, and whether they held an exclusive
// lock) before Migrate's; then the migrations applied, or that the schema is up to date.
func MigrateReporting(ctx context.Context, w io.Writer, sink, dsn, schema string, partition bool) error {
	var applied []string
	var err error
	if partition {
		applied, err = PartitionChanges(ctx, dsn, schema, func(st PartitionStep) {
			lock := ""
			if st.Exclusive {
				lock = " (exclusive lock)"
			}
			fmt.Fprintf(w, "%s: %s: %s%s\n", sink, st.Name, st.Took.Round(1e6), lock)
		})
	} else {
		applied, err = Migrate(ctx, dsn, schema)
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", sink, err)
	}
	if len(applied) == 0 {
		fmt.Fprintf(w, "%s: schema %s is up to date\n", sink, schema)
	} else {
		fmt.Fprintf(w, "%s: applied %s to schema %s\n", sink, strings.Join(applied, ", "), schema)
	}
	return nil
}

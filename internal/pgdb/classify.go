package pgdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// classifiedError is an error with a message of our own (one line, naming the cause, no
// secrets) that still unwraps to the driver's error for errors.As.
type classifiedError struct {
	msg string
	err error
}

func (e *classifiedError) Error() string { return e.msg }
func (e *classifiedError) Unwrap() error { return e.err }

// Classify marks err terminal or leaves it retryable, in one place; the pipeline retries
// every error that is not retry.Terminal:
//
//   - wrong credentials (28P01, 28000), missing privilege (42501), an unknown database
//     (3D000) or schema objects (3F000, 42P01: run `kube-cdc migrate`), and data the
//     server rejects (classes 22 and 23, and other class-42 errors) do not heal by
//     themselves: terminal, with a message naming the cause (a data exception caused by
//     one change's values never gets here: the sink's Write quarantines that change
//     instead);
//   - connection refused, timeouts, terminated backends (57P01), restarts, serialization
//     failures and deadlocks (class 40), overload (class 53): retryable.
//
// The password never appears in the result: it is scrubbed from every message.
func Classify(err error, password string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Redact(err, password)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		what := ""
		switch {
		case pgErr.Code == "28P01" || pgErr.Code == "28000":
			what = "PostgreSQL rejected the credentials (check the DSN's user and password)"
		case pgErr.Code == "42501":
			what = "the PostgreSQL role lacks a privilege kube-cdc needs"
		case pgErr.Code == "3D000":
			what = "the PostgreSQL database does not exist"
		case pgErr.Code == "3F000" || pgErr.Code == "42P01":
			what = "kube-cdc's tables are missing (run `kube-cdc migrate`, or enable migrate)"
		case strings.HasPrefix(pgErr.Code, "22"), strings.HasPrefix(pgErr.Code, "23"),
			strings.HasPrefix(pgErr.Code, "42"):
			what = "PostgreSQL rejected the statement"
		}
		if what != "" {
			return retry.Terminal(&classifiedError{
				msg: ScrubPassword(fmt.Sprintf("%s: %s (SQLSTATE %s)", what, pgErr.Message, pgErr.Code), password),
				err: err,
			})
		}
		return Redact(err, password)
	}
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return retry.Terminal(&classifiedError{msg: "parse the PostgreSQL DSN: " + ScrubPassword(parseErr.Error(), password), err: err})
	}
	return Redact(err, password)
}

// Redact returns err with password scrubbed from its message, keeping the chain.
func Redact(err error, password string) error {
	if err == nil {
		return nil
	}
	msg := ScrubPassword(err.Error(), password)
	if msg == err.Error() {
		return err
	}
	return &classifiedError{msg: msg, err: err}
}

// ScrubPassword replaces every password in s with ********: the one scrubber of
// PostgreSQL passwords, for the sink's errors, Check's and the options' validation.
// An empty password scrubs nothing.
func ScrubPassword(s string, passwords ...string) string {
	for _, pw := range passwords {
		if pw != "" {
			s = strings.ReplaceAll(s, pw, "********")
		}
	}
	return s
}

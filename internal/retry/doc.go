// Package retry classifies errors as terminal or retryable, in one place, and retries the
// retryable ones with exponential backoff and jitter.
//
// An error is retryable unless something marked it terminal with Terminal: connection
// loss, timeouts, server shutdowns and overload all heal by themselves; wrong credentials,
// missing privileges and invalid input do not, and retrying them only hides them.
package retry

package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
)

// A file checkpoint store has one writer, the running kube-cdc, which holds the file's
// lock for as long as it runs; status is run exactly then. So status opens the file read
// only (never creating it, never waiting), and while a writer holds it, reads a
// consistent copy that the running kube-cdc serves at metrics.address
// (/checkpoints/{sink}, to this machine only) instead: the numbers are the daemon's own,
// as of its last durable write. Status neither waits for the lock nor delays the daemon.

// noFile is the store of a file that does not exist yet: nothing is checkpointed.
type noFile struct{ checkpoint.None }

// readFileStore opens sc's file store to read, or the running daemon's copy of it; note
// says what status read when it is not the file itself. closeStore removes the copy.
func readFileStore(ctx context.Context, cfg *config.Config, sc config.Sink) (store checkpoint.Store, closeStore func(), note string, err error) {
	path := sc.Checkpoint.Path
	if path == "" {
		path = checkpoint.DefaultPath
	}
	f, err := checkpoint.OpenFileReadOnly(path)
	switch {
	case err == nil:
		return f, func() { f.Close() }, "", nil
	case errors.Is(err, fs.ErrNotExist):
		return noFile{}, func() {}, fmt.Sprintf("checkpoint file %s does not exist: nothing is checkpointed yet (run creates it)", path), nil
	case !errors.Is(err, checkpoint.ErrHeld):
		return nil, nil, "", err
	}
	f, tmp, err := daemonCopy(ctx, cfg.Metrics.Address, sc.Name, path)
	if err != nil {
		return nil, nil, "", fmt.Errorf("file %s is held by a running process, and status reads a copy from the running kube-cdc: %w", path, err)
	}
	return f, func() { f.Close(); os.Remove(tmp) }, "", nil
}

// daemonCopy fetches the copy of the sink's checkpoint file the kube-cdc at address
// serves, into a temporary file (tmp, for the caller to remove), and opens it.
func daemonCopy(ctx context.Context, address, sink, path string) (f *checkpoint.File, tmp string, err error) {
	if address == "" {
		return nil, "", errors.New("metrics.address is not set, and status asks the running kube-cdc for a copy there")
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, "", fmt.Errorf("metrics.address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/checkpoints/" + sink
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("no kube-cdc answers at %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	want, err := filepath.Abs(path)
	if err != nil {
		want = path
	}
	if got := resp.Header.Get(metrics.CheckpointPathHeader); got != want {
		return nil, "", fmt.Errorf("the kube-cdc at %s keeps sink %s's checkpoints in %s, not %s (another daemon's?)", url, sink, got, want)
	}
	out, err := os.CreateTemp("", "kube-cdc-checkpoint-*.db")
	if err != nil {
		return nil, "", fmt.Errorf("copy %s: %w", url, err)
	}
	tmp = out.Name()
	_, err = io.Copy(out, resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		f, err = checkpoint.OpenFileReadOnly(tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, "", fmt.Errorf("copy %s: %w", url, err)
	}
	return f, tmp, nil
}

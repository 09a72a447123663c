package metrics

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
)

// CheckpointFile is a sink's file checkpoint store as /checkpoints/{sink} serves it
// (checkpoint.File).
type CheckpointFile interface {
	// WriteSnapshot writes a consistent copy of the file to w.
	WriteSnapshot(w io.Writer) (int64, error)
	// Path is where the file is.
	Path() string
}

// CheckpointPathHeader names, in the answer of /checkpoints/{sink}, the path of the file
// copied, so that a reader can tell the file it means from another daemon's.
const CheckpointPathHeader = "Kube-Cdc-Checkpoint-Path"

// ServeCheckpointFile has the endpoint serve a copy of the sink's checkpoint file at
// /checkpoints/{sink}, for `kube-cdc status` while this process holds the file's writer
// lock. The file names objects (namespaces, names, uids, resource versions, no content),
// so it is served to clients on this machine only (loopback addresses): a file store is
// read where it lives. A later call for the same sink replaces f.
func (m *Metrics) ServeCheckpointFile(sink string, f CheckpointFile) {
	if m == nil {
		return
	}
	m.checkpointFiles.Store(sink, f)
}

func (m *Metrics) serveCheckpointFile(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		http.Error(w, "the checkpoint file is served to this machine only", http.StatusForbidden)
		return
	}
	var v any
	ok := m != nil
	if ok {
		v, ok = m.checkpointFiles.Load(r.PathValue("sink"))
	}
	if !ok {
		http.Error(w, "no sink of that name keeps a checkpoint file here", http.StatusNotFound)
		return
	}
	f := v.(CheckpointFile)
	// The copy goes to a buffer first: a failure half way must be an error status, not a
	// truncated file with 200.
	var b bytes.Buffer
	if _, err := f.WriteSnapshot(&b); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(CheckpointPathHeader, f.Path())
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	_, _ = b.WriteTo(w)
}

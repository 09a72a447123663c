package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// A file store has one writer: the process that opened it with OpenFile holds an
// exclusive lock (flock) on it until it closes it. The commands that only read it
// (status, check) must neither wait for nor take that lock while the daemon runs, so
// they open it read-only (OpenFileReadOnly, a shared lock, refused at once while a
// writer holds the file: ErrHeld) and, when it is held, read a copy the writer makes
// (WriteSnapshot), which the running daemon serves on its metrics endpoint.

// ErrHeld is OpenFileReadOnly's error while another process (a running kube-cdc) has the
// file open for writing.
var ErrHeld = errors.New("held by another process")

// readOnlyWait is how long OpenFileReadOnly tries the shared lock: a writer holds its
// lock for as long as it runs, so waiting longer gains nothing.
const readOnlyWait = 200 * time.Millisecond

// OpenFileReadOnly opens the existing file store at path to read only, without creating,
// changing or waiting for it: an error that wraps fs.ErrNotExist when there is no file,
// ErrHeld while a writer holds it. Its Commit, Intend and ForgetScopes fail.
func OpenFileReadOnly(path string) (*File, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: readOnlyWait,
		FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		err = ErrHeld
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint file %s: %w", path, err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSinks) == nil {
			return errors.New("not a kube-cdc checkpoint file (no sinks bucket)")
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open checkpoint file %s: %w", path, err)
	}
	o := FileOptions{}.withDefaults()
	return &File{db: db, clock: o.Clock, pending: &overlay{}}, nil
}

// WriteSnapshot writes a consistent copy of the file as of its last durable write (a
// bbolt file, which OpenFileReadOnly opens) to w, without stopping Commits meanwhile.
// Commits not yet flushed (FileOptions.FlushInterval) are not in it: at most one flush
// interval of them.
func (f *File) WriteSnapshot(w io.Writer) (int64, error) {
	var n int64
	err := f.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("copy the checkpoint file: %w", err)
	}
	return n, nil
}

// Path is the file's absolute path (as given when it cannot be made absolute).
func (f *File) Path() string {
	if p, err := filepath.Abs(f.db.Path()); err == nil {
		return p
	}
	return f.db.Path()
}

// CheckFile says whether run could open the file store at path, as `kube-cdc check`
// shows it, without opening it for writing (which would wait for, and then fail beside,
// the running kube-cdc that holds it): the detail of an ok row, or why run would fail.
// A file held by another process is reported, not failed: it is the running daemon
// whose configuration is being checked, most often.
func CheckFile(path string) (string, error) {
	f, err := OpenFileReadOnly(path)
	switch {
	case err == nil:
		f.Close()
		if err := unix.Access(path, unix.W_OK); err != nil {
			return "", fmt.Errorf("checkpoint file %s: run could not write it: %w", path, err)
		}
		return "checkpoint file " + path, nil
	case errors.Is(err, ErrHeld):
		return "checkpoint file " + path + " in use by a running kube-cdc (another run with it would fail to open it)", nil
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(path)
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return "", fmt.Errorf("checkpoint file %s does not exist, and run could not create it in %s: %w", path, dir, err)
		}
		return "checkpoint file " + path + " does not exist yet (run creates it)", nil
	}
	return "", err
}

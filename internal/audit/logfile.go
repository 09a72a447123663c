package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Position is how far an audit log file has been read: the file (its inode, which a
// rename keeps) and the offset after the last complete line stored.
type Position struct {
	Inode  uint64
	Offset int64
}

// PositionStore stores events together with the position they were read up to, in one
// transaction, so a restart resumes after the last line stored and stores none twice.
type PositionStore interface {
	// Position returns the position stored for path; the zero Position when none is.
	Position(ctx context.Context, path string) (Position, error)
	StoreAt(ctx context.Context, events []Event, path string, pos Position) error
}

// LogFile follows an apiserver audit log file (--audit-log-path, format json: one Event
// per line) as the webhook's batches are received: the same events kept, the same
// counts. It follows the file across rotation (the file renamed and a new one created
// under the path: the renamed one, found in the same directory by its inode, is read to
// its end first) and truncation (read again from the start), and checkpoints its
// position with the events it stores.
type LogFile struct {
	Path  string
	Store PositionStore
	// Poll is how often the file is looked at for more lines or a rotation. Default 1s.
	Poll time.Duration
	// BatchLines caps the lines stored in one transaction. Default 500.
	BatchLines int
	Log        *slog.Logger
	Observer   Observer
}

// Run follows the file until ctx ends. A missing file is waited for.
func (l *LogFile) Run(ctx context.Context) error {
	poll := l.Poll
	if poll <= 0 {
		poll = time.Second
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pos, err := l.Store.Position(ctx, l.Path)
	if err != nil {
		return fmt.Errorf("audit log %s: read the stored position: %w", l.Path, err)
	}
	var f *os.File // the file being read, at pos.Offset
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if f == nil {
			f, pos, err = l.open(pos)
			if err != nil {
				log.Warn("cannot open the audit log; trying again", "path", l.Path, "error", err)
			}
		}
		if f != nil {
			if pos, err = l.drain(ctx, f, pos); err != nil {
				return err
			}
			// Rotated: the path names another file now. What was written to the old one
			// before the rename has just been read; read the new one from its start.
			if ino, err := inodeOf(l.Path); err == nil && ino != pos.Inode {
				if pos, err = l.drain(ctx, f, pos); err != nil {
					return err
				}
				f.Close()
				f, pos = nil, Position{Inode: ino}
				continue
			}
			// Truncated under the reader (copytruncate): start again.
			if st, err := f.Stat(); err == nil && st.Size() < pos.Offset {
				log.Info("the audit log was truncated; reading it from the start", "path", l.Path)
				pos.Offset = 0
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return fmt.Errorf("audit log %s: %w", l.Path, err)
				}
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// open opens the file pos names and seeks to pos.Offset: the file at Path when its inode
// is pos's (or pos is zero), else the file of the directory with that inode (the one
// rotated away since), else Path from its start.
func (l *LogFile) open(pos Position) (*os.File, Position, error) {
	path := l.Path
	if pos.Inode != 0 {
		if ino, err := inodeOf(l.Path); err != nil || ino != pos.Inode {
			path = ""
			if rotated, ok := findInode(filepath.Dir(l.Path), pos.Inode); ok {
				path = rotated
			}
		}
	}
	if path == "" { // the file read before is gone: start with the current one
		path, pos = l.Path, Position{}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, pos, err
	}
	ino, err := inodeOfFile(f)
	if err != nil {
		f.Close()
		return nil, pos, err
	}
	if ino != pos.Inode {
		pos = Position{Inode: ino}
	}
	st, err := f.Stat()
	if err == nil && st.Size() < pos.Offset {
		pos.Offset = 0 // truncated while kube-cdc was not running
	}
	if _, err := f.Seek(pos.Offset, io.SeekStart); err != nil {
		f.Close()
		return nil, pos, err
	}
	// A rotated file is read to its end, then Run finds Path naming another file and
	// reads that from its start.
	return f, pos, nil
}

// drain reads the complete lines from pos to the end of f, storing them in batches with
// their position, and returns the position after the last one stored. A line without its
// newline yet is left for the next drain.
func (l *LogFile) drain(ctx context.Context, f *os.File, pos Position) (Position, error) {
	batch := l.BatchLines
	if batch <= 0 {
		batch = 500
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var events []Event
	var counts Counts
	lines := 0
	next := pos
	flush := func() error {
		if lines == 0 {
			return nil
		}
		for {
			err := l.Store.StoreAt(ctx, events, l.Path, next)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.observe(OutcomeStoreFailed, &counts)
			if l.Log != nil {
				l.Log.Warn("cannot store audit events read from the log; trying again", "path", l.Path, "error", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		l.observe(OutcomeStored, &counts)
		pos = next
		events, counts, lines = events[:0], Counts{}, 0
		return nil
	}
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// An incomplete line: read it again next time.
			if _, serr := f.Seek(next.Offset, io.SeekStart); serr != nil {
				return pos, fmt.Errorf("audit log %s: %w", l.Path, serr)
			}
			return pos, flush()
		}
		if err != nil {
			return pos, fmt.Errorf("audit log %s: %w", l.Path, err)
		}
		next.Offset += int64(len(line))
		lines++
		if line = bytes.TrimSpace(line); len(line) > 0 {
			e, keep, c, err := DecodeEvent(line)
			switch {
			case err != nil:
				l.observe(OutcomeMalformed, nil)
				if l.Log != nil {
					l.Log.Warn("skipped a malformed line of the audit log", "path", l.Path, "offset", next.Offset-int64(len(line)), "error", oneLine(err))
				}
			case keep:
				events = append(events, e)
			}
			counts.Add(c)
		}
		if lines >= batch {
			if err := flush(); err != nil {
				return pos, err
			}
		}
	}
}

func (l *LogFile) observe(outcome string, c *Counts) {
	if l.Observer == nil {
		return
	}
	var events map[string]int
	if c != nil {
		events = map[string]int{"kept": c.Kept, "refused": c.Refused, "dry_run": c.DryRun, "not_write": c.NotWrite}
	}
	l.Observer.AuditRequest(outcome, events)
}

func inodeOf(path string) (uint64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return sysInode(st)
}

func inodeOfFile(f *os.File) (uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return sysInode(st)
}

func sysInode(st os.FileInfo) (uint64, error) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("no inode on this platform")
	}
	return s.Ino, nil
}

// findInode returns the file of dir with inode ino.
func findInode(dir string, ino uint64) (string, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if i, err := inodeOf(p); err == nil && i == ino {
			return p, true
		}
	}
	return "", false
}

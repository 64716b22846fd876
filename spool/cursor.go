package spool

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// A cursor file keeps one destination's durable position:
//
//	magic   [4]byte "OGSC"
//	version uint32  1
//	pos     uint64
//	crc     uint32  CRC32C of the 16 bytes before it
//
// It is named by the hex of the destination name, so any name is a safe file name, and it is
// replaced atomically: written to a temporary file, synced, renamed over, directory synced.
const (
	cursorMagic   = "OGSC"
	cursorSize    = 20
	cursorSuffix  = ".cursor"
	tmpSuffix     = ".tmp"
	cursorVersion = 1
)

var (
	badCursors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_bad_cursors_total",
		Help: "Cursor files that could not be read at start-up; their destination replays the whole spool.",
	})
	releasedCursors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_spool_released_destinations_total",
		Help: "Destinations found in the spool but no longer configured; their hold on the spool was released.",
	})
)

var errBadCursor = errors.New("spool: bad cursor file")

func cursorName(dest string) string { return hex.EncodeToString([]byte(dest)) + cursorSuffix }

func parseCursorName(name string) (string, bool) {
	h, ok := strings.CutSuffix(name, cursorSuffix)
	if !ok {
		return "", false
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func encodeCursor(p Pos) []byte {
	b := make([]byte, 0, cursorSize)
	b = append(b, cursorMagic...)
	b = binary.LittleEndian.AppendUint32(b, cursorVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(p))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCursor(b []byte) (Pos, error) {
	if len(b) != cursorSize || string(b[:4]) != cursorMagic ||
		binary.LittleEndian.Uint32(b[4:]) != cursorVersion ||
		crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, errBadCursor
	}
	return Pos(binary.LittleEndian.Uint64(b[8:])), nil
}

// writeCursorTmp writes dest's position to its temporary file and syncs it; a rename then
// publishes it.
func (s *Spool) writeCursorTmp(dest string, p Pos) error {
	tmp := s.path(cursorName(dest) + tmpSuffix)
	f, err := s.fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(encodeCursor(p), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
	}
	return err
}

func (s *Spool) readCursor(name string) (Pos, error) {
	f, err := s.fs.Open(s.path(name), false)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [cursorSize + 1]byte
	n, _ := f.ReadAt(b[:], 0)
	return decodeCursor(b[:n])
}

// Checkpoint persists the position of every destination that moved, then deletes the segments
// every destination has finished. The housekeeper runs it every CheckpointInterval and Close
// runs it last; callers may run it too. Safe for concurrent use.
func (s *Spool) Checkpoint() error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	s.mu.Lock()
	readers := s.mu.readers
	s.mu.Unlock()

	// Persist first, delete after: a crash in between leaves segments that the persisted
	// positions already passed, which the next start deletes.
	type move struct {
		r *Reader
		p Pos
	}
	var moved []move
	var err error
	for _, r := range readers {
		p := r.Position()
		if p == r.persisted {
			continue
		}
		if werr := s.writeCursorTmp(r.name, p); werr != nil {
			err = werr
			continue
		}
		moved = append(moved, move{r, p})
	}
	renamed := moved[:0]
	for _, m := range moved {
		if rerr := s.fs.Rename(s.path(cursorName(m.r.name)+tmpSuffix), s.path(cursorName(m.r.name))); rerr != nil {
			err = rerr
			continue
		}
		renamed = append(renamed, m)
	}
	if len(renamed) > 0 {
		if derr := s.fs.SyncDir(s.cfg.Dir); derr != nil {
			// The renames may not survive a crash: keep what the old positions need.
			return errors.Join(err, derr)
		}
	}
	for _, m := range renamed {
		m.r.persisted = m.p
	}
	low := Pos(^uint64(0))
	for _, r := range readers {
		low = min(low, r.persisted)
	}
	return errors.Join(err, s.deleteFinished(low))
}

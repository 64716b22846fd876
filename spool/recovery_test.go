package spool

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"
)

func segPath(seq uint64) string { return testDir + "/" + segmentName(seq) }

func TestRecoverTornTail(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncAlways), fs, "a")
	appendN(t, s, 0, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := fs.ReadFile(segPath(1))
	fs.WriteFile(segPath(1), data[:len(data)-40]) // record 4 cut 40 bytes short
	var got []int
	torn := delta(recTornTail, func() {
		cut := delta(truncatedBytes, func() {
			s = mustOpen(t, testConfig(SyncAlways), fs, "a")
		})
		if cut != 116-40 {
			t.Errorf("truncated %v bytes, want %d", cut, 116-40)
		}
	})
	if data, _ := fs.ReadFile(segPath(1)); len(data) != headerSize+4*116 {
		t.Fatalf("segment not truncated: %d bytes", len(data))
	}
	got = drain(t, s.Reader("a"), true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if torn != 1 || !slices.Equal(got, seq(0, 4)) {
		t.Fatalf("torn tail: counted %v, read %v", torn, got)
	}
}

func TestRecoverFlippedBits(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int // byte of record 2 to flip: CRC, length, items, payload
	}{{"crc", 1}, {"length", 5}, {"items", 9}, {"zero", 14}, {"payload", 60}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewCrashFS()
			s := mustOpen(t, testConfig(SyncAlways), fs, "a", "b")
			appendN(t, s, 0, 12) // segment 1 holds 0-7 (sealed), segment 2 holds 8-11
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for _, seg := range []uint64{1, 2} {
				data, _ := fs.ReadFile(segPath(seg))
				data[headerSize+2*116+tc.at] ^= 0x10 // the third record of the segment
				fs.WriteFile(segPath(seg), data)
			}
			var recs, nbytes float64
			var gotA, gotB []int
			recs = delta(corruptRecords, func() {
				nbytes = delta(corruptBytes, func() {
					s = mustOpen(t, testConfig(SyncAlways), fs, "a", "b")
					gotA = drain(t, s.Reader("a"), true)
					gotB = drain(t, s.Reader("b"), true)
				})
			})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want := []int{0, 1, 3, 4, 5, 6, 7, 8, 9, 11}
			if !slices.Equal(gotA, want) || !slices.Equal(gotB, want) {
				t.Fatalf("read a %v b %v, want %v", gotA, gotB, want)
			}
			// Once in the last segment at start-up, once in the sealed one by the first reader.
			if recs != 2 || nbytes != 2*116 {
				t.Fatalf("counted %v corrupt records, %v bytes; want 2, 232", recs, nbytes)
			}
		})
	}
}

func TestRecoverZeroLengthAndHeaderless(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncAlways), fs, "a")
	appendN(t, s, 0, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fs.WriteFile(segPath(2), nil)                      // created, crash before the header
	fs.WriteFile(segPath(3), []byte(segmentMagic[:2])) // header torn
	n := delta(recEmpty, func() { s = mustOpen(t, testConfig(SyncAlways), fs, "a") })
	// Only the last headerless segment is a torn creation; segment 2 is empty, also removed.
	if n != 2 {
		t.Fatalf("counted %v empty segments, want 2", n)
	}
	appendN(t, s, 3, 5)
	if got := drain(t, s.Reader("a"), true); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("read %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, fs); !slices.Equal(got, []string{segmentName(4)}) {
		t.Fatalf("segments %v, want only the new one", got)
	}
}

func TestRecoverSegmentFromTheFuture(t *testing.T) {
	fs := NewCrashFS()
	s := mustOpen(t, testConfig(SyncAlways), fs, "a")
	appendN(t, s, 0, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	future := appendSegmentHeader(nil, 2)
	binary.LittleEndian.PutUint32(future[4:], segmentVersionEncoded+1)
	future = append(future, "whatever a newer format holds"...)
	fs.WriteFile(segPath(2), future)
	garbage := []byte("not a segment at all, just bytes")
	fs.WriteFile(segPath(3), garbage)
	var nf, nu float64
	nf = delta(recFuture, func() {
		nu = delta(recUnreadable, func() { s = mustOpen(t, testConfig(SyncAlways), fs, "a") })
	})
	if nf != 1 || nu != 1 {
		t.Fatalf("counted future %v unreadable %v, want 1 and 1", nf, nu)
	}
	appendN(t, s, 3, 5)
	if got := drain(t, s.Reader("a"), true); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("read %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	kept, err := fs.ReadFile(segPath(2) + asideSuffix)
	if err != nil || !slices.Equal(kept, future) {
		t.Fatalf("future segment not kept aside intact: %v", err)
	}
	if got := segFiles(t, fs); !slices.Equal(got, []string{segmentName(2) + asideSuffix, segmentName(3) + asideSuffix, segmentName(4)}) {
		t.Fatalf("files %v", got)
	}
}

// TestGroupCommit holds the first sync until every other appender has written its record:
// they must all share the second sync.
func TestGroupCommit(t *testing.T) {
	const n = 16
	fs := NewCrashFS()
	cfg := testConfig(SyncAlways)
	cfg.SegmentBytes = 64 << 10 // no rotation, whose sync would wait on the held one
	s := mustOpen(t, cfg, fs, "a")
	appendN(t, s, 0, 1) // creates the segment: its syncs are not commits
	started := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	fs.SyncHook = func() {
		once.Do(func() {
			close(started)
			<-release
		})
	}
	syncsBefore := fs.Syncs()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := s.Append(Record{Signal: 1, Items: 1, Payload: payload(1)})
		errs <- err
	}()
	<-started
	for i := 2; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)})
			errs <- err
		}()
	}
	// Wait, boundedly, until every other appender waits for a commit. (Their frames are in
	// the tail, to be written by that commit, so counting writes would not tell.)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		waiting := len(s.mu.waiters)
		s.mu.Unlock()
		if waiting == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d appenders wait for a commit", waiting, n-1)
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := fs.Syncs() - syncsBefore; got != 2 {
		t.Fatalf("%d appends took %d syncs, want 2", n, got)
	}
	got := drain(t, s.Reader("a"), true)
	slices.Sort(got)
	if !slices.Equal(got, seq(0, n+1)) {
		t.Fatalf("read %v", got)
	}
	fs.SyncHook = nil
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

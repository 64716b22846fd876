package spool

import "testing"

// Fill is what the spool holds less the segment being written, and its bound: 16 header bytes
// per segment and 116 per record, 8 records a segment (testConfig).
func TestFill(t *testing.T) {
	cfg := testConfig(SyncNone)
	s := mustOpen(t, cfg, NewCrashFS(), "a")
	defer s.Close()
	sealedBytes := func() int64 {
		got, limit := s.Fill()
		if limit != cfg.MaxBytes {
			t.Fatalf("Fill's bound %d, want -spool.max-bytes %d", limit, cfg.MaxBytes)
		}
		return got
	}
	if got := sealedBytes(); got != 0 {
		t.Fatalf("an empty spool: %d sealed bytes", got)
	}
	appendN(t, s, 0, 3)
	if got, all := sealedBytes(), s.Bytes(); got != 0 || all != 16+3*116 {
		t.Fatalf("three records in the first segment: %d sealed of %d, want 0 of %d", got, all, 16+3*116)
	}
	appendN(t, s, 3, 10) // records 0-7 fill the first segment; 8-9 open the second
	if got, all := sealedBytes(), s.Bytes(); got != 16+8*116 || all != 2*16+10*116 {
		t.Fatalf("ten records: %d sealed of %d, want %d of %d", got, all, 16+8*116, 2*16+10*116)
	}
}

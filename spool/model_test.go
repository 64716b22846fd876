package spool

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// The model-based randomized test of the spool: random scripts of appends, reads, finishes,
// drops, checkpoints, restarts, crashes at any file-system operation, a disk that fills, and
// what -dest.file reloads do (AddReader, Away, Back, Rewind), run against the real spool over
// CrashFS and checked against the model in model_run_test.go.
//
//	go test ./spool -run 'TestSpoolModel$'                 # modelRuns scripts, seeds from 1
//	go test ./spool -run 'TestSpoolModel$' -spool.model.seed=SEED -spool.model.n=1
//	go test ./spool -run 'TestSpoolModel$' -spool.model.script=FILE   # a script's text form
//	go test ./spool -run '^$' -fuzz FuzzSpoolModel -fuzzminimizetime 1x
//	make soak-spool                                        # many more, new seeds each run
//
// A script replays the same operations with the same crash points. What can vary is when the
// housekeeper runs the checkpoint a refused append asks for, concurrently with the script: a
// failure that depends on it may need a few replays.
var (
	modelN = flag.Int("spool.model.n", modelRuns,
		"scripts TestSpoolModel runs (default "+fmt.Sprint(modelRuns)+", fewer under -race)")
	modelSeed = flag.Uint64("spool.model.seed", 1,
		"seed of the first script of TestSpoolModel; the i-th uses seed+i (0: from the clock)")
	modelOps = flag.Int("spool.model.ops", 40,
		"operations of a generated script (default 40)")
	modelScriptFile = flag.String("spool.model.script", "",
		"file holding a script in the text form a failure prints: TestSpoolModel runs it alone")
	modelShrink = flag.Bool("spool.model.shrink", true,
		"shrink a failing script to fewer operations before printing it (default true)")
)

func TestSpoolModel(t *testing.T) {
	if *modelScriptFile != "" {
		text, err := os.ReadFile(*modelScriptFile)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := parseModelScript(string(text))
		if err != nil {
			t.Fatal(err)
		}
		checkModelScript(t, sc, "from "+*modelScriptFile)
		return
	}
	base := *modelSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	start := time.Now()
	ops := 0
	for i := range *modelN {
		seed := base + uint64(i)
		sc := genModelScript(seedChoices(seed), *modelOps)
		ops += len(sc.ops)
		if !checkModelScript(t, sc, fmt.Sprintf("seed %d: replay with go test ./spool -run 'TestSpoolModel$' -spool.model.seed=%d -spool.model.n=1", seed, seed)) {
			return
		}
	}
	t.Logf("%d scripts, %d operations, seeds %d to %d, in %v", *modelN, ops, base, base+uint64(*modelN)-1, time.Since(start).Round(time.Millisecond))
}

type randChoices struct{ r *rand.Rand }

func (c randChoices) intn(n int) int  { return c.r.IntN(n) }
func (c randChoices) exhausted() bool { return false }

func seedChoices(seed uint64) choices {
	return randChoices{rand.New(rand.NewPCG(seed, 0x5b001))}
}

// checkModelScript runs sc and reports a failure with the script, shrunk, and its trace.
func checkModelScript(t *testing.T, sc modelScript, origin string) bool {
	t.Helper()
	return checkModelScriptShrink(t, sc, origin, *modelShrink)
}

func checkModelScriptShrink(t *testing.T, sc modelScript, origin string, shrink bool) bool {
	t.Helper()
	trace, err := runModel(sc)
	if err == nil {
		return true
	}
	var f *modelFailure
	if !errors.As(err, &f) {
		t.Fatalf("%s: %v", origin, err)
	}
	small := sc
	if shrink {
		small, trace, err = shrinkModelScript(sc, f.kind, trace, err)
	}
	t.Fatalf("%s\n\n%v\n\nscript (%d of %d operations; save it to a file and replay with -spool.model.script=FILE):\n%s\ntrace:\n%s",
		origin, err, len(small.ops), len(sc.ops), small, strings.Join(trace, "\n"))
	return false
}

// shrinkModelScript removes operations, in runs of halving length, as long as the script
// still fails the same way. Bounded: at most a few hundred reruns.
func shrinkModelScript(sc modelScript, kind string, trace []string, err error) (modelScript, []string, error) {
	budget := 400
	for n := len(sc.ops) / 2; n >= 1 && budget > 0; n /= 2 {
		for i := 0; i+n <= len(sc.ops) && budget > 0; {
			budget--
			try := modelScript{cfg: sc.cfg, ops: append(append([]modelOp(nil), sc.ops[:i]...), sc.ops[i+n:]...)}
			tr, e := runModel(try)
			var f *modelFailure
			if errors.As(e, &f) && f.kind == kind {
				sc, trace, err = try, tr, e
				continue
			}
			i++
		}
	}
	return sc, trace, err
}

// TestSpoolModelRegressions replays scripts that once broke a promise.
func TestSpoolModelRegressions(t *testing.T) {
	for _, tc := range modelRegressions {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gap != "" && !*tc.fixed {
				t.Skipf("known gap, allowed until %s is true: %s", tc.gap, tc.name)
			}
			sc, err := parseModelScript(tc.script)
			if err != nil {
				t.Fatal(err)
			}
			checkModelScript(t, sc, tc.name)
		})
	}
}

var modelRegressions = []struct {
	name   string
	script string
	// gap names the known-gap variable (model_run_test.go) the case needs true, fixed points
	// to it; the case is skipped while it is false.
	gap   string
	fixed *bool
}{
	{
		// A process in interval mode whose sync failed at its Close left its last segment with
		// bytes the kernel took as written; the next start, in none mode, synced nothing and
		// created segments after it, so the start after that, in interval mode, synced it as a
		// sealed segment without writing it again, and a power loss left a record's place
		// zeroed: a corrupt record. A start in none mode now writes its last segment again.
		name: "NoneStartAfterFailedIntervalSyncRewritesItsLastSegment",
		script: `
config sync=interval segment=1024 max=2048 full=refuse tail=1048576 capacity=5121 dests=b,c
drain
syncfail on
restart clean sync=none
append 7 400
restart clean sync=interval
restart power
`,
	},
	{
		// A destination away at a clean stop and listed by the next start is back, and owed
		// what was appended while it was away; that start's checkpoint could not write its
		// cursor without the Away mark on a full disk. Killed, then started without it, the
		// spool released it counting only what it owed before it went away. A checkpoint with
		// no room for its temporary file now clears the mark in the cursor's own file.
		name: "BackAtStartOnAFullDiskReleasedCountsAllItOwed",
		script: `
config sync=none segment=1024 max=8192 full=refuse tail=0 capacity=0 dests=a,c
append 1 20
capacity 2717
away c
checkpoint
append 8 400
restart clean
restart kill dests=a sync=interval
`,
	},
	{
		// A destination removed (Away) and brought back by AddReader kept, until the next
		// checkpoint, a cursor on disk that said where it went away. A power loss (or a kill)
		// before that checkpoint, then a start without it, released it counting only what it
		// owed before it went away: the four records appended after it came back, its own,
		// were dropped uncounted. AddReader writes its cursor at once now.
		name: "BackDestinationReleasedCountsWhatItOwedSinceBack",
		script: `
config sync=always segment=1024 max=4096 full=refuse tail=1048576 capacity=0 dests=a
append 2 100
away a
drain
addreader a
append 4 20
restart power dests=b
`,
	},
	{
		// A start after a kill, on a disk holding more than its capacity (it shrank under the
		// spool's files), writes the killed process's last segment again in place to sync what
		// it left unsynced. CrashFS refused that write as if it grew the file, so the sync was
		// skipped as for a full disk, and a power loss an interval later took records the
		// killed process had acknowledged. Writing a file's own bytes again takes no space, on
		// CrashFS as on a disk that allocates in place.
		name: "InheritedSegmentSyncedOnADiskPastItsCapacity",
		script: `
config sync=interval segment=1024 max=3072 full=refuse tail=4096 capacity=0 dests=a,c
append 8 400
capacity 2533
restart kill
tick
restart power dests=a,b
`,
	},
	{
		// A destination removed with a backlog pinned the spool for good: every later append
		// was refused though the destination left configured had caught up. Held past
		// -spool.removed-hold, it is released and what it owed counted as removed; brought
		// back, it is new.
		name: "RemovedDestinationReleasedPastItsHold",
		script: `
config sync=interval segment=1024 max=4096 full=refuse tail=0 capacity=0 dests=a,b
append 8 100
read b 3
away b
drain
append 8 100
drain
expire b
checkpoint
drain
append 30 100
back b
append 3 100
restart clean
`,
	},
	{
		// A start that did not list a destination deleted its backlog as finished, counting
		// nothing; it counts it as released, and only what was its own (not what was appended
		// while it was away).
		name: "ReleasedAtStartCountsWhatItOwed",
		script: `
config sync=always segment=1024 max=8192 full=refuse tail=0 capacity=0 dests=a,b
append 6 100
read b 2
finish b 0
away b
append 4 100
restart clean dests=a
restart kill dests=a,b
append 2 100
restart clean dests=a
`,
	},
	{
		// Issue 20, defect 1: after an idle start the next segment number came from the segment
		// files alone (none left), below the cursors: the third process's records landed
		// behind every position and were deleted as finished (seeds 4 and 15, among others,
		// before the fix).
		name: "IdleRestartKeepsSegmentNumbers",
		script: `
config sync=always segment=1024 max=4096 full=refuse tail=0 capacity=0 dests=a
append 3 100
read a 0
finishall a
restart clean
restart clean
append 3 100
read a 0
`,
	},
	{
		// A start in none mode did not sync the directory it inherited. The process before it
		// had deleted its finished segments, and then failed to persist the cursors (a failed
		// sync), so the deletions were in the page cache alone. The start reused segment 1 for
		// its own record and persisted a cursor on it. A power loss undid the deletions, not
		// the cursor, and b read again at 1:16 the record it had finished before its last
		// checkpoint (a random seed of make soak-spool before the fix).
		name: "NoneStartAfterFailedCheckpoint",
		script: `
config sync=always segment=1024 max=8192 full=refuse tail=0 capacity=0 dests=a,b
append 6 100
syncfail on
drain
restart kill sync=none
append 1 20
read b 1
checkpoint
restart power dests=a,b
`,
	},
	{
		// Defect 1 after a power loss in none mode: the reused segment's records were read
		// from the middle of a frame out of the tail, which trusts its framing: a payload that
		// was never appended reached the destination (seed 778 before the fix).
		name: "PowerLossThenRestartReadsNoPhantom",
		script: `
config sync=none segment=2048 max=8192 full=refuse tail=1048576 capacity=0 dests=a,c
append 2 100
drain
restart power
restart clean
append 3 20
append 6 100
read a 0
`,
	},
	{
		// Defect 1 again: the same misplaced position in the tail, larger records: the tail
		// panicked with "a record in the tail runs past its end" (seed 358 before the fix).
		name: "PowerLossThenRestartNoTailPanic",
		script: `
config sync=none segment=2048 max=6144 full=drop-oldest tail=4096 capacity=0 dests=a,c
append 8 100
drain
restart power
restart clean
append 4 400
read c 8
`,
	},
	{
		// Issue 20, defect 2 as the model sees it: with 2054 bytes of disk, every destination
		// finished everything and a checkpoint ran, yet the next append failed, because a
		// reader kept the deleted segment open (seed 13 before the fix).
		name: "DrainedDiskTakesAppendsAgain",
		script: `
config sync=always segment=1024 max=8192 full=refuse tail=4096 capacity=0 dests=a,b
append 8 100
append 8 100
capacity 2054
drain
`,
	},
	{
		// Issue 20, defect 6 (drop-oldest): records b had read and not finished were deleted
		// to make room, and counted for nobody: after a restart b never got them, and
		// dropped_records_total{reason="drop_oldest"} said nothing was lost.
		name: "DropOldestCountsReadUnfinished",
		script: `
config sync=interval segment=1024 max=2048 full=drop-oldest tail=0 capacity=0 dests=a,b
append 6 250
read b 8
append 5 100
`,
	},
	{
		// An append refused because its group commit's fdatasync failed was not counted in
		// append_errors_total{reason="io"}, whose help promises it.
		name:  "FailedCommitCountedAsIOError",
		gap:   "failedCommitsCounted",
		fixed: &failedCommitsCounted,
		script: `
config sync=always segment=1024 max=4096 full=refuse tail=0 capacity=0 dests=a
append 1 100
syncfail on
append 1 100
`,
	},
	{
		// Interval mode: records acknowledged and not yet synced when the process was killed
		// stay in the page cache; the next process never syncs them, so a power loss any
		// number of intervals later takes them (seed 73).
		name:  "KillThenPowerLossKeepsOldIntervalRecords",
		gap:   "openSyncsInherited",
		fixed: &openSyncsInherited,
		script: `
config sync=interval segment=1024 max=4096 full=refuse tail=0 capacity=0 dests=a
append 3 100
restart kill
tick
restart power
`,
	},
	{
		// A checkpoint killed between its cursor rename and the directory sync: the next
		// process takes the renamed cursor as persisted and does not write it again while the
		// destination stays put, so after a power loss the destination replays what it had
		// finished before that process's successful checkpoint (seed 5598).
		name:  "KillInCheckpointThenPowerLossReplaysNothingFinished",
		gap:   "openSyncsInherited",
		fixed: &openSyncsInherited,
		script: `
config sync=interval segment=1024 max=4096 full=refuse tail=0 capacity=0 dests=a
append 3 100
tick
read a 2
finishall a
crashat 4 kill
checkpoint
read a 0
checkpoint
restart power
`,
	},
	{
		// Drop-oldest counted for a destination the records appended while it was away (a
		// reload removed it), which are not its own: otlpgate_spool_dropped_records_total
		// {reason="drop_oldest"} reported seven records lost to b that b was never to get
		// (seed 76 before the fix).
		name: "DropOldestCountsNothingAppendedWhileAway",
		script: `
config sync=always segment=1024 max=3072 full=drop-oldest tail=512 capacity=0 dests=a,b,c
away b
append 6 100
append 3 250
append 8 250
`,
	},
	{
		// The same after Back: the records appended between Away and Back, which Next passes
		// over, were counted when their segment was dropped.
		name: "DropOldestCountsNothingInTheGap",
		script: `
config sync=none segment=1024 max=2048 full=drop-oldest tail=0 capacity=0 dests=a,b
append 2 100
away b
append 4 100
back b
append 14 100
`,
	},
	{
		// Drop-oldest counted, for a destination that had rewound, the records it had finished
		// out of order before the Rewind (Next passes over them): b delivered records 1 and 3
		// and drop_oldest counted them as lost.
		name: "DropOldestCountsNothingFinishedBeforeARewind",
		script: `
config sync=always segment=1024 max=2048 full=drop-oldest tail=0 capacity=0 dests=a,b
append 7 100
read b 0
finish b 1
finish b 2
rewind b
append 20 100
`,
	},
	{
		// Not a defect of the spool, one of the model: a power loss took back a checkpoint, so
		// the records a had finished were replayed and dropped (counted), and a second power
		// loss undid that unsynced removal, so they were dropped and counted again; the model
		// allowed a second count only for records owed at the power loss.
		name: "PowerLossUndoesADropOfReplayedRecords",
		script: `
config sync=interval segment=1024 max=2048 full=drop-oldest tail=1048576 capacity=0 dests=a,b,c
append 7 100
restart clean
crashat 10 power
drain
crashat 11 power
append 4 400
append 2 400
`,
	},
	{
		// A start that released a destination (a, no longer listed) was killed after it
		// removed a's cursor and before it synced the directory; the next start saw no cursor
		// of a, changed nothing and synced nothing, so a power loss brought the cursor back,
		// and a start listing a again resumed it below the tail, from records appended before
		// it was configured anew (seed 1795688450360189662 before the fix).
		name: "KilledReleaseSyncedByTheNextStart",
		script: `
config sync=always segment=2048 max=6144 full=refuse tail=512 capacity=0 dests=b,c
restart power dests=a,b
crashat 19 kill
append 4 20
addreader c
restart clean dests=c
restart power dests=a sync=none
`,
	},
}

// FuzzSpoolModel lets the fuzzer write the scripts: its input is the sequence of choices the
// generator makes, so every input is a valid script and mutations explore nearby ones. Run it
// with -fuzzminimizetime 1x: the spool's goroutines make the coverage of one input vary from
// run to run, so nearly every input looks new, and minimizing each for the default 60 s leaves
// the fuzzer at a few executions a minute instead of about 250 a second.
func FuzzSpoolModel(f *testing.F) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 0xf022))
		b := make([]byte, 96+r.IntN(160))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := genModelScript(&byteChoices{b: data}, 120)
		// The fuzzer minimizes the input itself.
		checkModelScriptShrink(t, sc, "fuzz input", false)
	})
}

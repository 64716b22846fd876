package spool

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// A model script is a spool configuration and a list of operations, in a line-oriented text
// form that the model test prints when a sequence fails and parses back for regression cases:
//
//	config sync=always segment=1024 max=4096 full=refuse tail=0 capacity=0 dests=a,b
//	append 3 100            three records of 100 payload bytes
//	read a 5                destination a reads up to 5 records (0: until the spool is empty)
//	finish a 2              a finishes its unfinished record number 2 (modulo how many it has)
//	drop a 0 rejected       a drops one, counted (rejected or undeliverable)
//	finishall a             a finishes every record it read, in read order
//	refinish a 1            a finishes a record again that it finished before: nothing happens
//	checkpoint              Spool.Checkpoint
//	tick                    one sync interval passes (the interval sync runs in interval mode)
//	restart clean           Close and Open; kill (kill -9) or power (power loss) instead of clean;
//	restart kill dests=a,c sync=none    optionally with other destinations or another sync mode
//	crashat 7 power         the process dies right after the 7th file-system operation from now,
//	                        as a kill -9 (kill) or a power loss (power)
//	capacity 3000           the disk holds 3000 bytes from now on (0: unlimited; at least two
//	                        segments for drain to demand that appends succeed again)
//	drain                   every destination reads and finishes everything, a checkpoint runs,
//	                        and then an append must succeed: a full disk recovers
//	syncfail on             file syncs fail with EIO from now on (off: they work again; every
//	                        restart mends the disk)
//	addreader d             Spool.AddReader: d, if not configured, reads what is appended from
//	                        now on; the restarts that follow list it, unless they name others
//	rewind a                a gives up what it holds unfinished (a feeder stopped, its batches
//	                        abandoned), then Reader.Rewind hands that out again
//	away a                  Reader.Away: a was removed (a reload); it reads nothing meanwhile
//	back a                  Reader.Back: a came back; what was appended in between is not its
type modelScript struct {
	cfg modelConfig
	ops []modelOp
}

type modelConfig struct {
	sync     SyncMode
	segment  int64
	max      int64
	full     FullPolicy
	tail     int64
	capacity int64
	dests    []string
}

type opKind uint8

const (
	opAppend opKind = iota
	opRead
	opFinish
	opDrop
	opFinishAll
	opRefinish
	opCheckpoint
	opTick
	opRestart
	opCrashAt
	opCapacity
	opDrain
	opSyncFail
	opAddReader
	opRewind
	opAway
	opBack
	opExpire
	numOpKinds
)

var opNames = [numOpKinds]string{"append", "read", "finish", "drop", "finishall", "refinish",
	"checkpoint", "tick", "restart", "crashat", "capacity", "drain", "syncfail", "addreader", "rewind",
	"away", "back", "expire"}

// stopKind is how a process ends: Close, kill -9, or a power loss.
type stopKind uint8

const (
	stopClean stopKind = iota
	stopKill
	stopPower
)

var stopNames = []string{"clean", "kill", "power"}

type modelOp struct {
	kind   opKind
	dest   string
	n      int // records to append or read, crash point, capacity
	k      int // which record, or payload size for append
	reason DropReason
	stop   stopKind
	dests  []string // restart: the new destinations, nil to keep them
	sync   SyncMode // restart: the new sync mode, if setSync
	setSet bool     // restart: dests given
	setSyn bool     // restart: sync given
}

func (o modelOp) String() string {
	name := opNames[o.kind]
	switch o.kind {
	case opAppend:
		return fmt.Sprintf("%s %d %d", name, o.n, o.k)
	case opRead:
		return fmt.Sprintf("%s %s %d", name, o.dest, o.n)
	case opFinish, opRefinish:
		return fmt.Sprintf("%s %s %d", name, o.dest, o.k)
	case opDrop:
		return fmt.Sprintf("%s %s %d %s", name, o.dest, o.k, dropReasonNames[o.reason])
	case opFinishAll, opAddReader, opRewind, opAway, opBack, opExpire:
		return name + " " + o.dest
	case opRestart:
		s := name + " " + stopNames[o.stop]
		if o.setSet {
			s += " dests=" + strings.Join(o.dests, ",")
		}
		if o.setSyn {
			s += " sync=" + o.sync.String()
		}
		return s
	case opCrashAt:
		return fmt.Sprintf("%s %d %s", name, o.n, stopNames[o.stop])
	case opCapacity:
		return fmt.Sprintf("%s %d", name, o.n)
	case opSyncFail:
		return name + " " + map[bool]string{true: "on", false: "off"}[o.n == 1]
	}
	return name
}

func (c modelConfig) String() string {
	return fmt.Sprintf("config sync=%s segment=%d max=%d full=%s tail=%d capacity=%d dests=%s",
		c.sync, c.segment, c.max, c.full, c.tail, c.capacity, strings.Join(c.dests, ","))
}

func (sc modelScript) String() string {
	var b strings.Builder
	b.WriteString(sc.cfg.String())
	b.WriteByte('\n')
	for _, o := range sc.ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// spoolConfig is the spool's configuration for the script, with the timers out of the way:
// the script decides when syncs and checkpoints run.
func (c modelConfig) spoolConfig(mode SyncMode) Config {
	sc := DefaultConfig()
	sc.Dir = testDir
	sc.Sync = mode
	sc.SyncInterval = 1 << 40
	sc.CheckpointInterval = 1 << 40
	sc.SegmentBytes = c.segment
	sc.MaxBytes = c.max
	sc.Full = c.full
	sc.TailBytes = c.tail
	sc.Meta, sc.Encoded = true, true // records carry meta and encodings (modelExtra)
	sc.Logger = slog.New(slog.DiscardHandler)
	return sc
}

// parseModelScript reads the text form; blank lines and text after # are ignored.
func parseModelScript(text string) (modelScript, error) {
	var sc modelScript
	seenConfig := false
	for i, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", i+1, strings.TrimSpace(line), fmt.Sprintf(format, args...))
		}
		if f[0] == "config" {
			cfg, err := parseModelConfig(f[1:])
			if err != nil {
				return sc, fail("%v", err)
			}
			sc.cfg, seenConfig = cfg, true
			continue
		}
		if !seenConfig {
			return sc, fail("the config line must come first")
		}
		o, err := parseModelOp(f)
		if err != nil {
			return sc, fail("%v", err)
		}
		sc.ops = append(sc.ops, o)
	}
	if !seenConfig {
		return sc, fmt.Errorf("no config line")
	}
	return sc, nil
}

func parseModelConfig(kv []string) (modelConfig, error) {
	c := modelConfig{segment: 1024, max: 4096, dests: []string{"a"}}
	for _, f := range kv {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return c, fmt.Errorf("%q is not key=value", f)
		}
		var err error
		switch k {
		case "sync":
			c.sync, err = ParseSyncMode(v)
		case "full":
			c.full, err = ParseFullPolicy(v)
		case "segment":
			c.segment, err = strconv.ParseInt(v, 10, 64)
		case "max":
			c.max, err = strconv.ParseInt(v, 10, 64)
		case "tail":
			c.tail, err = strconv.ParseInt(v, 10, 64)
		case "capacity":
			c.capacity, err = strconv.ParseInt(v, 10, 64)
		case "dests":
			c.dests, err = parseDests(v)
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

func parseDests(v string) ([]string, error) {
	ds := strings.Split(v, ",")
	for _, d := range ds {
		if !slices.Contains(modelDests, d) {
			return nil, fmt.Errorf("unknown destination %q (want one of %v)", d, modelDests)
		}
	}
	return ds, nil
}

func parseModelOp(f []string) (modelOp, error) {
	var o modelOp
	k := slices.Index(opNames[:], f[0])
	if k < 0 {
		return o, fmt.Errorf("unknown operation %q", f[0])
	}
	o.kind = opKind(k)
	args := f[1:]
	want := map[opKind]int{opAppend: 2, opRead: 2, opFinish: 2, opDrop: 3, opFinishAll: 1,
		opRefinish: 2, opCheckpoint: 0, opTick: 0, opCrashAt: 2, opCapacity: 1, opDrain: 0, opSyncFail: 1,
		opAddReader: 1, opRewind: 1, opAway: 1, opBack: 1, opExpire: 1}
	if n, ok := want[o.kind]; ok && len(args) != n {
		return o, fmt.Errorf("%s takes %d arguments", f[0], n)
	}
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err == nil && n < 0 {
			err = fmt.Errorf("negative %d", n)
		}
		return n, err
	}
	dest := func(s string) (string, error) {
		if !slices.Contains(modelDests, s) {
			return "", fmt.Errorf("unknown destination %q", s)
		}
		return s, nil
	}
	stop := func(s string) (stopKind, error) {
		i := slices.Index(stopNames, s)
		if i < 0 {
			return 0, fmt.Errorf("unknown stop %q (want clean, kill or power)", s)
		}
		return stopKind(i), nil
	}
	var err error
	switch o.kind {
	case opAppend:
		if o.n, err = num(args[0]); err == nil {
			o.k, err = num(args[1])
		}
	case opRead:
		if o.dest, err = dest(args[0]); err == nil {
			o.n, err = num(args[1])
		}
	case opFinish, opRefinish:
		if o.dest, err = dest(args[0]); err == nil {
			o.k, err = num(args[1])
		}
	case opDrop:
		if o.dest, err = dest(args[0]); err == nil {
			if o.k, err = num(args[1]); err == nil {
				switch args[2] {
				case "rejected":
					o.reason = DropRejected
				case "undeliverable":
					o.reason = DropUndeliverable
				default:
					err = fmt.Errorf("unknown reason %q", args[2])
				}
			}
		}
	case opFinishAll, opAddReader, opRewind, opAway, opBack, opExpire:
		o.dest, err = dest(args[0])
	case opRestart:
		if len(args) == 0 {
			return o, fmt.Errorf("restart needs clean, kill or power")
		}
		if o.stop, err = stop(args[0]); err != nil {
			return o, err
		}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			switch k {
			case "dests":
				o.dests, err = parseDests(v)
				o.setSet = true
			case "sync":
				o.sync, err = ParseSyncMode(v)
				o.setSyn = true
			default:
				err = fmt.Errorf("unknown restart option %q", a)
			}
			if err != nil {
				return o, err
			}
		}
	case opCrashAt:
		if o.n, err = num(args[0]); err == nil {
			if o.n == 0 {
				err = fmt.Errorf("crash point 0")
			} else if o.stop, err = stop(args[1]); err == nil && o.stop == stopClean {
				err = fmt.Errorf("a crash is kill or power")
			}
		}
	case opCapacity:
		o.n, err = num(args[0])
	case opSyncFail:
		switch args[0] {
		case "on":
			o.n = 1
		case "off":
		default:
			err = fmt.Errorf("syncfail takes on or off")
		}
	}
	return o, err
}

// modelDests are the destination names a script may use.
var modelDests = []string{"a", "b", "c"}

// choices is where a generated script's decisions come from: a seeded generator, or the bytes
// of a fuzz input.
type choices interface {
	// intn returns a number in [0, n).
	intn(n int) int
	// exhausted reports that a fuzz input has no bytes left: the script ends there.
	exhausted() bool
}

type byteChoices struct {
	b []byte
	i int
}

func (c *byteChoices) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := 0
	for span := 1; span < n; span <<= 8 {
		v <<= 8
		if c.i < len(c.b) {
			v |= int(c.b[c.i])
			c.i++
		}
	}
	return v % n
}

func (c *byteChoices) exhausted() bool { return c.i >= len(c.b) }

// genModelScript builds a script of at most maxOps operations. The weights favour the
// situations that hold state across processes: runs of restarts with no traffic between them,
// crashes soon after they are armed, and disks small enough to fill.
func genModelScript(c choices, maxOps int) modelScript {
	pick := func(xs ...int) int { return xs[c.intn(len(xs))] }
	var sc modelScript
	cfg := &sc.cfg
	cfg.sync = SyncMode(c.intn(3))
	cfg.segment = int64(pick(1024, 1024, 2048))
	cfg.max = cfg.segment * int64(pick(2, 3, 4, 8))
	cfg.full = FullPolicy(pick(0, 0, 0, 1))
	cfg.tail = int64(pick(0, 512, 4096, 1<<20))
	if c.intn(3) == 0 {
		cfg.capacity = cfg.segment*int64(2+c.intn(4)) + int64(c.intn(1024))
	}
	cfg.dests = genDests(c)
	dests := cfg.dests
	dest := func() string {
		if c.intn(8) == 0 {
			return modelDests[c.intn(len(modelDests))]
		}
		return dests[c.intn(len(dests))]
	}
	weights := [numOpKinds]int{opAppend: 22, opRead: 16, opFinish: 10, opDrop: 3, opFinishAll: 9,
		opRefinish: 2, opCheckpoint: 8, opTick: 5, opRestart: 11, opCrashAt: 7, opCapacity: 2, opDrain: 5,
		opSyncFail: 2, opAddReader: 2, opRewind: 2, opAway: 2, opBack: 1, opExpire: 1}
	total := 0
	for _, w := range weights {
		total += w
	}
	for len(sc.ops) < maxOps && !c.exhausted() {
		r := c.intn(total)
		var kind opKind
		for kind = 0; r >= weights[kind]; kind++ {
			r -= weights[kind]
		}
		o := modelOp{kind: kind}
		switch kind {
		case opAppend:
			o.n = 1 + c.intn(8)
			o.k = pick(20, 100, 100, 250, 400)
		case opRead:
			o.dest, o.n = dest(), pick(0, 1, 3, 8)
		case opFinish, opRefinish:
			o.dest, o.k = dest(), c.intn(8)
		case opDrop:
			o.dest, o.k, o.reason = dest(), c.intn(8), DropReason(c.intn(2))
		case opFinishAll:
			o.dest = dest()
		case opRestart:
			o.stop = stopKind(pick(0, 0, 1, 2))
			if c.intn(5) == 0 {
				o.dests, o.setSet = genDests(c), true
				dests = o.dests
			}
			if c.intn(10) == 0 {
				o.sync, o.setSyn = SyncMode(c.intn(3)), true
			}
			if c.intn(3) == 0 {
				// Restarts with no traffic in between: state that only outlives processes.
				for range 1 + c.intn(2) {
					sc.ops = append(sc.ops, o)
					o = modelOp{kind: opRestart, stop: stopKind(pick(0, 0, 1, 2))}
				}
			}
		case opCrashAt:
			o.n, o.stop = 1+c.intn(24), stopKind(1+c.intn(2))
		case opCapacity:
			o.n = pick(0, int(cfg.segment)*(2+c.intn(4))+c.intn(1024))
		case opSyncFail:
			o.n = c.intn(2)
		case opAddReader:
			// A reload adds a destination: the restarts that follow list it (the file does).
			o.dest = modelDests[c.intn(len(modelDests))]
			if !slices.Contains(dests, o.dest) {
				dests = append(slices.Clone(dests), o.dest)
			}
		case opRewind:
			// A reload replaces a changed destination as the gateway does: the old feeder
			// stops, its destination finishes some of what it holds and gives up the rest,
			// and the new one starts with a Rewind.
			o.dest = dest()
			sc.ops = genFinishes(c, sc.ops, o.dest)
		case opAway:
			o.dest = dest()
			if c.intn(3) != 0 {
				// A reload removes it (Away while it drains), appends go on, and a later reload
				// brings it back: Back, and the Rewind once the old one drained.
				d := o.dest
				sc.ops = append(sc.ops, o)
				sc.ops = genFinishes(c, sc.ops, d)
				for range c.intn(3) {
					sc.ops = append(sc.ops, modelOp{kind: opAppend, n: 1 + c.intn(4), k: pick(20, 100, 250)})
				}
				if c.intn(3) == 0 {
					// It stays away past -spool.removed-hold: the next checkpoint releases it.
					sc.ops = append(sc.ops, modelOp{kind: opExpire, dest: d}, modelOp{kind: opCheckpoint})
					sc.ops = genFinishes(c, sc.ops, d)
				}
				sc.ops = append(sc.ops, modelOp{kind: opBack, dest: d})
				o = modelOp{kind: opRewind, dest: d}
			}
		case opBack, opExpire:
			o.dest = dest()
		}
		sc.ops = append(sc.ops, o)
	}
	return sc
}

// genFinishes adds what a stopped destination finishes of what it holds before it drained.
func genFinishes(c choices, ops []modelOp, d string) []modelOp {
	for range c.intn(3) {
		ops = append(ops, modelOp{kind: opFinish, dest: d, k: c.intn(8)})
	}
	return ops
}

func genDests(c choices) []string {
	for {
		var ds []string
		mask := 1 + c.intn(7)
		for i, d := range modelDests {
			if mask&(1<<i) != 0 {
				ds = append(ds, d)
			}
		}
		if len(ds) > 0 {
			return ds
		}
	}
}

package uds

import (
	"math"
	"strconv"
	"sync"
	"time"
)

// PHP serialises a DateTime as {"date":"2023-11-14 22:13:20.123456","timezone_type":N,
// "timezone":Z}: type 1 is an offset ("+00:00"), type 2 an abbreviation ("UTC", "EST"), type 3
// an identifier ("UTC", "Europe/Berlin"). The date is wall-clock time in that zone.

// parseDate parses "YYYY-MM-DD HH:MM:SS[.fraction]" (a 'T' separator is accepted as well) and
// returns the fields; ok is false for anything else.
func parseDate(b []byte) (y, mo, d, h, mi, sec, nsec int, ok bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != ' ' && b[10] != 'T') || b[13] != ':' || b[16] != ':' {
		return
	}
	num := func(p []byte) int {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, mo, d = num(b[0:4]), num(b[5:7]), num(b[8:10])
	h, mi, sec = num(b[11:13]), num(b[14:16]), num(b[17:19])
	if y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60 {
		return
	}
	if rest := b[19:]; len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 10 {
			return
		}
		f := num(rest[1:])
		if f < 0 {
			return
		}
		for i := len(rest) - 1; i < 9; i++ {
			f *= 10
		}
		nsec = f
	}
	return y, mo, d, h, mi, sec, nsec, true
}

// parseOffset parses "+HH:MM", "-HH:MM", "+HHMM" or "Z" into seconds east of UTC.
func parseOffset(b []byte) (int, bool) {
	if len(b) == 1 && b[0] == 'Z' {
		return 0, true
	}
	if len(b) != 6 && len(b) != 5 || (b[0] != '+' && b[0] != '-') {
		return 0, false
	}
	hh, mm := b[1:3], b[len(b)-2:]
	if len(b) == 6 && b[3] != ':' {
		return 0, false
	}
	h, err1 := strconv.Atoi(string(hh))
	m, err2 := strconv.Atoi(string(mm))
	if err1 != nil || err2 != nil || h > 23 || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	if b[0] == '-' {
		off = -off
	}
	return off, true
}

// zoneCache remembers named time zones, which time.LoadLocation reads from the system's zone
// database. It is bounded: PHP applications use one or two zones, and a flood of invented names
// must not grow it.
var zoneCache struct {
	sync.Mutex
	m map[string]*time.Location // nil value: the name is unknown
}

const maxCachedZones = 64

func lookupZone(name []byte) *time.Location {
	switch string(name) {
	case "UTC", "utc", "Z", "GMT", "Etc/UTC", "Universal", "Zulu":
		return time.UTC
	}
	zoneCache.Lock()
	defer zoneCache.Unlock()
	if loc, ok := zoneCache.m[string(name)]; ok {
		return loc
	}
	loc, err := time.LoadLocation(string(name))
	if err != nil {
		loc = nil
	}
	if zoneCache.m == nil {
		zoneCache.m = make(map[string]*time.Location)
	}
	if len(zoneCache.m) < maxCachedZones {
		zoneCache.m[string(name)] = loc
	}
	return loc
}

// phpDate converts the fields of a serialised DateTime to Unix nanoseconds.
func phpDate(date []byte, tzType int64, tz []byte) (int64, bool) {
	y, mo, d, h, mi, sec, nsec, ok := parseDate(date)
	if !ok {
		return 0, false
	}
	loc := time.UTC
	switch {
	case len(tz) == 0:
	case tzType == 1:
		off, ok := parseOffset(tz)
		if !ok {
			return 0, false
		}
		if off != 0 {
			loc = time.FixedZone("", off)
		}
	default:
		if off, ok := parseOffset(tz); ok {
			loc = time.FixedZone("", off)
		} else if loc = lookupZone(tz); loc == nil {
			return 0, false
		}
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, nsec, loc)
	if t.Year() > 2262 || t.Unix() < 0 {
		return 0, false
	}
	return t.UnixNano(), true
}

// secondsToNano converts float Unix seconds (PHP's microtime(true)) to nanoseconds, rounded to
// the microsecond.
func secondsToNano(v float64) (int64, bool) {
	if !(v >= 0 && v < 9e9) {
		return 0, false
	}
	s := math.Floor(v)
	return int64(s)*1e9 + int64(math.Round((v-s)*1e6))*1e3, true
}

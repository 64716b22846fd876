// Package listenlog reads the lines in which otlpgate (and otlpbench's children) say where a
// listener is bound ("<name> listening" addr=...), in the text and the JSON formats of
// -log.format: test harnesses and otlpbench start children on 127.0.0.1:0 and learn their
// ports from these lines.
//
// It imports the standard library only and starts no goroutines.
package listenlog

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// Listener names as otlpgate's start log reports them.
const (
	GRPC  = "grpc intake"
	HTTP  = "http intake"
	Admin = "admin"
	Kafka = "kafka telemetry"
	Pprof = "pprof"
	// otlpbench's own children report theirs in the same form (Line).
	Relay   = "relay"
	Forward = "forward"
)

const suffix = " listening"

// Line is the log line, in otlpgate's text form, that says the listener name is bound at addr.
func Line(name, addr string) string {
	return fmt.Sprintf("level=INFO msg=%q addr=%s\n", name+suffix, addr)
}

// Addrs returns the bound address of every TCP listener that log reports, keyed by listener
// name. Other lines are ignored; a name reported twice keeps its last address.
func Addrs(log string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if name, addr, ok := parse(line); ok {
			out[name] = addr
		}
	}
	return out
}

// parse reads one "<name> listening" log line, text or JSON.
func parse(line string) (name, addr string, ok bool) {
	var msg string
	if strings.HasPrefix(line, "{") {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			return "", "", false
		}
		msg, addr = rec.Msg, rec.Addr
	} else {
		_, rest, found := strings.Cut(line, ` msg="`)
		if !found {
			return "", "", false
		}
		if msg, rest, found = strings.Cut(rest, `"`); !found {
			return "", "", false
		}
		if _, rest, found = strings.Cut(rest, " addr="); !found {
			return "", "", false
		}
		addr, _, _ = strings.Cut(rest, " ")
	}
	name, isListen := strings.CutSuffix(msg, suffix)
	if !isListen {
		return "", "", false
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", false
	}
	return name, addr, true
}

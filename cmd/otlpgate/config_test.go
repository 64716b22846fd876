package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestFinishConfig(t *testing.T) {
	f := func(args []string, wantErr string) {
		t.Helper()
		cfg := defaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		registerFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			if wantErr == "" || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%v: parse: %v", args, err)
			}
			return
		}
		err := finishConfig(&cfg)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%v: %v", args, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%v: error %v, want one containing %q", args, err, wantErr)
		}
	}
	f(nil, "")
	f([]string{"-dest", "name=gw,endpoint=127.0.0.1:4317,protocol=otep,mode=stream,streams=4,window=64"}, "")
	f([]string{"-dest", "name=a,endpoint=x:1", "-dest", "name=a,endpoint=y:1"}, "two destinations are named")
	f([]string{"-dest", "name=a,endpoint=x:1,frobnicate=1"}, "frobnicate")
	f([]string{"-queue.max-bytes", "64MiB", "-dest", "name=a,endpoint=x:1", "-dest", "name=b,endpoint=y:1"}, "must be below -queue.max-bytes")
	f([]string{"-queue.max-bytes", "1GiB", "-dest", "name=a,endpoint=x:1", "-dest", "name=b,endpoint=y:1"}, "")
	f([]string{"-ack", "sometimes"}, "unknown ack mode")
	f([]string{"-grpc.scan-depth", "deep"}, "unknown scan depth")
	f([]string{"-uds.mode", "999"}, "bad -uds.mode")
	f([]string{"-batch.max-bytes", "2GiB"}, "exceeds queue max bytes")
	f([]string{"-shutdown.timeout", "0s"}, "must be positive")
	f([]string{"-kafka.default-metrics", "org.apache.kafka.,librdkafka."}, "")
}

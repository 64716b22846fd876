package main

import (
	"io"
	"testing"
)

// -net.raw-syscalls is on unless turned off, from the command line or the config file.
func TestRawSyscallsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"-net.raw-syscalls=false"}, false},
		{[]string{"-net.raw-syscalls=true"}, true},
	} {
		pc, err := loadConfig(tc.args, testEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if pc.cfg.rawIO != tc.want {
			t.Errorf("%q: raw system calls %v, want %v", tc.args, pc.cfg.rawIO, tc.want)
		}
	}
}

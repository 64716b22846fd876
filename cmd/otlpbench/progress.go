package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/otlpgate/otlpgate/bench"
)

// isTerminal reports whether f is a terminal, where progress may redraw a line in place.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress reports the appendix's runs. On a terminal it redraws one line as batches complete;
// anywhere else (a pipe, a CI log) it prints nothing while a run goes and one line when it ends,
// so that logs hold no carriage returns.
type progress struct {
	w    io.Writer
	tty  bool
	open bool // a redrawn line is on screen, not yet ended
}

func newProgress(f *os.File) *progress { return &progress{w: f, tty: isTerminal(f)} }

// batches is called as batches complete.
func (p *progress) batches(label string, done, total int) {
	if !p.tty {
		return
	}
	fmt.Fprintf(p.w, "\r%-70s %d/%d batches", label, done, total)
	p.open = true
}

// finished ends the run's line with its result.
func (p *progress) finished(label string, r bench.Row, err error) {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
	if !p.tty {
		if err != nil {
			fmt.Fprintf(p.w, "%s: %v\n", label, err)
			return
		}
		fmt.Fprintf(p.w, "%s: %d batches in %.2fs, %.0f batches/cpusec, %.0f batches/wallsec, %d errors\n",
			label, r.Batches, r.Wall.Seconds(), r.BatchesPerCPUSec(), r.BatchesPerWallSec(), r.Errors)
	}
}

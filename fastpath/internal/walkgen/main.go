package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/otlpgate/otlpgate/fastpath/internal/gen"
)

func main() {
	dir := flag.String("dir", ".", "the directory of package fastpath")
	out := flag.String("out", "", "the file to write (default: walk_gen.go in -dir)")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(*dir, "walk_gen.go")
	}
	if err := run(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "walkgen:", err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	s, err := gen.Load(dir)
	if err != nil {
		return err
	}
	src, err := gen.Generate(s)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

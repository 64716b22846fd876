package main

import (
	"fmt"
	"strings"

	"github.com/otlpgate/otlpgate/internal/credfile"
)

// expandArgs resolves ${env:NAME} and ${file:PATH} in every argument (credfile.Expand: $${ is a
// literal ${), before the flags are parsed, so that every flag value takes them, a -dest header
// and a -resource.set value alike, and a secret need not be written on the command line. An
// error names the flag of the argument, never its value.
func expandArgs(args []string, getenv func(string) (string, bool)) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		v, err := credfile.Expand(a, getenv)
		if err != nil {
			name := "argument " + fmt.Sprint(i+1)
			switch {
			case strings.HasPrefix(a, "-"):
				name, _, _ = strings.Cut(a, "=")
			case i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "="):
				name = args[i-1]
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[i] = v
	}
	return out, nil
}

package credfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxExpandFile bounds what ${file:PATH} reads: a value, a key or a token, not a document.
const maxExpandFile = 1 << 20

// Expand returns s with each ${env:NAME} replaced by the environment variable NAME (as getenv
// finds it) and each ${file:PATH} by the content of the file PATH, white space around it
// trimmed; $${ stands for a literal ${. It is the one expander of otlpgate's configuration:
// every flag value and every -dest.file line pass through it, so that a secret can stay out of
// the command line. A variable not set, a file that cannot be read, an unterminated ${ or a
// reference of another kind is an error that names the reference, never a value.
func Expand(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for rest := s; ; {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		if i > 0 && rest[i-1] == '$' {
			b.WriteString(rest[:i-1])
			b.WriteString("${")
			rest = rest[i+2:]
			continue
		}
		b.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return "", errors.New("unterminated ${ (a literal ${ is written $${)")
		}
		ref := rest[i+2 : i+end]
		kind, arg, _ := strings.Cut(ref, ":")
		switch {
		case kind == "env" && arg != "":
			v, ok := getenv(arg)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set (${env:%s})", arg, arg)
			}
			b.WriteString(v)
		case kind == "file" && arg != "":
			v, err := Value(arg)
			if err != nil {
				return "", fmt.Errorf("${file:%s}: %w", arg, err)
			}
			b.WriteString(v)
		default:
			return "", fmt.Errorf("${%s}: only ${env:NAME} and ${file:PATH} are understood (a literal ${ is written $${)", ref)
		}
		rest = rest[i+end+1:]
	}
}

// Value reads a value from a file of at most 1MiB, white space around its content trimmed: a
// ${file:PATH} reference, a -dest header-file. The value is never logged.
func Value(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxExpandFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxExpandFile {
		return "", fmt.Errorf("larger than %d bytes", maxExpandFile)
	}
	return string(bytes.TrimSpace(b)), nil
}

// FileRefs lists the PATHs of the ${file:PATH} references in s, in order, as Expand reads them
// ($${ is no reference): the files a value depends on, which a change of is watched for.
func FileRefs(s string) []string {
	var paths []string
	for rest := s; ; {
		i := strings.Index(rest, "${")
		if i < 0 {
			return paths
		}
		if i > 0 && rest[i-1] == '$' {
			rest = rest[i+2:]
			continue
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return paths
		}
		if kind, arg, _ := strings.Cut(rest[i+2:i+end], ":"); kind == "file" && arg != "" {
			paths = append(paths, arg)
		}
		rest = rest[i+end+1:]
	}
}

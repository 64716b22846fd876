package credfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("  s3cret-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxExpandFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NODE": "node-7", "EMPTY": ""}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f := func(in, want, wantErr string) {
		t.Helper()
		got, err := Expand(in, getenv)
		switch {
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("Expand(%q): error %v, want one containing %q", in, err, wantErr)
		case wantErr == "" && (err != nil || got != want):
			t.Errorf("Expand(%q) = %q, %v, want %q", in, got, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Expand(%q): the error quotes the secret: %v", in, err)
		}
	}
	f("plain", "plain", "")
	f("k8s.node.name=${env:NODE}", "k8s.node.name=node-7", "")
	f("${env:NODE}.${env:NODE}:1", "node-7.node-7:1", "")
	f("x=${env:EMPTY}", "x=", "")
	f("header=x-api-key:${file:"+key+"}", "header=x-api-key:s3cret-key", "")
	f("$${env:NODE}", "${env:NODE}", "")
	f("a$${b}${env:NODE}", "a${b}node-7", "")
	f("cost=$5", "cost=$5", "")
	f("${env:NOPE}", "", "environment variable NOPE is not set (${env:NOPE})")
	f("${file:"+filepath.Join(dir, "none")+"}", "", "${file:"+filepath.Join(dir, "none")+"}: open ")
	f("${file:"+big+"}", "", "larger than 1048576 bytes")
	f("${env:}", "", "only ${env:NAME} and ${file:PATH}")
	f("${NODE}", "", "only ${env:NAME} and ${file:PATH}")
	f("${vault:x}", "", "only ${env:NAME} and ${file:PATH}")
	f("x=${env:NODE", "", "unterminated ${")
}

// FileRefs names the files Expand would read, and no other: not an ${env:}, not an escaped
// $${file:...}, not an unterminated reference.
func TestFileRefs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"plain", nil},
		{"a=${file:/run/a},b=${env:B},c=${file:/run/c}", []string{"/run/a", "/run/c"}},
		{"literal $${file:/not/read} then ${file:/read}", []string{"/read"}},
		{"${file:}", nil},
		{"${file:/open", nil},
	} {
		if got := FileRefs(c.in); !slices.Equal(got, c.want) {
			t.Errorf("FileRefs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

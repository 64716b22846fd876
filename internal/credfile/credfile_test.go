package credfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBearerToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	if tok, err := BearerToken(write("tok", "  s3cret\n")); err != nil || tok != "Bearer s3cret" {
		t.Errorf("%q %v", tok, err)
	}
	if _, err := BearerToken(write("empty", " \n\t")); err == nil || err.Error() != "token file is empty" {
		t.Errorf("empty file: %v", err)
	}
	if _, err := BearerToken(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "cannot read token file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestServerTLSErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not PEM"), 0o600)
	if _, err := ServerTLS(junk, junk, ""); err == nil || !strings.HasPrefix(err.Error(), "cannot load TLS key pair") {
		t.Errorf("bad key pair: %v", err)
	}
}

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
	empty := write("empty", " \n\t")
	if _, err := BearerToken(empty); err == nil || err.Error() != "token file "+empty+" is empty" {
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

func TestBindings(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "tokens")
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	got, err := Bindings(write("# tenants\n\ntok-a acme\n  tok-b\tbeta corp \r\ntok-c\t x-scope-orgid=c, x-region=eu\n"))
	want := []Binding{{"tok-a", "acme", 3}, {"tok-b", "beta corp", 4}, {"tok-c", "x-scope-orgid=c, x-region=eu", 5}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("%+v %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("binding %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for content, msg := range map[string]string{
		"":                          "tokens file holds no token",
		"# only\n":                  "tokens file holds no token",
		"s3cret\n":                  "tokens file line 1: want a token",
		"s3cret a\nx b\ns3cret c\n": "tokens file line 3: the token of line 1 again",
	} {
		_, err := Bindings(write(content))
		if err == nil || !strings.HasPrefix(err.Error(), msg) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want %q and no token", content, err, msg)
		}
	}
	if _, err := Bindings(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "cannot read tokens file") {
		t.Errorf("missing file: %v", err)
	}
}

// Server reads what it is given, nothing when given nothing, and names the intake in its errors.
func TestServer(t *testing.T) {
	if tok, tc, err := Server("grpc", "", "", "", ""); tok != "" || tc != nil || err != nil {
		t.Fatalf("nothing to read: %q %v %v", tok, tc, err)
	}
	p := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, tc, err := Server("http", p, "", "", ""); tok != "Bearer s3cret" || tc != nil || err != nil {
		t.Fatalf("token only: %q %v %v", tok, tc, err)
	}
	_, _, err := Server("http", filepath.Join(t.TempDir(), "absent"), "", "", "")
	if err == nil || !strings.HasPrefix(err.Error(), "http: cannot read token file: ") {
		t.Fatalf("absent token file: %v", err)
	}
	_, _, err = Server("grpc", "", "/nonexistent/cert.pem", "/nonexistent/key.pem", "")
	if err == nil || !strings.HasPrefix(err.Error(), "grpc: cannot load TLS key pair: ") {
		t.Fatalf("absent certificate: %v", err)
	}
}

package hostile

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// h2specBinary returns bin/tools/h2spec when it is the h2spec the Makefile pins
// (H2SPEC_VERSION), built by `make h2spec-tool` from tools/h2spec/go.mod (testkit.PinnedTool:
// skipped without it, failed in CI).
func h2specBinary(t *testing.T) string {
	t.Helper()
	return testkit.PinnedTool(t, "../..", "h2spec", "H2SPEC_VERSION", "github.com/summerwind/h2spec", "h2spec-tool")
}

// h2specCase is one test of an h2spec run: its id (what h2spec takes on its command line to run
// it alone, "http2/5.1/3"), what it does, and how it ended.
type h2specCase struct {
	id, name string
	skipped  bool
	failed   string // the failure or error h2spec reported; "" when the test passed
}

// h2specRun runs h2spec (the tests named by ids, or all of them) against addr, each waiting
// timeout seconds for an answer, and returns every test with its outcome.
func h2specRun(t *testing.T, bin, addr, timeout string, ids ...string) []h2specCase {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	args := append([]string{"-h", host, "-p", port, "-o", timeout, "-j", report}, ids...)
	out, err := exec.Command(bin, args...).CombinedOutput()
	// h2spec exits 1 when a test fails; a run that wrote no report failed to run at all.
	b, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Fatalf("h2spec wrote no report (%v, %v):\n%s", err, rerr, out)
	}
	var doc struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Name    string    `xml:"classname,attr"`
				Skipped *struct{} `xml:"skipped"`
				Failure *string   `xml:"failure"`
				Error   *string   `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("h2spec report: %v", err)
	}
	var cases []h2specCase
	for _, s := range doc.Suites {
		for i, c := range s.Cases {
			hc := h2specCase{id: fmt.Sprintf("%s/%d", s.Package, i+1), name: c.Name, skipped: c.Skipped != nil}
			switch {
			case c.Failure != nil:
				hc.failed = "failure: " + strings.TrimSpace(*c.Failure)
			case c.Error != nil && !resetIsClose(*c.Error):
				hc.failed = "error: " + strings.TrimSpace(*c.Error)
			}
			cases = append(cases, hc)
		}
	}
	return cases
}

// resetIsClose reports whether an h2spec error says only that the connection, which the test
// expects closed, was reset instead: a server that closes a connection with bytes of the client
// still unread makes the kernel answer with a reset, and whether the client reads the server's
// GOAWAY before it depends on timing. h2spec lists what it expects, one a line, then what it got
// (the last line); the connection is closed either way, so a reset counts as the close.
func resetIsClose(msg string) bool {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	got := lines[len(lines)-1]
	return strings.HasSuffix(got, "connection reset by peer") && slices.Contains(lines[:len(lines)-1], "Connection closed")
}

// readKnownFailures reads file (testdata/h2spec-grpc-go.txt, testdata/h2spec-otlpgate.txt):
// the h2spec tests the gRPC listener is known to fail on a transport, one id per line ("#"
// starts a comment).
func readKnownFailures(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l, _, _ := strings.Cut(sc.Text(), "#")
		if l = strings.TrimSpace(l); l != "" {
			known[strings.Fields(l)[0]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

// The OTLP/gRPC listener's HTTP/2 conformance, by h2spec (every generic and RFC 7540 test, with
// HPACK's), on each transport: the tests it fails are exactly those listed in
// testdata/h2spec-grpc-go.txt, the ones grpc-go's transport is known to fail, and in
// testdata/h2spec-otlpgate.txt, those otlpgate's own fails (docs/intakes/otlp-grpc.md says
// why). A new failure fails the test; so does a listed test that passes now, so that the list
// stays true.
func TestH2Spec(t *testing.T) {
	bin := h2specBinary(t)
	for _, tr := range []string{"grpc-go", "otlpgate"} {
		t.Run(tr, func(t *testing.T) { testH2Spec(t, bin, tr) })
	}
}

func testH2Spec(t *testing.T, bin, transport string) {
	g := startGate(t, "-grpc.transport="+transport)
	list := "testdata/h2spec-" + transport + ".txt"
	known := readKnownFailures(t, list)
	cases := h2specRun(t, bin, g.GRPC, "2")
	if len(cases) < 140 {
		t.Fatalf("h2spec ran %d tests, want its 145", len(cases))
	}
	var passed, skipped int
	var unexpected, fixed []string
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.id] = true
		switch {
		case c.skipped:
			skipped++
		case c.failed == "":
			passed++
			if known[c.id] {
				fixed = append(fixed, c.id)
			}
		case !known[c.id]:
			unexpected = append(unexpected, c.id)
		}
	}
	// A test that timed out on a busy machine is run again alone, with more time, before it
	// counts as a new failure.
	if len(unexpected) > 0 {
		again := h2specRun(t, bin, g.GRPC, "5", unexpected...)
		for _, c := range again {
			if c.failed != "" {
				t.Errorf("%s\t# %s fails: %s", c.id, c.name, c.failed)
			} else {
				passed++
			}
		}
	}
	// A listed test that passed is run alone twice more: it comes off the list only once it
	// passes every time.
	for _, id := range fixed {
		a, b := h2specRun(t, bin, g.GRPC, "2", id), h2specRun(t, bin, g.GRPC, "2", id)
		if len(a) == 1 && len(b) == 1 && a[0].failed == "" && b[0].failed == "" {
			t.Errorf("%s (%s) passes now: take it off %s", id, a[0].name, list)
		}
	}
	for id := range known {
		if !seen[id] {
			t.Errorf("%s lists %s, which h2spec does not have", list, id)
		}
	}
	g.alive(t)
	failed := len(cases) - passed - skipped
	t.Logf("h2spec: %d tests, %d passed, %d skipped, %d failed (%d known)", len(cases), passed, skipped, failed, len(known))
}

package bench

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/listenlog"
)

// A child's start log, written in pieces: Listening returns the named listeners' addresses in
// the order asked, ignoring lines that are not listener reports and listeners not asked for.
func TestProcListening(t *testing.T) {
	script := `printf 'time=x level=INFO msg="otlpgate starting" gomaxprocs=2\n'
printf 'time=x level=INFO msg="admin listening" addr=127.0.0.1:40001\n'
sleep 0.2
printf 'time=x level=INFO msg=listening intake=uds socket=/tmp/s\n'
printf 'time=x level=INFO msg="grpc intake listening" addr=127.0.0.1:42643 tls=false\n'
printf '` + strings.TrimSuffix(listenlog.Line(listenlog.Relay, "[::1]:5000"), "\n") + `\n'
exec sleep 60`
	p, err := StartProc("sh", "/bin/sh", []string{"-c", script}, nil, filepath.Join(t.TempDir(), "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := p.Listening(ctx, listenlog.Relay, listenlog.GRPC, listenlog.Admin)
	if want := []string{"[::1]:5000", "127.0.0.1:42643", "127.0.0.1:40001"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

// A child that exits before reporting a listener (a port taken, a bad flag) is an error that
// names its log, well before the context ends.
func TestProcListeningExited(t *testing.T) {
	p, err := StartProc("sh", "/bin/sh", []string{"-c", `echo 'msg="grpc intake listening" addr=127.0.0.1:1'; exit 2`}, nil,
		filepath.Join(t.TempDir(), "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err = p.Listening(ctx, listenlog.GRPC, listenlog.Admin)
	if err == nil || !strings.Contains(err.Error(), "exited before listening") || !strings.Contains(err.Error(), "sh.log") {
		t.Fatalf("err = %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("waited for the context, not for the exit")
	}
}

// FreeAddrs never hands out one port twice in a process.
func TestFreeAddrsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addrs, err := FreeAddrs(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("port %s handed out twice", a)
			}
			seen[a] = true
		}
	}
}

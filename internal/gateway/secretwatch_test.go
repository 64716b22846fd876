package gateway

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// The secrets poller of a process that reads no secret file sleeps: it polls once, then only
// after a reload (which may have named files), once, and sleeps again. With a file to watch
// it polls every SecretsPoll.
func TestSecretsPollerSleepsWithoutFiles(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		newGateway := func(dests ...string) *Gateway {
			cfg := Config{SecretsPoll: 10 * time.Second, Dests: dests}
			g := &Gateway{cfg: cfg, log: slog.New(slog.DiscardHandler), stopPoll: make(chan struct{}),
				secretsWake: make(chan struct{}, 1)}
			g.pollSecrets()
			return g
		}
		stop := func(g *Gateway) {
			close(g.stopPoll)
			g.pollers.Wait()
		}
		idle := func(d time.Duration) {
			time.Sleep(d)
			synctest.Wait()
		}

		g := newGateway()
		idle(time.Hour)
		if n := g.secretPolls.Load(); n != 1 {
			t.Fatalf("%d polls in an hour without a file to read, want the first only", n)
		}
		if err := g.Reload(); err != nil {
			t.Fatal(err)
		}
		idle(time.Hour)
		if n := g.secretPolls.Load(); n != 2 {
			t.Fatalf("%d polls in the hour after a reload that named no file, want one more: 2", n)
		}
		stop(g)

		g = newGateway("name=be,endpoint=127.0.0.1:4317,bearer-token-file=" + token)
		idle(time.Hour + time.Millisecond)
		if n, want := g.secretPolls.Load(), int64(time.Hour/g.cfg.SecretsPoll); n != want {
			t.Fatalf("%d polls in an hour with a token file to watch, want %d", n, want)
		}
		stop(g)
	})
}

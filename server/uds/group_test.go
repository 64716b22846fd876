package uds

import (
	"context"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// otherGroup returns a group the process may give files to, other than its own when it can:
// any group as root, else a supplementary group, else its own.
func otherGroup(t *testing.T) *user.Group {
	t.Helper()
	gids := []int{os.Getgid()}
	if os.Geteuid() == 0 {
		gids = append([]int{1, 2, 4, 65534}, gids...)
	} else if sup, err := os.Getgroups(); err == nil {
		gids = append(sup, gids...)
	}
	for _, gid := range gids {
		if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
			return g
		}
	}
	t.Skip("no group of this process is listed in the group database")
	return nil
}

func socketGid(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Gid)
}

func TestSocketGroup(t *testing.T) {
	g := otherGroup(t)
	want, _ := strconv.Atoi(g.Gid)
	for _, name := range []string{g.Name, g.Gid} {
		t.Run(name, func(t *testing.T) {
			h := start(t, func(c *Config) { c.Group = name; c.Mode = 0o660 })
			if got := socketGid(t, h.path); got != want {
				t.Fatalf("socket group %d, want %d", got, want)
			}
			fi, _ := os.Stat(h.path)
			if fi.Mode().Perm() != 0o660 {
				t.Fatalf("mode %v", fi.Mode())
			}
			h.replay(newStream(1).init().spans("grp").buf, 0)
			h.shutdown()
			if got := spanNames(t, h.rec.Received())[1]; len(got) != 1 {
				t.Fatalf("spans %v", got)
			}
		})
	}
}

func TestSocketGroupMissing(t *testing.T) {
	for _, name := range []string{"no-such-group-otlpgate", "4294967"} {
		cfg := DefaultConfig()
		cfg.Listen = socketPath(t)
		cfg.Group = name
		_, err := New(cfg, &testkit.Recorder{}, nil)
		if err == nil || !strings.Contains(err.Error(), "group") {
			t.Fatalf("group %q: New returned %v, want an error", name, err)
		}
		if _, statErr := os.Lstat(cfg.Listen); !os.IsNotExist(statErr) {
			t.Fatalf("group %q: socket file created: %v", name, statErr)
		}
	}
	cfg := DefaultConfig()
	cfg.Group = "a\x00b"
	if cfg.Validate() == nil {
		t.Fatal("a group name with NUL passed Validate")
	}
}

// TestSocketGroupRefused: a group the process may not give files to fails Start, and leaves
// no socket behind. Only meaningful for a non-root user.
func TestSocketGroupRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may give files to any group")
	}
	mine := map[int]bool{os.Getgid(): true}
	sup, _ := os.Getgroups()
	for _, g := range sup {
		mine[g] = true
	}
	gid := -1
	for _, cand := range []int{0, 1, 2, 4} {
		if _, err := user.LookupGroupId(strconv.Itoa(cand)); err == nil && !mine[cand] {
			gid = cand
			break
		}
	}
	if gid < 0 {
		t.Skip("no foreign group in the group database")
	}
	cfg := DefaultConfig()
	cfg.Listen = socketPath(t)
	cfg.Group = strconv.Itoa(gid)
	s, err := New(cfg, &testkit.Recorder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		s.Shutdown(context.Background())
		t.Fatal("Start gave the socket to a foreign group")
	}
}

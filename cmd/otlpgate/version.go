package main

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// version and commit are set at build time from git (the Makefile's and the Dockerfile's
// -ldflags "-X main.version=... -X main.commit=..."); a plain go build or go install leaves them
// empty, and buildInfo reads what the go command recorded instead.
var version, commit string

// build identifies the running binary (-version, the start line, otlpgate_build_info).
type build struct {
	version, commit, goVersion string
}

// buildInfo is what -ldflags set, completed from the module version and the VCS settings the go
// command stamps into the binary (a module version from go install pkg@v1.2.3; vcs.revision
// and vcs.modified when built in a git checkout).
func buildInfo() build {
	bi, ok := debug.ReadBuildInfo()
	return buildFrom(version, commit, bi, ok)
}

// buildFrom is buildInfo's decision, for the -ldflags values v and c and what the go command
// stamped (bi, when ok).
func buildFrom(v, c string, bi *debug.BuildInfo, ok bool) build {
	b := build{version: v, commit: c, goVersion: runtime.Version()}
	if ok && b.version == "" && bi.Main.Version != "" {
		b.version = bi.Main.Version // "(devel)" when the go command knew none
	}
	if ok && b.commit == "" {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && b.commit != "" {
			b.commit += "-dirty"
		}
	}
	if b.version == "" {
		b.version = "unknown"
	}
	if b.commit == "" {
		b.commit = "unknown"
	}
	return b
}

func (b build) String() string {
	return "otlpgate " + b.version + " (commit " + b.commit + ", " + b.goVersion + ")"
}

var buildInfoGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "otlpgate_build_info",
	Help: "1, labelled with the version, the commit and the Go release otlpgate was built from (otlpgate -version)",
}, []string{"version", "commit", "goversion"})

// export sets otlpgate_build_info.
func (b build) export() {
	buildInfoGauge.WithLabelValues(b.version, b.commit, b.goVersion).Set(1)
}
